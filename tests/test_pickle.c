/* tests/test_pickle.c — datasets/pickle.c on pickles that Python writes (protocols 0, 1, 2; Python
 * 2 and 3 string opcodes), on what it must refuse, on every truncation and on random damage; and
 * datasets/top4.c: conversion of a small generated top4 folder, its cache, a stale or damaged
 * cache, a missing file. */
#include "tests/testutil.h"

#include <sys/stat.h>
#include <unistd.h>

#include "datasets/cloze.h"
#include "datasets/pickle.h"

/* Written by Python's pickle.dumps (see the commit that added this file). */
static const char lists0[] =
    "\x28\x6c\x70\x30\x0a\x28\x6c\x70\x31\x0a\x49\x35\x0a\x61\x49\x31\x0a\x61\x61\x28\x6c\x70\x32"
    "\x0a\x49\x37\x0a\x61\x49\x33\x30\x30\x0a\x61\x49\x37\x30\x30\x30\x30\x0a\x61\x49\x31\x0a\x61"
    "\x61\x28\x6c\x70\x33\x0a\x49\x32\x0a\x61\x49\x31\x0a\x61\x61\x2e";
static const char lists2[] =
    "\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x28\x4b\x05\x4b\x01\x65\x5d\x71\x02\x28\x4b\x07\x4d\x2c"
    "\x01\x4a\x70\x11\x01\x00\x4b\x01\x65\x5d\x71\x03\x28\x4b\x02\x4b\x01\x65\x65\x2e";
static const char dict0[] = "\x28\x64\x70\x30\x0a\x56\x40\x65\x6e\x74\x69\x74\x79\x31\x0a\x70\x31"
                            "\x0a\x49\x34\x0a\x73\x56\x74\x68\x65\x0a\x70\x32\x0a\x49\x35\x0a\x73"
                            "\x56\x69\x74\x27\x73\x0a\x70\x33\x0a\x49\x36\x0a\x73\x2e";
static const char dict2[] = "\x80\x02\x7d\x71\x00\x28\x58\x08\x00\x00\x00\x40\x65\x6e\x74\x69\x74"
                            "\x79\x31\x71\x01\x4b\x04\x58\x03\x00\x00\x00\x74\x68\x65\x71\x02\x4b"
                            "\x05\x58\x04\x00\x00\x00\x69\x74\x27\x73\x71\x03\x4b\x06\x75\x2e";
static const char lists1[] =
    "\x5d\x71\x00\x28\x5d\x71\x01\x28\x4b\x05\x4b\x01\x65\x5d\x71\x02\x28\x4b\x07\x4d\x2c\x01\x4a"
    "\x70\x11\x01\x00\x4b\x01\x65\x5d\x71\x03\x28\x4b\x02\x4b\x01\x65\x65\x2e";
static const char t_dict[] =
    "\x28\x64\x70\x30\x0a\x56\x3c\x65\x6f\x73\x3e\x0a\x70\x31\x0a\x49\x31\x0a\x73\x56\x74\x68\x65"
    "\x0a\x70\x32\x0a\x49\x32\x0a\x73\x56\x40\x65\x6e\x74\x69\x74\x79\x30\x0a\x70\x33\x0a\x49\x33"
    "\x0a\x73\x56\x40\x65\x6e\x74\x69\x74\x79\x31\x0a\x70\x34\x0a\x49\x34\x0a\x73\x56\x63\x61\x74"
    "\x0a\x70\x35\x0a\x49\x35\x0a\x73\x56\x40\x70\x6c\x61\x63\x65\x68\x6f\x6c\x64\x65\x72\x0a\x70"
    "\x36\x0a\x49\x36\x0a\x73\x2e";
static const char tr_pass[] = "\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x28\x4b\x02\x4b\x03\x4b\x05\x4b"
                              "\x01\x65\x5d\x71\x02\x28\x4b\x04\x4b\x02\x4b\x01\x65\x5d\x71\x03\x28"
                              "\x4b\x05\x4b\x05\x4b\x03\x4b\x04\x4b\x01\x65\x65\x2e";
static const char tr_qs[] =
    "\x28\x6c\x70\x30\x0a\x28\x6c\x70\x31\x0a\x49\x36\x0a\x61\x49\x35\x0a\x61\x49\x31\x0a\x61\x61"
    "\x28\x6c\x70\x32\x0a\x49\x32\x0a\x61\x49\x36\x0a\x61\x49\x31\x0a\x61\x61\x28\x6c\x70\x33\x0a"
    "\x49\x36\x0a\x61\x49\x31\x0a\x61\x61\x2e";
static const char tr_ans[] =
    "\x28\x6c\x70\x30\x0a\x28\x6c\x70\x31\x0a\x49\x33\x0a\x61\x61\x28\x6c\x70\x32\x0a\x49\x34\x0a"
    "\x61\x61\x28\x6c\x70\x33\x0a\x49\x34\x0a\x61\x61\x2e";
