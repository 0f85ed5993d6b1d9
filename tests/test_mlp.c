/* tests/test_mlp.c — whole-model checks of the MLP for every norm: gradients by central finite
 * differences in double, float/double agreement, the LN paper's placement of each norm, and
 * learning on a small problem. */
#include "tests/testutil.h"

#include "nn/nn.h"

enum { B = 6, NL = 3 };
static const int dims[NL + 1] = {12, 9, 7, 5};

static void make_data(double *x, int *y, uint64_t seed) {
    nb_rng r;
    nb_rng_seed(&r, seed, NB_STREAM_SYNTH);
    for (int i = 0; i < B * dims[0]; i++)
        x[i] = nb_rng_normal(&r);
    for (int i = 0; i < B; i++)
        y[i] = (int)nb_rng_below(&r, (uint64_t)dims[NL]);
}

static void init_model(nb_mlp_f64 *m, nb_norm_kind kind, nb_act_kind act, const double *x) {
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.p = 0.3; /* k = ceil(9*0.3) = 3 and ceil(7*0.3) = 3: a real partial RMS */
    nb_rng r;
    nb_rng_seed(&r, 42, NB_STREAM_INIT);
    nb_err err;
    assert_int_equal(nb_mlp_init_f64(m, NL, dims, &cfg, act, B, &r, &err), 0);
    /* Random gains and biases so that a wrongly ignored gain or bias shows. */
    for (int l = 0; l < NL; l++) {
        if (m->L[l].g != (size_t)-1)
            for (int o = 0; o < dims[l + 1]; o++)
                m->params[m->L[l].g + o] = 0.5 + nb_rng_uniform(&r);
        for (int o = 0; o < dims[l + 1]; o++)
            m->params[m->L[l].b + o] = 0.3 * nb_rng_normal(&r);
    }
    if (kind == NB_NORM_WEIGHT) nb_mlp_data_init_f64(m, x, B);
}

/* Every trainable parameter's gradient against a central difference of the loss. */
static void check_gradients(nb_norm_kind kind, nb_act_kind act, int training) {
    double x[B * 12];
    int y[B];
    make_data(x, y, 3);
    nb_mlp_f64 m;
    init_model(&m, kind, act, x);
    nb_mlp_zero_grad_f64(&m);
    nb_mlp_forward_f64(&m, x, y, B, training);
    nb_mlp_backward_f64(&m, y);
    int checked = 0;
    for (int t = 0; t < m.layout.count; t++) {
        const nb_tensor *T = &m.layout.t[t];
        if (!T->trainable) continue;
        for (size_t i = 0; i < T->n; i++) {
            double *p = &m.params[T->off + i];
            double save = *p, h = 1e-6;
            *p = save + h;
            double lp = nb_mlp_forward_f64(&m, x, y, B, training);
            *p = save - h;
            double lm = nb_mlp_forward_f64(&m, x, y, B, training);
            *p = save;
            double fd = (lp - lm) / (2 * h), an = m.grads[T->off + i];
            /* Rounding in the difference is ~1e-16/h = 1e-10 absolute: allow 1e-8 beside the
             * relative 1e-5 (a real error in a gradient is orders of magnitude larger). */
            if (fabs(fd - an) > 1e-8 + 1e-5 * (fabs(fd) + fabs(an))) {
                print_error("%s/%s%s: d/d%s[%zu]: analytic %.10g, finite difference %.10g\n",
                            nb_norm_name(kind), nb_act_name(act), training ? "" : " (eval)",
                            T->name, i, an, fd);
                fail();
            }
            checked++;
        }
    }
    assert_true(checked > 200);
    nb_mlp_free_f64(&m);
}

static void test_gradients_tanh(void **state) {
    (void)state;
    for (int k = 0; k < NB_NORM_COUNT; k++)
        check_gradients((nb_norm_kind)k, NB_ACT_TANH, 1);
}

static void test_gradients_sigmoid_leaky(void **state) {
    (void)state;
    for (int k = 0; k < NB_NORM_COUNT; k++) {
        check_gradients((nb_norm_kind)k, NB_ACT_SIGMOID, 1);
        check_gradients((nb_norm_kind)k, NB_ACT_LEAKY_RELU, 1);
    }
}

static void test_gradients_bn_eval(void **state) {
    (void)state;
    check_gradients(NB_NORM_BATCH, NB_ACT_TANH, 0);
}

/* ReLU has kinks: compare along a random direction, where a kink is hit with probability ~0. */
static void test_gradient_direction_relu(void **state) {
    (void)state;
    for (int k = 0; k < NB_NORM_COUNT; k++) {
        double x[B * 12];
        int y[B];
        make_data(x, y, 5);
        nb_mlp_f64 m;
        init_model(&m, (nb_norm_kind)k, NB_ACT_RELU, x);
        nb_mlp_zero_grad_f64(&m);
        nb_mlp_forward_f64(&m, x, y, B, 1);
        nb_mlp_backward_f64(&m, y);
        size_t P = m.layout.total;
        double *d = calloc(P, sizeof *d), *save = malloc(P * sizeof *save);
        assert_non_null(d);
        assert_non_null(save);
        memcpy(save, m.params, P * sizeof *save);
        nb_rng r;
        nb_rng_seed(&r, 9, NB_STREAM_SYNTH);
        double an = 0;
        for (int t = 0; t < m.layout.count; t++) {
            if (!m.layout.t[t].trainable) continue;
            for (size_t i = 0; i < m.layout.t[t].n; i++) {
                size_t j = m.layout.t[t].off + i;
                d[j] = nb_rng_normal(&r);
                an += d[j] * m.grads[j];
            }
        }
        double h = 1e-6, l[2];
        for (int s = 0; s < 2; s++) {
            for (size_t j = 0; j < P; j++)
                m.params[j] = save[j] + (s ? -h : h) * d[j];
            l[s] = nb_mlp_forward_f64(&m, x, y, B, 1);
        }
        double fd = (l[0] - l[1]) / (2 * h);
        assert_close(an, fd, 1e-8, 1e-5);
        free(d);
        free(save);
        nb_mlp_free_f64(&m);
    }
}

