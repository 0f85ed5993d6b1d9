/* tests/cuda/test_cuda.c — every CUDA norm kernel against the CPU implementation (which the
 * unit tests gradient-check): forward outputs and statistics, backward dx, dg and db, at the
 * awkward widths 1, 7, 1000 and 4097 (and 4096 for the vector path), pRMSNorm with k = 1, both
 * eps placements, fp32 and bf16 input/output; and the MLP's loss and gradients after a step.
 * Error: ||gpu - cpu|| / ||cpu|| per array; fp32 must be under 1e-5, bf16 (the CPU given the
 * same bf16-rounded inputs, its outputs rounded) under 2e-2. Outputs are poisoned with NaN first,
 * so an element never written fails. Where no GPU is present it prints SKIP and passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/nbcuda.h"
#include "nn/nn.h"

static int failures = 0, checks = 0;
static nb_rng rng;

static void die(const nb_err *e) {
    fprintf(stderr, "error: %s\n", e->msg);
    exit(1);
}

/* ||a - ref|| / max(||ref||, floor): floor is the size of the terms that cancel into ref (dx of a
 * row whose exact gradient is 0, e.g. LayerNorm or WeightNorm of one value: both sides are then
 * rounding noise, and only its size can be compared). */
static double rel_err(const float *a, const float *ref, size_t n, double floor) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        d += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    r = sqrt(r);
    if (r < floor) r = floor;
    return r > 0 ? sqrt(d) / r : sqrt(d);
}

static double g_floor; /* set per array by the caller; 0 for none */

static void check(const char *what, const char *arr, const float *a, const float *ref, size_t n,
                  double tol) {
    double e = rel_err(a, ref, n, g_floor);
    g_floor = 0;
    checks++;
    int ok = e <= tol;
    if (!ok) failures++;
    printf("%s %-44s %-5s rel err %.2e (tol %.0e)\n", ok ? "ok  " : "FAIL", what, arr, e, tol);
}

static float bf16_round(float f) { /* round to nearest even at bf16, as __float2bfloat16_rn */
    unsigned u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static float *frand(size_t n, double scale, double off) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(off + scale * nb_rng_normal(&rng));
    return p;
}

static void *dnew(size_t bytes) {
    nb_err e = {0};
    void *p = nb_cuda_alloc(bytes, &e);
    if (!p) die(&e);
    return p;
}

static void up(void *d, const float *h, size_t n, nb_cuda_dtype dt) {
    nb_err e = {0};
    if (nb_cuda_upload_as(d, h, n, dt, &e)) die(&e);
}
static void down(float *h, const void *d, size_t n, nb_cuda_dtype dt) {
    nb_err e = {0};
    if (nb_cuda_sync(&e) || nb_cuda_download_as(h, d, n, dt, &e)) die(&e);
}
static void poison(void *d, size_t n, nb_cuda_dtype dt) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    up(d, p, n, dt);
    free(p);
}

