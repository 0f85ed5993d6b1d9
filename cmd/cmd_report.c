/* cmd/cmd_report.c — `normbench report`: compare the norms from the finished runs. */
#include "cmd/cmd.h"
#include "report/report.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "results/query.h"
#include "tasks/task.h"
#include "util/json.h"
#include "util/outpath.h"
#include "util/text.h"

static const char usage[] =
    "usage: normbench report [--task T] [--target METRIC<=X|METRIC>=X] [--paper] [--db FILE]\n"
    "                        [--format table|md|csv|json|html] [--out FILE.html|-]\n\n"
    "Groups the finished runs by task, dataset and norm and shows, for each test metric (and each\n"
    "best_* metric: the best validation value of a task that keeps its best parameters, e.g.\n"
    "reader's best_val_error), the mean ± sample standard deviation of the final values over\n"
    "seeds (a value that is infinite or NaN is left out of both and counted beside them,\n"
    "e.g. '0.6770 (+1 inf)'; csv: column nonfinite; json: inf, -inf, nan); the time per training\n"
    "step; how much faster or slower than layer each norm ran; and how many runs diverged,\n"
    "failed, were interrupted or crashed (counted, never averaged in).\n\n"
    "Times: ms per training step and seconds per epoch (training only). Speed against layer,\n"
    "measured on this machine: the ratio of step times and the RMSNorm paper's speed-up\n"
    "(T_layer - T_x)/T_layer, each with its spread. Target: steps and seconds until a run first\n"
    "reached METRIC<=X (or >=X), with how many runs reached it (task default, e.g. mnist:\n"
    "val_error<=0.15). --paper adds what the papers report for each task; their absolute times\n"
    "were measured on other hardware and frameworks: compare ratios, not seconds.\n\n"
    "--format html writes one self-contained page (no script, font or style from elsewhere): the\n"
    "tables with what the papers report, the figures of 'plot' as inline SVG (drawn by gnuplot;\n"
    "without it the page says so), the provenance of each group's runs (machine, threads, BLAS,\n"
    "git revision) and every run with its configuration. Stored text is escaped; the same store\n"
    "gives the same page. With --out FILE it is written to a temporary file beside FILE and\n"
    "renamed into place once whole; without it, or with --out -, to stdout. FILE must be a\n"
    "regular file or a new name: a device, a named pipe, a directory or a link into /proc\n"
    "(/dev/stdout) is refused and left as it is; a link to a regular file is followed. A figure\n"
    "that gnuplot fails to draw is an error: shown in its place on the page and on stderr, and\n"
    "report exits 1 (the page is still written whole).\n";

static const char *const formats[] = {"table", "md", "csv", "json", "html", NULL};
enum { F_TABLE, F_MD, F_CSV, F_JSON, F_HTML };

static int width(const char *s) {
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) w++;
    return w;
}

enum { MAXM = 32, CELL = NB_REPORT_CELL };

/* "task / dataset" of a block, as stored strings are shown: escaped. */
/* A report's norms in the norm table's order (nn/norms/), a task's label for a norm with an option
 * ("NORM-label": reader's batch-everywhere) right after its norm; names not in the table after
 * all of them, by name. */
static int report_norm_rank(const char *norm) {
    nb_norm_kind k;
    if (nb_norm_from_name(norm, &k) == 0) return 2 * (int)k;
    const char *dash = strchr(norm, '-');
    char base[32];
    if (dash && (size_t)(dash - norm) < sizeof base) {
        memcpy(base, norm, (size_t)(dash - norm));
        base[dash - norm] = '\0';
        if (nb_norm_from_name(base, &k) == 0) return 2 * (int)k + 1;
    }
    return 1000;
}

static void print_heading(const nb_report_group *g) {
    nb_fputs_escaped(stdout, g->task);
    fputs(" / ", stdout);
    nb_fputs_escaped(stdout, g->dataset);
}

/* A Markdown table cell: a '|' in it would end the cell. */
static void md_cell(const char *x) {
    for (; *x; x++) {
        if (*x == '|') putchar('\\');
        putchar(*x);
    }
}

