/* datasets/chars.c — text as characters (see datasets/chars.h). */
#include "datasets/chars.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/file.h"
#include "util/rng.h"

/* Decodes one UTF-8 character at s (len bytes left); returns its length (1-4) with *cp set, or 0
 * when the bytes there are not valid UTF-8 (overlong forms, surrogates and values past U+10FFFF
 * included). */
static int utf8_next(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int n;
    uint32_t v, min;
    if ((c & 0xe0) == 0xc0)
        n = 2, v = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        n = 3, v = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        n = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len < (size_t)n) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int find_id(const nb_chars *t, uint32_t cp) {
    int lo = 0, hi = t->vocab - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t->chars[mid] == cp) return mid;
        if (t->chars[mid] < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

void nb_chars_free(nb_chars *t) {
    if (!t) return;
    free(t->ids);
    free(t->chars);
    memset(t, 0, sizeof *t);
}

int nb_chars_from_bytes(const char *buf, size_t len, const char *what, nb_chars *t, nb_err *err) {
    memset(t, 0, sizeof *t);
    if (len == 0) {
        nb_errf(err, "%s is empty: a language model needs text", what);
        nb_hintf(err, "give a UTF-8 text file of at least a few contexts' length");
        return -1;
    }
    const unsigned char *s = (const unsigned char *)buf;
    t->ids = malloc(sizeof(int) * len);
    uint32_t *seen = malloc(sizeof(uint32_t) * (NB_CHARS_MAX_VOCAB + 1));
    if (!t->ids || !seen) {
        free(t->ids), free(seen);
        t->ids = NULL;
        nb_errf(err, "out of memory reading %s (%zu bytes)", what, len);
        return -1;
    }
    /* first pass: validate and collect the distinct code points (ASCII in a table) */
    unsigned char ascii[128] = {0};
    int nseen = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = utf8_next(s + i, len - i, &cp);
        if (!k) {
            free(seen);
            nb_chars_free(t);
            nb_errf(err, "%s is not UTF-8 text: invalid byte 0x%02x at offset %zu", what, s[i], i);
            nb_hintf(err, "convert it first, e.g. iconv -f LATIN1 -t UTF-8");
            return -1;
        }
        i += (size_t)k;
        int known = 0;
        if (cp < 128) {
            known = ascii[cp];
            ascii[cp] = 1;
        } else {
            for (int j = 0; j < nseen && !known; j++)
                known = seen[j] == cp;
        }
        if (!known) {
            if (nseen == NB_CHARS_MAX_VOCAB) {
                free(seen);
                nb_chars_free(t);
                nb_errf(err, "%s has more than %d distinct characters", what, NB_CHARS_MAX_VOCAB);
                nb_hintf(err, "a character-level model's vocabulary is its characters: use text "
                              "with fewer distinct ones");
                return -1;
            }
            seen[nseen++] = cp;
        }
    }
    qsort(seen, (size_t)nseen, sizeof *seen, cmp_u32);
    t->chars = seen;
    t->vocab = nseen;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += (size_t)utf8_next(s + i, len - i, &cp);
        t->ids[n++] = find_id(t, cp);
    }
    t->n = n;
    t->ntrain = (size_t)((double)n * 0.9); /* nanoGPT: int(n*0.9) */
    return 0;
}

int nb_chars_load(const char *path, nb_chars *t, nb_err *err) {
    memset(t, 0, sizeof *t);
    char *buf = NULL;
    size_t len = 0;
    if (nb_read_file(path, NB_CHARS_MAX_BYTES, NB_READ_REGULAR, &buf, &len, err) != 0) {
        if (errno == EFBIG)
            nb_errf(err, "'%s' is larger than the %zu MiB a text may have", path,
                    NB_CHARS_MAX_BYTES >> 20);
        return -1;
    }
    char what[1100];
    snprintf(what, sizeof what, "'%s'", path);
    int rc = nb_chars_from_bytes(buf, len, what, t, err);
    free(buf);
    return rc;
}

