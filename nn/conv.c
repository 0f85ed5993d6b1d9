#include "real.h"

/* nn/conv.c — convolution (im2col + gemm), 2x2 max pooling, global average pooling, dropout,
 * Gaussian noise and the normalizations on NCHW maps (generic: compiled as float and, with
 * -DNB_F64, as double; see nn/nn.h). Contracts in nn/conv.h.
 *
 * Dimension letters: N images, C channels in, H x W map in, OC channels out, OH x OW map out,
 * KS kernel size, K = C*KS*KS rows of a column matrix, P = OH*OW positions, S positions of a map.
 *
 * Threads. Convolution splits groups of images over threads; each thread owns a scratch area
 * (its column matrix, its gathered outputs and its partial weight gradient) and calls gemm,
 * which the OpenMP build of OpenBLAS runs on one thread inside a parallel region. Partial weight
 * gradients are added in thread order: results are deterministic for a given thread count.
 * The map norms parallelize over rows or channels; every sum over images runs in image order in
 * one thread, so they are deterministic for any thread count. Statistics in double where a sum
 * covers more than one row (BatchNorm, the gain and bias gradients). */

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "normmath.h"

/* Target columns of one gemm: images whose output has fewer positions are grouped so that a
 * gemm has at least this many columns (a 6x6 map alone makes a thin, slow gemm). */
#define GROUP_COLS 256
/* Below this many values an elementwise kernel runs on one thread. */
#define PAR_MIN ((size_t)1 << 15)

static inline int imin(int a, int b) {
    return a < b ? a : b;
}
static inline int imax(int a, int b) {
    return a > b ? a : b;
}

/* Images per gemm for outputs of P positions. */
static inline int group_of(int P, int N) {
    int G = GROUP_COLS / (P > 0 ? P : 1);
    if (G < 1) G = 1;
    return N > 0 && G > N ? N : G;
}

/* Below this many multiply-adds a convolution runs on one thread (waking a passive thread costs
 * tens of microseconds). */
#define CONV_PAR_MIN 2e6

static inline int threads_for(int nscratch, int work, double madds) {
    int T = madds < CONV_PAR_MIN ? 1 : omp_get_max_threads();
    if (T > nscratch) T = nscratch;
    if (T > work) T = work;
    return T < 1 ? 1 : T;
}

/* ---- convolution ----------------------------------------------------------------------------- */

/* Whether a layer is a plain dense product: 1x1 kernel on 1x1 maps. */
static inline int is_dense(int H, int W, int KS, int pad) {
    return KS == 1 && pad == 0 && H == 1 && W == 1;
}

/* Whether a group can read its images directly (no column matrix): 1x1 kernel, no padding,
 * one image per group. */
static inline int is_direct(int KS, int pad, int G) {
    return KS == 1 && pad == 0 && G == 1;
}

/* One product of a convolution, alpha 1, row-major: sgemm/dgemm, or with prec NB_PREC_BF16 (float
 * only; the double instantiation ignores it) the bfloat16 product of nn/gemm_bf16.h. */
