/*
 * A Linear layer, y = x·Wᵀ + b with W [out, in], optionally followed by ReLU:
 * views into the model's parameter and gradient blocks, computed through
 * dev->dense (three GEMMs per layer and two fused epilogues).
 */
#ifndef SHARDREC_MODEL_LINEAR_H
#define SHARDREC_MODEL_LINEAR_H

#include "shardrec/device.h"

struct sr_linear {
    int in, out;
    int relu;       /* 1: ReLU after the affine map */
    float *weight;  /* (out, in) device, in the parameter block */
    float *bias;    /* (out) device */
    float *dweight; /* (out, in) device, in the gradient block */
    float *dbias;   /* (out) device */
};

/* y (B, out) = act(x (B, in) · Wᵀ + b). */
void sr_linear_forward(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                       const float *x, int B, float *y);

/* Given the forward's x and y and dy (B, out), the gradient of the layer's
 * output before masking: masks dy in place by the ReLU when relu, overwrites
 * dweight and dbias, and writes dx (B, in) unless dx is NULL. Same as
 * sr_linear_backward_data then sr_linear_backward_weights. */
void sr_linear_backward(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                        const float *x, const float *y, float *dy, int B, float *dx);

/* The data part of backward: masks dy (B, out) in place by the ReLU of the
 * forward's y when relu, overwrites dbias, and writes dx (B, in) unless dx
 * is NULL. dy then holds the masked gradient the weight part reads. */
void sr_linear_backward_data(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                             const float *y, float *dy, int B, float *dx);

/* The weight part: overwrites dweight (out, in) = dyᵀ · x, from the forward's
 * x (B, in) and the dy the data part masked (unchanged since). Independent
 * of dx, so it may be issued any time after the data part. */
void sr_linear_backward_weights(struct sr_device *dev, sr_stream_t s, const struct sr_linear *l,
                                const float *x, const float *dy, int B);

#endif
