/*
 * The DCNv2 cross network (TorchRec's LowRankCrossNet), the interaction of
 * --interaction dcn: views into the model's parameter, gradient and
 * activation blocks, and its forward and backward through dev->dense (see
 * dcn.c).
 */
#ifndef SHARDREC_MODEL_DCN_H
#define SHARDREC_MODEL_DCN_H

#include "shardrec/device.h"
#include "shardrec/dlrm.h"

struct sr_dcn {
    int L, R, F, D, n; /* layers, rank, features, dim, n = (F+1)·D */
    /* parameters and gradients of layer l, in the model's blocks */
    float *V[SR_DCN_MAX_LAYERS], *U[SR_DCN_MAX_LAYERS], *bias[SR_DCN_MAX_LAYERS];
    float *dV[SR_DCN_MAX_LAYERS], *dU[SR_DCN_MAX_LAYERS], *dbias[SR_DCN_MAX_LAYERS];
    /* activations of layer l for max_batch samples, device, kept for backward */
    float *x[SR_DCN_MAX_LAYERS];  /* (B, n): x_{l+1}, the layer's output; x[L-1] is x_L */
    float *h[SR_DCN_MAX_LAYERS];  /* (B, R): V_l x_l */
    float *u[SR_DCN_MAX_LAYERS];  /* (B, n): U_l h_l */
    float *du[SR_DCN_MAX_LAYERS]; /* (B, n): the gradient of u, kept for dU */
    float *dh[SR_DCN_MAX_LAYERS]; /* (B, R): the gradient of h, kept for dU and dV */
};

/* x_L = dcn->x[L-1] (B, n) from x_0 = [z (B, D) | pooled (B, F*D)] row by row. */
void sr_dcn_forward(struct sr_device *dev, sr_stream_t s, struct sr_dcn *c, const float *z,
                    const float *pooled, int B);

/* The data gradients, from the last layer down: given dx (B, n), x_L's
 * gradient, which it uses as scratch (overwritten), writes x_0's gradient
 * as dz (B, D) and dpooled (B, F*D) (overwritten) and each layer's dbias;
 * keeps du and dh for the weight part. */
void sr_dcn_backward_data(struct sr_device *dev, sr_stream_t s, struct sr_dcn *c, const float *z,
                          const float *pooled, float *dx, int B, float *dz, float *dpooled);

/* Layer l's weight gradients dU_l and dV_l (overwritten), after
 * sr_dcn_backward_data of the same B samples (z and pooled unchanged). */
void sr_dcn_backward_weights(struct sr_device *dev, sr_stream_t s, struct sr_dcn *c, int l,
                             const float *z, const float *pooled, int B);

#endif
