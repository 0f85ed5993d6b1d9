/* cmd/main.c — normbench's entry point and its one command table. */
#include "cmd/cmd.h"

#include "nn/blas.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>
#include <stdlib.h>
#include <strings.h>

#include "buildinfo.h"
#include "run/mpi.h"
#include "datasets/registry.h"
#include "nn/types.h"
#include "tasks/task.h"

typedef struct nb_command {
    const char *name;
    int (*fn)(int argc, const char **argv);
    const char *summary;
} nb_command;

/* One row per command; `normbench help` lists them in this order. */
static const nb_command commands[] = {
    {"run", cmd_run, "train one task with one norm and record it in the store"},
    {"sweep", cmd_sweep, "run every norm on the same seeds (and option lists); resumable"},
    {"runs", cmd_runs, "list the runs in the store"},
    {"show", cmd_show, "show one run: configuration, provenance, metrics"},
    {"report", cmd_report, "compare norms: final metrics, time per step, speed vs layer"},
    {"plot", cmd_plot, "figures: loss against steps and against time, a line per norm"},
    {"translate", cmd_translate, "translate stdin with a finished translation run's model"},
    {"sample", cmd_sample, "generate text with a finished language-model run's model"},
    {"bleu", cmd_bleu, "score translations with SacreBLEU's corpus BLEU"},
    {"bench", cmd_bench, "benchmark the norm kernels or a task's training step"},
    {"fetch", cmd_fetch, "download, verify and unpack a paper dataset (resumable)"},
    {"datasets", cmd_datasets, "list the datasets: source, checksum, location, status"},
    {"help", cmd_help, "show help for normbench or one command"},
};

static const nb_command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static void print_main_help(FILE *f) {
    fprintf(f, "usage: normbench COMMAND [OPTIONS]\n"
               "       normbench help COMMAND | normbench COMMAND --help | normbench --version\n\n"
               "Trains the LayerNorm and RMSNorm papers' models with each normalization\n(");
    const char *const *names = nb_norm_names();
    for (int i = 0; names[i]; i++)
        fprintf(f, "%s%s", i ? ", " : "", names[i]);
    fprintf(f, ") and compares them.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nenvironment: NORMBENCH_DB (store, default ./normbench.db), NORMBENCH_DATA (data "
               "directory,\ndefault $XDG_CACHE_HOME/normbench or ~/.cache/normbench)\n"
               "exit status: 0 success, 1 failure at run time, 2 usage error\n");
}

/* `normbench __complete WHAT` (hidden: not in the help): the words the bash completion script
 * (completions/normbench.bash) offers, from the binary's own tables, one per line. WHAT is
 * commands, tasks, norms, datasets (every task's and the registry's, sorted), datasets TASK
 * (that task's) or registry (the datasets fetch downloads). */
static int cmd_complete(int argc, const char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "commands") == 0) {
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            puts(commands[i].name);
    } else if (strcmp(what, "tasks") == 0) {
        for (int i = 0; nb_task_at(i); i++)
            puts(nb_task_at(i)->name);
    } else if (strcmp(what, "norms") == 0) {
        for (int k = 0; nb_norm_name((nb_norm_kind)k); k++)
            puts(nb_norm_name((nb_norm_kind)k));
    } else if (strcmp(what, "registry") == 0) { /* what fetch takes */
        for (int i = 0; i < nb_registry_count(); i++)
            puts(nb_registry_at(i)->name);
    } else if (strcmp(what, "datasets") == 0 && argc > 2) {
        const nb_task *t = nb_task_find(argv[2]);
        for (int i = 0; t && t->datasets && t->datasets[i]; i++)
            puts(t->datasets[i]);
    } else if (strcmp(what, "datasets") == 0) {
        const char *names[256];
        int n = 0;
        for (int i = 0; nb_task_at(i); i++)
            for (int j = 0; nb_task_at(i)->datasets && nb_task_at(i)->datasets[j]; j++)
                if (n < 256) names[n++] = nb_task_at(i)->datasets[j];
        for (int i = 0; i < nb_registry_count() && n < 256; i++)
            names[n++] = nb_registry_at(i)->name;
        for (int i = 1; i < n; i++) /* sorted, each once */
            for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                const char *x = names[j];
                names[j] = names[j - 1];
                names[j - 1] = x;
            }
        for (int i = 0; i < n; i++)
            if (i == 0 || strcmp(names[i], names[i - 1]) != 0) puts(names[i]);
    } else {
        fprintf(stderr, "error: '__complete' takes commands, tasks, norms, datasets [TASK] or "
                        "registry\nhint: it is what the bash completion script calls\n");
        return NB_EXIT_USAGE;
    }
    return NB_EXIT_OK;
}

