/* cmd/cmd_sweep.c — `normbench sweep TASK --norms LIST --seeds N [run options]`: the product of
 * norms, seeds and any run option given as a comma-separated list, each job a run (run/job.h)
 * built and executed in a child process (under MPI: on a rank), recorded with the tag sweep=KEY,
 * so that a sweep run again skips what already finished. */
#include "cmd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run/mpi.h"
#include "nn/nn.h"
#include "results/provenance.h"
#include "results/query.h"
#include "results/store.h"
#include "tasks/task.h"
#include "util/file.h"
#include "util/json.h"

static const char sweep_usage[] =
    "usage: normbench sweep TASK --norms LIST|all --seeds N [--jobs N] [--dry-run] [--threads N]\n"
    "                       [--db FILE] [run options]\n\n"
    "Runs TASK for every norm in LIST on seeds 1..N (every norm on the same seeds: a paired\n"
    "comparison; 'all' is every norm of 'run --help'), and for\n"
    "every value of any run option given as a comma-separated list, e.g. --batch 128,4 or\n"
    "--lr 1e-3,3e-3. The norms run next to each other (seed by seed), so that\n"
    "a slow spell of the machine is shared by all of them. The numbered job list is printed\n"
    "first; --dry-run stops there. Each job is a 'normbench run' recorded with the tag\n"
    "sweep=JOB; jobs that already finished in the store are skipped, so an interrupted sweep\n"
    "resumes where it stopped: a job whose run did not finish (interrupted, crashed, failed or\n"
    "diverged) runs again under its run id, from its checkpoint (or from the start when it has\n"
    "none). Each job is claimed in the store before it starts, so that two sweeps on one store\n"
    "share the work: a job held by another live process is left to it and waited for. Ctrl-C,\n"
    "SIGTERM or SIGHUP stops the running jobs at their next step.\n"
    "--jobs N runs N jobs at a time, dividing the threads between them. Run options are those of\n"
    "'normbench run' (see 'normbench run --help'); --norm and --seed are replaced by --norms and\n"
    "--seeds. The options that vary are recorded as the run's variant ('--batch 4'); report\n"
    "compares norms within a variant. Under mpirun or srun the jobs are handed out to the MPI\n"
    "ranks, one per rank at a time, and rank 0 alone writes the store (docs/mpi.md in the\n"
    "source). Exit status: 0 when every job finished, 1 when any did not, 2 usage error.\n";

/* run's options whose values are never split at commas. */
static const char *const no_split[] = {"data-dir", "tag", "dataset", NULL};

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0) return 1;
    return 0;
}

typedef struct opt_values {
    char name[64];
    char *values[64]; /* split copies */
    int n;
    int flag;
} opt_values;

static volatile sig_atomic_t sweep_stop = 0;

enum { MAXOPT = 64, MAXARGV = 2 * MAXOPT + 16 };

typedef struct job {
    const char *argv[MAXARGV];
    int argc;
    char key[2048];
    char variant[1024]; /* the values of the options that vary ("--batch 4"), "" when none */
    char seedbuf[24];
    int state;  /* J_* */
    int waited; /* seen held by another process */
    int64_t run;
} job;

/* A job's state in this sweep. */
enum {
    J_TODO,               /* to start: as a new run, or by resuming (or restarting) its run */
    J_WAIT,               /* held by another live process: looked at again later */
    J_RUNNING,            /* a child of this sweep runs it */
    J_FINISHED_BEFORE,    /* finished before this sweep began */
    J_FINISHED_NOW,       /* finished by this sweep */
    J_FINISHED_ELSEWHERE, /* finished by another process while this sweep ran */
    J_FAILED,             /* did not finish here */
    J_FAILED_ELSEWHERE,   /* did not finish in the process that held it */
    J_NSTATES
};

/* The sweep's children, for the signal handler: it forwards the stop to them. */
static pid_t *volatile children;
static volatile int nchildren;

static void free_opts(opt_values *o, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < o[i].n; j++)
            free(o[i].values[j]);
}

/* SIGINT, SIGTERM, SIGHUP: start nothing more, and stop the running jobs at their next step
 * (SIGTERM, which `run` handles as Ctrl-C: a job that got the terminal's Ctrl-C too is not
 * killed by a second one). */
static void on_sweep_signal(int sig) {
    (void)sig;
    int saved = errno;
    sweep_stop = 1;
    pid_t *c = children;
    for (int i = 0; c && i < nchildren; i++)
        if (c[i] > 0) kill(c[i], SIGTERM);
    errno = saved;
}

/* Whether run id has a checkpoint beside the store (cmd_run.c's DB-checkpoints/run-ID.ckpt). */
static int has_checkpoint(const char *db, int64_t id) {
    char path[4200];
    snprintf(path, sizeof path, "%.4000s-checkpoints/run-%lld.ckpt", db, (long long)id);
    return access(path, R_OK) == 0;
}

/* What a sweep does with a job whose newest run is js->run and that nobody holds. */
static const char *plan_note(const nb_job_state *js, const char *db, char *buf, size_t size) {
    buf[0] = '\0';
    if (js->state == NB_JOB_DONE)
        snprintf(buf, size, "   (finished already: skipped)");
    else if (js->state == NB_JOB_BUSY)
        snprintf(buf, size, "   (held by process %lld on %s: left to it)", (long long)js->pid,
                 js->host);
    else if (js->run && has_checkpoint(db, js->run))
        snprintf(buf, size, "   (resumes run %lld from its checkpoint)", (long long)js->run);
    else if (js->run)
        snprintf(buf, size, "   (starts run %lld over: it has no checkpoint)", (long long)js->run);
    return buf;
}

