/* datasets/download.h — resumable downloads (libcurl) and file digests (OpenSSL libcrypto).
 *
 * A download writes DEST.part only, appending to what an earlier try left (a range request);
 * when the server ignores the range or answers 416, the .part is truncated and the transfer
 * starts over. Transient failures (connection reset or refused, a stall, 5xx, 408, 429) are
 * retried with exponential backoff; 4xx are not. The caller hashes the finished .part, compares,
 * and only then renames it (datasets/dataset.c). */
#ifndef NB_DATASETS_DOWNLOAD_H
#define NB_DATASETS_DOWNLOAD_H

#include <signal.h>
#include <stdint.h>
#include "util/err.h"

/* Progress: bytes of the whole file so far (including what a resumed .part already held) and
 * the whole size (0 while unknown). Called often; the receiver rate-limits drawing. */
typedef void (*nb_dl_progress_fn)(void *ctx, const char *file, int64_t done, int64_t total);

typedef struct nb_dl_opts {
    nb_dl_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    volatile sig_atomic_t *stop; /* non-zero: abort now and keep the .part (Ctrl-C); may be NULL */
    int64_t max_bytes;           /* > 0: refuse a file larger than this */
    /* 0 takes the defaults (4 retries, 1000 ms first backoff, 30 s connect timeout, and a
     * transfer slower than NB_DL_MIN_RATE bytes/s on average over stall_s = NB_DL_RATE_WINDOW
     * seconds is a stall: dropped and retried). For tests only, the environment variables
     * NORMBENCH_TEST_RETRIES, NORMBENCH_TEST_BACKOFF_MS and NORMBENCH_TEST_STALL_S override the
     * defaults. */
    int retries, backoff_ms, stall_s, connect_timeout_s;
    int64_t min_rate; /* bytes/s; 0: NB_DL_MIN_RATE */
    /* > 0: the whole download of one file, retries and backoff included, must end within this
     * many seconds (the .part is kept for the next try); 0: NB_DL_TIMEOUT; < 0: no deadline */
    int timeout_s;
} nb_dl_opts;

#define NB_DL_MIN_RATE 1024  /* bytes/s */
#define NB_DL_RATE_WINDOW 30 /* seconds */
#define NB_DL_TIMEOUT 3600   /* seconds per file */

/* Downloads url (http, https or file) into part_path, resuming from its current length.
 * Returns 0 when the transfer completed (the .part holds the whole file, unverified), or -1 with
 * err naming the URL and the file (a stall, too slow after retries, or past the deadline); the
 * .part is kept (for the next try) except after a 4xx answer or an oversized file. *interrupted is
 * set to 1 when it stopped because *o->stop became non-zero. curl_global_init must have been called
 * (nb_download_global_init). */
int nb_download(const char *url, const char *part_path, const nb_dl_opts *o, int *interrupted,
                nb_err *err);

/* curl_global_init once per process (thread-unsafe; cmd/ and tests call it at start). */
int nb_download_global_init(nb_err *err);

/* Replaces the scheme and host of url by mirror's (a mirror path is prefixed to url's path).
 * "https://a.org/x/y.gz" with "http://m.lan/ds" gives "http://m.lan/ds/x/y.gz". Writes at
 * most n bytes to out; returns 0, or -1 with err when either URL is malformed or out is short. */
int nb_mirror_url(const char *url, const char *mirror, char *out, size_t n, nb_err *err);

/* Opens path for reading: a regular file (a symbolic link to one is fine) of at most max_bytes
 * (0: any size). A directory, device, FIFO or socket is refused without reading it (and a FIFO
 * without waiting for a writer), as is a larger file, with err naming the path, what it is and,
 * for a link, where it points. Returns the descriptor, or -1 with err. */
int nb_open_input(const char *path, int64_t max_bytes, nb_err *err);

/* Digests of a regular file (nb_open_input): lowercase hex. Any of md5/sha256/size may be
 * NULL. Returns 0, or -1 with err naming the file. */
int nb_hash_file(const char *path, char md5[33], char sha256[65], int64_t *size, nb_err *err);

/* nb_hash_file for a file that must hold at most max_bytes (0: any size; checked before and
 * while reading, so a file that grows without end is refused), stopping with an error as soon as
 * stop (may be NULL) becomes non-zero. */
int nb_hash_input(const char *path, int64_t max_bytes, volatile sig_atomic_t *stop, char md5[33],
                  char sha256[65], int64_t *size, nb_err *err);

/* SHA-256 of a gzip file's uncompressed content (at most max_bytes of it; more is an error),
 * every member's CRC-32 and length checked (datasets/gz.h). stop as for nb_hash_input. Returns
 * 0, or -1 with err (not gzip, damaged, truncated, too large, stopped). */
int nb_hash_gz_content(const char *path, uint64_t max_bytes, volatile sig_atomic_t *stop,
                       char sha256[65], nb_err *err);

#endif
