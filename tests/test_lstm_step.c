/* tests/test_lstm_step.c — nn/lstm.c's step-by-step interface (nb_lstm_begin, _step, _h,
 * _back_begin, _step_back, _dh, _finish_back, for models such as DRAW whose step inputs depend on
 * earlier outputs) against the whole-sequence forward and backward, which tests/test_lstm.c
 * checks by finite differences: the same states, parameter gradients and input gradients for
 * every norm the step interface takes (all but batch, which it refuses), in double and float. */
#include "tests/testutil.h"
#include "nn/nn.h"

enum { C = 5, H = 4, B = 3, T = 4 };

#define STEP_CHECK(SUF, REAL, TOL)                                                                 \
    static void check_##SUF(nb_norm_kind kind) {                                                   \
        nb_norm_cfg cfg;                                                                           \
        nb_norm_cfg_default(&cfg, kind);                                                           \
        cfg.p = 0.3;                                                                               \
        nb_layout lay;                                                                             \
        memset(&lay, 0, sizeof lay);                                                               \
        nb_err err;                                                                                \
        nb_lstm##SUF L;                                                                            \
        assert_int_equal(nb_lstm_init##SUF(&L, C, H, B, T, &cfg, &lay, "l.", &err), 0);            \
        size_t P = lay.total;                                                                      \
        REAL *p = calloc(P, sizeof(REAL)), *g1 = calloc(P, sizeof(REAL)),                          \
             *g2 = calloc(P, sizeof(REAL));                                                        \
        REAL x[B * T * C], dx1[B * T * C] = {0}, dx2[B * T * C] = {0}, dout[B * T * H],            \
                                       dfin[B * H], out[B * T * H], dh[B * H];                     \
        nb_rng rng;                                                                                \
        nb_rng_seed(&rng, 11 + (uint64_t)kind, 1);                                                 \
        nb_lstm_init_params##SUF(&L, p, &rng);                                                     \
        for (int i = 0; i < lay.count; i++) {                                                      \
            const nb_tensor *t = &lay.t[i];                                                        \
            int gain = strstr(t->name, ".s") || strstr(t->name, "g") != NULL;                      \
            for (size_t j = 0; j < t->n; j++)                                                      \
                p[t->off + j] =                                                                    \
                    (REAL)(gain ? 1 + 0.3 * nb_rng_normal(&rng) : 0.5 * nb_rng_normal(&rng));      \
        }                                                                                          \
        for (int i = 0; i < B * T * C; i++)                                                        \
            x[i] = (REAL)nb_rng_normal(&rng);                                                      \
        for (int i = 0; i < B * T * H; i++)                                                        \
            dout[i] = (REAL)nb_rng_normal(&rng);                                                   \
        for (int i = 0; i < B * H; i++)                                                            \
            dfin[i] = (REAL)nb_rng_normal(&rng);                                                   \
        int len[B] = {T, T, T};                                                                    \
        nb_lstm_forward##SUF(&L, out, x, len, B, T, 0, p);                                         \
        nb_lstm_backward##SUF(&L, dx1, g1, dout, dfin, p);                                         \
        /* step by step: the input filled a step at a time into the caller's buffer */             \
        REAL xs[B * T * C];                                                                        \
        memset(xs, 0, sizeof xs);                                                                  \
        assert_int_equal(nb_lstm_begin##SUF(&L, xs, B, T, p, &err), 0);                            \
        for (int t = 0; t < T; t++) {                                                              \
            for (int b = 0; b < B; b++)                                                            \
                memcpy(xs + ((size_t)b * T + t) * C, x + ((size_t)b * T + t) * C,                  \
                       sizeof(REAL) * C);                                                          \
            nb_lstm_step##SUF(&L, t, p);                                                           \
            const REAL *h = nb_lstm_h##SUF(&L, t);                                                 \
            for (int b = 0; b < B; b++)                                                            \
                for (int j = 0; j < H; j++)                                                        \
                    assert_close(h[b * H + j], out[((size_t)b * T + t) * H + j], TOL, TOL);        \
        }                                                                                          \
        nb_lstm_back_begin##SUF(&L);                                                               \
        for (int t = T - 1; t >= 0; t--) {                                                         \
            for (int b = 0; b < B; b++)                                                            \
                for (int j = 0; j < H; j++)                                                        \
                    dh[b * H + j] =                                                                \
                        dout[((size_t)b * T + t) * H + j] + (t == T - 1 ? dfin[b * H + j] : 0);    \
            nb_lstm_step_back##SUF(&L, dx2 + (size_t)t * C, T * C, dh, t, g2, p);                  \
        }                                                                                          \
        nb_lstm_finish_back##SUF(&L, g2, p);                                                       \
        double worst = 0;                                                                          \
        for (size_t i = 0; i < P; i++) {                                                           \
            assert_close(g2[i], g1[i], TOL, TOL);                                                  \
            double e = fabs((double)g2[i] - g1[i]);                                                \
            if (e > worst) worst = e;                                                              \
        }                                                                                          \
        for (int i = 0; i < B * T * C; i++)                                                        \
            assert_close(dx2[i], dx1[i], TOL, TOL);                                                \
        fprintf(stderr, "# %-6s %-6s step-by-step gradients: largest difference %.2e\n", #REAL,    \
                nb_norm_name(kind), worst);                                                        \
        free(p), free(g1), free(g2);                                                               \
        nb_lstm_free##SUF(&L);                                                                     \
    }

STEP_CHECK(_f64, double, 1e-12)
STEP_CHECK(, float, 2e-5)

static void test_step_matches_sweep(void **state) {
    (void)state;
    for (nb_norm_kind k = 0; k <= NB_NORM_DYT; k++) {
        if (k == NB_NORM_BATCH) continue;
        check__f64(k);
        check_(k);
    }
}

static void test_batch_refused(void **state) {
    (void)state;
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, NB_NORM_BATCH);
    nb_layout lay;
    memset(&lay, 0, sizeof lay);
    nb_err err;
    nb_lstm_f64 L;
    assert_int_equal(nb_lstm_init_f64(&L, C, H, B, T, &cfg, &lay, "l.", &err), 0);
    double *p = calloc(lay.total, sizeof(double)), x[B * T * C] = {0};
    assert_int_equal(nb_lstm_begin_f64(&L, x, B, T, p, &err), -1);
    assert_non_null(strstr(err.msg, "batch normalization is not available step by step"));
    nb_norm_cfg_default(&cfg, NB_NORM_LAYER);
    nb_lstm_free_f64(&L);
    memset(&lay, 0, sizeof lay);
    assert_int_equal(nb_lstm_init_f64(&L, C, H, B, T, &cfg, &lay, "l.", &err), 0);
    free(p);
    p = calloc(lay.total, sizeof(double));
    assert_int_equal(nb_lstm_begin_f64(&L, x, B + 1, T, p, &err), -1);
    assert_non_null(strstr(err.msg, "do not fit"));
    free(p);
    nb_lstm_free_f64(&L);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_matches_sweep),
        cmocka_unit_test(test_batch_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
