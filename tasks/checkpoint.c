/* tasks/checkpoint.c — see checkpoint.h. */
#include "tasks/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char head_magic[8] = "NBCKPT1";
static const char tail_magic[8] = "NBEND01";

/* FNV-1a, 64 bits: detects a damaged file; not a security measure. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int write_all(FILE *f, const void *p, size_t n, uint64_t *h) {
    *h = fnv(*h, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

int nb_ckpt_write(const char *path, const nb_ckpt_state *st, const nb_ckpt_blob *blobs, int nblobs,
                  nb_err *err) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return nb_errf(err, "checkpoint path '%s' is too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        nb_errf(err, "cannot write checkpoint '%s': %s", tmp, strerror(errno));
        return nb_hintf(err, "check that the directory exists and is writable");
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    uint32_t nb = (uint32_t)nblobs;
    int bad = write_all(f, head_magic, sizeof head_magic, &h) || write_all(f, st, sizeof *st, &h) ||
              write_all(f, &nb, sizeof nb, &h);
    for (int i = 0; i < nblobs && !bad; i++) {
        uint64_t n = blobs[i].n;
        bad = write_all(f, &n, sizeof n, &h) || write_all(f, blobs[i].p, blobs[i].n, &h);
    }
    /* the trailer, last */
    uint64_t dummy = 0;
    bad = bad || write_all(f, tail_magic, sizeof tail_magic, &dummy) ||
          fwrite(&h, sizeof h, 1, f) != 1;
    int saved = errno;
    if (bad || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        saved = errno;
        fclose(f);
        unlink(tmp);
        nb_errf(err, "cannot write checkpoint '%s': %s", path, strerror(saved));
        return nb_hintf(err, "is the disk full? the previous checkpoint is kept");
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        saved = errno;
        unlink(tmp);
        return nb_errf(err, "cannot install checkpoint '%s': %s", path, strerror(saved));
    }
    /* make the rename itself durable */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

static int read_all(FILE *f, void *p, size_t n, uint64_t *h) {
    if (fread(p, 1, n, f) != n) return -1;
    *h = fnv(*h, p, n);
    return 0;
}

int nb_ckpt_read(const char *path, nb_ckpt_state *st, const nb_ckpt_blob *blobs, int nblobs,
                 nb_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open checkpoint '%s': %s", path, strerror(errno));
    uint64_t h = 0xcbf29ce484222325ULL;
    char magic[8];
    uint32_t nb = 0;
    const char *why = NULL;
    if (read_all(f, magic, sizeof magic, &h) || memcmp(magic, head_magic, sizeof magic) != 0)
        why = "not a normbench checkpoint";
    else if (read_all(f, st, sizeof *st, &h) || read_all(f, &nb, sizeof nb, &h))
        why = "truncated";
    else if (nb != (uint32_t)nblobs)
        why = "written by a different model";
    for (int i = 0; i < nblobs && !why; i++) {
        uint64_t n;
        if (read_all(f, &n, sizeof n, &h))
            why = "truncated";
        else if (n != blobs[i].n)
            why = "written by a different model or dataset (sizes differ)";
        else if (read_all(f, blobs[i].p, blobs[i].n, &h))
            why = "truncated";
    }
    uint64_t stored = 0;
    if (!why &&
        (fread(magic, 1, sizeof magic, f) != sizeof magic ||
         memcmp(magic, tail_magic, sizeof magic) != 0 || fread(&stored, sizeof stored, 1, f) != 1))
        why = "incomplete (no trailer)";
    else if (!why && stored != h)
        why = "damaged (checksum mismatch)";
    else if (!why && fgetc(f) != EOF)
        why = "followed by unexpected bytes";
    fclose(f);
    if (why) {
        nb_errf(err, "checkpoint '%s' is %s", path, why);
        return nb_hintf(err, "the run cannot be resumed from it; start a new run");
    }
    return 0;
}

int nb_ckpt_read_state(const char *path, nb_ckpt_state *st, nb_err *err) {
    /* Read the whole file once to verify it, keeping only the state. */
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open checkpoint '%s': %s", path, strerror(errno));
    uint32_t nb = 0;
    char magic[8];
    int ok = fread(magic, 1, sizeof magic, f) == sizeof magic &&
             memcmp(magic, head_magic, sizeof magic) == 0 && fread(st, sizeof *st, 1, f) == 1 &&
             fread(&nb, sizeof nb, 1, f) == 1 && nb <= 64;
    nb_ckpt_blob blobs[64];
    uint64_t sizes[64];
    for (uint32_t i = 0; ok && i < nb; i++) {
        ok =
            fread(&sizes[i], sizeof sizes[i], 1, f) == 1 && fseek(f, (long)sizes[i], SEEK_CUR) == 0;
        blobs[i].n = (size_t)sizes[i];
    }
    fclose(f);
    if (!ok) {
        nb_errf(err, "checkpoint '%s' is not a complete normbench checkpoint", path);
        return nb_hintf(err, "the run cannot be resumed from it; start a new run");
    }
    /* Now the full check, with the sizes it declares. */
    void *mem[64];
    int rc = 0;
    for (uint32_t i = 0; i < nb; i++) {
        mem[i] = malloc(blobs[i].n ? blobs[i].n : 1);
        blobs[i].p = mem[i];
        if (!mem[i]) rc = nb_errf(err, "out of memory reading checkpoint '%s'", path);
    }
    if (rc == 0) rc = nb_ckpt_read(path, st, blobs, (int)nb, err);
    for (uint32_t i = 0; i < nb; i++)
        free(mem[i]);
    return rc;
}
