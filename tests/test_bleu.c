/* tests/test_bleu.c — util/bleu.c against hand-worked values and SacreBLEU's own test cases
 * (sacrebleu test/test_bleu.py and test/test_sentence_bleu.py, 2.6.0). */
#include "testutil.h"

#include "util/bleu.h"

static double corpus(const char *const *hyp, int n, const char *const *const *refs, int nrefs,
                     nb_bleu_opts o) {
    nb_bleu b;
    nb_err err;
    assert_int_equal(nb_bleu_corpus(hyp, n, refs, nrefs, &o, &b, &err), 0);
    return b.score;
}

static void tok_is(const char *in, const char *want) {
    char *t = nb_bleu_tokenize_13a(in);
    assert_non_null(t);
    assert_string_equal(t, want);
    free(t);
}

static void test_13a(void **state) {
    (void)state;
    tok_is("Hello, world!", "Hello , world !");
    tok_is("It costs $3,000.50 today.", "It costs $ 3,000.50 today .");
    tok_is("1990-1995", "1990 - 1995");
    tok_is("3.5-4 km", "3.5 - 4 km");
    tok_is("A.B", "A . B");
    tok_is("e.g.,", "e . g . ,");
    tok_is("it's a well-known (fact)", "it's a well-known ( fact )");
    tok_is("&quot;Hi&quot; &amp; bye &lt;3", "\" Hi \" & bye < 3");
    tok_is("x<skipped>y", "xy");
    tok_is("  spaced\tout  ", "spaced out");
    tok_is("Zwei Männer, 2,5 m.", "Zwei Männer , 2,5 m .");
    tok_is("a\xc2\xa0"
           "b",
           "a b"); /* U+00A0 is whitespace to Python's split() */
    tok_is("", "");
}

/* the cat sat on the mat / the cat sat on a mat: 5/6, 3/5, 2/4, 1/3, BP 1 */
static void test_hand_sentence(void **state) {
    (void)state;
    const char *ref = "the cat sat on a mat";
    nb_bleu b;
    nb_err err;
    nb_bleu_opts o = nb_bleu_defaults();
    assert_int_equal(nb_bleu_sentence("the cat sat on the mat", &ref, 1, &o, &b, &err), 0);
    assert_close(b.correct[0], 5, 0, 0);
    assert_close(b.total[3], 3, 0, 0);
    assert_close(b.score, 100 * pow(1.0 / 12, 0.25), 1e-9, 0);
    /* exp smoothing: a b c d / a b x d: 3/4, 1/3, then 0/2 and 0/1 count 1/(2*2) and 1/(4*1) */
    const char *ref2 = "a b x d";
    assert_int_equal(nb_bleu_sentence("a b c d", &ref2, 1, &o, &b, &err), 0);
    assert_close(b.precision[2], 25, 1e-12, 0);
    assert_close(b.precision[3], 25, 1e-12, 0);
    assert_close(b.score, 100 * pow(2, -1.5), 1e-9, 0);
    o.smooth = NB_BLEU_SMOOTH_NONE;
    assert_int_equal(nb_bleu_sentence("a b c d", &ref2, 1, &o, &b, &err), 0);
    assert_close(b.score, 0, 1e-12, 0);
    /* brevity penalty with effective order: 2 of 6 tokens, p1 = p2 = 100 */
    o = nb_bleu_defaults();
    o.effective_order = 1;
    const char *ref3 = "the cat sat on the mat";
    assert_int_equal(nb_bleu_sentence("the cat", &ref3, 1, &o, &b, &err), 0);
    assert_close(b.bp, exp(-2.0), 1e-15, 0);
    assert_close(b.score, 100 * exp(-2.0), 1e-9, 0);
}

/* corpus statistics are summed before the score: [8,4,2,1] / [10,8,6,4] */
static void test_hand_corpus(void **state) {
    (void)state;
    const char *hyp[] = {"the cat sat on the mat", "a b c d"};
    const char *r0[] = {"the cat sat on a mat", "a b x d"};
    const char *const *refs[] = {r0};
    assert_close(corpus(hyp, 2, refs, 1, nb_bleu_defaults()), 100 * pow(1.0 / 30, 0.25), 1e-9, 0);
    /* empty hypotheses are kept (and score 0), not skipped */
    const char *empty[] = {"", ""};
    assert_close(corpus(empty, 2, refs, 1, nb_bleu_defaults()), 0, 0, 0);
    const char *one[] = {"the cat sat on the mat", ""};
    nb_bleu b;
    nb_err err;
    nb_bleu_opts o = nb_bleu_defaults();
    assert_int_equal(nb_bleu_corpus(one, 2, refs, 1, &o, &b, &err), 0);
    assert_int_equal(b.sys_len, 6);
    assert_int_equal(b.ref_len, 10);
    assert_close(b.bp, exp(1 - 10.0 / 6), 1e-15, 0);
}

