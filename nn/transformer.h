/* nn/transformer.h — the encoder–decoder Transformer (Vaswani et al. 2017) as the RMSNorm
 * authors' `zero` toolkit builds it for the paper's Table 4, with every norm at every sub-layer,
 * post- or pre-norm, training (forward, backward) and decoding (greedy, beam search with cached
 * keys and values). Generic (see nn/nn.h); the configuration part has an include guard.
 *
 * Dimension letters: B sentences, S source length, T target length (both padded), d model
 * width, H heads, dh = d/H, F feed-forward width, V vocabulary (shared by source and target:
 * joint BPE), N = B*S source rows, M = B*T target rows. Token arrays are (B, S) and (B, T),
 * row-major, each sentence's tokens first and then cfg->pad; a target sentence ends with
 * cfg->eos. Activations are (rows, d) with row b*S + i (or b*T + t) for position i of sentence b.
 *
 * The model (docs/papers.md#transformer says where each choice comes from):
 *   embedding   x = E[tok]·sqrt(d) + e_b + PE(pos), then dropout; PE sinusoidal with the sines
 *               in the first d/2 channels and the cosines in the last (zero's timing signal);
 *               e_b one bias vector shared by source and target (zero's "bias"). The decoder's
 *               input at position t is the embedding of target token t-1; at t = 0 it is the
 *               embedding of cfg->bos, or (bos < 0, zero's shift) the zero vector plus PE(0).
 *   sub-layer   post (norm_position post, zero's and the original): x = N(x + drop(F(x)));
 *               pre: x = x + drop(F(N(x))), and one more N at the end of each stack.
 *   F           self-attention (decoder: causal), encoder–decoder attention (decoder), or the
 *               feed-forward map relu(x·W1ᵀ + b1) → dropout → ·W2ᵀ + b2. Attention: one (3d, d)
 *               map for q,k,v (cross: q (d, d) and k,v (2d, d)), scores q·kᵀ/sqrt(dh), masked
 *               softmax (padded source keys; future target keys), dropout on the weights,
 *               ·v, heads concatenated, output map (d, d). Every map has a bias.
 *   output      logits = x·Eoutᵀ (no bias), Eout = the target embedding (tie_out) or its own.
 *   loss        label-smoothed cross-entropy as zero: target 1-ε, every other token ε/(V-1),
 *               minus that distribution's entropy (so a perfect model scores 0); averaged over
 *               each sentence's tokens, then over the sentences.
 * Norms at each of the 2 (encoder) or 3 (decoder) sub-layers of a layer, and the final ones:
 *   none, weight: the identity (weight: every linear map of a layer, W = g·v/|v| per output
 *   row, g initialised to the row norms); layer: LayerNorm with gain and bias; rms: RMSNorm with
 *   a gain (zero's rms_norm); prms: RMSNorm from the first k = nb_prms_k(d, p, p_floor) values;
 *   batch: BatchNorm per channel over the batch's non-padded tokens (training), running
 *   averages in evaluation. Padded rows never change a non-padded one's value or gradient.
 * Init (zero's Table-4 setting, initializer=uniform_unit_scaling, gain 1): every map's weight
 * U(±sqrt(6/(in+out))) over its fused shape, embeddings (and an untied Eout) N(0, 1/d), e_b
 * U(±sqrt(3/d)) (TF's scaling initializer on a vector), biases 0, gains 1, norm biases 0. */

#ifndef NB_NN_TRANSFORMER_CFG_H
#define NB_NN_TRANSFORMER_CFG_H

#include <stdint.h>

typedef struct nb_tf_cfg {
    int enc_layers, dec_layers; /* >= 1 each */
    int dim, heads, ffn;        /* d (even, a multiple of heads), H, F */
    int vocab;                  /* V: the shared vocabulary */
    int pad, bos, eos;          /* token ids; bos < 0: the decoder starts from the zero vector */
    int share_emb;              /* 1: source and target embeddings are one matrix */
    int tie_out;                /* 1: the output projection is the target embedding (zero) */
    int pre_norm;               /* 0: post-norm (zero, Vaswani et al.); 1: pre-norm + final N */
    double dropout;             /* embeddings and residual branches */
    double attn_dropout;        /* attention weights */
    double relu_dropout;        /* the feed-forward hidden layer */
    double label_smooth;        /* ε (0.1) */
    int max_pos;                /* the longest sequence any call will use (positions table) */
    nb_norm_cfg norm;
} nb_tf_cfg;

