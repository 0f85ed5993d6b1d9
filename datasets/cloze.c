/* datasets/cloze.c — the cloze data container, the generated corpus, and batch preparation. */
#include "datasets/cloze.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nb_cloze_free(nb_cloze *c) {
    nb_cloze_split *sp[] = {&c->train, &c->val};
    for (int i = 0; i < 2; i++) {
        free(sp[i]->doff);
        free(sp[i]->qoff);
        free(sp[i]->dtok);
        free(sp[i]->qtok);
        free(sp[i]->ans);
    }
    free(c->ents);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

/* Generated vocabulary: 0 NIL, 1 EOS, 2 UNK, 3 the placeholder, then entities, relations,
 * filler words. */
enum {
    SYN_NS0 = 3, /* sentences per passage: SYN_NS0 + [0, SYN_NSR) */
    SYN_NSR = 2,
    SYN_ENTS = 12,
    SYN_RELS = 24,
    SYN_FILL = 60,
    SYN_E0 = 4,
    SYN_R0 = SYN_E0 + SYN_ENTS,
    SYN_F0 = SYN_R0 + SYN_RELS,
    SYN_V = SYN_F0 + SYN_FILL,
    SYN_MAXD = 4 * 8,
    SYN_MAXQ = 5
};

/* Draws k distinct values of [0, n) into out. */
static void distinct(nb_rng *r, int *out, int k, int n) {
    for (int i = 0; i < k; i++) {
        int v, dup;
        do {
            v = (int)nb_rng_below(r, (uint64_t)n);
            dup = 0;
            for (int j = 0; j < i; j++)
                dup |= out[j] == v;
        } while (dup);
        out[i] = v;
    }
}

static int gen_split(nb_cloze_split *s, int n, nb_rng *r) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->doff = malloc(sizeof(int64_t) * ((size_t)n + 1));
    s->qoff = malloc(sizeof(int64_t) * ((size_t)n + 1));
    s->dtok = malloc(sizeof(int32_t) * (size_t)n * SYN_MAXD);
    s->qtok = malloc(sizeof(int32_t) * (size_t)n * SYN_MAXQ);
    s->ans = malloc(sizeof(int32_t) * (size_t)n);
    if (!s->doff || !s->qoff || !s->dtok || !s->qtok || !s->ans) return -1;
    int64_t k = 0, kq = 0;
    for (int i = 0; i < n; i++) {
        int ns = SYN_NS0 + (int)nb_rng_below(r, SYN_NSR), ents[4], rels[4];
        distinct(r, ents, ns, SYN_ENTS);
        distinct(r, rels, ns, SYN_RELS);
        s->doff[i] = k;
        for (int j = 0; j < ns; j++) {
            int pre = (int)nb_rng_below(r, 3), post = 1 + (int)nb_rng_below(r, 3);
            for (int f = 0; f < pre; f++)
                s->dtok[k++] = SYN_F0 + (int32_t)nb_rng_below(r, SYN_FILL);
            s->dtok[k++] = SYN_E0 + ents[j];
            s->dtok[k++] = SYN_R0 + rels[j];
            for (int f = 0; f < post; f++)
                s->dtok[k++] = SYN_F0 + (int32_t)nb_rng_below(r, SYN_FILL);
        }
        int len = (int)(k - s->doff[i]);
        if (len > s->maxd) s->maxd = len;
        int which = (int)nb_rng_below(r, (uint64_t)ns);
        s->qoff[i] = kq;
        int pre = 1 + (int)nb_rng_below(r, 2);
        for (int f = 0; f < pre; f++)
            s->qtok[kq++] = SYN_F0 + (int32_t)nb_rng_below(r, SYN_FILL);
        s->qtok[kq++] = 3;
        s->qtok[kq++] = SYN_R0 + rels[which];
        if ((int)(kq - s->qoff[i]) > s->maxq) s->maxq = (int)(kq - s->qoff[i]);
        s->ans[i] = SYN_E0 + ents[which];
    }
    s->doff[n] = k;
    s->qoff[n] = kq;
    return 0;
}

