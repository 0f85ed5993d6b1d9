/* cmd/cmd.h — the command table's interface and the helpers every command shares.
 *
 * Adding a command is: a file cmd/cmd_NAME.c with `int cmd_NAME(int argc, const char **argv)`,
 * one row in the table in cmd/main.c, a test in tests/cli/, a help text (its usage string).
 * A command returns the process exit status: 0 success, 1 failure at run time, 2 usage error.
 * Only cmd/ prints errors and decides exit statuses. */
#ifndef NB_CMD_CMD_H
#define NB_CMD_CMD_H

#include <stdint.h>
#include <stdio.h>
#include <signal.h>

#include "results/store.h"
#include "run/job.h" /* nb_job, and the exit statuses NB_EXIT_OK, NB_EXIT_FAIL, NB_EXIT_USAGE */
#include "tasks/checkpoint.h"
#include "util/err.h"

#include "util/version.h" /* NB_VERSION */

int cmd_run(int argc, const char **argv);
int cmd_runs(int argc, const char **argv);
int cmd_show(int argc, const char **argv);
int cmd_report(int argc, const char **argv);
int cmd_bench(int argc, const char **argv);
int cmd_help(int argc, const char **argv);
int cmd_sweep(int argc, const char **argv);
int cmd_plot(int argc, const char **argv);
int cmd_fetch(int argc, const char **argv);
int cmd_datasets(int argc, const char **argv);
int cmd_translate(int argc, const char **argv);
int cmd_sample(int argc, const char **argv);
int cmd_bleu(int argc, const char **argv);

/* Makes sure the registry dataset name is installed in data_dir, fetching it on first use
 * (with a progress bar on stderr unless quiet; NORMBENCH_MIRROR honoured) unless no_fetch.
 * Prints the error itself. Returns NB_EXIT_OK, NB_EXIT_FAIL, NB_EXIT_USAGE (a malformed
 * NORMBENCH_FETCH_* variable) or 128 + the signal's number when SIGINT or SIGTERM stopped it.
 * (cmd/cmd_fetch.c) */
int nb_cmd_ensure_dataset(const char *name, const char *data_dir, int no_fetch, int quiet);

/* Parses and validates a `run` command line (argv[0] = "run") without running it: 0 when it
 * is valid, NB_EXIT_USAGE after printing the error. Used by sweep to check every job first. */
int nb_run_check_args(int argc, const char **argv);

/* Whether `run` takes the option name (without "--") as a flag, with no value: the common
 * options and every task's declared ones (tasks/taskopt.h). *known is set when any takes it. */
int nb_run_opt_is_flag(const char *name, int *known);

/* ---- a run as a job (run/job.h) ----------------------------------------------------------- */

/* The `run` command line argv (argv[0] = "run") parsed into the job j (nb_job_init'ed): its
 * configuration, labels and recorded arguments (run/job.h's "from arguments"). Returns 0, -1
 * after printing the help (exit 0), or NB_EXIT_USAGE after printing the error. */
int nb_run_parse(int argc, const char **argv, nb_job *j);
/* A job from a `run` argument vector, saying and asking through the command's nb_job_io (stderr,
 * the progress line, the dataset's fetch): nb_job_init, nb_run_parse, and the note on the BLAS
 * kernels. Returns as nb_run_parse; free j with nb_job_free either way. */
int nb_run_job_build(int argc, const char **argv, nb_job *j);
/* The same for a job built from a run's configuration config (nb_job_from_config: a resumed
 * run's as stored, or a job an MPI sweep hands to a rank), hosted as hosting says (the JSON of
 * nb_job_hosting_json; no data_dir: this process's default data directory). Returns 0, or an
 * exit status after the message. */
int nb_run_job_from_config(const char *config, const char *hosting, nb_job *j);
/* The hosting options of a legacy store's run from its recorded arguments (run/job.h's
 * nb_job_host_fn, nb_job_stored_hosting's fallback for a run recorded without "hosting"; no
 * data_dir when none was given). */
void nb_hosting_from_args(int argc, const char **argv, nb_job_hosting *h);
/* The job of `run --resume ID --db DB` (from_scratch, quiet: its options), built from the store
 * (nb_job_from_store) with the command's nb_job_io. Returns 0 or an exit status after the
 * message; free j with nb_job_free either way. */
int nb_run_job_resume(const char *db, int64_t id, int from_scratch, int quiet, nb_job *j);

struct nb_train_cfg;
/* The configuration of finished run id in store db, rebuilt from its stored configuration
 * (nb_job_from_config) into j->cfg (free j with nb_job_free after use; on failure it is freed),
 * and the directory its model is kept in, and (ident not NULL) what that model must belong to
 * (the run and store, as a checkpoint: tasks/checkpoint.h). Prints its errors; returns 0,
 * NB_EXIT_FAIL or NB_EXIT_USAGE. (cmd/cmd_run.c) */
int nb_run_load_config(const char *db, int64_t id, nb_job *j, char *model, size_t model_size,
                       nb_ckpt_ident *ident);

/* `normbench help run TASK`: the common options and TASK's own, with defaults. */
int nb_run_help_task(const char *name);

/* The compute libraries' settings (OpenBLAS's configuration, core, threads, parallel model) as a
 * newly allocated JSON object for the runs' provenance (caller frees; NULL when out of memory).
 * cmd/compute.c */
