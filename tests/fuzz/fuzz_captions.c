/* tests/fuzz/fuzz_captions.c — libFuzzer target for the caption reader and the vocabulary
 * (datasets/coco.c): any input is refused, or parsed into non-empty captions of non-empty
 * tokens without separators, encoded into ids inside the vocabulary. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/coco.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_captions c;
    nb_err err;
    if (nb_captions_parse(data, size, &c, &err) != 0) {
        if (c.text || c.tok || c.start) abort();
        return 0;
    }
    if (c.n < 1 || c.start[0] != 0 || c.start[c.n] != c.ntok) abort();
    for (int i = 0; i < c.n; i++) {
        int len = c.start[i + 1] - c.start[i];
        if (len < 1 || len > NB_CAPTION_MAX_TOKENS) abort();
    }
    for (int k = 0; k < c.ntok; k++)
        if (!c.tok[k][0] || strpbrk(c.tok[k], " \t\r\n")) abort();
    const nb_captions *sets[1] = {&c};
    int ncount[1] = {c.n / 2};
    int *ids[1];
    int V = nb_vocab_encode(sets, ncount, 1, sets, ids, 1, &err);
    if (V > 0) {
        for (int k = 0; k < c.ntok; k++)
            if (ids[0][k] < 1 || ids[0][k] >= V) abort();
        /* every counted caption's words are known */
        for (int k = 0; k < c.start[ncount[0]]; k++)
            if (ids[0][k] < 2) abort();
        free(ids[0]);
    }
    nb_captions_free(&c);
    return 0;
}
