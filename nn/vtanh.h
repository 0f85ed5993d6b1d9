/* nn/vtanh.h — a float tanh accurate to a few ulp that runs 16 lanes at a time (AVX-512, with a
 * portable scalar fallback that gives the same bits). Defined in nn/norms/dyt.c.
 *
 * |x| < 0.625: x + x·z·P(z), z = x², P of degree 4 (the Cephes tanhf coefficients);
 * otherwise sign(x)·(1 − 2/(e^{2|x|} + 1)), e^t by Cody–Waite reduction t = n·ln2 + r and a
 * degree-6 polynomial on |r| <= ln2/2 (Cephes expf), every step an explicit fused multiply-add,
 * t clamped at 88 (so e^t stays finite; tanh is 1 in float long before). tanh(±0) = ±0,
 * tanh(±inf) = ±1, tanh(NaN) = NaN. Max error against libm's tanh in double: tests/test_dyt.c
 * (docs/numerics.md#dyt). */
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
