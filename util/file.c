/* util/file.c — whole files written atomically and read with a cap (util/file.h). */
#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEMP_MARK ".tmp.normbench."
#define OLD_MARK ".tmp."
enum { BASE_MAX = 200 };

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Parses the decimal process id that ends name at p; 0 when there is none. */
static long pid_at(const char *p) {
    if (*p < '0' || *p > '9') return 0;
    char *end = NULL;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno || *end || pid <= 0 || pid > INT32_MAX) return 0;
    return pid;
}

int nb_file_is_temp(const char *name, long *pid) {
    long v = 0;
    const char *t = strstr(name, TEMP_MARK);
    if (name[0] == '.' && t) v = pid_at(t + strlen(TEMP_MARK));
    if (!v) {
        /* "NAME.tmp.PID", as checkpoints and caches were written before util/file.c */
        const char *o = NULL;
        for (const char *q = strstr(name, OLD_MARK); q; q = strstr(q + 1, OLD_MARK))
            o = q;
        if (o && o > name) v = pid_at(o + strlen(OLD_MARK));
    }
    if (pid) *pid = v;
    return v != 0;
}

/* Whether the temporary name belongs to target base (the base cut as the name cuts it). */
static int temp_of(const char *name, const char *base) {
    size_t n = strnlen(base, BASE_MAX);
    if (name[0] == '.' && strncmp(name + 1, base, n) == 0 &&
        strncmp(name + 1 + n, TEMP_MARK, strlen(TEMP_MARK)) == 0)
        return 1;
    size_t m = strlen(base);
    return strncmp(name, base, m) == 0 && strncmp(name + m, OLD_MARK, strlen(OLD_MARK)) == 0 &&
           pid_at(name + m + strlen(OLD_MARK)) != 0;
}

void nb_file_clean_temps(const char *dir, const char *base, int *removed) {
    if (removed) *removed = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = 0;
        if (!nb_file_is_temp(e->d_name, &pid)) continue;
        if (base && !temp_of(e->d_name, base)) continue;
        /* a live writer's file is its next version: leave it */
        if (!(kill((pid_t)pid, 0) == -1 && errno == ESRCH)) continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) break;
        snprintf(p, len, "%s/%s", dir, e->d_name);
        if (unlink(p) == 0 && removed) (*removed)++;
        free(p);
    }
    closedir(d);
}

int nb_rename_durable(const char *from, const char *to, nb_err *err) {
    if (rename(from, to) != 0) {
        int e = errno;
        nb_errf(err, "cannot write '%s': %s", to, strerror(e));
        errno = e;
        return -1;
    }
    char *dir = dir_of(to);
    if (dir) fsync_dir(dir);
    free(dir);
    return 0;
}

/* The error of a failed step on path: err filled, errno kept. */
static int fail(nb_err *err, const char *path, int e) {
    nb_errf(err, "cannot write '%s': %s", path, strerror(e));
    if (e == ENOSPC || e == EDQUOT) nb_hintf(err, "is the disk full? '%s' is left as it was", path);
    errno = e;
    return -1;
}

int nb_atomic_open(nb_atomic *a, const char *path, mode_t mode, nb_err *err) {
    memset(a, 0, sizeof *a);
    char *dir = dir_of(path);
    const char *base = base_of(path);
    if (!dir) return fail(err, path, ENOMEM);
    nb_file_clean_temps(dir, base, NULL);
    size_t len = strlen(dir) + BASE_MAX + 64;
    a->path = strdup(path);
    a->tmp = malloc(len);
    if (!a->path || !a->tmp) {
        free(dir);
        nb_atomic_abort(a);
        return fail(err, path, ENOMEM);
    }
    snprintf(a->tmp, len, "%s/.%.*s%s%ld", dir, BASE_MAX, base, TEMP_MARK, (long)getpid());
    free(dir);
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(a->tmp, flags, mode);
    if (fd < 0 && errno == EEXIST && unlink(a->tmp) == 0) /* this pid's own leftover */
        fd = open(a->tmp, flags, mode);
    if (fd < 0) {
        int e = errno;
        free(a->tmp);
        a->tmp = NULL; /* not ours: nothing to remove */
        nb_atomic_abort(a);
        return fail(err, path, e);
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int e = errno;
        close(fd);
        nb_atomic_abort(a);
        return fail(err, path, e);
    }
    return 0;
}

