/* nn/lstm.h — an LSTM layer over whole sequences, forward and backward through time, with every
 * norm, as the attentive reader's code computes it (generic: see nn/nn.h; no guard).
 *
 * Dimension letters: B batch rows, T time steps, C input features, H hidden units, G = 4H
 * gate pre-activations (slices in the code's order i, f, o, c~).
 *
 * Sequences are batch-major: x (B,T,C), out (B,T,H). Row b has len[b] real steps (1 <= len[b]
 * <= T); the steps t >= len[b] are padding: the mask is 0 there and the state is carried over
 * unchanged (c = m*c_new + (1-m)*c_prev, the same for h). With reverse != 0 the row is read
 * backwards within its own length (step t reads position len[b]-1-t while t < len[b]) and each
 * output is written back to the position it read, so out is aligned with x (the code's
 * reverse_realign); padding positions keep their place.
 *
 * The step (a = x·W^T + b over the whole sequence as one GEMM; r = h_prev·U^T as one GEMM per
 * step):
 *   none:     pre = a + r + b                          (b added twice, as the code does)
 *   weight:   the same with W = gW·V/||V||, U = gU·V'/||V'|| per gate unit (an extension)
 *   layer:    pre = LN(a; s1,b1) + LN(r; s2,b2) + b    joint norms over the G values
 *   rms/prms: pre = RMS(a; s1) + RMS(r; s2) + b        (no norm biases; prms: first k values)
 *   batch:    pre = BN(a; s1) + BN(r; s2) + b          statistics over the B rows of this step
 *   dyt, and any row-wise norm without a fused form (docs/numerics.md#norm-modules): as layer,
 *             unfused: the norm's own kernels over the step's (B, G) and (B, H) blocks, each of
 *             N1, N2, N3 with its gain s1/s2/s3, shift b1/b2/b3 (where the norm has one) and
 *             scalars a1/a2/a3 (DyT: "alpha1".."alpha3", one alpha each)
 *   i,f,o = sigmoid, c~ = tanh;  c = f*c_prev + i*c~;  (mask)
 *   h = o * tanh(N3(c))  with N3 = LN(c; s3,b3), RMS(c; s3), BN(c; s3,b3), or identity;  (mask)
 * The stored cell c is the un-normalized one. h0 is a learned vector (tensor "h0"), c0 = 0.
 * BatchNorm always uses the statistics of the batch at hand (the code validates with batch
 * statistics too); its gains start at 0.1 (Cooijmans et al.).
 *
 * Parameters and gradients live in the caller's flat buffers: nb_lstm_init appends this
 * layer's tensors to a layout under a name prefix and remembers their offsets. */

typedef struct nb_lstm {
    int C, H, G, Bmax, Tmax;
    nb_norm_cfg norm;
    int k1, k3; /* pRMSNorm k for the G-wide and H-wide norms */
    /* offsets in the flat buffers; (size_t)-1 when the norm has no such tensor */
    size_t w, u, b, h0, gw, gu, s1, b1, s2, b2, s3, b3;
    size_t a1, a2, a3; /* an unfused norm's scalars (DyT's alpha) at N1, N2, N3 */
    /* state of the last forward, kept for backward */
    int B, T, reverse;
    int *len;       /* (Bmax) */
    NB_REAL *x;     /* the last input (not owned) */
    NB_REAL *xw;    /* (Bmax,Tmax,G) x·W^T + b; reused for its gradient in backward */
    NB_REAL *r, *g; /* (Tmax,Bmax,G) raw r (its gradient in backward), activated gates */
    NB_REAL *c, *h; /* (Tmax+1,Bmax,H) cells and hidden states, index 0 the initial state */
    NB_REAL *tc;    /* (Tmax,Bmax,H) tanh(N3(c)) */
    NB_REAL *m1, *r1, *m2, *r2, *m3, *r3; /* norm statistics: (Tmax,Bmax) or (Tmax,G|H) for BN */
    NB_REAL *n1;                          /* (Bmax,G) scratch: the pre-activations' gradient */
    NB_REAL *n3;                          /* (Bmax,H) scratch: the gradient into N3 */
    NB_REAL *bnc; /* batch only: (6G + 3H) a step's backward coefficients of N1, N2 and N3 */
    NB_REAL *ua, *ud, *ur; /* unfused only: (Bmax,G) a step's a rows, their gradient, scratch */
    NB_REAL *us;           /* unfused only: the norm's statistics, (3, 2, Tmax*Bmax), or NULL */
    NB_REAL *dh, *dc, *dh2, *dc2;         /* (Bmax,H) carries */
    NB_REAL *weff, *ueff, *wnorm, *unorm; /* WeightNorm's effective matrices and row norms */
    NB_REAL *dweff, *dueff;
    int nthr;           /* threads a step's row loop may use (omp_get_max_threads() at init) */
    double *part;       /* (nthr, part_stride) per-thread gain/bias gradient partials */
    size_t part_stride; /* 5G + 2H: s1 b1 s2 b2 b (G each), s3 b3 (H each) */
} nb_lstm;

