#include "nn/mem.h"
#include "real.h"
#include "nn/norms/fused.h"
/* nn/gru.c — the order-embedding GRU with none/layer/rms/prms/batch/weight (generic: float and,
 * with -DNB_F64, double; see nn/nn.h). Contracts and the model in nn/gru.h.
 *
 * Dimension letters: T steps, B rows, E inputs, H hidden units; H3 = 3H (the [r | u | c] blocks).
 *
 * Cost. All matrix work is BLAS: the input projections of the whole sequence are ONE gemm
 * (T*B, 3H, E), the recurrent projection one gemm per step (B, 3H, H), and backward gathers the
 * recurrent weight gradient of all steps in one gemm (3H, H, T*B). Per step, the four row norms
 * and the gates of a row run in one fused pass, rows split over threads. Gain and bias gradients
 * are column sums (groups of rows in float, double accumulators), taken after the time loop over
 * all T*B rows (deterministic for any thread count). Nothing is allocated in forward or backward.
 *
 * Norm math as docs/numerics.md / nn/norm.c (two-pass statistics, explicitly vectorized reductions,
 * eps inside or outside the sqrt per cfg, backward keeps the r-depends-on-x term). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "normmath.h"
#include "vmath.h"

#define NO_OFF ((size_t)-1)
/* Below this many values per step the row loops stay on one thread. */
#define GRU_PAR_MIN 16384

extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau,
                    double *work, const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda,
                    const double *tau, double *work, const int *lwork, int *info);

static real *alloc_real(size_t n) {
    return nb_mem_alloc(n * sizeof(real)); /* aligned, zeroed, noted (nn/mem.h) */
}

static int is_rowwise(int k) {
    return k == NB_FK_LAYER || k == NB_FK_RMS || k == NB_FK_PRMS;
}

/* ---- a row-wise norm without a fused form (DyT): its own kernels over each side's 3H rows -----
 */

static const nb_norm_ops *unfused_ops(const nb_gru *g) {
    return nb_norm_get(g->norm.kind)->REAL_OPS;
}

/* rows [r0, r0 + rows) of one side: out from in, statistics st (the side's cache, or NULL) */
static void unfused_fwd(const nb_gru *g, real *out, real *st, const real *in, const real *params,
                        size_t gn, size_t bn, size_t sn, size_t r0, size_t rows) {
    const size_t H3 = 3 * (size_t)g->H, TB = (size_t)g->Tmax * g->Bmax;
    unfused_ops(g)->forward(out + r0 * H3, st ? st + r0 : NULL, st ? st + TB + r0 : NULL, NULL,
                            NULL, in + r0 * H3, params + gn, bn != NO_OFF ? params + bn : NULL,
                            sn != NO_OFF ? params + sn : NULL, (int)rows, (int)H3, g->training,
                            &g->norm);
}

/* its backward: din rows written (set), the gain, shift and scalar gradients accumulated */
static void unfused_bwd(const nb_gru *g, real *din, real *grads, const real *dout, const real *in,
                        const real *st, const real *params, size_t gn, size_t bn, size_t sn,
                        size_t r0, size_t rows) {
    const size_t H3 = 3 * (size_t)g->H, TB = (size_t)g->Tmax * g->Bmax;
    unfused_ops(g)->backward(din + r0 * H3, grads + gn, bn != NO_OFF ? grads + bn : NULL,
                             sn != NO_OFF ? grads + sn : NULL, dout + r0 * H3, in + r0 * H3,
                             params + gn, sn != NO_OFF ? params + sn : NULL, st ? st + r0 : NULL,
                             st ? st + TB + r0 : NULL, (int)rows, (int)H3, g->training, &g->norm,
                             1);
}

/* ---- row norms over a segment of n values -----------------------------------------------------
 */

/* LayerNorm (layer != 0: y = g (x-mu) r + b) or RMSNorm from the first k values (y = g x r)
 * over n values; st receives mu and r. bias may be NULL. */
static inline void seg_fwd(int layer, real *y, real *st, const real *x, const real *gn,
                           const real *bias, int n, int k, const nb_norm_cfg *cfg) {
    real mu = 0, s = 0;
    if (layer) {
        real sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < n; i++)
            sum += x[i];
        mu = (real)((double)sum / n);
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < n; i++)
            s += (x[i] - mu) * (x[i] - mu);
        k = n;
    } else {
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < k; i++)
            s += x[i] * x[i];
    }
    const real r = (real)rstd_of((double)s / k, cfg);
    st[0] = mu;
    st[1] = r;
    if (bias) {
#pragma omp simd
        for (int i = 0; i < n; i++)
            y[i] = gn[i] * ((x[i] - mu) * r) + bias[i];
    } else {
#pragma omp simd
        for (int i = 0; i < n; i++)
            y[i] = gn[i] * ((x[i] - mu) * r);
    }
}

/* dx = d(norm)/dx^T dy for the segment (WRITES dx; dx may alias dy: every dy[i] is read in the
 * sums before the last loop writes dx[i] from dy[i]). */