/* SacreBLEU test/test_bleu.py */
static const char *hyps[] = {"The dog bit the man.", "It wasn't surprising.",
                             "The man had just bitten him."};
static const char *ref_a[] = {"The dog bit the man.", "It was not unexpected.",
                              "The man bit him first."};
static const char *ref_b[] = {"The dog had bit the man.", "No one was surprised.",
                              "The man had bitten the dog."};

static void test_sacrebleu_corpus(void **state) {
    (void)state;
    const char *const *refs[] = {ref_a, ref_b};
    nb_bleu_opts o = nb_bleu_defaults();
    assert_close(corpus(hyps, 3, refs, 2, o), 48.530827, 1e-6, 0);
    const char *empty[] = {"", "", ""};
    assert_close(corpus(empty, 3, refs, 2, o), 0.0, 0, 0);
    o.tok = NB_BLEU_TOK_NONE;
    assert_close(corpus(hyps, 3, refs, 2, o), 49.1919566, 1e-6, 0);
    o = nb_bleu_defaults();
    o.smooth = NB_BLEU_SMOOTH_NONE;
    assert_close(corpus(hyps, 3, refs, 2, o), 48.530827, 1e-6, 0);
    static const char *const max_order[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
    for (int k = 1; k <= 6; k++) {
        o = nb_bleu_defaults();
        o.max_order = k;
        char s[32];
        snprintf(s, sizeof s, "%.2f", corpus(hyps, 3, refs, 2, o));
        assert_string_equal(s, max_order[k - 1]);
    }
}

/* raw_corpus_bleu: tokenize none, floor smoothing, effective order */
static double raw(const char *hyp, const char *ref, double floor) {
    nb_bleu_opts o = {NB_BLEU_TOK_NONE, NB_BLEU_SMOOTH_FLOOR, floor, 1, 4};
    const char *h[] = {hyp};
    const char *r[] = {ref};
    const char *const *refs[] = {r};
    return corpus(h, 1, refs, 1, o) / 100;
}

static void test_sacrebleu_raw(void **state) {
    (void)state;
    const char *h2[] = {"this is a test", "another test"};
    const char *r2[] = {"ref1", "ref2"};
    const char *const *refs[] = {r2};
    nb_bleu_opts o = {NB_BLEU_TOK_NONE, NB_BLEU_SMOOTH_FLOOR, .01, 1, 4};
    assert_close(corpus(h2, 1, refs, 1, o), 0.0, 1e-8, 0);
    assert_close(raw("this is a test", "this is a test", .01), 1.0, 1e-8, 0);
    assert_close(raw("this is a fest", "this is a test", .01), 0.223606797749979, 1e-8, 0);
    assert_close(raw("test", "a test", .01), 0.3678794411714425, 1e-8, 0);
    assert_close(raw("a test", "a test", .01), 1.0, 1e-8, 0);
    assert_close(raw("a little test", "a test", .01), 0.03218297948685433, 1e-8, 0);
    /* offsets */
    assert_close(raw("am I am a character sequence", "I am a symbol string sequence a a", 0.0), 0,
                 1e-8, 0);
    assert_close(raw("am I am a character sequence", "I am a symbol string sequence a a", -1),
                 0.1555722182, 1e-8, 0);
    /* statistics */
    nb_bleu b;
    nb_err err;
    const char *ref = "I am a symbol string sequence a a";
    o.smooth_value = .01;
    assert_int_equal(nb_bleu_sentence("am I am a character sequence", &ref, 1, &o, &b, &err), 0);
    const double c[] = {4, 2, 1, 0}, t[] = {6, 5, 4, 3};
    for (int i = 0; i < 4; i++) {
        assert_close(b.correct[i], c[i], 0, 0);
        assert_close(b.total[i], t[i], 0, 0);
    }
}

static void test_sacrebleu_scoring(void **state) {
    (void)state;
    nb_bleu_opts o = nb_bleu_defaults();
    o.smooth = NB_BLEU_SMOOTH_NONE;
    const double c[] = {9, 7, 5, 3}, t[] = {10, 8, 6, 4};
    assert_close(nb_bleu_compute(c, t, 11, 11, &o).score / 100, 0.8375922397, 1e-8, 0);
    /* degenerate statistics, floor smoothing: all exactly 0 */
    struct {
        double c[4], t[4];
        long sys, ref;
        double floor;
    } deg[] = {
        {{0, 0, 0, 0}, {4, 4, 2, 1}, 0, 1, 0.0}, {{0, 0, 0, 0}, {10, 11, 12, 0}, 14, 10, 0.0},
        {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.0}, {{6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6, 0.0},
        {{0, 0, 0, 0}, {0, 0, 0, 0}, 0, 0, 0.1}, {{0, 0, 0, 0}, {0, 0, 0, 0}, 1, 5, 0.01}};
    for (size_t i = 0; i < sizeof deg / sizeof deg[0]; i++) {
        nb_bleu_opts f = {NB_BLEU_TOK_13A, NB_BLEU_SMOOTH_FLOOR, deg[i].floor, 0, 4};
        assert_true(nb_bleu_compute(deg[i].c, deg[i].t, deg[i].sys, deg[i].ref, &f).score == 0.0);
    }
}

/* test/test_sentence_bleu.py: sentence BLEU with effective order, tolerance 1e-3 */
static void test_sacrebleu_sentence(void **state) {
    (void)state;
    const char *ref = "producţia de zahăr brut se exprimă în zahăr alb;";
    const char *sys = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
    struct {
        nb_bleu_smooth sm;
        double v;
        nb_bleu_tok tok;
        double want;
    } cases[] = {
        {NB_BLEU_SMOOTH_EXP, -1, NB_BLEU_TOK_13A, 8.493},
        {NB_BLEU_SMOOTH_NONE, -1, NB_BLEU_TOK_13A, 0.0},
        {NB_BLEU_SMOOTH_FLOOR, -1, NB_BLEU_TOK_13A, 4.51688},
        {NB_BLEU_SMOOTH_FLOOR, 0.1, NB_BLEU_TOK_13A, 4.51688},
        {NB_BLEU_SMOOTH_FLOOR, 0.5, NB_BLEU_TOK_13A, 10.10},
        {NB_BLEU_SMOOTH_ADDK, -1, NB_BLEU_TOK_13A, 14.882},
        {NB_BLEU_SMOOTH_ADDK, 1, NB_BLEU_TOK_13A, 14.882},
        {NB_BLEU_SMOOTH_ADDK, 2, NB_BLEU_TOK_13A, 21.389},
        {NB_BLEU_SMOOTH_EXP, -1, NB_BLEU_TOK_NONE, 7.347},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nb_bleu_opts o = {cases[i].tok, cases[i].sm, cases[i].v, 1, 4};
        nb_bleu b;
        nb_err err;
        assert_int_equal(nb_bleu_sentence(sys, &ref, 1, &o, &b, &err), 0);
        assert_close(b.score, cases[i].want, 1e-3, 0);
        const char *r0 = "okay thanks";
        assert_int_equal(nb_bleu_sentence("this is a cat", &r0, 1, &o, &b, &err), 0);
        assert_close(b.score, 0.0, 1e-3, 0);
    }
}

static void test_signature(void **state) {
    (void)state;
    char s[256];
    nb_bleu_opts o = nb_bleu_defaults();
    nb_bleu_signature(&o, 1, s, sizeof s);
    assert_string_equal(s, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
    o.smooth = NB_BLEU_SMOOTH_FLOOR;
    o.effective_order = 1;
    nb_bleu_signature(&o, 2, s, sizeof s);
    assert_string_equal(s, "nrefs:2|case:mixed|eff:yes|tok:13a|smooth:floor[0.10]|version:2.6.0");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_13a),
        cmocka_unit_test(test_hand_sentence),
        cmocka_unit_test(test_hand_corpus),
        cmocka_unit_test(test_sacrebleu_corpus),
        cmocka_unit_test(test_sacrebleu_raw),
        cmocka_unit_test(test_sacrebleu_scoring),
        cmocka_unit_test(test_sacrebleu_sentence),
        cmocka_unit_test(test_signature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
