#include "real.h"
/* nn/norm.c — LayerNorm, RMSNorm/pRMSNorm, BatchNorm and WeightNorm, forward and backward
 * (generic: compiled as float and, with -DNB_F64, as double; see nn/nn.h). Contracts in
 * nn/norm.h; formulas in docs/numerics.md.
 *
 * Dimension letters: B rows, C values per row (features), OC output units (WeightNorm).
 *
 * Numerics. Row statistics are two-pass (mean, then the sum of squared deviations; the row is
 * in L1 for the second pass) with explicitly vectorized reductions (omp simd reduction: gcc
 * does not vectorize a float reduction without it and -ffast-math is not used). The per-row
 * scalars (r, the backward coefficients) are computed in double. BatchNorm's per-column
 * statistics are one pass of sums shifted by a value near the mean, in groups of 8 rows in
 * real added in double; every gain/bias gradient summed over rows ends in double (groups of
 * rows in real first). Outputs of NT_MIN_BYTES or more are streamed (docs/numerics.md#streaming).
 *
 * Epsilon placement (cfg->eps_outside): r = 1/sqrt(m + eps) or r = 1/(sqrt(m) + eps), where m
 * is the variance (LN, BN) or the mean square (RMS). Backward uses dr/dm = -r^3/2 or
 * -r^2/(2 sqrt(m)) respectively; for the outside form backward recomputes m (one extra sum in
 * a pass it makes anyway) rather than recovering sqrt(m) = 1/r - eps, which cancels badly
 * when sqrt(m) is near eps. At m == 0 the term it multiplies is exactly zero, so it is 0.
 *
 * Threads. Row-wise kernels split rows over threads (static schedule); gain/bias gradients go
 * through per-thread double partials summed in thread order, so results are deterministic for
 * a fixed thread count. BatchNorm works on blocks of columns, each owned by one thread, up to
 * 1,024 rows, and on row chunks (a cut that does not depend on the thread count) beyond; either
 * way deterministic for any thread count (docs/numerics.md#batch). Problems below PAR_MIN
 * values stay serial.
 */

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

#include "normmath.h"

/* Below this many elements a kernel runs on one thread: waking the passive OpenMP threads cost
 * more than the whole kernel at the MLP's 128 x 1,000 (docs/numerics.md#reductions). */
#define PAR_MIN 262144
/* BatchNorm's column block: the per-column double accumulators of one block live on the stack
 * and one row's slice of a block is 256 (float) or 512 (double) contiguous bytes. */
#define BN_CB 64
/* WeightNorm's floor for ||v||: a zero row gives w = 0 rather than 0/0. */
#define WN_FLOOR NB_WN_FLOOR

/* Outputs of at least this many bytes are written with non-temporal (streaming) stores where
 * the target has them: an array this large leaves the cache before it is read again, and
 * streaming skips the read-for-ownership of every output line (about a third of the memory
 * traffic of a normalization). Smaller outputs stay in cache for the next layer. */
#define NT_MIN_BYTES (64u << 20)
/* Streaming forward of a row that does not start on a 64-byte boundary computes this many
 * values into an L1 buffer, then streams them out (aligned rows stream from registers). */
#define NT_CHUNK 256

#if defined(__AVX512F__) || defined(__AVX__)
#define HAVE_NT 1
/* dst[0..n) = src[0..n) with streaming stores on the aligned middle part. */
static inline void nt_copy(real *dst, const real *src, int n) {
    int i = 0;
#if defined(__AVX512F__)
    const int L = 64 / (int)sizeof(real);
    const uintptr_t A = 63;
#else
    const int L = 32 / (int)sizeof(real);
    const uintptr_t A = 31;
#endif
    for (; i < n && ((uintptr_t)(dst + i) & A); i++)
        dst[i] = src[i];
    for (; i + L <= n; i += L) {
#if defined(__AVX512F__) && defined(NB_F64)
        _mm512_stream_pd(dst + i, _mm512_loadu_pd(src + i));
#elif defined(__AVX512F__)
        _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(NB_F64)
        _mm256_stream_pd(dst + i, _mm256_loadu_pd(src + i));
#else
        _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#endif
    }
    for (; i < n; i++)
        dst[i] = src[i];
}
static inline void nt_fence(void) {
    _mm_sfence();
}
#else
#define HAVE_NT 0
static inline void nt_copy(real *dst, const real *src, int n) {
    memcpy(dst, src, (size_t)n * sizeof(real));
}
static inline void nt_fence(void) {}
#endif

/* Whether a forward writing B*C values streams them. */
static inline int use_nt(int B, int C) {
    return HAVE_NT && (size_t)B * (size_t)C * sizeof(real) >= NT_MIN_BYTES;
}

static inline int par_ok(int B, int C) {
    return (size_t)B * (size_t)C >= PAR_MIN;
}

/* Per-thread partials of dg and db for the row-parallel backward kernels: each group of
 * PG_ROWS consecutive rows of a thread is summed in the working precision, in row order (the
 * first row's products assigned, the others added), and the group's sums are added to the
 * thread's double partials; the partials are summed in thread order. (Value by value in double,
 * converting every product and the double accumulators' loads and stores cost the row-wise
 * backward kernels half their speed at 65,536 x 1,024: docs/numerics.md#reductions.) */
#define PG_ROWS 8
typedef struct partials {
    double *buf; /* (T, 2, C): dg partial then db partial per thread; NULL when not wanted */
    real *grp;   /* (T, 2, C): the current group's dg and db sums per thread */
    int T;       /* threads the parallel region may use */
} partials;

static void partials_init(partials *p, int want, int par, int C) {
    p->buf = NULL;
    p->grp = NULL;
    p->T = par ? omp_get_max_threads() : 1;
    if (!want) return;
    p->buf = calloc((size_t)p->T * 2 * (size_t)C, sizeof(double));
    p->grp = malloc((size_t)p->T * 2 * (size_t)C * sizeof(real));
    if (!p->buf || !p->grp) { /* out of memory: serial, gradients summed by the caller's fallback */
        free(p->buf);
        free(p->grp);
        p->buf = NULL;
        p->grp = NULL;
        p->T = 1;
    }
}

static void partials_free(partials *p) {
    free(p->buf);
    free(p->grp);
}

/* pg/pb += the group sums fg/fb (C values each). */
static inline void partials_flush(double *restrict pg, double *restrict pb, const real *fg,
                                  const real *fb, int C) {
#pragma omp simd
    for (int i = 0; i < C; i++) {
        pg[i] += (double)fg[i];
        pb[i] += (double)fb[i];
    }
}

/* Inside a parallel region after each thread filled its partials: dg/db += the thread-ordered
 * sums. Contains a barrier and a worksharing loop, so every thread of the team must call it. */
static void partials_reduce(const partials *p, real *dg, real *db, int C, int nt) {
#pragma omp barrier
#pragma omp for schedule(static)
    for (int c = 0; c < C; c++) {
        double sg = 0, sb = 0;
        for (int t = 0; t < nt; t++) {
            sg += p->buf[(size_t)t * 2 * C + c];
            sb += p->buf[(size_t)t * 2 * C + C + c];
        }
        if (dg) dg[c] += (real)sg;
        if (db) db[c] += (real)sb;
    }
}

/* Reductions over n values with four independent vector accumulators (one per quarter of the
 * span): one accumulator chains every add through the adder's latency, which caps a
 * memory-speed row pass at about half of what the memory system delivers here. The
 * accumulators are explicit 64-byte vectors (GCC's vector extension: AVX-512 registers here,
 * two AVX2 registers elsewhere), each quarter a multiple of NB_VL values; lane j of quarter a
 * sums the values a q + j + k NB_VL. At the end the four are added as vectors, (v0 + v1) +
 * (v2 + v3), the lanes by halving (lane i + lane i + w for w = NB_VL/2, ..., 1). Of the last
 * n mod 4 NB_VL values, whole vectors go into v0 after the quarters, the rest (fewer than
 * NB_VL) in order into a scalar added last. (omp simd's own reduction finished
 * each accumulator through the stack, lane by lane: on a 1,000-value row that cost as much as
 * the row's loads.) */
#define NB_VL (64 / (int)sizeof(real))
typedef real vreal __attribute__((vector_size(64)));

static inline vreal vload(const real *p) {
    vreal v;
    memcpy(&v, p, sizeof v);
    return v;
}

