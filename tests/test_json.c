/* tests/test_json.c — util/json.h's reader: the configuration objects normbench writes read back
 * member by member, and malformed or hostile input refused without a crash, with what was read
 * before the fault kept. */
#include "tests/testutil.h"

#include "util/json.h"

static void test_reads_members(void **state) {
    nb_json_object o;
    const char *j = "{\"task\": \"mnist\", \"norm\": \"batch\", \"eps\": 1e-05, \"ranks\": 4, "
                    "\"hosts\": [\"a\", \"b,c\"], \"opt\": {\"x\": [1, {\"y\": \"}\"}]}, "
                    "\"esc\": \"q\\\"\\\\\\/\\n\\t\\u00e9\\u20ac\\u0000\", \"none\": null}";
    assert_int_equal(nb_json_read_object(j, &o), 0);
    assert_int_equal(o.n, 8);
    assert_string_equal(nb_json_get_str(&o, "task"), "mnist");
    assert_string_equal(nb_json_get_str(&o, "norm"), "batch");
    assert_string_equal(nb_json_get(&o, "eps"), "1e-05");
    assert_null(nb_json_get_str(&o, "eps")); /* a number, not a string */
    assert_string_equal(nb_json_get(&o, "hosts"), "[\"a\", \"b,c\"]");
    assert_string_equal(nb_json_get(&o, "opt"), "{\"x\": [1, {\"y\": \"}\"}]}");
    assert_string_equal(nb_json_get_str(&o, "esc"), "q\"\\/\n\t\xc3\xa9\xe2\x82\xac?");
    assert_string_equal(nb_json_get(&o, "none"), "null");
    assert_null(nb_json_get(&o, "absent"));
    long long v = 0;
    assert_int_equal(nb_json_get_int(&o, "ranks", &v), 1);
    assert_int_equal(v, 4);
    v = 7;
    assert_int_equal(nb_json_get_int(&o, "eps", &v), 0); /* not an integer */
    assert_int_equal(nb_json_get_int(&o, "task", &v), 0);
    assert_int_equal(nb_json_get_int(&o, "absent", &v), 0);
    assert_int_equal(v, 7);
    assert_string_equal(o.kv[0].key, "task"); /* in the order written */
    assert_string_equal(o.kv[7].key, "none");
    nb_json_object_free(&o);

    /* white space anywhere JSON allows it; the empty object */
    assert_int_equal(nb_json_read_object(" \n{ \"a\" :\t-12 ,\"b\":\"\" }\r\n", &o), 0);
    assert_int_equal(o.n, 2);
    assert_int_equal(nb_json_get_int(&o, "a", &v), 1);
    assert_int_equal(v, -12);
    assert_string_equal(nb_json_get_str(&o, "b"), "");
    nb_json_object_free(&o);
    assert_int_equal(nb_json_read_object("{}", &o), 0);
    assert_int_equal(o.n, 0);
    nb_json_object_free(&o);
}

/* The spacing of the writer does not matter (resume used to match ', "norm": "batch"'). */
static void test_spacing_independent(void **state) {
    nb_json_object o;
    assert_int_equal(nb_json_read_object("{\"norm\":\"batch\",\"ranks\":2}", &o), 0);
    assert_string_equal(nb_json_get_str(&o, "norm"), "batch");
    long long v = 0;
    assert_int_equal(nb_json_get_int(&o, "ranks", &v), 1);
    assert_int_equal(v, 2);
    nb_json_object_free(&o);
    /* a nested "norm" is not the top-level one; a string holding the pattern neither */
    assert_int_equal(nb_json_read_object("{\"x\": {\"norm\": \"batch\"}, \"y\": \", \\\"norm\\\": "
                                         "\\\"batch\\\"\", \"norm\": \"layer\"}",
                                         &o),
                     0);
    assert_string_equal(nb_json_get_str(&o, "norm"), "layer");
    nb_json_object_free(&o);
}

static void test_integers(void **state) {
    const char *bad[] = {"1.0",  "1e3", "01", "-", "--1", "+1", "99999999999999999999",
                         "0x10", "true"};
    const char *good[] = {"0", "-0", "9223372036854775807", "-9223372036854775808"};
    char j[128];
    nb_json_object o;
    long long v;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(j, sizeof j, "{\"k\": %s}", bad[i]);
        nb_json_read_object(j, &o);
        assert_int_equal(nb_json_get_int(&o, "k", &v), 0);
        nb_json_object_free(&o);
    }
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        snprintf(j, sizeof j, "{\"k\": %s}", good[i]);
        assert_int_equal(nb_json_read_object(j, &o), 0);
        assert_int_equal(nb_json_get_int(&o, "k", &v), 1);
        assert_int_equal(v, strtoll(good[i], NULL, 10));
        nb_json_object_free(&o);
    }
}

