/*
 * Compressed exchanges: pack, send, fp32 sum on arrival (contract in
 * shardrec/comm_compressed.h). The casts are the device's cast ops, issued
 * as segment lists so that one exchange is one op call per phase (in
 * batches of SEGS_MAX segments: beyond 16 ranks a phase takes a few calls).
 *
 * Reduce-scatter messages, in wire elements (msg = count + 2 * n_exact):
 *
 *   send   (W, msg)  to peer p:    [ block p, rounded | my exact values, fp32 bits ]
 *   recv   (W, msg)  from peer q:  [ my block from q  | q's exact values           ]
 *
 * On arrival my block is summed into recv = +0, sources in rank order (mine
 * from the caller's fp32 send, unrounded), and the exact values likewise:
 * the order of today's sums, so results are bit-identical to the host loops
 * this module replaces. The all-to-all-v and all-gather keep the caller's
 * displacements on the wire.
 */
#include <stdint.h>

#include "shardrec/alloc.h"
#include "shardrec/comm_compressed.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "device/ops_cast.h"

#define SEGS_MAX 32 /* segments per op call (a stack array; no allocation) */

typedef void (*cast_fn)(struct sr_device *dev, const struct sr_cast_seg *segs, int num,
                        sr_stream_t s);

struct seg_list {
    struct sr_device *dev;
    sr_stream_t stream;
    cast_fn op;
    int n;
    struct sr_cast_seg seg[SEGS_MAX];
};

static void segs_flush(struct seg_list *l)
{
    if (l->n)
        l->op(l->dev, l->seg, l->n, l->stream);
    l->n = 0;
}

static void segs_add(struct seg_list *l, const void *src, void *dst, size_t n, enum sr_dtype dtype)
{
    if (!n)
        return;
    if (l->n == SEGS_MAX)
        segs_flush(l);
    l->seg[l->n++] = (struct sr_cast_seg){src, dst, n, dtype};
}

static uint16_t *wire(void *buf, size_t offset)
{
    return (uint16_t *)buf + offset;
}

static void check_fits(const struct sr_compressed *x, size_t end, const char *what)
{
    if (end > x->cap)
        SR_ABORT("compressed %s: %zu wire elements needed, %zu reserved", what, end, x->cap);
}

static void check_split(const struct sr_compressed *x)
{
    if (x->dtype != SR_DTYPE_F16 && x->dtype != SR_DTYPE_BF16)
        SR_ABORT("compressed exchange: split calls take fp16 or bf16, not %s",
                 sr_dtype_name(x->dtype));
    if (!x->dev->cast)
        SR_ABORT("compressed exchange: device %s has no cast ops", x->dev->name);
}

/* Block p of n values cut in blocks of c: its length. */
static size_t block_len(size_t n, size_t c, int p)
{
    const size_t off = (size_t)p * c;
    return off < n ? (n - off < c ? n - off : c) : 0;
}

/* The struct's buffers are about to be rewritten by an exchange on `stream`
 * while the last one's arrival (the stream wait, then the casts reading
 * recv) may still be queued on armed_stream. On the same stream, order
 * suffices: the pack runs after that arrival, and a bound communicator
 * touches the buffers only once the stream reaches the call (comm.h); on
 * another stream the host waits for it. */
static void before_reuse(struct sr_compressed *x, sr_stream_t stream)
{
    if (x->armed && x->armed_stream != stream)
        sr_dev_sync(x->dev, x->armed_stream);
    x->armed = 0;
}

/* The packed send buffer must be complete before the collective reads it:
 * a communicator bound to x->dev waits for the stream itself (and is handed
 * it); any other gets the stream synchronised here, and no stream. */
static sr_stream_t before_send(struct sr_compressed *x, sr_comm_t comm, sr_stream_t stream)
{
    if (sr_comm_device(comm) == x->dev)
        return stream;
    sr_dev_sync(x->dev, stream);
    return NULL;
}

/* Casts on arrival run after the collective: the stream waits for it. */
static void arrive(struct sr_compressed *x, sr_comm_t comm, sr_stream_t stream)
{
    if (sr_comm_device(comm) == x->dev) {
        sr_comm_stream_wait(comm, x->work, stream);
        x->armed = sr_comm_memory(comm) == SR_COMM_MEMORY_HOST;
        x->armed_stream = stream;
    } else {
        sr_comm_wait(comm, x->work);
    }
    x->work = NULL;
}

static struct seg_list segs_of(struct sr_compressed *x, cast_fn op, sr_stream_t stream)
{
    struct seg_list l = {.dev = x->dev, .stream = stream, .op = op, .n = 0};
    return l;
}

/* ---- buffers ------------------------------------------------------------------- */

