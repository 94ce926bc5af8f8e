/*
 * Optimizer settings shared by the dense optimizers (model/) and the fused
 * sparse optimizers (embed/). Formulas, per element w with gradient g, step t
 * counted from 1 (DESIGN.md, numerical contract):
 *
 *   sgd              w -= lr * g
 *   adagrad          s += g^2;  w -= lr * g / (sqrt(s) + eps)        eps 1e-10, s0 0
 *   rowwise_adagrad  s_r += mean over the row of g^2;
 *                    w -= lr * g / (sqrt(s_r) + eps)                 eps 1e-8 (embeddings only)
 *   adam             m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *                    w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *                    b1 0.9, b2 0.999, eps 1e-8; for embeddings only touched rows
 *                    are updated (as PyTorch's SparseAdam), t is the global step.
 *
 * The per-step scalars (struct sr_step_scalars, below) are what every
 * optimizer reads from device memory at each step: the learning rates and
 * the step number. Why on the device: a GPU step issued as a sequence of
 * stream-ordered ops (or captured once in a CUDA graph) must not bake the
 * learning rate or the step into its launches, or every step would need new
 * launch arguments (and a captured graph would freeze them: DESIGN.md,
 * "Traps"). So the host writes one small block per step into pinned host
 * memory and copies it, on the step's stream and before the step's ops, into
 * a device twin; the ops read lr and step through device pointers when they
 * run.
 *
 *   host (pinned, sr_dev_alloc_host)   device twin (sr_dev_alloc)
 *   [dense_lr | emb_lr | step]   --sr_dev_copy on the stream-->   [same]
 *
 * Who reads what: the dense optimizer (shardrec/dense_optim.h) reads
 * dense_lr and step; the embedding optimizers read emb_lr and step
 * (sr_ebc_set_update_scalars, sr_sharded_ebc_set_update_scalars); the
 * optimizer ops (src/device/ops_optim.h) take pointers to the fields. The
 * trainer owns the blocks (src/train/step_scalars.c): the host writes a slot
 * only after the device has copied it out the last time it was used (an
 * event per slot), so the host may run ahead of the device.
 */
#ifndef SHARDREC_OPTIM_H
#define SHARDREC_OPTIM_H

#include <stdint.h>

enum sr_optim_kind {
    SR_OPTIM_SGD = 0,
    SR_OPTIM_ADAGRAD,
    SR_OPTIM_ROWWISE_ADAGRAD,
    SR_OPTIM_ADAM,
};

struct sr_optim_config {
    enum sr_optim_kind kind;
    float eps;                 /* set by sr_optim_config_default for the kind */
    float beta1, beta2;        /* adam */
    float initial_accumulator; /* adagrad / rowwise adagrad */
};

/* The PyTorch/FBGEMM defaults for `kind`. */
struct sr_optim_config sr_optim_config_default(enum sr_optim_kind kind);
/* Parse "sgd", "adagrad", "rowwise_adagrad" (or "rowwise-adagrad"), "adam";
 * returns SR_ERR_INVALID_ARG with a message listing the choices otherwise. */
int sr_optim_kind_parse(const char *s, enum sr_optim_kind *out);
const char *sr_optim_kind_name(enum sr_optim_kind kind);
/* Number of fp32 state values per element (per_row = 1 counts per row). */
int sr_optim_state_per_element(enum sr_optim_kind kind, int *per_row);

/* One step's scalars, as the optimizers read them from device memory. */
struct sr_step_scalars {
    float dense_lr; /* the dense optimizer's learning rate at this step */
    float emb_lr;   /* the embedding optimizers' */
    int64_t step;   /* the training step, from 1 (Adam's bias correction) */
};

#endif
