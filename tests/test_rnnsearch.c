/* tests/test_rnnsearch.c — nn/rnnsearch.c, RNNSearch as Nematus v0.3: every gradient of the whole
 * model (embeddings, bidirectional encoder, initial state, attention, conditional GRU, deep output,
 * label-smoothed loss, word dropout) against central finite differences in double for every norm;
 * padding changes nothing; a batch split into shards (word dropout on) gives the batch's loss
 * and gradients; beam search equals exhaustive search on a tiny vocabulary and beam 1
 * equals greedy; Table 5's statistic; and PyTorch's autograd (tests/ref/ref_rnnsearch.py). */
#include "tests/testutil.h"
#include "nn/nn.h"
#include "tests/ref.h"

enum { B = 3, TX = 4, TY = 4, VS = 6, VT = 7, E = 3, H = 4 };
/* time-major (T, B); padding positions hold junk ids that must not matter */
static const int src[TX * B] = {1, 2, 3, 4, 5, 1, 2, 5, 2, 3, 5, 5};
static const int slen[B] = {4, 2, 3};
static const int tgt[TY * B] = {2, 3, 4, 5, 6, 0, 1, 0, 6, 0, 4, 6};
static const int tlen[B] = {4, 3, 2};

static nb_rnnsearch_cfg test_cfg(nb_norm_kind kind) {
    nb_rnnsearch_cfg cfg;
    nb_rnnsearch_cfg_default(&cfg, VS, VT, 0, kind);
    cfg.E = E;
    cfg.H = H;
    cfg.Bmax = B;
    cfg.Txmax = TX;
    cfg.Tymax = TY;
    cfg.norm.p = 0.3;
    return cfg;
}

static double loss_at(nb_rnnsearch_f64 *m, uint64_t ns) {
    nb_rng noise;
    nb_rng_seed(&noise, ns, NB_STREAM_DROPOUT);
    return nb_rnnsearch_forward_f64(m, src, slen, TX, tgt, tlen, TY, B, 1, &noise, NULL);
}

static void init_perturbed(nb_rnnsearch_f64 *m, const nb_rnnsearch_cfg *cfg, uint64_t seed) {
    nb_rng rng;
    nb_rng_seed(&rng, seed, NB_STREAM_INIT);
    nb_err err;
    assert_int_equal(nb_rnnsearch_init_f64(m, cfg, &rng, &err), 0);
    /* larger values than the initial ones so that every term matters */
    for (int ti = 0; ti < m->layout.count; ti++) {
        const nb_tensor *t = &m->layout.t[ti];
        if (!t->trainable) continue;
        for (size_t j = 0; j < t->n; j++)
            m->params[t->off + j] += 0.4 * nb_rng_normal(&rng);
    }
}

static void check(nb_norm_kind kind, double drop) {
    nb_rnnsearch_cfg cfg = test_cfg(kind);
    cfg.norm.p = 0.5; /* k >= 2 everywhere: a one-value RMS is too curved for the differences */
    cfg.dropout_source = cfg.dropout_target = drop;
    nb_rnnsearch_f64 m;
    init_perturbed(&m, &cfg, 11 + (uint64_t)kind);
    const uint64_t ns = 5;
    loss_at(&m, ns);
    memset(m.grads, 0, sizeof(double) * m.layout.total);
    nb_rnnsearch_backward_f64(&m);
    double *g = malloc(sizeof(double) * m.layout.total);
    assert_non_null(g);
    memcpy(g, m.grads, sizeof(double) * m.layout.total);
    const double h = 1e-5;
    for (int ti = 0; ti < m.layout.count; ti++) {
        const nb_tensor *t = &m.layout.t[ti];
        if (!t->trainable) continue;
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
                print_error("%s drop %g: %s[%zu] numeric %.10g analytic %.10g\n",
                            nb_norm_name(kind), drop, t->name, j, num, ana);
                fail();
            }
            tmax = fmax(tmax, fabs(ana));
        }
        /* under BatchNorm a bias right before a norm cancels (the batch mean takes it away) */
        const size_t nl = strlen(t->name);
        const int pre_bn = kind == NB_NORM_BATCH && strcmp(t->name, "logit.b") != 0 &&
                           (!strcmp(t->name + nl - 2, ".b") || !strcmp(t->name + nl - 3, ".bc"));
        if (!(tmax > 1e-7) && !pre_bn) {
            print_error("%s: %s has no gradient\n", nb_norm_name(kind), t->name);
            fail();
        }
    }
    free(g);
    nb_rnnsearch_free_f64(&m);
}

