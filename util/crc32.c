/* util/crc32.c — see crc32.h.
 *
 * Slice-by-8: t[0] is the classic byte table (the CRC of each byte value); t[k][b] is the CRC of
 * byte b followed by k zero bytes, so eight input bytes are folded with eight lookups. */
#include "util/crc32.h"

#include <pthread.h>

#define POLY 0xedb88320u

static uint32_t tab[8][256];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_build(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        tab[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++)
            tab[k][b] = (tab[k - 1][b] >> 8) ^ tab[0][tab[k - 1][b] & 0xff];
}

uint32_t nb_crc32(uint32_t crc, const void *buf, size_t n) {
    pthread_once(&tab_once, tab_build);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (n >= 8) {
        /* little-endian assembly by hand: correct on any byte order */
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = tab[7][lo & 0xff] ^ tab[6][(lo >> 8) & 0xff] ^ tab[5][(lo >> 16) & 0xff] ^
            tab[4][lo >> 24] ^ tab[3][p[4]] ^ tab[2][p[5]] ^ tab[1][p[6]] ^ tab[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
    return ~c;
}

/* Polynomials over GF(2) modulo the CRC polynomial, reflected: bit 31 is x^0, bit 0 is x^31. */

/* a * b mod P. */
static uint32_t mulmod(uint32_t a, uint32_t b) {
    uint32_t prod = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m) prod ^= b;
        b = b & 1 ? (b >> 1) ^ POLY : b >> 1; /* b *= x */
    }
    return prod;
}

/* x^(8 * len) mod P: the factor that shifts a CRC past len zero bytes. */
static uint32_t xpow8(uint64_t len) {
    uint32_t r = 1u << 31;  /* 1 */
    uint32_t sq = 1u << 23; /* x^8 */
    for (; len; len >>= 1) {
        if (len & 1) r = mulmod(r, sq);
        sq = mulmod(sq, sq);
    }
    return r;
}

uint32_t nb_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
    /* The pre- and post-inversions cancel out: CRC(AB) = CRC(A) * x^(8|B|) + CRC(B). */
    return mulmod(crc1, xpow8(len2)) ^ crc2;
}
