/* tasks/draw.c — DRAW (Gregor et al. 2015) on binarized MNIST, the LayerNorm paper's generative
 * model (§6.4): nn/draw.h's model with the norm inside its encoder and decoder LSTMs (the LN-LSTM
 * of the paper's appendix, nn/lstm.h), trained on the shared loop.
 *
 * The paper: "64 glimpses and 256 LSTM hidden units", Adam with default settings, batch 128,
 * binarized MNIST (Larochelle & Murray's fixed binarization, 50,000 / 10,000 / 10,000), 200
 * epochs; test variational bound 82.36 nats (baseline) and 82.09 (LN). What it does not say, and
 * what we chose (recorded with every run): DRAW's MNIST model otherwise (latent size 100, read
 * 2x2 and write 5x5 attention), Adam in its textbook form (eps on the bias-corrected moments, as
 * torch.optim.Adam), global gradient-norm clipping at 10 (--clip; DRAW's public code,
 * jbornschein/draw train-draw.py, StepClipping(10) before Adam), the dense layers N(0, 0.01^2)
 * as that code draws them (nn/draw.h), the LSTMs as nn/lstm.h draws them.
 *
 * Training: each epoch visits the training images in a fresh random order (data stream) in full
 * batches; the noise eps of the reparameterized samples is drawn per step from the noise stream,
 * row by row (each row of the batch from its own generator seeded from that step's draw), so a
 * batch split over processes draws what one process draws. The loss is the negative variational
 * bound in nats per image (reconstruction + KL). Evaluation (every epoch, or every --eval-every
 * steps): val_nll (the bound on the validation images, one sample of z per image with noise
 * fixed per image: the same for every evaluation, run and norm), val_recon and val_kl; the
 * parameters with the lowest val_nll are kept and restored at the end, where test_nll,
 * test_recon and test_kl are the test bound of that best validation point. A finished run keeps
 * its model (DB-checkpoints/run-ID.model/model) for `normbench sample`. */
#include "tasks/task.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/binmnist.h"
#include "nn/mem.h"
#include "tasks/train.h"
#include "util/file.h"
#include "util/png.h"

typedef struct draw_opts {
    int preset;               /* 0 paper, 1 small */
    int dim, glimpses, z_dim; /* 0: the preset's */
    int attention;            /* the model: 0 attention, 1 no-attention */
    int read_n, write_n;
    int binarize; /* nb_binarize */
    int eval_every;
} draw_opts;

static const char *const preset_choices[] = {"paper", "small", NULL};
static const char *const model_choices[] = {"attention", "no-attention", NULL};
static const char *const binarize_choices[] = {"stochastic", "threshold", NULL};

typedef struct draw_preset {
    int dim, glimpses, z_dim;
} draw_preset;
static const draw_preset presets[2] = {{256, 64, 100}, {64, 16, 16}};

