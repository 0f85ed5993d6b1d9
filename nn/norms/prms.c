#include "nn/real.h"
/* nn/norms/prms.c — partial RMSNorm (Zhang & Sennrich 2019): RMSNorm with r from the first
 * k = nb_prms_k(C, --p) values of each row, applied to all C. Caches r (st0). Kernels in
 * nn/norm.c. */

static void fwd(real *out, real *st0, real *st1, real *run0, real *run1, const real *x,
                const real *g, const real *b, const real *s, int B, int C, int training,
                const nb_norm_cfg *cfg) {
    nb_rmsnorm_forward(out, st0, x, g, b, B, C, nb_prms_k(C, cfg->p, cfg->p_floor), cfg);
}

static void bwd(real *dx, real *dg, real *db, real *ds, const real *dy, const real *x,
                const real *g, const real *s, const real *st0, const real *st1, int B, int C,
                int training, const nb_norm_cfg *cfg, int set) {
    const int k = nb_prms_k(C, cfg->p, cfg->p_floor);
    if (set)
        nb_rmsnorm_backward_set(dx, dg, db, dy, x, g, st0, B, C, k, cfg);
    else
        nb_rmsnorm_backward(dx, dg, db, dy, x, g, st0, B, C, k, cfg);
}

const nb_norm_ops nb_norm_ops_prms = {fwd, bwd};

#ifndef NB_F64
extern const nb_norm_ops_f64 nb_norm_ops_prms_f64;
const nb_norm_def nb_norm_prms = {
    .name = "prms",
    .help = "partial RMSNorm: the RMS of the first p of each row scales it all",
    .color = "#ff7f0e",
    .acts = NB_ON_ROWS,
    .params = NB_NP_GAIN,
    .nstats = 1,
    .fused = NB_FUSED_SCALED,
    .k_of_row = 1,
    .in_all = 1,
    .cuda = 1,
    .ops = &nb_norm_ops_prms,
    .ops_f64 = &nb_norm_ops_prms_f64,
};
#endif
