/* results/store_internal.h — what the results/ files share and nobody else sees. */
#ifndef NB_RESULTS_STORE_INTERNAL_H
#define NB_RESULTS_STORE_INTERNAL_H

#include <sqlite3.h>

#include "results/store.h"

struct nb_store {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *metric_ins; /* reused by nb_metrics_add */
    int write_wait_ms;        /* how long a write waits in all for another process's lock */
    int gave_up;              /* the last write failed after waiting write_wait_ms for a lock */
};

/* Fills err with "cannot WHAT in results store 'PATH': SQLITE MESSAGE" and a hint chosen by the
 * error code (locked, not a database, read-only, full, ...). Returns -1. */
int nb_store_fail(const nb_store *s, int rc, const char *what, nb_err *err);

/* Prepares sql; on failure fills err (as nb_store_fail) and returns -1. */
int nb_store_prepare(nb_store *s, const char *sql, sqlite3_stmt **st, const char *what,
                     nb_err *err);

/* Current time, seconds since the Unix epoch. */
double nb_store_now(void);

#endif
