/* nn/reader.h — the attentive reader (Hermann et al. 2015) as Cooijmans' code builds it (AR-repo
 * model.py; docs/papers.md#reader-model), with every norm inside its LSTMs (generic: see
 * nn/nn.h; no guard).
 *
 * Dimension letters: B rows, TD passage steps, TQ question steps, D model width (d), X context
 * width (2d bidirectional, else d), V output classes (the whole vocabulary).
 *
 *   e = dropout(Emb[tokens])                    one table for passage and question, keep 0.5
 *   e' = dropout'(Emb[tokens])                  bidirectional: the backward encoders' own masks
 *   P_t = [lstm_d(e)_t ; lstm_dr(e' reversed)_t] (X) the passage states, re-aligned
 *   q = [final(lstm_q) ; final(lstm_qr)]        (X)
 *   sim_t = (P_t·Bm)·(q·Bm)                      the bilinear passage-question term (a scalar)
 *   m_t = tanh(P_t·Wac^T + bac + q·Waq^T + sim_t);  s_t = watt·m_t;  a = masked softmax_t(s)
 *   r = sum_t a_t P_t;  pbar = masked mean_t(P_t)
 *   g = dropout(tanh(r·Woc^T + q·Woq^T + boq + pbar·Wom^T), keep 0.5)
 *   p = softmax(g·Wl^T + bl) over all V;  loss = mean -log p[y]
 * The norm (cfg.norm) applies inside the four LSTMs only (both papers).
 *
 * Dropout on the embeddings: the code embeds the passage (and the question) once per direction
 * (model.py build_bidir_model calls embed(inp) and embed(inpr)), so the forward and backward
 * encoders see independent masks. Here every row has its own streams, keyed by draws of the
 * noise stream (one per direction and input: passage and question each, and one for the output
 * dropout) and the row's index in the whole batch (row0 + b): the masks of an example do not
 * depend on the other rows, so a batch split over processes draws what one process draws, and
 * a forward takes the same five draws of noise whatever its number of rows.
 *
 * bn_everywhere (Cooijmans' --bn-everywhere; norm batch only): the five feed-forward layers of
 * the attention and the output become the code's `bnff` layers, BN(x·W^T; gamma, beta) with
 * batch statistics (biased variance, cfg.norm.eps inside the sqrt), gamma initialised to 0.1,
 * beta the layer's own bias where it has one (bac, boq), else none:
 *   m_t = tanh(BN_ac(P_t·Wac^T; gac, bac) + BN_aq(q·Waq^T; gaq) + sim_t)
 *   g   = dropout(tanh(BN_oc(r·Woc^T; goc) + BN_oq(q·Woq^T; goq, boq) + BN_om(pbar·Wom^T; gom)))
 * BN_ac takes its statistics over all B x TD passage positions at once, padding included (the
 * code reshapes the unmasked passage states to (TD·B, X) before its bnff layer); the others over
 * the B rows. Like the BN-LSTM, training and evaluation both use the statistics of the batch at
 * hand. The bilinear term sim_t stays un-normalized, as in the code. Sources in nn/reader.c. */

#ifndef NB_NN_READER_CFG
#define NB_NN_READER_CFG
typedef struct nb_reader_cfg {
    int V, D;    /* vocabulary (classes and embedding rows), width d */
    int bidir;   /* 1: bidirectional encoders (RMS paper); 0: forward only (LN paper) */
    int Bmax;    /* rows */
    int TDmax;   /* passage steps */
    int TQmax;   /* question steps */
    double keep; /* dropout keep probability (0.5); 1 disables dropout */
    nb_norm_cfg norm;
    int bn_everywhere; /* 1: BN on the attention and output layers too (norm batch only) */
} nb_reader_cfg;

/* The encoder directions, the key of each direction's embedding-dropout stream. */

/* The bnff layers of bn_everywhere, in the order of their gains and statistics. */
enum { NB_RD_BN_AC, NB_RD_BN_AQ, NB_RD_BN_OC, NB_RD_BN_OQ, NB_RD_BN_OM, NB_RD_BN_COUNT };
#endif

typedef struct nb_reader {
    nb_reader_cfg cfg;
    int X;
    nb_layout layout;
    NB_REAL *params, *grads, *adam_m, *adam_v;
    nb_lstm ld, ldr, lq, lqr;
    size_t emb, bm, wac, bac, waq, watt, woc, woq, boq, wom, wl, bl; /* offsets */
    size_t bng[NB_RD_BN_COUNT]; /* bn_everywhere: offsets of the gains; (size_t)-1 otherwise */
    /* last forward */
    int B, TD, TQ, training;
    /* Data-parallel shards: the forward's rows are rows row0.. of the batch (their dropout
     * streams), and with grad_rows > 0 the backward takes the gradient of the loss summed over
     * the rows divided by grad_rows (the whole batch); 0: the mean loss. */
    int row0, grad_rows;
    int *tokd, *tokq, *lend, *lenq, *y;
    NB_REAL *ed, *eq, *kd, *kq;       /* embeddings after dropout and their keep masks (B,T,D) */
    NB_REAL *edr, *eqr, *kdr, *kqr;   /* bidirectional: the backward encoders' own (else NULL) */
    NB_REAL *hf, *hb, *P;             /* (B,TD,D) x2, (B,TD,X) */
    NB_REAL *q, *u, *v;               /* (B,X) */
    NB_REAL *M, *sc, *al;             /* (B,TD,D), (B,TD), (B,TD) */
    NB_REAL *r, *pbar, *gp, *kg, *gd; /* (B,X) x2, (B,D) x3 */
    NB_REAL *probs, *dlogits;         /* (B,V) */
    /* bn_everywhere (NULL otherwise): the linear outputs before BN, att_ctx's (B,TD,D) and the
     * others' (4,B,D) in NB_RD_BN_* order from AQ; batch means and rstd (NB_RD_BN_COUNT,D);
     * scratch (B,D), and the gradients of the linear outputs (B,TD,D) and (B,D) */
    NB_REAL *zac, *zo, *bnmean, *bnrstd, *bntmp, *dzac, *dzo;
    /* backward scratch */
    NB_REAL *dgd, *dr, *dpbar, *dq, *du, *dv, *dqa, *dM, *dP, *dhf, *dhb, *ded, *deq, *dfq;
    NB_REAL *dedr, *deqr; /* bidirectional: gradients of edr, eqr (else NULL) */
    long nwrong;          /* rows of the last forward whose argmax is not y */
} nb_reader;

/* Builds the model and draws its initial values (AR-repo utils.py: norm_weight, ortho_weight;
 * the LSTMs per nn/lstm.h). Returns 0, or -1 with err set. */
int nb_reader_init(nb_reader *m, const nb_reader_cfg *cfg, nb_rng *rng, nb_err *err);
void nb_reader_free(nb_reader *m);

/* Forward over B rows: passages tokd (B,TD) with real lengths lend (B), questions tokq (B,TQ)
 * with lenq (B), answers y (B) (may be NULL: loss 0); token ids in [0, V). training: dropout
 * masks drawn from noise (which may be NULL when not training). Returns the mean loss; leaves
 * the softmax in m->probs and the count of wrong argmaxes in m->nwrong. */
double nb_reader_forward(nb_reader *m, const int *tokd, const int *lend, int TD, const int *tokq,
                         const int *lenq, int TQ, const int *y, int B, int training, nb_rng *noise);

/* Backward of the last forward's mean loss; ACCUMULATES into m->grads. */
void nb_reader_backward(nb_reader *m);
