#include "nn/mem.h"
#include "real.h"
#include "nn/norms/fused.h"
/* nn/lstm.c — the LSTM layer with every norm, forward and backward through time (generic:
 * compiled as float and, with -DNB_F64, as double; see nn/nn.h). Contract in nn/lstm.h.
 *
 * Dimension letters: B rows, T steps, C inputs, H units, G = 4H.
 *
 * Layout of the work. The input projection of the whole sequence is one GEMM (B*T rows) whose
 * result each step reads in place; the recurrent projection is one GEMM per step; the gradients
 * of W and U are one GEMM each after the backward sweep (a's gradient replaces a in the same
 * buffer, r's replaces r, time-major). Per-step state is stored time-major ((T,B,·)). For
 * none, weight, layer, rms and prms a step is ONE parallel loop over rows, forward and
 * backward: the row norms are fused into it (statistics, normalize, add, activate; in backward
 * the norm gradients are computed where the gate gradients are, with the gain/bias gradients
 * summed into per-thread double partials), so no normalized copy is written and no thread is
 * woken more than once per step besides the GEMM's. BatchNorm's column statistics couple the
 * rows but not the columns, so its sweeps (sweep_fwd_batch, sweep_bwd_batch) are one parallel
 * region each with the work split the other way: each thread owns a slice of hidden units (their
 * four gate columns and their cell) for all rows, computes those columns' statistics and their
 * gradients itself, and meets the other threads once a step, at a barrier before the recurrent
 * GEMM, the one step that reads every unit. The arithmetic is nn/norm.c's BatchNorm, value for
 * value. Nothing is allocated inside forward or backward. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "normmath.h"
#include "vmath.h"

#define NONE ((size_t)-1)
/* Below this many values a per-step loop runs on one thread. */
#define PAR_MIN 16384
/* BatchNorm's statistics are summed in double over blocks of this many columns. */
#define BN_CB 64

static inline int is_rms(int k) {
    return k == NB_FK_RMS || k == NB_FK_PRMS;
}

/* Whether the layer normalizes its pre-activations and cell (layer, rms, prms, batch). */
static inline int has_norm(int k) {
    return k == NB_FK_LAYER || is_rms(k) || k == NB_FK_BATCH;
}

/* Threads for a step's row loop: the runtime's current setting, at most the partials' count. */
static inline int nthreads(const nb_lstm *L) {
    const int n = omp_get_max_threads();
    return n < L->nthr ? n : L->nthr;
}

/* Threads for a whole-sequence region whose threads each own a slice of rows: 1 when the work
 * is too small to pay for a thread, never more than there are rows. */
static inline int row_threads(const nb_lstm *L) {
    if ((size_t)L->B * (size_t)L->G * (size_t)L->T < PAR_MIN) return 1;
    const int n = nthreads(L);
    return n < L->B ? n : L->B;
}

static real *zalloc(size_t n, int *fail) {
    nb_mem_note((n ? n : 1) * sizeof(real));
    real *p = calloc(n ? n : 1, sizeof(real));
    if (!p) *fail = 1;
    return p;
}

static size_t add(nb_layout *l, const char *prefix, const char *name, size_t n, int *fail) {
    char full[32];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    size_t off = nb_layout_add(l, full, n, 1);
    if (off == NONE) *fail = 1;
    return off;
}

int nb_lstm_init(nb_lstm *L, int C, int H, int Bmax, int Tmax, const nb_norm_cfg *norm,
                 nb_layout *l, const char *prefix, nb_err *err) {
    memset(L, 0, sizeof *L);
    if (C < 1 || H < 1 || Bmax < 1 || Tmax < 1 || C > (1 << 16) || H > (1 << 14) ||
        (size_t)Bmax * (size_t)Tmax > ((size_t)1 << 26)) {
        nb_errf(err, "lstm: sizes out of range (C %d, H %d, B %d, T %d)", C, H, Bmax, Tmax);
        return -1;
    }
    L->C = C;
    L->H = H;
    L->G = 4 * H;
    L->Bmax = Bmax;
    L->Tmax = Tmax;
    L->norm = *norm;
    const int G = L->G;
    const int k = nb_fused_kind(norm->kind);
    L->k1 = k == NB_FK_PRMS ? nb_prms_k(G, norm->p, norm->p_floor) : G;
    L->k3 = k == NB_FK_PRMS ? nb_prms_k(H, norm->p, norm->p_floor) : H;
    int fail = 0;
    L->w = add(l, prefix, k == NB_FK_WEIGHT ? "Wv" : "W", (size_t)G * C, &fail);
    L->u = add(l, prefix, k == NB_FK_WEIGHT ? "Uv" : "U", (size_t)G * H, &fail);
    L->b = add(l, prefix, "b", (size_t)G, &fail);
    L->h0 = add(l, prefix, "h0", (size_t)H, &fail);
    L->gw = L->gu = L->s1 = L->b1 = L->s2 = L->b2 = L->s3 = L->b3 = NONE;
    L->a1 = L->a2 = L->a3 = NONE;
    const nb_norm_def *nd = nb_norm_get(norm->kind);
    if (k == NB_FK_UNFUSED) { /* the norm's kernels: docs/numerics.md#norm-modules */
        L->s1 = add(l, prefix, "s1", (size_t)G, &fail);
        L->s2 = add(l, prefix, "s2", (size_t)G, &fail);
        L->s3 = add(l, prefix, "s3", (size_t)H, &fail);
        if (nd->params & NB_NP_SHIFT) {
            L->b1 = add(l, prefix, "b1", (size_t)G, &fail);
            L->b2 = add(l, prefix, "b2", (size_t)G, &fail);
            L->b3 = add(l, prefix, "b3", (size_t)H, &fail);
        }
        if (nd->nscalars > 0) {
            size_t *at[] = {&L->a1, &L->a2, &L->a3};
            for (int i = 0; i < 3; i++) {
                char nm[32];
                snprintf(nm, sizeof nm, "%s%d", nd->scalar_name, i + 1);
                *at[i] = add(l, prefix, nm, (size_t)nd->nscalars, &fail);
            }
        }
    }
    if (k == NB_FK_WEIGHT) {
        L->gw = add(l, prefix, "Wg", (size_t)G, &fail);
        L->gu = add(l, prefix, "Ug", (size_t)G, &fail);
    }
    if (has_norm(k)) {
        L->s1 = add(l, prefix, "s1", (size_t)G, &fail);
        L->s2 = add(l, prefix, "s2", (size_t)G, &fail);
        L->s3 = add(l, prefix, "s3", (size_t)H, &fail);
    }
    if (k == NB_FK_LAYER) {
        L->b1 = add(l, prefix, "b1", (size_t)G, &fail);
        L->b2 = add(l, prefix, "b2", (size_t)G, &fail);
    }
    if (k == NB_FK_LAYER || k == NB_FK_BATCH) L->b3 = add(l, prefix, "b3", (size_t)H, &fail);
    if (fail) {
        nb_errf(err, "lstm: too many parameter tensors for one model");
        return -1;
    }
    const size_t BT = (size_t)Bmax * Tmax;
    const size_t S1 = (size_t)Tmax * (size_t)(Bmax > G ? Bmax : G);
    const size_t S3 = (size_t)Tmax * (size_t)(Bmax > H ? Bmax : H);
    L->len = calloc((size_t)Bmax, sizeof(int));
    if (!L->len) fail = 1;
    L->xw = zalloc(BT * G, &fail);
    L->r = zalloc(BT * G, &fail);
    L->g = zalloc(BT * G, &fail);
    L->c = zalloc((BT + Bmax) * H, &fail);
    L->h = zalloc((BT + Bmax) * H, &fail);
    L->tc = zalloc(BT * H, &fail);
    if (has_norm(k)) {
        L->m1 = zalloc(S1, &fail);
        L->r1 = zalloc(S1, &fail);
        L->m2 = zalloc(S1, &fail);
        L->r2 = zalloc(S1, &fail);
        L->m3 = zalloc(S3, &fail);
        L->r3 = zalloc(S3, &fail);
    }
    L->n1 = zalloc((size_t)Bmax * G, &fail);
    L->n3 = zalloc((size_t)Bmax * H, &fail);
    L->dh = zalloc((size_t)Bmax * H, &fail);
    L->dc = zalloc((size_t)Bmax * H, &fail);
    L->dh2 = zalloc((size_t)Bmax * H, &fail);
    L->dc2 = zalloc((size_t)Bmax * H, &fail);
    /* per-thread double partials of the gain and bias gradients (bwd_row) */
    L->nthr = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    L->part_stride = 5 * (size_t)G + 2 * (size_t)H;
    L->part = calloc(L->part_stride * (size_t)L->nthr, sizeof(double));
    if (!L->part) fail = 1;
    if (k == NB_FK_BATCH) L->bnc = zalloc(6 * (size_t)G + 3 * (size_t)H, &fail);
    if (k == NB_FK_UNFUSED) {
        L->ua = zalloc((size_t)Bmax * G, &fail);
        L->ud = zalloc((size_t)Bmax * G, &fail);
        L->ur = zalloc((size_t)Bmax * G, &fail);
        if (nd->nstats > 0) L->us = zalloc(6 * BT, &fail);
    }
    if (k == NB_FK_WEIGHT) {
        L->weff = zalloc((size_t)G * C, &fail);
        L->ueff = zalloc((size_t)G * H, &fail);
        L->dweff = zalloc((size_t)G * C, &fail);
        L->dueff = zalloc((size_t)G * H, &fail);
        L->wnorm = zalloc((size_t)G, &fail);
        L->unorm = zalloc((size_t)G, &fail);
    }
    if (fail) {
        nb_lstm_free(L);
        nb_errf(err, "lstm: out of memory (B %d, T %d, H %d)", Bmax, Tmax, H);
        return -1;
    }
    return 0;
}