/* One norm at one shape: CPU and GPU forward and backward, compared. */
static void case_norm(nb_norm_kind kind, int B, int C, int k, int outside, nb_cuda_dtype dt) {
    size_t N = (size_t)B * C, W = (size_t)(B > C ? B : C);
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.eps_outside = outside;
    cfg.bn_unbiased_batch = 1;
    float *x = frand(N, 1.0, 0.3), *dy = frand(N, 1.0, 0), *g = frand(W, 0.2, 1),
          *b = frand(W, 0.2, 0);
    if (dt == NB_CUDA_BF16)
        for (size_t i = 0; i < N; i++)
            x[i] = bf16_round(x[i]), dy[i] = bf16_round(dy[i]);
    float *y = calloc(N, 4), *dx = calloc(N, 4), *mean = calloc(W, 4), *rstd = calloc(W, 4),
          *dg = calloc(W, 4), *db = calloc(W, 4), *rm = calloc(W, 4), *rv = malloc(W * 4);
    for (size_t i = 0; i < W; i++)
        rv[i] = 1;
    size_t esz = dt == NB_CUDA_F32 ? 4 : 2;
    void *dX = dnew(N * esz), *dY = dnew(N * esz), *dDY = dnew(N * esz), *dDX = dnew(N * esz);
    float *dG = dnew(W * 4), *dB = dnew(W * 4), *dM = dnew(W * 4), *dR = dnew(W * 4),
          *dDG = dnew(W * 4), *dDB = dnew(W * 4), *dRM = dnew(W * 4), *dRV = dnew(W * 4);
    up(dX, x, N, dt), up(dDY, dy, N, dt), up(dG, g, W, NB_CUDA_F32), up(dB, b, W, NB_CUDA_F32);
    up(dRV, rv, W, NB_CUDA_F32);
    poison(dY, N, dt), poison(dDX, N, dt), poison(dM, W, NB_CUDA_F32), poison(dR, W, NB_CUDA_F32);
    nb_err e = {0};
    int rc = 0;
    const char *name = nb_norm_name(kind);
    size_t nstat = kind == NB_NORM_BATCH ? (size_t)C : (size_t)B;
    switch (kind) {
    case NB_NORM_LAYER:
        nb_layernorm_forward(y, mean, rstd, x, g, b, B, C, &cfg);
        nb_layernorm_backward(dx, dg, db, dy, x, g, mean, rstd, B, C, &cfg);
        rc = nb_cuda_layernorm_forward(dY, dM, dR, dX, dG, dB, B, C, &cfg, dt, &e) ||
             nb_cuda_layernorm_backward(dDX, dDG, dDB, dDY, dX, dG, dM, dR, B, C, &cfg, dt, &e);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        nb_rmsnorm_forward(y, rstd, x, g, b, B, C, k, &cfg);
        nb_rmsnorm_backward(dx, dg, db, dy, x, g, rstd, B, C, k, &cfg);
        rc = nb_cuda_rmsnorm_forward(dY, dR, dX, dG, dB, B, C, k, &cfg, dt, &e) ||
             nb_cuda_rmsnorm_backward(dDX, dDG, dDB, dDY, dX, dG, dR, B, C, k, &cfg, dt, &e);
        break;
    case NB_NORM_BATCH:
        nb_batchnorm_forward(y, mean, rstd, rm, rv, x, g, b, B, C, 1, &cfg);
        nb_batchnorm_backward(dx, dg, db, dy, x, g, mean, rstd, B, C, 1, &cfg);
        rc = nb_cuda_batchnorm_forward(dY, dM, dR, dRM, dRV, dX, dG, dB, B, C, 1, &cfg, dt, &e) ||
             nb_cuda_batchnorm_backward(dDX, dDG, dDB, dDY, dX, dG, dM, dR, B, C, 1, &cfg, dt, &e);
        break;
    case NB_NORM_WEIGHT: /* (B, C) as a weight of B units */
        nb_weightnorm_forward(y, rstd, x, g, B, C);
        nb_weightnorm_backward(dx, dg, dy, x, g, rstd, B, C);
        rc = nb_cuda_weightnorm_forward(dY, dR, dX, dG, B, C, dt, &e) ||
             nb_cuda_weightnorm_backward(dDX, dDG, dDY, dX, dG, dR, B, C, dt, &e);
        break;
    default:
        break;
    }
    if (rc) die(&e);
    float *gy = malloc(N * 4), *gdx = malloc(N * 4), *gs = malloc(W * 4);
    char what[96];
    snprintf(what, sizeof what, "%s %dx%d%s%s %s", name, B, C,
             kind == NB_NORM_PRMS ? (k == 1 ? " k=1" : " k<C") : "", outside ? " eps-out" : "",
             dt == NB_CUDA_F32 ? "f32" : "bf16");
    double tol = dt == NB_CUDA_F32 ? 1e-5 : 2e-2;
    if (dt == NB_CUDA_BF16)
        for (size_t i = 0; i < N; i++)
            y[i] = bf16_round(y[i]), dx[i] = bf16_round(dx[i]);
    down(gy, dY, N, dt);
    check(what, "y", gy, y, N, tol);
    down(gs, dR, nstat, NB_CUDA_F32);
    check(what, kind == NB_NORM_WEIGHT ? "|v|" : "rstd", gs, rstd, nstat, tol);
    if (kind == NB_NORM_LAYER || kind == NB_NORM_BATCH) {
        down(gs, dM, nstat, NB_CUDA_F32);
        check(what, "mean", gs, mean, nstat, tol);
    }
    down(gdx, dDX, N, dt);
    { /* the cancelling terms' size: r g dy per value (WN: (g/||v||) dw) */
        double t = 0;
        for (int i = 0; i < B; i++)
            for (int c = 0; c < C; c++) {
                double s = kind == NB_NORM_WEIGHT  ? g[i] / rstd[i]
                           : kind == NB_NORM_BATCH ? (double)rstd[c] * g[c]
                                                   : (double)rstd[i] * g[c];
                s *= dy[(size_t)i * C + c];
                t += s * s;
            }
        g_floor = sqrt(t);
    }
    check(what, "dx", gdx, dx, N, tol);
    size_t ng = kind == NB_NORM_WEIGHT ? (size_t)B : (size_t)C;
    down(gs, dDG, ng, NB_CUDA_F32);
    check(what, "dg", gs, dg, ng, tol);
    if (kind != NB_NORM_WEIGHT) {
        down(gs, dDB, (size_t)C, NB_CUDA_F32);
        check(what, "db", gs, db, (size_t)C, tol);
    }
    if (kind == NB_NORM_BATCH) {
        down(gs, dRV, (size_t)C, NB_CUDA_F32);
        check(what, "rvar", gs, rv, (size_t)C, tol);
    }
    void *dev[] = {dX, dY, dDY, dDX, dG, dB, dM, dR, dDG, dDB, dRM, dRV};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        nb_cuda_free(dev[i]);
    free(x), free(dy), free(g), free(b), free(y), free(dx), free(mean), free(rstd), free(dg);
    free(db), free(rm), free(rv), free(gy), free(gdx), free(gs);
}