static inline void gemm_p(int prec, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N,
                          int K, const real *A, int lda, const real *B, int ldb, real beta, real *C,
                          int ldc) {
#ifndef NB_F64
    if (prec == NB_PREC_BF16) {
        nb_gemm_bf16(ta == CblasTrans, tb == CblasTrans, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#else
    (void)prec;
#endif
    CBLAS_GEMM(CblasRowMajor, ta, tb, M, N, K, (real)1, A, lda, B, ldb, beta, C, ldc);
}

size_t nb_conv2d_scratch(int C, int H, int W, int OC, int KS, int pad) {
    int OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
    if (OH <= 0 || OW <= 0) return 0;
    size_t P = (size_t)OH * OW, K = (size_t)C * KS * KS;
    int G = group_of((int)P, 0);
    size_t col = is_direct(KS, pad, G) ? 0 : K * G * P;
    size_t tmp = G > 1 ? (size_t)OC * G * P : 0;
    size_t dw = (size_t)OC * K;
    /* each part rounded to 16 values so that every part starts 64-byte aligned */
    return ((col + 15) & ~(size_t)15) + ((tmp + 15) & ~(size_t)15) + ((dw + 15) & ~(size_t)15);
}

/* Carves one thread's scratch area into its column matrix, gathered outputs and dw partial. */
static void scratch_parts(real *base, size_t K, size_t P, int OC, int G, int direct, real **col,
                          real **tmp, real **dw) {
    size_t ncol = direct ? 0 : K * G * P;
    size_t ntmp = G > 1 ? (size_t)OC * G * P : 0;
    *col = base;
    *tmp = base + ((ncol + 15) & ~(size_t)15);
    *dw = *tmp + ((ntmp + 15) & ~(size_t)15);
}

/* col (K rows, leading dimension ld) columns [0, OH*OW) = the patches of image im (C,H,W). */
static void im2col(real *col, size_t ld, const real *im, int C, int H, int W, int KS, int pad,
                   int OH, int OW) {
    for (int c = 0; c < C; c++)
        for (int a = 0; a < KS; a++)
            for (int b = 0; b < KS; b++) {
                real *dst = col + (size_t)((c * KS + a) * KS + b) * ld;
                int j0 = imax(0, pad - b), j1 = imin(OW, W + pad - b);
                if (j1 < j0) j1 = j0;
                for (int i = 0; i < OH; i++) {
                    real *d = dst + (size_t)i * OW;
                    int ih = i + a - pad;
                    if (ih < 0 || ih >= H) {
                        memset(d, 0, sizeof(real) * (size_t)OW);
                        continue;
                    }
                    const real *s = im + ((size_t)c * H + ih) * W + (b - pad);
                    for (int j = 0; j < j0; j++)
                        d[j] = 0;
                    memcpy(d + j0, s + j0, sizeof(real) * (size_t)(j1 - j0));
                    for (int j = j1; j < OW; j++)
                        d[j] = 0;
                }
            }
}

/* im (C,H,W) += the patches in col (the adjoint of im2col). */
static void col2im(real *im, const real *col, size_t ld, int C, int H, int W, int KS, int pad,
                   int OH, int OW) {
    for (int c = 0; c < C; c++)
        for (int a = 0; a < KS; a++)
            for (int b = 0; b < KS; b++) {
                const real *src = col + (size_t)((c * KS + a) * KS + b) * ld;
                int j0 = imax(0, pad - b), j1 = imin(OW, W + pad - b);
                for (int i = 0; i < OH; i++) {
                    int ih = i + a - pad;
                    if (ih < 0 || ih >= H) continue;
                    const real *s = src + (size_t)i * OW;
                    real *d = im + ((size_t)c * H + ih) * W + (b - pad);
#pragma omp simd
                    for (int j = j0; j < j1; j++)
                        d[j] += s[j];
                }
            }
}

/* y (N,no) = x (N,ni) a^T (a: no,ni) (trans 0) or x a (a: ni,no) (trans 1), row by row, each
 * value a dot product in double: the same whatever the number of rows (a gemm's kernels are
 * not). acc != 0 adds to y. */
static void dense_rows(real *y, const real *x, const real *a, int N, int ni, int no, int trans,
                       int acc) {
#pragma omp parallel for schedule(static) if ((size_t)N * ni * no >= 65536)
    for (int n = 0; n < N; n++)
        for (int o = 0; o < no; o++) {
            double s = 0;
            const real *xr = x + (size_t)n * ni;
            if (trans) {
                for (int i = 0; i < ni; i++)
                    s += (double)xr[i] * (double)a[(size_t)i * no + o];
            } else {
                const real *ar = a + (size_t)o * ni;
#pragma omp simd reduction(+ : s)
                for (int i = 0; i < ni; i++)
                    s += (double)xr[i] * (double)ar[i];
            }
            real *d = y + (size_t)n * no + o;
            *d = acc ? *d + (real)s : (real)s;
        }
}

void nb_conv2d_forward(real *out, real *scratch, int nscratch, const real *inp, const real *w,
                       int N, int C, int H, int W, int OC, int KS, int pad, int exact) {
    nb_conv2d_forward_prec(out, scratch, nscratch, inp, w, N, C, H, W, OC, KS, pad, exact,
                           NB_PREC_FP32);
}

void nb_conv2d_forward_prec(real *out, real *scratch, int nscratch, const real *inp, const real *w,
                            int N, int C, int H, int W, int OC, int KS, int pad, int exact,
                            int prec) {
    /* out (N,OC,OH,OW), inp (N,C,H,W), w (OC, C*KS*KS) */
    const int OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
    if (N <= 0 || OH <= 0 || OW <= 0) return;
    const size_t P = (size_t)OH * OW, K = (size_t)C * KS * KS;
    if (is_dense(H, W, KS, pad)) {
        /* out (N,OC) = inp (N,C) w^T: one multi-threaded gemm */
        if (exact && prec != NB_PREC_BF16) /* (the bfloat16 product is per row already) */
            dense_rows(out, inp, w, N, C, OC, 0, 0);
        else
            gemm_p(prec, CblasNoTrans, CblasTrans, N, OC, C, inp, C, w, C, (real)0, out, OC);
        return;
    }
    const int G = exact ? 1 : group_of((int)P, N), ng = (N + G - 1) / G;
    const int direct = is_direct(KS, pad, G);
    const size_t ss = nb_conv2d_scratch(C, H, W, OC, KS, pad);
    const int T = threads_for(nscratch, ng, (double)N * OC * K * P);
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        real *col, *tmp, *dwp;
        scratch_parts(scratch + (size_t)t * ss, K, P, OC, G, direct, &col, &tmp, &dwp);
        for (int gi = ng * t / nt; gi < ng * (t + 1) / nt; gi++) {
            int n0 = gi * G, g = imin(G, N - n0);
            size_t cols = (size_t)g * P;
            const real *src = inp + (size_t)n0 * C * H * W;
            if (direct) {
                gemm_p(prec, CblasNoTrans, CblasNoTrans, OC, (int)P, (int)K, w, (int)K, src, (int)P,
                       (real)0, out + (size_t)n0 * OC * P, (int)P);
                continue;
            }
            for (int j = 0; j < g; j++)
                im2col(col + (size_t)j * P, cols, src + (size_t)j * C * H * W, C, H, W, KS, pad, OH,
                       OW);
            real *dst = G > 1 ? tmp : out + (size_t)n0 * OC * P;
            gemm_p(prec, CblasNoTrans, CblasNoTrans, OC, (int)cols, (int)K, w, (int)K, col,
                   (int)cols, (real)0, dst, (int)cols);
            if (G > 1)
                for (int j = 0; j < g; j++)
                    for (int o = 0; o < OC; o++)
                        memcpy(out + ((size_t)(n0 + j) * OC + o) * P, tmp + o * cols + j * P,
                               sizeof(real) * P);
        }
    }
}

/* dwd[i] += part[i] (in double) over n values. */
static void add_to_double(double *dwd, const real *part, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dwd[i] += (double)part[i];
}

void nb_conv2d_backward(real *dinp, real *dw, double *dwd, double *dpart, real *scratch,
                        int nscratch, const real *dout, const real *inp, const real *w, int N,
                        int C, int H, int W, int OC, int KS, int pad, int acc) {
    nb_conv2d_backward_prec(dinp, dw, dwd, dpart, scratch, nscratch, dout, inp, w, N, C, H, W, OC,
                            KS, pad, acc, NB_PREC_FP32);
}

void nb_conv2d_backward_prec(real *dinp, real *dw, double *dwd, double *dpart, real *scratch,
                             int nscratch, const real *dout, const real *inp, const real *w, int N,
                             int C, int H, int W, int OC, int KS, int pad, int acc, int prec) {
    /* dinp (N,C,H,W), dw (OC,K), dout (N,OC,OH,OW), inp (N,C,H,W), w (OC,K) */
    const int OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
    if (N <= 0 || OH <= 0 || OW <= 0) return;
    const size_t P = (size_t)OH * OW, K = (size_t)C * KS * KS, HW = (size_t)H * W;
    const real beta_in = acc ? (real)1 : (real)0;
    if (is_dense(H, W, KS, pad)) {
        if (dinp && dwd && prec != NB_PREC_BF16)
            dense_rows(dinp, dout, w, N, OC, C, 1, acc);
        else if (dinp)
            gemm_p(prec, CblasNoTrans, CblasNoTrans, N, C, OC, dout, OC, w, C, beta_in, dinp, C);
        if (!dwd) {
            gemm_p(prec, CblasTrans, CblasNoTrans, OC, C, N, dout, OC, inp, C, (real)1, dw, C);
            return;
        }
        /* per image: exact products, summed over the images in order, in double */
#ifndef NB_F64
        if (prec == NB_PREC_BF16) {
            /* the same of the inputs rounded to bfloat16, as the product rounds them (the
             * products of two bfloat16 values are exact in double) */
#pragma omp parallel for schedule(static) if ((size_t)N * OC * C >= 65536)
            for (int o = 0; o < OC; o++)
                for (int n = 0; n < N; n++) {
                    const double d = nb_bf16_round(dout[(size_t)n * OC + o]);
                    const real *x = inp + (size_t)n * C;
                    double *dst = dwd + (size_t)o * C;
                    for (int c = 0; c < C; c++)
                        dst[c] += d * (double)nb_bf16_round(x[c]);
                }
            return;
        }
#endif
#pragma omp parallel for schedule(static) if ((size_t)N * OC * C >= 65536)
        for (int o = 0; o < OC; o++)
            for (int n = 0; n < N; n++) {
                const double d = (double)dout[(size_t)n * OC + o];
                const real *x = inp + (size_t)n * C;
                double *dst = dwd + (size_t)o * C;
#pragma omp simd
                for (int c = 0; c < C; c++)
                    dst[c] += d * (double)x[c];
            }
        return;
    }
    const int G = dwd ? 1 : group_of((int)P, N), ng = (N + G - 1) / G;
    const int direct = is_direct(KS, pad, G);
    const size_t ss = nb_conv2d_scratch(C, H, W, OC, KS, pad), WK = (size_t)OC * K;
    const int T = threads_for(nscratch, ng, (double)N * OC * K * P);
#pragma omp parallel num_threads(T)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        real *col, *tmp, *dwp;
        scratch_parts(scratch + (size_t)t * ss, K, P, OC, G, direct, &col, &tmp, &dwp);
        double *dp = dwd ? dpart + (size_t)t * WK : NULL;
        if (dp)
            memset(dp, 0, sizeof(double) * WK);
        else
            memset(dwp, 0, sizeof(real) * WK);
        for (int gi = ng * t / nt; gi < ng * (t + 1) / nt; gi++) {
            int n0 = gi * G, g = imin(G, N - n0);
            size_t cols = (size_t)g * P;
            const real *src = inp + (size_t)n0 * C * HW;
            const real *dy = dout + (size_t)n0 * OC * P;
            if (direct) {
                /* dw += dy (OC,P) x^T (P,C);  dx (C,P) = w^T (C,OC) dy (OC,P) */
                gemm_p(prec, CblasNoTrans, CblasTrans, OC, (int)K, (int)P, dy, (int)P, src, (int)P,
                       dp ? (real)0 : (real)1, dwp, (int)K);
                if (dp) add_to_double(dp, dwp, WK);
                if (dinp)
                    gemm_p(prec, CblasTrans, CblasNoTrans, (int)K, (int)P, OC, w, (int)K, dy,
                           (int)P, beta_in, dinp + (size_t)n0 * C * HW, (int)P);
                continue;
            }
            if (G > 1) {
                for (int j = 0; j < g; j++)
                    for (int o = 0; o < OC; o++)
                        memcpy(tmp + o * cols + j * P, dy + ((size_t)j * OC + o) * P,
                               sizeof(real) * P);
                dy = tmp;
            }
            for (int j = 0; j < g; j++)
                im2col(col + (size_t)j * P, cols, src + (size_t)j * C * HW, C, H, W, KS, pad, OH,
                       OW);
            if (dp) {
                /* one product per image (its columns of dy and col), added in double: the sum
                 * over the images is the same whatever the grouping, threads or split */
                for (int j = 0; j < g; j++) {
                    gemm_p(prec, CblasNoTrans, CblasTrans, OC, (int)K, (int)P, dy + (size_t)j * P,
                           (int)cols, col + (size_t)j * P, (int)cols, (real)0, dwp, (int)K);
                    add_to_double(dp, dwp, WK);
                }
            } else {
                gemm_p(prec, CblasNoTrans, CblasTrans, OC, (int)K, (int)cols, dy, (int)cols, col,
                       (int)cols, (real)1, dwp, (int)K);
            }
            if (!dinp) continue;
            /* dcol (K, cols) = w^T dy, written over the column matrix, then scattered back */
            gemm_p(prec, CblasTrans, CblasNoTrans, (int)K, (int)cols, OC, w, (int)K, dy, (int)cols,
                   (real)0, col, (int)cols);
            for (int j = 0; j < g; j++) {
                real *dx = dinp + (size_t)(n0 + j) * C * HW;
                if (!acc) memset(dx, 0, sizeof(real) * C * HW);
                col2im(dx, col + (size_t)j * P, cols, C, H, W, KS, pad, OH, OW);
            }
        }
        /* dw += the partials in thread order (each at the same offset of its area) */
        const size_t dwoff = (size_t)(dwp - (scratch + (size_t)t * ss));
#pragma omp barrier
        if (dp) {
#pragma omp for schedule(static)
            for (size_t i = 0; i < WK; i++) {
                double s = 0;
                for (int u = 0; u < nt; u++)
                    s += dpart[(size_t)u * WK + i];
                dwd[i] += s;
            }
        } else {
#pragma omp for schedule(static)
            for (size_t i = 0; i < WK; i++) {
                real s = 0;
                for (int u = 0; u < nt; u++)
                    s += scratch[(size_t)u * ss + dwoff + i];
                dw[i] += s;
            }
        }
    }
}

