/*
 * Sharded EBC: builds this rank's part of a plan (slots, local shard tables,
 * one local lookup per output-dist group, the sizes of every buffer at their
 * worst case) and its own batch context. dp tables live here too. The
 * stages of a step and forward / backward are in sharded_stages.c, batch
 * contexts in sharded_batch.c, gathering a table onto rank 0 in
 * sharded_gather.c, the exchanges in input_dist.c and output_dist.c; the
 * layouts in sharded_internal.h.
 *
 * Sizes of each batch context's buffers, per rank (S slots in all, n_me of
 * them mine, k = most slots of one feature on me, c = most owners one id is
 * copied to: cw pieces; cap_f = the most ids of feature f in one batch, the
 * caller's bound or max_values):
 *
 *   send      S*B lengths + max_values * c ids (+ weights), in words
 *   recv      W * (n_me*B lengths + here ids (+ weights)), here = min(Σ over
 *             my slots of cap_f, max_values * k): a source sends a slot at most
 *             its feature's ids, so a rank's buffers follow the tables it owns
 *   group g   W*B bags per slot, W * here_g ids (dp: B, max_values)
 *
 * The tables the sparse-dist ops read (device/ops_sparse_dist.h: slots per
 * feature and rank, the counts message's layout, each group's slot positions
 * and source rows, the output dist's column pieces) follow from the plan:
 * built here at init and uploaded to the device once.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/rng.h"
#include "embed/sharded_internal.h"

/* ---- argument checks ----------------------------------------------------- */

static int check_comms(const struct sr_sharded_ebc_comms *c, const struct sr_plan *plan)
{
    if (!c || !c->sparse)
        return sr_error_set(SR_ERR_INVALID_ARG, "sharded EBC: no sparse communicator");
    if (!sr_dtype_is_wire(c->pooled_dtype))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: pooled wire dtype %s; HINT: use fp32, fp16 or bf16",
                            sr_dtype_name(c->pooled_dtype));
    const int W = sr_comm_size(c->sparse), L = sr_comm_local_size(c->sparse);
    const int rank = sr_comm_rank(c->sparse);
    if (L < 1 || W % L != 0 || sr_comm_node(c->sparse) != rank / L ||
        sr_comm_local_rank(c->sparse) != rank % L)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: rank %d is on node %d (local rank %d) but plans need "
                            "node r / L with L = %d; HINT: launch ranks node by node (mpirun "
                            "--map-by node:PE=1 is not that) or set --ranks-per-node",
                            rank, sr_comm_node(c->sparse), sr_comm_local_rank(c->sparse), L);
    int twrw = 0;
    for (int t = 0; t < plan->num_tables; t++)
        twrw |= plan->tables[t].type == SR_SHARDING_TYPE_TABLE_ROW_WISE;
    if (!twrw)
        return SR_OK;
    if (!c->node || !c->cross || sr_comm_size(c->node) != L || sr_comm_rank(c->node) != rank % L ||
        sr_comm_size(c->cross) != W / L || sr_comm_rank(c->cross) != rank / L)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: the plan has twrw tables but the node/cross "
                            "communicators are missing or not the node's %d ranks and the %d "
                            "nodes' same-local-rank ranks; HINT: pass sr_comm_split_node and "
                            "sr_comm_split_cross of the sparse communicator",
                            L, W / L);
    return SR_OK;
}

static int check_args(struct sr_device *dev, const struct sr_optim_config *o, int B,
                      int64_t max_values, int F)
{
    if (!dev || !dev->emb || !dev->sparse_dist)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "sharded EBC: device %s has no embedding or sparse-dist ops",
                            dev ? dev->name : "(none)");
    if ((unsigned)o->kind > SR_OPTIM_ADAM)
        return sr_error_set(SR_ERR_INVALID_ARG, "sharded EBC: unknown optimizer %d", (int)o->kind);
    if (B < 1 || (int64_t)B * F >= INT32_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG, "sharded EBC: batch %d out of range", B);
    if (max_values < 0 || max_values >= INT32_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: max_values %lld out of range [0, 2^31)",
                            (long long)max_values);
    return SR_OK;
}

/* Row-wise Adagrad keeps one value per row from the mean of g^2 over all D
 * columns: a column piece alone cannot compute it. */
static int check_optim_plan(const struct sr_optim_config *o, const struct sr_plan *plan)
{
    for (int t = 0; o->kind == SR_OPTIM_ROWWISE_ADAGRAD && t < plan->num_tables; t++)
        if (plan->tables[t].type == SR_SHARDING_TYPE_COLUMN_WISE && plan->tables[t].num_shards > 1)
            return sr_error_set(SR_ERR_UNSUPPORTED,
                                "sharded EBC: table '%s' is cw in %d pieces, but rowwise_adagrad "
                                "needs whole rows; HINT: use adagrad, or shard it tw/rw/twrw",
                                plan->tables[t].name, plan->tables[t].num_shards);
    return SR_OK;
}

