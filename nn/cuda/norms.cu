// nn/cuda/norms.cu — the norms' forward and backward kernels on the GPU, and the backend's
// runtime plumbing (device selection, memory, timing). Interface and contracts: nbcuda.h;
// reduction order: docs/cuda.md.
//
// Row-wise norms (layer, rms, prms, weight) use one kernel shape: TPR threads per row (a warp
// for narrow rows, a block for wide ones), each thread holding NV vectors of VW values of its
// row in registers (16-byte loads: 4 floats or 8 bf16), so x is read once and y written once.
// Statistics are fp32 sums: each thread adds its own values in index order, then a butterfly
// over the warp (xor 16, 8, 4, 2, 1: every lane ends with the bit-identical sum), then the
// warps' sums in warp order. Per-row scalars (mean, r, the backward coefficients) are formed in
// double from those sums with the CPU's eps placement (nn/normmath.h).
//
// Gain/bias gradients are two-stage without atomics: a persistent grid of G row groups, each
// thread summing dy*xhat and dy in fp32 for its fixed columns over its group's rows, writes one
// partial row per group; a second kernel adds the G partials per column in group order, in
// double, and adds the result to dg/db. BatchNorm (per column over rows) accumulates in double.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "nn/cuda/nbcuda.h"
}

#define WN_FLOOR NB_WN_FLOOR

// ---- plumbing ------------------------------------------------------------------------------

static int g_ready = -1; // -1 not tried, 0 failed, 1 ready
static int g_sms = 0;
static void *g_ws = NULL; // scratch for the gradients' partial sums
static size_t g_ws_bytes = 0;

static int cuda_fail(nb_err *err, cudaError_t e, const char *what) {
    nb_errf(err, "CUDA error in %s: %s", what, cudaGetErrorString(e));
    return -1;
}
#define CK(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return cuda_fail(err, e_, what);                                    \
    } while (0)
#define CK_LAUNCH(what) CK(cudaGetLastError(), what)

extern "C" int nb_cuda_built(void) {
    return 1;
}

extern "C" int nb_cuda_init(nb_err *err) {
    if (g_ready == 1) return 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        nb_errf(err, "no CUDA device was found (%s)",
                e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees no GPU");
        nb_hintf(err, "run on a machine with an NVIDIA GPU and its driver, or use --device cpu");
        g_ready = 0;
        return -1;
    }
    e = cudaSetDevice(0);
    if (e != cudaSuccess) return cuda_fail(err, e, "cudaSetDevice");
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0), "device attributes");
    g_ready = 1;
    return 0;
}

extern "C" void nb_cuda_describe(char *buf, size_t n) {
    cudaDeviceProp p;
    int drv = 0, rt = 0;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        snprintf(buf, n, "unknown CUDA device");
        return;
    }
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char dv[96] = "";
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) {
        char line[256];
        if (fgets(line, sizeof line, f)) {
            const char *k = strstr(line, "Kernel Module");
            if (k && sscanf(k, "Kernel Module %95s", dv) != 1) dv[0] = 0;
        }
        fclose(f);
    }
    snprintf(buf, n, "%s (sm_%d%d, %d SMs, %.1f GiB); driver %s%sCUDA %d.%d; runtime %d.%d", p.name,
             p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, dv,
             dv[0] ? " " : "", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
}

extern "C" void *nb_cuda_alloc(size_t bytes, nb_err *err) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        nb_errf(err, "out of GPU memory for %zu bytes (%s)", bytes, cudaGetErrorString(e));
        return NULL;
    }
    if (cudaMemset(p, 0, bytes ? bytes : 16) != cudaSuccess) {
        cudaFree(p);
        nb_errf(err, "cannot clear GPU memory");
        return NULL;
    }
    return p;
}

extern "C" void nb_cuda_free(void *d) {
    if (d) cudaFree(d);
}

extern "C" int nb_cuda_upload(void *d, const void *s, size_t bytes, nb_err *err) {
    CK(cudaMemcpy(d, s, bytes, cudaMemcpyHostToDevice), "a copy to the GPU");
    return 0;
}

extern "C" int nb_cuda_download(void *d, const void *s, size_t bytes, nb_err *err) {
    CK(cudaMemcpy(d, s, bytes, cudaMemcpyDeviceToHost), "a copy from the GPU");
    return 0;
}

extern "C" int nb_cuda_copy(void *d, const void *s, size_t bytes, nb_err *err) {
    CK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, 0), "a copy on the GPU");
    return 0;
}

extern "C" int nb_cuda_sync(nb_err *err) {
    CK(cudaDeviceSynchronize(), "a kernel");
    return 0;
}

