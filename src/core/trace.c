/*
 * The span recorder and stage timer (shardrec/trace.h).
 *
 * Process-wide: a flag (recording), the current step, the window of steps
 * recorded, and a table of tracks reserved at init. Per thread
 * (_Thread_local): the stack of open spans, the per-stage accumulators, the
 * track the thread claimed and its step override (a pipeline's thread working
 * on another batch than the current step's). The hot path, a
 * begin/end pair, is two clock reads, a push and a pop, an add, and while
 * recording a store of one span into the thread's own track followed by a
 * release store of its count; no lock, no allocation.
 *
 *   tracks[0..max)  { name, spans[cap], n (atomic), dropped }
 *   next_track      atomic: the first unclaimed track
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/trace.h"

#define MAX_DEPTH 16

struct track {
    char name[32];
    struct sr_trace_span *spans; /* (cap) */
    size_t cap;
    _Atomic size_t n;
    uint64_t dropped;
};

struct open_span {
    int64_t t0;
    int span, index, recorded;
    int64_t step;
};

struct thread_state {
    struct track *track; /* claimed on the first recorded span */
    char name[32];       /* the track's name, once claimed */
    int depth;
    int64_t step; /* sr_trace_set_thread_step's override; 0: none */
    struct open_span stack[MAX_DEPTH];
    int64_t acc[SR_SPAN_COUNT]; /* ns per stage since the last take */
    sr_trace_marker marker;     /* sr_trace_set_marker; NULL: none */
    void *marker_ctx;
};

static struct {
    _Atomic int on;
    _Atomic int64_t step;
    int64_t first, last; /* sr_trace_set_window; last 0: every step */
    int64_t skew;
    int max_tracks;
    _Atomic int next_track;
    _Atomic uint64_t unclaimed; /* spans of threads that found no free track */
    struct track *tracks;
} g;

static _Thread_local struct thread_state tl;

static const char *const span_names[SR_SPAN_COUNT] = {
    "step",         "load",          "copy",        "embedding.forward",
    "input_dist.counts", "input_dist.data", "lookup", "output_dist",
    "bottom_mlp",   "interaction",   "top_mlp",     "backward",
    "embedding.backward", "emb_grad_dist", "allreduce.bucket", "optimizer",
    "comm.wait",    "comm",          "data.wait"};

const char *sr_span_name(enum sr_span s)
{
    return (unsigned)s < SR_SPAN_COUNT ? span_names[s] : "?";
}

void sr_trace_init(int max_tracks, size_t spans_per_track)
{
    const char *skew = getenv("SR_TRACE_TEST_SKEW_NS");
    sr_trace_free();
    g.skew = skew ? strtoll(skew, NULL, 10) : 0;
    g.tracks = sr_calloc((size_t)max_tracks, sizeof *g.tracks);
    for (int k = 0; k < max_tracks; k++) {
        g.tracks[k].spans = sr_calloc(spans_per_track, sizeof(struct sr_trace_span));
        g.tracks[k].cap = spans_per_track;
    }
    g.max_tracks = max_tracks;
    atomic_store(&g.next_track, 0);
    atomic_store(&g.unclaimed, 0);
}

void sr_trace_free(void)
{
    atomic_store(&g.on, 0);
    for (int k = 0; k < g.max_tracks; k++)
        sr_free(g.tracks[k].spans);
    sr_free(g.tracks);
    g.tracks = NULL;
    g.max_tracks = 0;
    g.first = g.last = 0;
    atomic_store(&g.next_track, 0);
    tl.track = NULL; /* the calling thread's claim; others' die with their threads */
}

void sr_trace_set_recording(int on)
{
    atomic_store_explicit(&g.on, on && g.tracks, memory_order_release);
}

void sr_trace_set_window(int64_t first, int64_t last)
{
    g.first = first;
    g.last = last;
}

int sr_trace_recording(void)
{
    if (!atomic_load_explicit(&g.on, memory_order_relaxed))
        return 0;
    int64_t step = sr_trace_step();
    return g.last == 0 || (step >= g.first && step <= g.last);
}

void sr_trace_set_step(int64_t step)
{
    atomic_store_explicit(&g.step, step, memory_order_relaxed);
}

void sr_trace_set_thread_step(int64_t step)
{
    tl.step = step;
}

int64_t sr_trace_step(void)
{
    return tl.step ? tl.step : atomic_load_explicit(&g.step, memory_order_relaxed);
}

int64_t sr_trace_now(void)
{
    return sr_clock_ns() + g.skew;
}

int64_t sr_trace_skew_ns(void)
{
    return g.skew;
}

void sr_trace_thread_name(const char *name)
{
    snprintf(tl.name, sizeof tl.name, "%s", name);
    if (tl.track)
        memcpy(tl.track->name, tl.name, sizeof tl.name);
}

/* A fresh track, named `name`; NULL when all are taken. */
static struct track *claim_track(const char *name)
{
    int k = atomic_fetch_add(&g.next_track, 1);
    if (!g.tracks || k >= g.max_tracks)
        return NULL;
    if (name && name[0])
        snprintf(g.tracks[k].name, sizeof g.tracks[k].name, "%s", name);
    else
        snprintf(g.tracks[k].name, sizeof g.tracks[k].name, "thread %d", k);
    return &g.tracks[k];
}

