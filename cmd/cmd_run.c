/* cmd/cmd_run.c — `normbench run TASK`: train one task with one norm, recording it. */
#include "cmd/cmd.h"

#include "nn/blas.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/mpi.h"
#include "cmd/progress.h"
#include "nn/cuda/nbcuda.h"
#include "results/query.h"
#include "results/store.h"
#include "tasks/checkpoint.h"
#include "tasks/task.h"
#include "util/json.h"

static const char run_usage[] =
    "usage: normbench run TASK [--norm NAME] [--dataset NAME] [--seed N] [--epochs N] [--steps N]\n"
    "                     [--batch N] [--lr X] [--subset N] [--p X] [--eps X] [--threads N]\n"
    "                     [--data-dir DIR] [--db FILE] [--tag TEXT] [--quiet] [TASK options]\n"
    "       normbench run --resume RUN [--db FILE] [--quiet] [--from-scratch]\n"
    "       normbench help run TASK      (one task's options, with their defaults)\n\n"
    "Trains TASK with one normalization and records the run (configuration, provenance,\n"
    "training loss with wall time, evaluation metrics, time per step) in the results store.\n"
    "Ctrl-C (or SIGTERM, SIGHUP) stops the run cleanly: it is recorded as interrupted and keeps\n"
    "what it measured.\n"
    "A NaN or infinite loss stops it as diverged. A checkpoint is written at the end of every\n"
    "epoch (beside the store, in DB-checkpoints/; lm's also where Ctrl-C stops it, mid-epoch);\n"
    "'normbench run --resume RUN' continues an interrupted or crashed run from it, bit-exactly\n"
    "(a checkpoint of another store or run is refused; one run is resumed by one process at a\n"
    "time); --from-scratch starts it over under its id instead. A resumed run keeps the\n"
    "configuration and hosting (--data-dir, --threads, --quiet, --no-fetch, --device, --bn-sync)\n"
    "the store recorded for it (a legacy store's run, recorded before its hosting was: the\n"
    "options of its recorded command line); one recorded before one of its task's options\n"
    "existed resumes as that normbench ran it (cifar: --conv im2col --precision fp32\n"
    "--grad-sums batch; mt: --src-eos off --beam-rules simple --decode-cap longest\n"
    "--batch-order target). Under 'mpirun -np N' the run\n"
    "trains over N ranks, each on its rows (mt:\n"
    "its sentences) of every batch (data-parallel; --bn-sync for BatchNorm over the global\n"
    "batch: mnist and cifar), and\n"
    "'mpirun -np N normbench run --resume RUN' resumes it (rank 0 sends the checkpoint).\n"
    "Every rank must be given the same options and data (only --data-dir, --threads, --db,\n"
    "--quiet and --no-fetch may differ): the ranks compare them before the first step, and all\n"
    "stop naming the first option (or part of the data) that differs; a run whose options\n"
    "differ is not recorded, one whose data differ is recorded as failed.\n"
    "A write that finds the store locked by another process waits for it (120 s in all, or\n"
    "NORMBENCH_STORE_WAIT seconds); past that the run fails, and the message says how to\n"
    "continue it with --resume.\n"
    "Exit status: 0 finished, 1 failed, interrupted or diverged, 2 usage error.\n";

static const char *const act_choices[] = {"relu", "leaky-relu", "tanh", "sigmoid", NULL};
static const char *const bias_choices[] = {"standard", "none", "kiros", NULL};
static const char *const device_choices[] = {"cpu", "cuda", NULL};
static const char *const var_choices[] = {"biased", "unbiased", NULL};
static const char *const kround_choices[] = {"ceil", "floor", NULL};
static const char *const epson_choices[] = {"raw", "corrected", NULL};

/* A parsed `run` command line: the configuration in force and where to record it. */
typedef struct run_args {
    nb_train_cfg cfg; /* cfg.task_opts is allocated: free with nb_task_opts_free */
    const char *db, *tag, *variant;
    int quiet, threads;
    int no_fetch;       /* --no-fetch: never download the dataset */
    int bn_sync;        /* --bn-sync */
    int data_dir_given; /* --data-dir */
} run_args;

/* The values of the options every task shares, as parsed (0 / NULL: not given). */
typedef struct common_vals {
    const char *dataset, *data_dir, *db, *tag, *variant;
    int norm, act, bias, bn_var, kround;
    int64_t seed, steps, epochs;
    int batch, subset, threads, quiet, eps_outside, no_wn_init, no_ftz, no_fetch, device;
    int adam_eps_inside, adam_eps_on, log_every, eval_batch, bn_sync;
    double lr, p, eps, clip, beta1, beta2, adam_eps, dyt_alpha;
} common_vals;

