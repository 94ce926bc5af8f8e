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
 * Device and streams: grads and tail are device memory of the communicator's
 * bound device (the CPU device when none is bound). Every copy, cast and
 * collective of a step goes on the buckets' own stream (the trainer's dense
 * stream), which waits (an event) for the stream backward runs on each time
 * a bucket starts; finish makes backward's stream wait for the dense
 * stream's last copy. Nothing waits on the host: the loss sum goes in and
 * comes out as device values, so grads, tail and the global loss sum hold
 * the reduced values in the caller's stream order (the dense optimizer,
 * issued next on it, reads them; the host reads them only after a sync).
 */
#ifndef SHARDREC_GRAD_BUCKETS_H
#define SHARDREC_GRAD_BUCKETS_H

#include <stddef.h>

#include "shardrec/comm.h"
#include "shardrec/tensor.h"

struct sr_grad_buckets;

/* stream: the buckets' own (dense) stream, the caller's to create and
 * destroy; grads: (n) the flat gradient block; tail: (n_tail) extra values
 * summed with the last bucket (may be NULL when n_tail is 0); layer_sizes:
 * (n_layers) sizes of the ranges backward reports, in the order it reports
 * them; dtype: the gradients' wire dtype, SR_DTYPE_F32, F16 or BF16 (else
 * abort). Every buffer is allocated here; steps allocate nothing. */
void sr_grad_buckets_init(struct sr_grad_buckets **out, sr_comm_t comm, sr_stream_t stream,
                          float *grads, size_t n, float *tail, size_t n_tail,
                          const size_t *layer_sizes, int n_layers, size_t bucket_bytes,
                          enum sr_dtype dtype);
void sr_grad_buckets_free(struct sr_grad_buckets *b);
/* Start of a step: nothing is finished. */
void sr_grad_buckets_begin(struct sr_grad_buckets *b);
/* The range [offset, offset+count) of grads is final once stream s reaches
 * this point (backward order). */
void sr_grad_buckets_ready(struct sr_grad_buckets *b, size_t offset, size_t count, sr_stream_t s);
/* After backward (issued on s, as the tail and loss_sum): reduce the rest
 * with the tail and this rank's loss sum (loss_sum: 1 float, device), wait
 * on the dense stream for every bucket, write the reduced values back, and
 * the global loss sum (the sum over ranks, 1 float) to global_loss_sum
 * (device; may be loss_sum); then s waits for all of it. Stream-ordered: the
 * host does not wait for the result. */
void sr_grad_buckets_finish(struct sr_grad_buckets *b, const float *loss_sum,
                            float *global_loss_sum, sr_stream_t s);
/* Buckets per step. */
int sr_grad_buckets_count(const struct sr_grad_buckets *b);
/* Collective calls per step: one per bucket (fp32 all-reduce), two when
 * compressed (all-to-all-v + all-gather). */
int sr_grad_buckets_calls(const struct sr_grad_buckets *b);
/* The dtype in use (F32 on one rank whatever was asked). */
enum sr_dtype sr_grad_buckets_dtype(const struct sr_grad_buckets *b);

#endif
