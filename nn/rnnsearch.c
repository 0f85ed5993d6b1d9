#include "nn/mem.h"
#include "real.h"
/* nn/rnnsearch.c — RNNSearch as Nematus v0.3 (generic: float and, with -DNB_F64, double; see
 * nn/nn.h). The model, its equations and its contracts are in nn/rnnsearch.h.
 *
 * Cost. The GRUs are nn/gru.c's (input projections of known inputs in one gemm, a gemm per step
 * for the recurrent side, the four norms and the gates in one fused row pass); the decoder drives
 * its two GRUs step-wise (nb_gru_step) because each step's GRU2 input is the attention's output.
 * The attention scores recompute tanh(Hc + Hs) in backward instead of keeping (Ty, Tx, B, A)
 * values. Weight gradients of the per-step layers are gathered in one gemm over all steps.
 * Bias gradients are nn/ops.c's nb_col_sums; the attention vector's gradient is summed in float
 * groups of positions and double accumulators, in a fixed order. */

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

#define NO_OFF ((size_t)-1)
#define PAR_MIN 16384

static real *zalloc(size_t n, int *fail) {
    size_t bytes = ((n * sizeof(real)) + 63) & ~(size_t)63;
    if (!bytes) bytes = 64;
    nb_mem_note(bytes);
    real *p = aligned_alloc(64, bytes);
    if (p)
        memset(p, 0, bytes);
    else
        *fail = 1;
    return p;
}

#ifndef NB_F64
void nb_rnnsearch_cfg_default(nb_rnnsearch_cfg *cfg, int Vs, int Vt, int eos, nb_norm_kind kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->Vs = Vs;
    cfg->Vt = Vt;
    cfg->eos = eos;
    cfg->E = 512;
    cfg->H = 1024;
    cfg->Bmax = 80;
    cfg->Txmax = cfg->Tymax = 80;
    cfg->beam_max = 5;
    cfg->label_smoothing = 0.1;
    cfg->init_scale = 0.01;
    nb_norm_cfg_default(&cfg->norm, kind);
}
#endif

/* ---- dense layers and their norms ---------------------------------------------------------- */

static const real *wmat(const nb_rnnsearch *m, const nb_rs_dense *d) {
    return d->weff ? d->weff : m->params + d->w;
}

static void dense_begin(nb_rnnsearch *m, nb_rs_dense *d) {
    if (d->weff)
        nb_weightnorm_forward(d->weff, d->vn, m->params + d->w, m->params + d->wg, d->out, d->in);
}

/* y (rows, out) = x (rows, in) W^T (+ b) */
static void dense_fwd(const nb_rnnsearch *m, const nb_rs_dense *d, real *y, const real *x,
                      int rows) {
    if (d->b != NO_OFF)
        for (int r = 0; r < rows; r++)
            memcpy(y + (size_t)r * d->out, m->params + d->b, sizeof(real) * d->out);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, rows, d->out, d->in, 1, x, d->in,
               wmat(m, d), d->in, d->b != NO_OFF ? 1 : 0, y, d->out);
}

/* From dy (rows, out): ACCUMULATES dW, db and (dx not NULL) dx (rows, in) += dy W. */
static void dense_bwd(nb_rnnsearch *m, const nb_rs_dense *d, const real *dy, const real *x,
                      int rows, real *dx) {
    if (d->weff) {
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, d->out, d->in, rows, 1, dy, d->out, x,
                   d->in, 0, d->dweff, d->in);
        nb_weightnorm_backward(m->grads + d->w, m->grads + d->wg, d->dweff, m->params + d->w,
                               m->params + d->wg, d->vn, d->out, d->in);
    } else {
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, d->out, d->in, rows, 1, dy, d->out, x,
                   d->in, 1, m->grads + d->w, d->in);
    }
    if (d->b != NO_OFF) nb_col_sums(m->grads + d->b, dy, rows, d->out);
    if (dx)
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d->in, d->out, 1, dy, d->out,
                   wmat(m, d), d->in, 1, dx, d->in);
}

/* base + off, or NULL when the tensor is absent */
#define OPT(base, off) ((off) != NO_OFF ? (base) + (off) : NULL)

/* The norm of the configured kind (its row of the norm table) over rows of n: out = N(in); st
 * caches 2*max(rows, n) values (st0 = st, st1 = st + half). none/weight copy. */
static void norm_fwd(nb_rnnsearch *m, const nb_rs_norm *f, real *out, real *st, const real *in,
                     int rows, int training) {
    const nb_norm_cfg *cfg = &m->cfg.norm;
    const nb_norm_def *nd = nb_norm_get(cfg->kind);
    const int n = f->n;
    const size_t half = (size_t)(rows > n ? rows : n);
    real *P = m->params;
    if (nd->REAL_OPS)
        nd->REAL_OPS->forward(out, st, st + half, OPT(P, f->rm), OPT(P, f->rv), in, OPT(P, f->g),
                              OPT(P, f->b), OPT(P, f->s), rows, n, training, cfg);
    else if (out != in)
        memcpy(out, in, sizeof(real) * (size_t)rows * n);
}

/* din (rows, n) = N'(in)^T dout (WRITES din), gains and biases ACCUMULATED. */
static void norm_bwd(nb_rnnsearch *m, const nb_rs_norm *f, real *din, const real *dout,
                     const real *in, const real *st, int rows, int training) {
    const nb_norm_cfg *cfg = &m->cfg.norm;
    const nb_norm_def *nd = nb_norm_get(cfg->kind);
    const int n = f->n;
    const size_t half = (size_t)(rows > n ? rows : n);
    real *P = m->params, *G = m->grads;
    if (!nd->REAL_OPS) { /* none, weight */
        if (din != dout) memcpy(din, dout, sizeof(real) * (size_t)rows * n);
        return;
    }
    memset(din, 0, sizeof(real) * (size_t)rows * n);
    nd->REAL_OPS->backward(din, OPT(G, f->g), OPT(G, f->b), OPT(G, f->s), dout, in, OPT(P, f->g),
                           OPT(P, f->s), st, st + half, rows, n, training, cfg, 0);
}

/* ---- setup --------------------------------------------------------------------------------- */

void nb_rnnsearch_free(nb_rnnsearch *m) {
    nb_gru_free(&m->encf);
    nb_gru_free(&m->encb);
    nb_gru_free(&m->dec1);
    nb_gru_free(&m->dec2);
    nb_rs_dense *ds[] = {&m->init, &m->ac, &m->as, &m->pe, &m->ps, &m->pc, &m->out};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        free(ds[i]->weff);
        free(ds[i]->vn);
        free(ds[i]->dweff);
    }
    real *own[] = {m->params, m->grads, m->xm,    m->ym,    m->wds,   m->wdt,  m->xs,  m->xsr,
                   m->hfr,    m->ctx,   m->cm,    m->zi,    m->zin,   m->s0,   m->sti, m->hcp,
                   m->hc,     m->sthc,  m->ye,    m->s1,    m->s,     m->ct,   m->hsp, m->hs,
                   m->sths,   m->al,    m->pep,   m->pen,   m->psp,   m->psn,  m->pcp, m->pcn,
                   m->stp,    m->o,     m->probs, m->dtmp,  m->dtmp2, m->dhid, m->dS,  m->dct,
                   m->dye,    m->dctx,  m->dhc,   m->dhsp,  m->ds,    m->ds1,  m->dxs, m->dxsr,
                   m->dhf,    m->dhb,   m->drow,  m->st[0], m->st[1], m->logp};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        free(own[i]);
    free(m->dvacc);
    free(m->dvgrp);
    free(m->dab);
    free(m->src);
    free(m->tgt);
    free(m->srow);
    memset(m, 0, sizeof *m);
}

