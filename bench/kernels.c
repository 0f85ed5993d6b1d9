/* bench/kernels.c — the norm kernels timed alone, paired with a copy of the same bytes, on the
 * CPU and on the GPU (the CUDA kernel table). (Moved from cmd/cmd_bench.c.) */
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
} kbuf;

/* A norm's kernels from the norm table (nn/norms/norms.h), on the default configuration (DyT:
 * alpha 0.5, the paper's default initial value). */
static void run_kernel(int norm, int backward, kbuf *k, const nb_norm_cfg *cfg, int kk) {
    const nb_norm_def *nd = nb_norm_get((nb_norm_kind)norm);
    int B = k->B, C = k->C;
    if (nd->acts == NB_ON_WEIGHTS) { /* the (B, C) array as a weight of B units with C inputs */
        nb_weightnorm_forward(k->y, k->rstd, k->x, k->g, B, C);
        if (backward) nb_weightnorm_backward(k->dx, k->dg, k->dy, k->x, k->g, k->rstd, B, C);
        return;
    }
    if (!nd->ops) return;
    float s[8], ds[8] = {0};
    for (int i = 0; i < nd->nscalars && i < 8; i++)
        s[i] = (float)nd->scalar_init(cfg);
    nd->ops->forward(k->y, k->mean, k->rstd, k->rm, k->rv, k->x, k->g, k->b, s, B, C, 1, cfg);
    if (backward)
        nd->ops->backward(k->dx, k->dg, k->db, ds, k->dy, k->x, k->g, s, k->mean, k->rstd, B, C, 1,
                          cfg, 1);
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
    *ratio = nb_bench_median(r, n);
    *t = nb_bench_median(a, n);
    *copy_t = nb_bench_median(c, n);
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

int nb_bench_parse_shapes(const char *arg, int (*shapes)[2], int *n, nb_err *err) {
    const char *p = arg;
    *n = 0;
    for (;;) {
        char *end = (char *)p;
        long r = -1, c = -1;
        if (*p >= '0' && *p <= '9') r = strtol(p, &end, 10);
        if (r >= 0 && (*end == 'x' || *end == 'X') && end[1] >= '0' && end[1] <= '9')
            c = strtol(end + 1, &end, 10);
        if (r < 1 || c < 1 || (*end && *end != ','))
            return nb_errf(err, "--shapes '%s': each shape is ROWSxCOLUMNS, e.g. 128x1000", arg);
        if (r > (1L << 20) || c > (1L << 20) || r * c > (1L << 27))
            return nb_errf(err,
                           "--shapes '%s': %ldx%ld is too large (a side at most 2^20, at most "
                           "2^27 values)",
                           arg, r, c);
        if (*n >= NB_BENCH_MAX_SHAPES)
            return nb_errf(err, "--shapes '%s': at most %d shapes", arg, NB_BENCH_MAX_SHAPES);
        shapes[*n][0] = (int)r;
        shapes[(*n)++][1] = (int)c;
        if (!*end) return 0;
        p = end + 1;
    }
}

int nb_bench_kernels(const nb_bench_io *io, const int *norms, int nnorms, int fmt,
                     const int (*shapes)[2], int nshapes) {
    FILE *tab = io->out;
    static const int default_shapes[][2] = {{128, 1000}, {65536, 1024}};
    if (!shapes) {
        shapes = default_shapes;
        nshapes = (int)(sizeof default_shapes / sizeof default_shapes[0]);
    }
    char settings[1024];
    nb_bench_settings_line(settings, sizeof settings);
    nb_bench_stamp_t stamp;
    nb_bench_stamp(&stamp);
    nb_rng rng;
    nb_rng_seed(&rng, 1, NB_STREAM_SYNTH);
    int first = 1;
    if (fmt == FMT_TABLE) {
        fprintf(tab, "# %s\n", settings);
        fprintf(tab, "%-12s %-7s %-8s %10s %9s %9s %9s\n", "shape", "norm", "pass", "ms", "GB/s",
                "copy GB/s", "vs copy");
    } else if (fmt == FMT_CSV) {
        fprintf(tab, "shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,threads,settings,"
                     "machine,date\n");
    } else {
        fprintf(tab, "{\"settings\": ");
        nb_json_str(tab, settings);
        fprintf(tab, ", \"threads\": %d, \"results\": [", omp_get_max_threads());
    }
    for (int s = 0; s < nshapes; s++) {
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
            return nb_bench_fail(io, "out of memory for a %dx%d benchmark", k.B, k.C);
        for (size_t i = 0; i < W; i++)
            k.rv[i] = 1;
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", k.B, k.C);
        double copy_bytes = 2.0 * N * sizeof(float);
        for (int i = 0; i < nnorms; i++) {
            const nb_norm_def *nd = nb_norm_get((nb_norm_kind)norms[i]);
            if (nd->acts == NB_ON_NOTHING) continue; /* identity: nothing to time */
            nb_norm_cfg cfg;
            nb_norm_cfg_default(&cfg, (nb_norm_kind)norms[i]);
            int kk = nd->k_of_row ? nb_prms_k(k.C, cfg.p, cfg.p_floor) : k.C;
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
                    fprintf(tab, "%-12s %-7s %-8s %10.3f %9.2f %9.2f %9.2f\n", shape, name, pass,
                            t * 1e3, gbs, copy_gbs, ratio);
                else if (fmt == FMT_CSV) {
                    fprintf(tab, "%s,%s,%s,%.4f,%.3f,%.3f,%.4f,%d,", shape, name, pass, t * 1e3,
                            gbs, copy_gbs, ratio, omp_get_max_threads());
                    nb_csv_field(tab, settings);
                    nb_bench_csv_stamp(tab, &stamp);
                    fputc('\n', tab);
                } else {
                    fprintf(
                        tab,
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
    if (fmt == FMT_JSON) fprintf(tab, "]}\n");
    return NB_EXIT_OK;
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
int nb_bench_kernels_cuda(const nb_bench_io *io, const int *norms, int nnorms, int fmt,
                          nb_cuda_dtype dt) {
    FILE *tab = io->out;
    static const int shapes[][2] = {{128, 1000}, {65536, 1024}, {16384, 4096}, {4096, 8192}};
    nb_err err;
    nb_err_clear(&err);
    if (nb_cuda_init(&err)) return nb_bench_report(io, &err);
    char desc[512];
    nb_cuda_describe(desc, sizeof desc);
    nb_bench_stamp_t stamp;
    nb_bench_stamp(&stamp);
    const char *tn = dt == NB_CUDA_F32 ? "fp32" : "bf16";
    if (fmt == FMT_TABLE) {
        fprintf(tab, "# %s; %s input/output, fp32 statistics; CUDA-event medians\n", desc, tn);
        fprintf(tab, "%-12s %-7s %-8s %10s %9s %9s %9s\n", "shape", "norm", "pass", "ms", "GB/s",
                "copy GB/s", "vs copy");
    } else if (fmt == FMT_CSV) {
        fprintf(tab, "shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,dtype,device,"
                     "machine,date\n");
    } else {
        fprintf(tab, "{\"device\": ");
        nb_json_str(tab, desc);
        fprintf(tab, ", \"dtype\": \"%s\", \"results\": [", tn);
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
        if (!hx || !hdy || !hg || !hb || !hrv) return nb_bench_fail(io, "out of memory");
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
        if (!ok) return nb_bench_report(io, &err);
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", k.B, k.C);
        for (int i = 0; i < nnorms; i++) {
            const nb_norm_def *nd = nb_norm_get((nb_norm_kind)norms[i]);
            if (nd->acts == NB_ON_NOTHING) continue;
            nb_norm_cfg_default(&k.cfg, (nb_norm_kind)norms[i]);
            k.norm = norms[i];
            k.k = nd->k_of_row ? nb_prms_k(k.C, k.cfg.p, k.cfg.p_floor) : k.C;
            for (int bw = 0; bw <= 1; bw++) {
                k.backward = bw;
                enum { REP = 40 };
                double a[REP], c[REP], r[REP], t0, t1;
                double bytes = (bw ? 5.0 : 2.0) * (double)k.bytes, cbytes = 2.0 * (double)k.bytes;
                /* warm-up: module load, workspace allocation, clocks */
                for (int w = 0; w < 3; w++)
                    if (nb_cuda_time_ms(g_kernel, &k, &t0, &err) ||
                        nb_cuda_time_ms(g_copy, &k, &t1, &err))
                        return nb_bench_report(io, &err);
                for (int rep = 0; rep < REP; rep++) {
                    if (nb_cuda_time_ms(g_copy, &k, &c[rep], &err) ||
                        nb_cuda_time_ms(g_kernel, &k, &a[rep], &err))
                        return nb_bench_report(io, &err);
                    r[rep] = (bytes / a[rep]) / (cbytes / c[rep]);
                }
                if (k.failed) return nb_bench_report(io, &k.err);
                double ratio = nb_bench_median(r, REP), t = nb_bench_median(a, REP),
                       ct = nb_bench_median(c, REP);
                double gbs = bytes / (t * 1e-3) / 1e9, cgbs = cbytes / (ct * 1e-3) / 1e9;
                const char *pass = bw ? "fwd+bwd" : "fwd";
                const char *name = nb_norm_name((nb_norm_kind)norms[i]);
                if (fmt == FMT_TABLE)
                    fprintf(tab, "%-12s %-7s %-8s %10.4f %9.1f %9.1f %9.2f\n", shape, name, pass, t,
                            gbs, cgbs, ratio);
                else if (fmt == FMT_CSV) {
                    fprintf(tab, "%s,%s,%s,%.5f,%.2f,%.2f,%.4f,%s,", shape, name, pass, t, gbs,
                            cgbs, ratio, tn);
                    nb_csv_field(tab, desc);
                    nb_bench_csv_stamp(tab, &stamp);
                    fputc('\n', tab);
                } else {
                    fprintf(tab,
                            "%s{\"shape\": \"%s\", \"norm\": \"%s\", \"pass\": \"%s\", "
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
    if (fmt == FMT_JSON) fprintf(tab, "]}\n");
    if (fmt == FMT_TABLE)
        fprintf(tab,
                "# PyTorch's norms on the same device: python3 tools/torch_norms.py (not run by "
                "normbench)\n");
    return NB_EXIT_OK;
}
