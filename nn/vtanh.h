/* nn/vtanh.h — a float tanh accurate to a few ulp that runs 16 lanes at a time (AVX-512, with a
 * portable scalar fallback that gives the same bits). Defined in nn/norms/dyt.c.
 *
 * |x| < 0.625: x + x·z·P(z), z = x², P of degree 4 (the Cephes tanhf coefficients);
 * otherwise sign(x)·(1 − 2q), q = m/(1 + m), m = e^{-2|x|} (|x| clamped at 10, where tanh is 1
 * in float): m = 2^n·e^{-2r} with n = round(-2|x|/ln2), r = |x| + n·ln2/2, a degree-6
 * polynomial and scalef; q by one correctly rounded division. Every other step an explicit
 * fused multiply-add or a single rounding (the scalar formula rounds identically). tanh(±0) = ±0,
 * tanh(±inf) = ±1, tanh(NaN) = NaN. Max error against libm's tanh in double: 1.43 ulp over every
 * float, tests/test_dyt.c (docs/numerics.md#dyt). */
#ifndef NB_NN_VTANH_H
#define NB_NN_VTANH_H

#include <stddef.h>

/* One value (the scalar formula; the same bits as the vector path). */
float nb_tanhf(float x);
/* y[i] = nb_tanhf(x[i]) for i < n (vectorized where the target has AVX-512); y may be x. */
void nb_tanhf_array(float *y, const float *x, size_t n);
/* 1 when nb_tanhf_array uses AVX-512, 0 when the scalar formula. */
int nb_tanhf_vectorized(void);

#endif
