/* datasets/mnist.h — IDX files (MNIST, Fashion-MNIST) and the 55,000/5,000/10,000 split.
 *
 * IDX (LeCun): big-endian magic 0x00000803 (images, u8, 3 dims) or 0x00000801 (labels, u8,
 * 1 dim), then the dimensions as big-endian u32, then the data. Files may be gzip-compressed
 * (.gz, read through libarchive's raw format). The parser checks the magic, the number and size
 * of dimensions, the exact data length (truncated or trailing bytes are errors), label range
 * 0..9, and that images and labels agree in count. */
#ifndef NB_DATASETS_MNIST_H
#define NB_DATASETS_MNIST_H

#include <stdint.h>
#include <stddef.h>
#include "util/err.h"

typedef struct nb_idx {
    int ndims;
    uint32_t dims[4];
    uint8_t *data; /* product of dims bytes; owned, free() */
    size_t size;
} nb_idx;

/* The most bytes of data (product of dims) an IDX file may declare or hold: Fashion-MNIST's
 * largest file has 47,040,000. A larger claim, or more bytes than declared, is refused without
 * decompressing further (a decompression bomb costs nothing). */
#define NB_IDX_MAX_BYTES ((uint64_t)64 << 20)

/* Reads one IDX file (plain or .gz, decided by content, not name). expect_ndims is 3 or 1.
 * Returns 0 and fills *out (the caller frees out->data, or calls nb_idx_free), or -1 with err
 * naming the file and what is wrong; *out is then zeroed and owns nothing. */
int nb_idx_read(const char *path, int expect_ndims, nb_idx *out, nb_err *err);
/* nb_idx_read on bytes in memory (plain or gzip, by content); name stands for the file in
 * messages. The fuzzing entry point (tests/fuzz/fuzz_idx.c). */
int nb_idx_read_mem(const void *data, size_t size, const char *name, int expect_ndims, nb_idx *out,
                    nb_err *err);
void nb_idx_free(nb_idx *idx); /* frees data and zeroes; idx may be NULL */

typedef struct nb_split {
    int n;    /* examples */
    int dim;  /* 784 */
    float *x; /* (n, dim), pixels / 255 */
    int *y;   /* (n) labels 0..9 */
} nb_split;

typedef struct nb_mnist {
    nb_split train, val, test;
    char source[1024]; /* where the files were found, for the run's record */
} nb_mnist;

/* Loads dataset "mnist", "fashion-mnist" or "synthetic".
 * - mnist: DATA_DIR/mnist/{train-images-idx3-ubyte,train-labels-idx1-ubyte,t10k-...}[.gz]
 * - fashion-mnist: DATA_DIR/fashion-mnist/..., else /usr/share/datasets/fashion-mnist/ (Debian's
 *   dataset-fashion-mnist).
 * - synthetic: generated from seed, 28x28 images with learnable class structure (10 classes);
 *   sizes as the real split unless subset says otherwise.
 * Train is the first 55,000 training images, val the last 5,000, test the 10,000 t10k images.
 * subset > 0 keeps the first `subset` training examples (and at most subset val/test examples)
 * for quick runs. A missing file is an error that lists every place looked and a hint.
 * data_dir may be NULL (only Debian's directory is then searched); seed matters only for
 * synthetic. Returns 0, or -1 with err and *out zeroed; free with nb_mnist_free. */
int nb_mnist_load(nb_mnist *out, const char *dataset, const char *data_dir, int subset,
                  uint64_t seed, nb_err *err);
/* Where nb_mnist_load finds "mnist" or "fashion-mnist": the four files' paths (train images,
 * train labels, test images, test labels; plain preferred over .gz) and the directory holding
 * them (dir_size bytes). Returns 0, or -1 with err listing every place looked, and a hint. */
int nb_mnist_find(const char *dataset, const char *data_dir, char paths[4][1024], char *dir,
                  size_t dir_size, nb_err *err);
void nb_mnist_free(nb_mnist *m); /* frees the three splits and zeroes; m may be NULL */

/* The "synthetic" dataset alone (what nb_mnist_load does for it): ten classes, each a fixed
 * combination of three of six smooth strokes/blobs (the same for every seed: the task does not
 * change with the seed); examples are shifted by up to 2 px, scaled, mixed with a fainter part
 * the class lacks, a distractor blob and pixel noise, clipped to [0, 1]. The examples depend
 * only on seed (and the split and index), never on the thread count. Sizes 55,000/5,000/10,000,
 * cut by subset as for the real data. Returns 0, or -1 with err (out of memory). */
int nb_mnist_synthetic(nb_mnist *out, int subset, uint64_t seed, nb_err *err);

#endif
