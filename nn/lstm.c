#include "real.h"
/* nn/lstm.c — the LSTM layer with every norm, forward and backward through time (generic:
 * compiled as float and, with -DNB_F64, as double; see nn/nn.h). Contract in nn/lstm.h.
 *
 * Dimension letters: B rows, T steps, C inputs, H units, G = 4H.
 *
 * Layout of the work. The input projection of the whole sequence is one GEMM (B*T rows); the
 * recurrent projection is one GEMM per step; the gradients of W and U are one GEMM each after
 * the backward sweep (the per-step gradients of r are kept, time-major, in the buffer that
 * held r). Per-step state is stored time-major ((T,B,·)) so that every step's rows are
 * contiguous for the row norms (nn/norm.c kernels, which split rows over threads); the
 * elementwise gate work is one fused loop over rows. Nothing is allocated inside forward or
 * backward. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

#define NONE ((size_t)-1)
/* Below this many values a per-step loop runs on one thread. */
#define PAR_MIN 16384

static inline int is_rms(nb_norm_kind k) {
    return k == NB_NORM_RMS || k == NB_NORM_PRMS;
}

/* Whether the layer normalizes its pre-activations and cell (layer, rms, prms, batch). */
static inline int has_norm(nb_norm_kind k) {
    return k == NB_NORM_LAYER || is_rms(k) || k == NB_NORM_BATCH;
}

/* Stride of one step's statistics: per row, or per column for BatchNorm. */
static inline int stat_stride(const FN(nb_lstm) * L, int width) {
    return L->norm.kind == NB_NORM_BATCH ? width : L->B;
}

