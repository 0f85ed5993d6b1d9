#include "real.h"
/* nn/mlp.c — dense → norm → activation stacks, one code path for all six norms (generic).
 * Dimension letters: B batch rows, C layer input width, OC layer output width. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_OFF ((size_t)-1)

static real *alloc_real(size_t n) {
    /* 64-byte aligned for the vector loops; zeroed. */
    size_t bytes = ((n * sizeof(real)) + 63) & ~(size_t)63;
    real *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes);
    return p;
}

static int uses_gain(nb_norm_kind k) {
    return k != NB_NORM_NONE;
}

int FN(nb_mlp_init)(FN(nb_mlp) * m, int nlayers, const int *dims, const nb_norm_cfg *norm,
                    nb_act_kind act, int Bmax, nb_rng *rng, nb_err *err) {
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
        nb_norm_kind k = norm->kind;
        /* The LN paper: LN (and RMS, pRMS, WN) on the hidden layers only; BN on all layers. */
        if (!hidden && k != NB_NORM_BATCH) k = NB_NORM_NONE;
        m->L[l].kind = k;
        m->L[l].k = nb_prms_k(OC, norm->p, norm->p_floor);
        char name[32];
        snprintf(name, sizeof name, "%s%d", k == NB_NORM_WEIGHT ? "V" : "W", l);
        m->L[l].w = nb_layout_add(&m->layout, name, (size_t)OC * C, 1);
        snprintf(name, sizeof name, "b%d", l);
        m->L[l].b = nb_layout_add(&m->layout, name, (size_t)OC, 1);
        m->L[l].g = m->L[l].rmean = m->L[l].rvar = NO_OFF;
        if (uses_gain(k)) {
            snprintf(name, sizeof name, "g%d", l);
            m->L[l].g = nb_layout_add(&m->layout, name, (size_t)OC, 1);
        }
        if (k == NB_NORM_BATCH) {
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
    /* dwn holds WeightNorm's dW: the largest weight. */
    size_t maxw = 0;
    for (int l = 0; l < nlayers; l++)
        if ((size_t)dims[l] * dims[l + 1] > maxw) maxw = (size_t)dims[l] * dims[l + 1];
    m->dwn = alloc_real(maxw);
    int ok = m->params && m->grads && m->adam_m && m->adam_v && m->probs && m->dbuf0 && m->dbuf1 &&
             m->dwn;
    for (int l = 0; l < nlayers && ok; l++) {
        int C = dims[l], OC = dims[l + 1];
        m->pre[l] = alloc_real((size_t)Bmax * OC);
        m->out[l] = alloc_real((size_t)Bmax * OC);
        m->mean[l] = alloc_real((size_t)(Bmax > OC ? Bmax : OC));
        m->rstd[l] = alloc_real((size_t)(Bmax > OC ? Bmax : OC));
        ok = m->pre[l] && m->out[l] && m->mean[l] && m->rstd[l];
        if (ok && m->L[l].kind == NB_NORM_WEIGHT) {
            m->wn_w[l] = alloc_real((size_t)OC * C);
            m->wn_norm[l] = alloc_real((size_t)OC);
            ok = m->wn_w[l] && m->wn_norm[l];
        }
    }
    if (!ok) {
        FN(nb_mlp_free)(m);
        return nb_errf(err, "out of memory for an MLP of %zu parameters", P);
    }

    int relu_like = act == NB_ACT_RELU || act == NB_ACT_LEAKY_RELU;
    for (int l = 0; l < nlayers; l++) {
        int C = dims[l], OC = dims[l + 1];
        real *W = m->params + m->L[l].w;
        if (m->L[l].kind == NB_NORM_WEIGHT && norm->wn_data_init) {
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
            if (m->L[l].kind == NB_NORM_WEIGHT) {
                /* Without data init, g = ||v|| so that the effective weight starts as v. */
                for (int o = 0; o < OC; o++) {
                    double s = 0;
                    for (int i = 0; i < C; i++)
                        s += (double)W[(size_t)o * C + i] * W[(size_t)o * C + i];
                    g[o] = (real)sqrt(s);
                }
            }
        }
        if (m->L[l].rvar != NO_OFF) {
            real *rv = m->params + m->L[l].rvar;
            for (int o = 0; o < OC; o++)
                rv[o] = 1;
        }
    }
    return 0;
}

void FN(nb_mlp_free)(FN(nb_mlp) * m) {
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->probs);
    free(m->dbuf0);
    free(m->dbuf1);
    free(m->dwn);
    for (int l = 0; l < NB_MLP_MAX_LAYERS; l++) {
        free(m->pre[l]);
        free(m->out[l]);
        free(m->mean[l]);
        free(m->rstd[l]);
        free(m->wn_w[l]);
        free(m->wn_norm[l]);
    }
    memset(m, 0, sizeof *m);
}

