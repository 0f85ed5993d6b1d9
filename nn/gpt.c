#include "nn/mem.h"
#include "nn/vtanh.h"
#include "real.h"
/* nn/gpt.c — the decoder-only Transformer language model (generic: float and, with -DNB_F64,
 * double; see nn/nn.h). The model and its contracts are in nn/gpt.h.
 *
 * Every map is one BLAS gemm over all N rows; attention runs per (sequence, head) pair, the
 * pairs split over threads (OpenBLAS single-threaded inside the parallel region), on strided
 * views of the fused q,k,v rows. Norms are nn/norm.c's kernels on all rows at once, through
 * norm_fwd/norm_bwd only. Nothing is allocated in forward or backward. */

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) && !defined(NB_F64)
#include <immintrin.h>
#define GPT_AVX512 1
#else
#define GPT_AVX512 0
#endif

#define NO_OFF ((size_t)-1)

typedef struct lin {
    size_t w, b, g; /* weight (out, in) (WeightNorm: v), bias (out) or NO_OFF, WN gains or NO_OFF */
    size_t we;      /* WeightNorm: offset of its effective weight in m->weff */
    int out, in;
} lin;

typedef struct nsite {
    size_t g, b, s; /* gain, shift, the norm's scalars (DyT's alpha); NO_OFF when absent */
} nsite;

typedef struct block {
    nsite n1, n2;
    lin qkv, proj, fc, fc2;
    /* what forward keeps */
    real *u1, *u2;   /* pre: N(x) per sub-layer; post: x + drop(F(x)) (the norms' inputs) */
    real *st1, *st2; /* norm statistics (2N each) */
    real *qkv_out;   /* (N, 3d) */
    real *P;         /* attention weights after the softmax, before dropout (B, H, T, T) */
    real *att;       /* heads concatenated (N, d) */
    real *h, *a;     /* fc output before and after gelu (N, 4d) */
} block;

struct nb_gpt {
    nb_gpt_cfg c;
    int d, H, dh, V, L, ctx, maxb;
    size_t wte, wpe;
    nsite fin;
    block *bl;
    real **x; /* 2L + 1 residual streams (N, d) */
    real *fo, *fst;
    real *logits; /* (N, V); the gradient after a forward with want_grad */
    real *weff, *wnorm, *dweff;
    size_t nweff;
    /* scratch */
    real *dx, *dz, *du, *dbig, *dqkv, *datt, *ascr;
    size_t ascr_n;
    int nthr;
    /* the last forward */
    const int *tok;
    int B, T, training, want_grad, row0, grad_rows;
    uint64_t seed;
};

typedef nb_gpt model;

static real *alloc_real(size_t n) {
    return nb_mem_alloc(n * sizeof(real)); /* aligned, zeroed, noted (nn/mem.h) */
}

/* ---- dropout: a hash of (seed, site, index) ------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline int keep(uint64_t key, uint64_t i, uint32_t thr) {
    return (uint32_t)(mix64(key + i * 0xd1b54a32d192ed03ull) >> 32) >= thr;
}

static uint64_t site_key(const model *m, uint64_t site) {
    return mix64(m->seed ^ mix64((site + 1) * 0x2545f4914f6cdd1dull));
}

static int dropping(const model *m) {
    return m->training && m->c.dropout > 0;
}

/* x (N, d) *= mask / (1 - p) at site (in place): keyed by global sequence and position. */
static void drop_rows(const model *m, real *x, uint64_t site) {
    if (!dropping(m)) return;
    const uint64_t key = site_key(m, site);
    const double p = m->c.dropout;
    const uint32_t thr = p >= 1 ? 0xffffffffu : (uint32_t)(p * 4294967296.0);
    const real sc = (real)(1.0 / (1.0 - p));
    const int d = m->d, T = m->T;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < m->B * T; r++) {
        const int b = r / T, t = r % T;
        const uint64_t base = ((uint64_t)(m->row0 + b) * (uint64_t)m->ctx + (uint64_t)t) * d;
        real *xr = x + (size_t)r * d;
        for (int j = 0; j < d; j++)
            xr[j] = keep(key, base + (uint64_t)j, thr) ? xr[j] * sc : (real)0;
    }
}

/* ---- maps ----------------------------------------------------------------------------------- */

static const real *lin_w(const model *m, const real *P, const lin *l) {
    return l->g != NO_OFF ? m->weff + l->we : P + l->w;
}

/* Y (n, out) = X (n, in) · Wᵀ + b: Y starts as the bias rows and the gemm adds to them
 * (beta 1), so that OpenBLAS does not first zero Y (beta 0) and a second pass add b. */
static void lin_fwd(const model *m, const real *P, const lin *l, real *Y, const real *X, int n) {
    real beta = 0;
    if (l->b != NO_OFF) {
        const real *b = P + l->b;
        for (int r = 0; r < n; r++)
            memcpy(Y + (size_t)r * l->out, b, sizeof(real) * (size_t)l->out);
        beta = 1;
    }
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, l->out, l->in, 1, X, l->in,
               lin_w(m, P, l), l->in, beta, Y, l->out);
}

