/*
 * Hybrid tables in the sharded EBC (plan.h: HugeCTR's hybrid embedding): a
 * table's H hottest rows replicated on every rank, the rest row-wise. Built
 * from the EBC's own parts (sharded_internal.h): the EBC runs on an expanded
 * config and plan,
 *
 *   caller's        T tables, F features; table h hybrid with hot rows R
 *   expanded        tables 0 .. T-1 as the caller's, h's rw shards (its
 *                   cold rows: the GROUP_HYB group),
 *                   then one dp replica per hybrid table with H > 0: rows
 *                   R[0 .. H), the "hot" table of h ("<h>.hot");
 *                   features 0 .. F-1 as the caller's (h's now carry only
 *                   cold ids), then one hot feature per feature of such a
 *                   table ("<f>.hot", looking up the replica)
 *
 * so that hot ids are pooled on their sample's rank (the replica's gradient
 * rides the dense all-reduce as any dp table's) and cold ids travel as rw
 * ids do. Per step the new work is hybrid_split (counts_start: the caller's
 * KJT into the expanded one, hot ids as their index in R); the compact
 * output and gradient dists of the cold rows (output_dist.c: an owner sends
 * a bag's row only when the bag holds ids in its block; their counts ride
 * in a second counts exchange, input_dist.c); and the output dist's
 * pieces, which add a hot feature's pooled block into its feature's cold
 * one before the mean scale (ops_sparse_dist.h).
 *
 * State. A replica row starts as its table's row is drawn (ebc.h: by global
 * row), so every plan starts from the same model. The rw shard keeps its own
 * copy of the hot rows, which no lookup reads; sr_sharded_ebc_hot_rows_out
 * copies the replica over it (weights and optimizer state) so that whatever
 * reads the shards (gather, weights files, checkpoints) sees the trained
 * rows, and sr_sharded_ebc_hot_rows_in refreshes the replica from the
 * shards after a load: each owner contributes its hot rows, the other ranks
 * zeros, one all-reduce (SUM) through comm.h per table; a sum of one value
 * and zeros is that value, so every rank gets the rows exactly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "embed/sharded_internal.h"

/* ---- the expanded config and plan ----------------------------------------------- */

static int check_table(const struct sr_table_config *tc, const struct sr_table_plan *tp)
{
    if (tc->storage != SR_DTYPE_F32)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "sharded EBC: table '%s' is hybrid with %s storage, but hybrid "
                            "tables keep fp32 rows (their replica is fp32); HINT: use "
                            "--emb-dtype fp32 or shard it rw",
                            tc->name, sr_dtype_name(tc->storage));
    if (strlen(tc->name) + 5 > SR_NAME_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: hybrid table '%s': its name leaves no room for its "
                            "replica's ('%s.hot'); HINT: a shorter name",
                            tc->name, tc->name);
    (void)tp;
    return SR_OK;
}

static void name_hot(char *dst, const char *name)
{
    snprintf(dst, SR_NAME_MAX, "%.*s.hot", SR_NAME_MAX - 5, name);
}

/* Counts of replicas and hot features; errors for tables it cannot run. */
static int count_hybrid(struct sr_sharded_ebc *s, const struct sr_ebc_config *cfg,
                        const struct sr_plan *plan, int *any)
{
    *any = 0;
    for (int t = 0; t < cfg->num_tables; t++) {
        const struct sr_table_plan *tp = &plan->tables[t];
        if (tp->type != SR_SHARDING_TYPE_HYBRID)
            continue;
        *any = 1;
        int rc = check_table(&cfg->tables[t], tp);
        if (rc)
            return rc;
        s->hyb.num_tables += tp->num_hot > 0;
    }
    for (int f = 0; f < cfg->num_features; f++) {
        const struct sr_table_plan *tp = &plan->tables[cfg->feature_table[f]];
        s->hyb.num_features += tp->type == SR_SHARDING_TYPE_HYBRID && tp->num_hot > 0;
        if (tp->type == SR_SHARDING_TYPE_HYBRID && tp->num_hot > 0 &&
            strlen(cfg->feature_names[f]) + 5 > SR_NAME_MAX)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "sharded EBC: feature '%s' of hybrid table '%s': its name leaves "
                                "no room for its hot feature's; HINT: a shorter name",
                                cfg->feature_names[f], plan->tables[cfg->feature_table[f]].name);
    }
    return SR_OK;
}