enum { NCOMMON = 48 }; /* room for the common rows (common_rows) */

/* The rows of the options every task shares, writing into v; returns how many. */
static int common_rows(nb_opt *o, common_vals *v) {
    const nb_opt rows[] = {
        {"norm", NB_OPT_CHOICE, &v->norm, "NAME", "normalization (default layer)", nb_norm_names()},
        {"dataset", NB_OPT_STR, &v->dataset, "NAME", "dataset (task default)"},
        {"seed", NB_OPT_I64, &v->seed, "N", "seed for init, data order and dropout (1)", NULL, 0,
         1e15},
        {"epochs", NB_OPT_I64, &v->epochs, "N", "epochs to train (task default)", NULL, 1, 1e6},
        {"steps", NB_OPT_I64, &v->steps, "N", "stop after N training steps instead", NULL, 1, 1e12},
        {"batch", NB_OPT_INT, &v->batch, "N", "batch size (task default)", NULL, 1, 1e6},
        {"lr", NB_OPT_DOUBLE, &v->lr, "X", "Adam learning rate (task default)", NULL, 1e-12, 1e30},
        {"subset", NB_OPT_INT, &v->subset, "N", "use only N training examples", NULL, 1, 1e9},
        {"p", NB_OPT_DOUBLE, &v->p, "X", "pRMSNorm fraction (task default)", NULL, 1e-9, 1},
        {"p-rounding", NB_OPT_CHOICE, &v->kround, "R", "pRMSNorm k = n*p rounded (paper: ceil)",
         kround_choices},
        {"eps", NB_OPT_DOUBLE, &v->eps, "X", "norm epsilon (task default)", NULL, 1e-30, 1},
        {"eps-outside", NB_OPT_FLAG, &v->eps_outside, NULL,
         "add eps to the RMS/std instead of inside the sqrt"},
        {"bn-var", NB_OPT_CHOICE, &v->bn_var, "V", "BN training variance (mnist: unbiased)",
         var_choices},
        {"no-wn-init", NB_OPT_FLAG, &v->no_wn_init, NULL, "WeightNorm without data-dependent init"},
        {"dyt-alpha", NB_OPT_DOUBLE, &v->dyt_alpha, "X", "DyT: alpha's initial value (0.5)", NULL,
         1e-6, 1e6},
        {"act", NB_OPT_CHOICE, &v->act, "NAME", "activation (task default)", act_choices},
        {"beta1", NB_OPT_DOUBLE, &v->beta1, "X", "Adam beta1 (0.9)", NULL, 1e-12, 0.999999},
        {"beta2", NB_OPT_DOUBLE, &v->beta2, "X", "Adam beta2 (0.999)", NULL, 1e-12, 0.99999999},
        {"adam-eps", NB_OPT_DOUBLE, &v->adam_eps, "X", "Adam epsilon (1e-8)", NULL, 1e-30, 1},
        {"adam-eps-inside", NB_OPT_FLAG, &v->adam_eps_inside, NULL, "Adam: m/sqrt(v+eps)"},
        {"adam-eps-on", NB_OPT_CHOICE, &v->adam_eps_on, "V",
         "Adam eps meets the raw v or the bias-corrected v (mnist: corrected, as PyTorch)",
         epson_choices},
        {"adam-bias", NB_OPT_CHOICE, &v->bias, "B", "Adam bias correction (standard)",
         bias_choices},
        {"clip", NB_OPT_DOUBLE, &v->clip, "X", "clip the global gradient norm at X (off)", NULL,
         1e-12, 1e12},
        {"log-every", NB_OPT_INT, &v->log_every, "N",
         "record the training loss every N steps (task default)", NULL, 1, 1e9},
        {"eval-batch", NB_OPT_INT, &v->eval_batch, "N", "rows per evaluation pass (task default)",
         NULL, 1, 1e6},
        {"no-ftz", NB_OPT_FLAG, &v->no_ftz, NULL,
         "keep denormal floats (default: flush them to zero, as PyTorch and TF do on x86)"},
        {"threads", NB_OPT_INT, &v->threads, "N", "threads (default: OMP_NUM_THREADS or all cores)",
         NULL, 1, 1024},
        {"bn-sync", NB_OPT_FLAG, &v->bn_sync, NULL,
         "data-parallel under mpirun: BatchNorm statistics over the global batch (default: per "
         "rank, with rank 0's running averages broadcast)"},
        {"device", NB_OPT_CHOICE, &v->device, "D",
         "cpu, or cuda (the GPU, for tasks that have it: mnist; 'make cuda')", device_choices},
        {"data-dir", NB_OPT_STR, &v->data_dir, "DIR", "data directory (NORMBENCH_DATA)"},
        NB_OPT_DB(&v->db),
        {"tag", NB_OPT_STR, &v->tag, "K=V",
         "a tag recorded with the run: KEY=VALUE, or TEXT (key 'tag')"},
        {"variant", NB_OPT_STR, &v->variant, "TEXT",
         "a label recorded as the tag 'variant': report compares runs within it"},
        {"quiet", NB_OPT_FLAG, &v->quiet, NULL, "no progress output"},
        {"no-fetch", NB_OPT_FLAG, &v->no_fetch, NULL,
         "do not download a missing dataset (default: fetch it on first use)"},
    };
    int n = (int)(sizeof rows / sizeof rows[0]);
    for (int i = 0; i < n; i++)
        o[i] = rows[i];
    o[n].name = NULL;
    return n;
}

