/* datasets/download.c — see download.h. */
#include "datasets/download.h"

#include "datasets/gz.h"
#include "util/outpath.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HINT_FROM                                                                                  \
    "check the network, or download the file elsewhere and import it with 'normbench fetch "       \
    "NAME --from FILE'"

int nb_download_global_init(nb_err *err) {
    static int done = 0;
    if (done) return 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return nb_errf(err, "cannot initialise libcurl");
    done = 1;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > 1000000) return def;
    return (int)x;
}

typedef struct dl_ctx {
    FILE *f;
    const char *file;
    int64_t offset; /* bytes in the .part before this transfer */
    int64_t written;
    int64_t max_bytes;
    int write_errno; /* the write failed: errno */
    int too_big;
    const nb_dl_opts *o;
    CURL *h;
    int checked_length; /* the declared Content-Length was compared with max_bytes */
} dl_ctx;

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud) {
    dl_ctx *c = ud;
    size_t n = size * nmemb;
    /* A declared length beyond what the file can be is refused before a byte is written (a
     * mirror that declares 100 GiB would otherwise fill the disk up to the cap first). */
    if (!c->checked_length && c->max_bytes > 0) {
        c->checked_length = 1;
        curl_off_t declared = -1;
        if (curl_easy_getinfo(c->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared) == CURLE_OK &&
            declared > 0 && c->offset + (int64_t)declared > c->max_bytes) {
            c->too_big = 1;
            return 0;
        }
    }
    if (c->max_bytes > 0 && c->offset + c->written + (int64_t)n > c->max_bytes) {
        c->too_big = 1;
        return 0;
    }
    if (fwrite(p, 1, n, c->f) != n) {
        c->write_errno = errno ? errno : EIO;
        return 0;
    }
    c->written += (int64_t)n;
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)ultotal;
    (void)ulnow;
    dl_ctx *c = ud;
    if (c->o->stop && *c->o->stop) return 1;
    if (c->o->progress)
        c->o->progress(c->o->progress_ctx, c->file, c->offset + (int64_t)dlnow,
                       dltotal > 0 ? c->offset + (int64_t)dltotal : 0);
    return 0;
}

