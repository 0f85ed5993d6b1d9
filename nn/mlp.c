#include "nn/mem.h"
#include "real.h"
/* nn/mlp.c — dense → norm → activation stacks, one code path for all six norms (generic).
 * Dimension letters: B batch rows, C layer input width, OC layer output width. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_OFF ((size_t)-1)
/* a running-statistics tensor of layer l, or NULL */
#define RUN(m, l, f) ((m)->L[l].f != NO_OFF ? (m)->params + (m)->L[l].f : NULL)

static real *alloc_real(size_t n) {
    return nb_mem_alloc(n * sizeof(real)); /* aligned, zeroed, noted (nn/mem.h) */
}

int nb_mlp_init(nb_mlp *m, int nlayers, const int *dims, const nb_norm_cfg *norm, nb_act_kind act,
                int Bmax, nb_rng *rng, nb_err *err) {
    memset(m, 0, sizeof *m);
    if (nlayers < 1 || nlayers > NB_MLP_MAX_LAYERS)
        return nb_errf(err, "an MLP needs 1 to %d layers, not %d", NB_MLP_MAX_LAYERS, nlayers);
    if (Bmax < 1) return nb_errf(err, "batch size must be at least 1, not %d", Bmax);
    for (int l = 0; l <= nlayers; l++)
        if (dims[l] < 1 || dims[l] > (1 << 20))
            return nb_errf(err, "layer width %d is out of range", dims[l]);
    m->nlayers = nlayers;
    memcpy(m->dims, dims, sizeof(int) * (size_t)(nlayers + 1));
    m->norm = *norm;
    m->act = act;
    m->leaky_alpha = (real)0.01;
    m->Bmax = Bmax;

    int maxd = 0;
    for (int l = 0; l <= nlayers; l++)
        if (dims[l] > maxd) maxd = dims[l];
    for (int l = 0; l < nlayers; l++) {
        int C = dims[l], OC = dims[l + 1], hidden = l < nlayers - 1;
        const nb_norm_def *nd = nb_norm_get(norm->kind);
        if (!nd) return nb_errf(err, "unknown norm %d", (int)norm->kind);
        /* The LN paper: LN (and RMS, pRMS, WN) on the hidden layers only; BN (a norm over the
         * batch) on all layers. */
        nb_norm_kind k = hidden || nd->acts == NB_ON_FEATURES ? norm->kind : nb_norm_none_kind();
        if (k != norm->kind) nd = nb_norm_get(k);
        m->L[l].kind = k;
        m->L[l].def = nd;
        m->L[l].k = nb_prms_k(OC, norm->p, norm->p_floor);
        char name[32];
        snprintf(name, sizeof name, "%s%d", nd->acts == NB_ON_WEIGHTS ? "V" : "W", l);
        m->L[l].w = nb_layout_add(&m->layout, name, (size_t)OC * C, 1);
        snprintf(name, sizeof name, "b%d", l);
        m->L[l].b = nb_layout_add(&m->layout, name, (size_t)OC, 1);
        m->L[l].g = m->L[l].rmean = m->L[l].rvar = m->L[l].alpha = NO_OFF;
        /* every norm but none scales: the gain (the MLP's bias b is its shift) */
        if (nd->acts != NB_ON_NOTHING) {
            snprintf(name, sizeof name, "g%d", l);
            m->L[l].g = nb_layout_add(&m->layout, name, (size_t)OC, 1);
        }
        if (nd->nscalars > 0) {
            snprintf(name, sizeof name, "%s%d", nd->scalar_name, l);
            m->L[l].alpha = nb_layout_add(&m->layout, name, (size_t)nd->nscalars, 1);
            if (m->L[l].alpha == NO_OFF) return nb_errf(err, "too many parameter tensors");
        }
        if (nd->params & NB_NP_RUNNING) {
            snprintf(name, sizeof name, "running_mean%d", l);
            m->L[l].rmean = nb_layout_add(&m->layout, name, (size_t)OC, 0);
            snprintf(name, sizeof name, "running_var%d", l);
            m->L[l].rvar = nb_layout_add(&m->layout, name, (size_t)OC, 0);
        }
        if (m->L[l].w == NO_OFF || m->L[l].b == NO_OFF)
            return nb_errf(err, "too many parameter tensors");
    }
    size_t P = m->layout.total;
    m->params = alloc_real(P);
    m->grads = alloc_real(P);
    m->adam_m = alloc_real(P);
    m->adam_v = alloc_real(P);
    size_t act_n = (size_t)Bmax * maxd;
    m->probs = alloc_real((size_t)Bmax * dims[nlayers]);
    m->dbuf0 = alloc_real(act_n);
    m->dbuf1 = alloc_real(act_n);
    int ok = m->params && m->grads && m->adam_m && m->adam_v && m->probs && m->dbuf0 && m->dbuf1;
    for (int l = 0; l < nlayers && ok; l++) {
        int OC = dims[l + 1];
        m->pre[l] = alloc_real((size_t)Bmax * OC);
        m->out[l] = alloc_real((size_t)Bmax * OC);
        m->mean[l] = alloc_real((size_t)(Bmax > OC ? Bmax : OC));
        m->rstd[l] = alloc_real((size_t)(Bmax > OC ? Bmax : OC));
        ok = m->pre[l] && m->out[l] && m->mean[l] && m->rstd[l];
        if (ok && m->L[l].def->acts == NB_ON_WEIGHTS) {
            m->wn_scale[l] = alloc_real((size_t)OC);
            m->wn_norm[l] = alloc_real((size_t)OC);
            ok = m->wn_scale[l] && m->wn_norm[l];
        }
    }
    if (!ok) {
        nb_mlp_free(m);
        return nb_errf(err, "out of memory for an MLP of %zu parameters", P);
    }

    int relu_like = act == NB_ACT_RELU || act == NB_ACT_LEAKY_RELU;
    for (int l = 0; l < nlayers; l++) {
        int C = dims[l], OC = dims[l + 1];
        real *W = m->params + m->L[l].w;
        if (m->L[l].def->acts == NB_ON_WEIGHTS && norm->wn_data_init) {
            /* WN code: V ~ N(0, 0.05^2); g and b come from nb_mlp_data_init. */
            for (size_t i = 0; i < (size_t)OC * C; i++)
                W[i] = (real)(0.05 * nb_rng_normal(rng));
        } else if (relu_like) {
            double sd = sqrt(2.0 / C); /* He et al. */
            for (size_t i = 0; i < (size_t)OC * C; i++)
                W[i] = (real)(sd * nb_rng_normal(rng));
        } else {
            double a = sqrt(6.0 / (C + OC)); /* Glorot uniform */
            for (size_t i = 0; i < (size_t)OC * C; i++)
                W[i] = (real)(a * (2.0 * nb_rng_uniform(rng) - 1.0));
        }
        if (m->L[l].g != NO_OFF) {
            real *g = m->params + m->L[l].g;
            for (int o = 0; o < OC; o++)
                g[o] = 1;
            if (m->L[l].def->acts == NB_ON_WEIGHTS) {
                /* Without data init, g = ||v|| so that the effective weight starts as v. */
                for (int o = 0; o < OC; o++) {
                    double s = 0;
                    for (int i = 0; i < C; i++)
                        s += (double)W[(size_t)o * C + i] * W[(size_t)o * C + i];
                    g[o] = (real)sqrt(s);
                }
            }
        }
        if (m->L[l].alpha != NO_OFF)
            for (int i = 0; i < m->L[l].def->nscalars; i++)
                m->params[m->L[l].alpha + (size_t)i] = (real)m->L[l].def->scalar_init(norm);
        if (m->L[l].rvar != NO_OFF) {
            real *rv = m->params + m->L[l].rvar;
            for (int o = 0; o < OC; o++)
                rv[o] = 1;
        }
    }
    return 0;
}

