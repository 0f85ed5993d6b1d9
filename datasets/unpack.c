/* datasets/unpack.c — see unpack.h. */
#include "datasets/unpack.h"

#include "datasets/download.h"
#include "datasets/gz.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HINT_BAD                                                                                   \
    "the archive is damaged or is not the dataset's: delete it and fetch again, or use --mirror"

/* Writes all of buf to fd. Returns 0, or -1 with errno set. */
static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* mkdir -p for the directories of rel (a member name) below root. */
static int make_parents(const char *root, const char *rel, nb_err *err) {
    char path[4096];
    int k = snprintf(path, sizeof path, "%s/%s", root, rel);
    if (k < 0 || (size_t)k >= sizeof path) return nb_errf(err, "path too long under '%s'", root);
    size_t rl = strlen(root) + 1;
    for (char *p = path + rl; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            return nb_errf(err, "cannot create '%s': %s", path, strerror(e));
        }
        *p = '/';
    }
    return 0;
}

/* Whether name is safe: relative, no "..", no empty or "." tricks that escape. */
static const char *unsafe_reason(const char *name) {
    if (!name || !*name) return "an empty name";
    if (name[0] == '/') return "an absolute path";
    if (strchr(name, '\\')) return "a backslash in its name";
    const char *p = name;
    while (*p) {
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return "a '..' component";
        if (!q) break;
        p = q + 1;
    }
    return NULL;
}

/* Matches an archive path to a member: the member's path itself, or below one top directory.
 * "./" prefixes are dropped. Returns the member index, or -1. */
static int match_member(const nb_dataset *d, const char *name) {
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    const char *below = strchr(name, '/');
    for (int i = 0; i < d->nmembers; i++) {
        const char *want = d->members[i].path ? d->members[i].path : d->members[i].name;
        if (strcmp(name, want) == 0) return i;
        if (below && strcmp(below + 1, want) == 0) return i;
    }
    return -1;
}

static int is_extra(const nb_dataset *d, const char *name) {
    if (!d->extra) return 0;
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    for (int i = 0; d->extra[i]; i++)
        if (strcmp(base, d->extra[i]) == 0) return 1;
    return 0;
}

/* A .tar.gz: libarchive reads the tar from the gzip stream that datasets/gz.h decompresses (its
 * gzip filter would not check the trailers). */
typedef struct gz_feed {
    nb_gz *gz;
    unsigned char *buf;
    int failed;
    nb_err err;
} gz_feed;

static la_ssize_t feed_read(struct archive *a, void *ud, const void **out) {
    gz_feed *f = ud;
    long long k = nb_gz_read(f->gz, f->buf, 1 << 16, &f->err);
    if (k < 0) {
        f->failed = 1;
        archive_set_error(a, EIO, "%s", f->err.msg);
        return -1;
    }
    *out = f->buf;
    return (la_ssize_t)k;
}

/* Fills err for an archive that failed to read: the gzip stream's own error (it names the file),
 * else libarchive's (or dflt) about archive_path and, when given, its member name. Hints at a
 * damaged archive unless it was stopped. Returns -1. */
static int read_failed(nb_err *err, const char *archive_path, const char *name, struct archive *a,
                       const gz_feed *f, volatile sig_atomic_t *stop, const char *dflt) {
    const char *why = archive_error_string(a);
    if (f->failed)
        nb_errf(err, "%s", f->err.msg);
    else if (name)
        nb_errf(err, "cannot unpack '%s' from '%s': %s", name, archive_path, why ? why : dflt);
    else
        nb_errf(err, "cannot unpack '%s': %s", archive_path, why ? why : dflt);
    if (stop && *stop) return -1;
    return nb_hintf(err, HINT_BAD);
}

