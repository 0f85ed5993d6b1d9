/* tests/test_lstm.c — nn/lstm.c: central finite differences in double for every norm, forward
 * and reverse, with padded (masked) rows; the meaning of masks and reversal checked against
 * runs of single unpadded rows; PyTorch reference tensors (tests/ref/lstm.bin, written by
 * tests/ref/ref_lstm.py) when present. */
#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"
#include <omp.h>

#include "nn/vmath.h" /* float versions: this file is not built with NB_F64 */

enum { B = 3, T = 4, C = 3, H = 2 };
static const int lens[B] = {4, 2, 3};

typedef struct fixture {
    nb_lstm_f64 L;
    nb_layout lay;
    double *p, *g, *x, *dx, *wout, *wfin, *out;
} fixture;

/* eps added to the RMS outside the sqrt (the RMSNorm authors' PyTorch file) when set */
static int eps_outside;

static void setup(fixture *f, nb_norm_kind kind, uint64_t seed) {
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.eps_outside = eps_outside;
    cfg.p = 0.3; /* k = 3 of 8 and 1 of 2: a real partial RMS */
    memset(&f->lay, 0, sizeof f->lay);
    nb_err err;
    assert_int_equal(nb_lstm_init_f64(&f->L, C, H, B, T, &cfg, &f->lay, "l.", &err), 0);
    f->p = calloc(f->lay.total, sizeof(double));
    f->g = calloc(f->lay.total, sizeof(double));
    f->x = calloc(B * T * C, sizeof(double));
    f->dx = calloc(B * T * C, sizeof(double));
    f->wout = calloc(B * T * H, sizeof(double));
    f->wfin = calloc(B * H, sizeof(double));
    f->out = calloc(B * T * H, sizeof(double));
    assert_true(f->p && f->g && f->x && f->dx && f->wout && f->wfin && f->out);
    nb_rng rng;
    nb_rng_seed(&rng, seed, 1);
    nb_lstm_init_params_f64(&f->L, f->p, &rng);
    /* random values everywhere (the initial ones are too tame to exercise every term); gains
     * near 1 */
    for (int i = 0; i < f->lay.count; i++) {
        const nb_tensor *t = &f->lay.t[i];
        int gain = strstr(t->name, ".s") || strstr(t->name, "g") != NULL;
        for (size_t j = 0; j < t->n; j++)
            f->p[t->off + j] = gain ? 1 + 0.3 * nb_rng_normal(&rng) : 0.5 * nb_rng_normal(&rng);
    }
    for (int i = 0; i < B * T * C; i++)
        f->x[i] = nb_rng_normal(&rng);
    for (int i = 0; i < B * T * H; i++)
        f->wout[i] = nb_rng_normal(&rng);
    for (int i = 0; i < B * H; i++)
        f->wfin[i] = nb_rng_normal(&rng);
}

static void teardown(fixture *f) {
    nb_lstm_free_f64(&f->L);
    free(f->p);
    free(f->g);
    free(f->x);
    free(f->dx);
    free(f->wout);
    free(f->wfin);
    free(f->out);
}

/* loss = sum(out * wout) + sum(final * wfin); padding positions of out count too (the layer
 * defines them as the carried state). */
static double loss(fixture *f, int reverse) {
    nb_lstm_forward_f64(&f->L, f->out, f->x, lens, B, T, reverse, f->p);
    const double *fin = nb_lstm_final_f64(&f->L);
    double s = 0;
    for (int i = 0; i < B * T * H; i++)
        s += f->out[i] * f->wout[i];
    for (int i = 0; i < B * H; i++)
        s += fin[i] * f->wfin[i];
    return s;
}

static void check_close(double num, double ana, const char *what, size_t i) {
    if (!(fabs(num - ana) <= 1e-7 + 1e-5 * fabs(num))) {
        print_error("%s[%zu]: numeric %.10g analytic %.10g\n", what, i, num, ana);
        fail();
    }
}

