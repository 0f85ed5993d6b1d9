/* bench/bench.h — the benchmarks: the norm kernels alone (CPU and CUDA), a task's training step
 * per norm and batch (interleaved in rounds; over MPI ranks; against PyTorch in a subprocess),
 * and the statistics they report (medians, bootstrap intervals of ratios).
 *
 * Everything a benchmark is steered by lives in an nb_bench that the command fills from its
 * options (cmd/cmd_bench.c); nothing here keeps state between calls. Each benchmark writes its
 * table (table, csv or json) to the command's stream and says its errors through the command's
 * nb_bench_io (nothing here prints on its own), and returns an exit status (0: done, 1: failed,
 * with the message said). */
#ifndef NB_BENCH_BENCH_H
#define NB_BENCH_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "nn/cuda/nbcuda.h"
#include "run/job.h" /* the exit statuses */
#include "nn/nn.h"
#include "tasks/task.h"

/* `bench step` interleaves its instances in rounds of ROUND steps or ROUND_MS milliseconds,
 * whichever ends first (at least one step) */
enum { ROUND = 5, ROUND_MS = 250 };
enum { FMT_TABLE, FMT_CSV, FMT_JSON, FMT_MD };
enum { MAXGIVEN = 64, MAXLABELS = 8 };

/* A row of `bench step` is one of the six norms, or a norm label that a task's flag records a
 * run under (tasks/taskopt.h: norm_as; reader's --bn-everywhere is 'batch-everywhere'): row
 * NB_NORMS_MAX + i is labels[i], timed with that flag on over its base norm (the first norm
 * the task accepts the flag with). */
typedef struct nb_bench_label {
    const char *name, *flag;
    const nb_task *task;
    int base;
} nb_bench_label;

/* Where a benchmark's output goes, as the command gives it: its table to out (the command's
 * stdout), its messages (whole lines: "error: ...", "hint: ...") through say (NULL: none). */
typedef struct nb_bench_io {
    FILE *out;
    void (*say)(void *ctx, const char *text);
    void *ctx;
} nb_bench_io;

/* What steers a benchmark. */
typedef struct nb_bench {
    nb_bench_io io;               /* where its table and messages go */
    int device;                   /* --device: 0 cpu, 1 cuda */
    nb_given given[MAXGIVEN + 1]; /* the task's own options for `bench step` (mt --model) */
    int ngiven;
    /* `bench step` under mpirun with more than one rank: the data-parallel step over the ranks */
    int dp, bn_sync;
    nb_dist dist;
    /* --against threads under mpirun: rank 0 alone times the same step at the whole batch with
     * solo_threads threads (ranks x threads per rank) between the rounds over the ranks */
    int vs_threads, rank_threads, solo_threads;
    nb_bench_label labels[MAXLABELS]; /* nb_bench_find_labels */
    int nlabels;
} nb_bench;

/* ---- the benchmarks ---------------------------------------------------------------------- */

/* The kernels of norms[0..nnorms) on the CPU (bench/kernels.c), at shapes[0..nshapes) (rows,
 * columns), or at the default shapes (128x1000, 65536x1024) when shapes is NULL. */
#define NB_BENCH_MAX_SHAPES 16
int nb_bench_kernels(const nb_bench_io *io, const int *norms, int nnorms, int fmt,
                     const int (*shapes)[2], int nshapes);
/* --shapes LIST: ROWSxCOLUMNS,... into shapes[0..*n) (at most NB_BENCH_MAX_SHAPES; a side at most
 * 2^20 and at most 2^27 values: the benchmark holds four such arrays). Returns 0, or -1 with err
 * (naming the list). */
int nb_bench_parse_shapes(const char *arg, int (*shapes)[2], int *n, nb_err *err);
/* The same on the GPU, with fp32 or bf16 input and output. */
int nb_bench_kernels_cuda(const nb_bench_io *io, const int *norms, int nnorms, int fmt,
                          nb_cuda_dtype dt);
/* The 3x3 layers of ConvPool-CNN-C through each convolution engine (im2col, Winograd F(2x2) and
 * F(4x4)), forward and backward, batched and exact sums, at batch N, rounds interleaved rounds
 * (bench/conv.c). */
