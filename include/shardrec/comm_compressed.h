/*
 * Compressed exchanges (DESIGN.md "Distribution"): collectives whose payload
 * travels as fp16 or bf16 and is summed in fp32 on arrival. The comm layer
 * moves 16-bit values but never reduces them; this module packs with the
 * device's cast op (device/ops_cast.h), issues the plain collective, and
 * widens or sums what arrives with the cast op again, all on the caller's
 * stream. It is the one place that does so: the output dist's pooled
 * embeddings (embed/output_wire.c) and the dense gradient buckets
 * (train/grad_buckets.c) both call it.
 *
 *   all-to-all-v     pack the blocks for the other ranks, exchange, widen
 *                    them; my own block is copied in fp32 and never travels
 *   reduce-scatter   an all-to-all-v of the rounded blocks, then my block
 *                    summed in fp32 over sources in rank order, my own
 *                    contribution unrounded: one collective, counted as an
 *                    all-to-all-v; W-1 roundings at most per value
 *   all-gather       pack my block, gather, widen; my own block either stays
 *                    fp32 (SR_COMPRESSED_OWN_EXACT) or comes back rounded
 *                    like everyone's (SR_COMPRESSED_OWN_ROUNDED), so that all
 *                    replicas hold the same bits
 *
 * A compressed all-reduce is a reduce-scatter plus an all-gather: two calls
 * (train/grad_buckets.c). Self-blocks are sent with count 0, so the counters
 * show 2 bytes per element to each other rank and nothing to oneself. With
 * dtype SR_DTYPE_F32 the plain forms are the comm.h collectives.
 *
 * Wire buffers: a struct sr_compressed holds two (send, recv) of `cap` wire
 * elements, in the memory the communicator asks for (sr_comm_memory), laid
 * out as the fp32 buffers they stand for, and three (W) scratch arrays for
 * the collectives' counts. sr_compressed_init allocates and zeroes them
 * (the owner frees them with sr_compressed_free); sr_compressed_view wraps
 * buffers the caller sized and owns. Exchanges allocate nothing. An exchange
 * that needs more than `cap` aborts with both sizes.
 *
 * Streams: every function is stream-ordered on `stream` (NULL: the default
 * stream) of x->dev. Casts are device ops on that stream; the collective
 * reads the packed send buffer after them (the communicator waits for the
 * stream when it is bound to x->dev, sr_comm_bind_device; otherwise this
 * module synchronises the stream first), and the casts on arrival run after
 * the collective has completed (sr_comm_stream_wait, or a host wait when the
 * communicator is bound to no device or another). Results are therefore
 * ready when the stream says so, not when the call returns: read them on the
 * host only after sr_dev_sync. Inputs must stay untouched until then.
 *
 * Split calls: *_start packs and starts the collective without waiting for
 * it (so backward can go on while it travels); *_end makes the stream wait
 * for it and issues the casts on arrival. Every start must be followed by
 * its end, with no other exchange on the same struct in between, and every
 * rank must issue the same calls in the same order (comm.h). A struct's
 * buffers are reused by its next exchange only after the previous one's
 * arrival has run: stream order gives it when both use the same stream
 * (the communicator touches the buffers only once the stream reaches its
 * call); a start on another stream first synchronises the stream of the
 * previous arrival on the host.
 *
 * One thread drives a struct (the one that drives its communicator).
 * Misuse (a dtype other than F32, F16, BF16; a split call in F32; a block
 * count over the capacity) aborts with the sizes.
 */
#ifndef SHARDREC_COMM_COMPRESSED_H
#define SHARDREC_COMM_COMPRESSED_H

#include <stddef.h>

#include "shardrec/comm.h"
#include "shardrec/stream.h"
#include "shardrec/tensor.h"

struct sr_device;

enum sr_compressed_own {
    SR_COMPRESSED_OWN_EXACT = 0, /* my block is copied in fp32 (never rounded) */
    SR_COMPRESSED_OWN_ROUNDED,   /* my block comes back through the wire, as everyone's */
};

