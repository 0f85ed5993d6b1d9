#include "real.h"
#include "nn/norms/fused.h"
/* nn/draw.c — DRAW's attention and bound terms (generic: float and, with -DNB_F64, double; see
 * nn/nn.h). Contracts and formulas in nn/draw.h.
 *
 * Sizes are small (N <= NB_DRAW_NMAX, image sides <= NB_DRAW_SIDEMAX): plain loops with double
 * accumulators over a row's (N, side) intermediates on the stack (FY x, w FX, ...), rows split over
 * threads; each row's arithmetic is the same for any thread count. Nothing is allocated in the
 * kernels. */

#include <stdlib.h>
#include <math.h>
#include <string.h>

/* Below this many rows the loops stay on one thread. */
#define DRAW_PAR_MIN 64

static inline double offs(int i, int N) {
    return (double)i - 0.5 * N + 0.5;
}

static inline double stride_scale(int Aw, int Bh, int N) {
    return (double)((Aw > Bh ? Aw : Bh) - 1) / (double)(N - 1);
}

/* One filterbank row set: F (N, n) for centre g, stride delta, variance v. */
static void fb_rows(real *F, double g, double delta, double v, int n, int N) {
    for (int i = 0; i < N; i++) {
        double mu = g + offs(i, N) * delta, z = 0;
        real *f = F + (size_t)i * n;
        for (int a = 0; a < n; a++) {
            double d = a + 1 - mu, e = exp(-d * d / (2 * v)); /* pixel a + 1 of 1..n */
            f[a] = (real)e;
            z += e;
        }
        z += NB_DRAW_FB_EPS;
        for (int a = 0; a < n; a++)
            f[a] = (real)(f[a] / z);
    }
}

void nb_draw_filterbank_forward(real *FX, real *FY, real *gamma, const real *p, int B, int Aw,
                                int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *q = p + (size_t)b * 5;
        double gx = 0.5 * (Aw + 1) * ((double)q[0] + 1), gy = 0.5 * (Bh + 1) * ((double)q[1] + 1);
        double v = exp((double)q[2]), delta = stride_scale(Aw, Bh, N) * exp((double)q[3]);
        fb_rows(FX + (size_t)b * N * Aw, gx, delta, v, Aw, N);
        fb_rows(FY + (size_t)b * N * Bh, gy, delta, v, Bh, N);
        gamma[b] = (real)exp((double)q[4]);
    }
}

/* Backward of one filterbank row set: adds to *dg (centre), *dd (stride), *dv (variance). The
 * un-normalized e is F Z; with F = e / Z, dL/de_a = (dF_a - sum_c dF_c F_c) / Z. */
static void fb_rows_bwd(double *dg, double *dd, double *dv, const real *dF, const real *F, double g,
                        double delta, double v, int n, int N) {
    for (int i = 0; i < N; i++) {
        const real *f = F + (size_t)i * n, *df = dF + (size_t)i * n;
        double mu = g + offs(i, N) * delta, z = 0, s = 0;
        for (int a = 0; a < n; a++) {
            double d = a + 1 - mu;
            z += exp(-d * d / (2 * v));
            s += (double)df[a] * f[a];
        }
        z += NB_DRAW_FB_EPS;
        double dmu = 0, dvar = 0;
        for (int a = 0; a < n; a++) {
            double d = a + 1 - mu, e = (double)f[a] * z; /* e from F: the same value */
            double de = ((double)df[a] - s) / z;
            dmu += de * e * d / v;
            dvar += de * e * d * d / (2 * v * v);
        }
        *dg += dmu;
        *dd += dmu * offs(i, N);
        *dv += dvar;
    }
}

void nb_draw_filterbank_backward(real *dp, const real *dFX, const real *dFY, const real *dgamma,
                                 const real *FX, const real *FY, const real *gamma, const real *p,
                                 int B, int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *q = p + (size_t)b * 5;
        real *dq = dp + (size_t)b * 5;
        double gx = 0.5 * (Aw + 1) * ((double)q[0] + 1), gy = 0.5 * (Bh + 1) * ((double)q[1] + 1);
        double v = exp((double)q[2]), delta = stride_scale(Aw, Bh, N) * exp((double)q[3]);
        double dgx = 0, dgy = 0, dd = 0, dv = 0;
        if (dFX)
            fb_rows_bwd(&dgx, &dd, &dv, dFX + (size_t)b * N * Aw, FX + (size_t)b * N * Aw, gx,
                        delta, v, Aw, N);
        if (dFY)
            fb_rows_bwd(&dgy, &dd, &dv, dFY + (size_t)b * N * Bh, FY + (size_t)b * N * Bh, gy,
                        delta, v, Bh, N);
        dq[0] += (real)(dgx * 0.5 * (Aw + 1));
        dq[1] += (real)(dgy * 0.5 * (Bh + 1));
        dq[2] += (real)(dv * v);
        dq[3] += (real)(dd * delta);
        if (dgamma) dq[4] += (real)((double)dgamma[b] * gamma[b]);
    }
}

