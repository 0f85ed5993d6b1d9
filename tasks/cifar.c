/* tasks/cifar.c — ConvPool-CNN-C on CIFAR-10 as the WeightNorm code trains it and the RMSNorm
 * paper reuses it (docs/papers.md#cifar; RMS paper A.4), with all six norms.
 *
 * Network (nn/cnn.h): Gaussian noise 0.15 → 3× [conv 3×3 96, pad 1] → max-pool 2×2 → dropout
 * 0.5 → 3× [conv 3×3 192, pad 1] → max-pool → dropout 0.5 → conv 3×3 192 (pad 0) → 2× NIN
 * (1×1) 192 → global average pool → dense 10; every conv/NIN/dense layer is conv → norm →
 * leaky ReLU 0.1 (identity on the logits, which are normalised too, as in the code).
 * --width X multiplies the 96/192 channel counts (tests and quick looks; 1 is the paper's).
 *
 * Inputs: CIFAR-10 3×32×32, (x − 127.5)/128 then ZCA; Fashion-MNIST / MNIST as 1×28×28 maps
 * scaled the same way, no ZCA: the network is fully convolutional up to the global pooling,
 * so it adapts by itself — the first conv has 1 input channel and the maps are 28→14→7→5
 * (the pad-0 conv) instead of 32→16→8→6; pRMS's k follows the map size. Synthetic: generated
 * 3×32×32 gratings (datasets/cifar10.h).
 *
 * Training (WN code train.py): Adam with eps 1e-8 inside the sqrt on the bias-corrected
 * moments, lr 0.003 (0.0003 for none), batch 100, 200 epochs, the training set in a fresh order
 * every epoch (the remainder that does not fill a batch skipped). Schedule over E epochs
 * (--epochs keeps its shape): epoch e (0-based) uses lr·min(2 − 2e/E, 1) and beta1 0.9 for
 * e < E/2, 0.5 after (E = 200: the code's lr·min(2 − e/100, 1), reaching 0.01·lr in the last
 * epoch). Evaluation every epoch: test error and NLL with noise and dropout off and BN's
 * running averages, and the training error of the epoch's (noisy) batches, as results.csv.
 * Data-dependent init of weight (and none) from 500 shuffled training images, drawn from a
 * stream of its own before the loop (the WN code: the first 500 of its shuffled data), in one
 * pass with the Gaussian noise and both dropout layers on, as the WN code's train.py runs it
 * (ll.get_output(layers[-1], x, init=True) without deterministic=True: lasagne's noise layers are
 * active unless deterministic); the noise and masks come from the same stream, after the
 * shuffle. --init-pass deterministic turns them off for that pass. */
#include "nn/mem.h"
#include "tasks/task.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/cifar10.h"
#include "tasks/train.h"

static const char *const cifar_datasets[] = {"cifar10", "fashion-mnist", "mnist", "synthetic",
                                             NULL};

/* cifar's own options (tasks/taskopt.h). */
typedef struct cifar_opts {
    int norm_axes; /* 0 hw: layer/rms/prms statistics per channel over H×W (the paper's); 1 chw */
    int none_init; /* none: 0 data (the WN code's InitLayer: data init, frozen scale), 1 plain */
    double width;  /* channel multiplier of ConvPool-CNN-C (1: the paper's 96/192) */
    int zca;       /* cifar10 input: 0 on (ZCA whitening), 1 off */
    int init_pass; /* data-dependent init: 0 train (noise, dropout on: the WN code), 1 deterministic
                    */
    int grad_sums; /* 0 example: exact sums over images (nb_cnn_exact_grads); 1 batch: float gemms
                    */
    int conv;      /* 3x3 convolution engine: 0 im2col, 1 winograd (F(2x2)), 2 winograd4, 3 auto */
    int precision; /* the convolutions' and dense layers' products: 0 fp32, 1 bf16 */
} cifar_opts;

