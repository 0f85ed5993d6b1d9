/* datasets/cifar10.c — CIFAR-10 binary batches, preprocessing, and the cifar task's other image
 * sets. Contracts in datasets/cifar10.h. */
#include "datasets/cifar10.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/mnist.h"
#include "datasets/zca.h"
#include "util/rng.h"

uint64_t nb_fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void nb_cifar_raw_free(nb_cifar_raw *r) {
    if (!r) return;
    free(r->labels);
    free(r->pixels);
    memset(r, 0, sizeof *r);
}

int nb_cifar10_parse(const uint8_t *buf, size_t n, int expect_records, nb_cifar_raw *out,
                     nb_err *err) {
    memset(out, 0, sizeof *out);
    if (!buf || n == 0) {
        nb_errf(err, "the CIFAR-10 batch is empty");
        return nb_hintf(err, "the file is damaged: fetch it again with 'normbench fetch cifar10'");
    }
    if (n % NB_CIFAR_RECORD != 0) {
        nb_errf(err,
                "the CIFAR-10 batch has %zu bytes, not a whole number of 3073-byte records "
                "(%zu records and %zu bytes over)",
                n, n / NB_CIFAR_RECORD, n % NB_CIFAR_RECORD);
        return nb_hintf(err, "the file is truncated or damaged: fetch it again with 'normbench "
                             "fetch cifar10'");
    }
    size_t recs = n / NB_CIFAR_RECORD;
    if (recs > (size_t)1 << 24 || (expect_records > 0 && recs != (size_t)expect_records)) {
        nb_errf(err, "the CIFAR-10 batch has %zu records, expected %d", recs,
                expect_records > 0 ? expect_records : 1 << 24);
        return nb_hintf(err, "use the binary version's data_batch_*.bin and test_batch.bin");
    }
    for (size_t i = 0; i < recs; i++)
        if (buf[i * NB_CIFAR_RECORD] > 9) {
            nb_errf(err, "the CIFAR-10 batch has label %u in record %zu; labels are 0..9",
                    (unsigned)buf[i * NB_CIFAR_RECORD], i);
            return nb_hintf(err, "the file is damaged or is not a CIFAR-10 batch (CIFAR-100's "
                                 "records have two label bytes)");
        }
    out->labels = malloc(recs);
    out->pixels = malloc(recs * NB_CIFAR_PIXELS);
    if (!out->labels || !out->pixels) {
        nb_cifar_raw_free(out);
        return nb_errf(err, "out of memory for %zu CIFAR-10 images", recs);
    }
    for (size_t i = 0; i < recs; i++) {
        out->labels[i] = buf[i * NB_CIFAR_RECORD];
        memcpy(out->pixels + i * NB_CIFAR_PIXELS, buf + i * NB_CIFAR_RECORD + 1, NB_CIFAR_PIXELS);
    }
    out->n = (int)recs;
    return 0;
}

/* Reads path whole into *buf after checking its size is `want`; adds the bytes to *hash. */
static int read_exact(const char *path, size_t want, uint8_t **buf, uint64_t *hash, nb_err *err) {
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        nb_errf(err, "cannot open '%s': %s", path, strerror(e));
        return nb_hintf(err, "run 'normbench fetch cifar10' (or put the binary batches there)");
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return nb_errf(err, "'%s' is not a regular file", path);
    }
    if ((size_t)st.st_size != want) {
        fclose(f);
        nb_errf(err, "'%s' has %lld bytes, expected %zu (10,000 records of 3073 bytes)", path,
                (long long)st.st_size, want);
        return nb_hintf(err, "the file is truncated or damaged: fetch it again with 'normbench "
                             "fetch cifar10'");
    }
    uint8_t *b = malloc(want);
    if (!b) {
        fclose(f);
        return nb_errf(err, "out of memory reading '%s'", path);
    }
    size_t got = fread(b, 1, want, f);
    int rerr = ferror(f);
    fclose(f);
    if (got != want || rerr) {
        free(b);
        return nb_errf(err, "cannot read '%s' (%zu of %zu bytes)", path, got, want);
    }
    if (hash) *hash = nb_fnv1a(*hash, b, want);
    *buf = b;
    return 0;
}

int nb_cifar10_read(const char *path, nb_cifar_raw *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    if (read_exact(path, NB_CIFAR_FILE_BYTES, &buf, NULL, err) != 0) return -1;
    int rc = nb_cifar10_parse(buf, NB_CIFAR_FILE_BYTES, NB_CIFAR_FILE_RECORDS, out, err);
    free(buf);
    if (rc != 0) {
        /* name the file in the parser's message */
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        const char *rest = strncmp(m, "the CIFAR-10 batch ", 19) == 0 ? m + 19 : m;
        char h[sizeof err->hint];
        snprintf(h, sizeof h, "%s", err->hint);
        nb_errf(err, "'%s' %s", path, rest);
        nb_hintf(err, "%s", h);
    }
    return rc;
}

void nb_image_set_free(nb_image_set *s) {
    if (!s) return;
    free(s->train.x);
    free(s->train.y);
    free(s->test.x);
    free(s->test.y);
    memset(s, 0, sizeof *s);
}

