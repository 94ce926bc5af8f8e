/*
 * The single-rank backend: a world of one. Every collective is a local copy
 * (the sum over one rank is the value itself); non-blocking calls complete at
 * once, and their work handle is NULL. A derived communicator (dup, node,
 * cross) is another world of one with its own counters.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "comm/comm_internal.h"

static void copy(const void *send, void *recv, size_t count, enum sr_dtype dtype)
{
    if (send != recv && count)
        memmove(recv, send, count * sr_dtype_size(dtype));
}

static void done(sr_comm_work_t *work)
{
    if (work)
        *work = NULL;
}

static void single_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                              enum sr_dtype dtype, enum sr_reduce_op op, sr_comm_work_t *work)
{
    copy(send, recv, count, dtype);
    done(work);
}

static void single_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                               const size_t *send_displs, void *recv, const size_t *recv_counts,
                               const size_t *recv_displs, enum sr_dtype dtype, sr_comm_work_t *work)
{
    size_t es = sr_dtype_size(dtype);
    copy((const char *)send + send_displs[0] * es, (char *)recv + recv_displs[0] * es,
         send_counts[0] < recv_counts[0] ? send_counts[0] : recv_counts[0], dtype);
    done(work);
}

static void single_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                                  enum sr_dtype dtype, enum sr_reduce_op op, sr_comm_work_t *work)
{
    copy(send, recv, recv_count, dtype);
    done(work);
}

static void single_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                              enum sr_dtype dtype, sr_comm_work_t *work)
{
    copy(send, recv, send_count, dtype);
    done(work);
}

static void single_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                             enum sr_dtype dtype, int root, sr_comm_work_t *work)
{
    copy(send, recv, count, dtype);
    done(work);
}

static void single_barrier(sr_comm_t c)
{
}

static int single_wait(sr_comm_t c, sr_comm_work_t work)
{
    return -1;
}

static int single_test(sr_comm_t c, sr_comm_work_t work)
{
    return 0; /* handles are always NULL: nothing is ever pending */
}

static const struct sr_comm_backend single_backend;

static void single_split(sr_comm_t c, sr_comm_t sub, int color, int key)
{
    sub->backend = &single_backend;
}

static void single_free(sr_comm_t c)
{
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
