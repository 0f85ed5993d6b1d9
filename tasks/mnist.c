/* tasks/mnist.c — the LayerNorm paper's permutation-invariant MNIST MLP (§6.6): 784-1000-1000-10,
 * LN/RMS/pRMS/WN on the hidden layers, BN on all layers, trained with Adam.
 *
 * What the paper does not say, and what we chose (recorded with every run): ReLU, Adam with
 * lr 1e-3 in PyTorch's form (eps 1e-8 on the bias-corrected moments), 20 epochs unless
 * --epochs/--steps. Batch 128, or 4 (the paper's other setting). Train is the first 55,000 training
 * images, validation the last 5,000, test the 10,000 test images. Each epoch visits the training
 * set in a fresh random order (data stream of the seed) in full batches; the remainder that does
 * not fill a batch is skipped that epoch, so that BN never sees a short batch. */
#include "nn/mem.h"
#include "tasks/task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/mnist.h"
#include "nn/cuda/nbcuda.h"
#include "tasks/train.h"

static const char *const mnist_datasets[] = {"fashion-mnist", "mnist", "synthetic", NULL};

static void mnist_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm);
    /* The LN paper: "BN ... uses the unbiased variance estimator for the small batch". */
    cfg->norm.bn_unbiased_batch = 1;
    cfg->act = NB_ACT_RELU;
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.eps_corrected = 1; /* textbook Adam, as torch.optim.Adam computes it */
    cfg->epochs = 20;
    cfg->steps = 0;
    cfg->batch = 128;
    cfg->eval_batch = 500;
    cfg->log_every = 50;
    cfg->clip = 0;
    cfg->flush_denormals = 1;
}

static const int mlp_dims[] = {784, 1000, 1000, 10};

/* Evaluates the model on a split: error rate and mean NLL. With dev, the forward runs on the
 * GPU and its softmax comes back into m->probs. */
static void evaluate(nb_mlp *m, nb_cuda_mlp *dev, const nb_split *s, int eb, const nb_dist *D,
                     double *err_rate, double *nll) {
    long wrong = 0;
    double nll_sum = 0;
    /* data-parallel: this rank's share of the rows, then the sums over the ranks */
    int from = D ? (int)((int64_t)s->n * D->rank / D->size) : 0;
    int to = D ? (int)((int64_t)s->n * (D->rank + 1) / D->size) : s->n;
    for (int i = from; i < to; i += eb) {
        int B = to - i < eb ? to - i : eb;
        nb_err e;
        double loss =
            dev ? nb_cuda_mlp_forward(dev, s->x + (size_t)i * s->dim, s->y + i, B, 0, m->probs, &e)
                : nb_mlp_forward(m, s->x + (size_t)i * s->dim, s->y + i, B, 0);
        nll_sum += loss * B;
        int V = m->dims[m->nlayers];
        for (int r = 0; r < B; r++) {
            const float *p = m->probs + (size_t)r * V;
            int best = 0;
            for (int c = 1; c < V; c++)
                if (p[c] > p[best]) best = c;
            if (best != s->y[i + r]) wrong++;
        }
    }
    if (D) {
        double sums[2] = {(double)wrong, nll_sum};
        D->sum_d(D->ctx, sums, 2);
        wrong = (long)sums[0];
        nll_sum = sums[1];
    }
    *err_rate = s->n ? (double)wrong / s->n : NAN;
    *nll = s->n ? nll_sum / s->n : NAN;
}

static void gather(float *xb, int *yb, const nb_split *s, const int *perm, int from, int B) {
    for (int r = 0; r < B; r++) {
        int i = perm[from + r];
        memcpy(xb + (size_t)r * s->dim, s->x + (size_t)i * s->dim, sizeof(float) * s->dim);
        yb[r] = s->y[i];
    }
}

/* The model and data the loop's callbacks work on. */
typedef struct mnist_run {
    const nb_train_cfg *cfg;
    nb_mlp model;
    nb_mnist data;
    float *xb;
    int *yb, *perm;
    nb_cuda_mlp *dev; /* --device cuda: the model on the GPU (NULL: on the CPU) */
    nb_err dev_err;   /* the first GPU failure, reported when the loop stops */
    int dev_failed;
} mnist_run;

static void mnist_prepare(void *self, nb_rng *init_rng, nb_rng *data_rng) {
    mnist_run *r = self;
    const nb_split *tr = &r->data.train;
    if (nb_norm_get(r->cfg->norm.kind)->acts != NB_ON_WEIGHTS || !r->cfg->norm.wn_data_init) return;
    /* Salimans & Kingma: initialize g and b from a batch of shuffled training data. */
    nb_rng_shuffle(data_rng, r->perm, (size_t)tr->n);
    int B = tr->n < 500 ? tr->n : 500;
    if (B > r->model.Bmax) B = r->model.Bmax;
    gather(r->xb, r->yb, tr, r->perm, 0, B);
    nb_mlp_data_init(&r->model, r->xb, B);
}

