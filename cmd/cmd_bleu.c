/* cmd/cmd_bleu.c — `normbench bleu REF < HYP`: corpus BLEU as SacreBLEU computes it (13a,
 * exponential smoothing, mixed case; util/bleu.h), for scoring `normbench translate`'s output
 * the way test_bleu is scored. */
#include "cmd/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/mt.h"
#include "util/bleu.h"

static const char bleu_usage[] =
    "usage: normbench bleu REFERENCE [--format table|json] < hypotheses.txt\n\n"
    "Scores detokenized hypotheses (stdin, one a line) against a reference file (plain or\n"
    "gzipped, one a line, as many lines) with corpus BLEU exactly as SacreBLEU 2.x computes it\n"
    "by default (13a tokenizer, exponential smoothing, mixed case): the score test_bleu records.\n"
    "Exit status: 0 scored, 1 unreadable or mismatched input, 2 usage error.\n";

static const char *const fmt_choices[] = {"table", "json", NULL};

int cmd_bleu(int argc, const char **argv) {
    int fmt = 0;
    nb_opt opts[] = {NB_OPT_FORMAT(&fmt, fmt_choices), {NULL}};
    const char *pos[1];
    int npos = 0;
    int rc = nb_parse_opts("bleu", bleu_usage, argc, argv, opts, pos, 1, &npos);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) return rc;
    if (npos < 1) return nb_usage_error("bleu", "which reference file?");
    nb_err err;
    nb_err_clear(&err);
    nb_lines ref, hyp;
    if (nb_lines_read(pos[0], NB_MT_MAX_TEXT, &ref, &err) != 0) return nb_report_err(&err);
    /* stdin read whole, then split as the files are: a NUL byte is refused the same way */
    size_t n = 0, cap = 0;
    char *text = NULL;
    for (;;) {
        if (n + 65536 > cap) {
            cap = 2 * cap + 65536;
            char *t = cap <= NB_MT_MAX_TEXT ? realloc(text, cap) : NULL;
            if (!t) {
                free(text);
                nb_lines_free(&ref);
                return nb_die("the hypotheses on standard input are too large");
            }
            text = t;
        }
        size_t got = fread(text + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(stdin);
    if (bad || nb_lines_parse(text ? text : "", n, "standard input", &hyp, &err) != 0) {
        free(text);
        nb_lines_free(&ref);
        return bad ? nb_die("cannot read standard input") : nb_report_err(&err);
    }
    free(text);
    rc = NB_EXIT_OK;
    if (hyp.n != ref.n) {
        rc = nb_die("%d hypotheses for %d reference lines in '%s'", hyp.n, ref.n, pos[0]);
    } else {
        nb_bleu_opts o = nb_bleu_defaults();
        nb_bleu b;
        const char *const *refs[1] = {(const char *const *)ref.line};
        if (nb_bleu_corpus((const char *const *)hyp.line, hyp.n, refs, 1, &o, &b, &err) != 0) {
            rc = nb_report_err(&err);
        } else {
            char sig[256];
            nb_bleu_signature(&o, 1, sig, sizeof sig);
            if (fmt == 1)
                printf("{\"score\": %.4f, \"bp\": %.4f, \"sys_len\": %ld, \"ref_len\": %ld, "
                       "\"signature\": \"%s\"}\n",
                       b.score, b.bp, b.sys_len, b.ref_len, sig);
            else
                printf("BLEU %.2f  %.1f/%.1f/%.1f/%.1f (BP %.3f ratio %.3f hyp_len %ld ref_len %ld)"
                       "  %s\n",
                       b.score, b.precision[0], b.precision[1], b.precision[2], b.precision[3],
                       b.bp, b.ref_len ? (double)b.sys_len / (double)b.ref_len : 0, b.sys_len,
                       b.ref_len, sig);
        }
    }
    nb_lines_free(&ref);
    nb_lines_free(&hyp);
    return rc;
}