/* Q (N, Aw) = FY (N, Bh) img (Bh, Aw), in double. */
static void fy_times(double *Q, const real *fy, const real *x, int Aw, int Bh, int N) {
    memset(Q, 0, sizeof(double) * (size_t)N * Aw);
    for (int j = 0; j < N; j++)
        for (int y = 0; y < Bh; y++) {
            const double f = fy[(size_t)j * Bh + y];
            const real *xr = x + (size_t)y * Aw;
            double *q = Q + (size_t)j * Aw;
            for (int a = 0; a < Aw; a++)
                q[a] += f * xr[a];
        }
}

void nb_draw_read_forward(real *out, int ldo, const real *img, const real *FX, const real *FY,
                          const real *gamma, int B, int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *fx = FX + (size_t)b * N * Aw;
        double Q[NB_DRAW_NMAX * NB_DRAW_SIDEMAX];
        fy_times(Q, FY + (size_t)b * N * Bh, img + (size_t)b * Bh * Aw, Aw, Bh, N);
        real *o = out + (size_t)b * ldo;
        for (int j = 0; j < N; j++)
            for (int i = 0; i < N; i++) {
                double s = 0;
                for (int a = 0; a < Aw; a++)
                    s += Q[(size_t)j * Aw + a] * fx[(size_t)i * Aw + a];
                o[j * N + i] = (real)(gamma[b] * s);
            }
    }
}

void nb_draw_read_backward(real *dimg, real *dFX, real *dFY, real *dgamma, const real *dout,
                           const real *out, int ldo, const real *img, const real *FX,
                           const real *FY, const real *gamma, int B, int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *x = img + (size_t)b * Bh * Aw, *fx = FX + (size_t)b * N * Aw,
                   *fy = FY + (size_t)b * N * Bh, *d = dout + (size_t)b * ldo,
                   *o = out + (size_t)b * ldo;
        real *dfx = dFX + (size_t)b * N * Aw, *dfy = dFY + (size_t)b * N * Bh;
        const double g = gamma[b];
        double dg = 0;
        for (int k = 0; k < N * N; k++)
            dg += (double)d[k] * o[k] / g; /* o / gamma = FY x FX^T */
        dgamma[b] += (real)dg;
        /* with dG0 = gamma dout, Q = FY x (N, Aw), S = dG0 FX (N, Aw):
         * dFY[j, y] += sum_a S[j, a] x[y, a];  dFX[i, a] += sum_j dG0[j, i] Q[j, a];
         * dx[y, a] += sum_j FY[j, y] S[j, a] */
        double Q[NB_DRAW_NMAX * NB_DRAW_SIDEMAX], S[NB_DRAW_NMAX * NB_DRAW_SIDEMAX];
        fy_times(Q, fy, x, Aw, Bh, N);
        for (int j = 0; j < N; j++) {
            double *sr = S + (size_t)j * Aw;
            for (int a = 0; a < Aw; a++)
                sr[a] = 0;
            for (int i = 0; i < N; i++) {
                const double di = g * d[j * N + i];
                const real *f = fx + (size_t)i * Aw;
                for (int a = 0; a < Aw; a++)
                    sr[a] += di * f[a];
            }
        }
        for (int j = 0; j < N; j++)
            for (int y = 0; y < Bh; y++) {
                const real *xr = x + (size_t)y * Aw;
                const double *sr = S + (size_t)j * Aw;
                double s = 0;
                for (int a = 0; a < Aw; a++)
                    s += sr[a] * xr[a];
                dfy[(size_t)j * Bh + y] += (real)s;
            }
        for (int i = 0; i < N; i++)
            for (int a = 0; a < Aw; a++) {
                double s = 0;
                for (int j = 0; j < N; j++)
                    s += g * d[j * N + i] * Q[(size_t)j * Aw + a];
                dfx[(size_t)i * Aw + a] += (real)s;
            }
        if (dimg) {
            real *dx = dimg + (size_t)b * Bh * Aw;
            for (int y = 0; y < Bh; y++)
                for (int a = 0; a < Aw; a++) {
                    double s = 0;
                    for (int j = 0; j < N; j++)
                        s += (double)fy[(size_t)j * Bh + y] * S[(size_t)j * Aw + a];
                    dx[(size_t)y * Aw + a] += (real)s;
                }
        }
    }
}

