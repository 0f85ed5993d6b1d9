/* nn/gemm_bf16.c — C = op(A) op(B) + beta C with bfloat16 inputs and float accumulation
 * (vdpbf16ps). Contract in nn/gemm_bf16.h.
 *
 * Blocking (as the BLIS family blocks a gemm, sized for a core of 48 KiB L1 and 2 MiB L2):
 * for each NC-column block of B and KC-deep slice of k, the slice of op(B) is rounded to
 * bfloat16 and packed into NR-column panels; for each MC-row block of op(A), its slice is packed
 * into MR-row panels; an MR x NR micro-kernel then runs over every pair of panels, its MR x NR
 * float accumulators in registers (MR rows x NR/16 vectors = 24 of the 32 zmm registers).
 *
 * vdpbf16ps multiplies PAIRS: lane j of the result accumulates x[2j]·y[2j] + x[2j+1]·y[2j+1].
 * So a packed panel holds, for each pair of k (k = 2p, 2p+1), its values interleaved per column:
 *   B panel: [p][j][h] = op(B)(2p+h, j)   (NR columns: 2 vectors of 32 bfloat16)
 *   A panel: [p][i][h] = op(A)(i, 2p+h)   (MR rows: one 32-bit pair per row, broadcast)
 * and a k beyond K (odd K) is zero. Each output element is C's value plus the pairs in k order
 * (the accumulators start from C for every slice after the first): the same operations whatever
 * M, N or the element's place, as the header promises.
 *
 * The AVX512-BF16 code is compiled for that target by attribute, so that the file builds with
 * any -march and the rest of the program runs on CPUs without it. */
#include "nn/gemm_bf16.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MR 12
#define NR 32
#define KC 256 /* even: a slice never splits a pair */
#define MC (8 * MR)
#define NC (16 * NR)

float nb_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) {
        u &= 0x80000000u; /* zero and subnormals: signed zero */
    } else if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x007fffffu) u |= 0x00400000u; /* NaN stays NaN (quiet) */
    } else {
        u += 0x7fffu + ((u >> 16) & 1u); /* nearest, ties to even (may carry into inf) */
    }
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static int env_says_no(void) {
    const char *e = getenv("NB_CPU_NO_BF16");
    return e && *e && strcmp(e, "0") != 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

int nb_cpu_has_bf16(void) {
    if (env_says_no()) return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0xe6u) != 0xe6u) return 0; /* SSE, AVX, opmask, ZMM state enabled by the OS */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!(b & (1u << 16)) || !(b & (1u << 30)) || a < 1) return 0; /* AVX512F, AVX512BW */
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    return (a >> 5) & 1u; /* AVX512_BF16 */
}

#define TGT __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* The packing buffers, one pair per thread (the callers run gemms on several threads at once):
 * 48 KiB and 256 KiB, fixed, so that a product never allocates. */
static _Thread_local _Alignas(64) uint16_t pack_a[MC * KC];
static _Thread_local _Alignas(64) uint16_t pack_b[KC * NC];

static inline __mmask16 mask16(int n) {
    return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* Packs a panel of width W (w <= W real columns, the rest zero) and kc values of k, where the
 * element (k, j) is src[k*ld + j] (j contiguous): two rows of k at a time, rounded together and
 * interleaved. */
TGT static void pack_rows(uint16_t *out, int W, const float *src, size_t ld, int kc, int w) {
    const __m512i il = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                        8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const int kp = (kc + 1) / 2;
    for (int p = 0; p < kp; p++) {
        const float *r0 = src + (size_t)(2 * p) * ld;
        const int two = 2 * p + 1 < kc;
        for (int j0 = 0; j0 < W; j0 += 16) {
            __mmask16 m = mask16(w - j0);
            __m512 v0 = _mm512_maskz_loadu_ps(m, r0 + j0);
            __m512 v1 = two ? _mm512_maskz_loadu_ps(m, r0 + ld + j0) : _mm512_setzero_ps();
            __m512i bf = (__m512i)_mm512_cvtne2ps_pbh(v1, v0); /* v0 in 0..15, v1 in 16..31 */
            __m512i x = _mm512_permutexvar_epi16(il, bf);
            int cnt = W - j0 < 16 ? W - j0 : 16;
            __mmask32 sm = cnt >= 16 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (2 * cnt)) - 1);
            _mm512_mask_storeu_epi16(out + ((size_t)p * W + j0) * 2, sm, x);
        }
    }
}

/* The same panel where the element (k, j) is src[j*ld + k] (k contiguous): 32 values of k of
 * one column rounded at once are 16 pairs, scattered to their places (a stride of W pairs). */
