/* tasks/order.c — order-embeddings (Vendrov et al. 2016) for COCO caption–image retrieval, the
 * LN paper's Table 2 and the RMSNorm paper's Table 7/8 (docs/papers.md#order).
 *
 * Model, loss and norms: nn/oe.h and nn/gru.h. Training as the OE code: each epoch shuffles the
 * training images and picks one of each image's five captions at random (data stream); batches
 * of 128 (image, caption) pairs, the trailing partial batch dropped; the code's Adam (its
 * bias-correction quirk, NB_ADAM_BIAS_KIROS, unless --adam-fix), every parameter tensor's
 * gradient clipped at norm 2; validation every 300 updates on dev fold 0 (the first 1,000 val
 * images and their 5,000 captions), the parameters with the best image-retrieval
 * R@1+R@5+R@10 kept; at the end the 5-fold test (1,000 images, 5,000 captions per fold),
 * averaged over folds. The training loss is the code's: a SUM over the batch's pairs. */
#include "nn/mem.h"
#include "tasks/task.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/coco.h"
#include "tasks/order.h"
#include "tasks/train.h"

static const char *const order_datasets[] = {"coco-oe", "synthetic", NULL};

/* order's own options (tasks/taskopt.h). */
typedef struct order_opts {
    int dim;            /* the GRU's and the joint embedding's width (1024) */
    int dim_word;       /* word embedding width (300) */
    double margin;      /* the order-violation loss margin (0.05) */
    int eval_every;     /* training steps between validations (300) */
    double clip_tensor; /* each parameter tensor's gradient norm clipped at this (2; 0 off) */
    int adam_fix;       /* standard Adam bias correction instead of the code's */
} order_opts;

static const nb_task_opt order_opts_decl[] = {
    {"dim", NB_TOPT_INT, offsetof(order_opts, dim), "N", "GRU and joint embedding width", NULL, 1,
     8192, 1024},
    {"dim-word", NB_TOPT_INT, offsetof(order_opts, dim_word), "N", "word embedding width", NULL, 1,
     8192, 300},
    {"margin", NB_TOPT_DOUBLE, offsetof(order_opts, margin), "X", "loss margin", NULL, 0, 100,
     0.05},
    {"eval-every", NB_TOPT_INT, offsetof(order_opts, eval_every), "N",
     "validate every N training steps (the code's validFreq)", NULL, 1, 1e9, 300},
    {"clip-tensor", NB_TOPT_DOUBLE, offsetof(order_opts, clip_tensor), "X",
     "clip each parameter tensor's gradient norm at X (0: off)", NULL, 0, 1e12, 2},
    {"adam-fix", NB_TOPT_FLAG, offsetof(order_opts, adam_fix), NULL,
     "standard Adam bias correction instead of the code's quirk (--adam-bias kiros)"},
    {NULL},
};

static const order_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static int order_finish(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err) {
    if (!opts_of(cfg)->adam_fix) return 0;
    for (int i = 0; i < ngiven; i++)
        if (strcmp(given[i].name, "adam-bias") == 0)
            return nb_errf(err, "--adam-fix and --adam-bias are the same choice: give one");
    cfg->adam.bias = NB_ADAM_BIAS_STANDARD;
    return 0;
}

static void order_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm); /* eps 1e-5 inside the sqrt, p 6.25% (ceil) */
    cfg->act = NB_ACT_TANH;                /* the GRU's candidate activation (recorded only) */
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.bias = NB_ADAM_BIAS_KIROS; /* optim.py: b1 = 0.1, b2 = 0.001 in the correction */
    cfg->adam.eps_corrected = 0;         /* eps outside the sqrt, on the raw v */
    cfg->epochs = 100;                   /* driver.py max_epochs */
    cfg->steps = 0;
    cfg->batch = 128;
    cfg->eval_batch = 128;
    cfg->log_every = 50;
    cfg->clip = 0;
    cfg->flush_denormals = 1;
}

