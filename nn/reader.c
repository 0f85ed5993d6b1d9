#include "nn/mem.h"
#include "real.h"
/* nn/reader.c — the attentive reader, forward and backward (generic: compiled as float and, with
 * -DNB_F64, as double; see nn/nn.h). Contract and equations in nn/reader.h.
 *
 * Dimension letters: B rows, TD passage steps, TQ question steps, D width, X context width,
 * V vocabulary.
 *
 * Cost. The bilinear term is computed as P_t·v with v = Bm·(q·Bm)^T per row, which is the same
 * number as (P_t·Bm)·(q·Bm) without the (B·TD, X)x(X, X) product. The passage projections of
 * the attention are one GEMM over all B·TD positions; the output layer over the whole
 * vocabulary is one GEMM forward and two backward. Nothing is allocated per step.
 *
 * bn_everywhere follows Cooijmans' code for --bn-everywhere. The repository docs/papers.md names
 * (github.com/cooijmanstim/Attentive_reader, branch bn @ 7c1ea8ad) is NOT FOUND in the code
 * index searched for this work; what follows was read in the fork github.com/ballasn/
 * Attentive_reader, which carries the same bn work (train_bn-everywhere.sh by cooijmat,
 * --bn-everywhere, --popstat-eval):
 *   - codes/att_reader/layers.py @ 043b33c9: `bn(x, gamma=1., beta=0.)` asserts x.ndim == 2 and
 *     normalizes with `x.mean(axis=0)`, `x.var(axis=0)` (biased) and std `sqrt(var + 1e-5)`;
 *     `param_init_bnfflayer` draws W as `param_init_fflayer` does (norm_weight), sets
 *     `gamma = 0.1 * ones(nout)` and `b = zeros(nout)` only `if use_bias`; `bnfflayer` returns
 *     `activ(bn(dot(state_below, W), gamma, b))` with b = 0 when the layer has no bias. No mask.
 *   - codes/att_reader/model.py @ e3782064: `layertype = 'bnff' if options["bn_everywhere"]
 *     else 'ff'` for ff_att_ctx (bias), ff_att_q (no bias), ff_out_mean_d (no bias), ff_out_q
 *     (bias) and ff_out_ctx (no bias), all with activ='Linear'; ff_logit stays 'ff'.
 *     build_attention: `desc_in = desc.reshape((-1, desc.shape[-1]))` then the bnff layer on
 *     desc_in: so ff_att_ctx's statistics run over time x batch together, over the UNMASKED
 *     passage states (padding positions included; `masked_desc` is used only for the bilinear
 *     term and the context sum). The bilinear term is not normalized (the code prints "use_dq_sims
 *     introduces an extra term that we should batch normalize but currently don't").
 *     build_model: `g_out = Tanh(g_ctx + g_q + g_desc_ave)`, each term its own bnff layer.
 *   - codes/att_reader/train_attentive_reader.py @ 043b33c9: --bn-everywhere forces unit_type
 *     bnlstm (`assert args.unit_type in "lstm bnlstm".split()`); hence norm batch only.
 *   - codes/att_reader/attentive_reader.py: f_log_probs, which validates, is compiled from the
 *     same graph, so validation normalizes with the statistics of each validation batch;
 *     population statistics only in the separate --popstat-eval mode (not reproduced).
 * A later commit of that fork (model.py and layers.py @ 0d60508e) renames the layer `normff`,
 * makes it a weight-normalized layer and adds a BN of the embeddings; that is not what the papers'
 * BN-everywhere curves used and is not reproduced. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

#define NONE ((size_t)-1)

static real *zalloc(size_t n, int *fail) {
    nb_mem_note((n ? n : 1) * sizeof(real));
    real *p = calloc(n ? n : 1, sizeof(real));
    if (!p) *fail = 1;
    return p;
}

/* norm_weight(nin, nout, ortho) of the code (AR-repo utils.py) for a (nout, nin) row-major
 * block: 0.05 x orthogonal when square and ortho (ortho_weight), else uniform
 * +-sqrt(6/(nin+nout+1)). */
static void norm_weight(real *w, int nout, int nin, int ortho, nb_rng *rng) {
    if (nout == nin && ortho) {
        /* orthogonal through modified Gram-Schmidt on a Gaussian matrix, in double */
        double *q = malloc((size_t)nin * nin * sizeof(double));
        if (q) {
            for (int i = 0; i < nin; i++) {
                double *v = q + (size_t)i * nin, nn = 0;
                do {
                    for (int j = 0; j < nin; j++)
                        v[j] = nb_rng_normal(rng);
                    for (int p = 0; p < i; p++) {
                        const double *u = q + (size_t)p * nin;
                        double d = 0;
                        for (int j = 0; j < nin; j++)
                            d += u[j] * v[j];
                        for (int j = 0; j < nin; j++)
                            v[j] -= d * u[j];
                    }
                    nn = 0;
                    for (int j = 0; j < nin; j++)
                        nn += v[j] * v[j];
                } while (nn <= 1e-6);
                for (int j = 0; j < nin; j++)
                    w[(size_t)i * nin + j] = (real)(0.05 * v[j] / sqrt(nn));
                for (int j = 0; j < nin; j++)
                    v[j] /= sqrt(nn);
            }
            free(q);
            return;
        }
    }
    const double lim = sqrt(6.0 / (nin + nout + 1));
    for (size_t i = 0; i < (size_t)nout * nin; i++)
        w[i] = (real)((2 * nb_rng_uniform(rng) - 1) * lim);
}

