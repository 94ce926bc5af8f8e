/*
 * Embedding bag collection: owns the tables (weights and optimizer state on
 * its device), checks each KJT against its config, and drives the device's
 * embedding ops (device/ops_embedding.h), which pool a batch in one call and
 * update the touched rows in one call.
 *
 * Layout of a table's block on the device, one allocation per table:
 *
 *   [ weight (E, D) | pad to 64 B | optimizer state (see ops_embedding.h) ]
 *
 * Per step the EBC computes on the host, from the KJT's per-feature id counts
 * (length_per_key, host metadata), where each feature's ids go in the
 * table-grouped id list (feature_pos, table_pos) and hands that to the
 * device with the KJT's arrays, which are device memory (the batch's twin,
 * batch.h). Arrays for it are sized at init: a step allocates
 * nothing. The metadata of the last training forward is kept apart from the
 * scratch an evaluation forward uses, so eval may run between a training
 * forward and its backward.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "device/ops_embedding.h"

/* Where a step's ids go, grouped by table (host). */
struct step_meta {
    int batch;            /* B */
    int64_t num_values;   /* N */
    int64_t *feature_pos; /* (F) */
    int64_t *table_pos;   /* (T + 1) */
    int weighted;         /* the KJT had per-id weights */
};

struct sr_ebc {
    struct sr_device *dev;
    struct sr_ebc_config cfg; /* own copy */
    struct sr_optim_config optim;
    struct sr_emb_layout layout;
    struct sr_emb_table *tables;       /* (T) device pointers */
    struct sr_emb_feature *features;   /* (F) */
    int64_t *cursor;                   /* (T) scratch for step_meta */
    const float *lr_dev;               /* sr_ebc_set_update_scalars, or NULL */
    const int64_t *step_dev;
    struct step_meta kept, scratch;    /* training forward; evaluation forward */
    int have_ids;                      /* kept holds ids not yet consumed by backward */
    void *workspace;                   /* device */
};

static size_t floats_padded(int64_t n)
{
    return ((size_t)n + 15) & ~(size_t)15;
}

static size_t state_floats(enum sr_optim_kind kind, int64_t rows, int dim)
{
    int per_row = 0;
    int per_elem = sr_optim_state_per_element(kind, &per_row);
    return per_row ? (size_t)rows : (size_t)per_elem * (size_t)rows * (size_t)dim;
}

static int validate_args(struct sr_device *dev, const struct sr_optim_config *o, int max_batch,
                         int64_t max_values, int num_features)
{
    if (!dev || !dev->emb)
        return sr_error_set(SR_ERR_UNSUPPORTED, "EBC: device has no embedding ops");
    if ((unsigned)o->kind > SR_OPTIM_ADAM)
        return sr_error_set(SR_ERR_INVALID_ARG, "EBC: unknown optimizer kind %d", (int)o->kind);
    if (!(o->eps >= 0.0f) || !(o->beta1 >= 0.0f && o->beta1 < 1.0f) ||
        !(o->beta2 >= 0.0f && o->beta2 < 1.0f) || !(o->initial_accumulator >= 0.0f))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "EBC: optimizer %s needs eps >= 0, betas in [0, 1) and "
                            "initial_accumulator >= 0",
                            sr_optim_kind_name(o->kind));
    if (max_batch < 1 || (int64_t)max_batch * num_features >= INT32_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "EBC: max_batch %d is out of range (>= 1, and batch x %d features "
                            "below 2^31)",
                            max_batch, num_features);
    if (max_values < 0 || max_values >= INT32_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "EBC: max_values %lld is out of range [0, 2^31); HINT: split the "
                            "batch",
                            (long long)max_values);
    return SR_OK;
}

static void meta_init(struct step_meta *m, int num_features, int num_tables)
{
    m->batch = 0;
    m->num_values = 0;
    m->feature_pos = sr_calloc((size_t)num_features, sizeof *m->feature_pos);
    m->table_pos = sr_calloc((size_t)num_tables + 1, sizeof *m->table_pos);
}

