/*
 * The memory a rank needs for a training job, estimated from the config (and
 * the plan) before any of it is allocated, so that a size that cannot fit is
 * an error naming its flag or table (exit status 2) instead of an abort inside
 * an allocator. Every sum and product is checked for overflow.
 *
 * The parts:
 *
 *   table t     local rows x cols x 4 bytes, plus its optimizer state
 *   dense       MLP weights x 4 bytes x (weight, gradient, optimizer state)
 *   batch       ids, lengths, offsets, pooled vectors, activations and their
 *               gradients of a batch (ids and pooled vectors of the global
 *               batch under a plan: an owner may receive every rank's)
 *   evaluation  predictions and labels of --eval-samples, gathered on each rank
 *               (of files: sized when they are opened, trainer_eval.c, and
 *               checked beside the rest of the host's sum, below)
 *   batch pool  --batch-pool N host batches made at start-up (host memory, also
 *               when the model is on a GPU: checked against the machine's then)
 *   staging     checkpoints' host copy of the rank's tables with their state
 *               (and rank 0's dense block with its state): on a device the
 *               host cannot address, or with --checkpoint-write overlap (host
 *               memory, checked as the batch pool)
 *
 * The memory to compare with is the machine's physical memory (sysconf
 * _SC_PHYS_PAGES x _SC_PAGE_SIZE), or the cgroup v2 limit
 * (/sys/fs/cgroup/memory.max) when that is lower: a fixed figure, so a job is
 * not refused because page cache happens to be full. The ranks on one host
 * share it: the host's parts of their tallies are summed (every tally is a
 * function of the config, plan, rank and world size, so each rank computes
 * every other's, and the ranks of a host reach one verdict without a
 * collective). A device's memory is its rank's alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/metrics.h"
#include "shardrec/plan.h"
#include "shardrec/train_config.h"

enum mem_part { MEM_TABLE, MEM_DENSE, MEM_BATCH, MEM_EVAL, MEM_POOL, MEM_STAGING, MEM_PARTS };

struct mem_tally {
    uint64_t total, largest, batch_slots;
    uint64_t part_sum[MEM_PARTS];
    enum mem_part part;
    int table;
    int overflow;
};

/* acc += a * b * c, remembering an overflow. */
static uint64_t mem_mul3(struct mem_tally *m, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t p;
    if (__builtin_mul_overflow(a, b, &p) || __builtin_mul_overflow(p, c, &p)) {
        m->overflow = 1;
        return UINT64_MAX;
    }
    return p;
}

static uint64_t mem_add(struct mem_tally *m, uint64_t a, uint64_t b)
{
    uint64_t s;
    if (__builtin_add_overflow(a, b, &s)) {
        m->overflow = 1;
        return UINT64_MAX;
    }
    return s;
}

static void mem_count(struct mem_tally *m, enum mem_part part, int table, uint64_t bytes)
{
    m->total = mem_add(m, m->total, bytes);
    m->part_sum[part] = mem_add(m, m->part_sum[part], bytes);
    if (bytes > m->largest) {
        m->largest = bytes;
        m->part = part;
        m->table = table;
    }
}

/* Table t's rows and elements held by `rank` (the whole table without a plan). */
static void local_table(const struct sr_train_config *cfg, const struct sr_plan *plan, int rank,
                        int t, uint64_t *rows, uint64_t *elems, struct mem_tally *m)
{
    const struct sr_table_config *tc = &cfg->tables[t];
    *rows = (uint64_t)tc->num_embeddings;
    *elems = mem_mul3(m, (uint64_t)tc->num_embeddings, (uint64_t)tc->embedding_dim, 1);
    if (!plan || t >= plan->num_tables)
        return;
    *rows = *elems = 0;
    for (int i = 0; i < plan->tables[t].num_shards; i++) {
        const struct sr_shard *s = &plan->tables[t].shards[i];
        if (s->rank != rank || s->rows < 0 || s->cols < 0)
            continue;
        *rows = mem_add(m, *rows, (uint64_t)s->rows);
        *elems = mem_add(m, *elems, mem_mul3(m, (uint64_t)s->rows, (uint64_t)s->cols, 1));
    }
}

/* A hybrid table's replica of its H hot rows, on every rank (fp32): weights
 * and optimizer state (its gradient and counts: count_dp_extras). */
static void count_replica(const struct sr_train_config *cfg, int64_t H, int t, int per_row,
                          int per_elem, struct mem_tally *m)
{
    const uint64_t D = (uint64_t)cfg->tables[t].embedding_dim, rows = (uint64_t)H;
    const uint64_t state = per_row ? rows : mem_mul3(m, (uint64_t)per_elem, rows, D);
    uint64_t floats = mem_add(m, mem_mul3(m, rows, D, 1), state);
    mem_count(m, MEM_TABLE, t, mem_mul3(m, floats, sizeof(float), 1));
}

