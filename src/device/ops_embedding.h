/*
 * Device ops of an embedding bag collection: initialise tables, pool the bags
 * of a whole batch in one call, and in one call merge each table's duplicate
 * ids into per-row gradients and apply the fused sparse optimizer in place.
 * embed/ebc.c is the caller; device/cpu/cpu_embedding.c the reference
 * backend; a CUDA backend implements the same table.
 *
 * Data the ops see:
 *
 *   tables    (T) sr_emb_table   weight (E, D) and optimizer state, device
 *   features  (F) sr_emb_feature table index, first pooled column, mean flag
 *   batch     offsets (F*B + 1), values (N), weights (N) or NULL  device
 *             feature_pos (F), table_pos (T + 1)                   host
 *   pooled    (B, out_dim) row-major, device
 *   workspace one device block of workspace_bytes(), allocated once by the
 *             caller; forward(keep_ids = 1) leaves in it what backward needs
 *
 * The id list of a step, grouped by table. Forward copies every id, with the
 * bag it came from and its gradient scale (per-id weight, 1/len for mean), into
 * the workspace at a position that groups the ids by table:
 *
 *   table_pos:   [ t0 ids ........ | t1 ids ...... | t2 ... ]
 *   feature_pos:   ^f0     ^f3       ^f1  ^f2              (f0, f3 look up t0)
 *
 * feature f's j-th id (j counted from offsets[f*B]) goes to feature_pos[f] + j.
 * The caller computes both arrays on the host from the KJT's offsets; they
 * are the only per-step host metadata.
 *
 * Why this shape: ids are kept on the device, so backward needs neither the
 * KJT nor a second pass over it, and the batch may be refilled in between.
 * Backward sorts each table's ids stably by row (a radix sort: deterministic,
 * and cub::DeviceRadixSort::SortPairs on a GPU), then each run of equal rows
 * is one row gradient, summed in id order and applied at once: no [E, D]
 * gradient exists and the work per step is O(N D), never O(E).
 *
 * Contract of every op: pointers marked device are device pointers of `dev`;
 * host arrays are read before the op returns. Ops are stream-ordered on `s`;
 * none allocates. Results are bit-identical across reruns (and, on the CPU,
 * across thread counts). Nothing here validates user input: the caller has
 * already brought ids into [0, E) and checked shapes (violations abort).
 */
#ifndef SHARDREC_OPS_EMBEDDING_H
#define SHARDREC_OPS_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"
#include "shardrec/optim.h"
#include "shardrec/tensor.h"
#include "device/op_decl.h"

/* Table storage (--emb-dtype). Weights are kept in `dtype`: SR_DTYPE_F32, or
 * SR_DTYPE_F16 / SR_DTYPE_BF16 (half the bytes moved by every lookup and
 * update). Every op widens a stored weight to fp32, computes in fp32 (pooled
 * sums, row gradients, the optimizer, whose state is always fp32), and an
 * update narrows the new weight back: to nearest even, or stochastically
 * (layout->stochastic) with the 32 random bits
 *   sr_rng_u64(layout->seed + step * SR_EMB_ROUND_STEP, tab->stream,
 *              the table's element: sr_emb_global_elem)
 * (core/half_bits.h), the same on every device for the same fp32 value.
 * Initial weights are the fp32 draws rounded to nearest even. */
#define SR_EMB_ROUND_STEP 0x9e3779b97f4a7c15ull

struct sr_emb_table {
    void *weight;  /* (E, D) device, in dtype */
    float *state;  /* device, by optimizer: sgd NULL; adagrad (E, D); rowwise adagrad (E);
                      adam m (E, D) then v (E, D), contiguous */
    int64_t rows;  /* E */
    int dim;       /* D */
    enum sr_dtype dtype; /* the weights' storage: F32 (0, the default), F16 or BF16 */
    uint64_t stream;     /* the table's rng stream (stochastic rounding) */
    /* Where a shard sits in its table, so that stochastic rounding draws by
     * the table's element, the same under any plan: local (row, col) is the
     * table's (global_row0 + row, global_col0 + col) of global_dim columns
     * (0: the table is whole, global_dim = dim). */
    int64_t global_row0;
    int global_col0, global_dim;
};

/* The table's element index of local (row, col): stochastic rounding's counter. */
static inline int64_t sr_emb_global_elem(const struct sr_emb_table *t, int64_t row, int col)
{
    const int64_t gd = t->global_dim ? t->global_dim : t->dim;
    return (t->global_row0 + row) * gd + t->global_col0 + col;
}

/* Bytes of one stored weight of a table. */
static inline size_t sr_emb_elem_bytes(enum sr_dtype dtype)
{
    return dtype == SR_DTYPE_F32 ? 4 : 2;
}

