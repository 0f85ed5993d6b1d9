/* results/store.c — opening, migrating and writing the SQLite results store (results/store.h).
 */
#include "results/store_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "results/proc.h"
#include "results/provenance.h"

#define BUSY_TIMEOUT_MS 10000

/* Schema steps: migrations[k] takes a store from user_version k to k + 1. Append only. */
static const char *const migrations[] = {
    /* 1: the tracking tables */
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY,"
    "  task TEXT NOT NULL,"
    "  dataset TEXT NOT NULL,"
    "  norm TEXT NOT NULL,"
    "  seed INTEGER NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN"
    "    ('running', 'finished', 'failed', 'interrupted', 'diverged')),"
    "  message TEXT,"
    "  started REAL NOT NULL," /* seconds since the Unix epoch */
    "  finished REAL,"
    "  pid INTEGER NOT NULL,"
    "  host TEXT NOT NULL,"
    "  config TEXT NOT NULL CHECK (json_valid(config)),"
    "  provenance TEXT NOT NULL CHECK (json_valid(provenance))"
    ") STRICT;"
    "CREATE INDEX runs_group ON runs(task, dataset, norm);"
    "CREATE TABLE params ("
    "  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  key TEXT NOT NULL,"
    "  value TEXT NOT NULL,"
    "  PRIMARY KEY (run, key)"
    ") STRICT;"
    "CREATE TABLE metrics ("
    "  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  step INTEGER NOT NULL,"
    "  wall REAL NOT NULL,"
    /* kind: 0 finite (value set), 1 NaN, 2 +Inf, 3 -Inf (value NULL): SQLite stores a bound
     * NaN as NULL, so the kind keeps a diverged value distinguishable from a missing one. */
    "  value REAL,"
    "  kind INTEGER NOT NULL DEFAULT 0 CHECK (kind BETWEEN 0 AND 3),"
    "  CHECK ((kind = 0) = (value IS NOT NULL))"
    ") STRICT;"
    "CREATE INDEX metrics_run_name_step ON metrics(run, name, step);"
    "CREATE TABLE tags ("
    "  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  key TEXT NOT NULL,"
    "  value TEXT NOT NULL,"
    "  PRIMARY KEY (run, key)"
    ") STRICT;",
    /* 2: who holds what. The store's own random id (checkpoints name it: a checkpoint from
     * another store, or from a deleted one, is refused); the start time of the process that
     * runs a run, next to its pid, so that a reused pid is not taken for it; and the claims of
     * sweep jobs (a job is the text of its runs' "sweep" tag). */
    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL"
    ") STRICT;"
    "INSERT INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));"
    "ALTER TABLE runs ADD COLUMN pid_start INTEGER;" /* ticks since boot, NULL: not recorded */
    "CREATE TABLE claims ("
    "  job TEXT PRIMARY KEY,"
    "  host TEXT NOT NULL,"
    "  pid INTEGER NOT NULL,"
    "  pid_start INTEGER,"
    "  claimed REAL NOT NULL"
    ") STRICT;",
};

int nb_store_schema_version(void) {
    return (int)(sizeof migrations / sizeof migrations[0]);
}

double nb_store_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int nb_store_fail(const nb_store *s, int rc, const char *what, nb_err *err) {
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if (s->db && sqlite3_errcode(s->db) == SQLITE_OK) msg = sqlite3_errstr(rc);
    nb_errf(err, "cannot %s in results store '%s': %s", what, s->path, msg);
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        nb_hintf(err,
                 "another process holds the store '%s' (a running normbench, or sqlite3?); wait "
                 "for it to finish, or pass --db with another file",
                 s->path);
        break;
    case SQLITE_NOTADB:
        nb_errf(err, "'%s' is not a normbench results store: %s", s->path, msg);
        nb_hintf(err, "pass --db with the path of a results store (or set NORMBENCH_DB), or move "
                      "the file aside");
        break;
    case SQLITE_CANTOPEN:
        nb_hintf(err,
                 "check that '%s' and its directory exist and are writable, or pass --db FILE (or "
                 "set NORMBENCH_DB) to use another store",
                 s->path);
        break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
        nb_hintf(err, "the store or its directory is read-only; make both writable, or pass --db "
                      "with a store in a writable directory");
        break;
    case SQLITE_FULL:
        nb_hintf(err, "the disk holding '%s' is full; free some space and retry", s->path);
        break;
    case SQLITE_CORRUPT:
        nb_hintf(err, "the store is damaged; restore it from a backup, or pass --db to start a new "
                      "one");
        break;
    case SQLITE_IOERR:
        nb_hintf(err, "the disk reported an error; check it and retry");
        break;
    default:
        break;
    }
    return -1;
}