/* dX (n, in) += dY · W (when dX); dW += dYᵀ X; db += column sums of dY. */
static void lin_bwd(model *m, real *G, const real *P, const lin *l, real *dX, const real *dY,
                    const real *X, int n) {
    if (dX)
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, l->in, l->out, 1, dY, l->out,
                   lin_w(m, P, l), l->in, 1, dX, l->in);
    real *dW = l->g != NO_OFF ? m->dweff + l->we : G + l->w;
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, l->out, l->in, n, 1, dY, l->out, X, l->in,
               1, dW, l->in);
    if (l->b != NO_OFF) {
        real *db = G + l->b;
        for (int r = 0; r < n; r++) {
            const real *dy = dY + (size_t)r * l->out;
#pragma omp simd
            for (int j = 0; j < l->out; j++)
                db[j] += dy[j];
        }
    }
}

/* ---- norms: the only place the model calls a norm's kernels (the table, nn/norms/) ----------- */

/* base + off, or NULL when the tensor is absent */
#define OPT(base, off) ((off) != NO_OFF ? (base) + (off) : NULL)

static void norm_fwd(const model *m, const real *P, const nsite *ns, real *out, real *st,
                     const real *in, int n) {
    const nb_norm_cfg *cfg = &m->c.norm;
    const nb_norm_def *nd = nb_norm_get(cfg->kind);
    if (nd->acts == NB_ON_ROWS) /* statistics st, st + n */
        nd->REAL_OPS->forward(out, st, st + n, NULL, NULL, in, OPT(P, ns->g), OPT(P, ns->b),
                              OPT(P, ns->s), n, m->d, 1, cfg);
    else if (out != in) /* none, weight */
        memcpy(out, in, sizeof(real) * (size_t)n * m->d);
}

/* din += the norm's input gradient (din may not alias dout); the norm's own gradients into G. */
static void norm_bwd(const model *m, real *G, const real *P, const nsite *ns, real *din,
                     const real *dout, const real *in, const real *st, int n) {
    const nb_norm_cfg *cfg = &m->c.norm;
    const nb_norm_def *nd = nb_norm_get(cfg->kind);
    if (nd->acts == NB_ON_ROWS) {
        nd->REAL_OPS->backward(din, OPT(G, ns->g), OPT(G, ns->b), OPT(G, ns->s), dout, in,
                               OPT(P, ns->g), OPT(P, ns->s), st, st + n, n, m->d, 1, cfg, 0);
    } else {
        const size_t k = (size_t)n * m->d;
#pragma omp simd
        for (size_t i = 0; i < k; i++)
            din[i] += dout[i];
    }
}

/* a norm with sites here: a row-wise one (batch is refused; none and weight have none) */
static int has_norm(nb_norm_kind k) {
    return nb_norm_get(k)->acts == NB_ON_ROWS;
}

/* ---- gelu (tanh form) ----------------------------------------------------------------------- */

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
/* values per block: tanh's arguments are gathered in a stack buffer of this many, so that the
 * float build takes them through the vectorized tanh (nn/vtanh.h, within 2 ulp of tanh; libm's
 * scalar tanhf was half of lm's step) */
#define GELU_BLK 512

static inline real gelu_arg(real x) {
    return (real)GELU_C * (x + (real)0.044715 * x * x * x);
}

/* t[i] = tanh(gelu_arg(h[i])) for i < n (n <= GELU_BLK) */
static void gelu_tanh(real *t, const real *h, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        t[i] = gelu_arg(h[i]);
#ifdef NB_F64
    for (size_t i = 0; i < n; i++)
        t[i] = tanh(t[i]);
#else
    nb_tanhf_array(t, t, n);
#endif
}

static void gelu_fwd(real *a, const real *h, size_t n) {
    const long nb = (long)((n + GELU_BLK - 1) / GELU_BLK);
#pragma omp parallel for schedule(static)
    for (long bk = 0; bk < nb; bk++) {
        const size_t i0 = (size_t)bk * GELU_BLK, len = n - i0 < GELU_BLK ? n - i0 : GELU_BLK;
        real t[GELU_BLK];
        gelu_tanh(t, h + i0, len);
#pragma omp simd
        for (size_t j = 0; j < len; j++)
            a[i0 + j] = (real)0.5 * h[i0 + j] * (1 + t[j]);
    }
}

