/* tests/tmpdir.h — a temporary directory for a test group: tmpdir_setup and tmpdir_teardown as
 * cmocka's group fixtures (mkdtemp under $TMPDIR or /tmp; removed whole at the end), tmpdir the
 * directory's path and tpath(NAME) a path inside it. The including file defines _XOPEN_SOURCE
 * 700 (for nftw) before its first include. */
#ifndef NB_TESTS_TMPDIR_H
#define NB_TESTS_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char tmpdir[256];

static int tmpdir_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int tmpdir_setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/nb-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int tmpdir_teardown(void **state) {
    (void)state;
    return nftw(tmpdir, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A path under the test's temporary directory (static buffers, four in rotation). */
static const char *tpath(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

#endif