static inline void seg_bwd(int layer, real *dx, const real *dy, const real *x, const real *gn,
                           const real *st, int n, int k, const nb_norm_cfg *cfg) {
    const real mu = st[0], r = st[1];
    if (layer) {
        real sg = 0, sgx = 0, sxx = 0;
#pragma omp simd reduction(+ : sg, sgx, sxx)
        for (int i = 0; i < n; i++) {
            real d = x[i] - mu, gd = gn[i] * dy[i];
            sg += gd;
            sgx += gd * d;
            sxx += d * d;
        }
        const real mg = (real)((double)sg / n);
        const real kc = (real)(rstd_coef(r, (double)sxx / n, n, cfg) * (double)sgx);
#pragma omp simd
        for (int i = 0; i < n; i++)
            dx[i] = r * (gn[i] * dy[i] - mg) + (x[i] - mu) * kc;
    } else {
        real sgx = 0, sxx = 0;
#pragma omp simd reduction(+ : sgx)
        for (int i = 0; i < n; i++)
            sgx += gn[i] * dy[i] * x[i];
#pragma omp simd reduction(+ : sxx)
        for (int i = 0; i < k; i++)
            sxx += x[i] * x[i];
        const real kc = (real)(rstd_coef(r, (double)sxx / k, k, cfg) * (double)sgx);
#pragma omp simd
        for (int i = 0; i < k; i++)
            dx[i] = r * (gn[i] * dy[i]) + x[i] * kc;
#pragma omp simd
        for (int i = k; i < n; i++)
            dx[i] = r * (gn[i] * dy[i]);
    }
}

/* Both segments of a 3H row: [0, 2H) and [2H, 3H). */
static inline void row_fwd(const nb_gru *g, real *y, real *st, const real *x, const real *gn,
                           const real *bias) {
    const int H = g->H, layer = nb_fused_kind(g->norm.kind) == NB_FK_LAYER;
    seg_fwd(layer, y, st, x, gn, bias, 2 * H, g->k2, &g->norm);
    seg_fwd(layer, y + 2 * H, st + 2, x + 2 * H, gn + 2 * H, bias ? bias + 2 * H : NULL, H, g->k1,
            &g->norm);
}

static inline void row_bwd(const nb_gru *g, real *dx, const real *dy, const real *x, const real *gn,
                           const real *st) {
    const int H = g->H, layer = nb_fused_kind(g->norm.kind) == NB_FK_LAYER;
    seg_bwd(layer, dx, dy, x, gn, st, 2 * H, g->k2, &g->norm);
    seg_bwd(layer, dx + 2 * H, dy + 2 * H, x + 2 * H, gn + 2 * H, st + 2, H, g->k1, &g->norm);
}

/* Rows whose terms are summed in float before the group's sum is added to the double
 * accumulators of gain_grads (converting every term to double was most of its time; the bias
 * column sums are nn/ops.c's nb_col_sums, summed the same way). */
#define GG_GRP 8

/* Gain and bias gradients of a row-norm side over `rows` rows of 3H: dgain[c] += sum dy xhat,
 * dbias[c] += sum dy (dbias may be NULL). Column blocks per thread (each column's sum in the
 * same order whatever the thread count), groups of GG_GRP rows in float, double accumulators. */
