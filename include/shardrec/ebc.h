/*
 * Embedding bag collection (EBC): T tables and the map from F features to
 * them. A KJT over the F features goes in; pooled embeddings come out, one row
 * per sample, the features' columns side by side in the config's feature
 * order:
 *
 *   pooled (B, Σ D):  | f0: D(t(f0)) cols | f1: D(t(f1)) cols | ... |
 *
 * Several features may share a table (each has its own columns). A bag pools
 * by sum (with optional per-id weights) or by mean (divided by the bag
 * length); an empty bag pools to 0. Per-id weights with mean pooling are a
 * config error, as in PyTorch.
 *
 * Backward merges the duplicate ids of each table into per-row gradients and
 * applies the fused sparse optimizer (optim.h) to the touched rows in place;
 * no [E, D] gradient is ever formed, and the work of a step is O(N D), not
 * O(E). Forward and backward allocate nothing: every workspace is sized at
 * init for max_batch samples and max_values ids. Results are bit-identical
 * across reruns.
 *
 * Memory: the EBC owns its weights, optimizer state and workspaces, all on its
 * device; pooled and dpooled are the caller's, on the same device. The KJT's
 * arrays are the device's too (a batch's device twin, batch.h: on the
 * immediate CPU device, its host batch), its length_per_key host metadata
 * (kjt.h). The CPU device runs everything synchronously; on other devices
 * forward/backward are ordered on the device's default stream.
 */
#ifndef SHARDREC_EBC_H
#define SHARDREC_EBC_H

#include <stdint.h>

#include "shardrec/device.h"
#include "shardrec/kjt.h"
#include "shardrec/optim.h"
#include "shardrec/table_config.h"

struct sr_ebc;

/* Create an EBC on `dev`: validates cfg (sr_ebc_config_validate) and the
 * optimizer (NULL means SGD), max_batch >= 1, 0 <= max_values < 2^31; then
 * allocates weights (E, D) per table, optimizer state and all workspaces for
 * up to max_batch samples and max_values ids, and initialises weights as the
 * DLRM reference does, uniform(-sqrt(1/E), sqrt(1/E)), element (r, c) drawn
 * as sr_rng_uniform(seed, sr_rng_stream_of("emb.<table name>.weight"),
 * r * D + c), so any rank can initialise any row. Optimizer state starts at
 * optim->initial_accumulator (adagrad kinds) or 0 (adam). The config is
 * copied. Returns SR_OK and *out, or an error status (then *out is NULL).
 * Running out of memory aborts. */
int sr_ebc_init(struct sr_ebc **out, struct sr_device *dev, const struct sr_ebc_config *cfg,
                const struct sr_optim_config *optim, int max_batch, int64_t max_values,
                uint64_t seed);
void sr_ebc_free(struct sr_ebc *ebc); /* NULL ok */

/* Σ over features of their table's D: the width of pooled. */
int sr_ebc_out_dim(const struct sr_ebc *ebc);

/* Pool kjt into pooled (B, Σ D) row-major, B = kjt->stride, and keep the ids
 * for sr_ebc_backward. The KJT's data must already be checked and its ids in
 * range: that is the loader's work, on the host (sr_kjt_validate, then
 * sr_kjt_apply_id_policy with each table's rows and policy; the trainer's
 * batches do both in sr_batch_check_ids), because forward never reads ids or
 * lengths on the host. It reads the per-feature id counts from
 * kjt->length_per_key (host memory; sr_kjt_fill_length_per_key), or, when
 * that is NULL, from the offsets, which must then be host-addressable (host
 * memory, or a host-visible device's; otherwise that aborts).
 * Checks, each returning an error status with pooled untouched (SR_ERR_INVALID_ARG):
 * num_keys == F and keys (when present) equal to the config's feature names
 * in order, B <= max_batch, N <= max_values, arrays present, weights present
 * while a feature's table pools by mean (naming the table). After forward
 * returns the caller may reuse the KJT. No allocation. Stream-ordered on
 * `stream`: the caller orders it after the KJT's device arrays are written
 * and reads pooled after it. */
int sr_ebc_forward(struct sr_ebc *ebc, struct sr_kjt *kjt, float *pooled, sr_stream_t stream);

/* As sr_ebc_forward, without keeping the ids (evaluation): the ids kept by
 * the last sr_ebc_forward stay valid for its backward. */
int sr_ebc_forward_eval(struct sr_ebc *ebc, struct sr_kjt *kjt, float *pooled,
                        sr_stream_t stream);

/* dpooled (B, Σ D), B of the last sr_ebc_forward: the gradient of the loss
 * w.r.t. pooled. Merges duplicate ids per table and applies the fused
 * optimizer with learning rate lr at global step `step` (from 1; adam's bias
 * correction) to the touched rows. Consumes the kept ids: calling it without
 * a preceding successful sr_ebc_forward aborts. No allocation. Issued on
 * `stream`, which the caller orders after dpooled's producer and the
 * forward; the next forward's stream must wait for it. */
void sr_ebc_backward(struct sr_ebc *ebc, const float *dpooled, float lr, int64_t step,
                     sr_stream_t stream);

/* From now on, updates read the learning rate and the step from these
 * locations in the ebc's device memory when they run, not when they are
 * issued, ignoring the lr and step arguments (a stream-ordered or captured
 * step then never holds a stale value; the trainer points them at its
 * struct sr_step_scalars block, optim.h). NULL, NULL: back to the arguments. */
void sr_ebc_set_update_scalars(struct sr_ebc *ebc, const float *lr, const int64_t *step);

/* Table t's weights (E, D) row-major on the ebc's device; t in [0, T). */
float *sr_ebc_weights(struct sr_ebc *ebc, int table);
/* Table t's optimizer state on the ebc's device (layout as in
 * device/ops_embedding.h: adagrad (E, D), rowwise adagrad (E), adam m (E, D)
 * then v (E, D)); NULL under SGD. */
float *sr_ebc_optim_state(struct sr_ebc *ebc, int table);
/* The EBC's own copy of its config. */
const struct sr_ebc_config *sr_ebc_config(const struct sr_ebc *ebc);
const struct sr_optim_config *sr_ebc_optim(const struct sr_ebc *ebc);
/* Column of feature f's first pooled value. */
int sr_ebc_feature_col(const struct sr_ebc *ebc, int feature);

#endif
