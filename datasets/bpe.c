/* datasets/bpe.c — see bpe.h. */
#include "datasets/bpe.h"
#include "datasets/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a string -> int hash map (open addressing, keys owned) ---------------------------------- */

typedef struct smap {
    char **key;
    int *val;
    size_t cap, n;
} smap;

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static int smap_get(const smap *m, const char *s, size_t len) {
    if (!m->cap) return -1;
    size_t i = hash_bytes(s, len) & (m->cap - 1);
    while (m->key[i]) {
        if (strncmp(m->key[i], s, len) == 0 && m->key[i][len] == '\0') return m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

static int smap_grow(smap *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    char **key = calloc(cap, sizeof *key);
    int *val = calloc(cap, sizeof *val);
    if (!key || !val) {
        free(key);
        free(val);
        return -1;
    }
    for (size_t j = 0; j < m->cap; j++) {
        if (!m->key[j]) continue;
        size_t i = hash_bytes(m->key[j], strlen(m->key[j])) & (cap - 1);
        while (key[i])
            i = (i + 1) & (cap - 1);
        key[i] = m->key[j];
        val[i] = m->val[j];
    }
    free(m->key);
    free(m->val);
    m->key = key;
    m->val = val;
    m->cap = cap;
    return 0;
}

/* Inserts s (len bytes, copied) with val; the key must be absent. Returns the stored key, or
 * NULL when out of memory. */
static char *smap_put(smap *m, const char *s, size_t len, int val) {
    if ((m->n + 1) * 2 > m->cap && smap_grow(m)) return NULL;
    char *k = malloc(len + 1);
    if (!k) return NULL;
    memcpy(k, s, len);
    k[len] = '\0';
    size_t i = hash_bytes(s, len) & (m->cap - 1);
    while (m->key[i])
        i = (i + 1) & (m->cap - 1);
    m->key[i] = k;
    m->val[i] = val;
    m->n++;
    return k;
}

static void smap_free(smap *m) {
    for (size_t i = 0; i < m->cap; i++)
        free(m->key[i]);
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* ---- token lists ----------------------------------------------------------------------------- */

void nb_toks_free(nb_toks *t) {
    free(t->tok);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

static void toks_reset(nb_toks *t) {
    t->n = 0;
    t->len = 0;
}

/* Appends a token of len bytes (tokens are stored as offsets until toks_fix). */
static int toks_push(nb_toks *t, const char *s, size_t len) {
    if (t->n + 1 > t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        char **p = realloc(t->tok, (size_t)cap * sizeof *p);
        if (!p) return -1;
        t->tok = p;
        t->cap = cap;
    }
    if (t->len + len + 1 > t->bufcap) {
        size_t cap = t->bufcap ? t->bufcap * 2 : 1024;
        while (cap < t->len + len + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) return -1;
        t->buf = b;
        t->bufcap = cap;
    }
    memcpy(t->buf + t->len, s, len);
    t->buf[t->len + len] = '\0';
    t->tok[t->n++] = (char *)(uintptr_t)t->len; /* an offset until toks_fix */
    t->len += len + 1;
    return 0;
}

/* Appends len bytes to the last token (stored as an offset). */
static int toks_extend_last(nb_toks *t, const char *s, size_t len) {
    if (t->len + len > t->bufcap) {
        size_t cap = t->bufcap * 2 + len;
        char *b = realloc(t->buf, cap);
        if (!b) return -1;
        t->buf = b;
        t->bufcap = cap;
    }
    memcpy(t->buf + t->len - 1, s, len);
    t->len += len;
    t->buf[t->len - 1] = '\0';
    return 0;
}

/* Turns the stored offsets into pointers. */
static void toks_fix(nb_toks *t) {
    for (int i = 0; i < t->n; i++)
        t->tok[i] = t->buf + (uintptr_t)t->tok[i];
}

/* ---- pre-tokenization ----------------------------------------------------------------------- */

/* Length of the UTF-8 character at s (1 for an invalid byte). */
static size_t u8len(const unsigned char *s, size_t left) {
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (k > left || (k > 1 && c < 0xc2)) return 1;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return k;
}

/* Punctuation beyond ASCII that stands alone: quotes, dashes, ellipsis, guillemets, inverted
 * marks, middle dot. */
static const char *const upunct[] = {"\xe2\x80\x9e", "\xe2\x80\x9c", "\xe2\x80\x9d", "\xe2\x80\x98",
                                     "\xe2\x80\x99", "\xe2\x80\x9a", "\xe2\x80\x93", "\xe2\x80\x94",
                                     "\xe2\x80\xa6", "\xc2\xab",     "\xc2\xbb",     "\xe2\x80\xb9",
                                     "\xe2\x80\xba", "\xc2\xbf",     "\xc2\xa1",     "\xc2\xb7"};

static int is_punct(const char *s, size_t k) {
    if (k == 1) {
        unsigned c = (unsigned char)s[0];
        return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
               (c >= 0x7b && c <= 0x7e);
    }
    for (size_t i = 0; i < sizeof upunct / sizeof upunct[0]; i++)
        if (strlen(upunct[i]) == k && memcmp(upunct[i], s, k) == 0) return 1;
    return 0;
}

static int is_reserved(const char *s, size_t k) {
    return k == 3 && (memcmp(s, NB_JOINER, 3) == 0 || memcmp(s, NB_SPACE, 3) == 0);
}

static int push_spaces(nb_toks *t, size_t k) {
    char tmp[3 * 64] = "";
    size_t at = 0;
    char *run = k > 64 ? malloc(3 * k) : tmp;
    if (!run) return -1;
    for (size_t i = 0; i < k; i++, at += 3)
        memcpy(run + at, NB_SPACE, 3);
    int rc = toks_push(t, run, at);
    if (run != tmp) free(run);
    return rc;
}

int nb_pretok(const char *line, size_t len, nb_toks *out, long *reserved, nb_err *err) {
    toks_reset(out);
    const unsigned char *s = (const unsigned char *)line;
    size_t i = 0;
    int ntok = 0;
    /* a word being collected: bytes in wbuf */
    char *wbuf = NULL;
    size_t wlen = 0, wcap = 0;
    size_t gap = 0; /* spaces since the last token */
    int rc = -1;
    while (i <= len) {
        int end = i == len;
        size_t k = end ? 0 : u8len(s + i, len - i);
        int space = !end && s[i] == ' ';
        int punct = !end && !space && is_punct(line + i, k);
        /* a word ends at a space, a punctuation character or the end */
        if ((end || space || punct) && wlen) {
            if (ntok > 0 && gap == 0) {
                /* glued to the punctuation token before it: mark that one's right side */
                if (toks_extend_last(out, NB_JOINER, 3)) goto oom;
            } else if (ntok > 0 ? gap >= 2 : gap > 0) {
                if (push_spaces(out, gap)) goto oom;
            }
            if (toks_push(out, wbuf, wlen)) goto oom;
            ntok++;
            wlen = 0;
            gap = 0;
        }
        if (end) break;
        if (space) {
            gap++;
            i++;
            continue;
        }
        if (punct) {
            if (ntok > 0 && gap == 0) {
                char tmp[8];
                memcpy(tmp, NB_JOINER, 3);
                memcpy(tmp + 3, line + i, k);
                if (toks_push(out, tmp, 3 + k)) goto oom;
            } else {
                if (ntok > 0 ? gap >= 2 : gap > 0) {
                    if (push_spaces(out, gap)) goto oom;
                }
                if (toks_push(out, line + i, k)) goto oom;
            }
            ntok++;
            gap = 0;
            i += k;
            continue;
        }
        /* a word character (a reserved marker becomes U+FFFD) */
        const char *c = line + i;
        size_t ck = k;
        if (is_reserved(c, k)) {
            c = NB_REPLACE;
            ck = 3;
            if (reserved) (*reserved)++;
        }
        if (wlen + ck > wcap) {
            size_t cap = wcap ? wcap * 2 : 64;
            while (cap < wlen + ck)
                cap *= 2;
            char *b = realloc(wbuf, cap);
            if (!b) goto oom;
            wbuf = b;
            wcap = cap;
        }
        memcpy(wbuf + wlen, c, ck);
        wlen += ck;
        i += k;
    }
    if (gap > 0 && push_spaces(out, gap)) goto oom; /* trailing (or a line of spaces) */
    toks_fix(out);
    rc = 0;
    goto done;
oom:
    nb_errf(err, "out of memory");
done:
    free(wbuf);
    return rc;
}

static int is_space_tok(const char *t) {
    if (!*t) return 0;
    for (; *t; t += 3)
        if (strncmp(t, NB_SPACE, 3) != 0) return 0;
    return 1;
}

static int starts_joiner(const char *t) {
    return strncmp(t, NB_JOINER, 3) == 0;
}

static int ends_joiner(const char *t) {
    size_t n = strlen(t);
    return n >= 3 && memcmp(t + n - 3, NB_JOINER, 3) == 0;
}

char *nb_detok(char *const *tok, int n) {
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(tok[i]) + 1;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t at = 0;
    int prev_space = 0, prev_glue = 0;
    for (int i = 0; i < n; i++) {
        const char *t = tok[i];
        if (!*t) continue;
        int sp = is_space_tok(t);
        if (sp) {
            for (size_t k = strlen(t) / 3; k > 0; k--)
                out[at++] = ' ';
            prev_space = 1;
            prev_glue = 0;
            continue;
        }
        int lj = starts_joiner(t);
        size_t tl = strlen(t);
        if (i > 0 && !prev_space && !prev_glue && !lj) out[at++] = ' ';
        const char *body = t + (lj ? 3 : 0);
        size_t bl = tl - (lj ? 3 : 0);
        int rj = bl >= 3 && ends_joiner(body);
        if (rj) bl -= 3;
        memcpy(out + at, body, bl);
        at += bl;
        prev_space = 0;
        prev_glue = rj;
    }
    out[at] = '\0';
    return out;
}

/* ---- BPE codes ------------------------------------------------------------------------------- */

#define EOW "</w>"

/* A uint64 -> int hash map for pairs. */
typedef struct pmap {
    uint64_t *key;
    int *val;
    size_t cap, n;
} pmap;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static int pmap_get(const pmap *m, uint64_t k) {
    if (!m->cap) return -1;
    size_t i = mix64(k) & (m->cap - 1);
    while (m->val[i] >= 0) {
        if (m->key[i] == k) return m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

static int pmap_put(pmap *m, uint64_t k, int v) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *key = malloc(cap * sizeof *key);
        int *val = malloc(cap * sizeof *val);
        if (!key || !val) {
            free(key);
            free(val);
            return -1;
        }
        for (size_t i = 0; i < cap; i++)
            val[i] = -1;
        for (size_t j = 0; j < m->cap; j++) {
            if (m->val[j] < 0) continue;
            size_t i = mix64(m->key[j]) & (cap - 1);
            while (val[i] >= 0)
                i = (i + 1) & (cap - 1);
            key[i] = m->key[j];
            val[i] = m->val[j];
        }
        free(m->key);
        free(m->val);
        m->key = key;
        m->val = val;
        m->cap = cap;
    }
    size_t i = mix64(k) & (m->cap - 1);
    while (m->val[i] >= 0) {
        if (m->key[i] == k) {
            m->val[i] = v;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->key[i] = k;
    m->val[i] = v;
    m->n++;
    return 0;
}

static void pmap_free(pmap *m) {
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* Interned symbols. */
typedef struct symtab {
    smap map;
    char **str; /* id -> string (the map's key) */
    int n, cap;
} symtab;

static int sym_intern(symtab *t, const char *s, size_t len) {
    int id = smap_get(&t->map, s, len);
    if (id >= 0) return id;
    if (t->n + 1 > t->cap) {
        int cap = t->cap ? t->cap * 2 : 1024;
        char **p = realloc(t->str, (size_t)cap * sizeof *p);
        if (!p) return -1;
        t->str = p;
        t->cap = cap;
    }
    char *k = smap_put(&t->map, s, len, t->n);
    if (!k) return -1;
    t->str[t->n] = k;
    return t->n++;
}

static void sym_free(symtab *t) {
    smap_free(&t->map);
    free(t->str);
    memset(t, 0, sizeof *t);
}

struct nb_bpe {
    symtab sym;
    int n, cap;
    int *left, *right, *merged; /* symbol ids per merge */
    pmap rank;                  /* (left, right) -> rank (first occurrence wins) */
    int *origin;                /* symbol id -> the first merge that made it, or -1 */
    int norigin;
    /* apply cache: word -> pieces joined by ' ' */
    smap cache;
    char **cached;
    int ncached, capcached;
};

static uint64_t pkey(int a, int b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static nb_bpe *bpe_new(void) {
    return calloc(1, sizeof(nb_bpe));
}

/* Adds a merge of symbols l and r (strings). */
static int bpe_add(nb_bpe *b, const char *l, size_t ll, const char *r, size_t rl) {
    if (b->n + 1 > b->cap) {
        int cap = b->cap ? b->cap * 2 : 1024;
        int *L = realloc(b->left, (size_t)cap * sizeof(int));
        if (!L) return -1;
        b->left = L;
        int *R = realloc(b->right, (size_t)cap * sizeof(int));
        if (!R) return -1;
        b->right = R;
        int *M = realloc(b->merged, (size_t)cap * sizeof(int));
        if (!M) return -1;
        b->merged = M;
        b->cap = cap;
    }
    int a = sym_intern(&b->sym, l, ll), c = sym_intern(&b->sym, r, rl);
    if (a < 0 || c < 0) return -1;
    char *cat = malloc(ll + rl + 1);
    if (!cat) return -1;
    memcpy(cat, l, ll);
    memcpy(cat + ll, r, rl);
    int m = sym_intern(&b->sym, cat, ll + rl);
    free(cat);
    if (m < 0) return -1;
    if (m >= b->norigin) {
        int cap = b->sym.cap > m ? b->sym.cap : m + 1;
        int *o = realloc(b->origin, (size_t)cap * sizeof *o);
        if (!o) return -1;
        for (int i = b->norigin; i < cap; i++)
            o[i] = -1;
        b->origin = o;
        b->norigin = cap;
    }
    if (b->origin[m] < 0) b->origin[m] = b->n;
    b->left[b->n] = a;
    b->right[b->n] = c;
    b->merged[b->n] = m;
    if (pmap_get(&b->rank, pkey(a, c)) < 0 && pmap_put(&b->rank, pkey(a, c), b->n)) return -1;
    b->n++;
    return 0;
}

int nb_bpe_size(const nb_bpe *b) {
    return b->n;
}

void nb_bpe_merge(const nb_bpe *b, int i, const char **left, const char **right) {
    *left = b->sym.str[b->left[i]];
    *right = b->sym.str[b->right[i]];
}

void nb_bpe_free(nb_bpe *b) {
    if (!b) return;
    sym_free(&b->sym);
    free(b->left);
    free(b->right);
    free(b->merged);
    free(b->origin);
    pmap_free(&b->rank);
    smap_free(&b->cache);
    for (int i = 0; i < b->ncached; i++)
        free(b->cached[i]);
    free(b->cached);
    free(b);
}

char *nb_bpe_text(const nb_bpe *b, size_t *len) {
    size_t cap = 32;
    for (int i = 0; i < b->n; i++)
        cap += strlen(b->sym.str[b->left[i]]) + strlen(b->sym.str[b->right[i]]) + 2;
    char *text = malloc(cap);
    if (!text) return NULL;
    size_t at = (size_t)snprintf(text, cap, "#version: 0.2\n");
    for (int i = 0; i < b->n; i++)
        at += (size_t)snprintf(text + at, cap - at, "%s %s\n", b->sym.str[b->left[i]],
                               b->sym.str[b->right[i]]);
    *len = at;
    return text;
}

/* Writes text to path atomically. */
int nb_bpe_write(const nb_bpe *b, const char *path, nb_err *err) {
    size_t at;
    char *text = nb_bpe_text(b, &at);
    if (!text) return nb_errf(err, "out of memory");
    int rc = nb_write_atomic(path, text, at, err);
    free(text);
    return rc;
}

#define MAX_CODES (1 << 22)

/* The line of buf[0..n) that starts at *i (without its '\n', length *len), advancing *i past
 * it; NULL at the end. */
static const char *next_line(const char *buf, size_t n, size_t *i, size_t *len) {
    if (*i >= n) return NULL;
    const char *s = buf + *i;
    const char *nl = memchr(s, '\n', n - *i);
    *len = nl ? (size_t)(nl - s) : n - *i;
    *i += *len + (nl ? 1 : 0);
    return s;
}

nb_bpe *nb_bpe_parse(const char *buf, size_t n, const char *name, nb_err *err) {
    nb_bpe *b = bpe_new();
    if (!b) {
        nb_errf(err, "out of memory");
        return NULL;
    }
    size_t i = 0, len;
    long lineno = 0;
    const char *s;
    while ((s = next_line(buf, n, &i, &len))) {
        lineno++;
        if (len == 0) continue;
        if (lineno == 1 && len >= 9 && memcmp(s, "#version:", 9) == 0) continue;
        const char *sp = memchr(s, ' ', len);
        if (!sp || sp == s || sp == s + len - 1 ||
            memchr(sp + 1, ' ', len - (size_t)(sp - s) - 1) || memchr(s, '\0', len)) {
            nb_errf(err, "'%s' line %ld is not a merge (two symbols separated by one space)", name,
                    lineno);
            nb_hintf(err, "delete the file: it is rebuilt from the training text");
            nb_bpe_free(b);
            return NULL;
        }
        if (b->n >= MAX_CODES) {
            nb_errf(err, "'%s' has more than %d merges", name, MAX_CODES);
            nb_bpe_free(b);
            return NULL;
        }
        size_t ll = (size_t)(sp - s);
        if (bpe_add(b, s, ll, sp + 1, len - ll - 1)) {
            nb_errf(err, "out of memory reading '%s'", name);
            nb_bpe_free(b);
            return NULL;
        }
    }
    return b;
}

/* Reads a whole file (at most max bytes). */
static char *slurp(const char *path, size_t max, size_t *len, nb_err *err) {
    char *buf = NULL;
    if (nb_read_file(path, max, 0, &buf, len, err)) return NULL;
    return buf;
}

nb_bpe *nb_bpe_read(const char *path, nb_err *err) {
    size_t n;
    char *buf = slurp(path, (size_t)1 << 28, &n, err);
    if (!buf) return NULL;
    nb_bpe *b = nb_bpe_parse(buf, n, path, err);
    free(buf);
    return b;
}

/* ---- learning -------------------------------------------------------------------------------- */

struct nb_wordcount {
    smap map; /* word -> index */
    char **word;
    long *count;
    int n, cap;
};

nb_wordcount *nb_wordcount_new(void) {
    return calloc(1, sizeof(nb_wordcount));
}

int nb_wordcount_add(nb_wordcount *w, const char *word, long count) {
    size_t len = strlen(word);
    if (!len) return 0;
    int i = smap_get(&w->map, word, len);
    if (i >= 0) {
        w->count[i] += count;
        return 0;
    }
    if (w->n + 1 > w->cap) {
        int cap = w->cap ? w->cap * 2 : 1024;
        char **p = realloc(w->word, (size_t)cap * sizeof *p);
        if (!p) return -1;
        w->word = p;
        long *c = realloc(w->count, (size_t)cap * sizeof *c);
        if (!c) return -1;
        w->count = c;
        w->cap = cap;
    }
    char *k = smap_put(&w->map, word, len, w->n);
    if (!k) return -1;
    w->word[w->n] = k;
    w->count[w->n++] = count;
    return 0;
}

void nb_wordcount_free(nb_wordcount *w) {
    if (!w) return;
    smap_free(&w->map);
    free(w->word);
    free(w->count);
    free(w);
}

/* Splits word into symbol ids (UTF-8 characters, the last with "</w>"). Returns the count or
 * -1 when out of memory. */
static int split_word(symtab *t, const char *word, int *out) {
    size_t len = strlen(word), i = 0;
    int n = 0;
    char tmp[16];
    while (i < len) {
        size_t k = u8len((const unsigned char *)word + i, len - i);
        int id;
        if (i + k == len) {
            memcpy(tmp, word + i, k);
            memcpy(tmp + k, EOW, 4);
            id = sym_intern(t, tmp, k + 4);
        } else {
            id = sym_intern(t, word + i, k);
        }
        if (id < 0) return -1;
        out[n++] = id;
        i += k;
    }
    return n;
}

typedef struct lword {
    int *sym;
    int len;
    long count;
    int stamp;
} lword;

typedef struct lpair {
    int a, b;
    long count;
    int *words; /* word ids holding the pair (maybe stale, maybe repeated) */
    int nw, cw;
    int stamp;
} lpair;

typedef struct hent {
    long count;
    int pair;
} hent;

typedef struct learner {
    symtab *sym;
    lword *w;
    int nw;
    lpair *p;
    int np, cp;
    pmap idx;
    hent *heap;
    size_t nh, ch;
} learner;

/* 1 when x ranks above y: count, then the pair's strings greatest first. */
static int hent_above(const learner *L, hent x, hent y) {
    if (x.count != y.count) return x.count > y.count;
    const lpair *a = &L->p[x.pair], *b = &L->p[y.pair];
    int c = strcmp(L->sym->str[a->a], L->sym->str[b->a]);
    if (c) return c > 0;
    return strcmp(L->sym->str[a->b], L->sym->str[b->b]) > 0;
}

static int heap_push(learner *L, int pair) {
    if (L->nh + 1 > L->ch) {
        size_t cap = L->ch ? L->ch * 2 : 4096;
        hent *h = realloc(L->heap, cap * sizeof *h);
        if (!h) return -1;
        L->heap = h;
        L->ch = cap;
    }
    hent e = {L->p[pair].count, pair};
    size_t i = L->nh++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!hent_above(L, e, L->heap[up])) break;
        L->heap[i] = L->heap[up];
        i = up;
    }
    L->heap[i] = e;
    return 0;
}

static hent heap_pop(learner *L) {
    hent top = L->heap[0], last = L->heap[--L->nh];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= L->nh) break;
        if (c + 1 < L->nh && hent_above(L, L->heap[c + 1], L->heap[c])) c++;
        if (!hent_above(L, L->heap[c], last)) break;
        L->heap[i] = L->heap[c];
        i = c;
    }
    if (L->nh) L->heap[i] = last;
    return top;
}

/* The pair (a, b), created when absent. */
static int pair_get(learner *L, int a, int b) {
    int i = pmap_get(&L->idx, pkey(a, b));
    if (i >= 0) return i;
    if (L->np + 1 > L->cp) {
        int cap = L->cp ? L->cp * 2 : 4096;
        lpair *p = realloc(L->p, (size_t)cap * sizeof *p);
        if (!p) return -1;
        L->p = p;
        L->cp = cap;
    }
    memset(&L->p[L->np], 0, sizeof L->p[0]);
    L->p[L->np].a = a;
    L->p[L->np].b = b;
    L->p[L->np].stamp = -1;
    if (pmap_put(&L->idx, pkey(a, b), L->np)) return -1;
    return L->np++;
}

static int pair_addword(lpair *p, int w) {
    if (p->nw && p->words[p->nw - 1] == w) return 0;
    if (p->nw + 1 > p->cw) {
        int cap = p->cw ? p->cw * 2 : 4;
        int *x = realloc(p->words, (size_t)cap * sizeof *x);
        if (!x) return -1;
        p->words = x;
        p->cw = cap;
    }
    p->words[p->nw++] = w;
    return 0;
}

nb_bpe *nb_bpe_learn(const nb_wordcount *wc, int merges, int min_freq, nb_err *err) {
    nb_bpe *b = bpe_new();
    learner L = {0};
    int *changed = NULL, nchanged = 0, cchanged = 0, *copy = NULL;
    if (!b) goto oom;
    symtab *sym = &b->sym;
    L.sym = sym;
    L.nw = wc->n;
    L.w = calloc((size_t)(wc->n ? wc->n : 1), sizeof *L.w);
    if (!L.w) goto oom;
    for (int i = 0; i < wc->n; i++) {
        size_t len = strlen(wc->word[i]);
        L.w[i].sym = malloc((len + 1) * sizeof(int));
        if (!L.w[i].sym) goto oom;
        L.w[i].len = split_word(sym, wc->word[i], L.w[i].sym);
        if (L.w[i].len < 0) goto oom;
        L.w[i].count = wc->count[i];
        L.w[i].stamp = -1;
        for (int j = 0; j + 1 < L.w[i].len; j++) {
            int p = pair_get(&L, L.w[i].sym[j], L.w[i].sym[j + 1]);
            if (p < 0 || pair_addword(&L.p[p], i)) goto oom;
            L.p[p].count += L.w[i].count;
        }
    }
    for (int p = 0; p < L.np; p++)
        if (heap_push(&L, p)) goto oom;
    for (int m = 0; m < merges && L.nh > 0;) {
        hent top = heap_pop(&L);
        lpair *P = &L.p[top.pair];
        if (top.count != P->count || P->count <= 0) continue; /* stale */
        if (P->count < min_freq) break;
        int a = P->a, c = P->b, pi = top.pair;
        const char *as = sym->str[a], *cs = sym->str[c];
        if (bpe_add(b, as, strlen(as), cs, strlen(cs))) goto oom;
        int merged = b->merged[b->n - 1];
        /* the word list may grow while we walk it (not for this pair, but realloc moves
         * L.p): walk a copy */
        int nw = P->nw;
        int *nc = realloc(copy, (size_t)nw * sizeof *copy);
        if (!nc) goto oom;
        copy = nc;
        memcpy(copy, P->words, (size_t)nw * sizeof *copy);
        nchanged = 0;
        for (int k = 0; k < nw; k++) {
            lword *W = &L.w[copy[k]];
            if (W->stamp == m) continue;
            W->stamp = m;
            int has = 0;
            for (int j = 0; j + 1 < W->len && !has; j++)
                has = W->sym[j] == a && W->sym[j + 1] == c;
            if (!has) continue;
            /* remove the word's pairs, merge, add them back */
            for (int j = 0; j + 1 < W->len; j++) {
                int q = pmap_get(&L.idx, pkey(W->sym[j], W->sym[j + 1]));
                L.p[q].count -= W->count;
                if (L.p[q].stamp != m) {
                    L.p[q].stamp = m;
                    if (nchanged + 1 > cchanged) {
                        int cap = cchanged ? cchanged * 2 : 1024;
                        int *x = realloc(changed, (size_t)cap * sizeof *x);
                        if (!x) goto oom;
                        changed = x;
                        cchanged = cap;
                    }
                    changed[nchanged++] = q;
                }
            }
            int o = 0;
            for (int j = 0; j < W->len;) {
                if (j + 1 < W->len && W->sym[j] == a && W->sym[j + 1] == c) {
                    W->sym[o++] = merged;
                    j += 2;
                } else {
                    W->sym[o++] = W->sym[j++];
                }
            }
            W->len = o;
            for (int j = 0; j + 1 < W->len; j++) {
                int q = pair_get(&L, W->sym[j], W->sym[j + 1]);
                if (q < 0 || pair_addword(&L.p[q], copy[k])) goto oom;
                L.p[q].count += W->count;
                if (L.p[q].stamp != m) {
                    L.p[q].stamp = m;
                    if (nchanged + 1 > cchanged) {
                        int cap = cchanged ? cchanged * 2 : 1024;
                        int *x = realloc(changed, (size_t)cap * sizeof *x);
                        if (!x) goto oom;
                        changed = x;
                        cchanged = cap;
                    }
                    changed[nchanged++] = q;
                }
            }
        }
        free(L.p[pi].words);
        L.p[pi].words = NULL;
        L.p[pi].nw = L.p[pi].cw = 0;
        L.p[pi].count = 0;
        for (int k = 0; k < nchanged; k++)
            if (L.p[changed[k]].count > 0 && heap_push(&L, changed[k])) goto oom;
        m++;
    }
    goto done;
oom:
    nb_errf(err, "out of memory learning BPE");
    nb_bpe_free(b);
    b = NULL;
done:
    for (int i = 0; i < L.nw; i++)
        free(L.w[i].sym);
    free(L.w);
    for (int p = 0; p < L.np; p++)
        free(L.p[p].words);
    free(L.p);
    pmap_free(&L.idx);
    free(L.heap);
    free(changed);
    free(copy);
    return b;
}

/* ---- applying -------------------------------------------------------------------------------- */

/* Segments word into pieces joined by ' ' (malloc'ed), or NULL when out of memory. Every
 * symbol is a contiguous span of the word: its id (-1 when the symbol is not in the codes) and
 * where it ends. */
static char *segment(nb_bpe *b, const char *word) {
    size_t len = strlen(word);
    int *s = malloc((len + 1) * sizeof(int));
    size_t *end = malloc((len + 1) * sizeof(size_t));
    char *out = malloc(2 * len + 1);
    if (!s || !end || !out) {
        free(out);
        out = NULL;
        goto done;
    }
    int n = 0;
    char tmp[16];
    for (size_t i = 0; i < len;) {
        size_t k = u8len((const unsigned char *)word + i, len - i);
        if (i + k == len) {
            memcpy(tmp, word + i, k);
            memcpy(tmp + k, EOW, 4);
            s[n] = smap_get(&b->sym.map, tmp, k + 4);
        } else {
            s[n] = smap_get(&b->sym.map, word + i, k);
        }
        i += k;
        end[n++] = i;
    }
    while (n > 1) {
        int best = -1;
        for (int j = 0; j + 1 < n; j++) {
            if (s[j] < 0 || s[j + 1] < 0) continue;
            int r = pmap_get(&b->rank, pkey(s[j], s[j + 1]));
            if (r >= 0 && (best < 0 || r < best)) best = r;
        }
        if (best < 0) break;
        int a = b->left[best], c = b->right[best], m = b->merged[best];
        int o = 0;
        for (int j = 0; j < n;) {
            if (j + 1 < n && s[j] == a && s[j + 1] == c) {
                s[o] = m;
                end[o++] = end[j + 1];
                j += 2;
            } else {
                s[o] = s[j];
                end[o++] = end[j++];
            }
        }
        n = o;
    }
    size_t at = 0, from = 0;
    for (int j = 0; j < n; j++) {
        if (j > 0) out[at++] = ' ';
        memcpy(out + at, word + from, end[j] - from);
        at += end[j] - from;
        from = end[j];
    }
    out[at] = '\0';
done:
    free(s);
    free(end);
    return out;
}

int nb_bpe_apply_word(nb_bpe *b, const char *word, nb_toks *out, nb_err *err) {
    size_t len = strlen(word);
    if (!len) return 0;
    int i = smap_get(&b->cache, word, len);
    if (i < 0) {
        char *seg = segment(b, word);
        if (!seg) return nb_errf(err, "out of memory");
        if (b->ncached + 1 > b->capcached) {
            int cap = b->capcached ? b->capcached * 2 : 1024;
            char **p = realloc(b->cached, (size_t)cap * sizeof *p);
            if (!p) {
                free(seg);
                return nb_errf(err, "out of memory");
            }
            b->cached = p;
            b->capcached = cap;
        }
        if (!smap_put(&b->cache, word, len, b->ncached)) {
            free(seg);
            return nb_errf(err, "out of memory");
        }
        b->cached[b->ncached] = seg;
        i = b->ncached++;
    }
    const char *seg = b->cached[i];
    for (;;) {
        const char *sp = strchr(seg, ' ');
        size_t pl = sp ? (size_t)(sp - seg) : strlen(seg);
        if (sp) {
            char *tmp = malloc(pl + 3);
            if (!tmp) return nb_errf(err, "out of memory");
            memcpy(tmp, seg, pl);
            memcpy(tmp + pl, "@@", 2);
            int rc = toks_push(out, tmp, pl + 2);
            free(tmp);
            if (rc) return nb_errf(err, "out of memory");
        } else if (toks_push(out, seg, pl)) {
            return nb_errf(err, "out of memory");
        }
        if (!sp) break;
        seg = sp + 1;
    }
    return 0;
}

int nb_bpe_encode_line(nb_bpe *b, const char *line, size_t len, nb_toks *out, long *reserved,
                       nb_err *err) {
    nb_toks words = {0};
    if (nb_pretok(line, len, &words, reserved, err)) return -1;
    toks_reset(out);
    for (int i = 0; i < words.n; i++)
        if (nb_bpe_apply_word(b, words.tok[i], out, err)) {
            nb_toks_free(&words);
            return -1;
        }
    toks_fix(out);
    nb_toks_free(&words);
    return 0;
}

char *nb_bpe_decode(char *const *piece, int n) {
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(piece[i]) + 1;
    char *buf = malloc(cap);
    char **tok = malloc((size_t)(n ? n : 1) * sizeof *tok);
    char *out = NULL;
    if (!buf || !tok) goto done;
    size_t at = 0;
    int nt = 0, open = 0;
    for (int i = 0; i < n; i++) {
        size_t pl = strlen(piece[i]);
        int cont = pl >= 2 && memcmp(piece[i] + pl - 2, "@@", 2) == 0;
        if (cont) pl -= 2;
        if (!open) tok[nt++] = buf + at;
        memcpy(buf + at, piece[i], pl);
        at += pl;
        open = cont;
        if (!cont) buf[at++] = '\0';
    }
    if (open) buf[at++] = '\0';
    out = nb_detok(tok, nt);
done:
    free(buf);
    free(tok);
    return out;
}

/* ---- vocabulary ------------------------------------------------------------------------------ */

static const char *const special[NB_NSPECIAL] = {"<pad>", "<unk>", "<bos>", "<eos>"};

struct nb_vocab {
    smap map; /* piece -> id (after finish) or index (while counting) */
    char **str;
    long *count;
    int n, cap; /* pieces (ids from NB_NSPECIAL) */
    int finished;
};

nb_vocab *nb_vocab_new(void) {
    return calloc(1, sizeof(nb_vocab));
}

static int vocab_add(nb_vocab *v, const char *piece, size_t len, long count) {
    if (v->n + 1 > v->cap) {
        int cap = v->cap ? v->cap * 2 : 1024;
        char **p = realloc(v->str, (size_t)cap * sizeof *p);
        if (!p) return -1;
        v->str = p;
        long *c = realloc(v->count, (size_t)cap * sizeof *c);
        if (!c) return -1;
        v->count = c;
        v->cap = cap;
    }
    char *k = smap_put(&v->map, piece, len, v->n + NB_NSPECIAL);
    if (!k) return -1;
    v->str[v->n] = k;
    v->count[v->n++] = count;
    return 0;
}

int nb_vocab_count(nb_vocab *v, const char *piece, nb_err *err) {
    size_t len = strlen(piece);
    int i = smap_get(&v->map, piece, len);
    if (i >= 0) {
        v->count[i - NB_NSPECIAL]++;
        return 0;
    }
    if (vocab_add(v, piece, len, 1)) return nb_errf(err, "out of memory");
    return 0;
}

static const nb_vocab *sort_v;
static int by_count(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (sort_v->count[a] != sort_v->count[b]) return sort_v->count[a] > sort_v->count[b] ? -1 : 1;
    return strcmp(sort_v->str[a], sort_v->str[b]);
}

int nb_vocab_finish(nb_vocab *v, nb_err *err) {
    int *ord = malloc((size_t)(v->n ? v->n : 1) * sizeof *ord);
    char **str = malloc((size_t)(v->n ? v->n : 1) * sizeof *str);
    long *cnt = malloc((size_t)(v->n ? v->n : 1) * sizeof *cnt);
    if (!ord || !str || !cnt) {
        free(ord);
        free(str);
        free(cnt);
        return nb_errf(err, "out of memory");
    }
    for (int i = 0; i < v->n; i++)
        ord[i] = i;
    sort_v = v;
    qsort(ord, (size_t)v->n, sizeof *ord, by_count);
    for (int i = 0; i < v->n; i++) {
        str[i] = v->str[ord[i]];
        cnt[i] = v->count[ord[i]];
    }
    for (size_t j = 0; j < v->map.cap; j++)
        if (v->map.key[j]) v->map.val[j] -= NB_NSPECIAL; /* the index in the old order */
    int *pos = malloc((size_t)(v->n ? v->n : 1) * sizeof *pos);
    if (!pos) {
        free(ord);
        free(str);
        free(cnt);
        return nb_errf(err, "out of memory");
    }
    for (int i = 0; i < v->n; i++)
        pos[ord[i]] = i;
    for (size_t j = 0; j < v->map.cap; j++)
        if (v->map.key[j]) v->map.val[j] = pos[v->map.val[j]] + NB_NSPECIAL;
    free(v->str);
    free(v->count);
    v->str = str;
    v->count = cnt;
    v->cap = v->n;
    v->finished = 1;
    free(ord);
    free(pos);
    return 0;
}

int nb_vocab_size(const nb_vocab *v) {
    return v->n + NB_NSPECIAL;
}

int nb_vocab_id(const nb_vocab *v, const char *piece) {
    int i = smap_get(&v->map, piece, strlen(piece));
    return i >= 0 ? i : NB_UNK;
}

const char *nb_vocab_str(const nb_vocab *v, int id) {
    if (id < 0 || id >= v->n + NB_NSPECIAL) return NULL;
    return id < NB_NSPECIAL ? special[id] : v->str[id - NB_NSPECIAL];
}

char *nb_vocab_text(const nb_vocab *v, size_t *len) {
    size_t cap = 1;
    for (int i = 0; i < v->n; i++)
        cap += strlen(v->str[i]) + 1;
    char *text = malloc(cap);
    if (!text) return NULL;
    size_t at = 0;
    for (int i = 0; i < v->n; i++) {
        size_t l = strlen(v->str[i]);
        memcpy(text + at, v->str[i], l);
        at += l;
        text[at++] = '\n';
    }
    *len = at;
    return text;
}

int nb_vocab_write(const nb_vocab *v, const char *path, nb_err *err) {
    size_t at;
    char *text = nb_vocab_text(v, &at);
    if (!text) return nb_errf(err, "out of memory");
    int rc = nb_write_atomic(path, text, at, err);
    free(text);
    return rc;
}

nb_vocab *nb_vocab_parse(const char *buf, size_t n, const char *name, nb_err *err) {
    nb_vocab *v = nb_vocab_new();
    if (!v) {
        nb_errf(err, "out of memory");
        return NULL;
    }
    size_t i = 0, len;
    long lineno = 0;
    const char *s;
    while ((s = next_line(buf, n, &i, &len))) {
        lineno++;
        if (len == 0 || memchr(s, '\0', len) || smap_get(&v->map, s, len) >= 0) {
            nb_errf(err, "'%s' line %ld is %s", name, lineno,
                    len == 0 ? "empty" : "not a new piece");
            nb_hintf(err, "delete the file: it is rebuilt from the training text");
            nb_vocab_free(v);
            return NULL;
        }
        if (vocab_add(v, s, len, 0)) {
            nb_errf(err, "out of memory reading '%s'", name);
            nb_vocab_free(v);
            return NULL;
        }
    }
    v->finished = 1;
    return v;
}

nb_vocab *nb_vocab_read(const char *path, nb_err *err) {
    size_t n;
    char *buf = slurp(path, (size_t)1 << 28, &n, err);
    if (!buf) return NULL;
    nb_vocab *v = nb_vocab_parse(buf, n, path, err);
    free(buf);
    return v;
}

void nb_vocab_free(nb_vocab *v) {
    if (!v) return;
    smap_free(&v->map);
    free(v->str);
    free(v->count);
    free(v);
}

static int push_id(int **ids, int *n, int *cap, int id) {
    if (*n + 1 > *cap) {
        int c = *cap ? *cap * 2 : 1024;
        int *x = realloc(*ids, (size_t)c * sizeof *x);
        if (!x) return -1;
        *ids = x;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

/* Looks up a piece; one the vocabulary lacks (a merge never seen whole in the training text's
 * segmentation) is split back into the two symbols its merge joined, recursively, as
 * subword-nmt's apply_bpe --vocabulary does; a single character the vocabulary lacks is <unk>. */
static int encode_piece(const nb_vocab *v, const nb_bpe *b, const char *piece, int **ids, int *n,
                        int *cap, long *unk, int depth) {
    int id = nb_vocab_id(v, piece);
    size_t pl = strlen(piece);
    if (id != NB_UNK || depth > 64) {
        if (id == NB_UNK && unk) (*unk)++;
        return push_id(ids, n, cap, id);
    }
    int cont = pl >= 2 && memcmp(piece + pl - 2, "@@", 2) == 0;
    char *sym = malloc(pl + 5);
    if (!sym) return -1;
    size_t sl = cont ? pl - 2 : pl;
    memcpy(sym, piece, sl);
    if (!cont) memcpy(sym + sl, EOW, 4), sl += 4;
    int sid = smap_get(&b->sym.map, sym, sl);
    free(sym);
    int m = sid >= 0 && sid < b->norigin ? b->origin[sid] : -1;
    if (m < 0) {
        if (unk) (*unk)++;
        return push_id(ids, n, cap, NB_UNK);
    }
    const char *l = b->sym.str[b->left[m]], *r = b->sym.str[b->right[m]];
    size_t ll = strlen(l), rl = strlen(r);
    char *lp = malloc(ll + 3), *rp = malloc(rl + 3);
    int rc = -1;
    if (lp && rp) {
        memcpy(lp, l, ll);
        memcpy(lp + ll, "@@", 3);
        memcpy(rp, r, rl + 1);
        if (rl >= 4 && memcmp(r + rl - 4, EOW, 4) == 0)
            rp[rl - 4] = '\0';
        else
            memcpy(rp + rl, "@@", 3);
        rc = encode_piece(v, b, lp, ids, n, cap, unk, depth + 1);
        if (!rc) rc = encode_piece(v, b, rp, ids, n, cap, unk, depth + 1);
    }
    free(lp);
    free(rp);
    return rc;
}

int nb_vocab_encode_line(const nb_vocab *v, nb_bpe *b, const char *line, size_t len, int **ids,
                         int *n, int *cap, long *unk, long *reserved, nb_err *err) {
    nb_toks p = {0};
    if (nb_bpe_encode_line(b, line, len, &p, reserved, err)) return -1;
    for (int i = 0; i < p.n; i++)
        if (encode_piece(v, b, p.tok[i], ids, n, cap, unk, 0)) {
            nb_toks_free(&p);
            return nb_errf(err, "out of memory");
        }
    nb_toks_free(&p);
    return 0;
}

char *nb_vocab_decode(const nb_vocab *v, const int *ids, int n) {
    char **p = malloc((size_t)(n ? n : 1) * sizeof *p);
    if (!p) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] == NB_EOS) break;
        if (ids[i] == NB_PAD || ids[i] == NB_BOS) continue;
        p[k++] = ids[i] == NB_UNK || !nb_vocab_str(v, ids[i]) ? (char *)NB_REPLACE
                                                              : (char *)nb_vocab_str(v, ids[i]);
    }
    char *out = nb_bpe_decode(p, k);
    free(p);
    return out;
}
