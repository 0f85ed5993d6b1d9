/* nn/norms/dyt.h — DyT (Dynamic Tanh, Zhu, Chen, He, LeCun, Liu, CVPR 2025), forward and backward
 * (generic: see nn/nn.h; no guard).
 *
 * y = g ⊙ tanh(alpha · x) + b over B rows of C values: alpha one scalar, g and b (C) per
 * feature. Conventions as nn/norm.h: forward caches nothing (backward recomputes tanh from inp,
 * which costs no more memory traffic than reading a cached tanh); backward ACCUMULATES (+=) into
 * dinp, dg, db and *dalpha, which the caller zeroes; the _set form writes dinp instead (not read;
 * the same bits as += on a zeroed dinp). b, dg, db and dalpha may be NULL (no bias; not wanted).
 * dg, db and dalpha are summed in an order fixed by B alone (groups of rows, each summed in row
 * order, the groups added in order in double): the same bits for any thread count. Formulas and
 * the float tanh in docs/numerics.md#dyt. */

void nb_dyt_forward(NB_REAL *out, const NB_REAL *inp, const NB_REAL *g, const NB_REAL *b,
                    NB_REAL alpha, int B, int C);
void nb_dyt_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, NB_REAL *dalpha, const NB_REAL *dout,
                     const NB_REAL *inp, const NB_REAL *g, NB_REAL alpha, int B, int C);
void nb_dyt_backward_set(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, NB_REAL *dalpha,
                         const NB_REAL *dout, const NB_REAL *inp, const NB_REAL *g, NB_REAL alpha,
                         int B, int C);
