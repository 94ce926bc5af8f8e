/*
 * Private state of the sharded EBC, shared by its files:
 * sharded_ebc.c (init, dp tables), sharded_gather.c (a table onto rank 0),
 * sharded_batch.c (a batch context's buffers), sharded_stages.c (the stages
 * and forward / backward),
 * input_dist.c (ids to owners) and output_dist.c (pooled results back,
 * gradients out). Shared state (tables, optimizer state, plan, comms, wire
 * staging) is in struct sr_sharded_ebc; everything one step writes between
 * input dist and update is in its struct sr_sharded_ebc_batch.
 *
 * A slot is one (feature, shard) pair: where a feature's ids may go. Slots are
 * numbered feature-major, shards in plan order; every rank builds the same
 * list. The slots owned by rank r, in slot order, make up r's message layout
 * and its local lookup:
 *
 *   message to r (int32 words)   [ len slot a (B) | len slot b (B) | ... ]
 *                                [ ids of slot a, bag by bag | ids of b | ... ]
 *                                [ weights, same order (when present) ]
 *
 * Owners pool in groups, one per output dist (dp, tw+cw, rw, twrw, hybrid
 * cold rows). A group's local batch stacks the samples of every source rank,
 * so the pooled rows a collective sends to one rank are contiguous:
 *
 *   group batch row = perm(s) * B + b     (source rank s, its sample b)
 *   perm(s) = s                              dp (s = me only), tw+cw, rw
 *   perm(s) = (s % L) * nodes + s / L        twrw: the reduce-scatter block of
 *                                            local rank j holds sources
 *                                            {m*L + j}, node m ascending
 *
 * Hybrid tables (plan.h; sharded_hybrid.c) are made of the parts above: the
 * EBC runs on an expanded config and plan, in which a hybrid table of H > 0
 * hot rows is rw and gets a dp replica table of H rows (appended after the
 * caller's T tables), and each of its features a hot feature that looks the
 * replica up (appended after the caller's F features, its pooled columns
 * those of its feature). counts_start first splits the caller's KJT into
 * the expanded one (hybrid_split); the output dist's pieces add each hot
 * block into its cold one. The caller sees its own config throughout.
 *
 * Every per-step loop over ids, bag lengths and pooled values runs in the
 * device's sparse-dist ops (device/ops_sparse_dist.h, which also describes
 * the messages); the host sees only the counts message. The plan's tables for
 * those ops (slots, ranks, groups' slot positions and rows, the output dist's
 * column pieces) are built here at init and uploaded once.
 */
#ifndef SHARDREC_EMBED_SHARDED_INTERNAL_H
#define SHARDREC_EMBED_SHARDED_INTERNAL_H

#include "shardrec/sharded_ebc.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/ops_sparse_dist.h"

/* GROUP_HYB: hybrid tables' cold rows (rw blocks), their pooled rows sent
 * compact (ops_sparse_dist.h, struct sr_sparse_dist_compact). */
enum group_kind { GROUP_DP = 0, GROUP_A2A, GROUP_RW, GROUP_TWRW, GROUP_HYB, GROUP_COUNT };

struct slot {
    int feature, table, shard;
    int rank; /* owner */
    enum group_kind group;
    int64_t row_offset, rows;
    int col_offset, cols;
    int pos;  /* index among the slots of its owner: message order */
    int gcol; /* first column in its owner's group output */
};

/* One local lookup: shards on this rank of one group's tables, fed by its
 * slots. Fixed by the plan; a batch's data lives in a struct group_batch. */
struct group {
    enum group_kind kind;
    int active;  /* the plan has a table of this kind: its collectives run */
    int batch;   /* rows of the local batch: B (dp) or W*B */
    int out_dim; /* this rank's output columns */
    int num_tables;
    struct sr_emb_table *tables;     /* (T_g) local shards, device */
    int *table_of;                   /* (T_g) global table index */
    int *shard_of;                   /* (T_g) shard index in the table's plan */
    int64_t *row_base;               /* (T_g) global row of local row 0 */
    int *slot_of;                    /* (F_g) global slot index of local feature j (dp: feature) */
    struct sr_emb_feature *features; /* (F_g) */
    struct sr_emb_layout layout;
    size_t workspace_bytes; /* of each batch's workspace */
    int32_t *pos;           /* (F_g) device: my slot's message position */
    int32_t *row_of;        /* (W) device: perm(s) * B */
};

