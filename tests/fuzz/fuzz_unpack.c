/* tests/fuzz/fuzz_unpack.c — the archive unpacker (datasets/unpack.c) on arbitrary bytes: tar,
 * tar.gz or zip as a dataset archive would arrive. Whatever the input, nothing may be written
 * outside the output directory, nothing but the expected members inside it, and no member over
 * its cap. The input goes through a temporary file (nb_unpack reads a path). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/unpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[256];

static const nb_member members[] = {
    {"a.txt", NULL, 4096},
    {"images/10crop/b.npy", NULL, 4096},
};
static const nb_dataset ds = {
    .name = "fuzz", .pack = NB_PACK_TARGZ, .members = members, .nmembers = 2, .strict = 0};

/* Removes out/ and checks what it held: at most the two members, each within its cap. */
static void check_and_clean(const char *out) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/a.txt", out);
    if (lstat(p, &st) == 0) {
        if (!S_ISREG(st.st_mode) || st.st_size > 4096) abort();
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/images/10crop/b.npy", out);
    if (lstat(p, &st) == 0) {
        if (!S_ISREG(st.st_mode) || st.st_size > 4096) abort();
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/images/10crop", out);
    rmdir(p);
    snprintf(p, sizeof p, "%s/images", out);
    rmdir(p);
    if (rmdir(out) != 0) abort(); /* anything else left inside is a bug */
    DIR *d = opendir(root);
    if (!d) abort();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) /* nothing written beside out/ but the input */
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "in")) abort();
    closedir(d);
}

static void remove_root(void) {
    rmdir(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!root[0]) {
        /* tmpfs when there is one: unpacking fsyncs every file, which a disk makes slow */
        const char *t = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                        : getenv("TMPDIR")            ? getenv("TMPDIR")
                                                      : "/tmp";
        snprintf(root, sizeof root, "%s/nb-fuzz-unpack-XXXXXX", t);
        if (!mkdtemp(root)) abort();
        atexit(remove_root);
    }
    char in[300], out[300];
    snprintf(in, sizeof in, "%s/in", root);
    snprintf(out, sizeof out, "%s/out", root);
    FILE *f = fopen(in, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    if (mkdir(out, 0755) != 0) abort();
    nb_err err;
    err.msg[0] = '\0';
    if (nb_unpack(in, &ds, out, NULL, &err) != 0 && !err.msg[0]) abort();
    check_and_clean(out);
    unlink(in);
    return 0;
}
