/* datasets/unpack.h — stream an archive (libarchive) and write only the files a dataset expects.
 *
 * Nothing in the archive is trusted: only regular files whose names match a member are
 * written, each under its cap (checked on the declared size and again while writing), into
 * out_dir under the member's installed name, created exclusively and fsynced. An absolute path,
 * a ".." component, a link (symbolic or hard), a device, FIFO or socket, an oversized or
 * duplicated member, and (with strict) any member not expected is refused; so is an archive that
 * lacks an expected member. Directories are skipped. */
#ifndef NB_DATASETS_UNPACK_H
#define NB_DATASETS_UNPACK_H

#include <signal.h>
#include <stdint.h>

#include "datasets/registry.h"
#include "util/err.h"

/* Unpacks archive_path (a regular file: tar, tar.gz or zip, by content) per d's members into
 * out_dir (which exists and is empty). A gzip stream is read to its end and every member's
 * CRC-32 and length checked (datasets/gz.h); zip members' CRC-32s are checked by libarchive.
 * Stops with an error as soon as stop (may be NULL) becomes non-zero. A member's archive path may
 * sit below one top directory
 * ("cifar-10-batches-bin/data_batch_1.bin"). Returns 0, or -1 with err naming the archive and
 * the member; what was written into out_dir is then the caller's to remove. */
int nb_unpack(const char *archive_path, const nb_dataset *d, const char *out_dir,
              volatile sig_atomic_t *stop, nb_err *err);

/* Copies src (a regular file of at most max_bytes, 0: any size; datasets/download.h's
 * nb_open_input) to dst (created exclusively), fsyncs it. Stops with an error as soon as stop
 * (may be NULL) becomes non-zero. Returns 0, or -1 with err. */
int nb_copy_file(const char *src, const char *dst, int64_t max_bytes, volatile sig_atomic_t *stop,
                 nb_err *err);

#endif