static void mnist_epoch_begin(void *self, int epoch, nb_rng *data_rng) {
    mnist_run *r = self;
    nb_rng_shuffle(data_rng, r->perm, (size_t)r->data.train.n);
}

static double mnist_step(void *self, int64_t bi, nb_rng *noise_rng) {
    mnist_run *r = self;
    int B = r->cfg->batch;
    gather(r->xb, r->yb, &r->data.train, r->perm, (int)bi * B, B);
    if (r->dev) {
        double loss = nb_cuda_mlp_forward(r->dev, r->xb, r->yb, B, 1, NULL, &r->dev_err);
        if (isnan(loss) && r->dev_err.msg[0]) r->dev_failed = 1;
        if (isfinite(loss) && nb_cuda_mlp_backward(r->dev, &r->dev_err) != 0) {
            r->dev_failed = 1;
            loss = NAN;
        }
        return loss;
    }
    double loss = nb_mlp_forward(&r->model, r->xb, r->yb, B, 1);
    if (isfinite(loss)) nb_mlp_backward(&r->model, r->yb);
    return loss;
}

/* Data-parallel: rows [lo, hi) of batch bi, gradients of their loss over the whole batch. */
static double mnist_step_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise_rng) {
    mnist_run *r = self;
    int B = r->cfg->batch;
    gather(r->xb, r->yb, &r->data.train, r->perm, (int)bi * B + lo, hi - lo);
    r->model.grad_rows = B;
    double loss = nb_mlp_forward(&r->model, r->xb, r->yb, hi - lo, 1);
    if (isfinite(loss)) nb_mlp_backward(&r->model, r->yb);
    return loss;
}

static void mnist_update(void *self, const nb_adam_cfg *adam, int64_t step) {
    mnist_run *r = self;
    if (!r->dev_failed && nb_cuda_mlp_adam(r->dev, adam, (long)step, &r->dev_err) != 0)
        r->dev_failed = 1;
}

static void mnist_sync(void *self, int to_device) {
    mnist_run *r = self;
    if (!r->dev_failed && nb_cuda_mlp_sync(r->dev, &r->model, to_device, &r->dev_err) != 0)
        r->dev_failed = 1;
}

static int mnist_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    mnist_run *r = self;
    if (final) return 0; /* every epoch's evaluation already covers validation and test */
    const nb_dist *D = r->cfg->dist && r->cfg->dist->size > 1 ? r->cfg->dist : NULL;
    double ve, vn, te, tn;
    evaluate(&r->model, r->dev, &r->data.val, r->cfg->eval_batch, D, &ve, &vn);
    evaluate(&r->model, r->dev, &r->data.test, r->cfg->eval_batch, D, &te, &tn);
    if (r->dev_failed) {
        *err = r->dev_err;
        return -1;
    }
    nb_metric m[] = {{"val_error", 0, 0, ve},
                     {"val_nll", 0, 0, vn},
                     {"test_error", 0, 0, te},
                     {"test_nll", 0, 0, tn}};
    int n = (int)(sizeof m / sizeof m[0]);
    if (n > max) n = max;
    memcpy(out, m, sizeof(nb_metric) * (size_t)n);
    return n;
}

/* For nb_check_batch_memory: the MLP and a batch's inputs at B rows, built and freed. */
static int mnist_build(void *ctx, int B, nb_err *err) {
    const nb_train_cfg *cfg = ctx;
    nb_mlp m;
    nb_rng rng;
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_INIT);
    if (nb_mlp_init(&m, 3, mlp_dims, &cfg->norm, cfg->act, B, &rng, err) != 0) return -1;
    nb_mlp_free(&m);
    nb_mem_note((size_t)B * (sizeof(float) * mlp_dims[0] + sizeof(int)));
    return 0;
}

/* The rows the buffers hold: the training batch, and the evaluation batch only as far as the
 * largest split it passes over needs (--eval-batch 1000000 on 300 examples holds 300). */
static int rows_needed(int batch, int eval_batch, int largest_split) {
    int eb = eval_batch < largest_split ? eval_batch : largest_split;
    return batch > eb ? batch : eb;
}

