/*
 * The harness of tests/mpi/mpi_sharded_ebc.c (harness.h): the check counter,
 * the table configs, the batches, the pooled tolerance and the plans.
 *
 * A batch is drawn from seeds of (step, global sample, feature), so that the
 * slice [rank * B, rank * B + B) a rank trains on holds exactly the samples
 * of its part of the global batch that the reference trains on.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "harness.h"

long long checks, failures;
const char *where = "";

void check_at(int ok, const char *file, int line, const char *fmt, ...)
{
    checks++;
    if (ok)
        return;
    if (++failures > 40)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] %s:%d: %s: FAIL: ", sr_get_rank(), file, line, where);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- config ------------------------------------------------------------------ */

static void add_table(struct tcfg *c, const char *name, int64_t rows, int dim, enum sr_pooling pool,
                      enum sr_id_policy pol, int64_t range)
{
    int t = c->cfg.num_tables++;
    struct sr_table_config *tc = &c->tables[t];
    memset(tc, 0, sizeof *tc);
    snprintf(tc->name, SR_NAME_MAX, "%s", name);
    tc->num_embeddings = rows;
    tc->embedding_dim = dim;
    tc->pooling = pool;
    tc->id_policy = pol;
    c->id_range[t] = range;
}

static void add_feature(struct tcfg *c, const char *name, int table)
{
    int f = c->cfg.num_features++;
    snprintf(c->feature_names[f], SR_NAME_MAX, "%s", name);
    c->feature_table[f] = table;
}

static void tcfg_init(struct tcfg *c)
{
    memset(c, 0, sizeof *c);
    c->cfg.tables = c->tables;
    c->cfg.feature_names = c->feature_names;
    c->cfg.feature_table = c->feature_table;
    c->max_len = 3;
}

void main_config(struct tcfg *c)
{
    tcfg_init(c);
    add_table(c, "t0", 10, 4, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 10);
    add_table(c, "t1", 1, 8, SR_POOLING_MEAN, SR_ID_POLICY_ERROR, 1);
    add_table(c, "t2", 37, 6, SR_POOLING_SUM, SR_ID_POLICY_HASH, 1000);
    add_table(c, "t3", 203, 4, SR_POOLING_MEAN, SR_ID_POLICY_ERROR, 50);
    add_feature(c, "f0", 0);
    add_feature(c, "f1", 1);
    add_feature(c, "f2", 2);
    add_feature(c, "f3", 0);
    add_feature(c, "f4", 3);
}

void weighted_config(struct tcfg *c)
{
    tcfg_init(c);
    add_table(c, "w0", 13, 4, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 13);
    add_table(c, "w1", 3, 2, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 3);
    add_feature(c, "g0", 0);
    add_feature(c, "g1", 1);
    add_feature(c, "g2", 0);
    c->weighted = 1;
}

void big_config(struct tcfg *c)
{
    tcfg_init(c);
    add_table(c, "big", 1000, 8, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 1000);
    add_feature(c, "b0", 0);
    c->balanced = 1;
}

/* ---- batches ------------------------------------------------------------------ */

static uint64_t draw(int step, int kind, int f, int64_t g, int i)
{
    return sr_rng_u64(1234 + (uint64_t)step, (uint64_t)kind * 64 + (uint64_t)f,
                      (uint64_t)g * 64 + (uint64_t)i);
}

static int bag_len(const struct tcfg *c, int step, int f, int64_t g)
{
    return c->balanced ? 2 : (int)(draw(step, 0, f, g, 0) % (uint64_t)(c->max_len + 1));
}

static int64_t bag_id(const struct tcfg *c, int step, int f, int64_t g, int i)
{
    int t = c->feature_table[f];
    int64_t r = c->id_range[t];
    int64_t v = (int64_t)(draw(step, 1, f, g, i) % (uint64_t)r);
    return c->balanced ? (v % (r / 2)) + (i % 2) * (r / 2) : v;
}

int loader_check(const struct tcfg *c, struct sr_kjt *kjt)
{
    const struct sr_ebc_config *cfg = &c->cfg;
    int64_t rows[64];
    enum sr_id_policy policy[64];
    SR_ASSERT(cfg->num_features <= 64);
    for (int f = 0; f < cfg->num_features; f++) {
        rows[f] = cfg->tables[cfg->feature_table[f]].num_embeddings;
        policy[f] = cfg->tables[cfg->feature_table[f]].id_policy;
    }
    int rc = sr_kjt_validate(kjt);
    return rc ? rc : sr_kjt_apply_id_policy(kjt, rows, policy);
}

