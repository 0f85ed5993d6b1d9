/* datasets/coco.c — captions, vocabulary, the coco-oe loader and the synthetic stand-in (see
 * datasets/coco.h).
 *
 * synthetic: every image has four latent attributes (one of 20 objects, 8 colours, 8 places,
 * counts one to four). Its 4096 features are ReLU(sum of one fixed Gaussian prototype per
 * attribute value, weighted 1, .7, .7, .5, plus Gaussian noise .8), L2-normalised, like the VGG
 * features. Its five captions come from a small grammar of eight templates, each naming the
 * object and one to three of the other attributes with a few interchangeable words, so that
 * retrieval is learnable only by reading the words (chance R@10 is 1% for 1,000 images).
 * Splits: 8,000 training, 1,000 dev and 5,000 test images, generated from a fixed seed. */
#include "datasets/coco.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/npy.h"
#include "util/file.h"
#include "util/rng.h"

/* ---- captions ---------------------------------------------------------------------------------
 */

void nb_captions_free(nb_captions *c) {
    if (!c) return;
    free(c->start);
    free(c->tok);
    free(c->text);
    memset(c, 0, sizeof *c);
}

int nb_captions_parse(const uint8_t *buf, size_t n, nb_captions *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    if (n > NB_CAPTION_MAX_BYTES) return nb_errf(err, "caption text of %zu bytes is too large", n);
    /* count lines and tokens, validating bytes */
    size_t lines = 0, toks = 0;
    int in_tok = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = buf[i];
        if (b == '\n') {
            lines++;
            in_tok = 0;
        } else if (b == ' ' || b == '\t' || (b == '\r' && i + 1 < n && buf[i + 1] == '\n')) {
            in_tok = 0;
        } else if (b < 0x20 || b == 0x7f) {
            return nb_errf(err, "caption line %zu holds control byte 0x%02x", lines + 1, b);
        } else if (!in_tok) {
            toks++;
            in_tok = 1;
        }
    }
    if (n > 0 && buf[n - 1] != '\n') lines++;
    if (lines == 0) return nb_errf(err, "no captions");
    if (lines > (1u << 26) || toks > (1u << 30)) return nb_errf(err, "too many captions");
    out->text = malloc(n + 1);
    out->start = malloc(sizeof(int) * (lines + 1));
    out->tok = malloc(sizeof(char *) * (toks ? toks : 1));
    if (!out->text || !out->start || !out->tok) {
        nb_captions_free(out);
        return nb_errf(err, "out of memory for %zu captions", lines);
    }
    memcpy(out->text, buf, n);
    out->text[n] = 0;
    int li = 0, ti = 0, len = 0;
    in_tok = 0;
    out->start[0] = 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = i < n ? out->text[i] : '\n';
        if (i == n && n > 0 && buf[n - 1] == '\n') break; /* final newline */
        if (ch == '\n' || ch == ' ' || ch == '\t' || ch == '\r') {
            out->text[i] = 0;
            in_tok = 0;
            if (ch == '\n') {
                if (len == 0) {
                    nb_captions_free(out);
                    return nb_errf(err, "caption line %d is empty", li + 1);
                }
                if (len > NB_CAPTION_MAX_TOKENS) {
                    nb_captions_free(out);
                    return nb_errf(err, "caption line %d has %d tokens (at most %d are read)",
                                   li + 1, len, NB_CAPTION_MAX_TOKENS);
                }
                out->start[++li] = ti;
                len = 0;
            }
        } else if (!in_tok) {
            out->tok[ti++] = out->text + i;
            in_tok = 1;
            len++;
        }
    }
    out->n = li;
    out->ntok = ti;
    return 0;
}

int nb_captions_load(const char *path, nb_captions *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t n = 0;
    if (nb_read_file(path, NB_CAPTION_MAX_BYTES, NB_READ_REGULAR, &buf, &n, err) != 0) {
        if (errno == EFBIG)
            nb_errf(err, "'%s' is too large for a caption file (more than %zu bytes)", path,
                    NB_CAPTION_MAX_BYTES);
        return -1;
    }
    int rc = 0;
    if (nb_captions_parse((const uint8_t *)buf, n, out, err) != 0) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        nb_errf(err, "'%s': %s", path, m);
        rc = -1;
    }
    free(buf);
    return rc;
}

