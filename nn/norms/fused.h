/* nn/norms/fused.h — what the fused paths (the GRU's gates in nn/gru.c, the LSTM in nn/lstm.c, the
 * convolution per channel in nn/cnn.c and nn/conv.c) do for the run's norm, asked of the norm
 * table: they compute a row-wise norm's statistics inline (nb_norm_def.fused), a norm over the
 * batch and WeightNorm in their own ways. A row-wise norm without a fused form is
 * NB_FK_UNFUSED: docs/numerics.md#norm-modules. */
#ifndef NB_NN_NORMS_FUSED_H
#define NB_NN_NORMS_FUSED_H

#include "nn/nn.h"

enum {
    NB_FK_NONE,   /* the identity */
    NB_FK_BATCH,  /* per feature over the batch */
    NB_FK_WEIGHT, /* on the weights */
    NB_FK_LAYER,  /* centred row statistics */
    NB_FK_RMS,    /* scaled, over the whole row */
    NB_FK_PRMS,   /* scaled, over the row's first k = nb_prms_k(n, p) */
    NB_FK_UNFUSED /* row-wise, no fused form (DyT) */
};

static inline int nb_fused_kind(nb_norm_kind k) {
    const nb_norm_def *nd = nb_norm_get(k);
    if (!nd || nd->acts == NB_ON_NOTHING) return NB_FK_NONE;
    if (nd->acts == NB_ON_FEATURES) return NB_FK_BATCH;
    if (nd->acts == NB_ON_WEIGHTS) return NB_FK_WEIGHT;
    if (nd->fused == NB_FUSED_CENTRED) return NB_FK_LAYER;
    if (nd->fused == NB_FUSED_SCALED) return nd->k_of_row ? NB_FK_PRMS : NB_FK_RMS;
    return NB_FK_UNFUSED;
}

#endif