#if HAVE_NT
/* Stores v at p (64-byte aligned) with streaming stores. */
static inline void vstream(real *p, vreal v) {
#if defined(__AVX512F__) && defined(NB_F64)
    _mm512_stream_pd(p, (__m512d)v);
#elif defined(__AVX512F__)
    _mm512_stream_ps(p, (__m512)v);
#else
    real h[NB_VL];
    memcpy(h, &v, sizeof v);
#if defined(NB_F64)
    _mm256_stream_pd(p, _mm256_loadu_pd(h));
    _mm256_stream_pd(p + NB_VL / 2, _mm256_loadu_pd(h + NB_VL / 2));
#else
    _mm256_stream_ps(p, _mm256_loadu_ps(h));
    _mm256_stream_ps(p + NB_VL / 2, _mm256_loadu_ps(h + NB_VL / 2));
#endif
#endif
}
#endif

static inline real vhsum(vreal v) {
    real b[NB_VL];
    memcpy(b, &v, sizeof v);
    for (int w = NB_VL / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            b[i] += b[i + w];
    return b[0];
}

#define QUARTER_REDUCE(VEXPR, EXPR)                                                                \
    const int q = n / (4 * NB_VL) * NB_VL;                                                         \
    vreal v0 = {0}, v1 = {0}, v2 = {0}, v3 = {0};                                                  \
    for (int i = 0; i < q; i += NB_VL) {                                                           \
        v0 += VEXPR(i);                                                                            \
        v1 += VEXPR(i + q);                                                                        \
        v2 += VEXPR(i + 2 * q);                                                                    \
        v3 += VEXPR(i + 3 * q);                                                                    \
    }                                                                                              \
    int i_ = 4 * q;                                                                                \
    for (; i_ + NB_VL <= n; i_ += NB_VL)                                                           \
        v0 += VEXPR(i_);                                                                           \
    real t = 0;                                                                                    \
    for (; i_ < n; i_++)                                                                           \
        t += EXPR(i_);                                                                             \
    return vhsum((v0 + v1) + (v2 + v3)) + t

static inline real red_sum(const real *x, int n) {
#define V_SUM(i) vload(x + (i))
#define E_SUM(i) x[i]
    QUARTER_REDUCE(V_SUM, E_SUM);
#undef V_SUM
#undef E_SUM
}

static inline real red_sumsq(const real *x, int n) {
#define V_SQ(i) (vload(x + (i)) * vload(x + (i)))
#define E_SQ(i) (x[i] * x[i])
    QUARTER_REDUCE(V_SQ, E_SQ);
#undef V_SQ
#undef E_SQ
}

static inline real red_sumsqdev(const real *x, real mu, int n) {
#define V_DEV(i) ((vload(x + (i)) - mu) * (vload(x + (i)) - mu))
#define E_DEV(i) ((x[i] - mu) * (x[i] - mu))
    QUARTER_REDUCE(V_DEV, E_DEV);
#undef V_DEV
#undef E_DEV
}

/* y[i] = g[i] ((x[i] - mu) r) + b[i] over n values (b may be NULL). */
static inline void affine_span(real *y, const real *x, const real *g, const real *b, real mu,
                               real r, int n) {
    if (b) {
#pragma omp simd
        for (int i = 0; i < n; i++)
            y[i] = g[i] * ((x[i] - mu) * r) + b[i];
    } else {
#pragma omp simd
        for (int i = 0; i < n; i++)
            y[i] = g[i] * ((x[i] - mu) * r);
    }
}

/* affine_span over a row of C values, streamed out through an L1 buffer when nt; next (the
 * row processed after this one, or NULL) is then prefetched: without it the row's first pass
 * waits on memory while nothing is written, and streaming forward reached ~0.7 of a streaming
 * copy instead of ~0.9. */
static inline void affine_row(real *out, const real *x, const real *g, const real *b, real mu,
                              real r, int C, int nt, const real *next) {
    if (!nt) {
        affine_span(out, x, g, b, mu, r, C);
        return;
    }
#if HAVE_NT
    if (((uintptr_t)out & 63) == 0) { /* straight from registers, one line at a time */
        int c = 0;
        for (; c + NB_VL <= C; c += NB_VL) {
            if (next) __builtin_prefetch(next + c, 0, 3);
            vreal y = vload(g + c) * ((vload(x + c) - mu) * r);
            if (b) y += vload(b + c);
            vstream(out + c, y);
        }
        for (; c < C; c++)
            out[c] = b ? g[c] * ((x[c] - mu) * r) + b[c] : g[c] * ((x[c] - mu) * r);
        return;
    }
#endif
    _Alignas(64) real tmp[NT_CHUNK];
    for (int c0 = 0; c0 < C; c0 += NT_CHUNK) {
        int n = C - c0 < NT_CHUNK ? C - c0 : NT_CHUNK;
        /* the next row: its reads from memory overlap these streaming writes */
        if (next)
            for (int i = 0; i < n; i += 64 / (int)sizeof(real))
                __builtin_prefetch(next + c0 + i, 0, 3);
        affine_span(tmp, x + c0, g + c0, b ? b + c0 : NULL, mu, r, n);
        nt_copy(out + c0, tmp, n);
    }
}

/* ---- LayerNorm ------------------------------------------------------------------------------ */

static inline void ln_fwd_row(real *out, real *mean, real *rstd, const real *x, const real *g,
                              const real *b, int C, const nb_norm_cfg *cfg, int nt,
                              const real *next) {
    const real mu = (real)((double)red_sum(x, C) / C);
    const real v = red_sumsqdev(x, mu, C);
    const real r = (real)rstd_of((double)v / C, cfg);
    *mean = mu;
    *rstd = r;
    affine_row(out, x, g, b, mu, r, C, nt, next);
}

void nb_layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *g,
                          const real *b, int B, int C, const nb_norm_cfg *cfg) {
    const int nt = use_nt(B, C);
#pragma omp parallel if (par_ok(B, C))
    {
#pragma omp for schedule(static)
        for (int row = 0; row < B; row++) {
            size_t o = (size_t)row * C;
            ln_fwd_row(out + o, mean + row, rstd + row, inp + o, g, b, C, cfg, nt,
                       row + 1 < B ? inp + o + C : NULL);
        }
        if (nt) nt_fence();
    }
}

/* LayerNorm backward's row sums: *sg = sum g dy, *sgx = sum g dy (x - mu) and, when sxx is
 * not NULL, *sxx = sum (x - mu)^2, with two explicit vector accumulators each (even and odd
 * vectors of the row, added at the end; the last C mod NB_VL values in order into a scalar).
 * With fg (and fb), the same pass assigns (first) or adds the row's dy ((x - mu) r) and dy to
 * them: x and dy are loaded once for both. */
#define LN_GB(i)                                                                                   \
    do {                                                                                           \
        const vreal y_ = vload(dy + (i)), p_ = y_ * ((vload(x + (i)) - mu) * r);                   \
        vreal g_ = p_, b_ = y_;                                                                    \
        if (!first) {                                                                              \
            g_ = vload(fg + (i)) + p_;                                                             \
            b_ = vload(fb + (i)) + y_;                                                             \
        }                                                                                          \
        memcpy(fg + (i), &g_, sizeof g_);                                                          \
        memcpy(fb + (i), &b_, sizeof b_);                                                          \
    } while (0)
static inline void ln_bwd_sums(real *sg, real *sgx, real *sxx, const real *dy, const real *x,
                               const real *g, real mu, real r, real *restrict fg, real *restrict fb,
                               int first, int C) {
    vreal a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, c0 = {0}, c1 = {0};
    int i = 0;
    for (; i + 2 * NB_VL <= C; i += 2 * NB_VL) {
        const vreal gd0 = vload(g + i) * vload(dy + i), d0 = vload(x + i) - mu;
        const vreal gd1 = vload(g + i + NB_VL) * vload(dy + i + NB_VL);
        const vreal d1 = vload(x + i + NB_VL) - mu;
        a0 += gd0;
        a1 += gd1;
        b0 += gd0 * d0;
        b1 += gd1 * d1;
        if (sxx) {
            c0 += d0 * d0;
            c1 += d1 * d1;
        }
        if (fg) {
            LN_GB(i);
            LN_GB(i + NB_VL);
        }
    }
    for (; i + NB_VL <= C; i += NB_VL) {
        const vreal gd0 = vload(g + i) * vload(dy + i), d0 = vload(x + i) - mu;
        a0 += gd0;
        b0 += gd0 * d0;
        if (sxx) c0 += d0 * d0;
        if (fg) LN_GB(i);
    }
    real ta = 0, tb = 0, tc = 0;
    for (; i < C; i++) {
        const real gd = g[i] * dy[i], d = x[i] - mu;
        ta += gd;
        tb += gd * d;
        tc += d * d;
        if (fg) {
            const real p = dy[i] * ((x[i] - mu) * r);
            fg[i] = first ? p : fg[i] + p;
            fb[i] = first ? dy[i] : fb[i] + dy[i];
        }
    }
    *sg = vhsum(a0 + a1) + ta;
    *sgx = vhsum(b0 + b1) + tb;
    if (sxx) *sxx = vhsum(c0 + c1) + tc;
}
#undef LN_GB

