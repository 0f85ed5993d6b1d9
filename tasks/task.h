/* tasks/task.h — the paper tasks, their defaults, and the contract between a task's training
 * loop and whoever records it.
 *
 * A task trains with nn/ and reports through an nb_sink: metrics, parameters and progress go to
 * callbacks, so tasks/ knows nothing of SQLite or terminals (cmd/ wires the sink to the results
 * store and the progress line). Adding a task is a file tasks/NAME.c defining an nb_task and a
 * row in the table in tasks/task.c. */
#ifndef NB_TASKS_TASK_H
#define NB_TASKS_TASK_H

#include <signal.h>
#include <stdint.h>

#include "nn/nn.h"
#include "results/query.h" /* nb_metric, nb_target: record types only; tasks never open a store */
#include "util/err.h"

typedef enum nb_status {
    NB_STATUS_FINISHED,
    NB_STATUS_INTERRUPTED,
    NB_STATUS_DIVERGED,
    NB_STATUS_FAILED
} nb_status;

/* "finished", "interrupted", "diverged", "failed". */
const char *nb_status_name(nb_status s);

/* Everything a run is configured by. cmd/ fills it from the task's defaults, then the
 * command line; the values in force are recorded with the run. */
typedef struct nb_train_cfg {
    const char *task;
    const char *dataset;
    const char *data_dir;
    nb_norm_cfg norm;
    nb_act_kind act;
    nb_adam_cfg adam;
    uint64_t seed;
    int epochs;     /* epochs to train (when steps == 0) */
    int64_t steps;  /* > 0: stop after this many steps (may end inside an epoch) */
    int batch;      /* training batch size */
    int eval_batch; /* rows per evaluation forward (does not change results) */
    int subset;     /* > 0: use only this many training (and at most as many val/test) examples */
    int log_every;  /* steps between train_loss records */
    double clip;    /* > 0: global gradient-norm clipping threshold */
    int threads;    /* threads in force (recorded; cmd/ sets them) */
    int flush_denormals;         /* FTZ/DAZ on while training (see nb_flush_denormals) */
    volatile sig_atomic_t *stop; /* becomes non-zero to ask the loop to stop (Ctrl-C) */
    const char *resume_from;     /* a checkpoint to continue from (tasks/checkpoint.h), or NULL */
    /* cifar (tasks/cifar.c) */
    int norm_axes_chw; /* layer/rms/prms statistics over C×H×W instead of H×W (the paper's) */
    int none_init;     /* none: 1 the WN code's InitLayer (data init, frozen scale), 0 plain */
    double width;      /* channel multiplier of ConvPool-CNN-C (1: the paper's 96/192) */
    int zca;           /* cifar10: ZCA whitening (1) */
    /* order and reader */
    int dim;        /* model width: order's GRU and joint embedding (1024), reader's d (240) */
    int eval_every; /* training steps between evaluations (order 300, reader 1000) */
    /* order (tasks/order.c): word embedding width, loss margin, per-tensor clipping norm */
    int oe_dim_word;
    double oe_margin, oe_clip_tensor;
    /* reader (tasks/reader.c) */
    int unidirectional; /* forward-only encoders (the LN paper) instead of bidirectional */
    /* reader, norm batch: Cooijmans' --bn-everywhere (BN on the attention and output layers) */
    int bn_everywhere;
} nb_train_cfg;

typedef struct nb_progress {
    int epoch, epochs;   /* 1-based current epoch, total */
    int64_t step, steps; /* steps done, steps planned */
    double loss;         /* recent mean training loss */
    double elapsed;      /* seconds since the run started */
    double steps_per_s;  /* training steps per second so far */
    const char *phase;   /* "train" or "eval" */
} nb_progress;

struct nb_ckpt_ident; /* tasks/checkpoint.h */

typedef struct nb_sink {
    void *ctx;
    /* Records metrics; a non-zero return (with err set) fails the run. */
    int (*record)(void *ctx, const nb_metric *m, int n, nb_err *err);
    /* Records a key/value parameter learned while running (e.g. where the data came from). */
    int (*param)(void *ctx, const char *key, const char *value, nb_err *err);
    /* Where to write the end-of-epoch checkpoint (NULL member: no checkpoints). Returns the
     * path, or NULL with err set when none can be made. */
    const char *(*checkpoint_path)(void *ctx, nb_err *err);
    /* What checkpoints belong to (tasks/checkpoint.h): written into each one and checked on
     * resume; read after checkpoint_path returns. NULL: none recorded, none checked. */
    const struct nb_ckpt_ident *ckpt_ident;
    /* Progress; called every step (the receiver rate-limits its drawing). May be NULL. */
    void (*progress)(void *ctx, const nb_progress *p);
} nb_sink;

/* One GEMM of a training step: C (M,N) = A (M,K) B (K,N), `count` times per step. */
typedef struct nb_gemm_shape {
    int M, N, K, count;
    char what[40];
} nb_gemm_shape;

typedef struct nb_task {
    const char *name;
    const char *summary;
    const char *default_dataset;
    const char *const *datasets; /* NULL-terminated */
    /* Fills cfg with the task's (paper's) defaults for the given norm. */
    void (*defaults)(nb_train_cfg *cfg, nb_norm_kind norm);
    /* Trains per cfg, reporting to sink. Returns 0 with *status set (finished, interrupted or
     * diverged), or -1 with err set when the run could not proceed (missing data, I/O). */
    int (*train)(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status, nb_err *err);
    /* Benchmark of training steps on generated data at cfg->batch: bench_open builds the
     * model and its data (returns NULL with err set on failure), bench_step runs one full
     * training step (forward, backward, optimizer) and returns its seconds, bench_close frees.
     * `bench step` keeps one instance per norm open and interleaves them in rounds, so that
     * drift in the machine's speed does not bias one norm against another. */
    void *(*bench_open)(const nb_train_cfg *cfg, nb_err *err);
    double (*bench_step)(void *bench);
    void (*bench_close)(void *bench);
    /* Batch sizes `bench step` times by default, 0-terminated (the paper's settings). */
    const int *bench_batches;
    /* The level `report` measures steps and seconds to reach, unless --target says otherwise. */
    nb_target target;
    /* What the papers report for this task, for `report --paper` (their own words and numbers,
     * with the hardware their times were measured on). */
    const char *paper;
    /* Optional (NULL: not shown): floating-point operations of one training step of a bench
     * instance, and the GEMMs one step is made of, for `bench step` to show GFLOP/s and to time
     * OpenBLAS sgemm alone on the same shapes. Returns how many shapes were written. */
    double (*bench_flops)(void *bench);
    int (*bench_gemms)(void *bench, nb_gemm_shape *out, int max);
} nb_task;

/* The task called name, or NULL. */
const nb_task *nb_task_find(const char *name);
/* The i-th task (0-based), or NULL past the end. */
const nb_task *nb_task_at(int i);

/* Seconds on a monotonic clock. */
double nb_now(void);

#endif
