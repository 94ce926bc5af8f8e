/*
 * Sharded embedding bag collection: the EBC of ebc.h with its tables split
 * over W ranks by a plan (plan.h). Every rank calls each function with its
 * own B samples; the pooled output is, as in sr_ebc, (B, Σ D) in the config's
 * feature order whatever the plan, and equals what one sr_ebc would compute
 * on the global batch (within float summation order).
 *
 * One forward (DESIGN.md steps 3-5), every collective through comm.h:
 *
 *   input dist   bucketize each id to its owner shard; one all-to-all-v of
 *                counts (per peer: ids per slot it owns, then flags; int64)
 *                and ONE all-to-all-v of 4-byte words carrying, per
 *                destination, for every slot (feature, shard) it owns:
 *                B lengths, then the ids (uint32
 *                shard-local rows; 2 words each when a shard has >= 2^32
 *                rows), then the per-id weights if the batch has them
 *   lookup       each owner pools its received bags with dev->emb (sum
 *                pooling, local shard tables) and keeps the ids
 *   output dist  tw + cw: one all-to-all-v of pooled blocks (sparse comm)
 *                rw:      one reduce-scatter of partial sums (sparse comm)
 *                twrw:    reduce-scatter in the node (node comm), then an
 *                         all-to-all-v among same-local-rank ranks (cross)
 *                dp:      nothing (local lookup on the replica)
 *                then mean bags are divided by their full length; empty -> 0
 *
 * Backward (steps 8-9), dpooled unscaled: mean bags are scaled by 1/length at
 * the sample's rank, then tw+cw all-to-all-v, rw all-gather, twrw cross
 * all-to-all-v then node all-gather; no ids travel. Owners merge duplicates
 * and apply the fused optimizer in place. dp tables form their (E, D)
 * gradient and per-row touch counts in one flat buffer: the trainer
 * all-reduces it (SUM) with the dense buckets and calls
 * sr_sharded_ebc_dp_update.
 *
 * Collectives per step, any number of tables, only for types present in the
 * plan: forward 2 (input) + 1 (tw/cw) + 1 (rw) + 2 (twrw); backward 1 + 1 + 2.
 * Hybrid tables (plan.h) add one small counts exchange beside the counts
 * (their bags with cold ids per owner) and one all-to-all-v each way: an
 * owner sends a bag's pooled row only when the bag holds cold ids in its
 * block (the rest of the feature's vector is the local replica's); their
 * hot rows' gradient rides in the dp gradient buffer.
 * With a compressed pooled dtype (comms.pooled_dtype fp16/bf16) the counts
 * are the same, rw's and twrw's forward reduce-scatter being counted as
 * all-to-all-v, and the output dist's bytes are half of fp32's.
 *
 * Memory: every buffer is sized at init for B samples and max_values local
 * ids (worst case: all ids of a feature on one owner); forward and backward
 * allocate nothing. Needs a host-visible device (the CPU) for now.
 *
 * Stages (TorchRec's awaitables). forward and backward are compositions of
 * stages over a batch context (struct sr_sharded_ebc_batch): everything one
 * batch writes from its input dist to its update (counts, sent and received
 * ids, local batches, kept ids, pooled blocks, output- and gradient-dist
 * buffers, work handles). The EBC holds what batches share: tables,
 * optimizer state, plan, communicators, the dp gradient buffer and the
 * compressed wire staging. forward and backward use a context of the EBC's
 * own; sr_sharded_ebc_batch_init makes more, so that a pipeline can have
 * batch i+1's input dist in flight while batch i trains:
 *
 *   stage                      collectives (comm.h)           span (trace.h)
 *   input_dist_counts_start    counts all-to-all-v, started   input_dist.counts
 *   input_dist_counts_wait     host waits: the step's one     input_dist.counts
 *                              host sync (the host sizes the
 *                              data exchange from the counts)
 *   input_dist_data_start      data all-to-all-v, started     input_dist.data
 *   input_dist_data_wait       (stream waits for it)          input_dist.data
 *   lookup                     none: owners pool, keep ids    lookup
 *   output_dist_start          tw+cw, rw, twrw node level     output_dist
 *   output_dist_wait           twrw cross level; pooled out   output_dist
 *   grad_dist_start            tw+cw, rw, twrw cross level    emb_grad_dist
 *   grad_dist_wait             twrw node level                emb_grad_dist
 *   update                     none: fused optimizer on the   (the caller's)
 *                              owners; dp: its gradient
 *
 * Streams: every stage takes the stream it runs on, and issues its device
 * work and its collectives there. A batch's stages follow each other
 * whatever streams they run on: each stage's stream waits (an event of the
 * context) for the batch's previous stage when that ran on another. What
 * comes from outside the batch is the caller's to order: the stream of
 * counts_start must be after the KJT's producer, grad_dist_start's after
 * dpooled's; and a stream other than output_dist_wait's that reads pooled
 * waits for it first (sr_sharded_ebc_batch_wait). A trainer runs the
 * exchanges on a sparse stream and lookup and update on its compute stream.
 * A start issues its collectives non-blocking; its wait completes them on
 * its stream (sr_comm_stream_wait when the communicator is bound to the
 * device, else a host wait). Results are stream-ordered: read pooled on the
 * host only after a sync. With a compressed wire (fp16/bf16) the output and
 * gradient dists run each exchange whole on the stream (the wire staging is
 * shared), so their start may block the host while the previous exchange
 * arrives.
 *
 * Ordering rules (every rank):
 *  1. Each batch's stages run in the table's order, each once (asserted:
 *     misuse aborts). After update the context is free for the next batch.
 *     Its counts_start may also come at any point where none of its
 *     collectives is in flight (after counts_wait and before data_start, or
 *     any time after data_wait): the batch held there is dropped, as
 *     forward-only evaluation does.
 *  2. Across batches any interleaving of stage calls is allowed, but every
 *     rank must make the same calls in the same order (the collectives of
 *     each communicator then match; NCCL and blocking MPI deadlock
 *     otherwise). Not checked: a rank-dependent order hangs or fails in the
 *     transport.
 *  3. lookup reads the tables that update writes, and update leaves the dp
 *     gradient in the one buffer of sr_sharded_ebc_dp_grad_buffer. To train
 *     as sequential steps do, issue batch i+1's lookup after batch i's
 *     update (and its dp all-reduce and sr_sharded_ebc_dp_update); batch
 *     i+1's input dist may run any time before that, e.g.
 *
 *        i.counts .. i.data_wait, i.lookup, i.output_dist_start/wait
 *        i+1.counts_start/wait, i+1.data_start/wait
 *        i.grad_dist_start/wait, i.update, dp all-reduce + dp_update
 *        i+1.lookup, i+1.output_dist_start/wait, ...
 *
 *     gives the pooled values and weights of the sequential steps, bit for
 *     bit. A lookup issued before an earlier batch's update reads the weights
 *     before that update (allowed; not sequential training).
 *  4. A batch's KJT must stay unchanged from its counts_start until its
 *     data_wait returns; dpooled from grad_dist_start until grad_dist_wait.
 *  5. Free every context (sr_sharded_ebc_batch_free) before the EBC, with no
 *     collective of it in flight (aborts otherwise).
 *
 * Local mode (sr_sharded_ebc_is_local). A one-rank world (W = 1) whose plan
 * puts every table whole in the tw/cw group, the group listing every
 * feature in the config's order (what sr_plan_uniform(tw, 1, 1) gives: a
 * one-rank trainer's plan without --plan or --sharding) has nothing to
 * exchange, and the EBC then computes what sr_ebc computes, bit for bit,
 * with sr_ebc's device work and nothing more:
 *
 *   counts_start .. data_wait   host only: no device work, no host sync,
 *                               no event; the ids per feature come from the
 *                               KJT's length_per_key (host metadata), as
 *                               sr_ebc_forward's; a flagged batch returns
 *                               from counts_wait as above
 *   lookup                      pools the KJT's own device arrays into the
 *                               bound pooled (below), mean bags divided as
 *                               sr_ebc does; else into the context's block
 *   output_dist_start / wait    host only with a bound pooled; else wait
 *                               copies the block into pooled
 *   grad_dist_start / wait      host only with a bound dpooled; else start
 *                               copies dpooled into the context
 *   update                      the fused optimizer from dpooled
 *
 * The stages without device work record and wait for no event, and a
 * batch's counts_start starts a fresh chain of events, so the stages from
 * lookup to update can be captured in a CUDA graph (no wait on an event
 * recorded outside it). What that leaves to the caller: the KJT stays
 * unchanged until lookup (not only data_wait), a bound dpooled until
 * update, and a batch's lookup comes after the context's previous update
 * on the device (rule 3's order already gives it; a caller whose update
 * runs on another stream joins that stream back first). No collective is
 * ever in flight, so counts_start may begin a batch in a context at any
 * stage (a graph replay leaves the host's record of its stages behind).
 * Free a context (and bind or unbind one) only when the streams its stages
 * ran on are done: its event may have been recorded inside a capture.
 */
