#include "nn/mem.h"
#include "real.h"
/* nn/oe.c — the order-embedding model and loss (generic; see nn/oe.h).
 * Dimension letters: T steps, B rows, W word width, H joint width, F image width, n row width. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define L2_FLOOR 1e-12
/* Below this many multiply-adds a kernel stays on one thread. */
#define OE_PAR_MIN 65536

static real *alloc_real(size_t n) {
    return nb_mem_alloc(n * sizeof(real)); /* aligned, zeroed, noted (nn/mem.h) */
}

void nb_l2abs_forward(real *out, real *nrm, const real *inp, int B, int n) {
    for (int b = 0; b < B; b++) {
        const real *x = inp + (size_t)b * n;
        real *y = out + (size_t)b * n;
        double ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < n; i++)
            ss += (double)x[i] * (double)x[i];
        double nr = sqrt(ss);
        if (!(nr > L2_FLOOR)) nr = L2_FLOOR;
        nrm[b] = (real)nr;
        const real inv = (real)(1.0 / nr);
#pragma omp simd
        for (int i = 0; i < n; i++)
            y[i] = REAL_FABS(x[i] * inv);
    }
}

/* y = x/||x||, s = |y|: dy = sign(y) ds; dx = (dy - y (y·dy)) / ||x||. */
void nb_l2abs_backward(real *dinp, const real *dout, const real *inp, const real *nrm, int B,
                       int n) {
    for (int b = 0; b < B; b++) {
        const real *x = inp + (size_t)b * n, *ds = dout + (size_t)b * n;
        real *dx = dinp + (size_t)b * n;
        const double nr = nrm[b];
        const real inv = (real)(1.0 / nr);
        double dot = 0; /* y·dy = sum |y| ds */
#pragma omp simd reduction(+ : dot)
        for (int i = 0; i < n; i++)
            dot += (double)REAL_FABS(x[i] * inv) * (double)ds[i];
        const real d = (real)dot;
#pragma omp simd
        for (int i = 0; i < n; i++) {
            real y = x[i] * inv;
            real dy = y < 0 ? -ds[i] : ds[i];
            dx[i] += (dy - y * d) * inv;
        }
    }
}

static inline real viol(const real *s, const real *c, int n) {
    real e = 0;
#pragma omp simd reduction(+ : e)
    for (int d = 0; d < n; d++) {
        real v = s[d] - c[d];
        v = v > 0 ? v : 0;
        e += v * v;
    }
    return e;
}

void nb_order_errors(real *E, const real *s, const real *c, int Bs, int Bc, int n) {
#pragma omp parallel for schedule(static) if ((size_t)Bs * Bc * n >= OE_PAR_MIN)
    for (int i = 0; i < Bs; i++)
        for (int j = 0; j < Bc; j++)
            E[(size_t)i * Bc + j] = viol(s + (size_t)i * n, c + (size_t)j * n, n);
}

double nb_order_loss(real *G, const real *E, int B, double alpha) {
    double loss = 0;
    memset(G, 0, sizeof(real) * (size_t)B * B);
    for (int i = 0; i < B; i++) {
        const double eii = E[(size_t)i * B + i];
        for (int j = 0; j < B; j++) {
            if (i == j) continue;
            const double eij = E[(size_t)i * B + j], ejj = E[(size_t)j * B + j];
            const double a = alpha - eij + ejj; /* image j against caption i (cost_s) */
            const double b = alpha - eij + eii; /* caption i against image j (cost_im) */
            if (a > 0) {
                loss += a;
                G[(size_t)i * B + j] -= 1;
                G[(size_t)j * B + j] += 1;
            }
            if (b > 0) {
                loss += b;
                G[(size_t)i * B + j] -= 1;
                G[(size_t)i * B + i] += 1;
            }
        }
    }
    return loss;
}

