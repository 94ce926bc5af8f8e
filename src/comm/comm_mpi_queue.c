/*
 * The MPI backend's queue and worker thread (one of each per communicator).
 *
 * Every collective, blocking or not, is queued as a work item; the worker
 * takes items in submission order, waits for the call's stream to reach the
 * call (below), starts the MPI non-blocking collective and completes it by
 * MPI_Test: back to back for the first 50 us (small collectives end there),
 * then sleeping between polls (1 us doubling up to 100 us), so a long
 * collective progresses while the caller computes without busy-polling a
 * core away from it. The caller of a blocking call, or of sr_comm_wait,
 * sleeps on a condition variable meanwhile. (On the 2-core test machine, 2
 * ranks, a 32 MB all_reduce completed by MPI_Wait's spinning was slower than
 * by this polling, over shared memory and more so over TCP; a 64-byte
 * all_reduce took about 12 us over shared memory, 28 us over TCP.) Open MPI
 * progresses non-blocking collectives only inside MPI calls (no asynchronous
 * progress thread); this worker is that thread. Since the worker is the only
 * thread that calls MPI on its communicator, the MPI rule that collectives
 * on one communicator are not issued concurrently holds, and ranks issue
 * them in the same order as long as callers do (comm.h).
 *
 *   caller thread                      worker thread
 *   get_item (free list) -> fill
 *   stage send regions, record `ready`
 *     on the call's stream
 *   enqueue ---- cond `wake` ---------> pop head; wait for `ready` (the
 *                                       stream's work before the call);
 *                                       start MPI_I*, poll
 *   wait: sleep on cond `done` <------- done = 1, busy[kind] += seconds
 *   release item to the free list;
 *   staged results back on a stream
 *
 * Stream order (comm_internal.h's contract) without blocking the caller:
 * on a bound device that does not finish its ops at the call (the deferred
 * CPU device, a GPU), the call records the item's own event (made with the
 * item, so the steady state allocates nothing) on its stream after any
 * staging copies, and the worker synchronises that event before it starts
 * the collective. The worker's waits are not the compute thread's: it
 * leaves them out of sr_dev_sync_count. sr_comm_stream_wait puts a host
 * function on the waiting stream that blocks until the collective is done
 * (the stream waits; the host does not), then issues the staged receive
 * copies on that stream. On the deferred CPU device host functions run
 * without the device's lock (cpu_deferred.c), so a worker that meets such
 * a host function while it runs a stream up to its own event, or a thread
 * that runs the function while a worker needs the device, cannot stall the
 * collective the function waits for. CUDA may run host functions of
 * independent streams one at a time: a stream wait's host function that
 * blocks there while another stream's earlier host function (a stream wait
 * issued before this collective) still stands before this collective's
 * event could stall both. The trainer waits on one stream today; before
 * MPI stream waits span streams on a GPU, a device wait on a host flag
 * (cuStreamWaitValue32) should replace the blocking host function.
 *
 * Emulated link (comm_link.c; tests and benchmarks): when the worker starts a
 * collective whose call recorded shaped messages, it queues them on the
 * link's FIFOs (sr_link_reserve) and, once MPI has completed it, sleeps until
 * the last emulated arrival before marking it done, so busy time includes it.
 *
 * Work items are recycled through a free list, so the steady state allocates
 * nothing; a communicator starts with SR_MPI_ITEMS of them, since on a device
 * that runs ops later a stream-waited item is released only when its stream
 * runs the host function, so more are in flight in a later step than in the
 * first. Each holds (4W) int counts for all_to_allv, copied at submission.
 */
#ifdef SR_USE_MPI

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/device.h"
#include "shardrec/trace.h"
#include "comm/comm_mpi_internal.h"

#define SPIN_NS     50000L  /* poll without sleeping this long after a collective starts */
#define POLL_MAX_NS 100000L /* then sleep at most this long between two polls */

/* Set on a worker thread: a stream's host function it runs waits unexposed. */
static _Thread_local int on_worker;

/* ---- the queue ------------------------------------------------------------------ */

static struct sr_comm_work *new_item(struct mpi_state *s)
{
    struct sr_comm_work *w = sr_calloc(1, sizeof *w);
    w->ints = sr_calloc(4 * (size_t)s->size, sizeof(int));
    w->owner = s;
    if (s->c->link) /* sized once: the loop copies into it without allocating */
        sr_link_msgs_init(&w->link, sr_link_nodes(s->c->link));
    return w;
}

void sr_mpi_items_reserve(struct mpi_state *s, int n)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < n; i++) {
        struct sr_comm_work *w = new_item(s);
        w->next = s->free_list;
        s->free_list = w;
    }
    pthread_mutex_unlock(&s->mu);
}

