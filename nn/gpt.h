/* nn/gpt.h — a decoder-only Transformer language model as GPT-2 and nanoGPT build it, with every
 * row-wise norm. Generic (see nn/nn.h); the configuration part has an include guard.
 *
 * Dimension letters: B sequences, T positions (<= cfg->ctx), d width, H heads, dh = d/H,
 * V vocabulary, N = B*T rows (row b*T + t is position t of sequence b).
 *
 * The model:
 *   embedding   x = wte[tok] + wpe[t], then dropout.
 *   block       pre-norm (GPT-2): x += drop(attn(N1(x))); x += drop(mlp(N2(x)));
 *               post-norm: x = N1(x + drop(attn(x))); x = N2(x + drop(mlp(x))).
 *   attn        one (3d, d) map for q,k,v, causal softmax(q·kᵀ/sqrt(dh)) per head, dropout on
 *               the weights, ·v, heads concatenated, output map (d, d).
 *   mlp         gelu(x·W1ᵀ + b1)·W2ᵀ + b2, W1 (4d, d), gelu in its tanh form (GPT-2).
 *   output      pre-norm: h = Nf(x) (a final norm); post-norm: h = x. logits = h·wteᵀ (tied).
 *   loss        mean cross-entropy of the next character over the N rows (nats).
 * Biases (cfg->bias): every map's, and LayerNorm's shift; off, neither exists (nanoGPT's
 * bias=False). Norms: none (identity); layer (gain, shift with bias); rms (gain); prms (RMS from
 * the first k = nb_prms_k(d, p, p_floor) values, gain); weight: no activation norm, every map of
 * a block W = g·v/|v| per output row (g initialised to the rows' norms). batch is refused
 * (statistics over the batch's positions would leak the future into the past).
 * Init (nanoGPT): maps and embeddings N(0, 0.02²), the two maps that end a residual branch
 * N(0, (0.02/sqrt(2·layers))²), biases 0, gains 1.
 * Dropout masks are a hash of (seed, site, global index), never stored. */

#ifndef NB_NN_GPT_CFG_H
#define NB_NN_GPT_CFG_H

typedef struct nb_gpt_cfg {
    int layers, dim, heads; /* d a multiple of heads */
    int vocab, ctx;         /* V, the longest sequence */
    int pre_norm;           /* 1: GPT-2's pre-norm and a final norm; 0: post-norm */
    int bias;               /* 1: biases (maps, LayerNorm's shift) */
    double dropout;         /* embeddings, attention weights, residual branches */
    nb_norm_cfg norm;
} nb_gpt_cfg;

#endif

typedef struct nb_gpt nb_gpt;

/* Builds the model for batches of at most max_batch sequences of at most cfg->ctx positions,
 * appending its tensors to layout ("gpt.wte", "gpt.wpe", "gpt.lI" per block, "gpt.fin").
 * Allocations are counted (nn/mem.h). Returns NULL with err set (a batch norm, bad shapes,
 * memory). */
nb_gpt *nb_gpt_new(const nb_gpt_cfg *cfg, nb_layout *layout, int max_batch, nb_err *err);
void nb_gpt_free(nb_gpt *m);
/* nanoGPT's initialisation (see above). */
void nb_gpt_init_params(nb_gpt *m, NB_REAL *params, nb_rng *rng);

/* Forward of B sequences of T tokens tok (B, T) with next tokens tgt (B, T) (NULL: logits
 * only, loss 0). training: dropout on (masks from dropout_seed). want_grad: prepare backward
 * (needs tgt). Returns the mean loss over the rows (with a shard: the rows' sum over
 * grad_rows*T). Without want_grad nb_gpt_logits() holds the logits (N, V). */
double nb_gpt_forward(nb_gpt *m, const NB_REAL *params, const int *tok, const int *tgt, int B,
                      int T, int training, int want_grad, uint64_t dropout_seed);
/* Backward of the last forward: ACCUMULATES into grads. */
void nb_gpt_backward(nb_gpt *m, NB_REAL *grads, const NB_REAL *params);
const NB_REAL *nb_gpt_logits(const nb_gpt *m);
/* Data-parallel shards: the next forwards' B sequences are sequences row0.. of a batch of
 * grad_rows (0: B) sequences (dropout keyed by the global sequence; loss over grad_rows). */
void nb_gpt_set_shard(nb_gpt *m, int row0, int grad_rows);
/* AdamW's decoupled weight decay: every matrix (maps, embeddings; not biases or gains)
 * multiplied by factor. */
void nb_gpt_decay(const nb_gpt *m, NB_REAL *params, double factor);
/* Floating-point operations of one training step of B sequences of T positions (forward and
 * backward: 3 × the forward's GEMMs). */
double nb_gpt_step_flops(const nb_gpt *m, int B, int T);
