/*
 * The output dist's collectives in the pooled wire dtype (DESIGN.md
 * "Distribution": compressed payloads). With fp32 each is the plain comm.h
 * call. With fp16 or bf16 the payload leaves as 16-bit values and is widened
 * on arrival; sums are taken in fp32 here, never by the comm layer:
 *
 *   all-to-all-v     pack what goes to the other ranks, exchange, unpack;
 *                    my own block is copied in fp32
 *   reduce-scatter   an all-to-all-v of the compressed blocks, then my block
 *                    summed in fp32, sources in rank order (my own block in
 *                    fp32): one rounding per other contributor, W-1 at most
 *   all-gather       pack my block, gather, unpack the others'; mine stays fp32
 *
 * Each is still one collective, so the calls per step stay those of
 * sharded_ebc.h (a compressed reduce-scatter is counted as an all-to-all-v),
 * and the counters show 2 bytes per element. Self-blocks never travel: they
 * are sent with count 0. Buffers (sharded_internal.h), sized at init:
 *
 *   wire_send, wire_recv   (wire_cap) 16-bit values, laid out as the fp32
 *                          buffers they stand for (same displacements)
 *   wire_scounts, wire_rcounts  (W) the counts with my own entry zeroed
 *   wire_displs            (W) block displacements of the reduce-scatter
 */
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/half.h"
#include "embed/sharded_internal.h"

static void check_fits(const struct sr_sharded_ebc *s, size_t end)
{
    if (end > s->wire_cap)
        SR_ABORT("output dist: %zu wire elements needed, %zu reserved", end, s->wire_cap);
}

void sr_wire_all_to_allv(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send,
                         const size_t *send_counts, const size_t *send_displs, float *recv,
                         const size_t *recv_counts, const size_t *recv_displs)
{
    if (s->wire == SR_DTYPE_F32) {
        sr_comm_all_to_allv(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                            SR_DTYPE_F32, NULL, NULL);
        return;
    }
    const int n = sr_comm_size(comm), me = sr_comm_rank(comm);
    for (int p = 0; p < n; p++) {
        s->wire_scounts[p] = p == me ? 0 : send_counts[p];
        s->wire_rcounts[p] = p == me ? 0 : recv_counts[p];
        check_fits(s, send_displs[p] + send_counts[p]);
        check_fits(s, recv_displs[p] + recv_counts[p]);
        sr_half_pack(s->wire, send + send_displs[p], s->wire_send + send_displs[p],
                     s->wire_scounts[p]);
    }
    sr_comm_all_to_allv(comm, s->wire_send, s->wire_scounts, send_displs, s->wire_recv,
                        s->wire_rcounts, recv_displs, s->wire, NULL, NULL);
    for (int p = 0; p < n; p++)
        sr_half_unpack(s->wire, s->wire_recv + recv_displs[p], recv + recv_displs[p],
                       s->wire_rcounts[p]);
    SR_ASSERT(send_counts[me] == recv_counts[me]);
    memcpy(recv + recv_displs[me], send + send_displs[me], sizeof(float) * send_counts[me]);
}

void sr_wire_reduce_scatter(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send,
                            float *recv, size_t count)
{
    if (s->wire == SR_DTYPE_F32) {
        sr_comm_reduce_scatter(comm, send, recv, count, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
        return;
    }
    const int n = sr_comm_size(comm), me = sr_comm_rank(comm);
    check_fits(s, (size_t)n * count);
    for (int p = 0; p < n; p++) {
        s->wire_scounts[p] = s->wire_rcounts[p] = p == me ? 0 : count;
        s->wire_displs[p] = (size_t)p * count; /* the same for send and receive */
        sr_half_pack(s->wire, send + p * count, s->wire_send + p * count, s->wire_scounts[p]);
    }
    sr_comm_all_to_allv(comm, s->wire_send, s->wire_scounts, s->wire_displs, s->wire_recv,
                        s->wire_rcounts, s->wire_displs, s->wire, NULL, NULL);
    memset(recv, 0, sizeof(float) * count);
    for (int p = 0; p < n; p++) {
        if (p == me)
            sr_half_unpack_add(SR_DTYPE_F32, send + p * count, recv, count);
        else
            sr_half_unpack_add(s->wire, s->wire_recv + p * count, recv, count);
    }
}

void sr_wire_all_gather(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send, float *recv,
                        size_t count)
{
    if (s->wire == SR_DTYPE_F32) {
        sr_comm_all_gather(comm, send, recv, count, SR_DTYPE_F32, NULL, NULL);
        return;
    }
    const int n = sr_comm_size(comm), me = sr_comm_rank(comm);
    check_fits(s, (size_t)n * count);
    sr_half_pack(s->wire, send, s->wire_send, count);
    sr_comm_all_gather(comm, s->wire_send, s->wire_recv, count, s->wire, NULL, NULL);
    for (int p = 0; p < n; p++)
        if (p != me)
            sr_half_unpack(s->wire, s->wire_recv + p * count, recv + p * count, count);
    memcpy(recv + (size_t)me * count, send, sizeof(float) * count);
}
