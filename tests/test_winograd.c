/* tests/test_winograd.c — the Winograd F(2×2,3×3) and F(4×4,3×3) convolution (nn/winograd.c).
 *
 * 1. Float forward, data gradient and weight gradient against a direct convolution in double, at
 *    ConvPool-CNN-C's 3×3 shapes (cifar 96/192 channels on 32, 16, 8 maps, the pad-0 layer; the
 *    Fashion-MNIST maps 28, 14, 7) at batch 1–2, and at awkward ones (odd H and W, C and OC not
 *    multiples of 16, 1×1 and 2×3 maps, batch 1), in the batched and the exact (per-image) mode,
 *    on 1 and 2 threads. The error is normwise: max |float − double| / max |double| over the
 *    tensor; each case prints it beside im2col's (tests that differ only by the engine), and the
 *    bounds (WINO2_TOL, WINO4_TOL) are ~10× the largest seen (docs/numerics.md#winograd).
 * 2. The double instantiation (_f64) against central finite differences of dot(out, dout): the
 *    engine's backward is the exact gradient of its forward.
 * 3. acc semantics (dinp += / =, dw +=), and exact mode: an image's output and the weight
 *    gradient sums do not depend on the batch around it or the thread count.
 * 4. The engine each layer gets (nb_cnn_conv_pick): forced, and auto's measured table. */
#include "tests/testutil.h"
#include "nn/nn.h"

#include <omp.h>

/* Normwise relative error bounds in float (measured: see the printed table). */
#define WINO2_TOL 5e-6
#define WINO4_TOL 1e-4
#define IM2COL_TOL 3e-6

static void fill(double *x, size_t n, double scale, uint64_t seed) {
    nb_rng r;
    nb_rng_seed(&r, seed, NB_STREAM_SYNTH);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * nb_rng_normal(&r);
}

typedef struct shape {
    int N, C, H, W, OC, pad;
} shape;

static int oh(const shape *s) {
    return s->H + 2 * s->pad - 2;
}
static int ow(const shape *s) {
    return s->W + 2 * s->pad - 2;
}

/* Direct convolution and its two gradients in double. */
static void direct(double *out, double *dx, double *dw, const double *x, const double *w,
                   const double *dout, const shape *s) {
    const int OH = oh(s), OW = ow(s);
    memset(dx, 0, sizeof(double) * s->N * s->C * s->H * s->W);
    memset(dw, 0, sizeof(double) * s->OC * s->C * 9);
    for (int n = 0; n < s->N; n++)
        for (int o = 0; o < s->OC; o++)
            for (int i = 0; i < OH; i++)
                for (int j = 0; j < OW; j++) {
                    double acc = 0, d = dout[(((size_t)n * s->OC + o) * OH + i) * OW + j];
                    for (int c = 0; c < s->C; c++)
                        for (int a = 0; a < 3; a++)
                            for (int b = 0; b < 3; b++) {
                                int y = i + a - s->pad, z = j + b - s->pad;
                                if (y < 0 || y >= s->H || z < 0 || z >= s->W) continue;
                                size_t xi = (((size_t)n * s->C + c) * s->H + y) * s->W + z;
                                size_t wi = (((size_t)o * s->C + c) * 3 + a) * 3 + b;
                                acc += w[wi] * x[xi];
                                dx[xi] += w[wi] * d;
                                dw[wi] += x[xi] * d;
                            }
                    out[(((size_t)n * s->OC + o) * OH + i) * OW + j] = acc;
                }
}

static double maxabs(const double *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* max |f − ref| / max |ref| */
static double relerr(const float *f, const double *ref, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)f[i] - ref[i]));
    double r = maxabs(ref, n);
    return r > 0 ? m / r : m;
}