static void test_fd_none(void **s) {
    (void)s;
    check(NB_NORM_NONE, 0);
    check(NB_NORM_NONE, 0.3);
}
static void test_fd_layer(void **s) {
    (void)s;
    check(NB_NORM_LAYER, 0);
}
static void test_fd_rms(void **s) {
    (void)s;
    check(NB_NORM_RMS, 0.3);
}
static void test_fd_prms(void **s) {
    (void)s;
    check(NB_NORM_PRMS, 0);
}
static void test_fd_batch(void **s) {
    (void)s;
    check(NB_NORM_BATCH, 0);
}
static void test_fd_weight(void **s) {
    (void)s;
    check(NB_NORM_WEIGHT, 0);
}
static void test_fd_dyt(void **s) {
    (void)s;
    check(NB_NORM_DYT, 0); /* the GRUs unfused, the other sites through the norm's kernels */
    check(NB_NORM_DYT, 0.3);
}

/* A batch with padding (junk ids, longer padded lengths) gives each sentence exactly what it
 * gives alone: the loss is the mean of the sentences' losses and the gradients likewise. */
static void test_padding(void **s) {
    (void)s;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS};
    for (int ki = 0; ki < 3; ki++) {
        nb_rnnsearch_cfg cfg = test_cfg(kinds[ki]);
        cfg.Txmax = TX + 2;
        cfg.Tymax = TY + 2;
        nb_rnnsearch_f64 m;
        init_perturbed(&m, &cfg, 3);
        const size_t P = m.layout.total;
        /* the batch padded by two more positions of junk */
        int sp[(TX + 2) * B], tp[(TY + 2) * B];
        for (int i = 0; i < (TX + 2) * B; i++)
            sp[i] = i < TX * B ? src[i] : (i * 7) % VS;
        for (int i = 0; i < (TY + 2) * B; i++)
            tp[i] = i < TY * B ? tgt[i] : (i * 5) % VT;
        memset(m.grads, 0, sizeof(double) * P);
        double lb =
            nb_rnnsearch_forward_f64(&m, sp, slen, TX + 2, tp, tlen, TY + 2, B, 0, NULL, NULL);
        nb_rnnsearch_backward_f64(&m);
        double *gb = malloc(sizeof(double) * P);
        assert_non_null(gb);
        for (size_t i = 0; i < P; i++)
            gb[i] = m.grads[i] * B;
        memset(m.grads, 0, sizeof(double) * P);
        double ls = 0;
        for (int b = 0; b < B; b++) {
            int s1[TX], t1[TY];
            for (int t = 0; t < slen[b]; t++)
                s1[t] = src[t * B + b];
            for (int t = 0; t < tlen[b]; t++)
                t1[t] = tgt[t * B + b];
            ls += nb_rnnsearch_forward_f64(&m, s1, &slen[b], slen[b], t1, &tlen[b], tlen[b], 1, 0,
                                           NULL, NULL);
            nb_rnnsearch_backward_f64(&m);
        }
        assert_true(fabs(lb * B - ls) < 1e-10 * fabs(ls));
        for (size_t i = 0; i < P; i++)
            if (!(fabs(gb[i] - m.grads[i]) <= 1e-10 + 1e-8 * fabs(gb[i]))) {
                print_error("%s: gradient %zu batch %.12g alone %.12g\n", nb_norm_name(kinds[ki]),
                            i, gb[i], m.grads[i]);
                fail();
            }
        free(gb);
        nb_rnnsearch_free_f64(&m);
    }
}

/* Data-parallel shards with word dropout on: sentence 0, then sentences 1 and 2, each at its own
 * length, as shards of the batch of 3 (row0, grad_rows): the losses add up to the batch's and the
 * gradients to its gradients (every sentence's masks come from its own streams). */
