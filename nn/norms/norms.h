/* nn/norms/norms.h — the table of norms: one row per norm, each norm in its own file under
 * nn/norms/ (the row and the kernels behind it), the table in nn/norms/table.c. Models, commands
 * and reports ask this table what a norm is and does; they do not name norms (docs/numerics.md,
 * "Norms as modules", says what a fused path needs of a norm).
 *
 * A norm outside the product (a test build's) joins the table by one line in its own file:
 *   const nb_norm_def *const nb_norms_extra[] = {&my_norm, NULL};
 * its kind is then NB_NORM_COUNT + its index there. */
#ifndef NB_NN_NORMS_H
#define NB_NN_NORMS_H

/* At most this many norms in a build (the product's and a test build's). */
#define NB_NORMS_MAX 16

/* What a norm acts on. */
typedef enum nb_norm_acts {
    NB_ON_NOTHING,  /* the identity (none): no parameters, no kernels */
    NB_ON_ROWS,     /* each row of C values on its own (layer, rms, prms, dyt) */
    NB_ON_FEATURES, /* each feature over the batch's rows (batch: a training and an
                              evaluation mode, running statistics, --bn-sync over ranks) */
    NB_ON_WEIGHTS   /* a layer's weights (weight): the model reparameterizes them */
} nb_norm_acts;

/* The row statistics a fused path (the GRU's gates, the LSTM, the convolution per channel:
 * docs/numerics.md#norm-modules) computes inline for a row-wise norm. A row-wise norm with
 * NB_FUSED_NONE has no fused form: those models take it only through its kernels (ops). */
typedef enum nb_norm_fused {
    NB_FUSED_NONE,    /* none */
    NB_FUSED_CENTRED, /* mean and r = 1/sqrt(var + eps) over the row (LayerNorm) */
    NB_FUSED_SCALED   /* r = 1/sqrt(mean(x²) + eps) over the row's first k values (RMS, pRMS) */
} nb_norm_fused;

/* The per-feature parameters a norm adds at a site (bits of nb_norm_def.params). */
enum {
    NB_NP_GAIN = 1,   /* a gain g (C), initialized to 1 */
    NB_NP_SHIFT = 2,  /* a shift b (C), initialized to 0: the norm's own (LN's beta) */
    NB_NP_RUNNING = 4 /* running mean and variance (C), not trained; 0 and 1 */
};

typedef struct nb_norm_def {
    const char *name;  /* as --norm takes it, stored with runs */
    const char *help;  /* one line: what it computes */
    const char *color; /* its colour in plots (#rrggbb); NULL: one derived from the name */
    nb_norm_acts acts;
    unsigned params;         /* NB_NORM_P_* */
    int nscalars;            /* scalars per site (DyT: alpha), trained */
    const char *scalar_name; /* their tensor name's stem ("alpha") */
    /* the scalars' initial values from the run's configuration */
    double (*scalar_init)(const nb_norm_cfg *cfg);
    int nstats;          /* statistics forward caches: 0, 1 (st0) or 2 (st0, st1) vectors */
    int k_of_row;        /* the row's k is the pRMS fraction's (nb_prms_k), else the whole row */
    nb_norm_fused fused; /* its statistics in the fused paths, or none */
    int in_all;          /* in the norm lists 'all' (sweep --norms all, bench) */
    int cuda;            /* the CUDA backend (nn/cuda/) has its kernels, tested on a GPU */
    /* the kernels (NULL for nothing and weights); a generic file takes its precision's as
     * def->REAL_OPS (nn/real.h) */
    const nb_norm_ops *ops;
    const nb_norm_ops_f64 *ops_f64;
} nb_norm_def;

/* The row of kind k, or NULL when there is none. */
const nb_norm_def *nb_norm_get(nb_norm_kind k);

/* The identity's kind (none): where a model leaves a site unnormalized (the MLP's logits). */
nb_norm_kind nb_norm_none_kind(void);

/* run's default norm (layer): the base that help, bench and report compare the others with. */
nb_norm_kind nb_norm_default(void);

/* The i-th norm in the order help lists them: the default first, then the table's order. */
nb_norm_kind nb_norm_help_order(int i);

/* The names in the table's order, NULL-terminated (an option's choices). */
const char *const *nb_norm_names(void);

/* Norms in the table: NB_NORM_COUNT, plus a test build's own. */
int nb_norm_count(void);

#endif
