/* datasets/mt.h — translation data: parallel text, the Multi30k/WMT14 loaders with cached BPE,
 * a synthetic transduction, and length-sorted batching (docs/papers.md#mt-data).
 *
 * Use from a task (tasks/mt.c):
 *
 *     nb_mt_opts o = nb_mt_defaults("multi30k");   // bpe_merges 8000, max_len 80
 *     nb_mt_data d;
 *     if (nb_mt_load("multi30k", data_dir, &o, &d, &err)) ...   // or "synthetic"
 *     // d.train / d.val / d.test[0..d.ntest): ids per sentence, raw reference text
 *     nb_mt_batcher bt;
 *     nb_mt_batcher_init(&bt, &d.train, 80, 20, NB_MT_ORDER_NEMATUS, &rng);  // Nematus'
 *     int idx[80], n;
 *     while ((n = nb_mt_batcher_next(&bt, idx)) > 0) ...  // sentence indices, similar lengths
 *     char *text = nb_vocab_decode(d.tgt_vocab, ids, len); // detokenized, for BLEU (util/bleu.h)
 *     nb_mt_free(&d);
 *
 * Vocabularies are separate for source and target (as Nematus builds them), BPE codes joint
 * (learned on source and target training text together). Source and target sentences carry no
 * <bos>/<eos>: the model appends NB_EOS (and prepends NB_BOS where it wants one).
 */
#ifndef NB_DATASETS_MT_H
#define NB_DATASETS_MT_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/bpe.h"
#include "util/err.h"
#include "util/rng.h"

/* The largest decompressed text file read (WMT14's training side is ~700 MB). */
#define NB_MT_MAX_TEXT ((uint64_t)2 << 30)

/* Lines of a text file: line[i] is NUL-terminated (no '\n') inside one owned buffer. */
typedef struct nb_lines {
    int n;
    char **line;
    size_t *len;
    char *buf;
} nb_lines;

/* Splits text (n bytes) into lines at '\n' (a final line without '\n' counts; a final '\n'
 * adds no empty line). A NUL byte is refused naming the line (name is used in messages). On
 * success *out owns a copy. */
int nb_lines_parse(const char *text, size_t n, const char *name, nb_lines *out, nb_err *err);
/* Reads a text file, gunzipping it when it starts with the gzip magic (libarchive's raw
 * reader), at most max_bytes decompressed (more is refused). */
int nb_lines_read(const char *path, uint64_t max_bytes, nb_lines *out, nb_err *err);
void nb_lines_free(nb_lines *l);

/* One split, encoded. Sentence i's source ids are src[src_start[i] .. src_start[i+1]). */
typedef struct nb_mt_split {
    int n;
    int *src_start, *src;
    int *tgt_start, *tgt;
    char **src_text, **tgt_text; /* raw lines (references for BLEU), owned */
    /* what reading did, never silent: pairs dropped (training only) because a side is empty
     * or longer than max_len pieces; pieces encoded as <unk>; marker characters replaced.
     * Validation and test keep every pair: there empty and too_long count the pairs kept
     * (too_long: a side over max_len), src_too_long those whose source is over max_len (the
     * task decides what it does with them: tasks/mt.c) */
    long read, empty, too_long, unk, reserved, src_too_long;
    int max_src_len, max_tgt_len; /* longest kept sentence, in pieces */
} nb_mt_split;

static inline int nb_mt_src_len(const nb_mt_split *s, int i) {
    return s->src_start[i + 1] - s->src_start[i];
}
static inline int nb_mt_tgt_len(const nb_mt_split *s, int i) {
    return s->tgt_start[i + 1] - s->tgt_start[i];
}

typedef struct nb_mt_opts {
    int bpe_merges;   /* joint BPE merges (multi30k 8,000; wmt14 32,000) */
    int bpe_min_freq; /* subword-nmt's --min-frequency, 2 */
    int max_len;      /* training pairs with a side longer than this many pieces are dropped
                         and counted (80, Nematus' maxlen); validation and test keep everything,
                         counting the pairs over it */
    int subset;       /* > 0: the first `subset` training pairs only (tests) */
    /* synthetic only */
    uint64_t synth_seed;
    int synth_train, synth_val, synth_test; /* pairs per split (defaults 20,000 / 500 / 500) */
} nb_mt_opts;

/* Defaults for a dataset ("multi30k", "wmt14-en-de", "synthetic"). */
nb_mt_opts nb_mt_defaults(const char *dataset);

#define NB_MT_MAX_TEST 2

typedef struct nb_mt_data {
    nb_mt_split train, val, test[NB_MT_MAX_TEST];
    int ntest;
    const char *test_name[NB_MT_MAX_TEST]; /* "test2016", "test2017"; "newstest2014"; "test" */
    const char *src_lang, *tgt_lang;       /* "en", "de" */
    nb_bpe *bpe;
    nb_vocab *src_vocab, *tgt_vocab;
    char cache_dir[4096]; /* where the codes and vocabularies live ("" for synthetic) */
    char key[17];         /* the cache key: 16 hex digits */
    char cache_note[256]; /* "" or why the cache was rebuilt ("rebuilt: its codes was ...") */
    char data_hash[65];   /* SHA-256 (hex) of everything a run reads: the codes, vocabularies
                           * and every split as encoded, with their text */
    double bpe_seconds;   /* time spent learning BPE (0 when read from the cache) */
    char source[1024];    /* where the data came from, for the run's record */
} nb_mt_data;