void nb_lstm_free(nb_lstm *L) {
    real *bufs[] = {L->xw,    L->r,   L->g,   L->c,    L->h,    L->tc,    L->m1,    L->r1,
                    L->m2,    L->r2,  L->m3,  L->r3,   L->n1,   L->n3,    L->bnc,   L->dh,
                    L->dc,    L->dh2, L->dc2, L->weff, L->ueff, L->dweff, L->dueff, L->wnorm,
                    L->unorm, L->ua,  L->ud,  L->ur,   L->us};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(L->len);
    free(L->part);
    memset(L, 0, sizeof *L);
}

/* ---- initialisation -------------------------------------------------------------------------- */

/* An n x n orthogonal matrix scaled by s into rows of dst (row stride ld): modified
 * Gram-Schmidt, in double, on a Gaussian matrix (re-drawn in the measure-zero degenerate case). */
static void ortho_block(real *dst, int n, int ld, double s, nb_rng *rng) {
    double *q = malloc((size_t)n * n * sizeof(double));
    if (!q) { /* out of memory: a scaled identity is still orthogonal */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                dst[(size_t)i * ld + j] = (real)(i == j ? s : 0);
        return;
    }
    for (int i = 0; i < n; i++) {
        double *v = q + (size_t)i * n;
        for (;;) {
            for (int j = 0; j < n; j++)
                v[j] = nb_rng_normal(rng);
            for (int p = 0; p < i; p++) {
                const double *u = q + (size_t)p * n;
                double d = 0;
                for (int j = 0; j < n; j++)
                    d += u[j] * v[j];
                for (int j = 0; j < n; j++)
                    v[j] -= d * u[j];
            }
            double nn = 0;
            for (int j = 0; j < n; j++)
                nn += v[j] * v[j];
            if (nn > 1e-6) {
                nn = 1 / sqrt(nn);
                for (int j = 0; j < n; j++)
                    v[j] *= nn;
                break;
            }
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            dst[(size_t)i * ld + j] = (real)(s * q[(size_t)i * n + j]);
    free(q);
}

/* One gate block (H rows of n values) as the code's norm_weight draws it. */
static void gate_block(real *dst, int H, int n, nb_rng *rng) {
    if (n == H) {
        ortho_block(dst, H, n, 0.05, rng);
        return;
    }
    const double lim = sqrt(6.0 / (n + H + 1));
    for (size_t i = 0; i < (size_t)H * n; i++)
        dst[i] = (real)((2 * nb_rng_uniform(rng) - 1) * lim);
}

static void fill(real *p, size_t off, size_t n, real v) {
    if (off == NONE) return;
    for (size_t i = 0; i < n; i++)
        p[off + i] = v;
}

void nb_lstm_init_params(nb_lstm *L, real *params, nb_rng *rng) {
    const int C = L->C, H = L->H, G = L->G;
    for (int k = 0; k < 4; k++)
        gate_block(params + L->w + (size_t)k * H * C, H, C, rng);
    for (int k = 0; k < 4; k++)
        gate_block(params + L->u + (size_t)k * H * H, H, H, rng);
    fill(params, L->b, (size_t)G, 0);
    fill(params, L->h0, (size_t)H, 0);
    const real gain = nb_fused_kind(L->norm.kind) == NB_FK_BATCH ? (real)0.1 : (real)1;
    fill(params, L->s1, (size_t)G, gain);
    fill(params, L->s2, (size_t)G, gain);
    fill(params, L->s3, (size_t)H, gain);
    fill(params, L->b1, (size_t)G, 0);
    fill(params, L->b2, (size_t)G, 0);
    fill(params, L->b3, (size_t)H, 0);
    if (L->a1 != NONE) {
        const nb_norm_def *nd = nb_norm_get(L->norm.kind);
        const real a0 = (real)nd->scalar_init(&L->norm);
        fill(params, L->a1, (size_t)nd->nscalars, a0);
        fill(params, L->a2, (size_t)nd->nscalars, a0);
        fill(params, L->a3, (size_t)nd->nscalars, a0);
    }
    if (nb_fused_kind(L->norm.kind) == NB_FK_WEIGHT) {
        for (int o = 0; o < G; o++) {
            double s = 0;
            for (int i = 0; i < C; i++)
                s += (double)params[L->w + (size_t)o * C + i] * params[L->w + (size_t)o * C + i];
            params[L->gw + o] = (real)sqrt(s);
            s = 0;
            for (int i = 0; i < H; i++)
                s += (double)params[L->u + (size_t)o * H + i] * params[L->u + (size_t)o * H + i];
            params[L->gu + o] = (real)sqrt(s);
        }
    }
}

/* ---- norms ------------------------------------------------------------------------------------
 */

/* Position step t of row b reads and writes. */
static inline int pos_of(const nb_lstm *L, int b, int t) {
    const int n = L->len[b];
    return L->reverse && t < n ? n - 1 - t : t;
}

/* Row b of a at step t, read in place in xw (its gradient replaces it in backward). */
static inline real *a_row(const nb_lstm *L, int t, int b) {
    return L->xw + ((size_t)b * L->T + pos_of(L, b, t)) * L->G;
}

/* Thread th's slice [*u0, *u1) of n units, in whole groups of 8 (a 32-byte vector of floats). */
static inline void unit_slice(int n, int th, int nth, int *u0, int *u1) {
    const long long groups = (n + 7) / 8;
    const int a = (int)(groups * th / nth) * 8, b = (int)(groups * (th + 1) / nth) * 8;
    *u0 = a < n ? a : n;
    *u1 = b < n ? b : n;
}

/* ---- BatchNorm over the B rows of one step (nn/norm.c's arithmetic, value for value) -------- */

/* Row b of a step's matrix: of base (row stride ld) or, when base is NULL, of a at step t. */
static inline const real *bn_row(const nb_lstm *L, const real *base, size_t ld, int t, int b) {
    return base ? base + (size_t)b * ld : a_row(L, t, b);
}

/* Statistics of columns [c0, c1): mean and r over the B rows, summed in double in row order,
 * two passes, biased variance (unbiased with cfg->bn_unbiased_batch). */
static void bn_stats(const nb_lstm *L, real *mean, real *rstd, const real *base, size_t ld, int t,
                     int c0, int c1) {
    const int B = L->B;
    const double nb = B, unb = B > 1 ? nb / (B - 1) : 1.0;
    for (int j0 = c0; j0 < c1; j0 += BN_CB) {
        const int w = c1 - j0 < BN_CB ? c1 - j0 : BN_CB;
        double s[BN_CB], v[BN_CB];
        memset(s, 0, sizeof s);
        memset(v, 0, sizeof v);
        for (int b = 0; b < B; b++) {
            const real *x = bn_row(L, base, ld, t, b) + j0;
#pragma omp simd
            for (int c = 0; c < w; c++)
                s[c] += (double)x[c];
        }
        for (int c = 0; c < w; c++)
            s[c] /= B;
        for (int b = 0; b < B; b++) {
            const real *x = bn_row(L, base, ld, t, b) + j0;
#pragma omp simd
            for (int c = 0; c < w; c++) {
                const double d = (double)x[c] - s[c];
                v[c] += d * d;
            }
        }
        for (int c = 0; c < w; c++) {
            const double var = v[c] / nb;
            mean[j0 + c] = (real)s[c];
            rstd[j0 + c] = (real)rstd_of(L->norm.bn_unbiased_batch ? var * unb : var, &L->norm);
        }
    }
}

/* Backward coefficients of columns [c0, c1): for dy (rows at stride ldy) the gradient of the
 * norm's output, x its input (bn_row), mean/rstd its statistics and g its gain, the input's
 * gradient is dx = A dy + K (x - mu) + M per column. Sums in double over the B rows in row
 * order. Adds r sum(dy (x - mu)) to pg and sum(dy) to pb (pb may be NULL), indexed by column,
 * for the columns in [o0, o1) only (the ones the calling thread owns). */
static void bn_coef(const nb_lstm *L, real *A, real *K, real *M, double *pg, double *pb, int o0,
                    int o1, const real *dy, size_t ldy, const real *base, size_t ld, int t,
                    const real *mean, const real *rstd, const real *g, int c0, int c1) {
    const int B = L->B;
    const nb_norm_cfg *cfg = &L->norm;
    const int need_sxx = cfg->eps_outside;
    const double nb = B, D = cfg->bn_unbiased_batch && B > 1 ? nb - 1 : nb;
    for (int j0 = c0; j0 < c1; j0 += BN_CB) {
        const int w = c1 - j0 < BN_CB ? c1 - j0 : BN_CB;
        const real *mu = mean + j0;
        double sy[BN_CB], syx[BN_CB], sxx[BN_CB];
        memset(sy, 0, sizeof sy);
        memset(syx, 0, sizeof syx);
        memset(sxx, 0, sizeof sxx);
        for (int b = 0; b < B; b++) {
            const real *x = bn_row(L, base, ld, t, b) + j0, *d = dy + (size_t)b * ldy + j0;
#pragma omp simd
            for (int c = 0; c < w; c++) {
                const double xm = (double)(x[c] - mu[c]);
                sy[c] += (double)d[c];
                syx[c] += (double)d[c] * xm;
            }
            if (need_sxx) {
#pragma omp simd
                for (int c = 0; c < w; c++) {
                    const double xm = (double)(x[c] - mu[c]);
                    sxx[c] += xm * xm;
                }
            }
        }
        for (int c = 0; c < w; c++) {
            const int j = j0 + c;
            const double rc = rstd[j], gc = g[j];
            if (j >= o0 && j < o1) {
                pg[j] += rc * syx[c];
                if (pb) pb[j] += sy[c];
            }
            A[j] = (real)(gc * rc);
            K[j] = (real)(rstd_coef(rc, sxx[c] / D, D, cfg) * gc * syx[c]);
            M[j] = (real)(-gc * rc * sy[c] / nb);
        }
    }
}

/* ---- forward ----------------------------------------------------------------------------------
 */

/* Statistics of one row for the fused forward: LayerNorm (ln) mean and r over n values, or
 * RMSNorm's r over the first k; r per cfg's eps placement, as nn/norm.c defines it. */
static inline void row_stats(const real *x, int n, int k, int ln, const nb_norm_cfg *cfg,
                             real *mean, real *rstd) {
    double m, s = 0;
    if (ln) {
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < n; i++)
            s += x[i];
        const real mu = (real)(s / n);
        real v = 0;
#pragma omp simd reduction(+ : v)
        for (int i = 0; i < n; i++)
            v += (x[i] - mu) * (x[i] - mu);
        *mean = mu;
        m = (double)v / n;
    } else {
        real q = 0;
#pragma omp simd reduction(+ : q)
        for (int i = 0; i < k; i++)
            q += x[i] * x[i];
        *mean = 0;
        m = (double)q / k;
    }
    *rstd = (real)rstd_of(m, cfg);
}

/* Backward of one row norm of the fused kinds (layer, rms, prms): dy (n) is the gradient of the
 * norm's output, x the row it normalized, mu and r its statistics (mu 0 for RMS), g its gain.
 * Writes dx = base + the gradient of x (base may be NULL). dx may alias x or base: every sum is
 * taken before anything is written, and each value is written from its own index only.
 * Accumulates, in double, pg += dy*xhat, pb += dy (pb NULL: no norm bias) and pd += dx - base
 * (pd NULL: not wanted). The algebra is nn/norm.c's (docs/numerics.md):
 *   LN:  dx = r (g dy - mean(g dy)) + (x - mu) kc
 *   RMS: dx_i = r g dy_i + [i<k] x_i kc          (the sum in kc runs over all n)
 * with kc = sum_j g dy_j (x_j - mu) times 2/cnt dr/dm (rstd_coef), cnt = n (LN) or k (RMS). */
static inline void row_norm_bwd(real *dx, double *pg, double *pb, double *pd, const real *dy,
                                const real *base, const real *x, const real *g, real mu, real r,
                                int n, int k, int ln, const nb_norm_cfg *cfg) {
    const int cnt = ln ? n : k; /* the values r depends on */
    real sg = 0, sgx = 0, sxx = 0;
    if (ln) {
#pragma omp simd reduction(+ : sg, sgx)
        for (int i = 0; i < n; i++) {
            const real gd = g[i] * dy[i];
            sg += gd;
            sgx += gd * (x[i] - mu);
        }
    } else {
#pragma omp simd reduction(+ : sgx)
        for (int i = 0; i < n; i++)
            sgx += g[i] * dy[i] * x[i];
    }
    if (cfg->eps_outside) {
#pragma omp simd reduction(+ : sxx)
        for (int i = 0; i < cnt; i++)
            sxx += (x[i] - mu) * (x[i] - mu);
    }
#pragma omp simd
    for (int i = 0; i < n; i++)
        pg[i] += (double)dy[i] * (double)((x[i] - mu) * r);
    if (pb) {
#pragma omp simd
        for (int i = 0; i < n; i++)
            pb[i] += (double)dy[i];
    }
    const real mg = (real)((double)sg / n); /* 0 for RMS */
    const real kc = (real)(rstd_coef(r, (double)sxx / cnt, cnt, cfg) * (double)sgx);
    if (base) {
#pragma omp simd
        for (int i = 0; i < cnt; i++)
            dx[i] = base[i] + (r * (g[i] * dy[i] - mg) + (x[i] - mu) * kc);
#pragma omp simd
        for (int i = cnt; i < n; i++)
            dx[i] = base[i] + r * (g[i] * dy[i]);
    } else {
#pragma omp simd
        for (int i = 0; i < cnt; i++)
            dx[i] = r * (g[i] * dy[i] - mg) + (x[i] - mu) * kc;
#pragma omp simd
        for (int i = cnt; i < n; i++)
            dx[i] = r * (g[i] * dy[i]);
        if (pd) {
#pragma omp simd
            for (int i = 0; i < n; i++)
                pd[i] += (double)dx[i];
        }
    }
}

/* The h path of one row at step t for every kind but batch: tc = tanh(N3(c)), h = o*tc
 * (masked), and the output at the position read. nc is the cell row; N3 is the row norm of
 * layer/rms/prms when fused, else the identity. */
static inline void cell_out(nb_lstm *L, real *out, int t, int b, const real *nc, const real *gg,
                            const real *h0, real *tcb, real *h1, int fused, int ln,
                            const real *params) {
    const int H = L->H, B = L->B;
    const real m = t < L->len[b] ? 1 : 0;
    if (fused) {
        const real *g3 = params + L->s3, *e3 = ln ? params + L->b3 : NULL;
        real mu3, q3;
        row_stats(nc, H, L->k3, ln, &L->norm, &mu3, &q3);
        L->m3[(size_t)t * B + b] = mu3;
        L->r3[(size_t)t * B + b] = q3;
        if (ln) {
#pragma omp simd
            for (int j = 0; j < H; j++)
                tcb[j] = vm_tanh(g3[j] * ((nc[j] - mu3) * q3) + e3[j]);
        } else {
#pragma omp simd
            for (int j = 0; j < H; j++)
                tcb[j] = vm_tanh(g3[j] * (nc[j] * q3));
        }
    } else {
#pragma omp simd
        for (int j = 0; j < H; j++)
            tcb[j] = vm_tanh(nc[j]);
    }
    const real *o = gg + 2 * H;
#pragma omp simd
    for (int j = 0; j < H; j++)
        h1[j] = m * (o[j] * tcb[j]) + (1 - m) * h0[j];
    if (out) memcpy(out + ((size_t)b * L->T + pos_of(L, b, t)) * H, h1, sizeof(real) * H);
}

/* Gates and cell of row b at step t for every kind but batch, from pa (a's row) and pr (r's
 * row): pre = N1(a) + N2(r) + b with the row norms of layer/rms/prms computed here (statistics
 * kept for backward), or no norm (none, weight); the activations into g, the new cell (masked)
 * into c. */
static inline void gate_row(nb_lstm *L, int t, int b, const real *pa, const real *pr,
                            const real *params) {
    const int B = L->B, H = L->H, G = L->G;
    const int kind = nb_fused_kind(L->norm.kind);
    const int fused = has_norm(kind), ln = kind == NB_FK_LAYER;
    const size_t sr = (size_t)t * B + b;
    const real *bias = params + L->b;
    real *gg = L->g + sr * G;
    const real m = t < L->len[b] ? 1 : 0;
    const real *c0 = L->c + sr * H;
    real *c1 = L->c + (sr + B) * H;
    if (fused) {
        const real *g1 = params + L->s1, *g2 = params + L->s2;
        real mu1, q1, mu2, q2;
        row_stats(pa, G, L->k1, ln, &L->norm, &mu1, &q1);
        row_stats(pr, G, L->k1, ln, &L->norm, &mu2, &q2);
        L->m1[sr] = mu1;
        L->r1[sr] = q1;
        L->m2[sr] = mu2;
        L->r2[sr] = q2;
        if (ln) {
            const real *e1 = params + L->b1, *e2 = params + L->b2;
#pragma omp simd
            for (int j = 0; j < G; j++)
                gg[j] = g1[j] * ((pa[j] - mu1) * q1) + e1[j] +
                        (g2[j] * ((pr[j] - mu2) * q2) + e2[j]) + bias[j];
        } else {
#pragma omp simd
            for (int j = 0; j < G; j++)
                gg[j] = g1[j] * (pa[j] * q1) + g2[j] * (pr[j] * q2) + bias[j];
        }
    } else {
#pragma omp simd
        for (int j = 0; j < G; j++)
            gg[j] = pa[j] + pr[j] + bias[j];
    }
#pragma omp simd
    for (int j = 0; j < 3 * H; j++)
        gg[j] = vm_sigmoid(gg[j]);
#pragma omp simd
    for (int j = 3 * H; j < G; j++)
        gg[j] = vm_tanh(gg[j]);
#pragma omp simd
    for (int j = 0; j < H; j++) {
        const real cnew = gg[H + j] * c0[j] + gg[j] * gg[3 * H + j];
        c1[j] = m * cnew + (1 - m) * c0[j];
    }
}

/* Gates and cell of row b at step t on the units [u0, u1) for batch: pre = BN(a; s1) + BN(r; s2)
 * + b on those units' four gate columns, with the step's column statistics (already computed);
 * the activations into g, the new cell (masked) into c. The arithmetic of gate_row. */
static inline void bn_gates(nb_lstm *L, int t, int b, int u0, int u1, const real *params) {
    const int B = L->B, H = L->H, G = L->G;
    const size_t sr = (size_t)t * B + b;
    const real *pa = a_row(L, t, b), *pr = L->r + sr * G, *bias = params + L->b;
    const real *g1 = params + L->s1, *g2 = params + L->s2;
    const real *mu1 = L->m1 + (size_t)t * G, *q1 = L->r1 + (size_t)t * G;
    const real *mu2 = L->m2 + (size_t)t * G, *q2 = L->r2 + (size_t)t * G;
    real *gg = L->g + sr * G;
    for (int k = 0; k < 4; k++) {
        const int j0 = k * H + u0, j1 = k * H + u1;
#pragma omp simd
        for (int j = j0; j < j1; j++)
            gg[j] =
                g1[j] * ((pa[j] - mu1[j]) * q1[j]) + g2[j] * ((pr[j] - mu2[j]) * q2[j]) + bias[j];
        if (k < 3) {
#pragma omp simd
            for (int j = j0; j < j1; j++)
                gg[j] = vm_sigmoid(gg[j]);
        } else {
#pragma omp simd
            for (int j = j0; j < j1; j++)
                gg[j] = vm_tanh(gg[j]);
        }
    }
    const real m = t < L->len[b] ? 1 : 0;
    const real *c0 = L->c + sr * H;
    real *c1 = L->c + (sr + B) * H;
#pragma omp simd
    for (int j = u0; j < u1; j++) {
        const real cnew = gg[H + j] * c0[j] + gg[j] * gg[3 * H + j];
        c1[j] = m * cnew + (1 - m) * c0[j];
    }
}

/* The h path of row b at step t on the units [u0, u1) for batch: tc = tanh(BN(c; s3, b3)) with
 * the step's column statistics, h = o*tc (masked), and the output at the position read. The
 * arithmetic of cell_out. */
static inline void bn_cell(nb_lstm *L, real *out, int t, int b, int u0, int u1,
                           const real *params) {
    const int B = L->B, H = L->H, G = L->G;
    const size_t sr = (size_t)t * B + b;
    const real m = t < L->len[b] ? 1 : 0;
    const real *g3 = params + L->s3, *e3 = params + L->b3;
    const real *mu = L->m3 + (size_t)t * H, *q = L->r3 + (size_t)t * H;
    const real *nc = L->c + (sr + B) * H, *o = L->g + sr * G + 2 * H, *h0 = L->h + sr * H;
    real *tcb = L->tc + sr * H, *h1 = L->h + (sr + B) * H;
#pragma omp simd
    for (int j = u0; j < u1; j++) {
        tcb[j] = vm_tanh(g3[j] * ((nc[j] - mu[j]) * q[j]) + e3[j]);
        h1[j] = m * (o[j] * tcb[j]) + (1 - m) * h0[j];
    }
    if (out)
        memcpy(out + ((size_t)b * L->T + pos_of(L, b, t)) * H + u0, h1 + u0,
               sizeof(real) * (size_t)(u1 - u0));
}

/* The forward sweep for batch, one parallel region. BatchNorm's statistics are per column, so
 * here each thread owns a slice of hidden units, for all rows: their four gate columns of r
 * (four GEMMs on its own, reading all of h), the statistics of those columns of a and r, the
 * gates, the cells, the statistics of its cell columns and its columns of h. The only data
 * another thread wrote is h, read by the next step's GEMM: one barrier a step. */
static void sweep_fwd_batch(nb_lstm *L, real *out, const real *U, int nt, const real *params) {
    const int B = L->B, T = L->T, H = L->H, G = L->G;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int u0, u1;
        unit_slice(H, omp_get_thread_num(), omp_get_num_threads(), &u0, &u1);
        const int nu = u1 - u0;
        for (int t = 0; t < T; t++) {
            const size_t st = (size_t)t * B;
            real *rt = L->r + st * G;
            for (int k = 0; k < 4 && nu > 0; k++) {
                const int j0 = k * H + u0;
                CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, nu, H, 1, L->h + st * H, H,
                           U + (size_t)j0 * H, H, 0, rt + j0, G);
                bn_stats(L, L->m1 + (size_t)t * G, L->r1 + (size_t)t * G, NULL, 0, t, j0, j0 + nu);
                bn_stats(L, L->m2 + (size_t)t * G, L->r2 + (size_t)t * G, rt, (size_t)G, t, j0,
                         j0 + nu);
            }
            for (int b = 0; b < B && nu > 0; b++)
                bn_gates(L, t, b, u0, u1, params);
            bn_stats(L, L->m3 + (size_t)t * H, L->r3 + (size_t)t * H, L->c + (st + B) * H,
                     (size_t)H, t, u0, u1);
            for (int b = 0; b < B && nu > 0; b++)
                bn_cell(L, out, t, b, u0, u1, params);
#pragma omp barrier
        }
    }
}

