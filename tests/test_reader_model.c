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
    /* 2e-6: with BN over 3 rows a dropout mask can leave a row of near-constant values, where
     * the loss curves sharply (h = 1e-5 was 5e-5 off for one weight; rounding at 2e-6 is
     * ~1e-10) */
    const double h = 2e-6;
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
    /* u has a norm of about sqrt(N) (tens): a step of h along it is a large one, and where
     * batch statistics over 3 rows curve the loss sharply the central difference's O(h^2)
     * error shows; a tenth of h keeps it well under the tolerance */
    const double hd = h / 10;
    for (size_t i = 0; i < m.layout.total; i++)
        m.params[i] += hd * u[i];
    double lp = loss_at(&m, ns);
    for (size_t i = 0; i < m.layout.total; i++)
        m.params[i] -= 2 * hd * u[i];
    double lm = loss_at(&m, ns);
    assert_close((lp - lm) / (2 * hd), dot, 1e-7, 1e-5);
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
T(dyt, NB_NORM_DYT) /* the LSTMs unfused: the norm's own kernels */

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

/* The dropout masks of the reference's training forward (keep < 1): drawn from this stream. */
enum { REF_NOISE_SEED = 42 };

/* The masks of the last forward of m, named "masks.<bidir>.<k>", dumped (NORMBENCH_REF_DUMP)
 * for ref_reader.py, or checked against what it used (rf not NULL). */
static void masks(nb_reader_f64 *m, int bidir, FILE *dump, const ref_file *rf) {
    const size_t nd = (size_t)B * TD * D, nq = (size_t)B * TQ * D, ng = (size_t)B * D;
    const struct {
        const char *name;
        const double *x;
        size_t n;
    } k[] = {{"kd", m->kd, nd},
             {"kq", m->kq, nq},
             {"kg", m->kg, ng},
             {"kdr", m->kdr, nd},
             {"kqr", m->kqr, nq}};
    for (int i = 0; i < (bidir ? 5 : 3); i++) {
        char name[64];
        snprintf(name, sizeof name, "masks.%d.%s", bidir, k[i].name);
        ref_dump(dump, name, k[i].x, k[i].n);
        if (!rf) continue;
        const ref_tensor *t = ref_get(rf, name);
        if (!t) fail_msg("tests/ref/reader.bin has no tensor '%s'", name);
        assert_int_equal((int)t->n, (int)k[i].n);
        for (size_t j = 0; j < k[i].n; j++)
            assert_close(k[i].x[j], t->data[j], 0, 0);
    }
}

/* One reference case: the model with the file's parameters rt[0], keep 1 (no dropout) or < 1
 * (training masks from REF_NOISE_SEED), against the loss, softmax and gradient rt[1..3]. */
static void check_ref(const ref_file *rf, const char *key, const ref_tensor **rt, nb_norm_kind kind,
                      int bidir, int every, double keep) {
    nb_reader_cfg cfg = test_cfg(kind, bidir, every, keep);
    nb_reader_f64 m;
    nb_rng rng, noise;
    nb_rng_seed(&rng, 1, NB_STREAM_INIT);
    nb_rng_seed(&noise, REF_NOISE_SEED, NB_STREAM_DROPOUT);
    nb_err err;
    assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), 0);
    assert_int_equal((int)rt[0]->n, (int)m.layout.total);
    memcpy(m.params, rt[0]->data, sizeof(double) * m.layout.total);
    double loss = nb_reader_forward_f64(&m, tokd, lend, TD, tokq, lenq, TQ, ys, B, 1,
                                        keep < 1 ? &noise : NULL);
    if (keep < 1) masks(&m, bidir, NULL, rf);
    if (!(fabs(loss - rt[1]->data[0]) <= 1e-12 + 1e-10 * fabs(rt[1]->data[0])))
        fail_msg("%s: loss %.15g, reference %.15g", key, loss, rt[1]->data[0]);
    for (int i = 0; i < B * V; i++)
        assert_close(m.probs[i], rt[2]->data[i], 1e-12, 1e-9);
    memset(m.grads, 0, sizeof(double) * m.layout.total);
    nb_reader_backward_f64(&m);
    for (size_t i = 0; i < m.layout.total; i++)
        assert_close(m.grads[i], rt[3]->data[i], 1e-11, 1e-8);
    nb_reader_free_f64(&m);
}

