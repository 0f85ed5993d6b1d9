/* datasets/registry.h — the paper datasets: where they come from, how they are checked, and the
 * files each one yields.
 *
 * Every entry installs into DATA/NAME/ (DATA = --data-dir, NORMBENCH_DATA, or
 * ~/.cache/normbench) the files listed in its members, flattened out of the archive under fixed
 * names, plus a manifest (NB_MANIFEST, sha256sum format) written last. The directory exists only
 * when complete and verified (datasets/dataset.h). */
#ifndef NB_DATASETS_REGISTRY_H
#define NB_DATASETS_REGISTRY_H

#include <stdint.h>

/* How the downloads become the dataset's files. */
typedef enum nb_pack {
    NB_PACK_FILES, /* each source is one member file, installed as it is (e.g. IDX .gz) */
    NB_PACK_TARGZ, /* one .tar.gz archive */
    NB_PACK_ZIP    /* one .zip archive */
} nb_pack;

/* One download. Checks, strongest first: md5 (upstream's published digest of these bytes),
 * content_sha256 (of the gunzipped content, for .gz files: a mirror or Debian may recompress),
 * sha256 (of these bytes). With none pinned, the first verified download's SHA-256 is recorded
 * in DATA/.trust/FILE.sha256 and every later download must match it (trust on first use). */
typedef struct nb_source {
    const char *url;
    const char *file;           /* download file name (also the name --from may carry) */
    int64_t size;               /* bytes when known (progress, and checked with md5), else 0 */
    const char *md5;            /* NULL when not published */
    const char *sha256;         /* NULL when not published */
    const char *content_sha256; /* .gz sources only; NULL when unknown */
    const char *local;          /* a local copy (Debian package), used unless a mirror is set */
} nb_source;

/* One file the dataset yields. */
typedef struct nb_member {
    const char *name;  /* installed path under DATA/NAME/, e.g. "images/10crop/train.npy" */
    const char *path;  /* path inside the archive below an optional top directory; NULL: name */
    uint64_t max_size; /* larger is refused, before and while unpacking */
} nb_member;

typedef struct nb_dataset {
    const char *name;
    const char *summary;
    const char *parser; /* which format reader reads the files */
    nb_pack pack;
    const nb_source *sources; /* NB_PACK_FILES: one per member, same order; else one */
    int nsources;
    const nb_member *members;
    int nmembers;
    /* 1: an archive member that is neither a member nor in `extra` is refused; 0 (archives whose
     * exact contents are not published): such regular files are skipped, never written. */
    int strict;
    const char *const *extra; /* NULL-terminated regular files allowed and skipped */
} nb_dataset;

/* The manifest's name inside a dataset directory. */
#define NB_MANIFEST "MANIFEST.sha256"

/* The registry: nb_registry_count() entries, in display order. */
int nb_registry_count(void);
const nb_dataset *nb_registry_at(int i);
/* The entry called name, or NULL. */
const nb_dataset *nb_registry_find(const char *name);

/* Total download size in bytes when every source's size is known, else 0. */
int64_t nb_dataset_download_size(const nb_dataset *d);

#endif
