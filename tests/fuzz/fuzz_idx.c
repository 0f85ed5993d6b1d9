/* tests/fuzz/fuzz_idx.c — the IDX parser (datasets/idx.c) on arbitrary bytes, plain or gzip,
 * as images (3 dimensions) and as labels (1 dimension). A parse that succeeds must describe
 * exactly the bytes it returns. */
#include <stdint.h>
#include <stdlib.h>

#include "datasets/mnist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int nd = 1; nd <= 3; nd += 2) {
        nb_idx idx;
        nb_err err;
        if (nb_idx_read_mem(data, size, "fuzz-input", nd, &idx, &err) != 0) {
            if (!err.msg[0] || idx.data) abort(); /* a failure always says why, owns nothing */
            continue;
        }
        uint64_t n = 1;
        for (int i = 0; i < idx.ndims; i++)
            n *= idx.dims[i];
        if (idx.ndims != nd || n != idx.size || n > NB_IDX_MAX_BYTES) abort();
        unsigned sum = 0;
        for (size_t i = 0; i < idx.size; i++) /* every returned byte is readable */
            sum += idx.data[i];
        (void)sum;
        nb_idx_free(&idx);
    }
    return 0;
}