/* NORMBENCH_REF_DUMP=DIR: writes DIR/reader_masks.bin, the masks of a training forward for
 * bidirectional 0 and 1, the input of tests/ref/ref_reader.py's dropout cases. */
static void dump_masks(void) {
    FILE *f = ref_dump_open("reader_masks.bin");
    if (!f) return;
    for (int bidir = 0; bidir < 2; bidir++) {
        nb_reader_cfg cfg = test_cfg(NB_NORM_NONE, bidir, 0, 0.5);
        nb_reader_f64 m;
        nb_rng rng, noise;
        nb_rng_seed(&rng, 1, NB_STREAM_INIT);
        nb_rng_seed(&noise, REF_NOISE_SEED, NB_STREAM_DROPOUT);
        nb_err err;
        assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), 0);
        nb_reader_forward_f64(&m, tokd, lend, TD, tokq, lenq, TQ, ys, B, 1, &noise);
        masks(&m, bidir, f, NULL);
        nb_reader_free_f64(&m);
    }
    fclose(f);
}

/* The initialization the code's model.py asks of utils.py, on a unidirectional model (where the
 * attention and output matrices are square) and a bidirectional one: ff_att_q, ff_out_ctx,
 * ff_out_q, ff_out_mean_d (and ff_logit) pass ortho=False, so they are uniform
 * +-sqrt(6/(nin+nout+1)) even when square; ff_att_ctx and ff_att_bi_dq are 0.05 x orthogonal
 * when square; ff_att_proj is norm_vec, uniform +-sqrt(1/d). */
static void test_init_rules(void **s) {
    (void)s;
    const int d = 40;
    for (int bidir = 0; bidir < 2; bidir++)
        for (int vsq = 0; vsq < 2; vsq++) {
            const int X = bidir ? 2 * d : d, Vv = vsq ? d : 50;
            nb_reader_cfg cfg = {
                .V = Vv, .D = d, .bidir = bidir, .Bmax = 2, .TDmax = 4, .TQmax = 3, .keep = 0.5};
            nb_norm_cfg_default(&cfg.norm, NB_NORM_LAYER);
            nb_reader m;
            nb_rng rng;
            nb_rng_seed(&rng, 11, NB_STREAM_INIT);
            nb_err err;
            assert_int_equal(nb_reader_init(&m, &cfg, &rng, &err), 0);
            const struct {
                size_t off;
                int rows, cols, ortho;
            } w[] = {{m.waq, d, X, 0}, {m.woc, d, X, 0},  {m.woq, d, X, 0}, {m.wom, d, X, 0},
                     {m.wl, Vv, d, 0}, {m.wac, d, X, -1}, {m.bm, X, X, -1}, {m.emb, Vv, d, -1}};
            for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
                const float *p = m.params + w[i].off;
                const int r = w[i].rows, c = w[i].cols;
                const int ortho = w[i].ortho < 0 ? r == c : 0;
                const size_t n = (size_t)r * c;
                double mx = 0, ss = 0;
                for (size_t j = 0; j < n; j++) {
                    mx = fmax(mx, fabs(p[j]));
                    ss += (double)p[j] * p[j];
                }
                if (ortho) {
                    /* rows orthogonal, each of norm 0.05 */
                    for (int a = 0; a < r; a += 7)
                        for (int b2 = 0; b2 < r; b2 += 5) {
                            double dot = 0;
                            for (int j = 0; j < c; j++)
                                dot += (double)p[(size_t)a * c + j] * p[(size_t)b2 * c + j];
                            assert_close(dot, a == b2 ? 0.0025 : 0, 1e-7, 0);
                        }
                } else {
                    /* uniform on +-lim: the largest of n draws near lim, the mean square
                     * lim^2/3 (0.05 x orthogonal has entries about 0.05/sqrt(c), 20x
                     * smaller at d = 40) */
                    const double lim = sqrt(6.0 / (r + c + 1));
                    assert_true(mx <= lim);
                    assert_true(mx > 0.95 * lim);
                    assert_close(ss / n, lim * lim / 3, 0, 0.15);
                }
            }
            /* ff_att_proj: norm_vec, U(+-sqrt(1/d)) */
            const double lim = sqrt(1.0 / d);
            double mx = 0;
            for (int j = 0; j < d; j++)
                mx = fmax(mx, fabs(m.params[m.watt + j]));
            assert_true(mx <= lim);
            assert_true(mx > 0.8 * lim);
            nb_reader_free(&m);
        }
}