/* dx_i += r (dg_i - mean(dg)) + (x_i - mu) coef sum_j dg_j (x_j - mu), dg = g*dy; with fg
 * (and fb), the row's dy * xhat and dy are assigned to fg and fb (first) or added to them. */
static inline void ln_bwd_row(real *dx, real *fg, real *fb, int first, const real *dy,
                              const real *x, const real *g, real mu, real r, int C,
                              const nb_norm_cfg *cfg, int set) {
    real sg, sgx, sxx = 0;
    ln_bwd_sums(&sg, &sgx, cfg->eps_outside ? &sxx : NULL, dy, x, g, mu, r, fg, fb, first, C);
    const real mg = (real)((double)sg / C);
    const real k = (real)(rstd_coef(r, (double)sxx / C, C, cfg) * (double)sgx);
    if (set) { /* dx is written, not read */
#pragma omp simd
        for (int i = 0; i < C; i++)
            dx[i] = r * (g[i] * dy[i] - mg) + (x[i] - mu) * k;
        return;
    }
#pragma omp simd
    for (int i = 0; i < C; i++)
        dx[i] += r * (g[i] * dy[i] - mg) + (x[i] - mu) * k;
}

static void ln_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                        const real *g, const real *mean, const real *rstd, int B, int C,
                        const nb_norm_cfg *cfg, int set) {
    partials p;
    int par = par_ok(B, C);
    partials_init(&p, dg || db, par, C);
#pragma omp parallel if (par && p.T > 1) num_threads(p.T)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int r0 = (int)((long long)B * t / nt), r1 = (int)((long long)B * (t + 1) / nt);
        double *pg = p.buf ? p.buf + (size_t)t * 2 * C : NULL;
        real *fg = p.buf ? p.grp + (size_t)t * 2 * C : NULL;
        for (int row = r0; row < r1; row++) {
            size_t o = (size_t)row * C;
            const int j = (row - r0) % PG_ROWS;
            ln_bwd_row(dinp + o, fg, fg ? fg + C : NULL, j == 0, dout + o, inp + o, g, mean[row],
                       rstd[row], C, cfg, set);
            if (fg && (j == PG_ROWS - 1 || row == r1 - 1))
                partials_flush(pg, pg + C, fg, fg + C, C);
        }
        if (p.buf) partials_reduce(&p, dg, db, C, nt);
    }
    if (!p.buf && (dg || db)) { /* out of memory for the partials: serial column sums */
        for (int c = 0; c < C; c++) {
            double sg = 0, sb = 0;
            for (int row = 0; row < B; row++) {
                size_t o = (size_t)row * C + c;
                sg += (double)dout[o] * (double)((inp[o] - mean[row]) * rstd[row]);
                sb += (double)dout[o];
            }
            if (dg) dg[c] += (real)sg;
            if (db) db[c] += (real)sb;
        }
    }
    partials_free(&p);
}

void nb_layernorm_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                           const real *g, const real *mean, const real *rstd, int B, int C,
                           const nb_norm_cfg *cfg) {
    ln_backward(dinp, dg, db, dout, inp, g, mean, rstd, B, C, cfg, 0);
}

void nb_layernorm_backward_set(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                               const real *g, const real *mean, const real *rstd, int B, int C,
                               const nb_norm_cfg *cfg) {
    ln_backward(dinp, dg, db, dout, inp, g, mean, rstd, B, C, cfg, 1);
}

/* ---- RMSNorm / pRMSNorm --------------------------------------------------------------------- */

static inline void rms_fwd_row(real *out, real *rstd, const real *x, const real *g, const real *b,
                               int C, int k, const nb_norm_cfg *cfg, int nt, const real *next) {
    const real s = red_sumsq(x, k);
    const real r = (real)rstd_of((double)s / k, cfg);
    *rstd = r;
    affine_row(out, x, g, b, 0, r, C, nt, next); /* x - 0 == x exactly */
}

/* k outside [1, C] is clamped, as nb_prms_k() would. */
static inline int clamp_k(int k, int C) {
    return k < 1 ? 1 : (k > C ? C : k);
}

void nb_rmsnorm_forward(real *out, real *rstd, const real *inp, const real *g, const real *b, int B,
                        int C, int k, const nb_norm_cfg *cfg) {
    const int nt = use_nt(B, C);
    k = clamp_k(k, C);
#pragma omp parallel if (par_ok(B, C))
    {
#pragma omp for schedule(static)
        for (int row = 0; row < B; row++) {
            size_t o = (size_t)row * C;
            rms_fwd_row(out + o, rstd + row, inp + o, g, b, C, k, cfg, nt,
                        row + 1 < B ? inp + o + C : NULL);
        }
        if (nt) nt_fence();
    }
}

/* dx_i += r dg_i + [i<k] x_i coef sum_{all j} dg_j x_j, dg = g*dy; with fg (and fb), the
 * row's dy x r and dy are assigned to fg and fb (first) or added to them. */
static inline void rms_bwd_row(real *dx, real *fg, real *fb, int first, const real *dy,
                               const real *x, const real *g, real r, int C, int k,
                               const nb_norm_cfg *cfg, int set) {
    real sgx = 0, sxx = 0;
    if (fg && first) { /* the group sums in the same pass: x and dy loaded once */
#pragma omp simd reduction(+ : sgx)
        for (int i = 0; i < C; i++) {
            sgx += g[i] * dy[i] * x[i];
            fg[i] = dy[i] * (x[i] * r);
            fb[i] = dy[i];
        }
    } else if (fg) {
#pragma omp simd reduction(+ : sgx)
        for (int i = 0; i < C; i++) {
            sgx += g[i] * dy[i] * x[i];
            fg[i] += dy[i] * (x[i] * r);
            fb[i] += dy[i];
        }
    } else {
#pragma omp simd reduction(+ : sgx)
        for (int i = 0; i < C; i++)
            sgx += g[i] * dy[i] * x[i];
    }
    if (cfg->eps_outside) {
#pragma omp simd reduction(+ : sxx)
        for (int i = 0; i < k; i++)
            sxx += x[i] * x[i];
    }
    const real kc = (real)(rstd_coef(r, (double)sxx / k, k, cfg) * (double)sgx);
    if (set) { /* dx is written, not read */
#pragma omp simd
        for (int i = 0; i < k; i++)
            dx[i] = r * (g[i] * dy[i]) + x[i] * kc;
#pragma omp simd
        for (int i = k; i < C; i++)
            dx[i] = r * (g[i] * dy[i]);
        return;
    }
#pragma omp simd
    for (int i = 0; i < k; i++)
        dx[i] += r * (g[i] * dy[i]) + x[i] * kc;
#pragma omp simd
    for (int i = k; i < C; i++)
        dx[i] += r * (g[i] * dy[i]);
}

static void rms_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                         const real *g, const real *rstd, int B, int C, int k,
                         const nb_norm_cfg *cfg, int set) {
    partials p;
    int par = par_ok(B, C);
    k = clamp_k(k, C);
    partials_init(&p, dg || db, par, C);
#pragma omp parallel if (par && p.T > 1) num_threads(p.T)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int r0 = (int)((long long)B * t / nt), r1 = (int)((long long)B * (t + 1) / nt);
        double *pg = p.buf ? p.buf + (size_t)t * 2 * C : NULL;
        real *fg = p.buf ? p.grp + (size_t)t * 2 * C : NULL;
        for (int row = r0; row < r1; row++) {
            size_t o = (size_t)row * C;
            const int j = (row - r0) % PG_ROWS;
            rms_bwd_row(dinp + o, fg, fg ? fg + C : NULL, j == 0, dout + o, inp + o, g, rstd[row],
                        C, k, cfg, set);
            if (fg && (j == PG_ROWS - 1 || row == r1 - 1))
                partials_flush(pg, pg + C, fg, fg + C, C);
        }
        if (p.buf) partials_reduce(&p, dg, db, C, nt);
    }
    if (!p.buf && (dg || db)) { /* out of memory for the partials: serial column sums */
        for (int c = 0; c < C; c++) {
            double sg = 0, sb = 0;
            for (int row = 0; row < B; row++) {
                size_t o = (size_t)row * C + c;
                sg += (double)dout[o] * (double)(inp[o] * rstd[row]);
                sb += (double)dout[o];
            }
            if (dg) dg[c] += (real)sg;
            if (db) db[c] += (real)sb;
        }
    }
    partials_free(&p);
}

