#include "real.h"

/* nn/winograd.c — Winograd F(m×m, 3×3) convolution, stride 1, pad 0 or 1 (generic: compiled as
 * float and, with -DNB_F64, as double; see nn/nn.h). Contracts in nn/conv.h.
 *
 * Dimension letters as nn/conv.c; A = m + 2 the transformed tile's side, X = A*A its points,
 * t a tile of m×m outputs (tw × th tiles per image), NT the most tiles of one block.
 *
 * Forward (Lavin & Gray 2016): Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A per tile and channel pair, the sum
 * over input channels taken in the transformed domain as X gemms per block of tiles:
 *   M[ξ] (OC × nt) = U[ξ] (OC × C) · V[ξ] (C × nt),  U = G g Gᵀ,  V = Bᵀ d B.
 * Data gradient: the same forward over dout, with the filter rotated by 180° and its channel
 * axes swapped, padded by 2 − pad (its output tiles are disjoint: no scatter-add).
 * Weight gradient: the adjoint of the forward's per-tile formula,
 *   dg = Gᵀ [Σ_t (A dY Aᵀ) ⊙ (Bᵀ d B)] G,
 * the sum over tiles as X gemms  Mw[ξ] (OC × C) += D[ξ] (OC × nt) · V[ξ]ᵀ (nt × C).
 *
 * Threads: blocks of tiles are split over threads (contiguous ranges, as nn/conv.c splits
 * images); each thread transforms its blocks and calls the single-threaded gemm. Block
 * boundaries do not depend on the thread count. exact != 0: blocks never span two images, and
 * the weight gradient is summed block by block in double (nn/conv.h's dwd), so that an image's
 * results do not depend on how the batch is grouped or threaded.
 * Transforms work on LN tiles at once (one vector lane per tile). */

#include <limits.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) && !defined(NB_F64)
#include <immintrin.h>
#define WINO_GATHER 1 /* the input gather as AVX-512 masked gathers (float, 16 lanes = LN) */
#endif

/* Tiles per lane group, and the most tiles in one block (a multiple of LN). */
#define LN 16
#define NTMAX 128
/* Below this many multiply-adds the convolution runs on one thread (as nn/conv.c). */
#define WINO_PAR_MIN 2e6

/* The filter transforms G (A×3): F(2×2, 3×3), interpolation points 0, 1, −1, ∞, and F(4×4, 3×3),
 * points 0, ±1, ±2, ∞. Bᵀ and Aᵀ (and A) are written out in bt2/at2/a2, bt4/at4/a4 below:
 *   F(2×2): Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1],  Aᵀ = [1 1 1 0; 0 1 −1 −1];
 *   F(4×4): Bᵀ = [4 0 −5 0 1 0; 0 −4 −4 1 1 0; 0 4 −4 −1 1 0; 0 −2 −1 2 1 0; 0 2 −1 −2 1 0;
 *                 0 4 0 −5 0 1],
 *           Aᵀ = [1 1 1 1 1 0; 0 1 −1 2 −2 0; 0 1 1 4 4 0; 0 1 −1 8 −8 1]. */
static const real G2[12] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const real G4[18] = {(real)(1.0 / 4),
                            0,
                            0,
                            (real)(-1.0 / 6),
                            (real)(-1.0 / 6),
                            (real)(-1.0 / 6),
                            (real)(-1.0 / 6),
                            (real)(1.0 / 6),
                            (real)(-1.0 / 6),
                            (real)(1.0 / 24),
                            (real)(1.0 / 12),
                            (real)(1.0 / 6),
                            (real)(1.0 / 24),
                            (real)(-1.0 / 12),
                            (real)(1.0 / 6),
                            0,
                            0,
                            1};

/* G in double, for the exact weight gradient's last transform (Gᵀ · G of the double sums). */
static const double G2D[12] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double G4D[18] = {1.0 / 4,  0,         0,        -1.0 / 6, -1.0 / 6, -1.0 / 6,
                               -1.0 / 6, 1.0 / 6,   -1.0 / 6, 1.0 / 24, 1.0 / 12, 1.0 / 6,
                               1.0 / 24, -1.0 / 12, 1.0 / 6,  0,        0,        1};

typedef struct wtab {
    int m, A;
    real g[18], gt[18]; /* G (A×3), Gᵀ (3×A) */
} wtab;

static void tab_of(wtab *t, int m) {
    const int A = m + 2;
    t->m = m, t->A = A;
    memcpy(t->g, m == 2 ? G2 : G4, sizeof(real) * A * 3);
    for (int i = 0; i < A; i++)
        for (int j = 0; j < 3; j++)
            t->gt[j * A + i] = t->g[i * 3 + j];
}