static const char *const axes_choices[] = {"hw", "chw", NULL};
static const char *const noneinit_choices[] = {"data", "plain", NULL};
static const char *const onoff_choices[] = {"on", "off", NULL};
static const char *const initpass_choices[] = {"train", "deterministic", NULL};
static const char *const gradsums_choices[] = {"example", "batch", NULL};
static const char *const conv_choices[] = {"im2col", "winograd", "winograd4", "auto", NULL};
static const int conv_engines[] = {NB_CONV_IM2COL, NB_CONV_WINO2, NB_CONV_WINO4, NB_CONV_AUTO};
static const char *const precision_choices[] = {"fp32", "bf16", NULL};

static const nb_task_opt cifar_opts_decl[] = {
    {"norm-axes", NB_TOPT_CHOICE, offsetof(cifar_opts, norm_axes), "A",
     "layer/rms/prms statistics per channel over H,W (hw, paper) or over C,H,W (chw)",
     axes_choices},
    {"none-init", NB_TOPT_CHOICE, offsetof(cifar_opts, none_init), "I",
     "none as the WN code's baseline (data: data-dependent init, frozen scale) or a plain conv + "
     "bias (plain)",
     noneinit_choices},
    {"width", NB_TOPT_DOUBLE, offsetof(cifar_opts, width), "X",
     "channel multiplier of the network (1: the paper's 96/192)", NULL, 1e-3, 16, 1},
    {"zca", NB_TOPT_CHOICE, offsetof(cifar_opts, zca), "on|off", "ZCA whitening of cifar10",
     onoff_choices},
    {"no-zca", NB_TOPT_ALIAS, 0, NULL, "the same as --zca off", .alias_of = "zca",
     .alias_val = "off"},
    {"init-pass", NB_TOPT_CHOICE, offsetof(cifar_opts, init_pass), "P",
     "weight and none's data-dependent init pass: with noise and dropout on (train, the WN "
     "code's train.py) or off (deterministic)",
     initpass_choices},
    {"grad-sums", NB_TOPT_CHOICE, offsetof(cifar_opts, grad_sums), "S",
     "weight, gain and bias gradients summed image by image in double (example: the same for any "
     "split over threads or MPI ranks) or by float gemms over groups of images (batch: faster, "
     "last-bit differences between thread and rank counts)",
     gradsums_choices, .legacy = "batch"},
    {"conv", NB_TOPT_CHOICE, offsetof(cifar_opts, conv), "E",
     "engine of the 3x3 convolutions: im2col + sgemm; Winograd F(2x2,3x3) (winograd: about 2x "
     "im2col's float rounding error) or F(4x4,3x3) (winograd4: fewer multiplications, about 30x); "
     "auto: per layer shape, the fastest measured by 'bench conv' (docs/speed.md#winograd)",
     conv_choices, .legacy = "im2col"},
    {"precision", NB_TOPT_CHOICE, offsetof(cifar_opts, precision), "fp32|bf16",
     "the convolutions' and dense layers' products, forward and both gradients: float (fp32), or "
     "inputs rounded to bfloat16 with float accumulation (bf16: AVX512-BF16 vdpbf16ps, refused "
     "on a CPU without it; im2col engine only; weights, Adam, norms and activations stay float; "
     "docs/numerics.md#bf16)",
     precision_choices, .group = NB_GROUP_UNLESS_DEFAULT, .legacy = "fp32"},
    {NULL},
};

static const cifar_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static void cifar_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm);
    cfg->norm.eps = 1e-6; /* the CIFAR RMS layer and BN; LN: NOT FOUND, the same assumed */
    cfg->norm.p = 0.125;  /* RMS paper A.4 */
    cfg->act = NB_ACT_LEAKY_RELU;
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.lr = norm == NB_NORM_NONE ? 3e-4 : 3e-3; /* the WN code: a per-norm recipe */
    cfg->adam.eps_inside = 1;
    cfg->adam.eps_corrected = 1;
    cfg->epochs = 200;
    cfg->steps = 0;
    cfg->batch = 100;
    cfg->eval_batch = 100;
    cfg->log_every = 50;
    cfg->clip = 0;
    cfg->flush_denormals = 1;
}