#ifndef SHARDREC_SHARDED_EBC_H
#define SHARDREC_SHARDED_EBC_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/comm.h"
#include "shardrec/ebc.h"
#include "shardrec/plan.h"

/* sparse: every rank (input dist, tw/cw/rw output dist; W = its size,
 * L = its local size, rank r on node r / L). node and cross: the ranks of my
 * node and the ranks of my local rank on every node (sr_comm_split_node /
 * sr_comm_split_cross of sparse); needed only when the plan has twrw tables,
 * else may be NULL. Use communicators of their own, not the dense one. */
struct sr_sharded_ebc_comms {
    sr_comm_t sparse;
    sr_comm_t node;
    sr_comm_t cross;
    /* Wire dtype of pooled embeddings (forward) and their gradients
     * (backward): SR_DTYPE_F32 (0, the default), SR_DTYPE_F16 or
     * SR_DTYPE_BF16. Compressed payloads are rounded to nearest even
     * (half.h) and summed in fp32 on arrival, so rw's reduce-scatter and
     * twrw's node reduce-scatter become all-to-all-v calls plus a local fp32
     * sum (one rounding per other contributor). A rank's own block never
     * travels and stays fp32. The calls per step are unchanged; bytes halve. */
    enum sr_dtype pooled_dtype;
    /* The input dist's (counts and ids): the same members as sparse, its
     * own communicator so that a later batch's input dist never queues
     * behind this batch's output dist; NULL: sparse carries it too. */
    sr_comm_t input;
};