static const nb_task_opt draw_opts_decl[] = {
    {"preset", NB_TOPT_CHOICE, offsetof(draw_opts, preset), "P",
     "sizes: paper (256 LSTM units, 64 glimpses, latent size 100: the LN paper's DRAW; seconds "
     "per step of 128 images on one CPU core, an hour or so per epoch) or small (64, 16, 16: "
     "about 0.3 s a step, two minutes an epoch)",
     preset_choices, .group = 1},
    {"dim", NB_TOPT_INT, offsetof(draw_opts, dim), "N",
     "units of the encoder and decoder LSTMs (0: the preset's)", NULL, 0, 8192, 0},
    {"glimpses", NB_TOPT_INT, offsetof(draw_opts, glimpses), "N",
     "steps (glimpses) per image (0: the preset's)", NULL, 0, 1024, 0},
    {"z-dim", NB_TOPT_INT, offsetof(draw_opts, z_dim), "N",
     "latent size per step (0: the preset's)", NULL, 0, 4096, 0},
    {"model", NB_TOPT_CHOICE, offsetof(draw_opts, attention), "M",
     "attention (the differentiable attention read and write, DRAW's MNIST model) or "
     "no-attention (the whole image read and written at every step: DRAW's non-attentive model)",
     model_choices, .selector = 1, .group = 1},
    {"no-attention", NB_TOPT_ALIAS, 0, NULL, "the same as --model no-attention",
     .alias_of = "model", .alias_val = "no-attention"},
    {"read-n", NB_TOPT_INT, offsetof(draw_opts, read_n), "N",
     "side of the read's attention grid (DRAW's MNIST model: 2)", NULL, 2, NB_DRAW_NMAX, 2,
     .models = "attention"},
    {"write-n", NB_TOPT_INT, offsetof(draw_opts, write_n), "N",
     "side of the write's attention grid (DRAW's MNIST model: 5)", NULL, 2, NB_DRAW_NMAX, 5,
     .models = "attention"},
    {"binarize", NB_TOPT_CHOICE, offsetof(draw_opts, binarize), "RULE",
     "how mnist-binarized and fashion-mnist-binarized turn pixels into 0/1: stochastic (1 with "
     "probability p/255, sampled once with a fixed seed) or threshold (p >= 128)",
     binarize_choices},
    {"eval-every", NB_TOPT_INT, offsetof(draw_opts, eval_every), "N",
     "validate every N training steps (0: at the end of every epoch)", NULL, 0, 1e9, 0},
    {NULL},
};

static const draw_opts *opts_of(const nb_train_cfg *cfg) {
    return cfg->task_opts;
}

static void draw_defaults(nb_train_cfg *cfg, nb_norm_kind norm) {
    nb_norm_cfg_default(&cfg->norm, norm);
    cfg->act = NB_ACT_TANH; /* the LSTMs' */
    nb_adam_cfg_default(&cfg->adam);
    cfg->adam.lr = 1e-3;
    cfg->adam.eps_corrected = 1; /* textbook Adam, as torch.optim.Adam computes it */
    cfg->epochs = 200;
    cfg->steps = 0;
    cfg->batch = 128;
    cfg->eval_batch = 128;
    cfg->log_every = 20;
    cfg->clip = 10; /* DRAW's code: StepClipping(10.) */
    cfg->flush_denormals = 1;
}

static int given_has(const nb_given *given, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(given[i].name, name) == 0) return 1;
    return 0;
}

static int draw_finish(nb_train_cfg *cfg, const nb_given *given, int ngiven, nb_err *err) {
    draw_opts *o = cfg->task_opts;
    if (nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES) {
        nb_errf(err, "task draw cannot use --norm batch: its LSTMs run a step at a time (the "
                     "encoder reads with the decoder's last state), and BatchNorm's statistics "
                     "belong to a whole sweep over the sequence");
        return nb_hintf(err, "use a row-wise norm: none, weight, layer, rms, prms or dyt");
    }
    if (given_has(given, ngiven, "act")) {
        nb_errf(err, "task draw cannot use --act: its LSTMs' activations are sigmoid and tanh");
        return nb_hintf(err, "leave --act out");
    }
    const draw_preset *p = &presets[o->preset];
    /* the values in force, so that the run's configuration records them */
    if (o->dim == 0) o->dim = p->dim;
    if (o->glimpses == 0) o->glimpses = p->glimpses;
    if (o->z_dim == 0) o->z_dim = p->z_dim;
    return 0;
}

/* ---- the model and data --------------------------------------------------------------------- */

typedef struct draw_run {
    const nb_train_cfg *cfg;
    nb_binmnist data;
    int have_data;
    nb_draw m;
    int have_model;
    nb_layout layout;
    float *params, *grads, *am, *av;
    float *xb, *eps; /* (Bmax, D), (Bmax, T, Z) */
    int *perm;
    int B, EB, Bmax, T, Z;
} draw_run;

