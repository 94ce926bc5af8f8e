/*
 * The per-step scalars that the optimizers read from device memory: the
 * learning rates and the step number of the training step being run.
 *
 * Why on the device: a GPU step issued as a sequence of stream-ordered ops
 * (or captured once in a CUDA graph) must not bake the learning rate or the
 * step into its launches, or every step would need new launch arguments (and
 * a captured graph would freeze them: DESIGN.md, "Traps"). So the host writes
 * one small block per step into pinned host memory and copies it, on the
 * step's stream and before the step's ops, into a device twin; the ops read
 * lr and step through device pointers when they run.
 *
 *   host (pinned, sr_dev_alloc_host)   device twin (sr_dev_alloc)
 *   [dense_lr | emb_lr | step]   --sr_dev_copy on the stream-->   [same]
 *
 * Who reads what: the dense optimizer (shardrec/dense_optim.h) reads
 * dense_lr and step; the embedding optimizers read emb_lr and step
 * (sr_ebc_set_update_scalars, sr_sharded_ebc_set_update_scalars).
 *
 * The trainer owns the blocks (src/train/step_scalars.c): the host writes a
 * slot only after the device has copied it out the last time it was used
 * (an event per slot), so the host may run ahead of the device.
 */
#ifndef SHARDREC_STEP_SCALARS_H
#define SHARDREC_STEP_SCALARS_H

#include <stdint.h>

struct sr_step_scalars {
    float dense_lr; /* the dense optimizer's learning rate at this step */
    float emb_lr;   /* the embedding optimizers' */
    int64_t step;   /* the training step, from 1 (Adam's bias correction) */
};

#endif
