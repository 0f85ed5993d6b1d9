// nn/cuda/mlp.cu — the MLP of nn/mlp.c on the GPU: the same layers and the same order of
// operations, with cuBLAS GEMMs in full fp32 (no TF32: CUBLAS_DEFAULT_MATH), the norm kernels
// of norms.cu, and Adam. Interface: nbcuda.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "nn/cuda/nbcuda.h"
}

#define NO_OFF ((size_t)-1)

struct nb_cuda_mlp {
    cublasHandle_t h;
    int nlayers, dims[NB_MLP_MAX_LAYERS + 1], Bmax, maxd;
    nb_norm_cfg norm;
    nb_act_kind act;
    float leaky_alpha;
    nb_layout layout;
    struct {
        nb_norm_kind kind;
        int k;
        size_t w, b, g, rmean, rvar;
    } L[NB_MLP_MAX_LAYERS];
    float *params, *grads, *adam_m, *adam_v;
    const float *inp[NB_MLP_MAX_LAYERS];
    float *pre[NB_MLP_MAX_LAYERS], *out[NB_MLP_MAX_LAYERS];
    float *mean[NB_MLP_MAX_LAYERS], *rstd[NB_MLP_MAX_LAYERS];
    float *wn_norm[NB_MLP_MAX_LAYERS], *wn_scale[NB_MLP_MAX_LAYERS];
    float *probs, *dbuf0, *dbuf1, *x;
    int *y;
    double *loss; // (Bmax) per-row losses
    double *loss_h;
    int last_B, last_training;
};

#define CKE(call, what)                                                                            \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            nb_errf(err, "CUDA error in %s: %s", what, cudaGetErrorString(e_));                    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
#define CKB(call, what)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            nb_errf(err, "cuBLAS error %d in %s", (int)s_, what);                                  \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int grid_for(size_t n) {
    size_t b = (n + 255) / 256;
    return (int)(b < 1056 ? (b ? b : 1) : 1056);
}
#define GRID_LOOP(i, n)                                                                            \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

// ---- small kernels ---------------------------------------------------------------------------

__global__ void k_bias_rows(float *out, const float *b, int B, int OC) {
    GRID_LOOP(i, (size_t)B * OC) out[i] = b[i % OC];
}

__global__ void k_scale_bias(float *out, const float *pre, const float *s, const float *b, int B,
                             int OC) {
    GRID_LOOP(i, (size_t)B * OC) {
        int o = (int)(i % OC);
        out[i] = pre[i] * s[o] + b[o];
    }
}

// WeightNorm's per-unit norm and scale, one warp per unit, the sum in double.
__global__ void k_wn_scale(float *nrm, float *s, const float *V, const float *g, int OC, int C) {
    const int o = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (o >= OC) return;
    double ss = 0;
    for (int i = lane; i < C; i += 32) {
        double v = V[(size_t)o * C + i];
        ss += v * v;
    }
    for (int d = 16; d > 0; d >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, d);
    if (lane) return;
    double n = sqrt(ss);
    if (!(n > NB_WN_FLOOR)) n = NB_WN_FLOOR;
    nrm[o] = (float)n;
    s[o] = (float)((double)g[o] / n);
}

__global__ void k_act(float *z, size_t n, int act, float alpha) {
    GRID_LOOP(i, n) {
        float x = z[i];
        switch (act) {
        case NB_ACT_RELU:
            z[i] = x < 0 ? 0.f : x;
            break;
        case NB_ACT_LEAKY_RELU:
            z[i] = x < 0 ? alpha * x : x;
            break;
        case NB_ACT_TANH:
            z[i] = tanhf(x);
            break;
        default:
            z[i] = 1.f / (1.f + expf(-x));
            break;
        }
    }
}

__global__ void k_act_bwd(float *dz, const float *dout, const float *out, size_t n, int act,
                          float alpha) {
    GRID_LOOP(i, n) {
        float y = out[i], d = dout[i];
        switch (act) {
        case NB_ACT_RELU:
            dz[i] = y > 0 ? d : 0.f;
            break;
        case NB_ACT_LEAKY_RELU:
            dz[i] = y > 0 ? d : alpha * d;
            break;
        case NB_ACT_TANH:
            dz[i] = d * (1.f - y * y);
            break;
        default:
            dz[i] = d * y * (1.f - y);
            break;
        }
    }
}

