/* cmd/cmd_show.c — `normbench show RUN`: one run in full. */
#include "cmd/cmd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "results/query.h"
#include "util/json.h"
#include "util/text.h"

static const char usage[] =
    "usage: normbench show RUN [--db FILE] [--format table|json]\n\n"
    "Shows one run: its status, configuration, provenance (build, CPU, threads, OpenBLAS, host),\n"
    "parameters, tags and the last value of each metric; --format json adds every metric's full\n"
    "series. RUN is a run id from 'normbench runs'.\n";

static const char *const formats[] = {"table", "json", NULL};

static void fmt_time(char *buf, size_t size, double t) {
    time_t tt = (time_t)t;
    struct tm tm;
    if (!isnan(t) && gmtime_r(&tt, &tm))
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, size, "-");
}

/* "LABEL" then the stored string v escaped (never raw to the terminal) and a newline. */
static void line(const char *label, const char *v) {
    fputs(label, stdout);
    nb_fputs_escaped(stdout, v);
    putchar('\n');
}

static void print_table(const nb_run_detail *d) {
    const nb_run_info *r = &d->info;
    char t0[40], t1[40], num[40];
    fmt_time(t0, sizeof t0, r->started);
    fmt_time(t1, sizeof t1, r->finished);
    printf("run         %lld\n", (long long)r->id);
    line("task        ", r->task);
    line("dataset     ", r->dataset);
    line("norm        ", r->norm);
    printf("seed        %lld\n", (long long)r->seed);
    line("status      ", r->status);
    if (r->message) line("message     ", r->message);
    printf("started     %s\n", t0);
    printf("finished    %s\n", t1);
    if (!isnan(r->duration)) printf("duration    %.3fs\n", r->duration);
    printf("process     %lld on ", (long long)r->pid);
    line("", r->host);
    line("config      ", d->config);
    line("provenance  ", d->provenance);
    if (d->nparams) {
        puts("\nparams:");
        for (int i = 0; i < d->nparams; i++) {
            fputs("  ", stdout);
            nb_fputs_escaped(stdout, d->params[i].key);
            line(" = ", d->params[i].value);
        }
    }
    if (d->ntags) {
        puts("\ntags:");
        for (int i = 0; i < d->ntags; i++) {
            fputs("  ", stdout);
            nb_fputs_escaped(stdout, d->tags[i].key);
            line(" = ", d->tags[i].value);
        }
    }
    if (d->nseries) {
        int w = 6;
        char name[256];
        for (int i = 0; i < d->nseries; i++) {
            int len = (int)strlen(nb_escape(name, sizeof name, d->series[i].name));
            if (len > w) w = len;
        }
        printf("\n%-*s  %8s  %10s  %s\n", w, "metric", "points", "last_step", "last_value");
        for (int i = 0; i < d->nseries; i++) {
            const nb_series *m = &d->series[i];
            printf("%-*s  %8d  %10lld  %s\n", w, nb_escape(name, sizeof name, m->name), m->n,
                   (long long)m->step[m->n - 1],
                   nb_fmt_double(num, sizeof num, m->value[m->n - 1]));
        }
    }
}

static void print_kv_json(const nb_kv *kv, int n) {
    putchar('{');
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", stdout);
        nb_json_str(stdout, kv[i].key);
        fputs(": ", stdout);
        nb_json_str(stdout, kv[i].value);
    }
    putchar('}');
}

static void print_json(const nb_run_detail *d) {
    const nb_run_info *r = &d->info;
    char t0[40], t1[40];
    fmt_time(t0, sizeof t0, r->started);
    fmt_time(t1, sizeof t1, r->finished);
    printf("{\n  \"id\": %lld,\n  \"task\": ", (long long)r->id);
    nb_json_str(stdout, r->task);
    fputs(",\n  \"dataset\": ", stdout);
    nb_json_str(stdout, r->dataset);
    fputs(",\n  \"norm\": ", stdout);
    nb_json_str(stdout, r->norm);
    printf(",\n  \"seed\": %lld,\n  \"status\": ", (long long)r->seed);
    nb_json_str(stdout, r->status);
    fputs(",\n  \"message\": ", stdout);
    nb_json_str(stdout, r->message);
    printf(",\n  \"started\": \"%s\",\n  \"finished\": ", t0);
    nb_json_str(stdout, isnan(r->finished) ? NULL : t1);
    fputs(",\n  \"duration_s\": ", stdout);
    if (isnan(r->duration))
        fputs("null", stdout);
    else
        nb_json_num(stdout, r->duration);
    printf(",\n  \"pid\": %lld,\n  \"host\": ", (long long)r->pid);
    nb_json_str(stdout, r->host);
    /* config and provenance are JSON objects already (the store checks json_valid) */
    printf(",\n  \"config\": %s,\n  \"provenance\": %s,\n  \"params\": ", d->config, d->provenance);
    print_kv_json(d->params, d->nparams);
    fputs(",\n  \"tags\": ", stdout);
    print_kv_json(d->tags, d->ntags);
    fputs(",\n  \"metrics\": {", stdout);
    for (int i = 0; i < d->nseries; i++) {
        const nb_series *m = &d->series[i];
        printf("%s\n    ", i ? "," : "");
        nb_json_str(stdout, m->name);
        printf(": {\"points\": %d, \"last_step\": %lld, \"last\": ", m->n,
               (long long)m->step[m->n - 1]);
        nb_json_num(stdout, m->value[m->n - 1]);
        fputs(", \"step\": [", stdout);
        for (int j = 0; j < m->n; j++)
            printf("%s%lld", j ? ", " : "", (long long)m->step[j]);
        fputs("], \"wall\": [", stdout);
        for (int j = 0; j < m->n; j++) {
            if (j) fputs(", ", stdout);
            nb_json_num(stdout, m->wall[j]);
        }
        fputs("], \"value\": [", stdout);
        for (int j = 0; j < m->n; j++) {
            if (j) fputs(", ", stdout);
            nb_json_num(stdout, m->value[j]);
        }
        fputs("]}", stdout);
    }
    puts(d->nseries ? "\n  }\n}" : "}\n}");
}

int cmd_show(int argc, const char **argv) {
    const char *db = nb_default_db();
    int format = 0;
    nb_opt opts[] = {
        NB_OPT_DB(&db),
        NB_OPT_FORMAT(&format, formats),
        {0},
    };
    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("show", usage, argc, argv, opts, pos, 1, &npos);
    if (rc == -1) return NB_EXIT_OK;
    if (rc) return rc;
    if (npos != 1) return nb_usage_error("show", "which run? give a run id");
    long long id = 0;
    if (nb_parse_int(pos[0], &id) != 0 || id <= 0)
        return nb_usage_error("show", "invalid run id '%s' (a positive integer)", pos[0]);

    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    if (nb_store_open(&s, db, 1, &err)) return nb_report_err(&err);
    nb_run_detail *d = NULL;
    rc = nb_run_get(s, id, &d, &err);
    nb_store_close(s);
    if (rc) return nb_report_err(&err);
    if (format == 0)
        print_table(d);
    else
        print_json(d);
    nb_run_detail_free(d);
    return NB_EXIT_OK;
}