static void test_shards(void **s) {
    (void)s;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_WEIGHT, NB_NORM_LAYER, NB_NORM_RMS,
                                  NB_NORM_PRMS};
    for (int ki = 0; ki < 5; ki++) {
        nb_rnnsearch_cfg cfg = test_cfg(kinds[ki]);
        cfg.dropout_source = cfg.dropout_target = 0.3;
        nb_rnnsearch_f64 m;
        init_perturbed(&m, &cfg, 7);
        const size_t P = m.layout.total;
        memset(m.grads, 0, sizeof(double) * P);
        double lb = loss_at(&m, 9);
        nb_rnnsearch_backward_f64(&m);
        double *gb = malloc(sizeof(double) * P);
        assert_non_null(gb);
        memcpy(gb, m.grads, sizeof(double) * P);
        memset(m.grads, 0, sizeof(double) * P);
        m.grad_rows = B;
        double ls = 0;
        for (int part = 0; part < 2; part++) {
            const int b0 = part ? 1 : 0, nb = part ? 2 : 1;
            int s1[TX * 2], t1[TY * 2], sl[2], tl[2], tx = 1, ty = 1;
            for (int b = 0; b < nb; b++) {
                sl[b] = slen[b0 + b], tl[b] = tlen[b0 + b];
                tx = sl[b] > tx ? sl[b] : tx, ty = tl[b] > ty ? tl[b] : ty;
            }
            for (int t = 0; t < tx; t++)
                for (int b = 0; b < nb; b++)
                    s1[t * nb + b] = src[t * B + b0 + b];
            for (int t = 0; t < ty; t++)
                for (int b = 0; b < nb; b++)
                    t1[t * nb + b] = tgt[t * B + b0 + b];
            m.row0 = b0;
            nb_rng noise;
            nb_rng_seed(&noise, 9, NB_STREAM_DROPOUT);
            ls += nb_rnnsearch_forward_f64(&m, s1, sl, tx, t1, tl, ty, nb, 1, &noise, NULL);
            nb_rnnsearch_backward_f64(&m);
        }
        assert_true(fabs(lb - ls) < 1e-12 * fabs(lb));
        for (size_t i = 0; i < P; i++)
            if (!(fabs(gb[i] - m.grads[i]) <= 1e-12 + 1e-10 * fabs(gb[i]))) {
                print_error("%s: gradient %zu batch %.12g shards %.12g\n", nb_norm_name(kinds[ki]),
                            i, gb[i], m.grads[i]);
                fail();
            }
        /* the masks are real: another draw gives another loss */
        m.row0 = m.grad_rows = 0;
        assert_true(fabs(loss_at(&m, 10) - lb) > 1e-9);
        free(gb);
        nb_rnnsearch_free_f64(&m);
    }
}

/* The best length-normalized sequence by enumeration: every sequence of non-eos tokens of length
 * < maxlen followed by eos, and every one of maxlen non-eos tokens. */
static void enumerate(nb_rnnsearch_f64 *m, int sb, int maxlen, int depth, int *seq, double cost,
                      const double *state, double *best, int *bseq, int *blen) {
    /* Nematus' rules: a sequence still open after maxlen tokens as if an eos followed */
    const int plus = !m->cfg.beam_simple;
    double *st = malloc(sizeof(double) * H), *lp = malloc(sizeof(double) * VT);
    assert_true(st && lp);
    int prev = depth ? seq[depth - 1] : -1;
    nb_rnnsearch_dec_step_f64(m, 1, &sb, &prev, state, st, lp, depth);
    double lpv[VT];
    memcpy(lpv, lp, sizeof lpv);
    for (int w = 0; w < 3; w++) {
        double c = cost - lpv[w];
        seq[depth] = w;
        if (w == 0 || depth + 1 == maxlen) {
            double sc = c / (depth + 1 + (w != 0 ? plus : 0));
            if (sc < *best) {
                *best = sc;
                *blen = w == 0 ? depth : depth + 1;
                memcpy(bseq, seq, sizeof(int) * (size_t)*blen);
            }
        } else {
            enumerate(m, sb, maxlen, depth + 1, seq, c, st, best, bseq, blen);
        }
    }
    free(st);
    free(lp);
}

