/* tasks/mt.c — machine translation, the RMSNorm paper's main experiment (docs/papers.md#mt):
 * RNNSearch as Nematus v0.3 builds it (nn/rnnsearch.h) on Multi30k En→De (or WMT14, or a
 * generated transduction), with joint BPE (datasets/bpe.h) and SacreBLEU's BLEU (util/bleu.h).
 *
 * Training as Nematus: Adam lr 1e-4, every source ending with <eos> (--src-eos), batches of 80
 * sentences cut from maxibatches of 20 batches sorted by length, longest first (datasets/mt.h,
 * --batch-order), label smoothing 0.1, the global gradient norm clipped at 1
 * (Nematus' clip_c), the loss a mean over sentences of their token sums. Every --eval-every
 * steps and at the end: the validation cross-entropy per target token (val_xent, no label
 * smoothing, no dropout) and the greedy translation's BLEU on the validation set (val_bleu), and
 * the decoder's first GRU's recurrent pre-activations' mean and std at target positions 1-4 and
 * over all positions (the paper's Table 5: val_preact_mean_1 .. _4, _all, and _std_). The
 * parameters with the lowest val_xent are kept (Nematus' early stopping watches the validation
 * cost); at the end they translate each test set by beam search (beam 5, Nematus v0.3's rules,
 * scores normalized by length, as Nematus' translate.py; at most the authors' cap of tokens:
 * decode_limits) and test_bleu (test 2016) and test_2017_bleu are recorded,
 * with the BLEU signature as the run's parameter bleu_signature. A finished run keeps its model
 * (parameters, BPE codes, vocabularies) in DB-checkpoints/run-ID.model/ for `normbench
 * translate`, which decodes exactly as test_bleu does. */
#include "tasks/task.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/mt.h"
#include "nn/mem.h"
#include "tasks/train.h"
#include "util/file.h"
#include "util/bleu.h"

static const char *const mt_datasets[] = {"multi30k", "wmt14-en-de", "synthetic", NULL};

/* mt's own options (tasks/taskopt.h). */
typedef struct mt_opts {
    int model;         /* 0 rnnsearch, 1 transformer */
    int preset;        /* transformer: 0 small, 1 base */
    int norm_position; /* transformer: 0 post (zero's, the original), 1 pre (with a final norm) */
    int warmup;        /* transformer: steps of the noam schedule's warm-up (0: the preset's) */
    int batch_tokens;  /* transformer: token batches of at most this many tokens (0: --batch) */
    int dim_word;      /* embedding width (512) */
    int dim;           /* GRU state width (1024); transformer: d (0: the preset's) */
    int layers, enc_layers, dec_layers, heads, ffn; /* transformer: 0, the preset's */
    double dropout;   /* transformer: every dropout (< 0: the preset's) */
    int bpe_merges;   /* joint BPE merges (multi30k 8,000, wmt14 32,000) */
    int max_len;      /* training pairs longer than this many pieces are dropped, counted (80) */
    int maxibatch;    /* batches sorted together by length (20) */
    int beam;         /* beam width of test_bleu and translate (5) */
    int eval_every;   /* training steps between validations */
    int val_bleu_max; /* validation sentences translated for val_bleu (0: all) */
    int test_max;     /* sentences of each test set translated for its BLEU (0: all) */
    int src_eos;      /* 1: <eos> after every source sentence (Nematus, zero); 0: none */
    int beam_rules;   /* rnnsearch: 0 Nematus v0.3's, 1 simple (nn/rnnsearch.h) */
    int decode_cap;   /* 0 the authors' (Nematus 200, zero source + 50), 1 the longest target */
    int batch_order;  /* NB_MT_ORDER_*: 0 Nematus', 1 by target length, shortest first */
    double label_smoothing;                /* 0.1 */
    double dropout_source, dropout_target; /* word dropout */
    double init_scale, init_center;        /* N(center, scale^2) weights; Fig. 4: center 0.2 */
} mt_opts;

static const char *const model_choices[] = {"rnnsearch", "transformer", NULL};
static const char *const preset_choices[] = {"small", "base", NULL};
static const char *const position_choices[] = {"post", "pre", NULL};
static const char *const onoff_choices[] = {"off", "on", NULL};
static const char *const beam_rules_choices[] = {"nematus", "simple", NULL};
static const char *const decode_cap_choices[] = {"authors", "longest", NULL};
static const char *const batch_order_choices[] = {"nematus", "target", NULL};

static const nb_task_opt mt_opts_decl[] = {
    {"model", NB_TOPT_CHOICE, offsetof(mt_opts, model), "M",
     "the translation model: rnnsearch (Nematus v0.3's, RMS paper A.1) or transformer (the "
     "zero toolkit's, RMS paper Table 4)",
     model_choices, .selector = 1, .group = 1},
    {"dim-word", NB_TOPT_INT, offsetof(mt_opts, dim_word), "N", "embedding width", NULL, 1, 8192,
     512, .models = "rnnsearch"},
    {"dim", NB_TOPT_INT, offsetof(mt_opts, dim), "N",
     "rnnsearch: GRU state width; transformer: model width d, a multiple of --heads (0: the "
     "preset's)",
     NULL, 0, 8192, 1024},
    {"preset", NB_TOPT_CHOICE, offsetof(mt_opts, preset), "P",
     "layers, width, heads, feed-forward and dropout: small (3+3, d 256, 4 heads, ff 1024, "
     "dropout 0.3: Multi30k) or base (6+6, d 512, 8 heads, ff 2048, dropout 0.1: the paper's)",
     preset_choices, .models = "transformer", .group = 1},
    {"layers", NB_TOPT_INT, offsetof(mt_opts, layers), "N",
     "encoder and decoder layers each (0: the preset's)", NULL, 0, 64, 0, .models = "transformer"},
    {"enc-layers", NB_TOPT_INT, offsetof(mt_opts, enc_layers), "N",
     "encoder layers (0: --layers, else the preset's)", NULL, 0, 64, 0, .models = "transformer"},
    {"dec-layers", NB_TOPT_INT, offsetof(mt_opts, dec_layers), "N",
     "decoder layers (0: --layers, else the preset's)", NULL, 0, 64, 0, .models = "transformer"},
    {"heads", NB_TOPT_INT, offsetof(mt_opts, heads), "N", "attention heads (0: the preset's)", NULL,
     0, 256, 0, .models = "transformer"},
    {"ffn", NB_TOPT_INT, offsetof(mt_opts, ffn), "N", "feed-forward hidden width (0: the preset's)",
     NULL, 0, 65536, 0, .models = "transformer"},
    {"dropout", NB_TOPT_DOUBLE, offsetof(mt_opts, dropout), "P",
     "dropout on the embeddings, residual branches, attention weights and feed-forward hidden "
     "layer (-1: the preset's)",
     NULL, -1, 0.99, -1, .models = "transformer"},
    {"norm-position", NB_TOPT_CHOICE, offsetof(mt_opts, norm_position), "W",
     "where the norm sits: post (x = N(x + F(x)), zero's and the original Transformer's) or "
     "pre (x = x + F(N(x)), with a final norm)",
     position_choices, .models = "transformer", .group = 1},
    {"warmup", NB_TOPT_INT, offsetof(mt_opts, warmup), "N",
     "warm-up steps of the noam learning-rate schedule (0: the preset's, small 1000, base 4000)",
     NULL, 0, 1e9, 0, .models = "transformer"},
    {"batch-tokens", NB_TOPT_INT, offsetof(mt_opts, batch_tokens), "N",
     "token batches: sentences of similar length while the batch padded to its longest side holds "
     "at most N tokens, instead of --batch sentences (the paper's base: 25000; 0: off)",
     NULL, 0, 1e7, 0, .models = "transformer"},
    {"bpe-merges", NB_TOPT_INT, offsetof(mt_opts, bpe_merges), "N",
     "joint BPE merges learned on the training text (multi30k 8000, wmt14 32000)", NULL, 0, 1e6,
     8000},
    {"max-len", NB_TOPT_INT, offsetof(mt_opts, max_len), "N",
     "training pairs with a side longer than N pieces are dropped (and counted); validation "
     "pairs over it are left out of val_xent (Nematus' maxlen), and validation and test sources "
     "over it are cut to N pieces for translation (both counted: the run's eval_pairs)",
     NULL, 1, 1000, 80},
    {"maxibatch", NB_TOPT_INT, offsetof(mt_opts, maxibatch), "N",
     "batches read together and sorted by length (Nematus)", NULL, 1, 1000, 20},
    {"beam", NB_TOPT_INT, offsetof(mt_opts, beam), "K",
     "beam width of the test translation and of translate", NULL, 1, 64, 5},
    {"src-eos", NB_TOPT_CHOICE, offsetof(mt_opts, src_eos), "W",
     "on: every source sentence ends with <eos>, which the encoder reads and attention sees "
     "(Nematus' prepare_data, zero's vocabulary); off: no source <eos> (normbench's runs before "
     "it followed them)",
     onoff_choices, .def = 1, .group = NB_GROUP_UNLESS_DEFAULT, .legacy = "off"},
    {"beam-rules", NB_TOPT_CHOICE, offsetof(mt_opts, beam_rules), "R",
     "beam search rules: nematus (Nematus v0.3's inference.py: a finished hypothesis is never "
     "pushed out of the beam, one still open at the length cap is scored as if <eos> followed) "
     "or simple (finished and open hypotheses compete on cost: normbench's earlier rules)",
     beam_rules_choices, .models = "rnnsearch", .group = NB_GROUP_UNLESS_DEFAULT,
     .legacy = "simple"},
    {"decode-cap", NB_TOPT_CHOICE, offsetof(mt_opts, decode_cap), "C",
     "the most tokens a translation (test_bleu, val_bleu, translate) may have: authors (rnnsearch "
     "200 as Nematus' translation_maxlen; transformer the source length with <eos> + 50 as zero's "
     "decode_length) or longest (the longest target of every split, test references included: "
     "normbench's earlier cap, for comparing with earlier runs)",
     decode_cap_choices, .group = NB_GROUP_UNLESS_DEFAULT, .legacy = "longest"},
    {"batch-order", NB_TOPT_CHOICE, offsetof(mt_opts, batch_order), "O",
     "the order of pairs within a maxibatch: nematus (by the longer of source and target, "
     "longest first, as Nematus' data_iterator) or target (by target, then source length, "
     "shortest first: normbench's earlier order)",
     batch_order_choices, .group = NB_GROUP_UNLESS_DEFAULT, .legacy = "target"},
    {"eval-every", NB_TOPT_INT, offsetof(mt_opts, eval_every), "N",
     "validate every N training steps (val_xent, val_bleu)", NULL, 1, 1e9, 1000},
    {"val-bleu-max", NB_TOPT_INT, offsetof(mt_opts, val_bleu_max), "N",
     "validation sentences translated for val_bleu (0: all)", NULL, 0, 1e9, 0},
    {"test-max", NB_TOPT_INT, offsetof(mt_opts, test_max), "N",
     "sentences of each test set translated for its BLEU (0: all; fewer are not the paper's "
     "test_bleu, for quick looks and tests)",
     NULL, 0, 1e9, 0},
    {"label-smoothing", NB_TOPT_DOUBLE, offsetof(mt_opts, label_smoothing), "X",
     "label smoothing of the training loss", NULL, 0, 0.99, 0.1},
    {"dropout-source", NB_TOPT_DOUBLE, offsetof(mt_opts, dropout_source), "P",
     "word dropout on source tokens", NULL, 0, 0.99, 0},
    {"dropout-target", NB_TOPT_DOUBLE, offsetof(mt_opts, dropout_target), "P",
     "word dropout on target tokens", NULL, 0, 0.99, 0},
    {"init-scale", NB_TOPT_DOUBLE, offsetof(mt_opts, init_scale), "X",
     "standard deviation of the initial weights (Nematus 0.01)", NULL, 1e-6, 10, 0.01},
    {"init-center", NB_TOPT_DOUBLE, offsetof(mt_opts, init_center), "X",
     "mean of the initial weights (the RMS paper's Fig. 4: 0.2)", NULL, -10, 10, 0},
    {NULL},
};