void nb_rmsnorm_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                         const real *g, const real *rstd, int B, int C, int k,
                         const nb_norm_cfg *cfg) {
    rms_backward(dinp, dg, db, dout, inp, g, rstd, B, C, k, cfg, 0);
}

void nb_rmsnorm_backward_set(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                             const real *g, const real *rstd, int B, int C, int k,
                             const nb_norm_cfg *cfg) {
    rms_backward(dinp, dg, db, dout, inp, g, rstd, B, C, k, cfg, 1);
}

/* ---- BatchNorm ------------------------------------------------------------------------------ */

/* Number of BN_CB-column blocks covering C. */
static inline int bn_blocks(int C) {
    return (C + BN_CB - 1) / BN_CB;
}

/* r[c] = rstd_of(m[c]) for c < n, in one vectorized loop (the same expression as rstd_of, so
 * the same values: IEEE sqrt and division are correctly rounded in every lane): a scalar sqrt
 * and division per column cost a tenth of BatchNorm's forward at 128 x 1,000. With AVX-512
 * the lanes are written out with intrinsics: GCC does not vectorize sqrt while it may have to
 * set errno (the optimize("no-math-errno") attribute tried before was dropped from the
 * function's clone, and its loop stayed scalar). */
static void rstd_array(real *r, const double *m, int n, const nb_norm_cfg *cfg) {
    const double eps = cfg->eps;
    int c = 0;
#if defined(__AVX512F__)
    const __m512d one = _mm512_set1_pd(1.0), ve = _mm512_set1_pd(eps);
    for (; c + 8 <= n; c += 8) {
        const __m512d v = _mm512_loadu_pd(m + c);
        const __m512d d = cfg->eps_outside ? _mm512_add_pd(_mm512_sqrt_pd(v), ve)
                                           : _mm512_sqrt_pd(_mm512_add_pd(v, ve));
        const __m512d q = _mm512_div_pd(one, d);
#if defined(NB_F64)
        _mm512_storeu_pd(r + c, q);
#else
        _mm256_storeu_ps(r + c, _mm512_cvtpd_ps(q));
#endif
    }
#endif
    for (; c < n; c++)
        r[c] = (real)(cfg->eps_outside ? 1.0 / (sqrt(m[c]) + eps) : 1.0 / sqrt(m[c] + eps));
}

/* Column sums for the column-block kernels, over rows [0, B) of a strip of w <= BN_CB columns
 * (row stride ld): each group of 8 rows summed in the working precision by a fixed tree,
 * ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), the group's sum added to a double
 * accumulator; the last B mod 8 rows added to it one by one. (Value by value in double, the
 * conversion of every value cost more than the whole of LayerNorm at 128 x 1,000.) */
#define BN_G8(E) (((E(0) + E(1)) + (E(2) + E(3))) + ((E(4) + E(5)) + (E(6) + E(7))))

/* e += sum of (x - mf), v += sum of (x - mf)^2. */
static inline void bn_colsums(double *restrict e, double *restrict v, const real *x, size_t ld,
                              const real *mf, int B, int w) {
    int row = 0;
    for (; row + 8 <= B; row += 8) {
        const real *x0 = x + (size_t)row * ld;
#define E_D(k) (x0[(size_t)(k)*ld + c] - mf[c])
#define E_D2(k) (E_D(k) * E_D(k))
#pragma omp simd
        for (int c = 0; c < w; c++) {
            e[c] += (double)BN_G8(E_D);
            v[c] += (double)BN_G8(E_D2);
        }
#undef E_D
#undef E_D2
    }
    for (; row < B; row++) {
        const real *xr = x + (size_t)row * ld;
#pragma omp simd
        for (int c = 0; c < w; c++) {
            const real d = xr[c] - mf[c];
            e[c] += (double)d;
            v[c] += (double)(d * d);
        }
    }
}

/* The column-block kernels (up to BN_COLS_MAX_BYTES per block column: small batches): each
 * block of BN_CB columns down all rows, owned by one thread, its passes in cache.
 * Statistics in one pass (bn_colsums with a shift): K = the mean of the block's first 8 rows
 * rounded to real, e = sum (x - K) and v = sum (x - K)^2; mean = K + e/B in double and the
 * variance (v - e^2/B)/B, the shifted sums' formula: with K within a fraction of a standard
 * deviation of the mean, the subtraction cancels almost nothing. (Two passes, the sums and then
 * the deviations from the mean, cost BatchNorm a fifth of its speed at 128 x 1,000.) */
/* The statistics of one block of columns [c0, c0 + w) of bn_fwd_cols; inlined twice, so that
 * full blocks run with the constant width BN_CB. */
static inline __attribute__((always_inline)) void
bn_fwd_block(real *mean, real *rstd, real *running_mean, real *running_var, const real *inp, int B,
             int C, int training, const nb_norm_cfg *cfg, int c0, int w) {
    if (training) {
        double s[BN_CB], e[BN_CB], v[BN_CB];
        memset(s, 0, sizeof s);
        memset(e, 0, sizeof e);
        memset(v, 0, sizeof v);
        /* the shift: the mean of the first 8 rows (or of the first row), in real */
        real K[BN_CB];
        const real *x0 = inp + c0;
        if (B >= 8) {
#define E_X(k) x0[(size_t)(k)*C + c]
#pragma omp simd
            for (int c = 0; c < w; c++)
                K[c] = BN_G8(E_X) / 8;
#undef E_X
        } else {
            for (int c = 0; c < w; c++)
                K[c] = x0[c];
        }
        bn_colsums(e, v, x0, (size_t)C, K, B, w);
        const double nb = B, unb = B > 1 ? nb / (B - 1) : 1.0, mom = cfg->bn_momentum;
        double var[BN_CB], m[BN_CB];
#pragma omp simd
        for (int c = 0; c < w; c++) {
            s[c] = (double)K[c] + e[c] / nb; /* the mean */
            mean[c0 + c] = (real)s[c];
            const double vb = (v[c] - e[c] * e[c] / nb) / nb; /* biased */
            var[c] = vb > 0 ? vb : 0;
            m[c] = cfg->bn_unbiased_batch ? var[c] * unb : var[c];
        }
        rstd_array(rstd + c0, m, w, cfg);
        if (running_mean) {
#pragma omp simd
            for (int c = 0; c < w; c++)
                running_mean[c0 + c] =
                    (real)((1 - mom) * (double)running_mean[c0 + c] + mom * s[c]);
        }
        if (running_var) {
#pragma omp simd
            for (int c = 0; c < w; c++)
                running_var[c0 + c] =
                    (real)((1 - mom) * (double)running_var[c0 + c] +
                           mom * (cfg->bn_unbiased_running ? var[c] * unb : var[c]));
        }
    } else {
        for (int c = 0; c < w; c++) {
            mean[c0 + c] = running_mean ? running_mean[c0 + c] : 0;
            rstd[c0 + c] = (real)rstd_of(running_var ? (double)running_var[c0 + c] : 1.0, cfg);
        }
    }
}

/* y = g (x - mean) rstd + b, row by row: long contiguous loops, the C statistics and gains in
 * L1. */
static void bn_normalize(real *out, const real *inp, const real *g, const real *b, const real *mean,
                         const real *rstd, int B, int C) {
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int row = 0; row < B; row++) {
        const real *x = inp + (size_t)row * C;
        real *y = out + (size_t)row * C;
        if (b) {
#pragma omp simd
            for (int c = 0; c < C; c++)
                y[c] = g[c] * ((x[c] - mean[c]) * rstd[c]) + b[c];
        } else {
#pragma omp simd
            for (int c = 0; c < C; c++)
                y[c] = g[c] * ((x[c] - mean[c]) * rstd[c]);
        }
    }
}

/* y = g ((x - mean) rstd) + b on the block of columns [c0, c0 + w), right after its
 * statistics: the block's rows are still in cache (at 128 x 1,000 a block is 32 KiB), so x is
 * read from memory once, not twice as by a pass over the whole matrix after the statistics.
 * A full block keeps its gains, means, rstds and biases in registers (BN_CB / NB_VL vectors of
 * each), the same expression as bn_normalize's, value for value. */
#define BN_NV (BN_CB / NB_VL)
static inline void bn_apply_row(real *out, const real *x, const real *g, const real *b,
                                const real *mu, const real *r, int C, int nt);