/* ---- a row-wise norm without a fused form (DyT): its kernels over a step's rows ------------- */

static const nb_norm_ops *uops(const nb_lstm *L) {
    return nb_norm_get(L->norm.kind)->REAL_OPS;
}

/* The statistics of site i (0..2) at step t, st0 or st1 (j), or NULL when the norm keeps none. */
static real *ust(const nb_lstm *L, int i, int j, int t) {
    const size_t BT = (size_t)L->Bmax * L->Tmax;
    return L->us ? L->us + (size_t)(2 * i + j) * BT + (size_t)t * L->B : NULL;
}

static const real *popt(const real *p, size_t off) {
    return off == NONE ? NULL : p + off;
}

static real *gopt(real *p, size_t off) {
    return off == NONE ? NULL : p + off;
}

/* The forward sweep for an unfused norm: step by step over all rows (the norm's kernels take
 * their own threads), the arithmetic of gate_row and cell_out with N1, N2, N3 the kernels'. */
static void step_fwd_unfused(nb_lstm *L, real *out, const real *U, const real *params, int t) {
    const int B = L->B, T = L->T, H = L->H, G = L->G;
    const nb_norm_ops *op = uops(L);
    const real *bias = params + L->b;
    {
        const size_t st = (size_t)t * B;
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, G, H, 1, L->h + st * H, H, U, H, 0,
                   L->r + st * G, G);
        for (int b = 0; b < B; b++)
            memcpy(L->ua + (size_t)b * G, a_row(L, t, b), sizeof(real) * G);
        real *gg = L->g + st * G;
        op->forward(gg, ust(L, 0, 0, t), ust(L, 0, 1, t), NULL, NULL, L->ua, params + L->s1,
                    popt(params, L->b1), popt(params, L->a1), B, G, 1, &L->norm);
        op->forward(L->ur, ust(L, 1, 0, t), ust(L, 1, 1, t), NULL, NULL, L->r + st * G,
                    params + L->s2, popt(params, L->b2), popt(params, L->a2), B, G, 1, &L->norm);
        for (int b = 0; b < B; b++) {
            real *gr = gg + (size_t)b * G;
            const real *n2 = L->ur + (size_t)b * G;
            for (int j = 0; j < G; j++)
                gr[j] = gr[j] + n2[j] + bias[j];
            for (int j = 0; j < 3 * H; j++)
                gr[j] = vm_sigmoid(gr[j]);
            for (int j = 3 * H; j < G; j++)
                gr[j] = vm_tanh(gr[j]);
            const real m = t < L->len[b] ? 1 : 0;
            const real *c0 = L->c + (st + b) * H;
            real *c1 = L->c + (st + B + b) * H;
            for (int j = 0; j < H; j++) {
                const real cnew = gr[H + j] * c0[j] + gr[j] * gr[3 * H + j];
                c1[j] = m * cnew + (1 - m) * c0[j];
            }
        }
        real *tc = L->tc + st * H;
        op->forward(tc, ust(L, 2, 0, t), ust(L, 2, 1, t), NULL, NULL, L->c + (st + B) * H,
                    params + L->s3, popt(params, L->b3), popt(params, L->a3), B, H, 1, &L->norm);
        for (int b = 0; b < B; b++) {
            const real m = t < L->len[b] ? 1 : 0;
            real *tcb = tc + (size_t)b * H, *h1 = L->h + (st + B + b) * H;
            const real *o = gg + (size_t)b * G + 2 * H, *h0 = L->h + (st + b) * H;
            for (int j = 0; j < H; j++) {
                tcb[j] = vm_tanh(tcb[j]);
                h1[j] = m * (o[j] * tcb[j]) + (1 - m) * h0[j];
            }
            if (out) memcpy(out + ((size_t)b * T + pos_of(L, b, t)) * H, h1, sizeof(real) * H);
        }
    }
}

