/*
 * The collective dispatcher: counts and times every call, then hands it to the
 * communicator's backend; derives sub-communicators (dup, node, cross) in a
 * backend-neutral way; checks that every rank holds the same config hash.
 *
 * Bytes are logical payload per destination, self excluded, split by whether
 * the destination is on this rank's node (comm.h states the rules per kind).
 * Exposed time (counters.seconds) is measured here, around blocking calls and
 * waits, as a "comm.wait" span of the caller's stage timer (shardrec/trace.h),
 * so that the trainer's per-step exposed time and the counters are one
 * measurement; busy time (counters.seconds_total) comes from the backend's
 * worker, which records its own span per collective while tracing.
 * All counter updates happen on the thread that drives the communicator.
 *
 * Streams: the dispatcher hands the caller's stream to the backend and never
 * waits for it; each backend keeps the stream contract of comm_internal.h
 * (a host backend with waits on its own worker thread, a stream-native one
 * by enqueueing on the stream).
 *
 *   call_start: c->call = {label: caller's open stage, coll, comm, zero bytes}
 *               [blocking: sr_trace_begin(comm.wait)]
 *   count_to:   c->call.bytes, peers (+ _inter) and the counters; with an
 *               emulated link, the call's shaped messages (count_from: the
 *               incoming ones) in c->link_msgs, which the backend copies
 *   backend:    copies c->call into its work item while recording
 *   call_end:   [blocking: sr_trace_end_args -> counters.seconds]
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/fault.h"
#include "shardrec/trace.h"
#include "comm/comm_internal.h"

static void call_start(sr_comm_t c, enum sr_coll k, sr_comm_work_t *work);
static void call_end(sr_comm_t c, enum sr_coll k, sr_comm_work_t *work);

static void count_to(sr_comm_t c, enum sr_coll k, int peer, uint64_t bytes)
{
    if (peer == c->rank || bytes == 0)
        return;
    c->call.bytes += bytes;
    c->call.peers++;
    if (c->node_of[peer] == c->node) {
        c->counters.bytes_intra[k] += bytes;
    } else {
        c->counters.bytes_inter[k] += bytes;
        c->call.bytes_inter += bytes;
        c->call.peers_inter++;
        if (c->link)
            sr_link_msgs_add(&c->link_msgs, SR_LINK_OUT, c->node_of[peer], bytes);
    }
}

/* What `peer` sends to this rank by the same rules: not counted, but an
 * incoming message of an emulated link when peer is on another node. */
static void count_from(sr_comm_t c, int peer, uint64_t bytes)
{
    if (c->link && peer != c->rank && bytes && c->node_of[peer] != c->node)
        sr_link_msgs_add(&c->link_msgs, SR_LINK_IN, c->node_of[peer], bytes);
}

/* The same payload to and from every other rank. */
static void count_each(sr_comm_t c, enum sr_coll k, uint64_t bytes)
{
    for (int p = 0; p < c->size; p++) {
        count_to(c, k, p, bytes);
        count_from(c, p, bytes);
    }
}

/* Before a call: its arguments for the trace, labelled with the stage open on
 * the calling thread; a blocking call opens the caller's exposed span. */
static void call_start(sr_comm_t c, enum sr_coll k, sr_comm_work_t *work)
{
    struct sr_trace_args *a = &c->call;
    sr_fault_collective(sr_comm_step()); /* SR_FAULT delay (tests); else nothing */
    a->bytes = a->bytes_inter = 0;
    a->peers = a->peers_inter = 0;
    c->call_traced = sr_trace_recording();
    if (c->call_traced) {
        sr_trace_current(&a->label, &a->index);
        a->coll = sr_coll_name(k);
        memcpy(a->comm, c->name, sizeof a->comm);
    }
    c->counters.calls[k]++;
    c->link_call = c->link != NULL;
    if (c->link_call)
        sr_link_msgs_clear(&c->link_msgs);
    if (!work)
        sr_trace_begin(SR_SPAN_COMM_WAIT, -1);
}

/* After a call returns: a blocking call's wall time is exposed (and, for a
 * backend without a worker, busy too); a non-blocking call is timed by wait. */