static void count_tables(const struct sr_train_config *cfg, const struct sr_plan *plan, int rank,
                         struct mem_tally *m)
{
    int per_row = 0, per_elem = sr_optim_state_per_element(cfg->emb_optimizer, &per_row);
    for (int t = 0; t < cfg->num_tables; t++) {
        uint64_t rows, elems;
        local_table(cfg, plan, rank, t, &rows, &elems, m);
        uint64_t state = per_row ? rows : mem_mul3(m, (uint64_t)per_elem, elems, 1);
        uint64_t weights = mem_mul3(m, elems, sr_dtype_size(cfg->emb_dtype), 1); /* --emb-dtype */
        mem_count(m, MEM_TABLE, t, mem_add(m, weights, mem_mul3(m, state, sizeof(float), 1)));
        if (plan && t < plan->num_tables && plan->tables[t].type == SR_SHARDING_TYPE_HYBRID)
            count_replica(cfg, plan->tables[t].num_hot, t, per_row, per_elem, m);
    }
}

/* The MLPs' parameters (DCN's cross layers included). */
static uint64_t dense_params(const struct sr_train_config *cfg, struct mem_tally *m)
{
    struct sr_dlrm_config dc;
    uint64_t params = 0, in;
    sr_train_config_dlrm(cfg, &dc);
    for (int l = 0; l + 1 < cfg->n_bot; l++)
        params =
            mem_add(m, params,
                    mem_mul3(m, (uint64_t)cfg->bot_mlp[l] + 1, (uint64_t)cfg->bot_mlp[l + 1], 1));
    in = (uint64_t)sr_dlrm_interaction_dim(&dc);
    for (int l = 0; l < cfg->n_top; l++) {
        params = mem_add(m, params, mem_mul3(m, in + 1, (uint64_t)cfg->top_mlp[l], 1));
        in = (uint64_t)cfg->top_mlp[l];
    }
    if (dc.interaction == SR_INTERACTION_DCN) { /* per cross layer V, U [R, n] and bias [n] */
        uint64_t n = (uint64_t)sr_dlrm_interaction_dim(&dc), R = (uint64_t)dc.dcn_rank;
        params = mem_add(m, params, mem_mul3(m, (uint64_t)dc.dcn_layers, 2 * R + 1, n));
    }
    return params;
}

/* The floats of the last gradient bucket's MLP part (grad_buckets.c's cuts:
 * layer groups walked from the top, cut once a bucket reaches --bucket-kib;
 * the last bucket takes what is left at the bottom). */
static uint64_t last_bucket_floats(const struct sr_train_config *cfg)
{
    struct sr_dlrm_config dc;
    uint64_t sizes[2 * SR_MLP_MAX + SR_DCN_MAX_LAYERS], n = 0, in;
    int k = 0;
    sr_train_config_dlrm(cfg, &dc);
    for (int l = 0; l + 1 < cfg->n_bot; l++)
        sizes[k++] = ((uint64_t)cfg->bot_mlp[l] + 1) * (uint64_t)cfg->bot_mlp[l + 1];
    in = (uint64_t)sr_dlrm_interaction_dim(&dc);
    for (int l = 0; dc.interaction == SR_INTERACTION_DCN && l < dc.dcn_layers; l++)
        sizes[k++] = (2 * (uint64_t)dc.dcn_rank + 1) * in;
    for (int l = 0; l < cfg->n_top; l++) {
        sizes[k++] = (in + 1) * (uint64_t)cfg->top_mlp[l];
        in = (uint64_t)cfg->top_mlp[l];
    }
    for (int i = 0; i < k; i++)
        n += sizes[i];
    uint64_t bucket = ((uint64_t)cfg->bucket_kib << 10) / sizeof(float), hi = n, lo = n;
    for (int i = k - 1; i >= 0; i--) {
        lo -= sizes[i];
        if (hi - lo >= (bucket ? bucket : 1) && lo > 0)
            hi = lo;
    }
    return hi;
}

/* Whether the dense buckets travel compressed (16-bit, several ranks). */
static int buckets_compressed(const struct sr_train_config *cfg, int W)
{
    return W > 1 && cfg->dense_comm_dtype != SR_DTYPE_F32;
}

/* The gradient buckets' staging of the MLP part (grad_buckets.c): fp32, the
 * last bucket and the loss; compressed, the largest block with the loss's
 * two exact words, and every bucket's reduce-scatter and all-gather wire
 * buffers (send and receive, W blocks of 2 bytes a value each). */
static uint64_t bucket_staging_bytes(const struct sr_train_config *cfg, int W, struct mem_tally *m)
{
    if (!buckets_compressed(cfg, W))
        return mem_mul3(m, last_bucket_floats(cfg) + 1, sizeof(float), 1);
    uint64_t params = dense_params(cfg, m), c_max = (last_bucket_floats(cfg) + W - 1) / W;
    uint64_t wire = mem_mul3(m, params + (uint64_t)W, 2 * 2 * 2, 1); /* rs + ag, send + recv */
    return mem_add(m, mem_mul3(m, c_max + 2, sizeof(float), 1), wire);
}

