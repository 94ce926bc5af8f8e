/*
 * The fused sparse optimizers on one embedding row, for the CUDA kernels of
 * the pooled backward (cuda_embedding_backward.cu) and of the DP tables' update
 * (cuda_embedding_dp.cu): the device twin of device/cpu/cpu_row_optim.h, so
 * every sharding type applies the same update to a row given the same
 * gradient, on either backend. Formulas: include/shardrec/optim.h.
 *
 * Rounding. Every operation is written as an _rn intrinsic in the CPU's
 * order of evaluation (the CPU build does not contract a*b+c into an FMA), so
 * a row's update is the CPU's bit for bit whatever nvcc's -fmad setting.
 *
 * Rows are processed by a group of G lanes (a power of two, 1..32): lane
 * `lig` of the group owns the W-wide chunks at columns lig*W, lig*W + G*W, ...
 * (W = 4: float4 loads, every D of the layout a multiple of 4 and every
 * pointer 16-byte aligned; W = 1 otherwise).
 */
#ifndef SHARDREC_CUDA_ROW_OPTIM_CUH
#define SHARDREC_CUDA_ROW_OPTIM_CUH

#include <math.h>
#include <stdint.h>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_embedding.h"
}

/* ---- W-wide chunks of a row ----------------------------------------------------- */

template <int W> struct sr_cu_vec {
    float x[W];
};

template <int W> __device__ __forceinline__ sr_cu_vec<W> sr_cu_zero()
{
    sr_cu_vec<W> v;
#pragma unroll
    for (int i = 0; i < W; i++)
        v.x[i] = 0.0f;
    return v;
}

/* Coherent load (memory this kernel may also write). */
template <int W> __device__ __forceinline__ sr_cu_vec<W> sr_cu_load(const float *p)
{
    sr_cu_vec<W> v;
    if constexpr (W == 4) {
        float4 t = *(const float4 *)p;
        v.x[0] = t.x, v.x[1] = t.y, v.x[2] = t.z, v.x[3] = t.w;
    } else {
        v.x[0] = *p;
    }
    return v;
}

/* Read-only load (memory no thread writes while the kernel runs). */
template <int W> __device__ __forceinline__ sr_cu_vec<W> sr_cu_ldg(const float *p)
{
    sr_cu_vec<W> v;
    if constexpr (W == 4) {
        float4 t = __ldg((const float4 *)p);
        v.x[0] = t.x, v.x[1] = t.y, v.x[2] = t.z, v.x[3] = t.w;
    } else {
        v.x[0] = __ldg(p);
    }
    return v;
}

/* Streaming load and store (__ldcs, __stcs: evict first): for rows an update
 * touches once, so they do not push out of L2 what other ids read again
 * (the pooled gradient, the sorted ids). */
template <int W> __device__ __forceinline__ sr_cu_vec<W> sr_cu_load_once(const float *p)
{
    sr_cu_vec<W> v;
    if constexpr (W == 4) {
        float4 t = __ldcs((const float4 *)p);
        v.x[0] = t.x, v.x[1] = t.y, v.x[2] = t.z, v.x[3] = t.w;
    } else {
        v.x[0] = __ldcs(p);
    }
    return v;
}

template <int W> __device__ __forceinline__ void sr_cu_store_once(float *p, sr_cu_vec<W> v)
{
    if constexpr (W == 4)
        __stcs((float4 *)p, make_float4(v.x[0], v.x[1], v.x[2], v.x[3]));
    else
        __stcs(p, v.x[0]);
}

template <int W> __device__ __forceinline__ void sr_cu_store(float *p, sr_cu_vec<W> v)
{
    if constexpr (W == 4)
        *(float4 *)p = make_float4(v.x[0], v.x[1], v.x[2], v.x[3]);
    else
        *p = v.x[0];
}

