/* tasks/task.h — the paper tasks, their defaults, and the contract between a task's training
 * loop and whoever records it.
 *
 * A task trains with nn/ and reports through an nb_sink: metrics, parameters and progress go to
 * callbacks, so tasks/ knows nothing of SQLite or terminals (cmd/ wires the sink to the results
 * store and the progress line). Adding a task is a file tasks/NAME.c defining an nb_task (with
 * its own options declared there: tasks/taskopt.h) and a row in the table in tasks/task.c.
 * A test build adds tasks of its own without touching that table: a file that defines
 * `const nb_task *const nb_tasks_extra[] = {&my_task, NULL};` is linked in (see
 * the test task in tests/). */
#ifndef NB_TASKS_TASK_H
#define NB_TASKS_TASK_H

#include <signal.h>
#include <stdint.h>

#include "nn/nn.h"
#include "results/query.h" /* nb_metric, nb_target: record types only; tasks never open a store */
#include "tasks/taskopt.h"
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
/* A run split over several processes (data-parallel; cmd/mpi.c implements it with MPI): this
 * process's rank of size, and collectives that give every process the same bits. */
typedef struct nb_dist {
    int rank, size;
    void *ctx;
    void (*sum_f)(void *ctx, float *x, size_t n);   /* sums over the ranks, in place */
    void (*sum_d)(void *ctx, double *x, size_t n);  /* the same in double */
    void (*bcast_f)(void *ctx, float *x, size_t n); /* rank 0's values to every rank */
    int bn_sync; /* BatchNorm statistics over the global batch (else per rank; rank 0's running
                    averages are broadcast every step) */
    /* Before the first step (nb_train_loop): every rank's data fingerprint (nb_trainer.data_fp)
     * compared, and a rank whose set-up failed heard. Returns 0, or -1 with err set on every
     * rank (the ranks' data differ, or a rank could not set up). NULL: nothing compared. */
    int (*agree)(void *ctx, const char *data_fp, nb_err *err);
    double comm_seconds; /* time spent in the gradients' sum so far (the loop adds to it) */
    double comm_bytes;   /* bytes summed per step (the gradients) */
} nb_dist;

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
    int device;                  /* 0 the CPU, 1 CUDA (nn/cuda/nbcuda.h; mnist only) */
    volatile sig_atomic_t *stop; /* becomes non-zero to ask the loop to stop (Ctrl-C) */
    const char *resume_from;     /* a checkpoint to continue from (tasks/checkpoint.h), or NULL */
    /* The task's own options, in the task's own struct (declared by its nb_task_opt rows,
     * tasks/taskopt.h); nb_task_configure allocates and fills it. */
    void *task_opts;
    /* Data-parallel over dist->size processes (NULL or size 1: this process alone). The loop
     * splits every batch; a task supports it with nb_trainer.step_shard. */
    nb_dist *dist;
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

/* What `normbench translate` may hand a translation model (nb_task.translate_open). */
typedef struct nb_translate_limits {
    int src_max;      /* the most pieces a source line may have (test_bleu's rule) */
    size_t max_bytes; /* a line of more bytes has more than src_max pieces, surely */
    int batch_tokens; /* source pieces a batch holds, padding counted (the option, or default) */
    int batch_lines;  /* and lines (the run's --eval-batch) */
    /* given to translate_open (0: as the kept model decodes, its test_bleu's way): mt's beam
     * rules (1 nematus, 2 simple) and decoding cap (1 authors, 2 longest), to decode one model
     * both ways */
    int beam_rules, decode_cap;
} nb_translate_limits;

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
    /* Called after a checkpoint was written to the path checkpoint_path gave (e.g. to copy it
     * to the host that keeps the store); a non-zero return (err set) fails the run. May be
     * NULL. */
    int (*checkpoint_saved)(void *ctx, const char *path, nb_err *err);
    /* Progress; called every step (the receiver rate-limits its drawing). May be NULL. */
    void (*progress)(void *ctx, const nb_progress *p);
    /* Where a finished run keeps what using its model needs (mt: the parameters, BPE codes and
     * vocabularies for `normbench translate`): a directory, created, beside the store. NULL
     * member, or NULL returned with err set: none can be kept. */
    const char *(*model_dir)(void *ctx, nb_err *err);
} nb_sink;

