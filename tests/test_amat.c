/* tests/test_amat.c — the .amat reader (datasets/amat.c) on good and damaged input, and the draw
 * task's binary images (datasets/binmnist.c): the binarization rules, the 50k/10k/10k split and
 * its cache from Debian's Fashion-MNIST (skipped when absent), Larochelle's files as
 * `fetch binarized-mnist` installs them, and the synthetic set. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "tests/testutil.h"
#include "tests/tmpdir.h"
#include "datasets/amat.h"
#include "datasets/binmnist.h"
#include "datasets/mnist.h"
#include "datasets/cifar10.h" /* nb_fnv1a */
#include "util/file.h"

#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define D NB_AMAT_DIM

/* The value of pixel j of image i in the generated files. */
static int pix(int i, int j) {
    return ((unsigned)(i * 7 + j * 13) % 5u) == 0;
}

/* Appends image i as one line (no newline) to buf at *at. */
static void put_line(char *buf, size_t *at, int i) {
    for (int j = 0; j < D; j++) {
        if (j) buf[(*at)++] = ' ';
        buf[(*at)++] = (char)('0' + pix(i, j));
    }
}

/* n lines, each followed by `end` (e.g. "\n"); the caller frees. */
static char *make_text(int n, const char *end, size_t *len) {
    size_t el = strlen(end);
    char *buf = malloc((size_t)n * (2 * D + el) + 1);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        put_line(buf, &at, i);
        memcpy(buf + at, end, el);
        at += el;
    }
    buf[at] = '\0';
    *len = at;
    return buf;
}