static const mt_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static void mt_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm);
    cfg->act = NB_ACT_TANH; /* the GRUs' and the deep output's (recorded only) */
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.lr = 1e-4; /* the RMS paper's RNNSearch */
    cfg->epochs = 10;
    cfg->steps = 0;
    cfg->batch = 80;
    cfg->eval_batch = 80;
    cfg->log_every = 50;
    cfg->clip = 1; /* Nematus' clip_c */
    cfg->flush_denormals = 1;
    mt_opts *o = cfg->task_opts;
    if (cfg->dataset) o->bpe_merges = nb_mt_defaults(cfg->dataset).bpe_merges;
    if (o->model == 1) {    /* the Transformer as zero trains it */
        cfg->adam.lr = 1.0; /* scaled by the noam schedule: lr·d^-1/2·min(t·w^-1.5, t^-1/2) */
        cfg->adam.beta2 = 0.98;
        cfg->adam.eps = 1e-9;
        cfg->clip = 5; /* zero's clip_grad_norm */
        cfg->act = NB_ACT_RELU;
        o->beam = 4; /* zero's beam, with the GNMT length penalty alpha 0.6 */
        o->dim = 0;  /* the preset's */
    }
}

/* The Transformer's configuration: the preset, then the dimensions given. */
static void tf_config(nb_tf_cfg *tc, const nb_tf_preset *pr, const mt_opts *o, int V,
                      nb_norm_kind kind) {
    nb_tf_cfg_from_preset(tc, pr, V, kind);
    if (o->layers > 0) tc->enc_layers = tc->dec_layers = o->layers;
    if (o->enc_layers > 0) tc->enc_layers = o->enc_layers;
    if (o->dec_layers > 0) tc->dec_layers = o->dec_layers;
    if (o->dim > 0) tc->dim = o->dim;
    if (o->heads > 0) tc->heads = o->heads;
    if (o->ffn > 0) tc->ffn = o->ffn;
    if (o->dropout >= 0) tc->dropout = tc->attn_dropout = tc->relu_dropout = o->dropout;
}

/* The Transformer's dimensions checked with the options in place (a usage error, before any
 * data is read): the preset's, then those given. */
static int mt_finish(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err) {
    const mt_opts *o = opts_of(cfg);
    (void)given, (void)ngiven;
    if (o->model == 0) {
        if (o->dim < 1) return nb_errf(err, "--dim must be at least 1 for --model rnnsearch");
        return 0;
    }
    const nb_tf_preset *pr = nb_tf_preset_find(preset_choices[o->preset]);
    if (!pr) return nb_errf(err, "no Transformer preset '%s'", preset_choices[o->preset]);
    int d = o->dim > 0 ? o->dim : pr->dim, h = o->heads > 0 ? o->heads : pr->heads;
    if (d % 2 != 0 || d % h != 0)
        return nb_errf(err,
                       "the Transformer's width d %d must be even and a multiple of its %d heads "
                       "(--dim, --heads)",
                       d, h);
    return 0;
}

/* ---- the model: RNNSearch or the Transformer behind one set of calls ----------------------- */

typedef struct mt_model {
    int kind; /* 0 rnnsearch, 1 transformer */
    nb_rnnsearch rs;
    nb_tf *tf;
    nb_layout tl;
    float *params, *grads; /* the model's flat state (both kinds) */
    const nb_layout *layout;
    int *bs, *bt; /* transformer: batch-major copies of a batch */
    int Bmax, Txmax, Tymax, warmup, dim;
    double alpha; /* transformer beam: GNMT length penalty */
} mt_model;

/* Nematus' translation_maxlen (nematus.py's default): the most tokens of a translation, eos
 * included; zero's decode_length: a translation of a source of n tokens (its eos included) has
 * at most n + 50 tokens. */
enum { NEMATUS_MAXLEN = 200, ZERO_DECODE_LENGTH = 50 };

static void model_free(mt_model *mm) {
    if (mm->kind == 0 && mm->layout) nb_rnnsearch_free(&mm->rs);
    if (mm->kind == 1) {
        if (mm->tf) nb_tf_free(mm->tf);
        free(mm->params), free(mm->grads);
    }
    free(mm->bs), free(mm->bt);
    memset(mm, 0, sizeof *mm);
}

/* RNNSearch's configuration for model_open (and its memory estimate). */
static void rs_model_cfg(nb_rnnsearch_cfg *mc, const nb_train_cfg *cfg, int Vs, int Vt, int Bmax,
                         int Tx, int Ty, int beam) {
    const mt_opts *o = opts_of(cfg);
    nb_rnnsearch_cfg_default(mc, Vs, Vt, NB_EOS, cfg->norm.kind);
    mc->norm = cfg->norm;
    mc->E = o->dim_word;
    mc->H = o->dim;
    mc->Bmax = Bmax;
    mc->Txmax = Tx;
    mc->Tymax = Ty;
    mc->beam_max = beam > 1 ? beam : 1;
    mc->label_smoothing = o->label_smoothing;
    mc->dropout_source = o->dropout_source;
    mc->dropout_target = o->dropout_target;
    mc->init_scale = o->init_scale;
    mc->init_center = o->init_center;
}

/* The Transformer's configuration for model_open (and its memory estimate); NULL with err when
 * the preset is unknown. */
static const nb_tf_preset *tf_model_cfg(nb_tf_cfg *tc, const nb_train_cfg *cfg, int Vs, int Vt,
                                        int Tx, int Ty, nb_err *err) {
    const mt_opts *o = opts_of(cfg);
    const nb_tf_preset *pr = nb_tf_preset_find(preset_choices[o->preset]);
    if (!pr) return nb_errf(err, "no Transformer preset '%s'", preset_choices[o->preset]), NULL;
    /* one vocabulary size for both sides, the embeddings not shared: normbench's BPE keeps a
     * vocabulary per language (zero shares one joint vocabulary; docs/papers.md#mt) */
    tf_config(tc, pr, o, Vs > Vt ? Vs : Vt, cfg->norm.kind);
    tc->norm = cfg->norm;
    tc->pad = NB_PAD;
    tc->bos = -1; /* zero's shift: the decoder starts from the zero vector */
    tc->eos = NB_EOS;
    tc->share_emb = 0;
    tc->tie_out = 1;
    tc->pre_norm = o->norm_position == 1;
    tc->label_smooth = o->label_smoothing;
    tc->max_pos = (Tx > Ty ? Tx : Ty) + 64;
    return pr;
}

/* Builds the configured model for vocabularies Vs, Vt, batches of Bmax sentences, sources of Tx
 * and targets of Ty tokens (eos included), beams of `beam`, drawing its initial values from
 * init. rows: the Transformer's most rows (sentences x length) in a batch; 0: Bmax sentences of
 * the longest length. Returns 0, or -1 with err set. */
static int model_open(mt_model *mm, const nb_train_cfg *cfg, int Vs, int Vt, int Bmax, int Tx,
                      int Ty, int rows, int beam, nb_rng *init, nb_err *err) {
    const mt_opts *o = opts_of(cfg);
    memset(mm, 0, sizeof *mm);
    mm->kind = o->model;
    mm->Bmax = Bmax, mm->Txmax = Tx, mm->Tymax = Ty;
    if (o->model == 0) {
        nb_rnnsearch_cfg mc;
        rs_model_cfg(&mc, cfg, Vs, Vt, Bmax, Tx, Ty, beam);
        if (nb_rnnsearch_init(&mm->rs, &mc, init, err) != 0) return -1;
        mm->layout = &mm->rs.layout;
        mm->params = mm->rs.params;
        mm->grads = mm->rs.grads;
        return 0;
    }
    nb_tf_cfg tc;
    const nb_tf_preset *pr = tf_model_cfg(&tc, cfg, Vs, Vt, Tx, Ty, err);
    if (!pr) return -1;
    int T = Tx > Ty ? Tx : Ty;
    mm->warmup = o->warmup > 0 ? o->warmup : pr->warmup;
    mm->dim = tc.dim;
    mm->alpha = 0.6;
    memset(&mm->tl, 0, sizeof mm->tl);
    if (rows <= 0) rows = Bmax * T;
    if (!(mm->tf = nb_tf_new(&tc, &mm->tl, rows, err))) return -1;
    mm->layout = &mm->tl;
    mm->params = calloc(mm->tl.total, sizeof(float));
    mm->grads = calloc(mm->tl.total, sizeof(float));
    mm->bs = calloc((size_t)rows, sizeof(int));
    mm->bt = calloc((size_t)rows, sizeof(int));
    if (!mm->params || !mm->grads || !mm->bs || !mm->bt) return nb_errf(err, "out of memory");
    nb_tf_init_params(mm->tf, mm->params, init);
    return 0;
}

/* Batch-major (B, T) copy of a time-major (T, B) array (padding 0 stays 0). */
static void to_batch_major(int *dst, const int *src, int T, int B) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            dst[b * T + t] = src[t * B + b];
}

/* The loss of a batch (time-major src (Tx, B), tgt (Ty, B) with eos). training: dropout from
 * noise and the backward pass (gradients ACCUMULATED); else evaluation, adding the per-token
 * negative log-likelihood and token count to *nll, *ntok (and, RNNSearch, Table 5's sums). */
static double model_loss(mt_model *mm, const int *src, const int *srclen, int Tx, const int *tgt,
                         const int *tgtlen, int Ty, int B, int training, nb_rng *noise, double *nll,
                         long *ntok, nb_rnnsearch_stats *st) {
    double loss;
    if (mm->kind == 0) {
        loss = nb_rnnsearch_forward(&mm->rs, (int *)src, (int *)srclen, Tx, (int *)tgt,
                                    (int *)tgtlen, Ty, B, training, noise, st);
        if (training) nb_rnnsearch_backward(&mm->rs);
        if (nll) *nll += mm->rs.nll;
        if (ntok) *ntok += mm->rs.ntok;
        return loss;
    }
    to_batch_major(mm->bs, src, Tx, B);
    to_batch_major(mm->bt, tgt, Ty, B);
    nb_tf_stats ts;
    uint64_t seed = training && noise ? nb_rng_u64(noise) : 0;
    loss =
        nb_tf_forward(mm->tf, mm->params, mm->bs, mm->bt, B, Tx, Ty, training, training, seed, &ts);
    if (training) nb_tf_backward(mm->tf, mm->grads, mm->params);
    if (nll) *nll += ts.nll_sum;
    if (ntok) *ntok += ts.ntok;
    return loss;
}

/* Translates B sources (time-major (Tx, B)): greedy when K <= 1, else beam search of K (the
 * model's length normalization); out (B, maxlen) without eos, out_len (B). */
static int model_decode(mt_model *mm, const int *src, const int *srclen, int Tx, int B, int K,
                        int maxlen, int *out, int *out_len, nb_err *err) {
    /* RNNSearch's beam rules: set by model_rules (the run's --beam-rules, or the kept model's) */
    if (mm->kind == 0) {
        if (K <= 1) {
            nb_rnnsearch_greedy(&mm->rs, (int *)src, (int *)srclen, Tx, B, maxlen, out, out_len);
            return 0;
        }
        return nb_rnnsearch_beam(&mm->rs, (int *)src, (int *)srclen, Tx, B, K, maxlen, out, out_len,
                                 NULL, err);
    }
    to_batch_major(mm->bs, src, Tx, B);
    return nb_tf_translate(mm->tf, mm->params, mm->bs, B, Tx, K <= 1 ? 1 : K,
                           K <= 1 ? 0 : mm->alpha, ZERO_DECODE_LENGTH, maxlen, out, out_len, NULL,
                           err);
}

/* RNNSearch's beam search rules (nn/rnnsearch.h): 0 Nematus v0.3's, 1 the simple ones. */
static void model_rules(mt_model *mm, int beam_simple) {
    if (mm->kind == 0) mm->rs.cfg.beam_simple = beam_simple;
}

/* The noam schedule of the Transformer (zero): lr·d^-1/2·min(t·w^-1.5, t^-1/2). */
static void noam(double base, int dim, int warmup, int64_t t, nb_adam_cfg *adam) {
    double tt = (double)t, w = warmup > 0 ? warmup : 1;
    double f = fmin(tt * pow(w, -1.5), 1.0 / sqrt(tt));
    adam->lr = base * f / sqrt((double)dim);
}

/* ---- the run ------------------------------------------------------------------------------- */

typedef struct mt_run {
    const nb_train_cfg *cfg;
    const mt_opts *o;
    nb_mt_data d;
    int have_data, have_model;
    mt_model m;
    float *adam_m, *adam_v;
    nb_mt_batcher bt;
    int have_bt;
    int Bmax, Txmax, Tymax;
    int *idx, *src, *srclen, *tgt, *tgtlen, *out, *outlen;
    double tokens; /* target tokens (eos included) trained on in this process */
    char **hyp;    /* translations, room for the largest split */
    int nhyp;
    int *val_idx, nval; /* the validation pairs val_xent is over: both sides within --max-len */
    int rows;           /* the Transformer's most rows in a batch (0: Bmax x the longest) */
    /* the settings in force (the options, or on resuming a run an earlier normbench started,
     * that normbench's: run_settings) */
    int src_eos, beam_simple, cap_longest, order, legacy;
    unsigned char data_tag[8 + 32]; /* DATA_TAG and the data's SHA-256: the checkpoints' last
                                     * blob, compared when the run resumes */
} mt_run;