/* Bidirectional: the backward encoders' embedding-dropout masks are drawn apart from the forward
 * ones (the code embeds the passage once per direction); each keeps about half. */
/* A batch split into shards (row0, grad_rows; each shard padded to its own longest passage, as
 * nb_cloze_batch pads it) draws the same dropout masks per row and gives, summed, the whole
 * batch's loss and gradients (in double: to rounding), for layer, rms and per-shard-free norms. */
static void test_shards(void **s) {
    (void)s;
    enum { SB = 6, ST = 9, SQ = 4, SD = 5, SV = 11 };
    static const int lens[SB] = {8, 3, 5, 2, 7, 4}, qlens[SB] = {4, 2, 3, 1, 2, 4};
    static const int cuts[] = {0, 2, 6};
    const nb_norm_kind kinds[] = {NB_NORM_LAYER, NB_NORM_RMS, NB_NORM_NONE};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        nb_reader_cfg cfg = {
            .V = SV, .D = SD, .bidir = 1, .Bmax = SB, .TDmax = ST, .TQmax = SQ, .keep = 0.5};
        nb_norm_cfg_default(&cfg.norm, kinds[ki]);
        nb_reader_f64 m;
        nb_rng rng;
        nb_rng_seed(&rng, 11, NB_STREAM_INIT);
        nb_err err;
        assert_int_equal(nb_reader_init_f64(&m, &cfg, &rng, &err), 0);
        int td[SB * ST], tq[SB * SQ], y[SB];
        for (int i = 0; i < SB * ST; i++)
            td[i] = (7 * i + 3) % SV;
        for (int i = 0; i < SB * SQ; i++)
            tq[i] = (5 * i + 1) % SV;
        for (int b = 0; b < SB; b++)
            y[b] = (3 * b + 2) % SV;
        const size_t P = m.layout.total;
        double *g = calloc(P, sizeof(double)), *kd = malloc(sizeof(double) * SB * ST * SD);
        assert_true(g && kd);
        nb_rng noise;
        nb_rng_seed(&noise, 5, NB_STREAM_DROPOUT);
        memset(m.grads, 0, sizeof(double) * P);
        const double whole =
            nb_reader_forward_f64(&m, td, lens, ST, tq, qlens, SQ, y, SB, 1, &noise);
        nb_reader_backward_f64(&m);
        memcpy(g, m.grads, sizeof(double) * P);
        memcpy(kd, m.kd, sizeof(double) * SB * ST * SD);
        const uint64_t after = nb_rng_u64(&noise);
        memset(m.grads, 0, sizeof(double) * P);
        double sum = 0;
        for (int c = 0; c < 2; c++) {
            const int lo = cuts[c], n = cuts[c + 1] - lo;
            int T = 0, sd[SB * ST];
            for (int b = 0; b < n; b++)
                T = lens[lo + b] + 1 > T ? lens[lo + b] + 1 : T;
            if (T > ST) T = ST;
            for (int b = 0; b < n; b++)
                for (int t = 0; t < T; t++)
                    sd[b * T + t] = td[(lo + b) * ST + t];
            nb_rng_seed(&noise, 5, NB_STREAM_DROPOUT);
            m.row0 = lo;
            m.grad_rows = SB;
            sum += n *
                   nb_reader_forward_f64(&m, sd, lens + lo, T, tq + lo * SQ, qlens + lo, SQ, y + lo,
                                         n, 1, &noise) /
                   SB;
            assert_true(nb_rng_u64(&noise) == after); /* the same draws whatever the rows */
            for (int b = 0; b < n; b++)
                for (int t = 0; t < T; t++)
                    for (int j = 0; j < SD; j++)
                        assert_true(m.kd[((size_t)b * T + t) * SD + j] ==
                                    kd[((size_t)(lo + b) * ST + t) * SD + j]);
            nb_reader_backward_f64(&m);
        }
        assert_close(sum, whole, 1e-12, 1e-12);
        for (size_t i = 0; i < P; i++)
            if (!(fabs(m.grads[i] - g[i]) <= 1e-12 + 1e-9 * fabs(g[i])))
                fail_msg("%s: gradient %zu is %.15g over the shards, %.15g whole",
                         nb_norm_name(kinds[ki]), i, m.grads[i], g[i]);
        free(g);
        free(kd);
        nb_reader_free_f64(&m);
    }
}