int nb_run_opt_is_flag(const char *name, int *known) {
    common_vals v;
    nb_opt rows[NCOMMON + 8];
    int n = common_rows(rows, &v);
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0) {
            *known = 1;
            return rows[i].type == NB_OPT_FLAG;
        }
    return nb_task_opt_is_flag(name, known);
}

/* ---- help ---------------------------------------------------------------------------------- */

/* cfg configured for task t with the given norm and options, as `run` would (its own struct
 * allocated: free with nb_task_opts_free). Returns 0, or -1 when that combination is refused. */
static int configure_for(const nb_task *t, int norm, const nb_given *g, int ng, nb_train_cfg *cfg) {
    nb_err err;
    memset(cfg, 0, sizeof *cfg);
    cfg->task = t->name;
    cfg->norm.kind = (nb_norm_kind)norm;
    if (nb_task_configure(t, cfg, norm, g, ng, &err) == 0) return 0;
    nb_task_opts_free(cfg);
    return -1;
}

/* The default of a task's option row as "X", or "X; none: Y, batch: Y" where the task's
 * defaults differ by norm, and per model where the task has models. */
static void opt_default(const nb_task *t, const nb_task_opt *o, char *out, size_t size) {
    const nb_task_opt *sel = NULL;
    for (const nb_task_opt *r = t->opts; r && r->name; r++)
        if (r->selector && r->kind == NB_TOPT_CHOICE) sel = r;
    size_t n = 0;
    out[0] = '\0';
    char first[640] = "";
    int same = 1, models = 0, nmodels = 0;
    while (sel && sel->choices[nmodels])
        nmodels++;
    for (int m = 0; m == 0 || (sel && sel->choices[m]); m++) {
        char base[128] = "", val[128];
        nb_given g = {sel ? sel->name : NULL, sel ? sel->choices[m] : NULL};
        char diff[512] = "";
        size_t dn = 0;
        for (int k = 0; k < nb_norm_count(); k++) { /* layer (run's default, the base) first */
            int norm = nb_norm_help_order(k);
            nb_train_cfg cfg;
            if (configure_for(t, norm, &g, sel ? 1 : 0, &cfg) != 0) continue;
            if (o->models && sel && !strstr(o->models, sel->choices[m])) {
                nb_task_opts_free(&cfg);
                break;
            }
            nb_task_opt_format(o, cfg.task_opts, val, sizeof val);
            nb_task_opts_free(&cfg);
            if (k == 0) {
                snprintf(base, sizeof base, "%s", val);
            } else if (strcmp(val, base) != 0 && dn < sizeof diff) {
                dn += (size_t)snprintf(diff + dn, sizeof diff - dn, "%s%s: %s", dn ? ", " : "",
                                       nb_norm_name((nb_norm_kind)norm), val);
            }
        }
        if (!base[0] || n >= size) continue;
        char one[640];
        snprintf(one, sizeof one, "%s%s%s%s", base, dn ? " (" : "", diff, dn ? ")" : "");
        if (sel)
            n += (size_t)snprintf(out + n, size - n, "%s--%s %s: %s", n ? "; " : "", sel->name,
                                  sel->choices[m], one);
        else
            n += (size_t)snprintf(out + n, size - n, "%s", one);
        if (m == 0)
            snprintf(first, sizeof first, "%s", one);
        else
            same &= strcmp(first, one) == 0;
        models++;
    }
    /* the same for every model: say it once */
    if (sel && same && models == nmodels) snprintf(out, size, "%s", first);
}

