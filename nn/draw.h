/* nn/draw.h — the pieces of DRAW (Gregor et al. 2015, "DRAW: A Recurrent Neural Network For Image
 * Generation") that are not an LSTM: the differentiable attention (filterbanks, read, write) and
 * the variational bound's terms (generic: see nn/nn.h; no guard). Backward functions ACCUMULATE
 * (+=) into their gradient outputs, as everywhere in nn/.
 *
 * Images are Bh rows of Aw pixels, row-major: x[y * Aw + a]. N is the attention grid's side
 * (DRAW's MNIST model: read N = 2, write N = 5), 2 <= N <= NB_DRAW_NMAX; Aw, Bh <=
 * NB_DRAW_SIDEMAX.
 *
 * Attention parameters (DRAW eqs. 21-25): a dense layer of the decoder state gives, per row,
 * p = (g~X, g~Y, log s2, log d~, log gamma) (B, 5), and
 *   gX = (Aw + 1)/2 (g~X + 1),  gY = (Bh + 1)/2 (g~Y + 1),
 *   delta = (max(Aw, Bh) - 1)/(N - 1) exp(log d~),  s2 = exp(log s2),  gamma = exp(log gamma),
 *   muX_i = gX + (i - N/2 + 0.5) delta,  muY_j = gY + (j - N/2 + 0.5) delta   (i, j = 0..N-1),
 *   FX[i, a] = exp(-(a + 1 - muX_i)^2 / (2 s2)) / ZX_i   (a = 0..Aw-1 the pixel's column: the
 *   paper's coordinates are 1..Aw, so g~X = 0 centres the grid on the image),
 *   FY[j, b] likewise over the rows b = 0..Bh-1,  Z the row's sum + NB_DRAW_FB_EPS. (i - N/2 + 0.5
 *   with i from 0 is the paper's i - N/2 - 0.5 with i from 1.)
 * read:  glimpse = gamma FY x FX^T (N x N), for the image and for the error image alike;
 * write: patch w (N x N) onto the canvas as (1/gamma) FY^T w FX (Bh x Aw).
 *
 * The bound's terms per image (nats):
 *   reconstruction  L_x = sum_pixels softplus(c) - x c   (Bernoulli with logits c = the final
 *                   canvas: sigmoid cross-entropy),
 *   latent          L_z = sum_steps 0.5 sum_k (mu^2 + exp(2 ls) - 2 ls - 1)   (KL of
 *                   N(mu, exp(ls)^2) from N(0, I)), with z = mu + exp(ls) eps (reparameterized:
 *                   eps is an input, so forward is deterministic). */

#define NB_DRAW_FB_EPS 1e-8
/* The kernels' bounds: attention grids up to 16 x 16, image sides up to 64 pixels. */
#define NB_DRAW_NMAX 16
#define NB_DRAW_SIDEMAX 64

/* Filterbanks from p (B, 5): FX (B, N, Aw), FY (B, N, Bh), gamma (B). */
void nb_draw_filterbank_forward(NB_REAL *FX, NB_REAL *FY, NB_REAL *gamma, const NB_REAL *p, int B,
                                int Aw, int Bh, int N);
/* dp (B, 5) += the gradient through FX, FY and gamma of dFX, dFY, dgamma (each may be NULL). */
void nb_draw_filterbank_backward(NB_REAL *dp, const NB_REAL *dFX, const NB_REAL *dFY,
                                 const NB_REAL *dgamma, const NB_REAL *FX, const NB_REAL *FY,
                                 const NB_REAL *gamma, const NB_REAL *p, int B, int Aw, int Bh,
                                 int N);

/* Read one image per row: out (B rows at stride ldo, N*N values each) = gamma FY img FX^T;
 * img (B, Bh*Aw). */
void nb_draw_read_forward(NB_REAL *out, int ldo, const NB_REAL *img, const NB_REAL *FX,
                          const NB_REAL *FY, const NB_REAL *gamma, int B, int Aw, int Bh, int N);
/* Accumulates dimg (may be NULL), dFX, dFY and dgamma from dout (stride ldo); out is the forward's
 * output (gamma > 0 recovers FY img FX^T from it). */
