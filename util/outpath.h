/* util/outpath.h — files that a command writes where the user said (--out): only a regular file
 * or a new name is written, never a device, a named pipe, a socket or a directory, and never
 * through a symbolic link into /proc or /sys (/proc/self/fd/1, /dev/stdout). A symbolic link to
 * a regular file is followed, as --db follows one: the file it leads to is replaced and the link
 * kept. Every write goes to a temporary file in the target's directory, flushed, fsync'ed and
 * renamed into place once whole (then the directory is fsync'ed): a reader sees the old file or
 * the new one, and a refused or failed write leaves the path as it was.
 *
 * The path is checked before anything is written and again just before the rename; a new name
 * is put in place with link(), which never replaces a node that appeared in between. Functions
 * return 0, or -1 with err filled (the message names the path; the hint says what to do). */
#ifndef NB_UTIL_OUTPATH_H
#define NB_UTIL_OUTPATH_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/err.h"

/* Whether path may be written: absent in an existing directory, or a regular file, possibly
 * reached through symbolic links (at most 40) none of which lies in /proc or /sys. what names the
 * option for the hint ("--out"). When target is not NULL, *target receives the path to replace
 * (path itself, or the regular file its links lead to; caller frees). */
int nb_out_check(const char *path, const char *what, char **target, nb_err *err);

/* An output file being written: f is open on a temporary file beside the target. */
typedef struct nb_out {
    FILE *f;
    char *target; /* the path replaced at commit */
    char *tmp;    /* the temporary file */
    const char *path, *what;
} nb_out;

/* Checks path (nb_out_check) and opens a temporary file beside its target: the file's mode is the
 * replaced file's, or 0666 less the umask for a new one. */
int nb_out_open(nb_out *o, const char *path, const char *what, nb_err *err);

/* Flushes and fsyncs o->f, checks path again and renames the temporary file onto the target.
 * Closes o in every case; on failure the temporary file is removed and path left as it was. */
int nb_out_commit(nb_out *o, nb_err *err);

/* Closes o and removes its temporary file; path is left as it was. o may be unopened (zeroed). */
void nb_out_abort(nb_out *o);

/* Writes len bytes of data to path (open, write, commit). */
int nb_out_write_file(const char *path, const char *what, const void *data, size_t len,
                      nb_err *err);

/* Puts tmp, a whole regular file that another program wrote (gnuplot's image), at path: checks
 * path again, then renames tmp onto the target, or, when the target is in another directory (path
 * is a link), copies tmp to a temporary file beside it and renames that. tmp is removed in every
 * case. */
int nb_out_install(const char *tmp, const char *path, const char *what, nb_err *err);

/* Whether the system can take path as a file name: each component at most NAME_MAX (255) bytes
 * and the whole under PATH_MAX (4096). Returns 0, or -1 with err saying which is too long and
 * by how much (the name shown cut short). */
int nb_out_name_fits(const char *path, nb_err *err);

/* path's directory ("." for a bare name, "/" at the root; caller frees, NULL when out of
 * memory) and its last component (a pointer into path). */
char *nb_path_dir(const char *path);
const char *nb_path_base(const char *path);

/* What a file of mode m is, for a message: "a character device", "a named pipe", ... */
const char *nb_file_kind(mode_t m);

#endif
