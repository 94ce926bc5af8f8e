/*
 * Timing device ops for the `shardrec bench` commands (cli/bench_timer.c):
 * a figure is the median time per launch of an op, measured on the device's
 * own clock.
 *
 *   warm-up   blocks of 1, 4, 16, ... launches until one lasts a tenth of
 *             repeat_s (at least two blocks): the cold start, and the launch
 *             time to plan with
 *   repeats   `repeats` blocks of enough launches to last repeat_s each
 *             (aimed 10% above); a block shorter than 3/4 of it (a slow
 *             warm-up launch misled the count) is timed again with more
 *             launches, at most 3 times in a figure
 *   figure    the median block's time per launch
 *
 * A block is timed by two device events on the timer's stream around it; an
 * op with an untimed `prep` gets two events around each launch, summed. The
 * host waits only after a block, never inside one. On the CPU the events read
 * the host clock as the ops run.
 */
#ifndef SHARDREC_CLI_BENCH_TIMER_H
#define SHARDREC_CLI_BENCH_TIMER_H

#include <stdint.h>

#include "shardrec/device.h"

#define CLI_TIMER_MAX_REPEATS  8
#define CLI_TIMER_MAX_LAUNCHES 100000 /* a block's launches, at most */

/* What a figure times: launch(arg, i) between events; prep(arg, i), when
 * set, untimed before each launch. i counts the figure's launches from 0.
 * Both issue their work on the timer's stream. */
struct cli_timed_op {
    void (*launch)(void *arg, int64_t i);
    void (*prep)(void *arg, int64_t i);
    void *arg;
};

struct cli_bench_timer {
    struct sr_device *dev;
    sr_stream_t stream; /* the ops' stream, created by init */
    double repeat_s;    /* a timed block lasts at least this */
    int repeats;        /* 1 .. CLI_TIMER_MAX_REPEATS */
    sr_event_t *events; /* (n_events), made as blocks need them, outside any block */
    int64_t n_events;
};

void cli_bench_timer_init(struct cli_bench_timer *t, struct sr_device *dev, double repeat_s,
                          int repeats);
/* Waits for the stream, then destroys the events and the stream. */
void cli_bench_timer_free(struct cli_bench_timer *t);
/* The median seconds per launch of op; *launches gets a timed block's
 * launches. */
double cli_bench_timer_figure(struct cli_bench_timer *t, const struct cli_timed_op *op,
                              int64_t *launches);

#endif
