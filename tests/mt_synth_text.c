/* tests/mt_synth_text.c — writes one split of mt's synthetic transduction as text, for
 * tests/cli/76-mt.t: translating the test split with `normbench translate` and scoring it with
 * `normbench bleu` must reproduce the run's own test_bleu.
 *
 * usage: mt-synth-text SEED STREAM N SOURCE-OUT TARGET-OUT
 * (the run's splits: seed 1234, datasets/mt.c's fixed default; stream 0 train, 1 val, 2 test;
 * N the split's size, 500 for val and test by default) */
#include <stdio.h>
#include <stdlib.h>

#include "datasets/mt.h"

static int write_lines(const char *path, const nb_lines *l) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < l->n; i++)
        fprintf(f, "%s\n", l->line[i]);
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s SEED STREAM N SOURCE-OUT TARGET-OUT\n", argv[0]);
        return 2;
    }
    char *end;
    unsigned long long seed = strtoull(argv[1], &end, 10);
    unsigned long long stream = strtoull(argv[2], &end, 10);
    long n = strtol(argv[3], &end, 10);
    if (n <= 0 || *end) {
        fprintf(stderr, "%s: N must be a positive number, not '%s'\n", argv[0], argv[3]);
        return 2;
    }
    nb_lines src = {0}, tgt = {0};
    nb_err err = {0};
    if (nb_mt_synth_text(seed, stream, (int)n, &src, &tgt, &err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err.msg);
        return 1;
    }
    int rc = write_lines(argv[4], &src) || write_lines(argv[5], &tgt);
    if (rc) fprintf(stderr, "%s: cannot write '%s' or '%s'\n", argv[0], argv[4], argv[5]);
    nb_lines_free(&src);
    nb_lines_free(&tgt);
    return rc;
}