/* ---- pooling ------------------------------------------------------------------------------- */

void nb_maxpool2_forward(real *out, unsigned char *arg, const real *inp, int N, int C, int H,
                         int W) {
    const int OH = H / 2, OW = W / 2;
    const size_t planes = (size_t)N * C;
#pragma omp parallel for schedule(static) if (planes * H * W >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const real *x = inp + pl * H * W;
        real *y = out + pl * OH * OW;
        unsigned char *a = arg + pl * OH * OW;
        for (int i = 0; i < OH; i++) {
            const real *r0 = x + (size_t)(2 * i) * W, *r1 = r0 + W;
            for (int j = 0; j < OW; j++) {
                real v = r0[2 * j];
                unsigned char k = 0;
                if (r0[2 * j + 1] > v) v = r0[2 * j + 1], k = 1;
                if (r1[2 * j] > v) v = r1[2 * j], k = 2;
                if (r1[2 * j + 1] > v) v = r1[2 * j + 1], k = 3;
                y[i * OW + j] = v;
                a[i * OW + j] = k;
            }
        }
    }
}

void nb_maxpool2_backward(real *dinp, const real *dout, const unsigned char *arg, int N, int C,
                          int H, int W, int acc) {
    const int OH = H / 2, OW = W / 2;
    const size_t planes = (size_t)N * C;
#pragma omp parallel for schedule(static) if (planes * H * W >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        real *dx = dinp + pl * H * W;
        const real *dy = dout + pl * OH * OW;
        const unsigned char *a = arg + pl * OH * OW;
        if (!acc) memset(dx, 0, sizeof(real) * H * W);
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++) {
                int k = a[i * OW + j];
                dx[(size_t)(2 * i + (k >> 1)) * W + 2 * j + (k & 1)] += dy[i * OW + j];
            }
    }
}