/* The layer list for a width multiplier. */
static int build_spec(nb_cnn_spec *s, double width) {
    int c1 = (int)lround(96 * width), c2 = (int)lround(192 * width), n = 0;
    if (c1 < 1) c1 = 1;
    if (c2 < 1) c2 = 1;
    s[n++] = (nb_cnn_spec){NB_CNN_NOISE, 0, 0, 0, 0.15};
    for (int i = 0; i < 3; i++)
        s[n++] = (nb_cnn_spec){NB_CNN_CONV, c1, 3, 1, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_POOL, 0, 0, 0, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_DROPOUT, 0, 0, 0, 0.5};
    for (int i = 0; i < 3; i++)
        s[n++] = (nb_cnn_spec){NB_CNN_CONV, c2, 3, 1, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_POOL, 0, 0, 0, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_DROPOUT, 0, 0, 0, 0.5};
    s[n++] = (nb_cnn_spec){NB_CNN_CONV, c2, 3, 0, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_CONV, c2, 1, 0, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_CONV, c2, 1, 0, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_GAP, 0, 0, 0, 0};
    s[n++] = (nb_cnn_spec){NB_CNN_CONV, 10, 1, 0, 0};
    return n;
}

/* --precision bf16 needs the CPU's AVX512-BF16 and the im2col engine. */
static int cifar_finish(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err) {
    (void)given, (void)ngiven;
    const cifar_opts *o = opts_of(cfg);
    if (o->precision != 1) return 0;
    if (o->conv != 0) {
        nb_errf(err, "--precision bf16 runs on the im2col engine only, not with --conv %s",
                conv_choices[o->conv]);
        return nb_hintf(err, "leave --conv out (im2col), or use --precision fp32");
    }
    if (!nb_cpu_has_bf16()) {
        const char *e = getenv("NB_CPU_NO_BF16");
        nb_errf(err,
                "--precision bf16 needs a CPU with AVX512-BF16 (the vdpbf16ps instruction); this "
                "CPU has none%s",
                e && *e && strcmp(e, "0") != 0 ? " (NB_CPU_NO_BF16 is set: the test hook)" : "");
        return nb_hintf(err, "use --precision fp32 (the default)");
    }
    return 0;
}

static int model_init(nb_cnn *m, const nb_train_cfg *cfg, int C, int H, int W, int Bmax,
                      nb_err *err) {
    nb_cnn_spec spec[NB_CNN_MAX_LAYERS];
    const cifar_opts *o = opts_of(cfg);
    int n = build_spec(spec, o->width > 0 ? o->width : 1);
    nb_cnn_opts opts = {o->norm_axes == 1, o->none_init == 0, 0.1, conv_engines[o->conv],
                        o->precision == 1 ? NB_PREC_BF16 : NB_PREC_FP32};
    nb_rng init_rng;
    nb_rng_seed(&init_rng, cfg->seed, NB_STREAM_INIT);
    if (nb_cnn_init(m, spec, n, C, H, W, 10, &cfg->norm, &opts, Bmax, &init_rng, err) != 0)
        return -1;
    if (o->grad_sums == 0 && nb_cnn_exact_grads(m, err) != 0) {
        nb_cnn_free(m);
        return -1;
    }
    return 0;
}

static void cifar_grads_finish(void *self);

/* Adam's learning rate and beta1 for step t (1-based) of planned, spe steps per epoch. */
static void schedule_at(int64_t t, int64_t planned, int64_t spe, nb_adam_cfg *adam) {
    int64_t E = (planned + spe - 1) / spe;
    int64_t e = (t - 1) / spe;
    double f = 2.0 - 2.0 * (double)e / (double)E;
    adam->lr *= f < 1 ? f : 1;
    if (2 * e >= E) adam->beta1 = 0.5;
}

typedef struct cifar_run {
    const nb_train_cfg *cfg;
    nb_cnn model;
    nb_image_set data;
    float *xb;
    int *yb, *perm;
    size_t dim;
    int64_t spe;
    long train_wrong, train_seen; /* the training error since the last evaluation */
} cifar_run;

static void gather(float *xb, int *yb, const nb_images *s, const int *perm, int from, int B) {
    size_t dim = (size_t)s->C * s->H * s->W;
    for (int r = 0; r < B; r++) {
        int i = perm ? perm[from + r] : from + r;
        memcpy(xb + (size_t)r * dim, s->x + (size_t)i * dim, sizeof(float) * dim);
        yb[r] = s->y[i];
    }
}

