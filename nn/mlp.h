/* nn/mlp.h — a multi-layer perceptron whose every layer is "dense → norm → activation", one
 * interface for all six norms (generic: see nn/nn.h; no guard).
 *
 * Layer l maps dims[l] → dims[l+1]. Hidden layers use cfg.norm; the output layer (logits) is
 * normalized only for batch norm (the LN paper: LN on hidden layers, BN on all layers).
 *   none:   z = x·W^T + b
 *   weight: z = x·(g·V/||V||)^T + b
 *   batch:  z = BN(x·W^T)·g + b
 *   layer:  z = LN(x·W^T)·g + b
 *   rms/prms: z = RMS(x·W^T)·g + b
 *   dyt:    z = g·tanh(alpha·x·W^T) + b (alpha one scalar per layer, from norm.dyt_alpha)
 * then h = act(z) on hidden layers. Parameters, gradients and Adam moments are flat buffers
 * described by mlp->layout. */

#define NB_MLP_MAX_LAYERS 8

typedef struct nb_mlp {
    int nlayers;                     /* number of weight layers */
    int dims[NB_MLP_MAX_LAYERS + 1]; /* dims[0] inputs ... dims[nlayers] classes */
    nb_norm_cfg norm;                /* the variant and its knobs */
    nb_act_kind act;
    NB_REAL leaky_alpha;
    int Bmax; /* largest batch the buffers hold */
    nb_layout layout;
    NB_REAL *params, *grads, *adam_m, *adam_v; /* (layout.total) each */
    struct {
        nb_norm_kind kind; /* the norm this layer applies (none on the logits unless batch) */
        const struct nb_norm_def *def;      /* its row of the norm table (nn/norms/norms.h) */
        int k;                              /* pRMSNorm k for this layer's width */
        size_t w, b, g, rmean, rvar, alpha; /* offsets; (size_t)-1 when absent */
    } L[NB_MLP_MAX_LAYERS];
    /* forward caches (Bmax rows) and backward scratch */
    NB_REAL *inp[NB_MLP_MAX_LAYERS]; /* input of layer l: the data pointer or previous output */
    NB_REAL *pre[NB_MLP_MAX_LAYERS]; /* x·W^T (B, dims[l+1]) */
    NB_REAL *out[NB_MLP_MAX_LAYERS]; /* after norm+bias (+activation on hidden layers) */
    NB_REAL *mean[NB_MLP_MAX_LAYERS], *rstd[NB_MLP_MAX_LAYERS];
    /* WeightNorm, applied to the outputs: ||v|| and g/||v|| per unit (OC) */
    NB_REAL *wn_norm[NB_MLP_MAX_LAYERS], *wn_scale[NB_MLP_MAX_LAYERS];
    NB_REAL *probs;         /* (Bmax, classes) */
    NB_REAL *dbuf0, *dbuf1; /* scratch gradients */
    int last_B, last_training;
    /* > 0: the backward takes the gradient of the loss summed over its rows divided by this
     * many (the rows of a batch split over processes, data-parallel); 0: the mean loss */
    int grad_rows;
} nb_mlp;

/* Allocates and initializes (weights ~ N(0, 1/fan_in)·sqrt(2) for relu-like activations,
 * Glorot otherwise; gains 1, biases 0, running mean 0 / var 1), drawing from rng.
 * Returns 0, or -1 with a message in err (sizes out of range, out of memory). */
int nb_mlp_init(nb_mlp *m, int nlayers, const int *dims, const nb_norm_cfg *norm, nb_act_kind act,
                int Bmax, nb_rng *rng, nb_err *err);
void nb_mlp_free(nb_mlp *m);

/* Forward over B <= Bmax rows of x (B, dims[0]); training selects batch statistics and
 * running-average updates for BN. Returns the mean cross-entropy against y (B) and leaves the
 * softmax in m->probs. y may be NULL (returns 0). */
double nb_mlp_forward(nb_mlp *m, const NB_REAL *x, const int *y, int B, int training);

/* Backward of the last forward (its mean loss); ACCUMULATES into m->grads (zero them first
 * with nb_mlp_zero_grad). */
void nb_mlp_backward(nb_mlp *m, const int *y);
void nb_mlp_zero_grad(nb_mlp *m);

/* WeightNorm's data-dependent initialization (Salimans & Kingma): runs x (B rows) through the
 * network layer by layer and sets each layer's g and b so that its pre-activations have zero
 * mean and unit variance per unit. Only for norm kind weight; a no-op otherwise. */
void nb_mlp_data_init(nb_mlp *m, const NB_REAL *x, int B);
