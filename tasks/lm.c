/* tasks/lm.c — a character-level GPT language model (nn/gpt.h) on Tiny Shakespeare, the corpus of
 * nanoGPT's shakespeare_char benchmark, trained as nanoGPT trains it: windows of --context
 * characters at random offsets of the first 90% of the text, AdamW (β2 0.99, decoupled weight
 * decay 0.1 on the matrices only), a linear warm-up then cosine decay to --min-lr over the run,
 * the global gradient norm clipped at 1, dropout. Presets: nanoGPT's two documented
 * configurations (cpu: its README's laptop run, validation loss 1.88; gpu: config/
 * train_shakespeare_char.py, 1.4697).
 *
 * Every --eval-every steps and at the end: val_loss, the mean cross-entropy per character in nats
 * over --eval-windows fixed windows of the validation text (evenly spaced: the same windows for
 * every run and norm), and val_bpc (bits per character). The parameters with the lowest val_loss
 * are kept, recorded as best_val_loss, and restored for the final evaluation, so the run's last
 * val_loss is its best. A finished run keeps its model (vocabulary and parameters, one file
 * written atomically) in DB-checkpoints/run-ID.model/. */
#include "tasks/task.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/chars.h"
#include "datasets/dataset.h"
#include "nn/mem.h"
#include "tasks/train.h"
#include "util/file.h"

static const char *const lm_datasets[] = {"tinyshakespeare", "synthetic", "file:PATH", NULL};

typedef struct lm_opts {
    int preset;                      /* 0 cpu, 1 gpu */
    int norm_position;               /* 0 pre, 1 post */
    int bias;                        /* 0 on, 1 off */
    int layers, heads, dim, context; /* 0: the preset's */
    double dropout;                  /* < 0: the preset's */
    int warmup;                      /* < 0: the preset's */
    double min_lr;                   /* < 0: lr / 10 */
    double weight_decay;
    int eval_every;
    int eval_windows; /* 0: the preset's */
} lm_opts;

static const char *const preset_choices[] = {"cpu", "gpu", NULL};
static const char *const position_choices[] = {"pre", "post", NULL};
static const char *const onoff_choices[] = {"on", "off", NULL};

/* nanoGPT's two documented configurations */
typedef struct lm_preset {
    int layers, heads, dim, context, batch, steps, warmup, eval_windows;
    double dropout;
} lm_preset;
static const lm_preset presets[2] = {
    {4, 4, 128, 64, 12, 2000, 100, 240, 0.0},   /* README: "on a MacBook", 1.88 */
    {6, 6, 384, 256, 64, 5000, 100, 1280, 0.2}, /* train_shakespeare_char.py, 1.4697 */
};