/* out[i] (i < R, stride os) = Σ_j L[i][j] in[j] (j < S, stride is), each a vector of LN lanes;
 * zero coefficients skipped, unit ones added. */
static inline void tr1(real *restrict out, size_t os, const real *restrict in, size_t is,
                       const real *L, int R, int S) {
    for (int i = 0; i < R; i++) {
        real acc[LN] = {0};
        for (int j = 0; j < S; j++) {
            const real c = L[i * S + j], *x = in + (size_t)j * is;
            if (c == 0) continue;
            if (c == 1) {
#pragma omp simd
                for (int l = 0; l < LN; l++)
                    acc[l] += x[l];
            } else if (c == -1) {
#pragma omp simd
                for (int l = 0; l < LN; l++)
                    acc[l] -= x[l];
            } else {
#pragma omp simd
                for (int l = 0; l < LN; l++)
                    acc[l] += c * x[l];
            }
        }
        memcpy(out + (size_t)i * os, acc, sizeof acc);
    }
}

/* out (R×R×LN) = L in Lᵀ, in (S×S×LN), L (R×S); tmp (R×S×LN). */
static inline void tr2(real *out, real *tmp, const real *in, const real *L, int R, int S) {
    for (int b = 0; b < S; b++)
        tr1(tmp + (size_t)b * LN, (size_t)S * LN, in + (size_t)b * LN, (size_t)S * LN, L, R, S);
    for (int i = 0; i < R; i++)
        tr1(out + (size_t)i * R * LN, LN, tmp + (size_t)i * S * LN, LN, L, R, S);
}

/* ---- the hot transforms, written out: 1-D on LN lanes (o[k], stride os, from x[j], stride
 * is), then 2-D as two passes (columns into tmp, then rows) ------------------------------- */

/* F(2×2): Bᵀ (4 from 4), Aᵀ (2 from 4), A (4 from 2). */
static inline void bt2(real *restrict o, size_t os, const real *restrict x, size_t is) {
#pragma omp simd
    for (int l = 0; l < LN; l++) {
        const real d0 = x[l], d1 = x[is + l], d2 = x[2 * is + l], d3 = x[3 * is + l];
        o[l] = d0 - d2;
        o[os + l] = d1 + d2;
        o[2 * os + l] = d2 - d1;
        o[3 * os + l] = d1 - d3;
    }
}
static inline void at2(real *restrict o, size_t os, const real *restrict x, size_t is) {
#pragma omp simd
    for (int l = 0; l < LN; l++) {
        const real m0 = x[l], m1 = x[is + l], m2 = x[2 * is + l], m3 = x[3 * is + l];
        o[l] = m0 + m1 + m2;
        o[os + l] = m1 - m2 - m3;
    }
}
static inline void a2(real *restrict o, size_t os, const real *restrict x, size_t is) {
#pragma omp simd
    for (int l = 0; l < LN; l++) {
        const real y0 = x[l], y1 = x[is + l];
        o[l] = y0;
        o[os + l] = y0 + y1;
        o[2 * os + l] = y0 - y1;
        o[3 * os + l] = -y1;
    }
}
/* F(4×4): Bᵀ (6 from 6), Aᵀ (4 from 6), A (6 from 4). */
static inline void bt4(real *restrict o, size_t os, const real *restrict x, size_t is) {
#pragma omp simd
    for (int l = 0; l < LN; l++) {
        const real d0 = x[l], d1 = x[is + l], d2 = x[2 * is + l], d3 = x[3 * is + l],
                   d4 = x[4 * is + l], d5 = x[5 * is + l];
        o[l] = 4 * d0 - 5 * d2 + d4;
        o[os + l] = -4 * (d1 + d2) + d3 + d4;
        o[2 * os + l] = 4 * (d1 - d2) - d3 + d4;
        o[3 * os + l] = 2 * (d3 - d1) - d2 + d4;
        o[4 * os + l] = 2 * (d1 - d3) - d2 + d4;
        o[5 * os + l] = 4 * d1 - 5 * d3 + d5;
    }
}
static inline void at4(real *restrict o, size_t os, const real *restrict x, size_t is) {
#pragma omp simd
    for (int l = 0; l < LN; l++) {
        const real m0 = x[l], m1 = x[is + l], m2 = x[2 * is + l], m3 = x[3 * is + l],
                   m4 = x[4 * is + l], m5 = x[5 * is + l];
        const real s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
        o[l] = m0 + s12 + s34;
        o[os + l] = d12 + 2 * d34;
        o[2 * os + l] = s12 + 4 * s34;
        o[3 * os + l] = d12 + 8 * d34 + m5;
    }
}
static inline void a4(real *restrict o, size_t os, const real *restrict x, size_t is) {
#pragma omp simd
    for (int l = 0; l < LN; l++) {
        const real y0 = x[l], y1 = x[is + l], y2 = x[2 * is + l], y3 = x[3 * is + l];
        const real e = y0 + y2, f = y1 + y3, e4 = y0 + 4 * y2, f4 = 2 * y1 + 8 * y3;
        o[l] = y0;
        o[os + l] = e + f;
        o[2 * os + l] = e - f;
        o[3 * os + l] = e4 + f4;
        o[4 * os + l] = e4 - f4;
        o[5 * os + l] = y3;
    }
}

