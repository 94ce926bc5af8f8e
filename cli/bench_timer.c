/*
 * Timing device ops for the `shardrec bench` commands: warm-up, blocks timed
 * by device events, the median (the method is in cli/bench_timer.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "bench_timer.h"

void cli_bench_timer_init(struct cli_bench_timer *t, struct sr_device *dev, double repeat_s,
                          int repeats)
{
    SR_ASSERT(repeats >= 1 && repeats <= CLI_TIMER_MAX_REPEATS && repeat_s > 0);
    memset(t, 0, sizeof *t);
    t->dev = dev;
    t->stream = sr_dev_stream_create(dev);
    t->repeat_s = repeat_s;
    t->repeats = repeats;
}

void cli_bench_timer_free(struct cli_bench_timer *t)
{
    sr_dev_sync(t->dev, t->stream);
    for (int64_t i = 0; i < t->n_events; i++)
        sr_dev_event_destroy(t->dev, t->events[i]);
    sr_free(t->events);
    sr_dev_stream_destroy(t->dev, t->stream);
}

/* At least n events. */
static void ensure_events(struct cli_bench_timer *t, int64_t n)
{
    if (n <= t->n_events)
        return;
    t->events = sr_realloc(t->events, (size_t)n * sizeof *t->events);
    while (t->n_events < n)
        t->events[t->n_events++] = sr_dev_event_create(t->dev);
}

/* Seconds the timed part of launches first .. first+k-1 took: two events
 * around the block, or around each launch when there is an untimed prep;
 * the host waits once, after the block. */
static double time_block(struct cli_bench_timer *t, const struct cli_timed_op *op, int64_t first,
                         int64_t k)
{
    struct sr_device *dev = t->dev;
    const int64_t pairs = op->prep ? k : 1;
    ensure_events(t, 2 * pairs);
    if (!op->prep)
        sr_dev_event_record(dev, t->events[0], t->stream);
    for (int64_t i = 0; i < k; i++) {
        if (op->prep) {
            op->prep(op->arg, first + i);
            sr_dev_event_record(dev, t->events[2 * i], t->stream);
        }
        op->launch(op->arg, first + i);
        if (op->prep)
            sr_dev_event_record(dev, t->events[2 * i + 1], t->stream);
    }
    if (!op->prep)
        sr_dev_event_record(dev, t->events[1], t->stream);
    sr_dev_event_sync(dev, t->events[2 * pairs - 1]);
    double ms = 0;
    for (int64_t p = 0; p < pairs; p++)
        ms += sr_dev_event_elapsed_ms(dev, t->events[2 * p], t->events[2 * p + 1]);
    return 1e-3 * ms;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Launches for a block of `want` seconds (aimed 10% above) when `k` took `s`. */
static int64_t launches_for(double want, int64_t k, double s)
{
    const double n = ceil(1.1 * want * (double)k / (s > 0 ? s : 1e-9));
    return n < 1 ? 1 : n > CLI_TIMER_MAX_LAUNCHES ? CLI_TIMER_MAX_LAUNCHES : (int64_t)n;
}

double cli_bench_timer_figure(struct cli_bench_timer *t, const struct cli_timed_op *op,
                              int64_t *launches)
{
    const double want = t->repeat_s;
    int64_t w = 1, at = 0, k;
    double s, sec[CLI_TIMER_MAX_REPEATS];
    for (int blocks = 1;; blocks++) { /* the warm-up: blocks of 1, 4, 16, ... */
        s = time_block(t, op, at, w);
        at += w;
        if ((blocks >= 2 && s >= want / 10) || w >= CLI_TIMER_MAX_LAUNCHES / 4)
            break;
        w *= 4;
    }
    k = launches_for(want, w, s);
    for (int r = 0, retries = 0; r < t->repeats;) {
        s = time_block(t, op, at, k);
        at += k;
        if (s < 0.75 * want && k < CLI_TIMER_MAX_LAUNCHES && retries++ < 3) {
            k = launches_for(want, k, s);
            continue;
        }
        sec[r++] = s / (double)k;
    }
    qsort(sec, (size_t)t->repeats, sizeof sec[0], cmp_double);
    *launches = k;
    return sec[t->repeats / 2];
}
