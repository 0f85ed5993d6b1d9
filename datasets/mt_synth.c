/* datasets/mt_synth.c — the synthetic transduction of mt.h (nb_mt_synth_text).
 *
 * Words are built from fixed syllable tables, so the language is the same for every seed; the
 * seed only draws sentences. Source class sizes: 4 determiners, 16 adjectives, 24 nouns,
 * 16 verbs (60 words); target words spell the same index with other syllables. */
#include "datasets/mt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DET, ADJ, NOUN, VERB, NCLASS };
static const int class_size[NCLASS] = {4, 16, 24, 16};
static const char *const src_syl[NCLASS][8] = {
    {"ta", "ke", "mo", "su"},
    {"bi", "lo", "ra", "ne", "fu", "gi", "po", "za"},
    {"da", "le", "mi", "no", "pu", "ri", "se", "vo"},
    {"ka", "ze", "lu", "ho", "ti", "me", "ga", "wo"},
};
static const char *const tgt_syl[NCLASS][8] = {
    {"der", "die", "das", "ein"},
    {"schn", "kal", "wur", "bre", "hol", "tru", "pem", "dra"},
    {"haus", "berg", "wald", "fluss", "stein", "feld", "turm", "see"},
    {"geht", "sieht", "baut", "hebt", "legt", "zieht", "malt", "holt"},
};

/* Word i of class c into out: determiners are one syllable; others two syllables (i / 8,
 * i % 8) plus a class ending, so that BPE has shared pieces to find. */
static void word(int tgt, int c, int i, char *out, size_t n) {
    const char *const(*syl)[8] = tgt ? tgt_syl : src_syl;
    if (c == DET) {
        snprintf(out, n, "%s", syl[DET][i]);
        return;
    }
    static const char *const src_end[NCLASS] = {"", "ny", "o", "et"};
    static const char *const tgt_end[NCLASS] = {"", "ig", "e", "t"};
    const char *end = tgt ? tgt_end[c] : src_end[c];
    if (tgt && c != ADJ)
        snprintf(out, n, "%s%s%s", syl[c][i % 8], syl[c][(i / 8 + 3) % 8], end);
    else
        snprintf(out, n, "%s%s%s", syl[c][i / 8], syl[c][i % 8], end);
}

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static int put(sbuf *b, const char *w) {
    size_t l = strlen(w);
    if (b->n + l + 2 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + l + 2)
            cap *= 2;
        char *x = realloc(b->s, cap);
        if (!x) return -1;
        b->s = x;
        b->cap = cap;
    }
    if (b->n && b->s[b->n - 1] != '\n') b->s[b->n++] = ' ';
    memcpy(b->s + b->n, w, l);
    b->n += l;
    return 0;
}

static int endline(sbuf *b) {
    if (b->n + 2 > b->cap && put(b, "")) return -1;
    b->s[b->n++] = '\n';
    return 0;
}

/* A noun phrase: det, optional adjective, noun (drawn). */
typedef struct np {
    int det, adj, noun; /* adj -1: none */
} np;

static np draw_np(nb_rng *r) {
    np p;
    p.det = (int)nb_rng_below(r, (uint64_t)class_size[DET]);
    p.adj = nb_rng_below(r, 2) ? (int)nb_rng_below(r, (uint64_t)class_size[ADJ]) : -1;
    p.noun = (int)nb_rng_below(r, (uint64_t)class_size[NOUN]);
    return p;
}

static int put_np(sbuf *b, np p, int tgt) {
    char w[64];
    word(tgt, DET, p.det, w, sizeof w);
    if (put(b, w)) return -1;
    if (!tgt && p.adj >= 0) {
        word(0, ADJ, p.adj, w, sizeof w);
        if (put(b, w)) return -1;
    }
    word(tgt, NOUN, p.noun, w, sizeof w);
    if (put(b, w)) return -1;
    if (tgt && p.adj >= 0) {
        word(1, ADJ, p.adj, w, sizeof w);
        if (put(b, w)) return -1;
    }
    return 0;
}

int nb_mt_synth_text(uint64_t seed, uint64_t stream, int n, nb_lines *src, nb_lines *tgt,
                     nb_err *err) {
    memset(src, 0, sizeof *src);
    memset(tgt, 0, sizeof *tgt);
    nb_rng r;
    nb_rng_seed(&r, seed, (uint64_t)NB_STREAM_SYNTH * 1000 + stream);
    sbuf S = {0}, T = {0};
    char w[64];
    for (int i = 0; i < n; i++) {
        int clauses = 1 + (int)nb_rng_below(&r, 2);
        for (int c = 0; c < clauses; c++) {
            if (c > 0 && (put(&S, "and") || put(&T, "und"))) goto oom;
            np subj = draw_np(&r);
            int verb = (int)nb_rng_below(&r, (uint64_t)class_size[VERB]);
            int trans = (int)nb_rng_below(&r, 3) != 0;
            np obj = draw_np(&r);
            /* source: S V O; target: S O V */
            if (put_np(&S, subj, 0)) goto oom;
            word(0, VERB, verb, w, sizeof w);
            if (put(&S, w)) goto oom;
            if (trans && put_np(&S, obj, 0)) goto oom;
            if (put_np(&T, subj, 1)) goto oom;
            if (trans && put_np(&T, obj, 1)) goto oom;
            word(1, VERB, verb, w, sizeof w);
            if (put(&T, w)) goto oom;
        }
        if (put(&S, ".") || put(&T, ".") || endline(&S) || endline(&T)) goto oom;
    }
    int rc = nb_lines_parse(S.s ? S.s : "", S.n, "synthetic source", src, err);
    if (!rc) rc = nb_lines_parse(T.s ? T.s : "", T.n, "synthetic target", tgt, err);
    if (rc) nb_lines_free(src);
    free(S.s);
    free(T.s);
    return rc;
oom:
    free(S.s);
    free(T.s);
    return nb_errf(err, "out of memory");
}