/* norm_vec(d) of the code (AR-repo utils.py): uniform +-sqrt(1/d). */
static void norm_vec(real *w, int d, nb_rng *rng) {
    const double lim = sqrt(1.0 / d);
    for (int i = 0; i < d; i++)
        w[i] = (real)((2 * nb_rng_uniform(rng) - 1) * lim);
}

int nb_reader_init(nb_reader *m, const nb_reader_cfg *cfg, nb_rng *rng, nb_err *err) {
    memset(m, 0, sizeof *m);
    if (cfg->V < 2 || cfg->D < 1 || cfg->Bmax < 1 || cfg->TDmax < 1 || cfg->TQmax < 1 ||
        cfg->V > (1 << 24) || !(cfg->keep > 0 && cfg->keep <= 1)) {
        nb_errf(err, "reader: model sizes out of range (V %d, d %d, B %d, T %d/%d)", cfg->V, cfg->D,
                cfg->Bmax, cfg->TDmax, cfg->TQmax);
        return -1;
    }
    if (cfg->bn_everywhere &&
        (nb_norm_get(cfg->norm.kind)->acts != NB_ON_FEATURES || cfg->Bmax < 2)) {
        nb_errf(err,
                "reader: bn-everywhere needs norm batch and batches of at least 2 (norm %s, "
                "batch %d)",
                nb_norm_name(cfg->norm.kind), cfg->Bmax);
        nb_hintf(err, "use norm batch with a batch of 2 or more, or turn bn-everywhere off");
        return -1;
    }
    m->cfg = *cfg;
    const int V = cfg->V, D = cfg->D, Bm = cfg->Bmax, TD = cfg->TDmax, TQ = cfg->TQmax;
    const int X = cfg->bidir ? 2 * D : D;
    m->X = X;
    nb_layout *l = &m->layout;
    int fail = 0;
    m->emb = nb_layout_add(l, "emb", (size_t)V * D, 1);
    if (nb_lstm_init(&m->ld, D, D, Bm, TD, &cfg->norm, l, "enc_d.", err) != 0) return -1;
    if (nb_lstm_init(&m->lq, D, D, Bm, TQ, &cfg->norm, l, "enc_q.", err) != 0) goto fail;
    if (cfg->bidir) {
        if (nb_lstm_init(&m->ldr, D, D, Bm, TD, &cfg->norm, l, "enc_d_r.", err) != 0) goto fail;
        if (nb_lstm_init(&m->lqr, D, D, Bm, TQ, &cfg->norm, l, "enc_q_r.", err) != 0) goto fail;
    }
    const int bnev = cfg->bn_everywhere;
    for (int k = 0; k < NB_RD_BN_COUNT; k++)
        m->bng[k] = NONE;
    m->bm = nb_layout_add(l, "att_bi", (size_t)X * X, 1);
    m->wac = nb_layout_add(l, "att_ctx.W", (size_t)D * X, 1);
    m->bac = nb_layout_add(l, "att_ctx.b", (size_t)D, 1);
    if (bnev) m->bng[NB_RD_BN_AC] = nb_layout_add(l, "att_ctx.gamma", (size_t)D, 1);
    m->waq = nb_layout_add(l, "att_q.W", (size_t)D * X, 1);
    if (bnev) m->bng[NB_RD_BN_AQ] = nb_layout_add(l, "att_q.gamma", (size_t)D, 1);
    m->watt = nb_layout_add(l, "att_proj.W", (size_t)D, 1);
    m->woc = nb_layout_add(l, "out_ctx.W", (size_t)D * X, 1);
    if (bnev) m->bng[NB_RD_BN_OC] = nb_layout_add(l, "out_ctx.gamma", (size_t)D, 1);
    m->woq = nb_layout_add(l, "out_q.W", (size_t)D * X, 1);
    m->boq = nb_layout_add(l, "out_q.b", (size_t)D, 1);
    if (bnev) m->bng[NB_RD_BN_OQ] = nb_layout_add(l, "out_q.gamma", (size_t)D, 1);
    m->wom = nb_layout_add(l, "out_mean.W", (size_t)D * X, 1);
    if (bnev) m->bng[NB_RD_BN_OM] = nb_layout_add(l, "out_mean.gamma", (size_t)D, 1);
    m->wl = nb_layout_add(l, "logit.W", (size_t)V * D, 1);
    m->bl = nb_layout_add(l, "logit.b", (size_t)V, 1);
    if (m->emb == NONE || m->bl == NONE || (bnev && m->bng[NB_RD_BN_OM] == NONE)) {
        nb_errf(err, "reader: too many parameter tensors");
        goto fail;
    }
    const size_t N = l->total;
    m->params = zalloc(N, &fail);
    m->grads = zalloc(N, &fail);
    m->adam_m = zalloc(N, &fail);
    m->adam_v = zalloc(N, &fail);
    const size_t BD = (size_t)Bm * TD, BQ = (size_t)Bm * TQ;
    m->tokd = calloc(BD, sizeof(int));
    m->tokq = calloc(BQ, sizeof(int));
    m->lend = calloc((size_t)Bm, sizeof(int));
    m->lenq = calloc((size_t)Bm, sizeof(int));
    m->y = calloc((size_t)Bm, sizeof(int));
    if (!m->tokd || !m->tokq || !m->lend || !m->lenq || !m->y) fail = 1;
    m->ed = zalloc(BD * D, &fail);
    m->eq = zalloc(BQ * D, &fail);
    m->kd = zalloc(BD * D, &fail);
    m->kq = zalloc(BQ * D, &fail);
    if (cfg->bidir) {
        m->edr = zalloc(BD * D, &fail);
        m->eqr = zalloc(BQ * D, &fail);
        m->kdr = zalloc(BD * D, &fail);
        m->kqr = zalloc(BQ * D, &fail);
        m->dedr = zalloc(BD * D, &fail);
        m->deqr = zalloc(BQ * D, &fail);
    }
    m->hf = zalloc(BD * D, &fail);
    m->hb = cfg->bidir ? zalloc(BD * D, &fail) : NULL;
    m->P = cfg->bidir ? zalloc(BD * X, &fail) : m->hf;
    m->q = zalloc((size_t)Bm * X, &fail);
    m->u = zalloc((size_t)Bm * X, &fail);
    m->v = zalloc((size_t)Bm * X, &fail);
    m->M = zalloc(BD * D, &fail);
    m->sc = zalloc(BD, &fail);
    m->al = zalloc(BD, &fail);
    m->r = zalloc((size_t)Bm * X, &fail);
    m->pbar = zalloc((size_t)Bm * X, &fail);
    m->gp = zalloc((size_t)Bm * D, &fail);
    m->kg = zalloc((size_t)Bm * D, &fail);
    m->gd = zalloc((size_t)Bm * D, &fail);
    m->probs = zalloc((size_t)Bm * V, &fail);
    m->dlogits = zalloc((size_t)Bm * V, &fail);
    m->dgd = zalloc((size_t)Bm * D, &fail);
    m->dr = zalloc((size_t)Bm * X, &fail);
    m->dpbar = zalloc((size_t)Bm * X, &fail);
    m->dq = zalloc((size_t)Bm * X, &fail);
    m->du = zalloc((size_t)Bm * X, &fail);
    m->dv = zalloc((size_t)Bm * X, &fail);
    m->dqa = zalloc((size_t)Bm * D, &fail);
    m->dM = zalloc(BD * D, &fail);
    m->dP = zalloc(BD * X, &fail);
    m->dhf = zalloc(BD * D, &fail);
    m->dhb = zalloc(BD * D, &fail);
    m->ded = zalloc(BD * D, &fail);
    m->deq = zalloc(BQ * D, &fail);
    m->dfq = zalloc((size_t)Bm * D * 2, &fail);
    if (bnev) {
        m->zac = zalloc(BD * D, &fail);
        m->zo = zalloc((size_t)(NB_RD_BN_COUNT - 1) * Bm * D, &fail);
        m->bnmean = zalloc((size_t)NB_RD_BN_COUNT * D, &fail);
        m->bnrstd = zalloc((size_t)NB_RD_BN_COUNT * D, &fail);
        m->bntmp = zalloc((size_t)Bm * D, &fail);
        m->dzac = zalloc(BD * D, &fail);
        m->dzo = zalloc((size_t)Bm * D, &fail);
    }
    if (fail) {
        nb_errf(err, "reader: out of memory (vocabulary %d, width %d, batch %d, %d steps)", V, D,
                Bm, TD);
        goto fail;
    }
    /* initial values (AR-repo model.py init_params with utils.py's norm_weight and norm_vec;
     * ortho=False where model.py passes it: ff_att_q, ff_out_mean_d, ff_out_q, ff_out_ctx and
     * ff_logit are uniform even when square, as they are in the unidirectional model) */
    real *p = m->params;
    norm_weight(p + m->emb, V, D, 1, rng);
    nb_lstm_init_params(&m->ld, p, rng);
    nb_lstm_init_params(&m->lq, p, rng);
    if (cfg->bidir) {
        nb_lstm_init_params(&m->ldr, p, rng);
        nb_lstm_init_params(&m->lqr, p, rng);
    }
    norm_weight(p + m->bm, X, X, 1, rng);  /* ff_att_bi_dq */
    norm_weight(p + m->wac, D, X, 1, rng); /* ff_att_ctx */
    norm_weight(p + m->waq, D, X, 0, rng); /* ff_att_q */
    norm_vec(p + m->watt, D, rng);         /* ff_att_proj */
    norm_weight(p + m->woc, D, X, 0, rng); /* ff_out_ctx */
    norm_weight(p + m->woq, D, X, 0, rng); /* ff_out_q */
    norm_weight(p + m->wom, D, X, 0, rng); /* ff_out_mean_d */
    norm_weight(p + m->wl, V, D, 0, rng);  /* ff_logit */
    /* bnff gains 0.1 (layers.py param_init_bnfflayer); the betas are the layers' biases, 0 */
    for (int k = 0; k < NB_RD_BN_COUNT; k++)
        if (m->bng[k] != NONE)
            for (int j = 0; j < D; j++)
                p[m->bng[k] + j] = (real)0.1;
    return 0;
fail:
    nb_reader_free(m);
    return -1;
}

