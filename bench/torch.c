/* bench/torch.c — the same step timed in PyTorch beside normbench's: the subprocess protocol
 * and the paired comparison. (Moved from cmd/cmd_bench.c.) */
#include "bench/bench.h"

#include "nn/blas.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/cuda/nbcuda.h"
#include "nn/nn.h"
#include "run/mpi.h"
#include "tasks/task.h"
#include "util/json.h"

/* ---- against PyTorch ----------------------------------------------------------------------- */

/* `bench step TASK --against pytorch`: the task's step in normbench and in PyTorch, timed in
 * one session. The PyTorch side is a child process, compare/pytorch/driver.py (line protocol
 * in that file), so that rounds alternate between normbench's instances and the child's. */

typedef struct pyside {
    pid_t pid;
    FILE *to, *from;
    char *line;
    size_t cap;
    char settings[1024];
    int nextra;
    struct {
        char norm[32], variant[32], desc[128];
    } extra[8];
} pyside;

/* The next line from the child without its newline, or NULL at end of file. */
static const char *py_read(pyside *p) {
    ssize_t n = getline(&p->line, &p->cap, p->from);
    if (n < 0) return NULL;
    while (n > 0 && (p->line[n - 1] == '\n' || p->line[n - 1] == '\r'))
        p->line[--n] = '\0';
    return p->line;
}

static int py_send(pyside *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int py_send(pyside *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vfprintf(p->to, fmt, ap);
    va_end(ap);
    return rc < 0 || fflush(p->to) != 0 ? -1 : 0;
}

static void py_stop(pyside *p) {
    if (p->to) {
        py_send(p, "quit\n");
        fclose(p->to);
    }
    if (p->from) fclose(p->from);
    if (p->pid > 0) waitpid(p->pid, NULL, 0);
    free(p->line);
    memset(p, 0, sizeof *p);
}

/* The folder of the PyTorch scripts: $NORMBENCH_COMPARE_DIR, else compare/pytorch beside the
 * executable (the source tree). */
static void compare_dir(char *dir, size_t n) {
    const char *env = getenv("NORMBENCH_COMPARE_DIR");
    if (env && *env) {
        snprintf(dir, n, "%s", env);
        return;
    }
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(dir, n, "compare/pytorch");
        return;
    }
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    if (snprintf(dir, n, "%s/compare/pytorch", exe) >= (int)n) snprintf(dir, n, "compare/pytorch");
}

static int refuse_torch(const nb_bench_io *io, const char *python, const char *why) {
    nb_bench_say(
        io,
        "error: 'bench step --against pytorch' needs Python 3 with PyTorch: %s\n"
        "hint: apt-get install python3-torch (Debian's PyTorch for '/usr/bin/python3'), or set "
        "NORMBENCH_PYTHON to a Python that has torch (now '%s')\n",
        why, python);
    return NB_EXIT_FAIL;
}

/* Starts the child for task and reads its greeting. Returns 0, or an exit code after printing
 * the error. */
