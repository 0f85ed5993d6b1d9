/* cmd/cmd_plot.c — `normbench plot`: the recorded metrics against steps and against time. */
#include "cmd/cmd.h"
#include "report/report.h"

#include <stdlib.h>
#include <string.h>

#include "plots/plot.h"
#include "results/query.h"
#include "tasks/task.h"
#include "util/json.h"
#include "util/num.h"
#include "util/outpath.h"
#include "util/text.h"

static const char usage[] =
    "usage: normbench plot [--task T] [--dataset NAME] [--variant TEXT] [--metric LIST]\n"
    "                      [--x step|time|both] [--out FILE.png|FILE.svg|FILE] [--term "
    "png|svg|dumb]\n"
    "                      [--smooth X] [--status LIST|all] [--seed LIST] [--max-points N]\n"
    "                      [--db FILE]\n\n"
    "Draws, with gnuplot, one figure per task and dataset (and variant, as report groups runs):\n"
    "a row per metric (default: the training loss on top, the task's evaluation metric, e.g.\n"
    "mnist's val_error, below), against training steps (left) and wall-clock seconds since the\n"
    "run started (right). One line per norm, in the same color in every figure: the mean over\n"
    "the runs (seeds), with a band of plus and minus one sample standard deviation over them,\n"
    "kept within the smallest and largest run's value at each point.\n"
    "The time axis aligns the runs by linear interpolation on a common grid of seconds. The\n"
    "training loss is smoothed by a debiased exponential moving average (as TensorBoard's\n"
    "smoothing, without its pull towards zero at the start), applied to each run's raw series\n"
    "before anything else; the unsmoothed mean is drawn faintly beneath. Evaluation metrics\n"
    "(measured on a whole set) are not smoothed. Each line has at most --max-points points.\n\n"
    "Only finished runs are drawn unless --status says otherwise, and the runs of every seed\n"
    "unless --seed names some; a diverged run's line ends\n"
    "where its loss became NaN or infinite. Files: FILE.png and FILE.svg (default\n"
    "normbench-TASK.png and .svg in the current directory, with the dataset added when a task\n"
    "has several), the gnuplot script FILE.gp and its data FILE-data/ beside them: edit and\n"
    "rerun 'gnuplot FILE.gp' there. An image is renamed into place only when gnuplot wrote it\n"
    "whole. Each of these must be a regular file or a new name (FILE-data a directory): a\n"
    "device, a named pipe or a link into /proc is refused before anything is written, and left\n"
    "as it is; a link to a regular file is followed. --term dumb prints the figure as text on\n"
    "stdout instead (--out - is refused). The image files written are listed on stdout.\n";

static const char *const terms[] = {"png+svg", "png", "svg", "dumb", NULL};
enum { T_BOTH, T_PNG, T_SVG, T_DUMB };
static const char *const xaxes[] = {"both", "step", "time", NULL};
enum { X_BOTH, X_STEP, X_TIME };

static const char *const all_statuses[] = {"finished", "interrupted", "diverged", "failed",
                                           "crashed",  "running",     NULL};

enum { MAXMET = 16, MAXSTAT = 8, MAXSEED = 64 };
/* the longest base name: room for "-data" and gnuplot's ".BASE.svg.tmp.normbench.PID" within
 * NAME_MAX */
enum { NB_PLOT_NAME_MAX = 200 };

/* Splits a comma-separated list into a NULL-terminated array of pointers into buf. Returns how
 * many, or -1 when there are more than max or an item is empty ("1,,2", ",1", "1,"). */
static int split_list(char *buf, const char **items, int max) {
    int n = 0;
    for (char *p = buf;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (!*p || n >= max) return -1;
        items[n++] = p;
        if (!comma) break;
        p = comma + 1;
    }
    items[n] = NULL;
    return n;
}

/* "task", "task / dataset" or "task / dataset [variant]" for messages. */
static void fig_name(const nb_plot_figure *f, char *buf, size_t size) {
    char raw[1024];
    snprintf(raw, sizeof raw, "%s / %s%s%s%s", f->task, f->dataset, f->variant ? " [" : "",
             f->variant ? f->variant : "", f->variant ? "]" : "");
    nb_escape(buf, size, raw); /* stored strings: never raw to the terminal */
}