int nb_store_prepare(nb_store *s, const char *sql, sqlite3_stmt **st, const char *what,
                     nb_err *err) {
    int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) return nb_store_fail(s, rc, what, err);
    return 0;
}

static int exec(nb_store *s, const char *sql, const char *what, nb_err *err) {
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : nb_store_fail(s, rc, what, err);
}

/* Runs a one-row pragma (or query) and copies the first column's text into out. */
static int query_text(nb_store *s, const char *sql, char *out, size_t size, const char *what,
                      nb_err *err) {
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s, sql, &st, what, err)) return -1;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        nb_store_fail(s, rc, what, err);
        sqlite3_finalize(st);
        return -1;
    }
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(out, size, "%s", t ? (const char *)t : "");
    sqlite3_finalize(st);
    return 0;
}

static int query_int(nb_store *s, const char *sql, long long *out, const char *what, nb_err *err) {
    char buf[64];
    if (query_text(s, sql, buf, sizeof buf, what, err)) return -1;
    *out = strtoll(buf, NULL, 10);
    return 0;
}

/* Sets a pragma and reads it back: SQLite ignores a misspelled or refused pragma silently. */
static int pragma_set(nb_store *s, const char *set, const char *get, const char *expect,
                      nb_err *err) {
    char got[64];
    if (exec(s, set, "configure the connection", err)) return -1;
    if (query_text(s, get, got, sizeof got, "configure the connection", err)) return -1;
    if (strcasecmp(got, expect) != 0) {
        nb_errf(err, "cannot configure results store '%s': '%s' left the value '%s', not '%s'",
                s->path, set, got, expect);
        return nb_hintf(err, "the file system may not support it (WAL needs shared memory: not "
                             "on a network file system); pass --db with a local file");
    }
    return 0;
}

