/* tests/test_ops.c — dense, activations, softmax cross-entropy, Adam, clipping and the RNG.
 *
 * 1. Central finite differences in double (the _f64 build of the very kernels that train).
 * 2. Adam for two steps against values computed by hand (every bias x eps variant).
 * 3. Clipping (global and per tensor; non-trainable tensors untouched).
 * 4. Determinism: 1 thread vs 2 threads bit-identical on the parallel paths.
 * 5. The RNG's statistics and reproducibility.
 * 6. Reference tensors from PyTorch (tests/ref/ops.bin, written by tests/ref/ref_ops.py), for
 *    the float build (rtol ~1e-5) and the double build (~1e-10). A missing file fails.
 *
 * The reference tests are written once over `treal` and F(name): this file includes itself
 * twice (TEST_OPS_PASS 1: float, 2: double), the way nn/ compiles its generic files twice. */
#ifndef TEST_OPS_PASS

#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"

#include <omp.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static void fill_normal(double *x, size_t n, double scale, uint64_t seed) {
    nb_rng r;
    nb_rng_seed(&r, seed, NB_STREAM_SYNTH);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * nb_rng_normal(&r);
}

static void fill_normal_f(float *x, size_t n, double scale, uint64_t seed) {
    nb_rng r;
    nb_rng_seed(&r, seed, NB_STREAM_SYNTH);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * nb_rng_normal(&r));
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ---- dense: finite differences ----------------------------------------------------------- */

enum { DB = 4, DC = 6, DOC = 5 };

/* L = sum(dout * dense(inp, w, bias)) */
static double dense_loss(const double *inp, const double *w, const double *bias,
                         const double *dout) {
    double out[DB * DOC];
    nb_dense_forward_f64(out, inp, w, bias, DB, DC, DOC);
    return dot(out, dout, DB * DOC);
}

static void test_dense_fd(void **state) {
    (void)state;
    double inp[DB * DC], w[DOC * DC], bias[DOC], dout[DB * DOC];
    fill_normal(inp, DB * DC, 1.0, 1);
    fill_normal(w, DOC * DC, 1.0, 2);
    fill_normal(bias, DOC, 1.0, 3);
    fill_normal(dout, DB * DOC, 1.0, 4);

    /* Gradients start at 0.5 so that accumulation (+=) is checked too. */
    double dinp[DB * DC], dw[DOC * DC], dbias[DOC];
    for (int i = 0; i < DB * DC; i++)
        dinp[i] = 0.5;
    for (int i = 0; i < DOC * DC; i++)
        dw[i] = 0.5;
    for (int i = 0; i < DOC; i++)
        dbias[i] = 0.5;
    nb_dense_backward_f64(dinp, dw, dbias, dout, inp, w, DB, DC, DOC);

    const double h = 1e-4; /* dense is linear in each argument: no truncation error */
    struct {
        double *x, *g;
        int n;
    } cases[] = {{inp, dinp, DB * DC}, {w, dw, DOC * DC}, {bias, dbias, DOC}};
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < cases[c].n; i++) {
            double x0 = cases[c].x[i];
            cases[c].x[i] = x0 + h;
            double lp = dense_loss(inp, w, bias, dout);
            cases[c].x[i] = x0 - h;
            double lm = dense_loss(inp, w, bias, dout);
            cases[c].x[i] = x0;
            assert_close(cases[c].g[i] - 0.5, (lp - lm) / (2 * h), 1e-8, 1e-7);
        }

    /* No bias forward equals bias-zero forward; NULL dinp/dbias leave dw unchanged. */
    double zero[DOC] = {0}, o1[DB * DOC], o2[DB * DOC];
    nb_dense_forward_f64(o1, inp, w, NULL, DB, DC, DOC);
    nb_dense_forward_f64(o2, inp, w, zero, DB, DC, DOC);
    for (int i = 0; i < DB * DOC; i++)
        assert_close(o1[i], o2[i], 1e-14, 1e-14);
    double dw2[DOC * DC];
    for (int i = 0; i < DOC * DC; i++)
        dw2[i] = 0.5;
    nb_dense_backward_f64(NULL, dw2, NULL, dout, inp, w, DB, DC, DOC);
    for (int i = 0; i < DOC * DC; i++)
        assert_close(dw2[i], dw[i], 1e-14, 1e-14);
}

/* ---- activations: finite differences ------------------------------------------------------ */

static void act_fwd(int k, double *out, const double *x, size_t n) {
    switch (k) {
    case NB_ACT_RELU:
        nb_relu_forward_f64(out, x, n);
        break;
    case NB_ACT_LEAKY_RELU:
        nb_leaky_relu_forward_f64(out, x, n, 0.1);
        break;
    case NB_ACT_TANH:
        nb_tanh_forward_f64(out, x, n);
        break;
    default:
        nb_sigmoid_forward_f64(out, x, n);
        break;
    }
}

