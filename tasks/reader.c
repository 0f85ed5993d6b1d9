/* tasks/reader.c — the attentive reader on the CNN "top4" cloze corpus (LN paper §6.2, RMS paper
 * §6.2/A.2; docs/papers.md#reader), with the norm inside its LSTMs, trained on the shared loop.
 *
 * The papers' code (Cooijmans' Attentive_reader, bn branch): d = 240 everywhere, bidirectional
 * encoders (RMS paper; --unidirectional for the LN paper), learned h0, the bilinear
 * passage-question attention term and the output's skip term on, dropout 0.5, softmax over the
 * whole vocabulary; Adam lr 8e-5 with the bias correction folded into lr_t and eps on the raw
 * v, batch 64, global clipping at 10 by the code's rule (tasks/train.h NB_CLIP_CODE: nothing is
 * clipped until the norm passes 100; --clip-rule standard for a clip to norm 10); batches are
 * consecutive slices in file order, entity ids permuted per training batch, the trailing partial
 * batch dropped; validation every 1,000 updates on the whole validation set, the best parameters
 * kept. */
#include "nn/mem.h"
#include "tasks/task.h"

#include <stddef.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/cloze.h"
#include "tasks/train.h"

static const char *const reader_datasets[] = {"cnn-top4", "synthetic", NULL};

/* reader's own options (tasks/taskopt.h). */
typedef struct reader_opts {
    int encoders;      /* 0 bidirectional (the RMS paper), 1 unidirectional (the LN paper) */
    int dim;           /* d, the LSTMs' and embeddings' width (240) */
    int eval_every;    /* training steps between validations (the code's validFreq, 1000) */
    int bn_everywhere; /* with --norm batch: BN on the attention and output layers too */
    int clip_rule;     /* 0 code (AR-repo attentive_reader.py's clip block), 1 standard */
} reader_opts;

static const char *const encoder_choices[] = {"bidirectional", "unidirectional", NULL};
static const char *const clip_rule_choices[] = {"code", "standard", NULL};

static const nb_task_opt reader_opts_decl[] = {
    {"encoders", NB_TOPT_CHOICE, offsetof(reader_opts, encoders), "E",
     "the passage and question encoders: bidirectional (RMS paper) or forward-only (LN paper)",
     encoder_choices},
    {"unidirectional", NB_TOPT_ALIAS, 0, NULL, "the same as --encoders unidirectional",
     .alias_of = "encoders", .alias_val = "unidirectional"},
    {"dim", NB_TOPT_INT, offsetof(reader_opts, dim), "N", "model width d", NULL, 1, 8192, 240},
    {"eval-every", NB_TOPT_INT, offsetof(reader_opts, eval_every), "N",
     "validate every N training steps (the code's validFreq)", NULL, 1, 1e9, 1000},
    {"bn-everywhere", NB_TOPT_FLAG, offsetof(reader_opts, bn_everywhere), NULL,
     "with --norm batch: BN on the attention and output layers too (Cooijmans' BN-everywhere; "
     "recorded as norm batch-everywhere)",
     .norm_as = "batch-everywhere"},
    {"clip-rule", NB_TOPT_CHOICE, offsetof(reader_opts, clip_rule), "R",
     "how --clip acts: code (the authors' attentive_reader.py: clip only when the norm passes "
     "clip^2, then scale by clip/sqrt(norm)) or standard (scale to norm clip)",
     clip_rule_choices},
    {NULL},
};

static const reader_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static nb_clip_rule clip_rule_of(const nb_train_cfg *cfg) {
    return opts_of(cfg)->clip_rule == 1 ? NB_CLIP_STANDARD : NB_CLIP_CODE;
}

static int reader_finish(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err) {
    if (opts_of(cfg)->bn_everywhere && nb_norm_get(cfg->norm.kind)->acts != NB_ON_FEATURES) {
        nb_errf(err,
                "--bn-everywhere adds BatchNorm to the BN-LSTM's attention and output layers: it "
                "needs --norm batch, not '%s'",
                nb_norm_name(cfg->norm.kind));
        return nb_hintf(err, "add --norm batch, or leave out --bn-everywhere");
    }
    return 0;
}