static void sweep_fwd_unfused(nb_lstm *L, real *out, const real *U, const real *params) {
    for (int t = 0; t < L->T; t++)
        step_fwd_unfused(L, out, U, params, t);
}

void nb_lstm_forward(nb_lstm *L, real *out, const real *x, const int *len, int B, int T,
                     int reverse, const real *params) {
    const int C = L->C, H = L->H, G = L->G;
    const int kind = nb_fused_kind(L->norm.kind);
    L->B = B;
    L->T = T;
    L->reverse = reverse;
    L->x = (real *)x;
    for (int b = 0; b < B; b++)
        L->len[b] = len[b] < 1 ? 1 : len[b] > T ? T : len[b];

    const real *W = params + L->w, *U = params + L->u;
    if (kind == NB_FK_WEIGHT) {
        nb_weightnorm_forward(L->weff, L->wnorm, params + L->w, params + L->gw, G, C);
        nb_weightnorm_forward(L->ueff, L->unorm, params + L->u, params + L->gu, G, H);
        W = L->weff;
        U = L->ueff;
    }
    const real *bias = params + L->b;
    /* a = x·W^T + b over all B*T positions: one GEMM; step t reads its rows in place */
    const size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++)
        memcpy(L->xw + i * G, bias, sizeof(real) * G);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)BT, G, C, 1, x, C, W, C, 1, L->xw, G);

    /* initial state: h0 on every row, c0 = 0 */
    for (int b = 0; b < B; b++) {
        memcpy(L->h + (size_t)b * H, params + L->h0, sizeof(real) * H);
        memset(L->c + (size_t)b * H, 0, sizeof(real) * H);
    }
    if (kind == NB_FK_BATCH) {
        sweep_fwd_batch(L, out, U, row_threads(L), params);
        return;
    }
    if (kind == NB_FK_UNFUSED) {
        sweep_fwd_unfused(L, out, U, params);
        return;
    }
    /* Every other kind: rows do not interact, so each thread owns a slice of rows for all T
     * steps: one parallel region, no barrier; each thread's recurrent GEMM on its rows runs on
     * that thread alone (OpenBLAS does not fork inside a parallel region). */
    const int nt = row_threads(L);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int th = omp_get_thread_num(), nth = omp_get_num_threads();
        const int b0 = (int)((long long)B * th / nth), b1 = (int)((long long)B * (th + 1) / nth);
        for (int t = 0; t < T && b1 > b0; t++) {
            const size_t s0 = (size_t)t * B + b0;
            CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, b1 - b0, G, H, 1, L->h + s0 * H, H,
                       U, H, 0, L->r + s0 * G, G);
            for (int b = b0; b < b1; b++) {
                const size_t sr = (size_t)t * B + b;
                gate_row(L, t, b, a_row(L, t, b), L->r + sr * G, params);
                cell_out(L, out, t, b, L->c + (sr + B) * H, L->g + sr * G, L->h + sr * H,
                         L->tc + sr * H, L->h + (sr + B) * H, has_norm(kind), kind == NB_FK_LAYER,
                         params);
            }
        }
    }
}

