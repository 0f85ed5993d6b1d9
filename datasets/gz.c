/* datasets/gz.c — see gz.h. */
#include "datasets/gz.h"

#include "util/crc32.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GZ_IN (1 << 16)       /* compressed bytes per read */
#define GZ_KEEP 17            /* bytes kept from the previous read: a trailer and 9 header bytes */
#define GZ_MAX_CAND (1 << 20) /* member boundaries at most (bgzip: one per 64 KiB) */
#define GZ_MAX_TRY 12         /* candidates tried in every combination at most */

typedef struct gz_cand {
    uint32_t crc, isize; /* the 8 bytes before a header, read as a trailer */
} gz_cand;

struct nb_gz {
    char *path;
    int fd;
    volatile sig_atomic_t *stop;
    const unsigned char *mem; /* nb_gz_open_mem */
    size_t mem_len;
    int mem_given, in_eof, interrupted, read_errno, done, failed;
    struct archive *a;
    unsigned char *in; /* GZ_KEEP bytes of history, then the latest read */
    size_t in_len;     /* bytes in `in` after the history */
    uint64_t in_total; /* compressed bytes seen */
    unsigned char last[8];
    gz_cand *cand;
    size_t ncand, cand_cap;
    int too_many;
    uint32_t crc; /* of the decompressed bytes handed out */
    uint64_t out_total;
};

int nb_gz_magic(const void *p, size_t n) {
    const unsigned char *b = p;
    return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Notes every place in buf[from, n) that looks like a member header (RFC 1952: 1f 8b, method 8,
 * no reserved flag, XFL 0, 2 or 4, a known OS) at least 8 bytes after buf's start, the 8 bytes
 * before it taken as the previous member's trailer; base is the stream offset of buf[0]. */
static void scan(nb_gz *g, const unsigned char *buf, size_t n, size_t from, uint64_t base) {
    size_t h = from < 8 ? 8 : from;
    while (h + 10 <= n) {
        const unsigned char *p = memchr(buf + h, 0x1f, n - 9 - h);
        if (!p) break;
        h = (size_t)(p - buf);
        if (p[1] == 0x8b && p[2] == 0x08 && (p[3] & 0xe0) == 0 &&
            (p[8] == 0 || p[8] == 2 || p[8] == 4) && (p[9] <= 13 || p[9] == 255) &&
            base + h >= 18) {
            if (g->ncand == g->cand_cap) {
                size_t nc = g->cand_cap ? 2 * g->cand_cap : 64;
                gz_cand *c = nc <= GZ_MAX_CAND ? realloc(g->cand, nc * sizeof *c) : NULL;
                if (!c) {
                    g->too_many = 1;
                    return;
                }
                g->cand = c;
                g->cand_cap = nc;
            }
            g->cand[g->ncand].crc = le32(p - 8);
            g->cand[g->ncand].isize = le32(p - 4);
            g->ncand++;
        }
        h++;
    }
}

/* Takes in the n newest bytes at in + GZ_KEEP (the history before them already in place). */
static void take(nb_gz *g, size_t n) {
    size_t have = g->in_total < GZ_KEEP ? (size_t)g->in_total : GZ_KEEP;
    const unsigned char *buf = g->in + GZ_KEEP - have;
    scan(g, buf, have + n, have > 9 ? have - 9 : 0, g->in_total - have);
    g->in_total += n;
    g->in_len = n;
    if (have + n >= 8) memcpy(g->last, buf + have + n - 8, 8);
}

/* libarchive's read callback: the compressed bytes, seen on their way. */
static la_ssize_t on_read(struct archive *a, void *ud, const void **out) {
    nb_gz *g = ud;
    if (g->mem) {
        if (g->mem_given) {
            g->in_eof = 1;
            return 0;
        }
        g->mem_given = 1;
        scan(g, g->mem, g->mem_len, 0, 0);
        g->in_total = g->mem_len;
        if (g->mem_len >= 8) memcpy(g->last, g->mem + g->mem_len - 8, 8);
        *out = g->mem;
        return (la_ssize_t)g->mem_len;
    }
    /* keep the last GZ_KEEP bytes as history for headers that straddle two reads */
    memmove(g->in, g->in + g->in_len, GZ_KEEP);
    for (;;) {
        if (g->too_many) { /* e.g. empty members without end, from a pipe */
            archive_set_error(a, EFBIG, "more than %d gzip members", GZ_MAX_CAND);
            return -1;
        }
        if (g->stop && *g->stop) {
            g->interrupted = 1;
            archive_set_error(a, EINTR, "interrupted");
            return -1;
        }
        ssize_t k = read(g->fd, g->in + GZ_KEEP, GZ_IN);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            g->read_errno = errno;
            archive_set_error(a, errno, "%s", strerror(errno));
            return -1;
        }
        if (k == 0) g->in_eof = 1;
        take(g, (size_t)k);
        *out = g->in + GZ_KEEP;
        return (la_ssize_t)k;
    }
}

