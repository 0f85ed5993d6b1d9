/* results/query.c — reading the results store (results/query.h). */
#include "results/query.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/proc.h"
#include "results/provenance.h"
#include "results/store_internal.h"

const char *nb_effective_status(const char *status, int64_t pid, int64_t pid_start,
                                const char *host) {
    if (!status || strcmp(status, "running") != 0 || !host || pid <= 0) return status;
    return nb_proc_alive(host, pid, pid_start) ? status : "crashed";
}

static char *dup_col(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

static double col_double_or_nan(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* Grows *p (elements of size sz) to hold at least n + 1; returns -1 when out of memory. */
static int grow(void **p, int *cap, int n, size_t sz) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, (size_t)nc * sz);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static void info_free(nb_run_info *r) {
    free(r->task);
    free(r->dataset);
    free(r->norm);
    free(r->status);
    free(r->message);
    free(r->host);
}

/* Columns: id, task, dataset, norm, seed, status, message, started, finished, pid, host,
 * test_error value, test_error kind, last metric wall, pid_start. */
#define RUN_COLUMNS                                                                                \
    "SELECT r.id, r.task, r.dataset, r.norm, r.seed, r.status, r.message, r.started, "             \
    "r.finished, r.pid, r.host, te.value, te.kind, "                                               \
    "(SELECT max(wall) FROM metrics WHERE run = r.id), r.pid_start "                               \
    "FROM runs r LEFT JOIN metrics te ON te.rowid = (SELECT rowid FROM metrics WHERE run = r.id "  \
    "AND name = 'test_error' ORDER BY step DESC, rowid DESC LIMIT 1) "

enum { RUN_NCOLS = 15 }; /* the columns of RUN_COLUMNS */

static int read_info(sqlite3_stmt *st, nb_run_info *r) {
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->task = dup_col(st, 1);
    r->dataset = dup_col(st, 2);
    r->norm = dup_col(st, 3);
    r->seed = sqlite3_column_int64(st, 4);
    char *status = dup_col(st, 5);
    r->message = dup_col(st, 6);
    r->started = sqlite3_column_double(st, 7);
    r->finished = col_double_or_nan(st, 8);
    r->pid = sqlite3_column_int64(st, 9);
    r->host = dup_col(st, 10);
    r->has_test_error = sqlite3_column_type(st, 12) != SQLITE_NULL;
    r->test_error = r->has_test_error ? nb_metric_from_kind(sqlite3_column_int(st, 12),
                                                            sqlite3_column_double(st, 11))
                                      : NAN;
    r->pid_start = sqlite3_column_int64(st, 14);
    const char *eff = nb_effective_status(status, r->pid, r->pid_start, r->host);
    r->status = eff == status ? status : strdup(eff);
    if (eff != status) free(status);
    if (!isnan(r->finished))
        r->duration = r->finished - r->started;
    else if (r->status && strcmp(r->status, "running") == 0)
        r->duration = nb_store_now() - r->started;
    else
        r->duration = col_double_or_nan(st, 13);
    if (!r->task || !r->dataset || !r->norm || !r->status || !r->host) return -1;
    return 0;
}

int nb_runs_list(nb_store *s, nb_run_info **runs, int *n, nb_err *err) {
    *runs = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s, RUN_COLUMNS "ORDER BY r.id", &st, "list runs", err)) return -1;
    nb_run_info *v = NULL;
    int cnt = 0, cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow((void **)&v, &cap, cnt, sizeof *v)) goto oom;
        if (read_info(st, &v[cnt++])) goto oom;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        nb_runs_free(v, cnt);
        return nb_store_fail(s, rc, "list runs", err);
    }
    *runs = v;
    *n = cnt;
    return 0;
oom:
    sqlite3_finalize(st);
    nb_runs_free(v, cnt);
    return nb_errf(err, "out of memory");
}

void nb_runs_free(nb_run_info *runs, int n) {
    for (int i = 0; i < n; i++)
        info_free(&runs[i]);
    free(runs);
}

/* ---- one run ------------------------------------------------------------------------------ */