static const char va_pass[] = "\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x28\x4b\x03\x4b\x04\x4b\x01\x65"
                              "\x5d\x71\x02\x28\x4b\x02\x4b\x02\x4b\x02\x4b\x01\x65\x65\x2e";
static const char va_qs[] =
    "\x28\x6c\x70\x30\x0a\x28\x6c\x70\x31\x0a\x49\x36\x0a\x61\x49\x32\x0a\x61\x49\x31\x0a\x61\x61"
    "\x28\x6c\x70\x32\x0a\x49\x35\x0a\x61\x49\x36\x0a\x61\x49\x31\x0a\x61\x61\x2e";
static const char va_ans[] = "\x28\x6c\x70\x30\x0a\x28\x6c\x70\x31\x0a\x49\x34\x0a\x61\x61\x28\x6c"
                             "\x70\x32\x0a\x49\x33\x0a\x61\x61\x2e";
static const char dict_py2_0[] =
    "(dp0\nS'@entity1'\np1\nI4\nsS'the'\np2\nI5\nsS\"it's\"\np3\nI6\ns.";
static const char dict_py2_2[] =
    "\x80\x02}q\x00(U\x08@entity1q\x01K\x04U\x03theq\x02K\x05U\x04it'sq\x03K\x06u.";
static const char lists_long[] = "(lp0\n(lp1\nL5L\naI1\naa.";

#define PARSE(lit, out, err) nb_pickle_parse((const uint8_t *)(lit), sizeof(lit) - 1, "t", out, err)

static void check_lists(const nb_pickle *p) {
    static const int32_t want[] = {5, 1, 7, 300, 70000, 1, 2, 1};
    static const int64_t off[] = {0, 2, 6, 8};
    assert_int_equal(p->kind, NB_PICKLE_LISTS);
    assert_int_equal(p->n, 3);
    for (int i = 0; i < 4; i++)
        assert_int_equal(p->off[i], off[i]);
    for (int i = 0; i < 8; i++)
        assert_int_equal(p->tok[i], want[i]);
}

static void check_dict(const nb_pickle *p) {
    assert_int_equal(p->kind, NB_PICKLE_DICT);
    assert_int_equal(p->n, 3);
    assert_string_equal(p->keys + p->koff[0], "@entity1");
    assert_int_equal(p->val[0], 4);
    assert_string_equal(p->keys + p->koff[1], "the");
    assert_int_equal(p->val[1], 5);
    assert_string_equal(p->keys + p->koff[2], "it's");
    assert_int_equal(p->klen[2], 4);
    assert_int_equal(p->val[2], 6);
}

static void test_valid(void **s) {
    (void)s;
    nb_pickle p;
    nb_err err;
    const char *lists[] = {lists0, lists1, lists2};
    size_t lsz[] = {sizeof lists0 - 1, sizeof lists1 - 1, sizeof lists2 - 1};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nb_pickle_parse((const uint8_t *)lists[i], lsz[i], "t", &p, &err), 0);
        check_lists(&p);
        nb_pickle_free(&p);
    }
    const char *dicts[] = {dict0, dict2, dict_py2_0, dict_py2_2};
    size_t dsz[] = {sizeof dict0 - 1, sizeof dict2 - 1, sizeof dict_py2_0 - 1,
                    sizeof dict_py2_2 - 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(nb_pickle_parse((const uint8_t *)dicts[i], dsz[i], "t", &p, &err), 0);
        check_dict(&p);
        nb_pickle_free(&p);
    }
    assert_int_equal(PARSE(lists_long, &p, &err), 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.tok[0], 5);
    nb_pickle_free(&p);
    /* escapes in protocol-0 strings */
    assert_int_equal(PARSE("(dp0\nS'a\\'b\\x41\\\\'\np1\nI1\ns.", &p, &err), 0);
    assert_string_equal(p.keys, "a'bA\\");
    nb_pickle_free(&p);
    assert_int_equal(PARSE("(dp0\nV\\u00e9t\\u00e9\np1\nI1\ns.", &p, &err), 0);
    assert_string_equal(p.keys, "\xc3\xa9t\xc3\xa9");
    nb_pickle_free(&p);
}

static void refused(const char *buf, size_t n, const char *needle) {
    nb_pickle p;
    nb_err err;
    nb_err_clear(&err);
    assert_int_equal(nb_pickle_parse((const uint8_t *)buf, n, "x.pkl", &p, &err), -1);
    assert_null(p.off);
    assert_null(p.keys);
    if (!strstr(err.msg, needle) || !strstr(err.msg, "'x.pkl'")) {
        print_error("message '%s' lacks '%s'\n", err.msg, needle);
        fail();
    }
    assert_true(err.hint[0] != 0);
}
#define REFUSED(lit, needle) refused(lit, sizeof(lit) - 1, needle)

