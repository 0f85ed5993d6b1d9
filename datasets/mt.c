/* datasets/mt.c — see mt.h. */
#include "datasets/mt.h"

#include "datasets/dataset.h"
#include "datasets/gz.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bumped whenever pre-tokenization or BPE changes what the cache holds. */
#define MT_CACHE_VERSION "nbmt-pretok1-bpe0.2"

/* ---- lines ----------------------------------------------------------------------------------- */

void nb_lines_free(nb_lines *l) {
    free(l->line);
    free(l->len);
    free(l->buf);
    memset(l, 0, sizeof *l);
}

/* Takes ownership of text (n bytes, room for one more). */
static int lines_own(char *text, size_t n, const char *name, nb_lines *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (text[i] == '\n') count++;
    if (n > 0 && text[n - 1] != '\n') count++;
    if (count > (size_t)1 << 30) {
        free(text);
        return nb_errf(err, "'%s' has too many lines", name);
    }
    out->line = malloc((count ? count : 1) * sizeof *out->line);
    out->len = malloc((count ? count : 1) * sizeof *out->len);
    if (!out->line || !out->len) {
        free(text);
        nb_lines_free(out);
        return nb_errf(err, "out of memory reading '%s'", name);
    }
    out->buf = text;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && text[i] == '\0') {
            long ln = out->n + 1;
            nb_lines_free(out);
            nb_errf(err, "'%s' line %ld holds a NUL byte: not text", name, ln);
            return nb_hintf(err, "check that the file is the dataset's plain or gzipped text");
        }
        if (i == n && start == n) break;
        if (i == n || text[i] == '\n') {
            text[i] = '\0';
            out->line[out->n] = text + start;
            out->len[out->n++] = i - start;
            start = i + 1;
        }
    }
    return 0;
}

int nb_lines_parse(const char *text, size_t n, const char *name, nb_lines *out, nb_err *err) {
    char *copy = malloc(n + 1);
    if (!copy) return nb_errf(err, "out of memory reading '%s'", name);
    memcpy(copy, text, n);
    copy[n] = '\0';
    return lines_own(copy, n, name, out, err);
}

int nb_lines_read(const char *path, uint64_t max_bytes, nb_lines *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return nb_errf(err, "cannot open '%s': %s", path, strerror(e));
    }
    unsigned char sig[2] = {0, 0};
    size_t k = fread(sig, 1, 2, f);
    int gz = k == 2 && sig[0] == 0x1f && sig[1] == 0x8b;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return nb_errf(err, "out of memory reading '%s'", path);
    }
    /* gzip: every member's CRC-32 and length checked at its end (datasets/gz.h) */
    nb_gz *a = NULL;
    if (gz) {
        fclose(f);
        f = NULL;
        if (nb_gz_open(&a, path, NULL, err)) {
            free(buf);
            return nb_hintf(err, "the file is damaged: remove the dataset and fetch it again");
        }
    } else if (fseek(f, 0, SEEK_SET) != 0) {
        int e = errno;
        fclose(f);
        free(buf);
        return nb_errf(err, "cannot read '%s': %s", path, strerror(e));
    }
    for (;;) {
        if (n == cap) {
            if ((uint64_t)cap >= max_bytes) {
                nb_gz_close(a);
                if (f) fclose(f);
                free(buf);
                return nb_errf(err, "'%s' is larger than %llu bytes of text", path,
                               (unsigned long long)max_bytes);
            }
            size_t nc = cap * 2;
            if ((uint64_t)nc > max_bytes) nc = (size_t)max_bytes;
            char *b = realloc(buf, nc + 1);
            if (!b) {
                nb_gz_close(a);
                if (f) fclose(f);
                free(buf);
                return nb_errf(err, "out of memory reading '%s'", path);
            }
            buf = b;
            cap = nc;
        }
        if (a) {
            long long r = nb_gz_read(a, buf + n, cap - n, err);
            if (r < 0) {
                nb_gz_close(a);
                free(buf);
                return nb_hintf(err, "the file is damaged: remove the dataset and fetch it again");
            }
            if (r == 0) break;
            n += (size_t)r;
        } else {
            size_t r = fread(buf + n, 1, cap - n, f);
            n += r;
            if (r == 0) {
                if (ferror(f)) {
                    fclose(f);
                    free(buf);
                    return nb_errf(err, "cannot read '%s'", path);
                }
                break;
            }
        }
    }
    nb_gz_close(a);
    if (f) fclose(f);
    return lines_own(buf, n, path, out, err);
}

