#include "nn/mem.h"
#include "real.h"
/* nn/transformer.c — the encoder–decoder Transformer (generic: float and, with -DNB_F64, double;
 * see nn/nn.h). The model, its options and its contracts are in nn/transformer.h; where each
 * choice comes from in docs/papers.md#transformer.
 *
 * Dimension letters: B sentences, S/T source/target length, d width, H heads, dh = d/H, F the
 * feed-forward width, V vocabulary, N = B*S and M = B*T rows.
 *
 * Cost. Every map is one BLAS gemm over all rows of the batch (q,k,v fused in one (3d, d)
 * map). Attention runs per (sentence, head) pair, pairs split over threads, each pair two gemms
 * forward (scores, ·v) on strided views of the fused q,k,v rows (no transposes or copies) with
 * the scale folded into the first gemm and the mask fused into the softmax, and four backward;
 * OpenBLAS runs single-threaded inside the parallel region. Dropout masks are not stored:
 * they are a hash of (seed, site, index), recomputed in backward, the same for any thread
 * count. Norms are nn/norm.c's kernels on all rows at once. Nothing is allocated in forward or
 * backward. */

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

#define NO_OFF ((size_t)-1)

/* ---- configurations ------------------------------------------------------------------------- */

#ifndef NB_F64
const nb_tf_preset nb_tf_presets[] = {
    {"base", 6, 6, 512, 8, 2048, 0.1, 4000,
     "the paper's (Vaswani et al.'s base, as zero trains it for Table 4)"},
    {"small", 3, 3, 256, 4, 1024, 0.3, 1000,
     "Multi30k (29k pairs, ~12 tokens a sentence): half the width and depth of base, as the "
     "Multi30k/IWSLT-sized setups; dropout 0.3 because base's 0.1 overfits 29k pairs within a "
     "few epochs; warmup 1000 steps (~8 epochs of 4k-token batches) instead of 4000"},
};
const int nb_tf_preset_count = (int)(sizeof nb_tf_presets / sizeof nb_tf_presets[0]);

const nb_tf_preset *nb_tf_preset_find(const char *name) {
    for (int i = 0; i < nb_tf_preset_count; i++)
        if (name && strcmp(nb_tf_presets[i].name, name) == 0) return &nb_tf_presets[i];
    return NULL;
}

void nb_tf_cfg_from_preset(nb_tf_cfg *c, const nb_tf_preset *p, int V, nb_norm_kind kind) {
    memset(c, 0, sizeof *c);
    c->enc_layers = p->enc_layers;
    c->dec_layers = p->dec_layers;
    c->dim = p->dim;
    c->heads = p->heads;
    c->ffn = p->ffn;
    c->vocab = V;
    c->pad = 0;
    c->bos = 1;
    c->eos = 2;
    c->share_emb = 1;
    c->tie_out = 1;
    c->pre_norm = 0;
    c->dropout = c->attn_dropout = c->relu_dropout = p->dropout;
    c->label_smooth = 0.1;
    c->max_pos = 256;
    nb_norm_cfg_default(&c->norm, kind);
}
#endif

/* ---- the model ------------------------------------------------------------------------------ */

typedef struct lin {
    size_t w, b, g; /* weight (out, in) (WeightNorm: v), bias (out), WN gains (out) or NO_OFF */
    int out, in;
} lin;

typedef struct nsite {
    size_t g, b, rm, rv; /* gain, bias, BN running mean and variance; NO_OFF when absent */
    size_t alpha;        /* DyT's alpha (one value) or NO_OFF */
} nsite;

/* One residual sub-layer and what its forward keeps. */
typedef struct sub {
    int kind; /* 0 self-attention, 1 encoder–decoder attention, 2 feed-forward */
    nsite ns; /* its norm */
    lin a, o; /* self: a = q,k,v (3d, d); cross: a = q (d, d); ffn: a = W1 (F, d); o the last map */
    lin kv;   /* cross: k,v (2d, d) of the encoder output */
    real *u;  /* pre: N(x) (rows, d) */
    real *z;  /* post: x + drop(y) (rows, d) */
    real *st; /* norm statistics */
    real *y;  /* F(u) (rows, d) */
    real *a_out; /* self: qkv (rows, 3d); cross: q (rows, d); ffn: relu(h) (rows, F) */
    real *kvb;   /* cross: (N, 2d) */
    real *P;     /* attention weights (B, H, Tq, Tk) */
    real *ctx;   /* attention output before the output map (rows, d) */
    uint64_t site;
} sub;

typedef struct stack {
    int nsub;
    sub *s;
    real **x;  /* nsub + 1 residual-stream buffers (rows, d) */
    nsite fin; /* pre: the final norm */
    real *fin_out, *fin_st;
} stack;

struct nb_tf {
    nb_tf_cfg c;
    int d, H, dh, F, V, maxr, maxl;
    size_t emb_src, emb_tgt, emb_b, out_w;
    stack enc, dec;
    lin **lins;
    int nlins;
    real *pe;                /* (max_pos, d) */
    real *weff, *dweff, *wn; /* WeightNorm: effective weights, their gradients, row norms */
    size_t ptotal;
    /* the last forward */
    const int *src, *tgt;
    int B, S, T, training, want_grad;
    uint64_t seed;
    int row0, grad_rows; /* nb_tf_set_shard */
    int *slen, *tlen, *vsrc, *vtgt, nvs, nvt;
    real *logits; /* (maxr, V) */
    real *rowl;   /* (2, maxr): per-row losses, then per-row -log p(target) */
    const real *enc_out, *dec_out;
    /* scratch */
    real *g1, *g2, *dy, *du, *dctx, *dqkv, *dkv, *denc, *hd, *dhb, *pk1, *pk2, *pk3;
    real *ascr;
    size_t ascr_n;
    int nthr;
};

typedef nb_tf model;

static real *alloc_real(size_t n) {
    return nb_mem_alloc(n * sizeof(real)); /* aligned, zeroed, noted (nn/mem.h) */
}

/* the run's norm: its row of the table (nn/norms/norms.h) */
static const nb_norm_def *ndef(const nb_norm_cfg *c) {
    return nb_norm_get(c->kind);
}

/* a norm that normalizes the activations (row-wise or over the batch): it has sites */
static int has_sites(const nb_norm_def *nd) {
    return nd->acts == NB_ON_ROWS || nd->acts == NB_ON_FEATURES;
}

/* ---- dropout: a hash of (seed, site, index) ------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t site_key(uint64_t seed, uint64_t site) {
    return mix64(seed ^ mix64(site * 0x2545f4914f6cdd1dull));
}

static inline uint32_t drop_thr(double rate) {
    double t = rate * 4294967296.0;
    return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

/* The dropout index of element 0 of position t of sentence b, in rows of width w: keyed by the
 * sentence's index in the whole batch (m->row0 + b) and the position, never by the layout of the
 * batch at hand, so a batch split over processes, or padded to other lengths, draws the same
 * masks as one process. */
static inline uint64_t drop_base(const model *m, int b, int t, int w) {
    return ((uint64_t)(m->row0 + b) * (uint64_t)m->maxl + (uint64_t)t) * (uint64_t)w;
}

/* The dropout index of attention weight (query i, key 0) of head h of sentence b. */
static inline uint64_t drop_base_att(const model *m, int b, int h, int i) {
    return (((uint64_t)(m->row0 + b) * (uint64_t)m->H + (uint64_t)h) * (uint64_t)m->maxl +
            (uint64_t)i) *
           (uint64_t)m->maxl;
}

/* The dropout hashes of n consecutive indices from i0 (an element survives when its hash is at
 * least drop_thr(rate)), in one vectorizable loop: hashing inside the select leaves it scalar. */
static inline void drop_hashes(uint32_t *h, uint64_t key, uint64_t i0, int n) {
#pragma omp simd
    for (int j = 0; j < n; j++)
        h[j] = (uint32_t)(mix64(key + (i0 + (uint64_t)j) * 0xd1b54a32d192ed03ull) >> 32);
}

enum { DROP_BLK = 256 };

/* out[j] = in[j] * sc where kept, else 0, for the Tk attention weights of one query row (their
 * dropout indices a0 on); out may be in. */
static inline void drop_att_row(real *out, const real *in, int Tk, uint64_t key, uint64_t a0,
                                uint32_t thr, real sc) {
    uint32_t h[DROP_BLK];
    for (int j0 = 0; j0 < Tk; j0 += DROP_BLK) {
        const int len = Tk - j0 < DROP_BLK ? Tk - j0 : DROP_BLK;
        drop_hashes(h, key, a0 + (uint64_t)j0, len);
#pragma omp simd
        for (int j = 0; j < len; j++)
            out[j0 + j] = h[j] >= thr ? in[j0 + j] * sc : (real)0;
    }
}

/* out = in ⊙ mask / (1 - rate) over B*L rows (sentence b, position t: row b*L + t) of width w
 * (out may be in); rate <= 0: a copy. */
static void drop_apply(const model *m, real *out, const real *in, int B, int L, int w, double rate,
                       uint64_t key) {
    const size_t n = (size_t)B * L * w;
    if (!(rate > 0)) {
        if (out != in) memcpy(out, in, n * sizeof(real));
        return;
    }
    const uint32_t thr = drop_thr(rate);
    const real sc = (real)(1.0 / (1.0 - rate));
    /* blocks of up to 256: the hashes in one vectorizable loop, then the select (the mask's
     * values; hashing inside the select kept the loop scalar, 11% of the Transformer's step) */
    enum { BLK = DROP_BLK };
    const int rows = B * L;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int r = 0; r < rows; r++) {
        const uint64_t g0 = drop_base(m, r / L, r % L, w);
        real *o = out + (size_t)r * w;
        const real *x = in + (size_t)r * w;
        for (int j0 = 0; j0 < w; j0 += BLK) {
            const int len = w - j0 < BLK ? w - j0 : BLK;
            uint32_t h[BLK];
            drop_hashes(h, key, g0 + (uint64_t)j0, len);
#pragma omp simd
            for (int j = 0; j < len; j++)
                o[j0 + j] = h[j] >= thr ? x[j0 + j] * sc : (real)0;
        }
    }
}

/* ---- norms ---------------------------------------------------------------------------------- */

