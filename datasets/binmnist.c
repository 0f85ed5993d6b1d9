/* datasets/binmnist.c — the draw task's binary images (datasets/binmnist.h).
 *
 * Cache layout (DATA/.cache/binarized/NAME-RULE.bin, native byte order): "NBBIN01\n", u64
 * key[8] (format version, rule, seed, FNV-1a of the two image paths, then size and mtime in
 * nanoseconds of train-images and t10k-images), u32 ntrain, u32 ntest (images in the two files),
 * the packed pixels (bit j of byte k is pixel 8k + j, train images then test images), then the
 * FNV-1a 64 of every byte before it. */
#include "datasets/binmnist.h"

#include "datasets/amat.h"
#include "datasets/cifar10.h" /* nb_fnv1a */
#include "datasets/mnist.h"
#include "datasets/synth.h"
#include "util/file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CACHE_VERSION 1
static const char cache_magic[8] = "NBBIN01\n";

const char *const nb_binmnist_datasets[] = {"binarized-mnist", "mnist-binarized",
                                            "fashion-mnist-binarized", "synthetic", NULL};

const char *nb_binarize_name(nb_binarize rule) {
    return rule == NB_BINARIZE_THRESHOLD ? "threshold" : "stochastic";
}

int nb_binarize_parse(const char *name, nb_binarize *rule) {
    if (name && strcmp(name, "stochastic") == 0) {
        *rule = NB_BINARIZE_STOCHASTIC;
        return 0;
    }
    if (name && strcmp(name, "threshold") == 0) {
        *rule = NB_BINARIZE_THRESHOLD;
        return 0;
    }
    return -1;
}

void nb_binarize_images(uint8_t *out, const uint8_t *pixels, int n, int file, int first,
                        nb_binarize rule) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const uint8_t *p = pixels + (size_t)i * NB_BIN_DIM;
        uint8_t *o = out + (size_t)i * NB_BIN_DIM;
        if (rule == NB_BINARIZE_THRESHOLD) {
            for (int j = 0; j < NB_BIN_DIM; j++)
                o[j] = p[j] >= 128;
            continue;
        }
        uint64_t s = NB_BINARIZE_SEED ^ ((uint64_t)file << 32) ^ (uint64_t)(first + i);
        for (int j = 0; j < NB_BIN_DIM; j++) {
            uint64_t u = nb_synth_next(&s) >> 32;
            o[j] = u * 255u < ((uint64_t)p[j] << 32);
        }
    }
}

static int alloc_split(nb_binsplit *s, int n, nb_err *err) {
    s->n = n;
    s->x = malloc((size_t)(n ? n : 1) * NB_BIN_DIM);
    return s->x ? 0 : nb_errf(err, "out of memory for %d images", n);
}

static int cut(int n, int subset) {
    return subset > 0 && subset < n ? subset : n;
}

/* ---- binarized-mnist: Larochelle's .amat files --------------------------------------------- */

static int load_amat(nb_binmnist *out, const char *data_dir, int subset, nb_err *err) {
    static const char *const names[3] = {"binarized_mnist_train.amat", "binarized_mnist_valid.amat",
                                         "binarized_mnist_test.amat"};
    static const int counts[3] = {NB_BIN_NTRAIN, NB_BIN_NVALID, NB_BIN_NTEST};
    nb_binsplit *sp[3] = {&out->train, &out->val, &out->test};
    if (!data_dir || !data_dir[0]) {
        nb_errf(err, "binarized-mnist needs a data directory");
        return nb_hintf(err, "run 'normbench fetch binarized-mnist'");
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/binarized-mnist", data_dir);
    for (int t = 0; t < 3; t++) {
        int k = (t + 1) % 3; /* valid, test, then the large train file */
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        struct stat st;
        if (stat(path, &st) != 0) {
            nb_errf(err, "cannot find the binarized MNIST file '%s'", path);
            return nb_hintf(err,
                            "run 'normbench fetch binarized-mnist' (or '--from DIR' with the three "
                            ".amat files), or use mnist-binarized, fashion-mnist-binarized or "
                            "synthetic");
        }
        nb_amat a;
        if (nb_amat_read(path, counts[k], &a, err)) return -1;
        int n = cut(a.n, subset);
        if (n < a.n) {
            uint8_t *x = realloc(a.x, (size_t)n * NB_BIN_DIM);
            if (x) a.x = x;
        }
        sp[k]->n = n;
        sp[k]->x = a.x;
    }
    snprintf(out->source, sizeof out->source,
             "%.900s: binarized_mnist_{train,valid,test}.amat (Larochelle's fixed binarization)",
             dir);
    return 0;
}

/* ---- mnist-binarized, fashion-mnist-binarized: IDX files binarized once, cached ------------ */

static int cache_path(const char *data_dir, const char *name, nb_binarize rule, char *path,
                      size_t n) {
    if (!data_dir || !data_dir[0]) return -1;
    char d[2][1100];
    snprintf(d[0], sizeof d[0], "%s/.cache", data_dir);
    snprintf(d[1], sizeof d[1], "%s/.cache/binarized", data_dir);
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (lstat(d[i], &st) != 0) {
            if (errno != ENOENT || mkdir(d[i], 0755) != 0) return -1;
        } else if (!S_ISDIR(st.st_mode)) {
            return -1; /* a link or a file: no cache, never written through */
        }
    }
    int k = snprintf(path, n, "%s/%s-%s.bin", d[1], name, nb_binarize_name(rule));
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* The cache key: version, rule, seed, paths, sizes, mtimes. -1 when a file cannot be stat'ed. */
static int cache_key(uint64_t key[8], nb_binarize rule, const char *train, const char *test) {
    const char *p[2] = {train, test};
    key[0] = CACHE_VERSION;
    key[1] = (uint64_t)rule;
    key[2] = NB_BINARIZE_SEED;
    key[3] = NB_FNV_INIT;
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (stat(p[i], &st) != 0) return -1;
        key[3] = nb_fnv1a(key[3], (const uint8_t *)p[i], strlen(p[i]) + 1);
        key[4 + 2 * i] = (uint64_t)st.st_size;
        key[5 + 2 * i] = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    }
    return 0;
}

