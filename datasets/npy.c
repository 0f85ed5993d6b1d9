/* datasets/npy.c — the strict .npy reader (see datasets/npy.h). */
#include "datasets/npy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "datasets/npy.c reads '<f4' data in place: a big-endian host needs a byte swap here"
#endif

/* The largest header accepted (numpy writes ~128 bytes for 2-d arrays). */
#define NPY_MAX_HEADER 65536

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string ('...' or "...") without escapes, into buf. */
static int quoted(cursor *c, char *buf, size_t size) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= size) return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    buf[n] = 0;
    return 1;
}

static int word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* A non-negative decimal integer (optional Python 2 'L'), at most 2^62. */
static int integer(cursor *c, uint64_t *v) {
    skip_ws(c);
    uint64_t x = 0;
    int digits = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > ((uint64_t)1 << 62) / 10) return 0;
        x = x * 10 + (uint64_t)(*c->p++ - '0');
        digits++;
    }
    if (!digits) return 0;
    if (c->p < c->end && *c->p == 'L') c->p++;
    *v = x;
    return 1;
}

static int parse_shape(cursor *c, nb_npy *out, nb_err *err) {
    if (!eat(c, '(')) return nb_errf(err, "npy header: 'shape' is not a tuple");
    out->ndim = 0;
    if (eat(c, ')')) return 0;
    for (;;) {
        uint64_t v;
        if (!integer(c, &v)) return nb_errf(err, "npy header: 'shape' holds a non-integer");
        if (out->ndim >= NB_NPY_MAXDIM)
            return nb_errf(err, "npy header: more than %d dimensions", NB_NPY_MAXDIM);
        out->shape[out->ndim++] = v;
        int comma = eat(c, ',');
        if (eat(c, ')')) {
            if (out->ndim == 1 && !comma) return nb_errf(err, "npy header: '(N)' is not a tuple");
            return 0;
        }
        if (!comma) return nb_errf(err, "npy header: malformed 'shape'");
    }
}

int nb_npy_parse_header(const uint8_t *buf, size_t n, nb_npy *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (n < 10 || memcmp(buf, magic, 6) != 0)
        return nb_errf(err, "not a .npy file (no \\x93NUMPY magic)");
    int major = buf[6], minor = buf[7];
    size_t pre, hlen;
    if (major == 1 && minor == 0) {
        pre = 10;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    } else if (major == 2 && minor == 0) {
        if (n < 12) return nb_errf(err, "npy file truncated in its preamble");
        pre = 12;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    } else {
        return nb_errf(err, "unsupported .npy version %d.%d (1.0 and 2.0 are read)", major, minor);
    }
    if (hlen > NPY_MAX_HEADER) return nb_errf(err, "npy header of %zu bytes is too long", hlen);
    if (n < pre + hlen) return nb_errf(err, "npy file truncated in its header");
    if ((pre + hlen) % 16 != 0)
        return nb_errf(err,
                       "npy header length %zu leaves the data unaligned (not a multiple of 16)",
                       pre + hlen);
    const char *h = (const char *)buf + pre;
    if (hlen == 0 || h[hlen - 1] != '\n') return nb_errf(err, "npy header does not end in newline");
    for (size_t i = 0; i + 1 < hlen; i++)
        if ((unsigned char)h[i] < 0x20 || (unsigned char)h[i] > 0x7e)
            return nb_errf(err, "npy header holds a non-printable byte at offset %zu", pre + i);
    cursor c = {h, h + hlen - 1};
    if (!eat(&c, '{')) return nb_errf(err, "npy header is not a dict");
    int seen_descr = 0, seen_fo = 0, seen_shape = 0;
    for (;;) {
        if (eat(&c, '}')) break;
        char key[32];
        if (!quoted(&c, key, sizeof key) || !eat(&c, ':'))
            return nb_errf(err, "npy header: malformed dict");
        if (strcmp(key, "descr") == 0) {
            char d[32];
            if (seen_descr++) return nb_errf(err, "npy header: 'descr' given twice");
            if (!quoted(&c, d, sizeof d)) return nb_errf(err, "npy header: malformed 'descr'");
            if (strcmp(d, "<f4") != 0)
                return nb_errf(err, "npy dtype '%s' is not little-endian float32 ('<f4')", d);
        } else if (strcmp(key, "fortran_order") == 0) {
            if (seen_fo++) return nb_errf(err, "npy header: 'fortran_order' given twice");
            if (word(&c, "True")) return nb_errf(err, "npy array is in Fortran order, not C order");
            if (!word(&c, "False")) return nb_errf(err, "npy header: malformed 'fortran_order'");
        } else if (strcmp(key, "shape") == 0) {
            if (seen_shape++) return nb_errf(err, "npy header: 'shape' given twice");
            if (parse_shape(&c, out, err) != 0) return -1;
        } else {
            return nb_errf(err, "npy header: unexpected key '%s'", key);
        }
        if (!eat(&c, ',')) {
            if (eat(&c, '}')) break;
            return nb_errf(err, "npy header: malformed dict");
        }
    }
    if (!seen_descr || !seen_fo || !seen_shape)
        return nb_errf(err, "npy header lacks '%s'",
                       !seen_descr ? "descr"
                       : !seen_fo  ? "fortran_order"
                                   : "shape");
    while (c.p < c.end && *c.p == ' ')
        c.p++;
    if (c.p != c.end) return nb_errf(err, "npy header: unexpected text after the dict");
    uint64_t count = 1;
    for (int i = 0; i < out->ndim; i++) {
        if (out->shape[i] != 0 && count > NB_NPY_MAX_COUNT / out->shape[i])
            return nb_errf(err, "npy array is too large");
        count *= out->shape[i];
    }
    if (count > NB_NPY_MAX_COUNT) return nb_errf(err, "npy array is too large");
    out->count = count;
    out->data_off = pre + hlen;
    return 0;
}