static const nb_task_opt lm_opts_decl[] = {
    {"preset", NB_TOPT_CHOICE, offsetof(lm_opts, preset), "P",
     "nanoGPT's configurations: cpu (4 layers, 4 heads, width 128, context 64, batch 12, 2000 "
     "steps, dropout 0: its README's laptop run, validation loss 1.88; the default, minutes on "
     "a CPU) or gpu (6/6/384, context 256, batch 64, 5000 steps, dropout 0.2: "
     "train_shakespeare_char.py, 1.4697 on one A100; hours on a CPU)",
     preset_choices, .group = 1},
    {"norm-position", NB_TOPT_CHOICE, offsetof(lm_opts, norm_position), "W",
     "where the norm sits: pre (x = x + F(N(x)) and a final norm: GPT-2, nanoGPT) or post "
     "(x = N(x + F(x)))",
     position_choices, .group = 1},
    {"bias", NB_TOPT_CHOICE, offsetof(lm_opts, bias), "on|off",
     "biases in the maps and LayerNorm's shift (nanoGPT's bias)", onoff_choices},
    {"layers", NB_TOPT_INT, offsetof(lm_opts, layers), "N", "blocks (0: the preset's)", NULL, 0, 64,
     0},
    {"heads", NB_TOPT_INT, offsetof(lm_opts, heads), "N", "attention heads (0: the preset's)", NULL,
     0, 256, 0},
    {"dim", NB_TOPT_INT, offsetof(lm_opts, dim), "N",
     "model width, a multiple of --heads (0: the preset's)", NULL, 0, 8192, 0},
    {"context", NB_TOPT_INT, offsetof(lm_opts, context), "N",
     "characters a window holds (block_size; 0: the preset's)", NULL, 0, 4096, 0},
    {"dropout", NB_TOPT_DOUBLE, offsetof(lm_opts, dropout), "P",
     "dropout on the embeddings, attention weights and residual branches (-1: the preset's)", NULL,
     -1, 0.99, -1},
    {"warmup", NB_TOPT_INT, offsetof(lm_opts, warmup), "N",
     "steps of linear learning-rate warm-up before the cosine decay (-1: the preset's, 100)", NULL,
     -1, 1e9, -1},
    {"min-lr", NB_TOPT_DOUBLE, offsetof(lm_opts, min_lr), "X",
     "the learning rate the cosine decay ends at, at the last step (-1: --lr / 10)", NULL, -1, 1e3,
     -1},
    {"weight-decay", NB_TOPT_DOUBLE, offsetof(lm_opts, weight_decay), "X",
     "AdamW's decoupled weight decay on the matrices (maps and embeddings, not biases or gains)",
     NULL, 0, 10, 0.1},
    {"eval-every", NB_TOPT_INT, offsetof(lm_opts, eval_every), "N",
     "validate every N training steps (val_loss, val_bpc)", NULL, 1, 1e9, 250},
    {"eval-windows", NB_TOPT_INT, offsetof(lm_opts, eval_windows), "N",
     "validation windows of --context characters, evenly spaced (0: the preset's, cpu 240 as "
     "nanoGPT's 20 batches of 12, gpu 1280)",
     NULL, 0, 1e7, 0},
    {NULL},
};

static const lm_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static void lm_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm);
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.lr = 1e-3; /* both presets */
    cfg->adam.beta2 = 0.99;
    cfg->adam.eps_corrected = 1; /* PyTorch's AdamW */
    cfg->epochs = 1;
    cfg->steps = presets[0].steps;
    cfg->batch = presets[0].batch;
    cfg->eval_batch = 32;
    cfg->log_every = 10;
    cfg->clip = 1;
    cfg->flush_denormals = 1;
}

static int given_has(const nb_given *given, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(given[i].name, name) == 0) return 1;
    return 0;
}

/* The model's configuration from the preset and the options (V: the vocabulary). */
static void gpt_config(nb_gpt_cfg *gc, const nb_train_cfg *cfg, int V) {
    const lm_opts *o = opts_of(cfg);
    const lm_preset *p = &presets[o->preset];
    memset(gc, 0, sizeof *gc);
    gc->layers = o->layers > 0 ? o->layers : p->layers;
    gc->heads = o->heads > 0 ? o->heads : p->heads;
    gc->dim = o->dim > 0 ? o->dim : p->dim;
    gc->ctx = o->context > 0 ? o->context : p->context;
    gc->vocab = V;
    gc->pre_norm = o->norm_position == 0;
    gc->bias = o->bias == 0;
    gc->dropout = o->dropout >= 0 ? o->dropout : p->dropout;
    gc->norm = cfg->norm;
}