static int alloc_images(nb_images *im, int n, int C, int H, int W, nb_err *err) {
    im->n = n, im->C = C, im->H = H, im->W = W;
    im->x = malloc(sizeof(float) * (size_t)n * C * H * W + 1);
    im->y = malloc(sizeof(int) * (size_t)n + 1);
    if (!im->x || !im->y) return nb_errf(err, "out of memory for %d images", n);
    return 0;
}

static int clamp_subset(int n, int subset) {
    return subset > 0 && subset < n ? subset : n;
}

/* Whitens x (n, 3072) in place through a chunk buffer (nb_zca_apply may not alias). */
static int zca_in_place(const nb_zca *z, float *x, int n, nb_err *err) {
    const int chunk = 500;
    float *tmp = malloc(sizeof(float) * (size_t)chunk * NB_CIFAR_PIXELS);
    if (!tmp) return nb_errf(err, "out of memory for ZCA whitening");
    for (int i = 0; i < n; i += chunk) {
        int b = n - i < chunk ? n - i : chunk;
        float *xi = x + (size_t)i * NB_CIFAR_PIXELS;
        nb_zca_apply(z, tmp, xi, b);
        memcpy(xi, tmp, sizeof(float) * (size_t)b * NB_CIFAR_PIXELS);
    }
    free(tmp);
    return 0;
}

static int load_cifar10(nb_image_set *out, const char *data_dir, int subset, int zca, nb_err *err) {
    static const char *const files[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    char dir[1024];
    if (!data_dir || !data_dir[0]) {
        nb_errf(err, "no data directory for cifar10");
        return nb_hintf(err, "give --data-dir DIR or set NORMBENCH_DATA");
    }
    snprintf(dir, sizeof dir, "%s/cifar10", data_dir);
    int rc = -1;
    nb_zca z;
    memset(&z, 0, sizeof z);
    uint64_t hash = NB_FNV_INIT;
    float lut[256];
    for (int i = 0; i < 256; i++)
        lut[i] = (float)((i - 127.5) / 128.0);
    if (alloc_images(&out->train, 5 * NB_CIFAR_FILE_RECORDS, 3, 32, 32, err) ||
        alloc_images(&out->test, NB_CIFAR_FILE_RECORDS, 3, 32, 32, err))
        goto done;
    for (int f = 0; f < 6; f++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        uint8_t *buf;
        if (read_exact(path, NB_CIFAR_FILE_BYTES, &buf, &hash, err) != 0) goto done;
        nb_cifar_raw raw;
        int prc = nb_cifar10_parse(buf, NB_CIFAR_FILE_BYTES, NB_CIFAR_FILE_RECORDS, &raw, err);
        free(buf);
        if (prc != 0) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            nb_errf(err, "'%s': %s", path, m);
            nb_hintf(err, "the file is damaged: fetch it again with 'normbench fetch cifar10'");
            goto done;
        }
        nb_images *im = f < 5 ? &out->train : &out->test;
        size_t base = f < 5 ? (size_t)f * NB_CIFAR_FILE_RECORDS : 0;
        for (int i = 0; i < raw.n; i++) {
            im->y[base + i] = raw.labels[i];
            float *x = im->x + (base + i) * NB_CIFAR_PIXELS;
            const uint8_t *p = raw.pixels + (size_t)i * NB_CIFAR_PIXELS;
            for (int j = 0; j < NB_CIFAR_PIXELS; j++)
                x[j] = lut[p[j]];
        }
        nb_cifar_raw_free(&raw);
    }
    char key[64], zpath[1300];
    snprintf(key, sizeof key, "cifar10-fnv1a-%016llx-reg1e-5", (unsigned long long)hash);
    snprintf(zpath, sizeof zpath, "%s/zca-%016llx.bin", dir, (unsigned long long)hash);
    snprintf(out->source, sizeof out->source,
             "%.900s: data_batch_1..5.bin test_batch.bin (fnv1a %016llx)%s", dir,
             (unsigned long long)hash, zca ? ", ZCA 1e-5" : ", no ZCA");
    if (zca) {
        int got = nb_zca_load(&z, zpath, key, NB_CIFAR_PIXELS, err);
        if (got < 0) goto done;
        if (got == 0) {
            if (nb_zca_fit(&z, out->train.x, out->train.n, NB_CIFAR_PIXELS, 1e-5, err) != 0)
                goto done;
            /* a cache that cannot be written only costs time next run */
            nb_err ignore;
            (void)nb_zca_save(&z, zpath, key, &ignore);
        }
    }
    /* the subset is cut after the fit (on all 50,000) and before whitening (1.1 TFLOP for all) */
    out->train.n = clamp_subset(out->train.n, subset);
    out->test.n = clamp_subset(out->test.n, subset);
    if (zca && (zca_in_place(&z, out->train.x, out->train.n, err) ||
                zca_in_place(&z, out->test.x, out->test.n, err)))
        goto done;
    rc = 0;
done:
    nb_zca_free(&z);
    return rc;
}