static void rollback(nb_store *s) {
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

static int migrate(nb_store *s, int readonly, nb_err *err) {
    const int latest = nb_store_schema_version();
    for (;;) {
        long long v = 0;
        if (query_int(s, "PRAGMA user_version", &v, "read the schema version", err)) return -1;
        if (v > latest) {
            nb_errf(err,
                    "results store '%s' has schema version %lld, newer than this normbench "
                    "understands (%d)",
                    s->path, v, latest);
            return nb_hintf(err, "use a newer normbench with this store, or pass --db with "
                                 "another file");
        }
        if (v == latest) return 0;
        if (readonly && sqlite3_db_readonly(s->db, "main") == 1) {
            nb_errf(err,
                    "results store '%s' has schema version %lld and needs migrating to %d, "
                    "but it is read-only",
                    s->path, v, latest);
            return nb_hintf(err, "make the file and its directory writable");
        }
        /* One step per transaction, re-checked inside it: another process may have migrated. */
        if (exec(s, "BEGIN IMMEDIATE", "migrate the schema", err)) return -1;
        if (query_int(s, "PRAGMA user_version", &v, "read the schema version", err)) goto fail;
        if (v == 0) {
            long long n = 0;
            if (query_int(s,
                          "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' "
                          "ESCAPE '\\'",
                          &n, "read the schema", err))
                goto fail;
            if (n > 0) {
                nb_errf(err, "'%s' is an SQLite database but not a normbench results store",
                        s->path);
                nb_hintf(err, "pass --db with the path of a results store (or a new file)");
                goto fail;
            }
        }
        if (v < latest) {
            char set[64];
            snprintf(set, sizeof set, "PRAGMA user_version = %lld", v + 1);
            if (exec(s, migrations[v], "migrate the schema", err)) goto fail;
            if (exec(s, set, "migrate the schema", err)) goto fail;
        }
        if (exec(s, "COMMIT", "migrate the schema", err)) goto fail;
    }
fail:
    rollback(s);
    return -1;
}

static int check_create_dir(const char *path, nb_err *err) {
    char *dup = strdup(path);
    if (!dup) return nb_errf(err, "out of memory");
    char *slash = strrchr(dup, '/');
    const char *dir = ".";
    if (slash == dup)
        dir = "/";
    else if (slash) {
        *slash = '\0';
        dir = dup;
    }
    int ret = 0;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        nb_errf(err, "cannot create results store '%s': directory '%s' does not exist", path, dir);
        ret = nb_hintf(err, "create the directory first, or pass --db FILE (or set NORMBENCH_DB)");
    } else if (access(dir, W_OK | X_OK) != 0) {
        int e = errno;
        nb_errf(err, "cannot create results store '%s': directory '%s' is not writable: %s", path,
                dir, strerror(e));
        ret = nb_hintf(err, "pass --db with a path in a writable directory (or set NORMBENCH_DB)");
    }
    free(dup);
    return ret;
}

int nb_store_open(nb_store **out, const char *path, int readonly, nb_err *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT) {
            int e = errno;
            return nb_errf(err, "cannot open results store '%s': %s", path, strerror(e));
        }
        if (readonly) {
            nb_errf(err, "no results store at '%s'", path);
            return nb_hintf(err, "run 'normbench run ...' first to create one, or pass --db FILE "
                                 "(or set NORMBENCH_DB)");
        }
        if (check_create_dir(path, err)) return -1;
    } else if (S_ISDIR(st.st_mode)) {
        nb_errf(err, "'%s' is a directory, not a results store", path);
        return nb_hintf(err, "pass --db with a file name, e.g. --db '%s/normbench.db'", path);
    }

    nb_store *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return nb_errf(err, "out of memory");
    }
    int flags = SQLITE_OPEN_READWRITE | (readonly ? 0 : SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        nb_store_fail(s, rc, "open the store", err);
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    char to[64];
    snprintf(to, sizeof to, "PRAGMA busy_timeout = %d", BUSY_TIMEOUT_MS);
    char tov[32];
    snprintf(tov, sizeof tov, "%d", BUSY_TIMEOUT_MS);
    if (pragma_set(s, to, "PRAGMA busy_timeout", tov, err)) goto fail;
    if (sqlite3_db_readonly(s->db, "main") == 1) {
        char mode[32];
        if (query_text(s, "PRAGMA journal_mode", mode, sizeof mode, "open the store", err))
            goto fail;
    } else {
        if (pragma_set(s, "PRAGMA journal_mode = WAL", "PRAGMA journal_mode", "wal", err))
            goto fail;
    }
    if (pragma_set(s, "PRAGMA synchronous = NORMAL", "PRAGMA synchronous", "1", err)) goto fail;
    if (pragma_set(s, "PRAGMA foreign_keys = ON", "PRAGMA foreign_keys", "1", err)) goto fail;
    if (migrate(s, readonly, err)) goto fail;
    *out = s;
    return 0;
fail:
    nb_store_close(s);
    return -1;
}

