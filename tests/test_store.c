/* tests/test_store.c — the results store: schema and migrations, NaN/Inf metrics, statuses,
 * crashed runs, two processes at once, error messages, and the report aggregation.
 *
 * Run with "--fixture FILE" it writes the fixture store the CLI tests (tests/cli/20-results.t)
 * use, and exits. */
#include "tests/testutil.h"

#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results/proc.h"
#include "results/provenance.h"
#include "results/query.h"
#include "results/store.h"

static char tmpdir[256];

static void path_in_tmp(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", tmpdir, name);
}

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nb-store-test.XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    return 0;
}

static int teardown(void **state) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", tmpdir, tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        nb_err_clear(&err);                                                                        \
        if ((call) != 0) {                                                                         \
            print_error("%s failed: %s (hint: %s)\n", #call, err.msg, err.hint);                   \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static int64_t add_run(nb_store *s, const char *task, const char *dataset, const char *norm,
                       int64_t seed) {
    nb_err err;
    int64_t id = 0;
    /* the compute description as cmd/ hands it to the store (cmd/compute.c) */
    nb_run_spec spec = {
        task, dataset,         norm,
        seed, "{\"lr\": 0.1}", "{\"openblas_config\":\"test fixture\",\"openblas_num_threads\":1}"};
    CHECK_OK(nb_run_create(s, &spec, &id, &err));
    return id;
}

static void add_metric(nb_store *s, int64_t run, const char *name, int64_t step, double v) {
    nb_err err;
    nb_metric m = {name, step, (double)step * 0.01, v};
    CHECK_OK(nb_metrics_add(s, run, &m, 1, &err));
}

static void finish(nb_store *s, int64_t run, const char *status) {
    nb_err err;
    CHECK_OK(nb_run_finish(s, run, status, NULL, &err));
}

/* A run of the given group that finished with these final values (an earlier, worse value at
 * step 100 checks that the final one is taken). */
static void finished_run(nb_store *s, const char *norm, int64_t seed, double err_v, double nll,
                         double ms) {
    int64_t id = add_run(s, "mnist", "synthetic", norm, seed);
    add_metric(s, id, "test_error", 100, 0.9);
    add_metric(s, id, "test_error", 200, err_v);
    if (!isnan(nll)) add_metric(s, id, "test_nll", 200, nll);
    add_metric(s, id, "ms_per_step", 200, ms);
    add_metric(s, id, "train_loss", 200, 1.0);
    finish(s, id, "finished");
}

/* Creates a run in a child process that then dies without finishing it. */
static void crashed_run(const char *path, const char *norm) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        nb_err err;
        nb_store *s = NULL;
        int64_t id;
        nb_run_spec spec = {"mnist", "synthetic", norm, 9, NULL};
        if (nb_store_open(&s, path, 0, &err) || nb_run_create(s, &spec, &id, &err)) _exit(1);
        nb_metric m = {"train_loss", 10, 0.5, 2.0};
        nb_metrics_add(s, id, &m, 1, &err);
        _exit(0); /* no finish, no close: a crash */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The fixture: mnist/synthetic with
 *   layer: 3 finished (test_error .10 .12 .14, test_nll .3 .4 .5, ms 10 11 12) + 1 diverged
 *   rms:   3 finished (test_error .11 .13 .15, ms 8 9 10) + 1 interrupted + 1 crashed
 *   none:  1 finished (test_error .20, ms 5)
 * and order / a dataset name that needs CSV quoting: 1 finished layer run. */