void nb_draw_read_backward(NB_REAL *dimg, NB_REAL *dFX, NB_REAL *dFY, NB_REAL *dgamma,
                           const NB_REAL *dout, const NB_REAL *out, int ldo, const NB_REAL *img,
                           const NB_REAL *FX, const NB_REAL *FY, const NB_REAL *gamma, int B,
                           int Aw, int Bh, int N);

/* Write: out (B, Bh*Aw) = (1/gamma) FY^T w FX, w (B, N*N). ADDS to out when accumulate. */
void nb_draw_write_forward(NB_REAL *out, const NB_REAL *w, const NB_REAL *FX, const NB_REAL *FY,
                           const NB_REAL *gamma, int B, int Aw, int Bh, int N, int accumulate);
/* Accumulates dw, dFX, dFY and dgamma from dout (B, Bh*Aw). */
void nb_draw_write_backward(NB_REAL *dw, NB_REAL *dFX, NB_REAL *dFY, NB_REAL *dgamma,
                            const NB_REAL *dout, const NB_REAL *w, const NB_REAL *FX,
                            const NB_REAL *FY, const NB_REAL *gamma, int B, int Aw, int Bh, int N);

/* Sigmoid cross-entropy of logits c (B, D) against targets x (B, D) in [0, 1]: loss (B) (may be
 * NULL) the per-row sums; returns the sum over rows (double). */
double nb_draw_bce_forward(NB_REAL *loss, const NB_REAL *c, const NB_REAL *x, int B, int D);
/* dc += scale (sigmoid(c) - x). */
void nb_draw_bce_backward(NB_REAL *dc, const NB_REAL *c, const NB_REAL *x, int B, int D,
                          NB_REAL scale);

/* z (B, Z) = mu + exp(ls) eps; kl (B) (may be NULL) += each row's KL; returns the sum of the
 * rows' KL (double). */
double nb_draw_latent_forward(NB_REAL *z, NB_REAL *kl, const NB_REAL *mu, const NB_REAL *ls,
                              const NB_REAL *eps, int B, int Z);
/* Accumulates dmu, dls from dz (may be NULL) and scale times the KL's gradient. */
void nb_draw_latent_backward(NB_REAL *dmu, NB_REAL *dls, const NB_REAL *dz, const NB_REAL *mu,
                             const NB_REAL *ls, const NB_REAL *eps, int B, int Z, NB_REAL scale);

/* ---- the model ------------------------------------------------------------------------------
 * DRAW as the LayerNorm paper's §6.4 uses it (Gregor et al. 2015, eqs. 3-8), for images x of
 * Bh rows of Aw pixels (D = Aw*Bh), T glimpses, encoder and decoder LSTMs of H units (nn/lstm.c,
 * step by step, with the layer's norm: every kind but batch), latent size Z:
 *   c_0 = 0;  h_dec before step 0 = the decoder's learned initial state
 *   for t = 1..T:
 *     xh_t  = x - sigmoid(c_{t-1})
 *     r_t   = read(x, xh_t, h_dec_{t-1}): attention: the two Nr x Nr glimpses (p = W_r h + b_r),
 *             without: [x, xh_t]
 *     h_enc_t = LSTM_enc([r_t, h_dec_{t-1}])
 *     mu_t = W_mu h_enc_t + b_mu,  ls_t = W_ls h_enc_t + b_ls (log sigma),  z_t = mu + e^ls eps_t
 *     h_dec_t = LSTM_dec(z_t)
 *     c_t = c_{t-1} + write(h_dec_t): attention: the Nw x Nw patch W_w h + b_w written with the
 *           filterbank of W_wa h + b_wa; without: W_w h + b_w (D values)
 *   loss = (1/B) sum over images of [ L_x (c_T, x) + sum_t KL_t ]  nats per image (the negative
 *   variational bound), eps given (B rows of T*Z values: row b's step t at eps + (b*T + t)*Z).
 * Parameters (in the caller's layout): "enc." and "dec." (the LSTMs), "read.W", "read.b",
 * "mu.W", "mu.b", "ls.W", "ls.b", "wattn.W", "wattn.b", "write.W", "write.b" (the attention
 * layers only with attention). */
