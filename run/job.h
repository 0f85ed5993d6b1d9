/* run/job.h — a run as a value: everything one training run is (its configuration and labels,
 * where it records, the run it resumes and that run's checkpoint, the data-parallel context, the
 * stop flag), built once and then executed.
 *
 * Its entry points:
 * - from arguments: cmd/cmd_run.c's nb_run_parse fills a job from a `run` command line (the
 *   option table and its messages are the command's); sweep uses it for its jobs' arguments;
 * - from a configuration: nb_job_from_config builds a job from the configuration a run records
 *   (nb_job_config_json) and its hosting (nb_job_hosting: explicit fields, as JSON between
 *   ranks): a resumed run's from the store, and every job an MPI sweep hands to a rank
 *   (run/mpi.h) from the configuration and hosting rank 0 built, so that no rank parses a
 *   command line;
 * - from the store: nb_job_from_store reads a run to resume (its claimability, checkpoint and
 *   identity, and through util/json.h's reader its stored configuration, from which the
 *   training configuration is rebuilt: nb_job_from_config, and its stored hosting, param
 *   "hosting": nb_job_stored_hosting), also for every rank of a data-parallel run;
 * - nb_job_exec trains it and records it.
 *
 * The run layer prints nothing itself: its messages go through the job's nb_job_io (cmd/ prints
 * them), its failures come back as exit statuses with the message said. Data-parallel runs and
 * sweeps under MPI: run/mpi.h. */
#ifndef NB_RUN_JOB_H
#define NB_RUN_JOB_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "results/store.h"
#include "tasks/checkpoint.h"
#include "tasks/task.h"
#include "util/err.h"
#include "util/json.h"

/* A command's (and a job's) exit status. */
enum { NB_EXIT_OK = 0, NB_EXIT_FAIL = 1, NB_EXIT_USAGE = 2 };

/* Where a run records: the local store (the job opens it) or a proxy (run/mpi.c sends every
 * record to the rank that holds the store; a sweep's thread locks the store it shares). */
typedef struct nb_run_rec {
    void *ctx;
    /* Creates the run (provenance: spec->provenance_json), returning its id and the store's. */
    int (*create)(void *ctx, const nb_run_spec *spec, int64_t *run, char *store_id, size_t size,
                  nb_err *err);
    int (*tag)(void *ctx, int64_t run, const char *key, const char *value, nb_err *err);
    int (*param)(void *ctx, int64_t run, const char *key, const char *value, nb_err *err);
    int (*metrics)(void *ctx, int64_t run, const nb_metric *m, int n, nb_err *err);
    int (*finish)(void *ctx, int64_t run, const char *status, const char *msg, nb_err *err);
    /* A checkpoint was written to path (in ckpt_dir): copy it where the store keeps them. */
    int (*ckpt_saved)(void *ctx, int64_t run, const char *path, nb_err *err);
    const char *ckpt_dir; /* where this process writes its checkpoints */
} nb_run_rec;

/* A recorder into a store this process holds open (nb_run_rec_store). */
typedef struct nb_store_rec {
    nb_store *store;
    pthread_mutex_t *mu; /* NULL, or the lock every use of the store takes (a sweep's threads) */
} nb_store_rec;

/* rec records into store (ctx holds what it needs: keep it alive as long as rec), every call
 * under mu when it is not NULL. */
void nb_run_rec_store(nb_run_rec *rec, nb_store_rec *ctx, nb_store *store, pthread_mutex_t *mu);

/* What a job says and asks of the command that runs it. Any member may be NULL (silent). */
typedef struct nb_job_io {
    void *ctx;
    /* A message for the user (stderr): whole lines, each ending in '\n'. */
    void (*say)(void *ctx, const char *text);
    /* The training's progress (tasks/task.h), opened with quiet, drawn, ended. */
    void (*progress_begin)(void *ctx, int quiet);
    void (*progress)(void *ctx, const nb_progress *p);
    void (*progress_end)(void *ctx);
    /* The run's result line, "run ID STATUS" (stdout). */
    void (*result)(void *ctx, int64_t run, const char *status);
    /* Makes sure dataset name is installed in data_dir (fetching it on first use); returns an
     * exit status (the message said). */
    int (*ensure_dataset)(void *ctx, const char *name, const char *data_dir, int quiet);
    /* The compute libraries' settings as newly allocated JSON, for the provenance. */
    char *(*compute_json)(void *ctx);
} nb_job_io;