static void pack(uint8_t *dst, const uint8_t *src, size_t nbits) {
    memset(dst, 0, (nbits + 7) / 8);
    for (size_t i = 0; i < nbits; i++)
        dst[i >> 3] |= (uint8_t)(src[i] << (i & 7));
}

static void unpack(uint8_t *dst, const uint8_t *src, size_t nbits) {
    for (size_t i = 0; i < nbits; i++)
        dst[i] = (src[i >> 3] >> (i & 7)) & 1;
}

/* Reads the cache into bits (ntrain + ntest images, 0/1 bytes, allocated). 1 when used, 0 when
 * absent, stale or damaged. */
static int cache_read(const char *path, const uint64_t key[8], uint8_t **bits, int *ntrain,
                      int *ntest) {
    char *buf = NULL;
    size_t len = 0;
    nb_err e;
    if (nb_read_file(path, (size_t)64 << 20, NB_READ_REGULAR | NB_READ_NOFOLLOW, &buf, &len, &e))
        return 0;
    int ok = 0;
    size_t head = 8 + 8 * 8 + 8;
    uint32_t n[2];
    if (len >= head + 8 && memcmp(buf, cache_magic, 8) == 0 && memcmp(buf + 8, key, 64) == 0) {
        memcpy(n, buf + 72, 8);
        uint64_t total = ((uint64_t)n[0] + n[1]) * NB_BIN_DIM;
        uint64_t h;
        memcpy(&h, buf + len - 8, 8);
        if (n[0] > NB_BIN_NVALID && n[0] <= 1000000 && n[1] <= 1000000 &&
            len == head + (total + 7) / 8 + 8 &&
            nb_fnv1a(NB_FNV_INIT, (const uint8_t *)buf, len - 8) == h) {
            *bits = malloc(total ? total : 1);
            if (*bits) {
                unpack(*bits, (const uint8_t *)buf + head, total);
                *ntrain = (int)n[0];
                *ntest = (int)n[1];
                ok = 1;
            }
        }
    }
    free(buf);
    return ok;
}

static void cache_write(const char *path, const uint64_t key[8], const uint8_t *bits, int ntrain,
                        int ntest) {
    size_t total = ((size_t)ntrain + (size_t)ntest) * NB_BIN_DIM;
    size_t head = 8 + 64 + 8, body = (total + 7) / 8;
    uint8_t *buf = malloc(head + body + 8);
    if (!buf) return;
    uint32_t n[2] = {(uint32_t)ntrain, (uint32_t)ntest};
    memcpy(buf, cache_magic, 8);
    memcpy(buf + 8, key, 64);
    memcpy(buf + 72, n, 8);
    pack(buf + head, bits, total);
    uint64_t h = nb_fnv1a(NB_FNV_INIT, buf, head + body);
    memcpy(buf + head + body, &h, 8);
    nb_err e;
    (void)nb_write_atomic(path, buf, head + body + 8, &e); /* failing costs time only */
    free(buf);
}