void nb_reader_free(nb_reader *m) {
    nb_lstm_free(&m->ld);
    nb_lstm_free(&m->lq);
    nb_lstm_free(&m->ldr);
    nb_lstm_free(&m->lqr);
    if (m->P != m->hf) free(m->P);
    real *bufs[] = {
        m->params, m->grads, m->adam_m, m->adam_v, m->ed,      m->eq,    m->kd,   m->kq,    m->hf,
        m->hb,     m->q,     m->u,      m->v,      m->M,       m->sc,    m->al,   m->r,     m->pbar,
        m->gp,     m->kg,    m->gd,     m->probs,  m->dlogits, m->dgd,   m->dr,   m->dpbar, m->dq,
        m->du,     m->dv,    m->dqa,    m->dM,     m->dP,      m->dhf,   m->dhb,  m->ded,   m->deq,
        m->dfq,    m->zac,   m->zo,     m->bnmean, m->bnrstd,  m->bntmp, m->dzac, m->dzo,   m->edr,
        m->eqr,    m->kdr,   m->kqr,    m->dedr,   m->deqr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(m->tokd);
    free(m->tokq);
    free(m->lend);
    free(m->lenq);
    free(m->y);
    memset(m, 0, sizeof *m);
}

/* bn_everywhere: the buffer of layer k's linear output (before its BN). */
static real *bn_z(const nb_reader *m, int k) {
    return k == NB_RD_BN_AC ? m->zac : m->zo + (size_t)(k - 1) * m->cfg.Bmax * m->cfg.D;
}

/* One bnff layer over n rows (layers.py bnfflayer, activ Linear): z = x·W^T (n,D) from x (n,X)
 * and W at offset w, then out = BN(z; gain k, beta) (n,D) with the statistics of these n rows
 * (beta may be NULL: the layer has no bias). */
static void bnff_forward(nb_reader *m, real *out, int k, const real *x, size_t w, const real *beta,
                         int n) {
    const int D = m->cfg.D, X = m->X;
    const real *p = m->params;
    real *z = bn_z(m, k);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, X, 1, x, X, p + w, X, 0, z, D);
    nb_batchnorm_forward(out, m->bnmean + (size_t)k * D, m->bnrstd + (size_t)k * D, NULL, NULL, z,
                         p + m->bng[k], beta, n, D, 1, &m->cfg.norm);
}