void nb_mlp_free(nb_mlp *m) {
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->probs);
    free(m->dbuf0);
    free(m->dbuf1);
    for (int l = 0; l < NB_MLP_MAX_LAYERS; l++) {
        free(m->pre[l]);
        free(m->out[l]);
        free(m->mean[l]);
        free(m->rstd[l]);
        free(m->wn_scale[l]);
        free(m->wn_norm[l]);
    }
    memset(m, 0, sizeof *m);
}

void nb_mlp_zero_grad(nb_mlp *m) {
    memset(m->grads, 0, m->layout.total * sizeof(real));
}

static void activate(nb_mlp *m, real *z, size_t n) {
    switch (m->act) {
    case NB_ACT_RELU:
        nb_relu_forward(z, z, n);
        break;
    case NB_ACT_LEAKY_RELU:
        nb_leaky_relu_forward(z, z, n, m->leaky_alpha);
        break;
    case NB_ACT_TANH:
        nb_tanh_forward(z, z, n);
        break;
    case NB_ACT_SIGMOID:
        nb_sigmoid_forward(z, z, n);
        break;
    case NB_ACT_COUNT:
        break;
    }
}

static void activate_backward(nb_mlp *m, real *dz, const real *dout, const real *out, size_t n) {
    switch (m->act) {
    case NB_ACT_RELU:
        nb_relu_backward(dz, dout, out, n);
        break;
    case NB_ACT_LEAKY_RELU:
        nb_leaky_relu_backward(dz, dout, out, n, m->leaky_alpha);
        break;
    case NB_ACT_TANH:
        nb_tanh_backward(dz, dout, out, n);
        break;
    case NB_ACT_SIGMOID:
        nb_sigmoid_backward(dz, dout, out, n);
        break;
    case NB_ACT_COUNT:
        break;
    }
}

