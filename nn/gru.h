/* nn/gru.h — a GRU layer as the order-embedding code computes it, with every norm, forward and
 * backward through time with masks (generic: see nn/nn.h; no guard).
 *
 * Dimension letters: T time steps, B batch rows, E input features, H hidden units. A sequence
 * is time-major and each step batch-major: x (T, B, E), mask (T, B), states (T+1, B, H) with
 * h[0] = 0. Row t*B + b of a (T*B, .) array is step t of sequence b.
 *
 * Parameters, in the (out, in) layout of nb_dense (y = x·W^T), with the three gate blocks
 * stacked as [r | u | candidate] (docs/papers.md#order-model: r the first half of W, u the second):
 *   Wc (3H, E) = [W^T ; Wx^T], bc (3H) = [b ; bx]    the input projections and their biases
 *   Uc (3H, H) = [U^T ; Ux^T]                          the recurrent projections
 * One step (code form, §3.3/§3.4), with xp = x·Wc^T + bc (all T steps in ONE gemm) and
 * hp = h·Uc^T (one gemm per step), Nx and Nh the input- and recurrent-side norms:
 *   xn = Nx(xp), hn = Nh(hp);  r = σ(xn_r + hn_r), u = σ(xn_u + hn_u)
 *   h~ = tanh(r ⊙ hn_c + xn_c);  h' = u ⊙ h + (1−u) ⊙ h~;  h ← m·h' + (1−m)·h
 * Norms, per kind:
 *   none:   Nx, Nh are the identity (the OE code's GRU).
 *   layer:  four LayerNorms per step as lngru_layer: LN1 over the 2H gate part of xp (b inside
 *           the norm), LN2 over its H candidate part (bx inside), LN3 over the 2H gate part of
 *           hp, LN4 over its H candidate part; each its own gain (init 1) and post-norm bias
 *           (init 0). Stored concatenated: gx = [s1 ; s2], bx_post = [b1 ; b2] (3H), gh, bh.
 *   rms:    the same four places with RMSNorm (rlngru_layer): gains only, no post-norm bias.
 *   prms:   as rms with the RMS from the first k = nb_prms_k(n, p, p_floor) values of each of
 *           the four vectors (n = 2H or H). NOT in the papers' released code
 *           (docs/papers.md#prmsnorm).
 *   batch:  EXTENSION, not in the papers: recurrent BatchNorm (Cooijmans et al.) in the same
 *           four places, per column over the B rows with statistics per time step; gains 1,
 *           biases 0; running averages per time step (the last slot serves later steps) for
 *           evaluation. Masked rows take part in the statistics.
 *   weight: EXTENSION: WeightNorm on Wc and Uc per output unit (row), g initialised to the
 *           row norms so that the initial weights are those of `none`; biases bc as none.
 *   dyt, and any row-wise norm without a fused form (docs/numerics.md#norm-modules): EXTENSION,
 *           unfused: the norm's own kernels (nn/norms/ops.h) over each side's whole 3H row, two
 *           sites (Nx, Nh), each with its gain gx/gh, its shift bx/bh (where the norm has one)
 *           and its scalars ax/ah (DyT: "alpha_x", "alpha_h", one alpha each).
 * Forward caches the pre-norm values and row (or column) statistics; backward ACCUMULATES
 * into the gradient buffer.
 *
 * Step-wise use (a conditional GRU, where a step's input or starting state comes from outside):
 * nb_gru_begin, then nb_gru_input for the steps whose inputs are known (all at once or one at a
 * time), nb_gru_step for each step t = 0..T-1 in order from any starting state; backward:
 * nb_gru_step_back for t = T-1..0, then nb_gru_finish_back. nb_gru_forward/backward are exactly
 * these calls over a plain sequence starting from h = 0. */

typedef struct nb_gru {
    int E, H, Tmax, Bmax;
    nb_norm_cfg norm;
    int k2, k1; /* pRMSNorm k for the 2H and H parts (the norm's width otherwise) */
    int bn_slots;
    /* offsets into the owner's flat parameter buffer; (size_t)-1 when absent */
    size_t wc, bc, uc, gx, bx, gh, bh, wgx, wgh, rmx, rvx, rmh, rvh;
    size_t ax, ah; /* an unfused norm's scalars (DyT's alpha), input and recurrent side */
    /* forward caches (sized for Tmax, Bmax) */
    NB_REAL *xp, *xn;    /* (T*B, 3H) pre-norm and normalized input side (xn == xp: none) */
    NB_REAL *hp, *hn;    /* (T*B, 3H) recurrent side, likewise */
    NB_REAL *r, *u, *hc; /* (T*B, H) gates and candidate h~ */
    NB_REAL *h;          /* (T+1, B, H) states, h[0] = 0 */
    NB_REAL *sx, *sh;    /* (T*B, 4): mean and rstd of the 2H part, then of the H part */
    NB_REAL *bmx, *brx;  /* BN: (T, 3H) mean and rstd of each step, input side */
    NB_REAL *bmh, *brh;  /* BN: recurrent side */
    NB_REAL *ux, *uh;    /* an unfused norm's statistics (T*B, nstats) per side, or NULL */
    NB_REAL *wce, *uce, *wnx, *wnh; /* WN: effective weights (3H,E), (3H,H); row norms (3H) */
    /* backward scratch */
    NB_REAL *dxn, *dxp, *dhn, *dhp; /* (T*B, 3H) */
    NB_REAL *dh, *dtmp;             /* (B, H) */
    NB_REAL *dwce, *duce;           /* WN: gradients of the effective weights */
    const NB_REAL *x, *mask;        /* the last forward's inputs (not owned) */
    int T, B, training;
    int bias_state;      /* 0: bc added on the input side, inside Nx (default); 1: on the recurrent
                            side, inside Nh (Nematus' nematus_compat, its decoder's second GRU) */
    int input_back_done; /* set by nb_gru_input_back: finish_back leaves the input side's dx */
    int bn_offset; /* BN: step t uses running-statistics slot t + bn_offset (step-wise decoding) */
} nb_gru;

