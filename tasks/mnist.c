/* tasks/mnist.c — the LayerNorm paper's permutation-invariant MNIST MLP (§6.6): 784-1000-1000-10,
 * LN/RMS/pRMS/WN on the hidden layers, BN on all layers, trained with Adam.
 *
 * What the paper does not say, and what we chose (recorded with every run): ReLU, Adam with
 * lr 1e-3 in PyTorch's form (eps 1e-8 on the bias-corrected moments), 20 epochs unless
 * --epochs/--steps. Batch 128, or 4 (the paper's other setting). Train is the first 55,000 training
 * images, validation the last 5,000, test the 10,000 test images. Each epoch visits the training
 * set in a fresh random order (data stream of the seed) in full batches; the remainder that does
 * not fill a batch is skipped that epoch, so that BN never sees a short batch. */
#include "tasks/task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/mnist.h"
#include "tasks/checkpoint.h"

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

/* Evaluates the model on a split: error rate and mean NLL. */
static void evaluate(nb_mlp *m, const nb_split *s, int eb, double *err_rate, double *nll) {
    long wrong = 0;
    double nll_sum = 0;
    for (int i = 0; i < s->n; i += eb) {
        int B = s->n - i < eb ? s->n - i : eb;
        double loss = nb_mlp_forward(m, s->x + (size_t)i * s->dim, s->y + i, B, 0);
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

static int mnist_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status,
                       nb_err *err) {
    int rc = -1;
    nb_mnist data;
    nb_mlp model;
    float *xb = NULL;
    int *yb = NULL, *perm = NULL;
    int have_data = 0, have_model = 0;
    double t0 = nb_now();

    if (nb_mnist_load(&data, cfg->dataset, cfg->data_dir, cfg->subset, cfg->seed, err) != 0)
        goto out;
    have_data = 1;
    if (sink->param && sink->param(sink->ctx, "data_source", data.source, err) != 0) goto out;
    const nb_split *tr = &data.train;
    if (cfg->batch > tr->n) {
        nb_errf(err, "batch size %d is larger than the %d training examples", cfg->batch, tr->n);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }

    nb_flush_denormals(cfg->flush_denormals);
    nb_rng init_rng, data_rng;
    nb_rng_seed(&init_rng, cfg->seed, NB_STREAM_INIT);
    nb_rng_seed(&data_rng, cfg->seed, NB_STREAM_DATA);
    int Bmax = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    if (nb_mlp_init(&model, 3, mlp_dims, &cfg->norm, cfg->act, Bmax, &init_rng, err) != 0) goto out;
    have_model = 1;
    xb = malloc(sizeof(float) * (size_t)Bmax * tr->dim);
    yb = malloc(sizeof(int) * (size_t)Bmax);
    perm = malloc(sizeof(int) * (size_t)tr->n);
    if (!xb || !yb || !perm) {
        nb_errf(err, "out of memory for the training batches");
        goto out;
    }
    for (int i = 0; i < tr->n; i++)
        perm[i] = i;

    if (cfg->norm.kind == NB_NORM_WEIGHT && cfg->norm.wn_data_init && !cfg->resume_from) {
        /* Salimans & Kingma: initialize g and b from a batch of shuffled training data. */
        nb_rng_shuffle(&data_rng, perm, (size_t)tr->n);
        int B = tr->n < 500 ? tr->n : 500;
        if (B > Bmax) B = Bmax;
        gather(xb, yb, tr, perm, 0, B);
        nb_mlp_data_init(&model, xb, B);
    }

    int per_epoch = tr->n / cfg->batch;
    int64_t planned = cfg->steps > 0 ? cfg->steps : (int64_t)per_epoch * cfg->epochs;
    int epochs = (int)((planned + per_epoch - 1) / per_epoch);
    int64_t step = 0;
    double train_time = 0, loss_acc = 0, last_loss = NAN;
    int loss_n = 0, first_epoch = 1;
    size_t P = model.layout.total;
    nb_ckpt_blob blobs[] = {{model.params, P * sizeof(float)},
                            {model.adam_m, P * sizeof(float)},
                            {model.adam_v, P * sizeof(float)},
                            {perm, (size_t)tr->n * sizeof(int)}};
    if (cfg->resume_from) {
        nb_ckpt_state st;
        if (nb_ckpt_read(cfg->resume_from, &st, blobs, 4, err) != 0) goto out;
        step = st.step;
        first_epoch = st.epoch + 1;
        train_time = st.train_time;
        loss_acc = st.loss_acc;
        loss_n = (int)st.loss_n;
        last_loss = st.last_loss;
        init_rng = st.rng[0];
        data_rng = st.rng[1];
        t0 = nb_now() - st.wall;
    }
    *status = NB_STATUS_FINISHED;

    for (int epoch = first_epoch; epoch <= epochs && step < planned; epoch++) {
        nb_rng_shuffle(&data_rng, perm, (size_t)tr->n);
        double epoch_train0 = train_time;
        for (int bi = 0; bi < per_epoch && step < planned; bi++) {
            gather(xb, yb, tr, perm, bi * cfg->batch, cfg->batch);
            double ts = nb_now();
            nb_mlp_zero_grad(&model);
            double loss = nb_mlp_forward(&model, xb, yb, cfg->batch, 1);
            if (!isfinite(loss)) {
                nb_metric m = {"train_loss", step + 1, nb_now() - t0, loss};
                if (sink->record(sink->ctx, &m, 1, err) != 0) goto out;
                *status = NB_STATUS_DIVERGED;
                nb_errf(err, "training loss became %s at step %lld",
                        isnan(loss) ? "NaN" : "infinite", (long long)(step + 1));
                rc = 0;
                goto out;
            }
            nb_mlp_backward(&model, yb);
            if (cfg->clip > 0) nb_clip_global(model.grads, &model.layout, cfg->clip);
            step++;
            nb_adam_step_layout(model.params, model.grads, model.adam_m, model.adam_v,
                                &model.layout, (long)step, &cfg->adam);
            train_time += nb_now() - ts;
            loss_acc += loss;
            loss_n++;
            if (step % cfg->log_every == 0 || step == planned) {
                last_loss = loss_acc / loss_n;
                nb_metric m = {"train_loss", step, nb_now() - t0, last_loss};
                if (sink->record(sink->ctx, &m, 1, err) != 0) goto out;
                loss_acc = 0;
                loss_n = 0;
            }
            if (sink->progress) {
                nb_progress p = {epoch,
                                 epochs,
                                 step,
                                 planned,
                                 isnan(last_loss) ? loss : last_loss,
                                 nb_now() - t0,
                                 step / (train_time > 0 ? train_time : 1e-9),
                                 "train"};
                sink->progress(sink->ctx, &p);
            }
            if (cfg->stop && *cfg->stop) {
                *status = NB_STATUS_INTERRUPTED;
                break;
            }
        }
        if (*status == NB_STATUS_INTERRUPTED) {
            /* Keep what the partial epoch measured; skip the evaluation. */
            if (loss_n > 0) {
                nb_metric m = {"train_loss", step, nb_now() - t0, loss_acc / loss_n};
                if (sink->record(sink->ctx, &m, 1, err) != 0) goto out;
            }
            nb_metric m = {"ms_per_step", step, nb_now() - t0, 1e3 * train_time / (double)step};
            if (sink->record(sink->ctx, &m, 1, err) != 0) goto out;
            break;
        }
        if (sink->progress) {
            nb_progress p = {epoch,
                             epochs,
                             step,
                             planned,
                             last_loss,
                             nb_now() - t0,
                             step / (train_time > 0 ? train_time : 1e-9),
                             "eval"};
            sink->progress(sink->ctx, &p);
        }
        double ve, vn, te, tn;
        evaluate(&model, &data.val, cfg->eval_batch, &ve, &vn);
        evaluate(&model, &data.test, cfg->eval_batch, &te, &tn);
        double wall = nb_now() - t0;
        nb_metric ms[] = {
            {"epoch", step, wall, (double)epoch},
            {"val_error", step, wall, ve},
            {"val_nll", step, wall, vn},
            {"test_error", step, wall, te},
            {"test_nll", step, wall, tn},
            {"ms_per_step", step, wall, 1e3 * train_time / (double)step},
            {"epoch_seconds", step, wall, train_time - epoch_train0},
        };
        if (sink->record(sink->ctx, ms, (int)(sizeof ms / sizeof ms[0]), err) != 0) goto out;
        if (!isfinite(vn) || !isfinite(tn)) {
            *status = NB_STATUS_DIVERGED;
            nb_errf(err, "evaluation loss is not finite after epoch %d", epoch);
            rc = 0;
            goto out;
        }
        /* Everything the next epoch depends on, for `run --resume`. */
        const char *ck = sink->checkpoint_path ? sink->checkpoint_path(sink->ctx, err) : NULL;
        if (sink->checkpoint_path && !ck) goto out;
        if (ck && step < planned) {
            nb_ckpt_state st = {step,     epoch,  train_time, nb_now() - t0,
                                loss_acc, loss_n, last_loss,  {init_rng, data_rng}};
            if (nb_ckpt_write(ck, &st, blobs, 4, err) != 0) goto out;
        }
    }
    rc = 0;
out:
    free(xb);
    free(yb);
    free(perm);
    if (have_model) nb_mlp_free(&model);
    if (have_data) nb_mnist_free(&data);
    return rc;
}

typedef struct mnist_bench {
    nb_mlp model;
    float *x;
    int *y, B;
    long t;
    nb_adam_cfg adam;
} mnist_bench;

static void mnist_bench_close(void *p) {
    mnist_bench *b = p;
    if (!b) return;
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
    if (nb_mlp_init(&b->model, 3, mlp_dims, &cfg->norm, cfg->act, b->B, &rng, err) != 0) {
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
    return b;
}

static double mnist_bench_step(void *p) {
    mnist_bench *b = p;
    double ts = nb_now();
    nb_mlp_zero_grad(&b->model);
    nb_mlp_forward(&b->model, b->x, b->y, b->B, 1);
    nb_mlp_backward(&b->model, b->y);
    nb_adam_step_layout(b->model.params, b->model.grads, b->model.adam_m, b->model.adam_v,
                        &b->model.layout, ++b->t, &b->adam);
    return nb_now() - ts;
}

static const int mnist_bench_batches[] = {128, 4, 0};

static const char mnist_paper[] =
    "LN paper §6.6 (Fig. 6) shows curves only (test error and NLL over ~60 epochs, batch 128 "
    "and 4); it gives no numbers to set beside these, and not the activation, learning rate or "
    "epochs (PAPERS.md §6, §8).";

const nb_task nb_task_mnist = {
    .name = "mnist",
    .summary = "LN paper §6.6: MLP 784-1000-1000-10 on MNIST / Fashion-MNIST",
    .default_dataset = "fashion-mnist",
    .datasets = mnist_datasets,
    .defaults = mnist_defaults,
    .train = mnist_train,
    .bench_open = mnist_bench_open,
    .bench_step = mnist_bench_step,
    .bench_close = mnist_bench_close,
    .bench_batches = mnist_bench_batches,
    .target = {"val_error", 0.15, 0},
    .paper = mnist_paper,
};