/* WeightNorm, w = g·v/||v|| per output unit, is applied to the layer's OUTPUT rather than to
 * its weight (Salimans & Kingma's own formulation): x·w^T = (x·v^T)·s with s = g/||v|| per unit,
 * so the GEMMs run on v itself and no effective weight matrix is written or read. This sets
 * wn_norm[l] (||v||, floored as nb_weightnorm_forward does) and wn_scale[l] (s). */
static void wn_scale(nb_mlp *m, int l) {
    int C = m->dims[l], OC = m->dims[l + 1];
    const real *V = m->params + m->L[l].w, *g = m->params + m->L[l].g;
    real *nrm = m->wn_norm[l], *s = m->wn_scale[l];
#pragma omp parallel for schedule(static) if ((size_t)OC * C > 65536)
    for (int o = 0; o < OC; o++) {
        const real *vo = V + (size_t)o * C;
        double ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++)
            ss += (double)vo[i] * (double)vo[i];
        double n = sqrt(ss);
        if (!(n > NB_WN_FLOOR)) n = NB_WN_FLOOR;
        nrm[o] = (real)n;
        s[o] = (real)((double)g[o] / n);
    }
}

/* out (B, OC) = pre·s + b, per column. */
static void scale_bias(real *out, const real *pre, const real *s, const real *b, int B, int OC) {
#pragma omp parallel for schedule(static) if ((size_t)B * OC > 65536)
    for (int r = 0; r < B; r++) {
        const real *pr = pre + (size_t)r * OC;
        real *orow = out + (size_t)r * OC;
#pragma omp simd
        for (int o = 0; o < OC; o++)
            orow[o] = pr[o] * s[o] + b[o];
    }
}

/* WeightNorm's backward up to the GEMMs, for the output form: from dz (B, OC), the gradient
 * w.r.t. pre·s + b, accumulates db and dg, writes dpre = dz·s (B, OC), and returns in coef[o]
 * the multiple of v_o that dv_o must lose after the GEMM has added s_o·(dpre-free G_o):
 *   dg_o = sum_r dz_ro pre_ro / n_o,  dv_o = s_o G_o - (g_o dg_o / n_o^2) v_o,
 * where G_o = sum_r dz_ro x_r. Where the norm was floored there is no projection term. */
