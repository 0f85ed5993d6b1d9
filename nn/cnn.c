#include "nn/mem.h"
#include "real.h"
#include "nn/norms/fused.h"
/* nn/cnn.c — convolutional networks from a layer list (generic). Contract in nn/cnn.h.
 * Dimension letters: B images, C/H/W a layer's input, OC/OH/OW its output, S = OH*OW,
 * K = C*KS*KS. */

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_OFF ((size_t)-1)

static real *alloc_real(size_t n) {
    return nb_mem_alloc(n * sizeof(real)); /* aligned, zeroed, noted (nn/mem.h) */
}

typedef nb_cnn_layer layer;

static size_t out_size(const layer *L) {
    return (size_t)L->OC * L->OH * L->OW;
}
static size_t in_size(const layer *L) {
    return (size_t)L->C * L->H * L->W;
}
static size_t wsize(const layer *L) {
    return (size_t)L->OC * L->C * L->spec.ks * L->spec.ks;
}
static int has_weff(const layer *L) {
    return L->kind == NB_FK_NONE || L->kind == NB_FK_WEIGHT;
}

void nb_cnn_free(nb_cnn *m) {
    for (int l = 0; l < m->nlayers; l++) {
        layer *L = &m->L[l];
        free(L->z);
        free(L->buf);
        free(L->mean);
        free(L->rstd);
        free(L->weff);
        free(L->vnorm);
        free(L->mask);
        free(L->arg);
        free(L->gx);
    }
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->scratch);
    free(m->probs);
    free(m->d0);
    free(m->d1);
    free(m->dweff);
    free(m->gacc);
    free(m->dpart);
    memset(m, 0, sizeof *m);
}

#ifndef NB_F64
/* Measured engine per layer shape and gradient-sum mode for NB_CONV_AUTO: the fastest of
 * im2col, F(2x2) and F(4x4) by forward + backward median time in `bench conv --steps 5` (batch
 * 100, 2 threads, 2-core Intel Xeon VM with AVX-512, OpenBLAS 0.3.21 SkylakeX, load average 11-13
 * from other processes: indicative; docs/speed.md#winograd, docs/results/bench-conv-xeon.csv).
 * Shapes not listed (the first layer: 3 input channels, where im2col is up to 3x faster;
 * Fashion-MNIST's maps; other widths): im2col. */
static const struct {
    int C, H, W, OC, pad, batch_m, exact_m; /* engine with batched sums, with exact sums */
} auto_table[] = {
    {96, 32, 32, 96, 1, 4, 4},   /* batch 2.59x, exact 1.73x (fwd + bwd, im2col / engine) */
    {96, 16, 16, 192, 1, 4, 2},  /* batch 2.42x, exact 2.28x */
    {192, 16, 16, 192, 1, 4, 2}, /* batch 2.11x, exact 1.31x (F(4x4) 0.64x) */
    {192, 8, 8, 192, 0, 4, 0},   /* batch 1.48x; exact: F(2x2) 0.68x, F(4x4) 0.33x (per-image
                                    gemms of 9 or 4 tiles) */
};

int nb_cnn_conv_pick(int conv, int C, int H, int W, int OC, int KS, int pad, int exact) {
    if (conv == NB_CONV_IM2COL || !nb_wino_fits(KS, H, W, pad)) return 0;
    if (conv == NB_CONV_WINO2 || conv == NB_CONV_WINO4) return conv;
    for (size_t i = 0; i < sizeof auto_table / sizeof auto_table[0]; i++)
        if (auto_table[i].C == C && auto_table[i].H == H && auto_table[i].W == W &&
            auto_table[i].OC == OC && auto_table[i].pad == pad)
            return exact ? auto_table[i].exact_m : auto_table[i].batch_m;
    return 0;
}
#endif

/* The layer's convolution forward through its engine. */
static void conv_forward(nb_cnn *m, const layer *L, real *out, const real *in, const real *w,
                         int B) {
    if (L->wino)
        nb_wino_forward(out, m->scratch, m->nscratch, in, w, B, L->C, L->H, L->W, L->OC,
                        L->spec.pad, L->wino, m->gacc != NULL);
    else
        nb_conv2d_forward_prec(out, m->scratch, m->nscratch, in, w, B, L->C, L->H, L->W, L->OC,
                               L->spec.ks, L->spec.pad, m->gacc != NULL, m->opts.precision);
}