/* M (N, Aw) = w (N, N) FX (N, Aw), in double. */
static void w_times_fx(double *M, const real *w, const real *fx, int Aw, int N) {
    for (int j = 0; j < N; j++) {
        double *m = M + (size_t)j * Aw;
        for (int a = 0; a < Aw; a++)
            m[a] = 0;
        for (int i = 0; i < N; i++) {
            const double wi = w[j * N + i];
            const real *f = fx + (size_t)i * Aw;
            for (int a = 0; a < Aw; a++)
                m[a] += wi * f[a];
        }
    }
}

void nb_draw_write_forward(real *out, const real *w, const real *FX, const real *FY,
                           const real *gamma, int B, int Aw, int Bh, int N, int accumulate) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *fy = FY + (size_t)b * N * Bh;
        double M[NB_DRAW_NMAX * NB_DRAW_SIDEMAX];
        w_times_fx(M, w + (size_t)b * N * N, FX + (size_t)b * N * Aw, Aw, N);
        real *o = out + (size_t)b * Bh * Aw;
        const double ig = 1.0 / gamma[b];
        for (int y = 0; y < Bh; y++) {
            real *orow = o + (size_t)y * Aw;
            double row[NB_DRAW_SIDEMAX];
            for (int a = 0; a < Aw; a++)
                row[a] = 0;
            for (int j = 0; j < N; j++) {
                const double f = fy[(size_t)j * Bh + y];
                const double *m = M + (size_t)j * Aw;
                for (int a = 0; a < Aw; a++)
                    row[a] += f * m[a];
            }
            for (int a = 0; a < Aw; a++) {
                real v = (real)(ig * row[a]);
                orow[a] = accumulate ? orow[a] + v : v;
            }
        }
    }
}

void nb_draw_write_backward(real *dw, real *dFX, real *dFY, real *dgamma, const real *dout,
                            const real *w, const real *FX, const real *FY, const real *gamma, int B,
                            int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *wp = w + (size_t)b * N * N, *fx = FX + (size_t)b * N * Aw,
                   *fy = FY + (size_t)b * N * Bh, *d = dout + (size_t)b * Bh * Aw;
        real *dwp = dw + (size_t)b * N * N, *dfx = dFX + (size_t)b * N * Aw,
             *dfy = dFY + (size_t)b * N * Bh;
        const double ig = 1.0 / gamma[b];
        /* W0 = FY^T w FX, out = W0 / gamma, dW0 = dout / gamma; with M = w FX and E = FY dout
         * (both (N, Aw)):
         * dgamma += -sum dout W0 / gamma^2 = -(1/gamma^2) sum_{j,a} M[j, a] E[j, a]
         * dw[j, i] += (1/gamma) sum_a E[j, a] FX[i, a]
         * dFY[j, y] += (1/gamma) sum_a M[j, a] dout[y, a]
         * dFX[i, a] += (1/gamma) sum_j w[j, i] E[j, a] */
        double M[NB_DRAW_NMAX * NB_DRAW_SIDEMAX], E[NB_DRAW_NMAX * NB_DRAW_SIDEMAX];
        w_times_fx(M, wp, fx, Aw, N);
        fy_times(E, fy, d, Aw, Bh, N);
        double dg = 0;
        for (size_t k = 0; k < (size_t)N * Aw; k++)
            dg -= M[k] * E[k];
        dgamma[b] += (real)(dg * ig * ig);
        for (int j = 0; j < N; j++)
            for (int i = 0; i < N; i++) {
                double s = 0;
                for (int a = 0; a < Aw; a++)
                    s += E[(size_t)j * Aw + a] * fx[(size_t)i * Aw + a];
                dwp[j * N + i] += (real)(ig * s);
            }
        for (int j = 0; j < N; j++)
            for (int y = 0; y < Bh; y++) {
                const double *m = M + (size_t)j * Aw;
                const real *dr = d + (size_t)y * Aw;
                double s = 0;
                for (int a = 0; a < Aw; a++)
                    s += m[a] * dr[a];
                dfy[(size_t)j * Bh + y] += (real)(ig * s);
            }
        for (int i = 0; i < N; i++)
            for (int a = 0; a < Aw; a++) {
                double s = 0;
                for (int j = 0; j < N; j++)
                    s += (double)wp[j * N + i] * E[(size_t)j * Aw + a];
                dfx[(size_t)i * Aw + a] += (real)(ig * s);
            }
    }
}

/* softplus(c) = log(1 + e^c), stable for any c. */
static inline double softplus(double c) {
    return c > 0 ? c + log1p(exp(-c)) : log1p(exp(c));
}

