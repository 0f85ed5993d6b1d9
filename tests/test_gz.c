/* tests/test_gz.c — datasets/gz.h on gzip streams built here by hand from stored (uncompressed)
 * deflate blocks, so that a flipped data byte still inflates and only the trailer can tell, and
 * so that the data can hold what looks like a member boundary. */
#include "tests/testutil.h"

#include "datasets/gz.h"
#include "util/crc32.h"

static void le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One gzip member holding data[0, n) in a stored block; returns its size (23 + n). */
static size_t member(unsigned char *out, const void *data, uint16_t n) {
    static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    memcpy(out, hdr, 10);
    out[10] = 1; /* BFINAL, stored */
    out[11] = (unsigned char)(n & 0xff);
    out[12] = (unsigned char)(n >> 8);
    out[13] = (unsigned char)(~n & 0xff);
    out[14] = (unsigned char)((~n >> 8) & 0xff);
    memcpy(out + 15, data, n);
    le32(out + 15 + n, nb_crc32(0, data, n));
    le32(out + 19 + n, n);
    return 23 + (size_t)n;
}

/* Reads all of the n bytes at gz; returns 0 with the data in out (*outn bytes), or -1 with err. */
static int read_all(const unsigned char *gz, size_t n, unsigned char *out, size_t cap, size_t *outn,
                    nb_err *err) {
    nb_gz *g;
    *outn = 0;
    if (nb_gz_open_mem(&g, gz, n, "t.gz", err)) return -1;
    for (;;) {
        long long k = nb_gz_read(g, out + *outn, cap - *outn, err);
        if (k < 0) {
            nb_gz_close(g);
            return -1;
        }
        if (k == 0) break;
        *outn += (size_t)k;
    }
    nb_gz_close(g);
    return 0;
}

static unsigned char text[3000], gz[8000], out[8000];

static void fill(void) {
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (unsigned char)('a' + (i * 7 + i / 13) % 26);
}

static void test_one_member(void **state) {
    fill();
    nb_err err;
    size_t n = member(gz, text, 1000), got;
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), 0);
    assert_int_equal(got, 1000);
    assert_memory_equal(out, text, 1000);
    /* a flipped data byte: inflates (a stored block), caught by the CRC-32 */
    gz[15 + 500] ^= 0x04;
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), -1);
    assert_non_null(strstr(err.msg, "'t.gz' is damaged: gzip CRC-32 or length mismatch"));
    gz[15 + 500] ^= 0x04;
    /* the length field */
    gz[n - 4] ^= 0x01;
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), -1);
    assert_non_null(strstr(err.msg, "length mismatch"));
    gz[n - 4] ^= 0x01;
    /* bytes after the member */
    memcpy(gz + n, "junk", 4);
    assert_int_equal(read_all(gz, n + 4, out, sizeof out, &got, &err), -1);
    assert_non_null(strstr(err.msg, "damaged"));
    /* truncated */
    assert_int_equal(read_all(gz, n - 5, out, sizeof out, &got, &err), -1);
}

static void test_members(void **state) {
    fill();
    nb_err err;
    size_t n = 0, got;
    for (int i = 0; i < 20; i++) /* bgzip-like: many members, one empty */
        n += member(gz + n, text + 100 * i, i == 7 ? 0 : 100);
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), 0);
    assert_int_equal(got, 1900);
    assert_memory_equal(out, text, 700);
    assert_memory_equal(out + 700, text + 800, 1200);
    /* a damaged first member among twenty */
    gz[15 + 3] ^= 0x10;
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), -1);
    assert_non_null(strstr(err.msg, "damaged"));
}

/* Data that holds a false boundary: 8 bytes read as a trailer of a 5-byte member, then a gzip
 * header. Two members around it: the reader must find the real boundary among the false one. */
static void test_false_boundary(void **state) {
    fill();
    unsigned char tricky[200];
    memcpy(tricky, text, sizeof tricky);
    static const unsigned char fake[18] = {1,    2, 3, 4, 5, 0, 0, 0, 0x1f,
                                           0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    memcpy(tricky + 50, fake, sizeof fake);
    nb_err err;
    size_t n = member(gz, tricky, sizeof tricky), got;
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), 0); /* one member */
    n += member(gz + n, text, 300);
    n += member(gz + n, tricky, sizeof tricky);
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), 0);
    assert_int_equal(got, 700);
    assert_memory_equal(out + 200, text, 300);
    /* and damage is still found */
    gz[15 + 20] ^= 0x01;
    assert_int_equal(read_all(gz, n, out, sizeof out, &got, &err), -1);
    assert_non_null(strstr(err.msg, "damaged"));
}

static void test_not_gzip(void **state) {
    nb_err err;
    nb_gz *g;
    assert_int_equal(nb_gz_open_mem(&g, "plain text\n", 11, "p.txt", &err), -1);
    assert_non_null(strstr(err.msg, "p.txt"));
    assert_true(nb_gz_magic("\x1f\x8b", 2));
    assert_false(nb_gz_magic("\x1f", 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_member),
        cmocka_unit_test(test_members),
        cmocka_unit_test(test_false_boundary),
        cmocka_unit_test(test_not_gzip),
    };
    return cmocka_run_group_tests_name("gz", tests, NULL, NULL);
}
