/* datasets/idx.c — the IDX parser (LeCun's MNIST format), plain or gzip-compressed.
 *
 * Whether a file is compressed is decided by its first two bytes (gzip's 1f 8b), not by its
 * name. Compressed files go through datasets/gz.h (libarchive, each gzip trailer checked). The
 * file is never trusted: the header is checked before anything is allocated, the claimed size is
 * capped (NB_IDX_MAX_BYTES, so that a decompression bomb is refused without inflating it), and the
 * data must be exactly as long as the header says. */
#include "datasets/mnist.h"

#include "datasets/gz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a user can do about a damaged file, for every hint in this file. */
#define IDX_HINT                                                                                   \
    "the file is damaged or is not an IDX file: download it again (for Fashion-MNIST: sudo "       \
    "apt-get install --reinstall dataset-fashion-mnist)"

/* A byte source: a plain FILE or a gzip stream (its CRC-32 and length checked at its end). */
typedef struct idx_src {
    const char *path;
    FILE *f;
    nb_gz *a;
    const unsigned char *mem; /* in-memory input (nb_idx_read_mem) when neither f nor a */
    size_t mem_len, mem_pos;
} idx_src;

/* Reads up to n bytes, looping over short reads. Returns the number read (less than n only at
 * the end of the data), or -1 with err filled in. */
static long long src_read(idx_src *s, void *buf, size_t n, nb_err *err) {
    size_t got = 0;
    while (got < n) {
        if (!s->f && !s->a) {
            size_t k = s->mem_len - s->mem_pos < n - got ? s->mem_len - s->mem_pos : n - got;
            if (k == 0) break;
            memcpy((char *)buf + got, s->mem + s->mem_pos, k);
            s->mem_pos += k;
            got += k;
        } else if (s->f) {
            size_t k = fread((char *)buf + got, 1, n - got, s->f);
            if (k == 0) {
                if (ferror(s->f)) {
                    int e = errno;
                    nb_errf(err, "cannot read '%s': %s", s->path, strerror(e ? e : EIO));
                    return -1;
                }
                break;
            }
            got += k;
        } else {
            long long k = nb_gz_read(s->a, (char *)buf + got, n - got, err);
            if (k < 0) {
                nb_hintf(err, IDX_HINT);
                return -1;
            }
            if (k == 0) break;
            got += (size_t)k;
        }
    }
    return (long long)got;
}

/* Opens path, sniffing for gzip. Returns 0, or -1 with err filled in. */
static int src_open(idx_src *s, const char *path, nb_err *err) {
    memset(s, 0, sizeof *s);
    s->path = path;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        nb_errf(err, "cannot open '%s': %s", path, strerror(e));
        if (e == ENOENT) nb_hintf(err, "check the path, or download the file again");
        return -1;
    }
    unsigned char sig[2] = {0, 0};
    size_t k = fread(sig, 1, 2, f);
    if (k == 2 && sig[0] == 0x1f && sig[1] == 0x8b) {
        fclose(f);
        if (nb_gz_open(&s->a, path, NULL, err)) return nb_hintf(err, IDX_HINT);
        return 0;
    }
    if (ferror(f) || fseek(f, 0, SEEK_SET) != 0) {
        int e = errno;
        fclose(f);
        return nb_errf(err, "cannot read '%s': %s", path, strerror(e ? e : EIO));
    }
    s->f = f;
    return 0;
}

/* Opens an in-memory input, sniffing for gzip. Returns 0, or -1 with err filled in. */
static int src_open_mem(idx_src *s, const void *data, size_t size, const char *name, nb_err *err) {
    memset(s, 0, sizeof *s);
    s->path = name;
    const unsigned char *p = data;
    if (size >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        if (nb_gz_open_mem(&s->a, data, size, name, err)) return nb_hintf(err, IDX_HINT);
        return 0;
    }
    s->mem = p;
    s->mem_len = size;
    return 0;
}