static void beam_exhaustive(int simple) {
    const int maxlen = 4, K = 32;
    nb_rnnsearch_cfg cfg = test_cfg(NB_NORM_LAYER);
    cfg.beam_simple = simple;
    cfg.Vt = 3; /* eos 0 and two words */
    cfg.beam_max = K;
    nb_rnnsearch_f64 m;
    init_perturbed(&m, &cfg, 21);
    /* sharpen the output so that the best sequence is not trivially short */
    for (int ti = 0; ti < m.layout.count; ti++)
        if (!strcmp(m.layout.t[ti].name, "logit.W"))
            for (size_t j = 0; j < m.layout.t[ti].n; j++)
                m.params[m.layout.t[ti].off + j] *= 3;
    int out[B * 4], olen[B], gout[B * 4], glen[B];
    double sc[B];
    nb_err err;
    assert_int_equal(nb_rnnsearch_beam_f64(&m, src, slen, TX, B, K, maxlen, out, olen, sc, &err),
                     0);
    int lens_seen[5] = {0};
    for (int b = 0; b < B; b++) {
        nb_rnnsearch_encode_f64(&m, src, slen, TX, B);
        double s0[H];
        nb_rnnsearch_dec_init_f64(&m, 1, &b, s0);
        int seq[8], bseq[8], blen = 0;
        double best = INFINITY;
        enumerate(&m, b, maxlen, 0, seq, 0, s0, &best, bseq, &blen);
        assert_int_equal(olen[b], blen);
        for (int i = 0; i < blen; i++)
            assert_int_equal(out[b * maxlen + i], bseq[i]);
        assert_true(fabs(sc[b] + best) < 1e-9);
        lens_seen[blen]++;
    }
    /* beam 1 is greedy */
    assert_int_equal(nb_rnnsearch_beam_f64(&m, src, slen, TX, B, 1, maxlen, out, olen, NULL, &err),
                     0);
    nb_rnnsearch_greedy_f64(&m, src, slen, TX, B, maxlen, gout, glen);
    for (int b = 0; b < B; b++) {
        assert_int_equal(olen[b], glen[b]);
        for (int i = 0; i < glen[b]; i++)
            assert_int_equal(out[b * maxlen + i], gout[b * maxlen + i]);
    }
    nb_rnnsearch_free_f64(&m);
}

static void test_beam_exhaustive(void **s) {
    (void)s;
    beam_exhaustive(0);
    beam_exhaustive(1);
}

/* Nematus v0.3's beam rules (inference.py), restated over one sentence with the decoder's own
 * step: the finished hypotheses stay (each with its cost) and the open ones' continuations, best
 * first, fill the places they leave; the pick is the least cost / (tokens + 1), a hypothesis still
 * open after maxlen tokens counted as if an eos followed. out receives the tokens without eos;
 * returns their number. */
enum { RK = 3, RMAX = 5 };
typedef struct rhyp {
    double cost, st[H];
    int tok[RMAX], n, fin;
} rhyp;

static int ref_nematus_beam(nb_rnnsearch_f64 *m, int sb, int maxlen, int *out) {
    rhyp hy[RK], nh[RK];
    int nhy = 1;
    memset(hy, 0, sizeof hy);
    nb_rnnsearch_dec_init_f64(m, 1, &sb, hy[0].st);
    for (int i = 0; i < maxlen; i++) {
        int open = 0, k = 0;
        for (int j = 0; j < nhy; j++)
            open += !hy[j].fin;
        if (!open) break;
        for (int j = 0; j < nhy; j++)
            if (hy[j].fin) nh[k++] = hy[j];
        /* every continuation of the open ones, by cost (ties: hypothesis, then word) */
        struct {
            double c;
            int j, w;
        } cand[RK * VT];
        double st[RK][H];
        int nc = 0;
        for (int j = 0; j < nhy; j++) {
            if (hy[j].fin) continue;
            double lp[VT];
            int prev = hy[j].n ? hy[j].tok[hy[j].n - 1] : -1;
            nb_rnnsearch_dec_step_f64(m, 1, &sb, &prev, hy[j].st, st[j], lp, i);
            for (int w = 0; w < VT; w++) {
                int p = nc++;
                while (p > 0 && hy[j].cost - lp[w] < cand[p - 1].c) {
                    cand[p] = cand[p - 1];
                    p--;
                }
                cand[p].c = hy[j].cost - lp[w];
                cand[p].j = j;
                cand[p].w = w;
            }
        }
        for (int c = 0; k < RK && c < nc; c++) {
            rhyp h = hy[cand[c].j];
            h.cost = cand[c].c;
            memcpy(h.st, st[cand[c].j], sizeof h.st);
            if (cand[c].w == 0)
                h.fin = 1;
            else
                h.tok[h.n++] = cand[c].w;
            nh[k++] = h;
        }
        memcpy(hy, nh, sizeof hy);
        nhy = k;
    }
    int best = 0;
    for (int j = 1; j < nhy; j++)
        if (hy[j].cost / (hy[j].n + 1) < hy[best].cost / (hy[best].n + 1)) best = j;
    memcpy(out, hy[best].tok, sizeof(int) * (size_t)hy[best].n);
    return hy[best].n;
}