void nb_order_loss_backward(real *ds, real *dc, const real *G, const real *s, const real *c, int B,
                            int n) {
    const int par = (size_t)B * B * n >= OE_PAR_MIN;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (int i = 0; i < B; i++) {
            const real *si = s + (size_t)i * n;
            real *dsi = ds + (size_t)i * n;
            for (int j = 0; j < B; j++) {
                const real gij = 2 * G[(size_t)i * B + j];
                if (gij == 0) continue;
                const real *cj = c + (size_t)j * n;
#pragma omp simd
                for (int d = 0; d < n; d++) {
                    real v = si[d] - cj[d];
                    dsi[d] += v > 0 ? gij * v : 0;
                }
            }
        }
#pragma omp for schedule(static)
        for (int j = 0; j < B; j++) {
            const real *cj = c + (size_t)j * n;
            real *dcj = dc + (size_t)j * n;
            for (int i = 0; i < B; i++) {
                const real gij = 2 * G[(size_t)i * B + j];
                if (gij == 0) continue;
                const real *si = s + (size_t)i * n;
#pragma omp simd
                for (int d = 0; d < n; d++) {
                    real v = si[d] - cj[d];
                    dcj[d] -= v > 0 ? gij * v : 0;
                }
            }
        }
    }
}

/* ---- the model ------------------------------------------------------------------------------ */

void nb_oe_free(nb_oe *m) {
    nb_gru_free(&m->gru);
    real *own[] = {m->params, m->grads, m->adam_m, m->adam_v, m->x,   m->dx,   m->mask,
                   m->s,      m->snrm,  m->ds,     m->dh,     m->img, m->ipre, m->c,
                   m->cnrm,   m->dc,    m->dpre,   m->E,      m->G};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        free(own[i]);
    free(m->tok);
    memset(m, 0, sizeof *m);
}

int nb_oe_init(nb_oe *m, int V, int W, int H, int F, int Tmax, int Bmax, double margin,
               const nb_norm_cfg *norm, nb_rng *rng, nb_err *err) {
    memset(m, 0, sizeof *m);
    if (V < 2 || W < 1 || H < 1 || F < 1 || V > (1 << 24) || F > (1 << 20))
        return nb_errf(err,
                       "order-embedding sizes out of range (words %d, word width %d, "
                       "width %d, image width %d)",
                       V, W, H, F);
    if (nb_norm_get(norm->kind)->acts == NB_ON_FEATURES && Bmax < 2)
        return nb_errf(err, "batch norm needs batches of at least 2 captions");
    m->V = V;
    m->W = W;
    m->H = H;
    m->F = F;
    m->Tmax = Tmax;
    m->Bmax = Bmax;
    m->margin = margin;
    m->emb = nb_layout_add(&m->layout, "Wemb", (size_t)V * W, 1);
    if (nb_gru_setup(&m->gru, &m->layout, "gru.", W, H, Tmax, Bmax, norm, err) != 0) return -1;
    m->wimg = nb_layout_add(&m->layout, "img.W", (size_t)H * F, 1);
    m->bimg = nb_layout_add(&m->layout, "img.b", (size_t)H, 1);
    if (m->wimg == (size_t)-1 || m->bimg == (size_t)-1) {
        nb_oe_free(m);
        return nb_errf(err, "too many parameter tensors");
    }
    const size_t P = m->layout.total, TB = (size_t)Tmax * Bmax, BH = (size_t)Bmax * H;
    int ok = 1;
#define ALLOC(p, n) ok = ok && ((p) = alloc_real(n)) != NULL
    ALLOC(m->params, P);
    ALLOC(m->grads, P);
    ALLOC(m->adam_m, P);
    ALLOC(m->adam_v, P);
    ALLOC(m->x, TB * W);
    ALLOC(m->dx, TB * W);
    ALLOC(m->mask, TB);
    ALLOC(m->s, BH);
    ALLOC(m->snrm, Bmax);
    ALLOC(m->ds, BH);
    ALLOC(m->dh, BH);
    ALLOC(m->img, (size_t)Bmax * F);
    ALLOC(m->ipre, BH);
    ALLOC(m->c, BH);
    ALLOC(m->cnrm, Bmax);
    ALLOC(m->dc, BH);
    ALLOC(m->dpre, BH);
    ALLOC(m->E, (size_t)Bmax * Bmax);
    ALLOC(m->G, (size_t)Bmax * Bmax);
#undef ALLOC
    m->tok = ok ? malloc(sizeof(int) * TB) : NULL;
    if (!ok || !m->tok) {
        nb_oe_free(m);
        return nb_errf(err, "out of memory for the order-embedding model");
    }
    real *p = m->params;
    for (size_t i = 0; i < (size_t)V * W; i++)
        p[m->emb + i] = (real)(0.2 * nb_rng_uniform(rng) - 0.1);
    if (nb_gru_init_params(&m->gru, p, rng, err) != 0) {
        nb_oe_free(m);
        return -1;
    }
    const double a = sqrt(6.0 / (F + H));
    for (size_t i = 0; i < (size_t)H * F; i++)
        p[m->wimg + i] = (real)(a * (2 * nb_rng_uniform(rng) - 1));
    return 0;
}

