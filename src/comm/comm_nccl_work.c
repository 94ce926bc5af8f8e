/*
 * The NCCL backend's work items and deadline (comm_nccl_internal.h).
 *
 * Each collective is enqueued on the caller's stream between two events of
 * its item: `begin` (the device has reached it) and `end` (its result is in
 * recv). Nothing here blocks the caller except wait: stream_wait makes the
 * waiting stream wait for `end`, test queries it. An item returns to the
 * free list once its handle is released and `end` has completed, when its
 * device time (begin to end, the device's clock) is added to busy.
 *
 * The watchdog, one thread per process polling every WATCH_NS, finishes
 * items, tells each communicator's companion how far the device has got (what
 * other ranks' probes read), records the device span (begin to end, on the
 * trace clock through an anchor event it re-takes every second) of each
 * collective issued while tracing, on its own track ("device nccl"), and
 * keeps the deadline: a collective whose
 * `begin` completed more than its limit ago without its `end` is late. The
 * watchdog then probes the members through the companion and prints the
 * message every backend prints (comm.h), aborts every NCCL communicator of
 * the process (ncclCommAbort: its kernels stop) and ends the job
 * (MPI_Abort: the launcher ends every rank, stopped ones included).
 */
#ifdef SR_USE_NCCL

#include <stdatomic.h>
#include <time.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/device.h"
#include "shardrec/log.h"
#include "comm/comm_nccl_internal.h"

#define WATCH_NS    10000000L   /* the watchdog's poll period */
#define REANCHOR_NS 1000000000L /* how often the trace clock's anchor is re-taken */
/* Items made with the communicator: a pipelined step's collectives in flight
 * at once, and more. */
#define ITEMS_AT_START 16

/* ---- items ---------------------------------------------------------------------- */

static void reap_locked(struct nccl_state *s, double now);

/* A new item, its events made. */
static struct sr_comm_work *new_item(struct nccl_state *s)
{
    struct sr_comm_work *w = sr_calloc(1, sizeof *w);
    w->owner = s;
    w->begin = sr_dev_event_create(s->dev);
    w->end = sr_dev_event_create(s->dev);
    return w;
}

/* A free item: from the free list, else from the items the device has
 * finished since the watchdog last looked (so the list stays as long as what
 * is truly in flight and steps after the first allocate nothing), else new. */
static struct sr_comm_work *get_item(struct nccl_state *s)
{
    pthread_mutex_lock(&s->mu);
    if (!s->free_list)
        reap_locked(s, sr_clock_seconds());
    struct sr_comm_work *w = s->free_list;
    if (w)
        s->free_list = w->next;
    pthread_mutex_unlock(&s->mu);
    if (!w)
        w = new_item(s);
    w->next = NULL;
    w->host = NULL;
    w->started_at = 0;
    w->released = w->finished = w->traced = 0;
    return w;
}

/* Under s->mu: finish the items whose `end` completed (busy time), note
 * those the device has begun, and free those finished and released. */
static void reap_locked(struct nccl_state *s, double now)
{
    for (struct sr_comm_work **at = &s->flight; *at;) {
        struct sr_comm_work *w = *at;
        if (!w->started_at && sr_dev_event_query(s->dev, w->begin)) {
            w->started_at = now;
            if (w->seq > s->started)
                s->started = w->seq;
        }
        if (!w->finished && w->started_at && sr_dev_event_query(s->dev, w->end)) {
            s->busy[w->kind] += 1e-3 * sr_dev_event_elapsed_ms(s->dev, w->begin, w->end);
            w->finished = 1;
        }
        if (w->finished && w->released && !w->traced) {
            *at = w->next;
            w->next = s->free_list;
            s->free_list = w;
        } else {
            at = &w->next;
        }
    }
}

struct sr_comm_work *sr_nccl_begin(struct nccl_state *s, int kind, double bytes,
                                   sr_stream_t stream)
{
    struct sr_comm_work *w = get_item(s);
    w->kind = kind;
    w->bytes = bytes;
    w->limit = sr_comm_deadline(s->c, bytes);
    w->seq = ++s->issued;
    w->traced = s->c->call_traced;
    if (w->traced) {
        w->trace = s->c->call;
        w->trace_step = sr_trace_step();
    }
    sr_dev_event_record(s->dev, w->begin, stream);
    return w;
}

void sr_nccl_end(struct nccl_state *s, struct sr_comm_work *w, sr_stream_t stream,
                 sr_comm_work_t *work)
{
    sr_dev_event_record(s->dev, w->end, stream);
    w->released = work == NULL;
    pthread_mutex_lock(&s->mu);
    w->next = s->flight;
    s->flight = w;
    pthread_mutex_unlock(&s->mu);
    if (work)
        *work = w;
}

