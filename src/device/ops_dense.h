/*
 * Dense compute ops: the table a backend fills so that the model layer
 * (src/model/) can run linear layers, ReLU, the DLRM dot interaction, the
 * DCNv2 cross layers' elementwise parts and the loss without touching device memory itself.
 *
 * Every op takes (dev, stream, ...) and is stream-ordered: on the CPU it has
 * finished when it returns; on a GPU it is queued on `s` and its outputs may
 * be read only after the stream is synchronised. All pointers are device
 * memory of `dev` unless said otherwise. Matrices are row-major fp32.
 *
 * Determinism: the CPU backend splits work with static OpenMP schedules and
 * never reduces across threads in a run-dependent order, so reruns with the
 * same thread count are bit-exact. Bad shapes are caller bugs (SR_ASSERT).
 */
#ifndef SHARDREC_OPS_DENSE_H
#define SHARDREC_OPS_DENSE_H

#include "shardrec/device.h"
#include "device/op_decl.h"

enum sr_transpose { SR_NO_TRANS = 0, SR_TRANS = 1 };

/* Bytes of a row-major (rows, cols) fp32 matrix stored with row stride ld. */
static inline size_t sr_matrix_bytes(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? SR_F32((size_t)(rows - 1) * (size_t)ld + (size_t)cols) : 0;
}

/* Columns of the interaction's output: D + F(F+1)/2. */
static inline size_t sr_dot_interaction_width(int F, int D)
{
    return (size_t)D + (size_t)F * (size_t)(F + 1) / 2;
}

/* Width n of a DCNv2 cross network's input x0 = [z, e_1, ..., e_F]: (F+1)·D. */
static inline size_t sr_dcn_width(int F, int D)
{
    return ((size_t)F + 1) * (size_t)D;
}

