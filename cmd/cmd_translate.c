/* cmd/cmd_translate.c — `normbench translate RUN`: raw source sentences on stdin, one detokenized
 * translation a line on stdout, by the finished run's kept model with the beam search, length
 * normalization and decoding limits its test_bleu used. Lines are read a window at a time, each
 * line at most as long as the model takes (a longer one is refused, its output line empty), and
 * translated in batches the user bounds (--batch-tokens): memory does not grow with the input. */
#include "cmd/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/checkpoint.h"
#include "tasks/task.h"

static const char translate_usage[] =
    "usage: normbench translate RUN [--db FILE] [--batch-tokens N] < source.txt > translation.txt\n"
    "\n"
    "Reads raw source sentences, one a line, and writes exactly one detokenized translation a\n"
    "line (an empty line for an empty one), with the model a finished translation run (task mt)\n"
    "kept beside the store, its BPE codes and vocabularies, and the same beam search, length\n"
    "normalization and decoding limits as its recorded test_bleu. The kept model records the\n"
    "run and store it belongs to, and is refused in another run or store, or when its files\n"
    "changed (a model kept before this check existed is refused too: train the run again).\n"
    "A model kept before runs recorded their source <eos>, beam rules and length cap (--src-eos,\n"
    "--beam-rules, --decode-cap of `run mt`) decodes as it was made: no source <eos>, the simple\n"
    "beam rules and its recorded cap. --beam-rules and --decode-cap decode with other rules\n"
    "(the output is then not its test_bleu's): to measure what they change on one model.\n"
    "\n"
    "A line may have at most as many BPE pieces as the longest source sentence of the run's data\n"
    "(test_bleu's rule). A longer line is not translated: it is named on stderr and its output\n"
    "line is empty (split it and translate the parts). Input with a NUL byte is not text and is\n"
    "refused, naming the line; other bytes (invalid UTF-8 too) are translated as words, as\n"
    "`bleu` reads them. Lines are read 1,000 at a time, sorted by length and translated in\n"
    "batches of at most --batch-tokens source pieces, reckoned at the longest line the model\n"
    "takes (default: the run's --eval-batch lines of that length, what its test_bleu used):\n"
    "lower it to use less memory. Batches that cannot fit in the memory left (physical, or\n"
    "ulimit -v) are refused before the model is built, naming a --batch-tokens that fits.\n"
    "Output comes out a window at a time, in input order.\n"
    "\n"
    "Exit status: 0 every line translated, 1 failed (no such run, not finished, no model kept\n"
    "or one of another run, unreadable input, a NUL byte: the windows of 1,000 lines before\n"
    "the failing one are written), 2 usage error, 3 translated but one or more lines were too\n"
    "long (their output lines are empty).\n";

/* Lines read and translated at a time. */
#define WINDOW 1000

/* Reads one line of stdin (without its '\n', and a trailing '\r'), keeping at most keep + 1
 * bytes of it in *buf (so a longer line reads as longer than keep); the rest is read and
 * dropped. Returns 1 for a line, 0 at the end, -1 on a read error, -2 for a NUL byte. */
static int read_line(char **buf, size_t *cap, size_t keep, size_t *len) {
    size_t n = 0;
    int c, any = 0, nul = 0;
    while ((c = getchar()) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (c == '\0') nul = 1;
        if (n <= keep) {
            if (n + 2 > *cap) {
                size_t nc = *cap ? 2 * *cap : 256;
                if (nc > keep + 2) nc = keep + 2;
                char *p = realloc(*buf, nc);
                if (!p) return -1;
                *buf = p;
                *cap = nc;
            }
            (*buf)[n++] = (char)c;
        }
    }
    if (ferror(stdin)) return -1;
    if (!any) return 0;
    if (nul) return -2;
    if (n > 0 && n <= keep && (*buf)[n - 1] == '\r') n--;
    if (!*buf) {
        *buf = malloc(1);
        if (!*buf) return -1;
        *cap = 1;
    }
    (*buf)[n] = '\0';
    *len = n;
    return 1;
}