void nb_atomic_abort(nb_atomic *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

/* The test hook (util/file.h): a writer killed with half its bytes in the temporary. */
static void fault_kill(const nb_atomic *a) {
    static int seen; /* the matching writes so far */
    const char *want = getenv("NORMBENCH_FAULT_KILL_WRITE");
    if (!want) return;
    const char *colon = strrchr(want, ':');
    size_t n = colon ? (size_t)(colon - want) : strlen(want);
    long nth = colon ? strtol(colon + 1, NULL, 10) : 1;
    const char *base = base_of(a->path);
    if (strlen(base) != n || strncmp(base, want, n) != 0 || ++seen != nth) return;
    int fd = fileno(a->f);
    struct stat st;
    if (fstat(fd, &st) == 0 && ftruncate(fd, st.st_size / 2) == 0) fsync(fd);
    raise(SIGKILL);
}

int nb_atomic_sync(nb_atomic *a) {
    int e = 0;
    if (ferror(a->f) || fflush(a->f) != 0) e = errno ? errno : EIO;
    if (!e) fault_kill(a);
    if (!e && fsync(fileno(a->f)) != 0) e = errno;
    if (fclose(a->f) != 0 && !e) e = errno;
    a->f = NULL;
    return e;
}

int nb_atomic_commit(nb_atomic *a, nb_err *err) {
    int e = nb_atomic_sync(a);
    if (!e && nb_rename_durable(a->tmp, a->path, err) == 0) {
        free(a->tmp);
        a->tmp = NULL; /* renamed: nothing left to remove */
        nb_atomic_abort(a);
        return 0;
    }
    if (!e) e = errno;
    char *path = a->path;
    a->path = NULL;
    nb_atomic_abort(a);
    fail(err, path, e);
    free(path);
    errno = e;
    return -1;
}

int nb_write_atomicv(const char *path, const nb_piece *pieces, int n, nb_err *err) {
    nb_atomic a;
    if (nb_atomic_open(&a, path, 0666, err)) return -1;
    for (int i = 0; i < n; i++)
        if (pieces[i].n && fwrite(pieces[i].p, 1, pieces[i].n, a.f) != pieces[i].n) {
            int e = errno ? errno : EIO;
            nb_atomic_abort(&a);
            return fail(err, path, e);
        }
    return nb_atomic_commit(&a, err);
}

int nb_write_atomic(const char *path, const void *data, size_t len, nb_err *err) {
    nb_piece p = {data, len};
    return nb_write_atomicv(path, &p, 1, err);
}

int nb_read_file(const char *path, size_t max, int flags, char **buf, size_t *len, nb_err *err) {
    *buf = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | (flags & NB_READ_NOFOLLOW ? O_NOFOLLOW : 0));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        nb_errf(err, "cannot open '%s': %s", path, strerror(e));
        errno = e;
        return -1;
    }
    int e = 0;
    if (S_ISDIR(st.st_mode))
        e = EISDIR;
    else if ((flags & NB_READ_REGULAR) && !S_ISREG(st.st_mode))
        e = EINVAL;
    else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max)
        e = EFBIG;
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536, n = 0;
    if (cap > max) cap = max + 1; /* a pipe: read one byte past max to find it is over */
    char *p = e ? NULL : malloc(cap + 1);
    if (!e && !p) e = ENOMEM;
    while (!e) {
        if (n == cap) {
            if (cap > max) {
                e = EFBIG;
                break;
            }
            size_t next = cap > max / 2 ? max + 1 : cap * 2;
            char *q = realloc(p, next + 1);
            if (!q) {
                e = ENOMEM;
                break;
            }
            p = q;
            cap = next;
        }
        ssize_t k = read(fd, p + n, cap - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) e = errno;
        if (k <= 0) break;
        n += (size_t)k;
        if (n > max) e = EFBIG;
    }
    close(fd);
    if (e) {
        free(p);
        if (e == EFBIG)
            nb_errf(err, "'%s' is larger than %zu bytes", path, max);
        else if (e == EINVAL || e == EISDIR)
            nb_errf(err, "'%s' is not a regular file", path);
        else
            nb_errf(err, "cannot read '%s': %s", path, strerror(e));
        errno = e;
        return -1;
    }
    p[n] = '\0';
    *buf = p;
    if (len) *len = n;
    return 0;
}
