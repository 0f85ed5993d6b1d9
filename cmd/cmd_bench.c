/* cmd/cmd_bench.c — `normbench bench kernels|step TASK`: timings as ratios against a baseline
 * measured in the same run, with the thread and BLAS settings printed beside them. */
#include "cmd/cmd.h"
#include "run/mpi.h"

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
#include "tasks/task.h"
#include "util/json.h"

static const char bench_usage[] =
    "usage: normbench bench kernels [--norms LIST] [--format table|csv|json] [--threads N]\n"
    "       normbench bench step TASK [--norms LIST] [--batch LIST] [--steps N]\n"
    "                               [--format table|csv|json] [--threads N] [--against pytorch]\n"
    "  mpirun -np N normbench bench step TASK [--bn-sync] [--against threads] [same options]\n\n"
    "kernels: times each norm's forward and forward+backward on the MLP's shape (128x1000) and\n"
    "  a memory-bound one (65536x1024), in GB/s (bytes read and written once) and as a ratio\n"
    "  to a parallel copy: each repetition of a kernel is paired with one of the copy, and\n"
    "  vs_copy is the median over pairs (copy GB/s is the median copy beside that kernel).\n"
    "  'all' includes dyt here (DyT, y = g*tanh(alpha*x) + b, alpha 0.5), timed last; not\n"
    "  with --device cuda, which has no DyT kernels yet.\n"
    "step TASK: milliseconds per training step (forward, backward, Adam) per norm on generated\n"
    "  data; mnist at batch 128 and 4 by default, cifar at 100, order at 128 (13-word\n"
    "  captions), mt at 80 sentences of 30 tokens each side (the task's options choose the\n"
    "  model: 'bench step mt --model transformer --batch 133' for ~4,000 tokens). vs_layer is\n"
    "  layer's time / this norm's time, with its 95% interval (a bootstrap over the timed\n"
    "  steps: whether the run can tell the norm from layer at all); norm_share is (this - none)\n"
    "  / this: the share of the step the norm costs beyond the step without one (when none is\n"
    "  timed too). Tasks that describe their GEMMs (cifar, mt) also get GFLOP/s per norm and,\n"
    "  after the table, OpenBLAS sgemm alone timed on the same shapes in the same run: their\n"
    "  sum is the step's GEMM floor, and 1 - floor/step the share of everything else.\n"
    "  reader also takes the name batch-everywhere in --norms (not in 'all'): 'run reader --norm\n"
    "  batch --bn-everywhere', BN on the attention and output layers too.\n"
    "step TASK --against pytorch: the same training step in PyTorch (compare/pytorch/TASK.py,\n"
    "  run by Debian's python3-torch or $NORMBENCH_PYTHON) in a child process, its steps and\n"
    "  normbench's interleaved in rounds; per norm both medians, PyTorch's / normbench's with\n"
    "  its 95% interval, and both sides' settings (threads, BLAS, oneDNN). Where PyTorch has a\n"
    "  fused form (nn.GRU, nn.LSTM) it gets its own row beside the task's norm. The task's\n"
    "  own options (mt's --model, --dim) go to both sides.\n"
    "step TASK under mpirun -np N (N > 1; every task): the data-parallel step of 'run' over\n"
    "  the ranks: each rank steps on its rows of the batch, the gradients are summed in one\n"
    "  MPI_Allreduce, every rank updates. Rank 0 prints (the others print nothing) the step time\n"
    "  on its clock, allreduce_share (time in the sums over the ranks / step time, median over\n"
    "  steps: communication plus waiting for the slowest rank), allreduce_ms and the bytes summed\n"
    "  per step (4 per parameter), with ranks, threads per rank and BLAS in the settings.\n"
    "  BatchNorm keeps per-rank statistics unless --bn-sync. --threads applies to every rank.\n"
    "  --against threads: after each round over the ranks, rank 0 alone (the others asleep)\n"
    "  runs the same steps at the whole batch with ranks x threads threads: one_proc_ms and\n"
    "  vs_one_proc = ms_per_step / one_proc_ms, interleaved so that a busy machine hits both.\n"
    "Timings are medians over repetitions; they move run to run, so compare within one run.\n";

static const char *const format_choices[] = {"table", "csv", "json", NULL};
/* `bench step` interleaves its instances in rounds of ROUND steps or ROUND_MS milliseconds,
 * whichever ends first (at least one step) */
enum { ROUND = 5, ROUND_MS = 250 };
static const char *const device_choices[] = {"cpu", "cuda", NULL};
static int g_device; /* --device: 0 cpu, 1 cuda */
enum { MAXGIVEN = 64 };
static nb_given g_given[MAXGIVEN + 1]; /* the task's own options for `bench step` (mt --model) */
static int g_ngiven;
/* `bench step` under mpirun with more than one rank: the data-parallel step over the ranks */
static int g_dp, g_bn_sync;
static nb_dist g_dist;
/* --against threads under mpirun: rank 0 alone times the same step at the whole batch with
 * g_solo_threads threads (ranks x threads per rank) between the rounds over the ranks */
static int g_vs_threads, g_rank_threads, g_solo_threads;

static void set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}
enum { FMT_TABLE, FMT_CSV, FMT_JSON };