/* A run's checkpoints end with its data's tag: DATA_TAG for runs started with --src-eos,
 * --beam-rules, --decode-cap and --batch-order; DATA_TAG_V1 for those an earlier normbench
 * started, which resume with that normbench's behaviour (run_settings). */
#define DATA_TAG "nbmtdat2"
#define DATA_TAG_V1 "nbmtdat1"

/* The settings in force: the options; legacy (a run an earlier normbench started, resumed): no
 * source eos, the simple beam rules, the longest target as the cap, the target-length order. */
static void run_settings(mt_run *r, int legacy) {
    r->legacy = legacy;
    r->src_eos = legacy ? 0 : r->o->src_eos;
    r->beam_simple = legacy ? 1 : r->o->beam_rules == 1;
    r->cap_longest = legacy ? 1 : r->o->decode_cap == 1;
    r->order = legacy ? NB_MT_ORDER_TARGET : r->o->batch_order;
}

/* The data's tag (DATA_TAG, or DATA_TAG_V1 for a legacy run, then d->data_hash in bytes). */
static void data_tag(const nb_mt_data *d, int legacy, unsigned char tag[40]) {
    memcpy(tag, legacy ? DATA_TAG_V1 : DATA_TAG, 8);
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        sscanf(d->data_hash + 2 * i, "%2x", &v);
        tag[8 + i] = (unsigned char)v;
    }
}

/* A resumed run must read what it started with: the tag in its checkpoint against this data's.
 * A checkpoint written before runs tagged their data carries none: the run resumes unchecked
 * (*tagged 0) and says so. */
static int check_resume_data(const mt_run *r, const char *ckpt, int *tagged, nb_err *err) {
    unsigned char have[sizeof r->data_tag];
    int k = nb_ckpt_read_last_blob(ckpt, have, sizeof have, err);
    if (k < 0) return -1;
    *tagged = k == 1 && (memcmp(have, DATA_TAG, 8) == 0 || memcmp(have, DATA_TAG_V1, 8) == 0);
    if (!*tagged || memcmp(have + 8, r->data_tag + 8, sizeof have - 8) == 0) return 0;
    nb_errf(err,
            "the data differs from what this run started with (%s: its training text, BPE codes, "
            "vocabularies or evaluation sets changed since its checkpoint '%s' was written)",
            r->d.source, ckpt);
    return nb_hintf(err, "restore the data the run started on, or start a new run: a resumed run "
                         "must not train on other data under the same id");
}

/* Batch of split s's sentences idx[0..n): source (Tx, n) and target (Ty, n) time-major, the
 * target with NB_EOS appended, the source too with --src-eos on (its pieces cut to Txmax - 1);
 * padding 0. */
static void fill_batch(mt_run *r, const nb_mt_split *s, const int *idx, int n, int *Tx, int *Ty) {
    const int se = r->src_eos;
    int tx = 1, ty = 1;
    for (int b = 0; b < n; b++) {
        int ls = nb_mt_src_len(s, idx[b]) + se, lt = nb_mt_tgt_len(s, idx[b]) + 1;
        if (ls < 1) ls = 1; /* an empty source line (validation, test) reads as one <unk> */
        if (ls > tx) tx = ls;
        if (lt > ty) ty = lt;
    }
    if (tx > r->Txmax) tx = r->Txmax;
    if (ty > r->Tymax) ty = r->Tymax;
    memset(r->src, 0, sizeof(int) * (size_t)tx * n);
    memset(r->tgt, 0, sizeof(int) * (size_t)ty * n);
    for (int b = 0; b < n; b++) {
        const int *si = s->src + s->src_start[idx[b]], *ti = s->tgt + s->tgt_start[idx[b]];
        int ls = nb_mt_src_len(s, idx[b]), lt = nb_mt_tgt_len(s, idx[b]);
        if (ls > tx - se) ls = tx - se;
        if (lt > ty - 1) lt = ty - 1;
        for (int t = 0; t < ls; t++)
            r->src[t * n + b] = si[t];
        if (se)
            r->src[ls++ * n + b] = NB_EOS; /* Nematus' prepare_data, zero's to_id(append_eos) */
        else if (ls == 0)
            r->src[b] = NB_UNK, ls = 1;
        r->srclen[b] = ls;
        for (int t = 0; t < lt; t++)
            r->tgt[t * n + b] = ti[t];
        r->tgt[lt * n + b] = NB_EOS;
        r->tgtlen[b] = lt + 1;
    }
    *Tx = tx;
    *Ty = ty;
}

static void mt_epoch_begin(void *self, int epoch, nb_rng *data) {
    mt_run *r = self;
    /* a fresh shuffle every epoch from the data stream: a resumed run (which starts at an epoch
     * boundary with the stream restored) draws the same order */
    if (r->have_bt) nb_mt_batcher_free(&r->bt);
    nb_err err;
    r->have_bt =
        (r->o->batch_tokens > 0 ? nb_mt_batcher_init_tokens(&r->bt, &r->d.train, r->o->batch_tokens,
                                                            r->o->maxibatch, r->order, data, &err)
                                : nb_mt_batcher_init(&r->bt, &r->d.train, r->cfg->batch,
                                                     r->o->maxibatch, r->order, data, &err)) == 0;
}

static void mt_schedule(void *self, int64_t t, int64_t planned, nb_adam_cfg *adam) {
    mt_run *r = self;
    if (r->m.kind == 1) noam(adam->lr, r->m.dim, r->m.warmup, t, adam);
}

static double mt_step(void *self, int64_t bi, nb_rng *noise) {
    mt_run *r = self;
    if (!r->have_bt) return NAN;
    int n = nb_mt_batcher_next(&r->bt, r->idx);
    if (n <= 0) return NAN;
    int Tx, Ty;
    fill_batch(r, &r->d.train, r->idx, n, &Tx, &Ty);
    for (int k = 0; k < n; k++)
        r->tokens += r->tgtlen[k];
    return model_loss(&r->m, r->src, r->srclen, Tx, r->tgt, r->tgtlen, Ty, n, 1, noise, NULL, NULL,
                      NULL);
}

/* What model_loss draws from the noise stream in training, drawn without a forward: a process
 * with no sentence of a batch keeps its stream in step with the others. */
static void skip_noise(const mt_model *mm, nb_rng *noise) {
    if (mm->kind == 1 || mm->rs.cfg.dropout_source > 0 || mm->rs.cfg.dropout_target > 0)
        (void)nb_rng_u64(noise);
}

/* The shard of a data-parallel run: sentences row0.. of a batch of n (their dropout streams, and
 * the loss divided by n); row0 0 and n 0 restore the single-process model. */
static void set_shard(mt_model *mm, int row0, int n) {
    if (mm->kind == 0) {
        mm->rs.row0 = row0;
        mm->rs.grad_rows = n;
    } else {
        nb_tf_set_shard(mm->tf, row0, n);
    }
}

/* Data-parallel: the batcher draws the same batch of n sentences on every process (the data
 * stream is the same everywhere), and this process trains on sentences [n*rank/size,
 * n*(rank+1)/size) of it, padded to their own longest, with their own dropout streams and the
 * loss divided by n; it returns its share of the batch's loss (the shares add up to it). The
 * loop's lo and hi (a split of --batch) are not used: a batch of tokens holds a varying number
 * of sentences. */
static double mt_step_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise) {
    mt_run *r = self;
    const nb_dist *D = r->cfg->dist;
    (void)bi, (void)lo, (void)hi;
    if (!r->have_bt) return NAN;
    int n = nb_mt_batcher_next(&r->bt, r->idx);
    if (n <= 0) return NAN;
    /* tokens_per_s: the whole batch's target tokens (every process counts the same) */
    for (int k = 0; k < n; k++) {
        int lt = nb_mt_tgt_len(&r->d.train, r->idx[k]) + 1;
        r->tokens += lt < r->Tymax ? lt : r->Tymax;
    }
    const int a = (int)((int64_t)n * D->rank / D->size),
              b = (int)((int64_t)n * (D->rank + 1) / D->size);
    if (b == a) {
        skip_noise(&r->m, noise);
        return 0;
    }
    int Tx, Ty;
    fill_batch(r, &r->d.train, r->idx + a, b - a, &Tx, &Ty);
    set_shard(&r->m, a, n);
    double loss = model_loss(&r->m, r->src, r->srclen, Tx, r->tgt, r->tgtlen, Ty, b - a, 1, noise,
                             NULL, NULL, NULL);
    set_shard(&r->m, 0, 0);
    return loss;
}

static double mt_tokens(void *self) {
    return ((mt_run *)self)->tokens;
}

/* Translates sentences first..first+n of split s (greedy when K == 0, else beam K) into
 * r->hyp[first..] (detokenized, newly allocated). */
/* The processes of a data-parallel run, or NULL in one process. */
static const nb_dist *dist_of(const mt_run *r) {
    return r->cfg->dist && r->cfg->dist->size > 1 ? r->cfg->dist : NULL;
}

/* Data-parallel evaluation: chunk k (of --eval-batch sentences, the chunks one process makes)
 * is this process's to evaluate. */
static int my_chunk(const mt_run *r, int k) {
    const nb_dist *D = dist_of(r);
    return !D || k % D->size == D->rank;
}

/* ---- the decoding limits: test_bleu's rule, which translate follows ------------------------ */

/* What a model decodes and how: sources of at most src_max pieces (the source's eos included
 * when src_eos), each into at most out_max pieces, by RNNSearch's beam rules beam_simple.
 * decode_limits is the one rule, test_bleu's and val_bleu's: the longest source of every split
 * (run_load's Txmax; a longer validation or test source is cut to --max-len), and the cap of
 * --decode-cap: authors, Nematus' 200 tokens for RNNSearch and for the Transformer zero's source
 * length + 50 (nb_tf_translate stops each sentence there; out_max, the longest source's, sizes
 * the buffers), which read no reference; longest, the longest target (eos included) of every
 * split, test references included (the cap before, kept to compare with earlier runs). A
 * finished run keeps them with its model (save_model), translate decodes by them and refuses a
 * longer source line. */
typedef struct mt_limits {
    int src_max, out_max, src_eos, beam_simple;
    int tgt_max; /* the model's longest target (eos included): what it was built for (BatchNorm's
                  * running statistics are per position) */
} mt_limits;

static mt_limits decode_limits(const mt_run *r) {
    const int cap = r->cap_longest     ? r->Tymax
                    : r->o->model == 0 ? NEMATUS_MAXLEN
                                       : r->Txmax + ZERO_DECODE_LENGTH;
    return (mt_limits){r->Txmax, cap, r->src_eos, r->beam_simple, r->Tymax};
}

/* The most pieces one translation of a batch may have: model_decode's maxlen. */
static int decode_cap(const mt_limits *l) {
    return l->out_max;
}

static int translate_split(mt_run *r, const nb_mt_split *s, int n, int K, nb_err *err) {
    const int E = r->cfg->eval_batch < r->Bmax ? r->cfg->eval_batch : r->Bmax;
    const mt_limits lim = decode_limits(r);
    for (int i0 = 0, chunk = 0; i0 < n; i0 += E) {
        if (!my_chunk(r, chunk++)) continue;
        int b = n - i0 < E ? n - i0 : E;
        for (int k = 0; k < b; k++)
            r->idx[k] = i0 + k;
        int Tx, Ty;
        fill_batch(r, s, r->idx, b, &Tx, &Ty);
        int maxlen = decode_cap(&lim);
        if (model_decode(&r->m, r->src, r->srclen, Tx, b, K, maxlen, r->out, r->outlen, err) != 0)
            return -1;
        for (int k = 0; k < b; k++) {
            free(r->hyp[i0 + k]);
            r->hyp[i0 + k] =
                nb_vocab_decode(r->d.tgt_vocab, r->out + (size_t)k * maxlen, r->outlen[k]);
            if (!r->hyp[i0 + k]) return nb_errf(err, "out of memory for translations");
        }
    }
    return 0;
}