/* A dp table's floats beside its weights (its rows E, dim D): its dense
 * gradient and touch counts, E (D + 1), which ride in the last bucket as its
 * tail: staged once more (fp32), or kept exact twice in the staging and sent
 * as 2 16-bit halves a word to each rank, sent and received (compressed). */
uint64_t sr_train_config_dp_extra_bytes(const struct sr_train_config *cfg, int W, uint64_t E,
                                        uint64_t D)
{
    uint64_t t = E * (D + 1);
    if (!buckets_compressed(cfg, W))
        return 2 * 4 * t;
    return 4 * t + 8 * t + 8 * (uint64_t)W * t;
}

/* Every dp table's (and hybrid replica's) gradient, counts and their staging
 * (a dp table is on every rank, whole; a replica holds the hot rows). */
static void count_dp_extras(const struct sr_train_config *cfg, const struct sr_plan *plan, int W,
                            struct mem_tally *m)
{
    for (int t = 0; plan && t < cfg->num_tables && t < plan->num_tables; t++) {
        const enum sr_sharding_type k = plan->tables[t].type;
        uint64_t rows = k == SR_SHARDING_TYPE_DATA_PARALLEL
                            ? (uint64_t)cfg->tables[t].num_embeddings
                        : k == SR_SHARDING_TYPE_HYBRID ? (uint64_t)plan->tables[t].num_hot
                                                       : 0; /* a hybrid table's replica */
        if (rows)
            mem_count(m, MEM_TABLE, t,
                      sr_train_config_dp_extra_bytes(cfg, W, rows,
                                                     (uint64_t)cfg->tables[t].embedding_dim));
    }
}

static void count_dense(const struct sr_train_config *cfg, struct mem_tally *m)
{
    int per_row = 0, per_elem = sr_optim_state_per_element(cfg->optimizer, &per_row);
    mem_count(m, MEM_DENSE, -1,
              mem_mul3(m, dense_params(cfg, m), 2 + (uint64_t)per_elem, sizeof(float)));
}

/* Whether checkpoints stage through host memory: on a device the host cannot
 * address (`device`: the memory checked is a device's), or with
 * --checkpoint-write overlap (checkpoint_read.c makes it so). */
static int stages_on_host(const struct sr_train_config *cfg, int device)
{
    if (!cfg->checkpoint_dir[0] && !cfg->resume)
        return 0;
    return device || cfg->checkpoint_write == SR_CHECKPOINT_WRITE_OVERLAP;
}

/* The staging (checkpoint_writer.c): the rank's tables with their state, and
 * on rank 0 the dense block with its optimizer state. */
static void count_staging(const struct sr_train_config *cfg, int rank, uint64_t tables,
                          struct mem_tally *m)
{
    int per_row = 0, per_elem = sr_optim_state_per_element(cfg->optimizer, &per_row);
    uint64_t bytes = tables;
    if (rank == 0)
        bytes = mem_add(m, bytes,
                        mem_mul3(m, dense_params(cfg, m), 1 + (uint64_t)per_elem, sizeof(float)));
    if (!cfg->checkpoint_dir[0] && bytes > SR_CKPT_READ_STAGING_BYTES)
        bytes = SR_CKPT_READ_STAGING_BYTES; /* reading only: in pieces (checkpoint_writer.h) */
    mem_count(m, MEM_STAGING, -1, bytes);
}

/* Batch contexts the embeddings hold: the sharded EBC's own and the
 * pipeline's two (trainer_step.c), each with every buffer of a batch (one
 * rank with no plan too: its EBC runs in local mode). */
#define EMB_CONTEXTS 3

/* One embedding context's buffers for n ids in bf bags: per id, the
 * workspace (ws_id bytes: its sort keys and values, and on CUDA per-run
 * partial sums); per bag, lengths and offsets (20 bytes). Under
 * a plan of several ranks (`several`) each id's values and weights are the
 * context's own (12); the exchanged features (`exchange`: tables not
 * data-parallel) add per id the input dist's received id and weight words
 * (8), per bag the pooled vector with its gradient (8 bytes a value), and the
 * send block of the rank's own bags (own_bf, 4 bytes a value) with its ids'
 * send words (own_ids, 8: an id and its weight, once for each owner it goes
 * to). A data-parallel feature's bags
 * hold their pooled vector and gradient in one view of that send block (4);
 * one rank's (local mode) both (8), but for the EBC's own context, whose
 * forward and backward bind the caller's. */
static uint64_t emb_context_bytes(struct mem_tally *m, uint64_t n, uint64_t bf, uint64_t own_bf,
                                  uint64_t own_ids, uint64_t D, uint64_t ws_id, int exchange,
                                  int several)
{
    uint64_t per_id = ws_id + (several ? 12 : 0) + (exchange ? 8 : 0);
    uint64_t bytes = mem_add(m, mem_mul3(m, n, per_id, 1), mem_mul3(m, bf, 20, 1));
    bytes = mem_add(m, bytes, mem_mul3(m, bf, D, several && !exchange ? 4 : 8));
    if (!exchange)
        return bytes;
    bytes = mem_add(m, bytes, mem_mul3(m, own_ids, 8, 1));
    return mem_add(m, bytes, mem_mul3(m, own_bf, D, 4));
}

