/* datasets/pickle.c — a strict reader for the pickle subset in datasets/pickle.h.
 *
 * The machine keeps a stack of items (mark, int, string, list, dict) and a memo, as pickle's own
 * does. Lists of ints store their elements in one shared token pool: a list's elements must be
 * appended while it is the newest list receiving ints (Python writes each inner list completely
 * before the next), which keeps every inner list contiguous; any other order is refused. */
#include "datasets/pickle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/file.h"

enum { IT_MARK, IT_INT, IT_STR, IT_LIST, IT_DICT };

typedef struct item {
    int kind;
    int64_t v;   /* int value; string offset in the char pool; object index */
    int64_t len; /* string length */
} item;

/* A list: of ints (start/len in the pool), of lists (ids), or still empty. */
enum { L_EMPTY, L_INTS, L_LISTS };
typedef struct list {
    int kind;
    int64_t start, len; /* L_INTS */
    int64_t *ids;       /* L_LISTS */
    int64_t nids, cap;
} list;

typedef struct dict {
    int64_t *koff, *klen, *val;
    int64_t n, cap;
} dict;

typedef struct vm {
    const char *name;
    nb_err *err;
    item *st;
    int64_t nst, capst;
    item *memo;
    int64_t nmemo;
    list *lists;
    int64_t nlists, caplists;
    dict *dicts;
    int64_t ndicts, capdicts;
    int32_t *pool;
    int64_t npool, cappool;
    int64_t growing; /* the list whose ints end the pool, or -1 */
    char *chars;
    int64_t nchars, capchars;
} vm;