/* Backward of bnff_forward from dout (n,D): accumulates the gain's gradient, beta's when dbeta
 * is not NULL, and W's; dx (n,X) becomes dx_beta·dx + the gradient of x (dx_beta 0 or 1). The
 * batch statistics depend on every row, so the full BN gradient is used, as in training. */
static void bnff_backward(nb_reader *m, real *dx, real dx_beta, int k, const real *dout,
                          const real *x, size_t w, real *dbeta, int n) {
    const int D = m->cfg.D, X = m->X;
    const real *p = m->params;
    real *g = m->grads, *dz = k == NB_RD_BN_AC ? m->dzac : m->dzo;
    memset(dz, 0, sizeof(real) * (size_t)n * D);
    nb_batchnorm_backward(dz, g + m->bng[k], dbeta, dout, bn_z(m, k), p + m->bng[k],
                          m->bnmean + (size_t)k * D, m->bnrstd + (size_t)k * D, n, D, 1,
                          &m->cfg.norm);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, D, X, n, 1, dz, D, x, X, 1, g + w, X);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, X, D, 1, dz, D, p + w, X, dx_beta, dx,
               X);
}

/* Embedding rows of tok (B rows of T positions) times dropout keep masks into e; k receives the
 * masks (1/keep or 0), all 1 when not training. Row b's masks come from its own stream, keyed
 * by base and its index row0 + b in the whole batch, drawn position by position. */
