/* nn/norms/table.c — the one table of norms (nn/norms/norms.h): the product's, in the public order
 * (help, reports, 'all'), then a test build's own (nb_norms_extra). */
#include "nn/nn.h"

#include <string.h>

extern const nb_norm_def nb_norm_none, nb_norm_batch, nb_norm_weight, nb_norm_layer, nb_norm_rms,
    nb_norm_prms, nb_norm_dyt;

/* indexed by nb_norm_kind */
static const nb_norm_def *const builtin[] = {&nb_norm_none,  &nb_norm_batch, &nb_norm_weight,
                                             &nb_norm_layer, &nb_norm_rms,   &nb_norm_prms,
                                             &nb_norm_dyt};
_Static_assert(sizeof builtin / sizeof builtin[0] == NB_NORM_COUNT, "a row for every kind");

/* A test build's norms (tests/norm_*.c); absent from the product. */
extern const nb_norm_def *const nb_norms_extra[] __attribute__((weak));

nb_norm_kind nb_norm_default(void) {
    return NB_NORM_LAYER;
}

nb_norm_kind nb_norm_help_order(int i) {
    const nb_norm_kind d = nb_norm_default();
    if (i == 0) return d;
    return (nb_norm_kind)(i <= (int)d ? i - 1 : i);
}

const char *const *nb_norm_names(void) {
    static const char *names[NB_NORMS_MAX + 1];
    if (!names[0])
        for (int i = 0, n = nb_norm_count(); i < n; i++)
            names[i] = nb_norm_get((nb_norm_kind)i)->name;
    return names;
}

nb_norm_kind nb_norm_none_kind(void) {
    return NB_NORM_NONE;
}

int nb_norm_count(void) {
    int n = NB_NORM_COUNT;
    if (nb_norms_extra)
        for (int k = 0; nb_norms_extra[k] && n < NB_NORMS_MAX; k++)
            n++;
    return n;
}

const nb_norm_def *nb_norm_get(nb_norm_kind k) {
    if ((int)k < 0) return NULL;
    if ((int)k < NB_NORM_COUNT) return builtin[k];
    if (!nb_norms_extra || (int)k >= nb_norm_count()) return NULL;
    for (int i = 0; nb_norms_extra[i]; i++)
        if (i == (int)k - NB_NORM_COUNT) return nb_norms_extra[i];
    return NULL;
}

const char *nb_norm_name(nb_norm_kind k) {
    const nb_norm_def *d = nb_norm_get(k);
    return d ? d->name : NULL;
}

int nb_norm_from_name(const char *name, nb_norm_kind *k) {
    for (int i = 0, n = nb_norm_count(); i < n; i++)
        if (strcmp(name, nb_norm_get((nb_norm_kind)i)->name) == 0) {
            *k = (nb_norm_kind)i;
            return 0;
        }
    return -1;
}