/* ---- encoding -------------------------------------------------------------------------------- */

void nb_mt_split_free(nb_mt_split *s) {
    if (s->src_text)
        for (int i = 0; i < s->n; i++) {
            free(s->src_text[i]);
            free(s->tgt_text[i]);
        }
    free(s->src_text);
    free(s->tgt_text);
    free(s->src_start);
    free(s->src);
    free(s->tgt_start);
    free(s->tgt);
    memset(s, 0, sizeof *s);
}

int nb_mt_encode(const nb_lines *src, const nb_lines *tgt, const char *src_name,
                 const char *tgt_name, nb_bpe *bpe, const nb_vocab *sv, const nb_vocab *tv,
                 int max_len, int drop, nb_mt_split *out, nb_err *err) {
    memset(out, 0, sizeof *out);
    if (src->n != tgt->n) {
        nb_errf(err, "'%s' has %d lines but '%s' has %d: not parallel text", src_name, src->n,
                tgt_name, tgt->n);
        return nb_hintf(err, "remove the dataset directory and fetch it again");
    }
    int n = src->n, scap = 0, tcap = 0, ns = 0, nt = 0;
    out->src_start = malloc((size_t)(n + 1) * sizeof(int));
    out->tgt_start = malloc((size_t)(n + 1) * sizeof(int));
    out->src_text = calloc((size_t)(n ? n : 1), sizeof(char *));
    out->tgt_text = calloc((size_t)(n ? n : 1), sizeof(char *));
    if (!out->src_start || !out->tgt_start || !out->src_text || !out->tgt_text) goto oom;
    out->src_start[0] = out->tgt_start[0] = 0;
    for (int i = 0; i < n; i++) {
        out->read++;
        int s0 = ns, t0 = nt;
        if (nb_vocab_encode_line(sv, bpe, src->line[i], src->len[i], &out->src, &ns, &scap,
                                 &out->unk, &out->reserved, err) ||
            nb_vocab_encode_line(tv, bpe, tgt->line[i], tgt->len[i], &out->tgt, &nt, &tcap,
                                 &out->unk, &out->reserved, err))
            goto fail;
        int sl = ns - s0, tl = nt - t0;
        if (drop && (sl == 0 || tl == 0)) {
            out->empty++;
            ns = s0;
            nt = t0;
            continue;
        }
        if (drop && max_len > 0 && (sl > max_len || tl > max_len)) {
            out->too_long++;
            ns = s0;
            nt = t0;
            continue;
        }
        if (!drop && (sl == 0 || tl == 0)) out->empty++;
        if (!drop && max_len > 0 && (sl > max_len || tl > max_len)) out->too_long++;
        if (!drop && max_len > 0 && sl > max_len) out->src_too_long++;
        if (sl > out->max_src_len) out->max_src_len = sl;
        if (tl > out->max_tgt_len) out->max_tgt_len = tl;
        out->src_text[out->n] = strdup(src->line[i]);
        out->tgt_text[out->n] = strdup(tgt->line[i]);
        if (!out->src_text[out->n] || !out->tgt_text[out->n]) {
            out->n++;
            goto oom;
        }
        out->n++;
        out->src_start[out->n] = ns;
        out->tgt_start[out->n] = nt;
    }
    if (!out->src) out->src = malloc(sizeof(int));
    if (!out->tgt) out->tgt = malloc(sizeof(int));
    if (!out->src || !out->tgt) goto oom;
    return 0;
oom:
    nb_errf(err, "out of memory encoding '%s'", src_name);
fail:
    nb_mt_split_free(out);
    return -1;
}

/* ---- loading --------------------------------------------------------------------------------- */

nb_mt_opts nb_mt_defaults(const char *dataset) {
    nb_mt_opts o = {0};
    o.bpe_merges = dataset && strcmp(dataset, "wmt14-en-de") == 0 ? 32000 : 8000;
    if (dataset && strcmp(dataset, "synthetic") == 0) o.bpe_merges = 200;
    o.bpe_min_freq = 2;
    o.max_len = 80;
    o.synth_seed = 1234;
    o.synth_train = 20000;
    o.synth_val = 500;
    o.synth_test = 500;
    return o;
}

void nb_mt_free(nb_mt_data *d) {
    nb_mt_split_free(&d->train);
    nb_mt_split_free(&d->val);
    for (int i = 0; i < NB_MT_MAX_TEST; i++)
        nb_mt_split_free(&d->test[i]);
    nb_bpe_free(d->bpe);
    nb_vocab_free(d->src_vocab);
    nb_vocab_free(d->tgt_vocab);
    memset(d, 0, sizeof *d);
}

