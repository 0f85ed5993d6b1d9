/* util/json.c — see util/json.h. */
#include "util/json.h"
#include "util/text.h"

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
