/*
 * The collective dispatcher: counts and times every call, then hands it to the
 * communicator's backend. Bytes are logical payload per destination, self
 * excluded, split by whether the destination is on this rank's node.
 */
#include <string.h>
#include <time.h>

#include "shardrec/alloc.h"
#include "comm/comm_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void count_to(sr_comm_t c, enum sr_coll k, int peer, uint64_t bytes)
{
    if (peer == c->rank || bytes == 0)
        return;
    if (c->node_of[peer] == c->node)
        c->counters.bytes_intra[k] += bytes;
    else
        c->counters.bytes_inter[k] += bytes;
}

/* The same payload to every other rank. */
static void count_each(sr_comm_t c, enum sr_coll k, uint64_t bytes)
{
    c->counters.calls[k]++;
    for (int p = 0; p < c->size; p++)
        count_to(c, k, p, bytes);
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
int sr_comm_node(sr_comm_t c)
{
    return c->node;
}
const char *sr_comm_backend_name(sr_comm_t c)
{
    return c->backend->name;
}

void sr_comm_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                        enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                        sr_comm_work_t *work)
{
    double t0 = now_s();
    count_each(c, SR_COLL_ALL_REDUCE, count * sr_dtype_size(dtype));
    c->backend->all_reduce(c, send, recv, count, dtype, op, work);
    c->counters.seconds[SR_COLL_ALL_REDUCE] += now_s() - t0;
}

void sr_comm_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                         const size_t *send_displs, void *recv, const size_t *recv_counts,
                         const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                         sr_comm_work_t *work)
{
    double t0 = now_s();
    c->counters.calls[SR_COLL_ALL_TO_ALLV]++;
    for (int p = 0; p < c->size; p++)
        count_to(c, SR_COLL_ALL_TO_ALLV, p, send_counts[p] * sr_dtype_size(dtype));
    c->backend->all_to_allv(c, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                            dtype, work);
    c->counters.seconds[SR_COLL_ALL_TO_ALLV] += now_s() - t0;
}

void sr_comm_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                            enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                            sr_comm_work_t *work)
{
    double t0 = now_s();
    count_each(c, SR_COLL_REDUCE_SCATTER, recv_count * sr_dtype_size(dtype));
    c->backend->reduce_scatter(c, send, recv, recv_count, dtype, op, work);
    c->counters.seconds[SR_COLL_REDUCE_SCATTER] += now_s() - t0;
}

void sr_comm_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                        enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work)
{
    double t0 = now_s();
    count_each(c, SR_COLL_ALL_GATHER, send_count * sr_dtype_size(dtype));
    c->backend->all_gather(c, send, recv, send_count, dtype, work);
    c->counters.seconds[SR_COLL_ALL_GATHER] += now_s() - t0;
}

void sr_comm_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                       enum sr_dtype dtype, int root, sr_stream_t stream, sr_comm_work_t *work)
{
    double t0 = now_s();
    c->counters.calls[SR_COLL_BROADCAST]++;
    if (c->rank == root)
        for (int p = 0; p < c->size; p++)
            count_to(c, SR_COLL_BROADCAST, p, count * sr_dtype_size(dtype));
    c->backend->broadcast(c, send, recv, count, dtype, root, work);
    c->counters.seconds[SR_COLL_BROADCAST] += now_s() - t0;
}

void sr_comm_barrier(sr_comm_t c)
{
    double t0 = now_s();
    c->counters.calls[SR_COLL_BARRIER]++;
    c->backend->barrier(c);
    c->counters.seconds[SR_COLL_BARRIER] += now_s() - t0;
}

void sr_comm_wait(sr_comm_t c, sr_comm_work_t work)
{
    c->backend->wait(c, work);
}

int sr_comm_test(sr_comm_t c, sr_comm_work_t work)
{
    return c->backend->test(c, work);
}

const struct sr_comm_counters *sr_comm_counters(sr_comm_t c)
{
    return &c->counters;
}

void sr_comm_counters_reset(sr_comm_t c)
{
    memset(&c->counters, 0, sizeof c->counters);
}

const char *sr_coll_name(enum sr_coll k)
{
    static const char *names[SR_COLL_COUNT] = {"all_to_allv", "all_reduce", "reduce_scatter",
                                               "all_gather", "broadcast", "barrier"};
    return (unsigned)k < SR_COLL_COUNT ? names[k] : "?";
}

void sr_comm_free(sr_comm_t c)
{
    if (!c)
        return;
    c->backend->free(c);
    sr_free(c->node_of);
    sr_free(c);
}
