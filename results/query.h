/* results/query.h — reading the results store: the run list, one run in full, and the report
 * aggregation behind `normbench report`.
 *
 * A run whose status is "running" but whose process no longer exists on this host (or whose pid
 * now belongs to a process started at another time) is reported
 * with status "crashed" (computed at read time; the store is not changed). All functions return
 * 0 on success and -1 with err filled on failure; results are owned by the caller and freed with
 * the matching *_free function. */
#ifndef NB_RESULTS_QUERY_H
#define NB_RESULTS_QUERY_H

#include <stdint.h>

#include "results/store.h"

typedef struct nb_run_info {
    int64_t id;
    char *task, *dataset, *norm;
    int64_t seed;
    char *status;    /* running|finished|failed|interrupted|diverged|crashed */
    char *message;   /* NULL when none */
    double started;  /* seconds since the Unix epoch */
    double finished; /* NAN while running or crashed */
    double duration; /* seconds: finished - started; for a running run, until now; for a crashed
                        one, the wall time of its last metric; NAN when unknown */
    int64_t pid;
    int64_t pid_start; /* the process's start time (results/proc.h), 0 when not recorded */
    char *host;
    int has_test_error; /* the run recorded "test_error" */
    double test_error;  /* its value at the largest step (NaN/Inf restored) */
} nb_run_info;

/* All runs, by id. */
int nb_runs_list(nb_store *s, nb_run_info **runs, int *n, nb_err *err);
void nb_runs_free(nb_run_info *runs, int n);

/* "crashed" if status is "running" and host is this host and the process (pid, with its start
 * time pid_start when recorded, > 0) is gone (results/proc.h): a reused pid does not keep a
 * crashed run "running". Else status. Returns a static string or status itself. */
const char *nb_effective_status(const char *status, int64_t pid, int64_t pid_start,
                                const char *host);

typedef struct nb_kv {
    char *key, *value;
} nb_kv;

typedef struct nb_series {
    char *name;
    int n;         /* points, by step */
    int64_t *step; /* (n) */
    double *wall;  /* (n) */
    double *value; /* (n), NaN/Inf restored */
} nb_series;

typedef struct nb_run_detail {
    nb_run_info info;
    char *config, *provenance; /* JSON objects as stored */
    nb_kv *params;             /* (nparams), by key */
    int nparams;
    nb_kv *tags; /* (ntags), by key */
    int ntags;
    nb_series *series; /* (nseries), by name; the last value is series[i].value[n - 1] */
    int nseries;
} nb_run_detail;

/* One run in full. An unknown id is an error naming it. */
int nb_run_get(nb_store *s, int64_t id, nb_run_detail **out, nb_err *err);
void nb_run_detail_free(nb_run_detail *d);

/* n values, their mean and sample standard deviation (0 when n == 1; NAN when n == 0). */
/* Mean and sample standard deviation over the finite values (n of them); a value that is
 * infinite or NaN is left out and counted: pinf (+inf), ninf (-inf), nan. mean is NaN when n is 0,
 * std 0 for one value and NaN for none; both are computed without overflow for any finite
 * values (a std beyond the largest double is +inf). */
typedef struct nb_stat {
    int n;
    double mean, std;
    int pinf, ninf, nan;
} nb_stat;

typedef struct nb_report_metric {
    char *name; /* "test_error", "test_nll", ... */
    nb_stat stat;
} nb_report_metric;