/* ---- vocabulary -------------------------------------------------------------------------------
 */

typedef struct word {
    const char *s;
    long count;
    int first, id;
} word;

typedef struct table {
    int *slot; /* index into words, -1 empty */
    size_t cap;
    word *words;
    int n, wcap;
} table;

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int table_find(const table *t, const char *s) {
    size_t i = fnv(s) & (t->cap - 1);
    for (;; i = (i + 1) & (t->cap - 1)) {
        int w = t->slot[i];
        if (w < 0 || strcmp(t->words[w].s, s) == 0) return w;
    }
}

static int table_grow(table *t) {
    size_t cap = t->cap ? t->cap * 2 : 1024;
    int *slot = malloc(sizeof(int) * cap);
    if (!slot) return -1;
    for (size_t i = 0; i < cap; i++)
        slot[i] = -1;
    for (int w = 0; w < t->n; w++) {
        size_t i = fnv(t->words[w].s) & (cap - 1);
        while (slot[i] >= 0)
            i = (i + 1) & (cap - 1);
        slot[i] = w;
    }
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
    return 0;
}

static int table_add(table *t, const char *s, int order) {
    if ((size_t)(t->n + 1) * 2 > t->cap && table_grow(t) != 0) return -1;
    int w = table_find(t, s);
    if (w >= 0) {
        t->words[w].count++;
        return 0;
    }
    if (t->n == t->wcap) {
        int nc = t->wcap ? t->wcap * 2 : 1024;
        word *nw = realloc(t->words, sizeof(word) * (size_t)nc);
        if (!nw) return -1;
        t->words = nw;
        t->wcap = nc;
    }
    t->words[t->n] = (word){s, 1, order, 0};
    size_t i = fnv(s) & (t->cap - 1);
    while (t->slot[i] >= 0)
        i = (i + 1) & (t->cap - 1);
    t->slot[i] = t->n++;
    return 0;
}