/* The `run` arguments of job jb as a new run (args[0] = "run"), tagged sweep=KEY (tag: room for
 * it), recorded into db, quiet; threads_buf NULL: no --threads. Returns the count. */
static int job_argv(job *jb, const char *db, const char *threads_buf, char *tag, size_t tag_size,
                    const char **args) {
    snprintf(tag, tag_size, "sweep=%s", jb->key);
    int c = 0;
    for (int i = 0; i < jb->argc; i++)
        args[c++] = jb->argv[i];
    args[c++] = "--db";
    args[c++] = db;
    if (threads_buf) {
        args[c++] = "--threads";
        args[c++] = threads_buf;
    }
    args[c++] = "--quiet";
    args[c++] = "--tag";
    args[c++] = tag;
    if (jb->variant[0]) {
        args[c++] = "--variant";
        args[c++] = jb->variant;
    }
    args[c] = NULL;
    return c;
}

/* Job jb as a job of this process: its run resumed from the store when it has one (from the
 * checkpoint, or over from step 0 when it has none), else a new run from its arguments
 * (job_argv's, tagged sweep=KEY: tag gives them room), quiet. Returns 0, or an exit status
 * after the message. */
static int build_job(job *jb, const char *db, const char *threads_buf, char *tag, size_t tag_size,
                     nb_job *j) {
    if (jb->run) return nb_run_job_resume(db, jb->run, !has_checkpoint(db, jb->run), 1, j);
    const char *args[MAXARGV + 10];
    int n = job_argv(jb, db, threads_buf, tag, tag_size, args);
    return nb_run_job_build(n, args, j);
}

/* Starts job jb in a child process, which builds it (build_job) and executes it: a job of its
 * own, its messages on stderr, its stdout to /dev/null, the signals as `run` takes them. The
 * store (*store, open) is closed across the fork and opened again, so that no SQLite connection
 * is in the child (it opens its own). Returns the child's pid, or -1 (*store may then be NULL:
 * the caller's store failed, said). */
static pid_t start_job(job *jb, const char *db, const char *threads_buf, nb_store **store,
                       const struct sigaction *old_int, const struct sigaction *old_term,
                       const struct sigaction *old_hup) {
    nb_store_close(*store);
    *store = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        sigaction(SIGINT, old_int, NULL);
        sigaction(SIGTERM, old_term, NULL);
        sigaction(SIGHUP, old_hup, NULL);
        /* the job's own "run N STATUS" line would mix into the sweep's results */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        char tag[2100];
        nb_job j;
        int code = build_job(jb, db, threads_buf, tag, sizeof tag, &j);
        if (code == 0) code = nb_job_exec(&j);
        nb_job_free(&j);
        fflush(stdout);
        fflush(stderr);
        _exit(code < 0 ? NB_EXIT_OK : code);
    }
    if (pid < 0) fprintf(stderr, "error: cannot start a job: %s\n", strerror(errno));
    nb_err err;
    nb_err_clear(&err);
    if (nb_store_open(store, db, 0, &err) != 0) nb_report_err(&err);
    return *store ? pid : -1;
}

/* Tries to claim job jb in the store for this sweep: returns 1 when claimed (jb->run set to
 * its run to resume, 0: a new run), 0 when not (jb->state updated), -1 on a store error. */
static int take_job(nb_store *store, job *jb, long j, long total, nb_err *err) {
    nb_job_state js;
    if (nb_job_claim(store, jb->key, 1, &js, err) != 0) return -1;
    if (js.state == NB_JOB_DONE) {
        jb->state = J_FINISHED_ELSEWHERE;
        fprintf(stderr, "[%ld/%ld] finished by another process: normbench run %s\n", j + 1, total,
                jb->key);
        return 0;
    }
    if (js.state == NB_JOB_BUSY) {
        if (!jb->waited)
            fprintf(stderr, "[%ld/%ld] held by process %lld on %s: normbench run %s\n", j + 1,
                    total, (long long)js.pid, js.host, jb->key);
        jb->state = J_WAIT;
        jb->waited = 1;
        return 0;
    }
    /* Claimed. A job this sweep waited for that ended failed or diverged in the other process:
     * that is its outcome, not to be run again here. */
    if (jb->waited && js.run &&
        (strcmp(js.status, "failed") == 0 || strcmp(js.status, "diverged") == 0)) {
        jb->state = J_FAILED_ELSEWHERE;
        fprintf(stderr, "[%ld/%ld] %s in another process: normbench run %s\n", j + 1, total,
                js.status, jb->key);
        return nb_job_release(store, jb->key, err) ? -1 : 0;
    }
    jb->run = js.run;
    return 1;
}

/* The closing line: how many jobs ended how. Returns the exit status. */
static int summarize(const job *jobs, long total, int store_failed) {
    long n[J_NSTATES] = {0};
    for (long j = 0; j < total; j++)
        n[jobs[j].state]++;
    long bad = n[J_FAILED] + n[J_FAILED_ELSEWHERE];
    long left = n[J_TODO] + n[J_WAIT] + n[J_RUNNING];
    printf("sweep: %ld jobs: %ld finished now, %ld finished before, %ld did not finish, %ld not "
           "started",
           total, n[J_FINISHED_NOW], n[J_FINISHED_BEFORE], bad, left);
    if (n[J_FINISHED_ELSEWHERE])
        printf(", %ld finished by another process", n[J_FINISHED_ELSEWHERE]);
    printf("\n");
    if (sweep_stop) fprintf(stderr, "sweep interrupted: run the same command again to resume\n");
    return (bad == 0 && left == 0 && !sweep_stop && !store_failed) ? NB_EXIT_OK : NB_EXIT_FAIL;
}

