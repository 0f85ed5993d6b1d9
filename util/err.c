#include "err.h"

#include <stdarg.h>
#include <stdio.h>

void nb_err_clear(nb_err *e) {
    if (!e) return;
    e->msg[0] = '\0';
    e->hint[0] = '\0';
}

int nb_errf(nb_err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->hint[0] = '\0';
    return -1;
}

int nb_hintf(nb_err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
    return -1;
}
