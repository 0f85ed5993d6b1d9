/* bench/step.c — a task's training step timed per norm and batch, interleaved in rounds;
 * under mpirun the data-parallel step over the ranks. (Moved from cmd/cmd_bench.c.) */
#include "bench/bench.h"

#include "nn/blas.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/cuda/nbcuda.h"
#include "nn/nn.h"
#include "run/mpi.h"
#include "tasks/task.h"
#include "util/json.h"

void nb_bench_find_labels(nb_bench *b) {
    b->nlabels = 0;
    for (int i = 0; nb_task_at(i); i++) {
        const nb_task *t = nb_task_at(i);
        for (const nb_task_opt *o = t->opts; o && o->name; o++) {
            if (o->kind != NB_TOPT_FLAG || !o->norm_as || b->nlabels >= MAXLABELS) continue;
            int base = -1;
            for (int k = 0; k < nb_norm_count() && base < 0; k++) {
                nb_train_cfg cfg;
                nb_err err;
                memset(&cfg, 0, sizeof cfg);
                cfg.norm.kind = (nb_norm_kind)k;
                nb_given g = {o->name, NULL};
                if (nb_task_configure(t, &cfg, k, &g, 1, &err) == 0 &&
                    (!t->finish || t->finish(&cfg, &g, 1, &err) == 0))
                    base = k;
                nb_task_opts_free(&cfg);
            }
            if (base < 0) continue;
            b->labels[b->nlabels].name = o->norm_as;
            b->labels[b->nlabels].flag = o->name;
            b->labels[b->nlabels].task = t;
            b->labels[b->nlabels].base = base;
            b->nlabels++;
        }
    }
}

nb_norm_kind nb_bench_row_kind(nb_bench *b, int row) {
    return row >= NB_NORMS_MAX ? (nb_norm_kind)b->labels[row - NB_NORMS_MAX].base
                               : (nb_norm_kind)row;
}

const char *nb_bench_row_name(nb_bench *b, int row) {
    return row >= NB_NORMS_MAX ? b->labels[row - NB_NORMS_MAX].name
                               : nb_norm_name((nb_norm_kind)row);
}

/* Copies the comma-separated list to rest without its label items, whose rows go to rows[]
 * (*nrows). Returns 0, or -1 when an item is empty or the list does not fit; 1 when a label is
 * listed twice. */
int nb_bench_split_labels(nb_bench *b, const char *list, char *rest, size_t size, int *rows,
                          int *nrows) {
    size_t n = 0;
    *nrows = 0;
    rest[0] = '\0';
    for (const char *p = list;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0) return -1;
        int label = -1;
        for (int i = 0; i < b->nlabels; i++)
            if (strlen(b->labels[i].name) == len && strncmp(p, b->labels[i].name, len) == 0)
                label = i;
        if (label >= 0) {
            for (int i = 0; i < *nrows; i++)
                if (rows[i] == NB_NORMS_MAX + label) return 1;
            rows[(*nrows)++] = NB_NORMS_MAX + label;
        } else {
            if (n + len + 2 > size) return -1;
            if (n) rest[n++] = ',';
            memcpy(rest + n, p, len);
            n += len;
            rest[n] = '\0';
        }
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

int nb_bench_parse_int_list(const char *list, int *out, int max) {
    int n = 0;
    const char *p = list;
    while (*p && n < max) {
        char *end;
        if (*p < '0' || *p > '9') return -1; /* decimal digits only: no sign, space or hex */
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1000000 || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *p ? -1 : n;
}

/* Median milliseconds of one multi-threaded sgemm C (M,N) = A (M,K) B (K,N) over reps. */
double nb_bench_time_sgemm(int M, int N, int K, int reps) {
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)K * N),
          *c = malloc(sizeof(float) * (size_t)M * N);
    double t[16] = {0}, med = NAN;
    if (reps > 16) reps = 16;
    if (reps < 1) reps = 1;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)M * K; i++)
            a[i] = (float)((i % 13) * 0.01);
        for (size_t i = 0; i < (size_t)K * N; i++)
            b[i] = (float)((i % 7) * 0.01);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c,
                    N); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double t0 = nb_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f,
                        c, N);
            t[r] = 1e3 * (nb_now() - t0);
        }
        med = nb_bench_median(t, reps);
    }
    free(a), free(b), free(c);
    return med;
}

