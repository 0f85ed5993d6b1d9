/* tests/task_toy.c — a task that exists only in the test build (build/tests/normbench-toy): the
 * proof that a task lives in one file. It declares its own options (one of each kind, a model
 * selector, an option only one model takes, a default that differs per norm and per model),
 * trains through the shared loop, and is registered by the one line at the end of this file;
 * no other file of the product names it. tests/cli/13-toy.t runs, sweeps, reports and plots it.
 *
 * The model: least squares y ≈ w·f(x) on generated data, f the identity (--model linear) or
 * x ↦ x³ (--model cubic); the norm is recorded but not used (every norm trains the same). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"
#include "tasks/train.h"

typedef struct toy_opts {
    int width;    /* weights */
    double noise; /* target noise */
    int model;    /* 0 linear, 1 cubic */
    double shift; /* cubic: x - shift before cubing */
    int center;   /* flag: centre the features */
    const char *label;
} toy_opts;

static const char *const toy_models[] = {"linear", "cubic", NULL};

static const nb_task_opt toy_opts_decl[] = {
    {"model", NB_TOPT_CHOICE, offsetof(toy_opts, model), "M", "the features", toy_models,
     .selector = 1},
    {"toy-width", NB_TOPT_INT, offsetof(toy_opts, width), "N", "weights", NULL, 1, 64, 8},
    {"toy-noise", NB_TOPT_DOUBLE, offsetof(toy_opts, noise), "X", "noise of the targets", NULL, 0,
     10, 0.1},
    {"shift", NB_TOPT_DOUBLE, offsetof(toy_opts, shift), "X", "shift before cubing", NULL, -5, 5, 0,
     .models = "cubic"},
    {"center", NB_TOPT_FLAG, offsetof(toy_opts, center), NULL, "centre the features"},
    {"toy-label", NB_TOPT_STR, offsetof(toy_opts, label), "TEXT", "a free text", .def_str = "x"},
    {NULL},
};

static const toy_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static void toy_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm);
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.lr = 0.05;
    cfg->epochs = 4;
    cfg->batch = 8;
    cfg->eval_batch = 64;
    cfg->log_every = 5;
    toy_opts *o = cfg->task_opts;
    if (norm == NB_NORM_NONE) o->noise = 0.2; /* a default that differs per norm */
    if (o->model == 1) o->width = 4;          /* and one that differs per model */
}

enum { NTRAIN = 256, NVAL = 64 };

typedef struct toy_run {
    nb_layout layout;
    float *params, *grads, *m, *v;
    float *x, *y; /* (NTRAIN + NVAL) rows of width features */
    int *perm, width, batch;
} toy_run;

static void toy_epoch(void *self, int epoch, nb_rng *data) {
    toy_run *r = self;
    nb_rng_shuffle(data, r->perm, NTRAIN);
}

static double toy_loss(toy_run *r, int row, int grad, double scale) {
    const float *x = r->x + (size_t)row * r->width;
    double e = -r->y[row];
    for (int j = 0; j < r->width; j++)
        e += r->params[j] * x[j];
    if (grad)
        for (int j = 0; j < r->width; j++)
            r->grads[j] += (float)(e * x[j] * scale);
    return 0.5 * e * e;
}

static double toy_step(void *self, int64_t bi, nb_rng *noise) {
    toy_run *r = self;
    double loss = 0;
    for (int b = 0; b < r->batch; b++)
        loss += toy_loss(r, r->perm[(bi * r->batch + b) % NTRAIN], 1, 1.0 / r->batch);
    return loss / r->batch;
}

static int toy_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    toy_run *r = self;
    double loss = 0;
    for (int i = 0; i < NVAL; i++)
        loss += toy_loss(r, NTRAIN + i, 0, 0);
    out[0] = (nb_metric){final ? "test_loss" : "val_loss", 0, 0, loss / NVAL};
    return 1;
}

static int toy_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status, nb_err *err) {
    const toy_opts *o = opts_of(cfg);
    toy_run r;
    memset(&r, 0, sizeof r);
    r.width = o->width;
    r.batch = cfg->batch < NTRAIN ? cfg->batch : NTRAIN;
    nb_layout_add(&r.layout, "w", (size_t)r.width, 1);
    size_t n = (size_t)(NTRAIN + NVAL) * (size_t)r.width;
    r.params = calloc(r.layout.total, sizeof(float));
    r.grads = calloc(r.layout.total, sizeof(float));
    r.m = calloc(r.layout.total, sizeof(float));
    r.v = calloc(r.layout.total, sizeof(float));
    r.x = malloc(sizeof(float) * n);
    r.y = malloc(sizeof(float) * (NTRAIN + NVAL));
    r.perm = malloc(sizeof(int) * NTRAIN);
    int rc = -1;
    if (!r.params || !r.grads || !r.m || !r.v || !r.x || !r.y || !r.perm) {
        nb_errf(err, "out of memory");
        goto out;
    }
    nb_rng g;
    nb_rng_seed(&g, 7, NB_STREAM_SYNTH); /* the data do not depend on the run's seed */
    for (int i = 0; i < NTRAIN + NVAL; i++) {
        double s = 0;
        for (int j = 0; j < r.width; j++) {
            double x = nb_rng_normal(&g);
            if (o->model == 1) x = (x - o->shift) * (x - o->shift) * (x - o->shift);
            if (o->center) x -= o->model == 1 ? -o->shift * (o->shift * o->shift + 3) : 0;
            r.x[(size_t)i * r.width + j] = (float)x;
            s += 0.5 * (j + 1) / r.width * x;
        }
        r.y[i] = (float)(s + o->noise * nb_rng_normal(&g));
    }
    for (int i = 0; i < NTRAIN; i++)
        r.perm[i] = i;
    nb_trainer t = {.self = &r,
                    .params = r.params,
                    .grads = r.grads,
                    .adam_m = r.m,
                    .adam_v = r.v,
                    .layout = &r.layout,
                    .steps_per_epoch = NTRAIN / r.batch,
                    .extra = {{r.perm, sizeof(int) * NTRAIN}},
                    .nextra = 1,
                    .epoch_begin = toy_epoch,
                    .step = toy_step,
                    .evaluate = toy_evaluate};
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    free(r.params), free(r.grads), free(r.m), free(r.v), free(r.x), free(r.y), free(r.perm);
    return rc;
}

static const char *const toy_datasets[] = {"synthetic", NULL};
static const int toy_batches[] = {8, 0};

static const nb_task nb_task_toy = {
    .name = "toy",
    .summary = "test build only: least squares on generated data",
    .default_dataset = "synthetic",
    .datasets = toy_datasets,
    .opts = toy_opts_decl,
    .opts_size = sizeof(toy_opts),
    .defaults = toy_defaults,
    .train = toy_train,
    .bench_batches = toy_batches,
    .target = {"val_loss", 0.5, 0},
    .paper = "no paper: a test task",
};

/* The registration: the test build's task table gets this task. */
const nb_task *const nb_tasks_extra[] = {&nb_task_toy, NULL};