/* Shapes, norms and parameter tensors of every layer. */
static int plan(nb_cnn *m, const nb_cnn_spec *spec, nb_err *err) {
    int C = m->C0, H = m->H0, W = m->W0;
    if (m->opts.precision == NB_PREC_BF16) {
        if (m->opts.conv != NB_CONV_IM2COL)
            return nb_errf(err, "bfloat16 products run on the im2col engine only (not Winograd)");
#ifndef NB_F64
        if (!nb_cpu_has_bf16())
            return nb_errf(err, "bfloat16 products need a CPU with AVX512-BF16; this one has none");
#endif
    }
    for (int l = 0; l < m->nlayers; l++) {
        layer *L = &m->L[l];
        L->spec = spec[l];
        L->C = C, L->H = H, L->W = W;
        L->OC = C, L->OH = H, L->OW = W;
        L->w = L->g = L->b = L->rmean = L->rvar = L->s = NO_OFF;
        L->alpha = (real)m->opts.leaky;
        switch (spec[l].op) {
        case NB_CNN_CONV: {
            int ks = spec[l].ks, pad = spec[l].pad;
            if (spec[l].oc < 1 || ks < 1 || pad < 0 || pad >= ks)
                return nb_errf(err, "layer %d: bad convolution (%d channels, %dx%d, pad %d)", l,
                               spec[l].oc, ks, ks, pad);
            L->OC = spec[l].oc;
            L->OH = H + 2 * pad - ks + 1;
            L->OW = W + 2 * pad - ks + 1;
            if (L->OH < 1 || L->OW < 1)
                return nb_errf(err, "layer %d: a %dx%d convolution does not fit a %dx%d map", l, ks,
                               ks, H, W);
            L->kind = nb_fused_kind(m->norm.kind);
            L->wino = nb_cnn_conv_pick(m->opts.conv, C, H, W, L->OC, ks, pad, 0);
            int S = L->OH * L->OW;
            L->gc = (S == 1 || m->opts.axes_chw) ? L->OC : 1;
            int rowlen = L->gc * S;
            L->k = L->kind == NB_FK_PRMS ? nb_prms_k(rowlen, m->norm.p, m->norm.p_floor) : rowlen;
            char name[32];
            snprintf(name, sizeof name, "%s%d", L->kind == NB_FK_WEIGHT ? "V" : "W", l);
            L->w = nb_layout_add(&m->layout, name, wsize(L), 1);
            snprintf(name, sizeof name, "g%d", l);
            /* none: the scale is frozen (InitLayer) */
            L->g = nb_layout_add(&m->layout, name, (size_t)L->OC, L->kind != NB_FK_NONE);
            snprintf(name, sizeof name, "b%d", l);
            L->b = nb_layout_add(&m->layout, name, (size_t)L->OC, 1);
            if (L->kind == NB_FK_BATCH) {
                snprintf(name, sizeof name, "running_mean%d", l);
                L->rmean = nb_layout_add(&m->layout, name, (size_t)L->OC, 0);
                snprintf(name, sizeof name, "running_var%d", l);
                L->rvar = nb_layout_add(&m->layout, name, (size_t)L->OC, 0);
            }
            const nb_norm_def *nd = nb_norm_get(m->norm.kind);
            if (L->kind == NB_FK_UNFUSED && nd->nscalars > 0) {
                snprintf(name, sizeof name, "%s%d", nd->scalar_name, l);
                L->s = nb_layout_add(&m->layout, name, (size_t)nd->nscalars, 1);
                if (L->s == NO_OFF) return nb_errf(err, "too many parameter tensors");
            }
            if (L->w == NO_OFF || L->g == NO_OFF || L->b == NO_OFF ||
                (L->kind == NB_FK_BATCH && (L->rmean == NO_OFF || L->rvar == NO_OFF)))
                return nb_errf(err, "too many parameter tensors");
            break;
        }
        case NB_CNN_POOL:
            if (H < 2 || W < 2)
                return nb_errf(err, "layer %d: cannot max-pool a %dx%d map", l, H, W);
            L->OH = H / 2, L->OW = W / 2;
            break;
        case NB_CNN_GAP:
            L->OH = L->OW = 1;
            break;
        case NB_CNN_DROPOUT:
            if (!(spec[l].p >= 0 && spec[l].p < 1))
                return nb_errf(err, "layer %d: dropout rate %g is not in [0, 1)", l, spec[l].p);
            break;
        case NB_CNN_NOISE:
            if (!(spec[l].p >= 0)) return nb_errf(err, "layer %d: negative noise", l);
            break;
        default:
            return nb_errf(err, "layer %d: unknown kind", l);
        }
        C = L->OC, H = L->OH, W = L->OW;
    }
    layer *last = &m->L[m->nlayers - 1];
    if (last->spec.op != NB_CNN_CONV || last->OC != m->classes || last->OH != 1 || last->OW != 1)
        return nb_errf(err, "the last layer must map to %d classes on 1x1 maps", m->classes);
    last->alpha = 1;
    return 0;
}