static void act_bwd(int k, double *dinp, const double *dout, const double *out, size_t n) {
    switch (k) {
    case NB_ACT_RELU:
        nb_relu_backward_f64(dinp, dout, out, n);
        break;
    case NB_ACT_LEAKY_RELU:
        nb_leaky_relu_backward_f64(dinp, dout, out, n, 0.1);
        break;
    case NB_ACT_TANH:
        nb_tanh_backward_f64(dinp, dout, out, n);
        break;
    default:
        nb_sigmoid_backward_f64(dinp, dout, out, n);
        break;
    }
}

static void test_act_fd(void **state) {
    (void)state;
    enum { N = 40 };
    double x[N], dout[N], out[N], dinp[N], xp[N], yp[N];
    fill_normal(x, N, 2.0, 5);
    fill_normal(dout, N, 1.0, 6);
    for (int i = 0; i < N; i++) /* away from relu's kink: |x| >= 0.1 */
        if (fabs(x[i]) < 0.1) x[i] = x[i] < 0 ? x[i] - 0.1 : x[i] + 0.1;
    const double h = 1e-6;
    for (int k = 0; k < NB_ACT_COUNT; k++) {
        act_fwd(k, out, x, N);
        for (int i = 0; i < N; i++)
            dinp[i] = 0.25;
        act_bwd(k, dinp, dout, out, N);
        for (int i = 0; i < N; i++) {
            memcpy(xp, x, sizeof x);
            xp[i] = x[i] + h;
            act_fwd(k, yp, xp, N);
            double lp = dot(yp, dout, N);
            xp[i] = x[i] - h;
            act_fwd(k, yp, xp, N);
            double lm = dot(yp, dout, N);
            assert_close(dinp[i] - 0.25, (lp - lm) / (2 * h), 1e-8, 1e-6);
        }
        /* In place gives the same output. */
        memcpy(xp, x, sizeof x);
        act_fwd(k, xp, xp, N);
        for (int i = 0; i < N; i++)
            assert_true(xp[i] == out[i]);
    }
    /* relu at the kink: gradient 0; NaN propagates through the forward. */
    double z = 0, oz, dz = 0, one = 1, nanv = NAN, onan;
    nb_relu_forward_f64(&oz, &z, 1);
    nb_relu_backward_f64(&dz, &one, &oz, 1);
    assert_true(oz == 0 && dz == 0);
    nb_relu_forward_f64(&onan, &nanv, 1);
    assert_true(isnan(onan));
    /* sigmoid saturates without NaN. */
    double big[2] = {-800, 800}, sb[2];
    nb_sigmoid_forward_f64(sb, big, 2);
    assert_true(sb[0] == 0 && sb[1] == 1);
}

/* ---- softmax cross-entropy ------------------------------------------------------------------ */

static void test_xent_fd(void **state) {
    (void)state;
    enum { B = 5, V = 7 };
    double logits[B * V], probs[B * V], losses[B], d[B * V];
    int tg[B] = {0, 6, 3, 3, 1};
    fill_normal(logits, B * V, 2.0, 7);
    double loss = nb_softmax_xent_forward_f64(probs, losses, logits, tg, B, V);
    double mean = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int j = 0; j < V; j++)
            s += probs[b * V + j];
        assert_close(s, 1.0, 1e-14, 0);
        assert_close(losses[b], -log(probs[b * V + tg[b]]), 1e-12, 1e-12);
        mean += losses[b] / B;
    }
    assert_close(loss, mean, 1e-14, 1e-14);
    for (int i = 0; i < B * V; i++)
        d[i] = -1.0;
    nb_softmax_xent_backward_f64(d, probs, tg, B, V);
    const double h = 1e-5;
    for (int i = 0; i < B * V; i++) {
        double x0 = logits[i];
        logits[i] = x0 + h;
        double lp = nb_softmax_xent_forward_f64(probs, NULL, logits, tg, B, V);
        logits[i] = x0 - h;
        double lm = nb_softmax_xent_forward_f64(probs, NULL, logits, tg, B, V);
        logits[i] = x0;
        assert_close(d[i] + 1.0, (lp - lm) / (2 * h), 1e-9, 1e-6);
    }
}

