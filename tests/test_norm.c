/* tests/test_norm.c — nn/norm.c: finite-difference gradients in double, hand-computed forward
 * values, float/double agreement, accumulation, determinism, and PyTorch reference tensors
 * (tests/ref/norm.bin, written by tests/ref/ref_norm.py). */
#include <omp.h>
#include <string.h>

#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double urand(void) /* [0, 1), splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static double nrand(void) {
    double u = urand(), v = urand();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static double *dvec(size_t n, double scale, double shift) {
    double *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = shift + scale * nrand();
    return a;
}

static double *dzeros(size_t n) {
    double *a = calloc(n ? n : 1, sizeof *a);
    assert_non_null(a);
    return a;
}

static float *to_f(const double *a, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)a[i];
    return f;
}

static float *fzeros(size_t n) {
    float *a = calloc(n ? n : 1, sizeof *a);
    assert_non_null(a);
    return a;
}

/* Mean and biased variance of column c of the float (B, C) matrix x, two passes in double. */
static void col_moments(const float *x, int B, int C, int c, double *mean, double *var) {
    double mu = 0, v = 0;
    for (int i = 0; i < B; i++)
        mu += x[(size_t)i * C + c];
    mu /= B;
    for (int i = 0; i < B; i++)
        v += (x[(size_t)i * C + c] - mu) * (x[(size_t)i * C + c] - mu);
    *mean = mu;
    *var = v / B;
}

static double maxabs(const double *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* Every element of got within atol*scale + rtol*|want| of want, scale = max|want| (at least 1). */
static void check_vec_d(const char *what, const double *got, const double *want, size_t n,
                        double atol, double rtol) {
    double scale = fmax(1.0, maxabs(want, n));
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= atol * scale + rtol * fabs(want[i]))) {
            print_error("%s[%zu] = %.12g, expected %.12g\n", what, i, got[i], want[i]);
            fail();
        }
}

static void check_vec_f(const char *what, const float *got, const double *want, size_t n,
                        double atol, double rtol) {
    double *g = dzeros(n);
    for (size_t i = 0; i < n; i++)
        g[i] = got[i];
    check_vec_d(what, g, want, n, atol, rtol);
    free(g);
}

/* ---- one description for every op, for the gradient checks -------------------------------- */

typedef enum { OP_LAYER, OP_RMS, OP_BN_TRAIN, OP_BN_EVAL, OP_WEIGHT } op_kind;

typedef struct op {
    op_kind kind;
    int B, C, k, has_b; /* WeightNorm: B = OC */
    nb_norm_cfg cfg;
    const double *rm, *rv; /* BN eval: running statistics */
} op;

static size_t nparam(const op *o) {
    return o->kind == OP_WEIGHT ? (size_t)o->B : (size_t)o->C;
}

/* out = op(x, g, b), double kernels; cache receives (mean, rstd) per row/column/unit. */
static void op_fwd(const op *o, double *out, double *c1, double *c2, const double *x,
                   const double *g, const double *b) {
    const double *bb = o->has_b ? b : NULL;
    switch (o->kind) {
    case OP_LAYER:
        nb_layernorm_forward_f64(out, c1, c2, x, g, bb, o->B, o->C, &o->cfg);
        break;
    case OP_RMS:
        nb_rmsnorm_forward_f64(out, c2, x, g, bb, o->B, o->C, o->k, &o->cfg);
        break;
    case OP_BN_TRAIN:
        nb_batchnorm_forward_f64(out, c1, c2, NULL, NULL, x, g, bb, o->B, o->C, 1, &o->cfg);
        break;
    case OP_BN_EVAL: {
        double *rm = dzeros(o->C), *rv = dzeros(o->C);
        memcpy(rm, o->rm, o->C * sizeof *rm);
        memcpy(rv, o->rv, o->C * sizeof *rv);
        nb_batchnorm_forward_f64(out, c1, c2, rm, rv, x, g, bb, o->B, o->C, 0, &o->cfg);
        free(rm);
        free(rv);
        break;
    }
    case OP_WEIGHT:
        nb_weightnorm_forward_f64(out, c2, x, g, o->B, o->C);
        break;
    }
}

static void op_bwd(const op *o, double *dx, double *dg, double *db, const double *dy,
                   const double *x, const double *g, const double *c1, const double *c2) {
    switch (o->kind) {
    case OP_LAYER:
        nb_layernorm_backward_f64(dx, dg, db, dy, x, g, c1, c2, o->B, o->C, &o->cfg);
        break;
    case OP_RMS:
        nb_rmsnorm_backward_f64(dx, dg, db, dy, x, g, c2, o->B, o->C, o->k, &o->cfg);
        break;
    case OP_BN_TRAIN:
    case OP_BN_EVAL:
        nb_batchnorm_backward_f64(dx, dg, db, dy, x, g, c1, c2, o->B, o->C, o->kind == OP_BN_TRAIN,
                                  &o->cfg);
        break;
    case OP_WEIGHT:
        nb_weightnorm_backward_f64(dx, dg, dy, x, g, c2, o->B, o->C);
        break;
    }
}

static double op_loss(const op *o, const double *x, const double *g, const double *b,
                      const double *w) {
    size_t n = (size_t)o->B * o->C;
    double *out = dzeros(n), *c1 = dzeros(o->B + o->C), *c2 = dzeros(o->B + o->C);
    op_fwd(o, out, c1, c2, x, g, b);
    double L = 0;
    for (size_t i = 0; i < n; i++)
        L += w[i] * out[i];
    free(out);
    free(c1);
    free(c2);
    return L;
}

/* Central difference with step h and one Richardson step: error O(h^4) + rounding/h. h is
 * scaled to the spread of the values perturbed. */
static double fd(const op *o, double h, double *p, const double *x, const double *g,
                 const double *b, const double *w) {
    const double p0 = *p;
    double d[2];
    for (int j = 0; j < 2; j++) {
        double hh = j ? h / 2 : h;
        *p = p0 + hh;
        double lp = op_loss(o, x, g, b, w);
        *p = p0 - hh;
        double lm = op_loss(o, x, g, b, w);
        *p = p0;
        d[j] = (lp - lm) / (2 * hh);
    }
    return (4 * d[1] - d[0]) / 3;
}