/* The expanded plan: hybrid tables rw, then a dp replica per hybrid table. */
static struct sr_plan *expand_plan(struct sr_sharded_ebc *s, const struct sr_ebc_config *cfg,
                                   const struct sr_plan *plan)
{
    const int T = cfg->num_tables, W = plan->world_size;
    struct sr_plan *q = sr_plan_alloc(T + s->hyb.num_tables, W, plan->local_size);
    for (int t = 0; t < T; t++) {
        const struct sr_table_plan *tp = &plan->tables[t];
        q->tables[t] = (struct sr_table_plan){.type = tp->type, .num_shards = tp->num_shards};
        memcpy(q->tables[t].name, tp->name, SR_NAME_MAX);
        q->tables[t].shards = sr_malloc(sizeof(struct sr_shard) * (size_t)tp->num_shards);
        memcpy(q->tables[t].shards, tp->shards, sizeof(struct sr_shard) * (size_t)tp->num_shards);
    }
    for (int i = 0; i < s->hyb.num_tables; i++) {
        const struct hybrid_table *h = &s->hyb.tables[i];
        struct sr_table_plan *rp = &q->tables[h->replica];
        *rp = (struct sr_table_plan){.type = SR_SHARDING_TYPE_DATA_PARALLEL, .num_shards = W};
        name_hot(rp->name, cfg->tables[h->table].name);
        rp->shards = sr_calloc((size_t)W, sizeof *rp->shards);
        for (int r = 0; r < W; r++)
            rp->shards[r] = (struct sr_shard){
                .rank = r, .rows = h->num_hot, .cols = cfg->tables[h->table].embedding_dim};
    }
    return q;
}

/* The expanded config: replica tables and hot features appended. */
static void expand_cfg(struct sr_sharded_ebc *s, const struct sr_ebc_config *cfg,
                       const int *replica_of)
{
    const int T = cfg->num_tables, F = cfg->num_features;
    struct sr_ebc_config *x = &s->cfg;
    x->num_tables = T + s->hyb.num_tables;
    x->num_features = F + s->hyb.num_features;
    x->stochastic_rounding = cfg->stochastic_rounding;
    x->tables = sr_calloc((size_t)x->num_tables, sizeof *x->tables);
    x->feature_names = sr_calloc((size_t)x->num_features, sizeof *x->feature_names);
    x->feature_table = sr_calloc((size_t)x->num_features, sizeof *x->feature_table);
    memcpy(x->tables, cfg->tables, sizeof *x->tables * (size_t)T);
    memcpy(x->feature_names, cfg->feature_names, sizeof *x->feature_names * (size_t)F);
    memcpy(x->feature_table, cfg->feature_table, sizeof *x->feature_table * (size_t)F);
    for (int i = 0; i < s->hyb.num_tables; i++) {
        const struct hybrid_table *h = &s->hyb.tables[i];
        struct sr_table_config *rc = &x->tables[h->replica];
        *rc = cfg->tables[h->table];
        name_hot(rc->name, cfg->tables[h->table].name);
        rc->num_embeddings = h->num_hot;
        rc->id_policy = SR_ID_POLICY_ERROR;
    }
    s->hyb.hot_of = sr_calloc((size_t)x->num_features, sizeof *s->hyb.hot_of);
    int k = 0;
    for (int f = 0; f < x->num_features; f++) {
        const int r = f < F ? replica_of[cfg->feature_table[f]] : -1;
        s->hyb.hot_of[f] = r >= 0 ? k : -1;
        if (r < 0)
            continue;
        name_hot(x->feature_names[F + k], cfg->feature_names[f]);
        x->feature_table[F + k] = r;
        k++;
    }
}

/* My rw shard's hot rows: a run of the ascending hot rows. */
static void my_hot_rows(struct sr_sharded_ebc *s, struct hybrid_table *h,
                        const struct sr_table_plan *tp)
{
    h->first = h->count = 0;
    for (int j = 0; j < tp->num_shards; j++) {
        const struct sr_shard *sh = &tp->shards[j];
        if (sh->rank != s->rank)
            continue;
        int64_t k = 0;
        while (k < h->num_hot && h->hot[k] < sh->row_offset)
            k++;
        h->first = k;
        while (k < h->num_hot && h->hot[k] < sh->row_offset + sh->rows)
            k++;
        h->count = k - h->first;
    }
}