/* acc + w * x, elementwise, rounded as the CPU's `acc += w * x`. */
template <int W>
__device__ __forceinline__ sr_cu_vec<W> sr_cu_axpy(sr_cu_vec<W> acc, float w, sr_cu_vec<W> x)
{
#pragma unroll
    for (int i = 0; i < W; i++)
        acc.x[i] = __fadd_rn(acc.x[i], __fmul_rn(w, x.x[i]));
    return acc;
}

template <int W> __device__ __forceinline__ sr_cu_vec<W> sr_cu_scale(sr_cu_vec<W> v, float s)
{
#pragma unroll
    for (int i = 0; i < W; i++)
        v.x[i] = __fmul_rn(v.x[i], s);
    return v;
}

/* Lanes of the group of G lanes that `lane` belongs to. */
__device__ __forceinline__ unsigned sr_cu_group_mask(int lane, int G)
{
    return G == 32 ? 0xffffffffu : ((1u << G) - 1) << (lane & ~(G - 1));
}

/* ---- the optimizer of one step -------------------------------------------------- */

/* What a kernel is given (by value). */
struct sr_cu_optim {
    int kind; /* enum sr_optim_kind */
    float lr, eps, b1, b2;
    float c1, c2;            /* adam: 1 / (1 - b^t), when step_dev is NULL */
    const float *lr_dev;     /* read when the kernel runs, or NULL */
    const int64_t *step_dev; /* read when the kernel runs, or NULL */
    int64_t step;            /* the step, when step_dev is NULL */
};

/* The constants a row update uses, resolved on the device. */
struct sr_cu_step {
    float lr, eps, b1, b2, c1, c2;
    int64_t step; /* stochastic rounding of 16-bit tables */
};

static inline struct sr_cu_optim sr_cu_optim_of(const struct sr_emb_update *u)
{
    struct sr_cu_optim o;
    o.kind = (int)u->optim.kind;
    o.lr = u->lr;
    o.eps = u->optim.eps;
    o.b1 = u->optim.beta1;
    o.b2 = u->optim.beta2;
    o.c1 = 1.0f;
    o.c2 = 1.0f;
    o.lr_dev = u->lr_dev;
    o.step_dev = u->step_dev;
    o.step = u->step;
    if (u->optim.kind == SR_OPTIM_ADAM && !u->step_dev) {
        SR_ASSERT(u->step >= 1);
        o.c1 = (float)(1.0 / (1.0 - pow(u->optim.beta1, (double)u->step)));
        o.c2 = (float)(1.0 / (1.0 - pow(u->optim.beta2, (double)u->step)));
    }
    return o;
}

template <int OPT>
__device__ __forceinline__ struct sr_cu_step sr_cu_step_of(const struct sr_cu_optim &o)
{
    struct sr_cu_step k = {o.lr_dev ? *o.lr_dev : o.lr, o.eps, o.b1, o.b2, o.c1, o.c2,
                           o.step_dev ? *o.step_dev : o.step};
    if (OPT == SR_OPTIM_ADAM && o.step_dev) {
        const int64_t step = *o.step_dev;
        if (step < 1)
            __trap(); /* the CPU asserts step >= 1 */
        k.c1 = (float)(1.0 / (1.0 - pow((double)o.b1, (double)step)));
        k.c2 = (float)(1.0 / (1.0 - pow((double)o.b2, (double)step)));
    }
    return k;
}

/* ---- the update of one chunk of a row ------------------------------------------- */

/* Where row `row` of a table and its state live. */
struct sr_cu_row {
    float *w; /* (D) the row's weights */
    float *s; /* adagrad: (D) sum of squares; rowwise: (1) the row's sum; adam: (D) m */
    float *v; /* adam: (D) v */
};

