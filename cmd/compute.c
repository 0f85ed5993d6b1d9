/* cmd/compute.c — the compute libraries' settings, described for the runs' provenance and the
 * benchmarks. cmd/ asks the libraries and hands the description to results/, which knows no
 * model library. */
#include "cmd/cmd.h"

#include "nn/blas.h"

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