/* Work of the last forward on this rank (for tests and the run summary): with
 * several batch contexts, of the last counts_wait (ids, ranks_ended) and the
 * last lookup (lookup_ids). */
struct sr_sharded_ebc_stats {
    int64_t ids_sent;     /* ids this rank sent to owners (self included) */
    int64_t ids_received; /* ids this rank received as an owner (self included) */
    int64_t lookup_ids;   /* ids this rank pooled: received ones plus its dp ids */
    int id_words;         /* 4-byte words per id on the wire: 1 or 2 */
    int ranks_ended;      /* ranks whose data had ended at the last forward (0: none) */
    int first_ended;      /* the lowest of them */
};

/* What forward returns on every rank at the step where any rank's data ended. */
#define SR_SHARDED_EBC_END_OF_DATA 1

struct sr_sharded_ebc;

/* Create this rank's part: validates cfg, the plan (sr_plan_validate with W
 * and L of comms->sparse), the optimizer (NULL: SGD), B >= 1 and max_values;
 * SR_ERR_INVALID_ARG on any, naming the table. max_values bounds a batch's
 * ids; feature_max_values (F entries, or NULL: max_values each) bounds each
 * feature's, and sizes what a rank receives by the features of the tables it
 * owns (a batch over a bound is refused as forward says). Allocates the local shards,
 * initialised as rows of the global tables are (ebc.h: uniform(-sqrt(1/E),
 * sqrt(1/E)) drawn at the global (row, col)), so any plan starts from the
 * same model as sr_ebc_init with the same seed. Not collective (no
 * communication). Running out of memory aborts. */