/* ---- the sweep over MPI ranks ------------------------------------------------------------- */

/* Rank 0 holds the store open once, shared by the coordinator and rank 0's own job's thread:
 * a second connection would not do, because opening the file again and closing it (as every
 * store open does to read the header) drops all of this process's POSIX locks on it, and
 * another process could then delete the write-ahead log under us. store_mu serializes the two
 * threads' use of it: the coordinator holds it except while it waits. */
static pthread_mutex_t store_mu = PTHREAD_MUTEX_INITIALIZER;

/* Rank 0's own job, trained in a thread beside the coordinator. */
typedef struct own_job {
    pthread_t th;
    int code, active;
    volatile int done;
    long j;
    nb_mpi_job mj; /* what it runs (mj.ckpt: the checkpoint's path beside the store) */
    nb_run_rec rec;
    nb_store_rec rec_ctx;
} own_job;

/* A job handed to a rank (nb_mpi_sweep_worker; rank 0's own, own_main): built from its
 * configuration (a new run's labels and recorded arguments beside it), hosted, executed. */
static int rank_job(const nb_mpi_job *mj, const char *ckpt, const nb_run_rec *rec,
                    volatile sig_atomic_t *stop) {
    nb_job j;
    int code = nb_run_job_from_config(mj->config, mj->host, &j);
    if (code == 0 && !mj->resume_run) { /* a new run: what it records beside its configuration */
        j.tag = mj->tag;
        j.variant = mj->variant;
        free(j.args);
        free(j.hosting);
        j.args = strdup(mj->args);
        j.hosting = strdup(mj->host); /* as rank 0 built it: a data directory only when given */
        if (!j.args || !j.hosting) code = nb_die("out of memory");
    }
    if (code == 0) {
        nb_job_host(&j, rec, stop, mj->resume_run, mj->resume_step, &mj->ident, ckpt);
        code = nb_job_exec(&j);
    }
    nb_job_free(&j);
    return code < 0 ? NB_EXIT_OK : code;
}

