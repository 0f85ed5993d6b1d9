/* tests/test_conv.c — convolution, pooling, dropout, noise, the norms on NCHW maps and the
 * convolutional network (nn/conv.c, nn/cnn.c).
 *
 * 1. Central finite differences in double (the _f64 build of the very kernels that train) for
 *    every layer and every norm on 4-D maps (per-channel and C×H×W statistics, leaky ReLU fused
 *    or identity, BN in training and evaluation, eps inside and outside, pRMS ceil and floor),
 *    and for whole networks with each of the six norms (every trainable parameter).
 * 2. Each conv path (im2col with one image per gemm, grouped images, 1×1 direct, dense) against
 *    a naive convolution; float against double.
 * 3. Determinism: the float network's gradients are identical run to run and between 1 and 2
 *    threads where the contract says so (the map norms).
 * 4. Data-dependent initialisation gives zero-mean, unit-variance pre-activations; its pass with
 *    noise and dropout on (the WN code's) against tests/ref/ref_cnn_init.py.
 * 5. PyTorch reference tensors (tests/ref/conv.bin, from tests/ref/ref_conv.py). */
#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"

#include <omp.h>

static void fill(double *x, size_t n, double scale, uint64_t seed) {
    nb_rng r;
    nb_rng_seed(&r, seed, NB_STREAM_SYNTH);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * nb_rng_normal(&r);
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

typedef double (*loss_fn)(void *ctx);

/* Compares g (n) with central differences of f over x (n). */
static void check_fd(const char *what, double *x, const double *g, size_t n, loss_fn f, void *ctx,
                     double h, double tol) {
    for (size_t i = 0; i < n; i++) {
        double s = x[i];
        x[i] = s + h;
        double lp = f(ctx);
        x[i] = s - h;
        double lm = f(ctx);
        x[i] = s;
        double num = (lp - lm) / (2 * h);
        if (!(fabs(num - g[i]) <= tol * (1 + fabs(num)))) {
            print_error("%s[%zu]: analytic %.10g, numeric %.10g\n", what, i, g[i], num);
            fail();
        }
    }
}

/* ---- convolution ----------------------------------------------------------------------------- */

typedef struct conv_ctx {
    int N, C, H, W, OC, KS, pad, OH, OW;
    double *x, *w, *dout, *out, *scratch;
} conv_ctx;

static double conv_loss(void *p) {
    conv_ctx *c = p;
    nb_conv2d_forward_f64(c->out, c->scratch, 2, c->x, c->w, c->N, c->C, c->H, c->W, c->OC, c->KS,
                          c->pad, 0);
    return dot(c->out, c->dout, (size_t)c->N * c->OC * c->OH * c->OW);
}

/* Naive convolution in double. */
static void conv_naive(double *out, const double *x, const double *w, const conv_ctx *c) {
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++)
            for (int i = 0; i < c->OH; i++)
                for (int j = 0; j < c->OW; j++) {
                    double s = 0;
                    for (int ch = 0; ch < c->C; ch++)
                        for (int a = 0; a < c->KS; a++)
                            for (int b = 0; b < c->KS; b++) {
                                int ih = i + a - c->pad, iw = j + b - c->pad;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                s += w[((o * c->C + ch) * c->KS + a) * c->KS + b] *
                                     x[((n * c->C + ch) * c->H + ih) * c->W + iw];
                            }
                    out[((n * c->OC + o) * c->OH + i) * c->OW + j] = s;
                }
}

static void conv_case(int N, int C, int H, int W, int OC, int KS, int pad) {
    conv_ctx c = {N, C, H, W, OC, KS, pad, H + 2 * pad - KS + 1, W + 2 * pad - KS + 1, 0};
    size_t nx = (size_t)N * C * H * W, nw = (size_t)OC * C * KS * KS,
           no = (size_t)N * OC * c.OH * c.OW;
    size_t ss = nb_conv2d_scratch_f64(C, H, W, OC, KS, pad);
    c.x = malloc(sizeof(double) * nx);
    c.w = malloc(sizeof(double) * nw);
    c.dout = malloc(sizeof(double) * no);
    c.out = malloc(sizeof(double) * no);
    c.scratch = malloc(sizeof(double) * (ss * 2 + 1));
    double *ref = malloc(sizeof(double) * no), *dx = malloc(sizeof(double) * nx),
           *dw = malloc(sizeof(double) * nw);
    fill(c.x, nx, 1, 11);
    fill(c.w, nw, 1, 12);
    fill(c.dout, no, 1, 13);

    conv_loss(&c);
    conv_naive(ref, c.x, c.w, &c);
    for (size_t i = 0; i < no; i++)
        assert_close(c.out[i], ref[i], 1e-12, 1e-12);

    for (int acc = 0; acc < 2; acc++) {
        for (size_t i = 0; i < nx; i++)
            dx[i] = 0.5;
        for (size_t i = 0; i < nw; i++)
            dw[i] = 0.5;
        nb_conv2d_backward_f64(dx, dw, NULL, NULL, c.scratch, 2, c.dout, c.x, c.w, N, C, H, W, OC,
                               KS, pad, acc);
        for (size_t i = 0; i < nx; i++)
            dx[i] -= acc ? 0.5 : 0;
        for (size_t i = 0; i < nw; i++)
            dw[i] -= 0.5;
        check_fd("conv dinp", c.x, dx, nx, conv_loss, &c, 1e-4, 1e-8);
        check_fd("conv dw", c.w, dw, nw, conv_loss, &c, 1e-4, 1e-8);
    }

    /* float against double */
    float *xf = malloc(sizeof(float) * nx), *wf = malloc(sizeof(float) * nw),
          *of = malloc(sizeof(float) * no);
    float *sf = malloc(sizeof(float) * (nb_conv2d_scratch(C, H, W, OC, KS, pad) * 2 + 1));
    for (size_t i = 0; i < nx; i++)
        xf[i] = (float)c.x[i];
    for (size_t i = 0; i < nw; i++)
        wf[i] = (float)c.w[i];
    nb_conv2d_forward(of, sf, 2, xf, wf, N, C, H, W, OC, KS, pad, 0);
    for (size_t i = 0; i < no; i++)
        assert_close(of[i], ref[i], 1e-4, 1e-4);
    free(xf), free(wf), free(of), free(sf);
    free(c.x), free(c.w), free(c.dout), free(c.out), free(c.scratch), free(ref), free(dx), free(dw);
}

