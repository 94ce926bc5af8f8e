/*
 * BCE-with-logits loss fused with the seed of the backward (see loss.c).
 */
#ifndef SHARDREC_MODEL_LOSS_H
#define SHARDREC_MODEL_LOSS_H

#include "shardrec/device.h"

/* dlogits (n) = mask * (sigmoid(logits) - labels) * scale, and loss_sum (1
 * float, device) = the (unscaled) sum over unmasked samples of the BCE loss,
 * summed in double and rounded once. Stream-ordered on s: nothing is copied
 * to the host and nothing waits. */
void sr_bce_loss(struct sr_device *dev, sr_stream_t s, const float *logits, const float *labels,
                 const float *mask, int n, float scale, float *dlogits, float *loss_sum);

#endif