const real *nb_lstm_final(const nb_lstm *L) {
    return L->h + (size_t)L->T * L->B * L->H;
}

/* ---- backward ---------------------------------------------------------------------------------
 */

/* The gate gradients of row b at step t from dh (with this step's dout added) and dc2 (the cell
 * gradient with the h path's added): dp (G) the pre-activation gradient, and the carries to
 * step t-1: dc (H) and dh2 (H, before the recurrent GEMM adds dr·U). */
static inline void gates_bwd(const nb_lstm *L, real *dp, real *dcp, real *dhp, const real *dhb,
                             const real *dcb, const real *gg, const real *tcb, const real *c0,
                             real m, int u0, int u1) {
    const int H = L->H;
#pragma omp simd
    for (int j = u0; j < u1; j++) {
        const real i = gg[j], f = gg[H + j], o = gg[2 * H + j], c = gg[3 * H + j];
        const real dcn = m * dcb[j];
        const real dout_o = m * dhb[j] * tcb[j];
        dp[j] = dcn * c * i * (1 - i);
        dp[H + j] = dcn * c0[j] * f * (1 - f);
        dp[2 * H + j] = dout_o * o * (1 - o);
        dp[3 * H + j] = dcn * i * (1 - c * c);
        dcp[j] = (1 - m) * dcb[j] + dcn * f;
        dhp[j] = (1 - m) * dhb[j];
    }
}