/* dh = da * gelu'(h) (in place on da) */
static void gelu_bwd(real *da, const real *h, size_t n) {
    const long nb = (long)((n + GELU_BLK - 1) / GELU_BLK);
#pragma omp parallel for schedule(static)
    for (long bk = 0; bk < nb; bk++) {
        const size_t i0 = (size_t)bk * GELU_BLK, len = n - i0 < GELU_BLK ? n - i0 : GELU_BLK;
        real t[GELU_BLK];
        gelu_tanh(t, h + i0, len);
#pragma omp simd
        for (size_t j = 0; j < len; j++) {
            const real x = h[i0 + j];
            const real dt = (1 - t[j] * t[j]) * (real)GELU_C * (1 + (real)(3 * 0.044715) * x * x);
            da[i0 + j] *= (real)0.5 * (1 + t[j]) + (real)0.5 * x * dt;
        }
    }
}

/* ---- attention ------------------------------------------------------------------------------ */

static uint32_t att_thr(const model *m) {
    const double p = m->c.dropout;
    return p >= 1 ? 0xffffffffu : (uint32_t)(p * 4294967296.0);
}

/* The weights P (T, T) of pair (b, h) with dropout applied, into out. */
static void att_dropped(const model *m, real *out, const real *P, int b, int h, uint64_t key) {
    const int T = m->T;
    const uint32_t thr = att_thr(m);
    const real sc = (real)(1.0 / (1.0 - m->c.dropout));
    for (int i = 0; i < T; i++) {
        const uint64_t base =
            (((uint64_t)(m->row0 + b) * m->H + (uint64_t)h) * m->ctx + (uint64_t)i) * m->ctx;
        for (int j = 0; j < T; j++)
            out[(size_t)i * T + j] =
                j <= i && keep(key, base + (uint64_t)j, thr) ? P[(size_t)i * T + j] * sc : 0;
    }
}

/* ---- the softmax's exponential ------------------------------------------------------------
 * e^x for the scores less their row's maximum (x <= 0), 16 lanes at a time where the target has
 * AVX-512 (libm's scalar expf was a fifth of attention's time): x = n·ln2 + r, n = rint(x·log2 e),
 * r by two fused steps (ln2 in two parts), e^r by Cephes expf's degree-7 polynomial (within
 * about 1 ulp on |r| <= ln2/2), then 2^n exactly. x < -87 gives 0 (e^x < 2^-125.5 there,
 * nothing beside a row's maximum, whose term is 1). The scalar formula does the same operations
 * in the same order, so every lane and the tail give the same bits; the double build uses exp. */
#define SX_LOG2E 1.44269504088896341f
#define SX_LN2H 0.693359375f
#define SX_LN2L -2.12194440e-4f
#define SX_MIN -87.0f
#define SX_P0 1.9875691500e-4f
#define SX_P1 1.3981999507e-3f
#define SX_P2 8.3334519073e-3f
#define SX_P3 4.1665795894e-2f
#define SX_P4 1.6666665459e-1f
#define SX_P5 5.0000001201e-1f

#ifndef NB_F64
static inline float sx_exp(float x) {
    if (!(x >= SX_MIN)) return x != x ? x : 0.0f;
    const float n = rintf(x * SX_LOG2E);
    float r = fmaf(n, -SX_LN2H, x);
    r = fmaf(n, -SX_LN2L, r);
    float p = fmaf(SX_P0, r, SX_P1);
    p = fmaf(p, r, SX_P2);
    p = fmaf(p, r, SX_P3);
    p = fmaf(p, r, SX_P4);
    p = fmaf(p, r, SX_P5);
    const float y = fmaf(p, r * r, r) + 1.0f;
    return ldexpf(y, (int)n);
}
#endif

#if GPT_AVX512
static inline __m512 sx_exp16(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(SX_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-SX_LN2H), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-SX_LN2L), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(SX_P0), r, _mm512_set1_ps(SX_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SX_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SX_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SX_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SX_P5));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1));
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(SX_MIN), _CMP_GE_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(_mm512_maskz_scalef_ps(live, y, n), nan, x);
}
#endif

/* row[j] = e^(row[j] - mx) for j < n */
static void exp_shifted(real *row, real mx, int n) {
#ifdef NB_F64
    for (int j = 0; j < n; j++)
        row[j] = exp(row[j] - mx);
#else
    int j = 0;
#if GPT_AVX512
    const __m512 vm = _mm512_set1_ps(mx);
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(row + j, sx_exp16(_mm512_sub_ps(_mm512_loadu_ps(row + j), vm)));
    if (j < n) {
        const __mmask16 k = (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(row + j, k,
                              sx_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), vm)));
        j = n;
    }
#endif
    for (; j < n; j++)
        row[j] = sx_exp(row[j] - mx);
#endif
}

