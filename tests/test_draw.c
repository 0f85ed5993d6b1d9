/* tests/test_draw.c — nn/draw.c, DRAW's attention and the bound's terms: central finite
 * differences in double for the filterbanks, read and write (non-square images, read N = 2 and 3,
 * write N = 5), a filterbank feeding a read and a write, the sigmoid cross-entropy and the
 * reparameterized KL; the forward values against direct formulas (filters sum to 1, a
 * glimpse of a constant image, the stable softplus at large logits); and the whole model's loss
 * and gradients against PyTorch (tests/ref/draw.bin, written by tests/ref/ref_draw.py). */
#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"
#include "util/rng.h"

/* The test's random numbers: the project's generator (util/rng.h), one stream for the file. */
static nb_rng test_rng;

static double urand(void) {
    static int seeded;
    if (!seeded) {
        nb_rng_seed(&test_rng, 0x6472617774657374ull, NB_STREAM_SYNTH);
        seeded = 1;
    }
    return nb_rng_uniform(&test_rng);
}

static void fill(double *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * urand();
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Checks g (the analytic gradient of f with respect to x, n values) by central differences. */
static void fdcheck(double (*f)(void *), void *ctx, double *x, const double *g, size_t n,
                    const char *what) {
    const double h = 1e-6;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double fp = f(ctx);
        x[i] = keep - h;
        double fm = f(ctx);
        x[i] = keep;
        double num = (fp - fm) / (2 * h);
        double err = fabs(num - g[i]) / (1e-6 + fabs(num));
        if (err > worst) worst = err;
        if (!(fabs(num - g[i]) <= 1e-6 + 1e-5 * fabs(num))) {
            print_error("%s[%zu]: analytic %.10g, numeric %.10g\n", what, i, g[i], num);
            fail();
        }
    }
    fprintf(stderr, "# %-28s %3zu values, worst relative error %.2e\n", what, n, worst);
}

enum { B = 2, AW = 8, BH = 6, NMAX = 5 };

/* ---- the filterbank ------------------------------------------------------------------------- */

typedef struct fb_ctx {
    int N;
    double p[B * 5], FX[B * NMAX * AW], FY[B * NMAX * BH], gamma[B];
    double RX[B * NMAX * AW], RY[B * NMAX * BH], Rg[B];
} fb_ctx;

static double fb_loss(void *v) {
    fb_ctx *c = v;
    nb_draw_filterbank_forward_f64(c->FX, c->FY, c->gamma, c->p, B, AW, BH, c->N);
    return dot(c->RX, c->FX, (size_t)B * c->N * AW) + dot(c->RY, c->FY, (size_t)B * c->N * BH) +
           dot(c->Rg, c->gamma, B);
}

static void random_p(double *p) {
    for (int b = 0; b < B; b++) {
        p[b * 5 + 0] = -0.4 + 0.8 * urand();
        p[b * 5 + 1] = -0.4 + 0.8 * urand();
        p[b * 5 + 2] = -0.3 + 0.6 * urand();
        p[b * 5 + 3] = -0.3 + 0.6 * urand();
        p[b * 5 + 4] = -0.3 + 0.6 * urand();
    }
}