void FN(nb_mlp_zero_grad)(FN(nb_mlp) * m) {
    memset(m->grads, 0, m->layout.total * sizeof(real));
}

static void activate(FN(nb_mlp) * m, real *z, size_t n) {
    switch (m->act) {
    case NB_ACT_RELU:
        FN(nb_relu_forward)(z, z, n);
        break;
    case NB_ACT_LEAKY_RELU:
        FN(nb_leaky_relu_forward)(z, z, n, m->leaky_alpha);
        break;
    case NB_ACT_TANH:
        FN(nb_tanh_forward)(z, z, n);
        break;
    case NB_ACT_SIGMOID:
        FN(nb_sigmoid_forward)(z, z, n);
        break;
    case NB_ACT_COUNT:
        break;
    }
}

static void activate_backward(FN(nb_mlp) * m, real *dz, const real *dout, const real *out,
                              size_t n) {
    switch (m->act) {
    case NB_ACT_RELU:
        FN(nb_relu_backward)(dz, dout, out, n);
        break;
    case NB_ACT_LEAKY_RELU:
        FN(nb_leaky_relu_backward)(dz, dout, out, n, m->leaky_alpha);
        break;
    case NB_ACT_TANH:
        FN(nb_tanh_backward)(dz, dout, out, n);
        break;
    case NB_ACT_SIGMOID:
        FN(nb_sigmoid_backward)(dz, dout, out, n);
        break;
    case NB_ACT_COUNT:
        break;
    }
}

/* The weight layer l multiplies by: W itself, or WeightNorm's g·V/||V|| (recomputed here). */
static const real *effective_weight(FN(nb_mlp) * m, int l) {
    const real *W = m->params + m->L[l].w;
    if (m->L[l].kind != NB_NORM_WEIGHT) return W;
    FN(nb_weightnorm_forward)
    (m->wn_w[l], m->wn_norm[l], W, m->params + m->L[l].g, m->dims[l + 1], m->dims[l]);
    return m->wn_w[l];
}

/* Layer l's forward from inp (B, C) into m->out[l] (B, OC). */
static void layer_forward(FN(nb_mlp) * m, int l, const real *inp, int B, int training) {
    int C = m->dims[l], OC = m->dims[l + 1];
    const real *P = m->params;
    const real *W = effective_weight(m, l);
    const real *b = P + m->L[l].b;
    const real *g = m->L[l].g != NO_OFF ? P + m->L[l].g : NULL;
    real *out = m->out[l], *pre = m->pre[l];
    m->inp[l] = (real *)inp;
    switch (m->L[l].kind) {
    case NB_NORM_NONE:
    case NB_NORM_WEIGHT:
        FN(nb_dense_forward)(out, inp, W, b, B, C, OC);
        break;
    case NB_NORM_LAYER:
        FN(nb_dense_forward)(pre, inp, W, NULL, B, C, OC);
        FN(nb_layernorm_forward)(out, m->mean[l], m->rstd[l], pre, g, b, B, OC, &m->norm);
        break;
    case NB_NORM_RMS:
        FN(nb_dense_forward)(pre, inp, W, NULL, B, C, OC);
        FN(nb_rmsnorm_forward)(out, m->rstd[l], pre, g, b, B, OC, OC, &m->norm);
        break;
    case NB_NORM_PRMS:
        FN(nb_dense_forward)(pre, inp, W, NULL, B, C, OC);
        FN(nb_rmsnorm_forward)(out, m->rstd[l], pre, g, b, B, OC, m->L[l].k, &m->norm);
        break;
    case NB_NORM_BATCH:
        FN(nb_dense_forward)(pre, inp, W, NULL, B, C, OC);
        FN(nb_batchnorm_forward)
        (out, m->mean[l], m->rstd[l], m->params + m->L[l].rmean, m->params + m->L[l].rvar, pre, g,
         b, B, OC, training, &m->norm);
        break;
    case NB_NORM_COUNT:
        break;
    }
    if (l < m->nlayers - 1) activate(m, out, (size_t)B * OC);
}