void nb_store_close(nb_store *s) {
    if (!s) return;
    sqlite3_finalize(s->metric_ins);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

void nb_store_set_busy_timeout(nb_store *s, int ms) {
    sqlite3_busy_timeout(s->db, ms);
}

const char *nb_store_path(const nb_store *s) {
    return s->path;
}

static int bind_text(sqlite3_stmt *st, int i, const char *v) {
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

/* Runs one prepared write statement inside BEGIN IMMEDIATE ... COMMIT; finalizes it. */
static int write_one(nb_store *s, sqlite3_stmt *st, const char *what, nb_err *err) {
    int ret = -1;
    if (exec(s, "BEGIN IMMEDIATE", what, err)) goto out;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, what, err);
        goto out;
    }
    if (exec(s, "COMMIT", what, err)) goto out;
    ret = 0;
out:
    if (ret) rollback(s);
    sqlite3_finalize(st);
    return ret;
}

int nb_run_create(nb_store *s, const nb_run_spec *spec, int64_t *run_id, nb_err *err) {
    if (!spec->task || !spec->dataset || !spec->norm)
        return nb_errf(err, "cannot create a run: task, dataset and norm are required");
    char host[256];
    nb_hostname(host, sizeof host);
    char *prov = nb_provenance_json();
    if (!prov) return nb_errf(err, "out of memory");
    sqlite3_stmt *st = NULL;
    int ret = -1;
    if (nb_store_prepare(s,
                         "INSERT INTO runs (task, dataset, norm, seed, status, started, pid, host, "
                         "config, provenance, pid_start) "
                         "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                         &st, "create a run", err))
        goto out;
    bind_text(st, 1, spec->task);
    bind_text(st, 2, spec->dataset);
    bind_text(st, 3, spec->norm);
    sqlite3_bind_int64(st, 4, spec->seed);
    sqlite3_bind_double(st, 5, nb_store_now());
    sqlite3_bind_int64(st, 6, (sqlite3_int64)getpid());
    bind_text(st, 7, host);
    bind_text(st, 8, spec->config_json && *spec->config_json ? spec->config_json : "{}");
    bind_text(st, 9, prov);
    sqlite3_bind_int64(st, 10, nb_proc_start_time(getpid()));
    /* last_insert_rowid is per connection, so read it before anything else runs on it. */
    if (exec(s, "BEGIN IMMEDIATE", "create a run", err)) goto out;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, "create a run", err);
        goto out;
    }
    int64_t id = sqlite3_last_insert_rowid(s->db);
    if (exec(s, "COMMIT", "create a run", err)) goto out;
    *run_id = id;
    ret = 0;
out:
    if (ret) rollback(s);
    sqlite3_finalize(st);
    free(prov);
    return ret;
}

static int put_kv(nb_store *s, const char *table, int64_t run, const char *key, const char *value,
                  nb_err *err) {
    char sql[160];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (run, key, value) VALUES (?, ?, ?) "
             "ON CONFLICT (run, key) DO UPDATE SET value = excluded.value",
             table);
    sqlite3_stmt *st = NULL;
    const char *what = strcmp(table, "tags") == 0 ? "record a tag" : "record a parameter";
    if (!key || !value) return nb_errf(err, "cannot %s: key and value are required", what);
    if (nb_store_prepare(s, sql, &st, what, err)) return -1;
    sqlite3_bind_int64(st, 1, run);
    bind_text(st, 2, key);
    bind_text(st, 3, value);
    return write_one(s, st, what, err);
}

int nb_run_param(nb_store *s, int64_t run, const char *key, const char *value, nb_err *err) {
    return put_kv(s, "params", run, key, value, err);
}

int nb_run_tag(nb_store *s, int64_t run, const char *key, const char *value, nb_err *err) {
    return put_kv(s, "tags", run, key, value, err);
}

int nb_metric_kind(double v) {
    if (isnan(v)) return NB_METRIC_NAN;
    if (isinf(v)) return v > 0 ? NB_METRIC_POS_INF : NB_METRIC_NEG_INF;
    return NB_METRIC_FINITE;
}

double nb_metric_from_kind(int kind, double value) {
    switch (kind) {
    case NB_METRIC_NAN:
        return NAN;
    case NB_METRIC_POS_INF:
        return INFINITY;
    case NB_METRIC_NEG_INF:
        return -INFINITY;
    default:
        return value;
    }
}