/* out[i][j] (strides oi, oj) = L in Lᵀ for in[a][b] (strides ia, ib), L (R×S) one of the above. */
#define TR2D(name, f, R, S)                                                                        \
    static inline void name(real *out, size_t oi, size_t oj, const real *in, size_t ia,            \
                            size_t ib) {                                                           \
        real tmp[(R) * (S)*LN];                                                                    \
        for (int b = 0; b < (S); b++)                                                              \
            f(tmp + (size_t)b * LN, (size_t)(S)*LN, in + (size_t)b * ib, ia);                      \
        for (int i = 0; i < (R); i++)                                                              \
            f(out + (size_t)i * oi, oj, tmp + (size_t)i * (S)*LN, LN);                             \
    }
TR2D(bt2_2d, bt2, 4, 4)
TR2D(at2_2d, at2, 2, 4)
TR2D(a2_2d, a2, 4, 2)
TR2D(bt4_2d, bt4, 6, 6)
TR2D(at4_2d, at4, 4, 6)
TR2D(a4_2d, a4, 6, 4)

/* The tiling of one convolution: maps H×W in, OH×OW out, tiles tw×th per image. */
typedef struct tiling {
    int N, C, H, W, pad, OH, OW, tw, th, tpi, exact;
    long ntiles;
} tiling;

static tiling tiling_of(int N, int C, int H, int W, int pad, int m, int exact) {
    tiling g;
    g.N = N, g.C = C, g.H = H, g.W = W, g.pad = pad;
    g.OH = H + 2 * pad - 2, g.OW = W + 2 * pad - 2;
    g.tw = (g.OW + m - 1) / m, g.th = (g.OH + m - 1) / m, g.tpi = g.tw * g.th;
    g.exact = exact;
    g.ntiles = (long)N * g.tpi;
    return g;
}

/* Blocks of tiles: exact, ceil(tpi/NTMAX) per image; else ceil(ntiles/NTMAX) over the batch. */
static long nblocks(const tiling *g) {
    if (g->exact) return (long)g->N * ((g->tpi + NTMAX - 1) / NTMAX);
    return (g->ntiles + NTMAX - 1) / NTMAX;
}

/* A block's tiles: count, and per tile its image and its first output row and column. */
typedef struct block {
    int nt;
    int n[NTMAX], i0[NTMAX], j0[NTMAX];
} block;

static void block_of(const tiling *g, int m, long b, block *k) {
    long t0;
    if (g->exact) {
        int bpi = (g->tpi + NTMAX - 1) / NTMAX;
        long n = b / bpi, part = b % bpi;
        t0 = n * g->tpi + part * NTMAX;
        k->nt = (int)(g->tpi - part * NTMAX < NTMAX ? g->tpi - part * NTMAX : NTMAX);
    } else {
        t0 = b * NTMAX;
        k->nt = (int)(g->ntiles - t0 < NTMAX ? g->ntiles - t0 : NTMAX);
    }
    int n = (int)(t0 / g->tpi), r = (int)(t0 % g->tpi);
    for (int l = 0; l < k->nt; l++) {
        k->n[l] = n, k->i0[l] = (r / g->tw) * m, k->j0[l] = (r % g->tw) * m;
        if (++r == g->tpi) r = 0, n++;
    }
}

/* V[ξ][c][l] (ld NTMAX) = Bᵀ d B for the block's tiles of inp (N, C, H, W), input corners
 * (i0 − pad, j0 − pad), zeros outside the map. */