static int mkdir_p(const char *dir, nb_err *err) {
    char p[4096];
    int k = snprintf(p, sizeof p, "%s", dir);
    if (k < 0 || (size_t)k >= sizeof p) return nb_errf(err, "path too long: '%s'", dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            nb_errf(err, "cannot create '%s': %s", p, strerror(e));
            return nb_hintf(err, "choose a writable directory with --data-dir or NORMBENCH_DATA");
        }
        *s = c;
        if (!c) break;
    }
    return 0;
}

/* Learns codes on both sides' training text and the vocabularies on the segmented text. */
static int learn(const nb_lines *src, const nb_lines *tgt, const nb_mt_opts *o, nb_mt_data *d,
                 nb_err *err) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nb_wordcount *wc = nb_wordcount_new();
    nb_toks t = {0};
    int rc = -1;
    if (!wc) return nb_errf(err, "out of memory");
    const nb_lines *side[2] = {src, tgt};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < side[s]->n; i++) {
            if (nb_pretok(side[s]->line[i], side[s]->len[i], &t, NULL, err)) goto done;
            for (int k = 0; k < t.n; k++)
                if (nb_wordcount_add(wc, t.tok[k], 1)) {
                    nb_errf(err, "out of memory");
                    goto done;
                }
        }
    d->bpe = nb_bpe_learn(wc, o->bpe_merges, o->bpe_min_freq, err);
    if (!d->bpe) goto done;
    d->src_vocab = nb_vocab_new();
    d->tgt_vocab = nb_vocab_new();
    if (!d->src_vocab || !d->tgt_vocab) {
        nb_errf(err, "out of memory");
        goto done;
    }
    nb_vocab *vv[2] = {d->src_vocab, d->tgt_vocab};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < side[s]->n; i++) {
            if (nb_bpe_encode_line(d->bpe, side[s]->line[i], side[s]->len[i], &t, NULL, err))
                goto done;
            for (int k = 0; k < t.n; k++)
                if (nb_vocab_count(vv[s], t.tok[k], err)) goto done;
        }
        if (nb_vocab_finish(vv[s], err)) goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    d->bpe_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    rc = 0;
done:
    nb_toks_free(&t);
    nb_wordcount_free(wc);
    return rc;
}

static void hash_lines(EVP_MD_CTX *c, const nb_lines *l) {
    for (int i = 0; i < l->n; i++) {
        EVP_DigestUpdate(c, l->line[i], l->len[i]);
        EVP_DigestUpdate(c, "\n", 1);
    }
    EVP_DigestUpdate(c, "\0", 1);
}

static void hex(const unsigned char *md, int n, char *out) {
    for (int i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The cache key: the training text and the options that shape codes and vocabularies. key is
 * its first 8 bytes in hex (the cache directory's name), full all 32 (written inside each cache
 * file and checked when it is read). */
static int cache_key(const nb_lines *src, const nb_lines *tgt, const nb_mt_opts *o, char key[17],
                     char full[65], nb_err *err) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (!c) return nb_errf(err, "out of memory");
    char opts[256];
    int k = snprintf(opts, sizeof opts, "%s merges=%d min_freq=%d", MT_CACHE_VERSION, o->bpe_merges,
                     o->bpe_min_freq);
    int ok = EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1;
    EVP_DigestUpdate(c, opts, (size_t)k + 1);
    hash_lines(c, src);
    hash_lines(c, tgt);
    ok = ok && EVP_DigestFinal_ex(c, md, &mdlen) == 1;
    EVP_MD_CTX_free(c);
    if (!ok || mdlen != 32) return nb_errf(err, "SHA-256 failed");
    hex(md, 8, key);
    hex(md, 32, full);
    return 0;
}

/* SHA-256 of n bytes, in hex. */
static int sha256_hex(const void *p, size_t n, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) return -1;
    hex(md, 32, out);
    return 0;
}

/* ---- the cache's files ------------------------------------------------------------------------
 * Each file is a header line, then the codes or vocabulary text:
 *     #normbench-mt-cache 1 inputs=SHA256 body=SHA256
 * inputs: the full cache key (the training text and the options), body: the text after the
 * header. A file whose header is missing, names other inputs or does not match its text is
 * stale: the three are learned again and rewritten. Files are opened without following a
 * symbolic link (a link is stale too, and replaced by a file), and the cache's directories must
 * be directories, not links out of the data directory. */