/* dh += dout at the positions step t reads; dn = the gradient into N3's output (pre-tanh). */
static inline void hpath_bwd(const nb_lstm *L, real *dhb, real *dn, const real *dout, int t, int b,
                             const real *gg, const real *tcb, int u0, int u1) {
    const int H = L->H;
    if (dout) {
        const real *d = dout + ((size_t)b * L->T + pos_of(L, b, t)) * H;
#pragma omp simd
        for (int j = u0; j < u1; j++)
            dhb[j] += d[j];
    }
    const real m = t < L->len[b] ? 1 : 0;
#pragma omp simd
    for (int j = u0; j < u1; j++)
        dn[j] = m * dhb[j] * gg[2 * H + j] * (1 - tcb[j] * tcb[j]);
}

static inline void acc(double *p, const real *v, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++)
        p[i] += (double)v[i];
}

/* Row b of step t backward, for every kind but batch. dh/dh2 are the caller's current carry
 * buffers (B,H). The step's gain/bias gradients go into P, the calling thread's double
 * partials (s1 b1 s2 b2 b, G each; s3 b3, H each). a's gradient replaces a in xw (same
 * position) and r's replaces r in r's slot, for the weight GEMMs after the sweep. */
static inline void bwd_row(nb_lstm *L, double *P, real *dh, real *dh2, const real *dout, int t,
                           int b, const real *params) {
    const int B = L->B, T = L->T, H = L->H, G = L->G;
    const int kind = nb_fused_kind(L->norm.kind);
    const int fused = has_norm(kind), ln = kind == NB_FK_LAYER;
    double *ps1 = P, *pb1 = P + G, *ps2 = P + 2 * G, *pb2 = P + 3 * G, *pbias = P + 4 * G;
    double *ps3 = P + 5 * G, *pb3 = P + 5 * G + H;
    const size_t sr = (size_t)t * B + b;
    const real m = t < L->len[b] ? 1 : 0;
    const real *gg = L->g + sr * G, *tcb = L->tc + sr * H;
    real *dhb = dh + (size_t)b * H, *dn = L->n3 + (size_t)b * H;
    real *dc2 = L->dc2 + (size_t)b * H, *dcb = L->dc + (size_t)b * H;
    real *dp = L->n1 + (size_t)b * G;
    hpath_bwd(L, dhb, dn, dout, t, b, gg, tcb, 0, H);
    if (fused) {
        row_norm_bwd(dc2, ps3, ln ? pb3 : NULL, NULL, dn, dcb, L->c + (sr + B) * H, params + L->s3,
                     L->m3[sr], L->r3[sr], H, L->k3, ln, &L->norm);
    } else {
#pragma omp simd
        for (int j = 0; j < H; j++)
            dc2[j] = dcb[j] + dn[j];
    }
    gates_bwd(L, dp, dcb, dh2 + (size_t)b * H, dhb, dc2, gg, tcb, L->c + sr * H, m, 0, H);
    acc(pbias, dp, G); /* the bias added at the step */
    /* a (read in place in xw) and r: their gradients overwrite them */
    real *xa = L->xw + ((size_t)b * T + pos_of(L, b, t)) * G, *xr = L->r + sr * G;
    if (fused) {
        row_norm_bwd(xa, ps1, ln ? pb1 : NULL, pbias, dp, NULL, xa, params + L->s1, L->m1[sr],
                     L->r1[sr], G, L->k1, ln, &L->norm);
        row_norm_bwd(xr, ps2, ln ? pb2 : NULL, NULL, dp, NULL, xr, params + L->s2, L->m2[sr],
                     L->r2[sr], G, L->k1, ln, &L->norm);
    } else {
        memcpy(xa, dp, sizeof(real) * G);
        acc(pbias, dp, G); /* the bias added to x·W */
        memcpy(xr, dp, sizeof(real) * G);
    }
}

/* The whole backward sweep for every kind but batch. Rows do not interact (the row norms are
 * per row, and dh_prev = dr·U row by row), so each thread owns a slice of rows for all T steps:
 * one parallel region, no barrier; inside it, each thread's recurrent GEMM on its rows runs on
 * that thread alone (OpenBLAS does not fork inside a parallel region). Returns the buffer that
 * holds dh of the initial state. */
static real *sweep_bwd_rows(nb_lstm *L, const real *dout, const real *U, int nt,
                            const real *params) {
    const int B = L->B, T = L->T, H = L->H, G = L->G;
    const size_t PS = L->part_stride;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int th = omp_get_thread_num(), nth = omp_get_num_threads();
        const int b0 = (int)((long long)B * th / nth), b1 = (int)((long long)B * (th + 1) / nth);
        double *P = L->part + (size_t)th * PS;
        real *dh = L->dh, *dh2 = L->dh2;
        for (int t = T - 1; t >= 0; t--) {
            for (int b = b0; b < b1; b++)
                bwd_row(L, P, dh, dh2, dout, t, b, params);
            /* dh_prev += dr·U on this thread's rows */
            if (b1 > b0)
                CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, b1 - b0, H, G, 1,
                           L->r + ((size_t)t * B + b0) * G, G, U, H, 1, dh2 + (size_t)b0 * H, H);
            real *sw = dh;
            dh = dh2;
            dh2 = sw;
        }
    }
    return T % 2 ? L->dh2 : L->dh;
}

/* The whole backward sweep for batch, one parallel region laid out as sweep_fwd_batch: each
 * thread owns a slice of hidden units for all rows: the h path, N3's column sums and gradient,
 * the gates, N1 and N2's column sums and the gradients of a and r on its four gate columns, and
 * its columns of dh_prev += dr·U (a GEMM on its own, reading all of dr). Gain and bias gradients
 * go into the thread's partials, each column's from the thread that owns it. The only data
 * another thread wrote is dr, read by the GEMM: one barrier a step. Returns the buffer that
 * holds dh of the initial state. */
