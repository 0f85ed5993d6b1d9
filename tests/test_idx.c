/* tests/test_idx.c — the IDX parser and the MNIST-family loader (datasets/idx.c, mnist.c,
 * mnist_synth.c): valid files plain and gzip, every kind of damaged file, missing files, the
 * decompression-bomb cap, the real Fashion-MNIST from Debian's package, and the synthetic set. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "tests/testutil.h"
#include "tests/tmpdir.h"
#include "datasets/mnist.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static void mkdir_p(const char *name) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s/%s", tmpdir, name);
    assert_int_equal(mkdir(cmd, 0700) == 0 || errno == EEXIST, 1);
}

static void write_plain(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Writes data gzip-compressed through libarchive's raw format (one nameless entry). */
static void write_gzip(const char *path, const void *data, size_t n) {
    struct archive *a = archive_write_new();
    assert_non_null(a);
    assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "data");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_size(e, (la_int64_t)n);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    const char *p = data;
    while (n > 0) { /* in chunks: archive_write_data may take less than asked */
        la_ssize_t k = archive_write_data(a, p, n > (1 << 20) ? (1 << 20) : n);
        assert_true(k > 0);
        p += k;
        n -= (size_t)k;
    }
    archive_entry_free(e);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Builds an IDX image (ndims 3: n x rows x cols) or label (ndims 1: n) file in memory with
 * deterministic contents; *len gets its size. Pixels are (i * 7) % 256, labels i % 10. */
static unsigned char *make_idx(int ndims, uint32_t n, uint32_t rows, uint32_t cols, size_t *len) {
    size_t hdr = 4 + 4 * (size_t)ndims;
    size_t data = ndims == 3 ? (size_t)n * rows * cols : n;
    unsigned char *b = malloc(hdr + data);
    assert_non_null(b);
    put_be32(b, 0x00000800u | (uint32_t)ndims);
    put_be32(b + 4, n);
    if (ndims == 3) {
        put_be32(b + 8, rows);
        put_be32(b + 12, cols);
    }
    for (size_t i = 0; i < data; i++)
        b[hdr + i] = ndims == 3 ? (unsigned char)(i * 7 % 256) : (unsigned char)(i % 10);
    *len = hdr + data;
    return b;
}