int cmd_translate(int argc, const char **argv) {
    const char *db = NULL;
    int batch_tokens = 0, rules = 0, cap = 0;
    static const char *const rules_choices[] = {"kept", "nematus", "simple", NULL};
    static const char *const cap_choices[] = {"kept", "authors", "longest", NULL};
    nb_opt opts[] = {NB_OPT_DB(&db),
                     {"batch-tokens", NB_OPT_INT, &batch_tokens, "N",
                      "source pieces a batch holds, reckoned at the longest line the model takes "
                      "(default: the run's --eval-batch lines of that length)",
                      NULL, 1, 1e9},
                     {"beam-rules", NB_OPT_CHOICE, &rules, "R",
                      "RNNSearch's beam rules: kept (the run's, as its test_bleu; the default), "
                      "nematus or simple (run mt --beam-rules), to compare them on one model",
                      rules_choices},
                     {"decode-cap", NB_OPT_CHOICE, &cap, "C",
                      "the length cap: kept (the run's, as its test_bleu; the default), authors or "
                      "longest (run mt --decode-cap), to compare them on one model",
                      cap_choices},
                     {NULL}};
    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("translate", translate_usage, argc, argv, opts, pos, 1, &npos);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) return rc;
    long long id;
    if ((rc = nb_parse_run_operand("translate", npos, pos, &id)) != 0) return rc;
    nb_job job;
    nb_ckpt_ident want;
    char model[4200];
    rc = nb_run_load_config(db ? db : nb_default_db(), id, &job, model, sizeof model, &want);
    if (rc) return rc;
    nb_train_cfg cfg = job.cfg; /* its strings and task options live in job */
    const nb_task *task = nb_task_find(cfg.task);
    if (!task->translate_open) {
        nb_job_free(&job);
        return nb_die("run %lld is a '%s' run: only translation runs (task mt) translate", id,
                      cfg.task);
    }
    nb_err err;
    nb_err_clear(&err);
    nb_translate_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.beam_rules = rules;
    lim.decode_cap = cap;
    void *tr = task->translate_open(&cfg, model, &want, batch_tokens, &lim, &err);
    if (!tr) {
        rc = nb_report_err(&err);
        nb_job_free(&job);
        return rc;
    }
    char *lines[WINDOW], *out[WINDOW];
    size_t caps[WINDOW];
    int pieces[WINDOW];
    memset(lines, 0, sizeof lines);
    memset(out, 0, sizeof out);
    memset(caps, 0, sizeof caps);
    long line_no = 0, refused = 0;
    rc = NB_EXIT_OK;
    for (int done = 0; !done && rc == NB_EXIT_OK;) {
        int n = 0;
        while (n < WINDOW) {
            size_t len = 0;
            int got = read_line(&lines[n], &caps[n], lim.max_bytes, &len);
            if (got == 0) {
                done = 1;
                break;
            }
            if (got == -1) {
                rc = nb_die("cannot read the source sentences from standard input");
                break;
            }
            line_no++;
            if (got == -2) {
                nb_die("standard input line %ld holds a NUL byte: not text", line_no);
                fprintf(stderr, "hint: translate reads plain text, one sentence a line\n");
                rc = NB_EXIT_FAIL;
                break;
            }
            n++;
        }
        if (rc != NB_EXIT_OK || n == 0) break;
        if (task->translate(tr, lines, n, out, pieces, &err) != 0) {
            rc = nb_report_err(&err);
            break;
        }
        long first = line_no - n + 1;
        for (int i = 0; i < n; i++) {
            if (!out[i]) {
                refused++;
                if (pieces[i] < 0)
                    fprintf(stderr,
                            "error: standard input line %ld has more than %zu bytes, so more than "
                            "the %d BPE pieces this model takes: its output line is empty\n",
                            first + i, lim.max_bytes, lim.src_max);
                else
                    fprintf(stderr,
                            "error: standard input line %ld has %d BPE pieces, more than the %d "
                            "this model takes: its output line is empty\n",
                            first + i, pieces[i], lim.src_max);
            }
            fputs(out[i] ? out[i] : "", stdout);
            putchar('\n');
            free(out[i]);
            out[i] = NULL;
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == NB_EXIT_OK) rc = nb_die("cannot write the translations to standard output");
    } else if (rc == NB_EXIT_OK && refused) {
        fprintf(stderr,
                "error: %ld of %ld lines were too long to translate (at most %d BPE pieces, the "
                "longest source sentence of run %lld's data)\n",
                refused, line_no, lim.src_max, id);
        fprintf(stderr, "hint: split those lines (at sentence ends) and translate the parts\n");
        rc = 3;
    }
    for (int i = 0; i < WINDOW; i++)
        free(lines[i]);
    task->translate_close(tr);
    nb_job_free(&job);
    return rc;
}