static void input_tf(real *V, const real *inp, const tiling *g, const wtab *T, const block *k) {
    const int A = T->A, C = g->C, H = g->H, W = g->W, nt = k->nt;
    _Alignas(64) real d[36 * LN];
    /* per lane: its patch's corner (ya, xa) and offset from its channel's plane in image 0; lanes
     * past the block's end get a corner outside the map (zeros) */
    ptrdiff_t off[NTMAX + LN];
    int ya[NTMAX + LN], xa[NTMAX + LN];
    for (int l = 0; l < nt; l++) {
        ya[l] = k->i0[l] - g->pad, xa[l] = k->j0[l] - g->pad;
        off[l] = (ptrdiff_t)k->n[l] * C * H * W + (ptrdiff_t)ya[l] * W + xa[l];
    }
    for (int l = nt; l < NTMAX + LN; l++)
        ya[l] = -A, xa[l] = -A, off[l] = 0;
#ifdef WINO_GATHER
    /* 32-bit gather offsets where the whole batch's input fits them */
    if ((double)g->N * C * H * W < (double)INT_MAX) {
        _Alignas(64) int o32[NTMAX + LN];
        for (int l = 0; l < NTMAX + LN; l++)
            o32[l] = (int)off[l];
        const __m512i vH = _mm512_set1_epi32(H), vW = _mm512_set1_epi32(W);
        for (int c = 0; c < C; c++) {
            const float *base = inp + (size_t)c * H * W;
            for (int l0 = 0; l0 < nt; l0 += LN) {
                const __m512i vo = _mm512_load_si512((const void *)(o32 + l0));
                const __m512i vy = _mm512_loadu_si512((const void *)(ya + l0));
                const __m512i vx = _mm512_loadu_si512((const void *)(xa + l0));
                for (int a = 0; a < A; a++) {
                    const __m512i y = _mm512_add_epi32(vy, _mm512_set1_epi32(a));
                    const __mmask16 my = _mm512_cmplt_epu32_mask(y, vH);
                    for (int b = 0; b < A; b++) {
                        const __m512i x = _mm512_add_epi32(vx, _mm512_set1_epi32(b));
                        const __mmask16 mk = my & _mm512_cmplt_epu32_mask(x, vW);
                        const __m512i idx = _mm512_add_epi32(vo, _mm512_set1_epi32(a * W + b));
                        _mm512_store_ps(
                            d + (a * A + b) * LN,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, idx, base, 4));
                    }
                }
                real *v = V + (size_t)c * NTMAX + l0;
                const size_t oj = (size_t)C * NTMAX;
                if (A == 4)
                    bt2_2d(v, 4 * oj, oj, d, 4 * LN, LN);
                else
                    bt4_2d(v, 6 * oj, oj, d, 6 * LN, LN);
            }
        }
        return;
    }
#endif
    for (int c = 0; c < C; c++) {
        const real *base = inp + (size_t)c * H * W;
        for (int l0 = 0; l0 < nt; l0 += LN) {
            const ptrdiff_t *o = off + l0;
            const int *y0 = ya + l0, *x0 = xa + l0;
            /* per patch position, the lanes' values (zeros outside the map); gcc 12 leaves this
             * gather scalar */
            for (int a = 0; a < A; a++)
                for (int b = 0; b < A; b++) {
                    const ptrdiff_t ab = (ptrdiff_t)a * W + b;
                    real *dq = d + (a * A + b) * LN;
#pragma omp simd
                    for (int l = 0; l < LN; l++) {
                        const unsigned y = (unsigned)(y0[l] + a), x = (unsigned)(x0[l] + b);
                        dq[l] = y < (unsigned)H && x < (unsigned)W ? base[o[l] + ab] : 0;
                    }
                }
            real *v = V + (size_t)c * NTMAX + l0;
            const size_t oj = (size_t)C * NTMAX;
            if (A == 4)
                bt2_2d(v, 4 * oj, oj, d, 4 * LN, LN);
            else
                bt4_2d(v, 6 * oj, oj, d, 6 * LN, LN);
        }
    }
}

#ifdef WINO_GATHER
/* The block's output tiles for 16-lane gathers and scatters: per lane (padded to NTMAX + LN)
 * its first output row and column and its offset from its channel's plane in image 0; lanes past
 * the block's end get row OH (outside). Returns 0 where the offsets do not fit 32 bits. */
static int out_lanes(const tiling *g, const block *k, int OC, int *off, int *i0, int *j0) {
    const int OH = g->OH, OW = g->OW;
    if ((double)g->N * OC * OH * OW >= (double)INT_MAX) return 0;
    for (int l = 0; l < k->nt; l++) {
        i0[l] = k->i0[l], j0[l] = k->j0[l];
        off[l] = (k->n[l] * OC * OH + i0[l]) * OW + j0[l];
    }
    for (int l = k->nt; l < NTMAX + LN; l++)
        i0[l] = OH, j0[l] = 0, off[l] = 0;
    return 1;
}
#endif

