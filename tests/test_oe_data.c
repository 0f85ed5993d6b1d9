/* tests/test_oe_data.c — datasets/npy.c and datasets/coco.c on generated files, good and damaged:
 * .npy headers (v1/v2, padding, alignment, dtype, order, shape) and data lengths, caption text,
 * the vocabulary's order and unknown words, the coco-oe loader's checks (5 captions per image,
 * missing files named with a hint) and the synthetic dataset. */
#include "tests/testutil.h"
#include "datasets/coco.h"
#include "datasets/npy.h"
#include "tasks/order.h"

#include <sys/stat.h>
#include <unistd.h>

/* A .npy image: version v, header dict text, padded to align, then data bytes. */
static size_t make_npy(uint8_t *buf, int v, const char *dict, int align, const void *data,
                       size_t nbytes) {
    size_t pre = v == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = pre + dl + 1;
    while (total % align)
        total++;
    size_t hlen = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)v;
    buf[7] = 0;
    if (v == 1) {
        buf[8] = (uint8_t)(hlen & 0xff);
        buf[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++)
            buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memcpy(buf + pre, dict, dl);
    memset(buf + pre + dl, ' ', hlen - dl - 1);
    buf[total - 1] = '\n';
    if (nbytes) memcpy(buf + total, data, nbytes);
    return total + nbytes;
}

static const char *const good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

static void test_npy_good(void **s) {
    (void)s;
    uint8_t buf[512];
    float x[6] = {0, 1, 2, 3.5f, -4, 5};
    nb_npy a;
    nb_err err;
    for (int v = 1; v <= 2; v++)
        for (int align = 16; align <= 64; align *= 4) {
            size_t n = make_npy(buf, v, good_dict, align, x, sizeof x);
            assert_int_equal(nb_npy_parse(buf, n, &a, &err), 0);
            assert_int_equal(a.ndim, 2);
            assert_int_equal((int)a.shape[0], 2);
            assert_int_equal((int)a.shape[1], 3);
            assert_int_equal((int)a.count, 6);
            assert_memory_equal(a.data, x, sizeof x);
            nb_npy_free(&a);
        }
    /* keys in another order, Python 2 longs, 1-d and 0-d shapes */
    const char *dicts[] = {"{'shape': (2L, 3L), 'fortran_order': False, 'descr': '<f4'}",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
                           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1, 6)}"};
    for (int i = 0; i < 3; i++) {
        size_t n = make_npy(buf, 1, dicts[i], 64, x, sizeof x);
        assert_int_equal(nb_npy_parse(buf, n, &a, &err), 0);
        assert_int_equal((int)a.count, 6);
        nb_npy_free(&a);
    }
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 64, x, 4);
    assert_int_equal(nb_npy_parse(buf, n, &a, &err), 0);
    assert_int_equal(a.ndim, 0);
    assert_int_equal((int)a.count, 1);
    nb_npy_free(&a);
}

static void expect_bad(const uint8_t *buf, size_t n, const char *what) {
    nb_npy a;
    nb_err err;
    nb_err_clear(&err);
    if (nb_npy_parse(buf, n, &a, &err) == 0) {
        nb_npy_free(&a);
        fail_msg("accepted a damaged .npy: %s", what);
    }
    assert_true(err.msg[0] != 0);
    assert_null(a.data);
}

