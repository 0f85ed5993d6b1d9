/* report/json.c — `normbench report --format json`: the report's groups as one JSON array. */
#include "report/report.h"
#include "util/json.h"

#include <math.h>
#include <stdio.h>

static void json_stat(FILE *f, const nb_stat *s) {
    fprintf(f, "{\"n\": %d, \"mean\": ", s->n);
    if (s->n)
        nb_json_num(f, s->mean);
    else
        fputs("null", f);
    fputs(", \"std\": ", f);
    if (s->n > 1)
        nb_json_num(f, s->std);
    else
        fputs("null", f);
    /* values left out of n, mean and std: named only when there are any */
    if (s->pinf + s->ninf + s->nan)
        fprintf(f, ", \"inf\": %d, \"-inf\": %d, \"nan\": %d", s->pinf, s->ninf, s->nan);
    fputc('}', f);
}

void nb_report_json(FILE *f, const nb_report *r, int paper) {
    fputc('[', f);
    for (int i = 0; i < r->n; i++) {
        const nb_report_group *g = &r->groups[i];
        fprintf(f, "%s\n  {\"task\": ", i ? "," : "");
        nb_json_str(f, g->task);
        fputs(", \"dataset\": ", f);
        nb_json_str(f, g->dataset);
        fputs(", \"norm\": ", f);
        nb_json_str(f, g->norm);
        fputs(", \"model\": ", f);
        nb_json_str(f, g->model);
        fprintf(f,
                ", \"runs\": %d, \"diverged\": %d, \"failed\": %d, \"interrupted\": %d, "
                "\"crashed\": %d, \"running\": %d,\n   \"metrics\": {",
                g->finished, g->diverged, g->failed, g->interrupted, g->crashed, g->running);
        for (int j = 0; j < g->nmetrics; j++) {
            if (j) fputs(", ", f);
            nb_json_str(f, g->metrics[j].name);
            fputs(": ", f);
            json_stat(f, &g->metrics[j].stat);
        }
        fputs("},\n   \"ms_per_step\": ", f);
        json_stat(f, &g->ms_per_step);
        fputs(", \"epoch_seconds\": ", f);
        json_stat(f, &g->epoch_seconds);
        fprintf(f,
                ",\n   \"target\": {\"reached\": %d, \"runs\": %d, \"steps\": ", g->target_reached,
                g->target_runs);
        json_stat(f, &g->target_steps);
        fputs(", \"seconds\": ", f);
        json_stat(f, &g->target_seconds);
        fputs("},\n   \"speedup_vs_layer\": ", f);
        if (g->has_speed) {
            fputs("{\"value\": ", f);
            nb_json_num(f, g->speedup);
            fputs(", \"std\": ", f);
            if (isnan(g->speedup_std))
                fputs("null", f);
            else
                nb_json_num(f, g->speedup_std);
            fputc('}', f);
        } else {
            fputs("null", f);
        }
        fputs(", \"speed_vs_layer\": ", f);
        if (g->has_speed) {
            fputs("{\"ratio\": ", f);
            nb_json_num(f, g->speed);
            fputs(", \"std\": ", f);
            if (isnan(g->speed_std))
                fputs("null", f);
            else
                nb_json_num(f, g->speed_std);
            char s[160];
            fputs(", \"sentence\": ", f);
            nb_json_str(f, nb_speed_sentence(g, s, sizeof s));
            fputc('}', f);
        } else {
            fputs("null", f);
        }
        if (paper) {
            const nb_task *t = nb_task_find(g->task);
            fputs(",\n   \"paper\": ", f);
            nb_json_str(f, t ? t->paper : NULL);
            /* this norm's row of each paper table set beside the group (report --paper) */
            fputs(", \"paper_tables\": [", f);
            int k = 0;
            for (const nb_paper_table *pt = t ? t->paper_tables : NULL; pt && pt->title; pt++) {
                const nb_paper_row *pr = nb_report_paper_row(pt, g->norm);
                if (!pr || !nb_paper_table_applies(pt, g->model)) continue;
                fputs(k++ ? ",\n     {\"table\": " : "\n     {\"table\": ", f);
                nb_json_str(f, pt->title);
                fputs(", \"paper\": {", f);
                for (int c = 0; c < pt->ncol; c++) {
                    if (c) fputs(", ", f);
                    nb_json_str(f, pt->metric[c]);
                    fputs(": ", f);
                    nb_json_str(f, pr->cells[c]);
                }
                fputs("}, \"paper_s_per_1k_steps\": ", f);
                if (pr->seconds > 0)
                    nb_json_num(f, pr->seconds);
                else
                    fputs("null", f);
                fputc('}', f);
            }
            fputc(']', f);
        }
        fputc('}', f);
    }
    fputs(r->n ? "\n]\n" : "]\n", f);
}