/* The most ids feature f holds in one sample (--ids-per-feature). */
static uint64_t feature_ids_max(const struct sr_train_config *cfg, int f)
{
    return (uint64_t)sr_train_config_feature_ids_max(cfg, f);
}

/* Ids a sample and features of the tables a plan of W ranks exchanges
 * (`want` 1) or keeps data-parallel (0); with no plan or one rank every
 * feature is local: counted as kept (want 0). */
static void feature_split(const struct sr_train_config *cfg, const struct sr_plan *plan, int W,
                          int want, uint64_t *ids, uint64_t *features)
{
    *ids = *features = 0;
    for (int f = 0; f < cfg->num_features; f++) {
        const int t = cfg->feature_table[f];
        int exchanged = plan && W > 1 && t < plan->num_tables &&
                        plan->tables[t].type != SR_SHARDING_TYPE_DATA_PARALLEL;
        if (exchanged != want)
            continue;
        *ids += feature_ids_max(cfg, f);
        *features += 1;
    }
}

/* The workspace an id: cpu_embedding.c's carve 32 bytes (two 8-byte keys,
 * four 4-byte indices); cuda_embedding.cu's keys and values (up to 32) and a
 * partial row of D floats per 64-id run split (D / 8). */
static uint64_t workspace_per_id(const struct sr_train_config *cfg)
{
    return cfg->device == SR_DEVICE_CHOICE_CPU ? 32 : 32 + (uint64_t)cfg->embedding_dim / 8;
}

uint64_t sr_train_config_slot_sample_bytes(const struct sr_train_config *cfg, int f)
{
    struct mem_tally m = {0};
    uint64_t one = emb_context_bytes(&m, feature_ids_max(cfg, f), 1, 0, 0,
                                     (uint64_t)cfg->embedding_dim, workspace_per_id(cfg), 1, 1);
    return EMB_CONTEXTS * one;
}

/* Whether one rank's EBC runs in local mode (sharded_local.c): one rank,
 * every table whole in tw or cw (no plan: the same). */
static int local_mode(const struct sr_plan *plan, int W)
{
    for (int t = 0; W == 1 && plan && t < plan->num_tables; t++) {
        const enum sr_sharding_type k = plan->tables[t].type;
        if ((k != SR_SHARDING_TYPE_TABLE_WISE && k != SR_SHARDING_TYPE_COLUMN_WISE) ||
            plan->tables[t].num_shards != 1)
            return 0;
    }
    return W == 1;
}

/* The most owners one id is sent to (cw pieces of a table; 1 otherwise). */
static uint64_t most_owners(const struct sr_plan *plan, int W)
{
    int most = 1;
    for (int t = 0; plan && W > 1 && t < plan->num_tables; t++) {
        const enum sr_sharding_type k = plan->tables[t].type;
        const int n = plan->tables[t].num_shards;
        if ((k == SR_SHARDING_TYPE_TABLE_WISE || k == SR_SHARDING_TYPE_COLUMN_WISE) && n > most)
            most = n;
    }
    return (uint64_t)most;
}

/* What `rank` receives of the exchanged features (sharded_ebc.c's sizes):
 * its slots (a feature's shard on it) and the most ids a source sends them,
 * each slot at most its feature's ids (ids_max a sample), never more than a
 * whole sample's (per_sample) for each copy of one feature. */
static void slots_here(const struct sr_train_config *cfg, const struct sr_plan *plan, int W,
                       int rank, uint64_t per_sample, uint64_t *ids, uint64_t *slots)
{
    uint64_t most_copies = 0;
    *ids = *slots = 0;
    for (int f = 0; plan && W > 1 && f < cfg->num_features; f++) {
        const int t = cfg->feature_table[f];
        if (t >= plan->num_tables || plan->tables[t].type == SR_SHARDING_TYPE_DATA_PARALLEL)
            continue;
        uint64_t copies = 0;
        for (int i = 0; i < plan->tables[t].num_shards; i++)
            copies += plan->tables[t].shards[i].rank == rank;
        *slots += copies;
        *ids += copies * feature_ids_max(cfg, f);
        most_copies = copies > most_copies ? copies : most_copies;
    }
    if (*ids > per_sample * most_copies)
        *ids = per_sample * most_copies;
}

static int has_hybrid(const struct sr_plan *plan)
{
    for (int t = 0; plan && t < plan->num_tables; t++)
        if (plan->tables[t].type == SR_SHARDING_TYPE_HYBRID && plan->tables[t].num_hot > 0)
            return 1;
    return 0;
}