static void test_direction_masks(void **s) {
    (void)s;
    enum { BB = 8, TT = 30, QQ = 10, DD = 16, VV = 20 };
    int td[BB * TT], tq[BB * QQ], ld[BB], lq[BB], y[BB];
    for (int i = 0; i < BB * TT; i++)
        td[i] = i % VV;
    for (int i = 0; i < BB * QQ; i++)
        tq[i] = (3 * i) % VV;
    for (int b = 0; b < BB; b++) {
        ld[b] = TT;
        lq[b] = QQ;
        y[b] = b;
    }
    for (int bidir = 0; bidir < 2; bidir++) {
        nb_reader_cfg cfg = {
            .V = VV, .D = DD, .bidir = bidir, .Bmax = BB, .TDmax = TT, .TQmax = QQ, .keep = 0.5};
        nb_norm_cfg_default(&cfg.norm, NB_NORM_NONE);
        nb_reader m;
        nb_rng rng, noise;
        nb_rng_seed(&rng, 3, NB_STREAM_INIT);
        nb_rng_seed(&noise, 4, NB_STREAM_DROPOUT);
        nb_err err;
        assert_int_equal(nb_reader_init(&m, &cfg, &rng, &err), 0);
        nb_reader_forward(&m, td, ld, TT, tq, lq, QQ, y, BB, 1, &noise);
        if (!bidir) {
            assert_null(m.kdr);
            assert_null(m.kqr);
        } else {
            const size_t nd = (size_t)BB * TT * DD, nq = (size_t)BB * QQ * DD;
            size_t differ = 0, kept = 0, keptr = 0;
            for (size_t i = 0; i < nd; i++) {
                differ += m.kd[i] != m.kdr[i];
                kept += m.kd[i] != 0;
                keptr += m.kdr[i] != 0;
            }
            /* independent halves differ in half the places: 1920 +- 44 of 3840 */
            assert_true(differ > nd * 0.45 && differ < nd * 0.55);
            assert_true(kept > nd * 0.45 && kept < nd * 0.55);
            assert_true(keptr > nd * 0.45 && keptr < nd * 0.55);
            differ = 0;
            for (size_t i = 0; i < nq; i++)
                differ += m.kq[i] != m.kqr[i];
            assert_true(differ > nq * 0.4 && differ < nq * 0.6);
            /* and not in evaluation */
            nb_reader_forward(&m, td, ld, TT, tq, lq, QQ, y, BB, 0, NULL);
            for (size_t i = 0; i < nd; i++)
                assert_true(m.kd[i] == 1 && m.kdr[i] == 1);
        }
        nb_reader_free(&m);
    }
}

static void test_reference(void **s) {
    (void)s;
    dump_masks();
    ref_file rf = {0};
    if (ref_load(&rf, "reader.bin") != 0) fail_msg("tests/ref/reader.bin missing");
    /* the six norms, then batch with bn_everywhere ("batch-everywhere") */
    /* the six norms (DyT has no PyTorch reference here: test_dyt above checks its gradients) */
    for (int kk = 0; kk <= NB_NORM_DYT; kk++) {
        const int every = kk == NB_NORM_DYT;
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
            check_ref(&rf, key, rt, kind, bidir, every, 1.0);
            /* with dropout, the masks the C model draws (dumped, see ref_reader.py) */
            snprintf(key, sizeof key, "%s%s.%d.drop.", nb_norm_name(kind),
                     every ? "-everywhere" : "", bidir);
            const char *dparts[] = {"loss", "probs", "grad"};
            for (int i = 0; i < 3; i++) {
                char k2[96];
                snprintf(k2, sizeof k2, "%s%s", key, dparts[i]);
                rt[i + 1] = ref_get(&rf, k2);
                if (!rt[i + 1]) fail_msg("tests/ref/reader.bin has no tensor '%s'", k2);
            }
            check_ref(&rf, key, rt, kind, bidir, every, 0.5);
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
        cmocka_unit_test(test_dyt),
        cmocka_unit_test(test_batch_everywhere),
        cmocka_unit_test(test_everywhere_refused),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_init_rules),
        cmocka_unit_test(test_direction_masks),
        cmocka_unit_test(test_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
