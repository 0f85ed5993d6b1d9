#include "nn/real.h"
/* nn/norms/dyt.c — DyT (Dynamic Tanh) forward and backward, and the vectorized float tanh they use
 * (generic: compiled as float and, with -DNB_F64, as double; see nn/nn.h). Contracts in
 * nn/norms/dyt.h and nn/vtanh.h; formulas in docs/numerics.md#dyt.
 *
 * y = g·t + b, t = tanh(alpha·x). Backward with u = dy·g·(1 − t²):
 *   dx = alpha·u,  dg = Σ_rows dy·t,  db = Σ_rows dy,  dalpha = Σ_all x·u.
 * Every kernel is one pass over its rows (forward reads x, writes y; backward reads x and dy,
 * writes dx), with tanh recomputed: DyT is element-wise, so memory bandwidth bounds it as it
 * bounds a copy, provided the tanh costs less than the memory traffic (16 lanes of FMAs here).
 *
 * Order of the sums, fixed by B alone (the same bits for any thread count): the rows are cut
 * into NG groups of consecutive rows (NG = min(64, ceil(B/16))); in a group, every PG rows'
 * products are summed per column in the working precision (row order), then added to the
 * group's double sums; dalpha's row sum is 16 lanes (lane j: the values c ≡ j mod 16, in
 * order; the lanes added in double in lane order) added to the group's double sum; the groups
 * are added in group order. In float with AVX-512 the kernels use 16-lane intrinsics; the
 * scalar code (double, and float elsewhere) follows the same lanes and fused multiply-adds, so
 * float gives the same bits with or without AVX-512. */

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) && !defined(NB_F64)
#include <immintrin.h>
#define DYT_AVX512 1
#else
#define DYT_AVX512 0
#endif

#ifdef NB_F64
#define FMA_R fma
#else
#define FMA_R fmaf
#endif

/* Below this many values a kernel runs on one thread (as nn/norm.c's PAR_MIN). */
#define PAR_MIN 262144
/* Outputs of at least this many bytes are streamed past the cache (as nn/norm.c). */
#define NT_MIN_BYTES (64u << 20)
#define LANES 16
#define PG 8
#define MAX_GROUPS 64
/* The AVX-512 loops prefetch x (and dy) this many values ahead: with ~40 vector operations per
 * 16 values, the out-of-order window holds too few loads to keep memory busy on its own (one
 * thread reached ~0.46 of a copy without it, ~0.7 with it, at 65536x1024) */
#ifndef PF_AHEAD
#define PF_AHEAD 1024
#endif

/* ---- the float tanh (compiled once: in the float build) ----------------------------------- */

#ifndef NB_F64
#define EX_M2LOG2E -2.88539008177792681f /* -2/ln 2 */
/* ln2/2, in float 9.5e-10 off: n·(that) moves e^{-2|x|} by 2|n|·9.5e-10 relative (< 2^-24.1
 * for |n| <= 29), more than 2^-25 only for |n| >= 12, where e^{-2|x|} < 2^-10 and moves tanh by
 * less than 2^-33. For |n| small, e = |x| + n·(ln2/2) is exact (one fused step, |e| < 0.25). */
#define EX_LN2H 0.346573590279972655f
/* (e^{-2e} - 1)/e = -2 + 2e + E3·e² + E4·e³ + E5·e⁴ + E6·e⁵ on |e| <= ln2/4: E1 = -2 and
 * E2 = 2 exact, E3..E6 a weighted least-squares (Lawson) fit for the relative error of
 * e^{-2e} - 1, < 2^-26 before the coefficients' rounding to float */
#define EX_E3 -0x1.5554b8p+0f
#define EX_E4 0x1.5555bap-1f
#define EX_E5 -0x1.122362p-2f
#define EX_E6 0x1.6c5566p-4f
/* |x| clamped here: tanh(x) rounds to 1 in float from x = 9.01 on, and e^{-2x} stays normal */
#define EX_MAX 10.0f
/* One formula over the whole range: with a = min(|x|, 10), n = round(-2a/ln2), e = a + n·ln2/2
 * (so e^{-2a} = 2^n·e^{-2e}) and p = (e^{-2e} - 1)/e by the polynomial above,
 *   w = e^{-2a} - 1 = fma(2^n·p, e, 2^n - 1)   (2^n·p exact, 2^n - 1 exact for n >= -24),
 *   tanh a = -w/(w + 2),
 * and tanh x = copysign(|w/(w + 2)|, x). Near 0 (n = 0) w is the polynomial's -2a(1 - a + ...),
 * with no cancellation, so no separate small-|x| formula is needed: one branch, evaluated for
 * every lane (the two-branch form before this evaluated both). Every step is an explicit fused
 * multiply-add or a single rounding, so the scalar code and the 16 lanes give the same bits. */