static void norm_fwd(model *m, real *P, const nsite *ns, real *out, real *st, const real *in,
                     int rows, const int *valid, int nvalid, int training) {
    const int d = m->d;
    const nb_norm_cfg *cfg = &m->c.norm;
    const nb_norm_def *nd = ndef(cfg);
    const nb_norm_ops *ops = nd->REAL_OPS;
    const real *g = ns->g != NO_OFF ? P + ns->g : NULL, *b = ns->b != NO_OFF ? P + ns->b : NULL;
    const real *s = ns->alpha != NO_OFF ? P + ns->alpha : NULL;
    if (nd->acts == NB_ON_ROWS) { /* statistics per row: st, st + rows */
        ops->forward(out, st, st + rows, NULL, NULL, in, g, b, s, rows, d, training, cfg);
    } else if (nd->acts == NB_ON_FEATURES) { /* statistics per feature: st, st + d */
        real *rm = ns->rm != NO_OFF ? P + ns->rm : NULL, *rv = ns->rv != NO_OFF ? P + ns->rv : NULL;
        if (training) { /* the valid rows only, packed */
            for (int i = 0; i < nvalid; i++)
                memcpy(m->pk1 + (size_t)i * d, in + (size_t)valid[i] * d, sizeof(real) * d);
            ops->forward(m->pk2, st, st + d, rm, rv, m->pk1, g, b, s, nvalid, d, 1, cfg);
            memset(out, 0, sizeof(real) * (size_t)rows * d);
            for (int i = 0; i < nvalid; i++)
                memcpy(out + (size_t)valid[i] * d, m->pk2 + (size_t)i * d, sizeof(real) * d);
        } else { /* the running averages (not written in evaluation) */
            ops->forward(out, st, st + d, rm, rv, in, g, b, s, rows, d, 0, cfg);
        }
    } else if (out != in) { /* none, weight */
        memcpy(out, in, sizeof(real) * (size_t)rows * d);
    }
}

/* ACCUMULATES into din (which may not alias dout) and the norm's gradients in G. */
static void norm_bwd(model *m, real *G, const real *P, const nsite *ns, real *din, const real *dout,
                     const real *in, const real *st, int rows, const int *vl, int nv) {
    const int d = m->d;
    const nb_norm_cfg *cfg = &m->c.norm;
    const size_t n = (size_t)rows * d;
    const nb_norm_def *nd = ndef(cfg);
    const nb_norm_ops *ops = nd->REAL_OPS;
    const real *g = ns->g != NO_OFF ? P + ns->g : NULL;
    real *dg = ns->g != NO_OFF ? G + ns->g : NULL, *db = ns->b != NO_OFF ? G + ns->b : NULL;
    const real *s = ns->alpha != NO_OFF ? P + ns->alpha : NULL;
    real *ds = ns->alpha != NO_OFF ? G + ns->alpha : NULL;
    if (nd->acts == NB_ON_ROWS) {
        ops->backward(din, dg, db, ds, dout, in, g, s, st, st + rows, rows, d, 1, cfg, 0);
    } else if (nd->acts == NB_ON_FEATURES && !m->training) {
        ops->backward(din, dg, db, ds, dout, in, g, s, st, st + d, rows, d, 0, cfg, 0);
    } else if (nd->acts == NB_ON_FEATURES) { /* the valid rows only, packed */
        for (int i = 0; i < nv; i++) {
            memcpy(m->pk1 + (size_t)i * d, dout + (size_t)vl[i] * d, sizeof(real) * d);
            memcpy(m->pk2 + (size_t)i * d, in + (size_t)vl[i] * d, sizeof(real) * d);
        }
        memset(m->pk3, 0, sizeof(real) * (size_t)nv * d);
        ops->backward(m->pk3, dg, db, ds, m->pk1, m->pk2, g, s, st, st + d, nv, d, 1, cfg, 0);
        for (int i = 0; i < nv; i++) {
            real *o = din + (size_t)vl[i] * d;
            const real *s2 = m->pk3 + (size_t)i * d;
#pragma omp simd
            for (int c = 0; c < d; c++)
                o[c] += s2[c];
        }
    } else { /* none, weight: the identity */
#pragma omp parallel for simd schedule(static) if (n >= 65536)
        for (size_t i = 0; i < n; i++)
            din[i] += dout[i];
    }
}

/* ---- linear maps ---------------------------------------------------------------------------- */

static inline const real *lin_w(const model *m, const real *P, const lin *l) {
    return m->weff ? m->weff + l->w : P + l->w;
}

static void lin_fwd(const model *m, const real *P, const lin *l, real *out, const real *in,
                    int rows) {
    nb_dense_forward(out, in, lin_w(m, P, l), P + l->b, rows, l->in, l->out);
}

/* Accumulates din (may be NULL), the weight's and the bias's gradients. */
static void lin_bwd(const model *m, real *G, const real *P, const lin *l, real *din,
                    const real *dout, const real *in, int rows) {
    nb_dense_backward(din, m->dweff ? m->dweff + l->w : G + l->w, G + l->b, dout, in,
                      lin_w(m, P, l), rows, l->in, l->out);
}

static void wn_prepare(model *m, const real *P) {
    if (!m->weff) return;
    for (int i = 0; i < m->nlins; i++) {
        const lin *l = m->lins[i];
        nb_weightnorm_forward(m->weff + l->w, m->wn + l->g, P + l->w, P + l->g, l->out, l->in);
    }
}

/* ---- attention ------------------------------------------------------------------------------ */

/* For each sentence b and head h: P = softmax(mask(q kᵀ/sqrt(dh))), ctx = drop(P)·v. q rows
 * b*Tq.., k and v rows b*Tk.., head h at columns h*dh of each (leading dimensions ldq, ldk).
 * Key j is visible to query i when j < klen[b] (klen != NULL) or j <= i (causal). */
static void attn_fwd(model *m, real *P, real *ctx, const real *q, int ldq, const real *k,
                     const real *v, int ldk, int B, int Tq, int Tk, const int *klen, double rate,
                     uint64_t key) {
    const int H = m->H, dh = m->dh, d = m->d;
    const real scale = (real)(1.0 / sqrt((double)dh));
    const uint32_t thr = drop_thr(rate);
    const real dsc = (real)(rate > 0 ? 1.0 / (1.0 - rate) : 1.0);
#pragma omp parallel for schedule(dynamic, 1) if (B * H > 1 && (size_t)B * Tq * Tk * d >= 32768)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const size_t base = (size_t)bh * Tq * Tk;
        real *Pb = P + base;
        const real *qb = q + (size_t)b * Tq * ldq + h * dh;
        const real *kb = k + (size_t)b * Tk * ldk + h * dh;
        const real *vb = v + (size_t)b * Tk * ldk + h * dh;
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, dh, scale, qb, ldq, kb, ldk,
                   (real)0, Pb, Tk);
        for (int i = 0; i < Tq; i++) {
            real *p = Pb + (size_t)i * Tk;
            const int n = klen ? klen[b] : (i + 1 < Tk ? i + 1 : Tk);
            real mx = p[0];
            for (int j = 1; j < n; j++)
                mx = p[j] > mx ? p[j] : mx;
            double s = 0;
            for (int j = 0; j < n; j++) {
                p[j] = REAL_EXP(p[j] - mx);
                s += p[j];
            }
            const real inv = (real)(1.0 / s);
            for (int j = 0; j < n; j++)
                p[j] *= inv;
            for (int j = n; j < Tk; j++)
                p[j] = 0;
        }
        const real *pd = Pb;
        if (rate > 0) {
            real *scr = m->ascr + (size_t)omp_get_thread_num() * m->ascr_n;
            for (int i = 0; i < Tq; i++)
                drop_att_row(scr + (size_t)i * Tk, Pb + (size_t)i * Tk, Tk, key,
                             drop_base_att(m, b, h, i), thr, dsc);
            pd = scr;
        }
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, dh, Tk, (real)1, pd, Tk, vb, ldk,
                   (real)0, ctx + (size_t)b * Tq * d + h * dh, d);
    }
}

/* Accumulates dq, dk, dv (laid out as q, k, v) from dctx. */
static void attn_bwd(model *m, const real *P, const real *dctx, const real *q, int ldq,
                     const real *k, const real *v, int ldk, real *dq, real *dk, real *dv, int B,
                     int Tq, int Tk, double rate, uint64_t key) {
    const int H = m->H, dh = m->dh, d = m->d;
    const real scale = (real)(1.0 / sqrt((double)dh));
    const uint32_t thr = drop_thr(rate);
    const real dsc = (real)(rate > 0 ? 1.0 / (1.0 - rate) : 1.0);
#pragma omp parallel for schedule(dynamic, 1) if (B * H > 1 && (size_t)B * Tq * Tk * d >= 32768)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        const size_t base = (size_t)bh * Tq * Tk, n = (size_t)Tq * Tk;
        const real *Pb = P + base;
        const size_t qo = (size_t)b * Tq * ldq + h * dh, ko = (size_t)b * Tk * ldk + h * dh;
        const real *dc = dctx + (size_t)b * Tq * d + h * dh;
        real *scr = m->ascr + (size_t)omp_get_thread_num() * m->ascr_n;
        real *pd = scr, *dp = scr + n;
        const real *pdr = Pb;
        if (rate > 0) {
            for (int i = 0; i < Tq; i++)
                drop_att_row(pd + (size_t)i * Tk, Pb + (size_t)i * Tk, Tk, key,
                             drop_base_att(m, b, h, i), thr, dsc);
            pdr = pd;
        }
        /* d drop(P) = dctx vᵀ; dv += drop(P)ᵀ dctx */
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, dh, (real)1, dc, d, v + ko, ldk,
                   (real)0, dp, Tk);
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, dh, Tq, (real)1, pdr, Tk, dc, d,
                   (real)1, dv + ko, ldk);
        if (rate > 0)
            for (int i = 0; i < Tq; i++)
                drop_att_row(dp + (size_t)i * Tk, dp + (size_t)i * Tk, Tk, key,
                             drop_base_att(m, b, h, i), thr, dsc);
        /* softmax backward, the scale folded in: dS = P ⊙ (dP - Σ P dP) / sqrt(dh) */
        for (int i = 0; i < Tq; i++) {
            const real *p = Pb + (size_t)i * Tk;
            real *g = dp + (size_t)i * Tk;
            double s = 0;
            for (int j = 0; j < Tk; j++)
                s += (double)p[j] * (double)g[j];
            const real sr = (real)s;
            for (int j = 0; j < Tk; j++)
                g[j] = p[j] * (g[j] - sr) * scale;
        }
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, dh, Tk, (real)1, dp, Tk, k + ko,
                   ldk, (real)1, dq + qo, ldq);
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, dh, Tq, (real)1, dp, Tk, q + qo,
                   ldq, (real)1, dk + ko, ldk);
    }
}

/* ---- sub-layers ----------------------------------------------------------------------------- */

enum { SITE_RES = 0, SITE_ATT = 1, SITE_RELU = 2 };

