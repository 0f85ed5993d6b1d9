/* tests/test_text.c — util/text.h: which strings are clean, and how the others are shown. */
#include "tests/testutil.h"

#include "util/text.h"

static void test_clean(void **state) {
    assert_true(nb_text_clean(""));
    assert_true(nb_text_clean("plain --batch 4"));
    assert_true(nb_text_clean("β=0.5 ✓ 𝔼"));   /* 2-, 3- and 4-byte UTF-8 */
    assert_true(nb_text_clean("back\\slash")); /* a backslash is ordinary text */
    assert_false(nb_text_clean("a\nb"));       /* C0 */
    assert_false(nb_text_clean("a\tb"));
    assert_false(nb_text_clean("\x1b[31m"));
    assert_false(nb_text_clean("del\x7f"));
    assert_false(nb_text_clean("c1 \xc2\x9b"));      /* U+009B, a C1 control (CSI) */
    assert_false(nb_text_clean("caf\xe9"));          /* Latin-1, not UTF-8 */
    assert_false(nb_text_clean("\xc0\xaf"));         /* overlong '/' */
    assert_false(nb_text_clean("\xed\xa0\x80"));     /* a surrogate */
    assert_false(nb_text_clean("\xf4\x90\x80\x80")); /* above U+10FFFF */
    assert_false(nb_text_clean("cut \xe2\x82"));     /* truncated sequence */
}

static void test_escape(void **state) {
    char out[64];
    assert_string_equal(nb_escape(out, sizeof out, "plain β"), "plain β");
    assert_string_equal(nb_escape(out, sizeof out, "v\n!touch x\r\t#"), "v\\n!touch x\\r\\t#");
    assert_string_equal(nb_escape(out, sizeof out, "\x1b]0;t\x07"), "\\x1b]0;t\\x07");
    assert_string_equal(nb_escape(out, sizeof out,
                                  "\xc2\x9b"
                                  "2J"),
                        "\\xc2\\x9b2J");
    assert_string_equal(nb_escape(out, sizeof out, "caf\xe9!"), "caf\\xe9!");
    assert_string_equal(nb_escape(out, sizeof out, NULL), "");
    /* cut at a boundary: never half an escape or half a character */
    char small[6];
    assert_string_equal(nb_escape(small, sizeof small, "ab\ncd"), "ab\\nc");
    assert_string_equal(nb_escape(small, sizeof small, "abcd\x1b"), "abcd");
    assert_string_equal(nb_escape(small, sizeof small, "abcdβ"), "abcd");
    /* buffer and file forms agree */
    nb_buf b = {0};
    nb_buf_escaped(&b, "x\x01y");
    assert_string_equal(b.p, "x\\x01y");
    nb_buf_free(&b);
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    assert_non_null(f);
    nb_fputs_escaped(f, "x\x01y\n");
    fclose(f);
    assert_string_equal(mem, "x\\x01y\\n");
    free(mem);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean),
        cmocka_unit_test(test_escape),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
