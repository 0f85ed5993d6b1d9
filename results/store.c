/* results/store.c — opening, migrating and writing the SQLite results store (results/store.h).
 */
#include "results/store_internal.h"

#include <errno.h>
#include <fcntl.h>
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

/* PRAGMA application_id of every store normbench creates ("norm"); a store made before it was
 * set is recognised by its schema and stamped when next opened for writing. */
#define NB_APPLICATION_ID 0x6e6f726d
#define STR2(x) #x
#define STR(x) STR2(x)

static int refuse_foreign(const nb_store *s, nb_err *err) {
    nb_errf(err, "'%s' is an SQLite database but not a normbench results store", s->path);
    return nb_hintf(err, "pass --db with the path of a results store (or a new file); the file "
                         "was left as it was");
}

/* Stamps the application id on a store identified by its schema. */
static int stamp(nb_store *s, nb_err *err) {
    long long id = 0;
    if (query_int(s, "PRAGMA application_id", &id, "read the application id", err)) return -1;
    if (id == NB_APPLICATION_ID) return 0;
    if (id != 0) return refuse_foreign(s, err);
    if (exec(s, "BEGIN IMMEDIATE", "mark the store", err)) return -1;
    if (exec(s, "PRAGMA application_id = " STR(NB_APPLICATION_ID), "mark the store", err) ||
        exec(s, "COMMIT", "mark the store", err)) {
        rollback(s);
        return -1;
    }
    return 0;
}

static int migrate(nb_store *s, nb_err *err) {
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
        if (v == latest) return stamp(s, err);
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
                refuse_foreign(s, err);
                goto fail;
            }
            /* a new store: marked as normbench's in the same transaction as its tables */
            if (exec(s, "PRAGMA application_id = " STR(NB_APPLICATION_ID), "create the store", err))
                goto fail;
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

/* The directory part of path ("." when none); caller frees. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int check_create_dir(const char *path, nb_err *err) {
    char *dir = dir_of(path);
    if (!dir) return nb_errf(err, "out of memory");
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
    free(dir);
    return ret;
}

/* What the path holds, found out before SQLite opens it for anything but reading. */
enum { STORE_ABSENT, STORE_EMPTY, STORE_OURS };

static const char *file_kind(mode_t m) {
    return S_ISCHR(m)    ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a named pipe"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* Whether PATH-wal exists and holds something (changes not yet in the database file). */
static int wal_has_content(const char *path) {
    char wal[4200];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", path);
    return stat(wal, &st) == 0 && st.st_size > 0;
}

/* "file:PATH?QUERY" with PATH percent-encoded (RFC 3986), for sqlite3_open_v2 with
 * SQLITE_OPEN_URI. Caller frees. */
static char *file_uri(const char *path, const char *query) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    size_t size = 3 * n + strlen(query) + 16;
    char *u = malloc(size);
    if (!u) return NULL;
    const char *scheme = path[0] == '/' ? "file://" : "file:";
    memcpy(u, scheme, strlen(scheme));
    char *p = u + strlen(scheme);
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("-._~/", *c)) {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    snprintf(p, size - (size_t)(p - u), "?%s", query);
    return u;
}

/* How a reading command opens a store (open_ro). */
enum {
    /* the store and its directory are writable: opened for writing but with query_only on, so
     * that SQL cannot change it, and the last connection to close still merges and removes the
     * -wal and -shm files as usual (a read-only connection cannot, and would leave them) */
    RO_QUERY_ONLY,
    RO_READONLY,  /* SQLITE_OPEN_READONLY */
    RO_IMMUTABLE, /* immutable=1: only the database file is read; nothing created or locked */
};

/* Opens s->db for reading as mode says and reads the schema version into *version. Returns the
 * SQLite code of the failure, with s->db left open for the message, or SQLITE_OK. */
