/* tests/test_mt.c — datasets/bpe.c and datasets/mt.c: pre-tokenization and BPE round trips, a
 * hand-worked merge sequence, vocabularies, the cache, counting of dropped pairs, batching. */
#include "testutil.h"

#include <sys/stat.h>
#include <unistd.h>

#include "datasets/mt.h"

/* Encodes and decodes a line through pre-tokenization and BPE. */
static char *roundtrip(nb_bpe *b, const char *line, long *reserved) {
    nb_toks p = {0};
    nb_err err;
    assert_int_equal(nb_bpe_encode_line(b, line, strlen(line), &p, reserved, &err), 0);
    char *out = nb_bpe_decode(p.tok, p.n);
    nb_toks_free(&p);
    return out;
}

static nb_bpe *learn_lines(const char *const *lines, int n, int merges) {
    nb_wordcount *w = nb_wordcount_new();
    nb_toks t = {0};
    nb_err err;
    for (int i = 0; i < n; i++) {
        assert_int_equal(nb_pretok(lines[i], strlen(lines[i]), &t, NULL, &err), 0);
        for (int k = 0; k < t.n; k++)
            assert_int_equal(nb_wordcount_add(w, t.tok[k], 1), 0);
    }
    nb_bpe *b = nb_bpe_learn(w, merges, 2, &err);
    assert_non_null(b);
    nb_toks_free(&t);
    nb_wordcount_free(w);
    return b;
}

