#include "nn/real.h"
/* nn/norms/batch.c — BatchNorm (Ioffe & Szegedy 2015): each feature over the batch's rows, batch
 * statistics in training (cached: mean st0, r st1, per feature), the running averages (run0,
 * run1) in evaluation; --bn-sync sums over ranks through cfg->bn_sum. Kernels in nn/norm.c. */

static void fwd(real *out, real *st0, real *st1, real *run0, real *run1, const real *x,
                const real *g, const real *b, const real *s, int B, int C, int training,
                const nb_norm_cfg *cfg) {
    nb_batchnorm_forward(out, st0, st1, run0, run1, x, g, b, B, C, training, cfg);
}

static void bwd(real *dx, real *dg, real *db, real *ds, const real *dy, const real *x,
                const real *g, const real *s, const real *st0, const real *st1, int B, int C,
                int training, const nb_norm_cfg *cfg, int set) {
    if (set)
        nb_batchnorm_backward_set(dx, dg, db, dy, x, g, st0, st1, B, C, training, cfg);
    else
        nb_batchnorm_backward(dx, dg, db, dy, x, g, st0, st1, B, C, training, cfg);
}

const nb_norm_ops nb_norm_ops_batch = {fwd, bwd};

#ifndef NB_F64
extern const nb_norm_ops_f64 nb_norm_ops_batch_f64;
const nb_norm_def nb_norm_batch = {
    .name = "batch",
    .help = "BatchNorm: each feature normalized over the batch",
    .color = "#2ca02c",
    .acts = NB_ON_FEATURES,
    .params = NB_NP_GAIN | NB_NP_SHIFT | NB_NP_RUNNING,
    .nstats = 2,
    .in_all = 1,
    .cuda = 1,
    .ops = &nb_norm_ops_batch,
    .ops_f64 = &nb_norm_ops_batch_f64,
};
#endif
