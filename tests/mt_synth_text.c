/* tests/mt_synth_text.c — writes the test split of mt's synthetic dataset as text, for
 * tests/cli/76-mt.t: translating it with `normbench translate` and scoring the output with
 * `normbench bleu` must reproduce a run's own test_bleu. The split is loaded as a run loads it
 * (nb_mt_load with the dataset's defaults), so its sentences are the ones the run scored.
 *
 * usage: mt-synth-text SOURCE-OUT TARGET-OUT */
#include <stdio.h>

#include "datasets/mt.h"

static int write_lines(const char *path, char *const *line, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n", line[i]);
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SOURCE-OUT TARGET-OUT\n", argv[0]);
        return 2;
    }
    nb_mt_opts o = nb_mt_defaults("synthetic");
    nb_mt_data d = {0};
    nb_err err = {0};
    if (nb_mt_load("synthetic", "", &o, &d, &err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err.msg);
        return 1;
    }
    const nb_mt_split *t = &d.test[0];
    int rc = write_lines(argv[1], t->src_text, t->n) || write_lines(argv[2], t->tgt_text, t->n);
    if (rc) fprintf(stderr, "%s: cannot write '%s' or '%s'\n", argv[0], argv[1], argv[2]);
    nb_mt_free(&d);
    return rc;
}