/* out (N, OC, OH, OW) (acc: +=) ← Aᵀ M A for the block's tiles, M[ξ][o][l] (ld NTMAX). */
static void output_tf(real *out, const real *M, int OC, const tiling *g, const wtab *T,
                      const block *k, int acc) {
    const int A = T->A, m = T->m, OH = g->OH, OW = g->OW, nt = k->nt;
    _Alignas(64) real y[16 * LN];
    const size_t ib = (size_t)OC * NTMAX;
#ifdef WINO_GATHER
    _Alignas(64) int off[NTMAX + LN], ti[NTMAX + LN], tj[NTMAX + LN];
    if (out_lanes(g, k, OC, off, ti, tj)) {
        const __m512i vOH = _mm512_set1_epi32(OH), vOW = _mm512_set1_epi32(OW);
        for (int o = 0; o < OC; o++) {
            float *base = out + (size_t)o * OH * OW;
            for (int l0 = 0; l0 < nt; l0 += LN) {
                const real *src = M + (size_t)o * NTMAX + l0;
                if (A == 4)
                    at2_2d(y, 2 * LN, LN, src, 4 * ib, ib);
                else
                    at4_2d(y, 4 * LN, LN, src, 6 * ib, ib);
                const __m512i vo = _mm512_load_si512((const void *)(off + l0));
                const __m512i vi = _mm512_load_si512((const void *)(ti + l0));
                const __m512i vj = _mm512_load_si512((const void *)(tj + l0));
                for (int i = 0; i < m; i++) {
                    const __mmask16 mi =
                        _mm512_cmplt_epi32_mask(_mm512_add_epi32(vi, _mm512_set1_epi32(i)), vOH);
                    for (int j = 0; j < m; j++) {
                        const __mmask16 mk =
                            mi & _mm512_cmplt_epi32_mask(_mm512_add_epi32(vj, _mm512_set1_epi32(j)),
                                                         vOW);
                        const __m512i idx = _mm512_add_epi32(vo, _mm512_set1_epi32(i * OW + j));
                        __m512 v = _mm512_load_ps(y + (i * m + j) * LN);
                        if (acc)
                            v = _mm512_add_ps(
                                v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, idx, base, 4));
                        _mm512_mask_i32scatter_ps(base, mk, idx, v, 4);
                    }
                }
            }
        }
        return;
    }
#endif
    for (int o = 0; o < OC; o++)
        for (int l0 = 0; l0 < nt; l0 += LN) {
            const int cnt = nt - l0 < LN ? nt - l0 : LN;
            const real *src = M + (size_t)o * NTMAX + l0;
            if (A == 4)
                at2_2d(y, 2 * LN, LN, src, 4 * ib, ib);
            else
                at4_2d(y, 4 * LN, LN, src, 6 * ib, ib);
            for (int l = 0; l < cnt; l++) {
                const int i0 = k->i0[l0 + l], j0 = k->j0[l0 + l];
                const int ni = OH - i0 < m ? OH - i0 : m, nj = OW - j0 < m ? OW - j0 : m;
                real *dst = out + ((size_t)k->n[l0 + l] * OC + o) * OH * OW + (size_t)i0 * OW + j0;
                for (int i = 0; i < ni; i++)
                    for (int j = 0; j < nj; j++) {
                        const real v = y[(i * m + j) * LN + l];
                        dst[(size_t)i * OW + j] = acc ? dst[(size_t)i * OW + j] + v : v;
                    }
            }
        }
}

/* D[ξ][o][l] (ld NTMAX) = A dY Aᵀ for the block's tiles of dout (N, OC, OH, OW), zeros past the
 * map's edge. */