static void attn_fwd(model *m, block *k, uint64_t site) {
    const int T = m->T, d = m->d, dh = m->dh, H = m->H, d3 = 3 * d;
    const real scale = (real)(1.0 / sqrt((double)dh));
    const int drop = dropping(m);
    const uint64_t key = site_key(m, site);
#pragma omp parallel for schedule(dynamic)
    for (int p = 0; p < m->B * H; p++) {
        const int b = p / H, h = p % H;
        const real *q = k->qkv_out + (size_t)b * T * d3 + (size_t)h * dh;
        real *Pp = k->P + (size_t)p * T * T;
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh, scale, q, d3, q + d, d3, 0,
                   Pp, T);
        for (int i = 0; i < T; i++) {
            real *row = Pp + (size_t)i * T, mx = row[0];
            for (int j = 1; j <= i; j++)
                mx = row[j] > mx ? row[j] : mx;
            exp_shifted(row, mx, i + 1);
            real s = 0;
            for (int j = 0; j <= i; j++)
                s += row[j];
            const real inv = 1 / s;
#pragma omp simd
            for (int j = 0; j <= i; j++)
                row[j] *= inv;
            for (int j = i + 1; j < T; j++)
                row[j] = 0;
        }
        const real *W = Pp;
        if (drop) {
            real *scr = m->ascr + (size_t)omp_get_thread_num() * m->ascr_n;
            att_dropped(m, scr, Pp, b, h, key);
            W = scr;
        }
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T, 1, W, T, q + 2 * d, d3, 0,
                   k->att + (size_t)b * T * d + (size_t)h * dh, d);
    }
}

/* From datt (N, d) writes dqkv (N, 3d). */
static void attn_bwd(model *m, const block *k, uint64_t site) {
    const int T = m->T, d = m->d, dh = m->dh, H = m->H, d3 = 3 * d;
    const real scale = (real)(1.0 / sqrt((double)dh));
    const int drop = dropping(m);
    const uint64_t key = site_key(m, site);
    const uint32_t thr = att_thr(m);
    const real dsc = drop ? (real)(1.0 / (1.0 - m->c.dropout)) : 1;
#pragma omp parallel for schedule(dynamic)
    for (int p = 0; p < m->B * H; p++) {
        const int b = p / H, h = p % H;
        const real *q = k->qkv_out + (size_t)b * T * d3 + (size_t)h * dh;
        real *dq = m->dqkv + (size_t)b * T * d3 + (size_t)h * dh;
        const real *dctx = m->datt + (size_t)b * T * d + (size_t)h * dh;
        const real *Pp = k->P + (size_t)p * T * T;
        real *scr = m->ascr + (size_t)omp_get_thread_num() * m->ascr_n;
        real *W = scr, *dP = scr + (size_t)T * T;
        const real *Wuse = Pp;
        if (drop) {
            att_dropped(m, W, Pp, b, h, key);
            Wuse = W;
        }
        /* dv = Wᵀ dctx; dW = dctx vᵀ */
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T, 1, Wuse, T, dctx, d, 0,
                   dq + 2 * d, d3);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh, 1, dctx, d, q + 2 * d, d3, 0,
                   dP, T);
        for (int i = 0; i < T; i++) {
            real *dr = dP + (size_t)i * T;
            const real *pr = Pp + (size_t)i * T;
            if (drop) {
                const uint64_t base =
                    (((uint64_t)(m->row0 + b) * H + (uint64_t)h) * m->ctx + (uint64_t)i) * m->ctx;
                for (int j = 0; j <= i; j++)
                    dr[j] = keep(key, base + (uint64_t)j, thr) ? dr[j] * dsc : 0;
            }
            real s = 0;
            for (int j = 0; j <= i; j++)
                s += dr[j] * pr[j];
#pragma omp simd
            for (int j = 0; j <= i; j++)
                dr[j] = pr[j] * (dr[j] - s);
            for (int j = i + 1; j < T; j++)
                dr[j] = 0;
        }
        /* dq = dS k · scale; dk = dSᵀ q · scale */
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T, scale, dP, T, q + d, d3, 0,
                   dq, d3);
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T, scale, dP, T, q, d3, 0,
                   dq + d, d3);
    }
}

/* ---- construction --------------------------------------------------------------------------- */

typedef struct planner {
    size_t at;
    size_t nweff;
} planner;

static size_t take(planner *p, size_t n) {
    size_t o = p->at;
    p->at += (n + 15) & ~(size_t)15;
    return o;
}

static void plan_lin(const model *m, planner *p, lin *l, int out, int in) {
    l->out = out;
    l->in = in;
    l->w = take(p, (size_t)out * in);
    l->b = m->c.bias ? take(p, (size_t)out) : NO_OFF;
    l->g = NO_OFF;
    if (nb_norm_get(m->c.norm.kind)->acts == NB_ON_WEIGHTS) {
        l->g = take(p, (size_t)out);
        l->we = p->nweff;
        p->nweff += (size_t)out * in;
    }
}

static void plan_norm(const model *m, planner *p, nsite *s) {
    const nb_norm_def *nd = nb_norm_get(m->c.norm.kind);
    s->g = s->b = s->s = NO_OFF;
    if (!has_norm(m->c.norm.kind)) return;
    if (nd->params & NB_NP_GAIN) s->g = take(p, (size_t)m->d);
    if ((nd->params & NB_NP_SHIFT) && m->c.bias) s->b = take(p, (size_t)m->d); /* --bias */
    if (nd->nscalars > 0) s->s = take(p, (size_t)nd->nscalars);
}