/* ---- slots --------------------------------------------------------------- */

enum group_kind sr_sharded_group_of(enum sr_sharding_type type)
{
    switch (type) {
    case SR_SHARDING_TYPE_DATA_PARALLEL:
        return GROUP_DP;
    case SR_SHARDING_TYPE_ROW_WISE:
        return GROUP_RW;
    case SR_SHARDING_TYPE_HYBRID: /* its cold rows */
        return GROUP_HYB;
    case SR_SHARDING_TYPE_TABLE_ROW_WISE:
        return GROUP_TWRW;
    default:
        return GROUP_A2A;
    }
}

static int count_slots(const struct sr_sharded_ebc *s)
{
    int n = 0;
    for (int f = 0; f < s->cfg.num_features; f++) {
        const struct sr_table_plan *tp = &s->plan->tables[s->cfg.feature_table[f]];
        if (tp->type != SR_SHARDING_TYPE_DATA_PARALLEL)
            n += tp->num_shards;
    }
    return n;
}

/* Every rank's slots, their message positions and their group columns. */
static void build_slots(struct sr_sharded_ebc *s)
{
    const int F = s->cfg.num_features, W = s->W;
    s->num_slots = count_slots(s);
    s->slots = sr_calloc((size_t)(s->num_slots ? s->num_slots : 1), sizeof *s->slots);
    s->first_slot = sr_calloc((size_t)F, sizeof *s->first_slot);
    s->block = sr_calloc((size_t)F, sizeof *s->block);
    s->nslots_at = sr_calloc((size_t)W, sizeof *s->nslots_at);
    s->group_out = sr_calloc((size_t)GROUP_COUNT * W, sizeof *s->group_out);
    int n = 0;
    for (int f = 0; f < F; f++) {
        const int t = s->cfg.feature_table[f];
        const struct sr_table_plan *tp = &s->plan->tables[t];
        const int64_t E = s->cfg.tables[t].num_embeddings;
        s->first_slot[f] = tp->type == SR_SHARDING_TYPE_DATA_PARALLEL ? -1 : n;
        s->block[f] = tp->type == SR_SHARDING_TYPE_ROW_WISE || tp->type == SR_SHARDING_TYPE_HYBRID
                          ? sr_plan_block_rows(E, W)
                      : tp->type == SR_SHARDING_TYPE_TABLE_ROW_WISE ? sr_plan_block_rows(E, s->L)
                                                                    : 0;
        for (int j = 0; s->first_slot[f] >= 0 && j < tp->num_shards; j++, n++) {
            const struct sr_shard *sh = &tp->shards[j];
            struct slot *sl = &s->slots[n];
            *sl = (struct slot){.feature = f,
                                .table = t,
                                .shard = j,
                                .rank = sh->rank,
                                .group = sr_sharded_group_of(tp->type),
                                .row_offset = sh->row_offset,
                                .rows = sh->rows,
                                .col_offset = sh->col_offset,
                                .cols = sh->cols};
            sl->pos = s->nslots_at[sh->rank]++;
            sl->gcol = s->group_out[sl->group * W + sh->rank];
            s->group_out[sl->group * W + sh->rank] += sh->cols;
        }
    }
    s->max_nslots = 1;
    for (int r = 0; r < W; r++)
        if (s->nslots_at[r] > s->max_nslots)
            s->max_nslots = s->nslots_at[r];
    s->slot_at = sr_calloc((size_t)W * s->max_nslots, sizeof *s->slot_at);
    for (int i = 0; i < s->num_slots; i++)
        s->slot_at[s->slots[i].rank * s->max_nslots + s->slots[i].pos] = i;
}

/* Most slots of one feature on this rank within group g (g < 0: any group). */
static int max_copies_here(const struct sr_sharded_ebc *s, int g)
{
    int best = 0;
    for (int f = 0; f < s->cfg.num_features; f++) {
        int k = 0;
        for (int i = 0; s->first_slot[f] >= 0 && i < s->num_slots; i++)
            k += s->slots[i].feature == f && s->slots[i].rank == s->rank &&
                 (g < 0 || (int)s->slots[i].group == g);
        if (k > best)
            best = k;
    }
    return best;
}

/* The most ids one source sends this rank's slots of group g (g < 0: any
 * group) in one batch: each slot at most its feature's cap, and never more
 * than max_values for each copy of a feature. */
static int64_t ids_here(const struct sr_sharded_ebc *s, int g)
{
    int64_t sum = 0;
    for (int i = 0; i < s->num_slots; i++)
        if (s->slots[i].rank == s->rank && (g < 0 || (int)s->slots[i].group == g))
            sum += s->feature_cap[s->slots[i].feature];
    const int64_t worst = s->max_values * max_copies_here(s, g);
    return sum < worst ? sum : worst;
}

