/* tasks/checkpoint.h — what a training loop saves at the end of an epoch so that
 * `normbench run --resume RUN` continues bit-exactly: the step and epoch, the random streams,
 * the loss accumulators, the training time so far, the data order, and the parameters with the
 * optimizer's moments.
 *
 * File: a fixed header, the blobs, then a trailer (magic + checksum of everything before it)
 * written last. The file is written to a temporary name, flushed, fsync'ed and renamed into
 * place, and the directory fsync'ed: a checkpoint is either the previous one or the new one,
 * never half of one, and a damaged file is refused by its trailer. */
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

/* A blob: n bytes at p. */
typedef struct nb_ckpt_blob {
    void *p;
    size_t n;
} nb_ckpt_blob;

/* Writes state and the blobs to path atomically. Returns 0, or -1 with err. */
int nb_ckpt_write(const char *path, const nb_ckpt_state *st, const nb_ckpt_blob *blobs, int nblobs,
                  nb_err *err);

/* Reads path into *st and the blobs, whose sizes must match what was written (the same model
 * and data). Returns 0, or -1 with err naming the file and what is wrong. */
int nb_ckpt_read(const char *path, nb_ckpt_state *st, const nb_ckpt_blob *blobs, int nblobs,
                 nb_err *err);

/* Reads only the state (header) of a checkpoint, after checking its trailer and checksum.
 * Returns 0, or -1 with err. */
int nb_ckpt_read_state(const char *path, nb_ckpt_state *st, nb_err *err);

#endif
