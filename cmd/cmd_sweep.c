/* cmd/cmd_sweep.c — `normbench sweep TASK --norms LIST --seeds N [run options]`: the product of
 * norms, seeds and any run option given as a comma-separated list, each job a `normbench run`
 * child process recorded with the tag sweep=KEY, so that a sweep run again skips what already
 * finished. */
#include "cmd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nn/nn.h"
#include "results/query.h"
#include "results/store.h"
#include "util/json.h"

static const char sweep_usage[] =
    "usage: normbench sweep TASK --norms LIST|all --seeds N [--jobs N] [--dry-run] [--threads N]\n"
    "                       [--db FILE] [run options]\n\n"
    "Runs TASK for every norm in LIST on seeds 1..N (every norm on the same seeds: a paired\n"
    "comparison), and for every value of any run option given as a comma-separated list, e.g.\n"
    "--batch 128,4 or --lr 1e-3,3e-3. The norms run next to each other (seed by seed), so that\n"
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
    "compares norms within a variant. Exit status: 0 when every job finished, 1 when any did\n"
    "not, 2 usage error.\n";

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
    char runbuf[24];
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

/* Starts job jb as a child process: `run --resume` of its run when it has one (from the
 * checkpoint, or over from step 0 when it has none), else a new run tagged sweep=KEY. Returns
 * the child's pid, or -1. */
static pid_t start_job(job *jb, const char *db, const char *threads_buf,
                       const struct sigaction *old_int, const struct sigaction *old_term,
                       const struct sigaction *old_hup) {
    char tag[2100];
    snprintf(tag, sizeof tag, "sweep=%s", jb->key);
    const char *cargv[MAXARGV + 10];
    int c = 0;
    cargv[c++] = "normbench";
    if (jb->run) {
        snprintf(jb->runbuf, sizeof jb->runbuf, "%lld", (long long)jb->run);
        cargv[c++] = "run";
        cargv[c++] = "--resume";
        cargv[c++] = jb->runbuf;
        if (!has_checkpoint(db, jb->run)) cargv[c++] = "--from-scratch";
        cargv[c++] = "--db";
        cargv[c++] = db;
        cargv[c++] = "--quiet";
    } else {
        for (int i = 0; i < jb->argc; i++)
            cargv[c++] = jb->argv[i];
        cargv[c++] = "--db";
        cargv[c++] = db;
        cargv[c++] = "--threads";
        cargv[c++] = threads_buf;
        cargv[c++] = "--quiet";
        cargv[c++] = "--tag";
        cargv[c++] = tag;
        if (jb->variant[0]) {
            cargv[c++] = "--variant";
            cargv[c++] = jb->variant;
        }
    }
    cargv[c] = NULL;
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "error: cannot start a job: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sigaction(SIGINT, old_int, NULL);
        sigaction(SIGTERM, old_term, NULL);
        sigaction(SIGHUP, old_hup, NULL);
        /* the job's own "run N STATUS" line would mix into the sweep's results */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        execv("/proc/self/exe", (char *const *)cargv);
        fprintf(stderr, "error: cannot run '/proc/self/exe': %s\n", strerror(errno));
        _exit(127);
    }
    return pid;
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

/* Runs the jobs not done yet, jobs_n at a time, each claimed in the store first. Returns the
 * exit status. */
static int run_jobs(job *jobs, long total, const char *db, int dry, int jobs_n, int per_job) {
    nb_err err;
    nb_err_clear(&err);
    nb_store *store = NULL;
    /* A dry run reads an existing store but never creates one. */
    if (!(dry && access(db, F_OK) != 0) && nb_store_open(&store, db, dry, &err) != 0)
        return nb_report_err(&err);
    int todo = 0;
    for (long j = 0; j < total; j++) {
        nb_job_state js;
        memset(&js, 0, sizeof js);
        if (store && nb_job_claim(store, jobs[j].key, 0, &js, &err) != 0) {
            nb_store_close(store);
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
    fprintf(stderr, "sweep: %ld jobs, %d to run, %d at a time with %d threads each\n", total, todo,
            jobs_n, per_job);
    char threads_buf[16];
    snprintf(threads_buf, sizeof threads_buf, "%d", per_job);

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
            pid_t pid = start_job(jb, db, threads_buf, &old_int, &old_term, &old_hup);
            if (pid < 0) {
                jb->state = J_FAILED;
                nb_job_release(store, jb->key, &err);
                sweep_stop = 1;
                break;
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
                if (nb_job_release(store, jb->key, &err) != 0) {
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
    int norms[NB_NORM_COUNT];
    int nnorms = nb_parse_norm_list("sweep", norms_arg, norms, NB_NORM_COUNT);
    if (nnorms < 0) {
        free_opts(opts, nopts);
        return NB_EXIT_USAGE;
    }

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

    rc = run_jobs(jobs, total, db, dry, jobs_n, per_job);
out:
    free(jobs);
    free_opts(opts, nopts);
    return rc;
}
