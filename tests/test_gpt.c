/* tests/test_gpt.c — nn/gpt.c: central finite differences in double of the whole language model
 * for every row-wise norm (DyT too), pre- and post-norm, with and without biases, dropout on; the
 * causal mask (a later token changes no earlier logit); a batch split into shards gives the batch's
 * loss and gradients; batch norm refused; float agrees with double. */
#include "tests/testutil.h"
#include "nn/nn.h"

enum { B = 2, T = 5, V = 7 };
static const int TOK[B * T] = {1, 4, 2, 6, 0, 3, 3, 5, 1, 2};
static const int TGT[B * T] = {4, 2, 6, 0, 5, 3, 5, 1, 2, 6};

static void tiny(nb_gpt_cfg *c, nb_norm_kind kind, int pre, int bias, double dropout) {
    memset(c, 0, sizeof *c);
    c->layers = 2;
    c->dim = 6;
    c->heads = 2;
    c->vocab = V;
    c->ctx = 6;
    c->pre_norm = pre;
    c->bias = bias;
    c->dropout = dropout;
    nb_norm_cfg_default(&c->norm, kind);
    c->norm.p = 0.5;
}

/* The model with its parameters drawn, then gains and biases moved off their initial values
 * and the weights enlarged (0.02 leaves the attention nearly uniform). */
static nb_gpt_f64 *build(const nb_gpt_cfg *c, nb_layout *lay, double **p, double **g, int maxb) {
    nb_err err;
    memset(lay, 0, sizeof *lay);
    nb_gpt_f64 *m = nb_gpt_new_f64(c, lay, maxb, &err);
    assert_non_null(m);
    *p = calloc(lay->total, sizeof(double));
    *g = calloc(lay->total, sizeof(double));
    nb_rng rng;
    nb_rng_seed(&rng, 5, 1);
    nb_gpt_init_params_f64(m, *p, &rng);
    for (size_t i = 0; i < lay->total; i++)
        (*p)[i] = (*p)[i] * 20 + 0.05 * nb_rng_normal(&rng);
    return m;
}

static void check_fd(nb_norm_kind kind, int pre, int bias, double dropout) {
    nb_gpt_cfg c;
    tiny(&c, kind, pre, bias, dropout);
    nb_layout lay;
    double *p, *g;
    nb_gpt_f64 *m = build(&c, &lay, &p, &g, B);
    const int training = dropout > 0;
    nb_gpt_forward_f64(m, p, TOK, TGT, B, T, training, 1, 99);
    nb_gpt_backward_f64(m, g, p);
    const double h = 1e-6;
    int checked = 0;
    for (size_t j = 0; j < lay.total; j++) {
        double keep = p[j];
        p[j] = keep + h;
        double lp = nb_gpt_forward_f64(m, p, TOK, TGT, B, T, training, 0, 99);
        p[j] = keep - h;
        double lm = nb_gpt_forward_f64(m, p, TOK, TGT, B, T, training, 0, 99);
        p[j] = keep;
        double num = (lp - lm) / (2 * h);
        if (!(fabs(num - g[j]) <= 1e-7 + 1e-5 * fabs(num))) {
            print_error("%s %s bias %d dropout %g: param %zu: backward %.10g, finite difference "
                        "%.10g\n",
                        nb_norm_name(kind), pre ? "pre" : "post", bias, dropout, j, g[j], num);
            fail();
        }
        checked += g[j] != 0;
    }
    assert_true(checked > 300);
    nb_gpt_free_f64(m);
    free(p), free(g);
}

static const nb_norm_kind ALL[] = {NB_NORM_NONE, NB_NORM_WEIGHT, NB_NORM_LAYER,
                                   NB_NORM_RMS,  NB_NORM_PRMS,   NB_NORM_DYT};

static void test_fd_pre(void **s) {
    (void)s;
    for (int k = 0; k < 6; k++)
        check_fd(ALL[k], 1, 1, 0);
}
static void test_fd_post(void **s) {
    (void)s;
    for (int k = 0; k < 6; k++)
        check_fd(ALL[k], 0, 1, 0);
}
static void test_fd_nobias_dropout(void **s) {
    (void)s;
    check_fd(NB_NORM_LAYER, 1, 0, 0);
    check_fd(NB_NORM_DYT, 1, 0, 0.3); /* no shift without --bias; alpha per site */
    check_fd(NB_NORM_LAYER, 1, 1, 0.3);
    check_fd(NB_NORM_RMS, 0, 0, 0.3);
}