static void shift_lin(lin *l, size_t base) {
    l->w += base;
    if (l->b != NO_OFF) l->b += base;
    if (l->g != NO_OFF) l->g += base;
}

static void shift_norm(nsite *s, size_t base) {
    if (s->g != NO_OFF) s->g += base;
    if (s->b != NO_OFF) s->b += base;
    if (s->s != NO_OFF) s->s += base;
}

void nb_gpt_free(model *m) {
    if (!m) return;
    if (m->bl)
        for (int l = 0; l < m->L; l++) {
            block *k = &m->bl[l];
            free(k->u1), free(k->u2), free(k->st1), free(k->st2), free(k->qkv_out), free(k->P);
            free(k->att), free(k->h), free(k->a);
        }
    if (m->x)
        for (int i = 0; i <= 2 * m->L; i++)
            free(m->x[i]);
    free(m->x), free(m->bl), free(m->fo), free(m->fst), free(m->logits), free(m->weff);
    free(m->wnorm), free(m->dweff), free(m->dx), free(m->dz), free(m->du), free(m->dbig);
    free(m->dqkv), free(m->datt), free(m->ascr);
    free(m);
}

model *nb_gpt_new(const nb_gpt_cfg *cfg, nb_layout *layout, int max_batch, nb_err *err) {
    if (nb_norm_get(cfg->norm.kind)->acts == NB_ON_FEATURES) {
        nb_errf(err, "the language model cannot use --norm batch: statistics over a batch's "
                     "positions would carry later characters into earlier predictions");
        nb_hintf(err, "use a row-wise norm: none, layer, rms, prms, dyt or weight");
        return NULL;
    }
    if (cfg->layers < 1 || cfg->dim < 1 || cfg->heads < 1 || cfg->dim % cfg->heads != 0 ||
        cfg->vocab < 1 || cfg->ctx < 1 || max_batch < 1) {
        nb_errf(err,
                "bad model shape: %d layers, width %d, %d heads (the width must be a "
                "multiple of the heads), vocabulary %d, context %d, batch %d",
                cfg->layers, cfg->dim, cfg->heads, cfg->vocab, cfg->ctx, max_batch);
        return NULL;
    }
    model *m = calloc(1, sizeof *m);
    if (!m) {
        nb_errf(err, "out of memory");
        return NULL;
    }
    nb_mem_note(sizeof *m);
    m->c = *cfg;
    m->d = cfg->dim;
    m->H = cfg->heads;
    m->dh = m->d / m->H;
    m->V = cfg->vocab;
    m->L = cfg->layers;
    m->ctx = cfg->ctx;
    m->maxb = max_batch;
    m->nthr = omp_get_max_threads();
    const int d = m->d, L = m->L;
    m->bl = calloc((size_t)L, sizeof *m->bl);
    m->x = calloc((size_t)(2 * L + 1), sizeof *m->x);
    if (!m->bl || !m->x) goto oom;
    m->wte = nb_layout_add(layout, "gpt.wte", (size_t)m->V * d, 1);
    m->wpe = nb_layout_add(layout, "gpt.wpe", (size_t)m->ctx * d, 1);
    size_t nweff = 0;
    for (int l = 0; l < L; l++) {
        block *k = &m->bl[l];
        planner p = {0, nweff};
        plan_norm(m, &p, &k->n1);
        plan_lin(m, &p, &k->qkv, 3 * d, d);
        plan_lin(m, &p, &k->proj, d, d);
        plan_norm(m, &p, &k->n2);
        plan_lin(m, &p, &k->fc, 4 * d, d);
        plan_lin(m, &p, &k->fc2, d, 4 * d);
        nweff = p.nweff;
        char name[32];
        snprintf(name, sizeof name, "gpt.l%d", l);
        size_t base = nb_layout_add(layout, name, p.at, 1);
        if (base == NO_OFF) goto full;
        shift_norm(&k->n1, base), shift_norm(&k->n2, base);
        shift_lin(&k->qkv, base), shift_lin(&k->proj, base), shift_lin(&k->fc, base);
        shift_lin(&k->fc2, base);
    }
    m->fin.g = m->fin.b = m->fin.s = NO_OFF;
    if (cfg->pre_norm && has_norm(cfg->norm.kind)) {
        planner p = {0, 0};
        plan_norm(m, &p, &m->fin);
        size_t base = nb_layout_add(layout, "gpt.fin", p.at, 1);
        if (base == NO_OFF) goto full;
        shift_norm(&m->fin, base);
    }
    if (m->wte == NO_OFF || m->wpe == NO_OFF) goto full;
    m->nweff = nweff;
    const size_t N = (size_t)max_batch * m->ctx;
    for (int i = 0; i <= 2 * L; i++)
        if (!(m->x[i] = alloc_real(N * d))) goto oom;
    for (int l = 0; l < L; l++) {
        block *k = &m->bl[l];
        if (!(k->u1 = alloc_real(N * d)) || !(k->u2 = alloc_real(N * d)) ||
            !(k->st1 = alloc_real(2 * N)) || !(k->st2 = alloc_real(2 * N)) ||
            !(k->qkv_out = alloc_real(N * 3 * d)) ||
            !(k->P = alloc_real((size_t)max_batch * m->H * m->ctx * m->ctx)) ||
            !(k->att = alloc_real(N * d)) || !(k->h = alloc_real(N * 4 * d)) ||
            !(k->a = alloc_real(N * 4 * d)))
            goto oom;
    }
    m->ascr_n = 2 * (size_t)m->ctx * m->ctx;
    if (!(m->fo = alloc_real(N * d)) || !(m->fst = alloc_real(2 * N)) ||
        !(m->logits = alloc_real(N * m->V)) || !(m->dx = alloc_real(N * d)) ||
        !(m->dz = alloc_real(N * d)) || !(m->du = alloc_real(N * d)) ||
        !(m->dbig = alloc_real(N * 4 * d)) || !(m->dqkv = alloc_real(N * 3 * d)) ||
        !(m->datt = alloc_real(N * d)) || !(m->ascr = alloc_real(m->ascr_n * m->nthr)))
        goto oom;
    if (nweff && (!(m->weff = alloc_real(nweff)) || !(m->dweff = alloc_real(nweff)) ||
                  !(m->wnorm = alloc_real((size_t)L * 9 * d))))
        goto oom;
    return m;
full:
    nb_errf(err, "the model has too many tensors for one layout (%d layers)", L);
    nb_gpt_free(m);
    return NULL;
oom:
    nb_errf(err, "out of memory building the language model (batch %d, context %d, width %d)",
            max_batch, m->ctx, d);
    nb_gpt_free(m);
    return NULL;
}