static void test_filterbank(void **state) {
    (void)state;
    for (int N = 2; N <= NMAX; N++) {
        fb_ctx c;
        memset(&c, 0, sizeof c);
        c.N = N;
        random_p(c.p);
        fill(c.RX, sizeof c.RX / sizeof(double), -1, 1);
        fill(c.RY, sizeof c.RY / sizeof(double), -1, 1);
        fill(c.Rg, B, -1, 1);
        fb_loss(&c);
        /* each filter is a distribution over its pixels, centred where eq. 21-24 put it */
        for (int b = 0; b < B; b++)
            for (int i = 0; i < N; i++) {
                double s = 0;
                for (int a = 0; a < AW; a++)
                    s += c.FX[((size_t)b * N + i) * AW + a];
                assert_close(s, 1, 1e-5, 0); /* Z carries NB_DRAW_FB_EPS */
            }
        assert_close(c.gamma[1], exp(c.p[9]), 1e-12, 1e-12);
        double dp[B * 5] = {0};
        nb_draw_filterbank_backward_f64(dp, c.RX, c.RY, c.Rg, c.FX, c.FY, c.gamma, c.p, B, AW, BH,
                                        N);
        char what[64];
        snprintf(what, sizeof what, "filterbank N=%d dp", N);
        fdcheck(fb_loss, &c, c.p, dp, B * 5, what);
    }
    /* g~ = 0 centres the grid: the middle filter of an odd grid has its mean at the middle
     * column and row (0-based (A-1)/2), the outer ones delta either side */
    double p[5] = {0, 0, -1, 0, 0}, FX[3 * AW], FY[3 * BH], g;
    nb_draw_filterbank_forward_f64(FX, FY, &g, p, 1, AW, BH, 3);
    double delta = (AW - 1) / 2.0;
    for (int i = 0; i < 3; i++) {
        double mx = 0;
        for (int a = 0; a < AW; a++)
            mx += a * FX[i * AW + a];
        if (i == 1) assert_close(mx, (AW - 1) / 2.0, 1e-6, 0);
        if (i == 0) assert_true(mx < (AW - 1) / 2.0 - 0.5 * delta);
    }
    double my = 0;
    for (int b = 0; b < BH; b++)
        my += b * FY[BH + b];
    assert_close(my, (BH - 1) / 2.0, 1e-6, 0);
}

/* ---- read and write ---------------------------------------------------------------------------
 */

typedef struct rw_ctx {
    int N, write;
    double img[B * BH * AW], w[B * NMAX * NMAX], FX[B * NMAX * AW], FY[B * NMAX * BH], gamma[B];
    double out[B * BH * AW], R[B * BH * AW];
} rw_ctx;

static double rw_loss(void *v) {
    rw_ctx *c = v;
    size_t n;
    if (c->write) {
        nb_draw_write_forward_f64(c->out, c->w, c->FX, c->FY, c->gamma, B, AW, BH, c->N, 0);
        n = (size_t)B * BH * AW;
    } else {
        nb_draw_read_forward_f64(c->out, c->N * c->N, c->img, c->FX, c->FY, c->gamma, B, AW, BH,
                                 c->N);
        n = (size_t)B * c->N * c->N;
    }
    return dot(c->R, c->out, n);
}

static void test_read_write(void **state) {
    (void)state;
    for (int write = 0; write <= 1; write++)
        for (int N = 2; N <= (write ? 5 : 3); N += write ? 3 : 1) {
            rw_ctx c;
            memset(&c, 0, sizeof c);
            c.N = N, c.write = write;
            fill(c.img, sizeof c.img / sizeof(double), 0, 1);
            fill(c.w, sizeof c.w / sizeof(double), -1, 1);
            fill(c.FX, sizeof c.FX / sizeof(double), 0, 0.5);
            fill(c.FY, sizeof c.FY / sizeof(double), 0, 0.5);
            fill(c.gamma, B, 0.5, 2);
            fill(c.R, sizeof c.R / sizeof(double), -1, 1);
            rw_loss(&c);
            double dimg[B * BH * AW] = {0}, dw[B * NMAX * NMAX] = {0}, dFX[B * NMAX * AW] = {0},
                                 dFY[B * NMAX * BH] = {0}, dg[B] = {0};
            if (write)
                nb_draw_write_backward_f64(dw, dFX, dFY, dg, c.R, c.w, c.FX, c.FY, c.gamma, B, AW,
                                           BH, N);
            else
                nb_draw_read_backward_f64(dimg, dFX, dFY, dg, c.R, c.out, N * N, c.img, c.FX, c.FY,
                                          c.gamma, B, AW, BH, N);
            char what[64];
            const char *k = write ? "write" : "read";
            if (write) {
                snprintf(what, sizeof what, "%s N=%d dw", k, N);
                fdcheck(rw_loss, &c, c.w, dw, (size_t)B * N * N, what);
            } else {
                snprintf(what, sizeof what, "%s N=%d dimg", k, N);
                fdcheck(rw_loss, &c, c.img, dimg, (size_t)B * BH * AW, what);
            }
            snprintf(what, sizeof what, "%s N=%d dFX", k, N);
            fdcheck(rw_loss, &c, c.FX, dFX, (size_t)B * N * AW, what);
            snprintf(what, sizeof what, "%s N=%d dFY", k, N);
            fdcheck(rw_loss, &c, c.FY, dFY, (size_t)B * N * BH, what);
            snprintf(what, sizeof what, "%s N=%d dgamma", k, N);
            fdcheck(rw_loss, &c, c.gamma, dg, B, what);
        }
    /* write accumulates onto the canvas when asked */
    rw_ctx c;
    memset(&c, 0, sizeof c);
    c.N = 5;
    fill(c.w, sizeof c.w / sizeof(double), -1, 1);
    fill(c.FX, sizeof c.FX / sizeof(double), 0, 0.5);
    fill(c.FY, sizeof c.FY / sizeof(double), 0, 0.5);
    fill(c.gamma, B, 0.5, 2);
    double once[B * BH * AW], twice[B * BH * AW];
    nb_draw_write_forward_f64(once, c.w, c.FX, c.FY, c.gamma, B, AW, BH, 5, 0);
    memcpy(twice, once, sizeof once);
    nb_draw_write_forward_f64(twice, c.w, c.FX, c.FY, c.gamma, B, AW, BH, 5, 1);
    for (int i = 0; i < B * BH * AW; i++)
        assert_close(twice[i], 2 * once[i], 1e-12, 1e-12);
}