static void test_xent_large_logits(void **state) {
    (void)state;
    /* Rows of +-1000: exp would overflow or underflow without the max subtracted, and
     * log(p[target]) would be log(0) without the log-sum-exp. */
    const double lg[3 * 3] = {1000, -1000, 0, -1000, 1000, 999, 1000, 1000, -1000};
    const int tg[3] = {1, 2, 0};
    double pr[9], ls[3];
    double loss = nb_softmax_xent_forward_f64(pr, ls, lg, tg, 3, 3);
    assert_true(isfinite(loss));
    assert_close(ls[0], 2000.0, 1e-9, 0);
    assert_close(ls[1], 1.0 + log(1.0 + exp(-1.0)), 1e-12, 0);
    assert_close(ls[2], log(2.0), 1e-12, 0);
    float lgf[9], prf[9], lsf[3];
    for (int i = 0; i < 9; i++)
        lgf[i] = (float)lg[i];
    double lossf = nb_softmax_xent_forward(prf, lsf, lgf, tg, 3, 3);
    assert_true(isfinite(lossf));
    assert_close(lossf, loss, 1e-3, 1e-6);
    float df[9] = {0};
    nb_softmax_xent_backward(df, prf, tg, 3, 3);
    for (int i = 0; i < 9; i++)
        assert_true(isfinite(df[i]));
    assert_close(df[1], -1.0 / 3, 1e-7, 0); /* p = 0 at the target */
}

/* ---- Adam: two steps by hand ------------------------------------------------------------- */

/* p0 = 1, lr 0.1, b1 0.9, b2 0.999, eps 1e-3 (large, so its placement shows), g = 0.5 then
 * -0.25. By hand: m1 = 0.05, v1 = 0.00025; m2 = 0.02, v2 = 0.00031225. lr_t at t=1 is
 * sqrt(0.001) (standard), 0.1 (none), 0.1*sqrt(0.999)/0.9 (kiros); e.g. standard, eps outside:
 * 1 - 0.0316228*0.05/(0.0158114+0.001) = 0.905948. */
static const struct {
    nb_adam_bias bias;
    int inside;
    double p1, p2;
} adam_hand[] = {
    {NB_ADAM_BIAS_STANDARD, 0, 0.905948348715198, 0.880741149959403},
    {NB_ADAM_BIAS_STANDARD, 1, 0.955278640450004, 0.942286685647193},
    {NB_ADAM_BIAS_NONE, 0, 0.702582564240123, 0.595462261929618},
    {NB_ADAM_BIAS_NONE, 1, 0.858578643762691, 0.803368140621734},
    {NB_ADAM_BIAS_KIROS, 0, 0.669701455726425, 0.561499184261435},
    {NB_ADAM_BIAS_KIROS, 1, 0.842943746808137, 0.787175589701371},
};

static void test_adam_hand(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof adam_hand / sizeof adam_hand[0]; c++) {
        nb_adam_cfg cfg;
        nb_adam_cfg_default(&cfg);
        cfg.lr = 0.1;
        cfg.eps = 1e-3;
        cfg.bias = adam_hand[c].bias;
        cfg.eps_inside = adam_hand[c].inside;
        /* 21 copies: covers the vector body and the scalar tail */
        enum { N = 21 };
        double p[N], m[N] = {0}, v[N] = {0}, g[N];
        float pf[N], mf[N] = {0}, vf[N] = {0}, gf[N];
        for (int i = 0; i < N; i++)
            p[i] = pf[i] = 1;
        for (int t = 1; t <= 2; t++) {
            for (int i = 0; i < N; i++)
                g[i] = gf[i] = t == 1 ? 0.5f : -0.25f;
            nb_adam_step_f64(p, g, m, v, N, t, &cfg);
            nb_adam_step(pf, gf, mf, vf, N, t, &cfg);
            double want = t == 1 ? adam_hand[c].p1 : adam_hand[c].p2;
            for (int i = 0; i < N; i++) {
                assert_close(p[i], want, 1e-13, 1e-13);
                assert_close(pf[i], want, 1e-6, 1e-6);
            }
        }
        for (int i = 0; i < N; i++) {
            assert_close(m[i], 0.02, 1e-15, 1e-13);
            assert_close(v[i], 0.00031225, 1e-17, 1e-13);
        }
    }
}

/* The parallel vector path equals a plain scalar loop bit for bit, and 1 thread equals 2. */
static void test_adam_parallel_exact(void **state) {
    (void)state;
    const size_t n = (1 << 17) + 13;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
    assert_non_null(p && g && m && v && p2 && m2 && v2);
    fill_normal_f(p, n, 1.0, 8);
    fill_normal_f(g, n, 0.1, 9);
    for (int inside = 0; inside < 2; inside++) {
        nb_adam_cfg cfg;
        nb_adam_cfg_default(&cfg);
        cfg.eps_inside = inside;
        memcpy(p2, p, n * 4);
        for (size_t i = 0; i < n; i++)
            m[i] = v[i] = m2[i] = v2[i] = 0;
        for (long t = 1; t <= 3; t++) {
            omp_set_num_threads(t == 2 ? 1 : 2);
            nb_adam_step(p, g, m, v, n, t, &cfg);
            float lr_t = (float)(cfg.lr * sqrt(1 - pow(cfg.beta2, (double)t)) /
                                 (1 - pow(cfg.beta1, (double)t)));
            float b1 = 0.9f, omb1 = (float)(1 - 0.9), b2 = 0.999f, omb2 = (float)(1 - 0.999),
                  eps = 1e-8f;
            for (size_t i = 0; i < n; i++) {
                float gi = g[i];
                float mi = b1 * m2[i] + omb1 * gi;
                float vi = b2 * v2[i] + omb2 * gi * gi;
                m2[i] = mi;
                v2[i] = vi;
                float den = inside ? sqrtf(vi + eps) : sqrtf(vi) + eps;
                p2[i] -= lr_t * mi / den;
            }
        }
        omp_set_num_threads(2);
        assert_memory_equal(p, p2, n * 4);
        assert_memory_equal(m, m2, n * 4);
        assert_memory_equal(v, v2, n * 4);
    }
    free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
}

