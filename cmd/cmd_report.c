/* cmd/cmd_report.c — `normbench report`: compare the norms from the finished runs. */
#include "cmd/cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/query.h"
#include "util/json.h"

static const char usage[] =
    "usage: normbench report [--task T] [--db FILE] [--format table|md|csv|json]\n\n"
    "Groups the finished runs by task, dataset and norm and shows, for each test metric, the\n"
    "mean ± sample standard deviation of the final values over seeds; the time per training\n"
    "step; how much faster or slower than layer each norm ran; and how many runs diverged,\n"
    "failed, were interrupted or crashed (counted, never averaged in).\n";

static const char *const formats[] = {"table", "md", "csv", "json", NULL};
enum { F_TABLE, F_MD, F_CSV, F_JSON };

/* "mean ± std" with a fixed number of decimals, "mean" for one run, "-" for none. */
static void fmt_stat(char *buf, size_t size, const nb_stat *s, int decimals) {
    if (s->n == 0)
        snprintf(buf, size, "-");
    else if (s->n == 1)
        snprintf(buf, size, "%.*f", decimals, s->mean);
    else
        snprintf(buf, size, "%.*f ± %.*f", decimals, s->mean, decimals, s->std);
}

static int width(const char *s) {
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) w++;
    return w;
}

/* The union of metric names over groups [a, b), in first-seen order. */
static int metric_names(const nb_report *r, int a, int b, const char **names, int max) {
    int n = 0;
    for (int i = a; i < b; i++)
        for (int j = 0; j < r->groups[i].nmetrics; j++) {
            const char *nm = r->groups[i].metrics[j].name;
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

enum { MAXM = 32, CELL = 64 };

/* One task/dataset block [a, b) as an aligned text table or a Markdown table. */
static void print_block(const nb_report *r, int a, int b, int md) {
    const char *names[MAXM];
    int nm = metric_names(r, a, b, names, MAXM);
    int ncol = 2 + nm + 6, nrow = 1 + (b - a);
    char(*cell)[CELL] = calloc((size_t)(ncol * nrow), CELL);
    if (!cell) return;
    const char *fixed_tail[] = {"ms/step",     "diverged", "failed",
                                "interrupted", "crashed",  "running"};
    snprintf(cell[0], CELL, "norm");
    snprintf(cell[1], CELL, "runs");
    for (int m = 0; m < nm; m++)
        snprintf(cell[2 + m], CELL, "%s", names[m]);
    for (int k = 0; k < 6; k++)
        snprintf(cell[2 + nm + k], CELL, "%s", fixed_tail[k]);
    for (int i = a; i < b; i++) {
        const nb_report_group *g = &r->groups[i];
        char(*row)[CELL] = cell + (size_t)(i - a + 1) * ncol;
        snprintf(row[0], CELL, "%s", g->norm);
        snprintf(row[1], CELL, "%d", g->finished);
        for (int m = 0; m < nm; m++) {
            const nb_stat *st = find_metric(g, names[m]);
            nb_stat none = {0, NAN, NAN};
            fmt_stat(row[2 + m], CELL, st ? st : &none, 4);
        }
        fmt_stat(row[2 + nm], CELL, &g->ms_per_step, 2);
        int counts[5] = {g->diverged, g->failed, g->interrupted, g->crashed, g->running};
        for (int k = 0; k < 5; k++)
            snprintf(row[3 + nm + k], CELL, "%d", counts[k]);
    }
    if (md) {
        printf("### %s / %s\n\n", r->groups[a].task, r->groups[a].dataset);
        for (int i = 0; i < nrow; i++) {
            for (int c = 0; c < ncol; c++)
                printf("| %s ", cell[i * ncol + c]);
            puts("|");
            if (i == 0) {
                for (int c = 0; c < ncol; c++)
                    fputs(c == 0 ? "|---" : "|---:", stdout);
                puts("|");
            }
        }
    } else {
        printf("%s / %s\n", r->groups[a].task, r->groups[a].dataset);
        int w[2 + MAXM + 6] = {0};
        for (int i = 0; i < nrow; i++)
            for (int c = 0; c < ncol; c++)
                if (width(cell[i * ncol + c]) > w[c]) w[c] = width(cell[i * ncol + c]);
        for (int i = 0; i < nrow; i++) {
            fputs("  ", stdout);
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
    }
    int any = 0;
    for (int i = a; i < b; i++) {
        char s[160];
        nb_speed_sentence(&r->groups[i], s, sizeof s);
        if (!s[0]) continue;
        if (!any && md) putchar('\n');
        any = 1;
        printf(md ? "- %s\n" : "  %s\n", s);
    }
    free(cell);
}

static void print_text(const nb_report *r, int md) {
    for (int a = 0; a < r->n;) {
        int b = a + 1;
        while (b < r->n && strcmp(r->groups[b].task, r->groups[a].task) == 0 &&
               strcmp(r->groups[b].dataset, r->groups[a].dataset) == 0)
            b++;
        if (a) putchar('\n');
        print_block(r, a, b, md);
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
    putchar('\n');
}

static void print_csv(const nb_report *r) {
    puts("task,dataset,norm,runs,metric,mean,std,ms_per_step,ms_std,n,diverged,failed,"
         "interrupted,crashed,running,speed_vs_layer,speed_std");
    for (int i = 0; i < r->n; i++) {
        const nb_report_group *g = &r->groups[i];
        if (g->nmetrics == 0) csv_row(g, NULL);
        for (int j = 0; j < g->nmetrics; j++)
            csv_row(g, &g->metrics[j]);
    }
}

static void json_stat(const nb_stat *s) {
    printf("{\"n\": %d, \"mean\": ", s->n);
    if (s->n)
        nb_json_num(stdout, s->mean);
    else
        fputs("null", stdout);
    fputs(", \"std\": ", stdout);
    if (s->n > 1)
        nb_json_num(stdout, s->std);
    else
        fputs("null", stdout);
    putchar('}');
}

static void print_json(const nb_report *r) {
    putchar('[');
    for (int i = 0; i < r->n; i++) {
        const nb_report_group *g = &r->groups[i];
        printf("%s\n  {\"task\": ", i ? "," : "");
        nb_json_str(stdout, g->task);
        fputs(", \"dataset\": ", stdout);
        nb_json_str(stdout, g->dataset);
        fputs(", \"norm\": ", stdout);
        nb_json_str(stdout, g->norm);
        printf(", \"runs\": %d, \"diverged\": %d, \"failed\": %d, \"interrupted\": %d, "
               "\"crashed\": %d, \"running\": %d,\n   \"metrics\": {",
               g->finished, g->diverged, g->failed, g->interrupted, g->crashed, g->running);
        for (int j = 0; j < g->nmetrics; j++) {
            if (j) fputs(", ", stdout);
            nb_json_str(stdout, g->metrics[j].name);
            fputs(": ", stdout);
            json_stat(&g->metrics[j].stat);
        }
        fputs("},\n   \"ms_per_step\": ", stdout);
        json_stat(&g->ms_per_step);
        fputs(", \"speed_vs_layer\": ", stdout);
        if (g->has_speed) {
            fputs("{\"ratio\": ", stdout);
            nb_json_num(stdout, g->speed);
            fputs(", \"std\": ", stdout);
            if (isnan(g->speed_std))
                fputs("null", stdout);
            else
                nb_json_num(stdout, g->speed_std);
            char s[160];
            fputs(", \"sentence\": ", stdout);
            nb_json_str(stdout, nb_speed_sentence(g, s, sizeof s));
            putchar('}');
        } else {
            fputs("null", stdout);
        }
        putchar('}');
    }
    puts(r->n ? "\n]" : "]");
}

int cmd_report(int argc, const char **argv) {
    const char *db = nb_default_db(), *task = NULL;
    int format = F_TABLE;
    nb_opt opts[] = {
        {.name = "task",
         .type = NB_OPT_STR,
         .dst = &task,
         .metavar = "T",
         .help = "only this task (e.g. mnist)"},
        NB_OPT_DB(&db),
        NB_OPT_FORMAT(&format, formats),
        {0},
    };
    int rc = nb_parse_opts("report", usage, argc, argv, opts, NULL, 0, NULL);
    if (rc == -1) return NB_EXIT_OK;
    if (rc) return rc;

    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    if (nb_store_open(&s, db, 1, &err)) return nb_report_err(&err);
    nb_report *r = NULL;
    rc = nb_report_build(s, task, &r, &err);
    nb_store_close(s);
    if (rc) return nb_report_err(&err);
    if (r->n == 0 && (format == F_TABLE || format == F_MD)) {
        if (task)
            fprintf(stderr, "no runs of task '%s' in '%s'\n", task, db);
        else
            fprintf(stderr, "no runs in '%s' yet\n", db);
    }
    switch (format) {
    case F_TABLE:
        print_text(r, 0);
        break;
    case F_MD:
        print_text(r, 1);
        break;
    case F_CSV:
        print_csv(r);
        break;
    default:
        print_json(r);
        break;
    }
    nb_report_free(r);
    return NB_EXIT_OK;
}