/* Writes text after a left column of `indent` characters (already printed), wrapped at 98. */
static void put_wrapped(FILE *f, const char *text, int indent) {
    int col = indent;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (!w) break;
        if (col > indent && col + 1 + (int)w > 98) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)w, p);
        col += (int)w;
        p += w;
    }
    fputc('\n', f);
}

/* The common options whose defaults a task sets, as help shows them. */
static void common_default(const nb_train_cfg *c, int which, char *out, size_t size) {
    switch (which) {
    case 0:
        snprintf(out, size, "--epochs %d", c->epochs);
        return;
    case 1:
        snprintf(out, size, "--batch %d", c->batch);
        return;
    case 2:
        snprintf(out, size, "--lr %g", c->adam.lr);
        return;
    case 3:
        snprintf(out, size, "--eps %g", c->norm.eps);
        return;
    case 4:
        snprintf(out, size, "--p %g", c->norm.p);
        return;
    case 5:
        snprintf(out, size, "--act %s", nb_task_act_name(c));
        return;
    case 6:
        if (c->clip > 0)
            snprintf(out, size, "--clip %g", c->clip);
        else
            snprintf(out, size, "--clip off");
        return;
    case 7:
        snprintf(out, size, "--eval-batch %d", c->eval_batch);
        return;
    case 8:
        snprintf(out, size, "--log-every %d", c->log_every);
        return;
    }
    out[0] = '\0';
}

/* Prints one task's own options with their defaults. */
static void print_task_opts(FILE *f, const nb_task *t) {
    fprintf(f, "\ntask %s (%s)\n  datasets:", t->name, t->summary);
    for (int i = 0; t->datasets[i]; i++)
        fprintf(f, " %s%s", t->datasets[i],
                strcmp(t->datasets[i], t->default_dataset) == 0 ? " (default)" : "");
    fputc('\n', f);
    /* the common options' defaults for this task, per norm where they differ */
    nb_buf d = {0};
    for (int which = 0; which < 9; which++) {
        char base[96] = "", val[96];
        for (int k = 0; k < nb_norm_count(); k++) {
            int norm = nb_norm_help_order(k);
            nb_train_cfg cfg;
            int ok = configure_for(t, norm, NULL, 0, &cfg) == 0;
            if (ok) common_default(&cfg, which, val, sizeof val);
            nb_task_opts_free(&cfg);
            if (!ok) continue;
            if (k == 0) {
                snprintf(base, sizeof base, "%s", val);
                nb_buf_printf(&d, "%s%s", d.len ? ", " : "", val);
            } else if (strcmp(val, base) != 0) {
                nb_buf_printf(&d, " (%s: %s)", nb_norm_name((nb_norm_kind)norm),
                              strchr(val, ' ') ? strchr(val, ' ') + 1 : val);
            }
        }
    }
    if (d.p) {
        fputs("  defaults: ", f);
        put_wrapped(f, d.p, 12);
    }
    nb_buf_free(&d);
    if (!t->opts || !t->opts[0].name) {
        fputs("  (no options of its own)\n", f);
        return;
    }
    for (const nb_task_opt *o = t->opts; o->name; o++) {
        char left[64], def[1024] = "";
        if (o->kind == NB_TOPT_FLAG || (o->kind == NB_TOPT_ALIAS && o->alias_val))
            snprintf(left, sizeof left, "--%s", o->name);
        else
            snprintf(left, sizeof left, "--%s %s", o->name, o->metavar ? o->metavar : "VALUE");
        nb_buf h = {0};
        nb_buf_puts(&h, o->help ? o->help : "");
        if (o->kind == NB_TOPT_CHOICE) {
            nb_buf_puts(&h, " (");
            for (int i = 0; o->choices[i]; i++)
                nb_buf_printf(&h, "%s%s", i ? "|" : "", o->choices[i]);
            nb_buf_puts(&h, ")");
        }
        if (o->models) nb_buf_printf(&h, " [models: %s]", o->models);
        if (o->selector)
            snprintf(def, sizeof def, "%s", o->choices[(int)o->def]);
        else if (o->kind != NB_TOPT_ALIAS)
            opt_default(t, o, def, sizeof def);
        if (def[0]) nb_buf_printf(&h, "; default %s", def);
        fprintf(f, "  %-22s ", left);
        put_wrapped(f, h.p ? h.p : "", 25);
        nb_buf_free(&h);
    }
}

/* `run --help` (every task) or `help run TASK` / `run TASK --help` (that task). */
static void print_run_help(FILE *f, const nb_task *only) {
    common_vals v;
    nb_opt rows[NCOMMON + 8];
    common_rows(rows, &v);
    nb_print_help(f, run_usage, rows);
    fputs(only ? "\nthe task's own options (given to another task they are usage errors):\n"
               : "\ntasks and their own options (given to another task they are usage errors):\n",
          f);
    for (int i = 0; nb_task_at(i); i++)
        if (!only || nb_task_at(i) == only) print_task_opts(f, nb_task_at(i));
}

