/* util/num.c — strict decimal numbers from text (see util/num.h). */
#include "util/num.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static int digit(char c) {
    return c >= '0' && c <= '9';
}

/* Whether s is [+-]digits[.digits][(e|E)[+-]digits] with at least one mantissa digit (or, when
 * integer, [+-]digits only). */
static int decimal_shape(const char *s, int integer) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    int mant = 0;
    while (digit(*p))
        p++, mant++;
    if (integer) return mant > 0 && *p == '\0';
    if (*p == '.') {
        p++;
        while (digit(*p))
            p++, mant++;
    }
    if (!mant) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!digit(*p)) return 0;
        while (digit(*p))
            p++;
    }
    return *p == '\0';
}

int nb_parse_int(const char *s, long long *out) {
    if (!s || !decimal_shape(s, 1)) return -1;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

int nb_parse_double(const char *s, double *out) {
    if (!s || !decimal_shape(s, 0)) return -1;
    errno = 0;
    char *end = NULL;
    double x = strtod(s, &end);
    /* ERANGE on underflow gives a denormal or 0, which is what was written, near enough; on
     * overflow an infinity, which is refused */
    if (*end || !isfinite(x)) return -1;
    *out = x;
    return 0;
}