// Softmax and cross-entropy per row, one thread per row (the classes are few), as xent_row.
__global__ void k_xent(float *probs, double *loss, const float *x, const int *y, int B, int V) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B) return;
    const float *xr = x + (size_t)r * V;
    float *p = probs + (size_t)r * V;
    float mx = xr[0];
    for (int j = 1; j < V; j++)
        mx = xr[j] > mx ? xr[j] : mx;
    double s = 0;
    for (int j = 0; j < V; j++) {
        float e = expf(xr[j] - mx);
        p[j] = e;
        s += (double)e;
    }
    const float inv = (float)(1.0 / s);
    for (int j = 0; j < V; j++)
        p[j] *= inv;
    const int t = y ? y[r] : -1;
    loss[r] = t < 0 || t >= V ? 0.0 / 0.0 : log(s) - ((double)xr[t] - (double)mx);
}

__global__ void k_xent_bwd(float *d, const float *p, const int *y, int B, int V) {
    const float invB = (float)(1.0 / B);
    GRID_LOOP(i, (size_t)B * V) {
        int r = (int)(i / V), j = (int)(i % V);
        d[i] = (p[i] - (j == y[r] ? 1.f : 0.f)) * invB;
    }
}

// Column sums of dout over B rows, in row order (as nb_dense_backward's bias gradient).
__global__ void k_colsum(float *db, const float *d, int B, int OC) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = db[o];
    for (int r = 0; r < B; r++)
        s += d[(size_t)r * OC + o];
    db[o] = s;
}

// WeightNorm's backward up to the GEMMs (wn_backward_out in nn/mlp.c), one thread per unit.
__global__ void k_wn_bwd_out(float *dpre, float *dg, float *db, float *coef, const float *dz,
                             const float *pre, const float *s, const float *g, const float *nrm,
                             int B, int OC) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    double sp = 0, sb = 0;
    for (int r = 0; r < B; r++) {
        const size_t i = (size_t)r * OC + o;
        double d = dz[i];
        sp += d * pre[i];
        sb += d;
        dpre[i] = dz[i] * s[o];
    }
    double n = nrm[o], dgo = sp / n;
    dg[o] += (float)dgo;
    db[o] += (float)sb;
    coef[o] = n > (double)(float)NB_WN_FLOOR ? (float)((double)g[o] * dgo / (n * n)) : 0.f;
}

__global__ void k_wn_dv(float *dV, const float *V, const float *coef, int OC, int C) {
    GRID_LOOP(i, (size_t)OC * C) dV[i] -= coef[i / C] * V[i];
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, size_t n, float b1, float omb1,
                       float b2, float omb2, float eps, float lr_t, int inside) {
    GRID_LOOP(i, n) {
        float gi = g[i];
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(omb1, gi));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(omb2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        float den = inside ? sqrtf(__fadd_rn(vi, eps)) : __fadd_rn(sqrtf(vi), eps);
        p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(lr_t, mi), den));
    }
}

// ---- the model ---------------------------------------------------------------------------------

extern "C" void nb_cuda_mlp_free(nb_cuda_mlp *m) {
    if (!m) return;
    if (m->h) cublasDestroy(m->h);
    cudaFree(m->params), cudaFree(m->grads), cudaFree(m->adam_m), cudaFree(m->adam_v);
    cudaFree(m->probs), cudaFree(m->dbuf0), cudaFree(m->dbuf1), cudaFree(m->x), cudaFree(m->y);
    cudaFree(m->loss);
    for (int l = 0; l < NB_MLP_MAX_LAYERS; l++) {
        cudaFree(m->pre[l]), cudaFree(m->out[l]), cudaFree(m->mean[l]), cudaFree(m->rstd[l]);
        cudaFree(m->wn_norm[l]), cudaFree(m->wn_scale[l]);
    }
    free(m->loss_h);
    free(m);
}