struct sr_compressed {
    struct sr_device *dev;             /* runs the casts */
    enum sr_dtype dtype;               /* on the wire: F16, BF16, or F32 (plain collectives) */
    void *send, *recv;                 /* (cap) wire elements each, comm memory */
    size_t cap;                        /* wire elements per buffer */
    size_t *counts, *rcounts, *displs; /* (W) host scratch */
    int owned;                         /* 1: sr_compressed_init allocated the above */
    int device_memory;                 /* owned buffers came from sr_dev_alloc (else host) */
    int armed;                         /* an arrival may still be queued on armed_stream */
    sr_stream_t armed_stream;
    sr_comm_work_t work;               /* the collective between start and end */
    const float *own;                  /* my fp32 block (reduce-scatter, all-gather) */
    const float *exact;                /* (n_exact) fp32 riding unrounded */
    size_t count, msg, own_n, n_exact; /* the started exchange's shape */
};

/* Allocate wire buffers of `cap` elements of dtype (none for F32) and the
 * scratch for comm's size, zeroed, in comm's memory on dev. */
void sr_compressed_init(struct sr_compressed *x, sr_comm_t comm, struct sr_device *dev,
                        enum sr_dtype dtype, size_t cap);
/* Release what init allocated; a view or a zeroed struct is a no-op. */
void sr_compressed_free(struct sr_compressed *x);
/* Wrap buffers the caller owns: send, recv (cap wire elements each; may be
 * NULL for F32), counts, rcounts, displs (W size_t each). */
struct sr_compressed sr_compressed_view(struct sr_device *dev, enum sr_dtype dtype, void *send,
                                        void *recv, size_t cap, size_t *counts, size_t *rcounts,
                                        size_t *displs);

/* ---- plain forms: each is one collective (arguments as comm.h's, fp32 buffers) -- */

/* Element counts and displacements as sr_comm_all_to_allv's; the wire buffers
 * use the same displacements, so they must reach past every block. */
void sr_compressed_all_to_allv(struct sr_compressed *x, sr_comm_t comm, const float *send,
                               const size_t *send_counts, const size_t *send_displs, float *recv,
                               const size_t *recv_counts, const size_t *recv_displs,
                               sr_stream_t stream);
/* send: (W, count); recv (count): the fp32 sum of block `rank` of every send. */
void sr_compressed_reduce_scatter(struct sr_compressed *x, sr_comm_t comm, const float *send,
                                  float *recv, size_t count, sr_stream_t stream);
/* recv: (W, count), block p from rank p; mine is copied exact (OWN_EXACT). */
void sr_compressed_all_gather(struct sr_compressed *x, sr_comm_t comm, const float *send,
                              float *recv, size_t count, sr_stream_t stream);

/* ---- split forms (F16 / BF16 only) ------------------------------------------------ */

/* send: n <= W * count fp32 values in W blocks of `count` (block p is
 * [p*count, min(n, (p+1)*count)); short or empty last blocks travel padded
 * with the zeros init wrote). exact: (n_exact) fp32 values (NULL when 0)
 * appended unrounded to every message, summed exactly in rank order by end.
 * Needs W * (count + 2 * n_exact) wire elements. */
void sr_compressed_reduce_scatter_start(struct sr_compressed *x, sr_comm_t comm, const float *send,
                                        size_t n, size_t count, const float *exact, size_t n_exact,
                                        sr_stream_t stream);
/* recv: (count) my block's fp32 sum (past my block's length: 0); exact_sum:
 * (n_exact) every rank's exact values summed in rank order (NULL when 0). */
void sr_compressed_reduce_scatter_end(struct sr_compressed *x, sr_comm_t comm, float *recv,
                                      float *exact_sum, sr_stream_t stream);
/* send: (count) my block. Needs W * count wire elements. */
void sr_compressed_all_gather_start(struct sr_compressed *x, sr_comm_t comm, const float *send,
                                    size_t count, sr_stream_t stream);
/* recv: the first n <= W * count values of every rank's block in rank order. */
void sr_compressed_all_gather_end(struct sr_compressed *x, sr_comm_t comm, float *recv, size_t n,
                                  enum sr_compressed_own own, sr_stream_t stream);

#endif