static void grad_tf(real *D, const real *dout, int OC, const tiling *g, const wtab *T,
                    const block *k) {
    const int A = T->A, m = T->m, OH = g->OH, OW = g->OW, nt = k->nt;
    _Alignas(64) real dy[16 * LN];
    const size_t oj = (size_t)OC * NTMAX;
#ifdef WINO_GATHER
    _Alignas(64) int off[NTMAX + LN], ti[NTMAX + LN], tj[NTMAX + LN];
    if (out_lanes(g, k, OC, off, ti, tj)) {
        const __m512i vOH = _mm512_set1_epi32(OH), vOW = _mm512_set1_epi32(OW);
        for (int o = 0; o < OC; o++) {
            const float *base = dout + (size_t)o * OH * OW;
            for (int l0 = 0; l0 < nt; l0 += LN) {
                const __m512i vo = _mm512_load_si512((const void *)(off + l0));
                const __m512i vi = _mm512_load_si512((const void *)(ti + l0));
                const __m512i vj = _mm512_load_si512((const void *)(tj + l0));
                for (int i = 0; i < m; i++) {
                    const __mmask16 mi =
                        _mm512_cmplt_epi32_mask(_mm512_add_epi32(vi, _mm512_set1_epi32(i)), vOH);
                    for (int j = 0; j < m; j++) {
                        const __mmask16 mk =
                            mi & _mm512_cmplt_epi32_mask(_mm512_add_epi32(vj, _mm512_set1_epi32(j)),
                                                         vOW);
                        const __m512i idx = _mm512_add_epi32(vo, _mm512_set1_epi32(i * OW + j));
                        _mm512_store_ps(
                            dy + (i * m + j) * LN,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, idx, base, 4));
                    }
                }
                real *dst = D + (size_t)o * NTMAX + l0;
                if (A == 4)
                    a2_2d(dst, 4 * oj, oj, dy, 2 * LN, LN);
                else
                    a4_2d(dst, 6 * oj, oj, dy, 4 * LN, LN);
            }
        }
        return;
    }
#endif
    for (int o = 0; o < OC; o++)
        for (int l0 = 0; l0 < nt; l0 += LN) {
            const int cnt = nt - l0 < LN ? nt - l0 : LN;
            for (int l = 0; l < LN; l++) {
                if (l >= cnt) {
                    for (int q = 0; q < m * m; q++)
                        dy[q * LN + l] = 0;
                    continue;
                }
                const int i0 = k->i0[l0 + l], j0 = k->j0[l0 + l];
                const real *s = dout + ((size_t)k->n[l0 + l] * OC + o) * OH * OW;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < m; j++)
                        dy[(i * m + j) * LN + l] =
                            i0 + i < OH && j0 + j < OW ? s[(size_t)(i0 + i) * OW + j0 + j] : 0;
            }
            real *dst = D + (size_t)o * NTMAX + l0;
            if (A == 4)
                a2_2d(dst, 4 * oj, oj, dy, 2 * LN, LN);
            else
                a4_2d(dst, 6 * oj, oj, dy, 4 * LN, LN);
        }
}

/* U[ξ][q] = G g_q Gᵀ over the q < OC*C filters of w (OC, C, 3, 3) in rows [q0, q1); rot: q = c*OC
 * + o takes w[o][c] rotated by 180° (the data gradient's filter). */
static void filter_tf(real *U, const real *w, int OC, int C, int rot, const wtab *T, size_t q0,
                      size_t q1) {
    const int A = T->A, X = A * A;
    const size_t Q = (size_t)OC * C;
    real gg[9 * LN], tmp[18 * LN], u[36 * LN];
    for (size_t k0 = q0; k0 < q1; k0 += LN) {
        const int cnt = q1 - k0 < LN ? (int)(q1 - k0) : LN;
        for (int l = 0; l < LN; l++) {
            size_t q = k0 + (l < cnt ? l : 0);
            const real *f = rot ? w + ((q % (size_t)OC) * C + q / (size_t)OC) * 9 : w + q * 9;
            for (int k = 0; k < 9; k++)
                gg[k * LN + l] = rot ? f[8 - k] : f[k];
        }
        tr2(u, tmp, gg, T->g, A, 3);
        for (int k = 0; k < X; k++)
            for (int l = 0; l < cnt; l++)
                U[k * Q + k0 + l] = u[k * LN + l];
    }
}

/* dw[q][3×3] += Gᵀ Mw[·][q] G over rows [q0, q1) of Q. */
static void wgrad_tf(real *dw, const real *Mw, size_t Q, const wtab *T, size_t q0, size_t q1) {
    const int A = T->A, X = A * A;
    real mm[36 * LN], tmp[18 * LN], o[9 * LN];
    for (size_t k0 = q0; k0 < q1; k0 += LN) {
        const int cnt = q1 - k0 < LN ? (int)(q1 - k0) : LN;
        for (int k = 0; k < X; k++)
            for (int l = 0; l < LN; l++)
                mm[k * LN + l] = l < cnt ? Mw[k * Q + k0 + l] : 0;
        tr2(o, tmp, mm, T->gt, 3, A);
        for (int l = 0; l < cnt; l++)
            for (int k = 0; k < 9; k++)
                dw[(k0 + l) * 9 + k] += o[k * LN + l];
    }
}

int nb_wino_fits(int KS, int H, int W, int pad) {
    return KS == 3 && (pad == 0 || pad == 1) && H + 2 * pad >= 3 && W + 2 * pad >= 3;
}