static int grow(void **p, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int bad(vm *m, size_t at, const char *what) {
    nb_errf(m->err, "'%s' is not a pickle this reader accepts: %s at byte %zu", m->name, what, at);
    nb_hintf(m->err, "expected a list of lists of ints or a dict of str -> int (pickle protocol "
                     "0-2); re-download with `normbench fetch cnn-top4`");
    return -1;
}

static int oom(vm *m) {
    nb_errf(m->err, "out of memory reading '%s'", m->name);
    return -1;
}

static int push(vm *m, item it) {
    if (grow((void **)&m->st, &m->capst, m->nst + 1, sizeof(item))) return oom(m);
    m->st[m->nst++] = it;
    return 0;
}

/* Index of the topmost mark, or -1. */
static int64_t find_mark(const vm *m) {
    for (int64_t i = m->nst - 1; i >= 0; i--)
        if (m->st[i].kind == IT_MARK) return i;
    return -1;
}

static int new_list(vm *m, size_t at) {
    if (grow((void **)&m->lists, &m->caplists, m->nlists + 1, sizeof(list))) return oom(m);
    memset(&m->lists[m->nlists], 0, sizeof(list));
    (void)at;
    return push(m, (item){IT_LIST, m->nlists++, 0});
}

static int new_dict(vm *m) {
    if (grow((void **)&m->dicts, &m->capdicts, m->ndicts + 1, sizeof(dict))) return oom(m);
    memset(&m->dicts[m->ndicts], 0, sizeof(dict));
    return push(m, (item){IT_DICT, m->ndicts++, 0});
}

/* Appends items it[0..n) to list object li. */
static int append(vm *m, int64_t li, const item *it, int64_t n, size_t at) {
    list *L = &m->lists[li];
    for (int64_t i = 0; i < n; i++) {
        if (it[i].kind == IT_INT) {
            if (L->kind == L_LISTS) return bad(m, at, "a list mixing ints and lists");
            if (L->kind == L_EMPTY) {
                if (m->growing >= 0 && m->lists[m->growing].kind == L_INTS &&
                    m->lists[m->growing].start + m->lists[m->growing].len != m->npool)
                    return bad(m, at, "interleaved lists");
                L->kind = L_INTS;
                L->start = m->npool;
                m->growing = li;
            } else if (m->growing != li || L->start + L->len != m->npool) {
                return bad(m, at, "appends to an earlier list of ints");
            }
            if (grow((void **)&m->pool, &m->cappool, m->npool + 1, sizeof(int32_t))) return oom(m);
            m->pool[m->npool++] = (int32_t)it[i].v;
            L->len++;
        } else if (it[i].kind == IT_LIST) {
            if (L->kind == L_INTS) return bad(m, at, "a list mixing ints and lists");
            if (it[i].v == li) return bad(m, at, "a list containing itself");
            const list *E = &m->lists[it[i].v];
            if (E->kind == L_LISTS) return bad(m, at, "lists nested deeper than two levels");
            L->kind = L_LISTS;
            if (grow((void **)&L->ids, &L->cap, L->nids + 1, sizeof(int64_t))) return oom(m);
            L->ids[L->nids++] = it[i].v;
        } else {
            return bad(m, at, "a list element that is not an int or a list");
        }
    }
    return 0;
}

static int setitems(vm *m, int64_t di, const item *it, int64_t n, size_t at) {
    if (n % 2) return bad(m, at, "an odd number of dict items");
    dict *D = &m->dicts[di];
    for (int64_t i = 0; i < n; i += 2) {
        if (it[i].kind != IT_STR) return bad(m, at, "a dict key that is not a string");
        if (it[i + 1].kind != IT_INT) return bad(m, at, "a dict value that is not an int");
        if (D->n + 1 > D->cap) {
            int64_t c = D->cap ? D->cap * 2 : 64;
            int64_t *a = realloc(D->koff, (size_t)c * sizeof(int64_t));
            if (!a) return oom(m);
            D->koff = a;
            a = realloc(D->klen, (size_t)c * sizeof(int64_t));
            if (!a) return oom(m);
            D->klen = a;
            a = realloc(D->val, (size_t)c * sizeof(int64_t));
            if (!a) return oom(m);
            D->val = a;
            D->cap = c;
        }
        D->koff[D->n] = it[i].v;
        D->klen[D->n] = it[i].len;
        D->val[D->n] = it[i + 1].v;
        D->n++;
    }
    return 0;
}

/* Adds bytes to the char pool, NUL-terminated; returns the string item. */
static int add_str(vm *m, const char *s, int64_t len, item *out) {
    if (grow((void **)&m->chars, &m->capchars, m->nchars + len + 1, 1)) return oom(m);
    memcpy(m->chars + m->nchars, s, (size_t)len);
    *out = (item){IT_STR, m->nchars, len};
    m->nchars += len + 1;
    m->chars[m->nchars - 1] = 0;
    return 0;
}

static void put_utf8(char *o, int64_t *k, uint32_t cp) {
    if (cp < 0x80) {
        o[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | (cp >> 6));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | (cp >> 12));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | (cp >> 18));
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes the text of a protocol-0 STRING ('...' or "..." with Python 2 escapes) or, with
 * unicode, a UNICODE line (raw-unicode-escape: \uXXXX and \UXXXXXXXX only). */
static int decode_text(vm *m, const char *s, int64_t n, int unicode, size_t at, item *out) {
    char *o = malloc((size_t)n * 4 + 1);
    if (!o) return oom(m);
    int64_t k = 0, i = 0, end = n;
    if (!unicode) {
        if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0]) {
            free(o);
            return bad(m, at, "a STRING that is not quoted");
        }
        i = 1;
        end = n - 1;
    }
    for (; i < end; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '\\') {
            o[k++] = (char)c;
            continue;
        }
        if (i + 1 >= end) goto fail;
        char e = s[++i];
        if (unicode) {
            int w = e == 'u' ? 4 : e == 'U' ? 8 : 0;
            if (!w) { /* raw-unicode-escape keeps other backslashes */
                o[k++] = '\\';
                o[k++] = e;
                continue;
            }
            if (i + w >= end) goto fail;
            uint32_t cp = 0;
            for (int j = 1; j <= w; j++) {
                int h = i + j < end ? hexval((unsigned char)s[i + j]) : -1;
                if (h < 0) goto fail;
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF) goto fail;
            put_utf8(o, &k, cp);
            i += w;
            continue;
        }
        switch (e) {
        case '\\':
            o[k++] = '\\';
            break;
        case '\'':
            o[k++] = '\'';
            break;
        case '"':
            o[k++] = '"';
            break;
        case 'n':
            o[k++] = '\n';
            break;
        case 't':
            o[k++] = '\t';
            break;
        case 'r':
            o[k++] = '\r';
            break;
        case 'x': {
            int h1 = i + 1 < end ? hexval((unsigned char)s[i + 1]) : -1;
            int h2 = i + 2 < end ? hexval((unsigned char)s[i + 2]) : -1;
            if (h1 < 0 || h2 < 0) goto fail;
            o[k++] = (char)(h1 * 16 + h2);
            i += 2;
            break;
        }
        default:
            goto fail;
        }
    }
    int rc = add_str(m, o, k, out);
    free(o);
    return rc;