int nb_metrics_add(nb_store *s, int64_t run, const nb_metric *m, int count, nb_err *err) {
    const char *what = "record metrics";
    if (count <= 0) return 0;
    if (!s->metric_ins &&
        nb_store_prepare(s,
                         "INSERT INTO metrics (run, name, step, wall, value, kind) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         &s->metric_ins, what, err))
        return -1;
    sqlite3_stmt *st = s->metric_ins;
    if (exec(s, "BEGIN IMMEDIATE", what, err)) return -1;
    for (int i = 0; i < count; i++) {
        if (!m[i].name) {
            nb_errf(err, "cannot record metrics: metric %d has no name", i);
            goto fail;
        }
        int kind = nb_metric_kind(m[i].value);
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_text(st, 2, m[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, m[i].step);
        sqlite3_bind_double(st, 4, isfinite(m[i].wall) ? m[i].wall : 0.0);
        if (kind == NB_METRIC_FINITE)
            sqlite3_bind_double(st, 5, m[i].value);
        else
            sqlite3_bind_null(st, 5);
        sqlite3_bind_int(st, 6, kind);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) {
            nb_store_fail(s, rc, what, err);
            goto fail;
        }
    }
    sqlite3_clear_bindings(st);
    if (exec(s, "COMMIT", what, err)) goto fail;
    return 0;
fail:
    sqlite3_clear_bindings(st);
    rollback(s);
    return -1;
}

int nb_run_finish(nb_store *s, int64_t run, const char *status, const char *message, nb_err *err) {
    static const char *const ok[] = {"finished", "failed", "interrupted", "diverged"};
    int valid = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (status && strcmp(status, ok[i]) == 0) valid = 1;
    if (!valid)
        return nb_errf(err, "cannot finish run %lld: invalid status '%s'", (long long)run,
                       status ? status : "(null)");
    sqlite3_stmt *st = NULL;
    const char *what = "finish a run";
    if (nb_store_prepare(s, "UPDATE runs SET status = ?, message = ?, finished = ? WHERE id = ?",
                         &st, what, err))
        return -1;
    bind_text(st, 1, status);
    bind_text(st, 2, message);
    sqlite3_bind_double(st, 3, nb_store_now());
    sqlite3_bind_int64(st, 4, run);
    if (write_one(s, st, what, err)) return -1;
    if (sqlite3_changes(s->db) == 0) {
        nb_errf(err, "cannot finish run %lld: no such run in results store '%s'", (long long)run,
                s->path);
        return -1;
    }
    return 0;
}

/* Reads who runs `run`: its stored status and process. Returns 1 with a row, 0 without, -1 on
 * error. */
static int run_holder(nb_store *s, int64_t run, char *status, size_t ssize, char *host,
                      size_t hsize, int64_t *pid, int64_t *pid_start, const char *what,
                      nb_err *err) {
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s, "SELECT status, host, pid, pid_start FROM runs WHERE id = ?", &st, what,
                         err))
        return -1;
    sqlite3_bind_int64(st, 1, run);
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(status, ssize, "%s", t ? (const char *)t : "");
        t = sqlite3_column_text(st, 1);
        snprintf(host, hsize, "%s", t ? (const char *)t : "");
        *pid = sqlite3_column_int64(st, 2);
        *pid_start = sqlite3_column_int64(st, 3); /* 0 when NULL */
        ret = 1;
    } else if (rc != SQLITE_DONE) {
        ret = nb_store_fail(s, rc, what, err);
    }
    sqlite3_finalize(st);
    return ret;
}

