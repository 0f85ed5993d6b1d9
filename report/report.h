/* report/report.h — what `normbench report`'s text tables (cmd/cmd_report.c) share with its HTML
 * page (report/html.c): the tables as grids of cells (report/tables.c), and the page. */
#ifndef NB_REPORT_REPORT_H
#define NB_REPORT_REPORT_H

#include <stdio.h>

#include "plots/plot.h"
#include "results/query.h"
#include "results/store.h"
#include "tasks/task.h"
#include "util/err.h"

enum { NB_REPORT_CELL = 96 };

/* One task/dataset block of the report as a grid of text cells: row 0 the header (norm, runs,
 * each metric, ms/step, s/epoch, speed-up, the target's two columns, the four failure counts),
 * then a row per group. Stored strings in the cells are escaped as for a terminal (util/text.h),
 * not for HTML. */
typedef struct nb_report_table {
    int ncol, nrow;
    char (*cell)[NB_REPORT_CELL]; /* (ncol * nrow), row-major; free() it */
} nb_report_table;

/* Fills t for the groups [a, b) of r (one task and dataset); the target is user_target when it
 * names a metric, else the task's. Returns 0, or -1 when out of memory. */
int nb_report_cells(const nb_report *r, int a, int b, const nb_target *user_target,
                    nb_report_table *t);

/* Whether the paper table pt is set beside runs of the model label model (NULL: unknown). */
int nb_paper_table_applies(const nb_paper_table *pt, const char *model);

/* Fills t with the paper table pt beside the groups [a, b): per norm (the block's, then the
 * paper's others) each paper column's value next to the runs' last value of its metric, and
 * when the table has times, s per 1k steps and the speed-up against layer on both sides.
 * Returns 0, or -1 when out of memory. */
int nb_report_paper_cells(const nb_report *r, int a, int b, const nb_paper_table *pt,
                          nb_report_table *t);

/* The paper table's row of norm, or NULL. */
const nb_paper_row *nb_report_paper_row(const nb_paper_table *pt, const char *norm);

/* The end of the task/dataset block that starts at group a. */
int nb_report_block_end(const nb_report *r, int a);

/* Where the HTML page's messages go, as the command gives them: whole lines ("error: ...",
 * "warning: ...") through say (NULL: dropped). Nothing in report/ prints on its own. */
typedef struct nb_report_io {
    void (*say)(void *ctx, const char *text);
    void *ctx;
} nb_report_io;

/* Writes the report as one self-contained HTML page to f: per task/dataset block the table,
 * the speed sentences, the papers' numbers, the figure (inline SVG drawn by gnuplot; a note when
 * gnuplot is missing, with a warning said through io) and the provenance of its runs; then every
 * run with its configuration. db is shown as the store's name. A figure that gnuplot failed to
 * draw is shown as an error in its place and said through io ("error: the figure of ...
 * failed"), and counted in *failed; the page is still whole. Returns 0, or -1 with err set. */
int nb_report_html(FILE *f, nb_store *s, const nb_report *r, const char *task,
                   const nb_target *user_target, const char *db, const nb_report_io *io,
                   int *failed, nb_err *err);

/* Writes the report's groups to f as one JSON array (report --format json): per group its runs'
 * counts, each metric's statistics, the step time and speed against layer, and with paper the
 * task's paper and its paper tables' rows for the group's norm. */
void nb_report_json(FILE *f, const nb_report *r, int paper);

/* The rows `plot` draws by default and the HTML report shows (metric names into m, at most 2):
 * the training loss, then the task's evaluation metric (its target metric, else the first of
 * val_error, test_error, val_nll, test_nll recorded). Returns how many. */
int nb_figure_default_metrics(const nb_plot_figure *f, const char **m);

#endif
