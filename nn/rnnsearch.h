/* nn/rnnsearch.h — RNNSearch (Bahdanau et al.) as Nematus v0.3 (TensorFlow) builds it, the RMSNorm
 * paper's translation model (docs/papers.md#mt), with every norm where Nematus' layer_normalisation
 * puts LayerNorm (generic: see nn/nn.h; no guard).
 *
 * Dimension letters: B sentences, Tx source and Ty target positions (time-major: row t*B + b is
 * position t of sentence b), E embedding width (dim_word), H state width (dim), C = 2H context
 * width, A = 2H attention width, Vs/Vt vocabularies. N(.) is the configured norm of one layer.
 *
 *   xs = Emb_s[src]                        word dropout dropout_source per token
 *   hf = GRU_f(xs), hb = GRU_b(xs reversed in time) reversed back;  Ctx_j = [hf_j ; hb_j]  (C)
 *     (the backward GRU starts in the padding at 0 and stays there: masked steps keep the state)
 *   s_-1 = tanh(N_init(mean_j Ctx_j · Wi^T + bi))          mean over the real source positions
 *   Hc_j = N_ac(Ctx_j · Wac^T + bac)                      (A) once per sentence
 *   ye_t = t ? Emb_t[y_{t-1}] : 0          word dropout dropout_target per token
 * each target position t (the conditional GRU, Nematus' grustep1 → attstep → grustep2):
 *   s1_t = GRU1(s_{t-1}, ye_t)                           bias on the input side, as nb_gru
 *   e_tj = v · tanh(Hc_j + N_as(s1_t · Was^T));  a_t = softmax over the real j;  c_t = sum a_tj
 * Ctx_j s_t  = GRU2(s1_t, c_t)                               bias on the recurrent side (Nematus'
 *                                                        nematus_compat: inside Nh, not Nx)
 * the deep output (Nematus' Predictor, tanh):
 *   o_t = tanh(N_pe(ye_t·Wpe^T + bpe) + N_ps(s_t·Wps^T + bps) + N_pc(c_t·Wpc^T + bpc))   (E)
 *   logits_t = o_t · Wo^T + bo  (no norm);  p_t = softmax(logits_t)
 * loss = (1/B) sum over real target positions of -sum_k q_k log p_tk, q = (1-ls) onehot(y_t) +
 *   ls/Vt (Nematus' label smoothing; ls = 0 gives the plain cross-entropy); the sentence sums
 *   averaged over the batch as Nematus' mean_loss.
 * Norms: inside the four GRUs as nn/gru.h (four per GRU), and N_init, N_ac, N_as, N_pe, N_ps,
 *   N_pc: layer (gain 1, bias 0), rms and prms (gain only), batch (EXTENSION: statistics over the
 *   rows of the call, padding included, one running average per layer), weight (EXTENSION:
 *   WeightNorm on the matrices of those six layers instead), none.
 * Init (Nematus initializers.py): every matrix N(0, init_scale^2), orthogonal when square; the
 *   GRUs' recurrent blocks orthogonal; biases 0; then init_center added to every weight entry
 *   (embeddings included; the RMS paper's Fig. 4 uses 0.2).
 * Dropout implemented: dropout_source and dropout_target only (whole embeddings of tokens, scaled
 *   by 1/(1-p) as tf.layers.dropout; Nematus' dropout_embedding/dropout_hidden are not). Every
 *   sentence draws its masks from streams of its own keyed by one draw of the noise stream and
 *   its index in the whole batch (row0 + b), so a batch split over processes draws the same.
 * Sources in nn/rnnsearch.c. */

#ifndef NB_NN_RNNSEARCH_CFG
#define NB_NN_RNNSEARCH_CFG
typedef struct nb_rnnsearch_cfg {
    int Vs, Vt;                            /* vocabularies */
    int E, H;                              /* dim_word, dim (paper 512, 1024) */
    int Bmax, Txmax, Tymax;                /* largest batch and lengths a forward may use */
    int beam_max;                          /* largest beam the decoding functions may use (>= 1) */
    int eos;                               /* the target end-of-sentence id */
    int beam_simple;                       /* nb_rnnsearch_beam's rules: 0 Nematus', 1 simple */
    double label_smoothing;                /* 0.1 as the paper */
    double dropout_source, dropout_target; /* word dropout probabilities, 0: off */
    double init_scale;                     /* 0.01 */
    double init_center;                    /* 0; --init-center */
    nb_norm_cfg norm;
} nb_rnnsearch_cfg;