/* Per-feature and per-table descriptors, and the layout the device ops see. */
static void build_layout(struct sr_ebc *e, int max_batch, int64_t max_values)
{
    const struct sr_ebc_config *c = &e->cfg;
    e->tables = sr_calloc((size_t)c->num_tables, sizeof *e->tables);
    e->features = sr_calloc((size_t)c->num_features, sizeof *e->features);
    e->cursor = sr_calloc((size_t)c->num_tables, sizeof *e->cursor);
    int col = 0, max_dim = 1;
    for (int f = 0; f < c->num_features; f++) {
        const struct sr_table_config *tc = &c->tables[c->feature_table[f]];
        e->features[f].table = c->feature_table[f];
        e->features[f].col = col;
        e->features[f].mean = tc->pooling == SR_POOLING_MEAN;
        col += tc->embedding_dim;
    }
    for (int t = 0; t < c->num_tables; t++) {
        e->tables[t].rows = c->tables[t].num_embeddings;
        e->tables[t].dim = c->tables[t].embedding_dim;
        e->tables[t].dtype = c->tables[t].storage;
        if (c->tables[t].embedding_dim > max_dim)
            max_dim = c->tables[t].embedding_dim;
    }
    e->layout = (struct sr_emb_layout){.num_tables = c->num_tables,
                                       .tables = e->tables,
                                       .num_features = c->num_features,
                                       .features = e->features,
                                       .out_dim = col,
                                       .max_dim = max_dim,
                                       .max_batch = max_batch,
                                       .max_values = max_values,
                                       .optim = e->optim.kind,
                                       .stochastic = c->stochastic_rounding};
    meta_init(&e->kept, c->num_features, c->num_tables);
    meta_init(&e->scratch, c->num_features, c->num_tables);
}

/* Allocate table t's block and initialise weights (DLRM reference) and state. */
static void init_table(struct sr_ebc *e, int t, uint64_t seed)
{
    struct sr_emb_table *tab = &e->tables[t];
    size_t wbytes = 4 * floats_padded(((int64_t)sr_emb_elem_bytes(tab->dtype) * tab->rows *
                                       tab->dim + 3) / 4);
    size_t sfloats = state_floats(e->optim.kind, tab->rows, tab->dim);
    char what[SR_NAME_MAX + 96];
    snprintf(what, sizeof what, "table '%s' (%lld rows x %d, weights and optimizer state)",
             e->cfg.tables[t].name, (long long)tab->rows, tab->dim);
    tab->weight = sr_dev_alloc_named(e->dev, wbytes + sizeof(float) * sfloats, what);
    tab->state = sfloats ? (float *)((char *)tab->weight + wbytes) : NULL;

    char name[SR_NAME_MAX + 16];
    snprintf(name, sizeof name, "emb.%s.weight", e->cfg.tables[t].name);
    double bound = sqrt(1.0 / (double)tab->rows);
    tab->stream = sr_rng_stream_of(name);
    sr_op_emb_init_uniform(e->dev, tab->weight, tab->dtype, tab->rows, tab->dim, 0, 0, tab->dim,
                           seed, tab->stream, -bound, bound, NULL);
    if (!sfloats)
        return;
    float s0 = e->optim.kind == SR_OPTIM_ADAM ? 0.0f : e->optim.initial_accumulator;
    sr_op_emb_fill(e->dev, tab->state, (int64_t)sfloats, s0, NULL);
}

int sr_ebc_init(struct sr_ebc **out, struct sr_device *dev, const struct sr_ebc_config *cfg,
                const struct sr_optim_config *optim, int max_batch, int64_t max_values,
                uint64_t seed)
{
    *out = NULL;
    struct sr_optim_config o = optim ? *optim : sr_optim_config_default(SR_OPTIM_SGD);
    int rc = sr_ebc_config_validate(cfg);
    if (rc)
        return rc;
    rc = validate_args(dev, &o, max_batch, max_values, cfg->num_features);
    if (rc)
        return rc;

    struct sr_ebc *e = sr_calloc(1, sizeof *e);
    e->dev = dev;
    e->optim = o;
    sr_ebc_config_copy(&e->cfg, cfg);
    build_layout(e, max_batch, max_values);
    e->layout.seed = seed;
    for (int t = 0; t < e->cfg.num_tables; t++)
        init_table(e, t, seed);
    e->workspace = sr_dev_alloc_named(dev, sr_op_emb_workspace_bytes(dev, &e->layout),
                                      "the embedding workspace (ids sorted for the backward)");
    sr_op_emb_workspace_init(dev, &e->layout, e->workspace);
    sr_dev_sync(dev, NULL);
    *out = e;
    return SR_OK;
}