int nb_cnn_init(nb_cnn *m, const nb_cnn_spec *spec, int nlayers, int C0, int H0, int W0,
                int classes, const nb_norm_cfg *norm, const nb_cnn_opts *opts, int Bmax,
                nb_rng *rng, nb_err *err) {
    memset(m, 0, sizeof *m);
    if (nlayers < 1 || nlayers > NB_CNN_MAX_LAYERS)
        return nb_errf(err, "a network needs 1 to %d layers, not %d", NB_CNN_MAX_LAYERS, nlayers);
    if (Bmax < 1) return nb_errf(err, "batch size must be at least 1, not %d", Bmax);
    if (C0 < 1 || H0 < 1 || W0 < 1 || classes < 2)
        return nb_errf(err, "bad input shape %dx%dx%d or %d classes", C0, H0, W0, classes);
    m->nlayers = nlayers;
    m->C0 = C0, m->H0 = H0, m->W0 = W0, m->classes = classes, m->Bmax = Bmax;
    m->norm = *norm;
    m->opts = *opts;
    if (plan(m, spec, err) != 0) {
        memset(m, 0, sizeof *m);
        return -1;
    }

    size_t P = m->layout.total;
    m->params = alloc_real(P);
    m->grads = alloc_real(P);
    m->adam_m = alloc_real(P);
    m->adam_v = alloc_real(P);
    m->probs = alloc_real((size_t)Bmax * classes);
    size_t maxa = (size_t)C0 * H0 * W0, maxw = 0, ss = 0;
    for (int l = 0; l < nlayers; l++) {
        layer *L = &m->L[l];
        if (out_size(L) > maxa) maxa = out_size(L);
        if (L->spec.op != NB_CNN_CONV) continue;
        if (wsize(L) > maxw) maxw = wsize(L);
        size_t s = nb_conv2d_scratch(L->C, L->H, L->W, L->OC, L->spec.ks, L->spec.pad);
        if (s > ss) ss = s;
    }
    m->max_act = maxa;
    m->scratch_each = ss;
    m->nscratch = omp_get_max_threads();
    size_t stotal = ss * (size_t)m->nscratch;
    for (int l = 0; l < nlayers; l++) {
        const layer *L = &m->L[l];
        if (L->spec.op != NB_CNN_CONV) continue;
        for (int exact = 0; exact < 2; exact++) { /* nb_cnn_exact_grads may pick another */
            int e = nb_cnn_conv_pick(m->opts.conv, L->C, L->H, L->W, L->OC, L->spec.ks, L->spec.pad,
                                     exact);
            size_t s = e ? nb_wino_scratch(e, L->C, L->OC, m->nscratch) : 0;
            if (s > stotal) stotal = s;
        }
    }
    m->scratch = alloc_real(stotal);
    m->d0 = alloc_real((size_t)Bmax * maxa);
    m->d1 = alloc_real((size_t)Bmax * maxa);
    m->dweff = alloc_real(maxw);
    int ok = m->params && m->grads && m->adam_m && m->adam_v && m->probs && m->scratch && m->d0 &&
             m->d1 && m->dweff;
    for (int l = 0; l < nlayers && ok; l++) {
        layer *L = &m->L[l];
        size_t n = (size_t)Bmax * out_size(L);
        switch (L->spec.op) {
        case NB_CNN_CONV:
            L->z = alloc_real(n);
            L->buf = alloc_real(n);
            L->mean = alloc_real((size_t)Bmax * L->OC);
            L->rstd = alloc_real((size_t)Bmax * L->OC);
            ok = L->z && L->buf && L->mean && L->rstd;
            if (ok && L->kind == NB_FK_UNFUSED) {
                L->gx = alloc_real(4 * out_size(L));
                ok = L->gx != NULL;
            }
            if (ok && has_weff(L)) {
                L->weff = alloc_real(wsize(L));
                L->vnorm = alloc_real((size_t)L->OC);
                ok = L->weff && L->vnorm;
            }
            break;
        case NB_CNN_POOL:
            L->buf = alloc_real(n);
            nb_mem_note(n ? n : 1);
            L->arg = malloc(n ? n : 1);
            ok = L->buf && L->arg;
            break;
        case NB_CNN_DROPOUT:
            L->buf = alloc_real(n);
            L->mask = alloc_real(n);
            ok = L->buf && L->mask;
            break;
        case NB_CNN_NOISE:
        case NB_CNN_GAP:
            L->buf = alloc_real(n);
            ok = L->buf != NULL;
            break;
        }
    }
    if (!ok) {
        nb_cnn_free(m);
        return nb_errf(err, "out of memory for a network of %zu parameters at batch %d", P, Bmax);
    }

    for (int l = 0; l < nlayers; l++) {
        layer *L = &m->L[l];
        if (L->spec.op != NB_CNN_CONV) continue;
        real *Wt = m->params + L->w;
        size_t n = wsize(L);
        if (L->kind == NB_FK_BATCH || L->kind == NB_FK_WEIGHT) {
            for (size_t i = 0; i < n; i++)
                Wt[i] = (real)(0.05 * nb_rng_normal(rng));
        } else {
            double ks2 = (double)L->spec.ks * L->spec.ks;
            double a = sqrt(6.0 / ((L->C + L->OC) * ks2));
            for (size_t i = 0; i < n; i++)
                Wt[i] = (real)(a * (2.0 * nb_rng_uniform(rng) - 1.0));
        }
        for (int o = 0; o < L->OC; o++)
            m->params[L->g + o] = 1;
        if (L->rvar != NO_OFF)
            for (int o = 0; o < L->OC; o++)
                m->params[L->rvar + o] = 1;
        if (L->s != NO_OFF) {
            const nb_norm_def *nd = nb_norm_get(m->norm.kind);
            for (int c = 0; c < nd->nscalars; c++)
                m->params[L->s + (size_t)c] = (real)nd->scalar_init(&m->norm);
        }
    }
    return 0;
}