static int count_wrong(const float *probs, const int *y, int B, int V) {
    int wrong = 0;
    for (int r = 0; r < B; r++) {
        const float *p = probs + (size_t)r * V;
        int best = 0;
        for (int c = 1; c < V; c++)
            if (p[c] > p[best]) best = c;
        wrong += best != y[r];
    }
    return wrong;
}

static void cifar_epoch_begin(void *self, int epoch, nb_rng *data_rng) {
    cifar_run *r = self;
    (void)epoch;
    nb_rng_shuffle(data_rng, r->perm, (size_t)r->data.train.n);
}

static double cifar_step(void *self, int64_t bi, nb_rng *noise_rng) {
    cifar_run *r = self;
    int B = r->cfg->batch;
    gather(r->xb, r->yb, &r->data.train, r->perm, (int)bi * B, B);
    double loss = nb_cnn_forward(&r->model, r->xb, r->yb, B, 1, noise_rng);
    if (isfinite(loss)) nb_cnn_backward(&r->model, r->yb);
    r->train_wrong += count_wrong(r->model.probs, r->yb, B, 10);
    r->train_seen += B;
    return loss;
}

/* Data-parallel: rows [lo, hi) of batch bi (their own dropout and noise streams), gradients of
 * their loss over the whole batch. */
static double cifar_step_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise_rng) {
    cifar_run *r = self;
    int B = r->cfg->batch;
    gather(r->xb, r->yb, &r->data.train, r->perm, (int)bi * B + lo, hi - lo);
    r->model.row0 = lo;
    r->model.grad_rows = B;
    double loss = nb_cnn_forward(&r->model, r->xb, r->yb, hi - lo, 1, noise_rng);
    if (isfinite(loss)) nb_cnn_backward(&r->model, r->yb);
    r->train_wrong += count_wrong(r->model.probs, r->yb, hi - lo, 10);
    r->train_seen += hi - lo;
    return loss;
}

static void cifar_grads_finish(void *self) {
    cifar_run *r = self;
    nb_cnn_grads_finish(&r->model);
}

static void cifar_schedule(void *self, int64_t t, int64_t planned, nb_adam_cfg *adam) {
    cifar_run *r = self;
    schedule_at(t, planned, r->spe, adam);
}

static int cifar_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    cifar_run *r = self;
    (void)err;
    if (final) return 0; /* every epoch's evaluation already says everything */
    const nb_images *te = &r->data.test;
    int eb = r->cfg->eval_batch;
    long wrong = 0;
    double nll = 0;
    /* data-parallel: this rank's share of the test rows, then the sums over the ranks */
    const nb_dist *D = r->cfg->dist && r->cfg->dist->size > 1 ? r->cfg->dist : NULL;
    int from = D ? (int)((int64_t)te->n * D->rank / D->size) : 0;
    int to = D ? (int)((int64_t)te->n * (D->rank + 1) / D->size) : te->n;
    for (int i = from; i < to; i += eb) {
        int B = to - i < eb ? to - i : eb;
        gather(r->xb, r->yb, te, NULL, i, B);
        nll += nb_cnn_forward(&r->model, r->xb, r->yb, B, 0, NULL) * B;
        wrong += count_wrong(r->model.probs, r->yb, B, 10);
    }
    if (D) {
        double sums[4] = {(double)wrong, nll, (double)r->train_wrong, (double)r->train_seen};
        D->sum_d(D->ctx, sums, 4);
        wrong = (long)sums[0];
        nll = sums[1];
        r->train_wrong = (long)sums[2];
        r->train_seen = (long)sums[3];
    }
    nb_metric m[] = {{"test_error", 0, 0, te->n ? (double)wrong / te->n : NAN},
                     {"test_nll", 0, 0, te->n ? nll / te->n : NAN},
                     {"train_error", 0, 0,
                      r->train_seen ? (double)r->train_wrong / (double)r->train_seen : NAN}};
    r->train_wrong = r->train_seen = 0;
    int n = (int)(sizeof m / sizeof m[0]);
    if (n > max) n = max;
    memcpy(out, m, sizeof(nb_metric) * (size_t)n);
    return n;
}

