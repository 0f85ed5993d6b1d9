#include "real.h"
/* nn/draw.c — DRAW's attention and bound terms (generic: float and, with -DNB_F64, double; see
 * nn/nn.h). Contracts and formulas in nn/draw.h.
 *
 * Sizes are small (N <= 12, images of a few hundred pixels): plain loops with double
 * accumulators, rows split over threads; each row's arithmetic is the same for any thread count.
 * Nothing is allocated. */

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

void FN(nb_draw_filterbank_forward)(real *FX, real *FY, real *gamma, const real *p, int B, int Aw,
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

void FN(nb_draw_filterbank_backward)(real *dp, const real *dFX, const real *dFY, const real *dgamma,
                                     const real *FX, const real *FY, const real *gamma,
                                     const real *p, int B, int Aw, int Bh, int N) {
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

void FN(nb_draw_read_forward)(real *out, int ldo, const real *img, const real *FX, const real *FY,
                              const real *gamma, int B, int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *x = img + (size_t)b * Bh * Aw, *fx = FX + (size_t)b * N * Aw,
                   *fy = FY + (size_t)b * N * Bh;
        real *o = out + (size_t)b * ldo;
        for (int j = 0; j < N; j++) {
            for (int i = 0; i < N; i++) {
                double s = 0;
                for (int y = 0; y < Bh; y++) {
                    double t = 0;
                    for (int a = 0; a < Aw; a++)
                        t += (double)x[(size_t)y * Aw + a] * fx[(size_t)i * Aw + a];
                    s += (double)fy[(size_t)j * Bh + y] * t;
                }
                o[j * N + i] = (real)(gamma[b] * s);
            }
        }
    }
}

void FN(nb_draw_read_backward)(real *dimg, real *dFX, real *dFY, real *dgamma, const real *dout,
                               const real *out, int ldo, const real *img, const real *FX,
                               const real *FY, const real *gamma, int B, int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *x = img + (size_t)b * Bh * Aw, *fx = FX + (size_t)b * N * Aw,
                   *fy = FY + (size_t)b * N * Bh, *d = dout + (size_t)b * ldo,
                   *o = out + (size_t)b * ldo;
        real *dfx = dFX + (size_t)b * N * Aw, *dfy = dFY + (size_t)b * N * Bh;
        double g = gamma[b], dg = 0;
        for (int k = 0; k < N * N; k++)
            dg += (double)d[k] * o[k] / g; /* o / gamma = FY x FX^T */
        dgamma[b] += (real)dg;
        /* dG0 = gamma dout; dFY[j, y] += sum_i dG0[j, i] (x FX^T)[y, i];
         * dFX[i, a] += sum_j dG0[j, i] (FY x)[j, a]; dx[y, a] += sum_{j,i} FY[j, y] dG0[j, i] FX[i,
         * a] */
        for (int j = 0; j < N; j++) {
            for (int y = 0; y < Bh; y++) {
                const real *xr = x + (size_t)y * Aw;
                double s = 0;
                for (int i = 0; i < N; i++) {
                    double t = 0;
                    for (int a = 0; a < Aw; a++)
                        t += (double)xr[a] * fx[(size_t)i * Aw + a];
                    s += g * d[j * N + i] * t;
                }
                dfy[(size_t)j * Bh + y] += (real)s;
            }
        }
        for (int i = 0; i < N; i++)
            for (int a = 0; a < Aw; a++) {
                double s = 0;
                for (int j = 0; j < N; j++) {
                    double t = 0;
                    for (int y = 0; y < Bh; y++)
                        t += (double)fy[(size_t)j * Bh + y] * x[(size_t)y * Aw + a];
                    s += g * d[j * N + i] * t;
                }
                dfx[(size_t)i * Aw + a] += (real)s;
            }
        if (dimg) {
            real *dx = dimg + (size_t)b * Bh * Aw;
            for (int y = 0; y < Bh; y++)
                for (int a = 0; a < Aw; a++) {
                    double s = 0;
                    for (int j = 0; j < N; j++) {
                        double t = 0;
                        for (int i = 0; i < N; i++)
                            t += (double)d[j * N + i] * fx[(size_t)i * Aw + a];
                        s += (double)fy[(size_t)j * Bh + y] * t;
                    }
                    dx[(size_t)y * Aw + a] += (real)(g * s);
                }
        }
    }
}

void FN(nb_draw_write_forward)(real *out, const real *w, const real *FX, const real *FY,
                               const real *gamma, int B, int Aw, int Bh, int N, int accumulate) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *wp = w + (size_t)b * N * N, *fx = FX + (size_t)b * N * Aw,
                   *fy = FY + (size_t)b * N * Bh;
        real *o = out + (size_t)b * Bh * Aw;
        double ig = 1.0 / gamma[b];
        for (int y = 0; y < Bh; y++)
            for (int a = 0; a < Aw; a++) {
                double s = 0;
                for (int j = 0; j < N; j++) {
                    double t = 0;
                    for (int i = 0; i < N; i++)
                        t += (double)wp[j * N + i] * fx[(size_t)i * Aw + a];
                    s += (double)fy[(size_t)j * Bh + y] * t;
                }
                real v = (real)(ig * s);
                o[(size_t)y * Aw + a] = accumulate ? o[(size_t)y * Aw + a] + v : v;
            }
    }
}