void nb_cnn_zero_grad(nb_cnn *m) {
    memset(m->grads, 0, sizeof(real) * m->layout.total);
    if (m->gacc) memset(m->gacc, 0, sizeof(double) * m->nacc);
}

int nb_cnn_exact_grads(nb_cnn *m, nb_err *err) {
    size_t n = m->layout.total, maxw = 0;
    for (int l = 0; l < m->nlayers; l++) {
        layer *L = &m->L[l];
        if (L->spec.op != NB_CNN_CONV) continue;
        if (wsize(L) > maxw) maxw = wsize(L);
        /* the engine measured fastest with exact sums (the scratch fits both: nb_cnn_init) */
        L->wino =
            nb_cnn_conv_pick(m->opts.conv, L->C, L->H, L->W, L->OC, L->spec.ks, L->spec.pad, 1);
        if (has_weff(L)) {
            L->raw = n;
            n += wsize(L);
        }
    }
    free(m->gacc);
    free(m->dpart);
    nb_mem_note(sizeof(double) * (n + maxw * (size_t)m->nscratch));
    m->gacc = calloc(n, sizeof(double));
    m->dpart = malloc(sizeof(double) * maxw * (size_t)m->nscratch);
    if (!m->gacc || !m->dpart) {
        free(m->gacc);
        free(m->dpart);
        m->gacc = m->dpart = NULL;
        return nb_errf(err, "out of memory for exact gradient sums (%zu values)", n);
    }
    m->nacc = n;
    return 0;
}