static int py_start(nb_bench *b, pyside *p, const nb_task *task, int threads) {
    memset(p, 0, sizeof *p);
    char dir[4096], driver[4200], script[4200], th[16];
    compare_dir(dir, sizeof dir);
    snprintf(driver, sizeof driver, "%s/driver.py", dir);
    snprintf(script, sizeof script, "%s/%s.py", dir, task->name);
    if (access(driver, R_OK) != 0) {
        nb_bench_say(
            &b->io,
            "error: cannot read the PyTorch driver '%s'\nhint: run normbench from its source "
            "tree, or set NORMBENCH_COMPARE_DIR to the compare/pytorch folder\n",
            driver);
        return NB_EXIT_FAIL;
    }
    if (access(script, R_OK) != 0) {
        nb_bench_say(
            &b->io,
            "error: task '%s' has no PyTorch script ('%s')\nhint: a task joins the comparison "
            "by adding compare/pytorch/%s.py (see compare/pytorch/driver.py)\n",
            task->name, script, task->name);
        return NB_EXIT_FAIL;
    }
    const char *python = getenv("NORMBENCH_PYTHON");
    if (!python || !*python)
        python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    snprintf(th, sizeof th, "%d", threads);
    int in[2], out[2];
    if (pipe(in) != 0) return nb_bench_fail(&b->io, "cannot create a pipe: %s", strerror(errno));
    if (pipe(out) != 0) {
        close(in[0]), close(in[1]);
        return nb_bench_fail(&b->io, "cannot create a pipe: %s", strerror(errno));
    }
    fflush(b->io.out);
    fflush(stderr);
    /* the task's own options (mt's --model, --dim) go to the PyTorch side too, as --name=value
     * (a flag as --name), built before the fork */
    char *argv[4 + MAXGIVEN + 1];
    int na = 0, bad = 0;
    argv[na++] = (char *)python;
    argv[na++] = driver;
    argv[na++] = (char *)task->name;
    argv[na++] = th;
    for (int k = 0; k < b->ngiven; k++) {
        size_t len = strlen(b->given[k].name) + (b->given[k].value ? strlen(b->given[k].value) : 0);
        char *a = malloc(len + 4);
        if (!a) {
            bad = 1;
            break;
        }
        snprintf(a, len + 4, "--%s%s%s", b->given[k].name, b->given[k].value ? "=" : "",
                 b->given[k].value ? b->given[k].value : "");
        argv[na++] = a;
    }
    argv[na] = NULL;
    pid_t pid = bad ? -1 : fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execvp(python, argv);
        _exit(127);
    }
    for (int k = 4; k < na; k++)
        free(argv[k]);
    if (pid < 0) {
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        return bad ? nb_bench_fail(&b->io, "out of memory")
                   : nb_bench_fail(&b->io, "cannot start '%s': %s", python, strerror(errno));
    }
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    if (!p->to || !p->from) {
        py_stop(p);
        return nb_bench_fail(&b->io, "out of memory");
    }
    const char *l = py_read(p);
    if (!l) {
        int st = 0;
        waitpid(p->pid, &st, 0);
        p->pid = 0;
        py_stop(p);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            return refuse_torch(&b->io, python, "the Python interpreter could not be started");
        return refuse_torch(&b->io, python, "the PyTorch driver exited without a word");
    }
    if (strncmp(l, "error no-torch", 14) == 0) {
        char why[512];
        snprintf(why, sizeof why, "'import torch' failed (%s)", l[14] ? l + 15 : "");
        py_stop(p);
        return refuse_torch(&b->io, python, why);
    }
    if (strcmp(l, "hello normbench-compare 1") != 0) {
        nb_bench_say(&b->io, "error: the PyTorch driver '%s' said '%s' instead of hello\n", driver,
                     l);
        py_stop(p);
        return NB_EXIT_FAIL;
    }
    while ((l = py_read(p)) && strcmp(l, "ready") != 0) {
        if (strncmp(l, "settings ", 9) == 0)
            snprintf(p->settings, sizeof p->settings, "%s", l + 9);
        else if (strncmp(l, "error options ", 14) == 0) {
            nb_bench_say(
                &b->io,
                "error: the PyTorch side of 'bench step %s' cannot take these options: %s\n"
                "hint: leave the option out, or time normbench alone (without --against)\n",
                task->name, l + 14);
            py_stop(p);
            return NB_EXIT_USAGE;
        } else if (strncmp(l, "extra ", 6) == 0 && p->nextra < 8) {
            int at = 0;
            if (sscanf(l + 6, "%31s %31s %n", p->extra[p->nextra].norm, p->extra[p->nextra].variant,
                       &at) == 2) {
                snprintf(p->extra[p->nextra].desc, sizeof p->extra[0].desc, "%s", l + 6 + at);
                p->nextra++;
            }
        }
    }
    if (!l) {
        py_stop(p);
        return nb_bench_fail(&b->io, "the PyTorch driver '%s' exited before it was ready", driver);
    }
    return 0;
}

/* One row of the comparison: a normbench norm row, or one of PyTorch's forms of it. */
typedef struct cmp_row {
    int norm;            /* index into the norms list */
    const char *variant; /* PyTorch's variant, NULL for the task's own form */
    int id;              /* PyTorch instance id; -1 when it could not be opened */
    char desc[160];      /* PyTorch's description of its model, or why it is missing */
    double *t;           /* PyTorch's samples (ms) */
    double last;         /* its last step's time (ms), warm-up included */
    int filled;
} cmp_row;

/* n steps of PyTorch instance id into t; returns how many it parsed (n, or less on failure). */
static int py_steps(pyside *p, int id, int n, double *t) {
    if (py_send(p, "step %d %d\n", id, n) != 0) return 0;
    const char *l = py_read(p);
    if (!l || strncmp(l, "ms ", 3) != 0) return 0;
    const char *q = l + 3;
    int k = 0;
    while (k < n) {
        char *end;
        double v = strtod(q, &end);
        if (end == q) break;
        t[k++] = v;
        q = end;
    }
    return k;
}

/* A comparison under way: its parameters, both sides' instances and samples (nb_bench_against's
 * steps share it). */