#define CACHE_MAGIC "#normbench-mt-cache 1"
#define CACHE_MAX ((size_t)1 << 28)

static const char *const cache_hint =
    "remove it: normbench rebuilds its cache from the training text";

/* DATA/.cache, DATA/.cache/mt and dir itself: each absent or a real directory. */
static int cache_dirs_check(const char *data_dir, const char *dir, nb_err *err) {
    char p[3][4200];
    snprintf(p[0], sizeof p[0], "%s/.cache", data_dir);
    snprintf(p[1], sizeof p[1], "%s/.cache/mt", data_dir);
    snprintf(p[2], sizeof p[2], "%s", dir);
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (lstat(p[i], &st) != 0) {
            if (errno == ENOENT) return 0; /* made below */
            return nb_errf(err, "cannot look at '%s': %s", p[i], strerror(errno));
        }
        if (S_ISLNK(st.st_mode)) {
            nb_errf(err,
                    "'%s' is a symbolic link: normbench keeps its translation cache in the data "
                    "directory and follows no link out of it",
                    p[i]);
            return nb_hintf(err, "%s", cache_hint);
        }
        if (!S_ISDIR(st.st_mode)) {
            nb_errf(err, "'%s' is not a directory: normbench keeps its translation cache there",
                    p[i]);
            return nb_hintf(err, "%s", cache_hint);
        }
    }
    return 0;
}

/* A path that is there but is no regular file (a directory, a device, a FIFO) is refused: it
 * is not normbench's to remove. A symbolic link is not looked through. */
static int cache_not_file(const char *path, const struct stat *st, nb_err *err) {
    nb_errf(err, "'%s' is %s, not a cache file", path,
            S_ISDIR(st->st_mode) ? "a directory" : "not a regular file");
    return nb_hintf(err, "%s", cache_hint);
}

/* Reads cache file path made from `inputs`. Returns 1 with its text in *body (malloc'ed, *n
 * bytes), 0 when it is absent or stale (*why says which), -1 with err for a path that is no
 * regular file or cannot be read. */
static int cache_read(const char *path, const char *inputs, char **body, size_t *n,
                      const char **why, nb_err *err) {
    *body = NULL;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return *why = "missing", 0;
        return nb_errf(err, "cannot look at '%s': %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) return *why = "a symbolic link", 0;
    if (!S_ISREG(st.st_mode)) return cache_not_file(path, &st, err);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP) return *why = "a symbolic link", 0;
        return nb_errf(err, "cannot open '%s': %s", path, strerror(errno));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cache_not_file(path, &st, err);
    }
    if ((size_t)st.st_size > CACHE_MAX) {
        close(fd);
        return *why = "larger than a cache file can be", 0;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return nb_errf(err, "out of memory reading '%s'", path);
    }
    for (;;) {
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(buf);
            return nb_errf(err, "cannot read '%s': %s", path, strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
        if (len == cap) { /* grew while read: stale */
            close(fd);
            free(buf);
            return *why = "changed while it was read", 0;
        }
    }
    close(fd);
    const char *nl = memchr(buf, '\n', len);
    char want[200], sum[65];
    snprintf(want, sizeof want, "%s inputs=%s body=", CACHE_MAGIC, inputs);
    size_t wl = strlen(want);
    if (!nl || (size_t)(nl - buf) != wl + 64 ||
        memcmp(buf, CACHE_MAGIC " ", sizeof CACHE_MAGIC) != 0) {
        free(buf);
        return *why = "not written by this normbench (no cache header)", 0;
    }
    if (memcmp(buf, want, wl) != 0) {
        free(buf);
        return *why = "made from other training text or options", 0;
    }
    size_t off = (size_t)(nl - buf) + 1;
    if (sha256_hex(buf + off, len - off, sum) != 0 || memcmp(buf + wl, sum, 64) != 0) {
        free(buf);
        return *why = "changed since it was made (its text does not match its hash)", 0;
    }
    memmove(buf, buf + off, len - off);
    *body = buf;
    *n = len - off;
    return 1;
}

