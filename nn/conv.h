/* nn/conv.h — convolutional layers on NCHW maps (generic: see nn/nn.h; no guard).
 *
 * Dimension letters: N images, C input channels, H x W input map, OC output channels,
 * OH x OW output map, KS square kernel size, S = H*W spatial positions.
 * Conventions as nn/norm.h: outputs, cache, inputs/weights, dims. Backward ACCUMULATES (+=)
 * into weight gradients; whether it accumulates into or overwrites dinp is the `acc` argument
 * (overwriting spares a pass that zeroes a buffer of tens of megabytes per layer). */

/* 2-D convolution, stride 1, zero padding pad on every side, no bias:
 *   out[n,o,i,j] = sum_{c,a,b} w[o,c,a,b] * inp[n,c,i+a-pad,j+b-pad];
 *   OH = H + 2 pad - KS + 1, OW likewise.
 * KS x KS kernels go through im2col + one gemm per group of images (groups of images whose
 * outputs are small share one gemm, so that thin gemms are avoided), parallel across groups
 * (each thread owns one scratch area and calls the single-threaded gemm that OpenBLAS runs
 * inside a parallel region); 1x1 kernels without padding need no im2col.
 * scratch: nscratch areas of nb_conv2d_scratch(...) values each (one per thread used). */
size_t nb_conv2d_scratch(int C, int H, int W, int OC, int KS, int pad);
/* exact != 0: one gemm per image (and the dense case row by row in double), so that an image's
 * output does not depend on how many images are computed with it (a gemm's kernels, chosen by
 * its shape, round differently); else images of small maps are grouped into wider gemms. */
void nb_conv2d_forward(NB_REAL *out, NB_REAL *scratch, int nscratch, const NB_REAL *inp,
                       const NB_REAL *w, int N, int C, int H, int W, int OC, int KS, int pad,
                       int exact);
/* dinp (N,C,H,W) (may be NULL: not wanted, e.g. the first layer); acc != 0 adds to it, else
 * overwrites it. dw (OC, C*KS*KS) accumulates: through nscratch per-thread partial sums held at
 * the end of each scratch area, added in thread order (deterministic for a thread count).
 * dwd != NULL: dw is left alone and the weight gradient is added to dwd (OC*K doubles) instead,
 * image by image: each image's product in its own gemm (dinp's too, as the exact forward), the
 * images summed in double (per-thread partials in dpart, nscratch*OC*K doubles, then in thread
 * order), so that the sum no longer depends on how the images are grouped, threaded or split over
 * processes (to the last bit of the float result but for ties at ~1e-16). */
void nb_conv2d_backward(NB_REAL *dinp, NB_REAL *dw, double *dwd, double *dpart, NB_REAL *scratch,
                        int nscratch, const NB_REAL *dout, const NB_REAL *inp, const NB_REAL *w,
                        int N, int C, int H, int W, int OC, int KS, int pad, int acc);

/* The same in a precision of nn/gemm_bf16.h: NB_PREC_FP32 (the functions above), or
 * NB_PREC_BF16 (float only; needs nb_cpu_has_bf16()): every product (forward, data gradient,
 * weight gradient; the dense case's too) takes its inputs rounded to bfloat16 and accumulates in
 * float (nb_gemm_bf16); with dwd the dense case's weight gradient sums the rounded inputs'
 * products in double. The exact modes keep their promise: the bfloat16 product of a row does not
 * depend on the rows around it. The double instantiation ignores prec. */
void nb_conv2d_forward_prec(NB_REAL *out, NB_REAL *scratch, int nscratch, const NB_REAL *inp,
                            const NB_REAL *w, int N, int C, int H, int W, int OC, int KS, int pad,
                            int exact, int prec);
void nb_conv2d_backward_prec(NB_REAL *dinp, NB_REAL *dw, double *dwd, double *dpart,
                             NB_REAL *scratch, int nscratch, const NB_REAL *dout,
                             const NB_REAL *inp, const NB_REAL *w, int N, int C, int H, int W,
                             int OC, int KS, int pad, int acc, int prec);

