/* tests/testutil.h — cmocka and the helpers the C tests share. */
#ifndef NB_TESTS_TESTUTIL_H
#define NB_TESTS_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Asserts |a-b| <= atol + rtol*|b| with a readable message (cmocka has no float assert). */
#define assert_close(a, b, atol, rtol)                                                             \
    do {                                                                                           \
        double a_ = (double)(a), b_ = (double)(b);                                                 \
        if (!(fabs(a_ - b_) <= (atol) + (rtol)*fabs(b_))) {                                        \
            print_error("%s:%d: %s = %.10g, expected %s = %.10g (atol %g, rtol %g)\n", __FILE__,   \
                        __LINE__, #a, a_, #b, b_, (double)(atol), (double)(rtol));                 \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

#endif
