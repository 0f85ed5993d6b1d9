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
 * Forward caches the pre-norm values and row (or column) statistics; backward ACCUMULATES
 * into the gradient buffer. */

typedef struct NB_FN(nb_gru) {
    int E, H, Tmax, Bmax;
    nb_norm_cfg norm;
    int k2, k1; /* pRMSNorm k for the 2H and H parts (the norm's width otherwise) */
    int bn_slots;
    /* offsets into the owner's flat parameter buffer; (size_t)-1 when absent */
    size_t wc, bc, uc, gx, bx, gh, bh, wgx, wgh, rmx, rvx, rmh, rvh;
    /* forward caches (sized for Tmax, Bmax) */
    NB_REAL *xp, *xn;    /* (T*B, 3H) pre-norm and normalized input side (xn == xp: none) */
    NB_REAL *hp, *hn;    /* (T*B, 3H) recurrent side, likewise */
    NB_REAL *r, *u, *hc; /* (T*B, H) gates and candidate h~ */
    NB_REAL *h;          /* (T+1, B, H) states, h[0] = 0 */
    NB_REAL *sx, *sh;    /* (T*B, 4): mean and rstd of the 2H part, then of the H part */
    NB_REAL *bmx, *brx;  /* BN: (T, 3H) mean and rstd of each step, input side */
    NB_REAL *bmh, *brh;  /* BN: recurrent side */
    NB_REAL *wce, *uce, *wnx, *wnh; /* WN: effective weights (3H,E), (3H,H); row norms (3H) */
    /* backward scratch */
    NB_REAL *dxn, *dxp, *dhn, *dhp; /* (T*B, 3H) */
    NB_REAL *dh, *dtmp;             /* (B, H) */
    NB_REAL *dwce, *duce;           /* WN: gradients of the effective weights */
    const NB_REAL *x, *mask;        /* the last forward's inputs (not owned) */
    int T, B, training;
} NB_FN(nb_gru);

/* Sizes the layer (E, H >= 1; Tmax, Bmax: the largest sequence length and batch a forward may
 * use) and appends its tensors to layout (names prefixed by prefix). Allocates the caches.
 * Returns 0, or -1 with err set. */
int NB_FN(nb_gru_setup)(NB_FN(nb_gru) * g, nb_layout *layout, const char *prefix, int E, int H,
                        int Tmax, int Bmax, const nb_norm_cfg *norm, nb_err *err);
void NB_FN(nb_gru_free)(NB_FN(nb_gru) * g);

/* Initialises the layer's tensors in params as the OE code does: Wc uniform ±0.1, Uc three
 * orthogonal H×H blocks (QR of a Gaussian matrix), biases 0, gains 1, BN running mean 0 and
 * variance 1, WN gains = the row norms. Returns 0, or -1 with err set (LAPACK failure). */
int NB_FN(nb_gru_init_params)(NB_FN(nb_gru) * g, NB_REAL *params, nb_rng *rng, nb_err *err);

/* Forward over T <= Tmax steps of B <= Bmax sequences: x (T, B, E), mask (T, B) with values 0
 * or 1 (NULL: all 1). training selects BN batch statistics (and updates the running averages
 * in params; nothing else in params is written).
 * The final states are g->h + T*B*H (B, H). x and mask must stay valid until backward. */
void NB_FN(nb_gru_forward)(NB_FN(nb_gru) * g, NB_REAL *params, const NB_REAL *x,
                           const NB_REAL *mask, int T, int B, int training);

/* The final states (B, H) of the last forward. */
const NB_REAL *NB_FN(nb_gru_last)(const NB_FN(nb_gru) * g);

/* Backward of the last forward, from dhT (B, H), the gradient of the final states (no
 * gradient reaches intermediate states from outside). ACCUMULATES into grads (the layer's
 * tensors) and into dx (T, B, E) when dx is not NULL. */
void NB_FN(nb_gru_backward)(NB_FN(nb_gru) * g, NB_REAL *grads, NB_REAL *dx, const NB_REAL *params,
                            const NB_REAL *dhT);