void sr_ebc_free(struct sr_ebc *e)
{
    if (!e)
        return;
    for (int t = 0; t < e->cfg.num_tables; t++)
        sr_dev_free(e->dev, e->tables[t].weight);
    sr_dev_free(e->dev, e->workspace);
    sr_free(e->tables);
    sr_free(e->features);
    sr_free(e->cursor);
    sr_free(e->kept.feature_pos);
    sr_free(e->kept.table_pos);
    sr_free(e->scratch.feature_pos);
    sr_free(e->scratch.table_pos);
    sr_ebc_config_release(&e->cfg);
    sr_free(e);
}

int sr_ebc_out_dim(const struct sr_ebc *e)
{
    return e->layout.out_dim;
}

/* ---- forward ------------------------------------------------------------ */

/* The KJT's shape against the config and the capacities. */
static int check_kjt_shape(const struct sr_ebc *e, const struct sr_kjt *kjt)
{
    const struct sr_ebc_config *c = &e->cfg;
    if (kjt->num_keys != c->num_features)
        return sr_error_set(SR_ERR_INVALID_ARG, "EBC: KJT has %d features, the config %d",
                            kjt->num_keys, c->num_features);
    if (kjt->stride > e->layout.max_batch || kjt->num_values > e->layout.max_values)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "EBC: batch of %d samples and %lld ids exceeds the capacity of %d "
                            "samples and %lld ids given to sr_ebc_init",
                            kjt->stride, (long long)kjt->num_values, e->layout.max_batch,
                            (long long)e->layout.max_values);
    if (!kjt->offsets || !kjt->lengths || (kjt->num_values > 0 && !kjt->values))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "EBC: KJT lacks lengths, offsets or values; HINT: fill offsets "
                            "with sr_kjt_compute_offsets");
    for (int f = 0; kjt->keys && f < c->num_features; f++)
        if (kjt->keys[f] && strcmp(kjt->keys[f], c->feature_names[f]) != 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "EBC: KJT feature %d is '%s' but the config's is '%s'; HINT: "
                                "keys must follow the config's feature order",
                                f, kjt->keys[f], c->feature_names[f]);
    return SR_OK;
}

static int check_weights(const struct sr_ebc *e, const struct sr_kjt *kjt)
{
    if (!kjt->weights)
        return SR_OK;
    for (int f = 0; f < e->cfg.num_features; f++)
        if (e->features[f].mean)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "EBC: table '%s' pools by mean but the KJT has per-id weights "
                                "(feature '%s'); HINT: weights need sum pooling",
                                e->cfg.tables[e->features[f].table].name, e->cfg.feature_names[f]);
    return SR_OK;
}

/* Ids of feature f: the KJT's host-side length_per_key (the loader's), or,
 * without it, its offsets when the host can read them. */
static int64_t feature_ids(const struct sr_ebc *e, const struct sr_kjt *kjt, int f)
{
    if (kjt->length_per_key)
        return kjt->length_per_key[f];
    /* offsets in memory the host cannot read: the caller must fill length_per_key */
    SR_ASSERT(!sr_dev_hidden(e->dev, kjt->offsets, NULL, NULL));
    return sr_kjt_bag_begin(kjt, f, kjt->stride) - sr_kjt_bag_begin(kjt, f, 0);
}