/* Group g's local batch of one step (in a struct sr_sharded_ebc_batch). */
struct group_batch {
    void *workspace;                           /* device: the lookup's kept ids (ops_embedding.h) */
    int64_t *offsets;                          /* (F_g * batch + 1) device */
    int64_t *values;                           /* (max_values) device */
    float *weights;                            /* (max_values) device */
    int has_weights;                           /* this step */
    int64_t num_values;                        /* this step, from the counts */
    int64_t *feature_n;                        /* (F_g) host: ids per local feature, this step */
    int64_t *feature_pos, *table_pos, *cursor; /* (F_g), (T_g + 1), (T_g) host */
    float *pooled;                             /* (batch, out_dim) device; dp: a view of od_buf */
    float *dpooled;                            /* (batch, out_dim) device; dp: the same view */
};

/* One replica: a hybrid table with H > 0 hot rows (sharded_hybrid.c). */
struct hybrid_table {
    int table;            /* the hybrid table (index in both configs) */
    int replica;          /* its dp replica table in the expanded config */
    int64_t num_hot;      /* H */
    int64_t *hot;         /* (H) host: the hot rows, ascending */
    int64_t first, count; /* my rw shard's hot rows: hot[first .. first + count) */
    int64_t *shard_rows;  /* (count) device: their rows in my shard */
};

/* The hybrid tables of the plan; all zero without them. */
struct hybrid {
    int num_tables;                        /* T_h: replicas */
    struct hybrid_table *tables;           /* (T_h) */
    int num_features;                      /* F_h: hot features */
    int expanded;                          /* cfg and plan are expanded; user_cfg is the caller's */
    struct sr_ebc_config user_cfg;         /* the caller's config (when expanded) */
    struct sr_sparse_dist_hybrid split;    /* hybrid_split's tables (device arrays in dev_meta) */
    struct sr_sparse_dist_compact compact; /* the cold rows' exchange (n_h = 0: none) */
    int32_t *compact_cols;                 /* (n_h) host: its cols */
    int32_t *hot_of;                       /* (F) host: feature f's hot feature k, or -1 */
};

/* Where a batch is in its stages (sharded_ebc.h); each stage asserts it. */
enum batch_state {
    BATCH_IDLE = 0,  /* no batch (or it was dropped) */
    BATCH_COUNTS,    /* counts exchange in flight */
    BATCH_COUNTED,   /* counts known; host metadata built */
    BATCH_DATA,      /* data exchange in flight */
    BATCH_RECEIVED,  /* local batches filled (stream-ordered) */
    BATCH_LOOKED_UP, /* owners pooled; ids kept */
    BATCH_OUTPUT,    /* output dist in flight */
    BATCH_POOLED,    /* pooled delivered; ids kept for the gradients */
    BATCH_GRADS,     /* gradient dist in flight */
    BATCH_GRADS_IN,  /* gradients at the owners */
};

/* One batch's state from input dist to update: everything a step writes,
 * sized at init (sharded_batch.c). */
struct sr_sharded_ebc_batch {
    struct sr_sharded_ebc *s;
    enum batch_state state;
    int ids_grouped;    /* group_ids ran since the lookup: the update skips the sort */
    int local_rc;       /* this rank's flag in the counts: 0, END_OF_DATA or an error */
    struct sr_kjt *kjt; /* this rank's batch, from counts start to data start; NULL: none
                           (with hybrid tables: &xkjt, the split one) */
    struct sr_kjt xkjt; /* hybrid: the KJT of F + F_h features, device arrays below */
    int32_t *x_full;    /* (F + F_h, B) device, hybrid: each bag's full length */
    float *x_weights;   /* (max_values) device, hybrid: xkjt's weights when it has them */
    /* hybrid cold rows, compact: the bags of mine with ids in each owner's
     * block per hybrid feature (sent with the counts) and the ones each
     * source sent me, (W, n_h) device and their host copies; floats of the
     * compact exchange per peer, as owner (by source) and as sample rank
     * (by owner), and the two buffers (W*B*out_hyb floats each) */
    int64_t *ne_send, *ne_recv, *ne_send_host, *ne_recv_host;
    size_t *own_counts, *own_displs, *smp_counts, *smp_displs; /* (W) host */
    int64_t own_words, smp_words;
    float *cbuf_owner, *cbuf_samples;
    int internal; /* the EBC's own (forward/backward); not counted in num_batches */

