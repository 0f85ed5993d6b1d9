/* tests/test_reader_model.c — nn/reader.c, the attentive reader: every gradient of the whole model
 * (embeddings, four LSTMs, attention with its bilinear term, output with its skip term, softmax
 * over the vocabulary, dropout) against central finite differences in double, for every norm,
 * bidirectional and not, and for batch with bn_everywhere (BN on the attention and output layers
 * too); and along a random direction. Then against PyTorch's autograd (tests/ref/ref_reader.py). */
#include "tests/testutil.h"
#include "nn/nn.h"
#include "tests/ref.h"

enum { B = 3, TD = 5, TQ = 3, V = 7, D = 3 };
static const int tokd[B * TD] = {1, 2, 3, 4, 5, 6, 5, 4, 0, 6, 2, 2, 3, 1, 0};
static const int lend[B] = {5, 3, 4};
static const int tokq[B * TQ] = {3, 1, 0, 4, 4, 6, 5, 2, 3};
static const int lenq[B] = {2, 3, 1};
static const int ys[B] = {3, 6, 2};

static double loss_at(nb_reader_f64 *m, uint64_t noise_seed) {
    nb_rng noise;
    nb_rng_seed(&noise, noise_seed, NB_STREAM_DROPOUT);
    return nb_reader_forward_f64(m, tokd, lend, TD, tokq, lenq, TQ, ys, B, 1, &noise);
}

/* The test model's configuration: the file's sizes, pRMSNorm p 0.3 (a real partial RMS). */
static nb_reader_cfg test_cfg(nb_norm_kind kind, int bidir, int everywhere, double keep) {
    nb_reader_cfg cfg = {.V = V,
                         .D = D,
                         .bidir = bidir,
                         .Bmax = B,
                         .TDmax = TD,
                         .TQmax = TQ,
                         .keep = keep,
                         .bn_everywhere = everywhere};
    nb_norm_cfg_default(&cfg.norm, kind);
    cfg.norm.p = 0.3;
    return cfg;
}

static void check(nb_norm_kind kind, int bidir, int everywhere) {
    nb_reader_cfg cfg = test_cfg(kind, bidir, everywhere, 0.5);
    nb_reader_f64 m;
    nb_rng rng;
    nb_rng_seed(&rng, 7 + (uint64_t)kind, NB_STREAM_INIT);
    nb_err err;
    assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), 0);
    /* larger values than the initial ones so that every term matters */
    for (size_t i = 0; i < m.layout.total; i++)
        m.params[i] += 0.3 * nb_rng_normal(&rng);
    const uint64_t ns = 42;
    loss_at(&m, ns);
    memset(m.grads, 0, sizeof(double) * m.layout.total);
    nb_reader_backward_f64(&m);
    double *g = malloc(sizeof(double) * m.layout.total),
           *u = malloc(sizeof(double) * m.layout.total);
    assert_true(g && u);
    memcpy(g, m.grads, sizeof(double) * m.layout.total);
    const double h = 1e-5;
    int checked = 0;
    for (int ti = 0; ti < m.layout.count; ti++) {
        const nb_tensor *t = &m.layout.t[ti];
        double tmax = 0;
        for (size_t j = 0; j < t->n; j++) {
            double *v = &m.params[t->off + j], keep = *v;
            *v = keep + h;
            double lp = loss_at(&m, ns);
            *v = keep - h;
            double lm = loss_at(&m, ns);
            *v = keep;
            double num = (lp - lm) / (2 * h), ana = g[t->off + j];
            if (!(fabs(num - ana) <= 1e-7 + 1e-5 * fabs(num))) {
                print_error("%s%s bidir %d: %s[%zu] numeric %.10g analytic %.10g\n",
                            nb_norm_name(kind), everywhere ? "-everywhere" : "", bidir, t->name, j,
                            num, ana);
                fail();
            }
            tmax = fmax(tmax, fabs(ana));
            checked++;
        }
        /* every tensor takes part (h0 and the norm biases too), except h0 under BatchNorm: h0·U
         * is the same on every row, so BN over the batch maps it to 0 whatever h0 is */
        if (!(tmax > 1e-6) && !(kind == NB_NORM_BATCH && strstr(t->name, ".h0"))) {
            print_error("%s: tensor %s has an all-zero gradient\n", nb_norm_name(kind), t->name);
            fail();
        }
    }
    assert_true(checked > 100);
    /* along a random direction */
    double dot = 0;
    for (size_t i = 0; i < m.layout.total; i++) {
        u[i] = nb_rng_normal(&rng);
        dot += u[i] * g[i];
    }
    for (size_t i = 0; i < m.layout.total; i++)
        m.params[i] += h * u[i];
    double lp = loss_at(&m, ns);
    for (size_t i = 0; i < m.layout.total; i++)
        m.params[i] -= 2 * h * u[i];
    double lm = loss_at(&m, ns);
    assert_close((lp - lm) / (2 * h), dot, 1e-7, 1e-5);
    free(g);
    free(u);
    nb_reader_free_f64(&m);
}