/* ---- evaluation ------------------------------------------------------------------------------ */

enum { M_R1 = NB_RET_R1, M_R5, M_R10, M_MEDR, M_MEANR, M_N };

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* R@1/5/10 (percent), median rank (floor(median)+1) and mean rank (mean+1) of n 0-based ranks,
 * as evaluation.py computes them; sorts ranks. */
static void rank_stats(int *ranks, int n, double *out) {
    double r1 = 0, r5 = 0, r10 = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        r1 += ranks[i] < 1;
        r5 += ranks[i] < 5;
        r10 += ranks[i] < 10;
        sum += ranks[i];
    }
    qsort(ranks, (size_t)n, sizeof *ranks, cmp_int);
    double med = n % 2 ? ranks[n / 2] : 0.5 * (ranks[n / 2 - 1] + ranks[n / 2]);
    out[M_R1] = 100 * r1 / n;
    out[M_R5] = 100 * r5 / n;
    out[M_R10] = 100 * r10 / n;
    out[M_MEDR] = floor(med) + 1;
    out[M_MEANR] = sum / n + 1;
}

/* See tasks/order.h. */
void nb_order_retrieval(const float *E, int ncap, int nimg, int *rk, double *cap, double *img) {
    for (int i = 0; i < ncap; i++) {
        const float *e = E + (size_t)i * nimg;
        const int g = i / 5;
        const float gt = e[g];
        int r = 0;
        for (int j = 0; j < nimg; j++)
            r += e[j] < gt || (j < g && e[j] == gt);
        rk[i] = r;
    }
    rank_stats(rk, ncap, img);
    for (int j = 0; j < nimg; j++) {
        float best = INFINITY;
        int bc = 5 * j;
        for (int c = 5 * j; c < 5 * j + 5; c++)
            if (E[(size_t)c * nimg + j] < best) best = E[(size_t)c * nimg + j], bc = c;
        int r = 0;
        for (int c = 0; c < ncap; c++)
            r += E[(size_t)c * nimg + j] < best || (c < bc && E[(size_t)c * nimg + j] == best);
        rk[j] = r;
    }
    rank_stats(rk, nimg, cap);
}

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct order_run {
    const nb_train_cfg *cfg;
    nb_oe_data data;
    nb_oe model;
    int Tmax, fold; /* steps of the longest caption; images per evaluation fold */
    int *perm;      /* (train images) this epoch's order */
    int *pick;      /* (train images) this epoch's caption of each image, 0..4 */
    int *tok, *steps;
    float *img;     /* batch: (Tmax, Bmax) tokens, (Bmax) steps, (Bmax, dim) features */
    float *es, *ec; /* (5*fold, H) caption and (fold, H) image embeddings */
    float *E;       /* (5*fold, fold) */
    int *rk;        /* (5*fold) */
    float *all;     /* data-parallel: (4, batch, H) every rank's s, c, then ds, dc */
} order_run;

/* The processes of a data-parallel run, or NULL in one process. */
static const nb_dist *dist_of(const order_run *r) {
    return r->cfg->dist && r->cfg->dist->size > 1 ? r->cfg->dist : NULL;
}

/* Caption c of split s into column r of a (T, B) token matrix (words, then the end token 0 and
 * padding 0); returns its steps (words + 1). */
static int put_caption(int *tok, int T, int B, int r, const nb_oe_split *s, int c) {
    int len = s->start[c + 1] - s->start[c];
    for (int t = 0; t < T; t++)
        tok[(size_t)t * B + r] = t < len ? s->tok[s->start[c] + t] : 0;
    return len + 1;
}

/* Embeds captions [c0, c0+nc) and images [i0, i0+ni) of split s into r->es, r->ec. Data-
 * parallel, every rank embeds its share of the chunks (round robin; the same chunks as one
 * process) and the sums over the ranks of the zero-filled rest gather them. */