/* Sleeps ms milliseconds in small steps, returning early (1) when a stop is requested. */
static int backoff_sleep(int ms, volatile sig_atomic_t *stop) {
    while (ms > 0) {
        if (stop && *stop) return 1;
        int step = ms < 50 ? ms : 50;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
    return stop && *stop;
}

static void past_timeout(const char *url, const char *file, int timeout, const char *part_path,
                         nb_err *err) {
    nb_errf(err,
            "cannot download '%s' (file '%s'): not done within the %d s allowed (--timeout); "
            "the partial file '%s' is kept",
            url, file, timeout, part_path);
    nb_hintf(err, "run the same command again to resume, with a larger --timeout; " HINT_FROM);
}

int nb_download(const char *url, const char *part_path, const nb_dl_opts *o, int *interrupted,
                nb_err *err) {
    nb_dl_opts def = {0};
    if (!o) o = &def;
    int retries = o->retries > 0 ? o->retries : env_int("NORMBENCH_TEST_RETRIES", 4);
    int backoff = o->backoff_ms > 0 ? o->backoff_ms : env_int("NORMBENCH_TEST_BACKOFF_MS", 1000);
    int stall = o->stall_s > 0 ? o->stall_s : env_int("NORMBENCH_TEST_STALL_S", NB_DL_RATE_WINDOW);
    int conn = o->connect_timeout_s > 0 ? o->connect_timeout_s : 30;
    int64_t min_rate = o->min_rate > 0 ? o->min_rate : NB_DL_MIN_RATE;
    int timeout = o->timeout_s != 0 ? o->timeout_s : NB_DL_TIMEOUT;
    double deadline = timeout > 0 ? now_s() + timeout : 0;
    if (interrupted) *interrupted = 0;
    char file[256];
    snprintf(file, sizeof file, "%s", nb_path_base(part_path));
    size_t fl = strlen(file);
    if (fl > 5 && strcmp(file + fl - 5, ".part") == 0) file[fl - 5] = '\0';
    CURL *h = curl_easy_init();
    if (!h) return nb_errf(err, "cannot download '%s': libcurl failed to start", url);
    char cerr[CURL_ERROR_SIZE];
    int rc = -1;
    for (int attempt = 0;; attempt++) {
        long left_ms = deadline > 0 ? (long)((deadline - now_s()) * 1000) : 0;
        if (deadline > 0 && left_ms <= 0) {
            past_timeout(url, file, timeout, part_path, err);
            break;
        }
        FILE *f = fopen(part_path, "ab");
        if (!f) {
            int e = errno;
            nb_errf(err, "cannot write '%s': %s", part_path, strerror(e));
            nb_hintf(err, "check that the data directory is writable and has space, or choose "
                          "another with --data-dir");
            break;
        }
        struct stat st;
        int64_t have = fstat(fileno(f), &st) == 0 ? (int64_t)st.st_size : 0;
        dl_ctx c = {f, file, have, 0, o->max_bytes, 0, 0, o, h, 0};
        curl_easy_reset(h);
        cerr[0] = '\0';
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http,file");
        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https,http");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &c);
        /* below min_rate bytes/s on average for `stall` seconds: a stall or a slow drip */
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)min_rate);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)stall);
        if (deadline > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)conn);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "normbench");
        if (have > 0) curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)have);
        CURLcode res = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        int ferr = fflush(f) != 0 || fsync(fileno(f)) != 0;
        int fe = errno;
        if (fclose(f) != 0 && !ferr) {
            ferr = 1;
            fe = errno;
        }
        if (res == CURLE_OK && !ferr) {
            rc = 0;
            break;
        }
        const char *why = cerr[0] ? cerr : curl_easy_strerror(res);
        if (res == CURLE_ABORTED_BY_CALLBACK || (o->stop && *o->stop)) {
            if (interrupted) *interrupted = 1;
            nb_errf(err, "download of '%s' interrupted; the partial file '%s' is kept", url,
                    part_path);
            nb_hintf(err, "run the same command again to resume");
            break;
        }
        if (c.write_errno || ferr) {
            int e = c.write_errno ? c.write_errno : fe;
            nb_errf(err, "cannot write '%s': %s", part_path, strerror(e));
            nb_hintf(err, "free some space, or choose another data directory with --data-dir");
            break;
        }
        if (c.too_big) {
            nb_errf(err,
                    "'%s' from '%s' is larger than the %lld bytes expected (refused before "
                    "writing it when the server declares its length)",
                    file, url, (long long)o->max_bytes);
            nb_hintf(err, "the server sent something else; try again later or use --mirror");
            remove(part_path);
            break;
        }
        /* 416 to a resume: the .part already holds the whole file (killed before it was
         * verified), or is longer than it; the caller's verification decides (and a bad .part
         * is deleted and fetched afresh). */
        if (code == 416 && have > 0) {
            rc = 0;
            break;
        }
        /* A resume the server does not honour: start the file over (not counted as a try). */
        if (res == CURLE_RANGE_ERROR || code == 416 ||
            (res == CURLE_BAD_DOWNLOAD_RESUME && have > 0)) {
            if (truncate(part_path, 0) != 0) {
                int e = errno;
                nb_errf(err, "cannot truncate '%s': %s", part_path, strerror(e));
                break;
            }
            if (have == 0) {
                nb_errf(err, "cannot download '%s': %s", url, why);
                break;
            }
            attempt--;
            continue;
        }
        int past_deadline = deadline > 0 && now_s() >= deadline - 0.05;
        if (res == CURLE_OPERATION_TIMEDOUT && past_deadline) {
            past_timeout(url, file, timeout, part_path, err);
            break;
        }
        int transient;
        if (res == CURLE_HTTP_RETURNED_ERROR)
            transient = code >= 500 || code == 408 || code == 429;
        else
            transient = res == CURLE_COULDNT_CONNECT || res == CURLE_RECV_ERROR ||
                        res == CURLE_SEND_ERROR || res == CURLE_PARTIAL_FILE ||
                        res == CURLE_OPERATION_TIMEDOUT || res == CURLE_GOT_NOTHING ||
                        res == CURLE_SSL_CONNECT_ERROR || res == CURLE_HTTP2 ||
                        res == CURLE_HTTP2_STREAM;
        if (!transient || attempt >= retries) {
            if (res == CURLE_HTTP_RETURNED_ERROR)
                nb_errf(err, "cannot download '%s' (file '%s'): the server answered %ld%s", url,
                        file, code, transient ? ", after retries" : "");
            else if (res == CURLE_OPERATION_TIMEDOUT)
                nb_errf(
                    err,
                    "cannot download '%s' (file '%s'): stalled or too slow, less than %lld bytes/s "
                    "over %d s (--min-rate)%s",
                    url, file, (long long)min_rate, stall, transient ? ", after retries" : "");
            else
                nb_errf(err, "cannot download '%s' (file '%s'): %s", url, file, why);
            nb_hintf(err, HINT_FROM);
            if (res == CURLE_HTTP_RETURNED_ERROR && code >= 400 && code < 500) remove(part_path);
            break;
        }
        int ms = backoff;
        for (int i = 0; i < attempt && ms < 60000; i++)
            ms *= 2;
        if (deadline > 0 && ms > (deadline - now_s()) * 1000) /* wake at the deadline */
            ms = deadline > now_s() ? (int)((deadline - now_s()) * 1000) + 1 : 0;
        if (backoff_sleep(ms, o->stop)) {
            if (interrupted) *interrupted = 1;
            nb_errf(err, "download of '%s' interrupted; the partial file '%s' is kept", url,
                    part_path);
            nb_hintf(err, "run the same command again to resume");
            break;
        }
    }
    curl_easy_cleanup(h);
    return rc;
}

