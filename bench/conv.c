/* bench/conv.c — `bench conv`: the 3×3 layers of ConvPool-CNN-C (task cifar, width 1: 3→96 and
 * 96→96 on 32×32, 96→192 and 192→192 on 16×16, 192→192 pad 0 on 8×8) through each convolution
 * engine (im2col + sgemm, Winograd F(2×2,3×3), F(4×4,3×3)), forward and backward (data and
 * weight gradient; the first layer has no data gradient, as in the network), in the batched
 * (--grad-sums batch) and the exact (example, cifar's default) mode. The engines run in turn
 * within each round, so that a slow spell of a shared machine lands on all of them; per engine
 * the median over rounds, and per Winograd engine the median over rounds of im2col's time / its
 * time, with its 95% interval (bootstrap). The settings line records threads, BLAS and the load
 * average at the start and the end. */
#include "bench/bench.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "util/json.h"
#include "tasks/task.h"

typedef struct clayer {
    int C, H, W, OC, pad, count; /* count: how many layers of the network have this shape */
} clayer;

static const clayer layers[] = {
    {3, 32, 32, 96, 1, 1},    {96, 32, 32, 96, 1, 2}, {96, 16, 16, 192, 1, 1},
    {192, 16, 16, 192, 1, 2}, {192, 8, 8, 192, 0, 1},
};
enum { NL = sizeof layers / sizeof layers[0], NE = 3, MAXR = 64 };
static const int engines[NE] = {0, 2, 4};

typedef struct cbuf {
    const clayer *L;
    int N, exact, first;
    float *x, *w, *y, *dy, *dx, *dw, *scratch;
    double *dwd, *dpart;
} cbuf;

static double run_once(cbuf *b, int e, int backward) {
    const clayer *L = b->L;
    const int T = omp_get_max_threads(), m = engines[e];
    double t0 = nb_now();
    if (!backward) {
        if (m)
            nb_wino_forward(b->y, b->scratch, T, b->x, b->w, b->N, L->C, L->H, L->W, L->OC, L->pad,
                            m, b->exact);
        else
            nb_conv2d_forward(b->y, b->scratch, T, b->x, b->w, b->N, L->C, L->H, L->W, L->OC, 3,
                              L->pad, b->exact);
    } else {
        float *dx = b->first ? NULL : b->dx;
        double *dwd = b->exact ? b->dwd : NULL;
        if (m)
            nb_wino_backward(dx, b->dw, dwd, b->scratch, T, b->dy, b->x, b->w, b->N, L->C, L->H,
                             L->W, L->OC, L->pad, m, 0);
        else
            nb_conv2d_backward(dx, b->dw, dwd, b->dpart, b->scratch, T, b->dy, b->x, b->w, b->N,
                               L->C, L->H, L->W, L->OC, 3, L->pad, 0);
    }
    return nb_now() - t0;
}

static float *frand(size_t n, nb_rng *r, double scale) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (p && r)
        for (size_t i = 0; i < n; i++)
            p[i] = (float)(scale * nb_rng_normal(r));
    else if (p)
        memset(p, 0, sizeof(float) * n);
    return p;
}