static void test_refused(void **s) {
    (void)s;
    REFUSED("(lp0\nF1.5\na.", "opcode 0x46"); /* float */
    REFUSED("(lp0\n)a.", "opcode 0x29");      /* tuple */
    REFUSED("(lp0\nNa.", "opcode 0x4e");      /* None */
    REFUSED("cos\nsystem\n.", "opcode 0x63"); /* a global */
    REFUSED("\x80\x03]q\x00.", "protocol above 2");
    REFUSED("(lp0\n(lp1\nI-1\naa.", "outside"); /* negative id */
    REFUSED("(lp0\n(lp1\nI99999999999\naa.", "outside");
    REFUSED("(lp0\n(lp1\n(lp2\nI1\naaa.", "deeper"); /* three levels */
    REFUSED("(lp0\n(lp1\nI1\naaI2\na.", "mixing");   /* [[1], 2] */
    REFUSED("(lp0\nI1\naI2\na.", "list of ints at the top");
    REFUSED("(lp0\n(lp1\nI1\naa.X", "after the end");
    REFUSED("(lp0\n(lp1\nI1\naa", "no STOP");
    REFUSED("(dp0\nI1\nI2\ns.", "key that is not a string");
    REFUSED("(dp0\nS'a'\nS'b'\ns.", "value that is not an int");
    REFUSED("(lp0\nI1\n.", "does not end with one list");
    REFUSED("(lp0\ng5\na.", "empty memo slot");
    REFUSED("(dp0\nS'a\\q'\nI1\ns.", "escape");
    REFUSED("(dp0\nSabc\nI1\ns.", "not quoted");
    /* a list receiving ints after a later list started: [[1, <later> 3], [2]] via the memo */
    REFUSED("(lp0\n(lp1\nI1\naa(lp2\nI2\naag1\nI3\na.", "earlier list");
}

/* Every proper prefix of a valid pickle is refused cleanly; random byte damage never crashes, and
 * whatever it accepts is well formed. */
static void test_damaged(void **s) {
    (void)s;
    const char *all[] = {lists0, lists1, lists2, dict0, dict2, dict_py2_0, dict_py2_2};
    size_t sz[] = {sizeof lists0 - 1, sizeof lists1 - 1,     sizeof lists2 - 1,    sizeof dict0 - 1,
                   sizeof dict2 - 1,  sizeof dict_py2_0 - 1, sizeof dict_py2_2 - 1};
    nb_pickle p;
    nb_err err;
    for (int k = 0; k < 7; k++)
        for (size_t n = 0; n < sz[k]; n++)
            assert_int_equal(nb_pickle_parse((const uint8_t *)all[k], n, "t", &p, &err), -1);
    uint64_t st = 12345;
    int accepted = 0;
    for (int trial = 0; trial < 20000; trial++) {
        int k = trial % 7;
        uint8_t buf[128];
        memcpy(buf, all[k], sz[k]);
        int flips = 1 + trial % 3;
        for (int f = 0; f < flips; f++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            buf[(st >> 33) % sz[k]] = (uint8_t)(st >> 17);
        }
        if (nb_pickle_parse(buf, sz[k], "t", &p, &err) == 0) {
            accepted++;
            if (p.kind == NB_PICKLE_LISTS) {
                assert_int_equal(p.off[0], 0);
                for (int64_t i = 0; i < p.n; i++)
                    assert_true(p.off[i + 1] >= p.off[i]);
                for (int64_t i = 0; i < p.off[p.n]; i++)
                    assert_true(p.tok[i] >= 0);
            } else {
                for (int64_t i = 0; i < p.n; i++)
                    assert_int_equal((int)strlen(p.keys + p.koff[i]) <= p.klen[i], 1);
            }
            nb_pickle_free(&p);
        } else {
            assert_true(err.msg[0] != 0);
        }
    }
    assert_true(accepted < 20000);
}