static void add_dense(nb_rnnsearch *m, nb_rs_dense *d, const char *name, int out, int in, int bias,
                      int wn, int *bad) {
    char full[32];
    d->out = out;
    d->in = in;
    snprintf(full, sizeof full, "%s.%s", name, wn ? "V" : "W");
    d->w = nb_layout_add(&m->layout, full, (size_t)out * in, 1);
    d->b = d->wg = NO_OFF;
    if (bias) {
        snprintf(full, sizeof full, "%s.b", name);
        d->b = nb_layout_add(&m->layout, full, (size_t)out, 1);
    }
    if (wn) {
        snprintf(full, sizeof full, "%s.wg", name);
        d->wg = nb_layout_add(&m->layout, full, (size_t)out, 1);
    }
    if (d->w == NO_OFF || (bias && d->b == NO_OFF) || (wn && d->wg == NO_OFF)) *bad = 1;
}

static void add_norm(nb_rnnsearch *m, nb_rs_norm *f, const char *name, int n, int *bad) {
    const nb_norm_cfg *cfg = &m->cfg.norm;
    const nb_norm_def *nd = nb_norm_get(cfg->kind);
    char full[32];
    f->n = n;
    f->k = nd->k_of_row ? nb_prms_k(n, cfg->p, cfg->p_floor) : n;
    f->g = f->b = f->rm = f->rv = f->s = NO_OFF;
    if (!nd->ops) return; /* none, weight */
    if (nd->params & NB_NP_GAIN) {
        snprintf(full, sizeof full, "%s.g", name);
        f->g = nb_layout_add(&m->layout, full, (size_t)n, 1);
        if (f->g == NO_OFF) *bad = 1;
    }
    if (nd->params & NB_NP_SHIFT) {
        snprintf(full, sizeof full, "%s.beta", name);
        if ((f->b = nb_layout_add(&m->layout, full, (size_t)n, 1)) == NO_OFF) *bad = 1;
    }
    if (nd->nscalars > 0) {
        snprintf(full, sizeof full, "%s.%s", name, nd->scalar_name);
        f->s = nb_layout_add(&m->layout, full, (size_t)nd->nscalars, 1);
        if (f->s == NO_OFF) *bad = 1;
    }
    if (nd->params & NB_NP_RUNNING) {
        snprintf(full, sizeof full, "%s.rmean", name);
        if ((f->rm = nb_layout_add(&m->layout, full, (size_t)n, 0)) == NO_OFF) *bad = 1;
        snprintf(full, sizeof full, "%s.rvar", name);
        if ((f->rv = nb_layout_add(&m->layout, full, (size_t)n, 0)) == NO_OFF) *bad = 1;
    }
}

/* Nematus norm_weight: N(0, scale^2), orthogonal when square; then + center. */
static int init_matrix(real *w, int rows, int cols, nb_rng *rng, double scale, double center,
                       nb_err *err) {
    if (rows == cols) {
        if (nb_orthogonal(w, (size_t)cols, rows, rng, err) != 0) return -1;
    } else {
        for (size_t i = 0; i < (size_t)rows * cols; i++)
            w[i] = (real)(scale * nb_rng_normal(rng));
    }
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        w[i] += (real)center;
    return 0;
}

