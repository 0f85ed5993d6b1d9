/* cmd/cmd_fetch.c — `normbench fetch DATASET`: download (or import), verify, unpack, install.
 * Also the fetch-on-first-use that `run` does (nb_cmd_ensure_dataset). */
#include "cmd/cmd.h"

#include "datasets/dataset.h"
#include "util/num.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static const char fetch_usage[] =
    "usage: normbench fetch DATASET [--data-dir DIR] [--mirror URL] [--from FILE]\n"
    "                       [--min-rate BYTES] [--rate-window SECONDS] [--timeout SECONDS]\n\n"
    "Downloads DATASET (see 'normbench datasets'), verifies it against its pinned checksums\n"
    "(or the digest recorded at its first download where upstream publishes none), unpacks the\n"
    "files it needs into DATA/DATASET/ and only then makes that directory appear. An\n"
    "interrupted download (Ctrl-C, a dropped connection) resumes on the next fetch. A dataset\n"
    "already present is re-verified; --from on an installed dataset is refused (remove its\n"
    "directory first to install it from that file).\n\n"
    "A --from file must be a regular file (or a symbolic link to one) no larger than the\n"
    "dataset's file can be: a device, FIFO or directory in its place is refused. Every gzip\n"
    "stream is read to its end and its CRC-32 and length checked. A download slower than\n"
    "--min-rate bytes/s on average over --rate-window seconds (default 1024 over 30) is\n"
    "dropped and retried; one file's download that takes longer than --timeout seconds,\n"
    "retries included (default 3600; 0: none), is given up, its partial file kept for the next\n"
    "fetch. Ctrl-C or SIGTERM stops any stage within a moment (exit status 130 or 143).\n\n"
    "environment: NORMBENCH_DATA (data directory), NORMBENCH_MIRROR (as --mirror);\n"
    "NORMBENCH_FETCH_MIN_RATE, NORMBENCH_FETCH_RATE_WINDOW, NORMBENCH_FETCH_TIMEOUT (the three\n"
    "options, also for the fetch that 'run' does on a dataset's first use)\n";

