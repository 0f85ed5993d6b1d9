/* util/png.h — a grayscale PNG in memory, without a compression library: 8-bit gray, no
 * interlace, every row filter 0, the image data one zlib stream of stored (uncompressed) deflate
 * blocks with its Adler-32, each chunk with its CRC-32 (util/crc32.h). The file is about the
 * pixels' size (plus 6 bytes per 65,535): fine for the small grids normbench writes. */
#ifndef NB_UTIL_PNG_H
#define NB_UTIL_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* The largest side nb_png_gray takes. */
#define NB_PNG_MAXSIDE 16384

/* The PNG of a w x h image (pix: h rows of w bytes, 0 black .. 255 white), newly allocated into
 * *out (*len its bytes). Returns 0, or -1 with err (a side outside 1..NB_PNG_MAXSIDE, out of
 * memory). */
int nb_png_gray(const uint8_t *pix, int w, int h, unsigned char **out, size_t *len, nb_err *err);

/* The Adler-32 of n bytes (zlib's checksum), continuing from a (1 for none). */
uint32_t nb_adler32(uint32_t a, const void *buf, size_t n);

#endif