/* The settings every timing depends on, in one line. */
static void settings_line(char *buf, size_t n) {
    const char *wait = getenv("OMP_WAIT_POLICY");
    const char *par[] = {"sequential", "pthreads", "openmp"};
    int p = openblas_get_parallel();
    snprintf(buf, n, "threads=%d OMP_WAIT_POLICY=%s blas=\"%s\" core=%s blas_parallel=%s",
             omp_get_max_threads(), wait && *wait ? wait : "(unset)", openblas_get_config(),
             openblas_get_corename(), p >= 0 && p <= 2 ? par[p] : "?");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void mean_std(const double *v, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* The 95% interval of median(a)/median(b) by the percentile bootstrap: 2000 resamplings of each
 * sample set with replacement (a fixed seed, so a run's output is reproducible from its
 * timings). scratch holds na + nb values. */
static void ratio_interval(const double *a, int na, const double *b, int nb, double *scratch,
                           double *lo, double *hi) {
    enum { NBOOT = 2000 };
    double *r = malloc(sizeof(double) * NBOOT);
    if (!r || na < 2 || nb < 2) {
        free(r);
        *lo = *hi = NAN;
        return;
    }
    nb_rng rng;
    nb_rng_seed(&rng, 20191, 0);
    for (int k = 0; k < NBOOT; k++) {
        for (int i = 0; i < na; i++)
            scratch[i] = a[nb_rng_below(&rng, (uint64_t)na)];
        for (int i = 0; i < nb; i++)
            scratch[na + i] = b[nb_rng_below(&rng, (uint64_t)nb)];
        r[k] = median(scratch, na) / median(scratch + na, nb);
    }
    qsort(r, NBOOT, sizeof *r, cmp_double);
    *lo = r[(int)(0.025 * NBOOT)];
    *hi = r[(int)(0.975 * NBOOT) - 1];
    free(r);
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* The baseline: a parallel copy, each thread memcpy-ing its contiguous share (glibc's memcpy
 * streams large arrays past the cache, the fastest copy this machine has). */
static void copy_kernel(float *restrict dst, const float *restrict src, size_t n) {
#pragma omp parallel
    {
        size_t nth = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t per = (n + nth - 1) / nth, lo = t * per, hi = lo + per < n ? lo + per : n;
        if (lo < hi) memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
    }
}

typedef struct kbuf {
    int B, C;
    float *x, *y, *dy, *dx, *g, *b, *dg, *db, *mean, *rstd, *rm, *rv;
    float dalpha;
} kbuf;

/* DyT's alpha in the kernel rows: the paper's default initial value */
#define KDYT_ALPHA 0.5f

static void run_kernel(int norm, int backward, kbuf *k, const nb_norm_cfg *cfg, int kk) {
    int B = k->B, C = k->C;
    switch (norm) {
    case NB_NORM_DYT:
        nb_dyt_forward(k->y, k->x, k->g, k->b, KDYT_ALPHA, B, C);
        if (backward)
            nb_dyt_backward_set(k->dx, k->dg, k->db, &k->dalpha, k->dy, k->x, k->g, KDYT_ALPHA, B,
                                C);
        break;
    case NB_NORM_LAYER:
        nb_layernorm_forward(k->y, k->mean, k->rstd, k->x, k->g, k->b, B, C, cfg);
        if (backward)
            nb_layernorm_backward_set(k->dx, k->dg, k->db, k->dy, k->x, k->g, k->mean, k->rstd, B,
                                      C, cfg);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        nb_rmsnorm_forward(k->y, k->rstd, k->x, k->g, k->b, B, C, kk, cfg);
        if (backward)
            nb_rmsnorm_backward_set(k->dx, k->dg, k->db, k->dy, k->x, k->g, k->rstd, B, C, kk, cfg);
        break;
    case NB_NORM_BATCH:
        nb_batchnorm_forward(k->y, k->mean, k->rstd, k->rm, k->rv, k->x, k->g, k->b, B, C, 1, cfg);
        if (backward)
            nb_batchnorm_backward_set(k->dx, k->dg, k->db, k->dy, k->x, k->g, k->mean, k->rstd, B,
                                      C, 1, cfg);
        break;
    case NB_NORM_WEIGHT: /* the (B, C) array as a weight of B units with C inputs each */
        nb_weightnorm_forward(k->y, k->rstd, k->x, k->g, B, C);
        if (backward) nb_weightnorm_backward(k->dx, k->dg, k->dy, k->x, k->g, k->rstd, B, C);
        break;
    }
}

/* Times fn beside the copy baseline over the same bytes, alternating one repetition of each
 * (at least 5 pairs and ~0.25 s in all, after one warm-up of each), so that a slow spell of the
 * machine lands on both sides of the ratio. *t and *copy_t: median seconds of each; *ratio: the
 * median over pairs of copy seconds / fn seconds scaled by bytes / copy_bytes, i.e. fn's GB/s
 * as a fraction of the copy's GB/s measured next to it. */
static void time_paired(void (*fn)(void *), void *arg, void (*copy)(void *), void *carg,
                        double bytes, double copy_bytes, double *t, double *copy_t, double *ratio) {
    enum { MAXREP = 64 };
    double a[MAXREP], c[MAXREP], r[MAXREP];
    int n = 0;
    double start = nb_now();
    fn(arg); /* warm-up: page faults, caches */
    copy(carg);
    while (n < MAXREP && (n < 5 || nb_now() - start < 0.25)) {
        double s0 = nb_now();
        copy(carg);
        double s1 = nb_now();
        fn(arg);
        double s2 = nb_now();
        c[n] = s1 - s0;
        a[n] = s2 - s1;
        r[n] = (bytes / a[n]) / (copy_bytes / c[n]);
        n++;
    }
    *ratio = median(r, n);
    *t = median(a, n);
    *copy_t = median(c, n);
}

typedef struct kcall {
    kbuf *k;
    int norm, backward, kk;
    const nb_norm_cfg *cfg;
} kcall;

static void call_kernel(void *a) {
    kcall *c = a;
    run_kernel(c->norm, c->backward, c->k, c->cfg, c->kk);
}

static void call_copy(void *a) {
    kbuf *k = a;
    copy_kernel(k->y, k->x, (size_t)k->B * k->C);
}

static float *falloc(size_t n, nb_rng *rng, double scale, double offset) {
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++)
        p[i] = rng ? (float)(offset + scale * nb_rng_normal(rng)) : 0;
    return p;
}

static int bench_kernels(const int *norms, int nnorms, int fmt) {
    static const int shapes[][2] = {{128, 1000}, {65536, 1024}};
    char settings[1024];
    settings_line(settings, sizeof settings);
    nb_rng rng;
    nb_rng_seed(&rng, 1, NB_STREAM_SYNTH);
    int first = 1;
    if (fmt == FMT_TABLE) {
        printf("# %s\n", settings);
        printf("%-12s %-7s %-8s %10s %9s %9s %9s\n", "shape", "norm", "pass", "ms", "GB/s",
               "copy GB/s", "vs copy");
    } else if (fmt == FMT_CSV) {
        printf("shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,threads,settings\n");
    } else {
        printf("{\"settings\": ");
        nb_json_str(stdout, settings);
        printf(", \"threads\": %d, \"results\": [", omp_get_max_threads());
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        kbuf k;
        memset(&k, 0, sizeof k);
        k.B = shapes[s][0];
        k.C = shapes[s][1];
        size_t N = (size_t)k.B * k.C, W = (size_t)(k.B > k.C ? k.B : k.C);
        k.x = falloc(N, &rng, 1.0, 0.5);
        k.dy = falloc(N, &rng, 1.0, 0);
        k.y = falloc(N, NULL, 0, 0);
        k.dx = falloc(N, NULL, 0, 0);
        k.g = falloc(W, &rng, 0.1, 1);
        k.b = falloc(W, &rng, 0.1, 0);
        k.dg = falloc(W, NULL, 0, 0);
        k.db = falloc(W, NULL, 0, 0);
        k.mean = falloc(W, NULL, 0, 0);
        k.rstd = falloc(W, NULL, 0, 0);
        k.rm = falloc(W, NULL, 0, 0);
        k.rv = falloc(W, NULL, 0, 1);
        if (!k.x || !k.dy || !k.y || !k.dx || !k.g || !k.b || !k.dg || !k.db || !k.mean ||
            !k.rstd || !k.rm || !k.rv)
            return nb_die("out of memory for a %dx%d benchmark", k.B, k.C);
        for (size_t i = 0; i < W; i++)
            k.rv[i] = 1;
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", k.B, k.C);
        double copy_bytes = 2.0 * N * sizeof(float);
        for (int i = 0; i < nnorms; i++) {
            if (norms[i] == NB_NORM_NONE) continue; /* identity: nothing to time */
            nb_norm_cfg cfg;
            nb_norm_cfg_default(&cfg, (nb_norm_kind)norms[i]);
            int kk = norms[i] == NB_NORM_PRMS ? nb_prms_k(k.C, cfg.p, cfg.p_floor) : k.C;
            for (int bw = 0; bw <= 1; bw++) {
                kcall c = {&k, norms[i], bw, kk, &cfg};
                /* Bytes that must move: forward reads x and writes y; backward reads x and dy
                 * and writes dx (the _set backward, which does not read dx: what training calls
                 * where the input gradient starts at zero). Per-row statistics and gains are
                 * negligible. */
                double bytes = (bw ? 5.0 : 2.0) * N * sizeof(float);
                double t, copy_t, ratio;
                time_paired(call_kernel, &c, call_copy, &k, bytes, copy_bytes, &t, &copy_t, &ratio);
                double gbs = bytes / t / 1e9, copy_gbs = copy_bytes / copy_t / 1e9;
                const char *pass = bw ? "fwd+bwd" : "fwd";
                const char *name = nb_norm_name((nb_norm_kind)norms[i]);
                if (fmt == FMT_TABLE)
                    printf("%-12s %-7s %-8s %10.3f %9.2f %9.2f %9.2f\n", shape, name, pass, t * 1e3,
                           gbs, copy_gbs, ratio);
                else if (fmt == FMT_CSV) {
                    printf("%s,%s,%s,%.4f,%.3f,%.3f,%.4f,%d,", shape, name, pass, t * 1e3, gbs,
                           copy_gbs, ratio, omp_get_max_threads());
                    nb_csv_field(stdout, settings);
                    putchar('\n');
                } else {
                    printf(
                        "%s{\"shape\": \"%s\", \"norm\": \"%s\", \"pass\": \"%s\", \"ms\": %.4f, "
                        "\"gb_per_s\": %.3f, \"copy_gb_per_s\": %.3f, \"ratio_to_copy\": %.4f}",
                        first ? "" : ", ", shape, name, pass, t * 1e3, gbs, copy_gbs, ratio);
                    first = 0;
                }
            }
        }
        free(k.x), free(k.dy), free(k.y), free(k.dx), free(k.g), free(k.b), free(k.dg);
        free(k.db), free(k.mean), free(k.rstd), free(k.rm), free(k.rv);
    }
    if (fmt == FMT_JSON) printf("]}\n");
    return NB_EXIT_OK;
}

/* ---- training steps ------------------------------------------------------------------------ */

/* A row of `bench step` is one of the six norms, or a norm label that a task's flag records a
 * run under (tasks/taskopt.h: norm_as; reader's --bn-everywhere is 'batch-everywhere'): row
 * NB_NORM_COUNT + i is labels[i], timed with that flag on over its base norm (the first norm
 * the task accepts the flag with). */
enum { MAXLABELS = 8 };
static struct {
    const char *name, *flag;
    const nb_task *task;
    int base;
} labels[MAXLABELS];
static int nlabels;

static void find_labels(void) {
    nlabels = 0;
    for (int i = 0; nb_task_at(i); i++) {
        const nb_task *t = nb_task_at(i);
        for (const nb_task_opt *o = t->opts; o && o->name; o++) {
            if (o->kind != NB_TOPT_FLAG || !o->norm_as || nlabels >= MAXLABELS) continue;
            int base = -1;
            for (int k = 0; k < NB_NORM_COUNT && base < 0; k++) {
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
            labels[nlabels].name = o->norm_as;
            labels[nlabels].flag = o->name;
            labels[nlabels].task = t;
            labels[nlabels].base = base;
            nlabels++;
        }
    }
}

static nb_norm_kind row_kind(int row) {
    return row >= NB_NORM_COUNT ? (nb_norm_kind)labels[row - NB_NORM_COUNT].base
                                : (nb_norm_kind)row;
}

static const char *row_name(int row) {
    return row >= NB_NORM_COUNT ? labels[row - NB_NORM_COUNT].name
                                : nb_norm_name((nb_norm_kind)row);
}

/* Copies the comma-separated list to rest without its label items, whose rows go to rows[]
 * (*nrows). Returns 0, or -1 when an item is empty or the list does not fit; 1 when a label is
 * listed twice. */
static int split_labels(const char *list, char *rest, size_t size, int *rows, int *nrows) {
    size_t n = 0;
    *nrows = 0;
    rest[0] = '\0';
    for (const char *p = list;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 0) return -1;
        int label = -1;
        for (int i = 0; i < nlabels; i++)
            if (strlen(labels[i].name) == len && strncmp(p, labels[i].name, len) == 0) label = i;
        if (label >= 0) {
            for (int i = 0; i < *nrows; i++)
                if (rows[i] == NB_NORM_COUNT + label) return 1;
            rows[(*nrows)++] = NB_NORM_COUNT + label;
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

static int parse_int_list(const char *list, int *out, int max) {
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
static double time_sgemm(int M, int N, int K, int reps) {
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
        med = median(t, reps);
    }
    free(a), free(b), free(c);
    return med;
}

/* ---- kernels on the GPU (--device cuda) ------------------------------------------------------ */

typedef struct gbuf {
    int B, C, k, norm, backward;
    nb_cuda_dtype dt;
    nb_norm_cfg cfg;
    void *x, *y, *dy, *dx;
    float *g, *b, *dg, *db, *mean, *rstd, *rm, *rv;
    size_t bytes; /* of one (B, C) array */
    int failed;
    nb_err err;
} gbuf;

static void g_kernel(void *a) {
    gbuf *k = a;
    int B = k->B, C = k->C, rc = 0;
    nb_err *e = &k->err;
    switch (k->norm) {
    case NB_NORM_LAYER:
        rc = nb_cuda_layernorm_forward(k->y, k->mean, k->rstd, k->x, k->g, k->b, B, C, &k->cfg,
                                       k->dt, e);
        if (!rc && k->backward)
            rc = nb_cuda_layernorm_backward(k->dx, k->dg, k->db, k->dy, k->x, k->g, k->mean,
                                            k->rstd, B, C, &k->cfg, k->dt, e);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        rc =
            nb_cuda_rmsnorm_forward(k->y, k->rstd, k->x, k->g, k->b, B, C, k->k, &k->cfg, k->dt, e);
        if (!rc && k->backward)
            rc = nb_cuda_rmsnorm_backward(k->dx, k->dg, k->db, k->dy, k->x, k->g, k->rstd, B, C,
                                          k->k, &k->cfg, k->dt, e);
        break;
    case NB_NORM_BATCH:
        rc = nb_cuda_batchnorm_forward(k->y, k->mean, k->rstd, k->rm, k->rv, k->x, k->g, k->b, B, C,
                                       1, &k->cfg, k->dt, e);
        if (!rc && k->backward)
            rc = nb_cuda_batchnorm_backward(k->dx, k->dg, k->db, k->dy, k->x, k->g, k->mean,
                                            k->rstd, B, C, 1, &k->cfg, k->dt, e);
        break;
    case NB_NORM_WEIGHT:
        rc = nb_cuda_weightnorm_forward(k->y, k->rstd, k->x, k->g, B, C, k->dt, e);
        if (!rc && k->backward)
            rc = nb_cuda_weightnorm_backward(k->dx, k->dg, k->dy, k->x, k->g, k->rstd, B, C, k->dt,
                                             e);
        break;
    }
    if (rc) k->failed = 1;
}

static void g_copy(void *a) {
    gbuf *k = a;
    if (nb_cuda_copy(k->y, k->x, k->bytes, &k->err)) k->failed = 1;
}

/* The CPU table's shapes plus two LLM-sized ones, fp32 and (--dtype) bf16; each kernel's
 * repetitions paired with a device-to-device copy of the same (B, C) array, timed with events. */
static int bench_kernels_cuda(const int *norms, int nnorms, int fmt, nb_cuda_dtype dt) {
    static const int shapes[][2] = {{128, 1000}, {65536, 1024}, {16384, 4096}, {4096, 8192}};
    nb_err err;
    nb_err_clear(&err);
    if (nb_cuda_init(&err)) return nb_report_err(&err);
    char desc[512];
    nb_cuda_describe(desc, sizeof desc);
    const char *tn = dt == NB_CUDA_F32 ? "fp32" : "bf16";
    if (fmt == FMT_TABLE) {
        printf("# %s; %s input/output, fp32 statistics; CUDA-event medians\n", desc, tn);
        printf("%-12s %-7s %-8s %10s %9s %9s %9s\n", "shape", "norm", "pass", "ms", "GB/s",
               "copy GB/s", "vs copy");
    } else if (fmt == FMT_CSV) {
        printf("shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,dtype,device\n");
    } else {
        printf("{\"device\": ");
        nb_json_str(stdout, desc);
        printf(", \"dtype\": \"%s\", \"results\": [", tn);
    }
    nb_rng rng;
    nb_rng_seed(&rng, 1, NB_STREAM_SYNTH);
    int first = 1;
    size_t esz = dt == NB_CUDA_F32 ? 4 : 2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        gbuf k;
        memset(&k, 0, sizeof k);
        k.B = shapes[s][0];
        k.C = shapes[s][1];
        k.dt = dt;
        size_t N = (size_t)k.B * k.C, W = (size_t)(k.B > k.C ? k.B : k.C);
        k.bytes = N * esz;
        float *hx = falloc(N, &rng, 1.0, 0.5), *hdy = falloc(N, &rng, 1.0, 0);
        float *hg = falloc(W, &rng, 0.1, 1), *hb = falloc(W, &rng, 0.1, 0),
              *hrv = falloc(W, NULL, 0, 0);
        if (!hx || !hdy || !hg || !hb || !hrv) return nb_die("out of memory");
        for (size_t i = 0; i < W; i++)
            hrv[i] = 1;
        int ok = (k.x = nb_cuda_alloc(k.bytes, &err)) && (k.y = nb_cuda_alloc(k.bytes, &err)) &&
                 (k.dy = nb_cuda_alloc(k.bytes, &err)) && (k.dx = nb_cuda_alloc(k.bytes, &err));
        float **fs[] = {&k.g, &k.b, &k.dg, &k.db, &k.mean, &k.rstd, &k.rm, &k.rv};
        for (size_t i = 0; ok && i < sizeof fs / sizeof fs[0]; i++)
            ok = (*fs[i] = nb_cuda_alloc(W * sizeof(float), &err)) != NULL;
        ok = ok && !nb_cuda_upload_as(k.x, hx, N, dt, &err) &&
             !nb_cuda_upload_as(k.dy, hdy, N, dt, &err) && !nb_cuda_upload(k.g, hg, W * 4, &err) &&
             !nb_cuda_upload(k.b, hb, W * 4, &err) && !nb_cuda_upload(k.rv, hrv, W * 4, &err);
        free(hx), free(hdy), free(hg), free(hb), free(hrv);
        if (!ok) return nb_report_err(&err);
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", k.B, k.C);
        for (int i = 0; i < nnorms; i++) {
            if (norms[i] == NB_NORM_NONE) continue;
            nb_norm_cfg_default(&k.cfg, (nb_norm_kind)norms[i]);
            k.norm = norms[i];
            k.k = norms[i] == NB_NORM_PRMS ? nb_prms_k(k.C, k.cfg.p, k.cfg.p_floor) : k.C;
            for (int bw = 0; bw <= 1; bw++) {
                k.backward = bw;
                enum { REP = 40 };
                double a[REP], c[REP], r[REP], t0, t1;
                double bytes = (bw ? 5.0 : 2.0) * (double)k.bytes, cbytes = 2.0 * (double)k.bytes;
                /* warm-up: module load, workspace allocation, clocks */
                for (int w = 0; w < 3; w++)
                    if (nb_cuda_time_ms(g_kernel, &k, &t0, &err) ||
                        nb_cuda_time_ms(g_copy, &k, &t1, &err))
                        return nb_report_err(&err);
                for (int rep = 0; rep < REP; rep++) {
                    if (nb_cuda_time_ms(g_copy, &k, &c[rep], &err) ||
                        nb_cuda_time_ms(g_kernel, &k, &a[rep], &err))
                        return nb_report_err(&err);
                    r[rep] = (bytes / a[rep]) / (cbytes / c[rep]);
                }
                if (k.failed) return nb_report_err(&k.err);
                double ratio = median(r, REP), t = median(a, REP), ct = median(c, REP);
                double gbs = bytes / (t * 1e-3) / 1e9, cgbs = cbytes / (ct * 1e-3) / 1e9;
                const char *pass = bw ? "fwd+bwd" : "fwd";
                const char *name = nb_norm_name((nb_norm_kind)norms[i]);
                if (fmt == FMT_TABLE)
                    printf("%-12s %-7s %-8s %10.4f %9.1f %9.1f %9.2f\n", shape, name, pass, t, gbs,
                           cgbs, ratio);
                else if (fmt == FMT_CSV) {
                    printf("%s,%s,%s,%.5f,%.2f,%.2f,%.4f,%s,", shape, name, pass, t, gbs, cgbs,
                           ratio, tn);
                    nb_csv_field(stdout, desc);
                    putchar('\n');
                } else {
                    printf("%s{\"shape\": \"%s\", \"norm\": \"%s\", \"pass\": \"%s\", "
                           "\"ms\": %.5f, \"gb_per_s\": %.2f, \"copy_gb_per_s\": %.2f, "
                           "\"ratio_to_copy\": %.4f}",
                           first ? "" : ", ", shape, name, pass, t, gbs, cgbs, ratio);
                    first = 0;
                }
            }
        }
        void *d[] = {k.x, k.y, k.dy, k.dx, k.g, k.b, k.dg, k.db, k.mean, k.rstd, k.rm, k.rv};
        for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
            nb_cuda_free(d[i]);
    }
    if (fmt == FMT_JSON) printf("]}\n");
    if (fmt == FMT_TABLE)
        printf("# PyTorch's norms on the same device: python3 tools/torch_norms.py (not run by "
               "normbench)\n");
    return NB_EXIT_OK;
}

/* Opens the task's step benchmark for row `row` (a norm or a label) at batch B and warms it up:
 * at least 5 steps and 0.3 s (page faults, thread start-up, clocks). NULL with err set. */
static void *open_native(const nb_task *task, int row, int B, int solo, nb_err *err) {
    int dp = g_dp && !solo; /* solo: one process at the whole batch, whatever the ranks */
    nb_train_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.norm.kind = row_kind(row);
    nb_given given[MAXGIVEN + 1];
    int ng = 0;
    for (int k = 0; k < g_ngiven; k++)
        given[ng++] = g_given[k];
    if (row >= NB_NORM_COUNT) given[ng++] = (nb_given){labels[row - NB_NORM_COUNT].flag, NULL};
    cfg.task = task->name;
    cfg.dataset = task->default_dataset;
    if (nb_task_configure(task, &cfg, cfg.norm.kind, given, ng, err) != 0) {
        nb_task_opts_free(&cfg);
        return NULL;
    }
    cfg.task = task->name;
    cfg.seed = 1;
    cfg.batch = B;
    cfg.device = g_device;
    if (dp) {
        cfg.dist = &g_dist;
        if (g_bn_sync) cfg.norm.bn_sum = nb_mpi_bn_sum;
    }
    void *inst = task->bench_open(&cfg, err);
    nb_task_opts_free(&cfg);
    if (dp) { /* every rank opened it, or none goes on (the steps are collective) */
        double failed = inst ? 0 : 1;
        g_dist.sum_d(g_dist.ctx, &failed, 1);
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
            if (g_dist.rank != 0) go = 0;
            g_dist.sum_d(g_dist.ctx, &go, 1);
        }
        if (!(go > 0)) break;
        task->bench_step(inst);
    }
    return inst;
}

/* The rows BatchNorm normalizes over: the batch, or under per-rank statistics the smallest
 * rank's share of it. */
static int bn_rows(int B) {
    return g_dp && !g_bn_sync ? B / g_dist.size : B;
}

static int bench_step(const nb_task *task, const int *norms, int nnorms, const int *batches,
                      int nbatches, int iters, int fmt) {
    char settings[1024];
    settings_line(settings, sizeof settings);
    if (g_dp) {
        size_t l = strlen(settings);
        snprintf(settings + l, sizeof settings - l, " ranks=%d bn_statistics=%s", g_dist.size,
                 g_bn_sync ? "global" : "per-rank");
    }
    /* data-parallel: per row, the median over steps of (time in the sums over the ranks) / (step
     * time), the median of that time, and the bytes summed per step */
    size_t nrows = (size_t)nnorms * nbatches;
    double *ar_share = malloc(sizeof(double) * nrows), *ar_ms = malloc(sizeof(double) * nrows);
    double *ar_bytes = malloc(sizeof(double) * nrows);
    double *comm = malloc(sizeof(double) * (size_t)nnorms * iters);
    double *scratch = malloc(sizeof(double) * (size_t)iters);
    double *solo_ms = malloc(sizeof(double) * nrows);
    double *ssamples = malloc(sizeof(double) * (size_t)nnorms * iters);
    int *sfilled = calloc((size_t)nnorms, sizeof(int));
    void *solo[NB_NORM_COUNT + MAXLABELS] = {NULL};
#define FREE_DP()                                                                                  \
    free(ar_share), free(ar_ms), free(ar_bytes), free(comm), free(scratch), free(solo_ms),         \
        free(ssamples), free(sfilled)
    if (!ar_share || !ar_ms || !ar_bytes || !comm || !scratch || !solo_ms || !ssamples ||
        !sfilled) {
        FREE_DP();
        return nb_die("out of memory");
    }
    double *ms = malloc(sizeof(double) * (size_t)nnorms * nbatches);
    double *sd = malloc(sizeof(double) * (size_t)nnorms * nbatches);
    double *med = malloc(sizeof(double) * (size_t)nnorms * nbatches);
    double *lo = malloc(sizeof(double) * (size_t)nnorms * nbatches);
    double *hi = malloc(sizeof(double) * (size_t)nnorms * nbatches);
    double *boot = malloc(sizeof(double) * 2 * (size_t)iters);
    if (!ms || !sd || !med || !lo || !hi || !boot) {
        free(ms), free(sd), free(med), free(lo), free(hi), free(boot);
        FREE_DP();
        return nb_die("out of memory");
    }
    /* Per batch size: one model per norm, all open at once, timed in interleaved rounds of
     * ROUND steps or ROUND_MS, whichever ends first (each round starting at the next norm), so
     * that a slow spell of the machine is shared by all norms instead of landing on one; steps
     * of seconds (mt) go one at a time. */
    void *inst[NB_NORM_COUNT + MAXLABELS];
    int *filled = calloc((size_t)nnorms, sizeof(int));
    double *samples = malloc(sizeof(double) * (size_t)nnorms * iters);
    if (!filled || !samples) {
        free(filled), free(samples), free(ms), free(sd), free(med), free(lo), free(hi), free(boot);
        FREE_DP();
        return nb_die("out of memory");
    }
    enum { MAXG = 64 };
    nb_gemm_shape gemms[MAXG];
    int ngemm = 0, gemm_batch = 0;
    double *gflop = calloc((size_t)nbatches, sizeof(double));
    for (int bi = 0; bi < nbatches; bi++) {
        nb_err err;
        nb_err_clear(&err);
        int failed = 0;
        for (int i = 0; i < nnorms; i++) {
            inst[i] = NULL;
            filled[i] = 0;
            ar_bytes[bi * nnorms + i] = NAN;
            if (row_kind(norms[i]) == NB_NORM_BATCH && bn_rows(batches[bi]) < 2) continue;
            if (!(inst[i] = open_native(task, norms[i], batches[bi], 0, &err))) {
                failed = 1;
                break;
            }
        }
        if (g_vs_threads && !failed) { /* rank 0's one-process instances; the others sleep */
            double bad = 0;
            for (int i = 0; i < nnorms && g_dist.rank == 0; i++) {
                solo[i] = NULL;
                sfilled[i] = 0;
                if (!inst[i]) continue;
                set_threads(g_solo_threads);
                solo[i] = open_native(task, norms[i], batches[bi], 1, &err);
                set_threads(g_rank_threads);
                if (!solo[i]) {
                    bad = 1;
                    break;
                }
            }
            nb_mpi_idle_barrier();
            g_dist.sum_d(g_dist.ctx, &bad, 1);
            if (bad > 0) {
                failed = 1;
                if (g_dist.rank != 0) nb_errf(&err, "rank 0 could not open the one-process step");
            }
        }
        for (int r = 0; !failed; r++) {
            int more = 0;
            for (int j = 0; j < nnorms; j++) {
                int i = (j + r) % nnorms;
                if (!inst[i]) continue;
                /* a round ends after ROUND steps or ROUND_MS; under mpirun after ROUND steps
                 * only (every rank must take the same steps: each one sums over the ranks) */
                double spent = 0;
                for (int t = 0; t < ROUND && filled[i] < iters && (g_dp || spent < ROUND_MS); t++) {
                    double c0 = g_dist.comm_seconds, st = task->bench_step(inst[i]);
                    comm[(size_t)i * iters + filled[i]] = g_dist.comm_seconds - c0;
                    samples[(size_t)i * iters + filled[i]++] = 1e3 * st;
                    ar_bytes[bi * nnorms + i] = g_dist.comm_bytes;
                    spent += 1e3 * st;
                }
                if (g_vs_threads) { /* then the same steps in rank 0 alone */
                    if (g_dist.rank == 0 && solo[i]) {
                        set_threads(g_solo_threads);
                        for (int t = 0; t < ROUND && sfilled[i] < iters; t++)
                            ssamples[(size_t)i * iters + sfilled[i]++] =
                                1e3 * task->bench_step(solo[i]);
                        set_threads(g_rank_threads);
                    }
                    nb_mpi_idle_barrier();
                }
                more |= filled[i] < iters;
            }
            if (!more) break;
        }
        for (int i = 0; i < nnorms && gflop; i++)
            if (inst[i] && !failed) {
                if (task->bench_flops) gflop[bi] = 1e-9 * task->bench_flops(inst[i]);
                if (task->bench_gemms && bi == 0) {
                    ngemm = task->bench_gemms(inst[i], gemms, MAXG);
                    gemm_batch = batches[bi];
                }
                break;
            }
        int li = -1; /* layer's samples, for the intervals of vs_layer */
        for (int i = 0; i < nnorms; i++)
            if (norms[i] == NB_NORM_LAYER && inst[i] && filled[i] == iters) li = i;
        for (int i = 0; i < nnorms; i++) {
            int j = bi * nnorms + i;
            lo[j] = hi[j] = NAN;
            if (inst[i] && !failed && li >= 0 && i != li && filled[i] == iters)
                ratio_interval(samples + (size_t)li * iters, iters, samples + (size_t)i * iters,
                               iters, boot, &lo[j], &hi[j]);
        }
        for (int i = 0; i < nnorms; i++) {
            if (inst[i]) task->bench_close(inst[i]);
            int j = bi * nnorms + i;
            solo_ms[j] = NAN;
            if (g_vs_threads && g_dist.rank == 0 && solo[i]) {
                task->bench_close(solo[i]);
                solo[i] = NULL;
                if (sfilled[i] > 0) solo_ms[j] = median(ssamples + (size_t)i * iters, sfilled[i]);
            }
            if (failed || filled[i] == 0) {
                ms[j] = sd[j] = med[j] = NAN;
                continue;
            }
            double *v = samples + (size_t)i * iters, *c = comm + (size_t)i * iters;
            ar_share[j] = ar_ms[j] = NAN;
            if (g_dp) {
                for (int k = 0; k < iters; k++)
                    scratch[k] = c[k] * 1e3 / v[k];
                ar_share[j] = median(scratch, iters);
                for (int k = 0; k < iters; k++)
                    scratch[k] = c[k] * 1e3;
                ar_ms[j] = median(scratch, iters);
            }
            mean_std(v, iters, &ms[j], &sd[j]);
            med[j] = median(v, iters);
        }
        if (failed) {
            free(filled), free(samples), free(ms), free(sd), free(med), free(gflop);
            free(lo), free(hi), free(boot);
            FREE_DP();
            return nb_report_err(&err);
        }
    }
    free(filled);
    free(samples);
    char *hosts = g_dp ? nb_mpi_hosts_json() : NULL; /* collective: every rank asks */
    int nw = 7;                                      /* the norm column's width */
    for (int i = 0; i < nnorms; i++)
        if ((int)strlen(row_name(norms[i])) > nw) nw = (int)strlen(row_name(norms[i]));
    if (fmt == FMT_TABLE) {
        printf("# %s\n", settings);
        printf("# %s: %d timed steps per row after >= 0.3 s of warm-up, norms interleaved in "
               "rounds of %d steps or %d ms;\n# vs_layer = layer's median / this median, and its "
               "95%% bootstrap interval\n",
               task->name, iters, ROUND, ROUND_MS);
        if (g_dp)
            printf("# data-parallel over %d ranks, %d threads each (hosts %s): each rank steps on "
                   "its rows of the batch, then\n# the gradients are summed over the ranks in "
                   "one MPI_Allreduce; allreduce_share = time in the sums / step time\n# "
                   "(median over steps, rank 0's clock), allreduce_MB = bytes summed per step\n",
                   g_dist.size, omp_get_max_threads(), hosts ? hosts : "?");
        if (g_vs_threads)
            printf(
                "# --against threads: between the rounds over the ranks rank 0 alone (the others "
                "asleep) times the\n# same step at the whole batch with %d threads: "
                "one_proc_ms, and vs_one_proc = ms_per_step / one_proc_ms\n",
                g_solo_threads);
        printf("%-6s %-*s %6s %12s %10s %10s %9s %15s %10s%s", "task", nw, "norm", "batch",
               "ms_per_step", "mean", "std", "vs_layer", "vs_layer_95%", "norm_share",
               task->bench_flops ? "  GFLOP/s" : "");
        if (g_dp) printf(" %15s %12s %12s", "allreduce_share", "allreduce_ms", "allreduce_MB");
        if (g_vs_threads) printf(" %12s %12s", "one_proc_ms", "vs_one_proc");
        putchar('\n');
    } else if (fmt == FMT_CSV) {
        printf("task,norm,batch,ms_per_step,ms_mean,ms_std,vs_layer,steps,threads,settings,"
               "norm_share,gflop_per_s,vs_layer_lo,vs_layer_hi%s%s\n",
               g_dp ? ",ranks,allreduce_share,allreduce_ms,allreduce_bytes" : "",
               g_vs_threads ? ",one_process_threads,one_process_ms,vs_one_process" : "");
    } else {
        printf("{\"settings\": ");
        nb_json_str(stdout, settings);
        printf(", \"threads\": %d, \"ranks\": %d, ", omp_get_max_threads(), g_dp ? g_dist.size : 1);
        if (g_dp)
            printf("\"hosts\": %s, \"bn_statistics\": \"%s\", ", hosts ? hosts : "null",
                   g_bn_sync ? "global" : "per-rank");
        if (g_vs_threads) printf("\"one_process_threads\": %d, ", g_solo_threads);
        printf("\"steps\": %d, \"results\": [", iters);
    }
    free(hosts);
    int first = 1;
    for (int bi = 0; bi < nbatches; bi++) {
        double layer = NAN, none = NAN;
        for (int i = 0; i < nnorms; i++) {
            if (norms[i] == NB_NORM_LAYER) layer = med[bi * nnorms + i];
            if (norms[i] == NB_NORM_NONE) none = med[bi * nnorms + i];
        }
        for (int i = 0; i < nnorms; i++) {
            int j = bi * nnorms + i;
            const char *name = row_name(norms[i]);
            double vs = layer / med[j];
            /* the share of this norm's step beyond the step without a norm */
            double share = norms[i] == NB_NORM_NONE ? NAN : (med[j] - none) / med[j];
            if (isnan(med[j])) {
                if (fmt == FMT_TABLE)
                    printf("%-6s %-*s %6d %12s   (%s)\n", task->name, nw, name, batches[bi], "-",
                           g_dp && !g_bn_sync
                               ? "per-rank batch norm needs 2 rows per rank, or --bn-sync"
                               : "batch norm needs a batch of 2 or more");
                continue;
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
                printf("%-6s %-*s %6d %12.3f %10.3f %10.3f %9s %15s %10s", task->name, nw, name,
                       batches[bi], med[j], ms[j], sd[j], v, ci, sh);
                if (task->bench_flops && gflop) printf("  %7.1f", gflop[bi] / (med[j] * 1e-3));
                if (g_dp)
                    printf(" %15.4f %12.3f %12.3f", ar_share[j], ar_ms[j], ar_bytes[j] * 1e-6);
                if (g_vs_threads) printf(" %12.3f %11.3fx", solo_ms[j], med[j] / solo_ms[j]);
                putchar('\n');
            } else if (fmt == FMT_CSV) {
                printf("%s,%s,%d,%.4f,%.4f,%.4f,", task->name, name, batches[bi], med[j], ms[j],
                       sd[j]);
                if (!isnan(vs)) printf("%.4f", vs);
                printf(",%d,%d,", iters, omp_get_max_threads());
                nb_csv_field(stdout, settings);
                putchar(',');
                if (!isnan(share)) printf("%.4f", share);
                putchar(',');
                if (task->bench_flops && gflop) printf("%.2f", gflop[bi] / (med[j] * 1e-3));
                putchar(',');
                if (!isnan(lo[j]))
                    printf("%.4f,%.4f", lo[j], hi[j]);
                else
                    putchar(',');
                if (g_dp)
                    printf(",%d,%.6f,%.4f,%.0f", g_dist.size, ar_share[j], ar_ms[j], ar_bytes[j]);
                if (g_vs_threads)
                    printf(",%d,%.4f,%.4f", g_solo_threads, solo_ms[j], med[j] / solo_ms[j]);
                putchar('\n');
            } else {
                printf("%s{\"task\": \"%s\", \"norm\": \"%s\", \"batch\": %d, \"ms_per_step\": "
                       "%.4f, \"ms_mean\": %.4f, \"ms_std\": %.4f, \"vs_layer\": ",
                       first ? "" : ", ", task->name, name, batches[bi], med[j], ms[j], sd[j]);
                nb_json_num(stdout, vs);
                printf(", \"vs_layer_lo\": ");
                nb_json_num(stdout, lo[j]);
                printf(", \"vs_layer_hi\": ");
                nb_json_num(stdout, hi[j]);
                printf(", \"norm_share\": ");
                nb_json_num(stdout, share);
                printf(", \"gflop_per_s\": ");
                nb_json_num(stdout, task->bench_flops && gflop ? gflop[bi] / (med[j] * 1e-3) : NAN);
                if (g_dp) {
                    printf(", \"allreduce_share\": ");
                    nb_json_num(stdout, ar_share[j]);
                    printf(", \"allreduce_ms\": ");
                    nb_json_num(stdout, ar_ms[j]);
                    printf(", \"allreduce_bytes\": %.0f", ar_bytes[j]);
                }
                if (g_vs_threads) {
                    printf(", \"one_process_ms\": ");
                    nb_json_num(stdout, solo_ms[j]);
                    printf(", \"vs_one_process\": ");
                    nb_json_num(stdout, med[j] / solo_ms[j]);
                }
                putchar('}');
                first = 0;
            }
        }
    }
    if (fmt == FMT_JSON) printf("]}\n");
    if (fmt == FMT_TABLE && ngemm > 0 && g_dp)
        printf("\n# the GEMM floor is not timed under mpirun (the ranks share the machine): time "
               "it without mpirun\n");
    if (fmt == FMT_TABLE && ngemm > 0 && !g_dp) {
        /* The same GEMMs alone, multi-threaded OpenBLAS, in this run. */
        double floor_ms = 0, fl = 0;
        printf("\n# OpenBLAS sgemm alone on the step's GEMM shapes (batch %d), median of 5:\n",
               gemm_batch);
        printf("%-22s %6s %8s %6s %10s %9s\n", "gemm", "M", "N", "K", "ms", "GFLOP/s");
        for (int g = 0; g < ngemm; g++) {
            const nb_gemm_shape *s = &gemms[g];
            double t = time_sgemm(s->M, s->N, s->K, 5) * s->count;
            double f = 2.0 * s->M * (double)s->N * s->K * s->count;
            floor_ms += t;
            fl += f;
            printf("%-22s %6d %8d %6d %10.3f %9.1f\n", s->what, s->M, s->N, s->K, t,
                   f / (t * 1e-3) * 1e-9);
        }
        printf("# GEMM floor: %.1f ms per step (%.1f GFLOP at %.1f GFLOP/s)\n", floor_ms, fl * 1e-9,
               fl / (floor_ms * 1e-3) * 1e-9);
        for (int i = 0; i < nnorms; i++)
            if (!isnan(med[i]))
                printf("# %-*s step / floor = %.2fx; outside the floor: %.0f%% of the step\n", nw,
                       row_name(norms[i]), med[i] / floor_ms, 100.0 * (1 - floor_ms / med[i]));
    }
    free(ms), free(sd), free(med), free(gflop), free(lo), free(hi), free(boot);
    FREE_DP();
    return NB_EXIT_OK;
}
#undef FREE_DP

/* ---- against PyTorch ----------------------------------------------------------------------- */

/* `bench step TASK --against pytorch`: the task's step in normbench and in PyTorch, timed in
 * one session. The PyTorch side is a child process, compare/pytorch/driver.py (line protocol
 * in that file), so that rounds alternate between normbench's instances and the child's. */

typedef struct pyside {
    pid_t pid;
    FILE *to, *from;
    char *line;
    size_t cap;
    char settings[1024];
    int nextra;
    struct {
        char norm[32], variant[32], desc[128];
    } extra[8];
} pyside;

/* The next line from the child without its newline, or NULL at end of file. */
static const char *py_read(pyside *p) {
    ssize_t n = getline(&p->line, &p->cap, p->from);
    if (n < 0) return NULL;
    while (n > 0 && (p->line[n - 1] == '\n' || p->line[n - 1] == '\r'))
        p->line[--n] = '\0';
    return p->line;
}

static int py_send(pyside *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int py_send(pyside *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vfprintf(p->to, fmt, ap);
    va_end(ap);
    return rc < 0 || fflush(p->to) != 0 ? -1 : 0;
}

static void py_stop(pyside *p) {
    if (p->to) {
        py_send(p, "quit\n");
        fclose(p->to);
    }
    if (p->from) fclose(p->from);
    if (p->pid > 0) waitpid(p->pid, NULL, 0);
    free(p->line);
    memset(p, 0, sizeof *p);
}

/* The folder of the PyTorch scripts: $NORMBENCH_COMPARE_DIR, else compare/pytorch beside the
 * executable (the source tree). */
static void compare_dir(char *dir, size_t n) {
    const char *env = getenv("NORMBENCH_COMPARE_DIR");
    if (env && *env) {
        snprintf(dir, n, "%s", env);
        return;
    }
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(dir, n, "compare/pytorch");
        return;
    }
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    if (snprintf(dir, n, "%s/compare/pytorch", exe) >= (int)n) snprintf(dir, n, "compare/pytorch");
}

static int refuse_torch(const char *python, const char *why) {
    fprintf(stderr,
            "error: 'bench step --against pytorch' needs Python 3 with PyTorch: %s\n"
            "hint: apt-get install python3-torch (Debian's PyTorch for '/usr/bin/python3'), or set "
            "NORMBENCH_PYTHON to a Python that has torch (now '%s')\n",
            why, python);
    return NB_EXIT_FAIL;
}

/* Starts the child for task and reads its greeting. Returns 0, or an exit code after printing
 * the error. */
static int py_start(pyside *p, const nb_task *task, int threads) {
    memset(p, 0, sizeof *p);
    char dir[4096], driver[4200], script[4200], th[16];
    compare_dir(dir, sizeof dir);
    snprintf(driver, sizeof driver, "%s/driver.py", dir);
    snprintf(script, sizeof script, "%s/%s.py", dir, task->name);
    if (access(driver, R_OK) != 0) {
        fprintf(stderr,
                "error: cannot read the PyTorch driver '%s'\nhint: run normbench from its source "
                "tree, or set NORMBENCH_COMPARE_DIR to the compare/pytorch folder\n",
                driver);
        return NB_EXIT_FAIL;
    }
    if (access(script, R_OK) != 0) {
        fprintf(stderr,
                "error: task '%s' has no PyTorch script ('%s')\nhint: a task joins the comparison "
                "by adding compare/pytorch/%s.py (see compare/pytorch/driver.py)\n",
                task->name, script, task->name);
        return NB_EXIT_FAIL;
    }
    const char *python = getenv("NORMBENCH_PYTHON");
    if (!python || !*python)
        python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    snprintf(th, sizeof th, "%d", threads);
    int in[2], out[2];
    if (pipe(in) != 0) return nb_die("cannot create a pipe: %s", strerror(errno));
    if (pipe(out) != 0) {
        close(in[0]), close(in[1]);
        return nb_die("cannot create a pipe: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    /* the task's own options (mt's --model, --dim) go to the PyTorch side too, as --name=value
     * (a flag as --name), built before the fork */
    char *argv[4 + MAXGIVEN + 1];
    int na = 0, bad = 0;
    argv[na++] = (char *)python;
    argv[na++] = driver;
    argv[na++] = (char *)task->name;
    argv[na++] = th;
    for (int k = 0; k < g_ngiven; k++) {
        size_t len = strlen(g_given[k].name) + (g_given[k].value ? strlen(g_given[k].value) : 0);
        char *a = malloc(len + 4);
        if (!a) {
            bad = 1;
            break;
        }
        snprintf(a, len + 4, "--%s%s%s", g_given[k].name, g_given[k].value ? "=" : "",
                 g_given[k].value ? g_given[k].value : "");
        argv[na++] = a;
    }
    argv[na] = NULL;
    pid_t pid = bad ? -1 : fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execvp(python, argv);
        _exit(127);
    }
    for (int k = 4; k < na; k++)
        free(argv[k]);
    if (pid < 0) {
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        return bad ? nb_die("out of memory")
                   : nb_die("cannot start '%s': %s", python, strerror(errno));
    }
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    if (!p->to || !p->from) {
        py_stop(p);
        return nb_die("out of memory");
    }
    const char *l = py_read(p);
    if (!l) {
        int st = 0;
        waitpid(p->pid, &st, 0);
        p->pid = 0;
        py_stop(p);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            return refuse_torch(python, "the Python interpreter could not be started");
        return refuse_torch(python, "the PyTorch driver exited without a word");
    }
    if (strncmp(l, "error no-torch", 14) == 0) {
        char why[512];
        snprintf(why, sizeof why, "'import torch' failed (%s)", l[14] ? l + 15 : "");
        py_stop(p);
        return refuse_torch(python, why);
    }
    if (strcmp(l, "hello normbench-compare 1") != 0) {
        fprintf(stderr, "error: the PyTorch driver '%s' said '%s' instead of hello\n", driver, l);
        py_stop(p);
        return NB_EXIT_FAIL;
    }
    while ((l = py_read(p)) && strcmp(l, "ready") != 0) {
        if (strncmp(l, "settings ", 9) == 0)
            snprintf(p->settings, sizeof p->settings, "%s", l + 9);
        else if (strncmp(l, "error options ", 14) == 0) {
            fprintf(stderr,
                    "error: the PyTorch side of 'bench step %s' cannot take these options: %s\n"
                    "hint: leave the option out, or time normbench alone (without --against)\n",
                    task->name, l + 14);
            py_stop(p);
            return NB_EXIT_USAGE;
        } else if (strncmp(l, "extra ", 6) == 0 && p->nextra < 8) {
            int at = 0;
            if (sscanf(l + 6, "%31s %31s %n", p->extra[p->nextra].norm, p->extra[p->nextra].variant,
                       &at) == 2) {
                snprintf(p->extra[p->nextra].desc, sizeof p->extra[0].desc, "%s", l + 6 + at);
                p->nextra++;
            }
        }
    }
    if (!l) {
        py_stop(p);
        return nb_die("the PyTorch driver '%s' exited before it was ready", driver);
    }
    return 0;
}

/* One row of the comparison: a normbench norm row, or one of PyTorch's forms of it. */
typedef struct cmp_row {
    int norm;            /* index into the norms list */
    const char *variant; /* PyTorch's variant, NULL for the task's own form */
    int id;              /* PyTorch instance id; -1 when it could not be opened */
    char desc[160];      /* PyTorch's description of its model, or why it is missing */
    double *t;           /* PyTorch's samples (ms) */
    double last;         /* its last step's time (ms), warm-up included */
    int filled;
} cmp_row;

/* n steps of PyTorch instance id into t; returns how many it parsed (n, or less on failure). */
static int py_steps(pyside *p, int id, int n, double *t) {
    if (py_send(p, "step %d %d\n", id, n) != 0) return 0;
    const char *l = py_read(p);
    if (!l || strncmp(l, "ms ", 3) != 0) return 0;
    const char *q = l + 3;
    int k = 0;
    while (k < n) {
        char *end;
        double v = strtod(q, &end);
        if (end == q) break;
        t[k++] = v;
        q = end;
    }
    return k;
}

static int bench_against(const nb_task *task, const int *norms, int nnorms, const int *batches,
                         int nbatches, int iters, int fmt) {
    char settings[1024];
    settings_line(settings, sizeof settings);
    pyside py;
    int rc = py_start(&py, task, omp_get_max_threads());
    if (rc) return rc;
    /* rows: per norm its own form, then PyTorch's extra forms of that norm */
    int maxrows = nnorms * (1 + py.nextra);
    cmp_row *rows = calloc((size_t)maxrows, sizeof *rows);
    void **inst = calloc((size_t)nnorms, sizeof *inst);
    double *nat = malloc(sizeof(double) * (size_t)nnorms * iters);
    double *boot = malloc(sizeof(double) * 2 * (size_t)iters);
    double *pt = malloc(sizeof(double) * (size_t)maxrows * iters);
    int *nfilled = calloc((size_t)nnorms, sizeof(int));
    if (!rows || !inst || !nat || !boot || !pt || !nfilled) {
        py_stop(&py);
        free(rows), free(inst), free(nat), free(boot), free(pt), free(nfilled);
        return nb_die("out of memory");
    }
    int nrows = 0;
    for (int i = 0; i < nnorms; i++) {
        rows[nrows++] = (cmp_row){.norm = i};
        for (int e = 0; e < py.nextra; e++)
            if (strcmp(py.extra[e].norm, row_name(norms[i])) == 0)
                rows[nrows++] = (cmp_row){.norm = i, .variant = py.extra[e].variant};
    }
    for (int r = 0; r < nrows; r++)
        rows[r].t = pt + (size_t)r * iters;
    int nw = 7, first = 1, next_id = 0;
    for (int i = 0; i < nnorms; i++)
        if ((int)strlen(row_name(norms[i])) > nw) nw = (int)strlen(row_name(norms[i]));
    if (fmt == FMT_TABLE) {
        printf("# normbench: %s\n# pytorch:   %s\n", settings, py.settings);
        printf("# %s: %d timed steps per row after >= 0.3 s of warm-up, normbench's and PyTorch's "
               "instances interleaved in rounds of %d steps or %d ms;\n# ratio = PyTorch's "
               "median / normbench's median (> 1: normbench is faster), and its 95%% bootstrap "
               "interval\n",
               task->name, iters, ROUND, ROUND_MS);
        printf("%-6s %-*s %6s %12s %11s %8s %17s  %s\n", "task", nw, "norm", "batch",
               "normbench_ms", "pytorch_ms", "ratio", "ratio_95%", "pytorch");
    } else if (fmt == FMT_CSV) {
        printf("task,norm,batch,pytorch_variant,normbench_ms,pytorch_ms,ratio,ratio_lo,ratio_hi,"
               "steps,threads,settings,pytorch_settings,pytorch_model\n");
    } else {
        printf("{\"settings\": ");
        nb_json_str(stdout, settings);
        printf(", \"pytorch_settings\": ");
        nb_json_str(stdout, py.settings);
        printf(", \"threads\": %d, \"steps\": %d, \"results\": [", omp_get_max_threads(), iters);
    }
    for (int bi = 0; bi < nbatches; bi++) {
        nb_err err;
        nb_err_clear(&err);
        int failed = 0, B = batches[bi];
        for (int i = 0; i < nnorms; i++) {
            inst[i] = NULL;
            nfilled[i] = 0;
            if (row_kind(norms[i]) == NB_NORM_BATCH && B < 2) continue;
            if (!(inst[i] = open_native(task, norms[i], B, 0, &err))) {
                failed = 1;
                break;
            }
        }
        for (int r = 0; r < nrows && !failed; r++) {
            cmp_row *w = &rows[r];
            w->filled = 0;
            w->id = -1;
            if (!inst[w->norm]) {
                snprintf(w->desc, sizeof w->desc, "-");
                continue;
            }
            int id = next_id++;
            if (py_send(&py, "open %d %s %s %d\n", id, row_name(norms[w->norm]),
                        w->variant ? w->variant : "-", B) != 0) {
                failed = 2;
                break;
            }
            const char *l = py_read(&py);
            if (!l) {
                failed = 2;
                break;
            }
            snprintf(w->desc, sizeof w->desc, "%s", strncmp(l, "ok ", 3) == 0 ? l + 3 : l);
            if (strncmp(l, "ok ", 3) != 0) continue;
            w->id = id;
            /* warm-up: at least 5 steps and 0.3 s */
            double warm[8], spent = 0;
            for (int k = 0; k < 100 && (k == 0 || spent < 300); k++) {
                int n = k == 0 ? 5 : 1, got = py_steps(&py, id, n, warm);
                if (got != n) {
                    failed = 2;
                    break;
                }
                for (int j = 0; j < n; j++)
                    spent += warm[j];
                w->last = warm[n - 1];
            }
            if (failed) break;
        }
        /* rounds: every instance of both sides ROUND steps (or ROUND_MS) in turn, starting one
         * further on; PyTorch's steps asked for as many as its last step's time fits */
        int nall = nnorms + nrows;
        for (int rd = 0; !failed; rd++) {
            int more = 0;
            for (int j = 0; j < nall && !failed; j++) {
                int k = (j + rd) % nall;
                if (k < nnorms) {
                    if (!inst[k]) continue;
                    double spent = 0;
                    for (int t = 0; t < ROUND && nfilled[k] < iters && spent < ROUND_MS; t++) {
                        double ms = 1e3 * task->bench_step(inst[k]);
                        nat[(size_t)k * iters + nfilled[k]++] = ms;
                        spent += ms;
                    }
                    more |= nfilled[k] < iters;
                } else {
                    cmp_row *w = &rows[k - nnorms];
                    if (w->id < 0 || w->filled >= iters) continue;
                    int n = iters - w->filled < ROUND ? iters - w->filled : ROUND;
                    if (w->last > 0 && ROUND_MS / w->last < n)
                        n = ROUND_MS / w->last >= 1 ? (int)(ROUND_MS / w->last) : 1;
                    if (py_steps(&py, w->id, n, w->t + w->filled) != n) failed = 2;
                    w->filled += n;
                    w->last = w->t[w->filled - 1];
                    more |= w->filled < iters;
                }
            }
            if (!more) break;
        }
        for (int r = 0; r < nrows && failed != 2; r++)
            if (rows[r].id >= 0) {
                py_send(&py, "close %d\n", rows[r].id);
                py_read(&py);
            }
        for (int i = 0; i < nnorms; i++)
            if (inst[i]) task->bench_close(inst[i]);
        if (failed) {
            py_stop(&py);
            free(rows), free(inst), free(nat), free(boot), free(pt), free(nfilled);
            if (failed == 2) return nb_die("the PyTorch driver stopped answering (see above)");
            return nb_report_err(&err);
        }
        for (int r = 0; r < nrows; r++) {
            cmp_row *w = &rows[r];
            int i = w->norm;
            const char *name = row_name(norms[i]);
            double *v = nat + (size_t)i * iters;
            double nmed = NAN, pmed = NAN, lo = NAN, hi = NAN;
            if (inst[i] && nfilled[i] == iters) {
                if (w->id >= 0 && w->filled == iters)
                    ratio_interval(w->t, iters, v, iters, boot, &lo, &hi);
                memcpy(boot, v, sizeof(double) * (size_t)iters);
                nmed = median(boot, iters);
            }
            if (w->id >= 0 && w->filled == iters) {
                memcpy(boot, w->t, sizeof(double) * (size_t)iters);
                pmed = median(boot, iters);
            }
            double ratio = pmed / nmed;
            if (fmt == FMT_TABLE) {
                if (isnan(nmed)) {
                    if (!w->variant)
                        printf("%-6s %-*s %6d %12s   (batch norm needs a batch of 2 or more)\n",
                               task->name, nw, name, B, "-");
                    continue;
                }
                char p[32], ra[32], ci[48];
                snprintf(p, sizeof p, isnan(pmed) ? "-" : "%.3f", pmed);
                snprintf(ra, sizeof ra, isnan(ratio) ? "-" : "%.3fx", ratio);
                if (isnan(lo))
                    snprintf(ci, sizeof ci, "-");
                else
                    snprintf(ci, sizeof ci, "[%.3f,%.3f]", lo, hi);
                printf("%-6s %-*s %6d %12.3f %11s %8s %17s  %s\n", task->name, nw, name, B, nmed, p,
                       ra, ci, w->desc);
            } else if (fmt == FMT_CSV) {
                if (isnan(nmed)) continue;
                printf("%s,%s,%d,%s,%.4f,", task->name, name, B, w->variant ? w->variant : "",
                       nmed);
                if (!isnan(pmed))
                    printf("%.4f,%.4f,%.4f,%.4f", pmed, ratio, lo, hi);
                else
                    printf(",,,");
                printf(",%d,%d,", iters, omp_get_max_threads());
                nb_csv_field(stdout, settings);
                putchar(',');
                nb_csv_field(stdout, py.settings);
                putchar(',');
                nb_csv_field(stdout, w->desc);
                putchar('\n');
            } else {
                if (isnan(nmed)) continue;
                printf(
                    "%s{\"task\": \"%s\", \"norm\": \"%s\", \"batch\": %d, \"pytorch_variant\": ",
                    first ? "" : ", ", task->name, name, B);
                if (w->variant)
                    nb_json_str(stdout, w->variant);
                else
                    printf("null");
                printf(", \"normbench_ms\": ");
                nb_json_num(stdout, nmed);
                printf(", \"pytorch_ms\": ");
                nb_json_num(stdout, pmed);
                printf(", \"ratio\": ");
                nb_json_num(stdout, ratio);
                printf(", \"ratio_lo\": ");
                nb_json_num(stdout, lo);
                printf(", \"ratio_hi\": ");
                nb_json_num(stdout, hi);
                printf(", \"pytorch_model\": ");
                nb_json_str(stdout, w->desc);
                putchar('}');
                first = 0;
            }
        }
        fflush(stdout);
    }
    if (fmt == FMT_JSON) printf("]}\n");
    py_stop(&py);
    free(rows), free(inst), free(nat), free(boot), free(pt), free(nfilled);
    return NB_EXIT_OK;
}

int cmd_bench(int argc, const char **argv) {
    const char *norms_arg = NULL, *batch_arg = NULL, *against = NULL;
    int fmt = FMT_TABLE, threads = 0, steps = 30, dtype = 0;
    static const char *const dtype_choices[] = {"fp32", "bf16", NULL};
    nb_opt opts[] = {
        {"norms", NB_OPT_STR, &norms_arg, "LIST", "norms to time, comma-separated, or all (all)"},
        {"batch", NB_OPT_STR, &batch_arg, "LIST", "step: batch sizes (task default; mnist 128,4)"},
        {"steps", NB_OPT_INT, &steps, "N", "step: timed steps per row (30)", NULL, 1, 100000},
        NB_OPT_FORMAT(&fmt, format_choices),
        {"threads", NB_OPT_INT, &threads, "N", "threads (default: OMP_NUM_THREADS or all cores)",
         NULL, 1, 1024},
        {"device", NB_OPT_CHOICE, &g_device, "D", "cpu, or cuda (kernels; step mnist)",
         device_choices},
        {"against", NB_OPT_STR, &against, "FW",
         "step: time the same step in another framework beside it (pytorch), or under mpirun in "
         "one process with all the ranks' threads (threads)"},
        {"dtype", NB_OPT_CHOICE, &dtype, "T", "kernels --device cuda: fp32 or bf16 I/O (fp32)",
         dtype_choices},
        {"bn-sync", NB_OPT_FLAG, &g_bn_sync, NULL,
         "step under mpirun: BatchNorm statistics over the global batch (default: per rank)"},
        {NULL},
    };
    /* the task's own options (mt's --model, --dim): kept aside for the step benchmark's task */
    const char *args[256];
    int nargs = 0;
    g_ngiven = 0;
    for (int i = 0; i < argc && nargs < 255; i++) {
        int known = 0, flag = 0;
        if (i > 0 && strncmp(argv[i], "--", 2) == 0 && argv[i][2] && !strchr(argv[i], '='))
            flag = nb_task_opt_is_flag(argv[i] + 2, &known);
        if (!known || g_ngiven >= MAXGIVEN) {
            args[nargs++] = argv[i];
            continue;
        }
        const char *name = argv[i] + 2, *v = NULL;
        if (!flag) {
            if (i + 1 >= argc) return nb_usage_error("bench", "option '%s' needs a value", argv[i]);
            v = argv[++i];
        }
        g_given[g_ngiven++] = (nb_given){name, v};
    }
    args[nargs] = NULL;
    const char *pos[2];
    int npos = 0;
    int rc = nb_parse_opts("bench", bench_usage, nargs, args, opts, pos, 2, &npos);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) return rc;
    if (npos < 1) return nb_usage_error("bench", "what to benchmark? 'kernels' or 'step TASK'");
    if (g_ngiven && (strcmp(pos[0], "step") != 0 || npos < 2))
        return nb_usage_error("bench", "'--%s' is a task's option: it goes with 'bench step TASK'",
                              g_given[0].name);
    nb_note_blas_core();
    /* the labels (batch-everywhere) are taken out of the list before the six norms are parsed */
    find_labels();
    int norms[NB_NORM_COUNT + MAXLABELS + 1], lrows[MAXLABELS], nl = 0;
    char rest[512];
    int src = split_labels(norms_arg ? norms_arg : "all", rest, sizeof rest, lrows, &nl);
    if (src < 0) return nb_usage_error("bench", "invalid norm list '%s'", norms_arg);
    if (src > 0) return nb_usage_error("bench", "a norm is listed twice in '%s'", norms_arg);
    int nnorms = rest[0] || !nl ? nb_parse_norm_list("bench", rest, norms, NB_NORM_COUNT) : 0;
    if (nnorms < 0) return NB_EXIT_USAGE;
    /* 'all' leaves out dyt (not yet in every task); the kernels time it in 'all' too */
    if (strcmp(pos[0], "kernels") == 0 && strcmp(rest, "all") == 0 && !g_device)
        norms[nnorms++] = NB_NORM_DYT;
    for (int i = 0; i < nnorms; i++)
        if (norms[i] == NB_NORM_DYT && g_device)
            return nb_usage_error("bench", "dyt has no CUDA kernels yet: leave it out of --norms "
                                           "with --device cuda");
    for (int l = 0; l < nl; l++) {
        const char *t = npos > 1 ? pos[1] : "";
        int li = lrows[l] - NB_NORM_COUNT;
        if (strcmp(pos[0], "step") != 0 || strcmp(t, labels[li].task->name) != 0) {
            fprintf(stderr,
                    "error: '%s' (%s --%s) exists only for 'bench step %s'\nhint: leave it out "
                    "of --norms, or time 'normbench bench step %s --norms %s,%s'\n",
                    labels[li].name, labels[li].task->name, labels[li].flag, labels[li].task->name,
                    labels[li].task->name, nb_norm_name((nb_norm_kind)labels[li].base),
                    labels[li].name);
            return NB_EXIT_USAGE;
        }
        /* shown right after its base norm when that is timed too, else last */
        int at = nnorms;
        for (int i = 0; i < nnorms; i++)
            if (norms[i] == labels[li].base) at = i + 1;
        memmove(norms + at + 1, norms + at, sizeof(int) * (size_t)(nnorms - at));
        norms[at] = lrows[l];
        nnorms++;
    }
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    g_dp = nb_mpi_on() && nb_mpi_size() > 1;
    g_vs_threads = against && strcmp(against, "threads") == 0;
    if (g_vs_threads && !g_dp)
        return nb_usage_error("bench", "--against threads compares 'bench step' under mpirun -np N "
                                       "(N > 1) with one process: start it with mpirun");
    if (g_vs_threads) against = NULL; /* a mode of the data-parallel step, not another side */
    if (against && strcmp(against, "pytorch") != 0)
        return nb_usage_error("bench",
                              "unknown framework '%s' for --against: use 'pytorch' (or 'threads' "
                              "under mpirun)",
                              against);
    if (against && strcmp(pos[0], "step") != 0)
        return nb_usage_error("bench", "--against is for 'bench step TASK'");
    if (against && g_device)
        return nb_usage_error("bench", "--against pytorch compares CPU steps: leave out --device");
    /* under mpirun with more than one rank: the data-parallel step, timed over the ranks */
    if (g_bn_sync && !g_dp)
        return nb_usage_error("bench", "--bn-sync is for 'bench step TASK' under mpirun with more "
                                       "than one rank");
    if (g_dp) {
        const char *why = strcmp(pos[0], "step") != 0 ? "'bench kernels' times one process"
                          : against                   ? "--against pytorch times one process"
                          : g_device                  ? "--device cuda has no data-parallel step"
                                                      : NULL;
        if (why)
            return nb_usage_error("bench", "%s, not %d ranks: run it without mpirun", why,
                                  nb_mpi_size());
    }
    if (strcmp(pos[0], "kernels") == 0) {
        if (npos > 1) return nb_usage_error("bench", "unexpected argument '%s'", pos[1]);
        if (g_device)
            return bench_kernels_cuda(norms, nnorms, fmt, dtype ? NB_CUDA_BF16 : NB_CUDA_F32);
        return bench_kernels(norms, nnorms, fmt);
    }
    if (strcmp(pos[0], "step") != 0)
        return nb_usage_error("bench", "unknown benchmark '%s': use 'kernels' or 'step TASK'",
                              pos[0]);
    if (npos < 2) return nb_usage_error("bench", "which task? e.g. 'normbench bench step mnist'");
    const nb_task *task = nb_task_find(pos[1]);
    if (!task) return nb_unknown_task("bench", pos[1]);
    if (!task->bench_open || !task->bench_step || !task->bench_close)
        return nb_die("task '%s' has no step benchmark", task->name);
    if (g_dp && !task->data_parallel) {
        fprintf(stderr,
                "error: task '%s' has no data-parallel step benchmark: 'bench step %s' cannot run "
                "over %d ranks\nhint: run it without mpirun ('mpirun normbench run %s' trains "
                "it over ranks); the tasks whose step benchmark runs over ranks are:",
                task->name, task->name, nb_mpi_size(), task->name);
        for (int i = 0; nb_task_at(i); i++)
            if (nb_task_at(i)->data_parallel) fprintf(stderr, " %s", nb_task_at(i)->name);
        fputc('\n', stderr);
        return NB_EXIT_USAGE;
    }
    if (g_ngiven) { /* the task's options checked once, as `run` checks them */
        nb_train_cfg cfg;
        nb_err gerr;
        memset(&cfg, 0, sizeof cfg);
        cfg.norm.kind = NB_NORM_LAYER;
        cfg.task = task->name;
        cfg.dataset = task->default_dataset;
        int bad = nb_task_configure(task, &cfg, NB_NORM_LAYER, g_given, g_ngiven, &gerr);
        nb_task_opts_free(&cfg);
        if (bad) return nb_usage_error("bench", "%s", gerr.msg);
    }
    if (g_device) {
        nb_err derr;
        nb_err_clear(&derr);
        if (!task->cuda)
            return nb_usage_error("bench", "--device cuda has no GPU path for 'step %s'",
                                  task->name);
        if (nb_cuda_init(&derr)) return nb_report_err(&derr);
    }
    int batches[16], nbatches = 0;
    for (; nbatches < 16 && task->bench_batches[nbatches]; nbatches++)
        batches[nbatches] = task->bench_batches[nbatches];
    if (batch_arg) {
        nbatches = parse_int_list(batch_arg, batches, 16);
        if (nbatches < 1)
            return nb_usage_error("bench", "invalid batch list '%s' (e.g. 128,4)", batch_arg);
    }
    if (against) {
        signal(SIGPIPE, SIG_IGN); /* a child that dies is an error on write, not a signal */
        return bench_against(task, norms, nnorms, batches, nbatches, steps, fmt);
    }
    if (g_dp) {
        for (int i = 0; i < nbatches; i++)
            if (batches[i] < nb_mpi_size())
                return nb_usage_error("bench", "batch %d is smaller than the number of ranks (%d)",
                                      batches[i], nb_mpi_size());
        nb_mpi_dist(&g_dist, g_bn_sync);
        g_rank_threads = omp_get_max_threads();
        g_solo_threads = g_rank_threads * g_dist.size;
        int cpus = nb_mpi_cpus();
        if (g_vs_threads && g_dist.rank == 0 && cpus > 0 && cpus < g_solo_threads)
            fprintf(stderr,
                    "warning: rank 0 may run on %d CPU(s) only (mpirun binds ranks to cores), so "
                    "its %d threads alone share them\nhint: start mpirun with --bind-to none for "
                    "--against threads\n",
                    cpus, g_solo_threads);
        /* rank 0 prints; the others time their share in silence */
        if (g_dist.rank != 0 && !freopen("/dev/null", "w", stdout))
            return nb_die("cannot silence rank %d's output", g_dist.rank);
    }
    return bench_step(task, norms, nnorms, batches, nbatches, steps, fmt);
}
