/* tests/fuzz/fuzz_cifar10.c — libFuzzer target for the CIFAR-10 binary parser: any input must be
 * accepted (whole records, labels 0..9) or refused with a message, never crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "datasets/cifar10.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_cifar_raw r;
    nb_err err;
    memset(&err, 0, sizeof err);
    if (nb_cifar10_parse(data, size, 0, &r, &err) == 0) {
        if (r.n <= 0 || (size_t)r.n * NB_CIFAR_RECORD != size) __builtin_trap();
        for (int i = 0; i < r.n; i++)
            if (r.labels[i] > 9) __builtin_trap();
        nb_cifar_raw_free(&r);
    } else if (!err.msg[0] || r.labels || r.pixels) {
        __builtin_trap();
    }
    return 0;
}