/* Writes cache file path: the header and text, atomically (nb_write_atomicv, util/file.h). */
static int cache_write(const char *path, const char *inputs, const char *text, size_t n,
                       nb_err *err) {
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return cache_not_file(path, &st, err);
    char head[200], sum[65];
    if (sha256_hex(text, n, sum) != 0) return nb_errf(err, "SHA-256 failed");
    int hl = snprintf(head, sizeof head, "%s inputs=%s body=%s\n", CACHE_MAGIC, inputs, sum);
    const nb_piece part[2] = {{head, (size_t)hl}, {text, n}};
    if (nb_write_atomicv(path, part, 2, err)) {
        int e = errno;
        nb_errf(err, "cannot write '%s': %s", path, strerror(e));
        if (e == ENOSPC || e == EDQUOT)
            return nb_hintf(err,
                            "free some space, or choose another data directory with --data-dir");
        if (e == EISDIR || e == ENOTEMPTY || e == EEXIST) return nb_hintf(err, "%s", cache_hint);
        return nb_hintf(err, "make its directory writable, or choose another --data-dir");
    }
    return 0;
}

/* Codes and vocabularies: from the cache, or learned and cached. */
static int codes_and_vocab(const char *name, const char *data_dir, const nb_lines *src,
                           const nb_lines *tgt, const nb_mt_opts *o, nb_mt_data *d, nb_err *err) {
    char full[65];
    if (cache_key(src, tgt, o, d->key, full, err)) return -1;
    if (!data_dir) return learn(src, tgt, o, d, err);
    char path[3][4200];
    static const char *const fname[3] = {"codes", "src.vocab", "tgt.vocab"};
    int k =
        snprintf(d->cache_dir, sizeof d->cache_dir, "%s/.cache/mt/%s-%s", data_dir, name, d->key);
    if (k < 0 || (size_t)k >= sizeof d->cache_dir)
        return nb_errf(err, "data directory path too long: '%s'", data_dir);
    for (int i = 0; i < 3; i++)
        snprintf(path[i], sizeof path[i], "%s/%s", d->cache_dir, fname[i]);
    if (cache_dirs_check(data_dir, d->cache_dir, err)) return -1;
    char *body[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    int fresh = 1, present = 0, rc = -1;
    for (int i = 0; i < 3; i++) {
        const char *w = NULL;
        int r = cache_read(path[i], full, &body[i], &len[i], &w, err);
        if (r < 0) goto done;
        if (r == 0 && fresh) {
            fresh = 0;
            snprintf(d->cache_note, sizeof d->cache_note, "rebuilt: '%s' was %s", fname[i], w);
        }
        if (r == 1 || strcmp(w, "missing") != 0) present = 1;
    }
    if (fresh) {
        nb_err perr;
        d->bpe = nb_bpe_parse(body[0], len[0], path[0], &perr);
        if (d->bpe) d->src_vocab = nb_vocab_parse(body[1], len[1], path[1], &perr);
        if (d->src_vocab) d->tgt_vocab = nb_vocab_parse(body[2], len[2], path[2], &perr);
        if (d->tgt_vocab) {
            rc = 0;
            goto done;
        }
        /* a file that matches its hash but does not parse: made by a broken writer, rebuilt */
        snprintf(d->cache_note, sizeof d->cache_note, "rebuilt: %.200s", perr.msg);
        nb_bpe_free(d->bpe);
        nb_vocab_free(d->src_vocab);
        nb_vocab_free(d->tgt_vocab);
        d->bpe = NULL, d->src_vocab = d->tgt_vocab = NULL;
    }
    if (!present) d->cache_note[0] = '\0'; /* a first build, nothing to say */
    if (learn(src, tgt, o, d, err)) goto done;
    if (mkdir_p(d->cache_dir, err) || cache_dirs_check(data_dir, d->cache_dir, err)) goto done;
    /* codes last: a complete entry is three valid files, whichever order they are read in */
    for (int i = 0; i < 3; i++) {
        const int f = i == 2 ? 0 : i + 1;
        size_t n = 0;
        char *text = f == 0 ? nb_bpe_text(d->bpe, &n)
                            : nb_vocab_text(f == 1 ? d->src_vocab : d->tgt_vocab, &n);
        if (!text) {
            nb_errf(err, "out of memory");
            goto done;
        }
        int w = cache_write(path[f], full, text, n, err);
        free(text);
        if (w) goto done;
    }
    rc = 0;
done:
    for (int i = 0; i < 3; i++)
        free(body[i]);
    return rc;
}

static void hash_split(EVP_MD_CTX *c, const nb_mt_split *s) {
    int n[1] = {s->n};
    EVP_DigestUpdate(c, n, sizeof n);
    EVP_DigestUpdate(c, s->src_start, sizeof(int) * (size_t)(s->n + 1));
    EVP_DigestUpdate(c, s->tgt_start, sizeof(int) * (size_t)(s->n + 1));
    EVP_DigestUpdate(c, s->src, sizeof(int) * (size_t)s->src_start[s->n]);
    EVP_DigestUpdate(c, s->tgt, sizeof(int) * (size_t)s->tgt_start[s->n]);
    for (int i = 0; i < s->n; i++) {
        EVP_DigestUpdate(c, s->src_text[i], strlen(s->src_text[i]) + 1);
        EVP_DigestUpdate(c, s->tgt_text[i], strlen(s->tgt_text[i]) + 1);
    }
}

/* d->data_hash: what a run reads (a resumed run must read the same). */
static int data_hash(nb_mt_data *d, int max_len, nb_err *err) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c) return nb_errf(err, "out of memory");
    int ok = EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1;
    EVP_DigestUpdate(c, &max_len, sizeof max_len);
    for (int f = 0; f < 3 && ok; f++) {
        size_t n = 0;
        char *t = f == 0 ? nb_bpe_text(d->bpe, &n)
                         : nb_vocab_text(f == 1 ? d->src_vocab : d->tgt_vocab, &n);
        if (!t)
            ok = 0;
        else
            EVP_DigestUpdate(c, t, n + 0), EVP_DigestUpdate(c, "\0", 1);
        free(t);
    }
    hash_split(c, &d->train);
    hash_split(c, &d->val);
    for (int t = 0; t < d->ntest; t++)
        hash_split(c, &d->test[t]);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    ok = ok && EVP_DigestFinal_ex(c, md, &mdlen) == 1 && mdlen == 32;
    EVP_MD_CTX_free(c);
    if (!ok) return nb_errf(err, "out of memory hashing the data");
    hex(md, 32, d->data_hash);
    return 0;
}

