/* tests/test_oe.c — nn/oe.c: the order-violation loss against a direct B×B×H evaluation, its
 * gradient and the l2-abs map by central finite differences in double, and the whole
 * order-embedding model (embeddings, GRU with every norm, image map, loss) by finite
 * differences over every trainable parameter. */
#include "tests/testutil.h"
#include "nn/nn.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

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

/* The loss written as the code writes it: errors, then both hinge terms, diagonal zeroed. */
static double naive_loss(const double *s, const double *c, int B, int n, double alpha) {
    double *E = calloc((size_t)B * B, sizeof *E), L = 0;
    for (int i = 0; i < B; i++)
        for (int j = 0; j < B; j++)
            for (int d = 0; d < n; d++) {
                double v = fmax(0, s[i * n + d] - c[j * n + d]);
                E[i * B + j] += v * v;
            }
    for (int i = 0; i < B; i++)
        for (int j = 0; j < B; j++)
            if (i != j)
                L += fmax(0, alpha - E[i * B + j] + E[j * B + j]) +
                     fmax(0, alpha - E[i * B + j] + E[i * B + i]);
    free(E);
    return L;
}

static void test_order_loss(void **st) {
    (void)st;
    enum { B = 6, n = 5 };
    double s[B * n], c[B * n], ds[B * n] = {0}, dc[B * n] = {0}, E[B * B], G[B * B];
    for (int i = 0; i < B * n; i++) {
        s[i] = fabs(nrand()) * 0.4;
        c[i] = fabs(nrand()) * 0.4;
    }
    const double alpha = 0.5; /* large enough that most hinges are active */
    nb_order_errors_f64(E, s, c, B, B, n);
    double L = nb_order_loss_f64(G, E, B, alpha);
    assert_close(L, naive_loss(s, c, B, n, alpha), 1e-12, 1e-12);
    assert_true(L > 0);
    nb_order_loss_backward_f64(ds, dc, G, s, c, B, n);
    const double h = 1e-6;
    for (int i = 0; i < B * n; i++) {
        double k = s[i];
        s[i] = k + h;
        double lp = naive_loss(s, c, B, n, alpha);
        s[i] = k - h;
        double lm = naive_loss(s, c, B, n, alpha);
        s[i] = k;
        assert_close(ds[i], (lp - lm) / (2 * h), 1e-6, 1e-6);
        k = c[i];
        c[i] = k + h;
        lp = naive_loss(s, c, B, n, alpha);
        c[i] = k - h;
        lm = naive_loss(s, c, B, n, alpha);
        c[i] = k;
        assert_close(dc[i], (lp - lm) / (2 * h), 1e-6, 1e-6);
    }
    /* the float build agrees */
    float sf[B * n], cf[B * n], Ef[B * B], Gf[B * B];
    for (int i = 0; i < B * n; i++) {
        sf[i] = (float)s[i];
        cf[i] = (float)c[i];
    }
    nb_order_errors(Ef, sf, cf, B, B, n);
    assert_close(nb_order_loss(Gf, Ef, B, alpha), L, 1e-5, 1e-5);
}

static void test_l2abs(void **st) {
    (void)st;
    enum { B = 3, n = 6 };
    double x[B * n], y[B * n], nr[B], w[B * n], dx[B * n] = {0};
    for (int i = 0; i < B * n; i++) {
        x[i] = nrand();
        w[i] = nrand();
    }
    nb_l2abs_forward_f64(y, nr, x, B, n);
    for (int b = 0; b < B; b++) {
        double ss = 0;
        for (int i = 0; i < n; i++) {
            assert_true(y[b * n + i] >= 0);
            ss += y[b * n + i] * y[b * n + i];
        }
        assert_close(ss, 1.0, 1e-12, 0);
    }
    nb_l2abs_backward_f64(dx, w, x, nr, B, n);
    const double h = 1e-6;
    for (int i = 0; i < B * n; i++) {
        double k = x[i], lp = 0, lm = 0;
        x[i] = k + h;
        nb_l2abs_forward_f64(y, nr, x, B, n);
        for (int j = 0; j < B * n; j++)
            lp += w[j] * y[j];
        x[i] = k - h;
        nb_l2abs_forward_f64(y, nr, x, B, n);
        for (int j = 0; j < B * n; j++)
            lm += w[j] * y[j];
        x[i] = k;
        assert_close(dx[i], (lp - lm) / (2 * h), 1e-7, 1e-6);
    }
}

/* The whole model, every trainable parameter, for every norm. */
static void check_model(nb_norm_kind kind) {
    enum { V = 9, W = 3, H = 4, F = 5, T = 4, B = 4 };
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.p = 0.3;
    nb_oe_f64 m;
    nb_rng rng;
    nb_rng_seed(&rng, 11, 1);
    nb_err err;
    assert_int_equal(nb_oe_init_f64(&m, V, W, H, F, T, B, 0.3, &cfg, &rng, &err), 0);
    for (int i = 0; i < m.layout.count; i++) { /* off the initial gains/biases */
        const nb_tensor *t = &m.layout.t[i];
        if (t->trainable && t->n <= 3 * H)
            for (size_t j = 0; j < t->n; j++)
                m.params[t->off + j] += 0.2 * nrand();
    }
    int tok[T * B], steps[B] = {4, 2, 3, 1};
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++)
            tok[t * B + b] = t < steps[b] - 1 ? 1 + (int)(urand() * (V - 1)) : 0;
    double img[B * F];
    for (int i = 0; i < B * F; i++)
        img[i] = fabs(nrand());
    double L = nb_oe_forward_f64(&m, tok, steps, T, img, B);
    assert_true(L > 0);
    memset(m.grads, 0, sizeof(double) * m.layout.total);
    nb_oe_backward_f64(&m);
    double *g = malloc(sizeof(double) * m.layout.total);
    memcpy(g, m.grads, sizeof(double) * m.layout.total);
    const double h = 1e-6;
    int n = 0;
    for (int i = 0; i < m.layout.count; i++) {
        const nb_tensor *t = &m.layout.t[i];
        if (!t->trainable) continue;
        for (size_t j = 0; j < t->n; j++) {
            double *p = &m.params[t->off + j], k = *p;
            *p = k + h;
            double lp = nb_oe_forward_f64(&m, tok, steps, T, img, B);
            *p = k - h;
            double lm = nb_oe_forward_f64(&m, tok, steps, T, img, B);
            *p = k;
            double num = (lp - lm) / (2 * h);
            if (!(fabs(num - g[t->off + j]) <= 1e-6 + 1e-5 * fabs(num))) {
                print_error("%s %s[%zu]: backward %.10g, finite difference %.10g\n",
                            nb_norm_name(kind), t->name, j, g[t->off + j], num);
                fail();
            }
            n++;
        }
    }
    assert_true(n > V * W + H * F);
    free(g);
    nb_oe_free_f64(&m);
}

static void test_model_fd(void **st) {
    (void)st;
    for (int k = 0; k <= NB_NORM_DYT; k++)
        check_model((nb_norm_kind)k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_loss),
        cmocka_unit_test(test_l2abs),
        cmocka_unit_test(test_model_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