/* Gradient check of op o on random x (scale, shift), gains ~1, biases, loss sum(w * out). */
static void gradcheck(const op *o, double xscale, double xshift) {
    size_t n = (size_t)o->B * o->C, np = nparam(o);
    double *x = dvec(n, xscale, xshift), *g = dvec(np, 0.3, 1.0), *b = dvec(np, 0.2, 0.0);
    double *w = dvec(n, 1.0, 0.0);
    double *out = dzeros(n), *c1 = dzeros(o->B + o->C), *c2 = dzeros(o->B + o->C);
    double *dx = dzeros(n), *dg = dzeros(np), *db = dzeros(np);
    op_fwd(o, out, c1, c2, x, g, b);
    op_bwd(o, dx, dg, o->has_b ? db : NULL, w, x, g, c1, c2);
    const double atol = 1e-9, rtol = 1e-6;
    for (size_t i = 0; i < n; i++)
        assert_close(dx[i], fd(o, 1e-3 * xscale, &x[i], x, g, b, w), atol, rtol);
    for (size_t i = 0; i < np; i++)
        assert_close(dg[i], fd(o, 1e-3, &g[i], x, g, b, w), atol, rtol);
    if (o->has_b)
        for (size_t i = 0; i < np; i++)
            assert_close(db[i], fd(o, 1e-3, &b[i], x, g, b, w), atol, rtol);
    free(x);
    free(g);
    free(b);
    free(w);
    free(out);
    free(c1);
    free(c2);
    free(dx);
    free(dg);
    free(db);
}

static op mk(op_kind kind, int B, int C, double eps, int outside, int has_b) {
    op o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.B = B;
    o.C = C;
    o.k = C;
    o.has_b = has_b;
    nb_norm_cfg_default(&o.cfg, kind == OP_LAYER ? NB_NORM_LAYER : NB_NORM_RMS);
    o.cfg.eps = eps;
    o.cfg.eps_outside = outside;
    return o;
}

/* ---- gradient checks ----------------------------------------------------------------------- */

static void test_grad_layer(void **state) {
    (void)state;
    for (int outside = 0; outside <= 1; outside++)
        for (int has_b = 0; has_b <= 1; has_b++) {
            op o = mk(OP_LAYER, 3, 7, 1e-5, outside, has_b);
            gradcheck(&o, 1.5, 0.4);
        }
    /* small variance: eps matters, outside form's dr/dvar = -r^2/(2 sqrt(var)) */
    op o = mk(OP_LAYER, 2, 5, 1e-3, 1, 1);
    gradcheck(&o, 0.02, 1.0);
    o.cfg.eps_outside = 0;
    gradcheck(&o, 0.02, 1.0);
}

static void test_grad_rms(void **state) {
    (void)state;
    for (int outside = 0; outside <= 1; outside++)
        for (int has_b = 0; has_b <= 1; has_b++) {
            op o = mk(OP_RMS, 3, 9, 1e-5, outside, has_b);
            gradcheck(&o, 1.0, 0.2);
        }
    op o = mk(OP_RMS, 2, 6, 1e-2, 1, 0); /* eps comparable to the RMS */
    gradcheck(&o, 0.05, 0.0);
}

static void test_grad_prms(void **state) {
    (void)state;
    /* k as the two roundings give it */
    assert_int_equal(nb_prms_k(37, 0.0625, 0), 3); /* 2.3125: ceil */
    assert_int_equal(nb_prms_k(37, 0.0625, 1), 2); /* floor */
    assert_int_equal(nb_prms_k(37, 0.02, 0), 1);   /* 0.74 */
    assert_int_equal(nb_prms_k(37, 0.02, 1), 1);   /* floor 0, clamped to 1 */
    assert_int_equal(nb_prms_k(37, 1.0, 0), 37);   /* k == n */
    const double ps[] = {0.0625, 0.02, 1.0, 0.3};
    for (int pi = 0; pi < 4; pi++)
        for (int fl = 0; fl <= 1; fl++)
            for (int outside = 0; outside <= 1; outside++) {
                op o = mk(OP_RMS, 2, 37, 1e-5, outside, (pi + fl) & 1);
                o.cfg.p = ps[pi];
                o.cfg.p_floor = fl;
                o.k = nb_prms_k(o.C, o.cfg.p, o.cfg.p_floor);
                gradcheck(&o, 1.0, 0.0);
            }
}

static void test_grad_batch(void **state) {
    (void)state;
    for (int outside = 0; outside <= 1; outside++)
        for (int unb = 0; unb <= 1; unb++) {
            op o = mk(OP_BN_TRAIN, 6, 5, 1e-5, outside, 1);
            o.cfg.bn_unbiased_batch = unb;
            gradcheck(&o, 2.0, -0.5);
        }
    op o = mk(OP_BN_TRAIN, 4, 3, 1e-5, 0, 0);
    gradcheck(&o, 1.0, 0.0);
    double rm[5] = {0.1, -0.3, 0.5, 0, 2}, rv[5] = {1.2, 0.5, 2.0, 0.9, 0.01};
    for (int outside = 0; outside <= 1; outside++) {
        op e = mk(OP_BN_EVAL, 6, 5, 1e-5, outside, 1);
        e.rm = rm;
        e.rv = rv;
        gradcheck(&e, 1.0, 0.3);
    }
}

static void test_grad_weight(void **state) {
    (void)state;
    op o = mk(OP_WEIGHT, 4, 9, 0, 0, 0);
    gradcheck(&o, 0.5, 0.0);
    gradcheck(&o, 1e-3, 0.0); /* small but unfloored norms */
}

/* ---- hand-computed forward values ---------------------------------------------------------- */