struct sr_emb_feature {
    int table; /* index into the tables */
    int col;   /* first column of this feature's D columns in pooled */
    int mean;  /* 1: mean pooling (divide by the bag length), 0: sum */
};

/* Everything fixed at init: tables, features, capacities. Arrays are host. */
struct sr_emb_layout {
    int num_tables;                        /* T */
    const struct sr_emb_table *tables;     /* (T) host array of device pointers */
    int num_features;                      /* F */
    const struct sr_emb_feature *features; /* (F) host */
    int out_dim;                           /* Σ over features of their table's D */
    int max_dim;                           /* largest D */
    int max_batch;                         /* largest B */
    int64_t max_values;                    /* largest N; below 2^31 */
    enum sr_optim_kind optim;
    int stochastic;                        /* 16-bit tables: round updates stochastically */
    uint64_t seed;                         /* ... with this seed (see sr_emb_table) */
};

/* One step's sparse input, ids already in range. */
struct sr_emb_batch {
    int batch;                  /* B */
    int64_t num_values;         /* N */
    const int64_t *offsets;     /* (F*B + 1) device */
    const int64_t *values;      /* (N) device, in [0, E) of the feature's table */
    const float *weights;       /* (N) device, or NULL */
    const int64_t *feature_pos; /* (F) host: where feature f's ids start, grouped by table */
    const int64_t *table_pos;   /* (T + 1) host: table t's ids are [table_pos[t], table_pos[t+1]) */
    /* backward: 1 when the keep_ids forward's batch had weights (how it kept
     * the ids' scales), so that a backward given no weights pointer, as the
     * callers give it, reads the workspace as the forward wrote it */
    int weighted;
};

/* The fused optimizer of one step. */
struct sr_emb_update {
    struct sr_optim_config optim;
    float lr;
    int64_t step; /* global step, from 1: adam's bias correction */
    /* When set, device memory holding the learning rate and the step, read
     * when the op runs (not when it is issued) in place of lr and step: a
     * queued or captured update never holds a stale value. */
    const float *lr_dev;
    const int64_t *step_dev;
    /* group_ids ran on this batch's ids since its forward: backward does
     * not group them again */
    int ids_grouped;
};

/* Hot rows. A run of more than sr_emb_run_split(max_dim) ids of one row may
 * be summed in pieces: each piece (its ids in order) summed in id order, then
 * the pieces' sums in order, so a hot row's work spreads over many lanes and
 * reruns still give the same bits. Runs of at most that many ids are summed
 * in id order, as the CPU sums every run, and give the CPU's bits. The split
 * follows the layout's widest row (measured: docs/architecture.md, "hot
 * rows"): SR_EMB_RUN_SPLIT_NARROW where no row is wider than
 * SR_EMB_RUN_SPLIT_NARROW_DIM floats, SR_EMB_RUN_SPLIT_DEFAULT elsewhere,
 * unless the environment's SR_EMB_RUN_SPLIT (a power of two from 8 to 65536)
 * sets it for every layout, for benchmarks that measure it; it is read once. */
#define SR_EMB_RUN_SPLIT_DEFAULT 64
#define SR_EMB_RUN_SPLIT_NARROW     32
#define SR_EMB_RUN_SPLIT_NARROW_DIM 16
int sr_emb_run_split(int max_dim);

/* Bytes of a table's optimizer state. */
size_t sr_emb_state_bytes(enum sr_optim_kind kind, const struct sr_emb_table *t);
/* The regions of every table of l: weights read (update 0), or weights and
 * optimizer state read and written (update 1). */
void sr_emb_tables_regions(struct sr_op_regions *r, const struct sr_emb_layout *l, int update);

/* What an op reads of a batch, and of an update (the device lr and step). */
#define SR_EMB_BATCH(layout, batch)                                                                \
    SR_HOST(const struct sr_emb_batch *, batch, 1)                                                 \
    SR_HOST_FIELD(batch, feature_pos, (layout)->num_features)                                      \
    SR_HOST_FIELD(batch, table_pos, (layout)->num_tables + 1)                                      \
    SR_READS(batch->offsets, SR_I64((size_t)(layout)->num_features * batch->batch + 1))            \
    SR_READS(batch->values, SR_I64(batch->num_values))                                             \
    SR_READS(batch->weights, SR_F32(batch->num_values))
#define SR_EMB_UPDATE(update)                                                                      \
    SR_HOST(const struct sr_emb_update *, update, 1)                                               \
    SR_READS(update->lr_dev, sizeof(float)) SR_READS(update->step_dev, sizeof(int64_t))