static int bleu_of(mt_run *r, const nb_mt_split *s, int n, double *score, nb_err *err) {
    nb_bleu b;
    const nb_dist *D = dist_of(r);
    if (!D) {
        const char *const *refs[1] = {(const char *const *)s->tgt_text};
        if (nb_bleu_corpus((const char *const *)r->hyp, n, refs, 1, NULL, &b, err) != 0) return -1;
        *score = b.score;
        return 0;
    }
    /* data-parallel: the sufficient statistics of this process's chunks (translate_split's),
     * summed over the processes; BLEU from the sums is the corpus BLEU of all the chunks */
    const int E = r->cfg->eval_batch < r->Bmax ? r->cfg->eval_batch : r->Bmax;
    double st[2 * NB_BLEU_MAX_ORDER + 2] = {0};
    const nb_bleu_opts o = nb_bleu_defaults();
    for (int i0 = 0, chunk = 0; i0 < n; i0 += E) {
        if (!my_chunk(r, chunk++)) continue;
        int c = n - i0 < E ? n - i0 : E;
        const char *const *refs[1] = {(const char *const *)s->tgt_text + i0};
        if (nb_bleu_corpus((const char *const *)r->hyp + i0, c, refs, 1, &o, &b, err) != 0)
            return -1;
        for (int k = 0; k < o.max_order; k++) {
            st[k] += b.correct[k];
            st[NB_BLEU_MAX_ORDER + k] += b.total[k];
        }
        st[2 * NB_BLEU_MAX_ORDER] += (double)b.sys_len;
        st[2 * NB_BLEU_MAX_ORDER + 1] += (double)b.ref_len;
    }
    D->sum_d(D->ctx, st, sizeof st / sizeof st[0]);
    b = nb_bleu_compute(st, st + NB_BLEU_MAX_ORDER, (long)st[2 * NB_BLEU_MAX_ORDER],
                        (long)st[2 * NB_BLEU_MAX_ORDER + 1], &o);
    *score = b.score;
    return 0;
}

static int mt_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    mt_run *r = self;
    int k = 0;
    if (!final) {
        /* validation cross-entropy per target token and Table 5's statistics */
        const nb_mt_split *v = &r->d.val;
        nb_rnnsearch_stats st;
        memset(&st, 0, sizeof st);
        double nll = 0;
        long ntok = 0;
        const int E = r->cfg->eval_batch < r->Bmax ? r->cfg->eval_batch : r->Bmax;
        /* the pairs within --max-len, as Nematus' validation reads them (its maxlen filter) */
        for (int i0 = 0, chunk = 0; i0 < r->nval; i0 += E) {
            if (!my_chunk(r, chunk++)) continue;
            int b = r->nval - i0 < E ? r->nval - i0 : E;
            for (int j = 0; j < b; j++)
                r->idx[j] = r->val_idx[i0 + j];
            int Tx, Ty;
            fill_batch(r, v, r->idx, b, &Tx, &Ty);
            model_loss(&r->m, r->src, r->srclen, Tx, r->tgt, r->tgtlen, Ty, b, 0, NULL, &nll, &ntok,
                       &st);
        }
        const nb_dist *D = dist_of(r);
        if (D) { /* every process's chunks: the sums over the processes */
            double sums[17] = {nll, (double)ntok};
            memcpy(sums + 2, st.sum, sizeof st.sum);
            memcpy(sums + 7, st.sumsq, sizeof st.sumsq);
            memcpy(sums + 12, st.n, sizeof st.n);
            D->sum_d(D->ctx, sums, 17);
            nll = sums[0];
            ntok = (long)sums[1];
            memcpy(st.sum, sums + 2, sizeof st.sum);
            memcpy(st.sumsq, sums + 7, sizeof st.sumsq);
            memcpy(st.n, sums + 12, sizeof st.n);
        }
        out[k++] = (nb_metric){"val_xent", 0, 0, ntok ? nll / (double)ntok : NAN};
        int nv = r->o->val_bleu_max > 0 && r->o->val_bleu_max < v->n ? r->o->val_bleu_max : v->n;
        double bleu;
        if (translate_split(r, v, nv, 0, err) != 0 || bleu_of(r, v, nv, &bleu, err) != 0) return -1;
        out[k++] = (nb_metric){"val_bleu", 0, 0, bleu};
        static const char *const mean_names[5] = {"val_preact_mean_1", "val_preact_mean_2",
                                                  "val_preact_mean_3", "val_preact_mean_4",
                                                  "val_preact_mean_all"};
        static const char *const std_names[5] = {"val_preact_std_1", "val_preact_std_2",
                                                 "val_preact_std_3", "val_preact_std_4",
                                                 "val_preact_std_all"};
        for (int p = 0; p < 5 && k + 2 <= max; p++) {
            if (st.n[p] <= 0) continue;
            double mean = st.sum[p] / st.n[p], var = st.sumsq[p] / st.n[p] - mean * mean;
            out[k++] = (nb_metric){mean_names[p], 0, 0, mean};
            out[k++] = (nb_metric){std_names[p], 0, 0, sqrt(var > 0 ? var : 0)};
        }
        return k;
    }
    /* the test sets, by beam search with the kept parameters */
    for (int t = 0; t < r->d.ntest && k < max; t++) {
        const nb_mt_split *s = &r->d.test[t];
        int nt = r->o->test_max > 0 && r->o->test_max < s->n ? r->o->test_max : s->n;
        double bleu;
        if (translate_split(r, s, nt, r->o->beam, err) != 0 || bleu_of(r, s, nt, &bleu, err))
            return -1;
        /* test_bleu: the first test set (Multi30k's test 2016); the others by their name */
        static char names[NB_MT_MAX_TEST][48];
        if (t == 0) {
            snprintf(names[t], sizeof names[t], "test_bleu");
        } else {
            const char *nm = r->d.test_name[t];
            snprintf(names[t], sizeof names[t], "test_%s_bleu",
                     strncmp(nm, "test", 4) == 0 && nm[4] ? nm + 4 : nm);
        }
        out[k++] = (nb_metric){names[t], 0, 0, bleu};
    }
    return k;
}

/* ---- the model kept for translate ---------------------------------------------------------- */

/* The model a finished run keeps (sink->model_dir): codes, src.vocab and tgt.vocab, then params
 * last, which binds them. params (format 3): the magic line, a kept_head (what the model belongs
 * to: the run and store, as checkpoints record it; how it decodes: mt_limits; FNV-1a hashes of
 * the three other files' bytes; the number of parameters), the parameters (float), and an
 * FNV-1a hash of everything before it. Format 2 (the head without src_eos and beam_simple, kept
 * before the source eos and Nematus' beam rules) is read as it was made: no source eos, the
 * simple beam rules and its recorded cap, so that it translates as its run's test_bleu did.
 * Format 1 (no identity: the magic, "N HASH\n", the parameters) is refused, saying how to get a
 * new one. */
#define MODEL_MAGIC "normbench-mt-params 3\n"
#define MODEL_MAGIC_V2 "normbench-mt-params 2\n"
#define MODEL_MAGIC_V1 "normbench-mt-params 1\n"
#define FNV_BASIS 1469598103934665603ULL

typedef struct kept_head {
    nb_ckpt_ident id;
    int32_t src_max, out_max; /* mt_limits */
    uint64_t file_hash[3];    /* codes, src.vocab, tgt.vocab */
    uint64_t nparams;
    int32_t src_eos, beam_simple, tgt_max, pad; /* mt_limits; format 3 */
} kept_head;
#define KEPT_HEAD_V2 (sizeof(nb_ckpt_ident) + 8 + 3 * 8 + 8) /* format 2's head: up to src_eos */
_Static_assert(sizeof(kept_head) == KEPT_HEAD_V2 + 16 &&
                   offsetof(kept_head, src_eos) == KEPT_HEAD_V2,
               "kept_head: no padding");

/* Reads the magic and the head of a model file at its start into *kh (format 2's completed with
 * its settings); returns the head's bytes in the file and sets *magic, or 0 (no model of format
 * 2 or 3; *magic "" or MODEL_MAGIC_V1). */
static size_t read_head(FILE *f, kept_head *kh, const char **magic) {
    char m[sizeof MODEL_MAGIC];
    *magic = "";
    if (fread(m, 1, sizeof MODEL_MAGIC - 1, f) != sizeof MODEL_MAGIC - 1) return 0;
    m[sizeof MODEL_MAGIC - 1] = '\0';
    size_t n = strcmp(m, MODEL_MAGIC) == 0      ? sizeof *kh
               : strcmp(m, MODEL_MAGIC_V2) == 0 ? KEPT_HEAD_V2
                                                : 0;
    *magic = n == sizeof *kh ? MODEL_MAGIC : n ? MODEL_MAGIC_V2 : "";
    if (strcmp(m, MODEL_MAGIC_V1) == 0) *magic = MODEL_MAGIC_V1;
    memset(kh, 0, sizeof *kh);
    if (!n || fread(kh, n, 1, f) != 1) return 0;
    if (n == KEPT_HEAD_V2) kh->src_eos = 0, kh->beam_simple = 1, kh->tgt_max = kh->out_max;
    return n;
}

static const char *const kept_files[3] = {"codes", "src.vocab", "tgt.vocab"};

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* The bytes of a regular file of at most max bytes (malloc'ed, NUL-terminated) into *buf, *n. */
static int read_whole(const char *path, size_t max, char **buf, size_t *n, nb_err *err) {
    if (nb_read_file(path, max, NB_READ_REGULAR | NB_READ_NOFOLLOW, buf, n, err) == 0) return 0;
    int e = errno;
    if (e == EFBIG || e == EINVAL || e == EISDIR) {
        nb_errf(err, "the model's '%s' is not a regular file of at most %zu bytes", path, max);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    if (e == ENOMEM) return nb_errf(err, "out of memory reading '%s'", path);
    if (strncmp(err->msg, "cannot open", 11) == 0) {
        nb_errf(err, "cannot open the model's '%s': %s", path, strerror(e));
        return nb_hintf(err, "a run keeps its model when it finishes; is the run finished?");
    }
    return nb_errf(err, "cannot read the model's '%s'", path);
}

/* The largest of the model's codes and vocabularies, read whole. */
#define KEPT_FILE_MAX ((size_t)256 << 20)

static int save_model(void *self, const char *dir, const nb_ckpt_ident *id, nb_err *err) {
    mt_run *r = self;
    char path[4200];
    kept_head kh;
    memset(&kh, 0, sizeof kh);
    if (id) kh.id = *id;
    const mt_limits lim = decode_limits(r);
    kh.src_max = lim.src_max;
    kh.out_max = lim.out_max;
    kh.src_eos = lim.src_eos;
    kh.beam_simple = lim.beam_simple;
    kh.tgt_max = lim.tgt_max;
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, kept_files[i]);
        int rc = i == 0   ? nb_bpe_write(r->d.bpe, path, err)
                 : i == 1 ? nb_vocab_write(r->d.src_vocab, path, err)
                          : nb_vocab_write(r->d.tgt_vocab, path, err);
        char *buf;
        size_t n;
        if (rc != 0 || read_whole(path, KEPT_FILE_MAX, &buf, &n, err) != 0) return -1;
        kh.file_hash[i] = fnv1a(buf, n, FNV_BASIS);
        free(buf);
    }
    size_t n = r->m.layout->total;
    kh.nparams = n;
    uint64_t h = fnv1a(MODEL_MAGIC, sizeof MODEL_MAGIC - 1, FNV_BASIS);
    h = fnv1a(&kh, sizeof kh, h);
    h = fnv1a(r->m.params, sizeof(float) * n, h);
    /* the magic and the head, the parameters, the hash */
    char head[sizeof MODEL_MAGIC - 1 + sizeof kh];
    memcpy(head, MODEL_MAGIC, sizeof MODEL_MAGIC - 1);
    memcpy(head + sizeof MODEL_MAGIC - 1, &kh, sizeof kh);
    snprintf(path, sizeof path, "%s/params", dir);
    const nb_piece pieces[3] = {
        {head, sizeof head}, {r->m.params, sizeof(float) * n}, {&h, sizeof h}};
    return nb_write_atomicv(path, pieces, 3, err);
}

/* Reads the head of the model kept in dir (params) and checks it: a model of this format, of run
 * want (NULL: not checked), and the codes and vocabularies it was kept with (bufs[i], n[i]: the
 * bytes read of kept_files[i]). The parameters are read later (load_params). */