extern "C" int nb_cuda_time_ms(void (*fn)(void *), void *arg, double *ms, nb_err *err) {
    static cudaEvent_t a, b;
    static int have = 0;
    if (!have) {
        CK(cudaEventCreate(&a), "cudaEventCreate");
        CK(cudaEventCreate(&b), "cudaEventCreate");
        have = 1;
    }
    CK(cudaEventRecord(a, 0), "cudaEventRecord");
    fn(arg);
    CK(cudaEventRecord(b, 0), "cudaEventRecord");
    CK(cudaEventSynchronize(b), "a timed kernel");
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    *ms = t;
    return 0;
}

static void *workspace(size_t bytes, nb_err *err) {
    if (bytes <= g_ws_bytes) return g_ws;
    if (g_ws) cudaFree(g_ws);
    g_ws = NULL;
    g_ws_bytes = 0;
    if (cudaMalloc(&g_ws, bytes) != cudaSuccess) {
        nb_errf(err, "out of GPU memory for %zu bytes of scratch", bytes);
        g_ws = NULL;
        return NULL;
    }
    g_ws_bytes = bytes;
    return g_ws;
}

// ---- element access ----------------------------------------------------------------------------

__device__ __forceinline__ float tof(float v) {
    return v;
}
__device__ __forceinline__ float tof(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T fromf(float v);
template <> __device__ __forceinline__ float fromf<float>(float v) {
    return v;
}
template <> __device__ __forceinline__ __nv_bfloat16 fromf<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// VW consecutive values at p (16-byte aligned when VW > 1) as floats.
template <typename T, int VW> __device__ __forceinline__ void ldv(const T *p, float *v) {
    if constexpr (VW == 1) {
        v[0] = tof(p[0]);
    } else {
        static_assert(VW * sizeof(T) == 16, "16-byte vectors");
        uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int i = 0; i < VW; i++)
            v[i] = tof(e[i]);
    }
}
template <typename T, int VW> __device__ __forceinline__ void stv(T *p, const float *v) {
    if constexpr (VW == 1) {
        p[0] = fromf<T>(v[0]);
    } else {
        uint4 u;
        T *e = reinterpret_cast<T *>(&u);
#pragma unroll
        for (int i = 0; i < VW; i++)
            e[i] = fromf<T>(v[i]);
        *reinterpret_cast<uint4 *>(p) = u;
    }
}
// gains/biases are float: VW floats (VW 1, 4 or 8; 8 as two float4).
template <int VW> __device__ __forceinline__ void ldf(const float *p, float *v) {
    if constexpr (VW == 1) {
        v[0] = __ldg(p);
    } else {
#pragma unroll
        for (int i = 0; i < VW; i += 4) {
            float4 f = __ldg(reinterpret_cast<const float4 *>(p + i));
            v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
        }
    }
}

// ---- reductions --------------------------------------------------------------------------------

// Sums N values over the TPR threads of a row group (threadIdx.x in [0, TPR), one group per
// threadIdx.y). Every thread of the group receives the same bits. red: shared scratch of
// ROWS * (TPR/32) * N floats. Contains __syncthreads when TPR > 32 (all groups call it).
template <int TPR, int N> __device__ __forceinline__ void group_sum(float *v, float *red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int i = 0; i < N; i++)
            v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
    if constexpr (TPR > 32) {
        constexpr int NW = TPR / 32;
        const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
        float *r = red + threadIdx.y * NW * N;
        __syncthreads(); // the scratch may still be read from the previous call
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < N; i++)
                r[w * N + i] = v[i];
        __syncthreads();
#pragma unroll
        for (int i = 0; i < N; i++) {
            float s = 0;
#pragma unroll
            for (int k = 0; k < NW; k++)
                s += r[k * N + i];
            v[i] = s;
        }
    }
}

// ---- eps placement (nn/normmath.h, in double) --------------------------------------------------

__device__ __forceinline__ double rstd_of_d(double m, double eps, int outside) {
    return outside ? 1.0 / (sqrt(m) + eps) : 1.0 / sqrt(m + eps);
}
__device__ __forceinline__ double rstd_coef_d(double r, double m, double cnt, double eps,
                                              int outside) {
    if (!outside) return -r * r * r / cnt;
    const double s = sqrt(m);
    return s > 0 ? -r * r / (s * cnt) : 0.0;
}

// ---- row-wise kernels --------------------------------------------------------------------------

enum { MODE_LN, MODE_RMS, MODE_WN };

struct RowArgs {
    int B, C, k; // k: values in the RMS statistics (pRMS), C otherwise
    double eps;
    int outside;
    int mode;
};

template <int TPR> struct RowsPer { static constexpr int value = TPR >= 128 ? 1 : 128 / TPR; };