int sr_sharded_ebc_init(struct sr_sharded_ebc **out, struct sr_device *dev,
                        const struct sr_sharded_ebc_comms *comms, const struct sr_ebc_config *cfg,
                        const struct sr_plan *plan, const struct sr_optim_config *optim, int B,
                        int64_t max_values, const int64_t *feature_max_values, uint64_t seed);
void sr_sharded_ebc_free(struct sr_sharded_ebc *s); /* NULL ok; not collective */

int sr_sharded_ebc_out_dim(const struct sr_sharded_ebc *s); /* Σ D over features */
const struct sr_ebc_config *sr_sharded_ebc_config(const struct sr_sharded_ebc *s);

/* Collective over the comms: the stages from input_dist_counts_start to
 * output_dist_wait on the EBC's own context. kjt: this rank's B samples (stride must be B;
 * offsets filled, ids checked and in range as sr_ebc_forward requires: the
 * loader's sr_kjt_validate and sr_kjt_apply_id_policy), its shape checked as
 * sr_ebc_forward checks it, and each feature's ids (length_per_key, needed
 * when init bounded a feature) against init's bounds. A rank whose KJT
 * is rejected still takes part in the count exchange, flagged: then EVERY
 * rank returns SR_ERR_DATA (the rejecting rank with its own message, the
 * others naming it) and none hangs; pooled is then undefined. On success
 * pooled (B, Σ D) holds this rank's samples and the ids are kept for
 * backward. No allocation. */
int sr_sharded_ebc_forward(struct sr_sharded_ebc *s, struct sr_kjt *kjt, float *pooled,
                           sr_stream_t stream);

/* Collective: what a rank without a batch this step calls in place of
 * sr_sharded_ebc_forward, so that the others stop with it instead of waiting
 * for it. It takes part in the count exchange, flagged with `why`:
 * SR_SHARDED_EBC_END_OF_DATA (this rank's data ended) or a negative status
 * (its batch failed). At that step every rank's forward, and this call,
 * return: if any rank failed, SR_ERR_DATA naming it (the failing rank its own
 * status); otherwise SR_SHARDED_EBC_END_OF_DATA, the stats saying which ranks
 * ran out (ranks_ended, first_ended). The ranks that had a batch drop it. */
int sr_sharded_ebc_forward_none(struct sr_sharded_ebc *s, int why, sr_stream_t stream);

/* Collective: grad_dist_start, grad_dist_wait and update on the EBC's own
 * context. dpooled (B, Σ D): d loss / d pooled of the last forward's
 * samples, unscaled (the loss already averages over the global batch).
 * Sends the gradients to the owners, which apply the fused optimizer (lr, step
 * from 1) to their touched rows; dp tables only form their gradient (see
 * below). Calling it without a successful forward aborts. No allocation. */
void sr_sharded_ebc_backward(struct sr_sharded_ebc *s, const float *dpooled, float lr, int64_t step,
                             sr_stream_t stream);

/* ---- stages (see "Stages" above) ----------------------------------------------- */

struct sr_sharded_ebc_batch;

/* A batch context of s with every buffer at its worst-case size (allocates;
 * call before the training loop). Not collective. SR_ERR_INVALID_ARG when s
 * is NULL; running out of memory aborts. */
int sr_sharded_ebc_batch_init(struct sr_sharded_ebc_batch **out, struct sr_sharded_ebc *s);
/* NULL ok; not collective; aborts when one of its collectives is in flight. */
void sr_sharded_ebc_batch_free(struct sr_sharded_ebc_batch *b);

