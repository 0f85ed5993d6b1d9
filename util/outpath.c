/* util/outpath.c — output files named on the command line (util/outpath.h). */
#include "util/outpath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/magic.h>
#include <sys/vfs.h>
#endif

#include "util/file.h"
#include "util/text.h"

enum { SHOWN = 300, MAX_LINKS = 40 };

/* path escaped for a message, cut short when long. */
static const char *shown(char *buf, const char *path) {
    return nb_escape(buf, SHOWN, path);
}

char *nb_path_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

const char *nb_path_base(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

const char *nb_file_kind(mode_t m) {
    return S_ISCHR(m)    ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a named pipe"
           : S_ISSOCK(m) ? "a socket"
           : S_ISDIR(m)  ? "a directory"
                         : "not a regular file";
}

/* Whether dir is on a file system of kernel objects (/proc, /sys), where a "file" is a process's
 * descriptor or a setting, never a place for output. */
static int special_fs(const char *dir) {
#ifdef __linux__
    struct statfs sf;
    if (statfs(dir, &sf) != 0) return 0;
    return sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC;
#else
    (void)dir;
    return 0;
#endif
}

int nb_out_name_fits(const char *path, nb_err *err) {
    char s[SHOWN];
    size_t total = strlen(path);
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n > NAME_MAX) {
            char *part = strndup(p, n < SHOWN ? n : SHOWN);
            nb_errf(err, "file name '%s...' is too long: %zu bytes, at most %d",
                    shown(s, part ? part : ""), n, NAME_MAX);
            free(part);
            return -1;
        }
        p += n;
        p += strspn(p, "/");
    }
    if (total >= PATH_MAX)
        return nb_errf(err, "path '%s...' is too long: %zu bytes, at most %d", shown(s, path),
                       total, PATH_MAX - 1);
    return 0;
}