float nb_tanhf(float x) {
    if (x != x) return x;
    const float ax = fabsf(x);
    const float a = ax < EX_MAX ? ax : EX_MAX;
    const float n = rintf(a * EX_M2LOG2E);
    const float e = fmaf(n, EX_LN2H, a);
    float p = fmaf(EX_E6, e, EX_E5);
    p = fmaf(p, e, EX_E4);
    p = fmaf(p, e, EX_E3);
    p = fmaf(p, e, 2.0f);
    p = fmaf(p, e, -2.0f);
    const float s = ldexpf(1.0f, (int)n);
    const float w = fmaf(ldexpf(p, (int)n), e, s - 1.0f);
    const float r = w / (w + 2.0f);
    return copysignf(fabsf(r), x);
}

#if DYT_AVX512
/* nb_tanhf on 16 lanes: the same operations in the same order. */
static inline __m512 tanh16(__m512 x) {
    /* min(10, NaN) is NaN (vminps returns its second operand when either is NaN), which
     * then runs through to the result */
    const __m512 a = _mm512_min_ps(_mm512_set1_ps(EX_MAX), _mm512_abs_ps(x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(EX_M2LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 e = _mm512_fmadd_ps(n, _mm512_set1_ps(EX_LN2H), a);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EX_E6), e, _mm512_set1_ps(EX_E5));
    p = _mm512_fmadd_ps(p, e, _mm512_set1_ps(EX_E4));
    p = _mm512_fmadd_ps(p, e, _mm512_set1_ps(EX_E3));
    p = _mm512_fmadd_ps(p, e, _mm512_set1_ps(2.0f));
    p = _mm512_fmadd_ps(p, e, _mm512_set1_ps(-2.0f));
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 s = _mm512_scalef_ps(one, n);
    const __m512 w = _mm512_fmadd_ps(_mm512_scalef_ps(p, n), e, _mm512_sub_ps(s, one));
    const __m512 r = _mm512_div_ps(w, _mm512_add_ps(w, _mm512_set1_ps(2.0f)));
    /* the sign bit from x, the rest from r: bitwise (m & x) | (~m & r) */
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(x), _mm512_castps_si512(r), 0xCA));
}
#endif

int nb_tanhf_vectorized(void) {
    return DYT_AVX512;
}

void nb_tanhf_array(float *y, const float *x, size_t n) {
    size_t i = 0;
#if DYT_AVX512
    for (; i + LANES <= n; i += LANES)
        _mm512_storeu_ps(y + i, tanh16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, tanh16(_mm512_maskz_loadu_ps(m, x + i)));
    }
#endif
    for (; i < n; i++)
        y[i] = nb_tanhf(x[i]);
}
#endif /* !NB_F64 */

#ifdef NB_F64
#define TANH_R tanh
#else
#define TANH_R nb_tanhf
#endif

/* ---- DyT ----------------------------------------------------------------------------------- */

static inline int par_ok(int B, int C) {
    return (size_t)B * (size_t)C >= PAR_MIN;
}

/* One row of the forward: out = g·tanh(alpha·x) + b (b NULL: no bias). nt: streaming stores
 * (out 64-byte aligned and C a multiple of 16). */
static void fwd_row(real *restrict out, const real *restrict x, const real *restrict g,
                    const real *restrict b, real alpha, int C, int nt) {
    int c = 0;
#if DYT_AVX512
    const __m512 va = _mm512_set1_ps(alpha);
    for (; c + LANES <= C; c += LANES) {
        _mm_prefetch((const char *)(x + c + PF_AHEAD), _MM_HINT_T0);
        const __m512 t = tanh16(_mm512_mul_ps(va, _mm512_loadu_ps(x + c)));
        const __m512 bb = b ? _mm512_loadu_ps(b + c) : _mm512_setzero_ps();
        const __m512 y = _mm512_fmadd_ps(_mm512_loadu_ps(g + c), t, bb);
        if (nt)
            _mm512_stream_ps(out + c, y);
        else
            _mm512_storeu_ps(out + c, y);
    }
#else
    (void)nt;
#endif
    for (; c < C; c++)
        out[c] = FMA_R(g[c], TANH_R(alpha * x[c]), b ? b[c] : (real)0);
}

void nb_dyt_forward(real *out, const real *inp, const real *g, const real *b, real alpha, int B,
                    int C) {
    const int nt = DYT_AVX512 && (size_t)B * (size_t)C * sizeof(real) >= NT_MIN_BYTES &&
                   C % LANES == 0 && ((uintptr_t)out & 63) == 0;
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int i = 0; i < B; i++)
        fwd_row(out + (size_t)i * C, inp + (size_t)i * C, g, b, alpha, C, nt);