static int from_mnist(nb_image_set *out, const char *dataset, const char *data_dir, int subset,
                      uint64_t seed, nb_err *err) {
    nb_mnist m;
    if (nb_mnist_load(&m, dataset, data_dir, subset, seed, err) != 0) return -1;
    int rc = -1;
    const nb_split *sp[2] = {&m.train, &m.test};
    nb_images *im[2] = {&out->train, &out->test};
    for (int s = 0; s < 2; s++) {
        if (alloc_images(im[s], sp[s]->n, 1, 28, 28, err)) goto done;
        for (size_t i = 0; i < (size_t)sp[s]->n * 784; i++)
            im[s]->x[i] = (float)((sp[s]->x[i] * 255.0 - 127.5) / 128.0);
        memcpy(im[s]->y, sp[s]->y, sizeof(int) * (size_t)sp[s]->n);
    }
    snprintf(out->source, sizeof out->source, "%.900s (1x28x28, no ZCA)", m.source);
    rc = 0;
done:
    nb_mnist_free(&m);
    return rc;
}

/* ---- synthetic --------------------------------------------------------------------------------
 */

static const float tints[10][3] = {{1.0f, 0.2f, 0.2f}, {0.2f, 1.0f, 0.2f}, {0.2f, 0.2f, 1.0f},
                                   {1.0f, 1.0f, 0.2f}, {1.0f, 0.2f, 1.0f}, {0.2f, 1.0f, 1.0f},
                                   {1.0f, 0.6f, 0.2f}, {0.6f, 0.2f, 1.0f}, {0.7f, 0.7f, 0.7f},
                                   {0.2f, 0.6f, 0.6f}};

static void synth_image(float *x, int *y, uint64_t seed, uint64_t split, int idx) {
    nb_rng r;
    nb_rng_seed(&r, seed * 2654435761ULL + split, (uint64_t)idx + 1);
    int c = (int)nb_rng_below(&r, 10);
    *y = c;
    const double pi = 3.14159265358979323846;
    double th = c * pi / 10, period = 4.0 + 2.0 * (c % 3);
    double fx = 2 * pi / period * cos(th), fy = 2 * pi / period * sin(th);
    double phase = 2 * pi * nb_rng_uniform(&r);
    double contrast = 0.6 + 0.8 * nb_rng_uniform(&r);
    double bright = 0.6 * (nb_rng_uniform(&r) - 0.5);
    int other = (int)nb_rng_below(&r, 10);
    double bx = 32 * nb_rng_uniform(&r), by = 32 * nb_rng_uniform(&r);
    double bamp = 0.8 * nb_rng_uniform(&r);
    for (int ch = 0; ch < 3; ch++)
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 32; j++) {
                double v = contrast * tints[c][ch] * sin(fx * j + fy * i + phase) + bright;
                double d2 = (i - by) * (i - by) + (j - bx) * (j - bx);
                v += bamp * tints[other][ch] * exp(-d2 / 18.0);
                v += 0.35 * nb_rng_normal(&r);
                x[(ch * 32 + i) * 32 + j] = (float)v;
            }
}

int nb_cifar_synthetic(nb_image_set *out, int subset, uint64_t seed, nb_err *err) {
    memset(out, 0, sizeof *out);
    int ntr = clamp_subset(5 * NB_CIFAR_FILE_RECORDS, subset);
    int nte = clamp_subset(NB_CIFAR_FILE_RECORDS, subset);
    if (alloc_images(&out->train, ntr, 3, 32, 32, err) ||
        alloc_images(&out->test, nte, 3, 32, 32, err)) {
        nb_image_set_free(out);
        return -1;
    }
    out->classes = 10;
    nb_images *im[2] = {&out->train, &out->test};
    for (int s = 0; s < 2; s++) {
        nb_images *m = im[s];
#pragma omp parallel for schedule(static)
        for (int i = 0; i < m->n; i++)
            synth_image(m->x + (size_t)i * NB_CIFAR_PIXELS, m->y + i, seed, (uint64_t)s + 1, i);
    }
    snprintf(out->source, sizeof out->source,
             "synthetic (seed %llu): oriented coloured gratings, 3x32x32, no ZCA",
             (unsigned long long)seed);
    return 0;
}

int nb_cifar_load(nb_image_set *out, const char *dataset, const char *data_dir, int subset,
                  uint64_t seed, int zca, nb_err *err) {
    memset(out, 0, sizeof *out);
    int rc;
    if (!dataset) dataset = "(null)";
    if (strcmp(dataset, "synthetic") == 0) return nb_cifar_synthetic(out, subset, seed, err);
    if (strcmp(dataset, "cifar10") == 0)
        rc = load_cifar10(out, data_dir, subset, zca, err);
    else if (strcmp(dataset, "fashion-mnist") == 0 || strcmp(dataset, "mnist") == 0)
        rc = from_mnist(out, dataset, data_dir, subset, seed, err);
    else {
        nb_errf(err, "unknown dataset '%s' for the cifar task", dataset);
        nb_hintf(err, "use cifar10, fashion-mnist, mnist or synthetic");
        rc = -1;
    }
    out->classes = 10;
    if (rc != 0) nb_image_set_free(out);
    return rc;
}