__device__ __forceinline__ struct sr_cu_row sr_cu_row_of(int kind, float *weight, float *state,
                                                         int64_t rows, int64_t row, int d)
{
    struct sr_cu_row r = {weight + row * d, NULL, NULL};
    if (kind == SR_OPTIM_ADAGRAD || kind == SR_OPTIM_ADAM)
        r.s = state + row * d;
    else if (kind == SR_OPTIM_ROWWISE_ADAGRAD)
        r.s = state + row;
    if (kind == SR_OPTIM_ADAM)
        r.v = state + (rows + row) * d;
    return r;
}

/* Columns [c, c + W) of a row and of the state the optimizer reads: weights w;
 * adagrad's sum s; adam's m (in s) and v. Loaded before the gradient is
 * summed, so the row's loads are in flight with the gradient's; loaded and
 * stored streaming, as an update touches each row once. */
template <int W> struct sr_cu_chunk {
    sr_cu_vec<W> w, s, v;
};

/* The state of the chunk alone (the weights: the caller's, by their dtype). */
template <int OPT, int W>
__device__ __forceinline__ void sr_cu_chunk_load_state(const struct sr_cu_row &r, int c,
                                                       sr_cu_chunk<W> &x)
{
    if constexpr (OPT == SR_OPTIM_ADAGRAD || OPT == SR_OPTIM_ADAM)
        x.s = sr_cu_load_once<W>(r.s + c);
    if constexpr (OPT == SR_OPTIM_ADAM)
        x.v = sr_cu_load_once<W>(r.v + c);
}

template <int OPT, int W>
__device__ __forceinline__ void sr_cu_chunk_store_state(const struct sr_cu_row &r, int c,
                                                        const sr_cu_chunk<W> &x)
{
    if constexpr (OPT == SR_OPTIM_ADAGRAD || OPT == SR_OPTIM_ADAM)
        sr_cu_store_once<W>(r.s + c, x.s);
    if constexpr (OPT == SR_OPTIM_ADAM)
        sr_cu_store_once<W>(r.v + c, x.v);
}

/* The chunk of an fp32 row: weights and state. */
template <int OPT, int W>
__device__ __forceinline__ sr_cu_chunk<W> sr_cu_chunk_load(const struct sr_cu_row &r, int c)
{
    sr_cu_chunk<W> x;
    x.w = sr_cu_load_once<W>(r.w + c);
    sr_cu_chunk_load_state<OPT, W>(r, c, x);
    return x;
}

template <int OPT, int W>
__device__ __forceinline__ void sr_cu_chunk_store(const struct sr_cu_row &r, int c,
                                                  const sr_cu_chunk<W> &x)
{
    sr_cu_store_once<W>(r.w + c, x.w);
    sr_cu_chunk_store_state<OPT, W>(r, c, x);
}

/* The elementwise optimizers (sgd, adagrad, adam) on a loaded chunk with
 * gradient g. Row-wise Adagrad goes through sr_cu_rowwise_* below. */
template <int OPT, int W>
__device__ __forceinline__ void sr_cu_chunk_update(const struct sr_cu_step &k, sr_cu_chunk<W> &x,
                                                   sr_cu_vec<W> g)
{
    if constexpr (OPT == SR_OPTIM_SGD) {
#pragma unroll
        for (int i = 0; i < W; i++)
            x.w.x[i] = __fsub_rn(x.w.x[i], __fmul_rn(k.lr, g.x[i]));
    } else if constexpr (OPT == SR_OPTIM_ADAGRAD) {
#pragma unroll
        for (int i = 0; i < W; i++) {
            x.s.x[i] = __fadd_rn(x.s.x[i], __fmul_rn(g.x[i], g.x[i]));
            float den = __fadd_rn(__fsqrt_rn(x.s.x[i]), k.eps);
            x.w.x[i] = __fsub_rn(x.w.x[i], __fdiv_rn(__fmul_rn(k.lr, g.x[i]), den));
        }
    } else if constexpr (OPT == SR_OPTIM_ADAM) {
        const float a1 = __fsub_rn(1.0f, k.b1), a2 = __fsub_rn(1.0f, k.b2);
#pragma unroll
        for (int i = 0; i < W; i++) {
            float m = __fadd_rn(__fmul_rn(k.b1, x.s.x[i]), __fmul_rn(a1, g.x[i]));
            float v =
                __fadd_rn(__fmul_rn(k.b2, x.v.x[i]), __fmul_rn(__fmul_rn(a2, g.x[i]), g.x[i]));
            float num = __fmul_rn(k.lr, __fmul_rn(m, k.c1));
            float den = __fadd_rn(__fsqrt_rn(__fmul_rn(v, k.c2)), k.eps);
            x.s.x[i] = m;
            x.v.x[i] = v;
            x.w.x[i] = __fsub_rn(x.w.x[i], __fdiv_rn(num, den));
        }
    }
}

