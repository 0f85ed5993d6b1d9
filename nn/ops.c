#include "real.h"

/* nn/ops.c — dense layer, activations and softmax cross-entropy (generic: compiled as float and,
 * with -DNB_F64, as double; see nn/nn.h).
 *
 * Dimension letters: B batch rows, C input features, OC output features, V classes, N elements.
 *
 * Elementwise loops are `omp simd` and run in parallel above a size threshold (an OpenMP
 * region costs more than a small loop; with OMP_WAIT_POLICY=passive a wake-up is tens of
 * microseconds). Every element is computed by the same instructions whatever the thread count,
 * and every reduction has a fixed order, so results are bit-identical run to run. */

#include <math.h>
#include <string.h>

/* Below these sizes a loop runs on one thread. Cheap ops are memory-bound: only arrays that
 * leave L1/L2 gain from a second core. Transcendental ops (tanh, exp) gain much earlier. */
#define PAR_CHEAP ((size_t)1 << 16)
#define PAR_TRANSC ((size_t)1 << 12)

/* ---- dense ------------------------------------------------------------------------------ */

void nb_dense_forward(real *out, const real *inp, const real *w, const real *bias, int B, int C,
                      int OC) {
    /* out (B,OC), inp (B,C), w (OC,C), bias (OC) */
    if (B <= 0 || OC <= 0) return;
    real beta = 0;
    if (bias) {
        for (int b = 0; b < B; b++)
            memcpy(out + (size_t)b * OC, bias, (size_t)OC * sizeof *out);
        beta = 1;
    }
    if (C <= 0) {
        if (!bias) memset(out, 0, (size_t)B * OC * sizeof *out);
        return;
    }
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C, (real)1, inp, C, w, C, beta, out,
               OC);
}

void nb_dense_backward(real *dinp, real *dw, real *dbias, const real *dout, const real *inp,
                       const real *w, int B, int C, int OC) {
    /* dinp (B,C), dw (OC,C), dbias (OC), dout (B,OC), inp (B,C), w (OC,C) */
    if (B <= 0 || OC <= 0) return;
    if (C > 0) {
        /* dinp += dout · w */
        if (dinp)
            CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC, (real)1, dout, OC, w, C,
                       (real)1, dinp, C);
        /* dw += dout^T · inp */
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B, (real)1, dout, OC, inp, C,
                   (real)1, dw, C);
    }
    if (dbias) {
        /* Column sums of dout, rows added in order: vectorized across OC, parallel over
         * column blocks (each column is summed by one thread, in the same order). */
        const int blk = 256;
        int nblk = (OC + blk - 1) / blk;
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)OC >= PAR_CHEAP && nblk > 1)
        for (int jb = 0; jb < nblk; jb++) {
            int lo = jb * blk, hi = lo + blk < OC ? lo + blk : OC;
            for (int b = 0; b < B; b++) {
                const real *d = dout + (size_t)b * OC;
#pragma omp simd
                for (int o = lo; o < hi; o++)
                    dbias[o] += d[o];
            }
        }
    }
}

/* Rows summed in float before each group's sum meets the double accumulator (converting every
 * term to double cost most of the time), and the work below which one thread does it all. */
#define CS_GRP 8
#define CS_PAR_MIN 16384

void nb_col_sums(real *db, const real *dy, int rows, int C) {
    const int nblk = (C + 63) / 64;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)C >= CS_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * 64, c1 = c0 + 64 < C ? c0 + 64 : C, w = c1 - c0;
        double a[64];
        real f[64];
        memset(a, 0, sizeof a);
        for (int r0 = 0; r0 < rows; r0 += CS_GRP) {
            const int r1 = r0 + CS_GRP < rows ? r0 + CS_GRP : rows;
            for (int c = 0; c < w; c++)
                f[c] = 0;
            for (int row = r0; row < r1; row++) {
                const real *d = dy + (size_t)row * C + c0;
#pragma omp simd
                for (int c = 0; c < w; c++)
                    f[c] += d[c];
            }
#pragma omp simd
            for (int c = 0; c < w; c++)
                a[c] += (double)f[c];
        }
        for (int c = c0; c < c1; c++)
            db[c] += (real)a[c - c0];
    }
}

/* ---- activations ------------------------------------------------------------------------ */

/* relu: x < 0 ? 0 : x, written so that NaN propagates (NaN < 0 is false). */
void nb_relu_forward(real *out, const real *inp, size_t N) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_CHEAP)
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        out[i] = x < 0 ? (real)0 : x;
    }
}

/* d/dx relu = [out > 0]; at the kink (x == 0, out == 0) the gradient is taken as 0. */
void nb_relu_backward(real *dinp, const real *dout, const real *out, size_t N) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_CHEAP)
    for (size_t i = 0; i < N; i++)
        dinp[i] += out[i] > 0 ? dout[i] : (real)0;
}

void nb_leaky_relu_forward(real *out, const real *inp, size_t N, real alpha) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_CHEAP)
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        out[i] = x < 0 ? alpha * x : x;
    }
}

