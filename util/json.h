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

/* ---- reading ---------------------------------------------------------------------------- */

/* One member of a JSON object as read: its key, and its value (a string decoded, \uXXXX of the
 * BMP as UTF-8 and \u0000 as '?'; any other value, a number, true, false, null, an object or an
 * array, as written, without the white space around it). */
typedef struct nb_json_member {
    char *key, *value;
    int is_string; /* the value was a JSON string */
} nb_json_member;

/* The members of a JSON object, in the order written. */
typedef struct nb_json_object {
    nb_json_member *kv;
    int n;
} nb_json_object;

/* Reads the members of the object json (a run's configuration or provenance, as stored) into
 * *o (free with nb_json_object_free). Returns 0 when json is one whole object; -1 when it is
 * NULL, not an object or malformed from some point on (a string not closed, a bad escape, an
 * unbalanced bracket, something after the object, out of memory), with the members read until
 * there kept in *o so that a caller may still show them. Reading is iterative: nesting as deep
 * as the input takes no stack, and memory is bounded by a small multiple of the input's size. */
int nb_json_read_object(const char *json, nb_json_object *o);

void nb_json_object_free(nb_json_object *o);

/* The value of the first member named key, or NULL. */
const char *nb_json_get(const nb_json_object *o, const char *key);

/* The value of member key as a string: its decoded text when it is a JSON string, else NULL. */
const char *nb_json_get_str(const nb_json_object *o, const char *key);

/* The value of member key as an integer (a JSON number with no fraction or exponent that fits
 * in 64 bits) into *out: 1, or 0 when there is no such member or it is not such a number (*out
 * untouched). */
int nb_json_get_int(const nb_json_object *o, const char *key, long long *out);

#endif
