/* report/tables.c — the report's tables as grids of text cells (the runs' groups; the papers'
 * numbers beside them), shared by `report`'s text formats and its HTML page. (Moved from
 * cmd/cmd_report.c.) */
#include "report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plots/plot.h"
#include "results/query.h"
#include "tasks/task.h"
#include "util/text.h"

/* x with a fixed number of decimals, or in scientific notation when that would be longer than
 * a reader can take in (|x| >= 1e9). */
static int fmt_num(char *buf, size_t size, double x, int decimals) {
    if (fabs(x) >= 1e9) return snprintf(buf, size, "%.4g", x);
    return snprintf(buf, size, "%.*f", decimals, x);
}

/* "mean ± std" with a fixed number of decimals, "mean" for one run, "-" for none; the runs whose
 * value was infinite or NaN, left out of both, are counted after it: "0.2217 (+1 inf)", or alone
 * ("inf", "2 inf, 1 nan") when no value was finite. */
static void fmt_stat(char *buf, size_t size, const nb_stat *s, int decimals) {
    size_t len = 0;
    const int bad[3] = {s->pinf, s->ninf, s->nan};
    const char *names[3] = {"inf", "-inf", "nan"};
    int nbad = s->pinf + s->ninf + s->nan, kinds = !!s->pinf + !!s->ninf + !!s->nan;
    buf[0] = '\0';
    if (s->n == 0 && nbad == 0) {
        snprintf(buf, size, "-");
        return;
    }
    if (s->n > 0) {
        int w = fmt_num(buf, size, s->mean, decimals);
        len = w > 0 ? (size_t)w : 0;
        if (s->n > 1 && len < size) {
            w = snprintf(buf + len, size - len, " ± ");
            len += w > 0 ? (size_t)w : 0;
            if (len < size) {
                w = fmt_num(buf + len, size - len, s->std, decimals);
                len += w > 0 ? (size_t)w : 0;
            }
        }
    }
    if (nbad == 0 || len >= size) return;
    if (s->n == 0 && kinds == 1 && nbad == 1) { /* one run, not finite */
        snprintf(buf, size, "%s", names[s->pinf ? 0 : s->ninf ? 1 : 2]);
        return;
    }
    int w = snprintf(buf + len, size - len, "%s", s->n ? " (+" : "");
    len += w > 0 ? (size_t)w : 0;
    for (int k = 0, first = 1; k < 3 && len < size; k++) {
        if (!bad[k]) continue;
        w = snprintf(buf + len, size - len, "%s%d %s", first ? "" : ", ", bad[k], names[k]);
        len += w > 0 ? (size_t)w : 0;
        first = 0;
    }
    if (s->n && len < size) snprintf(buf + len, size - len, ")");
}

/* The union of metric names over groups [a, b), in first-seen order. */
static int metric_names(const nb_report *r, int a, int b, const char **names, int max) {
    int n = 0;
    for (int i = a; i < b; i++)
        for (int j = 0; j < r->groups[i].nmetrics; j++) {
            const char *nm = r->groups[i].metrics[j].name;
            if (strncmp(nm, "val_preact_", 11) == 0) continue; /* report --paper's Table 5 */
            int seen = 0;
            for (int k = 0; k < n; k++)
                seen |= strcmp(names[k], nm) == 0;
            if (!seen && n < max) names[n++] = nm;
        }
    return n;
}

static const nb_stat *find_metric(const nb_report_group *g, const char *name) {
    for (int j = 0; j < g->nmetrics; j++)
        if (strcmp(g->metrics[j].name, name) == 0) return &g->metrics[j].stat;
    return NULL;
}

enum { MAXM = 32, CELL = NB_REPORT_CELL };

