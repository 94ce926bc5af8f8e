/*
 * Hybrid tables in the sharded EBC (plan.h: hot rows replicated, the rest
 * row-wise), run under mpirun on 1 to 4 ranks by tests/check_mpi_hybrid.sh.
 * For every ranks-per-node L dividing W, on a config whose hybrid tables
 * cover the edge cases (hot rows scattered over a table shared by two
 * features; a mean-pooled table whose ids are mostly hot; H = E: no id is
 * cold; H = 0: no id is hot; beside a plain rw table), every rank trains
 * its slice of each global batch and checks:
 *
 *   - against one sr_ebc trained on the whole global batch: pooled outputs
 *     of every step and the final tables (gathered), within 1e-5 relative,
 *     for sgd, adagrad, rowwise adagrad and adam, and with per-id weights;
 *   - against the same config under an all-rw plan over 20 steps: the same
 *     pooled outputs and tables within 1e-5 relative;
 *   - reruns: the same plan twice gives the same bits (pooled, tables);
 *   - the batches hold bags all hot, all cold, mixed and empty;
 *   - no allocation in a step after the first;
 *   - save and load: a fresh EBC (another seed) given a trained one's
 *     shards (weights and optimizer state, after sr_sharded_ebc_hot_rows_out)
 *     and sr_sharded_ebc_hot_rows_in trains on bit for bit as the trained one.
 *
 * The batches, configs' helpers and checks are tests/mpi/sharded_ebc/'s
 * harness. Rank 0 prints one summary line; exit 1 on every rank if any
 * check failed on any rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/host_view.h"
#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/sharded_ebc.h"
#include "sharded_ebc/harness.h"

#define LONG_STEPS 20

/* ---- config and plans ------------------------------------------------------------ */

static void add_table(struct tcfg *c, const char *name, int64_t rows, int dim, enum sr_pooling pool,
                      int64_t range)
{
    struct sr_table_config *tc = &c->tables[c->cfg.num_tables];
    memset(tc, 0, sizeof *tc);
    snprintf(tc->name, SR_NAME_MAX, "%s", name);
    tc->num_embeddings = rows;
    tc->embedding_dim = dim;
    tc->pooling = pool;
    c->id_range[c->cfg.num_tables++] = range;
}

static void add_feature(struct tcfg *c, const char *name, int table)
{
    snprintf(c->feature_names[c->cfg.num_features], SR_NAME_MAX, "%s", name);
    c->feature_table[c->cfg.num_features++] = table;
}

/* h0 shared by f0 and f3, hot rows scattered; h1 mean, ids mostly hot; h2
 * all hot (H = E); h3 none hot (H = 0); t4 plain. weighted: sum pooling
 * everywhere and per-id weights. */
static void hybrid_config(struct tcfg *c, int weighted)
{
    memset(c, 0, sizeof *c);
    c->cfg.tables = c->tables;
    c->cfg.feature_names = c->feature_names;
    c->cfg.feature_table = c->feature_table;
    c->max_len = 3;
    c->weighted = weighted;
    add_table(c, "h0", 50, 4, SR_POOLING_SUM, 50);
    add_table(c, "h1", 31, 6, weighted ? SR_POOLING_SUM : SR_POOLING_MEAN, 9);
    add_table(c, "h2", 20, 4, SR_POOLING_SUM, 20);
    add_table(c, "h3", 17, 2, SR_POOLING_SUM, 17);
    add_table(c, "t4", 9, 4, SR_POOLING_SUM, 9);
    add_feature(c, "f0", 0);
    add_feature(c, "f1", 1);
    add_feature(c, "f2", 2);
    add_feature(c, "f3", 0);
    add_feature(c, "f4", 3);
    add_feature(c, "f5", 4);
}

/* h0's hot rows: the even rows below 40 and two odd ones (22 of 50) */
#define NUM_HOT_H0 22
static const int64_t HOT_H0[NUM_HOT_H0] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                           22, 24, 26, 28, 30, 32, 34, 36, 38, 41, 49};
static const char *HOT_H1 = "[1, 2, 3, 5, 7, 30]";

