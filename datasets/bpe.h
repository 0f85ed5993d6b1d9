/* datasets/bpe.h — reversible pre-tokenization, byte-pair encoding (subword units) and
 * vocabularies for translation (docs/papers.md#mt-data).
 *
 * Text goes through three reversible steps:
 *
 * 1. Pre-tokenization (nb_pretok / nb_detok). A line is cut at ASCII spaces; every punctuation
 *    character (ASCII punctuation and the quotes, dashes and ellipsis listed in bpe.c) becomes a
 *    token of its own. A boundary without a space between two tokens is marked by the joiner
 *    U+FFED "￭" (OpenNMT's convention): on the punctuation token's side ("Hello" "￭," for
 *    "Hello,"; "(￭" "a" for "(a"). A single space between tokens is implicit; any other run of
 *    spaces (two or more, leading, trailing) becomes a token of that many U+2581 "▁" characters,
 *    which stands for exactly that run. Detokenizing restores the line byte for byte, with one
 *    exception, counted: the two marker characters themselves (U+FFED, U+2581) in the input are
 *    replaced by U+FFFD. No byte is otherwise special (tabs, control bytes, invalid UTF-8 are
 *    word characters).
 * 2. BPE (nb_bpe_learn / nb_bpe_apply), the algorithm of subword-nmt (Sennrich et al. 2016,
 *    learn_bpe.py, codes format version 0.2): words are the pre-tokenized tokens, split into
 *    UTF-8 characters (an invalid byte is a character), the last carrying the end-of-word marker
 *    "</w>"; every merge joins the most frequent adjacent symbol pair, frequencies counted over
 *    the distinct words weighted by their counts; it stops after `merges` merges or when the best
 *    pair occurs fewer than min_freq (2) times. Ties: the pair (a, b) greatest in byte-wise order
 *    of a, then b (what subword-nmt's max over (count, pair) picks). Pair counts are updated
 *    incrementally (only the words holding the merged pair are recounted), so learning 8,000
 *    merges on Multi30k takes about a second. Applying: a word's symbols are merged greedily, the
 *    pair of lowest rank first, all its non-overlapping occurrences left to right, until no pair
 *    has a rank. Non-final pieces carry the suffix "@@" (subword-nmt's separator); a final piece
 *    never ends in "@@" because pre-tokenized tokens never do (punctuation stands alone).
 * 3. Vocabulary (nb_vocab): id 0 <pad>, 1 <unk>, 2 <bos>, 3 <eos>, then every piece of the
 *    training text by descending count, ties in byte-wise order. A piece not in the vocabulary
 *    (a character never seen in training) encodes as <unk> and is counted.
 *
 * Decoding ids back to text: pieces ending in "@@" are glued to the next one, the tokens are
 * then detokenized; <unk> decodes as U+FFFD, <pad>/<bos>/<eos> as nothing. */
#ifndef NB_DATASETS_BPE_H
#define NB_DATASETS_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

#define NB_JOINER "\xef\xbf\xad"  /* U+FFED */
#define NB_SPACE "\xe2\x96\x81"   /* U+2581 */
#define NB_REPLACE "\xef\xbf\xbd" /* U+FFFD */

/* ---- pre-tokenization ---------------------------------------------------------------------- */

/* A list of tokens: tok[i] points into one owned buffer. */
typedef struct nb_toks {
    int n, cap;
    char **tok;
    char *buf;
    size_t len, bufcap;
} nb_toks;

void nb_toks_free(nb_toks *t);

/* Pre-tokenizes line (len bytes, no '\n' expected; a '\n' is a word character) into out (reset
 * first, reusable). *reserved (may be NULL) is increased by the marker characters replaced.
 * Returns 0, or -1 when out of memory. */
int nb_pretok(const char *line, size_t len, nb_toks *out, long *reserved, nb_err *err);

/* Joins tokens back into text: a malloc'ed NUL-terminated string, or NULL when out of memory. */
char *nb_detok(char *const *tok, int n);

/* ---- BPE ----------------------------------------------------------------------------------- */

typedef struct nb_bpe nb_bpe;

/* A word count table for learning: add every token of the training text. */
typedef struct nb_wordcount nb_wordcount;
nb_wordcount *nb_wordcount_new(void);
int nb_wordcount_add(nb_wordcount *w, const char *word, long count);
void nb_wordcount_free(nb_wordcount *w);

