/* nn/cnn.h — a convolutional network built from a list of layers (conv → norm → leaky ReLU,
 * 2x2 max pooling, dropout, Gaussian noise, global average pooling), with all six norms placed
 * as the WeightNorm CIFAR code places them (docs/papers.md#cifar-norms). Generic: see nn/nn.h;
 * no guard, except around the precision-independent types below.
 *
 * Every conv layer is  z = conv(x, W);  out = act(norm(z)·g + b):
 *   none:   W_eff = g ⊙ W per output channel, g not trained (the WN code's InitLayer: g and b
 *           from data-dependent init; with opts.none_data_init == 0, g = 1: a plain conv + bias)
 *   weight: W_eff = g · V/‖V‖ per output channel, g and b trained (data-dependent init when
 *           norm.wn_data_init)
 *   batch:  BN per channel over N×H×W, running averages for evaluation
 *   layer/rms/prms: per example per channel over H×W (opts.axes_chw: over C×H×W); on 1×1 maps
 *           (the dense layer after global pooling) over the channels
 *   dyt, and any row-wise norm without a fused form (docs/numerics.md#norm-modules): unfused,
 *           the norm's kernels over each example's whole C×H×W map as one row, g and b per
 *           channel (b the norm's shift), its scalars per conv layer (DyT: "alpha<l>")
 * act is leaky ReLU with slope opts.leaky, except on the last layer (identity: the logits).
 * The last layer must be a conv whose output has `classes` channels on 1×1 maps.
 *
 * Initialisation: W ~ GlorotUniform (none, layer, rms, prms: lasagne's default, fans times
 * KS*KS) or N(0, 0.05²) (batch, weight: the WN code re-initialises them so); g = 1, b = 0;
 * BN running mean 0, variance 1. */

#ifndef NB_CNN_TYPES
#define NB_CNN_TYPES
typedef enum nb_cnn_op {
    NB_CNN_NOISE,   /* p = sigma of additive Gaussian noise (training only) */
    NB_CNN_CONV,    /* oc output channels, ks x ks kernel, pad */
    NB_CNN_POOL,    /* 2x2 max pooling, stride 2 */
    NB_CNN_DROPOUT, /* p = drop rate (training only, inverted) */
    NB_CNN_GAP      /* global average pooling to 1x1 maps */
} nb_cnn_op;

typedef struct nb_cnn_spec {
    nb_cnn_op op;
    int oc, ks, pad;
    double p;
} nb_cnn_spec;

typedef struct nb_cnn_opts {
    int axes_chw;       /* layer/rms/prms statistics over C×H×W instead of H×W */
    int none_data_init; /* none: data-dependent init with frozen per-channel scale (WN code) */
    double leaky;       /* leaky ReLU slope (0.1) */
    int conv;           /* 3x3 convolution engine: NB_CONV_IM2COL (0), NB_CONV_WINO2/4, AUTO */
    /* the convolutions' and dense layers' products (nn/gemm_bf16.h): NB_PREC_FP32 (0), or
     * NB_PREC_BF16: inputs rounded to bfloat16, float accumulation (im2col only; a CPU with
     * AVX512-BF16: nb_cnn_init refuses otherwise); weights, optimizer, norms, activations float */
    int precision;
} nb_cnn_opts;

/* Convolution engines of the 3x3 layers (pad 0 or 1; other layers always run im2col + gemm):
 * im2col + gemm (nn/conv.c), Winograd F(2x2,3x3) or F(4x4,3x3) (nn/winograd.c), or per layer
 * shape from a table of measured speeds (nb_cnn_conv_pick). */
enum { NB_CONV_IM2COL = 0, NB_CONV_WINO2 = 2, NB_CONV_WINO4 = 4, NB_CONV_AUTO = -1 };
/* The engine (0, 2 or 4) that `conv` gives a layer of C channels on H x W maps to OC channels,
 * kernel KS, pad, with batched (exact 0) or exact gradient sums (nb_cnn_exact_grads). */
int nb_cnn_conv_pick(int conv, int C, int H, int W, int OC, int KS, int pad, int exact);

#define NB_CNN_MAX_LAYERS 24
#endif

typedef struct nb_cnn_layer {
    nb_cnn_spec spec;
    int C, H, W, OC, OH, OW;     /* input and output shapes (per image) */
    int kind;                    /* the norm of a conv layer: its fused kind (nn/norms/fused.h) */
    int gc, k;                   /* channels per statistics row; pRMS k (rms: the row length) */
    NB_REAL alpha;               /* activation slope (1: identity) */
    int wino;                    /* a conv's engine: 0 im2col, 2 or 4 Winograd F(m x m, 3 x 3) */
    size_t w, g, b, rmean, rvar; /* parameter offsets; (size_t)-1 when absent */
    size_t s;                    /* an unfused norm's scalars (DyT's alpha), or (size_t)-1 */
    NB_REAL *gx;                 /* unfused: g and b per value (2, OC*OH*OW), then their grads */
    size_t raw;                  /* exact sums (none, weight): W_eff's gradient at gacc + raw */
    NB_REAL *z;                  /* conv output (Bmax, OC, OH, OW) */
    NB_REAL *buf;                /* the layer's own output buffer (Bmax, OC, OH, OW) */
    NB_REAL *out;                /* its output in the last forward: buf, or its input */
    NB_REAL *mean, *rstd;        /* norm statistics (Bmax*OC) */
    NB_REAL *weff, *vnorm;       /* effective weights (none, weight) and WN norms */
    NB_REAL *mask;               /* dropout mask */
    unsigned char *arg;          /* max pooling winners */
} nb_cnn_layer;

