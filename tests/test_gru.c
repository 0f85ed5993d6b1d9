/* tests/test_gru.c — nn/gru.c: central finite differences in double for every norm (with masked
 * steps, both eps placements, BN in training and evaluation mode), masked steps carrying the
 * state, float/double agreement, and PyTorch reference tensors (tests/ref/gru.bin, written by
 * tests/ref/ref_gru.py). */
#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"

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

enum { E = 3, H = 4, T = 4, B = 3 };

typedef struct fixture {
    nb_gru_f64 g;
    nb_layout layout;
    double *params, *grads, *x, *dx, *mask, *w;
    int T, B;
} fixture;

/* lengths 4, 2, 3: rows 1 and 2 have masked steps */
static const int lens[B] = {4, 2, 3};

static void fx_init(fixture *f, nb_norm_kind kind, int eps_outside, double p) {
    memset(f, 0, sizeof *f);
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.eps_outside = eps_outside;
    cfg.p = p;
    nb_err err;
    assert_int_equal(nb_gru_setup_f64(&f->g, &f->layout, "gru.", E, H, T, B, &cfg, &err), 0);
    size_t P = f->layout.total;
    f->params = calloc(P, sizeof(double));
    f->grads = calloc(P, sizeof(double));
    f->x = malloc(sizeof(double) * T * B * E);
    f->dx = calloc((size_t)T * B * E, sizeof(double));
    f->mask = malloc(sizeof(double) * T * B);
    f->w = malloc(sizeof(double) * B * H);
    assert_non_null(f->params);
    nb_rng rng;
    nb_rng_seed(&rng, 7, 1);
    assert_int_equal(nb_gru_init_params_f64(&f->g, f->params, &rng, &err), 0);
    /* move gains, biases and input biases off their initial values so every term is exercised */
    for (int i = 0; i < f->layout.count; i++) {
        const nb_tensor *t = &f->layout.t[i];
        if (!t->trainable) continue;
        int is_w = strstr(t->name, "Wc") || strstr(t->name, "Uc") || strstr(t->name, "Vc") ||
                   strstr(t->name, "Vu");
        for (size_t j = 0; j < t->n; j++)
            f->params[t->off + j] = is_w ? 0.6 * nrand() : f->params[t->off + j] + 0.3 * nrand();
    }
    for (int i = 0; i < T * B * E; i++)
        f->x[i] = nrand();
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++)
            f->mask[t * B + b] = t < lens[b] ? 1 : 0;
    for (int i = 0; i < B * H; i++)
        f->w[i] = nrand();
    f->T = T;
    f->B = B;
}

static void fx_free(fixture *f) {
    nb_gru_free_f64(&f->g);
    free(f->params);
    free(f->grads);
    free(f->x);
    free(f->dx);
    free(f->mask);
    free(f->w);
}

/* L = sum w * h_T */
static double loss(fixture *f, int training) {
    nb_gru_forward_f64(&f->g, f->params, f->x, f->mask, f->T, f->B, training);
    const double *h = nb_gru_last_f64(&f->g);
    double L = 0;
    for (int i = 0; i < f->B * H; i++)
        L += f->w[i] * h[i];
    return L;
}