/* ---- local shard tables --------------------------------------------------- */

static size_t floats_padded(int64_t n)
{
    return ((size_t)n + 15) & ~(size_t)15;
}

/* A device copy of a host array, made at init (the host array may go at once). */
static void *upload(struct sr_device *dev, const void *host, size_t bytes)
{
    void *d = sr_dev_alloc(dev, bytes ? bytes : 1);
    sr_dev_copy(dev, d, host, bytes, NULL);
    sr_dev_sync(dev, NULL);
    return d;
}

/* upload(), freed with the EBC. */
static void *upload_meta(struct sr_sharded_ebc *s, const void *host, size_t bytes)
{
    SR_ASSERT(s->num_dev_meta < (int)(sizeof s->dev_meta / sizeof s->dev_meta[0]));
    return s->dev_meta[s->num_dev_meta++] = upload(s->dev, host, bytes);
}

static void fill_state(struct sr_sharded_ebc *s, struct sr_emb_table *tab, size_t sf)
{
    if (sf)
        sr_op_emb_fill(s->dev, tab->state, (int64_t)sf,
                       s->optim.kind == SR_OPTIM_ADAM ? 0.0f : s->optim.initial_accumulator, NULL);
}

/* Allocate a local shard and draw its rows as the global table's (ebc.h). */
static void init_shard(struct sr_sharded_ebc *s, struct sr_emb_table *tab, int t,
                       const struct sr_shard *sh, uint64_t seed, int dp)
{
    const struct sr_table_config *tc = &s->cfg.tables[t];
    int per_row = 0;
    int per_elem = sr_optim_state_per_element(s->optim.kind, &per_row);
    tab->dtype = dp ? SR_DTYPE_F32 : tc->storage; /* dp replicas stay fp32 (sharded_ebc.h) */
    size_t wf =
        floats_padded(((int64_t)sr_emb_elem_bytes(tab->dtype) * sh->rows * sh->cols + 3) / 4);
    size_t sf = per_row ? (size_t)sh->rows : (size_t)per_elem * sh->rows * sh->cols;
    tab->rows = sh->rows;
    tab->dim = sh->cols;
    char what[SR_NAME_MAX + 128];
    if (sh->rows == tc->num_embeddings && sh->cols == tc->embedding_dim) /* whole, as ebc.c */
        snprintf(what, sizeof what, "table '%s' (%lld rows x %d, weights and optimizer state)",
                 tc->name, (long long)sh->rows, sh->cols);
    else
        snprintf(what, sizeof what,
                 "table '%s' shard (%lld rows x %d from row %lld, weights and optimizer state)",
                 tc->name, (long long)sh->rows, sh->cols, (long long)sh->row_offset);
    tab->weight = sr_dev_alloc_named(s->dev, sizeof(float) * (wf + sf + 16), what);
    tab->state = sf ? (float *)tab->weight + wf : NULL;
    if (sr_sharded_is_replica(s, t)) { /* a hybrid table's hot rows, drawn as its rows */
        sr_sharded_hybrid_init_replica(s, tab, t, seed);
        fill_state(s, tab, sf);
        return;
    }

    char name[SR_NAME_MAX + 16];
    snprintf(name, sizeof name, "emb.%s.weight", tc->name);
    const uint64_t stream = sr_rng_stream_of(name);
    const double bound = sqrt(1.0 / (double)tc->num_embeddings);
    const int D = tc->embedding_dim;
    /* stochastic rounding draws by the table's element, whatever the plan */
    tab->stream = stream;
    tab->global_row0 = sh->row_offset;
    tab->global_col0 = sh->col_offset;
    tab->global_dim = D;
    /* one launch for the shard, a column piece too (its columns of each row) */
    sr_op_emb_init_uniform(s->dev, tab->weight, tab->dtype, sh->rows, sh->cols, sh->row_offset,
                           sh->col_offset, D, seed, stream, -bound, bound, NULL);
    fill_state(s, tab, sf);
}

/* Local tables of group g: dp tables (my replica), else the shards I own. */
static void group_tables(struct sr_sharded_ebc *s, struct group *g, uint64_t seed)
{
    const int T = s->cfg.num_tables;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            g->tables = sr_calloc((size_t)(n ? n : 1), sizeof *g->tables);
            g->table_of = sr_calloc((size_t)(n ? n : 1), sizeof *g->table_of);
            g->shard_of = sr_calloc((size_t)(n ? n : 1), sizeof *g->shard_of);
            g->row_base = sr_calloc((size_t)(n ? n : 1), sizeof *g->row_base);
            g->num_tables = n;
            n = 0;
        }
        for (int t = 0; t < T; t++) {
            const struct sr_table_plan *tp = &s->plan->tables[t];
            if (sr_sharded_group_of(tp->type) != g->kind)
                continue;
            for (int j = 0; j < tp->num_shards; j++) {
                if (tp->shards[j].rank != s->rank)
                    continue;
                if (pass == 1) {
                    g->table_of[n] = t;
                    g->shard_of[n] = j;
                    g->row_base[n] = tp->shards[j].row_offset;
                    init_shard(s, &g->tables[n], t, &tp->shards[j], seed, g->kind == GROUP_DP);
                }
                n++;
            }
        }
    }
}