/* Table 5: sums over the decoder's first GRU's recurrent pre-activations Nh(s·Uc) (all 3H values:
 * gates and candidate; = s·Uc for none) at real target positions: index 0..3 positions 1..4,
 * index 4 every position. Accumulate over a validation set, then mean = sum/n, std =
 * sqrt(sumsq/n - mean^2). */
typedef struct nb_rnnsearch_stats {
    double sum[5], sumsq[5], n[5];
} nb_rnnsearch_stats;

/* Fills cfg with the paper's values for the given sizes (E 512, H 1024, label smoothing 0.1, no
 * dropout, init 0.01 around 0, beam 5, norm `kind` with nb_norm_cfg_default). */
void nb_rnnsearch_cfg_default(nb_rnnsearch_cfg *cfg, int Vs, int Vt, int eos, nb_norm_kind kind);
/* The bytes nb_rnnsearch_init allocates for cfg (float model: parameters, gradients, the forward,
 * backward and decoding buffers), computed without allocating, within a few percent; *params
 * (may be NULL) receives the number of parameters. For refusing a model that cannot fit before
 * building it. */
double nb_rnnsearch_mem_bytes(const nb_rnnsearch_cfg *cfg, double *params);
#endif

typedef struct nb_rs_dense {
    int out, in;
    size_t w, b, wg;            /* offsets; b, wg (size_t)-1 when absent */
    NB_REAL *weff, *vn, *dweff; /* WeightNorm: effective weight, row norms, its gradient */
} nb_rs_dense;

typedef struct nb_rs_norm {
    int n, k;            /* width, pRMS k */
    size_t g, b, rm, rv; /* gain, bias (layer, batch), running mean/var (batch) */
    size_t s;            /* the norm's scalars (DyT's alpha) */
} nb_rs_norm;

typedef struct nb_rnnsearch {
    nb_rnnsearch_cfg cfg;
    int C, A, Rmax, Tdmax;
    nb_layout layout;
    NB_REAL *params, *grads;
    size_t emb_s, emb_t, att_v;
    nb_gru encf, encb, dec1, dec2;
    nb_rs_dense init, ac, as, pe, ps, pc, out;
    nb_rs_norm ninit, nac, nas, npe, nps, npc;
    /* Data-parallel shards: the forward's sentences are sentences row0.. of the batch (their
     * word-dropout streams), and with grad_rows > 0 the loss (and so its gradient) is the sum
     * of the sentences' losses divided by grad_rows (the whole batch's sentences), not by B. */
    int row0, grad_rows;
    /* last forward */
    int B, Tx, Ty, training;
    int *src, *tgt;                    /* (Tx,B), (Ty,B); padding replaced by 0 */
    NB_REAL *xm, *ym, *wds, *wdt;      /* masks and word-dropout factors */
    NB_REAL *xs, *xsr, *hfr, *ctx;     /* (Tx,B,E) x2, (Tx,B,H), (Tx,B,C) */
    NB_REAL *cm, *zi, *zin, *s0, *sti; /* (B,C), (B,H) x3, init norm stats */
    NB_REAL *hcp, *hc, *sthc;          /* (Tx*B, A) pre-norm and normalized; stats */
    NB_REAL *ye, *s1, *s, *ct;         /* (Td,B,E), (Td,B,H) x2, (Td,B,C) */
    NB_REAL *hsp, *hs, *sths;          /* (Td*B, A); stats */
    NB_REAL *al;                       /* (Td, B, Tx) attention weights */
    NB_REAL *pep, *pen, *psp, *psn, *pcp, *pcn, *stp, *o; /* (Td*B, E); stats */
    NB_REAL *probs; /* (Td*B, Vt) softmax, then dlogits in backward */
    double nll;     /* sum of -log p(y) over real target tokens */
    long ntok;      /* real target tokens */
    /* backward scratch */
    NB_REAL *dtmp, *dtmp2, *dhid, *dS, *dct, *dye, *dctx, *dhc, *dhsp, *ds, *ds1, *dxs, *dxsr, *dhf,
        *dhb, *drow;
    NB_REAL *dvgrp; /* (Bmax', A): attention v's gradient over a group of source positions */
    NB_REAL *dab;   /* (Bmax', Txmax): dL/d(attention weight) per source position */
    double *dvacc;  /* (Bmax', A) */
    /* decoding scratch */
    NB_REAL *st[2], *logp;
    int *srow;
} nb_rnnsearch;

