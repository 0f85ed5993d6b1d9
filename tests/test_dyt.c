/* tests/test_dyt.c — nn/norms/dyt.c: the vectorized float tanh against libm's tanh in double over
 * the float range (max ulp error), DyT's finite-difference gradients in double, float against
 * double, the same bits for any thread count, the _set backward, and PyTorch reference tensors
 * (tests/ref/dyt.bin, written by tests/ref/ref_dyt.py).
 *
 * NB_TANH_STRIDE=1 in the environment sweeps every float (a minute or two; the default stride
 * of 61 takes a second). */
#include <omp.h>
#include <string.h>

#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"

/* The bound on nb_tanhf's error: measured 2.54 ulp at most (every float, on an Intel Xeon with
 * AVX-512, and the scalar formula; docs/numerics.md#dyt). */
#define TANH_MAX_ULP 3.0

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static double urand(void) {
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
    double *a = malloc((n ? n : 1) * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = shift + scale * nrand();
    return a;
}

static float *to_f(const double *a, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)a[i];
    return f;
}

static float fbits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bitsf(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* |got - want| in units of float's spacing at want (2^(e-24) for want in [2^(e-1), 2^e)). */
static double ulp_err(float got, double want) {
    int e;
    frexp(want, &e);
    double ulp = ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
    return fabs((double)got - want) / ulp;
}

/* ---- the float tanh ------------------------------------------------------------------------ */

static void test_tanh_sweep(void **state) {
    (void)state;
    const char *s = getenv("NB_TANH_STRIDE");
    long sv = s ? strtol(s, NULL, 10) : 0;
    uint32_t stride = sv > 0 && sv < 1000000 ? (uint32_t)sv : 61;
    enum { BLK = 4096 };
    static float x[BLK], y[BLK];
    double worst = 0;
    float worst_x = 0;
    uint64_t count = 0;
    /* every stride-th non-negative finite float, and the last one */
    for (uint64_t u = 0; u < 0x7f800000u;) {
        int n = 0;
        for (; n < BLK && u < 0x7f800000u; n++, u += stride)
            x[n] = fbits((uint32_t)u);
        if (u >= 0x7f800000u && n < BLK) x[n++] = fbits(0x7f7fffffu);
        nb_tanhf_array(y, x, (size_t)n);
        for (int i = 0; i < n; i++) {
            if (bitsf(y[i]) != bitsf(nb_tanhf(x[i]))) {
                print_error("nb_tanhf_array(%a) = %a but nb_tanhf gives %a\n", x[i], y[i],
                            nb_tanhf(x[i]));
                fail();
            }
            double e = ulp_err(y[i], tanh((double)x[i]));
            if (e > worst) worst = e, worst_x = x[i];
            /* odd: tanh(-x) is exactly -tanh(x) */
            if (i % 97 == 0 && bitsf(nb_tanhf(-x[i])) != (bitsf(y[i]) ^ 0x80000000u)) {
                print_error("nb_tanhf(-%a) is not -nb_tanhf(%a)\n", x[i], x[i]);
                fail();
            }
        }
        count += (uint64_t)n;
    }
    printf("# nb_tanhf: %llu floats (every %u-th non-negative, %s), max error %.3f ulp at %a\n",
           (unsigned long long)count, stride, nb_tanhf_vectorized() ? "AVX-512" : "scalar", worst,
           worst_x);
    assert_true(worst <= TANH_MAX_ULP);
    /* the special values */
    assert_true(bitsf(nb_tanhf(0.0f)) == 0u);
    assert_true(bitsf(nb_tanhf(-0.0f)) == 0x80000000u);
    assert_true(nb_tanhf(INFINITY) == 1.0f && nb_tanhf(-INFINITY) == -1.0f);
    assert_true(isnan(nb_tanhf(NAN)));
    float sp[5] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN}, sy[5];
    nb_tanhf_array(sy, sp, 5);
    assert_true(bitsf(sy[0]) == 0u && bitsf(sy[1]) == 0x80000000u);
    assert_true(sy[2] == 1.0f && sy[3] == -1.0f && isnan(sy[4]));
    assert_true(nb_tanhf(1e-40f) == 1e-40f); /* subnormal: tanh(x) = x */
}

