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

/* The regions of the dp gradients: grad[t] (E, D) and counts[t] (E) of every
 * table of l, read and written. */
void sr_emb_dp_grads_regions(struct sr_op_regions *r, const struct sr_emb_layout *l,
                             float *const *grad, float *const *counts);

/* The ops, declared once (op_decl.h says how to read an entry). */
#define SR_OPS_EMB_DP(OP)                                                                          \
    /* For every id i of the batch (feature f, sample b, row r in table                            \
     * t = features[f].table): grad[t][r*D + c] += w_i * dpooled[b*out_dim +                       \
     * features[f].col + c] and counts[t][r] += 1, w_i the per-id weight or 1.                     \
     * Pooling is treated as sum (callers pre-scale dpooled of mean bags).                         \
     * grad and counts are (T) host arrays of device pointers, zeroed by the                       \
     * caller. Each table is summed in id order by one thread. */                                  \
    OP(emb_dp, accumulate,                                                                         \
       SR_ARG(const struct sr_emb_layout *, layout) SR_EMB_BATCH(layout, batch)                    \
       SR_IN(const float *, dpooled, SR_F32((size_t)batch->batch * layout->out_dim))               \
       SR_HOST(float *const *, grad, layout->num_tables)                                           \
       SR_HOST(float *const *, counts, layout->num_tables) SR_STREAM(s)                            \
       SR_REGIONS(sr_emb_dp_grads_regions(r, layout, grad, counts)))                               \
    /* The fused optimizer of `update` on every row r of tab with counts[r] > 0,                   \
     * with gradient row grad[r*D ..]. */                                                          \
    OP(emb_dp, apply,                                                                              \
       SR_HOST(const struct sr_emb_table *, tab, 1)                                                \
       SR_IN(const float *, grad, SR_F32((size_t)tab->rows * (size_t)tab->dim))                    \
       SR_IN(const float *, counts, SR_F32(tab->rows)) SR_EMB_UPDATE(update) SR_STREAM(s)          \
       SR_UPDATES(tab->weight, SR_F32((size_t)tab->rows * (size_t)tab->dim))                       \
       SR_UPDATES(tab->state, sr_emb_state_bytes(update->optim.kind, tab)))

struct sr_emb_dp_ops {
    SR_OPS_EMB_DP(SR_OP_MEMBER)
};
SR_OPS_EMB_DP(SR_OP_PROTO)

/* The dp ops of dev's backend, or NULL when the backend lacks them. */
const struct sr_emb_dp_ops *sr_emb_dp_ops_get(const struct sr_device *dev);

#endif