/* Batch geometry of the stack being run. */
typedef struct geo {
    int rows, B, Tq;
    const int *valid;
    int nvalid;
    const int *klen; /* self-attention key lengths (encoder); NULL: causal */
} geo;

static void sub_fwd(model *m, real *P, sub *s, const real *x, real *xo, const geo *g,
                    int training) {
    const int d = m->d, rows = g->rows;
    const int pre = m->c.pre_norm;
    const double rres = training ? m->c.dropout : 0, ratt = training ? m->c.attn_dropout : 0,
                 rrelu = training ? m->c.relu_dropout : 0;
    const real *u = x;
    if (pre) {
        norm_fwd(m, P, &s->ns, s->u, s->st, x, rows, g->valid, g->nvalid, training);
        u = s->u;
    }
    if (s->kind == 0) {
        lin_fwd(m, P, &s->a, s->a_out, u, rows);
        attn_fwd(m, s->P, s->ctx, s->a_out, 3 * d, s->a_out + d, s->a_out + 2 * d, 3 * d, g->B,
                 g->Tq, g->Tq, g->klen, ratt, site_key(m->seed, s->site + SITE_ATT));
        lin_fwd(m, P, &s->o, s->y, s->ctx, rows);
    } else if (s->kind == 1) {
        lin_fwd(m, P, &s->a, s->a_out, u, rows);
        lin_fwd(m, P, &s->kv, s->kvb, m->enc_out, m->B * m->S);
        attn_fwd(m, s->P, s->ctx, s->a_out, d, s->kvb, s->kvb + d, 2 * d, g->B, g->Tq, m->S,
                 m->slen, ratt, site_key(m->seed, s->site + SITE_ATT));
        lin_fwd(m, P, &s->o, s->y, s->ctx, rows);
    } else {
        lin_fwd(m, P, &s->a, s->a_out, u, rows);
        nb_relu_forward(s->a_out, s->a_out, (size_t)rows * m->F);
        drop_apply(m, m->hd, s->a_out, g->B, g->Tq, m->F, rrelu,
                   site_key(m->seed, s->site + SITE_RELU));
        lin_fwd(m, P, &s->o, s->y, m->hd, rows);
    }
    /* residual */
    const size_t n = (size_t)rows * d;
    real *z = pre ? xo : s->z;
    drop_apply(m, z, s->y, g->B, g->Tq, d, rres, site_key(m->seed, s->site + SITE_RES));
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++)
        z[i] += x[i];
    if (!pre) norm_fwd(m, P, &s->ns, xo, s->st, s->z, rows, g->valid, g->nvalid, training);
}

/* From gx = dL/d(output of the sub-layer) (one of g1, g2) returns dL/d(its input x) (in g1 or
 * g2). Cross-attention accumulates the encoder output's gradient into m->denc. */
static real *sub_bwd(model *m, real *G, const real *P, sub *s, const real *x, real *gx,
                     const geo *g) {
    const int d = m->d, rows = g->rows, pre = m->c.pre_norm;
    const size_t n = (size_t)rows * d;
    if (!pre) { /* through the norm: gx becomes dL/dz, which is also the residual's gradient */
        real *t = gx == m->g1 ? m->g2 : m->g1;
        memset(t, 0, n * sizeof(real));
        norm_bwd(m, G, P, &s->ns, t, gx, s->z, s->st, rows, g->valid, g->nvalid);
        gx = t;
    }
    const int tr = m->training;
    const double rres = tr ? m->c.dropout : 0, ratt = tr ? m->c.attn_dropout : 0,
                 rrelu = tr ? m->c.relu_dropout : 0;
    drop_apply(m, m->dy, gx, g->B, g->Tq, d, rres, site_key(m->seed, s->site + SITE_RES));
    const real *u = pre ? s->u : x;
    memset(m->du, 0, n * sizeof(real));
    if (s->kind == 0) {
        memset(m->dctx, 0, n * sizeof(real));
        lin_bwd(m, G, P, &s->o, m->dctx, m->dy, s->ctx, rows);
        memset(m->dqkv, 0, 3 * n * sizeof(real));
        attn_bwd(m, s->P, m->dctx, s->a_out, 3 * d, s->a_out + d, s->a_out + 2 * d, 3 * d, m->dqkv,
                 m->dqkv + d, m->dqkv + 2 * d, g->B, g->Tq, g->Tq, ratt,
                 site_key(m->seed, s->site + SITE_ATT));
        lin_bwd(m, G, P, &s->a, m->du, m->dqkv, u, rows);
    } else if (s->kind == 1) {
        const int N = m->B * m->S;
        memset(m->dctx, 0, n * sizeof(real));
        lin_bwd(m, G, P, &s->o, m->dctx, m->dy, s->ctx, rows);
        memset(m->dqkv, 0, n * sizeof(real));
        memset(m->dkv, 0, (size_t)N * 2 * d * sizeof(real));
        attn_bwd(m, s->P, m->dctx, s->a_out, d, s->kvb, s->kvb + d, 2 * d, m->dqkv, m->dkv,
                 m->dkv + d, g->B, g->Tq, m->S, ratt, site_key(m->seed, s->site + SITE_ATT));
        lin_bwd(m, G, P, &s->a, m->du, m->dqkv, u, rows);
        lin_bwd(m, G, P, &s->kv, m->denc, m->dkv, m->enc_out, N);
    } else {
        const size_t nf = (size_t)rows * m->F;
        const uint64_t kr = site_key(m->seed, s->site + SITE_RELU);
        drop_apply(m, m->hd, s->a_out, g->B, g->Tq, m->F, rrelu, kr);
        memset(m->dhb, 0, nf * sizeof(real));
        lin_bwd(m, G, P, &s->o, m->dhb, m->dy, m->hd, rows);
        drop_apply(m, m->dhb, m->dhb, g->B, g->Tq, m->F, rrelu, kr);
        const real *h = s->a_out;
        real *dh = m->dhb;
#pragma omp parallel for simd schedule(static) if (nf >= 65536)
        for (size_t i = 0; i < nf; i++)
            dh[i] = h[i] > 0 ? dh[i] : (real)0;
        lin_bwd(m, G, P, &s->a, m->du, m->dhb, u, rows);
    }
    if (pre) {
        norm_bwd(m, G, P, &s->ns, gx, m->du, x, s->st, rows, g->valid, g->nvalid);
    } else {
        const real *du = m->du;
#pragma omp parallel for simd schedule(static) if (n >= 65536)
        for (size_t i = 0; i < n; i++)
            gx[i] += du[i];
    }
    return gx;
}

/* ---- embeddings ----------------------------------------------------------------------------- */

/* x[row] = E[tok]·sqrt(d) + e_b + PE(pos); shift: the decoder's input (token t-1; position 0
 * bos or the zero vector). Then dropout. */
static void embed_fwd(model *m, const real *P, real *x, const int *tok, int B, int L, int shift,
                      size_t E, double rate, uint64_t key) {
    const int d = m->d;
    const real sc = (real)sqrt((double)d);
#pragma omp parallel for schedule(static) if ((size_t)B * L * d >= 65536)
    for (int r = 0; r < B * L; r++) {
        const int t = r % L;
        real *o = x + (size_t)r * d;
        const real *pe = m->pe + (size_t)t * d;
        int id = shift ? (t == 0 ? m->c.bos : tok[r - 1]) : tok[r];
        if (id < 0) {
            memcpy(o, pe, sizeof(real) * d);
            continue;
        }
        const real *e = P + E + (size_t)id * d, *eb = P + m->emb_b;
#pragma omp simd
        for (int c = 0; c < d; c++)
            o[c] = e[c] * sc + eb[c] + pe[c];
    }
    drop_apply(m, x, x, B, L, d, rate, key);
}

/* gx: dL/d(dropout output); overwritten. */
static void embed_bwd(model *m, real *G, real *gx, const int *tok, int B, int L, int shift,
                      size_t E, double rate, uint64_t key) {
    const int d = m->d;
    const real sc = (real)sqrt((double)d);
    drop_apply(m, gx, gx, B, L, d, rate, key);
    real *gb = G + m->emb_b;
    for (int r = 0; r < B * L; r++) {
        const int t = r % L;
        int id = shift ? (t == 0 ? m->c.bos : tok[r - 1]) : tok[r];
        if (id < 0) continue;
        const real *g = gx + (size_t)r * d;
        real *ge = G + E + (size_t)id * d;
#pragma omp simd
        for (int c = 0; c < d; c++) {
            ge[c] += g[c] * sc;
            gb[c] += g[c];
        }
    }
}

/* ---- construction --------------------------------------------------------------------------- */

enum { G_EMB, G_OUT, G_ENC, G_DEC, G_BN, G_COUNT };

/* Offsets are first taken relative to their group, then moved by the group's place in the
 * layout (nb_layout holds a few groups rather than a few hundred tensors). */
typedef struct alloc {
    size_t **p;
    int *grp;
    int n, cap;
    size_t cur[G_COUNT];
    int fail;
} alloc;

static void take(alloc *a, size_t *p, int grp, size_t n) {
    if (a->n == a->cap) {
        int nc = a->cap ? 2 * a->cap : 256;
        size_t **np = realloc(a->p, sizeof *np * (size_t)nc);
        int *ng = np ? realloc(a->grp, sizeof *ng * (size_t)nc) : NULL;
        if (np) a->p = np;
        if (!np || !ng) {
            a->fail = 1;
            return;
        }
        a->grp = ng;
        a->cap = nc;
    }
    *p = a->cur[grp];
    a->cur[grp] += (n + 15) & ~(size_t)15;
    a->p[a->n] = p;
    a->grp[a->n++] = grp;
}

static void take_lin(model *m, alloc *a, lin *l, int grp, int out, int in) {
    l->out = out;
    l->in = in;
    take(a, &l->w, grp, (size_t)out * in);
    take(a, &l->b, grp, (size_t)out);
    l->g = NO_OFF;
    if (ndef(&m->c.norm)->acts == NB_ON_WEIGHTS) take(a, &l->g, grp, (size_t)out);
}

static void take_norm(model *m, alloc *a, nsite *ns, int grp) {
    const nb_norm_def *nd = ndef(&m->c.norm);
    ns->g = ns->b = ns->rm = ns->rv = ns->alpha = NO_OFF;
    if (!has_sites(nd)) return;
    if (nd->params & NB_NP_GAIN) take(a, &ns->g, grp, (size_t)m->d);
    if (nd->params & NB_NP_SHIFT) take(a, &ns->b, grp, (size_t)m->d);
    if (nd->nscalars > 0) take(a, &ns->alpha, grp, (size_t)nd->nscalars);
    if (nd->params & NB_NP_RUNNING) {
        take(a, &ns->rm, G_BN, (size_t)m->d);
        take(a, &ns->rv, G_BN, (size_t)m->d);
    }
}

