/*
 * Dense optimizer: steps the dense model's one flat parameter block with SGD,
 * Adagrad or Adam (formulas in optim.h), keeping its state (Adagrad's sums,
 * Adam's m and v) in one block on the model's device. Dense gradients arrive
 * already summed over ranks (all-reduce SUM, the loss being a mean over the
 * global batch), so every rank applies the same update.
 *
 * Row-wise Adagrad is for embedding tables only: sr_dense_optim_check rejects
 * it; sr_dense_optim_init aborts on it (a caller bug once checked).
 */
#ifndef SHARDREC_DENSE_OPTIM_H
#define SHARDREC_DENSE_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"
#include "shardrec/optim.h"

struct sr_dense_optim;

/* SR_OK for sgd, adagrad and adam; SR_ERR_INVALID_ARG (with a message) for
 * rowwise_adagrad or an unknown kind. */
int sr_dense_optim_check(enum sr_optim_kind kind);

/* State for n parameters on dev, zeroed (Adagrad's sums start at
 * cfg->initial_accumulator). cfg is copied. Aborts if kind fails the check. */
void sr_dense_optim_init(struct sr_dense_optim **out, struct sr_device *dev,
                         const struct sr_optim_config *cfg, size_t n);

/* One update of params (n, device) in place from grads (n, device) with
 * the learning rate scalars->dense_lr at step scalars->step (counted from 1;
 * Adam's bias correction). scalars is DEVICE memory (the twin of the step's
 * block, struct sr_step_scalars in optim.h), read when the update runs: the host never
 * passes lr or step by value, so it need not wait for the device to change
 * them. Stream-ordered on s: scalars, params and grads must be ready there
 * (written earlier on s, or s made to wait for their writers). Allocates
 * nothing; a step < 1 aborts when the update runs. */
void sr_dense_optim_step(struct sr_dense_optim *o, sr_stream_t s, float *params,
                         const float *grads, const struct sr_step_scalars *scalars);

/* Number of fp32 state values (0 for SGD, n for Adagrad, 2n for Adam) and a
 * pointer to them (device), for checkpoints. */
float *sr_dense_optim_state(struct sr_dense_optim *o, size_t *count);

void sr_dense_optim_free(struct sr_dense_optim *o);

#endif