static void call_end(sr_comm_t c, enum sr_coll k, sr_comm_work_t *work)
{
    int traced = c->call_traced;
    c->call_traced = 0;
    c->link_call = 0;
    if (c->call.peers_inter)
        c->counters.calls_inter[k]++;
    if (work)
        return;
    double dt = 1e-9 * (double)sr_trace_end_args(traced ? &c->call : NULL);
    c->counters.seconds[k] += dt;
    if (!c->backend->busy)
        c->counters.seconds_total[k] += dt;
}

int sr_comm_rank(sr_comm_t c)
{
    return c->rank;
}

int sr_comm_size(sr_comm_t c)
{
    return c->size;
}

int sr_comm_local_size(sr_comm_t c)
{
    return c->local_size;
}

int sr_comm_local_rank(sr_comm_t c)
{
    return c->local_rank;
}

int sr_comm_node(sr_comm_t c)
{
    return c->node;
}

int sr_comm_node_of(sr_comm_t c, int rank)
{
    SR_ASSERT(rank >= 0 && rank < c->size);
    return c->node_of[rank];
}

const char *sr_comm_backend_name(sr_comm_t c)
{
    return c->backend->name;
}

/* ---- deadline -------------------------------------------------------------------- */

static _Atomic int64_t current_step;

void sr_comm_set_step(int64_t step)
{
    atomic_store_explicit(&current_step, step, memory_order_relaxed);
}

int64_t sr_comm_step(void)
{
    return atomic_load_explicit(&current_step, memory_order_relaxed);
}

void sr_comm_set_timeout(sr_comm_t c, double seconds)
{
    SR_ASSERT(seconds >= 0);
    c->timeout = seconds;
}

double sr_comm_timeout(sr_comm_t c)
{
    return c->timeout;
}

void sr_comm_set_name(sr_comm_t c, const char *name)
{
    snprintf(c->name, sizeof c->name, "%s", name);
}

double sr_comm_deadline(sr_comm_t c, double bytes)
{
    if (c->timeout <= 0)
        return 0;
    return c->timeout + bytes / (SR_COMM_FLOOR_MB_S * 1e6);
}

void sr_comm_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                        enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                        sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    call_start(c, SR_COLL_ALL_REDUCE, work);
    count_each(c, SR_COLL_ALL_REDUCE, count * es);
    c->backend->all_reduce(c, send, recv, count, dtype, op, stream, work);
    call_end(c, SR_COLL_ALL_REDUCE, work);
}

void sr_comm_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                         const size_t *send_displs, void *recv, const size_t *recv_counts,
                         const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                         sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    call_start(c, SR_COLL_ALL_TO_ALLV, work);
    for (int p = 0; p < c->size; p++) {
        count_to(c, SR_COLL_ALL_TO_ALLV, p, send_counts[p] * es);
        count_from(c, p, recv_counts[p] * es);
    }
    c->backend->all_to_allv(c, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                            dtype, stream, work);
    call_end(c, SR_COLL_ALL_TO_ALLV, work);
}

void sr_comm_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                            enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                            sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    call_start(c, SR_COLL_REDUCE_SCATTER, work);
    count_each(c, SR_COLL_REDUCE_SCATTER, recv_count * es);
    c->backend->reduce_scatter(c, send, recv, recv_count, dtype, op, stream, work);
    call_end(c, SR_COLL_REDUCE_SCATTER, work);
}

void sr_comm_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                        enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    call_start(c, SR_COLL_ALL_GATHER, work);
    count_each(c, SR_COLL_ALL_GATHER, send_count * es);
    c->backend->all_gather(c, send, recv, send_count, dtype, stream, work);
    call_end(c, SR_COLL_ALL_GATHER, work);
}

void sr_comm_broadcast(sr_comm_t c, const void *send, void *recv, size_t count, enum sr_dtype dtype,
                       int root, sr_stream_t stream, sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    SR_ASSERT(root >= 0 && root < c->size);
    call_start(c, SR_COLL_BROADCAST, work);
    if (c->rank == root)
        for (int p = 0; p < c->size; p++)
            count_to(c, SR_COLL_BROADCAST, p, count * es);
    else
        count_from(c, root, count * es);
    c->backend->broadcast(c, send, recv, count, dtype, root, stream, work);
    call_end(c, SR_COLL_BROADCAST, work);
}

