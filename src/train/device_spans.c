/*
 * Device spans (train/device_spans.h).
 *
 *   open[depth]        spans begun and not ended: lane, ev0
 *   closed[head..tail) ended, not yet resolved (in end order): lane, ev0, ev1
 *   pool[n_free]       events free for the next marks
 *   anchor             an event whose trace-clock time is anchor_ns
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "train/device_spans.h"

#define POOL_EVENTS 2048
#define MAX_OPEN    16
#define REANCHOR_MS 1000.0f
#define REANCHOR_HOST_NS 1000000000LL /* re-read the host clock when recording starts later */

enum { LANE_NONE = -1, LANE_COMPUTE = 0, LANE_COPY, LANE_EMB, LANE_SPARSE, LANE_DENSE, LANE_COUNT };

static const char *const lane_names[LANE_COUNT] = {"device compute", "device copy",
                                                   "device embedding backward", "device sparse",
                                                   "device dense"};

struct mark {
    int lane, span, index;
    int64_t step;
    sr_event_t ev0, ev1;
};

struct sr_device_spans {
    struct sr_device *dev;
    sr_stream_t stream[LANE_COUNT];
    int present[LANE_COUNT];
    int track[LANE_COUNT]; /* claimed at a lane's first span; -2: not yet */
    int paused;
    struct mark open[MAX_OPEN];
    int depth;
    struct mark closed[POOL_EVENTS / 2];
    int64_t head, tail;
    sr_event_t pool[POOL_EVENTS];
    int n_free;
    sr_event_t anchor;
    int64_t anchor_ns, anchor_err_ns;
    int64_t stage_ns[SR_SPAN_COUNT];
    int64_t stage_steps[SR_SPAN_COUNT]; /* steps in which the stage had a device span */
    int64_t stage_last[SR_SPAN_COUNT];  /* the last of them */
    int64_t steps, waits;
};

/* The lane of stage s's device work; LANE_NONE for host-only stages. */
static int lane_of(const struct sr_device_spans *ds, enum sr_span s)
{
    switch (s) {
    case SR_SPAN_LOAD:
    case SR_SPAN_DATA_WAIT:
    case SR_SPAN_COMM_WAIT:
    case SR_SPAN_COMM:
        return LANE_NONE;
    case SR_SPAN_COPY:
        return ds->present[LANE_COPY] ? LANE_COPY : LANE_COMPUTE;
    case SR_SPAN_EMB_BACKWARD:
        return ds->present[LANE_EMB] ? LANE_EMB : LANE_COMPUTE;
    case SR_SPAN_INPUT_DIST_COUNTS:
    case SR_SPAN_INPUT_DIST_DATA:
    case SR_SPAN_OUTPUT_DIST:
    case SR_SPAN_EMB_GRAD_DIST:
        return ds->present[LANE_SPARSE] ? LANE_SPARSE : LANE_COMPUTE;
    case SR_SPAN_ALLREDUCE_BUCKET:
        return ds->present[LANE_DENSE] ? LANE_DENSE : LANE_COMPUTE;
    default:
        return LANE_COMPUTE;
    }
}

static void anchor_clock(struct sr_device_spans *ds)
{
    sr_dev_sync(ds->dev, NULL);
    int64_t a = sr_trace_now();
    sr_dev_event_record(ds->dev, ds->anchor, NULL);
    sr_dev_event_sync(ds->dev, ds->anchor);
    int64_t b = sr_trace_now();
    ds->anchor_ns = a + (b - a) / 2;
    ds->anchor_err_ns = (b - a + 1) / 2;
}

struct sr_device_spans *sr_device_spans_create(struct sr_device *dev,
                                               const struct sr_device_span_streams *st)
{
    struct sr_device_spans *ds = sr_calloc(1, sizeof *ds);
    ds->dev = dev;
    ds->present[LANE_COMPUTE] = 1;
    const sr_stream_t streams[LANE_COUNT] = {NULL, st->copy, st->emb_backward, st->sparse,
                                             st->dense};
    for (int l = LANE_COPY; l < LANE_COUNT; l++) {
        ds->present[l] = streams[l] != NULL;
        ds->stream[l] = streams[l];
    }
    for (int l = 0; l < LANE_COUNT; l++)
        ds->track[l] = -2;
    for (int k = 0; k < POOL_EVENTS; k++)
        ds->pool[k] = sr_dev_event_create(dev);
    ds->n_free = POOL_EVENTS;
    ds->anchor = sr_dev_event_create(dev);
    anchor_clock(ds);
    return ds;
}

/* The oldest closed span (head < tail). */
static struct mark *oldest(struct sr_device_spans *ds)
{
    return &ds->closed[ds->head % (POOL_EVENTS / 2)];
}

/* Event e's time on the trace clock (e has passed). */
static int64_t time_of(const struct sr_device_spans *ds, sr_event_t e, float *ms)
{
    *ms = sr_dev_event_elapsed_ms(ds->dev, ds->anchor, e);
    return ds->anchor_ns + (int64_t)((double)*ms * 1e6);
}