typedef struct nb_draw {
    int Aw, Bh, D, T, H, Z, Nr, Nw, attn, Bmax;
    int R, Cenc, WO; /* read size (2 Nr^2 or 2D), encoder input (R + H), write layer outputs */
    nb_lstm enc, dec;
    size_t wr, br, wmu, bmu, wls, bls, wwa, bwa, ww, bw; /* offsets; (size_t)-1 without attention */
    int B;
    /* > 0: backward's gradient is of the loss summed over the forward's rows divided by this
     * (a data-parallel shard's rows of a larger batch); 0: divided by the forward's rows */
    int grad_rows;
    double rec, kl; /* the last forward's sums over its rows: reconstruction and KL (nats) */
    const NB_REAL *x, *eps;
    NB_REAL *xe, *xd;             /* (Bmax,T,Cenc), (Bmax,T,Z): the LSTMs' inputs */
    NB_REAL *canvas, *xh;         /* (T+1,Bmax,D), (T,Bmax,D) */
    NB_REAL *rg;                  /* (T,Bmax,R) the reads */
    NB_REAL *pr, *fxr, *fyr, *gr; /* (T,Bmax,5), (T,Bmax,Nr,Aw), (T,Bmax,Nr,Bh), (T,Bmax) */
    NB_REAL *pw, *fxw, *fyw, *gw; /* the same for the write, Nw */
    NB_REAL *wpatch;              /* (T,Bmax,WO) the write layer's outputs */
    NB_REAL *mu, *ls, *z;         /* (T,Bmax,Z) */
    /* backward scratch */
    NB_REAL *dc, *dhd, *dhd_prev, *dhe, *dz, *dmu, *dls, *dxe, *dr, *dxh, *dw, *dp, *dfx, *dfy, *dg;
} nb_draw;

/* Appends the model's tensors to l and allocates for batches of up to Bmax. Returns 0, or -1
 * with err (sizes out of range, N < 2 with attention, batch normalization, out of memory). */
int nb_draw_init(nb_draw *m, int Aw, int Bh, int T, int H, int Z, int Nr, int Nw, int attn,
                 int Bmax, const nb_norm_cfg *norm, nb_layout *l, nb_err *err);
void nb_draw_free(nb_draw *m);
/* The LSTMs as nb_lstm_init_params draws them; the dense layers (read and write attention,
 * mu, log sigma, write) N(0, NB_DRAW_INIT_SD^2), biases 0, as DRAW's public code draws every
 * weight (jbornschein/draw, train-draw.py: IsotropicGaussian(0.01), Constant(0)). So the first
 * canvas is near 0 and the first posterior near N(0, I): the initial loss is about D ln 2 (543
 * nats at 28x28) plus a KL of a few tens of nats with a norm in the LSTMs (their states are
 * then larger). Glorot-uniform dense layers gave 2,340 nats per image with layer (KL 1,782:
 * mu and log sigma of order 1 at each of 64 steps), 598 with none. */
#define NB_DRAW_INIT_SD 0.01
void nb_draw_init_params(nb_draw *m, NB_REAL *params, nb_rng *rng);
/* The loss of B <= Bmax images x (B,D) with noise eps; keeps what backward needs (x and eps are
 * not copied: unchanged until backward). Returns the loss (nats per image). */
double nb_draw_forward(nb_draw *m, const NB_REAL *x, const NB_REAL *eps, int B,
                       const NB_REAL *params);
/* ACCUMULATES the gradient of the last forward's loss into grads. */
void nb_draw_backward(nb_draw *m, NB_REAL *grads, const NB_REAL *params);
/* Generation (the model's prior): z_t = eps_t ~ N(0, I) (eps as in forward: B rows of T*Z), the
 * decoder and the writes alone. probs (B,D) receives sigmoid(c_T); frames (T,B,D), when not NULL,
 * sigmoid(c_t) after each step t (the canvas sequence). Uses the model's buffers: a later
 * backward needs a new forward first. B <= Bmax. */
void nb_draw_generate(nb_draw *m, NB_REAL *probs, NB_REAL *frames, const NB_REAL *eps, int B,
                      const NB_REAL *params);
