/* tests/fuzz/fuzz_npy.c — libFuzzer target for the .npy parser (datasets/npy.c). */
#include <stddef.h>
#include <stdint.h>

#include "datasets/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_npy a;
    nb_err err;
    if (nb_npy_parse(data, size, &a, &err) == 0) nb_npy_free(&a);
    return 0;
}
