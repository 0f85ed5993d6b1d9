/* nn/norms/weight.c — WeightNorm (Salimans & Kingma 2016): w = g·v/||v|| per output unit. It acts
 * on a layer's weights, so each model reparameterizes its own (nn/norm.h's nb_weightnorm_*); the
 * row says so and adds the gain g (initialized by the model: 1 with data-dependent init, else
 * ||v||). */
#include "nn/nn.h"

const nb_norm_def nb_norm_weight = {
    .name = "weight",
    .help = "WeightNorm: w = g*v/||v|| per output unit",
    .color = "#8c564b",
    .acts = NB_ON_WEIGHTS,
    .params = NB_NP_GAIN,
    .in_all = 1,
    .cuda = 1,
};