    /* input dist */
    int32_t *lens;       /* (S, B) device: ids of my sample b in slot s */
    int64_t *count_send; /* (count_words) device: the counts message */
    int64_t *count_recv; /* (W, n + 1) device: counts from each source */
    /* the host's copies of both, which the counts exchange moves and the host
     * reads: the device arrays themselves on a host-visible device, else
     * pinned host memory (input_dist.c copies in and out) */
    int64_t *count_send_host, *count_recv_host;
    size_t *send_counts, *send_displs, *recv_counts, *recv_displs; /* (W) host */
    int32_t *send_buf, *recv_buf;                                  /* device */
    size_t send_words, recv_words;                                 /* this step */
    float *scale; /* (F, B) device: 1/len of mean bags, else 1 */
    struct group_batch gb[GROUP_COUNT];

    /* output dist and gradient dist */
    float *od_buf;   /* device: [ dp pooled | a2a_buf | rw_buf | twrw_buf ] (sd_cols) */
    float *a2a_buf;  /* (B, Σ_s out_a2a(s)) view */
    float *rw_buf;   /* (B, out_rw) view */
    float *twrw_buf; /* (B, Σ_m out_twrw(m)) view */
    float *hyb_buf;  /* (B, out_hyb) view: hybrid cold rows summed over owners / their grads */
    float *twrw_mid; /* (nodes * B, out_twrw(my node)) device */

    /* collectives in flight between a start and its wait */
    sr_comm_work_t counts_work, data_work, a2a_work, rw_work, twrw_work, ne_work, hyb_work;

    /* streams: the stage running now issues its work on `stream`; `staged`
     * is recorded on `staged_on` after each stage, and the next stage's
     * stream waits for it when it is another (sharded_stages.c) */
    sr_stream_t stream;
    sr_event_t staged;
    sr_stream_t staged_on;
    int staged_any; /* staged has been recorded */

    /* local mode (sharded_local.c): the caller's buffers of
     * sr_sharded_ebc_batch_bind (NULL: none), and the dpooled the update
     * reads (the bound one, or gb[GROUP_A2A].dpooled holding a copy) */
    float *bound_pooled;
    const float *bound_dpooled;
    const float *update_dpooled;
};

struct sr_sharded_ebc {
    struct sr_device *dev;
    struct sr_sharded_ebc_comms comms;
    struct sr_ebc_config cfg; /* own copy; expanded when the plan has hybrid tables */
    struct sr_plan *plan;     /* own copy; the same */
    struct hybrid hyb;
    struct sr_optim_config optim;
    const float *lr_dev; /* sr_sharded_ebc_set_update_scalars, or NULL */
    const int64_t *step_dev;
    int W, L, nodes, rank, node, local_rank, B;
    int64_t max_values;
    int64_t *feature_cap; /* (F) the most ids of feature f in one batch: the caller's
                             bound (sr_sharded_ebc_init) or max_values */
    int caps_given;       /* 1: the caller bounded some feature below max_values */
    int out_dim;          /* Σ D */
    int *feature_col;     /* (F) first pooled column */

    int num_slots;
    struct slot *slots; /* (S) */
    int *first_slot;    /* (F) first slot of feature f; -1 for dp features */
    int64_t *block;     /* (F) rows per block (rw, twrw), else 0 */
    int *nslots_at;     /* (W) slots owned by each rank */
    int *slot_at;       /* (W, max nslots) slot indices per owner */
    int max_nslots;
    int *group_out; /* (GROUP_COUNT, W) each rank's group output width */

    struct group groups[GROUP_COUNT];

    /* sparse-dist ops and their plan tables (device arrays in dev_meta) */
    const struct sr_sparse_dist_ops *sd;
    struct sr_sparse_dist_layout sd_layout;
    struct sr_sparse_dist_cols sd_cols;
    void *dev_meta[24];
    int num_dev_meta;

    /* input dist: sizes of each batch's buffers */
    int id_words;              /* 1: uint32 shard-local rows, 2: int64 */
    int64_t *count_displ;      /* (W + 1) host: each rank's first word of the counts */
    size_t send_cap, recv_cap; /* words */

