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
    "first; --dry-run stops there. Each job is a 'normbench run' recorded with the tag sweep=JOB; "
    "jobs that already\n"
    "finished in the store are skipped, so an interrupted sweep resumes where it stopped.\n"
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
static void on_sweep_signal(int sig) {
    (void)sig;
    sweep_stop = 1;
}

enum { MAXOPT = 64, MAXARGV = 2 * MAXOPT + 16 };

typedef struct job {
    const char *argv[MAXARGV];
    int argc;
    char key[2048];
    char variant[1024]; /* the values of the options that vary ("--batch 4"), "" when none */
    char seedbuf[24];
    int skip;
} job;

static void free_opts(opt_values *o, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < o[i].n; j++)
            free(o[i].values[j]);
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
    char threads_buf[16];
    snprintf(threads_buf, sizeof threads_buf, "%d", per_job);
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

    /* Skip what already finished. */
    nb_err err;
    nb_err_clear(&err);
    nb_store *store = NULL;
    /* A dry run reads an existing store but never creates one. */
    if (!(dry && access(db, F_OK) != 0) && nb_store_open(&store, db, dry, &err) != 0) {
        rc = nb_report_err(&err);
        goto out;
    }
    int todo = 0;
    for (long j = 0; j < total; j++) {
        int64_t id = 0;
        if (store && nb_run_find_by_tag(store, "sweep", jobs[j].key, "finished", &id, &err) != 0) {
            nb_store_close(store);
            rc = nb_report_err(&err);
            goto out;
        }
        jobs[j].skip = id > 0;
        todo += !jobs[j].skip;
        printf("%4ld  normbench run %s%s\n", j + 1, jobs[j].key,
               jobs[j].skip ? "   (finished already: skipped)" : "");
    }
    if (store) nb_store_close(store);
    fflush(stdout);
    if (dry) {
        fprintf(stderr, "%ld jobs, %d to run (dry run: nothing started)\n", total, todo);
        rc = NB_EXIT_OK;
        goto out;
    }
    fprintf(stderr, "sweep: %ld jobs, %d to run, %d at a time with %d threads each\n", total, todo,
            jobs_n, per_job);

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sweep_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    int running = 0, ok = 0, bad = 0;
    pid_t *pids = calloc((size_t)jobs_n, sizeof *pids);
    long *which = calloc((size_t)jobs_n, sizeof *which);
    if (!pids || !which) {
        free(pids);
        free(which);
        rc = nb_die("out of memory");
        goto out;
    }
    long next = 0;
    for (;;) {
        while (!sweep_stop && running < jobs_n && next < total) {
            job *jb = &jobs[next];
            if (jb->skip) {
                next++;
                continue;
            }
            char tag[2100];
            snprintf(tag, sizeof tag, "sweep=%s", jb->key);
            const char *cargv[MAXARGV + 10];
            int c = 0;
            cargv[c++] = "normbench";
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
            cargv[c] = NULL;
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) {
                fprintf(stderr, "error: cannot start a job: %s\n", strerror(errno));
                sweep_stop = 1;
                bad++;
                break;
            }
            if (pid == 0) {
                sigaction(SIGINT, &old_int, NULL);
                sigaction(SIGTERM, &old_term, NULL);
                /* the job's own "run N STATUS" line would mix into the sweep's results */
                int devnull = open("/dev/null", O_WRONLY);
                if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
                execv("/proc/self/exe", (char *const *)cargv);
                fprintf(stderr, "error: cannot run '/proc/self/exe': %s\n", strerror(errno));
                _exit(127);
            }
            int slot = 0;
            while (pids[slot])
                slot++;
            pids[slot] = pid;
            which[slot] = next;
            running++;
            fprintf(stderr, "[%ld/%ld] started: normbench run %s\n", next + 1, total, jb->key);
            next++;
        }
        if (running == 0) break;
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
                int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                if (code == 0)
                    ok++;
                else
                    bad++;
                fprintf(stderr, "[%ld/%ld] %s (exit %d): normbench run %s\n", which[s] + 1, total,
                        code == 0 ? "finished" : "did not finish", code, jobs[which[s]].key);
            }
    }
    free(pids);
    free(which);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    long skipped = total - todo;
    long left = todo - ok - bad;
    printf("sweep: %ld jobs: %d finished now, %ld finished before, %d did not finish, %ld not "
           "started\n",
           total, ok, skipped, bad, left);
    if (sweep_stop) fprintf(stderr, "sweep interrupted: run the same command again to resume\n");
    rc = (bad == 0 && left == 0) ? NB_EXIT_OK : NB_EXIT_FAIL;
out:
    free(jobs);
    free_opts(opts, nopts);
    return rc;
}
