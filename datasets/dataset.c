/* datasets/dataset.c — see dataset.h. */
#include "datasets/dataset.h"

#include "datasets/unpack.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATHN 4096

/* snprintf for paths; truncation (refused up front by a length check on data_dir) yields "". */
static void pathf(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pathf(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n) out[0] = '\0';
}

int nb_dataset_dir(const char *name, const char *data_dir, char *out, size_t n) {
    int k = snprintf(out, n, "%s/%s", data_dir, name);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int nb_dataset_file(const char *name, const char *file, const char *data_dir, char *out, size_t n) {
    int k = snprintf(out, n, "%s/%s/%s", data_dir, name, file);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static int mkdir_p(const char *dir, nb_err *err) {
    char p[PATHN];
    pathf(p, sizeof p, "%s", dir);
    if (!p[0]) return nb_errf(err, "path too long: '%s'", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            nb_errf(err, "cannot create the data directory '%s': %s", p, strerror(e));
            return nb_hintf(err, "choose a writable directory with --data-dir or NORMBENCH_DATA");
        }
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        nb_errf(err, "cannot create the data directory '%s': %s", p, strerror(e));
        return nb_hintf(err, "choose a writable directory with --data-dir or NORMBENCH_DATA");
    }
    return 0;
}

static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Removes a directory tree we created (never follows symbolic links). */
static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[PATHN];
            pathf(sub, sizeof sub, "%s/%s", path, e->d_name);
            if (sub[0]) remove_tree(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

int nb_trust_get(const char *data_dir, const char *file, char sha[65]) {
    char p[PATHN];
    pathf(p, sizeof p, "%s/.trust/%s.sha256", data_dir, file);
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    char line[256] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok || strspn(line, "0123456789abcdef") != 64) return 0;
    memcpy(sha, line, 64);
    sha[64] = '\0';
    return 1;
}

/* ---- state ----------------------------------------------------------------------------------- */

/* nb_dataset_state, the hashing stopped (the dataset then reported damaged) when *stop is set. */
static nb_ds_state state_of(const nb_dataset *d, const char *data_dir, int full,
                            volatile sig_atomic_t *stop, nb_err *err) {
    char dir[PATHN], man[PATHN];
    nb_err tmp;
    if (!err) err = &tmp;
    nb_dataset_dir(d->name, data_dir, dir, sizeof dir);
    struct stat st;
    if (lstat(dir, &st) != 0) return NB_DS_ABSENT;
    if (!S_ISDIR(st.st_mode)) {
        nb_errf(err, "'%s' is not a directory", dir);
        return NB_DS_DAMAGED;
    }
    pathf(man, sizeof man, "%s/%s", dir, NB_MANIFEST);
    FILE *f = fopen(man, "rb");
    if (!f) {
        nb_errf(err, "'%s' has no manifest '%s': it was not installed by normbench fetch", dir,
                NB_MANIFEST);
        return NB_DS_UNMANAGED;
    }
    char(*want)[65] = calloc((size_t)d->nmembers, 65);
    if (!want) {
        fclose(f);
        nb_errf(err, "out of memory");
        return NB_DS_DAMAGED;
    }
    char line[PATHN + 80];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strlen(line) < 67 || line[64] != ' ' || line[65] != ' ') continue;
        for (int i = 0; i < d->nmembers; i++)
            if (strcmp(line + 66, d->members[i].name) == 0) {
                memcpy(want[i], line, 64);
                want[i][64] = '\0';
            }
    }
    fclose(f);
    nb_ds_state s = NB_DS_PRESENT;
    for (int i = 0; i < d->nmembers && s == NB_DS_PRESENT; i++) {
        char p[PATHN];
        pathf(p, sizeof p, "%s/%s", dir, d->members[i].name);
        if (!want[i][0]) {
            nb_errf(err, "the manifest '%s' does not list '%s'", man, d->members[i].name);
            s = NB_DS_DAMAGED;
        } else if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            nb_errf(err, "'%s' is missing", p);
            s = NB_DS_DAMAGED;
        } else if (full) {
            char sha[65];
            if (nb_hash_input(p, 0, stop, NULL, sha, NULL, err) != 0)
                s = NB_DS_DAMAGED;
            else if (strcmp(sha, want[i]) != 0) {
                nb_errf(err, "'%s' has changed: SHA-256 %s, the manifest says %s", p, sha, want[i]);
                s = NB_DS_DAMAGED;
            }
        }
    }
    free(want);
    return s;
}