/* Learns up to `merges` merges (stopping early when the best pair is rarer than min_freq).
 * Returns the codes, or NULL with err. */
nb_bpe *nb_bpe_learn(const nb_wordcount *w, int merges, int min_freq, nb_err *err);

/* Number of merges. */
int nb_bpe_size(const nb_bpe *b);
/* Merge i's two symbols (end-of-word marker included, as in the codes file). */
void nb_bpe_merge(const nb_bpe *b, int i, const char **left, const char **right);

/* The codes in subword-nmt's format: "#version: 0.2\n" then "LEFT RIGHT\n" per merge, best
 * first. nb_bpe_write writes path atomically (path.tmp, fsync, rename). */
int nb_bpe_write(const nb_bpe *b, const char *path, nb_err *err);
/* That text, malloc'ed (its length in *len), or NULL when out of memory. */
char *nb_bpe_text(const nb_bpe *b, size_t *len);
/* Parses codes text (buf, n bytes; the version line optional; empty lines and a trailing "\r"
 * ignored). A line that is not two non-empty symbols separated by one space is refused, naming
 * the line. name is used in messages. Returns the codes, or NULL with err. */
nb_bpe *nb_bpe_parse(const char *buf, size_t n, const char *name, nb_err *err);
nb_bpe *nb_bpe_read(const char *path, nb_err *err);
void nb_bpe_free(nb_bpe *b);

/* Segments one word (a pre-tokenized token) and appends its pieces to out, non-final ones with
 * the "@@" suffix. Results are cached per word inside b (not thread-safe: one nb_bpe per
 * thread). Returns 0, or -1 when out of memory. */
int nb_bpe_apply_word(nb_bpe *b, const char *word, nb_toks *out, nb_err *err);

/* Pre-tokenizes and segments a line into pieces (out reset first). */
int nb_bpe_encode_line(nb_bpe *b, const char *line, size_t len, nb_toks *out, long *reserved,
                       nb_err *err);

/* Undoes segmentation and pre-tokenization: pieces to text (malloc'ed), or NULL when out of
 * memory. A trailing non-final piece is kept without its "@@". */
char *nb_bpe_decode(char *const *piece, int n);

/* ---- vocabulary ---------------------------------------------------------------------------- */

enum { NB_PAD = 0, NB_UNK = 1, NB_BOS = 2, NB_EOS = 3, NB_NSPECIAL = 4 };

typedef struct nb_vocab nb_vocab;

/* Builds a vocabulary from piece counts: call nb_vocab_count for every training piece, then
 * nb_vocab_finish (ids assigned; counting is then over). */
nb_vocab *nb_vocab_new(void);
int nb_vocab_count(nb_vocab *v, const char *piece, nb_err *err);
int nb_vocab_finish(nb_vocab *v, nb_err *err);
/* Size including the specials. */
int nb_vocab_size(const nb_vocab *v);
/* The id of piece (NB_UNK when unknown). */
int nb_vocab_id(const nb_vocab *v, const char *piece);
/* The string of id ("<pad>", "<unk>", "<bos>", "<eos>" for the specials), or NULL when out of
 * range. */
const char *nb_vocab_str(const nb_vocab *v, int id);
/* One piece a line, in id order from NB_NSPECIAL (the specials are implied), written
 * atomically; and read back (a duplicated or empty line is refused). */
int nb_vocab_write(const nb_vocab *v, const char *path, nb_err *err);
/* The text nb_vocab_write writes, malloc'ed (its length in *len), or NULL when out of memory. */
char *nb_vocab_text(const nb_vocab *v, size_t *len);
nb_vocab *nb_vocab_parse(const char *buf, size_t n, const char *name, nb_err *err);
nb_vocab *nb_vocab_read(const char *path, nb_err *err);
void nb_vocab_free(nb_vocab *v);

/* Encodes a line to ids (pre-tokenize, BPE, look up), appending to *ids (realloc'ed; *n
 * updated), without <bos>/<eos>. *unk (may be NULL) is increased per unknown piece. */
int nb_vocab_encode_line(const nb_vocab *v, nb_bpe *b, const char *line, size_t len, int **ids,
                         int *n, int *cap, long *unk, long *reserved, nb_err *err);
/* Decodes ids to text (malloc'ed), stopping at the first NB_EOS; NULL when out of memory. */
char *nb_vocab_decode(const nb_vocab *v, const int *ids, int n);

#endif