static void build_fixture(const char *path) {
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    finished_run(s, "layer", 1, 0.10, 0.3, 10);
    finished_run(s, "layer", 2, 0.12, 0.4, 11);
    finished_run(s, "layer", 3, 0.14, 0.5, 12);
    finished_run(s, "rms", 1, 0.11, NAN, 8);
    finished_run(s, "rms", 2, 0.13, NAN, 9);
    finished_run(s, "rms", 3, 0.15, NAN, 10);
    finished_run(s, "none", 1, 0.20, NAN, 5);
    int64_t d = add_run(s, "mnist", "synthetic", "layer", 4);
    add_metric(s, d, "train_loss", 50, NAN);
    add_metric(s, d, "test_error", 50, NAN);
    add_metric(s, d, "ms_per_step", 50, 1000);
    CHECK_OK(nb_run_finish(s, d, "diverged", "loss became nan at step 50", &err));
    int64_t it = add_run(s, "mnist", "synthetic", "rms", 4);
    add_metric(s, it, "test_error", 100, 0.9);
    add_metric(s, it, "ms_per_step", 100, 1);
    finish(s, it, "interrupted");
    int64_t o = add_run(s, "order", "syn,\"q\"", "layer", 1);
    add_metric(s, o, "test_r1", 10, 0.25);
    add_metric(s, o, "ms_per_step", 10, 3);
    CHECK_OK(nb_run_param(s, o, "lr", "0.001", &err));
    CHECK_OK(nb_run_tag(s, o, "note", "quote \" and\nnewline", &err));
    finish(s, o, "finished");
    nb_store_close(s);
    crashed_run(path, "rms");
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_create_migrate_reopen(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "a.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    int64_t id = add_run(s, "mnist", "synthetic", "rms", 7);
    assert_true(id > 0);
    CHECK_OK(nb_run_param(s, id, "batch", "128", &err));
    CHECK_OK(nb_run_param(s, id, "batch", "4", &err)); /* replaces */
    CHECK_OK(nb_run_tag(s, id, "why", "smoke", &err));
    nb_store_close(s);

    /* the pragmas are in force and the schema version is set */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), nb_store_schema_version());
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    /* STRICT: a type slip is refused */
    assert_int_not_equal(
        sqlite3_exec(db, "INSERT INTO metrics VALUES (1, 'x', 'abc', 0, 1, 0)", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    /* reopen: nothing migrates again, the data is there */
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_run_detail *d = NULL;
    CHECK_OK(nb_run_get(s, id, &d, &err));
    assert_string_equal(d->info.norm, "rms");
    assert_int_equal(d->info.seed, 7);
    assert_string_equal(d->info.status, "running");
    assert_int_equal(d->info.pid, getpid());
    assert_int_equal(d->nparams, 1);
    assert_string_equal(d->params[0].value, "4");
    assert_int_equal(d->ntags, 1);
    assert_non_null(strstr(d->provenance, "\"openblas_config\""));
    assert_non_null(strstr(d->provenance, "\"git_rev\""));
    assert_non_null(strstr(d->config, "0.1"));
    nb_run_detail_free(d);

    /* unknown run id */
    assert_int_equal(nb_run_get(s, 12345, &d, &err), -1);
    assert_non_null(strstr(err.msg, "12345"));
    nb_store_close(s);
}

static void test_missing_store(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "missing.db");
    nb_err err;
    nb_store *s = NULL;
    assert_int_equal(nb_store_open(&s, path, 1, &err), -1);
    assert_null(s);
    assert_non_null(strstr(err.msg, "no results store at"));
    assert_non_null(strstr(err.msg, path));
    assert_true(err.hint[0]);
    assert_int_equal(access(path, F_OK), -1); /* a reader never creates it */
}

static void test_newer_version_refused(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "new.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    nb_store_close(s);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", nb_store_schema_version() + 1);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(nb_store_open(&s, path, 0, &err), -1);
    assert_non_null(strstr(err.msg, "newer"));
    assert_non_null(strstr(err.msg, path));
    assert_true(err.hint[0]);
    assert_int_equal(nb_store_open(&s, path, 1, &err), -1);
}

