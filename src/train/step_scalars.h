/*
 * Writing the per-step scalars (struct sr_step_scalars, shardrec/optim.h) to
 * the device: the host fills a slot of pinned host memory and copies it, on
 * the step's stream, into the one device block the step's optimizer ops
 * read.
 *
 *   host (pinned)  slot 0 [dense_lr | emb_lr | step]   slot 1 [...]
 *                        \ sr_dev_copy, stream-ordered /
 *   device                       [dense_lr | emb_lr | step]
 *
 * Two slots, each with an event recorded after its copy: the host rewrites a
 * slot only when the device has copied it out (an event wait that is already
 * complete unless the host runs more than a step ahead), so nothing here
 * waits for the step's work. The device block is overwritten by the next
 * step's copy: the ops that read it must be issued on the same stream (or
 * ordered before that copy).
 */
#ifndef SHARDREC_TRAIN_STEP_SCALARS_H
#define SHARDREC_TRAIN_STEP_SCALARS_H

#include "shardrec/device.h"
#include "shardrec/optim.h"

#define SR_STEP_SCALARS_SLOTS 2

struct sr_step_scalars_buf {
    struct sr_device *dev;
    struct sr_step_scalars *host;             /* (SR_STEP_SCALARS_SLOTS) pinned host */
    struct sr_step_scalars *block;            /* (1) device: what the step's ops read */
    sr_event_t copied[SR_STEP_SCALARS_SLOTS]; /* recorded after each slot's copy */
    int next;                                 /* the slot the next put writes */
};

/* Allocate the slots, the device block and the events on dev. */
void sr_step_scalars_buf_init(struct sr_step_scalars_buf *b, struct sr_device *dev);
/* Waits for the device to finish with them, then frees; a zeroed struct is a no-op. */
void sr_step_scalars_buf_free(struct sr_step_scalars_buf *b);
/* Write *v into the next slot and copy it to the device block on stream s;
 * returns the device block (valid for the work issued on s after this call,
 * until the next put). Allocates nothing. */
const struct sr_step_scalars *sr_step_scalars_buf_put(struct sr_step_scalars_buf *b,
                                                      const struct sr_step_scalars *v,
                                                      sr_stream_t s);

#endif