/* A run, built and not yet executed. Free with nb_job_free. */
typedef struct nb_job {
    /* --- the run: configuration and labels --- */
    nb_train_cfg cfg; /* cfg.task_opts is allocated */
    const char *db, *tag, *variant;
    int quiet, threads;
    int no_fetch;  /* never download the dataset */
    int bn_sync;   /* data-parallel BatchNorm over the global batch */
    char *args;    /* the arguments as recorded (separated by \x1f), for the store's "argv" */
    char *hosting; /* a new run's hosting as recorded (param "hosting": nb_job_hosting_json);
                      NULL: nb_job_hosting_of's */
    char *strings; /* storage the strings above point into, when the job owns it */
    const char **argv_store; /* likewise, the argument vector they were parsed from */
    nb_json_object stored;   /* a resumed run's stored configuration (cfg's strings point in) */
    nb_json_object hosted;   /* the hosting it was handed as JSON (nb_job_hosting_read) */
    int data_dir_given;      /* built from arguments: --data-dir was given */

    /* --- the run it continues (resume_run > 0) --- */
    int64_t resume_run, resume_step; /* resume_step -1: from scratch */
    int from_scratch;
    nb_ckpt_ident resume_ident; /* what the checkpoint belongs to (the stored identity) */
    char resume_ckpt[4096];     /* the checkpoint to resume from ("" : start over) */
    int64_t resume_ranks;       /* the ranks it was started on (0: unknown) */
    int64_t resume_bn_groups;   /* its BatchNorm groups (0: unknown) */
    char *resume_bytes;         /* data-parallel, ranks other than 0: rank 0's checkpoint */
    size_t resume_len;

    /* --- how it is hosted --- */
    int dp;                      /* one run over every MPI rank (run/mpi.h) */
    const nb_run_rec *rec;       /* NULL: the store named by db */
    volatile sig_atomic_t *stop; /* NULL: the job installs its own signal handlers */
    int no_result_line;          /* no "run N STATUS" */
    nb_job_io io;
} nb_job;

/* An empty job that says and asks through io (copied). */
void nb_job_init(nb_job *j, const nb_job_io *io);
/* Frees what the job owns; j may be an nb_job_init'ed job never built. */
void nb_job_free(nb_job *j);

/* How the process hosting a run is set up, as opposed to how the run trains (its stored
 * configuration): what a job built from a configuration takes beside it. */
typedef struct nb_job_hosting {
    const char *db;       /* where it records (NULL: the job's db as it is) */
    const char *data_dir; /* its data directory; NULL: not given (nb_job_from_config: the stored
                             one; its JSON: the default of the process hosting it, each MPI
                             rank's own) */
    int threads;          /* --threads; 0: not given (the default) */
    int quiet, no_fetch;  /* --quiet, --no-fetch */
    int device;           /* --device cuda */
    int bn_sync;          /* --bn-sync */
} nb_job_hosting;

/* The hosting of j as built from arguments (its data directory only when it was given). */
void nb_job_hosting_of(const nb_job *j, nb_job_hosting *h);
/* h as JSON (data_dir null when not given), newly allocated; NULL when out of memory. */
char *nb_job_hosting_json(const nb_job_hosting *h);
/* h from its JSON (nb_job_hosting_json), read with util/json.h's reader into j (which keeps the
 * strings h points to). Returns 0, or -1 with err. */
int nb_job_hosting_read(nb_job *j, const char *json, nb_job_hosting *h, nb_err *err);

/* How cmd/ reads, from a stored run's recorded arguments (argv[0..argc), "run" not among
 * them), the options that say how the process hosting it is set up (--db, --data-dir,
 * --threads, --quiet, --no-fetch, --device, --bn-sync) into h: only for a run of a legacy store,
 * recorded before its hosting was (nb_job_stored_hosting). The run's configuration never comes
 * from them. */
typedef void (*nb_job_host_fn)(int argc, const char **argv, nb_job_hosting *h);

/* The hosting stored run d recorded (param "hosting", nb_job_hosting_json), newly allocated. A
 * run of a legacy store, recorded before normbench recorded its hosting, has it read from its
 * recorded arguments (param "argv") through legacy (NULL, or a run with neither: the defaults):
 * the one place a recorded command line is read. NULL when out of memory. */