static int read_kv(nb_store *s, const char *sql, int64_t id, nb_kv **out, int *n, nb_err *err) {
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s, sql, &st, "read a run", err)) return -1;
    sqlite3_bind_int64(st, 1, id);
    int cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow((void **)out, &cap, *n, sizeof **out)) goto oom;
        nb_kv *kv = &(*out)[(*n)++];
        kv->key = dup_col(st, 0);
        kv->value = dup_col(st, 1);
        if (!kv->key || !kv->value) goto oom;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return nb_store_fail(s, rc, "read a run", err);
    return 0;
oom:
    sqlite3_finalize(st);
    return nb_errf(err, "out of memory");
}

static int read_series(nb_store *s, nb_run_detail *d, nb_err *err) {
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s,
                         "SELECT name, step, wall, value, kind FROM metrics WHERE run = ? "
                         "ORDER BY name, step, rowid",
                         &st, "read a run's metrics", err))
        return -1;
    sqlite3_bind_int64(st, 1, d->info.id);
    int scap = 0, pcap = 0, rc;
    nb_series *cur = NULL;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!cur || strcmp(cur->name, name) != 0) {
            if (grow((void **)&d->series, &scap, d->nseries, sizeof *d->series)) goto oom;
            cur = &d->series[d->nseries++];
            memset(cur, 0, sizeof *cur);
            pcap = 0;
            if (!(cur->name = strdup(name))) goto oom;
        }
        /* cur is set above whenever it was NULL */
        // cppcheck-suppress nullPointerRedundantCheck
        if (cur->n >= pcap) {
            int nc = pcap ? pcap * 2 : 16;
            int64_t *a = realloc(cur->step, (size_t)nc * sizeof *a);
            if (a) cur->step = a;
            double *b = realloc(cur->wall, (size_t)nc * sizeof *b);
            if (b) cur->wall = b;
            double *c = realloc(cur->value, (size_t)nc * sizeof *c);
            if (c) cur->value = c;
            if (!a || !b || !c) goto oom;
            pcap = nc;
        }
        cur->step[cur->n] = sqlite3_column_int64(st, 1);
        cur->wall[cur->n] = sqlite3_column_double(st, 2);
        cur->value[cur->n] =
            nb_metric_from_kind(sqlite3_column_int(st, 4), sqlite3_column_double(st, 3));
        cur->n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return nb_store_fail(s, rc, "read a run's metrics", err);
    return 0;
oom:
    sqlite3_finalize(st);
    return nb_errf(err, "out of memory");
}