int sr_sharded_hybrid_expand(struct sr_sharded_ebc *s, const struct sr_ebc_config *cfg,
                             const struct sr_plan *plan)
{
    int any = 0;
    int rc = count_hybrid(s, cfg, plan, &any);
    if (rc)
        return rc;
    if (!any) { /* no hybrid table: the caller's config and plan, as they are */
        sr_ebc_config_copy(&s->cfg, cfg);
        s->plan = expand_plan(s, cfg, plan);
        return SR_OK;
    }
    const int T = cfg->num_tables;
    int *replica_of = sr_calloc((size_t)T, sizeof *replica_of);
    s->hyb.tables = sr_calloc((size_t)s->hyb.num_tables + 1, sizeof *s->hyb.tables);
    for (int t = 0, i = 0; t < T; t++) {
        const struct sr_table_plan *tp = &plan->tables[t];
        replica_of[t] = -1;
        if (tp->type != SR_SHARDING_TYPE_HYBRID || tp->num_hot == 0)
            continue;
        struct hybrid_table *h = &s->hyb.tables[i];
        *h = (struct hybrid_table){.table = t, .replica = T + i, .num_hot = tp->num_hot};
        h->hot = sr_malloc(sizeof(int64_t) * (size_t)tp->num_hot);
        memcpy(h->hot, tp->hot, sizeof(int64_t) * (size_t)tp->num_hot);
        my_hot_rows(s, h, tp);
        replica_of[t] = T + i++;
    }
    s->hyb.expanded = 1;
    sr_ebc_config_copy(&s->hyb.user_cfg, cfg);
    expand_cfg(s, cfg, replica_of);
    s->plan = expand_plan(s, cfg, plan);
    sr_free(replica_of);
    return SR_OK;
}

/* ---- device tables ------------------------------------------------------------------ */

static void *upload(struct sr_sharded_ebc *s, const void *host, size_t bytes)
{
    void *d = sr_dev_alloc(s->dev, bytes ? bytes : 1);
    sr_dev_copy(s->dev, d, host, bytes, NULL);
    sr_dev_sync(s->dev, NULL);
    return d;
}

static void *upload_meta(struct sr_sharded_ebc *s, const void *host, size_t bytes)
{
    SR_ASSERT(s->num_dev_meta < (int)(sizeof s->dev_meta / sizeof s->dev_meta[0]));
    return s->dev_meta[s->num_dev_meta++] = upload(s, host, bytes);
}

/* The compact exchange's tables: every feature of a hybrid table, in
 * feature order, its slot on rank 0, columns and group column (the same on
 * every rank: each has one slot of each such feature). */
static void setup_compact(struct sr_sharded_ebc *s)
{
    const struct sr_ebc_config *u = sr_sharded_user_cfg(s);
    int n = 0;
    int32_t *slot0 = sr_calloc((size_t)u->num_features + 1, sizeof *slot0);
    int32_t *gcol = sr_calloc((size_t)u->num_features + 1, sizeof *gcol);
    s->hyb.compact_cols = sr_calloc((size_t)u->num_features + 1, sizeof *s->hyb.compact_cols);
    for (int f = 0; f < u->num_features; f++) {
        if (s->plan->tables[u->feature_table[f]].type != SR_SHARDING_TYPE_HYBRID)
            continue;
        const struct slot *mine = &s->slots[s->first_slot[f] + s->rank];
        SR_ASSERT(mine->rank == s->rank && mine->group == GROUP_HYB);
        slot0[n] = s->first_slot[f];
        gcol[n] = mine->gcol;
        s->hyb.compact_cols[n++] = mine->cols;
    }
    struct sr_sparse_dist_compact *c = &s->hyb.compact;
    *c = (struct sr_sparse_dist_compact){
        .batch = s->B, .world = s->W, .num_features = n, .out_dim = s->groups[GROUP_HYB].out_dim};
    if (n > 0) {
        c->cols = upload_meta(s, s->hyb.compact_cols, sizeof(int32_t) * (size_t)n);
        c->gcol = upload_meta(s, gcol, sizeof(int32_t) * (size_t)n);
        c->slot0 = upload_meta(s, slot0, sizeof(int32_t) * (size_t)n);
        SR_ASSERT(s->num_dev_meta < (int)(sizeof s->dev_meta / sizeof s->dev_meta[0]));
        c->work = s->dev_meta[s->num_dev_meta++] =
            sr_dev_alloc(s->dev, sizeof(int64_t) * (size_t)sr_sparse_dist_compact_words(c));
    }
    sr_free(slot0);
    sr_free(gcol);
}