int nb_rnnsearch_init(nb_rnnsearch *m, const nb_rnnsearch_cfg *cfg, nb_rng *rng, nb_err *err) {
    memset(m, 0, sizeof *m);
    if (cfg->Vs < 2 || cfg->Vt < 2 || cfg->E < 1 || cfg->H < 1 || cfg->Bmax < 1 || cfg->Txmax < 1 ||
        cfg->Tymax < 1 || cfg->beam_max < 1 || cfg->eos < 0 || cfg->eos >= cfg->Vt ||
        cfg->Vs > (1 << 24) || cfg->Vt > (1 << 24) || cfg->H > (1 << 13) || cfg->E > (1 << 14) ||
        !(cfg->label_smoothing >= 0 && cfg->label_smoothing < 1) ||
        !(cfg->dropout_source >= 0 && cfg->dropout_source < 1) ||
        !(cfg->dropout_target >= 0 && cfg->dropout_target < 1))
        return nb_errf(err,
                       "rnnsearch: configuration out of range (vocabularies %d/%d, dim_word %d, "
                       "dim %d, batch %d, lengths %d/%d, beam %d, eos %d)",
                       cfg->Vs, cfg->Vt, cfg->E, cfg->H, cfg->Bmax, cfg->Txmax, cfg->Tymax,
                       cfg->beam_max, cfg->eos);
    m->cfg = *cfg;
    const int E = cfg->E, H = cfg->H, C = 2 * H, A = 2 * H, Bm = cfg->Bmax, Tx = cfg->Txmax;
    const int Td = cfg->Tymax > cfg->beam_max ? cfg->Tymax : cfg->beam_max;
    m->C = C;
    m->A = A;
    m->Tdmax = Td;
    m->Rmax = Bm * cfg->beam_max;
    const nb_norm_cfg *nc = &cfg->norm;
    const int wn = nb_norm_get(nc->kind)->acts == NB_ON_WEIGHTS;
    nb_layout *l = &m->layout;
    int bad = 0;
    m->emb_s = nb_layout_add(l, "emb_src", (size_t)cfg->Vs * E, 1);
    m->emb_t = nb_layout_add(l, "emb_tgt", (size_t)cfg->Vt * E, 1);
    if (nb_gru_setup(&m->encf, l, "enc_f.", E, H, Tx, Bm, nc, err) != 0) goto fail;
    if (nb_gru_setup(&m->encb, l, "enc_b.", E, H, Tx, Bm, nc, err) != 0) goto fail;
    add_dense(m, &m->init, "init", H, C, 1, wn, &bad);
    add_norm(m, &m->ninit, "init", H, &bad);
    if (nb_gru_setup(&m->dec1, l, "dec1.", E, H, Td, Bm, nc, err) != 0) goto fail;
    add_dense(m, &m->ac, "att_ctx", A, C, 1, wn, &bad);
    add_norm(m, &m->nac, "att_ctx", A, &bad);
    add_dense(m, &m->as, "att_st", A, H, 0, wn, &bad);
    add_norm(m, &m->nas, "att_st", A, &bad);
    m->att_v = nb_layout_add(l, "att_v", (size_t)A, 1);
    if (nb_gru_setup(&m->dec2, l, "dec2.", C, H, Td, Bm, nc, err) != 0) goto fail;
    m->dec2.bias_state = 1;
    add_dense(m, &m->pe, "out_emb", E, E, 1, wn, &bad);
    add_norm(m, &m->npe, "out_emb", E, &bad);
    add_dense(m, &m->ps, "out_st", E, H, 1, wn, &bad);
    add_norm(m, &m->nps, "out_st", E, &bad);
    add_dense(m, &m->pc, "out_ctx", E, C, 1, wn, &bad);
    add_norm(m, &m->npc, "out_ctx", E, &bad);
    add_dense(m, &m->out, "logit", cfg->Vt, E, 1, 0, &bad);
    if (bad || m->emb_s == NO_OFF || m->emb_t == NO_OFF || m->att_v == NO_OFF) {
        nb_errf(err, "rnnsearch: too many parameter tensors");
        goto fail;
    }
    int fail = 0;
    const size_t N = l->total, XB = (size_t)Tx * Bm, DB = (size_t)Td * Bm;
    const size_t mx = (size_t)(Bm > C ? Bm : C) + (size_t)(A + E);
    m->params = zalloc(N, &fail);
    m->grads = zalloc(N, &fail);
    m->src = calloc(XB, sizeof(int));
    m->tgt = calloc(DB, sizeof(int));
    m->srow = calloc(2 * (size_t)m->Rmax, sizeof(int)); /* then prev */
    if (!m->src || !m->tgt || !m->srow) fail = 1;
    m->xm = zalloc(2 * XB, &fail); /* then the reversed mask */
    m->ym = zalloc(DB, &fail);
    m->wds = zalloc(XB, &fail);
    m->wdt = zalloc(DB, &fail);
    m->xs = zalloc(XB * E, &fail);
    m->xsr = zalloc(XB * E, &fail);
    m->hfr = zalloc(XB * H, &fail);
    m->ctx = zalloc(XB * C, &fail);
    m->cm = zalloc((size_t)Bm * C, &fail);
    m->zi = zalloc((size_t)Bm * H, &fail);
    m->zin = zalloc((size_t)Bm * H, &fail);
    m->s0 = zalloc((size_t)Bm * H, &fail);
    m->sti = zalloc(2 * mx, &fail);
    m->hcp = zalloc(XB * A, &fail);
    m->hc = zalloc(XB * A, &fail);
    m->sthc = zalloc(2 * (XB + A), &fail);
    m->ye = zalloc(DB * E, &fail);
    m->s1 = zalloc(DB * H, &fail);
    m->s = zalloc(DB * H, &fail);
    m->ct = zalloc(DB * C, &fail);
    m->hsp = zalloc(DB * A, &fail);
    m->hs = zalloc(DB * A, &fail);
    m->sths = zalloc(2 * (DB + A) * (size_t)Td, &fail);
    m->al = zalloc(DB * Tx, &fail);
    m->pep = zalloc(DB * E, &fail);
    m->pen = zalloc(DB * E, &fail);
    m->psp = zalloc(DB * E, &fail);
    m->psn = zalloc(DB * E, &fail);
    m->pcp = zalloc(DB * E, &fail);
    m->pcn = zalloc(DB * E, &fail);
    m->stp = zalloc(6 * (DB + E), &fail);
    m->o = zalloc(DB * E, &fail);
    m->probs = zalloc(DB * cfg->Vt, &fail);
    const size_t big = DB * (size_t)(A > E ? A : E);
    m->dtmp = zalloc(big > XB * A ? big : XB * A, &fail);
    m->dtmp2 = zalloc(DB * E, &fail);
    m->dhid = zalloc(DB * E, &fail);
    m->dS = zalloc(DB * H, &fail);
    m->dct = zalloc(DB * C, &fail);
    m->dye = zalloc(DB * E, &fail);
    m->dctx = zalloc(XB * C, &fail);
    m->dhc = zalloc(XB * A, &fail);
    m->dhsp = zalloc(DB * A, &fail);
    m->ds = zalloc((size_t)Bm * H, &fail);
    m->ds1 = zalloc((size_t)Bm * H, &fail);
    m->dxs = zalloc(XB * E, &fail);
    m->dxsr = zalloc(XB * E, &fail);
    m->dhf = zalloc(XB * H, &fail);
    m->dhb = zalloc(XB * H, &fail);
    m->drow = zalloc((size_t)Bm * (C > A ? C : A), &fail);
    m->dvgrp = zalloc((size_t)Bm * A, &fail);
    m->dab = zalloc((size_t)Bm * Tx, &fail);
    m->dvacc = calloc((size_t)Bm * A, sizeof(double));
    if (!m->dvacc) fail = 1;
    m->st[0] = zalloc((size_t)m->Rmax * H, &fail);
    m->st[1] = zalloc((size_t)m->Rmax * H, &fail);
    m->logp = zalloc((size_t)m->Rmax * cfg->Vt, &fail);
    if (wn) {
        nb_rs_dense *ds[] = {&m->init, &m->ac, &m->as, &m->pe, &m->ps, &m->pc};
        for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
            ds[i]->weff = zalloc((size_t)ds[i]->out * ds[i]->in, &fail);
            ds[i]->dweff = zalloc((size_t)ds[i]->out * ds[i]->in, &fail);
            ds[i]->vn = zalloc((size_t)ds[i]->out, &fail);
        }
    }
    if (fail) {
        nb_errf(err, "rnnsearch: out of memory (dim_word %d, dim %d, batch %d, lengths %d/%d)", E,
                H, Bm, Tx, cfg->Tymax);
        goto fail;
    }
    /* initial values */
    real *P = m->params;
    const double sc = cfg->init_scale, ce = cfg->init_center;
    if (init_matrix(P + m->emb_s, cfg->Vs, E, rng, sc, ce, err) != 0 ||
        init_matrix(P + m->emb_t, cfg->Vt, E, rng, sc, ce, err) != 0)
        goto fail;
    nb_gru *gs[] = {&m->encf, &m->encb, &m->dec1, &m->dec2};
    for (int i = 0; i < 4; i++)
        if (nb_gru_init_normal(gs[i], P, rng, sc, ce, err) != 0) goto fail;
    nb_rs_dense *ds[] = {&m->init, &m->ac, &m->as, &m->pe, &m->ps, &m->pc, &m->out};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        nb_rs_dense *d = ds[i];
        if (init_matrix(P + d->w, d->out, d->in, rng, sc, ce, err) != 0) goto fail;
        if (d->wg != NO_OFF)
            for (int o = 0; o < d->out; o++) {
                double s2 = 0;
                for (int j = 0; j < d->in; j++)
                    s2 += (double)P[d->w + (size_t)o * d->in + j] * P[d->w + (size_t)o * d->in + j];
                P[d->wg + o] = (real)sqrt(s2);
            }
    }
    for (int i = 0; i < A; i++)
        P[m->att_v + i] = (real)(sc * nb_rng_normal(rng) + ce);
    nb_rs_norm *ns[] = {&m->ninit, &m->nac, &m->nas, &m->npe, &m->nps, &m->npc};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        if (ns[i]->g != NO_OFF)
            for (int c = 0; c < ns[i]->n; c++)
                P[ns[i]->g + c] = 1;
        if (ns[i]->rv != NO_OFF)
            for (int c = 0; c < ns[i]->n; c++)
                P[ns[i]->rv + c] = 1;
        const nb_norm_def *nd = nb_norm_get(cfg->norm.kind);
        if (ns[i]->s != NO_OFF)
            for (int c = 0; c < nd->nscalars; c++)
                P[ns[i]->s + (size_t)c] = (real)nd->scalar_init(&cfg->norm);
    }
    return 0;
fail:
    nb_rnnsearch_free(m);
    return -1;
}

/* ---- shared pieces ------------------------------------------------------------------------- */

static void begin_dense(nb_rnnsearch *m) {
    nb_rs_dense *ds[] = {&m->init, &m->ac, &m->as, &m->pe, &m->ps, &m->pc};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        dense_begin(m, ds[i]);
}