int nb_mirror_url(const char *url, const char *mirror, char *out, size_t n, nb_err *err) {
    const char *s = strstr(url, "://");
    if (!s) return nb_errf(err, "malformed URL '%s'", url);
    const char *path = strchr(s + 3, '/');
    if (!path) path = "/";
    const char *ms = strstr(mirror, "://");
    if (!ms || ms == mirror || !ms[3])
        return nb_errf(err, "malformed mirror URL '%s'", mirror),
               nb_hintf(err, "give a URL such as http://mirror.lan/datasets");
    size_t ml = strlen(mirror);
    while (ml > 0 && mirror[ml - 1] == '/')
        ml--;
    int k = snprintf(out, n, "%.*s%s", (int)ml, mirror, path);
    if (k < 0 || (size_t)k >= n) return nb_errf(err, "mirror URL '%s' is too long", mirror);
    return 0;
}

static void hex(const unsigned char *d, unsigned n, char *out) {
    static const char x[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[2 * n] = '\0';
}

int nb_open_input(const char *path, int64_t max_bytes, nb_err *err) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; cleared once it is known regular */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return nb_errf(err, "cannot open '%s': %s", path, strerror(e));
    }
    struct stat st, lst;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return nb_errf(err, "cannot read '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        char real[4096] = "", via[4200] = "";
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && realpath(path, real))
            snprintf(via, sizeof via, ", through a symbolic link to '%s'", real);
        close(fd);
        nb_errf(err, "'%s' is not a regular file: it is %s%s", path, nb_file_kind(st.st_mode), via);
        return nb_hintf(err, "give the path of the downloaded file itself");
    }
    if (max_bytes > 0 && (int64_t)st.st_size > max_bytes) {
        close(fd);
        nb_errf(err, "'%s' has %lld bytes, more than the %lld expected for it", path,
                (long long)st.st_size, (long long)max_bytes);
        return nb_hintf(err, "it is not the dataset's file: check the path");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int nb_hash_file(const char *path, char md5[33], char sha256[65], int64_t *size, nb_err *err) {
    return nb_hash_input(path, 0, NULL, md5, sha256, size, err);
}

int nb_hash_input(const char *path, int64_t max_bytes, volatile sig_atomic_t *stop, char md5[33],
                  char sha256[65], int64_t *size, nb_err *err) {
    int rc = -1;
    int fd = nb_open_input(path, max_bytes, err);
    if (fd < 0) return -1;
    EVP_MD_CTX *cm = EVP_MD_CTX_new(), *cs = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 16);
    if (!cm || !cs || !buf || !EVP_DigestInit_ex(cm, EVP_md5(), NULL) ||
        !EVP_DigestInit_ex(cs, EVP_sha256(), NULL)) {
        nb_errf(err, "cannot hash '%s': out of memory", path);
        goto done;
    }
    int64_t total = 0;
    for (;;) {
        if (stop && *stop) {
            nb_errf(err, "hashing '%s' interrupted", path);
            goto done;
        }
        ssize_t k = read(fd, buf, 1 << 16);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            nb_errf(err, "cannot read '%s': %s", path, strerror(e));
            goto done;
        }
        if (k == 0) break;
        total += (int64_t)k;
        if (max_bytes > 0 && total > max_bytes) {
            nb_errf(err, "'%s' grew past the %lld bytes expected for it while being read", path,
                    (long long)max_bytes);
            nb_hintf(err, "it is not the dataset's file: check the path");
            goto done;
        }
        if ((md5 && !EVP_DigestUpdate(cm, buf, (size_t)k)) ||
            (sha256 && !EVP_DigestUpdate(cs, buf, (size_t)k))) {
            nb_errf(err, "cannot hash '%s'", path);
            goto done;
        }
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    if (md5) {
        EVP_DigestFinal_ex(cm, d, &dn);
        hex(d, dn, md5);
    }
    if (sha256) {
        EVP_DigestFinal_ex(cs, d, &dn);
        hex(d, dn, sha256);
    }
    if (size) *size = total;
    rc = 0;
done:
    free(buf);
    EVP_MD_CTX_free(cm);
    EVP_MD_CTX_free(cs);
    close(fd);
    return rc;
}