static void reader_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm); /* eps 1e-5 inside the sqrt, p 6.25% (ceil) */
    cfg->act = NB_ACT_TANH;
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.lr = 8e-5;
    cfg->adam.eps_corrected = 0; /* AR-repo training.adam: lr_t form, eps meets the raw v */
    cfg->epochs = 50;            /* about the RMS paper's 300k updates on the full corpus */
    cfg->steps = 0;
    cfg->batch = 64;
    cfg->eval_batch = 64;
    cfg->log_every = 20; /* the code's dispFreq */
    cfg->clip = 10;
    cfg->flush_denormals = 1;
}

static nb_reader_cfg model_cfg(const nb_train_cfg *cfg, int V, int B, int TD, int TQ) {
    nb_reader_cfg m = {.V = V,
                       .D = opts_of(cfg)->dim > 0 ? opts_of(cfg)->dim : 240,
                       .bidir = opts_of(cfg)->encoders == 0,
                       .Bmax = B,
                       .TDmax = TD,
                       .TQmax = TQ,
                       .keep = 0.5,
                       .norm = cfg->norm,
                       .bn_everywhere = opts_of(cfg)->bn_everywhere};
    return m;
}

typedef struct reader_run {
    const nb_train_cfg *cfg;
    nb_cloze data;
    nb_reader model;
    int32_t *perm;
    int *tokd, *tokq, *lend, *lenq, *ans;
} reader_run;

static double reader_step(void *self, int64_t bi, nb_rng *noise_rng) {
    reader_run *r = self;
    const int B = r->cfg->batch;
    int TD, TQ;
    nb_cloze_entity_perm(&r->data, r->perm, noise_rng);
    nb_cloze_batch(&r->data.train, (int)bi * B, B, r->perm, r->tokd, r->lend, &TD, r->tokq, r->lenq,
                   &TQ, r->ans);
    double loss = nb_reader_forward(&r->model, r->tokd, r->lend, TD, r->tokq, r->lenq, TQ, r->ans,
                                    B, 1, noise_rng);
    if (isfinite(loss)) nb_reader_backward(&r->model);
    return loss;
}

/* Data-parallel: rows [lo, hi) of batch bi (their own dropout streams; the entity permutation
 * drawn as every rank draws it), gradients of their loss over the whole batch. The rows are
 * padded to their own longest passage, which the masks make no difference to. */
static double reader_step_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise_rng) {
    reader_run *r = self;
    const int B = r->cfg->batch;
    int TD, TQ;
    nb_cloze_entity_perm(&r->data, r->perm, noise_rng);
    nb_cloze_batch(&r->data.train, (int)bi * B + lo, hi - lo, r->perm, r->tokd, r->lend, &TD,
                   r->tokq, r->lenq, &TQ, r->ans);
    r->model.row0 = lo;
    r->model.grad_rows = B;
    double loss = nb_reader_forward(&r->model, r->tokd, r->lend, TD, r->tokq, r->lenq, TQ, r->ans,
                                    hi - lo, 1, noise_rng);
    if (isfinite(loss)) nb_reader_backward(&r->model);
    return loss;
}

/* Validation as the code does it: whole batches in file order (the remainder dropped), no
 * entity permutation, no dropout; BatchNorm with the statistics of the batch at hand. */
static int reader_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    reader_run *r = self;
    if (final) return 0; /* the periodic evaluations already cover validation */
    const nb_cloze_split *s = &r->data.val;
    const int B = r->cfg->batch;
    long wrong = 0, n = 0;
    double nll = 0;
    /* data-parallel: every rank evaluates its share of the whole batches, then the sums */
    const nb_dist *Dd = r->cfg->dist && r->cfg->dist->size > 1 ? r->cfg->dist : NULL;
    for (int i = 0, k = 0; i + B <= s->n; i += B, k++) {
        if (Dd && k % Dd->size != Dd->rank) continue;
        int TD, TQ;
        nb_cloze_batch(s, i, B, NULL, r->tokd, r->lend, &TD, r->tokq, r->lenq, &TQ, r->ans);
        nll += B * nb_reader_forward(&r->model, r->tokd, r->lend, TD, r->tokq, r->lenq, TQ, r->ans,
                                     B, 0, NULL);
        wrong += r->model.nwrong;
        n += B;
    }
    if (Dd) {
        double sums[3] = {(double)wrong, nll, (double)n};
        Dd->sum_d(Dd->ctx, sums, 3);
        wrong = (long)sums[0];
        nll = sums[1];
        n = (long)sums[2];
    }
    if (n == 0) return nb_errf(err, "no complete validation batch of %d examples", B);
    nb_metric m[] = {{"val_error", 0, 0, (double)wrong / n}, {"val_nll", 0, 0, nll / n}};
    int k = max < 2 ? max : 2;
    memcpy(out, m, sizeof(nb_metric) * (size_t)k);
    return k;
}