static void embed(real *e, real *k, const real *emb, const int *tok, int B, int T, int D,
                  int training, double keep, uint64_t base, int row0) {
    const real scale = (real)(1.0 / keep);
    for (int b = 0; b < B; b++) {
        nb_rng s;
        if (training && keep < 1) nb_rng_seed(&s, base, (uint64_t)row0 + (uint64_t)b + 1);
        for (int t = 0; t < T; t++) {
            const size_t i = (size_t)b * T + t;
            real *ki = k + i * D;
            if (training && keep < 1)
                for (int j = 0; j < D; j++)
                    ki[j] = nb_rng_uniform(&s) < keep ? scale : 0;
            else
                for (int j = 0; j < D; j++)
                    ki[j] = 1;
            const real *row = emb + (size_t)tok[i] * D;
            real *ei = e + i * D;
#pragma omp simd
            for (int j = 0; j < D; j++)
                ei[j] = row[j] * ki[j];
        }
    }
}

/* demb[tok[i]] += de_i * k_i over n positions (the backward of embed). */
static void scatter(real *demb, const int *tok, const real *de, const real *k, size_t n, int D) {
    for (size_t i = 0; i < n; i++) {
        real *row = demb + (size_t)tok[i] * D;
        const real *d = de + i * D, *ki = k + i * D;
        for (int j = 0; j < D; j++)
            row[j] += d[j] * ki[j];
    }
}

double nb_reader_forward(nb_reader *m, const int *tokd, const int *lend, int TD, const int *tokq,
                         const int *lenq, int TQ, const int *y, int B, int training,
                         nb_rng *noise) {
    const int D = m->cfg.D, X = m->X, V = m->cfg.V;
    const real *p = m->params;
    m->B = B;
    m->TD = TD;
    m->TQ = TQ;
    m->training = training;
    memcpy(m->tokd, tokd, sizeof(int) * B * TD);
    memcpy(m->tokq, tokq, sizeof(int) * B * TQ);
    for (int b = 0; b < B; b++) {
        m->lend[b] = lend[b] < 1 ? 1 : lend[b] > TD ? TD : lend[b];
        m->lenq[b] = lenq[b] < 1 ? 1 : lenq[b] > TQ ? TQ : lenq[b];
        m->y[b] = y ? y[b] : 0;
    }
    const size_t BD = (size_t)B * TD;
    /* dropout: every row's masks from streams keyed by these draws and the row (nn/reader.h) */
    const int drop = training && noise && m->cfg.keep < 1;
    uint64_t base[5] = {0, 0, 0, 0, 0};
    if (drop)
        for (int i = 0; i < 5; i++)
            base[i] = nb_rng_u64(noise);
    embed(m->ed, m->kd, p + m->emb, tokd, B, TD, D, drop, m->cfg.keep, base[0], m->row0);
    embed(m->eq, m->kq, p + m->emb, tokq, B, TQ, D, drop, m->cfg.keep, base[1], m->row0);
    if (m->cfg.bidir) {
        embed(m->edr, m->kdr, p + m->emb, tokd, B, TD, D, drop, m->cfg.keep, base[2], m->row0);
        embed(m->eqr, m->kqr, p + m->emb, tokq, B, TQ, D, drop, m->cfg.keep, base[3], m->row0);
    }

    /* encoders */
    nb_lstm_forward(&m->ld, m->hf, m->ed, m->lend, B, TD, 0, p);
    nb_lstm_forward(&m->lq, NULL, m->eq, m->lenq, B, TQ, 0, p);
    if (m->cfg.bidir) {
        nb_lstm_forward(&m->ldr, m->hb, m->edr, m->lend, B, TD, 1, p);
        nb_lstm_forward(&m->lqr, NULL, m->eqr, m->lenq, B, TQ, 1, p);
        for (size_t i = 0; i < BD; i++) {
            memcpy(m->P + i * X, m->hf + i * D, sizeof(real) * D);
            memcpy(m->P + i * X + D, m->hb + i * D, sizeof(real) * D);
        }
        const real *f1 = nb_lstm_final(&m->lq), *f2 = nb_lstm_final(&m->lqr);
        for (int b = 0; b < B; b++) {
            memcpy(m->q + (size_t)b * X, f1 + (size_t)b * D, sizeof(real) * D);
            memcpy(m->q + (size_t)b * X + D, f2 + (size_t)b * D, sizeof(real) * D);
        }
    } else {
        memcpy(m->q, nb_lstm_final(&m->lq), sizeof(real) * B * D);
    }
    const real *P = m->P;

    /* attention: u = q·Bm, v = u·Bm^T, so that sim_t = P_t·v = (P_t·Bm)·(q·Bm) */
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, X, X, 1, m->q, X, p + m->bm, X, 0,
               m->u, X);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, X, X, 1, m->u, X, p + m->bm, X, 0, m->v,
               X);
    if (m->cfg.bn_everywhere) {
        /* dqa holds BN_aq(q·Waq^T); M BN_ac(P·Wac^T) + bac, statistics over all B·TD rows */
        bnff_forward(m, m->dqa, NB_RD_BN_AQ, m->q, m->waq, NULL, B);
        bnff_forward(m, m->M, NB_RD_BN_AC, P, m->wac, p + m->bac, (int)BD);
    } else {
        /* dqa holds q·Waq^T + bac here (it is overwritten in backward) */
        for (int b = 0; b < B; b++)
            memcpy(m->dqa + (size_t)b * D, p + m->bac, sizeof(real) * D);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, D, X, 1, m->q, X, p + m->waq, X, 1,
                   m->dqa, D);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)BD, D, X, 1, P, X, p + m->wac, X,
                   0, m->M, D);
    }
    const real *watt = p + m->watt;