static void normal_fill(real *p, size_t n, double sd, nb_rng *rng) {
    for (size_t i = 0; i < n; i++)
        p[i] = (real)(sd * nb_rng_normal(rng));
}

static void init_lin(real *P, const lin *l, double sd, nb_rng *rng) {
    normal_fill(P + l->w, (size_t)l->out * l->in, sd, rng);
    if (l->b != NO_OFF) memset(P + l->b, 0, sizeof(real) * l->out);
    if (l->g != NO_OFF)
        for (int o = 0; o < l->out; o++) {
            double s = 0;
            for (int i = 0; i < l->in; i++)
                s += (double)P[l->w + (size_t)o * l->in + i] * P[l->w + (size_t)o * l->in + i];
            P[l->g + o] = (real)sqrt(s);
        }
}

static void init_norm(const model *m, real *P, const nsite *s) {
    for (int j = 0; s->g != NO_OFF && j < m->d; j++)
        P[s->g + j] = 1;
    if (s->b != NO_OFF) memset(P + s->b, 0, sizeof(real) * m->d);
    const nb_norm_def *nd = nb_norm_get(m->c.norm.kind);
    for (int j = 0; s->s != NO_OFF && j < nd->nscalars; j++)
        P[s->s + (size_t)j] = (real)nd->scalar_init(&m->c.norm);
}

void nb_gpt_init_params(model *m, real *P, nb_rng *rng) {
    const int d = m->d;
    normal_fill(P + m->wte, (size_t)m->V * d, 0.02, rng);
    normal_fill(P + m->wpe, (size_t)m->ctx * d, 0.02, rng);
    const double sdp = 0.02 / sqrt(2.0 * m->L);
    for (int l = 0; l < m->L; l++) {
        block *k = &m->bl[l];
        init_norm(m, P, &k->n1);
        init_norm(m, P, &k->n2);
        init_lin(P, &k->qkv, 0.02, rng);
        init_lin(P, &k->proj, sdp, rng);
        init_lin(P, &k->fc, 0.02, rng);
        init_lin(P, &k->fc2, sdp, rng);
    }
    init_norm(m, P, &m->fin);
}

void nb_gpt_set_shard(model *m, int row0, int grad_rows) {
    m->row0 = row0;
    m->grad_rows = grad_rows;
}

const real *nb_gpt_logits(const model *m) {
    return m->logits;
}

/* ---- forward -------------------------------------------------------------------------------- */

static void wn_all(model *m, const real *P) {
    if (!m->nweff) return;
    for (int l = 0; l < m->L; l++) {
        const lin *ls[4] = {&m->bl[l].qkv, &m->bl[l].proj, &m->bl[l].fc, &m->bl[l].fc2};
        real *wn = m->wnorm + (size_t)l * 9 * m->d;
        for (int i = 0; i < 4; i++) {
            nb_weightnorm_forward(m->weff + ls[i]->we, wn, P + ls[i]->w, P + ls[i]->g, ls[i]->out,
                                  ls[i]->in);
            wn += ls[i]->out;
        }
    }
}