void make_batch_raw(struct batch *bt, const struct tcfg *c, int step, int64_t g0, int n)
{
    const int F = c->cfg.num_features;
    bt->lengths = sr_calloc((size_t)F * n, sizeof *bt->lengths);
    bt->offsets = sr_calloc((size_t)F * n + 1, sizeof *bt->offsets);
    int64_t N = 0;
    for (int f = 0; f < F; f++)
        for (int b = 0; b < n; b++)
            N += bt->lengths[f * n + b] = bag_len(c, step, f, g0 + b);
    bt->values = sr_calloc((size_t)N + 1, sizeof *bt->values);
    bt->weights = c->weighted ? sr_calloc((size_t)N + 1, sizeof *bt->weights) : NULL;
    int64_t k = 0;
    for (int f = 0; f < F; f++)
        for (int b = 0; b < n; b++)
            for (int i = 0; i < bt->lengths[f * n + b]; i++, k++) {
                bt->values[k] = bag_id(c, step, f, g0 + b, i);
                if (bt->weights)
                    bt->weights[k] = (float)(0.5 + sr_rng_uniform(7, (uint64_t)f, (uint64_t)k));
            }
    bt->kjt = (struct sr_kjt){.num_keys = F,
                              .stride = n,
                              .lengths = bt->lengths,
                              .offsets = bt->offsets,
                              .values = bt->values,
                              .weights = bt->weights,
                              .num_values = N,
                              .num_weights = bt->weights ? N : 0,
                              .length_per_key = bt->per_key};
    /* weights: same values for a sample whatever slice it is in */
    if (bt->weights) {
        k = 0;
        for (int f = 0; f < F; f++)
            for (int b = 0; b < n; b++)
                for (int i = 0; i < bt->lengths[f * n + b]; i++, k++)
                    bt->weights[k] =
                        (float)(0.5 + sr_rng_uniform(7, (uint64_t)f, (uint64_t)(g0 + b) * 64 + i));
    }
    SR_ASSERT(sr_kjt_compute_offsets(&bt->kjt) == SR_OK);
    sr_kjt_fill_length_per_key(&bt->kjt);
}

/* A batch as the loader hands it over: checked, ids in range. */
void make_batch(struct batch *bt, const struct tcfg *c, int step, int64_t g0, int n)
{
    make_batch_raw(bt, c, step, g0, n);
    SR_ASSERT(loader_check(c, &bt->kjt) == SR_OK);
}

void free_batch(struct batch *bt)
{
    sr_free(bt->lengths), sr_free(bt->offsets), sr_free(bt->values), sr_free(bt->weights);
}

float dpooled_at(int step, int64_t g, int col)
{
    return (float)(2.0 * sr_rng_uniform(99 + (uint64_t)step, (uint64_t)col, (uint64_t)g) - 1.0);
}

/* Pooled payload dtype of the case being run (comms.pooled_dtype). */
enum sr_dtype wire = SR_DTYPE_F32;

/* fp32: 1e-5 relative (summation order only). fp16/bf16: each value crossing
 * the wire is rounded once (relative error <= u = 2^-8 for bf16, 2^-11 for
 * fp16). tw/cw send whole pooled values: error <= u |b|. rw/twrw send partial
 * sums: error <= u * Σ|partials| <= 2^-8 * 3 ids * 0.32 (rows of tables with
 * E >= 10 are within sqrt(1/E)) ~ 3.7e-3, the one-row table being a single
 * partial. The weights, moved k = 3 times by slightly rounded gradients, move
 * by far less. So 2e-2 relative with magnitudes floored at 0.25 (5e-3
 * absolute) holds every case while catching a misplaced or unsummed block
 * (errors of the size of the values themselves). */
int close_to(float a, float b)
{
    if (wire != SR_DTYPE_F32)
        return fabsf(a - b) <= 2e-2f * fmaxf(fabsf(b), 0.25f);
    return fabsf(a - b) <= 1e-5f * fmaxf(fabsf(b), 0.1f);
}

/* ---- plans -------------------------------------------------------------------- */

struct sr_plan *uniform(const struct tcfg *c, enum sr_sharding_type t, const struct world *w)
{
    struct sr_plan *p;
    SR_ASSERT(sr_plan_uniform(&p, &c->cfg, t, w->W, w->L) == SR_OK);
    return p;
}

/* t0 rw, t1 dp, t2 cw (pieces on the last ranks), t3 twrw on the last node. */
struct sr_plan *mixed(const struct tcfg *c, const struct world *w)
{
    char text[1024];
    int W = w->W, nodes = W / w->L;
    int cw_n = W >= 3 ? 3 : W == 2 ? 2 : 1;
    char ranks[64] = "";
    for (int j = 0; j < cw_n; j++)
        snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s%d", j ? "," : "",
                 W - 1 - j % W);
    snprintf(text, sizeof text,
             "{\"tables\": [{\"name\": \"t0\", \"sharding\": \"rw\"},"
             " {\"name\": \"t1\", \"sharding\": \"dp\"},"
             " {\"name\": \"t2\", \"sharding\": \"cw\", \"ranks\": [%s]},"
             " {\"name\": \"t3\", \"sharding\": \"twrw\", \"node\": %d}]}",
             ranks, nodes - 1);
    struct sr_plan *p;
    int rc = sr_plan_from_json(&p, text, "mixed", &c->cfg, W, w->L);
    if (rc)
        fprintf(stderr, "mixed plan: %s\n", sr_error_message());
    SR_ASSERT(rc == SR_OK);
    return p;
}