/* The sizes in force: the options', or the preset's where 0 (`bench step` configures without
 * draw_finish). */
static int model_init(nb_draw *m, const nb_train_cfg *cfg, int Bmax, nb_layout *l, nb_err *err) {
    const draw_opts *o = opts_of(cfg);
    const draw_preset *p = &presets[o->preset];
    const int attn = o->attention == 0;
    memset(l, 0, sizeof *l);
    return nb_draw_init(m, NB_BIN_SIDE, NB_BIN_SIDE, o->glimpses ? o->glimpses : p->glimpses,
                        o->dim ? o->dim : p->dim, o->z_dim ? o->z_dim : p->z_dim,
                        attn ? o->read_n : 0, attn ? o->write_n : 0, attn, Bmax, &cfg->norm, l,
                        err);
}

/* For nb_check_batch_memory: the model and a batch's images and noise at B rows. */
static int draw_build(void *ctx, int B, nb_err *err) {
    const nb_train_cfg *cfg = ctx;
    nb_draw m;
    nb_layout l;
    if (model_init(&m, cfg, B, &l, err) != 0) return -1;
    nb_mem_note(sizeof(float) * l.total * 5); /* params, grads, moments, the best copy */
    nb_mem_note(sizeof(float) * (size_t)B * (NB_BIN_DIM + (size_t)m.T * m.Z));
    nb_draw_free(&m);
    return 0;
}

static void run_free(draw_run *r) {
    if (r->have_model) nb_draw_free(&r->m);
    if (r->have_data) nb_binmnist_free(&r->data);
    free(r->params), free(r->grads), free(r->am), free(r->av);
    free(r->xb), free(r->eps), free(r->perm);
    memset(r, 0, sizeof *r);
}

/* Builds the model for batches of up to Bmax rows and its buffers; draws the initial
 * parameters from the init stream of seed. */
static int run_build(draw_run *r, const nb_train_cfg *cfg, int Bmax, int ntrain, uint64_t seed,
                     nb_err *err) {
    r->cfg = cfg;
    r->Bmax = Bmax;
    char what[96];
    snprintf(what, sizeof what, "--batch %d with --eval-batch %d", cfg->batch, cfg->eval_batch);
    if (nb_check_batch_memory(draw_build, (void *)cfg, Bmax, what, err) != 0) return -1;
    if (model_init(&r->m, cfg, Bmax, &r->layout, err) != 0) return -1;
    r->have_model = 1;
    r->T = r->m.T;
    r->Z = r->m.Z;
    const size_t P = r->layout.total;
    r->params = calloc(P, sizeof(float));
    r->grads = calloc(P, sizeof(float));
    r->am = calloc(P, sizeof(float));
    r->av = calloc(P, sizeof(float));
    r->xb = malloc(sizeof(float) * (size_t)Bmax * NB_BIN_DIM);
    r->eps = malloc(sizeof(float) * (size_t)Bmax * r->T * r->Z);
    r->perm = malloc(sizeof(int) * (size_t)(ntrain > 0 ? ntrain : 1));
    if (!r->params || !r->grads || !r->am || !r->av || !r->xb || !r->eps || !r->perm)
        return nb_errf(err, "out of memory for the model's parameters and batches");
    for (int i = 0; i < ntrain; i++)
        r->perm[i] = i;
    nb_rng init;
    nb_rng_seed(&init, seed, NB_STREAM_INIT);
    nb_draw_init_params(&r->m, r->params, &init);
    return 0;
}

static void gather(draw_run *r, const nb_binsplit *s, const int *idx, int first, int n) {
    for (int i = 0; i < n; i++) {
        const uint8_t *src = s->x + (size_t)(idx ? idx[first + i] : first + i) * NB_BIN_DIM;
        float *dst = r->xb + (size_t)i * NB_BIN_DIM;
        for (int k = 0; k < NB_BIN_DIM; k++)
            dst[k] = src[k];
    }
}