static real *sweep_bwd_batch(nb_lstm *L, const real *dout, const real *U, int nt,
                             const real *params) {
    const int B = L->B, T = L->T, H = L->H, G = L->G;
    real *A1 = L->bnc, *K1 = A1 + G, *M1 = K1 + G, *A2 = M1 + G, *K2 = A2 + G, *M2 = K2 + G;
    real *A3 = M2 + G, *K3 = A3 + H, *M3 = K3 + H;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int th = omp_get_thread_num();
        int u0, u1;
        unit_slice(H, th, omp_get_num_threads(), &u0, &u1);
        const int nu = u1 - u0;
        double *P = L->part + (size_t)th * L->part_stride;
        double *ps1 = P, *ps2 = P + 2 * G, *pbias = P + 4 * G, *ps3 = P + 5 * G;
        double *pb3 = P + 5 * G + H;
        real *dh = L->dh, *dh2 = L->dh2;
        for (int t = T - 1; t >= 0; t--) {
            const size_t st = (size_t)t * B;
            const real *mu3 = L->m3 + (size_t)t * H, *mu1 = L->m1 + (size_t)t * G;
            const real *mu2 = L->m2 + (size_t)t * G;
            real *rt = L->r + st * G;
            for (int b = 0; b < B && nu > 0; b++) /* dh += dout; the gradient into N3's output */
                hpath_bwd(L, dh + (size_t)b * H, L->n3 + (size_t)b * H, dout, t, b,
                          L->g + (st + b) * G, L->tc + (st + b) * H, u0, u1);
            bn_coef(L, A3, K3, M3, ps3, pb3, u0, u1, L->n3, (size_t)H, L->c + (st + B) * H,
                    (size_t)H, t, mu3, L->r3 + (size_t)t * H, params + L->s3, u0, u1);
            for (int b = 0; b < B && nu > 0; b++) {
                const size_t sr = st + b;
                const real *dn = L->n3 + (size_t)b * H, *cn = L->c + (sr + B) * H;
                real *dc2 = L->dc2 + (size_t)b * H, *dcb = L->dc + (size_t)b * H;
#pragma omp simd
                for (int j = u0; j < u1; j++) /* the cell's gradient: the carry and through N3 */
                    dc2[j] = dcb[j] + (A3[j] * dn[j] + K3[j] * (cn[j] - mu3[j]) + M3[j]);
                gates_bwd(L, L->n1 + (size_t)b * G, dcb, dh2 + (size_t)b * H, dh + (size_t)b * H,
                          dc2, L->g + sr * G, L->tc + sr * H, L->c + sr * H, t < L->len[b] ? 1 : 0,
                          u0, u1);
            }
            for (int k = 0; k < 4 && nu > 0; k++) {
                /* N1 (the bias added at the step goes with it) and N2 */
                const int j0 = k * H + u0, j1 = j0 + nu;
                bn_coef(L, A1, K1, M1, ps1, pbias, j0, j1, L->n1, (size_t)G, NULL, 0, t, mu1,
                        L->r1 + (size_t)t * G, params + L->s1, j0, j1);
                bn_coef(L, A2, K2, M2, ps2, NULL, j0, j1, L->n1, (size_t)G, rt, (size_t)G, t, mu2,
                        L->r2 + (size_t)t * G, params + L->s2, j0, j1);
            }
            /* the gradients of a and r replace them (for the weight GEMMs after the sweep) */
            for (int b = 0; b < B && nu > 0; b++) {
                const real *dp = L->n1 + (size_t)b * G;
                real *xa = a_row(L, t, b), *xr = rt + (size_t)b * G;
                for (int k = 0; k < 4; k++) {
                    const int j0 = k * H + u0, j1 = j0 + nu;
#pragma omp simd
                    for (int j = j0; j < j1; j++)
                        xa[j] = A1[j] * dp[j] + K1[j] * (xa[j] - mu1[j]) + M1[j];
                    acc(pbias + j0, xa + j0, nu); /* the bias added to x·W */
#pragma omp simd
                    for (int j = j0; j < j1; j++)
                        xr[j] = A2[j] * dp[j] + K2[j] * (xr[j] - mu2[j]) + M2[j];
                }
            }
#pragma omp barrier
            /* dh_prev += dr·U on this thread's units */
            if (nu > 0)
                CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, nu, G, 1, rt, G, U + u0, H,
                           1, dh2 + u0, H);
            real *sw = dh;
            dh = dh2;
            dh2 = sw;
        }
    }
    return T % 2 ? L->dh2 : L->dh;
}

/* The backward sweep for an unfused norm, step by step over all rows, the arithmetic of bwd_row
 * with N1, N2, N3 the kernels' (their gain, shift and scalar gradients straight into grads, the
 * bias's into thread 0's partials). Returns the buffer that holds dh of the initial state. */
static void step_bwd_unfused(nb_lstm *L, real *grads, const real *dout, const real *U,
                             const real *params, int t, real *dh, real *dh2) {
    const int B = L->B, H = L->H, G = L->G;
    const nb_norm_ops *op = uops(L);
    double *pbias = L->part + 4 * (size_t)G;
    {
        const size_t st = (size_t)t * B;
        for (int b = 0; b < B; b++)
            hpath_bwd(L, dh + (size_t)b * H, L->n3 + (size_t)b * H, dout, t, b, L->g + (st + b) * G,
                      L->tc + (st + b) * H, 0, H);
        /* dc2 = dc + N3's input gradient */
        memcpy(L->dc2, L->dc, sizeof(real) * (size_t)B * H);
        op->backward(L->dc2, grads + L->s3, gopt(grads, L->b3), gopt(grads, L->a3), L->n3,
                     L->c + (st + B) * H, params + L->s3, popt(params, L->a3), ust(L, 2, 0, t),
                     ust(L, 2, 1, t), B, H, 1, &L->norm, 0);
        for (int b = 0; b < B; b++) {
            const real m = t < L->len[b] ? 1 : 0;
            gates_bwd(L, L->n1 + (size_t)b * G, L->dc + (size_t)b * H, dh2 + (size_t)b * H,
                      dh + (size_t)b * H, L->dc2 + (size_t)b * H, L->g + (st + b) * G,
                      L->tc + (st + b) * H, L->c + (st + b) * H, m, 0, H);
            acc(pbias, L->n1 + (size_t)b * G, G); /* the bias added at the step */
            memcpy(L->ua + (size_t)b * G, a_row(L, t, b), sizeof(real) * G);
        }
        op->backward(L->ud, grads + L->s1, gopt(grads, L->b1), gopt(grads, L->a1), L->n1, L->ua,
                     params + L->s1, popt(params, L->a1), ust(L, 0, 0, t), ust(L, 0, 1, t), B, G, 1,
                     &L->norm, 1);
        op->backward(L->ur, grads + L->s2, gopt(grads, L->b2), gopt(grads, L->a2), L->n1,
                     L->r + st * G, params + L->s2, popt(params, L->a2), ust(L, 1, 0, t),
                     ust(L, 1, 1, t), B, G, 1, &L->norm, 1);
        memcpy(L->r + st * G, L->ur, sizeof(real) * (size_t)B * G);
        for (int b = 0; b < B; b++) { /* a's gradient replaces a in xw; the bias in x·W too */
            memcpy(a_row(L, t, b), L->ud + (size_t)b * G, sizeof(real) * G);
            acc(pbias, L->ud + (size_t)b * G, G);
        }
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, G, 1, L->r + st * G, G, U, H, 1,
                   dh2, H);
    }
}

static real *sweep_bwd_unfused(nb_lstm *L, real *grads, const real *dout, const real *U,
                               const real *params) {
    real *dh = L->dh, *dh2 = L->dh2;
    for (int t = L->T - 1; t >= 0; t--) {
        step_bwd_unfused(L, grads, dout, U, params, t, dh, dh2);
        real *sw = dh;
        dh = dh2;
        dh2 = sw;
    }
    return L->T % 2 ? L->dh2 : L->dh;
}

static void finish_back(nb_lstm *L, real *dx, real *grads, const real *params);

void nb_lstm_backward(nb_lstm *L, real *dx, real *grads, const real *dout, const real *dfinal,
                      const real *params) {
    const int B = L->B, H = L->H;
    const int kind = nb_fused_kind(L->norm.kind);
    const real *U = kind == NB_FK_WEIGHT ? L->ueff : params + L->u;
    /* x·W^T is no longer needed: its buffer takes its gradient */

    if (dfinal)
        memcpy(L->dh, dfinal, sizeof(real) * B * H);
    else
        memset(L->dh, 0, sizeof(real) * B * H);
    memset(L->dc, 0, sizeof(real) * B * H);
    memset(L->part, 0, sizeof(double) * L->part_stride * (size_t)L->nthr);

    const int nt = row_threads(L);
    real *dhf = kind == NB_FK_BATCH     ? sweep_bwd_batch(L, dout, U, nt, params)
                : kind == NB_FK_UNFUSED ? sweep_bwd_unfused(L, grads, dout, U, params)
                                        : sweep_bwd_rows(L, dout, U, nt, params);
    if (dhf != L->dh) {
        L->dh2 = L->dh;
        L->dh = dhf;
    }
    finish_back(L, dx, grads, params);
}

