/* nn/real.h — included first by every generic source file in nn/ (see nn/nn.h).
 * Compiled plainly it defines real = float and FN(x) = x; with -DNB_F64, real = double and
 * FN(x) = x##_f64. Inside a generic .c file write `real`, `FN(name)` and the BLAS macros below. */
#ifndef NB_NN_REAL_H
#define NB_NN_REAL_H

#include "nn.h"

#include <cblas.h>

#ifdef NB_F64
typedef double real;
#define FN(name) name##_f64
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
#define FN(name) name
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