static int load_head(const char *dir, const nb_ckpt_ident *want, char *const *bufs, const size_t *n,
                     kept_head *kh, nb_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/params", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        nb_errf(err, "cannot open the model '%s': %s", path, strerror(errno));
        return nb_hintf(err, "a run keeps its model when it finishes; is the run finished?");
    }
    const char *magic;
    int ok = read_head(f, kh, &magic) > 0;
    if (strcmp(magic, MODEL_MAGIC_V1) == 0) {
        fclose(f);
        nb_errf(err,
                "the model '%s' was kept by an older normbench (format 1, which does not record "
                "the run it belongs to): it cannot be checked",
                path);
        return nb_hintf(err, "train the run again (`normbench show RUN` gives its command line) "
                             "and translate with the new run, which keeps a model of format 2");
    }
    fclose(f);
    if (!ok) {
        nb_errf(err, "the model '%s' is not a normbench translation model", path);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    if (want && nb_ckpt_ident_check(path, &kh->id, want, err) != 0) {
        /* nb_ckpt_ident_check speaks of a checkpoint */
        char why[sizeof err->msg];
        const char *c = strstr(err->msg, "belongs to another run: ");
        memcpy(why, c ? c + strlen("belongs to another run: ") : err->msg,
               strlen(c ? c + strlen("belongs to another run: ") : err->msg) + 1);
        nb_errf(err, "the model '%s' belongs to another run: %s", path, why);
        return nb_hintf(err, "it was copied from another store or run: translate with the run "
                             "that made it, or train this run again to keep its own model");
    }
    for (int i = 0; i < 3; i++)
        if (fnv1a(bufs[i], n[i], FNV_BASIS) != kh->file_hash[i]) {
            nb_errf(err, "'%s/%s' is not the file the model '%s' was kept with", dir, kept_files[i],
                    path);
            return nb_hintf(err, "it was changed or copied from another run: train the run "
                                 "again to keep a new model");
        }
    if (kh->src_eos < 0 || kh->src_eos > 1 || kh->beam_simple < 0 || kh->beam_simple > 1 ||
        kh->src_max < 1 + kh->src_eos || kh->out_max < 1 || kh->src_max > 1 << 20 ||
        kh->out_max > 1 << 20 || kh->tgt_max < 1 || kh->tgt_max > 1 << 20) {
        nb_errf(err, "the model '%s' is damaged (decoding limits %d, %d, %d, %d)", path,
                kh->src_max, kh->out_max, kh->src_eos, kh->beam_simple);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    return 0;
}

/* Reads the parameters of the model kept in dir into m (built to the run's configuration),
 * checking the file's hash. */
static int load_params(mt_model *m, const char *dir, nb_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/params", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open the model '%s': %s", path, strerror(errno));
    const char *magic;
    kept_head kh;
    uint64_t stored = 0;
    size_t n = m->layout->total, hn = read_head(f, &kh, &magic);
    int ok = hn > 0 && kh.nparams == n && fread(m->params, sizeof(float), n, f) == n &&
             fread(&stored, sizeof stored, 1, f) == 1 && fgetc(f) == EOF;
    fclose(f);
    uint64_t h = fnv1a(magic, strlen(magic), FNV_BASIS);
    h = fnv1a(&kh, hn, h);
    if (!ok || fnv1a(m->params, sizeof(float) * n, h) != stored) {
        nb_errf(err, "the model '%s' is damaged or does not fit this run's configuration", path);
        return nb_hintf(err, "train the run again to make a new model");
    }
    return 0;
}

/* ---- training ------------------------------------------------------------------------------ */

static void run_free(mt_run *r) {
    if (r->have_model) model_free(&r->m);
    if (r->have_bt) nb_mt_batcher_free(&r->bt);
    for (int i = 0; r->hyp && i < r->nhyp; i++)
        free(r->hyp[i]);
    free(r->hyp);
    if (r->have_data) nb_mt_free(&r->d);
    free(r->adam_m), free(r->adam_v), free(r->idx), free(r->src), free(r->srclen);
    free(r->tgt), free(r->tgtlen), free(r->out), free(r->outlen), free(r->val_idx);
}

/* Longest source and target (with eos; the source's with src_eos) over every split, each side
 * cut at max_len pieces before its eos:
 * training pairs over it were dropped; a validation or test source over it is cut to its first
 * max_len pieces for translation, a target over it enters no loss (val_xent leaves such
 * pairs out, translation reads only sources) — so no line of the data sizes the model beyond
 * --max-len. */
static void longest(const nb_mt_data *d, int max_len, int src_eos, int *tx, int *ty) {
    const nb_mt_split *s[2 + NB_MT_MAX_TEST] = {&d->train, &d->val};
    int ns = 2;
    for (int t = 0; t < d->ntest; t++)
        s[ns++] = &d->test[t];
    *tx = *ty = 1;
    for (int i = 0; i < ns; i++) {
        if (s[i]->max_src_len > *tx) *tx = s[i]->max_src_len;
        if (s[i]->max_tgt_len + 1 > *ty) *ty = s[i]->max_tgt_len + 1;
    }
    if (*tx > max_len) *tx = max_len;
    if (*ty > max_len + 1) *ty = max_len + 1;
    *tx += src_eos; /* the source's eos (--src-eos on) */
}

/* Loads the data and sizes what the model must hold: the longest lengths by the rule above,
 * the largest batch (the training batch, at most the training pairs; the evaluation batch, at
 * most the largest evaluated split), and the Transformer's rows. Allocates nothing of the
 * model's size. */
static int run_load(mt_run *r, const nb_train_cfg *cfg, int legacy, nb_err *err) {
    r->cfg = cfg;
    r->o = opts_of(cfg);
    run_settings(r, legacy);
    nb_mt_opts mo = nb_mt_defaults(cfg->dataset);
    mo.bpe_merges = r->o->bpe_merges;
    mo.max_len = r->o->max_len;
    mo.subset = cfg->subset;
    if (nb_mt_load(cfg->dataset, cfg->data_dir, &mo, &r->d, err) != 0) return -1;
    r->have_data = 1;
    if (r->d.train.n < 1)
        return nb_errf(err, "'%s' has no training pair to learn from", cfg->dataset);
    longest(&r->d, r->o->max_len, r->src_eos, &r->Txmax, &r->Tymax);
    const nb_mt_split *v = &r->d.val;
    r->val_idx = malloc(sizeof(int) * (size_t)(v->n > 0 ? v->n : 1));
    if (!r->val_idx) return nb_errf(err, "out of memory");
    for (int i = 0; i < v->n; i++)
        if (nb_mt_src_len(v, i) <= r->o->max_len && nb_mt_tgt_len(v, i) <= r->o->max_len)
            r->val_idx[r->nval++] = i;
    int ne = v->n;
    for (int t = 0; t < r->d.ntest; t++)
        if (r->d.test[t].n > ne) ne = r->d.test[t].n;
    const int E = cfg->eval_batch < ne ? cfg->eval_batch : ne > 0 ? ne : 1;
    const int n = r->d.train.n;
    r->Bmax = cfg->batch < n ? cfg->batch : n;
    if (E > r->Bmax) r->Bmax = E;
    r->rows = 0; /* the Transformer's rows: Bmax sentences of the longest length */
    if (r->o->batch_tokens > 0) {
        /* token batches: up to batch_tokens sentences (at most the training pairs), batch_tokens
         * padded rows (a longer pair alone, at most every pair at the longest length), and the
         * evaluation's batches */
        const long T = r->Txmax > r->Tymax ? r->Txmax : r->Tymax;
        const int bt = r->o->batch_tokens;
        r->Bmax = bt < n ? bt : n;
        if (E > r->Bmax) r->Bmax = E;
        long rows = bt < (long)n * T ? bt : (long)n * T;
        if (rows < T) rows = T;
        if ((long)E * T > rows) rows = (long)E * T;
        r->rows = (int)rows;
    }
    return 0;
}

static void human_bytes(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, n, "%.0f MiB", b / (1024.0 * 1024));
}

/* Refuses a run whose model, optimizer state, batches and decoding cannot fit in memory,
 * before any of it is allocated: the models' own estimates (nn/rnnsearch.h, nn/transformer.h)
 * at the sizes run_load chose, compared with what this process can still have (nn/mem.h). The
 * message gives the total and its parts; the hint, the options that shrink the largest part. */
static int check_memory(const mt_run *r, nb_err *err) {
    const nb_train_cfg *cfg = r->cfg;
    const mt_opts *o = r->o;
    const int Vs = nb_vocab_size(r->d.src_vocab), Vt = nb_vocab_size(r->d.tgt_vocab);
    const int E = cfg->eval_batch < r->Bmax ? cfg->eval_batch : r->Bmax;
    const int beam = o->beam > 1 ? o->beam : 1;
    double P = 0, model = 0, decode = 0;
    if (o->model == 0) {
        nb_rnnsearch_cfg mc;
        rs_model_cfg(&mc, cfg, Vs, Vt, r->Bmax, r->Txmax, r->Tymax, o->beam);
        model = nb_rnnsearch_mem_bytes(&mc, &P);
        /* beam search's histories and costs */
        decode =
            (double)E * beam * (2.0 * decode_limits(r).out_max * sizeof(int) + 4 * sizeof(double));
    } else {
        nb_tf_cfg tc;
        if (!tf_model_cfg(&tc, cfg, Vs, Vt, r->Txmax, r->Tymax, err)) return -1;
        const int T = r->Txmax > r->Tymax ? r->Txmax : r->Tymax;
        const double rows = r->rows > 0 ? r->rows : (double)r->Bmax * T;
        if (rows > 2147483647.0) {
            model = INFINITY;
        } else {
            model = nb_tf_mem_bytes(&tc, (int)rows, cfg->threads, &P);
            model += 2 * P * sizeof(float) + 2 * rows * sizeof(int); /* params, grads; bs, bt */
            decode = nb_tf_decode_mem_bytes(&tc, E, r->Txmax, beam, cfg->threads);
        }
    }
    /* Adam's two moments and the loop's copy of the best parameters */
    const double state = 3 * P * sizeof(float);
    const double bufs =
        (double)r->Bmax * sizeof(int) * (3.0 + r->Txmax + r->Tymax + decode_limits(r).out_max);
    const double need = model + state + decode + bufs;
    const char *which = NULL;
    const double room = nb_mem_room(&which);
    if (need <= room) return 0;
    char tn[32], rn[32], pn[32], mn[32], dn[32];
    human_bytes(tn, sizeof tn, need);
    human_bytes(rn, sizeof rn, room);
    human_bytes(pn, sizeof pn, P * sizeof(float) * 5);
    human_bytes(mn, sizeof mn, model - 2 * P * sizeof(float) + bufs);
    human_bytes(dn, sizeof dn, decode);
    char bn[96];
    if (o->batch_tokens > 0)
        snprintf(bn, sizeof bn, "token batches of %d rows, sentences of up to %d/%d tokens",
                 r->rows, r->Txmax, r->Tymax);
    else
        snprintf(bn, sizeof bn, "batches of %d sentences of up to %d/%d tokens", r->Bmax, r->Txmax,
                 r->Tymax);
    nb_errf(err,
            "mt needs about %s before it starts, more than the %s left in %s: %.0f million "
            "parameters with their gradients, Adam's moments and the best copy (%s), %s (%s), "
            "decoding %d sentences with a beam of %d (%s)",
            tn, rn, which, P / 1e6, pn, bn, mn, E, beam, dn);
    const double parts[3] = {P * sizeof(float) * 5, model - 2 * P * sizeof(float) + bufs, decode};
    int big = parts[0] >= parts[1] && parts[0] >= parts[2] ? 0 : parts[1] >= parts[2] ? 1 : 2;
    if (big == 0)
        return nb_hintf(err, "a smaller model: lower %s (or --bpe-merges for a smaller vocabulary)",
                        o->model == 0 ? "--dim or --dim-word" : "--dim, --ffn or --layers");
    if (big == 1)
        return nb_hintf(err, "smaller batches: lower %s, --eval-batch or --max-len%s",
                        o->batch_tokens > 0 ? "--batch-tokens" : "--batch",
                        o->model == 1 ? " (or --heads: attention keeps a row per head)" : "");
    return nb_hintf(err, "lower --eval-batch or --beam");
}

/* Builds the model with room for every split and the largest batch (run_load's sizes). */
static int run_build(mt_run *r, nb_err *err) {
    const nb_train_cfg *cfg = r->cfg;
    nb_rng init;
    nb_rng_seed(&init, cfg->seed, NB_STREAM_INIT);
    if (model_open(&r->m, cfg, nb_vocab_size(r->d.src_vocab), nb_vocab_size(r->d.tgt_vocab),
                   r->Bmax, r->Txmax, r->Tymax, r->rows, r->o->beam, &init, err) != 0) {
        model_free(&r->m);
        return -1;
    }
    r->have_model = 1;
    model_rules(&r->m, r->beam_simple);
    size_t B = (size_t)r->Bmax;
    r->idx = malloc(sizeof(int) * B);
    r->src = malloc(sizeof(int) * B * (size_t)r->Txmax);
    r->srclen = malloc(sizeof(int) * B);
    r->tgt = malloc(sizeof(int) * B * (size_t)r->Tymax);
    r->tgtlen = malloc(sizeof(int) * B);
    r->out = malloc(sizeof(int) * B * (size_t)decode_limits(r).out_max);
    r->outlen = malloc(sizeof(int) * B);
    int nh = r->d.val.n;
    for (int t = 0; t < r->d.ntest; t++)
        if (r->d.test[t].n > nh) nh = r->d.test[t].n;
    r->hyp = calloc((size_t)nh + 1, sizeof(char *));
    r->nhyp = r->hyp ? nh + 1 : 0;
    if (!r->idx || !r->src || !r->srclen || !r->tgt || !r->tgtlen || !r->out || !r->outlen ||
        !r->hyp)
        return nb_errf(err, "out of memory for the mt task's buffers");
    return 0;
}

