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

#include "cmd/mpi.h"
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
    "epoch (beside the store, in DB-checkpoints/); 'normbench run --resume RUN' continues an\n"
    "interrupted or crashed run from it, bit-exactly (a checkpoint of another store or run is\n"
    "refused; one run is resumed by one process at a time); --from-scratch starts it over under\n"
    "its id instead. Under 'mpirun -np N' the run trains over N ranks, each on its rows (mt:\n"
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

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    stop_requested = 1;
    /* A second Ctrl-C ends the process at once. */
    signal(sig, SIG_DFL);
}

/* The sink: creates the run in the store on first use (so a run that cannot even load its
 * data leaves no record), then forwards metrics and parameters. */
typedef struct run_ctx {
    nb_store *store;       /* the local store, or NULL when rec records elsewhere */
    const nb_run_rec *rec; /* where the records go */
    nb_run_spec spec;
    int64_t run_id;
    int created;
    const char *tag, *variant;
    char model_label[128]; /* the task's model label (tag "model"), "" when it has none */
    const char *db;        /* the store's path: checkpoints live beside it */
    const char *argv_rec;  /* the command line, recorded so that --resume can rebuild it */
    char ckpt[4096];       /* this run's checkpoint file, once known */
    char model[4096];      /* this run's model directory, once made */
    char store_id[40];     /* the store's id, recorded in every checkpoint */
    nb_ckpt_ident ident;   /* what this run's checkpoints belong to, once known */
    int have_ident;
    nb_progress_line progress;
} run_ctx;

/* The recorder of a run that holds the store itself. */
static int local_create(void *ctx, const nb_run_spec *spec, int64_t *run, char *store_id,
                        size_t size, nb_err *err) {
    if (nb_run_create(ctx, spec, run, err) != 0) return -1;
    return store_id ? nb_store_id(ctx, store_id, size, err) : 0;
}
static int local_tag(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    return nb_run_tag(ctx, run, k, v, err);
}
static int local_param(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    return nb_run_param(ctx, run, k, v, err);
}
static int local_metrics(void *ctx, int64_t run, const nb_metric *m, int n, nb_err *err) {
    return nb_metrics_add(ctx, run, m, n, err);
}
static int local_finish(void *ctx, int64_t run, const char *st, const char *msg, nb_err *err) {
    return nb_run_finish(ctx, run, st, msg, err);
}

/* The recorder of a data-parallel run's ranks other than 0. */
static int none_create(void *ctx, const nb_run_spec *spec, int64_t *run, char *store_id,
                       size_t size, nb_err *err) {
    *run = 0;
    if (store_id) snprintf(store_id, size, "-");
    return 0;
}
static int none_kv(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    return 0;
}
static int none_metrics(void *ctx, int64_t run, const nb_metric *m, int n, nb_err *err) {
    return 0;
}
static int none_finish(void *ctx, int64_t run, const char *st, const char *msg, nb_err *err) {
    return 0;
}

/* DB-checkpoints/run-ID.ckpt, beside the store. */
static int checkpoint_file(char *out, size_t size, const char *db, int64_t id, int make_dir,
                           nb_err *err) {
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s-checkpoints", db) >= sizeof dir)
        return nb_errf(err, "store path '%s' is too long", db);
    if (make_dir && mkdir(dir, 0755) != 0 && errno != EEXIST) {
        nb_errf(err, "cannot create checkpoint directory '%s': %s", dir, strerror(errno));
        return nb_hintf(err, "make the store's directory writable, or pass --db elsewhere");
    }
    if ((size_t)snprintf(out, size, "%.4000s/run-%lld.ckpt", dir, (long long)id) >= size)
        return nb_errf(err, "store path '%s' is too long", db);
    return 0;
}

static int ensure_run(run_ctx *c, nb_err *err) {
    if (c->created) return 0;
    if (c->rec->create(c->rec->ctx, &c->spec, &c->run_id, c->store_id, sizeof c->store_id, err) !=
        0)
        return -1;
    c->created = 1;
    if (c->tag) {
        /* --tag KEY=VALUE, or TEXT (recorded under the key "tag") */
        const char *eq = strchr(c->tag, '=');
        char key[64] = "tag";
        const char *value = c->tag;
        if (eq && eq > c->tag && (size_t)(eq - c->tag) < sizeof key) {
            memcpy(key, c->tag, (size_t)(eq - c->tag));
            key[eq - c->tag] = '\0';
            value = eq + 1;
        }
        if (c->rec->tag(c->rec->ctx, c->run_id, key, value, err) != 0) return -1;
    }
    if (c->variant && c->rec->tag(c->rec->ctx, c->run_id, "variant", c->variant, err) != 0)
        return -1;
    if (c->model_label[0] && c->rec->tag(c->rec->ctx, c->run_id, "model", c->model_label, err) != 0)
        return -1;
    if (c->argv_rec && c->rec->param(c->rec->ctx, c->run_id, "argv", c->argv_rec, err) != 0)
        return -1;
    if (!c->progress.quiet)
        fprintf(stderr, "run %lld: %s on %s, norm %s, seed %lld\n", (long long)c->run_id,
                c->spec.task, c->spec.dataset, c->spec.norm, (long long)c->spec.seed);
    return 0;
}

static int sink_record(void *ctx, const nb_metric *m, int n, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return -1;
    return c->rec->metrics(c->rec->ctx, c->run_id, m, n, err);
}