/* The beam's default rules are Nematus v0.3's: the same 1-best as the restatement above on 600
 * sentences of random models, where the simple rules differ on some (else this proves
 * nothing). */
static void test_beam_nematus(void **s) {
    (void)s;
    const int maxlen = 4;
    int same = 0, differ_simple = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        nb_rnnsearch_cfg cfg = test_cfg(NB_NORM_LAYER);
        cfg.beam_max = RK;
        nb_rnnsearch_f64 m;
        init_perturbed(&m, &cfg, 100 + seed);
        int out[B * maxlen], olen[B], sout[B * maxlen], slen2[B];
        nb_err err;
        assert_int_equal(
            nb_rnnsearch_beam_f64(&m, src, slen, TX, B, RK, maxlen, out, olen, NULL, &err), 0);
        m.cfg.beam_simple = 1;
        assert_int_equal(
            nb_rnnsearch_beam_f64(&m, src, slen, TX, B, RK, maxlen, sout, slen2, NULL, &err), 0);
        m.cfg.beam_simple = 0;
        nb_rnnsearch_encode_f64(&m, src, slen, TX, B);
        for (int b = 0; b < B; b++) {
            int ref[RMAX];
            int n = ref_nematus_beam(&m, b, maxlen, ref);
            int eq = n == olen[b] && !memcmp(ref, out + b * maxlen, sizeof(int) * (size_t)n);
            if (!eq)
                print_error("seed %d sentence %d: length %d, Nematus' rules %d\n", (int)seed, b,
                            olen[b], n);
            same += eq;
            differ_simple +=
                n != slen2[b] || memcmp(ref, sout + b * maxlen, sizeof(int) * (size_t)n);
        }
        nb_rnnsearch_free_f64(&m);
    }
    print_message("Nematus' rules: %d of 600 the same; the simple rules differ on %d\n", same,
                  differ_simple);
    assert_int_equal(same, 600);
    assert_true(differ_simple > 0);
}

/* Decoding step by step reproduces the teacher-forced forward's log-probabilities. */
static void test_step_matches_forward(void **s) {
    (void)s;
    nb_rnnsearch_cfg cfg = test_cfg(NB_NORM_RMS);
    cfg.label_smoothing = 0;
    nb_rnnsearch_f64 m;
    init_perturbed(&m, &cfg, 9);
    double nll_step = 0;
    nb_rnnsearch_encode_f64(&m, src, slen, TX, B);
    int rows[B] = {0, 1, 2}, prev[B] = {-1, -1, -1};
    double st[2][B * H], lp[B * VT];
    nb_rnnsearch_dec_init_f64(&m, B, rows, st[0]);
    for (int t = 0; t < TY; t++) {
        nb_rnnsearch_dec_step_f64(&m, B, rows, prev, st[0], st[1], lp, t);
        memcpy(st[0], st[1], sizeof st[0]);
        for (int b = 0; b < B; b++) {
            if (t < tlen[b]) nll_step -= lp[b * VT + tgt[t * B + b]];
            prev[b] = tgt[t * B + b];
        }
    }
    double loss = nb_rnnsearch_forward_f64(&m, src, slen, TX, tgt, tlen, TY, B, 0, NULL, NULL);
    assert_true(fabs(m.nll - nll_step) < 1e-10);
    assert_true(fabs(loss * B - m.nll) < 1e-10);
    assert_int_equal(m.ntok, 9);
    nb_rnnsearch_free_f64(&m);
}