nb_ds_state nb_dataset_state(const nb_dataset *d, const char *data_dir, int full, nb_err *err) {
    return state_of(d, data_dir, full, NULL, err);
}

/* ---- install --------------------------------------------------------------------------------- */

typedef struct fetch_ctx {
    const nb_fetch_opts *o;
} fetch_ctx;

static void progress(const nb_fetch_opts *o, const char *stage, const char *file, int64_t done,
                     int64_t total) {
    if (o && o->progress) o->progress(o->progress_ctx, stage, file, done, total);
}

static void dl_progress(void *ctx, const char *file, int64_t done, int64_t total) {
    const nb_fetch_opts *o = ctx;
    progress(o, "download", file, done, total);
}

/* The most bytes source idx of d can have: its pinned size, unless a recompressed copy may
 * verify too (content_sha256); else its member's cap (one file per member), or all members' caps
 * together (an archive). A larger file is refused before it is read. */
static int64_t source_cap(const nb_dataset *d, const nb_source *src, int idx) {
    if (src->size > 0 && !src->content_sha256) return src->size;
    if (d->pack == NB_PACK_FILES && idx < d->nmembers) return (int64_t)d->members[idx].max_size;
    uint64_t cap = 0;
    for (int m = 0; m < d->nmembers; m++)
        cap += d->members[m].max_size;
    return (int64_t)cap;
}

/* Checks one obtained source file against what the registry pins (or the trust record).
 * *tofu is set to 1 when nothing is pinned or recorded (the caller records sha after install).
 * Only a regular file of at most source_cap bytes is read, and reading stops when *stop is set. */
static int verify_source(const nb_dataset *d, const nb_source *src, int idx, const char *path,
                         const char *origin, const char *data_dir, volatile sig_atomic_t *stop,
                         int *tofu, char sha[65], nb_err *err) {
    char md5[33];
    int64_t size = 0;
    *tofu = 0;
    if (nb_hash_input(path, source_cap(d, src, idx), stop, md5, sha, &size, err)) return -1;
    const char *hint = "the copy is damaged or not the dataset's: fetch again (a bad download is "
                       "deleted), or use --mirror";
    if (src->md5 && strcmp(md5, src->md5) == 0) {
        if (src->size > 0 && size != src->size) {
            nb_errf(err, "'%s' from '%s' has %lld bytes, expected %lld", src->file, origin,
                    (long long)size, (long long)src->size);
            return nb_hintf(err, "%s", hint);
        }
        return 0;
    }
    if (src->sha256 && strcmp(sha, src->sha256) == 0) return 0;
    if (src->content_sha256) {
        char csha[65];
        uint64_t cap = d->pack == NB_PACK_FILES && idx < d->nmembers ? d->members[idx].max_size
                                                                     : ((uint64_t)1 << 32);
        if (nb_hash_gz_content(path, cap, stop, csha, err) != 0) {
            char why[1024];
            pathf(why, sizeof why, "%s", err->msg);
            nb_errf(err, "'%s' from '%s' does not verify: %s", src->file, origin, why);
            return nb_hintf(err, "%s", hint);
        }
        if (strcmp(csha, src->content_sha256) == 0) return 0;
        nb_errf(err, "checksum mismatch for '%s' from '%s': expected content SHA-256 %s, got %s",
                src->file, origin, src->content_sha256, csha);
        return nb_hintf(err, "%s", hint);
    }
    if (src->md5) {
        nb_errf(err, "checksum mismatch for '%s' from '%s': expected MD5 %s, got %s", src->file,
                origin, src->md5, md5);
        return nb_hintf(err, "%s", hint);
    }
    if (src->sha256) {
        nb_errf(err, "checksum mismatch for '%s' from '%s': expected SHA-256 %s, got %s", src->file,
                origin, src->sha256, sha);
        return nb_hintf(err, "%s", hint);
    }
    char rec[65];
    if (nb_trust_get(data_dir, src->file, rec)) {
        if (strcmp(rec, sha) == 0) return 0;
        nb_errf(err,
                "checksum mismatch for '%s' from '%s': expected SHA-256 %s (recorded at its first "
                "download: upstream publishes none), got %s",
                src->file, origin, rec, sha);
        return nb_hintf(err,
                        "if you trust the new file (upstream changed it), delete "
                        "'%s/.trust/%s.sha256' and fetch again",
                        data_dir, src->file);
    }
    *tofu = 1;
    return 0;
}

