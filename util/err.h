/* util/err.h — the error value every library function fills in.
 *
 * Library code never prints and never exits: it returns non-zero and leaves a message (what
 * failed, the subject in quotes, lowercase, no full stop) and optionally a hint (what the user
 * should do) in an nb_err. Only cmd/ prints them, as "error: MSG" and "hint: HINT".
 */
#ifndef NB_UTIL_ERR_H
#define NB_UTIL_ERR_H

#include <stddef.h>

typedef struct nb_err {
    char msg[1024];
    char hint[1024];
} nb_err;

/* Clears both fields. */
void nb_err_clear(nb_err *e);

/* Formats the message (printf style); clears the hint. Always returns -1, so that
 * `return nb_errf(err, "cannot open '%s': %s", path, strerror(errno));` reads naturally.
 * e may be NULL. */
int nb_errf(nb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets the hint (printf style). Returns -1. e may be NULL. */
int nb_hintf(nb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