static float *tofloat(const double *x, size_t n) {
    float *f = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

/* Largest errors seen per engine (0 im2col, 1 F(2), 2 F(4)) and tensor (out, dx, dw). */
static double worst[3][3];

/* One engine (m = 0: im2col) on shape s: float results against the direct double ones. */
static void check_engine(const shape *s, int m, int exact, int threads, const float *xf,
                         const float *wf, const float *df, const double *out, const double *dx,
                         const double *dw, double tol) {
    const size_t nx = (size_t)s->N * s->C * s->H * s->W, nw = (size_t)s->OC * s->C * 9,
                 no = (size_t)s->N * s->OC * oh(s) * ow(s);
    size_t ss = m ? nb_wino_scratch(m, s->C, s->OC, threads)
                  : nb_conv2d_scratch(s->C, s->H, s->W, s->OC, 3, s->pad) * threads;
    float *scr = malloc(sizeof(float) * (ss + 16)), *of = malloc(sizeof(float) * no),
          *dxf = malloc(sizeof(float) * nx), *dwf = calloc(nw, sizeof(float));
    double *dwd = calloc(nw, sizeof(double)), *dpart = malloc(sizeof(double) * nw * threads);
    omp_set_num_threads(threads);
    if (m) {
        nb_wino_forward(of, scr, threads, xf, wf, s->N, s->C, s->H, s->W, s->OC, s->pad, m, exact);
        nb_wino_backward(dxf, dwf, exact ? dwd : NULL, scr, threads, df, xf, wf, s->N, s->C, s->H,
                         s->W, s->OC, s->pad, m, 0);
    } else {
        nb_conv2d_forward(of, scr, threads, xf, wf, s->N, s->C, s->H, s->W, s->OC, 3, s->pad,
                          exact);
        nb_conv2d_backward(dxf, dwf, exact ? dwd : NULL, dpart, scr, threads, df, xf, wf, s->N,
                           s->C, s->H, s->W, s->OC, 3, s->pad, 0);
    }
    if (exact)
        for (size_t i = 0; i < nw; i++)
            dwf[i] = (float)dwd[i];
    double e[3] = {relerr(of, out, no), relerr(dxf, dx, nx), relerr(dwf, dw, nw)};
    fprintf(stderr, "  %-7s %s T%d N%d C%3d %2dx%-2d OC%3d pad %d: out %.2e dx %.2e dw %.2e\n",
            m == 0   ? "im2col"
            : m == 2 ? "F(2x2)"
                     : "F(4x4)",
            exact ? "exact" : "batch", threads, s->N, s->C, s->H, s->W, s->OC, s->pad, e[0], e[1],
            e[2]);
    for (int k = 0; k < 3; k++) {
        worst[m / 2][k] = fmax(worst[m / 2][k], e[k]);
        if (!(e[k] <= tol)) {
            print_error("engine %d tensor %d: error %g over %g\n", m, k, e[k], tol);
            fail();
        }
    }
    free(scr), free(of), free(dxf), free(dwf), free(dwd), free(dpart);
}

static void run_shape(const shape *s, int big) {
    const size_t nx = (size_t)s->N * s->C * s->H * s->W, nw = (size_t)s->OC * s->C * 9,
                 no = (size_t)s->N * s->OC * oh(s) * ow(s);
    double *x = malloc(sizeof(double) * nx), *w = malloc(sizeof(double) * nw),
           *d = malloc(sizeof(double) * no), *out = malloc(sizeof(double) * no),
           *dx = malloc(sizeof(double) * nx), *dw = malloc(sizeof(double) * nw);
    fill(x, nx, 1, 31);
    fill(w, nw, sqrt(2.0 / (9.0 * s->C)), 32); /* He-scaled, as trained layers roughly are */
    fill(d, no, 1, 33);
    /* the float inputs exactly: the reference sees the rounded values */
    float *xf = tofloat(x, nx), *wf = tofloat(w, nw), *df = tofloat(d, no);
    for (size_t i = 0; i < nx; i++)
        x[i] = xf[i];
    for (size_t i = 0; i < nw; i++)
        w[i] = wf[i];
    for (size_t i = 0; i < no; i++)
        d[i] = df[i];
    direct(out, dx, dw, x, w, d, s);
    const int ms[3] = {0, 2, 4};
    const double tols[3] = {IM2COL_TOL, WINO2_TOL, WINO4_TOL};
    for (int k = 0; k < 3; k++)
        for (int exact = 0; exact < 2; exact++)
            for (int T = 1; T <= 2; T++) {
                if (big && T == 1 && exact) continue; /* the big shapes: three of the four */
                check_engine(s, ms[k], exact, T, xf, wf, df, out, dx, dw, tols[k]);
            }
    free(x), free(w), free(d), free(out), free(dx), free(dw), free(xf), free(wf), free(df);
}

static void test_awkward(void **state) {
    (void)state;
    const shape sh[] = {
        {1, 3, 5, 7, 5, 1},   /* odd H and W, batch 1 */
        {3, 17, 9, 6, 19, 1}, /* C, OC not multiples of 16 */
        {2, 5, 7, 7, 4, 0},   /* pad 0, 7 → 5 (the Fashion-MNIST pad-0 layer's map) */
        {2, 2, 1, 1, 3, 1},   /* a 1×1 map */
        {1, 4, 2, 3, 2, 1},   /* 2×3 */
        {2, 3, 3, 4, 2, 0},   /* pad 0 down to 1×2 */
        {5, 2, 11, 13, 3, 1}, /* tiles across images in one block (batched mode) */
    };
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        run_shape(&sh[i], 0);
}

static void test_cnn_shapes(void **state) {
    (void)state;
    const shape sh[] = {
        {1, 96, 32, 32, 96, 1},   /* cifar block 1 */
        {1, 96, 16, 16, 192, 1},  /* cifar block 2, first layer */
        {1, 192, 16, 16, 192, 1}, /* cifar block 2 */
        {2, 192, 8, 8, 192, 0},   /* the pad-0 layer, 8 → 6 */
        {1, 96, 28, 28, 96, 1},   /* Fashion-MNIST block 1 */
        {1, 192, 14, 14, 192, 1}, /* Fashion-MNIST block 2 */
        {2, 192, 7, 7, 192, 0},   /* Fashion-MNIST pad-0 layer, 7 → 5 */
    };
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        run_shape(&sh[i], 1);
    fprintf(stderr,
            "  worst normwise relative error (out, dx, dw): im2col %.2e %.2e %.2e, "
            "F(2x2) %.2e %.2e %.2e, F(4x4) %.2e %.2e %.2e\n",
            worst[0][0], worst[0][1], worst[0][2], worst[1][0], worst[1][1], worst[1][2],
            worst[2][0], worst[2][1], worst[2][2]);
}

/* ---- double: finite differences ----------------------------------------------------------- */

typedef struct fd_ctx {
    shape s;
    int m;
    double *x, *w, *d, *out, *scr;
} fd_ctx;

static double fd_loss(fd_ctx *c) {
    nb_wino_forward_f64(c->out, c->scr, 2, c->x, c->w, c->s.N, c->s.C, c->s.H, c->s.W, c->s.OC,
                        c->s.pad, c->m, 0);
    size_t no = (size_t)c->s.N * c->s.OC * oh(&c->s) * ow(&c->s);
    double l = 0;
    for (size_t i = 0; i < no; i++)
        l += c->out[i] * c->d[i];
    return l;
}

static void fd_check(const char *what, fd_ctx *c, double *v, const double *g, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double s = v[i], h = 1e-5;
        v[i] = s + h;
        double lp = fd_loss(c);
        v[i] = s - h;
        double lm = fd_loss(c);
        v[i] = s;
        double num = (lp - lm) / (2 * h);
        if (!(fabs(num - g[i]) <= 1e-8 * (1 + fabs(num)))) {
            print_error("F(%dx%d) %s[%zu]: analytic %.12g, numeric %.12g\n", c->m, c->m, what, i,
                        g[i], num);
            fail();
        }
    }
}