/* ---- top4 ---------------------------------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const char *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}
#define WRITE(dir, name, lit) write_file(dir, name, lit, sizeof(lit) - 1)

static void make_top4(char *root, char *dir) {
    snprintf(root, 64, "%s", "/tmp/nb-top4-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(dir, 256, "%s/cnn-top4", root);
    assert_int_equal(mkdir(dir, 0755), 0);
    WRITE(dir, "dict.pkl", t_dict);
    WRITE(dir, "train4_pass.pkl", tr_pass);
    WRITE(dir, "train4_qs.pkl", tr_qs);
    WRITE(dir, "train4_ans.pkl", tr_ans);
    WRITE(dir, "valid4_pass.pkl", va_pass);
    WRITE(dir, "valid4_qs.pkl", va_qs);
    WRITE(dir, "valid4_ans.pkl", va_ans);
}

static void check_top4(const nb_cloze *c) {
    assert_int_equal(c->V, 7);
    assert_int_equal(c->nents, 2);
    assert_int_equal(c->train.n, 3);
    assert_int_equal(c->val.n, 2);
    /* the end token dropped */
    static const int64_t doff[] = {0, 3, 5, 9};
    static const int32_t dtok[] = {2, 3, 5, 4, 2, 5, 5, 3, 4};
    for (int i = 0; i < 4; i++)
        assert_int_equal(c->train.doff[i], doff[i]);
    for (int i = 0; i < 9; i++)
        assert_int_equal(c->train.dtok[i], dtok[i]);
    assert_int_equal(c->train.maxd, 4);
    assert_int_equal(c->train.maxq, 2);
    assert_int_equal(c->train.ans[0], 3);
    assert_int_equal(c->val.ans[1], 3);
    assert_int_equal(c->val.qtok[c->val.qoff[1]], 5);
    /* batch preparation: T = max + 1, cyclic [s, 0] padding, real lengths */
    int tokd[3 * 5], lend[3], TD, tokq[3 * 3], lenq[3], TQ, ans[3];
    nb_cloze_batch(&c->train, 0, 3, NULL, tokd, lend, &TD, tokq, lenq, &TQ, ans);
    assert_int_equal(TD, 5);
    assert_int_equal(TQ, 3);
    static const int want_d[] = {2, 3, 5, 0, 2, 4, 2, 0, 4, 2, 5, 5, 3, 4, 0};
    for (int i = 0; i < 15; i++)
        assert_int_equal(tokd[i], want_d[i]);
    assert_int_equal(lend[1], 2);
    assert_int_equal(lenq[2], 1);
    assert_int_equal(tokq[2 * 3 + 1], 0);
    assert_int_equal(tokq[2 * 3 + 2], 6);
    /* an entity permutation maps entities among themselves and nothing else */
    int32_t perm[7];
    nb_rng r;
    nb_rng_seed(&r, 3, 1);
    int swapped = 0;
    for (int t = 0; t < 20; t++) {
        nb_cloze_entity_perm(c, perm, &r);
        for (int i = 0; i < 7; i++)
            if (i != 3 && i != 4) assert_int_equal(perm[i], i);
        assert_true((perm[3] == 3 && perm[4] == 4) || (perm[3] == 4 && perm[4] == 3));
        swapped += perm[3] == 4;
    }
    assert_true(swapped > 0 && swapped < 20);
}

static void test_top4(void **s) {
    (void)s;
    char root[64], dir[256], path[512];
    make_top4(root, dir);
    nb_cloze c;
    nb_err err;
    assert_int_equal(nb_cloze_load(&c, "cnn-top4", root, 0, 1, &err), 0);
    assert_non_null(strstr(c.source, "converted"));
    check_top4(&c);
    nb_cloze_free(&c);
    /* the second load reads the cache */
    snprintf(path, sizeof path, "%s/cache-v1.bin", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(nb_cloze_load(&c, "cnn-top4", root, 0, 1, &err), 0);
    assert_non_null(strstr(c.source, "cache"));
    check_top4(&c);
    nb_cloze_free(&c);
    /* a damaged cache is not used: the pickles are converted again */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 40, SEEK_SET);
    fputc(0x7f, f);
    fclose(f);
    assert_int_equal(nb_cloze_load(&c, "cnn-top4", root, 0, 1, &err), 0);
    assert_non_null(strstr(c.source, "converted"));
    check_top4(&c);
    nb_cloze_free(&c);
    /* a truncated pickle: a clear error naming it */
    write_file(dir, "valid4_qs.pkl", va_qs, sizeof va_qs - 5);
    assert_int_equal(nb_cloze_load(&c, "cnn-top4", root, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "valid4_qs.pkl"));
    /* mismatched counts */
    WRITE(dir, "valid4_qs.pkl", tr_qs);
    assert_int_equal(nb_cloze_load(&c, "cnn-top4", root, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "disagree"));
    /* a missing file names the path and hints the fetch */
    snprintf(path, sizeof path, "%s/train4_ans.pkl", dir);
    unlink(path);
    assert_int_equal(nb_cloze_load(&c, "cnn-top4", root, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "train4_ans.pkl"));
    assert_non_null(strstr(err.hint, "normbench fetch cnn-top4"));
    const char *names[] = {"dict.pkl",      "train4_pass.pkl", "train4_qs.pkl", "valid4_pass.pkl",
                           "valid4_qs.pkl", "valid4_ans.pkl",  "cache-v1.bin"};
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    rmdir(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_damaged),
        cmocka_unit_test(test_top4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