struct sr_comm_work *sr_mpi_get_item(struct mpi_state *s)
{
    pthread_mutex_lock(&s->mu);
    struct sr_comm_work *w = s->free_list;
    if (w)
        s->free_list = w->next;
    else
        w = new_item(s);
    s->outstanding++;
    pthread_mutex_unlock(&s->mu);
    w->next = NULL;
    w->in_use = 1;
    w->done = 0;
    w->limit = 0;
    w->bytes = 0;
    w->await_ready = 0;
    w->stage = NULL;
    return w;
}

/* Called with s->mu held. */
static void release_locked(struct mpi_state *s, struct sr_comm_work *w)
{
    w->in_use = 0;
    w->next = s->free_list;
    s->free_list = w;
    s->outstanding--;
}

/* Block until w is done, release it; its kind. */
static int wait_item(struct mpi_state *s, struct sr_comm_work *w)
{
    SR_ASSERT(w->owner == s && w->in_use);
    pthread_mutex_lock(&s->mu);
    while (!w->done)
        pthread_cond_wait(&s->done, &s->mu);
    int kind = w->kind;
    release_locked(s, w);
    pthread_mutex_unlock(&s->mu);
    return kind;
}

void sr_mpi_items_free(struct mpi_state *s)
{
    while (s->free_list) {
        struct sr_comm_work *w = s->free_list;
        s->free_list = w->next;
        if (w->ready_dev)
            sr_dev_event_destroy(w->ready_dev, w->ready);
        sr_free(w->ints);
        sr_link_msgs_free(&w->link);
        sr_free(w);
    }
}

/* ---- stream order ------------------------------------------------------------------ */

static struct sr_stage_call *stage_of(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream)
{
    if (!w->stage)
        w->stage = sr_stage_begin(c, stream);
    return w->stage;
}

const void *sr_mpi_stage_in(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream,
                            const void *buf, const size_t *counts, const size_t *displs, int n,
                            size_t es)
{
    if (!sr_stage_on(c))
        return buf;
    return sr_stage_in(c, stage_of(c, w, stream), buf, counts, displs, n, es);
}

void *sr_mpi_stage_out(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream, void *buf,
                       const size_t *counts, const size_t *displs, int n, size_t es)
{
    if (!sr_stage_on(c))
        return buf;
    return sr_stage_out(c, stage_of(c, w, stream), buf, counts, displs, n, es);
}

void sr_mpi_stream_order(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream)
{
    struct sr_device *dev = c->dev;
    if (!dev || dev->host_immediate) /* no stream, or every op done at its call */
        return;
    if (w->ready_dev != dev) {
        if (w->ready_dev)
            sr_dev_event_destroy(w->ready_dev, w->ready);
        w->ready = sr_dev_event_create(dev);
        w->ready_dev = dev;
    }
    sr_dev_event_record(dev, w->ready, stream);
    w->await_ready = 1;
}

/* The staged receive regions of a completed call back on `stream`. */
static void stage_end(sr_comm_t c, struct sr_stage_call *k, int own_stream, sr_stream_t stream)
{
    if (k)
        sr_stage_end(c, k, own_stream ? sr_stage_stream(k) : stream);
}

/* ---- submission and waits ------------------------------------------------------------ */

void sr_mpi_submit(struct mpi_state *s, struct sr_comm_work *w, sr_comm_work_t *work)
{
    w->traced = s->c->call_traced && w->kind < SR_COLL_COUNT;
    if (w->traced) {
        w->trace = s->c->call;
        w->trace_step = sr_trace_step();
    }
    w->shaped = s->c->link_call && w->kind < SR_COLL_COUNT && sr_link_msgs_any(&s->c->link_msgs);
    if (w->shaped)
        sr_link_msgs_copy(&w->link, &s->c->link_msgs);
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = w;
    else
        s->head = w;
    s->tail = w;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (work) {
        *work = w;
        return;
    }
    struct sr_stage_call *k = w->stage;
    wait_item(s, w);
    stage_end(s->c, k, 1, NULL);
}

int sr_mpi_wait(sr_comm_t c, sr_comm_work_t w)
{
    struct sr_stage_call *k = w->stage;
    int kind = wait_item(c->state, w);
    stage_end(c, k, 1, NULL);
    return kind;
}

int sr_mpi_test(sr_comm_t c, sr_comm_work_t w)
{
    struct mpi_state *s = c->state;
    SR_ASSERT(w->owner == s && w->in_use);
    struct sr_stage_call *k = w->stage;
    pthread_mutex_lock(&s->mu);
    int kind = w->done ? w->kind : -1;
    if (w->done)
        release_locked(s, w);
    pthread_mutex_unlock(&s->mu);
    if (kind >= 0)
        stage_end(c, k, 1, NULL);
    return kind;
}

static int host_wait(sr_comm_t c, sr_comm_work_t w)
{
    return wait_item(c->state, w);
}

