/* plots/plot.c — figures through gnuplot (plots/plot.h). */
#include "plots/plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/nn.h"
#include "util/file.h"
#include "util/json.h"
#include "util/outpath.h"
#include "util/text.h"

/* ---- the numbers ------------------------------------------------------------------------ */

int nb_plot_finite_prefix(const double *y, int n) {
    int k = 0;
    while (k < n && isfinite(y[k]))
        k++;
    return k;
}

void nb_plot_ema(const double *y, int n, double w, double *out) {
    double m = 0, wt = 1; /* wt = w^t */
    for (int t = 0; t < n; t++) {
        m = w * m + (1 - w) * y[t];
        wt *= w;
        out[t] = m / (1 - wt);
    }
}

/* y of the series (x, y, n) linearly interpolated at g into *v; 0 when g is outside it. */
static int interp(const double *x, const double *y, int n, double g, double *v) {
    if (n <= 0 || !(g >= x[0]) || !(g <= x[n - 1])) return 0;
    int lo = 0, hi = n - 1; /* largest j with x[j] <= g lies in [lo, hi] */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (x[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (x[lo] == g || lo == n - 1) {
        *v = y[lo];
    } else {
        double t = (g - x[lo]) / (x[lo + 1] - x[lo]);
        *v = y[lo] + t * (y[lo + 1] - y[lo]);
    }
    return 1;
}

void nb_plot_align(int m, const double *const *x, const double *const *y, const int *n,
                   const double *grid, int ng, double *mean, double *sd, double *vmin, double *vmax,
                   int *count) {
    for (int k = 0; k < ng; k++) {
        /* Welford: one pass, no storage per point */
        int c = 0;
        double mu = 0, m2 = 0, lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < m; i++) {
            double v;
            if (!interp(x[i], y[i], n[i], grid[k], &v)) continue;
            c++;
            double d = v - mu;
            mu += d / c;
            m2 += d * (v - mu);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        count[k] = c;
        mean[k] = c ? mu : NAN;
        sd[k] = c == 0 ? NAN : c == 1 ? 0 : sqrt(m2 / (c - 1));
        if (vmin) vmin[k] = c ? lo : NAN;
        if (vmax) vmax[k] = c ? hi : NAN;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int nb_plot_union_grid(int m, const double *const *x, const int *n, double *grid) {
    int t = 0;
    for (int i = 0; i < m; i++)
        for (int k = 0; k < n[i]; k++)
            grid[t++] = x[i][k];
    if (t == 0) return 0;
    qsort(grid, (size_t)t, sizeof *grid, cmp_double);
    int u = 1;
    for (int k = 1; k < t; k++)
        if (grid[k] != grid[u - 1]) grid[u++] = grid[k];
    return u;
}

int nb_plot_downsample(int n, int max, int *idx) {
    if (n <= max) {
        for (int i = 0; i < n; i++)
            idx[i] = i;
        return n < 0 ? 0 : n;
    }
    if (max < 2) max = 2;
    for (int k = 0; k < max; k++)
        idx[k] = (int)llround((double)k * (n - 1) / (max - 1));
    return max;
}

/* ---- which runs ------------------------------------------------------------------------- */

/* The norms in the norm table's order with its colours (nn/norms/), then the labels a task
 * records runs under: batch-everywhere, the reader's --bn-everywhere runs, in a lighter shade of
 * batch's green. */
static const struct {
    const char *norm, *color;
} label_colors[] = {
    {"batch-everywhere", "#98df8a"},
};
enum { NLABELS = sizeof label_colors / sizeof label_colors[0] };

static int norm_rank(const char *norm) {
    nb_norm_kind k;
    if (nb_norm_from_name(norm, &k) == 0) return (int)k;
    for (int i = 0; i < NLABELS; i++)
        if (strcmp(norm, label_colors[i].norm) == 0) return nb_norm_count() + i;
    return nb_norm_count() + NLABELS;
}

const char *nb_plot_norm_color(const char *norm) {
    static const char *const others[] = {"#9467bd", "#e377c2", "#17becf", "#bcbd22"};
    int r = norm_rank(norm);
    const nb_norm_def *nd = r < nb_norm_count() ? nb_norm_get((nb_norm_kind)r) : NULL;
    if (nd && nd->color) return nd->color;
    if (!nd && r < nb_norm_count() + NLABELS) return label_colors[r - nb_norm_count()].color;
    unsigned h = 0; /* a stable color for an unknown name */
    for (const char *p = norm; *p; p++)
        h = h * 31 + (unsigned char)*p;
    return others[h % 4];
}

static const char *tag_value(const nb_run_detail *d, const char *key) {
    for (int i = 0; i < d->ntags; i++)
        if (strcmp(d->tags[i].key, key) == 0) return d->tags[i].value;
    return NULL;
}

static int str_eq_null(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int run_cmp(const void *a, const void *b) {
    const nb_run_detail *x = *(nb_run_detail *const *)a, *y = *(nb_run_detail *const *)b;
    int c = norm_rank(x->info.norm) - norm_rank(y->info.norm);
    if (!c) c = strcmp(x->info.norm, y->info.norm);
    if (!c) c = (x->info.seed > y->info.seed) - (x->info.seed < y->info.seed);
    if (!c) c = (x->info.id > y->info.id) - (x->info.id < y->info.id);
    return c;
}

static int fig_cmp(const void *a, const void *b) {
    const nb_plot_figure *x = a, *y = b;
    int c = strcmp(x->task, y->task);
    if (!c) c = strcmp(x->dataset, y->dataset);
    if (!c) c = strcmp(x->variant ? x->variant : "", y->variant ? y->variant : "");
    return c;
}

static int status_wanted(const nb_plot_filter *f, const char *status) {
    if (!f->statuses) return strcmp(status, "finished") == 0;
    for (const char *const *s = f->statuses; *s; s++)
        if (strcmp(*s, status) == 0) return 1;
    return 0;
}

static int seed_wanted(const nb_plot_filter *f, int64_t seed) {
    if (!f->seeds) return 1;
    for (int i = 0; i < f->nseeds; i++)
        if (f->seeds[i] == seed) return 1;
    return 0;
}

int nb_plot_load(nb_store *s, const nb_plot_filter *f, nb_plot_set **out, nb_err *err) {
    *out = NULL;
    nb_run_info *runs = NULL;
    int nrun = 0;
    if (nb_runs_list(s, &runs, &nrun, err)) return -1;
    nb_plot_set *set = calloc(1, sizeof *set);
    if (!set) goto oom;
    for (int i = 0; i < nrun; i++) {
        const nb_run_info *r = &runs[i];
        if ((f->task && strcmp(r->task, f->task) != 0) ||
            (f->dataset && strcmp(r->dataset, f->dataset) != 0) || !status_wanted(f, r->status) ||
            !seed_wanted(f, r->seed))
            continue;
        nb_run_detail *d = NULL;
        if (nb_run_get(s, r->id, &d, err)) goto fail;
        char vbuf[512];
        const char *variant =
            nb_group_variant(tag_value(d, "model"), tag_value(d, "variant"), vbuf, sizeof vbuf);
        if (f->variant && (*f->variant ? !str_eq_null(variant, f->variant) : variant != NULL)) {
            nb_run_detail_free(d);
            continue;
        }
        int fi = -1;
        for (int k = 0; k < set->n && fi < 0; k++)
            if (strcmp(set->figs[k].task, d->info.task) == 0 &&
                strcmp(set->figs[k].dataset, d->info.dataset) == 0 &&
                str_eq_null(set->figs[k].variant, variant))
                fi = k;
        if (fi < 0) {
            nb_plot_figure *g = realloc(set->figs, (size_t)(set->n + 1) * sizeof *g);
            if (!g) {
                nb_run_detail_free(d);
                goto oom;
            }
            set->figs = g;
            fi = set->n++;
            nb_plot_figure *nf = &set->figs[fi];
            memset(nf, 0, sizeof *nf);
            nf->task = strdup(d->info.task);
            nf->dataset = strdup(d->info.dataset);
            nf->variant = variant ? strdup(variant) : NULL;
            if (!nf->task || !nf->dataset || (variant && !nf->variant)) {
                nb_run_detail_free(d);
                goto oom;
            }
        }
        nb_plot_figure *fig = &set->figs[fi];
        nb_run_detail **rr = realloc(fig->runs, (size_t)(fig->nruns + 1) * sizeof *rr);
        if (!rr) {
            nb_run_detail_free(d);
            goto oom;
        }
        fig->runs = rr;
        fig->runs[fig->nruns++] = d;
    }
    for (int k = 0; k < set->n; k++)
        qsort(set->figs[k].runs, (size_t)set->figs[k].nruns, sizeof(nb_run_detail *), run_cmp);
    if (set->n > 1) qsort(set->figs, (size_t)set->n, sizeof *set->figs, fig_cmp);
    nb_runs_free(runs, nrun);
    *out = set;
    return 0;
oom:
    nb_errf(err, "out of memory");
fail:
    nb_runs_free(runs, nrun);
    nb_plot_set_free(set);
    return -1;
}

void nb_plot_set_free(nb_plot_set *p) {
    if (!p) return;
    for (int k = 0; k < p->n; k++) {
        nb_plot_figure *f = &p->figs[k];
        free(f->task);
        free(f->dataset);
        free(f->variant);
        for (int i = 0; i < f->nruns; i++)
            nb_run_detail_free(f->runs[i]);
        free(f->runs);
    }
    free(p->figs);
    free(p);
}

static const nb_series *find_series(const nb_run_detail *d, const char *name) {
    for (int i = 0; i < d->nseries; i++)
        if (strcmp(d->series[i].name, name) == 0) return &d->series[i];
    return NULL;
}

int nb_plot_has_metric(const nb_plot_figure *f, const char *name) {
    for (int i = 0; i < f->nruns; i++)
        if (find_series(f->runs[i], name)) return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *nb_plot_metric_names(const nb_plot_figure *f, char *buf, size_t size) {
    if (size) buf[0] = '\0';
    int total = 0;
    for (int i = 0; i < f->nruns; i++)
        total += f->runs[i]->nseries;
    const char **names = calloc((size_t)total + 1, sizeof *names);
    if (!names) return buf;
    int n = 0;
    for (int i = 0; i < f->nruns; i++)
        for (int j = 0; j < f->runs[i]->nseries; j++) {
            const char *nm = f->runs[i]->series[j].name;
            int seen = 0;
            for (int k = 0; k < n && !seen; k++)
                seen = strcmp(names[k], nm) == 0;
            if (!seen) names[n++] = nm;
        }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    size_t len = 0;
    for (int k = 0; k < n && len < size; k++) {
        int w = snprintf(buf + len, size - len, "%s%s", k ? " " : "", names[k]);
        if (w < 0) break;
        len += (size_t)w;
    }
    free(names);
    return buf;
}

/* ---- files ------------------------------------------------------------------------------ */

/* Writes len bytes to path through a temporary file in the same directory, fsync'ed and
 * renamed: a reader sees the old file or the new one, never half of one; only a regular file or
 * a new name is replaced (util/outpath.h). */
static int write_atomic(const char *path, const char *data, size_t len, nb_err *err) {
    return nb_out_write_file(path, "--out", data, len, err);
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Copies name with every byte outside [A-Za-z0-9._-] replaced by '_' (file-name safe). */
static void safe_name(char *out, size_t size, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        unsigned char c = (unsigned char)name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        out[i] = ok ? (char)c : '_';
    }
    if (size) out[i] = '\0';
}

void nb_plot_gp_str(nb_buf *b, const char *s) {
    nb_buf e = {0};
    nb_buf_escaped(&e, s);
    nb_buf_puts(b, "'");
    for (const char *p = e.p ? e.p : ""; *p; p++) {
        if (*p == '\'')
            nb_buf_puts(b, "'.\"'\".'"); /* close, a quote in double quotes, reopen */
        else
            nb_buf_printf(b, "%c", *p);
    }
    nb_buf_puts(b, "'");
    if (e.oom) b->oom = 1;
    nb_buf_free(&e);
}

static void gp_str(nb_buf *b, const char *s) {
    nb_plot_gp_str(b, s);
}

int nb_plot_have_gnuplot(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        if ((size_t)snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? p : ".", prog) <
                sizeof full &&
            access(full, X_OK) == 0)
            return 1;
        if (!p[n]) return 0;
        p += n + 1;
    }
}

/* ---- one line of one panel -------------------------------------------------------------- */

enum { AX_STEP, AX_TIME };

/* The lines of one norm in one panel, as written to its data file. */
typedef struct line_info {
    const char *norm;
    int runs;                           /* runs with at least one finite point */
    int diverged, interrupted, crashed; /* of those */
    int points;                         /* rows written */
    int nseeds;                         /* distinct seeds of those runs, listed in seeds */
    char seeds[48];                     /* "1,2" (runs come sorted by seed within a norm) */
    char file[512];                     /* relative to the script's directory */
    double ymin_pos, ymin;              /* smallest band bottom / raw mean written */
    double ymax;                        /* largest band top written */
} line_info;

/* The per-step training records (tasks/train.h: every log_every steps), drawn smoothed. */
static int is_smoothed(const char *metric) {
    return strncmp(metric, "train_", 6) == 0 || strcmp(metric, "grad_norm") == 0 ||
           strcmp(metric, "clip_scale") == 0;
}

/* Builds and writes the data file of one norm (runs [a, b) of the figure) for metric on axis.
 * The file gets: x, smoothed mean, smoothed mean -/+ sd, raw mean, runs covering. */
static int write_line(const nb_plot_figure *f, int a, int b, const char *metric, int axis,
                      const nb_plot_opts *o, const char *dir, const char *datadir, line_info *li,
                      nb_err *err) {
    int m = b - a, rc = -1;
    double **xs = calloc((size_t)m, sizeof *xs), **ys = calloc((size_t)m, sizeof *ys);
    double **ss = calloc((size_t)m, sizeof *ss);
    int *ns = calloc((size_t)m, sizeof *ns);
    double *grid = NULL, *mean = NULL, *sd = NULL, *rmean = NULL, *rsd = NULL;
    double *vmin = NULL, *vmax = NULL;
    int *cnt = NULL, *rcnt = NULL, *idx = NULL;
    nb_buf out = {0};
    memset(li, 0, sizeof *li);
    li->norm = f->runs[a]->info.norm;
    li->ymin_pos = INFINITY;
    li->ymin = INFINITY;
    li->ymax = -INFINITY;
    if (!xs || !ys || !ss || !ns) goto oom;
    int used = 0, total = 0, maxn = 0, nfin = 0;
    int64_t last_seed = 0;
    double lo = INFINITY, hi = -INFINITY;   /* the union of the runs' x ranges */
    double flo = -INFINITY, fhi = INFINITY; /* what every finished run covers */
    for (int i = a; i < b; i++) {
        const nb_run_detail *d = f->runs[i];
        const nb_series *s = find_series(d, metric);
        if (!s) continue;
        int n = nb_plot_finite_prefix(s->value, s->n);
        if (n == 0) continue;
        double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        double *sm = malloc((size_t)n * sizeof *sm);
        xs[used] = x;
        ys[used] = y;
        ss[used] = sm;
        if (!x || !y || !sm) goto oom;
        /* smooth the raw series first, then keep the points whose x increases (a repeated
         * step keeps its last value) */
        if (is_smoothed(metric))
            nb_plot_ema(s->value, n, o->smooth, sm);
        else
            memcpy(sm, s->value, (size_t)n * sizeof *sm);
        int k = 0;
        for (int j = 0; j < n; j++) {
            double xv = axis == AX_STEP ? (double)s->step[j] : s->wall[j];
            if (!isfinite(xv) || (k > 0 && xv < x[k - 1])) continue;
            if (k > 0 && xv == x[k - 1]) k--;
            x[k] = xv;
            y[k] = s->value[j];
            sm[k] = sm[j];
            k++;
        }
        if (k == 0) { /* no usable point: drop this run's arrays */
            free(x);
            free(y);
            free(sm);
            xs[used] = ys[used] = ss[used] = NULL;
            continue;
        }
        ns[used++] = k;
        total += k;
        if (k > maxn) maxn = k;
        if (x[0] < lo) lo = x[0];
        if (x[k - 1] > hi) hi = x[k - 1];
        li->runs++;
        if (li->nseeds == 0 || d->info.seed != last_seed) {
            /* runs [a, b) are sorted by seed: a new value is a new seed */
            last_seed = d->info.seed;
            size_t len = strlen(li->seeds);
            char one[32];
            snprintf(one, sizeof one, "%s%lld", li->nseeds ? "," : "", (long long)d->info.seed);
            if (len + strlen(one) + 4 < sizeof li->seeds)
                memcpy(li->seeds + len, one, strlen(one) + 1);
            else if (!strstr(li->seeds, "..."))
                memcpy(li->seeds + len, ",...", 5);
            li->nseeds++;
        }
        const char *st = d->info.status;
        if (strcmp(st, "finished") == 0) {
            nfin++;
            if (x[0] > flo) flo = x[0];
            if (x[k - 1] < fhi) fhi = x[k - 1];
        }
        li->diverged += strcmp(st, "diverged") == 0;
        li->interrupted += strcmp(st, "interrupted") == 0;
        li->crashed += strcmp(st, "crashed") == 0;
    }
    if (used == 0) {
        rc = 0; /* nothing to draw for this norm */
        goto done;
    }
    /* the grid */
    int ng;
    if (axis == AX_STEP) {
        grid = malloc((size_t)total * sizeof *grid);
        if (!grid) goto oom;
        ng = nb_plot_union_grid(used, (const double *const *)xs, ns, grid);
    } else {
        /* Seconds: the span every finished run of the norm covers, so that the mean does not
         * jump where a slower run's tail alone remains (runs that stopped early drop out where
         * they stopped); the union when there is no such span. */
        if (nfin > 0 && flo < fhi) {
            lo = flo;
            hi = fhi;
        }
        ng = maxn > 100 ? maxn : 100;
        if (ng > o->max_points) ng = o->max_points;
        if (hi <= lo) ng = 1;
        grid = malloc((size_t)ng * sizeof *grid);
        if (!grid) goto oom;
        for (int k = 0; k < ng; k++)
            grid[k] = ng == 1 ? lo : k == ng - 1 ? hi : lo + (hi - lo) * k / (ng - 1);
    }
    idx = malloc((size_t)ng * sizeof *idx);
    mean = malloc((size_t)ng * sizeof *mean);
    sd = malloc((size_t)ng * sizeof *sd);
    rmean = malloc((size_t)ng * sizeof *rmean);
    rsd = malloc((size_t)ng * sizeof *rsd);
    vmin = malloc((size_t)ng * sizeof *vmin);
    vmax = malloc((size_t)ng * sizeof *vmax);
    cnt = malloc((size_t)ng * sizeof *cnt);
    rcnt = malloc((size_t)ng * sizeof *rcnt);
    if (!idx || !mean || !sd || !rmean || !rsd || !vmin || !vmax || !cnt || !rcnt) goto oom;
    int ni = nb_plot_downsample(ng, o->max_points, idx);
    for (int k = 0; k < ni; k++)
        grid[k] = grid[idx[k]];
    ng = ni;
    nb_plot_align(used, (const double *const *)xs, (const double *const *)ss, ns, grid, ng, mean,
                  sd, vmin, vmax, cnt);
    nb_plot_align(used, (const double *const *)xs, (const double *const *)ys, ns, grid, ng, rmean,
                  rsd, NULL, NULL, rcnt);

    char mname[128], nname[128];
    safe_name(mname, sizeof mname, metric);
    safe_name(nname, sizeof nname, li->norm);
    snprintf(li->file, sizeof li->file, "%s/%s-%s-%s.dat", datadir, mname,
             axis == AX_STEP ? "step" : "time", nname);
    /* the stored strings escaped: a newline in one would start a line of data */
    nb_buf_puts(&out, "# normbench plot: ");
    nb_buf_escaped(&out, f->task);
    nb_buf_puts(&out, " / ");
    nb_buf_escaped(&out, f->dataset);
    nb_buf_puts(&out, ", norm ");
    nb_buf_escaped(&out, li->norm);
    nb_buf_puts(&out, ", ");
    nb_buf_escaped(&out, metric);
    nb_buf_printf(&out, " against %s\n", axis == AX_STEP ? "training step" : "seconds");
    nb_buf_printf(&out, "# runs:");
    for (int i = a; i < b; i++)
        if (find_series(f->runs[i], metric)) {
            nb_buf_printf(&out, " %lld(seed %lld, ", (long long)f->runs[i]->info.id,
                          (long long)f->runs[i]->info.seed);
            nb_buf_escaped(&out, f->runs[i]->info.status);
            nb_buf_puts(&out, ")");
        }
    nb_buf_printf(&out, "\n# smoothing: %s\n",
                  is_smoothed(metric) ? "debiased EMA, see the weight in the script" : "none");
    nb_buf_puts(&out, "# x  smoothed_mean  smoothed_mean-sd  smoothed_mean+sd  raw_mean  runs\n");
    for (int k = 0; k < ng; k++) {
        if (cnt[k] == 0) continue;
        /* the band: mean -/+ sd, but never beyond the runs' own values (with few runs and
         * outcomes far apart, as when some seeds learn and some do not, mean - sd can fall
         * below every run, e.g. an error rate below 0) */
        double l = fmax(mean[k] - sd[k], vmin[k]), h = fmin(mean[k] + sd[k], vmax[k]);
        nb_buf_printf(&out, "%.10g %.10g %.10g %.10g %.10g %d\n", grid[k], mean[k], l, h, rmean[k],
                      cnt[k]);
        li->points++;
        if (l < li->ymin_pos) li->ymin_pos = l;
        if (rmean[k] < li->ymin) li->ymin = rmean[k];
        if (mean[k] < li->ymin) li->ymin = mean[k];
        if (h > li->ymax) li->ymax = h;
        if (rmean[k] > li->ymax) li->ymax = rmean[k];
    }
    if (out.oom) goto oom;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, li->file) >= sizeof path) {
        nb_errf(err, "path '%s/%s' is too long", dir, li->file);
        goto done;
    }
    rc = write_atomic(path, out.p ? out.p : "", out.len, err);
    goto done;
oom:
    nb_errf(err, "out of memory");
    rc = -1;
done:
    for (int i = 0; i < m; i++) {
        if (xs) free(xs[i]);
        if (ys) free(ys[i]);
        if (ss) free(ss[i]);
    }
    free(xs);
    free(ys);
    free(ss);
    free(ns);
    free(grid);
    free(idx);
    free(mean);
    free(sd);
    free(rmean);
    free(rsd);
    free(vmin);
    free(vmax);
    free(cnt);
    free(rcnt);
    nb_buf_free(&out);
    return rc;
}

/* ---- the script ------------------------------------------------------------------------- */

/* A human label for a metric, with its unit. */
static const char *metric_label(const char *m, char *buf, size_t size) {
    static const struct {
        const char *name, *label;
    } known[] = {
        {"train_loss", "training loss (cross-entropy, nats)"},
        {"val_error", "validation error (fraction)"},
        {"test_error", "test error (fraction)"},
        {"val_nll", "validation loss (NLL, nats)"},
        {"test_nll", "test loss (NLL, nats)"},
        {"ms_per_step", "training step time (ms)"},
        {"epoch_seconds", "training time per epoch (s)"},
        {"grad_norm", "gradient norm before clipping (global L2)"},
        {"clip_scale", "factor applied by clipping (1: none)"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i].name) == 0) return known[i].label;
    snprintf(buf, size, "%s", m);
    return buf;
}

static const char *metric_title(const char *m, char *buf, size_t size) {
    if (strcmp(m, "train_loss") == 0) return "training loss";
    if (strcmp(m, "val_error") == 0) return "validation error";
    if (strcmp(m, "test_error") == 0) return "test error";
    if (strcmp(m, "grad_norm") == 0) return "gradient norm";
    snprintf(buf, size, "%s", m);
    return buf;
}

static int log_scale_for(const char *m) {
    size_t n = strlen(m);
    return (n >= 4 && strcmp(m + n - 4, "loss") == 0) ||
           (n >= 3 && strcmp(m + n - 3, "nll") == 0) || strcmp(m, "grad_norm") == 0;
}

/* Appends the plot command of one panel. lines: the norms with data. */
static void panel(nb_buf *g, const nb_plot_opts *o, const char *metric, int axis,
                  const line_info *lines, int nl, int first, int logy) {
    char b1[128], b2[128];
    /* the metric's name is in the title (quoted), not in this comment */
    nb_buf_printf(g, "\n# ---- a panel against %s\nset title ", axis == AX_STEP ? "steps" : "time");
    char title[300];
    snprintf(title, sizeof title, "%s against %s", metric_title(metric, b1, sizeof b1),
             axis == AX_STEP ? "training steps" : "wall-clock time");
    gp_str(g, title);
    nb_buf_puts(g, "\nset xlabel ");
    if (o->dumb) /* text: short labels, none rotated (dumb draws it across the plot) */
        gp_str(g, axis == AX_STEP ? "step" : "seconds since the run started");
    else
        gp_str(g, axis == AX_STEP
                      ? "training step"
                      : "wall-clock time since the run started (s, evaluation included)");
    char yl[300];
    snprintf(yl, sizeof yl, "%s%s", metric_label(metric, b2, sizeof b2), logy ? ", log scale" : "");
    nb_buf_puts(g, "\nset ylabel ");
    gp_str(g, o->dumb ? "" : yl);
    nb_buf_printf(g, "\n%s\n", logy ? "set logscale y" : "unset logscale y");
    if (first)
        nb_buf_puts(g, o->dumb ? "set key top right\n"
                               : "set key top right box opaque samplen 2 spacing 1.1\n");
    else
        nb_buf_puts(g, "unset key\n");
    int any = 0;
    for (int i = 0; i < nl; i++)
        any |= lines[i].points > 0;
    if (!any) {
        nb_buf_puts(g, "set label 1 'no data' at graph 0.5, 0.5 center\n"
                       "plot [0:1] [0:1] NaN notitle\nunset label 1\n");
        return;
    }
    const char *sep = "plot ";
    int sparse_on_steps = !is_smoothed(metric) && axis == AX_STEP;
    /* bands first, then the faint raw means, then the smoothed means on top */
    for (int pass = o->dumb ? 2 : 0; pass < 3; pass++)
        for (int i = 0; i < nl; i++) {
            const line_info *li = &lines[i];
            if (li->points == 0) continue;
            if (pass == 1 && !is_smoothed(metric)) continue;
            const char *c = nb_plot_norm_color(li->norm);
            nb_buf_printf(g, "%s", sep);
            sep = ", \\\n     ";
            gp_str(g, li->file);
            if (pass == 0) {
                nb_buf_printf(g,
                              " using 1:3:4 with filledcurves fc rgb '%s' "
                              "fs transparent solid 0.18 noborder notitle",
                              c);
            } else if (pass == 1) {
                nb_buf_printf(g, " using 1:5 with lines lc rgb '#a0%s' lw 1 notitle", c + 1);
            } else {
                char t[200];
                int w = snprintf(t, sizeof t, "%s (%d run%s, seed%s %s", li->norm, li->runs,
                                 li->runs == 1 ? "" : "s", li->nseeds == 1 ? "" : "s", li->seeds);
                if (li->diverged && w < (int)sizeof t)
                    w += snprintf(t + w, sizeof t - (size_t)w, ", %d diverged", li->diverged);
                if (li->interrupted && w < (int)sizeof t)
                    w += snprintf(t + w, sizeof t - (size_t)w, ", %d interrupted", li->interrupted);
                if (li->crashed && w < (int)sizeof t)
                    w += snprintf(t + w, sizeof t - (size_t)w, ", %d crashed", li->crashed);
                if (w < (int)sizeof t) snprintf(t + w, sizeof t - (size_t)w, ")");
                if (o->dumb)
                    nb_buf_printf(g, " using 1:2 with lines lt %d title ", norm_rank(li->norm) + 1);
                else
                    nb_buf_printf(g, " using 1:2 with %s lc rgb '%s' lw 2.5%s title ",
                                  sparse_on_steps ? "linespoints" : "lines", c,
                                  sparse_on_steps ? " pt 7 ps 0.7" : "");
                gp_str(g, t);
            }
        }
    nb_buf_puts(g, "\n");
}

/* A mkstemp/mkdtemp template in $TMPDIR (else /tmp). */
static void temp_name(char *buf, size_t size, const char *prefix) {
    const char *t = getenv("TMPDIR");
    if (!t || !*t || strlen(t) > size - 64) t = "/tmp";
    snprintf(buf, size, "%s/%s.XXXXXX", t, prefix);
}

/* Runs prog with argv in directory dir, stdin and stdout from/to /dev/null, stderr to a
 * temporary file whose last line goes into the error message on failure. */
static int run_gnuplot(const nb_plot_opts *o, const char *dir, const char *script,
                       const char *const *argv, nb_err *err) {
    char logpath[4096];
    temp_name(logpath, sizeof logpath, "normbench-gnuplot");
    int logfd = mkstemp(logpath);
    if (logfd < 0) return nb_errf(err, "cannot create a temporary file: %s", strerror(errno));
    unlink(logpath);
    int pfd[2];
    if (pipe(pfd) != 0) {
        close(logfd);
        return nb_errf(err, "cannot run '%s': %s", o->gnuplot, strerror(errno));
    }
    fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        close(logfd);
        return nb_errf(err, "cannot run '%s': %s", o->gnuplot, strerror(e));
    }
    if (pid == 0) {
        int e = 0;
        int devnull = open("/dev/null", O_RDWR);
        if (chdir(dir) != 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
            dup2(logfd, 2) < 0) {
            e = errno;
        } else {
            execvp(o->gnuplot, (char *const *)argv);
            e = errno;
        }
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(pfd[1]);
    int e = 0;
    ssize_t r;
    while ((r = read(pfd[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    int rc = 0;
    if (r == (ssize_t)sizeof e) {
        if (e == ENOENT) {
            nb_errf(err, "cannot run '%s': it is not installed (not found in PATH)", o->gnuplot);
            nb_hintf(err,
                     "install it: sudo apt-get install gnuplot-nox (the script and data are "
                     "written: '%s/%s')",
                     dir, script);
        } else {
            nb_errf(err, "cannot run '%s' in '%s': %s", o->gnuplot, dir, strerror(e));
        }
        rc = -1;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        /* the last non-empty line gnuplot wrote */
        char buf[8192], last[512] = "";
        off_t size = lseek(logfd, 0, SEEK_END);
        off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
        ssize_t got = pread(logfd, buf, sizeof buf - 1, from);
        if (got > 0) {
            buf[got] = '\0';
            char *save = NULL;
            for (char *ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save))
                if (strspn(ln, " \t^") < strlen(ln)) snprintf(last, sizeof last, "%s", ln);
        }
        if (WIFEXITED(st))
            nb_errf(err, "gnuplot failed on '%s/%s' (exit status %d)%s%s", dir, script,
                    WEXITSTATUS(st), last[0] ? ": " : "", last);
        else
            nb_errf(err, "gnuplot was killed by signal %d on '%s/%s'", WTERMSIG(st), dir, script);
        nb_hintf(err, "the script and its data are kept: run 'gnuplot %s' in '%s' to see", script,
                 dir);
        rc = -1;
    }
    close(logfd);
    return rc;
}

static int read_text(const char *path, char **text, nb_err *err) {
    if (nb_read_file(path, (size_t)64 << 20, 0, text, NULL, err) == 0) return 0;
    return nb_errf(err, "cannot read gnuplot's output '%s': %s", path, strerror(errno));
}

int nb_plot_check_outputs(const nb_plot_opts *o, nb_err *err) {
    if (o->dumb) return 0;
    const char *files[2] = {o->png, o->svg};
    for (int i = 0; i < 2; i++)
        if (files[i] && nb_out_check(files[i], "--out", NULL, err)) return -1;
    size_t n = strlen(o->base) + 8;
    char *p = malloc(n);
    if (!p) return nb_errf(err, "out of memory");
    snprintf(p, n, "%s.gp", o->base);
    int rc = nb_out_check(p, "--out", NULL, err);
    snprintf(p, n, "%s-data", o->base);
    struct stat st;
    if (rc == 0 && nb_out_name_fits(p, err)) rc = nb_hintf(err, "give --out a shorter name");
    if (rc == 0 && lstat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
        struct stat t;
        if (!S_ISLNK(st.st_mode) || stat(p, &t) != 0 || !S_ISDIR(t.st_mode)) {
            char shown[300];
            nb_errf(err, "'%s' (where the figure's data go) exists and is not a directory",
                    nb_escape(shown, sizeof shown, p));
            rc = nb_hintf(err, "move it away or choose another --out");
        }
    }
    free(p);
    return rc;
}

int nb_plot_render(const nb_plot_figure *f, const nb_plot_opts *o, char **text, nb_err *err) {
    *text = NULL;
    int rc = -1, naxes = (o->x_step ? 1 : 0) + (o->x_time ? 1 : 0);
    char tmpdir[4096];
    temp_name(tmpdir, sizeof tmpdir, "normbench-plot");
    char *dir = NULL, *datadir = NULL, *script = NULL;
    char tmp_png[600] = "", tmp_svg[600] = "";
    line_info *lines = NULL;
    nb_buf g = {0};
    int nline_total = o->nmetrics * naxes * f->nruns;
    if (naxes == 0 || o->nmetrics <= 0 || f->nruns == 0) {
        char t[256], d[256];
        return nb_errf(err, "nothing to plot for %s / %s", nb_escape(t, sizeof t, f->task),
                       nb_escape(d, sizeof d, f->dataset));
    }
    /* the file names go into the script (quoted) and its comments: no control characters */
    const char *names[3] = {o->base, o->png, o->svg};
    for (int i = 0; i < 3; i++)
        if (!o->dumb && names[i] && !nb_text_clean(names[i])) {
            char shown[512];
            nb_errf(err, "invalid file name '%s': control characters are not allowed in it",
                    nb_escape(shown, sizeof shown, names[i]));
            return nb_hintf(err, "choose another --out");
        }
    if (nb_plot_check_outputs(o, err)) return -1;
    if (o->dumb) {
        if (!mkdtemp(tmpdir))
            return nb_errf(err, "cannot create a temporary directory: %s", strerror(errno));
        dir = strdup(tmpdir);
        script = strdup("plot.gp");
        datadir = strdup("plot-data");
    } else {
        dir = nb_path_dir(o->base);
        const char *b = nb_path_base(o->base);
        size_t n = strlen(b);
        script = malloc(n + 4);
        datadir = malloc(n + 6);
        if (script) snprintf(script, n + 4, "%s.gp", b);
        if (datadir) snprintf(datadir, n + 6, "%s-data", b);
    }
    lines = calloc((size_t)nline_total + 1, sizeof *lines);
    if (!dir || !script || !datadir || !lines) {
        nb_errf(err, "out of memory");
        goto done;
    }
    char ddpath[4096];
    snprintf(ddpath, sizeof ddpath, "%s/%s", dir, datadir);
    if (mkdir(ddpath, 0777) != 0 && errno != EEXIST) {
        nb_errf(err, "cannot create directory '%s': %s", ddpath, strerror(errno));
        nb_hintf(err, "check that '%s' exists and is writable", dir);
        goto done;
    }
    struct stat sb;
    if (stat(ddpath, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        nb_errf(err, "'%s' exists and is not a directory", ddpath);
        nb_hintf(err, "move it away or choose another --out");
        goto done;
    }

    /* the data: one file per metric, axis and norm */
    int nl = 0;
    for (int mi = 0; mi < o->nmetrics; mi++)
        for (int ax = 0; ax < 2; ax++) {
            if ((ax == AX_STEP && !o->x_step) || (ax == AX_TIME && !o->x_time)) continue;
            for (int a = 0; a < f->nruns;) {
                int b = a + 1;
                while (b < f->nruns && strcmp(f->runs[b]->info.norm, f->runs[a]->info.norm) == 0)
                    b++;
                if (write_line(f, a, b, o->metrics[mi], ax, o, dir, datadir, &lines[nl], err))
                    goto done;
                nl++;
                a = b;
            }
        }
    int nnorm = nl / (o->nmetrics * naxes);

    /* the script */
    /* Stored strings (task, dataset, variant, norms, metrics) and the command line appear only
     * as quoted gnuplot strings (gp_str), never in a comment or a command: a newline in a
     * comment would end it, and a comment that ends in a backslash swallows the next line. */
    char fig[1024];
    snprintf(fig, sizeof fig, "%s / %s%s%s%s", f->task, f->dataset, f->variant ? " [" : "",
             f->variant ? f->variant : "", f->variant ? "]" : "");
    nb_buf_puts(&g,
                "# normbench plot: the figure, and the command line that made it\nnb_figure = ");
    gp_str(&g, fig);
    if (o->command) {
        nb_buf_puts(&g, "\nnb_command = ");
        gp_str(&g, o->command);
    }
    nb_buf_puts(&g, "\n");
    nb_buf_printf(&g,
                  "# Edit and rerun from this directory: gnuplot %s\n"
                  "# Data: %s/METRIC-step|time-NORM.dat, columns: x (training step, or seconds\n"
                  "# since the run started), smoothed mean over the runs, that mean minus and\n"
                  "# plus one sample standard deviation over the runs (kept within the smallest\n"
                  "# and largest run's value there), the unsmoothed mean, and\n"
                  "# how many runs cover the point. Smoothing (training series only): debiased\n"
                  "# exponential moving average with weight %g, applied to each run's raw series\n"
                  "# before alignment and thinning to at most %d points.\n",
                  script, datadir, o->smooth, o->max_points);
    int rows = o->nmetrics, cols = naxes;
    char title[1024];
    int tw = snprintf(title, sizeof title, "%s / %s%s%s%s — ", f->task, f->dataset,
                      f->variant ? " [" : "", f->variant ? f->variant : "", f->variant ? "]" : "");
    if (tw > 0 && tw < (int)sizeof title)
        snprintf(title + tw, sizeof title - (size_t)tw,
                 o->dumb ? "mean over runs; training loss smoothed (EMA %g)"
                         : "mean over seeds, band ± 1 std within the runs' range; training "
                           "loss: debiased EMA %g (faint: raw)",
                 o->smooth);
    if (o->dumb) {
        nb_buf_printf(&g, "set terminal dumb size %d,%d\nset output 'plot.txt'\n", o->dumb_cols,
                      o->dumb_lines);
        nb_buf_puts(&g, "set termoption noenhanced\n");
    } else {
        int w = cols == 2 ? 1500 : 850, h = 110 + 430 * rows;
        nb_buf_puts(&g, "if (!exists('out_png')) out_png = ");
        gp_str(&g, o->png ? nb_path_base(o->png) : "");
        nb_buf_puts(&g, "\nif (!exists('out_svg')) out_svg = ");
        gp_str(&g, o->svg ? nb_path_base(o->svg) : "");
        nb_buf_printf(&g, "\nformats = '%s%s%s'\n", o->png ? "png" : "",
                      o->png && o->svg ? " " : "", o->svg ? "svg" : "");
        nb_buf_printf(&g,
                      "do for [fmt in formats] {\n"
                      "if (fmt eq 'png') {\n"
                      "    set terminal pngcairo size %d,%d font 'Sans,12'\n"
                      "    set output out_png\n"
                      "} else {\n"
                      "    set terminal svg size %d,%d font 'Sans,12' background '#ffffff'\n"
                      "    set output out_svg\n"
                      "}\n"
                      "set termoption noenhanced\n",
                      w, h, w, h);
    }
    nb_buf_puts(&g, o->dumb ? "unset grid\n" : "set grid\n");
    nb_buf_puts(&g, "set border 3\nset tics nomirror\nset format x '%g'\n"
                    "set xrange [0:*]\nset autoscale xfixmax\n");
    nb_buf_printf(&g, "set multiplot layout %d,%d title ", rows, cols);
    if (o->dumb || tw < 5 || tw >= (int)sizeof title) {
        gp_str(&g, title);
    } else { /* two lines, "task / dataset" above what is drawn, so that it fits one column */
        char head[1024];
        memcpy(head, title, (size_t)tw - 5); /* without the " — " (5 bytes in UTF-8) */
        head[tw - 5] = '\0';
        gp_str(&g, head);
        nb_buf_puts(&g, ".\"\\n\".");
        gp_str(&g, title + tw);
    }
    nb_buf_puts(&g, "\n");
    int li0 = 0;
    for (int mi = 0; mi < o->nmetrics; mi++) {
        /* a log scale for a loss that falls by more than a factor of 10, when every value
         * drawn in its row is positive */
        int logy = 0;
        if (log_scale_for(o->metrics[mi])) {
            double lo = INFINITY, hi = -INFINITY;
            int pos = 1;
            for (int k = li0; k < li0 + naxes * nnorm; k++) {
                if (!lines[k].points) continue;
                pos &= lines[k].ymin_pos > 0 && lines[k].ymin > 0;
                if (lines[k].ymin_pos < lo) lo = lines[k].ymin_pos;
                if (lines[k].ymax > hi) hi = lines[k].ymax;
            }
            logy = pos && hi > 10 * lo;
        }
        for (int ax = 0; ax < 2; ax++) {
            if ((ax == AX_STEP && !o->x_step) || (ax == AX_TIME && !o->x_time)) continue;
            panel(&g, o, o->metrics[mi], ax, &lines[li0], nnorm, mi == 0 && li0 == 0, logy);
            li0 += nnorm;
        }
    }
    nb_buf_puts(&g, "unset multiplot\nset output\n");
    if (!o->dumb) nb_buf_puts(&g, "}\n");
    if (g.oom) {
        nb_errf(err, "out of memory");
        goto done;
    }
    char spath[4096];
    snprintf(spath, sizeof spath, "%s/%s", dir, script);
    if (write_atomic(spath, g.p, g.len, err)) goto done;

    /* gnuplot writes the images to temporary names beside them; renamed when whole */
    char setvars[1400] = "";
    if (!o->dumb) {
        if (o->png)
            snprintf(tmp_png, sizeof tmp_png, ".%s.tmp.normbench.%ld", nb_path_base(o->png),
                     (long)getpid());
        if (o->svg)
            snprintf(tmp_svg, sizeof tmp_svg, ".%s.tmp.normbench.%ld", nb_path_base(o->svg),
                     (long)getpid());
        nb_buf v = {0};
        nb_buf_puts(&v, "out_png = ");
        gp_str(&v, tmp_png);
        nb_buf_puts(&v, "; out_svg = ");
        gp_str(&v, tmp_svg);
        snprintf(setvars, sizeof setvars, "%s", v.p ? v.p : "");
        nb_buf_free(&v);
    }
    /* "./NAME": a script named like an option ("-p.gp") is still read as the script */
    char script_arg[4200];
    snprintf(script_arg, sizeof script_arg, "./%s", script);
    const char *argv[] = {o->gnuplot, o->dumb ? script_arg : "-e", o->dumb ? NULL : setvars,
                          o->dumb ? NULL : script_arg, NULL};
    if (run_gnuplot(o, dir, script, argv, err)) goto done;

    if (o->dumb) {
        char tpath[4096];
        snprintf(tpath, sizeof tpath, "%s/plot.txt", dir);
        rc = read_text(tpath, text, err);
        goto done;
    }
    const char *finals[2] = {o->png, o->svg};
    const char *tmps[2] = {tmp_png, tmp_svg};
    for (int i = 0; i < 2; i++) {
        if (!finals[i]) continue;
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/%s", dir, tmps[i]);
        int fd = open(tp, O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
            if (fd >= 0) close(fd);
            nb_errf(err, "gnuplot exited 0 but wrote no image '%s'", finals[i]);
            nb_hintf(err,
                     "does this gnuplot have the %s terminal? 'gnuplot -e \"set terminal\"' "
                     "lists them (Debian's gnuplot-nox has pngcairo and svg)",
                     i == 0 ? "pngcairo" : "svg");
            goto done;
        }
        int bad = fsync(fd) != 0;
        close(fd);
        if (bad) {
            nb_errf(err, "cannot write '%s': %s", finals[i], strerror(errno));
            goto done;
        }
        /* checked again: only a regular file or a new name is replaced */
        if (nb_out_install(tp, finals[i], "--out", err)) goto done;
    }
    fsync_dir(dir);
    rc = 0;
done:
    /* never leave a half-written image behind */
    if (!o->dumb && dir) {
        char tp[4096];
        if (tmp_png[0]) {
            snprintf(tp, sizeof tp, "%s/%s", dir, tmp_png);
            unlink(tp);
        }
        if (tmp_svg[0]) {
            snprintf(tp, sizeof tp, "%s/%s", dir, tmp_svg);
            unlink(tp);
        }
    }
    if (o->dumb && dir) {
        /* the temporary directory holds only what this function wrote */
        char p[4096];
        for (int i = 0; lines && i < nline_total; i++)
            if (lines[i].file[0]) {
                snprintf(p, sizeof p, "%s/%s", dir, lines[i].file);
                unlink(p);
            }
        snprintf(p, sizeof p, "%s/%s", dir, datadir);
        rmdir(p);
        snprintf(p, sizeof p, "%s/plot.gp", dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/plot.txt", dir);
        unlink(p);
        rmdir(dir);
    }
    nb_buf_free(&g);
    free(lines);
    free(dir);
    free(datadir);
    free(script);
    return rc;
}