static void test_double_fd(void **state) {
    (void)state;
    const shape sh[] = {{2, 3, 5, 6, 4, 1}, {2, 2, 7, 5, 3, 0}, {1, 2, 2, 1, 2, 1}};
    for (int mi = 0; mi < 2; mi++)
        for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
            fd_ctx c = {sh[k], mi ? 4 : 2, 0};
            const shape *s = &c.s;
            size_t nx = (size_t)s->N * s->C * s->H * s->W, nw = (size_t)s->OC * s->C * 9,
                   no = (size_t)s->N * s->OC * oh(s) * ow(s);
            c.x = malloc(sizeof(double) * nx);
            c.w = malloc(sizeof(double) * nw);
            c.d = malloc(sizeof(double) * no);
            c.out = malloc(sizeof(double) * no);
            c.scr = malloc(sizeof(double) * nb_wino_scratch_f64(c.m, s->C, s->OC, 2));
            double *dx = malloc(sizeof(double) * nx), *dw = malloc(sizeof(double) * nw),
                   *ref = malloc(sizeof(double) * no), *rdx = malloc(sizeof(double) * nx),
                   *rdw = malloc(sizeof(double) * nw);
            fill(c.x, nx, 1, 41);
            fill(c.w, nw, 1, 42);
            fill(c.d, no, 1, 43);
            fd_loss(&c);
            direct(ref, rdx, rdw, c.x, c.w, c.d, s);
            for (size_t i = 0; i < no; i++)
                assert_close(c.out[i], ref[i], 1e-12, 1e-12);
            for (int acc = 0; acc < 2; acc++) {
                for (size_t i = 0; i < nx; i++)
                    dx[i] = 0.25;
                for (size_t i = 0; i < nw; i++)
                    dw[i] = 0.25;
                nb_wino_backward_f64(dx, dw, NULL, c.scr, 2, c.d, c.x, c.w, s->N, s->C, s->H, s->W,
                                     s->OC, s->pad, c.m, acc);
                for (size_t i = 0; i < nx; i++)
                    dx[i] -= acc ? 0.25 : 0; /* acc 0 overwrote it */
                for (size_t i = 0; i < nw; i++)
                    dw[i] -= 0.25; /* accumulated */
                for (size_t i = 0; i < nx; i++)
                    assert_close(dx[i], rdx[i], 1e-12, 1e-12);
                for (size_t i = 0; i < nw; i++)
                    assert_close(dw[i], rdw[i], 1e-12, 1e-12);
                fd_check("dinp", &c, c.x, dx, nx);
                fd_check("dw", &c, c.w, dw, nw);
            }
            free(c.x), free(c.w), free(c.d), free(c.out), free(c.scr), free(dx), free(dw);
            free(ref), free(rdx), free(rdw);
        }
}

