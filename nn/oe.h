/* nn/oe.h — the order-embedding model (Vendrov et al. 2016) and its loss (generic: see nn/nn.h;
 * no guard). docs/papers.md#order-model.
 *
 * Dimension letters: T steps, B batch rows (captions, and the images paired with them), W word
 * embedding width, H joint embedding width (= the GRU state), F image feature width, V words.
 *
 *   caption: tokens (T, B) → word embeddings (T, B, W) → GRU (nn/gru.h, with the run's norm)
 *            → final state h_T → s = |h_T / ||h_T|||
 *   image:   c = |(img·Wimg^T + bimg) / ||.|||
 *   E(s, c) = || max(0, s − c) ||²   (summed over the H dimensions)
 *   loss = Σ_{i≠j} max(0, α − E_ij + E_jj) + max(0, α − E_ij + E_ii),  E_ij = E(s_i, c_j)
 * The loss is a SUM over the batch, as the code computes it. Its gradient is formed from the
 * B×B coefficient matrix dL/dE, never from a B×B×H tensor. */

/* s = |x/||x|||, row-wise over B rows of n; nrm (B) caches the norms (floored at 1e-12). */
void nb_l2abs_forward(NB_REAL *out, NB_REAL *nrm, const NB_REAL *inp, int B, int n);
/* Accumulates dinp from dout; out is the forward output, inp its input. */
void nb_l2abs_backward(NB_REAL *dinp, const NB_REAL *dout, const NB_REAL *inp, const NB_REAL *nrm,
                       int B, int n);

/* E (Bs, Bc) = E(s_i, c_j) for caption embeddings s (Bs, n) and image embeddings c (Bc, n).
 * Row-parallel; memory O(Bs*Bc). */
void nb_order_errors(NB_REAL *E, const NB_REAL *s, const NB_REAL *c, int Bs, int Bc, int n);

/* The contrastive loss over the B×B errors E (B paired rows: caption i with image i) with margin
 * alpha; G (B, B) receives dloss/dE. Returns the loss (summed, in double). */
double nb_order_loss(NB_REAL *G, const NB_REAL *E, int B, double alpha);

/* From G = dloss/dE, accumulates ds (B, n) and dc (B, n). */
void nb_order_loss_backward(NB_REAL *ds, NB_REAL *dc, const NB_REAL *G, const NB_REAL *s,
                            const NB_REAL *c, int B, int n);

typedef struct nb_oe {
    int V, W, H, F, Tmax, Bmax;
    double margin;
    nb_layout layout;
    NB_REAL *params, *grads, *adam_m, *adam_v; /* (layout.total) each */
    size_t emb, wimg, bimg;                    /* offsets */
    nb_gru gru;
    /* caches and scratch (Bmax rows; Tmax steps) */
    int *tok;                                   /* (T, B) tokens of the last caption forward */
    NB_REAL *x, *dx, *mask;                     /* (T, B, W), (T, B, W), (T, B) */
    NB_REAL *s, *snrm, *ds, *dh;                /* (B, H), (B), (B, H), (B, H) */
    NB_REAL *img, *ipre, *c, *cnrm, *dc, *dpre; /* (B, F) (B, H) (B, H) (B) (B, H) (B, H) */
    NB_REAL *E, *G;                             /* (B, B) */
    int T, B;
} nb_oe;

/* Builds the model for a vocabulary of V words (ids 0 = end/padding, 1 = unknown), word width W,
 * joint width H, image width F, captions of up to Tmax steps (words + 1), batches of up to Bmax.
 * Initialises as the OE code: embeddings U(±0.1), the GRU per nb_gru_init_params, the image map
 * Glorot uniform ±sqrt(6/(F+H)) with bias 0. Returns 0, or -1 with err set. */
int nb_oe_init(nb_oe *m, int V, int W, int H, int F, int Tmax, int Bmax, double margin,
               const nb_norm_cfg *norm, nb_rng *rng, nb_err *err);
void nb_oe_free(nb_oe *m);

/* Caption embeddings of B <= Bmax captions into m->s (B, H): tok (T, B) time-major token ids
 * (0 past a caption's end), steps (B) the number of steps of each caption (its words + 1: the
 * end token 0 is fed last), T = the largest of steps, <= Tmax. */
void nb_oe_encode_captions(nb_oe *m, const int *tok, const int *steps, int T, int B, int training);
/* Image embeddings of B <= Bmax feature rows img (B, F) into m->c (B, H). */
void nb_oe_encode_images(nb_oe *m, const NB_REAL *img, int B);

/* One training forward over B pairs (caption i, image i): returns the loss. */
double nb_oe_forward(nb_oe *m, const int *tok, const int *steps, int T, const NB_REAL *img, int B);
/* Backward of the last nb_oe_forward; ACCUMULATES into m->grads. */
void nb_oe_backward(nb_oe *m);
/* The part of the backward below the loss: from m->ds and m->dc (B rows of H each, the loss's
 * gradients with respect to the caption and image embeddings s and c of the last
 * nb_oe_encode_captions and nb_oe_encode_images of B rows, the images taken from m->img) into
 * m->grads (ACCUMULATED). A process that holds some rows of a batch whose loss is taken over
 * all of them (data-parallel) sets ds and dc of its rows and calls this. */
void nb_oe_backward_embeddings(nb_oe *m);
