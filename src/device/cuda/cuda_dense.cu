/*
 * CUDA dense ops (the table of device/ops_dense.h): GEMMs through cuBLASLt,
 * the linear layer's epilogues, ReLU and the fused BCE loss (the DLRM dot
 * interaction: cuda_interaction.cu; the DCNv2 cross layer's elementwise
 * parts: cuda_dcn.cu).
 *
 * GEMM. Matrices are row-major; cuBLASLt is column-major, and a row-major
 * (r, c) matrix with stride ld is the column-major (c, r) matrix with the same
 * ld. So C = op(A) op(B) (row-major) is computed as Cᵀ = op(B)ᵀ op(A)ᵀ:
 * cuBLASLt's A is our B, its B our A, its (m, n) our (n, m). Every distinct
 * shape (transposes, m, n, k, strides, math) gets one plan: descriptors,
 * layouts and the heuristic's algorithm, chosen once and cached, so a shape
 * always runs the same algorithm (reruns are bit-identical) and a step issues
 * no heuristic queries. dev->math picks the compute type: fp32
 * (CUBLAS_COMPUTE_32F), tf32 (CUBLAS_COMPUTE_32F_FAST_TF32) or bf16 (the
 * operands are rounded to bf16 into a scratch buffer by a cast kernel and
 * multiplied with fp32 accumulation into the fp32 C).
 *
 * Reductions. Column sums (bias gradients) run in two deterministic passes
 * (cuda_column_sums.cuh): each block sums a fixed chunk of rows per column
 * into a partial row, then one thread per column adds the partials in chunk
 * order. The loss is summed
 * in double by one block in a fixed tree. Nothing uses atomics, so reruns are
 * bit-identical.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_bf16.h>

#include "device/cuda/cuda_column_sums.cuh"
#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/ops_dense.h"
#include "shardrec/alloc.h"
}

#define LT_CHECK(stmt) SR_CHECK_GEN(stmt, cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString)

#define LT_WORKSPACE (32u << 20)
#define PLAN_SLOTS 256
#define PARTIAL_FLOATS (1u << 20) /* scratch of the column sums: 4 MiB */

struct gemm_key {
    int ta, tb, m, n, k, lda, ldb, ldc, math;
    int align_a, align_b, align_c; /* bytes the pointers are aligned to (at most 256) */
    int epilogue;                  /* cublasLtEpilogue_t: DEFAULT, BIAS or RELU_BIAS */
};

struct gemm_plan {
    struct gemm_key key;
    int used;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int none; /* the heuristic found no algorithm (an epilogue's plan: the caller falls back) */
};

struct dense_state {
    cublasLtHandle_t lt;
    void *workspace;
    struct gemm_plan plans[PLAN_SLOTS];
    float *partial;             /* PARTIAL_FLOATS: column-sum partials */
    __nv_bfloat16 *bf16;        /* operands rounded to bf16 (--math bf16) */
    size_t bf16_elems;
    cublasLtMatrixTransformDesc_t transpose;
    float *kmajor;              /* an operand transposed to K-major (see wants_k_major) */
    size_t kmajor_elems;
};

static struct dense_state *state_of(struct sr_device *dev)
{
    return (struct dense_state *)sr_cu_ctx(dev)->dense;
}

extern "C" void sr_cuda_dense_init(struct sr_device *dev)
{
    struct dense_state *st = (struct dense_state *)sr_calloc(1, sizeof *st);
    LT_CHECK(cublasLtCreate(&st->lt));
    SR_CU_CHECK(cudaMalloc(&st->workspace, LT_WORKSPACE));
    SR_CU_CHECK(cudaMalloc((void **)&st->partial, PARTIAL_FLOATS * sizeof(float)));
    cublasOperation_t t = CUBLAS_OP_T;
    LT_CHECK(cublasLtMatrixTransformDescCreate(&st->transpose, CUDA_R_32F));
    LT_CHECK(cublasLtMatrixTransformDescSetAttribute(
        st->transpose, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA, &t, sizeof t));
    sr_cu_ctx(dev)->dense = st;
}

extern "C" void sr_cuda_dense_free(struct sr_device *dev)
{
    struct dense_state *st = state_of(dev);
    if (!st)
        return;
    for (int i = 0; i < PLAN_SLOTS; i++) {
        struct gemm_plan *p = &st->plans[i];
        if (!p->used)
            continue;
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatmulDescDestroy(p->op);
    }
    cudaFree(st->workspace);
    cudaFree(st->partial);
    cudaFree(st->bf16);
    cudaFree(st->kmajor);
    cublasLtMatrixTransformDescDestroy(st->transpose);
    cublasLtDestroy(st->lt);
    sr_free(st);
    sr_cu_ctx(dev)->dense = NULL;
}

