/* nn/real.h — included first by every generic source file in nn/ (see nn/nn.h).
 * Compiled plainly it defines real = float; with -DNB_F64, real = double, and every generic name
 * is renamed to name_f64 by nn/f64names.h for the rest of the file. Inside a generic .c file
 * write `real`, the BLAS and libm macros below, and each name as it is
 * (`void nb_layernorm_forward(real *out, ...)`, calls to other generic functions likewise); a
 * new external name gets its line in nn/f64names.h. A norm's kernels in its table row
 * (nn/norms/norms.h) are def->REAL_OPS, its ops or ops_f64. */
#ifndef NB_NN_REAL_H
#define NB_NN_REAL_H

#include "nn.h"

#include <cblas.h>

#ifdef NB_F64
typedef double real;
#include "f64names.h"
#define REAL_OPS ops_f64
#define CBLAS_GEMM cblas_dgemm
#define CBLAS_GEMV cblas_dgemv
#define CBLAS_AXPY cblas_daxpy
#define CBLAS_DOT cblas_ddot
#define REAL_SQRT sqrt
#define REAL_EXP exp
#define REAL_LOG log
#define REAL_TANH tanh
#define REAL_FABS fabs
#else
typedef float real;
#define REAL_OPS ops
#define CBLAS_GEMM cblas_sgemm
#define CBLAS_GEMV cblas_sgemv
#define CBLAS_AXPY cblas_saxpy
#define CBLAS_DOT cblas_sdot
#define REAL_SQRT sqrtf
#define REAL_EXP expf
#define REAL_LOG logf
#define REAL_TANH tanhf
#define REAL_FABS fabsf
#endif

#endif