static void lines_truncate(nb_lines *l, int n) {
    if (n > 0 && l->n > n) l->n = n;
}

typedef struct split_files {
    const char *src, *tgt, *name;
} split_files;

int nb_mt_load(const char *dataset, const char *data_dir, const nb_mt_opts *opts, nb_mt_data *out,
               nb_err *err) {
    memset(out, 0, sizeof *out);
    nb_mt_opts o = opts ? *opts : nb_mt_defaults(dataset);
    out->src_lang = "en";
    out->tgt_lang = "de";
    int synth = strcmp(dataset, "synthetic") == 0;
    const split_files *files;
    int nfiles;
    static const split_files m30k[] = {
        {"train.en.gz", "train.de.gz", "train"},
        {"val.en.gz", "val.de.gz", "val"},
        {"test_2016_flickr.en.gz", "test_2016_flickr.de.gz", "test2016"},
        {"test_2017_flickr.en.gz", "test_2017_flickr.de.gz", "test2017"},
    };
    static const split_files wmt[] = {
        {"train.en", "train.de", "train"},
        {"newstest2013.en", "newstest2013.de", "newstest2013"},
        {"newstest2014.en", "newstest2014.de", "newstest2014"},
    };
    static const split_files syn[] = {
        {"synthetic train", "synthetic train", "train"},
        {"synthetic val", "synthetic val", "val"},
        {"synthetic test", "synthetic test", "test"},
    };
    if (strcmp(dataset, "multi30k") == 0) {
        files = m30k;
        nfiles = 4;
    } else if (strcmp(dataset, "wmt14-en-de") == 0) {
        files = wmt;
        nfiles = 3;
    } else if (synth) {
        files = syn;
        nfiles = 3;
    } else {
        nb_errf(err, "unknown translation dataset '%s'", dataset);
        return nb_hintf(err, "use multi30k, wmt14-en-de or synthetic");
    }
    nb_lines src[4] = {0}, tgt[4] = {0};
    char sp[4][4200], tp[4][4200];
    int rc = -1;
    for (int i = 0; i < nfiles; i++) {
        if (synth) {
            int n = i == 0 ? o.synth_train : i == 1 ? o.synth_val : o.synth_test;
            if (o.subset > 0 && n > o.subset) n = o.subset;
            snprintf(sp[i], sizeof sp[i], "%s", files[i].src);
            snprintf(tp[i], sizeof tp[i], "%s", files[i].tgt);
            if (nb_mt_synth_text(o.synth_seed, (uint64_t)i, n, &src[i], &tgt[i], err)) goto done;
            continue;
        }
        if (nb_dataset_file(dataset, files[i].src, data_dir, sp[i], sizeof sp[i]) ||
            nb_dataset_file(dataset, files[i].tgt, data_dir, tp[i], sizeof tp[i])) {
            nb_errf(err, "data directory path too long: '%s'", data_dir);
            goto done;
        }
        if (nb_lines_read(sp[i], NB_MT_MAX_TEXT, &src[i], err) ||
            nb_lines_read(tp[i], NB_MT_MAX_TEXT, &tgt[i], err)) {
            if (!err->hint[0])
                nb_hintf(err, "run 'normbench fetch %s' (or give --data-dir)", dataset);
            goto done;
        }
        /* whole files compared before --subset keeps their first lines: a side with a line
         * more or less is misaligned from that line on, wherever --subset cuts */
        if (src[i].n != tgt[i].n) {
            nb_errf(err, "'%s' has %d lines but '%s' has %d: not parallel text", sp[i], src[i].n,
                    tp[i], tgt[i].n);
            nb_hintf(err, "remove the dataset directory and fetch it again");
            goto done;
        }
        lines_truncate(&src[i], o.subset);
        lines_truncate(&tgt[i], o.subset);
    }
    if (codes_and_vocab(dataset, synth ? NULL : data_dir, &src[0], &tgt[0], &o, out, err))
        goto done;
    for (int i = 0; i < nfiles; i++) {
        nb_mt_split *s = i == 0 ? &out->train : i == 1 ? &out->val : &out->test[i - 2];
        if (nb_mt_encode(&src[i], &tgt[i], sp[i], tp[i], out->bpe, out->src_vocab, out->tgt_vocab,
                         o.max_len, i == 0, s, err))
            goto done;
        if (i >= 2) out->test_name[out->ntest++] = files[i].name;
    }
    if (out->train.n == 0) {
        nb_errf(err, "no training pairs left in '%s' (all empty or longer than %d pieces)", sp[0],
                o.max_len);
        nb_hintf(err, "raise --max-len");
        goto done;
    }
    if (data_hash(out, o.max_len, err)) goto done;
    if (synth)
        snprintf(out->source, sizeof out->source,
                 "synthetic transduction (seed %llu, %d/%d/%d pairs), BPE %d merges",
                 (unsigned long long)o.synth_seed, out->train.n, out->val.n, out->test[0].n,
                 nb_bpe_size(out->bpe));
    else
        snprintf(out->source, sizeof out->source, "%s/%s (BPE %d merges, cache %s%s%s)", data_dir,
                 dataset, nb_bpe_size(out->bpe), out->key, out->cache_note[0] ? ", " : "",
                 out->cache_note);
    rc = 0;
done:
    for (int i = 0; i < 4; i++) {
        nb_lines_free(&src[i]);
        nb_lines_free(&tgt[i]);
    }
    if (rc) nb_mt_free(out);
    return rc;
}