int nb_bench_conv(const nb_bench_io *io, int N, int rounds, int fmt) {
    FILE *tab = io->out;
    if (rounds > MAXR) rounds = MAXR;
    if (rounds < 3) rounds = 3;
    char settings[1024];
    nb_bench_settings_line(settings, sizeof settings);
    nb_bench_stamp_t stamp;
    nb_bench_stamp(&stamp);
    double load0[3] = {0, 0, 0}, load1[3] = {0, 0, 0};
    if (getloadavg(load0, 3) < 0) load0[0] = -1;
    const int T = omp_get_max_threads();
    nb_rng rng;
    nb_rng_seed(&rng, 1, NB_STREAM_SYNTH);
    int firstrow = 1;
    if (fmt == FMT_TABLE) {
        fprintf(tab, "# %s batch=%d rounds=%d load=%.2f\n", settings, N, rounds, load0[0]);
        fprintf(tab, "%-22s %-5s %-7s %9s %9s %9s %8s %-15s %8s %-15s\n", "layer (x count)", "sums",
                "pass", "im2col", "wino2", "wino4", "vs_w2", "95%", "vs_w4", "95%");
    } else if (fmt == FMT_CSV) {
        fprintf(tab, "layer,count,sums,pass,im2col_ms,wino2_ms,wino4_ms,im2col_over_wino2,lo2,"
                     "hi2,im2col_over_wino4,lo4,hi4,batch,threads,settings,machine,date\n");
    } else {
        fprintf(tab, "{\"settings\": ");
        nb_json_str(tab, settings);
        fprintf(tab, ", \"batch\": %d, \"threads\": %d, \"load_start\": %.2f, \"results\": [", N, T,
                load0[0]);
    }
    for (int l = 0; l < NL; l++) {
        const clayer *L = &layers[l];
        const int OH = L->H + 2 * L->pad - 2, OW = L->W + 2 * L->pad - 2;
        size_t nx = (size_t)N * L->C * L->H * L->W, ny = (size_t)N * L->OC * OH * OW,
               nw = (size_t)L->OC * L->C * 9;
        size_t ss = nb_conv2d_scratch(L->C, L->H, L->W, L->OC, 3, L->pad) * (size_t)T;
        for (int e = 1; e < NE; e++) {
            size_t s = nb_wino_scratch(engines[e], L->C, L->OC, T);
            if (s > ss) ss = s;
        }
        cbuf b = {L, N, 0, l == 0, 0};
        b.x = frand(nx, &rng, 1);
        b.w = frand(nw, &rng, 0.05);
        b.y = frand(ny, NULL, 0);
        b.dy = frand(ny, &rng, 1);
        b.dx = frand(nx, NULL, 0);
        b.dw = frand(nw, NULL, 0);
        b.scratch = frand(ss, NULL, 0);
        b.dwd = calloc(nw, sizeof(double));
        b.dpart = calloc(nw * (size_t)T, sizeof(double));
        if (!b.x || !b.w || !b.y || !b.dy || !b.dx || !b.dw || !b.scratch || !b.dwd || !b.dpart) {
            free(b.x), free(b.w), free(b.y), free(b.dy), free(b.dx), free(b.dw), free(b.scratch);
            free(b.dwd), free(b.dpart);
            return nb_bench_fail(io, "out of memory for the %dx%dx%d layer at batch %d", L->C, L->H,
                                 L->W, N);
        }
        char name[48];
        snprintf(name, sizeof name, "%d>%d %dx%d p%d (x%d)", L->C, L->OC, L->H, L->W, L->pad,
                 L->count);
        for (int exact = 0; exact < 2; exact++)
            for (int bw = 0; bw < 2; bw++) {
                b.exact = exact;
                double t[NE][MAXR], med[NE], ratio[NE][MAXR], lo[NE], hi[NE], rmed[NE],
                    scr[4 * MAXR];
                for (int e = 0; e < NE; e++)
                    run_once(&b, e, bw);         /* warm-up */
                for (int r = 0; r < rounds; r++) /* each round in another order */
                    for (int k = 0; k < NE; k++) {
                        const int e = (k + r) % NE;
                        t[e][r] = run_once(&b, e, bw);
                    }
                for (int e = 0; e < NE; e++) {
                    for (int r = 0; r < rounds; r++)
                        ratio[e][r] = t[0][r] / t[e][r];
                    nb_bench_ratio_interval(t[0], rounds, t[e], rounds, scr, &lo[e], &hi[e]);
                    rmed[e] = nb_bench_median(ratio[e], rounds);
                    double tmp[MAXR];
                    memcpy(tmp, t[e], sizeof(double) * rounds);
                    med[e] = nb_bench_median(tmp, rounds) * 1e3;
                }
                const char *sums = exact ? "exact" : "batch", *pass = bw ? "bwd" : "fwd";
                if (fmt == FMT_TABLE) {
                    char i2[32], i4[32];
                    snprintf(i2, sizeof i2, "[%.2f, %.2f]", lo[1], hi[1]);
                    snprintf(i4, sizeof i4, "[%.2f, %.2f]", lo[2], hi[2]);
                    fprintf(tab, "%-22s %-5s %-7s %9.2f %9.2f %9.2f %8.2f %-15s %8.2f %-15s\n",
                            name, sums, pass, med[0], med[1], med[2], rmed[1], i2, rmed[2], i4);
                } else if (fmt == FMT_CSV) {
                    fprintf(tab,
                            "%d>%d %dx%d p%d,%d,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,"
                            "%.4f,%d,%d,",
                            L->C, L->OC, L->H, L->W, L->pad, L->count, sums, pass, med[0], med[1],
                            med[2], rmed[1], lo[1], hi[1], rmed[2], lo[2], hi[2], N, T);
                    nb_csv_field(tab, settings);
                    nb_bench_csv_stamp(tab, &stamp);
                    fputc('\n', tab);
                } else {
                    fprintf(tab,
                            "%s{\"layer\": \"%d>%d %dx%d p%d\", \"count\": %d, \"sums\": \"%s\", "
                            "\"pass\": \"%s\", \"ms\": {\"im2col\": %.3f, \"wino2\": %.3f, "
                            "\"wino4\": %.3f}, \"im2col_over_wino2\": [%.4f, %.4f, %.4f], "
                            "\"im2col_over_wino4\": [%.4f, %.4f, %.4f]}",
                            firstrow ? "" : ", ", L->C, L->OC, L->H, L->W, L->pad, L->count, sums,
                            pass, med[0], med[1], med[2], rmed[1], lo[1], hi[1], rmed[2], lo[2],
                            hi[2]);
                    firstrow = 0;
                }
                fflush(tab);
            }
        free(b.x), free(b.w), free(b.y), free(b.dy), free(b.dx), free(b.dw), free(b.scratch);
        free(b.dwd), free(b.dpart);
    }
    if (getloadavg(load1, 3) < 0) load1[0] = -1;
    if (fmt == FMT_TABLE)
        fprintf(tab,
                "# load at the end %.2f (1-minute load average; 2 busy threads of other "
                "processes make the ratios indicative only)\n",
                load1[0]);
    else if (fmt == FMT_JSON)
        fprintf(tab, "], \"load_end\": %.2f}\n", load1[0]);
    return NB_EXIT_OK;
}
