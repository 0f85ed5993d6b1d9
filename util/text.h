/* util/text.h — strings that came from outside (a results store, a command line) made safe to
 * show: control characters and bytes that are not UTF-8 never reach a terminal or a script raw.
 *
 * The escaped form keeps ordinary text unchanged (UTF-8 letters included) and writes, instead of
 * a control character, a visible escape: \n, \r, \t, or \xHH for any other C0 control byte,
 * DEL, a C1 control (U+0080..U+009F, written as its two UTF-8 bytes \xc2\xHH) and each byte that
 * is not part of a valid UTF-8 sequence. A backslash itself is kept as it is, so a string
 * without anything to escape prints exactly as stored. */
#ifndef NB_UTIL_TEXT_H
#define NB_UTIL_TEXT_H

#include <stddef.h>
#include <stdio.h>

#include "util/json.h"

/* 1 when s is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF) with no
 * control character (C0, DEL or C1); 0 otherwise. */
int nb_text_clean(const char *s);

/* Appends s escaped to b. */
void nb_buf_escaped(nb_buf *b, const char *s);

/* Writes s escaped to f; NULL writes nothing. */
void nb_fputs_escaped(FILE *f, const char *s);

/* s escaped into out (size >= 1), cut at an escape's or a character's boundary when it does not
 * fit. Returns out. */
char *nb_escape(char *out, size_t size, const char *s);

#endif