/* Appends the tensors of an LSTM mapping C inputs to H units to l, their names prefixed by
 * prefix ("enc_d." ...), and allocates the buffers for sequences of up to Bmax rows and Tmax
 * steps. Returns 0, or -1 with err set (sizes out of range, layout full, out of memory). */
int nb_lstm_init(nb_lstm *L, int C, int H, int Bmax, int Tmax, const nb_norm_cfg *norm,
                 nb_layout *l, const char *prefix, nb_err *err);
void nb_lstm_free(nb_lstm *L);

/* Initial values as the code draws them (AR-repo utils.py): each of the four H-wide gate blocks
 * of W is 0.05 x orthogonal when C == H, else uniform +-sqrt(6/(C+H+1)); each block of U is
 * 0.05 x orthogonal; biases and h0 0; norm gains 1 (BatchNorm 0.1), norm biases 0; WeightNorm
 * gains set so that the effective matrices start equal to those draws. */
void nb_lstm_init_params(nb_lstm *L, NB_REAL *params, nb_rng *rng);

/* Runs the layer over x (B,T,C) with per-row lengths len (B), reading rows backwards when
 * reverse. Writes out (B,T,H) when out is not NULL. Keeps what backward needs (x is not
 * copied: it must stay unchanged until backward). B <= Bmax, T <= Tmax, B >= 2 for batch. */
void nb_lstm_forward(nb_lstm *L, NB_REAL *out, const NB_REAL *x, const int *len, int B, int T,
                     int reverse, const NB_REAL *params);

/* The final hidden state (B,H) of the last forward (after all T steps; padding carries the
 * state of the last real step). */
const NB_REAL *nb_lstm_final(const nb_lstm *L);

/* Backward of the last forward: dout (B,T,H) the gradient of out (may be NULL), dfinal (B,H)
 * that of the final state (may be NULL). ACCUMULATES into grads and into dx (B,T,C) (may be
 * NULL: not wanted). */
void nb_lstm_backward(nb_lstm *L, NB_REAL *dx, NB_REAL *grads, const NB_REAL *dout,
                      const NB_REAL *dfinal, const NB_REAL *params);

/* Step by step, for a model whose step inputs depend on earlier outputs (DRAW: the encoder reads
 * with the decoder's last state, the decoder takes the encoder's sample). No padding and no
 * reverse; every kind but batch (refused: its statistics belong to the whole sweep).
 *   begin: B rows of T steps; x is the caller's (B,T,C) input buffer (row b's step t at
 *     x + (b*T + t)*C), filled a step at a time before that step runs and left unchanged until
 *     finish_back (the weight gradient reads all of it). Sets the initial state. Returns 0, or
 *     -1 with err (batch; B or T beyond Bmax or Tmax).
 *   step: step t (t = 0..T-1 in order), reading x's step t rows.
 *   h: the state (B,H), rows contiguous, after step t (t = -1: the initial state); valid until
 *     the next begin.
 * Backward, after all T steps:
 *   back_begin: clears the carries;
 *   step_back: for t = T-1..0 in order; dh (B,H) (may be NULL) is the gradient of h after step t
 *     from outside the layer (not through its later steps: the layer carries those itself).
 *     ACCUMULATES this step's input gradient into dx (B rows at stride ldx; may be NULL), so
 *     that the caller can carry it into its own earlier steps;
 *   dh: the gradient of the state before the last step_back's step (after step_back(0): of
 *     the initial state), carried by the layer;
 *   finish_back: ACCUMULATES the parameter gradients into grads.
 * The arithmetic is nb_lstm_forward's and nb_lstm_backward's, value for value. */
int nb_lstm_begin(nb_lstm *L, const NB_REAL *x, int B, int T, const NB_REAL *params, nb_err *err);
void nb_lstm_step(nb_lstm *L, int t, const NB_REAL *params);
const NB_REAL *nb_lstm_h(const nb_lstm *L, int t);
void nb_lstm_back_begin(nb_lstm *L);
void nb_lstm_step_back(nb_lstm *L, NB_REAL *dx, int ldx, const NB_REAL *dh, int t, NB_REAL *grads,
                       const NB_REAL *params);
const NB_REAL *nb_lstm_dh(const nb_lstm *L);
void nb_lstm_finish_back(nb_lstm *L, NB_REAL *grads, const NB_REAL *params);
