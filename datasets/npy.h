/* datasets/npy.h — NumPy .npy arrays of little-endian float32 in C order (the COCO image
 * features of the order-embedding data, docs/papers.md#order-data).
 *
 * Format: magic "\x93NUMPY", version 1.0 (u16 LE header length) or 2.0 (u32 LE), then an ASCII
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, M), } padded with
 * spaces and ended by '\n', so that the data starts at a multiple of 16 bytes (numpy aligns to
 * 64 since 1.14 and to 16 before), then the raw data. The parser is strict: every key exactly
 * once and no other, descr '<f4' only, fortran_order False only, shape a tuple of at most
 * NB_NPY_MAXDIM non-negative integers (a Python 2 'L' suffix allowed), the header's padding and
 * alignment, and the exact data length (truncated or trailing bytes are errors); NaN or
 * infinite values are refused. */
#ifndef NB_DATASETS_NPY_H
#define NB_DATASETS_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

#define NB_NPY_MAXDIM 8
/* The largest array accepted: 2^32 values (16 GiB of float32). */
#define NB_NPY_MAX_COUNT ((uint64_t)1 << 32)

typedef struct nb_npy {
    int ndim;
    uint64_t shape[NB_NPY_MAXDIM];
    uint64_t count;  /* product of shape (1 for a 0-d array) */
    size_t data_off; /* bytes before the data */
    float *data;     /* (count) values, owned (free with nb_npy_free); NULL after a header parse */
    uint64_t rows_read; /* rows of shape[0] actually held in data (nb_npy_load with max_rows) */
} nb_npy;

/* Parses the header at the start of buf (n bytes, at least the whole header). Fills ndim, shape,
 * count and data_off; data stays NULL. Returns 0, or -1 with err (what is wrong, where). */
int nb_npy_parse_header(const uint8_t *buf, size_t n, nb_npy *out, nb_err *err);

/* Parses a whole in-memory .npy file: the header, then exactly count*4 bytes of data, copied
 * into out->data. Returns 0, or -1 with err and *out owning nothing. */
int nb_npy_parse(const uint8_t *buf, size_t n, nb_npy *out, nb_err *err);

/* Reads path. The file's size must be exactly header + count*4. max_rows > 0 reads only the
 * first max_rows rows (of shape[0]) of a 1-d or larger array; 0 reads everything. Errors name
 * the file. Returns 0, or -1 with err and *out owning nothing. */
int nb_npy_load(const char *path, uint64_t max_rows, nb_npy *out, nb_err *err);

void nb_npy_free(nb_npy *a); /* frees data and zeroes; a may be NULL */

#endif
