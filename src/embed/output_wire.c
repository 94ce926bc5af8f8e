/*
 * The output dist's collectives in the pooled wire dtype (DESIGN.md
 * "Distribution": compressed payloads), through the one compressed-exchange
 * module (shardrec/comm_compressed.h): with fp32 each is the plain comm.h
 * call; with fp16 or bf16 the payload leaves as 16-bit values packed by the
 * device's cast op and is widened (all-to-all-v, all-gather) or summed in
 * fp32 in rank order (reduce-scatter) on arrival, my own block in fp32.
 *
 * In fp32 each is one non-blocking comm.h call: the caller gets its work
 * handle and completes it (sr_sharded_complete), so a stage can return
 * while it travels. Compressed, the exchange is issued whole on the stream
 * (pack, collective, casts on arrival: comm_compressed.h) and no handle is
 * left; the sync below makes the next compressed call wait for it.
 *
 * Each is still one collective, so the calls per step stay those of
 * sharded_ebc.h (a compressed reduce-scatter is counted as an all-to-all-v),
 * and the counters show 2 bytes per element. Buffers (sharded_internal.h),
 * sized at init by sharded_ebc.c and wrapped here as a view:
 *
 *   wire_send, wire_recv   (wire_cap) 16-bit values, laid out as the fp32
 *                          buffers they stand for (same displacements)
 *   wire_scounts, wire_rcounts, wire_displs   (W) scratch
 *
 * Stream order: the casts run on the batch context's stream, where the
 * output dist's device ops run before and after these calls, so results are
 * stream-ordered and nothing here waits for them. The wire buffers are
 * shared by every output-dist exchange (of every batch context), so the
 * previous exchange's arrival (its collective, then the casts) must have
 * run before this one packs over them. On a device-memory (NCCL)
 * communicator the streams see to it: each exchange ends by recording
 * wire_done, and one on another stream first waits for it. On a
 * host-memory communicator that arrival is a host function on the stream
 * that waits for its collective, so each compressed call synchronises the
 * stream first (a no-op on the immediate CPU device).
 */
#include "shardrec/comm_compressed.h"
#include "shardrec/device.h"
#include "embed/sharded_internal.h"

static struct sr_compressed wire_of(struct sr_sharded_ebc *s)
{
    return sr_compressed_view(s->dev, s->wire, s->wire_send, s->wire_recv, s->wire_cap,
                              s->wire_scounts, s->wire_rcounts, s->wire_displs);
}

/* The shared wire buffers are free again for an exchange on `stream` (see
 * above). */
static void wire_free(struct sr_sharded_ebc *s, sr_stream_t stream)
{
    if (!s->wire_on_device)
        sr_dev_sync(s->dev, stream);
    else if (s->wire_stream && s->wire_stream != stream)
        sr_dev_stream_wait_event(s->dev, stream, s->wire_done);
}

/* An exchange on `stream` is issued: the next one on another stream waits
 * for its end. */
static void wire_used(struct sr_sharded_ebc *s, sr_stream_t stream)
{
    if (!s->wire_on_device)
        return;
    sr_dev_event_record(s->dev, s->wire_done, stream);
    s->wire_stream = stream;
}

void sr_wire_all_to_allv(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send,
                         const size_t *send_counts, const size_t *send_displs, float *recv,
                         const size_t *recv_counts, const size_t *recv_displs, sr_stream_t stream,
                         sr_comm_work_t *work)
{
    *work = NULL;
    if (s->wire == SR_DTYPE_F32) {
        sr_comm_all_to_allv(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                            SR_DTYPE_F32, stream, work);
        return;
    }
    struct sr_compressed x = wire_of(s);
    wire_free(s, stream);
    sr_compressed_all_to_allv(&x, comm, send, send_counts, send_displs, recv, recv_counts,
                              recv_displs, stream);
    wire_used(s, stream);
}

void sr_wire_reduce_scatter(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send,
                            float *recv, size_t count, sr_stream_t stream, sr_comm_work_t *work)
{
    *work = NULL;
    if (s->wire == SR_DTYPE_F32) {
        sr_comm_reduce_scatter(comm, send, recv, count, SR_DTYPE_F32, SR_REDUCE_SUM, stream, work);
        return;
    }
    struct sr_compressed x = wire_of(s);
    wire_free(s, stream);
    sr_compressed_reduce_scatter(&x, comm, send, recv, count, stream);
    wire_used(s, stream);
}

void sr_wire_all_gather(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send, float *recv,
                        size_t count, sr_stream_t stream, sr_comm_work_t *work)
{
    *work = NULL;
    if (s->wire == SR_DTYPE_F32) {
        sr_comm_all_gather(comm, send, recv, count, SR_DTYPE_F32, stream, work);
        return;
    }
    struct sr_compressed x = wire_of(s);
    wire_free(s, stream);
    sr_compressed_all_gather(&x, comm, send, recv, count, stream);
    wire_used(s, stream);
}