static int lm_finish(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err) {
    const lm_opts *o = opts_of(cfg);
    const lm_preset *p = &presets[o->preset];
    if (nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES) {
        nb_errf(err, "task lm cannot use --norm batch: statistics over a batch's positions would "
                     "carry later characters into earlier predictions");
        return nb_hintf(err, "use a row-wise norm: none, weight, layer, rms, prms or dyt");
    }
    if (given_has(given, ngiven, "act")) {
        nb_errf(err, "task lm cannot use --act: its MLP's activation is GELU in its tanh form, as "
                     "GPT-2's and nanoGPT's");
        return nb_hintf(err, "leave --act out");
    }
    if (!given_has(given, ngiven, "steps"))
        cfg->steps = given_has(given, ngiven, "epochs") ? 0 : p->steps;
    if (!given_has(given, ngiven, "batch")) cfg->batch = p->batch;
    nb_gpt_cfg gc;
    gpt_config(&gc, cfg, 1);
    /* the values in force, so that the run's configuration records them */
    lm_opts *w = cfg->task_opts;
    w->layers = gc.layers;
    w->heads = gc.heads;
    w->dim = gc.dim;
    w->context = gc.ctx;
    w->dropout = gc.dropout;
    if (w->warmup < 0) w->warmup = p->warmup;
    if (w->min_lr < 0) w->min_lr = cfg->adam.lr / 10;
    if (w->eval_windows == 0) w->eval_windows = p->eval_windows;
    if (gc.dim % gc.heads != 0)
        return nb_errf(err, "the width %d must be a multiple of the %d heads (--dim, --heads)",
                       gc.dim, gc.heads);
    return 0;
}

/* ---- the data ------------------------------------------------------------------------------- */

/* The text of dataset name (tinyshakespeare, synthetic, file:PATH). */
static int load_text(const nb_train_cfg *cfg, nb_chars *t, nb_err *err) {
    if (strcmp(cfg->dataset, "synthetic") == 0) return nb_chars_synthetic(200000, t, err);
    if (strncmp(cfg->dataset, "file:", 5) == 0) return nb_chars_load(cfg->dataset + 5, t, err);
    char path[4096];
    if (nb_dataset_file(cfg->dataset, "input.txt", cfg->data_dir, path, sizeof path) != 0)
        return nb_errf(err, "the data directory '%s' is too long", cfg->data_dir);
    if (access(path, R_OK) != 0) {
        nb_errf(err, "cannot read '%s': %s", path, strerror(errno));
        return nb_hintf(err,
                        "run 'normbench fetch %s' (or 'fetch %s --from DIR' without a "
                        "network)",
                        cfg->dataset, cfg->dataset);
    }
    return nb_chars_load(path, t, err);
}

/* ---- the run -------------------------------------------------------------------------------- */

typedef struct lm_run {
    nb_gpt *m;
    nb_layout layout;
    nb_gpt_cfg gc;
    nb_chars text;
    float *params, *grads, *am, *av;
    int B, T, EB, warmup, nwin;
    double lr, min_lr, wd;
    int64_t spe;  /* steps per epoch */
    int *offsets; /* (spe * B) window starts of this epoch, drawn at its start */
    int *tok, *tgt;
    size_t *win; /* validation window starts */
    double tokens;
} lm_run;

static void fill_batch(lm_run *r, const int *starts, int n) {
    for (int b = 0; b < n; b++)
        for (int t = 0; t < r->T; t++) {
            r->tok[b * r->T + t] = r->text.ids[starts[b] + t];
            r->tgt[b * r->T + t] = r->text.ids[starts[b] + t + 1];
        }
}

static void lm_epoch(void *self, int epoch, nb_rng *data) {
    lm_run *r = self;
    (void)epoch;
    const uint64_t span = r->text.ntrain - (size_t)r->T; /* nanoGPT: randint(len(data) - block) */
    for (int64_t i = 0; i < r->spe * r->B; i++)
        r->offsets[i] = (int)nb_rng_below(data, span);
}

static double lm_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise) {
    lm_run *r = self;
    const uint64_t seed = nb_rng_u64(noise);
    const int n = hi - lo;
    if (n <= 0) return 0;
    fill_batch(r, r->offsets + bi * r->B + lo, n);
    nb_gpt_set_shard(r->m, lo, r->B);
    double loss = nb_gpt_forward(r->m, r->params, r->tok, r->tgt, n, r->T, 1, 1, seed);
    nb_gpt_backward(r->m, r->grads, r->params);
    nb_gpt_set_shard(r->m, 0, 0);
    r->tokens += (double)n * r->T;
    return loss * r->B / n; /* the mean loss of these rows */
}

static double lm_step(void *self, int64_t bi, nb_rng *noise) {
    lm_run *r = self;
    return lm_shard(self, bi, 0, r->B, noise);
}