double nb_draw_bce_forward(real *loss, const real *c, const real *x, int B, int D) {
    double total = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int k = 0; k < D; k++) {
            double v = c[(size_t)b * D + k];
            s += softplus(v) - (double)x[(size_t)b * D + k] * v;
        }
        if (loss) loss[b] = (real)s;
        total += s;
    }
    return total;
}

void nb_draw_bce_backward(real *dc, const real *c, const real *x, int B, int D, real scale) {
    for (size_t k = 0; k < (size_t)B * D; k++) {
        double v = c[k], sg = v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
        dc[k] += (real)((double)scale * (sg - (double)x[k]));
    }
}

double nb_draw_latent_forward(real *z, real *kl, const real *mu, const real *ls, const real *eps,
                              int B, int Z) {
    double total = 0;
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int k = 0; k < Z; k++) {
            size_t i = (size_t)b * Z + k;
            double m = mu[i], l = ls[i], sd = exp(l);
            z[i] = (real)(m + sd * (double)eps[i]);
            s += 0.5 * (m * m + sd * sd - 2 * l - 1);
        }
        if (kl) kl[b] += (real)s;
        total += s;
    }
    return total;
}

void nb_draw_latent_backward(real *dmu, real *dls, const real *dz, const real *mu, const real *ls,
                             const real *eps, int B, int Z, real scale) {
    for (size_t i = 0; i < (size_t)B * Z; i++) {
        double sd = exp((double)ls[i]), g = dz ? (double)dz[i] : 0;
        dmu[i] += (real)(g + (double)scale * mu[i]);
        dls[i] += (real)(g * sd * (double)eps[i] + (double)scale * (sd * sd - 1));
    }
}

/* ---- the model --------------------------------------------------------------------------------
 */

#define NO_OFF ((size_t)-1)

static size_t dadd(nb_layout *l, const char *name, size_t n, int *fail) {
    size_t off = nb_layout_add(l, name, n, 1);
    if (off == NO_OFF) *fail = 1;
    return off;
}

static real *dalloc(size_t n, int *fail) {
    real *p = calloc(n ? n : 1, sizeof(real));
    if (!p) *fail = 1;
    return p;
}