int sr_sharded_local_table(const struct group *g, int t, int shard)
{
    for (int i = 0; i < g->num_tables; i++)
        if (g->table_of[i] == t && g->shard_of[i] == shard)
            return i;
    SR_ABORT("no local shard %d of table %d", shard, t);
}

/* Local features of group g: dp features, else my slots of the group. */
static void group_features(struct sr_sharded_ebc *s, struct group *g)
{
    int n = 0, cap = s->cfg.num_features + s->num_slots + 1;
    g->slot_of = sr_calloc((size_t)cap, sizeof *g->slot_of);
    g->features = sr_calloc((size_t)cap, sizeof *g->features);
    if (g->kind == GROUP_DP) {
        for (int f = 0; f < s->cfg.num_features; f++) {
            int t = s->cfg.feature_table[f];
            if (s->first_slot[f] >= 0)
                continue;
            g->slot_of[n] = f;
            g->features[n] = (struct sr_emb_feature){
                .table = sr_sharded_local_table(g, t, s->rank), .col = g->out_dim, .mean = 0};
            g->out_dim += s->cfg.tables[t].embedding_dim;
            n++;
        }
    } else {
        for (int p = 0; p < s->nslots_at[s->rank]; p++) {
            const struct slot *sl = &s->slots[s->slot_at[s->rank * s->max_nslots + p]];
            if (sl->group != g->kind)
                continue;
            g->slot_of[n] = s->slot_at[s->rank * s->max_nslots + p];
            g->features[n] =
                (struct sr_emb_feature){.table = sr_sharded_local_table(g, sl->table, sl->shard),
                                        .col = sl->gcol,
                                        .mean = 0};
            n++;
        }
        g->out_dim = s->group_out[g->kind * s->W + s->rank];
    }
    g->layout.num_features = n;
}

/* An exchanged group's tables for unpack: each local feature's slot position
 * and each source's first batch row. */
static void group_sources(struct sr_sharded_ebc *s, struct group *g)
{
    const int F = g->layout.num_features;
    int32_t *pos = sr_calloc((size_t)F + 1, sizeof *pos);
    int32_t *row_of = sr_calloc((size_t)s->W, sizeof *row_of);
    for (int j = 0; j < F; j++)
        pos[j] = s->slots[g->slot_of[j]].pos;
    for (int src = 0; src < s->W; src++)
        row_of[src] = sr_sharded_perm(s, g->kind, src) * s->B;
    g->pos = upload(s->dev, pos, sizeof *pos * (size_t)F);
    g->row_of = upload(s->dev, row_of, sizeof *row_of * (size_t)s->W);
    sr_free(pos);
    sr_free(row_of);
}