static void gain_grads(const nb_gru *g, real *dgain, real *dbias, const real *dy, const real *x,
                       const real *st, int rows) {
    const int H3 = 3 * g->H, H2 = 2 * g->H, layer = nb_fused_kind(g->norm.kind) == NB_FK_LAYER;
    const int nblk = (H3 + 63) / 64;
#pragma omp parallel for schedule(static) if ((size_t)rows * H3 >= GRU_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * 64, c1 = c0 + 64 < H3 ? c0 + 64 : H3, w = c1 - c0;
        double ag[64], ab[64];
        real fg[64], fb[64];
        memset(ag, 0, sizeof ag);
        memset(ab, 0, sizeof ab);
        for (int r0 = 0; r0 < rows; r0 += GG_GRP) {
            const int r1 = r0 + GG_GRP < rows ? r0 + GG_GRP : rows;
            for (int c = 0; c < w; c++)
                fg[c] = fb[c] = 0;
            for (int row = r0; row < r1; row++) {
                const real *dyr = dy + (size_t)row * H3 + c0, *xr = x + (size_t)row * H3 + c0;
                const real *s = st + (size_t)row * 4;
                /* the columns of this block in segment 0 ([0, 2H)) and in segment 1 */
                const int split = c0 >= H2 ? 0 : c1 <= H2 ? w : H2 - c0;
                const real mu0 = layer ? s[0] : 0, r0s = s[1];
                const real mu1 = layer ? s[2] : 0, r1s = s[3];
#pragma omp simd
                for (int c = 0; c < split; c++) {
                    fg[c] += dyr[c] * ((xr[c] - mu0) * r0s);
                    fb[c] += dyr[c];
                }
#pragma omp simd
                for (int c = split; c < w; c++) {
                    fg[c] += dyr[c] * ((xr[c] - mu1) * r1s);
                    fb[c] += dyr[c];
                }
            }
#pragma omp simd
            for (int c = 0; c < w; c++) {
                ag[c] += (double)fg[c];
                ab[c] += (double)fb[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dgain[c] += (real)ag[c - c0];
            if (dbias) dbias[c] += (real)ab[c - c0];
        }
    }
}

/* ---- setup ------------------------------------------------------------------------------------
 */

void nb_gru_free(nb_gru *g) {
    real *own[] = {g->xp,  g->hp,  g->r,   g->u,    g->hc,   g->h,    g->sx,  g->sh,
                   g->bmx, g->brx, g->bmh, g->brh,  g->wce,  g->uce,  g->wnx, g->wnh,
                   g->dxp, g->dhp, g->dh,  g->dtmp, g->dwce, g->duce, g->ux,  g->uh};
    if (g->xn != g->xp) free(g->xn);
    if (g->hn != g->hp) free(g->hn);
    if (g->dxn != g->dxp) free(g->dxn);
    if (g->dhn != g->dhp) free(g->dhn);
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        free(own[i]);
    memset(g, 0, sizeof *g);
}

static size_t add(nb_layout *l, const char *prefix, const char *name, size_t n, int trainable,
                  int *bad) {
    char full[32];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    size_t off = nb_layout_add(l, full, n, trainable);
    if (off == NO_OFF) *bad = 1;
    return off;
}

int nb_gru_setup(nb_gru *g, nb_layout *layout, const char *prefix, int E, int H, int Tmax, int Bmax,
                 const nb_norm_cfg *norm, nb_err *err) {
    memset(g, 0, sizeof *g);
    if (E < 1 || H < 1 || E > (1 << 16) || H > (1 << 14))
        return nb_errf(err, "GRU sizes out of range (inputs %d, hidden %d)", E, H);
    if (Tmax < 1 || Bmax < 1 || (size_t)Tmax * (size_t)Bmax > ((size_t)1 << 24))
        return nb_errf(err, "GRU sequence length %d or batch %d out of range", Tmax, Bmax);
    g->E = E;
    g->H = H;
    g->Tmax = Tmax;
    g->Bmax = Bmax;
    g->norm = *norm;
    const int k = nb_fused_kind(norm->kind);
    g->k2 = k == NB_FK_PRMS ? nb_prms_k(2 * H, norm->p, norm->p_floor) : 2 * H;
    g->k1 = k == NB_FK_PRMS ? nb_prms_k(H, norm->p, norm->p_floor) : H;
    g->bn_slots = Tmax;
    const size_t H3 = 3 * (size_t)H;
    int bad = 0;
    g->gx = g->bx = g->gh = g->bh = g->wgx = g->wgh = NO_OFF;
    g->rmx = g->rvx = g->rmh = g->rvh = NO_OFF;
    g->ax = g->ah = NO_OFF;
    g->wc = add(layout, prefix, k == NB_FK_WEIGHT ? "Vc" : "Wc", H3 * E, 1, &bad);
    g->bc = add(layout, prefix, "bc", H3, 1, &bad);
    g->uc = add(layout, prefix, k == NB_FK_WEIGHT ? "Vu" : "Uc", H3 * H, 1, &bad);
    if (k != NB_FK_NONE && k != NB_FK_WEIGHT) {
        g->gx = add(layout, prefix, "gx", H3, 1, &bad);
        g->gh = add(layout, prefix, "gh", H3, 1, &bad);
        const nb_norm_def *nd = nb_norm_get(norm->kind);
        if (k == NB_FK_LAYER || k == NB_FK_BATCH ||
            (k == NB_FK_UNFUSED && (nd->params & NB_NP_SHIFT))) {
            g->bx = add(layout, prefix, "bx", H3, 1, &bad);
            g->bh = add(layout, prefix, "bh", H3, 1, &bad);
        }
        if (k == NB_FK_UNFUSED && nd->nscalars > 0) {
            char nm[32];
            snprintf(nm, sizeof nm, "%s_x", nd->scalar_name);
            g->ax = add(layout, prefix, nm, (size_t)nd->nscalars, 1, &bad);
            snprintf(nm, sizeof nm, "%s_h", nd->scalar_name);
            g->ah = add(layout, prefix, nm, (size_t)nd->nscalars, 1, &bad);
        }
    }
    if (k == NB_FK_WEIGHT) {
        g->wgx = add(layout, prefix, "wgx", H3, 1, &bad);
        g->wgh = add(layout, prefix, "wgh", H3, 1, &bad);
    }
    if (k == NB_FK_BATCH) {
        size_t n = H3 * (size_t)g->bn_slots;
        g->rmx = add(layout, prefix, "bn_mean_x", n, 0, &bad);
        g->rvx = add(layout, prefix, "bn_var_x", n, 0, &bad);
        g->rmh = add(layout, prefix, "bn_mean_h", n, 0, &bad);
        g->rvh = add(layout, prefix, "bn_var_h", n, 0, &bad);
    }
    if (bad) return nb_errf(err, "too many parameter tensors for the GRU");

    const size_t TB = (size_t)Tmax * Bmax, BH = (size_t)Bmax * H;
    int ok = 1;
#define ALLOC(p, n) ok = ok && ((p) = alloc_real(n)) != NULL
    ALLOC(g->xp, TB * H3);
    ALLOC(g->hp, TB * H3);
    ALLOC(g->r, TB * H);
    ALLOC(g->u, TB * H);
    ALLOC(g->hc, TB * H);
    ALLOC(g->h, TB * H + BH);
    ALLOC(g->dxp, TB * H3);
    ALLOC(g->dhp, TB * H3);
    ALLOC(g->dh, BH);
    ALLOC(g->dtmp, BH);
    if (is_rowwise(k) || k == NB_FK_BATCH || k == NB_FK_UNFUSED) {
        ALLOC(g->xn, TB * H3);
        ALLOC(g->hn, TB * H3);
        ALLOC(g->dxn, TB * H3);
        ALLOC(g->dhn, TB * H3);
    } else {
        g->xn = g->xp;
        g->hn = g->hp;
        g->dxn = g->dxp;
        g->dhn = g->dhp;
    }
    if (is_rowwise(k)) {
        ALLOC(g->sx, TB * 4);
        ALLOC(g->sh, TB * 4);
    }
    if (k == NB_FK_UNFUSED && nb_norm_get(norm->kind)->nstats > 0) {
        ALLOC(g->ux, 2 * TB);
        ALLOC(g->uh, 2 * TB);
    }
    if (k == NB_FK_BATCH) {
        ALLOC(g->bmx, (size_t)Tmax * H3);
        ALLOC(g->brx, (size_t)Tmax * H3);
        ALLOC(g->bmh, (size_t)Tmax * H3);
        ALLOC(g->brh, (size_t)Tmax * H3);
    }
    if (k == NB_FK_WEIGHT) {
        ALLOC(g->wce, H3 * E);
        ALLOC(g->uce, H3 * H);
        ALLOC(g->wnx, H3);
        ALLOC(g->wnh, H3);
        ALLOC(g->dwce, H3 * E);
        ALLOC(g->duce, H3 * H);
    }
#undef ALLOC
    if (!ok) {
        nb_gru_free(g);
        return nb_errf(err, "out of memory for a GRU of %d units over %d steps of %d rows", H, Tmax,
                       Bmax);
    }
    return 0;
}

/* An n x n orthogonal matrix (Q of the QR factorization of a Gaussian matrix, columns signed by
 * R's diagonal) written into dst with row stride ld. */
int nb_orthogonal(real *dst, size_t ld, int n, nb_rng *rng, nb_err *err) {
    int rc = -1, info = 0, lwork = -1;
    double *a = malloc(sizeof(double) * (size_t)n * n), *tau = malloc(sizeof(double) * n);
    double *work = NULL, wq = 0;
    if (!a || !tau) {
        nb_errf(err, "out of memory for an orthogonal initialization");
        goto out;
    }
    for (size_t i = 0; i < (size_t)n * n; i++)
        a[i] = nb_rng_normal(rng);
    dgeqrf_(&n, &n, a, &n, tau, &wq, &lwork, &info);
    lwork = (int)wq > n ? (int)wq : n;
    work = malloc(sizeof(double) * (size_t)lwork);
    if (!work) {
        nb_errf(err, "out of memory for an orthogonal initialization");
        goto out;
    }
    dgeqrf_(&n, &n, a, &n, tau, work, &lwork, &info);
    if (info != 0) {
        nb_errf(err, "orthogonal initialization failed (LAPACK dgeqrf info %d)", info);
        goto out;
    }
    /* column-major: R's diagonal is a[j*n+j]; it signs column j of Q */
    double *signs = malloc(sizeof(double) * n);
    if (!signs) {
        nb_errf(err, "out of memory for an orthogonal initialization");
        goto out;
    }
    for (int j = 0; j < n; j++)
        signs[j] = a[(size_t)j * n + j] < 0 ? -1.0 : 1.0;
    dorgqr_(&n, &n, &n, a, &n, tau, work, &lwork, &info);
    if (info != 0) {
        free(signs);
        nb_errf(err, "orthogonal initialization failed (LAPACK dorgqr info %d)", info);
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) /* Q(i, j) column-major is a[j*n + i] */
            dst[(size_t)i * ld + j] = (real)(a[(size_t)j * n + i] * signs[j]);
    free(signs);
    rc = 0;
out:
    free(a);
    free(tau);
    free(work);
    return rc;
}

/* Gains 1, post-norm biases 0, BN running mean 0 and variance 1, WN gains = the row norms of
 * the weights already drawn. */
static void init_norm_params(nb_gru *g, real *params) {
    const int H = g->H, E = g->E;
    const size_t H3 = 3 * (size_t)H;
    const real *Wc = params + g->wc, *Uc = params + g->uc;
    size_t ones[] = {g->gx, g->gh}, zeros[] = {g->bx, g->bh};
    for (int i = 0; i < 2; i++) {
        if (ones[i] != NO_OFF)
            for (size_t c = 0; c < H3; c++)
                params[ones[i] + c] = 1;
        if (zeros[i] != NO_OFF) memset(params + zeros[i], 0, H3 * sizeof(real));
    }
    size_t sc[] = {g->ax, g->ah};
    for (int i = 0; i < 2; i++)
        if (sc[i] != NO_OFF) {
            const nb_norm_def *nd = nb_norm_get(g->norm.kind);
            for (int c = 0; c < nd->nscalars; c++)
                params[sc[i] + (size_t)c] = (real)nd->scalar_init(&g->norm);
        }
    if (g->rmx != NO_OFF) {
        size_t n = H3 * (size_t)g->bn_slots;
        memset(params + g->rmx, 0, n * sizeof(real));
        memset(params + g->rmh, 0, n * sizeof(real));
        for (size_t i = 0; i < n; i++)
            params[g->rvx + i] = params[g->rvh + i] = 1;
    }
    if (g->wgx != NO_OFF) {
        for (size_t o = 0; o < H3; o++) {
            double sx = 0, sh = 0;
            for (int i = 0; i < E; i++)
                sx += (double)Wc[o * E + i] * Wc[o * E + i];
            for (int i = 0; i < H; i++)
                sh += (double)Uc[o * H + i] * Uc[o * H + i];
            params[g->wgx + o] = (real)sqrt(sx);
            params[g->wgh + o] = (real)sqrt(sh);
        }
    }
}

int nb_gru_init_normal(nb_gru *g, real *params, nb_rng *rng, double scale, double center,
                       nb_err *err) {
    const int H = g->H, E = g->E;
    const size_t H3 = 3 * (size_t)H;
    real *Wc = params + g->wc, *Uc = params + g->uc;
    for (int blk = 0; blk < 3; blk++) {
        real *w = Wc + (size_t)blk * H * E;
        if (E == H) {
            if (nb_orthogonal(w, (size_t)E, H, rng, err) != 0) return -1;
        } else {
            for (size_t i = 0; i < (size_t)H * E; i++)
                w[i] = (real)(scale * nb_rng_normal(rng));
        }
        if (nb_orthogonal(Uc + (size_t)blk * H * H, (size_t)H, H, rng, err) != 0) return -1;
    }
    for (size_t i = 0; i < H3 * E; i++)
        Wc[i] += (real)center;
    for (size_t i = 0; i < H3 * H; i++)
        Uc[i] += (real)center;
    memset(params + g->bc, 0, H3 * sizeof(real));
    init_norm_params(g, params);
    return 0;
}

int nb_gru_init_params(nb_gru *g, real *params, nb_rng *rng, nb_err *err) {
    const int H = g->H, E = g->E;
    const size_t H3 = 3 * (size_t)H;
    real *Wc = params + g->wc, *Uc = params + g->uc;
    for (size_t i = 0; i < H3 * E; i++)
        Wc[i] = (real)(0.2 * nb_rng_uniform(rng) - 0.1);
    memset(params + g->bc, 0, H3 * sizeof(real));
    /* Uc rows [0,H) = U_r^T, [H,2H) = U_u^T, [2H,3H) = Ux^T: each block an orthogonal H x H
     * matrix (the transpose of one is another). */
    for (int blk = 0; blk < 3; blk++)
        if (nb_orthogonal(Uc + (size_t)blk * H * H, (size_t)H, H, rng, err) != 0) return -1;
    init_norm_params(g, params);
    return 0;
}

/* ---- forward ----------------------------------------------------------------------------------
 */

/* Gate nonlinearities: nn/vmath.h (vectorizable in float, libm in double). */

const real *nb_gru_last(const nb_gru *g) {
    return g->h + (size_t)g->T * g->B * g->H;
}

static size_t bn_slot(const nb_gru *g, int t) {
    int s = t + g->bn_offset;
    return (size_t)(s < g->bn_slots ? s : g->bn_slots - 1) * 3 * (size_t)g->H;
}

void nb_gru_begin(nb_gru *g, const real *params, int T, int B, int training) {
    const int H = g->H, E = g->E, H3 = 3 * H;
    g->T = T;
    g->B = B;
    g->training = training;
    g->x = NULL;
    g->mask = NULL;
    g->input_back_done = 0;
    if (nb_fused_kind(g->norm.kind) == NB_FK_WEIGHT) {
        nb_weightnorm_forward(g->wce, g->wnx, params + g->wc, params + g->wgx, H3, E);
        nb_weightnorm_forward(g->uce, g->wnh, params + g->uc, params + g->wgh, H3, H);
    }
}

void nb_gru_input(nb_gru *g, real *params, const real *x, int t0, int nt) {
    const int H = g->H, E = g->E, H3 = 3 * H, B = g->B;
    const int kind = nb_fused_kind(g->norm.kind);
    g->x = x;
    const real *Wc = kind == NB_FK_WEIGHT ? g->wce : params + g->wc;
    const size_t r0 = (size_t)t0 * B, rows = (size_t)nt * B;
    real *xp = g->xp + r0 * H3;
    const real *bc = params + g->bc;
    if (g->bias_state)
        memset(xp, 0, sizeof(real) * rows * H3);
    else
        for (size_t row = 0; row < rows; row++)
            memcpy(xp + row * H3, bc, sizeof(real) * H3);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, H3, E, 1, x + r0 * E, E, Wc, E,
               1, xp, H3);
    const real *gx = g->gx != NO_OFF ? params + g->gx : NULL;
    const real *bx = g->bx != NO_OFF ? params + g->bx : NULL;
    if (is_rowwise(kind)) {
#pragma omp parallel for schedule(static) if (rows * H3 >= GRU_PAR_MIN)
        for (size_t row = r0; row < r0 + rows; row++)
            row_fwd(g, g->xn + row * H3, g->sx + row * 4, g->xp + row * H3, gx, bx);
    } else if (kind == NB_FK_BATCH) {
        for (int t = t0; t < t0 + nt; t++) {
            size_t slot = bn_slot(g, t);
            nb_batchnorm_forward(g->xn + (size_t)t * B * H3, g->bmx + (size_t)t * H3,
                                 g->brx + (size_t)t * H3, params + g->rmx + slot,
                                 params + g->rvx + slot, g->xp + (size_t)t * B * H3, gx, bx, B, H3,
                                 g->training, &g->norm);
        }
    } else if (kind == NB_FK_UNFUSED) {
        unfused_fwd(g, g->xn, g->ux, g->xp, params, g->gx, g->bx, g->ax, r0, rows);
    }
}

