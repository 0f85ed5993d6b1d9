/* util/bleu.c — see bleu.h. */
#include "util/bleu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nb_bleu_opts nb_bleu_defaults(void) {
    nb_bleu_opts o = {NB_BLEU_TOK_13A, NB_BLEU_SMOOTH_EXP, -1, 0, 4};
    return o;
}

/* Bytes of the Unicode whitespace character at s (as Python's str.isspace), or 0. */
static size_t ws_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3; /* U+1680 */
    if (c == 0xe2 && s[1] == 0x80 && s[2] &&
        ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3;                                            /* U+2000-200A, 2028, 2029, 202F */
    if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3; /* U+205F */
    if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

/* Splits on whitespace and joins with single spaces (Python's ' '.join(s.split())). */
static char *normalize_ws(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t at = 0;
    const unsigned char *p = (const unsigned char *)s;
    int pending = 0;
    while (*p) {
        size_t w = ws_len(p);
        if (w) {
            pending = at > 0;
            p += w;
            continue;
        }
        if (pending) out[at++] = ' ';
        pending = 0;
        out[at++] = (char)*p++;
    }
    out[at] = '\0';
    return out;
}

/* Python's str.rstrip() (whitespace) into a copy. */
static char *rstrip_copy(const char *s) {
    size_t n = strlen(s), end = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t w = ws_len(p + i);
        if (w) {
            i += w;
        } else {
            i++;
            end = i;
        }
    }
    char *out = malloc(end + 1);
    if (!out) return NULL;
    memcpy(out, s, end);
    out[end] = '\0';
    return out;
}

/* Replaces every occurrence of from by to (Python's str.replace), in a new string. */
static char *replace_all(char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), n = strlen(s);
    char *out = malloc(n + 1); /* to is never longer than from here */
    if (!out) {
        free(s);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        if (strncmp(s + i, from, fl) == 0) {
            memcpy(out + at, to, tl);
            at += tl;
            i += fl;
        } else {
            out[at++] = s[i++];
        }
    }
    out[at] = '\0';
    free(s);
    return out;
}

static int in_class1(unsigned c) {
    /* [\{-\~\[-\` -\&\(-\+\:-\@\/] */
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

static int isdig(unsigned c) {
    return c >= '0' && c <= '9';
}

char *nb_bleu_tokenize_13a(const char *line) {
    size_t n = strlen(line);
    char *s = malloc(n + 3);
    if (!s) return NULL;
    /* " " + line + " " after the language-independent part */
    memcpy(s, line, n + 1);
    s = replace_all(s, "<skipped>", "");
    if (s) s = replace_all(s, "-\n", "");
    if (s) s = replace_all(s, "\n", " ");
    if (s && strchr(s, '&')) {
        s = replace_all(s, "&quot;", "\"");
        if (s) s = replace_all(s, "&amp;", "&");
        if (s) s = replace_all(s, "&lt;", "<");
        if (s) s = replace_all(s, "&gt;", ">");
    }
    if (!s) return NULL;
    n = strlen(s);
    /* each pass at most quadruples the length (pass 1 triples, the others add two per match) */
    char *a = malloc(4 * (n + 2) + 1), *b = malloc(4 * 4 * (n + 2) + 1);
    if (!a || !b) {
        free(s);
        free(a);
        free(b);
        return NULL;
    }
    size_t at = 0;
    a[at++] = ' ';
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)s[i];
        if (in_class1(c)) {
            a[at++] = ' ';
            a[at++] = (char)c;
            a[at++] = ' ';
        } else {
            a[at++] = (char)c;
        }
    }
    /* the closing pad: a space, itself in class 1 (" " -> "   "), irrelevant after the split */
    a[at++] = ' ';
    a[at] = '\0';
    free(s);
    /* pass 2: ([^0-9])([\.,]) -> \1 \2 (with spaces) */
    size_t m = at, bt = 0;
    for (size_t i = 0; i < m;) {
        unsigned c = (unsigned char)a[i];
        if (i + 1 < m && !isdig(c) && (a[i + 1] == '.' || a[i + 1] == ',')) {
            b[bt++] = (char)c;
            b[bt++] = ' ';
            b[bt++] = a[i + 1];
            b[bt++] = ' ';
            i += 2;
        } else {
            b[bt++] = a[i++];
        }
    }
    b[bt] = '\0';
    /* pass 3: ([\.,])([^0-9]) -> " \1 \2" */
    char *c3 = malloc(2 * bt + 1);
    if (!c3) {
        free(a);
        free(b);
        return NULL;
    }
    size_t ct = 0;
    for (size_t i = 0; i < bt;) {
        if (i + 1 < bt && (b[i] == '.' || b[i] == ',') && !isdig((unsigned char)b[i + 1])) {
            c3[ct++] = ' ';
            c3[ct++] = b[i];
            c3[ct++] = ' ';
            c3[ct++] = b[i + 1];
            i += 2;
        } else {
            c3[ct++] = b[i++];
        }
    }
    c3[ct] = '\0';
    /* pass 4: ([0-9])(-) -> \1 \2 (with spaces) */
    char *d = realloc(a, 2 * ct + 1);
    if (!d) {
        free(a);
        free(b);
        free(c3);
        return NULL;
    }
    size_t dt = 0;
    for (size_t i = 0; i < ct;) {
        if (i + 1 < ct && isdig((unsigned char)c3[i]) && c3[i + 1] == '-') {
            d[dt++] = c3[i];
            d[dt++] = ' ';
            d[dt++] = '-';
            d[dt++] = ' ';
            i += 2;
        } else {
            d[dt++] = c3[i++];
        }
    }
    d[dt] = '\0';
    free(b);
    free(c3);
    char *out = normalize_ws(d);
    free(d);
    return out;
}

