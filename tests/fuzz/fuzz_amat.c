/* tests/fuzz/fuzz_amat.c — the .amat reader (datasets/amat.c) on arbitrary bytes, with any line
 * count and with two lines expected. A parse that succeeds must return exactly what the bytes
 * say: that many lines of 784 values, each 0 or 1, matching the digits of the input in order. */
#include <stdint.h>
#include <stdlib.h>

#include "datasets/amat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int expect = 0; expect <= 2; expect += 2) {
        nb_amat a;
        nb_err err;
        if (nb_amat_read_mem(data, size, "fuzz-input", expect, &a, &err) != 0) {
            if (!err.msg[0] || a.x || a.n) abort(); /* a failure always says why, owns nothing */
            continue;
        }
        if (a.n < 1 || (expect && a.n != expect) || a.n > NB_AMAT_MAX_LINES) abort();
        size_t k = 0;
        for (size_t i = 0; i < size; i++) {
            if (data[i] != '0' && data[i] != '1') continue;
            if (k >= (size_t)a.n * NB_AMAT_DIM || a.x[k] != data[i] - '0') abort();
            k++;
        }
        if (k != (size_t)a.n * NB_AMAT_DIM) abort();
        nb_amat_free(&a);
    }
    return 0;
}