/* Loads dataset ("multi30k", "wmt14-en-de" or "synthetic") from DATA_DIR/NAME/ (installed by
 * `normbench fetch`; not fetched here). BPE codes and both vocabularies are learned from the
 * training text on first use and cached in DATA_DIR/.cache/mt/NAME-KEY/{codes,src.vocab,
 * tgt.vocab} (written atomically), KEY hashing the training files' bytes and the options that
 * shape them (merges, min_freq, subset, the pre-tokenizer's version); synthetic learns in
 * memory and caches nothing. Returns 0, or -1 with err (a missing file names it and hints
 * `normbench fetch NAME`), *out then owning nothing. */
int nb_mt_load(const char *dataset, const char *data_dir, const nb_mt_opts *o, nb_mt_data *out,
               nb_err *err);
void nb_mt_free(nb_mt_data *d);

/* Encodes parallel lines (already read) with codes and vocabularies into a split. drop: 1 for
 * training (drop and count empty or over-long pairs), 0 to keep every pair. Unequal line
 * counts are refused naming both files. */
int nb_mt_encode(const nb_lines *src, const nb_lines *tgt, const char *src_name,
                 const char *tgt_name, nb_bpe *bpe, const nb_vocab *sv, const nb_vocab *tv,
                 int max_len, int drop, nb_mt_split *out, nb_err *err);
void nb_mt_split_free(nb_mt_split *s);

/* The synthetic transduction's text (datasets/mt_synth.c): source and target lines of n pairs
 * drawn from seed and stream (different streams give disjoint-looking splits of the same
 * language). The language: a 60-word source lexicon of pseudo-words in four classes
 * (determiners, adjectives, nouns, verbs), sentences "DET [ADJ] NOUN VERB DET [ADJ] NOUN
 * [and DET [ADJ] NOUN]..." of 3 to 16 words; the target maps every word through a fixed
 * bijective lexicon (a different spelling), puts each adjective after its noun (local
 * reordering), and the verb at the end of its clause, ending with " ." — a mapping that needs
 * both the lexicon and attention to the right source position. */
int nb_mt_synth_text(uint64_t seed, uint64_t stream, int n, nb_lines *src, nb_lines *tgt,
                     nb_err *err);

/* ---- batching -------------------------------------------------------------------------------- */

/* Nematus' batches: each epoch shuffles the pairs, reads them maxibatch * batch at a time,
 * sorts that maxibatch by length and cuts it into batches of `batch` in that order, so batches
 * hold sentences of similar lengths and pad little. The last batch of an epoch may be smaller.
 * The order within a maxibatch (`order`, kept as sort): NB_MT_ORDER_NEMATUS (Nematus v0.3's
 * data_iterator.py) by max(source, target) length, longest first (ties: shuffled position);
 * NB_MT_ORDER_TARGET (normbench's before it followed Nematus) by target, then source length,
 * shortest first (ties: shuffled position). */
enum { NB_MT_ORDER_NEMATUS = 0, NB_MT_ORDER_TARGET = 1 };
typedef struct nb_mt_batcher {
    const nb_mt_split *s;
    int batch, maxibatch;
    int tokens;  /* > 0: token batches (nb_mt_batcher_init_tokens) */
    int sort;    /* NB_MT_ORDER_*: the order within a maxibatch */
    long chunk;  /* sentences sorted together: batch * maxibatch, or for token batches maxibatch
                  * times the sentences of mean length that fit in tokens */
    nb_rng *rng; /* the data-order stream; not owned */
    int *order;  /* epoch permutation, sorted within maxibatches */
    int pos;     /* next position in order */
    long epoch;  /* completed epochs */
} nb_mt_batcher;

int nb_mt_batcher_init(nb_mt_batcher *b, const nb_mt_split *s, int batch, int maxibatch, int order,
                       nb_rng *rng, nb_err *err);
/* Token batches (the Transformer's, as zero and fairseq cut them): the same shuffle and sort,
 * but each batch takes sentences in that order while the batch padded to its longest side
 * (source, or target with eos) holds at most `tokens` tokens: n * max(longest source, longest
 * target + 1) <= tokens. A pair longer than that alone is a batch of one. A batch has at most
 * `tokens` sentences. */
int nb_mt_batcher_init_tokens(nb_mt_batcher *b, const nb_mt_split *s, int tokens, int maxibatch,
                              int order, nb_rng *rng, nb_err *err);
/* The batches of b's current epoch, counted from its start (b unchanged); -1 when out of
 * memory. */
long nb_mt_batcher_count(const nb_mt_batcher *b);
/* Writes the next batch's sentence indices into idx (room for batch, or for token batches for
 * tokens) and returns how many;
 * starts a new epoch (reshuffling) when the current one is used up. Returns 0 only for an
 * empty split. */
int nb_mt_batcher_next(nb_mt_batcher *b, int *idx);
void nb_mt_batcher_free(nb_mt_batcher *b);

#endif