/* A named configuration (the data behind --preset). */
typedef struct nb_tf_preset {
    const char *name;
    int enc_layers, dec_layers, dim, heads, ffn;
    double dropout; /* all three dropouts */
    int warmup;     /* steps of the inverse-square-root schedule */
    const char *why;
} nb_tf_preset;

extern const nb_tf_preset nb_tf_presets[];
extern const int nb_tf_preset_count;
/* The preset called name, or NULL. */
const nb_tf_preset *nb_tf_preset_find(const char *name);
/* cfg from a preset for a vocabulary of V tokens (pad 0, bos 1, eos 2 — the caller overrides
 * them to its vocabulary's), norm kind with nb_norm_cfg_default, post-norm, tie_out 1,
 * share_emb 1 (joint BPE), label smoothing 0.1, max_pos 256. */
void nb_tf_cfg_from_preset(nb_tf_cfg *cfg, const nb_tf_preset *p, int V, nb_norm_kind kind);

/* The bytes nb_tf_new allocates (float model) for batches of max_rows rows and sequences of
 * cfg->max_pos, with nthreads OpenMP threads, computed without allocating (within a few percent);
 * *params (may be NULL) receives the layout's floats. And the bytes nb_tf_translate adds for B
 * sentences of S source tokens with a beam of `beam` (1: greedy). For refusing a model that cannot
 * fit before building it. */
double nb_tf_mem_bytes(const nb_tf_cfg *cfg, int max_rows, int nthreads, double *params);
double nb_tf_decode_mem_bytes(const nb_tf_cfg *cfg, int B, int S, int beam, int nthreads);

/* Loss statistics of one forward over the non-padded target tokens. */
typedef struct nb_tf_stats {
    double loss;    /* the training loss above (what backward differentiates) */
    double nll_sum; /* sum of -log p(target) without smoothing (for cross-entropy per token) */
    long ntok;      /* target tokens counted (including each sentence's eos) */
    long ncorrect;  /* tokens whose argmax is the target */
} nb_tf_stats;

/* One named tensor of the model (for tests, checkpoints' inspection): names are "emb" (the
 * source embedding, also the target's when shared), "emb_tgt", "emb_b", "out", and
 * "enc.I.self|ffn.X" / "dec.I.self|cross|ffn.X" with X one of norm.g, norm.b, a.w, a.b, kv.w,
 * kv.b, o.w, o.b, a.g, kv.g, o.g (WeightNorm gains), norm.rm, norm.rv (BatchNorm), and
 * "enc.fin.g|b", "dec.fin.g|b" (pre-norm). a is the first map (q,k,v (3d, d); cross q; ffn W1),
 * kv cross-attention's k,v (2d, d), o the last map; weights are (out, in). */
typedef struct nb_tf_tensor_info {
    char name[48];
    size_t off, n;
} nb_tf_tensor_info;

/* Benchmark of training steps (float): a model of cfg on generated sentences of seq_len
 * tokens each side, as many as fit batch_tokens per side, Adam (0.9, 0.98, 1e-9). step runs
 * forward, backward and the update and returns its seconds. */
typedef struct nb_tf_bench nb_tf_bench;
nb_tf_bench *nb_tf_bench_open(const nb_tf_cfg *cfg, int batch_tokens, int seq_len, uint64_t seed,
                              nb_err *err);
double nb_tf_bench_step(nb_tf_bench *b);
/* Data-parallel: the step on sentences [lo, hi) of the benchmark's batch as a shard of it
 * (nb_tf_set_shard), then sum(ctx, params, grads, layout, the shard's loss share) — the sums
 * over the processes, in place — then Adam. Returns the step's seconds. */
double nb_tf_bench_step_shard(nb_tf_bench *b, int lo, int hi,
                              void (*sum)(void *ctx, float *params, float *grads,
                                          const nb_layout *lay, double loss),
                              void *ctx);
void nb_tf_bench_close(nb_tf_bench *b);
/* The GEMMs of one step (after a step: the shapes of its batch), as nb_tf_gemm_shapes. */
int nb_tf_bench_gemms(const nb_tf_bench *b, int *mnk_count, int max);