/* ---- exact mode: an image's results do not depend on the batch or threads ------------------- */

static void test_exact_invariance(void **state) {
    (void)state;
    const int N = 5, C = 19, H = 12, W = 10, OC = 21, pad = 1, OH = 12, OW = 10;
    const size_t nx = (size_t)N * C * H * W, nw = (size_t)OC * C * 9, no = (size_t)N * OC * OH * OW;
    double *x = malloc(sizeof(double) * nx), *w = malloc(sizeof(double) * nw),
           *d = malloc(sizeof(double) * no);
    fill(x, nx, 1, 51);
    fill(w, nw, 0.1, 52);
    fill(d, no, 1, 53);
    float *xf = tofloat(x, nx), *wf = tofloat(w, nw), *df = tofloat(d, no);
    for (int m = 2; m <= 4; m += 2) {
        float *scr = malloc(sizeof(float) * nb_wino_scratch(m, C, OC, 2));
        float *o5 = malloc(sizeof(float) * no), *o1 = malloc(sizeof(float) * no),
              *dx = malloc(sizeof(float) * nx), *dwf = calloc(nw, sizeof(float));
        double *dw1 = calloc(nw, sizeof(double)), *dw2 = calloc(nw, sizeof(double));
        omp_set_num_threads(2);
        nb_wino_forward(o5, scr, 2, xf, wf, N, C, H, W, OC, pad, m, 1);
        nb_wino_backward(dx, dwf, dw2, scr, 2, df, xf, wf, N, C, H, W, OC, pad, m, 0);
        omp_set_num_threads(1);
        /* image by image, one thread: the same bits */
        for (int n = 0; n < N; n++)
            nb_wino_forward(o1 + (size_t)n * OC * OH * OW, scr, 1, xf + (size_t)n * C * H * W, wf,
                            1, C, H, W, OC, pad, m, 1);
        assert_memory_equal(o1, o5, sizeof(float) * no);
        nb_wino_backward(dx, dwf, dw1, scr, 1, df, xf, wf, N, C, H, W, OC, pad, m, 0);
        for (size_t i = 0; i < nw; i++)
            assert_close(dw1[i], dw2[i], 0, 1e-15); /* sums in double: ties at ~1e-16 only */
        free(scr), free(o5), free(o1), free(dx), free(dwf), free(dw1), free(dw2);
    }
    omp_set_num_threads(2);
    free(x), free(w), free(d), free(xf), free(wf), free(df);
}