static void gradcheck(nb_norm_kind kind, int reverse) {
    fixture f;
    setup(&f, kind, 11 + (uint64_t)kind * 2 + (uint64_t)reverse);
    loss(&f, reverse);
    nb_lstm_backward_f64(&f.L, f.dx, f.g, f.wout, f.wfin, f.p);
    const double h = kind == NB_NORM_PRMS ? 1e-6 : 1e-5;
    double maxg = 0;
    for (int ti = 0; ti < f.lay.count; ti++) {
        const nb_tensor *t = &f.lay.t[ti];
        for (size_t j = 0; j < t->n; j++) {
            double *v = &f.p[t->off + j], keep = *v;
            *v = keep + h;
            double lp = loss(&f, reverse);
            *v = keep - h;
            double lm = loss(&f, reverse);
            *v = keep;
            check_close((lp - lm) / (2 * h), f.g[t->off + j], t->name, j);
            maxg = fmax(maxg, fabs(f.g[t->off + j]));
        }
    }
    for (size_t i = 0; i < (size_t)B * T * C; i++) {
        double keep = f.x[i];
        f.x[i] = keep + h;
        double lp = loss(&f, reverse);
        f.x[i] = keep - h;
        double lm = loss(&f, reverse);
        f.x[i] = keep;
        check_close((lp - lm) / (2 * h), f.dx[i], "x", i);
    }
    assert_true(maxg > 1e-3); /* the check compared real gradients, not zeros */
    teardown(&f);
}

#define GC(name, kind)                                                                             \
    static void test_grad_##name(void **s) {                                                       \
        (void)s;                                                                                   \
        gradcheck(kind, 0);                                                                        \
        gradcheck(kind, 1);                                                                        \
    }
GC(none, NB_NORM_NONE)
GC(batch, NB_NORM_BATCH)
GC(weight, NB_NORM_WEIGHT)
GC(layer, NB_NORM_LAYER)
GC(rms, NB_NORM_RMS)
GC(prms, NB_NORM_PRMS)
GC(dyt, NB_NORM_DYT) /* the unfused path: the norm's own kernels */

/* The same checks with eps outside the sqrt, where dr/dm has another form. */
static void test_grad_eps_outside(void **s) {
    (void)s;
    eps_outside = 1;
    const nb_norm_kind kinds[] = {NB_NORM_LAYER, NB_NORM_RMS, NB_NORM_PRMS};
    for (int i = 0; i < 3; i++) {
        gradcheck(kinds[i], 0);
        gradcheck(kinds[i], 1);
    }
    eps_outside = 0;
}

/* A padded row gives the same outputs on its real steps as the row run alone without padding,
 * forwards and reversed (a reversed row's output at position p is the state after reading
 * positions len-1 .. p). Not for batch (statistics couple the rows). */
static void test_mask_and_reverse_meaning(void **s) {
    (void)s;
    nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS, NB_NORM_WEIGHT};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        for (int reverse = 0; reverse < 2; reverse++) {
            fixture f;
            setup(&f, kinds[ki], 99);
            loss(&f, reverse);
            for (int b = 0; b < B; b++) {
                const int n = lens[b];
                /* the row alone, with its steps in reading order, forwards */
                double xr[T * C], out1[T * H];
                for (int t = 0; t < n; t++) {
                    int src = reverse ? n - 1 - t : t;
                    memcpy(xr + t * C, f.x + ((size_t)b * T + src) * C, sizeof(double) * C);
                }
                nb_lstm_f64 L1;
                nb_layout l1 = {0};
                nb_err err;
                assert_int_equal(nb_lstm_init_f64(&L1, C, H, 1, T, &f.L.norm, &l1, "l.", &err), 0);
                assert_int_equal((int)l1.total, (int)f.lay.total);
                int one = n;
                nb_lstm_forward_f64(&L1, out1, xr, &one, 1, n, 0, f.p);
                for (int t = 0; t < n; t++) {
                    int dst = reverse ? n - 1 - t : t;
                    for (int j = 0; j < H; j++)
                        assert_close(f.out[((size_t)b * T + dst) * H + j], out1[t * H + j], 1e-12,
                                     1e-12);
                }
                /* the final state is the state after the last real step */
                for (int j = 0; j < H; j++)
                    assert_close(nb_lstm_final_f64(&f.L)[b * H + j], out1[(n - 1) * H + j], 1e-12,
                                 1e-12);
                nb_lstm_free_f64(&L1);
            }
            teardown(&f);
        }
    }
}

