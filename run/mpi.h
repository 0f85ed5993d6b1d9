/* run/mpi.h — normbench under an MPI launcher (Open MPI's mpirun, PMIx, Slurm's srun).
 *
 * MPI is started only when a launcher's environment variables say the process is one rank of a
 * job (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, SLURM_STEP_NUM_TASKS) or when --mpi is given;
 * a plain `normbench run` never touches it. Under MPI:
 *
 * - `sweep`: rank 0 plans the jobs, claims each in the store and hands it to an idle rank (a work
 *   queue); rank 0 trains jobs of its own too, in a thread beside the coordinator. Every job runs
 *   inside its rank (a job: run/job.h), never as a child process.
 * - Only rank 0 opens the SQLite store. Another rank records through a proxy (nb_mpi_recorder):
 *   the run's creation (with that rank's own provenance: host, CPU, threads), tags, parameters,
 *   metrics, checkpoints and the final status travel to rank 0 as messages and rank 0 writes
 *   them; the run's process (pid, host) is rank 0, the claimant of every job it hands out, so
 *   that a job whose MPI job died shows as crashed and is resumed by the next sweep.
 * - `run` over more than one rank: one data-parallel run (run/job.c); rank 0 records it. Its
 *   `--resume`: rank 0 reads the store and the checkpoint and sends them to the other ranks
 *   (nb_mpi_share_resume), which train from a private copy of the checkpoint.
 *
 * Only run/mpi.c includes <mpi.h>; only cmd/, run/ and bench/ include this header; the library
 * below (nn/, tasks/, results/, ...) knows nothing of MPI. */
#ifndef NB_RUN_MPI_H
#define NB_RUN_MPI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "run/job.h"
#include "results/store.h"
#include "tasks/checkpoint.h"
#include "tasks/task.h"

/* Where this module's messages go (whole lines, "error: ...", "hint: ...", "warning: ..."):
 * cmd/ sets it once, before nb_mpi_start, to print them; unset, they are dropped. */
void nb_mpi_set_say(void (*say)(void *ctx, const char *text), void *ctx);

/* Starts MPI when the environment says a launcher started this process, or when argv holds
 * --mpi (removed from argv, *argc lowered). Returns 0, or NB_EXIT_FAIL after saying an error
 * (--mpi given but MPI cannot start). */
int nb_mpi_start(int *argc, const char **argv);
/* Whether MPI was started, this process's rank, and the number of ranks (1 without MPI). */
int nb_mpi_on(void);
int nb_mpi_rank(void);
int nb_mpi_size(void);
/* Finalizes MPI when it was started; returns rc. */
int nb_mpi_end(int rc);
/* Whether the environment names an MPI launcher (the variables above). */
int nb_mpi_launched(void);

/* ---- data-parallel runs -------------------------------------------------------------------- */

/* Fills d for a run over every rank (MPI_Allreduce, MPI_Bcast on MPI_COMM_WORLD). */
void nb_mpi_dist(nb_dist *d, int bn_sync);
/* A barrier at which the waiting ranks sleep (a 0.2 ms poll) instead of spinning, so that a rank
 * working alone meanwhile has every core. */
void nb_mpi_idle_barrier(void);
/* The CPUs this process may run on (its affinity: mpirun binds each rank to a core by default),
 * or -1 when unknown. */
int nb_mpi_cpus(void);
/* BatchNorm's sums over the ranks (nb_norm_cfg.bn_sum). */
void nb_mpi_bn_sum(void *ctx, double *x, int n);
/* Every rank's host name as a JSON array (rank order), newly allocated; NULL when out of
 * memory. Collective: every rank calls it. */
char *nb_mpi_hosts_json(void);

/* Every rank's rc (an exit status, 0: go on) combined: the largest, on every rank. A rank that
 * failed alone (rank 0 opening the store) reports its error, then every rank stops with its
 * status instead of waiting for it in a collective. Collective: one of the set-up agreements
 * below (the same collective), so that it meets a rank whose set-up failed elsewhere. */
int nb_mpi_agree(int rc);

/* ---- a data-parallel run's set-up: the ranks agree before the first step ------------------- *
 *
 * Until its first training step a data-parallel run's only collectives are agreements, all made
 * of the same two collectives (every rank's status, stage and text length; then the texts), so
 * that wherever a rank's set-up stops, the others meet it at their next agreement and every
 * rank stops there instead of waiting: the start (NB_MPI_START: resume run ID or a new run), the
 * configuration (NB_MPI_CONFIG: the canonical configuration; the keys data_dir and threads may
 * differ per rank), nb_mpi_agree, and the data (the training loop's nb_dist.agree: what each
 * rank loaded). A difference names the first key (option) or part of the data that differs and
 * both ranks' values, on rank 0 in full and in one line on every other rank. */
enum { NB_MPI_FAILED = 0, NB_MPI_START, NB_MPI_CONFIG, NB_MPI_STATUS, NB_MPI_DATA };
/* Opens the set-up of a data-parallel run on this rank (an agreement is now due). */
void nb_mpi_setup_begin(void);
/* One agreement (stage NB_MPI_START or NB_MPI_CONFIG) of this rank's rc (an exit status: 0
 * going on; a rank that failed printed why) and text. Returns 0 on every rank, or the same exit
 * status on every rank after the messages (NB_EXIT_USAGE: the ranks' options differ). */
int nb_mpi_setup_agree(int stage, int rc, const char *text);
/* A rank whose set-up stopped (rc, an exit status) before its next agreement takes part in it,
 * so that no rank waits for it; nothing when no agreement is due (the set-up ended). */
