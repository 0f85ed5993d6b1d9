/* datasets/download.c — see download.h. */
#include "datasets/download.h"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <errno.h>
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

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int nb_download(const char *url, const char *part_path, const nb_dl_opts *o, int *interrupted,
                nb_err *err) {
    nb_dl_opts def = {0};
    if (!o) o = &def;
    int retries = o->retries > 0 ? o->retries : env_int("NORMBENCH_TEST_RETRIES", 4);
    int backoff = o->backoff_ms > 0 ? o->backoff_ms : env_int("NORMBENCH_TEST_BACKOFF_MS", 1000);
    int stall = o->stall_s > 0 ? o->stall_s : env_int("NORMBENCH_TEST_STALL_S", 30);
    int conn = o->connect_timeout_s > 0 ? o->connect_timeout_s : 30;
    if (interrupted) *interrupted = 0;
    char file[256];
    snprintf(file, sizeof file, "%s", base_name(part_path));
    size_t fl = strlen(file);
    if (fl > 5 && strcmp(file + fl - 5, ".part") == 0) file[fl - 5] = '\0';
    CURL *h = curl_easy_init();
    if (!h) return nb_errf(err, "cannot download '%s': libcurl failed to start", url);
    char cerr[CURL_ERROR_SIZE];
    int rc = -1;
    for (int attempt = 0;; attempt++) {
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
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)stall);
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
                nb_errf(err,
                        "cannot download '%s' (file '%s'): stalled, less than 1 byte/s for "
                        "%d s%s",
                        url, file, stall, transient ? ", after retries" : "");
            else
                nb_errf(err, "cannot download '%s' (file '%s'): %s", url, file, why);
            nb_hintf(err, HINT_FROM);
            if (res == CURLE_HTTP_RETURNED_ERROR && code >= 400 && code < 500) remove(part_path);
            break;
        }
        int ms = backoff;
        for (int i = 0; i < attempt && ms < 60000; i++)
            ms *= 2;
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

int nb_hash_file(const char *path, char md5[33], char sha256[65], int64_t *size, nb_err *err) {
    int rc = -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return nb_errf(err, "cannot open '%s': %s", path, strerror(e));
    }
    EVP_MD_CTX *cm = EVP_MD_CTX_new(), *cs = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 16);
    if (!cm || !cs || !buf || !EVP_DigestInit_ex(cm, EVP_md5(), NULL) ||
        !EVP_DigestInit_ex(cs, EVP_sha256(), NULL)) {
        nb_errf(err, "cannot hash '%s': out of memory", path);
        goto done;
    }
    int64_t total = 0;
    size_t k;
    while ((k = fread(buf, 1, 1 << 16, f)) > 0) {
        if ((md5 && !EVP_DigestUpdate(cm, buf, k)) || (sha256 && !EVP_DigestUpdate(cs, buf, k))) {
            nb_errf(err, "cannot hash '%s'", path);
            goto done;
        }
        total += (int64_t)k;
    }
    if (ferror(f)) {
        int e = errno;
        nb_errf(err, "cannot read '%s': %s", path, strerror(e ? e : EIO));
        goto done;
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
    fclose(f);
    return rc;
}

int nb_hash_gz_content(const char *path, uint64_t max_bytes, char sha256[65], nb_err *err) {
    int rc = -1;
    unsigned char sig[2] = {0, 0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return nb_errf(err, "cannot open '%s': %s", path, strerror(e));
    }
    size_t k0 = fread(sig, 1, 2, f);
    fclose(f);
    if (k0 != 2 || sig[0] != 0x1f || sig[1] != 0x8b)
        return nb_errf(err, "'%s' is not a gzip file", path);
    struct archive *a = archive_read_new();
    EVP_MD_CTX *cs = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 16);
    struct archive_entry *e;
    if (!a || !cs || !buf || !EVP_DigestInit_ex(cs, EVP_sha256(), NULL)) {
        nb_errf(err, "cannot hash '%s': out of memory", path);
        goto done;
    }
    archive_read_support_filter_gzip(a);
    archive_read_support_format_raw(a);
    if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK ||
        archive_read_next_header(a, &e) != ARCHIVE_OK) {
        nb_errf(err, "cannot decompress '%s': the gzip stream is empty or damaged", path);
        goto done;
    }
    uint64_t total = 0;
    for (;;) {
        la_ssize_t k = archive_read_data(a, buf, 1 << 16);
        if (k < 0) {
            const char *why = archive_error_string(a);
            nb_errf(err, "cannot decompress '%s': %s", path, why ? why : "damaged gzip stream");
            goto done;
        }
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
    if (a) archive_read_free(a);
    return rc;
}