static double lm_tokens(void *self) {
    return ((lm_run *)self)->tokens;
}

/* nanoGPT's get_lr at iteration it = t - 1, and AdamW's decoupled decay of the matrices. */
static double lm_lr(const lm_run *r, int64_t t, int64_t planned) {
    const int64_t it = t - 1;
    if (it < r->warmup) return r->lr * (double)(it + 1) / (r->warmup + 1);
    if (it > planned) return r->min_lr;
    double ratio =
        planned > r->warmup ? (double)(it - r->warmup) / (double)(planned - r->warmup) : 1.0;
    if (ratio > 1) ratio = 1;
    return r->min_lr + 0.5 * (1 + cos(M_PI * ratio)) * (r->lr - r->min_lr);
}

static void lm_schedule(void *self, int64_t t, int64_t planned, nb_adam_cfg *adam) {
    lm_run *r = self;
    adam->lr = lm_lr(r, t, planned);
    if (r->wd > 0) nb_gpt_decay(r->m, r->params, 1 - adam->lr * r->wd);
}

/* The mean loss over the validation windows (nats per character). */
static double val_loss(lm_run *r) {
    double sum = 0;
    int starts[4096];
    for (int w0 = 0; w0 < r->nwin; w0 += r->EB) {
        const int n = r->nwin - w0 < r->EB ? r->nwin - w0 : r->EB;
        for (int i = 0; i < n; i++)
            starts[i] = (int)r->win[w0 + i];
        fill_batch(r, starts, n);
        sum += nb_gpt_forward(r->m, r->params, r->tok, r->tgt, n, r->T, 0, 0, 0) * n;
    }
    return sum / r->nwin;
}

static int lm_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    lm_run *r = self;
    (void)err;
    if (max < 2) return 0;
    const double l = val_loss(r);
    out[0] = (nb_metric){"val_loss", 0, 0, l};
    out[1] = (nb_metric){"val_bpc", 0, 0, l / log(2.0)};
    (void) final;
    return 2;
}

static int build_model(void *ctx, int B, nb_err *err) {
    const nb_gpt_cfg *gc = ctx;
    nb_layout lay;
    memset(&lay, 0, sizeof lay);
    nb_gpt *m = nb_gpt_new(gc, &lay, B, err);
    if (!m) return -1;
    nb_mem_note(sizeof(float) * lay.total * 5); /* params, grads, moments, the best copy */
    nb_mem_note(sizeof(int) * 2 * (size_t)B * gc->ctx);
    nb_gpt_free(m);
    return 0;
}

static void run_free(lm_run *r) {
    if (r->m) nb_gpt_free(r->m);
    free(r->params), free(r->grads), free(r->am), free(r->av), free(r->offsets);
    free(r->tok), free(r->tgt), free(r->win);
    nb_chars_free(&r->text);
}

/* ---- the kept model ------------------------------------------------------------------------- */

#define KEPT_MAGIC "normbench-lm-model 1\n"
#define FNV_BASIS 1469598103934665603ULL

typedef struct lm_kept_head {
    nb_ckpt_ident id;
    int32_t vocab, nparams_lo;
    uint64_t nparams;
} lm_kept_head;

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* DIR/model: the magic, the head, the vocabulary's code points, the parameters, an FNV-1a hash
 * of everything before it; written to a temporary name, fsynced and renamed into place. */
static int save_model(void *self, const char *dir, const nb_ckpt_ident *id, nb_err *err) {
    const lm_run *r = self;
    char path[4200];
    snprintf(path, sizeof path, "%s/model", dir);
    lm_kept_head kh;
    memset(&kh, 0, sizeof kh);
    if (id) kh.id = *id;
    kh.vocab = r->text.vocab;
    kh.nparams = r->layout.total;
    uint64_t h = fnv1a(KEPT_MAGIC, sizeof KEPT_MAGIC - 1, FNV_BASIS);
    h = fnv1a(&kh, sizeof kh, h);
    h = fnv1a(r->text.chars, sizeof(uint32_t) * (size_t)r->text.vocab, h);
    h = fnv1a(r->params, sizeof(float) * r->layout.total, h);
    const nb_piece pieces[] = {{KEPT_MAGIC, sizeof KEPT_MAGIC - 1},
                               {&kh, sizeof kh},
                               {r->text.chars, sizeof(uint32_t) * (size_t)r->text.vocab},
                               {r->params, sizeof(float) * r->layout.total},
                               {&h, sizeof h}};
    return nb_write_atomicv(path, pieces, (int)(sizeof pieces / sizeof pieces[0]), err);
}

