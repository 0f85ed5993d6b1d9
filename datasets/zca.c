/* datasets/zca.c — see zca.h. */
#include "datasets/zca.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/file.h"

/* LAPACK's symmetric eigensolver (divide and conquer), as OpenBLAS exports it. */
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
                    double *w, double *work, const int *lwork, int *iwork, const int *liwork,
                    int *info);

void nb_zca_free(nb_zca *z) {
    free(z->mean);
    free(z->W);
    memset(z, 0, sizeof *z);
}

int nb_zca_fit(nb_zca *z, const float *x, int N, int D, double reg, nb_err *err) {
    memset(z, 0, sizeof *z);
    if (N < 2 || D < 1) return nb_errf(err, "ZCA needs at least 2 rows, not %d", N);
    enum { CHUNK = 512 };
    int rc = -1;
    double *S = calloc((size_t)D * D, sizeof *S), *U = NULL, *ev = NULL, *work = NULL;
    double *chunk = malloc((size_t)CHUNK * D * sizeof *chunk);
    int *iwork = NULL;
    z->mean = calloc((size_t)D, sizeof *z->mean);
    z->W = malloc((size_t)D * D * sizeof *z->W);
    if (!S || !chunk || !z->mean || !z->W) goto oom;
    z->D = D;
    z->reg = reg;
    for (size_t i = 0; i < (size_t)N; i++)
        for (int d = 0; d < D; d++)
            z->mean[d] += x[i * D + d];
    for (int d = 0; d < D; d++)
        z->mean[d] /= N;
    /* S = sum over chunks of Xc^T Xc, lower triangle, in double. */
    for (int i0 = 0; i0 < N; i0 += CHUNK) {
        int n = N - i0 < CHUNK ? N - i0 : CHUNK;
        for (size_t i = 0; i < (size_t)n; i++)
            for (int d = 0; d < D; d++)
                chunk[i * D + d] = (double)x[(size_t)(i0 + i) * D + d] - z->mean[d];
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, D, n, 1.0 / N, chunk, D, 1.0, S, D);
    }
    /* Row-major lower = column-major upper. */
    int lwork = -1, liwork = -1, info = 0, n = D;
    double wq;
    int iq;
    dsyevd_("V", "U", &n, S, &n, NULL, &wq, &lwork, &iq, &liwork, &info);
    lwork = (int)wq;
    liwork = iq;
    ev = malloc((size_t)D * sizeof *ev);
    work = malloc((size_t)lwork * sizeof *work);
    iwork = malloc((size_t)liwork * sizeof *iwork);
    if (!ev || !work || !iwork) goto oom;
    dsyevd_("V", "U", &n, S, &n, ev, work, &lwork, iwork, &liwork, &info);
    if (info != 0) {
        nb_errf(err, "the ZCA eigendecomposition failed (LAPACK dsyevd info %d)", info);
        goto out;
    }
    /* Column-major eigenvectors: column k of U is S[k*D .. k*D+D-1], i.e. row k of the row-major
     * array, so with E (row k = eigenvector k): W = E^T diag(1/sqrt(ev+reg)) E. */
    U = malloc((size_t)D * D * sizeof *U);
    if (!U) goto oom;
    for (int k = 0; k < D; k++) {
        double s = 1.0 / sqrt((ev[k] > 0 ? ev[k] : 0) + reg);
        for (int d = 0; d < D; d++)
            U[(size_t)k * D + d] = S[(size_t)k * D + d] * s;
    }
    double *Wd = chunk; /* reuse when large enough */
    if ((size_t)CHUNK * D < (size_t)D * D) {
        Wd = malloc((size_t)D * D * sizeof *Wd);
        if (!Wd) goto oom;
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, D, D, 1.0, S, D, U, D, 0.0, Wd, D);
    for (size_t i = 0; i < (size_t)D * D; i++)
        z->W[i] = (float)Wd[i];
    if (Wd != chunk) free(Wd);
    rc = 0;
    goto out;
oom:
    nb_errf(err, "out of memory for a %dx%d ZCA", D, D);
out:
    free(S), free(U), free(ev), free(work), free(iwork), free(chunk);
    if (rc) nb_zca_free(z);
    return rc;
}