/* A grid of cells as an aligned text table (each line after indent) or a Markdown table. */
static void print_grid(const nb_report_table *t, int md, const char *indent) {
    int ncol = t->ncol, nrow = t->nrow;
    char(*cell)[CELL] = t->cell;
    if (md) {
        for (int i = 0; i < nrow; i++) {
            for (int c = 0; c < ncol; c++) {
                fputs("| ", stdout);
                md_cell(cell[i * ncol + c]);
                putchar(' ');
            }
            puts("|");
            if (i == 0) {
                for (int c = 0; c < ncol; c++)
                    fputs(c == 0 ? "|---" : "|---:", stdout);
                puts("|");
            }
        }
        return;
    }
    int *w = calloc((size_t)ncol, sizeof *w);
    if (!w) return;
    for (int i = 0; i < nrow; i++)
        for (int c = 0; c < ncol; c++)
            if (width(cell[i * ncol + c]) > w[c]) w[c] = width(cell[i * ncol + c]);
    for (int i = 0; i < nrow; i++) {
        fputs(indent, stdout);
        for (int c = 0; c < ncol; c++) {
            const char *x = cell[i * ncol + c];
            int pad = w[c] - width(x);
            if (c) fputs("  ", stdout);
            if (c == 0) {
                fputs(x, stdout);
                printf("%*s", pad, "");
            } else {
                printf("%*s%s", pad, "", x);
            }
        }
        putchar('\n');
    }
    free(w);
}

/* One task/dataset block [a, b) as an aligned text table or a Markdown table. */
static void print_block(const nb_report *r, int a, int b, int md, const nb_target *user_target,
                        int paper) {
    nb_report_table t;
    if (nb_report_cells(r, a, b, user_target, &t) != 0) return;
    const nb_task *task = nb_task_find(r->groups[a].task);
    if (md) {
        fputs("### ", stdout);
        print_heading(&r->groups[a]);
        fputs("\n\n", stdout);
    } else {
        print_heading(&r->groups[a]);
        putchar('\n');
    }
    print_grid(&t, md, "  ");
    free(t.cell);
    int any = 0;
    for (int i = a; i < b; i++) {
        char s[160];
        nb_speed_sentence(&r->groups[i], s, sizeof s);
        if (!s[0]) continue;
        if (!any && md) putchar('\n');
        any = 1;
        char shown[4 * sizeof s];
        printf(md ? "- %s\n" : "  %s\n", nb_escape(shown, sizeof shown, s));
    }
    if (paper) {
        const char *text =
            task && task->paper ? task->paper : "no paper numbers are known for this task";
        printf(md ? "\n**Paper.** %s\n" : "  paper: %s\n", text);
        for (const nb_paper_table *pt = task ? task->paper_tables : NULL; pt && pt->title; pt++) {
            if (!nb_paper_table_applies(pt, r->groups[a].model)) continue;
            if (nb_report_paper_cells(r, a, b, pt, &t) != 0) return;
            printf(md ? "\n%s, beside this store's runs:\n\n"
                      : "\n  %s, beside this store's "
                        "runs:\n",
                   pt->title);
            print_grid(&t, md, "    ");
            free(t.cell);
        }
    }
}

static void print_text(const nb_report *r, int md, const nb_target *user_target, int paper) {
    for (int a = 0; a < r->n;) {
        int b = nb_report_block_end(r, a);
        if (a) putchar('\n');
        print_block(r, a, b, md, user_target, paper);
        a = b;
    }
}

static void csv_num(double x) {
    char buf[40];
    fputs(nb_fmt_double(buf, sizeof buf, x), stdout);
}