static int sink_param(void *ctx, const char *key, const char *value, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return -1;
    return c->rec->param(c->rec->ctx, c->run_id, key, value, err);
}

/* What the run's checkpoints and kept model belong to (sink.ckpt_ident), once the run exists. */
static void set_ident(run_ctx *c) {
    if (c->have_ident) return;
    nb_ckpt_ident_set(&c->ident, c->store_id, c->run_id, c->spec.task, c->spec.norm, c->spec.seed,
                      c->spec.config_json);
    c->have_ident = 1;
}

static const char *sink_checkpoint(void *ctx, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return NULL;
    if (!c->ckpt[0] && c->rec->ckpt_dir &&
        (size_t)snprintf(c->ckpt, sizeof c->ckpt, "%.4000s/run-%lld.ckpt", c->rec->ckpt_dir,
                         (long long)c->run_id) >= sizeof c->ckpt) {
        nb_errf(err, "checkpoint directory '%s' is too long", c->rec->ckpt_dir);
        return NULL;
    }
    if (!c->ckpt[0] && checkpoint_file(c->ckpt, sizeof c->ckpt, c->db, c->run_id, 1, err) != 0)
        return NULL;
    /* a resumed run's path is known already: its directory may not be (--from-scratch of a
     * run that never wrote a checkpoint) */
    char dir[4096];
    if (!c->rec->ckpt_dir && c->db &&
        checkpoint_file(dir, sizeof dir, c->db, c->run_id, 1, err) != 0)
        return NULL;
    set_ident(c);
    return c->ckpt;
}

static int sink_checkpoint_saved(void *ctx, const char *path, nb_err *err) {
    run_ctx *c = ctx;
    return c->rec->ckpt_saved ? c->rec->ckpt_saved(c->rec->ctx, c->run_id, path, err) : 0;
}

/* DB-checkpoints/run-ID.model/, beside the store: a finished run's model (tasks that keep one). */
static const char *sink_model_dir(void *ctx, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return NULL;
    char ck[4096];
    if (checkpoint_file(ck, sizeof ck, c->db, c->run_id, 1, err) != 0) return NULL;
    size_t n = strlen(ck);
    if (n < 5 || n + 2 >= sizeof c->model) {
        nb_errf(err, "store path '%s' is too long", c->db);
        return NULL;
    }
    snprintf(c->model, sizeof c->model, "%.*s.model", (int)(n - 5), ck); /* run-ID.ckpt -> .model */
    set_ident(c); /* written into the model (sink.ckpt_ident) */
    if (mkdir(c->model, 0755) != 0 && errno != EEXIST) {
        nb_errf(err, "cannot create '%s': %s", c->model, strerror(errno));
        return NULL;
    }
    return c->model;
}

static void sink_progress(void *ctx, const nb_progress *p) {
    run_ctx *c = ctx;
    nb_progress_draw(&c->progress, p);
}

/* Every option in force, as JSON: the run's configuration record. */
static void kv_str(nb_buf *b, const char *k, const char *v) {
    nb_buf_puts(b, b->len > 1 ? ", " : "");
    nb_buf_json_str(b, k);
    nb_buf_puts(b, ": ");
    nb_buf_json_str(b, v);
}

static void kv_num(nb_buf *b, const char *k, double v) {
    nb_buf_puts(b, b->len > 1 ? ", " : "");
    nb_buf_json_str(b, k);
    nb_buf_puts(b, ": ");
    nb_buf_json_num(b, v);
}

static void kv_int(nb_buf *b, const char *k, int64_t v) {
    nb_buf_puts(b, b->len > 1 ? ", " : "");
    nb_buf_json_str(b, k);
    nb_buf_printf(b, ": %lld", (long long)v);
}