/* Sizes the layer (E, H >= 1; Tmax, Bmax: the largest sequence length and batch a forward may
 * use) and appends its tensors to layout (names prefixed by prefix). Allocates the caches.
 * Returns 0, or -1 with err set. */
int nb_gru_setup(nb_gru *g, nb_layout *layout, const char *prefix, int E, int H, int Tmax, int Bmax,
                 const nb_norm_cfg *norm, nb_err *err);
void nb_gru_free(nb_gru *g);

/* Initialises the layer's tensors in params as the OE code does: Wc uniform ±0.1, Uc three
 * orthogonal H×H blocks (QR of a Gaussian matrix), biases 0, gains 1, BN running mean 0 and
 * variance 1, WN gains = the row norms. Returns 0, or -1 with err set (LAPACK failure). */
int nb_gru_init_params(nb_gru *g, NB_REAL *params, nb_rng *rng, nb_err *err);

/* Forward over T <= Tmax steps of B <= Bmax sequences: x (T, B, E), mask (T, B) with values 0
 * or 1 (NULL: all 1). training selects BN batch statistics (and updates the running averages
 * in params; nothing else in params is written).
 * The final states are g->h + T*B*H (B, H). x and mask must stay valid until backward. */
void nb_gru_forward(nb_gru *g, NB_REAL *params, const NB_REAL *x, const NB_REAL *mask, int T, int B,
                    int training);

/* The final states (B, H) of the last forward. */
const NB_REAL *nb_gru_last(const nb_gru *g);

/* Backward of the last forward, from dhT (B, H), the gradient of the final states (no
 * gradient reaches intermediate states from outside). ACCUMULATES into grads (the layer's
 * tensors) and into dx (T, B, E) when dx is not NULL. */
void nb_gru_backward(nb_gru *g, NB_REAL *grads, NB_REAL *dx, const NB_REAL *params,
                     const NB_REAL *dhT);

/* Backward with gradients reaching every state: dhs (T, B, H) the gradients of the states
 * h[1..T] (the step outputs; may be NULL), dhT an extra gradient of the final one (may be
 * NULL). ACCUMULATES into grads and dx (when not NULL). */
void nb_gru_backward_seq(nb_gru *g, NB_REAL *grads, NB_REAL *dx, const NB_REAL *params,
                         const NB_REAL *dhT, const NB_REAL *dhs);

/* Step-wise API (see the top). begin: T <= Tmax steps of B <= Bmax rows (WeightNorm's effective
 * weights are drawn here). input: the input side of steps [t0, t0+nt) from x (T, B, E), whose
 * rows of those steps must stay valid until finish_back (x is the whole (T, B, E) array: the
 * weight gradient reads all of it). step: step t from hprev (B, H; NULL: zero state) to hout
 * (B, H), which may not alias hprev; mask (B) or NULL; h[t] keeps a copy of hprev. */
void nb_gru_begin(nb_gru *g, const NB_REAL *params, int T, int B, int training);
void nb_gru_input(nb_gru *g, NB_REAL *params, const NB_REAL *x, int t0, int nt);
void nb_gru_step(nb_gru *g, NB_REAL *params, int t, const NB_REAL *hprev, NB_REAL *hout,
                 const NB_REAL *mask);
/* From dh (B, H), the gradient of step t's output, ACCUMULATES the gradient of its starting state
 * into dhprev (B, H; not aliasing dh) and BN gain/bias gradients into grads; mask as in step. */
void nb_gru_step_back(nb_gru *g, NB_REAL *grads, const NB_REAL *params, int t, const NB_REAL *dh,
                      NB_REAL *dhprev, const NB_REAL *mask);
/* After the step_backs: the weight, gain and bias gradients, and dx (T, B, E) when not NULL
 * (all ACCUMULATED). */
void nb_gru_finish_back(nb_gru *g, NB_REAL *grads, NB_REAL *dx, const NB_REAL *params);

/* Nematus' initialization (initializers.py norm_weight / ortho_weight): each H x E input block
 * N(0, scale^2), or orthogonal when E == H; the three recurrent blocks orthogonal; then `center`
 * added to every weight (the RMS paper's Fig. 4 experiment; 0 normally). Biases 0, gains 1, BN
 * and WN as nb_gru_init_params. Returns 0, or -1 with err set. */
int nb_gru_init_normal(nb_gru *g, NB_REAL *params, nb_rng *rng, double scale, double center,
                       nb_err *err);

/* An n x n orthogonal matrix (QR of a Gaussian matrix) into dst with row stride ld. */
int nb_orthogonal(NB_REAL *dst, size_t ld, int n, nb_rng *rng, nb_err *err);

/* The input side's backward of step t alone, after its step_back: ACCUMULATES dx rows of step t
 * (dx is the whole (T, B, E) array) and BN's input-side gains; finish_back then leaves dx (and
 * those) alone. For a conditional GRU, whose step t input depends on step t's own state. */
void nb_gru_input_back(nb_gru *g, NB_REAL *grads, const NB_REAL *params, int t, NB_REAL *dx);