template <typename T, int VW, int TPR, int NV>
__global__ void __launch_bounds__(TPR *RowsPer<TPR>::value)
    rows_fwd(T *__restrict__ y, float *__restrict__ mean, float *__restrict__ rstd,
             const T *__restrict__ x, const float *__restrict__ g, const float *__restrict__ b,
             RowArgs a) {
    constexpr int ROWS = RowsPer<TPR>::value;
    __shared__ float red[ROWS * (TPR / 32) * 1 + 1];
    const int row = blockIdx.x * ROWS + threadIdx.y;
    const bool live = row < a.B; // dead groups still join the block's barriers
    const int C = a.C;
    const T *xr = x + (size_t)(live ? row : 0) * C;
    float v[NV][VW];
#pragma unroll
    for (int t = 0; t < NV; t++) {
        const int e = (threadIdx.x + t * TPR) * VW;
        if (live && e < C)
            ldv<T, VW>(xr + e, v[t]);
        else
#pragma unroll
            for (int i = 0; i < VW; i++)
                v[t][i] = 0;
    }
    float mu = 0, r;
    if (a.mode == MODE_LN) {
        float s[1] = {0};
#pragma unroll
        for (int t = 0; t < NV; t++)
#pragma unroll
            for (int i = 0; i < VW; i++)
                s[0] += v[t][i];
        group_sum<TPR, 1>(s, red);
        mu = (float)((double)s[0] / C);
        float q[1] = {0};
#pragma unroll
        for (int t = 0; t < NV; t++) {
            const int e = (threadIdx.x + t * TPR) * VW;
#pragma unroll
            for (int i = 0; i < VW; i++)
                if (e + i < C) q[0] += (v[t][i] - mu) * (v[t][i] - mu);
        }
        group_sum<TPR, 1>(q, red);
        r = (float)rstd_of_d((double)q[0] / C, a.eps, a.outside);
    } else {
        float q[1] = {0};
#pragma unroll
        for (int t = 0; t < NV; t++) {
            const int e = (threadIdx.x + t * TPR) * VW;
#pragma unroll
            for (int i = 0; i < VW; i++)
                if (e + i < a.k) q[0] += v[t][i] * v[t][i];
        }
        group_sum<TPR, 1>(q, red);
        if (a.mode == MODE_RMS) {
            r = (float)rstd_of_d((double)q[0] / a.k, a.eps, a.outside);
        } else { // WN: w = (g_row / ||v||) v
            double n = sqrt((double)q[0]);
            if (!(n > WN_FLOOR)) n = WN_FLOOR;
            r = (float)((double)g[live ? row : 0] / n);
            if (live && threadIdx.x == 0) rstd[row] = (float)n;
        }
    }
    if (!live) return;
    if (threadIdx.x == 0 && a.mode != MODE_WN) {
        if (mean) mean[row] = mu;
        rstd[row] = r;
    }
    T *yr = y + (size_t)row * C;
#pragma unroll
    for (int t = 0; t < NV; t++) {
        const int e = (threadIdx.x + t * TPR) * VW;
        if (e >= C) continue;
        float o[VW];
        if (a.mode == MODE_WN) {
#pragma unroll
            for (int i = 0; i < VW; i++)
                o[i] = r * v[t][i];
        } else {
            float gg[VW], bb[VW];
            ldf<VW>(g + e, gg);
            if (b)
                ldf<VW>(b + e, bb);
            else
#pragma unroll
                for (int i = 0; i < VW; i++)
                    bb[i] = 0;
#pragma unroll
            for (int i = 0; i < VW; i++)
                o[i] = gg[i] * ((v[t][i] - mu) * r) + bb[i];
        }
        stv<T, VW>(yr + e, o);
    }
}