static void embed(order_run *r, const nb_oe_split *s, int c0, int nc, int i0, int ni) {
    nb_oe *m = &r->model;
    const int H = m->H, EB = m->Bmax;
    const nb_dist *D = dist_of(r);
    if (D) {
        memset(r->es, 0, sizeof(float) * (size_t)nc * H);
        memset(r->ec, 0, sizeof(float) * (size_t)ni * H);
    }
    int chunk = 0;
    for (int a = 0; a < nc; a += EB) {
        if (D && chunk++ % D->size != D->rank) continue;
        int B = nc - a < EB ? nc - a : EB, T = 1;
        for (int k = 0; k < B; k++) {
            int len = s->start[c0 + a + k + 1] - s->start[c0 + a + k];
            if (len + 1 > T) T = len + 1;
        }
        for (int k = 0; k < B; k++)
            r->steps[k] = put_caption(r->tok, T, B, k, s, c0 + a + k);
        nb_oe_encode_captions(m, r->tok, r->steps, T, B, 0);
        memcpy(r->es + (size_t)a * H, m->s, sizeof(float) * (size_t)B * H);
    }
    for (int a = 0; a < ni; a += EB) {
        if (D && chunk++ % D->size != D->rank) continue;
        int B = ni - a < EB ? ni - a : EB;
        nb_oe_encode_images(m, s->img + (size_t)(i0 + a) * s->dim, B);
        memcpy(r->ec + (size_t)a * H, m->c, sizeof(float) * (size_t)B * H);
    }
    if (D) {
        D->sum_f(D->ctx, r->es, (size_t)nc * H);
        D->sum_f(D->ctx, r->ec, (size_t)ni * H);
    }
}

/* Metrics of fold k of split s: cap[M_N], img[M_N]. */
static void eval_fold(order_run *r, const nb_oe_split *s, int k, int fold, double *cap,
                      double *img) {
    embed(r, s, 5 * k * fold, 5 * fold, k * fold, fold);
    nb_order_errors(r->E, r->es, r->ec, 5 * fold, fold, r->model.H);
    nb_order_retrieval(r->E, 5 * fold, fold, r->rk, cap, img);
}

static int order_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    order_run *r = self;
    static const char *const mname[M_N] = {"r1", "r5", "r10", "medr", "meanr"};
    static char names[2][2][M_N][24]; /* [test][img][metric] */
    int n = 0;
    double cap[M_N], img[M_N];
    if (!final) {
        const nb_oe_split *d = &r->data.dev;
        eval_fold(r, d, 0, d->nimg < r->fold ? d->nimg : r->fold, cap, img);
        for (int w = 0; w < 2; w++)
            for (int m = 0; m < M_N && n < max; m++) {
                snprintf(names[0][w][m], sizeof names[0][w][m], "val_%s_%s", w ? "img" : "cap",
                         mname[m]);
                out[n++] = (nb_metric){names[0][w][m], 0, 0, w ? img[m] : cap[m]};
            }
        if (n < max)
            out[n++] = (nb_metric){"val_img_rsum", 0, 0, img[M_R1] + img[M_R5] + img[M_R10]};
        return n;
    }
    const nb_oe_split *t = &r->data.test;
    int fold = t->nimg < r->fold ? t->nimg : r->fold, nf = t->nimg / fold;
    if (nf > 5) nf = 5;
    double sc[M_N] = {0}, si[M_N] = {0};
    for (int k = 0; k < nf; k++) {
        eval_fold(r, t, k, fold, cap, img);
        for (int m = 0; m < M_N; m++) {
            sc[m] += cap[m] / nf;
            si[m] += img[m] / nf;
        }
    }
    for (int w = 0; w < 2; w++)
        for (int m = 0; m < M_N && n < max; m++) {
            snprintf(names[1][w][m], sizeof names[1][w][m], "test_%s_%s", w ? "img" : "cap",
                     mname[m]);
            out[n++] = (nb_metric){names[1][w][m], 0, 0, w ? si[m] : sc[m]};
        }
    if (n < max) out[n++] = (nb_metric){"test_folds", 0, 0, (double)nf};
    (void)err;
    return n;
}