int nb_run_get(nb_store *s, int64_t id, nb_run_detail **out, nb_err *err) {
    *out = NULL;
    nb_run_detail *d = calloc(1, sizeof *d);
    if (!d) return nb_errf(err, "out of memory");
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s,
                         "SELECT * FROM (" RUN_COLUMNS "WHERE r.id = ?1), "
                         "(SELECT config, provenance FROM runs WHERE id = ?1)",
                         &st, "read a run", err)) {
        free(d);
        return -1;
    }
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(st);
        free(d);
        nb_errf(err, "no run '%lld' in results store '%s'", (long long)id, s->path);
        return nb_hintf(err, "'normbench runs' lists the runs it holds");
    }
    if (rc != SQLITE_ROW) {
        nb_store_fail(s, rc, "read a run", err);
        sqlite3_finalize(st);
        free(d);
        return -1;
    }
    int bad = read_info(st, &d->info);
    d->config = dup_col(st, RUN_NCOLS);
    d->provenance = dup_col(st, RUN_NCOLS + 1);
    sqlite3_finalize(st);
    if (bad || !d->config || !d->provenance) {
        nb_run_detail_free(d);
        return nb_errf(err, "out of memory");
    }
    if (read_kv(s, "SELECT key, value FROM params WHERE run = ? ORDER BY key", id, &d->params,
                &d->nparams, err) ||
        read_kv(s, "SELECT key, value FROM tags WHERE run = ? ORDER BY key", id, &d->tags,
                &d->ntags, err) ||
        read_series(s, d, err)) {
        nb_run_detail_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void nb_run_detail_free(nb_run_detail *d) {
    if (!d) return;
    info_free(&d->info);
    free(d->config);
    free(d->provenance);
    for (int i = 0; i < d->nparams; i++) {
        free(d->params[i].key);
        free(d->params[i].value);
    }
    free(d->params);
    for (int i = 0; i < d->ntags; i++) {
        free(d->tags[i].key);
        free(d->tags[i].value);
    }
    free(d->tags);
    for (int i = 0; i < d->nseries; i++) {
        free(d->series[i].name);
        free(d->series[i].step);
        free(d->series[i].wall);
        free(d->series[i].value);
    }
    free(d->series);
    free(d);
}

/* ---- report ------------------------------------------------------------------------------- */

static int group_cmp(const void *a, const void *b) {
    const nb_report_group *x = a, *y = b;
    int c = strcmp(x->task, y->task);
    if (!c) c = strcmp(x->dataset, y->dataset);
    if (!c) c = (x->order > y->order) - (x->order < y->order);
    if (!c) c = strcmp(x->norm, y->norm);
    return c;
}

void nb_report_sort(nb_report *r, nb_norm_rank_fn rank) {
    for (int i = 0; i < r->n; i++)
        r->groups[i].order = rank ? rank(r->groups[i].norm) : 0;
    qsort(r->groups, (size_t)r->n, sizeof *r->groups, group_cmp);
}

/* Values collected for one (group, metric) before the statistics. */
enum { ACC_TEST, ACC_MS, ACC_EPOCH_S, ACC_TARGET_STEPS, ACC_TARGET_S };
typedef struct acc {
    int group;
    int kind;   /* ACC_* */
    char *name; /* the test_* metric for ACC_TEST, NULL otherwise */
    double *v;
    int n, cap;
} acc;

/* Appends v to the accumulator (group, kind, name), creating it. Returns 0 or -1 (memory). */
static int acc_add(acc **accs, int *nacc, int *acap, int group, int kind, const char *name,
                   double v) {
    int a = -1;
    for (int i = 0; i < *nacc && a < 0; i++)
        if ((*accs)[i].group == group && (*accs)[i].kind == kind &&
            (kind != ACC_TEST || strcmp((*accs)[i].name, name) == 0))
            a = i;
    if (a < 0) {
        if (grow((void **)accs, acap, *nacc, sizeof **accs)) return -1;
        a = (*nacc)++;
        memset(&(*accs)[a], 0, sizeof(*accs)[a]);
        (*accs)[a].group = group;
        (*accs)[a].kind = kind;
        if (kind == ACC_TEST && !((*accs)[a].name = strdup(name))) return -1;
    }
    acc *x = &(*accs)[a];
    if (grow((void **)&x->v, &x->cap, x->n, sizeof(double))) return -1;
    x->v[x->n++] = v;
    return 0;
}

/* Mean and sample standard deviation of the finite values of v[0..n) (query.h's nb_stat); values
 * beyond 1e150 are scaled by the largest magnitude so that neither the sum nor the squares
 * overflow. */
static nb_stat stat_of(const double *v, int n) {
    nb_stat s = {0, NAN, NAN, 0, 0, 0};
    double scale = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i]))
            s.nan++;
        else if (isinf(v[i]))
            *(v[i] > 0 ? &s.pinf : &s.ninf) += 1;
        else {
            s.n++;
            if (fabs(v[i]) > scale) scale = fabs(v[i]);
        }
    }
    if (s.n == 0) return s;
    if (scale < 1e150) scale = 1; /* no overflow possible: the plain sums, bit for bit */
    double sum = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) sum += v[i] / scale;
    double m = sum / s.n; /* |m| <= 1 */
    s.mean = m * scale;
    if (s.n == 1) {
        s.std = 0;
        return s;
    }
    double ss = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) ss += (v[i] / scale - m) * (v[i] / scale - m);
    s.std = sqrt(ss / (s.n - 1)) * scale;
    return s;
}

static int find_group(const nb_report *r, const char *task, const char *dataset, const char *norm) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->groups[i].task, task) == 0 && strcmp(r->groups[i].dataset, dataset) == 0 &&
            strcmp(r->groups[i].norm, norm) == 0)
            return i;
    return -1;
}

