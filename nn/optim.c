#include "real.h"

/* nn/optim.c — Adam and gradient clipping over flat buffers (generic: see nn/nn.h).
 *
 * N is the element count. Adam is one fused pass (read p, g, m, v; write p, m, v): it is
 * memory-bound, so it is vectorized and split across threads in 64-byte-aligned chunks.
 * Norms are accumulated in double over fixed blocks whose partial sums are added in block
 * order, so they do not depend on the thread count. */

#include <math.h>
#include <omp.h>

/* Below this many values Adam and the scaling loops run on one thread. */
#define PAR_MIN ((size_t)1 << 15)
/* Norm blocks: at least this many values each, at most NORM_MAX_BLOCKS blocks. */
#define NORM_BLOCK ((size_t)1 << 14)
#define NORM_MAX_BLOCKS 512

/* ---- Adam ------------------------------------------------------------------------------- */

typedef struct adam_k {
    real b1, omb1, b2, omb2, eps, lr_t;
    int eps_inside;
} adam_k;

/* lr_t and the constants, once per call; lr_t and 1-b in double before rounding to real. */
static adam_k adam_consts(long t, const nb_adam_cfg *cfg) {
    double td = (double)t, c1 = 1, c2 = 1; /* bias-correction denominators of m and v */
    switch (cfg->bias) {
    case NB_ADAM_BIAS_STANDARD:
        c1 = 1.0 - pow(cfg->beta1, td);
        c2 = 1.0 - pow(cfg->beta2, td);
        break;
    case NB_ADAM_BIAS_KIROS:
        c1 = 1.0 - pow(0.1, td);
        c2 = 1.0 - pow(0.001, td);
        break;
    case NB_ADAM_BIAS_NONE:
    default:
        break;
    }
    double lr_t = cfg->lr * sqrt(c2) / c1;
    /* eps on the corrected v^ = v/c2, written on the raw v: sqrt(v^)+eps = (sqrt(v)+eps*sqrt(c2))
     * /sqrt(c2) and v^+eps = (v+eps*c2)/c2; the 1/sqrt(c2) is already in lr_t. */
    double eps = cfg->eps;
    if (cfg->eps_corrected) eps *= cfg->eps_inside ? c2 : sqrt(c2);
    adam_k k;
    k.b1 = (real)cfg->beta1;
    k.omb1 = (real)(1.0 - cfg->beta1);
    k.b2 = (real)cfg->beta2;
    k.omb2 = (real)(1.0 - cfg->beta2);
    k.eps = (real)eps;
    k.lr_t = (real)lr_t;
    k.eps_inside = cfg->eps_inside;
    return k;
}

/* The fused kernel over [lo, hi), explicitly vectorized. gcc does not vectorize sqrt in a
 * loop under the default -fmath-errno (it guards each call with a branch to libm for negative
 * arguments: measured, scalar vsqrtss only), and neither the optimize attribute nor pragma
 * lifts that; hence AVX intrinsics, 256-bit (the loop is memory-bound, wider vectors buy
 * nothing). The vector body and the scalar tail do the same operations in the same order
 * (no FMA contraction in ISO C mode), so an element's result does not depend on where a
 * thread's chunk starts. */
#if defined(__AVX__)
#include <immintrin.h>
#ifdef NB_F64
typedef __m256d vreal;
#define VW 4
#define V_SET1 _mm256_set1_pd
#define V_LOAD _mm256_loadu_pd
#define V_STORE _mm256_storeu_pd
#define V_ADD _mm256_add_pd
#define V_SUB _mm256_sub_pd
#define V_MUL _mm256_mul_pd
#define V_DIV _mm256_div_pd
#define V_SQRT _mm256_sqrt_pd
#else
typedef __m256 vreal;
#define VW 8
#define V_SET1 _mm256_set1_ps
#define V_LOAD _mm256_loadu_ps
#define V_STORE _mm256_storeu_ps
#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MUL _mm256_mul_ps
#define V_DIV _mm256_div_ps
#define V_SQRT _mm256_sqrt_ps
#endif
#endif

static void adam_range(real *restrict p, const real *restrict g, real *restrict m, real *restrict v,
                       size_t lo, size_t hi, const adam_k *k) {
    const real b1 = k->b1, omb1 = k->omb1, b2 = k->b2, omb2 = k->omb2, eps = k->eps, lr_t = k->lr_t;
    const int inside = k->eps_inside;
    size_t i = lo;
#if defined(__AVX__)
    const vreal vb1 = V_SET1(b1), vomb1 = V_SET1(omb1), vb2 = V_SET1(b2), vomb2 = V_SET1(omb2),
                veps = V_SET1(eps), vlr = V_SET1(lr_t);
    if (inside) {
        for (; i + VW <= hi; i += VW) {
            vreal gi = V_LOAD(g + i);
            vreal mi = V_ADD(V_MUL(vb1, V_LOAD(m + i)), V_MUL(vomb1, gi));
            vreal vi = V_ADD(V_MUL(vb2, V_LOAD(v + i)), V_MUL(V_MUL(vomb2, gi), gi));
            V_STORE(m + i, mi);
            V_STORE(v + i, vi);
            vreal upd = V_DIV(V_MUL(vlr, mi), V_SQRT(V_ADD(vi, veps)));
            V_STORE(p + i, V_SUB(V_LOAD(p + i), upd));
        }
    } else {
        for (; i + VW <= hi; i += VW) {
            vreal gi = V_LOAD(g + i);
            vreal mi = V_ADD(V_MUL(vb1, V_LOAD(m + i)), V_MUL(vomb1, gi));
            vreal vi = V_ADD(V_MUL(vb2, V_LOAD(v + i)), V_MUL(V_MUL(vomb2, gi), gi));
            V_STORE(m + i, mi);
            V_STORE(v + i, vi);
            vreal upd = V_DIV(V_MUL(vlr, mi), V_ADD(V_SQRT(vi), veps));
            V_STORE(p + i, V_SUB(V_LOAD(p + i), upd));
        }
    }
#endif
    for (; i < hi; i++) {
        real gi = g[i];
        real mi = b1 * m[i] + omb1 * gi;
        real vi = b2 * v[i] + omb2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        real den = inside ? REAL_SQRT(vi + eps) : REAL_SQRT(vi) + eps;
        p[i] -= lr_t * mi / den;
    }
}