    /* output dist: sizes of each batch's buffers, shared scratch and wire */
    size_t od_off[GROUP_COUNT]; /* first float of each group's blocks in od_buf */
    size_t od_floats;           /* od_buf's extent */
    size_t twrw_mid_floats;
    size_t *a_counts, *a_displs, *b_counts, *b_displs; /* (W) scratch for all-to-all-v */
    enum sr_dtype wire;              /* pooled payload on the wire: F32, F16 or BF16 */
    uint16_t *wire_send, *wire_recv; /* (wire_cap) compressed payloads, where the sparse
                                        communicator moves data from (device memory for
                                        NCCL, else pinned host); NULL for F32 */
    int wire_on_device;              /* wire_send/recv are device memory */
    sr_event_t wire_done;            /* the last compressed exchange's end, on wire_stream
                                        (device memory only) */
    sr_stream_t wire_stream;         /* where it ran; NULL before the first */
    size_t wire_cap;
    size_t *wire_scounts, *wire_rcounts, *wire_displs; /* (W) scratch */

    /* dp */
    const struct sr_emb_dp_ops *dp_ops;
    float *dp_buf; /* flat [grad (E,D) | counts (E)] per dp table, device */
    size_t dp_len;
    float **dp_grad, **dp_counts; /* (T_dp) views into dp_buf */

    /* local mode: one rank whose only group is one A2A group holding every
     * table whole and every feature in config order (sharded_local.c) */
    int local;
    struct sr_emb_feature *local_features; /* (F) the A2A group's, mean flags set */
    struct sr_emb_layout local_layout;     /* the A2A group's layout over them */

    struct sr_sharded_ebc_batch *batch0; /* the one forward and backward use */
    int num_batches;                     /* live contexts of sr_sharded_ebc_batch_init */
    struct sr_sharded_ebc_stats stats;
};

static inline int sr_sharded_perm(const struct sr_sharded_ebc *s, enum group_kind g, int src)
{
    return g == GROUP_TWRW ? (src % s->L) * s->nodes + src / s->L : src;
}

/* A collective reads its send buffer once the device's work before it is
 * done: a communicator bound to this device waits for the stream itself
 * (comm.h); for any other, wait here. */
static inline void sr_sharded_before_collective(struct sr_sharded_ebc *s, sr_comm_t comm,
                                                sr_stream_t stream)
{
    if (sr_comm_device(comm) != s->dev)
        sr_dev_sync(s->dev, stream);
}

/* A non-blocking collective of this EBC's stages is complete for what
 * follows on `stream`: a communicator bound to the device makes the stream
 * wait (no host block); any other is waited for here. NULL: no-op. */
static inline void sr_sharded_complete(struct sr_sharded_ebc *s, sr_comm_t comm,
                                       sr_comm_work_t *work, sr_stream_t stream)
{
    if (sr_comm_device(comm) == s->dev)
        sr_comm_stream_wait(comm, *work, stream);
    else
        sr_comm_wait(comm, *work);
    *work = NULL;
}

/* sharded_batch.c: a batch context's buffers (sizes from s). */
struct sr_sharded_ebc_batch *sr_sharded_batch_alloc(struct sr_sharded_ebc *s);
void sr_sharded_batch_release(struct sr_sharded_ebc_batch *b);
/* Local mode: allocate (want 1) or free (0) b's own pooled and dpooled
 * blocks, which only an unbound context uses. */
void sr_sharded_batch_local_blocks(struct sr_sharded_ebc_batch *b, int want);

/* input_dist.c. counts_start: bucketize and start the counts exchange (kjt
 * may be NULL when local_rc is not SR_OK: END_OF_DATA or an error).
 * counts_wait: the host waits for the counts; returns SR_ERR_DATA on every
 * rank when any rank flagged its batch, else SR_SHARDED_EBC_END_OF_DATA on
 * every rank when any rank's data ended; on SR_OK the batch's host metadata
 * (exchange regions, local batches' id counts and positions) is built.
 * data_start: pack and start the data exchange; data_wait: fill every
 * group's local batch (stream-ordered). */
void sr_input_dist_counts_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                struct sr_kjt *kjt, int local_rc);
int sr_input_dist_counts_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
void sr_input_dist_data_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
void sr_input_dist_data_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
/* Where each of group g's features' ids go in the table-grouped id list
 * (ops_embedding.h), from gb->feature_n: gb->table_pos, gb->feature_pos. */