// Backward over a grid-stride set of rows. part (when not NULL): (gridDim.x * ROWS, 2, C)
// float partials of dg and db, one slot per row group.
template <typename T, int VW, int TPR, int NV>
__global__ void __launch_bounds__(TPR *RowsPer<TPR>::value)
    rows_bwd(T *__restrict__ dx, float *__restrict__ part, float *__restrict__ dgw,
             const T *__restrict__ dy, const T *__restrict__ x, const float *__restrict__ g,
             const float *__restrict__ mean, const float *__restrict__ rstd, RowArgs a) {
    constexpr int ROWS = RowsPer<TPR>::value;
    __shared__ float red[ROWS * (TPR / 32) * 3 + 1];
    const int C = a.C;
    float pg[NV][VW], pb[NV][VW];
#pragma unroll
    for (int t = 0; t < NV; t++)
#pragma unroll
        for (int i = 0; i < VW; i++)
            pg[t][i] = pb[t][i] = 0;
    const int nrow_groups = (a.B + ROWS - 1) / ROWS;
    for (int rg = blockIdx.x; rg < nrow_groups; rg += gridDim.x) {
        const int row = rg * ROWS + threadIdx.y;
        const bool live = row < a.B;
        const size_t o = (size_t)(live ? row : 0) * C;
        float xv[NV][VW], dv[NV][VW];
        const float mu = a.mode == MODE_LN && live ? mean[row] : 0.f;
        const float r = live ? rstd[row] : 0.f; // WN: rstd holds ||v||
        const float gw = a.mode == MODE_WN && live ? g[row] : 0.f;
#pragma unroll
        for (int t = 0; t < NV; t++) {
            const int e = (threadIdx.x + t * TPR) * VW;
            if (live && e < C) {
                ldv<T, VW>(x + o + e, xv[t]);
                ldv<T, VW>(dy + o + e, dv[t]);
            } else {
#pragma unroll
                for (int i = 0; i < VW; i++)
                    xv[t][i] = dv[t][i] = 0;
            }
        }
        // s[0]: sum gd (gd = g dy; WN: dw), s[1]: sum gd*(x-mu) (LN) / gd*x (RMS) / dw*v (WN),
        // s[2]: sum of squares over the statistics' values (used for eps outside only)
        float s[3] = {0, 0, 0};
        const int kk = a.mode == MODE_RMS ? a.k : C;
#pragma unroll
        for (int t = 0; t < NV; t++) {
            const int e = (threadIdx.x + t * TPR) * VW;
            float gg[VW];
            if (a.mode != MODE_WN && e < C)
                ldf<VW>(g + e, gg);
            else
#pragma unroll
                for (int i = 0; i < VW; i++)
                    gg[i] = 1.f;
#pragma unroll
            for (int i = 0; i < VW; i++) {
                const float d = xv[t][i] - mu, gd = gg[i] * dv[t][i];
                s[0] += gd;
                s[1] += gd * d;
                if (e + i < kk) s[2] += d * d;
            }
        }
        group_sum<TPR, 3>(s, red);
        if (!live) continue;
        // dx = A gd + B (x - mu) [+ M]; WN: dx = sa (dw - pc v)
        float cA = r, cK = 0, cM = 0;
        int kmax = C;
        if (a.mode == MODE_LN) {
            const float mg = (float)((double)s[0] / C);
            cK = (float)(rstd_coef_d(r, (double)s[2] / C, C, a.eps, a.outside) * (double)s[1]);
            cM = mg;
        } else if (a.mode == MODE_RMS) {
            cK = (float)(rstd_coef_d(r, (double)s[2] / a.k, a.k, a.eps, a.outside) * (double)s[1]);
            kmax = a.k;
        } else {
            const double n = r, dgo = (double)s[1] / n;
            if (threadIdx.x == 0 && dgw) dgw[row] += (float)dgo;
            cA = (float)((double)gw / n);
            cK = n > (double)(float)WN_FLOOR ? (float)(dgo / n) : 0.f;
        }
#pragma unroll
        for (int t = 0; t < NV; t++) {
            const int e = (threadIdx.x + t * TPR) * VW;
            if (e >= C) continue;
            float out[VW], gg[VW];
            if (a.mode != MODE_WN) ldf<VW>(g + e, gg);
#pragma unroll
            for (int i = 0; i < VW; i++) {
                if (a.mode == MODE_LN)
                    out[i] = cA * (gg[i] * dv[t][i] - cM) + (xv[t][i] - mu) * cK;
                else if (a.mode == MODE_RMS)
                    out[i] = cA * (gg[i] * dv[t][i]) + (e + i < kmax ? xv[t][i] * cK : 0.f);
                else
                    out[i] = cA * (dv[t][i] - cK * xv[t][i]);
            }
            stv<T, VW>(dx + o + e, out);
            if (part)
#pragma unroll
                for (int i = 0; i < VW; i++) {
                    pg[t][i] += dv[t][i] * ((xv[t][i] - mu) * r);
                    pb[t][i] += dv[t][i];
                }
        }
    }
    if (!part) return;
    const size_t slot = (size_t)blockIdx.x * ROWS + threadIdx.y;
    float *pgo = part + slot * 2 * C, *pbo = pgo + C;
#pragma unroll
    for (int t = 0; t < NV; t++) {
        const int e = (threadIdx.x + t * TPR) * VW;
#pragma unroll
        for (int i = 0; i < VW; i++)
            if (e + i < C) {
                pgo[e + i] = pg[t][i];
                pbo[e + i] = pb[t][i];
            }
    }
}