/* ---- DyT in double: finite differences ------------------------------------------------------ */

static double loss(const double *x, const double *g, const double *b, double a, const double *w,
                   int B, int C) {
    double *y = malloc((size_t)B * C * sizeof *y);
    assert_non_null(y);
    nb_dyt_forward_f64(y, x, g, b, a, B, C);
    double s = 0;
    for (size_t i = 0; i < (size_t)B * C; i++)
        s += w[i] * y[i];
    free(y);
    return s;
}

static double fd(double *p, double h, const double *x, const double *g, const double *b,
                 const double *a, const double *w, int B, int C) {
    const double p0 = *p;
    double d[2];
    for (int j = 0; j < 2; j++) {
        double hh = j ? h / 2 : h;
        *p = p0 + hh;
        double lp = loss(x, g, b, *a, w, B, C);
        *p = p0 - hh;
        double lm = loss(x, g, b, *a, w, B, C);
        *p = p0;
        d[j] = (lp - lm) / (2 * hh);
    }
    return (4 * d[1] - d[0]) / 3;
}

static void gradcheck(int B, int C, double alpha, double xscale, int has_b) {
    size_t n = (size_t)B * C;
    double *x = dvec(n, xscale, 0.1), *g = dvec(C, 0.3, 1.0), *b = dvec(C, 0.2, 0.0);
    double *w = dvec(n, 1.0, 0.0), *dx = calloc(n, sizeof *dx), *dg = calloc(C, sizeof *dg);
    double *db = calloc(C, sizeof *db), da = 0, a = alpha;
    assert_true(dx && dg && db);
    const double *bb = has_b ? b : NULL;
    nb_dyt_backward_f64(dx, dg, has_b ? db : NULL, &da, w, x, g, a, B, C);
    const double atol = 1e-9, rtol = 1e-6;
    for (size_t i = 0; i < n; i++)
        assert_close(dx[i], fd(&x[i], 1e-3 * xscale, x, g, bb, &a, w, B, C), atol, rtol);
    for (int i = 0; i < C; i++)
        assert_close(dg[i], fd(&g[i], 1e-3, x, g, bb, &a, w, B, C), atol, rtol);
    if (has_b)
        for (int i = 0; i < C; i++)
            assert_close(db[i], fd(&b[i], 1e-3, x, g, bb, &a, w, B, C), atol, rtol);
    assert_close(da, fd(&a, 1e-4, x, g, bb, &a, w, B, C), atol, rtol);
    free(x), free(g), free(b), free(w), free(dx), free(dg), free(db);
}

static void test_grad(void **state) {
    (void)state;
    gradcheck(3, 5, 0.5, 1.0, 1);
    gradcheck(4, 37, 0.5, 2.0, 1); /* a vector tail in float's lanes */
    gradcheck(2, 16, 1.7, 0.5, 0);
    gradcheck(40, 20, 0.2, 3.0, 1); /* several groups of rows */
}

/* ---- float against double; the bits of the float kernels ------------------------------------ */