/* ---- batching -------------------------------------------------------------------------------- */

static const nb_mt_split *sort_s;
static const int *sort_pos;
static int by_len(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    int ta = nb_mt_tgt_len(sort_s, a), tb = nb_mt_tgt_len(sort_s, b);
    if (ta != tb) return ta < tb ? -1 : 1;
    int sa = nb_mt_src_len(sort_s, a), sb = nb_mt_src_len(sort_s, b);
    if (sa != sb) return sa < sb ? -1 : 1;
    return sort_pos[a] < sort_pos[b] ? -1 : sort_pos[a] > sort_pos[b];
}

/* Nematus: the longer of the two sides, longest first */
static int by_len_nematus(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    int sa = nb_mt_src_len(sort_s, a), ta = nb_mt_tgt_len(sort_s, a);
    int sb = nb_mt_src_len(sort_s, b), tb = nb_mt_tgt_len(sort_s, b);
    int la = sa > ta ? sa : ta, lb = sb > tb ? sb : tb;
    if (la != lb) return la > lb ? -1 : 1;
    return sort_pos[a] < sort_pos[b] ? -1 : sort_pos[a] > sort_pos[b];
}

static int new_epoch(nb_mt_batcher *b) {
    int n = b->s->n;
    for (int i = 0; i < n; i++)
        b->order[i] = i;
    nb_rng_shuffle(b->rng, b->order, (size_t)n);
    int *pos = malloc((size_t)n * sizeof *pos);
    if (!pos) return -1;
    for (int i = 0; i < n; i++)
        pos[b->order[i]] = i;
    long chunk = b->chunk;
    sort_s = b->s;
    sort_pos = pos;
    for (long at = 0; at < n; at += chunk) {
        long m = n - at < chunk ? n - at : chunk;
        qsort(b->order + at, (size_t)m, sizeof(int),
              b->sort == NB_MT_ORDER_TARGET ? by_len : by_len_nematus);
    }
    free(pos);
    b->pos = 0;
    return 0;
}