int nb_draw_init(nb_draw *m, int Aw, int Bh, int T, int H, int Z, int Nr, int Nw, int attn,
                 int Bmax, const nb_norm_cfg *norm, nb_layout *l, nb_err *err) {
    memset(m, 0, sizeof *m);
    if (Aw < 2 || Bh < 2 || Aw * Bh > 4096 || T < 1 || T > 1024 || H < 1 || Z < 1 || Bmax < 1 ||
        Aw > NB_DRAW_SIDEMAX || Bh > NB_DRAW_SIDEMAX ||
        (attn && (Nr < 2 || Nw < 2 || Nr > NB_DRAW_NMAX || Nw > NB_DRAW_NMAX)))
        return nb_errf(err,
                       "draw: sizes out of range (image %dx%d, %d glimpses, %d units, z %d, read "
                       "%d, write %d, batch %d)",
                       Aw, Bh, T, H, Z, Nr, Nw, Bmax);
    if (nb_fused_kind(norm->kind) == NB_FK_BATCH) {
        nb_errf(err, "draw: batch normalization is not available");
        return nb_hintf(err, "the LSTMs run step by step (each step's input depends on the last "
                             "one's output): use none, weight, layer, rms, prms or dyt");
    }
    m->Aw = Aw, m->Bh = Bh, m->D = Aw * Bh, m->T = T, m->H = H, m->Z = Z;
    m->Nr = Nr, m->Nw = Nw, m->attn = attn, m->Bmax = Bmax;
    m->R = attn ? 2 * Nr * Nr : 2 * m->D;
    m->Cenc = m->R + H;
    m->WO = attn ? Nw * Nw : m->D;
    if (nb_lstm_init(&m->enc, m->Cenc, H, Bmax, T, norm, l, "enc.", err)) return -1;
    if (nb_lstm_init(&m->dec, Z, H, Bmax, T, norm, l, "dec.", err)) {
        nb_lstm_free(&m->enc);
        return -1;
    }
    int fail = 0;
    m->wr = m->br = m->wwa = m->bwa = NO_OFF;
    if (attn) {
        m->wr = dadd(l, "read.W", (size_t)5 * H, &fail);
        m->br = dadd(l, "read.b", 5, &fail);
    }
    m->wmu = dadd(l, "mu.W", (size_t)Z * H, &fail);
    m->bmu = dadd(l, "mu.b", (size_t)Z, &fail);
    m->wls = dadd(l, "ls.W", (size_t)Z * H, &fail);
    m->bls = dadd(l, "ls.b", (size_t)Z, &fail);
    if (attn) {
        m->wwa = dadd(l, "wattn.W", (size_t)5 * H, &fail);
        m->bwa = dadd(l, "wattn.b", 5, &fail);
    }
    m->ww = dadd(l, "write.W", (size_t)m->WO * H, &fail);
    m->bw = dadd(l, "write.b", (size_t)m->WO, &fail);
    if (fail) {
        nb_draw_free(m);
        return nb_errf(err, "draw: the parameter layout is full");
    }
    const size_t TB = (size_t)T * Bmax, D = (size_t)m->D, NA = (size_t)(Nr > Nw ? Nr : Nw);
    m->xe = dalloc(TB * m->Cenc, &fail);
    m->xd = dalloc(TB * Z, &fail);
    m->canvas = dalloc(TB * D + (size_t)Bmax * D, &fail);
    m->xh = dalloc(TB * D, &fail);
    m->rg = dalloc(TB * m->R, &fail);
    m->wpatch = dalloc(TB * m->WO, &fail);
    m->mu = dalloc(TB * Z, &fail);
    m->ls = dalloc(TB * Z, &fail);
    m->z = dalloc((size_t)Bmax * Z, &fail);
    if (attn) {
        m->pr = dalloc(TB * 5, &fail);
        m->fxr = dalloc(TB * Nr * Aw, &fail);
        m->fyr = dalloc(TB * Nr * Bh, &fail);
        m->gr = dalloc(TB, &fail);
        m->pw = dalloc(TB * 5, &fail);
        m->fxw = dalloc(TB * Nw * Aw, &fail);
        m->fyw = dalloc(TB * Nw * Bh, &fail);
        m->gw = dalloc(TB, &fail);
        m->dp = dalloc((size_t)Bmax * 5, &fail);
        m->dfx = dalloc((size_t)Bmax * NA * Aw, &fail);
        m->dfy = dalloc((size_t)Bmax * NA * Bh, &fail);
        m->dg = dalloc((size_t)Bmax, &fail);
    }
    m->dc = dalloc((size_t)Bmax * D, &fail);
    m->dhd = dalloc((size_t)Bmax * H, &fail);
    m->dhd_prev = dalloc((size_t)Bmax * H, &fail);
    m->dhe = dalloc((size_t)Bmax * H, &fail);
    m->dz = dalloc((size_t)Bmax * Z, &fail);
    m->dmu = dalloc((size_t)Bmax * Z, &fail);
    m->dls = dalloc((size_t)Bmax * Z, &fail);
    m->dxe = dalloc((size_t)Bmax * m->Cenc, &fail);
    m->dr = dalloc((size_t)Bmax * m->R, &fail);
    m->dxh = dalloc((size_t)Bmax * D, &fail);
    m->dw = dalloc((size_t)Bmax * m->WO, &fail);
    if (fail) {
        nb_draw_free(m);
        return nb_errf(err, "draw: out of memory (batch %d, %d glimpses, image %dx%d)", Bmax, T, Aw,
                       Bh);
    }
    return 0;
}

