/* datasets/mnist.c — finds and loads MNIST / Fashion-MNIST and cuts the 55,000/5,000/10,000
 * split; "synthetic" is in mnist_synth.c. */
#include "datasets/mnist.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEBIAN_FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define NVAL 5000
#define SIDE 28

enum { TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS, NFILES };
static const char *const file_names[NFILES] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Appends printf-style text to buf (size cap), truncating quietly. */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* Looks for the four files in dir (plain preferred over .gz). Returns 1 and fills paths when all
 * four are there; otherwise returns 0 and appends the missing ones to `missing`. */
static int find_in(const char *dir, char paths[NFILES][1024], char *missing, size_t cap) {
    int found = 0;
    for (int i = 0; i < NFILES; i++) {
        snprintf(paths[i], 1024, "%s/%s", dir, file_names[i]);
        if (is_file(paths[i])) {
            found++;
            continue;
        }
        snprintf(paths[i], 1024, "%s/%s.gz", dir, file_names[i]);
        if (is_file(paths[i])) {
            found++;
            continue;
        }
        append(missing, cap, "%s'%s/%s[.gz]'", missing[0] ? ", " : "", dir, file_names[i]);
    }
    return found == NFILES;
}

/* Copies n examples starting at example `first` from the IDX pair into s. */
static int make_split(nb_split *s, const nb_idx *im, const nb_idx *lb, int first, int n,
                      const float *lut, nb_err *err) {
    const int dim = SIDE * SIDE;
    s->n = n;
    s->dim = dim;
    s->x = malloc((size_t)n * dim * sizeof *s->x);
    s->y = malloc((size_t)n * sizeof *s->y);
    if (!s->x || !s->y) return nb_errf(err, "out of memory for %d examples", n);
    const uint8_t *px = im->data + (size_t)first * dim;
    for (size_t i = 0; i < (size_t)n * dim; i++)
        s->x[i] = lut[px[i]];
    for (int i = 0; i < n; i++)
        s->y[i] = lb->data[first + i];
    return 0;
}

/* Checks that an images/labels pair agrees: 28x28 images, labels 0..9, equal counts. */
static int check_pair(const nb_idx *im, const char *im_path, const nb_idx *lb, const char *lb_path,
                      nb_err *err) {
    if (im->dims[1] != SIDE || im->dims[2] != SIDE) {
        nb_errf(err, "'%s' holds %ux%u images, expected 28x28", im_path, (unsigned)im->dims[1],
                (unsigned)im->dims[2]);
        return nb_hintf(err, "use the MNIST or Fashion-MNIST IDX files");
    }
    if (im->dims[0] != lb->dims[0]) {
        nb_errf(err, "'%s' has %u images but '%s' has %u labels", im_path, (unsigned)im->dims[0],
                lb_path, (unsigned)lb->dims[0]);
        return nb_hintf(err, "the two files come from different sets or one is damaged: "
                             "download both again");
    }
    if (im->dims[0] > (uint32_t)INT32_MAX / (SIDE * SIDE)) {
        return nb_errf(err, "'%s' has too many images (%u)", im_path, (unsigned)im->dims[0]);
    }
    for (size_t i = 0; i < lb->size; i++) {
        if (lb->data[i] > 9) {
            nb_errf(err, "'%s' has label %u at index %zu; labels must be 0..9", lb_path,
                    lb->data[i], i);
            return nb_hintf(err, "the file is damaged or is not a 10-class label file: "
                                 "download it again");
        }
    }
    return 0;
}

static int clamp_subset(int n, int subset) {
    return subset > 0 && subset < n ? subset : n;
}

int nb_mnist_find(const char *dataset, const char *data_dir, char paths[4][1024], char *dir,
                  size_t dir_size, nb_err *err) {
    int is_fashion = strcmp(dataset, "fashion-mnist") == 0;
    const char *dirs[2];
    char user_dir[1024];
    int ndirs = 0;
    if (data_dir && data_dir[0]) {
        snprintf(user_dir, sizeof user_dir, "%s/%s", data_dir, dataset);
        dirs[ndirs++] = user_dir;
    }
    if (is_fashion) dirs[ndirs++] = DEBIAN_FASHION_DIR;

    char missing[900] = "";
    int at = -1;
    for (int d = 0; d < ndirs && at < 0; d++)
        if (find_in(dirs[d], paths, missing, sizeof missing)) at = d;
    if (at < 0) {
        nb_errf(err, "cannot find the %s IDX files: looked for %s", dataset,
                missing[0] ? missing : "(no directory given)");
        const char *dd = data_dir && data_dir[0] ? data_dir : "DATA_DIR";
        if (is_fashion)
            return nb_hintf(err,
                            "install Debian's dataset-fashion-mnist (sudo apt-get install "
                            "dataset-fashion-mnist) or put the four IDX files in '%s/%s'",
                            dd, dataset);
        return nb_hintf(err,
                        "run 'normbench fetch mnist', or put the four IDX files (.gz or not) "
                        "in '%s/%s'",
                        dd, dataset);
    }
    snprintf(dir, dir_size, "%s", dirs[at]);
    return 0;
}