static void expect_ok(const char *text, size_t len, int expect, int n) {
    nb_amat a;
    nb_err err;
    int rc = nb_amat_read_mem(text, len, "good.amat", expect, &a, &err);
    if (rc) print_error("unexpected error: %s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(a.n, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < D; j++)
            assert_int_equal(a.x[(size_t)i * D + j], pix(i, j));
    nb_amat_free(&a);
    assert_null(a.x);
}

/* Parses text and expects an error whose message contains every one of want (NULL-ended). */
static void expect_err(const char *text, size_t len, int expect, const char *want1,
                       const char *want2) {
    nb_amat a;
    nb_err err;
    nb_err_clear(&err);
    assert_int_equal(nb_amat_read_mem(text, len, "bad.amat", expect, &a, &err), -1);
    assert_null(a.x);
    assert_int_equal(a.n, 0);
    if (!strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        print_error("message '%s' lacks '%s' / '%s'\n", err.msg, want1, want2 ? want2 : "");
    assert_non_null(strstr(err.msg, want1));
    if (want2) assert_non_null(strstr(err.msg, want2));
    assert_true(err.hint[0] != '\0');
}

static void test_good(void **state) {
    (void)state;
    size_t len;
    char *t = make_text(3, "\n", &len);
    assert_int_equal(len, 3 * 1568);
    expect_ok(t, len, 3, 3);
    expect_ok(t, len, 0, 3);     /* any count */
    expect_ok(t, len - 1, 3, 3); /* no final newline */
    free(t);
    t = make_text(2, " \r\n", &len); /* trailing whitespace, CRLF */
    expect_ok(t, len, 2, 2);
    free(t);
    t = make_text(2, "\t \n", &len);
    expect_ok(t, len, 2, 2);
    free(t);
}

/* Replaces value v (0-based) of line l (0-based) of a 3-line text with tok. */
static char *with_token(int l, int v, const char *tok, size_t *len) {
    size_t n;
    char *t = make_text(3, "\n", &n);
    size_t at = (size_t)l * 1568 + (size_t)v * 2;
    size_t tl = strlen(tok);
    char *o = malloc(n + tl + 1);
    memcpy(o, t, at);
    memcpy(o + at, tok, tl);
    memcpy(o + at + tl, t + at + 1, n - at - 1);
    *len = n + tl - 1;
    free(t);
    return o;
}

static void test_bad_tokens(void **state) {
    (void)state;
    size_t len;
    char *t = with_token(1, 10, "2", &len);
    expect_err(t, len, 3, "'bad.amat' line 2:", "value 11 is not 0 or 1 (it starts with '2')");
    free(t);
    t = with_token(0, 0, "0.0", &len);
    expect_err(t, len, 3, "line 1:", "value 1 is not 0 or 1");
    free(t);
    t = with_token(2, 5, "01", &len);
    expect_err(t, len, 3, "line 3:", "value 6 is not 0 or 1");
    free(t);
    t = with_token(2, 783, "x", &len);
    expect_err(t, len, 3, "line 3:", "value 784 is not 0 or 1 (it starts with 'x')");
    free(t);
    t = with_token(0, 3, "\xff", &len);
    expect_err(t, len, 3, "line 1:", "byte 0xff");
    free(t);
    t = with_token(1, 3, "0 ", &len); /* "0  0": two spaces, and a long line */
    expect_err(t, len, 3, "line 2:", "two spaces after value 4");
    free(t);
    t = with_token(1, 0, " 0", &len);
    expect_err(t, len, 3, "line 2:", "starts with a space");
    free(t);
    t = with_token(1, 7, "0\t", &len); /* a tab as a separator */
    expect_err(t, len, 3, "line 2:", "byte 0x09 after value 8");
    free(t);
}

static void test_bad_lines(void **state) {
    (void)state;
    size_t len;
    char *t = make_text(3, "\n", &len);
    /* short line: drop the last value of line 2 ("... 0 1\n" -> "... 0\n") */
    char *s = malloc(len);
    size_t cut = 2 * 1568 - 3;
    memcpy(s, t, cut);
    memcpy(s + cut, t + cut + 2, len - cut - 2);
    expect_err(s, len - 2, 3, "'bad.amat' line 2:", "short line: 783 values, expected 784");
    /* the same with a trailing space left: still short */
    memcpy(s, t, cut + 1);
    memcpy(s + cut + 1, t + cut + 2, len - cut - 2);
    expect_err(s, len - 1, 3, "line 2:", "short line: 783 values");
    free(s);
    /* long line: one more value on line 1 */
    s = malloc(len + 3);
    memcpy(s, t, 1567);
    memcpy(s + 1567, " 1", 2);
    memcpy(s + 1569, t + 1567, len - 1567);
    expect_err(s, len + 2, 3, "line 1:", "long line: more than 784 values");
    free(s);
    /* an empty line in the middle, and at the end */
    s = malloc(len + 2);
    memcpy(s, t, 1568);
    s[1568] = '\n';
    memcpy(s + 1569, t + 1568, len - 1568);
    expect_err(s, len + 1, 0, "line 2:", "empty line");
    memcpy(s, t, len);
    s[len] = '\n';
    expect_err(s, len + 1, 0, "line 4:", "empty line");
    free(s);
    /* wrong counts */
    expect_err(t, len, 4, "'bad.amat' has 3 lines, expected 4", NULL);
    expect_err(t, len, 2, "line 3:", "more lines than the 2 this file must hold");
    expect_err(t, 0, 3, "'bad.amat' is empty", NULL);
    expect_err(t, 0, 0, "'bad.amat' is empty", NULL);
    /* a line cut short by the end of the file */
    expect_err(t, len - 100, 3, "line 3:", "short line");
    free(t);
    /* too much trailing whitespace: refused, not read on */
    t = make_text(1, "", &len);
    s = malloc(len + 200);
    memcpy(s, t, len);
    memset(s + len, ' ', 100);
    s[len + 100] = '\n';
    expect_err(s, len + 101, 1, "line 1:", "more than 16 bytes of whitespace");
    free(s);
    free(t);
    nb_amat a;
    nb_err err;
    assert_int_equal(nb_amat_read_mem("", 0, "x", -1, &a, &err), -1);
    assert_int_equal(nb_amat_read_mem("", 0, "x", NB_AMAT_MAX_LINES + 1, &a, &err), -1);
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_files(void **state) {
    (void)state;
    size_t len;
    char *t = make_text(5, "\n", &len);
    write_file(tpath("five.amat"), t, len);
    nb_amat a;
    nb_err err;
    assert_int_equal(nb_amat_read(tpath("five.amat"), 5, &a, &err), 0);
    assert_int_equal(a.n, 5);
    assert_int_equal(a.x[D], pix(1, 0));
    assert_int_equal(a.x[D + 1], pix(1, 1));
    nb_amat_free(&a);
    assert_int_equal(nb_amat_read(tpath("five.amat"), 6, &a, &err), -1);
    assert_non_null(strstr(err.msg, "five.amat' has 5 lines, expected 6"));
    free(t);
    /* missing, a directory, a FIFO (refused without waiting for a writer) */
    assert_int_equal(nb_amat_read(tpath("none.amat"), 5, &a, &err), -1);
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_non_null(strstr(err.hint, "normbench fetch binarized-mnist"));
    assert_int_equal(nb_amat_read(tmpdir, 5, &a, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_int_equal(mkfifo(tpath("fifo.amat"), 0600), 0);
    assert_int_equal(nb_amat_read(tpath("fifo.amat"), 5, &a, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));
    /* a 64 MB file that is one huge line of '0's: refused at its second byte, quickly */
    FILE *f = fopen(tpath("huge.amat"), "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)64 << 20), 0);
    assert_int_equal(fclose(f), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(nb_amat_read(tpath("huge.amat"), 0, &a, &err), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(strstr(err.msg, "line 1: value 1 is not 0 or 1 (it starts with byte 0x00)"));
    assert_true((t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec) < 0.5);
    unlink(tpath("huge.amat"));
}

/* ---- binarization --------------------------------------------------------------------------- */

static void test_binarize_rules(void **state) {
    (void)state;
    enum { N = 200 };
    uint8_t *px = malloc((size_t)N * D), *a = malloc((size_t)N * D), *b = malloc((size_t)N * D);
    for (size_t i = 0; i < (size_t)N * D; i++)
        px[i] = (uint8_t)(i % D < 300 ? 0 : i % D < 400 ? 255 : i % D < 500 ? 127 : 64);
    nb_binarize_images(a, px, N, 0, 0, NB_BINARIZE_THRESHOLD);
    for (size_t i = 0; i < (size_t)N * D; i++)
        assert_int_equal(a[i], px[i] >= 128);
    px[0] = 128, px[1] = 127;
    nb_binarize_images(a, px, 1, 0, 0, NB_BINARIZE_THRESHOLD);
    assert_int_equal(a[0], 1);
    assert_int_equal(a[1], 0);
    px[0] = 0, px[1] = 0;
    nb_binarize_images(a, px, N, 0, 0, NB_BINARIZE_STOCHASTIC);
    long on127 = 0, on64 = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++) {
            uint8_t v = a[(size_t)i * D + j];
            assert_true(v <= 1);
            if (j < 300)
                assert_int_equal(v, 0);
            else if (j < 400)
                assert_int_equal(v, 1);
            else if (j < 500)
                on127 += v;
            else
                on64 += v;
        }
    assert_close((double)on127 / (N * 100), 127.0 / 255, 0.01, 0);
    assert_close((double)on64 / (N * 284), 64.0 / 255, 0.01, 0);
    /* fixed: the same again; keyed by the image's index in its file, and by the file */
    nb_binarize_images(b, px, N, 0, 0, NB_BINARIZE_STOCHASTIC);
    assert_memory_equal(a, b, (size_t)N * D);
    nb_binarize_images(b, px + D, N - 1, 0, 1, NB_BINARIZE_STOCHASTIC);
    assert_memory_equal(a + D, b, (size_t)(N - 1) * D);
    nb_binarize_images(b, px, N, 1, 0, NB_BINARIZE_STOCHASTIC);
    assert_true(memcmp(a, b, (size_t)N * D) != 0);
    /* the rule's first values, pinned: a change of the rule changes every cached dataset */
    memset(px, 200, D);
    nb_binarize_images(a, px, 1, 0, 0, NB_BINARIZE_STOCHASTIC);
    char bits[33] = {0};
    for (int j = 0; j < 32; j++)
        bits[j] = (char)('0' + a[j]);
    assert_string_equal(bits, "11110001110111101011010001111111");
    nb_binarize r;
    assert_int_equal(nb_binarize_parse("threshold", &r), 0);
    assert_int_equal(r, NB_BINARIZE_THRESHOLD);
    assert_int_equal(nb_binarize_parse("stochastic", &r), 0);
    assert_int_equal(r, NB_BINARIZE_STOCHASTIC);
    assert_int_equal(nb_binarize_parse("bernoulli", &r), -1);
    free(px), free(a), free(b);
}

static int all_binary(const nb_binsplit *s) {
    for (size_t i = 0; i < (size_t)s->n * NB_BIN_DIM; i++)
        if (s->x[i] > 1) return 0;
    return 1;
}

/* Writes an IDX file: images (n, 28, 28) when img, else n labels; pixel k of image i is
 * (i * 31 + k * 7) % 256. */
static void write_idx(const char *path, int n, int img) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t h[16] = {0,
                     0,
                     8,
                     img ? 3 : 1,
                     (uint8_t)(n >> 24),
                     (uint8_t)(n >> 16),
                     (uint8_t)(n >> 8),
                     (uint8_t)n,
                     0,
                     0,
                     0,
                     28,
                     0,
                     0,
                     0,
                     28};
    assert_int_equal(fwrite(h, 1, img ? 16 : 8, f), img ? 16 : 8);
    size_t len = img ? (size_t)n * D : (size_t)n;
    uint8_t *b = malloc(len);
    for (size_t k = 0; k < len; k++)
        b[k] = img ? (uint8_t)(((k / D) * 31 + (k % D) * 7) % 256) : (uint8_t)(k % 10);
    assert_int_equal(fwrite(b, 1, len, f), len);
    free(b);
    assert_int_equal(fclose(f), 0);
}

static uint8_t idx_px(int i, int k) {
    return (uint8_t)(((size_t)i * 31 + (size_t)k * 7) % 256);
}

/* mnist-binarized on a small generated MNIST (10,040 training images, 30 test images): the
 * split, both rules, the cache and its rebuild. */
static void test_idx_binarized(void **state) {
    (void)state;
    const char *data = tpath("data-idx");
    char dir[1100], p[1200];
    assert_int_equal(mkdir(data, 0700), 0);
    snprintf(dir, sizeof dir, "%s/mnist", data);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    write_idx(p, 10040, 1);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", dir);
    write_idx(p, 10040, 0);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", dir);
    write_idx(p, 30, 1);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
    write_idx(p, 30, 0);
    nb_binmnist m, c, t;
    nb_err err;
    assert_int_equal(
        nb_binmnist_load(&m, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err), 0);
    assert_int_equal(m.train.n, 40);
    assert_int_equal(m.val.n, 10000);
    assert_int_equal(m.test.n, 30);
    assert_true(all_binary(&m.train) && all_binary(&m.val) && all_binary(&m.test));
    assert_null(strstr(m.source, "from the cache"));
    assert_non_null(strstr(m.source, "stochastic"));
    char cache[1200];
    snprintf(cache, sizeof cache, "%s/.cache/binarized/mnist-stochastic.bin", data);
    struct stat st;
    assert_int_equal(stat(cache, &st), 0);
    /* train: images 0..39; valid: the last 10,000 training images; test: the t10k images */
    uint8_t px[D], b[D];
    const struct {
        const nb_binsplit *s;
        int i, file, idx;
    } at[4] = {
        {&m.train, 39, 0, 39}, {&m.val, 0, 0, 40}, {&m.val, 9999, 0, 10039}, {&m.test, 29, 1, 29}};
    for (int r = 0; r < 4; r++) {
        for (int k = 0; k < D; k++)
            px[k] = idx_px(at[r].idx, k);
        nb_binarize_images(b, px, 1, at[r].file, at[r].idx, NB_BINARIZE_STOCHASTIC);
        assert_memory_equal(b, at[r].s->x + (size_t)at[r].i * D, D);
    }
    /* the second load reads the cache: the same images */
    assert_int_equal(
        nb_binmnist_load(&c, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 0, 7, &err), 0);
    assert_non_null(strstr(c.source, "from the cache"));
    assert_memory_equal(c.train.x, m.train.x, (size_t)40 * D);
    assert_memory_equal(c.val.x, m.val.x, (size_t)10000 * D);
    assert_memory_equal(c.test.x, m.test.x, (size_t)30 * D);
    nb_binmnist_free(&c);
    /* a damaged cache is rebuilt, and the same */
    FILE *f = fopen(cache, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 5000, SEEK_SET), 0);
    int ch = fgetc(f);
    assert_int_equal(fseek(f, 5000, SEEK_SET), 0);
    fputc(ch ^ 0x10, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(
        nb_binmnist_load(&c, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 20, 1, &err), 0);
    assert_null(strstr(c.source, "from the cache"));
    assert_int_equal(c.train.n, 20);
    assert_int_equal(c.val.n, 20);
    assert_int_equal(c.test.n, 20);
    assert_memory_equal(c.val.x, m.val.x, (size_t)20 * D);
    nb_binmnist_free(&c);
    assert_int_equal(
        nb_binmnist_load(&c, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 20, 1, &err), 0);
    assert_non_null(strstr(c.source, "from the cache"));
    nb_binmnist_free(&c);
    /* a cache whose checksum holds but whose counts leave no validation split is not used */
    {
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(nb_read_file(cache, 1 << 26, 0, &buf, &len, &err), 0);
        size_t nbits = 35 * (size_t)D, body = (nbits + 7) / 8, head = 80;
        uint8_t *evil = calloc(head + body + 8, 1);
        memcpy(evil, buf, 72); /* magic and key as the real cache has them */
        uint32_t n[2] = {5, 30};
        memcpy(evil + 72, n, 8);
        uint64_t h = nb_fnv1a(NB_FNV_INIT, evil, head + body);
        memcpy(evil + head + body, &h, 8);
        f = fopen(cache, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(evil, 1, head + body + 8, f), head + body + 8);
        assert_int_equal(fclose(f), 0);
        free(evil);
        free(buf);
        assert_int_equal(
            nb_binmnist_load(&c, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err), 0);
        assert_null(strstr(c.source, "from the cache"));
        assert_int_equal(c.train.n, 40);
        assert_memory_equal(c.val.x, m.val.x, (size_t)10000 * D);
        nb_binmnist_free(&c);
    }
    /* a changed image file (another size) makes the cache stale: rebuilt from the new file */
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    write_idx(p, 10041, 1);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", dir);
    write_idx(p, 10041, 0);
    assert_int_equal(
        nb_binmnist_load(&c, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err), 0);
    assert_null(strstr(c.source, "from the cache"));
    assert_int_equal(c.train.n, 41);
    nb_binmnist_free(&c);
    /* the threshold rule: its own cache, its own images */
    assert_int_equal(
        nb_binmnist_load(&t, "mnist-binarized", data, NB_BINARIZE_THRESHOLD, 0, 1, &err), 0);
    snprintf(cache, sizeof cache, "%s/.cache/binarized/mnist-threshold.bin", data);
    assert_int_equal(stat(cache, &st), 0);
    assert_non_null(strstr(t.source, "threshold"));
    for (int k = 0; k < D; k++) {
        assert_int_equal(t.val.x[k], idx_px(41, k) >= 128);
        assert_int_equal(t.test.x[k], idx_px(0, k) >= 128);
    }
    nb_binmnist_free(&t);
    /* too few training images for the split */
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    write_idx(p, 10000, 1);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", dir);
    write_idx(p, 10000, 0);
    assert_int_equal(
        nb_binmnist_load(&t, "mnist-binarized", data, NB_BINARIZE_THRESHOLD, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "has only 10000 training images"));
    nb_binmnist_free(&m);
}

/* Fashion-MNIST from Debian's package: the full 50,000 / 10,000 / 10,000. */
static void test_fashion_binarized(void **state) {
    (void)state;
    char p[1024];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", FASHION_DIR);
    if (access(p, R_OK) != 0) {
        fprintf(stderr, "# skipped: Debian's dataset-fashion-mnist is not installed\n");
        skip();
    }
    const char *data = tpath("data-fm");
    assert_int_equal(mkdir(data, 0700), 0);
    nb_binmnist m;
    nb_err err;
    assert_int_equal(
        nb_binmnist_load(&m, "fashion-mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err),
        0);
    assert_int_equal(m.train.n, 50000);
    assert_int_equal(m.val.n, 10000);
    assert_int_equal(m.test.n, 10000);
    assert_true(all_binary(&m.train) && all_binary(&m.val) && all_binary(&m.test));
    assert_non_null(strstr(m.source, FASHION_DIR));
    char cache[1200];
    snprintf(cache, sizeof cache, "%s/.cache/binarized/fashion-mnist-stochastic.bin", data);
    struct stat st;
    assert_int_equal(stat(cache, &st), 0);
    long on = 0;
    for (size_t i = 0; i < (size_t)10000 * D; i++)
        on += m.test.x[i];
    fprintf(stderr, "# fashion-mnist-binarized: %.3f of the test pixels on\n",
            (double)on / (10000.0 * D));
    assert_true(on > 10000L * D / 5 && on < 10000L * D / 2);
    nb_binmnist_free(&m);
}

static void test_missing(void **state) {
    (void)state;
    nb_binmnist m;
    nb_err err;
    const char *data = tpath("data-empty");
    assert_int_equal(mkdir(data, 0700), 0);
    assert_int_equal(
        nb_binmnist_load(&m, "mnist-binarized", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "cannot find the mnist IDX files"));
    assert_non_null(strstr(err.hint, "normbench fetch mnist"));
    assert_null(m.train.x);
    assert_int_equal(
        nb_binmnist_load(&m, "binarized-mnist", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "binarized-mnist/binarized_mnist_valid.amat"));
    assert_non_null(strstr(err.hint, "normbench fetch binarized-mnist"));
    assert_int_equal(nb_binmnist_load(&m, "cifar10", data, NB_BINARIZE_STOCHASTIC, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "unknown dataset 'cifar10'"));
    assert_non_null(strstr(err.hint, "fashion-mnist-binarized"));
}

/* Writes n generated lines to path, with line `bad` (if >= 0) holding a '2'. */
static void write_amat(const char *path, int n, int first, int bad) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    char *line = malloc(2 * D + 1);
    for (int i = 0; i < n; i++) {
        size_t at = 0;
        put_line(line, &at, first + i);
        if (i == bad) line[20] = '2';
        line[at++] = '\n';
        assert_int_equal(fwrite(line, 1, at, f), at);
    }
    free(line);
    assert_int_equal(fclose(f), 0);
}

static void test_binarized_mnist_files(void **state) {
    (void)state;
    const char *data = tpath("data-amat");
    char dir[1100], p[3][1200];
    assert_int_equal(mkdir(data, 0700), 0);
    snprintf(dir, sizeof dir, "%s/binarized-mnist", data);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(p[0], sizeof p[0], "%s/binarized_mnist_train.amat", dir);
    snprintf(p[1], sizeof p[1], "%s/binarized_mnist_valid.amat", dir);
    snprintf(p[2], sizeof p[2], "%s/binarized_mnist_test.amat", dir);
    nb_binmnist m;
    nb_err err;
    /* a damaged valid file: named, with its line (the small files are read first) */
    write_amat(p[1], 10000, 50000, 4321);
    assert_int_equal(
        nb_binmnist_load(&m, "binarized-mnist", data, NB_BINARIZE_THRESHOLD, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "binarized_mnist_valid.amat' line 4322: value 11"));
    assert_null(m.train.x);
    /* a short test file */
    write_amat(p[1], 10000, 50000, -1);
    write_amat(p[2], 9999, 60000, -1);
    assert_int_equal(
        nb_binmnist_load(&m, "binarized-mnist", data, NB_BINARIZE_THRESHOLD, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "binarized_mnist_test.amat' has 9999 lines, expected 10000"));
    /* no train file */
    write_amat(p[2], 10000, 60000, -1);
    assert_int_equal(
        nb_binmnist_load(&m, "binarized-mnist", data, NB_BINARIZE_THRESHOLD, 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "binarized_mnist_train.amat"));
    write_amat(p[0], 50000, 0, -1);
    assert_int_equal(
        nb_binmnist_load(&m, "binarized-mnist", data, NB_BINARIZE_THRESHOLD, 10, 1, &err), 0);
    assert_int_equal(m.train.n, 10);
    assert_int_equal(m.val.n, 10);
    assert_int_equal(m.test.n, 10);
    for (int j = 0; j < D; j++) {
        assert_int_equal(m.train.x[(size_t)9 * D + j], pix(9, j));
        assert_int_equal(m.val.x[j], pix(50000, j));
        assert_int_equal(m.test.x[(size_t)9 * D + j], pix(60009, j));
    }
    assert_non_null(strstr(m.source, "Larochelle"));
    nb_binmnist_free(&m);
}

static void test_synthetic(void **state) {
    (void)state;
    nb_binmnist a, b, c;
    nb_err err;
    assert_int_equal(nb_binmnist_load(&a, "synthetic", NULL, NB_BINARIZE_STOCHASTIC, 500, 3, &err),
                     0);
    assert_int_equal(nb_binmnist_synthetic(&b, 500, 3, &err), 0);
    assert_int_equal(nb_binmnist_synthetic(&c, 500, 4, &err), 0);
    assert_int_equal(a.train.n, 500);
    assert_int_equal(a.val.n, 500);
    assert_int_equal(a.test.n, 500);
    assert_memory_equal(a.train.x, b.train.x, (size_t)500 * D);
    assert_memory_equal(a.test.x, b.test.x, (size_t)500 * D);
    assert_true(memcmp(a.train.x, c.train.x, (size_t)500 * D) != 0);
    assert_true(memcmp(a.train.x, a.val.x, (size_t)500 * D) != 0);
    assert_true(all_binary(&a.train) && all_binary(&a.val) && all_binary(&a.test));
    long on = 0;
    int empty = 0, same_as_prev = 0;
    for (int i = 0; i < 500; i++) {
        int k = 0;
        for (int j = 0; j < D; j++)
            k += a.train.x[(size_t)i * D + j];
        on += k;
        empty += k == 0;
        if (i && memcmp(a.train.x + (size_t)i * D, a.train.x + (size_t)(i - 1) * D, D) == 0)
            same_as_prev++;
    }
    double frac = (double)on / (500.0 * D);
    fprintf(stderr, "# synthetic: %.3f of the pixels on, %d empty images\n", frac, empty);
    assert_true(frac > 0.05 && frac < 0.5);
    assert_true(empty < 5);
    assert_int_equal(same_as_prev, 0);
    /* structure: neighbouring pixels agree far more often than independent ones would */
    long agree = 0, pairs = 0;
    for (int i = 0; i < 500; i++)
        for (int y = 0; y < NB_BIN_SIDE; y++)
            for (int x = 0; x + 1 < NB_BIN_SIDE; x++) {
                const uint8_t *o = a.train.x + (size_t)i * D + y * NB_BIN_SIDE + x;
                agree += o[0] == o[1];
                pairs++;
            }
    double indep = frac * frac + (1 - frac) * (1 - frac);
    fprintf(stderr, "# synthetic: neighbours agree %.3f (independent pixels: %.3f)\n",
            (double)agree / pairs, indep);
    assert_true((double)agree / pairs > indep + 0.05);
    nb_binmnist_free(&a);
    nb_binmnist_free(&b);
    nb_binmnist_free(&c);
    assert_int_equal(nb_binmnist_synthetic(&a, 0, 1, &err), 0);
    assert_int_equal(a.train.n, NB_BIN_NTRAIN);
    assert_int_equal(a.val.n, NB_BIN_NVALID);
    assert_int_equal(a.test.n, NB_BIN_NTEST);
    nb_binmnist_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad_tokens),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_binarize_rules),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_idx_binarized),
        cmocka_unit_test(test_fashion_binarized),
        cmocka_unit_test(test_binarized_mnist_files),
        cmocka_unit_test(test_synthetic),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