static int check_finite(const float *x, uint64_t n, nb_err *err) {
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return nb_errf(err, "npy value %llu is %s", (unsigned long long)i,
                           isnan(x[i]) ? "NaN" : "infinite");
    return 0;
}

int nb_npy_parse(const uint8_t *buf, size_t n, nb_npy *out, nb_err *err) {
    if (nb_npy_parse_header(buf, n, out, err) != 0) return -1;
    uint64_t bytes = out->count * 4;
    if ((uint64_t)(n - out->data_off) != bytes) {
        nb_errf(err, "npy data is %llu bytes, the shape needs %llu",
                (unsigned long long)(n - out->data_off), (unsigned long long)bytes);
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->data = malloc(bytes ? (size_t)bytes : 1);
    if (!out->data) {
        memset(out, 0, sizeof *out);
        return nb_errf(err, "out of memory for a .npy array of %llu values",
                       (unsigned long long)out->count);
    }
    memcpy(out->data, buf + out->data_off, (size_t)bytes);
    out->rows_read = out->ndim ? out->shape[0] : 1;
    if (check_finite(out->data, out->count, err) != 0) {
        nb_npy_free(out);
        return -1;
    }
    return 0;
}

int nb_npy_load(const char *path, uint64_t max_rows, nb_npy *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    int rc = -1;
    uint8_t *hbuf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        nb_errf(err, "cannot stat '%s': %s", path, strerror(errno));
        goto out;
    }
    uint8_t pre[12];
    size_t got = fread(pre, 1, sizeof pre, f);
    if (got < 10) {
        nb_errf(err, "'%s' is not a .npy file (too short)", path);
        goto out;
    }
    size_t hlen = pre[6] == 2 ? (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
                                    (size_t)pre[11] << 24
                              : (size_t)pre[8] | (size_t)pre[9] << 8;
    size_t total = (pre[6] == 2 ? 12 : 10) + (hlen > NPY_MAX_HEADER ? 0 : hlen);
    hbuf = malloc(total > got ? total : got);
    if (!hbuf) {
        nb_errf(err, "out of memory reading '%s'", path);
        goto out;
    }
    memcpy(hbuf, pre, got);
    if (total > got && fread(hbuf + got, 1, total - got, f) != total - got) total = got;
    nb_npy h;
    if (nb_npy_parse_header(hbuf, total > got ? total : got, &h, err) != 0) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        nb_errf(err, "'%s': %s", path, m);
        goto out;
    }
    uint64_t want = h.count * 4;
    if ((uint64_t)st.st_size != h.data_off + want) {
        nb_errf(err, "'%s' holds %llu bytes of data, its shape needs %llu", path,
                (unsigned long long)((uint64_t)st.st_size - h.data_off), (unsigned long long)want);
        nb_hintf(err, "the file is truncated or damaged: fetch it again");
        goto out;
    }
    uint64_t rows = h.ndim ? h.shape[0] : 1, row_vals = rows ? h.count / rows : 0;
    if (max_rows > 0 && h.ndim > 0 && max_rows < rows) rows = max_rows;
    uint64_t n = rows * row_vals;
    if (h.ndim == 0) n = 1;
    h.data = malloc(n ? (size_t)n * 4 : 1);
    if (!h.data) {
        nb_errf(err, "out of memory for the %llu values of '%s'", (unsigned long long)n, path);
        goto out;
    }
    if (fseek(f, (long)h.data_off, SEEK_SET) != 0 || fread(h.data, 4, (size_t)n, f) != (size_t)n) {
        free(h.data);
        nb_errf(err, "cannot read '%s': %s", path, ferror(f) ? strerror(errno) : "short read");
        goto out;
    }
    h.rows_read = rows;
    if (check_finite(h.data, n, err) != 0) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        nb_errf(err, "'%s': %s", path, m);
        free(h.data);
        goto out;
    }
    *out = h;
    rc = 0;
out:
    free(hbuf);
    fclose(f);
    return rc;
}

void nb_npy_free(nb_npy *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