/* Columns of the features of hybrid tables (their compact rows). */
static uint64_t hybrid_cols(const struct sr_train_config *cfg, const struct sr_plan *plan)
{
    uint64_t cols = 0;
    for (int f = 0; plan && f < cfg->num_features; f++) {
        const int t = cfg->feature_table[f];
        if (t < plan->num_tables && plan->tables[t].type == SR_SHARDING_TYPE_HYBRID)
            cols += (uint64_t)cfg->tables[t].embedding_dim;
    }
    return cols;
}

/* The dense model's activation floats a sample (dlrm.c's layout): every
 * layer's output, the interaction's (dot), each top layer's kept output
 * gradient, and two gradient buffers of the widest layer input or output. */
static uint64_t activation_floats(const struct sr_train_config *cfg,
                                  const struct sr_dlrm_config *dc)
{
    uint64_t inter = (uint64_t)sr_dlrm_interaction_dim(dc), outs = 0, top = 0, widest = inter;
    for (int l = 0; l < cfg->n_bot; l++) {
        widest = (uint64_t)cfg->bot_mlp[l] > widest ? (uint64_t)cfg->bot_mlp[l] : widest;
        outs += l > 0 ? (uint64_t)cfg->bot_mlp[l] : 0;
    }
    for (int l = 0; l < cfg->n_top; l++) {
        widest = (uint64_t)cfg->top_mlp[l] > widest ? (uint64_t)cfg->top_mlp[l] : widest;
        top += (uint64_t)cfg->top_mlp[l];
    }
    return outs + (dc->interaction == SR_INTERACTION_DCN ? 0 : inter) + 2 * top + 2 * widest;
}

static void count_batch(const struct sr_train_config *cfg, const struct sr_plan *plan, int W,
                        int rank, struct mem_tally *m)
{
    uint64_t B = (uint64_t)cfg->batch_size, F = (uint64_t)cfg->num_features;
    uint64_t D = (uint64_t)cfg->embedding_dim;
    uint64_t per_sample = (uint64_t)sr_train_config_ids_per_sample(cfg);
    uint64_t ids_x, f_x, ids_k, f_k, BS = B * (uint64_t)(W > 0 ? W : 1);
    feature_split(cfg, plan, W, 1, &ids_x, &f_x);
    feature_split(cfg, plan, W, 0, &ids_k, &f_k);
    const int several = plan && W > 1;
    const uint64_t ws_id = workspace_per_id(cfg);
    struct sr_dlrm_config dc;
    sr_train_config_dlrm(cfg, &dc);
    /* the rank's slots of exchanged features receive every rank's samples
     * (BS); it sends its own bags of every exchanged feature; kept features
     * hold the rank's own samples */
    uint64_t ids_in, slots_in;
    slots_here(cfg, plan, W, rank, per_sample, &ids_in, &slots_in);
    uint64_t slots = emb_context_bytes(m, mem_mul3(m, BS, ids_in, 1), mem_mul3(m, BS, slots_in, 1),
                                       0, 0, D, ws_id, 1, 1);
    m->batch_slots = mem_mul3(m, EMB_CONTEXTS, slots, 1);
    /* the send block holds the rank's every id (its capacity), once per owner */
    uint64_t ctx =
        mem_add(m, slots,
                emb_context_bytes(m, 0, 0, mem_mul3(m, B, f_x, 1),
                                  several ? mem_mul3(m, B, per_sample, most_owners(plan, W)) : 0, D,
                                  ws_id, 1, 1));
    ctx = mem_add(m, ctx,
                  emb_context_bytes(m, mem_mul3(m, B, ids_k, 1), mem_mul3(m, B, f_k, 1), 0, 0, D,
                                    ws_id, 0, several));
    uint64_t bytes = mem_mul3(m, ctx, EMB_CONTEXTS, 1);
    if (local_mode(plan, W)) /* the EBC's own context binds the caller's pooled blocks */
        bytes -= mem_mul3(m, mem_mul3(m, B, f_k, D), 8, 1);
    if (has_hybrid(plan)) /* each context's split KJT: ids and weights, 2 x (F + F_h) bags */
        bytes = mem_add(
            m, bytes,
            mem_mul3(m, EMB_CONTEXTS,
                     mem_add(m, mem_mul3(m, B, per_sample, 12), mem_mul3(m, 2 * F, B, 16)), 1));
    /* and the compact exchange's two buffers of W*B rows of the hybrid
     * features' columns (sharded_hybrid.c) */
    bytes =
        mem_add(m, bytes, mem_mul3(m, EMB_CONTEXTS, mem_mul3(m, BS, hybrid_cols(cfg, plan), 8), 1));
    /* the batch on the device: ids and weights (12 bytes an id), a bag's
     * length and offset (12), the dense features and label (4 each); the
     * model's pooled vectors and their gradients (8 bytes a value) */
    bytes = mem_add(m, bytes, mem_mul3(m, B, per_sample, 12));
    bytes = mem_add(m, bytes, mem_mul3(m, B, F, 12));
    bytes = mem_add(m, bytes, mem_mul3(m, B, (uint64_t)cfg->num_dense + 1, 4));
    bytes = mem_add(m, bytes, mem_mul3(m, mem_mul3(m, B, F, D), 8, 1));
    bytes = mem_add(m, bytes, mem_mul3(m, B, activation_floats(cfg, &dc), 4));
    bytes = mem_add(m, bytes, bucket_staging_bytes(cfg, W, m));
    if (dc.interaction == SR_INTERACTION_DCN) { /* per cross layer x, u, du (n), h, dh (R) */
        uint64_t n = (uint64_t)sr_dlrm_interaction_dim(&dc), R = (uint64_t)dc.dcn_rank;
        uint64_t per_layer = mem_add(m, mem_mul3(m, 3, n, 1), mem_mul3(m, 2, R, 1));
        bytes = mem_add(m, bytes,
                        mem_mul3(m, mem_mul3(m, B, (uint64_t)dc.dcn_layers, 4), per_layer, 1));
    }
    mem_count(m, MEM_BATCH, -1, bytes);
}