static real *zalloc(size_t n, int *fail) {
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

int FN(nb_lstm_init)(FN(nb_lstm) * L, int C, int H, int Bmax, int Tmax, const nb_norm_cfg *norm,
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
    const nb_norm_kind k = norm->kind;
    L->k1 = k == NB_NORM_PRMS ? nb_prms_k(G, norm->p, norm->p_floor) : G;
    L->k3 = k == NB_NORM_PRMS ? nb_prms_k(H, norm->p, norm->p_floor) : H;
    int fail = 0;
    L->w = add(l, prefix, k == NB_NORM_WEIGHT ? "Wv" : "W", (size_t)G * C, &fail);
    L->u = add(l, prefix, k == NB_NORM_WEIGHT ? "Uv" : "U", (size_t)G * H, &fail);
    L->b = add(l, prefix, "b", (size_t)G, &fail);
    L->h0 = add(l, prefix, "h0", (size_t)H, &fail);
    L->gw = L->gu = L->s1 = L->b1 = L->s2 = L->b2 = L->s3 = L->b3 = NONE;
    if (k == NB_NORM_WEIGHT) {
        L->gw = add(l, prefix, "Wg", (size_t)G, &fail);
        L->gu = add(l, prefix, "Ug", (size_t)G, &fail);
    }
    if (has_norm(k)) {
        L->s1 = add(l, prefix, "s1", (size_t)G, &fail);
        L->s2 = add(l, prefix, "s2", (size_t)G, &fail);
        L->s3 = add(l, prefix, "s3", (size_t)H, &fail);
    }
    if (k == NB_NORM_LAYER) {
        L->b1 = add(l, prefix, "b1", (size_t)G, &fail);
        L->b2 = add(l, prefix, "b2", (size_t)G, &fail);
    }
    if (k == NB_NORM_LAYER || k == NB_NORM_BATCH) L->b3 = add(l, prefix, "b3", (size_t)H, &fail);
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
    L->a = zalloc(BT * G, &fail);
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
    L->n2 = zalloc((size_t)Bmax * G, &fail);
    L->n3 = zalloc((size_t)Bmax * H, &fail);
    L->dh = zalloc((size_t)Bmax * H, &fail);
    L->dc = zalloc((size_t)Bmax * H, &fail);
    L->dh2 = zalloc((size_t)Bmax * H, &fail);
    L->dc2 = zalloc((size_t)Bmax * H, &fail);
    if (k == NB_NORM_WEIGHT) {
        L->weff = zalloc((size_t)G * C, &fail);
        L->ueff = zalloc((size_t)G * H, &fail);
        L->dweff = zalloc((size_t)G * C, &fail);
        L->dueff = zalloc((size_t)G * H, &fail);
        L->wnorm = zalloc((size_t)G, &fail);
        L->unorm = zalloc((size_t)G, &fail);
    }
    if (fail) {
        FN(nb_lstm_free)(L);
        nb_errf(err, "lstm: out of memory (B %d, T %d, H %d)", Bmax, Tmax, H);
        return -1;
    }
    return 0;
}

void FN(nb_lstm_free)(FN(nb_lstm) * L) {
    real *bufs[] = {L->xw,  L->a,   L->r,    L->g,    L->c,     L->h,     L->tc,    L->m1,   L->r1,
                    L->m2,  L->r2,  L->m3,   L->r3,   L->n1,    L->n2,    L->n3,    L->dh,   L->dc,
                    L->dh2, L->dc2, L->weff, L->ueff, L->dweff, L->dueff, L->wnorm, L->unorm};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(L->len);
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

void FN(nb_lstm_init_params)(FN(nb_lstm) * L, real *params, nb_rng *rng) {
    const int C = L->C, H = L->H, G = L->G;
    for (int k = 0; k < 4; k++)
        gate_block(params + L->w + (size_t)k * H * C, H, C, rng);
    for (int k = 0; k < 4; k++)
        gate_block(params + L->u + (size_t)k * H * H, H, H, rng);
    fill(params, L->b, (size_t)G, 0);
    fill(params, L->h0, (size_t)H, 0);
    const real gain = L->norm.kind == NB_NORM_BATCH ? (real)0.1 : (real)1;
    fill(params, L->s1, (size_t)G, gain);
    fill(params, L->s2, (size_t)G, gain);
    fill(params, L->s3, (size_t)H, gain);
    fill(params, L->b1, (size_t)G, 0);
    fill(params, L->b2, (size_t)G, 0);
    fill(params, L->b3, (size_t)H, 0);
    if (L->norm.kind == NB_NORM_WEIGHT) {
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

/* out (B,n) = N(inp) with gain g (offset sg), bias (offset sb, may be NONE); mean/rstd at the
 * step's slot. */
static void norm_fwd(const FN(nb_lstm) * L, real *out, real *mean, real *rstd, const real *inp,
                     const real *params, size_t sg, size_t sb, int n, int k) {
    const int B = L->B;
    const real *g = params + sg, *b = sb == NONE ? NULL : params + sb;
    switch (L->norm.kind) {
    case NB_NORM_LAYER:
        FN(nb_layernorm_forward)(out, mean, rstd, inp, g, b, B, n, &L->norm);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        FN(nb_rmsnorm_forward)(out, rstd, inp, g, b, B, n, k, &L->norm);
        break;
    case NB_NORM_BATCH:
        FN(nb_batchnorm_forward)(out, mean, rstd, NULL, NULL, inp, g, b, B, n, 1, &L->norm);
        break;
    default:
        break;
    }
}

/* dinp (B,n) += the gradient through N; gain/bias gradients accumulated into grads. */
static void norm_bwd(const FN(nb_lstm) * L, real *dinp, real *grads, const real *dout,
                     const real *inp, const real *params, const real *mean, const real *rstd,
                     size_t sg, size_t sb, int n, int k) {
    const int B = L->B;
    const real *g = params + sg;
    real *dg = grads + sg, *db = sb == NONE ? NULL : grads + sb;
    switch (L->norm.kind) {
    case NB_NORM_LAYER:
        FN(nb_layernorm_backward)(dinp, dg, db, dout, inp, g, mean, rstd, B, n, &L->norm);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        FN(nb_rmsnorm_backward)(dinp, dg, db, dout, inp, g, rstd, B, n, k, &L->norm);
        break;
    case NB_NORM_BATCH:
        FN(nb_batchnorm_backward)(dinp, dg, db, dout, inp, g, mean, rstd, B, n, 1, &L->norm);
        break;
    default:
        break;
    }
}

/* Position step t of row b reads and writes. */
static inline int pos_of(const FN(nb_lstm) * L, int b, int t) {
    const int n = L->len[b];
    return L->reverse && t < n ? n - 1 - t : t;
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
    *rstd = (real)(cfg->eps_outside ? 1.0 / (sqrt(m) + cfg->eps) : 1.0 / sqrt(m + cfg->eps));
}

void FN(nb_lstm_forward)(FN(nb_lstm) * L, real *out, const real *x, const int *len, int B, int T,
                         int reverse, const real *params) {
    const int C = L->C, H = L->H, G = L->G;
    const nb_norm_kind kind = L->norm.kind;
    L->B = B;
    L->T = T;
    L->reverse = reverse;
    L->x = (real *)x;
    for (int b = 0; b < B; b++)
        L->len[b] = len[b] < 1 ? 1 : len[b] > T ? T : len[b];

    const real *W = params + L->w, *U = params + L->u;
    if (kind == NB_NORM_WEIGHT) {
        FN(nb_weightnorm_forward)(L->weff, L->wnorm, params + L->w, params + L->gw, G, C);
        FN(nb_weightnorm_forward)(L->ueff, L->unorm, params + L->u, params + L->gu, G, H);
        W = L->weff;
        U = L->ueff;
    }
    const real *bias = params + L->b;
    /* a = x·W^T + b over all B*T positions: one GEMM */
    const size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++)
        memcpy(L->xw + i * G, bias, sizeof(real) * G);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)BT, G, C, 1, x, C, W, C, 1, L->xw, G);

    /* initial state: h0 on every row, c0 = 0 */
    for (int b = 0; b < B; b++) {
        memcpy(L->h + (size_t)b * H, params + L->h0, sizeof(real) * H);
        memset(L->c + (size_t)b * H, 0, sizeof(real) * H);
    }
    const int norm = has_norm(kind);
    const int st1 = norm ? stat_stride(L, G) : 0, st3 = norm ? stat_stride(L, H) : 0;
    const int par = (size_t)B * G >= PAR_MIN;
    for (int t = 0; t < T; t++) {
        real *at = L->a + (size_t)t * B * G, *rt = L->r + (size_t)t * B * G;
        real *gt = L->g + (size_t)t * B * G;
        const real *hp = L->h + (size_t)t * B * H, *cp = L->c + (size_t)t * B * H;
        real *hn = L->h + (size_t)(t + 1) * B * H, *cn = L->c + (size_t)(t + 1) * B * H;
        real *tct = L->tc + (size_t)t * B * H;
        for (int b = 0; b < B; b++)
            memcpy(at + (size_t)b * G, L->xw + ((size_t)b * T + pos_of(L, b, t)) * G,
                   sizeof(real) * G);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, G, H, 1, hp, H, U, H, 0, rt, G);
        /* layer, rms, prms: the row norms are fused into the gate loop (statistics, then
         * normalize + add + activate in one pass, no normalized copy written); batch (column
         * statistics) goes through the nn/norm.c kernels */
        const int fused = norm && kind != NB_NORM_BATCH, ln = kind == NB_NORM_LAYER;
        const real *na = at, *nr = rt;
        if (norm && !fused) {
            norm_fwd(L, L->n1, L->m1 + (size_t)t * st1, L->r1 + (size_t)t * st1, at, params, L->s1,
                     L->b1, G, L->k1);
            norm_fwd(L, L->n2, L->m2 + (size_t)t * st1, L->r2 + (size_t)t * st1, rt, params, L->s2,
                     L->b2, G, L->k1);
            na = L->n1;
            nr = L->n2;
        }
        const real *g1 = fused ? params + L->s1 : NULL, *g2 = fused ? params + L->s2 : NULL;
        const real *e1 = ln ? params + L->b1 : NULL, *e2 = ln ? params + L->b2 : NULL;
#pragma omp parallel for schedule(static) if (par)
        for (int b = 0; b < B; b++) {
            const real *pa = na + (size_t)b * G, *pr = nr + (size_t)b * G;
            real *gg = gt + (size_t)b * G;
            const real m = t < L->len[b] ? 1 : 0;
            const real *c0 = cp + (size_t)b * H;
            real *c1 = cn + (size_t)b * H;
            if (fused) {
                real mu1, q1, mu2, q2;
                row_stats(pa, G, L->k1, ln, &L->norm, &mu1, &q1);
                row_stats(pr, G, L->k1, ln, &L->norm, &mu2, &q2);
                L->m1[(size_t)t * B + b] = mu1;
                L->r1[(size_t)t * B + b] = q1;
                L->m2[(size_t)t * B + b] = mu2;
                L->r2[(size_t)t * B + b] = q2;
                if (ln) {
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
        const real *ncell = cn;
        if (norm && !fused) {
            norm_fwd(L, L->n3, L->m3 + (size_t)t * st3, L->r3 + (size_t)t * st3, cn, params, L->s3,
                     L->b3, H, L->k3);
            ncell = L->n3;
        }
        const real *g3 = fused ? params + L->s3 : NULL, *e3 = ln ? params + L->b3 : NULL;
#pragma omp parallel for schedule(static) if (par)
        for (int b = 0; b < B; b++) {
            const real m = t < L->len[b] ? 1 : 0;
            const real *gg = gt + (size_t)b * G, *nc = ncell + (size_t)b * H;
            const real *h0 = hp + (size_t)b * H;
            real *tcb = tct + (size_t)b * H, *h1 = hn + (size_t)b * H;
            if (fused) {
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
#pragma omp simd
            for (int j = 0; j < H; j++)
                h1[j] = m * (gg[2 * H + j] * tcb[j]) + (1 - m) * h0[j];
            if (out) memcpy(out + ((size_t)b * T + pos_of(L, b, t)) * H, h1, sizeof(real) * H);
        }
    }
}

const real *FN(nb_lstm_final)(const FN(nb_lstm) * L) {
    return L->h + (size_t)L->T * L->B * L->H;
}

/* ---- backward ---------------------------------------------------------------------------------
 */

void FN(nb_lstm_backward)(FN(nb_lstm) * L, real *dx, real *grads, const real *dout,
                          const real *dfinal, const real *params) {
    const int B = L->B, T = L->T, C = L->C, H = L->H, G = L->G;
    const nb_norm_kind kind = L->norm.kind;
    const int norm = has_norm(kind);
    const int st1 = norm ? stat_stride(L, G) : 0, st3 = norm ? stat_stride(L, H) : 0;
    const int par = (size_t)B * G >= PAR_MIN;
    const real *W = kind == NB_NORM_WEIGHT ? L->weff : params + L->w;
    const real *U = kind == NB_NORM_WEIGHT ? L->ueff : params + L->u;
    real *db = grads + L->b;
    real *dxw = L->xw; /* x·W^T is no longer needed: its buffer takes its gradient */

    if (dfinal)
        memcpy(L->dh, dfinal, sizeof(real) * B * H);
    else
        memset(L->dh, 0, sizeof(real) * B * H);
    memset(L->dc, 0, sizeof(real) * B * H);

    for (int t = T - 1; t >= 0; t--) {
        real *at = L->a + (size_t)t * B * G, *rt = L->r + (size_t)t * B * G;
        const real *gt = L->g + (size_t)t * B * G;
        const real *cp = L->c + (size_t)t * B * H, *cn = L->c + (size_t)(t + 1) * B * H;
        const real *tct = L->tc + (size_t)t * B * H;
        real *dpre = L->n1;
        /* dh += dout at this step's positions; the gradient into tanh(N3(c)) */
#pragma omp parallel for schedule(static) if (par)
        for (int b = 0; b < B; b++) {
            real *dhb = L->dh + (size_t)b * H;
            if (dout) {
                const real *d = dout + ((size_t)b * T + pos_of(L, b, t)) * H;
#pragma omp simd
                for (int j = 0; j < H; j++)
                    dhb[j] += d[j];
            }
            const real m = t < L->len[b] ? 1 : 0;
            const real *gg = gt + (size_t)b * G, *tcb = tct + (size_t)b * H;
            real *dn = L->n3 + (size_t)b * H;
#pragma omp simd
            for (int j = 0; j < H; j++)
                dn[j] = m * dhb[j] * gg[2 * H + j] * (1 - tcb[j] * tcb[j]);
        }
        /* dc2 = dc carry + d(through N3) */
        memcpy(L->dc2, L->dc, sizeof(real) * B * H);
        if (norm)
            norm_bwd(L, L->dc2, grads, L->n3, cn, params, L->m3 + (size_t)t * st3,
                     L->r3 + (size_t)t * st3, L->s3, L->b3, H, L->k3);
        else
            for (size_t i = 0; i < (size_t)B * H; i++)
                L->dc2[i] += L->n3[i];
                /* gates */
#pragma omp parallel for schedule(static) if (par)
        for (int b = 0; b < B; b++) {
            const real m = t < L->len[b] ? 1 : 0;
            const real *gg = gt + (size_t)b * G, *tcb = tct + (size_t)b * H;
            const real *c0 = cp + (size_t)b * H;
            const real *dhb = L->dh + (size_t)b * H, *dcb = L->dc2 + (size_t)b * H;
            real *dp = dpre + (size_t)b * G;
            real *dcp = L->dc + (size_t)b * H, *dhp = L->dh2 + (size_t)b * H;
#pragma omp simd
            for (int j = 0; j < H; j++) {
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
        for (int b = 0; b < B; b++) {
            const real *dp = dpre + (size_t)b * G;
#pragma omp simd
            for (int j = 0; j < G; j++)
                db[j] += dp[j];
        }
        /* through N1 into the gradient of a, scattered to the positions read */
        const real *da = dpre;
        if (norm) {
            memset(L->n2, 0, sizeof(real) * B * G);
            norm_bwd(L, L->n2, grads, dpre, at, params, L->m1 + (size_t)t * st1,
                     L->r1 + (size_t)t * st1, L->s1, L->b1, G, L->k1);
            da = L->n2;
        }
        for (int b = 0; b < B; b++)
            memcpy(dxw + ((size_t)b * T + pos_of(L, b, t)) * G, da + (size_t)b * G,
                   sizeof(real) * G);
        /* through N2 into the gradient of r, kept in r's slot for the dU GEMM */
        if (norm) {
            memset(L->n2, 0, sizeof(real) * B * G);
            norm_bwd(L, L->n2, grads, dpre, rt, params, L->m2 + (size_t)t * st1,
                     L->r2 + (size_t)t * st1, L->s2, L->b2, G, L->k1);
            memcpy(rt, L->n2, sizeof(real) * B * G);
        } else {
            memcpy(rt, dpre, sizeof(real) * B * G);
        }
        (void)at;
        /* dh_prev += dr·U */
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, G, 1, rt, G, U, H, 1, L->dh2,
                   H);
        real *sw = L->dh;
        L->dh = L->dh2;
        L->dh2 = sw;
    }
    /* the learned initial state */
    real *dh0 = grads + L->h0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++)
            dh0[j] += L->dh[(size_t)b * H + j];

    const size_t BT = (size_t)B * T;
    real *dW = grads + L->w, *dU = grads + L->u;
    if (kind == NB_NORM_WEIGHT) {
        memset(L->dweff, 0, sizeof(real) * G * C);
        memset(L->dueff, 0, sizeof(real) * G * H);
        dW = L->dweff;
        dU = L->dueff;
    }
    /* dU += sum_t dr_t^T h_{t-1};  dW += dxw^T x;  db += column sums of dxw;  dx += dxw·W */
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, G, H, (int)BT, 1, L->r, G, L->h, H, 1, dU,
               H);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, G, C, (int)BT, 1, dxw, G, L->x, C, 1, dW,
               C);
    for (size_t i = 0; i < BT; i++) {
        const real *d = dxw + i * G;
#pragma omp simd
        for (int j = 0; j < G; j++)
            db[j] += d[j];
    }
    if (dx)
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)BT, C, G, 1, dxw, G, W, C, 1, dx,
                   C);
    if (kind == NB_NORM_WEIGHT) {
        FN(nb_weightnorm_backward)
        (grads + L->w, grads + L->gw, L->dweff, params + L->w, params + L->gw, L->wnorm, G, C);
        FN(nb_weightnorm_backward)
        (grads + L->u, grads + L->gu, L->dueff, params + L->u, params + L->gu, L->unorm, G, H);
    }
}