int sr_trace_track_claim(const char *name)
{
    struct track *tr = claim_track(name);
    return tr ? (int)(tr - g.tracks) : -1;
}

/* The calling thread's track, claimed now if need be; NULL when all are taken. */
static struct track *my_track(void)
{
    if (!tl.track)
        tl.track = claim_track(tl.name);
    return tl.track;
}

static void store_on(struct track *tr, const struct sr_trace_span *sp)
{
    if (!tr) {
        atomic_fetch_add_explicit(&g.unclaimed, 1, memory_order_relaxed);
        return;
    }
    size_t n = atomic_load_explicit(&tr->n, memory_order_relaxed);
    if (n == tr->cap) {
        tr->dropped++;
        return;
    }
    tr->spans[n] = *sp;
    atomic_store_explicit(&tr->n, n + 1, memory_order_release);
}

static void store(const struct sr_trace_span *sp)
{
    store_on(my_track(), sp);
}

void sr_trace_set_marker(sr_trace_marker fn, void *ctx)
{
    tl.marker = fn;
    tl.marker_ctx = ctx;
}

void sr_trace_begin(enum sr_span s, int index)
{
    int d = tl.depth++;
    if (d >= MAX_DEPTH)
        return;
    struct open_span *o = &tl.stack[d];
    o->span = s;
    o->index = index;
    o->recorded = sr_trace_recording();
    o->step = o->recorded ? sr_trace_step() : 0;
    if (o->recorded && tl.marker)
        tl.marker(tl.marker_ctx, s, index, o->step, 0);
    o->t0 = sr_trace_now();
}

int64_t sr_trace_end_args(const struct sr_trace_args *args)
{
    int64_t t1 = sr_trace_now();
    if (tl.depth == 0)
        return 0;
    int d = --tl.depth;
    if (d >= MAX_DEPTH)
        return 0;
    const struct open_span *o = &tl.stack[d];
    int64_t dt = t1 - o->t0;
    tl.acc[o->span] += dt;
    if (o->recorded) {
        struct sr_trace_span sp = {.t0 = o->t0,
                                   .t1 = t1,
                                   .step = o->step,
                                   .span = (int16_t)o->span,
                                   .has_args = args != NULL,
                                   .index = o->index};
        if (args)
            sp.args = *args;
        store(&sp);
        if (tl.marker)
            tl.marker(tl.marker_ctx, o->span, o->index, o->step, 1);
    }
    return dt;
}

int64_t sr_trace_end(void)
{
    return sr_trace_end_args(NULL);
}

void sr_trace_current(int *span, int *index)
{
    int d = tl.depth < MAX_DEPTH ? tl.depth : MAX_DEPTH;
    *span = d ? tl.stack[d - 1].span : -1;
    *index = d ? tl.stack[d - 1].index : -1;
}

void sr_trace_record(enum sr_span s, int64_t t0, int64_t t1, int64_t step,
                     const struct sr_trace_args *args)
{
    struct sr_trace_span sp = {
        .t0 = t0, .t1 = t1, .step = step, .span = (int16_t)s, .has_args = args != NULL};
    sp.index = args ? args->index : -1;
    if (args)
        sp.args = *args;
    store(&sp);
}

void sr_trace_record_on(int track, enum sr_span s, int index, int64_t t0, int64_t t1,
                        int64_t step)
{
    struct sr_trace_span sp = {
        .t0 = t0, .t1 = t1, .step = step, .span = (int16_t)s, .index = index};
    store_on(track >= 0 && track < g.max_tracks ? &g.tracks[track] : NULL, &sp);
}

void sr_trace_take_stage_ns(int64_t ns[SR_SPAN_COUNT])
{
    memcpy(ns, tl.acc, sizeof tl.acc);
    memset(tl.acc, 0, sizeof tl.acc);
}

double sr_trace_span_cost_ns(int n)
{
    struct thread_state saved = tl;
    struct track scratch = {.cap = 1024};
    int was_on = atomic_load(&g.on);
    scratch.spans = sr_calloc(scratch.cap, sizeof *scratch.spans);
    tl.track = &scratch;
    atomic_store(&g.on, 1);
    int64_t t0 = sr_clock_ns();
    for (int i = 0; i < n; i++) {
        sr_trace_begin(SR_SPAN_STEP, -1);
        sr_trace_end();
        if (atomic_load_explicit(&scratch.n, memory_order_relaxed) == scratch.cap)
            atomic_store_explicit(&scratch.n, 0, memory_order_relaxed);
    }
    int64_t dt = sr_clock_ns() - t0;
    atomic_store(&g.on, was_on);
    tl = saved;
    sr_free(scratch.spans);
    return n > 0 ? (double)dt / n : 0;
}

int sr_trace_num_tracks(void)
{
    int n = atomic_load(&g.next_track);
    return n < g.max_tracks ? n : g.max_tracks;
}

const char *sr_trace_track_name(int k)
{
    return g.tracks[k].name;
}

const struct sr_trace_span *sr_trace_track_spans(int k, size_t *n)
{
    *n = atomic_load_explicit(&g.tracks[k].n, memory_order_acquire);
    return g.tracks[k].spans;
}

uint64_t sr_trace_dropped(void)
{
    uint64_t d = atomic_load(&g.unclaimed);
    for (int k = 0; k < sr_trace_num_tracks(); k++)
        d += g.tracks[k].dropped;
    return d;
}