int nb_cloze_synthetic(nb_cloze *c, int ntrain, int nval, uint64_t seed, nb_err *err) {
    memset(c, 0, sizeof *c);
    nb_rng r;
    nb_rng_seed(&r, seed, NB_STREAM_SYNTH);
    c->V = SYN_V;
    c->nents = SYN_ENTS;
    c->ents = malloc(sizeof(int32_t) * SYN_ENTS);
    c->scratch = malloc(sizeof(int) * SYN_ENTS);
    if (!c->ents || !c->scratch || gen_split(&c->train, ntrain, &r) != 0 ||
        gen_split(&c->val, nval, &r) != 0) {
        nb_cloze_free(c);
        return nb_errf(err, "out of memory for the synthetic cloze corpus");
    }
    for (int i = 0; i < SYN_ENTS; i++)
        c->ents[i] = SYN_E0 + i;
    snprintf(c->source, sizeof c->source,
             "synthetic cloze corpus (seed %llu): %d train, %d validation, vocabulary %d, %d "
             "entities",
             (unsigned long long)seed, ntrain, nval, SYN_V, SYN_ENTS);
    return 0;
}

static const int32_t *passage(const nb_cloze_split *s, int i, int *len) {
    *len = (int)(s->doff[i + 1] - s->doff[i]);
    return s->dtok + s->doff[i];
}

static const int32_t *question(const nb_cloze_split *s, int i, int *len) {
    *len = (int)(s->qoff[i + 1] - s->qoff[i]);
    return s->qtok + s->qoff[i];
}

static void pad_row(int *dst, const int32_t *src, int len, int T, const int32_t *perm) {
    for (int t = 0; t < T; t++) {
        int i = t % (len + 1);
        int v = i < len ? src[i] : 0;
        dst[t] = perm ? perm[v] : v;
    }
}

void nb_cloze_batch(const nb_cloze_split *s, int first, int B, const int32_t *perm, int *tokd,
                    int *lend, int *TD, int *tokq, int *lenq, int *TQ, int *ans) {
    int md = 0, mq = 0;
    for (int b = 0; b < B; b++) {
        passage(s, first + b, &lend[b]);
        question(s, first + b, &lenq[b]);
        if (lend[b] > md) md = lend[b];
        if (lenq[b] > mq) mq = lenq[b];
    }
    *TD = md + 1;
    *TQ = mq + 1;
    for (int b = 0; b < B; b++) {
        int n;
        const int32_t *d = passage(s, first + b, &n);
        pad_row(tokd + (size_t)b * *TD, d, n, *TD, perm);
        const int32_t *q = question(s, first + b, &n);
        pad_row(tokq + (size_t)b * *TQ, q, n, *TQ, perm);
        int a = s->ans[first + b];
        ans[b] = perm ? perm[a] : a;
    }
}

void nb_cloze_entity_perm(const nb_cloze *c, int32_t *perm, nb_rng *rng) {
    for (int i = 0; i < c->V; i++)
        perm[i] = i;
    int *idx = c->scratch;
    for (int i = 0; i < c->nents; i++)
        idx[i] = i;
    nb_rng_shuffle(rng, idx, (size_t)c->nents);
    for (int i = 0; i < c->nents; i++)
        perm[c->ents[i]] = c->ents[idx[i]];
}

/* Default sizes of the generated corpus. */
enum { SYN_TRAIN = 20000, SYN_VAL = 2000 };

int nb_cloze_load(nb_cloze *c, const char *dataset, const char *data_dir, int subset, uint64_t seed,
                  nb_err *err) {
    memset(c, 0, sizeof *c);
    if (strcmp(dataset, "synthetic") == 0) {
        int ntr = subset > 0 ? subset : SYN_TRAIN;
        int nva = subset > 0 && subset < SYN_VAL ? subset : SYN_VAL;
        return nb_cloze_synthetic(c, ntr, nva, seed, err);
    }
    if (strcmp(dataset, "cnn-top4") == 0) {
        if (nb_top4_load(c, data_dir, err) != 0) return -1;
        if (subset > 0) {
            if (subset < c->train.n) c->train.n = subset;
            if (subset < c->val.n) c->val.n = subset;
        }
        return 0;
    }
    nb_errf(err, "unknown cloze dataset '%s'", dataset);
    nb_hintf(err, "use cnn-top4 or synthetic");
    return -1;
}
