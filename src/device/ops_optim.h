/*
 * Dense optimizer ops: one step of SGD, Adagrad or Adam over a flat fp32
 * array of n parameters (the dense model's one parameter block), with the
 * formulas of include/shardrec/optim.h. The fused sparse (row-wise) updates of
 * embedding tables live with the embedding ops, not here.
 *
 * All arrays are device memory of `dev`, n elements each, updated in place;
 * ops are stream-ordered (see ops_dense.h). Element i's update reads only
 * element i, so any split over threads gives bit-identical results.
 *
 * The learning rate `lr` (1 float) and Adam's `step` (1 int64) are device
 * pointers too, read when the op runs, not when it is issued: the host
 * writes them per step into a struct sr_step_scalars (shardrec/optim.h) and
 * copies it to the device on the same stream before the op, so a queued or
 * captured step never carries a stale learning rate.
 */
#ifndef SHARDREC_OPS_OPTIM_H
#define SHARDREC_OPS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"
#include "device/op_decl.h"

#define SR_OPS_OPTIM(OP)                                                                           \
    /* w -= lr * g */                                                                              \
    OP(optim, sgd_step,                                                                            \
       SR_STREAM(s) SR_INOUT(float *, w, SR_F32(n)) SR_IN(const float *, g, SR_F32(n))             \
       SR_ARG(size_t, n) SR_IN(const float *, lr, sizeof(float)))                                  \
    /* sum += g^2; w -= lr * g / (sqrt(sum) + eps) */                                              \
    OP(optim, adagrad_step,                                                                        \
       SR_STREAM(s) SR_INOUT(float *, w, SR_F32(n)) SR_INOUT(float *, sum, SR_F32(n))              \
       SR_IN(const float *, g, SR_F32(n)) SR_ARG(size_t, n)                                        \
       SR_IN(const float *, lr, sizeof(float)) SR_ARG(float, eps))                                 \
    /* m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;                                                 \
     * w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps), t = *step >= 1                       \
     * (aborts otherwise when it runs). */                                                         \
    OP(optim, adam_step,                                                                           \
       SR_STREAM(s) SR_INOUT(float *, w, SR_F32(n)) SR_INOUT(float *, m, SR_F32(n))                \
       SR_INOUT(float *, v, SR_F32(n)) SR_IN(const float *, g, SR_F32(n)) SR_ARG(size_t, n)        \
       SR_IN(const float *, lr, sizeof(float)) SR_ARG(float, beta1) SR_ARG(float, beta2)           \
       SR_ARG(float, eps) SR_IN(const int64_t *, step, sizeof(int64_t)))

struct sr_optim_ops {
    SR_OPS_OPTIM(SR_OP_MEMBER)
};
SR_OPS_OPTIM(SR_OP_PROTO)

#endif
