/* tests/test_cifar10.c — the CIFAR-10 binary parser and loader (datasets/cifar10.c) on generated
 * batches, whole and damaged, and the synthetic set. */
#include "tests/testutil.h"
#include "datasets/cifar10.h"

#include <sys/stat.h>
#include <unistd.h>

static uint8_t *make_records(int n, uint64_t seed) {
    uint8_t *b = malloc((size_t)n * NB_CIFAR_RECORD);
    uint64_t s = seed;
    for (size_t i = 0; i < (size_t)n * NB_CIFAR_RECORD; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        b[i] = (uint8_t)(s >> 56);
    }
    for (int r = 0; r < n; r++)
        b[(size_t)r * NB_CIFAR_RECORD] = (uint8_t)((r * 7) % 10);
    return b;
}

static void test_parse_good(void **state) {
    (void)state;
    uint8_t *b = make_records(5, 1);
    nb_cifar_raw r;
    nb_err err = {0};
    assert_int_equal(nb_cifar10_parse(b, 5 * NB_CIFAR_RECORD, 5, &r, &err), 0);
    assert_int_equal(r.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r.labels[i], (i * 7) % 10);
        assert_memory_equal(r.pixels + (size_t)i * 3072, b + (size_t)i * NB_CIFAR_RECORD + 1, 3072);
    }
    nb_cifar_raw_free(&r);
    /* any count when none is expected */
    assert_int_equal(nb_cifar10_parse(b, 3 * NB_CIFAR_RECORD, 0, &r, &err), 0);
    assert_int_equal(r.n, 3);
    nb_cifar_raw_free(&r);
    free(b);
}

static void test_parse_damaged(void **state) {
    (void)state;
    uint8_t *b = make_records(4, 2);
    nb_cifar_raw r;
    nb_err err = {0};
    /* truncated by one byte, one extra byte, empty, wrong count */
    assert_int_equal(nb_cifar10_parse(b, 4 * NB_CIFAR_RECORD - 1, 0, &r, &err), -1);
    assert_non_null(strstr(err.msg, "3073-byte records"));
    assert_non_null(strstr(err.hint, "normbench fetch cifar10"));
    assert_null(r.labels);
    assert_int_equal(nb_cifar10_parse(b, 3 * NB_CIFAR_RECORD + 1, 0, &r, &err), -1);
    assert_int_equal(nb_cifar10_parse(b, 0, 0, &r, &err), -1);
    assert_int_equal(nb_cifar10_parse(NULL, 0, 0, &r, &err), -1);
    assert_int_equal(nb_cifar10_parse(b, 4 * NB_CIFAR_RECORD, 10000, &r, &err), -1);
    assert_non_null(strstr(err.msg, "expected 10000"));
    /* a label out of range, named with its record */
    b[2 * NB_CIFAR_RECORD] = 10;
    assert_int_equal(nb_cifar10_parse(b, 4 * NB_CIFAR_RECORD, 0, &r, &err), -1);
    assert_non_null(strstr(err.msg, "label 10 in record 2"));
    assert_null(r.pixels);
    free(b);
}

/* A file of n bytes whose first `head` bytes are b and the rest zeros (sparse: no disk I/O). */
static void write_sparse(const char *path, const uint8_t *b, size_t head, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, head, f), head);
    assert_int_equal(ftruncate(fileno(f), (off_t)n), 0);
    assert_int_equal(fclose(f), 0);
}

/* A data directory with six generated batches of the real size; the loader reads them, scales
 * them, and cuts the subset; damaged and missing files are refused by name. */
static void test_load_files(void **state) {
    (void)state;
    char dir[] = "/tmp/nb_cifar_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256], path[512];
    snprintf(sub, sizeof sub, "%s/cifar10", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    const char *names[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                            "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    uint8_t *b = make_records(8, 3);
    nb_image_set s;
    nb_err err = {0};
    /* missing: the error names the path and hints the fetch */
    assert_int_equal(nb_cifar_load(&s, "cifar10", dir, 0, 1, 0, &err), -1);
    assert_non_null(strstr(err.msg, "data_batch_1.bin"));
    assert_non_null(strstr(err.hint, "normbench fetch cifar10"));
    for (int f = 0; f < 6; f++) {
        snprintf(path, sizeof path, "%s/%s", sub, names[f]);
        b[0] = (uint8_t)f; /* first label tells the files apart */
        write_sparse(path, b, 8 * NB_CIFAR_RECORD, NB_CIFAR_FILE_BYTES);
    }
    assert_int_equal(nb_cifar_load(&s, "cifar10", dir, 1000, 1, 0, &err), 0);
    assert_int_equal(s.train.n, 1000);
    assert_int_equal(s.test.n, 1000);
    assert_int_equal(s.train.C, 3);
    assert_int_equal(s.test.y[0], 5);
    assert_int_equal(s.train.y[1], 7);
    /* (x - 127.5)/128 of record 1's first pixel */
    assert_close(s.train.x[3072], (b[NB_CIFAR_RECORD + 1] - 127.5) / 128.0, 1e-7, 0);
    nb_image_set_free(&s);
    /* a truncated file is refused by name before it is read */
    snprintf(path, sizeof path, "%s/%s", sub, names[0]);
    write_sparse(path, b, 8 * NB_CIFAR_RECORD, NB_CIFAR_FILE_BYTES - 5);
    assert_int_equal(nb_cifar_load(&s, "cifar10", dir, 0, 1, 0, &err), -1);
    assert_non_null(strstr(err.msg, "data_batch_1.bin"));
    assert_non_null(strstr(err.msg, "expected 30730000"));
    /* a bad label in a full-size file */
    b[5 * NB_CIFAR_RECORD] = 200;
    write_sparse(path, b, 8 * NB_CIFAR_RECORD, NB_CIFAR_FILE_BYTES);
    nb_cifar_raw raw;
    assert_int_equal(nb_cifar10_read(path, &raw, &err), -1);
    assert_non_null(strstr(err.msg, "data_batch_1.bin"));
    assert_non_null(strstr(err.msg, "label 200 in record 5"));
    for (int f = 0; f < 6; f++) {
        snprintf(path, sizeof path, "%s/%s", sub, names[f]);
        unlink(path);
    }
    rmdir(sub);
    rmdir(dir);
    free(b);
    /* unknown dataset */
    assert_int_equal(nb_cifar_load(&s, "cifar100", dir, 0, 1, 0, &err), -1);
    assert_non_null(strstr(err.msg, "cifar100"));
}

static void test_synthetic(void **state) {
    (void)state;
    nb_image_set a, b;
    nb_err err = {0};
    assert_int_equal(nb_cifar_synthetic(&a, 300, 4, &err), 0);
    assert_int_equal(nb_cifar_synthetic(&b, 300, 4, &err), 0);
    assert_int_equal(a.train.n, 300);
    assert_memory_equal(a.train.x, b.train.x, sizeof(float) * 300 * 3072);
    int seen[10] = {0};
    for (int i = 0; i < 300; i++) {
        assert_true(a.train.y[i] >= 0 && a.train.y[i] < 10);
        seen[a.train.y[i]]++;
    }
    for (int c = 0; c < 10; c++)
        assert_true(seen[c] > 10);
    nb_image_set_free(&b);
    assert_int_equal(nb_cifar_synthetic(&b, 300, 5, &err), 0);
    assert_true(memcmp(a.train.x, b.train.x, sizeof(float) * 3072) != 0);
    nb_image_set_free(&a);
    nb_image_set_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_damaged),
        cmocka_unit_test(test_load_files),
        cmocka_unit_test(test_synthetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