/* ---- n-grams --------------------------------------------------------------------------------- */

typedef struct ngram {
    const char *s;
    int len, order;
    long count;
} ngram;

static int ng_cmp(const void *x, const void *y) {
    const ngram *a = x, *b = y;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return memcmp(a->s, b->s, (size_t)a->len);
}

/* The n-grams of s (single-space separated tokens), counted: sorted and unique. *ntok: the
 * token count. Returns the array (malloc'ed) and its length in *nng, or NULL (oom). */
static ngram *ngrams(const char *s, int max_order, int *nng, long *ntok) {
    int nt = 0;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || s[i - 1] == ' ') nt++;
    *ntok = nt;
    int *start = malloc((size_t)(nt + 1) * sizeof *start);
    ngram *g = malloc((size_t)(nt * max_order + 1) * sizeof *g);
    if (!start || !g) {
        free(start);
        free(g);
        return NULL;
    }
    int k = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || s[i - 1] == ' ') start[k++] = (int)i;
    start[nt] = (int)n + 1;
    int ng = 0;
    for (int ord = 1; ord <= max_order; ord++)
        for (int i = 0; i + ord <= nt; i++) {
            g[ng].s = s + start[i];
            g[ng].len = start[i + ord] - 1 - start[i];
            g[ng].order = ord;
            g[ng].count = 1;
            ng++;
        }
    free(start);
    qsort(g, (size_t)ng, sizeof *g, ng_cmp);
    int u = 0;
    for (int i = 0; i < ng; i++) {
        if (u > 0 && ng_cmp(&g[u - 1], &g[i]) == 0)
            g[u - 1].count++;
        else
            g[u++] = g[i];
    }
    *nng = u;
    return g;
}

static char *preprocess(const char *s, nb_bleu_tok tok) {
    char *r = rstrip_copy(s);
    if (!r) return NULL;
    char *t = tok == NB_BLEU_TOK_13A ? nb_bleu_tokenize_13a(r) : normalize_ws(r);
    free(r);
    return t;
}

/* Adds one segment's statistics: stats = [sys_len, ref_len, correct[max], total[max]]. */
static int segment_stats(const char *hyp, const char *const *refs, int nrefs, const nb_bleu_opts *o,
                         double *correct, double *total, long *sys_len, long *ref_len) {
    int mo = o->max_order, rc = -1;
    char *h = preprocess(hyp, o->tok);
    char **r = calloc((size_t)nrefs, sizeof *r);
    ngram **rg = calloc((size_t)nrefs, sizeof *rg);
    int *rn = calloc((size_t)nrefs, sizeof *rn);
    ngram *hg = NULL;
    if (!h || !r || !rg || !rn) goto done;
    long hl = 0, best_len = -1, best_diff = -1;
    int hn = 0;
    hg = ngrams(h, mo, &hn, &hl);
    if (!hg) goto done;
    for (int j = 0; j < nrefs; j++) {
        long rl = 0;
        r[j] = preprocess(refs[j], o->tok);
        if (!r[j]) goto done;
        rg[j] = ngrams(r[j], mo, &rn[j], &rl);
        if (!rg[j]) goto done;
        long diff = labs(hl - rl);
        if (best_diff < 0 || diff < best_diff) {
            best_diff = diff;
            best_len = rl;
        } else if (diff == best_diff && rl < best_len) {
            best_len = rl;
        }
    }
    *sys_len += hl;
    *ref_len += best_len < 0 ? 0 : best_len;
    for (int i = 0; i < hn; i++) {
        total[hg[i].order - 1] += (double)hg[i].count;
        long maxref = 0;
        for (int j = 0; j < nrefs; j++) {
            ngram *f = bsearch(&hg[i], rg[j], (size_t)rn[j], sizeof(ngram), ng_cmp);
            if (f && f->count > maxref) maxref = f->count;
        }
        correct[hg[i].order - 1] += (double)(hg[i].count < maxref ? hg[i].count : maxref);
    }
    rc = 0;
done:
    free(h);
    free(hg);
    if (r)
        for (int j = 0; j < nrefs; j++)
            free(r[j]);
    if (rg)
        for (int j = 0; j < nrefs; j++)
            free(rg[j]);
    free(r);
    free(rg);
    free(rn);
    return rc;
}

static double my_log(double x) {
    return x == 0.0 ? -9999999999.0 : log(x);
}