/* Asserts that the error message mentions `what` (the file, usually) and carries a hint. */
#define assert_err_names(err, what)                                                                \
    do {                                                                                           \
        if (!strstr((err).msg, (what))) {                                                          \
            print_error("message '%s' does not name '%s'\n", (err).msg, (what));                   \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

#define assert_err_has(err, text)                                                                  \
    do {                                                                                           \
        if (!strstr((err).msg, (text))) {                                                          \
            print_error("message '%s' does not say '%s'\n", (err).msg, (text));                    \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- nb_idx_read -------------------------------------------------------------------------- */

static void test_roundtrip_plain_and_gzip(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(3, 5, 28, 28, &len);
    const char *plain = tpath("img"), *gz = tpath("img.gz"), *gz_no_ext = tpath("img-gz");
    write_plain(plain, b, len);
    write_gzip(gz, b, len);
    write_gzip(gz_no_ext, b, len); /* decided by content, not by name */
    const char *paths[3] = {plain, gz, gz_no_ext};
    for (int k = 0; k < 3; k++) {
        nb_idx idx;
        nb_err err;
        nb_err_clear(&err);
        int rc = nb_idx_read(paths[k], 3, &idx, &err);
        if (rc) print_error("%s: %s\n", paths[k], err.msg);
        assert_int_equal(rc, 0);
        assert_int_equal(idx.ndims, 3);
        assert_int_equal(idx.dims[0], 5);
        assert_int_equal(idx.dims[1], 28);
        assert_int_equal(idx.dims[2], 28);
        assert_int_equal(idx.size, 5 * 28 * 28);
        assert_memory_equal(idx.data, b + 16, idx.size);
        nb_idx_free(&idx);
        assert_null(idx.data);
    }
    free(b);

    unsigned char *l = make_idx(1, 13, 0, 0, &len);
    write_gzip(tpath("lbl.gz"), l, len);
    nb_idx idx;
    nb_err err;
    assert_int_equal(nb_idx_read(tpath("lbl.gz"), 1, &idx, &err), 0);
    assert_int_equal(idx.ndims, 1);
    assert_int_equal(idx.dims[0], 13);
    assert_memory_equal(idx.data, l + 8, 13);
    nb_idx_free(&idx);
    free(l);
}

/* Reads path expecting failure; checks the message names the file, says `what`, has a hint. */
static void expect_fail(const char *path, int ndims, const char *what) {
    nb_idx idx;
    nb_err err;
    nb_err_clear(&err);
    assert_int_equal(nb_idx_read(path, ndims, &idx, &err), -1);
    assert_null(idx.data);
    assert_err_names(err, path);
    assert_err_has(err, what);
    assert_true(strlen(err.hint) > 0);
}

/* Every damage, both plain and gzip-compressed. */
static void check_both(const char *name, const unsigned char *b, size_t len, int ndims,
                       const char *what) {
    char gzname[128];
    snprintf(gzname, sizeof gzname, "%s.gz", name);
    write_plain(tpath(name), b, len);
    expect_fail(tpath(name), ndims, what);
    write_gzip(tpath(gzname), b, len);
    expect_fail(tpath(gzname), ndims, what);
}

static void test_bad_magic(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(3, 2, 28, 28, &len);
    b[0] = 0x1f; /* not 00 00 */
    b[1] = 0x00;
    check_both("badmagic", b, len, 3, "bad magic");
    b[0] = 0;
    b[2] = 0x0d; /* float elements */
    check_both("badtype", b, len, 3, "element type");
    free(b);
}

static void test_wrong_ndims(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(1, 10, 0, 0, &len);
    check_both("labels-as-images", b, len, 3,
               "has magic 0x00000801 (1 dimension), expected 0x00000803 (3 dimensions: images)");
    free(b);
    b = make_idx(3, 2, 28, 28, &len);
    check_both("images-as-labels", b, len, 1,
               "has magic 0x00000803 (3 dimensions), expected 0x00000801 (1 dimension: labels)");
    free(b);
}

static void test_truncated(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(3, 3, 28, 28, &len);
    check_both("trunc", b, len - 100, 3, "is truncated: expected 2352 bytes of data, found 2252");
    check_both("trunc-hdr", b, 10, 3, "is truncated");
    check_both("trunc-magic", b, 2, 3, "is truncated");
    write_plain(tpath("empty"), b, 0);
    expect_fail(tpath("empty"), 3, "is truncated");
    write_gzip(tpath("empty.gz"), b, 0);
    expect_fail(tpath("empty.gz"), 3, "cannot decompress");
    free(b);
}

static void test_trailing_bytes(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(1, 10, 0, 0, &len);
    unsigned char *c = calloc(len + 3, 1);
    memcpy(c, b, len);
    check_both("trailing", c, len + 3, 1, "has 3 bytes after the 10 bytes");
    free(c);
    free(b);
}

static void test_zero_dim(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(3, 2, 28, 28, &len);
    put_be32(b + 8, 0);
    write_plain(tpath("zerodim"), b, len);
    expect_fail(tpath("zerodim"), 3, "size 0");
    free(b);
}

static void test_missing_file(void **state) {
    (void)state;
    expect_fail(tpath("no-such-file"), 3, "cannot open");
}

static void test_corrupt_gzip(void **state) {
    (void)state;
    size_t len;
    unsigned char *b = make_idx(3, 50, 28, 28, &len);
    const char *gz = tpath("corrupt.gz");
    write_gzip(gz, b, len);
    FILE *f = fopen(gz, "rb");
    assert_non_null(f);
    unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 100);

    /* cut off halfway through the deflate stream */
    write_plain(tpath("cut.gz"), buf, n / 2);
    expect_fail(tpath("cut.gz"), 3, "");
    /* garbage in the middle of the deflate stream */
    for (size_t i = 20; i < 60; i++)
        buf[i] ^= 0x5a;
    write_plain(tpath("flipped.gz"), buf, n);
    expect_fail(tpath("flipped.gz"), 3, "");
    /* a gzip magic number and nothing sensible after it */
    unsigned char junk[64] = {0x1f, 0x8b, 0x08, 0x00};
    for (size_t i = 10; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 37);
    write_plain(tpath("junk.gz"), junk, sizeof junk);
    expect_fail(tpath("junk.gz"), 3, "");
    free(b);
}

static void test_decompression_bomb(void **state) {
    (void)state;
    /* The header claims 100,000 images: 78.4 MB, over the 64 MiB cap. Refused before inflating
     * the rest; the compressed file is under 100 kB. */
    size_t len = 16 + (size_t)100000 * 28 * 28;
    unsigned char *b = calloc(len, 1);
    assert_non_null(b);
    put_be32(b, 0x00000803);
    put_be32(b + 4, 100000);
    put_be32(b + 8, 28);
    put_be32(b + 12, 28);
    write_gzip(tpath("bomb.gz"), b, len);
    expect_fail(tpath("bomb.gz"), 3, "decompression bomb");

    /* A small header followed by 80 MB of zeros: refused as trailing data, counted no further
     * than the cap. */
    put_be32(b + 4, 1);
    write_gzip(tpath("bomb2.gz"), b, len);
    expect_fail(tpath("bomb2.gz"), 3, "has more than");
    free(b);
}

/* ---- nb_mnist_load ------------------------------------------------------------------------ */

/* Writes the four files for dataset `ds` under tmpdir/root/ds: ntrain training images (and
 * ntrain_labels labels), ntest test examples, gzip or not. */
static void write_set(const char *root, const char *ds, uint32_t ntrain, uint32_t ntrain_labels,
                      uint32_t ntest, int gz) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s", root);
    mkdir_p(dir);
    snprintf(dir, sizeof dir, "%s/%s", root, ds);
    mkdir_p(dir);
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    uint32_t counts[4] = {ntrain, ntrain_labels, ntest, ntest};
    for (int i = 0; i < 4; i++) {
        size_t len;
        unsigned char *b = make_idx(i % 2 == 0 ? 3 : 1, counts[i], 28, 28, &len);
        char name[400];
        snprintf(name, sizeof name, "%s/%s%s", dir, names[i], gz ? ".gz" : "");
        if (gz)
            write_gzip(tpath(name), b, len);
        else
            write_plain(tpath(name), b, len);
        free(b);
    }
}

static void test_load_small_set(void **state) {
    (void)state;
    write_set("d1", "mnist", 5100, 5100, 30, 1);
    nb_mnist m;
    nb_err err;
    nb_err_clear(&err);
    int rc = nb_mnist_load(&m, "mnist", tpath("d1"), 0, 1, &err);
    if (rc) print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(m.train.n, 100);
    assert_int_equal(m.val.n, 5000);
    assert_int_equal(m.test.n, 30);
    assert_int_equal(m.train.dim, 784);
    /* pixel j of example i is ((i * 784 + j) * 7) % 256; label i % 10 */
    assert_close(m.train.x[784 + 3], ((784 + 3) * 7 % 256) / 255.0, 0, 1e-7);
    assert_int_equal(m.train.y[13], 3);
    assert_int_equal(m.val.y[0], 100 % 10); /* val is the last 5,000 */
    assert_close(m.val.x[5], ((100 * 784 + 5) * 7 % 256) / 255.0, 0, 1e-7);
    assert_int_equal(m.test.y[29], 9);
    for (int i = 0; i < m.train.n * 784; i++)
        assert_true(m.train.x[i] >= 0 && m.train.x[i] <= 1);
    assert_non_null(strstr(m.source, tpath("d1/mnist")));
    assert_non_null(strstr(m.source, "train-images-idx3-ubyte.gz"));
    nb_mnist_free(&m);
    assert_null(m.train.x);

    /* subset */
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d1"), 20, 1, &err), 0);
    assert_int_equal(m.train.n, 20);
    assert_int_equal(m.val.n, 20);
    assert_int_equal(m.test.n, 20);
    assert_int_equal(m.val.y[0], 100 % 10);
    nb_mnist_free(&m);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d1"), 1000, 1, &err), 0);
    assert_int_equal(m.train.n, 100);
    assert_int_equal(m.val.n, 1000);
    assert_int_equal(m.test.n, 30);
    nb_mnist_free(&m);
}

static void test_load_errors(void **state) {
    (void)state;
    nb_mnist m;
    nb_err err;

    /* image/label count mismatch */
    write_set("d2", "mnist", 5100, 5099, 30, 0);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d2"), 0, 1, &err), -1);
    assert_err_names(err, "train-images-idx3-ubyte");
    assert_err_names(err, "train-labels-idx1-ubyte");
    assert_err_has(err, "5100 images");
    assert_err_has(err, "5099 labels");
    assert_null(m.train.x);

    /* too few training images for the 55k/5k split */
    write_set("d3", "mnist", 5000, 5000, 30, 0);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d3"), 0, 1, &err), -1);
    assert_err_names(err, "train-images-idx3-ubyte");
    assert_err_has(err, "more than 5000");

    /* label out of range */
    write_set("d4", "mnist", 5100, 5100, 30, 0);
    size_t len;
    unsigned char *l = make_idx(1, 30, 0, 0, &len);
    l[8 + 17] = 10;
    write_plain(tpath("d4/mnist/t10k-labels-idx1-ubyte"), l, len);
    free(l);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d4"), 0, 1, &err), -1);
    assert_err_names(err, "t10k-labels-idx1-ubyte");
    assert_err_has(err, "label 10 at index 17");

    /* not 28x28 */
    write_set("d5", "mnist", 5100, 5100, 30, 0);
    unsigned char *b = make_idx(3, 30, 32, 32, &len);
    write_plain(tpath("d5/mnist/t10k-images-idx3-ubyte"), b, len);
    free(b);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d5"), 0, 1, &err), -1);
    assert_err_names(err, "t10k-images-idx3-ubyte");
    assert_err_has(err, "32x32");

    /* a damaged file inside a set: the parser's error comes through */
    write_set("d6", "mnist", 5100, 5100, 30, 0);
    b = make_idx(3, 30, 28, 28, &len);
    write_plain(tpath("d6/mnist/t10k-images-idx3-ubyte"), b, len - 1);
    free(b);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("d6"), 0, 1, &err), -1);
    assert_err_names(err, tpath("d6/mnist/t10k-images-idx3-ubyte"));
    assert_err_has(err, "truncated");

    /* unknown dataset */
    assert_int_equal(nb_mnist_load(&m, "cifar", tpath("d6"), 0, 1, &err), -1);
    assert_err_has(err, "'cifar'");
    assert_non_null(strstr(err.hint, "fashion-mnist"));
}