/* Collective (sparse). Checks kjt as sr_sharded_ebc_forward does (ids
 * brought into range, hashed ids rewritten), bucketizes it into b and starts
 * the counts exchange. A rejected KJT still takes part, flagged (the error
 * message is set now, the status returned by counts_wait). */
void sr_sharded_ebc_input_dist_counts_start(struct sr_sharded_ebc *s,
                                            struct sr_sharded_ebc_batch *b, struct sr_kjt *kjt,
                                            sr_stream_t stream);
/* The same for a rank without a batch (sr_sharded_ebc_forward_none's `why`). */
void sr_sharded_ebc_input_dist_counts_start_none(struct sr_sharded_ebc *s,
                                                 struct sr_sharded_ebc_batch *b, int why,
                                                 sr_stream_t stream);
/* Blocks until the counts are in. Returns SR_OK (b goes on to data_start),
 * or, on every rank at once, what sr_sharded_ebc_forward returns when a rank
 * flagged its batch (SR_ERR_DATA; the flagging rank its own status) or its
 * data ended (SR_SHARDED_EBC_END_OF_DATA); b is then free again. */
int sr_sharded_ebc_input_dist_counts_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                          sr_stream_t stream);
/* Collective (sparse): packs the ids and starts the data exchange. */
void sr_sharded_ebc_input_dist_data_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                          sr_stream_t stream);
/* Completes it and lays out the owners' local batches (stream-ordered). */
void sr_sharded_ebc_input_dist_data_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                         sr_stream_t stream);
/* Not collective: the owners pool b's ids with the current tables and keep
 * the ids for the update (stream-ordered). */
void sr_sharded_ebc_lookup(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                           sr_stream_t stream);
/* Collective: starts sending the pooled blocks to the samples' ranks. */
void sr_sharded_ebc_output_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                      sr_stream_t stream);
/* Collective (twrw's second level): completes the output dist; pooled (B,
 * Σ D) gets b's samples, as sr_sharded_ebc_forward's (stream-ordered). */
void sr_sharded_ebc_output_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                     float *pooled, sr_stream_t stream);
/* Collective: dpooled (B, Σ D), as sr_sharded_ebc_backward's, starts to the
 * owners. */
void sr_sharded_ebc_grad_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                    const float *dpooled, sr_stream_t stream);
/* Collective (twrw's second level): completes the gradient dist. */
void sr_sharded_ebc_grad_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                   sr_stream_t stream);
/* Not collective, optional, between the lookup and the update: the update's
 * first part ahead of it (the owners' kept ids grouped by row), on `stream`,
 * so that it may run beside the dense work. The caller orders `stream` after
 * the lookup and the update after `stream`'s work (the update on `stream`,
 * or a wait); the batch's stage order is left alone. The update then skips
 * that part. Same results with or without it. */
void sr_sharded_ebc_group_ids(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                              sr_stream_t stream);
/* Not collective: the fused optimizer (lr, step from 1) on the owners'
 * touched rows; dp tables only form their gradient (below). b is free again. */
void sr_sharded_ebc_update(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float lr,
                           int64_t step, sr_stream_t stream);
/* Local mode (above): b's batches use the caller's pooled and dpooled (B,
 * Σ D), device, from now on (NULL, NULL: none). output_dist_wait and
 * grad_dist_start must then be given these very pointers (aborts
 * otherwise); in local mode the lookup writes pooled and the update reads
 * dpooled, with no copy of the pooled block, and a context bound to both
 * frees its own two blocks (unbinding allocates them again: bind before
 * the training loop). Elsewhere it changes nothing. Not collective. */
void sr_sharded_ebc_batch_bind(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                               float *pooled, const float *dpooled);
/* 1 when s runs in local mode (above). */
int sr_sharded_ebc_is_local(const struct sr_sharded_ebc *s);
/* Local mode: table t's weights (E, D) on the device, whole, as
 * sr_ebc_weights (aborts in any other mode: sr_sharded_ebc_gather_table). */