void nb_gap_forward(real *out, const real *inp, int N, int C, int S) {
    const size_t planes = (size_t)N * C;
#pragma omp parallel for schedule(static) if (planes * S >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const real *x = inp + pl * S;
        real s = 0;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < S; i++)
            s += x[i];
        out[pl] = s / (real)S;
    }
}

void nb_gap_backward(real *dinp, const real *dout, int N, int C, int S) {
    const size_t planes = (size_t)N * C;
#pragma omp parallel for schedule(static) if (planes * S >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        real v = dout[pl] / (real)S;
        real *dx = dinp + pl * S;
#pragma omp simd
        for (int i = 0; i < S; i++)
            dx[i] += v;
    }
}

/* ---- dropout and noise ------------------------------------------------------------------------
 */

void nb_dropout_forward(real *out, real *mask, const real *inp, size_t n, int rows, double p,
                        nb_rng *rng) {
    nb_dropout_forward_at(out, mask, inp, n, rows, 0, p, rng);
}

void nb_dropout_forward_at(real *out, real *mask, const real *inp, size_t n, int rows, int row0,
                           double p, nb_rng *rng) {
    const uint64_t base = nb_rng_u64(rng);
    const size_t per = rows > 0 ? n / (size_t)rows : n;
    const real scale = (real)(1.0 / (1.0 - p));
    /* keep when the top 32 bits, as a fraction of 2^32, are >= p */
    const uint64_t thr = (uint64_t)(p * 4294967296.0);
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        nb_rng s;
        nb_rng_seed(&s, base, (uint64_t)row0 + (uint64_t)r + 1);
        size_t i0 = (size_t)r * per, i1 = r + 1 == rows ? n : i0 + per;
        for (size_t i = i0; i < i1; i++) {
            real m = (nb_rng_u64(&s) >> 32) >= thr ? scale : (real)0;
            mask[i] = m;
            out[i] = inp[i] * m;
        }
    }
}

