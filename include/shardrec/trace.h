/*
 * The span recorder and the stage timer: every stage of a step (DESIGN.md's
 * names) is a span, begun and ended on the thread that runs it. Ending a span
 * always adds its duration to the thread's per-stage accumulator (the stage
 * timer the summary reads); while recording is on it also stores the span in
 * the thread's track, which the train layer writes as Chrome trace events.
 *
 *   thread (track "compute")      thread state (_Thread_local)
 *   sr_trace_begin(LOAD)     ---> stack[depth++] = {t0, LOAD, recording?}
 *   ...
 *   sr_trace_end()           ---> t1; acc[LOAD] += t1 - t0;
 *                                 if recorded: track->spans[n++] = {t0, t1, ...}
 *
 * Memory: sr_trace_init reserves every track's buffer (tracks x spans each)
 * before training; a thread claims a track the first time it records (one
 * atomic increment), so recording never allocates and never locks. A full
 * track drops further spans and counts them. Spans nest on a thread: end
 * closes the innermost open span. A span's duration includes its children.
 *
 * Clock: sr_clock_ns, plus a test-only skew read once from the environment
 * variable SR_TRACE_TEST_SKEW_NS (nanoseconds, may be negative) so a test can
 * show that the merged trace undoes a rank's clock offset (sr_trace_now).
 *
 * Collectives: the comm layer records a busy span on its worker's track and
 * an exposed span (SR_SPAN_COMM_WAIT: the caller blocked in a collective or a
 * wait) on the caller's, both with struct sr_trace_args. A collective is
 * labelled with the innermost span open on the issuing thread
 * (sr_trace_current), so the worker's span can say which stage it serves.
 *
 * Threads: any number may begin and end spans concurrently; sr_trace_init,
 * sr_trace_free and reading tracks (sr_trace_track_*) happen while no other
 * thread records (before training, or after recording is off and the
 * collectives of the last recorded step have completed).
 */
#ifndef SHARDREC_TRACE_H
#define SHARDREC_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* The stages of DESIGN.md's step (and two parents the trainer opens). */
enum sr_span {
    SR_SPAN_STEP = 0,          /* "step": one whole training step */
    SR_SPAN_LOAD,              /* "load": the batch from the reader or generator */
    SR_SPAN_COPY,              /* "copy": host to device */
    SR_SPAN_EMB_FORWARD,       /* "embedding.forward": the sparse forward (parent) */
    SR_SPAN_INPUT_DIST_COUNTS, /* "input_dist.counts" */
    SR_SPAN_INPUT_DIST_DATA,   /* "input_dist.data" */
    SR_SPAN_LOOKUP,            /* "lookup" */
    SR_SPAN_OUTPUT_DIST,       /* "output_dist" */
    SR_SPAN_BOTTOM_MLP,        /* "bottom_mlp" */
    SR_SPAN_INTERACTION,       /* "interaction" */
    SR_SPAN_TOP_MLP,           /* "top_mlp" */
    SR_SPAN_BACKWARD,          /* "backward": the dense backward */
    SR_SPAN_EMB_BACKWARD,      /* "embedding.backward": gradient dist + sparse update (parent) */
    SR_SPAN_EMB_GRAD_DIST,     /* "emb_grad_dist" */
    SR_SPAN_ALLREDUCE_BUCKET,  /* "allreduce.bucket.K" (index K) */
    SR_SPAN_OPTIMIZER,         /* "optimizer" */
    SR_SPAN_COMM_WAIT,         /* "comm.wait": exposed communication (caller's track) */
    SR_SPAN_COMM,              /* a collective running (worker's track; named by its label) */
    SR_SPAN_DATA_WAIT,         /* "data.wait": the compute thread waiting for the loader thread */
    SR_SPAN_COUNT
};

/* A collective's arguments, as the trace shows them. */
struct sr_trace_args {
    int label;            /* enum sr_span of the stage that issued it, or -1 */
    int index;            /* that stage's K (allreduce.bucket.K), or -1 */
    const char *coll;     /* "all_to_allv", ... (static storage) */
    char comm[16];        /* communicator name */
    int peers;            /* other ranks this rank sends to */
    int peers_inter;      /* of which on other nodes */
    uint64_t bytes;       /* payload this rank sends (comm.h's counting rules) */
    uint64_t bytes_inter; /* of which to other nodes */
};

/* One recorded span. */
struct sr_trace_span {
    int64_t t0, t1;            /* sr_trace_now, ns */
    int64_t step;              /* sr_trace_step of its thread when it began */
    int16_t span;              /* enum sr_span */
    int16_t has_args;          /* args is meaningful */
    int32_t index;             /* K, or -1 */
    struct sr_trace_args args; /* collectives */
};