#define T(name, kind)                                                                              \
    static void test_##name(void **s) {                                                            \
        (void)s;                                                                                   \
        check(kind, 1, 0);                                                                         \
        check(kind, 0, 0);                                                                         \
    }
T(none, NB_NORM_NONE)
T(batch, NB_NORM_BATCH)
T(weight, NB_NORM_WEIGHT)
T(layer, NB_NORM_LAYER)
T(rms, NB_NORM_RMS)
T(prms, NB_NORM_PRMS)

static void test_batch_everywhere(void **s) {
    (void)s;
    check(NB_NORM_BATCH, 1, 1);
    check(NB_NORM_BATCH, 0, 1);
}

/* bn_everywhere is refused for any norm but batch, and for a batch of 1 */
static void test_everywhere_refused(void **s) {
    (void)s;
    nb_reader_cfg cfg = {.V = V,
                         .D = D,
                         .bidir = 1,
                         .Bmax = B,
                         .TDmax = TD,
                         .TQmax = TQ,
                         .keep = 1,
                         .bn_everywhere = 1};
    nb_reader_f64 m;
    nb_rng rng;
    nb_rng_seed(&rng, 1, NB_STREAM_INIT);
    nb_err err;
    nb_norm_cfg_default(&cfg.norm, NB_NORM_LAYER);
    assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), -1);
    assert_non_null(strstr(err.msg, "bn-everywhere"));
    nb_norm_cfg_default(&cfg.norm, NB_NORM_BATCH);
    cfg.Bmax = 1;
    assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), -1);
    cfg.Bmax = B;
    assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), 0);
    nb_reader_free_f64(&m);
}

static void test_reference(void **s) {
    (void)s;
    ref_file rf = {0};
    if (ref_load(&rf, "reader.bin") != 0) fail_msg("tests/ref/reader.bin missing");
    /* the six norms, then batch with bn_everywhere ("batch-everywhere") */
    for (int kk = 0; kk <= NB_NORM_COUNT; kk++) {
        const int every = kk == NB_NORM_COUNT;
        const nb_norm_kind kind = every ? NB_NORM_BATCH : (nb_norm_kind)kk;
        for (int bidir = 0; bidir < 2; bidir++) {
            char key[64];
            const char *parts[] = {"p", "loss", "probs", "grad"};
            const ref_tensor *rt[4];
            for (int i = 0; i < 4; i++) {
                snprintf(key, sizeof key, "%s%s.%d.%s", nb_norm_name(kind),
                         every ? "-everywhere" : "", bidir, parts[i]);
                rt[i] = ref_get(&rf, key);
                if (!rt[i]) fail_msg("tests/ref/reader.bin has no tensor '%s'", key);
            }
            nb_reader_cfg cfg = test_cfg(kind, bidir, every, 1.0);
            nb_reader_f64 m;
            nb_rng rng;
            nb_rng_seed(&rng, 1, NB_STREAM_INIT);
            nb_err err;
            assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), 0);
            assert_int_equal((int)rt[0]->n, (int)m.layout.total);
            memcpy(m.params, rt[0]->data, sizeof(double) * m.layout.total);
            double loss = nb_reader_forward_f64(&m, tokd, lend, TD, tokq, lenq, TQ, ys, B, 1, NULL);
            assert_close(loss, rt[1]->data[0], 1e-12, 1e-10);
            for (int i = 0; i < B * V; i++)
                assert_close(m.probs[i], rt[2]->data[i], 1e-12, 1e-9);
            memset(m.grads, 0, sizeof(double) * m.layout.total);
            nb_reader_backward_f64(&m);
            for (size_t i = 0; i < m.layout.total; i++)
                assert_close(m.grads[i], rt[3]->data[i], 1e-11, 1e-8);
            nb_reader_free_f64(&m);
        }
    }
    ref_free(&rf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_weight),
        cmocka_unit_test(test_layer),
        cmocka_unit_test(test_rms),
        cmocka_unit_test(test_prms),
        cmocka_unit_test(test_batch_everywhere),
        cmocka_unit_test(test_everywhere_refused),
        cmocka_unit_test(test_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
