/* util/file.h — whole files: written atomically, read with a size cap.
 *
 * A file that must never be seen half-written (a checkpoint, a kept model, a derived data file or
 * cache, a plot, a report) is written through nb_atomic: a temporary file in the target's own
 * directory, named "DIR/.BASE.tmp.normbench.PID" (BASE the target's name, cut to 200 bytes; PID
 * the writing process), created new (O_EXCL, never through a link), written, flushed, fsync'ed,
 * renamed onto the target, and the directory fsync'ed. A reader sees the old file or the new
 * one, never a mix; a failed write removes its temporary and leaves the target as it was.
 * nb_rename_durable is the only place in normbench where a file is renamed into place.
 *
 * A writer killed before the rename leaves its temporary behind; the next writer of the same
 * target removes every temporary of that target whose process is gone (and nb_file_clean_temps
 * does it for a whole directory). A temporary whose process is alive is left alone: it is
 * another writer's, still at work. (The process check is by PID on this machine: a directory
 * shared by several machines' writers of one target would need a lock besides.)
 *
 * Fault injection, for tests only: when NORMBENCH_FAULT_KILL_WRITE is set to a target's base
 * name ("NAME", or "NAME:N" for the process's Nth write of it), the writer of that file cuts its
 * temporary to half of what it wrote and kills itself with SIGKILL just before the rename, as a
 * writer killed mid-write would (tests/cli/39-atomic.t).
 *
 * Functions return 0, or -1 with err filled ("cannot write 'PATH': REASON") and errno set to the
 * cause, so that a caller may say it in its own words. */
#ifndef NB_UTIL_FILE_H
#define NB_UTIL_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/err.h"

/* A file being replaced: f is open on the temporary. */
typedef struct nb_atomic {
    FILE *f;
    char *path; /* the target */
    char *tmp;  /* the temporary beside it */
} nb_atomic;

/* Opens a temporary for path (mode as for open(2), less the umask), after removing the
 * temporaries of path that dead writers left. */
int nb_atomic_open(nb_atomic *a, const char *path, mode_t mode, nb_err *err);

/* Flushes, fsyncs and closes a->f, renames the temporary onto the target and fsyncs the
 * directory. Closes a in every case; on failure the temporary is removed. */
int nb_atomic_commit(nb_atomic *a, nb_err *err);

/* The first half of nb_atomic_commit, for a caller that puts the temporary in place itself
 * (util/outpath.c checks the path again first): flushes, fsyncs and closes a->f (a->f is NULL
 * after). Returns 0, or the errno value of the failure; a->tmp is left for the caller. */
int nb_atomic_sync(nb_atomic *a);

/* Closes a and removes its temporary; the target is left as it was. a may be zeroed. */
void nb_atomic_abort(nb_atomic *a);

/* One piece of a file written by nb_write_atomicv. */
typedef struct nb_piece {
    const void *p;
    size_t n;
} nb_piece;

/* Writes len bytes as the whole of path (mode 0666 less the umask). */
int nb_write_atomic(const char *path, const void *data, size_t len, nb_err *err);

/* Writes the n pieces, one after another, as the whole of path. */
int nb_write_atomicv(const char *path, const nb_piece *pieces, int n, nb_err *err);

/* Renames from onto to (a file or a directory, in the same directory) and fsyncs to's
 * directory: the one rename in normbench. */
int nb_rename_durable(const char *from, const char *to, nb_err *err);

/* Whether name (a directory entry) is a temporary file of nb_atomic's, or one that earlier
 * versions named "NAME.tmp.PID"; *pid receives the writer's process id. */
int nb_file_is_temp(const char *name, long *pid);

/* Removes dir's temporaries (nb_file_is_temp) whose process is gone; when base is not NULL,
 * only those of the target base. *removed (may be NULL) receives how many. A directory that
 * cannot be read is skipped. */
void nb_file_clean_temps(const char *dir, const char *base, int *removed);

/* Reads the whole of path, at most max bytes, into *buf (malloc'ed, NUL-terminated; the caller
 * frees) and its length into *len (may be NULL). flags: NB_READ_REGULAR refuses anything but a
 * regular file (a device, a pipe), NB_READ_NOFOLLOW a symbolic link; a directory is always
 * refused. Messages: "cannot open 'PATH': REASON", "'PATH' is larger than MAX bytes", "'PATH' is
 * not a regular file", "cannot read 'PATH': REASON"; errno is set to the cause (EFBIG for a file
 * over max, EINVAL for one that is not regular), so that a caller may say it in its own words. */
enum { NB_READ_REGULAR = 1, NB_READ_NOFOLLOW = 2 };
int nb_read_file(const char *path, size_t max, int flags, char **buf, size_t *len, nb_err *err);

#endif