static struct sr_plan *hybrid_plan(const struct tcfg *c, const struct world *w)
{
    char text[1024], hot0[256] = "[";
    for (int i = 0; i < NUM_HOT_H0; i++)
        snprintf(hot0 + strlen(hot0), sizeof hot0 - strlen(hot0), "%s%lld", i ? ", " : "",
                 (long long)HOT_H0[i]);
    strcat(hot0, "]");
    snprintf(text, sizeof text,
             "{\"tables\": [{\"name\": \"h0\", \"sharding\": \"hybrid\", \"hot\": %s},"
             " {\"name\": \"h1\", \"sharding\": \"hybrid\", \"hot\": %s},"
             " {\"name\": \"h2\", \"sharding\": \"hybrid\", \"hot\": [0, 1, 2, 3, 4, 5, 6, 7, 8,"
             " 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]},"
             " {\"name\": \"h3\", \"sharding\": \"hybrid\", \"hot\": []},"
             " {\"name\": \"t4\", \"sharding\": \"rw\"}]}",
             hot0, HOT_H1);
    struct sr_plan *p;
    int rc = sr_plan_from_json(&p, text, "hybrid", &c->cfg, w->W, w->L);
    if (rc)
        fprintf(stderr, "hybrid plan: %s\n", sr_error_message());
    SR_ASSERT(rc == SR_OK);
    return p;
}

static int in_list(int64_t v, const int64_t *list, int n)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v)
            return 1;
    return 0;
}

/* ---- a run -------------------------------------------------------------------------- */

static int hybrid_run;         /* the run's plan is hybrid_plan's */
static uint64_t hyb_out_bytes; /* output and gradient dist bytes this rank sent, summed */

/* What a run leaves: every step's pooled slice and the final tables (rank 0). */
struct record {
    float *pooled; /* (steps, B, D) */
    float *tables; /* rank 0: every table, config order */
    int64_t table_floats;
};

static void record_free(struct record *r)
{
    sr_free(r->pooled);
    sr_free(r->tables);
}

static int64_t all_table_floats(const struct tcfg *c)
{
    int64_t n = 0;
    for (int t = 0; t < c->cfg.num_tables; t++)
        n += c->tables[t].num_embeddings * c->tables[t].embedding_dim;
    return n;
}

static void gather_tables(struct sr_sharded_ebc *s, const struct tcfg *c, const struct world *w,
                          struct record *r)
{
    r->table_floats = all_table_floats(c);
    r->tables = sr_calloc((size_t)r->table_floats + 1, sizeof(float));
    int64_t off = 0;
    for (int t = 0; t < c->cfg.num_tables; t++) {
        CHECK(sr_sharded_ebc_gather_table(s, t, w->rank == 0 ? r->tables + off : NULL) == SR_OK,
              "gather: %s", sr_error_message());
        off += c->tables[t].num_embeddings * c->tables[t].embedding_dim;
    }
}

/* Ids of a batch that leave for their owners under the hybrid plan: all but
 * the hot ones (every id of h2, none of h3). */
static int64_t cold_ids(const struct tcfg *c, const struct batch *bt, int n)
{
    static const int64_t hot1[] = {1, 2, 3, 5, 7, 30};
    int64_t cold = 0;
    for (int f = 0; f < c->cfg.num_features; f++) {
        const int t = c->feature_table[f];
        for (int64_t i = bt->offsets[f * n]; i < bt->offsets[(f + 1) * n]; i++) {
            const int64_t v = bt->values[i];
            cold += t == 0   ? !in_list(v, HOT_H0, NUM_HOT_H0)
                    : t == 1 ? !in_list(v, hot1, 6)
                             : t != 2;
        }
    }
    return cold;
}

/* Bytes this rank sends in the compact exchange of hybrid tables' cold rows
 * in one step: as the owner of block r, the row of every other rank's bag
 * with a cold id in it; as a sample's rank, that row's gradient back. */
static uint64_t compact_bytes(const struct tcfg *c, int step, const struct world *w)
{
    static const int64_t hot1[] = {1, 2, 3, 5, 7, 30};
    struct batch all;
    make_batch(&all, c, step, 0, w->W * B);
    const int GB = w->W * B;
    uint64_t bytes = 0;
    for (int f = 0; f < c->cfg.num_features; f++) {
        const int t = c->feature_table[f];
        if (t > 3) /* t4 is rw */
            continue;
        const int64_t E = c->tables[t].num_embeddings, blk = (E + w->W - 1) / w->W;
        for (int g = 0; g < GB; g++)
            for (int r = 0; r < w->W; r++) {
                int cold = 0;
                for (int64_t i = all.offsets[f * GB + g]; i < all.offsets[f * GB + g + 1]; i++) {
                    const int64_t v = all.values[i];
                    const int hot = t == 0   ? in_list(v, HOT_H0, NUM_HOT_H0)
                                    : t == 1 ? in_list(v, hot1, 6)
                                             : t == 2;
                    cold |= !hot && v / blk == r;
                }
                const int src = g / B;
                if (cold && src != r && (src == w->rank || r == w->rank))
                    bytes += 4 * (uint64_t)c->tables[t].embedding_dim;
            }
    }
    free_batch(&all);
    return bytes;
}