static void csv_row(const nb_report_group *g, const nb_report_metric *m) {
    nb_csv_field(stdout, g->task);
    putchar(',');
    nb_csv_field(stdout, g->dataset);
    putchar(',');
    nb_csv_field(stdout, g->norm);
    printf(",%d,", g->finished);
    if (m) {
        nb_csv_field(stdout, m->name);
        putchar(',');
        if (m->stat.n) csv_num(m->stat.mean);
        putchar(',');
        if (m->stat.n > 1) csv_num(m->stat.std);
    } else {
        fputs(",,", stdout);
    }
    putchar(',');
    if (g->ms_per_step.n) csv_num(g->ms_per_step.mean);
    putchar(',');
    if (g->ms_per_step.n > 1) csv_num(g->ms_per_step.std);
    printf(",%d,%d,%d,%d,%d,%d,", m ? m->stat.n : 0, g->diverged, g->failed, g->interrupted,
           g->crashed, g->running);
    if (g->has_speed) csv_num(g->speed);
    putchar(',');
    if (g->has_speed && !isnan(g->speed_std)) csv_num(g->speed_std);
    putchar(',');
    if (g->has_speed) csv_num(g->speedup);
    putchar(',');
    if (g->has_speed && !isnan(g->speedup_std)) csv_num(g->speedup_std);
    putchar(',');
    if (g->epoch_seconds.n) csv_num(g->epoch_seconds.mean);
    putchar(',');
    if (g->epoch_seconds.n > 1) csv_num(g->epoch_seconds.std);
    printf(",%d,%d,", g->target_reached, g->target_runs);
    if (g->target_steps.n) csv_num(g->target_steps.mean);
    putchar(',');
    if (g->target_steps.n > 1) csv_num(g->target_steps.std);
    putchar(',');
    if (g->target_seconds.n) csv_num(g->target_seconds.mean);
    putchar(',');
    if (g->target_seconds.n > 1) csv_num(g->target_seconds.std);
    /* the metric's runs whose value was infinite or NaN, left out of mean and std */
    printf(",%d\n", m ? m->stat.pinf + m->stat.ninf + m->stat.nan : 0);
}

static void print_csv(const nb_report *r) {
    puts("task,dataset,norm,runs,metric,mean,std,ms_per_step,ms_std,n,diverged,failed,"
         "interrupted,crashed,running,speed_vs_layer,speed_std,speedup,speedup_std,epoch_s,"
         "epoch_s_std,target_reached,target_runs,target_steps,target_steps_std,target_s,"
         "target_s_std,nonfinite");
    for (int i = 0; i < r->n; i++) {
        const nb_report_group *g = &r->groups[i];
        if (g->nmetrics == 0) csv_row(g, NULL);
        for (int j = 0; j < g->nmetrics; j++)
            csv_row(g, &g->metrics[j]);
    }
}

/* Parses "METRIC<=X" or "METRIC>=X". */
static int parse_target(const char *spec, nb_target *t, char *name, size_t size) {
    const char *op = strstr(spec, "<=");
    int higher = 0;
    if (!op) {
        op = strstr(spec, ">=");
        higher = 1;
    }
    if (!op || op == spec || (size_t)(op - spec) >= size) return -1;
    double v = 0;
    if (nb_parse_double(op + 2, &v) != 0) return -1;
    memcpy(name, spec, (size_t)(op - spec));
    name[op - spec] = '\0';
    t->metric = name;
    t->value = v;
    t->higher_is_better = higher;
    return 0;
}

/* A --target metric that no finished run recorded would give an empty column: a usage error
 * listing the metrics there are. Returns 0 when the metric exists (or there are no finished runs:
 * nothing to say), else -1 with *rc the exit status. */
static int check_target_metric(nb_store *s, const char *task, const char *db, const nb_target *t,
                               int *rc) {
    nb_err err;
    nb_err_clear(&err);
    char **names = NULL;
    int n = 0, found = 0;
    if (nb_metric_names(s, task, &names, &n, &err) != 0) {
        *rc = nb_report_err(&err);
        return -1;
    }
    for (int i = 0; i < n; i++)
        found |= strcmp(names[i], t->metric) == 0;
    if (!found && n > 0) {
        fprintf(stderr,
                "error: no finished run%s%s%s in '%s' recorded the metric '%s' of --target\n"
                "hint: the metrics recorded are:",
                task ? " of task '" : "", task ? task : "", task ? "'" : "", db, t->metric);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %s", names[i]);
        fputc('\n', stderr);
        *rc = NB_EXIT_USAGE;
    }
    nb_names_free(names, n);
    return !found && n > 0 ? -1 : 0;
}