/* ---- GEMM ------------------------------------------------------------------------- */

static void make_plan(struct dense_state *st, struct gemm_plan *p, const struct gemm_key *k)
{
    cublasComputeType_t ct =
        k->math == SR_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t in_type = k->math == SR_MATH_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t op_a = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A: our B */
    cublasOperation_t op_b = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B: our A */
    int m = k->n, n = k->m;
    p->key = *k;
    LT_CHECK(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    const cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->epilogue;
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    /* Stored shapes, column-major: A (op_a ? k x m : m x k), B (op_b ? n x k : k x n). */
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->la, in_type, k->tb ? k->k : m, k->tb ? m : k->k, k->ldb));
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->lb, in_type, k->ta ? n : k->k, k->ta ? k->k : n, k->lda));
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, m, n, k->ldc));
    cublasLtMatmulPreference_t pref;
    size_t ws = LT_WORKSPACE;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws));
    /* The heuristic assumes 256-byte aligned operands unless told otherwise;
     * cuBLASLt's A is our B. */
    uint32_t al_a = (uint32_t)k->align_b, al_b = (uint32_t)k->align_a, al_c = (uint32_t)k->align_c;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &al_a, sizeof al_a));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &al_b, sizeof al_b));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &al_c, sizeof al_c));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(st->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                            &res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found && k->epilogue == CUBLASLT_EPILOGUE_DEFAULT)
        SR_ABORT("cuBLASLt has no algorithm for a %dx%dx%d GEMM (trans %d%d, math %d)", k->m, k->n,
                 k->k, k->ta, k->tb, k->math);
    p->none = !found;
    if (found)
        p->algo = res.algo;
    p->used = 1;
}

static struct gemm_plan *plan_for(struct dense_state *st, const struct gemm_key *k)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    for (int probe = 0; probe < PLAN_SLOTS; probe++) {
        struct gemm_plan *p = &st->plans[(h + probe) % PLAN_SLOTS];
        if (p->used && !memcmp(&p->key, k, sizeof *k))
            return p;
        if (!p->used) {
            make_plan(st, p, k);
            return p;
        }
    }
    SR_ABORT("more than %d distinct GEMM shapes: raise PLAN_SLOTS", PLAN_SLOTS);
}

__global__ void to_bf16_kernel(const float *src, int rows, int cols, int ld, __nv_bfloat16 *dst)
{
    size_t n = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / cols, c = i % cols;
        dst[r * ld + c] = __float2bfloat16_rn(src[r * ld + c]);
    }
}

/* A row-major (rows, cols) matrix of stride ld rounded to bf16 at dst. */
static void round_bf16(cudaStream_t st, const float *src, int rows, int cols, int ld,
                       __nv_bfloat16 *dst)
{
    to_bf16_kernel<<<sr_cu_blocks((long long)rows * cols, 256), 256, 0, st>>>(src, rows, cols, ld,
                                                                             dst);
    SR_CU_LAUNCHED();
}

/* Scratch for both bf16 operands; grown (outside any capture) when a larger
 * shape first appears, never shrunk. */
static __nv_bfloat16 *bf16_scratch(struct dense_state *st, size_t elems)
{
    if (elems > st->bf16_elems) {
        SR_CU_CHECK(cudaDeviceSynchronize());
        cudaFree(st->bf16);
        SR_CU_CHECK(cudaMalloc((void **)&st->bf16, elems * sizeof(__nv_bfloat16)));
        st->bf16_elems = elems;
    }
    return st->bf16;
}

__global__ void scale_kernel(float *c, int m, int n, int ldc, float beta)
{
    size_t total = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float *p = c + (i / n) * ldc + i % n;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

/* The largest power of two (at most 256) that divides the address. */
static int alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && a % al)
        al /= 2;
    return al;
}

/* ---- K-major weight gradients ---------------------------------------------------- */