/* F of sub-layer s of block k (0 attention, 1 mlp) on u (N, d) into y (N, d), dropped. */
static void sub_fwd(model *m, const real *P, block *k, int l, int s, const real *u, real *y) {
    const int N = m->B * m->T;
    if (s == 0) {
        lin_fwd(m, P, &k->qkv, k->qkv_out, u, N);
        attn_fwd(m, k, (uint64_t)l * 4 + 1);
        lin_fwd(m, P, &k->proj, y, k->att, N);
        drop_rows(m, y, (uint64_t)l * 4 + 2);
    } else {
        lin_fwd(m, P, &k->fc, k->h, u, N);
        gelu_fwd(k->a, k->h, (size_t)N * 4 * m->d);
        lin_fwd(m, P, &k->fc2, y, k->a, N);
        drop_rows(m, y, (uint64_t)l * 4 + 3);
    }
}

double nb_gpt_forward(model *m, const real *P, const int *tok, const int *tgt, int B, int T,
                      int training, int want_grad, uint64_t seed) {
    const int d = m->d, V = m->V, N = B * T;
    m->tok = tok;
    m->B = B;
    m->T = T;
    m->training = training;
    m->want_grad = want_grad && tgt;
    m->seed = seed;
    wn_all(m, P);
    real *x = m->x[0];
    for (int r = 0; r < N; r++) {
        const real *e = P + m->wte + (size_t)tok[r] * d, *pe = P + m->wpe + (size_t)(r % T) * d;
        real *xr = x + (size_t)r * d;
#pragma omp simd
        for (int j = 0; j < d; j++)
            xr[j] = e[j] + pe[j];
    }
    drop_rows(m, x, 0);
    for (int l = 0; l < m->L; l++) {
        block *k = &m->bl[l];
        for (int s = 0; s < 2; s++) {
            const nsite *ns = s ? &k->n2 : &k->n1;
            real *u = s ? k->u2 : k->u1, *st = s ? k->st2 : k->st1;
            const real *xin = m->x[2 * l + s];
            real *xout = m->x[2 * l + s + 1];
            if (m->c.pre_norm) {
                norm_fwd(m, P, ns, u, st, xin, N);
                sub_fwd(m, P, k, l, s, u, xout);
#pragma omp simd
                for (size_t i = 0; i < (size_t)N * d; i++)
                    xout[i] += xin[i];
            } else {
                sub_fwd(m, P, k, l, s, xin, u);
#pragma omp simd
                for (size_t i = 0; i < (size_t)N * d; i++)
                    u[i] += xin[i];
                norm_fwd(m, P, ns, xout, st, u, N);
            }
        }
    }
    const real *hfin = m->x[2 * m->L];
    if (m->c.pre_norm) {
        norm_fwd(m, P, &m->fin, m->fo, m->fst, hfin, N);
        hfin = m->fo;
    }
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, d, 1, hfin, d, P + m->wte, d, 0,
               m->logits, V);
    if (!tgt) return 0;
    const double denom = (double)(m->grad_rows > 0 ? m->grad_rows : B) * T;
    double loss = 0;
#pragma omp parallel for reduction(+ : loss) schedule(static)
    for (int r = 0; r < N; r++) {
        real *z = m->logits + (size_t)r * V;
        real mx = z[0];
        for (int v = 1; v < V; v++)
            mx = z[v] > mx ? z[v] : mx;
        double s = exp((double)(z[0] - mx)); /* >= 1: z[0] <= mx */
        for (int v = 1; v < V; v++)
            s += exp((double)(z[v] - mx));
        const double lse = mx + log(s);
        loss += lse - z[tgt[r]];
        if (want_grad) {
            for (int v = 0; v < V; v++)
                z[v] = (real)(exp((double)z[v] - lse) / denom);
            z[tgt[r]] -= (real)(1 / denom);
        }
    }
    return loss / denom;
}

/* ---- backward ------------------------------------------------------------------------------- */

/* From dy (N, d) (the sub-layer's output gradient, dropout not yet undone; overwritten) adds the
 * gradient with respect to its input u to du. */
static void sub_bwd(model *m, real *G, const real *P, block *k, int l, int s, const real *u,
                    real *dy, real *du) {
    const int N = m->B * m->T, d = m->d;
    if (s == 0) {
        drop_rows(m, dy, (uint64_t)l * 4 + 2);
        memset(m->datt, 0, sizeof(real) * (size_t)N * d);
        lin_bwd(m, G, P, &k->proj, m->datt, dy, k->att, N);
        attn_bwd(m, k, (uint64_t)l * 4 + 1);
        lin_bwd(m, G, P, &k->qkv, du, m->dqkv, u, N);
    } else {
        drop_rows(m, dy, (uint64_t)l * 4 + 3);
        memset(m->dbig, 0, sizeof(real) * (size_t)N * 4 * d);
        lin_bwd(m, G, P, &k->fc2, m->dbig, dy, k->a, N);
        gelu_bwd(m->dbig, k->h, (size_t)N * 4 * d);
        lin_bwd(m, G, P, &k->fc, du, m->dbig, u, N);
    }
}