static void check_fd(nb_norm_kind kind, int eps_outside, double p, int training) {
    fixture f;
    fx_init(&f, kind, eps_outside, p);
    loss(&f, training);
    nb_gru_backward_f64(&f.g, f.grads, f.dx, f.params, f.w);
    const double h = 1e-6;
    int checked = 0;
    for (int i = 0; i < f.layout.count; i++) {
        const nb_tensor *t = &f.layout.t[i];
        if (!t->trainable) continue;
        for (size_t j = 0; j < t->n; j++) {
            double *pp = &f.params[t->off + j], keep = *pp;
            *pp = keep + h;
            double lp = loss(&f, training);
            *pp = keep - h;
            double lm = loss(&f, training);
            *pp = keep;
            double num = (lp - lm) / (2 * h), got = f.grads[t->off + j];
            if (!(fabs(num - got) <= 1e-6 + 1e-5 * fabs(num))) {
                print_error("%s %s[%zu]: backward %.10g, finite difference %.10g\n",
                            nb_norm_name(kind), t->name, j, got, num);
                fail();
            }
            checked++;
        }
    }
    for (int i = 0; i < T * B * E; i++) {
        double keep = f.x[i];
        f.x[i] = keep + h;
        double lp = loss(&f, training);
        f.x[i] = keep - h;
        double lm = loss(&f, training);
        f.x[i] = keep;
        double num = (lp - lm) / (2 * h);
        if (!(fabs(num - f.dx[i]) <= 1e-6 + 1e-5 * fabs(num))) {
            print_error("%s dx[%d]: backward %.10g, finite difference %.10g\n", nb_norm_name(kind),
                        i, f.dx[i], num);
            fail();
        }
    }
    assert_true(checked > 3 * H * (E + H));
    fx_free(&f);
}

static void test_fd_none(void **s) {
    (void)s;
    check_fd(NB_NORM_NONE, 0, 0.0625, 1);
}
static void test_fd_layer(void **s) {
    (void)s;
    check_fd(NB_NORM_LAYER, 0, 0.0625, 1);
    check_fd(NB_NORM_LAYER, 1, 0.0625, 1);
}
static void test_fd_rms(void **s) {
    (void)s;
    check_fd(NB_NORM_RMS, 0, 0.0625, 1);
    check_fd(NB_NORM_RMS, 1, 0.0625, 1);
}
static void test_fd_prms(void **s) {
    (void)s;
    check_fd(NB_NORM_PRMS, 0, 0.3, 1);    /* k = 3 of 8 and 2 of 4 */
    check_fd(NB_NORM_PRMS, 0, 0.0625, 1); /* k = 1 */
    check_fd(NB_NORM_PRMS, 1, 0.3, 1);
}
static void test_fd_batch(void **s) {
    (void)s;
    check_fd(NB_NORM_BATCH, 0, 0.0625, 1);
    check_fd(NB_NORM_BATCH, 0, 0.0625, 0);
}
static void test_fd_dyt(void **s) {
    (void)s;
    check_fd(NB_NORM_DYT, 0, 0.0625, 1); /* the unfused path: the norm's own kernels */
}
static void test_fd_weight(void **s) {
    (void)s;
    check_fd(NB_NORM_WEIGHT, 0, 0.0625, 1);
}

/* A sequence padded with masked steps ends in the same state as the same sequence run for its
 * own length: the state is carried through masked steps (every norm but batch, whose statistics
 * see the padded rows). */
static void test_mask_carries_state(void **s) {
    (void)s;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER,  NB_NORM_RMS,
                                  NB_NORM_PRMS, NB_NORM_WEIGHT, NB_NORM_DYT};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        fixture f;
        fx_init(&f, kinds[k], 0, 0.3);
        loss(&f, 1);
        double want[H];
        memcpy(want, nb_gru_last_f64(&f.g) + 1 * H, sizeof want); /* row 1: length 2 */
        /* row 1 alone, 2 steps, no mask */
        double x1[2 * E];
        for (int t = 0; t < 2; t++)
            memcpy(x1 + t * E, f.x + (t * B + 1) * E, sizeof(double) * E);
        nb_gru_forward_f64(&f.g, f.params, x1, NULL, 2, 1, 1);
        const double *got = nb_gru_last_f64(&f.g);
        for (int j = 0; j < H; j++)
            assert_close(got[j], want[j], 1e-12, 1e-12);
        fx_free(&f);
    }
}

/* The float build computes what the double build computes (the code that trains is the code
 * checked above). */