static void test_float_vs_double(void **state) {
    (void)state;
    const int B = 37, C = 101;
    size_t n = (size_t)B * C;
    double *xd = dvec(n, 2.0, 0.1), *gd = dvec(C, 0.3, 1.0), *bd = dvec(C, 0.2, 0.0);
    double *dyd = dvec(n, 1.0, 0.0);
    float *x = to_f(xd, n), *g = to_f(gd, C), *b = to_f(bd, C), *dy = to_f(dyd, n);
    for (size_t i = 0; i < n; i++)
        xd[i] = x[i], dyd[i] = dy[i];
    for (int i = 0; i < C; i++)
        gd[i] = g[i], bd[i] = b[i];
    double *yd = calloc(n, 8), *dxd = calloc(n, 8), *dgd = calloc(C, 8), *dbd = calloc(C, 8);
    float *y = calloc(n, 4), *dx = calloc(n, 4), *dg = calloc(C, 4), *db = calloc(C, 4);
    assert_true(yd && dxd && dgd && dbd && y && dx && dg && db);
    double dad = 0;
    float da = 0, a = 0.5f;
    nb_dyt_forward_f64(yd, xd, gd, bd, a, B, C);
    nb_dyt_backward_f64(dxd, dgd, dbd, &dad, dyd, xd, gd, a, B, C);
    nb_dyt_forward(y, x, g, b, a, B, C);
    nb_dyt_backward(dx, dg, db, &da, dy, x, g, a, B, C);
    for (size_t i = 0; i < n; i++) {
        assert_close(y[i], yd[i], 1e-6, 1e-6);
        assert_close(dx[i], dxd[i], 1e-6, 1e-6);
        /* the forward is the documented float formula, bit for bit: g·t + b in one FMA */
        float want = fmaf(g[i % C], nb_tanhf(a * x[i]), b[i % C]);
        assert_true(bitsf(y[i]) == bitsf(want));
    }
    for (int i = 0; i < C; i++) {
        assert_close(dg[i], dgd[i], 1e-5, 1e-5);
        assert_close(db[i], dbd[i], 1e-5, 1e-5);
    }
    assert_close(da, dad, 1e-4, 1e-5);
    free(xd), free(gd), free(bd), free(dyd), free(x), free(g), free(b), free(dy);
    free(yd), free(dxd), free(dgd), free(dbd), free(y), free(dx), free(dg), free(db);
}

/* dx, dg, db and dalpha: the same bits with 1, 2 and 3 threads (the row groups depend on B
 * only), on a problem large enough to run in parallel; the _set backward the same bits as the
 * += one on a zeroed dinp. */
static void test_threads(void **state) {
    (void)state;
    const int B = 1000, C = 300; /* 300,000 values: above the serial threshold */
    size_t n = (size_t)B * C;
    double *xd = dvec(n, 1.5, 0.1), *dyd = dvec(n, 1, 0), *gd = dvec(C, 0.3, 1);
    float *x = to_f(xd, n), *dy = to_f(dyd, n), *g = to_f(gd, C);
    float *dx[3], *dg[3], *db[3], da[3];
    const int saved = omp_get_max_threads();
    for (int t = 0; t < 3; t++) {
        dx[t] = calloc(n, 4), dg[t] = calloc(C, 4), db[t] = calloc(C, 4), da[t] = 0;
        assert_true(dx[t] && dg[t] && db[t]);
        omp_set_num_threads(t + 1);
        if (t == 1)
            nb_dyt_backward(dx[t], dg[t], db[t], &da[t], dy, x, g, 0.5f, B, C);
        else
            nb_dyt_backward_set(dx[t], dg[t], db[t], &da[t], dy, x, g, 0.5f, B, C);
    }
    omp_set_num_threads(saved);
    for (int t = 1; t < 3; t++) {
        assert_memory_equal(dx[0], dx[t], n * sizeof(float));
        assert_memory_equal(dg[0], dg[t], C * sizeof(float));
        assert_memory_equal(db[0], db[t], C * sizeof(float));
        assert_true(bitsf(da[0]) == bitsf(da[t]));
    }
    /* NULL gradients are skipped, dalpha unchanged in bits */
    float da2 = 0;
    float *dx2 = calloc(n, 4);
    assert_non_null(dx2);
    nb_dyt_backward(dx2, NULL, NULL, &da2, dy, x, g, 0.5f, B, C);
    assert_memory_equal(dx[0], dx2, n * sizeof(float));
    assert_true(bitsf(da2) == bitsf(da[0]));
    for (int t = 0; t < 3; t++)
        free(dx[t]), free(dg[t]), free(db[t]);
    free(dx2), free(xd), free(dyd), free(gd), free(x), free(dy), free(g);
}