extern "C" nb_cuda_mlp *nb_cuda_mlp_new(const nb_mlp *host, nb_err *err) {
    if (nb_cuda_init(err)) return NULL;
    nb_cuda_mlp *m = (nb_cuda_mlp *)calloc(1, sizeof *m);
    if (!m) return nb_errf(err, "out of memory"), (nb_cuda_mlp *)NULL;
    m->nlayers = host->nlayers;
    memcpy(m->dims, host->dims, sizeof m->dims);
    m->Bmax = host->Bmax;
    m->norm = host->norm;
    m->act = host->act;
    m->leaky_alpha = host->leaky_alpha;
    m->layout = host->layout;
    m->maxd = 0;
    for (int l = 0; l <= m->nlayers; l++)
        if (m->dims[l] > m->maxd) m->maxd = m->dims[l];
    for (int l = 0; l < m->nlayers; l++) {
        m->L[l].kind = host->L[l].kind;
        m->L[l].k = host->L[l].k;
        m->L[l].w = host->L[l].w;
        m->L[l].b = host->L[l].b;
        m->L[l].g = host->L[l].g;
        m->L[l].rmean = host->L[l].rmean;
        m->L[l].rvar = host->L[l].rvar;
    }
    if (cublasCreate(&m->h) != CUBLAS_STATUS_SUCCESS) {
        nb_errf(err, "cannot start cuBLAS");
        m->h = NULL;
        nb_cuda_mlp_free(m);
        return NULL;
    }
    cublasSetMathMode(m->h, CUBLAS_DEFAULT_MATH); // full fp32: no TF32
    const size_t P = m->layout.total, B = (size_t)m->Bmax;
    int ok = 1;
#define ALLOC(ptr, bytes)                                                                          \
    if (ok) {                                                                                      \
        void *p_ = nb_cuda_alloc((bytes), err);                                                    \
        ok = p_ != NULL;                                                                           \
        *(void **)&(ptr) = p_;                                                                     \
    }
    ALLOC(m->params, P * 4);
    ALLOC(m->grads, P * 4);
    ALLOC(m->adam_m, P * 4);
    ALLOC(m->adam_v, P * 4);
    ALLOC(m->probs, B * m->dims[m->nlayers] * 4);
    ALLOC(m->dbuf0, B * m->maxd * 4);
    ALLOC(m->dbuf1, B * m->maxd * 4);
    ALLOC(m->x, B * m->dims[0] * 4);
    ALLOC(m->y, B * sizeof(int));
    ALLOC(m->loss, B * sizeof(double));
    for (int l = 0; l < m->nlayers && ok; l++) {
        size_t OC = m->dims[l + 1], W = B > OC ? B : OC;
        ALLOC(m->pre[l], B * OC * 4);
        ALLOC(m->out[l], B * OC * 4);
        ALLOC(m->mean[l], W * 4);
        ALLOC(m->rstd[l], W * 4);
        if (m->L[l].kind == NB_NORM_WEIGHT) {
            ALLOC(m->wn_norm[l], OC * 4);
            ALLOC(m->wn_scale[l], OC * 4);
        }
    }
#undef ALLOC
    if (ok) ok = (m->loss_h = (double *)malloc(B * sizeof(double))) != NULL;
    if (!ok) {
        nb_cuda_mlp_free(m);
        return NULL;
    }
    if (nb_cuda_mlp_sync(m, (nb_mlp *)host, 1, err)) {
        nb_cuda_mlp_free(m);
        return NULL;
    }
    return m;
}

extern "C" int nb_cuda_mlp_sync(nb_cuda_mlp *m, nb_mlp *host, int to_gpu, nb_err *err) {
    const size_t bytes = m->layout.total * sizeof(float);
    float *d[3] = {m->params, m->adam_m, m->adam_v};
    float *h[3] = {host->params, host->adam_m, host->adam_v};
    for (int i = 0; i < 3; i++)
        CKE(cudaMemcpy(to_gpu ? (void *)d[i] : (void *)h[i], to_gpu ? (void *)h[i] : (void *)d[i],
                       bytes, to_gpu ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost),
            "a copy of the parameters");
    return 0;
}

// out (B, OC) = inp (B, C) W^T (+ out when beta = 1), row-major, through column-major cuBLAS.
static int gemm_fwd(nb_cuda_mlp *m, float *out, const float *inp, const float *W, int B, int C,
                    int OC, float beta, nb_err *err) {
    const float one = 1;
    CKB(cublasSgemm(m->h, CUBLAS_OP_T, CUBLAS_OP_N, OC, B, C, &one, W, C, inp, C, &beta, out, OC),
        "a forward GEMM");
    return 0;
}