void sr_compressed_init(struct sr_compressed *x, sr_comm_t comm, struct sr_device *dev,
                        enum sr_dtype dtype, size_t cap)
{
    const size_t W = (size_t)sr_comm_size(comm), bytes = sizeof(uint16_t) * (cap + 1);
    SR_ASSERT(dev && sr_dtype_is_wire(dtype));
    *x = (struct sr_compressed){.dev = dev, .dtype = dtype, .owned = 1};
    x->counts = sr_calloc(W, sizeof(size_t));
    x->rcounts = sr_calloc(W, sizeof(size_t));
    x->displs = sr_calloc(W, sizeof(size_t));
    if (dtype == SR_DTYPE_F32)
        return;
    x->cap = cap;
    x->device_memory = sr_comm_memory(comm) == SR_COMM_MEMORY_DEVICE;
    x->send = x->device_memory ? sr_dev_alloc(dev, bytes) : sr_dev_alloc_host(dev, bytes);
    x->recv = x->device_memory ? sr_dev_alloc(dev, bytes) : sr_dev_alloc_host(dev, bytes);
    sr_dev_memset(dev, x->send, 0, bytes, NULL); /* block padding is never written again */
    sr_dev_memset(dev, x->recv, 0, bytes, NULL);
    sr_dev_sync(dev, NULL);
}

void sr_compressed_free(struct sr_compressed *x)
{
    if (!x || !x->owned)
        return;
    SR_ASSERT(!x->work);
    if (x->armed) /* nothing queued may read them once freed */
        sr_dev_sync(x->dev, x->armed_stream);
    if (x->device_memory) {
        sr_dev_free(x->dev, x->send);
        sr_dev_free(x->dev, x->recv);
    } else if (x->send) {
        sr_dev_free_host(x->dev, x->send);
        sr_dev_free_host(x->dev, x->recv);
    }
    sr_free(x->counts);
    sr_free(x->rcounts);
    sr_free(x->displs);
    *x = (struct sr_compressed){0};
}

struct sr_compressed sr_compressed_view(struct sr_device *dev, enum sr_dtype dtype, void *send,
                                        void *recv, size_t cap, size_t *counts, size_t *rcounts,
                                        size_t *displs)
{
    SR_ASSERT(dev && sr_dtype_is_wire(dtype));
    return (struct sr_compressed){.dev = dev,
                                  .dtype = dtype,
                                  .send = send,
                                  .recv = recv,
                                  .cap = dtype == SR_DTYPE_F32 ? 0 : cap,
                                  .counts = counts,
                                  .rcounts = rcounts,
                                  .displs = displs};
}

/* ---- all-to-all-v ---------------------------------------------------------------- */

void sr_compressed_all_to_allv(struct sr_compressed *x, sr_comm_t comm, const float *send,
                               const size_t *send_counts, const size_t *send_displs, float *recv,
                               const size_t *recv_counts, const size_t *recv_displs,
                               sr_stream_t stream)
{
    if (x->dtype == SR_DTYPE_F32) {
        sr_comm_all_to_allv(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                            SR_DTYPE_F32, stream, NULL);
        return;
    }
    check_split(x);
    const int W = sr_comm_size(comm), me = sr_comm_rank(comm);
    SR_ASSERT(!x->work && send_counts[me] == recv_counts[me]);
    before_reuse(x, stream);
    struct seg_list l = segs_of(x, sr_op_cast_pack, stream);
    for (int p = 0; p < W; p++) {
        x->counts[p] = p == me ? 0 : send_counts[p];
        x->rcounts[p] = p == me ? 0 : recv_counts[p];
        check_fits(x, send_displs[p] + send_counts[p], "all-to-all-v send");
        check_fits(x, recv_displs[p] + recv_counts[p], "all-to-all-v receive");
        segs_add(&l, send + send_displs[p], wire(x->send, send_displs[p]), x->counts[p], x->dtype);
    }
    segs_flush(&l);
    sr_comm_all_to_allv(comm, x->send, x->counts, send_displs, x->recv, x->rcounts, recv_displs,
                        x->dtype, before_send(x, comm, stream), &x->work);
    arrive(x, comm, stream);
    l = segs_of(x, sr_op_cast_unpack, stream);
    for (int p = 0; p < W; p++) {
        if (p == me)
            segs_add(&l, send + send_displs[p], recv + recv_displs[p], send_counts[p],
                     SR_DTYPE_F32);
        else
            segs_add(&l, wire(x->recv, recv_displs[p]), recv + recv_displs[p], x->rcounts[p],
                     x->dtype);
    }
    segs_flush(&l);
}

/* ---- reduce-scatter ---------------------------------------------------------------- */