static void test_nan_inf_roundtrip(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "nan.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    int64_t id = add_run(s, "mnist", "synthetic", "none", 1);
    nb_metric m[5] = {{"loss", 1, 0.1, 1.5},
                      {"loss", 2, 0.2, NAN},
                      {"loss", 3, 0.3, INFINITY},
                      {"loss", 4, 0.4, -INFINITY},
                      {"loss", 5, 0.5, -0.0}};
    CHECK_OK(nb_metrics_add(s, id, m, 5, &err));
    nb_run_detail *d = NULL;
    CHECK_OK(nb_run_get(s, id, &d, &err));
    assert_int_equal(d->nseries, 1);
    assert_int_equal(d->series[0].n, 5);
    const double *v = d->series[0].value;
    assert_true(v[0] == 1.5);
    assert_true(isnan(v[1]));
    assert_true(isinf(v[2]) && v[2] > 0);
    assert_true(isinf(v[3]) && v[3] < 0);
    assert_true(v[4] == 0.0);
    assert_int_equal(d->series[0].step[4], 5);
    nb_run_detail_free(d);
    nb_store_close(s);

    /* on disk: the kinds tell them apart, the value is NULL for all three */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(kind || ':' || ifnull(value, 'NULL'), "
                                        "' ') FROM (SELECT * FROM metrics ORDER BY step)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0),
                        "0:1.5 1:NULL 2:NULL 3:NULL 0:0.0");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_statuses(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "st.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    const char *sts[] = {"finished", "failed", "interrupted", "diverged"};
    for (int i = 0; i < 4; i++) {
        int64_t id = add_run(s, "mnist", "synthetic", "layer", i);
        CHECK_OK(nb_run_finish(s, id, sts[i], i == 1 ? "out of memory" : NULL, &err));
    }
    int64_t live = add_run(s, "mnist", "synthetic", "layer", 9);
    assert_int_equal(nb_run_finish(s, live, "done", NULL, &err), -1);
    assert_non_null(strstr(err.msg, "'done'"));
    assert_int_equal(nb_run_finish(s, 999, "finished", NULL, &err), -1);
    nb_run_info *v = NULL;
    int n = 0;
    CHECK_OK(nb_runs_list(s, &v, &n, &err));
    assert_int_equal(n, 5);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(v[i].status, sts[i]);
        assert_false(isnan(v[i].finished));
        assert_true(v[i].duration >= 0);
    }
    assert_string_equal(v[1].message, "out of memory");
    assert_string_equal(v[4].status, "running"); /* this process is alive */
    assert_true(isnan(v[4].finished));
    nb_runs_free(v, n);
    nb_store_close(s);
}

static void test_crashed(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "crash.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    nb_store_close(s);
    crashed_run(path, "rms");
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_run_info *v = NULL;
    int n = 0;
    CHECK_OK(nb_runs_list(s, &v, &n, &err));
    assert_int_equal(n, 1);
    assert_string_equal(v[0].status, "crashed");
    assert_close(v[0].duration, 0.5, 1e-12, 0); /* the wall time of its last metric */
    nb_runs_free(v, n);
    nb_run_detail *d = NULL;
    CHECK_OK(nb_run_get(s, 1, &d, &err));
    assert_string_equal(d->info.status, "crashed");
    assert_int_equal(d->nseries, 1); /* what it recorded stays */
    nb_run_detail_free(d);
    nb_report *r = NULL;
    CHECK_OK(nb_report_build(s, NULL, NULL, &r, &err));
    assert_int_equal(r->n, 1);
    assert_int_equal(r->groups[0].crashed, 1);
    assert_int_equal(r->groups[0].finished, 0);
    nb_report_free(r);
    nb_store_close(s);
    /* a run on another host is never declared crashed from here */
    assert_string_equal(nb_effective_status("running", 1, 0, "some-other-host.invalid"), "running");
}