/* Opens the task's step benchmark for row `row` (a norm or a label) at batch B and warms it up:
 * at least 5 steps and 0.3 s (page faults, thread start-up, clocks). NULL with err set. */
void *nb_bench_open_native(nb_bench *b, const nb_task *task, int row, int B, int solo,
                           nb_err *err) {
    int dp = b->dp && !solo; /* solo: one process at the whole batch, whatever the ranks */
    nb_train_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.norm.kind = nb_bench_row_kind(b, row);
    nb_given given[MAXGIVEN + 1];
    int ng = 0;
    for (int k = 0; k < b->ngiven; k++)
        given[ng++] = b->given[k];
    if (row >= NB_NORMS_MAX) given[ng++] = (nb_given){b->labels[row - NB_NORMS_MAX].flag, NULL};
    cfg.task = task->name;
    cfg.dataset = task->default_dataset;
    if (nb_task_configure(task, &cfg, cfg.norm.kind, given, ng, err) != 0) {
        nb_task_opts_free(&cfg);
        return NULL;
    }
    cfg.task = task->name;
    cfg.seed = 1;
    cfg.batch = B;
    cfg.device = b->device;
    if (dp) {
        cfg.dist = &b->dist;
        if (b->bn_sync) cfg.norm.bn_sum = nb_mpi_bn_sum;
    }
    void *inst = task->bench_open(&cfg, err);
    nb_task_opts_free(&cfg);
    if (dp) { /* every rank opened it, or none goes on (the steps are collective) */
        double failed = inst ? 0 : 1;
        b->dist.sum_d(b->dist.ctx, &failed, 1);
        if (failed > 0 && inst) {
            task->bench_close(inst);
            inst = NULL;
            nb_errf(err, "another rank could not open the '%s' step at batch %d", task->name, B);
        }
    }
    if (!inst) return NULL;
    double w0 = nb_now();
    for (int t = 0;; t++) {
        double go = t < 5 || nb_now() - w0 < 0.3;
        if (dp) { /* rank 0's clock decides, so that every rank takes as many steps */
            if (b->dist.rank != 0) go = 0;
            b->dist.sum_d(b->dist.ctx, &go, 1);
        }
        if (!(go > 0)) break;
        task->bench_step(inst);
    }
    return inst;
}

/* The rows BatchNorm normalizes over: the batch, or under per-rank statistics the smallest
 * rank's share of it. */
int nb_bench_bn_rows(nb_bench *b, int B) {
    return b->dp && !b->bn_sync ? B / b->dist.size : B;
}

enum { MAXG = 64 };

/* A step benchmark under way: its parameters, and per row (norm, batch) its samples and
 * statistics (nb_bench_step's steps share it). */
typedef struct step_run {
    nb_bench *b;
    const nb_task *task;
    const int *norms, *batches;
    int nnorms, nbatches, iters, fmt;
    char settings[1024];
    nb_bench_stamp_t stamp; /* where and when (the CSV's machine and date) */
    /* data-parallel: per row, the median over steps of (time in the sums over the ranks) / (step
     * time), the median of that time, and the bytes summed per step */
    double *ar_share, *ar_ms, *ar_bytes, *comm, *scratch, *solo_ms, *ssamples;
    int *sfilled;
    void *solo[NB_NORMS_MAX + MAXLABELS];
    double *ms, *sd, *med, *lo, *hi, *boot;
    void *inst[NB_NORMS_MAX + MAXLABELS];
    int *filled;
    double *samples;
    nb_gemm_shape gemms[MAXG];
    int ngemm, gemm_batch;
    double *gflop;
    int nw; /* the norm column's width */
} step_run;