/* The ops, declared once (op_decl.h says how to read an entry). */
#define SR_OPS_DENSE(OP)                                                                           \
    /* C (m, n) = alpha * op(A) * op(B) + beta * C. op(A) is (m, k), op(B) is                      \
     * (k, n); lda, ldb, ldc are the row strides of A, B, C as stored. With                        \
     * beta == 0, C is overwritten (its old contents, even NaN, are ignored). */                   \
    OP(dense, gemm,                                                                                \
       SR_STREAM(s) SR_ARG(enum sr_transpose, trans_a) SR_ARG(enum sr_transpose, trans_b)          \
       SR_ARG(int, m) SR_ARG(int, n) SR_ARG(int, k) SR_ARG(float, alpha)                           \
       SR_IN(const float *, a, trans_a ? sr_matrix_bytes(k, m, lda) : sr_matrix_bytes(m, k, lda))  \
       SR_ARG(int, lda)                                                                            \
       SR_IN(const float *, b, trans_b ? sr_matrix_bytes(n, k, ldb) : sr_matrix_bytes(k, n, ldb))  \
       SR_ARG(int, ldb) SR_ARG(float, beta)                                                        \
       SR_IO(float *, c, sr_matrix_bytes(m, n, ldc), beta == 0.0f ? SR_OP_OUT : SR_OP_INOUT)       \
       SR_ARG(int, ldc))                                                                           \
    /* A linear layer's forward: y (B, out) = x (B, in) · wᵀ + bias, w (out, in),                \
     * then y = max(y, 0) when relu; y is overwritten. gemm then                                   \
     * bias_relu_forward, or the GEMM's epilogue where the backend has one: the                    \
     * bias is added to the GEMM's fp32 result and rounded once either way, but                    \
     * the epilogue's GEMM may sum in another order (within gemm's tolerance). */                  \
    OP(dense, linear_forward,                                                                      \
       SR_STREAM(s) SR_IN(const float *, x, SR_F32((size_t)B * in))                                \
       SR_IN(const float *, w, SR_F32((size_t)out * in)) SR_IN(const float *, bias, SR_F32(out))   \
       SR_ARG(int, B) SR_ARG(int, in) SR_ARG(int, out) SR_ARG(int, relu)                           \
       SR_OUT(float *, y, SR_F32((size_t)B * out)))                                                \
    /* y (rows, cols) += bias (cols) broadcast over rows, then y = max(y, 0)                       \
     * when relu. In place: the linear layer's epilogue in one pass. */                            \
    OP(dense, bias_relu_forward,                                                                   \
       SR_STREAM(s) SR_INOUT(float *, y, SR_F32((size_t)rows * cols))                              \
       SR_IN(const float *, bias, SR_F32(cols)) SR_ARG(int, rows) SR_ARG(int, cols)                \
       SR_ARG(int, relu))                                                                          \
    /* y (n) = max(x (n), 0). y may equal x. */                                                    \
    OP(dense, relu_forward,                                                                        \
       SR_STREAM(s) SR_IN(const float *, x, SR_F32(n)) SR_OUT(float *, y, SR_F32(n))               \
       SR_ARG(size_t, n))                                                                          \
    /* dy (n) *= (y > 0), in place; y is the ReLU's output. */                                     \
    OP(dense, relu_backward,                                                                       \
       SR_STREAM(s) SR_IN(const float *, y, SR_F32(n)) SR_INOUT(float *, dy, SR_F32(n))            \
       SR_ARG(size_t, n))                                                                          \
    /* dbias (cols) = column sums of dy (rows, cols); overwrites dbias. */                         \
    OP(dense, bias_grad,                                                                           \
       SR_STREAM(s) SR_IN(const float *, dy, SR_F32((size_t)rows * cols)) SR_ARG(int, rows)        \
       SR_ARG(int, cols) SR_OUT(float *, dbias, SR_F32(cols)))                                     \
    /* The fused backward epilogue of a linear layer followed by ReLU: first                       \
     * dy (rows, cols) *= (y > 0) in place when relu, then dbias = column sums                     \
     * of the masked dy (overwritten). */                                                          \
    OP(dense, relu_bias_backward,                                                                  \
       SR_STREAM(s) SR_IN(const float *, y, relu ? SR_F32((size_t)rows * cols) : 0)                \
       SR_IO(float *, dy, SR_F32((size_t)rows * cols), relu ? SR_OP_INOUT : SR_OP_IN)              \
       SR_ARG(int, rows) SR_ARG(int, cols) SR_ARG(int, relu) SR_OUT(float *, dbias, SR_F32(cols))) \
    /* DLRM dot interaction of B samples. z (B, D) is the bottom MLP output,                       \
     * emb (B, F*D) the pooled embeddings in feature order. With                                   \
     * X = [z, e_1, ..., e_F] (F+1 vectors of D), out (B, D + F(F+1)/2) is                         \
     *   concat(z, <X_i, X_j> for i in 1..F for j in 0..i-1)                                       \
     * the strict lower triangle of X·Xᵀ row by row, as the DLRM reference. */                     \
    OP(dense, interaction_forward,                                                                 \
       SR_STREAM(s) SR_IN(const float *, z, SR_F32((size_t)B * D))                                 \
       SR_IN(const float *, emb, SR_F32((size_t)B * F * D)) SR_ARG(int, B) SR_ARG(int, F)          \
       SR_ARG(int, D)                                                                              \
       SR_OUT(float *, out, SR_F32((size_t)B * sr_dot_interaction_width(F, D))))                   \
    /* Backward of interaction_forward: given dout (B, D + F(F+1)/2), writes                       \
     * (overwrites) dz (B, D) and demb (B, F*D). */                                                \
    OP(dense, interaction_backward,                                                                \
       SR_STREAM(s) SR_IN(const float *, z, SR_F32((size_t)B * D))                                 \
       SR_IN(const float *, emb, SR_F32((size_t)B * F * D))                                        \
       SR_IN(const float *, dout, SR_F32((size_t)B * sr_dot_interaction_width(F, D)))              \
       SR_ARG(int, B) SR_ARG(int, F) SR_ARG(int, D) SR_OUT(float *, dz, SR_F32((size_t)B * D))     \
       SR_OUT(float *, demb, SR_F32((size_t)B * F * D)))                                           \
    /* The elementwise part of one DCNv2 cross layer (TorchRec's LowRankCrossNet)                 \
     * for B samples: x0 (B, n), n = (F+1)*D, is [z_b | emb_b] row by row (z (B, D)                \
     * the bottom MLP output, emb (B, F*D) the pooled embeddings), read in place                   \
     * (never concatenated); u (B, n) = U (V x_l), bias (n). Writes                                \
     *   y = x0 * (u + bias) + xl          (elementwise; y (B, n) overwritten)                     \
     * xl (B, n) is the layer's input; NULL: x0 itself (the first layer).                          \
     * y may not alias any input. */                                                               \
    OP(dense, dcn_cross_forward,                                                                   \
       SR_STREAM(s) SR_IN(const float *, z, SR_F32((size_t)B * D))                                 \
       SR_IN(const float *, emb, SR_F32((size_t)B * F * D))                                        \
       SR_IN(const float *, u, SR_F32((size_t)B * sr_dcn_width(F, D)))                             \
       SR_IN(const float *, bias, SR_F32(sr_dcn_width(F, D)))                                      \
       SR_IN(const float *, xl, SR_F32((size_t)B * sr_dcn_width(F, D))) SR_ARG(int, B)             \
       SR_ARG(int, F) SR_ARG(int, D)                                                               \
       SR_OUT(float *, y, SR_F32((size_t)B * sr_dcn_width(F, D))))                                 \
    /* Backward of dcn_cross_forward's product term, given dy (B, n), the                          \
     * gradient of y:                                                                              \
     *   du    = dy * x0                   (B, n), overwritten                                     \
     *   dbias = column sums of du         (n), overwritten; each column summed                    \
     *                                     over rows in a fixed order                              \
     *   dx0   = dy * (u + bias) [+ dy]    split as x0: dz (B, D), demb (B, F*D)                   \
     * dx0 is x0's gradient through the product, plus dy itself when residual                      \
     * (the first layer, whose xl is x0); it overwrites dz and demb, or is added                   \
     * to them when accumulate (x0 feeds every layer: the layers' shares add up).                  \
     * The gradient of xl through the residual is dy itself, left to the caller. */                \
    OP(dense, dcn_cross_backward,                                                                  \
       SR_STREAM(s) SR_IN(const float *, z, SR_F32((size_t)B * D))                                 \
       SR_IN(const float *, emb, SR_F32((size_t)B * F * D))                                        \
       SR_IN(const float *, u, SR_F32((size_t)B * sr_dcn_width(F, D)))                             \
       SR_IN(const float *, bias, SR_F32(sr_dcn_width(F, D)))                                      \
       SR_IN(const float *, dy, SR_F32((size_t)B * sr_dcn_width(F, D))) SR_ARG(int, B)             \
       SR_ARG(int, F) SR_ARG(int, D) SR_ARG(int, residual) SR_ARG(int, accumulate)                 \
       SR_OUT(float *, du, SR_F32((size_t)B * sr_dcn_width(F, D)))                                 \
       SR_OUT(float *, dbias, SR_F32(sr_dcn_width(F, D)))                                          \
       SR_IO(float *, dz, SR_F32((size_t)B * D), accumulate ? SR_OP_INOUT : SR_OP_OUT)             \
       SR_IO(float *, demb, SR_F32((size_t)B * F * D), accumulate ? SR_OP_INOUT : SR_OP_OUT))      \
    /* Binary cross-entropy with logits, fused with its gradient. For each of                      \
     * the n samples with logit x, label y in {0,1}, weight m (mask; NULL means                    \
     * all 1):                                                                                     \
     *   loss_i = m * (max(x, 0) - x*y + log1p(exp(-|x|)))   (numerically stable)                  \
     *   dlogits_i = m * (sigmoid(x) - y) * scale                                                  \
     * loss_sum (1 float, device) = Σ loss_i, summed in double in a fixed                          \
     * order and rounded to fp32 once. It stays in device memory: the trainer                      \
     * all-reduces it with the last gradient bucket and reads it back only                         \
     * when a log line asks (src/train/loss_ring.h). */                                            \
    OP(dense, bce_with_logits,                                                                     \
       SR_STREAM(s) SR_IN(const float *, logits, SR_F32(n))                                        \
       SR_IN(const float *, labels, SR_F32(n)) SR_IN(const float *, mask, SR_F32(n))               \
       SR_ARG(int, n) SR_ARG(float, scale) SR_OUT(float *, dlogits, SR_F32(n))                     \
       SR_OUT(float *, loss_sum, sizeof(float)))

struct sr_dense_ops {
    SR_OPS_DENSE(SR_OP_MEMBER)
};
/* The ops as layers above device/ call them (ops.c), and their regions. */
SR_OPS_DENSE(SR_OP_PROTO)

#endif