/* A glimpse of a constant image is gamma times that constant (each filter sums to 1). */
static void test_read_constant(void **state) {
    (void)state;
    double p[B * 5], FX[B * 2 * AW], FY[B * 2 * BH], g[B], img[B * BH * AW], out[B * 4];
    random_p(p);
    nb_draw_filterbank_forward_f64(FX, FY, g, p, B, AW, BH, 2);
    for (int i = 0; i < B * BH * AW; i++)
        img[i] = 0.75;
    nb_draw_read_forward_f64(out, 4, img, FX, FY, g, B, AW, BH, 2);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < 4; k++)
            assert_close(out[b * 4 + k], 0.75 * g[b], 0, 1e-5);
}

/* p -> filterbank -> read of an image and write of a patch: the chain DRAW runs each glimpse. */
typedef struct chain_ctx {
    double p[B * 5], img[B * BH * AW], w[B * 9];
    double FX[B * 3 * AW], FY[B * 3 * BH], g[B], r[B * 9], c[B * BH * AW];
    double Rr[B * 9], Rc[B * BH * AW];
} chain_ctx;

static double chain_loss(void *v) {
    chain_ctx *c = v;
    nb_draw_filterbank_forward_f64(c->FX, c->FY, c->g, c->p, B, AW, BH, 3);
    nb_draw_read_forward_f64(c->r, 9, c->img, c->FX, c->FY, c->g, B, AW, BH, 3);
    nb_draw_write_forward_f64(c->c, c->w, c->FX, c->FY, c->g, B, AW, BH, 3, 0);
    return dot(c->Rr, c->r, B * 9) + dot(c->Rc, c->c, (size_t)B * BH * AW);
}

static void test_chain(void **state) {
    (void)state;
    chain_ctx c;
    random_p(c.p);
    fill(c.img, sizeof c.img / sizeof(double), 0, 1);
    fill(c.w, sizeof c.w / sizeof(double), -1, 1);
    fill(c.Rr, sizeof c.Rr / sizeof(double), -1, 1);
    fill(c.Rc, sizeof c.Rc / sizeof(double), -1, 1);
    chain_loss(&c);
    double dFX[B * 3 * AW] = {0}, dFY[B * 3 * BH] = {0}, dg[B] = {0}, dp[B * 5] = {0},
                       dimg[B * BH * AW] = {0}, dw[B * 9] = {0};
    nb_draw_read_backward_f64(dimg, dFX, dFY, dg, c.Rr, c.r, 9, c.img, c.FX, c.FY, c.g, B, AW, BH,
                              3);
    nb_draw_write_backward_f64(dw, dFX, dFY, dg, c.Rc, c.w, c.FX, c.FY, c.g, B, AW, BH, 3);
    nb_draw_filterbank_backward_f64(dp, dFX, dFY, dg, c.FX, c.FY, c.g, c.p, B, AW, BH, 3);
    fdcheck(chain_loss, &c, c.p, dp, B * 5, "chain dp");
    fdcheck(chain_loss, &c, c.img, dimg, (size_t)B * BH * AW, "chain dimg");
    fdcheck(chain_loss, &c, c.w, dw, B * 9, "chain dw");
}