/* float and double runs of the same layer agree to float precision. */
static void test_float_matches_double(void **s) {
    (void)s;
    for (nb_norm_kind k = 0; k <= NB_NORM_DYT; k++) {
        fixture f;
        setup(&f, k, 5);
        loss(&f, 1);
        nb_lstm Lf;
        nb_layout lf = {0};
        nb_err err;
        assert_int_equal(nb_lstm_init(&Lf, C, H, B, T, &f.L.norm, &lf, "l.", &err), 0);
        float pf[256], xf[B * T * C], of[B * T * H];
        assert_true(lf.total <= 256);
        for (size_t i = 0; i < lf.total; i++)
            pf[i] = (float)f.p[i];
        for (int i = 0; i < B * T * C; i++)
            xf[i] = (float)f.x[i];
        nb_lstm_forward(&Lf, of, xf, lens, B, T, 1, pf);
        for (int i = 0; i < B * T * H; i++)
            assert_close(of[i], f.out[i], 1e-5, 1e-4);
        nb_lstm_free(&Lf);
        teardown(&f);
    }
}

/* The float layer of TB rows, TT steps, TC inputs, TH units for norm k on 2 threads gives the
 * gradients of the double layer on 1 thread, with masked and reversed rows. */
static void threaded_check(nb_norm_kind k, int TB, int TT, int TC, int TH) {
    int *tl = calloc((size_t)TB, sizeof(int));
    assert_non_null(tl);
    for (int b = 0; b < TB; b++)
        tl[b] = 1 + b % TT;
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, k);
    cfg.p = 0.3;
    nb_lstm_f64 Ld;
    nb_lstm Lf;
    nb_layout ld = {0}, lf = {0};
    nb_err err;
    omp_set_num_threads(2);
    assert_int_equal(nb_lstm_init_f64(&Ld, TC, TH, TB, TT, &cfg, &ld, "l.", &err), 0);
    assert_int_equal(nb_lstm_init(&Lf, TC, TH, TB, TT, &cfg, &lf, "l.", &err), 0);
    assert_true(Lf.nthr >= 2 && ld.total == lf.total);
    const size_t n = ld.total, nx = (size_t)TB * TT * TC, no = (size_t)TB * TT * TH;
    double *pd = calloc(n, sizeof(double)), *gd = calloc(n, sizeof(double));
    double *xd = calloc(nx, sizeof(double)), *dxd = calloc(nx, sizeof(double));
    double *wd = calloc(no, sizeof(double)), *od = calloc(no, sizeof(double));
    float *pf = calloc(n, sizeof(float)), *gf = calloc(n, sizeof(float));
    float *xf = calloc(nx, sizeof(float)), *dxf = calloc(nx, sizeof(float));
    float *wf = calloc(no, sizeof(float)), *of = calloc(no, sizeof(float));
    assert_true(pd && gd && xd && dxd && wd && od && pf && gf && xf && dxf && wf && of);
    nb_rng rng;
    nb_rng_seed(&rng, 77 + (uint64_t)k, 1);
    nb_lstm_init_params_f64(&Ld, pd, &rng);
    for (int i = 0; i < ld.count; i++) { /* gains near 1, the rest drawn wider than init */
        const nb_tensor *t = &ld.t[i];
        int gain = strstr(t->name, ".s") || strstr(t->name, "g") != NULL;
        for (size_t j = 0; j < t->n; j++)
            if (gain)
                pd[t->off + j] = 1 + 0.3 * nb_rng_normal(&rng);
            else if (!strstr(t->name, "W") && !strstr(t->name, "U"))
                pd[t->off + j] = 0.3 * nb_rng_normal(&rng);
    }
    for (size_t i = 0; i < nx; i++)
        xd[i] = nb_rng_normal(&rng);
    for (size_t i = 0; i < no; i++)
        wd[i] = nb_rng_normal(&rng);
    for (size_t i = 0; i < n; i++)
        pf[i] = (float)pd[i];
    for (size_t i = 0; i < nx; i++)
        xf[i] = (float)xd[i];
    for (size_t i = 0; i < no; i++)
        wf[i] = (float)wd[i];
    for (int rev = 0; rev < 2; rev++) {
        memset(gd, 0, n * sizeof(double));
        memset(dxd, 0, nx * sizeof(double));
        memset(gf, 0, n * sizeof(float));
        memset(dxf, 0, nx * sizeof(float));
        omp_set_num_threads(1);
        nb_lstm_forward_f64(&Ld, od, xd, tl, TB, TT, rev, pd);
        nb_lstm_backward_f64(&Ld, dxd, gd, wd, NULL, pd);
        omp_set_num_threads(2);
        nb_lstm_forward(&Lf, of, xf, tl, TB, TT, rev, pf);
        nb_lstm_backward(&Lf, dxf, gf, wf, NULL, pf);
        for (size_t i = 0; i < no; i++)
            assert_close(of[i], od[i], 1e-4, 1e-3);
        double all = 0;
        for (size_t j = 0; j < n; j++)
            all = fmax(all, fabs(gd[j]));
        assert_true(all > 1e-3);
        for (int i = 0; i < ld.count; i++) { /* per tensor, relative to its largest value */
            const nb_tensor *t = &ld.t[i];
            double big = 0;
            for (size_t j = 0; j < t->n; j++)
                big = fmax(big, fabs(gd[t->off + j]));
            /* every tensor gets a gradient, except h0 under batch: BN over rows of the same
             * h0·U^T gives a constant, so h0's gradient is 0 up to rounding */
            if (k == NB_NORM_BATCH && strstr(t->name, "h0")) big = 1e-3 * all;
            assert_true(big > 1e-6 * all);
            for (size_t j = 0; j < t->n; j++)
                if (fabs(gf[t->off + j] - gd[t->off + j]) > 1e-5 + 2e-3 * big) {
                    print_error("%s %s rev %d [%zu]: float/2 threads %.8g double/1 %.8g\n",
                                nb_norm_name(k), t->name, rev, j, gf[t->off + j], gd[t->off + j]);
                    fail();
                }
        }
        double big = 0;
        for (size_t i = 0; i < nx; i++)
            big = fmax(big, fabs(dxd[i]));
        for (size_t i = 0; i < nx; i++)
            assert_close(dxf[i], dxd[i], 1e-5 + 2e-3 * big, 0);
    }
    nb_lstm_free_f64(&Ld);
    nb_lstm_free(&Lf);
    free(pd), free(gd), free(xd), free(dxd), free(wd), free(od);
    free(pf), free(gf), free(xf), free(dxf), free(wf), free(of);
    free(tl);
}

