/* datasets/top4.c — the CNN "top4" corpus (docs/papers.md#reader-data): DATA/cnn-top4/{dict.pkl,
 * train4_{pass,qs,ans}.pkl, valid4_{pass,qs,ans}.pkl}, read with datasets/pickle.c and converted
 * once to a compact cache beside them (cache-v1.bin), which later runs read instead.
 *
 * Conversion as the code prepares the data: the final token (EOS) of every passage and question
 * is dropped; the answer is the first id of its list; the vocabulary size is len(dict)+1; the
 * entities are the ids of the keys containing "@entity". Every id must be in [0, V).
 *
 * Cache layout (little-endian): "NBCLOZE1", u32 V, u32 nents, u64 stamp[14] (size and mtime of
 * the seven pickles: a changed pickle rebuilds the cache), then per split (train, valid): u32 n,
 * u64 ndtok, u64 nqtok, i64 doff[n+1], i64 qoff[n+1], i32 dtok[ndtok], i32 qtok[nqtok],
 * i32 ans[n]; then i32 ents[nents]; then the FNV-1a 64 hash of every byte before it. Written to a
 * temporary file, synced and renamed, so a half-written cache is never read. */
#include "datasets/cloze.h"
#include "datasets/pickle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/file.h"

static const char *const files[7] = {"dict.pkl",       "train4_pass.pkl", "train4_qs.pkl",
                                     "train4_ans.pkl", "valid4_pass.pkl", "valid4_qs.pkl",
                                     "valid4_ans.pkl"};
static const char magic[8] = {'N', 'B', 'C', 'L', 'O', 'Z', 'E', '1'};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static int missing(const char *path, nb_err *err) {
    nb_errf(err, "cannot open '%s': %s", path, strerror(errno));
    nb_hintf(err, "run `normbench fetch cnn-top4` (or put top4.zip's files in that folder)");
    return -1;
}

/* ---- conversion from the pickles ------------------------------------------------------------ */

static int split_from(nb_cloze_split *s, const nb_pickle *pass, const nb_pickle *qs,
                      const nb_pickle *ans, int V, const char *dir, const char *pfx, nb_err *err) {
    memset(s, 0, sizeof *s);
    if (pass->kind != NB_PICKLE_LISTS || qs->kind != NB_PICKLE_LISTS ||
        ans->kind != NB_PICKLE_LISTS)
        return nb_errf(err, "'%s/%s4_*.pkl' do not all hold lists of token lists", dir, pfx);
    if (pass->n != qs->n || pass->n != ans->n || pass->n > INT32_MAX - 1) {
        nb_errf(err, "'%s/%s4_*.pkl' disagree on the number of examples (%lld, %lld, %lld)", dir,
                pfx, (long long)pass->n, (long long)qs->n, (long long)ans->n);
        return nb_hintf(err, "re-download with `normbench fetch cnn-top4`");
    }
    const int64_t n = pass->n;
    s->n = (int)n;
    s->doff = malloc(sizeof(int64_t) * (size_t)(n + 1));
    s->qoff = malloc(sizeof(int64_t) * (size_t)(n + 1));
    s->dtok = malloc(sizeof(int32_t) * (size_t)(pass->off[n] + 1));
    s->qtok = malloc(sizeof(int32_t) * (size_t)(qs->off[n] + 1));
    s->ans = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!s->doff || !s->qoff || !s->dtok || !s->qtok || !s->ans)
        return nb_errf(err, "out of memory converting '%s'", dir);
    const nb_pickle *src[2] = {pass, qs};
    int64_t *off[2] = {s->doff, s->qoff};
    int32_t *tok[2] = {s->dtok, s->qtok};
    int *mx[2] = {&s->maxd, &s->maxq};
    const char *what[2] = {"pass", "qs"};
    for (int w = 0; w < 2; w++) {
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t a = src[w]->off[i], len = src[w]->off[i + 1] - a - 1; /* EOS dropped */
            if (len < 1) {
                nb_errf(err, "example %lld of '%s/%s4_%s.pkl' has no token before its end token",
                        (long long)i, dir, pfx, what[w]);
                return nb_hintf(err, "re-download with `normbench fetch cnn-top4`");
            }
            if (len > 100000)
                return nb_errf(err, "example %lld of '%s/%s4_%s.pkl' is %lld tokens long",
                               (long long)i, dir, pfx, what[w], (long long)len);
            off[w][i] = k;
            for (int64_t j = 0; j < len; j++) {
                int32_t v = src[w]->tok[a + j];
                if (v >= V)
                    return nb_errf(err,
                                   "token id %d in '%s/%s4_%s.pkl' is not in the dictionary "
                                   "(%d words)",
                                   v, dir, pfx, what[w], V - 1);
                tok[w][k++] = v;
            }
            if (len > *mx[w]) *mx[w] = (int)len;
        }
        off[w][n] = k;
    }
    for (int64_t i = 0; i < n; i++) {
        if (ans->off[i + 1] == ans->off[i])
            return nb_errf(err, "answer %lld in '%s/%s4_ans.pkl' is empty", (long long)i, dir, pfx);
        int32_t v = ans->tok[ans->off[i]];
        if (v >= V)
            return nb_errf(err, "answer id %d in '%s/%s4_ans.pkl' is not in the dictionary", v, dir,
                           pfx);
        s->ans[i] = v;
    }
    return 0;
}