/* One GEMM of a training step: C (M,N) = A (M,K) B (K,N), `count` times per step. */
typedef struct nb_gemm_shape {
    int M, N, K, count;
    char what[40];
} nb_gemm_shape;

/* The floating-point operations of n GEMM shapes: 2 M N K per call, times its count. */
double nb_gemm_flops(const nb_gemm_shape *s, int n);

/* A table of a paper that `report --paper` sets beside the runs (cmd/cmd_report.c): per norm
 * the paper's values, each column beside one of this store's metrics, and its seconds per 1,000
 * training steps (with the speed-up against LayerNorm they imply). */
enum { NB_PAPER_COLS = 5, NB_PAPER_ROWS = 6 };
typedef struct nb_paper_row {
    const char *norm;                 /* a norm's name; NULL ends the rows */
    const char *cells[NB_PAPER_COLS]; /* as the paper prints them ("-": failed to train) */
    double seconds;                   /* s per 1k steps; 0: the table has no times */
} nb_paper_row;
typedef struct nb_paper_table {
    const char *title; /* NULL ends a task's tables */
    /* the model label (its first word, e.g. "rnnsearch") whose runs it is set beside; NULL:
     * every run of the task */
    const char *model;
    int ncol;
    const char *head[NB_PAPER_COLS];   /* the paper's column headings */
    const char *metric[NB_PAPER_COLS]; /* the metric shown beside each (the last value) */
    nb_paper_row rows[NB_PAPER_ROWS + 1];
} nb_paper_table;