int nb_unpack(const char *archive_path, const nb_dataset *d, const char *out_dir,
              volatile sig_atomic_t *stop, nb_err *err) {
    int rc = -1, fd = -1;
    char *seen = calloc((size_t)d->nmembers, 1);
    char *buf = malloc(1 << 16);
    struct archive *a = archive_read_new();
    gz_feed feed = {NULL, NULL, 0, {"", ""}};
    char out[4096];
    if (!seen || !buf || !a || !(feed.buf = malloc(1 << 16))) {
        nb_errf(err, "cannot unpack '%s': out of memory", archive_path);
        goto done;
    }
    /* a regular file only (never a device or FIFO); gzip or not by its first bytes */
    unsigned char magic[2] = {0, 0};
    int in = nb_open_input(archive_path, 0, err);
    if (in < 0) goto done;
    ssize_t nmagic = read(in, magic, 2);
    close(in);
    archive_read_support_format_tar(a);
    if (nb_gz_magic(magic, nmagic > 0 ? (size_t)nmagic : 0)) {
        if (nb_gz_open(&feed.gz, archive_path, stop, err)) {
            nb_hintf(err, HINT_BAD);
            goto done;
        }
        if (archive_read_open(a, &feed, NULL, feed_read, NULL) != ARCHIVE_OK) {
            read_failed(err, archive_path, NULL, a, &feed, stop, "not a tar archive");
            goto done;
        }
    } else {
        archive_read_support_format_zip(a);
        if (archive_read_open_filename(a, archive_path, 1 << 16) != ARCHIVE_OK) {
            const char *why = archive_error_string(a);
            nb_errf(err, "cannot unpack '%s': %s", archive_path, why ? why : "not an archive");
            nb_hintf(err, HINT_BAD);
            goto done;
        }
    }
    for (;;) {
        struct archive_entry *e;
        if (stop && *stop) {
            nb_errf(err, "unpacking '%s' interrupted", archive_path);
            goto done;
        }
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            read_failed(err, archive_path, NULL, a, &feed, stop, "damaged archive");
            goto done;
        }
        const char *name = archive_entry_pathname(e);
        const char *bad = unsafe_reason(name);
        if (bad) {
            nb_errf(err, "refusing archive '%s': member '%s' has %s", archive_path,
                    name ? name : "", bad);
            nb_hintf(err, HINT_BAD);
            goto done;
        }
        mode_t type = archive_entry_filetype(e);
        if (archive_entry_hardlink(e) || type == AE_IFLNK) {
            nb_errf(err, "refusing archive '%s': member '%s' is a link", archive_path, name);
            nb_hintf(err, HINT_BAD);
            goto done;
        }
        if (type == AE_IFDIR) continue;
        if (type != AE_IFREG) {
            nb_errf(err,
                    "refusing archive '%s': member '%s' is not a regular file (a device, "
                    "FIFO or socket)",
                    archive_path, name);
            nb_hintf(err, HINT_BAD);
            goto done;
        }
        int m = match_member(d, name);
        if (m < 0) {
            if (d->strict && !is_extra(d, name)) {
                nb_errf(err, "refusing archive '%s': unexpected member '%s'", archive_path, name);
                nb_hintf(err, HINT_BAD);
                goto done;
            }
            continue; /* skipped: its data is never written */
        }
        const nb_member *mem = &d->members[m];
        if (seen[m]) {
            nb_errf(err, "refusing archive '%s': member '%s' appears twice", archive_path, name);
            nb_hintf(err, HINT_BAD);
            goto done;
        }
        seen[m] = 1;
        if (archive_entry_size_is_set(e) && (uint64_t)archive_entry_size(e) > mem->max_size) {
            nb_errf(err,
                    "refusing archive '%s': member '%s' declares %lld bytes, more than the "
                    "%llu allowed",
                    archive_path, name, (long long)archive_entry_size(e),
                    (unsigned long long)mem->max_size);
            nb_hintf(err, HINT_BAD);
            goto done;
        }
        if (make_parents(out_dir, mem->name, err)) goto done;
        snprintf(out, sizeof out, "%s/%s", out_dir, mem->name);
        fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            int en = errno;
            nb_errf(err, "cannot create '%s': %s", out, strerror(en));
            goto done;
        }
        uint64_t total = 0;
        for (;;) {
            if (stop && *stop) {
                nb_errf(err, "unpacking '%s' interrupted", archive_path);
                goto done;
            }
            la_ssize_t k = archive_read_data(a, buf, 1 << 16);
            if (k < 0) {
                read_failed(err, archive_path, name, a, &feed, stop, "damaged archive");
                goto done;
            }
            if (k == 0) break;
            total += (uint64_t)k;
            if (total > mem->max_size) {
                nb_errf(err,
                        "refusing archive '%s': member '%s' holds more than the %llu bytes "
                        "allowed",
                        archive_path, name, (unsigned long long)mem->max_size);
                nb_hintf(err, HINT_BAD);
                goto done;
            }
            if (write_all(fd, buf, (size_t)k) != 0) {
                int en = errno;
                nb_errf(err, "cannot write '%s': %s", out, strerror(en));
                nb_hintf(err, "free some space, or choose another data directory with --data-dir");
                goto done;
            }
        }
        if (fsync(fd) != 0 || close(fd) != 0) {
            int en = errno;
            fd = -1;
            nb_errf(err, "cannot write '%s': %s", out, strerror(en));
            goto done;
        }
        fd = -1;
    }
    /* the rest of the gzip stream (the tar's padding): read to its end, where its trailer is
     * checked */
    while (feed.gz) {
        long long k = nb_gz_read(feed.gz, buf, 1 << 16, &feed.err);
        if (k == 0) break;
        if (k < 0) {
            feed.failed = 1;
            read_failed(err, archive_path, NULL, a, &feed, stop, "damaged archive");
            goto done;
        }
    }
    for (int i = 0; i < d->nmembers; i++)
        if (!seen[i]) {
            nb_errf(err, "archive '%s' lacks the member '%s'", archive_path, d->members[i].name);
            nb_hintf(err, HINT_BAD);
            goto done;
        }
    rc = 0;