void nb_dropout_backward(real *dinp, const real *dout, const real *mask, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * mask[i];
}

void nb_gauss_noise_forward(real *out, const real *inp, size_t n, int rows, double sigma,
                            nb_rng *rng) {
    nb_gauss_noise_forward_at(out, inp, n, rows, 0, sigma, rng);
}

void nb_gauss_noise_forward_at(real *out, const real *inp, size_t n, int rows, int row0,
                               double sigma, nb_rng *rng) {
    const uint64_t base = nb_rng_u64(rng);
    const size_t per = rows > 0 ? n / (size_t)rows : n;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN / 8)
    for (int r = 0; r < rows; r++) {
        nb_rng s;
        nb_rng_seed(&s, base, (uint64_t)row0 + (uint64_t)r + 1);
        size_t i0 = (size_t)r * per, i1 = r + 1 == rows ? n : i0 + per;
        for (size_t i = i0; i < i1; i++)
            out[i] = inp[i] + (real)(sigma * nb_rng_normal(&s));
    }
}

/* ---- normalizations on maps --------------------------------------------------------------- */

static inline real act(real v, real alpha) {
    return v > 0 ? v : alpha * v;
}
/* The activation's slope from its output (nb_leaky_relu_backward's convention). */
static inline real slope(real y, real alpha) {
    return y > 0 ? (real)1 : alpha;
}

/* y = act(gs * (x - mu) * r + bs) over S values. */
static inline void span_fwd(real *y, const real *x, real mu, real r, real gs, real bs, real alpha,
                            int S) {
    const real a = gs * r, c = bs - gs * r * mu;
#pragma omp simd
    for (int i = 0; i < S; i++)
        y[i] = act(a * x[i] + c, alpha);
}

static inline real span_sum(const real *x, int S) {
    real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < S; i++)
        s += x[i];
    return s;
}

static inline real span_sumsqdev(const real *x, real mu, int S) {
    real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < S; i++)
        s += (x[i] - mu) * (x[i] - mu);
    return s;
}

/* Adds the sums sg/sb of channel c to dgd/dbd in double where given, else to dg/db. */
static inline void add_gb(real *dg, real *db, double *dgd, double *dbd, int c, double sg,
                          double sb) {
    if (dgd)
        dgd[c] += sg;
    else if (dg)
        dg[c] += (real)sg;
    if (dbd)
        dbd[c] += sb;
    else if (db)
        db[c] += (real)sb;
}

/* Per-row gain/bias gradient sums, reduced over images per channel afterwards in image order:
 * deterministic for any thread count. rowsum (N*C*2) may be NULL: then the rows run serially
 * and add to dg/db (dgd/dbd) directly. */
static void reduce_rowsums(real *dg, real *db, double *dgd, double *dbd, const double *rowsum,
                           int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= 4096)
    for (int c = 0; c < C; c++) {
        double sg = 0, sb = 0;
        for (int n = 0; n < N; n++) {
            sg += rowsum[((size_t)n * C + c) * 2];
            sb += rowsum[((size_t)n * C + c) * 2 + 1];
        }
        add_gb(dg, db, dgd, dbd, c, sg, sb);
    }
}

void nb_map_layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *g,
                              const real *b, int N, int C, int S, int gc, real alpha,
                              const nb_norm_cfg *cfg) {
    const int R = N * (C / gc);
    const size_t L = (size_t)gc * S;
#pragma omp parallel for schedule(static) if ((size_t)R * L >= PAR_MIN)
    for (int r = 0; r < R; r++) {
        const real *x = inp + (size_t)r * L;
        real *y = out + (size_t)r * L;
        int c0 = (r % (C / gc)) * gc;
        double s = 0;
        for (int cc = 0; cc < gc; cc++)
            s += span_sum(x + (size_t)cc * S, S);
        real mu = (real)(s / (double)L);
        double v = 0;
        for (int cc = 0; cc < gc; cc++)
            v += span_sumsqdev(x + (size_t)cc * S, mu, S);
        real rs = (real)rstd_of(v / (double)L, cfg);
        mean[r] = mu;
        rstd[r] = rs;
        for (int cc = 0; cc < gc; cc++)
            span_fwd(y + (size_t)cc * S, x + (size_t)cc * S, mu, rs, g[c0 + cc], b[c0 + cc], alpha,
                     S);
    }
}