TGT static void pack_cols(uint16_t *out, int W, const float *src, size_t ld, int kc, int w) {
    const __m512i step =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(W));
    for (int j = 0; j < W; j++) {
        const float *s = src + (size_t)j * ld;
        for (int k0 = 0; k0 < kc; k0 += 32) {
            int n = kc - k0 < 32 ? kc - k0 : 32;
            __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
            if (j < w) {
                lo = _mm512_maskz_loadu_ps(mask16(n), s + k0);
                hi = _mm512_maskz_loadu_ps(mask16(n - 16), s + k0 + 16);
            }
            __m512i bf = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* pairs k0/2 .. k0/2+15 */
            __m512i idx = _mm512_add_epi32(step, _mm512_set1_epi32((k0 / 2) * W + j));
            _mm512_mask_i32scatter_epi32(out, mask16((n + 1) / 2), idx, bf, 4);
        }
    }
}

/* C (mr x nr of an MR x NR tile, leading dimension ldc) = (from_c ? C : 0) + the kp pairs of the
 * packed panels a (MR pairs per p) and b (NR pairs per p). */
TGT static void micro(int kp, const uint32_t *a, const uint16_t *b, float *C, size_t ldc, int mr,
                      int nr, int from_c) {
    __m512 acc[MR][2];
    const __mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        if (from_c && i < mr) {
            acc[i][0] = _mm512_maskz_loadu_ps(m0, C + (size_t)i * ldc);
            acc[i][1] = _mm512_maskz_loadu_ps(m1, C + (size_t)i * ldc + 16);
        } else {
            acc[i][0] = _mm512_setzero_ps();
            acc[i][1] = _mm512_setzero_ps();
        }
    }
    for (int p = 0; p < kp; p++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + (size_t)p * 2 * NR);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + (size_t)p * 2 * NR + 32);
        const uint32_t *ap = a + (size_t)p * MR;
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512bh x = (__m512bh)_mm512_set1_epi32((int)ap[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < mr) {
            _mm512_mask_storeu_ps(C + (size_t)i * ldc, m0, acc[i][0]);
            _mm512_mask_storeu_ps(C + (size_t)i * ldc + 16, m1, acc[i][1]);
        }
}

TGT static void gemm_blocked(int transa, int transb, int M, int N, int K, const float *A,
                             size_t lda, const float *B, size_t ldb, int from_c, float *C,
                             size_t ldc) {
    for (int jc = 0; jc < N; jc += NC) {
        const int nc = N - jc < NC ? N - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {
            const int kc = K - pc < KC ? K - pc : KC, kp = (kc + 1) / 2;
            for (int jr = 0; jr < nc; jr += NR) {
                uint16_t *dst = pack_b + (size_t)(jr / NR) * kp * NR * 2;
                const int w = nc - jr < NR ? nc - jr : NR;
                if (!transb)
                    pack_rows(dst, NR, B + (size_t)pc * ldb + jc + jr, ldb, kc, w);
                else
                    pack_cols(dst, NR, B + (size_t)(jc + jr) * ldb + pc, ldb, kc, w);
            }
            for (int ic = 0; ic < M; ic += MC) {
                const int mc = M - ic < MC ? M - ic : MC;
                for (int ir = 0; ir < mc; ir += MR) {
                    uint16_t *dst = pack_a + (size_t)(ir / MR) * kp * MR * 2;
                    const int w = mc - ir < MR ? mc - ir : MR;
                    if (!transa)
                        pack_cols(dst, MR, A + (size_t)(ic + ir) * lda + pc, lda, kc, w);
                    else
                        pack_rows(dst, MR, A + (size_t)pc * lda + ic + ir, lda, kc, w);
                }
                for (int jr = 0; jr < nc; jr += NR)
                    for (int ir = 0; ir < mc; ir += MR) {
                        const uint32_t *ap =
                            (const uint32_t *)(pack_a + (size_t)(ir / MR) * kp * MR * 2);
                        const uint16_t *bp = pack_b + (size_t)(jr / NR) * kp * NR * 2;
                        micro(kp, ap, bp, C + (size_t)(ic + ir) * ldc + jc + jr, ldc,
                              mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR,
                              from_c || pc > 0);
                    }
            }
        }
    }
}

#else /* not x86-64: never called (nb_cpu_has_bf16 says no); a plain version keeps it linking */

int nb_cpu_has_bf16(void) {
    (void)env_says_no;
    return 0;
}

static void gemm_blocked(int transa, int transb, int M, int N, int K, const float *A, size_t lda,
                         const float *B, size_t ldb, int from_c, float *C, size_t ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = from_c ? C[(size_t)i * ldc + j] : 0.0f;
            for (int k = 0; k < K; k++) {
                float a = nb_bf16_round(transa ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                float b = nb_bf16_round(transb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                s += a * b;
            }
            C[(size_t)i * ldc + j] = s;
        }
}
#endif

void nb_gemm_bf16(int transa, int transb, int M, int N, int K, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (beta != 0.0f && beta != 1.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] *= beta;
    if (K <= 0) {
        if (beta == 0.0f)
            for (int i = 0; i < M; i++)
                memset(C + (size_t)i * ldc, 0, sizeof(float) * (size_t)N);
        return;
    }
    gemm_blocked(transa != 0, transb != 0, M, N, K, A, (size_t)lda, B, (size_t)ldb, beta != 0.0f, C,
                 (size_t)ldc);
}
