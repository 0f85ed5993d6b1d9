/* util/crc32.h — CRC-32 as gzip, zip and PNG use it (ISO-HDLC: reflected polynomial 0xedb88320,
 * initial and final value 0xffffffff), computed slice-by-8.
 *
 * The value chains: nb_crc32(nb_crc32(0, a, na), b, nb) == nb_crc32(0, ab, na + nb), and the CRC
 * of no bytes is 0, so a running CRC starts at 0. */
#ifndef NB_UTIL_CRC32_H
#define NB_UTIL_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 of crc's bytes followed by the n bytes at buf. buf may be NULL when n is 0.
 * Thread-safe (the tables are built once, on first use). */
uint32_t nb_crc32(uint32_t crc, const void *buf, size_t n);

/* The CRC-32 of A followed by B, from crc1 = CRC(A), crc2 = CRC(B) and len2 = |B| bytes, without
 * the bytes themselves (O(log len2)). */
uint32_t nb_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

#endif