#pragma omp parallel for schedule(static) if (BD * D >= 65536)
    for (int b = 0; b < B; b++) {
        const int n = m->lend[b];
        const real *vb = m->v + (size_t)b * X, *qa = m->dqa + (size_t)b * D;
        real *sc = m->sc + (size_t)b * TD, *al = m->al + (size_t)b * TD;
        real mx = -INFINITY;
        for (int t = 0; t < TD; t++) {
            const real *Pt = P + ((size_t)b * TD + t) * X;
            real sim = 0;
#pragma omp simd reduction(+ : sim)
            for (int j = 0; j < X; j++)
                sim += Pt[j] * vb[j];
            real *Mt = m->M + ((size_t)b * TD + t) * D;
#pragma omp simd
            for (int j = 0; j < D; j++)
                Mt[j] = vm_tanh(Mt[j] + qa[j] + sim);
            real s = 0;
#pragma omp simd reduction(+ : s)
            for (int j = 0; j < D; j++)
                s += watt[j] * Mt[j];
            sc[t] = s;
            if (t < n && s > mx) mx = s;
        }
        double z = 0;
        for (int t = 0; t < TD; t++) {
            al[t] = t < n ? REAL_EXP(sc[t] - mx) : 0;
            z += al[t];
        }
        for (int t = 0; t < TD; t++)
            al[t] = (real)(al[t] / z);
        real *rb = m->r + (size_t)b * X, *pb = m->pbar + (size_t)b * X;
        memset(rb, 0, sizeof(real) * X);
        memset(pb, 0, sizeof(real) * X);
        for (int t = 0; t < n; t++) {
            const real *Pt = P + ((size_t)b * TD + t) * X;
            const real a = al[t];
#pragma omp simd
            for (int j = 0; j < X; j++) {
                rb[j] += a * Pt[j];
                pb[j] += Pt[j];
            }
        }
        for (int j = 0; j < X; j++)
            pb[j] /= (real)n;
    }
    /* output: g = tanh(r·Woc^T + q·Woq^T + boq + pbar·Wom^T), dropout, logits over V */
    if (m->cfg.bn_everywhere) {
        bnff_forward(m, m->gp, NB_RD_BN_OC, m->r, m->woc, NULL, B);
        bnff_forward(m, m->bntmp, NB_RD_BN_OQ, m->q, m->woq, p + m->boq, B);
        for (size_t i = 0; i < (size_t)B * D; i++)
            m->gp[i] += m->bntmp[i];
        bnff_forward(m, m->bntmp, NB_RD_BN_OM, m->pbar, m->wom, NULL, B);
        for (size_t i = 0; i < (size_t)B * D; i++)
            m->gp[i] += m->bntmp[i];
    } else {
        for (int b = 0; b < B; b++)
            memcpy(m->gp + (size_t)b * D, p + m->boq, sizeof(real) * D);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, D, X, 1, m->r, X, p + m->woc, X, 1,
                   m->gp, D);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, D, X, 1, m->q, X, p + m->woq, X, 1,
                   m->gp, D);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, D, X, 1, m->pbar, X, p + m->wom, X,
                   1, m->gp, D);
    }
    const real scale = (real)(1.0 / m->cfg.keep);
    for (int b = 0; b < B; b++) {
        nb_rng s;
        if (drop) nb_rng_seed(&s, base[4], (uint64_t)m->row0 + (uint64_t)b + 1);
        for (size_t i = (size_t)b * D; i < (size_t)(b + 1) * D; i++) {
            m->gp[i] = REAL_TANH(m->gp[i]);
            m->kg[i] = drop ? (nb_rng_uniform(&s) < m->cfg.keep ? scale : 0) : 1;
            m->gd[i] = m->gp[i] * m->kg[i];
        }
    }
    for (int b = 0; b < B; b++)
        memcpy(m->dlogits + (size_t)b * V, p + m->bl, sizeof(real) * V);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, V, D, 1, m->gd, D, p + m->wl, D, 1,
               m->dlogits, V);
    double loss = nb_softmax_xent_forward(m->probs, NULL, m->dlogits, m->y, B, V);
    long wrong = 0;
    for (int b = 0; b < B; b++) {
        const real *pr = m->probs + (size_t)b * V;
        int best = 0;
        for (int j = 1; j < V; j++)
            if (pr[j] > pr[best]) best = j;
        wrong += best != m->y[b];
    }
    m->nwrong = wrong;
    return y ? loss : 0;
}