static void test_missing_files(void **state) {
    (void)state;
    nb_mnist m;
    nb_err err;
    mkdir_p("empty");
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("empty"), 0, 1, &err), -1);
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        char p[400];
        snprintf(p, sizeof p, "%s/mnist/%s[.gz]", tpath("empty"), names[i]);
        assert_err_names(err, p);
    }
    assert_non_null(strstr(err.hint, tpath("empty/mnist")));
    assert_null(m.train.x);

    /* partly there: only the missing ones are listed */
    write_set("part", "mnist", 5100, 5100, 30, 0);
    assert_int_equal(remove(tpath("part/mnist/t10k-labels-idx1-ubyte")), 0);
    assert_int_equal(nb_mnist_load(&m, "mnist", tpath("part"), 0, 1, &err), -1);
    assert_err_has(err, "t10k-labels-idx1-ubyte[.gz]");
    assert_null(strstr(err.msg, "train-images"));

    /* fashion-mnist: looks in DATA_DIR, then in Debian's directory (both listed when both
     * fail; here the Debian directory is there, so check the message through a bogus dataset
     * directory only when it is absent) */
    if (access(FASHION_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        assert_int_equal(nb_mnist_load(&m, "fashion-mnist", tpath("empty"), 0, 1, &err), -1);
        assert_err_names(err, FASHION_DIR "/train-images-idx3-ubyte[.gz]");
        assert_non_null(strstr(err.hint, "dataset-fashion-mnist"));
    }
}