/* From the output: for alpha > 0, out > 0 exactly when x > 0. At x == 0 the slope alpha is
 * used (the left derivative). */
void nb_leaky_relu_backward(real *dinp, const real *dout, const real *out, size_t N, real alpha) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_CHEAP)
    for (size_t i = 0; i < N; i++)
        dinp[i] += out[i] > 0 ? dout[i] : alpha * dout[i];
}

void nb_tanh_forward(real *out, const real *inp, size_t N) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_TRANSC)
    for (size_t i = 0; i < N; i++)
        out[i] = REAL_TANH(inp[i]);
}

void nb_tanh_backward(real *dinp, const real *dout, const real *out, size_t N) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_CHEAP)
    for (size_t i = 0; i < N; i++) {
        real y = out[i];
        dinp[i] += dout[i] * ((real)1 - y * y);
    }
}

/* 1/(1+exp(-x)) needs no branch to be safe: exp(-x) overflows to inf for x << 0, giving 0, and
 * underflows to 0 for x >> 0, giving 1; no NaN either way. */
void nb_sigmoid_forward(real *out, const real *inp, size_t N) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_TRANSC)
    for (size_t i = 0; i < N; i++)
        out[i] = (real)1 / ((real)1 + REAL_EXP(-inp[i]));
}

void nb_sigmoid_backward(real *dinp, const real *dout, const real *out, size_t N) {
#pragma omp parallel for simd schedule(static) if (N >= PAR_CHEAP)
    for (size_t i = 0; i < N; i++) {
        real y = out[i];
        dinp[i] += dout[i] * y * ((real)1 - y);
    }
}

/* ---- softmax cross-entropy -------------------------------------------------------------- */

/* One row: probs (V) = softmax(logits (V)); returns -log p[t] = log(sum exp(x - max)) -
 * (x[t] - max), computed from the log-sum-exp so that a probability that underflows to 0 still
 * gives a finite loss. NaN when t is out of range. */
static double xent_row(real *probs, const real *x, int t, int V) {
    real mx = x[0];
    for (int j = 1; j < V; j++)
        mx = x[j] > mx ? x[j] : mx;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < V; j++) {
        real e = REAL_EXP(x[j] - mx);
        probs[j] = e;
        s += (double)e;
    }
    real inv = (real)(1.0 / s);
#pragma omp simd
    for (int j = 0; j < V; j++)
        probs[j] *= inv;
    if (t < 0 || t >= V) return NAN;
    return log(s) - ((double)x[t] - (double)mx);
}

/* Rows are grouped in fixed chunks; each chunk's loss is summed in row order and the chunk
 * sums are added in chunk order, so the mean does not depend on the thread count. */
#define XENT_MAX_CHUNKS 256

double nb_softmax_xent_forward(real *probs, real *losses, const real *logits, const int *targets,
                               int B, int V) {
    /* probs (B,V), losses (B), logits (B,V), targets (B) */
    if (B <= 0) return NAN;
    if (V <= 0) return NAN;
    int chunk = 64;
    if ((B + chunk - 1) / chunk > XENT_MAX_CHUNKS)
        chunk = (B + XENT_MAX_CHUNKS - 1) / XENT_MAX_CHUNKS;
    int nch = (B + chunk - 1) / chunk;
    double part[XENT_MAX_CHUNKS];
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)V >= PAR_TRANSC && nch > 1)
    for (int c = 0; c < nch; c++) {
        int lo = c * chunk, hi = lo + chunk < B ? lo + chunk : B;
        double s = 0;
        for (int b = lo; b < hi; b++) {
            double l = xent_row(probs + (size_t)b * V, logits + (size_t)b * V, targets[b], V);
            if (losses) losses[b] = (real)l;
            s += l;
        }
        part[c] = s;
    }
    double total = 0;
    for (int c = 0; c < nch; c++)
        total += part[c];
    return total / B;
}

void nb_softmax_xent_backward(real *dlogits, const real *probs, const int *targets, int B, int V) {
    nb_softmax_xent_backward_over(dlogits, probs, targets, B, V, B);
}

void nb_softmax_xent_backward_over(real *dlogits, const real *probs, const int *targets, int B,
                                   int V, int N) {
    /* dlogits (B,V), probs (B,V), targets (B) */
    if (B <= 0 || V <= 0 || N <= 0) return;
    real invB = (real)(1.0 / N);
#pragma omp parallel for schedule(static) if ((size_t)B * (size_t)V >= PAR_CHEAP)
    for (int b = 0; b < B; b++) {
        real *d = dlogits + (size_t)b * V;
        const real *p = probs + (size_t)b * V;
        int t = targets[b];
        /* (p - 1) is exact for p near 1 (Sterbenz), unlike p/B - 1/B. */
#pragma omp simd
        for (int j = 0; j < V; j++)
            d[j] += (p[j] - (j == t ? (real)1 : (real)0)) * invB;
    }
}