/* nb_col_sums: in double equal to the exact column sums (to rounding); in float within a few
 * float roundings of them over rows that are not a multiple of its 8-row groups and columns that
 * are not a multiple of its 64-column blocks; accumulating onto what db held; 1 thread bit for
 * bit equal to 2 (above the parallel threshold). */
static void test_col_sums(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {7, 3}, {13, 65}, {333, 200}, {1001, 130}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int R = shapes[k][0], C = shapes[k][1];
        double *y = malloc((size_t)R * C * 8), *db = malloc((size_t)C * 8);
        float *yf = malloc((size_t)R * C * 4), *f1 = malloc((size_t)C * 4),
              *f2 = malloc((size_t)C * 4);
        assert_non_null(y && db && yf && f1 && f2);
        fill_normal(y, (size_t)R * C, 1.0, 40 + k);
        for (size_t i = 0; i < (size_t)R * C; i++)
            yf[i] = (float)y[i];
        for (int c = 0; c < C; c++) {
            db[c] = 0.5 * c;
            f1[c] = f2[c] = (float)(0.5 * c);
        }
        nb_col_sums_f64(db, y, R, C);
        omp_set_num_threads(1);
        nb_col_sums(f1, yf, R, C);
        omp_set_num_threads(2);
        nb_col_sums(f2, yf, R, C);
        for (int c = 0; c < C; c++) {
            double want = 0.5 * c, wantf = 0.5 * c, mag = fabs(0.5 * c);
            for (int r = 0; r < R; r++) {
                want += y[(size_t)r * C + c];
                wantf += yf[(size_t)r * C + c];
                mag += fabs(yf[(size_t)r * C + c]);
            }
            assert_close(db[c], want, 1e-12, 1e-12);
            /* float groups of 8 rows: each term meets at most ~8 float roundings */
            assert_true(fabs(f1[c] - wantf) <= 1e-6 * mag + 1e-7);
        }
        assert_memory_equal(f1, f2, (size_t)C * 4);
        free(y), free(db), free(yf), free(f1), free(f2);
    }
}

/* ---- layouts: Adam, clipping ----------------------------------------------------------------- */

static void test_adam_layout(void **state) {
    (void)state;
    nb_layout l = {0};
    nb_layout_add(&l, "a", 5, 1);
    nb_layout_add(&l, "frozen", 7, 0);
    nb_layout_add(&l, "big", 40000, 1);
    size_t n = l.total;
    float *p = calloc(n, 4), *g = calloc(n, 4), *m = calloc(n, 4), *v = calloc(n, 4);
    float *pr = calloc(n, 4), *mr = calloc(n, 4), *vr = calloc(n, 4);
    assert_non_null(p && g && m && v && pr && mr && vr);
    fill_normal_f(p, n, 1.0, 10);
    fill_normal_f(g, n, 1.0, 11);
    memcpy(pr, p, n * 4);
    nb_adam_cfg cfg;
    nb_adam_cfg_default(&cfg);
    for (long t = 1; t <= 2; t++) {
        nb_adam_step_layout(p, g, m, v, &l, t, &cfg);
        for (int i = 0; i < l.count; i++)
            if (l.t[i].trainable) {
                size_t o = l.t[i].off;
                nb_adam_step(pr + o, g + o, mr + o, vr + o, l.t[i].n, t, &cfg);
            }
    }
    /* Trainable tensors as by nb_adam_step; the frozen tensor and the padding untouched. */
    assert_memory_equal(p, pr, n * 4);
    assert_memory_equal(m, mr, n * 4);
    assert_memory_equal(v, vr, n * 4);
    const nb_tensor *fz = &l.t[1];
    for (size_t i = 0; i < fz->n; i++)
        assert_true(m[fz->off + i] == 0 && v[fz->off + i] == 0);
    for (size_t i = 5; i < 16; i++)
        assert_true(m[i] == 0); /* padding after "a" */
    free(p), free(g), free(m), free(v), free(pr), free(mr), free(vr);
}