/* hosts: 0 leaves out the ranks and their hosts (the text the ranks compare, cmd/mpi.h) */
static char *config_json(const nb_train_cfg *cfg, int hosts) {
    nb_buf j = {0};
    nb_buf_puts(&j, "{");
    kv_str(&j, "task", cfg->task);
    kv_str(&j, "dataset", cfg->dataset);
    kv_str(&j, "data_dir", cfg->data_dir);
    kv_str(&j, "norm", nb_norm_name(cfg->norm.kind));
    kv_num(&j, "eps", cfg->norm.eps);
    kv_str(&j, "eps_placement", cfg->norm.eps_outside ? "outside-sqrt" : "inside-sqrt");
    kv_num(&j, "p", cfg->norm.p);
    kv_str(&j, "p_rounding", cfg->norm.p_floor ? "floor" : "ceil");
    kv_num(&j, "bn_momentum", cfg->norm.bn_momentum);
    kv_str(&j, "bn_batch_variance", cfg->norm.bn_unbiased_batch ? "unbiased" : "biased");
    kv_str(&j, "bn_running_variance", cfg->norm.bn_unbiased_running ? "unbiased" : "biased");
    kv_str(&j, "wn_init", cfg->norm.wn_data_init ? "data-dependent" : "plain");
    const nb_norm_def *nd = nb_norm_get(cfg->norm.kind);
    if (nd->nscalars > 0) { /* the scalars' initial value, as "dyt_alpha" */
        char key[64];
        snprintf(key, sizeof key, "%s_%s", nd->name, nd->scalar_name);
        kv_num(&j, key, nd->scalar_init(&cfg->norm));
    }
    kv_str(&j, "activation", nb_act_name(cfg->act));
    kv_str(&j, "optimizer", "adam");
    kv_num(&j, "lr", cfg->adam.lr);
    kv_num(&j, "beta1", cfg->adam.beta1);
    kv_num(&j, "beta2", cfg->adam.beta2);
    kv_num(&j, "adam_eps", cfg->adam.eps);
    kv_str(&j, "adam_eps_placement", cfg->adam.eps_inside ? "inside-sqrt" : "outside-sqrt");
    kv_str(&j, "adam_eps_on", cfg->adam.eps_corrected ? "corrected-v" : "raw-v");
    kv_str(&j, "adam_bias_correction", bias_choices[cfg->adam.bias]);
    kv_num(&j, "clip_global", cfg->clip);
    kv_int(&j, "seed", (int64_t)cfg->seed);
    kv_int(&j, "epochs", cfg->epochs);
    kv_int(&j, "steps", cfg->steps);
    kv_int(&j, "batch", cfg->batch);
    kv_int(&j, "eval_batch", cfg->eval_batch);
    kv_int(&j, "subset", cfg->subset);
    kv_int(&j, "log_every", cfg->log_every);
    kv_int(&j, "threads", cfg->threads);
    kv_str(&j, "denormals", cfg->flush_denormals ? "flushed-to-zero" : "ieee");
    nb_task_opts_json(nb_task_find(cfg->task), cfg, &j); /* the task's own options */
    if (cfg->dist && cfg->dist->size > 1 && hosts) {     /* data-parallel (cmd/mpi.h) */
        kv_int(&j, "ranks", cfg->dist->size);
        char *list = nb_mpi_hosts_json();
        nb_buf_puts(&j, ", \"hosts\": ");
        nb_buf_puts(&j, list ? list : "null");
        free(list);
    }
    if (cfg->dist && cfg->dist->size > 1) {
        kv_str(&j, "bn_statistics", cfg->dist->bn_sync ? "global" : "per-rank");
    }
    nb_buf_puts(&j, "}");
    return nb_buf_take(&j);
}

/* A parsed `run` command line: the configuration in force and where to record it. */
typedef struct run_args {
    nb_train_cfg cfg; /* cfg.task_opts is allocated: free with nb_task_opts_free */
    const char *db, *tag, *variant;
    int quiet, threads;
    int no_fetch; /* --no-fetch: never download the dataset */
    int bn_sync;  /* --bn-sync */
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
        snprintf(out, size, "--act %s", nb_act_name(c->act));
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
    return 0;
}

int nb_run_check_args(int argc, const char **argv) {
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc == 0) nb_task_opts_free(&a.cfg);
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

/* `run --resume RUN`: the recorded command line of RUN, split back into arguments (into
 * storage owned by the caller: *buf). Checks that the run can be resumed and where from: its
 * checkpoint must exist and belong to it (store, run, task, norm, seed, configuration), whose
 * identity goes to *ident. With from_scratch the checkpoint is not needed (*ckpt_step = -1): the
 * run starts over under its id. */
/* The integer member key of a configuration's JSON (util/json.h's reader), or def. */
static int64_t config_int(const char *json, const char *key, int64_t def) {
    nb_json_object o;
    nb_json_read_object(json, &o);
    long long v = def;
    nb_json_get_int(&o, key, &v);
    nb_json_object_free(&o);
    return v;
}

/* How many groups a run's BatchNorm statistics are taken over: its ranks with per-rank
 * statistics (norm batch under mpirun without --bn-sync), else 1 (the whole batch, or no
 * BatchNorm). Resuming a run with another count would change its model. */
static int64_t config_bn_groups(const char *json) {
    nb_json_object o;
    nb_json_read_object(json, &o);
    long long ranks = 1;
    nb_json_get_int(&o, "ranks", &ranks);
    const char *norm = nb_json_get_str(&o, "norm"), *bn = nb_json_get_str(&o, "bn_statistics");
    int per_rank = norm && strcmp(norm, "batch") == 0 && bn && strcmp(bn, "per-rank") == 0;
    nb_json_object_free(&o);
    return per_rank && ranks > 1 ? ranks : 1;
}

/* nb_run_resume_prepare, with how the run was trained: the ranks it was started on and its
 * BatchNorm groups (config_bn_groups) into *ranks and *bn_groups (may be NULL). */