void nb_reader_backward(nb_reader *m) {
    const int B = m->B, TD = m->TD, TQ = m->TQ, D = m->cfg.D, X = m->X, V = m->cfg.V;
    const real *p = m->params;
    real *g = m->grads;
    const size_t BD = (size_t)B * TD;
    const real *P = m->P;

    /* logits */
    memset(m->dlogits, 0, sizeof(real) * B * V);
    /* a shard of a larger batch: (p - onehot)/grad_rows, as the whole batch's rows get it */
    nb_softmax_xent_backward_over(m->dlogits, m->probs, m->y, B, V,
                                  m->grad_rows > 0 ? m->grad_rows : B);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, V, D, B, 1, m->dlogits, V, m->gd, D, 1,
               g + m->wl, D);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < V; j++)
            g[m->bl + j] += m->dlogits[(size_t)b * V + j];
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, D, V, 1, m->dlogits, V, p + m->wl, D,
               0, m->dgd, D);
    /* g = tanh(...) with dropout: dgd becomes the gradient of the pre-activation */
    for (size_t i = 0; i < (size_t)B * D; i++)
        m->dgd[i] *= m->kg[i] * (1 - m->gp[i] * m->gp[i]);
    if (m->cfg.bn_everywhere) {
        bnff_backward(m, m->dr, 0, NB_RD_BN_OC, m->dgd, m->r, m->woc, NULL, B);
        bnff_backward(m, m->dq, 0, NB_RD_BN_OQ, m->dgd, m->q, m->woq, g + m->boq, B);
        bnff_backward(m, m->dpbar, 0, NB_RD_BN_OM, m->dgd, m->pbar, m->wom, NULL, B);
    } else {
        for (int b = 0; b < B; b++)
            for (int j = 0; j < D; j++)
                g[m->boq + j] += m->dgd[(size_t)b * D + j];
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, D, X, B, 1, m->dgd, D, m->r, X, 1,
                   g + m->woc, X);
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, D, X, B, 1, m->dgd, D, m->q, X, 1,
                   g + m->woq, X);
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, D, X, B, 1, m->dgd, D, m->pbar, X, 1,
                   g + m->wom, X);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, X, D, 1, m->dgd, D, p + m->woc, X,
                   0, m->dr, X);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, X, D, 1, m->dgd, D, p + m->woq, X,
                   0, m->dq, X);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, X, D, 1, m->dgd, D, p + m->wom, X,
                   0, m->dpbar, X);
    }

    /* attention: through r, the mean, the softmax, tanh and the bilinear term */
    const real *watt = p + m->watt;
    memset(m->dqa, 0, sizeof(real) * B * D);
    memset(m->dv, 0, sizeof(real) * B * X);