static void bn_normalize_block(real *out, const real *inp, const real *g, const real *b,
                               const real *mean, const real *rstd, int B, int C, int c0, int w) {
    if (w == BN_CB) {
        vreal G[BN_NV], M[BN_NV], R[BN_NV], Z[BN_NV];
#pragma GCC unroll 8
        for (int k = 0; k < BN_NV; k++) {
            G[k] = vload(g + c0 + k * NB_VL);
            M[k] = vload(mean + c0 + k * NB_VL);
            R[k] = vload(rstd + c0 + k * NB_VL);
            Z[k] = b ? vload(b + c0 + k * NB_VL) : (vreal){0};
        }
        for (int row = B - 1; row >= 0; row--) {
            const real *x = inp + (size_t)row * C + c0;
            real *y = out + (size_t)row * C + c0;
#pragma GCC unroll 8
            for (int k = 0; k < BN_NV; k++) {
                vreal v = G[k] * ((vload(x + k * NB_VL) - M[k]) * R[k]);
                if (b) v += Z[k];
                memcpy(y + k * NB_VL, &v, sizeof v);
            }
        }
        return;
    }
    for (int row = 0; row < B; row++) /* a partial block: the row kernel on its w columns */
        bn_apply_row(out + (size_t)row * C + c0, inp + (size_t)row * C + c0, g + c0,
                     b ? b + c0 : NULL, mean + c0, rstd + c0, w, 0);
}

static void bn_fwd_cols(real *out, real *mean, real *rstd, real *running_mean, real *running_var,
                        const real *inp, const real *g, const real *b, int B, int C, int training,
                        const nb_norm_cfg *cfg) {
    const int nblk = bn_blocks(C);
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * BN_CB;
        if (C - c0 >= BN_CB)
            bn_fwd_block(mean, rstd, running_mean, running_var, inp, B, C, training, cfg, c0,
                         BN_CB);
        else
            bn_fwd_block(mean, rstd, running_mean, running_var, inp, B, C, training, cfg, c0,
                         C - c0);
        bn_normalize_block(out, inp, g, b, mean, rstd, B, C, c0, C - c0 < BN_CB ? C - c0 : BN_CB);
    }
}

/* dx (+)= A dy + K (x - mu) + M over n columns: added to dx, or with set written (dx not read). */
static inline void bn_dx_span(real *restrict dx, const real *dy, const real *x, const real *A,
                              const real *K, const real *M, const real *mu, int n, int set) {
    if (set) {
#pragma omp simd
        for (int c = 0; c < n; c++)
            dx[c] = A[c] * dy[c] + K[c] * (x[c] - mu[c]) + M[c];
    } else {
#pragma omp simd
        for (int c = 0; c < n; c++)
            dx[c] += A[c] * dy[c] + K[c] * (x[c] - mu[c]) + M[c];
    }
}

static void bn_bwd_cols(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                        const real *g, const real *mean, const real *rstd, int B, int C,
                        int training, const nb_norm_cfg *cfg, int set) {
    const int nblk = bn_blocks(C);
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * BN_CB, w = C - c0 < BN_CB ? C - c0 : BN_CB;
        const real *mu = mean + c0, *r = rstd + c0, *gg = g + c0;
        double sy[BN_CB], syx[BN_CB], sxx[BN_CB];
        memset(sy, 0, sizeof sy);
        memset(syx, 0, sizeof syx);
        memset(sxx, 0, sizeof sxx);
        const int need_sxx = training && cfg->eps_outside;
        /* the backward sums as bn_colsums: groups of 8 rows in real, added in double */
        int row = 0;
        for (; row + 8 <= B; row += 8) {
            const real *x0 = inp + (size_t)row * C + c0, *y0 = dout + (size_t)row * C + c0;
#define E_Y(k) y0[(size_t)(k)*C + c]
#define E_YD(k) (y0[(size_t)(k)*C + c] * (x0[(size_t)(k)*C + c] - mu[c]))
#define E_D2(k) ((x0[(size_t)(k)*C + c] - mu[c]) * (x0[(size_t)(k)*C + c] - mu[c]))
#pragma omp simd
            for (int c = 0; c < w; c++) {
                sy[c] += (double)BN_G8(E_Y);
                syx[c] += (double)BN_G8(E_YD);
            }
            if (need_sxx) {
#pragma omp simd
                for (int c = 0; c < w; c++)
                    sxx[c] += (double)BN_G8(E_D2);
            }
#undef E_Y
#undef E_YD
#undef E_D2
        }
        for (; row < B; row++) {
            const real *x = inp + (size_t)row * C + c0, *dy = dout + (size_t)row * C + c0;
#pragma omp simd
            for (int c = 0; c < w; c++) {
                sy[c] += (double)dy[c];
                syx[c] += (double)(dy[c] * (x[c] - mu[c]));
            }
            if (need_sxx) {
#pragma omp simd
                for (int c = 0; c < w; c++)
                    sxx[c] += (double)((x[c] - mu[c]) * (x[c] - mu[c]));
            }
        }
        /* per column: dx = A*dy + K*(x - mu) + M */
        real A[BN_CB], K[BN_CB], M[BN_CB];
        const double nb = B, D = cfg->bn_unbiased_batch && B > 1 ? nb - 1 : nb;
        for (int c = 0; c < w; c++) {
            double rc = r[c], gc = gg[c];
            if (dg) dg[c0 + c] += (real)(rc * syx[c]);
            if (db) db[c0 + c] += (real)sy[c];
            A[c] = (real)(gc * rc);
            if (training) {
                K[c] = (real)(rstd_coef(rc, sxx[c] / D, D, cfg) * gc * syx[c]);
                M[c] = (real)(-gc * rc * sy[c] / nb);
            } else {
                K[c] = 0;
                M[c] = 0;
            }
        }
        for (row = 0; row < B; row++) {
            const real *x = inp + (size_t)row * C + c0, *dy = dout + (size_t)row * C + c0;
            bn_dx_span(dinp + (size_t)row * C + c0, dy, x, A, K, M, mu, w, set);
        }
    }
}

/* BatchNorm on many rows: the column-block kernels above walk each 64-column block down all B
 * rows, a 256-byte read per 4 KB row stride that reaches an eighth of the memory bandwidth at
 * 65,536 x 1,024. Here the rows are cut into at most BN_NCH contiguous chunks (a cut that does
 * not depend on the thread count), each chunk read row by row, and the chunks' statistics are
 * merged in chunk order: the results are the same for any thread count.
 *
 * Forward statistics: within a chunk, sub-blocks of bn_sub_rows(C) rows (about BN_SUB_BYTES,
 * so the sub-block is still in L2 for its second pass) are two-pass in double (the sub-block's
 * column sums, its mean, then the squared deviations from that mean), and merged into the
 * chunk's (count, mean, sum of squared deviations) by Chan's update; the chunks are merged the
 * same way. x is read twice from memory (statistics, then normalization) instead of three
 * times. Backward sums (dy, dy (x - mu), (x - mu)^2) are plain double sums per chunk, added in
 * chunk order. */
#define BN_NCH 64
#define BN_SUB_BYTES (128u << 10)
#define BN_COLS_MAX_BYTES (256u << 10)

static inline int bn_sub_rows(int C) {
    size_t r = BN_SUB_BYTES / ((size_t)C * sizeof(real));
    return r < 4 ? 4 : (r > 256 ? 256 : (int)r);
}

/* Prefetches n values at p (the next row of a pass: hardware prefetchers stop at a page, and a
 * row of 1,024 floats is one page, so each row would otherwise start with a wait on memory). */
static inline void prefetch_span(const real *p, int n) {
    for (int i = 0; i < n; i += 64 / (int)sizeof(real))
        __builtin_prefetch(p + i, 0, 3);
}

/* Chunk k of nch covers rows [bn_row(k), bn_row(k + 1)): whole sub-blocks but the last. */
static inline int bn_row(int k, int nch, int B, int sub) {
    const int nsub = (B + sub - 1) / sub;
    const long long r = (long long)nsub * k / nch * sub;
    return r < B ? (int)r : B;
}

/* (n, m, q) <- (n, m, q) merged with (nb, mb, qb): count, mean and sum of squared deviations
 * per column (Chan, Golub and LeVeque's pairwise update). */
static inline void bn_merge(double *restrict m, double *restrict q, const double *restrict mb,
                            const double *restrict qb, double n, double nb, int C) {
    const double f = nb / (n + nb), h = n * nb / (n + nb);
#pragma omp simd
    for (int c = 0; c < C; c++) {
        const double d = mb[c] - m[c];
        m[c] += d * f;
        q[c] += qb[c] + d * d * h;
    }
}

/* The chunk's column mean cm and sum of squared deviations cq over rows [r0, r1), in one pass
 * over the rows, with shifted sums: K = the mean of the chunk's first 8 rows rounded to real
 * (the first row's values if the chunk has fewer), d = x - K in real, S = sum d and Q = sum d^2
 * in groups of 8 rows by the fixed tree added in double (the last rows one by one); mean =
 * K + S/n and M2 = Q - S^2/n. K is within a fraction of the column's spread of its mean, so the
 * subtraction cancels almost nothing (docs/numerics.md#batch). The groups take row i of each
 * eighth of the chunk: eight streams far apart read faster than neighbouring rows (each row is
 * a page). k: C reals of scratch. */