static void test_conv(void **state) {
    (void)state;
    conv_case(3, 2, 5, 5, 4, 3, 1);   /* 3x3 pad 1, grouped images (small maps) */
    conv_case(3, 2, 6, 5, 3, 3, 0);   /* pad 0, non-square */
    conv_case(2, 1, 16, 16, 2, 3, 1); /* one image per gemm (256 positions) */
    conv_case(3, 3, 16, 16, 2, 1, 0); /* 1x1 direct */
    conv_case(4, 3, 4, 4, 5, 1, 0);   /* 1x1 grouped */
    conv_case(5, 6, 1, 1, 3, 1, 0);   /* dense */
    conv_case(2, 2, 3, 3, 2, 5, 2);   /* kernel larger than half the map */
}

/* ---- pooling, GAP, dropout, noise --------------------------------------------------------------
 */

typedef struct pool_ctx {
    int N, C, H, W, gap;
    double *x, *dout, *out;
    unsigned char *arg;
} pool_ctx;

static double pool_loss(void *p) {
    pool_ctx *c = p;
    if (c->gap) {
        nb_gap_forward_f64(c->out, c->x, c->N, c->C, c->H * c->W);
        return dot(c->out, c->dout, (size_t)c->N * c->C);
    }
    nb_maxpool2_forward_f64(c->out, c->arg, c->x, c->N, c->C, c->H, c->W);
    return dot(c->out, c->dout, (size_t)c->N * c->C * (c->H / 2) * (c->W / 2));
}

static void test_pool_gap(void **state) {
    (void)state;
    for (int gap = 0; gap < 2; gap++)
        for (int odd = 0; odd < 2; odd++) {
            pool_ctx c = {2, 3, 6 + odd, 4 + odd, gap, 0};
            size_t nx = (size_t)c.N * c.C * c.H * c.W;
            size_t no = gap ? (size_t)c.N * c.C : (size_t)c.N * c.C * (c.H / 2) * (c.W / 2);
            c.x = malloc(sizeof(double) * nx);
            c.dout = malloc(sizeof(double) * no);
            c.out = malloc(sizeof(double) * no);
            c.arg = malloc(no);
            double *dx = malloc(sizeof(double) * nx);
            fill(c.x, nx, 1, 21);
            fill(c.dout, no, 1, 22);
            pool_loss(&c);
            for (size_t i = 0; i < nx; i++)
                dx[i] = gap ? 0 : 7; /* overwritten (acc 0) by maxpool */
            if (gap)
                nb_gap_backward_f64(dx, c.dout, c.N, c.C, c.H * c.W);
            else
                nb_maxpool2_backward_f64(dx, c.dout, c.arg, c.N, c.C, c.H, c.W, 0);
            check_fd(gap ? "gap" : "maxpool", c.x, dx, nx, pool_loss, &c, 1e-6, 1e-7);
            if (!gap) { /* values: the max of each 2x2 block */
                for (int pl = 0; pl < c.N * c.C; pl++)
                    for (int i = 0; i < c.H / 2; i++)
                        for (int j = 0; j < c.W / 2; j++) {
                            const double *b = c.x + (size_t)pl * c.H * c.W;
                            double m =
                                fmax(fmax(b[2 * i * c.W + 2 * j], b[2 * i * c.W + 2 * j + 1]),
                                     fmax(b[(2 * i + 1) * c.W + 2 * j],
                                          b[(2 * i + 1) * c.W + 2 * j + 1]));
                            assert_true(c.out[((size_t)pl * (c.H / 2) + i) * (c.W / 2) + j] == m);
                        }
            }
            free(c.x), free(c.dout), free(c.out), free(c.arg), free(dx);
        }
}

static void test_dropout_noise(void **state) {
    (void)state;
    const size_t n = 40000;
    const int rows = 8;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n),
          *mask = malloc(sizeof(float) * n), *y2 = malloc(sizeof(float) * n),
          *m2 = malloc(sizeof(float) * n), *dx = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0f + (float)(i % 7);
    nb_rng r, r2;
    nb_rng_seed(&r, 5, NB_STREAM_DROPOUT);
    r2 = r;
    nb_dropout_forward(y, mask, x, n, rows, 0.5, &r);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(mask[i] == 0.0f || mask[i] == 2.0f);
        assert_true(y[i] == x[i] * mask[i]);
        kept += mask[i] != 0;
    }
    /* 20000 expected, sd 100 */
    assert_true(kept > 19400 && kept < 20600);
    /* the mask does not depend on the thread count */
    omp_set_num_threads(1);
    nb_dropout_forward(y2, m2, x, n, rows, 0.5, &r2);
    omp_set_num_threads(2);
    assert_memory_equal(mask, m2, sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        dx[i] = 0.25f;
    nb_dropout_backward(dx, x, mask, n);
    for (size_t i = 0; i < n; i++)
        assert_true(dx[i] == 0.25f + x[i] * mask[i]);
    /* noise: mean 0, sd sigma */
    nb_gauss_noise_forward(y, x, n, rows, 0.15, &r);
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - x[i];
        s += d;
        ss += d * d;
    }
    assert_true(fabs(s / n) < 0.005);
    assert_close(sqrt(ss / n), 0.15, 0.005, 0);
    free(x), free(y), free(mask), free(y2), free(m2), free(dx);
}