static int open_ro(nb_store *s, int mode, long long *version) {
    int rc;
    if (mode == RO_IMMUTABLE) {
        char *uri = file_uri(s->path, "immutable=1");
        if (!uri) return SQLITE_NOMEM;
        rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
    } else {
        rc = sqlite3_open_v2(s->path, &s->db,
                             mode == RO_READONLY ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE,
                             NULL);
    }
    if (rc != SQLITE_OK) return rc;
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    if (mode == RO_QUERY_ONLY &&
        (rc = sqlite3_exec(s->db, "PRAGMA query_only = ON", NULL, NULL, NULL)) != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *version = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && mode == RO_QUERY_ONLY) { /* read back: SQLite ignores what it refuses */
        rc = sqlite3_prepare_v2(s->db, "PRAGMA query_only", -1, &st, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1 ? SQLITE_OK
                                                                                  : SQLITE_ERROR;
        sqlite3_finalize(st);
    }
    return rc;
}

/* Whether the store and its directory can be written. */
static int writable(const char *path) {
    char *dir = dir_of(path);
    int ok = dir && access(path, W_OK) == 0 && access(dir, W_OK | X_OK) == 0;
    free(dir);
    return ok;
}

/* Opens a store for a reading command: query_only where the store and its directory are
 * writable, else read-only, falling back to immutable when a WAL store's -shm cannot be created
 * (a read-only directory or file system) and no -wal holds changes. On failure fills err. */
static int open_reader(nb_store *s, long long *version, nb_err *err) {
    int rc = open_ro(s, writable(s->path) ? RO_QUERY_ONLY : RO_READONLY, version);
    int prim = rc & 0xff;
    if ((prim == SQLITE_CANTOPEN || prim == SQLITE_READONLY) && !wal_has_content(s->path)) {
        sqlite3_close(s->db);
        s->db = NULL;
        rc = open_ro(s, RO_IMMUTABLE, version);
    }
    if (rc != SQLITE_OK) return nb_store_fail(s, rc, "read the store", err);
    return 0;
}

/* Refuses what is not a regular file (a device such as /dev/null, a pipe, a directory, a link
 * to nothing) before SQLite sees it, and tells whether the path is absent, empty (a file of no
 * bytes, or an SQLite database with nothing in it) or a normbench store: application_id set, or
 * the tables of one (a store made before the id was set). Anything else is refused without
 * having changed it: it is only read, read-only, and with immutable (nothing created beside it)
 * unless a -wal file holds changes. */
static int identify(nb_store *s, int *what, nb_err *err) {
    const char *path = s->path;
    struct stat lst, st;
    if (lstat(path, &lst) != 0) {
        int e = errno;
        if (e == ENOENT) {
            *what = STORE_ABSENT;
            return 0;
        }
        return nb_errf(err, "cannot open results store '%s': %s", path, strerror(e));
    }
    if (stat(path, &st) != 0) { /* a symbolic link whose target is missing */
        int e = errno;
        nb_errf(err, "results store '%s' is a symbolic link that leads nowhere: %s", path,
                strerror(e));
        return nb_hintf(err, "pass --db with the path of a results store or of a new file");
    }
    if (S_ISDIR(st.st_mode)) {
        nb_errf(err, "'%s' is a directory, not a results store", path);
        return nb_hintf(err, "pass --db with a file name, e.g. --db '%s/normbench.db'", path);
    }
    if (!S_ISREG(st.st_mode)) {
        nb_errf(err, "'%s' is %s%s, not a results store", path,
                S_ISLNK(lst.st_mode) ? "a symbolic link to " : "", file_kind(st.st_mode));
        return nb_hintf(err, "pass --db with the path of a results store file (or of a new one); "
                             "a symbolic link to a regular file is followed");
    }
    if (st.st_size == 0) {
        *what = STORE_EMPTY;
        return 0;
    }
    unsigned char h[100];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        nb_errf(err, "cannot read results store '%s': %s", path, strerror(e));
        return nb_hintf(err, "check the file's permissions");
    }
    ssize_t got = pread(fd, h, sizeof h, 0);
    close(fd);
    if (got != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0) {
        nb_errf(err, "'%s' is not a normbench results store: file is not a database", path);
        return nb_hintf(err, "pass --db with the path of a results store (or set NORMBENCH_DB), "
                             "or move the file aside");
    }
    uint32_t app = (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 | (uint32_t)h[70] << 8 | h[71];
    if (app == NB_APPLICATION_ID) {
        *what = STORE_OURS;
        return 0;
    }
    if (app != 0) return refuse_foreign(s, err);
    /* no id: a store made before it was set, an empty database, or something else */
    long long v = 0, n = 0, tables = 0;
    int rc = open_ro(s, wal_has_content(path) ? RO_READONLY : RO_IMMUTABLE, &v);
    if (rc != SQLITE_OK) {
        nb_store_fail(s, rc, "read the store", err);
        goto fail;
    }
    if (query_int(s,
                  "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' "
                  "ESCAPE '\\'",
                  &n, "read the schema", err) ||
        query_int(s,
                  "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                  "('runs', 'params', 'metrics', 'tags')",
                  &tables, "read the schema", err))
        goto fail;
    sqlite3_close(s->db);
    s->db = NULL;
    if (v == 0 && n == 0) {
        *what = STORE_EMPTY;
        return 0;
    }
    if (v >= 1 && tables == 4) {
        *what = STORE_OURS;
        return 0;
    }
    return refuse_foreign(s, err);
fail:
    sqlite3_close(s->db);
    s->db = NULL;
    return -1;
}

/* Opens s->db for writing (creating the file when absent), switches to WAL and migrates. Only
 * for a path identify() found absent, empty or a normbench store. */
static int open_readwrite(nb_store *s, nb_err *err) {
    int rc = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) return nb_store_fail(s, rc, "open the store", err);
    sqlite3_extended_result_codes(s->db, 1);
    if (sqlite3_db_readonly(s->db, "main") == 1) { /* SQLite fell back to reading */
        nb_errf(err, "cannot write to results store '%s': it is read-only", s->path);
        return nb_hintf(err, "make the file, its directory and its file system writable, or "
                             "pass --db with a store in a writable place");
    }
    char to[64];
    snprintf(to, sizeof to, "PRAGMA busy_timeout = %d", BUSY_TIMEOUT_MS);
    char tov[32];
    snprintf(tov, sizeof tov, "%d", BUSY_TIMEOUT_MS);
    if (pragma_set(s, to, "PRAGMA busy_timeout", tov, err)) return -1;
    if (pragma_set(s, "PRAGMA journal_mode = WAL", "PRAGMA journal_mode", "wal", err)) return -1;
    if (pragma_set(s, "PRAGMA synchronous = NORMAL", "PRAGMA synchronous", "1", err)) return -1;
    if (pragma_set(s, "PRAGMA foreign_keys = ON", "PRAGMA foreign_keys", "1", err)) return -1;
    return migrate(s, err);
}