/* A weight gradient, C = Aᵀ B over the batch (A (k, m), B (k, n), both
 * batch-major), is the one GEMM whose operands both run along k. In tf32 on an
 * H200 cuBLASLt takes such a GEMM at about 200 TFLOP/s, and at 320-380 with
 * one operand K-major (bench/ceilings --wgrad: DCNv2's 512 x 3456 over 16384
 * in 0.29 ms against 0.18). When the GEMM is wide enough for that to repay
 * the copy, the narrower operand is transposed into scratch first (cuBLASLt's
 * matrix transform, about 3 TB/s) and the GEMM runs on it. The choice depends
 * on the shape and math alone, so reruns stay bit-identical. fp32 and bf16
 * math gain nothing from it (measured alike) and keep the plain GEMM. */
#define KMAJOR_MIN_K 4096     /* the batch: long enough that the GEMM's time is its FLOPs */
#define KMAJOR_MIN_WIDE 2048  /* the wider of m, n: the saving grows with it, the copy does not */
#define KMAJOR_MIN_NARROW 16  /* the narrower: below it the GEMM is a reduction, not worth it */

static int wants_k_major(enum sr_math math, int ta, int tb, int m, int n, int k)
{
    const int wide = m > n ? m : n, narrow = m < n ? m : n;
    return math == SR_MATH_TF32 && ta && !tb && k >= KMAJOR_MIN_K && wide >= KMAJOR_MIN_WIDE &&
           narrow >= KMAJOR_MIN_NARROW;
}

/* The row-major (rows, cols) matrix src of stride ld, transposed into the
 * scratch as a row-major (cols, rows) matrix; *ld_out is its stride (rows,
 * rounded up to 16 bytes). The scratch grows as bf16_scratch does. */
static const float *transpose_to_scratch(struct dense_state *st, cudaStream_t stream,
                                         const float *src, int rows, int cols, int ld,
                                         int *ld_out)
{
    const int ldt = (rows + 3) / 4 * 4;
    const size_t elems = (size_t)cols * ldt;
    if (elems > st->kmajor_elems) {
        SR_CU_CHECK(cudaDeviceSynchronize());
        cudaFree(st->kmajor);
        SR_CU_CHECK(cudaMalloc((void **)&st->kmajor, elems * sizeof(float)));
        st->kmajor_elems = elems;
    }
    /* Column-major views: src is (cols, rows), the result (rows, cols). */
    cublasLtMatrixLayout_t from, to;
    LT_CHECK(cublasLtMatrixLayoutCreate(&from, CUDA_R_32F, cols, rows, ld));
    LT_CHECK(cublasLtMatrixLayoutCreate(&to, CUDA_R_32F, rows, cols, ldt));
    const float one = 1.0f, zero = 0.0f;
    LT_CHECK(cublasLtMatrixTransform(st->lt, st->transpose, &one, src, from, &zero, NULL, NULL,
                                     st->kmajor, to, stream));
    cublasLtMatrixLayoutDestroy(from);
    cublasLtMatrixLayoutDestroy(to);
    *ld_out = ldt;
    return st->kmajor;
}

static void cu_gemm(struct sr_device *dev, sr_stream_t s, enum sr_transpose trans_a,
                    enum sr_transpose trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* C = Aᵀ B with the narrower of A and B transposed to K-major first. */
static void gemm_k_major(struct sr_device *dev, sr_stream_t s, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc)
{
    struct dense_state *ds = state_of(dev);
    cudaStream_t st = sr_cu_stream(dev, s);
    int ldt;
    if (m <= n) { /* Aᵀ as a row-major (m, k): C = Aᵀ B, both plain */
        const float *at = transpose_to_scratch(ds, st, a, k, m, lda, &ldt);
        cu_gemm(dev, s, SR_NO_TRANS, SR_NO_TRANS, m, n, k, alpha, at, ldt, b, ldb, beta, c, ldc);
    } else { /* Bᵀ as a row-major (n, k): C = Aᵀ (Bᵀ)ᵀ */
        const float *bt = transpose_to_scratch(ds, st, b, k, n, ldb, &ldt);
        cu_gemm(dev, s, SR_TRANS, SR_TRANS, m, n, k, alpha, a, lda, bt, ldt, beta, c, ldc);
    }
}

/* C = alpha op(A) op(B) + beta C through a plan, k > 0, then the epilogue
 * (cublasLtEpilogue_t: DEFAULT, or BIAS / RELU_BIAS with bias (n), broadcast
 * over C's rows). Returns 0, having queued nothing but bf16 roundings, when
 * cuBLASLt has no algorithm for the epilogue. */
static int gemm_lt(struct sr_device *dev, sr_stream_t s, enum sr_transpose trans_a,
                    enum sr_transpose trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc, int epilogue,
                    const float *bias)
{
    cudaStream_t st = sr_cu_stream(dev, s);
    struct dense_state *ds = state_of(dev);
    const void *pa = a, *pb = b;
    if (dev->math == SR_MATH_BF16) {
        int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
        int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
        size_t a_elems = (size_t)(a_rows - 1) * lda + a_cols;
        size_t b_elems = (size_t)(b_rows - 1) * ldb + b_cols;
        size_t a_off = (a_elems + 63) / 64 * 64;
        __nv_bfloat16 *scratch = bf16_scratch(ds, a_off + b_elems);
        round_bf16(st, a, a_rows, a_cols, lda, scratch);
        round_bf16(st, b, b_rows, b_cols, ldb, scratch + a_off);
        pa = scratch;
        pb = scratch + a_off;
    }
    struct gemm_key key = {(int)trans_a, (int)trans_b, m, n, k, lda, ldb, ldc, (int)dev->math,
                           alignment(pa), alignment(pb), alignment(c), epilogue};
    struct gemm_plan *p = plan_for(ds, &key);
    if (p->none)
        return 0;
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) /* a host value, read when the GEMM is queued */
        LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof bias));
    LT_CHECK(cublasLtMatmul(ds->lt, p->op, &alpha, pb, p->la, pa, p->lb, &beta, c, p->lc, c, p->lc,
                            &p->algo, ds->workspace, LT_WORKSPACE, st));
    return 1;
}

