/* nn/optim.h — Adam and gradient clipping over flat buffers (generic: see nn/nn.h; no guard). */

/* One Adam step at time t >= 1 (t counts steps taken including this one) over n values:
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
 *   lr_t per cfg->bias;   p -= lr_t * m / (sqrt(v)+eps)   or  m / sqrt(v+eps) (eps_inside).
 * Moments are kept in NB_REAL. Parallel and vectorized; deterministic for a given thread count
 * (elementwise, so for any). */
void nb_adam_step(NB_REAL *p, const NB_REAL *g, NB_REAL *m, NB_REAL *v, size_t n, long t,
                  const nb_adam_cfg *cfg);

/* Adam over a layout: only trainable tensors are updated. */
void nb_adam_step_layout(NB_REAL *p, const NB_REAL *g, NB_REAL *m, NB_REAL *v, const nb_layout *l,
                         long t, const nb_adam_cfg *cfg);

/* L2 norm of n values, accumulated in double. */
double nb_l2norm(const NB_REAL *x, size_t n);

/* Global clipping: if the L2 norm of all trainable gradients exceeds maxnorm, scale every one
 * by maxnorm/norm. Returns the norm before clipping. */
double nb_clip_global(NB_REAL *g, const nb_layout *l, double maxnorm);

/* Per-tensor clipping: each trainable tensor whose gradient norm exceeds maxnorm is scaled to
 * maxnorm. Returns the largest tensor norm before clipping. */
double nb_clip_per_tensor(NB_REAL *g, const nb_layout *l, double maxnorm);
