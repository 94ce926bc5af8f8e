/*
 * The MPI backend's collectives: for each, a submitter that runs on the
 * calling thread (checks and converts its arguments, stages device buffers
 * the host cannot address through host mirrors, records the stream order
 * and queues a work item: comm_mpi_queue.c) and a start function that the
 * communicator's worker runs (the MPI non-blocking call).
 *
 * Arguments: MPI 3 takes int counts, so counts above INT_MAX abort with a
 * message; fp16 and bf16 travel as opaque 16-bit words and are never
 * reduced (comm.h); each item carries its deadline (comm.h), from its
 * payload at this rank (send plus receive buffers).
 *
 * In place: MPI_IN_PLACE where comm.h's in-place forms are used; a staged
 * buffer keeps its offset inside its mirror, so the test on the mirror
 * pointers gives the same answer. A world of one whose receive buffer is
 * hidden device memory copies on the stream instead (sr_stage_local_copy).
 */
#ifdef SR_USE_MPI

#include <limits.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "comm/comm_mpi_internal.h"

/* The contiguous region of `count` elements at a buffer's start. */
static const size_t zero_displ = 0;

/* ---- arguments ----------------------------------------------------------------- */

static int to_int(size_t n, const char *what)
{
    if (n > INT_MAX)
        SR_ABORT("%s: %zu elements exceed INT_MAX (%d), the MPI 3 count limit; split the "
                 "transfer into smaller calls",
                 what, n, INT_MAX);
    return (int)n;
}

static MPI_Datatype mpi_type(enum sr_dtype d, int reduce, const char *what)
{
    switch (d) {
    case SR_DTYPE_F32:
        return MPI_FLOAT;
    case SR_DTYPE_F64:
        return MPI_DOUBLE;
    case SR_DTYPE_I32:
        return MPI_INT32_T;
    case SR_DTYPE_I64:
        return MPI_INT64_T;
    case SR_DTYPE_U8:
        return MPI_UINT8_T;
    case SR_DTYPE_F16:
    case SR_DTYPE_BF16:
        if (!reduce)
            return MPI_UINT16_T; /* moved as opaque 16-bit words */
        SR_ABORT("%s: %s cannot be reduced by the comm layer; send it with all_to_allv and "
                 "sum in fp32 on arrival",
                 what, sr_dtype_name(d));
    }
    SR_ABORT("%s: unknown dtype %d", what, (int)d);
}

static void check_op(enum sr_reduce_op op, const char *what)
{
    if (op != SR_REDUCE_SUM)
        SR_ABORT("%s: unknown reduce op %d", what, (int)op);
}

/* A world of one, recv hidden device memory: a copy on the stream, done. */
static int local_copy(sr_comm_t c, const void *send, void *recv, size_t bytes, sr_stream_t stream,
                      sr_comm_work_t *work)
{
    if (!sr_stage_local_copy(c, send, recv, bytes, stream))
        return 0;
    if (work)
        *work = NULL;
    return 1;
}

/* w's deadline for a payload of `bytes` at this rank (comm.h). */
static void set_deadline(sr_comm_t c, struct sr_comm_work *w, double bytes)
{
    w->bytes = bytes;
    w->limit = sr_comm_deadline(c, bytes);
}

/* Hand a filled item to the worker: its deadline for `bytes`, after the
 * work issued on `stream` so far (its staged sends included). */
static void issue(sr_comm_t c, struct sr_comm_work *w, double bytes, sr_stream_t stream,
                  sr_comm_work_t *work)
{
    set_deadline(c, w, bytes);
    sr_mpi_stream_order(c, w, stream);
    sr_mpi_submit(c->state, w, work);
}


/* ---- collectives: start functions (worker) and submitters (caller) ---------------- */

static void start_all_reduce(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    const void *send = w->send == w->recv ? MPI_IN_PLACE : w->send;
    SR_MPI_CHECK(MPI_Iallreduce(send, w->recv, w->count, w->type, MPI_SUM, s->comm, req));
}

void sr_mpi_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                       enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                       sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    check_op(op, "all_reduce");
    if (local_copy(c, send, recv, count * es, stream, work))
        return;
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    w->kind = SR_COLL_ALL_REDUCE;
    w->start = start_all_reduce;
    w->send = sr_mpi_stage_in(c, w, stream, send, &count, &zero_displ, 1, es);
    w->recv = sr_mpi_stage_out(c, w, stream, recv, &count, &zero_displ, 1, es);
    w->count = to_int(count, "all_reduce");
    w->type = mpi_type(dtype, 1, "all_reduce");
    issue(c, w, 2.0 * (double)count * (double)es, stream, work);
}

static void start_all_to_allv(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    int W = s->size;
    SR_MPI_CHECK(MPI_Ialltoallv(w->send, w->ints, w->ints + W, w->type, w->recv, w->ints + 2 * W,
                                w->ints + 3 * W, w->type, s->comm, req));
}

