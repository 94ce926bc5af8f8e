/*
 * Device spans: when the device ran each stage, beside when the host issued
 * it (--trace on a device whose ops complete after their call returns: CUDA,
 * the deferred CPU device; on the immediate CPU device the host spans are
 * the device's).
 *
 *   compute thread                      device stream of the stage
 *   sr_trace_begin(LOOKUP) --marker-->  record ev0  (lane: compute)
 *   ... issue kernels ...               kernels
 *   sr_trace_end()         --marker-->  record ev1
 *   after the step: poll   --------->   ev1 passed? t = anchor + elapsed(anchor, ev)
 *                                       -> span on track "device compute"
 *
 * Lanes: a stage's events go to the stream its work goes to: the copy of
 * the pipeline's next batch to the copy stream ("device copy"), the plain
 * EBC's forked embedding backward to its stream ("device embedding
 * backward"), the embedding exchanges (input dist, output dist, gradient
 * dist) to the sparse stream ("device sparse"), the gradient buckets to the
 * dense stream ("device dense"), the rest to the compute stream ("device
 * compute"). Host-only
 * stages (load, data.wait, comm.wait) get no device span. While paused (a
 * CUDA graph being captured) spans get no events; a replayed step shows as
 * one device "step" span.
 *
 * Clock: an anchor event recorded on the idle compute stream at start-up
 * (and again when recording starts more than a second later), with the trace
 * clock read around it (the uncertainty is half that interval, a few
 * microseconds); an event's time is the anchor's plus the elapsed time
 * between them. Once a resolved event is over a second past the anchor it
 * becomes the anchor, so the float elapsed times stay exact to a microsecond
 * through the window.
 *
 * Memory: a pool of events made at start-up; a span holds two until it is
 * resolved. Nothing allocates during the steps. With no event free, the
 * marker waits for the oldest closed span (a host wait; counted).
 * One thread (the compute thread) marks, polls and drains.
 */
#ifndef SHARDREC_TRAIN_DEVICE_SPANS_H
#define SHARDREC_TRAIN_DEVICE_SPANS_H

#include <stdint.h>

#include "shardrec/device.h"
#include "shardrec/trace.h"

struct sr_device_spans;

/* The streams stages run on besides the compute stream (NULL): each
 * present one gets a track of its own ("device copy", "device embedding
 * backward", "device sparse" for the embedding exchanges, "device dense"
 * for the gradient buckets); NULL: that work runs on the compute stream. */
struct sr_device_span_streams {
    sr_stream_t copy, emb_backward, sparse, dense;
};
/* Syncs the compute stream (start-up only) to anchor the clock. */
struct sr_device_spans *sr_device_spans_create(struct sr_device *dev,
                                               const struct sr_device_span_streams *st);
/* The marker for sr_trace_set_marker (ctx: the sr_device_spans). */
void sr_device_spans_mark(void *ctx, enum sr_span s, int index, int64_t step, int end);
/* Spans begun while paused get no events (NULL ds: no-op). */
void sr_device_spans_pause(struct sr_device_spans *ds, int paused);
/* Resolve the closed spans whose events have passed, oldest first; never
 * waits (NULL ds: no-op). */
void sr_device_spans_poll(struct sr_device_spans *ds);
/* Wait for every closed span and resolve it (NULL ds: no-op). */
void sr_device_spans_drain(struct sr_device_spans *ds);
/* At the start of the recorded window: when the anchor is over a second
 * old, wait for the compute stream and anchor the clock again, so that device
 * times in a window late in a long run are as exact as at start-up (a float
 * elapsed time over an hour is good to a quarter millisecond, and the device's
 * clock may drift from the host's). NULL ds: no-op. */
void sr_device_spans_reanchor(struct sr_device_spans *ds);
/* Device ms of stage s per step in which it had a device span (0: none). */
double sr_device_spans_stage_ms(const struct sr_device_spans *ds, enum sr_span s);
/* Resolved device step spans; host waits the pool's exhaustion forced. */
int64_t sr_device_spans_steps(const struct sr_device_spans *ds);
int64_t sr_device_spans_waits(const struct sr_device_spans *ds);
/* The anchor's uncertainty, ns. */
int64_t sr_device_spans_anchor_ns(const struct sr_device_spans *ds);
/* Waits for what is pending on its streams, then destroys the events. */
void sr_device_spans_free(struct sr_device_spans *ds);

#endif