int nb_out_check(const char *path, const char *what, char **target, nb_err *err) {
    char s[SHOWN], s2[SHOWN];
    if (target) *target = NULL;
    if (!*path) {
        nb_errf(err, "an empty file name");
        return nb_hintf(err, "give %s a file name", what);
    }
    if (nb_out_name_fits(path, err)) return nb_hintf(err, "give %s a shorter name", what);
    char *cur = strdup(path);
    if (!cur) return nb_errf(err, "out of memory");
    for (int hops = 0;; hops++) {
        char *dir = nb_path_dir(cur);
        struct stat st;
        int rc = -1;
        if (!dir) {
            nb_errf(err, "out of memory");
        } else if (special_fs(dir)) {
            nb_errf(err, "'%s' %s a special file system (/proc or /sys), not a file",
                    shown(s, path), hops ? "leads into" : "is in");
            nb_hintf(err, "give %s the name of a regular file or a new one", what);
        } else if (hops > MAX_LINKS) {
            nb_errf(err, "'%s': too many levels of symbolic links", shown(s, path));
            nb_hintf(err, "give %s the name of a regular file or a new one", what);
        } else if (lstat(cur, &st) != 0) {
            int e = errno;
            struct stat dst;
            if (e == ENOENT && hops == 0 && stat(dir, &dst) == 0 && S_ISDIR(dst.st_mode)) {
                rc = 0; /* a new name */
            } else if ((e == ENOENT || e == ENOTDIR) && hops == 0) {
                nb_errf(err, "cannot write '%s': '%s' is not an existing directory", shown(s, path),
                        shown(s2, dir));
                nb_hintf(err, "create it first, or give %s a path in an existing directory", what);
            } else if (e == ENOENT || e == ENOTDIR) {
                nb_errf(err, "'%s' is a symbolic link that leads nowhere ('%s')", shown(s, path),
                        shown(s2, cur));
                nb_hintf(err, "remove the link, or give %s another name", what);
            } else {
                nb_errf(err, "cannot write '%s': %s", shown(s, path), strerror(e));
            }
        } else if (S_ISLNK(st.st_mode)) {
            char link[PATH_MAX];
            ssize_t n = readlink(cur, link, sizeof link - 1);
            if (n < 0 || n >= (ssize_t)sizeof link - 1) {
                nb_errf(err, "cannot read the symbolic link '%s': %s", shown(s, cur),
                        n < 0 ? strerror(errno) : "target too long");
            } else {
                link[n] = '\0';
                size_t len = strlen(dir) + (size_t)n + 2;
                char *next = malloc(len);
                if (!next) {
                    nb_errf(err, "out of memory");
                } else {
                    if (link[0] == '/')
                        snprintf(next, len, "%s", link);
                    else
                        snprintf(next, len, "%s/%s", dir, link);
                    free(cur);
                    cur = next;
                    free(dir);
                    continue;
                }
            }
        } else if (S_ISREG(st.st_mode)) {
            rc = 0;
        } else if (S_ISDIR(st.st_mode)) {
            nb_errf(err, "'%s' is %sa directory, not a file", shown(s, path),
                    hops ? "a symbolic link to " : "");
            nb_hintf(err, "give %s a file name, e.g. '%s/NAME'", what, shown(s2, path));
        } else {
            nb_errf(err, "'%s' is %s%s, not a regular file: it is left as it is", shown(s, path),
                    hops ? "a symbolic link to " : "", nb_file_kind(st.st_mode));
            nb_hintf(err, "give %s the name of a regular file or a new one", what);
        }
        free(dir);
        if (rc == 0 && target) {
            *target = cur;
            return 0;
        }
        free(cur);
        return rc;
    }
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* A temporary file beside target (util/file.h names it), open for writing with mode, its path
 * into *tmp (caller frees). Returns the stream, or NULL with err. */
static FILE *open_temp(const char *target, mode_t mode, char **tmp, nb_err *err) {
    nb_atomic a;
    if (nb_atomic_open(&a, target, 0600, err)) {
        int e = errno;
        char s[SHOWN];
        char *dir = nb_path_dir(target);
        nb_errf(err, "cannot create a temporary file in '%s' to write '%s': %s",
                shown(s, dir ? dir : "."), nb_path_base(target), strerror(e));
        nb_hintf(err, "check that the directory is writable");
        free(dir);
        return NULL;
    }
    if (fchmod(fileno(a.f), mode) != 0) {
        int e = errno;
        nb_atomic_abort(&a);
        nb_errf(err, "cannot set the mode of a temporary file: %s", strerror(e));
        return NULL;
    }
    *tmp = a.tmp;
    a.tmp = NULL;
    FILE *f = a.f;
    a.f = NULL;
    nb_atomic_abort(&a);
    return f;
}

/* The mode a new version of target gets: the old file's, else 0666 less the umask. */
static mode_t out_mode(const char *target) {
    struct stat st;
    if (stat(target, &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

int nb_out_open(nb_out *o, const char *path, const char *what, nb_err *err) {
    memset(o, 0, sizeof *o);
    o->path = path;
    o->what = what;
    if (nb_out_check(path, what, &o->target, err)) return -1;
    o->f = open_temp(o->target, out_mode(o->target), &o->tmp, err);
    if (!o->f) {
        free(o->target);
        o->target = NULL;
        return -1;
    }
    return 0;
}

void nb_out_abort(nb_out *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->target);
    o->f = NULL;
    o->tmp = o->target = NULL;
}

/* Renames tmp onto target after checking path again (it must still lead to target, a regular
 * file or a new name); fsyncs the directory. */
static int replace(const char *tmp, const char *path, const char *target, const char *what,
                   nb_err *err) {
    char s[SHOWN];
    char *again = NULL;
    if (nb_out_check(path, what, &again, err)) return -1;
    int same = strcmp(again, target) == 0;
    free(again);
    if (!same) {
        nb_errf(err, "'%s' changed while it was being written", shown(s, path));
        return nb_hintf(err, "run the command again");
    }
    /* A new name is linked, not renamed: link() never replaces what another process may have
     * made there since the check (a pipe, a device node); where the file system has no hard
     * links, rename. An existing regular file is replaced by rename. */
    struct stat st;
    int renamed = 0;
    if (lstat(target, &st) != 0 && errno == ENOENT) {
        if (link(tmp, target) == 0) {
            unlink(tmp);
            renamed = 1;
        } else if (errno == EEXIST) {
            nb_errf(err, "'%s' appeared while it was being written: it is left as it is",
                    shown(s, path));
            return nb_hintf(err, "run the command again");
        }
    }
    if (renamed) {
        char *dir = nb_path_dir(target);
        if (dir) fsync_dir(dir);
        free(dir);
    } else if (nb_rename_durable(tmp, target, err) != 0) {
        int e = errno;
        nb_errf(err, "cannot write '%s': %s", shown(s, path), strerror(e));
        return nb_hintf(err, "check that the directory is writable");
    }
    return 0;
}

int nb_out_commit(nb_out *o, nb_err *err) {
    char s[SHOWN];
    nb_atomic a = {o->f, o->target, o->tmp};
    int e = nb_atomic_sync(&a), bad = e != 0;
    o->f = NULL;
    int rc = 0;
    if (bad) {
        nb_errf(err, "cannot write '%s': %s", shown(s, o->path), strerror(e));
        nb_hintf(err, "is the disk full? '%s' is left as it was", shown(s, o->path));
        rc = -1;
    } else {
        rc = replace(o->tmp, o->path, o->target, o->what, err);
    }
    if (rc == 0) { /* renamed: nothing left to remove */
        free(o->tmp);
        o->tmp = NULL;
    }
    nb_out_abort(o);
    return rc;
}

int nb_out_write_file(const char *path, const char *what, const void *data, size_t len,
                      nb_err *err) {
    nb_out o;
    if (nb_out_open(&o, path, what, err)) return -1;
    if (len && fwrite(data, 1, len, o.f) != len) {
        char s[SHOWN];
        int e = errno;
        nb_out_abort(&o);
        nb_errf(err, "cannot write '%s': %s", shown(s, path), strerror(e));
        return nb_hintf(err, "is the disk full?");
    }
    return nb_out_commit(&o, err);
}

int nb_out_install(const char *tmp, const char *path, const char *what, nb_err *err) {
    char s[SHOWN];
    char *target = NULL;
    int rc = -1, renamed = 0;
    if (nb_out_check(path, what, &target, err)) goto done;
    char *d1 = nb_path_dir(tmp), *d2 = nb_path_dir(target);
    if (d1) nb_file_clean_temps(d1, nb_path_base(path), NULL); /* a killed writer's (util/file.h) */
    int same_dir = d1 && d2 && strcmp(d1, d2) == 0;
    free(d1);
    free(d2);
    if (same_dir) {
        rc = replace(tmp, path, target, what, err);
        renamed = rc == 0;
        goto done;
    }
    /* a link to a file elsewhere: copied beside it, then renamed */
    FILE *in = fopen(tmp, "rb");
    if (!in) {
        nb_errf(err, "cannot read '%s': %s", shown(s, tmp), strerror(errno));
        goto done;
    }
    nb_out o;
    if (nb_out_open(&o, path, what, err)) {
        fclose(in);
        goto done;
    }
    char buf[65536];
    size_t n;
    int bad = 0;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, o.f) != n;
    bad |= ferror(in);
    fclose(in);
    if (bad) {
        nb_out_abort(&o);
        nb_errf(err, "cannot write '%s': %s", shown(s, path), strerror(errno));
        goto done;
    }
    rc = nb_out_commit(&o, err);
done:
    if (!renamed) unlink(tmp);
    free(target);
    return rc;
}