void nb_draw_free(nb_draw *m) {
    nb_lstm_free(&m->enc);
    nb_lstm_free(&m->dec);
    real *bufs[] = {m->xe,  m->xd, m->canvas, m->xh,  m->rg,  m->wpatch, m->mu,  m->ls,
                    m->z,   m->pr, m->fxr,    m->fyr, m->gr,  m->pw,     m->fxw, m->fyw,
                    m->gw,  m->dp, m->dfx,    m->dfy, m->dg,  m->dc,     m->dhd, m->dhd_prev,
                    m->dhe, m->dz, m->dmu,    m->dls, m->dxe, m->dr,     m->dxh, m->dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    memset(m, 0, sizeof *m);
}

/* N(0, sd^2) values: DRAW's public code's draw for every weight (jbornschein/draw, train-draw.py:
 * IsotropicGaussian(0.01), biases Constant(0)). */
static void gauss(real *w, size_t n, double sd, nb_rng *rng) {
    for (size_t i = 0; i < n; i++)
        w[i] = (real)(sd * nb_rng_normal(rng));
}

void nb_draw_init_params(nb_draw *m, real *params, nb_rng *rng) {
    nb_lstm_init_params(&m->enc, params, rng);
    nb_lstm_init_params(&m->dec, params, rng);
    const int H = m->H;
    if (m->attn) {
        gauss(params + m->wr, (size_t)5 * H, NB_DRAW_INIT_SD, rng);
        gauss(params + m->wwa, (size_t)5 * H, NB_DRAW_INIT_SD, rng);
        memset(params + m->br, 0, 5 * sizeof(real));
        memset(params + m->bwa, 0, 5 * sizeof(real));
    }
    gauss(params + m->wmu, (size_t)m->Z * H, NB_DRAW_INIT_SD, rng);
    gauss(params + m->wls, (size_t)m->Z * H, NB_DRAW_INIT_SD, rng);
    gauss(params + m->ww, (size_t)m->WO * H, NB_DRAW_INIT_SD, rng);
    memset(params + m->bmu, 0, (size_t)m->Z * sizeof(real));
    memset(params + m->bls, 0, (size_t)m->Z * sizeof(real));
    memset(params + m->bw, 0, (size_t)m->WO * sizeof(real));
}

static inline double sigm(double v) {
    return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
}

double nb_draw_forward(nb_draw *m, const real *x, const real *eps, int B, const real *params) {
    const int T = m->T, H = m->H, Z = m->Z, D = m->D, R = m->R, Ce = m->Cenc, Aw = m->Aw,
              Bh = m->Bh, Nr = m->Nr, Nw = m->Nw;
    m->B = B;
    m->x = x;
    m->eps = eps;
    nb_err err;
    (void)nb_lstm_begin(&m->enc, m->xe, B, T, params, &err); /* sizes checked at init */
    (void)nb_lstm_begin(&m->dec, m->xd, B, T, params, &err);
    memset(m->canvas, 0, (size_t)B * D * sizeof(real));
    m->kl = 0;
    for (int t = 0; t < T; t++) {
        const size_t tb = (size_t)t * B;
        const real *c0 = m->canvas + tb * D, *hprev = nb_lstm_h(&m->dec, t - 1);
        real *xh = m->xh + tb * D, *rg = m->rg + tb * R;
        for (size_t i = 0; i < (size_t)B * D; i++)
            xh[i] = (real)((double)x[i] - sigm(c0[i]));
        if (m->attn) {
            real *p = m->pr + tb * 5, *fx = m->fxr + tb * Nr * Aw, *fy = m->fyr + tb * Nr * Bh,
                 *g = m->gr + tb;
            nb_dense_forward(p, hprev, params + m->wr, params + m->br, B, H, 5);
            nb_draw_filterbank_forward(fx, fy, g, p, B, Aw, Bh, Nr);
            nb_draw_read_forward(rg, R, x, fx, fy, g, B, Aw, Bh, Nr);
            nb_draw_read_forward(rg + Nr * Nr, R, xh, fx, fy, g, B, Aw, Bh, Nr);
        } else {
            for (int b = 0; b < B; b++) {
                memcpy(rg + (size_t)b * R, x + (size_t)b * D, sizeof(real) * D);
                memcpy(rg + (size_t)b * R + D, xh + (size_t)b * D, sizeof(real) * D);
            }
        }
        for (int b = 0; b < B; b++) {
            real *e = m->xe + ((size_t)b * T + t) * Ce;
            memcpy(e, rg + (size_t)b * R, sizeof(real) * R);
            memcpy(e + R, hprev + (size_t)b * H, sizeof(real) * H);
        }
        nb_lstm_step(&m->enc, t, params);
        const real *he = nb_lstm_h(&m->enc, t);
        real *mu = m->mu + tb * Z, *ls = m->ls + tb * Z;
        nb_dense_forward(mu, he, params + m->wmu, params + m->bmu, B, H, Z);
        nb_dense_forward(ls, he, params + m->wls, params + m->bls, B, H, Z);
        for (int b = 0; b < B; b++) /* this step's noise, rows contiguous */
            memcpy(m->dz + (size_t)b * Z, eps + ((size_t)b * T + t) * Z, sizeof(real) * Z);
        m->kl += nb_draw_latent_forward(m->z, NULL, mu, ls, m->dz, B, Z);
        for (int b = 0; b < B; b++)
            memcpy(m->xd + ((size_t)b * T + t) * Z, m->z + (size_t)b * Z, sizeof(real) * Z);
        nb_lstm_step(&m->dec, t, params);
        const real *hd = nb_lstm_h(&m->dec, t);
        real *wp = m->wpatch + tb * m->WO, *c1 = m->canvas + (tb + B) * D;
        nb_dense_forward(wp, hd, params + m->ww, params + m->bw, B, H, m->WO);
        memcpy(c1, c0, sizeof(real) * (size_t)B * D);
        if (m->attn) {
            real *p = m->pw + tb * 5, *fx = m->fxw + tb * Nw * Aw, *fy = m->fyw + tb * Nw * Bh,
                 *g = m->gw + tb;
            nb_dense_forward(p, hd, params + m->wwa, params + m->bwa, B, H, 5);
            nb_draw_filterbank_forward(fx, fy, g, p, B, Aw, Bh, Nw);
            nb_draw_write_forward(c1, wp, fx, fy, g, B, Aw, Bh, Nw, 1);
        } else {
            for (size_t i = 0; i < (size_t)B * D; i++)
                c1[i] += wp[i];
        }
    }
    m->rec = nb_draw_bce_forward(NULL, m->canvas + (size_t)T * B * D, x, B, D);
    return (m->rec + m->kl) / B;
}

void nb_draw_backward(nb_draw *m, real *grads, const real *params) {
    const int B = m->B, T = m->T, H = m->H, Z = m->Z, D = m->D, R = m->R, Ce = m->Cenc, Aw = m->Aw,
              Bh = m->Bh, Nr = m->Nr, Nw = m->Nw;
    const real inv = (real)(1.0 / (m->grad_rows > 0 ? m->grad_rows : B));
    const size_t BD = (size_t)B * D;
    memset(m->dc, 0, sizeof(real) * BD);
    nb_draw_bce_backward(m->dc, m->canvas + (size_t)T * B * D, m->x, B, D, inv);
    memset(m->dhd_prev, 0, sizeof(real) * (size_t)B * H);
    nb_lstm_back_begin(&m->enc);
    nb_lstm_back_begin(&m->dec);
    for (int t = T - 1; t >= 0; t--) {
        const size_t tb = (size_t)t * B;
        /* h_dec_t's gradient from step t+1 (its read and encoder input), then the write */
        memcpy(m->dhd, m->dhd_prev, sizeof(real) * (size_t)B * H);
        memset(m->dhd_prev, 0, sizeof(real) * (size_t)B * H);
        const real *hd = nb_lstm_h(&m->dec, t), *hprev = nb_lstm_h(&m->dec, t - 1);
        const real *wp = m->wpatch + tb * m->WO;
        memset(m->dw, 0, sizeof(real) * (size_t)B * m->WO);
        if (m->attn) {
            const real *fx = m->fxw + tb * Nw * Aw, *fy = m->fyw + tb * Nw * Bh, *g = m->gw + tb;
            memset(m->dfx, 0, sizeof(real) * (size_t)B * Nw * Aw);
            memset(m->dfy, 0, sizeof(real) * (size_t)B * Nw * Bh);
            memset(m->dg, 0, sizeof(real) * (size_t)B);
            memset(m->dp, 0, sizeof(real) * (size_t)B * 5);
            nb_draw_write_backward(m->dw, m->dfx, m->dfy, m->dg, m->dc, wp, fx, fy, g, B, Aw, Bh,
                                   Nw);
            nb_draw_filterbank_backward(m->dp, m->dfx, m->dfy, m->dg, fx, fy, g, m->pw + tb * 5, B,
                                        Aw, Bh, Nw);
            nb_dense_backward(m->dhd, grads + m->wwa, grads + m->bwa, m->dp, hd, params + m->wwa, B,
                              H, 5);
        } else {
            memcpy(m->dw, m->dc, sizeof(real) * BD);
        }
        nb_dense_backward(m->dhd, grads + m->ww, grads + m->bw, m->dw, hd, params + m->ww, B, H,
                          m->WO);
        /* the decoder's step, then the sample and the encoder's step */
        memset(m->dz, 0, sizeof(real) * (size_t)B * Z);
        nb_lstm_step_back(&m->dec, m->dz, Z, m->dhd, t, grads, params);
        const real *mu = m->mu + tb * Z, *ls = m->ls + tb * Z;
        real *e = m->z; /* this step's noise, rows contiguous */
        for (int b = 0; b < B; b++)
            memcpy(e + (size_t)b * Z, m->eps + ((size_t)b * T + t) * Z, sizeof(real) * Z);
        memset(m->dmu, 0, sizeof(real) * (size_t)B * Z);
        memset(m->dls, 0, sizeof(real) * (size_t)B * Z);
        nb_draw_latent_backward(m->dmu, m->dls, m->dz, mu, ls, e, B, Z, inv);
        const real *he = nb_lstm_h(&m->enc, t);
        memset(m->dhe, 0, sizeof(real) * (size_t)B * H);
        nb_dense_backward(m->dhe, grads + m->wmu, grads + m->bmu, m->dmu, he, params + m->wmu, B, H,
                          Z);
        nb_dense_backward(m->dhe, grads + m->wls, grads + m->bls, m->dls, he, params + m->wls, B, H,
                          Z);
        memset(m->dxe, 0, sizeof(real) * (size_t)B * Ce);
        nb_lstm_step_back(&m->enc, m->dxe, Ce, m->dhe, t, grads, params);
        /* the encoder's input: [r_t, h_dec_{t-1}] */
        for (int b = 0; b < B; b++) {
            memcpy(m->dr + (size_t)b * R, m->dxe + (size_t)b * Ce, sizeof(real) * R);
            real *dp = m->dhd_prev + (size_t)b * H;
            const real *s = m->dxe + (size_t)b * Ce + R;
            for (int j = 0; j < H; j++)
                dp[j] += s[j];
        }
        memset(m->dxh, 0, sizeof(real) * BD);
        if (m->attn) {
            const real *fx = m->fxr + tb * Nr * Aw, *fy = m->fyr + tb * Nr * Bh, *g = m->gr + tb;
            const real *rg = m->rg + tb * R;
            memset(m->dfx, 0, sizeof(real) * (size_t)B * Nr * Aw);
            memset(m->dfy, 0, sizeof(real) * (size_t)B * Nr * Bh);
            memset(m->dg, 0, sizeof(real) * (size_t)B);
            memset(m->dp, 0, sizeof(real) * (size_t)B * 5);
            nb_draw_read_backward(NULL, m->dfx, m->dfy, m->dg, m->dr, rg, R, m->x, fx, fy, g, B, Aw,
                                  Bh, Nr);
            nb_draw_read_backward(m->dxh, m->dfx, m->dfy, m->dg, m->dr + Nr * Nr, rg + Nr * Nr, R,
                                  m->xh + tb * D, fx, fy, g, B, Aw, Bh, Nr);
            nb_draw_filterbank_backward(m->dp, m->dfx, m->dfy, m->dg, fx, fy, g, m->pr + tb * 5, B,
                                        Aw, Bh, Nr);
            nb_dense_backward(m->dhd_prev, grads + m->wr, grads + m->br, m->dp, hprev,
                              params + m->wr, B, H, 5);
        } else {
            for (int b = 0; b < B; b++)
                memcpy(m->dxh + (size_t)b * D, m->dr + (size_t)b * R + D, sizeof(real) * D);
        }
        /* xh_t = x - sigmoid(c_{t-1}): c_{t-1} = c_t - write, so dc carries on, plus this */
        const real *c0 = m->canvas + tb * D;
        for (size_t i = 0; i < BD; i++) {
            double s = sigm(c0[i]);
            m->dc[i] -= (real)((double)m->dxh[i] * s * (1 - s));
        }
    }
    /* h_dec before step 0 is the decoder's initial state: its step-0 uses outside the decoder */
    real *dh0 = grads + m->dec.h0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++)
            dh0[j] += m->dhd_prev[(size_t)b * H + j];
    nb_lstm_finish_back(&m->enc, grads, params);
    nb_lstm_finish_back(&m->dec, grads, params);
}