static int by_count(const void *a, const void *b) {
    const word *x = *(const word *const *)a, *y = *(const word *const *)b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

int nb_vocab_encode(const nb_captions *const *sets, const int *ncount, int nsets,
                    const nb_captions *const *enc, int **tok_out, int nenc, nb_err *err) {
    table t = {0};
    word **order = NULL;
    int rc = -1, seq = 0;
    for (int i = 0; i < nenc; i++)
        tok_out[i] = NULL;
    if (table_grow(&t) != 0) goto oom;
    for (int s = 0; s < nsets; s++) {
        int ncap = ncount[s] < 0 || ncount[s] > sets[s]->n ? sets[s]->n : ncount[s];
        for (int k = 0; k < sets[s]->start[ncap]; k++)
            if (table_add(&t, sets[s]->tok[k], seq++) != 0) goto oom;
    }
    if (t.n > (1 << 24) - 2) {
        nb_errf(err, "vocabulary of %d words is too large", t.n);
        goto out;
    }
    order = malloc(sizeof(word *) * (size_t)(t.n ? t.n : 1));
    if (!order) goto oom;
    for (int w = 0; w < t.n; w++)
        order[w] = &t.words[w];
    qsort(order, (size_t)t.n, sizeof *order, by_count);
    for (int w = 0; w < t.n; w++)
        order[w]->id = w + 2;
    for (int i = 0; i < nenc; i++) {
        tok_out[i] = malloc(sizeof(int) * (size_t)(enc[i]->ntok ? enc[i]->ntok : 1));
        if (!tok_out[i]) goto oom;
        for (int k = 0; k < enc[i]->ntok; k++) {
            int w = table_find(&t, enc[i]->tok[k]);
            tok_out[i][k] = w >= 0 ? t.words[w].id : 1;
        }
    }
    rc = t.n + 2;
    goto out;
oom:
    nb_errf(err, "out of memory building the vocabulary");
out:
    if (rc < 0)
        for (int i = 0; i < nenc; i++) {
            free(tok_out[i]);
            tok_out[i] = NULL;
        }
    free(order);
    free(t.slot);
    free(t.words);
    return rc;
}

/* ---- splits -----------------------------------------------------------------------------------
 */

static void split_free(nb_oe_split *s) {
    free(s->img);
    free(s->start);
    free(s->tok);
    memset(s, 0, sizeof *s);
}

void nb_oe_data_free(nb_oe_data *d) {
    if (!d) return;
    split_free(&d->train);
    split_free(&d->dev);
    split_free(&d->test);
    memset(d, 0, sizeof *d);
}

/* Fills s from nimg feature rows (taken over: img is owned by s afterwards) and the first
 * 5*nimg captions of caps encoded as ids. */
static int split_fill(nb_oe_split *s, float *img, int nimg, int dim, const nb_captions *caps,
                      const int *ids, int *maxlen, nb_err *err) {
    s->img = img;
    s->nimg = nimg;
    s->dim = dim;
    s->ncap = 5 * nimg;
    int nt = caps->start[s->ncap];
    s->start = malloc(sizeof(int) * (size_t)(s->ncap + 1));
    s->tok = malloc(sizeof(int) * (size_t)(nt ? nt : 1));
    if (!s->start || !s->tok) return nb_errf(err, "out of memory for the captions");
    memcpy(s->start, caps->start, sizeof(int) * (size_t)(s->ncap + 1));
    memcpy(s->tok, ids, sizeof(int) * (size_t)nt);
    for (int i = 0; i < s->ncap; i++)
        if (s->start[i + 1] - s->start[i] > *maxlen) *maxlen = s->start[i + 1] - s->start[i];
    return 0;
}

static int coco_load(nb_oe_data *d, const char *data_dir, int subset, nb_err *err) {
    static const char *const names[3] = {"train", "val", "test"};
    nb_captions caps[3] = {{0}};
    nb_npy feat[3] = {{0}};
    int *ids[3] = {NULL, NULL, NULL};
    int rc = -1;
    char dir[900];
    snprintf(dir, sizeof dir, "%s/coco-oe", data_dir ? data_dir : ".");
    for (int i = 0; i < 3; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s.txt", dir, names[i]);
        struct stat st;
        if (stat(p, &st) != 0) {
            nb_errf(err, "cannot open '%s': %s", p, strerror(errno));
            nb_hintf(err, "run 'normbench fetch coco-oe' (or pass --data-dir)");
            goto out;
        }
        snprintf(p, sizeof p, "%s/images/10crop/%s.npy", dir, names[i]);
        if (stat(p, &st) != 0) {
            nb_errf(err, "cannot open '%s': %s", p, strerror(errno));
            nb_hintf(err, "run 'normbench fetch coco-oe' (or pass --data-dir)");
            goto out;
        }
    }
    int nimg[3];
    for (int i = 0; i < 3; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/images/10crop/%s.npy", dir, names[i]);
        uint64_t want = i == 0 ? (uint64_t)(subset > 0 ? subset : 0)
                               : (uint64_t)(i == 1 ? 1000 : 0); /* dev: fold 0 only */
        if (i > 0 && subset > 0 && (want == 0 || (uint64_t)subset < want)) want = (uint64_t)subset;
        if (nb_npy_load(p, want, &feat[i], err) != 0) goto out;
        if (feat[i].ndim != 2 || feat[i].shape[0] == 0 || feat[i].shape[1] == 0 ||
            feat[i].shape[0] > (1u << 24) || feat[i].shape[1] > (1u << 16)) {
            nb_errf(err, "'%s' is not an (images, features) array", p);
            goto out;
        }
        if (i > 0 && feat[i].shape[1] != feat[0].shape[1]) {
            nb_errf(err, "'%s' has %llu features per image, the training file %llu", p,
                    (unsigned long long)feat[i].shape[1], (unsigned long long)feat[0].shape[1]);
            goto out;
        }
        snprintf(p, sizeof p, "%s/%s.txt", dir, names[i]);
        if (nb_captions_load(p, &caps[i], err) != 0) goto out;
        if ((uint64_t)caps[i].n != 5 * feat[i].shape[0]) {
            nb_errf(err, "'%s' holds %d captions, not 5 per image of the %llu in %s.npy", p,
                    caps[i].n, (unsigned long long)feat[i].shape[0], names[i]);
            nb_hintf(err, "the files do not belong together: fetch coco-oe again");
            goto out;
        }
        nimg[i] = (int)feat[i].rows_read;
    }
    const nb_captions *sets[2] = {&caps[0], &caps[1]};
    int ncount[2] = {5 * nimg[0], 5 * nimg[1]}; /* train (or its subset) + dev fold 0 */
    const nb_captions *enc[3] = {&caps[0], &caps[1], &caps[2]};
    d->nwords = nb_vocab_encode(sets, ncount, 2, enc, ids, 3, err);
    if (d->nwords < 0) goto out;
    nb_oe_split *sp[3] = {&d->train, &d->dev, &d->test};
    for (int i = 0; i < 3; i++) {
        if (split_fill(sp[i], feat[i].data, nimg[i], (int)feat[i].shape[1], &caps[i], ids[i],
                       &d->maxlen, err) != 0)
            goto out;
        feat[i].data = NULL;
    }
    snprintf(d->source, sizeof d->source, "%s", dir);
    rc = 0;
out:
    for (int i = 0; i < 3; i++) {
        nb_captions_free(&caps[i]);
        nb_npy_free(&feat[i]);
        free(ids[i]);
    }
    return rc;
}

/* ---- synthetic --------------------------------------------------------------------------------
 */

enum { SY_DIM = 4096, SY_OBJ = 20, SY_COL = 8, SY_PLACE = 8, SY_CNT = 4 };
static const char *const sy_obj[SY_OBJ] = {
    "dog", "cat",   "horse", "bird", "car",   "bus",   "train", "boat",  "plane", "bike",
    "man", "woman", "child", "cake", "pizza", "clock", "chair", "bench", "table", "kite"};
static const char *const sy_col[SY_COL] = {"red",   "blue",  "green", "yellow",
                                           "black", "white", "brown", "orange"};
static const char *const sy_place[SY_PLACE] = {"street", "park", "kitchen", "beach",
                                               "field",  "room", "city",    "river"};
static const char *const sy_cnt[SY_CNT] = {"one", "two", "three", "four"};

/* One caption of image attributes a[4] by template k, into buf. */
static void sy_caption(char *buf, size_t size, const int *a, int k, nb_rng *r) {
    const char *o = sy_obj[a[0]], *c = sy_col[a[1]], *p = sy_place[a[2]], *n = sy_cnt[a[3]];
    static const char *const near[] = {"near", "by", "beside"};
    static const char *const in[] = {"in", "at"};
    const char *nr = near[nb_rng_below(r, 3)], *ia = in[nb_rng_below(r, 2)];
    switch (k) {
    case 0:
        snprintf(buf, size, "a %s %s in the %s", c, o, p);
        break;
    case 1:
        snprintf(buf, size, "%s %s %s the %s", n, o, nr, p);
        break;
    case 2:
        snprintf(buf, size, "the %s is %s", o, c);
        break;
    case 3:
        snprintf(buf, size, "there is a %s %s %s the %s", c, o, ia, p);
        break;
    case 4:
        snprintf(buf, size, "%s %s %s", n, c, o);
        break;
    case 5:
        snprintf(buf, size, "a %s with %s %s %s", p, n, c, o);
        break;
    case 6:
        snprintf(buf, size, "%s %s a %s", o, ia, p);
        break;
    default:
        snprintf(buf, size, "a photo of %s %s", n, o);
        break;
    }
}

static int synth_load(nb_oe_data *d, int subset, nb_err *err) {
    const int full[3] = {8000, 1000, 5000};
    int nimg[3];
    for (int i = 0; i < 3; i++)
        nimg[i] = subset > 0 && subset < full[i] ? subset : full[i];
    int rc = -1, nproto = SY_OBJ + SY_COL + SY_PLACE + SY_CNT;
    float *proto = malloc(sizeof(float) * (size_t)nproto * SY_DIM);
    float *img[3] = {NULL, NULL, NULL};
    char *text[3] = {NULL, NULL, NULL};
    nb_captions caps[3] = {{0}};
    int *ids[3] = {NULL, NULL, NULL};
    nb_rng r;
    nb_rng_seed(&r, 0x0e0e2016u, NB_STREAM_SYNTH);
    if (!proto) goto oom;
    for (size_t i = 0; i < (size_t)nproto * SY_DIM; i++)
        proto[i] = (float)nb_rng_normal(&r);
    static const double wt[4] = {1.0, 0.7, 0.7, 0.5};
    const int base[4] = {0, SY_OBJ, SY_OBJ + SY_COL, SY_OBJ + SY_COL + SY_PLACE};
    const int card[4] = {SY_OBJ, SY_COL, SY_PLACE, SY_CNT};
    for (int s = 0; s < 3; s++) {
        /* each split from its own stream position: the dev and test images do not depend on
         * the size of the training split */
        nb_rng rs;
        nb_rng_seed(&rs, 0x0e0e2016u + 1 + (uint64_t)s, NB_STREAM_SYNTH);
        img[s] = malloc(sizeof(float) * (size_t)nimg[s] * SY_DIM);
        size_t tcap = (size_t)nimg[s] * 5 * 64 + 1;
        text[s] = malloc(tcap);
        if (!img[s] || !text[s]) goto oom;
        size_t tl = 0;
        for (int i = 0; i < nimg[s]; i++) {
            int a[4];
            for (int k = 0; k < 4; k++)
                a[k] = (int)nb_rng_below(&rs, (uint64_t)card[k]);
            float *x = img[s] + (size_t)i * SY_DIM;
            double ss = 0;
            for (int j = 0; j < SY_DIM; j++) {
                double v = 0.8 * nb_rng_normal(&rs);
                for (int k = 0; k < 4; k++)
                    v += wt[k] * proto[(size_t)(base[k] + a[k]) * SY_DIM + j];
                v = v > 0 ? v : 0;
                x[j] = (float)v;
                ss += v * v;
            }
            float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0;
            for (int j = 0; j < SY_DIM; j++)
                x[j] *= inv;
            for (int c = 0; c < 5; c++) {
                char line[64];
                sy_caption(line, sizeof line, a, (int)nb_rng_below(&rs, 8), &rs);
                size_t l = strlen(line);
                memcpy(text[s] + tl, line, l);
                tl += l;
                text[s][tl++] = '\n';
            }
        }
        if (nb_captions_parse((const uint8_t *)text[s], tl, &caps[s], err) != 0) goto out;
    }
    const nb_captions *sets[2] = {&caps[0], &caps[1]};
    int ncount[2] = {-1, -1};
    const nb_captions *enc[3] = {&caps[0], &caps[1], &caps[2]};
    d->nwords = nb_vocab_encode(sets, ncount, 2, enc, ids, 3, err);
    if (d->nwords < 0) goto out;
    nb_oe_split *sp[3] = {&d->train, &d->dev, &d->test};
    for (int s = 0; s < 3; s++) {
        if (split_fill(sp[s], img[s], nimg[s], SY_DIM, &caps[s], ids[s], &d->maxlen, err) != 0)
            goto out;
        img[s] = NULL;
    }
    snprintf(d->source, sizeof d->source, "synthetic (generated, fixed seed)");
    rc = 0;
    goto out;
oom:
    nb_errf(err, "out of memory generating the synthetic dataset");
out:
    free(proto);
    for (int s = 0; s < 3; s++) {
        free(img[s]);
        free(text[s]);
        free(ids[s]);
        nb_captions_free(&caps[s]);
    }
    return rc;
}

int nb_oe_data_load(nb_oe_data *out, const char *dataset, const char *data_dir, int subset,
                    nb_err *err) {
    memset(out, 0, sizeof *out);
    int rc;
    if (strcmp(dataset, "synthetic") == 0)
        rc = synth_load(out, subset, err);
    else if (strcmp(dataset, "coco-oe") == 0)
        rc = coco_load(out, data_dir, subset, err);
    else {
        nb_errf(err, "unknown dataset '%s' for the order task", dataset);
        nb_hintf(err, "use coco-oe or synthetic");
        return -1;
    }
    if (rc != 0) nb_oe_data_free(out);
    return rc;
}