static void test_two_processes(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "two.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    build_fixture(path);
    nb_store_close(s);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        nb_store *w = NULL;
        int64_t id;
        nb_run_spec spec = {"mnist", "synthetic", "prms", 1, NULL};
        if (nb_store_open(&w, path, 0, &err) || nb_run_create(w, &spec, &id, &err)) _exit(100);
        for (int i = 0; i < 300; i++) {
            nb_metric m[20];
            for (int k = 0; k < 20; k++)
                m[k] = (nb_metric){k % 2 ? "train_loss" : "test_error", i * 20 + k, i, 0.5};
            if (nb_metrics_add(w, id, m, 20, &err)) {
                fprintf(stderr, "writer: %s\n", err.msg);
                bad++;
            }
        }
        if (nb_run_finish(w, id, "finished", NULL, &err)) bad++;
        nb_store_close(w);
        _exit(bad > 99 ? 99 : bad);
    }
    int reads = 0, bad = 0, st = 0;
    for (;;) {
        pid_t done = waitpid(pid, &st, WNOHANG);
        nb_store *r = NULL;
        nb_report *rep = NULL;
        if (nb_store_open(&r, path, 1, &err) || nb_report_build(r, NULL, NULL, &rep, &err)) {
            print_error("reader: %s\n", err.msg);
            bad++;
        }
        nb_report_free(rep);
        nb_store_close(r);
        reads++;
        if (done == pid) break;
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(bad, 0);
    assert_true(reads >= 1);
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_run_info *v = NULL;
    int n = 0;
    CHECK_OK(nb_runs_list(s, &v, &n, &err));
    assert_string_equal(v[n - 1].norm, "prms");
    nb_run_detail *d = NULL;
    CHECK_OK(nb_run_get(s, v[n - 1].id, &d, &err));
    nb_runs_free(v, n);
    assert_string_equal(d->info.status, "finished");
    assert_int_equal(d->series[0].n + d->series[1].n, 6000);
    nb_run_detail_free(d);
    nb_store_close(s);
}

static void test_unwritable_directory(void **state) {
    char dir[512], path[600];
    nb_err err;
    nb_store *s = NULL;
    if (geteuid() == 0) {
        /* root writes anywhere chmod allows; /proc refuses new files even to root */
        snprintf(path, sizeof path, "/proc/normbench-test.db");
    } else {
        path_in_tmp(dir, sizeof dir, "ro");
        assert_int_equal(mkdir(dir, 0555), 0);
        snprintf(path, sizeof path, "%s/x.db", dir);
    }
    assert_int_equal(nb_store_open(&s, path, 0, &err), -1);
    assert_null(s);
    assert_non_null(strstr(err.msg, path));
    assert_true(err.hint[0]);
    assert_non_null(strstr(err.hint, "--db"));

    /* a directory that does not exist */
    path_in_tmp(dir, sizeof dir, "no/such/dir/x.db");
    assert_int_equal(nb_store_open(&s, dir, 0, &err), -1);
    assert_non_null(strstr(err.msg, "does not exist"));
}

static void test_not_a_database(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "notes.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 100; i++)
        fputs("these are not the tables you are looking for\n", f);
    fclose(f);
    nb_err err;
    nb_store *s = NULL;
    assert_int_equal(nb_store_open(&s, path, 1, &err), -1);
    assert_non_null(strstr(err.msg, "not a normbench results store"));
    assert_non_null(strstr(err.msg, path));
    assert_true(err.hint[0]);

    /* an SQLite database of something else is not taken over either */
    path_in_tmp(path, sizeof path, "other.db");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(nb_store_open(&s, path, 0, &err), -1);
    assert_non_null(strstr(err.msg, "not a normbench results store"));
}

static void test_locked_store(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "locked.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    int64_t id = add_run(s, "mnist", "synthetic", "rms", 1);
    /* another connection holds the write lock longer than the busy timeout allows here */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    nb_store_set_busy_timeout(s, 50);
    nb_metric m = {"x", 1, 0, 1};
    assert_int_equal(nb_metrics_add(s, id, &m, 1, &err), -1);
    assert_non_null(strstr(err.msg, "locked"));
    assert_non_null(strstr(err.hint, "another process"));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    CHECK_OK(nb_metrics_add(s, id, &m, 1, &err)); /* and works once it is free */
    nb_store_close(s);
}

static const nb_report_group *group(const nb_report *r, const char *norm) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->groups[i].norm, norm) == 0) return &r->groups[i];
    fail_msg("no group for norm '%s'", norm);
    return NULL;
}

static const nb_stat *metric(const nb_report_group *g, const char *name) {
    for (int i = 0; i < g->nmetrics; i++)
        if (strcmp(g->metrics[i].name, name) == 0) return &g->metrics[i].stat;
    fail_msg("no metric '%s' for norm '%s'", name, g->norm);
    return NULL;
}