fail:
    free(o);
    return bad(m, at, "a malformed escape in a string");
}

/* A decimal integer line ("123", "-4", with an optional trailing 'L' for LONG). */
static int parse_dec(const char *s, int64_t n, int allow_l, int64_t *v) {
    if (allow_l && n > 0 && s[n - 1] == 'L') n--;
    if (n < 1 || n > 19) return -1;
    int64_t i = 0, neg = 0, x = 0;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
        if (n == 1) return -1;
    }
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        x = x * 10 + (s[i] - '0');
    }
    *v = neg ? -x : x;
    return 0;
}

static int int_item(vm *m, int64_t v, size_t at) {
    if (v < 0 || v > INT32_MAX) return bad(m, at, "an int outside 0 .. 2^31-1");
    return push(m, (item){IT_INT, v, 0});
}

static void vm_free(vm *m) {
    free(m->st);
    free(m->memo);
    for (int64_t i = 0; i < m->nlists; i++)
        free(m->lists[i].ids);
    free(m->lists);
    for (int64_t i = 0; i < m->ndicts; i++) {
        free(m->dicts[i].koff);
        free(m->dicts[i].klen);
        free(m->dicts[i].val);
    }
    free(m->dicts);
    free(m->pool);
    free(m->chars);
}

void nb_pickle_free(nb_pickle *p) {
    free(p->off);
    free(p->tok);
    free(p->keys);
    free(p->koff);
    free(p->klen);
    free(p->val);
    memset(p, 0, sizeof *p);
}

/* Builds *out from the final item. */
static int finish(vm *m, const item *top, nb_pickle *out, size_t at) {
    if (top->kind == IT_LIST) {
        const list *L = &m->lists[top->v];
        if (L->kind == L_INTS) return bad(m, at, "a list of ints at the top (not of lists)");
        out->kind = NB_PICKLE_LISTS;
        out->n = L->nids;
        out->off = malloc(sizeof(int64_t) * (size_t)(L->nids + 1));
        int64_t total = 0;
        for (int64_t i = 0; i < L->nids; i++) {
            if (m->lists[L->ids[i]].kind == L_LISTS)
                return bad(m, at, "lists nested deeper than two levels");
            total += m->lists[L->ids[i]].len;
        }
        out->tok = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
        if (!out->off || !out->tok) return oom(m);
        int64_t k = 0;
        for (int64_t i = 0; i < L->nids; i++) {
            const list *E = &m->lists[L->ids[i]];
            out->off[i] = k;
            if (E->len) memcpy(out->tok + k, m->pool + E->start, sizeof(int32_t) * (size_t)E->len);
            k += E->len;
        }
        out->off[L->nids] = k;
        return 0;
    }
    if (top->kind == IT_DICT) {
        const dict *D = &m->dicts[top->v];
        out->kind = NB_PICKLE_DICT;
        out->n = D->n;
        int64_t total = 0;
        for (int64_t i = 0; i < D->n; i++)
            total += D->klen[i] + 1;
        out->keys = malloc((size_t)(total ? total : 1));
        out->koff = malloc(sizeof(int64_t) * (size_t)(D->n ? D->n : 1));
        out->klen = malloc(sizeof(int32_t) * (size_t)(D->n ? D->n : 1));
        out->val = malloc(sizeof(int32_t) * (size_t)(D->n ? D->n : 1));
        if (!out->keys || !out->koff || !out->klen || !out->val) return oom(m);
        int64_t k = 0;
        for (int64_t i = 0; i < D->n; i++) {
            out->koff[i] = k;
            out->klen[i] = (int32_t)D->klen[i];
            memcpy(out->keys + k, m->chars + D->koff[i], (size_t)D->klen[i] + 1);
            k += D->klen[i] + 1;
            out->val[i] = (int32_t)D->val[i];
        }
        return 0;
    }
    return bad(m, at, "a top-level object that is not a list or a dict");
}