/* DATA_DIR/fashion-mnist wins over Debian's directory. */
static void test_data_dir_first(void **state) {
    (void)state;
    write_set("d7", "fashion-mnist", 5010, 5010, 20, 0);
    nb_mnist m;
    nb_err err;
    assert_int_equal(nb_mnist_load(&m, "fashion-mnist", tpath("d7"), 0, 1, &err), 0);
    assert_int_equal(m.train.n, 10);
    assert_int_equal(m.test.n, 20);
    assert_non_null(strstr(m.source, tpath("d7/fashion-mnist")));
    nb_mnist_free(&m);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The real thing, from Debian's dataset-fashion-mnist (a dependency of the project: its absence
 * is a failure, not a skip). */
static void test_fashion_mnist_debian(void **state) {
    (void)state;
    if (access(FASHION_DIR, R_OK) != 0) {
        print_error("'%s' is missing: install dataset-fashion-mnist (the project's deps do)\n",
                    FASHION_DIR);
        fail();
    }
    nb_mnist m;
    nb_err err;
    nb_err_clear(&err);
    mkdir_p("nofashion");
    double t0 = now();
    int rc = nb_mnist_load(&m, "fashion-mnist", tpath("nofashion"), 0, 1, &err);
    double t1 = now();
    if (rc) print_error("error: %s\nhint: %s\n", err.msg, err.hint);
    assert_int_equal(rc, 0);
    fprintf(stderr, "# fashion-mnist loaded in %.3f s\n", t1 - t0);
    assert_int_equal(m.train.n, 55000);
    assert_int_equal(m.val.n, 5000);
    assert_int_equal(m.test.n, 10000);
    assert_non_null(strstr(m.source, FASHION_DIR));
    nb_split *sp[3] = {&m.train, &m.val, &m.test};
    for (int k = 0; k < 3; k++) {
        int count[10] = {0};
        for (int i = 0; i < sp[k]->n; i++) {
            assert_true(sp[k]->y[i] >= 0 && sp[k]->y[i] <= 9);
            count[sp[k]->y[i]]++;
        }
        for (int c = 0; c < 10; c++) {
            assert_true(count[c] > sp[k]->n / 20); /* every class, roughly balanced */
            assert_true(count[c] < sp[k]->n / 5);
        }
        if (k == 2)
            for (int c = 0; c < 10; c++)
                assert_int_equal(count[c], 1000); /* the test set is exactly balanced */
    }
    double sum = 0;
    float lo = 1, hi = 0;
    for (size_t i = 0; i < (size_t)m.train.n * 784; i++) {
        sum += m.train.x[i];
        lo = fminf(lo, m.train.x[i]);
        hi = fmaxf(hi, m.train.x[i]);
    }
    assert_close(lo, 0, 0, 0);
    assert_close(hi, 1, 0, 0);
    assert_close(sum / ((double)m.train.n * 784), 0.286, 0.005, 0); /* Fashion-MNIST's mean */
    nb_mnist_free(&m);

    assert_int_equal(nb_mnist_load(&m, "fashion-mnist", tpath("nofashion"), 500, 1, &err), 0);
    assert_int_equal(m.train.n, 500);
    assert_int_equal(m.val.n, 500);
    assert_int_equal(m.test.n, 500);
    nb_mnist_free(&m);
}