static void test_forward_values(void **state) {
    (void)state;
    const double x[8] = {1, 2, 3, 4, -2, 0, 2, 4}, g[4] = {1, 2, 1, 0.5}, b[4] = {0, 0, 1, 0};
    double y[8], m[2], r[2];
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
    /* LN row 1: mean 2.5, var 1.25; row 2: mean 1, var 5 */
    nb_layernorm_forward_f64(y, m, r, x, g, b, 2, 4, &cfg);
    double r1 = 1 / sqrt(1.25 + 1e-5), r2 = 1 / sqrt(5 + 1e-5);
    assert_close(m[0], 2.5, 1e-15, 0);
    assert_close(m[1], 1.0, 1e-15, 0);
    assert_close(r[0], r1, 0, 1e-14);
    assert_close(y[0], -1.5 * r1, 0, 1e-14);
    assert_close(y[1], 2 * -0.5 * r1, 0, 1e-14);
    assert_close(y[2], 0.5 * r1 + 1, 0, 1e-14);
    assert_close(y[3], 0.5 * 1.5 * r1, 0, 1e-14);
    assert_close(y[4], -3 * r2, 0, 1e-14);
    cfg.eps_outside = 1; /* 1/(sqrt(var) + eps) */
    nb_layernorm_forward_f64(y, m, r, x, g, NULL, 2, 4, &cfg);
    assert_close(r[0], 1 / (sqrt(1.25) + 1e-5), 0, 1e-14);
    assert_close(y[7], 0.5 * 3 / (sqrt(5.0) + 1e-5), 0, 1e-14);
    /* RMS row 1: mean square 30/4 = 7.5; pRMS k = 2: (1+4)/2 = 2.5, applied to all 4 */
    cfg.eps_outside = 0;
    nb_rmsnorm_forward_f64(y, r, x, g, NULL, 2, 4, 4, &cfg);
    assert_close(r[0], 1 / sqrt(7.5 + 1e-5), 0, 1e-14);
    assert_close(y[3], 0.5 * 4 / sqrt(7.5 + 1e-5), 0, 1e-14);
    assert_close(y[4], -2 / sqrt(6.0 + 1e-5), 0, 1e-14); /* (4+0+4+16)/4 = 6 */
    nb_rmsnorm_forward_f64(y, r, x, g, b, 2, 4, 2, &cfg);
    assert_close(r[0], 1 / sqrt(2.5 + 1e-5), 0, 1e-14);
    assert_close(y[2], 3 / sqrt(2.5 + 1e-5) + 1, 0, 1e-14);
    assert_close(y[7], 0.5 * 4 / sqrt(2.0 + 1e-5), 0, 1e-14); /* (4+0)/2 = 2 */
    cfg.eps_outside = 1;
    cfg.eps = 1e-8;
    nb_rmsnorm_forward_f64(y, r, x, g, NULL, 2, 4, 1, &cfg); /* k = 1: |x_0| */
    assert_close(r[0], 1 / (1 + 1e-8), 0, 1e-14);
    assert_close(r[1], 1 / (2 + 1e-8), 0, 1e-14);
    /* WeightNorm: v = (3, 4) -> ||v|| = 5 */
    const double v[4] = {3, 4, 0, 0}, gw[2] = {2, 1};
    double w[4], vn[2];
    nb_weightnorm_forward_f64(w, vn, v, gw, 2, 2);
    assert_close(vn[0], 5, 0, 1e-15);
    assert_close(w[0], 1.2, 0, 1e-15);
    assert_close(w[1], 1.6, 0, 1e-15);
}

static void test_batchnorm_values(void **state) {
    (void)state;
    /* column 0: 1,2,3,4 -> mean 2.5, biased var 1.25, unbiased 5/3;
     * column 1: 0,0,2,2 -> mean 1, biased var 1, unbiased 4/3 */
    const double x[8] = {1, 0, 2, 0, 3, 2, 4, 2}, g[2] = {1, 1}, b[2] = {0, 0};
    double y[8], m[2], r[2], rm[2] = {0, 1}, rv[2] = {1, 2};
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
    cfg.eps = 1e-6;
    nb_batchnorm_forward_f64(y, m, r, rm, rv, x, g, b, 4, 2, 1, &cfg);
    assert_close(m[0], 2.5, 1e-15, 0);
    assert_close(r[0], 1 / sqrt(1.25 + 1e-6), 0, 1e-14);
    assert_close(y[0], -1.5 / sqrt(1.25 + 1e-6), 0, 1e-14);
    assert_close(y[5], 1 / sqrt(1 + 1e-6), 0, 1e-14);
    assert_close(rm[0], 0.25, 1e-15, 0);                /* 0.9*0 + 0.1*2.5 */
    assert_close(rm[1], 1.0, 1e-15, 0);                 /* 0.9*1 + 0.1*1 */
    assert_close(rv[0], 0.9 + 0.1 * 5.0 / 3, 0, 1e-14); /* unbiased running */
    assert_close(rv[1], 1.8 + 0.1 * 4.0 / 3, 0, 1e-14);
    /* biased running variance, unbiased batch variance for the normalization, momentum 0.2 */
    double rm2[2] = {0, 1}, rv2[2] = {1, 2};
    cfg.bn_unbiased_running = 0;
    cfg.bn_unbiased_batch = 1;
    cfg.bn_momentum = 0.2;
    nb_batchnorm_forward_f64(y, m, r, rm2, rv2, x, g, b, 4, 2, 1, &cfg);
    assert_close(r[0], 1 / sqrt(5.0 / 3 + 1e-6), 0, 1e-14);
    assert_close(rm2[0], 0.5, 1e-15, 0);
    assert_close(rv2[0], 0.8 + 0.2 * 1.25, 0, 1e-14);
    assert_close(rv2[1], 1.6 + 0.2 * 1.0, 0, 1e-14);
    /* eval: running statistics used and left untouched */
    double rm3[2] = {1, -1}, rv3[2] = {4, 0.25};
    nb_batchnorm_forward_f64(y, m, r, rm3, rv3, x, g, b, 4, 2, 0, &cfg);
    assert_true(rm3[0] == 1 && rm3[1] == -1 && rv3[0] == 4 && rv3[1] == 0.25);
    assert_close(m[1], -1, 0, 0);
    assert_close(r[0], 1 / sqrt(4 + 1e-6), 0, 1e-14);
    assert_close(y[0], 0, 1e-15, 0);
    assert_close(y[3], 1 / sqrt(0.25 + 1e-6), 0, 1e-14);
    /* float version updates the same way */
    float xf[8], gf[2] = {1, 1}, yf[8], mf[2], rf[2], rmf[2] = {0, 1}, rvf[2] = {1, 2};
    for (int i = 0; i < 8; i++)
        xf[i] = (float)x[i];
    nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
    nb_batchnorm_forward(yf, mf, rf, rmf, rvf, xf, gf, NULL, 4, 2, 1, &cfg);
    assert_close(rmf[0], 0.25, 1e-7, 0);
    assert_close(rvf[0], 0.9 + 0.1 * 5.0 / 3, 0, 1e-6);
}