/* Reads the model kept in dir into a model for cfg (batch 1), checking what it belongs to, its
 * shape and its hash. Returns 0 with r->m, r->params and r->text.chars/vocab set. */
static int load_model(const nb_train_cfg *cfg, const char *dir, const nb_ckpt_ident *want,
                      lm_run *r, nb_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/model", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        nb_errf(err, "cannot open the model '%s': %s", path, strerror(errno));
        return nb_hintf(err, "a run keeps its model when it finishes; is the run finished?");
    }
    char magic[sizeof KEPT_MAGIC];
    lm_kept_head kh;
    int ok = fread(magic, 1, sizeof KEPT_MAGIC - 1, f) == sizeof KEPT_MAGIC - 1 &&
             memcmp(magic, KEPT_MAGIC, sizeof KEPT_MAGIC - 1) == 0 &&
             fread(&kh, sizeof kh, 1, f) == 1;
    if (!ok || kh.vocab < 1 || kh.vocab > NB_CHARS_MAX_VOCAB) {
        fclose(f);
        nb_errf(err, "'%s' is not a normbench language model", path);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    if (want && nb_ckpt_ident_check(path, &kh.id, want, err) != 0) {
        fclose(f);
        return nb_hintf(err, "the model belongs to another run or store: sample with the run "
                             "that made it");
    }
    gpt_config(&r->gc, cfg, kh.vocab);
    if (!(r->m = nb_gpt_new(&r->gc, &r->layout, 1, err))) {
        fclose(f);
        return -1;
    }
    if (kh.nparams != r->layout.total) {
        fclose(f);
        return nb_errf(err, "the model '%s' has %llu parameters, the run's configuration %zu", path,
                       (unsigned long long)kh.nparams, r->layout.total);
    }
    r->text.vocab = kh.vocab;
    r->text.chars = malloc(sizeof(uint32_t) * (size_t)kh.vocab);
    r->params = malloc(sizeof(float) * r->layout.total);
    uint64_t hf = 0;
    ok = r->text.chars && r->params &&
         fread(r->text.chars, sizeof(uint32_t), (size_t)kh.vocab, f) == (size_t)kh.vocab &&
         fread(r->params, sizeof(float), r->layout.total, f) == r->layout.total &&
         fread(&hf, sizeof hf, 1, f) == 1 && fgetc(f) == EOF;
    fclose(f);
    uint64_t h = fnv1a(KEPT_MAGIC, sizeof KEPT_MAGIC - 1, FNV_BASIS);
    h = fnv1a(&kh, sizeof kh, h);
    if (ok) {
        h = fnv1a(r->text.chars, sizeof(uint32_t) * (size_t)kh.vocab, h);
        h = fnv1a(r->params, sizeof(float) * r->layout.total, h);
    }
    if (!ok || h != hf) {
        nb_errf(err, "the model '%s' is damaged (its length or checksum is wrong)", path);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    return 0;
}

static char *lm_sample(const nb_train_cfg *cfg, const char *dir, const nb_ckpt_ident *want,
                       const char *prompt, long tokens, double temperature, uint64_t seed,
                       size_t *len, nb_err *err) {
    lm_run r;
    memset(&r, 0, sizeof r);
    char *out = NULL;
    int *ids = NULL;
    double *pr = NULL;
    if (load_model(cfg, dir, want, &r, err) != 0) goto done;
    const long plen = (long)strlen(prompt);
    ids = malloc(sizeof(int) * (size_t)(plen + tokens + 1));
    pr = malloc(sizeof(double) * (size_t)r.text.vocab);
    out = malloc((size_t)(plen + tokens) * 4 + 1);
    if (!ids || !pr || !out) {
        nb_errf(err, "out of memory for %ld tokens", tokens);
        goto fail;
    }
    long n = nb_chars_encode(&r.text, prompt, ids, plen, err);
    if (n < 0) goto fail;
    size_t k = 0;
    for (long i = 0; i < n; i++)
        k += (size_t)nb_chars_utf8(&r.text, ids[i], out + k);
    long start = n;
    if (n == 0) { /* nanoGPT starts from a newline */
        int nl = 0;
        for (int v = 0; v < r.text.vocab; v++)
            if (r.text.chars[v] == '\n') nl = v;
        ids[0] = nl;
        n = start = 1;
    }
    nb_rng g;
    nb_rng_seed(&g, seed, NB_STREAM_DROPOUT);
    const int V = r.text.vocab, C = r.gc.ctx;
    for (long t = 0; t < tokens; t++) {
        const int T = n < C ? (int)n : C;
        nb_gpt_forward(r.m, r.params, ids + n - T, NULL, 1, T, 0, 0, 0);
        const float *z = nb_gpt_logits(r.m) + (size_t)(T - 1) * V;
        int next = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > z[next]) next = v;
        if (temperature > 0) {
            double s = 0;
            for (int v = 0; v < V; v++)
                s += pr[v] = exp(((double)z[v] - z[next]) / temperature);
            double u = nb_rng_uniform(&g) * s;
            for (int v = 0; v < V; v++) {
                u -= pr[v];
                if (u < 0 || v == V - 1) {
                    next = v;
                    break;
                }
            }
        }
        ids[n++] = next;
        k += (size_t)nb_chars_utf8(&r.text, next, out + k);
    }
    (void)start;
    out[k] = '\0';
    *len = k;
    goto done;
fail:
    free(out);
    out = NULL;
done:
    free(ids), free(pr);
    run_free(&r);
    return out;
}

