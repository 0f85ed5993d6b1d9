/* util/rng.c — xoshiro256** (Blackman & Vigna), seeded through splitmix64. No global state: the
 * whole state is the nb_rng value, so a checkpoint saves it by value and streams never share. */
#include "util/rng.h"

#include <math.h>

/* splitmix64's output function: a bijection of 64-bit values. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t splitmix64_next(uint64_t *x) {
    *x += 0x9E3779B97F4A7C15ull;
    return mix64(*x);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

/* The splitmix seed is mix64(mix64(seed) ^ stream): for a fixed seed, distinct streams give
 * distinct seeds (mix64 is a bijection), and likewise for a fixed stream and distinct seeds;
 * the four state words are then four splitmix64 outputs, as the xoshiro authors recommend. */
void nb_rng_seed(nb_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = mix64(mix64(seed + 0x2545F4914F6CDD1Dull) ^ stream);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64_next(&x);
    /* The all-zero state is xoshiro's one fixed point; splitmix64 cannot produce four zeros in
     * a row, but keep the guarantee explicit. */
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0) r->s[0] = 1;
}

uint64_t nb_rng_u64(nb_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double nb_rng_uniform(nb_rng *r) {
    return (double)(nb_rng_u64(r) >> 11) * 0x1.0p-53;
}

/* Box-Muller, one value per call (the second is dropped: a cache would be state outside the
 * four words). u1 in (0, 1] so the log is finite. */
double nb_rng_normal(nb_rng *r) {
    double u1 = 1.0 - nb_rng_uniform(r);
    double u2 = nb_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925286766559 * u2);
}

/* Lemire's multiply-and-reject: unbiased, usually one draw and no division. */
uint64_t nb_rng_below(nb_rng *r, uint64_t n) {
    if (n == 0) return 0; /* contract: n > 0; do not loop forever */
    unsigned __int128 prod = (unsigned __int128)nb_rng_u64(r) * n;
    uint64_t low = (uint64_t)prod;
    if (low < n) {
        uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
        while (low < threshold) {
            prod = (unsigned __int128)nb_rng_u64(r) * n;
            low = (uint64_t)prod;
        }
    }
    return (uint64_t)(prod >> 64);
}

void nb_rng_shuffle(nb_rng *r, int *a, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)nb_rng_below(r, (uint64_t)i);
        int tmp = a[i - 1];
        a[i - 1] = a[j];
        a[j] = tmp;
    }
}