/* What the evaluation does with validation and test pairs over --max-len, for the record. */
static void eval_pairs_note(const mt_run *r, char *v, size_t n) {
    const nb_mt_split *val = &r->d.val;
    int k = snprintf(v, n,
                     "val %d pairs: %d within --max-len %d in val_xent, %ld over it left out; "
                     "%ld sources cut to %d pieces for val_bleu",
                     val->n, r->nval, r->o->max_len, (long)(val->n - r->nval), val->src_too_long,
                     r->o->max_len);
    for (int t = 0; t < r->d.ntest && k > 0 && (size_t)k < n; t++)
        k += snprintf(v + k, n - (size_t)k, "; %s %d pairs: %ld sources cut to %d pieces",
                      r->d.test_name[t], r->d.test[t].n, r->d.test[t].src_too_long, r->o->max_len);
}

static int mt_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status, nb_err *err) {
    mt_run r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    if (cfg->dist && cfg->dist->size > 1 && cfg->norm.bn_sum) {
        /* the GRUs and the Transformer's batch norm take statistics over each process's own
         * sentences and positions: sums over the ranks would not line up */
        nb_errf(err, "mt cannot take BatchNorm statistics over the ranks (--bn-sync)");
        nb_hintf(err, "leave out --bn-sync (per-rank statistics), or run in one process");
        return -1;
    }
    /* a run an earlier normbench started (its checkpoints' tag DATA_TAG_V1, or none) resumes
     * with that normbench's source, beam, cap and order (run_settings): its recorded command
     * line has none of those options, and changing them mid-run would change what it trains */
    int legacy = 0;
    if (cfg->resume_from) {
        unsigned char have[sizeof r.data_tag];
        int k = nb_ckpt_read_last_blob(cfg->resume_from, have, sizeof have, err);
        if (k < 0) goto out;
        legacy = !(k == 1 && memcmp(have, DATA_TAG, 8) == 0);
    }
    if (run_load(&r, cfg, legacy, err) != 0) goto out;
    /* from here the run is recorded (its first parameter creates it): a set-up that fails
     * below, the memory check's refusal included, leaves a failed run with its message */
    if (sink->param) {
        char v[1024];
        snprintf(v, sizeof v, "%d/%d (source/target)", nb_vocab_size(r.d.src_vocab),
                 nb_vocab_size(r.d.tgt_vocab));
        if (sink->param(sink->ctx, "data_source", r.d.source, err) != 0 ||
            sink->param(sink->ctx, "vocabulary", v, err) != 0)
            goto out;
        snprintf(v, sizeof v,
                 "%d pairs read %ld, dropped %ld empty and %ld over --max-len; %ld <unk>",
                 r.d.train.n, r.d.train.read, r.d.train.empty, r.d.train.too_long, r.d.train.unk);
        if (sink->param(sink->ctx, "train_pairs", v, err) != 0) goto out;
        char sig[256];
        nb_bleu_opts bo = nb_bleu_defaults();
        nb_bleu_signature(&bo, 1, sig, sizeof sig);
        if (sink->param(sink->ctx, "bleu_signature", sig, err) != 0) goto out;
        /* since stop 16 every sentence's dropout masks come from its own streams (its index in
         * the batch and its positions), so that a batch split over ranks draws what one
         * process draws; earlier runs drew them by the batch's layout */
        if (sink->param(sink->ctx, "dropout_streams", "per-sentence", err) != 0) goto out;
        eval_pairs_note(&r, v, sizeof v);
        if (sink->param(sink->ctx, "eval_pairs", v, err) != 0 ||
            sink->param(sink->ctx, "data_hash", r.d.data_hash, err) != 0)
            goto out;
    }
    data_tag(&r.d, r.legacy, r.data_tag);
    int tagged = 1;
    if (cfg->resume_from && check_resume_data(&r, cfg->resume_from, &tagged, err) != 0) goto out;
    if (!tagged && sink->param &&
        sink->param(sink->ctx, "resume_data_check",
                    "none: the checkpoint was written before normbench tagged a run's data", err))
        goto out;
    if (r.o->batch_tokens == 0 && cfg->batch > r.d.train.n) {
        nb_errf(err, "batch size %d is larger than the %d training pairs", cfg->batch, r.d.train.n);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }
    if (check_memory(&r, err) != 0 || run_build(&r, err) != 0) goto out;
    nb_flush_denormals(cfg->flush_denormals);
    size_t P = r.m.layout->total;
    r.adam_m = calloc(P, sizeof(float));
    r.adam_v = calloc(P, sizeof(float));
    if (!r.adam_m || !r.adam_v) {
        nb_errf(err, "out of memory for Adam's moments");
        goto out;
    }
    /* token batches: an epoch is the batches of one pass in the order of a first shuffle
     * (each epoch's shuffle cuts a few more or fewer: a short pass runs on into the next
     * shuffle, a long one is cut; docs: docs/results/mt-rnnsearch.md, the task) */
    int64_t steps_per_epoch = (r.d.train.n + cfg->batch - 1) / cfg->batch;
    if (r.o->batch_tokens > 0) {
        nb_rng trial;
        nb_rng_seed(&trial, cfg->seed, NB_STREAM_DATA);
        nb_mt_batcher b;
        long c = -1;
        if (nb_mt_batcher_init_tokens(&b, &r.d.train, r.o->batch_tokens, r.o->maxibatch, r.order,
                                      &trial, err) != 0)
            goto out;
        c = nb_mt_batcher_count(&b);
        nb_mt_batcher_free(&b);
        if (c < 1) {
            nb_errf(err, "out of memory for the token batches");
            goto out;
        }
        steps_per_epoch = c;
    }
    nb_trainer t = {.self = &r,
                    .keep = save_model,
                    .params = r.m.params,
                    .grads = r.m.grads,
                    .adam_m = r.adam_m,
                    .adam_v = r.adam_v,
                    .layout = r.m.layout,
                    .steps_per_epoch = steps_per_epoch,
                    .eval_every = r.o->eval_every,
                    .select_metric = "val_xent",
                    .select_max = 0,
                    .epoch_begin = mt_epoch_begin,
                    .step = mt_step,
                    .step_shard = mt_step_shard,
                    .shard_loss_share = 1,
                    .schedule = mt_schedule,
                    .tokens = mt_tokens,
                    .evaluate = mt_evaluate,
                    /* the data's tag, last: a resume compares it first (check_resume_data) */
                    .extra = {{r.data_tag, sizeof r.data_tag}},
                    .nextra = tagged};
    /* what the ranks of a data-parallel run compare before the first step (the pieces' ids:
     * the text, the BPE codes and the vocabularies) */
    for (int k = -1; k <= r.d.ntest; k++) {
        const nb_mt_split *sp = k < 0 ? &r.d.train : k == 0 ? &r.d.val : &r.d.test[k - 1];
        char name[64];
        const char *what = k < 0 ? "train" : k == 0 ? "val" : r.d.test_name[k - 1];
        snprintf(name, sizeof name, "%.40s.src", what);
        nb_train_fp(&t, name, sp->src, sizeof(int) * (size_t)(sp->n ? sp->src_start[sp->n] : 0));
        snprintf(name, sizeof name, "%.40s.tgt", what);
        nb_train_fp(&t, name, sp->tgt, sizeof(int) * (size_t)(sp->n ? sp->tgt_start[sp->n] : 0));
    }
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    run_free(&r);
    return rc;
}

/* ---- translate ------------------------------------------------------------------------------ */

/* A finished run's kept model, open for translating (nb_task.translate_open). */
typedef struct mt_tr {
    nb_bpe *bpe;
    nb_vocab *sv, *tv;
    mt_model m;
    mt_limits lim;
    size_t max_bytes;          /* nb_translate_limits' */
    int B, beam, batch_tokens; /* lines a batch, beam width, --batch-tokens */
    int *src, *srclen, *o, *olen;
    int *ids, idcap; /* one line's pieces */
} mt_tr;

static void mt_translate_close(void *self) {
    mt_tr *t = self;
    if (!t) return;
    model_free(&t->m);
    nb_bpe_free(t->bpe);
    nb_vocab_free(t->sv);
    nb_vocab_free(t->tv);
    free(t->src), free(t->srclen), free(t->o), free(t->olen), free(t->ids);
    free(t);
}

/* The most bytes of raw text one piece stands for: a BPE symbol (a merge's two halves, less the
 * end-of-word marker) or one character (4 bytes at most), plus the space between tokens that
 * pre-tokenization drops. A line of more than src_max times this has more than src_max pieces. */
static size_t piece_bytes(const nb_bpe *b) {
    size_t most = 4;
    for (int i = 0; i < nb_bpe_size(b); i++) {
        const char *l, *r;
        nb_bpe_merge(b, i, &l, &r);
        size_t n = strlen(l) + strlen(r);
        if (n > most) most = n;
    }
    return most + 1;
}

/* Bytes translating batches of B lines of the longest (S pieces) takes: the model and its buffers
 * (the models' allocators count them, nn/mem.h; params and grads counted here) and one decoding
 * step's state, built and freed. Returns -1 with err set when even that cannot be built. */
static double translate_bytes(const nb_train_cfg *cfg, const mt_tr *t, int B, nb_err *err) {
    mt_model m;
    nb_rng init;
    nb_rng_seed(&init, cfg->seed, NB_STREAM_INIT);
    const int S = t->lim.src_max;
    nb_mem_reset();
    int rc = model_open(&m, cfg, nb_vocab_size(t->sv), nb_vocab_size(t->tv), B, S, t->lim.tgt_max,
                        B * S, t->beam, &init, err);
    int *src = calloc((size_t)B, sizeof(int)), *len = calloc((size_t)B, sizeof(int));
    int *o = calloc((size_t)B, sizeof(int)), *olen = calloc((size_t)B, sizeof(int));
    if (rc == 0 && (!src || !len || !o || !olen)) rc = nb_errf(err, "out of memory");
    for (int b = 0; rc == 0 && b < B; b++)
        src[b] = NB_UNK, len[b] = 1;
    /* one step of a batch of one-piece lines: the decoder's state, sized by B and the model */
    if (rc == 0) rc = model_decode(&m, src, len, 1, B, t->beam, 1, o, olen, err);
    double bytes = (double)nb_mem_noted();
    if (m.kind == 1) bytes += 2.0 * sizeof(float) * (double)m.layout->total;
    bytes += (double)sizeof(int) * B * (2.0 * S + t->lim.out_max + 4);
    model_free(&m);
    free(src), free(len), free(o), free(olen);
    return rc == 0 ? bytes : -1;
}

static void human(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, n, "%.0f MiB", b / (1024.0 * 1024));
}