/* For nb_check_batch_memory: the network and a batch's images at B rows, built and freed. */
typedef struct cifar_build_ctx {
    const nb_train_cfg *cfg;
    int C, H, W;
} cifar_build_ctx;

static int cifar_build(void *ctx, int B, nb_err *err) {
    const cifar_build_ctx *c = ctx;
    nb_cnn m;
    if (model_init(&m, c->cfg, c->C, c->H, c->W, B, err) != 0) return -1;
    nb_cnn_free(&m);
    nb_mem_note((size_t)B * (sizeof(float) * (size_t)c->C * c->H * c->W + sizeof(int)));
    return 0;
}

static int cifar_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status,
                       nb_err *err) {
    int rc = -1;
    cifar_run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    int have_data = 0, have_model = 0;
    if (nb_cifar_load(&r.data, cfg->dataset, cfg->data_dir, cfg->subset, cfg->seed,
                      opts_of(cfg)->zca == 0, err) != 0)
        goto out;
    have_data = 1;
    if (sink->param && sink->param(sink->ctx, "data_source", r.data.source, err) != 0) goto out;
    const nb_images *tr = &r.data.train;
    if (cfg->batch > tr->n) {
        nb_errf(err, "batch size %d is larger than the %d training images", cfg->batch, tr->n);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }
    if (nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES && cfg->batch < 2) {
        nb_errf(err, "batch norm needs a batch of 2 or more, not %d", cfg->batch);
        nb_hintf(err, "raise --batch");
        goto out;
    }
    nb_flush_denormals(cfg->flush_denormals);
    /* the evaluation batch only as large as the test set needs (--eval-batch 1000000 on 300
     * images holds 300) */
    int eb = cfg->eval_batch < r.data.test.n ? cfg->eval_batch : r.data.test.n;
    int Bmax = cfg->batch > eb ? cfg->batch : eb;
    int ninit = tr->n < 500 ? tr->n : 500; /* data-dependent init: 500 images */
    char what[96];
    snprintf(what, sizeof what, "--batch %d with --eval-batch %d", cfg->batch, cfg->eval_batch);
    cifar_build_ctx bc = {cfg, tr->C, tr->H, tr->W};
    if (nb_check_batch_memory(cifar_build, &bc, Bmax, what, err) != 0) goto out;
    if (model_init(&r.model, cfg, tr->C, tr->H, tr->W, Bmax, err) != 0) goto out;
    have_model = 1;
    r.dim = (size_t)tr->C * tr->H * tr->W;
    r.xb = malloc(sizeof(float) * (size_t)(Bmax > ninit ? Bmax : ninit) * r.dim);
    r.yb = malloc(sizeof(int) * (size_t)(Bmax > ninit ? Bmax : ninit));
    r.perm = malloc(sizeof(int) * (size_t)tr->n);
    if (!r.xb || !r.yb || !r.perm) {
        nb_errf(err, "out of memory for the training batches");
        goto out;
    }
    for (int i = 0; i < tr->n; i++)
        r.perm[i] = i;
    if (!cfg->resume_from) {
        /* data-dependent init (weight, none) from 500 shuffled images of a stream of its own */
        nb_rng irng;
        nb_rng_seed(&irng, cfg->seed, NB_STREAM_SYNTH);
        nb_rng_shuffle(&irng, r.perm, (size_t)tr->n);
        gather(r.xb, r.yb, tr, r.perm, 0, ninit);
        nb_rng *noise = opts_of(cfg)->init_pass == 0 ? &irng : NULL;
        if (nb_cnn_data_init(&r.model, r.xb, ninit, noise, err) != 0) goto out;
        for (int i = 0; i < tr->n; i++)
            r.perm[i] = i;
    }
    r.spe = tr->n / cfg->batch;
    nb_trainer t = {.self = &r,
                    .params = r.model.params,
                    .grads = r.model.grads,
                    .adam_m = r.model.adam_m,
                    .adam_v = r.model.adam_v,
                    .layout = &r.model.layout,
                    .steps_per_epoch = r.spe,
                    .extra = {{r.perm, (size_t)tr->n * sizeof(int)}},
                    .nextra = 1,
                    .epoch_begin = cifar_epoch_begin,
                    .step = cifar_step,
                    .step_shard = cifar_step_shard,
                    .grads_d = r.model.gacc,
                    .ngrads_d = r.model.nacc,
                    .grads_finish = cifar_grads_finish,
                    .schedule = cifar_schedule,
                    .evaluate = cifar_evaluate};
    /* what the ranks of a data-parallel run compare before the first step */
    const nb_images *fs[2] = {tr, &r.data.test};
    static const char *const fn[2][2] = {{"train.x", "train.y"}, {"test.x", "test.y"}};
    for (int k = 0; k < 2; k++) {
        nb_train_fp(&t, fn[k][0], fs[k]->x,
                    sizeof(float) * (size_t)fs[k]->n * fs[k]->C * fs[k]->H * fs[k]->W);
        nb_train_fp(&t, fn[k][1], fs[k]->y, sizeof(int) * (size_t)fs[k]->n);
    }
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    free(r.xb);
    free(r.yb);
    free(r.perm);
    if (have_model) nb_cnn_free(&r.model);
    if (have_data) nb_image_set_free(&r.data);
    return rc;
}