void sr_sharded_hybrid_inherit(struct sr_sharded_ebc *s)
{
    const int Fu = sr_sharded_user_cfg(s)->num_features;
    for (int f = 0; s->hyb.num_features && f < Fu; f++) {
        const int h = s->hyb.hot_of[f];
        if (h >= 0) {
            s->feature_col[Fu + h] = s->feature_col[f];
            s->feature_cap[Fu + h] = s->feature_cap[f];
        }
    }
}

void sr_sharded_hybrid_upload(struct sr_sharded_ebc *s)
{
    struct hybrid *y = &s->hyb;
    if (y->expanded)
        setup_compact(s);
    if (!y->expanded || y->num_features == 0)
        return;
    const int F = y->user_cfg.num_features, Fh = y->num_features;
    int32_t *feature = sr_calloc((size_t)Fh, sizeof *feature);
    int64_t *begin = sr_calloc((size_t)Fh, sizeof *begin),
            *num = sr_calloc((size_t)Fh, sizeof *num);
    int64_t *at = sr_calloc((size_t)y->num_tables + 1, sizeof *at), words = 0;
    for (int i = 0; i < y->num_tables; i++) {
        at[i] = words;
        words += y->tables[i].num_hot;
    }
    int64_t *hot = sr_calloc((size_t)words + 1, sizeof *hot);
    for (int i = 0; i < y->num_tables; i++)
        memcpy(hot + at[i], y->tables[i].hot, sizeof *hot * (size_t)y->tables[i].num_hot);
    for (int f = 0; f < F; f++) {
        const int k = y->hot_of[f];
        if (k < 0)
            continue;
        const int i = s->cfg.feature_table[F + k] - y->user_cfg.num_tables;
        feature[k] = f;
        begin[k] = at[i];
        num[k] = y->tables[i].num_hot;
    }
    y->split = (struct sr_sparse_dist_hybrid){
        .num_features = F,
        .batch = s->B,
        .num_hot_features = Fh,
        .hot_of = upload_meta(s, y->hot_of, sizeof(int32_t) * (size_t)F),
        .feature = upload_meta(s, feature, sizeof *feature * (size_t)Fh),
        .hot_begin = upload_meta(s, begin, sizeof *begin * (size_t)Fh),
        .num_hot = upload_meta(s, num, sizeof *num * (size_t)Fh),
        .hot = upload_meta(s, hot, sizeof *hot * (size_t)words),
        .hot_words = words};
    for (int i = 0; i < y->num_tables; i++) { /* my shard's rows of its hot rows */
        struct hybrid_table *h = &y->tables[i];
        const struct sr_table_plan *tp = &s->plan->tables[h->table];
        int64_t *rows = sr_calloc((size_t)h->count + 1, sizeof *rows);
        for (int64_t k = 0; k < h->count; k++)
            rows[k] = h->hot[h->first + k] - tp->shards[s->rank].row_offset;
        h->shard_rows = upload(s, rows, sizeof *rows * (size_t)h->count);
        sr_free(rows);
    }
    void *host[] = {feature, begin, num, at, hot};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        sr_free(host[i]);
}

/* Replica rows as the table's rows are drawn (sharded_ebc.c's init_shard):
 * one draw per run of consecutive hot rows. */
void sr_sharded_hybrid_init_replica(struct sr_sharded_ebc *s, struct sr_emb_table *tab, int t,
                                    uint64_t seed)
{
    const struct hybrid_table *h = &s->hyb.tables[t - s->hyb.user_cfg.num_tables];
    SR_ASSERT(h->replica == t && tab->dtype == SR_DTYPE_F32 && tab->rows == h->num_hot);
    const struct sr_table_config *tc = &s->cfg.tables[h->table];
    char name[SR_NAME_MAX + 16];
    snprintf(name, sizeof name, "emb.%s.weight", tc->name);
    const uint64_t stream = sr_rng_stream_of(name);
    const double bound = sqrt(1.0 / (double)tc->num_embeddings);
    const int D = tc->embedding_dim;
    for (int64_t k = 0, run; k < h->num_hot; k += run) {
        for (run = 1; k + run < h->num_hot && h->hot[k + run] == h->hot[k] + run; run++)
            ;
        sr_op_emb_init_uniform(s->dev, (float *)tab->weight + k * D, SR_DTYPE_F32, run, D,
                               h->hot[k], 0, D, seed, stream, -bound, bound, NULL);
    }
}