void nb_map_layernorm_backward(real *dinp, real *dg, real *db, double *dgd, double *dbd,
                               const real *dout, const real *out, const real *inp, const real *g,
                               const real *mean, const real *rstd, int N, int C, int S, int gc,
                               real alpha, int acc, const nb_norm_cfg *cfg) {
    const int R = N * (C / gc);
    const size_t L = (size_t)gc * S;
    double *rowsum = malloc(sizeof(double) * 2 * (size_t)N * C);
#pragma omp parallel for schedule(static) if (rowsum && (size_t)R * L >= PAR_MIN)
    for (int r = 0; r < R; r++) {
        const size_t o = (size_t)r * L;
        const real *x = inp + o, *dy = dout + o, *y = out + o;
        real *dx = dinp + o;
        const int n = r / (C / gc), c0 = (r % (C / gc)) * gc;
        const real mu = mean[r], rs = rstd[r];
        double sdg = 0, sdgx = 0;
        for (int cc = 0; cc < gc; cc++) {
            const size_t q = (size_t)cc * S;
            const real gs = g[c0 + cc];
            real a = 0, ax = 0;
#pragma omp simd reduction(+ : a, ax)
            for (int i = 0; i < S; i++) {
                real dz = dy[q + i] * slope(y[q + i], alpha);
                real xh = (x[q + i] - mu) * rs;
                a += dz;
                ax += dz * xh;
            }
            sdg += (double)gs * a;
            sdgx += (double)gs * ax;
            if (rowsum) {
                rowsum[((size_t)n * C + c0 + cc) * 2] = ax;
                rowsum[((size_t)n * C + c0 + cc) * 2 + 1] = a;
            } else {
                add_gb(dg, db, dgd, dbd, c0 + cc, ax, a);
            }
        }
        /* dx_i = r (dghat_i - mean(dghat)) + (x_i - mu) coef sum_j dghat_j (x_j - mu), where
         * sum_j dghat_j (x_j - mu) = sdgx / r; eps inside: coef = -r^3/L. */
        double v = 0;
        if (cfg->eps_outside)
            for (int cc = 0; cc < gc; cc++)
                v += span_sumsqdev(x + (size_t)cc * S, mu, S);
        const real m1 = (real)(sdg / (double)L);
        const real kc = (real)(rstd_coef(rs, v / (double)L, (double)L, cfg) * sdgx / rs);
        for (int cc = 0; cc < gc; cc++) {
            const size_t q = (size_t)cc * S;
            const real gs = g[c0 + cc];
            if (acc) {
#pragma omp simd
                for (int i = 0; i < S; i++) {
                    real dz = dy[q + i] * slope(y[q + i], alpha);
                    dx[q + i] += rs * (gs * dz - m1) + (x[q + i] - mu) * kc;
                }
            } else {
#pragma omp simd
                for (int i = 0; i < S; i++) {
                    real dz = dy[q + i] * slope(y[q + i], alpha);
                    dx[q + i] = rs * (gs * dz - m1) + (x[q + i] - mu) * kc;
                }
            }
        }
    }
    if (rowsum) reduce_rowsums(dg, db, dgd, dbd, rowsum, N, C);
    free(rowsum);
}

void nb_map_rmsnorm_forward(real *out, real *rstd, const real *inp, const real *g, const real *b,
                            int N, int C, int S, int gc, int k, real alpha,
                            const nb_norm_cfg *cfg) {
    const int R = N * (C / gc);
    const size_t L = (size_t)gc * S;
    if (k < 1) k = 1;
    if ((size_t)k > L) k = (int)L;
#pragma omp parallel for schedule(static) if ((size_t)R * L >= PAR_MIN)
    for (int r = 0; r < R; r++) {
        const real *x = inp + (size_t)r * L;
        real *y = out + (size_t)r * L;
        int c0 = (r % (C / gc)) * gc;
        real s = 0;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < k; i++)
            s += x[i] * x[i];
        real rs = (real)rstd_of((double)s / k, cfg);
        rstd[r] = rs;
        for (int cc = 0; cc < gc; cc++)
            span_fwd(y + (size_t)cc * S, x + (size_t)cc * S, 0, rs, g[c0 + cc], b[c0 + cc], alpha,
                     S);
    }
}