/* ---- bench ------------------------------------------------------------------------------------
 */

typedef struct cifar_bench {
    nb_cnn model;
    nb_image_set data;
    nb_adam_cfg adam;
    nb_rng noise;
    int B;
    long t;
    nb_dist *dist; /* data-parallel: this process times its rows of the batch (NULL: all) */
} cifar_bench;

static void cifar_bench_close(void *p) {
    cifar_bench *b = p;
    if (!b) return;
    nb_cnn_free(&b->model);
    nb_image_set_free(&b->data);
    free(b);
}

static void *cifar_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    cifar_bench *b = calloc(1, sizeof *b);
    if (!b) return nb_errf(err, "out of memory"), NULL;
    b->B = cfg->batch;
    b->adam = cfg->adam;
    b->dist = cfg->dist && cfg->dist->size > 1 ? cfg->dist : NULL;
    char what[48];
    snprintf(what, sizeof what, "--batch %d", b->B);
    cifar_build_ctx bc = {cfg, 3, 32, 32};
    /* checked before the synthetic images too (at most CIFAR-10's 60000 of them) */
    if (nb_check_batch_memory(cifar_build, &bc, b->B, what, err) != 0 ||
        nb_cifar_synthetic(&b->data, b->B, cfg->seed, err) != 0) {
        free(b);
        return NULL;
    }
    if (model_init(&b->model, cfg, 3, 32, 32, b->B, err) != 0) {
        nb_image_set_free(&b->data);
        free(b);
        return NULL;
    }
    nb_flush_denormals(cfg->flush_denormals);
    nb_rng irng;
    nb_rng_seed(&irng, cfg->seed, NB_STREAM_SYNTH);
    nb_rng_seed(&b->noise, cfg->seed, NB_STREAM_DROPOUT);
    if (nb_cnn_data_init(&b->model, b->data.train.x, b->B,
                         opts_of(cfg)->init_pass == 0 ? &irng : NULL, err) != 0) {
        cifar_bench_close(b);
        return NULL;
    }
    return b;
}

/* The schedule at the paper's 500 steps per epoch (a bench has no run to ask). */
static void bench_schedule(void *self, int64_t t, int64_t planned, nb_adam_cfg *adam) {
    schedule_at(t, planned, 500, adam);
}

static void cifar_bench_finish(void *p) {
    cifar_bench *b = p;
    nb_cnn_grads_finish(&b->model);
}