#endif

typedef struct nb_tf nb_tf;

/* Builds the model for batches of at most max_rows tokens per side (B*S and B*T, padding
 * included) and sequences of at most cfg->max_pos, appending its tensors to layout as a few
 * contiguous groups ("tf.emb", "tf.out", "tf.enc", "tf.dec", and "tf.bn" for BatchNorm's
 * running averages, not trainable). Returns the model, or NULL with err set. */
nb_tf *nb_tf_new(const nb_tf_cfg *cfg, nb_layout *layout, int max_rows, nb_err *err);
void nb_tf_free(nb_tf *m);
const nb_tf_cfg *nb_tf_config(const nb_tf *m);

/* Initialises every tensor of the model in params (see the header comment). */
void nb_tf_init_params(nb_tf *m, NB_REAL *params, nb_rng *rng);

/* Forward over src (B, S) and tgt (B, T) (every sentence at least one token; S, T <= max_pos,
 * B*S and B*T <= max_rows). training: dropout on (mask from dropout_seed: the same seed gives
 * the same masks, for any thread count) and BatchNorm batch statistics (running averages in
 * params updated). want_grad: prepare backward (the logits are turned into their gradient);
 * otherwise nb_tf_logits() gives the logits (M, V). Fills *st (may be NULL); returns st->loss.
 * src and tgt must stay valid until backward. */
double nb_tf_forward(nb_tf *m, NB_REAL *params, const int *src, const int *tgt, int B, int S, int T,
                     int training, int want_grad, uint64_t dropout_seed, nb_tf_stats *st);
/* Data-parallel shards: the next forwards' B sentences are sentences row0.. of a batch of
 * grad_rows (> 0; 0: B) sentences. row0 keys their dropout masks (so that a split batch draws
 * the masks one process draws); the loss, and so its gradient, is the sum of the sentences'
 * losses divided by grad_rows instead of B. Both 0 until set. */
void nb_tf_set_shard(nb_tf *m, int row0, int grad_rows);

/* Backward of the last forward (which had want_grad): ACCUMULATES into grads. */
void nb_tf_backward(nb_tf *m, NB_REAL *grads, const NB_REAL *params);
/* The logits (M, V) of the last forward without want_grad. */
const NB_REAL *nb_tf_logits(const nb_tf *m);

/* Decoding (evaluation mode: no dropout, BatchNorm's running averages). For each of the B
 * sentences of src (B, S), writes at most max_out tokens (eos not included) to out (B, max_out)
 * and their number to out_len (B). A sentence stops at eos or after min(max_out, its length +
 * extra, cfg->max_pos) tokens. beam <= 1: greedy (argmax); beam > 1: beam search keeping `beam`
 * hypotheses, scores log p / ((5 + L)/6)^alpha with L the tokens including eos (zero's GNMT
 * normalisation: beam 4, alpha 0.6); alpha 0 ranks by log p. pad, eos at the first step, and
 * bos never come out. Keys and values of past target positions are cached. If scores is not
 * NULL it receives each output's (normalised) score. Returns 0, or -1 with err set (memory). */
int nb_tf_translate(nb_tf *m, const NB_REAL *params, const int *src, int B, int S, int beam,
                    double alpha, int extra, int max_out, int *out, int *out_len, double *scores,
                    nb_err *err);

/* Log-probabilities (B, T, V) of every target position by incremental decoding (the decoding
 * path, one position at a time with the caches) — for checking it against nb_tf_forward. */
int nb_tf_incremental_logprobs(nb_tf *m, const NB_REAL *params, const int *src, const int *tgt,
                               int B, int S, int T, NB_REAL *logp, nb_err *err);

/* Writes at most max tensors' names and places; returns how many the model has. */
int nb_tf_tensors(const nb_tf *m, nb_tf_tensor_info *out, int max);

/* The GEMMs (m, n, k, how many per step) of one training step at the last forward's shapes
 * (attention counted per sentence and head); returns how many were written (<= max). */
int nb_tf_gemm_shapes(const nb_tf *m, int *mnk_count, int max);
/* Floating-point operations of one training step (forward + backward) at those shapes. */
double nb_tf_step_flops(const nb_tf *m);