/* Removes stale temporary directories of d left by a killed fetch (we hold the lock). */
static void clean_stale(const nb_dataset *d, const char *data_dir) {
    DIR *dir = opendir(data_dir);
    if (!dir) return;
    char prefix[256];
    pathf(prefix, sizeof prefix, ".%s.tmp-", d->name);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char p[PATHN];
        pathf(p, sizeof p, "%s/%s", data_dir, e->d_name);
        remove_tree(p);
    }
    closedir(dir);
}

static int write_manifest(const nb_dataset *d, const char *tmpdir, volatile sig_atomic_t *stop,
                          nb_err *err) {
    size_t cap = (size_t)d->nmembers * (PATHN + 80);
    char *text = malloc(cap);
    if (!text) return nb_errf(err, "out of memory");
    size_t at = 0;
    for (int i = 0; i < d->nmembers; i++) {
        char p[PATHN], sha[65];
        pathf(p, sizeof p, "%s/%s", tmpdir, d->members[i].name);
        if (nb_hash_input(p, 0, stop, NULL, sha, NULL, err)) {
            free(text);
            return -1;
        }
        at += (size_t)snprintf(text + at, cap - at, "%s  %s\n", sha, d->members[i].name);
    }
    char man[PATHN];
    pathf(man, sizeof man, "%s/%s", tmpdir, NB_MANIFEST);
    int rc = nb_write_atomic(man, text, strlen(text), err);
    if (rc) nb_hintf(err, "free some space, or choose another data directory with --data-dir");
    free(text);
    return rc;
}

/* --from on a dataset that is installed already: never silently ignored, never a silent
 * replacement of verified data. Returns -1 with err set. */
static int installed_already(const nb_dataset *d, const char *dir, const char *from, nb_err *err) {
    nb_errf(err, "dataset '%s' is installed already in '%s': '--from %s' was not used", d->name,
            dir, from);
    return nb_hintf(err,
                    "to install it from '%s' instead, remove '%s' and run the same command "
                    "again ('normbench datasets --verify' checks the installed copy)",
                    from, dir);
}