/* Winograd F(m x m, 3 x 3) convolution (nn/winograd.c), m = 2 or 4: the same contracts as
 * nb_conv2d_forward/backward for 3x3 kernels with pad 0 or 1 (nb_wino_fits), computed per m x m
 * output tile in the transformed domain (fewer multiplications; the transforms round
 * differently: docs/numerics.md#winograd). exact: blocks of tiles never span two images, the
 * weight gradient's per-block products summed in double (in the scratch), added to dwd, so that
 * an image's results do not depend on the grouping or threads. scratch:
 * nb_wino_scratch(m, C, OC, nthreads) values. */
int nb_wino_fits(int KS, int H, int W, int pad);
size_t nb_wino_scratch(int m, int C, int OC, int nthreads);
void nb_wino_forward(NB_REAL *out, NB_REAL *scratch, int nthreads, const NB_REAL *inp,
                     const NB_REAL *w, int N, int C, int H, int W, int OC, int pad, int m,
                     int exact);
void nb_wino_backward(NB_REAL *dinp, NB_REAL *dw, double *dwd, NB_REAL *scratch, int nthreads,
                      const NB_REAL *dout, const NB_REAL *inp, const NB_REAL *w, int N, int C,
                      int H, int W, int OC, int pad, int m, int acc);

/* 2x2 max pooling, stride 2: out (N,C,H/2,W/2) (a last odd row or column is dropped, as
 * lasagne's ignore_border); arg (N,C,H/2,W/2) caches which of the four won (first on ties). */
void nb_maxpool2_forward(NB_REAL *out, unsigned char *arg, const NB_REAL *inp, int N, int C, int H,
                         int W);
/* dinp (N,C,H,W): acc != 0 adds, else overwrites (positions that never win get 0). */
void nb_maxpool2_backward(NB_REAL *dinp, const NB_REAL *dout, const unsigned char *arg, int N,
                          int C, int H, int W, int acc);

/* Global average pooling over the S = H*W positions: out (N,C). Backward adds dout/S. */
void nb_gap_forward(NB_REAL *out, const NB_REAL *inp, int N, int C, int S);
void nb_gap_backward(NB_REAL *dinp, const NB_REAL *dout, int N, int C, int S);

/* Inverted dropout over n values in `rows` equal rows (e.g. one per image): a value is kept
 * with probability 1-p and then scaled by 1/(1-p); mask (n) receives 0 or 1/(1-p). Random bits
 * come from one draw of rng per call, split into a stream per row, so the mask does not depend
 * on the thread count. 0 <= p < 1. out may alias inp. */
void nb_dropout_forward(NB_REAL *out, NB_REAL *mask, const NB_REAL *inp, size_t n, int rows,
                        double p, nb_rng *rng);
/* The same for rows row0.. of a larger batch (a data-parallel shard): row r draws from the
 * stream of row row0 + r, so that a row's mask does not depend on how the batch is split. */
void nb_dropout_forward_at(NB_REAL *out, NB_REAL *mask, const NB_REAL *inp, size_t n, int rows,
                           int row0, double p, nb_rng *rng);
void nb_gauss_noise_forward_at(NB_REAL *out, const NB_REAL *inp, size_t n, int rows, int row0,
                               double sigma, nb_rng *rng);
/* dinp += dout * mask. */
void nb_dropout_backward(NB_REAL *dinp, const NB_REAL *dout, const NB_REAL *mask, size_t n);

/* Additive Gaussian noise: out = inp + sigma * N(0,1), streams per row as dropout. out may alias
 * inp. Its backward is the identity. */
void nb_gauss_noise_forward(NB_REAL *out, const NB_REAL *inp, size_t n, int rows, double sigma,
                            nb_rng *rng);

/* ---- normalizations on maps ----------------------------------------------------------------
 * x (N, C, S). Each fused with a per-channel gain g (C) and bias b (C) and a leaky ReLU of slope
 * alpha (alpha == 1: identity):  out = act(g[c] * xhat + b[c]).
 * Backward takes the forward OUTPUT `out` for the activation's slope (out > 0 ? 1 : alpha, as
 * nb_leaky_relu_backward), accumulates dg and db (either may be NULL; where dgd/dbd are given,
 * the sums go there in double instead, each image's sum taken on its own, so that the result
 * does not depend on how the images are split over processes), and adds to (acc != 0)
 * or overwrites dinp. dinp may alias dout when acc == 0 (each value of dout is read before the
 * same position of dinp is written).
 *
 * Layer/RMS/pRMS statistics run over groups of gc consecutive channels x S positions of one
 * image (gc = 1: per example per channel over H x W, the RMSNorm paper's CIFAR setting;
 * gc = C: over C x H x W), i.e. over rows of L = gc*S contiguous values. mean and rstd
 * (N*C/gc) are cached per row. pRMS uses the first k values of each row (1 <= k <= L). */
