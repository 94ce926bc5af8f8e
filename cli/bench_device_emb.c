/*
 * `shardrec bench device`'s embedding figures (cmd_bench_device.c has the
 * method): gather and update rows/s at dims 16, 64 and 128 on uniform and
 * Zipf(1.05) ids, and the Zipf ids' hot share.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/synthetic.h"
#include "device/ops_embedding.h"
#include "bench_device.h"

/* ---- embedding gather and update ---------------------------------------------------------- */

/* One table, one feature with bags of one id, on the device. */
struct bd_emb {
    struct bd_ctx *c;
    struct sr_emb_table table;
    struct sr_emb_feature feature;
    struct sr_emb_layout layout;
    struct sr_emb_batch batch;
    struct sr_emb_update update;
    int64_t feature_pos[1], table_pos[2];
    float *weight;           /* (E, MAX_DIM) device: (E, D) views of its start */
    int64_t *offsets;        /* (N + 1) device: bag b is id b */
    int64_t *pool;           /* (pool) device, the ids launches cycle through */
    float *pooled, *dpooled; /* (N, MAX_DIM) device */
    void *workspace;         /* the layout's, for the current dim */
    int64_t slices;          /* pool / N */
};

static void emb_init(struct bd_emb *e, struct bd_ctx *c)
{
    struct sr_device *dev = c->dev;
    const struct bd_sizes *z = &c->z;
    memset(e, 0, sizeof *e);
    e->c = c;
    e->slices = z->pool / z->ids;
    e->weight = sr_dev_alloc_named(dev, (size_t)z->rows * MAX_DIM * 4, "bench device table");
    e->offsets = sr_dev_alloc_named(dev, (size_t)(z->ids + 1) * 8, "bench device offsets");
    e->pool = sr_dev_alloc_named(dev, (size_t)z->pool * 8, "bench device ids");
    e->pooled = sr_dev_alloc_named(dev, (size_t)z->ids * MAX_DIM * 4, "bench device pooled");
    e->dpooled = sr_dev_alloc_named(dev, (size_t)z->ids * MAX_DIM * 4, "bench device dpooled");
    sr_op_emb_fill(dev, e->weight, z->rows * MAX_DIM, 0.01f, c->stream);
    sr_op_emb_fill(dev, e->dpooled, z->ids * MAX_DIM, 1e-3f, c->stream);
    int64_t *offsets = sr_dev_alloc_host(dev, (size_t)(z->ids + 1) * 8);
    for (int64_t b = 0; b <= z->ids; b++)
        offsets[b] = b;
    sr_dev_copy(dev, e->offsets, offsets, (size_t)(z->ids + 1) * 8, c->stream);
    sr_dev_sync(dev, c->stream);
    sr_dev_free_host(dev, offsets);
    e->table_pos[1] = z->ids;
    e->update = (struct sr_emb_update){
        .optim = sr_optim_config_default(SR_OPTIM_SGD), .lr = 1e-6f, .step = 1};
}

static void emb_free(struct bd_emb *e)
{
    struct sr_device *dev = e->c->dev;
    sr_dev_sync(dev, e->c->stream);
    sr_dev_free(dev, e->weight);
    sr_dev_free(dev, e->offsets);
    sr_dev_free(dev, e->pool);
    sr_dev_free(dev, e->pooled);
    sr_dev_free(dev, e->dpooled);
}

/* The layout and workspace for dim D (the previous workspace freed). */
static void emb_set_dim(struct bd_emb *e, int D)
{
    struct sr_device *dev = e->c->dev;
    const int64_t N = e->c->z.ids;
    if (e->workspace) {
        sr_dev_sync(dev, e->c->stream);
        sr_dev_free(dev, e->workspace);
    }
    e->table = (struct sr_emb_table){.weight = e->weight, .rows = e->c->z.rows, .dim = D};
    e->feature = (struct sr_emb_feature){.table = 0, .col = 0, .mean = 0};
    e->layout = (struct sr_emb_layout){.num_tables = 1,
                                       .tables = &e->table,
                                       .num_features = 1,
                                       .features = &e->feature,
                                       .out_dim = D,
                                       .max_dim = D,
                                       .max_batch = (int)N,
                                       .max_values = N,
                                       .optim = SR_OPTIM_SGD};
    e->workspace = sr_dev_alloc_named(dev, sr_op_emb_workspace_bytes(dev, &e->layout),
                                      "bench device embedding workspace");
    sr_op_emb_workspace_init(dev, &e->layout, e->workspace);
    sr_dev_sync(dev, NULL); /* workspace_init runs on the default stream */
}