static int start(nb_gz *g, nb_err *err) {
    g->a = archive_read_new();
    if (!g->a) return nb_errf(err, "cannot read '%s': out of memory", g->path);
    archive_read_support_filter_gzip(g->a);
    archive_read_support_format_raw(g->a);
    struct archive_entry *e;
    if (archive_read_open(g->a, g, NULL, on_read, NULL) != ARCHIVE_OK ||
        archive_read_next_header(g->a, &e) != ARCHIVE_OK) {
        if (g->interrupted) return nb_errf(err, "reading '%s' interrupted", g->path);
        const char *why = archive_error_string(g->a);
        /* the raw format finds nothing in an empty or undecodable stream */
        if (!why || strstr(why, "Unrecognized archive format"))
            why = "the gzip stream is empty or damaged";
        return nb_errf(err, "cannot decompress '%s': %s", g->path, why);
    }
    if (archive_filter_code(g->a, 0) != ARCHIVE_FILTER_GZIP)
        return nb_errf(err, "'%s' is not a gzip file", g->path);
    return 0;
}

int nb_gz_open(nb_gz **out, const char *path, volatile sig_atomic_t *stop, nb_err *err) {
    *out = NULL;
    nb_gz *g = calloc(1, sizeof *g);
    if (g) g->fd = -1;
    if (!g || !(g->path = strdup(path)) || !(g->in = calloc(1, GZ_KEEP + GZ_IN))) {
        nb_gz_close(g);
        return nb_errf(err, "cannot read '%s': out of memory", path);
    }
    g->stop = stop;
    g->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (g->fd < 0) {
        int e = errno;
        nb_gz_close(g);
        return nb_errf(err, "cannot open '%s': %s", path, strerror(e));
    }
    if (start(g, err)) {
        nb_gz_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

int nb_gz_open_mem(nb_gz **out, const void *data, size_t size, const char *name, nb_err *err) {
    *out = NULL;
    nb_gz *g = calloc(1, sizeof *g);
    if (g) g->fd = -1;
    if (!g || !(g->path = strdup(name))) {
        nb_gz_close(g);
        return nb_errf(err, "cannot read '%s': out of memory", name);
    }
    g->mem = data;
    g->mem_len = size;
    if (!g->mem) g->mem = (const unsigned char *)"";
    if (start(g, err)) {
        nb_gz_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

/* Whether the trailers of the members that end at the candidates use[i] picked by mask (all
 * with all), then the last member's, add up to the data handed out. */
static int trailers_match(const nb_gz *g, const size_t *use, size_t nuse, unsigned long mask,
                          int all) {
    uint32_t crc = 0;
    uint64_t len = 0;
    for (size_t i = 0; i < nuse; i++) {
        if (!all && !(mask >> i & 1)) continue;
        const gz_cand *c = &g->cand[use[i]];
        crc = nb_crc32_combine(crc, c->crc, c->isize);
        len += c->isize;
    }
    uint32_t lc = le32(g->last), ll = le32(g->last + 4);
    crc = nb_crc32_combine(crc, lc, ll);
    len += ll;
    return crc == g->crc && len == g->out_total;
}

/* Several members: which candidates are real boundaries. A candidate whose member would be longer
 * than all the data is not one; of the others, all are tried together (the usual case: cat,
 * bgzip), then, when there are at most GZ_MAX_TRY, every subset. */
static int members_match(const nb_gz *g) {
    size_t *use = malloc((g->ncand ? g->ncand : 1) * sizeof *use), nuse = 0;
    if (!use) return 0;
    for (size_t i = 0; i < g->ncand; i++)
        if (g->cand[i].isize <= g->out_total) use[nuse++] = i;
    int ok = nuse > 0 && trailers_match(g, use, nuse, 0, 1);
    if (!ok && nuse > 1 && nuse <= GZ_MAX_TRY)
        for (unsigned long m = 1; m < (1ul << nuse) - 1 && !ok; m++)
            ok = trailers_match(g, use, nuse, m, 0);
    free(use);
    return ok;
}

/* At the end of the stream: the trailers against the data. */
static int check_end(nb_gz *g, nb_err *err) {
    /* libarchive stops at the first byte that is not a gzip header: read what is left, so that
     * data after the last member makes the last 8 bytes a non-trailer (and the check fail) */
    while (!g->mem && !g->in_eof && !g->too_many) {
        const void *p;
        if (on_read(g->a, g, &p) < 0) {
            if (g->interrupted) return nb_errf(err, "reading '%s' interrupted", g->path);
            return nb_errf(err, "cannot read '%s': %s", g->path, strerror(g->read_errno));
        }
    }
    if (g->too_many)
        return nb_errf(err, "'%s' holds more than %d gzip members: refused", g->path, GZ_MAX_CAND);
    if (g->in_total < 18)
        return nb_errf(err, "'%s' is truncated: %llu bytes, too short for a gzip stream", g->path,
                       (unsigned long long)g->in_total);
    uint32_t lc = le32(g->last), ll = le32(g->last + 4);
    /* one member: its trailer holds the CRC-32 and the length mod 2^32 */
    if (lc == g->crc && ll == (uint32_t)g->out_total) return 0;
    if (g->ncand > 0 && members_match(g)) return 0;
    return nb_errf(err,
                   "'%s' is damaged: gzip CRC-32 or length mismatch (the trailer records CRC-32 "
                   "%08x and %u bytes, the data decompressed to CRC-32 %08x and %llu bytes)",
                   g->path, (unsigned)lc, (unsigned)ll, (unsigned)g->crc,
                   (unsigned long long)g->out_total);
}

long long nb_gz_read(nb_gz *g, void *buf, size_t n, nb_err *err) {
    if (g->failed) return nb_errf(err, "cannot read '%s': an earlier read failed", g->path);
    if (g->done) return 0;
    if (g->stop && *g->stop) {
        g->failed = 1;
        return nb_errf(err, "reading '%s' interrupted", g->path);
    }
    if (n == 0) return 0;
    la_ssize_t k = archive_read_data(g->a, buf, n);
    if (k < 0) {
        g->failed = 1;
        if (g->interrupted) return nb_errf(err, "reading '%s' interrupted", g->path);
        if (g->read_errno)
            return nb_errf(err, "cannot read '%s': %s", g->path, strerror(g->read_errno));
        const char *why = archive_error_string(g->a);
        return nb_errf(err, "cannot decompress '%s': %s", g->path,
                       why ? why : "damaged gzip stream");
    }
    if (k > 0) {
        g->crc = nb_crc32(g->crc, buf, (size_t)k);
        g->out_total += (uint64_t)k;
        return (long long)k;
    }
    if (check_end(g, err)) {
        g->failed = 1;
        return -1;
    }
    g->done = 1;
    return 0;
}

void nb_gz_close(nb_gz *g) {
    if (!g) return;
    if (g->a) archive_read_free(g->a);
    if (g->fd >= 0) close(g->fd);
    free(g->cand);
    free(g->in);
    free(g->path);
    free(g);
}
