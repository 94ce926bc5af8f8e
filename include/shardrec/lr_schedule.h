/*
 * Learning-rate schedules: constant, or MLPerf DLRM's linear warm-up then
 * polynomial decay. Steps count from 1.
 *
 *   lr
 *   base |       +-----------+
 *        |     /              \__
 *        |   /                   \_
 *   end  | /                       \_____________
 *        +-------+-----------+--------+---------- step
 *             WARMUP   DECAY_START   DECAY_START + DECAY_STEPS
 *
 *   step <  WARMUP                  base * step / WARMUP
 *   step <  DECAY_START             base
 *   step <  DECAY_START+DECAY_STEPS end + (base-end) * ((DECAY_STEPS - (step-DECAY_START))
 *                                                         / DECAY_STEPS)^POWER
 *   after                           end (0)
 *
 * The warm-up and decay values equal those of the DLRM reference's
 * LRPolicyScheduler for power 2 and end 0. Two deliberate differences: the
 * reference floors the decayed rate at 1e-7 and then freezes it at its last
 * decayed value; here the rate reaches end_lr (0) and stays there. With
 * DECAY_STEPS 0 there is no decay: base after the warm-up.
 */
#ifndef SHARDREC_LR_SCHEDULE_H
#define SHARDREC_LR_SCHEDULE_H

#include <stdint.h>

enum sr_lr_kind { SR_LR_CONSTANT = 0, SR_LR_WARMUP_POLY = 1 };

struct sr_lr_schedule {
    enum sr_lr_kind kind;
    float base_lr;
    int64_t warmup_steps, decay_start, decay_steps;
    float power;  /* 2 by default */
    float end_lr; /* 0 */
};

/* Parse "constant" or "warmup_poly:WARMUP:DECAY_START:DECAY_STEPS[:POWER]".
 * Returns SR_ERR_INVALID_ARG naming the bad part: an unknown kind, a missing
 * or non-integer or negative field, a trailing field, a power that is not a
 * positive finite number, or DECAY_START < WARMUP (warm-up must end before the
 * decay starts, as in the reference). base_lr must be finite and >= 0. */
int sr_lr_schedule_parse(const char *spec, float base_lr, struct sr_lr_schedule *out);

/* The learning rate of step `step` (from 1). */
float sr_lr_at(const struct sr_lr_schedule *s, int64_t step);

#endif