/* W_eff's gradient dweff mapped to W (and WeightNorm's g): what the float backward does. */
static void weff_backward(nb_cnn *m, layer *L, const real *dweff) {
    size_t K = wsize(L) / L->OC;
    if (L->kind == NB_FK_WEIGHT) {
        nb_weightnorm_backward(m->grads + L->w, m->grads + L->g, dweff, m->params + L->w,
                               m->params + L->g, L->vnorm, L->OC, (int)K);
    } else {
        real *dW = m->grads + L->w;
        const real *g = m->params + L->g;
        for (int o = 0; o < L->OC; o++)
            for (size_t i = 0; i < K; i++)
                dW[o * K + i] += g[o] * dweff[o * K + i];
    }
}

void nb_cnn_grads_finish(nb_cnn *m) {
    if (!m->gacc) return;
    for (size_t i = 0; i < m->layout.total; i++)
        m->grads[i] += (real)m->gacc[i];
    for (int l = 0; l < m->nlayers; l++) {
        layer *L = &m->L[l];
        if (L->spec.op != NB_CNN_CONV || !has_weff(L)) continue;
        for (size_t i = 0; i < wsize(L); i++)
            m->dweff[i] = (real)m->gacc[L->raw + i];
        weff_backward(m, L, m->dweff);
    }
}

/* The weights the convolution uses: W itself, or W_eff (none, weight), computed here. */
static const real *conv_weights(nb_cnn *m, layer *L) {
    const real *Wt = m->params + L->w, *g = m->params + L->g;
    if (L->kind == NB_FK_WEIGHT) {
        nb_weightnorm_forward(L->weff, L->vnorm, Wt, g, L->OC, (int)(wsize(L) / L->OC));
        return L->weff;
    }
    if (L->kind == NB_FK_NONE) {
        size_t K = wsize(L) / L->OC;
        for (int o = 0; o < L->OC; o++)
            for (size_t i = 0; i < K; i++)
                L->weff[o * K + i] = g[o] * Wt[o * K + i];
        return L->weff;
    }
    return Wt;
}

/* ---- a row-wise norm without a fused form (DyT): its kernels over each image's OC*S values,
 * g and b (per channel) repeated over the channel's S positions; then the activation ------- */

static void unfused_fwd(nb_cnn *m, layer *L, int B, int S, int training) {
    const size_t n = out_size(L);
    real *ge = L->gx, *be = L->gx + n;
    for (int o = 0; o < L->OC; o++)
        for (int i = 0; i < S; i++) {
            ge[(size_t)o * S + i] = m->params[L->g + o];
            be[(size_t)o * S + i] = m->params[L->b + o];
        }
    nb_norm_get(m->norm.kind)
        ->REAL_OPS->forward(L->buf, L->mean, L->rstd, NULL, NULL, L->z, ge, be,
                            L->s != NO_OFF ? m->params + L->s : NULL, B, (int)n, training,
                            &m->norm);
    if (L->alpha != 1) {
        const size_t N = (size_t)B * n;
        for (size_t i = 0; i < N; i++)
            L->buf[i] = L->buf[i] > 0 ? L->buf[i] : L->alpha * L->buf[i];
    }
}

/* dz over cur (tmp: B*OC*S scratch); the gain, bias and scalar gradients into grads, or the
 * exact sums at ga */
static void unfused_bwd(nb_cnn *m, layer *L, real *cur, real *tmp, int B, int S, double *ga) {
    const size_t n = out_size(L), N = (size_t)B * n;
    if (L->alpha != 1)
        for (size_t i = 0; i < N; i++)
            cur[i] *= L->out[i] > 0 ? (real)1 : L->alpha;
    real *dge = L->gx + 2 * n, *dbe = L->gx + 3 * n;
    memset(dge, 0, sizeof(real) * 2 * n);
    real ds[NB_NORMS_MAX] = {0};
    nb_norm_get(m->norm.kind)
        ->REAL_OPS->backward(tmp, dge, dbe, ds, cur, L->z, L->gx,
                             L->s != NO_OFF ? m->params + L->s : NULL, L->mean, L->rstd, B, (int)n,
                             m->last_training, &m->norm, 1);
    memcpy(cur, tmp, sizeof(real) * N);
    for (int o = 0; o < L->OC; o++) {
        double sg = 0, sb = 0;
        for (int i = 0; i < S; i++) {
            sg += (double)dge[(size_t)o * S + i];
            sb += (double)dbe[(size_t)o * S + i];
        }
        if (ga) {
            ga[L->g + o] += sg;
            ga[L->b + o] += sb;
        } else {
            m->grads[L->g + o] += (real)sg;
            m->grads[L->b + o] += (real)sb;
        }
    }
    if (L->s != NO_OFF)
        for (int c = 0; c < nb_norm_get(m->norm.kind)->nscalars; c++) {
            if (ga)
                ga[L->s + (size_t)c] += (double)ds[c];
            else
                m->grads[L->s + (size_t)c] += ds[c];
        }
}

