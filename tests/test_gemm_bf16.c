/* tests/test_gemm_bf16.c — the bfloat16 product with float accumulation (nn/gemm_bf16.c).
 *
 * 1. nb_bf16_round: nearest, ties to even, subnormals to zero, inf and NaN kept.
 * 2. nb_gemm_bf16 against a double product of the same inputs first rounded to bfloat16 (so the
 *    only error left is the float accumulation), for every transpose combination (the conv's
 *    forward is NN, its data gradient TN, its weight gradient NT), M, N, K over 1, 7, 17, 33,
 *    100, 257, leading dimensions wider than the matrices, beta 0 (C's old values, NaN here, not
 *    read), 1 and 0.5. Bound per element, that of a float sum of K+1 terms in order:
 *      |C - ref| <= g (|beta C0| + sum_k |a_k b_k|) + (K+1) FLT_MIN,  g = (K+1)u / (1-(K+1)u),
 *    u = 2^-24 (the FLT_MIN term for the flushed subnormals). The test also checks that the
 *    inputs WERE rounded: against the unrounded inputs the same bound fails somewhere.
 * 3. Sizes past the blocking (K > 256, M > 96, N > 512), and a row or a column computed alone
 *    equals, bit for bit, the same one computed in the full product.
 * 4. The convolution in bf16 (nb_conv2d_forward_prec/backward_prec, a 3x3 pad-1 layer and the dense
 *    case, batched and exact modes) against the double convolution of the same float inputs:
 *    normwise error max|bf16 - double| / max|double| below 1e-2 (measured 2-3.5e-3 at the
 *    network's shapes, docs/numerics.md#bf16) and above 1e-4 (the bf16 path ran, not fp32's
 *    ~3e-7); exact mode: an image's output alone equals it within the batch, bit for bit.
 * Skipped (cmocka's skip: counted as skipped, not passed) where the CPU lacks AVX512-BF16. */
#include "tests/testutil.h"
#include "nn/nn.h"

#include <float.h>

static const int sizes[] = {1, 7, 17, 33, 100, 257};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static uint64_t lcg = 88172645463325252ull;
static float urand(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(lcg >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void require_bf16(void) {
    if (!nb_cpu_has_bf16()) {
        print_message("skipped: this CPU has no AVX512-BF16 (or NB_CPU_NO_BF16 is set)\n");
        skip();
    }
}

static void test_round(void **state) {
    (void)state;
    assert_true(nb_bf16_round(1.0f) == 1.0f);
    assert_true(nb_bf16_round(1.0f + 0x1p-8f) == 1.0f);                      /* tie: to even */
    assert_true(nb_bf16_round(1.0f + 0x1p-7f + 0x1p-8f) == 1.0f + 0x1p-6f);  /* tie: to even */
    assert_true(nb_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f); /* above: up */
    assert_true(nb_bf16_round(-3.0f) == -3.0f);
    assert_true(nb_bf16_round(0x1p-130f) == 0.0f); /* subnormal: flushed */
    assert_true(signbit(nb_bf16_round(-0x1p-130f)));
    assert_true(isinf(nb_bf16_round(INFINITY)));
    assert_true(isnan(nb_bf16_round(NAN)));
    assert_true(nb_bf16_round(FLT_MAX) == INFINITY); /* rounds up past the largest bfloat16 */
}

static void test_env_hook(void **state) {
    (void)state;
    const char *was = getenv("NB_CPU_NO_BF16");
    char *keep = was ? strdup(was) : NULL;
    setenv("NB_CPU_NO_BF16", "1", 1);
    assert_int_equal(nb_cpu_has_bf16(), 0);
    setenv("NB_CPU_NO_BF16", "0", 1); /* "0": no effect */
    int has = nb_cpu_has_bf16();
    unsetenv("NB_CPU_NO_BF16");
    assert_int_equal(has, nb_cpu_has_bf16());
    if (keep) setenv("NB_CPU_NO_BF16", keep, 1);
    free(keep);
}

/* op(X)(i, k) of a stored matrix: trans ? X[k*ld + i] : X[i*ld + k]. */
static float at(const float *X, int trans, int ld, int i, int k) {
    return trans ? X[(size_t)k * ld + i] : X[(size_t)i * ld + k];
}

/* Checks one product; returns the number of elements where the unrounded reference is off by
 * more than the bound (the bf16 rounding is visible there). */
static int check_one(int ta, int tb, int M, int N, int K, float beta) {
    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    const size_t na = (size_t)lda * (ta ? K : M), nb = (size_t)ldb * (tb ? N : K);
    const size_t nc = (size_t)ldc * M;
    float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb);
    float *C = malloc(sizeof(float) * nc), *C0 = malloc(sizeof(float) * nc);
    assert_non_null(A);
    assert_non_null(B);
    assert_non_null(C);
    assert_non_null(C0);
    for (size_t i = 0; i < na; i++)
        A[i] = urand();
    for (size_t i = 0; i < nb; i++)
        B[i] = urand() * 3.0f;
    for (size_t i = 0; i < nc; i++)
        C0[i] = beta == 0.0f ? NAN : urand();
    memcpy(C, C0, sizeof(float) * nc);
    nb_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    const double u = 0x1p-24, g = (K + 1) * u / (1 - (K + 1) * u);
    int visible = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double c0 = beta == 0.0f ? 0.0 : (double)beta * C0[(size_t)i * ldc + j];
            double ref = c0, mag = fabs(c0), raw = c0;
            for (int k = 0; k < K; k++) {
                double a = at(A, ta, lda, i, k), b = at(B, !tb, ldb, j, k);
                double ar = nb_bf16_round((float)a), br = nb_bf16_round((float)b);
                ref += ar * br;
                mag += fabs(ar * br);
                raw += a * b;
            }
            double got = C[(size_t)i * ldc + j], bound = g * mag + (K + 1) * (double)FLT_MIN;
            if (!(fabs(got - ref) <= bound)) {
                print_error("ta %d tb %d M %d N %d K %d beta %g: C[%d][%d] = %.9g, ref %.9g, "
                            "|diff| %.3g > bound %.3g\n",
                            ta, tb, M, N, K, beta, i, j, got, ref, fabs(got - ref), bound);
                fail();
            }
            visible += fabs(got - raw) > bound;
        }
        /* the padding between rows is not touched */
        for (int j = N; j < ldc; j++)
            if (!(C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j] ||
                  (isnan(C[(size_t)i * ldc + j]) && isnan(C0[(size_t)i * ldc + j])))) {
                print_error("C[%d][%d] past N was written\n", i, j);
                fail();
            }
    }
    free(A);
    free(B);
    free(C);
    free(C0);
    return visible;
}

