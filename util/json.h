/* util/json.h — a growable text buffer and JSON/CSV writing helpers every module may use.
 *
 * JSON strings are escaped per RFC 8259: '"', '\\' and control characters (as \n, \t, ... or
 * \u00XX); other bytes, UTF-8 included, pass through unchanged. JSON has no NaN or infinity:
 * nb_json_num writes them as the strings "nan", "inf", "-inf" so they stay distinguishable from
 * null (a missing value). Numbers are written in the shortest form that reads back exactly. */
#ifndef NB_UTIL_JSON_H
#define NB_UTIL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* A NUL-terminated growable string. Zero-initialize ({0}); free with nb_buf_free. On allocation
 * failure the buffer sets oom and ignores further appends (check once at the end). */
typedef struct nb_buf {
    char *p;
    size_t len, cap;
    int oom;
} nb_buf;

void nb_buf_free(nb_buf *b);
void nb_buf_puts(nb_buf *b, const char *s);
void nb_buf_printf(nb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the string out of the buffer (caller frees); NULL on allocation failure. The buffer is
 * left empty. */
char *nb_buf_take(nb_buf *b);

/* Appends s as a quoted JSON string ("null" when s is NULL). */
void nb_buf_json_str(nb_buf *b, const char *s);
/* Appends a number (shortest exact form; strings "nan"/"inf"/"-inf" for non-finite values). */
void nb_buf_json_num(nb_buf *b, double x);

/* Writes s to f as a quoted JSON string ("null" when s is NULL). */
void nb_json_str(FILE *f, const char *s);
/* Writes x to f as by nb_buf_json_num. */
void nb_json_num(FILE *f, double x);

/* Formats x into out (size at least 32) in the shortest "%.Ng" form that strtod reads back
 * exactly; "nan", "inf", "-inf" for non-finite values. Returns out. */
char *nb_fmt_double(char *out, size_t size, double x);

/* Writes s to f as one CSV field (RFC 4180), escaped first as util/text.h escapes for a terminal
 * (a control character such as ESC, CR or LF, or a byte that is not UTF-8, becomes \x1b, \r, \n,
 * \xHH: a field is always one line); then quoted, with quotes doubled, when it contains a comma
 * or a quote, or starts or ends with a space; as is otherwise. NULL writes nothing. */
void nb_csv_field(FILE *f, const char *s);

#endif
