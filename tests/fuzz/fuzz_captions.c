/* tests/fuzz/fuzz_captions.c — libFuzzer target for the caption reader and the vocabulary
 * (datasets/coco.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "datasets/coco.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_captions c;
    nb_err err;
    if (nb_captions_parse(data, size, &c, &err) != 0) return 0;
    const nb_captions *sets[1] = {&c};
    int ncount[1] = {c.n / 2};
    int *ids[1];
    if (nb_vocab_encode(sets, ncount, 1, sets, ids, 1, &err) > 0) free(ids[0]);
    nb_captions_free(&c);
    return 0;
}