static void test_float_matches_double(void **s) {
    (void)s;
    for (int kind = 0; kind <= NB_NORM_DYT; kind++) {
        fixture f;
        fx_init(&f, (nb_norm_kind)kind, 0, 0.3);
        loss(&f, 1);
        nb_gru_backward_f64(&f.g, f.grads, f.dx, f.params, f.w);
        nb_gru gf;
        nb_layout lf = {0};
        nb_err err;
        assert_int_equal(nb_gru_setup(&gf, &lf, "gru.", E, H, T, B, &f.g.norm, &err), 0);
        assert_int_equal((int)lf.total, (int)f.layout.total);
        size_t P = lf.total;
        float *pf = calloc(P, sizeof(float)), *gf_ = calloc(P, sizeof(float));
        float xf[T * B * E], dxf[T * B * E], mf[T * B], wf[B * H];
        for (size_t i = 0; i < P; i++)
            pf[i] = (float)f.params[i];
        for (int i = 0; i < T * B * E; i++) {
            xf[i] = (float)f.x[i];
            dxf[i] = 0;
        }
        for (int i = 0; i < T * B; i++)
            mf[i] = (float)f.mask[i];
        for (int i = 0; i < B * H; i++)
            wf[i] = (float)f.w[i];
        nb_gru_forward(&gf, pf, xf, mf, T, B, 1);
        nb_gru_backward(&gf, gf_, dxf, pf, wf);
        const float *hf = nb_gru_last(&gf);
        const double *hd = nb_gru_last_f64(&f.g);
        for (int i = 0; i < B * H; i++)
            assert_close(hf[i], hd[i], 1e-5, 1e-4);
        for (int i = 0; i < f.layout.count; i++) {
            const nb_tensor *t = &f.layout.t[i];
            if (!t->trainable) continue;
            for (size_t j = 0; j < t->n; j++)
                assert_close(gf_[t->off + j], f.grads[t->off + j], 1e-4, 1e-3);
        }
        for (int i = 0; i < T * B * E; i++)
            assert_close(dxf[i], f.dx[i], 1e-4, 1e-3);
        free(pf);
        free(gf_);
        nb_gru_free(&gf);
        fx_free(&f);
    }
}

/* Orthogonal blocks of the recurrent matrix: Q Q^T = I. */
static void test_orthogonal_init(void **s) {
    (void)s;
    fixture f;
    fx_init(&f, NB_NORM_NONE, 0, 0.0625);
    nb_rng rng;
    nb_rng_seed(&rng, 3, 1);
    nb_err err;
    assert_int_equal(nb_gru_init_params_f64(&f.g, f.params, &rng, &err), 0);
    const double *U = f.params + f.g.uc;
    for (int blk = 0; blk < 3; blk++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < H; j++) {
                double d = 0;
                for (int k = 0; k < H; k++)
                    d += U[(blk * H + i) * H + k] * U[(blk * H + j) * H + k];
                assert_close(d, i == j ? 1.0 : 0.0, 1e-12, 0);
            }
    const double *W = f.params + f.g.wc;
    for (int i = 0; i < 3 * H * E; i++)
        assert_true(W[i] >= -0.1 && W[i] < 0.1);
    fx_free(&f);
}

/* ---- PyTorch reference (tests/ref/gru.bin) ------------------------------------------------- */

static ref_file REF;
static int ref_loaded;

static const double *rt(const char *c, const char *n, size_t want) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", c, n);
    const ref_tensor *t = ref_get(&REF, name);
    if (!t) fail_msg("reference tensor '%s' missing", name);
    if (t->n != want) fail_msg("reference tensor '%s' has %zu values, not %zu", name, t->n, want);
    return t->data;
}

static int has(const char *c, const char *n) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", c, n);
    for (int i = 0; i < REF.count; i++)
        if (strcmp(REF.t[i].name, name) == 0) return 1;
    return 0;
}