int nb_report_cells(const nb_report *r, int a, int b, const nb_target *user_target,
                    nb_report_table *t) {
    const char *names[MAXM];
    int nm = metric_names(r, a, b, names, MAXM);
    int ncol = 2 + nm + 9, nrow = 1 + (b - a);
    char(*cell)[CELL] = calloc((size_t)(ncol * nrow), CELL);
    t->cell = cell;
    t->ncol = ncol;
    t->nrow = nrow;
    if (!cell) return -1;
    const nb_report_group *g0 = &r->groups[a];
    const nb_task *task = nb_task_find(g0->task);
    const nb_target *tg = user_target && user_target->metric ? user_target
                          : task                             ? &task->target
                                                             : NULL;
    char target_head[96], target_s_head[96];
    if (tg && tg->metric)
        snprintf(target_head, sizeof target_head, "steps to %s%s%g", tg->metric,
                 tg->higher_is_better ? ">=" : "<=", tg->value);
    else
        snprintf(target_head, sizeof target_head, "steps to target");
    snprintf(target_s_head, sizeof target_s_head, "s to target");
    const char *fixed_tail[] = {"ms/step",  "s/epoch", "speed-up",    target_head, target_s_head,
                                "diverged", "failed",  "interrupted", "crashed"};
    snprintf(cell[0], CELL, "norm");
    snprintf(cell[1], CELL, "runs");
    for (int m = 0; m < nm; m++)
        nb_escape(cell[2 + m], CELL, names[m]);
    for (int k = 0; k < 9; k++)
        snprintf(cell[2 + nm + k], CELL, "%s", fixed_tail[k]);
    for (int i = a; i < b; i++) {
        const nb_report_group *g = &r->groups[i];
        char(*row)[CELL] = cell + (size_t)(i - a + 1) * ncol;
        nb_escape(row[0], CELL, g->norm);
        snprintf(row[1], CELL, "%d", g->finished);
        for (int m = 0; m < nm; m++) {
            const nb_stat *st = find_metric(g, names[m]);
            nb_stat none = {0, NAN, NAN, 0, 0, 0};
            size_t len = strlen(names[m]); /* rates (tokens_per_s) in whole units */
            int per_s = len > 6 && strcmp(names[m] + len - 6, "_per_s") == 0;
            fmt_stat(row[2 + m], CELL, st ? st : &none, per_s ? 0 : 4);
        }
        fmt_stat(row[2 + nm], CELL, &g->ms_per_step, 2);
        fmt_stat(row[3 + nm], CELL, &g->epoch_seconds, 2);
        if (!g->has_speed)
            snprintf(row[4 + nm], CELL, "%s", strcmp(g->norm, "layer") == 0 ? "(base)" : "-");
        else if (isnan(g->speedup_std))
            snprintf(row[4 + nm], CELL, "%+.1f%%", 100 * g->speedup);
        else
            snprintf(row[4 + nm], CELL, "%+.1f ± %.1f%%", 100 * g->speedup, 100 * g->speedup_std);
        if (g->target_runs == 0) {
            snprintf(row[5 + nm], CELL, "-");
            snprintf(row[6 + nm], CELL, "-");
        } else {
            char st[CELL / 2];
            fmt_stat(st, sizeof st, &g->target_steps, 0);
            snprintf(row[5 + nm], CELL, "%s (%d/%d)", st, g->target_reached, g->target_runs);
            fmt_stat(row[6 + nm], CELL, &g->target_seconds, 1);
        }
        int counts[4] = {g->diverged, g->failed, g->interrupted, g->crashed};
        for (int k = 0; k < 4; k++)
            snprintf(row[7 + nm + k], CELL, "%d", counts[k]);
    }
    return 0;
}

int nb_paper_table_applies(const nb_paper_table *pt, const char *model) {
    if (!pt->model) return 1;
    if (!model) return 0;
    size_t n = strlen(pt->model);
    return strncmp(model, pt->model, n) == 0 && (model[n] == '\0' || model[n] == ' ');
}

static const nb_report_group *group_of(const nb_report *r, int a, int b, const char *norm) {
    for (int i = a; i < b; i++)
        if (strcmp(r->groups[i].norm, norm) == 0) return &r->groups[i];
    return NULL;
}

const nb_paper_row *nb_report_paper_row(const nb_paper_table *pt, const char *norm) {
    for (const nb_paper_row *p = pt->rows; p->norm; p++)
        if (strcmp(p->norm, norm) == 0) return p;
    return NULL;
}