typedef struct nb_report_group {
    char *task, *dataset, *norm;
    int order; /* the norm's place within its task and dataset (nb_report_sort); 0 by default */
    /* the runs' "model" tag (mt: "rnnsearch", "transformer small post"), else (a store written
     * before the tag) the configuration's "model", else NULL */
    char *model;
    int finished;                                        /* runs averaged */
    int diverged, failed, interrupted, crashed, running; /* counted, never averaged */
    /* (nmetrics), by name: the final values of each "test_*", "best_*" and "val_preact_*"
     * metric (the last, for the RMS paper's Table 5, shown by report --paper only) */
    nb_report_metric *metrics;
    int nmetrics;
    nb_stat ms_per_step; /* final "ms_per_step" of each finished run */
    /* Speed relative to `layer` in the same task and dataset: mean_layer / mean_this, with its
     * standard deviation by error propagation (NaN when either side has a single run). has_speed is
     * 0 for layer itself and when either side has no ms_per_step. speed_base_n: layer's timed
     * runs (ms_per_step.n is this group's), so that a missing spread can say which side has one. */
    int has_speed, speed_base_n;
    double speed, speed_std;
    /* The RMSNorm paper's speed-up against layer, (T_layer - T_x)/T_layer, and its spread
     * (NaN for a single run on either side); valid when has_speed. */
    double speedup, speedup_std;
    nb_stat epoch_seconds; /* each finished run's last "epoch_seconds" (training time) */
    /* With a target: of target_runs finished runs, target_reached reached it, after
     * target_steps steps and target_seconds wall seconds (over the runs that reached it). */
    int target_runs, target_reached;
    nb_stat target_steps, target_seconds;
} nb_report_group;

/* A level of a metric to reach: metric <= value (errors, losses) or >= (recalls). */
typedef struct nb_target {
    const char *metric; /* NULL: no target */
    double value;
    int higher_is_better;
} nb_target;

typedef struct nb_report {
    nb_report_group *groups; /* by task, dataset, then norm in the canonical order */
    int n;
} nb_report;

/* What a run is compared within besides its task and dataset: its "model" tag (the task's
 * model label: mt's "transformer small post") and its "variant" tag, as "MODEL, VARIANT",
 * either alone, or NULL when it has neither. Written into buf (truncated to fit). */
const char *nb_group_variant(const char *model, const char *variant, char *buf, size_t size);

/* Aggregates finished runs by (task, dataset, norm), where dataset carries the run's model and
 * "variant" tags when it has them, as "DATASET [MODEL, VARIANT]" (nb_group_variant); task NULL
 * means all tasks. */
/* How a report orders a task's norms: by rank(norm) ascending, then by name. The store knows no
 * norm table (nn/ is above it): the command gives the table's order (cmd/cmd_report.c). */
typedef int (*nb_norm_rank_fn)(const char *norm);
/* Sorts r's groups by task, dataset, rank(norm) (NULL: none) and norm name; nb_report_build
 * leaves them in that order with every rank 0 (by name). */
void nb_report_sort(nb_report *r, nb_norm_rank_fn rank);

int nb_report_build(nb_store *s, const char *task, const nb_target *target, nb_report **out,
                    nb_err *err);
void nb_report_free(nb_report *r);

/* The sentence "rms ran 1.21 ± 0.03× faster per step than layer" (or "slower", with the inverse
 * ratio, when speed < 1) into buf; "" when the group has no speed. Returns buf. */
char *nb_speed_sentence(const nb_report_group *g, char *buf, size_t size);

/* The configuration keys that do not change what a run measures, so that report averages runs
 * that differ in them as if they differed only in the seed: "seed, threads, ...". */
extern const char nb_report_ignored_keys[];

/* A configuration key in which the finished runs averaged in one report group differ, besides
 * those in nb_report_ignored_keys: runs that report would average as if they were seeds. */
typedef struct nb_config_mix {
    char *task, *dataset, *norm; /* the group, as in nb_report_group */
    char *key;                   /* the configuration key */
    char *values;                /* its distinct values, comma-separated */
} nb_config_mix;

/* Every such key of every group (task NULL: all tasks), by group then key. */
int nb_report_config_mixes(nb_store *s, const char *task, nb_config_mix **out, int *n, nb_err *err);
void nb_config_mixes_free(nb_config_mix *m, int n);

/* The distinct metric names the finished runs (of task; NULL: all) recorded, sorted. */
int nb_metric_names(nb_store *s, const char *task, char ***names, int *n, nb_err *err);
void nb_names_free(char **names, int n);

/* Sets *id to the newest run tagged key=value whose stored status is `status` (NULL: any), or
 * to 0 when there is none. */
int nb_run_find_by_tag(nb_store *s, const char *key, const char *value, const char *status,
                       int64_t *id, nb_err *err);

#endif