done:
    if (fd >= 0) close(fd);
    if (a) archive_read_free(a);
    nb_gz_close(feed.gz);
    free(feed.buf);
    free(buf);
    free(seen);
    return rc;
}

int nb_copy_file(const char *src, const char *dst, int64_t max_bytes, volatile sig_atomic_t *stop,
                 nb_err *err) {
    int rc = -1, in = -1, out = -1;
    char *buf = malloc(1 << 16);
    if (!buf) return nb_errf(err, "cannot copy '%s': out of memory", src);
    in = nb_open_input(src, max_bytes, err);
    if (in < 0) goto done;
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        nb_errf(err, "cannot create '%s': %s", dst, strerror(e));
        goto done;
    }
    int64_t total = 0;
    for (;;) {
        if (stop && *stop) {
            nb_errf(err, "copying '%s' interrupted", src);
            goto done;
        }
        ssize_t k = read(in, buf, 1 << 16);
        if (k < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            nb_errf(err, "cannot read '%s': %s", src, strerror(e));
            goto done;
        }
        if (k == 0) break;
        total += (int64_t)k;
        if (max_bytes > 0 && total > max_bytes) {
            nb_errf(err, "'%s' grew past the %lld bytes expected for it while being copied", src,
                    (long long)max_bytes);
            goto done;
        }
        if (write_all(out, buf, (size_t)k) != 0) {
            int e = errno;
            nb_errf(err, "cannot write '%s': %s", dst, strerror(e));
            nb_hintf(err, "free some space, or choose another data directory with --data-dir");
            goto done;
        }
    }
    if (fsync(out) != 0) {
        int e = errno;
        nb_errf(err, "cannot write '%s': %s", dst, strerror(e));
        goto done;
    }
    rc = 0;
done:
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0 && rc == 0) {
        int e = errno;
        rc = nb_errf(err, "cannot write '%s': %s", dst, strerror(e));
    }
    free(buf);
    return rc;
}
