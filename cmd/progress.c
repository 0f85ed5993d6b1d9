/* cmd/progress.c — see progress.h. */
#include "cmd/progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void nb_progress_init(nb_progress_line *pl, int quiet) {
    memset(pl, 0, sizeof *pl);
    pl->quiet = quiet;
    pl->tty = isatty(STDERR_FILENO);
    pl->width = 80;
    struct winsize ws;
    if (pl->tty && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        pl->width = ws.ws_col;
    pl->last_draw = -1;
    pl->last_plain = 0;
}

static void fmt_time(char *out, size_t n, double s) {
    if (!isfinite(s) || s < 0) {
        snprintf(out, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
}

static int format_line(char *buf, size_t n, const nb_progress *p) {
    char eta[32], el[32];
    double left = p->steps_per_s > 0 ? (double)(p->steps - p->step) / p->steps_per_s : NAN;
    fmt_time(eta, sizeof eta, left);
    fmt_time(el, sizeof el, p->elapsed);
    /* No loss logged yet (e.g. an evaluation before the first --log-every step) is NaN here: "-",
     * not "nan", which reads as divergence (a NaN training loss ends the run before this). */
    char loss[32] = "-";
    if (isfinite(p->loss)) snprintf(loss, sizeof loss, "%.4f", p->loss);
    /* the rate with its digits: a slow task (a translation step takes seconds) reads in s/step,
     * not as "0 steps/s" */
    char rate[32] = "- steps/s";
    const double r = p->steps_per_s;
    if (r >= 10)
        snprintf(rate, sizeof rate, "%.0f steps/s", r);
    else if (r >= 1)
        snprintf(rate, sizeof rate, "%.1f steps/s", r);
    else if (r > 0)
        snprintf(rate, sizeof rate, "%.2f s/step", 1 / r);
    return snprintf(buf, n, "epoch %d/%d  step %lld/%lld  loss %s  %s  %s  ETA %s%s", p->epoch,
                    p->epochs, (long long)p->step, (long long)p->steps, loss, rate, el, eta,
                    strcmp(p->phase, "eval") == 0 ? "  (evaluating)" : "");
}

void nb_progress_draw(nb_progress_line *pl, const nb_progress *p) {
    if (pl->quiet) return;
    char buf[256];
    if (pl->tty) {
        int eval = strcmp(p->phase, "eval") == 0;
        if (!eval && pl->last_draw >= 0 && p->elapsed - pl->last_draw < 0.1) return;
        pl->last_draw = p->elapsed;
        format_line(buf, sizeof buf, p);
        if ((int)strlen(buf) > pl->width - 1) buf[pl->width - 1] = '\0';
        fprintf(stderr, "\r\033[K%s", buf);
        fflush(stderr);
        pl->drawn = 1;
        return;
    }
    /* Not a terminal: a line at each evaluation and at most every 10 seconds. */
    int eval = strcmp(p->phase, "eval") == 0;
    if (!eval && p->elapsed - pl->last_plain < 10) return;
    pl->last_plain = p->elapsed;
    format_line(buf, sizeof buf, p);
    fprintf(stderr, "%s\n", buf);
}

void nb_progress_end(nb_progress_line *pl) {
    if (pl->tty && pl->drawn) fputc('\n', stderr);
    pl->drawn = 0;
}
