/* results/store.h — the SQLite results store (docs/guide.md, "Commands").
 *
 * Tables (STRICT): runs, params, metrics, tags. A store is marked by PRAGMA application_id
 * ("norm"); a database is identified as a store (by that id, or, for a store made before it, by
 * its tables) before anything changes it. Every open for writing then sets WAL,
 * synchronous=NORMAL, busy_timeout, foreign_keys and reads them back; schema changes go through
 * migrations keyed by PRAGMA user_version, and a store newer than this binary is refused. Writes
 * run in BEGIN IMMEDIATE transactions. A NaN or infinite metric is stored with an explicit kind so
 * it stays distinguishable from NULL. Two processes may use one store at once.
 *
 * All functions return 0 on success and -1 with err filled (message naming the file, and a hint)
 * on failure. Strings passed in are copied; strings returned are owned by the caller (free()). */
#ifndef NB_RESULTS_STORE_H
#define NB_RESULTS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

typedef struct nb_store nb_store;

/* Opens (creating and migrating if needed) the store at path. A path that exists must be a
 * regular file (a symbolic link to one is followed); anything else, a link to /dev/null
 * included, is refused before SQLite opens it. readonly never creates (a missing or empty file
 * is an error "no results store at 'PATH'" with a hint) and cannot change the store: where the
 * store and its directory are writable it is opened with PRAGMA query_only (so that SQLite still
 * removes the -wal and -shm files when the last connection closes), elsewhere with
 * SQLITE_OPEN_READONLY, so it works on a read-only file, directory or file system (a WAL store
 * whose -shm cannot be created there is read with immutable=1, unless its -wal holds changes).
 * An older store is migrated only when the file and its directory are writable. Refused with a
 * clear message, and left byte for byte as it was: a store newer than this binary, a file that
 * is not a database, an SQLite database that is not a results store; also an unwritable or
 * missing directory (when creating). */
int nb_store_open(nb_store **out, const char *path, int readonly, nb_err *err);
/* Closes the store; s may be NULL. */
void nb_store_close(nb_store *s);

/* The path the store was opened with (owned by the store). */
const char *nb_store_path(const nb_store *s);

/* Sets how long a write waits in all for another process's lock before failing with "database
 * is locked" (default NB_STORE_WRITE_WAIT_MS: waits of up to 10 s, SQLite's busy handler, each
 * followed by a pause growing from 0.1 to 2 s, until the total is spent). */
void nb_store_set_busy_timeout(nb_store *s, int ms);
#define NB_STORE_WRITE_WAIT_MS 120000
/* Whether the last write failed because another process held the store's lock past that
 * wait (the caller may tell how to continue: a run is resumable). */
int nb_store_gave_up(const nb_store *s);

/* The schema version (PRAGMA user_version) this binary writes; a store with a higher one is
 * refused by nb_store_open. */
int nb_store_schema_version(void);

typedef struct nb_run_spec {
    const char *task, *dataset, *norm;
    int64_t seed;
    const char *config_json;  /* every option in force, as a JSON object */
    const char *compute_json; /* the compute libraries' settings (a JSON object), or NULL */
    /* The provenance JSON of the process that trains the run, when it is not this one (an MPI
     * rank that records through rank 0); NULL: this process's (compute_json included). */
    const char *provenance_json;
} nb_run_spec;

/* Creates a run with status "running", the start time, the process id and host, and the
 * provenance (see results/provenance.h) as JSON. */
int nb_run_create(nb_store *s, const nb_run_spec *spec, int64_t *run_id, nb_err *err);

/* key/value parameters and tags (text). */
int nb_run_param(nb_store *s, int64_t run, const char *key, const char *value, nb_err *err);
int nb_run_tag(nb_store *s, int64_t run, const char *key, const char *value, nb_err *err);

typedef struct nb_metric {
    const char *name; /* e.g. "train_loss", "val_error", "test_error", "ms_per_step" */
    int64_t step;     /* training step the value belongs to */
    double wall;      /* seconds since the run started */
    double value;     /* any double, NaN and +-Inf included */
} nb_metric;

/* How a metric value is stored (metrics.kind): a NaN or infinite value has a NULL value column
 * and its kind says which it was. */
enum { NB_METRIC_FINITE = 0, NB_METRIC_NAN = 1, NB_METRIC_POS_INF = 2, NB_METRIC_NEG_INF = 3 };
/* The kind of v. */
int nb_metric_kind(double v);
/* The value a stored (kind, value) pair stands for: NaN, +Inf, -Inf, or value. */
double nb_metric_from_kind(int kind, double value);

/* Appends count metrics in one transaction. */
int nb_metrics_add(nb_store *s, int64_t run, const nb_metric *m, int count, nb_err *err);

/* Final status: "finished", "failed", "interrupted" or "diverged"; message may be NULL. Sets
 * the finish time. */
int nb_run_finish(nb_store *s, int64_t run, const char *status, const char *message, nb_err *err);

/* Claims a run for resuming from a checkpoint taken at from_step, checking and writing in one
 * transaction: refused (err names the run, and the process holding it) when the run finished
 * already or is running in a process that is alive (host, pid and start time; results/proc.h).
 * Otherwise deletes its metrics recorded after from_step (they will be recorded again; all of
 * them when from_step < 0: the run starts over) and marks it running in this process. */
int nb_run_resume(nb_store *s, int64_t run, int64_t from_step, nb_err *err);

/* The store's random id (32 hex digits, made when the store was created or migrated to schema
 * 2): checkpoints record it, so that one from another store is refused. */
int nb_store_id(nb_store *s, char *out, size_t size, nb_err *err);

/* Sweep jobs. A job is identified by its key, the value of its runs' "sweep" tag. */
enum {
    NB_JOB_FREE = 0, /* nobody holds it and none of its runs finished (claim = 0 only) */
    NB_JOB_CLAIMED,  /* this process now holds it */
    NB_JOB_DONE,     /* one of its runs finished */
    NB_JOB_BUSY      /* a live process holds it: a sweep's claim, or its run is running */
};
typedef struct nb_job_state {
    int state;
    int64_t run;     /* the job's newest run, 0 when it has none */
    char status[16]; /* that run's stored status */
    int finished;    /* one of its runs finished */
    char host[256];  /* NB_JOB_BUSY: who holds it; else the newest run's process */
    int64_t pid;
} nb_job_state;

/* Looks at a job and, when claim is set and nobody else holds it, claims it for this process
 * (host, pid, start time), all in one transaction. A claim whose process is gone (a sweep killed
 * by a signal, or a crashed machine's reboot) is taken over. claim = 0 only reads. */
int nb_job_claim(nb_store *s, const char *job, int claim, nb_job_state *js, nb_err *err);

/* Drops this process's claim on a job (no error when it holds none). */
int nb_job_release(nb_store *s, const char *job, nb_err *err);

#endif
