/* tests/ref.h — reads reference tensors written by the PyTorch scripts in tests/ref/.
 *
 * File format (little-endian), a sequence of records until end of file:
 *   u32 name_len, name bytes (no NUL), u32 ndims, u32 dims[ndims], f64 data[prod(dims)]
 * Scripts write one file per group of cases (tests/ref/NAME.bin) with tests/ref/refio.py.
 * The directory is $NORMBENCH_REF (set by the Makefile), else "tests/ref". */
#ifndef NB_TESTS_REF_H
#define NB_TESTS_REF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_tensor {
    char name[128];
    int ndims;
    uint32_t dims[8];
    size_t n;
    double *data;
} ref_tensor;

typedef struct ref_file {
    ref_tensor *t;
    int count;
} ref_file;

/* Loads tests/ref/<file>; returns 0, or -1 after printing why. */
static inline int ref_load(ref_file *rf, const char *file) {
    const char *dir = getenv("NORMBENCH_REF");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "tests/ref", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ref: cannot open '%s'\n", path);
        return -1;
    }
    rf->t = NULL;
    rf->count = 0;
    for (;;) {
        uint32_t len;
        if (fread(&len, 4, 1, f) != 1) break;
        ref_tensor t;
        memset(&t, 0, sizeof t);
        if (len >= sizeof t.name || fread(t.name, 1, len, f) != len) goto bad;
        uint32_t nd;
        if (fread(&nd, 4, 1, f) != 1 || nd > 8) goto bad;
        t.ndims = (int)nd;
        t.n = 1;
        for (uint32_t i = 0; i < nd; i++) {
            if (fread(&t.dims[i], 4, 1, f) != 1) goto bad;
            t.n *= t.dims[i];
        }
        t.data = malloc(t.n * sizeof(double) + 1);
        if (!t.data || fread(t.data, sizeof(double), t.n, f) != t.n) {
            free(t.data);
            goto bad;
        }
        ref_tensor *nt = realloc(rf->t, (size_t)(rf->count + 1) * sizeof *nt);
        if (!nt) {
            free(t.data);
            goto bad;
        }
        rf->t = nt;
        rf->t[rf->count++] = t;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "ref: '%s' is malformed\n", path);
    fclose(f);
    return -1;
}

/* The tensor called name, or NULL (after printing its name). */
static inline const ref_tensor *ref_get(const ref_file *rf, const char *name) {
    for (int i = 0; i < rf->count; i++)
        if (strcmp(rf->t[i].name, name) == 0) return &rf->t[i];
    fprintf(stderr, "ref: no tensor '%s'\n", name);
    return NULL;
}

/* Inputs a reference script cannot make itself (random draws of normbench's own streams) are
 * dumped by the C test when $NORMBENCH_REF_DUMP is set, into that directory's <file>, in the
 * same format, and read by the script. ref_dump_open returns NULL when the variable is unset. */
static inline FILE *ref_dump_open(const char *file) {
    const char *dir = getenv("NORMBENCH_REF_DUMP");
    if (!dir || !*dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f) fprintf(stderr, "ref: cannot write '%s'\n", path);
    return f;
}

/* One record: name, a 1-dimensional shape of n values (the script reshapes), the data. */
static inline void ref_dump(FILE *f, const char *name, const double *x, size_t n) {
    if (!f) return;
    uint32_t len = (uint32_t)strlen(name), nd = 1, d = (uint32_t)n;
    fwrite(&len, 4, 1, f);
    fwrite(name, 1, len, f);
    fwrite(&nd, 4, 1, f);
    fwrite(&d, 4, 1, f);
    fwrite(x, sizeof(double), n, f);
}

static inline void ref_free(ref_file *rf) {
    for (int i = 0; i < rf->count; i++)
        free(rf->t[i].data);
    free(rf->t);
    rf->t = NULL;
    rf->count = 0;
}

#endif
