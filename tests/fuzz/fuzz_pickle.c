/* tests/fuzz/fuzz_pickle.c — libFuzzer target for the pickle reader (datasets/pickle.c): any input
 * is parsed by the in-memory entry point; whatever it returns is freed. Seeds in
 * tests/fuzz/corpus/pickle/. */
#include <stddef.h>
#include <stdint.h>

#include "datasets/pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_pickle p;
    nb_err err;
    if (nb_pickle_parse(data, size, "fuzz", &p, &err) == 0) nb_pickle_free(&p);
    return 0;
}
