/*
 * --trace (trace_file.c): clock alignment across ranks, device spans, the
 * merged Chrome trace file.
 */
#ifndef SHARDREC_TRAIN_TRACE_FILE_H
#define SHARDREC_TRAIN_TRACE_FILE_H

#include <stdint.h>

#include "train/device_spans.h"

struct sr_trainer;

struct sr_trainer_trace {
    int on;                          /* --trace given */
    int64_t first, last;             /* the recorded steps */
    int64_t *clock_offset_ns;        /* (W) rank 0: each rank's trace clock minus rank 0's */
    int64_t *clock_uncertainty_ns;   /* (W) rank 0: half the best round trip */
    double span_cost_ns;             /* one begin/end pair, measured at start-up */
    uint64_t spans;                  /* rank 0: spans this rank recorded */
    int written;
    struct sr_device_spans *dspans;  /* device spans (NULL on the immediate CPU device) */
};

int sr_trainer_trace_init(struct sr_trainer *t);
int sr_trainer_trace_write(struct sr_trainer *t);
void sr_trainer_trace_free(struct sr_trainer *t);

#endif