#if DYT_AVX512
    if (nt) _mm_sfence();
#endif
}

/* Backward of one row. dx: written (set) or added to. fg/fb: the group's running dg/db sums
 * in real (first: assigned rather than added), or NULL. Returns the row's dalpha sum. */
static double bwd_row(real *restrict dx, real *restrict fg, real *restrict fb,
                      const real *restrict dy, const real *restrict x, const real *restrict g,
                      real alpha, int C, int set, int first) {
    real lane[LANES] = {0};
    int c = 0;
#if DYT_AVX512
    const __m512 va = _mm512_set1_ps(alpha), one = _mm512_set1_ps(1.0f);
    __m512 acc = _mm512_setzero_ps();
    for (; c + LANES <= C; c += LANES) {
        _mm_prefetch((const char *)(x + c + PF_AHEAD), _MM_HINT_T0);
        _mm_prefetch((const char *)(dy + c + PF_AHEAD), _MM_HINT_T0);
        const __m512 vx = _mm512_loadu_ps(x + c), vdy = _mm512_loadu_ps(dy + c);
        const __m512 t = tanh16(_mm512_mul_ps(va, vx));
        const __m512 w = _mm512_fnmadd_ps(t, t, one);
        const __m512 u = _mm512_mul_ps(_mm512_mul_ps(vdy, _mm512_loadu_ps(g + c)), w);
        if (set)
            _mm512_storeu_ps(dx + c, _mm512_mul_ps(va, u));
        else
            _mm512_storeu_ps(dx + c, _mm512_fmadd_ps(va, u, _mm512_loadu_ps(dx + c)));
        acc = _mm512_fmadd_ps(vx, u, acc);
        if (fg) {
            if (first) {
                _mm512_storeu_ps(fg + c, _mm512_mul_ps(vdy, t));
                _mm512_storeu_ps(fb + c, vdy);
            } else {
                _mm512_storeu_ps(fg + c, _mm512_fmadd_ps(vdy, t, _mm512_loadu_ps(fg + c)));
                _mm512_storeu_ps(fb + c, _mm512_add_ps(vdy, _mm512_loadu_ps(fb + c)));
            }
        }
    }
    _mm512_storeu_ps(lane, acc);
#endif
    for (; c < C; c++) {
        const real t = TANH_R(alpha * x[c]);
        const real w = FMA_R(-t, t, (real)1);
        const real u = (dy[c] * g[c]) * w;
        dx[c] = set ? alpha * u : FMA_R(alpha, u, dx[c]);
        lane[c % LANES] = FMA_R(x[c], u, lane[c % LANES]);
        if (fg) {
            fg[c] = first ? dy[c] * t : FMA_R(dy[c], t, fg[c]);
            fb[c] = first ? dy[c] : dy[c] + fb[c];
        }
    }
    double s = 0;
    for (int j = 0; j < LANES; j++)
        s += (double)lane[j];
    return s;
}

/* Group k of NG over B rows: rows [lo, hi). */
static void group_rows(int B, int NG, int k, int *lo, int *hi) {
    const int per = (B + NG - 1) / NG;
    *lo = k * per < B ? k * per : B;
    *hi = *lo + per < B ? *lo + per : B;
}