/* For nb_check_batch_memory: the model and a batch's tokens at B rows, built and freed. */
typedef struct reader_build_ctx {
    const nb_train_cfg *cfg;
    int V, TD, TQ;
} reader_build_ctx;

static int reader_build(void *ctx, int B, nb_err *err) {
    const reader_build_ctx *c = ctx;
    nb_reader m;
    nb_rng rng;
    nb_rng_seed(&rng, c->cfg->seed, NB_STREAM_INIT);
    nb_reader_cfg mc = model_cfg(c->cfg, c->V, B, c->TD, c->TQ);
    if (nb_reader_init(&m, &mc, &rng, err) != 0) return -1;
    nb_reader_free(&m);
    nb_mem_note((size_t)B * sizeof(int) * ((size_t)c->TD + c->TQ + 3));
    return 0;
}

static int reader_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status,
                        nb_err *err) {
    int rc = -1, have_data = 0, have_model = 0;
    reader_run r = {.cfg = cfg};
    if (cfg->dist && cfg->dist->size > 1 && cfg->norm.bn_sum) {
        /* the LSTMs take BN statistics per time step, and each rank's rows have their own
         * number of steps: a sum over the ranks at every step would not line up */
        nb_errf(err, "reader cannot take BatchNorm statistics over the ranks (--bn-sync)");
        nb_hintf(err, "leave out --bn-sync (per-rank statistics), or run in one process");
        return -1;
    }
    if (nb_cloze_load(&r.data, cfg->dataset, cfg->data_dir, cfg->subset, cfg->seed, err) != 0)
        goto out;
    have_data = 1;
    if (sink->param && sink->param(sink->ctx, "data_source", r.data.source, err) != 0) goto out;
    /* since stop 15 every row's dropout masks come from its own streams (nn/reader.h), so that
     * a batch split over ranks draws what one process draws; earlier runs drew them in turn */
    if (sink->param && sink->param(sink->ctx, "dropout_streams", "per-row", err) != 0) goto out;
    const int B = cfg->batch;
    if (B > r.data.train.n) {
        nb_errf(err, "batch size %d is larger than the %d training examples", B, r.data.train.n);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }
    if (B > r.data.val.n) {
        nb_errf(err, "batch size %d is larger than the %d validation examples", B, r.data.val.n);
        nb_hintf(err, "lower --batch");
        goto out;
    }
    int TD = r.data.train.maxd > r.data.val.maxd ? r.data.train.maxd : r.data.val.maxd;
    int TQ = r.data.train.maxq > r.data.val.maxq ? r.data.train.maxq : r.data.val.maxq;
    TD++;
    TQ++;
    nb_flush_denormals(cfg->flush_denormals);
    nb_rng init_rng;
    nb_rng_seed(&init_rng, cfg->seed, NB_STREAM_INIT);
    reader_build_ctx bc = {cfg, r.data.V, TD, TQ};
    char what[48];
    snprintf(what, sizeof what, "--batch %d", B);
    if (nb_check_batch_memory(reader_build, &bc, B, what, err) != 0) goto out;
    nb_reader_cfg mc = model_cfg(cfg, r.data.V, B, TD, TQ);
    if (nb_reader_init(&r.model, &mc, &init_rng, err) != 0) goto out;
    have_model = 1;
    r.perm = malloc(sizeof(int32_t) * (size_t)r.data.V);
    r.tokd = malloc(sizeof(int) * (size_t)B * TD);
    r.tokq = malloc(sizeof(int) * (size_t)B * TQ);
    r.lend = malloc(sizeof(int) * (size_t)B);
    r.lenq = malloc(sizeof(int) * (size_t)B);
    r.ans = malloc(sizeof(int) * (size_t)B);
    if (!r.perm || !r.tokd || !r.tokq || !r.lend || !r.lenq || !r.ans) {
        nb_errf(err, "out of memory for the batches");
        goto out;
    }
    nb_trainer t = {.self = &r,
                    .params = r.model.params,
                    .grads = r.model.grads,
                    .adam_m = r.model.adam_m,
                    .adam_v = r.model.adam_v,
                    .layout = &r.model.layout,
                    .steps_per_epoch = r.data.train.n / B,
                    .eval_every = opts_of(cfg)->eval_every > 0 ? opts_of(cfg)->eval_every : 1000,
                    .select_metric = "val_error",
                    .select_max = 0,
                    .clip_rule = clip_rule_of(cfg),
                    .step = reader_step,
                    .step_shard = reader_step_shard,
                    .evaluate = reader_evaluate};
    /* what the ranks of a data-parallel run compare before the first step */
    const nb_cloze_split *fs[2] = {&r.data.train, &r.data.val};
    static const char *const fn[2][3] = {{"train.passages", "train.questions", "train.answers"},
                                         {"val.passages", "val.questions", "val.answers"}};
    for (int k = 0; k < 2; k++) {
        const nb_cloze_split *c = fs[k];
        nb_train_fp(&t, fn[k][0], c->dtok, sizeof(int32_t) * (size_t)(c->n ? c->doff[c->n] : 0));
        nb_train_fp(&t, fn[k][1], c->qtok, sizeof(int32_t) * (size_t)(c->n ? c->qoff[c->n] : 0));
        nb_train_fp(&t, fn[k][2], c->ans, sizeof(int32_t) * (size_t)c->n);
    }
    nb_train_fp(&t, "entities", r.data.ents, sizeof(int32_t) * (size_t)r.data.nents);
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    free(r.perm);
    free(r.tokd);
    free(r.tokq);
    free(r.lend);
    free(r.lenq);
    free(r.ans);
    if (have_model) nb_reader_free(&r.model);
    if (have_data) nb_cloze_free(&r.data);
    return rc;
}

