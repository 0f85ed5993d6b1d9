/* tests/test_transformer.c — nn/transformer.c: central finite differences in double of the whole
 * model for every norm, post and pre, with padding, causal masks and dropout on; padding
 * changes nothing (dropout on too); a batch split into shards gives the batch's loss and
 * gradients; incremental decoding equals full decoding; beam search equals exhaustive
 * search on a tiny vocabulary and greedy follows the argmax; PyTorch reference tensors
 * (tests/ref/transformer.bin, written by tests/ref/ref_transformer.py). */
#include "tests/testutil.h"
#include "tests/ref.h"
#include "nn/nn.h"

typedef struct fx {
    nb_tf_f64 *m;
    nb_layout lay;
    double *p, *g;
    nb_tf_cfg c;
} fx;

static void tiny_cfg(nb_tf_cfg *c, nb_norm_kind kind, int pre, int V) {
    memset(c, 0, sizeof *c);
    c->enc_layers = 2;
    c->dec_layers = 1;
    c->dim = 6;
    c->heads = 2;
    c->ffn = 7;
    c->vocab = V;
    c->pad = 0;
    c->bos = 1;
    c->eos = 2;
    c->share_emb = 1;
    c->tie_out = 1;
    c->pre_norm = pre;
    c->label_smooth = 0.1;
    c->max_pos = 12;
    nb_norm_cfg_default(&c->norm, kind);
    c->norm.p = 0.5;
}

static void fx_new(fx *f, const nb_tf_cfg *c, int rows, uint64_t seed) {
    memset(f, 0, sizeof *f);
    f->c = *c;
    nb_err err;
    f->m = nb_tf_new_f64(c, &f->lay, rows, &err);
    assert_non_null(f->m);
    f->p = calloc(f->lay.total, sizeof(double));
    f->g = calloc(f->lay.total, sizeof(double));
    nb_rng rng;
    nb_rng_seed(&rng, seed, 1);
    nb_tf_init_params_f64(f->m, f->p, &rng);
    /* move gains, biases and running averages off their initial values */
    nb_tf_tensor_info t[256];
    int n = nb_tf_tensors_f64(f->m, t, 256);
    assert_true(n <= 256);
    for (int i = 0; i < n; i++) {
        const char *nm = t[i].name;
        int is_b = strstr(nm, ".b") && !strstr(nm, "emb"), is_g = strstr(nm, ".g") != NULL;
        for (size_t j = 0; j < t[i].n; j++) {
            double *v = &f->p[t[i].off + j];
            if (is_b) *v = 0.1 * (nb_rng_uniform(&rng) - 0.5);
            if (is_g) *v *= 1 + 0.3 * (nb_rng_uniform(&rng) - 0.5);
            if (strstr(nm, "norm.rv")) *v = 0.5 + nb_rng_uniform(&rng);
            if (strstr(nm, "norm.rm")) *v = 0.2 * (nb_rng_uniform(&rng) - 0.5);
        }
    }
}

static void fx_free(fx *f) {
    nb_tf_free_f64(f->m);
    free(f->p);
    free(f->g);
}

enum { B = 3, S = 4, T = 5 };
/* lengths: source 4, 2, 1; target (with eos) 5, 3, 2 */
static const int SRC[B * S] = {3, 4, 5, 6, 5, 3, 0, 0, 6, 0, 0, 0};
static const int TGT[B * T] = {4, 3, 6, 5, 2, 6, 6, 2, 0, 0, 3, 2, 0, 0, 0};

static void check_fd(nb_norm_kind kind, int pre, double dropout) {
    nb_tf_cfg c;
    tiny_cfg(&c, kind, pre, 7);
    c.dropout = c.attn_dropout = c.relu_dropout = dropout;
    fx f;
    fx_new(&f, &c, B * T, 11 + kind);
    const int training = kind == NB_NORM_BATCH ? 1 : dropout > 0;
    nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, training, 1, 99, NULL);
    nb_tf_backward_f64(f.m, f.g, f.p);
    const double h = 1e-6;
    int checked = 0;
    for (int i = 0; i < f.lay.count; i++) {
        const nb_tensor *t = &f.lay.t[i];
        if (!t->trainable) continue;
        for (size_t j = 0; j < t->n; j++) {
            double *pp = &f.p[t->off + j], keep = *pp;
            /* BN's running averages are updated by each training forward: keep them fixed */
            *pp = keep + h;
            double lp = nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, training, 0, 99, NULL);
            *pp = keep - h;
            double lm = nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, training, 0, 99, NULL);
            *pp = keep;
            double num = (lp - lm) / (2 * h), got = f.g[t->off + j];
            if (!(fabs(num - got) <= 1e-7 + 1e-5 * fabs(num))) {
                print_error("%s %s %s[%zu]: backward %.10g, finite difference %.10g\n",
                            nb_norm_name(kind), pre ? "pre" : "post", t->name, j, got, num);
                fail();
            }
            checked++;
        }
    }
    assert_true(checked > 500);
    fx_free(&f);
}