void nb_zca_apply(const nb_zca *z, float *y, const float *x, int N) {
    int D = z->D;
    /* y = x W - m W: the constant row m W once, then one gemm. */
    float *mw = malloc((size_t)D * sizeof *mw);
    float *m = malloc((size_t)D * sizeof *m);
    if (!mw || !m) { /* fall back to centering row by row (slow, still correct) */
        free(mw), free(m);
        for (size_t i = 0; i < (size_t)N; i++)
            for (int e = 0; e < D; e++) {
                double s = 0;
                for (int d = 0; d < D; d++)
                    s += ((double)x[i * D + d] - z->mean[d]) * z->W[(size_t)d * D + e];
                y[i * D + e] = (float)s;
            }
        return;
    }
    for (int d = 0; d < D; d++)
        m[d] = (float)z->mean[d];
    cblas_sgemv(CblasRowMajor, CblasTrans, D, D, 1.0f, z->W, D, m, 1, 0.0f, mw, 1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, D, D, 1.0f, x, D, z->W, D, 0.0f, y,
                D);
    for (size_t i = 0; i < (size_t)N; i++)
        for (int e = 0; e < D; e++)
            y[i * D + e] -= mw[e];
    free(mw);
    free(m);
}

static const char zca_magic[8] = "NBZCA01";

int nb_zca_save(const nb_zca *z, const char *path, const char *key, nb_err *err) {
    nb_atomic a;
    if (nb_atomic_open(&a, path, 0666, err))
        return nb_errf(err, "cannot write ZCA cache '%s': %s", path, strerror(errno));
    FILE *f = a.f;
    char k[128] = {0};
    snprintf(k, sizeof k, "%s", key);
    int32_t D = z->D;
    int ok = fwrite(zca_magic, 1, 8, f) == 8 && fwrite(k, 1, sizeof k, f) == sizeof k &&
             fwrite(&D, sizeof D, 1, f) == 1 && fwrite(&z->reg, sizeof z->reg, 1, f) == 1 &&
             fwrite(z->mean, sizeof *z->mean, (size_t)D, f) == (size_t)D &&
             fwrite(z->W, sizeof *z->W, (size_t)D * D, f) == (size_t)D * D &&
             fwrite(zca_magic, 1, 8, f) == 8;
    if (!ok) {
        int saved = errno;
        nb_atomic_abort(&a);
        return nb_errf(err, "cannot write ZCA cache '%s': %s", path, strerror(saved));
    }
    if (nb_atomic_commit(&a, err))
        return nb_errf(err, "cannot write ZCA cache '%s': %s", path, strerror(errno));
    return 0;
}

int nb_zca_load(nb_zca *z, const char *path, const char *key, int D, nb_err *err) {
    memset(z, 0, sizeof *z);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[8], k[128], want[128] = {0};
    snprintf(want, sizeof want, "%s", key);
    int32_t d = 0;
    double reg = 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, zca_magic, 8) != 0 ||
        fread(k, 1, sizeof k, f) != sizeof k || fread(&d, sizeof d, 1, f) != 1 ||
        fread(&reg, sizeof reg, 1, f) != 1) {
        fclose(f);
        return nb_errf(err, "ZCA cache '%s' is damaged", path), nb_hintf(err, "delete it");
    }
    if (memcmp(k, want, sizeof k) != 0 || d != D) {
        fclose(f);
        return 0; /* made from other data: refit */
    }
    z->mean = malloc((size_t)D * sizeof *z->mean);
    z->W = malloc((size_t)D * D * sizeof *z->W);
    int ok = z->mean && z->W && fread(z->mean, sizeof *z->mean, (size_t)D, f) == (size_t)D &&
             fread(z->W, sizeof *z->W, (size_t)D * D, f) == (size_t)D * D &&
             fread(magic, 1, 8, f) == 8 && memcmp(magic, zca_magic, 8) == 0 && fgetc(f) == EOF;
    fclose(f);
    if (!ok) {
        nb_zca_free(z);
        return nb_errf(err, "ZCA cache '%s' is damaged", path), nb_hintf(err, "delete it");
    }
    z->D = D;
    z->reg = reg;
    return 1;
}