/* Launch i's batch: slice i mod slices of the pool. */
static void emb_point(struct bd_emb *e, int64_t i)
{
    const int64_t N = e->c->z.ids;
    e->batch = (struct sr_emb_batch){.batch = (int)N,
                                     .num_values = N,
                                     .offsets = e->offsets,
                                     .values = e->pool + (i % e->slices) * N,
                                     .weights = NULL,
                                     .feature_pos = e->feature_pos,
                                     .table_pos = e->table_pos};
}

static void gather_launch(void *arg, int64_t i)
{
    struct bd_emb *e = arg;
    emb_point(e, i);
    sr_op_emb_forward(e->c->dev, &e->layout, &e->batch, 1, e->pooled, e->workspace, e->c->stream);
}

static void update_launch(void *arg, int64_t i)
{
    struct bd_emb *e = arg;
    emb_point(e, i);
    sr_op_emb_backward(e->c->dev, &e->layout, &e->batch, e->dpooled, &e->update, e->workspace,
                       e->c->stream);
}

/* Draw the pool (training's sampler, feature 0, samples 0 ..) through host
 * memory in chunks; returns the share of its ids of popularity rank below
 * E / 100 (at least rank 0): the hottest 1% of rows. */
/* A gather or update row: ids rows/s at dim D on ids of dist. */
static void add_rate_row(struct bd_results *res, const char *name, int D, enum sr_id_dist dist,
                         int64_t launches, double seconds, double ids, int64_t rows)
{
    bd_add_row(res, &(struct bd_row){.name = name,
                                     .dim = D,
                                     .ids = bd_dist_names[dist],
                                     .launches = launches,
                                     .seconds = seconds,
                                     .rate = ids / seconds,
                                     .unit = "rows/s",
                                     .shown = 1e-6,
                                     .shown_unit = "M rows/s",
                                     .table_rows = rows});
}

static double draw_pool(struct bd_emb *e, enum sr_id_dist dist)
{
    struct bd_ctx *c = e->c;
    const int64_t P = c->z.pool, E = c->z.rows, hot_ranks = E / 100 > 0 ? E / 100 : 1;
    const int64_t chunk = P < ((int64_t)1 << 20) ? P : (int64_t)1 << 20;
    int64_t *ids = sr_dev_alloc_host(c->dev, (size_t)chunk * 8);
    int64_t *ranks = sr_malloc((size_t)chunk * 8), hot = 0;
    for (int64_t at = 0; at < P; at += chunk) {
        const int64_t n = P - at < chunk ? P - at : chunk;
        int rc = sr_synth_draw_ids(E, IDS_SEED, 0, dist, dist ? ZIPF_S : 0, at, n, ids, ranks);
        SR_ASSERT(rc == SR_OK); /* sizes and law fixed above */
        for (int64_t i = 0; i < n; i++)
            hot += ranks[i] < hot_ranks;
        sr_dev_copy(c->dev, e->pool + at, ids, (size_t)n * 8, c->stream);
        sr_dev_sync(c->dev, c->stream); /* before the host buffer is refilled */
    }
    sr_dev_free_host(c->dev, ids);
    sr_free(ranks);
    return (double)hot / (double)P;
}

/* Gather and update at every dim on one pool of ids. */
static void measure_dist(struct bd_emb *e, enum sr_id_dist dist, struct bd_results *res)
{
    const int64_t E = e->c->z.rows;
    res->hot_share[dist] = draw_pool(e, dist);
    for (int d = 0; d < SR_TOPO_DIMS; d++) {
        const int D = sr_topology_dims[d];
        emb_set_dim(e, D);
        const struct cli_timed_op gather = {gather_launch, NULL, e};
        const struct cli_timed_op update = {update_launch, gather_launch, e};
        const double ids = (double)e->c->z.ids;
        int64_t k;
        double s = cli_bench_timer_figure(&e->c->timer, &gather, &k);
        res->gather[dist][d] = ids / s;
        add_rate_row(res, "gather", D, dist, k, s, ids, E);
        s = cli_bench_timer_figure(&e->c->timer, &update, &k);
        res->update[dist][d] = ids / s;
        add_rate_row(res, "update (sgd)", D, dist, k, s, ids, E);
    }
    bd_add_row(res, &(struct bd_row){.name = "hot share (top 1%)",
                                     .ids = bd_dist_names[dist],
                                     .rate = res->hot_share[dist],
                                     .unit = "share",
                                     .shown = 1,
                                     .shown_unit = "of ids",
                                     .table_rows = E,
                                     .ids_drawn = e->c->z.pool});
}

void bd_measure_embedding(struct bd_ctx *c, struct bd_results *res)
{
    struct bd_emb e;
    emb_init(&e, c);
    measure_dist(&e, SR_ID_DIST_UNIFORM, res);
    measure_dist(&e, SR_ID_DIST_ZIPF, res);
    sr_dev_sync(c->dev, c->stream);
    sr_dev_free(c->dev, e.workspace);
    emb_free(&e);
}