/* ---- the bound's terms ------------------------------------------------------------------------
 */

enum { D = 7, Z = 4 };

typedef struct term_ctx {
    double c[B * D], x[B * D], mu[B * Z], ls[B * Z], eps[B * Z], z[B * Z], R[B * Z];
    double scale;
} term_ctx;

static double bce_loss(void *v) {
    term_ctx *t = v;
    return t->scale * nb_draw_bce_forward_f64(NULL, t->c, t->x, B, D);
}

static double latent_loss(void *v) {
    term_ctx *t = v;
    double kl = nb_draw_latent_forward_f64(t->z, NULL, t->mu, t->ls, t->eps, B, Z);
    return dot(t->R, t->z, B * Z) + t->scale * kl;
}

static void test_terms(void **state) {
    (void)state;
    term_ctx t;
    t.scale = 0.7;
    fill(t.c, B * D, -4, 4);
    for (int i = 0; i < B * D; i++)
        t.x[i] = urand() < 0.4;
    double dc[B * D] = {0};
    nb_draw_bce_backward_f64(dc, t.c, t.x, B, D, 0.7);
    fdcheck(bce_loss, &t, t.c, dc, B * D, "bce dc");
    fill(t.mu, B * Z, -1, 1);
    fill(t.ls, B * Z, -1, 0.5);
    fill(t.eps, B * Z, -2, 2);
    fill(t.R, B * Z, -1, 1);
    double dmu[B * Z] = {0}, dls[B * Z] = {0};
    nb_draw_latent_backward_f64(dmu, dls, t.R, t.mu, t.ls, t.eps, B, Z, 0.7);
    fdcheck(latent_loss, &t, t.mu, dmu, B * Z, "latent dmu");
    fdcheck(latent_loss, &t, t.ls, dls, B * Z, "latent dls");
    /* values: the KL of N(0, I) is 0; of N(1, 1) in one dimension 1/2 per dimension */
    double mu[Z] = {0}, ls[Z] = {0}, e[Z] = {0}, z[Z], kl[1] = {0};
    assert_close(nb_draw_latent_forward_f64(z, kl, mu, ls, e, 1, Z), 0, 1e-15, 0);
    for (int k = 0; k < Z; k++)
        mu[k] = 1;
    assert_close(nb_draw_latent_forward_f64(z, kl, mu, ls, e, 1, Z), 0.5 * Z, 1e-12, 0);
    assert_close(kl[0], 0.5 * Z, 1e-12, 0);
    /* the stable softplus: large logits neither overflow nor lose the small term */
    double c2[4] = {100, -100, 800, -800}, x2[4] = {1, 1, 0, 0}, l2[1];
    double v = nb_draw_bce_forward_f64(l2, c2, x2, 1, 4);
    assert_close(v, 0 + 100 + 800 + 0, 1e-9, 1e-12);
    double c3[1] = {0}, x3[1] = {1};
    assert_close(nb_draw_bce_forward_f64(NULL, c3, x3, 1, 1), log(2.0), 1e-15, 0);
    /* float agrees with double */
    float cf[B * D], xf[B * D];
    for (int i = 0; i < B * D; i++)
        cf[i] = (float)t.c[i], xf[i] = (float)t.x[i];
    assert_close(nb_draw_bce_forward(NULL, cf, xf, B, D),
                 nb_draw_bce_forward_f64(NULL, t.c, t.x, B, D), 1e-4, 1e-5);
}

/* ---- the model ------------------------------------------------------------------------------ */

enum { MA = 8, MB = 8, MT = 3, MH = 6, MZ = 4, MBATCH = 2 };

typedef struct model_ctx {
    nb_draw_f64 m;
    nb_layout lay;
    double *p, *g, x[MBATCH * MA * MB], eps[MBATCH * MT * MZ];
} model_ctx;

static double model_loss(void *v) {
    model_ctx *c = v;
    return nb_draw_forward_f64(&c->m, c->x, c->eps, MBATCH, c->p);
}

