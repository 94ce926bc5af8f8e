/*
 * Loss: binary cross-entropy with logits, as torch.nn.BCEWithLogitsLoss.
 * The model's loss is the mean over the global batch; each rank computes
 * the SUM over its samples into device memory (summed across ranks with the
 * last gradient bucket, read by the host only for a log line) and
 * seeds its backward with dlogit = (σ(z) − y) / (global batch), so that
 * summing dense gradients over ranks gives the global mean's gradient.
 * Masked samples (padding of an evaluation batch) count for nothing.
 *
 * The per-sample loss max(z,0) − z·y + log1p(e^−|z|) is finite for any
 * finite logit, where log(σ(z)) would overflow.
 */
#include "device/ops_dense.h"
#include "model/loss.h"

void sr_bce_loss(struct sr_device *dev, sr_stream_t s, const float *logits, const float *labels,
                 const float *mask, int n, float scale, float *dlogits, float *loss_sum)
{
    sr_op_dense_bce_with_logits(dev, s, logits, labels, mask, n, scale, dlogits, loss_sum);
}