static void order_epoch_begin(void *self, int epoch, nb_rng *data_rng) {
    order_run *r = self;
    int n = r->data.train.nimg;
    nb_rng_shuffle(data_rng, r->perm, (size_t)n);
    for (int i = 0; i < n; i++)
        r->pick[i] = (int)nb_rng_below(data_rng, 5);
}

static double order_step(void *self, int64_t bi, nb_rng *noise_rng) {
    order_run *r = self;
    const nb_oe_split *s = &r->data.train;
    const int B = r->cfg->batch;
    int T = 1;
    for (int k = 0; k < B; k++) {
        int i = r->perm[bi * B + k], c = 5 * i + r->pick[i];
        int len = s->start[c + 1] - s->start[c];
        if (len + 1 > T) T = len + 1;
    }
    for (int k = 0; k < B; k++) {
        int i = r->perm[bi * B + k];
        r->steps[k] = put_caption(r->tok, T, B, k, s, 5 * i + r->pick[i]);
        memcpy(r->img + (size_t)k * s->dim, s->img + (size_t)i * s->dim, sizeof(float) * s->dim);
    }
    double loss = nb_oe_forward(&r->model, r->tok, r->steps, T, r->img, B);
    if (isfinite(loss)) nb_oe_backward(&r->model);
    return loss;
}

/* Data-parallel, the forward and backward of rows [lo, hi) of a batch of B: tok (T, hi - lo)
 * time-major, steps and img (hi - lo, F) of those rows; all (4, B, H) scratch. Each rank embeds
 * its rows; the sums over the ranks of zero-filled (B, H) buffers gather the whole batch's
 * embeddings (adding zeros is exact), so every rank forms the whole batch's loss, as one process
 * does, and its gradients with respect to all the embeddings; each then backpropagates its own
 * rows (gradients ACCUMULATED). Returns the batch's loss (a sum over its pairs) on every rank:
 * the loop's sum weighted by rows/batch gives it back. */
static double shard_pass(nb_oe *m, nb_dist *D, float *all, const int *tok, const int *steps, int T,
                         const float *img, int B, int lo, int hi) {
    const int n = hi - lo, H = m->H;
    const size_t BH = (size_t)B * H;
    float *as = all, *ac = as + BH, *ads = ac + BH, *adc = ads + BH;
    memset(as, 0, sizeof(float) * 2 * BH);
    if (n > 0) {
        memcpy(m->img, img, sizeof(float) * (size_t)n * m->F);
        nb_oe_encode_captions(m, tok, steps, T, n, 1);
        nb_oe_encode_images(m, m->img, n);
        memcpy(as + (size_t)lo * H, m->s, sizeof(float) * (size_t)n * H);
        memcpy(ac + (size_t)lo * H, m->c, sizeof(float) * (size_t)n * H);
    }
    double tc = nb_now(); /* the gather is communication too (allreduce_ms_per_step) */
    D->sum_f(D->ctx, as, 2 * BH);
    D->comm_seconds += nb_now() - tc;
    nb_order_errors(m->E, as, ac, B, B, H);
    double loss = nb_order_loss(m->G, m->E, B, m->margin);
    if (!isfinite(loss) || n == 0) return loss;
    memset(ads, 0, sizeof(float) * 2 * BH);
    nb_order_loss_backward(ads, adc, m->G, as, ac, B, H);
    memcpy(m->ds, ads + (size_t)lo * H, sizeof(float) * (size_t)n * H);
    memcpy(m->dc, adc + (size_t)lo * H, sizeof(float) * (size_t)n * H);
    nb_oe_backward_embeddings(m);
    return loss;
}