/* The encoder over m->src/m->xm (already set, m->B, m->Tx): context, s0, Hc. */
static void encode(nb_rnnsearch *m, int training) {
    const int E = m->cfg.E, H = m->cfg.H, C = m->C, A = m->A, B = m->B, Tx = m->Tx;
    const size_t BE = (size_t)B * E, BH = (size_t)B * H;
    real *P = m->params;
    const real *Es = P + m->emb_s;
    for (int t = 0; t < Tx; t++)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b;
            const real f = m->wds[row];
            const real *e = Es + (size_t)m->src[row] * E;
            real *x = m->xs + row * E;
            for (int i = 0; i < E; i++)
                x[i] = f * e[i];
        }
    for (int t = 0; t < Tx; t++)
        memcpy(m->xsr + (size_t)t * BE, m->xs + (size_t)(Tx - 1 - t) * BE, sizeof(real) * BE);
    nb_gru_forward(&m->encf, P, m->xs, m->xm, Tx, B, training);
    nb_gru_forward(&m->encb, P, m->xsr, m->xm + (size_t)m->cfg.Txmax * m->cfg.Bmax, Tx, B,
                   training);
    for (int t = 0; t < Tx; t++)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b;
            real *c = m->ctx + row * C;
            memcpy(c, m->encf.h + (size_t)(t + 1) * BH + (size_t)b * H, sizeof(real) * H);
            memcpy(c + H, m->encb.h + (size_t)(Tx - t) * BH + (size_t)b * H, sizeof(real) * H);
        }
    /* initial state */
    for (int b = 0; b < B; b++) {
        real *cm = m->cm + (size_t)b * C;
        double len = 0;
        for (int i = 0; i < C; i++)
            cm[i] = 0;
        for (int t = 0; t < Tx; t++) {
            const real mk = m->xm[(size_t)t * B + b];
            if (mk == 0) continue;
            len += mk;
            const real *c = m->ctx + ((size_t)t * B + b) * C;
            for (int i = 0; i < C; i++)
                cm[i] += c[i];
        }
        for (int i = 0; i < C; i++)
            cm[i] = (real)(cm[i] / len);
    }
    dense_fwd(m, &m->init, m->zi, m->cm, B);
    norm_fwd(m, &m->ninit, m->zin, m->sti, m->zi, B, training);
    for (size_t i = 0; i < BH; i++)
        m->s0[i] = REAL_TANH(m->zin[i]);
    dense_fwd(m, &m->ac, m->hcp, m->ctx, Tx * B);
    norm_fwd(m, &m->nac, m->hc, m->sthc, m->hcp, Tx * B, training);
    (void)A;
}

/* Attention for R rows: row r reads source sentence srow[r] (NULL: r), hs (R, A); writes the
 * weights al (R, Tx) and contexts ct (R, C). */
static void attend(nb_rnnsearch *m, int R, const int *srow, const real *hs, real *al, real *ct) {
    const int A = m->A, C = m->C, B = m->B, Tx = m->Tx;
    const real *v = m->params + m->att_v;
#pragma omp parallel for schedule(static) if ((size_t)R * Tx * A >= PAR_MIN)
    for (int r = 0; r < R; r++) {
        const int sb = srow ? srow[r] : r;
        const real *h = hs + (size_t)r * A;
        real *a = al + (size_t)r * Tx, mxv = -INFINITY;
        for (int j = 0; j < Tx; j++) {
            if (m->xm[(size_t)j * B + sb] == 0) {
                a[j] = 0;
                continue;
            }
            const real *hc = m->hc + ((size_t)j * B + sb) * A;
            real e = 0;
#pragma omp simd reduction(+ : e)
            for (int i = 0; i < A; i++)
                e += v[i] * vm_tanh(hc[i] + h[i]);
            a[j] = e;
            if (e > mxv) mxv = e;
        }
        double z = 0;
        for (int j = 0; j < Tx; j++)
            if (m->xm[(size_t)j * B + sb] != 0) {
                a[j] = REAL_EXP(a[j] - mxv);
                z += a[j];
            }
        real *c = ct + (size_t)r * C;
        for (int i = 0; i < C; i++)
            c[i] = 0;
        for (int j = 0; j < Tx; j++) {
            if (m->xm[(size_t)j * B + sb] == 0) continue;
            a[j] = (real)(a[j] / z);
            const real aj = a[j], *cx = m->ctx + ((size_t)j * B + sb) * C;
#pragma omp simd
            for (int i = 0; i < C; i++)
                c[i] += aj * cx[i];
        }
    }
}

/* Words of the output softmax whose exponentials are summed in float before the double sum. */
#define SM_GRP 128

/* The label-smoothed loss's gradient over a row of Vt: p <- (p s - ls/Vt) / GB, and the target
 * y's -(1 - ls)/GB; s scales exponentials to probabilities (1 when p holds probabilities). */
static void xent_grad_row(real *p, real s, int Vt, int y, double ls, int GB) {
    const real u = (real)(ls / Vt), sc = (real)(1.0 / GB);
#pragma omp simd
    for (int k = 0; k < Vt; k++)
        p[k] = (p[k] * s - u) * sc;
    p[y] -= (real)((1 - ls) / GB);
}

/* Deep output for rows: o = tanh(Npe(ye) + Nps(s) + Npc(ct)), logits into lg (rows, Vt). */
static void deep_out(nb_rnnsearch *m, int rows, const real *ye, const real *s, const real *ct,
                     real *lg, int training) {
    const int E = m->cfg.E;
    const size_t half = 2 * ((size_t)rows + E);
    dense_fwd(m, &m->pe, m->pep, ye, rows);
    norm_fwd(m, &m->npe, m->pen, m->stp, m->pep, rows, training);
    dense_fwd(m, &m->ps, m->psp, s, rows);
    norm_fwd(m, &m->nps, m->psn, m->stp + half, m->psp, rows, training);
    dense_fwd(m, &m->pc, m->pcp, ct, rows);
    norm_fwd(m, &m->npc, m->pcn, m->stp + 2 * half, m->pcp, rows, training);
    const size_t n = (size_t)rows * E;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        m->o[i] = vm_tanh(m->pen[i] + m->psn[i] + m->pcn[i]);
    dense_fwd(m, &m->out, lg, m->o, rows);
}

static void set_batch(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B) {
    const size_t off = (size_t)m->cfg.Txmax * m->cfg.Bmax;
    m->B = B;
    m->Tx = Tx;
    for (int t = 0; t < Tx; t++)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b;
            const int in = t < src_len[b];
            m->xm[row] = in;
            m->src[row] = in ? src[row] : 0;
            m->wds[row] = 1;
            /* the backward encoder's mask, reversed in time */
            m->xm[off + (size_t)(Tx - 1 - t) * B + b] = in;
        }
}

/* ---- forward ------------------------------------------------------------------------------- */