static int stack_new(model *m, alloc *a, stack *st, int L, int dec, int grp) {
    const int per = dec ? 3 : 2, d = m->d, R = m->maxr, H = m->H;
    st->nsub = L * per;
    st->s = calloc((size_t)st->nsub, sizeof *st->s);
    st->x = calloc((size_t)st->nsub + 1, sizeof *st->x);
    if (!st->s || !st->x) return -1;
    for (int i = 0; i <= st->nsub; i++)
        if (!(st->x[i] = alloc_real((size_t)R * d))) return -1;
    const size_t stn = (size_t)2 * (R > d ? R : d);
    for (int i = 0; i < st->nsub; i++) {
        sub *s = &st->s[i];
        const int j = i % per;
        s->kind = dec ? j : (j == 0 ? 0 : 2);
        s->site = (uint64_t)(dec ? 0x10000 : 0x20000) + (uint64_t)i * 8;
        take_norm(m, a, &s->ns, grp);
        if (s->kind == 0) {
            take_lin(m, a, &s->a, grp, 3 * d, d);
            take_lin(m, a, &s->o, grp, d, d);
        } else if (s->kind == 1) {
            take_lin(m, a, &s->a, grp, d, d);
            take_lin(m, a, &s->kv, grp, 2 * d, d);
            take_lin(m, a, &s->o, grp, d, d);
        } else {
            take_lin(m, a, &s->a, grp, m->F, d);
            take_lin(m, a, &s->o, grp, d, m->F);
        }
        if (!(s->st = alloc_real(stn)) || !(s->y = alloc_real((size_t)R * d))) return -1;
        if (m->c.pre_norm ? !(s->u = alloc_real((size_t)R * d))
                          : !(s->z = alloc_real((size_t)R * d)))
            return -1;
        size_t an = (size_t)R * (s->kind == 0 ? 3 * d : s->kind == 1 ? d : m->F);
        if (!(s->a_out = alloc_real(an))) return -1;
        if (s->kind != 2) {
            if (!(s->P = alloc_real((size_t)H * R * m->maxl)) ||
                !(s->ctx = alloc_real((size_t)R * d)))
                return -1;
        }
        if (s->kind == 1 && !(s->kvb = alloc_real((size_t)R * 2 * d))) return -1;
    }
    st->fin.g = st->fin.b = st->fin.rm = st->fin.rv = st->fin.alpha = NO_OFF;
    if (m->c.pre_norm) {
        take_norm(m, a, &st->fin, grp);
        if (!(st->fin_out = alloc_real((size_t)R * d)) || !(st->fin_st = alloc_real(stn)))
            return -1;
    }
    return 0;
}

static void stack_free(stack *st) {
    if (st->s)
        for (int i = 0; i < st->nsub; i++) {
            sub *s = &st->s[i];
            free(s->u);
            free(s->z);
            free(s->st);
            free(s->y);
            free(s->a_out);
            free(s->kvb);
            free(s->P);
            free(s->ctx);
        }
    if (st->x)
        for (int i = 0; i <= st->nsub; i++)
            free(st->x[i]);
    free(st->s);
    free(st->x);
    free(st->fin_out);
    free(st->fin_st);
}

void nb_tf_free(model *m) {
    if (!m) return;
    stack_free(&m->enc);
    stack_free(&m->dec);
    free(m->lins);
    real *bufs[] = {m->pe, m->weff, m->dweff, m->wn,   m->logits, m->rowl, m->g1,
                    m->g2, m->dy,   m->du,    m->dctx, m->dqkv,   m->dkv,  m->denc,
                    m->hd, m->dhb,  m->pk1,   m->pk2,  m->pk3,    m->ascr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(m->slen);
    free(m->tlen);
    free(m->vsrc);
    free(m->vtgt);
    free(m);
}

const nb_tf_cfg *nb_tf_config(const model *m) {
    return &m->c;
}

static void collect_lins(model *m, stack *st, int count_only) {
    for (int i = 0; i < st->nsub; i++) {
        sub *s = &st->s[i];
        lin *ls[3] = {&s->a, &s->o, s->kind == 1 ? &s->kv : NULL};
        for (int j = 0; j < 3; j++)
            if (ls[j]) {
                if (!count_only) m->lins[m->nlins] = ls[j];
                m->nlins++;
            }
    }
}

model *nb_tf_new(const nb_tf_cfg *cfg, nb_layout *layout, int max_rows, nb_err *err) {
    if (cfg->enc_layers < 1 || cfg->dec_layers < 1 || cfg->dim < 2 || cfg->heads < 1 ||
        cfg->dim % cfg->heads || cfg->dim % 2 || cfg->ffn < 1 || cfg->vocab < 2 ||
        cfg->max_pos < 1 || max_rows < 1) {
        nb_errf(err,
                "transformer: invalid configuration (layers %d+%d, dim %d, heads %d, ffn %d, "
                "vocabulary %d)",
                cfg->enc_layers, cfg->dec_layers, cfg->dim, cfg->heads, cfg->ffn, cfg->vocab);
        nb_hintf(err, "the width must be even and a multiple of the number of heads");
        return NULL;
    }
    model *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->c = *cfg;
    m->d = cfg->dim;
    m->H = cfg->heads;
    m->dh = cfg->dim / cfg->heads;
    m->F = cfg->ffn;
    m->V = cfg->vocab;
    m->maxr = max_rows;
    m->maxl = cfg->max_pos;
    alloc a;
    memset(&a, 0, sizeof a);
    const size_t VD = (size_t)m->V * m->d;
    take(&a, &m->emb_src, G_EMB, VD);
    if (cfg->share_emb)
        m->emb_tgt = m->emb_src;
    else
        take(&a, &m->emb_tgt, G_EMB, VD);
    take(&a, &m->emb_b, G_EMB, (size_t)m->d);
    int untied = !cfg->tie_out;
    if (untied) take(&a, &m->out_w, G_OUT, VD);
    if (stack_new(m, &a, &m->enc, cfg->enc_layers, 0, G_ENC) ||
        stack_new(m, &a, &m->dec, cfg->dec_layers, 1, G_DEC) || a.fail) {
        free(a.p);
        free(a.grp);
        goto oom;
    }
    /* place the groups; shared offsets (share_emb, tie_out) are moved once */
    static const char *gname[G_COUNT] = {"tf.emb", "tf.out", "tf.enc", "tf.dec", "tf.bn"};
    size_t base[G_COUNT];
    for (int gi = 0; gi < G_COUNT; gi++) {
        base[gi] = 0;
        if (!a.cur[gi]) continue;
        base[gi] = nb_layout_add(layout, gname[gi], a.cur[gi], gi != G_BN);
        if (base[gi] == (size_t)-1) {
            free(a.p);
            free(a.grp);
            nb_errf(err, "transformer: the parameter table is full");
            nb_tf_free(m);
            return NULL;
        }
    }
    for (int i = 0; i < a.n; i++)
        *a.p[i] += base[a.grp[i]];
    free(a.p);
    free(a.grp);
    if (cfg->share_emb) m->emb_tgt = m->emb_src;
    if (!untied) m->out_w = m->emb_tgt;
    m->ptotal = layout->total;
    collect_lins(m, &m->enc, 1);
    collect_lins(m, &m->dec, 1);
    m->lins = calloc((size_t)m->nlins, sizeof *m->lins);
    if (!m->lins) goto oom;
    m->nlins = 0;
    collect_lins(m, &m->enc, 0);
    collect_lins(m, &m->dec, 0);
    const int d = m->d, R = m->maxr;
    m->nthr = omp_get_max_threads();
    m->ascr_n = (size_t)2 * m->maxl * m->maxl;
    if (!(m->pe = alloc_real((size_t)m->maxl * d)) || !(m->logits = alloc_real((size_t)R * m->V)) ||
        !(m->rowl = alloc_real((size_t)2 * R)) || !(m->g1 = alloc_real((size_t)R * d)) ||
        !(m->g2 = alloc_real((size_t)R * d)) || !(m->dy = alloc_real((size_t)R * d)) ||
        !(m->du = alloc_real((size_t)R * d)) || !(m->dctx = alloc_real((size_t)R * d)) ||
        !(m->dqkv = alloc_real((size_t)R * 3 * d)) || !(m->dkv = alloc_real((size_t)R * 2 * d)) ||
        !(m->denc = alloc_real((size_t)R * d)) || !(m->hd = alloc_real((size_t)R * m->F)) ||
        !(m->dhb = alloc_real((size_t)R * m->F)) || !(m->ascr = alloc_real(m->ascr_n * m->nthr)))
        goto oom;
    if (ndef(&cfg->norm)->acts == NB_ON_FEATURES &&
        (!(m->pk1 = alloc_real((size_t)R * d)) || !(m->pk2 = alloc_real((size_t)R * d)) ||
         !(m->pk3 = alloc_real((size_t)R * d))))
        goto oom;
    if (ndef(&cfg->norm)->acts == NB_ON_WEIGHTS &&
        (!(m->weff = alloc_real(m->ptotal)) || !(m->dweff = alloc_real(m->ptotal)) ||
         !(m->wn = alloc_real(m->ptotal))))
        goto oom;
    if (!(m->slen = calloc((size_t)R, sizeof(int))) ||
        !(m->tlen = calloc((size_t)R, sizeof(int))) ||
        !(m->vsrc = calloc((size_t)R, sizeof(int))) || !(m->vtgt = calloc((size_t)R, sizeof(int))))
        goto oom;
    /* zero's timing signal: sin in the first d/2 channels, cos in the last */
    const int nts = d / 2;
    const double inc = nts > 1 ? log(1.0e4) / (nts - 1) : 0.0;
    for (int t = 0; t < m->maxl; t++)
        for (int i = 0; i < nts; i++) {
            double a2 = t * exp(-i * inc);
            m->pe[(size_t)t * d + i] = (real)sin(a2);
            m->pe[(size_t)t * d + nts + i] = (real)cos(a2);
        }
    return m;
oom:
    nb_errf(err, "transformer: out of memory for a model of %d rows of %d", max_rows, cfg->dim);
    nb_hintf(err, "use a smaller --batch-tokens or --dim");
    nb_tf_free(m);
    return NULL;
}

static void init_uniform(real *w, size_t n, double lim, nb_rng *rng) {
    for (size_t i = 0; i < n; i++)
        w[i] = (real)((2 * nb_rng_uniform(rng) - 1) * lim);
}

static void init_norm(const model *m, real *P, const nsite *ns) {
    for (int c = 0; c < m->d; c++) {
        if (ns->g != NO_OFF) P[ns->g + c] = 1;
        if (ns->b != NO_OFF) P[ns->b + c] = 0;
        if (ns->rm != NO_OFF) P[ns->rm + c] = 0;
        if (ns->rv != NO_OFF) P[ns->rv + c] = 1;
    }
    const nb_norm_def *nd = ndef(&m->c.norm);
    if (ns->alpha != NO_OFF)
        for (int i = 0; i < nd->nscalars; i++)
            P[ns->alpha + (size_t)i] = (real)nd->scalar_init(&m->c.norm);
}

void nb_tf_init_params(model *m, real *P, nb_rng *rng) {
    const int d = m->d;
    const double sd = 1.0 / sqrt((double)d);
    const size_t VD = (size_t)m->V * d;
    for (size_t i = 0; i < VD; i++)
        P[m->emb_src + i] = (real)(nb_rng_normal(rng) * sd);
    if (m->emb_tgt != m->emb_src)
        for (size_t i = 0; i < VD; i++)
            P[m->emb_tgt + i] = (real)(nb_rng_normal(rng) * sd);
    if (m->out_w != m->emb_tgt)
        for (size_t i = 0; i < VD; i++)
            P[m->out_w + i] = (real)(nb_rng_normal(rng) * sd);
    init_uniform(P + m->emb_b, (size_t)d, sqrt(3.0 / d), rng);
    for (int i = 0; i < m->nlins; i++) {
        const lin *l = m->lins[i];
        init_uniform(P + l->w, (size_t)l->out * l->in, sqrt(6.0 / (l->out + l->in)), rng);
        memset(P + l->b, 0, sizeof(real) * (size_t)l->out);
        if (l->g != NO_OFF)
            for (int o = 0; o < l->out; o++) {
                double s = 0;
                for (int c = 0; c < l->in; c++) {
                    double v = P[l->w + (size_t)o * l->in + c];
                    s += v * v;
                }
                P[l->g + o] = (real)sqrt(s);
            }
    }
    stack *sts[2] = {&m->enc, &m->dec};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < sts[k]->nsub; i++)
            init_norm(m, P, &sts[k]->s[i].ns);
        init_norm(m, P, &sts[k]->fin);
    }
}

