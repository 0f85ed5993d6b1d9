/* tasks/checkpoint.c — see checkpoint.h. */
#include "tasks/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/file.h"

static const char head_magic[8] = "NBCKPT2";
static const char head_magic_v1[8] = "NBCKPT1"; /* no identity: refused */
static const char tail_magic[8] = "NBEND01";

_Static_assert(sizeof(nb_ckpt_ident) == 40 + 32 + 32 + 3 * 8, "nb_ckpt_ident has no padding");

/* FNV-1a, 64 bits: detects a damaged file; not a security measure. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t nb_ckpt_config_hash(const char *json) {
    return fnv(0xcbf29ce484222325ULL, json ? json : "", json ? strlen(json) : 0);
}

void nb_ckpt_ident_set(nb_ckpt_ident *id, const char *store, int64_t run, const char *task,
                       const char *norm, int64_t seed, const char *config_json) {
    memset(id, 0, sizeof *id);
    snprintf(id->store, sizeof id->store, "%s", store ? store : "");
    snprintf(id->task, sizeof id->task, "%s", task ? task : "");
    snprintf(id->norm, sizeof id->norm, "%s", norm ? norm : "");
    id->run = run;
    id->seed = seed;
    id->config_hash = nb_ckpt_config_hash(config_json);
}

/* A string field read from a file, made safe to print. */
static const char *field(const char *f, size_t n, char *buf) {
    size_t i = 0;
    for (; i < n && f[i]; i++)
        buf[i] = (f[i] >= 0x20 && f[i] < 0x7f) ? f[i] : '?';
    buf[i] = '\0';
    return buf;
}

int nb_ckpt_ident_check(const char *path, const nb_ckpt_ident *have, const nb_ckpt_ident *want,
                        nb_err *err) {
    char why[1024] = "";
    size_t len = 0;
    char a[48], b[48];
#define DIFF(...)                                                                                  \
    do {                                                                                           \
        if (len < sizeof why)                                                                      \
            len += (size_t)snprintf(why + len, sizeof why - len, "%s", len ? "; " : "");           \
        if (len < sizeof why) len += (size_t)snprintf(why + len, sizeof why - len, __VA_ARGS__);   \
    } while (0)
    if (memcmp(have->store, want->store, sizeof have->store) != 0)
        DIFF("it was written for store %s, this store is %s",
             have->store[0] ? field(have->store, sizeof have->store, a) : "(none)",
             field(want->store, sizeof want->store, b));
    if (have->run != want->run)
        DIFF("it belongs to run %lld, not %lld", (long long)have->run, (long long)want->run);
    if (memcmp(have->task, want->task, sizeof have->task) != 0)
        DIFF("task %s, not %s", field(have->task, sizeof have->task, a),
             field(want->task, sizeof want->task, b));
    if (memcmp(have->norm, want->norm, sizeof have->norm) != 0)
        DIFF("norm %s, not %s", field(have->norm, sizeof have->norm, a),
             field(want->norm, sizeof want->norm, b));
    if (have->seed != want->seed)
        DIFF("seed %lld, not %lld", (long long)have->seed, (long long)want->seed);
    if (have->config_hash != want->config_hash)
        DIFF("its configuration differs (hash %016llx, not %016llx)",
             (unsigned long long)have->config_hash, (unsigned long long)want->config_hash);
#undef DIFF
    if (!len) return 0;
    nb_errf(err, "checkpoint '%s' belongs to another run: %s", path, why);
    return nb_hintf(err, "it was left by another store or run (a deleted or copied store?); move "
                         "it aside and start the run again, or resume with the store it came "
                         "from");
}