void nb_draw_generate(nb_draw *m, real *probs, real *frames, const real *eps, int B,
                      const real *params) {
    const int T = m->T, H = m->H, Z = m->Z, D = m->D, Aw = m->Aw, Bh = m->Bh, Nw = m->Nw;
    const size_t BD = (size_t)B * D;
    nb_err err;
    (void)nb_lstm_begin(&m->dec, m->xd, B, T, params, &err); /* sizes checked at init */
    m->B = 0; /* the buffers no longer hold a forward */
    memset(m->canvas, 0, BD * sizeof(real));
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++)
            memcpy(m->xd + ((size_t)b * T + t) * Z, eps + ((size_t)b * T + t) * Z,
                   sizeof(real) * Z);
        nb_lstm_step(&m->dec, t, params);
        const real *hd = nb_lstm_h(&m->dec, t);
        real *wp = m->wpatch, *c = m->canvas;
        nb_dense_forward(wp, hd, params + m->ww, params + m->bw, B, H, m->WO);
        if (m->attn) {
            nb_dense_forward(m->pw, hd, params + m->wwa, params + m->bwa, B, H, 5);
            nb_draw_filterbank_forward(m->fxw, m->fyw, m->gw, m->pw, B, Aw, Bh, Nw);
            nb_draw_write_forward(c, wp, m->fxw, m->fyw, m->gw, B, Aw, Bh, Nw, 1);
        } else {
            for (size_t i = 0; i < BD; i++)
                c[i] += wp[i];
        }
        if (frames)
            for (size_t i = 0; i < BD; i++)
                frames[(size_t)t * BD + i] = (real)sigm(c[i]);
    }
    for (size_t i = 0; i < BD; i++)
        probs[i] = (real)sigm(m->canvas[i]);
}
