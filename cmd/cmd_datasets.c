/* cmd/cmd_datasets.c — `normbench datasets`: what is known, where it lives, whether it is
 * present, and how each is checked. */
#include "cmd/cmd.h"

#include "datasets/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char datasets_usage[] =
    "usage: normbench datasets [--data-dir DIR] [--verify]\n\n"
    "Lists the datasets 'normbench fetch' knows: size, source, checksum, where each lives\n"
    "(DATA/NAME) and whether it is present. --verify re-hashes present datasets against their\n"
    "manifests (slow for large ones). Exit status 1 when any dataset is damaged.\n";

static void human(char *out, size_t n, int64_t b) {
    if (b <= 0)
        snprintf(out, n, "unknown");
    else if (b >= (int64_t)1 << 20)
        snprintf(out, n, "%.1f MiB", (double)b / (double)((int64_t)1 << 20));
    else
        snprintf(out, n, "%.1f KiB", (double)b / 1024.0);
}

/* How d is checked, in words. */
static void checksum_words(const nb_dataset *d, const char *data_dir, char *out, size_t n) {
    const nb_source *s = &d->sources[0];
    if (s->md5)
        snprintf(out, n, "MD5 of the download pinned");
    else if (s->sha256)
        snprintf(out, n, "SHA-256 pinned");
    else if (s->content_sha256)
        snprintf(out, n, "content SHA-256 pinned (of the gunzipped files)");
    else {
        char sha[65];
        int rec = nb_trust_get(data_dir, s->file, sha);
        snprintf(out, n, "none published: trust on first use (%s)",
                 rec ? "SHA-256 recorded" : "nothing recorded yet");
    }
}

int cmd_datasets(int argc, const char **argv) {
    const char *data_dir = NULL;
    int verify = 0;
    nb_opt opts[] = {
        {"data-dir", NB_OPT_STR, &data_dir, "DIR", "data directory (NORMBENCH_DATA)"},
        {"verify", NB_OPT_FLAG, &verify, NULL, "re-hash present datasets"},
        {NULL},
    };
    int rc = nb_parse_opts("datasets", datasets_usage, argc, argv, opts, NULL, 0, NULL);
    if (rc == -1) return NB_EXIT_OK;
    if (rc) return rc;
    if (!data_dir) data_dir = nb_default_data_dir();
    printf("data directory: %s\n\n", data_dir);
    int damaged = 0;
    for (int i = 0; i < nb_registry_count(); i++) {
        const nb_dataset *d = nb_registry_at(i);
        char size[32], sum[160], dir[4096];
        human(size, sizeof size, nb_dataset_download_size(d));
        checksum_words(d, data_dir, sum, sizeof sum);
        nb_dataset_dir(d->name, data_dir, dir, sizeof dir);
        nb_err err;
        nb_err_clear(&err);
        nb_ds_state s = nb_dataset_state(d, data_dir, verify, &err);
        const char *state = s == NB_DS_PRESENT  ? (verify ? "present, verified" : "present")
                            : s == NB_DS_ABSENT ? "absent"
                                                : "damaged";
        printf("%s\n  %s\n", d->name, d->summary);
        printf("  status:   %s\n", state);
        if (s == NB_DS_DAMAGED) printf("  problem:  %s\n", err.msg);
        damaged += s == NB_DS_DAMAGED;
        printf("  location: %s\n", dir);
        printf("  download: %s (%d file%s)\n", size, d->nsources, d->nsources == 1 ? "" : "s");
        printf("  source:   %s%s\n", d->sources[0].url, d->nsources > 1 ? " (and more)" : "");
        if (d->sources[0].local) {
            const char *l = d->sources[0].local;
            const char *slash = strrchr(l, '/');
            int len = slash ? (int)(slash - l) : (int)strlen(l);
            printf("  local:    %.*s (%s; used unless --mirror)\n", len, l,
                   access(l, R_OK) == 0 ? "installed" : "not installed");
        }
        printf("  checksum: %s\n", sum);
        printf("  format:   %s\n\n", d->parser);
    }
    if (damaged) {
        fflush(stdout);
        fprintf(stderr,
                "error: %d dataset%s damaged (see 'problem' above)\nhint: remove the "
                "dataset's directory and run 'normbench fetch NAME' again\n",
                damaged, damaged == 1 ? " is" : "s are");
        return NB_EXIT_FAIL;
    }
    return NB_EXIT_OK;
}
