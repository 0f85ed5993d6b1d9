/* cmd/compute.c — the compute libraries' settings, described for the runs' provenance and the
 * benchmarks. cmd/ asks the libraries and hands the description to results/, which knows no
 * model library. */
#include "cmd/cmd.h"

#include "nn/blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "util/json.h"

char *nb_compute_json(void) {
    nb_buf b = {0};
    nb_buf_puts(&b, "{\"openblas_config\":");
    nb_buf_json_str(&b, openblas_get_config());
    nb_buf_puts(&b, ",\"openblas_corename\":");
    nb_buf_json_str(&b, openblas_get_corename());
    nb_buf_printf(&b, ",\"openblas_num_threads\":%d", openblas_get_num_threads());
    nb_buf_printf(&b, ",\"openblas_parallel\":%d}", openblas_get_parallel());
    return nb_buf_take(&b);
}

/* A user's OPENBLAS_CORETYPE is respected, but when it holds kernels older than the processor
 * runs, timings are not what the machine can do: say so once, for the commands that time. (On
 * this project's AMD EPYC VM an inherited OPENBLAS_CORETYPE=Haswell halved sgemm's GFLOP/s
 * against the Cooperlake kernels OpenBLAS picks by itself.) Called by run and bench once their
 * arguments are valid. */
void nb_note_blas_core(void) {
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (!user || !*user) return;
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
        return;
    static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    const char *core = openblas_get_corename();
    for (int i = 0; core && avx512_cores[i]; i++)
        if (strcasecmp(core, avx512_cores[i]) == 0) return;
    fprintf(stderr,
            "note: OPENBLAS_CORETYPE=%s is set in the environment: OpenBLAS uses %s kernels, but "
            "this processor has AVX-512\nhint: unset OPENBLAS_CORETYPE to let OpenBLAS choose "
            "(the kernels in force are recorded either way)\n",
            user, core ? core : "?");
}