static const nb_norm_kind ALL[] = {NB_NORM_NONE,  NB_NORM_BATCH, NB_NORM_WEIGHT,
                                   NB_NORM_LAYER, NB_NORM_RMS,   NB_NORM_PRMS};

static void test_fd_post(void **s) {
    (void)s;
    for (size_t k = 0; k < 6; k++)
        check_fd(ALL[k], 0, 0.0);
    check_fd(NB_NORM_DYT, 0, 0.0);
}
static void test_fd_pre(void **s) {
    (void)s;
    for (size_t k = 0; k < 6; k++)
        check_fd(ALL[k], 1, 0.0);
    check_fd(NB_NORM_DYT, 1, 0.0); /* the final norm is DyT too */
}
/* dropout masks are a function of the seed: the same forward twice is the same function */
static void test_fd_dropout(void **s) {
    (void)s;
    check_fd(NB_NORM_LAYER, 0, 0.2);
    check_fd(NB_NORM_RMS, 1, 0.2);
}

/* SRC and TGT padded by two more positions each: src2 (B, S+2), tgt2 (B, T+2). */
static void pad_batch(int *src2, int *tgt2) {
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < S + 2; i++)
            src2[b * (S + 2) + i] = i < S ? SRC[b * S + i] : 0;
        for (int t = 0; t < T + 2; t++)
            tgt2[b * (T + 2) + t] = t < T ? TGT[b * T + t] : 0;
    }
}

/* The batch padded further (S+2, T+2) gives the same loss and gradients; a padded source token
 * changed to another id changes nothing either. */
static void test_padding_changes_nothing(void **s) {
    (void)s;
    int src2[B * (S + 2)], tgt2[B * (T + 2)];
    pad_batch(src2, tgt2);
    for (int pre = 0; pre < 2; pre++)
        for (size_t k = 0; k < 6; k++) {
            nb_tf_cfg c;
            tiny_cfg(&c, ALL[k], pre, 7);
            fx f;
            fx_new(&f, &c, B * (T + 2), 5);
            double *g1 = calloc(f.lay.total, sizeof(double));
            double l1 = nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, 1, 1, 1, NULL);
            nb_tf_backward_f64(f.m, g1, f.p);
            double l2 = nb_tf_forward_f64(f.m, f.p, src2, tgt2, B, S + 2, T + 2, 1, 1, 1, NULL);
            nb_tf_backward_f64(f.m, f.g, f.p);
            assert_close(l2, l1, 1e-12, 1e-12);
            for (size_t i = 0; i < f.lay.total; i++)
                assert_close(f.g[i], g1[i], 1e-12, 1e-10);
            free(g1);
            fx_free(&f);
        }
}

/* With dropout on, the masks are keyed by each sentence and position: more padding changes
 * nothing either. */
static void test_padding_with_dropout(void **s) {
    (void)s;
    int src2[B * (S + 2)], tgt2[B * (T + 2)];
    pad_batch(src2, tgt2);
    for (int pre = 0; pre < 2; pre++) {
        nb_tf_cfg c;
        tiny_cfg(&c, NB_NORM_LAYER, pre, 7);
        c.dropout = c.attn_dropout = c.relu_dropout = 0.3;
        fx f;
        fx_new(&f, &c, B * (T + 2), 5);
        double *g1 = calloc(f.lay.total, sizeof(double));
        double l1 = nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, 1, 1, 7, NULL);
        nb_tf_backward_f64(f.m, g1, f.p);
        double l2 = nb_tf_forward_f64(f.m, f.p, src2, tgt2, B, S + 2, T + 2, 1, 1, 7, NULL);
        nb_tf_backward_f64(f.m, f.g, f.p);
        assert_close(l2, l1, 1e-12, 1e-12);
        for (size_t i = 0; i < f.lay.total; i++)
            assert_close(f.g[i], g1[i], 1e-12, 1e-10);
        /* and the masks are real: another seed gives another loss */
        double l3 = nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, 1, 0, 8, NULL);
        assert_true(fabs(l3 - l1) > 1e-6);
        free(g1);
        fx_free(&f);
    }
}