static int build_group(struct sr_sharded_ebc *s, enum group_kind kind, uint64_t seed)
{
    struct group *g = &s->groups[kind];
    g->kind = kind;
    for (int t = 0; t < s->cfg.num_tables; t++)
        g->active |= sr_sharded_group_of(s->plan->tables[t].type) == kind;
    g->batch = kind == GROUP_DP ? s->B : s->W * s->B;
    int64_t maxv = kind == GROUP_DP ? s->max_values : (int64_t)s->W * ids_here(s, kind);
    if (maxv >= INT32_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: rank %d may receive %lld ids in one step (%d ranks x "
                            "%lld); HINT: lower the batch size or spread the tables",
                            s->rank, (long long)maxv, s->W, (long long)(maxv / s->W));
    group_tables(s, g, seed);
    group_features(s, g);
    int max_dim = 1;
    for (int i = 0; i < g->num_tables; i++)
        max_dim = g->tables[i].dim > max_dim ? g->tables[i].dim : max_dim;
    g->layout = (struct sr_emb_layout){.num_tables = g->num_tables,
                                       .tables = g->tables,
                                       .num_features = g->layout.num_features,
                                       .features = g->features,
                                       .out_dim = g->out_dim,
                                       .max_dim = max_dim,
                                       .max_batch = g->batch,
                                       .max_values = maxv,
                                       .optim = s->optim.kind,
                                       .stochastic = s->cfg.stochastic_rounding,
                                       .seed = seed};
    g->workspace_bytes = sr_op_emb_workspace_bytes(s->dev, &g->layout);
    if (kind != GROUP_DP) /* a batch's buffers: sharded_batch.c */
        group_sources(s, g);
    return SR_OK;
}

/* ---- exchange sizes (each batch context's buffers: sharded_batch.c) ------- */

static void size_input_dist(struct sr_sharded_ebc *s)
{
    const int W = s->W, S = s->num_slots;
    int copies = 1;
    s->id_words = 1;
    for (int i = 0; i < S; i++) {
        if (s->slots[i].rows > ((int64_t)1 << 32))
            s->id_words = 2;
        if (s->slots[i].group == GROUP_A2A) {
            const struct sr_table_plan *tp = &s->plan->tables[s->slots[i].table];
            copies = tp->num_shards > copies ? tp->num_shards : copies;
        }
    }
    const size_t per_id = (size_t)s->id_words + 1;
    s->send_cap = (size_t)S * s->B + (size_t)s->max_values * copies * per_id + 1;
    s->recv_cap =
        (size_t)W * ((size_t)s->nslots_at[s->rank] * s->B + (size_t)ids_here(s, -1) * per_id) + 1;
    s->count_displ = sr_calloc((size_t)W + 1, sizeof *s->count_displ);
    for (int r = 0; r < W; r++)
        s->count_displ[r + 1] = s->count_displ[r] + s->nslots_at[r] + 1;
}

/* The plan's tables for the input-dist ops (ops_sparse_dist.h), uploaded. */
static void build_sd_layout(struct sr_sharded_ebc *s)
{
    const int F = s->cfg.num_features, W = s->W;
    const struct group *dp = &s->groups[GROUP_DP];
    int32_t *nsh = sr_calloc((size_t)F + 1, sizeof *nsh);
    int32_t *mean = sr_calloc((size_t)F + 1, sizeof *mean);
    for (int f = 0; f < F; f++) {
        const int t = s->cfg.feature_table[f];
        nsh[f] = s->first_slot[f] < 0 ? 0 : s->plan->tables[t].num_shards;
        mean[f] = s->cfg.tables[t].pooling == SR_POOLING_MEAN;
    }
    struct sr_sparse_dist_layout *l = &s->sd_layout;
    *l = (struct sr_sparse_dist_layout){
        .num_features = F,
        .batch = s->B,
        .world = W,
        .num_slots = s->num_slots,
        .max_nslots = s->max_nslots,
        .nslots_here = s->nslots_at[s->rank],
        .num_dp = dp->layout.num_features,
        .id_words = s->id_words,
        .count_words = s->count_displ[W] + dp->layout.num_features,
        .first_slot = upload_meta(s, s->first_slot, sizeof(int32_t) * F),
        .num_shards = upload_meta(s, nsh, sizeof *nsh * F),
        .block = upload_meta(s, s->block, sizeof(int64_t) * F),
        .mean = upload_meta(s, mean, sizeof *mean * F),
        .dp_feature = upload_meta(s, dp->slot_of, sizeof(int32_t) * dp->layout.num_features),
        .slot_at = upload_meta(s, s->slot_at, sizeof(int32_t) * W * s->max_nslots),
        .count_displ = upload_meta(s, s->count_displ, sizeof(int64_t) * (W + 1))};
    SR_ASSERT(s->num_dev_meta < (int)(sizeof s->dev_meta / sizeof s->dev_meta[0]));
    l->work = s->dev_meta[s->num_dev_meta++] =
        sr_dev_alloc(s->dev, sizeof(int64_t) * (size_t)sr_sparse_dist_work_words(l));
    sr_free(nsh);
    sr_free(mean);
}

/* 16-bit staging for compressed output dists (output_wire.c): the largest
 * fp32 buffer any of its collectives sends or receives. */
static void alloc_wire(struct sr_sharded_ebc *s, size_t a2a_recv, size_t twrw_recv)
{
    const int W = s->W;
    s->wire = s->comms.pooled_dtype;
    s->wire_scounts = sr_calloc((size_t)W, sizeof(size_t));
    s->wire_rcounts = sr_calloc((size_t)W, sizeof(size_t));
    s->wire_displs = sr_calloc((size_t)W, sizeof(size_t));
    if (s->wire == SR_DTYPE_F32)
        return;
    size_t cap = a2a_recv > twrw_recv ? a2a_recv : twrw_recv;
    for (int k = GROUP_A2A; k < GROUP_COUNT; k++) {
        size_t n = (size_t)s->groups[k].batch * s->groups[k].out_dim; /* W*B rows */
        cap = n > cap ? n : cap;
    }
    s->wire_cap = cap;
    /* where the communicator moves data from; pinned host memory the device's
     * cast ops write and read for a host-memory one */
    const size_t bytes = sizeof(uint16_t) * (cap + 1);
    s->wire_on_device = sr_comm_memory(s->comms.sparse) == SR_COMM_MEMORY_DEVICE;
    s->wire_send =
        s->wire_on_device ? sr_dev_alloc(s->dev, bytes) : sr_dev_alloc_host(s->dev, bytes);
    s->wire_recv =
        s->wire_on_device ? sr_dev_alloc(s->dev, bytes) : sr_dev_alloc_host(s->dev, bytes);
    if (s->wire_on_device)
        s->wire_done = sr_dev_event_create(s->dev);
}

/* Pieces of the slots of group g that rank r owns, in a (B, out_g(r)) block. */
static int rank_pieces(const struct sr_sharded_ebc *s, struct sr_sparse_dist_piece *pc, int n,
                       enum group_kind g, int r, int64_t block)
{
    for (int p = 0; p < s->nslots_at[r]; p++) {
        const struct slot *sl = &s->slots[s->slot_at[r * s->max_nslots + p]];
        if (sl->group != g)
            continue;
        pc[n++] =
            (struct sr_sparse_dist_piece){.block = block,
                                          .width = s->group_out[g * s->W + r],
                                          .gcol = sl->gcol,
                                          .fcol = s->feature_col[sl->feature] + sl->col_offset,
                                          .cols = sl->cols,
                                          .feature = sl->feature};
    }
    return n;
}

/* The output dist's column map over od_buf's blocks (output_dist.c), uploaded. */
static void build_pieces(struct sr_sharded_ebc *s)
{
    const int W = s->W, B = s->B;
    const struct group *dp = &s->groups[GROUP_DP];
    struct sr_sparse_dist_piece *pc =
        sr_calloc((size_t)s->cfg.num_features + 3 * (size_t)s->num_slots + 1, sizeof *pc);
    int *hot_piece = sr_calloc((size_t)s->hyb.num_features + 1, sizeof *hot_piece);
    int n = 0;
    for (int j = 0; j < dp->layout.num_features; j++) {
        const int f = dp->slot_of[j], hot = s->hyb.expanded && f >= s->hyb.user_cfg.num_features;
        if (hot)
            hot_piece[f - s->hyb.user_cfg.num_features] = n; /* added by its cold piece */
        pc[n++] = (struct sr_sparse_dist_piece){
            .block = 0,
            .width = dp->out_dim,
            .gcol = dp->features[j].col,
            .fcol = s->feature_col[f],
            .cols = s->cfg.tables[s->cfg.feature_table[f]].embedding_dim,
            .feature = f,
            .add = hot ? SR_PIECE_ADDED : SR_PIECE_PLAIN};
    }
    int64_t off = (int64_t)B * dp->out_dim;
    for (int r = 0; r < W; r++) {
        n = rank_pieces(s, pc, n, GROUP_A2A, r, off);
        off += (int64_t)B * s->group_out[GROUP_A2A * W + r];
    }
    n = rank_pieces(s, pc, n, GROUP_RW, s->rank, off);
    off += (int64_t)B * s->groups[GROUP_RW].out_dim;
    for (int m = 0; m < s->nodes; m++) {
        n = rank_pieces(s, pc, n, GROUP_TWRW, m * s->L, off);
        off += (int64_t)B * s->group_out[GROUP_TWRW * W + m * s->L];
    }
    const int hyb0 = n;
    n = rank_pieces(s, pc, n, GROUP_HYB, s->rank, off);
    off += (int64_t)B * s->groups[GROUP_HYB].out_dim;
    for (int q = hyb0; s->hyb.num_features && q < n; q++) /* hybrid: cold + hot */
        if (s->hyb.hot_of[pc[q].feature] >= 0)
            pc[q].add = 1 + hot_piece[s->hyb.hot_of[pc[q].feature]];
    sr_free(hot_piece);
    s->sd_cols = (struct sr_sparse_dist_cols){.num_pieces = n,
                                              .pieces = upload_meta(s, pc, sizeof *pc * n),
                                              .batch = B,
                                              .out_dim = s->out_dim,
                                              .num_features = s->cfg.num_features,
                                              .buf_floats = off};
    sr_free(pc);
}

static void size_output_dist(struct sr_sharded_ebc *s)
{
    const int W = s->W, B = s->B;
    size_t a = 0, t = 0;
    for (int r = 0; r < W; r++)
        a += (size_t)s->group_out[GROUP_A2A * W + r];
    for (int m = 0; m < s->nodes; m++)
        t += (size_t)s->group_out[GROUP_TWRW * W + m * s->L];
    const size_t ndp = (size_t)B * s->groups[GROUP_DP].out_dim;
    const size_t nrw = (size_t)B * s->groups[GROUP_RW].out_dim;
    s->od_off[GROUP_DP] = 0;
    s->od_off[GROUP_A2A] = ndp;
    s->od_off[GROUP_RW] = ndp + a * B;
    s->od_off[GROUP_TWRW] = ndp + a * B + nrw;
    s->od_off[GROUP_HYB] = ndp + a * B + nrw + t * B;
    s->od_floats = s->od_off[GROUP_HYB] + (size_t)B * s->groups[GROUP_HYB].out_dim;
    s->twrw_mid_floats = (size_t)s->nodes * B * s->groups[GROUP_TWRW].out_dim;
    build_pieces(s);
    SR_ASSERT(s->sd_cols.buf_floats == (int64_t)s->od_floats);
    s->a_counts = sr_calloc((size_t)W, sizeof(size_t));
    s->a_displs = sr_calloc((size_t)W, sizeof(size_t));
    s->b_counts = sr_calloc((size_t)W, sizeof(size_t));
    s->b_displs = sr_calloc((size_t)W, sizeof(size_t));
    alloc_wire(s, a * B, t * B);
}

static int alloc_dp(struct sr_sharded_ebc *s)
{
    struct group *g = &s->groups[GROUP_DP];
    if (g->num_tables == 0)
        return SR_OK;
    s->dp_ops = sr_emb_dp_ops_get(s->dev);
    if (!s->dp_ops)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "sharded EBC: device %s has no ops for dp tables; HINT: shard "
                            "small tables tw instead",
                            s->dev->name);
    s->dp_grad = sr_calloc((size_t)g->num_tables, sizeof *s->dp_grad);
    s->dp_counts = sr_calloc((size_t)g->num_tables, sizeof *s->dp_counts);
    for (int i = 0; i < g->num_tables; i++)
        s->dp_len += (size_t)g->tables[i].rows * (g->tables[i].dim + 1);
    s->dp_buf = sr_dev_alloc_zero(s->dev, sizeof(float) * s->dp_len);
    size_t off = 0;
    for (int i = 0; i < g->num_tables; i++) {
        s->dp_grad[i] = s->dp_buf + off;
        off += (size_t)g->tables[i].rows * g->tables[i].dim;
        s->dp_counts[i] = s->dp_buf + off;
        off += (size_t)g->tables[i].rows;
    }
    return SR_OK;
}