static void test_against_double(void **state) {
    (void)state;
    require_bf16();
    long visible = 0, cases = 0;
    for (int t = 0; t < 4; t++)
        for (int a = 0; a < NSIZES; a++)
            for (int b = 0; b < NSIZES; b++)
                for (int c = 0; c < NSIZES; c++) {
                    float beta = (a + b + c) % 3 == 0 ? 0.0f : (a + b + c) % 3 == 1 ? 1.0f : 0.5f;
                    visible += check_one(t & 1, t >> 1, sizes[a], sizes[b], sizes[c], beta);
                    cases++;
                }
    print_message("%ld products within the float-accumulation bound; %ld elements show the "
                  "bfloat16 rounding of the inputs\n",
                  cases, visible);
    assert_true(visible > 0);
}

static void test_blocking(void **state) {
    (void)state;
    require_bf16();
    for (int t = 0; t < 4; t++) {
        check_one(t & 1, t >> 1, 200, 600, 601, 1.0f);
        check_one(t & 1, t >> 1, 97, 513, 258, 0.0f);
    }
}

/* A row (and a column) computed alone is the same, bit for bit, as in the full product. */
static void test_rows_independent(void **state) {
    (void)state;
    require_bf16();
    const int M = 50, N = 70, K = 531;
    for (int t = 0; t < 4; t++) {
        int ta = t & 1, tb = t >> 1;
        int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
        float *C = malloc(sizeof(float) * M * N), *r = malloc(sizeof(float) * N);
        float *col = malloc(sizeof(float) * M);
        assert_non_null(A);
        assert_non_null(B);
        assert_non_null(C);
        assert_non_null(r);
        assert_non_null(col);
        for (int i = 0; i < M * K; i++)
            A[i] = urand();
        for (int i = 0; i < K * N; i++)
            B[i] = urand();
        nb_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C, N);
        for (int i = 0; i < M; i += 7) {
            /* row i alone: op(A)'s row i starts at A + i (ta) or A + i*lda */
            nb_gemm_bf16(ta, tb, 1, N, K, ta ? A + i : A + (size_t)i * lda, lda, B, ldb, 0.0f, r,
                         N);
            assert_memory_equal(r, C + (size_t)i * N, sizeof(float) * N);
        }
        for (int j = 0; j < N; j += 9) {
            nb_gemm_bf16(ta, tb, M, 1, K, A, lda, tb ? B + (size_t)j * ldb : B + j, ldb, 0.0f, col,
                         1);
            for (int i = 0; i < M; i++)
                assert_memory_equal(&col[i], &C[(size_t)i * N + j], sizeof(float));
        }
        free(A);
        free(B);
        free(C);
        free(r);
        free(col);
    }
}