void sr_mpi_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                        const size_t *send_displs, void *recv, const size_t *recv_counts,
                        const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                        sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    const size_t n0 = send_counts[0] < recv_counts[0] ? send_counts[0] : recv_counts[0];
    if (local_copy(c, (const char *)send + send_displs[0] * es, (char *)recv + recv_displs[0] * es,
                   n0 * es, stream, work))
        return;
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    int W = c->size;
    double elems = 0;
    for (int p = 0; p < W; p++) {
        elems += (double)send_counts[p] + (double)recv_counts[p];
        w->ints[p] = to_int(send_counts[p], "all_to_allv send count");
        w->ints[W + p] = to_int(send_displs[p], "all_to_allv send displacement");
        w->ints[2 * W + p] = to_int(recv_counts[p], "all_to_allv recv count");
        w->ints[3 * W + p] = to_int(recv_displs[p], "all_to_allv recv displacement");
    }
    w->kind = SR_COLL_ALL_TO_ALLV;
    w->start = start_all_to_allv;
    w->send = sr_mpi_stage_in(c, w, stream, send, send_counts, send_displs, W, es);
    w->recv = sr_mpi_stage_out(c, w, stream, recv, recv_counts, recv_displs, W, es);
    w->type = mpi_type(dtype, 0, "all_to_allv");
    issue(c, w, elems * (double)es, stream, work);
}

static void start_reduce_scatter(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    const void *send = w->send == w->recv ? MPI_IN_PLACE : w->send;
    SR_MPI_CHECK(
        MPI_Ireduce_scatter_block(send, w->recv, w->count, w->type, MPI_SUM, s->comm, req));
}

void sr_mpi_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                           enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                           sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype), all = (size_t)c->size * recv_count;
    check_op(op, "reduce_scatter");
    if (local_copy(c, send, recv, recv_count * es, stream, work))
        return;
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    w->kind = SR_COLL_REDUCE_SCATTER;
    w->start = start_reduce_scatter;
    w->send = sr_mpi_stage_in(c, w, stream, send, &all, &zero_displ, 1, es);
    w->recv = sr_mpi_stage_out(c, w, stream, recv, &recv_count, &zero_displ, 1, es);
    w->count = to_int(recv_count, "reduce_scatter");
    to_int(all, "reduce_scatter send buffer");
    w->type = mpi_type(dtype, 1, "reduce_scatter");
    issue(c, w, (double)(c->size + 1) * (double)recv_count * (double)es, stream, work);
}

static void start_all_gather(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    const char *mine = (const char *)w->recv + (size_t)s->rank * (size_t)w->count * w->elem;
    const void *send = w->send == (const void *)mine ? MPI_IN_PLACE : w->send;
    SR_MPI_CHECK(MPI_Iallgather(send, w->count, w->type, w->recv, w->count, w->type, s->comm, req));
}

void sr_mpi_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                       enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype), all = (size_t)c->size * send_count;
    if (local_copy(c, send, recv, send_count * es, stream, work))
        return;
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    w->kind = SR_COLL_ALL_GATHER;
    w->start = start_all_gather;
    w->send = sr_mpi_stage_in(c, w, stream, send, &send_count, &zero_displ, 1, es);
    w->recv = sr_mpi_stage_out(c, w, stream, recv, &all, &zero_displ, 1, es);
    w->count = to_int(send_count, "all_gather");
    to_int(all, "all_gather recv buffer");
    w->elem = es;
    w->type = mpi_type(dtype, 0, "all_gather");
    issue(c, w, (double)(c->size + 1) * (double)send_count * (double)es, stream, work);
}

static void start_broadcast(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    if (s->rank == w->root && w->send != w->recv && w->count)
        memmove(w->recv, w->send, (size_t)w->count * w->elem);
    SR_MPI_CHECK(MPI_Ibcast(w->recv, w->count, w->type, w->root, s->comm, req));
}

void sr_mpi_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                      enum sr_dtype dtype, int root, sr_stream_t stream, sr_comm_work_t *work)
{
    const size_t es = sr_dtype_size(dtype);
    if (local_copy(c, send, recv, count * es, stream, work))
        return;
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    w->kind = SR_COLL_BROADCAST;
    w->start = start_broadcast;
    w->send = c->rank == root /* the others' send is ignored */
                  ? sr_mpi_stage_in(c, w, stream, send, &count, &zero_displ, 1, es)
                  : send;
    w->recv = sr_mpi_stage_out(c, w, stream, recv, &count, &zero_displ, 1, es);
    w->root = root;
    w->count = to_int(count, "broadcast");
    w->elem = es;
    w->type = mpi_type(dtype, 0, "broadcast");
    issue(c, w, 2.0 * (double)count * (double)es, stream, work);
}

static void start_barrier(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    SR_MPI_CHECK(MPI_Ibarrier(s->comm, req));
}

void sr_mpi_barrier(sr_comm_t c)
{
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    w->kind = SR_COLL_BARRIER;
    w->start = start_barrier;
    set_deadline(c, w, 0);
    sr_mpi_submit(c->state, w, NULL);
}

#endif /* SR_USE_MPI */
