/*
 * Bucketed all-reduce of the dense gradients (data parallelism).
 *
 * The DLRM's gradients live in one flat block. Backward finishes layers from
 * the last top layer down to bottom layer 0, i.e. from the end of the block
 * towards its start, so the finished part is always one contiguous range
 * [lo, n). Whenever that range has grown by at least `bucket_bytes` since the
 * last bucket, a non-blocking all-reduce (SUM) of the new part starts on the
 * dense communicator while backward goes on.
 *
 * The last bucket also carries the "tail": the DP tables' gradients and touch
 * counts and the step's summed loss. It is staged into one buffer:
 *
 *   staging = [ grads[0 .. rest) | tail (n_tail floats) | loss ]
 *
 * so the number of all-reduce calls per step equals the number of buckets,
 * known at init (sr_grad_buckets_count). Gradients are summed, never
 * averaged: the loss is already scaled by the global batch.
 *
 * Compressed (dtype fp16/bf16, DESIGN.md "Distribution"): the comm layer does
 * not reduce 16-bit values, so each bucket is an all-to-all-v of rounded
 * blocks, a local fp32 sum of this rank's block, and an all-gather of the
 * rounded sums: two calls per bucket (sr_grad_buckets_calls). The tail and
 * the loss ride in the last bucket's all-to-all-v as exact fp32 bits and are
 * summed in fp32 on every rank in rank order: they are never rounded. All
 * replicas end with the same gradient bits. With one rank nothing travels
 * and the dtype is ignored (fp32). The exchanges are those of
 * shardrec/comm_compressed.h; see grad_buckets.c for the layout.
 *
 * Device and stream: grads and tail are device memory of the communicator's
 * bound device (the CPU device when none is bound). Every copy and cast of a
 * step is a device op on its default stream, after the work that produced
 * the gradients there; the host does not wait for the device before issuing
 * a bucket, and finish does not wait either: the loss sum goes in and comes
 * out as device values, so grads, tail and the global loss sum hold the
 * reduced values in stream order (the dense optimizer, issued next on the
 * same stream, reads them; the host reads them only after a sync). The one
 * host wait left is the communicator's: a host-memory communicator (single,
 * MPI) waits for the stream before a collective reads its send buffer.
 */
#ifndef SHARDREC_GRAD_BUCKETS_H
#define SHARDREC_GRAD_BUCKETS_H

#include <stddef.h>

#include "shardrec/comm.h"
#include "shardrec/tensor.h"

struct sr_grad_buckets;

/* grads: (n) the flat gradient block; tail: (n_tail) extra values summed with
 * the last bucket (may be NULL when n_tail is 0); layer_sizes: (n_layers)
 * sizes of the ranges backward reports, in the order it reports them; dtype:
 * the gradients' wire dtype, SR_DTYPE_F32, F16 or BF16 (else abort). Every
 * buffer is allocated here; steps allocate nothing. */
void sr_grad_buckets_init(struct sr_grad_buckets **out, sr_comm_t comm, float *grads, size_t n,
                          float *tail, size_t n_tail, const size_t *layer_sizes, int n_layers,
                          size_t bucket_bytes, enum sr_dtype dtype);
void sr_grad_buckets_free(struct sr_grad_buckets *b);
/* Start of a step: nothing is finished. */
void sr_grad_buckets_begin(struct sr_grad_buckets *b);
/* The range [offset, offset+count) of grads is final (backward order). */
void sr_grad_buckets_ready(struct sr_grad_buckets *b, size_t offset, size_t count);
/* After backward: reduce the rest with the tail and this rank's loss sum
 * (loss_sum: 1 float, device), make the stream wait for every bucket, write
 * the reduced values back, and the global loss sum (the sum over ranks, 1
 * float) to global_loss_sum (device; may be loss_sum). Stream-ordered: the
 * host does not wait for the result. */
void sr_grad_buckets_finish(struct sr_grad_buckets *b, const float *loss_sum,
                            float *global_loss_sum);
/* Buckets per step. */
int sr_grad_buckets_count(const struct sr_grad_buckets *b);
/* Collective calls per step: one per bucket (fp32 all-reduce), two when
 * compressed (all-to-all-v + all-gather). */
int sr_grad_buckets_calls(const struct sr_grad_buckets *b);
/* The dtype in use (F32 on one rank whatever was asked). */
enum sr_dtype sr_grad_buckets_dtype(const struct sr_grad_buckets *b);

#endif
