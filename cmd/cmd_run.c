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

#include "cmd/progress.h"
#include "results/query.h"
#include "results/store.h"
#include "tasks/checkpoint.h"
#include "tasks/task.h"
#include "util/json.h"

static const char run_usage[] =
    "usage: normbench run TASK [--norm NAME] [--dataset NAME] [--seed N] [--epochs N] [--steps N]\n"
    "                     [--batch N] [--lr X] [--subset N] [--p X] [--eps X] [--threads N]\n"
    "                     [--data-dir DIR] [--db FILE] [--tag TEXT] [--quiet] [...]\n"
    "       normbench run --resume RUN [--db FILE] [--quiet] [--from-scratch]\n\n"
    "Trains TASK with one normalization and records the run (configuration, provenance,\n"
    "training loss with wall time, evaluation metrics, time per step) in the results store.\n"
    "Ctrl-C (or SIGTERM, SIGHUP) stops the run cleanly: it is recorded as interrupted and keeps\n"
    "what it measured.\n"
    "A NaN or infinite loss stops it as diverged. A checkpoint is written at the end of every\n"
    "epoch (beside the store, in DB-checkpoints/); 'normbench run --resume RUN' continues an\n"
    "interrupted or crashed run from it, bit-exactly (a checkpoint of another store or run is\n"
    "refused; one run is resumed by one process at a time); --from-scratch starts it over under\n"
    "its id instead. Exit status: 0 finished, 1 failed,\n"
    "interrupted or diverged, 2 usage error.\n\n"
    "tasks: mnist (LN paper §6.6 MLP; datasets fashion-mnist (default), mnist, synthetic)\n"
    "       cifar (ConvPool-CNN-C, WN code / RMS paper A.4; datasets cifar10 (default),\n"
    "              fashion-mnist, mnist, synthetic; options --norm-axes, --none-init, --width,\n"
    "              --no-zca)\n"
    "       order (order-embeddings GRU, OE code; datasets coco-oe (default), synthetic;\n"
    "              options --dim, --dim-word, --margin, --clip-tensor, --adam-fix, --eval-every)\n"
    "       reader (attentive reader, AR code; datasets cnn-top4 (default), synthetic; options\n"
    "              --unidirectional, --dim, --eval-every, --bn-everywhere with --norm batch)\n";

static const char *const norm_choices[] = {"none", "batch", "weight", "layer", "rms", "prms", NULL};
static const char *const act_choices[] = {"relu", "leaky-relu", "tanh", "sigmoid", NULL};
static const char *const bias_choices[] = {"standard", "none", "kiros", NULL};
static const char *const var_choices[] = {"biased", "unbiased", NULL};
static const char *const kround_choices[] = {"ceil", "floor", NULL};
static const char *const epson_choices[] = {"raw", "corrected", NULL};
static const char *const axes_choices[] = {"hw", "chw", NULL};         /* cifar */
static const char *const noneinit_choices[] = {"data", "plain", NULL}; /* cifar */

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    stop_requested = 1;
    /* A second Ctrl-C ends the process at once. */
    signal(sig, SIG_DFL);
}

/* The sink: creates the run in the store on first use (so a run that cannot even load its
 * data leaves no record), then forwards metrics and parameters. */
