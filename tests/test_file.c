/* tests/test_file.c — util/file.h: atomic writes (the old file or the new, never a mix; a killed
 * writer's temporary removed by the next writer, a live one's kept) and the capped whole-file
 * reader (a file over the cap, a pipe, a directory, a link refused). */
#include "tests/testutil.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/file.h"

static char dir[64];

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/nb-test-file.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0) rmdir(p);
        }
    if (d) closedir(d);
    return rmdir(dir);
}

/* How many directory entries besides . and .. */
static int entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *n) {
    char *b = NULL;
    nb_err err;
    return nb_read_file(path, 1 << 20, 0, &b, n, &err) == 0 ? b : NULL;
}

static void test_write_and_replace(void **state) {
    char p[128];
    snprintf(p, sizeof p, "%s/f.txt", dir);
    nb_err err;
    assert_int_equal(nb_write_atomic(p, "old", 3, &err), 0);
    nb_piece parts[3] = {{"n", 1}, {"", 0}, {"ew", 2}};
    assert_int_equal(nb_write_atomicv(p, parts, 3, &err), 0);
    size_t n;
    char *b = slurp(p, &n);
    assert_non_null(b);
    assert_int_equal(n, 3);
    assert_string_equal(b, "new");
    free(b);
    assert_int_equal(entries(), 1); /* no temporary left */

    /* an aborted write leaves the old file and no temporary */
    nb_atomic a;
    assert_int_equal(nb_atomic_open(&a, p, 0666, &err), 0);
    fputs("half", a.f);
    nb_atomic_abort(&a);
    b = slurp(p, &n);
    assert_string_equal(b, "new");
    free(b);
    assert_int_equal(entries(), 1);

    /* a directory that is not there: an error naming the file, nothing made */
    char q[160];
    snprintf(q, sizeof q, "%s/none/f.txt", dir);
    assert_int_equal(nb_write_atomic(q, "x", 1, &err), -1);
    assert_non_null(strstr(err.msg, "none/f.txt"));
    assert_int_equal(errno, ENOENT);
    /* a directory in the way of the rename: refused, the directory kept, no temporary left */
    snprintf(q, sizeof q, "%s/d", dir);
    assert_int_equal(mkdir(q, 0755), 0);
    assert_int_equal(nb_write_atomic(q, "x", 1, &err), -1);
    struct stat st;
    assert_int_equal(stat(q, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(entries(), 2);
}

/* The temporary's name, and which ones the next writer removes. */
static void test_temporaries(void **state) {
    char p[128], t[256];
    snprintf(p, sizeof p, "%s/run-1.ckpt", dir);
    long pid = 0;
    assert_true(nb_file_is_temp(".run-1.ckpt.tmp.normbench.123", &pid) && pid == 123);
    assert_true(nb_file_is_temp("run-1.ckpt.tmp.77", &pid) && pid == 77); /* the older name */
    assert_false(nb_file_is_temp("run-1.ckpt", &pid));
    assert_false(nb_file_is_temp(".x.tmp.normbench.", &pid));
    assert_false(nb_file_is_temp(".x.tmp.normbench.12a", &pid));
    assert_false(nb_file_is_temp("x.tmp.-5", &pid));
    assert_false(nb_file_is_temp(".tmp.5", &pid));

    /* dead writers' temporaries of this file (both names): removed by the next write; a live
     * one's (this process's parent's), another file's, and an unrelated name: kept */
    const char *names[] = {".run-1.ckpt.tmp.normbench.2147483646", "run-1.ckpt.tmp.2147483645",
                           NULL, ".run-2.ckpt.tmp.normbench.2147483646", "notes.tmp"};
    char live[80];
    snprintf(live, sizeof live, ".run-1.ckpt.tmp.normbench.%ld", (long)getppid());
    names[2] = live;
    for (int i = 0; i < 5; i++) {
        snprintf(t, sizeof t, "%s/%s", dir, names[i]);
        FILE *f = fopen(t, "w");
        assert_non_null(f);
        fclose(f);
    }
    nb_err err;
    assert_int_equal(nb_write_atomic(p, "ckpt", 4, &err), 0);
    int keep[5] = {0, 0, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        snprintf(t, sizeof t, "%s/%s", dir, names[i]);
        assert_int_equal(access(t, F_OK) == 0, keep[i]);
    }
    /* a whole directory: the other file's dead temporary goes, the live one stays */
    int removed = -1;
    nb_file_clean_temps(dir, NULL, &removed);
    assert_int_equal(removed, 1);
    snprintf(t, sizeof t, "%s/%s", dir, live);
    assert_int_equal(access(t, F_OK), 0);
    unlink(t);
    snprintf(t, sizeof t, "%s/notes.tmp", dir);
    unlink(t);
    nb_file_clean_temps("/nonexistent-nb-dir", NULL, &removed); /* no directory: nothing */
    assert_int_equal(removed, 0);
}

/* A writer killed in the middle of its write (the test hook): the old file stays whole, the
 * temporary holds a part of the new one, and the next writer removes it. */
static void test_killed_writer(void **state) {
    char p[128];
    snprintf(p, sizeof p, "%s/model", dir);
    nb_err err;
    size_t big = 1 << 18;
    char *old = malloc(big), *new = malloc(big);
    assert_non_null(old);
    assert_non_null(new);
    memset(old, 'o', big);
    memset(new, 'n', big);
    assert_int_equal(nb_write_atomic(p, old, big, &err), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        setenv("NORMBENCH_FAULT_KILL_WRITE", "model:2", 1);
        nb_write_atomic(p, new, big, &err); /* the first write of it: not killed */
        nb_write_atomic(p, old, big, &err); /* the second: killed */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    size_t n;
    char *b = slurp(p, &n);
    assert_non_null(b);
    assert_int_equal(n, big);
    assert_memory_equal(b, new, big); /* the first write, whole; never a mix */
    free(b);
    char t[256];
    snprintf(t, sizeof t, "%s/.model.tmp.normbench.%ld", dir, (long)child);
    b = slurp(t, &n);
    assert_non_null(b);
    assert_int_equal(n, big / 2);
    assert_memory_equal(b, old, big / 2); /* the killed write's first half, never in place */
    free(b);
    assert_int_equal(nb_write_atomic(p, old, big, &err), 0);
    assert_int_equal(access(t, F_OK), -1); /* removed by the next writer */
    b = slurp(p, &n);
    assert_memory_equal(b, old, big);
    free(b);
    free(old);
    free(new);
}

static void test_read(void **state) {
    char p[128];
    snprintf(p, sizeof p, "%s/r", dir);
    nb_err err;
    assert_int_equal(nb_write_atomic(p, "0123456789", 10, &err), 0);
    char *b = (char *)1;
    size_t n = 99;
    assert_int_equal(nb_read_file(p, 10, NB_READ_REGULAR, &b, &n, &err), 0);
    assert_int_equal(n, 10);
    assert_string_equal(b, "0123456789");
    free(b);
    assert_int_equal(nb_read_file(p, 9, 0, &b, &n, &err), -1);
    assert_int_equal(errno, EFBIG);
    assert_null(b);
    assert_non_null(strstr(err.msg, "is larger than 9 bytes"));
    /* empty */
    assert_int_equal(nb_write_atomic(p, "", 0, &err), 0);
    assert_int_equal(nb_read_file(p, 0, 0, &b, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_string_equal(b, "");
    free(b);
    /* missing, a directory, a link with NOFOLLOW */
    assert_int_equal(nb_read_file("/nonexistent-nb", 10, 0, &b, NULL, &err), -1);
    assert_int_equal(errno, ENOENT);
    assert_non_null(strstr(err.msg, "cannot open '/nonexistent-nb'"));
    assert_int_equal(nb_read_file(dir, 10, 0, &b, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "is not a regular file"));
    char l[160];
    snprintf(l, sizeof l, "%s/link", dir);
    assert_int_equal(symlink(p, l), 0);
    assert_int_equal(nb_read_file(l, 10, 0, &b, NULL, &err), 0);
    free(b);
    assert_int_equal(nb_read_file(l, 10, NB_READ_NOFOLLOW, &b, NULL, &err), -1);
    assert_int_equal(errno, ELOOP);
    unlink(l);
    /* a pipe: read to the cap and refused past it; NB_READ_REGULAR refuses it unread */
    for (int over = 0; over < 2; over++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t child = fork();
        if (child == 0) {
            close(fds[0]);
            char chunk[4096];
            memset(chunk, 'p', sizeof chunk);
            for (int i = 0; i < 64 + over; i++)
                if (write(fds[1], chunk, sizeof chunk) < 0) break;
            _exit(0);
        }
        close(fds[1]);
        char dev[64];
        snprintf(dev, sizeof dev, "/proc/self/fd/%d", fds[0]);
        int rc = nb_read_file(dev, 64 * 4096, 0, &b, &n, &err);
        close(fds[0]);
        waitpid(child, NULL, 0);
        if (over) {
            assert_int_equal(rc, -1);
            assert_int_equal(errno, EFBIG);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(n, 64 * 4096);
            free(b);
        }
    }
    assert_int_equal(nb_read_file("/dev/null", 10, NB_READ_REGULAR, &b, NULL, &err), -1);
    assert_int_equal(errno, EINVAL);
    unlink(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_and_replace),
        cmocka_unit_test(test_temporaries),
        cmocka_unit_test(test_killed_writer),
        cmocka_unit_test(test_read),
    };
    return cmocka_run_group_tests_name("file", tests, setup, teardown);
}
