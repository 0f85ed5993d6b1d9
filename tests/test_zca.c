/* tests/test_zca.c — ZCA whitening: identity covariance, the zero-phase (symmetric) solution,
 * and the on-disk cache. */
#include "tests/testutil.h"

#include <unistd.h>

#include "datasets/zca.h"
#include "nn/nn.h"

enum { N = 4000, D = 12 };

/* Correlated data: x = z A + c with z standard normal and A mixing with very different scales. */
static float *make_data(void) {
    float *x = malloc(sizeof(float) * N * D);
    double A[D][D];
    nb_rng r;
    nb_rng_seed(&r, 3, NB_STREAM_SYNTH);
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++)
            A[i][j] = nb_rng_normal(&r) * (i < 3 ? 10.0 : 0.5);
    for (int n = 0; n < N; n++) {
        double z[D];
        for (int i = 0; i < D; i++)
            z[i] = nb_rng_normal(&r);
        for (int j = 0; j < D; j++) {
            double s = 2.0 + j;
            for (int i = 0; i < D; i++)
                s += z[i] * A[i][j];
            x[n * D + j] = (float)s;
        }
    }
    return x;
}

static void test_whitened_covariance_is_identity(void **state) {
    (void)state;
    float *x = make_data(), *y = malloc(sizeof(float) * N * D);
    assert_non_null(y);
    nb_zca z;
    nb_err err;
    /* a regulariser far below the smallest variance, so the identity is exact up to rounding */
    assert_int_equal(nb_zca_fit(&z, x, N, D, 1e-10, &err), 0);
    nb_zca_apply(&z, y, x, N);
    for (int a = 0; a < D; a++) {
        double ma = 0;
        for (int n = 0; n < N; n++)
            ma += y[n * D + a];
        assert_close(ma / N, 0.0, 1e-4, 0);
        for (int b = 0; b < D; b++) {
            double c = 0;
            for (int n = 0; n < N; n++)
                c += (double)y[n * D + a] * y[n * D + b];
            assert_close(c / N, a == b ? 1.0 : 0.0, 1e-4, 0);
        }
    }
    /* ZCA (not PCA) whitening: W is symmetric. */
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++)
            assert_close(z.W[a * D + b], z.W[b * D + a], 1e-6, 1e-4);
    nb_zca_free(&z);
    free(x);
    free(y);
}

/* A large regulariser shrinks the result: eigenvalue s becomes s/(s+reg), so a direction with
 * variance s has variance s/(s+reg) after whitening; with reg = s it is 1/2. */
static void test_regularisation(void **state) {
    (void)state;
    float *x = malloc(sizeof(float) * N * 1), *y = malloc(sizeof(float) * N);
    nb_rng r;
    nb_rng_seed(&r, 5, NB_STREAM_SYNTH);
    for (int n = 0; n < N; n++)
        x[n] = (float)(3.0 * nb_rng_normal(&r));
    double var = 0, m = 0;
    for (int n = 0; n < N; n++)
        m += x[n];
    m /= N;
    for (int n = 0; n < N; n++)
        var += (x[n] - m) * (x[n] - m);
    var /= N;
    nb_zca z;
    nb_err err;
    assert_int_equal(nb_zca_fit(&z, x, N, 1, var, &err), 0);
    nb_zca_apply(&z, y, x, N);
    double v = 0;
    for (int n = 0; n < N; n++)
        v += (double)y[n] * y[n];
    assert_close(v / N, 0.5, 1e-4, 0);
    nb_zca_free(&z);
    free(x);
    free(y);
}

static void test_cache(void **state) {
    (void)state;
    char dir[] = "/tmp/nb-zca-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/zca.bin", dir);
    float *x = make_data();
    nb_zca z, z2;
    nb_err err;
    assert_int_equal(nb_zca_fit(&z, x, N, D, 1e-5, &err), 0);
    assert_int_equal(nb_zca_load(&z2, path, "sha256:abc", D, &err), 0); /* absent */
    assert_int_equal(nb_zca_save(&z, path, "sha256:abc", &err), 0);
    assert_int_equal(nb_zca_load(&z2, path, "sha256:abc", D, &err), 1);
    assert_memory_equal(z.W, z2.W, sizeof(float) * D * D);
    assert_memory_equal(z.mean, z2.mean, sizeof(double) * D);
    nb_zca_free(&z2);
    /* other data or another size: not used */
    assert_int_equal(nb_zca_load(&z2, path, "sha256:other", D, &err), 0);
    assert_int_equal(nb_zca_load(&z2, path, "sha256:abc", D + 1, &err), 0);
    /* a damaged (truncated) cache is an error naming it */
    assert_int_equal(truncate(path, 200), 0);
    assert_int_equal(nb_zca_load(&z2, path, "sha256:abc", D, &err), -1);
    assert_non_null(strstr(err.msg, path));
    unlink(path);
    rmdir(dir);
    nb_zca_free(&z);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whitened_covariance_is_identity),
        cmocka_unit_test(test_regularisation),
        cmocka_unit_test(test_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