static int load_idx(nb_binmnist *out, const char *base, const char *data_dir, nb_binarize rule,
                    int subset, nb_err *err) {
    char paths[4][1024], dir[1024], cpath[1300];
    if (nb_mnist_find(base, data_dir, paths, dir, sizeof dir, err)) return -1;
    uint64_t key[8];
    int have_key = cache_key(key, rule, paths[0], paths[2]) == 0;
    int cached = have_key && cache_path(data_dir, base, rule, cpath, sizeof cpath) == 0;
    uint8_t *bits = NULL;
    int ntrain = 0, ntest = 0, from_cache = 0;
    if (cached) from_cache = cache_read(cpath, key, &bits, &ntrain, &ntest);
    if (!from_cache) {
        nb_idx im[2];
        memset(im, 0, sizeof im);
        int rc = -1;
        for (int f = 0; f < 2; f++) {
            const char *p = paths[2 * f];
            if (nb_idx_read(p, 3, &im[f], err)) goto idx_done;
            if (im[f].dims[1] != NB_BIN_SIDE || im[f].dims[2] != NB_BIN_SIDE) {
                nb_errf(err, "'%s' holds %ux%u images, expected 28x28", p, (unsigned)im[f].dims[1],
                        (unsigned)im[f].dims[2]);
                nb_hintf(err, "use the MNIST or Fashion-MNIST IDX files");
                goto idx_done;
            }
            if (im[f].dims[0] > 1000000) {
                nb_errf(err, "'%s' has too many images (%u)", p, (unsigned)im[f].dims[0]);
                goto idx_done;
            }
        }
        ntrain = (int)im[0].dims[0];
        ntest = (int)im[1].dims[0];
        if (ntrain <= NB_BIN_NVALID) {
            nb_errf(err,
                    "'%s' has only %d training images; the split needs more than %d (the last "
                    "%d are the validation set)",
                    paths[0], ntrain, NB_BIN_NVALID, NB_BIN_NVALID);
            nb_hintf(err, "use the full training set (60,000 images)");
            goto idx_done;
        }
        bits = malloc(((size_t)ntrain + (size_t)ntest) * NB_BIN_DIM);
        if (!bits) {
            nb_errf(err, "out of memory binarizing %d images", ntrain + ntest);
            goto idx_done;
        }
        nb_binarize_images(bits, im[0].data, ntrain, 0, 0, rule);
        nb_binarize_images(bits + (size_t)ntrain * NB_BIN_DIM, im[1].data, ntest, 1, 0, rule);
        rc = 0;
    idx_done:
        nb_idx_free(&im[0]);
        nb_idx_free(&im[1]);
        if (rc) {
            free(bits);
            return -1;
        }
        if (cached) cache_write(cpath, key, bits, ntrain, ntest);
    }
    int nvalid_first = ntrain - NB_BIN_NVALID;
    struct {
        nb_binsplit *s;
        int first, n;
    } cuts[3] = {{&out->train, 0, nvalid_first},
                 {&out->val, nvalid_first, NB_BIN_NVALID},
                 {&out->test, ntrain, ntest}};
    int rc = 0;
    for (int k = 0; k < 3 && rc == 0; k++) {
        int n = cut(cuts[k].n, subset);
        rc = alloc_split(cuts[k].s, n, err);
        if (rc == 0)
            memcpy(cuts[k].s->x, bits + (size_t)cuts[k].first * NB_BIN_DIM, (size_t)n * NB_BIN_DIM);
    }
    free(bits);
    if (rc) return -1;
    snprintf(out->source, sizeof out->source,
             "%.500s: %s binarized (%s%s), train images 0..%d / valid %d..%d / t10k%s%.300s", dir,
             base, nb_binarize_name(rule),
             rule == NB_BINARIZE_STOCHASTIC ? ", seed 0x62696e6172697a65" : ", p >= 128",
             nvalid_first - 1, nvalid_first, ntrain - 1, from_cache ? "; from the cache " : "",
             from_cache ? cpath : "");
    return 0;
}

/* ---- synthetic ------------------------------------------------------------------------------ */

static void draw_segment(uint8_t *o, float ax, float ay, float bx, float by, float r) {
    for (int y = 0; y < NB_BIN_SIDE; y++)
        for (int x = 0; x < NB_BIN_SIDE; x++)
            if (nb_synth_seg_dist2((float)x, (float)y, ax, ay, bx, by) <= r * r)
                o[y * NB_BIN_SIDE + x] = 1;
}