void nb_gru_step(nb_gru *g, real *params, int t, const real *hprev, real *hout, const real *mask) {
    const int H = g->H, H3 = 3 * H, B = g->B;
    const int kind = nb_fused_kind(g->norm.kind);
    const int rowwise = is_rowwise(kind);
    const real *Uc = kind == NB_FK_WEIGHT ? g->uce : params + g->uc;
    const real *gh = g->gh != NO_OFF ? params + g->gh : NULL;
    const real *bh = g->bh != NO_OFF ? params + g->bh : NULL;
    const size_t o3 = (size_t)t * B * H3, o1 = (size_t)t * B * H;
    /* h[t] keeps the state this step starts from (for backward) */
    real *hs = g->h + o1;
    if (!hprev)
        memset(hs, 0, sizeof(real) * (size_t)B * H);
    else if (hprev != hs)
        memcpy(hs, hprev, sizeof(real) * (size_t)B * H);
    real *hp3 = g->hp + o3;
    if (g->bias_state) {
        const real *bc = params + g->bc;
        for (int b = 0; b < B; b++)
            memcpy(hp3 + (size_t)b * H3, bc, sizeof(real) * H3);
    }
    if (hprev) /* a zero state has no product to take */
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, H3, H, 1, hs, H, Uc, H,
                   g->bias_state ? 1 : 0, hp3, H3);
    else if (!g->bias_state)
        memset(hp3, 0, sizeof(real) * (size_t)B * H3);
    if (kind == NB_FK_BATCH) {
        size_t slot = bn_slot(g, t);
        nb_batchnorm_forward(g->hn + o3, g->bmh + (size_t)t * H3, g->brh + (size_t)t * H3,
                             params + g->rmh + slot, params + g->rvh + slot, hp3, gh, bh, B, H3,
                             g->training, &g->norm);
    } else if (kind == NB_FK_UNFUSED) {
        unfused_fwd(g, g->hn, g->uh, g->hp, params, g->gh, g->bh, g->ah, (size_t)t * B, (size_t)B);
    }