// Stage two: dg[c] += sum over slots (in slot order, double) of the partials.
__global__ void reduce_partials(float *dg, float *db, const float *part, int slots, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sg = 0, sb = 0;
    for (int s = 0; s < slots; s++) {
        sg += part[(size_t)s * 2 * C + c];
        sb += part[(size_t)s * 2 * C + C + c];
    }
    if (dg) dg[c] += (float)sg;
    if (db) db[c] += (float)sb;
}

// The launch configurations: (TPR, NV) with TPR*NV >= vectors per row, the first that fits.
#define ROW_CONFIGS(X) X(32, 4) X(128, 4) X(256, 4) X(512, 4) X(1024, 8)

template <typename T, int VW>
static int launch_fwd(T *y, float *mean, float *rstd, const T *x, const float *g, const float *b,
                      const RowArgs &a, nb_err *err) {
    const int nvec = (a.C + VW - 1) / VW;
#define TRY_FWD(TPR, NV)                                                                           \
    if (nvec <= TPR * NV) {                                                                        \
        constexpr int R = RowsPer<TPR>::value;                                                     \
        rows_fwd<T, VW, TPR, NV><<<(a.B + R - 1) / R, dim3(TPR, R)>>>(y, mean, rstd, x, g, b, a);  \
        CK_LAUNCH("a norm's forward kernel");                                                      \
        return 0;                                                                                  \
    }
    ROW_CONFIGS(TRY_FWD)
#undef TRY_FWD
    return nb_errf(err, "rows of %d values are wider than the CUDA kernels take (%d)", a.C,
                   1024 * 8 * VW);
}

template <typename T, int VW>
static int launch_bwd(T *dx, float *dg, float *db, float *dgw, const T *dy, const T *x,
                      const float *g, const float *mean, const float *rstd, const RowArgs &a,
                      nb_err *err) {
    const int nvec = (a.C + VW - 1) / VW;
    const int want = (dg || db) && a.mode != MODE_WN;
#define TRY_BWD(TPR, NV)                                                                           \
    if (nvec <= TPR * NV) {                                                                        \
        constexpr int R = RowsPer<TPR>::value;                                                     \
        const int groups = (a.B + R - 1) / R;                                                      \
        int per_sm = 0;                                                                            \
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rows_bwd<T, VW, TPR, NV>,        \
                                                         TPR *R, 0),                               \
           "occupancy");                                                                           \
        int grid = per_sm * g_sms;                                                                 \
        if (grid < 1) grid = 1;                                                                    \
        if (grid > groups) grid = groups;                                                          \
        float *part = NULL;                                                                        \
        if (want) {                                                                                \
            part = (float *)workspace((size_t)grid * R * 2 * a.C * sizeof(float), err);            \
            if (!part) return -1;                                                                  \
        }                                                                                          \
        rows_bwd<T, VW, TPR, NV><<<grid, dim3(TPR, R)>>>(dx, part, dgw, dy, x, g, mean, rstd, a);  \
        CK_LAUNCH("a norm's backward kernel");                                                     \
        if (want) {                                                                                \
            reduce_partials<<<(a.C + 255) / 256, 256>>>(dg, db, part, grid * R, a.C);              \
            CK_LAUNCH("the gain/bias gradient reduction");                                         \
        }                                                                                          \
        return 0;                                                                                  \
    }
    ROW_CONFIGS(TRY_BWD)
#undef TRY_BWD
    return nb_errf(err, "rows of %d values are wider than the CUDA kernels take (%d)", a.C,
                   1024 * 8 * VW);
}

static int aligned16(const void *p) {
    return ((uintptr_t)p & 15) == 0;
}

// Picks 16-byte vectors when every row starts 16-byte aligned, else scalar access.
static int row_fwd(void *y, float *mean, float *rstd, const void *x, const float *g, const float *b,
                   const RowArgs &a, nb_cuda_dtype dt, nb_err *err) {
    if (a.B <= 0 || a.C <= 0) return 0;
    if (nb_cuda_init(err)) return -1;
    const int vec = dt == NB_CUDA_F32 ? 4 : 8;
    const int ok = a.C % vec == 0 && a.C % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(g) &&
                   (!b || aligned16(b));
    if (dt == NB_CUDA_F32) {
        if (ok) return launch_fwd<float, 4>((float *)y, mean, rstd, (const float *)x, g, b, a, err);
        return launch_fwd<float, 1>((float *)y, mean, rstd, (const float *)x, g, b, a, err);
    }
    typedef __nv_bfloat16 bf;
    if (ok) return launch_fwd<bf, 8>((bf *)y, mean, rstd, (const bf *)x, g, b, a, err);
    return launch_fwd<bf, 1>((bf *)y, mean, rstd, (const bf *)x, g, b, a, err);
}