static int resume_prepare(nb_store *open, const char *db, int64_t id, int from_scratch, char **buf,
                          const char **args, int max, int *nargs, char *ckpt, size_t ckpt_size,
                          int64_t *ckpt_step, nb_ckpt_ident *ident, int64_t *ranks,
                          int64_t *bn_groups) {
    nb_err err;
    nb_err_clear(&err);
    nb_store *s = open;
    nb_run_detail *d = NULL;
    int rc = NB_EXIT_FAIL;
    if ((!s && nb_store_open(&s, db, 1, &err) != 0) || nb_run_get(s, id, &d, &err) != 0) {
        nb_report_err(&err);
        goto out;
    }
    if (strcmp(d->info.status, "finished") == 0) {
        nb_die("run %lld finished already: there is nothing to resume", (long long)id);
        goto out;
    }
    if (strcmp(d->info.status, "running") == 0) {
        /* the words of the store's claim (results/store.c), which a resume racing this one
         * meets instead when it reads the run's status first */
        nb_die("run %lld is running in process %lld on %s: it cannot be resumed twice",
               (long long)id, (long long)d->info.pid, d->info.host);
        goto out;
    }
    const char *rec = NULL;
    for (int i = 0; i < d->nparams; i++)
        if (strcmp(d->params[i].key, "argv") == 0) rec = d->params[i].value;
    if (!rec) {
        nb_die("run %lld has no recorded command line: it cannot be resumed", (long long)id);
        goto out;
    }
    char store_id[40];
    if (checkpoint_file(ckpt, ckpt_size, db, id, 0, &err) != 0 ||
        nb_store_id(s, store_id, sizeof store_id, &err) != 0) {
        nb_report_err(&err);
        goto out;
    }
    nb_ckpt_ident_set(ident, store_id, id, d->info.task, d->info.norm, d->info.seed, d->config);
    if (from_scratch) {
        *ckpt_step = -1;
    } else {
        if (access(ckpt, R_OK) != 0) {
            nb_die("run %lld has no checkpoint '%s'", (long long)id, ckpt);
            fprintf(stderr,
                    "hint: checkpoints are written at the end of each epoch; a run stopped in its "
                    "first epoch must be started again ('normbench run --resume %lld "
                    "--from-scratch' does it under the same run id)\n",
                    (long long)id);
            goto out;
        }
        nb_ckpt_state st;
        nb_ckpt_ident have;
        if (nb_ckpt_read_state(ckpt, &have, &st, &err) != 0 ||
            nb_ckpt_ident_check(ckpt, &have, ident, &err) != 0) {
            nb_report_err(&err);
            goto out;
        }
        *ckpt_step = st.step;
    }
    *buf = strdup(rec);
    if (!*buf) {
        nb_die("out of memory");
        goto out;
    }
    int n = 0;
    for (char *p = *buf; p && n < max;) {
        args[n++] = p;
        p = strchr(p, '\x1f');
        if (p) *p++ = '\0';
    }
    *nargs = n;
    if (ranks) *ranks = config_int(d->config, "ranks", 1);
    if (bn_groups) *bn_groups = config_bn_groups(d->config);
    rc = 0;
out:
    nb_run_detail_free(d);
    if (s && s != open) nb_store_close(s);
    return rc;
}

int nb_run_resume_prepare(nb_store *open, const char *db, int64_t id, int from_scratch, char **buf,
                          const char **args, int max, int *nargs, char *ckpt, size_t ckpt_size,
                          int64_t *ckpt_step, nb_ckpt_ident *ident) {
    return resume_prepare(open, db, id, from_scratch, buf, args, max, nargs, ckpt, ckpt_size,
                          ckpt_step, ident, NULL, NULL);
}

/* Removes the checkpoint temporary files that a run killed while writing left beside the store
 * (their writer is gone); a failure only warns. */
static void remove_stale_checkpoints(const char *db) {
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s-checkpoints", db) >= sizeof dir) return;
    nb_err err;
    nb_err_clear(&err);
    if (nb_ckpt_remove_stale(dir, NULL, &err) != 0) fprintf(stderr, "warning: %s\n", err.msg);
}