/* ---- benchmark: the issue's size, batch cfg->batch, 100-token passages, 20-token questions,
 * a 50,000-word vocabulary, random tokens ----------------------------------------------------- */

enum { BENCH_V = 50000, BENCH_TD = 100, BENCH_TQ = 20 };

typedef struct reader_bench {
    nb_reader model;
    int *tokd, *tokq, *lend, *lenq, *ans, B;
    long t;
    nb_adam_cfg adam;
    double clip;
    nb_clip_rule clip_rule;
    nb_rng noise;
    nb_dist *dist; /* data-parallel (mpirun): this rank's rows lo..hi of the batch */
    int lo, hi;
} reader_bench;

static void reader_bench_close(void *p) {
    reader_bench *b = p;
    if (!b) return;
    nb_reader_free(&b->model);
    free(b->tokd);
    free(b->tokq);
    free(b->lend);
    free(b->lenq);
    free(b->ans);
    free(b);
}

static void *reader_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    reader_bench *b = calloc(1, sizeof *b);
    if (!b) return nb_errf(err, "out of memory"), NULL;
    b->B = cfg->batch;
    b->adam = cfg->adam;
    b->clip = cfg->clip;
    b->clip_rule = clip_rule_of(cfg);
    if (nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES && b->B < 2) {
        free(b);
        return nb_errf(err, "batch norm needs a batch of at least 2"), NULL;
    }
    nb_rng rng;
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_INIT);
    reader_build_ctx bc = {cfg, BENCH_V, BENCH_TD, BENCH_TQ};
    char what[48];
    snprintf(what, sizeof what, "--batch %d", b->B);
    nb_reader_cfg mc = model_cfg(cfg, BENCH_V, b->B, BENCH_TD, BENCH_TQ);
    if (nb_check_batch_memory(reader_build, &bc, b->B, what, err) != 0 ||
        nb_reader_init(&b->model, &mc, &rng, err) != 0) {
        free(b);
        return NULL;
    }
    b->tokd = malloc(sizeof(int) * (size_t)b->B * BENCH_TD);
    b->tokq = malloc(sizeof(int) * (size_t)b->B * BENCH_TQ);
    b->lend = malloc(sizeof(int) * (size_t)b->B);
    b->lenq = malloc(sizeof(int) * (size_t)b->B);
    b->ans = malloc(sizeof(int) * (size_t)b->B);
    if (!b->tokd || !b->tokq || !b->lend || !b->lenq || !b->ans) {
        reader_bench_close(b);
        return nb_errf(err, "out of memory"), NULL;
    }
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_SYNTH);
    for (int i = 0; i < b->B * BENCH_TD; i++)
        b->tokd[i] = (int)nb_rng_below(&rng, BENCH_V);
    for (int i = 0; i < b->B * BENCH_TQ; i++)
        b->tokq[i] = (int)nb_rng_below(&rng, BENCH_V);
    for (int i = 0; i < b->B; i++) {
        b->lend[i] = BENCH_TD;
        b->lenq[i] = BENCH_TQ;
        b->ans[i] = (int)nb_rng_below(&rng, BENCH_V);
    }
    nb_rng_seed(&b->noise, cfg->seed, NB_STREAM_DROPOUT);
    nb_flush_denormals(cfg->flush_denormals);
    if (cfg->dist && cfg->dist->size > 1) {
        const nb_dist *D = b->dist = cfg->dist;
        if (cfg->norm.bn_sum) {
            reader_bench_close(b);
            return nb_errf(err, "reader cannot take BatchNorm statistics over the ranks "
                                "(--bn-sync)"),
                   NULL;
        }
        b->lo = (int)((int64_t)b->B * D->rank / D->size);
        b->hi = (int)((int64_t)b->B * (D->rank + 1) / D->size);
    }
    return b;
}