typedef struct cmp_run {
    nb_bench *b;
    const nb_task *task;
    const int *norms;
    int nnorms, iters, fmt;
    char settings[1024];
    nb_bench_stamp_t stamp; /* where and when (the CSV's machine and date) */
    pyside py;
    cmp_row *rows; /* per norm its own form, then PyTorch's extra forms of that norm */
    int nrows, nw, next_id;
    void **inst;
    double *nat, *boot, *pt;
    int *nfilled;
} cmp_run;

static void cmp_free(cmp_run *c) {
    free(c->rows), free(c->inst), free(c->nat), free(c->boot), free(c->pt), free(c->nfilled);
}

/* The table's heading. */
static void cmp_header(cmp_run *c) {
    FILE *tab = c->b->io.out;
    const nb_task *task = c->task;
    const int iters = c->iters, fmt = c->fmt, nw = c->nw;
    pyside *py = &c->py;
    if (fmt == FMT_TABLE) {
        fprintf(tab, "# normbench: %s\n# pytorch:   %s\n", c->settings, py->settings);
        fprintf(tab,
                "# %s: %d timed steps per row after >= 0.3 s of warm-up, normbench's and PyTorch's "
                "instances interleaved in rounds of %d steps or %d ms;\n# ratio = PyTorch's "
                "median / normbench's median (> 1: normbench is faster), and its 95%% bootstrap "
                "interval\n",
                task->name, iters, ROUND, ROUND_MS);
        fprintf(tab, "%-6s %-*s %6s %12s %11s %8s %17s  %s\n", "task", nw, "norm", "batch",
                "normbench_ms", "pytorch_ms", "ratio", "ratio_95%", "pytorch");
    } else if (fmt == FMT_CSV) {
        fprintf(tab,
                "task,norm,batch,pytorch_variant,normbench_ms,pytorch_ms,ratio,ratio_lo,ratio_hi,"
                "steps,threads,settings,pytorch_settings,pytorch_model,machine,date\n");
    } else {
        fprintf(tab, "{\"settings\": ");
        nb_json_str(tab, c->settings);
        fprintf(tab, ", \"pytorch_settings\": ");
        nb_json_str(tab, py->settings);
        fprintf(tab, ", \"threads\": %d, \"steps\": %d, \"results\": [", omp_get_max_threads(),
                iters);
    }
}

/* Opens both sides' instances at batch B and warms PyTorch's up. Returns 0, 1 (err set) or 2
 * (the driver stopped answering). */
static int cmp_open(cmp_run *c, int B, nb_err *err) {
    nb_bench *b = c->b;
    const nb_task *task = c->task;
    const int *norms = c->norms;
    const int nnorms = c->nnorms, nrows = c->nrows;
    cmp_row *rows = c->rows;
    void **inst = c->inst;
    int *nfilled = c->nfilled;
    pyside *py = &c->py;
    int failed = 0;
    for (int i = 0; i < nnorms; i++) {
        inst[i] = NULL;
        nfilled[i] = 0;
        if (nb_norm_get(nb_bench_row_kind(b, norms[i]))->acts == NB_ON_FEATURES && B < 2) continue;
        if (!(inst[i] = nb_bench_open_native(b, task, norms[i], B, 0, err))) {
            failed = 1;
            break;
        }
    }
    for (int r = 0; r < nrows && !failed; r++) {
        cmp_row *w = &rows[r];
        w->filled = 0;
        w->id = -1;
        if (!inst[w->norm]) {
            snprintf(w->desc, sizeof w->desc, "-");
            continue;
        }
        int id = c->next_id++;
        if (py_send(py, "open %d %s %s %d\n", id, nb_bench_row_name(b, norms[w->norm]),
                    w->variant ? w->variant : "-", B) != 0) {
            failed = 2;
            break;
        }
        const char *l = py_read(py);
        if (!l) {
            failed = 2;
            break;
        }
        snprintf(w->desc, sizeof w->desc, "%s", strncmp(l, "ok ", 3) == 0 ? l + 3 : l);
        if (strncmp(l, "ok ", 3) != 0) continue;
        w->id = id;
        /* warm-up: at least 5 steps and 0.3 s */
        double warm[8], spent = 0;
        for (int k = 0; k < 100 && (k == 0 || spent < 300); k++) {
            int n = k == 0 ? 5 : 1, got = py_steps(py, id, n, warm);
            if (got != n) {
                failed = 2;
                break;
            }
            for (int j = 0; j < n; j++)
                spent += warm[j];
            w->last = warm[n - 1];
        }
        if (failed) break;
    }
    return failed;
}

/* rounds: every instance of both sides ROUND steps (or ROUND_MS) in turn, starting one
 * further on; PyTorch's steps asked for as many as its last step's time fits. Returns 0 or 2
 * (the driver stopped answering). */