/* ---- norms on maps -------------------------------------------------------------------------- */

typedef struct norm_ctx {
    nb_norm_kind kind;
    int N, C, S, gc, k, training;
    double alpha;
    nb_norm_cfg cfg;
    double *x, *g, *b, *dout, *out, *mean, *rstd, *rm, *rv, *rm0, *rv0;
} norm_ctx;

static void norm_fwd(norm_ctx *c) {
    switch (c->kind) {
    case NB_NORM_LAYER:
        nb_map_layernorm_forward_f64(c->out, c->mean, c->rstd, c->x, c->g, c->b, c->N, c->C, c->S,
                                     c->gc, c->alpha, &c->cfg);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        nb_map_rmsnorm_forward_f64(c->out, c->rstd, c->x, c->g, c->b, c->N, c->C, c->S, c->gc, c->k,
                                   c->alpha, &c->cfg);
        break;
    case NB_NORM_BATCH:
        memcpy(c->rm, c->rm0, sizeof(double) * c->C);
        memcpy(c->rv, c->rv0, sizeof(double) * c->C);
        nb_map_batchnorm_forward_f64(c->out, c->mean, c->rstd, c->rm, c->rv, c->x, c->g, c->b, c->N,
                                     c->C, c->S, c->training, c->alpha, &c->cfg);
        break;
    default:
        nb_map_affine_forward_f64(c->out, c->x, c->g, c->b, c->N, c->C, c->S, c->alpha);
    }
}

static double norm_loss(void *p) {
    norm_ctx *c = p;
    norm_fwd(c);
    return dot(c->out, c->dout, (size_t)c->N * c->C * c->S);
}

static void norm_case(nb_norm_kind kind, int gc_all, double alpha, int training, int eps_outside,
                      int p_floor) {
    norm_ctx c = {kind, 3, 4, 9, 1, 9, training, alpha, {0}, 0};
    nb_norm_cfg_default(&c.cfg, kind);
    c.cfg.eps = 1e-6;
    c.cfg.eps_outside = eps_outside;
    c.cfg.p = 0.125;
    c.cfg.p_floor = p_floor;
    c.gc = gc_all ? c.C : 1;
    int L = c.gc * c.S;
    c.k = kind == NB_NORM_PRMS ? nb_prms_k(L, c.cfg.p, p_floor) : L;
    size_t n = (size_t)c.N * c.C * c.S;
    double *buf = calloc(n * 4 + (size_t)c.C * 8 + (size_t)c.N * c.C * 2, sizeof(double));
    c.x = buf, c.dout = buf + n, c.out = buf + 2 * n;
    double *dx = buf + 3 * n;
    c.g = buf + 4 * n, c.b = c.g + c.C, c.rm = c.b + c.C, c.rv = c.rm + c.C, c.rm0 = c.rv + c.C,
    c.rv0 = c.rm0 + c.C;
    double *dg = c.rv0 + c.C, *db = dg + c.C;
    c.mean = db + c.C, c.rstd = c.mean + (size_t)c.N * c.C;
    fill(c.x, n, 1.5, 31 + kind);
    for (size_t i = 0; i < n; i++)
        c.x[i] += 0.3; /* a mean to remove */
    fill(c.g, (size_t)c.C, 0.5, 32);
    for (int i = 0; i < c.C; i++)
        c.g[i] += 1;
    fill(c.b, (size_t)c.C, 0.5, 33);
    fill(c.dout, n, 1, 34);
    for (int i = 0; i < c.C; i++)
        c.rm0[i] = 0.1 * i, c.rv0[i] = 1 + 0.5 * i;
    for (int acc = 0; acc < 2; acc++) {
        norm_fwd(&c);
        for (size_t i = 0; i < n; i++)
            dx[i] = 0.5;
        for (int i = 0; i < c.C; i++)
            dg[i] = db[i] = 0.5;
        switch (kind) {
        case NB_NORM_LAYER:
            nb_map_layernorm_backward_f64(dx, dg, db, NULL, NULL, c.dout, c.out, c.x, c.g, c.mean,
                                          c.rstd, c.N, c.C, c.S, c.gc, alpha, acc, &c.cfg);
            break;
        case NB_NORM_RMS:
        case NB_NORM_PRMS:
            nb_map_rmsnorm_backward_f64(dx, dg, db, NULL, NULL, c.dout, c.out, c.x, c.g, c.rstd,
                                        c.N, c.C, c.S, c.gc, c.k, alpha, acc, &c.cfg);
            break;
        case NB_NORM_BATCH:
            nb_map_batchnorm_backward_f64(dx, dg, db, NULL, NULL, c.dout, c.out, c.x, c.g, c.mean,
                                          c.rstd, c.N, c.C, c.S, training, alpha, acc);
            break;
        default:
            nb_map_affine_backward_f64(dx, dg, db, NULL, NULL, c.dout, c.out, c.x, c.g, c.N, c.C,
                                       c.S, alpha, acc);
        }
        for (size_t i = 0; i < n; i++)
            dx[i] -= acc ? 0.5 : 0;
        for (int i = 0; i < c.C; i++)
            dg[i] -= 0.5, db[i] -= 0.5;
        char what[64];
        snprintf(what, sizeof what, "%s gc%d a%g t%d o%d f%d", nb_norm_name(kind), c.gc, alpha,
                 training, eps_outside, p_floor);
        check_fd(what, c.x, dx, n, norm_loss, &c, 1e-6, 1e-6);
        check_fd(what, c.g, dg, (size_t)c.C, norm_loss, &c, 1e-6, 1e-6);
        check_fd(what, c.b, db, (size_t)c.C, norm_loss, &c, 1e-6, 1e-6);
    }
    if (kind == NB_NORM_BATCH && training) {
        /* running averages: 0.9 old + 0.1 batch, variance unbiased by N/(N-1) (N images) */
        norm_fwd(&c);
        for (int ch = 0; ch < c.C; ch++) {
            double s = 0, v = 0, cnt = (double)c.N * c.S;
            for (int i = 0; i < c.N; i++)
                for (int j = 0; j < c.S; j++)
                    s += c.x[((size_t)i * c.C + ch) * c.S + j];
            double mu = s / cnt;
            for (int i = 0; i < c.N; i++)
                for (int j = 0; j < c.S; j++) {
                    double d = c.x[((size_t)i * c.C + ch) * c.S + j] - mu;
                    v += d * d;
                }
            v /= cnt;
            assert_close(c.rm[ch], 0.9 * c.rm0[ch] + 0.1 * mu, 1e-12, 1e-10);
            assert_close(c.rv[ch], 0.9 * c.rv0[ch] + 0.1 * v * c.N / (c.N - 1), 1e-12, 1e-10);
        }
    }
    free(buf);
}