static void count_eval(const struct sr_train_config *cfg, int W, struct mem_tally *m)
{
    uint64_t G = cfg->global_batch_size > 0 ? (uint64_t)cfg->global_batch_size
                                            : (uint64_t)cfg->batch_size * (uint64_t)W;
    if (cfg->eval_samples <= 0 || (cfg->n_data && !cfg->n_eval_data) || G == 0)
        return;
    if (cfg->n_eval_data) /* sized by the files: checked when they are opened, beside the
                             rest of the host's share (sr_train_config_host_memory) */
        return;
    uint64_t batches = ((uint64_t)cfg->eval_samples + G - 1) / G;
    uint64_t all = mem_mul3(m, batches, G, 1); /* every rank's predictions, gathered */
    uint64_t bytes = mem_mul3(m, all, 16, 1);  /* predictions and labels, local and gathered */
    if (!m->overflow && all <= (uint64_t)INT64_MAX)
        bytes = mem_add(m, bytes, (uint64_t)sr_metrics_workspace_bytes((int64_t)all));
    mem_count(m, MEM_EVAL, -1, bytes);
}

/* --batch-pool N: N host batches of B samples (batch.h's arrays: dense,
 * labels, lengths, offsets, and each feature's most ids; synthetic batches
 * have no weights). */
static void count_pool(const struct sr_train_config *cfg, struct mem_tally *m)
{
    uint64_t B = (uint64_t)cfg->batch_size, F = (uint64_t)cfg->num_features;
    uint64_t ids = (uint64_t)sr_train_config_ids_per_sample(cfg);
    if (cfg->batch_pool <= 0)
        return;
    uint64_t per_sample = 4 * (uint64_t)cfg->num_dense + 4 + 12 * F;
    per_sample = mem_add(m, per_sample, mem_mul3(m, ids > 0 ? ids : F, 8, 1));
    uint64_t batch = mem_add(m, mem_mul3(m, B, per_sample, 1), 8);
    mem_count(m, MEM_POOL, -1, mem_mul3(m, batch, (uint64_t)cfg->batch_pool, 1));
}

/* SR_HOST_MEMORY=BYTES, a test switch (docs/user-guide.md): a host of at
 * most BYTES, so that the memory checks can be met by small jobs. Anything
 * but a positive byte count is ignored with a warning (once). */
static uint64_t host_memory_switch(uint64_t bytes)
{
    static int warned;
    const char *env = getenv("SR_HOST_MEMORY");
    if (!env)
        return bytes;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(env, &end, 10);
    if (errno || end == env || *end || v == 0 || env[0] == '-') {
        if (!warned++)
            fprintf(stderr, "warning: SR_HOST_MEMORY=%s is not a positive byte count; ignored\n",
                    env);
        return bytes;
    }
    return v < bytes ? (uint64_t)v : bytes;
}

uint64_t sr_machine_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    unsigned long long limit;
    if (f) {
        if (fscanf(f, "%llu", &limit) == 1 && limit > 0 && limit < bytes)
            bytes = limit;
        fclose(f);
    }
    return host_memory_switch(bytes);
}

/* Tally m's largest part in words ("table 't0' (... rows x 16, with its
 * adagrad state) takes ...") into `what`; the hint that shrinks it. */
