/* cmd/cmd_translate.c — `normbench translate RUN`: raw source sentences on stdin, one detokenized
 * translation a line on stdout, by the finished run's kept model with the beam search and length
 * normalization its test_bleu used (so translating its test set and scoring it reproduces
 * test_bleu). */
#include "cmd/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"

static const char translate_usage[] =
    "usage: normbench translate RUN [--db FILE] < source.txt > translation.txt\n\n"
    "Reads raw source sentences, one a line, and writes exactly one detokenized translation a\n"
    "line (an empty line for an empty one), with the model a finished translation run (task mt)\n"
    "kept beside the store, its BPE codes and vocabularies, and the same beam search and length\n"
    "normalization as its recorded test_bleu. Exit status: 0 translated, 1 failed (no such\n"
    "run, not finished, no model kept, unreadable input), 2 usage error.\n";

int cmd_translate(int argc, const char **argv) {
    const char *db = NULL;
    nb_opt opts[] = {NB_OPT_DB(&db), {NULL}};
    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("translate", translate_usage, argc, argv, opts, pos, 1, &npos);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) return rc;
    if (npos < 1) return nb_usage_error("translate", "which run? e.g. 'normbench translate 3'");
    long long id;
    if (nb_parse_int(pos[0], &id) != 0 || id < 1)
        return nb_usage_error("translate", "a run is a positive number, not '%s'", pos[0]);
    nb_train_cfg cfg;
    char *buf = NULL, model[4200];
    rc = nb_run_load_config(db ? db : nb_default_db(), id, &cfg, &buf, model, sizeof model);
    if (rc) return rc;
    const nb_task *task = nb_task_find(cfg.task);
    if (!task->translate) {
        nb_task_opts_free(&cfg);
        free(buf);
        return nb_die("run %lld is a '%s' run: only translation runs (task mt) translate", id,
                      cfg.task);
    }
    /* every line first: the model translates them in batches */
    char **lines = NULL, **out = NULL;
    int n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    while ((got = getline(&line, &lcap, stdin)) >= 0) {
        if (got > 0 && line[got - 1] == '\n') line[--got] = '\0';
        if (got > 0 && line[got - 1] == '\r') line[--got] = '\0';
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            char **nl = realloc(lines, sizeof *lines * (size_t)cap);
            if (!nl) break;
            lines = nl;
        }
        lines[n] = strdup(line);
        if (!lines[n]) break;
        n++;
    }
    int read_ok = feof(stdin) && !ferror(stdin);
    free(line);
    nb_err err;
    nb_err_clear(&err);
    rc = NB_EXIT_OK;
    if (!read_ok) {
        rc = nb_die("cannot read the source sentences from standard input");
    } else if (n > 0) {
        out = calloc((size_t)n, sizeof *out);
        if (!out) {
            rc = nb_die("out of memory");
        } else if (task->translate(&cfg, model, lines, n, out, &err) != 0) {
            rc = nb_report_err(&err);
        } else {
            for (int i = 0; i < n; i++)
                printf("%s\n", out[i]);
        }
    }
    for (int i = 0; i < n; i++) {
        free(lines[i]);
        if (out) free(out[i]);
    }
    free(lines);
    free(out);
    nb_task_opts_free(&cfg);
    free(buf);
    return rc;
}
