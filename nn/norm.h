/* nn/norm.h — normalization kernels, forward and backward (generic: see nn/nn.h; no guard).
 *
 * Rows of C values, B rows. Conventions (llm.c): outputs first, then what forward caches, then
 * inputs and weights, then dimensions, then the configuration. Backward takes gradients first,
 * then dout, then what forward cached; it ACCUMULATES (+=) into dinp, dg and db, which the
 * caller zeroes. Any of dg/db may be NULL (not wanted); b may be NULL (no bias). Backward reads
 * everything it needs before writing, so dinp may not alias dout, and gains are applied.
 * cfg->eps and cfg->eps_outside select the epsilon and its placement; forward and backward use
 * the same one. Row statistics are computed two-pass (never E[x^2]-E[x]^2), BatchNorm's in
 * one pass of sums shifted by a value near the mean (docs/numerics.md#batch), with explicitly
 * vectorized reductions.
 */

/* LayerNorm over each row: mean (B), rstd (B) cached; rstd is the factor r actually used,
 * r = 1/sqrt(var+eps) or 1/(sqrt(var)+eps). out (B,C), inp (B,C), g (C), b (C). */
void nb_layernorm_forward(NB_REAL *out, NB_REAL *mean, NB_REAL *rstd, const NB_REAL *inp,
                          const NB_REAL *g, const NB_REAL *b, int B, int C, const nb_norm_cfg *cfg);
void nb_layernorm_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, const NB_REAL *dout,
                           const NB_REAL *inp, const NB_REAL *g, const NB_REAL *mean,
                           const NB_REAL *rstd, int B, int C, const nb_norm_cfg *cfg);

/* RMSNorm (k == C) and pRMSNorm (1 <= k < C): r = 1/sqrt(sum_{i<k} x_i^2 / k + eps) (or the
 * eps-outside form) from the FIRST k values, applied to all C values: out = g*x*r (+ b).
 * rstd (B) cached. */
void nb_rmsnorm_forward(NB_REAL *out, NB_REAL *rstd, const NB_REAL *inp, const NB_REAL *g,
                        const NB_REAL *b, int B, int C, int k, const nb_norm_cfg *cfg);
void nb_rmsnorm_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, const NB_REAL *dout,
                         const NB_REAL *inp, const NB_REAL *g, const NB_REAL *rstd, int B, int C,
                         int k, const nb_norm_cfg *cfg);

/* BatchNorm per feature (column) over the B rows.
 * training != 0: batch statistics (biased variance, or unbiased if cfg->bn_unbiased_batch),
 *   cached in mean (C), rstd (C); running_mean/running_var (C) are updated with
 *   cfg->bn_momentum (running var unbiased when cfg->bn_unbiased_running); they may be NULL.
 * training == 0: normalizes with running_mean/running_var; mean/rstd receive the values used.
 * Statistics are accumulated in double. B >= 2 in training (B == 1 has no batch variance:
 * the caller refuses it). */
void nb_batchnorm_forward(NB_REAL *out, NB_REAL *mean, NB_REAL *rstd, NB_REAL *running_mean,
                          NB_REAL *running_var, const NB_REAL *inp, const NB_REAL *g,
                          const NB_REAL *b, int B, int C, int training, const nb_norm_cfg *cfg);
/* training selects the same mode as the forward that produced mean/rstd: in training the
 * statistics depend on inp and the full BN gradient is used; in evaluation they are constants. */
void nb_batchnorm_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, const NB_REAL *dout,
                           const NB_REAL *inp, const NB_REAL *g, const NB_REAL *mean,
                           const NB_REAL *rstd, int B, int C, int training, const nb_norm_cfg *cfg);

/* The same backward passes with dinp written instead of added to (dinp = the input gradient):
 * the caller need not zero dinp, and the kernels do not read it (one pass over memory less;
 * BatchNorm's large outputs are streamed past the cache, as its forward's are). The same
 * values bit for bit as the += form on a zeroed dinp. */
void nb_layernorm_backward_set(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, const NB_REAL *dout,
                               const NB_REAL *inp, const NB_REAL *g, const NB_REAL *mean,
                               const NB_REAL *rstd, int B, int C, const nb_norm_cfg *cfg);
void nb_rmsnorm_backward_set(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, const NB_REAL *dout,
                             const NB_REAL *inp, const NB_REAL *g, const NB_REAL *rstd, int B,
                             int C, int k, const nb_norm_cfg *cfg);
void nb_batchnorm_backward_set(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, const NB_REAL *dout,
                               const NB_REAL *inp, const NB_REAL *g, const NB_REAL *mean,
                               const NB_REAL *rstd, int B, int C, int training,
                               const nb_norm_cfg *cfg);

/* WeightNorm on a dense weight (OC, C): w[o,:] = g[o] * v[o,:] / ||v[o,:]||. vnorm (OC) caches
 * the norms (floored at a tiny positive value so a zero row never divides by zero). */
void nb_weightnorm_forward(NB_REAL *w, NB_REAL *vnorm, const NB_REAL *v, const NB_REAL *g, int OC,
                           int C);
/* From dw (OC, C) accumulates dv (OC, C) and dg (OC). */
void nb_weightnorm_backward(NB_REAL *dv, NB_REAL *dg, const NB_REAL *dw, const NB_REAL *v,
                            const NB_REAL *g, const NB_REAL *vnorm, int OC, int C);
