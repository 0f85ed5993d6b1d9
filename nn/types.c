/* nn/types.c — names, defaults and the parameter layout (precision-independent). */
#include "nn/nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const act_names[] = {"relu", "leaky-relu", "tanh", "sigmoid"};
_Static_assert(sizeof act_names / sizeof act_names[0] == NB_ACT_COUNT,
               "every activation needs a name");

const char *nb_act_name(nb_act_kind k) {
    return (k >= 0 && k < NB_ACT_COUNT) ? act_names[k] : NULL;
}

int nb_act_from_name(const char *name, nb_act_kind *k) {
    for (int i = 0; i < NB_ACT_COUNT; i++)
        if (strcmp(name, act_names[i]) == 0) {
            *k = (nb_act_kind)i;
            return 0;
        }
    return -1;
}

void nb_norm_cfg_default(nb_norm_cfg *cfg, nb_norm_kind kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->eps = 1e-5;
    cfg->eps_outside = 0;
    cfg->p = 0.0625;
    cfg->p_floor = 0;
    cfg->bn_momentum = 0.1;
    cfg->bn_unbiased_running = 1;
    cfg->bn_unbiased_batch = 0;
    cfg->wn_data_init = 1;
    cfg->dyt_alpha = 0.5;
}

int nb_prms_k(int n, double p, int p_floor) {
    double x = (double)n * p;
    /* n*p is computed in double; a product such as 1000*0.125 is exact, and a value within
     * 1e-9 of an integer is taken as that integer so that 0.1*30 gives 3 both ways. */
    double r = nearbyint(x);
    long k;
    if (fabs(x - r) < 1e-9)
        k = (long)r;
    else
        k = p_floor ? (long)floor(x) : (long)ceil(x);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return (int)k;
}

void nb_adam_cfg_default(nb_adam_cfg *cfg) {
    cfg->lr = 1e-3;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->eps_inside = 0;
    cfg->eps_corrected = 0;
    cfg->bias = NB_ADAM_BIAS_STANDARD;
}

size_t nb_layout_add(nb_layout *l, const char *name, size_t n, int trainable) {
    if (l->count >= NB_MAX_TENSORS) return (size_t)-1;
    size_t off = (l->total + 15) & ~(size_t)15;
    nb_tensor *t = &l->t[l->count++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->off = off;
    t->n = n;
    t->trainable = trainable;
    l->total = off + n;
    return off;
}
