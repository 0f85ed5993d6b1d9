/* nn/cuda/stub.c — the CUDA backend of a build without CUDA (plain `make`): every entry point
 * fails with "no CUDA device was found" and says how to get one (`make cuda`). */
#include "nn/cuda/nbcuda.h"

#include <math.h>

static int none(nb_err *err) {
    nb_errf(err, "no CUDA device was found: this normbench was built without CUDA");
    nb_hintf(err, "build with 'make cuda' (needs nvcc) on a machine with an NVIDIA GPU, or use "
                  "--device cpu");
    return -1;
}

int nb_cuda_built(void) {
    return 0;
}
int nb_cuda_init(nb_err *err) {
    return none(err);
}
void nb_cuda_describe(char *buf, size_t n) {
    if (n) buf[0] = 0;
}
void *nb_cuda_alloc(size_t bytes, nb_err *err) {
    none(err);
    return NULL;
}
void nb_cuda_free(void *d) {}
int nb_cuda_upload(void *d, const void *s, size_t bytes, nb_err *err) {
    return none(err);
}
int nb_cuda_download(void *d, const void *s, size_t bytes, nb_err *err) {
    return none(err);
}
int nb_cuda_copy(void *d, const void *s, size_t bytes, nb_err *err) {
    return none(err);
}
int nb_cuda_sync(nb_err *err) {
    return none(err);
}
int nb_cuda_time_ms(void (*fn)(void *), void *arg, double *ms, nb_err *err) {
    return none(err);
}
int nb_cuda_upload_as(void *d, const float *src, size_t n, nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
int nb_cuda_download_as(float *dst, const void *d, size_t n, nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
int nb_cuda_layernorm_forward(void *y, float *mean, float *rstd, const void *x, const float *g,
                              const float *b, int B, int C, const nb_norm_cfg *cfg,
                              nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
int nb_cuda_layernorm_backward(void *dx, float *dg, float *db, const void *dy, const void *x,
                               const float *g, const float *mean, const float *rstd, int B, int C,
                               const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
int nb_cuda_rmsnorm_forward(void *y, float *rstd, const void *x, const float *g, const float *b,
                            int B, int C, int k, const nb_norm_cfg *cfg, nb_cuda_dtype dt,
                            nb_err *err) {
    return none(err);
}
int nb_cuda_rmsnorm_backward(void *dx, float *dg, float *db, const void *dy, const void *x,
                             const float *g, const float *rstd, int B, int C, int k,
                             const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
int nb_cuda_batchnorm_forward(void *y, float *mean, float *rstd, float *running_mean,
                              float *running_var, const void *x, const float *g, const float *b,
                              int B, int C, int training, const nb_norm_cfg *cfg, nb_cuda_dtype dt,
                              nb_err *err) {
    return none(err);
}
int nb_cuda_batchnorm_backward(void *dx, float *dg, float *db, const void *dy, const void *x,
                               const float *g, const float *mean, const float *rstd, int B, int C,
                               int training, const nb_norm_cfg *cfg, nb_cuda_dtype dt,
                               nb_err *err) {
    return none(err);
}
int nb_cuda_weightnorm_forward(void *w, float *vnorm, const void *v, const float *g, int OC, int C,
                               nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
int nb_cuda_weightnorm_backward(void *dv, float *dg, const void *dw, const void *v, const float *g,
                                const float *vnorm, int OC, int C, nb_cuda_dtype dt, nb_err *err) {
    return none(err);
}
nb_cuda_mlp *nb_cuda_mlp_new(const nb_mlp *host, nb_err *err) {
    none(err);
    return NULL;
}
void nb_cuda_mlp_free(nb_cuda_mlp *m) {}
int nb_cuda_mlp_sync(nb_cuda_mlp *m, nb_mlp *host, int to_gpu, nb_err *err) {
    return none(err);
}
double nb_cuda_mlp_forward(nb_cuda_mlp *m, const float *x, const int *y, int B, int training,
                           float *probs, nb_err *err) {
    none(err);
    return NAN;
}
int nb_cuda_mlp_backward(nb_cuda_mlp *m, nb_err *err) {
    return none(err);
}
int nb_cuda_mlp_adam(nb_cuda_mlp *m, const nb_adam_cfg *cfg, long t, nb_err *err) {
    return none(err);
}