static void test_npy_bad(void **s) {
    (void)s;
    uint8_t buf[512];
    float x[6] = {0};
    size_t n = make_npy(buf, 1, good_dict, 64, x, sizeof x);
    for (size_t cut = 0; cut < n; cut += 7)
        expect_bad(buf, cut, "truncated");
    uint8_t more[600];
    memcpy(more, buf, n);
    more[n] = 0;
    expect_bad(more, n + 1, "a trailing byte");
    const char *bad[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,2,3,4,5,6,7,8,9)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = make_npy(buf, 1, bad[i], 64, x, sizeof x);
        expect_bad(buf, n, bad[i]);
    }
    /* misaligned header, wrong magic, version 3, NaN data, non-ASCII in the header */
    n = make_npy(buf, 1, good_dict, 4, x, 0);
    if (n % 16) {
        memcpy(buf + n, x, sizeof x);
        expect_bad(buf, n + sizeof x, "unaligned data");
    }
    n = make_npy(buf, 1, good_dict, 64, x, sizeof x);
    buf[1] = 'M';
    expect_bad(buf, n, "bad magic");
    n = make_npy(buf, 1, good_dict, 64, x, sizeof x);
    buf[6] = 3;
    expect_bad(buf, n, "version 3");
    float y[6] = {0, 1, NAN, 3, 4, 5};
    n = make_npy(buf, 1, good_dict, 64, y, sizeof y);
    expect_bad(buf, n, "NaN");
    n = make_npy(buf, 1, good_dict, 64, x, sizeof x);
    buf[20] = 0x01;
    expect_bad(buf, n, "control byte in the header");
    n = make_npy(buf, 1, good_dict, 64, x, sizeof x);
    buf[n - sizeof x - 1] = ' '; /* header without its newline */
    expect_bad(buf, n, "no newline");
}

static char tmpdir[256];

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_npy_file(void **s) {
    (void)s;
    uint8_t buf[512];
    float x[6] = {1, 2, 3, 4, 5, 6};
    size_t n = make_npy(buf, 1, good_dict, 64, x, sizeof x);
    char p[512];
    snprintf(p, sizeof p, "%s/a.npy", tmpdir);
    write_file(p, buf, n);
    nb_npy a;
    nb_err err;
    assert_int_equal(nb_npy_load(p, 0, &a, &err), 0);
    assert_memory_equal(a.data, x, sizeof x);
    nb_npy_free(&a);
    assert_int_equal(nb_npy_load(p, 1, &a, &err), 0); /* first row only */
    assert_int_equal((int)a.rows_read, 1);
    assert_memory_equal(a.data, x, 3 * sizeof(float));
    nb_npy_free(&a);
    write_file(p, buf, n - 1);
    assert_int_not_equal(nb_npy_load(p, 0, &a, &err), 0);
    assert_non_null(strstr(err.msg, p));
    snprintf(p, sizeof p, "%s/missing.npy", tmpdir);
    assert_int_not_equal(nb_npy_load(p, 0, &a, &err), 0);
    assert_non_null(strstr(err.msg, "missing.npy"));
}

static void test_captions(void **s) {
    (void)s;
    const char *txt = "a dog runs\nthe  cat\r\nsits on a mat";
    nb_captions c;
    nb_err err;
    assert_int_equal(nb_captions_parse((const uint8_t *)txt, strlen(txt), &c, &err), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.ntok, 9);
    assert_string_equal(c.tok[c.start[1] + 1], "cat");
    assert_string_equal(c.tok[c.start[2]], "sits");
    nb_captions_free(&c);
    const char *bad[] = {"a\n\nb\n", "a\x01 b\n", "", "a\rb\n", "\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(nb_captions_parse((const uint8_t *)bad[i], strlen(bad[i]), &c, &err),
                             0);
        assert_null(c.text);
    }
    uint8_t nul[] = {'a', 0, 'b', '\n'};
    assert_int_not_equal(nb_captions_parse(nul, sizeof nul, &c, &err), 0);
    char *longl = malloc(2 * (NB_CAPTION_MAX_TOKENS + 1) + 1);
    for (int i = 0; i <= NB_CAPTION_MAX_TOKENS; i++) {
        longl[2 * i] = 'w';
        longl[2 * i + 1] = ' ';
    }
    longl[2 * (NB_CAPTION_MAX_TOKENS + 1)] = 0;
    assert_int_not_equal(nb_captions_parse((const uint8_t *)longl, strlen(longl), &c, &err), 0);
    free(longl);
}

/* Vocabulary: descending count, ties by first appearance, ids from 2, unknown 1, only the first
 * ncount captions of a set counted. */