/* ---- training ------------------------------------------------------------------------------- */

static int lm_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status, nb_err *err) {
    const lm_opts *o = opts_of(cfg);
    const lm_preset *p = &presets[o->preset];
    lm_run r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    if (load_text(cfg, &r.text, err) != 0) return -1;
    gpt_config(&r.gc, cfg, r.text.vocab);
    r.T = r.gc.ctx;
    r.B = cfg->batch;
    const size_t nval = r.text.n - r.text.ntrain;
    if (r.text.ntrain < 2 * (size_t)r.T + 1 || nval < (size_t)r.T + 1) {
        nb_errf(err,
                "the text of '%s' is too short: %zu characters, %zu to train and %zu to "
                "validate, for windows of %d characters (the validation part needs more than one "
                "window and its next character, the training part two)",
                cfg->dataset, r.text.n, r.text.ntrain, nval, r.T);
        nb_hintf(err, "use a longer text, or a shorter --context");
        goto out;
    }
    r.EB = cfg->eval_batch > 0 ? cfg->eval_batch : 32;
    if (r.EB > 4096) r.EB = 4096;
    r.nwin = o->eval_windows > 0 ? o->eval_windows : p->eval_windows;
    r.warmup = o->warmup >= 0 ? o->warmup : p->warmup;
    r.lr = cfg->adam.lr;
    r.min_lr = o->min_lr >= 0 ? o->min_lr : cfg->adam.lr / 10;
    r.wd = o->weight_decay;
    r.spe = (int64_t)(r.text.ntrain / ((size_t)r.B * r.T));
    if (r.spe < 1) r.spe = 1;
    const int Bmax = r.B > r.EB ? r.B : r.EB;
    char what[64];
    snprintf(what, sizeof what, "--batch %d (and --eval-batch %d)", r.B, r.EB);
    if (nb_check_batch_memory(build_model, &r.gc, Bmax, what, err) != 0) goto out;
    if (!(r.m = nb_gpt_new(&r.gc, &r.layout, Bmax, err))) goto out;
    const size_t P = r.layout.total;
    r.params = calloc(P, sizeof(float));
    r.grads = calloc(P, sizeof(float));
    r.am = calloc(P, sizeof(float));
    r.av = calloc(P, sizeof(float));
    r.offsets = malloc(sizeof(int) * (size_t)(r.spe * r.B));
    r.tok = malloc(sizeof(int) * (size_t)Bmax * r.T);
    r.tgt = malloc(sizeof(int) * (size_t)Bmax * r.T);
    r.win = malloc(sizeof(size_t) * (size_t)r.nwin);
    if (!r.params || !r.grads || !r.am || !r.av || !r.offsets || !r.tok || !r.tgt || !r.win) {
        nb_errf(err, "out of memory");
        goto out;
    }
    /* evenly spaced validation windows, each followed by its next character */
    const size_t vspan = nval - (size_t)r.T - 1;
    for (int i = 0; i < r.nwin; i++)
        r.win[i] = r.text.ntrain + (r.nwin > 1 ? (size_t)((double)vspan * i / (r.nwin - 1)) : 0);
    nb_rng init;
    nb_rng_seed(&init, cfg->seed, NB_STREAM_INIT);
    nb_gpt_init_params(r.m, r.params, &init);
    char buf[64];
    snprintf(buf, sizeof buf, "%d", r.text.vocab);
    if (sink->param && (sink->param(sink->ctx, "vocab", buf, err) != 0)) goto out;
    snprintf(buf, sizeof buf, "%zu", P);
    if (sink->param && (sink->param(sink->ctx, "params", buf, err) != 0)) goto out;
    nb_trainer t = {.self = &r,
                    .keep = save_model,
                    .params = r.params,
                    .grads = r.grads,
                    .adam_m = r.am,
                    .adam_v = r.av,
                    .layout = &r.layout,
                    .steps_per_epoch = r.spe,
                    .eval_every = o->eval_every,
                    .select_metric = "val_loss",
                    .extra = {{r.offsets, sizeof(int) * (size_t)(r.spe * r.B)}},
                    .nextra = 1,
                    .resume_mid_epoch = 1, /* the epoch's offsets are in extra */
                    .epoch_begin = lm_epoch,
                    .step = lm_step,
                    .step_shard = lm_shard,
                    .tokens = lm_tokens,
                    .schedule = lm_schedule,
                    .evaluate = lm_evaluate};
    nb_train_fp(&t, "text", r.text.ids, sizeof(int) * r.text.n);
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    run_free(&r);
    return rc;
}