static size_t up16(size_t n) {
    return (n + 15) & ~(size_t)15;
}

/* Per-thread parts: V and M/D (X·max(C,OC)·NTMAX each), Mw (X·OC·C), the exact sums (X·OC·C
 * doubles); shared: U (X·OC·C). */
size_t nb_wino_scratch(int m, int C, int OC, int nthreads) {
    const size_t X = (size_t)(m + 2) * (m + 2), CM = (size_t)(C > OC ? C : OC);
    size_t per = 2 * up16(X * CM * NTMAX) + 3 * up16(X * (size_t)OC * C);
    return up16(X * (size_t)OC * C) + per * (size_t)(nthreads > 0 ? nthreads : 1);
}

static int threads_of(int nthreads, long nb, double madds) {
    int T = madds < WINO_PAR_MIN ? 1 : omp_get_max_threads();
    if (T > nthreads) T = nthreads;
    if (T > nb) T = (int)nb;
    return T < 1 ? 1 : T;
}

/* out (N, Co, OH, OW) (+= when acc) = the convolution of inp (N, Ci, H, W) whose transformed
 * filters U (X, Co, Ci) the caller filled (Ushared), through per-thread scratch ws. */
static void wino_conv(real *out, const real *inp, const real *U, real *ws, size_t per, int Tn,
                      int Ci, int Co, const tiling *g, const wtab *T, int acc) {
    const int X = T->A * T->A;
    const long nb = nblocks(g);
#pragma omp parallel num_threads(Tn)
    {
        const int t = omp_get_thread_num(), nt_ = omp_get_num_threads();
        real *V = ws + (size_t)t * per, *M = V + per / 2;
        block blk;
        for (long b = nb * t / nt_; b < nb * (t + 1) / nt_; b++) {
            block_of(g, T->m, b, &blk);
            input_tf(V, inp, g, T, &blk);
            for (int k = 0; k < X; k++)
                CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, Co, blk.nt, Ci, (real)1,
                           U + (size_t)k * Co * Ci, Ci, V + (size_t)k * Ci * NTMAX, NTMAX, (real)0,
                           M + (size_t)k * Co * NTMAX, NTMAX);
            output_tf(out, M, Co, g, T, &blk, acc);
        }
    }
}

/* The per-thread part of the scratch (V, then M; Mw after them). */
static size_t per_thread(int m, int C, int OC) {
    const size_t X = (size_t)(m + 2) * (m + 2), CM = (size_t)(C > OC ? C : OC);
    return 2 * up16(X * CM * NTMAX);
}

static void fill_u(real *U, const real *w, int OC, int C, int rot, const wtab *T, int Tn) {
    const size_t Q = (size_t)OC * C;
    const size_t nchunks = (Q + LN - 1) / LN;
#pragma omp parallel for schedule(static) num_threads(Tn)
    for (size_t i = 0; i < nchunks; i++) {
        size_t q0 = i * LN, q1 = q0 + LN < Q ? q0 + LN : Q;
        filter_tf(U, w, OC, C, rot, T, q0, q1);
    }
}

void nb_wino_forward(real *out, real *scratch, int nthreads, const real *inp, const real *w, int N,
                     int C, int H, int W, int OC, int pad, int m, int exact) {
    if (N <= 0 || !nb_wino_fits(3, H, W, pad)) return;
    wtab T;
    tab_of(&T, m);
    const tiling g = tiling_of(N, C, H, W, pad, m, exact);
    const size_t X = (size_t)T.A * T.A, per = per_thread(m, C, OC);
    const size_t pt = per + 3 * up16(X * (size_t)OC * C);
    const int Tn = threads_of(nthreads, nblocks(&g), 9.0 * N * OC * C * g.OH * g.OW);
    real *U = scratch, *ws = scratch + up16(X * (size_t)OC * C);
    fill_u(U, w, OC, C, 0, &T, Tn);
    wino_conv(out, inp, U, ws, pt, Tn, C, OC, &g, &T, 0);
}

/* dwd[q][3×3] += Gᵀ M[·][q] G in double over q in [q0, q1), M (X, Q) doubles. */
static void wgrad_tf_double(double *dwd, const double *M, size_t Q, int m, size_t q0, size_t q1) {
    const int A = m + 2;
    const double *G = m == 2 ? G2D : G4D;
    for (size_t q = q0; q < q1; q++) {
        double t[3][6];
        for (int a = 0; a < 3; a++)
            for (int j = 0; j < A; j++) {
                double s = 0;
                for (int i = 0; i < A; i++)
                    s += G[i * 3 + a] * M[(size_t)(i * A + j) * Q + q];
                t[a][j] = s;
            }
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                double s = 0;
                for (int j = 0; j < A; j++)
                    s += t[a][j] * G[j * 3 + b];
                dwd[q * 9 + (size_t)(a * 3 + b)] += s;
            }
    }
}