static void clip_layout(nb_layout *l, double *g) {
    memset(l, 0, sizeof *l);
    size_t a = nb_layout_add(l, "a", 3, 1);      /* (3, 4, 0): norm 5 */
    size_t f = nb_layout_add(l, "frozen", 2, 0); /* huge, must not count or change */
    size_t c = nb_layout_add(l, "c", 1, 1);      /* (12): norm 12 */
    for (size_t i = 0; i < l->total; i++)
        g[i] = 0;
    g[a] = 3, g[a + 1] = 4, g[f] = 1e6, g[f + 1] = -1e6, g[c] = 12;
}

static void test_clip(void **state) {
    (void)state;
    nb_layout l;
    double g[64];
    /* global: norm sqrt(25 + 144) = 13 */
    clip_layout(&l, g);
    assert_close(nb_clip_global_f64(g, &l, 20.0), 13.0, 1e-14, 0);
    assert_true(g[0] == 3 && g[1] == 4 && g[l.t[2].off] == 12);
    assert_close(nb_clip_global_f64(g, &l, 6.5), 13.0, 1e-14, 0);
    assert_close(g[0], 1.5, 1e-15, 0);
    assert_close(g[1], 2.0, 1e-15, 0);
    assert_close(g[l.t[2].off], 6.0, 1e-15, 0);
    assert_true(g[l.t[1].off] == 1e6 && g[l.t[1].off + 1] == -1e6);
    /* per tensor at 6: "a" (5) unchanged, "c" (12) to 6; returns the largest, 12 */
    clip_layout(&l, g);
    assert_close(nb_clip_per_tensor_f64(g, &l, 6.0), 12.0, 1e-14, 0);
    assert_true(g[0] == 3 && g[1] == 4 && g[2] == 0);
    assert_close(g[l.t[2].off], 6.0, 1e-15, 0);
    assert_true(g[l.t[1].off] == 1e6 && g[l.t[1].off + 1] == -1e6);
    /* float build, same numbers */
    float gf[64];
    clip_layout(&l, g);
    for (size_t i = 0; i < l.total; i++)
        gf[i] = (float)g[i];
    assert_close(nb_clip_global(gf, &l, 6.5), 13.0, 1e-6, 0);
    assert_close(gf[1], 2.0, 1e-6, 0);
    assert_true(gf[l.t[1].off] == 1e6f);
}

static void test_l2norm(void **state) {
    (void)state;
    const size_t n = 1800000 + 7; /* parallel, many blocks, a tail */
    float *x = malloc(n * 4);
    assert_non_null(x);
    fill_normal_f(x, n, 1.0, 12);
    long double ref = 0;
    for (size_t i = 0; i < n; i++)
        ref += (long double)x[i] * x[i];
    omp_set_num_threads(1);
    double a = nb_l2norm(x, n);
    omp_set_num_threads(2);
    double b = nb_l2norm(x, n);
    assert_true(a == b); /* independent of the thread count */
    assert_close(a, sqrtl(ref), 0, 1e-13);
    assert_close(nb_l2norm(x, 5),
                 sqrt((double)x[0] * x[0] + (double)x[1] * x[1] + (double)x[2] * x[2] +
                      (double)x[3] * x[3] + (double)x[4] * x[4]),
                 0, 1e-15);
    assert_true(nb_l2norm(x, 0) == 0);
    free(x);
}

/* ---- determinism of the parallel op paths ------------------------------------------------ */

static void test_ops_threads(void **state) {
    (void)state;
    const size_t n = 1 << 18;
    const int B = 5000, V = 10;
    float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
    int *tg = malloc((size_t)B * sizeof *tg);
    assert_non_null(x && y1 && y2 && tg);
    fill_normal_f(x, n, 3.0, 13);
    for (int b = 0; b < B; b++)
        tg[b] = b % V;
    for (int k = 0; k < 4; k++) {
        for (int th = 1; th <= 2; th++) {
            omp_set_num_threads(th);
            float *y = th == 1 ? y1 : y2;
            switch (k) {
            case 0:
                nb_tanh_forward(y, x, n);
                break;
            case 1:
                nb_sigmoid_forward(y, x, n);
                break;
            case 2:
                nb_leaky_relu_forward(y, x, n, 0.01f);
                break;
            default:
                nb_relu_forward(y, x, n);
                break;
            }
        }
        assert_memory_equal(y1, y2, n * 4);
        /* and equal to the serial path, element by element */
        for (size_t i = 0; i < n; i += 997) {
            float one;
            switch (k) {
            case 0:
                nb_tanh_forward(&one, x + i, 1);
                break;
            case 1:
                nb_sigmoid_forward(&one, x + i, 1);
                break;
            case 2:
                nb_leaky_relu_forward(&one, x + i, 1, 0.01f);
                break;
            default:
                nb_relu_forward(&one, x + i, 1);
                break;
            }
            assert_true(one == y1[i]);
        }
    }
    double l1, l2;
    omp_set_num_threads(1);
    l1 = nb_softmax_xent_forward(y1, NULL, x, tg, B, V);
    omp_set_num_threads(2);
    l2 = nb_softmax_xent_forward(y2, NULL, x, tg, B, V);
    assert_true(l1 == l2);
    assert_memory_equal(y1, y2, (size_t)B * V * 4);
    free(x), free(y1), free(y2), free(tg);
}