void nb_mpi_setup_fail(int rc);

/* What rank 0 gives the other ranks of a data-parallel `run --resume` (rank 0 alone holds the
 * store and the checkpoint; the other ranks may share no filesystem with it). */
typedef struct nb_mpi_resume {
    int rc;              /* rank 0's exit status so far: non-zero, every rank stops with it */
    char *hosting;       /* its stored hosting (run/job.h's nb_job_stored_hosting: JSON) */
    char *config;        /* its stored configuration (JSON) */
    int64_t step;        /* the checkpoint's step (-1: the run starts over) */
    nb_ckpt_ident ident; /* what the checkpoint belongs to */
    int64_t bn_groups;   /* how many groups the run's BatchNorm statistics were taken over */
    int64_t ranks;       /* the ranks the run was started on */
    char *ckpt;          /* the checkpoint's bytes (NULL: none) */
    size_t ckpt_len;
} nb_mpi_resume;

/* Collective: rank 0's *r, and the bytes of the checkpoint ckpt_path (rank 0; NULL: none), to
 * every rank; on the other ranks r->hosting, r->config and r->ckpt are newly allocated (free them
 * on every rank: rank 0's ckpt is allocated here too). Returns r->rc, or NB_EXIT_FAIL on every rank
 * after the rank that failed printed why (rank 0 cannot read the checkpoint; out of memory). */
int nb_mpi_share_resume(nb_mpi_resume *r, const char *ckpt_path);

/* Writes the checkpoint bytes p[0..n) of run to a private directory of this rank (under TMPDIR,
 * as a sweep's ranks keep theirs) and its path to path. Returns 0, or -1 with err. Remove it
 * with nb_mpi_ckpt_copy_drop. */
int nb_mpi_ckpt_copy(const char *p, size_t n, int64_t run, char *path, size_t size, nb_err *err);
/* Removes the copy nb_mpi_ckpt_copy wrote and its directory ("" : nothing). */
void nb_mpi_ckpt_copy_drop(const char *path);

/* ---- the sweep's messages ---------------------------------------------------------------- */

/* A job handed to a rank: its configuration, which the rank builds the job from
 * (nb_job_from_config: no rank parses a `run` command line), how it is hosted and labelled, and
 * when it resumes a run that rank 0 has claimed for it, the run, its checkpoint identity and the
 * checkpoint's bytes (none: it starts over). */
typedef struct nb_mpi_job {
    long index;   /* the job's number in the sweep (0-based) */
    char *config; /* its configuration as the store records it (JSON): a new run's as rank 0
                     built it from the sweep's arguments (nb_job_config_json), a resumed one's
                     as stored */
    char *args;   /* a new run's arguments (separated by \x1f, "run" not among them), which it
                     records (never parsed); "" for a resumed run (it records none) */
    char *host;   /* how the rank hosts it: run/job.h's nb_job_hosting as JSON (--db, --threads,
                     --quiet, --data-dir when given, ...) */
    char *tag;    /* a new run's --tag (sweep=KEY) and --variant as rank 0 parsed them; NULL:
                     none */
    char *variant;
    int64_t resume_run;
    int64_t resume_step;
    nb_ckpt_ident ident;
    char *ckpt; /* checkpoint bytes, or NULL */
    size_t ckpt_len;
} nb_mpi_job;

/* Rank 0: sends job to rank r. Returns 0, or -1 with err. */
int nb_mpi_send_job(int r, const nb_mpi_job *job, nb_err *err);
/* Rank 0: tells rank r that there is no more work. */
void nb_mpi_send_stop(int r);

/* What rank 0 hears from the other ranks (nb_mpi_poll). */
typedef enum nb_mpi_event {
    NB_MPI_NONE,    /* nothing waiting */
    NB_MPI_READY,   /* rank is idle; it ran job (-1: none) which ended with exit code */
    NB_MPI_SERVED,  /* a record request was answered (nothing for the coordinator to do) */
    NB_MPI_FAILURE, /* a record request failed in the store (answered with the error) */
} nb_mpi_event;

typedef struct nb_mpi_heard {
    int rank;
    long job;
    int code;
    int stopping; /* the rank was asked to stop (a signal) */
    char host[256];
} nb_mpi_heard;

/* Rank 0: takes one message from another rank if one is waiting (wait: block until one comes)
 * and answers it; record requests are written to store (checkpoints beside db). */
nb_mpi_event nb_mpi_poll(nb_store *store, const char *db, int wait, nb_mpi_heard *heard);

/* How a rank runs a job handed to it: builds it from job->config and job->host, hosts it
 * (records through rec, stops on *stop; resumes job->resume_run from ckpt, NULL: from scratch)
 * and executes it (run/job.h). Returns the exit status. */
typedef int (*nb_mpi_job_fn)(const nb_mpi_job *job, const char *ckpt, const nb_run_rec *rec,
                             volatile sig_atomic_t *stop);

/* A rank other than 0: asks rank 0 for jobs and runs each in this process with run, recording
 * through rank 0, until rank 0 says there is no more work. stop is the rank's stop flag
 * (signals). Returns 0. */
int nb_mpi_sweep_worker(volatile sig_atomic_t *stop, nb_mpi_job_fn run);

/* The largest checkpoint sent between ranks: far above any model here (parameters and
 * optimizer state), a bound on what a damaged or foreign file can make a rank allocate. */
#define NB_MPI_CKPT_MAX ((size_t)16 << 30)

#endif