static void test_vocab(void **s) {
    (void)s;
    const char *a = "b a\na c\nc c\nzz\n", *t = "c q b\n";
    nb_captions ca, ct;
    nb_err err;
    assert_int_equal(nb_captions_parse((const uint8_t *)a, strlen(a), &ca, &err), 0);
    assert_int_equal(nb_captions_parse((const uint8_t *)t, strlen(t), &ct, &err), 0);
    const nb_captions *sets[] = {&ca};
    int ncount[] = {3}; /* "zz" is not counted */
    const nb_captions *enc[] = {&ca, &ct};
    int *ids[2];
    int V = nb_vocab_encode(sets, ncount, 1, enc, ids, 2, &err);
    assert_int_equal(V, 3 + 2); /* c (3), a (2), b (1) */
    int want_a[] = {4, 3, 3, 2, 2, 2, 1}, want_t[] = {2, 1, 4};
    assert_memory_equal(ids[0], want_a, sizeof want_a);
    assert_memory_equal(ids[1], want_t, sizeof want_t);
    free(ids[0]);
    free(ids[1]);
    nb_captions_free(&ca);
    nb_captions_free(&ct);
}

/* A tiny coco-oe directory: 2 train, 1 val, 1 test images of 3 features. */
static void make_coco(const char *root, int val_caps) {
    char p[512];
    snprintf(p, sizeof p, "%s/coco-oe", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/coco-oe/images", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/coco-oe/images/10crop", root);
    mkdir(p, 0755);
    const char *names[] = {"train", "val", "test"};
    const int nimg[] = {2, 1, 1};
    for (int i = 0; i < 3; i++) {
        uint8_t buf[512];
        float x[6] = {1, 0, 0, 0, 1, 0};
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 3), }",
                 nimg[i]);
        size_t n = make_npy(buf, 1, dict, 64, x, sizeof(float) * 3 * nimg[i]);
        snprintf(p, sizeof p, "%s/coco-oe/images/10crop/%s.npy", root, names[i]);
        write_file(p, buf, n);
        char txt[512] = "";
        size_t tl = 0;
        int nc = i == 1 ? val_caps : 5 * nimg[i];
        for (int c = 0; c < nc; c++)
            tl += (size_t)snprintf(txt + tl, sizeof txt - tl, "%s",
                                   c % 2 ? "a red dog\n" : "two cats sit\n");
        snprintf(p, sizeof p, "%s/coco-oe/%s.txt", root, names[i]);
        write_file(p, txt, strlen(txt));
    }
}

static void test_coco_loader(void **s) {
    (void)s;
    char root[300];
    snprintf(root, sizeof root, "%s/data", tmpdir);
    mkdir(root, 0755);
    nb_oe_data d;
    nb_err err;
    nb_err_clear(&err);
    assert_int_not_equal(nb_oe_data_load(&d, "coco-oe", root, 0, &err), 0);
    assert_non_null(strstr(err.msg, "coco-oe/train.txt"));
    assert_non_null(strstr(err.hint, "normbench fetch coco-oe"));
    make_coco(root, 5);
    assert_int_equal(nb_oe_data_load(&d, "coco-oe", root, 0, &err), 0);
    assert_int_equal(d.train.nimg, 2);
    assert_int_equal(d.train.ncap, 10);
    assert_int_equal(d.dev.nimg, 1);
    assert_int_equal(d.test.dim, 3);
    assert_int_equal(d.nwords, 6 + 2);
    assert_int_equal(d.maxlen, 3);
    nb_oe_data_free(&d);
    make_coco(root, 4); /* val: 4 captions for 1 image */
    assert_int_not_equal(nb_oe_data_load(&d, "coco-oe", root, 0, &err), 0);
    assert_non_null(strstr(err.msg, "val.txt"));
    assert_non_null(strstr(err.msg, "5 per image"));
}