typedef struct run_ctx {
    nb_store *store;
    nb_run_spec spec;
    int64_t run_id;
    int created;
    const char *tag, *variant;
    const char *db;       /* the store's path: checkpoints live beside it */
    const char *argv_rec; /* the command line, recorded so that --resume can rebuild it */
    char ckpt[4096];      /* this run's checkpoint file, once known */
    char store_id[40];    /* the store's id, recorded in every checkpoint */
    nb_ckpt_ident ident;  /* what this run's checkpoints belong to, once known */
    int have_ident;
    nb_progress_line progress;
} run_ctx;

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
    if (nb_run_create(c->store, &c->spec, &c->run_id, err) != 0) return -1;
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
        if (nb_run_tag(c->store, c->run_id, key, value, err) != 0) return -1;
    }
    if (c->variant && nb_run_tag(c->store, c->run_id, "variant", c->variant, err) != 0) return -1;
    if (c->argv_rec && nb_run_param(c->store, c->run_id, "argv", c->argv_rec, err) != 0) return -1;
    if (!c->progress.quiet)
        fprintf(stderr, "run %lld: %s on %s, norm %s, seed %lld\n", (long long)c->run_id,
                c->spec.task, c->spec.dataset, c->spec.norm, (long long)c->spec.seed);
    return 0;
}

static int sink_record(void *ctx, const nb_metric *m, int n, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return -1;
    return nb_metrics_add(c->store, c->run_id, m, n, err);
}

static int sink_param(void *ctx, const char *key, const char *value, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return -1;
    return nb_run_param(c->store, c->run_id, key, value, err);
}