void sr_comm_all_gather_host(sr_comm_t c, const void *send, void *recv, size_t send_count,
                             enum sr_dtype dtype)
{
    struct sr_device *dev = c->dev; /* host values: no stream to wait for */
    c->dev = NULL;
    sr_comm_all_gather(c, send, recv, send_count, dtype, NULL, NULL);
    c->dev = dev;
}

void sr_comm_broadcast_host(sr_comm_t c, const void *send, void *recv, size_t count,
                            enum sr_dtype dtype, int root)
{
    struct sr_device *dev = c->dev;
    c->dev = NULL;
    sr_comm_broadcast(c, send, recv, count, dtype, root, NULL, NULL);
    c->dev = dev;
}

void sr_comm_barrier(sr_comm_t c)
{
    call_start(c, SR_COLL_BARRIER, NULL);
    for (int p = 0; c->link && p < c->size; p++) /* latency-only messages */
        if (c->node_of[p] != c->node) {
            sr_link_msgs_add(&c->link_msgs, SR_LINK_OUT, c->node_of[p], 0);
            sr_link_msgs_add(&c->link_msgs, SR_LINK_IN, c->node_of[p], 0);
        }
    c->backend->barrier(c);
    call_end(c, SR_COLL_BARRIER, NULL);
}

void sr_comm_bind_device(sr_comm_t c, struct sr_device *dev)
{
    c->dev = dev;
}

struct sr_device *sr_comm_device(sr_comm_t c)
{
    return c->dev;
}

enum sr_comm_memory sr_comm_memory(sr_comm_t c)
{
    return c->memory;
}

void sr_comm_register(sr_comm_t c, const void *buf)
{
    if (c && buf && c->backend->register_buffer)
        c->backend->register_buffer(c, buf);
}

void sr_comm_stream_wait(sr_comm_t c, sr_comm_work_t work, sr_stream_t stream)
{
    if (!work)
        return;
    if (!c->dev)
        sr_comm_wait(c, work);
    else
        c->backend->stream_wait(c, work, stream);
}

void sr_comm_wait(sr_comm_t c, sr_comm_work_t work)
{
    if (work)
        sr_comm_wait_exposed(c, c->backend->wait, work);
}

void sr_comm_wait_exposed(sr_comm_t c, int (*wait)(sr_comm_t c, sr_comm_work_t work),
                          sr_comm_work_t work)
{
    struct sr_trace_args a = {.coll = "?"};
    int traced = sr_trace_recording();
    if (traced) {
        sr_trace_current(&a.label, &a.index);
        memcpy(a.comm, c->name, sizeof a.comm);
    }
    sr_trace_begin(SR_SPAN_COMM_WAIT, -1);
    int k = wait(c, work);
    if (k >= 0 && k < SR_COLL_COUNT)
        a.coll = sr_coll_name(k);
    double dt = 1e-9 * (double)sr_trace_end_args(traced ? &a : NULL);
    if (k >= 0 && k < SR_COLL_COUNT)
        c->counters.seconds[k] += dt;
}

int sr_comm_test(sr_comm_t c, sr_comm_work_t work)
{
    if (!work)
        return 1;
    return c->backend->test(c, work) >= 0;
}

const struct sr_comm_counters *sr_comm_counters(sr_comm_t c)
{
    if (c->backend->busy) {
        double busy[SR_COLL_COUNT];
        c->backend->busy(c, busy);
        for (int k = 0; k < SR_COLL_COUNT; k++)
            c->counters.seconds_total[k] = busy[k] - c->busy_base[k];
    }
    return &c->counters;
}

void sr_comm_counters_reset(sr_comm_t c)
{
    memset(&c->counters, 0, sizeof c->counters);
    if (c->backend->busy)
        c->backend->busy(c, c->busy_base);
}

void sr_comm_counters_add(struct sr_comm_counters *acc, const struct sr_comm_counters *c)
{
    for (int k = 0; k < SR_COLL_COUNT; k++) {
        acc->calls[k] += c->calls[k];
        acc->calls_inter[k] += c->calls_inter[k];
        acc->bytes_intra[k] += c->bytes_intra[k];
        acc->bytes_inter[k] += c->bytes_inter[k];
        acc->seconds[k] += c->seconds[k];
        acc->seconds_total[k] += c->seconds_total[k];
    }
}