static int layer_forward(nb_cuda_mlp *m, int l, const float *inp, int B, int training,
                         nb_err *err) {
    const int C = m->dims[l], OC = m->dims[l + 1];
    const float *P = m->params, *W = P + m->L[l].w, *b = P + m->L[l].b;
    const float *g = m->L[l].g != NO_OFF ? P + m->L[l].g : NULL;
    float *out = m->out[l], *pre = m->pre[l];
    const size_t n = (size_t)B * OC;
    m->inp[l] = inp;
    int rc = 0;
    switch (m->L[l].kind) {
    case NB_NORM_NONE:
        k_bias_rows<<<grid_for(n), 256>>>(out, b, B, OC);
        rc = gemm_fwd(m, out, inp, W, B, C, OC, 1, err);
        break;
    case NB_NORM_WEIGHT:
        k_wn_scale<<<(OC + 7) / 8, 256>>>(m->wn_norm[l], m->wn_scale[l], W, g, OC, C);
        rc = gemm_fwd(m, pre, inp, W, B, C, OC, 0, err);
        k_scale_bias<<<grid_for(n), 256>>>(out, pre, m->wn_scale[l], b, B, OC);
        break;
    case NB_NORM_LAYER:
        rc = gemm_fwd(m, pre, inp, W, B, C, OC, 0, err);
        if (!rc)
            rc = nb_cuda_layernorm_forward(out, m->mean[l], m->rstd[l], pre, g, b, B, OC, &m->norm,
                                           NB_CUDA_F32, err);
        break;
    case NB_NORM_RMS:
    case NB_NORM_PRMS:
        rc = gemm_fwd(m, pre, inp, W, B, C, OC, 0, err);
        if (!rc)
            rc = nb_cuda_rmsnorm_forward(out, m->rstd[l], pre, g, b, B, OC,
                                         m->L[l].kind == NB_NORM_RMS ? OC : m->L[l].k, &m->norm,
                                         NB_CUDA_F32, err);
        break;
    case NB_NORM_BATCH:
        rc = gemm_fwd(m, pre, inp, W, B, C, OC, 0, err);
        if (!rc)
            rc = nb_cuda_batchnorm_forward(out, m->mean[l], m->rstd[l], m->params + m->L[l].rmean,
                                           m->params + m->L[l].rvar, pre, g, b, B, OC, training,
                                           &m->norm, NB_CUDA_F32, err);
        break;
    default:
        break;
    }
    if (rc) return rc;
    if (l < m->nlayers - 1) k_act<<<grid_for(n), 256>>>(out, n, m->act, m->leaky_alpha);
    CKE(cudaGetLastError(), "a layer's forward");
    return 0;
}

extern "C" double nb_cuda_mlp_forward(nb_cuda_mlp *m, const float *x, const int *y, int B,
                                      int training, float *probs, nb_err *err) {
    if (B < 1 || B > m->Bmax) return nb_errf(err, "batch %d is out of range", B), NAN;
    if (nb_cuda_upload(m->x, x, sizeof(float) * (size_t)B * m->dims[0], err)) return NAN;
    if (y && nb_cuda_upload(m->y, y, sizeof(int) * (size_t)B, err)) return NAN;
    const float *inp = m->x;
    for (int l = 0; l < m->nlayers; l++) {
        if (layer_forward(m, l, inp, B, training, err)) return NAN;
        inp = m->out[l];
    }
    m->last_B = B;
    m->last_training = training;
    const int V = m->dims[m->nlayers];
    k_xent<<<(B + 127) / 128, 128>>>(m->probs, m->loss, inp, y ? m->y : NULL, B, V);
    if (probs && nb_cuda_download(probs, m->probs, sizeof(float) * (size_t)B * V, err)) return NAN;
    if (!y) return nb_cuda_sync(err) ? NAN : 0;
    if (nb_cuda_download(m->loss_h, m->loss, sizeof(double) * (size_t)B, err)) return NAN;
    // rows summed in order in chunks of 64, as nb_softmax_xent_forward
    double total = 0;
    for (int c = 0; c < B; c += 64) {
        double s = 0;
        for (int r = c; r < B && r < c + 64; r++)
            s += m->loss_h[r];
        total += s;
    }
    return total / B;
}

