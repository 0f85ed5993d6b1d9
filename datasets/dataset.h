/* datasets/dataset.h — install and find the registry's datasets in the data directory.
 *
 * DATA/NAME/ exists only when complete and verified: files are unpacked (or copied) into a
 * mkdtemp sibling DATA/.NAME.tmp-XXXXXX, fsynced, the manifest (NB_MANIFEST: the SHA-256 of every
 * file) is written last, and the directory is renamed into place. Downloads go to
 * DATA/.downloads/FILE.part and are kept there when interrupted, so a later fetch resumes. One
 * fetch per dataset at a time (a lock in DATA/.downloads/), so parallel runs can share DATA.
 * Trust-on-first-use digests live in DATA/.trust/FILE.sha256. */
#ifndef NB_DATASETS_DATASET_H
#define NB_DATASETS_DATASET_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "datasets/download.h"
#include "datasets/registry.h"
#include "util/err.h"
#include "util/file.h" /* nb_write_atomic */

/* stage: "download", "verify", "unpack" or "install"; done/total in bytes (0 when unknown). */
typedef void (*nb_fetch_progress_fn)(void *ctx, const char *stage, const char *file, int64_t done,
                                     int64_t total);

typedef struct nb_fetch_opts {
    const char *mirror; /* replaces every URL's scheme and host, and skips local copies; or NULL */
    const char *from;   /* import this archive (for per-file datasets: a directory holding the
                           files) instead of downloading; or NULL */
    nb_fetch_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    volatile sig_atomic_t *stop; /* non-zero: stop soon, keeping partial downloads; may be NULL */
    int verify;    /* a dataset already present: re-hash its files against the manifest */
    int no_fetch;  /* never download or import: a missing dataset is an error */
    nb_dl_opts dl; /* download knobs (tests); progress/stop are filled in from the above */
} nb_fetch_opts;

typedef enum nb_ds_state {
    NB_DS_ABSENT,   /* no DATA/NAME */
    NB_DS_PRESENT,  /* DATA/NAME with its manifest and every member file */
    NB_DS_DAMAGED,  /* DATA/NAME has a manifest but a file is missing or (full) differs */
    NB_DS_UNMANAGED /* DATA/NAME exists without a manifest: files a user put there by hand */
} nb_ds_state;

/* Installs d into data_dir unless it is present (then, with o->verify, re-hashes it). Returns 0
 * when DATA/NAME is present and verified, or -1 with err (naming the URL or file, what failed,
 * and a hint); data_dir then holds no new dataset directory and no temporary one. o may be
 * NULL. When o->stop became non-zero the error says so and partial downloads are kept (every
 * stage checks it: download, hashing, copying, unpacking). A source file given by o->from (or a
 * local copy) must be a regular file no larger than the registry's size or cap for it. */
int nb_dataset_install(const nb_dataset *d, const char *data_dir, const nb_fetch_opts *o,
                       nb_err *err);

/* nb_dataset_install for the registry entry called name ("unknown dataset" error otherwise). */
int nb_dataset_ensure(const char *name, const char *data_dir, const nb_fetch_opts *o, nb_err *err);

/* State of d in data_dir; full re-hashes every file against the manifest. When damaged, err
 * (may be NULL) says why. */
nb_ds_state nb_dataset_state(const nb_dataset *d, const char *data_dir, int full, nb_err *err);

/* DATA/NAME into out (n bytes). Returns 0, or -1 when it does not fit. */
int nb_dataset_dir(const char *name, const char *data_dir, char *out, size_t n);
/* DATA/NAME/FILE into out (n bytes). Returns 0, or -1 when it does not fit. */
int nb_dataset_file(const char *name, const char *file, const char *data_dir, char *out, size_t n);

/* The trust-on-first-use digest recorded for a source file in data_dir, into sha (65 bytes).
 * Returns 1 when one is recorded, 0 when none is. */
int nb_trust_get(const char *data_dir, const char *file, char sha[65]);

#endif