static void *mt_translate_open(const nb_train_cfg *cfg, const char *dir, const nb_ckpt_ident *want,
                               int batch_tokens, nb_translate_limits *lim, nb_err *err) {
    mt_tr *t = calloc(1, sizeof *t);
    if (!t) {
        nb_errf(err, "out of memory");
        return NULL;
    }
    /* the codes and vocabularies read once, their bytes checked against what the model was kept
     * with, then parsed */
    char path[4200], *bufs[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    kept_head kh;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, kept_files[i]);
        ok = read_whole(path, KEPT_FILE_MAX, &bufs[i], &n[i], err) == 0;
    }
    ok = ok && load_head(dir, want, bufs, n, &kh, err) == 0;
    if (ok) {
        snprintf(path, sizeof path, "%s/%s", dir, kept_files[0]);
        ok = (t->bpe = nb_bpe_parse(bufs[0], n[0], path, err)) != NULL;
    }
    if (ok) {
        snprintf(path, sizeof path, "%s/%s", dir, kept_files[1]);
        ok = (t->sv = nb_vocab_parse(bufs[1], n[1], path, err)) != NULL;
    }
    if (ok) {
        snprintf(path, sizeof path, "%s/%s", dir, kept_files[2]);
        ok = (t->tv = nb_vocab_parse(bufs[2], n[2], path, err)) != NULL;
    }
    for (int i = 0; i < 3; i++)
        free(bufs[i]);
    if (!ok) goto fail;
    const mt_opts *mo = opts_of(cfg);
    /* decoding as the run's test_bleu did: its limits, source eos and beam rules as kept; or
     * with the rules and cap translate was given (to compare them on one model) */
    t->lim = (mt_limits){kh.src_max, kh.out_max, kh.src_eos, kh.beam_simple, kh.tgt_max};
    if (lim->beam_rules > 0) t->lim.beam_simple = lim->beam_rules == 2;
    if (lim->decode_cap == 1)
        t->lim.out_max = mo->model == 0 ? NEMATUS_MAXLEN : kh.src_max + ZERO_DECODE_LENGTH;
    if (lim->decode_cap == 2) t->lim.out_max = kh.tgt_max;
    t->beam = mo->beam;
    /* S: the model's source positions (the eos included); L: the most pieces of a line, what
     * --batch-tokens counts */
    const int S = t->lim.src_max, L = S - t->lim.src_eos;
    const int E = cfg->eval_batch > 0 ? cfg->eval_batch : 80;
    /* a batch: at most batch_tokens pieces, reckoned at the longest line the model takes, and at
     * most the run's evaluation batch (the default: what its test_bleu translated at once) */
    if (batch_tokens <= 0) batch_tokens = E * L;
    if (batch_tokens < L) {
        nb_errf(err, "--batch-tokens %d cannot hold one line of the %d pieces this model takes",
                batch_tokens, L);
        nb_hintf(err, "give --batch-tokens %d or more (a longer line is refused, not split)", L);
        goto fail;
    }
    t->B = batch_tokens / L < E ? batch_tokens / L : E;
    t->batch_tokens = batch_tokens;
    lim->src_max = L; /* a line's pieces, then the eos */
    lim->max_bytes = t->max_bytes = (size_t)L * piece_bytes(t->bpe);
    lim->batch_tokens = batch_tokens;
    lim->batch_lines = t->B;
    /* refused before it is built when it cannot fit: what one and two lines a batch take, the
     * lines beyond them as the second */
    double one = translate_bytes(cfg, t, 1, err),
           two = one < 0 ? -1 : translate_bytes(cfg, t, 2, err);
    if (one < 0 || two < 0) {
        nb_hintf(err, "this model cannot translate here: free some memory");
        goto fail;
    }
    const double line = two > one ? two - one : 0, need = one + line * (t->B - 1);
    const char *which = NULL;
    const double room = nb_mem_room(&which);
    if (need > room) {
        char n1[32], n2[32];
        human(n1, sizeof n1, need);
        human(n2, sizeof n2, room);
        if (one > room) {
            nb_errf(err,
                    "translating one line of %d pieces a batch needs about %s, more than the %s "
                    "left in %s",
                    L, n1, n2, which);
            nb_hintf(err, "this model cannot translate here: free some memory or raise the limit");
        } else {
            int fit = line > 0 ? 1 + (int)((room - one) / line) : t->B;
            nb_errf(
                err,
                "--batch-tokens %d (%d lines a batch) needs about %s, more than the %s left in %s",
                batch_tokens, t->B, n1, n2, which);
            nb_hintf(err, "give --batch-tokens %d or less (%d lines of the longest)", fit * L, fit);
        }
        goto fail;
    }
    nb_rng init;
    nb_rng_seed(&init, cfg->seed, NB_STREAM_INIT);
    const int Ty = decode_cap(&t->lim);
    if (model_open(&t->m, cfg, nb_vocab_size(t->sv), nb_vocab_size(t->tv), t->B, S, t->lim.tgt_max,
                   t->B * S, t->beam, &init, err) != 0) {
        /* the model's own hint names run's options: translate's is --batch-tokens */
        nb_hintf(err, "lower --batch-tokens (now %d; %d holds one line of the longest)",
                 batch_tokens, L);
        goto fail;
    }
    if (load_params(&t->m, dir, err) != 0) goto fail;
    model_rules(&t->m, t->lim.beam_simple);
    t->src = calloc((size_t)t->B * S, sizeof(int));
    t->srclen = calloc((size_t)t->B, sizeof(int));
    t->o = calloc((size_t)t->B * Ty, sizeof(int));
    t->olen = calloc((size_t)t->B, sizeof(int));
    if (!t->src || !t->srclen || !t->o || !t->olen) {
        nb_errf(err, "out of memory for translation batches of %d lines", t->B);
        nb_hintf(err, "lower --batch-tokens (now %d; %d holds one line of the longest)",
                 batch_tokens, L);
        goto fail;
    }
    return t;
fail:
    mt_translate_close(t);
    return NULL;
}

/* Lines sorted by their pieces, then by their place. */
static const int *sort_len;
static int by_len(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_len[i] != sort_len[j]) return sort_len[i] < sort_len[j] ? -1 : 1;
    return (i > j) - (i < j);
}

static int mt_translate_lines(void *self, char *const *lines, int n, char **out, int *pieces,
                              nb_err *err) {
    mt_tr *t = self;
    const int S = t->lim.src_max, Ty = decode_cap(&t->lim), se = t->lim.src_eos;
    const size_t max_bytes = t->max_bytes;
    int **enc = calloc((size_t)n + 1, sizeof *enc), *len = calloc((size_t)n + 1, sizeof *len);
    int *order = calloc((size_t)n + 1, sizeof *order), m = 0, rc = -1;
    if (!enc || !len || !order) {
        nb_errf(err, "out of memory");
        goto out;
    }
    /* every line's pieces; an over-long line is left out (out NULL), an empty one is "" */
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        size_t bytes = strlen(lines[i]);
        if (bytes > max_bytes) {
            pieces[i] = -1;
            continue;
        }
        int k = 0;
        long unk = 0, reserved = 0;
        if (nb_vocab_encode_line(t->sv, t->bpe, lines[i], bytes, &t->ids, &k, &t->idcap, &unk,
                                 &reserved, err) != 0)
            goto out;
        pieces[i] = k;
        if (k > S - se) continue;
        if (bytes == 0) {
            if (!(out[i] = strdup(""))) goto oom;
            continue;
        }
        if (!(enc[i] = malloc(sizeof(int) * (size_t)(k ? k : 1)))) goto oom;
        memcpy(enc[i], t->ids, sizeof(int) * (size_t)k);
        len[i] = k;
        order[m++] = i;
    }
    /* batches of similar lengths, as training's (less padding); each line's translation does not
     * depend on the others of its batch */
    sort_len = len;
    qsort(order, (size_t)m, sizeof *order, by_len);
    for (int i0 = 0; i0 < m; i0 += t->B) {
        int b = m - i0 < t->B ? m - i0 : t->B, tx = 1;
        for (int k = 0; k < b; k++)
            if (len[order[i0 + k]] + se > tx) tx = len[order[i0 + k]] + se;
        memset(t->src, 0, sizeof(int) * (size_t)b * tx);
        for (int k = 0; k < b; k++) {
            int l = len[order[i0 + k]];
            for (int p = 0; p < l; p++)
                t->src[p * b + k] = enc[order[i0 + k]][p];
            if (se) /* as fill_batch: the run's source eos */
                t->src[l++ * b + k] = NB_EOS;
            else if (l == 0)
                t->src[k] = NB_UNK, l = 1;
            t->srclen[k] = l;
        }
        if (model_decode(&t->m, t->src, t->srclen, tx, b, t->beam, Ty, t->o, t->olen, err) != 0) {
            nb_hintf(err, "lower --batch-tokens (now %d; %d holds one line of the longest)",
                     t->batch_tokens, S - se);
            goto out;
        }
        for (int k = 0; k < b; k++)
            if (!(out[order[i0 + k]] = nb_vocab_decode(t->tv, t->o + (size_t)k * Ty, t->olen[k])))
                goto oom;
    }
    rc = 0;
    goto out;
oom:
    nb_errf(err, "out of memory for translations");
out:
    if (rc != 0)
        for (int i = 0; i < n; i++) {
            free(out[i]);
            out[i] = NULL;
        }
    for (int i = 0; enc && i < n; i++)
        free(enc[i]);
    free(enc), free(len), free(order);
    return rc;
}

/* ---- bench ---------------------------------------------------------------------------------- */

typedef struct mt_bench {
    nb_tf_bench *tf; /* --model transformer: the model's own benchmark */
    nb_rnnsearch m;
    float *adam_m, *adam_v;
    nb_adam_cfg adam;
    double clip;
    int B, Tx, Ty;
    int *src, *srclen, *tgt, *tgtlen;
    nb_rng noise;
    nb_layout *layout;
    /* data-parallel (mpirun): this rank's sentences lo..hi of the batch (RNNSearch: their
     * time-major copies) */
    nb_dist *dist;
    int lo, hi, *ssrc, *stgt;
} mt_bench;

/* Data-parallel: the sums over the ranks of a shard's gradients and loss share (one fused
 * buffer, as the training loop sums them), and rank 0's BatchNorm running averages. */
static void bench_dist_sum(void *ctx, float *params, float *grads, const nb_layout *lay,
                           double loss) {
    nb_dist *D = ctx;
    nb_trainer t = {.params = params, .grads = grads, .layout = lay};
    nb_train_dist_sum(D, &t, loss, 1, 1, NULL);
    nb_train_dist_buffers(D, &t);
}

enum { BENCH_V = 8000, BENCH_LEN = 30 };

static void mt_bench_close(void *p);

/* Data-parallel (cfg->dist over several ranks): this rank's sentences of the batch; NULL (the
 * bench closed) with err set for --bn-sync or when out of memory. */
static void *bench_dist_open(mt_bench *b, const nb_train_cfg *cfg, nb_err *err) {
    if (!cfg->dist || cfg->dist->size < 2) return b;
    const nb_dist *D = b->dist = cfg->dist;
    if (cfg->norm.bn_sum) {
        mt_bench_close(b);
        return nb_errf(err, "mt cannot take BatchNorm statistics over the ranks (--bn-sync)"), NULL;
    }
    b->lo = (int)((int64_t)b->B * D->rank / D->size);
    b->hi = (int)((int64_t)b->B * (D->rank + 1) / D->size);
    if (b->tf) return b;
    const int n = b->hi - b->lo > 0 ? b->hi - b->lo : 1;
    b->ssrc = malloc(sizeof(int) * (size_t)b->Tx * n);
    b->stgt = malloc(sizeof(int) * (size_t)b->Ty * n);
    if (!b->ssrc || !b->stgt) {
        mt_bench_close(b);
        return nb_errf(err, "out of memory"), NULL;
    }
    for (int k = 0; k < b->hi - b->lo; k++) {
        for (int t = 0; t < b->Tx; t++)
            b->ssrc[(size_t)t * n + k] = b->src[(size_t)t * b->B + b->lo + k];
        for (int t = 0; t < b->Ty; t++)
            b->stgt[(size_t)t * n + k] = b->tgt[(size_t)t * b->B + b->lo + k];
    }
    return b;
}

static void *mt_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    mt_bench *b = calloc(1, sizeof *b);
    if (!b) {
        nb_errf(err, "out of memory");
        return NULL;
    }
    const mt_opts *o = opts_of(cfg);
    b->B = cfg->batch;
    b->Tx = b->Ty = BENCH_LEN;
    if (o->model == 1) {
        nb_tf_cfg tc;
        const nb_tf_preset *pr = nb_tf_preset_find(preset_choices[o->preset]);
        tf_config(&tc, pr, o, BENCH_V, cfg->norm.kind);
        tc.norm = cfg->norm;
        tc.pre_norm = o->norm_position == 1;
        tc.label_smooth = o->label_smoothing;
        if (!(b->tf = nb_tf_bench_open(&tc, b->B * BENCH_LEN, BENCH_LEN, cfg->seed, err))) {
            free(b);
            return NULL;
        }
        nb_flush_denormals(cfg->flush_denormals); /* as a run trains (and as RNNSearch's below) */
        return bench_dist_open(b, cfg, err);
    }
    b->adam = cfg->adam;
    b->clip = cfg->clip;
    nb_rnnsearch_cfg mc;
    nb_rnnsearch_cfg_default(&mc, BENCH_V, BENCH_V, NB_EOS, cfg->norm.kind);
    mc.norm = cfg->norm;
    mc.E = o->dim_word;
    mc.H = o->dim;
    mc.Bmax = b->B;
    mc.Txmax = mc.Tymax = BENCH_LEN;
    mc.beam_max = 1;
    mc.label_smoothing = o->label_smoothing;
    nb_rng rng;
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_INIT);
    if (nb_rnnsearch_init(&b->m, &mc, &rng, err) != 0) {
        free(b);
        return NULL;
    }
    size_t P = b->m.layout.total, n = (size_t)b->B * BENCH_LEN;
    b->adam_m = calloc(P, sizeof(float));
    b->adam_v = calloc(P, sizeof(float));
    b->src = malloc(sizeof(int) * n);
    b->tgt = malloc(sizeof(int) * n);
    b->srclen = malloc(sizeof(int) * (size_t)b->B);
    b->tgtlen = malloc(sizeof(int) * (size_t)b->B);
    if (!b->adam_m || !b->adam_v || !b->src || !b->tgt || !b->srclen || !b->tgtlen) {
        nb_rnnsearch_free(&b->m);
        free(b->adam_m), free(b->adam_v), free(b->src), free(b->tgt), free(b->srclen),
            free(b->tgtlen), free(b);
        nb_errf(err, "out of memory");
        return NULL;
    }
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_SYNTH);
    for (size_t i = 0; i < n; i++) {
        b->src[i] = 4 + (int)nb_rng_below(&rng, BENCH_V - 4);
        b->tgt[i] = 4 + (int)nb_rng_below(&rng, BENCH_V - 4);
    }
    for (int i = 0; i < b->B; i++) {
        b->srclen[i] = b->tgtlen[i] = BENCH_LEN;
        b->tgt[(BENCH_LEN - 1) * b->B + i] = NB_EOS;
    }
    nb_rng_seed(&b->noise, cfg->seed, NB_STREAM_DROPOUT);
    nb_flush_denormals(cfg->flush_denormals);
    return bench_dist_open(b, cfg, err);
}