static void step_free(step_run *s) {
    free(s->ar_share), free(s->ar_ms), free(s->ar_bytes), free(s->comm), free(s->scratch);
    free(s->solo_ms), free(s->ssamples), free(s->sfilled);
    free(s->ms), free(s->sd), free(s->med), free(s->lo), free(s->hi), free(s->boot);
    free(s->filled), free(s->samples), free(s->gflop);
}

/* Returns 0, or -1 when out of memory. */
static int step_alloc(step_run *s) {
    const size_t nrows = (size_t)s->nnorms * s->nbatches, iters = (size_t)s->iters;
    s->ar_share = malloc(sizeof(double) * nrows), s->ar_ms = malloc(sizeof(double) * nrows);
    s->ar_bytes = malloc(sizeof(double) * nrows);
    s->comm = malloc(sizeof(double) * (size_t)s->nnorms * iters);
    s->scratch = malloc(sizeof(double) * iters);
    s->solo_ms = malloc(sizeof(double) * nrows);
    s->ssamples = malloc(sizeof(double) * (size_t)s->nnorms * iters);
    s->sfilled = calloc((size_t)s->nnorms, sizeof(int));
    s->ms = malloc(sizeof(double) * nrows), s->sd = malloc(sizeof(double) * nrows);
    s->med = malloc(sizeof(double) * nrows), s->lo = malloc(sizeof(double) * nrows);
    s->hi = malloc(sizeof(double) * nrows), s->boot = malloc(sizeof(double) * 2 * iters);
    s->filled = calloc((size_t)s->nnorms, sizeof(int));
    s->samples = malloc(sizeof(double) * (size_t)s->nnorms * iters);
    s->gflop = calloc((size_t)s->nbatches, sizeof(double));
    return s->ar_share && s->ar_ms && s->ar_bytes && s->comm && s->scratch && s->solo_ms &&
                   s->ssamples && s->sfilled && s->ms && s->sd && s->med && s->lo && s->hi &&
                   s->boot && s->filled && s->samples
               ? 0
               : -1;
}

/* Opens every row's instance at batch bi (and rank 0's one-process ones for --against
 * threads). Returns whether that failed (err set). */
static int step_open(step_run *s, int bi, nb_err *err) {
    nb_bench *b = s->b;
    const nb_task *task = s->task;
    const int *norms = s->norms, *batches = s->batches;
    const int nnorms = s->nnorms;
    double *ar_bytes = s->ar_bytes;
    int *sfilled = s->sfilled, *filled = s->filled;
    void **solo = s->solo, **inst = s->inst;
    int failed = 0;
    for (int i = 0; i < nnorms; i++) {
        inst[i] = NULL;
        filled[i] = 0;
        ar_bytes[bi * nnorms + i] = NAN;
        if (nb_norm_get(nb_bench_row_kind(b, norms[i]))->acts == NB_ON_FEATURES &&
            nb_bench_bn_rows(b, batches[bi]) < 2)
            continue;
        if (!(inst[i] = nb_bench_open_native(b, task, norms[i], batches[bi], 0, err))) {
            failed = 1;
            break;
        }
    }
    if (b->vs_threads && !failed) { /* rank 0's one-process instances; the others sleep */
        double bad = 0;
        for (int i = 0; i < nnorms && b->dist.rank == 0; i++) {
            solo[i] = NULL;
            sfilled[i] = 0;
            if (!inst[i]) continue;
            nb_bench_set_threads(b->solo_threads);
            solo[i] = nb_bench_open_native(b, task, norms[i], batches[bi], 1, err);
            nb_bench_set_threads(b->rank_threads);
            if (!solo[i]) {
                bad = 1;
                break;
            }
        }
        nb_mpi_idle_barrier();
        b->dist.sum_d(b->dist.ctx, &bad, 1);
        if (bad > 0) {
            failed = 1;
            if (b->dist.rank != 0) nb_errf(err, "rank 0 could not open the one-process step");
        }
    }
    return failed;
}

