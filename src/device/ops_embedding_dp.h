/*
 * Device ops of data-parallel (replicated) embedding tables, the exception of
 * DESIGN.md step 9: a dp table's gradient is formed densely, (E, D) plus a
 * per-row touch count, so that it can ride in the dense all-reduce; after the
 * reduction the same row-sparse fused optimizer as ops_embedding.h's updates
 * the rows touched anywhere in the global batch.
 *
 *   grad    (E, D) device   Σ over the ids of row r of scale_i * dpooled(bag_i)
 *   counts  (E)    device   number of ids that hit row r (fp32, exact below 2^24)
 *
 * embed/sharded_ebc.c is the caller; device/cpu/cpu_embedding_dp.c the CPU
 * backend. Data shapes are those of ops_embedding.h. Ops are stream-ordered,
 * allocate nothing and are bit-identical across reruns and thread counts.
 *
 * A device's table of them is dev->emb_dp (also sr_emb_dp_ops_get(dev)).
 */
#ifndef SHARDREC_OPS_EMBEDDING_DP_H
#define SHARDREC_OPS_EMBEDDING_DP_H

#include "device/ops_embedding.h"

struct sr_emb_dp_ops {
    /* For every id i of the batch (feature f, sample b, row r in table
     * t = features[f].table): grad[t][r*D + c] += w_i * dpooled[b*out_dim +
     * features[f].col + c] and counts[t][r] += 1, w_i the per-id weight or 1.
     * Pooling is treated as sum (callers pre-scale dpooled of mean bags).
     * grad and counts are (T) host arrays of device pointers, zeroed by the
     * caller. Each table is summed in id order by one thread. */
    void (*accumulate)(struct sr_device *dev, const struct sr_emb_layout *layout,
                       const struct sr_emb_batch *batch, const float *dpooled, float *const *grad,
                       float *const *counts, sr_stream_t s);
    /* The fused optimizer of `update` on every row r of tab with counts[r] > 0,
     * with gradient row grad[r*D ..]. */
    void (*apply)(struct sr_device *dev, const struct sr_emb_table *tab, const float *grad,
                  const float *counts, const struct sr_emb_update *update, sr_stream_t s);
};

/* The dp ops of dev's backend, or NULL when the backend lacks them. */
const struct sr_emb_dp_ops *sr_emb_dp_ops_get(const struct sr_device *dev);

#endif