static void test_weightnorm_zero_row(void **state) {
    (void)state;
    double v[6] = {0, 0, 0, 1, 2, 2}, g[2] = {1.5, 2}, w[6], vn[2];
    nb_weightnorm_forward_f64(w, vn, v, g, 2, 3);
    assert_true(vn[0] > 0);
    for (int i = 0; i < 6; i++)
        assert_true(isfinite(w[i]));
    assert_close(w[0], 0, 0, 0);
    assert_close(w[4], 2 * 2 / 3.0, 0, 1e-15);
    double dw[6] = {1, -1, 0.5, 1, 1, 1}, dv[6] = {0}, dg[2] = {0};
    nb_weightnorm_backward_f64(dv, dg, dw, v, g, vn, 2, 3);
    for (int i = 0; i < 6; i++)
        assert_true(isfinite(dv[i]));
    assert_true(isfinite(dg[0]) && isfinite(dg[1]));
    float vf[6] = {0, 0, 0, 1, 2, 2}, gf[2] = {1.5f, 2}, wf[6], vnf[2], dwf[6] = {1, 1, 1, 1, 1, 1};
    float dvf[6] = {0}, dgf[2] = {0};
    nb_weightnorm_forward(wf, vnf, vf, gf, 2, 3);
    nb_weightnorm_backward(dvf, dgf, dwf, vf, gf, vnf, 2, 3);
    for (int i = 0; i < 6; i++)
        assert_true(isfinite(wf[i]) && isfinite(dvf[i]));
    assert_true(wf[0] == 0);
}

/* ---- float vs double, accumulation, determinism --------------------------------------------- */

/* Runs op o in float and double on the same data and compares output and every gradient;
 * then runs the float backward a second time into the same buffers and checks it doubled. */