void sr_input_dist_positions(const struct group *g, struct group_batch *gb);
/* output_dist.c: pooled blocks out (start) and into pooled (wait); dpooled
 * into blocks and out (start), gradients at the owners (wait). */
void sr_output_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
void sr_output_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float *pooled);
void sr_grad_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                        const float *dpooled);
void sr_grad_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
/* output_wire.c: the output dist's collectives in s->wire (fp32 sums on
 * arrival); arguments as comm.h's, counts in elements, fp32 buffers. In fp32
 * each is one non-blocking collective (*work: complete it with
 * sr_sharded_complete); compressed, the exchange is issued whole on the
 * stream and *work is NULL. */
void sr_wire_all_to_allv(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send,
                         const size_t *send_counts, const size_t *send_displs, float *recv,
                         const size_t *recv_counts, const size_t *recv_displs, sr_stream_t stream,
                         sr_comm_work_t *work);
void sr_wire_reduce_scatter(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send,
                            float *recv, size_t count, sr_stream_t stream, sr_comm_work_t *work);
void sr_wire_all_gather(struct sr_sharded_ebc *s, sr_comm_t comm, const float *send, float *recv,
                        size_t count, sr_stream_t stream, sr_comm_work_t *work);

/* sharded_local.c: local mode (sharded_ebc.h, "Local mode"). local_init
 * decides it at init (after the groups are built) and builds its layout;
 * the stages: counts (host metadata from the KJT's length_per_key; returns
 * as sr_input_dist_counts_wait does), lookup (pools b's KJT into the bound
 * pooled or gb[GROUP_A2A].pooled), update (the fused optimizer from
 * update_dpooled). */
void sr_sharded_local_init(struct sr_sharded_ebc *s);
int sr_local_counts(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
void sr_local_lookup(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
void sr_local_group_ids(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                        sr_stream_t stream);
void sr_local_update(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float lr,
                     int64_t step);

/* sharded_hybrid.c. expand: s->cfg and s->plan from the caller's (copies;
 * expanded when the plan has hybrid tables, see above), s->hyb with its
 * host tables; SR_ERR_INVALID_ARG for a hybrid table it cannot run.
 * upload: hybrid_split's tables and the replicas' shard rows, to the
 * device. init_replica: draw replica tab as its table's hot rows are drawn
 * (ebc.h). split: b's KJT split into b->xkjt (stream-ordered); returns it.
 * user_cfg: the caller's config. is_replica: table t of cfg is a replica. */
int sr_sharded_hybrid_expand(struct sr_sharded_ebc *s, const struct sr_ebc_config *cfg,
                             const struct sr_plan *plan);
void sr_sharded_hybrid_upload(struct sr_sharded_ebc *s);
/* A hot feature takes its feature's pooled columns and id bound (its hot
 * ids are at most as many): after feature_cap and feature_col are set. */
void sr_sharded_hybrid_inherit(struct sr_sharded_ebc *s);
void sr_sharded_hybrid_init_replica(struct sr_sharded_ebc *s, struct sr_emb_table *tab, int t,
                                    uint64_t seed);
struct sr_kjt *sr_sharded_hybrid_split(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                       struct sr_kjt *kjt);
void sr_sharded_hybrid_free(struct sr_sharded_ebc *s);
void sr_sharded_hybrid_batch_alloc(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
void sr_sharded_hybrid_batch_free(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b);
static inline const struct sr_ebc_config *sr_sharded_user_cfg(const struct sr_sharded_ebc *s)
{
    return s->hyb.expanded ? &s->hyb.user_cfg : &s->cfg;
}
static inline int sr_sharded_is_replica(const struct sr_sharded_ebc *s, int t)
{
    return s->hyb.expanded && t >= s->hyb.user_cfg.num_tables;
}

/* sharded_ebc.c: the output-dist group of a sharding type; the index in g's
 * tables of table t's shard `shard` (aborts when this rank holds none). */
enum group_kind sr_sharded_group_of(enum sr_sharding_type type);
int sr_sharded_local_table(const struct group *g, int t, int shard);

/* sharded_ebc.c: the fused optimizer's settings for an update at (lr, step),
 * or at the device scalars when they are set. */
struct sr_emb_update sr_sharded_update_of(const struct sr_sharded_ebc *s, float lr, int64_t step);

#endif
