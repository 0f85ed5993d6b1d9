/* run/job.c — executing a run: the store or another recorder, the sink a task trains into,
 * resume (claim and checkpoint, also over MPI), data-parallel set-up, signals and the finish.
 * (Moved from cmd/cmd_run.c.) */
#include "run/job.h"

#include "nn/blas.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/cuda/nbcuda.h"
#include "results/query.h"
#include "results/store.h"
#include "run/mpi.h"
#include "tasks/checkpoint.h"
#include "tasks/task.h"
#include "util/json.h"
#include "util/num.h"

static const char *const bias_choices[] = {"standard", "none", "kiros", NULL};

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
    char model_label[128];   /* the task's model label (tag "model"), "" when it has none */
    const char *db;          /* the store's path: checkpoints live beside it */
    const char *argv_rec;    /* the command line, recorded (shown; a legacy store's run has no
                                hosting recorded: a resume reads its hosting options from it) */
    const char *hosting_rec; /* its hosting, recorded (a resume reads it) */
    char ckpt[4096];         /* this run's checkpoint file, once known */
    char model[4096];        /* this run's model directory, once made */
    char store_id[40];       /* the store's id, recorded in every checkpoint */
    nb_ckpt_ident ident;     /* what this run's checkpoints belong to, once known */
    int have_ident;
    int quiet;
    const nb_job_io *io; /* the job's messages and progress */
} run_ctx;

/* printf-style text through io->say. */
static void say(const nb_job_io *io, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const nb_job_io *io, const char *fmt, ...) {
    if (!io->say) return;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    io->say(io->ctx, text);
}

/* "error: MSG" and "hint: HINT" through io->say; returns NB_EXIT_FAIL. */
static int say_err(const nb_job_io *io, const nb_err *e) {
    say(io, "error: %s\n", e->msg[0] ? e->msg : "unknown failure");
    if (e->hint[0]) say(io, "hint: %s\n", e->hint);
    return NB_EXIT_FAIL;
}