typedef struct nb_task {
    const char *name;
    const char *summary;
    const char *default_dataset;
    const char *const *datasets; /* NULL-terminated */
    /* The task's own options ({NULL}-terminated rows; NULL when it has none) and the size of
     * the struct they live in (cfg->task_opts). */
    const nb_task_opt *opts;
    size_t opts_size;
    int cuda; /* the task trains and benchmarks on a GPU too (--device cuda) */
    /* The activation its model uses whatever --act says, by name (lm: "gelu-tanh", GPT-2's
     * GELU in its tanh form): recorded as the run's activation and shown by help, and --act is
     * refused (the task's finish). NULL: cfg->act is the activation. */
    const char *activation;
    /* the task's step benchmark (bench_open) takes cfg->dist: each process runs its rows of
     * the batch and the step sums the gradients with nb_train_dist_sum (tasks/train.h), as its
     * trainer's step_shard does in training */
    int data_parallel;
    /* Fills cfg with the task's (paper's) defaults for the given norm: the common options, and
     * the task's own where they differ by norm, model or dataset (cfg->task_opts holds the rows'
     * defaults and the chosen model already; cfg->dataset is set when `run` calls it, NULL when
     * help does). */
    void (*defaults)(nb_train_cfg *cfg, nb_norm_kind norm);
    /* Called once every option is in place: checks combinations (an option that needs a norm)
     * and applies task options that act on common ones. given lists the options typed on the
     * command line. Returns -1 with err set for a usage error. May be NULL. */
    int (*finish)(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err);
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
    /* Translation with a finished run's model (`normbench translate RUN`), in three calls.
     * translate_open loads the model kept in dir (its model_dir) for the run cfg configures,
     * refusing one that belongs to another run or store than want (tasks/checkpoint.h) or that
     * was changed since, and sets *lim (what a line may be, how lines are batched); batch_tokens
     * bounds a batch's source pieces, padding counted (0: what the run's test_bleu used), and so
     * the memory translating takes. translate translates n raw source lines into out[i] (newly
     * allocated, detokenized; "" for an empty line), a line longer than lim->src_max pieces
     * into out[i] = NULL with pieces[i] its length in pieces (a lower bound, -1, when it has
     * more than lim->max_bytes bytes: the caller need not pass it whole). Each returns 0 (or
     * the translator), or -1 (NULL) with err set. NULL: the task does not translate. */
    void *(*translate_open)(const nb_train_cfg *cfg, const char *dir,
                            const struct nb_ckpt_ident *want, int batch_tokens,
                            nb_translate_limits *lim, nb_err *err);
    int (*translate)(void *tr, char *const *lines, int n, char **out, int *pieces, nb_err *err);
    void (*translate_close)(void *tr);
    /* Generation with a finished run's model (`normbench sample RUN`): loads the model kept in
     * dir for the run cfg configures (refusing one of another run or store than want, or
     * changed since), continues prompt (UTF-8; "" : the model's own start) by `tokens` more
     * tokens drawn at temperature (0: the most likely each time) from a generator seeded by
     * seed, and returns the prompt and what followed, newly allocated (*len its bytes), or NULL
     * with err set. NULL: the task does not sample. */
    char *(*sample)(const nb_train_cfg *cfg, const char *dir, const struct nb_ckpt_ident *want,
                    const char *prompt, long tokens, double temperature, uint64_t seed, size_t *len,
                    nb_err *err);
    /* Batch sizes `bench step` times by default, 0-terminated (the paper's settings). */
    const int *bench_batches;
    /* The level `report` measures steps and seconds to reach, unless --target says otherwise. */
    nb_target target;
    /* What the papers report for this task, for `report --paper` (their own words and numbers,
     * with the hardware their times were measured on). */
    const char *paper;
    /* Tables of the paper set beside the runs by `report --paper` ({NULL}-terminated; NULL:
     * none, the text above only). */
    const nb_paper_table *paper_tables;
    /* Optional (NULL: not shown): floating-point operations of one training step of a bench
     * instance, and the GEMMs one step is made of, for `bench step` to show GFLOP/s and to time
     * OpenBLAS sgemm alone on the same shapes. Returns how many shapes were written. */
    double (*bench_flops)(void *bench);
    int (*bench_gemms)(void *bench, nb_gemm_shape *out, int max);
    /* Images from a finished run's model (`normbench sample RUN --out FILE.png`): loads the model
     * kept in dir as sample does (refusing one of another run or store than want, or changed
     * since), draws count images from the model with a generator seeded by seed and returns
     * them as a PNG, newly allocated (*len its bytes), or NULL with err set. frames 0: a grid
     * of the images; frames > 0: a row per image, its canvas at up to `frames` points of its
     * drawing, the finished image last. NULL: the task draws no images. */
    unsigned char *(*sample_png)(const nb_train_cfg *cfg, const char *dir,
                                 const struct nb_ckpt_ident *want, int count, int frames,
                                 uint64_t seed, size_t *len, nb_err *err);
} nb_task;

/* The task called name, or NULL. */
const nb_task *nb_task_find(const char *name);
/* The i-th task (0-based), or NULL past the end. */
const nb_task *nb_task_at(int i);
/* The activation a run of cfg uses: its task's own where it has one (lm's GELU), else --act's. */
const char *nb_task_act_name(const nb_train_cfg *cfg);

/* Refuses a batch whose buffers cannot fit in memory, before any buffer of that size exists.
 * build(ctx, B, err) builds and frees the model for batches of B rows (the models' allocators
 * count their bytes, nn/mem.h; the task notes its own per-row buffers with nb_mem_note); it is
 * called at B = 2 and B = 4 and the count is extrapolated to Bmax rows, then compared with
 * nb_mem_room. Bmax up to 256 is not checked (no extra build). what names the option(s) that
 * set Bmax, e.g. "--batch 100000". Returns 0, or -1 with err set (naming what and the bytes). */
int nb_check_batch_memory(int (*build)(void *ctx, int B, nb_err *err), void *ctx, int Bmax,
                          const char *what, nb_err *err);

/* Seconds on a monotonic clock. */
double nb_now(void);

#endif
