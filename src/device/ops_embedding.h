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

struct sr_emb_table {
    float *weight; /* (E, D) device */
    float *state;  /* device, by optimizer: sgd NULL; adagrad (E, D); rowwise adagrad (E);
                      adam m (E, D) then v (E, D), contiguous */
    int64_t rows;  /* E */
    int dim;       /* D */
};

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
};

struct sr_embedding_ops {
    /* Bytes of workspace for `layout`; the caller allocates them once with
     * sr_dev_alloc and calls workspace_init on them. */
    size_t (*workspace_bytes)(struct sr_device *dev, const struct sr_emb_layout *layout);
    void (*workspace_init)(struct sr_device *dev, const struct sr_emb_layout *layout,
                           void *workspace);
    /* weight (rows, dim), holding global rows [row_begin, row_begin + rows):
     * element (r, c) = (float)(lo + (hi - lo) * sr_rng_uniform(seed, stream,
     * (row_begin + r) * dim + c)), computed in double, so any shard draws the
     * same values. */
    void (*init_uniform)(struct sr_device *dev, float *weight, int64_t rows, int dim,
                         int64_t row_begin, uint64_t seed, uint64_t stream, double lo, double hi,
                         sr_stream_t s);
    /* p[0 .. n) = value. */
    void (*fill)(struct sr_device *dev, float *p, int64_t n, float value, sr_stream_t s);
    /* pooled (B, out_dim): for each feature f and sample b, the columns
     * [col, col + D) of row b are Σ weight_i * table[id_i] over the bag,
     * divided by the bag length under mean pooling; 0 for an empty bag.
     * With keep_ids, also records the ids for backward (in the workspace). */
    void (*forward)(struct sr_device *dev, const struct sr_emb_layout *layout,
                    const struct sr_emb_batch *batch, int keep_ids, float *pooled, void *workspace,
                    sr_stream_t s);
    /* dpooled (B, out_dim) device. Uses the ids the last keep_ids forward
     * recorded (and batch->table_pos of that forward): merges duplicates per
     * table into row gradients and applies `update` to the touched rows only. */
    void (*backward)(struct sr_device *dev, const struct sr_emb_layout *layout,
                     const struct sr_emb_batch *batch, const float *dpooled,
                     const struct sr_emb_update *update, void *workspace, sr_stream_t s);
};

#endif