/* ---- generated text ------------------------------------------------------------------------- */

static void put(char *b, size_t *n, size_t cap, char c) {
    if (*n < cap) b[(*n)++] = c;
}

int nb_chars_synthetic(size_t n, nb_chars *t, nb_err *err) {
    char *b = malloc(n + 64);
    if (!b) {
        nb_errf(err, "out of memory generating %zu characters", n);
        return -1;
    }
    nb_rng g;
    nb_rng_seed(&g, 11, NB_STREAM_SYNTH);
    size_t k = 0;
    static const char open[] = "([{", close[] = ")]}";
    while (k < n) {
        int kind = (int)nb_rng_below(&g, 3);
        if (kind == 0) { /* a copied span: <abc|abc> */
            char span[16];
            int len = 3 + (int)nb_rng_below(&g, 10);
            for (int i = 0; i < len; i++)
                span[i] = (char)('a' + nb_rng_below(&g, 16));
            put(b, &k, n, '<');
            for (int i = 0; i < len; i++)
                put(b, &k, n, span[i]);
            put(b, &k, n, '|');
            for (int i = 0; i < len; i++)
                put(b, &k, n, span[i]);
            put(b, &k, n, '>');
        } else if (kind == 1) { /* bindings, then a question: x=3;y=7;x?3 */
            int nk = 2 + (int)nb_rng_below(&g, 4);
            char keys[8] = {0}, vals[8] = {0};
            for (int i = 0; i < nk; i++) {
                keys[i] = (char)('p' + i + (int)nb_rng_below(&g, 2) * 5);
                vals[i] = (char)('0' + nb_rng_below(&g, 10));
                put(b, &k, n, keys[i]);
                put(b, &k, n, '=');
                put(b, &k, n, vals[i]);
                put(b, &k, n, ';');
            }
            int q = (int)nb_rng_below(&g, (uint64_t)nk);
            put(b, &k, n, keys[q]);
            put(b, &k, n, '?');
            put(b, &k, n, vals[q]);
        } else { /* nested brackets, closed in order: ([a{b}]) */
            char stack[16];
            int depth = 0, len = 4 + (int)nb_rng_below(&g, 12);
            for (int i = 0; i < len; i++) {
                if (depth > 0 && (depth == 16 || nb_rng_below(&g, 3) == 0)) {
                    put(b, &k, n, stack[--depth]);
                } else if (nb_rng_below(&g, 2)) {
                    int w = (int)nb_rng_below(&g, 3);
                    stack[depth++] = close[w];
                    put(b, &k, n, open[w]);
                } else {
                    put(b, &k, n, (char)('a' + nb_rng_below(&g, 4)));
                }
            }
            while (depth > 0)
                put(b, &k, n, stack[--depth]);
        }
        put(b, &k, n, '\n');
    }
    int rc = nb_chars_from_bytes(b, k, "the synthetic text", t, err);
    free(b);
    return rc;
}

int nb_chars_utf8(const nb_chars *t, int id, char out[4]) {
    uint32_t c = id >= 0 && id < t->vocab ? t->chars[id] : '?';
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

long nb_chars_encode(const nb_chars *t, const char *s, int *ids, long max, nb_err *err) {
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s);
    long n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = utf8_next(u + i, len - i, &cp);
        if (!k) {
            nb_errf(err, "the text is not UTF-8 (byte 0x%02x at offset %zu)", u[i], i);
            return -1;
        }
        int id = find_id(t, cp);
        if (id < 0) {
            nb_errf(err, "the character U+%04X (at byte %zu) is not in the model's vocabulary",
                    (unsigned)cp, i);
            nb_hintf(err, "use only characters of the text the model was trained on");
            return -1;
        }
        if (n == max) {
            nb_errf(err, "the text has more than %ld characters", max);
            return -1;
        }
        ids[n++] = id;
        i += (size_t)k;
    }
    return n;
}