static const char *sink_checkpoint(void *ctx, nb_err *err) {
    run_ctx *c = ctx;
    if (ensure_run(c, err) != 0) return NULL;
    if (!c->ckpt[0] && checkpoint_file(c->ckpt, sizeof c->ckpt, c->db, c->run_id, 1, err) != 0)
        return NULL;
    if (!c->have_ident) {
        nb_ckpt_ident_set(&c->ident, c->store_id, c->run_id, c->spec.task, c->spec.norm,
                          c->spec.seed, c->spec.config_json);
        c->have_ident = 1;
    }
    return c->ckpt;
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

static char *config_json(const nb_train_cfg *cfg) {
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
    if (strcmp(cfg->task, "cifar") == 0) {
        kv_str(&j, "norm_axes", cfg->norm_axes_chw ? "chw" : "hw");
        kv_str(&j, "none_init", cfg->none_init ? "data" : "plain");
        kv_num(&j, "width", cfg->width);
        kv_str(&j, "zca", cfg->zca ? "on" : "off");
    }
    if (strcmp(cfg->task, "order") == 0) { /* order's own options */
        kv_int(&j, "dim", cfg->dim);
        kv_int(&j, "dim_word", cfg->oe_dim_word);
        kv_num(&j, "margin", cfg->oe_margin);
        kv_int(&j, "eval_every", cfg->eval_every);
        kv_num(&j, "clip_per_tensor", cfg->oe_clip_tensor);
    }
    if (strcmp(cfg->task, "reader") == 0) {
        kv_str(&j, "encoders", cfg->unidirectional ? "unidirectional" : "bidirectional");
        kv_str(&j, "bn_everywhere", cfg->bn_everywhere ? "on" : "off");
        kv_int(&j, "dim", cfg->dim);
        kv_int(&j, "eval_every", cfg->eval_every);
    }
    nb_buf_puts(&j, "}");
    return nb_buf_take(&j);
}

/* A parsed `run` command line: the configuration in force and where to record it. */
typedef struct run_args {
    nb_train_cfg cfg;
    const char *db, *tag, *variant;
    int quiet, threads;
    int no_fetch; /* --no-fetch: never download the dataset (issue 3) */
} run_args;

/* Parses and validates a `run` command line into *a. Returns 0, -1 after printing the help
 * (the caller exits 0), or NB_EXIT_USAGE after printing the error. */
static int parse_run(int argc, const char **argv, run_args *a) {
    const char *dataset = NULL, *data_dir = NULL, *db = NULL, *tag = NULL, *variant = NULL;
    int norm = NB_NORM_LAYER, act = 0, bias = 0, bn_var = 1, kround = 0;
    int norm_axes = 0, none_init = 0, no_zca = 0; /* cifar */
    double width = 0;                             /* cifar */
    int64_t seed = 1, steps = 0, epochs = 0;
    int batch = 0, subset = 0, threads = 0, quiet = 0, eps_outside = 0, no_wn_init = 0;
    int no_ftz = 0, no_fetch = 0;
    int unidirectional = 0, dim = 0, eval_every = 0, bn_everywhere = 0; /* reader */
    int adam_eps_inside = 0, adam_eps_on = 0, log_every = 0, eval_batch = 0;
    double lr = 0, p = 0, eps = 0, clip = 0, beta1 = 0, beta2 = 0, adam_eps = 0;
    int oe_dim_word = 0, adam_fix = 0; /* order */
    double oe_margin = -1, oe_clip_tensor = -1;
    nb_opt opts[] = {
        {"norm", NB_OPT_CHOICE, &norm, "NAME", "normalization (default layer)", norm_choices},
        {"dataset", NB_OPT_STR, &dataset, "NAME", "dataset (task default)"},
        {"seed", NB_OPT_I64, &seed, "N", "seed for init, data order and dropout (1)", NULL, 0,
         1e15},
        {"epochs", NB_OPT_I64, &epochs, "N", "epochs to train (task default)", NULL, 1, 1e6},
        {"steps", NB_OPT_I64, &steps, "N", "stop after N training steps instead", NULL, 1, 1e12},
        {"batch", NB_OPT_INT, &batch, "N", "batch size (task default)", NULL, 1, 1e6},
        {"lr", NB_OPT_DOUBLE, &lr, "X", "Adam learning rate (task default)", NULL, 1e-12, 1e30},
        {"subset", NB_OPT_INT, &subset, "N", "use only N training examples", NULL, 1, 1e9},
        {"p", NB_OPT_DOUBLE, &p, "X", "pRMSNorm fraction (0.0625)", NULL, 1e-9, 1},
        {"p-rounding", NB_OPT_CHOICE, &kround, "R", "pRMSNorm k = n*p rounded (paper: ceil)",
         kround_choices},
        {"eps", NB_OPT_DOUBLE, &eps, "X", "norm epsilon (1e-5)", NULL, 1e-30, 1},
        {"eps-outside", NB_OPT_FLAG, &eps_outside, NULL,
         "add eps to the RMS/std instead of inside the sqrt"},
        {"bn-var", NB_OPT_CHOICE, &bn_var, "V", "BN training variance (mnist: unbiased)",
         var_choices},
        {"no-wn-init", NB_OPT_FLAG, &no_wn_init, NULL, "WeightNorm without data-dependent init"},
        {"act", NB_OPT_CHOICE, &act, "NAME", "activation (relu)", act_choices},
        {"beta1", NB_OPT_DOUBLE, &beta1, "X", "Adam beta1 (0.9)", NULL, 1e-12, 0.999999},
        {"beta2", NB_OPT_DOUBLE, &beta2, "X", "Adam beta2 (0.999)", NULL, 1e-12, 0.99999999},
        {"adam-eps", NB_OPT_DOUBLE, &adam_eps, "X", "Adam epsilon (1e-8)", NULL, 1e-30, 1},
        {"adam-eps-inside", NB_OPT_FLAG, &adam_eps_inside, NULL, "Adam: m/sqrt(v+eps)"},
        {"adam-eps-on", NB_OPT_CHOICE, &adam_eps_on, "V",
         "Adam eps meets the raw v or the bias-corrected v (mnist: corrected, as PyTorch)",
         epson_choices},
        {"adam-bias", NB_OPT_CHOICE, &bias, "B", "Adam bias correction (standard)", bias_choices},
        {"clip", NB_OPT_DOUBLE, &clip, "X", "clip the global gradient norm at X (off)", NULL, 1e-12,
         1e12},
        {"log-every", NB_OPT_INT, &log_every, "N", "record the training loss every N steps (50)",
         NULL, 1, 1e9},
        {"eval-batch", NB_OPT_INT, &eval_batch, "N", "rows per evaluation pass (500)", NULL, 1,
         1e6},
        {"no-ftz", NB_OPT_FLAG, &no_ftz, NULL,
         "keep denormal floats (default: flush them to zero, as PyTorch and TF do on x86)"},
        {"unidirectional", NB_OPT_FLAG, &unidirectional, NULL,
         "reader: forward-only encoders (LN paper; default bidirectional, RMS paper)"},
        {"bn-everywhere", NB_OPT_FLAG, &bn_everywhere, NULL,
         "reader, with --norm batch: BN on the attention and output layers too (Cooijmans' "
         "BN-everywhere; recorded as norm batch-everywhere)"},
        {"dim", NB_OPT_INT, &dim, "N",
         "order, reader: model width (order's GRU and joint embedding 1024, reader's d 240)", NULL,
         1, 8192},
        {"eval-every", NB_OPT_INT, &eval_every, "N",
         "order, reader: evaluate every N training steps (order 300, reader 1000)", NULL, 1, 1e9},
        {"threads", NB_OPT_INT, &threads, "N", "threads (default: OMP_NUM_THREADS or all cores)",
         NULL, 1, 1024},
        {"data-dir", NB_OPT_STR, &data_dir, "DIR", "data directory (NORMBENCH_DATA)"},
        NB_OPT_DB(&db),
        {"tag", NB_OPT_STR, &tag, "K=V",
         "a tag recorded with the run: KEY=VALUE, or TEXT (key 'tag')"},
        {"variant", NB_OPT_STR, &variant, "TEXT",
         "a label recorded as the tag 'variant': report compares runs within it"},
        {"quiet", NB_OPT_FLAG, &quiet, NULL, "no progress output"},
        {"norm-axes", NB_OPT_CHOICE, &norm_axes, "A",
         "cifar: layer/rms/prms statistics per channel over H,W (hw, paper) or over C,H,W (chw)",
         axes_choices},
        {"none-init", NB_OPT_CHOICE, &none_init, "I",
         "cifar: none as the WN code's baseline (data: data-dependent init, frozen scale) or a "
         "plain conv + bias (plain)",
         noneinit_choices},
        {"width", NB_OPT_DOUBLE, &width, "X", "cifar: channel multiplier of the network (1)", NULL,
         1e-3, 16},
        {"no-zca", NB_OPT_FLAG, &no_zca, NULL, "cifar: no ZCA whitening of cifar10"},
        {"dim-word", NB_OPT_INT, &oe_dim_word, "N", "order: word embedding width (300)", NULL, 1,
         8192},
        {"margin", NB_OPT_DOUBLE, &oe_margin, "X", "order: loss margin (0.05)", NULL, 0, 100},
        {"clip-tensor", NB_OPT_DOUBLE, &oe_clip_tensor, "X",
         "order: clip each parameter tensor's gradient norm at X (2; 0 off)", NULL, 0, 1e12},
        {"adam-fix", NB_OPT_FLAG, &adam_fix, NULL,
         "order: standard Adam bias correction instead of the code's quirk (--adam-bias kiros)"},
        {"no-fetch", NB_OPT_FLAG, &no_fetch, NULL,
         "do not download a missing dataset (default: fetch it on first use)"},
        {NULL},
    };
    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("run", run_usage, argc, argv, opts, pos, 1, &npos);
    if (rc) return rc;
    if (npos < 1) return nb_usage_error("run", "which task? the tasks are: mnist, cifar");
    const nb_task *task = nb_task_find(pos[0]);
    if (!task) return nb_unknown_task("run", pos[0]);

    memset(a, 0, sizeof *a);
    nb_train_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    task->defaults(&cfg, (nb_norm_kind)norm);
    cfg.task = task->name;
    cfg.dataset = dataset ? dataset : task->default_dataset;
    int known = 0;
    for (int i = 0; task->datasets[i]; i++)
        known |= strcmp(task->datasets[i], cfg.dataset) == 0;
    if (!known) {
        fprintf(stderr, "error: task '%s' has no dataset '%s'\nhint: its datasets are:", task->name,
                cfg.dataset);
        for (int i = 0; task->datasets[i]; i++)
            fprintf(stderr, " %s", task->datasets[i]);
        fputc('\n', stderr);
        return NB_EXIT_USAGE;
    }
    cfg.data_dir = data_dir ? data_dir : nb_default_data_dir();
    cfg.seed = (uint64_t)seed;
    if (nb_opt_seen(opts, "epochs")) cfg.epochs = (int)epochs;
    if (steps) cfg.steps = steps;
    if (batch) cfg.batch = batch;
    if (lr > 0) cfg.adam.lr = lr;
    if (subset) cfg.subset = subset;
    if (p > 0) cfg.norm.p = p;
    if (nb_opt_seen(opts, "p-rounding")) cfg.norm.p_floor = kround == 1;
    if (eps > 0) cfg.norm.eps = eps;
    if (eps_outside) cfg.norm.eps_outside = 1;
    if (nb_opt_seen(opts, "bn-var")) cfg.norm.bn_unbiased_batch = bn_var == 1;
    if (no_wn_init) cfg.norm.wn_data_init = 0;
    if (nb_opt_seen(opts, "act")) cfg.act = (nb_act_kind)act;
    if (beta1 > 0) cfg.adam.beta1 = beta1;
    if (beta2 > 0) cfg.adam.beta2 = beta2;
    if (adam_eps > 0) cfg.adam.eps = adam_eps;
    if (adam_eps_inside) cfg.adam.eps_inside = 1;
    if (nb_opt_seen(opts, "adam-eps-on")) cfg.adam.eps_corrected = adam_eps_on == 1;
    if (nb_opt_seen(opts, "adam-bias")) cfg.adam.bias = (nb_adam_bias)bias;
    if (clip > 0) cfg.clip = clip;
    if (log_every) cfg.log_every = log_every;
    if (eval_batch) cfg.eval_batch = eval_batch;
    if (no_ftz) cfg.flush_denormals = 0;
    if (nb_opt_seen(opts, "norm-axes")) cfg.norm_axes_chw = norm_axes == 1;
    if (nb_opt_seen(opts, "none-init")) cfg.none_init = none_init == 0;
    if (width > 0) cfg.width = width;
    if (no_zca) cfg.zca = 0;
    /* Task options given to a task that has no such knob are usage errors, not ignored. */
    static const struct {
        const char *opt, *tasks;
    } task_opts[] = {
        {"norm-axes", "cifar"}, {"none-init", "cifar"},       {"width", "cifar"},
        {"no-zca", "cifar"},    {"dim", "order,reader"},      {"eval-every", "order,reader"},
        {"dim-word", "order"},  {"margin", "order"},          {"clip-tensor", "order"},
        {"adam-fix", "order"},  {"unidirectional", "reader"}, {"bn-everywhere", "reader"},
    };
    for (size_t i = 0; i < sizeof task_opts / sizeof task_opts[0]; i++) {
        if (!nb_opt_seen(opts, task_opts[i].opt)) continue;
        char list[64];
        snprintf(list, sizeof list, ",%s,", task_opts[i].tasks);
        char want[40];
        snprintf(want, sizeof want, ",%s,", task->name);
        if (!strstr(list, want))
            return nb_usage_error("run", "--%s is an option of the task(s) %s, not of '%s'",
                                  task_opts[i].opt, task_opts[i].tasks, task->name);
    }
    if (dim) cfg.dim = dim;
    if (eval_every) cfg.eval_every = eval_every;
    if (oe_dim_word) cfg.oe_dim_word = oe_dim_word;
    if (oe_margin >= 0) cfg.oe_margin = oe_margin;
    if (oe_clip_tensor >= 0) cfg.oe_clip_tensor = oe_clip_tensor;
    if (adam_fix) {
        if (nb_opt_seen(opts, "adam-bias"))
            return nb_usage_error("run", "--adam-fix and --adam-bias are the same choice: "
                                         "give one");
        cfg.adam.bias = NB_ADAM_BIAS_STANDARD;
    }
    if (unidirectional) cfg.unidirectional = 1;
    if (bn_everywhere && cfg.norm.kind != NB_NORM_BATCH) {
        fprintf(stderr,
                "error: --bn-everywhere adds BatchNorm to the BN-LSTM's attention and output "
                "layers: it needs --norm batch, not '%s'\n"
                "hint: add --norm batch, or leave out --bn-everywhere\n",
                nb_norm_name(cfg.norm.kind));
        return NB_EXIT_USAGE;
    }
    if (bn_everywhere) cfg.bn_everywhere = 1;
    if (cfg.norm.kind == NB_NORM_BATCH && cfg.batch < 2)
        return nb_usage_error("run", "batch norm needs --batch of at least 2, not %d", cfg.batch);
    a->cfg = cfg;
    a->db = db ? db : nb_default_db();
    a->tag = tag;
    a->variant = variant;
    a->quiet = quiet;
    a->threads = threads;
    a->no_fetch = no_fetch;
    return 0;
}

int nb_run_check_args(int argc, const char **argv) {
    run_args a;
    return parse_run(argc, argv, &a);
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
static int resume_args(const char *db, int64_t id, int from_scratch, char **buf, const char **args,
                       int max, int *nargs, char *ckpt, size_t ckpt_size, int64_t *ckpt_step,
                       nb_ckpt_ident *ident) {
    nb_err err;
    nb_err_clear(&err);
    nb_store *s = NULL;
    nb_run_detail *d = NULL;
    int rc = NB_EXIT_FAIL;
    if (nb_store_open(&s, db, 1, &err) != 0 || nb_run_get(s, id, &d, &err) != 0) {
        nb_report_err(&err);
        goto out;
    }
    if (strcmp(d->info.status, "finished") == 0) {
        nb_die("run %lld finished already: there is nothing to resume", (long long)id);
        goto out;
    }
    if (strcmp(d->info.status, "running") == 0) {
        nb_die("run %lld is still running (process %lld on %s)", (long long)id,
               (long long)d->info.pid, d->info.host);
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
    rc = 0;
out:
    nb_run_detail_free(d);
    if (s) nb_store_close(s);
    return rc;
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

int cmd_run(int argc, const char **argv) {
    /* --resume RUN [--db FILE] [--quiet]: continue a run from its last checkpoint. */
    int64_t resume_id = 0, resume_step = 0;
    int from_scratch = 0;
    char *resume_buf = NULL, resume_ckpt[4096] = "";
    nb_ckpt_ident resume_ident;
    const char *rargs[256];
    for (int i = 1; i < argc; i++)
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
            int nargs = 0;
            int rrc = resume_args(db ? db : nb_default_db(), resume_id, from_scratch, &resume_buf,
                                  rargs + 1, 250, &nargs, resume_ckpt, sizeof resume_ckpt,
                                  &resume_step, &resume_ident);
            if (rrc) return rrc;
            rargs[0] = "run";
            nargs++;
            /* the store named now wins over the recorded one; so does --quiet */
            if (db) rargs[nargs++] = "--db", rargs[nargs++] = db;
            if (quiet) rargs[nargs++] = "--quiet";
            argc = nargs;
            argv = rargs;
            break;
        }
    run_args a;
    int rc = parse_run(argc, argv, &a);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) {
        free(resume_buf);
        return rc;
    }
    nb_note_blas_core();
    nb_train_cfg cfg = a.cfg;
    const char *tag = a.tag;
    int quiet = a.quiet;
    if (a.threads > 0) {
        omp_set_num_threads(a.threads);
        openblas_set_num_threads(a.threads);
    }
    cfg.threads = omp_get_max_threads();
    cfg.stop = &stop_requested;
    /* A registry dataset is fetched on first use (datasets/dataset.h); synthetic never is. */
    if (!a.no_fetch) {
        rc = nb_cmd_ensure_dataset(cfg.dataset, cfg.data_dir, 0, quiet);
        if (rc) {
            free(resume_buf);
            return rc;
        }
    }

    nb_err err;
    nb_err_clear(&err);
    run_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    const char *dbpath = a.db;
    if (nb_store_open(&ctx.store, dbpath, 0, &err) != 0 ||
        nb_store_id(ctx.store, ctx.store_id, sizeof ctx.store_id, &err) != 0) {
        nb_store_close(ctx.store);
        free(resume_buf);
        return nb_report_err(&err);
    }
    remove_stale_checkpoints(dbpath);
    /* From here a signal stops the run at its next step, recorded as interrupted (a resume's
     * claim included: a run left claimed by a killed process shows as crashed). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal or ssh session */

    char *json = config_json(&cfg);
    if (!json) {
        nb_store_close(ctx.store);
        return nb_die("out of memory");
    }
    ctx.spec.task = cfg.task;
    ctx.spec.dataset = cfg.dataset;
    /* BN-everywhere is its own curve in the papers' figures: report and plot group by this name */
    ctx.spec.norm = cfg.bn_everywhere ? "batch-everywhere" : nb_norm_name(cfg.norm.kind);
    ctx.spec.seed = (int64_t)cfg.seed;
    ctx.spec.config_json = json;
    ctx.tag = tag;
    ctx.variant = a.variant;
    ctx.db = dbpath;
    char *argv_rec = join_argv(argc - 1, argv + 1);
    ctx.argv_rec = argv_rec;
    nb_progress_init(&ctx.progress, quiet);
    nb_sink sink = {.ctx = &ctx,
                    .record = sink_record,
                    .param = sink_param,
                    .checkpoint_path = sink_checkpoint,
                    .ckpt_ident = &ctx.ident,
                    .progress = sink_progress};
    if (resume_id) {
        if (nb_run_resume(ctx.store, resume_id, resume_step, &err) != 0) {
            free(json), free(argv_rec), free(resume_buf);
            nb_store_close(ctx.store);
            return nb_report_err(&err);
        }
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
    if (trc != 0) {
        status = NB_STATUS_FAILED;
        exit_code = nb_report_err(&err);
    } else if (status != NB_STATUS_FINISHED) {
        exit_code = NB_EXIT_FAIL;
    }
    if (trc == 0 && !ctx.created) ensure_run(&ctx, &err);
    if (ctx.created) {
        nb_err ferr;
        nb_err_clear(&ferr);
        const char *msg = status == NB_STATUS_FINISHED      ? NULL
                          : status == NB_STATUS_INTERRUPTED ? "interrupted by a signal"
                                                            : err.msg;
        if (nb_run_finish(ctx.store, ctx.run_id, nb_status_name(status), msg, &ferr) != 0)
            exit_code = nb_report_err(&ferr);
        if (status == NB_STATUS_DIVERGED)
            fprintf(stderr, "error: run %lld diverged: %s\n", (long long)ctx.run_id, err.msg);
        else if (status == NB_STATUS_INTERRUPTED)
            fprintf(stderr, "run %lld interrupted; what it recorded is kept\n",
                    (long long)ctx.run_id);
        printf("run %lld %s\n", (long long)ctx.run_id, nb_status_name(status));
        /* A finished or diverged run has nothing to resume: free the disk. */
        if (ctx.ckpt[0] && (status == NB_STATUS_FINISHED || status == NB_STATUS_DIVERGED))
            unlink(ctx.ckpt);
    }
    free(json);
    free(argv_rec);
    free(resume_buf);
    nb_store_close(ctx.store);
    return exit_code;
}
