/*
 * The planner's view of a training job (shardrec/planner.h): the model in
 * plain numbers, and each table's statistics: from the config (the synthetic
 * generator draws each feature's count uniformly in its MIN-MAX range; the
 * hot shares and hottest rows of --id-dist) or, with --data, measured on
 * the data's first --plan-sample samples (shardrec/table_stats.h), read as
 * training reads them.
 */
#include <string.h>

#include "shardrec/dlrm.h"
#include "shardrec/alloc.h"
#include "shardrec/batch.h"
#include "shardrec/error.h"
#include "shardrec/optim.h"
#include "shardrec/plan.h"
#include "shardrec/planner.h"
#include "shardrec/reader.h"
#include "shardrec/synthetic.h"
#include "shardrec/table_stats.h"
#include "shardrec/tensor.h"
#include "shardrec/train_config.h"

static double feature_mean_ids(const struct sr_train_config *cfg, int f)
{
    if (cfg->n_feature_ids)
        return 0.5 * (cfg->feature_ids_min[f] + cfg->feature_ids_max[f]);
    return 0.5 * (cfg->ids_min + cfg->ids_max);
}

static enum sr_planner_state emb_state(enum sr_optim_kind kind)
{
    int per_row = 0, per_elem = sr_optim_state_per_element(kind, &per_row);
    return per_row    ? SR_PLANNER_STATE_ROW
           : per_elem ? SR_PLANNER_STATE_ELEMENT
                      : SR_PLANNER_STATE_NONE;
}

static void mlp(const int *widths, int n, int *out, int *n_out)
{
    *n_out = n < SR_PLANNER_MLP_MAX ? n : SR_PLANNER_MLP_MAX;
    memcpy(out, widths, sizeof(int) * (size_t)*n_out);
}

/* A table-wise plan's buffers on rank 0, but for what its shards receive
 * (the cost model adds that per shard: sr_planner_table.slot_bytes). */
static uint64_t buffer_bytes(struct sr_train_config *cfg, const struct sr_ebc_config *ec, int W,
                             int L)
{
    struct sr_plan *plan = NULL;
    struct sr_memory_estimate est = {0};
    if (sr_plan_uniform(&plan, ec, SR_SHARDING_TYPE_TABLE_WISE, W, L))
        return 0;
    /* --global-batch-size G: a rank's batch is G / W, as train makes it */
    struct sr_train_config *per_rank = sr_malloc(sizeof *per_rank);
    *per_rank = *cfg;
    if (cfg->global_batch_size > 0 && W > 0 && cfg->global_batch_size / W > 0)
        per_rank->batch_size = (int)(cfg->global_batch_size / W);
    sr_train_config_memory(per_rank, W > 1 ? plan : NULL, 0, W, &est);
    sr_free(per_rank);
    sr_plan_free(plan);
    return est.batch - est.batch_slots + est.eval;
}

void sr_train_config_slot_stats(const struct sr_train_config *cfg, struct sr_planner_table *stats)
{
    for (int t = 0; t < cfg->num_tables; t++)
        stats[t].slot_bytes = 0;
    for (int f = 0; f < cfg->num_features; f++)
        stats[cfg->feature_table[f]].slot_bytes +=
            (double)sr_train_config_slot_sample_bytes(cfg, f);
}

/* Zipf ids: table t's hot-set sizes (sr_planner_hot_sizes) with their
 * shares of its lookups, and its hottest rows, as its features draw them,
 * for the largest size (hottest first: a smaller size is a prefix). */
static void hot_rows_of_config(const struct sr_train_config *cfg, int t,
                               struct sr_planner_table *st)
{
    int feats[SR_MAX_FEATURES], k = 0;
    double weights[SR_MAX_FEATURES];
    const int64_t E = cfg->tables[t].num_embeddings;
    for (int f = 0; f < cfg->num_features; f++)
        if (cfg->feature_table[f] == t) {
            weights[k] = feature_mean_ids(cfg, f);
            feats[k++] = f;
        }
    if (cfg->id_dist != SR_ID_DIST_ZIPF || k == 0)
        return;
    st->num_sizes = sr_planner_hot_sizes(E, E, st->hot_size);
    if (st->num_sizes == 0)
        return;
    sr_planner_hot_shares_of(E, st->hot_size, st->num_sizes, cfg->zipf_s, st->hot_size_share);
    const int64_t H = st->hot_size[st->num_sizes - 1];
    st->hot = sr_malloc(sizeof *st->hot * (size_t)H);
    st->num_hot =
        sr_synth_hot_rows(E, cfg->seed, feats, weights, k, cfg->id_dist, cfg->zipf_s, H, st->hot);
    SR_ASSERT(st->num_hot == H);
}

static void stats_of_config(const struct sr_train_config *cfg, struct sr_planner_table *stats)
{
    for (int t = 0; t < cfg->num_tables; t++) {
        stats[t] = (struct sr_planner_table){0};
        double s = cfg->id_dist == SR_ID_DIST_ZIPF ? cfg->zipf_s : 0;
        stats[t].hot_share = sr_planner_hot_share(cfg->tables[t].num_embeddings, s);
    }
    for (int f = 0; f < cfg->num_features; f++) {
        struct sr_planner_table *st = &stats[cfg->feature_table[f]];
        st->ids_per_sample += feature_mean_ids(cfg, f);
        st->features++;
    }
    for (int t = 0; t < cfg->num_tables; t++)
        hot_rows_of_config(cfg, t, &stats[t]);
}

