/* tasks/order.h — the order task's retrieval metrics, shared with the tests. */
#ifndef NB_TASKS_ORDER_H
#define NB_TASKS_ORDER_H

enum { NB_RET_R1, NB_RET_R5, NB_RET_R10, NB_RET_MEDR, NB_RET_MEANR, NB_RET_COUNT };

/* Retrieval metrics as the OE code's evaluation.py computes them, from the errors E (ncap, nimg)
 * where caption i belongs to image i/5 (ncap = 5*nimg). Caption retrieval, into cap: for each
 * image, the best 0-based rank of its five captions among all ncap; image retrieval, into img:
 * for each caption, the 0-based rank of its image among the nimg. Each gets R@1, R@5, R@10
 * (percent), median rank floor(median)+1 and mean rank mean+1, indexed by NB_RET_*. Ties (E is
 * exactly 0 wherever s <= c) rank as a stable sort would: the lower index first, so that equal
 * embeddings score at chance. rk is scratch of ncap ints. */
void nb_order_retrieval(const float *E, int ncap, int nimg, int *rk, double *cap, double *img);

#endif