/* Data-parallel: rows [lo, hi) of batch bi (shard_pass). */
static double order_step_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise_rng) {
    order_run *r = self;
    const nb_oe_split *s = &r->data.train;
    const int B = r->cfg->batch, n = hi - lo;
    (void)noise_rng;
    int T = 1;
    for (int k = 0; k < n; k++) {
        int i = r->perm[bi * B + lo + k], c = 5 * i + r->pick[i];
        int len = s->start[c + 1] - s->start[c];
        if (len + 1 > T) T = len + 1;
    }
    for (int k = 0; k < n; k++) {
        int i = r->perm[bi * B + lo + k];
        r->steps[k] = put_caption(r->tok, T, n, k, s, 5 * i + r->pick[i]);
        memcpy(r->img + (size_t)k * s->dim, s->img + (size_t)i * s->dim, sizeof(float) * s->dim);
    }
    return shard_pass(&r->model, r->cfg->dist, r->all, r->tok, r->steps, T, r->img, B, lo, hi);
}

static void order_run_free(order_run *r, int have_model) {
    if (have_model) nb_oe_free(&r->model);
    nb_oe_data_free(&r->data);
    free(r->perm);
    free(r->pick);
    free(r->tok);
    free(r->steps);
    free(r->img);
    free(r->es);
    free(r->ec);
    free(r->E);
    free(r->rk);
    free(r->all);
}

/* For nb_check_batch_memory: the model and a batch's captions and images at B rows. */
typedef struct order_build_ctx {
    const nb_train_cfg *cfg;
    int nwords, dim, Tmax;
} order_build_ctx;

static int order_build(void *ctx, int B, nb_err *err) {
    const order_build_ctx *c = ctx;
    nb_oe m;
    nb_rng rng;
    nb_rng_seed(&rng, c->cfg->seed, NB_STREAM_INIT);
    if (nb_oe_init(&m, c->nwords, opts_of(c->cfg)->dim_word, opts_of(c->cfg)->dim, c->dim, c->Tmax,
                   B, opts_of(c->cfg)->margin, &c->cfg->norm, &rng, err) != 0)
        return -1;
    nb_oe_free(&m);
    nb_mem_note((size_t)B * (sizeof(int) * ((size_t)c->Tmax + 1) + sizeof(float) * (size_t)c->dim));
    return 0;
}