#pragma omp parallel for schedule(static) if ((size_t)B * H3 >= GRU_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const size_t r3 = o3 + (size_t)b * H3, r1 = o1 + (size_t)b * H;
        if (rowwise) row_fwd(g, g->hn + r3, g->sh + ((size_t)t * B + b) * 4, g->hp + r3, gh, bh);
        const real *xr = g->xn + r3, *hr = g->hn + r3, *hp = hs + (size_t)b * H;
        real *rr = g->r + r1, *uu = g->u + r1, *cc = g->hc + r1, *hn = hout + (size_t)b * H;
        const real m = mask ? mask[b] : 1;
#pragma omp simd
        for (int j = 0; j < H; j++) {
            real rj = vm_sigmoid(xr[j] + hr[j]);
            real uj = vm_sigmoid(xr[H + j] + hr[H + j]);
            real cj = vm_tanh(rj * hr[2 * H + j] + xr[2 * H + j]);
            rr[j] = rj;
            uu[j] = uj;
            cc[j] = cj;
            real hj = uj * hp[j] + (1 - uj) * cj;
            hn[j] = m * hj + (1 - m) * hp[j];
        }
    }
}

void nb_gru_forward(nb_gru *g, real *params, const real *x, const real *mask, int T, int B,
                    int training) {
    const int H = g->H;
    nb_gru_begin(g, params, T, B, training);
    nb_gru_input(g, params, x, 0, T);
    g->mask = mask;
    for (int t = 0; t < T; t++) {
        const size_t o1 = (size_t)t * B * H;
        nb_gru_step(g, params, t, t ? g->h + o1 : NULL, g->h + o1 + (size_t)B * H,
                    mask ? mask + (size_t)t * B : NULL);
    }
}