static void dyt_backward(real *dinp, real *dg, real *db, real *dalpha, const real *dout,
                         const real *inp, const real *g, real alpha, int B, int C, int set) {
    if (B <= 0 || C <= 0) return;
    int NG = (B + 15) / 16;
    if (NG > MAX_GROUPS) NG = MAX_GROUPS;
    const int want = dg || db;
    /* per group: dg and db sums in double (2C), dalpha sum; per group also 2C reals for the
     * current PG rows */
    double *gs = calloc((size_t)NG * (2 * (size_t)C + 1), sizeof(double));
    real *fs = want ? malloc((size_t)NG * 2 * (size_t)C * sizeof(real)) : NULL;
    const int par = par_ok(B, C) && gs && (!want || fs);
    if (!gs || (want && !fs)) { /* out of memory: one group at a time, the same order */
        free(gs);
        free(fs);
        gs = calloc(2 * (size_t)C + 1, sizeof(double));
        fs = want ? malloc(2 * (size_t)C * sizeof(real)) : NULL;
        if (!gs || (want && !fs)) abort(); /* 4C+1 values: a model this size could not exist */
    }
    double tot_a = 0;
    double *tot = NULL;
    if (!par && NG > 1) { /* serial: each group's sums added to the totals as it ends */
        tot = calloc(2 * (size_t)C, sizeof(double));
        if (!tot) abort();
    }
#pragma omp parallel for schedule(static) if (par)
    for (int k = 0; k < NG; k++) {
        double *G = par ? gs + (size_t)k * (2 * (size_t)C + 1) : gs;
        real *F = fs ? (par ? fs + (size_t)k * 2 * (size_t)C : fs) : NULL;
        if (!par) memset(G, 0, (2 * (size_t)C + 1) * sizeof(double));
        int lo, hi;
        group_rows(B, NG, k, &lo, &hi);
        for (int r0 = lo; r0 < hi; r0 += PG) {
            const int r1 = r0 + PG < hi ? r0 + PG : hi;
            for (int i = r0; i < r1; i++) {
                const size_t o = (size_t)i * C;
                G[2 * (size_t)C] += bwd_row(dinp + o, F, F ? F + C : NULL, dout + o, inp + o, g,
                                            alpha, C, set, i == r0);
            }
            if (F)
                for (int c = 0; c < C; c++) {
                    G[c] += (double)F[c];
                    G[C + c] += (double)F[C + c];
                }
        }
        if (!par && tot) {
            for (size_t c = 0; c < 2 * (size_t)C; c++)
                tot[c] += G[c];
            tot_a += G[2 * (size_t)C];
        }
    }
    if (par || !tot) { /* the groups in order */
        const int ng = par ? NG : 1;
        if (want) {
#pragma omp parallel for schedule(static) if (par)
            for (int c = 0; c < C; c++) {
                double sg = 0, sb = 0;
                for (int k = 0; k < ng; k++) {
                    sg += gs[(size_t)k * (2 * (size_t)C + 1) + c];
                    sb += gs[(size_t)k * (2 * (size_t)C + 1) + C + c];
                }
                if (dg) dg[c] += (real)sg;
                if (db) db[c] += (real)sb;
            }
        }
        for (int k = 0; k < ng; k++)
            tot_a += gs[(size_t)k * (2 * (size_t)C + 1) + 2 * (size_t)C];
    } else {
        for (int c = 0; c < C; c++) {
            if (dg) dg[c] += (real)tot[c];
            if (db) db[c] += (real)tot[C + c];
        }
    }
    if (dalpha) *dalpha += (real)tot_a;
    free(tot);
    free(gs);
    free(fs);
}

void nb_dyt_backward(real *dinp, real *dg, real *db, real *dalpha, const real *dout,
                     const real *inp, const real *g, real alpha, int B, int C) {
    dyt_backward(dinp, dg, db, dalpha, dout, inp, g, alpha, B, C, 0);
}

void nb_dyt_backward_set(real *dinp, real *dg, real *db, real *dalpha, const real *dout,
                         const real *inp, const real *g, real alpha, int B, int C) {
    dyt_backward(dinp, dg, db, dalpha, dout, inp, g, alpha, B, C, 1);
}

/* ---- the norm's row in the table ---------------------------------------------------------- */

static void fwd(real *out, real *st0, real *st1, real *run0, real *run1, const real *x,
                const real *g, const real *b, const real *s, int B, int C, int training,
                const nb_norm_cfg *cfg) {
    nb_dyt_forward(out, x, g, b, s[0], B, C);
}

static void bwd(real *dx, real *dg, real *db, real *ds, const real *dy, const real *x,
                const real *g, const real *s, const real *st0, const real *st1, int B, int C,
                int training, const nb_norm_cfg *cfg, int set) {
    if (set)
        nb_dyt_backward_set(dx, dg, db, ds, dy, x, g, s[0], B, C);
    else
        nb_dyt_backward(dx, dg, db, ds, dy, x, g, s[0], B, C);
}

const nb_norm_ops nb_norm_ops_dyt = {fwd, bwd};

#ifndef NB_F64
static double alpha0(const nb_norm_cfg *cfg) {
    return cfg->dyt_alpha;
}

extern const nb_norm_ops_f64 nb_norm_ops_dyt_f64;
const nb_norm_def nb_norm_dyt = {
    .name = "dyt",
    .help = "DyT: y = g*tanh(alpha*x) + b, alpha one learned scalar per site (--dyt-alpha)",
    .color = "#9467bd",
    .acts = NB_ON_ROWS,
    .params = NB_NP_GAIN | NB_NP_SHIFT,
    .nscalars = 1,
    .scalar_name = "alpha",
    .scalar_init = alpha0,
    .in_all = 1,
    .ops = &nb_norm_ops_dyt,
    .ops_f64 = &nb_norm_ops_dyt_f64,
};
#endif