/* An order of norms as a command would give it (report's is the norm table's). */
static int fixture_norm_rank(const char *norm) {
    static const char *const order[] = {"none", "layer", "rms"};
    for (int i = 0; i < 3; i++)
        if (strcmp(norm, order[i]) == 0) return i;
    return 3;
}
static void test_report_aggregation(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "fixture.db");
    build_fixture(path);
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_report *r = NULL;
    CHECK_OK(nb_report_build(s, "mnist", NULL, &r, &err));
    assert_int_equal(r->n, 3);
    /* by name, until the command gives its order */
    assert_string_equal(r->groups[0].norm, "layer");
    assert_string_equal(r->groups[1].norm, "none");
    assert_string_equal(r->groups[2].norm, "rms");
    /* the norm table's order, as report gives it */
    nb_report_sort(r, fixture_norm_rank);
    assert_string_equal(r->groups[0].norm, "none");
    assert_string_equal(r->groups[1].norm, "layer");
    assert_string_equal(r->groups[2].norm, "rms");

    const nb_report_group *l = group(r, "layer"), *m = group(r, "rms"), *z = group(r, "none");
    /* layer: the diverged run is counted, not averaged (its ms_per_step is 1000) */
    assert_int_equal(l->finished, 3);
    assert_int_equal(l->diverged, 1);
    assert_int_equal(l->failed + l->interrupted + l->crashed + l->running, 0);
    assert_int_equal(l->nmetrics, 2);
    assert_int_equal(metric(l, "test_error")->n, 3);
    assert_close(metric(l, "test_error")->mean, 0.12, 1e-12, 0);
    assert_close(metric(l, "test_error")->std, 0.02, 1e-12, 0);
    assert_close(metric(l, "test_nll")->mean, 0.4, 1e-12, 0);
    assert_close(metric(l, "test_nll")->std, 0.1, 1e-12, 0);
    assert_int_equal(l->ms_per_step.n, 3);
    assert_close(l->ms_per_step.mean, 11, 1e-12, 0);
    assert_close(l->ms_per_step.std, 1, 1e-12, 0);
    assert_false(l->has_speed);

    /* rms: interrupted and crashed runs counted, not averaged */
    assert_int_equal(m->finished, 3);
    assert_int_equal(m->interrupted, 1);
    assert_int_equal(m->crashed, 1);
    assert_int_equal(m->diverged, 0);
    assert_int_equal(m->nmetrics, 1);
    assert_close(metric(m, "test_error")->mean, 0.13, 1e-12, 0);
    assert_close(metric(m, "test_error")->std, 0.02, 1e-12, 0);
    assert_close(m->ms_per_step.mean, 9, 1e-12, 0);
    assert_close(m->ms_per_step.std, 1, 1e-12, 0);
    assert_true(m->has_speed);
    double ratio = 11.0 / 9.0;
    assert_close(m->speed, ratio, 1e-12, 0);
    assert_close(m->speed_std, ratio * sqrt(1.0 / 121 + 1.0 / 81), 1e-12, 0);
    char sentence[160];
    assert_string_equal(nb_speed_sentence(m, sentence, sizeof sentence),
                        "rms ran 1.22 ± 0.18× faster per step than layer");

    /* one run: std 0, n 1 */
    assert_int_equal(metric(z, "test_error")->n, 1);
    assert_close(metric(z, "test_error")->mean, 0.2, 1e-12, 0);
    assert_close(metric(z, "test_error")->std, 0, 0, 0);
    assert_close(z->speed, 11.0 / 5.0, 1e-12, 0);
    nb_report_free(r);

    /* all tasks: order's group is there too */
    CHECK_OK(nb_report_build(s, NULL, NULL, &r, &err));
    assert_int_equal(r->n, 4);
    assert_string_equal(r->groups[3].task, "order");
    nb_report_free(r);
    nb_store_close(s);

    /* a slower norm is phrased with the inverse ratio */
    nb_report_group g = {.norm = "batch", .has_speed = 1, .speed = 0.5, .speed_std = 0.05};
    assert_string_equal(nb_speed_sentence(&g, sentence, sizeof sentence),
                        "batch ran 2.00 ± 0.20× slower per step than layer");
}