nb_bleu nb_bleu_compute(const double *correct_in, const double *total_in, long sys_len,
                        long ref_len, const nb_bleu_opts *o) {
    nb_bleu b;
    memset(&b, 0, sizeof b);
    int mo = o->max_order;
    for (int i = 0; i < mo; i++) {
        b.correct[i] = correct_in[i];
        b.total[i] = total_in[i];
    }
    b.sys_len = sys_len;
    b.ref_len = ref_len;
    double sv = o->smooth_value;
    if (sv < 0) sv = o->smooth == NB_BLEU_SMOOTH_FLOOR ? 0.1 : 1.0;
    b.bp = 1.0;
    if (sys_len < ref_len) b.bp = sys_len > 0 ? exp(1.0 - (double)ref_len / (double)sys_len) : 0.0;
    int any = 0;
    for (int i = 0; i < mo; i++)
        any |= b.correct[i] != 0;
    if (!any) return b;
    double smooth_mteval = 1.0;
    int eff = mo;
    for (int n = 1; n <= mo; n++) {
        if (o->smooth == NB_BLEU_SMOOTH_ADDK && n > 1) {
            b.correct[n - 1] += sv;
            b.total[n - 1] += sv;
        }
        if (b.total[n - 1] == 0) break;
        if (o->effective_order) eff = n;
        if (b.correct[n - 1] == 0) {
            if (o->smooth == NB_BLEU_SMOOTH_EXP) {
                smooth_mteval *= 2;
                b.precision[n - 1] = 100. / (smooth_mteval * b.total[n - 1]);
            } else if (o->smooth == NB_BLEU_SMOOTH_FLOOR) {
                b.precision[n - 1] = 100. * sv / b.total[n - 1];
            }
        } else {
            b.precision[n - 1] = 100. * b.correct[n - 1] / b.total[n - 1];
        }
    }
    double sum = 0;
    for (int i = 0; i < eff; i++)
        sum += my_log(b.precision[i]);
    b.score = b.bp * exp(sum / eff);
    return b;
}

static int check_opts(const nb_bleu_opts *o, int nrefs, nb_err *err) {
    if (o->max_order < 1 || o->max_order > NB_BLEU_MAX_ORDER)
        return nb_errf(err, "BLEU order %d is out of range 1..%d", o->max_order, NB_BLEU_MAX_ORDER);
    if (nrefs < 1) return nb_errf(err, "BLEU needs at least one reference");
    return 0;
}

int nb_bleu_corpus(const char *const *hyp, int n, const char *const *const *refs, int nrefs,
                   const nb_bleu_opts *o, nb_bleu *out, nb_err *err) {
    nb_bleu_opts def = nb_bleu_defaults();
    if (!o) o = &def;
    if (check_opts(o, nrefs, err)) return -1;
    double correct[NB_BLEU_MAX_ORDER] = {0}, total[NB_BLEU_MAX_ORDER] = {0};
    long sys = 0, ref = 0;
    const char **r = malloc((size_t)nrefs * sizeof *r);
    if (!r) return nb_errf(err, "out of memory");
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < nrefs; j++)
            r[j] = refs[j][i];
        if (segment_stats(hyp[i], r, nrefs, o, correct, total, &sys, &ref)) {
            free(r);
            return nb_errf(err, "out of memory computing BLEU");
        }
    }
    free(r);
    *out = nb_bleu_compute(correct, total, sys, ref, o);
    return 0;
}

int nb_bleu_sentence(const char *hyp, const char *const *refs, int nrefs, const nb_bleu_opts *o,
                     nb_bleu *out, nb_err *err) {
    nb_bleu_opts def = nb_bleu_defaults();
    if (!o) o = &def;
    if (check_opts(o, nrefs, err)) return -1;
    double correct[NB_BLEU_MAX_ORDER] = {0}, total[NB_BLEU_MAX_ORDER] = {0};
    long sys = 0, ref = 0;
    if (segment_stats(hyp, refs, nrefs, o, correct, total, &sys, &ref))
        return nb_errf(err, "out of memory computing BLEU");
    *out = nb_bleu_compute(correct, total, sys, ref, o);
    return 0;
}

void nb_bleu_signature(const nb_bleu_opts *o, int nrefs, char *buf, size_t n) {
    char smooth[32];
    double sv = o->smooth_value;
    switch (o->smooth) {
    case NB_BLEU_SMOOTH_NONE:
        snprintf(smooth, sizeof smooth, "none");
        break;
    case NB_BLEU_SMOOTH_FLOOR:
        snprintf(smooth, sizeof smooth, "floor[%.2f]", sv < 0 ? 0.1 : sv);
        break;
    case NB_BLEU_SMOOTH_ADDK:
        snprintf(smooth, sizeof smooth, "add-k[%.2f]", sv < 0 ? 1.0 : sv);
        break;
    default:
        snprintf(smooth, sizeof smooth, "exp");
        break;
    }
    snprintf(buf, n, "nrefs:%d|case:mixed|eff:%s|tok:%s|smooth:%s|version:%s", nrefs,
             o->effective_order ? "yes" : "no", o->tok == NB_BLEU_TOK_13A ? "13a" : "none", smooth,
             NB_SACREBLEU_VERSION);
}
