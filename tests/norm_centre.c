/* tests/norm_centre.c — a norm that exists only in the test build (build/tests/normbench-toy): the
 * proof that a norm is one file. Mean-only centring, y = g·(x − mean(x)) + b over each row: a
 * row-wise norm with a gain and a shift, one cached statistic (the row's mean), forward and
 * backward in float and double. It is registered by the one line at the end of this file; no
 * other file of the product names it. tests/cli/41-test-norm.t trains it through `run`, times it
 * in `bench kernels` and finds it in `sweep --norms all`. */
#include "nn/nn.h"

/* One precision's kernels (R: float or double; S: the name's suffix). Rows in double sums. */
#define CENTRE_KERNELS(R, S)                                                                       \
    static void fwd##S(R *out, R *st0, R *st1, R *run0, R *run1, const R *x, const R *g,           \
                       const R *b, const R *s, int B, int C, int training,                         \
                       const nb_norm_cfg *cfg) {                                                   \
        for (int i = 0; i < B; i++) {                                                              \
            const R *xi = x + (size_t)i * C;                                                       \
            R *yi = out + (size_t)i * C;                                                           \
            double sum = 0;                                                                        \
            for (int c = 0; c < C; c++)                                                            \
                sum += xi[c];                                                                      \
            const R mu = (R)(sum / C);                                                             \
            st0[i] = mu;                                                                           \
            for (int c = 0; c < C; c++)                                                            \
                yi[c] = (g ? g[c] : (R)1) * (xi[c] - mu) + (b ? b[c] : (R)0);                      \
        }                                                                                          \
    }                                                                                              \
    /* dx = g·dy − mean(g·dy); dg += Σ dy·(x − mu); db += Σ dy */                         \
    static void bwd##S(R *dx, R *dg, R *db, R *ds, const R *dy, const R *x, const R *g,            \
                       const R *s, const R *st0, const R *st1, int B, int C, int training,         \
                       const nb_norm_cfg *cfg, int set) {                                          \
        for (int i = 0; i < B; i++) {                                                              \
            const R *dyi = dy + (size_t)i * C, *xi = x + (size_t)i * C;                            \
            R *dxi = dx + (size_t)i * C;                                                           \
            double sum = 0;                                                                        \
            for (int c = 0; c < C; c++)                                                            \
                sum += (double)(g ? g[c] : (R)1) * dyi[c];                                         \
            const R m = (R)(sum / C);                                                              \
            for (int c = 0; c < C; c++) {                                                          \
                const R v = (g ? g[c] : (R)1) * dyi[c] - m;                                        \
                dxi[c] = set ? v : dxi[c] + v;                                                     \
                if (dg) dg[c] += dyi[c] * (xi[c] - st0[i]);                                        \
                if (db) db[c] += dyi[c];                                                           \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static const nb_norm_ops##S centre_ops##S = {fwd##S, bwd##S};

CENTRE_KERNELS(float, )
CENTRE_KERNELS(double, _f64)

static const nb_norm_def nb_norm_centre = {
    .name = "centre",
    .help = "test build only: mean-only centring, y = g*(x - mean) + b",
    .acts = NB_ON_ROWS,
    .params = NB_NP_GAIN | NB_NP_SHIFT,
    .nstats = 1,
    .in_all = 1,
    .ops = &centre_ops,
    .ops_f64 = &centre_ops_f64,
};

/* The registration: the test build's norm table gets this norm. */
const nb_norm_def *const nb_norms_extra[] = {&nb_norm_centre, NULL};