/* Row i's noise (T*Z standard normals) into r->eps row `slot`, from its own generator. */
static void row_noise(draw_run *r, int slot, uint64_t seed, uint64_t stream) {
    nb_rng g;
    nb_rng_seed(&g, seed, stream);
    float *e = r->eps + (size_t)slot * r->T * r->Z;
    for (size_t k = 0; k < (size_t)r->T * r->Z; k++)
        e[k] = (float)nb_rng_normal(&g);
}

static void draw_epoch_begin(void *self, int epoch, nb_rng *data_rng) {
    draw_run *r = self;
    nb_rng_shuffle(data_rng, r->perm, (size_t)r->data.train.n);
}

/* Rows [lo, hi) of batch bi; gradients of their loss summed and divided by the whole batch. */
static double draw_step_shard(void *self, int64_t bi, int lo, int hi, nb_rng *noise_rng) {
    draw_run *r = self;
    const uint64_t seed = nb_rng_u64(noise_rng); /* every process draws it */
    const int n = hi - lo;
    if (n <= 0) return 0;
    gather(r, &r->data.train, r->perm, (int)bi * r->B + lo, n);
    for (int i = 0; i < n; i++)
        row_noise(r, i, seed, (uint64_t)(lo + i));
    r->m.grad_rows = r->B;
    double loss = nb_draw_forward(&r->m, r->xb, r->eps, n, r->params);
    if (isfinite(loss)) nb_draw_backward(&r->m, r->grads, r->params);
    r->m.grad_rows = 0;
    return loss;
}

static double draw_step(void *self, int64_t bi, nb_rng *noise_rng) {
    draw_run *r = self;
    return draw_step_shard(self, bi, 0, r->B, noise_rng);
}

/* The evaluation noise: fixed per split and image, the same for every run. */
#define EVAL_SEED 0x6472617765766c31ull /* "drawevl1" */

/* The bound over split s (split 1 val, 2 test): sums of reconstruction and KL over its images,
 * this process's share and then the sums over the processes. */
static void bound(draw_run *r, const nb_binsplit *s, int split, double *nll, double *rec,
                  double *kl) {
    const nb_dist *D = r->cfg->dist && r->cfg->dist->size > 1 ? r->cfg->dist : NULL;
    const int from = D ? (int)((int64_t)s->n * D->rank / D->size) : 0;
    const int to = D ? (int)((int64_t)s->n * (D->rank + 1) / D->size) : s->n;
    double sums[2] = {0, 0};
    for (int i = from; i < to; i += r->EB) {
        const int n = to - i < r->EB ? to - i : r->EB;
        gather(r, s, NULL, i, n);
        for (int k = 0; k < n; k++)
            row_noise(r, k, EVAL_SEED + (uint64_t)split, (uint64_t)(i + k));
        nb_draw_forward(&r->m, r->xb, r->eps, n, r->params);
        sums[0] += r->m.rec;
        sums[1] += r->m.kl;
    }
    if (D) D->sum_d(D->ctx, sums, 2);
    *rec = s->n ? sums[0] / s->n : NAN;
    *kl = s->n ? sums[1] / s->n : NAN;
    *nll = *rec + *kl;
}

static int draw_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    draw_run *r = self;
    (void)err;
    double nll, rec, kl;
    const char *names[2][3] = {{"val_nll", "val_recon", "val_kl"},
                               {"test_nll", "test_recon", "test_kl"}};
    if (final)
        bound(r, &r->data.test, 2, &nll, &rec, &kl);
    else
        bound(r, &r->data.val, 1, &nll, &rec, &kl);
    nb_metric m[3] = {
        {names[final][0], 0, 0, nll}, {names[final][1], 0, 0, rec}, {names[final][2], 0, 0, kl}};
    int n = max < 3 ? max : 3;
    memcpy(out, m, sizeof(nb_metric) * (size_t)n);
    return n;
}