int nb_bench_conv(const nb_bench_io *io, int N, int rounds, int fmt);
/* task's training step for every row of norms (norms and labels) and batch, steps timed steps
 * each (bench/step.c); data-parallel when b->dp. */
int nb_bench_step(nb_bench *b, const nb_task *task, const int *norms, int nnorms,
                  const int *batches, int nbatches, int steps, int fmt);
/* The same step in PyTorch beside normbench's, paired (bench/torch.c). */
int nb_bench_against(nb_bench *b, const nb_task *task, const int *norms, int nnorms,
                     const int *batches, int nbatches, int steps, int fmt);

/* A kept `bench kernels|conv|step ... --format csv` file shown as bench's table (md: as Markdown,
 * for a results page), with the machine, threads, BLAS and date it holds (bench/csvin.c). A file
 * that is not such a CSV whole (another header or version, a row of another width, a value that
 * is not a number where one is due, a file cut short) is refused, naming the file and the line;
 * nothing is printed then. */
int nb_bench_from(const nb_bench_io *io, const char *path, int md);

/* ---- rows and lists ---------------------------------------------------------------------- */

/* Fills b->labels from the task table. */
void nb_bench_find_labels(nb_bench *b);
/* The norm a row trains, and its name. */
nb_norm_kind nb_bench_row_kind(nb_bench *b, int row);
const char *nb_bench_row_name(nb_bench *b, int row);
/* Takes the labels out of a norm list (into rows[0..*nrows), as row numbers), the rest into
 * rest. Returns 0, 1 when a name is listed twice, -1 when the list is malformed. */
int nb_bench_split_labels(nb_bench *b, const char *list, char *rest, size_t size, int *rows,
                          int *nrows);
/* "128,4" into out[0..max); returns the count, or -1. */
int nb_bench_parse_int_list(const char *list, int *out, int max);

/* ---- shared by the benchmarks ------------------------------------------------------------ */

/* Text (printf-style, whole lines) through io->say. */
void nb_bench_say(const nb_bench_io *io, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "error: ...\n" (printf-style) through io->say; returns NB_EXIT_FAIL. */
int nb_bench_fail(const nb_bench_io *io, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "error: MSG" and "hint: HINT" through io->say; returns NB_EXIT_FAIL. */
int nb_bench_report(const nb_bench_io *io, const nb_err *e);
void nb_bench_set_threads(int n);
/* The settings every timing depends on, in one line. */
void nb_bench_settings_line(char *buf, size_t n);
/* Where and when a benchmark ran, for its CSV (the columns machine and date, last): the processor
 * as /proc/cpuinfo names it and the cores online ("Intel(R) Xeon(R) Processor, 2 cores"), and
 * the UTC time it started ("2026-11-28T03:32:10Z"). */
typedef struct nb_bench_stamp_t {
    char machine[256], date[32];
} nb_bench_stamp_t;
void nb_bench_stamp(nb_bench_stamp_t *st);
/* ",MACHINE,DATE" as CSV fields (the end of a row, before its line break). */
void nb_bench_csv_stamp(FILE *f, const nb_bench_stamp_t *st);
int nb_bench_cmp_double(const void *a, const void *b);
/* The median of v[0..n) (sorted in place). */
double nb_bench_median(double *v, int n);
void nb_bench_mean_std(const double *v, int n, double *mean, double *sd);
/* The 95% bootstrap interval of median(a)/median(b) (bench/stats.c). */
void nb_bench_ratio_interval(const double *a, int na, const double *b, int nb, double *scratch,
                             double *lo, double *hi);
/* The median milliseconds of one multi-threaded sgemm (M,N) = (M,K) (K,N) over reps calls. */
double nb_bench_time_sgemm(int M, int N, int K, int reps);
/* A task's step benchmark for one row at batch B, warmed up (solo: one process, whatever the
 * ranks); NULL with err set. */
void *nb_bench_open_native(nb_bench *b, const nb_task *task, int row, int B, int solo, nb_err *err);
/* The rows a BatchNorm statistic is taken over at batch B (the rank's share, or the whole). */
int nb_bench_bn_rows(nb_bench *b, int B);

#endif