void nb_wino_backward(real *dinp, real *dw, double *dwd, real *scratch, int nthreads,
                      const real *dout, const real *inp, const real *w, int N, int C, int H, int W,
                      int OC, int pad, int m, int acc) {
    if (N <= 0 || !nb_wino_fits(3, H, W, pad)) return;
    wtab T;
    tab_of(&T, m);
    const int exact = dwd != NULL;
    const tiling g = tiling_of(N, C, H, W, pad, m, exact);
    const size_t X = (size_t)T.A * T.A, per = per_thread(m, C, OC), Q = (size_t)OC * C;
    const size_t pt = per + 3 * up16(X * Q);
    const long nb = nblocks(&g);
    const int Tn = threads_of(nthreads, nb, 9.0 * N * OC * C * g.OH * g.OW);
    real *U = scratch, *ws = scratch + up16(X * Q);
    if (dinp) {
        /* dinp = dout (N, OC, OH, OW) convolved with the rotated filters, pad 2 − pad */
        const tiling gd = tiling_of(N, OC, g.OH, g.OW, 2 - pad, m, exact);
        fill_u(U, w, OC, C, 1, &T, Tn);
        wino_conv(dinp, dout, U, ws, pt, threads_of(nthreads, nblocks(&gd), 1e9), OC, C, &gd, &T,
                  acc);
    }
    /* weight gradient: per-thread Mw partials (float, or per block in double when exact) */
#pragma omp parallel num_threads(Tn)
    {
        const int t = omp_get_thread_num(), nt_ = omp_get_num_threads();
        real *V = ws + (size_t)t * pt, *D = V + per / 2, *Mw = V + per;
        /* exact: the blocks' products summed in double (X·Q doubles after Mw) */
        double *dp = exact ? (double *)(void *)(Mw + up16(X * Q)) : NULL;
        if (dp) memset(dp, 0, sizeof(double) * Q * X);
        int first = 1;
        block blk;
        for (long b = nb * t / nt_; b < nb * (t + 1) / nt_; b++) {
            block_of(&g, m, b, &blk);
            input_tf(V, inp, &g, &T, &blk);
            grad_tf(D, dout, OC, &g, &T, &blk);
            for (size_t k = 0; k < X; k++)
                CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, OC, C, blk.nt, (real)1,
                           D + k * OC * NTMAX, NTMAX, V + k * C * NTMAX, NTMAX,
                           (real)(first || exact ? 0 : 1), Mw + k * Q, C);
            first = 0;
            if (exact)
                for (size_t i = 0; i < X * Q; i++)
                    dp[i] += (double)Mw[i];
        }
        if (first && !exact) memset(Mw, 0, sizeof(real) * X * Q);
#pragma omp barrier
        if (exact) {
            /* thread 0's sums take the others' in thread order (index by index: each iteration
             * alone reads and writes its index), then Gᵀ · G in double into dwd */
            double *d0 = (double *)(void *)(ws + per + up16(X * Q));
#pragma omp for schedule(static)
            for (size_t i = 0; i < X * Q; i++) {
                double s = d0[i];
                for (int u = 1; u < nt_; u++)
                    s += ((const double *)(const void *)(ws + (size_t)u * pt + per +
                                                         up16(X * Q)))[i];
                d0[i] = s;
            }
            const size_t nchunks = (Q + LN - 1) / LN;
#pragma omp for schedule(static)
            for (size_t i = 0; i < nchunks; i++) {
                size_t q0 = i * LN, q1 = q0 + LN < Q ? q0 + LN : Q;
                wgrad_tf_double(dwd, d0, Q, m, q0, q1);
            }
        } else {
            /* the partials in thread order into U (free now), then Gᵀ · G into dw */
#pragma omp for schedule(static)
            for (size_t i = 0; i < X * Q; i++) {
                real s = 0;
                for (int u = 0; u < nt_; u++)
                    s += ws[(size_t)u * pt + per + i];
                U[i] = s;
            }
            const size_t nchunks = (Q + LN - 1) / LN;
#pragma omp for schedule(static)
            for (size_t i = 0; i < nchunks; i++) {
                size_t q0 = i * LN, q1 = q0 + LN < Q ? q0 + LN : Q;
                wgrad_tf(dw, U, Q, &T, q0, q1);
            }
        }
    }
}
