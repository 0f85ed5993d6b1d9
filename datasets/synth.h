/* datasets/synth.h — what the generated image datasets share (datasets/mnist_synth.c's digits,
 * datasets/binmnist.c's binary shapes and its stochastic binarization): a private generator
 * (splitmix64), so that the data do not change when util/rng.c does, uniform draws from it, and
 * the distance to a stroke. */
#ifndef NB_DATASETS_SYNTH_H
#define NB_DATASETS_SYNTH_H

#include <stdint.h>

static inline uint64_t nb_synth_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi), 24 random bits. */
static inline float nb_synth_unif(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)(nb_synth_next(s) >> 40) * (1.0f / 16777216.0f);
}

/* Squared distance from (x, y) to the segment (ax, ay)-(bx, by). */
static inline float nb_synth_seg_dist2(float x, float y, float ax, float ay, float bx, float by) {
    float vx = bx - ax, vy = by - ay, wx = x - ax, wy = y - ay;
    float l2 = vx * vx + vy * vy;
    float t = l2 > 0 ? (wx * vx + wy * vy) / l2 : 0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    float dx = wx - t * vx, dy = wy - t * vy;
    return dx * dx + dy * dy;
}

#endif
