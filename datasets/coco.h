/* datasets/coco.h — the order-embedding data: COCO captions and VGG image features (coco-oe), or
 * a generated stand-in (synthetic). docs/papers.md#order-data.
 *
 * Captions: one per line, tokens separated by spaces, exactly 5 per image: captions 5i..5i+4
 * belong to image row i. Lines end in '\n' ('\r\n' accepted; the last may lack it). The parser
 * refuses NUL and other control bytes, empty captions, and captions longer than
 * NB_CAPTION_MAX_TOKENS tokens.
 *
 * Vocabulary as the code builds it (vocab.py): from the training captions plus the dev (fold 0)
 * captions, every word, sorted by descending count; ids from 2 (0 = end of caption and padding,
 * 1 = unknown). Ties: first appearance first (the code's numpy argsort leaves ties in an
 * unspecified order, which is not reproduced). */
#ifndef NB_DATASETS_COCO_H
#define NB_DATASETS_COCO_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

#define NB_CAPTION_MAX_TOKENS 256
/* The largest caption file read (the COCO train file is ~30 MB). */
#define NB_CAPTION_MAX_BYTES ((size_t)1 << 30)

typedef struct nb_captions {
    int n;      /* captions (lines) */
    int *start; /* (n+1): caption i is tok[start[i] .. start[i+1]) */
    char **tok; /* token strings, pointing into text */
    int ntok;
    char *text; /* owned copy of the file with NULs between tokens */
} nb_captions;

/* Parses caption text (buf, n bytes). Returns 0, or -1 with err naming the line; *out then
 * owns nothing. Free with nb_captions_free. */
int nb_captions_parse(const uint8_t *buf, size_t n, nb_captions *out, nb_err *err);
/* Reads and parses path; errors name it. */
int nb_captions_load(const char *path, nb_captions *out, nb_err *err);
void nb_captions_free(nb_captions *c);

/* One split: images and their captions as word ids (each >= 1, no end token stored). */
typedef struct nb_oe_split {
    int nimg, dim;
    float *img; /* (nimg, dim) */
    int ncap;   /* 5 * nimg */
    int *start; /* (ncap+1) */
    int *tok;   /* word ids */
} nb_oe_split;

typedef struct nb_oe_data {
    nb_oe_split train, dev, test; /* dev: fold 0 of val (first 1,000 images, 5,000 captions) */
    int nwords;                   /* vocabulary size including ids 0 and 1 */
    int maxlen;                   /* longest caption, in words, over the three splits */
    char source[1024];            /* where the data came from, for the run's record */
} nb_oe_data;

/* Loads "coco-oe" from DATA_DIR/coco-oe/{train,val,test}.txt and
 * DATA_DIR/coco-oe/images/10crop/{train,val,test}.npy ((N, D) float32, N*5 captions), or
 * generates "synthetic" (from a fixed seed: the same data for every run; see coco.c).
 * subset > 0 keeps the first `subset` training images and at most as many dev and test images.
 * A missing file names the path and hints `normbench fetch coco-oe`. Returns 0, or -1 with err
 * and *out owning nothing. */
int nb_oe_data_load(nb_oe_data *out, const char *dataset, const char *data_dir, int subset,
                    nb_err *err);
void nb_oe_data_free(nb_oe_data *d);

/* Builds the vocabulary from the first ndev captions of every caption set in sets[0..nsets)
 * (ndev[i] < 0: all) and encodes every set in enc[0..nenc) into word ids (unknown words 1):
 * tok_out[i] receives (enc[i]->ntok) ids (caller frees). Returns the vocabulary size (ids 0
 * and 1 included), or -1 with err. */
int nb_vocab_encode(const nb_captions *const *sets, const int *ncount, int nsets,
                    const nb_captions *const *enc, int **tok_out, int nenc, nb_err *err);

#endif