/* ---- what a database must be before anything changes it (issue 12) ---------------------- */

/* The whole file, or NULL when it does not exist; *n its size. */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n + 4096 > cap) {
            cap = 2 * cap + 4096;
            b = realloc(b, cap);
            assert_non_null(b);
        }
        size_t got = fread(b + *n, 1, 4096, f);
        *n += got;
        if (got == 0) break;
    }
    fclose(f);
    return b;
}

static int exists_with(const char *path, const char *suffix) {
    char p[1024];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return access(p, F_OK) == 0;
}

static void sql(const char *path, const char *text) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db, text, NULL, NULL, NULL);
    if (rc != SQLITE_OK) fail_msg("%s: %s", text, sqlite3_errmsg(db));
    sqlite3_close(db);
}

static long long app_id(const char *path) {
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* A foreign SQLite database (rollback or WAL journal, or another program's application_id on
 * normbench's table names) is refused by a writing and a reading open alike, and stays byte for
 * byte as it was, with no -wal, -shm or -journal beside it. */
static void test_foreign_database_unchanged(void **state) {
    static const char *const kinds[] = {
        "CREATE TABLE t(x); INSERT INTO t VALUES (1)",
        "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)",
        "PRAGMA application_id = 305419896; CREATE TABLE runs(x); CREATE TABLE params(x); "
        "CREATE TABLE metrics(x); CREATE TABLE tags(x); PRAGMA user_version = 1",
    };
    for (int k = 0; k < 3; k++) {
        char path[512], name[32];
        snprintf(name, sizeof name, "foreign%d.db", k);
        path_in_tmp(path, sizeof path, name);
        sql(path, kinds[k]);
        size_t n0, n1;
        unsigned char *before = slurp(path, &n0);
        assert_non_null(before);
        for (int ro = 0; ro < 2; ro++) {
            nb_err err;
            nb_store *s = NULL;
            assert_int_equal(nb_store_open(&s, path, ro, &err), -1);
            assert_null(s);
            assert_non_null(strstr(err.msg, "not a normbench results store"));
            unsigned char *after = slurp(path, &n1);
            assert_non_null(after);
            assert_int_equal(n1, n0);
            assert_memory_equal(after, before, n0);
            free(after);
            assert_false(exists_with(path, "-wal"));
            assert_false(exists_with(path, "-shm"));
            assert_false(exists_with(path, "-journal"));
        }
        free(before);
    }
}

/* A new store carries normbench's application_id; a store made before it (id 0, normbench's
 * tables) is read as it is by a read-only open and marked by the next writing one. */
static void test_application_id(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "mark.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    add_run(s, "mnist", "synthetic", "rms", 1);
    nb_store_close(s);
    assert_int_equal(app_id(path), 0x6e6f726d);
    sql(path, "PRAGMA application_id = 0");
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_run_info *v = NULL;
    int n = 0;
    CHECK_OK(nb_runs_list(s, &v, &n, &err));
    assert_int_equal(n, 1);
    nb_runs_free(v, n);
    nb_store_close(s);
    assert_int_equal(app_id(path), 0);
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    nb_store_close(s);
    assert_int_equal(app_id(path), 0x6e6f726d);
}

/* A read-only open cannot write: a write through it fails, the database file is not changed by
 * reading, and nothing is left beside it. */
static void test_readonly_open(void **state) {
    char path[512];
    path_in_tmp(path, sizeof path, "ro.db");
    nb_err err;
    nb_store *s = NULL;
    CHECK_OK(nb_store_open(&s, path, 0, &err));
    int64_t id = add_run(s, "mnist", "synthetic", "rms", 1);
    add_metric(s, id, "train_loss", 1, 2.5);
    nb_store_close(s);
    size_t n0, n1;
    unsigned char *before = slurp(path, &n0);
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_run_detail *d = NULL;
    CHECK_OK(nb_run_get(s, id, &d, &err));
    assert_int_equal(d->nseries, 1);
    nb_run_detail_free(d);
    nb_run_spec spec = {"mnist", "synthetic", "rms", 2, "{}"};
    int64_t id2 = 0;
    assert_int_equal(nb_run_create(s, &spec, &id2, &err), -1);
    assert_non_null(strstr(err.msg, "readonly"));
    nb_store_close(s);
    assert_false(exists_with(path, "-wal")); /* nothing left beside it */
    assert_false(exists_with(path, "-shm"));
    unsigned char *after = slurp(path, &n1);
    assert_int_equal(n1, n0);
    assert_memory_equal(after, before, n0);
    free(before);
    free(after);

    if (geteuid() != 0) { /* modes bind: a read-only directory and file are still readable */
        char dir[512], p2[600];
        path_in_tmp(dir, sizeof dir, "rodir");
        assert_int_equal(mkdir(dir, 0755), 0);
        snprintf(p2, sizeof p2, "%s/s.db", dir);
        assert_int_equal(rename(path, p2), 0);
        assert_int_equal(chmod(p2, 0444), 0);
        assert_int_equal(chmod(dir, 0555), 0);
        CHECK_OK(nb_store_open(&s, p2, 1, &err));
        CHECK_OK(nb_run_get(s, id, &d, &err));
        nb_run_detail_free(d);
        nb_store_close(s);
        assert_false(exists_with(p2, "-shm"));
        assert_int_equal(nb_store_open(&s, p2, 0, &err), -1);
        assert_non_null(strstr(err.msg, "read-only"));
    }
}

/* --db must be a regular file: a link to /dev/null, a named pipe (opening it would block), a
 * link to nothing are refused before SQLite sees them; a link to a store is followed. */
static void test_not_a_regular_file(void **state) {
    char path[512], target[512];
    nb_err err;
    nb_store *s = NULL;
    int journal_before = access("/dev/null-journal", F_OK) == 0;
    path_in_tmp(path, sizeof path, "null.db");
    assert_int_equal(symlink("/dev/null", path), 0);
    for (int ro = 0; ro < 2; ro++) {
        assert_int_equal(nb_store_open(&s, path, ro, &err), -1);
        assert_non_null(strstr(err.msg, "symbolic link to a character device"));
        assert_true(err.hint[0]);
    }
    if (!journal_before) assert_int_equal(access("/dev/null-journal", F_OK), -1);

    path_in_tmp(path, sizeof path, "pipe.db");
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(nb_store_open(&s, path, 0, &err), -1);
    assert_non_null(strstr(err.msg, "named pipe"));

    path_in_tmp(path, sizeof path, "dangling.db");
    path_in_tmp(target, sizeof target, "nowhere.db");
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(nb_store_open(&s, path, 0, &err), -1);
    assert_non_null(strstr(err.msg, "leads nowhere"));
    assert_int_equal(access(target, F_OK), -1);

    path_in_tmp(target, sizeof target, "real.db");
    CHECK_OK(nb_store_open(&s, target, 0, &err));
    nb_store_close(s);
    path_in_tmp(path, sizeof path, "link.db");
    assert_int_equal(symlink(target, path), 0);
    CHECK_OK(nb_store_open(&s, path, 1, &err));
    nb_store_close(s);
}

/* Process identity: a pid with another start time is not the recorded process. */
static void test_proc_identity(void **state) {
    char host[256];
    nb_hostname(host, sizeof host);
    int64_t me = (int64_t)getpid(), start = nb_proc_start_time(me);
    assert_true(start > 0);
    assert_int_equal(nb_proc_alive(host, me, start), 1);
    assert_int_equal(nb_proc_alive(host, me, 0), 1);         /* not recorded: pid only */
    assert_int_equal(nb_proc_alive(host, me, start + 1), 0); /* a reused pid */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    assert_int_equal(nb_proc_alive(host, child, 0), 0);                      /* gone */
    assert_int_equal(nb_proc_alive("some-other-host.invalid", child, 0), 1); /* cannot tell */
    assert_int_equal(nb_proc_start_time(child), -1);
}

/* Every store has its own id; a resume claims the run, refused while a live process holds it;
 * a sweep job is claimed once. */
static void test_store_id_and_claims(void **state) {
    char a[512], b[512], ida[40], idb[40];
    path_in_tmp(a, sizeof a, "ida.db");
    path_in_tmp(b, sizeof b, "idb.db");
    nb_err err;
    nb_store *s = NULL, *t = NULL;
    CHECK_OK(nb_store_open(&s, a, 0, &err));
    CHECK_OK(nb_store_open(&t, b, 0, &err));
    CHECK_OK(nb_store_id(s, ida, sizeof ida, &err));
    CHECK_OK(nb_store_id(t, idb, sizeof idb, &err));
    assert_int_equal(strlen(ida), 32);
    assert_string_not_equal(ida, idb);
    nb_store_close(t);

    /* the run is held by this (live) process: a resume is refused, naming it */
    int64_t id = add_run(s, "mnist", "synthetic", "rms", 1);
    add_metric(s, id, "train_loss", 10, 1.0);
    add_metric(s, id, "train_loss", 20, 0.5);
    nb_err_clear(&err);
    assert_int_equal(nb_run_resume(s, id, 10, &err), -1);
    assert_non_null(strstr(err.msg, "is running in process"));
    /* once its process is gone (a pid of a process that ended), it can be resumed */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE runs SET pid = %lld, pid_start = 1", (long long)child);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(a, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_OK(nb_run_resume(s, id, 10, &err));
    nb_run_detail *d = NULL;
    CHECK_OK(nb_run_get(s, id, &d, &err));
    assert_int_equal(d->info.pid, (int64_t)getpid());
    assert_int_equal(d->info.pid_start, nb_proc_start_time(getpid()));
    assert_int_equal(d->nseries, 1);
    assert_int_equal(d->series[0].n, 1); /* the metric after step 10 deleted */
    assert_string_equal(d->config, "{\"lr\": 0.1}");
    nb_run_detail_free(d);
    CHECK_OK(nb_run_finish(s, id, "finished", NULL, &err));
    nb_err_clear(&err);
    assert_int_equal(nb_run_resume(s, id, 10, &err), -1);
    assert_non_null(strstr(err.msg, "finished already"));

    /* sweep jobs */
    nb_job_state js;
    CHECK_OK(nb_job_claim(s, "job-a", 0, &js, &err));
    assert_int_equal(js.state, NB_JOB_FREE);
    assert_int_equal(js.run, 0);
    CHECK_OK(nb_job_claim(s, "job-a", 1, &js, &err));
    assert_int_equal(js.state, NB_JOB_CLAIMED);
    CHECK_OK(nb_job_claim(s, "job-a", 1, &js, &err)); /* its own claim again */
    assert_int_equal(js.state, NB_JOB_CLAIMED);
    /* another process sees it held */
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        nb_store *c = NULL;
        nb_job_state cj;
        int ok = nb_store_open(&c, a, 0, &err) == 0 &&
                 nb_job_claim(c, "job-a", 1, &cj, &err) == 0 && cj.state == NB_JOB_BUSY &&
                 cj.pid == (int64_t)getppid();
        nb_store_close(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(nb_job_release(s, "job-a", &err));
    /* a job with a finished run is done */
    int64_t r = add_run(s, "mnist", "synthetic", "layer", 1);
    CHECK_OK(nb_run_tag(s, r, "sweep", "job-b", &err));
    CHECK_OK(nb_run_finish(s, r, "finished", NULL, &err));
    CHECK_OK(nb_job_claim(s, "job-b", 1, &js, &err));
    assert_int_equal(js.state, NB_JOB_DONE);
    assert_int_equal(js.run, r);
    nb_store_close(s);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--fixture") == 0) {
        build_fixture(argv[2]);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_migrate_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nan_inf_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crashed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_aggregation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_database_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_application_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readonly_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_regular_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_id_and_claims, setup, teardown),
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