static void test_map_norms(void **state) {
    (void)state;
    const double alphas[] = {0.1, 1.0};
    for (int a = 0; a < 2; a++) {
        for (int gc_all = 0; gc_all < 2; gc_all++) {
            norm_case(NB_NORM_LAYER, gc_all, alphas[a], 1, 0, 0);
            norm_case(NB_NORM_LAYER, gc_all, alphas[a], 1, 1, 0);
            norm_case(NB_NORM_RMS, gc_all, alphas[a], 1, 0, 0);
            norm_case(NB_NORM_RMS, gc_all, alphas[a], 1, 1, 0);
            norm_case(NB_NORM_PRMS, gc_all, alphas[a], 1, 0, 0);
            norm_case(NB_NORM_PRMS, gc_all, alphas[a], 1, 0, 1);
            norm_case(NB_NORM_PRMS, gc_all, alphas[a], 1, 1, 0);
        }
        norm_case(NB_NORM_BATCH, 0, alphas[a], 1, 0, 0);
        norm_case(NB_NORM_BATCH, 0, alphas[a], 0, 0, 0);
        norm_case(NB_NORM_NONE, 0, alphas[a], 1, 0, 0);
    }
}

/* pRMS uses exactly the first k values of each row for its statistic. */
static void test_prms_first_k(void **state) {
    (void)state;
    enum { C = 2, S = 16 };
    double x[C * S], y[C * S], rstd[C], g[C] = {1, 1}, b[C] = {0, 0};
    fill(x, C * S, 1, 41);
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_PRMS);
    cfg.eps = 1e-6;
    nb_map_rmsnorm_forward_f64(y, rstd, x, g, b, 1, C, S, 1, 2, 1.0, &cfg);
    for (int c = 0; c < C; c++) {
        double m = (x[c * S] * x[c * S] + x[c * S + 1] * x[c * S + 1]) / 2;
        assert_close(rstd[c], 1 / sqrt(m + 1e-6), 1e-12, 1e-12);
        for (int i = 0; i < S; i++)
            assert_close(y[c * S + i], x[c * S + i] * rstd[c], 1e-12, 1e-12);
    }
}

/* ---- whole networks ----------------------------------------------------------------------------
 */

static const nb_cnn_spec tiny_net[] = {
    {NB_CNN_NOISE, 0, 0, 0, 0.15},  {NB_CNN_CONV, 3, 3, 1, 0}, {NB_CNN_POOL, 0, 0, 0, 0},
    {NB_CNN_DROPOUT, 0, 0, 0, 0.5}, {NB_CNN_CONV, 4, 3, 0, 0}, {NB_CNN_CONV, 4, 1, 0, 0},
    {NB_CNN_GAP, 0, 0, 0, 0},       {NB_CNN_CONV, 3, 1, 0, 0},
};
enum { TN = 5, TC = 2, TH = 8, TW = 8, TL = sizeof tiny_net / sizeof tiny_net[0] };

typedef struct net_ctx {
    nb_cnn_f64 m;
    double *x;
    int *y;
    nb_rng rng;
} net_ctx;

static double net_loss(void *p) {
    net_ctx *c = p;
    nb_rng r = c->rng; /* the same noise and dropout masks every time */
    return nb_cnn_forward_f64(&c->m, c->x, c->y, TN, 1, &r);
}

