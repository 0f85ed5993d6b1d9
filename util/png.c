/* util/png.c — a grayscale PNG of stored deflate blocks (util/png.h). */
#include "util/png.h"

#include <stdlib.h>
#include <string.h>

#include "util/crc32.h"

uint32_t nb_adler32(uint32_t a, const void *buf, size_t n) {
    const unsigned char *p = buf;
    uint32_t s1 = a & 0xffff, s2 = a >> 16;
    while (n > 0) {
        size_t k = n < 5552 ? n : 5552; /* zlib's NMAX: no overflow before the modulo */
        n -= k;
        while (k--) {
            s1 += *p++;
            s2 += s1;
        }
        s1 %= 65521;
        s2 %= 65521;
    }
    return s2 << 16 | s1;
}

static unsigned char *put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

/* A chunk at p: length, type, the n bytes of data (already at p + 8), CRC of type and data. */
static unsigned char *chunk(unsigned char *p, const char *type, size_t n) {
    put32(p, (uint32_t)n);
    memcpy(p + 4, type, 4);
    return put32(p + 8 + n, nb_crc32(0, p + 4, n + 4));
}

int nb_png_gray(const uint8_t *pix, int w, int h, unsigned char **out, size_t *len, nb_err *err) {
    *out = NULL;
    *len = 0;
    if (w < 1 || h < 1 || w > NB_PNG_MAXSIDE || h > NB_PNG_MAXSIDE)
        return nb_errf(err, "a PNG of %d x %d pixels: each side must be 1..%d", w, h,
                       NB_PNG_MAXSIDE);
    const size_t raw = (size_t)h * ((size_t)w + 1); /* a filter byte before each row */
    const size_t nblocks = raw / 65535 + 1;         /* the last may be short (or empty) */
    const size_t zlen = 2 + raw + 5 * nblocks + 4;
    const size_t total = 8 + (12 + 13) + (12 + zlen) + 12;
    unsigned char *buf = malloc(total), *p = buf;
    if (!buf) return nb_errf(err, "out of memory for a PNG of %d x %d pixels", w, h);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(p, sig, 8);
    p += 8;
    unsigned char *d = p + 8; /* IHDR: width, height, depth 8, gray, deflate, filter 0, none */
    d = put32(d, (uint32_t)w);
    d = put32(d, (uint32_t)h);
    memcpy(d, "\x08\x00\x00\x00\x00", 5);
    p = chunk(p, "IHDR", 13);
    d = p + 8;
    *d++ = 0x78; /* zlib: deflate, 32K window; 0x7801 is a multiple of 31 */
    *d++ = 0x01;
    uint32_t adler = 1;
    size_t row = 0, col = 0; /* the next raw byte: row, and its position (0: the filter byte) */
    for (size_t b = 0; b < nblocks; b++) {
        size_t n = raw - b * 65535 < 65535 ? raw - b * 65535 : 65535;
        *d++ = b + 1 == nblocks; /* BFINAL, BTYPE 00 (stored) */
        d[0] = (unsigned char)n, d[1] = (unsigned char)(n >> 8);
        d[2] = (unsigned char)~n, d[3] = (unsigned char)(~n >> 8);
        d += 4;
        unsigned char *start = d;
        while (n > 0) {
            if (col == 0) {
                *d++ = 0; /* filter: none */
                n--;
                col = 1;
                continue;
            }
            size_t k = (size_t)w + 1 - col < n ? (size_t)w + 1 - col : n;
            memcpy(d, pix + row * (size_t)w + (col - 1), k);
            d += k;
            n -= k;
            col += k;
            if (col == (size_t)w + 1) col = 0, row++;
        }
        adler = nb_adler32(adler, start, (size_t)(d - start));
    }
    d = put32(d, adler);
    p = chunk(p, "IDAT", (size_t)(d - (p + 8)));
    p = chunk(p, "IEND", 0);
    *out = buf;
    *len = (size_t)(p - buf);
    return 0;
}