typedef struct bar {
    int tty, width, drawn, quiet;
    double last;
    char stage[16];
    char file[128];
} bar;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void human(char *out, size_t n, int64_t b) {
    if (b >= (int64_t)1 << 30)
        snprintf(out, n, "%.2f GiB", (double)b / (double)((int64_t)1 << 30));
    else if (b >= (int64_t)1 << 20)
        snprintf(out, n, "%.1f MiB", (double)b / (double)((int64_t)1 << 20));
    else if (b >= 1024)
        snprintf(out, n, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(out, n, "%lld B", (long long)b);
}

/* A live bar on a terminal (at most 10 redraws a second), plain lines otherwise (each stage,
 * and a download line at most every 5 s). */
static void on_progress(void *ctx, const char *stage, const char *file, int64_t done,
                        int64_t total) {
    bar *b = ctx;
    if (b->quiet) return;
    double t = now_s();
    int changed = strcmp(stage, b->stage) != 0 || strcmp(file, b->file) != 0;
    if (!changed && t - b->last < (b->tty ? 0.1 : 5.0)) return;
    b->last = t;
    snprintf(b->stage, sizeof b->stage, "%s", stage);
    snprintf(b->file, sizeof b->file, "%s", file);
    char d[32], tot[32], line[512];
    human(d, sizeof d, done);
    if (strcmp(stage, "download") == 0) {
        if (total > 0) {
            human(tot, sizeof tot, total);
            snprintf(line, sizeof line, "download %s  %s / %s  %3.0f%%", file, d, tot,
                     100.0 * (double)done / (double)total);
        } else {
            snprintf(line, sizeof line, "download %s  %s", file, d);
        }
    } else {
        snprintf(line, sizeof line, "%s %s", stage, file);
    }
    if (b->tty) {
        if ((int)strlen(line) > b->width - 1) line[b->width - 1] = '\0';
        fprintf(stderr, "\r\033[K%s", line);
        b->drawn = 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

static void bar_end(bar *b) {
    if (b->tty && b->drawn) fputc('\n', stderr);
    b->drawn = 0;
}

static void bar_init(bar *b, int quiet) {
    memset(b, 0, sizeof *b);
    b->quiet = quiet;
    b->tty = isatty(STDERR_FILENO);
    b->width = 80;
    struct winsize ws;
    if (b->tty && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        b->width = ws.ws_col;
}

static volatile sig_atomic_t fetch_stop = 0;

static void on_sigint(int sig) {
    fetch_stop = sig; /* which signal: the exit status says it */
}

/* The download limits from the environment into o (options given on the command line override
 * them later). Returns 0, or NB_EXIT_USAGE after printing which variable is wrong. */
static int limits_from_env(nb_fetch_opts *o) {
    static const char *const names[] = {"NORMBENCH_FETCH_MIN_RATE", "NORMBENCH_FETCH_RATE_WINDOW",
                                        "NORMBENCH_FETCH_TIMEOUT"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        long long x;
        if (!v || !*v) continue;
        if (nb_parse_int(v, &x) || x < (i == 2 ? 0 : 1) || x > (i == 0 ? 1000000000LL : 604800))
            return nb_usage_error("fetch", "invalid %s '%s' (%s)", names[i], v,
                                  i == 0   ? "bytes per second, 1 or more"
                                  : i == 1 ? "seconds, 1 to 604800"
                                           : "seconds, 0 (none) to 604800");
        if (i == 0) o->dl.min_rate = x;
        if (i == 1) o->dl.stall_s = (int)x;
        if (i == 2) o->dl.timeout_s = x == 0 ? -1 : (int)x;
    }
    return 0;
}

/* Runs the install with Ctrl-C/SIGTERM stopping it cleanly. Returns an exit status. */
static int do_ensure(const char *name, const char *data_dir, nb_fetch_opts *o, int quiet,
                     const char *what) {
    nb_err err;
    nb_err_clear(&err);
    if (nb_download_global_init(&err)) return nb_report_err(&err);
    bar b;
    bar_init(&b, quiet);
    o->progress = on_progress;
    o->progress_ctx = &b; // cppcheck-suppress autoVariables ; used only during this call
    o->stop = &fetch_stop;
    fetch_stop = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = nb_dataset_ensure(name, data_dir, o, &err);
    o->progress_ctx = NULL;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    bar_end(&b);
    if (rc && fetch_stop) {
        /* stopped by a signal: say so, and exit as the shell does for one (128 + its number) */
        if (!err.hint[0]) nb_hintf(&err, "run the same command again to resume");
        nb_report_err(&err);
        return 128 + (int)fetch_stop;
    }
    if (rc) return nb_report_err(&err);
    if (what && !quiet) {
        char dir[4096];
        nb_dataset_dir(name, data_dir, dir, sizeof dir);
        fprintf(stderr, "%s: '%s' in '%s'\n", what, name, dir);
    }
    return NB_EXIT_OK;
}

int nb_cmd_ensure_dataset(const char *name, const char *data_dir, int no_fetch, int quiet) {
    const nb_dataset *d = nb_registry_find(name);
    /* not a registry dataset (synthetic), or files a user put in DATA/NAME by hand: the task's
     * loader checks them */
    if (!d || nb_dataset_state(d, data_dir, 0, NULL) == NB_DS_UNMANAGED) return NB_EXIT_OK;
    nb_fetch_opts o;
    memset(&o, 0, sizeof o);
    o.no_fetch = no_fetch;
    const char *m = getenv("NORMBENCH_MIRROR");
    if (m && *m) o.mirror = m;
    int rc = limits_from_env(&o);
    if (rc) return rc;
    return do_ensure(name, data_dir, &o, quiet, NULL);
}

int cmd_fetch(int argc, const char **argv) {
    const char *data_dir = NULL, *mirror = NULL, *from = NULL;
    int quiet = 0;
    long long min_rate = 0, window = 0, timeout = 0;
    nb_opt opts[] = {
        {"data-dir", NB_OPT_STR, &data_dir, "DIR", "data directory (NORMBENCH_DATA)"},
        {"mirror", NB_OPT_STR, &mirror, "URL",
         "replace every URL's scheme and host (NORMBENCH_MIRROR); always downloads"},
        {"from", NB_OPT_STR, &from, "FILE",
         "import a copy downloaded elsewhere (mnist, fashion-mnist: the directory of the files)"},
        {"min-rate", NB_OPT_I64, &min_rate, "BYTES",
         "slowest average download rate, bytes/s, over --rate-window (default 1024)", NULL, 1, 1e9},
        {"rate-window", NB_OPT_I64, &window, "SECONDS",
         "window --min-rate is averaged over (default 30)", NULL, 1, 604800},
        {"timeout", NB_OPT_I64, &timeout, "SECONDS",
         "give up a file's download after this long, retries included (default 3600; 0: never)",
         NULL, 0, 604800},
        {"quiet", NB_OPT_FLAG, &quiet, NULL, "no progress output"},
        {NULL},
    };
    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("fetch", fetch_usage, argc, argv, opts, pos, 1, &npos);
    if (rc) return rc < 0 ? NB_EXIT_OK : rc;
    if (npos < 1) return nb_usage_error("fetch", "which dataset? see 'normbench datasets'");
    const nb_dataset *d = nb_registry_find(pos[0]);
    if (!d) {
        fprintf(stderr, "error: unknown dataset '%s'\nhint: the datasets are:", pos[0]);
        for (int i = 0; i < nb_registry_count(); i++)
            fprintf(stderr, " %s", nb_registry_at(i)->name);
        fputc('\n', stderr);
        return NB_EXIT_USAGE;
    }
    if (!mirror) {
        const char *m = getenv("NORMBENCH_MIRROR");
        if (m && *m) mirror = m;
    }
    if (mirror && from) return nb_usage_error("fetch", "give --mirror or --from, not both");
    nb_fetch_opts o;
    memset(&o, 0, sizeof o);
    o.mirror = mirror;
    o.from = from;
    o.verify = 1;
    rc = limits_from_env(&o);
    if (rc) return rc;
    if (opts[3].seen) o.dl.min_rate = min_rate;
    if (opts[4].seen) o.dl.stall_s = (int)window;
    if (opts[5].seen) o.dl.timeout_s = timeout == 0 ? -1 : (int)timeout;
    return do_ensure(d->name, data_dir ? data_dir : nb_default_data_dir(), &o, quiet, "verified");
}
