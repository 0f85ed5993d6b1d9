/* util/json.c — see util/json.h. */
#include "util/json.h"
#include "util/text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void nb_buf_free(nb_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

static int reserve(nb_buf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void append(nb_buf *b, const char *s, size_t n) {
    if (reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void nb_buf_puts(nb_buf *b, const char *s) {
    append(b, s, strlen(s));
}

void nb_buf_printf(nb_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *nb_buf_take(nb_buf *b) {
    char *p = NULL;
    if (!b->oom) {
        p = b->p ? b->p : strdup("");
        b->p = NULL;
    }
    nb_buf_free(b);
    return p;
}

void nb_buf_json_str(nb_buf *b, const char *s) {
    if (!s) {
        nb_buf_puts(b, "null");
        return;
    }
    append(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"':
            nb_buf_puts(b, "\\\"");
            break;
        case '\\':
            nb_buf_puts(b, "\\\\");
            break;
        case '\b':
            nb_buf_puts(b, "\\b");
            break;
        case '\f':
            nb_buf_puts(b, "\\f");
            break;
        case '\n':
            nb_buf_puts(b, "\\n");
            break;
        case '\r':
            nb_buf_puts(b, "\\r");
            break;
        case '\t':
            nb_buf_puts(b, "\\t");
            break;
        default:
            if (*c < 0x20 || *c == 0x7f)
                nb_buf_printf(b, "\\u%04x", *c);
            else
                append(b, (const char *)c, 1);
        }
    }
    append(b, "\"", 1);
}

char *nb_fmt_double(char *out, size_t size, double x) {
    if (isnan(x)) {
        snprintf(out, size, "nan");
    } else if (isinf(x)) {
        snprintf(out, size, x > 0 ? "inf" : "-inf");
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(out, size, "%.*g", prec, x);
            if (strtod(out, NULL) == x) break;
        }
    }
    return out;
}

void nb_buf_json_num(nb_buf *b, double x) {
    char tmp[40];
    nb_fmt_double(tmp, sizeof tmp, x);
    if (isfinite(x))
        nb_buf_puts(b, tmp);
    else
        nb_buf_printf(b, "\"%s\"", tmp);
}

void nb_json_str(FILE *f, const char *s) {
    nb_buf b = {0};
    nb_buf_json_str(&b, s);
    if (b.p) fputs(b.p, f);
    nb_buf_free(&b);
}

void nb_json_num(FILE *f, double x) {
    char tmp[40];
    nb_fmt_double(tmp, sizeof tmp, x);
    if (isfinite(x))
        fputs(tmp, f);
    else
        fprintf(f, "\"%s\"", tmp);
}

void nb_csv_field(FILE *f, const char *s) {
    if (!s) return;
    nb_buf e = {0};
    nb_buf_escaped(&e, s); /* no control character (ESC, CR, LF...) reaches a terminal raw */
    const char *t = e.p ? e.p : "";
    size_t n = strlen(t);
    if (strpbrk(t, ",\"") == NULL && !(n && (t[0] == ' ' || t[n - 1] == ' '))) {
        fputs(t, f);
        nb_buf_free(&e);
        return;
    }
    fputc('"', f);
    for (; *t; t++) {
        if (*t == '"') fputc('"', f);
        fputc(*t, f);
    }
    fputc('"', f);
    nb_buf_free(&e);
}

/* ---- reading ------------------------------------------------------------------------------ */

static const char *ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A JSON string at p (at its opening quote) decoded into out (when not NULL); returns the
 * position after it, or NULL when malformed. */
static const char *read_string(const char *p, nb_buf *out) {
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if (*p != '\\') {
            if (out) nb_buf_printf(out, "%c", *p);
            continue;
        }
        p++;
        char c = *p;
        switch (c) {
        case 'n':
            c = '\n';
            break;
        case 't':
            c = '\t';
            break;
        case 'r':
            c = '\r';
            break;
        case 'b':
            c = '\b';
            break;
        case 'f':
            c = '\f';
            break;
        case '\0':
            return NULL;
        case 'u': {
            unsigned v = 0;
            for (int i = 1; i <= 4; i++) {
                int d = hex_digit(p[i]);
                if (d < 0) return NULL;
                v = v * 16 + (unsigned)d;
            }
            p += 4;
            if (!out) continue;
            if (v < 0x80)
                nb_buf_printf(out, "%c", (char)(v ? v : '?'));
            else if (v < 0x800)
                nb_buf_printf(out, "%c%c", (char)(0xc0 | v >> 6), (char)(0x80 | (v & 63)));
            else
                nb_buf_printf(out, "%c%c%c", (char)(0xe0 | v >> 12), (char)(0x80 | ((v >> 6) & 63)),
                              (char)(0x80 | (v & 63)));
            continue;
        }
        default:
            break; /* \" \\ \/ and any other escaped byte: itself */
        }
        if (out) nb_buf_printf(out, "%c", c);
    }
    return *p == '"' ? p + 1 : NULL;
}

/* A member's value at p: a string decoded; a number or a literal (true, false, null) copied; an
 * object or an array copied as written up to its closing bracket (brackets inside counted,
 * strings inside skipped). Returns the position after it, or NULL when malformed. */
static const char *read_value(const char *p, nb_buf *out, int *is_string) {
    *is_string = *p == '"';
    if (*p == '"') return read_string(p, out);
    const char *start = p;
    if (*p == '{' || *p == '[') {
        size_t depth = 0;
        for (; *p; p++) {
            if (*p == '"') {
                const char *e = read_string(p, NULL);
                if (!e) return NULL;
                p = e - 1;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if ((*p == '}' || *p == ']') && --depth == 0) {
                break;
            }
        }
        if (!*p) return NULL;
        p++;
    } else {
        while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
               *p == '-' || *p == '+' || *p == '.')
            p++;
        if (p == start) return NULL; /* no value */
    }
    if (p - start > INT_MAX) return NULL;
    nb_buf_printf(out, "%.*s", (int)(p - start), start);
    return p;
}

void nb_json_object_free(nb_json_object *o) {
    for (int i = 0; i < o->n; i++) {
        free(o->kv[i].key);
        free(o->kv[i].value);
    }
    free(o->kv);
    o->kv = NULL;
    o->n = 0;
}

int nb_json_read_object(const char *json, nb_json_object *o) {
    o->kv = NULL;
    o->n = 0;
    if (!json) return -1;
    const char *p = ws(json);
    if (*p != '{') return -1;
    p = ws(p + 1);
    if (*p == '}') return *ws(p + 1) ? -1 : 0;
    while (*p == '"') {
        nb_buf k = {0}, v = {0};
        int is_string = 0;
        p = read_string(p, &k);
        if (p) p = ws(p);
        p = p && *p == ':' ? read_value(ws(p + 1), &v, &is_string) : NULL;
        nb_json_member *grown =
            p && o->n < INT_MAX - 1 ? realloc(o->kv, (size_t)(o->n + 1) * sizeof *grown) : NULL;
        if (!grown || k.oom || v.oom) {
            nb_buf_free(&k);
            nb_buf_free(&v);
            return -1;
        }
        o->kv = grown;
        nb_json_member *m = &o->kv[o->n];
        m->key = k.p ? nb_buf_take(&k) : strdup("");
        m->value = v.p ? nb_buf_take(&v) : strdup("");
        m->is_string = is_string;
        if (!m->key || !m->value) {
            free(m->key);
            free(m->value);
            return -1;
        }
        o->n++;
        p = ws(p);
        if (*p == '}') return *ws(p + 1) ? -1 : 0;
        if (*p != ',') return -1;
        p = ws(p + 1);
    }
    return -1;
}

const char *nb_json_get(const nb_json_object *o, const char *key) {
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->kv[i].key, key) == 0) return o->kv[i].value;
    return NULL;
}

const char *nb_json_get_str(const nb_json_object *o, const char *key) {
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->kv[i].key, key) == 0) return o->kv[i].is_string ? o->kv[i].value : NULL;
    return NULL;
}

int nb_json_get_int(const nb_json_object *o, const char *key, long long *out) {
    const char *v = nb_json_get_str(o, key) ? NULL : nb_json_get(o, key);
    if (!v) return 0;
    const char *p = v + (*v == '-');
    if (*p < '0' || *p > '9' || (*p == '0' && p[1])) return 0;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return 0;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (errno || *end) return 0;
    *out = x;
    return 1;
}