sr_comm_work_t sr_nccl_wrap_host(struct nccl_state *s, int kind, sr_comm_work_t host)
{
    if (!host)
        return NULL;
    struct sr_comm_work *w = get_item(s);
    w->kind = kind;
    w->host = host;
    w->finished = 1;
    return w;
}

/* The caller is done with w. */
static void release(struct nccl_state *s, struct sr_comm_work *w)
{
    pthread_mutex_lock(&s->mu);
    w->released = 1;
    if (w->host) { /* never in flight */
        w->next = s->free_list;
        s->free_list = w;
    } else {
        reap_locked(s, sr_clock_seconds());
    }
    pthread_mutex_unlock(&s->mu);
}

int sr_nccl_wait(sr_comm_t c, sr_comm_work_t w)
{
    struct nccl_state *s = c->state;
    SR_ASSERT(w->owner == s && !w->released);
    int kind = w->kind;
    if (w->host)
        s->host->backend->wait(s->host, w->host);
    else
        sr_dev_event_sync(s->dev, w->end);
    release(s, w);
    return kind;
}

int sr_nccl_test(sr_comm_t c, sr_comm_work_t w)
{
    struct nccl_state *s = c->state;
    SR_ASSERT(w->owner == s && !w->released);
    int done = w->host ? s->host->backend->test(s->host, w->host) >= 0
                       : sr_dev_event_query(s->dev, w->end);
    if (!done)
        return -1;
    int kind = w->kind;
    release(s, w);
    return kind;
}

void sr_nccl_stream_wait(sr_comm_t c, sr_comm_work_t w, sr_stream_t stream)
{
    struct nccl_state *s = c->state;
    SR_ASSERT(w->owner == s && !w->released);
    if (w->host)
        s->host->backend->stream_wait(s->host, w->host, stream);
    else
        sr_dev_stream_wait_event(s->dev, stream, w->end);
    release(s, w);
}

void sr_nccl_busy(sr_comm_t c, double seconds[SR_COLL_COUNT])
{
    struct nccl_state *s = c->state;
    double host[SR_COLL_COUNT] = {0};
    if (s->host->backend->busy)
        s->host->backend->busy(s->host, host);
    pthread_mutex_lock(&s->mu);
    reap_locked(s, sr_clock_seconds());
    for (int k = 0; k < SR_COLL_COUNT; k++)
        seconds[k] = s->busy[k] + host[k];
    pthread_mutex_unlock(&s->mu);
}

/* ---- the watchdog ----------------------------------------------------------------- */

static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nccl_state *watched;
static pthread_t watchdog;
static int watchdog_running;

/* Under s->mu: the earliest begun, unfinished item (the one the device is
 * in), or NULL. */
static struct sr_comm_work *running_locked(struct nccl_state *s)
{
    struct sr_comm_work *first = NULL;
    for (struct sr_comm_work *w = s->flight; w; w = w->next)
        if (w->started_at && !w->finished && (!first || w->seq < first->seq))
            first = w;
    return first;
}

static pthread_mutex_t abort_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t abort_cv = PTHREAD_COND_INITIALIZER;
static int aborts_done;

/* Every communicator's NCCL aborted (its kernels stop). ncclCommAbort may
 * block on a thread of this process that is inside NCCL waiting for the
 * missing peer, so it runs on a thread of its own. */
static void *abort_all(void *arg)
{
    for (struct nccl_state *s = watched; s; s = s->next_live)
        if (!s->aborted) {
            s->aborted = 1;
            ncclCommAbort(s->comm);
        }
    pthread_mutex_lock(&abort_mu);
    aborts_done = 1;
    pthread_cond_broadcast(&abort_cv);
    pthread_mutex_unlock(&abort_mu);
    return arg;
}

/* Abort NCCL (waiting at most ABORT_WAIT_S for it), then end the job. */
#define ABORT_WAIT_S 2
_Noreturn static void end_job(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, abort_all, NULL) == 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ABORT_WAIT_S;
        pthread_mutex_lock(&abort_mu);
        while (!aborts_done &&
               pthread_cond_timedwait(&abort_cv, &abort_mu, &until) == 0)
            ;
        pthread_mutex_unlock(&abort_mu);
    }
    sr_mpi_abort_job();
}

/* The trace clock of device events: `event`, recorded on the watchdog's own
 * idle stream and waited for, happened at `ns` (within the wait's length). */
struct anchor {
    sr_stream_t stream;
    sr_event_t event;
    int64_t ns;
};

static void take_anchor(struct sr_device *dev, struct anchor *a)
{
    int64_t t0 = sr_trace_now();
    sr_dev_event_record(dev, a->event, a->stream);
    sr_dev_event_sync(dev, a->event);
    a->ns = t0 + (sr_trace_now() - t0) / 2;
}

