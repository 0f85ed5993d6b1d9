/* nn/normmath.h — the epsilon placement every norm kernel shares (internal to the generic
 * sources; include after real.h): r from a variance or mean square, and its derivative.
 *
 * r = 1/sqrt(m + eps) (eps inside, everyone's default) or 1/(sqrt(m) + eps) (the RMSNorm
 * authors' PyTorch file), per cfg->eps_outside; forward and backward must use the same one
 * (docs/numerics.md#eps). */
#ifndef NB_NN_NORMMATH_H
#define NB_NN_NORMMATH_H

#include <math.h>

static inline double rstd_of(double m, const nb_norm_cfg *cfg) {
    return cfg->eps_outside ? 1.0 / (sqrt(m) + cfg->eps) : 1.0 / sqrt(m + cfg->eps);
}

/* 2/cnt * dr/dm: the coefficient of (x_i - mu) * sum_j dghat_j (x_j - mu) in dx_i (LN, BN)
 * or of x_i * sum_j dghat_j x_j (RMS), for r computed from m = sumsq/cnt. */
static inline double rstd_coef(double r, double m, double cnt, const nb_norm_cfg *cfg) {
    if (!cfg->eps_outside) return -r * r * r / cnt;
    const double s = sqrt(m);
    return s > 0 ? -r * r / (s * cnt) : 0.0;
}

#endif