static double mt_bench_step(void *p) {
    mt_bench *b = p;
    if (b->tf && b->dist)
        return nb_tf_bench_step_shard(b->tf, b->lo, b->hi, bench_dist_sum, b->dist);
    if (b->tf) return nb_tf_bench_step(b->tf);
    double t0 = nb_now();
    memset(b->m.grads, 0, sizeof(float) * b->m.layout.total);
    nb_trainer t = {.params = b->m.params,
                    .grads = b->m.grads,
                    .adam_m = b->adam_m,
                    .adam_v = b->adam_v,
                    .layout = &b->m.layout};
    if (b->dist) { /* this rank's sentences as a shard of the batch, then the sums */
        const int n = b->hi - b->lo;
        double loss = 0;
        if (n > 0) {
            b->m.row0 = b->lo;
            b->m.grad_rows = b->B;
            loss = nb_rnnsearch_forward(&b->m, b->ssrc, b->srclen + b->lo, b->Tx, b->stgt,
                                        b->tgtlen + b->lo, b->Ty, n, 1, &b->noise, NULL);
            nb_rnnsearch_backward(&b->m);
            b->m.row0 = b->m.grad_rows = 0;
        }
        nb_train_dist_sum(b->dist, &t, loss, 1, 1, NULL);
    } else {
        nb_rnnsearch_forward(&b->m, b->src, b->srclen, b->Tx, b->tgt, b->tgtlen, b->Ty, b->B, 1,
                             &b->noise, NULL);
        nb_rnnsearch_backward(&b->m);
    }
    nb_train_update(&t, b->clip, &b->adam, 1, 1000);
    if (b->dist) nb_train_dist_buffers(b->dist, &t);
    return nb_now() - t0;
}

static void mt_bench_close(void *p) {
    mt_bench *b = p;
    free(b->ssrc), free(b->stgt);
    if (b->tf) {
        nb_tf_bench_close(b->tf);
        free(b);
        return;
    }
    nb_rnnsearch_free(&b->m);
    free(b->adam_m), free(b->adam_v), free(b->src), free(b->tgt), free(b->srclen), free(b->tgtlen);
    free(b);
}

/* One dense map y (rows, out) = x (rows, in) W^T as its three GEMMs of a training step: the
 * forward, the weight gradient dy^T x and the input gradient dy W (no_dx: the input is data),
 * each `count` times. */
static int add_dense(nb_gemm_shape *out, int n, int max, const char *what, int rows, int o, int in,
                     int count, int no_dx) {
    const nb_gemm_shape s[3] = {
        {rows, o, in, count, ""}, {o, in, rows, count, ""}, {rows, in, o, count, ""}};
    static const char *const pass[3] = {"fwd", "dW", "dx"};
    for (int i = 0; i < (no_dx ? 2 : 3) && n < max; i++) {
        out[n] = s[i];
        snprintf(out[n].what, sizeof out[n].what, "%s %s", what, pass[i]);
        n++;
    }
    return n;
}

/* A map applied once per position (B rows each, T positions): the forward and the input
 * gradient per position, the weight gradient in one GEMM over all T*B rows (nn/gru.c). */
static int add_steps(nb_gemm_shape *out, int n, int max, const char *what, int B, int T, int o,
                     int in, int copies) {
    const nb_gemm_shape s[3] = {
        {B, o, in, T * copies, ""}, {o, in, T * B, copies, ""}, {B, in, o, T * copies, ""}};
    static const char *const pass[3] = {"fwd", "dW", "dx"};
    for (int i = 0; i < 3 && n < max; i++) {
        out[n] = s[i];
        snprintf(out[n].what, sizeof out[n].what, "%s %s", what, pass[i]);
        n++;
    }
    return n;
}

/* GEMMs of one step. RNNSearch: the dense maps over all rows at once, the recurrent products
 * (and the decoder's per-step maps) once per position, as nn/rnnsearch.c and nn/gru.c call
 * them; the attention is not a GEMM there. The Transformer: nb_tf_gemm_shapes, each map's
 * forward and its two gradients. */
static int mt_bench_gemms(void *p, nb_gemm_shape *out, int max) {
    mt_bench *b = p;
    int n = 0;
    if (b->tf) {
        int sh[4 * 32];
        int k = nb_tf_bench_gemms(b->tf, sh, 32);
        static const char *const pass[3] = {"fwd", "dA", "dB"};
        /* nb_tf_gemm_shapes' order */
        static const char *const names[16] = {"enc qkv",  "enc out",    "enc ffn1",  "enc ffn2",
                                              "dec qkv",  "dec dxd x3", "dec x-kv",  "dec ffn1",
                                              "dec ffn2", "logits",     "enc q.k",   "enc a.v",
                                              "dec q.k",  "dec a.v",    "x-att q.k", "x-att a.v"};
        for (int i = 0; i < k; i++) {
            const int M = sh[4 * i], N = sh[4 * i + 1], K = sh[4 * i + 2], c = sh[4 * i + 3] / 3;
            const nb_gemm_shape s[3] = {{M, N, K, c, ""}, {M, K, N, c, ""}, {K, N, M, c, ""}};
            for (int j = 0; j < 3 && n < max; j++) {
                out[n] = s[j];
                snprintf(out[n].what, sizeof out[n].what, "%s %s", k == 16 ? names[i] : "gemm",
                         pass[j]);
                n++;
            }
        }
        return n;
    }
    const int B = b->B, Tx = b->Tx, Ty = b->Ty, E = b->m.cfg.E, H = b->m.cfg.H, C = b->m.C,
              A = b->m.A, V = b->m.cfg.Vt, H3 = 3 * H, XB = Tx * B, YB = Ty * B;
    /* the encoder's two GRUs: inputs at once, the recurrent product per step */
    n = add_dense(out, n, max, "enc GRU x", XB, H3, E, 2, 0);
    n = add_steps(out, n, max, "enc GRU h", B, Tx, H3, H, 2);
    n = add_dense(out, n, max, "init", B, H, C, 1, 0);
    n = add_dense(out, n, max, "att ctx", XB, A, C, 1, 0);
    n = add_dense(out, n, max, "dec GRU1 x", YB, H3, E, 1, 0);
    n = add_steps(out, n, max, "dec GRU1 h", B, Ty, H3, H, 1);
    n = add_steps(out, n, max, "att state", B, Ty, A, H, 1);
    n = add_steps(out, n, max, "dec GRU2 x", B, Ty, H3, C, 1);
    n = add_steps(out, n, max, "dec GRU2 h", B, Ty, H3, H, 1);
    n = add_dense(out, n, max, "out emb", YB, E, E, 1, 0);
    n = add_dense(out, n, max, "out state", YB, E, H, 1, 0);
    n = add_dense(out, n, max, "out ctx", YB, E, C, 1, 0);
    n = add_dense(out, n, max, "logits", YB, V, E, 1, 0);
    return n;
}

static double mt_bench_flops(void *p) {
    nb_gemm_shape s[64];
    return nb_gemm_flops(s, mt_bench_gemms(p, s, 64));
}

static const int mt_bench_batches[] = {80, 0};

static const char mt_paper[] =
    "RMSNorm paper (Zhang & Sennrich 2019): RNNSearch (Nematus) in Tables 2, 3 and 5, the "
    "Transformer (zero) in Table 4, both on WMT14 En-De with BLEU on newstest2014 and "
    "newstest2017, times per 1k training steps on a TITAN X (Pascal) (Tables 2 and 3) and a "
    "Tesla V100 (Table 4); Table 3 (Theano-Nematus and the authors' PyTorch) is in docs/papers.md. "
    "Their data, sizes (RNNSearch emb 512, hidden 1024; Transformer base) "
    "and hardware differ from a Multi30k run here: compare the ratios (rms against layer), not "
    "the absolute BLEU or seconds (docs/papers.md#mt).";

/* The RMSNorm paper's tables (docs/papers.md#mt). Table 5's statistics are the decoder GRU's
 * hidden-to-hidden pre-activations at target positions 1-4 and over all positions. */
static const nb_paper_table mt_paper_tables[] = {
    {"RMS paper Table 2: RNNSearch (TF-Nematus), WMT14 En-De, TITAN X (Pascal)",
     "rnnsearch",
     2,
     {"BLEU newstest2014", "BLEU newstest2017"},
     {"test_bleu", "test_2017_bleu"},
     {{"none", {"21.7", "23.4"}, 399},
      {"layer", {"22.6", "23.6"}, 665},
      {"rms", {"22.4", "23.7"}, 501},
      {"prms", {"22.6", "23.1"}, 493},
      {NULL}}},
    {"RMS paper Table 5, mean M of the decoder GRU's hidden-to-hidden pre-activations at target "
     "positions 1-4 and all (validation set; the paper's newstest2013)",
     "rnnsearch",
     5,
     {"M 1", "M 2", "M 3", "M 4", "M all"},
     {"val_preact_mean_1", "val_preact_mean_2", "val_preact_mean_3", "val_preact_mean_4",
      "val_preact_mean_all"},
     {{"none", {"-2.60", "-1.19", "-1.43", "-1.53", "-1.60"}, 0},
      {"layer", {"-0.43", "-0.48", "-0.50", "-0.50", "-0.51"}, 0},
      {"rms", {"-0.40", "-0.60", "-0.69", "-0.74", "-0.73"}, 0},
      {NULL}}},
    {"RMS paper Table 5, standard deviation S of the same pre-activations",
     "rnnsearch",
     5,
     {"S 1", "S 2", "S 3", "S 4", "S all"},
     {"val_preact_std_1", "val_preact_std_2", "val_preact_std_3", "val_preact_std_4",
      "val_preact_std_all"},
     {{"none", {"7.35", "2.33", "2.61", "2.73", "3.04"}, 0},
      {"layer", {"1.19", "1.51", "1.51", "1.51", "1.51"}, 0},
      {"rms", {"1.27", "1.51", "1.50", "1.49", "1.50"}, 0},
      {NULL}}},
    {"RMS paper Table 4: Transformer base, WMT14 En-De, Tesla V100 (\"-\": failed to train)",
     "transformer",
     2,
     {"BLEU newstest2014", "BLEU newstest2017"},
     {"test_bleu", "test_2017_bleu"},
     {{"none", {"-", "-"}, 210},
      {"layer", {"26.6", "27.7"}, 248},
      {"rms", {"26.8", "27.7"}, 231},
      {"prms", {"26.5", "27.8"}, 225},
      {NULL}}},
    {NULL},
};

const nb_task nb_task_mt = {
    .name = "mt",
    .summary = "translation, RNNSearch (Nematus v0.3) or the Transformer (zero), Multi30k En-De: "
               "RMS paper Tables 2-5",
    .default_dataset = "multi30k",
    .datasets = mt_datasets,
    .opts = mt_opts_decl,
    .opts_size = sizeof(mt_opts),
    .defaults = mt_defaults,
    .finish = mt_finish,
    .train = mt_train,
    .translate_open = mt_translate_open,
    .translate = mt_translate_lines,
    .translate_close = mt_translate_close,
    .bench_open = mt_bench_open,
    .bench_step = mt_bench_step,
    .data_parallel = 1,
    .bench_close = mt_bench_close,
    .bench_batches = mt_bench_batches,
    .bench_gemms = mt_bench_gemms,
    .bench_flops = mt_bench_flops,
    .target = {"val_bleu", 20, 1},
    .paper = mt_paper,
    .paper_tables = mt_paper_tables,
};