/* ---- synthetic ------------------------------------------------------------------------------ */

static void test_synthetic(void **state) {
    (void)state;
    nb_mnist a, b, c;
    nb_err err;
    double t0 = now();
    assert_int_equal(nb_mnist_load(&a, "synthetic", NULL, 0, 7, &err), 0);
    fprintf(stderr, "# synthetic 70,000 generated in %.3f s\n", now() - t0);
    assert_int_equal(a.train.n, 55000);
    assert_int_equal(a.val.n, 5000);
    assert_int_equal(a.test.n, 10000);
    assert_int_equal(a.train.dim, 784);
    assert_non_null(strstr(a.source, "synthetic"));
    int count[10] = {0};
    double sum = 0;
    for (int i = 0; i < a.train.n; i++) {
        assert_true(a.train.y[i] >= 0 && a.train.y[i] <= 9);
        count[a.train.y[i]]++;
    }
    for (int k = 0; k < 10; k++)
        assert_true(count[k] > 5000 && count[k] < 6000);
    for (size_t i = 0; i < (size_t)a.train.n * 784; i++) {
        assert_true(a.train.x[i] >= 0 && a.train.x[i] <= 1);
        sum += a.train.x[i];
    }
    double mean = sum / ((double)a.train.n * 784);
    assert_true(mean > 0.05 && mean < 0.5);

    /* deterministic for a seed (also with subset: a prefix of the same data) */
    assert_int_equal(nb_mnist_load(&b, "synthetic", NULL, 100, 7, &err), 0);
    assert_int_equal(b.train.n, 100);
    assert_int_equal(b.val.n, 100);
    assert_int_equal(b.test.n, 100);
    assert_memory_equal(a.train.x, b.train.x, 100 * 784 * sizeof(float));
    assert_memory_equal(a.train.y, b.train.y, 100 * sizeof(int));
    assert_memory_equal(a.val.x, b.val.x, 100 * 784 * sizeof(float));
    assert_memory_equal(a.test.y, b.test.y, 100 * sizeof(int));
    /* splits are not copies of each other */
    assert_memory_not_equal(a.train.x, a.test.x, 784 * sizeof(float));

    /* another seed, other data */
    assert_int_equal(nb_mnist_load(&c, "synthetic", NULL, 100, 8, &err), 0);
    assert_memory_not_equal(b.train.x, c.train.x, 100 * 784 * sizeof(float));
    assert_memory_not_equal(b.train.y, c.train.y, 100 * sizeof(int));

    /* learnable: the class means differ more than the noise does (nearest class mean on the test
     * set from train means beats chance by far, and is not perfect) */
    static double mu[10][784];
    memset(mu, 0, sizeof mu);
    for (int i = 0; i < a.train.n; i++)
        for (int j = 0; j < 784; j++)
            mu[a.train.y[i]][j] += a.train.x[(size_t)i * 784 + j] / count[a.train.y[i]];
    int ok = 0;
    for (int i = 0; i < a.test.n; i++) {
        int best = 0;
        double bd = 1e30;
        for (int k = 0; k < 10; k++) {
            double d = 0;
            for (int j = 0; j < 784; j++) {
                double e = a.test.x[(size_t)i * 784 + j] - mu[k][j];
                d += e * e;
            }
            if (d < bd) {
                bd = d;
                best = k;
            }
        }
        ok += best == a.test.y[i];
    }
    double acc = (double)ok / a.test.n;
    fprintf(stderr, "# synthetic nearest-class-mean test accuracy %.3f\n", acc);
    assert_true(acc > 0.5);
    assert_true(acc < 0.99);
    nb_mnist_free(&a);
    nb_mnist_free(&b);
    nb_mnist_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_plain_and_gzip),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_wrong_ndims),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_zero_dim),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_corrupt_gzip),
        cmocka_unit_test(test_decompression_bomb),
        cmocka_unit_test(test_load_small_set),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_data_dir_first),
        cmocka_unit_test(test_fashion_mnist_debian),
        cmocka_unit_test(test_synthetic),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