/* Sets b up (batch sentences, or tokens > 0 for token batches; chunk sentences sorted
 * together) and draws the first epoch's order. */
static int batcher_setup(nb_mt_batcher *b, const nb_mt_split *s, int batch, int tokens,
                         int maxibatch, int order, long chunk, nb_rng *rng, nb_err *err) {
    memset(b, 0, sizeof *b);
    if (batch < 1 || maxibatch < 1) return nb_errf(err, "batch and maxibatch must be >= 1");
    if (order != NB_MT_ORDER_NEMATUS && order != NB_MT_ORDER_TARGET)
        return nb_errf(err, "no batch order %d", order);
    b->sort = order;
    b->s = s;
    b->batch = batch;
    b->tokens = tokens;
    b->maxibatch = maxibatch;
    b->chunk = chunk;
    b->rng = rng;
    b->order = malloc((size_t)(s->n ? s->n : 1) * sizeof(int));
    if (!b->order || new_epoch(b)) {
        free(b->order);
        b->order = NULL;
        return nb_errf(err, "out of memory");
    }
    return 0;
}

int nb_mt_batcher_init(nb_mt_batcher *b, const nb_mt_split *s, int batch, int maxibatch, int order,
                       nb_rng *rng, nb_err *err) {
    return batcher_setup(b, s, batch, 0, maxibatch, order, (long)batch * maxibatch, rng, err);
}

/* A pair's rows in a batch padded to its longest side: source (at least 1), target + eos. */
static int pair_rows(const nb_mt_split *s, int i, int *ls, int *lt) {
    *ls = nb_mt_src_len(s, i);
    if (*ls < 1) *ls = 1;
    *lt = nb_mt_tgt_len(s, i) + 1;
    return *ls > *lt ? *ls : *lt;
}

int nb_mt_batcher_init_tokens(nb_mt_batcher *b, const nb_mt_split *s, int tokens, int maxibatch,
                              int order, nb_rng *rng, nb_err *err) {
    memset(b, 0, sizeof *b);
    if (tokens < 1) return nb_errf(err, "a token batch must hold at least 1 token");
    /* maxibatches of as many pairs as maxibatch batches of pairs of the mean length hold */
    double sum = 0;
    for (int i = 0; i < s->n; i++) {
        int ls, lt;
        sum += pair_rows(s, i, &ls, &lt);
    }
    double mean = s->n ? sum / s->n : 1;
    long per = (long)(tokens / (mean > 1 ? mean : 1));
    if (per < 1) per = 1;
    return batcher_setup(b, s, tokens, tokens, maxibatch, order, per * maxibatch, rng, err);
}

int nb_mt_batcher_next(nb_mt_batcher *b, int *idx) {
    int n = b->s->n;
    if (n == 0) return 0;
    if (b->pos >= n) {
        if (new_epoch(b)) return 0;
        b->epoch++;
    }
    /* batches never straddle a maxibatch boundary */
    long chunk = b->chunk;
    long end_chunk = (b->pos / chunk + 1) * chunk;
    if (end_chunk > n) end_chunk = n;
    int k = 0;
    if (b->tokens > 0) {
        int ms = 0, mt = 0;
        for (long i = b->pos; i < end_chunk; i++) {
            int ls, lt;
            pair_rows(b->s, b->order[i], &ls, &lt);
            int s2 = ls > ms ? ls : ms, t2 = lt > mt ? lt : mt;
            long rows = (long)(k + 1) * (s2 > t2 ? s2 : t2);
            if (k > 0 && (rows > b->tokens || k >= b->tokens)) break;
            ms = s2, mt = t2;
            idx[k++] = b->order[i];
        }
    } else {
        long end = b->pos + b->batch;
        if (end > end_chunk) end = end_chunk;
        for (long i = b->pos; i < end; i++)
            idx[k++] = b->order[i];
    }
    b->pos += k;
    return k;
}

long nb_mt_batcher_count(const nb_mt_batcher *b) {
    nb_mt_batcher c = *b;
    c.pos = 0;
    int *idx = malloc((size_t)(b->batch > 0 ? b->batch : 1) * sizeof(int));
    if (!idx) return -1;
    long count = 0;
    while (c.pos < c.s->n && nb_mt_batcher_next(&c, idx) > 0)
        count++;
    free(idx);
    return count;
}

void nb_mt_batcher_free(nb_mt_batcher *b) {
    free(b->order);
    memset(b, 0, sizeof *b);
}