extern "C" int nb_cuda_mlp_backward(nb_cuda_mlp *m, nb_err *err) {
    const int B = m->last_B, L = m->nlayers;
    CKE(cudaMemsetAsync(m->grads, 0, m->layout.total * sizeof(float), 0), "zeroing gradients");
    float *G = m->dbuf0, *G2 = m->dbuf1, *grads = m->grads;
    const float one = 1, zero = 0;
    k_xent_bwd<<<grid_for((size_t)B * m->dims[L]), 256>>>(G, m->probs, m->y, B, m->dims[L]);
    for (int l = L - 1; l >= 0; l--) {
        const int C = m->dims[l], OC = m->dims[l + 1];
        const size_t n = (size_t)B * OC;
        const float *P = m->params;
        const float *g = m->L[l].g != NO_OFF ? P + m->L[l].g : NULL;
        float *dg = m->L[l].g != NO_OFF ? grads + m->L[l].g : NULL;
        float *db = grads + m->L[l].b;
        float *dz = G;
        if (l < L - 1) {
            dz = G2;
            k_act_bwd<<<grid_for(n), 256>>>(dz, G, m->out[l], n, m->act, m->leaky_alpha);
        }
        float *dpre = dz;
        const nb_norm_kind kind = m->L[l].kind;
        int rc = 0;
        if (kind == NB_NORM_WEIGHT) {
            dpre = dz == G ? G2 : G;
            k_wn_bwd_out<<<(OC + 127) / 128, 128>>>(dpre, dg, db, m->mean[l], dz, m->pre[l],
                                                    m->wn_scale[l], g, m->wn_norm[l], B, OC);
        } else if (kind == NB_NORM_LAYER) {
            dpre = dz == G ? G2 : G;
            rc = nb_cuda_layernorm_backward(dpre, dg, db, dz, m->pre[l], g, m->mean[l], m->rstd[l],
                                            B, OC, &m->norm, NB_CUDA_F32, err);
        } else if (kind == NB_NORM_RMS || kind == NB_NORM_PRMS) {
            dpre = dz == G ? G2 : G;
            rc = nb_cuda_rmsnorm_backward(dpre, dg, db, dz, m->pre[l], g, m->rstd[l], B, OC,
                                          kind == NB_NORM_RMS ? OC : m->L[l].k, &m->norm,
                                          NB_CUDA_F32, err);
        } else if (kind == NB_NORM_BATCH) {
            dpre = dz == G ? G2 : G;
            rc = nb_cuda_batchnorm_backward(dpre, dg, db, dz, m->pre[l], g, m->mean[l], m->rstd[l],
                                            B, OC, m->last_training, &m->norm, NB_CUDA_F32, err);
        }
        if (rc) return rc;
        float *dinp = l > 0 ? (dpre == G ? G2 : G) : NULL;
        const float *W = P + m->L[l].w;
        if (dinp)
            CKB(cublasSgemm(m->h, CUBLAS_OP_N, CUBLAS_OP_N, C, B, OC, &one, W, C, dpre, OC, &zero,
                            dinp, C),
                "a backward GEMM (input)");
        CKB(cublasSgemm(m->h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, B, &one, m->inp[l], C, dpre, OC,
                        &one, grads + m->L[l].w, C),
            "a backward GEMM (weights)");
        if (kind == NB_NORM_NONE) k_colsum<<<(OC + 127) / 128, 128>>>(db, dpre, B, OC);
        if (kind == NB_NORM_WEIGHT)
            k_wn_dv<<<grid_for((size_t)OC * C), 256>>>(grads + m->L[l].w, W, m->mean[l], OC, C);
        CKE(cudaGetLastError(), "a layer's backward");
        if (dinp && dinp != G) {
            float *t = G;
            G = dinp;
            G2 = t;
        }
    }
    return 0;
}

extern "C" int nb_cuda_mlp_adam(nb_cuda_mlp *m, const nb_adam_cfg *cfg, long t, nb_err *err) {
    // the constants exactly as adam_consts in nn/optim.c
    double td = (double)t, c1 = 1, c2 = 1;
    if (cfg->bias == NB_ADAM_BIAS_STANDARD) {
        c1 = 1.0 - pow(cfg->beta1, td);
        c2 = 1.0 - pow(cfg->beta2, td);
    } else if (cfg->bias == NB_ADAM_BIAS_KIROS) {
        c1 = 1.0 - pow(0.1, td);
        c2 = 1.0 - pow(0.001, td);
    }
    double lr_t = cfg->lr * sqrt(c2) / c1, eps = cfg->eps;
    if (cfg->eps_corrected) eps *= cfg->eps_inside ? c2 : sqrt(c2);
    for (int i = 0; i < m->layout.count; i++) {
        const nb_tensor *te = &m->layout.t[i];
        if (!te->trainable) continue;
        const size_t o = te->off;
        k_adam<<<grid_for(te->n), 256>>>(m->params + o, m->grads + o, m->adam_m + o, m->adam_v + o,
                                         te->n, (float)cfg->beta1, (float)(1.0 - cfg->beta1),
                                         (float)cfg->beta2, (float)(1.0 - cfg->beta2), (float)eps,
                                         (float)lr_t, cfg->eps_inside);
    }
    CKE(cudaGetLastError(), "Adam");
    return 0;
}