/* This thread's share of [0, n): chunks rounded to 16 values so that threads never write the
 * same cache line (buffers and layout offsets are 64-byte aligned in float). */
static void thread_share(size_t n, size_t *lo, size_t *hi) {
    int nth = omp_get_num_threads(), tid = omp_get_thread_num();
    size_t per = (n + (size_t)nth - 1) / (size_t)nth;
    per = (per + 15) & ~(size_t)15;
    size_t a = per * (size_t)tid, b = a + per;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

void nb_adam_step(real *p, const real *g, real *m, real *v, size_t n, long t,
                  const nb_adam_cfg *cfg) {
    /* p, g, m, v (N) */
    adam_k k = adam_consts(t, cfg);
    if (n < PAR_MIN) {
        adam_range(p, g, m, v, 0, n, &k);
        return;
    }
#pragma omp parallel
    {
        size_t lo, hi;
        thread_share(n, &lo, &hi);
        adam_range(p, g, m, v, lo, hi, &k);
    }
}

void nb_adam_step_layout(real *p, const real *g, real *m, real *v, const nb_layout *l, long t,
                         const nb_adam_cfg *cfg) {
    /* p, g, m, v (l->total) */
    adam_k k = adam_consts(t, cfg);
    size_t work = 0;
    for (int i = 0; i < l->count; i++)
        if (l->t[i].trainable) work += l->t[i].n;
            /* One parallel region for all tensors; each is split across the threads (no barrier
             * between tensors: the updates are independent). */
#pragma omp parallel if (work >= PAR_MIN)
    {
        for (int i = 0; i < l->count; i++) {
            const nb_tensor *te = &l->t[i];
            if (!te->trainable) continue;
            size_t lo, hi;
            thread_share(te->n, &lo, &hi);
            adam_range(p + te->off, g + te->off, m + te->off, v + te->off, lo, hi, &k);
        }
    }
}

/* ---- norms and clipping ----------------------------------------------------------------- */

/* Sum of squares of [lo, hi) in double: 32 independent accumulators (four AVX-512 registers)
 * so that the loop is not bound by the latency of one add chain; combined in a fixed order. */
static double sumsq_range(const real *x, size_t lo, size_t hi) {
    enum { W = 32 };
    double acc[W] = {0};
    size_t i = lo;
    for (; i + W <= hi; i += W) {
#pragma omp simd
        for (int j = 0; j < W; j++) {
            double d = (double)x[i + (size_t)j];
            acc[j] += d * d;
        }
    }
    double tail = 0;
    for (; i < hi; i++)
        tail += (double)x[i] * (double)x[i];
    for (int w = W / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            acc[j] += acc[j + w];
    return acc[0] + tail;
}

/* Sum of squares of n values: fixed blocks, partials added in block order. */
static double sumsq(const real *x, size_t n) {
    size_t blk = NORM_BLOCK;
    if ((n + blk - 1) / blk > NORM_MAX_BLOCKS) blk = (n + NORM_MAX_BLOCKS - 1) / NORM_MAX_BLOCKS;
    size_t nblk = (n + blk - 1) / blk;
    if (nblk <= 1) return sumsq_range(x, 0, n);
    double part[NORM_MAX_BLOCKS];
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t b = 0; b < nblk; b++) {
        size_t lo = b * blk, hi = lo + blk < n ? lo + blk : n;
        part[b] = sumsq_range(x, lo, hi);
    }
    double s = 0;
    for (size_t b = 0; b < nblk; b++)
        s += part[b];
    return s;
}

double nb_l2norm(const real *x, size_t n) {
    return sqrt(sumsq(x, n));
}

static void scale(real *x, size_t n, real s) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

double nb_clip_global(real *g, const nb_layout *l, double maxnorm) {
    double ss = 0;
    for (int i = 0; i < l->count; i++)
        if (l->t[i].trainable) ss += sumsq(g + l->t[i].off, l->t[i].n);
    double norm = sqrt(ss);
    /* NaN or inf norms fail this test or give a zero scale; a NaN norm is returned unchanged
     * for the caller to detect, and nothing is scaled. */
    if (norm > maxnorm) {
        real s = (real)(maxnorm / norm);
        for (int i = 0; i < l->count; i++)
            if (l->t[i].trainable) scale(g + l->t[i].off, l->t[i].n, s);
    }
    return norm;
}

double nb_clip_per_tensor(real *g, const nb_layout *l, double maxnorm) {
    double largest = 0;
    for (int i = 0; i < l->count; i++) {
        const nb_tensor *te = &l->t[i];
        if (!te->trainable) continue;
        double norm = sqrt(sumsq(g + te->off, te->n));
        if (isnan(norm) || norm > largest) largest = norm; /* a NaN, once seen, stays */
        if (norm > maxnorm) scale(g + te->off, te->n, (real)(maxnorm / norm));
    }
    return largest;
}
