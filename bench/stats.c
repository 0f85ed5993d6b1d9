/* bench/stats.c — the settings line, thread count and statistics every benchmark shares:
 * medians, mean and deviation, bootstrap intervals of a ratio. (Moved from cmd/cmd_bench.c.) */
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
#include <time.h>
#include <unistd.h>

#include "nn/cuda/nbcuda.h"
#include "nn/nn.h"
#include "results/provenance.h"
#include "run/mpi.h"
#include "tasks/task.h"
#include "util/json.h"

static void say_v(const nb_bench_io *io, const char *pre, const char *fmt, va_list ap,
                  const char *post) {
    if (!io || !io->say) return;
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof text, "%s", pre);
    if (n < sizeof text) vsnprintf(text + n, sizeof text - n, fmt, ap);
    n = strlen(text);
    if (n < sizeof text) snprintf(text + n, sizeof text - n, "%s", post);
    io->say(io->ctx, text);
}

void nb_bench_say(const nb_bench_io *io, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(io, "", fmt, ap, "");
    va_end(ap);
}

int nb_bench_fail(const nb_bench_io *io, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(io, "error: ", fmt, ap, "\n");
    va_end(ap);
    return NB_EXIT_FAIL;
}

int nb_bench_report(const nb_bench_io *io, const nb_err *e) {
    nb_bench_say(io, "error: %s\n", e->msg[0] ? e->msg : "unknown failure");
    if (e->hint[0]) nb_bench_say(io, "hint: %s\n", e->hint);
    return NB_EXIT_FAIL;
}

void nb_bench_set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* The settings every timing depends on, in one line. */
void nb_bench_settings_line(char *buf, size_t n) {
    const char *wait = getenv("OMP_WAIT_POLICY");
    const char *par[] = {"sequential", "pthreads", "openmp"};
    int p = openblas_get_parallel();
    snprintf(buf, n, "threads=%d OMP_WAIT_POLICY=%s blas=\"%s\" core=%s blas_parallel=%s",
             omp_get_max_threads(), wait && *wait ? wait : "(unset)", openblas_get_config(),
             openblas_get_corename(), p >= 0 && p <= 2 ? par[p] : "?");
}

void nb_bench_stamp(nb_bench_stamp_t *st) {
    char cpu[200];
    nb_cpu_model(cpu, sizeof cpu);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0)
        snprintf(st->machine, sizeof st->machine, "%s, %ld cores", cpu[0] ? cpu : "unknown CPU",
                 cores);
    else
        snprintf(st->machine, sizeof st->machine, "%s", cpu[0] ? cpu : "unknown CPU");
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm) ||
        strftime(st->date, sizeof st->date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(st->date, sizeof st->date, "unknown");
}

void nb_bench_csv_stamp(FILE *f, const nb_bench_stamp_t *st) {
    fputc(',', f);
    nb_csv_field(f, st->machine);
    fputc(',', f);
    nb_csv_field(f, st->date);
}

int nb_bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double nb_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, nb_bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void nb_bench_mean_std(const double *v, int n, double *mean, double *sd) {
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
void nb_bench_ratio_interval(const double *a, int na, const double *b, int nb, double *scratch,
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
        r[k] = nb_bench_median(scratch, na) / nb_bench_median(scratch + na, nb);
    }
    qsort(r, NBOOT, sizeof *r, nb_bench_cmp_double);
    *lo = r[(int)(0.025 * NBOOT)];
    *hi = r[(int)(0.975 * NBOOT) - 1];
    free(r);
}