/* ---- backward ---------------------------------------------------------------------------------
 */

void nb_gru_step_back(nb_gru *g, real *grads, const real *params, int t, const real *dh,
                      real *dhprev, const real *mask) {
    const int H = g->H, H3 = 3 * H, B = g->B;
    const int kind = nb_fused_kind(g->norm.kind);
    const int rowwise = is_rowwise(kind);
    const real *Uc = kind == NB_FK_WEIGHT ? g->uce : params + g->uc;
    const real *gh = g->gh != NO_OFF ? params + g->gh : NULL;
    real *dgh = g->gh != NO_OFF ? grads + g->gh : NULL,
         *dbh = g->bh != NO_OFF ? grads + g->bh : NULL;
    const size_t o3 = (size_t)t * B * H3, o1 = (size_t)t * B * H;
    const real *hprev = g->h + o1;
#pragma omp parallel for schedule(static) if ((size_t)B * H3 >= GRU_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const size_t r3 = o3 + (size_t)b * H3, r1 = o1 + (size_t)b * H;
        const real *rr = g->r + r1, *uu = g->u + r1, *cc = g->hc + r1;
        const real *hr = g->hn + r3, *hp = hprev + (size_t)b * H, *dhr = dh + (size_t)b * H;
        real *dxr = g->dxn + r3, *dhn = g->dhn + r3, *dpr = dhprev + (size_t)b * H;
        const real m = mask ? mask[b] : 1;
#pragma omp simd
        for (int j = 0; j < H; j++) {
            real d = m * dhr[j];
            real rj = rr[j], uj = uu[j], cj = cc[j];
            dpr[j] += (1 - m) * dhr[j] + d * uj;
            real du = d * (hp[j] - cj);
            real da = d * (1 - uj) * (1 - cj * cj);
            real dr = da * hr[2 * H + j];
            real dpre_r = dr * rj * (1 - rj), dpre_u = du * uj * (1 - uj);
            dxr[j] = dpre_r;
            dxr[H + j] = dpre_u;
            dxr[2 * H + j] = da;
            dhn[j] = dpre_r;
            dhn[H + j] = dpre_u;
            dhn[2 * H + j] = da * rj;
        }
        if (rowwise) row_bwd(g, g->dhp + r3, dhn, g->hp + r3, gh, g->sh + ((size_t)t * B + b) * 4);
    }
    if (kind == NB_FK_BATCH) {
        memset(g->dhp + o3, 0, sizeof(real) * (size_t)B * H3);
        nb_batchnorm_backward(g->dhp + o3, dgh, dbh, g->dhn + o3, g->hp + o3, gh,
                              g->bmh + (size_t)t * H3, g->brh + (size_t)t * H3, B, H3, g->training,
                              &g->norm);
    } else if (kind == NB_FK_UNFUSED) {
        unfused_bwd(g, g->dhp, grads, g->dhn, g->hp, g->uh, params, g->gh, g->bh, g->ah,
                    (size_t)t * B, (size_t)B);
    }
    /* dh_{t-1} += dhp_t Uc */
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, H3, 1, g->dhp + o3, H3, Uc, H, 1,
               dhprev, H);
}

