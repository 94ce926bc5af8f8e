/*
 * The loss ring: the global loss sums of the training steps since the host
 * last looked, kept in device memory so that a step never copies its loss to
 * the host or waits for it (DESIGN.md, "Execution model": the loss stays on
 * the device until a log line asks for it).
 *
 *   sums (device)  [ step first | first+1 | ... | first+n-1 | unused ... ]  cap
 *   host (pinned)  the same, after a read
 *
 * Each step's last gradient bucket writes its global loss sum (the sum over
 * ranks of the per-rank BCE sums, fp32) into the slot that push returns.
 * read copies the n pending sums back with ONE sync of the stream, then
 * walks them in step order exactly as the loop did when the loss came back
 * every step: loss = sum / global batch (double), checked for NaN or
 * infinity, added to the interval's sum. So the values logged are
 * bit-identical, and a non-finite loss is reported naming the FIRST bad
 * step, however many steps later it is read.
 *
 * The trainer reads at every log or metrics line, before an evaluation, at
 * the end of the run, on an error, and whenever the ring is full; its
 * capacity is min(log interval, SR_LOSS_RING_MAX), so a NaN is detected at
 * most that many steps after it appeared.
 */
#ifndef SHARDREC_TRAIN_LOSS_RING_H
#define SHARDREC_TRAIN_LOSS_RING_H

#include <stdint.h>

#include "shardrec/device.h"

#define SR_LOSS_RING_MAX 50 /* steps between reads at most, whatever --log-every */

struct sr_loss_ring {
    struct sr_device *dev;
    float *sums;   /* (cap) device: global loss sum of step first + i */
    float *host;   /* (cap) pinned host: where read copies them */
    int cap, n;    /* slots, and slots pending (pushed, not read) */
    int64_t first; /* the step of sums[0] when n > 0 */
};

/* cap >= 1 slots on dev. */
void sr_loss_ring_init(struct sr_loss_ring *r, struct sr_device *dev, int cap);
/* Waits for the device to finish with them, then frees; a zeroed struct is a no-op. */
void sr_loss_ring_free(struct sr_loss_ring *r);
/* The device slot (1 float) that receives step's global loss sum; steps are
 * pushed in order, one each. Aborts when full (read first). */
float *sr_loss_ring_push(struct sr_loss_ring *r, int64_t step);
/* 1 when push needs a read first. */
int sr_loss_ring_full(const struct sr_loss_ring *r);
/* Copy the pending sums to the host (one sync of the default stream, none
 * when nothing is pending) and empty the ring. In step order, each loss =
 * sum / divisor is added to *loss_sum and stored in *last_loss, up to the
 * first non-finite one: that returns SR_ERR_NUMERIC naming its step ("training
 * loss is nan at step N"), the losses after it are not added. */
int sr_loss_ring_read(struct sr_loss_ring *r, double divisor, double *loss_sum, double *last_loss);

#endif
