/* tests/test_mtmem.c — the translation models' memory estimates (nb_rnnsearch_mem_bytes,
 * nb_tf_mem_bytes) against the bytes their constructors note (nn/mem.h), over norms, shapes
 * and batch sizes: `run mt` refuses a model by these estimates before building it. */
#include "testutil.h"

#include <omp.h>

#include "nn/mem.h"
#include "nn/nn.h"

/* The estimate is within 5% of what was allocated (they agree within 0.4% here). */
static void near(double est, double got, const char *what) {
    if (!(est >= 0.95 * got && est <= 1.05 * got)) {
        print_error("%s: estimate %.0f bytes, allocated %.0f\n", what, est, got);
        fail();
    }
}

static void test_rnnsearch(void **state) {
    (void)state;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS,
                                  NB_NORM_PRMS, NB_NORM_BATCH, NB_NORM_WEIGHT};
    const int shapes[][7] = {/* Vs Vt E H B Tx Ty */
                             {50, 60, 16, 32, 8, 10, 12},
                             {300, 200, 64, 128, 40, 30, 31},
                             {1000, 900, 32, 48, 100, 81, 81}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            nb_rnnsearch_cfg c;
            nb_rnnsearch_cfg_default(&c, shapes[s][0], shapes[s][1], 3, kinds[k]);
            c.E = shapes[s][2], c.H = shapes[s][3], c.Bmax = shapes[s][4];
            c.Txmax = shapes[s][5], c.Tymax = shapes[s][6], c.beam_max = 5;
            nb_rng rng;
            nb_rng_seed(&rng, 1, 0);
            nb_rnnsearch m;
            nb_err err;
            nb_mem_reset();
            assert_int_equal(nb_rnnsearch_init(&m, &c, &rng, &err), 0);
            double params = 0, est = nb_rnnsearch_mem_bytes(&c, &params);
            char what[64];
            snprintf(what, sizeof what, "rnnsearch %s shape %zu", nb_norm_name(kinds[k]), s);
            near(est, (double)nb_mem_noted(), what);
            assert_true(params == (double)m.layout.total);
            nb_rnnsearch_free(&m);
        }
}

static void test_transformer(void **state) {
    (void)state;
    const nb_norm_kind kinds[] = {NB_NORM_NONE, NB_NORM_LAYER, NB_NORM_RMS, NB_NORM_BATCH,
                                  NB_NORM_WEIGHT};
    const int shapes[][7] = {/* layers d heads ffn V rows maxpos */
                             {1, 16, 2, 24, 50, 40, 20},
                             {2, 64, 4, 256, 300, 800, 90},
                             {3, 32, 8, 64, 2000, 3000, 144}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int pre = 0; pre < 2; pre++) {
                const nb_tf_preset *pr = nb_tf_preset_find("small");
                nb_tf_cfg c;
                nb_tf_cfg_from_preset(&c, pr, shapes[s][4], kinds[k]);
                c.enc_layers = shapes[s][0], c.dec_layers = shapes[s][0] + 1;
                c.dim = shapes[s][1], c.heads = shapes[s][2], c.ffn = shapes[s][3];
                c.max_pos = shapes[s][6], c.pre_norm = pre, c.share_emb = 0, c.tie_out = 1;
                nb_layout lay;
                memset(&lay, 0, sizeof lay);
                nb_err err;
                nb_mem_reset();
                nb_tf *m = nb_tf_new(&c, &lay, shapes[s][5], &err);
                assert_non_null(m);
                double params = 0,
                       est = nb_tf_mem_bytes(&c, shapes[s][5], omp_get_max_threads(), &params);
                char what[64];
                snprintf(what, sizeof what, "transformer %s shape %zu pre %d",
                         nb_norm_name(kinds[k]), s, pre);
                near(est, (double)nb_mem_noted(), what);
                assert_true(params == (double)lay.total);
                /* decoding 2 sentences of 5 tokens with a beam of 3: its buffers are within
                 * the decoding estimate (which adds the search's own arrays) */
                float *P = calloc(lay.total, sizeof(float));
                nb_rng rng;
                nb_rng_seed(&rng, 1, 0);
                nb_tf_init_params(m, P, &rng);
                int src[10] = {5, 6, 7, 8, 3, 9, 10, 11, 12, 3}, out[2 * 8], olen[2];
                nb_mem_reset();
                assert_int_equal(
                    nb_tf_translate(m, P, src, 2, 5, 3, 0.6, 3, 8, out, olen, NULL, &err), 0);
                double dec = nb_tf_decode_mem_bytes(&c, 2, 5, 3, omp_get_max_threads());
                assert_true(dec >= (double)nb_mem_noted());
                assert_true(dec <= 1.5 * (double)nb_mem_noted());
                free(P);
                nb_tf_free(m);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnnsearch),
        cmocka_unit_test(test_transformer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