void nb_map_rmsnorm_backward(real *dinp, real *dg, real *db, double *dgd, double *dbd,
                             const real *dout, const real *out, const real *inp, const real *g,
                             const real *rstd, int N, int C, int S, int gc, int k, real alpha,
                             int acc, const nb_norm_cfg *cfg) {
    const int R = N * (C / gc);
    const size_t L = (size_t)gc * S;
    if (k < 1) k = 1;
    if ((size_t)k > L) k = (int)L;
    double *rowsum = malloc(sizeof(double) * 2 * (size_t)N * C);
#pragma omp parallel for schedule(static) if (rowsum && (size_t)R * L >= PAR_MIN)
    for (int r = 0; r < R; r++) {
        const size_t o = (size_t)r * L;
        const real *x = inp + o, *dy = dout + o, *y = out + o;
        real *dx = dinp + o;
        const int n = r / (C / gc), c0 = (r % (C / gc)) * gc;
        const real rs = rstd[r];
        double sgx = 0;
        for (int cc = 0; cc < gc; cc++) {
            const size_t q = (size_t)cc * S;
            real a = 0, ax = 0;
#pragma omp simd reduction(+ : a, ax)
            for (int i = 0; i < S; i++) {
                real dz = dy[q + i] * slope(y[q + i], alpha);
                a += dz;
                ax += dz * x[q + i];
            }
            sgx += (double)g[c0 + cc] * ax;
            if (rowsum) {
                rowsum[((size_t)n * C + c0 + cc) * 2] = (double)ax * rs;
                rowsum[((size_t)n * C + c0 + cc) * 2 + 1] = a;
            } else {
                add_gb(dg, db, dgd, dbd, c0 + cc, (double)ax * rs, a);
            }
        }
        double m = 0;
        if (cfg->eps_outside) {
            real s = 0;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < k; i++)
                s += x[i] * x[i];
            m = (double)s / k;
        }
        const real kc = (real)(rstd_coef(rs, m, k, cfg) * sgx);
        for (int cc = 0; cc < gc; cc++) {
            const size_t q = (size_t)cc * S;
            const real gs = g[c0 + cc];
            /* positions q+i < k get the r-depends-on-x term */
            size_t lk = (size_t)k > q ? (size_t)k - q : 0;
            const int lim = lk < (size_t)S ? (int)lk : S;
            if (acc) {
#pragma omp simd
                for (int i = 0; i < lim; i++)
                    dx[q + i] += rs * gs * dy[q + i] * slope(y[q + i], alpha) + x[q + i] * kc;
#pragma omp simd
                for (int i = lim; i < S; i++)
                    dx[q + i] += rs * gs * dy[q + i] * slope(y[q + i], alpha);
            } else {
#pragma omp simd
                for (int i = 0; i < lim; i++)
                    dx[q + i] = rs * gs * dy[q + i] * slope(y[q + i], alpha) + x[q + i] * kc;
#pragma omp simd
                for (int i = lim; i < S; i++)
                    dx[q + i] = rs * gs * dy[q + i] * slope(y[q + i], alpha);
            }
        }
    }
    if (rowsum) reduce_rowsums(dg, db, dgd, dbd, rowsum, N, C);
    free(rowsum);
}

void nb_map_batchnorm_forward(real *out, real *mean, real *rstd, real *running_mean,
                              real *running_var, const real *inp, const real *g, const real *b,
                              int N, int C, int S, int training, real alpha,
                              const nb_norm_cfg *cfg) {
    const size_t CS = (size_t)C * S;
    /* data-parallel --bn-sync: the sums over every process's images, in double, as the
     * single-process statistics are taken: the mean first, then the squared deviations from it
     * (two sums over the processes; E[x^2] - mean^2 in one would round differently) */
    double *G = NULL;
    if (training && cfg->bn_sum) {
        G = calloc((size_t)2 * C + 1, sizeof *G);
        if (!G) abort();
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int n = 0; n < N; n++)
                s += span_sum(inp + n * CS + (size_t)c * S, S);
            G[c] = s;
        }
        G[2 * C] = N;
        cfg->bn_sum(cfg->bn_ctx, G, C);
        cfg->bn_sum(cfg->bn_ctx, G + 2 * C, 1);
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
        for (int c = 0; c < C; c++) {
            real mu = (real)(G[c] / (G[2 * C] * S));
            double v = 0;
            for (int n = 0; n < N; n++)
                v += span_sumsqdev(inp + n * CS + (size_t)c * S, mu, S);
            G[C + c] = v;
        }
        cfg->bn_sum(cfg->bn_ctx, G + C, C);
    }
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        const real *xc = inp + (size_t)c * S;
        real mu, rs;
        if (G) {
            double Ng = G[2 * C], cnt = Ng * S, v = G[C + c] / cnt;
            mu = (real)(G[c] / cnt);
            rs = (real)rstd_of(v, cfg);
            if (running_mean && running_var) {
                double mom = cfg->bn_momentum;
                double vu = cfg->bn_unbiased_running && Ng > 1 ? v * Ng / (Ng - 1) : v;
                running_mean[c] = (real)((1 - mom) * running_mean[c] + mom * (double)mu);
                running_var[c] = (real)((1 - mom) * running_var[c] + mom * vu);
            }
        } else if (training) {
            double s = 0, cnt = (double)N * S;
            for (int n = 0; n < N; n++)
                s += span_sum(xc + n * CS, S);
            mu = (real)(s / cnt);
            double v = 0;
            for (int n = 0; n < N; n++)
                v += span_sumsqdev(xc + n * CS, mu, S);
            v /= cnt;
            rs = (real)rstd_of(v, cfg);
            if (running_mean && running_var) {
                double mom = cfg->bn_momentum;
                double vu = cfg->bn_unbiased_running && N > 1 ? v * N / (N - 1) : v;
                running_mean[c] = (real)((1 - mom) * running_mean[c] + mom * (double)mu);
                running_var[c] = (real)((1 - mom) * running_var[c] + mom * vu);
            }
        } else {
            mu = running_mean[c];
            rs = (real)rstd_of((double)running_var[c], cfg);
        }
        mean[c] = mu;
        rstd[c] = rs;
        for (int n = 0; n < N; n++)
            span_fwd(out + n * CS + (size_t)c * S, xc + n * CS, mu, rs, g[c], b[c], alpha, S);
    }
    free(G);
}