int cmd_help(int argc, const char **argv) {
    if (argc < 2) {
        print_main_help(stdout);
        return NB_EXIT_OK;
    }
    const nb_command *c = find_command(argv[1]);
    if (!c) return nb_usage_error("help", "unknown command '%s'", argv[1]);
    if (c->fn == cmd_help) {
        print_main_help(stdout);
        return NB_EXIT_OK;
    }
    if (argc > 3) return nb_usage_error("help", "unexpected argument '%s'", argv[3]);
    /* help run TASK: one task's options */
    if (argc == 3 && c->fn == cmd_run) return nb_run_help_task(argv[2]);
    if (argc == 3) return nb_usage_error("help", "'help %s' takes no further argument", argv[1]);
    const char *args[] = {c->name, "--help", NULL};
    return c->fn(2, args);
}

/* Fails the program when stdout could not be written (e.g. a full disk), as git does. */
static int finish_stdout(int rc) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "error: cannot write to standard output: %s\n", strerror(errno));
        return rc == NB_EXIT_OK ? NB_EXIT_FAIL : rc;
    }
    if (fclose(stdout) != 0 && errno != EBADF) {
        fprintf(stderr, "error: cannot write to standard output: %s\n", strerror(errno));
        return rc == NB_EXIT_OK ? NB_EXIT_FAIL : rc;
    }
    return rc;
}

/* Settings the OpenMP runtime and OpenBLAS read only when they load, so normbench re-executes
 * itself once (NORMBENCH_ENV_SET guards the loop) when it needs to change one. A user's own
 * value is always respected; the values in force are recorded with every run and timing.
 *
 * - OPENBLAS_CORETYPE: DYNAMIC_ARCH picks its kernels from the CPU model number; on a model it
 *   does not know (common in virtual machines) it falls back to "Prescott" SSE3 kernels, 2-3x
 *   slower here. When the detected core is older than the CPU's own feature flags support, it
 *   is set to SkylakeX (AVX-512) or Haswell (AVX2).
 * - OMP_WAIT_POLICY: libgomp's default lets idle threads spin. On this project's 2-core machine
 *   with another process busy, spinning made the MNIST training step 5x slower (76 ms against
 *   14 ms passive, same run otherwise), so normbench defaults it to passive. */
static void fix_runtime_env(char **argv) {
    if (getenv("NORMBENCH_ENV_SET")) return;
    int set_wait = 0, set_core = 0;
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        set_wait = 1;
    }
    static const char *const old_cores[] = {"Prescott", "Core2", "Penryn",      "Dunnington",
                                            "Nehalem",  "Atom",  "Sandybridge", NULL};
    const char *core = openblas_get_corename();
    int old = 0;
    for (int i = 0; core && old_cores[i]; i++)
        old |= strcasecmp(core, old_cores[i]) == 0;
    if (old && !getenv("OPENBLAS_CORETYPE")) {
        __builtin_cpu_init();
        const char *want = NULL;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
            want = "SkylakeX";
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            want = "Haswell";
        if (want) {
            setenv("OPENBLAS_CORETYPE", want, 1);
            set_core = 1;
        }
    }
    if (!set_wait && !set_core) return;
    setenv("NORMBENCH_ENV_SET", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the runtime as it loaded, and take the variables back so that
     * the recorded settings (read from the environment) do not claim what is not in force. */
    if (set_wait) unsetenv("OMP_WAIT_POLICY");
    if (set_core) unsetenv("OPENBLAS_CORETYPE");
    unsetenv("NORMBENCH_ENV_SET");
}

static int run_command(int argc, const char **argv) {
    if (argc < 2) {
        print_main_help(stderr);
        return NB_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("normbench %s (git %s)\n", NB_VERSION, NB_GIT_REV);
        printf("BLAS: %s (built against %s)\n", openblas_get_config(), NB_BLAS_BUILD);
        printf("compiler: %s\n", NB_CC_VERSION);
        return finish_stdout(NB_EXIT_OK);
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_main_help(stdout);
        return finish_stdout(NB_EXIT_OK);
    }
    if (strcmp(name, "__complete") == 0) return finish_stdout(cmd_complete(argc - 1, argv + 1));
    const nb_command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "error: unknown command '%s'\nhint: the commands are:", name);
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            fprintf(stderr, " %s", commands[i].name);
        fprintf(stderr, "; see 'normbench help'\n");
        return NB_EXIT_USAGE;
    }
    return finish_stdout(c->fn(argc - 1, argv + 1));
}

/* The MPI layer's messages (run/mpi.h): on stderr. */
static void mpi_say(void *ctx, const char *text) {
    (void)ctx;
    fputs(text, stderr);
}

int main(int argc, const char **argv) {
    fix_runtime_env((char **)argv);
    nb_mpi_set_say(mpi_say, NULL);
    /* under mpirun or srun (or with --mpi): one rank of a sweep or a data-parallel run */
    if (nb_mpi_start(&argc, argv) != 0) return NB_EXIT_FAIL;
    return nb_mpi_end(run_command(argc, argv));
}