int nb_dataset_install(const nb_dataset *d, const char *data_dir, const nb_fetch_opts *o,
                       nb_err *err) {
    nb_fetch_opts none = {0};
    if (!o) o = &none;
    char dir[PATHN], dl_dir[PATHN], lock_path[PATHN], tmpdir[PATHN] = "";
    if (strlen(data_dir) > 2048 || nb_dataset_dir(d->name, data_dir, dir, sizeof dir))
        return nb_errf(err, "data directory path too long: '%s'", data_dir);
    /* Fast path, no lock: present (only complete installs are ever renamed into place). */
    nb_err serr;
    nb_ds_state s = state_of(d, data_dir, o->verify, o->stop, &serr);
    if (o->stop && *o->stop) {
        nb_errf(err, "fetch of '%s' interrupted while verifying '%s'", d->name, dir);
        return nb_hintf(err, "run the same command again");
    }
    if (s == NB_DS_PRESENT && o->from) return installed_already(d, dir, o->from, err);
    if (s == NB_DS_PRESENT) return 0;
    if (s == NB_DS_DAMAGED || s == NB_DS_UNMANAGED) {
        nb_errf(err, "dataset '%s' in '%s' is %s: %s", d->name, dir,
                s == NB_DS_DAMAGED ? "damaged" : "not a verified install", serr.msg);
        return nb_hintf(err, "remove '%s' and run 'normbench fetch %s' again", dir, d->name);
    }
    if (o->no_fetch) {
        nb_errf(err, "dataset '%s' is not in '%s'", d->name, dir);
        return nb_hintf(err, "run 'normbench fetch %s' (or drop --no-fetch)", d->name);
    }
    if (mkdir_p(data_dir, err)) return -1;
    pathf(dl_dir, sizeof dl_dir, "%s/.downloads", data_dir);
    if (mkdir(dl_dir, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        nb_errf(err, "cannot create '%s': %s", dl_dir, strerror(e));
        return nb_hintf(err, "choose a writable directory with --data-dir or NORMBENCH_DATA");
    }
    pathf(lock_path, sizeof lock_path, "%s/%s.lock", dl_dir, d->name);
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0) {
        int e = errno;
        nb_errf(err, "cannot create '%s': %s", lock_path, strerror(e));
        return nb_hintf(err, "choose a writable directory with --data-dir or NORMBENCH_DATA");
    }
    while (flock(lock, LOCK_EX) != 0) {
        if (errno != EINTR || (o->stop && *o->stop)) {
            close(lock);
            return nb_errf(err, "cannot lock '%s': %s", lock_path, strerror(errno));
        }
    }
    int rc = -1;
    int ns = d->nsources;
    char(*paths)[PATHN] = calloc((size_t)ns, PATHN);
    char(*shas)[65] = calloc((size_t)ns, 65);
    int *downloaded = calloc((size_t)ns, sizeof(int)), *tofu = calloc((size_t)ns, sizeof(int));
    if (!paths || !shas || !downloaded || !tofu) {
        nb_errf(err, "out of memory");
        goto done;
    }
    /* Someone else may have installed it while we waited for the lock. */
    s = nb_dataset_state(d, data_dir, 0, &serr);
    if (s == NB_DS_PRESENT) {
        rc = o->from ? installed_already(d, dir, o->from, err) : 0;
        goto done;
    }
    if (s == NB_DS_DAMAGED || s == NB_DS_UNMANAGED) {
        nb_errf(err, "dataset '%s' in '%s' is %s: %s", d->name, dir,
                s == NB_DS_DAMAGED ? "damaged" : "not a verified install", serr.msg);
        nb_hintf(err, "remove '%s' and run 'normbench fetch %s' again", dir, d->name);
        goto done;
    }
    clean_stale(d, data_dir);
    if (o->from) {
        struct stat st;
        if (stat(o->from, &st) != 0) {
            int e = errno;
            nb_errf(err, "cannot open '%s': %s", o->from, strerror(e));
            nb_hintf(err, "give the path of a downloaded %s", d->sources[0].file);
            goto done;
        }
        if (d->pack == NB_PACK_FILES && !S_ISDIR(st.st_mode)) {
            nb_errf(err, "'--from %s' must be a directory for dataset '%s' (it has %d files)",
                    o->from, d->name, ns);
            nb_hintf(err, "give the directory holding %s and the others", d->sources[0].file);
            goto done;
        }
        if (d->pack != NB_PACK_FILES && S_ISDIR(st.st_mode)) {
            nb_errf(err, "'--from %s' is a directory, expected the file %s", o->from,
                    d->sources[0].file);
            nb_hintf(err, "give the path of the downloaded archive");
            goto done;
        }
    }
    for (int i = 0; i < ns; i++) {
        const nb_source *src = &d->sources[i];
        char origin[PATHN];
        if (o->from) {
            if (d->pack == NB_PACK_FILES)
                pathf(paths[i], PATHN, "%s/%s", o->from, src->file);
            else
                pathf(paths[i], PATHN, "%s", o->from);
            pathf(origin, sizeof origin, "%s", paths[i]);
        } else if (src->local && !o->mirror && access(src->local, R_OK) == 0) {
            pathf(paths[i], PATHN, "%s", src->local);
            pathf(origin, sizeof origin, "%s", src->local);
        } else {
            char url[PATHN];
            if (o->mirror) {
                if (nb_mirror_url(src->url, o->mirror, url, sizeof url, err)) goto done;
            } else {
                pathf(url, sizeof url, "%s", src->url);
            }
            pathf(paths[i], PATHN, "%s/%s.part", dl_dir, src->file);
            pathf(origin, sizeof origin, "%s", url);
            nb_dl_opts dl = o->dl;
            dl.progress = dl_progress;
            dl.progress_ctx = (void *)o;
            dl.stop = o->stop;
            if (dl.max_bytes <= 0 && src->size > 0) dl.max_bytes = src->size;
            if (dl.max_bytes <= 0) {
                uint64_t cap = 0;
                for (int m = 0; m < d->nmembers; m++)
                    cap += d->members[m].max_size;
                dl.max_bytes = (int64_t)cap;
            }
            struct stat pst;
            int resumed = stat(paths[i], &pst) == 0 && pst.st_size > 0;
            for (int fresh = 0;; fresh++) {
                int intr = 0;
                if (nb_download(url, paths[i], &dl, &intr, err)) {
                    if (!intr)
                        nb_hintf(err,
                                 "check the network; or download '%s' elsewhere and import it "
                                 "with 'normbench fetch %s --from %s' (it installs into '%s')",
                                 url, d->name, d->pack == NB_PACK_FILES ? "DIR" : "FILE", dir);
                    goto done;
                }
                downloaded[i] = 1;
                progress(o, "verify", src->file, 0, 0);
                if (verify_source(d, src, i, paths[i], origin, data_dir, o->stop, &tofu[i], shas[i],
                                  err) == 0)
                    break;
                if (o->stop && *o->stop) goto done; /* interrupted: the .part is kept */
                remove(paths[i]);
                /* a .part left by an earlier try may belong to another version of the file:
                 * one fresh download before giving up */
                if (!resumed || fresh > 0 || (o->stop && *o->stop)) goto done;
            }
        }
        if (!downloaded[i]) {
            progress(o, "verify", src->file, 0, 0);
            if (verify_source(d, src, i, paths[i], origin, data_dir, o->stop, &tofu[i], shas[i],
                              err))
                goto done;
        }
        if (o->stop && *o->stop) {
            nb_errf(err, "fetch of '%s' interrupted", d->name);
            nb_hintf(err, "run the same command again to resume");
            goto done;
        }
    }
    pathf(tmpdir, sizeof tmpdir, "%s/.%s.tmp-XXXXXX", data_dir, d->name);
    if (!mkdtemp(tmpdir)) {
        int e = errno;
        nb_errf(err, "cannot create a directory in '%s': %s", data_dir, strerror(e));
        nb_hintf(err, "choose a writable directory with --data-dir or NORMBENCH_DATA");
        tmpdir[0] = '\0';
        goto done;
    }
    chmod(tmpdir, 0755);
    for (int i = 0; i < ns; i++) {
        progress(o, "unpack", d->sources[i].file, 0, 0);
        if (d->pack == NB_PACK_FILES) {
            char dst[PATHN];
            pathf(dst, sizeof dst, "%s/%s", tmpdir, d->members[i].name);
            if (nb_copy_file(paths[i], dst, source_cap(d, &d->sources[i], i), o->stop, err))
                goto done;
        } else if (nb_unpack(paths[i], d, tmpdir, o->stop, err)) {
            /* a bad archive is not worth resuming (an interrupted unpack's is kept) */
            if (downloaded[i] && !(o->stop && *o->stop)) remove(paths[i]);
            goto done;
        }
    }
    if (o->stop && *o->stop) {
        nb_errf(err, "fetch of '%s' interrupted", d->name);
        nb_hintf(err, "run the same command again to resume");
        goto done;
    }
    progress(o, "install", d->name, 0, 0);
    if (write_manifest(d, tmpdir, o->stop, err)) goto done;
    fsync_dir(tmpdir);
    if (nb_rename_durable(tmpdir, dir, err) != 0) {
        int e = errno;
        nb_errf(err, "cannot install '%s': %s", dir, strerror(e));
        goto done;
    }
    tmpdir[0] = '\0';
    for (int i = 0; i < ns; i++) {
        if (tofu[i]) {
            char tdir[PATHN], tp[PATHN], text[PATHN];
            pathf(tdir, sizeof tdir, "%s/.trust", data_dir);
            if (mkdir(tdir, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                nb_errf(err, "cannot create '%s': %s", tdir, strerror(e));
                goto done;
            }
            pathf(tp, sizeof tp, "%s/%s.sha256", tdir, d->sources[i].file);
            pathf(text, sizeof text, "%s  %s\n", shas[i], d->sources[i].file);
            if (nb_write_atomic(tp, text, strlen(text), err)) {
                nb_hintf(err, "free some space, or choose another data directory with --data-dir");
                goto done;
            }
        }
        if (downloaded[i]) remove(paths[i]);
    }
    rc = 0;
done:
    if (tmpdir[0]) remove_tree(tmpdir);
    free(paths);
    free(shas);
    free(downloaded);
    free(tofu);
    flock(lock, LOCK_UN);
    close(lock);
    return rc;
}

int nb_dataset_ensure(const char *name, const char *data_dir, const nb_fetch_opts *o, nb_err *err) {
    const nb_dataset *d = nb_registry_find(name);
    if (!d) {
        nb_errf(err, "unknown dataset '%s'", name);
        return nb_hintf(err, "see 'normbench datasets' for the list");
    }
    return nb_dataset_install(d, data_dir, o, err);
}