/* Reads a little-endian unsigned integer of w bytes. */
static uint64_t le(const uint8_t *p, int w) {
    uint64_t v = 0;
    for (int i = w - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

int nb_pickle_parse(const uint8_t *buf, size_t n, const char *name, nb_pickle *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    vm m = {.name = name, .err = err, .growing = -1};
    size_t i = 0;
    int rc = -1;
#define NEED(k)                                                                                    \
    do {                                                                                           \
        if (n - i < (size_t)(k)) {                                                                 \
            bad(&m, i, "a truncated opcode");                                                      \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((x) != 0) goto out;                                                                    \
    } while (0)
    while (i < n) {
        const size_t at = i;
        const uint8_t op = buf[i++];
        /* the text of a newline-terminated argument */
        const char *line = (const char *)buf + i;
        int64_t llen = -1;
        if (op == 'I' || op == 'L' || op == 'S' || op == 'V' || op == 'p' || op == 'g') {
            const uint8_t *nl = memchr(buf + i, '\n', n - i);
            if (!nl) {
                bad(&m, at, "a truncated line argument");
                goto out;
            }
            llen = (int64_t)(nl - (buf + i));
            i += (size_t)llen + 1;
        }
        switch (op) {
        case 0x80: /* PROTO */
            NEED(1);
            if (buf[i] > 2) {
                bad(&m, at, "pickle protocol above 2");
                goto out;
            }
            i++;
            break;
        case '.': { /* STOP */
            if (m.nst != 1 || (m.st[0].kind != IT_LIST && m.st[0].kind != IT_DICT)) {
                bad(&m, at, "a stack that does not end with one list or dict");
                goto out;
            }
            if (i != n) {
                bad(&m, i, "bytes after the end of the pickle");
                goto out;
            }
            TRY(finish(&m, &m.st[0], out, at));
            rc = 0;
            goto out;
        }
        case '(': /* MARK */
            TRY(push(&m, (item){IT_MARK, 0, 0}));
            break;
        case ']': /* EMPTY_LIST */
            TRY(new_list(&m, at));
            break;
        case '}': /* EMPTY_DICT */
            TRY(new_dict(&m));
            break;
        case 'l':   /* LIST: mark ... -> list */
        case 'd': { /* DICT */
            int64_t mk = find_mark(&m);
            if (mk < 0) {
                bad(&m, at, "LIST or DICT without a mark");
                goto out;
            }
            int64_t cnt = m.nst - mk - 1;
            item *tmp = malloc(sizeof(item) * (size_t)(cnt ? cnt : 1));
            if (!tmp) {
                oom(&m);
                goto out;
            }
            memcpy(tmp, m.st + mk + 1, sizeof(item) * (size_t)cnt);
            m.nst = mk;
            int r = op == 'l' ? new_list(&m, at) : new_dict(&m);
            if (r == 0)
                r = op == 'l' ? append(&m, m.st[m.nst - 1].v, tmp, cnt, at)
                              : setitems(&m, m.st[m.nst - 1].v, tmp, cnt, at);
            free(tmp);
            TRY(r);
            break;
        }
        case 'a': /* APPEND */
            if (m.nst < 2 || m.st[m.nst - 2].kind != IT_LIST) {
                bad(&m, at, "APPEND without a list");
                goto out;
            }
            TRY(append(&m, m.st[m.nst - 2].v, &m.st[m.nst - 1], 1, at));
            m.nst--;
            break;
        case 'e':   /* APPENDS */
        case 'u': { /* SETITEMS */
            int64_t mk = find_mark(&m);
            if (mk < 1 || m.st[mk - 1].kind != (op == 'e' ? IT_LIST : IT_DICT)) {
                bad(&m, at, op == 'e' ? "APPENDS without a list" : "SETITEMS without a dict");
                goto out;
            }
            int64_t cnt = m.nst - mk - 1;
            TRY(op == 'e' ? append(&m, m.st[mk - 1].v, m.st + mk + 1, cnt, at)
                          : setitems(&m, m.st[mk - 1].v, m.st + mk + 1, cnt, at));
            m.nst = mk;
            break;
        }
        case 's': /* SETITEM */
            if (m.nst < 3 || m.st[m.nst - 3].kind != IT_DICT) {
                bad(&m, at, "SETITEM without a dict");
                goto out;
            }
            TRY(setitems(&m, m.st[m.nst - 3].v, &m.st[m.nst - 2], 2, at));
            m.nst -= 2;
            break;
        case 'I': { /* INT (text; "I01"/"I00" are True/False) */
            int64_t v;
            if (parse_dec(line, llen, 0, &v)) {
                bad(&m, at, "a malformed INT");
                goto out;
            }
            TRY(int_item(&m, v, at));
            break;
        }
        case 'L': { /* LONG (text) */
            int64_t v;
            if (parse_dec(line, llen, 1, &v)) {
                bad(&m, at, "a malformed or too large LONG");
                goto out;
            }
            TRY(int_item(&m, v, at));
            break;
        }
        case 'J': /* BININT */
            NEED(4);
            TRY(int_item(&m, (int32_t)(uint32_t)le(buf + i, 4), at));
            i += 4;
            break;
        case 'K': /* BININT1 */
            NEED(1);
            TRY(int_item(&m, buf[i], at));
            i += 1;
            break;
        case 'M': /* BININT2 */
            NEED(2);
            TRY(int_item(&m, (int64_t)le(buf + i, 2), at));
            i += 2;
            break;
        case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
            NEED(1);
            int w = buf[i++];
            NEED(w);
            if (w > 8) {
                bad(&m, at, "a LONG1 wider than 8 bytes");
                goto out;
            }
            uint64_t u = w ? le(buf + i, w) : 0;
            if (w && w < 8 && (buf[i + w - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * w);
            i += (size_t)w;
            TRY(int_item(&m, (int64_t)u, at));
            break;
        }
        case 'S':   /* STRING (quoted text) */
        case 'V': { /* UNICODE (raw-unicode-escape text) */
            item s;
            TRY(decode_text(&m, line, llen, op == 'V', at, &s));
            TRY(push(&m, s));
            break;
        }
        case 'U':   /* SHORT_BINSTRING */
        case 'T':   /* BINSTRING */
        case 'X': { /* BINUNICODE */
            int w = op == 'U' ? 1 : 4;
            NEED(w);
            uint64_t len = le(buf + i, w);
            i += (size_t)w;
            NEED(len);
            item s;
            TRY(add_str(&m, (const char *)buf + i, (int64_t)len, &s));
            i += (size_t)len;
            TRY(push(&m, s));
            break;
        }
        case 'p':   /* PUT (text) */
        case 'q':   /* BINPUT */
        case 'r':   /* LONG_BINPUT */
        case 'g':   /* GET (text) */
        case 'h':   /* BINGET */
        case 'j': { /* LONG_BINGET */
            int64_t idx;
            if (op == 'p' || op == 'g') {
                if (parse_dec(line, llen, 0, &idx) || idx < 0) {
                    bad(&m, at, "a malformed memo index");
                    goto out;
                }
            } else {
                int w = op == 'q' || op == 'h' ? 1 : 4;
                NEED(w);
                idx = (int64_t)le(buf + i, w);
                i += (size_t)w;
            }
            /* memo indices are dense in practice: cap them by the input size */
            if (idx > (int64_t)n) {
                bad(&m, at, "a memo index larger than the file");
                goto out;
            }
            if (op == 'p' || op == 'q' || op == 'r') {
                if (m.nst < 1 || m.st[m.nst - 1].kind == IT_MARK) {
                    bad(&m, at, "PUT with nothing to store");
                    goto out;
                }
                if (idx >= m.nmemo) {
                    int64_t c = m.nmemo ? m.nmemo : 64;
                    while (c <= idx)
                        c *= 2;
                    item *nm = realloc(m.memo, sizeof(item) * (size_t)c);
                    if (!nm) {
                        oom(&m);
                        goto out;
                    }
                    for (int64_t k = m.nmemo; k < c; k++)
                        nm[k].kind = IT_MARK; /* empty slot */
                    m.memo = nm;
                    m.nmemo = c;
                }
                m.memo[idx] = m.st[m.nst - 1];
            } else {
                if (idx >= m.nmemo || m.memo[idx].kind == IT_MARK) {
                    bad(&m, at, "GET of an empty memo slot");
                    goto out;
                }
                TRY(push(&m, m.memo[idx]));
            }
            break;
        }
        default: {
            char what[64];
            snprintf(what, sizeof what, "unsupported opcode 0x%02x", op);
            bad(&m, at, what);
            goto out;
        }
        }
    }
    bad(&m, n, "no STOP opcode (truncated file)");
out:
    if (rc != 0) nb_pickle_free(out);
    vm_free(&m);
    return rc;
#undef NEED
#undef TRY
}

int nb_pickle_load(const char *path, nb_pickle *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t n = 0;
    if (nb_read_file(path, (size_t)4 << 30, 0, &text, &n, err) != 0) {
        if (errno == EFBIG) nb_errf(err, "'%s' is larger than 4 GiB", path);
        return -1;
    }
    uint8_t *buf = (uint8_t *)text;
    int rc = nb_pickle_parse(buf, n, path, out, err);
    free(buf);
    return rc;
}
