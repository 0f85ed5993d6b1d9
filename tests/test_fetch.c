/* tests/test_fetch.c — fetch, verify, unpack and install (datasets/download.c, unpack.c,
 * dataset.c), all offline: archives in the real layouts are generated here (libarchive's
 * writer), served over file:// and by tests/fetch_server.py on 127.0.0.1 (a server that drops
 * connections, ignores ranges, answers 404 or 500, stalls). Each test checks the data
 * directory afterwards: the dataset directory is either absent or complete, nothing temporary
 * is left behind, nothing is written outside it. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "tests/testutil.h"
#include "datasets/dataset.h"
#include "datasets/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];
static pid_t server_pid = -1;
static int server_port = 0;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A path under the test's temporary directory (static buffers, 64 in rotation). */
static const char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *tpath(const char *fmt, ...) {
    static char buf[64][1024];
    static int at = 0;
    char rel[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *b = buf[at++ % 64];
    snprintf(b, 1024, "%s/%s", tmpdir, rel);
    return b;
}

/* ---- the test server ------------------------------------------------------------------------ */

static int start_server(void) {
    int fds[2];
    if (pipe(fds)) return -1;
    server_pid = fork();
    if (server_pid < 0) return -1;
    if (server_pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp("python3", "python3", "tests/fetch_server.py", "--root", tmpdir, "--timeout", "120",
               "--stall", "10", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[32] = "";
    ssize_t k = 0, got = 0;
    while (got < (ssize_t)sizeof line - 1 && (k = read(fds[0], line + got, 1)) == 1) {
        if (line[got] == '\n') break;
        got++;
    }
    close(fds[0]);
    line[got] = '\0';
    server_port = (int)strtol(line, NULL, 10);
    return server_port > 0 ? 0 : -1;
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/nb-test-fetch-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return -1;
    nb_err err;
    if (nb_download_global_init(&err)) return -1;
    return start_server();
}

static int teardown(void **state) {
    (void)state;
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Requests the server has seen for path ("/ok/x.tar.gz"), via a download of /count. */
static int server_count(const char *path) {
    char url[256], out[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/count", server_port);
    snprintf(out, sizeof out, "%s/count.json", tmpdir);
    remove(out);
    nb_err err;
    int intr;
    if (nb_download(url, out, NULL, &intr, &err)) return -1;
    FILE *f = fopen(out, "rb");
    char buf[8192] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    char key[300];
    snprintf(key, sizeof key, "\"%s\": ", path);
    char *p = strstr(buf, key);
    return p ? (int)strtol(p + strlen(key), NULL, 10) : 0;
}

/* ---- generated files and archives ----------------------------------------------------------- */

typedef struct gen_entry {
    const char *name;
    const void *data;
    size_t size;
    int type;         /* AE_IFREG (0 means regular), AE_IFLNK, AE_IFCHR, AE_IFDIR */
    const char *link; /* symlink target, or hard link target when hard */
    int hard;
    int64_t claim_size; /* > 0: size written in the header (an archive that lies) */
} gen_entry;

/* Writes an archive: fmt "tar.gz", "zip" or "gz" (a lone gzip file of the first entry). */
static void write_archive(const char *path, const char *fmt, const gen_entry *e, int n, int level) {
    struct archive *a = archive_write_new();
    assert_non_null(a);
    if (strcmp(fmt, "zip") == 0) {
        assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
    } else {
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        char opt[32];
        snprintf(opt, sizeof opt, "compression-level=%d", level);
        archive_write_set_filter_option(a, "gzip", "compression-level", opt + 18);
        if (strcmp(fmt, "gz") == 0)
            assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
        else
            assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    }
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        struct archive_entry *en = archive_entry_new();
        archive_entry_set_pathname(en, e[i].name);
        int type = e[i].type ? e[i].type : (int)AE_IFREG;
        archive_entry_set_filetype(en, (unsigned)type);
        archive_entry_set_perm(en, 0644);
        if (e[i].hard) {
            archive_entry_set_hardlink(en, e[i].link);
        } else if (type == AE_IFLNK) {
            archive_entry_set_symlink(en, e[i].link);
        } else if (type == AE_IFCHR) {
            archive_entry_set_rdev(en, makedev(1, 3));
        }
        if (type == AE_IFREG && !e[i].hard)
            archive_entry_set_size(en, e[i].claim_size > 0 ? e[i].claim_size : (int64_t)e[i].size);
        assert_int_equal(archive_write_header(a, en), ARCHIVE_OK);
        if (type == AE_IFREG && e[i].size)
            assert_int_equal(archive_write_data(a, e[i].data, e[i].size), (la_ssize_t)e[i].size);
        archive_entry_free(en);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Whole file into a malloc'd buffer. */
static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static void assert_file_is(const char *path, const void *data, size_t n) {
    size_t got = 0;
    unsigned char *b = read_all(path, &got);
    if (!b) fail_msg("'%s' is missing", path);
    if (got != n || memcmp(b, data, n) != 0) {
        free(b);
        fail_msg("'%s' differs from what the archive held (%zu bytes, expected %zu)", path, got, n);
    }
    free(b);
}

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* No ".NAME.tmp-*" directory is left in data_dir, and DATA/NAME is absent. */
static void assert_absent_clean(const char *data_dir, const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", data_dir, name);
    if (exists(dir)) fail_msg("'%s' exists after a failed install", dir);
    DIR *d = opendir(data_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp-")) fail_msg("temporary '%s' left behind", e->d_name);
    closedir(d);
}

/* The CIFAR-10 binary layout in miniature: 3 records of 3073 bytes per batch. */
#define REC 3073
#define NREC 3
static unsigned char cifar_bins[6][REC * NREC];
static const char *const cifar_names[] = {"data_batch_1.bin", "data_batch_2.bin",
                                          "data_batch_3.bin", "data_batch_4.bin",
                                          "data_batch_5.bin", "test_batch.bin"};
static const char cifar_meta[] = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\n"
                                 "truck\n\n";

static void gen_cifar(const char *path, int level) {
    gen_entry e[9];
    char names[8][64];
    int n = 0;
    e[n++] = (gen_entry){.name = "cifar-10-batches-bin/", .type = AE_IFDIR};
    for (int b = 0; b < 6; b++) {
        uint32_t x = 2463534242u + (uint32_t)b; /* xorshift: pixels that do not compress */
        for (int r = 0; r < NREC; r++) {
            unsigned char *rec = cifar_bins[b] + r * REC;
            rec[0] = (unsigned char)((b * NREC + r) % 10);
            for (int i = 1; i < REC; i++) {
                x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                rec[i] = (unsigned char)(x >> 24);
            }
        }
        snprintf(names[b], sizeof names[b], "cifar-10-batches-bin/%s", cifar_names[b]);
        e[n++] = (gen_entry){.name = names[b], .data = cifar_bins[b], .size = REC * NREC};
    }
    e[n++] = (gen_entry){.name = "cifar-10-batches-bin/batches.meta.txt",
                         .data = cifar_meta,
                         .size = sizeof cifar_meta - 1};
    e[n++] = (gen_entry){.name = "cifar-10-batches-bin/readme.html", .data = "<html>", .size = 6};
    write_archive(path, "tar.gz", e, n, level);
}

/* A copy of the registry's cifar10 entry whose source is url, pinned to file's MD5 and size. */
static nb_source t_src[4];
static nb_dataset t_ds;

static void pin_cifar(const char *url, const char *file) {
    t_ds = *nb_registry_find("cifar10");
    t_src[0] = t_ds.sources[0];
    t_src[0].url = url;
    static char md5[33];
    int64_t size;
    nb_err err;
    assert_int_equal(nb_hash_file(file, md5, NULL, &size, &err), 0);
    t_src[0].md5 = md5;
    t_src[0].size = size;
    t_ds.sources = t_src;
}

static nb_fetch_opts fast_opts(void) {
    nb_fetch_opts o;
    memset(&o, 0, sizeof o);
    o.dl.backoff_ms = 10;
    o.dl.retries = 3;
    o.dl.stall_s = 1;
    return o;
}

static void assert_cifar_installed(const char *data_dir) {
    for (int b = 0; b < 6; b++)
        assert_file_is(tpath("%s/cifar10/%s", strrchr(data_dir, '/') + 1, cifar_names[b]),
                       cifar_bins[b], REC * NREC);
    char p[1024];
    snprintf(p, sizeof p, "%s/cifar10/batches.meta.txt", data_dir);
    assert_file_is(p, cifar_meta, sizeof cifar_meta - 1);
    snprintf(p, sizeof p, "%s/cifar10/readme.html", data_dir);
    assert_false(exists(p)); /* allowed in the archive, not installed */
    snprintf(p, sizeof p, "%s/cifar10/%s", data_dir, NB_MANIFEST);
    assert_true(exists(p));
    assert_int_equal(nb_dataset_state(&t_ds, data_dir, 1, NULL), NB_DS_PRESENT);
    snprintf(p, sizeof p, "%s/.downloads/cifar-10-binary.tar.gz.part", data_dir);
    assert_false(exists(p)); /* the download is removed once installed */
}

/* ---- happy paths ----------------------------------------------------------------------------- */

static void test_cifar_file_url(void **state) {
    (void)state;
    const char *arc = tpath("cifar-a.tar.gz");
    gen_cifar(arc, 6);
    char url[1100];
    snprintf(url, sizeof url, "file://%s", arc);
    pin_cifar(url, arc);
    const char *data = tpath("d-cifar-file");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    nb_err_clear(&err);
    int rc = nb_dataset_install(&t_ds, data, &o, &err);
    if (rc) fail_msg("install failed: %s / %s", err.msg, err.hint);
    assert_cifar_installed(data);
    /* present: a second install is a no-op, and a full verify passes */
    o.verify = 1;
    assert_int_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    /* a damaged file is found by the full verify */
    char p[1024];
    snprintf(p, sizeof p, "%s/cifar10/test_batch.bin", data);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    fputc('X', f);
    fclose(f);
    assert_int_equal(nb_dataset_state(&t_ds, data, 0, NULL), NB_DS_PRESENT);
    assert_int_equal(nb_dataset_state(&t_ds, data, 1, &err), NB_DS_DAMAGED);
    assert_non_null(strstr(err.msg, "test_batch.bin"));
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(strstr(err.msg, "damaged"));
}

/* Tiny IDX files, gzip-compressed, one download each (the mnist layout). */
static unsigned char idx_raw[4][16 + 2 * 784];
static size_t idx_len[4];

static void gen_idx(int level, const char *dir) {
    static const char *const names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        unsigned char *b = idx_raw[i];
        size_t n = 0;
        int images = i % 2 == 0;
        b[n++] = 0, b[n++] = 0, b[n++] = 8, b[n++] = images ? 3 : 1;
        b[n++] = 0, b[n++] = 0, b[n++] = 0, b[n++] = 2;
        if (images) {
            b[n++] = 0, b[n++] = 0, b[n++] = 0, b[n++] = 28;
            b[n++] = 0, b[n++] = 0, b[n++] = 0, b[n++] = 28;
            for (int k = 0; k < 2 * 784; k++)
                b[n++] = (unsigned char)(k * 3 + i);
        } else {
            b[n++] = (unsigned char)(3 + i), b[n++] = 7;
        }
        idx_len[i] = n;
        gen_entry e = {.name = "data", .data = b, .size = n};
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        write_archive(p, "gz", &e, 1, level);
    }
}

static void test_idx_gz_http_and_recompressed(void **state) {
    (void)state;
    const char *srv = tpath("idx");
    mkdir(srv, 0755);
    gen_idx(9, srv);
    const nb_dataset *reg = nb_registry_find("mnist");
    t_ds = *reg;
    static char urls[4][256], md5s[4][33];
    for (int i = 0; i < 4; i++) {
        t_src[i] = reg->sources[i];
        snprintf(urls[i], sizeof urls[i], "http://127.0.0.1:%d/ok/idx/%s", server_port,
                 t_src[i].file);
        t_src[i].url = urls[i];
        nb_err err;
        assert_int_equal(nb_hash_file(tpath("idx/%s", t_src[i].file), md5s[i], NULL, NULL, &err),
                         0);
        t_src[i].md5 = md5s[i];
        t_src[i].size = 0;
    }
    t_ds.sources = t_src;
    const char *data = tpath("d-idx");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    nb_err_clear(&err);
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    for (int i = 0; i < 4; i++) {
        size_t n = 0;
        unsigned char *want = read_all(tpath("idx/%s", t_src[i].file), &n);
        assert_file_is(tpath("d-idx/mnist/%s", t_src[i].file), want, n);
        free(want);
    }
    /* The same content recompressed (as Debian and mirrors do): other .gz bytes. With only the
     * MD5 pinned it is refused; with the content SHA-256 pinned (fashion-mnist) it installs. */
    const char *srv2 = tpath("idx2");
    mkdir(srv2, 0755);
    gen_idx(1, srv2);
    static char urls2[4][256], csha[4][65];
    for (int i = 0; i < 4; i++) {
        snprintf(urls2[i], sizeof urls2[i], "http://127.0.0.1:%d/ok/idx2/%s", server_port,
                 t_src[i].file);
        t_src[i].url = urls2[i];
        assert_int_equal(
            nb_hash_gz_content(tpath("idx/%s", t_src[i].file), 1 << 20, NULL, csha[i], &err), 0);
    }
    const char *data2 = tpath("d-idx2");
    assert_int_not_equal(nb_dataset_install(&t_ds, data2, &o, &err), 0);
    assert_non_null(strstr(err.msg, "checksum mismatch"));
    assert_non_null(strstr(err.msg, md5s[0]));
    assert_absent_clean(data2, "mnist");
    for (int i = 0; i < 4; i++) {
        t_src[i].content_sha256 = csha[i];
    }
    if (nb_dataset_install(&t_ds, data2, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    /* content pinned alone (the fashion-mnist entry): other content is refused, naming it */
    unsigned char junk[64] = {0};
    gen_entry e = {.name = "data", .data = junk, .size = sizeof junk};
    write_archive(tpath("idx2/%s", t_src[1].file), "gz", &e, 1, 6);
    for (int i = 0; i < 4; i++)
        t_src[i].md5 = NULL;
    const char *data3 = tpath("d-idx3");
    assert_int_not_equal(nb_dataset_install(&t_ds, data3, &o, &err), 0);
    assert_non_null(strstr(err.msg, "content SHA-256"));
    assert_non_null(strstr(err.msg, t_src[1].file));
    assert_absent_clean(data3, "mnist");
}

static void gen_npy(unsigned char *b, size_t *n, int rows) {
    const char hdr[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 4), }";
    char h[128];
    int hl = snprintf(h, sizeof h, hdr, rows);
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    size_t k = 0;
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    k = 8;
    b[k++] = (unsigned char)((hl + pad + 1) & 0xff);
    b[k++] = (unsigned char)((hl + pad + 1) >> 8);
    memcpy(b + k, h, (size_t)hl);
    k += (size_t)hl;
    memset(b + k, ' ', (size_t)pad);
    k += (size_t)pad;
    b[k++] = '\n';
    for (int i = 0; i < rows * 4; i++) {
        float v = 0.25f * (float)i;
        memcpy(b + k, &v, 4);
        k += 4;
    }
    *n = k;
}

/* coco.zip: captions and 10-crop features at the order-embedding repository's paths below a
 * top directory, plus a member not installed (1crop); no checksum published: trust on first
 * use, then a changed archive is refused. */
static void test_coco_zip_tofu(void **state) {
    (void)state;
    unsigned char npy[3][512];
    size_t nn[3];
    for (int i = 0; i < 3; i++)
        gen_npy(npy[i], &nn[i], i + 1);
    const char *txt[3] = {"a b c\nd e\nf\ng h\ni\n", "x y\nx\ny\nz\nw\n", "q\nr\ns\nt\nu\n"};
    gen_entry e[] = {
        {.name = "coco/train.txt", .data = txt[0], .size = strlen(txt[0])},
        {.name = "coco/val.txt", .data = txt[1], .size = strlen(txt[1])},
        {.name = "coco/test.txt", .data = txt[2], .size = strlen(txt[2])},
        {.name = "coco/images/10crop/train.npy", .data = npy[0], .size = nn[0]},
        {.name = "coco/images/10crop/val.npy", .data = npy[1], .size = nn[1]},
        {.name = "coco/images/10crop/test.npy", .data = npy[2], .size = nn[2]},
        {.name = "coco/images/1crop/train.npy", .data = npy[0], .size = nn[0]},
    };
    const char *arc = tpath("coco.zip");
    write_archive(arc, "zip", e, 7, 6);
    t_ds = *nb_registry_find("coco-oe");
    t_src[0] = t_ds.sources[0];
    static char url[1100];
    snprintf(url, sizeof url, "file://%s", arc);
    t_src[0].url = url;
    t_ds.sources = t_src;
    const char *data = tpath("d-coco");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    char sha[65];
    assert_int_equal(nb_trust_get(data, "coco.zip", sha), 0);
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    const char *inst[] = {"train.txt",
                          "val.txt",
                          "test.txt",
                          "images/10crop/train.npy",
                          "images/10crop/val.npy",
                          "images/10crop/test.npy"};
    for (int i = 0; i < 6; i++)
        assert_file_is(tpath("d-coco/coco-oe/%s", inst[i]), e[i].data, e[i].size);
    assert_false(exists(tpath("d-coco/coco-oe/images/1crop")));
    assert_int_equal(nb_trust_get(data, "coco.zip", sha), 1);
    char want[65];
    assert_int_equal(nb_hash_file(arc, NULL, want, NULL, &err), 0);
    assert_string_equal(sha, want);
    /* upstream "changes" the file: refused against the recorded digest */
    write_archive(arc, "zip", e, 6, 6);
    const char *data2 = tpath("d-coco2");
    mkdir(data2, 0755);
    mkdir(tpath("d-coco2/.trust"), 0755);
    char rec[200];
    snprintf(rec, sizeof rec, "%s  coco.zip\n", sha);
    write_file(tpath("d-coco2/.trust/coco.zip.sha256"), rec, strlen(rec));
    assert_int_not_equal(nb_dataset_install(&t_ds, data2, &o, &err), 0);
    assert_non_null(strstr(err.msg, "recorded"));
    assert_non_null(strstr(err.msg, sha));
    assert_absent_clean(data2, "coco-oe");
}

/* top4.zip: the pickles at the top level of the zip, via --from. */
static void test_top4_zip_from(void **state) {
    (void)state;
    const nb_dataset *reg = nb_registry_find("cnn-top4");
    gen_entry e[7];
    char bodies[7][64];
    for (int i = 0; i < 7; i++) {
        snprintf(bodies[i], sizeof bodies[i], "\x80\x02]q\x01(K\x01K%cK\x01e.", 'a' + i);
        e[i] =
            (gen_entry){.name = reg->members[i].name, .data = bodies[i], .size = strlen(bodies[i])};
    }
    const char *arc = tpath("top4.zip");
    write_archive(arc, "zip", e, 7, 6);
    const char *data = tpath("d-top4");
    nb_fetch_opts o = fast_opts();
    o.from = arc;
    nb_err err;
    if (nb_dataset_install(reg, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    for (int i = 0; i < 7; i++)
        assert_file_is(tpath("d-top4/cnn-top4/%s", reg->members[i].name), e[i].data, e[i].size);
    assert_true(exists(arc)); /* an imported file is the user's: kept */
    /* a missing member: refused */
    write_archive(arc, "zip", e, 6, 6);
    const char *data2 = tpath("d-top4b");
    assert_int_not_equal(nb_dataset_install(reg, data2, &o, &err), 0);
    assert_non_null(strstr(err.msg, "lacks the member 'valid4_ans.pkl'"));
    assert_absent_clean(data2, "cnn-top4");
}

/* ---- the network's failures ----------------------------------------------------------------- */

/* Serves a fresh CIFAR archive at /MODE/NAME and pins t_ds to it. */
static void serve_cifar(const char *mode, const char *name) {
    const char *arc = tpath("%s", name);
    gen_cifar(arc, 6);
    static char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s/%s", server_port, mode, name);
    pin_cifar(url, arc);
}

static void test_resume_after_drop(void **state) {
    (void)state;
    serve_cifar("drop", "c-drop.tar.gz");
    const char *data = tpath("d-drop");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    assert_cifar_installed(data);
    assert_int_equal(server_count("/drop/c-drop.tar.gz"), 2); /* dropped once, resumed once */
}

static void test_server_ignores_range(void **state) {
    (void)state;
    serve_cifar("norange", "c-norange.tar.gz");
    const char *data = tpath("d-norange");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    assert_cifar_installed(data);
    /* dropped, resume answered with the whole file (refused), then started over */
    assert_int_equal(server_count("/norange/c-norange.tar.gz"), 3);
}

static void test_404_not_retried(void **state) {
    (void)state;
    serve_cifar("e404", "c-404.tar.gz");
    const char *data = tpath("d-404");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(strstr(err.msg, "404"));
    assert_non_null(strstr(err.msg, t_ds.sources[0].url));
    assert_non_null(strstr(err.hint, "--from"));
    assert_int_equal(server_count("/e404/c-404.tar.gz"), 1);
    assert_false(exists(tpath("d-404/.downloads/cifar-10-binary.tar.gz.part")));
    assert_absent_clean(data, "cifar10");
}

static void test_500_then_success(void **state) {
    (void)state;
    serve_cifar("e500", "c-500.tar.gz");
    const char *data = tpath("d-500");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    assert_cifar_installed(data);
    assert_int_equal(server_count("/e500/c-500.tar.gz"), 3);
}

static void test_stall(void **state) {
    (void)state;
    serve_cifar("stall", "c-stall.tar.gz");
    const char *data = tpath("d-stall");
    nb_fetch_opts o = fast_opts();
    o.dl.retries = 1;
    nb_err err;
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(strstr(err.msg, "stalled"));
    assert_absent_clean(data, "cifar10");
    /* what arrived is kept for the next try */
    struct stat st;
    assert_int_equal(stat(tpath("d-stall/.downloads/cifar-10-binary.tar.gz.part"), &st), 0);
    assert_true(st.st_size > 0);
}

static void test_checksum_mismatch(void **state) {
    (void)state;
    serve_cifar("ok", "c-bad.tar.gz");
    t_src[0].md5 = "00000000000000000000000000000000";
    const char *data = tpath("d-bad");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(strstr(err.msg, "checksum mismatch for 'cifar-10-binary.tar.gz'"));
    assert_non_null(strstr(err.msg, "00000000000000000000000000000000"));
    char actual[33];
    assert_int_equal(nb_hash_file(tpath("c-bad.tar.gz"), actual, NULL, NULL, &err), 0);
    assert_non_null(strstr(err.msg, actual));
    assert_false(exists(tpath("d-bad/.downloads/cifar-10-binary.tar.gz.part")));
    assert_absent_clean(data, "cifar10");
}

static void test_truncated_gzip(void **state) {
    (void)state;
    const char *arc = tpath("c-trunc.tar.gz");
    gen_cifar(arc, 6);
    size_t n = 0;
    unsigned char *b = read_all(arc, &n);
    write_file(arc, b, n / 2);
    free(b);
    char url[1100];
    snprintf(url, sizeof url, "file://%s", arc);
    pin_cifar(url, arc);
    const char *data = tpath("d-trunc");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(strstr(err.msg, "c-trunc") ? err.msg : strstr(err.msg, "cifar"));
    assert_absent_clean(data, "cifar10");
}

/* A .tar.gz whose gzip trailer (CRC-32) is damaged but whose MD5 is pinned as it is (as for a
 * source nothing is pinned for): libarchive inflates it without complaint; the unpack's own
 * check refuses it. A stop request ends an unpack at once. */
static void test_damaged_gzip_trailer(void **state) {
    (void)state;
    const char *arc = tpath("c-crc.tar.gz");
    gen_cifar(arc, 6);
    size_t n = 0;
    unsigned char *b = read_all(arc, &n);
    b[n - 6] ^= 0x40;
    write_file(arc, b, n);
    free(b);
    char url[1100];
    snprintf(url, sizeof url, "file://%s", arc);
    pin_cifar(url, arc);
    const char *data = tpath("d-crc");
    nb_fetch_opts o = fast_opts();
    nb_err err;
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(
        strstr(err.msg, "cifar-10-binary.tar.gz.part' is damaged: gzip CRC-32 or length mismatch"));
    assert_absent_clean(data, "cifar10");
    /* stopped: the intact archive, with the stop flag already up */
    gen_cifar(arc, 6);
    mkdir(tpath("u-stop"), 0755);
    volatile sig_atomic_t stop = 1;
    assert_int_not_equal(nb_unpack(arc, nb_registry_find("cifar10"), tpath("u-stop"), &stop, &err),
                         0);
    assert_non_null(strstr(err.msg, "interrupted"));
}

/* ---- hostile archives ------------------------------------------------------------------------ */

/* A CIFAR archive with one extra (or replaced) entry; the install must fail with `expect` in
 * the message, leave no dataset and write nothing outside the data directory. */
static void hostile(const char *tag, const gen_entry *bad, int drop_meta, const char *expect,
                    uint64_t cap) {
    gen_entry e[10];
    int n = 0;
    char names[6][64];
    for (int b = 0; b < 6; b++) {
        snprintf(names[b], sizeof names[b], "cifar-10-batches-bin/%s", cifar_names[b]);
        e[n++] = (gen_entry){.name = names[b], .data = cifar_bins[b], .size = REC * NREC};
    }
    if (!drop_meta)
        e[n++] = (gen_entry){.name = "cifar-10-batches-bin/batches.meta.txt",
                             .data = cifar_meta,
                             .size = sizeof cifar_meta - 1};
    if (bad) e[n++] = *bad;
    const char *arc = tpath("h-%s.tar.gz", tag);
    write_archive(arc, "tar.gz", e, n, 6);
    char url[1100];
    snprintf(url, sizeof url, "file://%s", arc);
    pin_cifar(url, arc);
    static nb_member mem[7];
    if (cap) {
        memcpy(mem, t_ds.members, sizeof mem);
        for (int i = 0; i < 7; i++)
            mem[i].max_size = cap;
        t_ds.members = mem;
    }
    mkdir(tpath("h-%s", tag), 0755);
    const char *data = tpath("h-%s/data", tag);
    nb_fetch_opts o = fast_opts();
    nb_err err;
    nb_err_clear(&err);
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    if (!strstr(err.msg, expect)) fail_msg("%s: expected '%s' in: %s", tag, expect, err.msg);
    assert_absent_clean(data, "cifar10");
    DIR *d = opendir(tpath("h-%s", tag));
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "data"))
            fail_msg("%s: '%s' was written outside the data directory", tag, de->d_name);
    closedir(d);
    assert_false(exists("/tmp/nb-evil-absolute"));
}

static void test_hostile_archives(void **state) {
    (void)state;
    gen_entry dotdot = {.name = "cifar-10-batches-bin/../../x", .data = "x", .size = 1};
    hostile("dotdot", &dotdot, 0, "'..'", 0);
    gen_entry abs = {.name = "/tmp/nb-evil-absolute", .data = "x", .size = 1};
    hostile("abs", &abs, 0, "absolute path", 0);
    gen_entry sym = {
        .name = "cifar-10-batches-bin/batches.meta.txt", .type = AE_IFLNK, .link = "/etc/passwd"};
    hostile("symlink", &sym, 1, "is a link", 0);
    gen_entry hard = {.name = "cifar-10-batches-bin/batches.meta.txt",
                      .hard = 1,
                      .link = "cifar-10-batches-bin/test_batch.bin"};
    hostile("hardlink", &hard, 1, "is a link", 0);
    gen_entry dev = {.name = "cifar-10-batches-bin/batches.meta.txt", .type = AE_IFCHR};
    hostile("device", &dev, 1, "not a regular file", 0);
    hostile("oversized", NULL, 0, "more than the", 4096);
    hostile("missing", NULL, 1, "lacks the member 'batches.meta.txt'", 0);
    gen_entry extra = {.name = "cifar-10-batches-bin/evil.sh", .data = "x", .size = 1};
    hostile("unexpected", &extra, 0, "unexpected member", 0);
    gen_entry dup = {.name = "cifar-10-batches-bin/test_batch.bin", .data = "x", .size = 1};
    hostile("duplicate", &dup, 0, "twice", 0);
    /* a zip whose header understates a member's size: caught while writing */
    static unsigned char big[9000];
    gen_entry e[] = {{.name = "dict.pkl", .data = big, .size = sizeof big}};
    write_archive(tpath("h-lie.zip"), "zip", e, 1, 6);
    nb_member m = {"dict.pkl", NULL, 4096};
    nb_dataset d = {.name = "lie", .pack = NB_PACK_ZIP, .members = &m, .nmembers = 1};
    mkdir(tpath("h-lie"), 0755);
    nb_err err;
    assert_int_not_equal(nb_unpack(tpath("h-lie.zip"), &d, tpath("h-lie"), NULL, &err), 0);
    assert_non_null(strstr(err.msg, "more than the 4096"));
}

/* ---- interruption, unwritable and full data directories ------------------------------------- */

static volatile sig_atomic_t stop_flag;
static int64_t first_done, stop_after;

static void stopping_progress(void *ctx, const char *stage, const char *file, int64_t done,
                              int64_t total) {
    (void)ctx;
    (void)file;
    (void)total;
    if (strcmp(stage, "download") != 0) return;
    if (first_done < 0) first_done = done;
    if (stop_after > 0 && done >= stop_after) stop_flag = 1;
}

static void test_interrupt_then_resume(void **state) {
    (void)state;
    serve_cifar("slow", "c-slow.tar.gz");
    const char *data = tpath("d-intr");
    nb_fetch_opts o = fast_opts();
    o.stop = &stop_flag;
    o.progress = stopping_progress;
    stop_flag = 0;
    first_done = -1;
    stop_after = 20000;
    nb_err err;
    assert_int_not_equal(nb_dataset_install(&t_ds, data, &o, &err), 0);
    assert_non_null(strstr(err.msg, "interrupted"));
    assert_absent_clean(data, "cifar10");
    struct stat st;
    assert_int_equal(stat(tpath("d-intr/.downloads/cifar-10-binary.tar.gz.part"), &st), 0);
    assert_true(st.st_size >= 20000);
    stop_flag = 0;
    stop_after = 0;
    first_done = -1;
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    /* resumed, and counted towards the whole file (unless, on a loaded machine, the whole file
     * had arrived before the stop was seen: then the server answers 416 and nothing moves) */
    if (st.st_size < t_ds.sources[0].size) assert_true(first_done >= (int64_t)st.st_size);
    assert_cifar_installed(data);

    /* a stale .part from another version of the file: verification fails, the .part is
     * deleted and the file fetched afresh, once */
    const char *data2 = tpath("d-stale");
    mkdir(data2, 0755);
    mkdir(tpath("d-stale/.downloads"), 0755);
    static unsigned char stale[30000];
    memset(stale, 0x5a, sizeof stale);
    write_file(tpath("d-stale/.downloads/cifar-10-binary.tar.gz.part"), stale, sizeof stale);
    if (nb_dataset_install(&t_ds, data2, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    assert_cifar_installed(data2);
}

static void test_unwritable_and_full(void **state) {
    (void)state;
    const char *arc = tpath("c-full.tar.gz");
    gen_cifar(arc, 0); /* stored, so the download is larger than the limit below */
    char url[1100];
    snprintf(url, sizeof url, "file://%s", arc);
    pin_cifar(url, arc);
    nb_fetch_opts o = fast_opts();
    nb_err err;
    /* a data directory that cannot be created */
    write_file(tpath("notadir"), "x", 1);
    assert_int_not_equal(nb_dataset_install(&t_ds, tpath("notadir/data"), &o, &err), 0);
    assert_non_null(strstr(err.msg, "notadir"));
    /* a full disk, as a file size limit in a child process */
    const char *data = tpath("d-full");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {20000, 20000};
        setrlimit(RLIMIT_FSIZE, &rl);
        nb_err e2;
        int rc = nb_dataset_install(&t_ds, data, &o, &e2);
        _exit(rc != 0 && strstr(e2.msg, "cannot write") ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_absent_clean(data, "cifar10");
    /* the next try, with space, completes */
    if (nb_dataset_install(&t_ds, data, &o, &err)) fail_msg("%s / %s", err.msg, err.hint);
    assert_cifar_installed(data);
}

static void test_mirror_url(void **state) {
    (void)state;
    char out[256];
    nb_err err;
    assert_int_equal(
        nb_mirror_url("https://www.cs.toronto.edu/~kriz/c.tar.gz", "http://m.lan", out, 256, &err),
        0);
    assert_string_equal(out, "http://m.lan/~kriz/c.tar.gz");
    assert_int_equal(nb_mirror_url("http://a.org/x/y.gz", "http://m.lan/ds/", out, 256, &err), 0);
    assert_string_equal(out, "http://m.lan/ds/x/y.gz");
    assert_int_not_equal(nb_mirror_url("http://a.org/x", "m.lan", out, 256, &err), 0);
    assert_int_not_equal(nb_mirror_url("http://a.org/x", "http://m.lan", out, 10, &err), 0);
}

/* Two processes fetching the same dataset at once (parallel runs sharing DATA): both succeed,
 * one install. */
static void test_concurrent_installs(void **state) {
    (void)state;
    serve_cifar("slow", "c-conc.tar.gz");
    const char *data = tpath("d-conc");
    nb_fetch_opts o = fast_opts();
    pid_t p[2];
    for (int i = 0; i < 2; i++) {
        p[i] = fork();
        assert_true(p[i] >= 0);
        if (p[i] == 0) {
            nb_err e2;
            _exit(nb_dataset_install(&t_ds, data, &o, &e2) == 0 ? 0 : 1);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        waitpid(p[i], &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_cifar_installed(data);
    assert_int_equal(server_count("/slow/c-conc.tar.gz"), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mirror_url),
        cmocka_unit_test(test_cifar_file_url),
        cmocka_unit_test(test_idx_gz_http_and_recompressed),
        cmocka_unit_test(test_coco_zip_tofu),
        cmocka_unit_test(test_top4_zip_from),
        cmocka_unit_test(test_resume_after_drop),
        cmocka_unit_test(test_server_ignores_range),
        cmocka_unit_test(test_404_not_retried),
        cmocka_unit_test(test_500_then_success),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_checksum_mismatch),
        cmocka_unit_test(test_truncated_gzip),
        cmocka_unit_test(test_damaged_gzip_trailer),
        cmocka_unit_test(test_hostile_archives),
        cmocka_unit_test(test_interrupt_then_resume),
        cmocka_unit_test(test_unwritable_and_full),
        cmocka_unit_test(test_concurrent_installs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