int nb_run_resume(nb_store *s, int64_t run, int64_t from_step, nb_err *err) {
    const char *what = "resume a run";
    char host[256];
    nb_hostname(host, sizeof host);
    sqlite3_stmt *del = NULL, *upd = NULL;
    int ret = -1;
    if (nb_store_prepare(s, "DELETE FROM metrics WHERE run = ? AND step > ?", &del, what, err) ||
        nb_store_prepare(s,
                         "UPDATE runs SET status = 'running', message = NULL, finished = NULL, "
                         "pid = ?, host = ?, pid_start = ? WHERE id = ?",
                         &upd, what, err))
        goto out;
    sqlite3_bind_int64(del, 1, run);
    sqlite3_bind_int64(del, 2, from_step < 0 ? INT64_MIN : from_step);
    sqlite3_bind_int64(upd, 1, (sqlite3_int64)getpid());
    bind_text(upd, 2, host);
    sqlite3_bind_int64(upd, 3, nb_proc_start_time(getpid()));
    sqlite3_bind_int64(upd, 4, run);
    /* The check and the claim in one write transaction: of two processes resuming one run, the
     * second sees the first's claim. */
    if (exec(s, "BEGIN IMMEDIATE", what, err)) goto out;
    char status[32], holder[256];
    int64_t pid = 0, pid_start = 0;
    int found = run_holder(s, run, status, sizeof status, holder, sizeof holder, &pid, &pid_start,
                           what, err);
    if (found < 0) goto fail;
    if (found == 0) {
        nb_errf(err, "cannot resume run %lld: no such run in results store '%s'", (long long)run,
                s->path);
        goto fail;
    }
    if (strcmp(status, "finished") == 0) {
        nb_errf(err, "run %lld finished already: there is nothing to resume", (long long)run);
        goto fail;
    }
    if (strcmp(status, "running") == 0 && nb_proc_alive(holder, pid, pid_start)) {
        nb_errf(err, "run %lld is running in process %lld on %s: it cannot be resumed twice",
                (long long)run, (long long)pid, holder);
        nb_hintf(err, "wait for that process to end (or stop it), then resume the run");
        goto fail;
    }
    int rc = sqlite3_step(del);
    if (rc == SQLITE_DONE) rc = sqlite3_step(upd);
    if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, what, err);
        goto fail;
    }
    if (exec(s, "COMMIT", what, err)) goto fail;
    ret = 0;
    goto out;
fail:
    rollback(s);
out:
    sqlite3_finalize(del);
    sqlite3_finalize(upd);
    return ret;
}

int nb_store_id(nb_store *s, char *out, size_t size, nb_err *err) {
    sqlite3_stmt *st = NULL;
    const char *what = "read the store's id";
    if (nb_store_prepare(s, "SELECT value FROM meta WHERE key = 'store_id'", &st, what, err))
        return -1;
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, size, "%s", t ? (const char *)t : "");
    } else if (rc == SQLITE_DONE) {
        nb_errf(err, "results store '%s' has no store id", s->path);
        ret = nb_hintf(err, "the store is damaged; restore it from a backup, or pass --db to "
                            "start a new one");
    } else {
        ret = nb_store_fail(s, rc, what, err);
    }
    sqlite3_finalize(st);
    return ret;
}

/* The newest run of a job (tagged sweep=job) and whether any of its runs finished. */
static int job_runs(nb_store *s, const char *job, nb_job_state *js, int64_t *pid_start,
                    const char *what, nb_err *err) {
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s,
                         "SELECT r.id, r.status, r.host, r.pid, r.pid_start, "
                         "(SELECT count(*) FROM runs f JOIN tags g ON g.run = f.id WHERE "
                         "g.key = 'sweep' AND g.value = ?1 AND f.status = 'finished') "
                         "FROM runs r JOIN tags t ON t.run = r.id "
                         "WHERE t.key = 'sweep' AND t.value = ?1 ORDER BY r.id DESC LIMIT 1",
                         &st, what, err))
        return -1;
    sqlite3_bind_text(st, 1, job, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW) {
        js->run = sqlite3_column_int64(st, 0);
        const unsigned char *t = sqlite3_column_text(st, 1);
        snprintf(js->status, sizeof js->status, "%s", t ? (const char *)t : "");
        t = sqlite3_column_text(st, 2);
        snprintf(js->host, sizeof js->host, "%s", t ? (const char *)t : "");
        js->pid = sqlite3_column_int64(st, 3);
        *pid_start = sqlite3_column_int64(st, 4);
        js->finished = sqlite3_column_int64(st, 5) > 0;
    } else if (rc != SQLITE_DONE) {
        ret = nb_store_fail(s, rc, what, err);
    }
    sqlite3_finalize(st);
    return ret;
}

