/* nn/types.h — precision-independent types of the training library. */
#ifndef NB_NN_TYPES_H
#define NB_NN_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* ---- normalizations ---------------------------------------------------------------------- */

/* The variants (the six norms, then DyT). Order is the public order (help texts, reports);
 * NB_NORM_COUNT must stay last. nb_norm_name() is indexed by this enum. */
typedef enum nb_norm_kind {
    NB_NORM_NONE,
    NB_NORM_BATCH,
    NB_NORM_WEIGHT,
    NB_NORM_LAYER,
    NB_NORM_RMS,
    NB_NORM_PRMS,
    NB_NORM_DYT, /* DyT: y = g*tanh(alpha*x) + b, element-wise (nn/norms/dyt.h) */
    NB_NORM_COUNT
} nb_norm_kind;

/* Every knob a norm has. The values in force are recorded with each run. */
typedef struct nb_norm_cfg {
    nb_norm_kind kind;
    double eps;              /* LN/RMS/pRMS/BN epsilon */
    int eps_outside;         /* 0: r = 1/sqrt(m + eps) (everyone's default);
                                1: r = 1/(sqrt(m) + eps) (RMS torch reference, LN torch module) */
    double p;                /* pRMSNorm fraction of the row used for the RMS, 0 < p <= 1 */
    int p_floor;             /* 0: k = ceil(n*p) (paper); 1: k = floor(n*p) (authors' code);
                                k >= 1 always */
    double bn_momentum;      /* running = (1-momentum)*running + momentum*batch (0.1) */
    int bn_unbiased_running; /* running variance uses N/(N-1)*var (WN code; default 1) */
    int bn_unbiased_batch;   /* training normalizes with the unbiased batch variance (default 0) */
    int wn_data_init;        /* WeightNorm: data-dependent init of g and b (default 1) */
    double dyt_alpha;        /* DyT: the initial alpha of every site (default 0.5) */
    /* Data-parallel BatchNorm over several processes (`run --bn-sync` under MPI): sums n doubles
     * in place over every process that holds a shard of the batch, so that training statistics
     * (sums and sums of squares, the backward's sums) are those of the global batch. NULL: this
     * process's rows only. */
    void (*bn_sum)(void *ctx, double *x, int n);
    void *bn_ctx;
} nb_norm_cfg;

/* "none", "batch", "weight", "layer", "rms", "prms", "dyt"; NULL when out of range. */
const char *nb_norm_name(nb_norm_kind k);

/* Parses a name as above. Returns 0 and sets *k, or -1 when unknown. */
int nb_norm_from_name(const char *name, nb_norm_kind *k);

/* WeightNorm divides by max(||v||, NB_WN_FLOOR), so a zero weight row never divides by zero. */
#define NB_WN_FLOOR 1e-12

/* Fills *cfg with the defaults for kind (eps 1e-5 inside the sqrt, p 0.0625 with ceiling,
 * BN momentum 0.1 with unbiased running variance, WN data init on, DyT alpha 0.5). */
void nb_norm_cfg_default(nb_norm_cfg *cfg, nb_norm_kind kind);

/* pRMSNorm's k for a row of n values: ceil(n*p) or floor(n*p), clamped to [1, n]. */
int nb_prms_k(int n, double p, int p_floor);

/* ---- activations ------------------------------------------------------------------------ */

typedef enum nb_act_kind {
    NB_ACT_RELU,
    NB_ACT_LEAKY_RELU,
    NB_ACT_TANH,
    NB_ACT_SIGMOID,
    NB_ACT_COUNT
} nb_act_kind;

/* "relu", "leaky-relu", "tanh", "sigmoid"; NULL when out of range. */
const char *nb_act_name(nb_act_kind k);
int nb_act_from_name(const char *name, nb_act_kind *k);

/* ---- optimizer ---------------------------------------------------------------------------- */

typedef enum nb_adam_bias {
    NB_ADAM_BIAS_STANDARD, /* lr_t = lr*sqrt(1-b2^t)/(1-b1^t) */
    NB_ADAM_BIAS_NONE,     /* lr_t = lr */
    NB_ADAM_BIAS_KIROS     /* lr_t = lr*sqrt(1-0.001^t)/(1-0.1^t): the order-embedding quirk */
} nb_adam_bias;

typedef struct nb_adam_cfg {
    double lr, beta1, beta2, eps;
    int eps_inside;    /* 0: m/(sqrt(v)+eps) (Kingma & Ba); 1: m/sqrt(v+eps) (WN code) */
    int eps_corrected; /* 0: eps meets the raw v (Kingma & Ba's "efficient" form with lr_t: the
                          order-embedding and attentive-reader code); 1: eps meets the
                          bias-corrected v^ = v/(1-b2^t), i.e. m^/(sqrt(v^)+eps) (PyTorch) or
                          m^/sqrt(v^+eps) (WN code) */
    nb_adam_bias bias; /* bias correction variant */
} nb_adam_cfg;

/* lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-8 outside the sqrt on the raw v, standard bias
 * correction. */
void nb_adam_cfg_default(nb_adam_cfg *cfg);

/* ---- processor ------------------------------------------------------------------------- */

/* Flushes denormal results to zero and treats denormal inputs as zero (x86 FTZ and DAZ) on this
 * thread and every OpenMP thread, or restores IEEE behaviour. Adam's moments of rarely-nonzero
 * gradients decay into the denormal range, where arithmetic is ~100x slower on x86. Returns 0,
 * or -1 where the processor has no such mode. */
int nb_flush_denormals(int on);

/* ---- flat parameter layout ---------------------------------------------------------------- */

/* All parameters of a model live in one buffer described by this table; gradients and the
 * optimizer's moments mirror it, so the optimizer is one flat loop and a checkpoint one write. */
#define NB_MAX_TENSORS 128
typedef struct nb_tensor {
    char name[32];
    size_t off, n;
    int trainable; /* 0: updated by the model itself (BN running stats) or frozen */
} nb_tensor;

typedef struct nb_layout {
    nb_tensor t[NB_MAX_TENSORS];
    int count;
    size_t total;
} nb_layout;

/* Appends a tensor of n values; returns its offset, or (size_t)-1 when the table is full.
 * Offsets are aligned to 16 values (64 bytes in float). */
size_t nb_layout_add(nb_layout *l, const char *name, size_t n, int trainable);

#endif