int nb_run_help_task(const char *name) {
    const nb_task *t = nb_task_find(name);
    if (!t) return nb_unknown_task("run", name);
    print_run_help(stdout, t);
    return NB_EXIT_OK;
}

/* ---- parsing ------------------------------------------------------------------------------- */

enum { MAXTASKOPT = 128 };

/* Parses and validates a `run` command line into *a. Returns 0, -1 after printing the help
 * (the caller exits 0), or NB_EXIT_USAGE after printing the error. */
static int parse_run(int argc, const char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    common_vals v;
    memset(&v, 0, sizeof v);
    v.norm = nb_norm_default();
    v.seed = 1;
    v.bn_var = 1;
    nb_opt opts[NCOMMON + MAXTASKOPT + 1];
    int nc = common_rows(opts, &v), n = nc;
    /* every task's option names, once each: a flag, or a value kept as text for the task */
    const char *tvals[MAXTASKOPT];
    int tflags[MAXTASKOPT];
    for (int i = 0; nb_task_at(i); i++)
        for (const nb_task_opt *o = nb_task_at(i)->opts; o && o->name; o++) {
            int dup = 0;
            for (int k = 0; k < n; k++)
                dup |= strcmp(opts[k].name, o->name) == 0;
            if (dup || n - nc >= MAXTASKOPT) continue;
            int known, flag = nb_task_opt_is_flag(o->name, &known);
            tvals[n - nc] = NULL;
            tflags[n - nc] = 0;
            opts[n] = (nb_opt){.name = o->name,
                               .type = flag ? NB_OPT_FLAG : NB_OPT_STR,
                               .dst = flag ? (void *)&tflags[n - nc] : (void *)&tvals[n - nc],
                               .metavar = flag ? NULL : "VALUE",
                               .help = o->help};
            n++;
        }
    opts[n].name = NULL;

    /* --help: every task's options, or with a task named, that task's */
    const char *help_task = NULL;
    int want_help = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            want_help = 1;
        else if (argv[i][0] != '-' && !help_task && nb_task_find(argv[i]))
            help_task = argv[i];
    }
    if (want_help) {
        print_run_help(stdout, help_task ? nb_task_find(help_task) : NULL);
        return -1;
    }

    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("run", run_usage, argc, argv, opts, pos, 1, &npos);
    if (rc) return rc;
    if (npos < 1) return nb_unknown_task("run", NULL);
    const nb_task *task = nb_task_find(pos[0]);
    if (!task) return nb_unknown_task("run", pos[0]);

    nb_given given[NCOMMON + MAXTASKOPT];
    int ngiven = 0;
    for (int k = nc; k < n; k++)
        if (opts[k].seen)
            given[ngiven++] =
                (nb_given){opts[k].name, opts[k].type == NB_OPT_FLAG ? NULL : tvals[k - nc]};
    int ntask = ngiven;
    for (int k = 0; k < nc; k++) /* the common ones follow, for the task's finish() */
        if (opts[k].seen) given[ngiven++] = (nb_given){opts[k].name, NULL};

    nb_train_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.norm.kind = (nb_norm_kind)v.norm;
    cfg.task = task->name;
    /* the dataset first: a task's defaults may depend on it (mt's BPE merges) */
    cfg.dataset = v.dataset ? v.dataset : task->default_dataset;
    nb_err err;
    nb_err_clear(&err);
    if (nb_task_configure(task, &cfg, v.norm, given, ntask, &err) != 0) {
        nb_task_opts_free(&cfg);
        if (err.hint[0])
            fprintf(stderr, "error: %s\nhint: %s\n", err.msg, err.hint);
        else
            fprintf(stderr, "error: %s\nhint: see 'normbench help run %s'\n", err.msg, task->name);
        return NB_EXIT_USAGE;
    }
    int known = 0;
    for (int i = 0; task->datasets[i]; i++) {
        /* "file:PATH": any dataset name that starts "file:" and names a file */
        const char *ph = strstr(task->datasets[i], ":PATH");
        if (ph && !ph[5]) {
            size_t k = (size_t)(ph - task->datasets[i]) + 1;
            known |= strncmp(task->datasets[i], cfg.dataset, k) == 0 && cfg.dataset[k];
        } else {
            known |= strcmp(task->datasets[i], cfg.dataset) == 0;
        }
    }
    if (!known) {
        fprintf(stderr, "error: task '%s' has no dataset '%s'\nhint: its datasets are:", task->name,
                cfg.dataset);
        for (int i = 0; task->datasets[i]; i++)
            fprintf(stderr, " %s", task->datasets[i]);
        fputc('\n', stderr);
        nb_task_opts_free(&cfg);
        return NB_EXIT_USAGE;
    }
    cfg.data_dir = v.data_dir ? v.data_dir : nb_default_data_dir();
    cfg.seed = (uint64_t)v.seed;
    cfg.device = v.device;
    if (nb_opt_seen(opts, "epochs")) cfg.epochs = (int)v.epochs;
    if (v.steps) cfg.steps = v.steps;
    if (v.batch) cfg.batch = v.batch;
    if (v.lr > 0) cfg.adam.lr = v.lr;
    if (v.subset) cfg.subset = v.subset;
    if (v.p > 0) cfg.norm.p = v.p;
    if (nb_opt_seen(opts, "p-rounding")) cfg.norm.p_floor = v.kround == 1;
    if (v.eps > 0) cfg.norm.eps = v.eps;
    if (v.eps_outside) cfg.norm.eps_outside = 1;
    if (nb_opt_seen(opts, "bn-var")) cfg.norm.bn_unbiased_batch = v.bn_var == 1;
    if (v.no_wn_init) cfg.norm.wn_data_init = 0;
    if (v.dyt_alpha > 0) cfg.norm.dyt_alpha = v.dyt_alpha;
    if (nb_opt_seen(opts, "act")) cfg.act = (nb_act_kind)v.act;
    if (v.beta1 > 0) cfg.adam.beta1 = v.beta1;
    if (v.beta2 > 0) cfg.adam.beta2 = v.beta2;
    if (v.adam_eps > 0) cfg.adam.eps = v.adam_eps;
    if (v.adam_eps_inside) cfg.adam.eps_inside = 1;
    if (nb_opt_seen(opts, "adam-eps-on")) cfg.adam.eps_corrected = v.adam_eps_on == 1;
    if (nb_opt_seen(opts, "adam-bias")) cfg.adam.bias = (nb_adam_bias)v.bias;
    if (v.clip > 0) cfg.clip = v.clip;
    if (v.log_every) cfg.log_every = v.log_every;
    if (v.eval_batch) cfg.eval_batch = v.eval_batch;
    if (v.no_ftz) cfg.flush_denormals = 0;
    if (task->finish && task->finish(&cfg, given, ngiven, &err) != 0) {
        nb_task_opts_free(&cfg);
        if (err.hint[0])
            fprintf(stderr, "error: %s\nhint: %s\n", err.msg, err.hint);
        else
            fprintf(stderr, "error: %s\nhint: see 'normbench help run %s'\n", err.msg, task->name);
        return NB_EXIT_USAGE;
    }
    if (nb_norm_get(cfg.norm.kind)->acts == NB_ON_FEATURES && cfg.batch < 2) {
        nb_task_opts_free(&cfg);
        return nb_usage_error("run", "batch norm needs --batch of at least 2, not %d", cfg.batch);
    }
    if (nb_check_text_opt("run", "tag", v.tag) || nb_check_text_opt("run", "variant", v.variant)) {
        nb_task_opts_free(&cfg);
        return NB_EXIT_USAGE;
    }
    a->cfg = cfg;
    a->db = v.db ? v.db : nb_default_db();
    a->tag = v.tag;
    a->variant = v.variant;
    a->quiet = v.quiet;
    a->threads = v.threads;
    a->no_fetch = v.no_fetch;
    a->bn_sync = v.bn_sync;
    a->data_dir_given = v.data_dir != NULL;
    return 0;
}