/* Data-parallel shards: sentence 0 and sentences 1..2, each padded to its own longest, as shards
 * of the batch of 3 (nb_tf_set_shard), dropout on: their losses add up to the batch's and their
 * gradients to its gradients, for every norm but batch (whose statistics are the shard's). */
static void test_shards(void **s) {
    (void)s;
    /* sentence 0: source 4, target 5; sentences 1, 2: sources 2 and 1, targets 3 and 2 */
    static const int src_a[1 * 4] = {3, 4, 5, 6}, tgt_a[1 * 5] = {4, 3, 6, 5, 2};
    static const int src_b[2 * 2] = {5, 3, 6, 0}, tgt_b[2 * 3] = {6, 6, 2, 3, 2, 0};
    for (int pre = 0; pre < 2; pre++)
        for (size_t k = 0; k < 6; k++) {
            if (ALL[k] == NB_NORM_BATCH) continue;
            nb_tf_cfg c;
            tiny_cfg(&c, ALL[k], pre, 7);
            c.dropout = c.attn_dropout = c.relu_dropout = 0.25;
            fx f;
            fx_new(&f, &c, B * T, 3);
            double *g1 = calloc(f.lay.total, sizeof(double));
            double l1 = nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, 1, 1, 42, NULL);
            nb_tf_backward_f64(f.m, g1, f.p);
            nb_tf_set_shard_f64(f.m, 0, B);
            double la = nb_tf_forward_f64(f.m, f.p, src_a, tgt_a, 1, 4, 5, 1, 1, 42, NULL);
            nb_tf_backward_f64(f.m, f.g, f.p);
            nb_tf_set_shard_f64(f.m, 1, B);
            double lb = nb_tf_forward_f64(f.m, f.p, src_b, tgt_b, 2, 2, 3, 1, 1, 42, NULL);
            nb_tf_backward_f64(f.m, f.g, f.p);
            nb_tf_set_shard_f64(f.m, 0, 0);
            assert_close(la + lb, l1, 1e-12, 1e-12);
            for (size_t i = 0; i < f.lay.total; i++)
                if (!(fabs(f.g[i] - g1[i]) <= 1e-12 + 1e-10 * fabs(g1[i]))) {
                    print_error("%s %s: gradient %zu of the shards %.12g, of the batch %.12g\n",
                                nb_norm_name(ALL[k]), pre ? "pre" : "post", i, f.g[i], g1[i]);
                    fail();
                }
            free(g1);
            fx_free(&f);
        }
}

/* Incremental decoding (cached keys and values, one position at a time) gives the log-probs of
 * the full forward in evaluation mode. */
static void test_incremental_equals_full(void **s) {
    (void)s;
    for (int pre = 0; pre < 2; pre++)
        for (size_t k = 0; k < 6; k++) {
            nb_tf_cfg c;
            tiny_cfg(&c, ALL[k], pre, 7);
            if (k == 1) c.bos = -1; /* zero's shift: the zero vector at position 0 */
            fx f;
            fx_new(&f, &c, B * T, 21);
            nb_tf_forward_f64(f.m, f.p, SRC, TGT, B, S, T, 0, 0, 0, NULL);
            const double *lg = nb_tf_logits_f64(f.m);
            double *full = malloc(sizeof(double) * B * T * 7),
                   *inc = malloc(sizeof(double) * B * T * 7);
            memcpy(full, lg, sizeof(double) * B * T * 7);
            nb_err err;
            assert_int_equal(nb_tf_incremental_logprobs_f64(f.m, f.p, SRC, TGT, B, S, T, inc, &err),
                             0);
            const int tl[B] = {5, 3, 2};
            for (int b = 0; b < B; b++)
                for (int t = 0; t < tl[b]; t++) {
                    const double *z = full + (b * T + t) * 7;
                    double mx = z[0], se = 0;
                    for (int v = 1; v < 7; v++)
                        mx = z[v] > mx ? z[v] : mx;
                    for (int v = 0; v < 7; v++)
                        se += exp(z[v] - mx);
                    for (int v = 0; v < 7; v++)
                        assert_close(inc[(b * T + t) * 7 + v], z[v] - mx - log(se), 1e-11, 1e-11);
                }
            free(full);
            free(inc);
            fx_free(&f);
        }
}