static int order_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status,
                       nb_err *err) {
    int rc = -1, have_model = 0;
    order_run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    if (dist_of(&r) && cfg->norm.bn_sum) {
        /* the GRU takes BN statistics per time step, and each rank's captions have their own
         * number of steps: a sum over the ranks at every step would not line up */
        nb_errf(err, "order cannot take BatchNorm statistics over the ranks (--bn-sync)");
        nb_hintf(err, "leave out --bn-sync (per-rank statistics), or run in one process");
        return -1;
    }
    if (nb_oe_data_load(&r.data, cfg->dataset, cfg->data_dir, cfg->subset, err) != 0) goto out;
    if (sink->param) {
        char v[32];
        snprintf(v, sizeof v, "%d", r.data.nwords);
        if (sink->param(sink->ctx, "data_source", r.data.source, err) != 0 ||
            sink->param(sink->ctx, "vocabulary", v, err) != 0)
            goto out;
    }
    const nb_oe_split *tr = &r.data.train;
    if (cfg->batch > tr->nimg) {
        nb_errf(err, "batch size %d is larger than the %d training images", cfg->batch, tr->nimg);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }
    nb_flush_denormals(cfg->flush_denormals);
    r.Tmax = r.data.maxlen + 1;
    r.fold = 1000;
    /* evaluation embeds at most a fold's captions at once: the evaluation batch holds no more
     * rows than that (--eval-batch 1000000 on a small split holds the split) */
    int most = r.data.dev.ncap > r.data.test.ncap ? r.data.dev.ncap : r.data.test.ncap;
    if (most > 5 * r.fold) most = 5 * r.fold;
    int eb = cfg->eval_batch < most ? cfg->eval_batch : most;
    int Bmax = cfg->batch > eb ? cfg->batch : eb;
    order_build_ctx bc = {cfg, r.data.nwords, tr->dim, r.Tmax};
    char what[96];
    snprintf(what, sizeof what, "--batch %d with --eval-batch %d", cfg->batch, cfg->eval_batch);
    if (nb_check_batch_memory(order_build, &bc, Bmax, what, err) != 0) goto out;
    nb_rng init_rng;
    nb_rng_seed(&init_rng, cfg->seed, NB_STREAM_INIT);
    if (nb_oe_init(&r.model, r.data.nwords, opts_of(cfg)->dim_word, opts_of(cfg)->dim, tr->dim,
                   r.Tmax, Bmax, opts_of(cfg)->margin, &cfg->norm, &init_rng, err) != 0)
        goto out;
    have_model = 1;
    const int H = opts_of(cfg)->dim, F = r.fold;
    r.perm = malloc(sizeof(int) * (size_t)tr->nimg);
    r.pick = calloc((size_t)tr->nimg, sizeof(int));
    r.tok = malloc(sizeof(int) * (size_t)r.Tmax * Bmax);
    r.steps = malloc(sizeof(int) * (size_t)Bmax);
    r.img = malloc(sizeof(float) * (size_t)Bmax * tr->dim);
    r.es = malloc(sizeof(float) * (size_t)5 * F * H);
    r.ec = malloc(sizeof(float) * (size_t)F * H);
    r.E = malloc(sizeof(float) * (size_t)5 * F * F);
    r.rk = malloc(sizeof(int) * (size_t)5 * F);
    if (dist_of(&r)) r.all = malloc(sizeof(float) * 4 * (size_t)cfg->batch * H);
    if (!r.perm || !r.pick || !r.tok || !r.steps || !r.img || !r.es || !r.ec || !r.E || !r.rk ||
        (dist_of(&r) && !r.all)) {
        nb_errf(err, "out of memory for the order task's buffers");
        goto out;
    }
    for (int i = 0; i < tr->nimg; i++)
        r.perm[i] = i;
    nb_trainer t = {.self = &r,
                    .params = r.model.params,
                    .grads = r.model.grads,
                    .adam_m = r.model.adam_m,
                    .adam_v = r.model.adam_v,
                    .layout = &r.model.layout,
                    .steps_per_epoch = tr->nimg / cfg->batch,
                    .eval_every = opts_of(cfg)->eval_every,
                    .select_metric = "val_img_rsum",
                    .select_max = 1,
                    .clip_per_tensor = opts_of(cfg)->clip_tensor,
                    .extra = {{r.perm, sizeof(int) * (size_t)tr->nimg},
                              {r.pick, sizeof(int) * (size_t)tr->nimg}},
                    .nextra = 2,
                    .epoch_begin = order_epoch_begin,
                    .step = order_step,
                    .step_shard = order_step_shard,
                    .evaluate = order_evaluate};
    /* what the ranks of a data-parallel run compare before the first step */
    const nb_oe_split *fs[3] = {&r.data.train, &r.data.dev, &r.data.test};
    static const char *const fn[3][2] = {{"train.images", "train.captions"},
                                         {"dev.images", "dev.captions"},
                                         {"test.images", "test.captions"}};
    for (int k = 0; k < 3; k++) {
        const nb_oe_split *o = fs[k];
        nb_train_fp(&t, fn[k][0], o->img, sizeof(float) * (size_t)o->nimg * o->dim);
        nb_train_fp(&t, fn[k][1], o->tok, sizeof(int) * (size_t)(o->ncap ? o->start[o->ncap] : 0));
    }
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    order_run_free(&r, have_model);
    return rc;
}

/* ---- benchmark ------------------------------------------------------------------------------- */

/* The benchmark's vocabulary: about the size of COCO's without a frequency threshold (the
 * code's Adam updates the whole embedding matrix every step). Captions of 13 words (14 steps). */