/* Changing a token changes no earlier position's logits, with every norm, pre- and post-norm
 * (a norm that mixed positions would leak the future into the loss). */
static void check_causal(nb_norm_kind kind, int pre) {
    nb_gpt_cfg c;
    tiny(&c, kind, pre, 1, 0);
    nb_layout lay;
    double *p, *g;
    nb_gpt_f64 *m = build(&c, &lay, &p, &g, B);
    double a[B * T * V];
    nb_gpt_forward_f64(m, p, TOK, NULL, B, T, 0, 0, 1);
    memcpy(a, nb_gpt_logits_f64(m), sizeof a);
    int tok2[B * T];
    memcpy(tok2, TOK, sizeof tok2);
    const int at = T / 2; /* the changed position */
    tok2[at] = (tok2[at] + 1) % V;
    nb_gpt_forward_f64(m, p, tok2, NULL, B, T, 0, 0, 1);
    const double *b = nb_gpt_logits_f64(m);
    double changed = 0;
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++) {
            double diff = fabs(a[t * V + v] - b[t * V + v]);
            if (t < at) {
                if (diff != 0)
                    fail_msg("%s, %s-norm: position %d sees position %d", nb_norm_name(kind),
                             pre ? "pre" : "post", t, at);
            } else if (t == at)
                changed += diff;
        }
    assert_true(changed > 0);
    nb_gpt_free_f64(m);
    free(p), free(g);
}

static void test_causal(void **s) {
    (void)s;
    for (int k = 0; k < 6; k++)
        for (int pre = 0; pre <= 1; pre++)
            check_causal(ALL[k], pre);
}

/* Two shards of one sequence each sum to the batch's loss and gradients (dropout on). */
static void test_shards(void **s) {
    (void)s;
    nb_gpt_cfg c;
    tiny(&c, NB_NORM_RMS, 1, 1, 0.2);
    nb_layout lay;
    double *p, *g;
    nb_gpt_f64 *m = build(&c, &lay, &p, &g, B);
    double whole = nb_gpt_forward_f64(m, p, TOK, TGT, B, T, 1, 1, 7);
    nb_gpt_backward_f64(m, g, p);
    double *g2 = calloc(lay.total, sizeof(double)), parts = 0;
    for (int b = 0; b < B; b++) {
        nb_gpt_set_shard_f64(m, b, B);
        parts += nb_gpt_forward_f64(m, p, TOK + b * T, TGT + b * T, 1, T, 1, 1, 7);
        nb_gpt_backward_f64(m, g2, p);
    }
    assert_true(fabs(whole - parts) < 1e-12);
    for (size_t j = 0; j < lay.total; j++)
        assert_true(fabs(g[j] - g2[j]) < 1e-12);
    nb_gpt_free_f64(m);
    free(p), free(g), free(g2);
}

static void test_batch_refused(void **s) {
    (void)s;
    nb_gpt_cfg c;
    tiny(&c, NB_NORM_BATCH, 1, 1, 0);
    nb_layout lay;
    memset(&lay, 0, sizeof lay);
    nb_err err;
    assert_null(nb_gpt_new(&c, &lay, 2, &err));
    assert_non_null(strstr(err.msg, "--norm batch"));
}

/* The float model computes the double one's loss. */
static void test_float(void **s) {
    (void)s;
    nb_gpt_cfg c;
    tiny(&c, NB_NORM_LAYER, 1, 1, 0);
    nb_layout ld, lf;
    double *p, *g;
    nb_gpt_f64 *md = build(&c, &ld, &p, &g, B);
    memset(&lf, 0, sizeof lf);
    nb_err err;
    nb_gpt *mf = nb_gpt_new(&c, &lf, B, &err);
    assert_non_null(mf);
    float *pf = calloc(lf.total, sizeof(float));
    for (size_t i = 0; i < lf.total; i++)
        pf[i] = (float)p[i];
    double a = nb_gpt_forward_f64(md, p, TOK, TGT, B, T, 0, 0, 1);
    double b = nb_gpt_forward(mf, pf, TOK, TGT, B, T, 0, 0, 1);
    assert_true(fabs(a - b) < 1e-4 * fabs(a));
    nb_gpt_free(mf);
    nb_gpt_free_f64(md);
    free(p), free(g), free(pf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_pre),
        cmocka_unit_test(test_fd_post),
        cmocka_unit_test(test_fd_nobias_dropout),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_batch_refused),
        cmocka_unit_test(test_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
