#define NB_GIT_REV "7d8c23b6df24-dirty"
#define NB_CC_VERSION "cc (Debian 12.2.0-14+deb12u1) 12.2.0"
#define NB_BLAS_BUILD "openblas 0.3.21 headers"
#define NB_CFLAGS "-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -Wno-psabi -fopenmp -I. -Ibuild-d/gen -I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi -O2 -march=native"