/* Table 5's sums: counts per position, and the values of the decoder GRU1's h·U. */
static void test_stats(void **s) {
    (void)s;
    nb_rnnsearch_cfg cfg = test_cfg(NB_NORM_NONE);
    nb_rnnsearch_f64 m;
    init_perturbed(&m, &cfg, 4);
    nb_rnnsearch_stats st;
    memset(&st, 0, sizeof st);
    nb_rnnsearch_forward_f64(&m, src, slen, TX, tgt, tlen, TY, B, 0, NULL, &st);
    const double want_n[5] = {3 * 3 * H, 3 * 3 * H, 2 * 3 * H, 1 * 3 * H, 9 * 3 * H};
    for (int k = 0; k < 5; k++)
        assert_true(st.n[k] == want_n[k]);
    /* position 1 (t = 0) starts from s_-1: its pre-activations are s_-1 · Uc^T */
    double sum = 0;
    const double *U = m.params + m.dec1.uc;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < 3 * H; o++) {
            double v = 0;
            for (int i = 0; i < H; i++)
                v += m.s0[b * H + i] * U[o * H + i];
            sum += v;
        }
    assert_true(fabs(sum - st.sum[0]) < 1e-10);
    assert_true(st.sumsq[4] > 0);
    nb_rnnsearch_free_f64(&m);
}

/* PyTorch: loss and every gradient for none, layer, rms (tests/ref/rnnsearch.bin). */
static void test_ref(void **s) {
    (void)s;
    ref_file rf = {0};
    assert_int_equal(ref_load(&rf, "rnnsearch.bin"), 0);
    const char *names[] = {"none", "layer", "rms"};
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS};
    for (int ki = 0; ki < 3; ki++) {
        nb_rnnsearch_cfg cfg = test_cfg(kinds[ki]);
        nb_rnnsearch_f64 m;
        init_perturbed(&m, &cfg, 1);
        char key[160];
        for (int ti = 0; ti < m.layout.count; ti++) {
            const nb_tensor *t = &m.layout.t[ti];
            snprintf(key, sizeof key, "%s/p/%s", names[ki], t->name);
            const ref_tensor *r = ref_get(&rf, key);
            assert_non_null(r);
            assert_int_equal(r->n, t->n);
            memcpy(m.params + t->off, r->data, sizeof(double) * t->n);
        }
        double loss = nb_rnnsearch_forward_f64(&m, src, slen, TX, tgt, tlen, TY, B, 1, NULL, NULL);
        memset(m.grads, 0, sizeof(double) * m.layout.total);
        nb_rnnsearch_backward_f64(&m);
        snprintf(key, sizeof key, "%s/loss", names[ki]);
        const ref_tensor *rl = ref_get(&rf, key);
        assert_non_null(rl);
        if (!(fabs(loss - rl->data[0]) < 1e-9 * fabs(rl->data[0]))) {
            print_error("%s loss %.12g torch %.12g\n", names[ki], loss, rl->data[0]);
            fail();
        }
        for (int ti = 0; ti < m.layout.count; ti++) {
            const nb_tensor *t = &m.layout.t[ti];
            snprintf(key, sizeof key, "%s/g/%s", names[ki], t->name);
            const ref_tensor *r = ref_get(&rf, key);
            assert_non_null(r);
            for (size_t j = 0; j < t->n; j++)
                if (!(fabs(m.grads[t->off + j] - r->data[j]) <= 1e-10 + 1e-7 * fabs(r->data[j]))) {
                    print_error("%s: %s[%zu] %.12g torch %.12g\n", names[ki], t->name, j,
                                m.grads[t->off + j], r->data[j]);
                    fail();
                }
        }
        nb_rnnsearch_free_f64(&m);
    }
    ref_free(&rf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_none),      cmocka_unit_test(test_fd_layer),
        cmocka_unit_test(test_fd_rms),       cmocka_unit_test(test_fd_prms),
        cmocka_unit_test(test_fd_batch),     cmocka_unit_test(test_fd_weight),
        cmocka_unit_test(test_fd_dyt),       cmocka_unit_test(test_padding),
        cmocka_unit_test(test_shards),       cmocka_unit_test(test_beam_exhaustive),
        cmocka_unit_test(test_beam_nematus), cmocka_unit_test(test_step_matches_forward),
        cmocka_unit_test(test_stats),        cmocka_unit_test(test_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
