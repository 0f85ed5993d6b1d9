/* datasets/pickle.h — the subset of Python's pickle format the CNN top4 corpus uses (protocols
 * 0, 1 and 2, as Python 2's (c)Pickle writes them): a list of lists of ints, or a dict of
 * str -> int. Anything else (floats, tuples, None, objects, globals, deeper nesting, ints outside
 * 0 .. 2^31-1) is refused with an error naming the opcode and its offset. The parser has no
 * recursion; its memory is bounded by a small multiple of the input size. */
#ifndef NB_DATASETS_PICKLE_H
#define NB_DATASETS_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef enum nb_pickle_kind { NB_PICKLE_LISTS, NB_PICKLE_DICT } nb_pickle_kind;

typedef struct nb_pickle {
    nb_pickle_kind kind;
    /* NB_PICKLE_LISTS: n lists; list i is tok[off[i] .. off[i+1]) */
    int64_t n;
    int64_t *off;
    int32_t *tok;
    /* NB_PICKLE_DICT: n entries; key i is keys + koff[i] (NUL-terminated UTF-8, klen[i] bytes;
     * a key may hold NUL bytes, klen counts them), value val[i] */
    char *keys;
    int64_t *koff;
    int32_t *klen;
    int32_t *val;
} nb_pickle;

/* Parses buf[0..n) (what `name` held, used in messages). Returns 0 with *out filled (free with
 * nb_pickle_free), or -1 with err set and *out empty. */
int nb_pickle_parse(const uint8_t *buf, size_t n, const char *name, nb_pickle *out, nb_err *err);

/* Reads and parses a file (at most 4 GiB). */
int nb_pickle_load(const char *path, nb_pickle *out, nb_err *err);

void nb_pickle_free(nb_pickle *p);

#endif