/* ---- a step's split ---------------------------------------------------------------- */

struct sr_kjt *sr_sharded_hybrid_split(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                       struct sr_kjt *kjt)
{
    if (s->hyb.num_features == 0)
        return kjt;
    struct sr_kjt *x = &b->xkjt;
    const struct sr_sparse_dist_kjt in = {.lengths = kjt->lengths,
                                          .offsets = kjt->offsets,
                                          .values = kjt->values,
                                          .weights = kjt->weights,
                                          .num_values = kjt->num_values};
    x->num_values = kjt->num_values;
    x->num_weights = kjt->weights ? kjt->num_values : 0;
    x->weights = kjt->weights ? b->x_weights : NULL;
    sr_op_sparse_dist_hybrid_split(s->dev, &s->hyb.split, &in, x->lengths, b->x_full, x->offsets,
                                   x->values, x->weights, b->stream);
    return x;
}

/* The compact exchange's counts and buffers of a batch context. */
static void compact_alloc(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const struct sr_sparse_dist_compact *c = &s->hyb.compact;
    const size_t W = (size_t)s->W, words = W * c->num_features + 1;
    const size_t floats = W * s->B * c->out_dim + 1;
    b->ne_send = b->ne_send_host = sr_dev_alloc_zero(s->dev, sizeof(int64_t) * words);
    b->ne_recv = b->ne_recv_host = sr_dev_alloc_zero(s->dev, sizeof(int64_t) * words);
    if (!s->dev->host_visible) {
        b->ne_send_host = sr_dev_alloc_host(s->dev, sizeof(int64_t) * words);
        b->ne_recv_host = sr_dev_alloc_host(s->dev, sizeof(int64_t) * words);
    }
    b->own_counts = sr_calloc(W, sizeof(size_t));
    b->own_displs = sr_calloc(W, sizeof(size_t));
    b->smp_counts = sr_calloc(W, sizeof(size_t));
    b->smp_displs = sr_calloc(W, sizeof(size_t));
    b->cbuf_owner = sr_dev_alloc_zero(s->dev, sizeof(float) * floats);
    b->cbuf_samples = sr_dev_alloc_zero(s->dev, sizeof(float) * floats);
}

static void compact_free(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    if (b->ne_send_host != b->ne_send) {
        sr_dev_free_host(s->dev, b->ne_send_host);
        sr_dev_free_host(s->dev, b->ne_recv_host);
    }
    void *device[] = {b->ne_send, b->ne_recv, b->cbuf_owner, b->cbuf_samples};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++)
        sr_dev_free(s->dev, device[i]);
    void *host[] = {b->own_counts, b->own_displs, b->smp_counts, b->smp_displs};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        sr_free(host[i]);
}

void sr_sharded_hybrid_batch_alloc(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    if (s->hyb.compact.num_features > 0)
        compact_alloc(s, b);
    if (s->hyb.num_features == 0)
        return;
    const size_t bags = (size_t)s->cfg.num_features * s->B, n = (size_t)s->max_values + 1;
    struct sr_kjt *x = &b->xkjt;
    *x = (struct sr_kjt){.num_keys = s->cfg.num_features, .stride = s->B};
    x->lengths = sr_dev_alloc(s->dev, sizeof *x->lengths * (bags + 1));
    x->offsets = sr_dev_alloc(s->dev, sizeof *x->offsets * (bags + 1));
    x->values = sr_dev_alloc(s->dev, sizeof *x->values * n);
    b->x_weights = sr_dev_alloc(s->dev, sizeof *b->x_weights * n);
    b->x_full = sr_dev_alloc(s->dev, sizeof *b->x_full * (bags + 1));
}

void sr_sharded_hybrid_batch_free(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    if (s->hyb.compact.num_features > 0)
        compact_free(s, b);
    void *device[] = {b->xkjt.lengths, b->xkjt.offsets, b->xkjt.values, b->x_weights, b->x_full};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++)
        sr_dev_free(s->dev, device[i]);
}

void sr_sharded_hybrid_free(struct sr_sharded_ebc *s)
{
    for (int i = 0; s->hyb.tables && i < s->hyb.num_tables; i++) {
        sr_free(s->hyb.tables[i].hot);
        sr_dev_free(s->dev, s->hyb.tables[i].shard_rows);
    }
    sr_free(s->hyb.tables);
    sr_free(s->hyb.hot_of);
    sr_free(s->hyb.compact_cols);
    if (s->hyb.expanded)
        sr_ebc_config_release(&s->hyb.user_cfg);
}