float *sr_sharded_ebc_local_weights(struct sr_sharded_ebc *s, int table);
/* Make `stream` wait for b's last stage issued so far (its outputs, such as
 * output_dist_wait's pooled, are then ready there). Not collective. */
void sr_sharded_ebc_batch_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                               sr_stream_t stream);

/* The dp tables' gradient of the last backward, in one flat fp32 buffer on
 * the device, owned by s: per dp table in table order [ grad (E, D) | touch
 * counts (E) ]. *n = its length (0 and NULL when the plan has no dp table).
 * The caller all-reduces it (SUM, in place) across the ranks, then calls
 * sr_sharded_ebc_dp_update. */
float *sr_sharded_ebc_dp_grad_buffer(struct sr_sharded_ebc *s, size_t *n);
/* Apply the fused optimizer to the rows of every dp table touched anywhere
 * (count > 0), with the reduced gradient. Not collective; a no-op without dp
 * tables. */
void sr_sharded_ebc_dp_update(struct sr_sharded_ebc *s, float lr, int64_t step,
                              sr_stream_t stream);

/* From now on, every update (sr_sharded_ebc_update, _backward, _dp_update)
 * reads the learning rate and the step from these locations in the device
 * memory of s when it runs, ignoring its lr and step arguments (as
 * sr_ebc_set_update_scalars). NULL, NULL: back to the arguments. */
void sr_sharded_ebc_set_update_scalars(struct sr_sharded_ebc *s, const float *lr,
                                       const int64_t *step);

/* Collective over comms->sparse: table t's weights (E, D) assembled on rank
 * 0 into `full` (host; may be NULL on other ranks). One all-to-all-v. */
int sr_sharded_ebc_gather_table(struct sr_sharded_ebc *s, int table, float *full);

/* One table shard this rank holds, for checkpoints: its weights and its
 * optimizer state, on the device (views; s owns them). dp tables are whole
 * on every rank (shard -1). */
struct sr_sharded_ebc_shard {
    int table;           /* global table index */
    int shard;           /* index in the table's plan; -1: a dp table */
    int64_t rows;        /* rows of the shard */
    int dim;             /* its columns */
    float *weight;       /* (rows, dim) device, elements of dtype (2-byte ones for 16-bit) */
    enum sr_dtype dtype; /* the weights' storage (--emb-dtype; dp tables fp32) */
    float *state;        /* (state_floats) device, or NULL (sgd) */
    size_t state_floats; /* optimizer state values (optim.h's layout) */
};
/* The shards this rank holds, 0 <= i < sr_sharded_ebc_num_local_shards, in a
 * fixed order (the same for the same plan and rank). Not collective. */
int sr_sharded_ebc_num_local_shards(const struct sr_sharded_ebc *s);
void sr_sharded_ebc_local_shard(const struct sr_sharded_ebc *s, int i,
                                struct sr_sharded_ebc_shard *out);

/* Hybrid tables (plan.h). Their hot rows live in a replica on every rank;
 * the rows' copies in the rw shards are stale until hot_rows_out copies the
 * replica (weights and optimizer state) over them: call it, not
 * collective, stream-ordered on `stream`, before anything reads the shards
 * (sr_sharded_ebc_local_shard views, for weights files and checkpoints;
 * sr_sharded_ebc_gather_table does it itself). After writing the shards
 * (a load), hot_rows_in refreshes every replica from them: collective over
 * comms->sparse (one all-reduce per hybrid table), blocking, returns SR_OK.
 * Both are no-ops without hybrid tables. The replicas are not among the
 * local shards: the shards of a hybrid table are its rw shards. */
void sr_sharded_ebc_hot_rows_out(struct sr_sharded_ebc *s, sr_stream_t stream);
int sr_sharded_ebc_hot_rows_in(struct sr_sharded_ebc *s);

void sr_sharded_ebc_stats(const struct sr_sharded_ebc *s, struct sr_sharded_ebc_stats *out);

#endif
