/* nn/vmath.h — sigmoid and tanh that vectorize (internal to the generic sources; include after
 * real.h).
 *
 * glibc's expf/tanhf are scalar calls (gcc uses the vector libmvec versions only under
 * -ffast-math, which this project does not use), and the LSTM's gates make them ~15% of a reader
 * step. In float these use an exp written out so that `omp simd` loops vectorize it: range
 * reduction x = n·ln2 + r with ln2 split in two (Cody–Waite), a degree-6 polynomial for e^r on
 * |r| <= ln2/2 (the Cephes expf coefficients), and 2^n built in the exponent bits; the argument is
 * clamped to [-87, 88] so that 2^n stays a normal number. Relative error of exp about 2e-7;
 * sigmoid = 1/(1+e^-x); tanh = 1 - 2/(1+e^{2x}), whose absolute error near 0 is about 1e-7
 * (float's spacing at 1). In double (the finite-difference tests) they are libm's exp and tanh. */
#ifndef NB_NN_VMATH_H
#define NB_NN_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef NB_F64
static inline double vm_exp(double x) {
    return exp(x);
}
static inline double vm_sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}
static inline double vm_tanh(double x) {
    return tanh(x);
}
#else
#pragma omp declare simd notinbranch
static inline float vm_exp(float x) {
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    const float n = __builtin_rintf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}
#pragma omp declare simd notinbranch
static inline float vm_sigmoid(float x) {
    return 1.0f / (1.0f + vm_exp(-x));
}
#pragma omp declare simd notinbranch
static inline float vm_tanh(float x) {
    return 1.0f - 2.0f / (1.0f + vm_exp(2.0f * x));
}
#endif

#endif