double nb_cnn_forward(nb_cnn *m, const real *x, const int *y, int B, int training, nb_rng *rng) {
    const real *in = x;
    for (int l = 0; l < m->nlayers; l++) {
        layer *L = &m->L[l];
        size_t n = (size_t)B * out_size(L);
        int S = L->OH * L->OW;
        switch (L->spec.op) {
        case NB_CNN_NOISE:
            if (training && L->spec.p > 0) {
                nb_gauss_noise_forward_at(L->buf, in, n, B, m->row0, L->spec.p, rng);
                L->out = L->buf;
            } else {
                L->out = (real *)in;
            }
            break;
        case NB_CNN_DROPOUT:
            if (training && L->spec.p > 0) {
                nb_dropout_forward_at(L->buf, L->mask, in, n, B, m->row0, L->spec.p, rng);
                L->out = L->buf;
            } else {
                L->out = (real *)in;
            }
            break;
        case NB_CNN_POOL:
            nb_maxpool2_forward(L->buf, L->arg, in, B, L->C, L->H, L->W);
            L->out = L->buf;
            break;
        case NB_CNN_GAP:
            nb_gap_forward(L->buf, in, B, L->C, L->H * L->W);
            L->out = L->buf;
            break;
        case NB_CNN_CONV: {
            const real *w = conv_weights(m, L);
            conv_forward(m, L, L->z, in, w, B);
            const real *g = m->params + L->g, *b = m->params + L->b;
            switch (L->kind) {
            case NB_FK_BATCH:
                nb_map_batchnorm_forward(L->buf, L->mean, L->rstd, m->params + L->rmean,
                                         m->params + L->rvar, L->z, g, b, B, L->OC, S, training,
                                         L->alpha, &m->norm);
                break;
            case NB_FK_LAYER:
                nb_map_layernorm_forward(L->buf, L->mean, L->rstd, L->z, g, b, B, L->OC, S, L->gc,
                                         L->alpha, &m->norm);
                break;
            case NB_FK_RMS:
            case NB_FK_PRMS:
                nb_map_rmsnorm_forward(L->buf, L->rstd, L->z, g, b, B, L->OC, S, L->gc, L->k,
                                       L->alpha, &m->norm);
                break;
            case NB_FK_UNFUSED:
                unfused_fwd(m, L, B, S, training);
                break;
            default:
                nb_map_affine_forward(L->buf, L->z, NULL, b, B, L->OC, S, L->alpha);
                break;
            }
            L->out = L->buf;
            break;
        }
        }
        in = L->out;
    }
    m->last_x = x;
    m->last_B = B;
    m->last_training = training;
    if (!y) {
        /* softmax only */
        for (int r = 0; r < B; r++) {
            const real *lg = in + (size_t)r * m->classes;
            real *p = m->probs + (size_t)r * m->classes;
            real mx = lg[0];
            for (int c = 1; c < m->classes; c++)
                if (lg[c] > mx) mx = lg[c];
            double s = 0;
            for (int c = 0; c < m->classes; c++)
                s += (double)(p[c] = REAL_EXP(lg[c] - mx));
            for (int c = 0; c < m->classes; c++)
                p[c] = (real)(p[c] / s);
        }
        return 0;
    }
    return nb_softmax_xent_forward(m->probs, NULL, in, y, B, m->classes);
}