static void test_synthetic(void **s) {
    (void)s;
    nb_oe_data d, e;
    nb_err err;
    assert_int_equal(nb_oe_data_load(&d, "synthetic", NULL, 300, &err), 0);
    assert_int_equal(d.train.nimg, 300);
    assert_int_equal(d.dev.nimg, 300);
    assert_int_equal(d.train.ncap, 1500);
    assert_int_equal(d.train.dim, 4096);
    assert_true(d.nwords > 40 && d.nwords < 80);
    for (int i = 0; i < d.train.start[d.train.ncap]; i++)
        assert_true(d.train.tok[i] >= 2 && d.train.tok[i] < d.nwords);
    /* rows are L2-normalised and non-negative */
    double ss = 0;
    for (int j = 0; j < 4096; j++) {
        assert_true(d.test.img[j] >= 0);
        ss += (double)d.test.img[j] * d.test.img[j];
    }
    assert_close(ss, 1.0, 1e-5, 0);
    /* the same data for every load; dev independent of the training split's size */
    assert_int_equal(nb_oe_data_load(&e, "synthetic", NULL, 200, &err), 0);
    assert_memory_equal(d.dev.img, e.dev.img, sizeof(float) * 4096 * 200);
    assert_memory_equal(d.train.img, e.train.img, sizeof(float) * 4096 * 200);
    nb_oe_data_free(&d);
    nb_oe_data_free(&e);
    assert_int_not_equal(nb_oe_data_load(&d, "nope", NULL, 0, &err), 0);
}

/* Retrieval metrics on a hand-made error matrix: 3 images, 15 captions. */
static void test_retrieval(void **s) {
    (void)s;
    enum { NI = 3, NC = 15 };
    float E[NC * NI];
    /* caption c's errors: its own image gets err_own[c], the others 0.5 and 0.6 */
    const float own[NC] = {0.1f,  0.7f, 0.1f, 0.1f, 0.1f,   /* image 0: rank 0 except caption 1 */
                           0.55f, 0.7f, 0.9f, 0.9f, 0.9f,   /* image 1: ranks 1, 2, 2, 2, 2 */
                           0.7f,  0.7f, 0.7f, 0.7f, 0.05f}; /* image 2: ranks 2, 2, 2, 2, 0 */
    for (int c = 0; c < NC; c++)
        for (int j = 0; j < NI; j++)
            E[c * NI + j] = j == c / 5 ? own[c] : (j == (c / 5 + 1) % NI ? 0.5f : 0.6f);
    int rk[NC];
    double cap[NB_RET_COUNT], img[NB_RET_COUNT];
    nb_order_retrieval(E, NC, NI, rk, cap, img);
    /* image retrieval ranks: 0,2,0,0,0, 1,2,2,2,2, 2,2,2,2,0 */
    assert_close(img[NB_RET_R1], 100.0 * 5 / 15, 1e-9, 0);
    assert_close(img[NB_RET_R5], 100.0, 1e-9, 0);
    assert_close(img[NB_RET_MEDR], 2 + 1, 1e-9, 0);
    assert_close(img[NB_RET_MEANR], 19.0 / 15 + 1, 1e-9, 0);
    /* caption retrieval: image 0's best caption (0.1) has no caption below it: rank 0; image 1's
     * best (0.55) is beaten by the 0.5 errors of image 0's five captions: rank 5; image 2's best
     * (0.05): rank 0 */
    assert_close(cap[NB_RET_R1], 100.0 * 2 / 3, 1e-9, 0);
    assert_close(cap[NB_RET_R5], 100.0 * 2 / 3, 1e-9, 0);
    assert_close(cap[NB_RET_R10], 100.0, 1e-9, 0);
    assert_close(cap[NB_RET_MEDR], 0 + 1, 1e-9, 0);
    assert_close(cap[NB_RET_MEANR], 5.0 / 3 + 1, 1e-9, 0);
    /* all errors equal: ties rank as a stable sort (chance), never all at rank 0 */
    for (int i = 0; i < NC * NI; i++)
        E[i] = 0;
    nb_order_retrieval(E, NC, NI, rk, cap, img);
    assert_close(img[NB_RET_R1], 100.0 * 5 / 15, 1e-9, 0); /* only image 0's captions */
    assert_close(cap[NB_RET_MEANR], (0 + 5 + 10) / 3.0 + 1, 1e-9, 0);
}

static int setup(void **s) {
    (void)s;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nb_test_oe_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s) {
    (void)s;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_good),  cmocka_unit_test(test_npy_bad),
        cmocka_unit_test(test_npy_file),  cmocka_unit_test(test_captions),
        cmocka_unit_test(test_vocab),     cmocka_unit_test(test_coco_loader),
        cmocka_unit_test(test_synthetic), cmocka_unit_test(test_retrieval),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