/* ---- the kept model ------------------------------------------------------------------------- */

#define KEPT_MAGIC "normbench-draw-model 1\n"
#define FNV_BASIS 1469598103934665603ULL

typedef struct draw_kept_head {
    nb_ckpt_ident id;
    int32_t side, T, H, Z, Nr, Nw, attn, pad;
    uint64_t nparams;
} draw_kept_head;

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static void kept_head(draw_kept_head *kh, const draw_run *r, const nb_ckpt_ident *id) {
    memset(kh, 0, sizeof *kh);
    if (id) kh->id = *id;
    kh->side = NB_BIN_SIDE;
    kh->T = r->m.T, kh->H = r->m.H, kh->Z = r->m.Z;
    kh->Nr = r->m.Nr, kh->Nw = r->m.Nw, kh->attn = r->m.attn;
    kh->nparams = r->layout.total;
}

/* DIR/model: the magic, the head, the parameters, an FNV-1a hash of everything before it;
 * written atomically. */
static int save_model(void *self, const char *dir, const nb_ckpt_ident *id, nb_err *err) {
    const draw_run *r = self;
    char path[4200];
    snprintf(path, sizeof path, "%s/model", dir);
    draw_kept_head kh;
    kept_head(&kh, r, id);
    uint64_t h = fnv1a(KEPT_MAGIC, sizeof KEPT_MAGIC - 1, FNV_BASIS);
    h = fnv1a(&kh, sizeof kh, h);
    h = fnv1a(r->params, sizeof(float) * r->layout.total, h);
    const nb_piece pieces[] = {{KEPT_MAGIC, sizeof KEPT_MAGIC - 1},
                               {&kh, sizeof kh},
                               {r->params, sizeof(float) * r->layout.total},
                               {&h, sizeof h}};
    return nb_write_atomicv(path, pieces, (int)(sizeof pieces / sizeof pieces[0]), err);
}

/* Reads the model kept in dir into a model for cfg (batches of Bmax), checking what it belongs
 * to, its shape and its hash. */
static int load_model(const nb_train_cfg *cfg, const char *dir, const nb_ckpt_ident *want, int Bmax,
                      draw_run *r, nb_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/model", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        nb_errf(err, "cannot open the model '%s': %s", path, strerror(errno));
        return nb_hintf(err, "a run keeps its model when it finishes; is the run finished?");
    }
    char magic[sizeof KEPT_MAGIC];
    draw_kept_head kh, expect;
    int ok = fread(magic, 1, sizeof KEPT_MAGIC - 1, f) == sizeof KEPT_MAGIC - 1 &&
             memcmp(magic, KEPT_MAGIC, sizeof KEPT_MAGIC - 1) == 0 &&
             fread(&kh, sizeof kh, 1, f) == 1;
    if (!ok) {
        fclose(f);
        nb_errf(err, "'%s' is not a normbench DRAW model", path);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    if (want && nb_ckpt_ident_check(path, &kh.id, want, err) != 0) {
        fclose(f);
        return nb_hintf(err, "the model belongs to another run or store: sample with the run "
                             "that made it");
    }
    r->cfg = cfg;
    if (model_init(&r->m, cfg, Bmax, &r->layout, err) != 0) {
        fclose(f);
        return -1;
    }
    r->have_model = 1;
    r->T = r->m.T;
    r->Z = r->m.Z;
    kept_head(&expect, r, &kh.id);
    if (memcmp(&kh, &expect, sizeof kh) != 0) {
        fclose(f);
        return nb_errf(err,
                       "the model '%s' has another shape than the run's configuration (%llu "
                       "parameters, the configuration %zu)",
                       path, (unsigned long long)kh.nparams, r->layout.total);
    }
    r->params = malloc(sizeof(float) * r->layout.total);
    uint64_t hf = 0;
    ok = r->params && fread(r->params, sizeof(float), r->layout.total, f) == r->layout.total &&
         fread(&hf, sizeof hf, 1, f) == 1 && fgetc(f) == EOF;
    fclose(f);
    uint64_t h = fnv1a(KEPT_MAGIC, sizeof KEPT_MAGIC - 1, FNV_BASIS);
    h = fnv1a(&kh, sizeof kh, h);
    if (ok) h = fnv1a(r->params, sizeof(float) * r->layout.total, h);
    if (!ok || h != hf) {
        nb_errf(err, "the model '%s' is damaged (its length or checksum is wrong)", path);
        return nb_hintf(err, "train the run again to keep a new model");
    }
    return 0;
}