/* Runs averaged together should differ only in the seed: warn (stderr) about every group whose
 * finished runs differ in another configuration value. Returns 0, or -1 after printing an error. */
static int warn_mixed_configs(nb_store *s, const char *task) {
    nb_err err;
    nb_err_clear(&err);
    nb_config_mix *m = NULL;
    int n = 0;
    if (nb_report_config_mixes(s, task, &m, &n, &err) != 0) {
        nb_report_err(&err);
        return -1;
    }
    for (int i = 0; i < n; i++) { /* stored strings: escaped, never raw to the terminal */
        char t[200], d[200], nm[200], k[200], v[600];
        fprintf(stderr,
                "warning: the finished runs of %s / %s, norm %s, differ in '%s' (%s), not only in "
                "the seed: they are averaged together\n",
                nb_escape(t, sizeof t, m[i].task), nb_escape(d, sizeof d, m[i].dataset),
                nb_escape(nm, sizeof nm, m[i].norm), nb_escape(k, sizeof k, m[i].key),
                nb_escape(v, sizeof v, m[i].values));
    }
    if (n)
        fprintf(stderr,
                "hint: record runs that differ on purpose with distinct --variant labels (sweep "
                "does this for its option lists); keys that do not change results are not "
                "compared: %s\n",
                nb_report_ignored_keys);
    nb_config_mixes_free(m, n);
    return 0;
}

/* Moves src's groups to the end of dst and frees src. Returns 0 or -1 (memory). */
static int append_report(nb_report *dst, nb_report *src) {
    if (src->n) {
        nb_report_group *g = realloc(dst->groups, (size_t)(dst->n + src->n) * sizeof *g);
        if (!g) return -1;
        memcpy(g + dst->n, src->groups, (size_t)src->n * sizeof *g);
        dst->groups = g;
        dst->n += src->n;
        src->n = 0;
    }
    nb_report_free(src);
    return 0;
}

/* The HTML page's messages (nb_report_io), on stderr. */
static void html_say(void *ctx, const char *text) {
    fputs(text, stderr);
}

/* The HTML page to stdout (out NULL or "-"), or to out through a temporary file beside it,
 * renamed into place once written whole (util/outpath.h: a reader never sees half a page; a
 * failure leaves out as it was; only a regular file or a new name is written). */
static int write_html(nb_store *s, const nb_report *all, const char *task, const nb_target *ut,
                      const char *db, const char *out) {
    nb_err err;
    nb_err_clear(&err);
    int failed = 0;
    const nb_report_io io = {.say = html_say};
    if (!out || strcmp(out, "-") == 0) {
        if (nb_report_html(stdout, s, all, task, ut, db, &io, &failed, &err))
            return nb_report_err(&err);
        return failed ? NB_EXIT_FAIL : NB_EXIT_OK;
    }
    nb_out o;
    if (nb_out_open(&o, out, "--out", &err)) return nb_report_err(&err);
    if (nb_report_html(o.f, s, all, task, ut, db, &io, &failed, &err) != 0) {
        nb_out_abort(&o);
        return nb_report_err(&err);
    }
    if (nb_out_commit(&o, &err)) return nb_report_err(&err);
    printf("%s\n", out);
    if (failed)
        fprintf(stderr, "error: '%s' was written without %d figure%s that gnuplot failed to draw\n",
                out, failed, failed == 1 ? "" : "s");
    return failed ? NB_EXIT_FAIL : NB_EXIT_OK;
}