static int cmp_rounds(cmp_run *c) {
    const nb_task *task = c->task;
    const int nnorms = c->nnorms, iters = c->iters, nrows = c->nrows;
    cmp_row *rows = c->rows;
    void **inst = c->inst;
    double *nat = c->nat;
    int *nfilled = c->nfilled;
    pyside *py = &c->py;
    int failed = 0;
    int nall = nnorms + nrows;
    for (int rd = 0; !failed; rd++) {
        int more = 0;
        for (int j = 0; j < nall && !failed; j++) {
            int k = (j + rd) % nall;
            if (k < nnorms) {
                if (!inst[k]) continue;
                double spent = 0;
                for (int t = 0; t < ROUND && nfilled[k] < iters && spent < ROUND_MS; t++) {
                    double ms = 1e3 * task->bench_step(inst[k]);
                    nat[(size_t)k * iters + nfilled[k]++] = ms;
                    spent += ms;
                }
                more |= nfilled[k] < iters;
            } else {
                cmp_row *w = &rows[k - nnorms];
                if (w->id < 0 || w->filled >= iters) continue;
                int n = iters - w->filled < ROUND ? iters - w->filled : ROUND;
                if (w->last > 0 && ROUND_MS / w->last < n)
                    n = ROUND_MS / w->last >= 1 ? (int)(ROUND_MS / w->last) : 1;
                if (py_steps(py, w->id, n, w->t + w->filled) != n) failed = 2;
                w->filled += n;
                w->last = w->t[w->filled - 1];
                more |= w->filled < iters;
            }
        }
        if (!more) break;
    }
    return failed;
}

/* Row r at batch B: both medians, their ratio and its interval. */
static void cmp_row_print(cmp_run *c, int r, int B, int *first_p) {
    FILE *tab = c->b->io.out;
    nb_bench *b = c->b;
    const nb_task *task = c->task;
    const int *norms = c->norms;
    const int iters = c->iters, fmt = c->fmt, nw = c->nw;
    cmp_row *rows = c->rows;
    void **inst = c->inst;
    double *nat = c->nat, *boot = c->boot;
    int *nfilled = c->nfilled;
    pyside *py = &c->py;
    int first = *first_p;
    cmp_row *w = &rows[r];
    int i = w->norm;
    const char *name = nb_bench_row_name(b, norms[i]);
    double *v = nat + (size_t)i * iters;
    double nmed = NAN, pmed = NAN, lo = NAN, hi = NAN;
    if (inst[i] && nfilled[i] == iters) {
        if (w->id >= 0 && w->filled == iters)
            nb_bench_ratio_interval(w->t, iters, v, iters, boot, &lo, &hi);
        memcpy(boot, v, sizeof(double) * (size_t)iters);
        nmed = nb_bench_median(boot, iters);
    }
    if (w->id >= 0 && w->filled == iters) {
        memcpy(boot, w->t, sizeof(double) * (size_t)iters);
        pmed = nb_bench_median(boot, iters);
    }
    double ratio = pmed / nmed;
    if (fmt == FMT_TABLE) {
        if (isnan(nmed)) {
            if (!w->variant)
                fprintf(tab, "%-6s %-*s %6d %12s   (batch norm needs a batch of 2 or more)\n",
                        task->name, nw, name, B, "-");
            return;
        }
        char p[32], ra[32], ci[48];
        snprintf(p, sizeof p, isnan(pmed) ? "-" : "%.3f", pmed);
        snprintf(ra, sizeof ra, isnan(ratio) ? "-" : "%.3fx", ratio);
        if (isnan(lo))
            snprintf(ci, sizeof ci, "-");
        else
            snprintf(ci, sizeof ci, "[%.3f,%.3f]", lo, hi);
        fprintf(tab, "%-6s %-*s %6d %12.3f %11s %8s %17s  %s\n", task->name, nw, name, B, nmed, p,
                ra, ci, w->desc);
    } else if (fmt == FMT_CSV) {
        if (isnan(nmed)) return;
        fprintf(tab, "%s,%s,%d,%s,%.4f,", task->name, name, B, w->variant ? w->variant : "", nmed);
        if (!isnan(pmed))
            fprintf(tab, "%.4f,%.4f,%.4f,%.4f", pmed, ratio, lo, hi);
        else
            fprintf(tab, ",,,");
        fprintf(tab, ",%d,%d,", iters, omp_get_max_threads());
        nb_csv_field(tab, c->settings);
        fputc(',', tab);
        nb_csv_field(tab, py->settings);
        fputc(',', tab);
        nb_csv_field(tab, w->desc);
        nb_bench_csv_stamp(tab, &c->stamp);
        fputc('\n', tab);
    } else {
        if (isnan(nmed)) return;
        fprintf(tab, "%s{\"task\": \"%s\", \"norm\": \"%s\", \"batch\": %d, \"pytorch_variant\": ",
                first ? "" : ", ", task->name, name, B);
        if (w->variant)
            nb_json_str(tab, w->variant);
        else
            fprintf(tab, "null");
        fprintf(tab, ", \"normbench_ms\": ");
        nb_json_num(tab, nmed);
        fprintf(tab, ", \"pytorch_ms\": ");
        nb_json_num(tab, pmed);
        fprintf(tab, ", \"ratio\": ");
        nb_json_num(tab, ratio);
        fprintf(tab, ", \"ratio_lo\": ");
        nb_json_num(tab, lo);
        fprintf(tab, ", \"ratio_hi\": ");
        nb_json_num(tab, hi);
        fprintf(tab, ", \"pytorch_model\": ");
        nb_json_str(tab, w->desc);
        fputc('}', tab);
        first = 0;
    }
    *first_p = first;
}