/* Images from the model's prior as a PNG: a grid of count images (frames 0), or one row per
 * image of its canvas after evenly spaced steps, the last step last (frames > 0: that many
 * columns at most). Pixels are the Bernoulli means sigmoid(c), white on black. */
static unsigned char *draw_sample_png(const nb_train_cfg *cfg, const char *dir,
                                      const nb_ckpt_ident *want, int count, int frames,
                                      uint64_t seed, size_t *len, nb_err *err) {
    enum { SIDE = NB_BIN_SIDE, GAP = 1, CHUNK = 64 };
    draw_run r;
    memset(&r, 0, sizeof r);
    unsigned char *png = NULL;
    uint8_t *pix = NULL;
    float *probs = NULL, *fr = NULL;
    const int Bmax = count < CHUNK ? count : CHUNK;
    if (count < 1) {
        nb_errf(err, "no images to draw (count %d)", count);
        return NULL;
    }
    if (load_model(cfg, dir, want, Bmax, &r, err) != 0) goto done;
    const int T = r.T;
    const int cols = frames > 0 ? (frames < T ? frames : T) : (int)ceil(sqrt((double)count));
    const int rows = frames > 0 ? count : (count + cols - 1) / cols;
    const int W = cols * (SIDE + GAP) + GAP, H = rows * (SIDE + GAP) + GAP;
    if (W > NB_PNG_MAXSIDE || H > NB_PNG_MAXSIDE) {
        nb_errf(err, "%d images make a picture of %d x %d pixels, more than %d a side", count, W, H,
                NB_PNG_MAXSIDE);
        nb_hintf(err, "draw fewer images");
        goto done;
    }
    pix = calloc((size_t)W * H, 1);
    probs = malloc(sizeof(float) * (size_t)Bmax * NB_BIN_DIM);
    r.eps = malloc(sizeof(float) * (size_t)Bmax * T * r.Z);
    if (frames > 0) fr = malloc(sizeof(float) * (size_t)T * Bmax * NB_BIN_DIM);
    if (!pix || !probs || !r.eps || (frames > 0 && !fr)) {
        nb_errf(err, "out of memory for %d images", count);
        goto done;
    }
    memset(pix, 64, (size_t)W * H); /* the gaps: dark gray */
    for (int i0 = 0; i0 < count; i0 += Bmax) {
        const int n = count - i0 < Bmax ? count - i0 : Bmax;
        for (int k = 0; k < n; k++)
            row_noise(&r, k, seed, (uint64_t)(i0 + k));
        nb_draw_generate(&r.m, probs, fr, r.eps, n, r.params);
        for (int k = 0; k < n; k++) {
            const int i = i0 + k;
            for (int c = 0; c < (frames > 0 ? cols : 1); c++) {
                /* frames: the step after which column c shows the canvas */
                const int t = (int)(((int64_t)(c + 1) * T + cols - 1) / cols) - 1;
                const float *img = frames > 0 ? fr + ((size_t)t * n + k) * NB_BIN_DIM
                                              : probs + (size_t)k * NB_BIN_DIM;
                const int gx = frames > 0 ? c : i % cols, gy = frames > 0 ? i : i / cols;
                uint8_t *o = pix + (size_t)(gy * (SIDE + GAP) + GAP) * W + gx * (SIDE + GAP) + GAP;
                for (int y = 0; y < SIDE; y++)
                    for (int a = 0; a < SIDE; a++) {
                        double v = img[y * SIDE + a];
                        o[(size_t)y * W + a] = (uint8_t)lrint(255 * (v < 0 ? 0 : v > 1 ? 1 : v));
                    }
            }
        }
    }
    if (nb_png_gray(pix, W, H, &png, len, err) != 0) png = NULL;
done:
    free(pix), free(probs), free(fr);
    run_free(&r);
    return png;
}

