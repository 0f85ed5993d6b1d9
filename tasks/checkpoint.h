/* tasks/checkpoint.h — what a training loop saves at the end of an epoch so that
 * `normbench run --resume RUN` continues bit-exactly: the step and epoch, the random streams,
 * the loss accumulators, the training time so far, the data order, and the parameters with the
 * optimizer's moments.
 *
 * File (format 2): a magic, what the checkpoint belongs to (nb_ckpt_ident), a fixed header, the
 * blobs, then a trailer (magic + checksum of everything before it) written last. Format 1 files
 * (no identity) are refused with a message saying so. The file is written to a temporary name,
 * flushed, fsync'ed and renamed into place, and the directory fsync'ed: a checkpoint is either the
 * previous one or the new one, never half of one, and a damaged file is refused by its trailer. */
#ifndef NB_TASKS_CHECKPOINT_H
#define NB_TASKS_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn.h"

typedef struct nb_ckpt_state {
    int64_t step;      /* training steps done */
    int32_t epoch;     /* epochs completed */
    double train_time; /* seconds spent in training steps */
    double wall;       /* seconds since the run started */
    double loss_acc;   /* training-loss accumulator not yet recorded */
    int64_t loss_n;    /* and its count */
    double last_loss;  /* the last recorded training loss */
    nb_rng rng[4];     /* init, data, dropout, spare */
} nb_ckpt_state;

/* What a checkpoint belongs to: a resume checks every field against the run it continues, so
 * that a checkpoint left from a deleted or copied store, or from another run, is refused. Fixed
 * layout, no padding: strings NUL-padded. */
typedef struct nb_ckpt_ident {
    char store[40]; /* the results store's id (nb_store_id) */
    char task[32], norm[32];
    int64_t run; /* the run's id in that store */
    int64_t seed;
    uint64_t config_hash; /* nb_ckpt_config_hash of the run's configuration JSON as stored */
} nb_ckpt_ident;

/* A 64-bit hash (FNV-1a) of a configuration's JSON text. */
uint64_t nb_ckpt_config_hash(const char *json);

/* Fills id (zeroing it first; strings too long are cut). */
void nb_ckpt_ident_set(nb_ckpt_ident *id, const char *store, int64_t run, const char *task,
                       const char *norm, int64_t seed, const char *config_json);

/* Compares a checkpoint's identity (have) with the expected one: 0 when they match, else -1
 * with err naming the file and every field that differs. */
int nb_ckpt_ident_check(const char *path, const nb_ckpt_ident *have, const nb_ckpt_ident *want,
                        nb_err *err);

/* A blob: n bytes at p. */
typedef struct nb_ckpt_blob {
    void *p;
    size_t n;
} nb_ckpt_blob;

/* Writes the identity (id; NULL: all zero), state and the blobs to path atomically
 * (nb_atomic, util/file.h). Returns 0, or -1 with err. */
int nb_ckpt_write(const char *path, const nb_ckpt_ident *id, const nb_ckpt_state *st,
                  const nb_ckpt_blob *blobs, int nblobs, nb_err *err);

/* Reads path into *st and the blobs, whose sizes must match what was written (the same model
 * and data). With want non-NULL the file's identity must match it (nb_ckpt_ident_check).
 * Returns 0, or -1 with err naming the file and what is wrong. */
int nb_ckpt_read(const char *path, const nb_ckpt_ident *want, nb_ckpt_state *st,
                 const nb_ckpt_blob *blobs, int nblobs, nb_err *err);

/* The last blob of checkpoint path when it is n bytes (what a task appended after the loop's
 * blobs, t->extra, to check before the loop resumes): 1 with it read into p, 0 when the last
 * blob has another size (a checkpoint written without it), -1 with err when path is no
 * complete checkpoint. The checksum is checked later, by nb_ckpt_read. */
int nb_ckpt_read_last_blob(const char *path, void *p, size_t n, nb_err *err);

/* Reads only the identity (id, may be NULL) and state of a checkpoint, after checking its
 * trailer and checksum. Returns 0, or -1 with err. */
int nb_ckpt_read_state(const char *path, nb_ckpt_ident *id, nb_ckpt_state *st, nb_err *err);

/* Removes the temporary files (util/file.h's, and the NAME.tmp.PID of earlier versions) that a
 * process killed while writing a checkpoint left in dir, when process PID no longer exists
 * (nb_file_clean_temps). A missing or unreadable dir is not an error. Sets *removed (may be
 * NULL) to how many were removed. Returns 0. */
int nb_ckpt_remove_stale(const char *dir, int *removed, nb_err *err);

#endif