static double nerr(const float *a, const double *b, size_t n) {
    double m = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(b[i]) > m) m = fabs(b[i]);
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    }
    return d / m;
}

static void conv_case(int N, int C, int H, int W, int OC, int KS, int pad, int exact) {
    const int OH = H + 2 * pad - KS + 1, OW = W + 2 * pad - KS + 1;
    const size_t nx = (size_t)N * C * H * W, nw = (size_t)OC * C * KS * KS;
    const size_t ny = (size_t)N * OC * OH * OW;
    float *x = malloc(4 * nx), *w = malloc(4 * nw), *dy = malloc(4 * ny), *y = malloc(4 * ny);
    float *dx = malloc(4 * nx), *dw = calloc(nw, 4), *y1 = malloc(4 * ny);
    double *xd = malloc(8 * nx), *wd = malloc(8 * nw), *dyd = malloc(8 * ny), *yd = malloc(8 * ny);
    double *dxd = malloc(8 * nx), *dwd = calloc(nw, 8), *dwx = calloc(nw, 8);
    double *dpart = calloc(2 * nw, 8);
    const size_t ss = nb_conv2d_scratch(C, H, W, OC, KS, pad);
    const size_t ssd = nb_conv2d_scratch_f64(C, H, W, OC, KS, pad);
    float *scr = malloc(4 * (ss + 1) * 2);
    double *scrd = malloc(8 * (ssd + 1) * 2);
    assert_true(x && w && dy && y && dx && dw && y1 && xd && wd && dyd && yd && dxd && dwd && dwx &&
                dpart && scr && scrd);
    for (size_t i = 0; i < nx; i++)
        xd[i] = x[i] = urand();
    for (size_t i = 0; i < nw; i++)
        wd[i] = w[i] = urand() * 0.3f;
    for (size_t i = 0; i < ny; i++)
        dyd[i] = dy[i] = urand();
    nb_conv2d_forward_prec(y, scr, 2, x, w, N, C, H, W, OC, KS, pad, exact, NB_PREC_BF16);
    nb_conv2d_backward_prec(dx, dw, exact ? dwx : NULL, dpart, scr, 2, dy, x, w, N, C, H, W, OC, KS,
                            pad, 0, NB_PREC_BF16);
    nb_conv2d_forward_f64(yd, scrd, 2, xd, wd, N, C, H, W, OC, KS, pad, 0);
    nb_conv2d_backward_f64(dxd, dwd, NULL, NULL, scrd, 2, dyd, xd, wd, N, C, H, W, OC, KS, pad, 0);
    if (exact)
        for (size_t i = 0; i < nw; i++)
            dw[i] = (float)dwx[i];
    double e[3] = {nerr(y, yd, ny), nerr(dx, dxd, nx), nerr(dw, dwd, nw)};
    print_message("%d>%d %dx%d k%d exact %d: normwise error fwd %.2e dgrad %.2e wgrad %.2e\n", C,
                  OC, H, W, KS, exact, e[0], e[1], e[2]);
    for (int i = 0; i < 3; i++) {
        assert_true(e[i] < 1e-2);
        assert_true(e[i] > 1e-4);
    }
    if (exact) { /* the last image alone: the same bits as within the batch */
        const size_t per = ny / N;
        nb_conv2d_forward_prec(y1, scr, 2, x + nx / N * (N - 1), w, 1, C, H, W, OC, KS, pad, 1,
                               NB_PREC_BF16);
        assert_memory_equal(y1, y + per * (N - 1), sizeof(float) * per);
    }
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(y1);
    free(xd), free(wd), free(dyd), free(yd), free(dxd), free(dwd), free(dwx), free(dpart);
    free(scr), free(scrd);
}

static void test_conv(void **state) {
    (void)state;
    require_bf16();
    for (int exact = 0; exact < 2; exact++) {
        conv_case(3, 13, 9, 9, 17, 3, 1, exact);
        conv_case(5, 37, 1, 1, 7, 1, 0, exact); /* the dense case */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_env_hook),
        cmocka_unit_test(test_against_double),
        cmocka_unit_test(test_blocking),
        cmocka_unit_test(test_rows_independent),
        cmocka_unit_test(test_conv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