static void net_case(nb_norm_kind kind, int axes_chw, int exact) {
    net_ctx c;
    nb_norm_cfg norm;
    nb_norm_cfg_default(&norm, kind);
    norm.eps = 1e-6;
    norm.p = 0.125;
    nb_cnn_opts opts = {axes_chw, 1, 0.1};
    nb_rng init;
    nb_rng_seed(&init, 7, NB_STREAM_INIT);
    nb_err err = {0};
    assert_int_equal(
        nb_cnn_init_f64(&c.m, tiny_net, TL, TC, TH, TW, 3, &norm, &opts, TN, &init, &err), 0);
    if (exact) assert_int_equal(nb_cnn_exact_grads_f64(&c.m, &err), 0);
    size_t nx = (size_t)TN * TC * TH * TW;
    c.x = malloc(sizeof(double) * nx);
    int y[TN] = {0, 1, 2, 1, 0};
    c.y = y;
    fill(c.x, nx, 1, 51);
    nb_rng_seed(&c.rng, 8, NB_STREAM_DROPOUT);
    assert_int_equal(nb_cnn_data_init_f64(&c.m, c.x, TN, NULL, &err), 0);
    nb_cnn_zero_grad_f64(&c.m);
    net_loss(&c);
    nb_cnn_backward_f64(&c.m, c.y);
    nb_cnn_grads_finish_f64(&c.m);
    for (int t = 0; t < c.m.layout.count; t++) {
        const nb_tensor *T = &c.m.layout.t[t];
        if (!T->trainable) continue;
        char what[64];
        snprintf(what, sizeof what, "%s%s net %s", nb_norm_name(kind), exact ? " exact" : "",
                 T->name);
        check_fd(what, c.m.params + T->off, c.m.grads + T->off, T->n, net_loss, &c, 1e-6, 1e-5);
    }
    free(c.x);
    nb_cnn_free_f64(&c.m);
}

static void test_network_fd(void **state) {
    (void)state;
    /* every norm; DyT (the last kind) through its kernels, unfused */
    for (int k = 0; k <= NB_NORM_DYT; k++) {
        net_case((nb_norm_kind)k, 0, 0);
        net_case((nb_norm_kind)k, 0, 1); /* exact sums: the same gradients, other code paths */
    }
    net_case(NB_NORM_LAYER, 1, 0);
    net_case(NB_NORM_PRMS, 1, 1);
}

static void test_data_init(void **state) {
    (void)state;
    static const nb_cnn_spec net[] = {
        {NB_CNN_CONV, 4, 3, 1, 0}, {NB_CNN_GAP, 0, 0, 0, 0}, {NB_CNN_CONV, 3, 1, 0, 0}};
    for (int kind = NB_NORM_NONE; kind <= NB_NORM_WEIGHT; kind += NB_NORM_WEIGHT) {
        nb_norm_cfg norm;
        nb_norm_cfg_default(&norm, (nb_norm_kind)kind);
        nb_cnn_opts opts = {0, 1, 0.1};
        nb_rng init;
        nb_rng_seed(&init, 3, NB_STREAM_INIT);
        nb_err err = {0};
        nb_cnn m;
        const int B = 20;
        assert_int_equal(nb_cnn_init(&m, net, 3, 3, 6, 6, 3, &norm, &opts, B, &init, &err), 0);
        float *x = malloc(sizeof(float) * B * 3 * 36);
        nb_rng r;
        nb_rng_seed(&r, 4, NB_STREAM_SYNTH);
        for (int i = 0; i < B * 3 * 36; i++)
            x[i] = (float)(2 * nb_rng_normal(&r) + 1);
        assert_int_equal(nb_cnn_data_init(&m, x, B, NULL, &err), 0);
        nb_cnn_forward(&m, x, NULL, B, 0, NULL);
        /* z·g + b of the first layer: W_eff (with the found g) applied, then b */
        const float *z = m.L[0].z, *b = m.params + m.L[0].b;
        for (int o = 0; o < 4; o++) {
            double s = 0, ss = 0;
            for (int n = 0; n < B; n++)
                for (int i = 0; i < 36; i++) {
                    double v = z[((size_t)n * 4 + o) * 36 + i] + b[o];
                    s += v;
                    ss += v * v;
                }
            double mu = s / (B * 36);
            assert_close(mu, 0, 1e-4, 0);
            assert_close(sqrt(ss / (B * 36) - mu * mu), 1, 1e-3, 0);
        }
        free(x);
        nb_cnn_free(&m);
    }
}

/* The data-dependent init pass as the WN code's train.py runs it: the Gaussian noise and the
 * dropout layers on (init=True without deterministic=True). Its g differs from the
 * deterministic pass's on the same seed, and both equal an independent computation
 * (tests/ref/ref_cnn_init.py) fed with the noise and masks this pass draws, which the test
 * reproduces from the same stream and dumps under NORMBENCH_REF_DUMP. */
static const nb_cnn_spec init_net[] = {
    {NB_CNN_NOISE, 0, 0, 0, 0.15},  {NB_CNN_CONV, 4, 3, 1, 0}, {NB_CNN_POOL, 0, 0, 0, 0},
    {NB_CNN_DROPOUT, 0, 0, 0, 0.5}, {NB_CNN_CONV, 5, 3, 1, 0}, {NB_CNN_GAP, 0, 0, 0, 0},
    {NB_CNN_CONV, 3, 1, 0, 0}};
enum { IN = 6, IC = 3, IH = 6, IW = 6, IL = sizeof init_net / sizeof init_net[0] };
static const int init_convs[] = {1, 4, 6};

static void init_model(nb_cnn_f64 *m, nb_norm_kind kind) {
    nb_norm_cfg norm;
    nb_norm_cfg_default(&norm, kind);
    nb_cnn_opts opts = {0, 1, 0.1};
    nb_rng init;
    nb_rng_seed(&init, 21, NB_STREAM_INIT);
    nb_err err = {0};
    assert_int_equal(nb_cnn_init_f64(m, init_net, IL, IC, IH, IW, 3, &norm, &opts, IN, &init, &err),
                     0);
}

