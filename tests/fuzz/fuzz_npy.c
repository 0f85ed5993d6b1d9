/* tests/fuzz/fuzz_npy.c — libFuzzer target for the .npy parser (datasets/npy.c): any input is
 * refused or parsed into an array whose description matches what was returned. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "datasets/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_npy a;
    nb_err err;
    if (nb_npy_parse(data, size, &a, &err) != 0) {
        if (a.data) abort(); /* a refusal owns nothing */
        return 0;
    }
    uint64_t count = 1;
    for (int i = 0; i < a.ndim; i++)
        count *= a.shape[i];
    if (!a.data || a.ndim < 0 || a.ndim > NB_NPY_MAXDIM || count != a.count ||
        a.data_off % 16 != 0 || a.data_off + 4 * a.count != size)
        abort();
    for (uint64_t i = 0; i < a.count; i++)
        if (a.data[i] != a.data[i]) abort(); /* NaN is refused */
    nb_npy_free(&a);
    return 0;
}