/* The MLP: one forward (loss), backward (gradients) and Adam step on the GPU against the CPU. */
static void case_mlp(nb_norm_kind kind) {
    const int dims[] = {64, 100, 100, 10}, B = 32;
    nb_norm_cfg cfg;
    nb_norm_cfg_default(&cfg, kind);
    cfg.bn_unbiased_batch = 1;
    nb_mlp m;
    nb_err e = {0};
    nb_rng r;
    nb_rng_seed(&r, 7, NB_STREAM_INIT);
    if (nb_mlp_init(&m, 3, dims, &cfg, NB_ACT_RELU, B, &r, &e)) die(&e);
    float *x = frand((size_t)B * dims[0], 1, 0);
    int y[32];
    for (int i = 0; i < B; i++)
        y[i] = (int)nb_rng_below(&rng, 10);
    nb_mlp_data_init(&m, x, B);
    nb_cuda_mlp *d = nb_cuda_mlp_new(&m, &e);
    if (!d) die(&e);
    nb_mlp_zero_grad(&m);
    double lc = nb_mlp_forward(&m, x, y, B, 1);
    nb_mlp_backward(&m, y);
    double lg = nb_cuda_mlp_forward(d, x, y, B, 1, NULL, &e);
    if (isnan(lg) || nb_cuda_mlp_backward(d, &e)) die(&e);
    char what[64];
    snprintf(what, sizeof what, "mlp 64-100-100-10 %s batch 32", nb_norm_name(kind));
    float a = (float)lg, b = (float)lc;
    check(what, "loss", &a, &b, 1, 1e-5);
    size_t P = m.layout.total;
    nb_adam_cfg ac;
    nb_adam_cfg_default(&ac);
    ac.eps_corrected = 1;
    nb_adam_step_layout(m.params, m.grads, m.adam_m, m.adam_v, &m.layout, 1, &ac);
    if (nb_cuda_mlp_adam(d, &ac, 1, &e)) die(&e);
    float *cpu_params = malloc(P * 4);
    memcpy(cpu_params, m.params, P * 4);
    if (nb_cuda_mlp_sync(d, &m, 0, &e)) die(&e);
    check(what, "Adam params", m.params, cpu_params, P, 1e-5);
    free(cpu_params), free(x);
    nb_cuda_mlp_free(d);
    nb_mlp_free(&m);
}

int main(void) {
    nb_err e = {0};
    if (nb_cuda_init(&e)) {
        printf("SKIP: %s\n", e.msg);
        return 0;
    }
    char desc[512];
    nb_cuda_describe(desc, sizeof desc);
    printf("# %s\n", desc);
    nb_rng_seed(&rng, 2024, NB_STREAM_SYNTH);
    const int widths[] = {1, 7, 1000, 4096, 4097};
    for (int dt = 0; dt < 2; dt++)
        for (int o = 0; o < 2; o++)
            for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
                int C = widths[w], B = 37;
                nb_cuda_dtype t = dt ? NB_CUDA_BF16 : NB_CUDA_F32;
                case_norm(NB_NORM_LAYER, B, C, C, o, t);
                case_norm(NB_NORM_RMS, B, C, C, o, t);
                case_norm(NB_NORM_PRMS, B, C, 1, o, t);
                if (C > 16) case_norm(NB_NORM_PRMS, B, C, C / 16, o, t);
                case_norm(NB_NORM_BATCH, B, C, C, o, t);
                if (!o) case_norm(NB_NORM_WEIGHT, B, C, C, 0, t);
            }
    /* many rows: the persistent backward grid and its partial sums */
    case_norm(NB_NORM_LAYER, 5000, 1000, 1000, 0, NB_CUDA_F32);
    case_norm(NB_NORM_RMS, 3000, 4096, 4096, 0, NB_CUDA_F32);
    /* the six norms: DyT (NB_NORM_DYT, the last kind) is not in this model yet */
    for (int k = 0; k < NB_NORM_DYT; k++)
        case_mlp((nb_norm_kind)k);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