static int mnist_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status,
                       nb_err *err) {
    int rc = -1;
    mnist_run r = {.cfg = cfg};
    int have_data = 0, have_model = 0;

    if (nb_mnist_load(&r.data, cfg->dataset, cfg->data_dir, cfg->subset, cfg->seed, err) != 0)
        goto out;
    have_data = 1;
    if (sink->param && sink->param(sink->ctx, "data_source", r.data.source, err) != 0) goto out;
    const nb_split *tr = &r.data.train;
    if (cfg->batch > tr->n) {
        nb_errf(err, "batch size %d is larger than the %d training examples", cfg->batch, tr->n);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }

    nb_flush_denormals(cfg->flush_denormals);
    nb_rng init_rng;
    nb_rng_seed(&init_rng, cfg->seed, NB_STREAM_INIT);
    int Bmax = rows_needed(cfg->batch, cfg->eval_batch,
                           r.data.val.n > r.data.test.n ? r.data.val.n : r.data.test.n);
    char what[96];
    snprintf(what, sizeof what, "--batch %d with --eval-batch %d", cfg->batch, cfg->eval_batch);
    if (nb_check_batch_memory(mnist_build, (void *)cfg, Bmax, what, err) != 0) goto out;
    if (nb_mlp_init(&r.model, 3, mlp_dims, &cfg->norm, cfg->act, Bmax, &init_rng, err) != 0)
        goto out;
    have_model = 1;
    r.xb = malloc(sizeof(float) * (size_t)Bmax * tr->dim);
    r.yb = malloc(sizeof(int) * (size_t)Bmax);
    r.perm = malloc(sizeof(int) * (size_t)tr->n);
    if (!r.xb || !r.yb || !r.perm) {
        nb_errf(err, "out of memory for the training batches");
        goto out;
    }
    for (int i = 0; i < tr->n; i++)
        r.perm[i] = i;
    if (cfg->device) {
        if (cfg->clip > 0) {
            nb_errf(err,
                    "--clip cannot be combined with --device cuda (the GPU update does not clip)");
            nb_hintf(err, "leave --clip out, or train with --device cpu");
            goto out;
        }
        r.dev = nb_cuda_mlp_new(&r.model, err);
        if (!r.dev) goto out;
        char desc[512], val[600];
        nb_cuda_describe(desc, sizeof desc);
        snprintf(val, sizeof val, "cuda: %s", desc);
        if (sink->param && sink->param(sink->ctx, "device", val, err) != 0) goto out;
    }

    nb_trainer t = {.self = &r,
                    .params = r.model.params,
                    .grads = r.model.grads,
                    .adam_m = r.model.adam_m,
                    .adam_v = r.model.adam_v,
                    .layout = &r.model.layout,
                    .steps_per_epoch = tr->n / cfg->batch,
                    .extra = {{r.perm, (size_t)tr->n * sizeof(int)}},
                    .nextra = 1,
                    .prepare = mnist_prepare,
                    .epoch_begin = mnist_epoch_begin,
                    .step = mnist_step,
                    .step_shard = mnist_step_shard,
                    .evaluate = mnist_evaluate,
                    .update = r.dev ? mnist_update : NULL,
                    .sync = r.dev ? mnist_sync : NULL};
    /* what the ranks of a data-parallel run compare before the first step */
    const nb_split *fs[3] = {tr, &r.data.val, &r.data.test};
    static const char *const fn[3][2] = {
        {"train.x", "train.y"}, {"val.x", "val.y"}, {"test.x", "test.y"}};
    for (int k = 0; k < 3; k++) {
        nb_train_fp(&t, fn[k][0], fs[k]->x, sizeof(float) * (size_t)fs[k]->n * fs[k]->dim);
        nb_train_fp(&t, fn[k][1], fs[k]->y, sizeof(int) * (size_t)fs[k]->n);
    }
    rc = nb_train_loop(cfg, &t, sink, status, err);
    if (r.dev_failed && rc == 0 && *status != NB_STATUS_FINISHED) {
        *err = r.dev_err;
        rc = -1;
    }
out:
    free(r.xb);
    free(r.yb);
    free(r.perm);
    nb_cuda_mlp_free(r.dev);
    if (have_model) nb_mlp_free(&r.model);
    if (have_data) nb_mnist_free(&r.data);
    return rc;
}

typedef struct mnist_bench {
    nb_mlp model;
    float *x;
    int *y, B;
    long t;
    nb_adam_cfg adam;
    nb_cuda_mlp *dev; /* --device cuda */
    nb_dist *dist;    /* data-parallel: this process times its rows of the batch (NULL: all) */
} mnist_bench;

static void mnist_bench_close(void *p) {
    mnist_bench *b = p;
    if (!b) return;
    nb_cuda_mlp_free(b->dev);
    nb_mlp_free(&b->model);
    free(b->x);
    free(b->y);
    free(b);
}