static void model_check(nb_norm_kind kind, int attn) {
    model_ctx c;
    memset(&c, 0, sizeof c);
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.p = 0.3;
    nb_err err;
    assert_int_equal(
        nb_draw_init_f64(&c.m, MA, MB, MT, MH, MZ, 2, 5, attn, MBATCH, &cfg, &c.lay, &err), 0);
    size_t P = c.lay.total;
    c.p = calloc(P, sizeof(double));
    c.g = calloc(P, sizeof(double));
    nb_rng rng;
    nb_rng_seed(&rng, 5 + (uint64_t)kind, 1);
    nb_draw_init_params_f64(&c.m, c.p, &rng);
    /* every value off its initial one (biases, gains, h0), gains near 1 */
    for (int i = 0; i < c.lay.count; i++) {
        const nb_tensor *t = &c.lay.t[i];
        int gain = strstr(t->name, ".s") != NULL || strstr(t->name, ".g") != NULL;
        for (size_t j = 0; j < t->n; j++)
            c.p[t->off + j] =
                gain ? 1 + 0.2 * nb_rng_normal(&rng) : c.p[t->off + j] + 0.2 * nb_rng_normal(&rng);
    }
    for (int i = 0; i < MBATCH * MA * MB; i++)
        c.x[i] = urand() < 0.3;
    for (int i = 0; i < MBATCH * MT * MZ; i++)
        c.eps[i] = nb_rng_normal(&rng);
    double loss = model_loss(&c);
    /* the loss is the two parts' mean */
    assert_close(loss, (c.m.rec + c.m.kl) / MBATCH, 1e-12, 1e-12);
    assert_true(c.m.kl > 0 && c.m.rec > 0);
    nb_draw_backward_f64(&c.m, c.g, c.p);
    char what[64];
    snprintf(what, sizeof what, "draw %s%s (%zu params)", nb_norm_name(kind),
             attn ? "" : " no-attention", P);
    fdcheck(model_loss, &c, c.p, c.g, P, what);
    /* the same forward twice: deterministic */
    assert_close(model_loss(&c), loss, 0, 0);
    nb_draw_free_f64(&c.m);
    free(c.p);
    free(c.g);
}

static void test_model_gradients(void **state) {
    (void)state;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER,  NB_NORM_RMS,
                                  NB_NORM_PRMS, NB_NORM_WEIGHT, NB_NORM_DYT};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        model_check(kinds[k], 1);
    model_check(NB_NORM_LAYER, 0);
}

static void test_model_refusals(void **state) {
    (void)state;
    nb_draw_f64 m;
    nb_layout lay;
    memset(&lay, 0, sizeof lay);
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
    nb_err err;
    assert_int_equal(nb_draw_init_f64(&m, 8, 8, 3, 6, 4, 2, 5, 1, 2, &cfg, &lay, &err), -1);
    assert_non_null(strstr(err.msg, "batch normalization is not available"));
    assert_true(err.hint[0] != '\0');
    nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
    assert_int_equal(nb_draw_init_f64(&m, 8, 8, 3, 6, 4, 1, 5, 1, 2, &cfg, &lay, &err), -1);
    assert_non_null(strstr(err.msg, "sizes out of range"));
}