static void cu_gemm(struct sr_device *dev, sr_stream_t s, enum sr_transpose trans_a,
                    enum sr_transpose trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    SR_ASSERT(m >= 0 && n >= 0 && k >= 0);
    if (m == 0 || n == 0)
        return;
    cudaStream_t st = sr_cu_stream(dev, s);
    if (k == 0) { /* C = beta C */
        scale_kernel<<<sr_cu_blocks((long long)m * n, 256), 256, 0, st>>>(c, m, n, ldc, beta);
        SR_CU_LAUNCHED();
        return;
    }
    if (wants_k_major(dev->math, trans_a, trans_b, m, n, k)) {
        gemm_k_major(dev, s, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    (void)gemm_lt(dev, s, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                  CUBLASLT_EPILOGUE_DEFAULT, NULL);
}

/* ---- epilogues and ReLU ----------------------------------------------------------- */

/* I: the index type, 32-bit when the matrix allows (its modulo is far cheaper). */
template <typename I>
__global__ void bias_relu_kernel(float *y, const float *bias, int rows, int cols, int relu)
{
    const I n = (I)rows * (I)cols;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        float v = y[i] + bias[i % (I)cols];
        y[i] = relu && !(v > 0.0f) ? 0.0f : v;
    }
}

/* The same per element, 4 elements a thread (cols a multiple of 4, y and bias
 * 16-byte aligned): the same bits as bias_relu_kernel. */
template <typename I>
__global__ void bias_relu4_kernel(float4 *y, const float4 *bias, int rows, int cols4, int relu)
{
    const I n = (I)rows * (I)cols4;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const float4 b = __ldg(bias + i % (I)cols4);
        float4 v = y[i];
        v.x += b.x, v.y += b.y, v.z += b.z, v.w += b.w;
        if (relu) {
            v.x = v.x > 0.0f ? v.x : 0.0f;
            v.y = v.y > 0.0f ? v.y : 0.0f;
            v.z = v.z > 0.0f ? v.z : 0.0f;
            v.w = v.w > 0.0f ? v.w : 0.0f;
        }
        y[i] = v;
    }
}

static void cu_bias_relu_forward(struct sr_device *dev, sr_stream_t s, float *y, const float *bias,
                                 int rows, int cols, int relu)
{
    if ((size_t)rows * cols == 0)
        return;
    if (cols % 4 == 0 && ((uintptr_t)y & 15) == 0 && ((uintptr_t)bias & 15) == 0) {
        const long long n4 = (long long)rows * (cols / 4);
        const unsigned grid4 = sr_cu_blocks(n4, 256);
        if (n4 + (long long)grid4 * 256 < (1ll << 31))
            bias_relu4_kernel<unsigned><<<grid4, 256, 0, sr_cu_stream(dev, s)>>>(
                (float4 *)y, (const float4 *)bias, rows, cols / 4, relu);
        else
            bias_relu4_kernel<size_t><<<grid4, 256, 0, sr_cu_stream(dev, s)>>>(
                (float4 *)y, (const float4 *)bias, rows, cols / 4, relu);
        SR_CU_LAUNCHED();
        return;
    }
    const unsigned grid = sr_cu_blocks((long long)rows * cols, 256);
    if ((long long)rows * cols + (long long)grid * 256 < (1ll << 31))
        bias_relu_kernel<unsigned><<<grid, 256, 0, sr_cu_stream(dev, s)>>>(y, bias, rows, cols, relu);
    else
        bias_relu_kernel<size_t><<<grid, 256, 0, sr_cu_stream(dev, s)>>>(y, bias, rows, cols, relu);
    SR_CU_LAUNCHED();
}