static int row_bwd(void *dx, float *dg, float *db, float *dgw, const void *dy, const void *x,
                   const float *g, const float *mean, const float *rstd, const RowArgs &a,
                   nb_cuda_dtype dt, nb_err *err) {
    if (a.B <= 0 || a.C <= 0) return 0;
    if (nb_cuda_init(err)) return -1;
    const int vec = dt == NB_CUDA_F32 ? 4 : 8;
    const int ok = a.C % vec == 0 && aligned16(x) && aligned16(dx) && aligned16(dy) &&
                   (a.mode == MODE_WN || aligned16(g));
    if (dt == NB_CUDA_F32) {
        if (ok)
            return launch_bwd<float, 4>((float *)dx, dg, db, dgw, (const float *)dy,
                                        (const float *)x, g, mean, rstd, a, err);
        return launch_bwd<float, 1>((float *)dx, dg, db, dgw, (const float *)dy, (const float *)x,
                                    g, mean, rstd, a, err);
    }
    typedef __nv_bfloat16 bf;
    if (ok)
        return launch_bwd<bf, 8>((bf *)dx, dg, db, dgw, (const bf *)dy, (const bf *)x, g, mean,
                                 rstd, a, err);
    return launch_bwd<bf, 1>((bf *)dx, dg, db, dgw, (const bf *)dy, (const bf *)x, g, mean, rstd, a,
                             err);
}

static RowArgs row_args(int B, int C, int k, const nb_norm_cfg *cfg, int mode) {
    RowArgs a;
    a.B = B;
    a.C = C;
    a.k = k < 1 ? 1 : (k > C ? C : k);
    a.eps = cfg ? cfg->eps : 0;
    a.outside = cfg ? cfg->eps_outside : 0;
    a.mode = mode;
    return a;
}

extern "C" int nb_cuda_layernorm_forward(void *y, float *mean, float *rstd, const void *x,
                                         const float *g, const float *b, int B, int C,
                                         const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err) {
    return row_fwd(y, mean, rstd, x, g, b, row_args(B, C, C, cfg, MODE_LN), dt, err);
}

extern "C" int nb_cuda_layernorm_backward(void *dx, float *dg, float *db, const void *dy,
                                          const void *x, const float *g, const float *mean,
                                          const float *rstd, int B, int C, const nb_norm_cfg *cfg,
                                          nb_cuda_dtype dt, nb_err *err) {
    return row_bwd(dx, dg, db, NULL, dy, x, g, mean, rstd, row_args(B, C, C, cfg, MODE_LN), dt,
                   err);
}

extern "C" int nb_cuda_rmsnorm_forward(void *y, float *rstd, const void *x, const float *g,
                                       const float *b, int B, int C, int k, const nb_norm_cfg *cfg,
                                       nb_cuda_dtype dt, nb_err *err) {
    return row_fwd(y, NULL, rstd, x, g, b, row_args(B, C, k, cfg, MODE_RMS), dt, err);
}

extern "C" int nb_cuda_rmsnorm_backward(void *dx, float *dg, float *db, const void *dy,
                                        const void *x, const float *g, const float *rstd, int B,
                                        int C, int k, const nb_norm_cfg *cfg, nb_cuda_dtype dt,
                                        nb_err *err) {
    return row_bwd(dx, dg, db, NULL, dy, x, g, NULL, rstd, row_args(B, C, k, cfg, MODE_RMS), dt,
                   err);
}

extern "C" int nb_cuda_weightnorm_forward(void *w, float *vnorm, const void *v, const float *g,
                                          int OC, int C, nb_cuda_dtype dt, nb_err *err) {
    return row_fwd(w, NULL, vnorm, v, g, NULL, row_args(OC, C, C, NULL, MODE_WN), dt, err);
}

extern "C" int nb_cuda_weightnorm_backward(void *dv, float *dg, const void *dw, const void *v,
                                           const float *g, const float *vnorm, int OC, int C,
                                           nb_cuda_dtype dt, nb_err *err) {
    return row_bwd(dv, NULL, NULL, dg, dw, v, g, NULL, vnorm, row_args(OC, C, C, NULL, MODE_WN), dt,
                   err);
}

// ---- BatchNorm (per column over the rows) ------------------------------------------------------