static void wn_backward_out(real *dpre, real *dg, real *db, real *coef, const real *dz,
                            const real *pre, const real *s, const real *g, const real *nrm, int B,
                            int OC) {
#pragma omp parallel for schedule(static) if ((size_t)B * OC > 65536)
    for (int o = 0; o < OC; o++) {
        double sp = 0, sb = 0;
        for (int r = 0; r < B; r++) {
            double d = dz[(size_t)r * OC + o];
            sp += d * pre[(size_t)r * OC + o];
            sb += d;
            dpre[(size_t)r * OC + o] = dz[(size_t)r * OC + o] * s[o];
        }
        double n = nrm[o], dgo = sp / n;
        dg[o] += (real)dgo;
        db[o] += (real)sb;
        coef[o] = n > (double)(real)NB_WN_FLOOR ? (real)((double)g[o] * dgo / (n * n)) : 0;
    }
}

/* Layer l's forward from inp (B, C) into m->out[l] (B, OC). */
static void layer_forward(nb_mlp *m, int l, const real *inp, int B, int training) {
    int C = m->dims[l], OC = m->dims[l + 1];
    const real *P = m->params;
    const real *W = P + m->L[l].w;
    const real *b = P + m->L[l].b;
    const real *g = m->L[l].g != NO_OFF ? P + m->L[l].g : NULL;
    real *out = m->out[l], *pre = m->pre[l];
    m->inp[l] = (real *)inp;
    const nb_norm_def *nd = m->L[l].def;
    if (nd->acts == NB_ON_NOTHING) {
        nb_dense_forward(out, inp, W, b, B, C, OC);
    } else if (nd->acts == NB_ON_WEIGHTS) {
        wn_scale(m, l);
        nb_dense_forward(pre, inp, W, NULL, B, C, OC);
        scale_bias(out, pre, m->wn_scale[l], b, B, OC);
    } else {
        nb_dense_forward(pre, inp, W, NULL, B, C, OC);
        nd->REAL_OPS->forward(out, m->mean[l], m->rstd[l], RUN(m, l, rmean), RUN(m, l, rvar), pre,
                              g, b, m->L[l].alpha != NO_OFF ? P + m->L[l].alpha : NULL, B, OC,
                              training, &m->norm);
    }
    if (l < m->nlayers - 1) activate(m, out, (size_t)B * OC);
}

double nb_mlp_forward(nb_mlp *m, const real *x, const int *y, int B, int training) {
    const real *inp = x;
    for (int l = 0; l < m->nlayers; l++) {
        layer_forward(m, l, inp, B, training);
        inp = m->out[l];
    }
    m->last_B = B;
    m->last_training = training;
    if (!y) return 0;
    return nb_softmax_xent_forward(m->probs, NULL, m->out[m->nlayers - 1], y, B,
                                   m->dims[m->nlayers]);
}