/* The linear layer's forward: the GEMM with cuBLASLt's bias (and ReLU)
 * epilogue, which adds the bias to the fp32 result as bias_relu_forward does,
 * without a pass that reads and writes y again (workload M's MLPs: 0.24 GB of
 * activations a step). A bias not 16-byte aligned, or a shape cuBLASLt has no
 * epilogue algorithm for, takes the GEMM and then bias_relu_forward. */
static void cu_linear_forward(struct sr_device *dev, sr_stream_t s, const float *x, const float *w,
                              const float *bias, int B, int in, int out, int relu, float *y)
{
    SR_ASSERT(B >= 0 && in >= 0 && out >= 0);
    if (B == 0 || out == 0)
        return;
    const int epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    if (in > 0 && alignment(bias) >= 16 &&
        gemm_lt(dev, s, SR_NO_TRANS, SR_TRANS, B, out, in, 1.0f, x, in, w, in, 0.0f, y, out, epi,
                bias))
        return;
    cu_gemm(dev, s, SR_NO_TRANS, SR_TRANS, B, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    cu_bias_relu_forward(dev, s, y, bias, B, out, relu);
}

__global__ void relu_kernel(const float *x, float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void cu_relu_forward(struct sr_device *dev, sr_stream_t s, const float *x, float *y,
                            size_t n)
{
    if (!n)
        return;
    relu_kernel<<<sr_cu_blocks((long long)n, 256), 256, 0, sr_cu_stream(dev, s)>>>(x, y, n);
    SR_CU_LAUNCHED();
}

__global__ void relu_backward_kernel(const float *y, float *dy, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void cu_relu_backward(struct sr_device *dev, sr_stream_t s, const float *y, float *dy,
                             size_t n)
{
    if (!n)
        return;
    relu_backward_kernel<<<sr_cu_blocks((long long)n, 256), 256, 0, sr_cu_stream(dev, s)>>>(y, dy,
                                                                                          n);
    SR_CU_LAUNCHED();
}

/* dy masked by y > 0 (relu) or as it is; stored back when masked. */
template <int V>
__device__ __forceinline__ colvec<V> masked(const float *y, float *dy, size_t i, int relu)
{
    colvec<V> v = col_load<V>(dy + i);
    if (relu) {
        const colvec<V> m = col_load<V>(y + i);
#pragma unroll
        for (int e = 0; e < V; e++)
            v.x[e] = m.x[e] > 0.0f ? v.x[e] : 0.0f;
        col_store<V>(dy + i, v);
    }
    return v;
}

/* Pass 1 of the column sums (cuda_column_sums.cuh), dy masked by y > 0 first
 * when relu. */
template <int V>
__global__ void column_partials_kernel(const float *y, float *dy, int rows, int cols, int relu,
                                       int chunk, float *partial)
{
    const int c = (blockIdx.x * 32 + threadIdx.x) * V;
    const int r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; e++)
        acc[e] = 0.0f;
    if (c < cols)
        colsum_rows<V>(r0, r1, acc,
                       [&](int r) { return masked<V>(y, dy, (size_t)r * cols + c, relu); });
    colsum_block_store<V>(acc, c, cols, partial);
}

/* Pass 2: dbias[c] = the chunks' partials added in chunk order. */
__global__ void column_finish_kernel(const float *partial, int chunks, int cols, float *dbias)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float acc = 0.0f;
#pragma unroll 8
    for (int k = 0; k < chunks; k++)
        acc += __ldg(partial + (size_t)k * cols + c);
    dbias[c] = acc;
}

extern "C" struct sr_cu_colsum sr_cu_colsum_plan(struct sr_device *dev, int rows, int cols,
                                                 int V)
{
    struct sr_cu_colsum p;
    p.col_blocks = (cols + 32 * V - 1) / (32 * V);
    /* About 4 blocks per multiprocessor, chunks of at least 64 rows. */
    int want = 4 * sr_cu_ctx(dev)->num_sms / p.col_blocks;
    int chunks = want < 1 ? 1 : want;
    if (chunks > (rows + 63) / 64)
        chunks = (rows + 63) / 64;
    if ((size_t)chunks * cols > PARTIAL_FLOATS)
        chunks = (int)(PARTIAL_FLOATS / cols);
    SR_ASSERT(chunks >= 1);
    p.chunk = (rows + chunks - 1) / chunks;
    p.chunks = (rows + p.chunk - 1) / p.chunk;
    p.partial = state_of(dev)->partial;
    return p;
}

extern "C" void sr_cu_colsum_finish(cudaStream_t st, const struct sr_cu_colsum *plan, int cols,
                                    float *dbias)
{
    column_finish_kernel<<<(cols + 127) / 128, 128, 0, st>>>(plan->partial, plan->chunks, cols,
                                                             dbias);
    SR_CU_LAUNCHED();
}

static void cu_relu_bias_backward(struct sr_device *dev, sr_stream_t s, const float *y, float *dy,
                                  int rows, int cols, int relu, float *dbias)
{
    if (cols == 0)
        return;
    cudaStream_t st = sr_cu_stream(dev, s);
    if (rows == 0) {
        SR_CU_CHECK(cudaMemsetAsync(dbias, 0, sizeof(float) * cols, st));
        return;
    }
    const int V = cols % 4 == 0 && ((uintptr_t)y & 15) == 0 && ((uintptr_t)dy & 15) == 0 ? 4 : 1;
    const struct sr_cu_colsum p = sr_cu_colsum_plan(dev, rows, cols, V);
    dim3 grid(p.col_blocks, p.chunks), block(32, SUM_TY);
    if (V == 4)
        column_partials_kernel<4><<<grid, block, 0, st>>>(y, dy, rows, cols, relu, p.chunk, p.partial);
    else
        column_partials_kernel<1><<<grid, block, 0, st>>>(y, dy, rows, cols, relu, p.chunk, p.partial);
    SR_CU_LAUNCHED();
    sr_cu_colsum_finish(st, &p, cols, dbias);
}

static void cu_bias_grad(struct sr_device *dev, sr_stream_t s, const float *dy, int rows, int cols,
                         float *dbias)
{
    cu_relu_bias_backward(dev, s, NULL, (float *)dy, rows, cols, 0, dbias);
}

/* ---- loss ------------------------------------------------------------------------- */

__device__ static inline float sigmoidf_stable(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

#define LOSS_THREADS 512
/* One block: thread t takes samples t, t + 512, ...; the per-thread sums in
 * double are added in a fixed tree and rounded to fp32 once. */
__global__ void bce_kernel(const float *logits, const float *labels, const float *mask, int n,
                           float scale, float *dlogits, float *loss_sum)
{
    __shared__ double part[LOSS_THREADS];
    double sum = 0.0;
    for (int i = threadIdx.x; i < n; i += LOSS_THREADS) {
        float m = mask ? mask[i] : 1.0f;
        if (m == 0.0f) {
            dlogits[i] = 0.0f;
            continue;
        }
        double x = logits[i], y = labels[i];
        sum += m * (fmax(x, 0.0) - x * y + log1p(exp(-fabs(x))));
        dlogits[i] = m * (sigmoidf_stable(logits[i]) - labels[i]) * scale;
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = LOSS_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *loss_sum = (float)part[0];
}

static void cu_bce_with_logits(struct sr_device *dev, sr_stream_t s, const float *logits,
                               const float *labels, const float *mask, int n, float scale,
                               float *dlogits, float *loss_sum)
{
    bce_kernel<<<1, LOSS_THREADS, 0, sr_cu_stream(dev, s)>>>(logits, labels, mask, n, scale,
                                                             dlogits, loss_sum);
    SR_CU_LAUNCHED();
}

extern "C" const struct sr_dense_ops sr_cuda_dense_ops = {
    .gemm = cu_gemm,
    .linear_forward = cu_linear_forward,
    .bias_relu_forward = cu_bias_relu_forward,
    .relu_forward = cu_relu_forward,
    .relu_backward = cu_relu_backward,
    .bias_grad = cu_bias_grad,
    .relu_bias_backward = cu_relu_bias_backward,
    .interaction_forward = sr_cu_interaction_forward,
    .interaction_backward = sr_cu_interaction_backward,
    .dcn_cross_forward = sr_cu_dcn_cross_forward,
    .dcn_cross_backward = sr_cu_dcn_cross_backward,
    .bce_with_logits = cu_bce_with_logits,
};