/* ---- training forward and backward ---------------------------------------------------------- */

static int seq_len(const int *tok, int L, int pad) {
    int n = 0;
    while (n < L && tok[n] != pad)
        n++;
    return n;
}

/* The encoder over src (B, S); m->enc_out is its output. */
static void encode(model *m, real *P, const int *src, int B, int S, int training) {
    m->B = B;
    m->S = S;
    m->nvs = 0;
    for (int b = 0; b < B; b++) {
        m->slen[b] = seq_len(src + (size_t)b * S, S, m->c.pad);
        if (m->slen[b] < 1) m->slen[b] = 1; /* an empty source still attends its first position */
        for (int i = 0; i < m->slen[b]; i++)
            m->vsrc[m->nvs++] = b * S + i;
    }
    stack *e = &m->enc;
    const geo g = {B * S, B, S, m->vsrc, m->nvs, m->slen};
    embed_fwd(m, P, e->x[0], src, B, S, 0, m->emb_src, training ? m->c.dropout : 0,
              site_key(m->seed, 1));
    for (int i = 0; i < e->nsub; i++)
        sub_fwd(m, P, &e->s[i], e->x[i], e->x[i + 1], &g, training);
    m->enc_out = e->x[e->nsub];
    if (m->c.pre_norm) {
        norm_fwd(m, P, &e->fin, e->fin_out, e->fin_st, e->x[e->nsub], B * S, m->vsrc, m->nvs,
                 training);
        m->enc_out = e->fin_out;
    }
}

/* Words of the output layer whose exponentials are summed in float before the double sum. */
#define LOSS_GRP 128

double nb_tf_forward(model *m, real *P, const int *src, const int *tgt, int B, int S, int T,
                     int training, int want_grad, uint64_t dropout_seed, nb_tf_stats *st) {
    const int d = m->d, V = m->V;
    m->src = src;
    m->tgt = tgt;
    m->T = T;
    m->training = training;
    m->want_grad = want_grad;
    m->seed = dropout_seed;
    wn_prepare(m, P);
    encode(m, P, src, B, S, training);
    m->nvt = 0;
    for (int b = 0; b < B; b++) {
        m->tlen[b] = seq_len(tgt + (size_t)b * T, T, m->c.pad);
        for (int t = 0; t < m->tlen[b]; t++)
            m->vtgt[m->nvt++] = b * T + t;
    }
    stack *dc = &m->dec;
    const geo g = {B * T, B, T, m->vtgt, m->nvt, NULL};
    embed_fwd(m, P, dc->x[0], tgt, B, T, 1, m->emb_tgt, training ? m->c.dropout : 0,
              site_key(m->seed, 2));
    for (int i = 0; i < dc->nsub; i++)
        sub_fwd(m, P, &dc->s[i], dc->x[i], dc->x[i + 1], &g, training);
    m->dec_out = dc->x[dc->nsub];
    if (m->c.pre_norm) {
        norm_fwd(m, P, &dc->fin, dc->fin_out, dc->fin_st, dc->x[dc->nsub], B * T, m->vtgt, m->nvt,
                 training);
        m->dec_out = dc->fin_out;
    }
    const int M = B * T, GB = m->grad_rows > 0 ? m->grad_rows : B; /* GB: the loss's divisor */
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, M, V, d, (real)1, m->dec_out, d,
               P + m->out_w, d, (real)0, m->logits, V);
    /* zero's label smoothing: target 1-eps, others eps/(V-1), less that distribution's entropy */
    const double eps = m->c.label_smooth;
    const int smooth = eps > 0 && eps < 1;
    const double pt = smooth ? 1 - eps : 1, q = smooth ? eps / (V - 1) : 0;
    const double ent = smooth ? -(pt * log(pt) + (V - 1) * q * log(q + 1e-20)) : 0;
    double nll = 0;
    long ncor = 0;
#pragma omp parallel for schedule(static) reduction(+ : ncor) if (M * V >= 65536)
    for (int r = 0; r < M; r++) {
        const int b = r / T, t = r % T;
        real *z = m->logits + (size_t)r * V;
        if (t >= m->tlen[b]) {
            m->rowl[r] = 0;
            m->rowl[m->maxr + r] = 0;
            if (want_grad) memset(z, 0, sizeof(real) * V);
            continue;
        }
        const int y = tgt[r];
        const double zy = (double)z[y];
        /* the largest logit and the first word that has it */
        real mx = z[0];
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < V; j++)
            mx = z[j] > mx ? z[j] : mx;
        int am = V;
#pragma omp simd reduction(min : am)
        for (int j = 0; j < V; j++)
            am = j < am && z[j] == mx ? j : am;
        /* sum exp(z - mx) and sum z: in float over groups of LOSS_GRP words, each group's sum
         * added in double; with a gradient wanted, the exponentials are kept in z */
        double se = 0, sz = 0;
        for (int j0 = 0; j0 < V; j0 += LOSS_GRP) {
            const int j1 = j0 + LOSS_GRP < V ? j0 + LOSS_GRP : V;
            real seg = 0, szg = 0;
            if (want_grad) {
#pragma omp simd reduction(+ : seg, szg)
                for (int j = j0; j < j1; j++) {
                    const real e = vm_exp(z[j] - mx);
                    szg += z[j];
                    z[j] = e;
                    seg += e;
                }
            } else {
#pragma omp simd reduction(+ : seg, szg)
                for (int j = j0; j < j1; j++) {
                    szg += z[j];
                    seg += vm_exp(z[j] - mx);
                }
            }
            se += seg;
            sz += szg;
        }
        /* se >= 1: the maximum's own term */
        // cppcheck-suppress invalidFunctionArg
        const double lse = (double)mx + log(se);
        const double lpy = zy - lse;
        const double sum_lp = sz - (double)V * lse;
        const double ce = -pt * lpy - q * (sum_lp - lpy) - ent;
        m->rowl[r] = (real)ce; /* the row's loss */
        if (am == y) ncor++;
        if (want_grad) {
            const double w = 1.0 / ((double)GB * m->tlen[b]);
            const real ws = (real)(w / se), wq = (real)(w * q);
#pragma omp simd
            for (int j = 0; j < V; j++)
                z[j] = z[j] * ws - wq;
            z[y] -= (real)(w * (pt - q));
        }
        m->rowl[m->maxr + r] = (real)(-lpy);
    }
    double loss = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int t = 0; t < m->tlen[b]; t++) {
            s += m->rowl[b * T + t];
            nll += m->rowl[m->maxr + b * T + t];
        }
        if (m->tlen[b] > 0) loss += s / m->tlen[b];
    }
    loss /= GB;
    if (st) {
        st->loss = loss;
        st->nll_sum = nll;
        st->ntok = m->nvt;
        st->ncorrect = ncor;
    }
    return loss;
}

void nb_tf_set_shard(model *m, int row0, int grad_rows) {
    m->row0 = row0;
    m->grad_rows = grad_rows;
}

const real *nb_tf_logits(const model *m) {
    return m->logits;
}

void nb_tf_backward(model *m, real *G, const real *Pc) {
    real *P = (real *)Pc; /* BatchNorm's kernels take the running averages non-const */
    const int d = m->d, V = m->V, B = m->B, S = m->S, T = m->T, M = B * T, N = B * S;
    if (m->dweff) memset(m->dweff, 0, sizeof(real) * m->ptotal);
    real *g = m->g1;
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, d, V, (real)1, m->logits, V,
               P + m->out_w, d, (real)0, g, d);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, V, d, M, (real)1, m->logits, V, m->dec_out,
               d, (real)1, G + m->out_w, d);
    stack *dc = &m->dec, *e = &m->enc;
    if (m->c.pre_norm) {
        memset(m->g2, 0, sizeof(real) * (size_t)M * d);
        norm_bwd(m, G, P, &dc->fin, m->g2, g, dc->x[dc->nsub], dc->fin_st, M, m->vtgt, m->nvt);
        g = m->g2;
    }
    memset(m->denc, 0, sizeof(real) * (size_t)N * d);
    const geo gd = {M, B, T, m->vtgt, m->nvt, NULL};
    for (int i = dc->nsub - 1; i >= 0; i--)
        g = sub_bwd(m, G, P, &dc->s[i], dc->x[i], g, &gd);
    embed_bwd(m, G, g, m->tgt, B, T, 1, m->emb_tgt, m->training ? m->c.dropout : 0,
              site_key(m->seed, 2));
    g = m->g1;
    if (m->c.pre_norm) {
        memset(g, 0, sizeof(real) * (size_t)N * d);
        norm_bwd(m, G, P, &e->fin, g, m->denc, e->x[e->nsub], e->fin_st, N, m->vsrc, m->nvs);
    } else {
        memcpy(g, m->denc, sizeof(real) * (size_t)N * d);
    }
    const geo ge = {N, B, S, m->vsrc, m->nvs, m->slen};
    for (int i = e->nsub - 1; i >= 0; i--)
        g = sub_bwd(m, G, P, &e->s[i], e->x[i], g, &ge);
    embed_bwd(m, G, g, m->src, B, S, 0, m->emb_src, m->training ? m->c.dropout : 0,
              site_key(m->seed, 1));
    if (m->dweff)
        for (int i = 0; i < m->nlins; i++) {
            const lin *l = m->lins[i];
            nb_weightnorm_backward(G + l->w, G + l->g, m->dweff + l->w, P + l->w, P + l->g,
                                   m->wn + l->g, l->out, l->in);
        }
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* Incremental decoding state for R rows (hypotheses), each reading sentence srow[r]. */
typedef struct dstate {
    int R, Lc, L;
    real *kc, *vc; /* (L, R, Lc, d) keys and values of past positions */
    real *ckv;     /* (L, N, 2d) the encoder output's keys and values */
    int *srow;
    real *x, *u, *z, *a, *ctx, *y, *st, *lp, *tmp, *scr;
} dstate;