char *nb_compute_json(void);

/* ---- messages (stderr) ------------------------------------------------------------------- */

/* A note on stderr when the environment's OPENBLAS_CORETYPE holds kernels older than the
 * processor supports (timings would not show what the machine can do). cmd/compute.c */
void nb_note_blas_core(void);

/* "error: MSG" then, if the hint is set, "hint: HINT". Returns NB_EXIT_FAIL. */
int nb_report_err(const nb_err *e);
/* printf-style "error: ..." line; returns NB_EXIT_FAIL. */
int nb_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* printf-style "error: ..." line followed by "hint: see 'normbench CMD --help'"; returns 2. */
int nb_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The RUN operand of `normbench CMD RUN` (translate, sample): *id from pos[0] when npos is 1 and
 * it is a positive number; else the usage error, said as for cmd (its return value). */
int nb_parse_run_operand(const char *cmd, int npos, const char *const *pos, long long *id);

/* ---- options ----------------------------------------------------------------------------- */

typedef enum nb_opt_type {
    NB_OPT_STR,    /* const char ** */
    NB_OPT_INT,    /* int *, decimal, range [min, max] */
    NB_OPT_I64,    /* int64_t *, range [min, max] */
    NB_OPT_DOUBLE, /* double *, finite, range [min, max] */
    NB_OPT_FLAG,   /* int *, set to 1, takes no value */
    NB_OPT_CHOICE  /* int *, index into choices (NULL-terminated) */
} nb_opt_type;

typedef struct nb_opt {
    const char *name; /* long name without "--" */
    nb_opt_type type;
    void *dst;
    const char *metavar; /* "N", "FILE"; NULL for flags */
    const char *help;
    const char *const *choices; /* NB_OPT_CHOICE */
    double min, max;            /* numeric range when min < max */
    int seen;                   /* set by the parser */
    int empty_ok;               /* NB_OPT_STR: "" is a meaningful value (else a usage error) */
} nb_opt;

/* Parses argv[1..] (argv[0] is the command name) into opts (terminated by a {NULL} row),
 * accepting --name VALUE and --name=VALUE, and "--" to end options. Numbers are decimal only
 * (no hex, spaces, inf or nan); an empty string value is refused unless the row says empty_ok;
 * an option that takes a value given twice is a usage error naming it (a flag may repeat).
 * Positional arguments are stored in pos (at most maxpos; *npos set). "-h"/"--help" prints the
 * usage text and the option table to stdout and returns -1 (the caller then exits 0). A usage error
 * prints "error: ..." (naming the option and, for choices, the valid values) and returns
 * NB_EXIT_USAGE. Returns 0 when all is well. */
int nb_parse_opts(const char *cmd, const char *usage, int argc, const char **argv, nb_opt *opts,
                  const char **pos, int maxpos, int *npos);

/* The options several commands share, as rows of an option table. */
#define NB_OPT_DB(ptr)                                                                             \
    {                                                                                              \
        .name = "db", .type = NB_OPT_STR, .dst = (ptr), .metavar = "FILE",                         \
        .help = "results store (default $NORMBENCH_DB, else ./normbench.db)"                       \
    }
#define NB_OPT_FORMAT(ptr, list)                                                                   \
    {                                                                                              \
        .name = "format", .type = NB_OPT_CHOICE, .dst = (ptr), .metavar = "FMT",                   \
        .help = "output format", .choices = (list)                                                 \
    }

/* Decimal numbers as a person writes them: util/num.h (nb_parse_int, nb_parse_double). */
#include "util/num.h"

/* A text option that is stored and shown later (a run's --tag, --variant): NULL or valid UTF-8
 * without control characters passes (0); otherwise prints a usage error naming the option, with
 * the value escaped, and returns NB_EXIT_USAGE. */
int nb_check_text_opt(const char *cmd, const char *opt, const char *value);

/* Whether the option called name was given on the command line. */
int nb_opt_seen(const nb_opt *opts, const char *name);

/* Prints usage and the option table to f. */
void nb_print_help(FILE *f, const char *usage, const nb_opt *opts);

/* Shared environment defaults (docs/guide.md, "Commands"): the store path (NORMBENCH_DB, else
 * ./normbench.db) and the data directory (NORMBENCH_DATA, else $XDG_CACHE_HOME/normbench, else
 * ~/.cache/normbench). Return pointers to static storage. */
const char *nb_default_db(void);
const char *nb_default_data_dir(void);

/* "error: unknown task 'NAME'" (NULL name: "which task?") with the list of every task in the
 * task table; returns NB_EXIT_USAGE. */
int nb_unknown_task(const char *cmd, const char *name);

/* Parses "a,b,c" or "all" of norm names into kinds[] (in the given order, no duplicates);
 * returns the count, or -1 after printing a usage error naming the bad name and the valid ones. */
int nb_parse_norm_list(const char *cmd, const char *list, int *kinds, int max);

/* Keeps in kinds[0..n) the norms task takes with the options given (lm and draw refuse batch):
 * what 'all' means for a task. Returns the count kept; n when the task would take none of them
 * (the caller's own checks then name the refusal). */
struct nb_task;
struct nb_given;
int nb_norms_task_takes(const struct nb_task *task, int *kinds, int n, const struct nb_given *given,
                        int ngiven);

#endif
