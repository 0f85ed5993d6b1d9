/* nn/cuda/nbcuda.h — the CUDA backend's C interface (no CUDA header is needed to use it).
 *
 * Built by `make cuda` from the .cu files beside it; the plain build links nn/cuda/stub.c instead,
 * whose every function fails with "no CUDA device was found" (and says how to build with CUDA). All
 * pointers named d_* or documented as device pointers live in GPU memory (nb_cuda_alloc).
 *
 * Norm kernels. Rows of C values, B rows, as in nn/norm.h, with these differences:
 *  - x, y, dy and dx may be float or bf16 (dt); statistics, gains, biases and their gradients
 *    are always float, and all arithmetic is in float (per-row scalars in double, as on the CPU);
 *  - backward WRITES dx (it does not accumulate); dg and db accumulate (+=) as on the CPU, and
 *    may be NULL.
 * The reduction order, the same on every run (no atomics): see docs/cuda.md. */
#ifndef NB_NN_CUDA_NBCUDA_H
#define NB_NN_CUDA_NBCUDA_H

#include <stddef.h>

#include "nn/nn.h"
#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nb_cuda_dtype { NB_CUDA_F32, NB_CUDA_BF16 } nb_cuda_dtype;

/* Whether this binary was built with the CUDA backend. */
int nb_cuda_built(void);

/* Selects device 0. Returns 0, or -1 with err set ("no CUDA device was found", with a hint
 * saying why: built without CUDA, or no device or driver). Cheap after the first call. */
int nb_cuda_init(nb_err *err);

/* One line for the provenance: "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.2 GiB); driver
 * 580.159.04 (CUDA 13.0); runtime 13.0; cuBLAS 13.1.0". nb_cuda_init must have succeeded. */
void nb_cuda_describe(char *buf, size_t n);

/* GPU memory (zeroed), freed with nb_cuda_free; NULL with err set when out of memory. */
void *nb_cuda_alloc(size_t bytes, nb_err *err);
void nb_cuda_free(void *d);
int nb_cuda_upload(void *d_dst, const void *src, size_t bytes, nb_err *err);
int nb_cuda_download(void *dst, const void *d_src, size_t bytes, nb_err *err);
/* Device-to-device copy (the bandwidth baseline of `bench kernels --device cuda`). */
int nb_cuda_copy(void *d_dst, const void *d_src, size_t bytes, nb_err *err);
/* Waits for the GPU; reports any error a kernel raised. */
int nb_cuda_sync(nb_err *err);

/* GPU time of fn(arg), in milliseconds, between two events (fn only queues work). */
int nb_cuda_time_ms(void (*fn)(void *), void *arg, double *ms, nb_err *err);

/* Fills a float or bf16 device array with the given float values (test and bench helper). */
int nb_cuda_upload_as(void *d_dst, const float *src, size_t n, nb_cuda_dtype dt, nb_err *err);
/* Reads a float or bf16 device array back as float. */
int nb_cuda_download_as(float *dst, const void *d_src, size_t n, nb_cuda_dtype dt, nb_err *err);

/* ---- norm kernels (device pointers; see the header comment) ------------------------------ */
int nb_cuda_layernorm_forward(void *y, float *mean, float *rstd, const void *x, const float *g,
                              const float *b, int B, int C, const nb_norm_cfg *cfg,
                              nb_cuda_dtype dt, nb_err *err);
int nb_cuda_layernorm_backward(void *dx, float *dg, float *db, const void *dy, const void *x,
                               const float *g, const float *mean, const float *rstd, int B, int C,
                               const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err);
/* k == C: RMSNorm; 1 <= k < C: pRMSNorm (statistics over the first k values). */
int nb_cuda_rmsnorm_forward(void *y, float *rstd, const void *x, const float *g, const float *b,
                            int B, int C, int k, const nb_norm_cfg *cfg, nb_cuda_dtype dt,
                            nb_err *err);
int nb_cuda_rmsnorm_backward(void *dx, float *dg, float *db, const void *dy, const void *x,
                             const float *g, const float *rstd, int B, int C, int k,
                             const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err);
/* BatchNorm per column over the B rows, as nb_batchnorm_forward/backward (statistics in
 * double); running_mean/running_var may be NULL. */
int nb_cuda_batchnorm_forward(void *y, float *mean, float *rstd, float *running_mean,
                              float *running_var, const void *x, const float *g, const float *b,
                              int B, int C, int training, const nb_norm_cfg *cfg, nb_cuda_dtype dt,
                              nb_err *err);
int nb_cuda_batchnorm_backward(void *dx, float *dg, float *db, const void *dy, const void *x,
                               const float *g, const float *mean, const float *rstd, int B, int C,
                               int training, const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err);
/* WeightNorm on a (OC, C) weight, as nb_weightnorm_forward/backward: w = g v/||v|| per row. */
int nb_cuda_weightnorm_forward(void *w, float *vnorm, const void *v, const float *g, int OC, int C,
                               nb_cuda_dtype dt, nb_err *err);
int nb_cuda_weightnorm_backward(void *dv, float *dg, const void *dw, const void *v, const float *g,
                                const float *vnorm, int OC, int C, nb_cuda_dtype dt, nb_err *err);

/* ---- the MNIST MLP on the GPU -------------------------------------------------------------
 * A copy of a host nb_mlp (same layers, norms and parameters) whose parameters, gradients and
 * Adam moments live on the GPU: cuBLAS GEMMs (full fp32, no TF32), the kernels above, Adam. */
typedef struct nb_cuda_mlp nb_cuda_mlp;

nb_cuda_mlp *nb_cuda_mlp_new(const nb_mlp *host, nb_err *err);
void nb_cuda_mlp_free(nb_cuda_mlp *m);
/* Parameters and Adam moments: host -> GPU (to_gpu != 0) or GPU -> host. */
int nb_cuda_mlp_sync(nb_cuda_mlp *m, nb_mlp *host, int to_gpu, nb_err *err);
/* Forward over B rows of host x (B, dims[0]) with host labels y; returns the mean
 * cross-entropy (NaN on a CUDA error, with err set). probs (B, classes), when not NULL,
 * receives the softmax on the host. */
double nb_cuda_mlp_forward(nb_cuda_mlp *m, const float *x, const int *y, int B, int training,
                           float *probs, nb_err *err);
/* Zeroes the gradients, then the backward of the last forward. */
int nb_cuda_mlp_backward(nb_cuda_mlp *m, nb_err *err);
/* Adam over the trainable tensors, as nb_adam_step_layout at step t. */
int nb_cuda_mlp_adam(nb_cuda_mlp *m, const nb_adam_cfg *cfg, long t, nb_err *err);

#ifdef __cplusplus
}
#endif

#endif