int nb_store_open(nb_store **out, const char *path, int readonly, nb_err *err) {
    *out = NULL;
    nb_store *s = calloc(1, sizeof *s);
    if (s) s->write_wait_ms = NB_STORE_WRITE_WAIT_MS;
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return nb_errf(err, "out of memory");
    }
    int what = STORE_ABSENT;
    if (identify(s, &what, err)) goto fail;
    if (what != STORE_OURS && readonly) {
        nb_errf(err, "no results store at '%s'%s", path,
                what == STORE_EMPTY ? " (the file is empty)" : "");
        nb_hintf(err, "run 'normbench run ...' first to create one, or pass --db FILE "
                      "(or set NORMBENCH_DB)");
        goto fail;
    }
    if (what == STORE_ABSENT && check_create_dir(path, err)) goto fail;
    if (!readonly) {
        if (open_readwrite(s, err)) goto fail;
        *out = s;
        return 0;
    }
    long long v = 0;
    if (open_reader(s, &v, err)) goto fail;
    const int latest = nb_store_schema_version();
    if (v > latest) {
        nb_errf(err,
                "results store '%s' has schema version %lld, newer than this normbench "
                "understands (%d)",
                path, v, latest);
        nb_hintf(err, "use a newer normbench with this store, or pass --db with another file");
        goto fail;
    }
    if (v == 1 && latest == 2 && !writable(path)) {
        /* a store of schema 1 that cannot be migrated: read through temporary objects (in
         * memory, never in the file) that show it as schema 2 — no process start times, no
         * store id, no claims */
        int rc = sqlite3_exec(s->db,
                              "CREATE TEMP VIEW runs AS SELECT *, NULL AS pid_start FROM main.runs;"
                              "CREATE TEMP TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
                              "CREATE TEMP TABLE claims (job TEXT PRIMARY KEY, host TEXT, pid "
                              "INTEGER, pid_start INTEGER, claimed REAL);",
                              NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            nb_store_fail(s, rc, "read the older store", err);
            goto fail;
        }
        v = latest;
    }
    if (v < latest) { /* an older store: migrated where it can be written, else refused */
        if (!writable(path)) {
            nb_errf(err,
                    "results store '%s' has schema version %lld and needs migrating to %d, "
                    "but it is read-only",
                    path, v, latest);
            nb_hintf(err, "make the file and its directory writable");
            goto fail;
        }
        sqlite3_close(s->db);
        s->db = NULL;
        if (open_readwrite(s, err)) goto fail;
        sqlite3_close(s->db);
        s->db = NULL;
        if (open_reader(s, &v, err)) goto fail;
    }
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
    s->write_wait_ms = ms;
}

