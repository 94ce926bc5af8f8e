/*
 * The DLRM dot interaction (see interaction.c for its layout).
 */
#ifndef SHARDREC_MODEL_INTERACTION_H
#define SHARDREC_MODEL_INTERACTION_H

#include "shardrec/device.h"

/* Output width for F features of dim D: D + F(F+1)/2. */
int sr_interaction_width(int F, int D);

/* out (B, D + F(F+1)/2) from z (B, D) and pooled (B, F*D). */
void sr_interaction_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                            const float *pooled, int B, int F, int D, float *out);

/* dz (B, D) and dpooled (B, F*D), overwritten, from dout (B, D + F(F+1)/2). */
void sr_interaction_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                             const float *pooled, const float *dout, int B, int F, int D, float *dz,
                             float *dpooled);

#endif