static void synth_image(uint8_t *o, uint64_t s) {
    memset(o, 0, NB_BIN_DIM);
    int nshapes = 1 + (int)(nb_synth_next(&s) % 4);
    for (int k = 0; k < nshapes; k++) {
        int kind = (int)(nb_synth_next(&s) % 5);
        float r = nb_synth_unif(&s, 0.5f, 1.25f); /* half the thickness */
        float cx = nb_synth_unif(&s, 6, 22), cy = nb_synth_unif(&s, 6, 22);
        float w = nb_synth_unif(&s, 3, 10), h = nb_synth_unif(&s, 3, 10);
        if (kind == 0 || kind == 1) { /* a line, or a polyline of two segments */
            float a = nb_synth_unif(&s, 0, 6.2831853f), len = nb_synth_unif(&s, 6, 18);
            float ax = cx - 0.5f * len * cosf(a), ay = cy - 0.5f * len * sinf(a);
            float bx = cx + 0.5f * len * cosf(a), by = cy + 0.5f * len * sinf(a);
            draw_segment(o, ax, ay, bx, by, r);
            if (kind == 1) {
                float a2 =
                    a + nb_synth_unif(&s, 1.0f, 2.4f) * (nb_synth_next(&s) & 1 ? 1.0f : -1.0f);
                float l2 = nb_synth_unif(&s, 5, 12);
                draw_segment(o, bx, by, bx + l2 * cosf(a2), by + l2 * sinf(a2), r);
            }
        } else if (kind == 2 || kind == 3) { /* a rectangle outline, or filled */
            int x0 = (int)(cx - w), x1 = (int)(cx + w), y0 = (int)(cy - h), y1 = (int)(cy + h);
            int t = r > 0.9f ? 2 : 1;
            for (int y = y0; y <= y1; y++)
                for (int x = x0; x <= x1; x++) {
                    if (x < 0 || y < 0 || x >= NB_BIN_SIDE || y >= NB_BIN_SIDE) continue;
                    int edge = x < x0 + t || x > x1 - t || y < y0 + t || y > y1 - t;
                    if (kind == 3 || edge) o[y * NB_BIN_SIDE + x] = 1;
                }
        } else { /* an ellipse outline */
            for (int y = 0; y < NB_BIN_SIDE; y++)
                for (int x = 0; x < NB_BIN_SIDE; x++) {
                    float dx = ((float)x - cx) / w, dy = ((float)y - cy) / h;
                    float d = sqrtf(dx * dx + dy * dy);
                    float m = w < h ? w : h;
                    if (fabsf(d - 1.0f) * m <= r) o[y * NB_BIN_SIDE + x] = 1;
                }
        }
    }
}

int nb_binmnist_synthetic(nb_binmnist *out, int subset, uint64_t seed, nb_err *err) {
    memset(out, 0, sizeof *out);
    nb_binsplit *sp[3] = {&out->train, &out->val, &out->test};
    static const int counts[3] = {NB_BIN_NTRAIN, NB_BIN_NVALID, NB_BIN_NTEST};
    for (int k = 0; k < 3; k++) {
        int n = cut(counts[k], subset);
        if (alloc_split(sp[k], n, err)) {
            nb_binmnist_free(out);
            return -1;
        }
        uint8_t *x = sp[k]->x;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            uint64_t s = seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(k + 1) << 40) ^ (uint64_t)i;
            (void)nb_synth_next(&s);
            synth_image(x + (size_t)i * NB_BIN_DIM, s);
        }
    }
    snprintf(out->source, sizeof out->source,
             "synthetic binary strokes and shapes (seed %llu, %d/%d/%d images)",
             (unsigned long long)seed, out->train.n, out->val.n, out->test.n);
    return 0;
}

int nb_binmnist_load(nb_binmnist *out, const char *dataset, const char *data_dir, nb_binarize rule,
                     int subset, uint64_t seed, nb_err *err) {
    memset(out, 0, sizeof *out);
    if (!dataset) dataset = "(null)";
    int rc;
    if (strcmp(dataset, "synthetic") == 0) return nb_binmnist_synthetic(out, subset, seed, err);
    if (strcmp(dataset, "binarized-mnist") == 0)
        rc = load_amat(out, data_dir, subset, err);
    else if (strcmp(dataset, "mnist-binarized") == 0)
        rc = load_idx(out, "mnist", data_dir, rule, subset, err);
    else if (strcmp(dataset, "fashion-mnist-binarized") == 0)
        rc = load_idx(out, "fashion-mnist", data_dir, rule, subset, err);
    else {
        nb_errf(err, "unknown dataset '%s' for binary images", dataset);
        rc = nb_hintf(err, "use binarized-mnist, mnist-binarized, fashion-mnist-binarized or "
                           "synthetic");
    }
    if (rc) nb_binmnist_free(out);
    return rc;
}

void nb_binmnist_free(nb_binmnist *m) {
    if (!m) return;
    free(m->train.x);
    free(m->val.x);
    free(m->test.x);
    memset(m, 0, sizeof *m);
}
