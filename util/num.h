/* util/num.h — strict decimal numbers from text, for options and files a user writes.
 *
 * strtol/strtod accept more than a user means: leading spaces, hexadecimal ("0x10"), "inf",
 * "nan" and "1e5" for an integer. These accept only a plain decimal number: an optional sign,
 * digits, and for doubles an optional fraction and exponent; nothing before or after. */
#ifndef NB_UTIL_NUM_H
#define NB_UTIL_NUM_H

/* Returns 0 and sets *out, or -1 when s is not a decimal integer or is out of long long's
 * range. */
int nb_parse_int(const char *s, long long *out);

/* Returns 0 and sets *out, or -1 when s is not a finite decimal number. */
int nb_parse_double(const char *s, double *out);

#endif