/* The default file base: normbench-TASK, or normbench-TASK-DATASET[-VARIANT] when the task has
 * several figures; unsafe characters become '_'. Returns its whole length (buf may hold less). */
static size_t default_base(const nb_plot_set *set, int k, char *buf, size_t size) {
    const nb_plot_figure *f = &set->figs[k];
    int several = 0, len;
    for (int i = 0; i < set->n; i++)
        several |= i != k && strcmp(set->figs[i].task, f->task) == 0;
    if (several)
        len = snprintf(buf, size, "normbench-%s-%s%s%s", f->task, f->dataset, f->variant ? "-" : "",
                       f->variant ? f->variant : "");
    else
        len = snprintf(buf, size, "normbench-%s", f->task);
    for (char *p = buf + strlen("normbench-"); *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            *p = '_';
    }
    return len < 0 ? 0 : (size_t)len;
}

/* The command line, for the script's header (where it is a quoted gnuplot string). */
static void command_line(int argc, const char **argv, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "normbench");
    for (int i = 0; i < argc && len < size; i++) {
        int quote = strpbrk(argv[i], " \t\n'\"$") != NULL;
        int w = snprintf(buf + len, size - len, quote ? " '%s'" : " %s", argv[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* The files of figure k: base (out_base, else the default), base.png and base.svg (each buffer
 * 4096 bytes or more). Returns 0, or -1 after printing an error when the default name is too
 * long for a file name. */
static int figure_files(const nb_plot_set *set, int k, const char *out_base, char *base, char *png,
                        char *svg) {
    if (out_base) {
        snprintf(base, 4096, "%s", out_base);
    } else if (default_base(set, k, base, 4096) > NB_PLOT_NAME_MAX) {
        char nm[160];
        fig_name(&set->figs[k], nm, sizeof nm); /* cut short: the name may be megabytes */
        fprintf(stderr,
                "error: the figure's name is too long for a file name: %s... (the default file "
                "is named after the task, dataset and variant; at most %d bytes)\n"
                "hint: name the files with --out FILE, or record a shorter --variant\n",
                nm, NB_PLOT_NAME_MAX);
        return -1;
    }
    snprintf(png, 4200, "%s.png", base);
    snprintf(svg, 4200, "%s.svg", base);
    return 0;
}

int cmd_plot(int argc, const char **argv) {
    const char *db = nb_default_db(), *task = NULL, *dataset = NULL, *variant = NULL;
    const char *metric_arg = NULL, *out = NULL, *status_arg = NULL, *seed_arg = NULL;
    int term = T_BOTH, xaxis = X_BOTH, max_points = 1000;
    double smooth = 0.6;
    nb_opt opts[] = {
        {.name = "task",
         .type = NB_OPT_STR,
         .dst = &task,
         .metavar = "T",
         .help = "only this task (default: every task in the store, a figure each)"},
        {.name = "dataset",
         .type = NB_OPT_STR,
         .dst = &dataset,
         .metavar = "NAME",
         .help = "only runs on this dataset"},
        {.name = "variant",
         .type = NB_OPT_STR,
         .dst = &variant,
         .metavar = "TEXT",
         .help = "only runs of this variant (as report shows it; '' for runs without one)",
         .empty_ok = 1},
        {.name = "metric",
         .type = NB_OPT_STR,
         .dst = &metric_arg,
         .metavar = "LIST",
         .help = "metrics to draw, a row each (default: train_loss and the task's eval metric)"},
        {.name = "x",
         .type = NB_OPT_CHOICE,
         .dst = &xaxis,
         .metavar = "AXIS",
         .help = "against steps, wall-clock seconds, or both side by side (default both)",
         .choices = xaxes},
        {.name = "out",
         .type = NB_OPT_STR,
         .dst = &out,
         .metavar = "FILE",
         .help = "FILE.png or FILE.svg, or FILE without extension for both"},
        {.name = "term",
         .type = NB_OPT_CHOICE,
         .dst = &term,
         .metavar = "T",
         .help = "images to write, or dumb: text on stdout (default png+svg)",
         .choices = terms},
        {.name = "smooth",
         .type = NB_OPT_DOUBLE,
         .dst = &smooth,
         .metavar = "X",
         .help = "EMA weight for the training loss, 0 (none) to 0.99 (default 0.6)",
         .min = 0,
         .max = 0.99},
        {.name = "status",
         .type = NB_OPT_STR,
         .dst = &status_arg,
         .metavar = "LIST",
         .help = "run statuses drawn, e.g. finished,diverged, or all (default finished)"},
        {.name = "seed",
         .type = NB_OPT_STR,
         .dst = &seed_arg,
         .metavar = "LIST",
         .help = "only runs with these seeds, e.g. 1 or 1,2, each once (default every seed)"},
        {.name = "max-points",
         .type = NB_OPT_INT,
         .dst = &max_points,
         .metavar = "N",
         .help = "points per line at most (default 1000)",
         .min = 2,
         .max = 1000000},
        NB_OPT_DB(&db),
        {0},
    };
    int rc = nb_parse_opts("plot", usage, argc, argv, opts, NULL, 0, NULL);
    if (rc == -1) return NB_EXIT_OK;
    if (rc) return rc;

    /* --status */
    char status_buf[256];
    const char *statuses[MAXSTAT + 1] = {"finished", NULL};
    if (status_arg && strcmp(status_arg, "all") == 0) {
        for (int i = 0; all_statuses[i]; i++)
            statuses[i] = all_statuses[i];
        statuses[6] = NULL;
    } else if (status_arg) {
        snprintf(status_buf, sizeof status_buf, "%s", status_arg);
        int n = split_list(status_buf, statuses, MAXSTAT);
        if (n <= 0)
            return nb_usage_error("plot",
                                  "invalid --status '%s': give a list such as "
                                  "finished,diverged, or all",
                                  status_arg);
        for (int i = 0; i < n; i++) {
            int ok = 0;
            for (int k = 0; all_statuses[k]; k++)
                ok |= strcmp(statuses[i], all_statuses[k]) == 0;
            if (!ok) {
                fprintf(stderr,
                        "error: unknown run status '%s' in --status\nhint: valid values are:",
                        statuses[i]);
                for (int k = 0; all_statuses[k]; k++)
                    fprintf(stderr, " %s", all_statuses[k]);
                fprintf(stderr, " all\n");
                return NB_EXIT_USAGE;
            }
        }
    }

    /* --seed */
    int64_t seeds[MAXSEED];
    int nseeds = 0;
    if (seed_arg) {
        char seed_buf[1024];
        const char *items[MAXSEED + 1];
        snprintf(seed_buf, sizeof seed_buf, "%s", seed_arg);
        int n = strlen(seed_arg) < sizeof seed_buf ? split_list(seed_buf, items, MAXSEED) : -1;
        for (int i = 0; i < n; i++) {
            long long v;
            if (nb_parse_int(items[i], &v) != 0) {
                n = -1;
                break;
            }
            for (int k = 0; k < nseeds; k++)
                if (seeds[k] == v) {
                    char shown[256];
                    return nb_usage_error("plot", "invalid --seed '%s': seed %lld is named twice",
                                          nb_escape(shown, sizeof shown, seed_arg), v);
                }
            seeds[nseeds++] = v;
        }
        if (n <= 0) {
            char shown[256];
            return nb_usage_error("plot",
                                  "invalid --seed '%s': give one or more whole numbers, "
                                  "comma-separated, none empty (at most %d), e.g. 1 or 1,2",
                                  nb_escape(shown, sizeof shown, seed_arg), MAXSEED);
        }
    }

    /* --metric */
    char metric_buf[1024];
    const char *metrics[MAXMET + 1] = {NULL};
    int nmetric = 0;
    if (metric_arg) {
        snprintf(metric_buf, sizeof metric_buf, "%s", metric_arg);
        nmetric = split_list(metric_buf, metrics, MAXMET);
        if (nmetric <= 0)
            return nb_usage_error("plot",
                                  "invalid --metric '%s': give one or more metric names, "
                                  "comma-separated (at most %d)",
                                  metric_arg, MAXMET);
    }

    /* --out and --term: which images */
    int want_png = term == T_BOTH || term == T_PNG, want_svg = term == T_BOTH || term == T_SVG;
    char out_base[4096] = "";
    if (out) {
        if (term == T_DUMB)
            return nb_usage_error("plot", "--out and --term dumb do not go together: dumb prints "
                                          "the figure on stdout");
        if (strcmp(out, "-") == 0)
            return nb_usage_error("plot", "--out - (stdout) is not possible: plot writes files "
                                          "(the image, FILE.gp and FILE-data/); --term dumb "
                                          "prints the figure on stdout");
        /* the name goes into the gnuplot script: refused before anything is written */
        if (!nb_text_clean(out)) {
            char shown[512];
            return nb_usage_error("plot",
                                  "invalid --out '%s': control characters and bytes that are not "
                                  "UTF-8 are not allowed in a file name here",
                                  nb_escape(shown, sizeof shown, out));
        }
        const char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
        const char *name = slash ? slash + 1 : out;
        if (!*name) return nb_usage_error("plot", "invalid --out '%s': give a file name", out);
        if (dot && dot > name) {
            int png = strcmp(dot, ".png") == 0, svg = strcmp(dot, ".svg") == 0;
            if (!png && !svg)
                return nb_usage_error("plot",
                                      "invalid --out '%s': the image must end in .png or .svg "
                                      "(or have no extension, for both)",
                                      out);
            if ((png && term == T_SVG) || (svg && term == T_PNG))
                return nb_usage_error("plot", "--out '%s' and --term %s disagree", out,
                                      terms[term]);
            want_png = png;
            want_svg = svg;
            snprintf(out_base, sizeof out_base, "%.*s", (int)(dot - out), out);
        } else {
            snprintf(out_base, sizeof out_base, "%s", out);
        }
    }

    nb_err err;
    nb_err_clear(&err);
    /* the name itself: a new one or a regular file (FILE.png, or FILE for both: never a device
     * or a directory, beside which the images would land); each file is checked again below */
    if (out && nb_out_check(out, "--out", NULL, &err)) return nb_report_err(&err);
    const char *oname = strrchr(out_base, '/') ? strrchr(out_base, '/') + 1 : out_base;
    if (out && strlen(oname) > NB_PLOT_NAME_MAX)
        return nb_usage_error("plot",
                              "invalid --out: the file name is too long (%zu bytes, at most %d "
                              "before .png or .svg)",
                              strlen(oname), NB_PLOT_NAME_MAX);
    nb_store *s = NULL;
    if (nb_store_open(&s, db, 1, &err)) return nb_report_err(&err);
    nb_plot_filter filter = {task, dataset, variant, statuses, seed_arg ? seeds : NULL, nseeds};
    nb_plot_set *set = NULL;
    rc = nb_plot_load(s, &filter, &set, &err);
    nb_store_close(s);
    if (rc) return nb_report_err(&err);
    if (set->n == 0) {
        const char *what = status_arg ? status_arg : "finished";
        fprintf(stderr, "error: no %s runs", what);
        if (task) fprintf(stderr, " of task '%s'", task);
        char shown[300]; /* the user's text, shown escaped and cut short */
        if (dataset) fprintf(stderr, " on dataset '%s'", nb_escape(shown, sizeof shown, dataset));
        if (variant) fprintf(stderr, " of variant '%s'", nb_escape(shown, sizeof shown, variant));
        if (seed_arg) fprintf(stderr, " with seed %s", seed_arg);
        fprintf(stderr, " in '%s'\n", db);
        fprintf(stderr,
                "hint: 'normbench runs --db %s' lists the runs; --status all draws "
                "unfinished ones too\n",
                db);
        nb_plot_set_free(set);
        return NB_EXIT_FAIL;
    }
    if (out && set->n > 1) {
        fprintf(stderr, "error: --out names one figure, but the runs make %d:", set->n);
        for (int k = 0; k < set->n; k++) {
            char nm[512];
            fig_name(&set->figs[k], nm, sizeof nm);
            fprintf(stderr, "%s '%s'", k ? "," : "", nm);
        }
        fprintf(stderr, "\nhint: choose one with --task, --dataset or --variant\n");
        nb_plot_set_free(set);
        return NB_EXIT_USAGE;
    }
    /* every metric asked for must exist; the defaults must find something */
    for (int k = 0; k < set->n; k++) {
        const nb_plot_figure *f = &set->figs[k];
        char nm[512], names[2048];
        fig_name(f, nm, sizeof nm);
        for (int i = 0; i < nmetric; i++)
            if (!nb_plot_has_metric(f, metrics[i])) {
                fprintf(stderr, "error: no metric '%s' in the runs of %s\n", metrics[i], nm);
                fprintf(stderr, "hint: the metrics they recorded are: ");
                nb_fputs_escaped(stderr, nb_plot_metric_names(f, names, sizeof names));
                fputc('\n', stderr);
                nb_plot_set_free(set);
                return NB_EXIT_USAGE;
            }
        const char *dm[3];
        if (nmetric == 0 && nb_figure_default_metrics(f, dm) == 0) {
            fprintf(stderr,
                    "error: the runs of %s recorded no training loss or evaluation "
                    "metric\nhint: choose one with --metric; they recorded: ",
                    nm);
            nb_fputs_escaped(stderr, nb_plot_metric_names(f, names, sizeof names));
            fputc('\n', stderr);
            nb_plot_set_free(set);
            return NB_EXIT_USAGE;
        }
    }

    char cmdline[2048];
    command_line(argc, argv, cmdline, sizeof cmdline);
    int cols = 120;
    const char *c = getenv("COLUMNS");
    if (c && strtol(c, NULL, 10) >= 60 && strtol(c, NULL, 10) <= 400)
        cols = (int)strtol(c, NULL, 10);
    rc = NB_EXIT_OK;
    /* every file of every figure checked first: nothing is written when one is refused */
    for (int k = 0; k < set->n && rc == NB_EXIT_OK; k++) {
        char base[4096], png[4200], svg[4200];
        if (figure_files(set, k, out ? out_base : NULL, base, png, svg) != 0) {
            rc = NB_EXIT_USAGE;
            break;
        }
        nb_plot_opts po = {.png = want_png ? png : NULL,
                           .svg = want_svg ? svg : NULL,
                           .base = base,
                           .dumb = term == T_DUMB};
        if (nb_plot_check_outputs(&po, &err)) rc = nb_report_err(&err);
    }
    for (int k = 0; k < set->n && rc == NB_EXIT_OK; k++) {
        const nb_plot_figure *f = &set->figs[k];
        const char *dm[3];
        int nm = nmetric ? nmetric : nb_figure_default_metrics(f, dm);
        char base[4096], png[4200], svg[4200];
        figure_files(set, k, out ? out_base : NULL, base, png, svg);
        nb_plot_opts po = {
            .metrics = nmetric ? metrics : dm,
            .nmetrics = nm,
            .x_step = xaxis != X_TIME,
            .x_time = xaxis != X_STEP,
            .smooth = smooth,
            .max_points = max_points,
            .png = want_png ? png : NULL,
            .svg = want_svg ? svg : NULL,
            .base = base,
            .dumb = term == T_DUMB,
            .dumb_cols = cols,
            .dumb_lines = 28 * nm,
            .gnuplot = "gnuplot",
            .command = cmdline,
        };
        char *text = NULL;
        if (nb_plot_render(f, &po, &text, &err)) {
            rc = nb_report_err(&err);
            break;
        }
        if (text) {
            if (k) putchar('\n');
            fputs(text, stdout);
            free(text);
        } else {
            if (po.png) printf("%s\n", po.png);
            if (po.svg) printf("%s\n", po.svg);
            fprintf(stderr, "plot: script '%s.gp' and data '%s-data/' kept beside the image\n",
                    base, base);
        }
    }
    nb_plot_set_free(set);
    return rc;
}