static void float_vs_double(const op *o, double tol) {
    size_t n = (size_t)o->B * o->C, np = nparam(o), nc = (size_t)o->B + o->C;
    double *x = dvec(n, 1.3, 0.2), *g = dvec(np, 0.3, 1.0), *b = dvec(np, 0.2, 0.0);
    double *dy = dvec(n, 1.0, 0.0), *y = dzeros(n), *c1 = dzeros(nc), *c2 = dzeros(nc);
    double *dx = dzeros(n), *dg = dzeros(np), *db = dzeros(np);
    /* round the inputs to float so both precisions see the same numbers */
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)x[i];
        dy[i] = (float)dy[i];
    }
    for (size_t i = 0; i < np; i++) {
        g[i] = (float)g[i];
        b[i] = (float)b[i];
    }
    float *xf = to_f(x, n), *gf = to_f(g, np), *bf = to_f(b, np), *dyf = to_f(dy, n);
    float *yf = fzeros(n), *c1f = fzeros(nc), *c2f = fzeros(nc);
    float *dxf = fzeros(n), *dgf = fzeros(np), *dbf = fzeros(np);
    const float *bfb = o->has_b ? bf : NULL;
    float *dbfb = o->has_b ? dbf : NULL;
    op_fwd(o, y, c1, c2, x, g, b);
    op_bwd(o, dx, dg, o->has_b ? db : NULL, dy, x, g, c1, c2);
    for (int rep = 0; rep < 2; rep++) {
        switch (o->kind) {
        case OP_LAYER:
            nb_layernorm_forward(yf, c1f, c2f, xf, gf, bfb, o->B, o->C, &o->cfg);
            nb_layernorm_backward(dxf, dgf, dbfb, dyf, xf, gf, c1f, c2f, o->B, o->C, &o->cfg);
            break;
        case OP_RMS:
            nb_rmsnorm_forward(yf, c2f, xf, gf, bfb, o->B, o->C, o->k, &o->cfg);
            nb_rmsnorm_backward(dxf, dgf, dbfb, dyf, xf, gf, c2f, o->B, o->C, o->k, &o->cfg);
            break;
        case OP_BN_TRAIN:
            nb_batchnorm_forward(yf, c1f, c2f, NULL, NULL, xf, gf, bfb, o->B, o->C, 1, &o->cfg);
            nb_batchnorm_backward(dxf, dgf, dbfb, dyf, xf, gf, c1f, c2f, o->B, o->C, 1, &o->cfg);
            break;
        case OP_BN_EVAL:
            fail_msg("not used");
            break;
        case OP_WEIGHT:
            nb_weightnorm_forward(yf, c2f, xf, gf, o->B, o->C);
            nb_weightnorm_backward(dxf, dgf, dyf, xf, gf, c2f, o->B, o->C);
            break;
        }
        if (rep == 0) {
            check_vec_f("y", yf, y, n, tol, tol);
            check_vec_f("dx", dxf, dx, n, tol, tol);
            check_vec_f("dg", dgf, dg, np, tol, tol);
            if (o->has_b) check_vec_f("db", dbf, db, np, tol, tol);
            /* the second pass must add exactly the same again */
            for (size_t i = 0; i < n; i++)
                dx[i] = dxf[i];
            for (size_t i = 0; i < np; i++) {
                dg[i] = dgf[i];
                db[i] = dbf[i];
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        assert_close(dxf[i], 2 * dx[i], 0, 1e-6);
    for (size_t i = 0; i < np; i++) {
        assert_close(dgf[i], 2 * dg[i], 0, 1e-6);
        if (o->has_b) assert_close(dbf[i], 2 * db[i], 0, 1e-6);
    }
    free(x);
    free(g);
    free(b);
    free(dy);
    free(y);
    free(c1);
    free(c2);
    free(dx);
    free(dg);
    free(db);
    free(xf);
    free(gf);
    free(bf);
    free(dyf);
    free(yf);
    free(c1f);
    free(c2f);
    free(dxf);
    free(dgf);
    free(dbf);
}

static void test_float_vs_double(void **state) {
    (void)state;
    /* small (serial) and large (B*C >= the parallel threshold: row-parallel kernels, per-thread
     * gain/bias partials, several BN column blocks) */
    const int shapes[2][2] = {{5, 37}, {300, 1030}};
    for (int s = 0; s < 2; s++) {
        int B = shapes[s][0], C = shapes[s][1];
        for (int outside = 0; outside <= 1; outside++) {
            op o = mk(OP_LAYER, B, C, 1e-5, outside, 1);
            float_vs_double(&o, 2e-5);
            o = mk(OP_RMS, B, C, 1e-5, outside, outside);
            float_vs_double(&o, 2e-5);
            o.k = nb_prms_k(C, 0.0625, 0);
            float_vs_double(&o, 2e-5);
            o = mk(OP_BN_TRAIN, B, C, 1e-5, outside, 1);
            float_vs_double(&o, 2e-5);
        }
        op o = mk(OP_WEIGHT, B, C, 0, 0, 0);
        float_vs_double(&o, 2e-5);
    }
}

/* Same inputs twice on the parallel path: bitwise identical results. */
static void test_deterministic(void **state) {
    (void)state;
    const int B = 400, C = 700;
    size_t n = (size_t)B * C;
    double *xd = dvec(n, 1, 0.1), *dyd = dvec(n, 1, 0), *gd = dvec(C, 0.3, 1);
    float *x = to_f(xd, n), *dy = to_f(dyd, n), *g = to_f(gd, C);
    float *y = fzeros(n), *m = fzeros(B), *r = fzeros(B);
    float *dx[2] = {fzeros(n), fzeros(n)}, *dg[2] = {fzeros(C), fzeros(C)};
    float *db[2] = {fzeros(C), fzeros(C)};
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
    nb_layernorm_forward(y, m, r, x, g, NULL, B, C, &cfg);
    for (int t = 0; t < 2; t++)
        nb_layernorm_backward(dx[t], dg[t], db[t], dy, x, g, m, r, B, C, &cfg);
    assert_memory_equal(dx[0], dx[1], n * sizeof(float));
    assert_memory_equal(dg[0], dg[1], C * sizeof(float));
    assert_memory_equal(db[0], db[1], C * sizeof(float));
    nb_rmsnorm_forward(y, r, x, g, NULL, B, C, 44, &cfg);
    for (int t = 0; t < 2; t++)
        nb_rmsnorm_backward(dx[t], dg[t], db[t], dy, x, g, r, B, C, 44, &cfg);
    assert_memory_equal(dx[0], dx[1], n * sizeof(float));
    assert_memory_equal(dg[0], dg[1], C * sizeof(float));
    free(xd);
    free(dyd);
    free(gd);
    free(x);
    free(dy);
    free(g);
    free(y);
    free(m);
    free(r);
    for (int t = 0; t < 2; t++) {
        free(dx[t]);
        free(dg[t]);
        free(db[t]);
    }
}

/* BatchNorm on many rows takes the row-chunk kernels (statistics merged over row blocks): the
 * double build against a direct two-pass computation, every variant; the float build identical
 * with 1 and 2 threads (the chunks do not depend on the thread count). The mean is shifted far
 * from 0 so that a one-pass E[x^2] - E[x]^2 would lose the variance. */
static void test_batchnorm_rows(void **state) {
    (void)state;
    const int B = 3001, C = 97; /* > 1,024 rows: the row path, parallel; odd sizes */
    size_t n = (size_t)B * C;
    double *x = dvec(n, 0.5, 300.0), *dy = dvec(n, 1, 0), *g = dvec(C, 0.3, 1),
           *b = dvec(C, 0.2, 0);
    double *y = dzeros(n), *dx = dzeros(n), *m = dzeros(C), *r = dzeros(C), *dg = dzeros(C);
    double *db = dzeros(C), *rm = dzeros(C), *rv = dzeros(C);
    for (int variant = 0; variant < 4; variant++) {
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
        cfg.eps_outside = variant & 1;
        cfg.bn_unbiased_batch = variant >> 1;
        for (int c = 0; c < C; c++)
            rm[c] = 0, rv[c] = 1, dg[c] = db[c] = 0;
        memset(dx, 0, n * sizeof *dx);
        nb_batchnorm_forward_f64(y, m, r, rm, rv, x, g, b, B, C, 1, &cfg);
        nb_batchnorm_backward_f64(dx, dg, db, dy, x, g, m, r, B, C, 1, &cfg);
        for (int c = 0; c < C; c++) {
            double mu = 0, v = 0, sy = 0, syx = 0;
            for (int i = 0; i < B; i++)
                mu += x[(size_t)i * C + c];
            mu /= B;
            for (int i = 0; i < B; i++) {
                double d = x[(size_t)i * C + c] - mu;
                v += d * d;
            }
            double var = v / B, bvar = cfg.bn_unbiased_batch ? v / (B - 1) : var;
            double rs = cfg.eps_outside ? 1 / (sqrt(bvar) + cfg.eps) : 1 / sqrt(bvar + cfg.eps);
            assert_close(m[c], mu, 0, 1e-13);
            assert_close(r[c], rs, 0, 1e-11);
            assert_close(rm[c], 0.1 * mu, 0, 1e-13);
            assert_close(rv[c], 0.9 + 0.1 * v / (B - 1), 0, 1e-12);
            for (int i = 0; i < B; i++) {
                size_t o = (size_t)i * C + c;
                sy += dy[o];
                syx += dy[o] * (x[o] - mu);
            }
            double D = cfg.bn_unbiased_batch ? B - 1 : B;
            double coef = cfg.eps_outside ? -rs * rs / (sqrt(bvar) * D) : -rs * rs * rs / D;
            assert_close(dg[c], rs * syx, 1e-9, 1e-9);
            assert_close(db[c], sy, 1e-9, 1e-9);
            for (int i = 0; i < B; i += 7) {
                size_t o = (size_t)i * C + c;
                assert_close(y[o], g[c] * (x[o] - mu) * rs + b[c], 1e-9, 1e-9);
                double want =
                    g[c] * rs * dy[o] - g[c] * rs * sy / B + (x[o] - mu) * coef * g[c] * syx;
                assert_close(dx[o], want, 1e-8, 1e-8);
            }
        }
    }
    /* float: the same bits with 1 and 2 threads */
    float *xf = to_f(x, n), *dyf = to_f(dy, n), *gf = to_f(g, C), *bf = to_f(b, C);
    float *yf[2] = {fzeros(n), fzeros(n)}, *dxf[2] = {fzeros(n), fzeros(n)};
    float *mf[2] = {fzeros(C), fzeros(C)}, *rf[2] = {fzeros(C), fzeros(C)};
    float *dgf[2] = {fzeros(C), fzeros(C)}, *dbf[2] = {fzeros(C), fzeros(C)};
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
    int threads = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        nb_batchnorm_forward(yf[t], mf[t], rf[t], NULL, NULL, xf, gf, bf, B, C, 1, &cfg);
        nb_batchnorm_backward(dxf[t], dgf[t], dbf[t], dyf, xf, gf, mf[t], rf[t], B, C, 1, &cfg);
    }
    omp_set_num_threads(threads);
    assert_memory_equal(yf[0], yf[1], n * sizeof(float));
    assert_memory_equal(dxf[0], dxf[1], n * sizeof(float));
    assert_memory_equal(mf[0], mf[1], C * sizeof(float));
    assert_memory_equal(rf[0], rf[1], C * sizeof(float));
    assert_memory_equal(dgf[0], dgf[1], C * sizeof(float));
    assert_memory_equal(dbf[0], dbf[1], C * sizeof(float));
    for (int c = 0; c < C; c++) {
        assert_close(mf[0][c], m[c], 0, 1e-6);
        /* float statistics of data 600 spreads from zero (the shifted sums): rstd to 1e-6
         * of the two-pass one in double over the same float values */
        double mu, v;
        col_moments(xf, B, C, c, &mu, &v);
        assert_close(rf[0][c], 1 / sqrt(v + cfg.eps), 0, 1e-6);
    }
    free(xf), free(dyf), free(gf), free(bf);
    for (int t = 0; t < 2; t++)
        free(yf[t]), free(dxf[t]), free(mf[t]), free(rf[t]), free(dgf[t]), free(dbf[t]);
    free(x), free(dy), free(g), free(b), free(y), free(dx), free(m), free(r), free(dg), free(db);
    free(rm), free(rv);
}

/* Outputs of >= 64 MiB take the streaming-store path; it must give exactly what the row-by-row
 * (cached-store) path gives: with an odd C rows start unaligned (streamed through a buffer),
 * with C = 1024 and a 64-byte aligned output every row is streamed straight from the vector
 * registers. BatchNorm's streamed output must be exactly g ((x - mean) rstd) + b with the
 * statistics it returned. */
static void test_streaming_path(void **state) {
    (void)state;
    const int shapes[2][2] = {{16384, 1025}, {16400, 1024}};
    for (int s = 0; s < 2; s++) {
        const int B = shapes[s][0], C = shapes[s][1];
        size_t n = (size_t)B * C;
        float *x = fzeros(n), *g = fzeros(C), *b = fzeros(C);
        float *y = aligned_alloc(64, n * sizeof(float));
        float *m = fzeros(B), *r = fzeros(B), *row = fzeros(C), mm, rr;
        float *bm = fzeros(C), *br = fzeros(C), *rm = fzeros(C), *rv = fzeros(C);
        assert_non_null(y);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(((i * 2654435761u) >> 7) % 2000) * 1e-3f - 0.9f;
        for (int i = 0; i < C; i++) {
            g[i] = 1 + 0.001f * (float)i;
            b[i] = 0.01f * (float)(i % 7);
            rv[i] = 1;
        }
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
        nb_layernorm_forward(y, m, r, x, g, b, B, C, &cfg);
        for (int i = 0; i < B; i += 97) {
            nb_layernorm_forward(row, &mm, &rr, x + (size_t)i * C, g, b, 1, C, &cfg);
            assert_memory_equal(row, y + (size_t)i * C, C * sizeof(float));
            assert_true(mm == m[i] && rr == r[i]);
        }
        nb_rmsnorm_forward(y, r, x, g, NULL, B, C, 64, &cfg);
        for (int i = B - 1; i >= 0; i -= 89) {
            nb_rmsnorm_forward(row, &rr, x + (size_t)i * C, g, NULL, 1, C, 64, &cfg);
            assert_memory_equal(row, y + (size_t)i * C, C * sizeof(float));
        }
        nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
        nb_batchnorm_forward(y, bm, br, rm, rv, x, g, b, B, C, 1, &cfg);
        for (int i = 0; i < B; i += 83) {
            const float *xi = x + (size_t)i * C, *yi = y + (size_t)i * C;
            for (int c = 0; c < C; c++)
                assert_true(yi[c] == g[c] * ((xi[c] - bm[c]) * br[c]) + b[c]);
        }
        free(x), free(y), free(g), free(b), free(m), free(r), free(row);
        free(bm), free(br), free(rm), free(rv);
    }
}

/* The _set backward passes write dx without reading it: the same values as the += passes on a
 * zeroed dx (NaN left in dx beforehand must not show), the same dg and db, on every BatchNorm
 * path (fewer than 64 rows, column blocks, row chunks, row chunks with streamed stores, the
 * statistics over processes) and LayerNorm/RMSNorm/pRMSNorm serial and threaded. */
static void bn_sum_one(void *ctx, double *x, int n) {
    (void)ctx, (void)x, (void)n; /* one process: its sums are the global sums */
}

/* BatchNorm's column-block forward (64 to 1,024 rows) normalizes each block right after its
 * statistics: y must be g ((x - mean) rstd) + b of the mean and rstd it returns, in float, value
 * for value, on full and partial blocks, with and without a bias, on 1 and 2 threads. */
static void test_batchnorm_fused_cols(void **state) {
    (void)state;
    const int shapes[][2] = {{128, 1000}, {64, 100}, {200, 64}, {1024, 130}, {77, 7}};
    const int threads = omp_get_max_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int B = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)B * C;
        double *xd = dvec(n, 2.0, 3.0);
        float *x = to_f(xd, n), *y = fzeros(n), *g = fzeros(C), *b = fzeros(C);
        float *m = fzeros(C), *r = fzeros(C);
        for (int c = 0; c < C; c++) {
            g[c] = 0.5f + 0.01f * (float)(c % 17);
            b[c] = -0.25f + 0.02f * (float)(c % 5);
        }
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
        for (int t = 1; t <= 2; t++)
            for (int with_b = 0; with_b < 2; with_b++) {
                omp_set_num_threads(t);
                nb_batchnorm_forward(y, m, r, NULL, NULL, x, g, with_b ? b : NULL, B, C, 1, &cfg);
                for (size_t i = 0; i < n; i++) {
                    const int c = (int)(i % (size_t)C);
                    float want = g[c] * ((x[i] - m[c]) * r[c]);
                    if (with_b) want += b[c];
                    if (!(y[i] == want))
                        fail_msg("%dx%d, %d thread(s), bias %d: y[%zu] %.9g, want %.9g", B, C, t,
                                 with_b, i, y[i], want);
                }
                for (int c = 0; c < C; c++) { /* the statistics themselves, against double */
                    double mu, v;
                    col_moments(x, B, C, c, &mu, &v);
                    assert_close(m[c], mu, 1e-6, 1e-6);
                    assert_close(r[c], 1 / sqrt(v + cfg.eps), 1e-6, 0);
                }
            }
        omp_set_num_threads(threads);
        free(xd), free(x), free(y), free(g), free(b), free(m), free(r);
    }
}

