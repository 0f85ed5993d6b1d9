/* nn/norms/ops.h — one norm's kernels over a (B, C) block, in one precision (generic: see
 * nn/nn.h; no guard). A norm's row of the table (nn/norms/norms.h) holds these for float (ops)
 * and double (ops_f64).
 *
 * forward: out (B, C) from x (B, C). st0, st1: the statistics it caches for its backward (as many
 * as the row's nstats says; per row for a row-wise norm, per feature (C) for one over the batch);
 * run0, run1: running statistics (C, not trainable; a norm with NB_NP_RUNNING); g, b: the
 * per-feature gain and shift (b may be NULL: no shift); s: the site's scalars (nscalars of them;
 * DyT's alpha); training: batch statistics (1) or the running ones (0), for a norm over the batch.
 * backward: dx from dy; ACCUMULATES (+=) into dg, db (may be NULL: not wanted) and ds (the scalars'
 * gradients); dx is added to (set 0) or written without being read (set 1: the same bits as +=
 * on a zeroed dx). dx may not alias dy. The statistics and cfg are those of the forward. */
typedef struct nb_norm_ops {
    void (*forward)(NB_REAL *out, NB_REAL *st0, NB_REAL *st1, NB_REAL *run0, NB_REAL *run1,
                    const NB_REAL *x, const NB_REAL *g, const NB_REAL *b, const NB_REAL *s, int B,
                    int C, int training, const nb_norm_cfg *cfg);
    void (*backward)(NB_REAL *dx, NB_REAL *dg, NB_REAL *db, NB_REAL *ds, const NB_REAL *dy,
                     const NB_REAL *x, const NB_REAL *g, const NB_REAL *s, const NB_REAL *st0,
                     const NB_REAL *st1, int B, int C, int training, const nb_norm_cfg *cfg,
                     int set);
} nb_norm_ops;
