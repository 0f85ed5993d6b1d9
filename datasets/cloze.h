/* datasets/cloze.h — cloze reading-comprehension data (passage, question, answer entity) for the
 * attentive reader: the CNN "top4" corpus (docs/papers.md#reader-data) and a generated one, and the
 * batch preparation of the papers' code (AR-repo attentive_reader.prepare_data, pkl_data_iterator).
 *
 * Examples are kept as token ids in one array with offsets. Passages and questions are stored
 * WITHOUT their final token (the code drops the EOS each of them ends with). */
#ifndef NB_DATASETS_CLOZE_H
#define NB_DATASETS_CLOZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rng.h"
#include "util/err.h"

typedef struct nb_cloze_split {
    int n;         /* examples */
    int64_t *doff; /* (n+1) passage i is dtok[doff[i] .. doff[i+1]) */
    int64_t *qoff; /* (n+1) question i is qtok[qoff[i] .. qoff[i+1]) */
    int32_t *dtok, *qtok;
    int32_t *ans;   /* (n) answer id */
    int maxd, maxq; /* longest passage and question */
} nb_cloze_split;

typedef struct nb_cloze {
    nb_cloze_split train, val;
    int V;         /* ids are in [0, V): the model's vocabulary and classes (len(dict)+1) */
    int32_t *ents; /* (nents) the entity ids, permuted among themselves in training */
    int nents;
    int *scratch;      /* (nents) for the permutation */
    char source[1024]; /* where the data came from, for the run's record */
} nb_cloze;

/* Loads dataset "synthetic" (generated from seed) or "cnn-top4" (DATA/cnn-top4/, through the
 * cache described in datasets/top4.c). subset > 0 keeps the first subset training and at most
 * as many validation examples. Returns 0, or -1 with err set (missing files name the path and
 * hint `normbench fetch cnn-top4`). */
int nb_cloze_load(nb_cloze *c, const char *dataset, const char *data_dir, int subset, uint64_t seed,
                  nb_err *err);
void nb_cloze_free(nb_cloze *c);

/* The CNN top4 corpus from DATA/cnn-top4/ (datasets/top4.c): the seven pickles, converted once
 * to a checksummed cache beside them. Returns 0, or -1 with err set. */
int nb_top4_load(nb_cloze *c, const char *data_dir, nb_err *err);

/* The generated corpus: each passage holds 3 or 4 "sentences" of filler words around one
 * entity followed by one relation word (entities and relations distinct within a passage); the
 * question is filler words, the placeholder and one of the passage's relation words; the
 * answer is the entity that precedes that relation in the passage. Guessing among the
 * passage's entities is right 1/3 to 1/4 of the time; reading gets it always. */
int nb_cloze_synthetic(nb_cloze *c, int ntrain, int nval, uint64_t seed, nb_err *err);

/* One batch as the code prepares it: rows first .. first+B-1 of s; T = the longest length in
 * the batch + 1; row b is its tokens repeated cyclically as [s, 0, s, 0, ...] over T steps;
 * len[b] is its real length (the mask). Writes tokd (B,TD), lend (B), tokq (B,TQ), lenq (B),
 * ans (B), *TD, *TQ. With perm (V values, or NULL) every id x becomes perm[x]. */
void nb_cloze_batch(const nb_cloze_split *s, int first, int B, const int32_t *perm, int *tokd,
                    int *lend, int *TD, int *tokq, int *lenq, int *TQ, int *ans);

/* perm (V) = the identity with the entity ids randomly permuted among themselves. */
void nb_cloze_entity_perm(const nb_cloze *c, int32_t *perm, nb_rng *rng);

#endif