static void src_close(idx_src *s) {
    if (s->f) fclose(s->f);
    nb_gz_close(s->a);
    s->f = NULL;
    s->a = NULL;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Parses an opened source (closed here). */
static int idx_parse(idx_src *sp, const char *path, int expect_ndims, nb_idx *out, nb_err *err);

int nb_idx_read(const char *path, int expect_ndims, nb_idx *out, nb_err *err) {
    idx_src s;
    memset(out, 0, sizeof *out);
    if (expect_ndims < 1 || expect_ndims > 4)
        return nb_errf(err, "cannot read '%s': %d dimensions asked for, at most 4 supported", path,
                       expect_ndims);
    if (src_open(&s, path, err)) return -1;
    return idx_parse(&s, path, expect_ndims, out, err);
}

int nb_idx_read_mem(const void *data, size_t size, const char *name, int expect_ndims, nb_idx *out,
                    nb_err *err) {
    idx_src s;
    memset(out, 0, sizeof *out);
    if (expect_ndims < 1 || expect_ndims > 4)
        return nb_errf(err, "cannot read '%s': %d dimensions asked for, at most 4 supported", name,
                       expect_ndims);
    if (src_open_mem(&s, data, size, name, err)) return -1;
    return idx_parse(&s, name, expect_ndims, out, err);
}

static int idx_parse(idx_src *sp, const char *path, int expect_ndims, nb_idx *out, nb_err *err) {
    int rc = -1;
    idx_src s = *sp;
    unsigned char *data = NULL;

    unsigned char hdr[4 + 4 * 4];
    long long k = src_read(&s, hdr, 4, err);
    if (k < 0) goto done;
    if (k < 4) {
        nb_errf(err, "'%s' is truncated: %lld bytes, too short for an IDX header", path, k);
        nb_hintf(err, IDX_HINT);
        goto done;
    }
    uint32_t magic = be32(hdr);
    uint32_t want = 0x00000800u | (uint32_t)expect_ndims;
    if (hdr[0] != 0 || hdr[1] != 0) {
        nb_errf(err, "'%s' is not an IDX file: bad magic 0x%08x (expected 0x%08x)", path,
                (unsigned)magic, (unsigned)want);
        nb_hintf(err, IDX_HINT);
        goto done;
    }
    if (hdr[2] != 0x08) {
        nb_errf(err, "'%s' has IDX element type 0x%02x, expected 0x08 (unsigned bytes)", path,
                hdr[2]);
        nb_hintf(err, IDX_HINT);
        goto done;
    }
    if (hdr[3] != expect_ndims) {
        nb_errf(err, "'%s' has magic 0x%08x (%d dimension%s), expected 0x%08x (%d dimension%s%s)",
                path, (unsigned)magic, hdr[3], hdr[3] == 1 ? "" : "s", (unsigned)want, expect_ndims,
                expect_ndims == 1 ? "" : "s",
                expect_ndims == 3   ? ": images"
                : expect_ndims == 1 ? ": labels"
                                    : "");
        nb_hintf(err, "check that the images and labels files are not swapped; otherwise %s",
                 IDX_HINT);
        goto done;
    }
    k = src_read(&s, hdr + 4, 4 * (size_t)expect_ndims, err);
    if (k < 0) goto done;
    if (k < 4 * expect_ndims) {
        nb_errf(err, "'%s' is truncated: its header ends after %lld of %d bytes", path, 4 + k,
                4 + 4 * expect_ndims);
        nb_hintf(err, IDX_HINT);
        goto done;
    }
    uint64_t size = 1;
    for (int i = 0; i < expect_ndims; i++) {
        out->dims[i] = be32(hdr + 4 + 4 * i);
        if (out->dims[i] == 0) {
            nb_errf(err, "'%s' has size 0 in dimension %d", path, i + 1);
            nb_hintf(err, IDX_HINT);
            goto done;
        }
        size *= out->dims[i];
        if (size > NB_IDX_MAX_BYTES) {
            nb_errf(err,
                    "'%s' claims more than %u MiB of data, over the limit for an IDX file "
                    "(refused as a possible decompression bomb)",
                    path, (unsigned)(NB_IDX_MAX_BYTES >> 20));
            nb_hintf(err, IDX_HINT);
            goto done;
        }
    }
    out->ndims = expect_ndims;

    data = malloc(size);
    if (!data) {
        nb_errf(err, "cannot read '%s': out of memory for %llu bytes", path,
                (unsigned long long)size);
        goto done;
    }
    k = src_read(&s, data, size, err);
    if (k < 0) goto done;
    if ((uint64_t)k < size) {
        nb_errf(err, "'%s' is truncated: expected %llu bytes of data, found %lld", path,
                (unsigned long long)size, k);
        nb_hintf(err, IDX_HINT);
        goto done;
    }
    /* Anything after the data is an error; count it, but never past the cap. */
    unsigned char scratch[1 << 14];
    uint64_t extra = 0;
    for (;;) {
        k = src_read(&s, scratch, sizeof scratch, err);
        if (k < 0) goto done;
        extra += (uint64_t)k;
        if ((size_t)k < sizeof scratch || extra > NB_IDX_MAX_BYTES) break;
    }
    if (extra > 0) {
        nb_errf(err, "'%s' has %s%llu bytes after the %llu bytes of data its header declares", path,
                extra > NB_IDX_MAX_BYTES ? "more than " : "", (unsigned long long)extra,
                (unsigned long long)size);
        nb_hintf(err, IDX_HINT);
        goto done;
    }
    out->data = data;
    out->size = (size_t)size;
    data = NULL;
    rc = 0;
done:
    src_close(&s);
    free(data);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

void nb_idx_free(nb_idx *idx) {
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}