/* ---- the replicas and their tables' shards ----------------------------------------- */

static struct sr_emb_table *replica_table(struct sr_sharded_ebc *s, const struct hybrid_table *h)
{
    struct group *g = &s->groups[GROUP_DP];
    return &g->tables[sr_sharded_local_table(g, h->replica, s->rank)];
}

static struct sr_emb_table *shard_table(struct sr_sharded_ebc *s, const struct hybrid_table *h)
{
    struct group *g = &s->groups[GROUP_HYB];
    return &g->tables[sr_sharded_local_table(g, h->table, s->rank)];
}

/* Optimizer state of a table as planes of `width` floats a row: adagrad and
 * adam keep (E, D) planes (adam two), rowwise adagrad one (E) plane. */
static int state_planes(const struct sr_sharded_ebc *s, int dim, int *width)
{
    int per_row = 0;
    const int per_elem = sr_optim_state_per_element(s->optim.kind, &per_row);
    *width = per_row ? 1 : dim;
    return per_row ? 1 : per_elem;
}

/* My shard's hot rows <-> replica rows [first, first + count): weights and
 * state planes (to_shard: replica -> shard). */
static void copy_rows(struct sr_sharded_ebc *s, const struct hybrid_table *h, int to_shard,
                      float *rep_w, float *rep_s, int64_t rep_rows, sr_stream_t stream)
{
    struct sr_emb_table *sh = shard_table(s, h);
    const int D = sh->dim;
    int width;
    const int planes = state_planes(s, D, &width);
    float *sw = sh->weight, *rw = rep_w + h->first * D;
    if (to_shard)
        sr_op_sparse_dist_rows_copy(s->dev, 1, h->shard_rows, h->count, D, rw, h->count, sw,
                                    sh->rows, stream);
    else
        sr_op_sparse_dist_rows_copy(s->dev, 0, h->shard_rows, h->count, D, sw, sh->rows, rw,
                                    h->count, stream);
    for (int p = 0; sh->state && p < planes; p++) {
        float *ss = sh->state + (size_t)p * sh->rows * width;
        float *rs = rep_s + (size_t)p * rep_rows * width + h->first * width;
        if (to_shard)
            sr_op_sparse_dist_rows_copy(s->dev, 1, h->shard_rows, h->count, width, rs, h->count, ss,
                                        sh->rows, stream);
        else
            sr_op_sparse_dist_rows_copy(s->dev, 0, h->shard_rows, h->count, width, ss, sh->rows, rs,
                                        h->count, stream);
    }
}

void sr_sharded_ebc_hot_rows_out(struct sr_sharded_ebc *s, sr_stream_t stream)
{
    for (int i = 0; i < s->hyb.num_tables; i++) {
        const struct hybrid_table *h = &s->hyb.tables[i];
        struct sr_emb_table *rep = replica_table(s, h);
        if (h->count > 0)
            copy_rows(s, h, 1, rep->weight, rep->state, rep->rows, stream);
    }
}

int sr_sharded_ebc_hot_rows_in(struct sr_sharded_ebc *s)
{
    for (int i = 0; i < s->hyb.num_tables; i++) {
        const struct hybrid_table *h = &s->hyb.tables[i];
        struct sr_emb_table *rep = replica_table(s, h);
        int width;
        const int planes = rep->state ? state_planes(s, rep->dim, &width) : 0;
        const size_t nw = (size_t)rep->rows * rep->dim;
        const size_t n = nw + (size_t)planes * rep->rows * (planes ? width : 0);
        float *buf = sr_dev_alloc_zero(s->dev, sizeof(float) * (n + 1));
        if (h->count > 0)
            copy_rows(s, h, 0, buf, buf + nw, rep->rows, NULL);
        sr_sharded_before_collective(s, s->comms.sparse, NULL);
        sr_comm_all_reduce(s->comms.sparse, buf, buf, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL,
                           NULL); /* blocking */
        sr_dev_copy(s->dev, rep->weight, buf, sizeof(float) * nw, NULL);
        if (planes)
            sr_dev_copy(s->dev, rep->state, buf + nw, sizeof(float) * (n - nw), NULL);
        sr_dev_sync(s->dev, NULL);
        sr_dev_free(s->dev, buf);
    }
    return SR_OK;
}
