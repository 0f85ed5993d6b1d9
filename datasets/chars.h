/* datasets/chars.h — text as a sequence of characters, for the character-level language model
 * (task lm): a UTF-8 file read whole, or generated text with long-range structure.
 *
 * The vocabulary is the sorted set of the text's Unicode code points (Tiny Shakespeare: 65), and
 * the text is split as nanoGPT's shakespeare_char prepare.py does: the first 90% of the
 * characters train, the last 10% validate. */
#ifndef NB_DATASETS_CHARS_H
#define NB_DATASETS_CHARS_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* The most distinct characters a text may have (a model's vocabulary). */
#define NB_CHARS_MAX_VOCAB 4096
/* The largest text file read (bytes). */
#define NB_CHARS_MAX_BYTES ((size_t)256 << 20)

typedef struct nb_chars {
    int *ids;        /* n character ids, each < vocab */
    size_t n;        /* characters */
    size_t ntrain;   /* ids[0, ntrain) train, ids[ntrain, n) validate */
    int vocab;       /* distinct characters */
    uint32_t *chars; /* vocab code points, ascending: id i is chars[i] */
} nb_chars;

/* The text of len bytes at buf (what names it in errors): refused when empty, not valid UTF-8
 * (the byte offset named), or with more than NB_CHARS_MAX_VOCAB distinct characters. Returns 0,
 * or -1 with err set (t then holds nothing to free). */
int nb_chars_from_bytes(const char *buf, size_t len, const char *what, nb_chars *t, nb_err *err);

/* The text of the file at path (at most NB_CHARS_MAX_BYTES), as nb_chars_from_bytes. */
int nb_chars_load(const char *path, nb_chars *t, nb_err *err);

/* Generated text of about n characters (the same for a given n, whatever the run's seed) whose
 * next character often depends on one far back, so that a model must attend to predict it:
 * lines "KEY=VALUE;...;KEY?VALUE" where a key asked at the end was bound earlier in the line,
 * copied spans "<abcdef|abcdef>", and nested brackets closed in order. */
int nb_chars_synthetic(size_t n, nb_chars *t, nb_err *err);

/* The UTF-8 bytes of character id (at most 4, not terminated); returns how many. */
int nb_chars_utf8(const nb_chars *t, int id, char out[4]);

/* Encodes the UTF-8 string s into ids (at most max); a character the vocabulary lacks is refused
 * (named in err). Returns the number of ids, or -1 with err set. */
long nb_chars_encode(const nb_chars *t, const char *s, int *ids, long max, nb_err *err);

void nb_chars_free(nb_chars *t);

#endif