int nb_report_paper_cells(const nb_report *r, int a, int b, const nb_paper_table *pt,
                          nb_report_table *t) {
    /* rows: the block's norms (in the report's order) and then the paper's that it lacks */
    const char *norms[64];
    int n = 0;
    for (int i = a; i < b && n < 64; i++)
        norms[n++] = r->groups[i].norm;
    for (const nb_paper_row *p = pt->rows; p->norm && n < 64; p++)
        if (!group_of(r, a, b, p->norm)) norms[n++] = p->norm;
    const int timed = pt->rows[0].norm && pt->rows[0].seconds > 0;
    const int ncol = 1 + 2 * pt->ncol + (timed ? 4 : 0), nrow = 1 + n;
    char(*cell)[CELL] = calloc((size_t)(ncol * nrow), CELL);
    t->cell = cell;
    t->ncol = ncol;
    t->nrow = nrow;
    if (!cell) return -1;
    snprintf(cell[0], CELL, "norm");
    for (int c = 0; c < pt->ncol; c++) {
        snprintf(cell[1 + 2 * c], CELL, "%s", pt->metric[c]);
        snprintf(cell[2 + 2 * c], CELL, "paper: %s", pt->head[c]);
    }
    if (timed) {
        const char *head[4] = {"s/1k steps", "paper: s/1k steps", "speed-up", "paper: speed-up"};
        for (int k = 0; k < 4; k++)
            snprintf(cell[1 + 2 * pt->ncol + k], CELL, "%s", head[k]);
    }
    const nb_paper_row *pl = nb_report_paper_row(pt, "layer");
    for (int i = 0; i < n; i++) {
        char(*row)[CELL] = cell + (size_t)(i + 1) * ncol;
        const nb_report_group *g = group_of(r, a, b, norms[i]);
        const nb_paper_row *p = nb_report_paper_row(pt, norms[i]);
        nb_escape(row[0], CELL, norms[i]);
        for (int c = 0; c < pt->ncol; c++) {
            const nb_stat *st = g ? find_metric(g, pt->metric[c]) : NULL;
            nb_stat none = {0, NAN, NAN, 0, 0, 0};
            fmt_stat(row[1 + 2 * c], CELL, st ? st : &none, 2);
            snprintf(row[2 + 2 * c], CELL, "%s", p ? p->cells[c] : "-");
        }
        if (!timed) continue;
        char(*tc)[CELL] = row + 1 + 2 * pt->ncol;
        nb_stat none = {0, NAN, NAN, 0, 0, 0};
        fmt_stat(tc[0], CELL, g ? &g->ms_per_step : &none, 0); /* ms per step = s per 1k */
        if (p && p->seconds > 0)
            snprintf(tc[1], CELL, "%.0f", p->seconds);
        else
            snprintf(tc[1], CELL, "-");
        if (!g || !g->has_speed)
            snprintf(tc[2], CELL, "%s", g && strcmp(g->norm, "layer") == 0 ? "(base)" : "-");
        else if (isnan(g->speedup_std))
            snprintf(tc[2], CELL, "%+.1f%%", 100 * g->speedup);
        else
            snprintf(tc[2], CELL, "%+.1f ± %.1f%%", 100 * g->speedup, 100 * g->speedup_std);
        if (p && p == pl)
            snprintf(tc[3], CELL, "(base)");
        else if (p && pl && p->seconds > 0 && pl->seconds > 0)
            snprintf(tc[3], CELL, "%+.1f%%", 100 * (1 - p->seconds / pl->seconds));
        else
            snprintf(tc[3], CELL, "-");
    }
    return 0;
}

int nb_report_block_end(const nb_report *r, int a) {
    int b = a + 1;
    while (b < r->n && strcmp(r->groups[b].task, r->groups[a].task) == 0 &&
           strcmp(r->groups[b].dataset, r->groups[a].dataset) == 0)
        b++;
    return b;
}

int nb_figure_default_metrics(const nb_plot_figure *f, const char **m) {
    int n = 0;
    if (nb_plot_has_metric(f, "train_loss")) m[n++] = "train_loss";
    const nb_task *t = nb_task_find(f->task);
    const char *eval = NULL;
    if (t && t->target.metric && nb_plot_has_metric(f, t->target.metric)) eval = t->target.metric;
    static const char *const fallbacks[] = {"val_error", "test_error", "val_nll", "test_nll"};
    for (size_t i = 0; !eval && i < sizeof fallbacks / sizeof fallbacks[0]; i++)
        if (nb_plot_has_metric(f, fallbacks[i])) eval = fallbacks[i];
    if (eval) m[n++] = eval;
    return n;
}
