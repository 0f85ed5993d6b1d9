/* tests/fuzz/driver.c — runs a libFuzzer target (tests/fuzz/fuzz_NAME.c) without libFuzzer:
 * over every seed in a corpus directory, then over a bounded number of deterministic mutations of
 * each seed (bit flips, byte sets, truncations, duplicated and deleted chunks, splices of two
 * seeds). Built with gcc and, in `make asan`, the sanitizers: a crash, a sanitizer report or an
 * abort() in the target fails the run. Part of `make test` (tests/fuzz/README.md).
 *
 * usage: fuzz_NAME CORPUS_DIR [MUTATIONS_PER_SEED]   (default 400, or $NB_FUZZ_MUTATIONS) */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    uint8_t *data;
    size_t size;
    char name[256];
} seed;

static uint64_t rng_state;

static uint64_t next(void) { /* xorshift64*: fixed seed, so every run tries the same inputs */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static size_t below(size_t n) {
    return n ? (size_t)(next() % n) : 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const seed *)a)->name, ((const seed *)b)->name);
}

/* Runs one input from a fresh heap copy (so ASan sees reads past its end). */
static void run(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) abort();
    if (size) memcpy(copy, data, size);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
}

/* One mutation of s into buf (capacity cap); returns the new size. */
static size_t mutate(const seed *s, const seed *other, uint8_t *buf, size_t cap) {
    static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x03, 0x10};
    size_t n = s->size < cap ? s->size : cap;
    if (n) memcpy(buf, s->data, n); /* an empty seed has no data */
    int kind = (int)below(7);
    if (n == 0) kind = 4;
    switch (kind) {
    case 0: /* flip 1-8 bits */
        for (int i = 0, k = 1 + (int)below(8); i < k; i++)
            buf[below(n)] ^= (uint8_t)(1u << below(8));
        break;
    case 1: /* set 1-4 bytes to interesting or random values */
        for (int i = 0, k = 1 + (int)below(4); i < k; i++)
            buf[below(n)] = below(2) ? interesting[below(sizeof interesting)] : (uint8_t)next();
        break;
    case 2: /* truncate: near the start (headers), or anywhere */
        n = below(2) ? below(n < 64 ? n : 64) : below(n);
        break;
    case 3: { /* duplicate a chunk in place */
        size_t at = below(n), len = 1 + below(n - at);
        if (n + len > cap) len = cap - n;
        memmove(buf + at + len, buf + at, n - at);
        n += len;
        break;
    }
    case 4: /* append random bytes */
        for (int i = 0, k = 1 + (int)below(16); i < k && n < cap; i++)
            buf[n++] = (uint8_t)next();
        break;
    case 5: { /* delete a chunk */
        size_t at = below(n), len = 1 + below(n - at);
        memmove(buf + at, buf + at + len, n - at - len);
        n -= len;
        break;
    }
    default: { /* splice: the head of this seed, the tail of another */
        size_t cut = below(n), from = below(other->size);
        size_t len = other->size - from;
        if (cut + len > cap) len = cap - cut;
        if (len) memcpy(buf + cut, other->data + from, len); /* an empty seed has no data */
        n = cut + len;
        break;
    }
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS_PER_SEED]\n", argv[0]);
        return 2;
    }
    long per = 400;
    const char *env = getenv("NB_FUZZ_MUTATIONS");
    if (argc > 2)
        per = strtol(argv[2], NULL, 10);
    else if (env && *env)
        per = strtol(env, NULL, 10);
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "error: cannot open the corpus directory '%s'\n", argv[1]);
        return 1;
    }
    seed *seeds = NULL;
    size_t ns = 0, maxsize = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        seed s = {0};
        snprintf(s.name, sizeof s.name, "%s", e->d_name);
        size_t cap = 0;
        uint8_t tmp[65536];
        size_t k;
        while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) {
            uint8_t *grown = realloc(s.data, cap + k);
            if (!grown) abort();
            s.data = grown;
            memcpy(s.data + cap, tmp, k);
            cap += k;
        }
        fclose(f);
        s.size = cap;
        if (cap > maxsize) maxsize = cap;
        seed *grown = realloc(seeds, (ns + 1) * sizeof *seeds);
        if (!grown) abort();
        seeds = grown;
        seeds[ns++] = s;
    }
    closedir(d);
    if (ns == 0) {
        fprintf(stderr, "error: no seeds in '%s'\n", argv[1]);
        return 1;
    }
    qsort(seeds, ns, sizeof *seeds, by_name);
    size_t cap = 2 * maxsize + 64;
    uint8_t *buf = malloc(cap);
    if (!buf) abort();
    clock_t t0 = clock();
    long inputs = 0;
    for (size_t i = 0; i < ns; i++) {
        run(seeds[i].data, seeds[i].size);
        inputs++;
        rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1) * 0xBF58476D1CE4E5B9ull;
        for (long m = 0; m < per; m++) {
            size_t n = mutate(&seeds[i], &seeds[below(ns)], buf, cap);
            run(buf, n);
            inputs++;
        }
        /* every truncation of the first 256 bytes, and the whole seed minus 1..16 bytes */
        for (size_t t = 0; t < seeds[i].size && t < 256; t++, inputs++)
            run(seeds[i].data, t);
        for (size_t t = 1; t <= 16 && t < seeds[i].size; t++, inputs++)
            run(seeds[i].data, seeds[i].size - t);
    }
    printf("%s: %zu seeds, %ld inputs, no crash (%.1f s)\n", argv[0], ns, inputs,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    for (size_t i = 0; i < ns; i++)
        free(seeds[i].data);
    free(seeds);
    free(buf);
    return 0;
}