static int convert(nb_cloze *c, const char *dir, nb_err *err) {
    nb_pickle pk[7];
    memset(pk, 0, sizeof pk);
    int rc = -1;
    char path[4096];
    for (int i = 0; i < 7; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, files[i]) >= (int)sizeof path) {
            nb_errf(err, "data folder path too long");
            goto out;
        }
        if (nb_pickle_load(path, &pk[i], err) != 0) goto out;
    }
    if (pk[0].kind != NB_PICKLE_DICT) {
        nb_errf(err, "'%s/dict.pkl' is not a dict of words to ids", dir);
        goto out;
    }
    if (pk[0].n < 1 || pk[0].n > INT32_MAX - 2) {
        nb_errf(err, "'%s/dict.pkl' has %lld words", dir, (long long)pk[0].n);
        goto out;
    }
    c->V = (int)pk[0].n + 1;
    int ne = 0;
    for (int64_t i = 0; i < pk[0].n; i++) {
        if (pk[0].val[i] >= c->V) {
            nb_errf(err, "'%s/dict.pkl' maps a word to id %d, beyond its %d words", dir,
                    pk[0].val[i], c->V - 1);
            goto out;
        }
        ne += strstr(pk[0].keys + pk[0].koff[i], "@entity") != NULL;
    }
    c->ents = malloc(sizeof(int32_t) * (size_t)(ne ? ne : 1));
    c->scratch = malloc(sizeof(int) * (size_t)(ne ? ne : 1));
    if (!c->ents || !c->scratch) {
        nb_errf(err, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < pk[0].n; i++)
        if (strstr(pk[0].keys + pk[0].koff[i], "@entity")) c->ents[c->nents++] = pk[0].val[i];
    if (split_from(&c->train, &pk[1], &pk[2], &pk[3], c->V, dir, "train", err) != 0) goto out;
    if (split_from(&c->val, &pk[4], &pk[5], &pk[6], c->V, dir, "valid", err) != 0) goto out;
    rc = 0;
out:
    for (int i = 0; i < 7; i++)
        nb_pickle_free(&pk[i]);
    return rc;
}

/* ---- the cache ------------------------------------------------------------------------------ */

typedef struct wbuf {
    FILE *f;
    uint64_t h;
    int bad;
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n) w->bad = 1;
    w->h = fnv(w->h, p, n);
}

static void write_cache(const nb_cloze *c, const char *dir, const uint64_t *stamp) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/cache-v1.bin", dir) >= (int)sizeof path) return;
    nb_atomic a;
    if (nb_atomic_open(&a, path, 0666, NULL)) return; /* a read-only data folder: convert again */
    wbuf w = {a.f, FNV0, 0};
    uint32_t V = (uint32_t)c->V, ne = (uint32_t)c->nents;
    put(&w, magic, 8);
    put(&w, &V, 4);
    put(&w, &ne, 4);
    put(&w, stamp, 14 * sizeof(uint64_t));
    const nb_cloze_split *sp[2] = {&c->train, &c->val};
    for (int k = 0; k < 2; k++) {
        const nb_cloze_split *s = sp[k];
        uint32_t n = (uint32_t)s->n;
        uint64_t nd = (uint64_t)s->doff[s->n], nq = (uint64_t)s->qoff[s->n];
        put(&w, &n, 4);
        put(&w, &nd, 8);
        put(&w, &nq, 8);
        put(&w, s->doff, sizeof(int64_t) * (n + 1));
        put(&w, s->qoff, sizeof(int64_t) * (n + 1));
        put(&w, s->dtok, sizeof(int32_t) * nd);
        put(&w, s->qtok, sizeof(int32_t) * nq);
        put(&w, s->ans, sizeof(int32_t) * n);
    }
    put(&w, c->ents, sizeof(int32_t) * ne);
    uint64_t h = w.h;
    put(&w, &h, 8);
    if (w.bad)
        nb_atomic_abort(&a);
    else
        nb_atomic_commit(&a, NULL);
}

typedef struct rbuf {
    const uint8_t *p;
    size_t n, i;
} rbuf;

static int get(rbuf *r, void *dst, size_t n) {
    if (r->n - r->i < n) return -1;
    memcpy(dst, r->p + r->i, n);
    r->i += n;
    return 0;
}

/* Reads an array of cnt values of size sz into a fresh buffer. */
static void *get_arr(rbuf *r, uint64_t cnt, size_t sz) {
    if (cnt > (r->n - r->i) / sz) return NULL;
    void *p = malloc((size_t)cnt * sz + 1);
    if (p && get(r, p, (size_t)cnt * sz)) {
        free(p);
        p = NULL;
    }
    return p;
}

