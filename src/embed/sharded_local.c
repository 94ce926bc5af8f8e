/*
 * Local mode of the sharded EBC (sharded_ebc.h, "Local mode"): a one-rank
 * world whose plan puts every table whole in one A2A group (tw or cw with
 * one shard per table, e.g. sr_plan_uniform(tw, W = 1)) and whose group
 * lists every feature in the config's order, at the config's columns. There
 * is nothing to exchange: the lookup pools the KJT's own device arrays
 * straight into pooled, as sr_ebc_forward does, and the update reads dpooled
 * as sr_ebc_backward does, with the same layout (mean bags divided by the
 * op, not by a scale after a collective), so the results are sr_ebc's bit
 * for bit. The input dist is host-only: the per-feature id counts come from
 * the KJT's length_per_key (host metadata), as ebc.c's compute_meta.
 */
#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "embed/sharded_internal.h"

/* The A2A group holds table t whole at local index t, and feature f at
 * local index f and the config's columns. */
static int group_is_config(const struct sr_sharded_ebc *s, const struct group *g)
{
    const struct sr_ebc_config *c = &s->cfg;
    if (g->num_tables != c->num_tables || g->layout.num_features != c->num_features ||
        g->out_dim != s->out_dim || g->batch != s->B)
        return 0;
    for (int t = 0; t < c->num_tables; t++)
        if (g->table_of[t] != t || g->row_base[t] != 0 ||
            g->tables[t].rows != c->tables[t].num_embeddings ||
            g->tables[t].dim != c->tables[t].embedding_dim)
            return 0;
    for (int f = 0; f < c->num_features; f++)
        if (s->slots[g->slot_of[f]].feature != f || g->features[f].table != c->feature_table[f] ||
            g->features[f].col != s->feature_col[f])
            return 0;
    return 1;
}

void sr_sharded_local_init(struct sr_sharded_ebc *s)
{
    const struct group *g = &s->groups[GROUP_A2A];
    s->local = s->W == 1 && s->groups[GROUP_DP].num_tables == 0 && !s->groups[GROUP_RW].active &&
               !s->groups[GROUP_TWRW].active && !s->groups[GROUP_HYB].active && g->active &&
               group_is_config(s, g);
    if (!s->local)
        return;
    const int F = s->cfg.num_features;
    s->local_features = sr_calloc((size_t)F, sizeof *s->local_features);
    for (int f = 0; f < F; f++) {
        s->local_features[f] = g->features[f];
        s->local_features[f].mean =
            s->cfg.tables[s->cfg.feature_table[f]].pooling == SR_POOLING_MEAN;
    }
    s->local_layout = g->layout;
    s->local_layout.features = s->local_features;
}

/* Ids of feature f: the KJT's host length_per_key, or its offsets when the
 * host can read them (as ebc.c). */
static int64_t feature_ids(const struct sr_sharded_ebc *s, const struct sr_kjt *kjt, int f)
{
    if (kjt->length_per_key)
        return kjt->length_per_key[f];
    SR_ASSERT(!sr_dev_hidden(s->dev, kjt->offsets, NULL, NULL));
    return sr_kjt_bag_begin(kjt, f, kjt->stride) - sr_kjt_bag_begin(kjt, f, 0);
}

/* Each feature's ids, then where they go in the table-grouped id list
 * (the exchanged groups' positions: input_dist.c). */
static void local_meta(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const struct group *g = &s->groups[GROUP_A2A];
    struct group_batch *gb = &b->gb[GROUP_A2A];
    for (int f = 0; f < g->layout.num_features; f++)
        gb->feature_n[f] = feature_ids(s, b->kjt, f);
    sr_input_dist_positions(g, gb);
    gb->num_values = b->kjt->num_values;
    gb->has_weights = b->kjt->weights != NULL;
}

int sr_local_counts(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    s->stats.ids_sent = s->stats.ids_received = 0;
    s->stats.ranks_ended = 0;
    if (b->local_rc < 0)
        return b->local_rc;
    if (b->local_rc == SR_SHARDED_EBC_END_OF_DATA) {
        s->stats.ranks_ended = 1;
        s->stats.first_ended = 0;
        return SR_SHARDED_EBC_END_OF_DATA;
    }
    local_meta(s, b);
    s->stats.ids_sent = s->stats.ids_received = b->kjt->num_values;
    return SR_OK;
}

void sr_local_lookup(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    struct group_batch *gb = &b->gb[GROUP_A2A];
    const struct sr_kjt *kjt = b->kjt;
    struct sr_emb_batch eb = {.batch = s->B,
                              .num_values = gb->num_values,
                              .offsets = kjt->offsets,
                              .values = kjt->values,
                              .weights = kjt->weights,
                              .feature_pos = gb->feature_pos,
                              .table_pos = gb->table_pos};
    float *pooled = b->bound_pooled ? b->bound_pooled : gb->pooled;
    sr_op_emb_forward(s->dev, &s->local_layout, &eb, 1, pooled, gb->workspace, b->stream);
    s->stats.lookup_ids = gb->num_values;
    b->kjt = NULL; /* the workspace keeps the ids for the update */
}

/* The kept ids of b's lookup, as the update's ops see them. */
static struct sr_emb_batch kept_batch(const struct sr_sharded_ebc *s, const struct group_batch *gb)
{
    return (struct sr_emb_batch){.batch = s->B,
                                 .num_values = gb->num_values,
                                 .feature_pos = gb->feature_pos,
                                 .table_pos = gb->table_pos,
                                 .weighted = gb->has_weights};
}

void sr_local_group_ids(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                        sr_stream_t stream)
{
    struct group_batch *gb = &b->gb[GROUP_A2A];
    const struct sr_emb_batch eb = kept_batch(s, gb);
    sr_op_emb_group_ids(s->dev, &s->local_layout, &eb, gb->workspace, stream);
}

void sr_local_update(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float lr,
                     int64_t step)
{
    struct group_batch *gb = &b->gb[GROUP_A2A];
    const struct sr_emb_batch eb = kept_batch(s, gb);
    struct sr_emb_update u = sr_sharded_update_of(s, lr, step);
    u.ids_grouped = b->ids_grouped;
    sr_op_emb_backward(s->dev, &s->local_layout, &eb, b->update_dpooled, &u, gb->workspace,
                       b->stream);
    b->update_dpooled = NULL;
}

float *sr_sharded_ebc_local_weights(struct sr_sharded_ebc *s, int table)
{
    SR_ASSERT(s->local && table >= 0 && table < s->cfg.num_tables);
    return s->groups[GROUP_A2A].tables[table].weight;
}