/* ---- init / free ---------------------------------------------------------- */

/* Pooled columns of the caller's features (a hot feature's: sr_sharded_hybrid_inherit). */
static void build_features(struct sr_sharded_ebc *s)
{
    const int F = s->cfg.num_features, Fu = sr_sharded_user_cfg(s)->num_features;
    s->feature_col = sr_calloc((size_t)F, sizeof *s->feature_col);
    for (int f = 0; f < Fu; f++) {
        const struct sr_table_config *tc = &s->cfg.tables[s->cfg.feature_table[f]];
        s->feature_col[f] = s->out_dim;
        s->out_dim += tc->embedding_dim;
    }
    sr_sharded_hybrid_inherit(s);
}

int sr_sharded_ebc_init(struct sr_sharded_ebc **out, struct sr_device *dev,
                        const struct sr_sharded_ebc_comms *comms, const struct sr_ebc_config *cfg,
                        const struct sr_plan *plan, const struct sr_optim_config *optim, int B,
                        int64_t max_values, const int64_t *feature_max_values, uint64_t seed)
{
    *out = NULL;
    struct sr_optim_config o = optim ? *optim : sr_optim_config_default(SR_OPTIM_SGD);
    int rc = sr_ebc_config_validate(cfg);
    if (!rc)
        rc = check_args(dev, &o, B, max_values, cfg->num_features);
    for (int f = 0; !rc && feature_max_values && f < cfg->num_features; f++)
        if (feature_max_values[f] < 0)
            rc = sr_error_set(SR_ERR_INVALID_ARG,
                              "sharded EBC: feature '%s' bounded to %lld ids a batch (negative)",
                              cfg->feature_names[f], (long long)feature_max_values[f]);
    if (!rc && (!comms || !comms->sparse))
        rc = sr_error_set(SR_ERR_INVALID_ARG, "sharded EBC: no sparse communicator");
    if (!rc)
        rc = sr_plan_validate(plan, cfg, sr_comm_size(comms->sparse),
                              sr_comm_local_size(comms->sparse));
    if (!rc)
        rc = check_comms(comms, plan);
    if (!rc)
        rc = check_optim_plan(&o, plan);
    if (rc)
        return rc;

    struct sr_sharded_ebc *s = sr_calloc(1, sizeof *s);
    s->dev = dev;
    s->comms = *comms;
    s->optim = o;
    s->B = B;
    s->max_values = max_values;
    s->W = sr_comm_size(comms->sparse);
    s->L = sr_comm_local_size(comms->sparse);
    s->nodes = s->W / s->L;
    s->rank = sr_comm_rank(comms->sparse);
    s->node = s->rank / s->L;
    s->local_rank = s->rank % s->L;
    rc = sr_sharded_hybrid_expand(s, cfg, plan);
    if (rc) {
        sr_sharded_ebc_free(s);
        return rc;
    }
    s->feature_cap = sr_calloc((size_t)s->cfg.num_features + 1, sizeof *s->feature_cap);
    for (int f = 0; f < cfg->num_features; f++) {
        const int64_t cap = feature_max_values ? feature_max_values[f] : max_values;
        s->feature_cap[f] = cap < max_values ? cap : max_values;
        s->caps_given |= s->feature_cap[f] < max_values;
    }
    build_features(s);
    build_slots(s);
    for (int k = 0; !rc && k < GROUP_COUNT; k++)
        rc = build_group(s, (enum group_kind)k, seed);
    if (!rc)
        rc = alloc_dp(s);
    if (rc) {
        sr_sharded_ebc_free(s);
        return rc;
    }
    sr_sharded_local_init(s);
    sr_sharded_hybrid_upload(s);
    s->sd = dev->sparse_dist;
    size_input_dist(s);
    build_sd_layout(s);
    size_output_dist(s);
    s->stats.id_words = s->id_words;
    s->batch0 = sr_sharded_batch_alloc(s);
    s->batch0->internal = 1;
    if (s->local) /* forward and backward bind the caller's buffers */
        sr_sharded_batch_local_blocks(s->batch0, 0);
    sr_dev_sync(dev, NULL);
    *out = s;
    return SR_OK;
}