static void bn_chunk_stats(double *restrict cm, double *restrict cq, real *restrict k,
                           const real *inp, int r0, int r1, int C) {
    const real *xk = inp + (size_t)r0 * C;
    if (r1 - r0 >= 8) {
#define E_X(j) xk[(size_t)(j)*C + c]
#pragma omp simd
        for (int c = 0; c < C; c++)
            k[c] = BN_G8(E_X) / 8;
#undef E_X
    } else {
        memcpy(k, xk, sizeof(real) * (size_t)C);
    }
    memset(cm, 0, sizeof(double) * (size_t)C);
    memset(cq, 0, sizeof(double) * (size_t)C);
    const int L = (r1 - r0) / 8;
    const size_t LC = (size_t)L * C;
    for (int i = 0; i < L; i++) {
        const real *x0 = inp + (size_t)(r0 + i) * C;
#define E_D(j) (x0[(size_t)(j)*LC + c] - K)
#define E_D2(j) (E_D(j) * E_D(j))
#pragma omp simd
        for (int c = 0; c < C; c++) {
            const real K = k[c];
            cm[c] += (double)BN_G8(E_D);
            cq[c] += (double)BN_G8(E_D2);
        }
#undef E_D
#undef E_D2
    }
    for (int row = r0 + 8 * L; row < r1; row++) {
        const real *x = inp + (size_t)row * C;
#pragma omp simd
        for (int c = 0; c < C; c++) {
            const real d = x[c] - k[c];
            cm[c] += (double)d;
            cq[c] += (double)(d * d);
        }
    }
    const double n = r1 - r0;
#pragma omp simd
    for (int c = 0; c < C; c++) {
        const double S = cm[c], q = cq[c] - S * S / n;
        cm[c] = (double)k[c] + S / n;
        cq[c] = q > 0 ? q : 0;
    }
}

/* y = g ((x - mu) r) + b over one row, per column; streamed out through an L1 buffer when nt. */
static inline void bn_apply_row(real *out, const real *x, const real *g, const real *b,
                                const real *mu, const real *r, int C, int nt) {
#if HAVE_NT
    if (nt && ((uintptr_t)out & 63) == 0) { /* straight from registers: one vector a line */
        int c = 0;
        for (; c + NB_VL <= C; c += NB_VL) {
            vreal y = vload(g + c) * ((vload(x + c) - vload(mu + c)) * vload(r + c));
            if (b) y += vload(b + c);
            vstream(out + c, y);
        }
        for (; c < C; c++)
            out[c] = b ? g[c] * ((x[c] - mu[c]) * r[c]) + b[c] : g[c] * ((x[c] - mu[c]) * r[c]);
        return;
    }
#endif
    _Alignas(64) real tmp[NT_CHUNK];
    for (int c0 = 0; c0 < C; c0 += NT_CHUNK) {
        const int n = C - c0 < NT_CHUNK ? C - c0 : NT_CHUNK;
        real *y = nt ? tmp : out + c0;
        const real *xx = x + c0, *gg = g + c0, *mm = mu + c0, *rr = r + c0;
        if (b) {
            const real *bb = b + c0;
#pragma omp simd
            for (int c = 0; c < n; c++)
                y[c] = gg[c] * ((xx[c] - mm[c]) * rr[c]) + bb[c];
        } else {
#pragma omp simd
            for (int c = 0; c < n; c++)
                y[c] = gg[c] * ((xx[c] - mm[c]) * rr[c]);
        }
        if (nt) nt_copy(out + c0, tmp, n);
    }
}

/* This thread's share [*r0, *r1) of B rows. */
static inline void thread_rows(int B, int *r0, int *r1) {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    *r0 = (int)((long long)B * t / nt);
    *r1 = (int)((long long)B * (t + 1) / nt);
}

/* Whether BatchNorm on (B, C) takes the row-chunk kernels: when a column block down all the
 * rows no longer fits in L2 (up to 1,024 float rows the column blocks are faster: each block's
 * three passes stay in cache and no thread waits for another). */
static inline int bn_by_rows(int B, int C) {
    return (size_t)B * BN_CB * sizeof(real) > BN_COLS_MAX_BYTES && B >= 2 * bn_sub_rows(C);
}

static int bn_fwd_rows(real *out, real *mean, real *rstd, real *running_mean, real *running_var,
                       const real *inp, const real *g, const real *b, int B, int C, int training,
                       const nb_norm_cfg *cfg) {
    const int sub = bn_sub_rows(C), nsub = (B + sub - 1) / sub;
    const int nch = nsub < BN_NCH ? nsub : BN_NCH, par = par_ok(B, C);
    const int T = par ? omp_get_max_threads() : 1, nt = use_nt(B, C);
    double *st = NULL;
    real *ks = NULL; /* each thread's C shifts */
    if (training) {
        st = malloc(sizeof(double) * 2 * (size_t)C * (size_t)nch);
        ks = malloc(sizeof(real) * (size_t)C * (size_t)T);
        if (!st || !ks) {
            free(st);
            free(ks);
            return -1;
        }
    }
#pragma omp parallel if (par) num_threads(T)
    {
        if (training) {
            real *shift = ks + (size_t)C * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
            for (int k = 0; k < nch; k++) {
                double *cm = st + (size_t)2 * C * k;
                bn_chunk_stats(cm, cm + C, shift, inp, bn_row(k, nch, B, sub),
                               bn_row(k + 1, nch, B, sub), C);
            }
            /* the chunks merged in chunk order: count, mean and squared deviations */
#pragma omp single
            {
                double n = bn_row(1, nch, B, sub);
                for (int k = 1; k < nch; k++) {
                    const double nb = bn_row(k + 1, nch, B, sub) - bn_row(k, nch, B, sub);
                    const double *ck = st + (size_t)2 * C * k;
                    bn_merge(st, st + C, ck, ck + C, n, nb, C);
                    n += nb;
                }
                const double nb = B, unb = nb / (B - 1), mom = cfg->bn_momentum;
                for (int c = 0; c < C; c++) {
                    const double var = st[C + c] / nb; /* biased */
                    mean[c] = (real)st[c];
                    rstd[c] = (real)rstd_of(cfg->bn_unbiased_batch ? var * unb : var, cfg);
                    if (running_mean)
                        running_mean[c] = (real)((1 - mom) * (double)running_mean[c] + mom * st[c]);
                    if (running_var)
                        running_var[c] = (real)((1 - mom) * (double)running_var[c] +
                                                mom * (cfg->bn_unbiased_running ? var * unb : var));
                }
            }
        } else {
#pragma omp for schedule(static)
            for (int c = 0; c < C; c++) {
                mean[c] = running_mean ? running_mean[c] : 0;
                rstd[c] = (real)rstd_of(running_var ? (double)running_var[c] : 1.0, cfg);
            }
        }
        /* normalization: each thread its share of the rows, in ascending order (the last
         * rows first, for what the statistics pass left in cache, ran at two thirds of the
         * speed: descending addresses defeat the hardware prefetchers), without software
         * prefetches (with the next row's, 5-10% slower) */
        int r0, r1;
        thread_rows(B, &r0, &r1);
        for (int row = r0; row < r1; row++) {
            const size_t o = (size_t)row * C;
            bn_apply_row(out + o, inp + o, g, b, mean, rstd, C, nt);
        }
        if (nt) nt_fence();
    }
    free(st);
    free(ks);
    return 0;
}

/* dx += A dy + K (x - mu) + M over one row; with set, dx = that (dx not read), streamed past the
 * cache when nt and the row is 64-byte aligned. (Software prefetches of the next row made the
 * pass slower: a row's worth at once filled the miss buffers, one a line still cost 5-10%.) */
static inline void bn_dx_row(real *restrict dx, const real *dy, const real *x, const real *A,
                             const real *K, const real *M, const real *mu, int C, int set, int nt) {
    int c = 0;
    if (set) {
#if HAVE_NT
        if (nt && ((uintptr_t)dx & 63) == 0) {
            for (; c + NB_VL <= C; c += NB_VL)
                vstream(dx + c, vload(A + c) * vload(dy + c) +
                                    vload(K + c) * (vload(x + c) - vload(mu + c)) + vload(M + c));
            for (; c < C; c++)
                dx[c] = A[c] * dy[c] + K[c] * (x[c] - mu[c]) + M[c];
            return;
        }
#endif
        (void)nt;
        bn_dx_span(dx, dy, x, A, K, M, mu, C, 1);
        return;
    }
    for (; c + NB_VL <= C; c += NB_VL) {
        vreal v = vload(dx + c) + (vload(A + c) * vload(dy + c) +
                                   vload(K + c) * (vload(x + c) - vload(mu + c)) + vload(M + c));
        memcpy(dx + c, &v, sizeof v);
    }
    for (; c < C; c++)
        dx[c] += A[c] * dy[c] + K[c] * (x[c] - mu[c]) + M[c];
}