static void test_data_init_pass(void **state) {
    (void)state;
    const size_t nx = (size_t)IN * IC * IH * IW, nd = (size_t)IN * 4 * 3 * 3;
    double *x = malloc(sizeof(double) * nx), *noise = calloc(nx, sizeof(double)),
           *mask = malloc(sizeof(double) * nd), *ones = malloc(sizeof(double) * nd);
    assert_true(x && noise && mask && ones);
    fill(x, nx, 1, 77);
    /* the draws of the pass: noise on the input (n values, one row per image), then dropout
     * after the first pooling (4 channels of 3x3), from one stream in layer order */
    nb_rng draws;
    nb_rng_seed(&draws, 5, NB_STREAM_SYNTH);
    nb_gauss_noise_forward_f64(noise, noise, nx, IN, 0.15, &draws);
    for (size_t i = 0; i < nd; i++)
        ones[i] = 1;
    nb_dropout_forward_f64(ones, mask, ones, nd, IN, 0.5, &draws);
    FILE *dump = ref_dump_open("cnn_init_draws.bin");
    ref_dump(dump, "x", x, nx);
    ref_dump(dump, "noise", noise, nx);
    ref_dump(dump, "mask", mask, nd);
    ref_file rf = {0};
    int have_ref = dump ? 0 : ref_load(&rf, "cnn_init.bin") == 0;
    if (!dump && !have_ref) fail_msg("tests/ref/cnn_init.bin missing");
    for (int kind = NB_NORM_NONE; kind <= NB_NORM_WEIGHT; kind += NB_NORM_WEIGHT) {
        const char *kn = nb_norm_name((nb_norm_kind)kind);
        nb_cnn_f64 a, b;
        init_model(&a, (nb_norm_kind)kind);
        init_model(&b, (nb_norm_kind)kind);
        for (int c = 0; c < 3; c++) {
            const nb_cnn_layer_f64 *L = &a.L[init_convs[c]];
            char name[64];
            snprintf(name, sizeof name, "%s.w%d", kn, c);
            ref_dump(dump, name, a.params + L->w, (size_t)L->OC * L->C * L->spec.ks * L->spec.ks);
        }
        nb_rng r;
        nb_rng_seed(&r, 5, NB_STREAM_SYNTH);
        nb_err err = {0};
        assert_int_equal(nb_cnn_data_init_f64(&a, x, IN, &r, &err), 0);
        assert_int_equal(nb_cnn_data_init_f64(&b, x, IN, NULL, &err), 0);
        /* the noise and dropout change every layer's statistics, the first one's too */
        for (int c = 0; c < 3; c++) {
            const nb_cnn_layer_f64 *L = &a.L[init_convs[c]];
            for (int o = 0; o < L->OC; o++)
                assert_true(fabs(a.params[L->g + o] - b.params[L->g + o]) >
                            1e-4 * fabs(b.params[L->g + o]));
        }
        for (int pass = 0; pass < 2 && have_ref; pass++) {
            const nb_cnn_f64 *m = pass ? &b : &a;
            for (int c = 0; c < 3; c++) {
                const nb_cnn_layer_f64 *L = &m->L[init_convs[c]];
                for (int gb = 0; gb < 2; gb++) {
                    char name[64];
                    snprintf(name, sizeof name, "%s.%s.%c%d", kn, pass ? "deterministic" : "train",
                             gb ? 'b' : 'g', c);
                    const ref_tensor *t = ref_get(&rf, name);
                    if (!t) fail_msg("tests/ref/cnn_init.bin has no tensor '%s'", name);
                    assert_int_equal((int)t->n, L->OC);
                    for (int o = 0; o < L->OC; o++)
                        assert_close(m->params[(gb ? L->b : L->g) + o], t->data[o], 1e-12, 1e-10);
                }
            }
        }
        nb_cnn_free_f64(&a);
        nb_cnn_free_f64(&b);
    }
    if (dump) fclose(dump);
    if (have_ref) {
        /* the file was made from these very draws */
        const ref_tensor *t = ref_get(&rf, "noise");
        assert_non_null(t);
        for (size_t i = 0; i < nx; i++)
            assert_close(noise[i], t->data[i], 0, 0);
        ref_free(&rf);
    }
    free(x);
    free(noise);
    free(mask);
    free(ones);
}

/* The float network: same gradients run to run (fixed thread count). */
static void test_network_deterministic(void **state) {
    (void)state;
    nb_norm_cfg norm;
    nb_norm_cfg_default(&norm, NB_NORM_BATCH);
    nb_cnn_opts opts = {0, 1, 0.1};
    float *g1 = NULL;
    for (int rep = 0; rep < 2; rep++) {
        nb_rng init, drop;
        nb_rng_seed(&init, 9, NB_STREAM_INIT);
        nb_rng_seed(&drop, 9, NB_STREAM_DROPOUT);
        nb_err err = {0};
        nb_cnn m;
        assert_int_equal(
            nb_cnn_init(&m, tiny_net, TL, TC, TH, TW, 3, &norm, &opts, TN, &init, &err), 0);
        float x[TN * TC * TH * TW];
        for (int i = 0; i < TN * TC * TH * TW; i++)
            x[i] = (float)sin(i * 0.37);
        int y[TN] = {0, 1, 2, 0, 1};
        nb_cnn_zero_grad(&m);
        double loss = nb_cnn_forward(&m, x, y, TN, 1, &drop);
        assert_true(isfinite(loss));
        nb_cnn_backward(&m, y);
        if (rep == 0) {
            g1 = malloc(sizeof(float) * m.layout.total);
            memcpy(g1, m.grads, sizeof(float) * m.layout.total);
        } else {
            assert_memory_equal(g1, m.grads, sizeof(float) * m.layout.total);
        }
        nb_cnn_free(&m);
    }
    free(g1);
}