/* Malformed input: -1, nothing leaked or overrun (run under ASan), what came before kept. */
static void test_malformed(void **state) {
    const char *bad[] = {NULL,
                         "",
                         "[]",
                         "\"a\"",
                         "{",
                         "{\"a\"",
                         "{\"a\":",
                         "{\"a\": }",
                         "{\"a\": 1,}",
                         "{\"a\": 1",
                         "{\"a\": \"x}",
                         "{\"a\": \"\\",
                         "{\"a\": \"\\u12\"}",
                         "{\"a\": \"\\uZZZZ\"}",
                         "{\"a\": [1, 2}",
                         "{\"a\": {\"b\": 1}",
                         "{\"a\": 1} x",
                         "{\"a\" 1}",
                         "{a: 1}",
                         "{\"a\": 1 \"b\": 2}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nb_json_object o;
        if (nb_json_read_object(bad[i], &o) != -1) fail_msg("accepted: %s", bad[i]);
        nb_json_object_free(&o);
    }
    nb_json_object o;
    assert_int_equal(nb_json_read_object("{\"a\": 1, \"b\": \"2\", \"c\": \"unclosed", &o), -1);
    assert_int_equal(o.n, 2); /* the members before the fault */
    assert_string_equal(nb_json_get_str(&o, "b"), "2");
    nb_json_object_free(&o);
}

/* Hostile sizes: a million nested brackets (no recursion, no stack), a long key, many members. */
static void test_hostile(void **state) {
    size_t depth = 1000000;
    char *j = malloc(2 * depth + 32);
    assert_non_null(j);
    size_t k = (size_t)sprintf(j, "{\"deep\": ");
    memset(j + k, '[', depth);
    memset(j + k + depth, ']', depth);
    strcpy(j + k + 2 * depth, "}");
    nb_json_object o;
    assert_int_equal(nb_json_read_object(j, &o), 0);
    assert_int_equal(strlen(nb_json_get(&o, "deep")), 2 * depth);
    nb_json_object_free(&o);
    j[k + 2 * depth - 1] = ' '; /* one bracket not closed */
    assert_int_equal(nb_json_read_object(j, &o), -1);
    nb_json_object_free(&o);
    free(j);

    nb_buf b = {0};
    nb_buf_puts(&b, "{");
    for (int i = 0; i < 20000; i++)
        nb_buf_printf(&b, "%s\"k%d\": %d", i ? ", " : "", i, i);
    nb_buf_puts(&b, "}");
    assert_false(b.oom);
    assert_int_equal(nb_json_read_object(b.p, &o), 0);
    assert_int_equal(o.n, 20000);
    long long v = 0;
    assert_int_equal(nb_json_get_int(&o, "k19999", &v), 1);
    assert_int_equal(v, 19999);
    nb_json_object_free(&o);
    nb_buf_free(&b);
}

/* What the writer writes, the reader reads back. */
static void test_round_trip(void **state) {
    const char *vals[] = {"plain", "quote\" back\\ slash", "ctl\x01\x1f\n\r\t",
                          "utf-8 \xc3\xa9\xe2\x82\xac", ""};
    nb_buf b = {0};
    nb_buf_puts(&b, "{");
    for (int i = 0; i < 5; i++) {
        nb_buf_printf(&b, "%s\"v%d\": ", i ? ", " : "", i);
        nb_buf_json_str(&b, vals[i]);
    }
    nb_buf_puts(&b, ", \"x\": ");
    nb_buf_json_num(&b, 0.1);
    nb_buf_puts(&b, "}");
    nb_json_object o;
    assert_int_equal(nb_json_read_object(b.p, &o), 0);
    char key[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "v%d", i);
        assert_string_equal(nb_json_get_str(&o, key), vals[i]);
    }
    assert_true(strtod(nb_json_get(&o, "x"), NULL) == 0.1);
    nb_json_object_free(&o);
    nb_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_members), cmocka_unit_test(test_spacing_independent),
        cmocka_unit_test(test_integers),      cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_hostile),       cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