static void *own_main(void *p) {
    own_job *o = p;
    o->code = rank_job(&o->mj, o->mj.ckpt, &o->rec, &sweep_stop);
    __atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Frees the texts prepare_job allocated in mj (not its checkpoint). */
static void job_msg_free(nb_mpi_job *mj) {
    free(mj->config), free(mj->args), free(mj->host), free(mj->tag), free(mj->variant);
    mj->config = mj->args = mj->host = mj->tag = mj->variant = NULL;
}

/* A new job's message: its configuration as built here from its `run` arguments (job_argv's),
 * its recorded arguments, tag and variant (newly allocated). Returns 0, or -1 after the
 * message. */
static int new_job_msg(job *jb, const char *db, const char *threads_buf, nb_mpi_job *mj) {
    char tag[2100];
    const char *args[MAXARGV + 10];
    int n = job_argv(jb, db, threads_buf, tag, sizeof tag, args);
    nb_job j;
    nb_job_init(&j, NULL);
    int rc = nb_run_parse(n, args, &j); /* checked before the sweep began: no message */
    if (rc == 0) {
        mj->config = nb_job_config_json(&j);
        mj->args = j.args ? strdup(j.args) : NULL;
        nb_job_hosting h;
        nb_job_hosting_of(&j, &h);
        mj->host = nb_job_hosting_json(&h);
        /* as parsed: sweep=KEY, and the variant sweep made or the one the user gave */
        mj->tag = j.tag ? strdup(j.tag) : NULL;
        mj->variant = j.variant ? strdup(j.variant) : NULL;
        if (!mj->config || !mj->args || !mj->host || (j.tag && !mj->tag) ||
            (j.variant && !mj->variant))
            rc = nb_die("out of memory");
    }
    nb_job_free(&j);
    if (rc) job_msg_free(mj);
    return rc ? -1 : 0;
}

/* What job jb runs (for rank 0's thread or another rank), into mj (its texts newly allocated:
 * job_msg_free): a new run's configuration (new_job_msg); a run to resume's stored
 * configuration and stored hosting, with this store and --quiet in it, the claim of it (rank 0
 * is the process that records it) and its checkpoint's path (mj->ckpt = ckpt; NULL: it starts
 * over). Returns 0, or -1 (the job failed here, said). */
static int prepare_job(nb_store *store, job *jb, const char *db, const char *threads_buf,
                       nb_mpi_job *mj, char *ckpt, size_t size) {
    nb_err err;
    nb_err_clear(&err);
    mj->resume_run = 0;
    mj->ckpt = NULL;
    mj->config = mj->args = mj->host = mj->tag = mj->variant = NULL;
    if (!jb->run) return new_job_msg(jb, db, threads_buf, mj);
    int64_t step = 0;
    int scratch = !has_checkpoint(db, jb->run);
    char *stored = NULL;
    if (nb_job_resume_prepare(store, db, jb->run, scratch, nb_hosting_from_args, &stored,
                              &mj->config, ckpt, size, &step, &mj->ident, NULL, NULL, &err) != 0)
        return nb_report_err(&err), -1;
    /* the hosting in force: its stored one (without a --data-dir, each rank's default), into
     * this store, quietly; a resumed run records no arguments */
    mj->host = nb_job_hosting_rehost(stored, db, 1, &err);
    free(stored);
    mj->args = strdup("");
    if (!mj->host || !mj->args) {
        job_msg_free(mj);
        if (!err.msg[0]) nb_errf(&err, "out of memory");
        return nb_report_err(&err), -1;
    }
    if (nb_run_resume(store, jb->run, step, &err) != 0) {
        job_msg_free(mj);
        return nb_report_err(&err), -1;
    }
    mj->resume_run = jb->run;
    mj->resume_step = step;
    if (!scratch) mj->ckpt = ckpt;
    return 0;
}

/* Hands job j to rank r, with its checkpoint's bytes when it resumes one. Returns 0, or -1 (the
 * job failed here). */
static int give_job(nb_store *store, job *jobs, long j, int r, const char *db,
                    const char *threads_buf) {
    nb_err err;
    nb_err_clear(&err);
    nb_mpi_job mj;
    memset(&mj, 0, sizeof mj);
    mj.index = j;
    char ckpt[4200];
    if (prepare_job(store, &jobs[j], db, threads_buf, &mj, ckpt, sizeof ckpt) != 0) return -1;
    char *bytes = NULL;
    if (mj.ckpt && nb_read_file(ckpt, NB_MPI_CKPT_MAX, 0, &bytes, &mj.ckpt_len, &err) != 0) {
        free(bytes);
        job_msg_free(&mj);
        fprintf(stderr, "error: cannot read checkpoint '%s'\n", ckpt);
        return -1;
    }
    mj.ckpt = bytes;
    int rc = nb_mpi_send_job(r, &mj, &err);
    if (rc) nb_report_err(&err);
    free(bytes);
    job_msg_free(&mj);
    return rc;
}

/* The next job to start, claimed in the store (jb->run set), or -1 when none can start now
 * (*waiting: some are held by other processes). rescan: look at those again. */
static long pick_job(nb_store *store, job *jobs, long total, long *next, int rescan, long *waiting,
                     int *store_failed) {
    nb_err err;
    nb_err_clear(&err);
    for (;;) {
        while (*next < total && jobs[*next].state != J_TODO)
            (*next)++;
        if (*next >= total) break;
        long j = (*next)++;
        int t = take_job(store, &jobs[j], j, total, &err);
        if (t < 0) {
            nb_report_err(&err);
            *store_failed = 1;
            return -1;
        }
        if (t > 0) return j;
    }
    *waiting = 0;
    for (long k = 0; k < total; k++)
        if (jobs[k].state == J_WAIT) {
            int t = rescan ? take_job(store, &jobs[k], k, total, &err) : 0;
            if (t < 0) {
                nb_report_err(&err);
                *store_failed = 1;
                return -1;
            }
            if (t > 0) return k;
            *waiting += jobs[k].state == J_WAIT;
        }
    return -1;
}

/* Seconds between the coordinator's summaries (NORMBENCH_SWEEP_SUMMARY, default 60). */
static double summary_every(void) {
    const char *v = getenv("NORMBENCH_SWEEP_SUMMARY");
    double x = 0;
    return v && nb_parse_double(v, &x) == 0 && x > 0 ? x : 60;
}

/* The sweep on rank 0 of an MPI job: a work queue over the ranks, rank 0 training too. */
static int run_jobs_mpi(nb_store *store, job *jobs, long total, const char *db,
                        const char *threads_buf) {
    int size = nb_mpi_size();
    int *busy = calloc((size_t)size, sizeof *busy); /* 0 idle (waiting for a job), 1 running,
                                                       2 stopped, 3 not heard from yet */
    long *which = calloc((size_t)size, sizeof *which);
    char(*hosts)[256] = calloc((size_t)size, sizeof *hosts);
    own_job *own = calloc(1, sizeof *own);
    if (!busy || !which || !hosts || !own) {
        free(busy), free(which), free(hosts), free(own);
        for (int r = 1; r < size; r++)
            nb_mpi_send_stop(r);
        return nb_die("out of memory");
    }
    for (int r = 1; r < size; r++)
        busy[r] = 3;
    nb_hostname(hosts[0], sizeof hosts[0]);
    /* rank 0's jobs record through the coordinator's connection, checkpoints beside the store */
    char own_dir[4200], own_ckpt[4200];
    snprintf(own_dir, sizeof own_dir, "%s-checkpoints", db);
    if (mkdir(own_dir, 0755) != 0 && errno != EEXIST)
        fprintf(stderr, "warning: cannot create checkpoint directory '%s': %s\n", own_dir,
                strerror(errno));
    nb_run_rec_store(&own->rec, &own->rec_ctx, store, &store_mu);
    own->rec.ckpt_dir = own_dir;
    pthread_mutex_lock(&store_mu);
    int store_failed = 0, stopped = 0, own_out = 0;
    long next = 0, waiting = 0, done = 0, ended = 0;
    double t0 = nb_now(), last_rescan = 0, last_summary = t0, every = summary_every();
    double job_time = 0;
    double *started = calloc((size_t)total, sizeof *started);
    if (!started) {
        nb_die("out of memory");
        store_failed = 1;
        own_out = 1;
        sweep_stop = 1;
    }
    for (;;) {
        int halt = sweep_stop || store_failed;
        double now = nb_now();
        int rescan = now - last_rescan > 0.25;
        if (rescan) last_rescan = now;
        /* rank 0's own job */
        if (!own->active && !own_out && !halt) {
            long j = pick_job(store, jobs, total, &next, rescan, &waiting, &store_failed);
            if (j >= 0) {
                job_msg_free(&own->mj);
                int prc = prepare_job(store, &jobs[j], db, threads_buf, &own->mj, own_ckpt,
                                      sizeof own_ckpt);
                own->j = j;
                own->done = 0;
                if (prc < 0 || pthread_create(&own->th, NULL, own_main, own) != 0) {
                    if (prc >= 0) fprintf(stderr, "error: cannot start a thread for a job\n");
                    jobs[j].state = J_FAILED;
                    nb_err err;
                    nb_job_release(store, jobs[j].key, &err);
                    continue;
                } else {
                    own->active = 1;
                    jobs[j].state = J_RUNNING;
                    started[j] = now;
                    fprintf(stderr, "[%ld/%ld] %s on rank 0 (%s): normbench run %s\n", j + 1, total,
                            jobs[j].run ? "resumed" : "started", hosts[0], jobs[j].key);
                }
            } else if (waiting == 0) {
                own_out = 1;
            }
        }
        if (own->active && __atomic_load_n(&own->done, __ATOMIC_ACQUIRE)) {
            pthread_mutex_unlock(&store_mu);
            pthread_join(own->th, NULL);
            pthread_mutex_lock(&store_mu);
            own->active = 0;
            job *jb = &jobs[own->j];
            jb->state = own->code == 0 ? J_FINISHED_NOW : J_FAILED;
            ended++, done += own->code == 0, job_time += nb_now() - started[own->j];
            fprintf(stderr, "[%ld/%ld] %s on rank 0 (exit %d): normbench run %s\n", own->j + 1,
                    total, own->code == 0 ? "finished" : "did not finish", own->code, jb->key);
            nb_err err;
            nb_err_clear(&err);
            if (nb_job_release(store, jb->key, &err) != 0) nb_report_err(&err);
            continue;
        }
        halt = sweep_stop || store_failed;
        if (halt) own_out = 1;
        /* the other ranks: idle ones get a job, or stop */
        for (int r = 1; r < size; r++) {
            if (busy[r] != 0) continue;
            long j =
                halt ? -1 : pick_job(store, jobs, total, &next, rescan, &waiting, &store_failed);
            if (j >= 0) {
                if (give_job(store, jobs, j, r, db, threads_buf) != 0) {
                    jobs[j].state = J_FAILED;
                    nb_err err;
                    nb_job_release(store, jobs[j].key, &err);
                    r--; /* try another job for this rank */
                    continue;
                }
                busy[r] = 1;
                which[r] = j;
                jobs[j].state = J_RUNNING;
                started[j] = now;
                fprintf(stderr, "[%ld/%ld] %s on rank %d (%s): normbench run %s\n", j + 1, total,
                        jobs[j].run ? "resumed" : "started", r, hosts[r], jobs[j].key);
            } else if (halt || waiting == 0) {
                nb_mpi_send_stop(r);
                busy[r] = 2;
                stopped++;
            }
        }
        if (stopped == size - 1 && !own->active && own_out) break;
        /* messages from the other ranks */
        nb_mpi_heard h;
        nb_mpi_event ev = nb_mpi_poll(store, db, 0, &h);
        if (ev == NB_MPI_READY) {
            snprintf(hosts[h.rank], sizeof hosts[h.rank], "%s", h.host);
            if (h.stopping) sweep_stop = 1;
            if (h.job >= 0 && h.job < total && busy[h.rank] == 1) {
                job *jb = &jobs[h.job];
                jb->state = h.code == 0 ? J_FINISHED_NOW : J_FAILED;
                ended++, done += h.code == 0, job_time += nb_now() - started[h.job];
                fprintf(stderr, "[%ld/%ld] %s on rank %d (exit %d): normbench run %s\n", h.job + 1,
                        total, h.code == 0 ? "finished" : "did not finish", h.rank, h.code,
                        jb->key);
                nb_err err;
                nb_err_clear(&err);
                if (nb_job_release(store, jb->key, &err) != 0) nb_report_err(&err);
            }
            busy[h.rank] = 0;
        } else if (ev == NB_MPI_NONE) {
            pthread_mutex_unlock(&store_mu); /* rank 0's job records meanwhile */
            struct timespec ts = {0, 500 * 1000};
            nanosleep(&ts, NULL);
            pthread_mutex_lock(&store_mu);
        } else {
            pthread_mutex_unlock(&store_mu);
            sched_yield();
            pthread_mutex_lock(&store_mu);
        }
        if (nb_now() - last_summary >= every) {
            last_summary = nb_now();
            long left = 0, running = 0;
            for (long k = 0; k < total; k++) {
                left += jobs[k].state == J_TODO || jobs[k].state == J_WAIT;
                running += jobs[k].state == J_RUNNING;
            }
            fprintf(stderr, "sweep: %ld of %ld jobs ended (%ld finished), %ld running:", ended,
                    total, done, running);
            if (own->active) fprintf(stderr, " %ld on rank 0", own->j + 1);
            for (int r = 1; r < size; r++)
                if (busy[r] == 1)
                    fprintf(stderr, ", %ld on rank %d (%s)", which[r] + 1, r, hosts[r]);
            if (ended > 0)
                fprintf(stderr, "; %ld to start; about %.0f s left\n", left,
                        job_time / (double)ended * (double)(left + running) / (double)size);
            else
                fprintf(stderr, "; %ld to start\n", left);
        }
    }
    pthread_mutex_unlock(&store_mu);
    free(started);
    job_msg_free(&own->mj);
    free(busy), free(which), free(hosts), free(own);
    return store_failed;
}

/* Runs the jobs not done yet, jobs_n at a time, each claimed in the store first (under MPI:
 * over the ranks, one job per rank at a time). Returns the exit status. */
static int run_jobs(job *jobs, long total, const char *db, int dry, int jobs_n, int per_job,
                    int threads_given) {
    nb_err err;
    nb_err_clear(&err);
    nb_store *store = NULL;
    int mpi = nb_mpi_on();
    /* A dry run reads an existing store but never creates one. */
    if (!(dry && access(db, F_OK) != 0) && nb_store_open(&store, db, dry, &err) != 0) {
        for (int r = 1; mpi && !dry && r < nb_mpi_size(); r++)
            nb_mpi_send_stop(r);
        return nb_report_err(&err);
    }
    int todo = 0;
    for (long j = 0; j < total; j++) {
        nb_job_state js;
        memset(&js, 0, sizeof js);
        if (store && nb_job_claim(store, jobs[j].key, 0, &js, &err) != 0) {
            nb_store_close(store);
            for (int r = 1; mpi && !dry && r < nb_mpi_size(); r++)
                nb_mpi_send_stop(r);
            return nb_report_err(&err);
        }
        jobs[j].state = js.state == NB_JOB_DONE ? J_FINISHED_BEFORE : J_TODO;
        todo += jobs[j].state == J_TODO;
        char note[512];
        printf("%4ld  normbench run %s%s\n", j + 1, jobs[j].key,
               plan_note(&js, db, note, sizeof note));
    }
    fflush(stdout);
    if (dry) {
        fprintf(stderr, "%ld jobs, %d to run (dry run: nothing started)\n", total, todo);
        nb_store_close(store);
        return NB_EXIT_OK;
    }
    char threads_buf[16];
    snprintf(threads_buf, sizeof threads_buf, "%d", per_job);
    if (mpi) {
        /* each rank one job at a time, with --threads when given, else its own default */
        fprintf(stderr, "sweep: %ld jobs, %d to run, over %d MPI ranks, one job per rank\n", total,
                todo, nb_mpi_size());
        struct sigaction sa, old_int, old_term, old_hup;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sweep_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        sigaction(SIGHUP, &sa, &old_hup);
        int failed = run_jobs_mpi(store, jobs, total, db, threads_given ? threads_buf : NULL);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        nb_store_close(store);
        return summarize(jobs, total, failed);
    }
    fprintf(stderr, "sweep: %ld jobs, %d to run, %d at a time with %d threads each\n", total, todo,
            jobs_n, per_job);

    pid_t *pids = calloc((size_t)jobs_n, sizeof *pids);
    long *which = calloc((size_t)jobs_n, sizeof *which);
    if (!pids || !which) {
        free(pids);
        free(which);
        nb_store_close(store);
        return nb_die("out of memory");
    }
    children = pids;
    nchildren = jobs_n;
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sweep_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);

    int running = 0, store_failed = 0, said_waiting = 0, rescan = 0;
    long next = 0;
    for (;;) {
        while (!sweep_stop && !store_failed && running < jobs_n) {
            long j = -1;
            while (next < total && jobs[next].state != J_TODO)
                next++;
            if (next < total) {
                j = next++;
            } else if (rescan) {
                /* the jobs other processes held: free now? (take_job claims the one it
                 * returns) */
                int t = 0;
                for (long k = 0; k < total && j < 0 && t >= 0; k++)
                    if (jobs[k].state == J_WAIT &&
                        (t = take_job(store, &jobs[k], k, total, &err)) > 0)
                        j = k;
                if (t < 0) {
                    nb_report_err(&err);
                    store_failed = 1;
                    break;
                }
                if (j < 0) {
                    rescan = 0;
                    break;
                }
            } else {
                break;
            }
            job *jb = &jobs[j];
            if (jb->state == J_TODO) {
                int t = take_job(store, jb, j, total, &err);
                if (t < 0) {
                    nb_report_err(&err);
                    store_failed = 1;
                    break;
                }
                if (t == 0) continue;
            }
            int slot = 0;
            while (pids[slot])
                slot++;
            pid_t pid = start_job(jb, db, threads_buf, &store, &old_int, &old_term, &old_hup);
            if (pid < 0 && store) {
                jb->state = J_FAILED;
                nb_job_release(store, jb->key, &err);
                sweep_stop = 1;
                break;
            }
            if (!store) { /* the store could not be opened again: wait for what runs */
                store_failed = 1;
                if (pid < 0) {
                    jb->state = J_FAILED;
                    break;
                }
            }
            pids[slot] = pid;
            which[slot] = j;
            jb->state = J_RUNNING;
            running++;
            if (sweep_stop) kill(pid, SIGTERM); /* the signal came before it was listed */
            if (jb->run)
                fprintf(stderr, "[%ld/%ld] resumed as run %lld: normbench run %s\n", j + 1, total,
                        (long long)jb->run, jb->key);
            else
                fprintf(stderr, "[%ld/%ld] started: normbench run %s\n", j + 1, total, jb->key);
        }
        if (running == 0) {
            long waiting = 0;
            for (long k = 0; k < total; k++)
                waiting += jobs[k].state == J_WAIT;
            if (sweep_stop || store_failed || waiting == 0) break;
            if (!said_waiting)
                fprintf(stderr, "sweep: waiting for %ld job(s) held by other processes\n", waiting);
            said_waiting = 1;
            struct timespec ts = {0, 250 * 1000 * 1000};
            nanosleep(&ts, NULL);
            rescan = 1;
            continue;
        }
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int s = 0; s < jobs_n; s++)
            if (pids[s] == pid) {
                pids[s] = 0;
                running--;
                job *jb = &jobs[which[s]];
                int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                jb->state = code == 0 ? J_FINISHED_NOW : J_FAILED;
                fprintf(stderr, "[%ld/%ld] %s (exit %d): normbench run %s\n", which[s] + 1, total,
                        code == 0 ? "finished" : "did not finish", code, jb->key);
                if (store && nb_job_release(store, jb->key, &err) != 0) {
                    nb_report_err(&err);
                    nb_err_clear(&err);
                }
            }
        rescan = 1;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    children = NULL;
    nchildren = 0;
    free(pids);
    free(which);
    nb_store_close(store);
    return summarize(jobs, total, store_failed);
}