void nb_oe_encode_captions(nb_oe *m, const int *tok, const int *steps, int T, int B, int training) {
    const int W = m->W;
    const real *emb = m->params + m->emb;
    m->T = T;
    m->B = B;
    memcpy(m->tok, tok, sizeof(int) * (size_t)T * B);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            size_t o = (size_t)t * B + b;
            int w = tok[o];
            if (w < 0 || w >= m->V) w = 1; /* callers validate; unknown as a last resort */
            m->tok[o] = w;
            memcpy(m->x + o * W, emb + (size_t)w * W, sizeof(real) * W);
            m->mask[o] = t < steps[b] ? 1 : 0;
        }
    nb_gru_forward(&m->gru, m->params, m->x, m->mask, T, B, training);
    nb_l2abs_forward(m->s, m->snrm, nb_gru_last(&m->gru), B, m->H);
}

void nb_oe_encode_images(nb_oe *m, const real *img, int B) {
    nb_dense_forward(m->ipre, img, m->params + m->wimg, m->params + m->bimg, B, m->F, m->H);
    nb_l2abs_forward(m->c, m->cnrm, m->ipre, B, m->H);
}

double nb_oe_forward(nb_oe *m, const int *tok, const int *steps, int T, const real *img, int B) {
    memcpy(m->img, img, sizeof(real) * (size_t)B * m->F);
    nb_oe_encode_captions(m, tok, steps, T, B, 1);
    nb_oe_encode_images(m, m->img, B);
    nb_order_errors(m->E, m->s, m->c, B, B, m->H);
    return nb_order_loss(m->G, m->E, B, m->margin);
}

void nb_oe_backward(nb_oe *m) {
    const size_t BH = (size_t)m->B * m->H;
    memset(m->ds, 0, sizeof(real) * BH);
    memset(m->dc, 0, sizeof(real) * BH);
    nb_order_loss_backward(m->ds, m->dc, m->G, m->s, m->c, m->B, m->H);
    nb_oe_backward_embeddings(m);
}

void nb_oe_backward_embeddings(nb_oe *m) {
    const int B = m->B, H = m->H, W = m->W, T = m->T;
    const size_t BH = (size_t)B * H;
    /* image side */
    memset(m->dpre, 0, sizeof(real) * BH);
    nb_l2abs_backward(m->dpre, m->dc, m->ipre, m->cnrm, B, H);
    nb_dense_backward(NULL, m->grads + m->wimg, m->grads + m->bimg, m->dpre, m->img,
                      m->params + m->wimg, B, m->F, H);
    /* caption side */
    memset(m->dh, 0, sizeof(real) * BH);
    nb_l2abs_backward(m->dh, m->ds, nb_gru_last(&m->gru), m->snrm, B, H);
    memset(m->dx, 0, sizeof(real) * (size_t)T * B * W);
    nb_gru_backward(&m->gru, m->grads, m->dx, m->params, m->dh);
    real *demb = m->grads + m->emb;
    for (size_t o = 0; o < (size_t)T * B; o++) {
        real *d = demb + (size_t)m->tok[o] * W;
        const real *g = m->dx + o * W;
#pragma omp simd
        for (int i = 0; i < W; i++)
            d[i] += g[i];
    }
}