void sr_compressed_reduce_scatter_start(struct sr_compressed *x, sr_comm_t comm, const float *send,
                                        size_t n, size_t count, const float *exact, size_t n_exact,
                                        sr_stream_t stream)
{
    check_split(x);
    SR_ASSERT(!x->work);
    const int W = sr_comm_size(comm), me = sr_comm_rank(comm);
    const size_t msg = count + 2 * n_exact;
    SR_ASSERT(n <= (size_t)W * count);
    check_fits(x, (size_t)W * msg, "reduce-scatter");
    before_reuse(x, stream);
    struct seg_list l = segs_of(x, sr_op_cast_pack, stream);
    for (int p = 0; p < W; p++) {
        x->counts[p] = p == me ? 0 : msg;
        x->displs[p] = (size_t)p * msg; /* the same for send and receive */
        if (p == me)
            continue;
        segs_add(&l, send + (size_t)p * count, wire(x->send, x->displs[p]), block_len(n, count, p),
                 x->dtype);
        segs_add(&l, exact, wire(x->send, x->displs[p] + count), n_exact, SR_DTYPE_F32);
    }
    segs_flush(&l);
    sr_comm_all_to_allv(comm, x->send, x->counts, x->displs, x->recv, x->counts, x->displs,
                        x->dtype, before_send(x, comm, stream), &x->work);
    x->own = send + (size_t)me * count;
    x->own_n = block_len(n, count, me);
    x->count = count;
    x->msg = msg;
    x->exact = exact;
    x->n_exact = n_exact;
}

void sr_compressed_reduce_scatter_end(struct sr_compressed *x, sr_comm_t comm, float *recv,
                                      float *exact_sum, sr_stream_t stream)
{
    const int W = sr_comm_size(comm), me = sr_comm_rank(comm);
    arrive(x, comm, stream);
    sr_dev_memset(x->dev, recv, 0, sizeof(float) * x->count, stream);
    if (x->n_exact)
        sr_dev_memset(x->dev, exact_sum, 0, sizeof(float) * x->n_exact, stream);
    struct seg_list l = segs_of(x, sr_op_cast_unpack_add, stream);
    for (int q = 0; q < W; q++) {
        const uint16_t *msg = wire(x->recv, (size_t)q * x->msg);
        if (q == me) {
            segs_add(&l, x->own, recv, x->own_n, SR_DTYPE_F32);
            segs_add(&l, x->exact, exact_sum, x->n_exact, SR_DTYPE_F32);
        } else {
            segs_add(&l, msg, recv, x->own_n, x->dtype);
            segs_add(&l, msg + x->count, exact_sum, x->n_exact, SR_DTYPE_F32);
        }
    }
    segs_flush(&l);
}

void sr_compressed_reduce_scatter(struct sr_compressed *x, sr_comm_t comm, const float *send,
                                  float *recv, size_t count, sr_stream_t stream)
{
    if (x->dtype == SR_DTYPE_F32) {
        sr_comm_reduce_scatter(comm, send, recv, count, SR_DTYPE_F32, SR_REDUCE_SUM, stream, NULL);
        return;
    }
    sr_compressed_reduce_scatter_start(x, comm, send, (size_t)sr_comm_size(comm) * count, count,
                                       NULL, 0, stream);
    sr_compressed_reduce_scatter_end(x, comm, recv, NULL, stream);
}

/* ---- all-gather ---------------------------------------------------------------------- */

void sr_compressed_all_gather_start(struct sr_compressed *x, sr_comm_t comm, const float *send,
                                    size_t count, sr_stream_t stream)
{
    check_split(x);
    SR_ASSERT(!x->work);
    check_fits(x, (size_t)sr_comm_size(comm) * count, "all-gather");
    before_reuse(x, stream);
    struct seg_list l = segs_of(x, sr_op_cast_pack, stream);
    segs_add(&l, send, x->send, count, x->dtype);
    segs_flush(&l);
    sr_comm_all_gather(comm, x->send, x->recv, count, x->dtype, before_send(x, comm, stream),
                       &x->work);
    x->own = send;
    x->count = count;
}

void sr_compressed_all_gather_end(struct sr_compressed *x, sr_comm_t comm, float *recv, size_t n,
                                  enum sr_compressed_own own, sr_stream_t stream)
{
    const int W = sr_comm_size(comm), me = sr_comm_rank(comm);
    const size_t c = x->count;
    SR_ASSERT(n <= (size_t)W * c);
    arrive(x, comm, stream);
    struct seg_list l = segs_of(x, sr_op_cast_unpack, stream);
    if (own == SR_COMPRESSED_OWN_ROUNDED) {
        segs_add(&l, x->recv, recv, n, x->dtype);
    } else {
        for (int p = 0; p < W; p++) {
            const size_t off = (size_t)p * c;
            if (p == me)
                segs_add(&l, x->own, recv + off, block_len(n, c, p), SR_DTYPE_F32);
            else
                segs_add(&l, wire(x->recv, off), recv + off, block_len(n, c, p), x->dtype);
        }
    }
    segs_flush(&l);
}

void sr_compressed_all_gather(struct sr_compressed *x, sr_comm_t comm, const float *send,
                              float *recv, size_t count, sr_stream_t stream)
{
    if (x->dtype == SR_DTYPE_F32) {
        sr_comm_all_gather(comm, send, recv, count, SR_DTYPE_F32, stream, NULL);
        return;
    }
    sr_compressed_all_gather_start(x, comm, send, count, stream);
    sr_compressed_all_gather_end(x, comm, recv, (size_t)sr_comm_size(comm) * count,
                                 SR_COMPRESSED_OWN_EXACT, stream);
}