/* ---- float: dinp accumulated (acc) or overwritten, dw accumulated ------------------------- */

static void test_float_acc(void **state) {
    (void)state;
    const int N = 2, C = 5, H = 7, W = 6, OC = 3, pad = 1;
    const size_t nx = (size_t)N * C * H * W, nw = (size_t)OC * C * 9, no = (size_t)N * OC * H * W;
    double *x = malloc(sizeof(double) * nx), *w = malloc(sizeof(double) * nw),
           *d = malloc(sizeof(double) * no);
    fill(x, nx, 1, 61);
    fill(w, nw, 0.3, 62);
    fill(d, no, 1, 63);
    float *xf = tofloat(x, nx), *wf = tofloat(w, nw), *df = tofloat(d, no);
    for (int m = 2; m <= 4; m += 2) {
        float *scr = malloc(sizeof(float) * nb_wino_scratch(m, C, OC, 2));
        float *dx0 = malloc(sizeof(float) * nx), *dx1 = malloc(sizeof(float) * nx),
              *dw0 = calloc(nw, sizeof(float)), *dw1 = malloc(sizeof(float) * nw);
        for (size_t i = 0; i < nx; i++)
            dx0[i] = 9, dx1[i] = 0.5f;
        for (size_t i = 0; i < nw; i++)
            dw1[i] = 0.5f;
        nb_wino_backward(dx0, dw0, NULL, scr, 2, df, xf, wf, N, C, H, W, OC, pad, m, 0);
        nb_wino_backward(dx1, dw1, NULL, scr, 2, df, xf, wf, N, C, H, W, OC, pad, m, 1);
        for (size_t i = 0; i < nx; i++)
            assert_close(dx1[i] - 0.5f, dx0[i], 1e-5, 1e-5);
        for (size_t i = 0; i < nw; i++)
            assert_close(dw1[i] - 0.5f, dw0[i], 1e-5, 1e-5);
        free(scr), free(dx0), free(dx1), free(dw0), free(dw1);
    }
    free(x), free(w), free(d), free(xf), free(wf), free(df);
}

/* ---- the engine per layer (nn/cnn.c) ------------------------------------------------------ */

static void test_pick(void **state) {
    (void)state;
    /* forced engines: 3x3 layers with pad 0 or 1 only */
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_WINO2, 12, 32, 32, 12, 3, 1, 0), 2);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_WINO4, 24, 8, 8, 24, 3, 0, 1), 4);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_WINO4, 192, 6, 6, 192, 1, 0, 0), 0); /* NIN 1x1 */
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_WINO2, 4, 9, 9, 4, 5, 2, 0), 0);     /* 5x5 */
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_IM2COL, 96, 32, 32, 96, 3, 1, 0), 0);
    /* auto: the measured table at width 1; the first layer and unmeasured shapes im2col */
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_AUTO, 96, 32, 32, 96, 3, 1, 0), 4);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_AUTO, 96, 32, 32, 96, 3, 1, 1), 4);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_AUTO, 96, 16, 16, 192, 3, 1, 1), 2);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_AUTO, 192, 8, 8, 192, 3, 0, 1), 0);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_AUTO, 3, 32, 32, 96, 3, 1, 0), 0);
    assert_int_equal(nb_cnn_conv_pick(NB_CONV_AUTO, 12, 32, 32, 12, 3, 1, 0), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick),      cmocka_unit_test(test_double_fd),
        cmocka_unit_test(test_awkward),   cmocka_unit_test(test_exact_invariance),
        cmocka_unit_test(test_float_acc), cmocka_unit_test(test_cnn_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
