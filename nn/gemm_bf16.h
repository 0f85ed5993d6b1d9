/* nn/gemm_bf16.h — a matrix product with bfloat16 inputs and float accumulation (AVX512-BF16).
 *
 * C (M x N, float, row-major, leading dimension ldc) = op(A) op(B) + beta C, where op(A) is
 * M x K (A stored row-major, M x K with lda, or K x M when transa: op(A) = A^T) and op(B) is
 * K x N (B stored K x N with ldb, or N x K when transb). Every value of A and B is first rounded
 * to bfloat16 (8 significant bits, round to nearest even, subnormals flushed to zero: the
 * hardware's vcvtne2ps2bf16); the products, exact in float, are added in float by vdpbf16ps,
 * pair by pair in k order into the value of C (docs/numerics.md#bf16). One thread (the callers
 * run it inside their own parallel regions). An element's result depends on K and its inputs
 * only, not on M, N, its position or the leading dimensions: a row computed alone equals the
 * same row computed among others (the exact gradient sums rely on it).
 *
 * Only on a CPU with AVX512-BF16 (nb_cpu_has_bf16); the code is compiled for it whatever the
 * build's -march, so the program still runs on other CPUs as long as it is not called there. */
#ifndef NB_NN_GEMM_BF16_H
#define NB_NN_GEMM_BF16_H

/* Arithmetic of the convolutions and dense layers (cnn --precision): float, or bfloat16 inputs
 * with float accumulation. */
enum { NB_PREC_FP32 = 0, NB_PREC_BF16 = 1 };

/* Whether this CPU (and OS) runs AVX512-BF16: CPUID leaf 7 subleaf 1 EAX bit 5, AVX512F and
 * AVX512BW, and the AVX-512 register state enabled (XGETBV). Test hook: the environment variable
 * NB_CPU_NO_BF16 set to a non-empty value other than "0" makes it say no, to exercise the
 * refusal on a CPU that has it. */
int nb_cpu_has_bf16(void);

/* beta: 0 (C is overwritten; its old values are not read) or any other value (C scaled by it
 * first). Sizes <= 0 for M or N: nothing; K <= 0: C = beta C. Call only where nb_cpu_has_bf16(). */
void nb_gemm_bf16(int transa, int transb, int M, int N, int K, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

/* x rounded to bfloat16 as the product above rounds it (nearest even; subnormals to zero), as a
 * float. Any CPU. */
float nb_bf16_round(float x);

#endif