/* ---- RNG ------------------------------------------------------------------------------------- */

static void test_rng_streams(void **state) {
    (void)state;
    nb_rng a, b, c, d;
    nb_rng_seed(&a, 42, NB_STREAM_INIT);
    nb_rng_seed(&b, 42, NB_STREAM_INIT);
    nb_rng_seed(&c, 42, NB_STREAM_DATA);
    nb_rng_seed(&d, 43, NB_STREAM_INIT);
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = nb_rng_u64(&a), y = nb_rng_u64(&b), z = nb_rng_u64(&c), w = nb_rng_u64(&d);
        assert_true(x == y);
        same_c += x == z;
        same_d += x == w;
    }
    assert_int_equal(same_c, 0);
    assert_int_equal(same_d, 0);
    /* The state is the struct: a copy continues identically (checkpoint by value). */
    nb_rng e = a;
    for (int i = 0; i < 10; i++)
        assert_true(nb_rng_u64(&a) == nb_rng_u64(&e));
    /* seed 0, stream 0 is a valid, non-degenerate generator */
    nb_rng z;
    nb_rng_seed(&z, 0, 0);
    assert_true(nb_rng_u64(&z) != 0 || nb_rng_u64(&z) != 0);
}

static void test_rng_uniform_normal(void **state) {
    (void)state;
    nb_rng r;
    nb_rng_seed(&r, 7, NB_STREAM_SYNTH);
    const int n = 100000;
    double s = 0, s2 = 0, lo = 1, hi = 0;
    for (int i = 0; i < n; i++) {
        double u = nb_rng_uniform(&r);
        assert_true(u >= 0 && u < 1);
        s += u, s2 += u * u;
        lo = u < lo ? u : lo, hi = u > hi ? u : hi;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    assert_close(mean, 0.5, 0.005, 0); /* sd of the mean 0.0009 */
    assert_close(var, 1.0 / 12, 0.002, 0);
    assert_true(lo < 1e-3 && hi > 1 - 1e-3);
    s = s2 = 0;
    double s4 = 0;
    for (int i = 0; i < n; i++) {
        double z = nb_rng_normal(&r);
        assert_true(isfinite(z));
        s += z, s2 += z * z, s4 += z * z * z * z;
    }
    mean = s / n;
    assert_close(mean, 0.0, 0.015, 0); /* sd 0.0032 */
    assert_close(s2 / n - mean * mean, 1.0, 0.03, 0);
    assert_close(s4 / n, 3.0, 0.15, 0); /* kurtosis of a normal */
}

static void test_rng_below_shuffle(void **state) {
    (void)state;
    nb_rng r;
    nb_rng_seed(&r, 9, NB_STREAM_DATA);
    int cnt[3] = {0};
    for (int i = 0; i < 30000; i++) {
        uint64_t k = nb_rng_below(&r, 3);
        assert_true(k < 3);
        cnt[k]++;
    }
    for (int k = 0; k < 3; k++)
        assert_in_range(cnt[k], 9500, 10500);
    for (int i = 0; i < 100; i++)
        assert_true(nb_rng_below(&r, 1) == 0);
    const uint64_t big = (UINT64_C(1) << 63) + 12345;
    int upper = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t k = nb_rng_below(&r, big);
        assert_true(k < big);
        upper += k >= big / 2;
    }
    assert_in_range(upper, 400, 600);

    enum { N = 1000 };
    int a[N], seen[N] = {0}, moved = 0;
    for (int i = 0; i < N; i++)
        a[i] = i;
    nb_rng_shuffle(&r, a, N);
    for (int i = 0; i < N; i++) {
        assert_in_range(a[i], 0, N - 1);
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    assert_true(moved > N / 2);
    /* every permutation of 3 equally likely (catches the classic off-by-one Fisher-Yates) */
    int perm[6] = {0};
    for (int i = 0; i < 60000; i++) {
        int p3[3] = {0, 1, 2};
        nb_rng_shuffle(&r, p3, 3);
        perm[p3[0] * 2 + (p3[1] > p3[2])]++;
    }
    for (int k = 0; k < 6; k++)
        assert_in_range(perm[k], 9400, 10600); /* sd ~91 */
    /* same seed, same order */
    int b[N], c[N];
    for (int i = 0; i < N; i++)
        b[i] = c[i] = i;
    nb_rng r1, r2;
    nb_rng_seed(&r1, 5, NB_STREAM_DATA);
    nb_rng_seed(&r2, 5, NB_STREAM_DATA);
    nb_rng_shuffle(&r1, b, N);
    nb_rng_shuffle(&r2, c, N);
    assert_memory_equal(b, c, sizeof b);
    nb_rng_shuffle(&r1, a, 0); /* n = 0 and 1 are no-ops */
    nb_rng_shuffle(&r1, a, 1);
}

/* ---- reference tensors (PyTorch), once per precision ------------------------------------ */

static ref_file ops_ref;
static int ops_ref_loaded;

/* Loads tests/ref/ops.bin once; a missing or malformed file fails the calling test. */
static const ref_file *ref(void) {
    if (!ops_ref_loaded) {
        assert_int_equal(ref_load(&ops_ref, "ops.bin"), 0);
        ops_ref_loaded = 1;
    }
    return &ops_ref;
}

static const double *ref_data(const char *name, size_t n) {
    const ref_tensor *t = ref_get(ref(), name);
    assert_non_null(t);
    if (t->n != n) print_error("ref tensor '%s': %zu values, expected %zu\n", name, t->n, n);
    assert_true(t->n == n);
    return t->data;
}

#define TEST_OPS_PASS 1
#define treal float
#define F(name) name
#define T(name) name##_float
#define RTOL 1e-5
#define ATOL 1e-6
#include __FILE__
#undef TEST_OPS_PASS
#undef treal
#undef F
#undef T
#undef RTOL
#undef ATOL

#define TEST_OPS_PASS 2
#define treal double
#define F(name) name##_f64
#define T(name) name##_double
#define RTOL 1e-10
#define ATOL 1e-12
#include __FILE__

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_fd),
        cmocka_unit_test(test_act_fd),
        cmocka_unit_test(test_xent_fd),
        cmocka_unit_test(test_xent_large_logits),
        cmocka_unit_test(test_adam_hand),
        cmocka_unit_test(test_adam_parallel_exact),
        cmocka_unit_test(test_col_sums),
        cmocka_unit_test(test_adam_layout),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_l2norm),
        cmocka_unit_test(test_ops_threads),
        cmocka_unit_test(test_rng_streams),
        cmocka_unit_test(test_rng_uniform_normal),
        cmocka_unit_test(test_rng_below_shuffle),
        cmocka_unit_test(test_ref_dense_float),
        cmocka_unit_test(test_ref_act_float),
        cmocka_unit_test(test_ref_xent_float),
        cmocka_unit_test(test_ref_adam_float),
        cmocka_unit_test(test_ref_dense_double),
        cmocka_unit_test(test_ref_act_double),
        cmocka_unit_test(test_ref_xent_double),
        cmocka_unit_test(test_ref_adam_double),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ref_free(&ops_ref);
    return failed ? 1 : 0;
}