/* The samples of an open reader into s: batches of B until n samples or the
 * end of the data, each checked and its ids mapped as the trainer's loader
 * does (sr_batch_check_ids). */
static int count_samples(const struct sr_train_config *cfg, struct sr_reader *r, int64_t n,
                         struct sr_table_stats *s)
{
    int64_t rows[SR_MAX_FEATURES];
    enum sr_id_policy policy[SR_MAX_FEATURES];
    struct sr_batch b;
    int rc = SR_OK;
    for (int f = 0; f < cfg->num_features; f++) {
        rows[f] = cfg->tables[cfg->feature_table[f]].num_embeddings;
        policy[f] = cfg->tables[cfg->feature_table[f]].id_policy;
    }
    sr_reader_batch_init(r, &b, NULL);
    while (sr_table_stats_samples(s) < n && (rc = sr_reader_next(r, &b)) == 1) {
        int64_t left = n - sr_table_stats_samples(s);
        if ((rc = sr_batch_check_ids(&b, rows, policy)))
            break;
        sr_table_stats_add(s, &b.kjt, b.batch_size < left ? b.batch_size : (int)left);
    }
    sr_batch_free(&b);
    return rc < 0 ? rc : SR_OK;
}

/* --data's first cfg->plan_sample samples, counted (one rank of one, file
 * order, the last partial batch kept). */
static int stats_of_data(struct sr_train_config *cfg, struct sr_planner_table *stats,
                         int64_t *measured)
{
    int64_t rows[SR_MAX_FEATURES], n = cfg->plan_sample > 0 ? cfg->plan_sample : 1;
    const char *paths[SR_MAX_DATA_FILES];
    struct sr_reader_options opt = {
        .rank = 0, .world = 1, .skip_bad_lines = cfg->skip_bad_lines, .keep_partial = 1};
    struct sr_reader *r = NULL;
    struct sr_table_stats *s = NULL;
    struct sr_ebc_config ec;
    opt.batch_size = n < 4096 ? (int)n : 4096;
    for (int f = 0; f < cfg->num_features; f++)
        rows[f] = cfg->tables[cfg->feature_table[f]].num_embeddings;
    for (int i = 0; i < cfg->n_data; i++)
        paths[i] = cfg->data_paths[i];
    int rc = sr_reader_open(&r, paths, cfg->n_data, cfg->num_features, rows, &opt);
    if (rc)
        return rc;
    for (int f = 0; f < cfg->num_features; f++) /* the files' bounds, where train's are not set */
        if (cfg->data_ids_max[f] <= 0)
            cfg->data_ids_max[f] =
                (sr_reader_feature_max_values(r, f) + opt.batch_size - 1) / opt.batch_size;
    sr_train_config_ebc(cfg, &ec);
    sr_table_stats_init(&s, &ec);
    rc = count_samples(cfg, r, n, s);
    if (!rc) {
        sr_table_stats_finish(s, stats);
        *measured = sr_table_stats_samples(s);
    }
    if (!rc && *measured == 0)
        rc =
            sr_error_set(SR_ERR_DATA, "%s: no samples to measure the tables on (--data)", paths[0]);
    sr_table_stats_free(s);
    sr_reader_free(r);
    return rc;
}

int sr_train_config_table_stats(struct sr_train_config *cfg, struct sr_planner_table *stats,
                                int64_t *measured)
{
    *measured = 0;
    int rc = SR_OK;
    if (!cfg->n_data)
        stats_of_config(cfg, stats);
    else
        rc = stats_of_data(cfg, stats, measured);
    sr_train_config_slot_stats(cfg, stats);
    return rc;
}

int sr_train_config_planner(struct sr_train_config *cfg, int world_size, int ranks_per_node,
                            struct sr_ebc_config *ec, const struct sr_planner_table *stats,
                            struct sr_planner_model *m)
{
    int per_row = 0;
    memset(m, 0, sizeof *m);
    sr_train_config_ebc(cfg, ec);
    m->ebc = ec;
    m->stats = stats;
    m->global_batch =
        cfg->global_batch_size > 0 ? cfg->global_batch_size : (int64_t)cfg->batch_size * world_size;
    m->num_dense = cfg->num_dense;
    mlp(cfg->bot_mlp, cfg->n_bot, m->bot, &m->n_bot);
    mlp(cfg->top_mlp, cfg->n_top, m->top, &m->n_top);
    if (cfg->interaction == SR_INTERACTION_DCN) {
        int n = (cfg->num_features + 1) * cfg->embedding_dim;
        m->dcn_layers = cfg->dcn_layers;
        m->dcn_rank =
            cfg->dcn_rank > 0 ? cfg->dcn_rank : (n < SR_DCN_RANK_DEFAULT ? n : SR_DCN_RANK_DEFAULT);
    }
    m->math = cfg->math;
    m->emb_state = emb_state(cfg->emb_optimizer);
    m->dense_state_floats = sr_optim_state_per_element(cfg->optimizer, &per_row);
    m->emb_elem_bytes = (int)sr_dtype_size(cfg->emb_dtype);
    m->wire_bytes = (int)sr_dtype_size(cfg->comm_dtype);
    m->dense_wire_bytes = (int)sr_dtype_size(cfg->dense_comm_dtype);
    m->pipeline = cfg->pipeline != SR_PIPELINE_NONE; /* auto before a world: sparse-dist */
    m->bucket_bytes = 1024.0 * cfg->bucket_kib;
    m->buffer_bytes = (double)buffer_bytes(cfg, ec, world_size, ranks_per_node);
    return SR_OK;
}