void FN(nb_draw_write_backward)(real *dw, real *dFX, real *dFY, real *dgamma, const real *dout,
                                const real *w, const real *FX, const real *FY, const real *gamma,
                                int B, int Aw, int Bh, int N) {
#pragma omp parallel for schedule(static) if (B >= DRAW_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const real *wp = w + (size_t)b * N * N, *fx = FX + (size_t)b * N * Aw,
                   *fy = FY + (size_t)b * N * Bh, *d = dout + (size_t)b * Bh * Aw;
        real *dwp = dw + (size_t)b * N * N, *dfx = dFX + (size_t)b * N * Aw,
             *dfy = dFY + (size_t)b * N * Bh;
        double ig = 1.0 / gamma[b];
        /* W0 = FY^T w FX, out = W0 / gamma, dW0 = dout / gamma:
         * dw[j, i] += sum_{y,a} FY[j, y] dW0[y, a] FX[i, a]
         * dFY[j, y] += sum_a (w FX)[j, a] dW0[y, a];  dFX[i, a] += sum_y (w^T FY)[i, y] dW0[y, a]
         * dgamma += -sum dout W0 / gamma^2 */
        double dg = 0;
        for (int y = 0; y < Bh; y++)
            for (int a = 0; a < Aw; a++) {
                double s = 0;
                for (int j = 0; j < N; j++) {
                    double t = 0;
                    for (int i = 0; i < N; i++)
                        t += (double)wp[j * N + i] * fx[(size_t)i * Aw + a];
                    s += (double)fy[(size_t)j * Bh + y] * t;
                }
                dg -= (double)d[(size_t)y * Aw + a] * s * ig * ig;
            }
        dgamma[b] += (real)dg;
        for (int j = 0; j < N; j++)
            for (int i = 0; i < N; i++) {
                double s = 0;
                for (int y = 0; y < Bh; y++) {
                    double t = 0;
                    for (int a = 0; a < Aw; a++)
                        t += (double)d[(size_t)y * Aw + a] * fx[(size_t)i * Aw + a];
                    s += (double)fy[(size_t)j * Bh + y] * t;
                }
                dwp[j * N + i] += (real)(ig * s);
            }
        for (int j = 0; j < N; j++)
            for (int y = 0; y < Bh; y++) {
                double s = 0;
                for (int a = 0; a < Aw; a++) {
                    double t = 0;
                    for (int i = 0; i < N; i++)
                        t += (double)wp[j * N + i] * fx[(size_t)i * Aw + a];
                    s += t * d[(size_t)y * Aw + a];
                }
                dfy[(size_t)j * Bh + y] += (real)(ig * s);
            }
        for (int i = 0; i < N; i++)
            for (int a = 0; a < Aw; a++) {
                double s = 0;
                for (int y = 0; y < Bh; y++) {
                    double t = 0;
                    for (int j = 0; j < N; j++)
                        t += (double)wp[j * N + i] * fy[(size_t)j * Bh + y];
                    s += t * d[(size_t)y * Aw + a];
                }
                dfx[(size_t)i * Aw + a] += (real)(ig * s);
            }
    }
}

/* softplus(c) = log(1 + e^c), stable for any c. */
static inline double softplus(double c) {
    return c > 0 ? c + log1p(exp(-c)) : log1p(exp(c));
}

double FN(nb_draw_bce_forward)(real *loss, const real *c, const real *x, int B, int D) {
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

void FN(nb_draw_bce_backward)(real *dc, const real *c, const real *x, int B, int D, real scale) {
    for (size_t k = 0; k < (size_t)B * D; k++) {
        double v = c[k], sg = v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
        dc[k] += (real)((double)scale * (sg - (double)x[k]));
    }
}

double FN(nb_draw_latent_forward)(real *z, real *kl, const real *mu, const real *ls,
                                  const real *eps, int B, int Z) {
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

void FN(nb_draw_latent_backward)(real *dmu, real *dls, const real *dz, const real *mu,
                                 const real *ls, const real *eps, int B, int Z, real scale) {
    for (size_t i = 0; i < (size_t)B * Z; i++) {
        double sd = exp((double)ls[i]), g = dz ? (double)dz[i] : 0;
        dmu[i] += (real)(g + (double)scale * mu[i]);
        dls[i] += (real)(g * sd * (double)eps[i] + (double)scale * (sd * sd - 1));
    }
}