static void test_backward_set(void **state) {
    (void)state;
    const int shapes[][2] = {{30, 70}, {200, 100}, {4096, 300}, {640, 1000}, {16400, 1024}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int B = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)B * C, bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        float *x = fzeros(n), *dy = fzeros(n), *y = aligned_alloc(64, bytes);
        float *dx0 = aligned_alloc(64, bytes), *dx1 = aligned_alloc(64, bytes);
        float *g = fzeros(C), *b = fzeros(C), *m = fzeros(B > C ? B : C),
              *r = fzeros(B > C ? B : C);
        float *rm = fzeros(C), *rv = fzeros(C), *dg0 = fzeros(C), *db0 = fzeros(C);
        float *dg1 = fzeros(C), *db1 = fzeros(C);
        assert_non_null(y), assert_non_null(dx0), assert_non_null(dx1);
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)(((i * 2654435761u) >> 9) % 1000) * 2e-3f - 0.8f;
            dy[i] = (float)(((i * 40503u) >> 3) % 997) * 1e-3f - 0.5f;
        }
        for (int c = 0; c < C; c++) {
            g[c] = 1 + 0.01f * (float)(c % 13);
            b[c] = 0.1f;
            rv[c] = 1;
        }
        for (int kind = 0; kind < 5; kind++) { /* layer, rms, prms, batch, batch over processes */
            if (kind < 3 && s == 4) continue;  /* the row-wise norms' paths are covered below */
            nb_norm_cfg cfg;
            nb_norm_cfg_default(&cfg, kind < 3 ? NB_NORM_LAYER : NB_NORM_BATCH);
            if (kind == 4) cfg.bn_sum = bn_sum_one;
            memset(dx0, 0, n * sizeof(float));
            for (size_t i = 0; i < n; i++)
                dx1[i] = NAN;
            memset(dg0, 0, C * sizeof(float)), memset(db0, 0, C * sizeof(float));
            memset(dg1, 0, C * sizeof(float)), memset(db1, 0, C * sizeof(float));
            const int k = kind == 2 ? (C + 15) / 16 : C;
            if (kind == 0) {
                nb_layernorm_forward(y, m, r, x, g, b, B, C, &cfg);
                nb_layernorm_backward(dx0, dg0, db0, dy, x, g, m, r, B, C, &cfg);
                nb_layernorm_backward_set(dx1, dg1, db1, dy, x, g, m, r, B, C, &cfg);
            } else if (kind < 3) {
                nb_rmsnorm_forward(y, r, x, g, b, B, C, k, &cfg);
                nb_rmsnorm_backward(dx0, dg0, db0, dy, x, g, r, B, C, k, &cfg);
                nb_rmsnorm_backward_set(dx1, dg1, db1, dy, x, g, r, B, C, k, &cfg);
            } else {
                nb_batchnorm_forward(y, m, r, rm, rv, x, g, b, B, C, 1, &cfg);
                nb_batchnorm_backward(dx0, dg0, db0, dy, x, g, m, r, B, C, 1, &cfg);
                nb_batchnorm_backward_set(dx1, dg1, db1, dy, x, g, m, r, B, C, 1, &cfg);
            }
            for (size_t i = 0; i < n; i++)
                if (!(dx0[i] == dx1[i]))
                    fail_msg("kind %d, %dx%d: dx[%zu] %g (+=) vs %g (set)", kind, B, C, i,
                             (double)dx0[i], (double)dx1[i]);
            assert_memory_equal(dg0, dg1, C * sizeof(float));
            assert_memory_equal(db0, db1, C * sizeof(float));
        }
        free(x), free(dy), free(y), free(dx0), free(dx1), free(g), free(b), free(m), free(r);
        free(rm), free(rv), free(dg0), free(db0), free(dg1), free(db1);
    }
}