static void dstate_free(dstate *s) {
    real *b[] = {s->kc,  s->vc, s->ckv, s->x,  s->u,   s->z,  s->a,
                 s->ctx, s->y,  s->st,  s->lp, s->tmp, s->scr};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        free(b[i]);
    free(s->srow);
}

static int dstate_new(model *m, dstate *s, int R) {
    memset(s, 0, sizeof *s);
    const int d = m->d, N = m->B * m->S;
    s->R = R;
    s->Lc = m->maxl;
    s->L = m->c.dec_layers;
    const size_t kn = (size_t)s->L * R * s->Lc * d;
    const int aw = 3 * d > m->F ? 3 * d : m->F;
    s->srow = calloc((size_t)R, sizeof(int));
    if (!s->srow || !(s->kc = alloc_real(kn)) || !(s->vc = alloc_real(kn)) ||
        !(s->ckv = alloc_real((size_t)s->L * N * 2 * d)) || !(s->x = alloc_real((size_t)R * d)) ||
        !(s->u = alloc_real((size_t)R * d)) || !(s->z = alloc_real((size_t)R * d)) ||
        !(s->a = alloc_real((size_t)R * aw)) || !(s->ctx = alloc_real((size_t)R * d)) ||
        !(s->y = alloc_real((size_t)R * d)) || !(s->st = alloc_real((size_t)2 * (R > d ? R : d))) ||
        !(s->lp = alloc_real((size_t)R * m->V)) || !(s->tmp = alloc_real((size_t)R * s->Lc * d)) ||
        !(s->scr = alloc_real((size_t)m->nthr * s->Lc))) {
        dstate_free(s);
        return -1;
    }
    return 0;
}

/* Encodes src in evaluation mode and precomputes every decoder layer's cross keys/values. */
static int dec_begin(model *m, real *P, const int *src, int B, int S, dstate *s, int R,
                     nb_err *err) {
    m->training = 0;
    m->seed = 0;
    wn_prepare(m, P);
    encode(m, P, src, B, S, 0);
    if (dstate_new(m, s, R)) {
        nb_errf(err, "transformer: out of memory for decoding %d hypotheses", R);
        return -1;
    }
    const int N = B * S, d = m->d;
    for (int l = 0; l < s->L; l++)
        lin_fwd(m, P, &m->dec.s[l * 3 + 1].kv, s->ckv + (size_t)l * N * 2 * d, m->enc_out, N);
    return 0;
}

/* One position t for every row: tok[r] is the row's previous token (unused at t = 0). Leaves
 * log-probabilities (R, V) in s->lp. */
static void dec_step(model *m, real *P, dstate *s, const int *tok, int t) {
    const int d = m->d, R = s->R, H = m->H, dh = m->dh, V = m->V, S = m->S, pre = m->c.pre_norm;
    const real sc = (real)sqrt((double)d), scale = (real)(1.0 / sqrt((double)dh));
    for (int r = 0; r < R; r++) {
        real *o = s->x + (size_t)r * d;
        const real *pe = m->pe + (size_t)t * d;
        const int id = t == 0 ? m->c.bos : tok[r];
        if (id < 0) {
            memcpy(o, pe, sizeof(real) * d);
            continue;
        }
        const real *e = P + m->emb_tgt + (size_t)id * d, *eb = P + m->emb_b;
        for (int c = 0; c < d; c++)
            o[c] = e[c] * sc + eb[c] + pe[c];
    }
    for (int l = 0; l < s->L; l++)
        for (int j = 0; j < 3; j++) {
            sub *sb = &m->dec.s[l * 3 + j];
            const real *u = s->x;
            if (pre) {
                norm_fwd(m, P, &sb->ns, s->u, s->st, s->x, R, NULL, 0, 0);
                u = s->u;
            }
            lin_fwd(m, P, &sb->a, s->a, u, R);
            if (j == 2) {
                nb_relu_forward(s->a, s->a, (size_t)R * m->F);
                lin_fwd(m, P, &sb->o, s->y, s->a, R);
            } else {
                const int lda = j == 0 ? 3 * d : d;
                real *kc = s->kc + (size_t)l * R * s->Lc * d,
                     *vc = s->vc + (size_t)l * R * s->Lc * d;
                if (j == 0)
                    for (int r = 0; r < R; r++) {
                        memcpy(kc + ((size_t)r * s->Lc + t) * d, s->a + (size_t)r * lda + d,
                               sizeof(real) * d);
                        memcpy(vc + ((size_t)r * s->Lc + t) * d, s->a + (size_t)r * lda + 2 * d,
                               sizeof(real) * d);
                    }
                const real *ckv = s->ckv + (size_t)l * m->B * S * 2 * d;
#pragma omp parallel for schedule(static) if (R * H * (t + 1) * dh >= 32768)
                for (int rh = 0; rh < R * H; rh++) {
                    const int r = rh / H, h = rh % H;
                    real *w = s->scr + (size_t)omp_get_thread_num() * s->Lc;
                    const real *q = s->a + (size_t)r * lda + h * dh;
                    const real *kb, *vb;
                    int n, ld;
                    if (j == 0) {
                        kb = kc + (size_t)r * s->Lc * d + h * dh;
                        vb = vc + (size_t)r * s->Lc * d + h * dh;
                        n = t + 1;
                        ld = d;
                    } else {
                        const int b = s->srow[r];
                        kb = ckv + (size_t)b * S * 2 * d + h * dh;
                        vb = kb + d;
                        n = m->slen[b];
                        ld = 2 * d;
                    }
                    real mx = 0;
                    for (int k = 0; k < n; k++) {
                        real a2 = 0;
                        const real *kk = kb + (size_t)k * ld;
                        for (int c = 0; c < dh; c++)
                            a2 += q[c] * kk[c];
                        w[k] = a2 * scale;
                        if (k == 0 || w[k] > mx) mx = w[k];
                    }
                    double sum = 0;
                    for (int k = 0; k < n; k++) {
                        w[k] = REAL_EXP(w[k] - mx);
                        sum += w[k];
                    }
                    const real inv = (real)(1.0 / sum);
                    real *o = s->ctx + (size_t)r * d + h * dh;
                    for (int c = 0; c < dh; c++)
                        o[c] = 0;
                    for (int k = 0; k < n; k++) {
                        const real p = w[k] * inv, *vv = vb + (size_t)k * ld;
                        for (int c = 0; c < dh; c++)
                            o[c] += p * vv[c];
                    }
                }
                lin_fwd(m, P, &sb->o, s->y, s->ctx, R);
            }
            const size_t n = (size_t)R * d;
            if (pre) {
                for (size_t i = 0; i < n; i++)
                    s->x[i] += s->y[i];
            } else {
                for (size_t i = 0; i < n; i++)
                    s->z[i] = s->x[i] + s->y[i];
                norm_fwd(m, P, &sb->ns, s->x, s->st, s->z, R, NULL, 0, 0);
            }
        }
    const real *out = s->x;
    if (pre) {
        norm_fwd(m, P, &m->dec.fin, s->u, s->st, s->x, R, NULL, 0, 0);
        out = s->u;
    }
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, R, V, d, (real)1, out, d, P + m->out_w, d,
               (real)0, s->lp, V);
    for (int r = 0; r < R; r++) {
        real *z = s->lp + (size_t)r * V;
        double mx = z[0], se = 0;
        for (int j = 1; j < V; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < V; j++)
            se += exp((double)z[j] - mx);
        // cppcheck-suppress invalidFunctionArg
        const double lse = mx + log(se);
        for (int j = 0; j < V; j++)
            z[j] = (real)((double)z[j] - lse);
    }
}

/* Row r's caches become those of row par[r] (positions 0..t). */
static void dec_reorder(dstate *s, const int *par, int t, int d) {
    const size_t row = (size_t)s->Lc * d, n = (size_t)(t + 1) * d;
    for (int l = 0; l < s->L; l++) {
        real *cs[2] = {s->kc + (size_t)l * s->R * row, s->vc + (size_t)l * s->R * row};
        for (int k = 0; k < 2; k++) {
            for (int r = 0; r < s->R; r++)
                memcpy(s->tmp + (size_t)r * row, cs[k] + (size_t)par[r] * row, n * sizeof(real));
            for (int r = 0; r < s->R; r++)
                memcpy(cs[k] + (size_t)r * row, s->tmp + (size_t)r * row, n * sizeof(real));
        }
    }
}

int nb_tf_incremental_logprobs(model *m, const real *Pc, const int *src, const int *tgt, int B,
                               int S, int T, real *logp, nb_err *err) {
    real *P = (real *)Pc;
    dstate s;
    if (dec_begin(m, P, src, B, S, &s, B, err)) return -1;
    int *tok = calloc((size_t)B, sizeof(int));
    if (!tok) {
        dstate_free(&s);
        return nb_errf(err, "transformer: out of memory");
    }
    for (int r = 0; r < B; r++)
        s.srow[r] = r;
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++)
            tok[b] = t > 0 ? tgt[(size_t)b * T + t - 1] : 0;
        dec_step(m, P, &s, tok, t);
        for (int b = 0; b < B; b++)
            memcpy(logp + ((size_t)b * T + t) * m->V, s.lp + (size_t)b * m->V, sizeof(real) * m->V);
    }
    free(tok);
    dstate_free(&s);
    return 0;
}