/* Exact sums (nb_cnn_exact_grads): a batch split into shards (row0, grad_rows), each shard's
 * sums in double added, gives bit for bit the float gradients of the whole batch in one pass,
 * and the same outputs; for every norm whose statistics stay within an image. The net has maps
 * whose float path groups images into one gemm (6x6) and the dense layer: OpenBLAS's kernels,
 * chosen by a gemm's shape, round an image's values differently when it comes with fewer. */
static const nb_cnn_spec split_net[] = {
    {NB_CNN_NOISE, 0, 0, 0, 0.15},  {NB_CNN_CONV, 16, 3, 1, 0}, {NB_CNN_POOL, 0, 0, 0, 0},
    {NB_CNN_DROPOUT, 0, 0, 0, 0.5}, {NB_CNN_CONV, 24, 3, 0, 0}, {NB_CNN_CONV, 24, 1, 0, 0},
    {NB_CNN_GAP, 0, 0, 0, 0},       {NB_CNN_CONV, 10, 1, 0, 0},
};
enum { SN = 30, SC = 3, SH = 16, SL = sizeof split_net / sizeof split_net[0] };

static void test_network_split(void **state) {
    (void)state;
    static const int cuts[][4] = {{0, SN}, {0, 15, SN}, {0, 10, 20, SN}, {0, 7, 19, SN}};
    static const int ncut[] = {2, 3, 4, 4};
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_WEIGHT, NB_NORM_LAYER, NB_NORM_RMS,
                                  NB_NORM_PRMS};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        nb_norm_cfg norm;
        nb_norm_cfg_default(&norm, kinds[k]);
        norm.eps = 1e-6;
        norm.p = 0.25;
        nb_cnn_opts opts = {0, 1, 0.1};
        static float x[SN * SC * SH * SH], probs[SN * 10];
        float *g0 = NULL;
        int y[SN];
        for (int i = 0; i < SN * SC * SH * SH; i++)
            x[i] = (float)sin(i * 0.37 + (double)k);
        for (int i = 0; i < SN; i++)
            y[i] = i % 10;
        for (size_t cv = 0; cv < sizeof ncut / sizeof ncut[0]; cv++) {
            nb_rng init;
            nb_rng_seed(&init, 9, NB_STREAM_INIT);
            nb_err err = {0};
            nb_cnn m;
            assert_int_equal(
                nb_cnn_init(&m, split_net, SL, SC, SH, SH, 10, &norm, &opts, SN, &init, &err), 0);
            assert_int_equal(nb_cnn_exact_grads(&m, &err), 0);
            assert_int_equal(nb_cnn_data_init(&m, x, SN, NULL, &err), 0);
            double *sum = calloc(m.nacc, sizeof(double));
            assert_non_null(sum);
            for (int s = 0; s + 1 < ncut[cv]; s++) {
                int lo = cuts[cv][s], hi = cuts[cv][s + 1];
                nb_rng drop;
                nb_rng_seed(&drop, 9, NB_STREAM_DROPOUT);
                nb_cnn_zero_grad(&m);
                m.row0 = lo;
                m.grad_rows = SN;
                double loss =
                    nb_cnn_forward(&m, x + (size_t)lo * SC * SH * SH, y + lo, hi - lo, 1, &drop);
                assert_true(isfinite(loss));
                if (cv > 0)
                    for (int i = 0; i < (hi - lo) * 10; i++)
                        if (m.probs[i] != probs[lo * 10 + i])
                            fail_msg("%s: cut %zu, probs[%d] %.9g, one pass %.9g",
                                     nb_norm_name(kinds[k]), cv, lo * 10 + i, m.probs[i],
                                     probs[lo * 10 + i]);
                if (cv == 0) memcpy(probs, m.probs, sizeof probs);
                nb_cnn_backward(&m, y + lo);
                for (size_t i = 0; i < m.nacc; i++)
                    sum[i] += m.gacc[i];
            }
            nb_cnn_zero_grad(&m);
            memcpy(m.gacc, sum, sizeof(double) * m.nacc);
            nb_cnn_grads_finish(&m);
            if (cv == 0) {
                g0 = malloc(sizeof(float) * m.layout.total);
                assert_non_null(g0);
                memcpy(g0, m.grads, sizeof(float) * m.layout.total);
                double l1 = 0;
                for (size_t i = 0; i < m.layout.total; i++)
                    l1 += fabs(g0[i]);
                assert_true(l1 > 0);
            } else {
                for (size_t i = 0; i < m.layout.total; i++)
                    if (m.grads[i] != g0[i])
                        fail_msg("%s: cut %zu, gradient %zu is %.9g, one pass %.9g",
                                 nb_norm_name(kinds[k]), cv, i, m.grads[i], g0[i]);
            }
            free(sum);
            nb_cnn_free(&m);
        }
        free(g0);
    }
}

/* ---- PyTorch references ------------------------------------------------------------------------
 */

static void cmp(const ref_tensor *t, const double *v, size_t n, double tol) {
    assert_non_null(t);
    assert_int_equal(t->n, n);
    for (size_t i = 0; i < n; i++)
        assert_close(v[i], t->data[i], tol, tol);
}