#pragma omp parallel for schedule(static) if (BD * D >= 65536)
    for (int b = 0; b < B; b++) {
        const int n = m->lend[b];
        const real *al = m->al + (size_t)b * TD, *drb = m->dr + (size_t)b * X;
        const real *dpb = m->dpbar + (size_t)b * X, *vb = m->v + (size_t)b * X;
        real *dvb = m->dv + (size_t)b * X, *dqa = m->dqa + (size_t)b * D;
        /* dalpha_t = dr·P_t; dscore = al*(dalpha - sum al*dalpha) */
        double sdot = 0;
        real *dsc = m->sc + (size_t)b * TD; /* the scores are not needed any more */
        for (int t = 0; t < TD; t++) {
            const real *Pt = P + ((size_t)b * TD + t) * X;
            real d = 0;
#pragma omp simd reduction(+ : d)
            for (int j = 0; j < X; j++)
                d += drb[j] * Pt[j];
            dsc[t] = t < n ? d : 0;
            sdot += (double)al[t] * dsc[t];
        }
        for (int t = 0; t < TD; t++) {
            const real ds = t < n ? al[t] * (dsc[t] - (real)sdot) : 0;
            const real *Mt = m->M + ((size_t)b * TD + t) * D;
            real *dMt = m->dM + ((size_t)b * TD + t) * D;
            real dsim = 0;
            for (int j = 0; j < D; j++) {
                dMt[j] = ds * watt[j] * (1 - Mt[j] * Mt[j]);
                dsim += dMt[j];
                dqa[j] += dMt[j];
            }
            dsc[t] = ds; /* kept for watt's gradient */
            const real *Pt = P + ((size_t)b * TD + t) * X;
            real *dPt = m->dP + ((size_t)b * TD + t) * X;
            const real w = t < n ? (real)1 / (real)n : 0;
#pragma omp simd
            for (int j = 0; j < X; j++) {
                dPt[j] = al[t] * drb[j] + w * dpb[j] + dsim * vb[j];
                dvb[j] += dsim * Pt[j];
            }
        }
    }
    for (size_t i = 0; i < BD; i++) {
        const real ds = m->sc[i], *Mi = m->M + i * D;
        for (int j = 0; j < D; j++)
            g[m->watt + j] += ds * Mi[j];
    }
    if (m->cfg.bn_everywhere) {
        /* dM and dqa are the gradients of the two BN outputs; padding rows of dM are 0 but
         * still take a gradient through the statistics they entered */
        bnff_backward(m, m->dP, 1, NB_RD_BN_AC, m->dM, P, m->wac, g + m->bac, (int)BD);
        bnff_backward(m, m->dq, 1, NB_RD_BN_AQ, m->dqa, m->q, m->waq, NULL, B);
    } else {
        for (int b = 0; b < B; b++)
            for (int j = 0; j < D; j++)
                g[m->bac + j] += m->dqa[(size_t)b * D + j];
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, D, X, (int)BD, 1, m->dM, D, P, X, 1,
                   g + m->wac, X);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)BD, X, D, 1, m->dM, D,
                   p + m->wac, X, 1, m->dP, X);
        CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, D, X, B, 1, m->dqa, D, m->q, X, 1,
                   g + m->waq, X);
        CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, X, D, 1, m->dqa, D, p + m->waq, X,
                   1, m->dq, X);
    }
    /* v = u·Bm^T: du = dv·Bm, dBm += dv^T·u;  u = q·Bm: dq += du·Bm^T, dBm += q^T·du */
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, X, X, 1, m->dv, X, p + m->bm, X, 0,
               m->du, X);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, X, X, B, 1, m->dv, X, m->u, X, 1, g + m->bm,
               X);
    CBLAS_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, X, X, B, 1, m->q, X, m->du, X, 1, g + m->bm,
               X);
    CBLAS_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, X, X, 1, m->du, X, p + m->bm, X, 1,
               m->dq, X);

    /* encoders */
    memset(m->ded, 0, sizeof(real) * BD * D);
    memset(m->deq, 0, sizeof(real) * B * TQ * D);
    if (m->cfg.bidir) {
        for (size_t i = 0; i < BD; i++) {
            memcpy(m->dhf + i * D, m->dP + i * X, sizeof(real) * D);
            memcpy(m->dhb + i * D, m->dP + i * X + D, sizeof(real) * D);
        }
        real *f1 = m->dfq, *f2 = m->dfq + (size_t)B * D;
        for (int b = 0; b < B; b++) {
            memcpy(f1 + (size_t)b * D, m->dq + (size_t)b * X, sizeof(real) * D);
            memcpy(f2 + (size_t)b * D, m->dq + (size_t)b * X + D, sizeof(real) * D);
        }
        memset(m->dedr, 0, sizeof(real) * BD * D);
        memset(m->deqr, 0, sizeof(real) * B * TQ * D);
        nb_lstm_backward(&m->ld, m->ded, g, m->dhf, NULL, p);
        nb_lstm_backward(&m->ldr, m->dedr, g, m->dhb, NULL, p);
        nb_lstm_backward(&m->lq, m->deq, g, NULL, f1, p);
        nb_lstm_backward(&m->lqr, m->deqr, g, NULL, f2, p);
    } else {
        nb_lstm_backward(&m->ld, m->ded, g, m->dP, NULL, p);
        nb_lstm_backward(&m->lq, m->deq, g, NULL, m->dq, p);
    }
    /* embeddings (dropout masks, then scatter-add into the shared table) */
    real *demb = g + m->emb;
    scatter(demb, m->tokd, m->ded, m->kd, BD, D);
    scatter(demb, m->tokq, m->deq, m->kq, (size_t)B * TQ, D);
    if (m->cfg.bidir) {
        scatter(demb, m->tokd, m->dedr, m->kdr, BD, D);
        scatter(demb, m->tokq, m->deqr, m->kqr, (size_t)B * TQ, D);
    }
}