/* The float model (same code, float) agrees with the double one from the same init. */
static void test_float_matches_double(void **state) {
    (void)state;
    for (int k = 0; k < NB_NORM_COUNT; k++) {
        double xd[B * 12];
        float xf[B * 12];
        int y[B];
        make_data(xd, y, 11);
        for (int i = 0; i < B * 12; i++)
            xf[i] = (float)xd[i];
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, (nb_norm_kind)k);
        nb_rng r1, r2;
        nb_rng_seed(&r1, 1, NB_STREAM_INIT);
        nb_rng_seed(&r2, 1, NB_STREAM_INIT);
        nb_mlp_f64 md;
        nb_mlp mf;
        nb_err err;
        assert_int_equal(nb_mlp_init_f64(&md, NL, dims, &cfg, NB_ACT_RELU, B, &r1, &err), 0);
        assert_int_equal(nb_mlp_init(&mf, NL, dims, &cfg, NB_ACT_RELU, B, &r2, &err), 0);
        nb_mlp_data_init_f64(&md, xd, B);
        nb_mlp_data_init(&mf, xf, B);
        double ld = nb_mlp_forward_f64(&md, xd, y, B, 1);
        double lf = nb_mlp_forward(&mf, xf, y, B, 1);
        assert_close(lf, ld, 1e-5, 1e-4);
        nb_mlp_zero_grad_f64(&md);
        nb_mlp_zero_grad(&mf);
        nb_mlp_backward_f64(&md, y);
        nb_mlp_backward(&mf, y);
        for (size_t j = 0; j < md.layout.total; j++)
            assert_close(mf.grads[j], md.grads[j], 1e-4, 1e-3);
        nb_mlp_free_f64(&md);
        nb_mlp_free(&mf);
    }
}

/* The LN paper's placement: LN/RMS/pRMS/WN on the hidden layers only, BN on all layers. */
static void test_norm_placement(void **state) {
    (void)state;
    for (int k = 0; k < NB_NORM_COUNT; k++) {
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, (nb_norm_kind)k);
        nb_rng r;
        nb_rng_seed(&r, 1, NB_STREAM_INIT);
        nb_mlp m;
        nb_err err;
        assert_int_equal(nb_mlp_init(&m, NL, dims, &cfg, NB_ACT_RELU, B, &r, &err), 0);
        for (int l = 0; l < NL - 1; l++)
            assert_int_equal(m.L[l].kind, k);
        assert_int_equal(m.L[NL - 1].kind, k == NB_NORM_BATCH ? NB_NORM_BATCH : NB_NORM_NONE);
        if (k == NB_NORM_PRMS) assert_int_equal(m.L[0].k, nb_prms_k(9, cfg.p, cfg.p_floor));
        nb_mlp_free(&m);
    }
}

/* Every norm learns a small problem: 300 Adam steps lower the loss by more than half. */
static void test_learns(void **state) {
    (void)state;
    enum { N = 64 };
    static const int d2[] = {10, 32, 32, 3};
    for (int k = 0; k < NB_NORM_COUNT; k++) {
        float x[N * 10];
        int y[N];
        nb_rng r;
        nb_rng_seed(&r, 4, NB_STREAM_SYNTH);
        for (int i = 0; i < N; i++) {
            y[i] = (int)nb_rng_below(&r, 3);
            for (int j = 0; j < 10; j++)
                x[i * 10 + j] = (float)(nb_rng_normal(&r) + (j % 3 == y[i] ? 1.5 : 0));
        }
        nb_norm_cfg cfg;
        nb_norm_cfg_default(&cfg, (nb_norm_kind)k);
        nb_adam_cfg adam;
        nb_adam_cfg_default(&adam);
        nb_mlp m;
        nb_err err;
        nb_rng_seed(&r, 1, NB_STREAM_INIT);
        assert_int_equal(nb_mlp_init(&m, 3, d2, &cfg, NB_ACT_RELU, N, &r, &err), 0);
        nb_mlp_data_init(&m, x, N);
        double first = 0, last = 0;
        for (int t = 1; t <= 300; t++) {
            nb_mlp_zero_grad(&m);
            last = nb_mlp_forward(&m, x, y, N, 1);
            if (t == 1) first = last;
            nb_mlp_backward(&m, y);
            nb_adam_step_layout(m.params, m.grads, m.adam_m, m.adam_v, &m.layout, t, &adam);
        }
        if (!(last < 0.5 * first)) {
            print_error("%s: loss %.4f -> %.4f\n", nb_norm_name((nb_norm_kind)k), first, last);
            fail();
        }
        nb_mlp_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_tanh),
        cmocka_unit_test(test_gradients_sigmoid_leaky),
        cmocka_unit_test(test_gradients_bn_eval),
        cmocka_unit_test(test_gradient_direction_relu),
        cmocka_unit_test(test_float_matches_double),
        cmocka_unit_test(test_norm_placement),
        cmocka_unit_test(test_learns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