static inline int allowed(const model *m, int v, int t) {
    return v != m->c.pad && v != m->c.bos && !(t == 0 && v == m->c.eos);
}

static double len_pen(int L, double alpha) {
    return alpha == 0 ? 1.0 : pow((5.0 + L) / 6.0, alpha);
}

typedef struct cand {
    double sc;
    int j, v;
} cand;

int nb_tf_translate(model *m, const real *Pc, const int *src, int B, int S, int beam, double alpha,
                    int extra, int max_out, int *out, int *out_len, double *scores, nb_err *err) {
    real *P = (real *)Pc;
    const int K = beam < 1 ? 1 : beam, V = m->V, eos = m->c.eos;
    const int greedy = beam <= 1;
    dstate s;
    const int R = B * K;
    if (dec_begin(m, P, src, B, S, &s, R, err)) return -1;
    int *lim = calloc((size_t)B, sizeof(int)), *tok = calloc((size_t)R, sizeof(int));
    int *par = calloc((size_t)R, sizeof(int)), *na = calloc((size_t)B, sizeof(int));
    int *nf = calloc((size_t)B, sizeof(int)), *done = calloc((size_t)B, sizeof(int));
    int Lm = 1;
    for (int b = 0; b < B; b++) {
        int l = m->slen[b] + extra;
        l = l < max_out ? l : max_out;
        l = l < m->maxl ? l : m->maxl;
        lim[b] = l < 1 ? 1 : l;
        Lm = lim[b] > Lm ? lim[b] : Lm;
    }
    /* alive hypotheses: hist (R, Lm), logp (R); finished: (B, K) tokens, length, score */
    int *hist = calloc((size_t)R * Lm, sizeof(int)), *nhist = calloc((size_t)R * Lm, sizeof(int));
    int *ftok = calloc((size_t)R * Lm, sizeof(int)), *flen = calloc((size_t)R, sizeof(int));
    double *alp = calloc((size_t)R, sizeof(double)), *nalp = calloc((size_t)R, sizeof(double));
    double *fsc = calloc((size_t)R, sizeof(double));
    cand *cs = calloc((size_t)2 * K + 1, sizeof(cand));
    if (!lim || !tok || !par || !na || !nf || !done || !hist || !nhist || !ftok || !flen || !alp ||
        !nalp || !fsc || !cs) {
        nb_errf(err, "transformer: out of memory for beam search");
        goto out;
    }
    for (int r = 0; r < R; r++)
        s.srow[r] = r / K;
    for (int b = 0; b < B; b++)
        na[b] = 1;
    for (int t = 0; t < Lm; t++) {
        int any = 0;
        for (int b = 0; b < B; b++)
            any |= !done[b];
        if (!any) break;
        dec_step(m, P, &s, tok, t);
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < K; i++)
                par[b * K + i] = b * K; /* dead slots copy slot 0 */
            if (done[b]) continue;
            const double lpn = len_pen(t + 1, alpha);
            if (greedy) {
                const real *lp = s.lp + (size_t)(b * K) * V;
                int best = -1;
                for (int v = 0; v < V; v++)
                    if (allowed(m, v, t) && (best < 0 || lp[v] > lp[best])) best = v;
                const double sc = alp[b * K] + lp[best];
                if (best == eos || t + 1 >= lim[b]) {
                    int L = t;
                    memcpy(ftok + (size_t)b * K * Lm, hist + (size_t)b * K * Lm, sizeof(int) * t);
                    if (best != eos) ftok[(size_t)b * K * Lm + L++] = best;
                    flen[b * K] = L;
                    fsc[b * K] = sc / lpn;
                    nf[b] = 1;
                    done[b] = 1;
                } else {
                    hist[(size_t)b * K * Lm + t] = best;
                    alp[b * K] = sc;
                    tok[b * K] = best;
                }
                continue;
            }
            /* the 2K best extensions of the alive hypotheses */
            int nc = 0;
            for (int j = 0; j < na[b]; j++) {
                const real *lp = s.lp + (size_t)(b * K + j) * V;
                for (int v = 0; v < V; v++) {
                    if (!allowed(m, v, t)) continue;
                    const double sc = alp[b * K + j] + lp[v];
                    if (nc == 2 * K && !(sc > cs[nc - 1].sc)) continue;
                    int i = nc < 2 * K ? nc++ : nc - 1;
                    while (i > 0 && sc > cs[i - 1].sc) {
                        cs[i] = cs[i - 1];
                        i--;
                    }
                    cs[i] = (cand){sc, j, v};
                }
            }
            int nn = 0;
            const int last = t + 1 >= lim[b];
            for (int c = 0; c < nc; c++) {
                const cand *cd = &cs[c];
                const int endn = cd->v == eos || last;
                if (endn) {
                    const double f = cd->sc / lpn;
                    int slot = -1;
                    if (nf[b] < K) {
                        slot = nf[b]++;
                    } else {
                        int w = 0;
                        for (int i = 1; i < K; i++)
                            if (fsc[b * K + i] < fsc[b * K + w]) w = i;
                        if (f > fsc[b * K + w]) slot = w;
                    }
                    if (slot >= 0) {
                        int *ft = ftok + (size_t)(b * K + slot) * Lm;
                        memcpy(ft, hist + (size_t)(b * K + cd->j) * Lm, sizeof(int) * t);
                        int L = t;
                        if (cd->v != eos) ft[L++] = cd->v;
                        flen[b * K + slot] = L;
                        fsc[b * K + slot] = f;
                    }
                    if (last && nn >= K) break;
                    continue;
                }
                if (nn == K) continue;
                const int r = b * K + nn;
                memcpy(nhist + (size_t)r * Lm, hist + (size_t)(b * K + cd->j) * Lm,
                       sizeof(int) * t);
                nhist[(size_t)r * Lm + t] = cd->v;
                nalp[r] = cd->sc;
                par[r] = b * K + cd->j;
                tok[r] = cd->v;
                nn++;
            }
            na[b] = last ? 0 : nn;
            for (int i = 0; i < na[b]; i++) {
                const int r = b * K + i;
                memcpy(hist + (size_t)r * Lm, nhist + (size_t)r * Lm, sizeof(int) * (t + 1));
                alp[r] = nalp[r];
            }
            if (na[b] == 0) {
                done[b] = 1;
            } else if (nf[b] == K) {
                double worst = fsc[b * K];
                for (int i = 1; i < K; i++)
                    worst = fsc[b * K + i] < worst ? fsc[b * K + i] : worst;
                /* log p only falls as a hypothesis grows: its best normalised score is bounded by
                 * dividing by the largest penalty */
                if (alp[b * K] / len_pen(lim[b], alpha) <= worst) done[b] = 1;
            }
        }
        if (!greedy) dec_reorder(&s, par, t, m->d);
    }
    for (int b = 0; b < B; b++) {
        int best = -1;
        for (int i = 0; i < nf[b]; i++)
            if (best < 0 || fsc[b * K + i] > fsc[b * K + best]) best = i;
        out_len[b] = best < 0 ? 0 : flen[b * K + best];
        if (best >= 0)
            memcpy(out + (size_t)b * max_out, ftok + (size_t)(b * K + best) * Lm,
                   sizeof(int) * out_len[b]);
        if (scores) scores[b] = best < 0 ? -INFINITY : fsc[b * K + best];
    }
    dstate_free(&s);
    free(lim), free(tok), free(par), free(na), free(nf), free(done), free(hist), free(nhist);
    free(ftok), free(flen), free(alp), free(nalp), free(fsc), free(cs);
    return 0;
out:
    dstate_free(&s);
    free(lim), free(tok), free(par), free(na), free(nf), free(done), free(hist), free(nhist);
    free(ftok), free(flen), free(alp), free(nalp), free(fsc), free(cs);
    return -1;
}

/* ---- cost ----------------------------------------------------------------------------------- */

int nb_tf_gemm_shapes(const model *m, int *o, int max) {
    const int d = m->d, F = m->F, V = m->V, dh = m->dh, H = m->H, B = m->B, S = m->S, T = m->T;
    const int N = B * S, M = B * T, Le = m->c.enc_layers, Ld = m->c.dec_layers;
    /* each map: forward, and backward's two (input and weight gradients) of the same size */
    const int sh[][4] = {
        {N, 3 * d, d, 3 * Le},      {N, d, d, 3 * Le},
        {N, F, d, 3 * Le},          {N, d, F, 3 * Le},
        {M, 3 * d, d, 3 * Ld},      {M, d, d, 3 * Ld * 3},
        {N, 2 * d, d, 3 * Ld},      {M, F, d, 3 * Ld},
        {M, d, F, 3 * Ld},          {M, V, d, 3},
        {S, S, dh, 3 * B * H * Le}, {S, dh, S, 3 * B * H * Le},
        {T, T, dh, 3 * B * H * Ld}, {T, dh, T, 3 * B * H * Ld},
        {T, S, dh, 3 * B * H * Ld}, {T, dh, S, 3 * B * H * Ld},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof sh / sizeof sh[0] && n < max; i++, n++)
        memcpy(o + 4 * n, sh[i], sizeof sh[i]);
    return n;
}

double nb_tf_step_flops(const model *m) {
    int sh[64];
    int n = nb_tf_gemm_shapes(m, sh, 16);
    double f = 0;
    for (int i = 0; i < n; i++)
        f += 2.0 * sh[4 * i] * sh[4 * i + 1] * (double)sh[4 * i + 2] * sh[4 * i + 3];
    return f;
}

/* ---- benchmark ------------------------------------------------------------------------------ */

#ifndef NB_F64
#include <time.h>

struct nb_tf_bench {
    model *m;
    nb_layout lay;
    float *p, *g, *m1, *v1;
    int *src, *tgt;
    int B, S, T;
    long step;
    nb_adam_cfg adam;
};

void nb_tf_bench_close(nb_tf_bench *b) {
    if (!b) return;
    nb_tf_free(b->m);
    free(b->p);
    free(b->g);
    free(b->m1);
    free(b->v1);
    free(b->src);
    free(b->tgt);
    free(b);
}

