/* datasets/amat.c — the .amat reader (datasets/amat.h): a byte-at-a-time state machine fed in
 * fixed chunks, so memory is the images' bytes plus one chunk whatever the input. */
#include "datasets/amat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK 65536

enum { AT_VALUE, AFTER_VALUE, TRAILING };

typedef struct parser {
    const char *name;
    int expect; /* lines expected, or 0 */
    int cap;    /* lines x can hold */
    int max;    /* most lines allowed */
    int line;   /* complete lines so far */
    int col;    /* values on the current line */
    int state;  /* AT_VALUE: a value must come next (or, at column 0, the end) */
    int trail;  /* whitespace bytes after the last value */
    uint8_t *x; /* (cap, 784) */
    nb_err *err;
} parser;

static const char *const fmt_hint =
    "an .amat file holds one image a line: 784 values '0' or '1' separated by single spaces; "
    "fetch it again with 'normbench fetch binarized-mnist'";

static int bad(parser *p, const char *what) {
    nb_errf(p->err, "'%s' line %d: %s", p->name, p->line + 1, what);
    return nb_hintf(p->err, "%s", fmt_hint);
}

static const char *show_byte(int c, char *buf, size_t n) {
    if (c > 32 && c < 127)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", (unsigned)c);
    return buf;
}

static int bad_byte(parser *p, int c) {
    char what[160], b[16];
    if (p->state == AFTER_VALUE)
        snprintf(what, sizeof what,
                 "value %d is not 0 or 1 (%s follows its first character without a space)", p->col,
                 show_byte(c, b, sizeof b));
    else
        snprintf(what, sizeof what, "value %d is not 0 or 1 (it starts with %s)", p->col + 1,
                 show_byte(c, b, sizeof b));
    return bad(p, what);
}

static int end_line(parser *p) {
    char what[120];
    if (p->col == 0) return bad(p, "empty line (784 values expected)");
    if (p->col < NB_AMAT_DIM) {
        snprintf(what, sizeof what, "short line: %d values, expected %d", p->col, NB_AMAT_DIM);
        return bad(p, what);
    }
    p->line++;
    p->col = 0;
    p->state = AT_VALUE;
    p->trail = 0;
    return 0;
}

/* Room for line p->line: grows x (doubling) when no count was given. */
static int room(parser *p) {
    if (p->line < p->cap) return 0;
    if (p->line >= p->max) {
        char what[160];
        if (p->expect)
            snprintf(what, sizeof what, "more lines than the %d this file must hold", p->expect);
        else
            snprintf(what, sizeof what, "more than %d lines", p->max);
        return bad(p, what);
    }
    int cap = p->cap ? p->cap * 2 : 1024;
    if (cap > p->max) cap = p->max;
    uint8_t *x = realloc(p->x, (size_t)cap * NB_AMAT_DIM);
    if (!x) return nb_errf(p->err, "out of memory reading '%s' (%d lines)", p->name, cap);
    p->x = x;
    p->cap = cap;
    return 0;
}

static int feed(parser *p, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int c = b[i];
        if (c == '0' || c == '1') {
            if (p->state == AFTER_VALUE) return bad_byte(p, c);
            if (p->col == NB_AMAT_DIM) {
                char what[120];
                snprintf(what, sizeof what, "long line: more than %d values", NB_AMAT_DIM);
                return bad(p, what);
            }
            if (p->col == 0 && room(p)) return -1;
            p->x[(size_t)p->line * NB_AMAT_DIM + (size_t)p->col++] = (uint8_t)(c - '0');
            p->state = AFTER_VALUE;
        } else if (c == '\n') {
            if (end_line(p)) return -1;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            if (p->col == NB_AMAT_DIM) { /* whitespace after the last value */
                if (++p->trail > NB_AMAT_MAX_TRAIL) {
                    char what[120];
                    snprintf(what, sizeof what,
                             "more than %d bytes of whitespace after the last value",
                             NB_AMAT_MAX_TRAIL);
                    return bad(p, what);
                }
                p->state = TRAILING;
            } else if (c != ' ') {
                char what[120], bb[16];
                snprintf(what, sizeof what,
                         "%s after value %d: values are separated by single spaces",
                         show_byte(c, bb, sizeof bb), p->col);
                return bad(p, what);
            } else if (p->state != AFTER_VALUE) {
                char what[120];
                if (p->col == 0)
                    snprintf(what, sizeof what, "the line starts with a space");
                else
                    snprintf(what, sizeof what,
                             "two spaces after value %d: values are separated by single spaces",
                             p->col);
                return bad(p, what);
            } else {
                p->state = AT_VALUE;
            }
        } else {
            return bad_byte(p, c);
        }
    }
    return 0;
}

