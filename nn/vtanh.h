/* nn/vtanh.h — a float tanh accurate to a few ulp that runs 16 lanes at a time (AVX-512, with a
 * portable scalar fallback that gives the same bits). Defined in nn/norms/dyt.c.
 *
 * One formula over the whole range: a = min(|x|, 10) (tanh is 1 in float past 9.01),
 * n = round(-2a/ln2), r = a + n·ln2/2, p = (e^{-2r} - 1)/r by a degree-5 polynomial, then
 * w = e^{-2a} - 1 = fma(2^n·p, r, 2^n - 1) and tanh a = -w/(w + 2) by one correctly rounded
 * division; the sign of x put back. Every step an explicit fused multiply-add or a single
 * rounding (the scalar formula rounds identically). tanh(±0) = ±0, tanh(±inf) = ±1,
 * tanh(NaN) = NaN. Max error against libm's tanh in double: 2.56 ulp over every float,
 * tests/test_dyt.c (docs/numerics.md#dyt). */
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