static int bn_bwd_rows(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                       const real *g, const real *mean, const real *rstd, int B, int C,
                       int training, const nb_norm_cfg *cfg, int set) {
    const int nt = set && use_nt(B, C);
    const int sub = bn_sub_rows(C), nsub = (B + sub - 1) / sub;
    const int nch = nsub < BN_NCH ? nsub : BN_NCH, par = par_ok(B, C);
    const int need_sxx = training && cfg->eps_outside;
    /* per chunk: sum dy, sum dy (x - mu), sum (x - mu)^2; then A, K, M per column */
    double *st = malloc(sizeof(double) * (size_t)C * 3 * (size_t)nch);
    real *A = malloc(sizeof(real) * 3 * (size_t)C);
    if (!st || !A) {
        free(st);
        free(A);
        return -1;
    }
    real *K = A + C, *M = K + C;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (int k = 0; k < nch; k++) {
            double *sy = st + (size_t)3 * C * k, *syx = sy + C, *sxx = syx + C;
            memset(sy, 0, sizeof(double) * 3 * (size_t)C);
            const int r1 = bn_row(k + 1, nch, B, sub);
            int row = bn_row(k, nch, B, sub);
            /* eight streams an eighth of the chunk apart, summed in real by the fixed tree and
             * added in double, as bn_chunk_stats; the last rows one by one */
            const int L = (r1 - row) / 8;
            const size_t LC = (size_t)L * C;
            for (int i = 0; i < L; i++, row++) {
                const real *x0 = inp + (size_t)row * C, *y0 = dout + (size_t)row * C;
#define E_Y(j) y0[(size_t)(j)*LC + c]
#define E_D(j) (x0[(size_t)(j)*LC + c] - mu)
#define E_YD(j) (E_Y(j) * E_D(j))
#define E_D2(j) (E_D(j) * E_D(j))
#pragma omp simd
                for (int c = 0; c < C; c++) {
                    const real mu = mean[c];
                    sy[c] += (double)BN_G8(E_Y);
                    syx[c] += (double)BN_G8(E_YD);
                }
                if (need_sxx) {
#pragma omp simd
                    for (int c = 0; c < C; c++) {
                        const real mu = mean[c];
                        sxx[c] += (double)BN_G8(E_D2);
                    }
                }
#undef E_Y
#undef E_D
#undef E_YD
#undef E_D2
            }
            for (row += 7 * L; row < r1; row++) {
                const real *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
#pragma omp simd
                for (int c = 0; c < C; c++) {
                    const real d = x[c] - mean[c];
                    sy[c] += (double)dy[c];
                    syx[c] += (double)(dy[c] * d);
                }
                if (need_sxx) {
#pragma omp simd
                    for (int c = 0; c < C; c++) {
                        const real d = x[c] - mean[c];
                        sxx[c] += (double)(d * d);
                    }
                }
            }
        }
#pragma omp for schedule(static)
        for (int c = 0; c < C; c++) {
            double sy = 0, syx = 0, sxx = 0;
            for (int k = 0; k < nch; k++) {
                const double *s = st + (size_t)3 * C * k;
                sy += s[c];
                syx += s[C + c];
                sxx += s[2 * C + c];
            }
            const double rc = rstd[c], gc = g[c], nb = B;
            const double D = cfg->bn_unbiased_batch && B > 1 ? nb - 1 : nb;
            if (dg) dg[c] += (real)(rc * syx);
            if (db) db[c] += (real)sy;
            A[c] = (real)(gc * rc);
            K[c] = training ? (real)(rstd_coef(rc, sxx / D, D, cfg) * gc * syx) : 0;
            M[c] = training ? (real)(-gc * rc * sy / nb) : 0;
        }
        int r0, r1;
        thread_rows(B, &r0, &r1);
        for (int row = r0; row < r1; row++) { /* ascending and unprefetched, as normalization */
            const real *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
            real *dx = dinp + (size_t)row * C;
            bn_dx_row(dx, dy, x, A, K, M, mean, C, set, nt);
        }
        if (nt) nt_fence();
    }
    free(st);
    free(A);
    return 0;
}

/* Training statistics over the global batch (cfg->bn_sum), in double as the single-process
 * statistics are taken: the per-feature sums with the row count summed over the processes give
 * the mean, then the squared deviations from it summed over the processes the variance. Fills
 * mean, rstd and the running averages. */
static void bn_sync_stats(real *mean, real *rstd, real *running_mean, real *running_var,
                          const real *inp, int B, int C, const nb_norm_cfg *cfg) {
    double *S = calloc((size_t)2 * C + 1, sizeof *S);
    if (!S) abort(); /* 2C+1 doubles: a model this size could not have been built */
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int c = 0; c < C; c++) {
        double s = 0;
        for (int row = 0; row < B; row++)
            s += (double)inp[(size_t)row * C + c];
        S[c] = s;
    }
    S[2 * C] = B;
    cfg->bn_sum(cfg->bn_ctx, S, C);
    cfg->bn_sum(cfg->bn_ctx, S + 2 * C, 1);
    const double nb = S[2 * C], unb = nb > 1 ? nb / (nb - 1) : 1.0, mom = cfg->bn_momentum;
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int c = 0; c < C; c++) {
        double mu = S[c] / nb, v = 0;
        for (int row = 0; row < B; row++) {
            double d = (double)inp[(size_t)row * C + c] - mu;
            v += d * d;
        }
        S[C + c] = v;
    }
    cfg->bn_sum(cfg->bn_ctx, S + C, C);
    for (int c = 0; c < C; c++) {
        double mu = S[c] / nb, var = S[C + c] / nb;
        mean[c] = (real)mu;
        rstd[c] = (real)rstd_of(cfg->bn_unbiased_batch ? var * unb : var, cfg);
        if (running_mean) running_mean[c] = (real)((1 - mom) * (double)running_mean[c] + mom * mu);
        if (running_var)
            running_var[c] = (real)((1 - mom) * (double)running_var[c] +
                                    mom * (cfg->bn_unbiased_running ? var * unb : var));
    }
    free(S);
}

/* Small batches (fewer than BN_EXACT_ROWS rows): every value summed in double, the variance
 * by the direct two-pass formula — the arithmetic of --bn-sync's statistics over the global
 * batch, so that a batch split over processes agrees with one process (the grouped float sums
 * below are the speed path of larger batches, where a rounding difference of ~1e-7 is all). */
enum { BN_EXACT_ROWS = 64 };

static void bn_fwd_exact(real *out, real *mean, real *rstd, real *running_mean, real *running_var,
                         const real *inp, const real *g, const real *b, int B, int C, int training,
                         const nb_norm_cfg *cfg) {
    const int nblk = bn_blocks(C);
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * BN_CB, w = C - c0 < BN_CB ? C - c0 : BN_CB;
        if (training) {
            double s[BN_CB], v[BN_CB];
            memset(s, 0, sizeof s);
            memset(v, 0, sizeof v);
            for (int row = 0; row < B; row++) {
                const real *x = inp + (size_t)row * C + c0;
#pragma omp simd
                for (int c = 0; c < w; c++)
                    s[c] += (double)x[c];
            }
            for (int c = 0; c < w; c++)
                s[c] /= B;
            for (int row = 0; row < B; row++) {
                const real *x = inp + (size_t)row * C + c0;
#pragma omp simd
                for (int c = 0; c < w; c++) {
                    double d = (double)x[c] - s[c];
                    v[c] += d * d;
                }
            }
            const double nb = B, unb = B > 1 ? nb / (B - 1) : 1.0, mom = cfg->bn_momentum;
            for (int c = 0; c < w; c++) {
                double var = v[c] / nb; /* biased */
                mean[c0 + c] = (real)s[c];
                rstd[c0 + c] = (real)rstd_of(cfg->bn_unbiased_batch ? var * unb : var, cfg);
                if (running_mean)
                    running_mean[c0 + c] =
                        (real)((1 - mom) * (double)running_mean[c0 + c] + mom * s[c]);
                if (running_var)
                    running_var[c0 + c] =
                        (real)((1 - mom) * (double)running_var[c0 + c] +
                               mom * (cfg->bn_unbiased_running ? var * unb : var));
            }
        } else {
            for (int c = 0; c < w; c++) {
                mean[c0 + c] = running_mean ? running_mean[c0 + c] : 0;
                rstd[c0 + c] = (real)rstd_of(running_var ? (double)running_var[c0 + c] : 1.0, cfg);
            }
        }
    }
    bn_normalize(out, inp, g, b, mean, rstd, B, C);
}

