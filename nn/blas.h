/* nn/blas.h — OpenBLAS's own queries, declared in one place.
 *
 * cblas.h declares these only when it is OpenBLAS's; which cblas.h the compiler finds depends on
 * Debian's alternatives (netlib's has none of them), and an undeclared function returning a
 * pointer is truncated to int. These signatures are stable across OpenBLAS releases. */
#ifndef NB_NN_BLAS_H
#define NB_NN_BLAS_H

char *openblas_get_config(void);
char *openblas_get_corename(void);
int openblas_get_num_threads(void);
int openblas_get_parallel(void);
void openblas_set_num_threads(int n);

#endif
