/* util/rng.h — seeded, splittable random numbers (xoshiro256**).
 *
 * A run draws from separate streams (init, data order, dropout), each seeded from the run's
 * seed and the stream id, so that changing e.g. the dropout rate does not change the data
 * order. The state is a plain struct: a checkpoint saves it by value. */
#ifndef NB_UTIL_RNG_H
#define NB_UTIL_RNG_H

#include <stdint.h>
#include <stddef.h>

enum { NB_STREAM_INIT = 1, NB_STREAM_DATA = 2, NB_STREAM_DROPOUT = 3, NB_STREAM_SYNTH = 4 };

typedef struct nb_rng {
    uint64_t s[4];
} nb_rng;

void nb_rng_seed(nb_rng *r, uint64_t seed, uint64_t stream);
uint64_t nb_rng_u64(nb_rng *r);
double nb_rng_uniform(nb_rng *r);                 /* [0, 1), 53 random bits */
double nb_rng_normal(nb_rng *r);                  /* standard normal */
uint64_t nb_rng_below(nb_rng *r, uint64_t n);     /* uniform in [0, n), unbiased; n > 0 */
void nb_rng_shuffle(nb_rng *r, int *a, size_t n); /* Fisher-Yates */

#endif