/* ---- PyTorch reference tensors -------------------------------------------------------------- */

static ref_file REF;
static int ref_loaded;

static const ref_tensor *need(const char *cs, const char *what) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", cs, what);
    const ref_tensor *t = ref_get(&REF, name);
    if (!t) fail_msg("reference tensor '%s' missing from norm.bin", name);
    return t;
}

static void load_ref(void) {
    if (!ref_loaded) {
        if (ref_load(&REF, "norm.bin") != 0)
            fail_msg("cannot load tests/ref/norm.bin (regenerate: /usr/bin/python3 "
                     "tests/ref/ref_norm.py)");
        ref_loaded = 1;
    }
}

/* Runs one reference case in double (tol_d) and float (tol_f). */
static void ref_case(const char *cs, op_kind kind) {
    load_ref();
    const ref_tensor *cf = need(cs, "cfg");
    const double *cv = cf->data;
    const int w8 = kind == OP_WEIGHT;
    const ref_tensor *X = need(cs, w8 ? "v" : "x"), *G = need(cs, "g"), *DY = need(cs, "dy");
    const ref_tensor *Y = need(cs, "y"), *DX = need(cs, w8 ? "dv" : "dx"), *DG = need(cs, "dg");
    const ref_tensor *Bt = w8 ? NULL : need(cs, "b"), *DB = w8 ? NULL : need(cs, "db");
    op o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.B = (int)X->dims[0];
    o.C = (int)X->dims[1];
    nb_norm_cfg_default(&o.cfg, NB_NORM_LAYER);
    o.cfg.eps = cv[0];
    o.cfg.eps_outside = (int)cv[1];
    o.k = kind == OP_RMS ? (int)cv[2] : o.C;
    o.has_b = !w8 && cv[3] != 0;
    o.cfg.bn_momentum = cv[4];
    o.cfg.bn_unbiased_running = (int)cv[6];
    o.cfg.bn_unbiased_batch = (int)cv[7];
    size_t n = X->n, np = G->n, nc = (size_t)o.B + o.C;
    const double *rm0 = NULL, *rv0 = NULL;
    if (kind == OP_BN_TRAIN || kind == OP_BN_EVAL) {
        rm0 = need(cs, "rm0")->data;
        rv0 = need(cs, "rv0")->data;
    }
    for (int prec = 0; prec < 2; prec++) {
        const double tol = prec == 0 ? 1e-10 : 1e-5;
        double *y = dzeros(n), *dx = dzeros(n), *dg = dzeros(np), *db = dzeros(np);
        double *rm = dzeros(o.C), *rv = dzeros(o.C);
        if (rm0) {
            memcpy(rm, rm0, o.C * sizeof *rm);
            memcpy(rv, rv0, o.C * sizeof *rv);
        }
        const double *b = Bt ? Bt->data : NULL;
        if (prec == 0) {
            double *c1 = dzeros(nc), *c2 = dzeros(nc);
            const double *bb = o.has_b ? b : NULL;
            switch (kind) {
            case OP_LAYER:
                nb_layernorm_forward_f64(y, c1, c2, X->data, G->data, bb, o.B, o.C, &o.cfg);
                break;
            case OP_RMS:
                nb_rmsnorm_forward_f64(y, c2, X->data, G->data, bb, o.B, o.C, o.k, &o.cfg);
                break;
            case OP_BN_TRAIN:
            case OP_BN_EVAL:
                nb_batchnorm_forward_f64(y, c1, c2, rm, rv, X->data, G->data, bb, o.B, o.C,
                                         kind == OP_BN_TRAIN, &o.cfg);
                break;
            case OP_WEIGHT:
                nb_weightnorm_forward_f64(y, c2, X->data, G->data, o.B, o.C);
                break;
            }
            op_bwd(&o, dx, dg, o.has_b ? db : NULL, DY->data, X->data, G->data, c1, c2);
            free(c1);
            free(c2);
        } else {
            float *xf = to_f(X->data, n), *gf = to_f(G->data, np), *dyf = to_f(DY->data, n);
            float *bf = b ? to_f(b, np) : NULL, *bfb = o.has_b ? bf : NULL;
            float *yf = fzeros(n), *dxf = fzeros(n), *dgf = fzeros(np), *dbf = fzeros(np);
            float *c1 = fzeros(nc), *c2 = fzeros(nc), *rmf = to_f(rm, o.C), *rvf = to_f(rv, o.C);
            float *dbfb = o.has_b ? dbf : NULL;
            switch (kind) {
            case OP_LAYER:
                nb_layernorm_forward(yf, c1, c2, xf, gf, bfb, o.B, o.C, &o.cfg);
                nb_layernorm_backward(dxf, dgf, dbfb, dyf, xf, gf, c1, c2, o.B, o.C, &o.cfg);
                break;
            case OP_RMS:
                nb_rmsnorm_forward(yf, c2, xf, gf, bfb, o.B, o.C, o.k, &o.cfg);
                nb_rmsnorm_backward(dxf, dgf, dbfb, dyf, xf, gf, c2, o.B, o.C, o.k, &o.cfg);
                break;
            case OP_BN_TRAIN:
            case OP_BN_EVAL:
                nb_batchnorm_forward(yf, c1, c2, rmf, rvf, xf, gf, bfb, o.B, o.C,
                                     kind == OP_BN_TRAIN, &o.cfg);
                nb_batchnorm_backward(dxf, dgf, dbfb, dyf, xf, gf, c1, c2, o.B, o.C,
                                      kind == OP_BN_TRAIN, &o.cfg);
                break;
            case OP_WEIGHT:
                nb_weightnorm_forward(yf, c2, xf, gf, o.B, o.C);
                nb_weightnorm_backward(dxf, dgf, dyf, xf, gf, c2, o.B, o.C);
                break;
            }
            for (size_t i = 0; i < n; i++) {
                y[i] = yf[i];
                dx[i] = dxf[i];
            }
            for (size_t i = 0; i < np; i++) {
                dg[i] = dgf[i];
                db[i] = dbf[i];
            }
            for (int i = 0; i < o.C; i++) {
                rm[i] = rmf[i];
                rv[i] = rvf[i];
            }
            free(xf);
            free(gf);
            free(dyf);
            free(bf);
            free(yf);
            free(dxf);
            free(dgf);
            free(dbf);
            free(c1);
            free(c2);
            free(rmf);
            free(rvf);
        }
        check_vec_d("y", y, Y->data, n, tol, tol);
        check_vec_d("dx", dx, DX->data, n, tol, tol);
        check_vec_d("dg", dg, DG->data, np, tol, tol);
        if (DB) check_vec_d("db", db, DB->data, np, tol, tol);
        if (rm0) {
            const ref_tensor *RM = need(cs, "rm1"), *RV = need(cs, "rv1");
            check_vec_d("running_mean", rm, RM->data, o.C, tol, tol);
            check_vec_d("running_var", rv, RV->data, o.C, tol, tol);
        }
        free(y);
        free(dx);
        free(dg);
        free(db);
        free(rm);
        free(rv);
    }
}