void nb_map_layernorm_forward(NB_REAL *out, NB_REAL *mean, NB_REAL *rstd, const NB_REAL *inp,
                              const NB_REAL *g, const NB_REAL *b, int N, int C, int S, int gc,
                              NB_REAL alpha, const nb_norm_cfg *cfg);
void nb_map_layernorm_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, double *dgd, double *dbd,
                               const NB_REAL *dout, const NB_REAL *out, const NB_REAL *inp,
                               const NB_REAL *g, const NB_REAL *mean, const NB_REAL *rstd, int N,
                               int C, int S, int gc, NB_REAL alpha, int acc,
                               const nb_norm_cfg *cfg);
void nb_map_rmsnorm_forward(NB_REAL *out, NB_REAL *rstd, const NB_REAL *inp, const NB_REAL *g,
                            const NB_REAL *b, int N, int C, int S, int gc, int k, NB_REAL alpha,
                            const nb_norm_cfg *cfg);
void nb_map_rmsnorm_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, double *dgd, double *dbd,
                             const NB_REAL *dout, const NB_REAL *out, const NB_REAL *inp,
                             const NB_REAL *g, const NB_REAL *rstd, int N, int C, int S, int gc,
                             int k, NB_REAL alpha, int acc, const nb_norm_cfg *cfg);

/* BatchNorm per channel over N x S values (statistics in double). training != 0: batch
 * statistics (biased variance) cached in mean/rstd (C), running_mean/running_var (C) updated
 * with cfg->bn_momentum, the running variance scaled by N/(N-1) when cfg->bn_unbiased_running
 * (N the number of images, as the WeightNorm code does even for conv maps); they may be NULL.
 * training == 0: the running values are used (and stored in mean/rstd). */
void nb_map_batchnorm_forward(NB_REAL *out, NB_REAL *mean, NB_REAL *rstd, NB_REAL *running_mean,
                              NB_REAL *running_var, const NB_REAL *inp, const NB_REAL *g,
                              const NB_REAL *b, int N, int C, int S, int training, NB_REAL alpha,
                              const nb_norm_cfg *cfg);
void nb_map_batchnorm_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, double *dgd, double *dbd,
                               const NB_REAL *dout, const NB_REAL *out, const NB_REAL *inp,
                               const NB_REAL *g, const NB_REAL *mean, const NB_REAL *rstd, int N,
                               int C, int S, int training, NB_REAL alpha, int acc);
/* Training backward over the global batch (cfg->bn_sum, data-parallel --bn-sync; the forward
 * took its statistics over it too): dg and db from these rows, the terms of dinp from the sums
 * over every process's rows (each image's sums in float, then over the images in double, as
 * nb_map_batchnorm_backward takes them). dinp may alias dout; written (not accumulated). */
void nb_map_batchnorm_sync_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, double *dgd,
                                    double *dbd, const NB_REAL *dout, const NB_REAL *out,
                                    const NB_REAL *inp, const NB_REAL *g, const NB_REAL *mean,
                                    const NB_REAL *rstd, int N, int C, int S, NB_REAL alpha,
                                    const nb_norm_cfg *cfg);

/* No statistics: out = act(g[c] * x + b[c]) (g may be NULL: 1). For WeightNorm and the
 * baseline, whose scale lives in the weights. */
void nb_map_affine_forward(NB_REAL *out, const NB_REAL *inp, const NB_REAL *g, const NB_REAL *b,
                           int N, int C, int S, NB_REAL alpha);
void nb_map_affine_backward(NB_REAL *dinp, NB_REAL *dg, NB_REAL *db, double *dgd, double *dbd,
                            const NB_REAL *dout, const NB_REAL *out, const NB_REAL *inp,
                            const NB_REAL *g, int N, int C, int S, NB_REAL alpha, int acc);