/* One training step as the loop takes it: zero the gradients, forward, backward, global
 * clipping, Adam over every parameter. */
static double reader_bench_step(void *p) {
    reader_bench *b = p;
    double ts = nb_now();
    nb_reader *m = &b->model;
    memset(m->grads, 0, sizeof(float) * m->layout.total);
    nb_trainer tr = {.params = m->params,
                     .grads = m->grads,
                     .adam_m = m->adam_m,
                     .adam_v = m->adam_v,
                     .layout = &m->layout,
                     .clip_rule = b->clip_rule};
    if (b->dist) { /* this rank's rows (their dropout streams), then the loop's sums */
        const int lo = b->lo, n = b->hi - b->lo;
        m->row0 = lo;
        m->grad_rows = b->B;
        double loss = nb_reader_forward(m, b->tokd + (size_t)lo * BENCH_TD, b->lend + lo, BENCH_TD,
                                        b->tokq + (size_t)lo * BENCH_TQ, b->lenq + lo, BENCH_TQ,
                                        b->ans + lo, n, 1, &b->noise);
        nb_reader_backward(m);
        nb_train_dist_sum(b->dist, &tr, loss, n, b->B, NULL);
    } else {
        nb_reader_forward(m, b->tokd, b->lend, BENCH_TD, b->tokq, b->lenq, BENCH_TQ, b->ans, b->B,
                          1, &b->noise);
        nb_reader_backward(m);
    }
    b->t++;
    nb_train_update(&tr, b->clip, &b->adam, b->t, b->t);
    if (b->dist) nb_train_dist_buffers(b->dist, &tr);
    return nb_now() - ts;
}

static const int reader_bench_batches[] = {64, 0};

static const char reader_paper[] =
    "Neither paper gives final validation errors for the attentive reader: RMS paper Fig. 5 "
    "(bidirectional, ~300k steps) and LN paper Fig. 2 (unidirectional, ~800k) show curves only; "
    "LN and RMSNorm converge faster than BatchNorm and reach lower validation error, pRMSNorm "
    "slightly worse than RMSNorm (docs/papers.md#reader-reported). RMS paper Table 6, seconds per "
    "100 training steps on one TITAN X (Pascal), Theano (hardware-specific; compare ratios only): "
    "Baseline 315±6.3, BN-Everywhere 348±10.5, BN-LSTM 345±11.2, LayerNorm 392±5.7, RMSNorm "
    "333±5.2 (15.1% faster than LayerNorm), pRMSNorm 330±5.5 (15.8%); its BN is cuDNN-based and "
    "not comparable.";

const nb_task nb_task_reader = {
    .name = "reader",
    .summary = "attentive reader, bi-LSTM d=240, CNN top4 cloze: LN §6.2, RMS §6.2",
    .default_dataset = "cnn-top4",
    .datasets = reader_datasets,
    .opts = reader_opts_decl,
    .opts_size = sizeof(reader_opts),
    .finish = reader_finish,
    .defaults = reader_defaults,
    .train = reader_train,
    .bench_open = reader_bench_open,
    .bench_step = reader_bench_step,
    .data_parallel = 1,
    .bench_close = reader_bench_close,
    .bench_batches = reader_bench_batches,
    .target = {"val_error", 0.5, 0},
    .paper = reader_paper,
};