/* One training step of s on this rank's slice of step `step`; pooled out. */
static void train_step(struct sr_sharded_ebc *s, const struct tcfg *c, const struct world *w,
                       int step, float lr, float *pooled)
{
    const int D = sr_sharded_ebc_out_dim(s);
    struct batch mine;
    make_batch(&mine, c, step, (int64_t)w->rank * B, B);
    float *dp = sr_calloc((size_t)B * D, sizeof(float));
    for (int b = 0; b < B; b++)
        for (int col = 0; col < D; col++)
            dp[b * D + col] = dpooled_at(step, (int64_t)w->rank * B + b, col);
    uint64_t allocs = sr_alloc_count();
    sr_comm_counters_reset(w->sparse);
    CHECK(sr_sharded_ebc_forward(s, &mine.kjt, pooled, NULL) == SR_OK, "step %d forward: %s", step,
          sr_error_message());
    sr_sharded_ebc_backward(s, dp, lr, step, NULL);
    CHECK(step == 1 || sr_alloc_count() == allocs, "step %d: forward/backward allocated", step);
    const struct sr_comm_counters *k = sr_comm_counters(w->sparse);
    const uint64_t sent = k->bytes_intra[SR_COLL_ALL_TO_ALLV] + k->bytes_inter[SR_COLL_ALL_TO_ALLV];
    if (hybrid_run) /* the sparse communicator's all-to-alls: only the compact rows */
        CHECK(sent == compact_bytes(c, step, w) && k->calls[SR_COLL_ALL_TO_ALLV] == 2,
              "step %d: compact exchange sent %llu bytes in %llu calls, expected %llu in 2", step,
              (unsigned long long)sent, (unsigned long long)k->calls[SR_COLL_ALL_TO_ALLV],
              (unsigned long long)compact_bytes(c, step, w));
    hyb_out_bytes += sent + k->bytes_intra[SR_COLL_REDUCE_SCATTER] +
                     k->bytes_inter[SR_COLL_REDUCE_SCATTER] + k->bytes_intra[SR_COLL_ALL_GATHER] +
                     k->bytes_inter[SR_COLL_ALL_GATHER];
    struct sr_sharded_ebc_stats st;
    sr_sharded_ebc_stats(s, &st);
    if (hybrid_run) /* hot ids stay here: only the cold ones are sent */
        CHECK(st.ids_sent == cold_ids(c, &mine, B), "step %d: %lld ids sent, %lld are cold", step,
              (long long)st.ids_sent, (long long)cold_ids(c, &mine, B));
    size_t n;
    float *g = sr_sharded_ebc_dp_grad_buffer(s, &n);
    if (n)
        sr_comm_all_reduce(w->world, g, g, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    sr_sharded_ebc_dp_update(s, lr, step, NULL);
    sr_dev_sync(sr_device_cpu(), NULL);
    sr_free(dp);
    free_batch(&mine);
}

static struct sr_sharded_ebc *make_ebc(const struct tcfg *c, const struct sr_plan *p,
                                       const struct sr_optim_config *oc, const struct world *w,
                                       uint64_t seed)
{
    /* the input dist on its own communicator: the sparse one then carries
     * only the output and gradient dists */
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, SR_DTYPE_F32, w->world};
    struct sr_sharded_ebc *s;
    const int64_t maxv = (int64_t)B * c->cfg.num_features * (c->max_len + 2);
    int rc = sr_sharded_ebc_init(&s, sr_device_cpu(), &comms, &c->cfg, p, oc, B, maxv, NULL, seed);
    CHECK(rc == SR_OK, "init: %s", sr_error_message());
    return rc ? NULL : s;
}

static struct sr_optim_config optim_of(enum sr_optim_kind kind)
{
    struct sr_optim_config oc = sr_optim_config_default(kind);
    if (kind == SR_OPTIM_ADAGRAD)
        oc.initial_accumulator = 0.1f;
    return oc;
}

