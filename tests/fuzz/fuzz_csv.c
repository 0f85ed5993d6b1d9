/* tests/fuzz/fuzz_csv.c — util/csv.c's record splitter (what `bench --from` reads a kept bench
 * CSV with) on any line: it fails saying why, or returns at most max fields that, written back
 * quoted with their quotes doubled, split again into the same fields. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX = 40 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n = 0;
    while (n < size && data[n] != 0)
        n++; /* a line is a C string: up to the first NUL */
    char *line = malloc(n + 1);
    if (!line) return 0;
    memcpy(line, data, n);
    line[n] = '\0';
    char *f[MAX];
    const char *why = NULL;
    int k = nb_csv_split(line, f, MAX, &why);
    if (k < 0) {
        if (!why || !*why) abort(); /* a failure says why */
        free(line);
        return 0;
    }
    if (k < 1 || k > MAX) abort();
    /* written back: every field quoted, quotes doubled; at most 2n + 3 per field */
    size_t cap = 3 * n + 3 * (size_t)k + 1, w = 0;
    char *again = malloc(cap);
    if (!again) abort();
    for (int i = 0; i < k; i++) {
        if (f[i] < line || f[i] > line + n) abort(); /* points into the line */
        if (i) again[w++] = ',';
        again[w++] = '"';
        for (const char *c = f[i]; *c; c++) {
            if (*c == '"') again[w++] = '"';
            again[w++] = *c;
        }
        again[w++] = '"';
    }
    again[w] = '\0';
    char *copy = malloc(w + 1), *g[MAX];
    if (!copy) abort();
    memcpy(copy, again, w + 1);
    if (nb_csv_split(copy, g, MAX, &why) != k) abort();
    for (int i = 0; i < k; i++)
        if (strcmp(f[i], g[i]) != 0) abort();
    free(copy), free(again), free(line);
    return 0;
}