int nb_hash_gz_content(const char *path, uint64_t max_bytes, volatile sig_atomic_t *stop,
                       char sha256[65], nb_err *err) {
    int rc = -1;
    unsigned char sig[2] = {0, 0};
    int fd = nb_open_input(path, 0, err);
    if (fd < 0) return -1;
    ssize_t k0 = read(fd, sig, 2);
    close(fd);
    if (k0 != 2 || !nb_gz_magic(sig, 2)) return nb_errf(err, "'%s' is not a gzip file", path);
    nb_gz *g = NULL;
    EVP_MD_CTX *cs = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 16);
    if (!cs || !buf || !EVP_DigestInit_ex(cs, EVP_sha256(), NULL)) {
        nb_errf(err, "cannot hash '%s': out of memory", path);
        goto done;
    }
    if (nb_gz_open(&g, path, stop, err)) goto done;
    uint64_t total = 0;
    for (;;) {
        long long k = nb_gz_read(g, buf, 1 << 16, err);
        if (k < 0) goto done;
        if (k == 0) break;
        total += (uint64_t)k;
        if (total > max_bytes) {
            nb_errf(err, "'%s' decompresses to more than %llu bytes", path,
                    (unsigned long long)max_bytes);
            goto done;
        }
        EVP_DigestUpdate(cs, buf, (size_t)k);
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    EVP_DigestFinal_ex(cs, d, &dn);
    hex(d, dn, sha256);
    rc = 0;
done:
    free(buf);
    EVP_MD_CTX_free(cs);
    nb_gz_close(g);
    return rc;
}