int nb_run_check_args(int argc, const char **argv) {
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc == 0) nb_task_opts_free(&a.cfg);
    return rc;
}

/* A legacy store's run's hosting options from its recorded arguments (cmd.h): --db,
 * --data-dir, --threads, --quiet, --no-fetch, --device and --bn-sync, each as `run` parses it;
 * every other option is passed over (with its value when it takes one). A recorded --data-dir
 * wins over NORMBENCH_DATA, as it did for the run; without one, the default in force now. A run
 * recorded since normbench records its hosting (param "hosting") is never read this way. */
void nb_hosting_from_args(int argc, const char **argv, nb_job_hosting *h) {
    memset(h, 0, sizeof *h); /* data_dir NULL: not given */
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (strncmp(a, "--", 2) != 0) continue; /* the task */
        char name[64];
        const char *eq = strchr(a + 2, '='), *val = NULL;
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof name) continue;
        memcpy(name, a + 2, len);
        name[len] = '\0';
        int known = 0, flag = nb_run_opt_is_flag(name, &known);
        if (!flag) val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        long long x;
        if (strcmp(name, "quiet") == 0)
            h->quiet = 1;
        else if (strcmp(name, "no-fetch") == 0)
            h->no_fetch = 1;
        else if (strcmp(name, "bn-sync") == 0)
            h->bn_sync = 1;
        else if (strcmp(name, "data-dir") == 0 && val)
            h->data_dir = val;
        else if (strcmp(name, "db") == 0 && val)
            h->db = val;
        else if (strcmp(name, "device") == 0 && val)
            h->device = strcmp(val, "cuda") == 0;
        else if (strcmp(name, "threads") == 0 && val && nb_parse_int(val, &x) == 0 && x >= 1 &&
                 x <= 1024)
            h->threads = (int)x;
    }
}