static void free_group(struct sr_device *dev, struct group *g)
{
    for (int i = 0; g->tables && i < g->num_tables; i++)
        sr_dev_free(dev, g->tables[i].weight);
    sr_dev_free(dev, g->pos);
    sr_dev_free(dev, g->row_of);
    void *host[] = {g->tables, g->table_of, g->shard_of, g->row_base, g->slot_of, g->features};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        sr_free(host[i]);
}

void sr_sharded_ebc_free(struct sr_sharded_ebc *s)
{
    if (!s)
        return;
    if (s->num_batches)
        SR_ABORT("sharded EBC freed with %d batch contexts alive; free them first "
                 "(sr_sharded_ebc_batch_free)",
                 s->num_batches);
    sr_sharded_batch_release(s->batch0);
    for (int k = 0; k < GROUP_COUNT; k++)
        free_group(s->dev, &s->groups[k]);
    sr_dev_free(s->dev, s->dp_buf);
    for (int i = 0; i < s->num_dev_meta; i++)
        sr_dev_free(s->dev, s->dev_meta[i]);
    void *host[] = {s->feature_cap,  s->feature_col, s->slots,         s->first_slot,
                    s->block,        s->nslots_at,   s->slot_at,       s->group_out,
                    s->count_displ,  s->a_counts,    s->a_displs,      s->b_counts,
                    s->b_displs,     s->dp_grad,     s->dp_counts,     s->wire_scounts,
                    s->wire_rcounts, s->wire_displs, s->local_features};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        sr_free(host[i]);
    if (s->wire_on_device) {
        sr_dev_event_destroy(s->dev, s->wire_done);
        sr_dev_free(s->dev, s->wire_send);
        sr_dev_free(s->dev, s->wire_recv);
    } else {
        sr_dev_free_host(s->dev, s->wire_send);
        sr_dev_free_host(s->dev, s->wire_recv);
    }
    sr_sharded_hybrid_free(s);
    sr_plan_free(s->plan);
    sr_ebc_config_release(&s->cfg);
    sr_free(s);
}