static float lr_of(enum sr_optim_kind kind)
{
    return kind == SR_OPTIM_ADAM ? 0.01f : 0.1f;
}

/* steps of plan p; optionally against the unsharded reference. */
static void run(const struct tcfg *c, const struct sr_plan *p, enum sr_optim_kind kind,
                const struct world *w, int steps, int check_ref, struct record *r)
{
    struct sr_optim_config oc = optim_of(kind);
    const float lr = lr_of(kind);
    struct sr_sharded_ebc *s = make_ebc(c, p, &oc, w, 42);
    if (!s)
        return;
    hybrid_run = p->tables[0].type == SR_SHARDING_TYPE_HYBRID;
    const int D = sr_sharded_ebc_out_dim(s), GB = w->W * B;
    struct sr_ebc *ref = NULL;
    if (check_ref)
        SR_ASSERT(sr_ebc_init(&ref, sr_device_cpu(), &c->cfg, &oc, GB,
                              (int64_t)GB * c->cfg.num_features * (c->max_len + 2), 42) == SR_OK);
    r->pooled = sr_calloc((size_t)steps * B * D + 1, sizeof(float));
    float *ref_pooled = sr_calloc((size_t)GB * D, sizeof(float));
    float *ref_dp = sr_calloc((size_t)GB * D, sizeof(float));
    for (int step = 1; step <= steps; step++) {
        float *pooled = r->pooled + (size_t)(step - 1) * B * D;
        train_step(s, c, w, step, lr, pooled);
        if (!ref)
            continue;
        struct batch all;
        make_batch(&all, c, step, 0, GB);
        for (int64_t g = 0; g < GB; g++)
            for (int col = 0; col < D; col++)
                ref_dp[g * D + col] = dpooled_at(step, g, col);
        CHECK(sr_ebc_forward(ref, &all.kjt, ref_pooled, NULL) == SR_OK, "ref: %s",
              sr_error_message());
        sr_dev_sync(sr_device_cpu(), NULL);
        sr_ebc_backward(ref, ref_dp, lr, step, NULL);
        sr_dev_sync(sr_device_cpu(), NULL);
        int64_t bad = 0;
        for (int64_t i = 0; i < (int64_t)B * D; i++)
            bad += !close_to(pooled[i], ref_pooled[(size_t)w->rank * B * D + i]);
        CHECK(bad == 0, "step %d: %lld pooled values differ from the reference", step,
              (long long)bad);
        free_batch(&all);
    }
    gather_tables(s, c, w, r);
    int64_t off = 0;
    for (int t = 0; ref && w->rank == 0 && t < c->cfg.num_tables; t++) {
        const int64_t n = c->tables[t].num_embeddings * c->tables[t].embedding_dim;
        const float *want = HV(sr_ebc_weights(ref, t));
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += !close_to(r->tables[off + i], want[i]);
        CHECK(bad == 0, "table %s: %lld of %lld weights differ from the reference",
              c->tables[t].name, (long long)bad, (long long)n);
        off += n;
    }
    sr_free(ref_pooled);
    sr_free(ref_dp);
    sr_ebc_free(ref);
    sr_sharded_ebc_free(s);
}

/* ---- cases -------------------------------------------------------------------------- */

/* Feature f0's (table h0) bags over steps 1..steps of the global batch: all
 * hot, all cold, mixed, empty; each kind must occur. */
static void check_bag_kinds(const struct tcfg *c, const struct world *w, int steps)
{
    int64_t kinds[4] = {0, 0, 0, 0};
    for (int step = 1; step <= steps; step++) {
        struct batch all;
        make_batch(&all, c, step, 0, w->W * B);
        for (int b = 0; b < w->W * B; b++) {
            int nh = 0, n = all.lengths[b];
            for (int64_t i = all.offsets[b]; i < all.offsets[b + 1]; i++)
                nh += in_list(all.values[i], HOT_H0, NUM_HOT_H0);
            kinds[n == 0 ? 3 : nh == n ? 0 : nh == 0 ? 1 : 2]++;
        }
        free_batch(&all);
    }
    CHECK(kinds[0] && kinds[1] && kinds[2] && kinds[3],
          "bags of f0: %lld all hot, %lld all cold, %lld mixed, %lld empty: a kind is missing",
          (long long)kinds[0], (long long)kinds[1], (long long)kinds[2], (long long)kinds[3]);
}

