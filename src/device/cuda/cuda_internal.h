/*
 * What the CUDA backend's files share: the checks, the backend state behind
 * dev->ctx, and the mapping of shardrec's stream and event handles.
 *
 * Handles. An sr_stream_t of this device is a cudaStream_t; NULL (shardrec's
 * default stream) is the backend's own non-blocking stream `main`, never
 * CUDA's legacy stream, so that a step can be captured into a CUDA graph. An
 * sr_event_t is a cudaEvent_t.
 *
 * Every file of device/cuda/ is C-style CUDA: .cu files hold kernels and the
 * op functions, exported with C linkage; nothing above device/ sees CUDA.
 * Errors: a failed CUDA or cuBLASLt call is a device failure and aborts with
 * the call, the file and line (SR_CU_CHECK); launches are checked with
 * SR_CU_LAUNCHED() right after the launch.
 */
#ifndef SHARDREC_CUDA_INTERNAL_H
#define SHARDREC_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "shardrec/device.h"
#include "shardrec/error.h"
#ifdef __cplusplus
}
#endif

#define SR_CU_CHECK(stmt) SR_CHECK_GEN(stmt, cudaError_t, cudaSuccess, cudaGetErrorString)
#define SR_CU_LAUNCHED() SR_CU_CHECK(cudaGetLastError())

struct sr_cuda_ctx {
    int ordinal;
    cudaStream_t main;     /* the device's default stream (sr_stream_t NULL) */
    int num_sms;           /* multiprocessors */
    size_t l2_bytes;
    void *dense;           /* cuda_dense.cu's state (cuBLASLt handle, plans, workspace) */
};

static inline struct sr_cuda_ctx *sr_cu_ctx(const struct sr_device *dev)
{
    return (struct sr_cuda_ctx *)dev->ctx;
}

static inline cudaStream_t sr_cu_stream(const struct sr_device *dev, sr_stream_t s)
{
    return s ? (cudaStream_t)s : sr_cu_ctx(dev)->main;
}

/* Blocks of `threads` covering n items, capped (grid-stride loops do the rest). */
static inline unsigned sr_cu_blocks(long long n, int threads)
{
    long long b = (n + threads - 1) / threads;
    if (b < 1)
        b = 1;
    if (b > 65535LL * 64)
        b = 65535LL * 64;
    return (unsigned)b;
}

#ifdef __cplusplus
extern "C" {
#endif
/* The op tables, one file each. */
extern const struct sr_dense_ops sr_cuda_dense_ops;           /* cuda_dense.cu */
extern const struct sr_optim_ops sr_cuda_optim_ops;           /* cuda_optim.cu */
extern const struct sr_embedding_ops sr_cuda_embedding_ops;   /* cuda_embedding.cu */
extern const struct sr_emb_dp_ops sr_cuda_emb_dp_ops;         /* cuda_embedding_dp.cu */
extern const struct sr_sparse_dist_ops sr_cuda_sparse_dist_ops; /* cuda_sparse_dist.cu */
extern const struct sr_cast_ops sr_cuda_cast_ops;             /* cuda_cast.cu */

/* cuda_hybrid.cu: the sparse-dist ops of hybrid tables (ops_sparse_dist.h). */
struct sr_sparse_dist_hybrid;
struct sr_sparse_dist_kjt;
void sr_cu_hybrid_split(struct sr_device *dev, const struct sr_sparse_dist_hybrid *h,
                        const struct sr_sparse_dist_kjt *in, int32_t *lengths, int32_t *full,
                        int64_t *offsets, int64_t *values, float *weights, sr_stream_t s);
void sr_cu_rows_copy(struct sr_device *dev, int scatter, const int64_t *idx, int64_t n,
                     int64_t width, const float *src, int64_t src_rows, float *dst,
                     int64_t dst_rows, sr_stream_t s);

/* cuda_compact.cu: the compact cold-row exchange's ops (ops_sparse_dist.h). */
struct sr_sparse_dist_compact;
void sr_cu_compact_counts(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                          const int32_t *lens, int num_slots, int64_t *ne, sr_stream_t s);
void sr_cu_compact_owner(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                         const int64_t *offsets, float *rows, float *buf, int64_t words, int pack,
                         sr_stream_t s);
void sr_cu_compact_samples(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                           const int32_t *lens, int num_slots, float *block, float *buf,
                           int64_t words, int pack, sr_stream_t s);

/* cuda_dense.cu: the dense state of a new device (cuBLASLt) and its release. */
void sr_cuda_dense_init(struct sr_device *dev);
void sr_cuda_dense_free(struct sr_device *dev);

/* cuda_interaction.cu: the dense ops interaction_forward and interaction_backward. */
void sr_cu_interaction_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                               const float *emb, int B, int F, int D, float *out);
void sr_cu_interaction_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                                const float *emb, const float *dout, int B, int F, int D,
                                float *dz, float *demb);

/* cuda_dcn.cu: the dense ops dcn_cross_forward and dcn_cross_backward. */
void sr_cu_dcn_cross_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                             const float *emb, const float *u, const float *bias, const float *xl,
                             int B, int F, int D, float *y);
void sr_cu_dcn_cross_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                              const float *emb, const float *u, const float *bias, const float *dy,
                              int B, int F, int D, int residual, int accumulate, float *du,
                              float *dbias, float *dz, float *demb);
#ifdef __cplusplus
}
#endif

#endif
