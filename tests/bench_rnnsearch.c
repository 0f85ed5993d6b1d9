/* tests/bench_rnnsearch.c — forward+backward seconds per step of nn/rnnsearch.c (float) for
 * none, layer and rms, interleaved in rounds; not a unit test. Build and run:
 *   make && cc -O2 -march=native -fopenmp -I. tests/bench_rnnsearch.c build/libnormbench.a \
 *      -lopenblas -lsqlite3 -larchive -lcurl -lcrypto -lm -o /tmp/bench_rnnsearch
 *   /tmp/bench_rnnsearch E H B T V ROUNDS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nn/nn.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
    int E = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 512,
        H = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 1024;
    int B = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 80,
        T = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 30;
    int V = argc > 5 ? (int)strtol(argv[5], NULL, 10) : 8000,
        rounds = argc > 6 ? (int)strtol(argv[6], NULL, 10) : 3;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS};
    nb_rnnsearch m[3];
    int *src = malloc(sizeof(int) * T * B), *tgt = malloc(sizeof(int) * T * B);
    int *sl = malloc(sizeof(int) * B), *tl = malloc(sizeof(int) * B);
    nb_rng rng;
    nb_rng_seed(&rng, 1, NB_STREAM_DATA);
    for (int i = 0; i < T * B; i++) {
        src[i] = 1 + (int)(nb_rng_uniform(&rng) * (V - 1));
        tgt[i] = 1 + (int)(nb_rng_uniform(&rng) * (V - 1));
    }
    for (int b = 0; b < B; b++) /* lengths around T, as batches sorted by length */
        sl[b] = tl[b] = T - (b % 4);
    for (int k = 0; k < 3; k++) {
        nb_rnnsearch_cfg cfg;
        nb_rnnsearch_cfg_default(&cfg, V, V, 0, kinds[k]);
        cfg.E = E;
        cfg.H = H;
        cfg.Bmax = B;
        cfg.Txmax = cfg.Tymax = T;
        nb_err err;
        nb_rng_seed(&rng, 2, NB_STREAM_INIT);
        if (nb_rnnsearch_init(&m[k], &cfg, &rng, &err) != 0) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
    }
    double sum[3] = {0}, sq[3] = {0};
    for (int r = 0; r <= rounds; r++)
        for (int k = 0; k < 3; k++) {
            double t0 = now();
            nb_rnnsearch_forward(&m[k], src, sl, T, tgt, tl, T, B, 1, NULL, NULL);
            nb_rnnsearch_backward(&m[k]);
            double dt = now() - t0;
            printf("round %d %s %.3f s\n", r, nb_norm_name(kinds[k]), dt);
            fflush(stdout);
            if (r == 0) continue; /* warm-up */
            sum[k] += dt;
            sq[k] += dt * dt;
        }
    for (int k = 0; k < 3; k++) {
        double mean = sum[k] / rounds, sd = sqrt(fmax(0, sq[k] / rounds - mean * mean));
        printf("E %d H %d B %d T %d V %d %-5s %.3f s/step (sd %.3f, %d steps)\n", E, H, B, T, V,
               nb_norm_name(kinds[k]), mean, sd, rounds);
        nb_rnnsearch_free(&m[k]);
    }
    return 0;
}
