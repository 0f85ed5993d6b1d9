/* datasets/binmnist.h — binary 28x28 images for the draw task (the LayerNorm paper's §6.4, after
 * DRAW, Gregor et al. 2015): the fixed binarized MNIST of Larochelle & Murray (2011), MNIST or
 * Fashion-MNIST binarized here by a fixed rule, and a synthetic set. Every dataset has the
 * literature's 50,000 / 10,000 / 10,000 split into train / valid / test.
 *
 * - "binarized-mnist": DATA/binarized-mnist/binarized_mnist_{train,valid,test}.amat (installed by
 *   `normbench fetch binarized-mnist`), read with datasets/amat.h; exactly 50,000, 10,000 and
 *   10,000 lines. The binarization is the files' own (Larochelle's, fixed once).
 * - "mnist-binarized", "fashion-mnist-binarized": the IDX files that nb_mnist_load finds (MNIST
 *   in DATA/mnist/; Fashion-MNIST in DATA/fashion-mnist/ or Debian's dataset-fashion-mnist).
 *   Train is the first 50,000 of the 60,000 training images, valid the LAST 10,000 training
 *   images (indices 50,000..59,999 of train-images), test the 10,000 t10k images. Each pixel p
 *   (0..255) becomes 0 or 1 by the rule:
 *     NB_BINARIZE_STOCHASTIC (default, the literature's "stochastic binarization", sampled once):
 *       1 with probability p/255, drawn from a splitmix64 stream seeded with
 *       NB_BINARIZE_SEED ^ (file << 32) ^ index (file 0: train-images, 1: t10k-images; index the
 *       image's position in its file): u = the stream's next value >> 32 for each pixel in row
 *       order, and the pixel is 1 iff u * 255 < p * 2^32. The same on every machine and run.
 *     NB_BINARIZE_THRESHOLD: 1 iff p/255 >= 0.5, i.e. p >= 128.
 *   The binarized images are cached once in DATA/.cache/binarized/NAME-RULE.bin (NAME mnist or
 *   fashion-mnist, RULE stochastic or threshold), written atomically (util/file.h), keyed by the
 *   rule, the seed, the format version and the two image files' paths, sizes and modification
 *   times: a cache made from other files, by another rule, or damaged (its FNV-1a checksum) is
 *   rebuilt and replaced. A cache that cannot be written only costs the binarization next time.
 *   Without a data directory nothing is cached.
 * - "synthetic": generated binary images with structure: one to four strokes (straight lines,
 *   two-segment polylines), rectangle outlines, filled rectangles and ellipse outlines, 1 to 2.5
 *   px thick, at random places, sizes and angles. Every image is drawn from its own generator
 *   seeded from (seed, split, index): the same for a seed whatever the thread count.
 *
 * subset > 0 keeps the first subset images of each split (quick runs and tests). */
#ifndef NB_DATASETS_BINMNIST_H
#define NB_DATASETS_BINMNIST_H

#include <stdint.h>

#include "util/err.h"

#define NB_BIN_SIDE 28
#define NB_BIN_DIM (NB_BIN_SIDE * NB_BIN_SIDE)
#define NB_BIN_NTRAIN 50000
#define NB_BIN_NVALID 10000
#define NB_BIN_NTEST 10000
#define NB_BINARIZE_SEED 0x62696e6172697a65ull /* "binarize" */

typedef enum nb_binarize { NB_BINARIZE_STOCHASTIC = 0, NB_BINARIZE_THRESHOLD = 1 } nb_binarize;

typedef struct nb_binsplit {
    int n;
    uint8_t *x; /* (n, NB_BIN_DIM), each 0 or 1 */
} nb_binsplit;

typedef struct nb_binmnist {
    nb_binsplit train, val, test;
    char source[1024]; /* where the data came from and how it was binarized, for the record */
} nb_binmnist;

/* The rule's name ("stochastic", "threshold"). */
const char *nb_binarize_name(nb_binarize rule);
/* The rule called name into *rule. Returns 0, or -1 when name is no rule. */
int nb_binarize_parse(const char *name, nb_binarize *rule);

/* The datasets nb_binmnist_load takes, in order (NULL-terminated). */
extern const char *const nb_binmnist_datasets[];

/* Loads dataset (above) from data_dir (may be NULL: then only Debian's Fashion-MNIST is found,
 * and nothing is cached). rule matters for the IDX-derived datasets only, seed for synthetic
 * only. Returns 0, or -1 with err (a missing file names every place looked and hints how to get
 * it) and *out zeroed. Free with nb_binmnist_free. */
int nb_binmnist_load(nb_binmnist *out, const char *dataset, const char *data_dir, nb_binarize rule,
                     int subset, uint64_t seed, nb_err *err);
void nb_binmnist_free(nb_binmnist *m); /* frees the splits and zeroes; m may be NULL */

/* The synthetic set alone: 50,000 / 10,000 / 10,000 images cut by subset. */
int nb_binmnist_synthetic(nb_binmnist *out, int subset, uint64_t seed, nb_err *err);

/* Binarizes n images (n * NB_BIN_DIM bytes of pixels 0..255) of IDX file `file` (0 train, 1
 * test), the first being index first in that file, into out (0/1 bytes), by rule. */
void nb_binarize_images(uint8_t *out, const uint8_t *pixels, int n, int file, int first,
                        nb_binarize rule);

#endif