static void *mnist_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    mnist_bench *b = calloc(1, sizeof *b);
    if (!b) return nb_errf(err, "out of memory"), NULL;
    nb_rng rng;
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_INIT);
    b->B = cfg->batch;
    b->adam = cfg->adam;
    b->dist = cfg->dist && cfg->dist->size > 1 ? cfg->dist : NULL;
    char what[48];
    snprintf(what, sizeof what, "--batch %d", b->B);
    if (nb_check_batch_memory(mnist_build, (void *)cfg, b->B, what, err) != 0 ||
        nb_mlp_init(&b->model, 3, mlp_dims, &cfg->norm, cfg->act, b->B, &rng, err) != 0) {
        free(b);
        return NULL;
    }
    b->x = malloc(sizeof(float) * (size_t)b->B * mlp_dims[0]);
    b->y = malloc(sizeof(int) * (size_t)b->B);
    if (!b->x || !b->y) {
        mnist_bench_close(b);
        return nb_errf(err, "out of memory"), NULL;
    }
    nb_flush_denormals(cfg->flush_denormals);
    nb_rng_seed(&rng, cfg->seed, NB_STREAM_SYNTH);
    for (size_t i = 0; i < (size_t)b->B * mlp_dims[0]; i++)
        b->x[i] = (float)nb_rng_uniform(&rng);
    for (int i = 0; i < b->B; i++)
        b->y[i] = (int)nb_rng_below(&rng, 10);
    nb_mlp_data_init(&b->model, b->x, b->B);
    if (cfg->device && !(b->dev = nb_cuda_mlp_new(&b->model, err))) {
        mnist_bench_close(b);
        return NULL;
    }
    return b;
}

static double mnist_bench_step(void *p) {
    mnist_bench *b = p;
    double ts = nb_now();
    if (b->dev) { /* forward (waits for its loss), backward, Adam, and the wait for them */
        nb_err e;
        if (isnan(nb_cuda_mlp_forward(b->dev, b->x, b->y, b->B, 1, NULL, &e)) ||
            nb_cuda_mlp_backward(b->dev, &e) || nb_cuda_mlp_adam(b->dev, &b->adam, ++b->t, &e) ||
            nb_cuda_sync(&e))
            return NAN;
        return nb_now() - ts;
    }
    nb_mlp_zero_grad(&b->model);
    if (b->dist) { /* this rank's rows, then the loop's sums over the ranks */
        const nb_dist *D = b->dist;
        int lo = (int)((int64_t)b->B * D->rank / D->size);
        int hi = (int)((int64_t)b->B * (D->rank + 1) / D->size);
        nb_trainer tr = {.params = b->model.params,
                         .grads = b->model.grads,
                         .adam_m = b->model.adam_m,
                         .adam_v = b->model.adam_v,
                         .layout = &b->model.layout};
        b->model.grad_rows = b->B;
        double loss =
            nb_mlp_forward(&b->model, b->x + (size_t)lo * mlp_dims[0], b->y + lo, hi - lo, 1);
        nb_mlp_backward(&b->model, b->y + lo);
        nb_train_dist_sum(b->dist, &tr, loss, hi - lo, b->B, NULL);
        nb_adam_step_layout(b->model.params, b->model.grads, b->model.adam_m, b->model.adam_v,
                            &b->model.layout, ++b->t, &b->adam);
        nb_train_dist_buffers(b->dist, &tr);
        return nb_now() - ts;
    }
    nb_mlp_forward(&b->model, b->x, b->y, b->B, 1);
    nb_mlp_backward(&b->model, b->y);
    nb_adam_step_layout(b->model.params, b->model.grads, b->model.adam_m, b->model.adam_v,
                        &b->model.layout, ++b->t, &b->adam);
    return nb_now() - ts;
}

static const int mnist_bench_batches[] = {128, 4, 0};

static const char mnist_paper[] =
    "LN paper §6.6 (Fig. 6) shows curves only (test error and NLL over ~60 epochs, batch 128 "
    "and 4); it gives no numbers to set beside these, and not the activation, learning rate, "
    "epochs or initialization: the He-normal weights, N(0, 2/fan_in) (Glorot uniform for tanh "
    "and sigmoid), are normbench's choice, not the paper's (docs/papers.md#mnist).";

const nb_task nb_task_mnist = {
    .name = "mnist",
    .summary = "MLP 784-1000-1000-10 on MNIST / Fashion-MNIST: LN paper §6.6",
    .default_dataset = "fashion-mnist",
    .datasets = mnist_datasets,
    .cuda = 1,
    .data_parallel = 1,
    .defaults = mnist_defaults,
    .train = mnist_train,
    .bench_open = mnist_bench_open,
    .bench_step = mnist_bench_step,
    .bench_close = mnist_bench_close,
    .bench_batches = mnist_bench_batches,
    .target = {"val_error", 0.15, 0},
    .paper = mnist_paper,
};