/* ---- training ------------------------------------------------------------------------------- */

static int draw_train(const nb_train_cfg *cfg, const nb_sink *sink, nb_status *status,
                      nb_err *err) {
    const draw_opts *o = opts_of(cfg);
    draw_run r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    if (nb_binmnist_load(&r.data, cfg->dataset, cfg->data_dir, (nb_binarize)o->binarize,
                         cfg->subset, cfg->seed, err) != 0)
        return -1;
    r.have_data = 1;
    if (sink->param && sink->param(sink->ctx, "data_source", r.data.source, err) != 0) goto out;
    r.B = cfg->batch;
    if (r.B > r.data.train.n) {
        nb_errf(err, "batch size %d is larger than the %d training images", r.B, r.data.train.n);
        nb_hintf(err, "lower --batch or raise --subset");
        goto out;
    }
    if (r.data.val.n < 1 || r.data.test.n < 1) {
        nb_errf(err, "dataset '%s' has no validation or test images", cfg->dataset);
        goto out;
    }
    nb_flush_denormals(cfg->flush_denormals);
    const int largest = r.data.val.n > r.data.test.n ? r.data.val.n : r.data.test.n;
    r.EB = cfg->eval_batch > 0 ? cfg->eval_batch : 128;
    if (r.EB > largest) r.EB = largest;
    const int Bmax = r.B > r.EB ? r.B : r.EB;
    if (run_build(&r, cfg, Bmax, r.data.train.n, cfg->seed, err) != 0) goto out;
    char buf[64];
    snprintf(buf, sizeof buf, "%zu", r.layout.total);
    if (sink->param && sink->param(sink->ctx, "params", buf, err) != 0) goto out;
    nb_trainer t = {.self = &r,
                    .keep = save_model,
                    .params = r.params,
                    .grads = r.grads,
                    .adam_m = r.am,
                    .adam_v = r.av,
                    .layout = &r.layout,
                    .steps_per_epoch = r.data.train.n / r.B,
                    .eval_every = o->eval_every,
                    .select_metric = "val_nll",
                    .extra = {{r.perm, sizeof(int) * (size_t)r.data.train.n}},
                    .nextra = 1,
                    .resume_mid_epoch = 1, /* the epoch's order is in extra */
                    .epoch_begin = draw_epoch_begin,
                    .step = draw_step,
                    .step_shard = draw_step_shard,
                    .evaluate = draw_evaluate};
    const nb_binsplit *fs[3] = {&r.data.train, &r.data.val, &r.data.test};
    static const char *const fn[3] = {"train.x", "val.x", "test.x"};
    for (int k = 0; k < 3; k++)
        nb_train_fp(&t, fn[k], fs[k]->x, (size_t)fs[k]->n * NB_BIN_DIM);
    rc = nb_train_loop(cfg, &t, sink, status, err);
out:
    run_free(&r);
    return rc;
}

/* ---- the step benchmark: synthetic images at cfg->batch ------------------------------------- */

typedef struct draw_bench {
    draw_run r;
    nb_adam_cfg adam;
    double clip;
    nb_rng noise;
    int64_t step;
    nb_dist *dist;
} draw_bench;

static void draw_bench_close(void *p) {
    draw_bench *b = p;
    if (!b) return;
    run_free(&b->r);
    free(b);
}