nb_tf_bench *nb_tf_bench_open(const nb_tf_cfg *cfg, int batch_tokens, int seq_len, uint64_t seed,
                              nb_err *err) {
    nb_tf_bench *b = calloc(1, sizeof *b);
    if (!b) {
        nb_errf(err, "transformer: out of memory");
        return NULL;
    }
    if (seq_len < 2) seq_len = 2;
    b->S = b->T = seq_len;
    b->B = batch_tokens / seq_len > 0 ? batch_tokens / seq_len : 1;
    nb_tf_cfg c = *cfg;
    if (c.max_pos < seq_len) c.max_pos = seq_len;
    b->m = nb_tf_new(&c, &b->lay, b->B * seq_len, err);
    if (!b->m) {
        free(b);
        return NULL;
    }
    const size_t P = b->lay.total, n = (size_t)b->B * seq_len;
    b->p = calloc(P, sizeof(float));
    b->g = calloc(P, sizeof(float));
    b->m1 = calloc(P, sizeof(float));
    b->v1 = calloc(P, sizeof(float));
    b->src = malloc(n * sizeof(int));
    b->tgt = malloc(n * sizeof(int));
    if (!b->p || !b->g || !b->m1 || !b->v1 || !b->src || !b->tgt) {
        nb_errf(err, "transformer: out of memory for the benchmark");
        nb_tf_bench_close(b);
        return NULL;
    }
    nb_rng rng;
    nb_rng_seed(&rng, seed, NB_STREAM_INIT);
    nb_tf_init_params(b->m, b->p, &rng);
    const int lo = 3 < c.vocab ? 3 : 0;
    for (size_t i = 0; i < n; i++) {
        b->src[i] = lo + (int)nb_rng_below(&rng, (uint64_t)(c.vocab - lo));
        b->tgt[i] = lo + (int)nb_rng_below(&rng, (uint64_t)(c.vocab - lo));
        if (b->src[i] == c.pad || b->src[i] == c.eos) b->src[i] = lo;
        if (b->tgt[i] == c.pad || b->tgt[i] == c.eos) b->tgt[i] = lo;
    }
    for (int s = 0; s < b->B; s++)
        b->tgt[(size_t)s * seq_len + seq_len - 1] = c.eos;
    nb_adam_cfg_default(&b->adam);
    b->adam.lr = 1e-4;
    b->adam.beta2 = 0.98;
    b->adam.eps = 1e-9;
    return b;
}

double nb_tf_bench_step(nb_tf_bench *b) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(b->g, 0, b->lay.total * sizeof(float));
    nb_tf_forward(b->m, b->p, b->src, b->tgt, b->B, b->S, b->T, 1, 1, (uint64_t)b->step, NULL);
    nb_tf_backward(b->m, b->g, b->p);
    nb_adam_step_layout(b->p, b->g, b->m1, b->v1, &b->lay, ++b->step, &b->adam);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

double nb_tf_bench_step_shard(nb_tf_bench *b, int lo, int hi,
                              void (*sum)(void *ctx, float *params, float *grads,
                                          const nb_layout *lay, double loss),
                              void *ctx) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(b->g, 0, b->lay.total * sizeof(float));
    double loss = 0;
    if (hi > lo) {
        nb_tf_set_shard(b->m, lo, b->B);
        loss = nb_tf_forward(b->m, b->p, b->src + (size_t)lo * b->S, b->tgt + (size_t)lo * b->T,
                             hi - lo, b->S, b->T, 1, 1, (uint64_t)b->step, NULL);
        nb_tf_backward(b->m, b->g, b->p);
        nb_tf_set_shard(b->m, 0, 0);
    }
    sum(ctx, b->p, b->g, &b->lay, loss);
    nb_adam_step_layout(b->p, b->g, b->m1, b->v1, &b->lay, ++b->step, &b->adam);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

int nb_tf_bench_gemms(const nb_tf_bench *b, int *mnk_count, int max) {
    return nb_tf_gemm_shapes(b->m, mnk_count, max);
}
#endif

/* ---- the tensor table ----------------------------------------------------------------------- */

typedef struct tlist {
    nb_tf_tensor_info *o;
    int n, max;
} tlist;

static void tl_add(tlist *t, const char *pfx, const char *name, size_t off, size_t n) {
    if (off == NO_OFF) return;
    if (t->n < t->max) {
        snprintf(t->o[t->n].name, sizeof t->o[t->n].name, "%s%s", pfx, name);
        t->o[t->n].off = off;
        t->o[t->n].n = n;
    }
    t->n++;
}

static void tl_lin(tlist *t, const char *pfx, const char *nm, const lin *l) {
    char b[64];
    snprintf(b, sizeof b, "%s.w", nm);
    tl_add(t, pfx, b, l->w, (size_t)l->out * l->in);
    snprintf(b, sizeof b, "%s.b", nm);
    tl_add(t, pfx, b, l->b, (size_t)l->out);
    snprintf(b, sizeof b, "%s.g", nm);
    tl_add(t, pfx, b, l->g, (size_t)l->out);
}

static void tl_norm(tlist *t, const char *pfx, const nsite *ns, size_t d) {
    tl_add(t, pfx, "norm.g", ns->g, d);
    tl_add(t, pfx, "norm.b", ns->b, d);
    tl_add(t, pfx, "norm.rm", ns->rm, d);
    tl_add(t, pfx, "norm.rv", ns->rv, d);
    tl_add(t, pfx, "norm.alpha", ns->alpha, 1);
}

int nb_tf_tensors(const model *m, nb_tf_tensor_info *out, int max) {
    tlist t = {out, 0, max};
    const size_t d = (size_t)m->d, VD = (size_t)m->V * d;
    tl_add(&t, "", "emb", m->emb_src, VD);
    if (m->emb_tgt != m->emb_src) tl_add(&t, "", "emb_tgt", m->emb_tgt, VD);
    tl_add(&t, "", "emb_b", m->emb_b, d);
    if (m->out_w != m->emb_tgt) tl_add(&t, "", "out", m->out_w, VD);
    const stack *sts[2] = {&m->enc, &m->dec};
    static const char *kn[3] = {"self", "cross", "ffn"};
    for (int k = 0; k < 2; k++) {
        const int per = k ? 3 : 2;
        for (int i = 0; i < sts[k]->nsub; i++) {
            const sub *s = &sts[k]->s[i];
            char pfx[48];
            snprintf(pfx, sizeof pfx, "%s.%d.%s.", k ? "dec" : "enc", i / per, kn[s->kind]);
            tl_norm(&t, pfx, &s->ns, d);
            tl_lin(&t, pfx, "a", &s->a);
            if (s->kind == 1) tl_lin(&t, pfx, "kv", &s->kv);
            tl_lin(&t, pfx, "o", &s->o);
        }
        const char *fp = k ? "dec.fin." : "enc.fin.";
        tl_add(&t, fp, "g", sts[k]->fin.g, d);
        tl_add(&t, fp, "b", sts[k]->fin.b, d);
        tl_add(&t, fp, "alpha", sts[k]->fin.alpha, 1);
    }
    return t.n;
}

#ifndef NB_F64
/* ---- memory estimate --------------------------------------------------------------------------
 */

/* A stack's parameters (floats, each tensor padded to 16 as take() does) and buffers (floats). */
static void stack_floats(const nb_tf_cfg *c, int L, int dec, double R, double maxl, double *params,
                         double *bufs) {
    const double d = c->dim, F = c->ffn, H = c->heads;
    const nb_norm_def *nd = ndef(&c->norm);
    const int wn = nd->acts == NB_ON_WEIGHTS;
#define PAD16(n) ((double)(((size_t)(n) + 15) & ~(size_t)15))
    double norm = 0; /* a site's parameters, as take_norm takes them */
    if (has_sites(nd)) {
        if (nd->params & NB_NP_GAIN) norm += PAD16(d);
        if (nd->params & NB_NP_SHIFT) norm += PAD16(d);
        if (nd->nscalars > 0) norm += PAD16(nd->nscalars);
        if (nd->params & NB_NP_RUNNING) norm += 2 * PAD16(d);
    }
#define LIN(o, i) (PAD16((o) * (i)) + PAD16(o) + (wn ? PAD16(o) : 0))
    const double self = norm + LIN(3 * d, d) + LIN(d, d);
    const double cross = norm + LIN(d, d) + LIN(2 * d, d) + LIN(d, d);
    const double ffn = norm + LIN(F, d) + LIN(d, F);
#undef LIN
    const double stn = 2 * (R > d ? R : d);
    const double sub_common = stn + 2 * R * d; /* st, y, u or z */
    const double b_self = sub_common + R * 3 * d + H * R * maxl + R * d;
    const double b_cross = sub_common + R * d + H * R * maxl + R * d + R * 2 * d;
    const double b_ffn = sub_common + R * F;
    const double nsub = L * (dec ? 3.0 : 2.0);
    *params += L * (self + ffn + (dec ? cross : 0)) + (c->pre_norm ? norm : 0);
    *bufs += (nsub + 1) * R * d + L * (b_self + b_ffn + (dec ? b_cross : 0)) +
             (c->pre_norm ? R * d + stn : 0);
#undef PAD16
}

double nb_tf_mem_bytes(const nb_tf_cfg *cfg, int max_rows, int nthreads, double *params) {
    const double d = cfg->dim, V = cfg->vocab, R = max_rows, maxl = cfg->max_pos, F = cfg->ffn;
    const double VD = (double)((((size_t)V * (size_t)d) + 15) & ~(size_t)15);
    double P = VD * (cfg->share_emb ? 1 : 2) + d + (cfg->tie_out ? 0 : VD), f = 0;
    stack_floats(cfg, cfg->enc_layers, 0, R, maxl, &P, &f);
    stack_floats(cfg, cfg->dec_layers, 1, R, maxl, &P, &f);
    f += maxl * d + R * V + 2 * R + 6 * R * d + 5 * R * d + 2 * R * F +
         2 * maxl * maxl * (nthreads > 0 ? nthreads : 1);
    if (ndef(&cfg->norm)->acts == NB_ON_FEATURES) f += 3 * R * d;
    if (ndef(&cfg->norm)->acts == NB_ON_WEIGHTS) f += 3 * P;
    if (params) *params = P;
    return f * sizeof(float) + 4 * R * sizeof(int);
}

double nb_tf_decode_mem_bytes(const nb_tf_cfg *cfg, int B, int S, int beam, int nthreads) {
    const double d = cfg->dim, L = cfg->dec_layers, Lc = cfg->max_pos, N = (double)B * S;
    const double R = (double)B * (beam < 1 ? 1 : beam), F = cfg->ffn;
    const double aw = 3 * d > F ? 3 * d : F;
    double f = 2 * L * R * Lc * d + L * N * 2 * d + 5 * R * d + R * aw + 2 * (R > d ? R : d) +
               R * cfg->vocab + R * Lc * d + (nthreads > 0 ? nthreads : 1) * Lc;
    /* the search's own arrays: histories of up to max_pos tokens per hypothesis */
    return f * sizeof(float) + 3 * R * Lc * sizeof(int) + 3 * R * sizeof(double);
}
#endif
