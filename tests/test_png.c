/* tests/test_png.c — util/png.c: the PNG read back by a decoder written here for stored deflate
 * blocks (signature, IHDR, each chunk's CRC, the zlib header, the blocks' lengths, the Adler-32,
 * every pixel), at sizes whose data fits one block, ends a block exactly and spans several; the
 * Adler-32 against known values; sides out of range refused. */
#include "tests/testutil.h"
#include "util/crc32.h"
#include "util/png.h"

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Decodes png (stored blocks only) and compares it with pix (w x h). */
static void check_png(const unsigned char *png, size_t len, const uint8_t *pix, int w, int h) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    assert_true(len > 8 + 25 + 12 + 12);
    assert_memory_equal(png, sig, 8);
    size_t at = 8, zn = 0;
    unsigned char *z = malloc(len);
    int seen_end = 0, chunks = 0;
    while (at + 12 <= len) {
        uint32_t n = get32(png + at);
        assert_true(at + 12 + n <= len);
        const unsigned char *type = png + at + 4, *data = png + at + 8;
        assert_int_equal(get32(data + n), nb_crc32(0, type, n + 4));
        if (chunks == 0) {
            assert_memory_equal(type, "IHDR", 4);
            assert_int_equal(n, 13);
            assert_int_equal(get32(data), (uint32_t)w);
            assert_int_equal(get32(data + 4), (uint32_t)h);
            assert_memory_equal(data + 8, "\x08\x00\x00\x00\x00", 5);
        } else if (memcmp(type, "IDAT", 4) == 0) {
            memcpy(z + zn, data, n);
            zn += n;
        } else {
            assert_memory_equal(type, "IEND", 4);
            assert_int_equal(n, 0);
            seen_end = 1;
        }
        chunks++;
        at += 12 + n;
    }
    assert_true(seen_end);
    assert_int_equal(at, len);
    /* zlib: header, stored blocks, Adler-32 of the raw rows */
    assert_int_equal((z[0] * 256 + z[1]) % 31, 0);
    assert_int_equal(z[0] & 0x0f, 8);
    const size_t raw_n = (size_t)h * (w + 1);
    unsigned char *raw = malloc(raw_n + 1);
    size_t zi = 2, ri = 0;
    int final = 0;
    while (!final) {
        assert_true(zi + 5 <= zn);
        final = z[zi] & 1;
        assert_int_equal(z[zi] >> 1, 0); /* stored */
        unsigned n = z[zi + 1] | z[zi + 2] << 8, nn = z[zi + 3] | z[zi + 4] << 8;
        assert_int_equal(n ^ 0xffff, nn);
        zi += 5;
        assert_true(ri + n <= raw_n && zi + n <= zn);
        memcpy(raw + ri, z + zi, n);
        ri += n;
        zi += n;
    }
    assert_int_equal(ri, raw_n);
    assert_int_equal(zn, zi + 4);
    assert_int_equal(get32(z + zi), nb_adler32(1, raw, raw_n));
    for (int y = 0; y < h; y++) {
        assert_int_equal(raw[(size_t)y * (w + 1)], 0);
        assert_memory_equal(raw + (size_t)y * (w + 1) + 1, pix + (size_t)y * w, (size_t)w);
    }
    free(raw);
    free(z);
}

static void test_sizes(void **state) {
    (void)state;
    /* one block; 65,535 raw bytes exactly (255 rows of 256: a block ends at the data's end);
     * several blocks with rows split across them */
    const int sizes[][2] = {{1, 1}, {29, 17}, {256, 255}, {300, 301}, {1000, 200}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int w = sizes[k][0], h = sizes[k][1];
        uint8_t *pix = malloc((size_t)w * h);
        for (size_t i = 0; i < (size_t)w * h; i++)
            pix[i] = (uint8_t)(i * 7 + i / 13);
        unsigned char *png;
        size_t len;
        nb_err err;
        assert_int_equal(nb_png_gray(pix, w, h, &png, &len, &err), 0);
        check_png(png, len, pix, w, h);
        free(png);
        free(pix);
    }
}

static void test_adler(void **state) {
    (void)state;
    assert_int_equal(nb_adler32(1, "Wikipedia", 9), 0x11E60398u);
    assert_int_equal(nb_adler32(1, NULL, 0), 1u);
    /* long input (past zlib's NMAX), in pieces or whole */
    enum { N = 100000 };
    unsigned char *b = malloc(N);
    for (int i = 0; i < N; i++)
        b[i] = 0xff;
    uint32_t whole = nb_adler32(1, b, N), parts = nb_adler32(nb_adler32(1, b, 7777), b, N - 7777);
    assert_int_equal(whole, parts);
    /* s1 = 1 + 255 N, s2 = N + 255 N (N + 1) / 2, both mod 65521 */
    uint64_t s1 = (1 + 255ull * N) % 65521, s2 = (N + 255ull * N * (N + 1) / 2) % 65521;
    assert_int_equal(whole, (uint32_t)(s2 << 16 | s1));
    free(b);
}

static void test_refused(void **state) {
    (void)state;
    uint8_t px = 0;
    unsigned char *png = (unsigned char *)&px;
    size_t len = 1;
    nb_err err;
    assert_int_equal(nb_png_gray(&px, 0, 1, &png, &len, &err), -1);
    assert_null(png);
    assert_non_null(strstr(err.msg, "0 x 1"));
    assert_int_equal(nb_png_gray(&px, 1, NB_PNG_MAXSIDE + 1, &png, &len, &err), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sizes), cmocka_unit_test(test_adler),
                                       cmocka_unit_test(test_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
