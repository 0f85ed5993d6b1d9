/* datasets/cifar10.h — CIFAR-10's binary batches, the preprocessing of the WeightNorm code
 * (docs/papers.md#cifar-data), and the other image sets the cifar task trains on.
 *
 * Binary format (cifar-10-batches-bin): records of 3073 bytes, a label byte 0..9 then 3072
 * pixel bytes (1024 R, 1024 G, 1024 B, each 32x32 row-major); each data_batch_k.bin and
 * test_batch.bin holds exactly 10,000 records (30,730,000 bytes). */
#ifndef NB_DATASETS_CIFAR10_H
#define NB_DATASETS_CIFAR10_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define NB_CIFAR_PIXELS 3072
#define NB_CIFAR_RECORD 3073
#define NB_CIFAR_FILE_RECORDS 10000
#define NB_CIFAR_FILE_BYTES ((size_t)NB_CIFAR_RECORD * NB_CIFAR_FILE_RECORDS)

/* Records as stored. */
typedef struct nb_cifar_raw {
    int n;           /* records */
    uint8_t *labels; /* (n) 0..9 */
    uint8_t *pixels; /* (n, 3072) */
} nb_cifar_raw;

/* Parses buf (n bytes) of whole records. expect_records > 0 requires exactly that many (a real
 * batch file: 10,000); 0 accepts any positive number. Refuses an empty buffer, a length that is
 * not a multiple of 3073 (a truncated or padded file), and a label above 9 (naming the record).
 * Returns 0 and fills *out (free with nb_cifar_raw_free), or -1 with err and *out zeroed. */
int nb_cifar10_parse(const uint8_t *buf, size_t n, int expect_records, nb_cifar_raw *out,
                     nb_err *err);
/* Reads one batch file, which must be exactly 30,730,000 bytes (checked before reading). */
int nb_cifar10_read(const char *path, nb_cifar_raw *out, nb_err *err);
void nb_cifar_raw_free(nb_cifar_raw *r);

/* Images ready for the network. */
typedef struct nb_images {
    int n, C, H, W;
    float *x; /* (n, C, H, W) */
    int *y;   /* (n) */
} nb_images;

typedef struct nb_image_set {
    nb_images train, test;
    int classes;
    char source[1024]; /* where the data came from and how it was preprocessed */
} nb_image_set;

/* Loads the cifar task's data:
 * - "cifar10": DATA_DIR/cifar10/{data_batch_1..5,test_batch}.bin; (pixel - 127.5)/128, then ZCA
 *   whitening fitted on all 50,000 training images (regularisation 1e-5, in double), cached in
 *   DATA_DIR/cifar10/zca-KEY.bin, KEY a 64-bit FNV-1a checksum of the six files, so it is
 *   computed once per copy of the data. zca == 0 skips the whitening.
 * - "fashion-mnist" (and "mnist"): the IDX loader's 55,000 training and 10,000 test images as
 *   1x28x28 maps, (pixel - 127.5)/128, no ZCA (the network adapts: see tasks/cifar.c).
 * - "synthetic": 3x32x32 images with learnable class structure (nb_cifar_synthetic).
 * subset > 0 keeps the first subset training images and at most subset test images (the ZCA is
 * still fitted on the full training set). Returns 0, or -1 with err (a missing file names the
 * path and hints 'normbench fetch cifar10'). Free with nb_image_set_free. */
int nb_cifar_load(nb_image_set *out, const char *dataset, const char *data_dir, int subset,
                  uint64_t seed, int zca, nb_err *err);
void nb_image_set_free(nb_image_set *s);

/* "synthetic": ten classes, each an oriented sinusoidal grating of its own orientation and
 * frequency, tinted by its own colour, with random phase, contrast and brightness, a random
 * blob of another colour, and pixel noise; 50,000 train and 10,000 test images (cut by subset).
 * The task is the same for every seed; the examples depend only on seed, split and index. */
int nb_cifar_synthetic(nb_image_set *out, int subset, uint64_t seed, nb_err *err);

/* FNV-1a 64 of n bytes, continuing from h (start with NB_FNV_INIT). */
#define NB_FNV_INIT 0xcbf29ce484222325ULL
uint64_t nb_fnv1a(uint64_t h, const uint8_t *p, size_t n);

#endif
