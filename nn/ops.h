/* nn/ops.h — dense layer, activations, loss (generic: see nn/nn.h; no guard).
 * Conventions as nn/norm.h: outputs, cache, inputs/weights, dims; backward accumulates (+=). */

/* out (B,OC) = inp (B,C) · w(OC,C)^T + bias (OC); bias may be NULL. One BLAS gemm. */
void nb_dense_forward(NB_REAL *out, const NB_REAL *inp, const NB_REAL *w, const NB_REAL *bias,
                      int B, int C, int OC);
/* Accumulates dinp (B,C) (may be NULL: not wanted, e.g. the first layer), dw (OC,C) and
 * dbias (OC) (may be NULL). */
void nb_dense_backward(NB_REAL *dinp, NB_REAL *dw, NB_REAL *dbias, const NB_REAL *dout,
                       const NB_REAL *inp, const NB_REAL *w, int B, int C, int OC);

/* Accumulates db[c] += the sum over `rows` rows of dy[row, c] (dy is rows x C): a bias's
 * gradient. Rows are added in groups of 8 in float, each group's sum into a double accumulator;
 * column blocks per thread, so the result does not depend on the thread count. */
void nb_col_sums(NB_REAL *db, const NB_REAL *dy, int rows, int C);

/* Elementwise activations over N values. Forward may run in place (out == inp). Backward
 * takes the forward OUTPUT `out` (all four are expressible through it: relu/leaky use its
 * sign, tanh 1-out^2, sigmoid out(1-out)) and accumulates into dinp. */
void nb_relu_forward(NB_REAL *out, const NB_REAL *inp, size_t N);
void nb_relu_backward(NB_REAL *dinp, const NB_REAL *dout, const NB_REAL *out, size_t N);
void nb_leaky_relu_forward(NB_REAL *out, const NB_REAL *inp, size_t N, NB_REAL alpha);
void nb_leaky_relu_backward(NB_REAL *dinp, const NB_REAL *dout, const NB_REAL *out, size_t N,
                            NB_REAL alpha);
void nb_tanh_forward(NB_REAL *out, const NB_REAL *inp, size_t N);
void nb_tanh_backward(NB_REAL *dinp, const NB_REAL *dout, const NB_REAL *out, size_t N);
void nb_sigmoid_forward(NB_REAL *out, const NB_REAL *inp, size_t N);
void nb_sigmoid_backward(NB_REAL *dinp, const NB_REAL *dout, const NB_REAL *out, size_t N);

/* Softmax cross-entropy, numerically stable (max subtracted, log-sum-exp).
 * probs (B,V) receives the softmax; losses (B) the per-row -log p[target] (may be NULL).
 * Returns the mean loss over the B rows (accumulated in double). targets (B) in [0, V). */
double nb_softmax_xent_forward(NB_REAL *probs, NB_REAL *losses, const NB_REAL *logits,
                               const int *targets, int B, int V);
/* Gradient of the MEAN loss: dlogits (B,V) += (probs - onehot(target)) / B. */
void nb_softmax_xent_backward(NB_REAL *dlogits, const NB_REAL *probs, const int *targets, int B,
                              int V);
/* The same for B rows of a batch of N (a data-parallel shard): += (probs - onehot) / N. */
void nb_softmax_xent_backward_over(NB_REAL *dlogits, const NB_REAL *probs, const int *targets,
                                   int B, int V, int N);