typedef struct nb_cnn {
    int nlayers;
    int C0, H0, W0, classes, Bmax;
    nb_norm_cfg norm;
    nb_cnn_opts opts;
    nb_cnn_layer L[NB_CNN_MAX_LAYERS];
    nb_layout layout;
    NB_REAL *params, *grads, *adam_m, *adam_v; /* (layout.total) each */
    NB_REAL *scratch;                          /* conv scratch: nscratch areas */
    int nscratch;
    size_t scratch_each, max_act; /* values per scratch area; largest per-image activation */
    NB_REAL *probs;               /* (Bmax, classes) */
    NB_REAL *d0, *d1, *dweff;     /* backward buffers */
    const NB_REAL *last_x;
    int last_B, last_training;
    /* Data-parallel shards: the forward's rows are rows row0.. of the batch (their dropout and
     * noise streams), and with grad_rows > 0 the backward takes the gradient of the loss summed
     * over the rows divided by grad_rows (the whole batch); 0: the mean loss. */
    int row0, grad_rows;
    /* Exact gradient sums (nb_cnn_exact_grads): the backward adds to gacc (nacc doubles: the
     * layout's values, then the W_eff gradients of none/weight layers) instead of grads, every
     * sum over images taken image by image in double; nb_cnn_grads_finish maps them to grads.
     * NULL: the backward adds to grads in float. */
    double *gacc, *dpart;
    size_t nacc;
} nb_cnn;

/* Builds the network for inputs (C0, H0, W0) and allocates buffers for Bmax images, drawing the
 * initial weights from rng. Returns 0, or -1 with err (a layer that does not fit its input, a
 * last layer that is not a conv to classes on 1×1 maps, too many tensors, out of memory). */
int nb_cnn_init(nb_cnn *m, const nb_cnn_spec *spec, int nlayers, int C0, int H0, int W0,
                int classes, const nb_norm_cfg *norm, const nb_cnn_opts *opts, int Bmax,
                nb_rng *rng, nb_err *err);
void nb_cnn_free(nb_cnn *m);

/* Forward over B <= Bmax images x (B, C0, H0, W0). training: noise and dropout drawn from rng,
 * BN batch statistics and running-average updates; else deterministic (rng may be NULL).
 * Returns the mean cross-entropy against y (B) (0 when y is NULL); the softmax is left in
 * m->probs. */
double nb_cnn_forward(nb_cnn *m, const NB_REAL *x, const int *y, int B, int training, nb_rng *rng);
/* Backward of the last (training) forward; ACCUMULATES into m->grads (m->gacc after
 * nb_cnn_exact_grads). */
void nb_cnn_backward(nb_cnn *m, const int *y);
/* Zeroes m->grads (and m->gacc). */
void nb_cnn_zero_grad(nb_cnn *m);

/* Switches the backward to exact gradient sums: every weight, gain and bias gradient is a sum
 * over images taken one image at a time and added in double, so that it does not depend on how
 * the batch is grouped, threaded or split over processes (data-parallel runs then agree with one
 * process but for float ties, ~1e-16 relative). The sums over processes are taken on m->gacc;
 * nb_cnn_grads_finish then rounds them into m->grads (and applies WeightNorm's and none's
 * reparameterisation to the summed W_eff gradient). Returns 0, or -1 with err (out of memory). */
int nb_cnn_exact_grads(nb_cnn *m, nb_err *err);
/* grads += the exact sums in gacc, mapped as the float backward maps them. */
void nb_cnn_grads_finish(nb_cnn *m);

/* Data-dependent initialisation (WN code): for weight (when norm.wn_data_init) and none (when
 * opts.none_data_init), runs x (B images) through the network layer by layer and sets each conv
 * layer's g and b so that g·t + b has zero mean and unit variance per channel over (B, H, W), t
 * the conv output with V/‖V‖ (weight) or W (none). rng not NULL: the Gaussian noise and dropout
 * layers are on, drawn from rng as a training forward draws them (one call per layer, in layer
 * order), as the WN code's train.py runs its init pass (get_output(..., init=True) without
 * deterministic=True); NULL: they pass the activations through (a deterministic pass). A no-op
 * for the other norms. Returns 0, or -1 with err (out of memory for the B images'
 * activations). */
int nb_cnn_data_init(nb_cnn *m, const NB_REAL *x, int B, nb_rng *rng, nb_err *err);

/* Multiply-adds x 2 of one image's forward convolutions. */
double nb_cnn_flops(const nb_cnn *m);