/* The ops, declared once (op_decl.h says how to read an entry). */
#define SR_OPS_EMB(OP)                                                                             \
    /* The workspace's bytes (workspace_bytes) after sr_dev_alloc. */                              \
    OP(emb, workspace_init,                                                                        \
       SR_ARG(const struct sr_emb_layout *, layout)                                                \
       SR_OUT(void *, workspace, sr_op_emb_workspace_bytes(dev, layout)))                          \
    /* weight (rows, dim), holding columns [col_begin, col_begin + dim) of the                     \
     * global rows [row_begin, row_begin + rows) of a table full_dim wide (a                       \
     * whole table: col_begin 0, full_dim = dim): element (r, c) = (float)(lo +                    \
     * (hi - lo) * sr_rng_uniform(seed, stream, (row_begin + r) * full_dim +                       \
     * col_begin + c)), computed in double, so any shard, row-wise or column-wise,                 \
     * draws the same values; stored in dtype (rounded to nearest even). */                        \
    OP(emb, init_uniform,                                                                          \
       SR_OUT(void *, weight, (size_t)rows * (size_t)dim * sr_emb_elem_bytes(dtype))               \
       SR_ARG(enum sr_dtype, dtype) SR_ARG(int64_t, rows)                                          \
       SR_ARG(int, dim) SR_ARG(int64_t, row_begin) SR_ARG(int, col_begin) SR_ARG(int, full_dim)    \
       SR_ARG(uint64_t, seed)                                                                      \
       SR_ARG(uint64_t, stream) SR_ARG(double, lo) SR_ARG(double, hi) SR_STREAM(s))                \
    /* p[0 .. n) = value. */                                                                       \
    OP(emb, fill,                                                                                  \
       SR_OUT(float *, p, SR_F32(n)) SR_ARG(int64_t, n) SR_ARG(float, value) SR_STREAM(s))         \
    /* pooled (B, out_dim): for each feature f and sample b, the columns                           \
     * [col, col + D) of row b are Σ weight_i * table[id_i] over the bag,                          \
     * divided by the bag length under mean pooling; 0 for an empty bag.                           \
     * With keep_ids, also records the ids for backward (in the workspace). */                     \
    OP(emb, forward,                                                                               \
       SR_ARG(const struct sr_emb_layout *, layout) SR_EMB_BATCH(layout, batch)                    \
       SR_ARG(int, keep_ids)                                                                       \
       SR_OUT(float *, pooled, SR_F32((size_t)batch->batch * layout->out_dim))                     \
       SR_INOUT(void *, workspace, sr_op_emb_workspace_bytes(dev, layout)) SR_STREAM(s)            \
       SR_REGIONS(sr_emb_tables_regions(r, layout, 0)))                                            \
    /* dpooled (B, out_dim) device. Uses the ids the last keep_ids forward                         \
     * recorded (and that forward's batch->table_pos, and its weights or                           \
     * batch->weighted): merges duplicates per                                                     \
     * table into row gradients and applies `update` to the touched rows only. */                  \
    OP(emb, backward,                                                                              \
       SR_ARG(const struct sr_emb_layout *, layout) SR_EMB_BATCH(layout, batch)                    \
       SR_IN(const float *, dpooled, SR_F32((size_t)batch->batch * layout->out_dim))               \
       SR_EMB_UPDATE(update) SR_INOUT(void *, workspace, sr_op_emb_workspace_bytes(dev, layout))   \
       SR_STREAM(s) SR_REGIONS(sr_emb_tables_regions(r, layout, 1)))                               \
    /* Backward's first part ahead of it: groups the ids the last keep_ids                         \
     * forward recorded by row (the sort), in the workspace, so that it may                        \
     * run beside other work; a backward given update->ids_grouped then                            \
     * skips it. batch as backward's. Optional: backward groups them itself. */                    \
    OP(emb, group_ids,                                                                             \
       SR_ARG(const struct sr_emb_layout *, layout) SR_EMB_BATCH(layout, batch)                    \
       SR_INOUT(void *, workspace, sr_op_emb_workspace_bytes(dev, layout)) SR_STREAM(s))

struct sr_embedding_ops {
    /* Bytes of workspace for `layout`; the caller allocates them once with
     * sr_dev_alloc and calls workspace_init on them. Not an op: it runs at
     * once, on the host. */
    size_t (*workspace_bytes)(struct sr_device *dev, const struct sr_emb_layout *layout);
    SR_OPS_EMB(SR_OP_MEMBER)
};
size_t sr_op_emb_workspace_bytes(struct sr_device *dev, const struct sr_emb_layout *layout);
SR_OPS_EMB(SR_OP_PROTO)

#endif
