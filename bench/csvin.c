/* bench/csvin.c — `bench --from FILE`: a kept `bench ... --format csv` file read back and shown
 * as a table (aligned text, or Markdown for the results pages), with the machine, threads, BLAS
 * and date it holds and the ratios with their intervals as bench prints them.
 *
 * A file is one benchmark's output: its header names the benchmark (kernels on the CPU or the
 * GPU, conv, step, step under mpirun, step --against pytorch) and the version (the first
 * version had no machine and date columns: those print as "not recorded"). A header of any
 * other shape, a row with another number of fields, a value that is not a number where one is
 * due, a row whose run-wide values (threads, settings, machine, date...) differ from the first
 * row's, and a file cut inside a line are refused, naming the file and the line. */
#include "bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/csv.h"
#include "util/file.h"
#include "util/num.h"
#include "util/text.h"

enum { K_KERNELS, K_KERNELS_CUDA, K_CONV, K_STEP, K_AGAINST };
enum { MAXCOL = 32, MAXROWS = 100000 };
enum { MAX_FILE = 16 << 20, MAX_LINE = 64 << 10 };

/* The benchmarks' CSV headers: the columns of the first version; a step under mpirun adds the
 * first group, with --against threads the second too; the second version ends with TAIL. */
static const struct kind {
    const char *head, *group1, *group2, *what;
} kinds[] = {
    [K_KERNELS] = {"shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,threads,settings", NULL,
                   NULL, "bench kernels"},
    [K_KERNELS_CUDA] = {"shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,dtype,device",
                        NULL, NULL, "bench kernels --device cuda"},
    [K_CONV] = {"layer,count,sums,pass,im2col_ms,wino2_ms,wino4_ms,im2col_over_wino2,lo2,hi2,"
                "im2col_over_wino4,lo4,hi4,batch,threads,settings",
                NULL, NULL, "bench conv"},
    [K_STEP] = {"task,norm,batch,ms_per_step,ms_mean,ms_std,vs_layer,steps,threads,settings,"
                "norm_share,gflop_per_s,vs_layer_lo,vs_layer_hi",
                ",ranks,allreduce_share,allreduce_ms,allreduce_bytes",
                ",one_process_threads,one_process_ms,vs_one_process", "bench step"},
    [K_AGAINST] = {"task,norm,batch,pytorch_variant,normbench_ms,pytorch_ms,ratio,ratio_lo,"
                   "ratio_hi,steps,threads,settings,pytorch_settings,pytorch_model",
                   NULL, NULL, "bench step --against pytorch"},
};
static const char tail[] = ",machine,date";

/* What a column holds: text (T: may be empty; R: required), a count (I: a positive integer),
 * a number (N: required; O: may be empty, nan or inf, i.e. not measured), and whether it is the
 * same on every row of one run (same). */
static const struct coltype {
    const char *name;
    char type;
    int same;
} coltypes[] = {
    {"shape", 'R', 0},
    {"norm", 'R', 0},
    {"pass", 'R', 0},
    {"ms", 'N', 0},
    {"gb_per_s", 'N', 0},
    {"copy_gb_per_s", 'N', 0},
    {"ratio_to_copy", 'N', 0},
    {"threads", 'I', 1},
    {"settings", 'T', 1},
    {"dtype", 'R', 1},
    {"device", 'T', 1},
    {"layer", 'R', 0},
    {"count", 'I', 0},
    {"sums", 'R', 0},
    {"im2col_ms", 'N', 0},
    {"wino2_ms", 'N', 0},
    {"wino4_ms", 'N', 0},
    {"im2col_over_wino2", 'O', 0},
    {"lo2", 'O', 0},
    {"hi2", 'O', 0},
    {"im2col_over_wino4", 'O', 0},
    {"lo4", 'O', 0},
    {"hi4", 'O', 0},
    {"batch", 'I', 0},
    {"task", 'R', 0},
    {"ms_per_step", 'N', 0},
    {"ms_mean", 'N', 0},
    {"ms_std", 'N', 0},
    {"vs_layer", 'O', 0},
    {"steps", 'I', 1},
    {"norm_share", 'O', 0},
    {"gflop_per_s", 'O', 0},
    {"vs_layer_lo", 'O', 0},
    {"vs_layer_hi", 'O', 0},
    {"ranks", 'I', 1},
    {"allreduce_share", 'O', 0},
    {"allreduce_ms", 'O', 0},
    {"allreduce_bytes", 'O', 0},
    {"one_process_threads", 'I', 1},
    {"one_process_ms", 'O', 0},
    {"vs_one_process", 'O', 0},
    {"pytorch_variant", 'T', 0},
    {"normbench_ms", 'N', 0},
    {"pytorch_ms", 'O', 0},
    {"ratio", 'O', 0},
    {"ratio_lo", 'O', 0},
    {"ratio_hi", 'O', 0},
    {"pytorch_settings", 'T', 1},
    {"pytorch_model", 'T', 0},
    {"machine", 'T', 1},
    {"date", 'T', 1},
};