enum { BENCH_WORDS = 25000, BENCH_LEN = 13, BENCH_DIM = 4096 };

typedef struct order_bench {
    nb_oe model;
    int *tok, *steps, B;
    float *img;
    long t;
    nb_adam_cfg adam;
    double clip;
    /* data-parallel (mpirun): this rank's rows lo..hi of the batch, their tokens (T, hi - lo),
     * and shard_pass's scratch */
    nb_dist *dist;
    int lo, hi, *stok;
    float *all;
} order_bench;

static void order_bench_close(void *p) {
    order_bench *b = p;
    if (!b) return;
    nb_oe_free(&b->model);
    free(b->tok);
    free(b->steps);
    free(b->img);
    free(b->stok);
    free(b->all);
    free(b);
}

static void *order_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    order_bench *b = calloc(1, sizeof *b);
    if (!b) return nb_errf(err, "out of memory"), NULL;
    nb_rng rng;
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_INIT);
    b->B = cfg->batch;
    b->adam = cfg->adam;
    b->clip = opts_of(cfg)->clip_tensor;
    order_build_ctx bc = {cfg, BENCH_WORDS, BENCH_DIM, BENCH_LEN + 1};
    char what[48];
    snprintf(what, sizeof what, "--batch %d", b->B);
    if (nb_check_batch_memory(order_build, &bc, b->B, what, err) != 0) {
        free(b);
        return NULL;
    }
    if (nb_oe_init(&b->model, BENCH_WORDS, opts_of(cfg)->dim_word, opts_of(cfg)->dim, BENCH_DIM,
                   BENCH_LEN + 1, b->B, opts_of(cfg)->margin, &cfg->norm, &rng, err) != 0) {
        free(b);
        return NULL;
    }
    const int T = BENCH_LEN + 1;
    b->tok = malloc(sizeof(int) * (size_t)T * b->B);
    b->steps = malloc(sizeof(int) * (size_t)b->B);
    b->img = malloc(sizeof(float) * (size_t)b->B * BENCH_DIM);
    if (!b->tok || !b->steps || !b->img) {
        order_bench_close(b);
        return nb_errf(err, "out of memory"), NULL;
    }
    nb_flush_denormals(cfg->flush_denormals);
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_SYNTH);
    for (int k = 0; k < b->B; k++) {
        b->steps[k] = T;
        for (int t = 0; t < T; t++)
            b->tok[(size_t)t * b->B + k] =
                t < BENCH_LEN ? 2 + (int)nb_rng_below(&rng, BENCH_WORDS - 2) : 0;
        double ss = 0;
        float *x = b->img + (size_t)k * BENCH_DIM;
        for (int j = 0; j < BENCH_DIM; j++) {
            double v = nb_rng_normal(&rng);
            x[j] = (float)(v > 0 ? v : 0);
            ss += (double)x[j] * x[j];
        }
        for (int j = 0; j < BENCH_DIM; j++)
            x[j] = (float)(x[j] / sqrt(ss));
    }
    if (cfg->dist && cfg->dist->size > 1) {
        const nb_dist *D = b->dist = cfg->dist;
        if (cfg->norm.bn_sum) {
            order_bench_close(b);
            return nb_errf(err, "order cannot take BatchNorm statistics over the ranks "
                                "(--bn-sync)"),
                   NULL;
        }
        b->lo = (int)((int64_t)b->B * D->rank / D->size);
        b->hi = (int)((int64_t)b->B * (D->rank + 1) / D->size);
        const int n = b->hi - b->lo;
        b->stok = malloc(sizeof(int) * (size_t)T * (n > 0 ? n : 1));
        b->all = malloc(sizeof(float) * 4 * (size_t)b->B * b->model.H);
        if (!b->stok || !b->all) {
            order_bench_close(b);
            return nb_errf(err, "out of memory"), NULL;
        }
        for (int t = 0; t < T; t++)
            for (int k = 0; k < n; k++)
                b->stok[(size_t)t * n + k] = b->tok[(size_t)t * b->B + b->lo + k];
    }
    return b;
}