int nb_run_load_config(const char *db, int64_t id, nb_train_cfg *cfg, char **buf, char *model,
                       size_t model_size, nb_ckpt_ident *ident) {
    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    nb_run_detail *d = NULL;
    int rc = NB_EXIT_FAIL;
    *buf = NULL;
    if (nb_store_open(&s, db, 1, &err) != 0 || nb_run_get(s, id, &d, &err) != 0) {
        nb_report_err(&err);
        goto out;
    }
    if (strcmp(d->info.status, "finished") != 0) {
        nb_die("run %lld is %s: only a finished run keeps its model", (long long)id,
               d->info.status);
        goto out;
    }
    const char *rec = NULL;
    for (int i = 0; i < d->nparams; i++)
        if (strcmp(d->params[i].key, "argv") == 0) rec = d->params[i].value;
    if (!rec || !(*buf = strdup(rec))) {
        nb_die("run %lld has no recorded command line", (long long)id);
        goto out;
    }
    const char *args[256];
    int n = 0;
    args[n++] = "run";
    for (char *p = *buf; p && n < 250;) {
        args[n++] = p;
        p = strchr(p, '\x1f');
        if (p) *p++ = '\0';
    }
    run_args a;
    if (parse_run(n, args, &a) != 0) {
        fprintf(stderr, "hint: run %lld's recorded command line no longer parses\n", (long long)id);
        rc = NB_EXIT_USAGE;
        goto out;
    }
    *cfg = a.cfg;
    char ck[4096];
    if (checkpoint_file(ck, sizeof ck, db, id, 0, &err) != 0) {
        nb_task_opts_free(cfg);
        nb_report_err(&err);
        goto out;
    }
    snprintf(model, model_size, "%.*s.model", (int)strlen(ck) - 5, ck);
    if (ident) {
        /* what the run's kept model must belong to: as resume_prepare checks a checkpoint */
        char store_id[40];
        if (nb_store_id(s, store_id, sizeof store_id, &err) != 0) {
            nb_task_opts_free(cfg);
            nb_report_err(&err);
            goto out;
        }
        nb_ckpt_ident_set(ident, store_id, id, d->info.task, d->info.norm, d->info.seed, d->config);
    }
    rc = 0;
out:
    nb_run_detail_free(d);
    if (s) nb_store_close(s);
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

int cmd_run(int argc, const char **argv) {
    return nb_run_exec(argc, argv, NULL);
}

static int run_exec(int argc, const char **argv, const nb_run_host *h);

int nb_run_exec(int argc, const char **argv, const nb_run_host *h) {
    /* data-parallel: until the first step the ranks meet only in agreements (cmd/mpi.h); a rank
     * whose set-up stopped before its next one takes part in it, so that no rank waits */
    const int dp = nb_mpi_on() && nb_mpi_size() > 1 && !(h && (h->rec || h->stop));
    if (dp) nb_mpi_setup_begin();
    int rc = run_exec(argc, argv, h);
    if (dp) nb_mpi_setup_fail(rc);
    return rc;
}

static int run_exec(int argc, const char **argv, const nb_run_host *h) {
    /* --resume RUN [--db FILE] [--quiet]: continue a run from its last checkpoint. */
    int64_t resume_id = 0, resume_step = 0;
    int from_scratch = 0;
    char *resume_buf = NULL, resume_ckpt[4096] = "";
    nb_ckpt_ident resume_ident;
    const char *rargs[256];
    if (h && h->resume_run > 0) { /* claimed by the host already */
        resume_id = h->resume_run;
        resume_step = h->resume_step;
        resume_ident = *h->resume_ident;
        from_scratch = !h->resume_ckpt;
        if (h->resume_ckpt) snprintf(resume_ckpt, sizeof resume_ckpt, "%s", h->resume_ckpt);
    }
    /* under mpirun with more than one rank (and not as a sweep's job): one run over every rank */
    const int dp = nb_mpi_on() && nb_mpi_size() > 1 && !(h && (h->rec || h->stop));
    const int dp_rank = dp ? nb_mpi_rank() : 0;
    /* how the resumed run was trained (0: unknown, a host's resume) */
    int64_t resume_ranks = 0, resume_bn_groups = 0;
    /* a data-parallel resume on a rank other than 0: rank 0's checkpoint, sent over MPI, and
     * this rank's copy of it */
    char *resume_bytes = NULL, resume_copy[4200] = "";
    size_t resume_len = 0;
    for (int i = 1; i < argc && !(h && h->resume_run > 0); i++)
        if (strcmp(argv[i], "--resume") == 0 || strncmp(argv[i], "--resume=", 9) == 0) {
            const char *db = NULL;
            int quiet = 0;
            nb_opt ro[] = {
                {"resume", NB_OPT_I64, &resume_id, "RUN", "run to resume", NULL, 1, 1e15},
                {"from-scratch", NB_OPT_FLAG, &from_scratch, NULL,
                 "start the run over under its id instead (no checkpoint needed)"},
                NB_OPT_DB(&db),
                {"quiet", NB_OPT_FLAG, &quiet, NULL, "no progress output"},
                {NULL}};
            int prc = nb_parse_opts("run", run_usage, argc, argv, ro, NULL, 0, NULL);
            if (prc < 0) return NB_EXIT_OK;
            if (prc) {
                fprintf(stderr, "hint: --resume takes only --db, --quiet and --from-scratch beside "
                                "it: the run keeps its own options\n");
                return prc;
            }
            int nargs = 0, rrc = 0;
            /* data-parallel: rank 0 alone reads the store and the checkpoint */
            if (dp_rank == 0)
                rrc = resume_prepare(NULL, db ? db : nb_default_db(), resume_id, from_scratch,
                                     &resume_buf, rargs + 1, 250, &nargs, resume_ckpt,
                                     sizeof resume_ckpt, &resume_step, &resume_ident, &resume_ranks,
                                     &resume_bn_groups);
            if (dp) { /* every rank resumes this run */
                char what[96];
                snprintf(what, sizeof what, "resumes run %lld%s", (long long)resume_id,
                         from_scratch ? " from scratch" : "");
                if ((rrc = nb_mpi_setup_agree(NB_MPI_START, rrc, what)) != 0) {
                    free(resume_buf);
                    return rrc;
                }
            }
            if (dp) { /* ... and gives every rank what it found, the checkpoint's bytes too */
                nb_mpi_resume sh;
                memset(&sh, 0, sizeof sh);
                sh.rc = rrc;
                if (dp_rank == 0 && rrc == 0) {
                    sh.args = join_argv(nargs, rargs + 1);
                    sh.step = resume_step;
                    sh.ident = resume_ident;
                    sh.ranks = resume_ranks;
                    sh.bn_groups = resume_bn_groups;
                }
                rrc = nb_mpi_share_resume(
                    &sh, dp_rank == 0 && rrc == 0 && !from_scratch ? resume_ckpt : NULL);
                free(resume_buf);
                resume_buf = sh.args;
                if (rrc == 0 && !resume_buf) rrc = nb_die("out of memory");
                if (rrc) {
                    free(resume_buf);
                    free(sh.ckpt);
                    return rrc;
                }
                nargs = 0;
                for (char *p = resume_buf; p && nargs < 250;) {
                    rargs[1 + nargs++] = p;
                    p = strchr(p, '\x1f');
                    if (p) *p++ = '\0';
                }
                resume_step = sh.step;
                resume_ident = sh.ident;
                resume_ranks = sh.ranks;
                resume_bn_groups = sh.bn_groups;
                if (dp_rank != 0) {
                    resume_bytes = sh.ckpt;
                    resume_len = sh.ckpt_len;
                } else {
                    free(sh.ckpt); /* rank 0 reads its own file */
                }
            }
            if (rrc) return rrc;
            rargs[0] = "run";
            nargs++;
            /* the store named now wins over the recorded one (taken out: an option may not be
             * given twice); so does --quiet */
            for (int k = 1; db && k < nargs;)
                if (strcmp(rargs[k], "--db") == 0 || strncmp(rargs[k], "--db=", 5) == 0) {
                    int w = rargs[k][4] == '=' || k + 1 >= nargs ? 1 : 2;
                    memmove(rargs + k, rargs + k + w, sizeof *rargs * (size_t)(nargs - k - w));
                    nargs -= w;
                } else {
                    k++;
                }
            if (db) rargs[nargs++] = "--db", rargs[nargs++] = db;
            if (quiet) rargs[nargs++] = "--quiet";
            argc = nargs;
            argv = rargs;
            break;
        }
    if (dp && !resume_id) {
        int src = nb_mpi_setup_agree(NB_MPI_START, 0, "starts a new run");
        if (src) return src;
    }
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) {
        free(resume_buf);
        free(resume_bytes);
        return rc;
    }
    nb_note_blas_core();
    nb_train_cfg cfg = a.cfg;
    nb_dist dist;
    /* A resume over another number of ranks continues the same model, except where BatchNorm
     * takes per-rank statistics: their groups are the model's. */
    const int64_t bn_groups = dp && nb_norm_get(cfg.norm.kind)->acts == NB_ON_FEATURES && !a.bn_sync
                                  ? (int64_t)nb_mpi_size()
                                  : 1;
    if (resume_id && resume_bn_groups > 0 && bn_groups != resume_bn_groups) {
        const int n = dp ? nb_mpi_size() : 1;
        const long long id = (long long)resume_id, g = (long long)resume_bn_groups;
        if (dp_rank == 0 && g > 1)
            fprintf(
                stderr,
                "error: run %lld took its BatchNorm statistics per rank over %lld ranks: "
                "resuming it on %d rank%s would change the model\n"
                "hint: resume it on %lld ranks: 'mpirun -np %lld normbench run --resume %lld'\n",
                id, g, n, n > 1 ? "s" : "", g, g, id);
        else if (dp_rank == 0)
            fprintf(stderr,
                    "error: run %lld took its BatchNorm statistics over the whole batch: resumed "
                    "on %d ranks without --bn-sync it would take them per rank, another model\n"
                    "hint: resume it in one process: 'normbench run --resume %lld'\n",
                    id, n, id);
        free(resume_buf);
        free(resume_bytes);
        nb_task_opts_free(&cfg);
        return NB_EXIT_USAGE;
    }
    if (dp) {
        const char *why = cfg.device ? "--device cuda is not supported for a data-parallel run"
                          : cfg.batch < nb_mpi_size()
                              ? "--batch is smaller than the number of ranks"
                              : NULL;
        if (!why && nb_norm_get(cfg.norm.kind)->acts == NB_ON_FEATURES && !a.bn_sync &&
            cfg.batch / nb_mpi_size() < 2)
            why = "per-rank batch norm needs at least 2 rows per rank (or --bn-sync)";
        if (why) {
            free(resume_buf);
            free(resume_bytes);
            nb_task_opts_free(&cfg);
            return nb_usage_error("run", "%s (%d ranks)", why, nb_mpi_size());
        }
        nb_mpi_dist(&dist, a.bn_sync);
        cfg.dist = &dist;
        if (a.bn_sync) cfg.norm.bn_sum = nb_mpi_bn_sum;
        if (dp_rank != 0) a.quiet = 1;
    }
    if (cfg.device) { /* --device cuda: a GPU first, and a task that has the device path */
        nb_err derr;
        nb_err_clear(&derr);
        if (!nb_norm_get(cfg.norm.kind)->cuda) { /* no kernels tested on a GPU yet (DyT) */
            const char *nn = nb_norm_name(cfg.norm.kind);
            free(resume_buf);
            nb_task_opts_free(&cfg);
            return nb_usage_error("run",
                                  "--device cuda has no %s kernels yet: train --norm %s "
                                  "on the CPU (leave out --device)",
                                  nn, nn);
        }
        if (!nb_task_find(cfg.task)->cuda) {
            char list[128] = "";
            for (int i = 0, n = 0; nb_task_at(i); i++)
                if (nb_task_at(i)->cuda)
                    n += snprintf(list + n, sizeof list - (size_t)n, "%s%s", n ? ", " : "",
                                  nb_task_at(i)->name);
            free(resume_buf);
            nb_task_opts_free(&cfg);
            return nb_usage_error(
                "run", "--device cuda is implemented for the task(s) %s, not '%s'", list, cfg.task);
        }
        if (nb_cuda_init(&derr) != 0) {
            free(resume_buf);
            nb_task_opts_free(&cfg);
            return nb_report_err(&derr);
        }
    }
    const char *tag = a.tag;
    int quiet = a.quiet || dp_rank != 0;
    if (a.threads > 0) {
        omp_set_num_threads(a.threads);
        openblas_set_num_threads(a.threads);
    }
    cfg.threads = omp_get_max_threads();
    cfg.stop = h && h->stop ? h->stop : &stop_requested;
    const nb_run_rec *rec = h && h->rec ? h->rec : NULL;
    /* the other ranks of a data-parallel run record nothing: rank 0 does */
    nb_run_rec none = {.create = none_create,
                       .tag = none_kv,
                       .param = none_kv,
                       .metrics = none_metrics,
                       .finish = none_finish};
    if (dp_rank != 0) rec = &none;
    /* A registry dataset is fetched on first use (datasets/dataset.h); synthetic never is. */
    if (!a.no_fetch) rc = nb_cmd_ensure_dataset(cfg.dataset, cfg.data_dir, 0, quiet);

    nb_err err;
    nb_err_clear(&err);
    run_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    const char *dbpath = a.db;
    nb_run_rec local = {.create = local_create,
                        .tag = local_tag,
                        .param = local_param,
                        .metrics = local_metrics,
                        .finish = local_finish};
    if (!rc && !rec) {
        if (nb_store_open(&ctx.store, dbpath, 0, &err) != 0 ||
            nb_store_id(ctx.store, ctx.store_id, sizeof ctx.store_id, &err) != 0) {
            rc = nb_report_err(&err);
        } else {
            local.ctx = ctx.store;
            rec = &local;
            /* how long a write waits for another process's lock (tests set a short wait) */
            const char *w = getenv("NORMBENCH_STORE_WAIT");
            char *end = NULL;
            double ws = w && *w ? strtod(w, &end) : -1;
            if (ws >= 0 && ws <= 86400 && end && !*end)
                nb_store_set_busy_timeout(ctx.store, (int)(ws * 1000));
            remove_stale_checkpoints(dbpath);
        }
    }
    /* data-parallel: the ranks' configurations agree, and a rank that failed alone (rank 0
     * with the store) stops every rank */
    if (dp) {
        char *canon = rc ? NULL : config_json(&cfg, 0);
        if (!rc && !canon) rc = nb_die("out of memory");
        rc = nb_mpi_setup_agree(NB_MPI_CONFIG, rc, canon);
        free(canon);
    }
    if (rc) {
        nb_store_close(ctx.store);
        free(resume_buf);
        free(resume_bytes);
        nb_task_opts_free(&cfg);
        return rc;
    }
    ctx.rec = rec;
    /* From here a signal stops the run at its next step, recorded as interrupted (a resume's
     * claim included: a run left claimed by a killed process shows as crashed). A host (a sweep
     * under MPI) handles the signals itself and sets the stop flag. */
    if (!(h && h->stop)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL); /* a closed terminal or ssh session */
    }

    char *json = config_json(&cfg, 1);
    if (!json) {
        free(resume_buf);
        free(resume_bytes);
        nb_task_opts_free(&cfg);
        nb_store_close(ctx.store);
        return nb_die("out of memory");
    }
    ctx.spec.task = cfg.task;
    ctx.spec.dataset = cfg.dataset;
    /* BN-everywhere is its own curve in the papers' figures: report and plot group by this name */
    const char *label = nb_task_norm_label(nb_task_find(cfg.task), &cfg);
    ctx.spec.norm = label ? label : nb_norm_name(cfg.norm.kind);
    ctx.spec.seed = (int64_t)cfg.seed;
    ctx.spec.config_json = json;
    char *compute = nb_compute_json();
    ctx.spec.compute_json = compute;
    ctx.tag = tag;
    ctx.variant = a.variant;
    nb_task_model_label(nb_task_find(cfg.task), &cfg, ctx.model_label, sizeof ctx.model_label);
    ctx.db = dbpath;
    char *argv_rec = join_argv(argc - 1, argv + 1);
    ctx.argv_rec = argv_rec;
    nb_progress_init(&ctx.progress, quiet);
    nb_sink sink = {.ctx = &ctx,
                    .record = sink_record,
                    .param = sink_param,
                    .checkpoint_path = sink_checkpoint,
                    .ckpt_ident = &ctx.ident,
                    .checkpoint_saved = sink_checkpoint_saved,
                    .progress = sink_progress,
                    .model_dir = sink_model_dir};
    if (dp_rank != 0) sink.checkpoint_path = NULL; /* rank 0 writes them */
    /* the model is kept beside the store: by rank 0, not by a rank that records through it */
    if (dp_rank != 0 || (rec && rec->ckpt_saved)) sink.model_dir = NULL;
    if (dp && nb_norm_get(cfg.norm.kind)->acts == NB_ON_FEATURES && !ctx.variant)
        ctx.variant = a.bn_sync ? "--bn-sync" : "per-rank BN"; /* a different model */
    if (resume_id) {
        /* the claim (rank 0 for every rank), then every rank's copy of the checkpoint */
        int crc = 0, claimed = 0;
        if (ctx.store && nb_run_resume(ctx.store, resume_id, resume_step, &err) != 0)
            crc = nb_report_err(&err);
        else
            claimed = ctx.store != NULL;
        if (!crc && resume_bytes &&
            nb_mpi_ckpt_copy(resume_bytes, resume_len, resume_id, resume_copy, sizeof resume_copy,
                             &err) != 0)
            crc = nb_report_err(&err);
        free(resume_bytes);
        resume_bytes = NULL;
        if (dp) crc = nb_mpi_agree(crc);
        /* a run resumed on another number of ranks (the same model) says so */
        if (!crc && ctx.store && dp_rank == 0 && resume_ranks > 0 &&
            resume_ranks != (dp ? nb_mpi_size() : 1)) {
            char v[96];
            snprintf(v, sizeof v, "%d from step %lld", dp ? nb_mpi_size() : 1,
                     (long long)(resume_step > 0 ? resume_step : 0));
            if (nb_run_param(ctx.store, resume_id, "resumed_on_ranks", v, &err) != 0)
                fprintf(stderr, "warning: %s\n", err.msg);
        }
        if (crc) {
            /* another rank could not take the checkpoint: the run is not running, and can be
             * resumed again */
            if (claimed && nb_run_finish(ctx.store, resume_id, "failed",
                                         "a rank could not take the checkpoint", &err) != 0)
                fprintf(stderr, "warning: %s\n", err.msg);
            nb_mpi_ckpt_copy_drop(resume_copy);
            free(json), free(argv_rec), free(resume_buf), free(compute);
            nb_task_opts_free(&cfg);
            nb_store_close(ctx.store);
            return crc;
        }
        if (resume_copy[0]) snprintf(resume_ckpt, sizeof resume_ckpt, "%s", resume_copy);
        ctx.created = 1;
        ctx.run_id = resume_id;
        /* the identity recorded with the run (its stored configuration), not the rebuilt one */
        ctx.ident = resume_ident;
        ctx.have_ident = 1;
        snprintf(ctx.ckpt, sizeof ctx.ckpt, "%s", resume_ckpt);
        if (from_scratch) {
            unlink(ctx.ckpt);
            if (!quiet)
                fprintf(stderr, "run %lld: starting over from step 0\n", (long long)resume_id);
        } else {
            cfg.resume_from = ctx.ckpt;
            if (!quiet)
                fprintf(stderr, "run %lld: resuming from its checkpoint at step %lld\n",
                        (long long)resume_id, (long long)resume_step);
        }
    }

    nb_status status = NB_STATUS_FAILED;
    int trc = nb_task_find(cfg.task)->train(&cfg, &sink, &status, &err);
    nb_progress_end(&ctx.progress);
    int exit_code = NB_EXIT_OK;
    /* the store stayed locked past the wait: the run is kept as it was, and resumable */
    const int locked_out = ctx.store && nb_store_gave_up(ctx.store) && ctx.created;
    if (locked_out) {
        struct stat ck;
        const int have_ckpt = ctx.ckpt[0] && stat(ctx.ckpt, &ck) == 0;
        nb_hintf(trc != 0 ? &err : NULL,
                 "the run is kept%s: once the store is free, continue it with 'normbench run "
                 "--resume %lld%s --db %s'",
                 have_ckpt ? " with its last checkpoint" : "", (long long)ctx.run_id,
                 have_ckpt ? "" : " --from-scratch", dbpath);
        /* recording its end waits no longer: it shows as crashed until resumed */
        nb_store_set_busy_timeout(ctx.store, 1000);
    }
    if (trc != 0) {
        status = NB_STATUS_FAILED;
        exit_code = nb_report_err(&err);
    } else if (status != NB_STATUS_FINISHED) {
        exit_code = NB_EXIT_FAIL;
    }
    if (trc == 0 && !ctx.created) ensure_run(&ctx, &err);
    if (ctx.created && dp_rank == 0) {
        nb_err ferr;
        nb_err_clear(&ferr);
        const char *msg = status == NB_STATUS_FINISHED      ? NULL
                          : status == NB_STATUS_INTERRUPTED ? "interrupted by a signal"
                                                            : err.msg;
        if (rec->finish(rec->ctx, ctx.run_id, nb_status_name(status), msg, &ferr) != 0) {
            if (ctx.store && nb_store_gave_up(ctx.store)) {
                struct stat ck;
                const int have_ckpt = ctx.ckpt[0] && stat(ctx.ckpt, &ck) == 0;
                nb_hintf(&ferr,
                         "run %lld is kept%s and shows as crashed: once the store is free, "
                         "continue it with 'normbench run --resume %lld%s --db %s'",
                         (long long)ctx.run_id, have_ckpt ? " with its last checkpoint" : "",
                         (long long)ctx.run_id, have_ckpt ? "" : " --from-scratch", dbpath);
            }
            if (!locked_out || trc == 0) exit_code = nb_report_err(&ferr);
            status = NB_STATUS_FAILED; /* not finished: its checkpoint is kept */
        }
        if (status == NB_STATUS_DIVERGED)
            fprintf(stderr, "error: run %lld diverged: %s\n", (long long)ctx.run_id, err.msg);
        else if (status == NB_STATUS_INTERRUPTED)
            fprintf(stderr, "run %lld interrupted; what it recorded is kept\n",
                    (long long)ctx.run_id);
        if (!(h && h->no_result_line))
            printf("run %lld %s\n", (long long)ctx.run_id, nb_status_name(status));
        /* A finished or diverged run has nothing to resume: free the disk. */
        if (ctx.ckpt[0] && (status == NB_STATUS_FINISHED || status == NB_STATUS_DIVERGED))
            unlink(ctx.ckpt);
    }
    nb_mpi_ckpt_copy_drop(resume_copy);
    free(json);
    free(compute);
    free(argv_rec);
    free(resume_buf);
    nb_task_opts_free(&cfg);
    nb_store_close(ctx.store);
    return exit_code;
}