/* Per batch size: one model per norm, all open at once, timed in interleaved rounds of
 * ROUND steps or ROUND_MS, whichever ends first (each round starting at the next norm), so
 * that a slow spell of the machine is shared by all norms instead of landing on one; steps
 * of seconds (mt) go one at a time. */
static void step_rounds(step_run *s, int bi) {
    nb_bench *b = s->b;
    const nb_task *task = s->task;
    const int nnorms = s->nnorms, iters = s->iters;
    double *ar_bytes = s->ar_bytes, *comm = s->comm;
    double *ssamples = s->ssamples;
    double *samples = s->samples;
    int *sfilled = s->sfilled, *filled = s->filled;
    void **solo = s->solo, **inst = s->inst;
    const int failed = 0;
    for (int r = 0; !failed; r++) {
        int more = 0;
        for (int j = 0; j < nnorms; j++) {
            int i = (j + r) % nnorms;
            if (!inst[i]) continue;
            /* a round ends after ROUND steps or ROUND_MS; under mpirun after ROUND steps
             * only (every rank must take the same steps: each one sums over the ranks) */
            double spent = 0;
            for (int t = 0; t < ROUND && filled[i] < iters && (b->dp || spent < ROUND_MS); t++) {
                double c0 = b->dist.comm_seconds, st = task->bench_step(inst[i]);
                comm[(size_t)i * iters + filled[i]] = b->dist.comm_seconds - c0;
                samples[(size_t)i * iters + filled[i]++] = 1e3 * st;
                ar_bytes[bi * nnorms + i] = b->dist.comm_bytes;
                spent += 1e3 * st;
            }
            if (b->vs_threads) { /* then the same steps in rank 0 alone */
                if (b->dist.rank == 0 && solo[i]) {
                    nb_bench_set_threads(b->solo_threads);
                    for (int t = 0; t < ROUND && sfilled[i] < iters; t++)
                        ssamples[(size_t)i * iters + sfilled[i]++] =
                            1e3 * task->bench_step(solo[i]);
                    nb_bench_set_threads(b->rank_threads);
                }
                nb_mpi_idle_barrier();
            }
            more |= filled[i] < iters;
        }
        if (!more) break;
    }
}

