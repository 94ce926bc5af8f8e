/*
 * Accounting and reports (trainer_report.c): the training's collectives,
 * host waits and per-step stage times, log and metrics lines, the summary.
 */
#ifndef SHARDREC_TRAIN_TRAINER_REPORT_H
#define SHARDREC_TRAIN_TRAINER_REPORT_H

#include <stdint.h>

#include "shardrec/comm.h"

struct sr_trainer;

struct sr_trainer_acct {
    struct sr_comm_counters comm; /* collectives of training steps only */
    int64_t *step_ns;   /* (step_rows, SR_SPAN_COUNT) per-step stage times, ns */
    int64_t step_rows;  /* rows reserved: min(--steps, SR_STEP_ROWS_MAX) */
    int64_t step_kept;  /* rows filled */
    int64_t step_seen;  /* steps offered (a reservoir sample beyond step_rows) */
    uint64_t reservoir; /* its generator state (never touches the model's) */
    uint64_t syncs[2];  /* host waits of training (steps, loss reads): stream syncs, event waits */
};

struct sr_interval {
    int64_t steps;
    double seconds;
    double loss_sum;
};
void sr_trainer_log_interval(struct sr_trainer *t, int64_t step, double loss,
                             const struct sr_interval *iv, int evaluated, double elapsed);
/* Close --metrics (rank 0; elsewhere a no-op): SR_ERR_WRITE naming the file
 * and the reason when a line or the close failed, else SR_OK. */
int sr_trainer_close_metrics(struct sr_trainer *t);
/* acc += after - before, field by field (uint64 fields wrap, so a before
 * above after subtracts). */
void sr_trainer_counters_add_diff(struct sr_comm_counters *acc,
                                  const struct sr_comm_counters *after,
                                  const struct sr_comm_counters *before);

double sr_now_s(void);
/* Stage s (enum sr_span) on rank 0: its mean ms over the kept steps (0: never ran). */
double sr_trainer_stage_mean_ms(const struct sr_trainer *t, int s);

#endif
