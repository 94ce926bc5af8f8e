/*
 * The single-rank backend: a world of one. Every collective is a copy of
 * the caller's own data (the sum over one rank is the value itself); in
 * place it is nothing. A derived communicator (dup, node, cross) is another
 * world of one with its own counters.
 *
 * Streams (comm_internal.h's contract). Without a bound device the copy runs
 * at the call. Bound, it is a copy on the call's stream (sr_dev_copy), so it
 * reads send after the stream's earlier work and the caller never waits for
 * the stream at the call; then
 *   - recv is memory of the device the host cannot address: done, in stream
 *     order (handle NULL);
 *   - a blocking call: the host waits for the stream here, since the caller
 *     asked for the result in recv;
 *   - a non-blocking call on a device that runs ops later (the deferred CPU
 *     device, CUDA): a handle holding an event recorded after the copy; wait
 *     synchronises the event, test queries it, stream_wait makes the waiting
 *     stream wait for it;
 *   - on the immediate CPU device the copy is done when it returns (NULL).
 * Handles come from a pool of SINGLE_WORKS per communicator, made at its
 * first non-blocking call, so a training loop allocates nothing.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "comm/comm_internal.h"

#define SINGLE_WORKS 64 /* non-blocking calls in flight per communicator */

struct single_work {
    sr_event_t done;        /* recorded after the call's copy */
    struct sr_device *dev;  /* whose event it is */
    enum sr_coll kind;
    int busy;
};

struct single_state {
    struct single_work works[SINGLE_WORKS];
};

static struct single_work *take_work(sr_comm_t c, enum sr_coll kind)
{
    struct single_state *st = c->state;
    if (!st)
        st = c->state = sr_calloc(1, sizeof *st);
    for (int i = 0; i < SINGLE_WORKS; i++) {
        struct single_work *w = &st->works[i];
        if (w->busy)
            continue;
        if (w->dev != c->dev) {
            if (w->dev)
                sr_dev_event_destroy(w->dev, w->done);
            w->dev = c->dev;
            w->done = sr_dev_event_create(c->dev);
        }
        w->kind = kind;
        w->busy = 1;
        return w;
    }
    SR_ABORT("communicator '%s': more than %d non-blocking calls in flight", c->name,
             SINGLE_WORKS);
}

/* recv = send (bytes), with the stream contract above. */
static void copy(sr_comm_t c, enum sr_coll kind, const void *send, void *recv, size_t bytes,
                 sr_stream_t stream, sr_comm_work_t *work)
{
    if (work)
        *work = NULL;
    if (send == recv || !bytes)
        return;
    if (!c->dev) {
        memmove(recv, send, bytes);
        return;
    }
    sr_dev_copy(c->dev, recv, send, bytes, stream);
    if (c->dev->host_immediate || sr_dev_hidden(c->dev, recv, NULL, NULL))
        return;
    if (!work) {
        sr_dev_sync(c->dev, stream);
        return;
    }
    struct single_work *w = take_work(c, kind);
    sr_dev_event_record(c->dev, w->done, stream);
    *work = (sr_comm_work_t)(void *)w;
}

static void single_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                              enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                              sr_comm_work_t *work)
{
    copy(c, SR_COLL_ALL_REDUCE, send, recv, count * sr_dtype_size(dtype), stream, work);
}

static void single_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                               const size_t *send_displs, void *recv, const size_t *recv_counts,
                               const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                               sr_comm_work_t *work)
{
    size_t es = sr_dtype_size(dtype);
    size_t n = send_counts[0] < recv_counts[0] ? send_counts[0] : recv_counts[0];
    copy(c, SR_COLL_ALL_TO_ALLV, (const char *)send + send_displs[0] * es,
         (char *)recv + recv_displs[0] * es, n * es, stream, work);
}

static void single_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                                  enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                                  sr_comm_work_t *work)
{
    copy(c, SR_COLL_REDUCE_SCATTER, send, recv, recv_count * sr_dtype_size(dtype), stream, work);
}

static void single_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                              enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work)
{
    copy(c, SR_COLL_ALL_GATHER, send, recv, send_count * sr_dtype_size(dtype), stream, work);
}

static void single_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                             enum sr_dtype dtype, int root, sr_stream_t stream,
                             sr_comm_work_t *work)
{
    copy(c, SR_COLL_BROADCAST, send, recv, count * sr_dtype_size(dtype), stream, work);
}

static void single_barrier(sr_comm_t c)
{
}

static int single_wait(sr_comm_t c, sr_comm_work_t work)
{
    struct single_work *w = (struct single_work *)(void *)work;
    sr_dev_event_sync(w->dev, w->done);
    w->busy = 0;
    return (int)w->kind;
}

static int single_test(sr_comm_t c, sr_comm_work_t work)
{
    struct single_work *w = (struct single_work *)(void *)work;
    if (!sr_dev_event_query(w->dev, w->done))
        return -1;
    w->busy = 0;
    return (int)w->kind;
}

static void single_stream_wait(sr_comm_t c, sr_comm_work_t work, sr_stream_t stream)
{
    struct single_work *w = (struct single_work *)(void *)work;
    sr_dev_stream_wait_event(w->dev, stream, w->done);
    w->busy = 0; /* a later record on it comes after this wait in issue order */
}

static const struct sr_comm_backend single_backend;

static void single_split(sr_comm_t c, sr_comm_t sub, int color, int key)
{
    sub->backend = &single_backend;
}

static void single_free(sr_comm_t c)
{
    struct single_state *st = c->state;
    if (!st)
        return;
    for (int i = 0; i < SINGLE_WORKS; i++) {
        struct single_work *w = &st->works[i];
        if (w->busy)
            SR_ABORT("sr_comm_free: a non-blocking call on communicator '%s' was never waited",
                     c->name);
        if (w->dev)
            sr_dev_event_destroy(w->dev, w->done);
    }
    sr_free(st);
    c->state = NULL;
}

static const struct sr_comm_backend single_backend = {
    .name = "single",
    .all_reduce = single_all_reduce,
    .all_to_allv = single_all_to_allv,
    .reduce_scatter = single_reduce_scatter,
    .all_gather = single_all_gather,
    .broadcast = single_broadcast,
    .barrier = single_barrier,
    .wait = single_wait,
    .test = single_test,
    .stream_wait = single_stream_wait,
    .split = single_split,
    .free = single_free,
};

sr_comm_t sr_comm_init_single(void)
{
    sr_comm_t c = sr_comm_alloc(1);
    c->backend = &single_backend;
    sr_comm_set_locality(c);
    return c;
}