static void compare_records(const struct record *a, const struct record *b, int64_t pooled_n,
                            const struct world *w, int bitwise, const char *what)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < pooled_n; i++)
        bad += bitwise ? memcmp(&a->pooled[i], &b->pooled[i], sizeof(float)) != 0
                       : !close_to(a->pooled[i], b->pooled[i]);
    CHECK(bad == 0, "%s: %lld pooled values differ", what, (long long)bad);
    bad = 0;
    for (int64_t i = 0; w->rank == 0 && i < a->table_floats; i++)
        bad += bitwise ? memcmp(&a->tables[i], &b->tables[i], sizeof(float)) != 0
                       : !close_to(a->tables[i], b->tables[i]);
    CHECK(bad == 0, "%s: %lld table weights differ", what, (long long)bad);
}

static int64_t out_dim_of(const struct tcfg *c)
{
    int64_t d = 0;
    for (int f = 0; f < c->cfg.num_features; f++)
        d += c->tables[c->feature_table[f]].embedding_dim;
    return d;
}

/* The reference, every optimizer, with and without weights; reruns. */
static void run_reference(const struct world *w)
{
    static const enum sr_optim_kind kinds[] = {SR_OPTIM_SGD, SR_OPTIM_ADAGRAD,
                                               SR_OPTIM_ROWWISE_ADAGRAD, SR_OPTIM_ADAM};
    char label[128];
    for (int weighted = 0; weighted < 2; weighted++) {
        struct tcfg c;
        hybrid_config(&c, weighted);
        struct sr_plan *p = hybrid_plan(&c, w);
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            snprintf(label, sizeof label, "W=%d L=%d hybrid %s%s", w->W, w->L,
                     sr_optim_kind_name(kinds[k]), weighted ? " weighted" : "");
            where = label;
            struct record a = {0}, b = {0};
            run(&c, p, kinds[k], w, STEPS + 2, 1, &a);
            run(&c, p, kinds[k], w, STEPS + 2, 0, &b);
            compare_records(&a, &b, (int64_t)(STEPS + 2) * B * out_dim_of(&c), w, 1, "rerun");
            record_free(&a);
            record_free(&b);
        }
        if (!weighted)
            check_bag_kinds(&c, w, LONG_STEPS); /* the bags run_against_rw trains on */
        sr_plan_free(p);
    }
}

