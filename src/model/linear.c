/*
 * Linear layer (see linear.h). Forward is one GEMM into y that adds the
 * bias and applies ReLU (the device's linear_forward: the GEMM's epilogue on
 * CUDA, a fused pass after the GEMM on the CPU). Backward is one fused pass
 * (ReLU mask of dy and its column sums, the bias gradient) and two GEMMs:
 *
 *   dW (out, in) = dyᵀ (out, B) · x (B, in)
 *   dx (B, in)   = dy (B, out)  · W (out, in)
 *
 * both overwriting their outputs (beta 0): the gradient block is rewritten by
 * every backward, never accumulated. Backward comes in two parts, the data
 * part (the fused pass and dx) and the weight part (dW), so a model can
 * issue every layer's data part first, down to its input, and the dW GEMMs,
 * which nothing downstream waits for, after.
 */
#include "device/ops_dense.h"
#include "model/linear.h"

void sr_linear_forward(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                       const float *x, int B, float *y)
{
    sr_op_dense_linear_forward(dev, s, x, l->weight, l->bias, B, l->in, l->out, l->relu, y);
}

void sr_linear_backward_data(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                             const float *y, float *dy, int B, float *dx)
{
    sr_op_dense_relu_bias_backward(dev, s, y, dy, B, l->out, l->relu, l->dbias);
    if (dx)
        sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_NO_TRANS, B, l->in, l->out, 1.0f, dy, l->out,
                         l->weight, l->in, 0.0f, dx, l->in);
}

void sr_linear_backward_weights(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                                const float *x, const float *dy, int B)
{
    sr_op_dense_gemm(dev, s, SR_TRANS, SR_NO_TRANS, l->out, l->in, B, 1.0f, dy, l->out, x, l->in,
                     0.0f, l->dweight, l->in);
}

void sr_linear_backward(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                        const float *x, const float *y, float *dy, int B, float *dx)
{
    sr_linear_backward_data(dev, s, l, y, dy, B, dx);
    sr_linear_backward_weights(dev, s, l, x, dy, B);
}