/* Batch bi's statistics per row, its instances closed. */
static void step_stats(step_run *s, int bi, int failed) {
    nb_bench *b = s->b;
    const nb_task *task = s->task;
    const int *norms = s->norms, *batches = s->batches;
    const int nnorms = s->nnorms, iters = s->iters;
    double *ar_share = s->ar_share, *ar_ms = s->ar_ms, *comm = s->comm;
    double *scratch = s->scratch, *solo_ms = s->solo_ms, *ssamples = s->ssamples;
    double *ms = s->ms, *sd = s->sd, *med = s->med, *lo = s->lo, *hi = s->hi, *boot = s->boot;
    double *samples = s->samples, *gflop = s->gflop;
    int *sfilled = s->sfilled, *filled = s->filled;
    void **solo = s->solo, **inst = s->inst;
    for (int i = 0; i < nnorms && gflop; i++)
        if (inst[i] && !failed) {
            if (task->bench_flops) gflop[bi] = 1e-9 * task->bench_flops(inst[i]);
            if (task->bench_gemms && bi == 0) {
                s->ngemm = task->bench_gemms(inst[i], s->gemms, MAXG);
                s->gemm_batch = batches[bi];
            }
            break;
        }
    int li = -1; /* layer's samples, for the intervals of vs_layer */
    for (int i = 0; i < nnorms; i++)
        if (norms[i] == (int)nb_norm_default() && inst[i] && filled[i] == iters) li = i;
    for (int i = 0; i < nnorms; i++) {
        int j = bi * nnorms + i;
        lo[j] = hi[j] = NAN;
        if (inst[i] && !failed && li >= 0 && i != li && filled[i] == iters)
            nb_bench_ratio_interval(samples + (size_t)li * iters, iters,
                                    samples + (size_t)i * iters, iters, boot, &lo[j], &hi[j]);
    }
    for (int i = 0; i < nnorms; i++) {
        if (inst[i]) task->bench_close(inst[i]);
        int j = bi * nnorms + i;
        solo_ms[j] = NAN;
        if (b->vs_threads && b->dist.rank == 0 && solo[i]) {
            task->bench_close(solo[i]);
            solo[i] = NULL;
            if (sfilled[i] > 0)
                solo_ms[j] = nb_bench_median(ssamples + (size_t)i * iters, sfilled[i]);
        }
        if (failed || filled[i] == 0) {
            ms[j] = sd[j] = med[j] = NAN;
            continue;
        }
        double *v = samples + (size_t)i * iters, *c = comm + (size_t)i * iters;
        ar_share[j] = ar_ms[j] = NAN;
        if (b->dp) {
            for (int k = 0; k < iters; k++)
                scratch[k] = c[k] * 1e3 / v[k];
            ar_share[j] = nb_bench_median(scratch, iters);
            for (int k = 0; k < iters; k++)
                scratch[k] = c[k] * 1e3;
            ar_ms[j] = nb_bench_median(scratch, iters);
        }
        nb_bench_mean_std(v, iters, &ms[j], &sd[j]);
        med[j] = nb_bench_median(v, iters);
    }
}

/* The table's heading (and the norm column's width). */
static void step_header(step_run *s) {
    FILE *tab = s->b->io.out;
    nb_bench *b = s->b;
    const nb_task *task = s->task;
    const int *norms = s->norms;
    const int nnorms = s->nnorms, iters = s->iters, fmt = s->fmt;
    char *hosts = b->dp ? nb_mpi_hosts_json() : NULL; /* collective: every rank asks */
    int nw = 7;                                       /* the norm column's width */
    for (int i = 0; i < nnorms; i++)
        if ((int)strlen(nb_bench_row_name(b, norms[i])) > nw)
            nw = (int)strlen(nb_bench_row_name(b, norms[i]));
    if (fmt == FMT_TABLE) {
        fprintf(tab, "# %s\n", s->settings);
        fprintf(tab,
                "# %s: %d timed steps per row after >= 0.3 s of warm-up, norms interleaved in "
                "rounds of %d steps or %d ms;\n# vs_layer = layer's median / this median, and its "
                "95%% bootstrap interval\n",
                task->name, iters, ROUND, ROUND_MS);
        if (b->dp)
            fprintf(tab,
                    "# data-parallel over %d ranks, %d threads each (hosts %s): each rank steps on "
                    "its rows of the batch, then\n# the gradients are summed over the ranks in "
                    "one MPI_Allreduce; allreduce_share = time in the sums / step time\n# "
                    "(median over steps, rank 0's clock), allreduce_MB = bytes summed per step\n",
                    b->dist.size, omp_get_max_threads(), hosts ? hosts : "?");
        if (b->vs_threads)
            fprintf(
                tab,
                "# --against threads: between the rounds over the ranks rank 0 alone (the others "
                "asleep) times the\n# same step at the whole batch with %d threads: "
                "one_proc_ms, and vs_one_proc = ms_per_step / one_proc_ms\n",
                b->solo_threads);
        fprintf(tab, "%-6s %-*s %6s %12s %10s %10s %9s %15s %10s%s", "task", nw, "norm", "batch",
                "ms_per_step", "mean", "std", "vs_layer", "vs_layer_95%", "norm_share",
                task->bench_flops ? "  GFLOP/s" : "");
        if (b->dp)
            fprintf(tab, " %15s %12s %12s", "allreduce_share", "allreduce_ms", "allreduce_MB");
        if (b->vs_threads) fprintf(tab, " %12s %12s", "one_proc_ms", "vs_one_proc");
        fputc('\n', tab);
    } else if (fmt == FMT_CSV) {
        fprintf(tab,
                "task,norm,batch,ms_per_step,ms_mean,ms_std,vs_layer,steps,threads,settings,"
                "norm_share,gflop_per_s,vs_layer_lo,vs_layer_hi%s%s,machine,date\n",
                b->dp ? ",ranks,allreduce_share,allreduce_ms,allreduce_bytes" : "",
                b->vs_threads ? ",one_process_threads,one_process_ms,vs_one_process" : "");
    } else {
        fprintf(tab, "{\"settings\": ");
        nb_json_str(tab, s->settings);
        fprintf(tab, ", \"threads\": %d, \"ranks\": %d, ", omp_get_max_threads(),
                b->dp ? b->dist.size : 1);
        if (b->dp)
            fprintf(tab, "\"hosts\": %s, \"bn_statistics\": \"%s\", ", hosts ? hosts : "null",
                    b->bn_sync ? "global" : "per-rank");
        if (b->vs_threads) fprintf(tab, "\"one_process_threads\": %d, ", b->solo_threads);
        fprintf(tab, "\"steps\": %d, \"results\": [", iters);
    }
    free(hosts);
    s->nw = nw;
}

