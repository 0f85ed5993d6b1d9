/* datasets/gz.h — gzip files decompressed by libarchive, with the checks its gzip filter skips.
 *
 * libarchive's gzip filter inflates each member but never compares the trailer (RFC 1952: the
 * CRC-32 and the length mod 2^32 of the member's data) with what it produced, so a flipped byte
 * that still inflates is read as good data. This reader feeds libarchive the compressed bytes
 * itself, computes the CRC-32 and length of everything it hands out, and at the end of the
 * stream checks them against the trailers: the last member's, or, for a file of several
 * concatenated members (cat a.gz b.gz, bgzip), every member's trailer combined (util/crc32.h).
 * Member boundaries are found by their headers (1f 8b 08 ...) right after an 8-byte trailer;
 * where the compressed data happens to hold that pattern too, up to 12 such candidates are tried
 * in every combination (a file of more members that also holds a false one is refused). Data
 * after the last member, a truncated stream or a mismatch is an error naming the file. */
#ifndef NB_DATASETS_GZ_H
#define NB_DATASETS_GZ_H

#include <signal.h>
#include <stddef.h>

#include "util/err.h"

typedef struct nb_gz nb_gz;

/* Whether the n bytes at p start like a gzip stream (1f 8b). */
int nb_gz_magic(const void *p, size_t n);

/* Opens the gzip file at path. stop (may be NULL): when it becomes non-zero, the next read fails
 * with an "interrupted" error. Returns 0 and sets *out, or -1 with err (cannot open, not gzip, an
 * empty or undecodable stream); the caller adds its hint. */
int nb_gz_open(nb_gz **out, const char *path, volatile sig_atomic_t *stop, nb_err *err);

/* Opens size bytes at data (kept by the caller until nb_gz_close), called name in errors. */
int nb_gz_open_mem(nb_gz **out, const void *data, size_t size, const char *name, nb_err *err);

/* Reads up to n decompressed bytes into buf. Returns how many (> 0), 0 at the end of the
 * stream once every trailer has been checked, or -1 with err naming the file (damaged,
 * truncated, a CRC-32 or length mismatch, data after the last member, a read error, stopped). */
long long nb_gz_read(nb_gz *g, void *buf, size_t n, nb_err *err);

/* Closes g (NULL is fine). */
void nb_gz_close(nb_gz *g);

#endif