static void *draw_bench_open(const nb_train_cfg *cfg, nb_err *err) {
    draw_bench *b = calloc(1, sizeof *b);
    if (!b) return nb_errf(err, "out of memory"), NULL;
    draw_run *r = &b->r;
    r->B = cfg->batch;
    if (nb_binmnist_synthetic(&r->data, r->B, cfg->seed, err) != 0) goto fail;
    r->have_data = 1;
    r->EB = r->B;
    if (run_build(r, cfg, r->B, r->data.train.n, cfg->seed, err) != 0) goto fail;
    b->adam = cfg->adam;
    b->clip = cfg->clip;
    b->dist = cfg->dist && cfg->dist->size > 1 ? cfg->dist : NULL;
    nb_rng_seed(&b->noise, cfg->seed, NB_STREAM_DROPOUT);
    nb_flush_denormals(cfg->flush_denormals);
    return b;
fail:
    draw_bench_close(b);
    return NULL;
}

/* One training step as the loop takes it: zero the gradients, the noise, forward, backward,
 * global clipping, Adam. */
static double draw_bench_step(void *p) {
    draw_bench *b = p;
    draw_run *r = &b->r;
    const double t0 = nb_now();
    memset(r->grads, 0, sizeof(float) * r->layout.total);
    nb_trainer t = {.params = r->params,
                    .grads = r->grads,
                    .adam_m = r->am,
                    .adam_v = r->av,
                    .layout = &r->layout};
    if (b->dist) {
        const int size = b->dist->size, rank = b->dist->rank;
        const int lo = (int)((int64_t)r->B * rank / size),
                  hi = (int)((int64_t)r->B * (rank + 1) / size);
        double loss = draw_step_shard(r, 0, lo, hi, &b->noise);
        nb_train_dist_sum(b->dist, &t, loss, hi - lo, r->B, NULL);
    } else {
        draw_step(r, 0, &b->noise);
    }
    nb_train_update(&t, b->clip, &b->adam, ++b->step, 1000000);
    return nb_now() - t0;
}

static const int draw_batches[] = {128, 0};

static const char draw_paper[] =
    "LN paper §6.4 (Fig. 4): DRAW with 64 glimpses and 256 LSTM units on binarized MNIST "
    "(Larochelle & Murray's fixed binarization), Adam with default settings, batch 128: test "
    "variational bound after 200 epochs 82.36 nats (baseline) and 82.09 (LN), and LN converging "
    "about twice as fast. Only the binarized-mnist dataset is the paper's: a bound on "
    "Fashion-MNIST "
    "or on MNIST binarized here is not comparable with these numbers (docs/papers.md#draw).";

static const nb_paper_table draw_paper_tables[] = {
    {"LN paper §6.4: DRAW, binarized MNIST, test variational bound after 200 epochs (nats)",
     NULL,
     1,
     {"test bound"},
     {"test_nll"},
     {{"none", {"82.36"}, 0}, {"layer", {"82.09"}, 0}, {NULL}}},
    {NULL},
};

const nb_task nb_task_draw = {
    .name = "draw",
    .summary = "DRAW (64 glimpses, 256-unit LSTMs) on binarized MNIST: LN paper §6.4",
    .default_dataset = "fashion-mnist-binarized",
    .datasets = nb_binmnist_datasets,
    .opts = draw_opts_decl,
    .opts_size = sizeof(draw_opts),
    .data_parallel = 1,
    .activation = "tanh", /* the LSTMs' (sigmoid gates) */
    .defaults = draw_defaults,
    .finish = draw_finish,
    .train = draw_train,
    .bench_open = draw_bench_open,
    .bench_step = draw_bench_step,
    .bench_close = draw_bench_close,
    .bench_batches = draw_batches,
    .target = {"val_nll", 100, 0},
    .paper = draw_paper,
    .paper_tables = draw_paper_tables,
    .sample_png = draw_sample_png,
};