void nb_mlp_backward(nb_mlp *m, const int *y) {
    int B = m->last_B, L = m->nlayers;
    real *G = m->dbuf0;  /* gradient w.r.t. the current layer's output */
    real *G2 = m->dbuf1; /* gradient w.r.t. its input (the previous layer's output) */
    real *grads = m->grads;
    memset(G, 0, sizeof(real) * (size_t)B * m->dims[L]);
    nb_softmax_xent_backward(G, m->probs, y, B, m->dims[L]);
    if (m->grad_rows > 0 && m->grad_rows != B) { /* a shard of a larger batch: its mean loss */
        const real k = (real)B / (real)m->grad_rows;
        for (size_t i = 0; i < (size_t)B * m->dims[L]; i++)
            G[i] *= k;
    }
    for (int l = L - 1; l >= 0; l--) {
        int C = m->dims[l], OC = m->dims[l + 1];
        size_t n = (size_t)B * OC;
        const real *P = m->params;
        const real *g = m->L[l].g != NO_OFF ? P + m->L[l].g : NULL;
        real *dg = m->L[l].g != NO_OFF ? grads + m->L[l].g : NULL;
        real *db = grads + m->L[l].b;
        /* dz: gradient w.r.t. the norm's output (before the activation). pre's buffer is
         * reused for it when the norm needs pre itself only until its backward has run. */
        real *dz = G;
        if (l < L - 1) {
            dz = G2;
            memset(dz, 0, sizeof(real) * n);
            activate_backward(m, dz, G, m->out[l], n);
        }
        /* dpre: gradient w.r.t. x·W^T. */
        real *dpre = dz;
        const nb_norm_def *nd = m->L[l].def;
        if (nd->acts == NB_ON_WEIGHTS) {
            dpre = (dz == G) ? G2 : G;
            wn_backward_out(dpre, dg, db, m->mean[l], dz, m->pre[l], m->wn_scale[l], g,
                            m->wn_norm[l], B, OC);
        } else if (nd->acts != NB_ON_NOTHING) {
            dpre = (dz == G) ? G2 : G;
            /* dpre is written whole by the set passes (not zeroed, not read) */
            const size_t ao = m->L[l].alpha;
            nd->REAL_OPS->backward(dpre, dg, db, ao != NO_OFF ? grads + ao : NULL, dz, m->pre[l], g,
                                   ao != NO_OFF ? P + ao : NULL, m->mean[l], m->rstd[l], B, OC,
                                   m->last_training, &m->norm, 1);
        }
        /* The layer's input gradient goes into whichever buffer dpre is not. */
        real *dinp = (l > 0) ? (dpre == G ? G2 : G) : NULL;
        if (dinp) memset(dinp, 0, sizeof(real) * (size_t)B * C);
        real *dbias = nd->acts == NB_ON_NOTHING ? db : NULL;
        nb_dense_backward(dinp, grads + m->L[l].w, dbias, dpre, m->inp[l], P + m->L[l].w, B, C, OC);
        if (nd->acts == NB_ON_WEIGHTS) {
            /* dv_o -= coef_o · v_o (coef was left in mean[l] by wn_backward_out) */
            const real *coef = m->mean[l], *V = P + m->L[l].w;
            real *dV = grads + m->L[l].w;
#pragma omp parallel for schedule(static) if ((size_t)OC * C > 65536)
            for (int o = 0; o < OC; o++) {
                const real c = coef[o], *vo = V + (size_t)o * C;
                real *dvo = dV + (size_t)o * C;
#pragma omp simd
                for (int i = 0; i < C; i++)
                    dvo[i] -= c * vo[i];
            }
        }
        if (dinp && dinp != G) {
            real *t = G;
            G = dinp;
            G2 = t;
        }
    }
}

void nb_mlp_data_init(nb_mlp *m, const real *x, int B) {
    if (nb_norm_get(m->norm.kind)->acts != NB_ON_WEIGHTS || !m->norm.wn_data_init) return;
    if (B > m->Bmax) B = m->Bmax;
    const real *inp = x;
    for (int l = 0; l < m->nlayers; l++) {
        int OC = m->dims[l + 1];
        if (m->L[l].def->acts == NB_ON_WEIGHTS) {
            real *g = m->params + m->L[l].g, *b = m->params + m->L[l].b;
            for (int o = 0; o < OC; o++) {
                g[o] = 1;
                b[o] = 0;
            }
            /* Pre-activations with the unit-norm weights V/||V|| (g = 1, b = 0). */
            wn_scale(m, l);
            nb_dense_forward(m->pre[l], inp, m->params + m->L[l].w, NULL, B, m->dims[l], OC);
            scale_bias(m->pre[l], m->pre[l], m->wn_scale[l], b, B, OC);
            for (int o = 0; o < OC; o++) {
                double s = 0, ss = 0;
                for (int i = 0; i < B; i++)
                    s += m->pre[l][(size_t)i * OC + o];
                double mu = s / B;
                for (int i = 0; i < B; i++) {
                    double d = m->pre[l][(size_t)i * OC + o] - mu;
                    ss += d * d;
                }
                double sd = sqrt(ss / B) + 1e-8;
                g[o] = (real)(1.0 / sd);
                b[o] = (real)(-mu / sd);
            }
        }
        layer_forward(m, l, inp, B, 1);
        inp = m->out[l];
    }
}