double nb_rnnsearch_forward(nb_rnnsearch *m, const int *src, const int *src_len, int Tx,
                            const int *tgt, const int *tgt_len, int Ty, int B, int training,
                            nb_rng *noise, nb_rnnsearch_stats *stats) {
    const int E = m->cfg.E, H = m->cfg.H, C = m->C, A = m->A, Vt = m->cfg.Vt;
    real *P = m->params;
    m->Ty = Ty;
    m->training = training;
    set_batch(m, src, src_len, Tx, B);
    for (int t = 0; t < Ty; t++)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b;
            const int in = t < tgt_len[b];
            m->ym[row] = in;
            m->tgt[row] = in ? tgt[row] : 0;
            m->wdt[row] = 1;
        }
    const double ps = m->cfg.dropout_source, pt = m->cfg.dropout_target;
    if (training && noise && (ps > 0 || pt > 0)) {
        /* every sentence's own streams (source, target), keyed by one draw of noise and the
         * sentence's index row0 + b in the whole batch, drawn position by position: its masks
         * do not depend on the other sentences or the padding, so a batch split over processes
         * draws what one process draws */
        const uint64_t base = nb_rng_u64(noise);
        for (int b = 0; b < B; b++) {
            const uint64_t id = 2 * ((uint64_t)m->row0 + (uint64_t)b);
            nb_rng rs, rt;
            nb_rng_seed(&rs, base, id + 1);
            nb_rng_seed(&rt, base, id + 2);
            if (ps > 0)
                for (int t = 0; t < Tx; t++)
                    m->wds[(size_t)t * B + b] = nb_rng_uniform(&rs) < ps ? 0 : (real)(1 / (1 - ps));
            if (pt > 0)
                for (int t = 0; t < Ty; t++)
                    m->wdt[(size_t)t * B + b] = nb_rng_uniform(&rt) < pt ? 0 : (real)(1 / (1 - pt));
        }
    }
    begin_dense(m);
    encode(m, training);

    /* previous-word embeddings: 0 at t = 0 */
    const real *Et = P + m->emb_t;
    memset(m->ye, 0, sizeof(real) * (size_t)B * E);
    for (int t = 1; t < Ty; t++)
        for (int b = 0; b < B; b++) {
            const size_t pr = (size_t)(t - 1) * B + b, row = (size_t)t * B + b;
            const real f = m->wdt[pr];
            const real *e = Et + (size_t)m->tgt[pr] * E;
            real *y = m->ye + row * E;
            for (int i = 0; i < E; i++)
                y[i] = f * e[i];
        }
    nb_gru_begin(&m->dec1, P, Ty, B, training);
    nb_gru_begin(&m->dec2, P, Ty, B, training);
    m->dec1.bn_offset = m->dec2.bn_offset = 0;
    nb_gru_input(&m->dec1, P, m->ye, 0, Ty);
    const size_t BH = (size_t)B * H, BA = (size_t)B * A, H3 = 3 * (size_t)H;
    const size_t hsh = 2 * ((size_t)B + A);
    for (int t = 0; t < Ty; t++) {
        real *s1 = m->s1 + (size_t)t * BH;
        nb_gru_step(&m->dec1, P, t, t ? m->s + (size_t)(t - 1) * BH : m->s0, s1, NULL);
        if (stats) {
            const real *hn = m->dec1.hn + (size_t)t * B * H3;
            for (int b = 0; b < B; b++) {
                if (!m->ym[(size_t)t * B + b]) continue;
                double s = 0, q = 0;
                for (size_t i = 0; i < H3; i++) {
                    double v = hn[(size_t)b * H3 + i];
                    s += v;
                    q += v * v;
                }
                if (t < 4) {
                    stats->sum[t] += s;
                    stats->sumsq[t] += q;
                    stats->n[t] += (double)H3;
                }
                stats->sum[4] += s;
                stats->sumsq[4] += q;
                stats->n[4] += (double)H3;
            }
        }
        dense_fwd(m, &m->as, m->hsp + (size_t)t * BA, s1, B);
        norm_fwd(m, &m->nas, m->hs + (size_t)t * BA, m->sths + (size_t)t * hsh,
                 m->hsp + (size_t)t * BA, B, training);
        attend(m, B, NULL, m->hs + (size_t)t * BA, m->al + (size_t)t * B * Tx,
               m->ct + (size_t)t * B * C);
        nb_gru_input(&m->dec2, P, m->ct, t, 1);
        nb_gru_step(&m->dec2, P, t, s1, m->s + (size_t)t * BH, NULL);
    }
    const int rows = Ty * B;
    deep_out(m, rows, m->ye, m->s, m->ct, m->probs, training);
    /* softmax and the label-smoothed loss; when training, each row's loss gradient
     * (p - q) / GB is written over its probabilities in the same pass (the backward's
     * input), so the 8,000-word rows are read from memory once */
    const double ls = m->cfg.label_smoothing;
    const int GB = m->grad_rows > 0 ? m->grad_rows : B;
    double loss = 0, nll = 0;
    long ntok = 0;
#pragma omp parallel for schedule(static) reduction(+ : loss, nll, ntok) if ((size_t)rows * Vt >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        real *p = m->probs + (size_t)r * Vt;
        if (!m->ym[r]) {
            if (training) memset(p, 0, sizeof(real) * Vt);
            continue;
        }
        real mxv = p[0];
#pragma omp simd reduction(max : mxv)
        for (int k = 0; k < Vt; k++)
            mxv = p[k] > mxv ? p[k] : mxv;
        const int y = m->tgt[r];
        const double ly = (double)(p[y] - mxv);
        /* the sums in float over groups of SM_GRP words, each group's added in double */
        double z = 0, sl = 0;
        for (int k0 = 0; k0 < Vt; k0 += SM_GRP) {
            const int k1 = k0 + SM_GRP < Vt ? k0 + SM_GRP : Vt;
            real zg = 0, slg = 0;
#pragma omp simd reduction(+ : zg, slg)
            for (int k = k0; k < k1; k++) {
                const real d = p[k] - mxv, e = vm_exp(d);
                slg += d;
                p[k] = e;
                zg += e;
            }
            z += zg;
            sl += slg;
        }
        /* z >= 1: the largest logit contributes exp(0) */
        // cppcheck-suppress invalidFunctionArg
        const double lz = log(z);
        if (training) {
            xent_grad_row(p, (real)(1.0 / z), Vt, y, ls, GB);
        } else {
            const real iz = (real)(1.0 / z);
#pragma omp simd
            for (int k = 0; k < Vt; k++)
                p[k] *= iz;
        }
        const double lp_y = ly - lz, lsum = sl - (double)Vt * lz; /* sum_k log p_k */
        nll += -lp_y;
        loss += -((1 - ls) * lp_y + ls / Vt * lsum);
        ntok++;
    }
    m->nll = nll;
    m->ntok = ntok;
    return loss / GB;
}

/* ---- backward ------------------------------------------------------------------------------ */

/* Source positions whose terms of the attention vector's gradient are summed in float before
 * they are added to its double accumulator. */
#define ATT_GRP 8

/* Attention backward of target step t from dct_t (B, C): ACCUMULATES into m->dctx, m->dhc and
 * m->dvacc, WRITES dhs (B, A). */
static void attend_back(nb_rnnsearch *m, int t, const real *dct_t, real *dhs) {
    const int A = m->A, C = m->C, B = m->B, Tx = m->Tx;
    const real *v = m->params + m->att_v;
    const real *hs_t = m->hs + (size_t)t * B * A;
#pragma omp parallel for schedule(static) if ((size_t)B * Tx * A >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *a = m->al + ((size_t)t * B + b) * Tx, *dc = dct_t + (size_t)b * C;
        const real *h = hs_t + (size_t)b * A;
        real *dh = dhs + (size_t)b * A, *dvg = m->dvgrp + (size_t)b * A;
        real *dab = m->dab + (size_t)b * m->cfg.Txmax;
        double *dv = m->dvacc + (size_t)b * A;
        for (int i = 0; i < A; i++)
            dh[i] = 0;
        /* dL/da_j = dc . ctx_j, once per position (both the softmax's sum and each de use it) */
        double sdot = 0;
        for (int j = 0; j < Tx; j++) {
            const size_t row = (size_t)j * B + b;
            if (m->xm[row] == 0) continue;
            const real *cx = m->ctx + row * C;
            real *dcx = m->dctx + row * C;
            const real aj = a[j];
            real da = 0;
#pragma omp simd reduction(+ : da)
            for (int i = 0; i < C; i++) {
                da += dc[i] * cx[i];
                dcx[i] += aj * dc[i];
            }
            dab[j] = da;
            sdot += (double)aj * da;
        }
        /* v's gradient: each group of ATT_GRP source positions summed in float, the group's sum
         * added to the double accumulator (converting every term cost a fifth of this loop) */
        for (int i = 0; i < A; i++)
            dvg[i] = 0;
        int ng = 0;
        for (int j = 0; j < Tx; j++) {
            const size_t row = (size_t)j * B + b;
            if (m->xm[row] == 0) continue;
            const real de = (real)(a[j] * (dab[j] - sdot));
            const real *hc = m->hc + row * A;
            real *dhc = m->dhc + row * A;
#pragma omp simd
            for (int i = 0; i < A; i++) {
                const real th = vm_tanh(hc[i] + h[i]);
                const real dp = de * v[i] * (1 - th * th);
                dhc[i] += dp;
                dh[i] += dp;
                dvg[i] += de * th;
            }
            if (++ng == ATT_GRP) {
#pragma omp simd
                for (int i = 0; i < A; i++) {
                    dv[i] += (double)dvg[i];
                    dvg[i] = 0;
                }
                ng = 0;
            }
        }
        if (ng > 0) {
#pragma omp simd
            for (int i = 0; i < A; i++)
                dv[i] += (double)dvg[i];
        }
    }
}