#else /* TEST_OPS_PASS: the reference tests over treal, F(), T() */

/* A copy of a reference tensor in treal (caller frees). */
static treal *T(ref_copy)(const char *name, size_t n) {
    const double *d = ref_data(name, n);
    treal *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = (treal)d[i];
    return x;
}

static void T(ref_compare)(const treal *got, const char *name, size_t n, double scale) {
    const double *want = ref_data(name, n);
    for (size_t i = 0; i < n; i++) {
        if (!(fabs((double)got[i] - want[i]) <= ATOL * scale + RTOL * fabs(want[i])))
            print_error("'%s'[%zu]: got %.12g, want %.12g\n", name, i, (double)got[i], want[i]);
        assert_close(got[i], want[i], ATOL * scale, RTOL);
    }
}

static void T(test_ref_dense)(void **state) {
    (void)state;
    enum { B = 5, C = 7, OC = 4 };
    treal *inp = T(ref_copy)("dense_inp", B * C), *w = T(ref_copy)("dense_w", OC * C);
    treal *bias = T(ref_copy)("dense_bias", OC), *dout = T(ref_copy)("dense_dout", B * OC);
    treal out[B * OC], dinp[B * C] = {0}, dw[OC * C] = {0}, db[OC] = {0};
    F(nb_dense_forward)(out, inp, w, bias, B, C, OC);
    F(nb_dense_backward)(dinp, dw, db, dout, inp, w, B, C, OC);
    T(ref_compare)(out, "dense_out", B * OC, 1);
    T(ref_compare)(dinp, "dense_dinp", B * C, 1);
    T(ref_compare)(dw, "dense_dw", OC * C, 1);
    T(ref_compare)(db, "dense_dbias", OC, 1);
    free(inp), free(w), free(bias), free(dout);
}