/* At a size where the work is split over threads (B*4H*T >= 16384) and the gain/bias gradients
 * come from per-thread partials, every norm. */
static void test_threaded_matches_serial(void **s) {
    (void)s;
    for (nb_norm_kind k = 0; k <= NB_NORM_DYT; k++)
        threaded_check(k, 64, 5, 16, 64);
}

/* batch splits the hidden units over the threads, in groups of 8, and meets once a step: with
 * 44 units the threads get 24 and 20 (one finishes its step first, so a missing barrier reads
 * the other's unfinished columns), and with 8 units one thread has none (it must still meet
 * the other at every step). */
static void test_batch_threads_uneven(void **s) {
    (void)s;
    threaded_check(NB_NORM_BATCH, 48, 6, 8, 44);
    threaded_check(NB_NORM_BATCH, 64, 8, 8, 8);
}

/* Reference tensors from PyTorch (tests/ref/ref_lstm.py): outputs and every gradient. */
static void test_reference(void **s) {
    (void)s;
    ref_file rf = {0};
    if (ref_load(&rf, "lstm.bin") != 0) fail_msg("tests/ref/lstm.bin missing");
    const char *names[] = {"none", "batch", "weight", "layer", "rms", "prms"};
    for (nb_norm_kind k = 0; k < NB_NORM_DYT; k++) {
        for (int reverse = 0; reverse < 2; reverse++) {
            char key[64];
            const ref_tensor *rt[8];
            const char *parts[] = {"p", "x", "wout", "wfin", "out", "final", "grad", "dx"};
            for (int i = 0; i < 8; i++) {
                snprintf(key, sizeof key, "%s.%d.%s", names[k], reverse, parts[i]);
                rt[i] = ref_get(&rf, key);
                assert_non_null(rt[i]);
            }
            fixture f;
            setup(&f, k, 1);
            assert_int_equal((int)rt[0]->n, (int)f.lay.total);
            memcpy(f.p, rt[0]->data, sizeof(double) * f.lay.total);
            memcpy(f.x, rt[1]->data, sizeof(double) * B * T * C);
            memcpy(f.wout, rt[2]->data, sizeof(double) * B * T * H);
            memcpy(f.wfin, rt[3]->data, sizeof(double) * B * H);
            loss(&f, reverse);
            nb_lstm_backward_f64(&f.L, f.dx, f.g, f.wout, f.wfin, f.p);
            for (int i = 0; i < B * T * H; i++)
                assert_close(f.out[i], rt[4]->data[i], 1e-10, 1e-8);
            for (int i = 0; i < B * H; i++)
                assert_close(nb_lstm_final_f64(&f.L)[i], rt[5]->data[i], 1e-10, 1e-8);
            for (size_t i = 0; i < f.lay.total; i++)
                assert_close(f.g[i], rt[6]->data[i], 1e-9, 1e-7);
            for (int i = 0; i < B * T * C; i++)
                assert_close(f.dx[i], rt[7]->data[i], 1e-9, 1e-7);
            teardown(&f);
        }
    }
    ref_free(&rf);
}