/* The oldest closed span, whose events have passed: to its lane's track. */
static void resolve_head(struct sr_device_spans *ds)
{
    struct mark *m = oldest(ds);
    float ms0, ms1;
    int64_t t0 = time_of(ds, m->ev0, &ms0), t1 = time_of(ds, m->ev1, &ms1);
    if (t1 < t0) /* one stream orders them: only rounding could */
        t1 = t0;
    if (ds->track[m->lane] == -2)
        ds->track[m->lane] = sr_trace_track_claim(lane_names[m->lane]);
    sr_trace_record_on(ds->track[m->lane], (enum sr_span)m->span, m->index, t0, t1, m->step);
    ds->stage_ns[m->span] += t1 - t0;
    if (ds->stage_last[m->span] != m->step || !ds->stage_steps[m->span]) {
        ds->stage_steps[m->span]++;
        ds->stage_last[m->span] = m->step;
    }
    ds->steps += m->span == SR_SPAN_STEP;
    ds->pool[ds->n_free++] = m->ev0;
    if (ms1 > REANCHOR_MS) { /* ev1 becomes the anchor */
        ds->pool[ds->n_free++] = ds->anchor;
        ds->anchor = m->ev1;
        ds->anchor_ns = t1;
    } else {
        ds->pool[ds->n_free++] = m->ev1;
    }
    ds->head++;
}

void sr_device_spans_poll(struct sr_device_spans *ds)
{
    if (!ds)
        return;
    while (ds->head < ds->tail && sr_dev_event_query(ds->dev, oldest(ds)->ev1) &&
           sr_dev_event_query(ds->dev, oldest(ds)->ev0))
        resolve_head(ds);
}

/* Wait for the oldest closed span's events, then resolve it. */
static void wait_oldest(struct sr_device_spans *ds)
{
    sr_dev_event_sync(ds->dev, oldest(ds)->ev0);
    sr_dev_event_sync(ds->dev, oldest(ds)->ev1);
    resolve_head(ds);
}

void sr_device_spans_drain(struct sr_device_spans *ds)
{
    if (!ds)
        return;
    while (ds->head < ds->tail)
        wait_oldest(ds);
}

/* An event from the pool; with none free, the oldest closed span is waited for. */
static sr_event_t take_event(struct sr_device_spans *ds)
{
    if (ds->n_free == 0) {
        SR_ASSERT(ds->head < ds->tail); /* MAX_OPEN spans hold far fewer than the pool */
        wait_oldest(ds);
        ds->waits++;
        sr_device_spans_poll(ds);
    }
    return ds->pool[--ds->n_free];
}

void sr_device_spans_mark(void *ctx, enum sr_span s, int index, int64_t step, int end)
{
    struct sr_device_spans *ds = ctx;
    if (!end) {
        SR_ASSERT(ds->depth < MAX_OPEN);
        struct mark *m = &ds->open[ds->depth++];
        *m = (struct mark){.lane = ds->paused ? LANE_NONE : lane_of(ds, s),
                           .span = s,
                           .index = index,
                           .step = step};
        if (m->lane != LANE_NONE) {
            m->ev0 = take_event(ds);
            sr_dev_event_record(ds->dev, m->ev0, ds->stream[m->lane]);
        }
        return;
    }
    SR_ASSERT(ds->depth > 0);
    struct mark m = ds->open[--ds->depth];
    SR_ASSERT(m.span == (int)s);
    if (m.lane == LANE_NONE)
        return;
    if (ds->paused) { /* begun before a capture, ended inside it: no event in a graph */
        ds->pool[ds->n_free++] = m.ev0;
        return;
    }
    m.ev1 = take_event(ds);
    sr_dev_event_record(ds->dev, m.ev1, ds->stream[m.lane]);
    ds->closed[ds->tail++ % (POOL_EVENTS / 2)] = m;
}

void sr_device_spans_pause(struct sr_device_spans *ds, int paused)
{
    if (ds)
        ds->paused = paused;
}

double sr_device_spans_stage_ms(const struct sr_device_spans *ds, enum sr_span s)
{
    return ds && ds->stage_steps[s] ? 1e-6 * (double)ds->stage_ns[s] / (double)ds->stage_steps[s]
                                    : 0;
}

void sr_device_spans_reanchor(struct sr_device_spans *ds)
{
    if (!ds || sr_trace_now() - ds->anchor_ns < REANCHOR_HOST_NS)
        return;
    sr_device_spans_drain(ds); /* spans before it resolve on the old anchor */
    anchor_clock(ds);
}

int64_t sr_device_spans_steps(const struct sr_device_spans *ds)
{
    return ds ? ds->steps : 0;
}

int64_t sr_device_spans_waits(const struct sr_device_spans *ds)
{
    return ds ? ds->waits : 0;
}

int64_t sr_device_spans_anchor_ns(const struct sr_device_spans *ds)
{
    return ds ? ds->anchor_err_ns : 0;
}

void sr_device_spans_free(struct sr_device_spans *ds)
{
    if (!ds)
        return;
    for (int l = 0; l < LANE_COUNT; l++)
        if (ds->present[l])
            sr_dev_sync(ds->dev, ds->stream[l]);
    while (ds->head < ds->tail) {
        struct mark *m = oldest(ds);
        ds->pool[ds->n_free++] = m->ev0;
        ds->pool[ds->n_free++] = m->ev1;
        ds->head++;
    }
    for (int d = 0; d < ds->depth; d++)
        if (ds->open[d].lane != LANE_NONE)
            ds->pool[ds->n_free++] = ds->open[d].ev0;
    for (int k = 0; k < ds->n_free; k++)
        sr_dev_event_destroy(ds->dev, ds->pool[k]);
    sr_dev_event_destroy(ds->dev, ds->anchor);
    sr_free(ds);
}