static void test_reference(void **state) {
    (void)state;
    ref_file rf = {0};
    assert_int_equal(ref_load(&rf, "conv.bin"), 0);
    /* conv: x (2,3,6,6), w (4,3,3,3), pad 1 */
    const ref_tensor *x = ref_get(&rf, "conv_x"), *w = ref_get(&rf, "conv_w"),
                     *dout = ref_get(&rf, "conv_dout");
    assert_non_null(x);
    assert_non_null(w);
    assert_non_null(dout);
    double out[2 * 4 * 36], dx[2 * 3 * 36] = {0}, dw[4 * 27] = {0};
    double *scr = malloc(sizeof(double) * (nb_conv2d_scratch_f64(3, 6, 6, 4, 3, 1) * 2 + 1));
    nb_conv2d_forward_f64(out, scr, 2, x->data, w->data, 2, 3, 6, 6, 4, 3, 1, 0);
    cmp(ref_get(&rf, "conv_out"), out, 2 * 4 * 36, 1e-10);
    nb_conv2d_backward_f64(dx, dw, NULL, NULL, scr, 2, dout->data, x->data, w->data, 2, 3, 6, 6, 4,
                           3, 1, 1);
    cmp(ref_get(&rf, "conv_dx"), dx, 2 * 3 * 36, 1e-10);
    cmp(ref_get(&rf, "conv_dw"), dw, 4 * 27, 1e-10);
    free(scr);

    /* max pool, leaky relu fused norms: x (2,4,6,6), g, b (4), dout */
    const ref_tensor *nx = ref_get(&rf, "norm_x"), *ng = ref_get(&rf, "norm_g"),
                     *nbias = ref_get(&rf, "norm_b"), *nd = ref_get(&rf, "norm_dout");
    assert_non_null(nx);
    assert_non_null(ng);
    assert_non_null(nbias);
    assert_non_null(nd);
    const int N = 2, C = 4, S = 36;
    {
        double po[2 * 4 * 9], pdx[2 * 4 * 36];
        unsigned char arg[2 * 4 * 9];
        nb_maxpool2_forward_f64(po, arg, nx->data, N, C, 6, 6);
        cmp(ref_get(&rf, "pool_out"), po, 2 * 4 * 9, 1e-12);
        const ref_tensor *pd = ref_get(&rf, "pool_dout");
        assert_non_null(pd);
        nb_maxpool2_backward_f64(pdx, pd->data, arg, N, C, 6, 6, 0);
        cmp(ref_get(&rf, "pool_dx"), pdx, 2 * 4 * 36, 1e-12);
    }
    const char *names[] = {"ln", "ln_chw", "rms", "rms_chw", "prms", "bn", "bn_eval"};
    for (int v = 0; v < 7; v++) {
        double o[2 * 4 * 36], d[2 * 4 * 36], dg[4] = {0}, db[4] = {0}, mean[8], rstd[8];
        double rm[4] = {0.1, -0.2, 0.3, 0.0}, rv[4] = {1.0, 0.5, 2.0, 1.5};
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
        cfg.eps = 1e-6;
        int gc = strstr(names[v], "chw") ? C : 1;
        if (v < 2) {
            nb_map_layernorm_forward_f64(o, mean, rstd, nx->data, ng->data, nbias->data, N, C, S,
                                         gc, 0.1, &cfg);
            nb_map_layernorm_backward_f64(d, dg, db, NULL, NULL, nd->data, o, nx->data, ng->data,
                                          mean, rstd, N, C, S, gc, 0.1, 0, &cfg);
        } else if (v < 5) {
            int k = v == 4 ? nb_prms_k(S, 0.125, 0) : gc * S;
            nb_map_rmsnorm_forward_f64(o, rstd, nx->data, ng->data, nbias->data, N, C, S, gc, k,
                                       0.1, &cfg);
            nb_map_rmsnorm_backward_f64(d, dg, db, NULL, NULL, nd->data, o, nx->data, ng->data,
                                        rstd, N, C, S, gc, k, 0.1, 0, &cfg);
        } else {
            int tr = v == 5;
            nb_map_batchnorm_forward_f64(o, mean, rstd, rm, rv, nx->data, ng->data, nbias->data, N,
                                         C, S, tr, 0.1, &cfg);
            nb_map_batchnorm_backward_f64(d, dg, db, NULL, NULL, nd->data, o, nx->data, ng->data,
                                          mean, rstd, N, C, S, tr, 0.1, 0);
        }
        char nm[64];
        snprintf(nm, sizeof nm, "%s_out", names[v]);
        cmp(ref_get(&rf, nm), o, (size_t)N * C * S, 1e-10);
        snprintf(nm, sizeof nm, "%s_dx", names[v]);
        cmp(ref_get(&rf, nm), d, (size_t)N * C * S, 1e-10);
        snprintf(nm, sizeof nm, "%s_dg", names[v]);
        cmp(ref_get(&rf, nm), dg, C, 1e-10);
        snprintf(nm, sizeof nm, "%s_db", names[v]);
        cmp(ref_get(&rf, nm), db, C, 1e-10);
        if (v == 5) {
            snprintf(nm, sizeof nm, "bn_running_mean");
            cmp(ref_get(&rf, nm), rm, C, 1e-12);
            snprintf(nm, sizeof nm, "bn_running_var");
            cmp(ref_get(&rf, nm), rv, C, 1e-12);
        }
    }
    ref_free(&rf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool_gap),
        cmocka_unit_test(test_dropout_noise),
        cmocka_unit_test(test_map_norms),
        cmocka_unit_test(test_prms_first_k),
        cmocka_unit_test(test_network_fd),
        cmocka_unit_test(test_data_init),
        cmocka_unit_test(test_data_init_pass),
        cmocka_unit_test(test_network_deterministic),
        cmocka_unit_test(test_network_split),
        cmocka_unit_test(test_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