/* ---- the step benchmark --------------------------------------------------------------------- */

typedef struct lm_bench {
    lm_run r;
    nb_adam_cfg adam;
    double clip;
    nb_rng data, noise;
    int64_t step;
    nb_dist *dist;
} lm_bench;

static void lm_bench_close(void *p) {
    lm_bench *b = p;
    if (!b) return;
    run_free(&b->r);
    free(b);
}

static void *lm_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    lm_bench *b = calloc(1, sizeof *b);
    if (!b) {
        nb_errf(err, "out of memory");
        return NULL;
    }
    lm_run *r = &b->r;
    const lm_opts *o = opts_of(cfg);
    if (nb_chars_synthetic(200000, &r->text, err) != 0) goto fail;
    gpt_config(&r->gc, cfg, 65); /* Tiny Shakespeare's vocabulary */
    r->T = r->gc.ctx;
    r->B = cfg->batch;
    r->spe = 1;
    r->lr = cfg->adam.lr;
    r->min_lr = r->lr / 10;
    r->wd = o->weight_decay;
    r->warmup = 0;
    char what[64];
    snprintf(what, sizeof what, "--batch %d", r->B);
    if (nb_check_batch_memory(build_model, &r->gc, r->B, what, err) != 0) goto fail;
    if (!(r->m = nb_gpt_new(&r->gc, &r->layout, r->B, err))) goto fail;
    const size_t P = r->layout.total;
    r->params = calloc(P, sizeof(float));
    r->grads = calloc(P, sizeof(float));
    r->am = calloc(P, sizeof(float));
    r->av = calloc(P, sizeof(float));
    r->offsets = malloc(sizeof(int) * (size_t)r->B);
    r->tok = malloc(sizeof(int) * (size_t)r->B * r->T);
    r->tgt = malloc(sizeof(int) * (size_t)r->B * r->T);
    if (!r->params || !r->grads || !r->am || !r->av || !r->offsets || !r->tok || !r->tgt) {
        nb_errf(err, "out of memory");
        goto fail;
    }
    /* ids of the synthetic text folded into the 65 characters the model has */
    for (size_t i = 0; i < r->text.n; i++)
        r->text.ids[i] %= 65;
    nb_rng_seed(&b->data, cfg->seed, NB_STREAM_DATA);
    nb_rng_seed(&b->noise, cfg->seed, NB_STREAM_DROPOUT);
    nb_rng init;
    nb_rng_seed(&init, cfg->seed, NB_STREAM_INIT);
    nb_gpt_init_params(r->m, r->params, &init);
    b->adam = cfg->adam;
    b->clip = cfg->clip;
    b->dist = cfg->dist && cfg->dist->size > 1 ? cfg->dist : NULL;
    nb_flush_denormals(cfg->flush_denormals);
    return b;