/* One row: norm i at batch bi (layer, none: their medians at that batch). */
static void step_row(step_run *s, int bi, int i, double layer, double none, int *first_p) {
    FILE *tab = s->b->io.out;
    nb_bench *b = s->b;
    const nb_task *task = s->task;
    const int *norms = s->norms, *batches = s->batches;
    const int nnorms = s->nnorms, iters = s->iters, fmt = s->fmt;
    double *ar_share = s->ar_share, *ar_ms = s->ar_ms, *ar_bytes = s->ar_bytes;
    double *solo_ms = s->solo_ms;
    double *ms = s->ms, *sd = s->sd, *med = s->med, *lo = s->lo, *hi = s->hi;
    double *gflop = s->gflop;
    int first = *first_p;
    int j = bi * nnorms + i;
    const char *name = nb_bench_row_name(b, norms[i]);
    double vs = layer / med[j];
    /* the share of this norm's step beyond the step without a norm */
    double share = norms[i] == (int)nb_norm_none_kind() ? NAN : (med[j] - none) / med[j];
    if (isnan(med[j])) {
        if (fmt == FMT_TABLE)
            fprintf(tab, "%-6s %-*s %6d %12s   (%s)\n", task->name, s->nw, name, batches[bi], "-",
                    b->dp && !b->bn_sync ? "per-rank batch norm needs 2 rows per rank, or --bn-sync"
                                         : "batch norm needs a batch of 2 or more");
        return;
    }
    if (fmt == FMT_TABLE) {
        char v[32];
        if (isnan(vs))
            snprintf(v, sizeof v, "-");
        else
            snprintf(v, sizeof v, "%.3fx", vs);
        char sh[32];
        if (isnan(share))
            snprintf(sh, sizeof sh, "-");
        else
            snprintf(sh, sizeof sh, "%.1f%%", 100 * share);
        char ci[48];
        if (isnan(lo[j]))
            snprintf(ci, sizeof ci, "-");
        else
            snprintf(ci, sizeof ci, "[%.3f,%.3f]", lo[j], hi[j]);
        fprintf(tab, "%-6s %-*s %6d %12.3f %10.3f %10.3f %9s %15s %10s", task->name, s->nw, name,
                batches[bi], med[j], ms[j], sd[j], v, ci, sh);
        if (task->bench_flops && gflop) fprintf(tab, "  %7.1f", gflop[bi] / (med[j] * 1e-3));
        if (b->dp) fprintf(tab, " %15.4f %12.3f %12.3f", ar_share[j], ar_ms[j], ar_bytes[j] * 1e-6);
        if (b->vs_threads) fprintf(tab, " %12.3f %11.3fx", solo_ms[j], med[j] / solo_ms[j]);
        fputc('\n', tab);
    } else if (fmt == FMT_CSV) {
        fprintf(tab, "%s,%s,%d,%.4f,%.4f,%.4f,", task->name, name, batches[bi], med[j], ms[j],
                sd[j]);
        if (!isnan(vs)) fprintf(tab, "%.4f", vs);
        fprintf(tab, ",%d,%d,", iters, omp_get_max_threads());
        nb_csv_field(tab, s->settings);
        fputc(',', tab);
        if (!isnan(share)) fprintf(tab, "%.4f", share);
        fputc(',', tab);
        if (task->bench_flops && gflop) fprintf(tab, "%.2f", gflop[bi] / (med[j] * 1e-3));
        fputc(',', tab);
        if (!isnan(lo[j]))
            fprintf(tab, "%.4f,%.4f", lo[j], hi[j]);
        else
            fputc(',', tab);
        if (b->dp)
            fprintf(tab, ",%d,%.6f,%.4f,%.0f", b->dist.size, ar_share[j], ar_ms[j], ar_bytes[j]);
        if (b->vs_threads)
            fprintf(tab, ",%d,%.4f,%.4f", b->solo_threads, solo_ms[j], med[j] / solo_ms[j]);
        nb_bench_csv_stamp(tab, &s->stamp);
        fputc('\n', tab);
    } else {
        fprintf(tab,
                "%s{\"task\": \"%s\", \"norm\": \"%s\", \"batch\": %d, \"ms_per_step\": "
                "%.4f, \"ms_mean\": %.4f, \"ms_std\": %.4f, \"vs_layer\": ",
                first ? "" : ", ", task->name, name, batches[bi], med[j], ms[j], sd[j]);
        nb_json_num(tab, vs);
        fprintf(tab, ", \"vs_layer_lo\": ");
        nb_json_num(tab, lo[j]);
        fprintf(tab, ", \"vs_layer_hi\": ");
        nb_json_num(tab, hi[j]);
        fprintf(tab, ", \"norm_share\": ");
        nb_json_num(tab, share);
        fprintf(tab, ", \"gflop_per_s\": ");
        nb_json_num(tab, task->bench_flops && gflop ? gflop[bi] / (med[j] * 1e-3) : NAN);
        if (b->dp) {
            fprintf(tab, ", \"allreduce_share\": ");
            nb_json_num(tab, ar_share[j]);
            fprintf(tab, ", \"allreduce_ms\": ");
            nb_json_num(tab, ar_ms[j]);
            fprintf(tab, ", \"allreduce_bytes\": %.0f", ar_bytes[j]);
        }
        if (b->vs_threads) {
            fprintf(tab, ", \"one_process_ms\": ");
            nb_json_num(tab, solo_ms[j]);
            fprintf(tab, ", \"vs_one_process\": ");
            nb_json_num(tab, med[j] / solo_ms[j]);
        }
        fputc('}', tab);
        first = 0;
    }
    *first_p = first;
}