void nb_rnnsearch_backward(nb_rnnsearch *m) {
    const int E = m->cfg.E, H = m->cfg.H, C = m->C, A = m->A, Vt = m->cfg.Vt;
    const int B = m->B, Tx = m->Tx, Ty = m->Ty, rows = Ty * B, tr = m->training;
    const int GB = m->grad_rows > 0 ? m->grad_rows : B; /* the loss's divisor */
    real *P = m->params, *G = m->grads;
    const double ls = m->cfg.label_smoothing;
    /* dlogits = (p - q)/GB on real positions: a training forward wrote them over the
     * probabilities; after one that did not train, they are formed here */
    if (!tr) {
#pragma omp parallel for schedule(static) if ((size_t)rows * Vt >= PAR_MIN)
        for (int r = 0; r < rows; r++) {
            real *p = m->probs + (size_t)r * Vt;
            if (!m->ym[r]) {
                memset(p, 0, sizeof(real) * Vt);
                continue;
            }
            xent_grad_row(p, 1, Vt, m->tgt[r], ls, GB);
        }
    }
    const size_t RE = (size_t)rows * E;
    memset(m->dhid, 0, sizeof(real) * RE);
    dense_bwd(m, &m->out, m->probs, m->o, rows, m->dhid);
    for (size_t i = 0; i < RE; i++)
        m->dtmp2[i] = m->dhid[i] * (1 - m->o[i] * m->o[i]);
    const size_t half = 2 * ((size_t)rows + E);
    memset(m->dye, 0, sizeof(real) * RE);
    memset(m->dS, 0, sizeof(real) * (size_t)rows * H);
    memset(m->dct, 0, sizeof(real) * (size_t)rows * C);
    norm_bwd(m, &m->npe, m->dtmp, m->dtmp2, m->pep, m->stp, rows, tr);
    dense_bwd(m, &m->pe, m->dtmp, m->ye, rows, m->dye);
    norm_bwd(m, &m->nps, m->dtmp, m->dtmp2, m->psp, m->stp + half, rows, tr);
    dense_bwd(m, &m->ps, m->dtmp, m->s, rows, m->dS);
    norm_bwd(m, &m->npc, m->dtmp, m->dtmp2, m->pcp, m->stp + 2 * half, rows, tr);
    dense_bwd(m, &m->pc, m->dtmp, m->ct, rows, m->dct);

    /* the decoder, backwards in time */
    const size_t BH = (size_t)B * H, BA = (size_t)B * A, hsh = 2 * ((size_t)B + A);
    memset(m->dctx, 0, sizeof(real) * (size_t)Tx * B * C);
    memset(m->dhc, 0, sizeof(real) * (size_t)Tx * B * A);
    memset(m->dvacc, 0, sizeof(double) * BA);
    memset(m->ds, 0, sizeof(real) * BH);
    for (int t = Ty - 1; t >= 0; t--) {
        real *dst = m->dS + (size_t)t * BH;
        for (size_t i = 0; i < BH; i++)
            dst[i] += m->ds[i];
        memset(m->ds1, 0, sizeof(real) * BH);
        nb_gru_step_back(&m->dec2, G, P, t, dst, m->ds1, NULL);
        nb_gru_input_back(&m->dec2, G, P, t, m->dct);
        attend_back(m, t, m->dct + (size_t)t * B * C, m->drow);
        norm_bwd(m, &m->nas, m->dhsp + (size_t)t * BA, m->drow, m->hsp + (size_t)t * BA,
                 m->sths + (size_t)t * hsh, B, tr);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, A, 1, m->dhsp + (size_t)t * BA,
                   A, wmat(m, &m->as), H, 1, m->ds1, H);
        memset(m->ds, 0, sizeof(real) * BH);
        nb_gru_step_back(&m->dec1, G, P, t, m->ds1, m->ds, NULL);
    }
    dense_bwd(m, &m->as, m->dhsp, m->s1, rows, NULL);
    nb_gru_finish_back(&m->dec2, G, NULL, P);
    nb_gru_finish_back(&m->dec1, G, m->dye, P);
    for (int i = 0; i < A; i++) {
        double a = 0;
        for (int b = 0; b < B; b++)
            a += m->dvacc[(size_t)b * A + i];
        G[m->att_v + i] += (real)a;
    }
    /* initial state: m->ds is the gradient of s_-1 */
    for (size_t i = 0; i < BH; i++)
        m->dtmp[i] = m->ds[i] * (1 - m->s0[i] * m->s0[i]);
    norm_bwd(m, &m->ninit, m->dtmp2, m->dtmp, m->zi, m->sti, B, tr);
    memset(m->drow, 0, sizeof(real) * (size_t)B * C);
    dense_bwd(m, &m->init, m->dtmp2, m->cm, B, m->drow);
    for (int b = 0; b < B; b++) {
        double len = 0;
        for (int t = 0; t < Tx; t++)
            len += m->xm[(size_t)t * B + b];
        for (int t = 0; t < Tx; t++) {
            if (!m->xm[(size_t)t * B + b]) continue;
            real *d = m->dctx + ((size_t)t * B + b) * C;
            for (int i = 0; i < C; i++)
                d[i] += (real)(m->drow[(size_t)b * C + i] / len);
        }
    }
    /* attention keys */
    norm_bwd(m, &m->nac, m->dtmp, m->dhc, m->hcp, m->sthc, Tx * B, tr);
    dense_bwd(m, &m->ac, m->dtmp, m->ctx, Tx * B, m->dctx);
    /* the encoder */
    for (int t = 0; t < Tx; t++)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b, rrow = (size_t)(Tx - 1 - t) * B + b;
            memcpy(m->dhf + row * H, m->dctx + row * C, sizeof(real) * H);
            memcpy(m->dhb + rrow * H, m->dctx + row * C + H, sizeof(real) * H);
        }
    const size_t XE = (size_t)Tx * B * E;
    memset(m->dxs, 0, sizeof(real) * XE);
    memset(m->dxsr, 0, sizeof(real) * XE);
    nb_gru_backward_seq(&m->encf, G, m->dxs, P, NULL, m->dhf);
    nb_gru_backward_seq(&m->encb, G, m->dxsr, P, NULL, m->dhb);
    real *ges = G + m->emb_s, *get = G + m->emb_t;
    for (int t = 0; t < Tx; t++)
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)t * B + b, rrow = (size_t)(Tx - 1 - t) * B + b;
            const real f = m->wds[row];
            real *g = ges + (size_t)m->src[row] * E;
            const real *d1 = m->dxs + row * E, *d2 = m->dxsr + rrow * E;
            for (int i = 0; i < E; i++)
                g[i] += f * (d1[i] + d2[i]);
        }
    for (int t = 1; t < Ty; t++)
        for (int b = 0; b < B; b++) {
            const size_t pr = (size_t)(t - 1) * B + b, row = (size_t)t * B + b;
            const real f = m->wdt[pr];
            real *g = get + (size_t)m->tgt[pr] * E;
            const real *d = m->dye + row * E;
            for (int i = 0; i < E; i++)
                g[i] += f * d[i];
        }
}