int nb_run_load_config(const char *db, int64_t id, nb_job *j, char *model, size_t model_size,
                       nb_ckpt_ident *ident) {
    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    nb_run_detail *d = NULL;
    int rc = NB_EXIT_FAIL;
    nb_job_init(j, NULL);
    if (nb_store_open(&s, db, 1, &err) != 0 || nb_run_get(s, id, &d, &err) != 0) {
        nb_report_err(&err);
        goto out;
    }
    if (strcmp(d->info.status, "finished") != 0) {
        nb_die("run %lld is %s: only a finished run keeps its model", (long long)id,
               d->info.status);
        goto out;
    }
    /* hosted as it was (its stored hosting; no data directory given: the default in force) */
    char *hosting = nb_job_stored_hosting(d, nb_hosting_from_args);
    if (!hosting) {
        nb_die("out of memory");
        goto out;
    }
    nb_job_hosting h;
    int hrc = nb_job_hosting_read(j, hosting, &h, &err);
    free(hosting);
    if (hrc == 0 && !h.data_dir) h.data_dir = nb_default_data_dir();
    if (hrc != 0 || !d->config || nb_job_from_config(j, d->config, &h, &err) != 0) {
        if (!d->config) nb_errf(&err, "it has no stored configuration");
        nb_die("run %lld's configuration cannot be rebuilt: %s", (long long)id, err.msg);
        rc = NB_EXIT_USAGE;
        goto out;
    }
    char ck[4096];
    if (nb_job_checkpoint_file(ck, sizeof ck, db, id, 0, &err) != 0) {
        nb_report_err(&err);
        goto out;
    }
    snprintf(model, model_size, "%.*s.model", (int)strlen(ck) - 5, ck);
    if (ident) {
        /* what the run's kept model must belong to: as resume_prepare checks a checkpoint */
        char store_id[40];
        if (nb_store_id(s, store_id, sizeof store_id, &err) != 0) {
            nb_report_err(&err);
            goto out;
        }
        nb_ckpt_ident_set(ident, store_id, id, d->info.task, d->info.norm, d->info.seed, d->config);
    }
    rc = 0;
out:
    nb_run_detail_free(d);
    if (s) nb_store_close(s);
    if (rc) nb_job_free(j);
    return rc;
}

/* The command line as one string, arguments separated by the ASCII unit separator. */
static char *join_argv(int argc, const char **argv) {
    nb_buf b = {0};
    for (int i = 0; i < argc; i++) {
        if (i) nb_buf_puts(&b, "\x1f");
        nb_buf_puts(&b, argv[i]);
    }
    return nb_buf_take(&b);
}

int nb_run_parse(int argc, const char **argv, nb_job *j) {
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc) return rc;
    j->cfg = a.cfg;
    j->db = a.db;
    j->tag = a.tag;
    j->variant = a.variant;
    j->quiet = a.quiet;
    j->threads = a.threads;
    j->no_fetch = a.no_fetch;
    j->bn_sync = a.bn_sync;
    j->data_dir_given = a.data_dir_given;
    free(j->args);
    j->args = join_argv(argc - 1, argv + 1); /* recorded, shown (its hosting: nb_job_hosting_of) */
    return 0;
}

/* ---- the command's side of a job: its messages, progress line and dataset ------------------ */

static nb_progress_line progress_line; /* one job at a time in a process */