/* ---- PyTorch reference tensors -------------------------------------------------------------- */

static ref_file REF;
static int ref_loaded;

static const ref_tensor *need(const char *cs, const char *what) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", cs, what);
    const ref_tensor *t = ref_get(&REF, name);
    if (!t) fail_msg("reference tensor '%s' missing from dyt.bin", name);
    return t;
}

static void ref_case(const char *cs) {
    if (!ref_loaded) {
        if (ref_load(&REF, "dyt.bin") != 0)
            fail_msg("cannot load tests/ref/dyt.bin (regenerate: /usr/bin/python3 "
                     "tests/ref/ref_dyt.py)");
        ref_loaded = 1;
    }
    const ref_tensor *cf = need(cs, "cfg"), *X = need(cs, "x"), *G = need(cs, "g");
    const ref_tensor *Bt = need(cs, "b"), *DY = need(cs, "dy"), *Y = need(cs, "y");
    const ref_tensor *DX = need(cs, "dx"), *DG = need(cs, "dg"), *DB = need(cs, "db");
    const ref_tensor *DA = need(cs, "dalpha");
    const double alpha = cf->data[0];
    const int has_b = cf->data[1] != 0;
    const int B = (int)X->dims[0], C = (int)X->dims[1];
    size_t n = (size_t)B * C;
    /* double */
    double *y = calloc(n, 8), *dx = calloc(n, 8), *dg = calloc(C, 8), *db = calloc(C, 8), da = 0;
    assert_true(y && dx && dg && db);
    nb_dyt_forward_f64(y, X->data, G->data, has_b ? Bt->data : NULL, alpha, B, C);
    nb_dyt_backward_f64(dx, dg, has_b ? db : NULL, &da, DY->data, X->data, G->data, alpha, B, C);
    for (size_t i = 0; i < n; i++) {
        assert_close(y[i], Y->data[i], 1e-12, 1e-12);
        assert_close(dx[i], DX->data[i], 1e-12, 1e-12);
    }
    for (int i = 0; i < C; i++) {
        assert_close(dg[i], DG->data[i], 1e-12, 1e-12);
        assert_close(db[i], DB->data[i], 1e-12, 1e-12);
    }
    assert_close(da, DA->data[0], 1e-11, 1e-12);
    /* float */
    float *xf = to_f(X->data, n), *gf = to_f(G->data, C), *bf = to_f(Bt->data, C);
    float *dyf = to_f(DY->data, n), *yf = calloc(n, 4), *dxf = calloc(n, 4);
    float *dgf = calloc(C, 4), *dbf = calloc(C, 4), daf = 0;
    assert_true(yf && dxf && dgf && dbf);
    nb_dyt_forward(yf, xf, gf, has_b ? bf : NULL, (float)alpha, B, C);
    nb_dyt_backward(dxf, dgf, has_b ? dbf : NULL, &daf, dyf, xf, gf, (float)alpha, B, C);
    for (size_t i = 0; i < n; i++) {
        assert_close(yf[i], Y->data[i], 1e-5, 1e-5);
        assert_close(dxf[i], DX->data[i], 1e-5, 1e-5);
    }
    for (int i = 0; i < C; i++) {
        assert_close(dgf[i], DG->data[i], 1e-4, 1e-5);
        assert_close(dbf[i], DB->data[i], 1e-4, 1e-5);
    }
    assert_close(daf, DA->data[0], 1e-3, 1e-5);
    free(y), free(dx), free(dg), free(db), free(xf), free(gf), free(bf), free(dyf), free(yf);
    free(dxf), free(dgf), free(dbf);
}

static void test_ref(void **state) {
    (void)state;
    ref_case("dyt_small");
    ref_case("dyt_wide");
    ref_case("dyt_alpha");
    ref_case("dyt_nob");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tanh_sweep),
        cmocka_unit_test(test_grad),
        cmocka_unit_test(test_float_vs_double),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_ref),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ref_free(&REF);
    return rc;
}