/* 20 steps: hybrid against all rw. */
static void run_against_rw(const struct world *w)
{
    struct tcfg c;
    hybrid_config(&c, 0);
    char label[128];
    snprintf(label, sizeof label, "W=%d L=%d hybrid vs rw, %d steps", w->W, w->L, LONG_STEPS);
    where = label;
    struct sr_plan *p = hybrid_plan(&c, w), *q = uniform(&c, SR_SHARDING_TYPE_ROW_WISE, w);
    struct record a = {0}, b = {0};
    uint64_t bytes[2], all[2];
    hyb_out_bytes = 0;
    run(&c, p, SR_OPTIM_ADAGRAD, w, LONG_STEPS, 0, &a);
    bytes[0] = hyb_out_bytes;
    hyb_out_bytes = 0;
    run(&c, q, SR_OPTIM_ADAGRAD, w, LONG_STEPS, 0, &b);
    bytes[1] = hyb_out_bytes;
    compare_records(&a, &b, (int64_t)LONG_STEPS * B * out_dim_of(&c), w, 0, "hybrid vs rw");
    sr_comm_all_reduce(w->world, bytes, all, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    CHECK(w->W == 1 || all[0] < all[1], "hybrid's output-dist bytes %llu, all rw's %llu",
          (unsigned long long)all[0], (unsigned long long)all[1]);
    if (w->rank == 0)
        printf("W=%d L=%d: output + gradient dist bytes over %d steps, all ranks: hybrid %llu, "
               "all rw %llu\n",
               w->W, w->L, LONG_STEPS, (unsigned long long)all[0], (unsigned long long)all[1]);
    record_free(&a);
    record_free(&b);
    sr_plan_free(p);
    sr_plan_free(q);
}

/* Copy every local shard of `from` into `to` (same plan and rank), as a
 * checkpoint's save and load do. */
static void copy_shards(struct sr_sharded_ebc *from, struct sr_sharded_ebc *to)
{
    const int n = sr_sharded_ebc_num_local_shards(from);
    CHECK(n == sr_sharded_ebc_num_local_shards(to), "local shards %d and %d", n,
          sr_sharded_ebc_num_local_shards(to));
    sr_sharded_ebc_hot_rows_out(from, NULL);
    sr_dev_sync(sr_device_cpu(), NULL);
    for (int i = 0; i < n; i++) {
        struct sr_sharded_ebc_shard a, b;
        sr_sharded_ebc_local_shard(from, i, &a);
        sr_sharded_ebc_local_shard(to, i, &b);
        CHECK(a.table == b.table && a.shard == b.shard && a.rows == b.rows && a.dim == b.dim,
              "shard %d differs", i);
        const size_t nw = (size_t)a.rows * a.dim;
        sr_test_host_put(b.weight, HV(a.weight), sizeof(float) * nw);
        if (a.state_floats)
            sr_test_host_put(b.state, HV(a.state), sizeof(float) * a.state_floats);
    }
}

static void run_round_trip(const struct world *w)
{
    struct tcfg c;
    hybrid_config(&c, 0);
    char label[128];
    snprintf(label, sizeof label, "W=%d L=%d hybrid save/load", w->W, w->L);
    where = label;
    struct sr_plan *p = hybrid_plan(&c, w);
    const enum sr_optim_kind kind = SR_OPTIM_ADAM;
    struct sr_optim_config oc = optim_of(kind);
    struct sr_sharded_ebc *a = make_ebc(&c, p, &oc, w, 42), *b = make_ebc(&c, p, &oc, w, 7);
    const int D = sr_sharded_ebc_out_dim(a);
    float *pa = sr_calloc((size_t)B * D, sizeof(float)),
          *pb = sr_calloc((size_t)B * D, sizeof(float));
    for (int step = 1; step <= STEPS; step++)
        train_step(a, &c, w, step, lr_of(kind), pa);
    copy_shards(a, b);
    CHECK(sr_sharded_ebc_hot_rows_in(b) == SR_OK, "hot_rows_in: %s", sr_error_message());
    for (int step = STEPS + 1; step <= STEPS + 2; step++) {
        train_step(a, &c, w, step, lr_of(kind), pa);
        train_step(b, &c, w, step, lr_of(kind), pb);
        CHECK(memcmp(pa, pb, sizeof(float) * B * D) == 0, "step %d: loaded EBC's pooled differ",
              step);
    }
    struct record ra = {0}, rb = {0};
    gather_tables(a, &c, w, &ra);
    gather_tables(b, &c, w, &rb);
    ra.pooled = rb.pooled = NULL;
    compare_records(&ra, &rb, 0, w, 1, "after load");
    record_free(&ra);
    record_free(&rb);
    sr_free(pa);
    sr_free(pb);
    sr_sharded_ebc_free(a);
    sr_sharded_ebc_free(b);
    sr_plan_free(p);
}

int main(int argc, char **argv)
{
    unsetenv("SR_RANKS_PER_NODE");
    sr_comm_t first;
    if (sr_comm_init_mpi(&first, &argc, &argv, 1) != SR_OK) {
        fprintf(stderr, "mpi_hybrid: %s\n", sr_error_message());
        sr_comm_finalize();
        return 1;
    }
    const int W = sr_comm_size(first);
    for (int L = 1; L <= W; L++) {
        if (W % L != 0)
            continue;
        struct world w;
        SR_ASSERT(sr_comm_init_mpi(&w.world, NULL, NULL, L) == SR_OK);
        sr_comm_bind_device(w.world, sr_device_cpu());
        w.sparse = sr_comm_dup(w.world);
        w.node = sr_comm_split_node(w.sparse);
        w.cross = sr_comm_split_cross(w.sparse);
        w.W = W, w.L = L, w.rank = sr_comm_rank(w.world);
        run_reference(&w);
        run_against_rw(&w);
        run_round_trip(&w);
        sr_comm_free(w.cross);
        sr_comm_free(w.node);
        sr_comm_free(w.sparse);
        sr_comm_free(w.world);
    }
    long long tot[2] = {checks, failures};
    sr_comm_all_reduce(first, tot, tot, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    if (sr_comm_rank(first) == 0)
        printf("mpi_hybrid: %d ranks: %lld checks, %lld failed\n", W, tot[0], tot[1]);
    sr_comm_free(first);
    sr_comm_finalize();
    return tot[1] ? 1 : 0;
}