/* Builds the model and draws its initial values. Returns 0, or -1 with err set. */
int nb_rnnsearch_init(nb_rnnsearch *m, const nb_rnnsearch_cfg *cfg, nb_rng *rng, nb_err *err);
void nb_rnnsearch_free(nb_rnnsearch *m);

/* Forward over B <= Bmax sentence pairs: src (Tx, B) token ids with lengths src_len (B, 1..Tx),
 * tgt (Ty, B) with tgt_len (B, 1..Ty; each target ends with its eos); ids at padding positions are
 * ignored. training: word dropout from noise (NULL: none) and BN batch statistics. stats: when not
 * NULL, Table 5's sums are ADDED to it. Returns the loss (above); sets m->nll and m->ntok. */
double nb_rnnsearch_forward(nb_rnnsearch *m, const int *src, const int *src_len, int Tx,
                            const int *tgt, const int *tgt_len, int Ty, int B, int training,
                            nb_rng *noise, nb_rnnsearch_stats *stats);

/* Backward of the last forward's loss; ACCUMULATES into m->grads. */
void nb_rnnsearch_backward(nb_rnnsearch *m);

/* ---- decoding (evaluation mode; overwrites the forward caches) ----
 * encode: runs the encoder over B <= Bmax source sentences and keeps what the decoder needs.
 * dec_init: the initial decoder states (R, H) of rows whose source sentences are srow (R).
 * dec_step: one decoder step for R <= Bmax*beam_max rows: row r reads source sentence srow[r],
 * previous token prev[r] (-1: the start, a zero embedding) and state sin (R, H); writes the new
 * state sout (R, H) (not aliasing sin) and the log-probabilities logp (R, Vt). step is the
 * position (0 first; BatchNorm's running statistics slot). */
void nb_rnnsearch_encode(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B);
void nb_rnnsearch_dec_init(nb_rnnsearch *m, int R, const int *srow, NB_REAL *s);
void nb_rnnsearch_dec_step(nb_rnnsearch *m, int R, const int *srow, const int *prev,
                           const NB_REAL *sin, NB_REAL *sout, NB_REAL *logp, int step);

/* Greedy decoding of B source sentences, at most maxlen target tokens each (eos included): out
 * (B, maxlen) row-major receives the tokens without the eos, out_len (B) their count. */
void nb_rnnsearch_greedy(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B,
                         int maxlen, int *out, int *out_len);

/* Beam search, K <= beam_max hypotheses per sentence ranked by their summed -log p (the cost),
 * at most maxlen tokens each (eos included); stops when all are finished or after maxlen steps.
 * Nematus v0.3's rules (inference.py; cfg.beam_simple 0, the default): a finished hypothesis
 * (its last token eos) keeps its place and its cost and is never pushed out — each step the open
 * hypotheses' continuations (a newly finishing one among them, on its cost) fill only the places
 * the finished ones leave; the pick is the least cost / length, the length counting the eos, and
 * a hypothesis still open after maxlen tokens is scored as if an eos followed (length maxlen + 1,
 * its cost unchanged; translate.py's normalization with alpha 1). The simple rules (beam_simple
 * 1, normbench before this was Nematus'): a finished hypothesis competes with the open ones'
 * continuations on its cost and can be pushed out, and an open one at maxlen has length maxlen.
 * out, out_len as greedy; score (B, may be NULL) receives -cost/length of the pick. Returns 0, or
 * -1 with err set (out of memory). */
int nb_rnnsearch_beam(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B, int K,
                      int maxlen, int *out, int *out_len, double *score, nb_err *err);
