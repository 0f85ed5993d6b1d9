/* datasets/amat.h — Larochelle's binarized MNIST text files (binarized_mnist_{train,valid,test}
 * .amat, Larochelle & Murray 2011; the data of DRAW and of the LayerNorm paper's §6.4).
 *
 * The format: one image a line, 784 values, each the single character '0' or '1', separated by
 * single spaces; lines end in '\n'. Liberal only at the ends: spaces, tabs or a '\r' after the
 * last value of a line (at most NB_AMAT_MAX_TRAIL bytes) and a missing final newline are
 * accepted. Anything else is an error naming the file, the line (from 1) and the value: another
 * token ("0.0", "2", "01"), two spaces in a row, a leading space, a short or long line, an empty
 * line, or a line count other than the one expected. The file is read in fixed chunks and parsed
 * as it streams, so a huge line or a huge file is refused after at most one line's worth of bytes
 * past the error, never read whole. */
#ifndef NB_DATASETS_AMAT_H
#define NB_DATASETS_AMAT_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define NB_AMAT_DIM 784
/* The most lines a file may hold when no count is expected (the fuzz target's bound). */
#define NB_AMAT_MAX_LINES 100000
/* The most whitespace bytes accepted after a line's last value. */
#define NB_AMAT_MAX_TRAIL 16

typedef struct nb_amat {
    int n;      /* lines (images) */
    uint8_t *x; /* (n, NB_AMAT_DIM), each 0 or 1; owned, free() or nb_amat_free */
} nb_amat;

/* Reads path, which must be a regular file of exactly expect_n lines (expect_n in
 * 1..NB_AMAT_MAX_LINES; 0: any count up to NB_AMAT_MAX_LINES, at least 1). Returns 0 and fills
 * *out, or -1 with err ("'PATH' line L: ...", and a hint) and *out zeroed. */
int nb_amat_read(const char *path, int expect_n, nb_amat *out, nb_err *err);

/* nb_amat_read on bytes in memory; name stands for the file in messages (the fuzzing entry). */
int nb_amat_read_mem(const void *data, size_t size, const char *name, int expect_n, nb_amat *out,
                     nb_err *err);

void nb_amat_free(nb_amat *a); /* frees and zeroes; a may be NULL */

#endif