static void bn_bwd_exact(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                         const real *g, const real *mean, const real *rstd, int B, int C,
                         int training, const nb_norm_cfg *cfg, int set) {
    const int nblk = bn_blocks(C);
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * BN_CB, w = C - c0 < BN_CB ? C - c0 : BN_CB;
        const real *mu = mean + c0, *r = rstd + c0, *gg = g + c0;
        double sy[BN_CB], syx[BN_CB], sxx[BN_CB];
        memset(sy, 0, sizeof sy);
        memset(syx, 0, sizeof syx);
        memset(sxx, 0, sizeof sxx);
        const int need_sxx = training && cfg->eps_outside;
        for (int row = 0; row < B; row++) {
            const real *x = inp + (size_t)row * C + c0, *dy = dout + (size_t)row * C + c0;
#pragma omp simd
            for (int c = 0; c < w; c++) {
                double d = (double)(x[c] - mu[c]);
                sy[c] += (double)dy[c];
                syx[c] += (double)dy[c] * d;
            }
            if (need_sxx) {
#pragma omp simd
                for (int c = 0; c < w; c++) {
                    double d = (double)(x[c] - mu[c]);
                    sxx[c] += d * d;
                }
            }
        }
        /* per column: dx = A*dy + K*(x - mu) + M */
        real A[BN_CB], K[BN_CB], M[BN_CB];
        const double nb = B, D = cfg->bn_unbiased_batch && B > 1 ? nb - 1 : nb;
        for (int c = 0; c < w; c++) {
            double rc = r[c], gc = gg[c];
            if (dg) dg[c0 + c] += (real)(rc * syx[c]);
            if (db) db[c0 + c] += (real)sy[c];
            A[c] = (real)(gc * rc);
            if (training) {
                K[c] = (real)(rstd_coef(rc, sxx[c] / D, D, cfg) * gc * syx[c]);
                M[c] = (real)(-gc * rc * sy[c] / nb);
            } else {
                K[c] = 0;
                M[c] = 0;
            }
        }
        for (int row = 0; row < B; row++) {
            const real *x = inp + (size_t)row * C + c0, *dy = dout + (size_t)row * C + c0;
            bn_dx_span(dinp + (size_t)row * C + c0, dy, x, A, K, M, mu, w, set);
        }
    }
}

void nb_batchnorm_forward(real *out, real *mean, real *rstd, real *running_mean, real *running_var,
                          const real *inp, const real *g, const real *b, int B, int C, int training,
                          const nb_norm_cfg *cfg) {
    if (training && cfg->bn_sum) { /* statistics over every process's rows (--bn-sync) */
        bn_sync_stats(mean, rstd, running_mean, running_var, inp, B, C, cfg);
        bn_normalize(out, inp, g, b, mean, rstd, B, C);
        return;
    }
    if (B < BN_EXACT_ROWS) {
        bn_fwd_exact(out, mean, rstd, running_mean, running_var, inp, g, b, B, C, training, cfg);
        return;
    }
    if (bn_by_rows(B, C) && bn_fwd_rows(out, mean, rstd, running_mean, running_var, inp, g, b, B, C,
                                        training, cfg) == 0)
        return;
    bn_fwd_cols(out, mean, rstd, running_mean, running_var, inp, g, b, B, C, training, cfg);
}

/* The backward over the global batch (cfg->bn_sum): dg and db from this process's rows (the
 * gradients are summed over the processes afterwards), the terms of dx from the sums over every
 * process's rows. */
static void bn_sync_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                             const real *g, const real *mean, const real *rstd, int B, int C,
                             const nb_norm_cfg *cfg, int set) {
    double *S = calloc((size_t)3 * C + 1, sizeof *S);
    if (!S) abort();
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int c = 0; c < C; c++) {
        double sy = 0, syx = 0, sxx = 0;
        for (int row = 0; row < B; row++) {
            double d = (double)(inp[(size_t)row * C + c] - mean[c]), dy = dout[(size_t)row * C + c];
            sy += dy;
            syx += dy * d;
            sxx += d * d;
        }
        if (dg) dg[c] += (real)(rstd[c] * syx);
        if (db) db[c] += (real)sy;
        S[c] = sy;
        S[C + c] = syx;
        S[2 * C + c] = sxx;
    }
    S[3 * C] = B;
    cfg->bn_sum(cfg->bn_ctx, S, 3 * C + 1);
    const double nb = S[3 * C], D = cfg->bn_unbiased_batch && nb > 1 ? nb - 1 : nb;
#pragma omp parallel for schedule(static) if (par_ok(B, C))
    for (int c = 0; c < C; c++) {
        double rc = rstd[c], gc = g[c];
        real A = (real)(gc * rc),
             K = (real)(rstd_coef(rc, S[2 * C + c] / D, D, cfg) * gc * S[C + c]),
             M = (real)(-gc * rc * S[c] / nb);
        for (int row = 0; row < B; row++) {
            size_t i = (size_t)row * C + c;
            const real v = A * dout[i] + K * (inp[i] - mean[c]) + M;
            dinp[i] = set ? v : dinp[i] + v;
        }
    }
    free(S);
}

static void bn_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                        const real *g, const real *mean, const real *rstd, int B, int C,
                        int training, const nb_norm_cfg *cfg, int set) {
    if (training && cfg->bn_sum) {
        bn_sync_backward(dinp, dg, db, dout, inp, g, mean, rstd, B, C, cfg, set);
        return;
    }
    if (B < BN_EXACT_ROWS) {
        bn_bwd_exact(dinp, dg, db, dout, inp, g, mean, rstd, B, C, training, cfg, set);
        return;
    }
    if (bn_by_rows(B, C) &&
        bn_bwd_rows(dinp, dg, db, dout, inp, g, mean, rstd, B, C, training, cfg, set) == 0)
        return;
    bn_bwd_cols(dinp, dg, db, dout, inp, g, mean, rstd, B, C, training, cfg, set);
}

void nb_batchnorm_backward(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                           const real *g, const real *mean, const real *rstd, int B, int C,
                           int training, const nb_norm_cfg *cfg) {
    bn_backward(dinp, dg, db, dout, inp, g, mean, rstd, B, C, training, cfg, 0);
}

void nb_batchnorm_backward_set(real *dinp, real *dg, real *db, const real *dout, const real *inp,
                               const real *g, const real *mean, const real *rstd, int B, int C,
                               int training, const nb_norm_cfg *cfg) {
    bn_backward(dinp, dg, db, dout, inp, g, mean, rstd, B, C, training, cfg, 1);
}

/* ---- WeightNorm ----------------------------------------------------------------------------- */

void nb_weightnorm_forward(real *w, real *vnorm, const real *v, const real *g, int OC, int C) {
#pragma omp parallel for schedule(static) if (par_ok(OC, C))
    for (int o = 0; o < OC; o++) {
        const real *vo = v + (size_t)o * C;
        real *wo = w + (size_t)o * C;
        double ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++)
            ss += (double)vo[i] * (double)vo[i];
        double n = sqrt(ss);
        if (!(n > WN_FLOOR)) n = WN_FLOOR;
        vnorm[o] = (real)n;
        const real s = (real)((double)g[o] / n);
#pragma omp simd
        for (int i = 0; i < C; i++)
            wo[i] = s * vo[i];
    }
}

void nb_weightnorm_backward(real *dv, real *dg, const real *dw, const real *v, const real *g,
                            const real *vnorm, int OC, int C) {
#pragma omp parallel for schedule(static) if (par_ok(OC, C))
    for (int o = 0; o < OC; o++) {
        const real *vo = v + (size_t)o * C, *dwo = dw + (size_t)o * C;
        real *dvo = dv + (size_t)o * C;
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < C; i++)
            s += (double)dwo[i] * (double)vo[i];
        const double n = vnorm[o], dgo = s / n;
        if (dg) dg[o] += (real)dgo;
        /* w = g v/||v||: dv = (g/n)(dw - (dgo/n) v). Where the norm was floored the forward is
         * w = g v/floor, whose derivative has no projection term. */
        const real a = (real)((double)g[o] / n);
        const real pcoef = n > (double)(real)WN_FLOOR ? (real)(dgo / n) : 0;
#pragma omp simd
        for (int i = 0; i < C; i++)
            dvo[i] += a * (dwo[i] - pcoef * vo[i]);
    }
}
