#define NB_GIT_REV "c576a07bf695"
#define NB_CC_VERSION "cc (Debian 12.2.0-14+deb12u1) 12.2.0"
#define NB_CFLAGS "-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -fopenmp -I. -Ibuild-lint/gen -O2 -march=native -Werror"