static const struct coltype *coltype(const char *name) {
    for (size_t i = 0; i < sizeof coltypes / sizeof coltypes[0]; i++)
        if (strcmp(coltypes[i].name, name) == 0) return &coltypes[i];
    return NULL;
}

/* A file read: its kind, version, columns and rows (every field a string into buf). */
typedef struct bcsv {
    const char *path;
    int kind, version, dp, vs_threads;
    char *buf;
    char *names[MAXCOL];
    int ncol, nrows;
    char **cells; /* nrows x ncol */
    int *lines;   /* each row's line in the file */
} bcsv;

static void bcsv_free(bcsv *c) {
    free(c->buf), free(c->cells), free(c->lines);
}

static const char *cell(const bcsv *c, int row, const char *name) {
    for (int k = 0; k < c->ncol; k++)
        if (strcmp(c->names[k], name) == 0) return c->cells[(size_t)row * c->ncol + k];
    return NULL;
}

/* A value as a number: 0 and *x set; 1 when it is empty or not measured (nan, inf); -1 when it
 * is not a number. */
static int number(const char *s, double *x) {
    if (!s || !*s) return 1;
    if (strcmp(s, "nan") == 0 || strcmp(s, "-nan") == 0 || strcmp(s, "inf") == 0 ||
        strcmp(s, "-inf") == 0)
        return 1;
    if (nb_parse_double(s, x) != 0) return -1;
    return 0;
}

