/*
 * BCE-with-logits loss fused with the seed of the backward (see loss.c).
 */
#ifndef SHARDREC_MODEL_LOSS_H
#define SHARDREC_MODEL_LOSS_H

#include "shardrec/device.h"

/* dlogits (n) = mask * (sigmoid(logits) - labels) * scale; returns the
 * (unscaled) sum over unmasked samples of the BCE loss, on the host.
 * loss_dev is one double of device scratch. Synchronises the stream. */
double sr_bce_loss(struct sr_device *dev, sr_stream_t s, const float *logits, const float *labels,
                   const float *mask, int n, float scale, float *dlogits, double *loss_dev);

#endif