int sr_sharded_ebc_out_dim(const struct sr_sharded_ebc *s)
{
    return s->out_dim;
}

const struct sr_ebc_config *sr_sharded_ebc_config(const struct sr_sharded_ebc *s)
{
    return sr_sharded_user_cfg(s);
}

void sr_sharded_ebc_stats(const struct sr_sharded_ebc *s, struct sr_sharded_ebc_stats *out)
{
    *out = s->stats;
}

/* ---- the optimizer's learning rate and step ----------------------------------- */

struct sr_emb_update sr_sharded_update_of(const struct sr_sharded_ebc *s, float lr, int64_t step)
{
    return (struct sr_emb_update){
        .optim = s->optim, .lr = lr, .step = step, .lr_dev = s->lr_dev, .step_dev = s->step_dev};
}

void sr_sharded_ebc_set_update_scalars(struct sr_sharded_ebc *s, const float *lr,
                                       const int64_t *step)
{
    s->lr_dev = lr;
    s->step_dev = step;
}

/* ---- dp tables ------------------------------------------------------------- */

float *sr_sharded_ebc_dp_grad_buffer(struct sr_sharded_ebc *s, size_t *n)
{
    *n = s->dp_len;
    return s->dp_len ? s->dp_buf : NULL;
}

void sr_sharded_ebc_dp_update(struct sr_sharded_ebc *s, float lr, int64_t step, sr_stream_t stream)
{
    struct group *dp = &s->groups[GROUP_DP];
    struct sr_emb_update u = sr_sharded_update_of(s, lr, step);
    for (int i = 0; i < dp->num_tables; i++)
        sr_op_emb_dp_apply(s->dev, &dp->tables[i], s->dp_grad[i], s->dp_counts[i], &u, stream);
}