int nb_job_claim(nb_store *s, const char *job, int claim, nb_job_state *js, nb_err *err) {
    const char *what = "claim a sweep job";
    memset(js, 0, sizeof *js);
    char me[256];
    nb_hostname(me, sizeof me);
    int64_t my_pid = (int64_t)getpid(), my_start = nb_proc_start_time(my_pid);
    sqlite3_stmt *st = NULL;
    if (claim && exec(s, "BEGIN IMMEDIATE", what, err)) return -1;
    /* 1. a claim by another live process */
    if (nb_store_prepare(s, "SELECT host, pid, pid_start FROM claims WHERE job = ?", &st, what,
                         err))
        goto fail;
    sqlite3_bind_text(st, 1, job, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text(st, 0);
        int64_t pid = sqlite3_column_int64(st, 1), start = sqlite3_column_int64(st, 2);
        int mine = h && strcmp((const char *)h, me) == 0 && pid == my_pid;
        if (!mine && nb_proc_alive((const char *)h, pid, start)) {
            js->state = NB_JOB_BUSY;
            snprintf(js->host, sizeof js->host, "%s", h ? (const char *)h : "");
            js->pid = pid;
        }
    } else if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, what, err);
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (js->state == NB_JOB_BUSY) {
        if (claim) rollback(s);
        return 0;
    }
    /* 2. the job's runs: finished, or running in a live process (a `run --resume` by hand) */
    int64_t run_start = 0;
    if (job_runs(s, job, js, &run_start, what, err)) goto fail;
    if (js->finished) {
        js->state = NB_JOB_DONE;
    } else if (js->run && strcmp(js->status, "running") == 0 &&
               nb_proc_alive(js->host, js->pid, run_start)) {
        js->state = NB_JOB_BUSY;
    } else {
        js->state = NB_JOB_FREE;
    }
    if (!claim || js->state != NB_JOB_FREE) {
        if (claim) rollback(s);
        return 0;
    }
    /* 3. claim it */
    if (nb_store_prepare(s,
                         "INSERT INTO claims (job, host, pid, pid_start, claimed) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT (job) DO UPDATE SET host = "
                         "excluded.host, pid = excluded.pid, pid_start = excluded.pid_start, "
                         "claimed = excluded.claimed",
                         &st, what, err))
        goto fail;
    sqlite3_bind_text(st, 1, job, -1, SQLITE_TRANSIENT);
    bind_text(st, 2, me);
    sqlite3_bind_int64(st, 3, my_pid);
    sqlite3_bind_int64(st, 4, my_start);
    sqlite3_bind_double(st, 5, nb_store_now());
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, what, err);
        goto fail;
    }
    if (exec(s, "COMMIT", what, err)) goto fail;
    js->state = NB_JOB_CLAIMED;
    return 0;
fail:
    sqlite3_finalize(st);
    if (claim) rollback(s);
    return -1;
}

int nb_job_release(nb_store *s, const char *job, nb_err *err) {
    char me[256];
    nb_hostname(me, sizeof me);
    sqlite3_stmt *st = NULL;
    const char *what = "release a sweep job";
    if (nb_store_prepare(s, "DELETE FROM claims WHERE job = ? AND host = ? AND pid = ?", &st, what,
                         err))
        return -1;
    bind_text(st, 1, job);
    bind_text(st, 2, me);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)getpid());
    return write_one(s, st, what, err);
}