/* log p(seq) of one sentence by the full forward (eval); seq of n tokens. */
static double seq_logp(fx *f, const int *src, int S1, const int *seq, int n) {
    int tgt[8];
    memcpy(tgt, seq, sizeof(int) * n);
    nb_tf_forward_f64(f->m, f->p, src, tgt, 1, S1, n, 0, 0, 0, NULL);
    const double *z = nb_tf_logits_f64(f->m);
    const int V = f->c.vocab;
    double lp = 0;
    for (int t = 0; t < n; t++) {
        const double *r = z + t * V;
        double mx = r[0], se = 0;
        for (int v = 1; v < V; v++)
            mx = r[v] > mx ? r[v] : mx;
        for (int v = 0; v < V; v++)
            se += exp(r[v] - mx);
        lp += r[seq[t]] - mx - log(se);
    }
    return lp;
}

/* Vocabulary {pad, bos, eos, a, b}, outputs of at most 3 tokens: beam search with a beam that
 * holds every hypothesis finds the best of all 2 + 4 + 8 + 8 candidates (eos after 1 or 2
 * tokens, or 3 tokens without eos), with and without length normalisation. */
static void test_beam_is_exhaustive(void **s) {
    (void)s;
    for (int pre = 0; pre < 2; pre++)
        for (int ai = 0; ai < 2; ai++) {
            const double alpha = ai ? 0.6 : 0.0;
            nb_tf_cfg c;
            tiny_cfg(&c, NB_NORM_LAYER, pre, 5);
            fx f;
            fx_new(&f, &c, 16, 31 + pre);
            /* sharpen the output distribution so hypotheses differ */
            for (size_t i = 0; i < f.lay.t[0].n; i++)
                f.p[f.lay.t[0].off + i] *= 3;
            const int src[3] = {3, 4, 3};
            double best = -INFINITY;
            int bseq[4], blen = 0;
            for (int L = 1; L <= 3; L++)
                for (int code = 0; code < (1 << L); code++)
                    for (int withe = 0; withe < 2; withe++) {
                        /* withe: L tokens then eos (needs L <= 2), else L == 3 tokens alone */
                        if (withe ? L > 2 : L != 3) continue;
                        int seq[4], n = 0;
                        for (int i = 0; i < L; i++)
                            seq[n++] = 3 + ((code >> i) & 1);
                        if (withe) seq[n++] = 2;
                        double sc = seq_logp(&f, src, 3, seq, n) / pow((5.0 + n) / 6.0, alpha);
                        if (sc > best) {
                            best = sc;
                            blen = L;
                            memcpy(bseq, seq, sizeof(int) * L);
                        }
                    }
            int out[3], olen;
            double sc;
            nb_err err;
            assert_int_equal(
                nb_tf_translate_f64(f.m, f.p, src, 1, 3, 16, alpha, 10, 3, out, &olen, &sc, &err),
                0);
            assert_close(sc, best, 1e-10, 1e-10);
            assert_int_equal(olen, blen);
            for (int i = 0; i < blen; i++)
                assert_int_equal(out[i], bseq[i]);
            /* a narrow beam never beats the exhaustive best */
            assert_int_equal(
                nb_tf_translate_f64(f.m, f.p, src, 1, 3, 2, alpha, 10, 3, out, &olen, &sc, &err),
                0);
            assert_true(sc <= best + 1e-12);
            fx_free(&f);
        }
}

/* Greedy output: each token is the argmax (pad, bos excluded; no eos first) given the prefix. */
static void test_greedy_is_argmax(void **s) {
    (void)s;
    nb_tf_cfg c;
    tiny_cfg(&c, NB_NORM_RMS, 0, 7);
    fx f;
    fx_new(&f, &c, 32, 41);
    int out[B * 6], olen[B];
    nb_err err;
    assert_int_equal(nb_tf_translate_f64(f.m, f.p, SRC, B, S, 1, 0.6, 3, 6, out, olen, NULL, &err),
                     0);
    for (int b = 0; b < B; b++) {
        int seq[8], n = olen[b];
        memcpy(seq, out + b * 6, sizeof(int) * n);
        const int slen[B] = {4, 2, 1}, lim = slen[b] + 3 < 6 ? slen[b] + 3 : 6;
        int ended = n < lim;
        if (ended) seq[n++] = 2;
        nb_tf_forward_f64(f.m, f.p, SRC + b * S, seq, 1, S, n, 0, 0, 0, NULL);
        const double *z = nb_tf_logits_f64(f.m);
        for (int t = 0; t < n; t++) {
            int am = -1;
            for (int v = 0; v < 7; v++)
                if (v != 0 && v != 1 && !(t == 0 && v == 2) &&
                    (am < 0 || z[t * 7 + v] > z[t * 7 + am]))
                    am = v;
            assert_int_equal(seq[t], am);
        }
    }
    fx_free(&f);
}