/* Row-wise Adagrad. The mean of g² is summed as the CPU's sum_squares: 16
 * interleaved partial sums (column c into partial c % 16, in column order),
 * then the partials in order. g: the row's D gradient values (shared or global
 * memory, written by the group before the call); part: 16 floats of shared
 * memory of the group. Returns the step size lr / (sqrt(s_r) + eps) on every
 * lane of the group; lane 0 of the group writes s_r, which every lane must
 * have read into s_old before the call. */
__device__ __forceinline__ float sr_cu_rowwise_rate(const struct sr_cu_step &k, const float *g,
                                                    int d, float s_old, int lig, int G,
                                                    unsigned mask, float *part, float *s)
{
    __syncwarp(mask); /* g is complete */
    for (int l = lig; l < 16 && l < d; l += G) {
        float acc = 0.0f;
        for (int c = l; c < d; c += 16)
            acc = __fadd_rn(acc, __fmul_rn(g[c], g[c]));
        part[l] = acc;
    }
    __syncwarp(mask); /* the partials are complete, g is no longer read by others */
    float sum = 0.0f;
    for (int l = 0; l < 16 && l < d; l++)
        sum = __fadd_rn(sum, part[l]);
    __syncwarp(mask); /* part may be written again */
    const float s_new = __fadd_rn(s_old, __fdiv_rn(sum, (float)d));
    if (lig == 0)
        *s = s_new;
    return __fdiv_rn(k.lr, __fadd_rn(__fsqrt_rn(s_new), k.eps));
}

/* w - rate * g, elementwise: row-wise Adagrad's update of a chunk. */
template <int W>
__device__ __forceinline__ sr_cu_vec<W> sr_cu_rowwise_step(sr_cu_vec<W> w, float rate,
                                                           sr_cu_vec<W> g)
{
#pragma unroll
    for (int i = 0; i < W; i++)
        w.x[i] = __fsub_rn(w.x[i], __fmul_rn(rate, g.x[i]));
    return w;
}

/* Lanes per group for rows of up to max_dim columns: enough W-wide chunks for
 * one row, rounded up to a power of two, at most a warp. */
static inline int sr_cu_group_lanes(int max_dim, int W)
{
    int chunks = (max_dim + W - 1) / W, g = 1;
    while (g < chunks && g < 32)
        g *= 2;
    return g;
}

/* Blocks for n items, per_block items a block: no more than per_sm blocks on
 * each multiprocessor (enough to fill it). Kernels loop grid-stride, so what a
 * thread sets up once (the step's constants) is not paid per item. */
static inline unsigned sr_cu_grid(const struct sr_device *dev, long long n, int per_block,
                                  int per_sm)
{
    const int sms = sr_cu_ctx(dev)->num_sms > 0 ? sr_cu_ctx(dev)->num_sms : 1;
    const unsigned b = sr_cu_blocks(n, per_block), cap = (unsigned)(sms * per_sm);
    return b < cap ? b : cap;
}

static inline int sr_cu_log2(int g)
{
    int l = 0;
    while ((1 << l) < g)
        l++;
    return l;
}

static inline int sr_cu_aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

#endif