static void T(test_ref_act)(void **state) {
    (void)state;
    enum { N = 64 };
    static const char *const names[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
    treal *x = T(ref_copy)("act_inp", N), *d = T(ref_copy)("act_dout", N);
    for (int k = 0; k < NB_ACT_COUNT; k++) {
        treal y[N], dx[N] = {0};
        char on[64], gn[64];
        snprintf(on, sizeof on, "act_%s_out", names[k]);
        snprintf(gn, sizeof gn, "act_%s_dinp", names[k]);
        switch (k) {
        case NB_ACT_RELU:
            F(nb_relu_forward)(y, x, N);
            F(nb_relu_backward)(dx, d, y, N);
            break;
        case NB_ACT_LEAKY_RELU:
            F(nb_leaky_relu_forward)(y, x, N, (treal)0.1);
            F(nb_leaky_relu_backward)(dx, d, y, N, (treal)0.1);
            break;
        case NB_ACT_TANH:
            F(nb_tanh_forward)(y, x, N);
            F(nb_tanh_backward)(dx, d, y, N);
            break;
        default:
            F(nb_sigmoid_forward)(y, x, N);
            F(nb_sigmoid_backward)(dx, d, y, N);
            break;
        }
        T(ref_compare)(y, on, N, 1);
        /* At |x| = 6 the float gradient from a saturated output (1 - y^2 with y rounded)
         * keeps only ~3 digits; the absolute tolerance (|dout| ~ 1) covers it. */
        T(ref_compare)(dx, gn, N, 1);
    }
    free(x), free(d);
}

static void T(xent_case)(const char *prefix, int B, int V) {
    char nm[64];
    snprintf(nm, sizeof nm, "%s_logits", prefix);
    treal *lg = T(ref_copy)(nm, (size_t)B * V);
    snprintf(nm, sizeof nm, "%s_targets", prefix);
    const double *td = ref_data(nm, (size_t)B);
    int tg[16];
    for (int b = 0; b < B; b++)
        tg[b] = (int)td[b];
    treal *pr = malloc((size_t)B * V * sizeof *pr), *dl = calloc((size_t)B * V, sizeof *dl);
    treal ls[16];
    assert_non_null(pr && dl);
    double loss = F(nb_softmax_xent_forward)(pr, ls, lg, tg, B, V);
    F(nb_softmax_xent_backward)(dl, pr, tg, B, V);
    snprintf(nm, sizeof nm, "%s_loss", prefix);
    const double *wl = ref_data(nm, 1);
    assert_close(loss, wl[0], ATOL, RTOL);
    snprintf(nm, sizeof nm, "%s_losses", prefix);
    T(ref_compare)(ls, nm, (size_t)B, 1);
    snprintf(nm, sizeof nm, "%s_probs", prefix);
    T(ref_compare)(pr, nm, (size_t)B * V, 1);
    snprintf(nm, sizeof nm, "%s_dlogits", prefix);
    T(ref_compare)(dl, nm, (size_t)B * V, 1);
    free(lg), free(pr), free(dl);
}

static void T(test_ref_xent)(void **state) {
    (void)state;
    T(xent_case)("xent", 6, 5);
    T(xent_case)("xent_big", 3, 3);
}

static void T(test_ref_adam)(void **state) {
    (void)state;
    enum { NP = 37 };
    const double *cf = ref_data("adam_cfg", 5);
    const int steps = (int)cf[4];
    assert_in_range(steps, 1, 100);
    static const char *const bn[] = {"standard", "none", "kiros"};
    static const nb_adam_bias bk[] = {NB_ADAM_BIAS_STANDARD, NB_ADAM_BIAS_NONE, NB_ADAM_BIAS_KIROS};
    treal *grads = T(ref_copy)("adam_grads", (size_t)steps * NP);
    for (int bi = 0; bi < 3; bi++)
        for (int variant = 0; variant < 4; variant++) {
            int inside = variant & 1, corrected = variant >> 1;
            nb_adam_cfg cfg = {.lr = cf[0],
                               .beta1 = cf[1],
                               .beta2 = cf[2],
                               .eps = cf[3],
                               .eps_inside = inside,
                               .eps_corrected = corrected,
                               .bias = bk[bi]};
            char tag[64], nm[80];
            snprintf(tag, sizeof tag, "adam_%s_%s%s", bn[bi], inside ? "inside" : "outside",
                     corrected ? "_corrected" : "");
            treal *p = T(ref_copy)("adam_p0", NP);
            treal m[NP] = {0}, v[NP] = {0};
            snprintf(nm, sizeof nm, "%s_p", tag);
            const double *traj = ref_data(nm, (size_t)steps * NP);
            for (int t = 1; t <= steps; t++) {
                F(nb_adam_step)(p, grads + (size_t)(t - 1) * NP, m, v, NP, t, &cfg);
                for (int i = 0; i < NP; i++) {
                    double want = traj[(size_t)(t - 1) * NP + i];
                    if (!(fabs((double)p[i] - want) <= ATOL + RTOL * fabs(want)))
                        print_error("%s step %d [%d]\n", tag, t, i);
                    assert_close(p[i], want, ATOL, RTOL);
                }
            }
            snprintf(nm, sizeof nm, "%s_m", tag);
            T(ref_compare)(m, nm, NP, 1e-3);
            snprintf(nm, sizeof nm, "%s_v", tag);
            T(ref_compare)(v, nm, NP, 1e-6);
            free(p);
        }
    free(grads);
}

#endif