static int metric_name_cmp(const void *a, const void *b) {
    return strcmp(((const nb_report_metric *)a)->name, ((const nb_report_metric *)b)->name);
}

static void accs_free(acc *a, int n) {
    for (int i = 0; i < n; i++) {
        free(a[i].name);
        free(a[i].v);
    }
    free(a);
}

/* Groups are keyed by the dataset and, when a run has one, its "variant" tag ("DATASET [VARIANT]"):
 * runs of a sweep over option lists (--batch 128,4) are compared within their own variant. */
#define JOIN_VARIANT                                                                               \
    "LEFT JOIN tags v ON v.run = r.id AND v.key = 'variant' "                                      \
    "LEFT JOIN tags mo ON mo.run = r.id AND mo.key = 'model' "
/* keep in step with nb_group_variant */
#define DATASET_VARIANT                                                                            \
    "r.dataset || coalesce(' [' || coalesce(mo.value || coalesce(', ' || v.value, ''), v.value) "  \
    "|| ']', '')"

const char *nb_group_variant(const char *model, const char *variant, char *buf, size_t size) {
    if (!model && !variant) return NULL;
    snprintf(buf, size, "%s%s%s", model ? model : "", model && variant ? ", " : "",
             variant ? variant : "");
    return buf;
}

int nb_report_build(nb_store *s, const char *task, const nb_target *target, nb_report **out,
                    nb_err *err) {
    *out = NULL;
    nb_report *r = calloc(1, sizeof *r);
    if (!r) return nb_errf(err, "out of memory");
    sqlite3_stmt *st = NULL;
    acc *accs = NULL;
    int nacc = 0, acap = 0, gcap = 0, rc;
    const char *what = "build the report";

    /* 1. every run, for the groups and their status counts */
    if (nb_store_prepare(
            s,
            "SELECT r.task, " DATASET_VARIANT " AS ds, r.norm, r.status, r.pid, "
            "r.host, r.pid_start, coalesce(mo.value, CASE WHEN json_valid(r.config) THEN "
            "json_extract(r.config, '$.model') END) FROM runs r " JOIN_VARIANT
            "WHERE ?1 IS NULL OR r.task = ?1 ORDER BY r.task, ds, r.norm, r.id",
            &st, what, err))
        goto fail;
    if (task) sqlite3_bind_text(st, 1, task, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        const char *d = (const char *)sqlite3_column_text(st, 1);
        const char *nm = (const char *)sqlite3_column_text(st, 2);
        int g = r->n - 1; /* rows come grouped */
        if (g < 0 || strcmp(r->groups[g].task, t) || strcmp(r->groups[g].dataset, d) ||
            strcmp(r->groups[g].norm, nm)) {
            if (grow((void **)&r->groups, &gcap, r->n, sizeof *r->groups)) goto oom;
            nb_report_group *ng = &r->groups[r->n++];
            memset(ng, 0, sizeof *ng);
            ng->ms_per_step = stat_of(NULL, 0);
            ng->task = strdup(t);
            ng->dataset = strdup(d);
            ng->norm = strdup(nm);
            ng->model = dup_col(st, 7);
            if (!ng->task || !ng->dataset || !ng->norm ||
                (sqlite3_column_type(st, 7) != SQLITE_NULL && !ng->model))
                goto oom;
            g = r->n - 1;
        }
        nb_report_group *gr = &r->groups[g];
        const char *status = nb_effective_status(
            (const char *)sqlite3_column_text(st, 3), sqlite3_column_int64(st, 4),
            sqlite3_column_int64(st, 6), (const char *)sqlite3_column_text(st, 5));
        if (strcmp(status, "finished") == 0)
            gr->finished++;
        else if (strcmp(status, "diverged") == 0)
            gr->diverged++;
        else if (strcmp(status, "failed") == 0)
            gr->failed++;
        else if (strcmp(status, "interrupted") == 0)
            gr->interrupted++;
        else if (strcmp(status, "crashed") == 0)
            gr->crashed++;
        else
            gr->running++;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, what, err);
        goto fail;
    }

    /* 2. each finished run's final value (largest step) of every test_* metric, of every best_*
     * metric (the best validation value of a task that keeps its best parameters: the reader's
     * papers report validation error only), of tokens_per_s (mt) and of ms_per_step */
    if (nb_store_prepare(s,
                         "SELECT r.task, " DATASET_VARIANT ", r.norm, f.name, f.value, f.kind "
                         "FROM ("
                         "  SELECT run, name, value, kind, row_number() OVER ("
                         "    PARTITION BY run, name ORDER BY step DESC, rowid DESC) AS rn"
                         "  FROM metrics WHERE name GLOB 'test_*' OR name GLOB 'best_*' OR "
                         "name GLOB 'val_preact_*' OR name IN ("
                         "'ms_per_step', 'tokens_per_s', "
                         "'epoch_seconds')) f "
                         "JOIN runs r ON r.id = f.run " JOIN_VARIANT
                         "WHERE f.rn = 1 AND r.status = 'finished' AND (?1 IS NULL OR r.task = ?1) "
                         "ORDER BY f.run, f.name",
                         &st, what, err))
        goto fail;
    if (task) sqlite3_bind_text(st, 1, task, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int g = find_group(r, (const char *)sqlite3_column_text(st, 0),
                           (const char *)sqlite3_column_text(st, 1),
                           (const char *)sqlite3_column_text(st, 2));
        if (g < 0) continue; /* a run added between the two queries */
        const char *name = (const char *)sqlite3_column_text(st, 3);
        int kind = strcmp(name, "ms_per_step") == 0     ? ACC_MS
                   : strcmp(name, "epoch_seconds") == 0 ? ACC_EPOCH_S
                                                        : ACC_TEST;
        double v = nb_metric_from_kind(sqlite3_column_int(st, 5), sqlite3_column_double(st, 4));
        if (acc_add(&accs, &nacc, &acap, g, kind, name, v)) goto oom;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE) {
        nb_store_fail(s, rc, what, err);
        goto fail;
    }

    /* 2b. steps and seconds until each finished run first reached the target */
    if (target && target->metric) {
        if (nb_store_prepare(s,
                             "SELECT r.task, " DATASET_VARIANT ", r.norm, r.id, "
                             "(SELECT min(m.step) FROM metrics m WHERE m.run = r.id AND "
                             "  m.name = ?2 AND m.kind = 0 AND "
                             "  CASE WHEN ?4 THEN m.value >= ?3 ELSE m.value <= ?3 END), "
                             "(SELECT min(m.wall) FROM metrics m WHERE m.run = r.id AND "
                             "  m.name = ?2 AND m.kind = 0 AND "
                             "  CASE WHEN ?4 THEN m.value >= ?3 ELSE m.value <= ?3 END) "
                             "FROM runs r " JOIN_VARIANT
                             "WHERE r.status = 'finished' AND (?1 IS NULL OR r.task = ?1) "
                             "ORDER BY r.id",
                             &st, what, err))
            goto fail;
        if (task) sqlite3_bind_text(st, 1, task, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, target->metric, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, target->value);
        sqlite3_bind_int(st, 4, target->higher_is_better);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int g = find_group(r, (const char *)sqlite3_column_text(st, 0),
                               (const char *)sqlite3_column_text(st, 1),
                               (const char *)sqlite3_column_text(st, 2));
            if (g < 0) continue;
            r->groups[g].target_runs++;
            if (sqlite3_column_type(st, 4) == SQLITE_NULL) continue; /* never reached */
            r->groups[g].target_reached++;
            if (acc_add(&accs, &nacc, &acap, g, ACC_TARGET_STEPS, NULL,
                        (double)sqlite3_column_int64(st, 4)) ||
                acc_add(&accs, &nacc, &acap, g, ACC_TARGET_S, NULL, sqlite3_column_double(st, 5)))
                goto oom;
        }
        sqlite3_finalize(st);
        st = NULL;
        if (rc != SQLITE_DONE) {
            nb_store_fail(s, rc, what, err);
            goto fail;
        }
    }

    /* 3. statistics */
    for (int i = 0; i < nacc; i++) {
        nb_report_group *g = &r->groups[accs[i].group];
        nb_stat stt = stat_of(accs[i].v, accs[i].n);
        switch (accs[i].kind) {
        case ACC_MS:
            g->ms_per_step = stt;
            continue;
        case ACC_EPOCH_S:
            g->epoch_seconds = stt;
            continue;
        case ACC_TARGET_STEPS:
            g->target_steps = stt;
            continue;
        case ACC_TARGET_S:
            g->target_seconds = stt;
            continue;
        default:
            break;
        }
        nb_report_metric *m = realloc(g->metrics, (size_t)(g->nmetrics + 1) * sizeof *m);
        if (!m) goto oom;
        g->metrics = m;
        m[g->nmetrics].name = accs[i].name;
        m[g->nmetrics].stat = stt;
        g->nmetrics++;
        accs[i].name = NULL;
    }
    for (int i = 0; i < r->n; i++)
        if (r->groups[i].nmetrics > 1)
            qsort(r->groups[i].metrics, (size_t)r->groups[i].nmetrics, sizeof(nb_report_metric),
                  metric_name_cmp);

    /* 4. speed relative to layer in the same task and dataset */
    for (int i = 0; i < r->n; i++) {
        nb_report_group *g = &r->groups[i];
        if (strcmp(g->norm, "layer") == 0) continue;
        int l = find_group(r, g->task, g->dataset, "layer");
        if (l < 0) continue;
        const nb_stat *ms = &g->ms_per_step, *ml = &r->groups[l].ms_per_step;
        if (ms->n == 0 || ml->n == 0 || !(ms->mean > 0) || !(ml->mean > 0)) continue;
        g->has_speed = 1;
        g->speed_base_n = ml->n;
        g->speed = ml->mean / ms->mean;
        /* A single run on either side has no spread to propagate: NaN, not a made-up 0. */
        double rl = ml->std / ml->mean, rx = ms->std / ms->mean;
        g->speed_std = (ms->n < 2 || ml->n < 2) ? NAN : g->speed * sqrt(rl * rl + rx * rx);
        /* The RMSNorm paper's speed-up, (T_layer - T_x)/T_layer = 1 - T_x/T_layer; its spread is
         * that of the time ratio T_x/T_layer. */
        g->speedup = 1 - ms->mean / ml->mean;
        g->speedup_std =
            (ms->n < 2 || ml->n < 2) ? NAN : (ms->mean / ml->mean) * sqrt(rl * rl + rx * rx);
    }
    qsort(r->groups, (size_t)r->n, sizeof *r->groups, group_cmp);
    accs_free(accs, nacc);
    *out = r;
    return 0;