/* ---- decoding ------------------------------------------------------------------------------ */

void nb_rnnsearch_encode(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B) {
    m->training = 0;
    set_batch(m, src, src_len, Tx, B);
    begin_dense(m);
    encode(m, 0);
}

void nb_rnnsearch_dec_init(nb_rnnsearch *m, int R, const int *srow, real *s) {
    const int H = m->cfg.H;
    for (int r = 0; r < R; r++)
        memcpy(s + (size_t)r * H, m->s0 + (size_t)srow[r] * H, sizeof(real) * H);
}

void nb_rnnsearch_dec_step(nb_rnnsearch *m, int R, const int *srow, const int *prev,
                           const real *sin, real *sout, real *logp, int step) {
    const int E = m->cfg.E, Vt = m->cfg.Vt;
    real *P = m->params;
    const real *Et = P + m->emb_t;
    for (int r = 0; r < R; r++) {
        real *y = m->ye + (size_t)r * E;
        if (prev[r] < 0)
            memset(y, 0, sizeof(real) * E);
        else
            memcpy(y, Et + (size_t)prev[r] * E, sizeof(real) * E);
    }
    nb_gru_begin(&m->dec1, P, 1, R, 0);
    m->dec1.bn_offset = step;
    nb_gru_input(&m->dec1, P, m->ye, 0, 1);
    nb_gru_step(&m->dec1, P, 0, sin, m->s1, NULL);
    dense_fwd(m, &m->as, m->hsp, m->s1, R);
    norm_fwd(m, &m->nas, m->hs, m->sths, m->hsp, R, 0);
    attend(m, R, srow, m->hs, m->al, m->ct);
    nb_gru_begin(&m->dec2, P, 1, R, 0);
    m->dec2.bn_offset = step;
    nb_gru_input(&m->dec2, P, m->ct, 0, 1);
    nb_gru_step(&m->dec2, P, 0, m->s1, sout, NULL);
    m->dec1.bn_offset = m->dec2.bn_offset = 0;
    deep_out(m, R, m->ye, sout, m->ct, logp, 0);
    for (int r = 0; r < R; r++) {
        real *l = logp + (size_t)r * Vt, mxv = l[0];
        for (int k = 1; k < Vt; k++)
            if (l[k] > mxv) mxv = l[k];
        double z = 0;
        for (int k = 0; k < Vt; k++)
            z += exp((double)(l[k] - mxv));
        /* z >= 1: the largest logit contributes exp(0) */
        // cppcheck-suppress invalidFunctionArg
        const real lz = (real)log(z);
        for (int k = 0; k < Vt; k++)
            l[k] = l[k] - mxv - lz;
    }
}

void nb_rnnsearch_greedy(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B,
                         int maxlen, int *out, int *out_len) {
    const int H = m->cfg.H, Vt = m->cfg.Vt, eos = m->cfg.eos;
    if (B < 1) return;
    nb_rnnsearch_encode(m, src, src_len, Tx, B);
    int *srow = m->srow, *prev = m->srow + m->Rmax;
    for (int b = 0; b < B; b++) {
        srow[b] = b;
        prev[b] = -1;
        out_len[b] = 0;
    }
    nb_rnnsearch_dec_init(m, B, srow, m->st[0]);
    int live = B;
    unsigned char *done = (unsigned char *)m->wdt; /* B bytes of scratch */
    memset(done, 0, (size_t)B);
    for (int i = 0; i < maxlen && live > 0; i++) {
        nb_rnnsearch_dec_step(m, B, srow, prev, m->st[0], m->st[1], m->logp, i);
        memcpy(m->st[0], m->st[1], sizeof(real) * (size_t)B * H);
        for (int b = 0; b < B; b++) {
            if (done[b]) continue;
            const real *l = m->logp + (size_t)b * Vt;
            int best = 0;
            for (int k = 1; k < Vt; k++)
                if (l[k] > l[best]) best = k;
            prev[b] = best;
            if (best == eos) {
                done[b] = 1;
                live--;
            } else {
                out[(size_t)b * maxlen + out_len[b]++] = best;
            }
        }
    }
}

int nb_rnnsearch_beam(nb_rnnsearch *m, const int *src, const int *src_len, int Tx, int B, int K,
                      int maxlen, int *out, int *out_len, double *score, nb_err *err) {
    const int H = m->cfg.H, Vt = m->cfg.Vt, eos = m->cfg.eos, R = B * K;
    const int nematus = !m->cfg.beam_simple;
    if (K < 1 || K > m->cfg.beam_max || maxlen < 1)
        return nb_errf(err, "rnnsearch: beam %d out of range (1..%d)", K, m->cfg.beam_max);
    double *cost = malloc(sizeof(double) * 2 * R);
    int *len = malloc(sizeof(int) * 2 * R), *fin = malloc(sizeof(int) * 2 * R);
    int *toks = malloc(sizeof(int) * (size_t)maxlen * R),
        *back = malloc(sizeof(int) * (size_t)maxlen * R);
    int *ck = malloc(sizeof(int) * K), *cw = malloc(sizeof(int) * K);
    double *cc = malloc(sizeof(double) * K);
    if (!cost || !len || !fin || !toks || !back || !ck || !cw || !cc) {
        free(cost), free(len), free(fin), free(toks), free(back), free(ck), free(cw), free(cc);
        return nb_errf(err, "rnnsearch: out of memory for a beam of %d over %d sentences", K, B);
    }
    nb_rnnsearch_encode(m, src, src_len, Tx, B);
    int *srow = m->srow, *prev = m->srow + m->Rmax;
    for (int r = 0; r < R; r++) {
        srow[r] = r / K;
        prev[r] = -1;
        cost[r] = r % K ? INFINITY : 0;
        len[r] = 0;
        fin[r] = 0;
    }
    nb_rnnsearch_dec_init(m, R, srow, m->st[0]);
    int steps = 0;
    for (int i = 0; i < maxlen; i++) {
        nb_rnnsearch_dec_step(m, R, srow, prev, m->st[0], m->st[1], m->logp, i);
        double *ncost = cost + R;
        int *nlen = len + R, *nfin = fin + R;
        int alldone = 1;
        for (int b = 0; b < B; b++) {
            int n = 0; /* candidates kept, sorted by cost (ties: first found) */
            /* Nematus: the finished hypotheses first, each kept with its cost (inference.py makes
             * their costs positive, above every open one's); the open ones' continuations fill
             * the places left, sorted among themselves from n0 */
            for (int k = 0; nematus && k < K; k++) {
                const int r = b * K + k;
                if (!isfinite(cost[r]) || !fin[r]) continue;
                cc[n] = cost[r];
                ck[n] = k;
                cw[n] = eos;
                n++;
            }
            const int n0 = n;
            for (int k = 0; k < K && n0 < K; k++) {
                const int r = b * K + k;
                if (!isfinite(cost[r]) || (nematus && fin[r])) continue;
                const real *l = m->logp + (size_t)r * Vt;
                for (int w = fin[r] ? eos : 0; w < (fin[r] ? eos + 1 : Vt); w++) {
                    const double c = fin[r] ? cost[r] : cost[r] - (double)l[w];
                    if (n == K && !(c < cc[K - 1])) continue;
                    int pos = n < K ? n++ : K - 1;
                    while (pos > n0 && c < cc[pos - 1]) {
                        cc[pos] = cc[pos - 1];
                        ck[pos] = ck[pos - 1];
                        cw[pos] = cw[pos - 1];
                        pos--;
                    }
                    cc[pos] = c;
                    ck[pos] = k;
                    cw[pos] = w;
                }
            }
            for (int j = 0; j < K; j++) {
                const int r = b * K + j;
                if (j >= n) {
                    ncost[r] = INFINITY;
                    nlen[r] = 0;
                    nfin[r] = 1;
                    back[(size_t)i * R + r] = 0;
                    toks[(size_t)i * R + r] = eos;
                    prev[r] = eos;
                    continue;
                }
                const int pr = b * K + ck[j];
                ncost[r] = cc[j];
                nlen[r] = len[pr] + (fin[pr] ? 0 : 1);
                nfin[r] = fin[pr] || cw[j] == eos;
                back[(size_t)i * R + r] = ck[j];
                toks[(size_t)i * R + r] = cw[j];
                prev[r] = cw[j];
                memcpy(m->st[0] + (size_t)r * H, m->st[1] + (size_t)pr * H, sizeof(real) * H);
                if (!nfin[r]) alldone = 0;
            }
        }
        memcpy(cost, ncost, sizeof(double) * R);
        memcpy(len, nlen, sizeof(int) * R);
        memcpy(fin, nfin, sizeof(int) * R);
        steps = i + 1;
        if (alldone) break;
    }
    for (int b = 0; b < B; b++) {
        int best = -1;
        double bs = INFINITY;
        for (int k = 0; k < K; k++) {
            const int r = b * K + k;
            if (!isfinite(cost[r]) || len[r] < 1) continue;
            /* Nematus: one still open after maxlen tokens as if an eos followed */
            const double s = cost[r] / (len[r] + (nematus && !fin[r] ? 1 : 0));
            if (best < 0 || s < bs) {
                best = k;
                bs = s;
            }
        }
        out_len[b] = 0;
        if (score) score[b] = best >= 0 ? -bs : -INFINITY;
        if (best < 0) continue;
        /* walk back to collect the tokens, then keep those before the first eos */
        int k = best, n = 0;
        int *o = out + (size_t)b * maxlen;
        for (int i = steps - 1; i >= 0; i--) {
            o[i] = toks[(size_t)i * R + b * K + k];
            k = back[(size_t)i * R + b * K + k];
        }
        while (n < steps && o[n] != eos)
            n++;
        out_len[b] = n;
    }
    free(cost), free(len), free(fin), free(toks), free(back), free(ck), free(cw), free(cc);
    return 0;
}

