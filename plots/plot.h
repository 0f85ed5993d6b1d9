/* plots/plot.h — figures of the recorded metrics against steps and against wall-clock time,
 * drawn by gnuplot (an external program), behind `normbench plot`.
 *
 * The numbers are computed here in C and gnuplot only draws: for every norm of a
 * figure, each run's raw series is cut at its first NaN or infinity (a diverged run ends where
 * it diverged), smoothed with a debiased exponential moving average (training series only, and
 * before any downsampling), put on a common grid by linear interpolation, and summarised over
 * the runs (seeds) that cover each grid point as mean and sample standard deviation. The grid is
 * at most max_points long: on the step axis the union of the runs' steps, evenly thinned; on the
 * time axis evenly spaced seconds.
 *
 * All functions that can fail return 0 on success and -1 with err filled; they never print. */
#ifndef NB_PLOTS_PLOT_H
#define NB_PLOTS_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "results/query.h"
#include "util/err.h"
#include "util/json.h"

/* ---- the numbers (tested by hand in tests/test_plot.c) ---------------------------------- */

/* The number of leading finite values of y[0..n): a series ends at its first NaN or +-Inf. */
int nb_plot_finite_prefix(const double *y, int n);

/* Debiased exponential moving average, as TensorBoard's smoothing and Adam's bias correction:
 * m_0 = 0, m_t = w*m_{t-1} + (1-w)*y_t, out_t = m_t / (1 - w^t) for t = 1..n. w in [0, 1);
 * w = 0 copies y. The first output equals y[0] (no pull towards zero). y must be finite; out
 * may be y. */
void nb_plot_ema(const double *y, int n, double w, double *out);

/* Summary over m series at the points of grid[0..ng) (increasing). Series i has n[i] points
 * (x[i][k], y[i][k]) with x[i] strictly increasing; it covers a grid point g when
 * x[i][0] <= g <= x[i][n[i]-1], and then contributes y linearly interpolated at g. For each grid
 * point: count[k] = covering series, mean[k] their mean, sd[k] their sample standard deviation
 * (0 for one series), and, when vmin/vmax are not NULL, the smallest and largest value among
 * them; NaN when count[k] == 0. */
void nb_plot_align(int m, const double *const *x, const double *const *y, const int *n,
                   const double *grid, int ng, double *mean, double *sd, double *vmin, double *vmax,
                   int *count);

/* The sorted distinct union of the m series' x values into grid (room for sum of n[i]);
 * returns how many. */
int nb_plot_union_grid(int m, const double *const *x, const int *n, double *grid);

/* Indices of at most max (>= 2) of n points, evenly spread, first and last included, in
 * increasing order; all n when n <= max. Returns how many were written to idx. */
int nb_plot_downsample(int n, int max, int *idx);

/* ---- which runs ------------------------------------------------------------------------- */

typedef struct nb_plot_filter {
    const char *task;    /* NULL: every task */
    const char *dataset; /* NULL: every dataset */
    const char *variant; /* NULL: every variant; "" only runs without a "variant" tag */
    /* Statuses drawn (NULL-terminated, as `normbench runs` shows them, "crashed" included);
     * NULL: only "finished". */
    const char *const *statuses;
    const int64_t *seeds; /* (nseeds) only runs with one of these seeds; NULL: every seed */
    int nseeds;
} nb_plot_filter;

/* One figure: the runs of one task on one dataset and variant (report's grouping). */
typedef struct nb_plot_figure {
    char *task, *dataset;
    char *variant;        /* NULL when the runs have none */
    nb_run_detail **runs; /* (nruns), by norm (none batch weight layer rms prms, others after),
                             then seed, then id */
    int nruns;
} nb_plot_figure;

typedef struct nb_plot_set {
    nb_plot_figure *figs; /* (n), by task, dataset, variant */
    int n;
} nb_plot_set;

/* Loads every run that passes the filter, grouped into figures. No matching run is not an
 * error: the set is empty. Free with nb_plot_set_free. */
int nb_plot_load(nb_store *s, const nb_plot_filter *f, nb_plot_set **out, nb_err *err);
void nb_plot_set_free(nb_plot_set *p);

/* Whether any run of the figure recorded the metric. */
int nb_plot_has_metric(const nb_plot_figure *f, const char *name);

/* The metrics the figure's runs recorded, sorted, separated by spaces, into buf (truncated to
 * size). Returns buf. */
char *nb_plot_metric_names(const nb_plot_figure *f, char *buf, size_t size);

/* The fixed color of a norm ("#rrggbb"), the same in every figure. */
const char *nb_plot_norm_color(const char *norm);

/* ---- drawing ---------------------------------------------------------------------------- */

typedef struct nb_plot_opts {
    const char *const *metrics; /* (nmetrics) one row each, top to bottom */
    int nmetrics;
    int x_step, x_time; /* columns: against steps (left), against wall-clock seconds (right) */
    double smooth;      /* EMA weight in [0, 1) for the training series ("train_*") */
    int max_points;     /* points per line, >= 2 */
    /* Files: the image(s) PNG and/or SVG (NULL: not written), and base, which names the
     * script BASE.gp and the data directory BASE-data/ beside them; the images must be in the
     * same directory as base. Each image is written to a temporary name in that directory and
     * renamed only after gnuplot exited 0 and wrote it whole. */
    const char *png, *svg, *base;
    /* dumb: draw ASCII art (cols x lines) instead; script and data go to a temporary directory,
     * removed afterwards; the text is returned in *text. */
    int dumb, dumb_cols, dumb_lines;
    const char *gnuplot; /* the program, looked up in PATH: "gnuplot" */
    const char *command; /* the command line that made the figure, for the script's header */
} nb_plot_opts;

/* Appends s to b as a gnuplot string expression that nothing in s can end early: s is first
 * escaped (util/text.h: no control character, above all no newline, reaches the script), then
 * written in single quotes, inside which gnuplot expands nothing (no backquote command, no
 * @macro, no backslash escape); each apostrophe closes the quotes and is appended as "'" (gnuplot
 * 5.4's doubled '' breaks on two in a row). "rock''n" becomes 'rock'."'".''."'".'n'. Proved by
 * tests/test_plot.c over every byte and every pair of ASCII characters, through gnuplot. */
void nb_plot_gp_str(nb_buf *b, const char *s);

/* Whether the program prog (a path, or a name looked up in PATH) can be run. */
int nb_plot_have_gnuplot(const char *prog);

/* Checks every file that nb_plot_render would write for o (the images, BASE.gp and BASE-data/)
 * before anything is written: each must be a regular file or a new name (util/outpath.h), and
 * BASE-data a directory or a new name. */
int nb_plot_check_outputs(const nb_plot_opts *o, nb_err *err);

/* Writes the data files and the script of one figure and runs gnuplot on it. With o->dumb, *text
 * receives the drawing (caller frees); otherwise *text is NULL. A missing gnuplot is an error
 * saying how to install it; gnuplot's failure is an error with its last message. */
int nb_plot_render(const nb_plot_figure *f, const nb_plot_opts *o, char **text, nb_err *err);

#endif
