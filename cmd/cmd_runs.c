/* cmd/cmd_runs.c — `normbench runs`: list the runs in the store. */
#include "cmd/cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "results/query.h"
#include "util/json.h"
#include "util/text.h"

static const char usage[] =
    "usage: normbench runs [--db FILE] [--format table|csv|json]\n\n"
    "Lists every run in the results store: id, task, dataset, norm, seed, status (a run whose\n"
    "process died shows as 'crashed'), start time (UTC), duration and final test_error.\n"
    "Stored text is shown escaped in the table and in csv (a control character as \\x1b, \\n...);\n"
    "json keeps every string exactly.\n";

static const char *const formats[] = {"table", "csv", "json", NULL};

static void fmt_time(char *buf, size_t size, double t) {
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm))
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, size, "?");
}

static void fmt_duration(char *buf, size_t size, double s) {
    if (isnan(s))
        snprintf(buf, size, "-");
    else if (s < 60)
        snprintf(buf, size, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* Display width of a UTF-8 string (one column per code point). */
static int width(const char *s) {
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) w++;
    return w;
}

enum { NCOL = 9 };

static void print_table(const nb_run_info *v, int n) {
    static const char *const head[NCOL] = {"id",     "task",    "dataset",  "norm",      "seed",
                                           "status", "started", "duration", "test_error"};
    char(*cells)[NCOL][64] = calloc((size_t)n + 1, sizeof *cells);
    if (!cells) return;
    for (int c = 0; c < NCOL; c++)
        snprintf(cells[0][c], 64, "%s", head[c]);
    for (int i = 0; i < n; i++) {
        char(*row)[64] = cells[i + 1];
        snprintf(row[0], 64, "%lld", (long long)v[i].id);
        nb_escape(row[1], 64, v[i].task);
        nb_escape(row[2], 64, v[i].dataset);
        nb_escape(row[3], 64, v[i].norm);
        snprintf(row[4], 64, "%lld", (long long)v[i].seed);
        nb_escape(row[5], 64, v[i].status);
        fmt_time(row[6], 64, v[i].started);
        fmt_duration(row[7], 64, v[i].duration);
        if (v[i].has_test_error)
            snprintf(row[8], 64, "%.4g", v[i].test_error);
        else
            snprintf(row[8], 64, "-");
    }
    int w[NCOL] = {0};
    for (int i = 0; i <= n; i++)
        for (int c = 0; c < NCOL; c++)
            if (width(cells[i][c]) > w[c]) w[c] = width(cells[i][c]);
    for (int i = 0; i <= n; i++) {
        for (int c = 0; c < NCOL; c++) {
            int right = i > 0 && (c == 0 || c == 4 || c == 8); /* numbers */
            int pad = w[c] - width(cells[i][c]);
            if (c) fputs("  ", stdout);
            if (right) printf("%*s", pad, "");
            fputs(cells[i][c], stdout);
            if (!right && c < NCOL - 1) printf("%*s", pad, "");
        }
        putchar('\n');
    }
    free(cells);
}

static void print_csv(const nb_run_info *v, int n) {
    puts("id,task,dataset,norm,seed,status,started,duration_s,test_error");
    for (int i = 0; i < n; i++) {
        char t[40], num[40];
        fmt_time(t, sizeof t, v[i].started);
        printf("%lld,", (long long)v[i].id);
        nb_csv_field(stdout, v[i].task);
        putchar(',');
        nb_csv_field(stdout, v[i].dataset);
        putchar(',');
        nb_csv_field(stdout, v[i].norm);
        printf(",%lld,", (long long)v[i].seed);
        nb_csv_field(stdout, v[i].status);
        printf(",%s,", t);
        if (!isnan(v[i].duration)) printf("%.3f", v[i].duration);
        putchar(',');
        if (v[i].has_test_error) fputs(nb_fmt_double(num, sizeof num, v[i].test_error), stdout);
        putchar('\n');
    }
}

static void print_json(const nb_run_info *v, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) {
        char t[40];
        fmt_time(t, sizeof t, v[i].started);
        printf("%s\n  {\"id\": %lld, \"task\": ", i ? "," : "", (long long)v[i].id);
        nb_json_str(stdout, v[i].task);
        fputs(", \"dataset\": ", stdout);
        nb_json_str(stdout, v[i].dataset);
        fputs(", \"norm\": ", stdout);
        nb_json_str(stdout, v[i].norm);
        printf(", \"seed\": %lld, \"status\": ", (long long)v[i].seed);
        nb_json_str(stdout, v[i].status);
        fputs(", \"message\": ", stdout);
        nb_json_str(stdout, v[i].message);
        printf(", \"started\": \"%s\", \"duration_s\": ", t);
        if (isnan(v[i].duration))
            fputs("null", stdout);
        else
            nb_json_num(stdout, v[i].duration);
        fputs(", \"test_error\": ", stdout);
        if (v[i].has_test_error)
            nb_json_num(stdout, v[i].test_error);
        else
            fputs("null", stdout);
        putchar('}');
    }
    puts(n ? "\n]" : "]");
}

int cmd_runs(int argc, const char **argv) {
    const char *db = nb_default_db();
    int format = 0;
    nb_opt opts[] = {
        NB_OPT_DB(&db),
        NB_OPT_FORMAT(&format, formats),
        {0},
    };
    int rc = nb_parse_opts("runs", usage, argc, argv, opts, NULL, 0, NULL);
    if (rc == -1) return NB_EXIT_OK;
    if (rc) return rc;

    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    if (nb_store_open(&s, db, 1, &err)) return nb_report_err(&err);
    nb_run_info *v = NULL;
    int n = 0;
    if (nb_runs_list(s, &v, &n, &err)) {
        nb_store_close(s);
        return nb_report_err(&err);
    }
    nb_store_close(s);
    if (format == 0) {
        if (n == 0)
            fprintf(stderr, "no runs in '%s' yet\n", db);
        else
            print_table(v, n);
    } else if (format == 1) {
        print_csv(v, n);
    } else {
        print_json(v, n);
    }
    nb_runs_free(v, n);
    return NB_EXIT_OK;
}