static double order_bench_step(void *p) {
    order_bench *b = p;
    nb_oe *m = &b->model;
    double ts = nb_now();
    memset(m->grads, 0, sizeof(float) * m->layout.total);
    nb_trainer tr = {.params = m->params,
                     .grads = m->grads,
                     .adam_m = m->adam_m,
                     .adam_v = m->adam_v,
                     .layout = &m->layout,
                     .clip_per_tensor = b->clip};
    if (b->dist) { /* this rank's rows, then the loop's sums over the ranks */
        nb_dist *D = b->dist;
        double loss = shard_pass(m, D, b->all, b->stok, b->steps + b->lo, BENCH_LEN + 1,
                                 b->img + (size_t)b->lo * BENCH_DIM, b->B, b->lo, b->hi);
        nb_train_dist_sum(D, &tr, loss, b->hi - b->lo, b->B, NULL);
    } else {
        nb_oe_forward(m, b->tok, b->steps, BENCH_LEN + 1, b->img, b->B);
        nb_oe_backward(m);
    }
    b->t++;
    nb_train_update(&tr, 0, &b->adam, b->t, b->t);
    if (b->dist) nb_train_dist_buffers(b->dist, &tr);
    return nb_now() - ts;
}

static const int order_bench_batches[] = {128, 0};

static const char order_paper[] =
    "COCO 1k test, averages over 5 folds (docs/papers.md#order-reported). Caption retrieval "
    "R@1 R@5 R@10 mean r | image retrieval R@1 R@5 R@10 mean r:\n"
    "  LN paper Table 2 / RMS paper Table 7:\n"
    "    Sym [Vendrov]                 45.4  -    88.7 5.8 | 36.3  -    85.8 9.0\n"
    "    OE+Baseline [Vendrov]         46.7  -    88.9 5.7 | 37.9  -    85.9 8.1\n"
    "    OE+Baseline [LN paper]        46.6 79.3 89.1 5.2 | 37.8 73.6 85.7 7.9\n"
    "    OE+LayerNorm [LN paper]       48.5 80.6 89.8 5.1 | 38.9 74.3 86.3 7.6\n"
    "    OE+Baseline (RMS paper)       45.8 79.7 88.8 5.4 | 37.6 73.6 85.8 7.7\n"
    "    OE+LayerNorm (RMS paper)      47.9 79.5 89.2 5.3 | 38.4 74.6 86.7 7.5\n"
    "    OE+RMSNorm                    48.7 79.7 89.5 5.3 | 39.0 74.8 86.3 7.5\n"
    "    OE+pRMSNorm                   46.8 79.8 90.3 5.2 | 39.0 74.5 86.3 7.4\n"
    "  RMS paper Table 8, seconds per 100 training steps (Theano, one TITAN X Pascal, mean of 3 "
    "runs; hardware-specific, compare ratios only): none 2.11, layer 12.02, rms 7.12 (40.8% "
    "faster than layer), prms 4.34 (63.9% faster: the paper's largest speed-up).\n"
    "  LN paper: LN reaches its best validation model in 60% of the time. batch and weight "
    "are normbench extensions, in neither paper; the pRMSNorm GRU code is NOT FOUND.";

const nb_task nb_task_order = {
    .name = "order",
    .summary = "order-embedding GRU, COCO caption-image retrieval: LN and RMS papers",
    .default_dataset = "coco-oe",
    .datasets = order_datasets,
    .opts = order_opts_decl,
    .opts_size = sizeof(order_opts),
    .finish = order_finish,
    .defaults = order_defaults,
    .train = order_train,
    .bench_open = order_bench_open,
    .bench_step = order_bench_step,
    .data_parallel = 1,
    .bench_close = order_bench_close,
    .bench_batches = order_bench_batches,
    .target = {"val_img_rsum", 150, 1},
    .paper = order_paper,
};
