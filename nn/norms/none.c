/* nn/norms/none.c — no normalization: the identity, no parameters (a model's own bias stays). */
#include "nn/nn.h"

const nb_norm_def nb_norm_none = {
    .name = "none",
    .help = "no normalization (the baseline)",
    .color = "#7f7f7f",
    .acts = NB_ON_NOTHING,
    .in_all = 1,
    .cuda = 1,
};