static double cifar_bench_step(void *p) {
    cifar_bench *b = p;
    double ts = nb_now();
    nb_trainer tr = {.self = b,
                     .params = b->model.params,
                     .grads = b->model.grads,
                     .adam_m = b->model.adam_m,
                     .adam_v = b->model.adam_v,
                     .layout = &b->model.layout,
                     .grads_d = b->model.gacc,
                     .ngrads_d = b->model.nacc,
                     .grads_finish = cifar_bench_finish,
                     .schedule = bench_schedule};
    nb_cnn_zero_grad(&b->model);
    if (b->dist) { /* this rank's rows, then the loop's sums over the ranks */
        const nb_dist *D = b->dist;
        int lo = (int)((int64_t)b->B * D->rank / D->size);
        int hi = (int)((int64_t)b->B * (D->rank + 1) / D->size);
        size_t dim = (size_t)3 * 32 * 32;
        b->model.row0 = lo;
        b->model.grad_rows = b->B;
        double loss = nb_cnn_forward(&b->model, b->data.train.x + (size_t)lo * dim,
                                     b->data.train.y + lo, hi - lo, 1, &b->noise);
        nb_cnn_backward(&b->model, b->data.train.y + lo);
        nb_train_dist_sum(b->dist, &tr, loss, hi - lo, b->B, NULL);
    } else {
        nb_cnn_forward(&b->model, b->data.train.x, b->data.train.y, b->B, 1, &b->noise);
        nb_cnn_backward(&b->model, b->data.train.y);
        nb_cnn_grads_finish(&b->model);
    }
    b->t++;
    nb_train_update(&tr, 0, &b->adam, b->t, 200 * 500); /* the paper's 200 epochs of 500 steps */
    if (b->dist) nb_train_dist_buffers(b->dist, &tr);
    return nb_now() - ts;
}

/* GEMMs of one step, as whole-batch products per conv layer (forward, weight gradient, input
 * gradient except below the first conv). */
static int cifar_bench_gemms(void *p, nb_gemm_shape *out, int max) {
    cifar_bench *b = p;
    int n = 0, first = 1;
    for (int l = 0; l < b->model.nlayers; l++) {
        const nb_cnn_layer *L = &b->model.L[l];
        if (L->spec.op != NB_CNN_CONV) continue;
        int K = L->C * L->spec.ks * L->spec.ks, NP = b->B * L->OH * L->OW;
        nb_gemm_shape s[3] = {{L->OC, NP, K, 1, ""}, {L->OC, K, NP, 1, ""}, {K, NP, L->OC, 1, ""}};
        snprintf(s[0].what, sizeof s[0].what, "layer %d forward", l);
        snprintf(s[1].what, sizeof s[1].what, "layer %d dweights", l);
        snprintf(s[2].what, sizeof s[2].what, "layer %d dinput", l);
        for (int i = 0; i < (first ? 2 : 3) && n < max; i++)
            out[n++] = s[i];
        first = 0;
    }
    return n;
}

static double cifar_bench_flops(void *p) {
    nb_gemm_shape s[64];
    return nb_gemm_flops(s, cifar_bench_gemms(p, s, 64));
}

static const int cifar_bench_batches[] = {100, 0};

static const char cifar_paper[] =
    "RMSNorm paper Table 10 (ConvPool-CNN-C, CIFAR-10, 200 epochs, batch 100; test error, and "
    "seconds per epoch on an RTX 2080 Ti in Theano/lasagne: hardware- and framework-specific, "
    "compare only ratios to layer): none (Baseline) 8.96% 21 s; batch 8.25% 38 s; weight 8.28% "
    "23 s; layer 10.49% 39 s; rms 8.83% 31 s (20.5% faster than layer); prms 10.37% 30 s "
    "(23.1%). WeightNorm paper: WN + mean-only BN 7.31%. Which epoch's error the RMS paper "
    "reports is NOT FOUND (most likely the last) (docs/papers.md#cifar-reported).";

const nb_task nb_task_cifar = {
    .name = "cifar",
    .summary = "ConvPool-CNN-C on CIFAR-10: WN paper, RMS paper A.4",
    .default_dataset = "cifar10",
    .datasets = cifar_datasets,
    .opts = cifar_opts_decl,
    .opts_size = sizeof(cifar_opts),
    .defaults = cifar_defaults,
    .finish = cifar_finish,
    .data_parallel = 1,
    .train = cifar_train,
    .bench_open = cifar_bench_open,
    .bench_step = cifar_bench_step,
    .bench_close = cifar_bench_close,
    .bench_batches = cifar_bench_batches,
    .target = {"test_error", 0.15, 0},
    .paper = cifar_paper,
    .bench_flops = cifar_bench_flops,
    .bench_gemms = cifar_bench_gemms,
};