static int64_t device_ns(struct sr_device *dev, const struct anchor *a, sr_event_t e)
{
    return a->ns + (int64_t)(1e6 * (double)sr_dev_event_elapsed_ms(dev, a->event, e));
}

/* Under s->mu: the device spans of s's finished traced items, on the calling
 * (watchdog) thread's track; they may then be freed. */
static void record_spans_locked(struct nccl_state *s, const struct anchor *a)
{
    for (struct sr_comm_work *w = s->flight; w; w = w->next)
        if (w->traced && w->finished) {
            sr_trace_record(SR_SPAN_COMM, device_ns(s->dev, a, w->begin),
                            device_ns(s->dev, a, w->end), w->trace_step, &w->trace);
            w->traced = 0;
        }
}

/* One poll of s: 1 and the late item's facts when its deadline passed. */
static int poll_one(struct nccl_state *s, double now, const struct anchor *a,
                    struct sr_comm_work *late)
{
    pthread_mutex_lock(&s->mu);
    reap_locked(s, now);
    record_spans_locked(s, a);
    reap_locked(s, now);
    struct sr_comm_work *w = running_locked(s);
    int64_t started = s->started;
    int is_late = w && w->limit > 0 && now - w->started_at > w->limit;
    if (is_late)
        *late = *w;
    pthread_mutex_unlock(&s->mu);
    sr_mpi_device_progress(s->host, started, w ? w->kind : -1);
    return is_late;
}

static void *watchdog_main(void *arg)
{
    struct sr_device *dev = arg;
    sr_dev_make_current(dev);
    sr_dev_count_host_waits(0);
    sr_trace_thread_name("device nccl");
    struct anchor a = {sr_dev_stream_create(dev), sr_dev_event_create(dev), 0};
    take_anchor(dev, &a);
    for (;;) {
        struct timespec ts = {0, WATCH_NS};
        nanosleep(&ts, NULL);
        double now = sr_clock_seconds();
        if (sr_trace_now() - a.ns > REANCHOR_NS)
            take_anchor(dev, &a);
        struct sr_comm_work late;
        struct nccl_state *who = NULL;
        pthread_mutex_lock(&watch_mu);
        if (!watched) {
            watchdog_running = 0;
            pthread_mutex_unlock(&watch_mu);
            sr_dev_event_destroy(dev, a.event);
            sr_dev_stream_destroy(dev, a.stream);
            return NULL;
        }
        for (struct nccl_state *s = watched; s && !who; s = s->next_live)
            if (poll_one(s, now, &a, &late))
                who = s;
        pthread_mutex_unlock(&watch_mu);
        if (who) {
            sr_mpi_device_report(who->host, who->c->name, late.kind, late.seq, late.limit,
                                 late.bytes, now - late.started_at);
            end_job();
        }
    }
}

void sr_nccl_watch(struct nccl_state *s)
{
    for (int i = 0; i < ITEMS_AT_START; i++) {
        struct sr_comm_work *w = new_item(s);
        w->next = s->free_list;
        s->free_list = w;
    }
    pthread_mutex_lock(&watch_mu);
    s->next_live = watched;
    watched = s;
    if (!watchdog_running) {
        if (pthread_create(&watchdog, NULL, watchdog_main, s->dev) != 0)
            SR_ABORT("cannot start the NCCL watchdog thread");
        pthread_setname_np(watchdog, "sr_nccl_watch");
        watchdog_running = 1;
    }
    pthread_mutex_unlock(&watch_mu);
}

void sr_nccl_unwatch(struct nccl_state *s)
{
    pthread_mutex_lock(&watch_mu);
    for (struct nccl_state **at = &watched; *at; at = &(*at)->next_live)
        if (*at == s) {
            *at = s->next_live;
            break;
        }
    int last = watched == NULL && watchdog_running;
    pthread_mutex_unlock(&watch_mu);
    if (last) { /* it sees the empty registry and returns */
        pthread_join(watchdog, NULL);
        watchdog = 0;
    }
    pthread_mutex_lock(&s->mu);
    struct sr_comm_work *lists[2] = {s->flight, s->free_list};
    s->flight = s->free_list = NULL;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < 2; i++)
        for (struct sr_comm_work *w = lists[i], *next; w; w = next) {
            next = w->next;
            if (i == 0 && !w->released)
                SR_ABORT("sr_comm_free: a non-blocking call on communicator '%s' was never "
                         "waited",
                         s->c->name);
            sr_dev_event_sync(s->dev, w->end);
            sr_dev_event_destroy(s->dev, w->begin);
            sr_dev_event_destroy(s->dev, w->end);
            sr_free(w);
        }
}

#endif /* SR_USE_NCCL */