oom:
    nb_errf(err, "out of memory");
fail:
    sqlite3_finalize(st);
    accs_free(accs, nacc);
    nb_report_free(r);
    return -1;
}

void nb_report_free(nb_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        nb_report_group *g = &r->groups[i];
        free(g->task);
        free(g->dataset);
        free(g->norm);
        free(g->model);
        for (int j = 0; j < g->nmetrics; j++)
            free(g->metrics[j].name);
        free(g->metrics);
    }
    free(r->groups);
    free(r);
}

char *nb_speed_sentence(const nb_report_group *g, char *buf, size_t size) {
    buf[0] = '\0';
    if (!g->has_speed) return buf;
    double r = g->speed, sd = g->speed_std;
    const char *dir = "faster";
    if (r < 1) {
        sd = sd / r / r; /* same relative error on 1/r */
        r = 1 / r;
        dir = "slower";
    }
    if (isnan(sd)) { /* say which side has a single timed run */
        char why[160];
        if (g->ms_per_step.n < 2 && g->speed_base_n < 2)
            snprintf(why, sizeof why, "one timed run each");
        else
            snprintf(why, sizeof why, "one timed run of %s",
                     g->ms_per_step.n < 2 ? g->norm : "layer");
        snprintf(buf, size, "%s ran %.2f× %s per step than layer (%s: no spread)", g->norm, r, dir,
                 why);
    } else
        snprintf(buf, size, "%s ran %.2f ± %.2f× %s per step than layer", g->norm, r, sd, dir);
    return buf;
}

