/* nn/cpu.c — processor settings that training depends on (precision-independent). */
#include "nn/nn.h"

#include <omp.h>

#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

int nb_flush_denormals(int on) {
#if defined(__SSE2__)
    /* MXCSR is per thread: set it on this thread and on every thread of the OpenMP pool (which
     * the OpenMP build of OpenBLAS shares). */
#pragma omp parallel
    {
        _MM_SET_FLUSH_ZERO_MODE(on ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
        _MM_SET_DENORMALS_ZERO_MODE(on ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
    }
    _MM_SET_FLUSH_ZERO_MODE(on ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
    _MM_SET_DENORMALS_ZERO_MODE(on ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
    return 0;
#else
    (void)on;
    return -1;
#endif
}
