/* util/bleu.h — BLEU exactly as SacreBLEU computes it (docs/papers.md#mt-bleu).
 *
 * Follows SacreBLEU 2.x (read at 2.6.0: sacrebleu/metrics/bleu.py, metrics/helpers.py,
 * tokenizers/tokenizer_13a.py and tokenizer_re.py): corpus BLEU from summed sufficient
 * statistics; hypotheses and references right-stripped of whitespace (Python's str.rstrip:
 * Unicode whitespace), then tokenized (13a, or none), split on Unicode whitespace (Python's
 * str.split()); n-grams 1..max_order (4); clipped counts against the maximum count over the
 * references; the closest reference length (ties: the shorter); brevity penalty
 * exp(1 - ref/sys) when sys < ref (0 when sys is 0); no match at any order gives 0; smoothing
 * none, floor (0.1), add-k (1) or exp (the default: the k-th order without a match counts
 * 100 / (2^k * total)); log 0 floored at -9999999999; effective order optional (sentence BLEU
 * uses it in SacreBLEU's sentence_bleu). Case-sensitive only. Scores are on the 0-100 scale.
 *
 * The 13a tokenizer (mteval-v13a): removes "<skipped>", joins "-\n", "\n" to space, unescapes
 * &quot; &amp; &lt; &gt; (in that order), pads with spaces, then four regular-expression passes
 * reproduced with Python's left-to-right, non-overlapping substitution: the characters
 * {|}~[\]^_` space !"#$%& ()*+ :;<=>?@ / are split off; "." and "," are split off unless
 * preceded by a digit, and unless followed by a digit; "-" is split off after a digit; runs of
 * whitespace become one space. Works on UTF-8 bytes (equivalent for these ASCII-only
 * patterns). */
#ifndef NB_UTIL_BLEU_H
#define NB_UTIL_BLEU_H

#include <stddef.h>
#include "util/err.h"

#define NB_BLEU_MAX_ORDER 8
#define NB_SACREBLEU_VERSION "2.6.0"

typedef enum nb_bleu_tok { NB_BLEU_TOK_13A, NB_BLEU_TOK_NONE } nb_bleu_tok;
typedef enum nb_bleu_smooth {
    NB_BLEU_SMOOTH_EXP, /* SacreBLEU's default */
    NB_BLEU_SMOOTH_NONE,
    NB_BLEU_SMOOTH_FLOOR,
    NB_BLEU_SMOOTH_ADDK
} nb_bleu_smooth;

typedef struct nb_bleu_opts {
    nb_bleu_tok tok;
    nb_bleu_smooth smooth;
    double smooth_value; /* floor / add-k; < 0: SacreBLEU's default (0.1, 1) */
    int effective_order;
    int max_order; /* 1..NB_BLEU_MAX_ORDER; 4 */
} nb_bleu_opts;

/* SacreBLEU's corpus_bleu defaults: 13a, exp, no effective order, order 4. */
nb_bleu_opts nb_bleu_defaults(void);

typedef struct nb_bleu {
    double score; /* 0..100 */
    double bp;
    double precision[NB_BLEU_MAX_ORDER];                         /* percent */
    double correct[NB_BLEU_MAX_ORDER], total[NB_BLEU_MAX_ORDER]; /* add-k adds to them */
    long sys_len, ref_len;
} nb_bleu;

/* Corpus BLEU of n hypotheses against nrefs reference streams: refs[r][i] is reference r of
 * sentence i. Returns 0, or -1 with err (out of memory, bad options). */
int nb_bleu_corpus(const char *const *hyp, int n, const char *const *const *refs, int nrefs,
                   const nb_bleu_opts *o, nb_bleu *out, nb_err *err);

/* Sentence BLEU as SacreBLEU's sentence_bleu (o as given; its default has effective order). */
int nb_bleu_sentence(const char *hyp, const char *const *refs, int nrefs, const nb_bleu_opts *o,
                     nb_bleu *out, nb_err *err);

/* BLEU from sufficient statistics (SacreBLEU's BLEU.compute_bleu; correct/total are copied). */
nb_bleu nb_bleu_compute(const double *correct, const double *total, long sys_len, long ref_len,
                        const nb_bleu_opts *o);

/* The 13a tokenization of line (malloc'ed; NULL when out of memory). */
char *nb_bleu_tokenize_13a(const char *line);

/* SacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0". */
void nb_bleu_signature(const nb_bleu_opts *o, int nrefs, char *buf, size_t n);

#endif