// Block (32, 8): 32 columns, 8 row strides; sums in double, the 8 partials added in order.
template <typename T>
__global__ void bn_stats(float *mean, float *rstd, float *rmean, float *rvar, const T *x, int B,
                         int C, double eps, int outside, int unb_batch, int unb_run, double mom) {
    __shared__ double red[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    double s = 0;
    if (c < C)
        for (int r = threadIdx.y; r < B; r += 8)
            s += (double)tof(x[(size_t)r * C + c]);
    red[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    double mu = 0;
    for (int k = 0; k < 8; k++)
        mu += red[k][threadIdx.x];
    mu /= B;
    __syncthreads();
    double v = 0;
    if (c < C)
        for (int r = threadIdx.y; r < B; r += 8) {
            double d = (double)tof(x[(size_t)r * C + c]) - mu;
            v += d * d;
        }
    red[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    double ss = 0;
    for (int k = 0; k < 8; k++)
        ss += red[k][threadIdx.x];
    const double var = ss / B, unb = B > 1 ? (double)B / (B - 1) : 1.0;
    mean[c] = (float)mu;
    rstd[c] = (float)rstd_of_d(unb_batch ? var * unb : var, eps, outside);
    if (rmean) rmean[c] = (float)((1 - mom) * (double)rmean[c] + mom * mu);
    if (rvar) rvar[c] = (float)((1 - mom) * (double)rvar[c] + mom * (unb_run ? var * unb : var));
}

__global__ void bn_eval_stats(float *mean, float *rstd, const float *rmean, const float *rvar,
                              int C, double eps, int outside) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    mean[c] = rmean ? rmean[c] : 0.f;
    rstd[c] = (float)rstd_of_d(rvar ? (double)rvar[c] : 1.0, eps, outside);
}

// y = A x + K (per column) for BN forward (A = g r, K = b - g r mu is NOT used: the CPU's
// expression order g ((x - mu) r) + b is kept).
template <typename T>
__global__ void bn_apply(T *y, const T *x, const float *mean, const float *rstd, const float *g,
                         const float *b, int B, int C) {
    const size_t n = (size_t)B * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        float o = g[c] * ((tof(x[i]) - mean[c]) * rstd[c]);
        if (b) o += b[c];
        y[i] = fromf<T>(o);
    }
}

// Per column: dg += r*sum dy (x-mu), db += sum dy, and dx = A dy + K (x - mu) + M's A, K, M.
template <typename T>
__global__ void bn_bstats(float *coef, float *dg, float *db, const T *dy, const T *x,
                          const float *mean, const float *rstd, const float *g, int B, int C,
                          int training, double eps, int outside, int unb_batch) {
    __shared__ double red[3][8][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    double sy = 0, syx = 0, sxx = 0;
    if (c < C) {
        const float mu = mean[c];
        for (int r = threadIdx.y; r < B; r += 8) {
            const size_t i = (size_t)r * C + c;
            const double d = (double)(tof(x[i]) - mu), dd = tof(dy[i]);
            sy += dd;
            syx += dd * d;
            sxx += d * d;
        }
    }
    red[0][threadIdx.y][threadIdx.x] = sy;
    red[1][threadIdx.y][threadIdx.x] = syx;
    red[2][threadIdx.y][threadIdx.x] = sxx;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    sy = syx = sxx = 0;
    for (int k = 0; k < 8; k++) {
        sy += red[0][k][threadIdx.x];
        syx += red[1][k][threadIdx.x];
        sxx += red[2][k][threadIdx.x];
    }
    const double rc = rstd[c], gc = g[c], nb = B;
    const double D = unb_batch && B > 1 ? nb - 1 : nb;
    if (dg) dg[c] += (float)(rc * syx);
    if (db) db[c] += (float)sy;
    coef[c] = (float)(gc * rc);
    coef[C + c] = training ? (float)(rstd_coef_d(rc, sxx / D, D, eps, outside) * gc * syx) : 0.f;
    coef[2 * C + c] = training ? (float)(-gc * rc * sy / nb) : 0.f;
}

template <typename T>
__global__ void bn_bapply(T *dx, const T *dy, const T *x, const float *mean, const float *coef,
                          int B, int C) {
    const size_t n = (size_t)B * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        dx[i] =
            fromf<T>(coef[c] * tof(dy[i]) + coef[C + c] * (tof(x[i]) - mean[c]) + coef[2 * C + c]);
    }
}

static int elem_grid(size_t n) {
    size_t b = (n + 255) / 256;
    size_t cap = (size_t)(g_sms > 0 ? g_sms : 132) * 8;
    return (int)(b < cap ? (b ? b : 1) : cap);
}

template <typename T>
static int bn_fwd_t(T *y, float *mean, float *rstd, float *rm, float *rv, const T *x,
                    const float *g, const float *b, int B, int C, int training,
                    const nb_norm_cfg *cfg, nb_err *err) {
    if (training)
        bn_stats<T><<<(C + 31) / 32, dim3(32, 8)>>>(mean, rstd, rm, rv, x, B, C, cfg->eps,
                                                    cfg->eps_outside, cfg->bn_unbiased_batch,
                                                    cfg->bn_unbiased_running, cfg->bn_momentum);
    else
        bn_eval_stats<<<(C + 255) / 256, 256>>>(mean, rstd, rm, rv, C, cfg->eps, cfg->eps_outside);
    CK_LAUNCH("BatchNorm's statistics");
    bn_apply<T><<<elem_grid((size_t)B * C), 256>>>(y, x, mean, rstd, g, b, B, C);
    CK_LAUNCH("BatchNorm's forward");
    return 0;
}

template <typename T>
static int bn_bwd_t(T *dx, float *dg, float *db, const T *dy, const T *x, const float *g,
                    const float *mean, const float *rstd, int B, int C, int training,
                    const nb_norm_cfg *cfg, nb_err *err) {
    float *coef = (float *)workspace((size_t)3 * C * sizeof(float), err);
    if (!coef) return -1;
    bn_bstats<T><<<(C + 31) / 32, dim3(32, 8)>>>(coef, dg, db, dy, x, mean, rstd, g, B, C, training,
                                                 cfg->eps, cfg->eps_outside,
                                                 cfg->bn_unbiased_batch);
    CK_LAUNCH("BatchNorm's backward statistics");
    bn_bapply<T><<<elem_grid((size_t)B * C), 256>>>(dx, dy, x, mean, coef, B, C);
    CK_LAUNCH("BatchNorm's backward");
    return 0;
}

extern "C" int nb_cuda_batchnorm_forward(void *y, float *mean, float *rstd, float *rm, float *rv,
                                         const void *x, const float *g, const float *b, int B,
                                         int C, int training, const nb_norm_cfg *cfg,
                                         nb_cuda_dtype dt, nb_err *err) {
    if (B <= 0 || C <= 0) return 0;
    if (nb_cuda_init(err)) return -1;
    if (dt == NB_CUDA_F32)
        return bn_fwd_t<float>((float *)y, mean, rstd, rm, rv, (const float *)x, g, b, B, C,
                               training, cfg, err);
    return bn_fwd_t<__nv_bfloat16>((__nv_bfloat16 *)y, mean, rstd, rm, rv, (const __nv_bfloat16 *)x,
                                   g, b, B, C, training, cfg, err);
}

extern "C" int nb_cuda_batchnorm_backward(void *dx, float *dg, float *db, const void *dy,
                                          const void *x, const float *g, const float *mean,
                                          const float *rstd, int B, int C, int training,
                                          const nb_norm_cfg *cfg, nb_cuda_dtype dt, nb_err *err) {
    if (B <= 0 || C <= 0) return 0;
    if (nb_cuda_init(err)) return -1;
    if (dt == NB_CUDA_F32)
        return bn_bwd_t<float>((float *)dx, dg, db, (const float *)dy, (const float *)x, g, mean,
                               rstd, B, C, training, cfg, err);
    typedef __nv_bfloat16 bf;
    return bn_bwd_t<bf>((bf *)dx, dg, db, (const bf *)dy, (const bf *)x, g, mean, rstd, B, C,
                        training, cfg, err);
}

// ---- conversions (tests, bench) ----------------------------------------------------------------

__global__ void to_bf16(__nv_bfloat16 *d, const float *s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = __float2bfloat16_rn(s[i]);
}
__global__ void from_bf16(float *d, const __nv_bfloat16 *s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = __bfloat162float(s[i]);
}

extern "C" int nb_cuda_upload_as(void *d, const float *src, size_t n, nb_cuda_dtype dt,
                                 nb_err *err) {
    if (dt == NB_CUDA_F32) return nb_cuda_upload(d, src, n * sizeof(float), err);
    float *tmp = (float *)workspace(n * sizeof(float), err);
    if (!tmp) return -1;
    if (nb_cuda_upload(tmp, src, n * sizeof(float), err)) return -1;
    to_bf16<<<elem_grid(n), 256>>>((__nv_bfloat16 *)d, tmp, n);
    CK_LAUNCH("a conversion to bf16");
    return nb_cuda_sync(err);
}

extern "C" int nb_cuda_download_as(float *dst, const void *d, size_t n, nb_cuda_dtype dt,
                                   nb_err *err) {
    if (dt == NB_CUDA_F32) return nb_cuda_download(dst, d, n * sizeof(float), err);
    float *tmp = (float *)workspace(n * sizeof(float), err);
    if (!tmp) return -1;
    from_bf16<<<elem_grid(n), 256>>>(tmp, (const __nv_bfloat16 *)d, n);
    CK_LAUNCH("a conversion from bf16");
    return nb_cuda_download(dst, tmp, n * sizeof(float), err);
}