static const char *describe_part(const struct sr_train_config *cfg, const struct mem_tally *m,
                                 char *what, size_t cap)
{
    char part[64];
    sr_format_bytes_exact(part, sizeof part, m->largest);
    switch (m->part) {
    case MEM_TABLE:
        snprintf(what, cap, "table '%s' (%lld rows x %d, with its %s state) takes %s",
                 cfg->tables[m->table].name, (long long)cfg->tables[m->table].num_embeddings,
                 cfg->tables[m->table].embedding_dim, sr_optim_kind_name(cfg->emb_optimizer), part);
        return "fewer rows (--table-rows, or the config's \"rows\"), a smaller --embedding-dim, "
               "or more ranks with --sharding rw";
    case MEM_DENSE:
        snprintf(what, cap, "the MLPs (--bot-mlp, --top-mlp) take %s", part);
        return "narrower MLP layers";
    case MEM_BATCH:
        snprintf(what, cap,
                 "the batch buffers (--batch-size %d, --ids-per-feature up "
                 "to %lld ids a sample over %d features) take %s",
                 cfg->batch_size, (long long)sr_train_config_ids_per_sample(cfg), cfg->num_features,
                 part);
        return "a smaller --batch-size or --ids-per-feature";
    case MEM_POOL:
        snprintf(what, cap, "the batch pool (--batch-pool %d batches of --batch-size %d) takes %s",
                 cfg->batch_pool, cfg->batch_size, part);
        return "a smaller --batch-pool (a few batches suffice to take the generator out of "
               "the timing)";
    case MEM_STAGING:
        snprintf(what, cap,
                 "the checkpoints' host copy of the rank's tables and their state takes %s", part);
        return "--checkpoint-write sync on the CPU (written from the tables, no copy), more "
               "ranks, or smaller tables";
    default:
        snprintf(what, cap, "the evaluation buffers (--eval-samples %lld) take %s",
                 (long long)cfg->eval_samples, part);
        return "fewer --eval-samples";
    }
}

static int mem_error(const struct sr_train_config *cfg, const struct mem_tally *m, int rank,
                     uint64_t mem)
{
    char total[64], have[64], what[SR_NAME_MAX + 160];
    sr_format_bytes_exact(have, sizeof have, mem);
    if (m->overflow)
        return sr_error_set(SR_ERR_OOM,
                            "the job needs more than 2^64 bytes of memory on rank %d (this "
                            "machine has %s); HINT: check --table-rows, --embedding-dim, "
                            "--batch-size, --ids-per-feature, --eval-samples and the MLP widths",
                            rank, have);
    sr_format_bytes_exact(total, sizeof total, m->total);
    const char *hint = describe_part(cfg, m, what, sizeof what);
    return sr_error_set(SR_ERR_OOM,
                        "the job needs %s of memory on rank %d, more than the %s this machine "
                        "has: %s; HINT: %s",
                        total, rank, have, what, hint);
}

/* "0, 1, 2, 3", or the first 8 and "..." */
static void rank_list(char *buf, size_t cap, const int *ranks, int n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && i < 8 && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%d", i ? ", " : "", ranks[i]);
    if (n > 8 && at < cap)
        snprintf(buf + at, cap - at, ", ...");
}

/* Several ranks on one host: their sum, and the rank that needs the most
 * (`most`, rank `at`) with its largest part. The same words on every rank
 * of the host: each computed every tally. */
static int host_error(const struct sr_train_config *cfg, const struct mem_tally *sum,
                      const struct mem_tally *most, int at, const int *ranks, int n, int device,
                      uint64_t mem)
{
    char total[64], mine[64], have[64], what[SR_NAME_MAX + 160], list[96];
    rank_list(list, sizeof list, ranks, n);
    const char *of = device ? "host memory (--batch-pool, checkpoint staging)" : "memory";
    sr_format_bytes_exact(have, sizeof have, mem);
    if (sum->overflow)
        return sr_error_set(SR_ERR_OOM,
                            "the %d ranks on this host (%s) need more than 2^64 bytes of %s "
                            "together (this machine has %s); HINT: check --table-rows, "
                            "--embedding-dim, --batch-size, --ids-per-feature, --eval-samples "
                            "and the MLP widths",
                            n, list, of, have);
    sr_format_bytes_exact(total, sizeof total, sum->total);
    sr_format_bytes_exact(mine, sizeof mine, most->total);
    const char *hint = describe_part(cfg, most, what, sizeof what);
    return sr_error_set(SR_ERR_OOM,
                        "the %d ranks on this host (%s) need %s of %s together, more than the %s "
                        "this machine has (rank %d needs the most, %s, where %s); HINT: %s; or "
                        "fewer ranks on this host (the job spread over more hosts)",
                        n, list, total, of, have, at, mine, what, hint);
}

/* The job's memory; the host's batch pool and staging too when `host` is
 * set (the memory is the host's: staging only with overlap, see above). */
static void tally(const struct sr_train_config *cfg, const struct sr_plan *plan, int rank,
                  int world_size, int host, struct mem_tally *m)
{
    int W = world_size > 0 ? world_size : 1;
    count_tables(cfg, plan, rank, m);
    count_dp_extras(cfg, plan, W, m);
    count_dense(cfg, m);
    count_batch(cfg, plan, W, rank, m);
    count_eval(cfg, W, m);
    if (host)
        count_pool(cfg, m);
    if (host && stages_on_host(cfg, 0))
        count_staging(cfg, rank, m->part_sum[MEM_TABLE], m);
}