/* Theano-layout W (in, 2H) and Wx (in, H) <-> our stacked (3H, in) */
static void stack_in(double *dst, const double *W, const double *Wx, int in, int Hh) {
    for (int o = 0; o < 3 * Hh; o++)
        for (int i = 0; i < in; i++)
            dst[o * in + i] = o < 2 * Hh ? W[i * 2 * Hh + o] : Wx[i * Hh + (o - 2 * Hh)];
}

static void cat(double *dst, const double *a, int na, const double *b, int nb) {
    memcpy(dst, a, sizeof(double) * na);
    memcpy(dst + na, b, sizeof(double) * nb);
}

static void check_ref_case(const char *c) {
    enum { RE = 5, RH = 6, RT = 4, RB = 3 };
    const double *cfgv = rt(c, "cfg", 5);
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, (nb_norm_kind)(int)cfgv[0]);
    cfg.eps = cfgv[1];
    cfg.p = 0.3;
    nb_gru_f64 g;
    nb_layout l = {0};
    nb_err err;
    assert_int_equal(nb_gru_setup_f64(&g, &l, "gru.", RE, RH, RT, RB, &cfg, &err), 0);
    assert_int_equal(g.k2, (int)cfgv[2]);
    assert_int_equal(g.k1, (int)cfgv[3]);
    double *p = calloc(l.total, sizeof(double)), *gr = calloc(l.total, sizeof(double));
    double dx[RT * RB * RE] = {0};
    stack_in(p + g.wc, rt(c, "W", RE * 2 * RH), rt(c, "Wx", RE * RH), RE, RH);
    stack_in(p + g.uc, rt(c, "U", RH * 2 * RH), rt(c, "Ux", RH * RH), RH, RH);
    cat(p + g.bc, rt(c, "b", 2 * RH), 2 * RH, rt(c, "bx", RH), RH);
    if (g.gx != (size_t)-1) {
        cat(p + g.gx, rt(c, "s1", 2 * RH), 2 * RH, rt(c, "s2", RH), RH);
        cat(p + g.gh, rt(c, "s3", 2 * RH), 2 * RH, rt(c, "s4", RH), RH);
    }
    if (g.bx != (size_t)-1) {
        cat(p + g.bx, rt(c, "b1", 2 * RH), 2 * RH, rt(c, "b2", RH), RH);
        cat(p + g.bh, rt(c, "b3", 2 * RH), 2 * RH, rt(c, "b4", RH), RH);
    }
    if (g.wgx != (size_t)-1) {
        memcpy(p + g.wgx, rt(c, "gw", 3 * RH), sizeof(double) * 3 * RH);
        memcpy(p + g.wgh, rt(c, "gu", 3 * RH), sizeof(double) * 3 * RH);
    }
    if (g.rmx != (size_t)-1)
        for (size_t i = 0; i < (size_t)3 * RH * g.bn_slots; i++)
            p[g.rvx + i] = p[g.rvh + i] = 1;
    nb_gru_forward_f64(&g, p, rt(c, "x", RT * RB * RE), rt(c, "mask", RT * RB), RT, RB, 1);
    const double *h = nb_gru_last_f64(&g), *want = rt(c, "h", RB * RH);
    for (int i = 0; i < RB * RH; i++)
        assert_close(h[i], want[i], 1e-10, 1e-9);
    nb_gru_backward_f64(&g, gr, dx, p, rt(c, "w", RB * RH));
    const double *wdx = rt(c, "dx", RT * RB * RE);
    for (int i = 0; i < RT * RB * RE; i++)
        assert_close(dx[i], wdx[i], 1e-10, 1e-9);
    double tmp[3 * RH * RH + 3 * RH * RE];
    stack_in(tmp, rt(c, "dW", RE * 2 * RH), rt(c, "dWx", RE * RH), RE, RH);
    for (int i = 0; i < 3 * RH * RE; i++)
        assert_close(gr[g.wc + i], tmp[i], 1e-10, 1e-9);
    stack_in(tmp, rt(c, "dU", RH * 2 * RH), rt(c, "dUx", RH * RH), RH, RH);
    for (int i = 0; i < 3 * RH * RH; i++)
        assert_close(gr[g.uc + i], tmp[i], 1e-10, 1e-9);
    cat(tmp, rt(c, "db", 2 * RH), 2 * RH, rt(c, "dbx", RH), RH);
    for (int i = 0; i < 3 * RH; i++)
        assert_close(gr[g.bc + i], tmp[i], 1e-10, 1e-9);
    const char *pairs[][3] = {
        {"ds1", "ds2", "gx"}, {"ds3", "ds4", "gh"}, {"db1", "db2", "bx"}, {"db3", "db4", "bh"}};
    size_t offs[] = {g.gx, g.gh, g.bx, g.bh};
    for (int k = 0; k < 4; k++) {
        if (offs[k] == (size_t)-1) continue;
        assert_true(has(c, pairs[k][0]));
        cat(tmp, rt(c, pairs[k][0], 2 * RH), 2 * RH, rt(c, pairs[k][1], RH), RH);
        for (int i = 0; i < 3 * RH; i++)
            assert_close(gr[offs[k] + i], tmp[i], 1e-10, 1e-9);
    }
    if (g.wgx != (size_t)-1) {
        const double *a = rt(c, "dgw", 3 * RH), *b = rt(c, "dgu", 3 * RH);
        for (int i = 0; i < 3 * RH; i++) {
            assert_close(gr[g.wgx + i], a[i], 1e-10, 1e-9);
            assert_close(gr[g.wgh + i], b[i], 1e-10, 1e-9);
        }
    }
    free(p);
    free(gr);
    nb_gru_free_f64(&g);
}