void nb_cnn_backward(nb_cnn *m, const int *y) {
    const int B = m->last_B;
    real *cur = m->d0, *other = m->d1;
    memset(cur, 0, sizeof(real) * (size_t)B * m->classes);
    /* a shard of a larger batch: (p - onehot)/grad_rows, as the whole batch's rows get it */
    nb_softmax_xent_backward_over(cur, m->probs, y, B, m->classes,
                                  m->grad_rows > 0 ? m->grad_rows : B);
    double *ga = m->gacc;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        layer *L = &m->L[l];
        const real *in = l > 0 ? m->L[l - 1].out : m->last_x;
        int S = L->OH * L->OW;
        size_t n = (size_t)B * out_size(L);
        /* no input gradient wanted where no conv lies below */
        int first = 1;
        for (int j = 0; j < l; j++)
            if (m->L[j].spec.op == NB_CNN_CONV) first = 0;
        switch (L->spec.op) {
        case NB_CNN_NOISE:
            break; /* identity */
        case NB_CNN_DROPOUT:
            if (L->out != in) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
                for (size_t i = 0; i < n; i++)
                    cur[i] *= L->mask[i];
            }
            break;
        case NB_CNN_POOL:
            if (first) break;
            nb_maxpool2_backward(other, cur, L->arg, B, L->C, L->H, L->W, 0);
            {
                real *t = cur;
                cur = other;
                other = t;
            }
            break;
        case NB_CNN_GAP:
            if (first) break;
            memset(other, 0, sizeof(real) * (size_t)B * in_size(L));
            nb_gap_backward(other, cur, B, L->C, L->H * L->W);
            {
                real *t = cur;
                cur = other;
                other = t;
            }
            break;
        case NB_CNN_CONV: {
            const real *g = m->params + L->g;
            real *dg = m->grads + L->g, *db = m->grads + L->b;
            double *dgd = ga && L->g != NO_OFF ? ga + L->g : NULL;
            double *dbd = ga && L->b != NO_OFF ? ga + L->b : NULL;
            /* dz written over cur */
            switch (L->kind) {
            case NB_FK_BATCH:
                if (m->last_training && m->norm.bn_sum)
                    nb_map_batchnorm_sync_backward(cur, dg, db, dgd, dbd, cur, L->out, L->z, g,
                                                   L->mean, L->rstd, B, L->OC, S, L->alpha,
                                                   &m->norm);
                else
                    nb_map_batchnorm_backward(cur, dg, db, dgd, dbd, cur, L->out, L->z, g, L->mean,
                                              L->rstd, B, L->OC, S, m->last_training, L->alpha, 0);
                break;
            case NB_FK_LAYER:
                nb_map_layernorm_backward(cur, dg, db, dgd, dbd, cur, L->out, L->z, g, L->mean,
                                          L->rstd, B, L->OC, S, L->gc, L->alpha, 0, &m->norm);
                break;
            case NB_FK_RMS:
            case NB_FK_PRMS:
                nb_map_rmsnorm_backward(cur, dg, db, dgd, dbd, cur, L->out, L->z, g, L->rstd, B,
                                        L->OC, S, L->gc, L->k, L->alpha, 0, &m->norm);
                break;
            case NB_FK_UNFUSED:
                unfused_bwd(m, L, cur, other, B, S, ga);
                break;
            default:
                nb_map_affine_backward(cur, NULL, db, NULL, dbd, cur, L->out, L->z, NULL, B, L->OC,
                                       S, L->alpha, 0);
                break;
            }
            const real *w = has_weff(L) ? L->weff : m->params + L->w;
            real *dw = m->grads + L->w;
            double *dwd = ga ? ga + (has_weff(L) ? L->raw : L->w) : NULL;
            if (has_weff(L) && !ga) {
                dw = m->dweff;
                memset(dw, 0, sizeof(real) * wsize(L));
            }
            if (L->wino)
                nb_wino_backward(first ? NULL : other, dw, dwd, m->scratch, m->nscratch, cur, in, w,
                                 B, L->C, L->H, L->W, L->OC, L->spec.pad, L->wino, 0);
            else
                nb_conv2d_backward_prec(first ? NULL : other, dw, dwd, m->dpart, m->scratch,
                                        m->nscratch, cur, in, w, B, L->C, L->H, L->W, L->OC,
                                        L->spec.ks, L->spec.pad, 0, m->opts.precision);
            if (has_weff(L) && !ga) weff_backward(m, L, m->dweff);
            real *t = cur;
            cur = other;
            other = t;
            break;
        }
        }
    }
}