/* The vectorizable float sigmoid and tanh against libm in double over [-30, 30]. */
static void test_vmath(void **s) {
    (void)s;
    double worst_t = 0, worst_s = 0;
    for (int i = -300000; i <= 300000; i++) {
        float x = (float)(i * 1e-4);
        double t = tanh((double)x), sg = 1 / (1 + exp(-(double)x));
        worst_t = fmax(worst_t, fabs(vm_tanh(x) - t));
        worst_s = fmax(worst_s, fabs(vm_sigmoid(x) - sg) / sg);
    }
    assert_true(worst_t < 3e-7);
    assert_true(worst_s < 1e-6);
    assert_true(vm_tanh(100.0f) == 1.0f && vm_tanh(-100.0f) == -1.0f);
    assert_true(vm_sigmoid(-200.0f) >= 0.0f && vm_sigmoid(200.0f) == 1.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_none),
        cmocka_unit_test(test_grad_batch),
        cmocka_unit_test(test_grad_weight),
        cmocka_unit_test(test_grad_layer),
        cmocka_unit_test(test_grad_rms),
        cmocka_unit_test(test_grad_prms),
        cmocka_unit_test(test_grad_dyt),
        cmocka_unit_test(test_grad_eps_outside),
        cmocka_unit_test(test_mask_and_reverse_meaning),
        cmocka_unit_test(test_threaded_matches_serial),
        cmocka_unit_test(test_batch_threads_uneven),
        cmocka_unit_test(test_float_matches_double),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_vmath),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