int cmd_sweep(int argc, const char **argv) {
    const char *task = NULL, *norms_arg = NULL, *db = nb_default_db();
    int seeds = 0, jobs_n = 1, dry = 0, threads = 0, jobs_seen = 0, db_seen = 0;
    opt_values opts[MAXOPT];
    int nopts = 0, rc = NB_EXIT_USAGE;

    /* Sweep's own options, then everything else kept for the jobs. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(sweep_usage, stdout);
            return NB_EXIT_OK;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (task) return nb_usage_error("sweep", "unexpected argument '%s'", a);
            task = a;
            continue;
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len == 0 || len >= sizeof name)
            return nb_usage_error("sweep", "invalid option '%s'", a);
        memcpy(name, a + 2, len);
        name[len] = '\0';
        /* which of run's options take no value: the common ones' and the tasks' declarations */
        int known = 0;
        int flag = nb_run_opt_is_flag(name, &known) || strcmp(name, "dry-run") == 0;
        const char *v = NULL;
        if (!flag) {
            if (eq)
                v = eq + 1;
            else if (i + 1 < argc)
                v = argv[++i];
            else
                return nb_usage_error("sweep", "option '--%s' needs a value", name);
        } else if (eq) {
            return nb_usage_error("sweep", "option '--%s' takes no value", name);
        }
        /* sweep's own options and run's valued options are single: a second one is an error */
        int again = 0;
        for (int k = 0; k < nopts; k++)
            again |= strcmp(opts[k].name, name) == 0 && !opts[k].flag;
        if (!flag &&
            (again || (strcmp(name, "norms") == 0 && norms_arg) ||
             (strcmp(name, "seeds") == 0 && seeds) || (strcmp(name, "jobs") == 0 && jobs_seen) ||
             (strcmp(name, "threads") == 0 && threads) || (strcmp(name, "db") == 0 && db_seen))) {
            free_opts(opts, nopts);
            return nb_usage_error("sweep", "option '--%s' is given twice: give it once%s", name,
                                  again ? " (a list of values is one option: --lr 1e-3,3e-3)" : "");
        }
        if (v && !*v) {
            free_opts(opts, nopts);
            return nb_usage_error("sweep", "option '--%s' needs a value: it is empty", name);
        }
        if (strcmp(name, "norms") == 0) {
            norms_arg = v;
        } else if (strcmp(name, "seeds") == 0 || strcmp(name, "jobs") == 0 ||
                   strcmp(name, "threads") == 0) {
            long long x = 0;
            if (nb_parse_int(v, &x) != 0 || x < 1 || x > 100000)
                return nb_usage_error("sweep", "option '--%s' expects a positive integer, not '%s'",
                                      name, v);
            *(strcmp(name, "seeds") == 0  ? &seeds
              : strcmp(name, "jobs") == 0 ? &jobs_n
                                          : &threads) = (int)x;
            jobs_seen |= strcmp(name, "jobs") == 0;
        } else if (strcmp(name, "dry-run") == 0) {
            dry = 1;
        } else if (strcmp(name, "quiet") == 0) {
            /* every job runs quietly already: not an option of the jobs (nor of their keys) */
        } else if (strcmp(name, "db") == 0) {
            db = v;
            db_seen = 1;
        } else if (strcmp(name, "norm") == 0 || strcmp(name, "seed") == 0) {
            return nb_usage_error("sweep", "use --%ss with sweep, not --%s", name, name);
        } else if (strcmp(name, "tag") == 0) {
            /* the job's one tag is sweep=JOB: what lets a sweep run again skip finished jobs */
            free_opts(opts, nopts);
            return nb_usage_error("sweep", "sweep tags every job sweep=JOB itself: --tag cannot "
                                           "be given (use --variant TEXT to label the runs)");
        } else {
            if (nopts >= MAXOPT) return nb_usage_error("sweep", "too many options");
            opt_values *o = &opts[nopts++];
            memset(o, 0, sizeof *o);
            snprintf(o->name, sizeof o->name, "%s", name);
            o->flag = flag;
            if (flag) continue;
            /* split a comma list (except where commas cannot mean a list) */
            const char *p = v;
            do {
                const char *c = in_list(no_split, name) ? NULL : strchr(p, ',');
                size_t l = c ? (size_t)(c - p) : strlen(p);
                if (o->n >= 64 || !(o->values[o->n] = strndup(p, l))) {
                    free_opts(opts, nopts);
                    return nb_usage_error("sweep", "too many values for '--%s'", name);
                }
                o->n++;
                p = c ? c + 1 : NULL;
            } while (p);
            /* the same value twice (also written differently: 1e-3 and 0.001) would make
             * identical jobs */
            for (int va = 0; va < o->n; va++)
                for (int vb = 0; vb < va; vb++) {
                    double x = 0, y = 0;
                    int same = strcmp(o->values[va], o->values[vb]) == 0 ||
                               (nb_parse_double(o->values[va], &x) == 0 &&
                                nb_parse_double(o->values[vb], &y) == 0 && x == y);
                    if (same) {
                        int rc2 = nb_usage_error("sweep",
                                                 "'--%s %s' lists the same value twice ('%s' and "
                                                 "'%s'): the jobs would be identical",
                                                 name, v, o->values[vb], o->values[va]);
                        free_opts(opts, nopts);
                        return rc2;
                    }
                }
        }
    }
    if (!task) return nb_usage_error("sweep", "which task? e.g. 'normbench sweep mnist'");
    if (jobs_seen && nb_mpi_on()) {
        free_opts(opts, nopts);
        return nb_usage_error("sweep", "under MPI every rank runs one job at a time: leave out "
                                       "--jobs and start more ranks (mpirun -np N)");
    }
    if (!norms_arg || seeds < 1) {
        free_opts(opts, nopts);
        return nb_usage_error("sweep", "a sweep needs --norms LIST|all and --seeds N");
    }
    int has_variant = 0, has_list = 0;
    for (int i = 0; i < nopts; i++) {
        has_variant |= strcmp(opts[i].name, "variant") == 0;
        has_list |= !opts[i].flag && opts[i].n > 1;
    }
    if (has_variant && has_list) {
        free_opts(opts, nopts);
        return nb_usage_error("sweep", "with a list of values, sweep records the options that "
                                       "vary as the variant itself: leave out --variant");
    }
    int norms[NB_NORMS_MAX];
    int nnorms = nb_parse_norm_list("sweep", norms_arg, norms, NB_NORMS_MAX);
    if (nnorms < 0) {
        free_opts(opts, nopts);
        return NB_EXIT_USAGE;
    }
    /* 'all': the norms this task takes (lm and draw refuse batch); a task sweep does not know is
     * named by the jobs' own checks below */
    const nb_task *tk = nb_task_find(task);
    if (tk && strcmp(norms_arg, "all") == 0)
        nnorms = nb_norms_task_takes(tk, norms, nnorms, NULL, 0);

    /* The product: seed (outer) x every list option, in the order given x norm (inner), so
     * that the norms being compared run next to each other and a slow spell of the machine
     * (another process, thermal limits) falls on all of them rather than on one norm's seeds. */
    long total = (long)nnorms * seeds;
    for (int i = 0; i < nopts; i++)
        if (!opts[i].flag) total *= opts[i].n;
    if (total > 100000) {
        free_opts(opts, nopts);
        return nb_usage_error("sweep", "%ld jobs is too many", total);
    }
    job *jobs = calloc((size_t)total, sizeof *jobs);
    if (!jobs) {
        free_opts(opts, nopts);
        return nb_die("out of memory");
    }
    int total_threads = threads > 0 ? threads : omp_get_max_threads();
    int per_job = total_threads / jobs_n > 0 ? total_threads / jobs_n : 1;
    static char optnames[MAXOPT][68];
    for (int i = 0; i < nopts; i++) {
        size_t l = strnlen(opts[i].name, sizeof opts[i].name - 1);
        optnames[i][0] = optnames[i][1] = '-';
        memcpy(optnames[i] + 2, opts[i].name, l);
        optnames[i][l + 2] = '\0';
    }
    for (long j = 0; j < total; j++) {
        job *jb = &jobs[j];
        long r = j;
        int norm = norms[r % nnorms];
        r /= nnorms;
        int pick[MAXOPT];
        for (int i = nopts - 1; i >= 0; i--) {
            if (opts[i].flag) continue;
            pick[i] = (int)(r % opts[i].n);
            r /= opts[i].n;
        }
        int seed = (int)r + 1;
        snprintf(jb->seedbuf, sizeof jb->seedbuf, "%d", seed);
        int n = 0;
        jb->argv[n++] = "run";
        jb->argv[n++] = task;
        jb->argv[n++] = "--norm";
        jb->argv[n++] = nb_norm_name((nb_norm_kind)norm);
        jb->argv[n++] = "--seed";
        jb->argv[n++] = jb->seedbuf;
        for (int i = 0; i < nopts; i++) {
            jb->argv[n++] = optnames[i];
            if (!opts[i].flag) jb->argv[n++] = opts[i].values[pick[i]];
        }
        /* The key: the job's own arguments, without where and how fast it runs. */
        nb_buf key = {0};
        for (int i = 1; i < n; i++)
            nb_buf_printf(&key, "%s%s", i > 1 ? " " : "", jb->argv[i]);
        if (key.oom || key.len >= sizeof jb->key) {
            nb_buf_free(&key);
            rc = nb_usage_error("sweep", "job %ld's options are too long", j + 1);
            goto out;
        }
        memcpy(jb->key, key.p, key.len + 1);
        nb_buf_free(&key);
        nb_buf var = {0};
        for (int i = 0; i < nopts; i++)
            if (!opts[i].flag && opts[i].n > 1)
                nb_buf_printf(&var, "%s--%s %s", var.len ? " " : "", opts[i].name,
                              opts[i].values[pick[i]]);
        if (var.oom || var.len >= sizeof jb->variant) {
            nb_buf_free(&var);
            rc = nb_usage_error("sweep", "job %ld's options are too long", j + 1);
            goto out;
        }
        if (var.p) memcpy(jb->variant, var.p, var.len + 1);
        nb_buf_free(&var);
        jb->argc = n;
        if (nb_run_check_args(n, jb->argv) != 0) {
            fprintf(stderr, "hint: in sweep job %ld: normbench run %s\n", j + 1, jb->key);
            goto out;
        }
    }

    if (nb_mpi_on() && nb_mpi_rank() != 0) {
        /* another rank: run what rank 0 hands out, until it says there is no more */
        if (!dry) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_sweep_signal;
            sigemptyset(&sa.sa_mask);
            sigaction(SIGINT, &sa, NULL);
            sigaction(SIGTERM, &sa, NULL);
            sigaction(SIGHUP, &sa, NULL);
            nb_mpi_sweep_worker(&sweep_stop, rank_job);
        }
        rc = NB_EXIT_OK;
        goto out;
    }
    rc = run_jobs(jobs, total, db, dry, jobs_n, per_job, threads > 0);
out:
    free(jobs);
    free_opts(opts, nopts);
    return rc;
}