/* float agrees with double on the loss and its gradient */
static void test_model_float(void **state) {
    (void)state;
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
    nb_layout ld, lf;
    memset(&ld, 0, sizeof ld);
    memset(&lf, 0, sizeof lf);
    nb_err err;
    nb_draw_f64 md;
    nb_draw mf;
    assert_int_equal(nb_draw_init_f64(&md, MA, MB, MT, MH, MZ, 2, 5, 1, MBATCH, &cfg, &ld, &err),
                     0);
    assert_int_equal(nb_draw_init(&mf, MA, MB, MT, MH, MZ, 2, 5, 1, MBATCH, &cfg, &lf, &err), 0);
    assert_int_equal(ld.total, lf.total);
    size_t P = ld.total;
    double *pd = calloc(P, sizeof(double)), *gd = calloc(P, sizeof(double));
    float *pf = calloc(P, sizeof(float)), *gf = calloc(P, sizeof(float));
    nb_rng rng;
    nb_rng_seed(&rng, 3, 1);
    nb_draw_init_params_f64(&md, pd, &rng);
    for (size_t i = 0; i < P; i++)
        pf[i] = (float)pd[i];
    double xd[MBATCH * MA * MB], ed[MBATCH * MT * MZ];
    float xf[MBATCH * MA * MB], ef[MBATCH * MT * MZ];
    for (int i = 0; i < MBATCH * MA * MB; i++)
        xf[i] = (float)(xd[i] = urand() < 0.3);
    for (int i = 0; i < MBATCH * MT * MZ; i++)
        ef[i] = (float)(ed[i] = nb_rng_normal(&rng));
    double a = nb_draw_forward_f64(&md, xd, ed, MBATCH, pd);
    double b = nb_draw_forward(&mf, xf, ef, MBATCH, pf);
    assert_close(b, a, 1e-4, 1e-5);
    nb_draw_backward_f64(&md, gd, pd);
    nb_draw_backward(&mf, gf, pf);
    double scale = 0;
    for (size_t i = 0; i < P; i++)
        scale = fmax(scale, fabs(gd[i]));
    for (size_t i = 0; i < P; i++)
        assert_close(gf[i], gd[i], 1e-4 * scale, 0);
    fprintf(stderr, "# draw layer: float loss %.6f, double %.6f\n", b, a);
    nb_draw_free_f64(&md);
    nb_draw_free(&mf);
    free(pd), free(gd), free(pf), free(gf);
}

/* Generation is the decoder half of forward: with the posterior layers zero (mu = 0, log sigma =
 * 0, so z = eps) forward's final canvas is the generated one, for the same eps. */
static void test_generate(void **state) {
    (void)state;
    for (int attn = 0; attn <= 1; attn++) {
        model_ctx c;
        memset(&c, 0, sizeof c);
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
        nb_err err;
        assert_int_equal(
            nb_draw_init_f64(&c.m, MA, MB, MT, MH, MZ, 2, 5, attn, MBATCH, &cfg, &c.lay, &err), 0);
        c.p = calloc(c.lay.total, sizeof(double));
        nb_rng rng;
        nb_rng_seed(&rng, 9, 1);
        nb_draw_init_params_f64(&c.m, c.p, &rng);
        for (size_t j = 0; j < c.lay.total; j++)
            c.p[j] += 0.1 * nb_rng_normal(&rng);
        for (int i = 0; i < c.lay.count; i++)
            if (strncmp(c.lay.t[i].name, "mu.", 3) == 0 || strncmp(c.lay.t[i].name, "ls.", 3) == 0)
                memset(c.p + c.lay.t[i].off, 0, sizeof(double) * c.lay.t[i].n);
        for (int i = 0; i < MBATCH * MA * MB; i++)
            c.x[i] = urand() < 0.3;
        for (int i = 0; i < MBATCH * MT * MZ; i++)
            c.eps[i] = nb_rng_normal(&rng);
        model_loss(&c);
        enum { DD = MA * MB };
        double canvas[MBATCH * DD], probs[MBATCH * DD], frames[MT * MBATCH * DD];
        memcpy(canvas, c.m.canvas + (size_t)MT * MBATCH * DD, sizeof canvas);
        nb_draw_generate_f64(&c.m, probs, frames, c.eps, MBATCH, c.p);
        for (int i = 0; i < MBATCH * DD; i++) {
            double s = 1 / (1 + exp(-canvas[i]));
            assert_close(probs[i], s, 1e-12, 1e-12);
            assert_close(frames[(size_t)(MT - 1) * MBATCH * DD + i], s, 1e-12, 1e-12);
            assert_true(probs[i] > 0 && probs[i] < 1);
        }
        /* the frames change from step to step */
        assert_true(memcmp(frames, frames + MBATCH * DD, sizeof(double) * MBATCH * DD) != 0);
        nb_draw_free_f64(&c.m);
        free(c.p);
    }
}

/* The initial loss at the paper's sizes (28x28, 64 glimpses, 256 units, z 100, read 2, write 5)
 * is about D ln 2, the bound of a canvas of 0, plus a small KL: the dense layers start at
 * N(0, 0.01^2) as DRAW's code draws them. Glorot-uniform ones gave 2,340 nats with layer
 * (KL 1,782) and 598 with none. */