const char *sr_coll_name(enum sr_coll k)
{
    static const char *names[SR_COLL_COUNT] = {"all_to_allv", "all_reduce", "reduce_scatter",
                                               "all_gather",  "broadcast",  "barrier"};
    return (unsigned)k < SR_COLL_COUNT ? names[k] : "?";
}

/* ---- communicators ------------------------------------------------------------ */

sr_comm_t sr_comm_alloc(int size)
{
    sr_comm_t c = sr_calloc(1, sizeof *c);
    c->size = size;
    c->node_of = sr_calloc((size_t)size, sizeof(int));
    c->timeout = SR_COMM_TIMEOUT_DEFAULT;
    snprintf(c->name, sizeof c->name, "world");
    return c;
}

void sr_comm_set_locality(sr_comm_t c)
{
    c->node = c->node_of[c->rank];
    c->local_rank = 0;
    c->local_size = 0;
    for (int p = 0; p < c->size; p++) {
        if (c->node_of[p] != c->node)
            continue;
        c->local_size++;
        if (p < c->rank)
            c->local_rank++;
    }
}

/* The members of `c` whose color_of equals mine, ordered by rank; named `name`,
 * with c's timeout. */
static sr_comm_t split_by(sr_comm_t c, const int *color_of, const char *name)
{
    int mine = color_of[c->rank], n = 0;
    for (int p = 0; p < c->size; p++)
        n += color_of[p] == mine;
    sr_comm_t sub = sr_comm_alloc(n);
    sub->timeout = c->timeout;
    sub->nodes_emulated = c->nodes_emulated;
    sub->dev = c->dev;
    sub->memory = c->memory;
    if (c->link) {
        sub->link = sr_link_ref(c->link);
        sr_link_msgs_init(&sub->link_msgs, sr_link_nodes(c->link));
    }
    sr_comm_set_name(sub, name);
    for (int p = 0, i = 0; p < c->size; p++) {
        if (color_of[p] != mine)
            continue;
        if (p == c->rank)
            sub->rank = i;
        sub->node_of[i++] = c->node_of[p];
    }
    sr_comm_set_locality(sub);
    c->backend->split(c, sub, mine, c->rank);
    return sub;
}

sr_comm_t sr_comm_dup(sr_comm_t c)
{
    int *color_of = sr_calloc((size_t)c->size, sizeof(int));
    sr_comm_t sub = split_by(c, color_of, "dup");
    sr_free(color_of);
    return sub;
}

sr_comm_t sr_comm_split_node(sr_comm_t c)
{
    sr_comm_t sub = split_by(c, c->node_of, "node");
    return sub;
}

sr_comm_t sr_comm_split_cross(sr_comm_t c)
{
    /* color = each member's local rank: its index among earlier members of its node */
    int *color_of = sr_calloc((size_t)c->size, sizeof(int));
    for (int p = 0; p < c->size; p++)
        for (int q = 0; q < p; q++)
            color_of[p] += c->node_of[q] == c->node_of[p];
    sr_comm_t sub = split_by(c, color_of, "cross");
    sr_free(color_of);
    return sub;
}

int sr_comm_check_same(sr_comm_t c, uint64_t hash, const char *what)
{
    uint64_t *all = sr_calloc((size_t)c->size, sizeof *all);
    struct sr_device *dev = c->dev; /* host values: no stream to wait for */
    c->dev = NULL;
    c->backend->all_gather(c, &hash, all, 1, SR_DTYPE_I64, NULL, NULL);
    c->dev = dev;
    int bad = -1;
    for (int p = 1; p < c->size && bad < 0; p++)
        if (all[p] != all[0])
            bad = p;
    int rc = SR_OK;
    if (bad >= 0)
        rc = sr_error_set(SR_ERR_INVALID_ARG,
                          "config differs across ranks: rank %d has hash %016" PRIx64
                          ", rank 0 has %016" PRIx64 " (%s)\n"
                          "HINT: launch every rank with the same flags, config and plan files",
                          bad, all[bad], all[0], what ? what : "");
    sr_free(all);
    return rc;
}

void sr_comm_free(sr_comm_t c)
{
    if (!c)
        return;
    c->backend->free(c);
    sr_stage_free(c);
    sr_link_unref(c->link);
    sr_link_msgs_free(&c->link_msgs);
    sr_free(c->node_of);
    sr_free(c);
}
