#include "nn/real.h"
/* nn/norms/rms.c — RMSNorm (Zhang & Sennrich 2019): y = g·x·r (+ b where the model has a bias),
 * r = 1/sqrt(mean(x²) + eps) over the whole row. Caches r (st0). Kernels in nn/norm.c. */

static void fwd(real *out, real *st0, real *st1, real *run0, real *run1, const real *x,
                const real *g, const real *b, const real *s, int B, int C, int training,
                const nb_norm_cfg *cfg) {
    nb_rmsnorm_forward(out, st0, x, g, b, B, C, C, cfg);
}

static void bwd(real *dx, real *dg, real *db, real *ds, const real *dy, const real *x,
                const real *g, const real *s, const real *st0, const real *st1, int B, int C,
                int training, const nb_norm_cfg *cfg, int set) {
    if (set)
        nb_rmsnorm_backward_set(dx, dg, db, dy, x, g, st0, B, C, C, cfg);
    else
        nb_rmsnorm_backward(dx, dg, db, dy, x, g, st0, B, C, C, cfg);
}

const nb_norm_ops nb_norm_ops_rms = {fwd, bwd};

#ifndef NB_F64
extern const nb_norm_ops_f64 nb_norm_ops_rms_f64;
const nb_norm_def nb_norm_rms = {
    .name = "rms",
    .help = "RMSNorm: each row scaled by its root mean square",
    .color = "#d62728",
    .acts = NB_ON_ROWS,
    .params = NB_NP_GAIN,
    .nstats = 1,
    .fused = NB_FUSED_SCALED,
    .in_all = 1,
    .cuda = 1,
    .ops = &nb_norm_ops_rms,
    .ops_f64 = &nb_norm_ops_rms_f64,
};
#endif