static int finish(parser *p, nb_amat *out) {
    if (p->col > 0 && end_line(p)) return -1; /* no final newline: accepted */
    if (p->line == 0) {
        nb_errf(p->err, "'%s' is empty", p->name);
        return nb_hintf(p->err, "%s", fmt_hint);
    }
    if (p->expect && p->line != p->expect) {
        nb_errf(p->err, "'%s' has %d lines, expected %d", p->name, p->line, p->expect);
        return nb_hintf(p->err, "the file is truncated or is not the published one: fetch it "
                                "again with 'normbench fetch binarized-mnist'");
    }
    out->n = p->line;
    out->x = p->x;
    p->x = NULL;
    return 0;
}

static int start(parser *p, const char *name, int expect_n, nb_amat *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    memset(p, 0, sizeof *p);
    p->name = name ? name : "(input)";
    p->err = err;
    p->state = AT_VALUE;
    if (expect_n < 0 || expect_n > NB_AMAT_MAX_LINES)
        return nb_errf(err, "'%s': cannot expect %d lines (at most %d)", p->name, expect_n,
                       NB_AMAT_MAX_LINES);
    p->expect = expect_n;
    p->max = expect_n ? expect_n : NB_AMAT_MAX_LINES;
    if (expect_n) {
        p->x = malloc((size_t)expect_n * NB_AMAT_DIM);
        if (!p->x) return nb_errf(err, "out of memory reading '%s' (%d lines)", p->name, expect_n);
        p->cap = expect_n;
    }
    return 0;
}

int nb_amat_read_mem(const void *data, size_t size, const char *name, int expect_n, nb_amat *out,
                     nb_err *err) {
    parser p;
    if (start(&p, name, expect_n, out, err)) return -1;
    int rc = feed(&p, data, size) || finish(&p, out) ? -1 : 0;
    free(p.x);
    return rc;
}

int nb_amat_read(const char *path, int expect_n, nb_amat *out, nb_err *err) {
    parser p;
    if (start(&p, path, expect_n, out, err)) return -1;
    int rc = -1;
    uint8_t *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        nb_errf(err, "cannot open '%s': %s", path, strerror(e));
        if (e == ENOENT) nb_hintf(err, "run 'normbench fetch binarized-mnist'");
        goto done;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        nb_errf(err, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        nb_errf(err, "'%s' is not a regular file", path);
        nb_hintf(err, "%s", fmt_hint);
        goto done;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    buf = malloc(CHUNK);
    if (!buf) {
        nb_errf(err, "out of memory reading '%s'", path);
        goto done;
    }
    for (;;) {
        ssize_t k = read(fd, buf, CHUNK);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            nb_errf(err, "cannot read '%s': %s", path, strerror(errno));
            goto done;
        }
        if (k == 0) break;
        if (feed(&p, buf, (size_t)k)) goto done;
    }
    rc = finish(&p, out);
done:
    if (fd >= 0) close(fd);
    free(buf);
    free(p.x);
    return rc;
}

void nb_amat_free(nb_amat *a) {
    if (!a) return;
    free(a->x);
    memset(a, 0, sizeof *a);
}