/* The GEMM floor (table format, one process): the step's GEMMs alone. */
static void step_floor(step_run *s) {
    FILE *tab = s->b->io.out;
    nb_bench *b = s->b;
    const int *norms = s->norms;
    const int nnorms = s->nnorms, fmt = s->fmt;
    double *med = s->med;
    if (fmt == FMT_TABLE && s->ngemm > 0 && b->dp)
        fprintf(tab,
                "\n# the GEMM floor is not timed under mpirun (the ranks share the machine): time "
                "it without mpirun\n");
    if (fmt == FMT_TABLE && s->ngemm > 0 && !b->dp) {
        /* The same GEMMs alone, multi-threaded OpenBLAS, in this run. */
        double floor_ms = 0, fl = 0;
        fprintf(tab,
                "\n# OpenBLAS sgemm alone on the step's GEMM shapes (batch %d), median of 5:\n",
                s->gemm_batch);
        fprintf(tab, "%-22s %6s %8s %6s %10s %9s\n", "gemm", "M", "N", "K", "ms", "GFLOP/s");
        for (int g = 0; g < s->ngemm; g++) {
            const nb_gemm_shape *gs = &s->gemms[g];
            double t = nb_bench_time_sgemm(gs->M, gs->N, gs->K, 5) * gs->count;
            double f = 2.0 * gs->M * (double)gs->N * gs->K * gs->count;
            floor_ms += t;
            fl += f;
            fprintf(tab, "%-22s %6d %8d %6d %10.3f %9.1f\n", gs->what, gs->M, gs->N, gs->K, t,
                    f / (t * 1e-3) * 1e-9);
        }
        fprintf(tab, "# GEMM floor: %.1f ms per step (%.1f GFLOP at %.1f GFLOP/s)\n", floor_ms,
                fl * 1e-9, fl / (floor_ms * 1e-3) * 1e-9);
        for (int i = 0; i < b->ngiven; i++)
            if (strcmp(b->given[i].name, "conv") == 0 && b->given[i].value &&
                strcmp(b->given[i].value, "im2col") != 0)
                fprintf(tab,
                        "# --conv %s: these are im2col's GEMMs; the 3x3 layers it moves to "
                        "Winograd multiply less, so the step may take less than this floor\n",
                        b->given[i].value);
        for (int i = 0; i < nnorms; i++)
            if (!isnan(med[i]))
                fprintf(tab, "# %-*s step / floor = %.2fx; outside the floor: %.0f%% of the step\n",
                        s->nw, nb_bench_row_name(b, norms[i]), med[i] / floor_ms,
                        100.0 * (1 - floor_ms / med[i]));
    }
}