void nb_map_batchnorm_sync_backward(real *dinp, real *dg, real *db, double *dgd, double *dbd,
                                    const real *dout, const real *out, const real *inp,
                                    const real *g, const real *mean, const real *rstd, int N, int C,
                                    int S, real alpha, const nb_norm_cfg *cfg) {
    const size_t CS = (size_t)C * S;
    double *G = calloc((size_t)2 * C + 1, sizeof *G);
    if (!G) abort();
        /* the sums per image in float, then over the images in double, as the single-process
         * backward takes them: one process and any split compute the same terms */
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        const real mu = mean[c], rs = rstd[c];
        double sa = 0, sax = 0;
        for (int n = 0; n < N; n++) {
            const size_t o = n * CS + (size_t)c * S;
            real a = 0, ax = 0;
#pragma omp simd reduction(+ : a, ax)
            for (int i = 0; i < S; i++) {
                real dz = dout[o + i] * slope(out[o + i], alpha);
                a += dz;
                ax += dz * ((inp[o + i] - mu) * rs);
            }
            sa += a;
            sax += ax;
        }
        add_gb(dg, db, dgd, dbd, c, sax, sa);
        G[c] = sa;
        G[C + c] = sax;
    }
    G[2 * C] = N;
    cfg->bn_sum(cfg->bn_ctx, G, 2 * C + 1);
    const double cnt = G[2 * C] * S;
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        const real mu = mean[c], rs = rstd[c], gs = g[c];
        const real m1 = (real)(gs * G[c] / cnt), m2 = (real)(gs * G[C + c] / cnt);
        for (int n = 0; n < N; n++) {
            const size_t o = n * CS + (size_t)c * S;
            for (int i = 0; i < S; i++) {
                real dz = dout[o + i] * slope(out[o + i], alpha);
                dinp[o + i] = rs * (gs * dz - m1 - (inp[o + i] - mu) * rs * m2);
            }
        }
    }
    free(G);
}

void nb_map_batchnorm_backward(real *dinp, real *dg, real *db, double *dgd, double *dbd,
                               const real *dout, const real *out, const real *inp, const real *g,
                               const real *mean, const real *rstd, int N, int C, int S,
                               int training, real alpha, int acc) {
    const size_t CS = (size_t)C * S;
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        const real mu = mean[c], rs = rstd[c], gs = g[c];
        double sa = 0, sax = 0;
        for (int n = 0; n < N; n++) {
            const size_t o = n * CS + (size_t)c * S;
            real a = 0, ax = 0;
#pragma omp simd reduction(+ : a, ax)
            for (int i = 0; i < S; i++) {
                real dz = dout[o + i] * slope(out[o + i], alpha);
                a += dz;
                ax += dz * ((inp[o + i] - mu) * rs);
            }
            sa += a;
            sax += ax;
        }
        add_gb(dg, db, dgd, dbd, c, sax, sa);
        const double cnt = (double)N * S;
        const real m1 = training ? (real)(gs * sa / cnt) : 0;
        const real m2 = training ? (real)(gs * sax / cnt) : 0;
        for (int n = 0; n < N; n++) {
            const size_t o = n * CS + (size_t)c * S;
            if (acc) {
#pragma omp simd
                for (int i = 0; i < S; i++) {
                    real dz = dout[o + i] * slope(out[o + i], alpha);
                    dinp[o + i] += rs * (gs * dz - m1 - (inp[o + i] - mu) * rs * m2);
                }
            } else {
#pragma omp simd
                for (int i = 0; i < S; i++) {
                    real dz = dout[o + i] * slope(out[o + i], alpha);
                    dinp[o + i] = rs * (gs * dz - m1 - (inp[o + i] - mu) * rs * m2);
                }
            }
        }
    }
}

void nb_map_affine_forward(real *out, const real *inp, const real *g, const real *b, int N, int C,
                           int S, real alpha) {
    const size_t planes = (size_t)N * C;
#pragma omp parallel for schedule(static) if (planes * S >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        int c = (int)(pl % (size_t)C);
        span_fwd(out + pl * S, inp + pl * S, 0, 1, g ? g[c] : (real)1, b[c], alpha, S);
    }
}

void nb_map_affine_backward(real *dinp, real *dg, real *db, double *dgd, double *dbd,
                            const real *dout, const real *out, const real *inp, const real *g,
                            int N, int C, int S, real alpha, int acc) {
    const size_t CS = (size_t)C * S;
#pragma omp parallel for schedule(static) if ((size_t)N * CS >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        const real gs = g ? g[c] : (real)1;
        double sa = 0, sax = 0;
        for (int n = 0; n < N; n++) {
            const size_t o = n * CS + (size_t)c * S;
            real a = 0, ax = 0;
#pragma omp simd reduction(+ : a, ax)
            for (int i = 0; i < S; i++) {
                real dz = dout[o + i] * slope(out[o + i], alpha);
                a += dz;
                ax += dz * inp[o + i];
            }
            if (dinp && acc) {
#pragma omp simd
                for (int i = 0; i < S; i++)
                    dinp[o + i] += gs * dout[o + i] * slope(out[o + i], alpha);
            } else if (dinp) {
#pragma omp simd
                for (int i = 0; i < S; i++)
                    dinp[o + i] = gs * dout[o + i] * slope(out[o + i], alpha);
            }
            sa += a;
            sax += ax;
        }
        add_gb(dg, db, dgd, dbd, c, sax, sa);
    }
}