int nb_run_find_by_tag(nb_store *s, const char *key, const char *value, const char *status,
                       int64_t *id, nb_err *err) {
    *id = 0;
    sqlite3_stmt *st = NULL;
    if (nb_store_prepare(s,
                         "SELECT r.id FROM runs r JOIN tags t ON t.run = r.id "
                         "WHERE t.key = ?1 AND t.value = ?2 AND (?3 IS NULL OR r.status = ?3) "
                         "ORDER BY r.id DESC LIMIT 1",
                         &st, "look up runs by tag", err))
        return -1;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_TRANSIENT);
    if (status)
        sqlite3_bind_text(st, 3, status, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 3);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return nb_store_fail(s, rc, "look up runs by tag", err);
    return 0;
}

/* Keep in step with nb_report_ignored_keys (the SQL list below) and docs/guide.md, report. */
#define IGNORED_KEYS "'seed', 'threads', 'data_dir', 'eval_batch', 'log_every'"
const char nb_report_ignored_keys[] = "seed, threads, data_dir, eval_batch, log_every";

int nb_report_config_mixes(nb_store *s, const char *task, nb_config_mix **out, int *n,
                           nb_err *err) {
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    const char *what = "compare the runs' configurations";
    if (nb_store_prepare(s,
                         "SELECT r.task, " DATASET_VARIANT " AS ds, r.norm, j.key, "
                         "group_concat(DISTINCT j.value) FROM runs r " JOIN_VARIANT
                         "JOIN json_each(CASE WHEN json_valid(r.config) THEN r.config ELSE '{}' "
                         "END) j WHERE r.status = 'finished' AND (?1 IS NULL OR r.task = ?1) AND "
                         "j.key NOT IN (" IGNORED_KEYS ") GROUP BY r.task, ds, r.norm, j.key "
                         "HAVING count(DISTINCT j.value) > 1 ORDER BY r.task, ds, r.norm, j.key",
                         &st, what, err))
        return -1;
    if (task) sqlite3_bind_text(st, 1, task, -1, SQLITE_STATIC);
    nb_config_mix *m = NULL;
    int cap = 0, k = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow((void **)&m, &cap, k, sizeof *m)) goto oom;
        nb_config_mix *x = &m[k++];
        x->task = dup_col(st, 0);
        x->dataset = dup_col(st, 1);
        x->norm = dup_col(st, 2);
        x->key = dup_col(st, 3);
        x->values = dup_col(st, 4);
        if (!x->task || !x->dataset || !x->norm || !x->key || !x->values) goto oom;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        nb_config_mixes_free(m, k);
        return nb_store_fail(s, rc, what, err);
    }
    *out = m;
    *n = k;
    return 0;