int cmd_report(int argc, const char **argv) {
    const char *db = nb_default_db(), *task = NULL, *target_arg = NULL, *out = NULL;
    int format = F_TABLE, paper = 0;
    nb_opt opts[] = {
        {.name = "task",
         .type = NB_OPT_STR,
         .dst = &task,
         .metavar = "T",
         .help = "only this task (e.g. mnist)"},
        {.name = "target",
         .type = NB_OPT_STR,
         .dst = &target_arg,
         .metavar = "M<=X",
         .help = "steps/seconds until METRIC<=X or METRIC>=X (task default)"},
        {.name = "paper",
         .type = NB_OPT_FLAG,
         .dst = &paper,
         .help = "add what the papers report for each task"},
        NB_OPT_DB(&db),
        NB_OPT_FORMAT(&format, formats),
        {.name = "out",
         .type = NB_OPT_STR,
         .dst = &out,
         .metavar = "FILE",
         .help = "write the html page to FILE (atomically; - for stdout)"},
        {0},
    };
    int rc = nb_parse_opts("report", usage, argc, argv, opts, NULL, 0, NULL);
    if (rc == -1) return NB_EXIT_OK;
    if (rc) return rc;
    nb_target user_target = {0};
    char target_name[64];
    if (target_arg && parse_target(target_arg, &user_target, target_name, sizeof target_name))
        return nb_usage_error("report",
                              "invalid --target '%s': write METRIC<=X or METRIC>=X, "
                              "e.g. val_error<=0.15",
                              target_arg);
    if (task && !nb_task_find(task)) return nb_unknown_task("report", task);
    if (out && format != F_HTML && strcmp(out, "-") != 0) /* - (stdout) goes with any format */
        return nb_usage_error("report", "--out goes with --format html (the other formats are "
                                        "printed on stdout)");
    if (out && !nb_text_clean(out)) {
        char shown[512];
        return nb_usage_error("report",
                              "invalid --out '%s': control characters and bytes that are not "
                              "UTF-8 are not allowed in a file name here",
                              nb_escape(shown, sizeof shown, out));
    }
    if (out && (!*out || out[strlen(out) - 1] == '/'))
        return nb_usage_error("report", "invalid --out '%s': give a file name", out);
    if (out && strcmp(out, "-") != 0) { /* refused before the store is read */
        nb_err oerr;
        nb_err_clear(&oerr);
        if (nb_out_check(out, "--out", NULL, &oerr)) return nb_report_err(&oerr);
    }

    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    if (nb_store_open(&s, db, 1, &err)) return nb_report_err(&err);
    if (user_target.metric && check_target_metric(s, task, db, &user_target, &rc) != 0) {
        nb_store_close(s);
        return rc;
    }
    if (warn_mixed_configs(s, task) != 0) {
        nb_store_close(s);
        return NB_EXIT_FAIL;
    }
    /* One report per task, each with its own target, gathered into one. */
    nb_report *r = NULL, *all = calloc(1, sizeof *all);
    rc = all ? nb_report_build(s, task, NULL, &r, &err) : nb_errf(&err, "out of memory");
    for (int i = 0; rc == 0 && i < r->n; i++) {
        if (i > 0 && strcmp(r->groups[i].task, r->groups[i - 1].task) == 0) continue;
        const nb_task *t = nb_task_find(r->groups[i].task);
        const nb_target *tg = user_target.metric ? &user_target : t ? &t->target : NULL;
        nb_report *one = NULL;
        rc = nb_report_build(s, r->groups[i].task, tg, &one, &err);
        if (rc == 0 && append_report(all, one)) rc = nb_errf(&err, "out of memory");
    }
    nb_report_free(r);
    if (rc == 0) nb_report_sort(all, report_norm_rank);
    if (rc == 0 && format == F_HTML) {
        rc = write_html(s, all, task, &user_target, db, out);
        nb_store_close(s);
        nb_report_free(all);
        return rc;
    }
    nb_store_close(s);
    if (rc) {
        nb_report_free(all);
        return nb_report_err(&err);
    }
    if (all->n == 0 && (format == F_TABLE || format == F_MD)) {
        if (task)
            fprintf(stderr, "no runs of task '%s' in '%s'\n", task, db);
        else
            fprintf(stderr, "no runs in '%s' yet\n", db);
    }
    switch (format) {
    case F_TABLE:
        print_text(all, 0, &user_target, paper);
        break;
    case F_MD:
        print_text(all, 1, &user_target, paper);
        break;
    case F_CSV:
        print_csv(all);
        break;
    default:
        nb_report_json(stdout, all, paper);
        break;
    }
    nb_report_free(all);
    return NB_EXIT_OK;
}