/* A usage error of `run`, printf-style, with the hint to its help; returns NB_EXIT_USAGE. */
static int say_usage(const nb_job_io *io, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int say_usage(const nb_job_io *io, const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    say(io, "error: %s\nhint: see 'normbench run --help'\n", text);
    return NB_EXIT_USAGE;
}

/* The recorder of a run that holds the store itself (ctx: an nb_store_rec), under its lock
 * when it has one. */
static void rec_lock(const nb_store_rec *c) {
    if (c->mu) pthread_mutex_lock(c->mu);
}
static void rec_unlock(const nb_store_rec *c) {
    if (c->mu) pthread_mutex_unlock(c->mu);
}
static int local_create(void *ctx, const nb_run_spec *spec, int64_t *run, char *store_id,
                        size_t size, nb_err *err) {
    const nb_store_rec *c = ctx;
    rec_lock(c);
    int rc = nb_run_create(c->store, spec, run, err);
    if (rc == 0 && store_id) rc = nb_store_id(c->store, store_id, size, err);
    rec_unlock(c);
    return rc;
}
static int local_tag(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    const nb_store_rec *c = ctx;
    rec_lock(c);
    int rc = nb_run_tag(c->store, run, k, v, err);
    rec_unlock(c);
    return rc;
}
static int local_param(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    const nb_store_rec *c = ctx;
    rec_lock(c);
    int rc = nb_run_param(c->store, run, k, v, err);
    rec_unlock(c);
    return rc;
}
static int local_metrics(void *ctx, int64_t run, const nb_metric *m, int n, nb_err *err) {
    const nb_store_rec *c = ctx;
    rec_lock(c);
    int rc = nb_metrics_add(c->store, run, m, n, err);
    rec_unlock(c);
    return rc;
}
static int local_finish(void *ctx, int64_t run, const char *st, const char *msg, nb_err *err) {
    const nb_store_rec *c = ctx;
    rec_lock(c);
    int rc = nb_run_finish(c->store, run, st, msg, err);
    rec_unlock(c);
    return rc;
}

void nb_run_rec_store(nb_run_rec *rec, nb_store_rec *ctx, nb_store *store, pthread_mutex_t *mu) {
    *ctx = (nb_store_rec){.store = store, .mu = mu};
    *rec = (nb_run_rec){.ctx = ctx,
                        .create = local_create,
                        .tag = local_tag,
                        .param = local_param,
                        .metrics = local_metrics,
                        .finish = local_finish};
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
int nb_job_checkpoint_file(char *out, size_t size, const char *db, int64_t id, int make_dir,
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
    /* the hosting before the command line: a run whose command line is recorded has both */
    if (c->hosting_rec &&
        c->rec->param(c->rec->ctx, c->run_id, "hosting", c->hosting_rec, err) != 0)
        return -1;
    if (c->argv_rec && c->rec->param(c->rec->ctx, c->run_id, "argv", c->argv_rec, err) != 0)
        return -1;
    if (!c->quiet)
        say(c->io, "run %lld: %s on %s, norm %s, seed %lld\n", (long long)c->run_id, c->spec.task,
            c->spec.dataset, c->spec.norm, (long long)c->spec.seed);
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
    if (!c->ckpt[0] &&
        nb_job_checkpoint_file(c->ckpt, sizeof c->ckpt, c->db, c->run_id, 1, err) != 0)
        return NULL;
    /* a resumed run's path is known already: its directory may not be (--from-scratch of a
     * run that never wrote a checkpoint) */
    char dir[4096];
    if (!c->rec->ckpt_dir && c->db &&
        nb_job_checkpoint_file(dir, sizeof dir, c->db, c->run_id, 1, err) != 0)
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
    if (nb_job_checkpoint_file(ck, sizeof ck, c->db, c->run_id, 1, err) != 0) return NULL;
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
    if (c->io->progress) c->io->progress(c->io->ctx, p);
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
    kv_str(&j, "activation", nb_task_act_name(cfg));
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

char *nb_job_config_json(const nb_job *j) {
    return config_json(&j->cfg, 0);
}

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

/* ---- a configuration read back from the store ------------------------------------------------ */

/* The stored configuration's member key as a number, an integer or one of two names (the
 * one meaning 1 first), into *out; -1 with err naming the key when it is missing or not such. */
static int stored_num(const nb_json_object *o, const char *key, double *out, nb_err *err) {
    const char *v = nb_json_get(o, key);
    if (!v) return nb_errf(err, "its stored configuration has no '%s'", key);
    if (nb_json_get_str(o, key) || nb_parse_double(v, out) != 0)
        return nb_errf(err, "its stored configuration's '%s' is not a number: %s", key, v);
    return 0;
}
static int stored_int(const nb_json_object *o, const char *key, int64_t lo, int64_t hi,
                      int64_t *out, nb_err *err) {
    long long x;
    if (!nb_json_get(o, key)) return nb_errf(err, "its stored configuration has no '%s'", key);
    if (!nb_json_get_int(o, key, &x) || x < lo || x > hi)
        return nb_errf(err, "its stored configuration's '%s' is not a valid integer: %s", key,
                       nb_json_get(o, key));
    *out = x;
    return 0;
}
static int stored_int32(const nb_json_object *o, const char *key, int *out, nb_err *err) {
    int64_t x;
    if (stored_int(o, key, INT32_MIN, INT32_MAX, &x, err) != 0) return -1;
    *out = (int)x;
    return 0;
}
static int stored_two(const nb_json_object *o, const char *key, const char *one, const char *zero,
                      int *out, nb_err *err) {
    const char *s = nb_json_get_str(o, key);
    if (!nb_json_get(o, key)) return nb_errf(err, "its stored configuration has no '%s'", key);
    if (!s || (strcmp(s, one) != 0 && strcmp(s, zero) != 0))
        return nb_errf(err, "its stored configuration's '%s' is neither %s nor %s: %s", key, one,
                       zero, nb_json_get(o, key));
    *out = strcmp(s, one) == 0;
    return 0;
}

/* The options every task shares, from the stored configuration o into cfg (after the task's
 * defaults, which they replace). Returns 0, or -1 with err. */
static int stored_common(const nb_json_object *o, const nb_task *t, nb_train_cfg *cfg,
                         nb_err *err) {
    nb_norm_cfg *n = &cfg->norm;
    nb_adam_cfg *a = &cfg->adam;
    int64_t seed, steps;
    int bias = -1;
    const char *s;
    if (stored_num(o, "eps", &n->eps, err) ||
        stored_two(o, "eps_placement", "outside-sqrt", "inside-sqrt", &n->eps_outside, err) ||
        stored_num(o, "p", &n->p, err) ||
        stored_two(o, "p_rounding", "floor", "ceil", &n->p_floor, err) ||
        stored_num(o, "bn_momentum", &n->bn_momentum, err) ||
        stored_two(o, "bn_batch_variance", "unbiased", "biased", &n->bn_unbiased_batch, err) ||
        stored_two(o, "bn_running_variance", "unbiased", "biased", &n->bn_unbiased_running, err) ||
        stored_two(o, "wn_init", "data-dependent", "plain", &n->wn_data_init, err) ||
        stored_num(o, "lr", &a->lr, err) || stored_num(o, "beta1", &a->beta1, err) ||
        stored_num(o, "beta2", &a->beta2, err) || stored_num(o, "adam_eps", &a->eps, err) ||
        stored_two(o, "adam_eps_placement", "inside-sqrt", "outside-sqrt", &a->eps_inside, err) ||
        stored_two(o, "adam_eps_on", "corrected-v", "raw-v", &a->eps_corrected, err) ||
        stored_num(o, "clip_global", &cfg->clip, err) ||
        stored_int(o, "seed", 0, INT64_MAX, &seed, err) ||
        stored_int32(o, "epochs", &cfg->epochs, err) ||
        stored_int(o, "steps", 0, INT64_MAX, &steps, err) ||
        stored_int32(o, "batch", &cfg->batch, err) ||
        stored_int32(o, "eval_batch", &cfg->eval_batch, err) ||
        stored_int32(o, "subset", &cfg->subset, err) ||
        stored_int32(o, "log_every", &cfg->log_every, err) ||
        stored_int32(o, "threads", &cfg->threads, err) ||
        stored_two(o, "denormals", "flushed-to-zero", "ieee", &cfg->flush_denormals, err))
        return -1;
    cfg->seed = (uint64_t)seed;
    cfg->steps = steps;
    s = nb_json_get_str(o, "adam_bias_correction");
    for (int i = 0; s && bias_choices[i]; i++)
        if (strcmp(bias_choices[i], s) == 0) bias = i;
    if (bias < 0)
        return nb_errf(err, "its stored configuration's 'adam_bias_correction' is not valid: %s",
                       s ? s : "(none)");
    a->bias = (nb_adam_bias)bias;
    const nb_norm_def *nd = nb_norm_get(n->kind);
    if (nd->nscalars > 0) { /* the scalars' initial value (DyT's alpha, "dyt_alpha") */
        char key[64];
        snprintf(key, sizeof key, "%s_%s", nd->name, nd->scalar_name);
        if (stored_num(o, key, &n->dyt_alpha, err) != 0) return -1;
    }
    if (!t->activation) { /* else the task's own, whatever cfg->act says */
        nb_act_kind act;
        s = nb_json_get_str(o, "activation");
        if (!s || nb_act_from_name(s, &act) != 0)
            return nb_errf(err, "its stored configuration's 'activation' is not valid: %s",
                           s ? s : "(none)");
        cfg->act = act;
    }
    return 0;
}

/* Whether cfg, rebuilt from the stored configuration o, writes it again: every member the same
 * (but data_dir and threads, which the process hosting a run chooses, and what a data-parallel
 * run adds: its ranks, hosts and BatchNorm statistics), none missing, none left over. Returns
 * 0, or -1 with err naming the first that differs. */
static int stored_same(const nb_json_object *o, const nb_train_cfg *cfg, nb_err *err) {
    char *json = config_json(cfg, 0);
    if (!json) return nb_errf(err, "out of memory");
    nb_json_object r;
    int rc = nb_json_read_object(json, &r) == 0 ? 0 : nb_errf(err, "out of memory");
    static const char *const host[] = {"data_dir", "threads",       "ranks",
                                       "hosts",    "bn_statistics", NULL};
    for (int i = 0; !rc && i < r.n; i++) {
        const nb_json_member *m = &r.kv[i];
        int skip = 0;
        for (int k = 0; host[k]; k++)
            skip |= strcmp(host[k], m->key) == 0;
        const char *v = nb_json_get(o, m->key);
        /* an option recorded before it existed: rebuilt with what normbench did then */
        const char *was = v ? NULL : nb_task_opt_legacy(nb_task_find(cfg->task), m->key);
        skip |= was && m->is_string && strcmp(was, m->value) == 0;
        if (!skip &&
            (!v || strcmp(v, m->value) != 0 || !nb_json_get_str(o, m->key) != !m->is_string))
            rc = nb_errf(err,
                         "its stored configuration does not make the same run again: '%s' is %s "
                         "stored, %s rebuilt",
                         m->key, v ? v : "missing", m->value);
    }
    for (int i = 0; !rc && i < o->n; i++) {
        int known = nb_json_get(&r, o->kv[i].key) != NULL;
        for (int k = 0; host[k]; k++)
            known |= strcmp(host[k], o->kv[i].key) == 0;
        if (!known)
            rc = nb_errf(err,
                         "its stored configuration has '%s', which this normbench does not know",
                         o->kv[i].key);
    }
    nb_json_object_free(&r);
    free(json);
    return rc;
}

/* Splits args (separated by \x1f, modified in place) into argv[first..], at most max in all;
 * returns the new count. */
static int split_args(char *args, const char **argv, int first, int max) {
    int n = first;
    for (char *p = args; p && n < max;) {
        argv[n++] = p;
        p = strchr(p, '\x1f');
        if (p) *p++ = '\0';
    }
    return n;
}

int nb_job_take_args(nb_job *j, char *args, const char ***argvp, int *argcp, nb_err *err) {
    free(j->strings);
    free((void *)j->argv_store);
    j->strings = args;
    j->argv_store = NULL;
    int argc = args ? 1 : 0;
    for (const char *p = args; p && *p; p++)
        argc += *p == '\x1f';
    const char **argv = malloc(sizeof *argv * (size_t)(argc + 1));
    if (!argv) return nb_errf(err, "out of memory");
    j->argv_store = argv;
    argc = args ? split_args(args, argv, 0, argc) : 0;
    argv[argc] = NULL;
    *argvp = argv;
    *argcp = argc;
    return 0;
}

char *nb_job_stored_hosting(const nb_run_detail *d, nb_job_host_fn legacy) {
    const char *hosting = NULL, *args = "";
    for (int i = 0; i < d->nparams; i++)
        if (strcmp(d->params[i].key, "hosting") == 0)
            hosting = d->params[i].value;
        else if (strcmp(d->params[i].key, "argv") == 0)
            args = d->params[i].value;
    if (hosting) return strdup(hosting);
    /* A legacy store: its runs were recorded with their command line alone (separated by \x1f),
     * whose hosting options legacy reads (a run recorded without one: the defaults). */
    nb_job tmp;
    nb_job_init(&tmp, NULL);
    nb_err err;
    nb_err_clear(&err);
    char *copy = strdup(args);
    const char **argv;
    int argc;
    char *json = NULL;
    if (copy && nb_job_take_args(&tmp, copy, &argv, &argc, &err) == 0) {
        nb_job_hosting h;
        memset(&h, 0, sizeof h);
        if (legacy) legacy(argc, argv, &h);
        json = nb_job_hosting_json(&h);
    }
    nb_job_free(&tmp);
    return json;
}

char *nb_job_hosting_rehost(const char *hosting, const char *db, int quiet, nb_err *err) {
    nb_job tmp;
    nb_job_init(&tmp, NULL);
    nb_job_hosting h;
    char *json = NULL;
    if (nb_job_hosting_read(&tmp, hosting, &h, err) == 0) {
        if (db) h.db = db;
        h.quiet |= quiet;
        if (!(json = nb_job_hosting_json(&h))) nb_errf(err, "out of memory");
    }
    nb_job_free(&tmp);
    return json;
}

void nb_job_hosting_of(const nb_job *j, nb_job_hosting *h) {
    memset(h, 0, sizeof *h);
    h->db = j->db;
    h->data_dir = j->data_dir_given ? j->cfg.data_dir : NULL;
    h->threads = j->threads;
    h->quiet = j->quiet;
    h->no_fetch = j->no_fetch;
    h->device = j->cfg.device;
    h->bn_sync = j->bn_sync;
}

char *nb_job_hosting_json(const nb_job_hosting *h) {
    nb_buf b = {0};
    nb_buf_puts(&b, "{");
    if (h->db) kv_str(&b, "db", h->db);
    if (h->data_dir) kv_str(&b, "data_dir", h->data_dir);
    kv_int(&b, "threads", h->threads);
    kv_int(&b, "quiet", h->quiet);
    kv_int(&b, "no_fetch", h->no_fetch);
    kv_str(&b, "device", h->device ? "cuda" : "cpu");
    kv_int(&b, "bn_sync", h->bn_sync);
    nb_buf_puts(&b, "}");
    return nb_buf_take(&b);
}

int nb_job_hosting_read(nb_job *j, const char *json, nb_job_hosting *h, nb_err *err) {
    memset(h, 0, sizeof *h);
    nb_json_object_free(&j->hosted);
    if (!json || nb_json_read_object(json, &j->hosted) != 0)
        return nb_errf(err, "its hosting is not a JSON object");
    const nb_json_object *o = &j->hosted;
    long long threads, quiet, no_fetch, bn_sync;
    const char *device = nb_json_get_str(o, "device");
    if (!nb_json_get_int(o, "threads", &threads) || threads < 0 || threads > 1024 ||
        !nb_json_get_int(o, "quiet", &quiet) || !nb_json_get_int(o, "no_fetch", &no_fetch) ||
        !nb_json_get_int(o, "bn_sync", &bn_sync) || !device)
        return nb_errf(err, "its hosting lacks a member or has one not valid: %s", json);
    h->db = nb_json_get_str(o, "db");
    h->data_dir = nb_json_get_str(o, "data_dir");
    h->threads = (int)threads;
    h->quiet = quiet != 0;
    h->no_fetch = no_fetch != 0;
    h->device = strcmp(device, "cuda") == 0;
    h->bn_sync = bn_sync != 0;
    return 0;
}

int nb_job_from_config(nb_job *j, const char *config, const nb_job_hosting *h, nb_err *err) {
    nb_train_cfg *cfg = &j->cfg;
    nb_json_object_free(&j->stored);
    if (nb_json_read_object(config, &j->stored) != 0)
        return nb_errf(err, "its stored configuration is not a JSON object");
    const nb_json_object *o = &j->stored;
    const char *task = nb_json_get_str(o, "task"), *norm = nb_json_get_str(o, "norm");
    const nb_task *t = task ? nb_task_find(task) : NULL;
    nb_norm_kind kind;
    if (!t) return nb_errf(err, "its stored configuration names no task of this normbench");
    if (!norm || nb_norm_from_name(norm, &kind) != 0)
        return nb_errf(err, "its stored configuration names no norm of this normbench");
    nb_task_opts_free(cfg);
    memset(cfg, 0, sizeof *cfg);
    cfg->task = t->name;
    cfg->norm.kind = kind;
    /* the dataset first: a task's defaults may depend on it (mt's BPE merges) */
    cfg->dataset = nb_json_get_str(o, "dataset");
    if (!cfg->dataset) return nb_errf(err, "its stored configuration has no 'dataset'");
    if (nb_task_configure_stored(t, cfg, kind, o, err) != 0 || stored_common(o, t, cfg, err) != 0)
        return -1;
    cfg->data_dir = NULL;
    if (h) { /* how this process hosts it */
        if (h->db) j->db = h->db;
        cfg->data_dir = h->data_dir;
        if (h->threads > 0) j->threads = h->threads;
        j->quiet |= h->quiet;
        j->no_fetch |= h->no_fetch;
        cfg->device = h->device;
        j->bn_sync |= h->bn_sync;
    }
    if (!cfg->data_dir) cfg->data_dir = nb_json_get_str(o, "data_dir");
    return stored_same(o, cfg, err);
}

int nb_job_resume_prepare(nb_store *open, const char *db, int64_t id, int from_scratch,
                          nb_job_host_fn legacy, char **hosting, char **config, char *ckpt,
                          size_t ckpt_size, int64_t *ckpt_step, nb_ckpt_ident *ident,
                          int64_t *ranks, int64_t *bn_groups, nb_err *err) {
    nb_store *s = open;
    nb_run_detail *d = NULL;
    int rc = NB_EXIT_FAIL;
    *hosting = *config = NULL;
    if ((!s && nb_store_open(&s, db, 1, err) != 0) || nb_run_get(s, id, &d, err) != 0) goto out;
    if (strcmp(d->info.status, "finished") == 0) {
        nb_errf(err, "run %lld finished already: there is nothing to resume", (long long)id);
        goto out;
    }
    if (strcmp(d->info.status, "running") == 0) {
        /* the words of the store's claim (results/store.c), which a resume racing this one
         * meets instead when it reads the run's status first */
        nb_errf(err, "run %lld is running in process %lld on %s: it cannot be resumed twice",
                (long long)id, (long long)d->info.pid, d->info.host);
        goto out;
    }
    if (!d->config || !d->config[0]) {
        nb_errf(err, "run %lld has no stored configuration: it cannot be resumed", (long long)id);
        goto out;
    }
    char store_id[40];
    if (nb_job_checkpoint_file(ckpt, ckpt_size, db, id, 0, err) != 0 ||
        nb_store_id(s, store_id, sizeof store_id, err) != 0)
        goto out;
    nb_ckpt_ident_set(ident, store_id, id, d->info.task, d->info.norm, d->info.seed, d->config);
    if (from_scratch) {
        *ckpt_step = -1;
    } else {
        if (access(ckpt, R_OK) != 0) {
            nb_errf(err, "run %lld has no checkpoint '%s'", (long long)id, ckpt);
            nb_hintf(err,
                     "checkpoints are written at the end of each epoch; a run stopped in its "
                     "first epoch must be started again ('normbench run --resume %lld "
                     "--from-scratch' does it under the same run id)",
                     (long long)id);
            goto out;
        }
        nb_ckpt_state st;
        nb_ckpt_ident have;
        if (nb_ckpt_read_state(ckpt, &have, &st, err) != 0 ||
            nb_ckpt_ident_check(ckpt, &have, ident, err) != 0)
            goto out;
        *ckpt_step = st.step;
    }
    /* how the process hosting the run was set up (--data-dir, --threads, ...) */
    *hosting = nb_job_stored_hosting(d, legacy);
    *config = strdup(d->config);
    if (!*hosting || !*config) {
        free(*hosting), free(*config);
        *hosting = *config = NULL;
        nb_errf(err, "out of memory");
        goto out;
    }
    if (ranks) *ranks = config_int(d->config, "ranks", 1);
    if (bn_groups) *bn_groups = config_bn_groups(d->config);
    rc = 0;
out:
    nb_run_detail_free(d);
    if (s && s != open) nb_store_close(s);
    return rc;
}

/* Removes the checkpoint temporary files that a run killed while writing left beside the store
 * (their writer is gone); a failure only warns. */
static void remove_stale_checkpoints(const nb_job_io *io, const char *db) {
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s-checkpoints", db) >= sizeof dir) return;
    nb_err err;
    nb_err_clear(&err);
    if (nb_ckpt_remove_stale(dir, NULL, &err) != 0) say(io, "warning: %s\n", err.msg);
}

void nb_job_host(nb_job *j, const nb_run_rec *rec, volatile sig_atomic_t *stop, int64_t resume_run,
                 int64_t resume_step, const nb_ckpt_ident *ident, const char *ckpt) {
    j->rec = rec;
    j->stop = stop;
    j->no_result_line = 1;
    j->dp = 0;
    if (resume_run > 0) { /* claimed by the host already */
        j->resume_run = resume_run;
        j->resume_step = resume_step;
        j->resume_ident = *ident;
        j->from_scratch = !ckpt;
        if (ckpt) snprintf(j->resume_ckpt, sizeof j->resume_ckpt, "%s", ckpt);
    }
}

/* ---- a job's life ------------------------------------------------------------------------ */

void nb_job_init(nb_job *j, const nb_job_io *io) {
    memset(j, 0, sizeof *j);
    if (io) j->io = *io;
}

void nb_job_free(nb_job *j) {
    nb_task_opts_free(&j->cfg);
    nb_json_object_free(&j->stored);
    nb_json_object_free(&j->hosted);
    free(j->args);
    free(j->hosting);
    free(j->strings);
    free((void *)j->argv_store);
    free(j->resume_bytes);
    j->args = j->hosting = j->strings = j->resume_bytes = NULL;
    j->argv_store = NULL;
}

/* ---- from the store ------------------------------------------------------------------------ */

/* A data-parallel resume: rank 0's findings (rrc, *hosting, *config, the checkpoint's step,
 * identity and training) and the checkpoint's bytes to every rank. Returns an exit status. */
static int share_resume(nb_job *j, int rrc, char **hosting, char **config) {
    const int dp_rank = nb_mpi_rank();
    nb_mpi_resume sh;
    memset(&sh, 0, sizeof sh);
    sh.rc = rrc;
    if (dp_rank == 0 && rrc == 0) {
        sh.hosting = *hosting;
        sh.config = *config;
        sh.step = j->resume_step;
        sh.ident = j->resume_ident;
        sh.ranks = j->resume_ranks;
        sh.bn_groups = j->resume_bn_groups;
    }
    rrc = nb_mpi_share_resume(&sh,
                              dp_rank == 0 && rrc == 0 && !j->from_scratch ? j->resume_ckpt : NULL);
    if (sh.hosting != *hosting) free(*hosting);
    if (sh.config != *config) free(*config);
    *hosting = sh.hosting;
    *config = sh.config;
    if (rrc == 0 && (!*hosting || !*config)) {
        say(&j->io, "error: out of memory\n");
        rrc = NB_EXIT_FAIL;
    }
    if (rrc) {
        free(sh.ckpt);
        return rrc;
    }
    j->resume_step = sh.step;
    j->resume_ident = sh.ident;
    j->resume_ranks = sh.ranks;
    j->resume_bn_groups = sh.bn_groups;
    if (dp_rank != 0) {
        j->resume_bytes = sh.ckpt;
        j->resume_len = sh.ckpt_len;
    } else {
        free(sh.ckpt); /* rank 0 reads its own file */
    }
    return 0;
}

int nb_job_from_store(nb_job *j, const char *db, int64_t id, int from_scratch, int quiet,
                      const char *data_dir, nb_job_host_fn legacy) {
    const int dp_rank = j->dp ? nb_mpi_rank() : 0;
    char *hosting = NULL, *config = NULL;
    int rrc = 0;
    j->resume_run = id;
    j->from_scratch = from_scratch;
    if (db) j->db = db;
    const char *store = j->db; /* the store the run is read from is the one it records into */
    /* data-parallel: rank 0 alone reads the store and the checkpoint */
    if (dp_rank == 0) {
        nb_err err;
        nb_err_clear(&err);
        rrc = nb_job_resume_prepare(NULL, j->db, id, from_scratch, legacy, &hosting, &config,
                                    j->resume_ckpt, sizeof j->resume_ckpt, &j->resume_step,
                                    &j->resume_ident, &j->resume_ranks, &j->resume_bn_groups, &err);
        if (rrc) say_err(&j->io, &err);
    }
    if (j->dp) { /* every rank resumes this run */
        char what[96];
        snprintf(what, sizeof what, "resumes run %lld%s", (long long)id,
                 from_scratch ? " from scratch" : "");
        if ((rrc = nb_mpi_setup_agree(NB_MPI_START, rrc, what)) != 0) {
            free(hosting), free(config);
            return rrc;
        }
        /* ... and gives every rank what it found, the checkpoint's bytes too */
        rrc = share_resume(j, rrc, &hosting, &config);
    }
    if (rrc) {
        free(hosting), free(config);
        return rrc;
    }
    /* how it trains: its stored configuration; how this process hosts it: its stored hosting
     * (a data directory not given: this process's default), with quiet in force */
    nb_err err;
    nb_err_clear(&err);
    nb_job_hosting h;
    int brc = nb_job_hosting_read(j, hosting, &h, &err);
    if (brc == 0 && !h.data_dir) h.data_dir = data_dir;
    if (brc == 0) brc = nb_job_from_config(j, config, &h, &err);
    free(hosting), free(config);
    if (brc != 0) {
        nb_err was = err;
        nb_errf(&err, "run %lld cannot be resumed: %.900s", (long long)id, was.msg);
        snprintf(err.hint, sizeof err.hint, "%s", was.hint);
        if (!err.hint[0])
            nb_hintf(&err,
                     "it was recorded by another version of normbench: start it anew with the "
                     "configuration 'normbench show %lld' prints",
                     (long long)id);
        return say_err(&j->io, &err);
    }
    j->db = store;
    if (quiet) j->quiet = 1;
    return 0;
}

/* ---- execution ----------------------------------------------------------------------------- */

/* A job being executed: what nb_job_exec's steps share. */
typedef struct job_run {
    nb_job *j;
    int dp_rank, quiet;
    run_ctx ctx;
    nb_sink sink;
    nb_dist dist;
    nb_run_rec local, none;
    nb_store_rec local_ctx;
    char *json, *compute, *hosting;
    char resume_copy[4096]; /* a data-parallel rank's copy of rank 0's checkpoint */
} job_run;

/* The checks that need the ranks or the device: a usage error, or 0. */
static int exec_check(job_run *r) {
    nb_job *j = r->j;
    const nb_job_io *io = &j->io;
    nb_train_cfg *cfg = &j->cfg;
    const int dp = j->dp;
    /* A resume over another number of ranks continues the same model, except where BatchNorm
     * takes per-rank statistics: their groups are the model's. */
    const int64_t bn_groups =
        dp && nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES && !j->bn_sync
            ? (int64_t)nb_mpi_size()
            : 1;
    if (j->resume_run && j->resume_bn_groups > 0 && bn_groups != j->resume_bn_groups) {
        const int n = dp ? nb_mpi_size() : 1;
        const long long id = (long long)j->resume_run, g = (long long)j->resume_bn_groups;
        if (r->dp_rank == 0 && g > 1)
            say(io,
                "error: run %lld took its BatchNorm statistics per rank over %lld ranks: "
                "resuming it on %d rank%s would change the model\n"
                "hint: resume it on %lld ranks: 'mpirun -np %lld normbench run --resume %lld'\n",
                id, g, n, n > 1 ? "s" : "", g, g, id);
        else if (r->dp_rank == 0)
            say(io,
                "error: run %lld took its BatchNorm statistics over the whole batch: resumed "
                "on %d ranks without --bn-sync it would take them per rank, another model\n"
                "hint: resume it in one process: 'normbench run --resume %lld'\n",
                id, n, id);
        return NB_EXIT_USAGE;
    }
    if (dp) {
        const char *why = cfg->device ? "--device cuda is not supported for a data-parallel run"
                          : cfg->batch < nb_mpi_size()
                              ? "--batch is smaller than the number of ranks"
                              : NULL;
        if (!why && nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES && !j->bn_sync &&
            cfg->batch / nb_mpi_size() < 2)
            why = "per-rank batch norm needs at least 2 rows per rank (or --bn-sync)";
        if (why) return say_usage(io, "%s (%d ranks)", why, nb_mpi_size());
        nb_mpi_dist(&r->dist, j->bn_sync);
        cfg->dist = &r->dist;
        if (j->bn_sync) cfg->norm.bn_sum = nb_mpi_bn_sum;
        if (r->dp_rank != 0) j->quiet = 1;
    }
    if (cfg->device) { /* --device cuda: a GPU first, and a task that has the device path */
        nb_err derr;
        nb_err_clear(&derr);
        if (!nb_norm_get(cfg->norm.kind)->cuda) { /* no kernels tested on a GPU yet (DyT) */
            const char *nn = nb_norm_name(cfg->norm.kind);
            return say_usage(io,
                             "--device cuda has no %s kernels yet: train --norm %s "
                             "on the CPU (leave out --device)",
                             nn, nn);
        }
        if (!nb_task_find(cfg->task)->cuda) {
            char list[128] = "";
            for (int i = 0, n = 0; nb_task_at(i); i++)
                if (nb_task_at(i)->cuda)
                    n += snprintf(list + n, sizeof list - (size_t)n, "%s%s", n ? ", " : "",
                                  nb_task_at(i)->name);
            return say_usage(io, "--device cuda is implemented for the task(s) %s, not '%s'", list,
                             cfg->task);
        }
        if (nb_cuda_init(&derr) != 0) return say_err(io, &derr);
    }
    return 0;
}

/* The threads, the recorder (the store opened), the dataset; under MPI the ranks' agreement on
 * the configuration; the signal handlers. Returns an exit status. */
static int exec_setup(job_run *r) {
    nb_job *j = r->j;
    const nb_job_io *io = &j->io;
    nb_train_cfg *cfg = &j->cfg;
    int rc = 0;
    r->quiet = j->quiet || r->dp_rank != 0;
    if (j->threads > 0) {
        omp_set_num_threads(j->threads);
        openblas_set_num_threads(j->threads);
    }
    cfg->threads = omp_get_max_threads();
    cfg->stop = j->stop ? j->stop : &stop_requested;
    const nb_run_rec *rec = j->rec;
    /* the other ranks of a data-parallel run record nothing: rank 0 does */
    r->none = (nb_run_rec){.create = none_create,
                           .tag = none_kv,
                           .param = none_kv,
                           .metrics = none_metrics,
                           .finish = none_finish};
    if (r->dp_rank != 0) rec = &r->none;
    /* A registry dataset is fetched on first use (datasets/dataset.h); synthetic never is. */
    if (!j->no_fetch && io->ensure_dataset)
        rc = io->ensure_dataset(io->ctx, cfg->dataset, cfg->data_dir, r->quiet);
    nb_err err;
    nb_err_clear(&err);
    if (!rc && !rec) {
        if (nb_store_open(&r->ctx.store, j->db, 0, &err) != 0 ||
            nb_store_id(r->ctx.store, r->ctx.store_id, sizeof r->ctx.store_id, &err) != 0) {
            rc = say_err(io, &err);
        } else {
            nb_run_rec_store(&r->local, &r->local_ctx, r->ctx.store, NULL);
            rec = &r->local;
            /* how long a write waits for another process's lock (tests set a short wait) */
            const char *w = getenv("NORMBENCH_STORE_WAIT");
            char *end = NULL;
            double ws = w && *w ? strtod(w, &end) : -1;
            if (ws >= 0 && ws <= 86400 && end && !*end)
                nb_store_set_busy_timeout(r->ctx.store, (int)(ws * 1000));
            remove_stale_checkpoints(io, j->db);
        }
    }
    /* data-parallel: the ranks' configurations agree, and a rank that failed alone (rank 0
     * with the store) stops every rank */
    if (j->dp) {
        char *canon = rc ? NULL : config_json(cfg, 0);
        if (!rc && !canon) rc = say_err(io, &(nb_err){.msg = "out of memory"});
        rc = nb_mpi_setup_agree(NB_MPI_CONFIG, rc, canon);
        free(canon);
    }
    if (rc) return rc;
    r->ctx.rec = rec;
    /* From here a signal stops the run at its next step, recorded as interrupted (a resume's
     * claim included: a run left claimed by a killed process shows as crashed). A host (a sweep
     * under MPI) handles the signals itself and sets the stop flag. */
    if (!j->stop) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL); /* a closed terminal or ssh session */
    }
    return 0;
}

/* The run's record (configuration, provenance, labels) and the sink the task trains into. */
static int exec_sink(job_run *r) {
    nb_job *j = r->j;
    nb_train_cfg *cfg = &j->cfg;
    run_ctx *ctx = &r->ctx;
    r->json = config_json(cfg, 1);
    if (!r->json) return say_err(&j->io, &(nb_err){.msg = "out of memory"});
    ctx->spec.task = cfg->task;
    ctx->spec.dataset = cfg->dataset;
    /* BN-everywhere is its own curve in the papers' figures: report and plot group by this name */
    const char *label = nb_task_norm_label(nb_task_find(cfg->task), cfg);
    ctx->spec.norm = label ? label : nb_norm_name(cfg->norm.kind);
    ctx->spec.seed = (int64_t)cfg->seed;
    ctx->spec.config_json = r->json;
    r->compute = j->io.compute_json ? j->io.compute_json(j->io.ctx) : NULL;
    ctx->spec.compute_json = r->compute;
    ctx->tag = j->tag;
    ctx->variant = j->variant;
    nb_task_model_label(nb_task_find(cfg->task), cfg, ctx->model_label, sizeof ctx->model_label);
    ctx->db = j->db;
    ctx->argv_rec = j->args;
    if (!j->resume_run && !j->hosting) { /* a new run records how it is hosted */
        nb_job_hosting h;
        nb_job_hosting_of(j, &h);
        if (!(r->hosting = nb_job_hosting_json(&h)))
            return say_err(&j->io, &(nb_err){.msg = "out of memory"});
    }
    if (!j->resume_run) ctx->hosting_rec = j->hosting ? j->hosting : r->hosting;
    ctx->quiet = r->quiet;
    ctx->io = &j->io;
    if (j->io.progress_begin) j->io.progress_begin(j->io.ctx, r->quiet);
    r->sink = (nb_sink){.ctx = ctx,
                        .record = sink_record,
                        .param = sink_param,
                        .checkpoint_path = sink_checkpoint,
                        .ckpt_ident = &ctx->ident,
                        .checkpoint_saved = sink_checkpoint_saved,
                        .progress = sink_progress,
                        .model_dir = sink_model_dir};
    if (r->dp_rank != 0) r->sink.checkpoint_path = NULL; /* rank 0 writes them */
    /* the model is kept beside the store: by rank 0, not by a rank that records through it */
    if (r->dp_rank != 0 || (ctx->rec && ctx->rec->ckpt_saved)) r->sink.model_dir = NULL;
    if (j->dp && nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES && !ctx->variant)
        ctx->variant = j->bn_sync ? "--bn-sync" : "per-rank BN"; /* a different model */
    return 0;
}

/* A resumed run: the claim (rank 0 for every rank), then every rank's copy of the checkpoint,
 * and the training set to continue from it. Returns an exit status. */
static int exec_claim(job_run *r) {
    nb_job *j = r->j;
    const nb_job_io *io = &j->io;
    run_ctx *ctx = &r->ctx;
    const int dp = j->dp;
    const int64_t id = j->resume_run;
    nb_err err;
    nb_err_clear(&err);
    int crc = 0, claimed = 0;
    if (ctx->store && nb_run_resume(ctx->store, id, j->resume_step, &err) != 0)
        crc = say_err(io, &err);
    else
        claimed = ctx->store != NULL;
    if (!crc && j->resume_bytes &&
        nb_mpi_ckpt_copy(j->resume_bytes, j->resume_len, id, r->resume_copy, sizeof r->resume_copy,
                         &err) != 0)
        crc = say_err(io, &err);
    free(j->resume_bytes);
    j->resume_bytes = NULL;
    if (dp) crc = nb_mpi_agree(crc);
    /* a run resumed on another number of ranks (the same model) says so */
    if (!crc && ctx->store && r->dp_rank == 0 && j->resume_ranks > 0 &&
        j->resume_ranks != (dp ? nb_mpi_size() : 1)) {
        char v[96];
        snprintf(v, sizeof v, "%d from step %lld", dp ? nb_mpi_size() : 1,
                 (long long)(j->resume_step > 0 ? j->resume_step : 0));
        if (nb_run_param(ctx->store, id, "resumed_on_ranks", v, &err) != 0)
            say(io, "warning: %s\n", err.msg);
    }
    if (crc) {
        /* another rank could not take the checkpoint: the run is not running, and can be
         * resumed again */
        if (claimed && nb_run_finish(ctx->store, id, "failed",
                                     "a rank could not take the checkpoint", &err) != 0)
            say(io, "warning: %s\n", err.msg);
        return crc;
    }
    if (r->resume_copy[0]) snprintf(j->resume_ckpt, sizeof j->resume_ckpt, "%s", r->resume_copy);
    ctx->created = 1;
    ctx->run_id = id;
    /* the identity recorded with the run (its stored configuration), not the rebuilt one */
    ctx->ident = j->resume_ident;
    ctx->have_ident = 1;
    snprintf(ctx->ckpt, sizeof ctx->ckpt, "%s", j->resume_ckpt);
    if (j->from_scratch) {
        unlink(ctx->ckpt);
        if (!r->quiet) say(io, "run %lld: starting over from step 0\n", (long long)id);
    } else {
        j->cfg.resume_from = ctx->ckpt;
        if (!r->quiet)
            say(io, "run %lld: resuming from its checkpoint at step %lld\n", (long long)id,
                (long long)j->resume_step);
    }
    return 0;
}

/* "run N is kept ... continue it with ..." as err's hint (what), for a run the store's lock
 * kept from recording. */
static void hint_kept(const job_run *r, nb_err *err, int finish) {
    struct stat ck;
    const run_ctx *ctx = &r->ctx;
    const int have_ckpt = ctx->ckpt[0] && stat(ctx->ckpt, &ck) == 0;
    if (finish)
        nb_hintf(err,
                 "run %lld is kept%s and shows as crashed: once the store is free, "
                 "continue it with 'normbench run --resume %lld%s --db %s'",
                 (long long)ctx->run_id, have_ckpt ? " with its last checkpoint" : "",
                 (long long)ctx->run_id, have_ckpt ? "" : " --from-scratch", r->j->db);
    else
        nb_hintf(err,
                 "the run is kept%s: once the store is free, continue it with 'normbench run "
                 "--resume %lld%s --db %s'",
                 have_ckpt ? " with its last checkpoint" : "", (long long)ctx->run_id,
                 have_ckpt ? "" : " --from-scratch", r->j->db);
}

/* Trains, then records how the run ended. Returns the exit status. */
static int exec_train(job_run *r) {
    nb_job *j = r->j;
    const nb_job_io *io = &j->io;
    run_ctx *ctx = &r->ctx;
    nb_err err;
    nb_err_clear(&err);
    nb_status status = NB_STATUS_FAILED;
    int trc = nb_task_find(j->cfg.task)->train(&j->cfg, &r->sink, &status, &err);
    if (io->progress_end) io->progress_end(io->ctx);
    int exit_code = NB_EXIT_OK;
    /* the store stayed locked past the wait: the run is kept as it was, and resumable */
    const int locked_out = ctx->store && nb_store_gave_up(ctx->store) && ctx->created;
    if (locked_out) {
        if (trc != 0) hint_kept(r, &err, 0);
        /* recording its end waits no longer: it shows as crashed until resumed */
        nb_store_set_busy_timeout(ctx->store, 1000);
    }
    if (trc != 0) {
        status = NB_STATUS_FAILED;
        exit_code = say_err(io, &err);
    } else if (status != NB_STATUS_FINISHED) {
        exit_code = NB_EXIT_FAIL;
    }
    if (trc == 0 && !ctx->created) ensure_run(ctx, &err);
    if (!ctx->created || r->dp_rank != 0) return exit_code;
    nb_err ferr;
    nb_err_clear(&ferr);
    const char *msg = status == NB_STATUS_FINISHED      ? NULL
                      : status == NB_STATUS_INTERRUPTED ? "interrupted by a signal"
                                                        : err.msg;
    if (ctx->rec->finish(ctx->rec->ctx, ctx->run_id, nb_status_name(status), msg, &ferr) != 0) {
        if (ctx->store && nb_store_gave_up(ctx->store)) hint_kept(r, &ferr, 1);
        if (!locked_out || trc == 0) exit_code = say_err(io, &ferr);
        status = NB_STATUS_FAILED; /* not finished: its checkpoint is kept */
    }
    if (status == NB_STATUS_DIVERGED)
        say(io, "error: run %lld diverged: %s\n", (long long)ctx->run_id, err.msg);
    else if (status == NB_STATUS_INTERRUPTED)
        say(io, "run %lld interrupted; what it recorded is kept\n", (long long)ctx->run_id);
    if (!j->no_result_line && io->result) io->result(io->ctx, ctx->run_id, nb_status_name(status));
    /* A finished or diverged run has nothing to resume: free the disk. */
    if (ctx->ckpt[0] && (status == NB_STATUS_FINISHED || status == NB_STATUS_DIVERGED))
        unlink(ctx->ckpt);
    return exit_code;
}

int nb_job_exec(nb_job *j) {
    job_run *r = calloc(1, sizeof *r);
    if (!r) return say_err(&j->io, &(nb_err){.msg = "out of memory"});
    r->j = j;
    r->dp_rank = j->dp ? nb_mpi_rank() : 0;
    int rc = exec_check(r);
    if (!rc) rc = exec_setup(r);
    if (!rc) rc = exec_sink(r);
    if (!rc && j->resume_run) rc = exec_claim(r);
    if (!rc) rc = exec_train(r);
    nb_mpi_ckpt_copy_drop(r->resume_copy);
    free(r->json);
    free(r->compute);
    free(r->hosting);
    nb_store_close(r->ctx.store);
    free(r);
    return rc;
}