void nb_gru_finish_back(nb_gru *g, real *grads, real *dx, const real *params) {
    const int H = g->H, E = g->E, H3 = 3 * H, T = g->T, B = g->B, TB = T * B;
    const int kind = nb_fused_kind(g->norm.kind);
    const int rowwise = is_rowwise(kind);
    const real *Wc = kind == NB_FK_WEIGHT ? g->wce : params + g->wc;
    const real *gx = g->gx != NO_OFF ? params + g->gx : NULL;
    real *dgx = g->gx != NO_OFF ? grads + g->gx : NULL,
         *dbx = g->bx != NO_OFF ? grads + g->bx : NULL;
    real *dgh = g->gh != NO_OFF ? grads + g->gh : NULL,
         *dbh = g->bh != NO_OFF ? grads + g->bh : NULL;
    /* recurrent weights: dUc += sum_t dhp_t^T h_t (the state step t started from), one gemm */
    if (kind == NB_FK_WEIGHT) {
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, H3, H, TB, 1, g->dhp, H3, g->h, H, 0,
                   g->duce, H);
        nb_weightnorm_backward(grads + g->uc, grads + g->wgh, g->duce, params + g->uc,
                               params + g->wgh, g->wnh, H3, H);
    } else {
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, H3, H, TB, 1, g->dhp, H3, g->h, H, 1,
                   grads + g->uc, H);
    }
    if (rowwise) gain_grads(g, dgh, dbh, g->dhn, g->hp, g->sh, TB);

    /* input side (its norm backward and dx already taken step by step: nb_gru_input_back) */
    if (rowwise) gain_grads(g, dgx, dbx, g->dxn, g->xp, g->sx, TB);
    if (g->input_back_done) {
    } else if (rowwise) {
#pragma omp parallel for schedule(static) if ((size_t)TB * H3 >= GRU_PAR_MIN)
        for (int row = 0; row < TB; row++)
            row_bwd(g, g->dxp + (size_t)row * H3, g->dxn + (size_t)row * H3,
                    g->xp + (size_t)row * H3, gx, g->sx + (size_t)row * 4);
    } else if (kind == NB_FK_BATCH) {
        memset(g->dxp, 0, sizeof(real) * (size_t)TB * H3);
        for (int t = 0; t < T; t++) {
            size_t o3 = (size_t)t * B * H3;
            nb_batchnorm_backward(g->dxp + o3, dgx, dbx, g->dxn + o3, g->xp + o3, gx,
                                  g->bmx + (size_t)t * H3, g->brx + (size_t)t * H3, B, H3,
                                  g->training, &g->norm);
        }
    } else if (kind == NB_FK_UNFUSED) {
        unfused_bwd(g, g->dxp, grads, g->dxn, g->xp, g->ux, params, g->gx, g->bx, g->ax, 0,
                    (size_t)TB);
    }
    nb_col_sums(grads + g->bc, g->bias_state ? g->dhp : g->dxp, TB, H3);
    if (kind == NB_FK_WEIGHT) {
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, H3, E, TB, 1, g->dxp, H3, g->x, E, 0,
                   g->dwce, E);
        nb_weightnorm_backward(grads + g->wc, grads + g->wgx, g->dwce, params + g->wc,
                               params + g->wgx, g->wnx, H3, E);
    } else {
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, H3, E, TB, 1, g->dxp, H3, g->x, E, 1,
                   grads + g->wc, E);
    }
    if (dx && !g->input_back_done)
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, TB, E, H3, 1, g->dxp, H3, Wc, E, 1,
                   dx, E);
}