/* ---- PyTorch reference ---------------------------------------------------------------------- */

static ref_file RF;
static int ref_setup(void **s) {
    (void)s;
    return ref_load(&RF, "transformer.bin");
}
static int ref_teardown(void **s) {
    (void)s;
    ref_free(&RF);
    return 0;
}

static void ref_case(const char *name) {
    char key[160];
    snprintf(key, sizeof key, "%s.cfg", name);
    const ref_tensor *cf = ref_get(&RF, key);
    assert_non_null(cf);
    const double *q = cf->data;
    nb_tf_cfg c;
    memset(&c, 0, sizeof c);
    c.vocab = (int)q[2];
    c.dim = (int)q[3];
    c.heads = (int)q[4];
    c.ffn = (int)q[5];
    c.enc_layers = (int)q[6];
    c.dec_layers = (int)q[7];
    const int Bn = (int)q[8], Sn = (int)q[9], Tn = (int)q[10];
    c.label_smooth = q[12];
    c.pad = (int)q[13];
    c.bos = (int)q[14];
    c.eos = (int)q[15];
    c.share_emb = c.tie_out = 1;
    c.pre_norm = (int)q[1];
    c.max_pos = 16;
    nb_norm_cfg_default(&c.norm, (nb_norm_kind)(int)q[0]);
    c.norm.eps = q[11];
    fx f;
    fx_new(&f, &c, Bn * Tn, 1);
    int src[64], tgt[64];
    snprintf(key, sizeof key, "%s.src", name);
    const ref_tensor *rs = ref_get(&RF, key);
    snprintf(key, sizeof key, "%s.tgt", name);
    const ref_tensor *rt = ref_get(&RF, key);
    assert_non_null(rs);
    assert_non_null(rt);
    for (size_t i = 0; i < rs->n; i++)
        src[i] = (int)rs->data[i];
    for (size_t i = 0; i < rt->n; i++)
        tgt[i] = (int)rt->data[i];
    nb_tf_tensor_info t[256];
    int n = nb_tf_tensors_f64(f.m, t, 256);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%.60s.p.%.60s", name, t[i].name);
        const ref_tensor *r = ref_get(&RF, key);
        assert_non_null(r);
        assert_int_equal(r->n, t[i].n);
        memcpy(f.p + t[i].off, r->data, sizeof(double) * r->n);
    }
    double loss = nb_tf_forward_f64(f.m, f.p, src, tgt, Bn, Sn, Tn, 1, 1, 0, NULL);
    nb_tf_backward_f64(f.m, f.g, f.p);
    snprintf(key, sizeof key, "%s.loss", name);
    const ref_tensor *rl = ref_get(&RF, key);
    assert_non_null(rl);
    assert_close(loss, rl->data[0], 1e-12, 1e-10);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%.60s.g.%.60s", name, t[i].name);
        const ref_tensor *r = ref_get(&RF, key);
        assert_non_null(r);
        for (size_t j = 0; j < r->n; j++)
            assert_close(f.g[t[i].off + j], r->data[j], 1e-12, 1e-9);
    }
    fx_free(&f);
}

static void test_ref_pytorch(void **s) {
    (void)s;
    const char *cases[] = {"none_post", "none_pre", "layer_post",
                           "layer_pre", "rms_post", "rms_pre"};
    for (size_t i = 0; i < 6; i++)
        ref_case(cases[i]);
}

/* The presets are data: base is the paper's shape. */
static void test_presets(void **s) {
    (void)s;
    const nb_tf_preset *b = nb_tf_preset_find("base"), *sm = nb_tf_preset_find("small");
    assert_non_null(b);
    assert_non_null(sm);
    assert_null(nb_tf_preset_find("huge"));
    assert_int_equal(b->enc_layers, 6);
    assert_int_equal(b->dim, 512);
    assert_int_equal(b->heads, 8);
    assert_int_equal(b->ffn, 2048);
    assert_int_equal(sm->dim % sm->heads, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_post),
        cmocka_unit_test(test_fd_pre),
        cmocka_unit_test(test_fd_dropout),
        cmocka_unit_test(test_padding_changes_nothing),
        cmocka_unit_test(test_padding_with_dropout),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_incremental_equals_full),
        cmocka_unit_test(test_beam_is_exhaustive),
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test_setup_teardown(test_ref_pytorch, ref_setup, ref_teardown),
        cmocka_unit_test(test_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