static int load_idx_dataset(nb_mnist *out, const char *dataset, const char *data_dir, int subset,
                            nb_err *err) {
    char paths[NFILES][1024], dir[1024];
    if (nb_mnist_find(dataset, data_dir, paths, dir, sizeof dir, err)) return -1;
    nb_idx idx[NFILES];
    memset(idx, 0, sizeof idx);
    int rc = -1;
    for (int i = 0; i < NFILES; i++)
        if (nb_idx_read(paths[i], i % 2 == 0 ? 3 : 1, &idx[i], err)) goto done;
    if (check_pair(&idx[TRAIN_IMAGES], paths[TRAIN_IMAGES], &idx[TRAIN_LABELS], paths[TRAIN_LABELS],
                   err) ||
        check_pair(&idx[TEST_IMAGES], paths[TEST_IMAGES], &idx[TEST_LABELS], paths[TEST_LABELS],
                   err))
        goto done;
    int ntrain_all = (int)idx[TRAIN_IMAGES].dims[0];
    int ntest_all = (int)idx[TEST_IMAGES].dims[0];
    if (ntrain_all <= NVAL) {
        nb_errf(err,
                "'%s' has only %d training images; the train/validation split needs more than "
                "%d (the last %d are held out for validation)",
                paths[TRAIN_IMAGES], ntrain_all, NVAL, NVAL);
        nb_hintf(err, "use the full training set (60,000 images)");
        goto done;
    }

    float lut[256];
    for (int i = 0; i < 256; i++)
        lut[i] = (float)i / 255.0f;
    int ntr = ntrain_all - NVAL;
    if (make_split(&out->train, &idx[TRAIN_IMAGES], &idx[TRAIN_LABELS], 0,
                   clamp_subset(ntr, subset), lut, err) ||
        make_split(&out->val, &idx[TRAIN_IMAGES], &idx[TRAIN_LABELS], ntr,
                   clamp_subset(NVAL, subset), lut, err) ||
        make_split(&out->test, &idx[TEST_IMAGES], &idx[TEST_LABELS], 0,
                   clamp_subset(ntest_all, subset), lut, err))
        goto done;

    /* Record the directory and the exact file names (plain or .gz). */
    snprintf(out->source, sizeof out->source, "%.1000s:", dir);
    for (int i = 0; i < NFILES; i++) {
        const char *base = strrchr(paths[i], '/');
        append(out->source, sizeof out->source, " %s", base ? base + 1 : paths[i]);
    }
    rc = 0;
done:
    for (int i = 0; i < NFILES; i++)
        nb_idx_free(&idx[i]);
    return rc;
}

int nb_mnist_load(nb_mnist *out, const char *dataset, const char *data_dir, int subset,
                  uint64_t seed, nb_err *err) {
    memset(out, 0, sizeof *out);
    int rc;
    if (!dataset) dataset = "(null)";
    if (strcmp(dataset, "synthetic") == 0) {
        rc = nb_mnist_synthetic(out, subset, seed, err);
    } else if (strcmp(dataset, "mnist") == 0 || strcmp(dataset, "fashion-mnist") == 0) {
        rc = load_idx_dataset(out, dataset, data_dir, subset, err);
    } else {
        nb_errf(err, "unknown dataset '%s' for the mnist task", dataset);
        nb_hintf(err, "use mnist, fashion-mnist or synthetic");
        rc = -1;
    }
    if (rc) nb_mnist_free(out);
    return rc;
}

void nb_mnist_free(nb_mnist *m) {
    if (!m) return;
    nb_split *s[3] = {&m->train, &m->val, &m->test};
    for (int i = 0; i < 3; i++) {
        free(s[i]->x);
        free(s[i]->y);
    }
    memset(m, 0, sizeof *m);
}