static void test_initial_loss(void **state) {
    (void)state;
    enum { IB = 4, IT = 64, IH = 256, IZ = 100, ID = 28 * 28 };
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS, NB_NORM_DYT};
    float *x = malloc(sizeof(float) * IB * ID), *eps = malloc(sizeof(float) * IB * IT * IZ);
    assert_non_null(x);
    assert_non_null(eps);
    for (int i = 0; i < IB * ID; i++)
        x[i] = urand() < 0.2f;
    nb_rng rng;
    nb_rng_seed(&rng, 11, 1);
    for (int i = 0; i < IB * IT * IZ; i++)
        eps[i] = (float)nb_rng_normal(&rng);
    for (int attn = 0; attn <= 1; attn++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            nb_norm_cfg cfg;
            nb_norm_cfg_default(&cfg, kinds[k]);
            nb_layout lay;
            memset(&lay, 0, sizeof lay);
            nb_draw m;
            nb_err err;
            assert_int_equal(nb_draw_init(&m, 28, 28, IT, IH, IZ, 2, 5, attn, IB, &cfg, &lay, &err),
                             0);
            float *p = calloc(lay.total, sizeof(float));
            assert_non_null(p);
            nb_draw_init_params(&m, p, &rng);
            const double loss = nb_draw_forward(&m, x, eps, IB, p), dl2 = ID * log(2.0);
            fprintf(stderr,
                    "# initial loss %-5s%s: %.2f (reconstruction %.2f, KL %.2f; D ln 2 %.2f)\n",
                    nb_norm_name(kinds[k]), attn ? "" : " no-attention", loss, m.rec / IB,
                    m.kl / IB, dl2);
            /* without attention the canvas sums 64 full-image writes: a little more */
            assert_true(m.rec / IB < dl2 + (attn ? 2 : 100));
            assert_true(m.rec / IB > dl2 - 2);
            assert_true(m.kl / IB < 40);
            nb_draw_free(&m);
            free(p);
        }
    free(x);
    free(eps);
}

/* ---- the PyTorch reference ------------------------------------------------------------------ */

/* The parameter values tests/ref/ref_draw.py gives the tensor called name (see there): integer
 * arithmetic, exact on both sides. */
static void ref_values(double *v, const char *name, size_t n) {
    uint64_t h = 0;
    for (size_t k = 0; name[k]; k++)
        h += (uint64_t)(unsigned char)name[k] * (k + 1);
    const char *dot = strrchr(name, '.');
    const char *leaf = dot ? dot + 1 : name;
    double centre = 0, amp = fmin(0.3, 3.0 / sqrt((double)n));
    if (!strcmp(leaf, "s1") || !strcmp(leaf, "s2") || !strcmp(leaf, "s3") || !strcmp(leaf, "Wg") ||
        !strcmp(leaf, "Ug"))
        centre = 1, amp = 0.2;
    else if (!strncmp(leaf, "alpha", 5))
        centre = 0.5, amp = 0.1;
    else if (!strncmp(name, "write.", 6))
        amp = 1;
    for (size_t i = 0; i < n; i++) {
        const uint64_t u = ((i + 1) * 2654435761ull + h * 97531ull) % (1ull << 32);
        v[i] = centre + amp * (2 * ((double)u / (double)(1ull << 32)) - 1);
    }
}

/* Loss, its two parts and the gradients of every tensor (a sample of each and its norm) of DRAW
 * at 28x28, batch 3, 3 glimpses, 16 units, z 4, read 2, write 5, with and without attention,
 * for every norm draw takes, against PyTorch's autograd in float64: within 1e-9 relative (the
 * loss) and 1e-8 of the tensor's largest sampled gradient (the gradients). */