double FN(nb_mlp_forward)(FN(nb_mlp) * m, const real *x, const int *y, int B, int training) {
    const real *inp = x;
    for (int l = 0; l < m->nlayers; l++) {
        layer_forward(m, l, inp, B, training);
        inp = m->out[l];
    }
    m->last_B = B;
    m->last_training = training;
    if (!y) return 0;
    return FN(nb_softmax_xent_forward)(m->probs, NULL, m->out[m->nlayers - 1], y, B,
                                       m->dims[m->nlayers]);
}

void FN(nb_mlp_backward)(FN(nb_mlp) * m, const int *y) {
    int B = m->last_B, L = m->nlayers;
    real *G = m->dbuf0;  /* gradient w.r.t. the current layer's output */
    real *G2 = m->dbuf1; /* gradient w.r.t. its input (the previous layer's output) */
    real *grads = m->grads;
    memset(G, 0, sizeof(real) * (size_t)B * m->dims[L]);
    FN(nb_softmax_xent_backward)(G, m->probs, y, B, m->dims[L]);
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
        if (m->L[l].kind == NB_NORM_LAYER || m->L[l].kind == NB_NORM_RMS ||
            m->L[l].kind == NB_NORM_PRMS || m->L[l].kind == NB_NORM_BATCH) {
            dpre = (dz == G) ? G2 : G;
            memset(dpre, 0, sizeof(real) * n);
            switch (m->L[l].kind) {
            case NB_NORM_LAYER:
                FN(nb_layernorm_backward)
                (dpre, dg, db, dz, m->pre[l], g, m->mean[l], m->rstd[l], B, OC, &m->norm);
                break;
            case NB_NORM_RMS:
            case NB_NORM_PRMS:
                FN(nb_rmsnorm_backward)
                (dpre, dg, db, dz, m->pre[l], g, m->rstd[l], B, OC,
                 m->L[l].kind == NB_NORM_RMS ? OC : m->L[l].k, &m->norm);
                break;
            default:
                FN(nb_batchnorm_backward)
                (dpre, dg, db, dz, m->pre[l], g, m->mean[l], m->rstd[l], B, OC, m->last_training,
                 &m->norm);
                break;
            }
        }
        /* The layer's input gradient goes into whichever buffer dpre is not. */
        real *dinp = (l > 0) ? (dpre == G ? G2 : G) : NULL;
        if (dinp) memset(dinp, 0, sizeof(real) * (size_t)B * C);
        real *dbias = (m->L[l].kind == NB_NORM_NONE || m->L[l].kind == NB_NORM_WEIGHT) ? db : NULL;
        if (m->L[l].kind == NB_NORM_WEIGHT) {
            memset(m->dwn, 0, sizeof(real) * (size_t)OC * C);
            FN(nb_dense_backward)(dinp, m->dwn, dbias, dpre, m->inp[l], m->wn_w[l], B, C, OC);
            FN(nb_weightnorm_backward)
            (grads + m->L[l].w, dg, m->dwn, P + m->L[l].w, g, m->wn_norm[l], OC, C);
        } else {
            FN(nb_dense_backward)
            (dinp, grads + m->L[l].w, dbias, dpre, m->inp[l], P + m->L[l].w, B, C, OC);
        }
        if (dinp && dinp != G) {
            real *t = G;
            G = dinp;
            G2 = t;
        }
    }
}

void FN(nb_mlp_data_init)(FN(nb_mlp) * m, const real *x, int B) {
    if (m->norm.kind != NB_NORM_WEIGHT || !m->norm.wn_data_init) return;
    if (B > m->Bmax) B = m->Bmax;
    const real *inp = x;
    for (int l = 0; l < m->nlayers; l++) {
        int OC = m->dims[l + 1];
        if (m->L[l].kind == NB_NORM_WEIGHT) {
            real *g = m->params + m->L[l].g, *b = m->params + m->L[l].b;
            for (int o = 0; o < OC; o++) {
                g[o] = 1;
                b[o] = 0;
            }
            /* Pre-activations with the unit-norm weights V/||V||. */
            FN(nb_dense_forward)(m->pre[l], inp, effective_weight(m, l), NULL, B, m->dims[l], OC);
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