fail:
    lm_bench_close(b);
    return NULL;
}

static double lm_bench_step(void *p) {
    lm_bench *b = p;
    lm_run *r = &b->r;
    const double t0 = nb_now();
    lm_epoch(r, 1, &b->data);
    memset(r->grads, 0, sizeof(float) * r->layout.total);
    nb_trainer t = {.self = r,
                    .params = r->params,
                    .grads = r->grads,
                    .adam_m = r->am,
                    .adam_v = r->av,
                    .layout = &r->layout,
                    .schedule = lm_schedule};
    if (b->dist) {
        const int size = b->dist->size, rank = b->dist->rank;
        const int lo = (int)((int64_t)r->B * rank / size),
                  hi = (int)((int64_t)r->B * (rank + 1) / size);
        double loss = lm_shard(r, 0, lo, hi, &b->noise);
        nb_train_dist_sum(b->dist, &t, loss, hi - lo, r->B, NULL);
    } else {
        lm_step(r, 0, &b->noise);
    }
    nb_train_update(&t, b->clip, &b->adam, ++b->step, 1000000);
    return nb_now() - t0;
}

static double lm_bench_flops(void *p) {
    lm_bench *b = p;
    return nb_gpt_step_flops(b->r.m, b->r.B, b->r.T);
}

static const int lm_batches[] = {12, 0};

const nb_task nb_task_lm = {
    .name = "lm",
    .summary = "character-level GPT language model (nanoGPT's shakespeare_char)",
    .default_dataset = "tinyshakespeare",
    .datasets = lm_datasets,
    .opts = lm_opts_decl,
    .opts_size = sizeof(lm_opts),
    .data_parallel = 1,
    .activation = "gelu-tanh", /* nn/gpt.c's MLP */
    .defaults = lm_defaults,
    .finish = lm_finish,
    .train = lm_train,
    .bench_open = lm_bench_open,
    .bench_step = lm_bench_step,
    .bench_close = lm_bench_close,
    .bench_batches = lm_batches,
    .target = {"val_loss", 2.0, 0},
    .paper = "nanoGPT (Karpathy), shakespeare_char: the cpu configuration (4 layers, 4 heads, "
             "width 128, context 64, batch 12, 2000 iterations, dropout 0) reaches validation "
             "loss 1.88 in about 3 minutes on a MacBook's CPU (its README); the gpu "
             "configuration (6 layers, 6 heads, width 384, context 256, batch 64, 5000 "
             "iterations, dropout 0.2) best validation loss 1.4697 in about 3 minutes on one "
             "A100 GPU.",
    .bench_flops = lm_bench_flops,
    .sample = lm_sample,
};