oom:
    sqlite3_finalize(st);
    nb_config_mixes_free(m, k);
    return nb_errf(err, "out of memory");
}

void nb_config_mixes_free(nb_config_mix *m, int n) {
    for (int i = 0; m && i < n; i++) {
        free(m[i].task);
        free(m[i].dataset);
        free(m[i].norm);
        free(m[i].key);
        free(m[i].values);
    }
    free(m);
}

int nb_metric_names(nb_store *s, const char *task, char ***names, int *n, nb_err *err) {
    *names = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    const char *what = "list the metrics";
    if (nb_store_prepare(s,
                         "SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.id = m.run "
                         "WHERE r.status = 'finished' AND (?1 IS NULL OR r.task = ?1) "
                         "ORDER BY m.name",
                         &st, what, err))
        return -1;
    if (task) sqlite3_bind_text(st, 1, task, -1, SQLITE_STATIC);
    char **v = NULL;
    int cap = 0, k = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow((void **)&v, &cap, k, sizeof *v) || !(v[k] = dup_col(st, 0))) {
            sqlite3_finalize(st);
            nb_names_free(v, k);
            return nb_errf(err, "out of memory");
        }
        k++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        nb_names_free(v, k);
        return nb_store_fail(s, rc, what, err);
    }
    *names = v;
    *n = k;
    return 0;
}

void nb_names_free(char **names, int n) {
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}