static void io_say(void *ctx, const char *text) {
    fputs(text, stderr);
}
static void io_progress_begin(void *ctx, int quiet) {
    nb_progress_init(&progress_line, quiet);
}
static void io_progress(void *ctx, const nb_progress *p) {
    nb_progress_draw(&progress_line, p);
}
static void io_progress_end(void *ctx) {
    nb_progress_end(&progress_line);
}
static void io_result(void *ctx, int64_t run, const char *status) {
    printf("run %lld %s\n", (long long)run, status);
}
static int io_ensure_dataset(void *ctx, const char *name, const char *data_dir, int quiet) {
    return nb_cmd_ensure_dataset(name, data_dir, 0, quiet);
}
static char *io_compute_json(void *ctx) {
    return nb_compute_json();
}

static const nb_job_io run_io = {.say = io_say,
                                 .progress_begin = io_progress_begin,
                                 .progress = io_progress,
                                 .progress_end = io_progress_end,
                                 .result = io_result,
                                 .ensure_dataset = io_ensure_dataset,
                                 .compute_json = io_compute_json};

int nb_run_job_build(int argc, const char **argv, nb_job *j) {
    nb_job_init(j, &run_io);
    int rc = nb_run_parse(argc, argv, j);
    if (rc == 0) nb_note_blas_core();
    return rc;
}

int nb_run_job_from_config(const char *config, const char *hosting, nb_job *j) {
    nb_job_init(j, &run_io);
    j->db = nb_default_db();
    nb_err err;
    nb_err_clear(&err);
    nb_job_hosting h;
    if (nb_job_hosting_read(j, hosting, &h, &err) != 0) return nb_report_err(&err);
    if (!h.data_dir) h.data_dir = nb_default_data_dir(); /* this process's own */
    if (nb_job_from_config(j, config, &h, &err) != 0) return nb_report_err(&err);
    nb_note_blas_core();
    return 0;
}

int nb_run_job_resume(const char *db, int64_t id, int from_scratch, int quiet, nb_job *j) {
    nb_job_init(j, &run_io);
    int rc = nb_job_from_store(j, db, id, from_scratch, quiet, nb_default_data_dir(),
                               nb_hosting_from_args);
    if (rc == 0) nb_note_blas_core();
    return rc;
}

/* `run --resume RUN [--db FILE] [--quiet] [--from-scratch]`: the job from the store. */
static int resume_job(int argc, const char **argv, nb_job *j) {
    int64_t resume_id = 0;
    int from_scratch = 0, quiet = 0;
    const char *db = NULL;
    nb_opt ro[] = {{"resume", NB_OPT_I64, &resume_id, "RUN", "run to resume", NULL, 1, 1e15},
                   {"from-scratch", NB_OPT_FLAG, &from_scratch, NULL,
                    "start the run over under its id instead (no checkpoint needed)"},
                   NB_OPT_DB(&db),
                   {"quiet", NB_OPT_FLAG, &quiet, NULL, "no progress output"},
                   {NULL}};
    int prc = nb_parse_opts("run", run_usage, argc, argv, ro, NULL, 0, NULL);
    if (prc < 0) return -1;
    if (prc) {
        fprintf(stderr, "hint: --resume takes only --db, --quiet and --from-scratch beside "
                        "it: the run keeps its own options\n");
        return prc;
    }
    j->db = nb_default_db(); /* where the run is read from when --db is not given */
    return nb_job_from_store(j, db, resume_id, from_scratch, quiet, nb_default_data_dir(),
                             nb_hosting_from_args);
}

/* `run`: the job from the command line or the store, executed. */
static int run_command(int argc, const char **argv, int dp) {
    nb_job j;
    nb_job_init(&j, &run_io);
    j.dp = dp;
    int resume = 0, rc = 0;
    for (int i = 1; i < argc; i++)
        resume |= strcmp(argv[i], "--resume") == 0 || strncmp(argv[i], "--resume=", 9) == 0;
    if (resume) {
        rc = resume_job(argc, argv, &j);
    } else {
        if (dp) rc = nb_mpi_setup_agree(NB_MPI_START, 0, "starts a new run");
        if (!rc) rc = nb_run_parse(argc, argv, &j);
    }
    if (rc == 0) {
        nb_note_blas_core();
        rc = nb_job_exec(&j);
    }
    nb_job_free(&j);
    return rc < 0 ? NB_EXIT_OK : rc;
}

int cmd_run(int argc, const char **argv) {
    /* under mpirun with more than one rank: one run over every rank (data-parallel). Until the
     * first step the ranks meet only in agreements (run/mpi.h); a rank whose set-up stopped
     * before its next one takes part in it, so that no rank waits */
    const int dp = nb_mpi_on() && nb_mpi_size() > 1;
    if (dp) nb_mpi_setup_begin();
    int rc = run_command(argc, argv, dp);
    if (dp) nb_mpi_setup_fail(rc);
    return rc;
}