int nb_bench_against(nb_bench *b, const nb_task *task, const int *norms, int nnorms,
                     const int *batches, int nbatches, int iters, int fmt) {
    FILE *tab = b->io.out;
    cmp_run *c = calloc(1, sizeof *c);
    if (!c) return nb_bench_fail(&b->io, "out of memory");
    *c = (cmp_run){
        .b = b, .task = task, .norms = norms, .nnorms = nnorms, .iters = iters, .fmt = fmt};
    nb_bench_settings_line(c->settings, sizeof c->settings);
    nb_bench_stamp(&c->stamp);
    int rc = py_start(b, &c->py, task, omp_get_max_threads());
    if (rc) {
        free(c);
        return rc;
    }
    pyside *py = &c->py;
    int maxrows = nnorms * (1 + py->nextra);
    c->rows = calloc((size_t)maxrows, sizeof *c->rows);
    c->inst = calloc((size_t)nnorms, sizeof *c->inst);
    c->nat = malloc(sizeof(double) * (size_t)nnorms * iters);
    c->boot = malloc(sizeof(double) * 2 * (size_t)iters);
    c->pt = malloc(sizeof(double) * (size_t)maxrows * iters);
    c->nfilled = calloc((size_t)nnorms, sizeof(int));
    if (!c->rows || !c->inst || !c->nat || !c->boot || !c->pt || !c->nfilled) {
        py_stop(py);
        cmp_free(c);
        free(c);
        return nb_bench_fail(&b->io, "out of memory");
    }
    for (int i = 0; i < nnorms; i++) {
        c->rows[c->nrows++] = (cmp_row){.norm = i};
        for (int e = 0; e < py->nextra; e++)
            if (strcmp(py->extra[e].norm, nb_bench_row_name(b, norms[i])) == 0)
                c->rows[c->nrows++] = (cmp_row){.norm = i, .variant = py->extra[e].variant};
    }
    for (int r = 0; r < c->nrows; r++)
        c->rows[r].t = c->pt + (size_t)r * iters;
    c->nw = 7;
    for (int i = 0; i < nnorms; i++)
        if ((int)strlen(nb_bench_row_name(b, norms[i])) > c->nw)
            c->nw = (int)strlen(nb_bench_row_name(b, norms[i]));
    cmp_header(c);
    int first = 1;
    for (int bi = 0; bi < nbatches; bi++) {
        nb_err err;
        nb_err_clear(&err);
        int B = batches[bi];
        int failed = cmp_open(c, B, &err);
        if (!failed) failed = cmp_rounds(c);
        for (int r = 0; r < c->nrows && failed != 2; r++)
            if (c->rows[r].id >= 0) {
                py_send(py, "close %d\n", c->rows[r].id);
                py_read(py);
            }
        for (int i = 0; i < nnorms; i++)
            if (c->inst[i]) task->bench_close(c->inst[i]);
        if (failed) {
            py_stop(py);
            cmp_free(c);
            free(c);
            if (failed == 2)
                return nb_bench_fail(&b->io, "the PyTorch driver stopped answering (see above)");
            return nb_bench_report(&b->io, &err);
        }
        for (int r = 0; r < c->nrows; r++)
            cmp_row_print(c, r, B, &first);
        fflush(tab);
    }
    if (fmt == FMT_JSON) fprintf(tab, "]}\n");
    py_stop(py);
    cmp_free(c);
    free(c);
    return NB_EXIT_OK;
}