static void test_reference(void **state) {
    (void)state;
    enum { RB = 3, RT = 3, RH = 16, RZ = 4, RD = 28 * 28 };
    ref_file rf = {0};
    if (ref_load(&rf, "draw.bin") != 0) fail_msg("tests/ref/draw.bin missing");
    const ref_tensor *rx = ref_get(&rf, "x"), *re = ref_get(&rf, "eps");
    assert_non_null(rx);
    assert_non_null(re);
    assert_int_equal(rx->n, RB * RD);
    assert_int_equal(re->n, RB * RT * RZ);
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_WEIGHT, NB_NORM_LAYER,
                                  NB_NORM_RMS,  NB_NORM_PRMS,   NB_NORM_DYT};
    int cases = 0;
    for (int attn = 1; attn >= 0; attn--)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            nb_norm_cfg cfg;
            nb_norm_cfg_default(&cfg, kinds[k]);
            cfg.p = 0.3;
            nb_layout lay;
            memset(&lay, 0, sizeof lay);
            nb_draw_f64 m;
            nb_err err;
            assert_int_equal(
                nb_draw_init_f64(&m, 28, 28, RT, RH, RZ, 2, 5, attn, RB, &cfg, &lay, &err), 0);
            double *p = calloc(lay.total, sizeof(double)), *g = calloc(lay.total, sizeof(double));
            assert_non_null(p);
            assert_non_null(g);
            for (int i = 0; i < lay.count; i++)
                ref_values(p + lay.t[i].off, lay.t[i].name, lay.t[i].n);
            char cs[64], key[160];
            snprintf(cs, sizeof cs, "%s.%s", nb_norm_name(kinds[k]), attn ? "attn" : "noattn");
            const double loss = nb_draw_forward_f64(&m, rx->data, re->data, RB, p);
            snprintf(key, sizeof key, "%s.loss", cs);
            const ref_tensor *rl = ref_get(&rf, key);
            assert_non_null(rl);
            const double got[3] = {loss, m.rec / RB, m.kl / RB};
            for (int j = 0; j < 3; j++)
                if (!(fabs(got[j] - rl->data[j]) <= 1e-9 * fabs(rl->data[j]))) {
                    print_error("%s: %s %.12g, PyTorch %.12g\n", cs,
                                j == 0   ? "loss"
                                : j == 1 ? "reconstruction"
                                         : "KL",
                                got[j], rl->data[j]);
                    fail();
                }
            nb_draw_backward_f64(&m, g, p);
            double worst = 0;
            for (int i = 0; i < lay.count; i++) {
                const nb_tensor *t = &lay.t[i];
                snprintf(key, sizeof key, "%s.g.%s", cs, t->name);
                const ref_tensor *rg = ref_get(&rf, key);
                snprintf(key, sizeof key, "%s.gn.%s", cs, t->name);
                const ref_tensor *rn = ref_get(&rf, key);
                if (!rg || !rn) fail_msg("%s: no PyTorch gradient of %s", cs, t->name);
                const size_t step = (t->n + 47) / 48;
                assert_int_equal(rg->n, (t->n + step - 1) / step);
                double scale = 1e-12, nrm = 0;
                for (size_t j = 0; j < rg->n; j++)
                    scale = fmax(scale, fabs(rg->data[j]));
                for (size_t j = 0; j < t->n; j++)
                    nrm += g[t->off + j] * g[t->off + j];
                for (size_t j = 0; j < rg->n; j++) {
                    const double a = g[t->off + j * step], b = rg->data[j];
                    worst = fmax(worst, fabs(a - b) / scale);
                    if (!(fabs(a - b) <= 1e-8 * scale)) {
                        print_error("%s: d%s[%zu] %.12g, PyTorch %.12g\n", cs, t->name, j * step, a,
                                    b);
                        fail();
                    }
                }
                if (!(fabs(sqrt(nrm) - rn->data[0]) <= 1e-9 * rn->data[0] + 1e-15)) {
                    print_error("%s: |d%s| %.12g, PyTorch %.12g\n", cs, t->name, sqrt(nrm),
                                rn->data[0]);
                    fail();
                }
            }
            fprintf(stderr,
                    "# reference %-13s loss %.6f (PyTorch %.6f), %2d tensors' gradients, worst "
                    "%.1e of the largest\n",
                    cs, loss, rl->data[0], lay.count, worst);
            cases++;
            nb_draw_free_f64(&m);
            free(p);
            free(g);
        }
    assert_int_equal(cases, 12);
    ref_free(&rf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filterbank),     cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_read_constant),  cmocka_unit_test(test_chain),
        cmocka_unit_test(test_terms),          cmocka_unit_test(test_model_gradients),
        cmocka_unit_test(test_model_refusals), cmocka_unit_test(test_model_float),
        cmocka_unit_test(test_generate),       cmocka_unit_test(test_initial_loss),
        cmocka_unit_test(test_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