static int ref_setup(void **s) {
    (void)s;
    if (!ref_loaded) {
        if (ref_load(&REF, "gru.bin") != 0) return -1;
        ref_loaded = 1;
    }
    return 0;
}

static int ref_teardown(void **s) {
    (void)s;
    ref_free(&REF);
    ref_loaded = 0;
    return 0;
}

static void test_ref_gru(void **s) {
    (void)s;
    const char *cases[] = {"none", "layer", "rms", "prms", "batch", "weight"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_ref_case(cases[i]);
}

/* The order loss against the code's B×B×n broadcast. */
static void test_ref_order_loss(void **s) {
    (void)s;
    enum { OB = 7, ON = 5 };
    const double *sv = rt("order", "s", OB * ON), *cv = rt("order", "c", OB * ON);
    double Em[OB * OB], G[OB * OB], ds[OB * ON] = {0}, dc[OB * ON] = {0};
    nb_order_errors_f64(Em, sv, cv, OB, OB, ON);
    double L = nb_order_loss_f64(G, Em, OB, rt("order", "alpha", 1)[0]);
    assert_close(L, rt("order", "loss", 1)[0], 1e-12, 1e-12);
    nb_order_loss_backward_f64(ds, dc, G, sv, cv, OB, ON);
    const double *wds = rt("order", "ds", OB * ON), *wdc = rt("order", "dc", OB * ON);
    for (int i = 0; i < OB * ON; i++) {
        assert_close(ds[i], wds[i], 1e-12, 1e-10);
        assert_close(dc[i], wdc[i], 1e-12, 1e-10);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_none),
        cmocka_unit_test(test_fd_layer),
        cmocka_unit_test(test_fd_rms),
        cmocka_unit_test(test_fd_prms),
        cmocka_unit_test(test_fd_batch),
        cmocka_unit_test(test_fd_weight),
        cmocka_unit_test(test_fd_dyt),
        cmocka_unit_test(test_mask_carries_state),
        cmocka_unit_test(test_float_matches_double),
        cmocka_unit_test(test_orthogonal_init),
        cmocka_unit_test_setup_teardown(test_ref_gru, ref_setup, ref_teardown),
        cmocka_unit_test_setup_teardown(test_ref_order_loss, ref_setup, ref_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