static int bad_line(nb_err *err, const bcsv *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad_line(nb_err *err, const bcsv *c, int line, const char *fmt, ...) {
    char what[512], shown[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    nb_errf(err, "'%s' line %d: %s", c->path, line, nb_escape(shown, sizeof shown, what));
    return nb_hintf(err, "--from reads the file that 'normbench bench kernels|conv|step TASK "
                         "--format csv' wrote, whole and unedited");
}

/* The kind and version the header names; -1 when none. */
static int match_header(bcsv *c, const char *header) {
    char want[1024];
    for (int k = 0; k < (int)(sizeof kinds / sizeof kinds[0]); k++)
        for (int g = 0; g < 3; g++) {
            if (g >= 1 && !kinds[k].group1) break;
            for (int v = 1; v <= 2; v++) {
                snprintf(want, sizeof want, "%s%s%s%s", kinds[k].head,
                         g >= 1 ? kinds[k].group1 : "", g >= 2 ? kinds[k].group2 : "",
                         v == 2 ? tail : "");
                if (strcmp(want, header) == 0) {
                    c->kind = k;
                    c->version = v;
                    c->dp = g >= 1;
                    c->vs_threads = g >= 2;
                    return 0;
                }
            }
        }
    return -1;
}

/* Reads and checks path into c. Returns 0, or -1 with err naming the file and the line. */
static int bcsv_read(bcsv *c, const char *path, nb_err *err) {
    memset(c, 0, sizeof *c);
    c->path = path;
    size_t len = 0;
    if (nb_read_file(path, MAX_FILE, NB_READ_REGULAR, &c->buf, &len, err) != 0) {
        if (errno == EFBIG)
            return nb_hintf(err, "a bench CSV is a few kilobytes: is this the right file?");
        return nb_hintf(err, "give the file that 'normbench bench ... --format csv' wrote");
    }
    if (len == 0) {
        nb_errf(err, "'%s' is empty", path);
        return nb_hintf(err, "keep the whole output of 'normbench bench ... --format csv'");
    }
    if (memchr(c->buf, '\0', len)) {
        int line = 1;
        for (const char *p = c->buf; *p; p++)
            line += *p == '\n';
        return bad_line(err, c, line, "a NUL byte: not a text file");
    }
    if (c->buf[len - 1] != '\n') {
        int line = 1;
        for (const char *p = c->buf; *p; p++)
            line += *p == '\n';
        return bad_line(err, c, line, "the file ends inside this line: it was cut short");
    }
    /* split into lines (a CR before the line break, as a spreadsheet may write, is dropped) */
    int nlines = 0;
    for (size_t i = 0; i < len; i++)
        nlines += c->buf[i] == '\n';
    char **lines = malloc(sizeof(char *) * (size_t)nlines);
    if (!lines) return nb_errf(err, "out of memory reading '%s'", path);
    char *p = c->buf;
    for (int i = 0; i < nlines; i++) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        if (nl > p && nl[-1] == '\r') nl[-1] = '\0';
        lines[i] = p;
        if (strlen(p) > MAX_LINE) {
            free(lines);
            return bad_line(err, c, i + 1, "a line longer than 64 KiB");
        }
        p = nl + 1;
    }
    int rc = -1;
    if (match_header(c, lines[0]) != 0) {
        char first[120];
        snprintf(first, sizeof first, "%.100s%s", lines[0], strlen(lines[0]) > 100 ? "..." : "");
        bad_line(err, c, 1,
                 "not the header of a bench CSV this normbench knows ('%s'): another file, an "
                 "edited one, or a newer version",
                 first);
        goto done;
    }
    const char *why = NULL;
    c->ncol = nb_csv_split(lines[0], c->names, MAXCOL, &why);
    int nrows = nlines - 1;
    while (nrows > 0 && lines[nrows][0] == '\0')
        nrows--; /* blank lines at the end */
    if (nrows < 1) {
        bad_line(err, c, 1, "a header and no rows: the benchmark printed nothing");
        goto done;
    }
    if (nrows > MAXROWS) {
        bad_line(err, c, MAXROWS + 2, "more rows than one benchmark prints");
        goto done;
    }
    c->cells = malloc(sizeof(char *) * (size_t)nrows * (size_t)c->ncol);
    c->lines = malloc(sizeof(int) * (size_t)nrows);
    if (!c->cells || !c->lines) {
        nb_errf(err, "out of memory reading '%s'", path);
        goto done;
    }
    for (int r = 0; r < nrows; r++) {
        char *f[MAXCOL + 1];
        int line = r + 2;
        int n = nb_csv_split(lines[r + 1], f, MAXCOL + 1, &why);
        if (n < 0) {
            bad_line(err, c, line, "%s", why);
            goto done;
        }
        if (n != c->ncol) {
            bad_line(err, c, line, "%d fields where the header has %d", n, c->ncol);
            goto done;
        }
        for (int k = 0; k < n; k++) {
            const struct coltype *t = coltype(c->names[k]);
            double x = 0;
            int num = t && strchr("ION", t->type) ? number(f[k], &x) : 0;
            if (t && t->type == 'R' && !f[k][0]) {
                bad_line(err, c, line, "column %s is empty", c->names[k]);
                goto done;
            }
            if (t && (t->type == 'I' || t->type == 'N') && num != 0) {
                bad_line(err, c, line, "column %s: '%s' is not a number", c->names[k], f[k]);
                goto done;
            }
            if (t && t->type == 'O' && num < 0) {
                bad_line(err, c, line, "column %s: '%s' is not a number", c->names[k], f[k]);
                goto done;
            }
            if (t && t->type == 'I' && (x < 1 || x != floor(x) || x > 1e9)) {
                bad_line(err, c, line, "column %s: '%s' is not a count", c->names[k], f[k]);
                goto done;
            }
            if (t && t->same && r > 0 && strcmp(f[k], c->cells[k]) != 0) {
                bad_line(err, c, line,
                         "column %s differs from line 2's: a file holds one benchmark's run",
                         c->names[k]);
                goto done;
            }
            c->cells[(size_t)r * c->ncol + k] = f[k];
        }
        c->lines[r] = line;
        c->nrows = r + 1;
    }
    rc = 0;
done:
    free(lines);
    return rc;
}

/* ---- showing ------------------------------------------------------------------------------- */

/* The value of key in a settings line (threads=2 OMP_WAIT_POLICY=passive blas="..." core=X
 * blas_parallel=openmp), unquoted, into out; 0 when found. */
static int setting(const char *line, const char *key, char *out, size_t size) {
    size_t kl = strlen(key);
    for (const char *p = line; p && *p;) {
        while (*p == ' ')
            p++;
        const char *eq = strchr(p, '=');
        if (!eq) return -1;
        const char *v = eq + 1, *end;
        if (*v == '"') {
            v++;
            end = strchr(v, '"');
            if (!end) return -1;
        } else {
            end = strchr(v, ' ');
            if (!end) end = v + strlen(v);
        }
        if ((size_t)(eq - p) == kl && strncmp(p, key, kl) == 0) {
            size_t n = (size_t)(end - v) < size - 1 ? (size_t)(end - v) : size - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 0;
        }
        p = *end == '"' ? end + 1 : end;
    }
    return -1;
}

/* A cell's text, escaped for a terminal (and '|' for a Markdown table). */
static void put_text(FILE *f, const char *s, int md) {
    char shown[4096];
    nb_escape(shown, sizeof shown, s);
    for (const char *x = shown; *x; x++) {
        if (md && *x == '|') fputc('\\', f);
        fputc(*x, f);
    }
}

/* Text in a Markdown code span (when it holds no backquote), else as is. */
static void put_code(FILE *f, const char *s, int md) {
    int code = md && !strchr(s, '`');
    if (code) fputc('`', f);
    put_text(f, s, 0);
    if (code) fputc('`', f);
}

/* The lines above the table: machine, date, threads, BLAS (and PyTorch's or the GPU's), and what
 * the ratios are. */
static void preamble(FILE *f, const bcsv *c, int md) {
    const char *pre = md ? "- " : "# ";
    const char *machine = c->version >= 2 ? cell(c, 0, "machine") : NULL;
    const char *date = c->version >= 2 ? cell(c, 0, "date") : NULL;
    const char *task = cell(c, 0, "task");
    fprintf(f, "%s%s%s%s%s", pre, md ? "**" : "", kinds[c->kind].what, md ? "**" : "",
            c->dp ? " under mpirun" : "");
    if (task) {
        fputs(", task ", f);
        put_text(f, task, md);
    }
    fprintf(f, "; machine: ");
    put_text(f, machine && *machine ? machine : "not recorded", md);
    fprintf(f, "; date: ");
    put_text(f, date && *date ? date : "not recorded", md);
    fputc('\n', f);
    const char *settings = cell(c, 0, "settings"), *threads = cell(c, 0, "threads");
    if (settings) {
        char blas[512], core[64], par[64], wait[64], ranks[32], bn[32];
        fprintf(f, "%s%s %s", pre, threads ? threads : "?",
                threads && strcmp(threads, "1") == 0 ? "thread" : "threads");
        if (setting(settings, "ranks", ranks, sizeof ranks) == 0) {
            fprintf(f, " per rank, %s ranks", ranks);
            if (setting(settings, "bn_statistics", bn, sizeof bn) == 0) {
                fputs(", BatchNorm statistics ", f);
                put_text(f, bn, md);
            }
        }
        if (setting(settings, "OMP_WAIT_POLICY", wait, sizeof wait) == 0) {
            fputs(", OMP_WAIT_POLICY ", f);
            put_text(f, wait, md);
        }
        if (setting(settings, "blas", blas, sizeof blas) == 0) {
            fputs("; BLAS ", f);
            put_code(f, blas, md);
            if (setting(settings, "core", core, sizeof core) == 0) {
                fputs(", core ", f);
                put_text(f, core, md);
            }
            if (setting(settings, "blas_parallel", par, sizeof par) == 0) {
                fputs(", ", f);
                put_text(f, par, md);
            }
        } else {
            fputs("; settings ", f);
            put_code(f, settings, md);
        }
        fputc('\n', f);
    }
    const char *device = cell(c, 0, "device"), *dtype = cell(c, 0, "dtype");
    if (device) {
        fprintf(f, "%sdevice ", pre);
        put_code(f, device, md);
        fputs(", ", f);
        put_text(f, dtype ? dtype : "?", md);
        fputs(" input/output\n", f);
    }
    const char *py = cell(c, 0, "pytorch_settings");
    if (py) {
        fprintf(f, "%sPyTorch: ", pre);
        put_code(f, py, md);
        fputc('\n', f);
    }
    const char *solo = cell(c, 0, "one_process_threads");
    if (solo)
        fprintf(f,
                "%s--against threads: rank 0 alone with %s threads between the rounds; "
                "vs_one_proc = ms_per_step / one_proc_ms\n",
                pre, solo);
    const char *steps = cell(c, 0, "steps"), *batch = cell(c, 0, "batch");
    switch (c->kind) {
    case K_KERNELS:
    case K_KERNELS_CUDA:
        fprintf(f,
                "%sms: median per call; GB/s: bytes read and written once; vs copy: the "
                "kernel's GB/s over a copy's timed beside it\n",
                pre);
        break;
    case K_CONV:
        fprintf(f,
                "%sbatch %s; ms: median over rounds; vs_w2, vs_w4: im2col's time / the Winograd "
                "engine's (median over rounds), with its 95%% bootstrap interval\n",
                pre, batch ? batch : "?");
        break;
    case K_STEP:
        fprintf(f,
                "%s%s timed steps per row, norms interleaved in rounds; vs_layer: layer's median "
                "/ this median, with its 95%% bootstrap interval; norm_share: (this - none) / "
                "this\n",
                pre, steps ? steps : "?");
        break;
    case K_AGAINST:
        fprintf(f,
                "%s%s timed steps per row, normbench's and PyTorch's interleaved in rounds; "
                "ratio: PyTorch's median / normbench's (above 1: normbench faster), with its "
                "95%% bootstrap interval\n",
                pre, steps ? steps : "?");
        break;
    }
}

/* A column of the table: its title, where its value comes from, how it is shown. */
enum { S_TEXT, S_MS3, S_MS4, S_F1, S_F2, S_F4, S_X3, S_X2, S_CI3, S_CI2, S_PCT, S_MB };
typedef struct outcol {
    const char *title, *col, *col2; /* col2: an interval's upper end, or a text's suffix */
    int show, left;
} outcol;

static const outcol cols_kernels[] = {
    {"shape", "shape", NULL, S_TEXT, 1},         {"norm", "norm", NULL, S_TEXT, 1},
    {"pass", "pass", NULL, S_TEXT, 1},           {"ms", "ms", NULL, S_MS4, 0},
    {"GB/s", "gb_per_s", NULL, S_F2, 0},         {"copy GB/s", "copy_gb_per_s", NULL, S_F2, 0},
    {"vs copy", "ratio_to_copy", NULL, S_F2, 0}, {NULL},
};
static const outcol cols_kernels_cuda[] = {
    {"shape", "shape", NULL, S_TEXT, 1},         {"norm", "norm", NULL, S_TEXT, 1},
    {"pass", "pass", NULL, S_TEXT, 1},           {"ms", "ms", NULL, S_MS4, 0},
    {"GB/s", "gb_per_s", NULL, S_F1, 0},         {"copy GB/s", "copy_gb_per_s", NULL, S_F1, 0},
    {"vs copy", "ratio_to_copy", NULL, S_F2, 0}, {NULL},
};
static const outcol cols_conv[] = {
    {"layer", "layer", NULL, S_TEXT, 1},       {"count", "count", NULL, S_TEXT, 0},
    {"sums", "sums", NULL, S_TEXT, 1},         {"pass", "pass", NULL, S_TEXT, 1},
    {"im2col ms", "im2col_ms", NULL, S_F2, 0}, {"wino2 ms", "wino2_ms", NULL, S_F2, 0},
    {"wino4 ms", "wino4_ms", NULL, S_F2, 0},   {"vs_w2", "im2col_over_wino2", NULL, S_X2, 0},
    {"95%", "lo2", "hi2", S_CI2, 0},           {"vs_w4", "im2col_over_wino4", NULL, S_X2, 0},
    {"95%", "lo4", "hi4", S_CI2, 0},           {NULL},
};
static const outcol cols_step[] = {
    {"task", "task", NULL, S_TEXT, 1},
    {"norm", "norm", NULL, S_TEXT, 1},
    {"batch", "batch", NULL, S_TEXT, 0},
    {"ms_per_step", "ms_per_step", NULL, S_MS3, 0},
    {"mean", "ms_mean", NULL, S_MS3, 0},
    {"std", "ms_std", NULL, S_MS3, 0},
    {"vs_layer", "vs_layer", NULL, S_X3, 0},
    {"vs_layer 95%", "vs_layer_lo", "vs_layer_hi", S_CI3, 0},
    {"norm_share", "norm_share", NULL, S_PCT, 0},
    {"GFLOP/s", "gflop_per_s", NULL, S_F1, 0},
    {"allreduce_share", "allreduce_share", NULL, S_F4, 0},
    {"allreduce_ms", "allreduce_ms", NULL, S_MS3, 0},
    {"allreduce_MB", "allreduce_bytes", NULL, S_MB, 0},
    {"one_proc_ms", "one_process_ms", NULL, S_MS3, 0},
    {"vs_one_proc", "vs_one_process", NULL, S_X3, 0},
    {NULL},
};
static const outcol cols_against[] = {
    {"task", "task", NULL, S_TEXT, 1},
    {"norm", "norm", "pytorch_variant", S_TEXT, 1},
    {"batch", "batch", NULL, S_TEXT, 0},
    {"normbench ms", "normbench_ms", NULL, S_MS3, 0},
    {"PyTorch ms", "pytorch_ms", NULL, S_MS3, 0},
    {"ratio", "ratio", NULL, S_X3, 0},
    {"95%", "ratio_lo", "ratio_hi", S_CI3, 0},
    {"PyTorch's form", "pytorch_model", NULL, S_TEXT, 1},
    {NULL},
};

/* Row r's cell of column o into out. */
static void format_cell(const bcsv *c, int r, const outcol *o, int md, char *out, size_t size) {
    const char *v = cell(c, r, o->col), *v2 = o->col2 ? cell(c, r, o->col2) : NULL;
    const char *none = md ? "–" : "-";
    double x = 0, y = 0;
    if (o->show == S_TEXT) {
        if (v2 && *v2)
            snprintf(out, size, "%s (%s)", v, v2);
        else
            snprintf(out, size, "%s", v && *v ? v : none);
        return;
    }
    if (!v || number(v, &x) != 0) {
        snprintf(out, size, "%s", none);
        return;
    }
    const char *times = md ? "×" : "x";
    switch (o->show) {
    case S_MS3:
        snprintf(out, size, "%.3f", x);
        break;
    case S_MS4:
        snprintf(out, size, "%.4f", x);
        break;
    case S_F1:
        snprintf(out, size, "%.1f", x);
        break;
    case S_F2:
        snprintf(out, size, "%.2f", x);
        break;
    case S_F4:
        snprintf(out, size, "%.4f", x);
        break;
    case S_X3:
        snprintf(out, size, "%.3f%s", x, times);
        break;
    case S_X2:
        snprintf(out, size, "%.2f%s", x, times);
        break;
    case S_CI3:
    case S_CI2: {
        int d = o->show == S_CI3 ? 3 : 2;
        if (!v2 || number(v2, &y) != 0)
            snprintf(out, size, "%s", none);
        else if (md)
            snprintf(out, size, "%.*f–%.*f", d, x, d, y);
        else
            snprintf(out, size, "[%.*f,%.*f]", d, x, d, y);
        break;
    }
    case S_PCT:
        snprintf(out, size, "%.1f%%", 100 * x);
        break;
    case S_MB:
        snprintf(out, size, "%.3f", x * 1e-6);
        break;
    }
}

/* The width of s on a terminal (UTF-8 characters). */
static int width(const char *s) {
    int w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static int print_table(FILE *f, const bcsv *c, int md, nb_err *err) {
    const outcol *all = c->kind == K_KERNELS        ? cols_kernels
                        : c->kind == K_KERNELS_CUDA ? cols_kernels_cuda
                        : c->kind == K_CONV         ? cols_conv
                        : c->kind == K_STEP         ? cols_step
                                                    : cols_against;
    /* the columns this file has, and of those that may be empty (GFLOP/s: tasks that describe
     * their GEMMs) only those with a value */
    const outcol *use[MAXCOL];
    int n = 0;
    for (const outcol *o = all; o->title && n < MAXCOL; o++) {
        if (!cell(c, 0, o->col)) continue;
        if (strcmp(o->col, "gflop_per_s") == 0) {
            int any = 0;
            for (int r = 0; r < c->nrows; r++)
                any |= cell(c, r, o->col)[0] != '\0';
            if (!any) continue;
        }
        use[n++] = o;
    }
    enum { CELL = 512 };
    size_t ncell = (size_t)(c->nrows + 1) * n;
    char(*cells)[CELL] = malloc(CELL * ncell);
    int *w = calloc((size_t)n, sizeof *w);
    if (!cells || !w) {
        free(cells), free(w);
        return nb_errf(err, "out of memory showing '%s'", c->path);
    }
    for (int k = 0; k < n; k++)
        snprintf(cells[k], CELL, "%s", use[k]->title);
    for (int r = 0; r < c->nrows; r++)
        for (int k = 0; k < n; k++) {
            char raw[CELL];
            format_cell(c, r, use[k], md, raw, sizeof raw);
            nb_escape(cells[(size_t)(r + 1) * n + k], CELL, raw);
        }
    if (md) {
        fputc('\n', f);
        for (int r = 0; r <= c->nrows; r++) {
            for (int k = 0; k < n; k++) {
                fputs("| ", f);
                put_text(f, cells[(size_t)r * n + k], 1);
                fputc(' ', f);
            }
            fputs("|\n", f);
            if (r == 0) {
                for (int k = 0; k < n; k++)
                    fputs(use[k]->left ? "|---" : "|---:", f);
                fputs("|\n", f);
            }
        }
    } else {
        for (int r = 0; r <= c->nrows; r++)
            for (int k = 0; k < n; k++)
                if (width(cells[(size_t)r * n + k]) > w[k]) w[k] = width(cells[(size_t)r * n + k]);
        for (int r = 0; r <= c->nrows; r++) {
            for (int k = 0; k < n; k++) {
                const char *x = cells[(size_t)r * n + k];
                int pad = w[k] - width(x);
                if (k) fputs("  ", f);
                if (use[k]->left)
                    fprintf(f, "%s%*s", x, k + 1 < n ? pad : 0, "");
                else
                    fprintf(f, "%*s%s", pad, "", x);
            }
            fputc('\n', f);
        }
    }
    free(cells), free(w);
    return 0;
}

int nb_bench_from(const nb_bench_io *io, const char *path, int md) {
    bcsv c;
    nb_err err;
    nb_err_clear(&err);
    if (bcsv_read(&c, path, &err) != 0) {
        bcsv_free(&c);
        return nb_bench_report(io, &err);
    }
    preamble(io->out, &c, md);
    int rc = print_table(io->out, &c, md, &err);
    bcsv_free(&c);
    return rc ? nb_bench_report(io, &err) : NB_EXIT_OK;
}