/* "load", "input_dist.counts", ... ("?" out of range). */
const char *sr_span_name(enum sr_span s);

/* Reserve `max_tracks` tracks of `spans_per_track` spans each (memory is
 * touched only as spans are recorded) and read SR_TRACE_TEST_SKEW_NS.
 * Recording stays off. Call once, before the threads that record start
 * recording; sr_trace_free releases it (a no-op if never initialised). */
void sr_trace_init(int max_tracks, size_t spans_per_track);
void sr_trace_free(void);

/* Turn recording on or off (process-wide, one atomic store). Stage timing
 * (the accumulators) runs whether or not recording is on. */
void sr_trace_set_recording(int on);
/* Record only spans whose step (sr_trace_step of their thread) lies in
 * [first, last]; last 0 (the default): every step. Set before recording. */
void sr_trace_set_window(int64_t first, int64_t last);
/* Whether a span begun now on the calling thread is recorded: recording is
 * on and the thread's step is in the window. */
int sr_trace_recording(void);
/* The step stored with spans begun from now on (process-wide). */
void sr_trace_set_step(int64_t step);
/* The calling thread's override of it (0: none): a pipeline's spans of batch
 * i+1 carry step i+1 while the process is in step i. */
void sr_trace_set_thread_step(int64_t step);

/* The trace clock: sr_clock_ns plus the test skew, ns. */
int64_t sr_trace_now(void);
/* The test skew in effect (0 unless SR_TRACE_TEST_SKEW_NS was set at init). */
int64_t sr_trace_skew_ns(void);

/* Name the calling thread's track ("compute", "comm sparse", ...; 31 bytes
 * kept). Without a name a track is "thread N". */
void sr_trace_thread_name(const char *name);

/* A marker: called on the thread that set it at the begin (end 0) and the
 * end (end 1) of each of its spans that is recorded, with the span's stage,
 * index and step; begins and ends pair up and nest as the spans do. The
 * train layer's device spans (train/device_spans.h) record an event on the
 * stage's stream here, so the trace can show when the device ran a stage,
 * not only when the host issued it. Called outside the span's host time. */
typedef void (*sr_trace_marker)(void *ctx, enum sr_span s, int index, int64_t step, int end);
/* Set (fn NULL: clear) the calling thread's marker. */
void sr_trace_set_marker(sr_trace_marker fn, void *ctx);

/* Open span `s` on the calling thread (index: K, or -1). At most 16 open
 * spans nest; deeper ones are timed by their parent only. */
void sr_trace_begin(enum sr_span s, int index);
/* Close the innermost open span: add its duration to the thread's
 * accumulator, record it if recording was on at its begin. Returns its
 * duration in ns (0 with no open span). */
int64_t sr_trace_end(void);
/* The same, recording `args` with it. */
int64_t sr_trace_end_args(const struct sr_trace_args *args);
/* The innermost open span on the calling thread and its index (-1, -1 if none). */
void sr_trace_current(int *span, int *index);
/* Record a finished span on the calling thread's track (no nesting, no
 * accumulator): the comm worker's busy spans, for collectives submitted while
 * recording was on (the caller checks sr_trace_recording at submission). */
void sr_trace_record(enum sr_span s, int64_t t0, int64_t t1, int64_t step,
                     const struct sr_trace_args *args);
/* A fresh track named `name` that no thread records on by itself: its index
 * for sr_trace_record_on, or -1 when every track is taken. */
int sr_trace_track_claim(const char *name);
/* Record a finished span (no args) on track `track` (from sr_trace_track_claim);
 * one thread at a time writes a given track. A track index of -1 drops it
 * (counted by sr_trace_dropped). */
void sr_trace_record_on(int track, enum sr_span s, int index, int64_t t0, int64_t t1,
                        int64_t step);
/* The calling thread's step: its override, else what sr_trace_set_step set last. */
int64_t sr_trace_step(void);

/* The calling thread's per-stage time since the last take, ns: copied into
 * ns[SR_SPAN_COUNT] and reset. */
void sr_trace_take_stage_ns(int64_t ns[SR_SPAN_COUNT]);

/* The cost of one recorded span (a begin/end pair with recording on), ns,
 * the mean over `n` pairs run now on the calling thread into a scratch track
 * (allocates; call outside the training loop). Leaves the thread's
 * accumulators and tracks as they were. */
double sr_trace_span_cost_ns(int n);

/* ---- reading the tracks (no thread recording meanwhile) ------------------------ */

int sr_trace_num_tracks(void);
const char *sr_trace_track_name(int k);
/* Track k's spans, in the order they ended; *n their number. */
const struct sr_trace_span *sr_trace_track_spans(int k, size_t *n);
/* Spans dropped because a track was full or every track was taken. */
uint64_t sr_trace_dropped(void);

#endif