int nb_cnn_data_init(nb_cnn *m, const real *x, int B, nb_rng *rng, nb_err *err) {
    int none = nb_fused_kind(m->norm.kind) == NB_FK_NONE && m->opts.none_data_init;
    int weight = nb_fused_kind(m->norm.kind) == NB_FK_WEIGHT && m->norm.wn_data_init;
    if (!none && !weight) return 0;
    real *a = alloc_real((size_t)B * m->max_act), *b2 = alloc_real((size_t)B * m->max_act);
    if (!a || !b2) {
        free(a);
        free(b2);
        return nb_errf(err, "out of memory for data-dependent initialisation on %d images", B);
    }
    memcpy(a, x, sizeof(real) * (size_t)B * m->C0 * m->H0 * m->W0);
    real *cur = a, *nxt = b2;
    for (int l = 0; l < m->nlayers; l++) {
        layer *L = &m->L[l];
        int S = L->OH * L->OW;
        switch (L->spec.op) {
        case NB_CNN_NOISE:
            /* in place; a deterministic pass lets the activations through */
            if (rng && L->spec.p > 0)
                nb_gauss_noise_forward(cur, cur, (size_t)B * out_size(L), B, L->spec.p, rng);
            continue;
        case NB_CNN_DROPOUT:
            if (rng && L->spec.p > 0) {
                const size_t n = (size_t)B * out_size(L);
                real *mask = alloc_real(n);
                if (!mask) {
                    free(a);
                    free(b2);
                    return nb_errf(err, "out of memory for data-dependent initialisation");
                }
                nb_dropout_forward(cur, mask, cur, n, B, L->spec.p, rng);
                free(mask);
            }
            continue;
        case NB_CNN_POOL: {
            unsigned char *arg = malloc((size_t)B * out_size(L));
            if (!arg) {
                free(a);
                free(b2);
                return nb_errf(err, "out of memory for data-dependent initialisation");
            }
            nb_maxpool2_forward(nxt, arg, cur, B, L->C, L->H, L->W);
            free(arg);
            break;
        }
        case NB_CNN_GAP:
            nb_gap_forward(nxt, cur, B, L->C, L->H * L->W);
            break;
        case NB_CNN_CONV: {
            real *g = m->params + L->g, *bb = m->params + L->b;
            for (int o = 0; o < L->OC; o++)
                g[o] = 1; /* t with V/||V|| (weight) or W (none) */
            const real *w = conv_weights(m, L);
            conv_forward(m, L, nxt, cur, w, B);
            size_t CS = (size_t)L->OC * S;
            for (int o = 0; o < L->OC; o++) {
                double s = 0, v = 0, cnt = (double)B * S;
                for (int n = 0; n < B; n++)
                    for (int i = 0; i < S; i++)
                        s += nxt[n * CS + (size_t)o * S + i];
                double mu = s / cnt;
                for (int n = 0; n < B; n++)
                    for (int i = 0; i < S; i++) {
                        double d = nxt[n * CS + (size_t)o * S + i] - mu;
                        v += d * d;
                    }
                double sd = sqrt(v / cnt);
                double gi = sd > 1e-12 ? 1.0 / sd : 1.0;
                g[o] = (real)gi;
                bb[o] = (real)(-mu * gi);
            }
            /* out = act(g t + b), the scale applied here as the layer will through W_eff */
            nb_map_affine_forward(nxt, nxt, g, bb, B, L->OC, S, L->alpha);
            break;
        }
        }
        real *t = cur;
        cur = nxt;
        nxt = t;
    }
    free(a);
    free(b2);
    return 0;
}

double nb_cnn_flops(const nb_cnn *m) {
    double f = 0;
    for (int l = 0; l < m->nlayers; l++) {
        const layer *L = &m->L[l];
        if (L->spec.op == NB_CNN_CONV) f += 2.0 * (double)wsize(L) * L->OH * L->OW;
    }
    return f;
}