/* Parses a cache image. Returns 0, 1 when it is stale (other pickles), -1 when damaged. */
static int parse_cache(nb_cloze *c, const uint8_t *buf, size_t n, const uint64_t *stamp) {
    memset(c, 0, sizeof *c);
    if (n < 16 + 8 || memcmp(buf, magic, 8) != 0) return -1;
    uint64_t h;
    memcpy(&h, buf + n - 8, 8);
    if (fnv(FNV0, buf, n - 8) != h) return -1;
    rbuf r = {buf, n - 8, 8};
    uint32_t V, ne;
    uint64_t st[14];
    if (get(&r, &V, 4) || get(&r, &ne, 4) || get(&r, st, sizeof st)) return -1;
    if (memcmp(st, stamp, sizeof st) != 0) return 1;
    if (V < 2 || V > INT32_MAX - 1 || ne > V) return -1;
    c->V = (int)V;
    nb_cloze_split *sp[2] = {&c->train, &c->val};
    for (int k = 0; k < 2; k++) {
        nb_cloze_split *s = sp[k];
        uint32_t cnt;
        uint64_t nd, nq;
        if (get(&r, &cnt, 4) || get(&r, &nd, 8) || get(&r, &nq, 8) || cnt > INT32_MAX - 1) goto bad;
        s->n = (int)cnt;
        s->doff = get_arr(&r, (uint64_t)cnt + 1, 8);
        s->qoff = get_arr(&r, (uint64_t)cnt + 1, 8);
        s->dtok = get_arr(&r, nd, 4);
        s->qtok = get_arr(&r, nq, 4);
        s->ans = get_arr(&r, cnt, 4);
        if (!s->doff || !s->qoff || !s->dtok || !s->qtok || !s->ans) goto bad;
        /* offsets increasing, within the arrays; every id in range */
        int64_t *off[2] = {s->doff, s->qoff};
        uint64_t tot[2] = {nd, nq};
        int *mx[2] = {&s->maxd, &s->maxq};
        for (int w = 0; w < 2; w++) {
            if (off[w][0] != 0 || (uint64_t)off[w][cnt] != tot[w]) goto bad;
            for (uint32_t i = 0; i < cnt; i++) {
                int64_t len = off[w][i + 1] - off[w][i];
                if (len < 1 || len > 100000) goto bad;
                if (len > *mx[w]) *mx[w] = (int)len;
            }
        }
        for (uint64_t i = 0; i < nd; i++)
            if (s->dtok[i] < 0 || (uint32_t)s->dtok[i] >= V) goto bad;
        for (uint64_t i = 0; i < nq; i++)
            if (s->qtok[i] < 0 || (uint32_t)s->qtok[i] >= V) goto bad;
        for (uint32_t i = 0; i < cnt; i++)
            if (s->ans[i] < 0 || (uint32_t)s->ans[i] >= V) goto bad;
    }
    c->ents = get_arr(&r, ne, 4);
    c->scratch = malloc(sizeof(int) * (ne ? ne : 1));
    if (!c->ents || !c->scratch || r.i != r.n) goto bad;
    c->nents = (int)ne;
    for (uint32_t i = 0; i < ne; i++)
        if (c->ents[i] < 0 || (uint32_t)c->ents[i] >= V) goto bad;
    return 0;
bad:
    nb_cloze_free(c);
    return -1;
}

int nb_top4_load(nb_cloze *c, const char *data_dir, nb_err *err) {
    memset(c, 0, sizeof *c);
    char dir[4096], path[4200];
    if (snprintf(dir, sizeof dir, "%s/cnn-top4", data_dir) >= (int)sizeof dir - 64)
        return nb_errf(err, "data folder path too long: '%.200s...'", data_dir);
    uint64_t stamp[14];
    for (int i = 0; i < 7; i++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &sb) != 0) return missing(path, err);
        stamp[2 * i] = (uint64_t)sb.st_size;
        stamp[2 * i + 1] = (uint64_t)sb.st_mtime;
    }
    snprintf(path, sizeof path, "%s/cache-v1.bin", dir);
    char *buf = NULL;
    size_t len = 0;
    nb_err rerr;
    if (nb_read_file(path, ((size_t)16 << 30) - 1, NB_READ_REGULAR, &buf, &len, &rerr) == 0) {
        if (len > 0 && parse_cache(c, (const uint8_t *)buf, len, stamp) == 0) {
            free(buf);
            snprintf(c->source, sizeof c->source, "%.900s (cache of the top4 pickles)", path);
            return 0;
        }
        free(buf);
    }
    /* no cache, or a stale or damaged one: convert from the pickles */
    if (convert(c, dir, err) != 0) {
        nb_cloze_free(c);
        return -1;
    }
    write_cache(c, dir, stamp);
    snprintf(c->source, sizeof c->source, "%.900s (top4 pickles, converted)", dir);
    return 0;
}