/* After the sweep (L->dh the gradient of the initial state, a's and r's gradients in place of
 * them, the gain and bias gradients in the partials): the initial state's, gains' and biases'
 * gradients, dU, dW, and dx when wanted. */
static void finish_back(nb_lstm *L, real *dx, real *grads, const real *params) {
    const int B = L->B, T = L->T, C = L->C, H = L->H, G = L->G;
    const int kind = nb_fused_kind(L->norm.kind);
    const real *W = kind == NB_FK_WEIGHT ? L->weff : params + L->w;
    real *dxw = L->xw;
    /* the learned initial state */
    real *dh0 = grads + L->h0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++)
            dh0[j] += L->dh[(size_t)b * H + j];

    const size_t BT = (size_t)B * T;
    { /* the threads' partials of the gain and bias gradients (both biases already in); a
       * tensor the norm does not have is NONE */
        const size_t PS = L->part_stride;
        struct {
            size_t off, at;
            int n;
        } sums[] = {{L->b, 4 * (size_t)G, G},     {L->s1, 0, G},
                    {L->b1, (size_t)G, G},        {L->s2, 2 * (size_t)G, G},
                    {L->b2, 3 * (size_t)G, G},    {L->s3, 5 * (size_t)G, H},
                    {L->b3, 5 * (size_t)G + H, H}};
        for (size_t s = 0; s < sizeof sums / sizeof sums[0]; s++) {
            if (sums[s].off == NONE) continue;
            for (int j = 0; j < sums[s].n; j++) {
                double v = 0;
                for (int th = 0; th < L->nthr; th++)
                    v += L->part[(size_t)th * PS + sums[s].at + j];
                grads[sums[s].off + j] += (real)v;
            }
        }
    }
    real *dW = grads + L->w, *dU = grads + L->u;
    if (kind == NB_FK_WEIGHT) {
        memset(L->dweff, 0, sizeof(real) * G * C);
        memset(L->dueff, 0, sizeof(real) * G * H);
        dW = L->dweff;
        dU = L->dueff;
    }
    /* dU += sum_t dr_t^T h_{t-1};  dW += dxw^T x;  dx += dxw·W */
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, G, H, (int)BT, 1, L->r, G, L->h, H, 1, dU,
               H);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, G, C, (int)BT, 1, dxw, G, L->x, C, 1, dW,
               C);
    if (dx)
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)BT, C, G, 1, dxw, G, W, C, 1, dx,
                   C);
    if (kind == NB_FK_WEIGHT) {
        nb_weightnorm_backward(grads + L->w, grads + L->gw, L->dweff, params + L->w, params + L->gw,
                               L->wnorm, G, C);
        nb_weightnorm_backward(grads + L->u, grads + L->gu, L->dueff, params + L->u, params + L->gu,
                               L->unorm, G, H);
    }
}

/* ---- step by step (nn/lstm.h: nb_lstm_begin ...) ---------------------------------------------
 */

int nb_lstm_begin(nb_lstm *L, const real *x, int B, int T, const real *params, nb_err *err) {
    const int kind = nb_fused_kind(L->norm.kind);
    if (kind == NB_FK_BATCH)
        return nb_errf(err, "lstm: batch normalization is not available step by step (its "
                            "statistics are taken over a step's rows inside the whole sweep)");
    if (B < 1 || B > L->Bmax || T < 1 || T > L->Tmax)
        return nb_errf(err, "lstm: %d rows of %d steps do not fit (at most %d of %d)", B, T,
                       L->Bmax, L->Tmax);
    L->B = B;
    L->T = T;
    L->reverse = 0;
    L->x = (real *)x;
    for (int b = 0; b < B; b++)
        L->len[b] = T;
    if (kind == NB_FK_WEIGHT) {
        nb_weightnorm_forward(L->weff, L->wnorm, params + L->w, params + L->gw, L->G, L->C);
        nb_weightnorm_forward(L->ueff, L->unorm, params + L->u, params + L->gu, L->G, L->H);
    }
    for (int b = 0; b < B; b++) {
        memcpy(L->h + (size_t)b * L->H, params + L->h0, sizeof(real) * L->H);
        memset(L->c + (size_t)b * L->H, 0, sizeof(real) * L->H);
    }
    return 0;
}

void nb_lstm_step(nb_lstm *L, int t, const real *params) {
    const int B = L->B, T = L->T, C = L->C, H = L->H, G = L->G;
    const int kind = nb_fused_kind(L->norm.kind);
    const real *W = kind == NB_FK_WEIGHT ? L->weff : params + L->w;
    const real *U = kind == NB_FK_WEIGHT ? L->ueff : params + L->u;
    /* a = x_t·W^T + b for this step's rows (at stride T in both x and xw) */
    for (int b = 0; b < B; b++)
        memcpy(L->xw + ((size_t)b * T + t) * G, params + L->b, sizeof(real) * G);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, G, C, 1, L->x + (size_t)t * C, T * C, W,
               C, 1, L->xw + (size_t)t * G, T * G);
    if (kind == NB_FK_UNFUSED) {
        step_fwd_unfused(L, NULL, U, params, t);
        return;
    }
    const size_t st = (size_t)t * B;
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, G, H, 1, L->h + st * H, H, U, H, 0,
               L->r + st * G, G);
    const int nt = (size_t)B * G < PAR_MIN ? 1 : nthreads(L);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int b = 0; b < B; b++) {
        const size_t sr = st + b;
        gate_row(L, t, b, a_row(L, t, b), L->r + sr * G, params);
        cell_out(L, NULL, t, b, L->c + (sr + B) * H, L->g + sr * G, L->h + sr * H, L->tc + sr * H,
                 L->h + (sr + B) * H, has_norm(kind), kind == NB_FK_LAYER, params);
    }
}

const real *nb_lstm_h(const nb_lstm *L, int t) {
    return L->h + (size_t)(t + 1) * L->B * L->H;
}

void nb_lstm_back_begin(nb_lstm *L) {
    memset(L->dh, 0, sizeof(real) * (size_t)L->B * L->H);
    memset(L->dc, 0, sizeof(real) * (size_t)L->B * L->H);
    memset(L->part, 0, sizeof(double) * L->part_stride * (size_t)L->nthr);
}

void nb_lstm_step_back(nb_lstm *L, real *dx, int ldx, const real *dh, int t, real *grads,
                       const real *params) {
    const int B = L->B, T = L->T, C = L->C, H = L->H, G = L->G;
    const int kind = nb_fused_kind(L->norm.kind);
    const real *W = kind == NB_FK_WEIGHT ? L->weff : params + L->w;
    const real *U = kind == NB_FK_WEIGHT ? L->ueff : params + L->u;
    if (dh)
        for (size_t i = 0; i < (size_t)B * H; i++)
            L->dh[i] += dh[i];
    if (kind == NB_FK_UNFUSED) {
        step_bwd_unfused(L, grads, NULL, U, params, t, L->dh, L->dh2);
    } else {
        const int nt = (size_t)B * G < PAR_MIN ? 1 : nthreads(L);
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            const int th = omp_get_thread_num(), nth = omp_get_num_threads();
            const int b0 = (int)((long long)B * th / nth),
                      b1 = (int)((long long)B * (th + 1) / nth);
            double *P = L->part + (size_t)th * L->part_stride;
            for (int b = b0; b < b1; b++)
                bwd_row(L, P, L->dh, L->dh2, NULL, t, b, params);
        }
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, G, 1, L->r + (size_t)t * B * G,
                   G, U, H, 1, L->dh2, H);
    }
    real *sw = L->dh;
    L->dh = L->dh2;
    L->dh2 = sw;
    /* this step's input gradient now: the caller's earlier steps need it */
    if (dx)
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, G, 1, L->xw + (size_t)t * G,
                   T * G, W, C, 1, dx, ldx);
}

const real *nb_lstm_dh(const nb_lstm *L) {
    return L->dh;
}

void nb_lstm_finish_back(nb_lstm *L, real *grads, const real *params) {
    finish_back(L, NULL, grads, params);
}
