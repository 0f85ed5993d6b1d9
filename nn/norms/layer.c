#include "nn/real.h"
/* nn/norms/layer.c — LayerNorm (Ba, Kiros & Hinton 2016): y = g·(x − mean)·r + b over each row,
 * r = 1/sqrt(var + eps) (or 1/(std + eps) with --eps-outside). Caches the row's mean (st0) and r
 * (st1). Kernels in nn/norm.c (generic). */

static void fwd(real *out, real *st0, real *st1, real *run0, real *run1, const real *x,
                const real *g, const real *b, const real *s, int B, int C, int training,
                const nb_norm_cfg *cfg) {
    nb_layernorm_forward(out, st0, st1, x, g, b, B, C, cfg);
}

static void bwd(real *dx, real *dg, real *db, real *ds, const real *dy, const real *x,
                const real *g, const real *s, const real *st0, const real *st1, int B, int C,
                int training, const nb_norm_cfg *cfg, int set) {
    if (set)
        nb_layernorm_backward_set(dx, dg, db, dy, x, g, st0, st1, B, C, cfg);
    else
        nb_layernorm_backward(dx, dg, db, dy, x, g, st0, st1, B, C, cfg);
}

const nb_norm_ops nb_norm_ops_layer = {fwd, bwd};

#ifndef NB_F64
extern const nb_norm_ops_f64 nb_norm_ops_layer_f64;
const nb_norm_def nb_norm_layer = {
    .name = "layer",
    .help = "LayerNorm: each row centred and scaled by its standard deviation",
    .color = "#1f77b4",
    .acts = NB_ON_ROWS,
    .params = NB_NP_GAIN | NB_NP_SHIFT,
    .nstats = 2,
    .fused = NB_FUSED_CENTRED,
    .in_all = 1,
    .cuda = 1,
    .ops = &nb_norm_ops_layer,
    .ops_f64 = &nb_norm_ops_layer_f64,
};
#endif