static void test_pretok(void **state) {
    (void)state;
    nb_toks t = {0};
    nb_err err;
    const char *line = "Hello, (world)!";
    assert_int_equal(nb_pretok(line, strlen(line), &t, NULL, &err), 0);
    const char *want[] = {"Hello", NB_JOINER ",", "(" NB_JOINER,
                          "world", NB_JOINER ")", NB_JOINER "!"};
    assert_int_equal(t.n, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(t.tok[i], want[i]);
    line = " a  b ";
    assert_int_equal(nb_pretok(line, strlen(line), &t, NULL, &err), 0);
    const char *want2[] = {NB_SPACE, "a", NB_SPACE NB_SPACE, "b", NB_SPACE};
    assert_int_equal(t.n, 5);
    for (int i = 0; i < 5; i++)
        assert_string_equal(t.tok[i], want2[i]);
    nb_toks_free(&t);
}

static void test_roundtrip_tricky(void **state) {
    (void)state;
    const char *lines[] = {
        "Two young, White males are outside near many bushes.",
        "Ein \xe2\x80\x9eT-Shirt\xe2\x80\x9c f\xc3\xbcr 2,50 \xe2\x82\xac...",
        "  leading and trailing  ",
        "tab\tinside and  double   spaces",
        "?!?! -- (a) [b] {c} \"d\" 'e' a@@b x@@ @@",
        "",
        " ",
        "bad utf8 \xff\xfe\xc3 end",
        "Männer über Büsche. Männer über Büsche.",
    };
    int n = (int)(sizeof lines / sizeof lines[0]);
    nb_bpe *b = learn_lines(lines, n, 50);
    for (int i = 0; i < n; i++) {
        long reserved = 0;
        char *out = roundtrip(b, lines[i], &reserved);
        assert_string_equal(out, lines[i]);
        assert_int_equal(reserved, 0);
        free(out);
    }
    /* the marker characters themselves are replaced, and counted */
    long reserved = 0;
    char *out = roundtrip(b, "x" NB_JOINER "y " NB_SPACE, &reserved);
    assert_string_equal(out, "x" NB_REPLACE "y " NB_REPLACE);
    assert_int_equal(reserved, 2);
    free(out);
    nb_bpe_free(b);
}

/* Sennrich et al.'s example: low 5, lower 2, newest 6, widest 3. Worked by hand: (s, t</w>) and
 * (e, s) both 9, the tie goes to the greater pair ("s" > "e"); then (e, st</w>) 9; (l, o) 7;
 * (w, est</w>), (n, e), (e, w) all 6: "w" first, then "n"; (ne, west</w>) 6; (lo, w</w>) 5. */
static void test_hand_merges(void **state) {
    (void)state;
    nb_wordcount *w = nb_wordcount_new();
    nb_wordcount_add(w, "low", 5);
    nb_wordcount_add(w, "lower", 2);
    nb_wordcount_add(w, "newest", 6);
    nb_wordcount_add(w, "widest", 3);
    nb_err err;
    nb_bpe *b = nb_bpe_learn(w, 7, 2, &err);
    assert_non_null(b);
    const char *want[7][2] = {{"s", "t</w>"}, {"e", "st</w>"},    {"l", "o"},     {"w", "est</w>"},
                              {"n", "e"},     {"ne", "west</w>"}, {"lo", "w</w>"}};
    assert_int_equal(nb_bpe_size(b), 7);
    for (int i = 0; i < 7; i++) {
        const char *l, *r;
        nb_bpe_merge(b, i, &l, &r);
        assert_string_equal(l, want[i][0]);
        assert_string_equal(r, want[i][1]);
    }
    nb_toks p = {0};
    assert_int_equal(nb_bpe_apply_word(b, "lowest", &p, &err), 0);
    assert_int_equal(nb_bpe_apply_word(b, "newest", &p, &err), 0);
    assert_int_equal(nb_bpe_apply_word(b, "x", &p, &err), 0);
    assert_int_equal(p.n, 4);
    /* pieces are stored as offsets until fixed: read them through encode_line instead */
    nb_toks_free(&p);
    assert_int_equal(nb_bpe_encode_line(b, "lowest newest x", 15, &p, NULL, &err), 0);
    const char *pieces[] = {"lo@@", "west", "newest", "x"};
    assert_int_equal(p.n, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(p.tok[i], pieces[i]);
    nb_toks_free(&p);
    /* min_freq: nothing after (lo, w</w>) occurs twice except... stop at count < 2 */
    nb_bpe *all = nb_bpe_learn(w, 1000, 2, &err);
    assert_true(nb_bpe_size(all) < 1000);
    nb_bpe_free(all);
    /* codes written and read back give the same merges */
    char path[] = "/tmp/nb-test-codes-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(nb_bpe_write(b, path, &err), 0);
    nb_bpe *c = nb_bpe_read(path, &err);
    assert_non_null(c);
    assert_int_equal(nb_bpe_size(c), 7);
    for (int i = 0; i < 7; i++) {
        const char *l, *r;
        nb_bpe_merge(c, i, &l, &r);
        assert_string_equal(l, want[i][0]);
        assert_string_equal(r, want[i][1]);
    }
    unlink(path);
    nb_bpe_free(c);
    nb_bpe_free(b);
    nb_wordcount_free(w);
}

static void test_codes_refused(void **state) {
    (void)state;
    nb_err err;
    const char *bad[] = {"#version: 0.2\na b c\n", "a\n", " a\n", "a \n", "a  b\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(nb_bpe_parse(bad[i], strlen(bad[i]), "codes", &err));
        assert_non_null(strstr(err.msg, "'codes' line"));
    }
    nb_bpe *b = nb_bpe_parse("#version: 0.2\n\na b\n", 18, "codes", &err);
    assert_non_null(b);
    assert_int_equal(nb_bpe_size(b), 1);
    nb_bpe_free(b);
    assert_null(nb_vocab_parse("a\n\nb\n", 5, "v", &err));
    assert_null(nb_vocab_parse("a\nb\na\n", 6, "v", &err));
}

static void test_encode_counts(void **state) {
    (void)state;
    nb_lines s, t;
    nb_err err;
    const char *src = "a b c\n\nd e\nx y z w v\nq\n";
    const char *tgt = "A B C\nE\nD E\nX Y\n\n";
    assert_int_equal(nb_lines_parse(src, strlen(src), "s", &s, &err), 0);
    assert_int_equal(nb_lines_parse(tgt, strlen(tgt), "t", &t, &err), 0);
    assert_int_equal(s.n, 5);
    assert_int_equal(t.n, 5);
    nb_bpe *b = nb_bpe_parse("", 0, "none", &err);
    nb_vocab *v = nb_vocab_new();
    const char *pieces[] = {"a", "b", "c", "d", "e", "x", "y", "z", "w",
                            "v", "q", "A", "B", "C", "D", "E", "X", "Y"};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        nb_vocab_count(v, pieces[i], &err);
    assert_int_equal(nb_vocab_finish(v, &err), 0);
    nb_mt_split sp;
    assert_int_equal(nb_mt_encode(&s, &t, "s", "t", b, v, v, 4, 1, &sp, &err), 0);
    assert_int_equal(sp.read, 5);
    assert_int_equal(sp.n, 2);
    assert_int_equal(sp.empty, 2);
    assert_int_equal(sp.too_long, 1);
    assert_string_equal(sp.tgt_text[1], "D E");
    nb_mt_split_free(&sp);
    /* evaluation splits keep every pair, counting those over max_len (kept) */
    assert_int_equal(nb_mt_encode(&s, &t, "s", "t", b, v, v, 4, 0, &sp, &err), 0);
    assert_int_equal(sp.n, 5);
    assert_int_equal(sp.too_long, 1);
    nb_mt_split_free(&sp);
    /* unequal line counts */
    t.n = 4;
    assert_int_equal(nb_mt_encode(&s, &t, "s.txt", "t.txt", b, v, v, 4, 1, &sp, &err), -1);
    assert_non_null(strstr(err.msg, "'s.txt' has 5 lines but 't.txt' has 4"));
    t.n = 5;
    /* an unknown character is <unk>, counted */
    int *ids = NULL, n = 0, cap = 0;
    long unk = 0;
    assert_int_equal(nb_vocab_encode_line(v, b, "a ? b", 5, &ids, &n, &cap, &unk, NULL, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], NB_UNK);
    assert_int_equal(unk, 1);
    free(ids);
    nb_vocab_free(v);
    nb_bpe_free(b);
    nb_lines_free(&s);
    nb_lines_free(&t);
    assert_int_equal(nb_lines_parse("a\0b\n", 4, "nul.txt", &s, &err), -1);
    assert_non_null(strstr(err.msg, "'nul.txt' line 1 holds a NUL byte"));
}

static void check_roundtrip_split(const nb_mt_data *d, const nb_mt_split *s) {
    for (int i = 0; i < s->n; i++) {
        char *a = nb_vocab_decode(d->src_vocab, s->src + s->src_start[i], nb_mt_src_len(s, i));
        char *b = nb_vocab_decode(d->tgt_vocab, s->tgt + s->tgt_start[i], nb_mt_tgt_len(s, i));
        assert_string_equal(a, s->src_text[i]);
        assert_string_equal(b, s->tgt_text[i]);
        free(a);
        free(b);
    }
}

/* The real Multi30k training text (29,000 pairs, 8,000 merges) round-trips exactly; learning
 * takes seconds. The files come from NB_TEST_MULTI30K (a directory with the 8 .gz files); the
 * test is skipped without it. */
static void test_multi30k_roundtrip(void **state) {
    (void)state;
    const char *src = getenv("NB_TEST_MULTI30K");
    char cmd[8192];
    if (!src || access(src, R_OK) != 0) {
        print_message("skipped: set NB_TEST_MULTI30K to a directory holding Multi30k's 8 files\n");
        skip();
    }
    char dir[] = "/tmp/nb-test-mt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/multi30k' && cp '%s'/*.gz '%s/multi30k/'", dir, src,
             dir);
    assert_int_equal(system(cmd), 0);
    nb_mt_opts o = nb_mt_defaults("multi30k");
    nb_mt_data d;
    nb_err err;
    assert_int_equal(nb_mt_load("multi30k", dir, &o, &d, &err), 0);
    assert_int_equal(d.train.n, 29000);
    assert_int_equal(d.val.n, 1014);
    assert_int_equal(d.ntest, 2);
    assert_int_equal(nb_bpe_size(d.bpe), 8000);
    /* learned here, not read from a cache (how long it took is not a test) */
    assert_true(d.bpe_seconds > 0);
    print_message("multi30k: BPE 8000 merges learned in %.2f s; vocabularies %d / %d\n",
                  d.bpe_seconds, nb_vocab_size(d.src_vocab), nb_vocab_size(d.tgt_vocab));
    assert_int_equal(d.train.unk, 0);
    check_roundtrip_split(&d, &d.train);
    nb_mt_free(&d);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Synthetic: round trip, the cache-free path; the cache on a small real-format dataset. */
static void test_synthetic_and_cache(void **state) {
    (void)state;
    nb_mt_opts o = nb_mt_defaults("synthetic");
    o.synth_train = 2000;
    nb_mt_data d, e;
    nb_err err;
    assert_int_equal(nb_mt_load("synthetic", NULL, &o, &d, &err), 0);
    assert_int_equal(d.train.n, 2000);
    assert_int_equal(d.val.n, 500);
    assert_int_equal(d.ntest, 1);
    check_roundtrip_split(&d, &d.train);
    check_roundtrip_split(&d, &d.test[0]);
    assert_int_equal(d.test[0].unk, 0);
    /* variable lengths, and the source and target differ in order and words */
    assert_true(d.train.max_src_len > 10);
    assert_string_not_equal(d.train.src_text[0], d.train.tgt_text[0]);
    /* the same seed gives the same data */
    assert_int_equal(nb_mt_load("synthetic", NULL, &o, &e, &err), 0);
    assert_string_equal(d.train.src_text[7], e.train.src_text[7]);
    assert_string_equal(d.val.tgt_text[3], e.val.tgt_text[3]);
    assert_string_not_equal(d.train.src_text[0], d.val.src_text[0]);
    nb_mt_free(&e);

    /* the cache: write synthetic text as a gzipped "multi30k" and load it twice */
    char dir[] = "/tmp/nb-test-mtc-XXXXXX", p[4200], cmd[8192];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/multi30k", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    const char *names[] = {"train", "val", "test_2016_flickr", "test_2017_flickr"};
    nb_mt_split *sp[] = {&d.train, &d.val, &d.test[0], &d.test[0]};
    for (int f = 0; f < 4; f++)
        for (int side = 0; side < 2; side++) {
            snprintf(p, sizeof p, "%s/multi30k/%s.%s", dir, names[f], side ? "de" : "en");
            FILE *fp = fopen(p, "w");
            assert_non_null(fp);
            for (int i = 0; i < sp[f]->n; i++)
                fprintf(fp, "%s\n", side ? sp[f]->tgt_text[i] : sp[f]->src_text[i]);
            fclose(fp);
            snprintf(cmd, sizeof cmd, "gzip -n '%s'", p);
            assert_int_equal(system(cmd), 0);
        }
    nb_mt_opts m = nb_mt_defaults("multi30k");
    m.bpe_merges = 100;
    assert_int_equal(nb_mt_load("multi30k", dir, &m, &e, &err), 0);
    assert_true(e.bpe_seconds > 0);
    snprintf(p, sizeof p, "%s/codes", e.cache_dir);
    assert_int_equal(access(p, R_OK), 0);
    nb_mt_data f;
    assert_int_equal(nb_mt_load("multi30k", dir, &m, &f, &err), 0);
    assert_true(f.bpe_seconds == 0); /* read from the cache */
    assert_string_equal(e.key, f.key);
    assert_int_equal(e.train.src_start[e.train.n], f.train.src_start[f.train.n]);
    assert_memory_equal(e.train.tgt, f.train.tgt,
                        sizeof(int) * (size_t)e.train.tgt_start[e.train.n]);
    nb_mt_free(&f);
    /* other options, another key */
    m.bpe_merges = 50;
    assert_int_equal(nb_mt_load("multi30k", dir, &m, &f, &err), 0);
    assert_string_not_equal(e.key, f.key);
    nb_mt_free(&f);
    /* a damaged cache is rebuilt, and says so: the same codes, vocabularies and data */
    m.bpe_merges = 100;
    FILE *fp = fopen(p, "w");
    fputs("#version: 0.2\nnot a merge line\n", fp);
    fclose(fp);
    assert_int_equal(nb_mt_load("multi30k", dir, &m, &f, &err), 0);
    assert_true(f.bpe_seconds > 0);
    assert_non_null(strstr(f.source, "rebuilt: 'codes' was not written by this normbench"));
    assert_string_equal(e.data_hash, f.data_hash);
    nb_mt_free(&f);
    /* and read back from the cache as it was rebuilt */
    assert_int_equal(nb_mt_load("multi30k", dir, &m, &f, &err), 0);
    assert_true(f.bpe_seconds == 0);
    assert_string_equal(f.cache_note, "");
    assert_string_equal(e.data_hash, f.data_hash);
    nb_mt_free(&f);
    nb_mt_free(&e);
    /* a missing dataset names the file and hints fetch */
    assert_int_equal(nb_mt_load("multi30k", "/nonexistent", &m, &f, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/multi30k/train.en.gz"));
    assert_non_null(strstr(err.hint, "normbench fetch multi30k"));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    nb_mt_free(&d);
}

/* The batcher tests' data: 1,000 synthetic training pairs, and the data stream of seed 1. */
static void batcher_data(nb_mt_data *d, nb_rng *r) {
    nb_mt_opts o = nb_mt_defaults("synthetic");
    o.synth_train = 1000;
    nb_err err;
    assert_int_equal(nb_mt_load("synthetic", NULL, &o, d, &err), 0);
    nb_rng_seed(r, 1, NB_STREAM_DATA);
}

/* Every pair once per epoch in batches of at most B; within each maxibatch sorted as Nematus
 * (max(source, target) length, longest first) or, NB_MT_ORDER_TARGET, by target length, shortest
 * first. */
static void batcher_order(int order) {
    nb_mt_data d;
    nb_err err;
    nb_rng r;
    batcher_data(&d, &r);
    nb_mt_batcher bt;
    int B = 32, M = 5;
    assert_int_equal(nb_mt_batcher_init(&bt, &d.train, B, M, order, &r, &err), 0);
    int *seen = calloc((size_t)d.train.n, sizeof *seen), idx[32];
    for (int epoch = 0; epoch < 2; epoch++) {
        int total = 0, prev_len = -1, in_maxi = 0;
        memset(seen, 0, (size_t)d.train.n * sizeof *seen);
        while (total < d.train.n) {
            int k = nb_mt_batcher_next(&bt, idx);
            assert_true(k > 0 && k <= B);
            for (int i = 0; i < k; i++) {
                seen[idx[i]]++;
                int l = nb_mt_tgt_len(&d.train, idx[i]), ls = nb_mt_src_len(&d.train, idx[i]);
                if (order == NB_MT_ORDER_NEMATUS) l = -(l > ls ? l : ls);
                /* sorted within each maxibatch (Nematus: the negated longer side rises) */
                if (in_maxi % (B * M) != 0) assert_true(l >= prev_len);
                prev_len = l;
                in_maxi++;
            }
            total += k;
        }
        assert_int_equal(total, d.train.n);
        for (int i = 0; i < d.train.n; i++)
            assert_int_equal(seen[i], 1);
    }
    assert_int_equal(bt.epoch, 1);
    free(seen);
    nb_mt_batcher_free(&bt);
    nb_mt_free(&d);
}

static void test_batcher(void **state) {
    (void)state;
    batcher_order(NB_MT_ORDER_NEMATUS);
    batcher_order(NB_MT_ORDER_TARGET);
}

/* The default order is Nematus': the first batch of an epoch holds the longest pairs of its
 * maxibatch (the old order started with the shortest). */
static void test_batcher_default_longest_first(void **state) {
    (void)state;
    nb_mt_data d;
    nb_err err;
    nb_rng r;
    batcher_data(&d, &r);
    nb_mt_batcher bt;
    const int B = 16, M = 4;
    assert_int_equal(nb_mt_batcher_init(&bt, &d.train, B, M, 0, &r, &err), 0);
    int idx[16], most = 0, first = 0;
    for (int i = 0; i < B * M; i++) {
        int ls = nb_mt_src_len(&d.train, bt.order[i]), lt = nb_mt_tgt_len(&d.train, bt.order[i]);
        if ((ls > lt ? ls : lt) > most) most = ls > lt ? ls : lt;
    }
    assert_int_equal(nb_mt_batcher_next(&bt, idx), B);
    for (int i = 0; i < B; i++) {
        int ls = nb_mt_src_len(&d.train, idx[i]), lt = nb_mt_tgt_len(&d.train, idx[i]);
        if (i == 0) first = ls > lt ? ls : lt;
    }
    assert_int_equal(first, most);
    nb_mt_batcher_free(&bt);
    nb_mt_free(&d);
}

/* Token batches: every pair once per epoch, each batch padded to its longest side within the
 * budget (a pair over it alone), sorted within maxibatches, and the count of an epoch's batches
 * equal to what next() hands out. */
static void test_batcher_tokens(void **state) {
    (void)state;
    nb_mt_data d;
    nb_err err;
    nb_rng r;
    batcher_data(&d, &r);
    nb_mt_batcher bt;
    const int TOK = 150, M = 3;
    assert_int_equal(nb_mt_batcher_init_tokens(&bt, &d.train, 0, M, NB_MT_ORDER_NEMATUS, &r, &err),
                     -1);
    assert_int_equal(
        nb_mt_batcher_init_tokens(&bt, &d.train, TOK, M, NB_MT_ORDER_NEMATUS, &r, &err), 0);
    int *seen = calloc((size_t)d.train.n, sizeof *seen), idx[150];
    int sizes[2] = {0, 0};
    for (int epoch = 0; epoch < 2; epoch++) {
        long want = nb_mt_batcher_count(&bt), got = 0;
        assert_true(want > 0);
        int total = 0, smallest = TOK, largest = 0;
        memset(seen, 0, (size_t)d.train.n * sizeof *seen);
        while (total < d.train.n) {
            int k = nb_mt_batcher_next(&bt, idx);
            assert_true(k > 0 && k <= TOK);
            int ms = 0, mt = 0;
            for (int i = 0; i < k; i++) {
                seen[idx[i]]++;
                int ls = nb_mt_src_len(&d.train, idx[i]), lt = nb_mt_tgt_len(&d.train, idx[i]) + 1;
                if (ls < 1) ls = 1;
                if (ls > ms) ms = ls;
                if (lt > mt) mt = lt;
            }
            int rows = k * (ms > mt ? ms : mt);
            assert_true(rows <= TOK || k == 1);
            if (k < smallest) smallest = k;
            if (k > largest) largest = k;
            total += k;
            got++;
        }
        assert_int_equal(total, d.train.n);
        if (epoch == 0) assert_int_equal(got, want); /* the count is of the current epoch */
        for (int i = 0; i < d.train.n; i++)
            assert_int_equal(seen[i], 1);
        /* short sentences share a batch with more of their kind than long ones */
        assert_true(largest > smallest);
        sizes[epoch] = largest;
    }
    assert_true(sizes[0] > 1);
    free(seen);
    nb_mt_batcher_free(&bt);
    nb_mt_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretok),
        cmocka_unit_test(test_roundtrip_tricky),
        cmocka_unit_test(test_hand_merges),
        cmocka_unit_test(test_codes_refused),
        cmocka_unit_test(test_encode_counts),
        cmocka_unit_test(test_multi30k_roundtrip),
        cmocka_unit_test(test_synthetic_and_cache),
        cmocka_unit_test(test_batcher),
        cmocka_unit_test(test_batcher_default_longest_first),
        cmocka_unit_test(test_batcher_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