void nb_gpt_backward(model *m, real *G, const real *P) {
    if (!m->want_grad) return;
    const int d = m->d, V = m->V, B = m->B, T = m->T, N = B * T;
    const size_t nd = (size_t)N * d;
    if (m->nweff) memset(m->dweff, 0, sizeof(real) * m->nweff);
    const real *hfin = m->c.pre_norm ? m->fo : m->x[2 * m->L];
    /* logits = h · wteᵀ */
    real *dx = m->dx;
    memset(m->dz, 0, sizeof(real) * nd);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, d, V, 1, m->logits, V, P + m->wte, d,
               0, m->dz, d);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, V, d, N, 1, m->logits, V, hfin, d, 1,
               G + m->wte, d);
    if (m->c.pre_norm) {
        memset(dx, 0, sizeof(real) * nd);
        norm_bwd(m, G, P, &m->fin, dx, m->dz, m->x[2 * m->L], m->fst, N);
    } else {
        memcpy(dx, m->dz, sizeof(real) * nd);
    }
    for (int l = m->L - 1; l >= 0; l--) {
        block *k = &m->bl[l];
        for (int s = 1; s >= 0; s--) {
            const nsite *ns = s ? &k->n2 : &k->n1;
            const real *u = s ? k->u2 : k->u1, *st = s ? k->st2 : k->st1;
            const real *xin = m->x[2 * l + s];
            if (m->c.pre_norm) {
                /* x' = x + F(N(x)): dx stays, plus N's backward of F's input gradient (F's
                 * backward reads dx itself where no dropout overwrites it) */
                real *dy = dx;
                if (dropping(m)) {
                    memcpy(m->dz, dx, sizeof(real) * nd);
                    dy = m->dz;
                }
                memset(m->du, 0, sizeof(real) * nd);
                sub_bwd(m, G, P, k, l, s, u, dy, m->du);
                norm_bwd(m, G, P, ns, dx, m->du, xin, st, N);
            } else {
                /* x' = N(z), z = x + F(x) */
                memset(m->dz, 0, sizeof(real) * nd);
                norm_bwd(m, G, P, ns, m->dz, dx, u, st, N);
                memcpy(dx, m->dz, sizeof(real) * nd);
                sub_bwd(m, G, P, k, l, s, xin, m->dz, dx);
            }
        }
    }
    drop_rows(m, dx, 0);
    for (int r = 0; r < N; r++) {
        real *e = G + m->wte + (size_t)m->tok[r] * d, *pe = G + m->wpe + (size_t)(r % T) * d;
        const real *g = dx + (size_t)r * d;
#pragma omp simd
        for (int j = 0; j < d; j++) {
            e[j] += g[j];
            pe[j] += g[j];
        }
    }
    if (m->nweff)
        for (int l = 0; l < m->L; l++) {
            const lin *ls[4] = {&m->bl[l].qkv, &m->bl[l].proj, &m->bl[l].fc, &m->bl[l].fc2};
            const real *wn = m->wnorm + (size_t)l * 9 * m->d;
            for (int i = 0; i < 4; i++) {
                nb_weightnorm_backward(G + ls[i]->w, G + ls[i]->g, m->dweff + ls[i]->we,
                                       P + ls[i]->w, P + ls[i]->g, wn, ls[i]->out, ls[i]->in);
                wn += ls[i]->out;
            }
        }
}

void nb_gpt_decay(const model *m, real *P, double factor) {
    const real f = (real)factor;
    size_t n = (size_t)m->V * m->d;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        P[m->wte + i] *= f;
    n = (size_t)m->ctx * m->d;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        P[m->wpe + i] *= f;
    for (int l = 0; l < m->L; l++) {
        const lin *ls[4] = {&m->bl[l].qkv, &m->bl[l].proj, &m->bl[l].fc, &m->bl[l].fc2};
        for (int i = 0; i < 4; i++) {
            n = (size_t)ls[i]->out * ls[i]->in;
#pragma omp simd
            for (size_t j = 0; j < n; j++)
                P[ls[i]->w + j] *= f;
        }
    }
}

double nb_gpt_step_flops(const model *m, int B, int T) {
    const double N = (double)B * T, d = m->d;
    double f = 2 * N * d * (3 * d + d + 4 * d + 4 * d) * m->L; /* the maps */
    f += 2.0 * 2 * B * m->H * (double)T * T * m->dh * m->L;    /* scores and ·v */
    f += 2 * N * d * m->V;                                     /* the logits */
    return 3 * f;
}