int nb_bench_step(nb_bench *b, const nb_task *task, const int *norms, int nnorms,
                  const int *batches, int nbatches, int iters, int fmt) {
    FILE *tab = b->io.out;
    step_run *s = calloc(1, sizeof *s);
    if (!s) return nb_bench_fail(&b->io, "out of memory");
    *s = (step_run){.b = b,
                    .task = task,
                    .norms = norms,
                    .batches = batches,
                    .nnorms = nnorms,
                    .nbatches = nbatches,
                    .iters = iters,
                    .fmt = fmt};
    nb_bench_settings_line(s->settings, sizeof s->settings);
    nb_bench_stamp(&s->stamp);
    if (b->dp) {
        size_t l = strlen(s->settings);
        snprintf(s->settings + l, sizeof s->settings - l, " ranks=%d bn_statistics=%s",
                 b->dist.size, b->bn_sync ? "global" : "per-rank");
    }
    if (step_alloc(s) != 0) {
        step_free(s);
        free(s);
        return nb_bench_fail(&b->io, "out of memory");
    }
    for (int bi = 0; bi < nbatches; bi++) {
        nb_err err;
        nb_err_clear(&err);
        int failed = step_open(s, bi, &err);
        if (!failed) step_rounds(s, bi);
        step_stats(s, bi, failed);
        if (failed) {
            step_free(s);
            free(s);
            return nb_bench_report(&b->io, &err);
        }
    }
    step_header(s);
    int first = 1;
    for (int bi = 0; bi < nbatches; bi++) {
        double layer = NAN, none = NAN;
        for (int i = 0; i < nnorms; i++) {
            if (norms[i] == (int)nb_norm_default()) layer = s->med[bi * nnorms + i];
            if (norms[i] == (int)nb_norm_none_kind()) none = s->med[bi * nnorms + i];
        }
        for (int i = 0; i < nnorms; i++)
            step_row(s, bi, i, layer, none, &first);
    }
    if (fmt == FMT_JSON) fprintf(tab, "]}\n");
    step_floor(s);
    step_free(s);
    free(s);
    return NB_EXIT_OK;
}
#undef FREE_DP