void nb_gru_input_back(nb_gru *g, real *grads, const real *params, int t, real *dx) {
    const int H = g->H, E = g->E, H3 = 3 * H, B = g->B;
    const int kind = nb_fused_kind(g->norm.kind);
    const real *Wc = kind == NB_FK_WEIGHT ? g->wce : params + g->wc;
    const real *gx = g->gx != NO_OFF ? params + g->gx : NULL;
    const size_t o3 = (size_t)t * B * H3;
    g->input_back_done = 1;
    if (is_rowwise(kind)) {
#pragma omp parallel for schedule(static) if ((size_t)B * H3 >= GRU_PAR_MIN)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b;
            row_bwd(g, g->dxp + row * H3, g->dxn + row * H3, g->xp + row * H3, gx, g->sx + row * 4);
        }
    } else if (kind == NB_FK_BATCH) {
        memset(g->dxp + o3, 0, sizeof(real) * (size_t)B * H3);
        nb_batchnorm_backward(g->dxp + o3, g->gx != NO_OFF ? grads + g->gx : NULL,
                              g->bx != NO_OFF ? grads + g->bx : NULL, g->dxn + o3, g->xp + o3, gx,
                              g->bmx + (size_t)t * H3, g->brx + (size_t)t * H3, B, H3, g->training,
                              &g->norm);
    } else if (kind == NB_FK_UNFUSED) {
        unfused_bwd(g, g->dxp, grads, g->dxn, g->xp, g->ux, params, g->gx, g->bx, g->ax,
                    (size_t)t * B, (size_t)B);
    }
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, E, H3, 1, g->dxp + o3, H3, Wc, E, 1,
               dx + (size_t)t * B * E, E);
}

void nb_gru_backward_seq(nb_gru *g, real *grads, real *dx, const real *params, const real *dhT,
                         const real *dhs) {
    const int H = g->H, T = g->T, B = g->B;
    const size_t BH = (size_t)B * H;
    real *dh = g->dh, *dn = g->dtmp;
    if (dhT)
        memcpy(dh, dhT, sizeof(real) * BH);
    else
        memset(dh, 0, sizeof(real) * BH);
    for (int t = T - 1; t >= 0; t--) {
        if (dhs) {
            const real *d = dhs + (size_t)t * BH;
            for (size_t i = 0; i < BH; i++)
                dh[i] += d[i];
        }
        memset(dn, 0, sizeof(real) * BH);
        nb_gru_step_back(g, grads, params, t, dh, dn, g->mask ? g->mask + (size_t)t * B : NULL);
        real *tmp = dh;
        dh = dn;
        dn = tmp;
    }
    nb_gru_finish_back(g, grads, dx, params);
}

void nb_gru_backward(nb_gru *g, real *grads, real *dx, const real *params, const real *dhT) {
    nb_gru_backward_seq(g, grads, dx, params, dhT, NULL);
}
