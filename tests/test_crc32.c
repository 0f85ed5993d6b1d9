/* tests/test_crc32.c — util/crc32.h against published check values, a bit-at-a-time reference,
 * and the combination rule. */
#include "tests/testutil.h"

#include "util/crc32.h"

/* The definition, one bit at a time: the oracle for the sliced tables. */
static uint32_t crc_ref(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return ~c;
}

static void test_vectors(void **state) {
    assert_int_equal(nb_crc32(0, NULL, 0), 0);
    assert_int_equal(nb_crc32(0, "123456789", 9), 0xcbf43926u); /* the CRC catalogue's check */
    assert_int_equal(nb_crc32(0, "a", 1), 0xe8b7be43u);
    assert_int_equal(nb_crc32(0, "abc", 3), 0x352441c2u);
    const char *fox = "The quick brown fox jumps over the lazy dog";
    assert_int_equal(nb_crc32(0, fox, strlen(fox)), 0x414fa339u);
    unsigned char z[32] = {0}, ff[32];
    memset(ff, 0xff, sizeof ff);
    assert_int_equal(nb_crc32(0, z, 32), 0x190a55adu); /* RFC 3720 B.4 inputs, CRC-32 values */
    assert_int_equal(nb_crc32(0, ff, 32), 0xff6cab0bu);
}

static void test_sliced_matches_reference(void **state) {
    unsigned char buf[1100];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    /* every alignment and every tail length around the 8-byte stride */
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += n < 40 ? 1 : 97)
            assert_int_equal(nb_crc32(0, buf + off, n), crc_ref(0, buf + off, n));
    /* chaining: any split gives the CRC of the whole */
    uint32_t whole = nb_crc32(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut += 37)
        assert_int_equal(nb_crc32(nb_crc32(0, buf, cut), buf + cut, sizeof buf - cut), whole);
}

static void test_combine(void **state) {
    unsigned char buf[5000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 7 + (i >> 5));
    uint32_t whole = nb_crc32(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut += 251) {
        uint32_t a = nb_crc32(0, buf, cut), b = nb_crc32(0, buf + cut, sizeof buf - cut);
        assert_int_equal(nb_crc32_combine(a, b, sizeof buf - cut), whole);
    }
    /* three pieces, and an empty one */
    uint32_t a = nb_crc32(0, buf, 100), b = nb_crc32(0, buf + 100, 0),
             c = nb_crc32(0, buf + 100, 4900);
    assert_int_equal(nb_crc32_combine(nb_crc32_combine(a, b, 0), c, 4900), whole);
    /* a long run of zeros, combined without being read: CRC(z^n) for n = 2^20 */
    size_t n = (size_t)1 << 20;
    unsigned char *zeros = calloc(n, 1);
    assert_non_null(zeros);
    uint32_t zc = nb_crc32(0, zeros, n);
    assert_int_equal(nb_crc32_combine(nb_crc32(0, "x", 1), zc, n),
                     nb_crc32(nb_crc32(0, "x", 1), zeros, n));
    free(zeros);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_sliced_matches_reference),
        cmocka_unit_test(test_combine),
    };
    return cmocka_run_group_tests_name("crc32", tests, NULL, NULL);
}