int nb_store_gave_up(const nb_store *s) {
    return s && s->gave_up;
}

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* BEGIN IMMEDIATE, waiting for another process's lock (SQLITE_BUSY or SQLITE_LOCKED) up to
 * s->write_wait_ms in all: SQLite's busy handler for up to BUSY_TIMEOUT_MS at a time, then a
 * pause that doubles from 0.1 s to 2 s, again and again. */
static int begin_write(nb_store *s, const char *what, nb_err *err) {
    const double t0 = mono_ms();
    int pause = 100, rc;
    s->gave_up = 0;
    for (;;) {
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        const int code = rc & 0xff;
        const double left = s->write_wait_ms - (mono_ms() - t0);
        if (rc == SQLITE_OK || (code != SQLITE_BUSY && code != SQLITE_LOCKED) || left <= 0) break;
        const int p = left < pause ? (int)left : pause;
        struct timespec ts = {p / 1000, (long)(p % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pause = pause < 1000 ? 2 * pause : 2000;
        /* the next try's busy handler waits no longer than what is left */
        const double rest = s->write_wait_ms - (mono_ms() - t0);
        sqlite3_busy_timeout(s->db,
                             rest < BUSY_TIMEOUT_MS ? (rest > 1 ? (int)rest : 1) : BUSY_TIMEOUT_MS);
    }
    sqlite3_busy_timeout(s->db,
                         s->write_wait_ms < BUSY_TIMEOUT_MS ? s->write_wait_ms : BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK) return 0;
    const int code = rc & 0xff;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
        s->gave_up = 1;
        nb_store_fail(s, rc, what, err);
        return nb_hintf(err,
                        "another process held the store '%s' for over %d s (a running "
                        "normbench, or sqlite3?); wait for it to finish, or pass --db with "
                        "another file",
                        s->path, (s->write_wait_ms + 999) / 1000);
    }
    return nb_store_fail(s, rc, what, err);
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
    if (begin_write(s, what, err)) goto out;
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
    char *prov = spec->provenance_json ? strdup(spec->provenance_json)
                                       : nb_provenance_json(spec->compute_json);
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
    if (begin_write(s, "create a run", err)) goto out;
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
    if (begin_write(s, what, err)) return -1;
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
    if (begin_write(s, what, err)) goto out;
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
    if (claim && begin_write(s, what, err)) return -1;
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