/* The host function a stream runs to wait for a collective (its argument is
 * the work item). It may run on any thread, so it leaves staging alone:
 * sr_mpi_stream_wait issued the copies back already. On a comm worker (the
 * deferred CPU device runs host functions on whichever thread runs the
 * stream) nobody's compute is waiting: not exposed time. */
static void stream_wait_fn(void *arg)
{
    struct sr_comm_work *w = arg;
    struct mpi_state *s = w->owner;
    if (on_worker)
        wait_item(s, w);
    else
        sr_comm_wait_exposed(s->c, host_wait, w);
}

/* On CUDA the caller waits on the host instead of a host function on the
 * stream: CUDA may run the host functions of all streams one at a time, so
 * one blocked on a collective would hold up another stream's (the sparse and
 * dense communicators' waits, whose collectives may wait on those streams),
 * and the step could deadlock. The NCCL backend, which waits on the device,
 * needs none of this. */
static int host_waits_instead(sr_comm_t c)
{
    return c->dev && c->dev->kind == SR_DEVICE_CUDA;
}

void sr_mpi_stream_wait(sr_comm_t c, sr_comm_work_t w, sr_stream_t stream)
{
    SR_ASSERT(w->owner == c->state && w->in_use);
    struct sr_stage_call *k = w->stage; /* the function may release w at once */
    w->stage = NULL;
    if (host_waits_instead(c))
        sr_comm_wait_exposed(c, host_wait, w);
    else
        sr_dev_launch_host_fn(c->dev, stream, stream_wait_fn, w);
    stage_end(c, k, 0, stream); /* staged results back, after it */
}

/* ---- the worker ----------------------------------------------------------------- */

static double now_s(void)
{
    return sr_clock_seconds();
}

/* Test back to back for SPIN_NS (small collectives finish here), then sleep
 * between tests, 1 us doubling up to POLL_MAX_NS, until w's deadline. */
static void complete(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    double t0 = now_s(), spin_end = t0 + 1e-9 * SPIN_NS;
    double end = w->limit > 0 ? t0 + w->limit : INFINITY;
    long ns = 1000;
    for (;;) {
        int flag = 0;
        SR_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        if (flag)
            return;
        double t = now_s();
        if (t < spin_end)
            continue;
        if (t > end)
            sr_mpi_timed_out(s, w, t - t0);
        sr_mpi_sleep_ns(ns);
        if (ns < POLL_MAX_NS)
            ns *= 2;
    }
}

static void run(struct mpi_state *s, struct sr_comm_work *w)
{
    MPI_Request req = MPI_REQUEST_NULL;
    w->start(s, w, &req);
    if (req != MPI_REQUEST_NULL)
        complete(s, w, &req);
}

/* The busy span of w on this worker's track ("comm NAME"). */
static void trace_busy(struct mpi_state *s, struct sr_comm_work *w, int64_t t0)
{
    if (!s->trace_named) {
        char name[32];
        snprintf(name, sizeof name, "comm %s", s->c->name);
        sr_trace_thread_name(name);
        s->trace_named = 1;
    }
    sr_trace_record(SR_SPAN_COMM, t0, sr_trace_now(), w->trace_step, &w->trace);
}

/* Run w: start it, complete it, and (emulated link) hold it until its last
 * arrival; its busy seconds. */
static double execute(struct mpi_state *s, struct sr_comm_work *w)
{
    double t0 = now_s();
    int64_t trace_t0 = w->traced ? sr_trace_now() : 0;
    double arrival = w->shaped ? sr_link_reserve(s->c->link, &w->link, t0) : 0;
    run(s, w);
    if (arrival > 0) /* done no earlier than the emulated link delivers it */
        sr_link_sleep_until(arrival);
    double dt = now_s() - t0;
    if (w->traced)
        trace_busy(s, w, trace_t0);
    return dt;
}

void *sr_mpi_worker_main(void *arg)
{
    struct mpi_state *s = arg;
    prctl(PR_SET_TIMERSLACK, 1000UL); /* polls sleep microseconds; default slack is 50 us */
    on_worker = 1;
    sr_dev_count_host_waits(0); /* its waits block no compute thread */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->wake, &s->mu);
        struct sr_comm_work *w = s->head;
        if (!w)
            break;
        s->head = w->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        if (w->await_ready) /* the send buffer's producers and staging copies; not yet
                               started (a probe hears "computing") */
            sr_dev_event_sync(w->ready_dev, w->ready);
        w->await_ready = 0;
        pthread_mutex_lock(&s->mu);
        w->seq = ++s->started;
        s->cur_kind = w->kind;
        pthread_mutex_unlock(&s->mu);
        double dt = execute(s, w);
        pthread_mutex_lock(&s->mu);
        s->cur_kind = -1;
        if (w->kind < SR_COLL_COUNT)
            s->busy[w->kind] += dt;
        w->done = 1;
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

#endif /* SR_USE_MPI */