static void test_ref_layer(void **state) {
    (void)state;
    ref_case("layer_in", OP_LAYER);
    ref_case("layer_out", OP_LAYER);
    ref_case("layer_nob", OP_LAYER);
}

static void test_ref_rms(void **state) {
    (void)state;
    ref_case("rms_in", OP_RMS);
    ref_case("rms_out", OP_RMS);
    /* the k the file was written with is the one the C rounding gives */
    load_ref();
    assert_int_equal((int)need("prms_ceil", "cfg")->data[2], nb_prms_k(37, 0.0625, 0));
    assert_int_equal((int)need("prms_floor", "cfg")->data[2], nb_prms_k(37, 0.0625, 1));
    assert_int_equal((int)need("prms_k1", "cfg")->data[2], nb_prms_k(37, 0.02, 0));
    ref_case("prms_ceil", OP_RMS);
    ref_case("prms_floor", OP_RMS);
    ref_case("prms_k1", OP_RMS);
}

static void test_ref_batch(void **state) {
    (void)state;
    ref_case("batch_train", OP_BN_TRAIN);
    ref_case("batch_eval", OP_BN_EVAL);
}

static void test_ref_weight(void **state) {
    (void)state;
    ref_case("weight", OP_WEIGHT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_layer),
        cmocka_unit_test(test_grad_rms),
        cmocka_unit_test(test_grad_prms),
        cmocka_unit_test(test_grad_batch),
        cmocka_unit_test(test_grad_weight),
        cmocka_unit_test(test_forward_values),
        cmocka_unit_test(test_batchnorm_values),
        cmocka_unit_test(test_weightnorm_zero_row),
        cmocka_unit_test(test_float_vs_double),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_streaming_path),
        cmocka_unit_test(test_backward_set),
        cmocka_unit_test(test_batchnorm_fused_cols),
        cmocka_unit_test(test_batchnorm_rows),
        cmocka_unit_test(test_ref_layer),
        cmocka_unit_test(test_ref_rms),
        cmocka_unit_test(test_ref_batch),
        cmocka_unit_test(test_ref_weight),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ref_free(&REF);
    return rc;
}
