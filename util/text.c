/* util/text.c — see util/text.h. */
#include "util/text.h"

#include <string.h>

/* The length of the valid UTF-8 sequence at p (1..4), or 0 when the byte at p does not start
 * one. */
static int utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned min, cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        min = 0x80;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        min = 0x800;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        min = 0x10000;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0; /* also stops at the terminating NUL */
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

/* Whether the valid sequence of n bytes at p is a control character. */
static int is_control(const unsigned char *p, int n) {
    if (n == 1) return p[0] < 0x20 || p[0] == 0x7f;
    return n == 2 && p[0] == 0xc2 && p[1] < 0xa0; /* C1: U+0080..U+009F */
}

int nb_text_clean(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (n == 0 || is_control(p, n)) return 0;
        p += n;
    }
    return 1;
}

/* Calls put(ctx, piece, len) for each piece of the escaped form of s: a character as it is, or
 * an escape. */
static void escape_each(const char *s, void (*put)(void *, const char *, size_t), void *ctx) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (n > 0 && !is_control(p, n)) {
            put(ctx, (const char *)p, (size_t)n);
            p += n;
            continue;
        }
        int bytes = n == 2 ? 2 : 1; /* a C1 control: both bytes; else the one bad byte */
        for (int i = 0; i < bytes; i++) {
            char e[5] = {'\\', 'x', hex[p[i] >> 4], hex[p[i] & 15], '\0'};
            if (p[i] == '\n')
                put(ctx, "\\n", 2);
            else if (p[i] == '\r')
                put(ctx, "\\r", 2);
            else if (p[i] == '\t')
                put(ctx, "\\t", 2);
            else
                put(ctx, e, 4);
        }
        p += bytes;
    }
}

static void put_buf(void *ctx, const char *s, size_t n) {
    char piece[8];
    memcpy(piece, s, n);
    piece[n] = '\0';
    nb_buf_puts(ctx, piece);
}

void nb_buf_escaped(nb_buf *b, const char *s) {
    if (s) escape_each(s, put_buf, b);
}

static void put_file(void *ctx, const char *s, size_t n) {
    fwrite(s, 1, n, ctx);
}

void nb_fputs_escaped(FILE *f, const char *s) {
    if (s) escape_each(s, put_file, f);
}

typedef struct fixed {
    char *out;
    size_t size, len;
    int full;
} fixed;

static void put_fixed(void *ctx, const char *s, size_t n) {
    fixed *x = ctx;
    if (x->full || x->len + n + 1 > x->size) {
        x->full = 1;
        return;
    }
    memcpy(x->out + x->len, s, n);
    x->len += n;
    x->out[x->len] = '\0';
}

char *nb_escape(char *out, size_t size, const char *s) {
    fixed x = {out, size, 0, 0};
    if (size) out[0] = '\0';
    if (s && size) escape_each(s, put_fixed, &x);
    return out;
}
