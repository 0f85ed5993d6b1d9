/* datasets/zca.h — ZCA whitening as the WeightNorm code fits it for CIFAR-10
 * (docs/papers.md#cifar-data):
 *   m = mean of the training rows;  S = (X - m)^T (X - m) / N;  S = U diag(s) U^T;
 *   W = U diag(1 / sqrt(s + reg)) U^T;  a row x is whitened as (x - m) W.
 * Fitted in double (the covariance accumulated with dsyrk over row chunks, the eigendecomposition
 * by LAPACK dsyevd from OpenBLAS); applied in float. */
#ifndef NB_DATASETS_ZCA_H
#define NB_DATASETS_ZCA_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct nb_zca {
    int D;        /* dimensions */
    double reg;   /* regularisation added to the eigenvalues */
    double *mean; /* (D) */
    float *W;     /* (D, D), symmetric */
} nb_zca;

/* Fits on x (N, D). Returns 0, or -1 with err (memory, or LAPACK failing to converge). */
int nb_zca_fit(nb_zca *z, const float *x, int N, int D, double reg, nb_err *err);

/* Whitens x (N, D) into y (N, D) (y may not alias x). */
void nb_zca_apply(const nb_zca *z, float *y, const float *x, int N);

void nb_zca_free(nb_zca *z);

/* Saves to path atomically (temporary file, fsync, rename) with `key` (e.g. the dataset's
 * checksum) so that a cache made from other data is never used. */
int nb_zca_save(const nb_zca *z, const char *path, const char *key, nb_err *err);

/* Loads path if it exists and was made with `key` and D; returns 1 when loaded, 0 when absent or
 * made for other data (the caller refits), -1 with err when the file is damaged. */
int nb_zca_load(nb_zca *z, const char *path, const char *key, int D, nb_err *err);

#endif