/* What the host holds of the job: the whole tally with the model there
 * (`device` 0); on a device, its batch pool and checkpoint staging. */
static void host_tally(const struct sr_train_config *cfg, const struct sr_plan *plan, int rank,
                       int world_size, int device, struct mem_tally *m)
{
    if (!device) {
        tally(cfg, plan, rank, world_size, 1, m);
        return;
    }
    count_pool(cfg, m);
    if (stages_on_host(cfg, 1)) {
        struct mem_tally tables = {0};
        count_tables(cfg, plan, rank, &tables);
        m->overflow |= tables.overflow;
        count_staging(cfg, rank, tables.part_sum[MEM_TABLE], m);
    }
}

static void estimate_of(const struct mem_tally *m, struct sr_memory_estimate *out)
{
    *out = (struct sr_memory_estimate){.tables = m->part_sum[MEM_TABLE],
                                       .batch_slots = m->batch_slots,
                                       .staging = m->part_sum[MEM_STAGING],
                                       .dense = m->part_sum[MEM_DENSE],
                                       .batch = m->part_sum[MEM_BATCH],
                                       .eval = m->part_sum[MEM_EVAL],
                                       .pool = m->part_sum[MEM_POOL],
                                       .total = m->total,
                                       .overflow = m->overflow};
}

void sr_train_config_memory(const struct sr_train_config *cfg, const struct sr_plan *plan, int rank,
                            int world_size, struct sr_memory_estimate *out)
{
    struct mem_tally m = {0};
    tally(cfg, plan, rank, world_size, 1, &m);
    if (cfg->device == SR_DEVICE_CHOICE_CUDA && stages_on_host(cfg, 1) && !stages_on_host(cfg, 0))
        count_staging(cfg, rank, m.part_sum[MEM_TABLE], &m);
    estimate_of(&m, out);
}

/* The host tallies of `ranks` (n of them) summed into `sum`; `most` is the
 * tally of the rank that needs the most (the first of them), `*at` its rank. */
static void host_sum(const struct sr_train_config *cfg, const struct sr_plan *plan, int world_size,
                     int device, const int *ranks, int n, struct mem_tally *sum,
                     struct mem_tally *most, int *at)
{
    for (int i = 0; i < n; i++) {
        struct mem_tally m = {0};
        host_tally(cfg, plan, ranks[i], world_size, device, &m);
        sum->total = mem_add(sum, sum->total, m.total);
        sum->batch_slots = mem_add(sum, sum->batch_slots, m.batch_slots);
        for (int p = 0; p < MEM_PARTS; p++)
            sum->part_sum[p] = mem_add(sum, sum->part_sum[p], m.part_sum[p]);
        sum->overflow |= m.overflow;
        if (i == 0 || m.total > most->total) {
            *most = m;
            *at = ranks[i];
        }
    }
}

void sr_train_config_host_memory(const struct sr_train_config *cfg, const struct sr_plan *plan,
                                 const int *ranks, int n_ranks, int world_size,
                                 uint64_t device_bytes, struct sr_memory_estimate *out)
{
    struct mem_tally sum = {0}, most = {0};
    int at = 0;
    host_sum(cfg, plan, world_size, device_bytes != 0, ranks, n_ranks, &sum, &most, &at);
    estimate_of(&sum, out);
}

int sr_train_config_check_host_memory(const struct sr_train_config *cfg, const struct sr_plan *plan,
                                      const int *ranks, int n_ranks, int world_size,
                                      uint64_t device_bytes)
{
    struct mem_tally sum = {0}, most = {0};
    SR_ASSERT(n_ranks > 0);
    int at = ranks[0];
    const uint64_t mem = sr_machine_memory();
    host_sum(cfg, plan, world_size, device_bytes != 0, ranks, n_ranks, &sum, &most, &at);
    if (!sum.overflow && sum.total <= mem)
        return SR_OK;
    if (n_ranks == 1) /* a rank alone on its host: its own message */
        return mem_error(cfg, &most, at, mem);
    return host_error(cfg, &sum, &most, at, ranks, n_ranks, device_bytes != 0, mem);
}

int sr_train_config_check_device_memory(const struct sr_train_config *cfg,
                                        const struct sr_plan *plan, int rank, int world_size,
                                        uint64_t device_bytes)
{
    struct mem_tally m = {0};
    tally(cfg, plan, rank, world_size, 0, &m);
    return m.overflow || m.total > device_bytes ? mem_error(cfg, &m, rank, device_bytes) : SR_OK;
}

int sr_train_config_check_memory(const struct sr_train_config *cfg, const struct sr_plan *plan,
                                 int rank, int world_size, uint64_t mem_bytes)
{
    int rc = mem_bytes ? sr_train_config_check_device_memory(cfg, plan, rank, world_size, mem_bytes)
                       : SR_OK;
    return rc ? rc : sr_train_config_check_host_memory(cfg, plan, &rank, 1, world_size, mem_bytes);
}