/* Where each feature's ids go in the table-grouped id list. */
static void compute_meta(struct sr_ebc *e, const struct sr_kjt *kjt, struct step_meta *m)
{
    const int T = e->cfg.num_tables, F = e->cfg.num_features, B = kjt->stride;
    memset(m->table_pos, 0, sizeof *m->table_pos * ((size_t)T + 1));
    for (int f = 0; f < F; f++)
        m->table_pos[e->features[f].table + 1] += feature_ids(e, kjt, f);
    for (int t = 0; t < T; t++) {
        m->table_pos[t + 1] += m->table_pos[t];
        e->cursor[t] = m->table_pos[t];
    }
    for (int f = 0; f < F; f++) {
        int t = e->features[f].table;
        m->feature_pos[f] = e->cursor[t];
        e->cursor[t] += feature_ids(e, kjt, f);
    }
    m->batch = B;
    m->num_values = kjt->num_values;
    m->weighted = kjt->weights != NULL;
}

/* The batch as the device sees it: the KJT's arrays (its device twin's, batch.h). */
static struct sr_emb_batch device_batch(const struct sr_kjt *kjt, const struct step_meta *m)
{
    return (struct sr_emb_batch){.batch = m->batch,
                                 .num_values = m->num_values,
                                 .offsets = kjt->offsets,
                                 .values = kjt->values,
                                 .weights = kjt->weights,
                                 .feature_pos = m->feature_pos,
                                 .table_pos = m->table_pos};
}

static int pool(struct sr_ebc *e, struct sr_kjt *kjt, float *pooled, int keep, sr_stream_t stream)
{
    int rc = check_kjt_shape(e, kjt);
    if (!rc)
        rc = check_weights(e, kjt);
    if (rc)
        return rc;
    struct step_meta *m = keep ? &e->kept : &e->scratch;
    compute_meta(e, kjt, m);
    struct sr_emb_batch b = device_batch(kjt, m);
    sr_op_emb_forward(e->dev, &e->layout, &b, keep, pooled, e->workspace, stream);
    if (keep)
        e->have_ids = 1;
    return SR_OK;
}

int sr_ebc_forward(struct sr_ebc *e, struct sr_kjt *kjt, float *pooled, sr_stream_t stream)
{
    e->have_ids = 0;
    return pool(e, kjt, pooled, 1, stream);
}

int sr_ebc_forward_eval(struct sr_ebc *e, struct sr_kjt *kjt, float *pooled, sr_stream_t stream)
{
    return pool(e, kjt, pooled, 0, stream);
}

/* ---- backward ----------------------------------------------------------- */

void sr_ebc_backward(struct sr_ebc *e, const float *dpooled, float lr, int64_t step,
                     sr_stream_t stream)
{
    SR_ASSERT(e->have_ids);
    struct sr_emb_batch b = {.batch = e->kept.batch,
                             .num_values = e->kept.num_values,
                             .feature_pos = e->kept.feature_pos,
                             .table_pos = e->kept.table_pos,
                             .weighted = e->kept.weighted};
    struct sr_emb_update u = {
        .optim = e->optim, .lr = lr, .step = step, .lr_dev = e->lr_dev, .step_dev = e->step_dev};
    sr_op_emb_backward(e->dev, &e->layout, &b, dpooled, &u, e->workspace, stream);
    e->have_ids = 0;
}

void sr_ebc_set_update_scalars(struct sr_ebc *e, const float *lr, const int64_t *step)
{
    e->lr_dev = lr;
    e->step_dev = step;
}

/* ---- accessors ---------------------------------------------------------- */

float *sr_ebc_weights(struct sr_ebc *e, int table)
{
    SR_ASSERT(table >= 0 && table < e->cfg.num_tables);
    return e->tables[table].weight;
}

float *sr_ebc_optim_state(struct sr_ebc *e, int table)
{
    SR_ASSERT(table >= 0 && table < e->cfg.num_tables);
    return e->tables[table].state;
}

const struct sr_ebc_config *sr_ebc_config(const struct sr_ebc *e)
{
    return &e->cfg;
}

const struct sr_optim_config *sr_ebc_optim(const struct sr_ebc *e)
{
    return &e->optim;
}

int sr_ebc_feature_col(const struct sr_ebc *e, int feature)
{
    SR_ASSERT(feature >= 0 && feature < e->cfg.num_features);
    return e->features[feature].col;
}