char *nb_job_stored_hosting(const nb_run_detail *d, nb_job_host_fn legacy);

/* The hosting hosting (nb_job_hosting_json) recording into db instead (NULL: as it says), quiet
 * when quiet: newly allocated. Returns NULL with err when it is not valid or out of memory. */
char *nb_job_hosting_rehost(const char *hosting, const char *db, int quiet, nb_err *err);

/* Splits a run's recorded arguments args (separated by \x1f; newly allocated, owned by j from
 * here; NULL: none) into *argv, *argc (kept by j). Returns 0, or -1 with err. */
int nb_job_take_args(nb_job *j, char *args, const char ***argv, int *argc, nb_err *err);

/* Builds j's training configuration from a run's stored configuration (config, the JSON the
 * run recorded, read with util/json.h's reader: task, norm, dataset, every common option and
 * the task's own options in force), hosted as h says (NULL: as the defaults, with the stored
 * data directory). The rebuilt configuration must write the stored one again (but data_dir,
 * threads and a data-parallel run's ranks, hosts and BatchNorm statistics): a key missing, not
 * valid, unknown to this normbench or rebuilt differently is refused. Returns 0, or -1 with
 * err. */
int nb_job_from_config(nb_job *j, const char *config, const nb_job_hosting *h, nb_err *err);

/* j's training configuration as the store records it (what nb_job_from_config builds a job
 * from; without a data-parallel run's ranks and hosts), newly allocated; NULL when out of
 * memory. A sweep under MPI sends it to the rank that runs the job. */
char *nb_job_config_json(const nb_job *j);

/* The run id of store db (NULL: j->db) to resume (from_scratch: start it over under its id;
 * quiet: no progress), built into j: the run's claimability and checkpoint (its identity
 * checked), and nb_job_from_config from its stored configuration, hosted as its stored hosting
 * says (nb_job_stored_hosting, legacy for a legacy store's run; a data directory not given:
 * data_dir, this process's default; then quiet, and this store). For a data-parallel job
 * (j->dp) rank 0 alone reads the store and the checkpoint and sends them, with the hosting, to
 * the other ranks. Returns 0 or an exit status after the message. */
int nb_job_from_store(nb_job *j, const char *db, int64_t id, int from_scratch, int quiet,
                      const char *data_dir, nb_job_host_fn legacy);

/* Makes j (built from arguments) a job of another command (a sweep's, also on another MPI
 * rank): it records through rec, stops when *stop is set, prints no result line; resume_run > 0:
 * it continues that run, claimed by the host already (its checkpoint ckpt, with the identity
 * ident, at resume_step; ckpt NULL: it starts over under its id). */
void nb_job_host(nb_job *j, const nb_run_rec *rec, volatile sig_atomic_t *stop, int64_t resume_run,
                 int64_t resume_step, const nb_ckpt_ident *ident, const char *ckpt);

/* Trains the job and records it. Returns the exit status (0: finished). */
int nb_job_exec(nb_job *j);

/* The store-side part of resuming run id of store db (open: that store already open in this
 * process, else NULL; a process that has the store open must pass it: opening a SQLite file a
 * second time and closing it drops the process's POSIX locks on it): checks that it can be
 * resumed, and where from: its checkpoint's path (ckpt) must exist and belong to it (store, run,
 * task, norm, seed, configuration; its identity into *ident, its step into *ckpt_step; with
 * from_scratch no checkpoint is needed and *ckpt_step is -1). Its stored hosting goes to *hosting
 * (nb_job_stored_hosting, through legacy; newly allocated) and its stored configuration to
 * *config (newly allocated), and how it was trained (read from that configuration) to *ranks
 * and *bn_groups (either may be NULL). Returns 0, or an exit status with err set. */
int nb_job_resume_prepare(nb_store *open, const char *db, int64_t id, int from_scratch,
                          nb_job_host_fn legacy, char **hosting, char **config, char *ckpt,
                          size_t ckpt_size, int64_t *ckpt_step, nb_ckpt_ident *ident,
                          int64_t *ranks, int64_t *bn_groups, nb_err *err);

/* DB-checkpoints/run-ID.ckpt, beside the store (make_dir: create the directory). Returns 0, or
 * -1 with err. */
int nb_job_checkpoint_file(char *out, size_t size, const char *db, int64_t id, int make_dir,
                           nb_err *err);

#endif