#ifndef NB_F64
/* ---- memory estimate --------------------------------------------------------------------------
 */

/* nb_gru_setup's parameters (floats) and buffers (bytes) for E inputs, H units, Tmax x Bmax. */
static void gru_bytes(const nb_norm_cfg *nc, double E, double H, double Tmax, double Bmax,
                      double *params, double *bytes) {
    const nb_norm_def *nd = nb_norm_get(nc->kind);
    const int rowwise = nd->acts == NB_ON_ROWS, batch = nd->acts == NB_ON_FEATURES;
    const int wn = nd->acts == NB_ON_WEIGHTS;
    const double H3 = 3 * H, TB = Tmax * Bmax, BH = Bmax * H;
    double p = H3 * E + H3 + H3 * H;
    if (rowwise || batch) p += 2 * H3 + 2 * nd->nscalars;
    if (((rowwise || batch) && (nd->params & NB_NP_SHIFT)) || wn) p += 2 * H3;
    if (nd->params & NB_NP_RUNNING) p += 4 * H3 * Tmax;
    double b = 4 * TB * H3 + 3 * TB * H + TB * H + BH + 2 * BH;
    if (rowwise || batch) b += 4 * TB * H3;
    if (rowwise) b += 8 * TB;
    if (batch) b += 4 * Tmax * H3;
    if (wn) b += 2 * (H3 * E + H3 * H) + 2 * H3;
    *params += p;
    *bytes += b * sizeof(float);
}

double nb_rnnsearch_mem_bytes(const nb_rnnsearch_cfg *cfg, double *params) {
    const nb_norm_def *nd = nb_norm_get(cfg->norm.kind);
    const int wn = nd->acts == NB_ON_WEIGHTS;
    const double E = cfg->E, H = cfg->H, C = 2 * H, A = 2 * H, Bm = cfg->Bmax, Tx = cfg->Txmax;
    const double Td = cfg->Tymax > cfg->beam_max ? cfg->Tymax : cfg->beam_max;
    const double Vs = cfg->Vs, Vt = cfg->Vt, R = Bm * cfg->beam_max;
    double P = (Vs + Vt) * E + A, bytes = 0;
    gru_bytes(&cfg->norm, E, H, Tx, Bm, &P, &bytes);
    gru_bytes(&cfg->norm, E, H, Tx, Bm, &P, &bytes);
    gru_bytes(&cfg->norm, E, H, Td, Bm, &P, &bytes);
    gru_bytes(&cfg->norm, C, H, Td, Bm, &P, &bytes);
    /* the dense layers (out, in, bias) and their norms */
    const double dense[7][3] = {{H, C, 1}, {A, C, 1}, {A, H, 0}, {E, E, 1},
                                {E, H, 1}, {E, C, 1}, {Vt, E, 1}};
    double wnbuf = 0;
    for (int i = 0; i < 7; i++) {
        P += dense[i][0] * dense[i][1] + dense[i][2] * dense[i][0];
        if (wn && i < 6) {
            P += dense[i][0];
            wnbuf += 2 * dense[i][0] * dense[i][1] + dense[i][0];
        }
        if (i < 6 && nd->ops) /* a norm site: gain, shift, running statistics, scalars */
            P += dense[i][0] *
                     (((nd->params & NB_NP_GAIN) ? 1 : 0) + ((nd->params & NB_NP_SHIFT) ? 1 : 0) +
                      ((nd->params & NB_NP_RUNNING) ? 2 : 0)) +
                 nd->nscalars;
    }
    const double XB = Tx * Bm, DB = Td * Bm, mx = (Bm > C ? Bm : C) + A + E;
    double f = 2 * P;                               /* params, grads */
    f += 2 * XB + DB + XB + DB;                     /* masks, word dropout */
    f += 2 * XB * E + XB * H + XB * C;              /* xs, xsr, hfr, ctx */
    f += Bm * C + 3 * Bm * H + 2 * mx;              /* cm, zi, zin, s0, sti */
    f += 2 * XB * A + 2 * (XB + A);                 /* hcp, hc, sthc */
    f += DB * E + 2 * DB * H + DB * C + 2 * DB * A; /* ye, s1, s, ct, hsp, hs */
    f += 2 * (DB + A) * Td + DB * Tx;               /* sths, al */
    f += 7 * DB * E + 6 * (DB + E) + DB * Vt;       /* pe..pcn, o, stp, probs */
    const double big = DB * (A > E ? A : E);
    f += (big > XB * A ? big : XB * A);                  /* dtmp */
    f += 2 * DB * E + DB * H + DB * C + DB * E;          /* dtmp2, dhid, dS, dct, dye */
    f += XB * C + XB * A + DB * A + 2 * Bm * H;          /* dctx, dhc, dhsp, ds, ds1 */
    f += 2 * XB * E + 2 * XB * H + Bm * (C > A ? C : A); /* dxs, dxsr, dhf, dhb, drow */
    f += Bm * A + Bm * Tx + 2 * Bm * A;                  /* dvgrp, dab, dvacc (double) */
    f += 2 * R * H + R * Vt + wnbuf;                     /* decoding states, logp */
    bytes += f * sizeof(float) + sizeof(int) * (XB + DB + 2 * R);
    if (params) *params = P;
    return bytes;
}
#endif