static int write_all(FILE *f, const void *p, size_t n, uint64_t *h) {
    *h = fnv(*h, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

int nb_ckpt_write(const char *path, const nb_ckpt_ident *id, const nb_ckpt_state *st,
                  const nb_ckpt_blob *blobs, int nblobs, nb_err *err) {
    nb_ckpt_ident none;
    if (!id) {
        memset(&none, 0, sizeof none);
        id = &none;
    }
    nb_atomic a;
    if (nb_atomic_open(&a, path, 0666, err)) {
        nb_errf(err, "cannot write checkpoint '%s': %s", path, strerror(errno));
        return nb_hintf(err, "check that the directory exists and is writable");
    }
    FILE *f = a.f;
    uint64_t h = 0xcbf29ce484222325ULL;
    uint32_t nb = (uint32_t)nblobs;
    int bad = write_all(f, head_magic, sizeof head_magic, &h) || write_all(f, id, sizeof *id, &h) ||
              write_all(f, st, sizeof *st, &h) || write_all(f, &nb, sizeof nb, &h);
    for (int i = 0; i < nblobs && !bad; i++) {
        uint64_t n = blobs[i].n;
        bad = write_all(f, &n, sizeof n, &h) || write_all(f, blobs[i].p, blobs[i].n, &h);
    }
    /* the trailer, last */
    uint64_t dummy = 0;
    bad = bad || write_all(f, tail_magic, sizeof tail_magic, &dummy) ||
          fwrite(&h, sizeof h, 1, f) != 1;
    if (bad) {
        int saved = errno;
        nb_atomic_abort(&a);
        nb_errf(err, "cannot write checkpoint '%s': %s", path, strerror(saved));
        return nb_hintf(err, "is the disk full? the previous checkpoint is kept");
    }
    if (nb_atomic_commit(&a, err)) {
        nb_errf(err, "cannot write checkpoint '%s': %s", path, strerror(errno));
        return nb_hintf(err, "is the disk full? the previous checkpoint is kept");
    }
    return 0;
}

static int read_all(FILE *f, void *p, size_t n, uint64_t *h) {
    if (fread(p, 1, n, f) != n) return -1;
    *h = fnv(*h, p, n);
    return 0;
}

int nb_ckpt_read(const char *path, const nb_ckpt_ident *want, nb_ckpt_state *st,
                 const nb_ckpt_blob *blobs, int nblobs, nb_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open checkpoint '%s': %s", path, strerror(errno));
    uint64_t h = 0xcbf29ce484222325ULL;
    char magic[8];
    uint32_t nb = 0;
    nb_ckpt_ident have;
    const char *why = NULL;
    if (read_all(f, magic, sizeof magic, &h))
        why = "not a normbench checkpoint";
    else if (memcmp(magic, head_magic_v1, sizeof magic) == 0)
        why = "from an older normbench (format 1, which does not record the run it belongs to)";
    else if (memcmp(magic, head_magic, sizeof magic) != 0)
        why = "not a normbench checkpoint";
    else if (read_all(f, &have, sizeof have, &h) || read_all(f, st, sizeof *st, &h) ||
             read_all(f, &nb, sizeof nb, &h))
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
    if (want) return nb_ckpt_ident_check(path, &have, want, err);
    return 0;
}

int nb_ckpt_read_last_blob(const char *path, void *p, size_t n, nb_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open checkpoint '%s': %s", path, strerror(errno));
    char magic[8];
    nb_ckpt_ident id;
    nb_ckpt_state st;
    uint32_t nb = 0;
    int rc = -1;
    if (fread(magic, 1, sizeof magic, f) != sizeof magic ||
        memcmp(magic, head_magic, sizeof magic) != 0 || fread(&id, sizeof id, 1, f) != 1 ||
        fread(&st, sizeof st, 1, f) != 1 || fread(&nb, sizeof nb, 1, f) != 1 || nb > 64)
        goto out;
    rc = 0;
    for (uint32_t i = 0; i < nb; i++) {
        uint64_t size;
        if (fread(&size, sizeof size, 1, f) != 1) {
            rc = -1;
            break;
        }
        if (i + 1 < nb) {
            if (fseeko(f, (off_t)size, SEEK_CUR) != 0) {
                rc = -1;
                break;
            }
        } else if (size == n) {
            rc = fread(p, 1, n, f) == n ? 1 : -1;
        }
    }
out:
    fclose(f);
    if (rc < 0) {
        nb_errf(err, "checkpoint '%s' is not a complete normbench checkpoint", path);
        return nb_hintf(err, "the run cannot be resumed from it; start a new run");
    }
    return rc;
}

int nb_ckpt_read_state(const char *path, nb_ckpt_ident *id, nb_ckpt_state *st, nb_err *err) {
    /* Read the whole file once to verify it, keeping only the state. */
    FILE *f = fopen(path, "rb");
    if (!f) return nb_errf(err, "cannot open checkpoint '%s': %s", path, strerror(errno));
    uint32_t nb = 0;
    char magic[8];
    nb_ckpt_ident have;
    int ok = fread(magic, 1, sizeof magic, f) == sizeof magic;
    if (ok && memcmp(magic, head_magic_v1, sizeof magic) == 0) {
        fclose(f);
        nb_errf(err,
                "checkpoint '%s' is from an older normbench (format 1, which does not record the "
                "run it belongs to)",
                path);
        return nb_hintf(err, "the run cannot be resumed from it; start a new run");
    }
    ok = ok && memcmp(magic, head_magic, sizeof magic) == 0 &&
         fread(&have, sizeof have, 1, f) == 1 && fread(st, sizeof *st, 1, f) == 1 &&
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
    if (rc == 0) rc = nb_ckpt_read(path, NULL, st, blobs, (int)nb, err);
    for (uint32_t i = 0; i < nb; i++)
        free(mem[i]);
    if (rc == 0 && id) *id = have;
    return rc;
}

int nb_ckpt_remove_stale(const char *dir, int *removed, nb_err *err) {
    (void)err;
    nb_file_clean_temps(dir, NULL, removed);
    return 0;
}
