/* tests/test_cloze.c — datasets/cloze.c: the generated corpus is answerable from its passages (an
 * oracle that reads finds every answer) and not guessable without them; batches prepared with an
 * entity permutation stay answerable. */
#include "tests/testutil.h"

#include "datasets/cloze.h"

static int is_entity(const nb_cloze *c, int v) {
    for (int i = 0; i < c->nents; i++)
        if (c->ents[i] == v) return 1;
    return 0;
}

/* The answer read the way the corpus is built: the entity right before the question's last
 * token (its relation word) in the passage; -1 when there is none. */
static int oracle(const nb_cloze *c, const int *d, int nd, const int *q, int nq) {
    int rel = q[nq - 1];
    for (int t = 1; t < nd; t++)
        if (d[t] == rel && is_entity(c, d[t - 1])) return d[t - 1];
    return -1;
}

static void test_synthetic_answerable(void **s) {
    (void)s;
    nb_cloze c;
    nb_err err;
    assert_int_equal(nb_cloze_load(&c, "synthetic", "/nonexistent", 600, 7, &err), 0);
    assert_int_equal(c.train.n, 600);
    assert_int_equal(c.val.n, 600);
    assert_int_equal(c.nents, 12);
    long counts[128] = {0};
    for (int i = 0; i < c.train.n; i++) {
        const int32_t *d = c.train.dtok + c.train.doff[i];
        int nd = (int)(c.train.doff[i + 1] - c.train.doff[i]);
        const int32_t *q = c.train.qtok + c.train.qoff[i];
        int nq = (int)(c.train.qoff[i + 1] - c.train.qoff[i]);
        int dd[64], qq[8], ne = 0;
        assert_true(nd <= 64 && nq <= 8 && nd >= 1 && nq >= 1);
        for (int t = 0; t < nd; t++) {
            dd[t] = d[t];
            ne += is_entity(&c, d[t]);
            assert_true(d[t] >= 0 && d[t] < c.V);
        }
        for (int t = 0; t < nq; t++)
            qq[t] = q[t];
        assert_true(ne >= 3 && ne <= 4);
        assert_int_equal(oracle(&c, dd, nd, qq, nq), c.train.ans[i]);
        counts[c.train.ans[i]]++;
    }
    /* no answer is frequent enough to be guessed: each entity is the answer about 1/12 of the
     * time */
    for (int v = 0; v < c.V; v++)
        assert_true(counts[v] < 600 / 12 * 2);
    /* prepared batches with a permutation: the oracle finds the permuted answer */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)c.V);
    int tokd[16 * 64], lend[16], TD, tokq[16 * 8], lenq[16], TQ, ans[16];
    nb_rng r;
    nb_rng_seed(&r, 1, 2);
    for (int first = 0; first + 16 <= 160; first += 16) {
        nb_cloze_entity_perm(&c, perm, &r);
        nb_cloze_batch(&c.train, first, 16, perm, tokd, lend, &TD, tokq, lenq, &TQ, ans);
        assert_true(TD <= 64 && TQ <= 8);
        for (int b = 0; b < 16; b++)
            assert_int_equal(oracle(&c, tokd + b * TD, lend[b], tokq + b * TQ, lenq[b]), ans[b]);
    }
    free(perm);
    nb_cloze_free(&c);
}

static void test_unknown_dataset(void **s) {
    (void)s;
    nb_cloze c;
    nb_err err;
    assert_int_equal(nb_cloze_load(&c, "cifar10", "/x", 0, 1, &err), -1);
    assert_non_null(strstr(err.msg, "'cifar10'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_answerable),
        cmocka_unit_test(test_unknown_dataset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
