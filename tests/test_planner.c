/*
 * The planner on hand-computable cases (docs/planner.md): a topology of two
 * one-rank nodes with round rates (1 M rows/s gathered, 0.5 M updated, 1
 * GFLOP/s, links of 1 and 0.5 GB/s, no latency) and one table of 1000 x 16
 * looked up twice a sample, batch 100. Each sharding option's work, bytes
 * and memory are checked against the arithmetic written out here; then
 * memory limits (the search avoids a rank that cannot hold a table, and a
 * table nothing holds is an error naming it), the hot share of Zipf ids,
 * the topology's JSON (presets, merging a bench comm file, strict errors,
 * a round trip) and a searched plan's JSON round trip.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/plan.h"
#include "shardrec/planner.h"
#include "shardrec/topology.h"

#define B   100.0 /* global batch */
#define P   2.0   /* ids a sample */
#define E   1000.0
#define DIM 16
/* 2 ids a bag: an id costs (1 + 1/2)/2 of a measured gather (rows of bags of
 * one id) and (2 + 1/2)/3 of a measured update */
#define GATHER_SHARE 0.75
#define UPDATE_SHARE (2.5 / 3)

struct fixture {
    struct sr_table_config table;
    char feature_name[SR_NAME_MAX];
    int feature_table;
    struct sr_ebc_config ebc;
    struct sr_planner_table stats;
    struct sr_planner_model m;
    struct sr_topology topo;
};

static void topology(struct sr_topology *t, int W, int L)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "test");
    t->world_size = W;
    t->ranks_per_node = L;
    t->memory_bytes = 1e9;
    t->memory_gb_s = 1;
    for (int s = 0; s < SR_TOPO_SKEWS; s++)
        for (int d = 0; d < SR_TOPO_DIMS; d++) {
            t->gather_rows_s[s][d] = 1e6;
            t->update_rows_s[s][d] = 5e5;
        }
    t->gemm_flop_s[0] = 1e9;
    t->intra = (struct sr_topo_link){1, 0};
    t->inter = (struct sr_topo_link){0.5, 0};
    t->nic_ranks = 1;
    assert_int_equal(sr_topology_complete(t), SR_OK);
}

static void setup(struct fixture *f, int W, int L)
{
    memset(f, 0, sizeof *f);
    snprintf(f->table.name, SR_NAME_MAX, "big");
    f->table.num_embeddings = (int64_t)E;
    f->table.embedding_dim = DIM;
    snprintf(f->feature_name, SR_NAME_MAX, "f0");
    f->ebc = (struct sr_ebc_config){.num_tables = 1,
                                    .tables = &f->table,
                                    .num_features = 1,
                                    .feature_names = &f->feature_name,
                                    .feature_table = &f->feature_table};
    f->stats = (struct sr_planner_table){.ids_per_sample = P, .features = 1, .hot_share = 0.01};
    f->m = (struct sr_planner_model){.ebc = &f->ebc,
                                     .stats = &f->stats,
                                     .global_batch = (int64_t)B,
                                     .num_dense = 4,
                                     .n_bot = 2,
                                     .n_top = 1,
                                     .wire_bytes = 4,
                                     .dense_wire_bytes = 4,
                                     .pipeline = 0,
                                     .bucket_bytes = 1 << 20};
    f->m.bot[0] = 4, f->m.bot[1] = DIM, f->m.top[0] = 1;
    topology(&f->topo, W, L);
}

static struct sr_planner_report *predict(struct fixture *f, enum sr_sharding_type type)
{
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    assert_int_equal(
        sr_plan_uniform(&plan, &f->ebc, type, f->topo.world_size, f->topo.ranks_per_node), SR_OK);
    assert_int_equal(sr_planner_predict(&f->m, &f->topo, plan, &r), SR_OK);
    sr_plan_free(plan);
    return r;
}

static void near(double got, double want, int line)
{
    if (fabs(got - want) > 1e-9 * fmax(1e-12, fabs(want)) + 1e-18) {
        fprintf(stderr, "line %d: got %.12g, want %.12g\n", line, got, want);
        fail();
    }
}
#define NEAR(a, b) near((double)(a), (double)(b), __LINE__)

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Dense: bottom 2*4*16 = 128 FLOPs a sample, dot of 2 vectors 2^2*16 = 64,
 * top (16 + 1)*1*2 = 34: 226 a sample, x3 for the backward, at 1 GFLOP/s on
 * b samples; 8 passes of 4 bytes over 70 activations a sample (bottom 4 +
 * 16, the interaction's 2 x 16 in and 17 out, top 1) at 1 GB/s; the
 * optimizer reads and writes (80 + 18) parameters 3 x 4 bytes. */
static double dense_seconds(double b)
{
    return 3 * b * 226 / 1e9 + 8.0 * 4 * b * 70 / 1e9 + 98 * 4 * 3 / 1e9;
}

/* tw on two one-rank nodes: the owner (rank 0, the largest-first balance)
 * looks up all 200 ids; rank 1 sends 50 samples x (2 ids + 1 length) x 4
 * bytes = 600 across; the owner sends back 50 x 16 x 4 = 3200 bytes. */
static void test_tw_two_nodes(void **state)
{
    struct fixture f;
    setup(&f, 2, 1);
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    NEAR(r->ranks[0].lookup_s, B * P * GATHER_SHARE / 1e6);
    NEAR(r->ranks[0].update_s, B * P * UPDATE_SHARE / 5e5);
    NEAR(r->ranks[1].lookup_s, 0);
    NEAR(r->ranks[0].send_bytes[1], 3200);       /* pooled vectors out */
    NEAR(r->ranks[1].send_bytes[1], 600 + 3200); /* ids, then the gradients */
    NEAR(r->ranks[0].send_bytes[0], 0);
    NEAR(r->stage_s[SR_PS_INPUT_DIST], 600 / 0.5e9);
    NEAR(r->stage_s[SR_PS_OUTPUT_DIST], 3200 / 0.5e9);
    NEAR(r->stage_s[SR_PS_GRAD_DIST], 3200 / 0.5e9);
    NEAR(r->stage_s[SR_PS_DENSE], dense_seconds(50));
    NEAR(r->tables[0].memory_bytes, E * DIM * 4);
    NEAR(r->tables[0].comm_bytes, 600 + 2 * 3200);
    NEAR(r->tables[0].inter_bytes, 600 + 2 * 3200);
    /* all-reduce: 98 parameters x 4 bytes, ring on 2 ranks: 2 x 1/2 x 392 over 0.5 GB/s */
    NEAR(r->stage_s[SR_PS_ALLREDUCE], 392 / 0.5e9);
    /* no pipeline: the input dist is exposed whole; the output dist hides
     * behind the bottom MLP's forward (50 x 128 FLOPs = 6.4 us > 6.4 us) */
    double bot_fwd = 50 * 128 / 1e9, bot_bwd = 2 * bot_fwd;
    double exposed = 600 / 0.5e9 + fmax(0, 3200 / 0.5e9 - bot_fwd) +
                     fmax(0, 3200 / 0.5e9 - bot_bwd) + 392 / 0.5e9;
    NEAR(r->stage_s[SR_PS_EXPOSED], exposed);
    NEAR(r->stage_s[SR_PS_STEP],
         B * P * GATHER_SHARE / 1e6 + B * P * UPDATE_SHARE / 5e5 + dense_seconds(50) + exposed);
    NEAR(r->samples_s, B / r->stage_s[SR_PS_STEP]);
    assert_int_equal(r->collectives, 2 + 2 + 1); /* counts + data, a2a both ways, 1 bucket */
    sr_planner_report_free(r);
}

/* Latencies on the same case: 100 us a collective on the link, 20 us for the
 * counts exchange (the topology's host latency: NCCL runs it over MPI), else
 * the link's; the gradient dist and the only (so last) all-reduce bucket run
 * at once, so the longer of them is exposed, not their sum. */
static void test_latencies(void **state)
{
    struct fixture f;
    setup(&f, 2, 1);
    f.topo.inter.latency_us = 100;
    f.topo.host_latency_us = 20;
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    double in = 600 / 0.5e9 + 20e-6, out = 100e-6 + 3200 / 0.5e9;
    double last = 100e-6 + 392 / 0.5e9, bot_fwd = 50 * 128 / 1e9, bot_bwd = 2 * bot_fwd;
    NEAR(r->stage_s[SR_PS_INPUT_DIST], 100e-6 + in); /* its data exchange, then the counts */
    NEAR(r->stage_s[SR_PS_OUTPUT_DIST], out);
    NEAR(r->stage_s[SR_PS_GRAD_DIST], out);
    NEAR(r->stage_s[SR_PS_ALLREDUCE], last);
    NEAR(r->stage_s[SR_PS_EXPOSED], 100e-6 + in + (out - bot_fwd) + fmax(out - bot_bwd, last));
    sr_planner_report_free(r);
    f.topo.host_latency_us = 0; /* none given: the counts take the link's latency */
    r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    NEAR(r->stage_s[SR_PS_INPUT_DIST], 200e-6 + 600 / 0.5e9);
    sr_planner_report_free(r);
}

/* What a shard receives is memory on its rank: tw puts the table's B x
 * slot_bytes on its owner only, rw on both ranks (each holds a shard), dp on
 * neither; one rank exchanges nothing. */
static void test_shard_buffers(void **state)
{
    struct fixture f;
    const double slot = 123.0, table = E * DIM * 4;
    setup(&f, 2, 2);
    f.stats.slot_bytes = slot;
    f.m.buffer_bytes = 1000;
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    double base = r->ranks[1].memory_bytes; /* the dense block, the caller's buffers */
    NEAR(r->ranks[0].memory_bytes - base, table + B * slot);
    sr_planner_report_free(r);
    r = predict(&f, SR_SHARDING_TYPE_ROW_WISE);
    for (int k = 0; k < 2; k++)
        NEAR(r->ranks[k].memory_bytes - base, table / 2 + B * slot);
    sr_planner_report_free(r);
    r = predict(&f, SR_SHARDING_TYPE_DATA_PARALLEL);
    /* weights, their dense gradient and touch counts, and those staged in the
     * last bucket once more */
    NEAR(r->ranks[0].memory_bytes - base, table + 8.0 * E * (DIM + 1));
    sr_planner_report_free(r);
    setup(&f, 1, 1);
    f.stats.slot_bytes = slot;
    f.m.buffer_bytes = 1000;
    r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    NEAR(r->ranks[0].memory_bytes - base, table);
    sr_planner_report_free(r);
}

/* rw on one node of two: each rank looks up its half (100 ids), sends the
 * other 50 x 1 ids + 50 lengths = 400 bytes in the node, and 50 x 16 x 4 =
 * 3200 bytes of partial sums each way. */
static void test_rw_one_node(void **state)
{
    struct fixture f;
    setup(&f, 2, 2);
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_ROW_WISE);
    for (int k = 0; k < 2; k++) {
        NEAR(r->ranks[k].lookup_s, B * P / 2 * GATHER_SHARE / 1e6);
        NEAR(r->ranks[k].send_bytes[0], 400 + 2 * 3200);
        NEAR(r->ranks[k].send_bytes[1], 0);
        NEAR(r->ranks[k].memory_bytes - r->ranks[0].memory_bytes, 0);
    }
    NEAR(r->stage_s[SR_PS_OUTPUT_DIST], 3200 / 1e9);
    NEAR(r->tables[0].memory_bytes, E * DIM * 4);
    NEAR(r->tables[0].inter_bytes, 0);
    sr_planner_report_free(r);
}

/* dp: every rank looks up its own 50 samples' 100 ids and updates the whole
 * table densely (1000 x 16 x 4 bytes, 3 passes at 1 GB/s); its gradient
 * (64000 bytes) joins the all-reduce. */
static void test_dp(void **state)
{
    struct fixture f;
    setup(&f, 2, 2);
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_DATA_PARALLEL);
    NEAR(r->ranks[1].lookup_s, 100 * GATHER_SHARE / 1e6);
    NEAR(r->ranks[1].update_s, E * DIM * 4 * 3 / 1e9);
    NEAR(r->stage_s[SR_PS_INPUT_DIST], 0);
    NEAR(r->stage_s[SR_PS_OUTPUT_DIST], 0);
    NEAR(r->stage_s[SR_PS_ALLREDUCE], (392 + 64000) / 1e9);
    /* on each of 2 ranks: weights, the gradient and touch counts, and those
     * staged in the last bucket */
    NEAR(r->tables[0].memory_bytes, 2 * (E * DIM * 4 + 8 * E * (DIM + 1)));
    sr_planner_report_free(r);
    /* 16-bit dense buckets: the gradient and counts, kept exact twice, and
     * sent as 2 halves a word to each of the 2 ranks, sent and received */
    f.m.dense_wire_bytes = 2;
    r = predict(&f, SR_SHARDING_TYPE_DATA_PARALLEL);
    NEAR(r->tables[0].memory_bytes, 2 * (E * DIM * 4 + (12 + 8 * 2) * E * (DIM + 1)));
    sr_planner_report_free(r);
}

/* hybrid, hot share 1/2 on the 10 hot rows (1% of 1000): each rank looks up
 * half of its 100 ids in the replica and half of the other half of the
 * 200 cold-or-hot ids of its block (100 ids in all); it sends the other
 * owner 50 samples x (2 ids x 1/2 cold x 1/2 its block) x 4 bytes and 50
 * lengths (300 bytes), and both ways the pooled rows of the bags with a
 * cold id in the other's block (1 - (1 - 1/4)^2 of 50 bags, 64 bytes); the
 * replica's gradient (10 x 16 x 4) joins the all-reduce. Each rank first
 * splits its 100 ids: 24 bytes each at 1 GB/s. */
static void test_hybrid(void **state)
{
    const double SPLIT = 100 * 24 / 1e9;
    struct fixture f;
    setup(&f, 2, 2);
    int64_t hot[10];
    for (int i = 0; i < 10; i++)
        hot[i] = 3 * i;
    f.stats.hot_share = 0.5;
    f.stats.hot = hot;
    f.stats.num_hot = 10;
    f.stats.num_sizes = 1; /* one hot-set size: all hybrid takes it */
    f.stats.hot_size[0] = 10;
    f.stats.hot_size_share[0] = 0.5;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    assert_int_equal(sr_planner_whole_plan(3, &f.m, &f.topo, &plan), SR_OK); /* all hybrid */
    assert_int_equal(plan->tables[0].type, SR_SHARDING_TYPE_HYBRID);
    assert_int_equal(plan->tables[0].num_hot, 10);
    assert_int_equal(plan->tables[0].hot[9], 27);
    assert_int_equal(sr_planner_predict(&f.m, &f.topo, plan, &r), SR_OK);
    for (int k = 0; k < 2; k++) {
        NEAR(r->ranks[k].lookup_s, 100 * GATHER_SHARE / 1e6 + SPLIT);
        NEAR(r->ranks[k].send_bytes[0], 300 + 2 * 50 * (1 - pow(1 - 0.5 / 2, 2)) * 64);
    }
    NEAR(r->stage_s[SR_PS_ALLREDUCE], (392 + 640) / 1e9);
    /* shards; on each rank the replica and, as a dp table's, its gradient,
     * counts and their staging */
    NEAR(r->tables[0].memory_bytes, E * DIM * 4 + 2 * (640 + 8 * 10 * (DIM + 1)));
    sr_planner_report_free(r);
    /* 5 hot rows: half the statistics' share (linear below its 10 rows) */
    int64_t five[5] = {0, 3, 6, 9, 12};
    assert_int_equal(sr_plan_set_hybrid(plan, &f.ebc, 0, five, 5), SR_OK);
    assert_int_equal(sr_planner_predict(&f.m, &f.topo, plan, &r), SR_OK);
    NEAR(r->ranks[0].lookup_s, (100 * 0.25 + 200 * 0.75 / 2) * GATHER_SHARE / 1e6 + SPLIT);
    NEAR(r->ranks[0].send_bytes[0],
         50 * 2 * 0.75 / 2 * 4 + 200 + 2 * 50 * (1 - pow(1 - 0.75 / 2, 2)) * 64);
    sr_planner_report_free(r);
    sr_plan_free(plan);
    /* without hot rows there is no hybrid plan */
    f.stats.hot = NULL;
    f.stats.num_hot = 0;
    assert_int_equal(sr_planner_whole_plan(3, &f.m, &f.topo, &plan), SR_ERR_INVALID_ARG);
    f.stats.hot = hot; /* not owned: no sr_planner_stats_release */
}

/* The hot set's size by cost. The table's statistics know the ladder's 5
 * sizes (1, 4, 10, 34 and 100 rows of 1000) and a list of its 100 hottest
 * rows, hottest first; a batch of 1000 over a slow link (10 MB/s) makes
 * the pooled exchange dear, so hybrid beats every other option. With
 * `shares` as each size's share of the lookups, the search must take
 * hybrid with its size `k` (H rows), the size whose whole plan predicts
 * the shortest step, say so in its reason and its table, and hold the
 * list's first H rows, ascending, through the plan's JSON and back; all
 * hybrid (--sharding hybrid) must size it alike. */
static void hot_fixture(struct fixture *f, int64_t *hot, const double *shares)
{
    setup(f, 2, 2);
    f->m.global_batch = 1000;
    f->topo.intra.gb_s = 0.01;
    for (int i = 0; i < 100; i++) /* hottest first: 0, 37, ..., 999, 36, ...: not ascending */
        hot[i] = 37 * i % 1000;
    f->stats.hot = hot;
    f->stats.num_hot = 100;
    f->stats.hot_share = shares[2];
    f->stats.num_sizes = sr_planner_hot_sizes(1000, 1000, f->stats.hot_size);
    assert_int_equal(f->stats.num_sizes, 5);
    assert_int_equal(f->stats.hot_size[1], 4);
    assert_int_equal(f->stats.hot_size[3], 34);
    memcpy(f->stats.hot_size_share, shares, sizeof(double) * 5);
}

static void check_hot_size(const double *shares, int k)
{
    struct fixture f;
    struct sr_plan *plan = NULL, *each = NULL;
    struct sr_planner_report *r = NULL, *p = NULL;
    int64_t hot[100], sorted[100];
    hot_fixture(&f, hot, shares);
    assert_int_equal(sr_planner_search(&f.m, &f.topo, &plan, &r), SR_OK);
    const int64_t want = f.stats.hot_size[k];
    assert_int_equal(plan->tables[0].type, SR_SHARDING_TYPE_HYBRID);
    assert_int_equal(plan->tables[0].num_hot, want);
    double best = INFINITY;
    int64_t argmin = 0;
    assert_int_equal(sr_plan_uniform(&each, &f.ebc, SR_SHARDING_TYPE_ROW_WISE, 2, 2), SR_OK);
    for (int i = 0; i < 5; i++) { /* every size, predicted whole */
        int64_t H = f.stats.hot_size[i];
        assert_int_equal(sr_plan_set_hybrid(each, &f.ebc, 0, hot, H), SR_OK);
        assert_int_equal(sr_planner_predict(&f.m, &f.topo, each, &p), SR_OK);
        NEAR(p->tables[0].hot_share, shares[i]);
        if (p->stage_s[SR_PS_STEP] < best)
            best = p->stage_s[SR_PS_STEP], argmin = H;
        sr_planner_report_free(p);
    }
    /* a plan's H between two sizes: the share linear between theirs */
    assert_int_equal(sr_plan_set_hybrid(each, &f.ebc, 0, hot, 67), SR_OK);
    assert_int_equal(sr_planner_predict(&f.m, &f.topo, each, &p), SR_OK);
    NEAR(p->tables[0].hot_share, shares[3] + (shares[4] - shares[3]) * (67 - 34) / (100 - 34));
    sr_planner_report_free(p);
    assert_int_equal(argmin, want);
    NEAR(r->stage_s[SR_PS_STEP], best);
    sr_plan_free(each); /* all hybrid (--sharding hybrid) sizes it the same */
    assert_int_equal(sr_planner_whole_plan(3, &f.m, &f.topo, &each), SR_OK);
    assert_int_equal(each->tables[0].num_hot, want);
    char label[64]; /* --explain names the size and its share */
    snprintf(label, sizeof label, "hybrid (%lld hot rows, %.1f%% of its lookups): step",
             (long long)want, 100 * shares[k]);
    assert_non_null(strstr(r->why[0], label));
    memcpy(sorted, hot, sizeof sorted); /* the first `want` rows of the list, ascending */
    qsort(sorted, (size_t)want, sizeof *sorted, cmp_i64);
    assert_memory_equal(plan->tables[0].hot, sorted, sizeof(int64_t) * (size_t)want);
    char *json = sr_plan_to_json(plan), *table = NULL;
    struct sr_plan *back = NULL;
    assert_int_equal(sr_plan_from_json(&back, json, "test", &f.ebc, 2, 2), SR_OK);
    assert_int_equal(back->tables[0].num_hot, want);
    assert_memory_equal(back->tables[0].hot, sorted, sizeof(int64_t) * (size_t)want);
    size_t size = 0;
    FILE *out = open_memstream(&table, &size);
    sr_planner_report_print(out, r, plan, &f.m, 1);
    fclose(out);
    snprintf(label, sizeof label, "hot: %lld rows replicated on every rank, %.1f%% of its",
             (long long)want, 100 * shares[k]);
    assert_non_null(strstr(table, label));
    free(table);
    sr_free(json);
    sr_plan_free(back);
    sr_plan_free(each);
    sr_plan_free(plan);
    sr_planner_report_free(r);
}

/* One row takes 80% of the lookups and more rows add nothing (a flat
 * share): the smallest set wins, its all-reduce and update the least.
 * Shares that keep growing to 100 rows: the largest wins, its cold
 * exchange the least. */
static void test_hot_set_size(void **state)
{
    const double flat[5] = {0.8, 0.8, 0.8, 0.8, 0.8};
    const double steep[5] = {0.05, 0.1, 0.2, 0.4, 0.95};
    check_hot_size(flat, 0);  /* 1 row */
    check_hot_size(steep, 4); /* 100 rows */
}

/* Hybrid tables keep fp32 rows (sharded_hybrid.c refuses others): where the
 * steep shares above make hybrid win, a table stored in bf16 is never
 * offered it, and all hybrid says why rather than planning what train
 * would refuse. */
static void test_hybrid_fp32_only(void **state)
{
    const double steep[5] = {0.05, 0.1, 0.2, 0.4, 0.95};
    struct fixture f;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    int64_t hot[100];
    hot_fixture(&f, hot, steep);
    f.table.storage = SR_DTYPE_BF16;
    f.m.emb_elem_bytes = 2;
    assert_int_equal(sr_planner_search(&f.m, &f.topo, &plan, &r), SR_OK);
    assert_int_not_equal(plan->tables[0].type, SR_SHARDING_TYPE_HYBRID);
    assert_null(strstr(r->why[0], "hybrid"));
    sr_plan_free(plan);
    sr_planner_report_free(r);
    assert_int_equal(sr_planner_whole_plan(3, &f.m, &f.topo, &plan), SR_ERR_INVALID_ARG);
    assert_null(plan);
    assert_non_null(strstr(sr_error_message(), "keep fp32 rows"));
}

/* cw in 2 pieces of 8 columns: each owner looks up all 200 ids at dim 8. */
static void test_cw(void **state)
{
    struct fixture f;
    setup(&f, 2, 2);
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_COLUMN_WISE);
    for (int k = 0; k < 2; k++) {
        NEAR(r->ranks[k].lookup_s, B * P * GATHER_SHARE / 1e6);
        /* 50 x 8 x 4 = 1600 pooled bytes each way, 600 bytes of ids in */
        NEAR(r->ranks[k].send_bytes[0], 600 + 2 * 1600);
    }
    sr_planner_report_free(r);
}

/* Row-wise Adagrad keeps one float a row: 1000 x 4 more bytes. */
static void test_row_state(void **state)
{
    struct fixture f;
    setup(&f, 2, 1);
    f.m.emb_state = SR_PLANNER_STATE_ROW;
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    NEAR(r->tables[0].memory_bytes, E * DIM * 4 + E * 4);
    sr_planner_report_free(r);
}

/* 16-bit tables (--emb-dtype): 2 bytes a weight in memory (the row-wise
 * state stays fp32); the pooled vectors on the wire are --comm-dtype's. */
static void test_emb_dtype(void **state)
{
    struct fixture f;
    setup(&f, 2, 1);
    f.m.emb_elem_bytes = 2;
    f.m.emb_state = SR_PLANNER_STATE_ROW;
    struct sr_planner_report *r = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    NEAR(r->tables[0].memory_bytes, E * DIM * 2 + E * 4);
    NEAR(r->ranks[1].send_bytes[1], 600 + 3200);
    sr_planner_report_free(r);
}

/* Memory: the search keeps every rank within capacity. With room for half
 * the table but not all of it on a rank, tw and dp do not fit; rw does. */
static void test_memory_limit(void **state)
{
    struct fixture f;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    setup(&f, 2, 2);
    double dense = 98 * 4 * 2;
    f.topo.memory_bytes = dense + E * DIM * 4 * 0.75;
    assert_int_equal(sr_planner_search(&f.m, &f.topo, &plan, &r), SR_OK);
    assert_int_equal(plan->tables[0].type, SR_SHARDING_TYPE_ROW_WISE);
    for (int k = 0; k < 2; k++)
        assert_true(r->ranks[k].memory_bytes <= f.topo.memory_bytes);
    sr_plan_free(plan);
    sr_planner_report_free(r);
    /* a quarter of the table per rank: nothing fits */
    f.topo.memory_bytes = dense + E * DIM * 4 * 0.25;
    assert_int_equal(sr_planner_search(&f.m, &f.topo, &plan, &r), SR_ERR_INVALID_ARG);
    assert_null(plan);
    assert_non_null(strstr(sr_error_message(), "table 'big'"));
    assert_non_null(strstr(sr_error_message(), "fits no rank"));
}

/* A small table across a slow link: dp spreads the lookups over both ranks
 * and sends only its 640-byte gradient, where tw puts every lookup on one
 * rank and the pooled exchange on the link: the search takes dp. */
static void test_search_slow_link(void **state)
{
    struct fixture f;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL, *tw = NULL;
    setup(&f, 2, 1);
    f.table.num_embeddings = 10; /* 640-byte gradient vs 3200-byte pooled exchange */
    assert_int_equal(sr_planner_search(&f.m, &f.topo, &plan, &r), SR_OK);
    assert_int_equal(plan->tables[0].type, SR_SHARDING_TYPE_DATA_PARALLEL);
    tw = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    assert_true(r->stage_s[SR_PS_STEP] < tw->stage_s[SR_PS_STEP]);
    assert_non_null(r->why);
    assert_non_null(strstr(r->why[0], "dp"));
    /* the plan round-trips through JSON */
    char *json = sr_plan_to_json(plan);
    struct sr_plan *back = NULL;
    assert_int_equal(sr_plan_from_json(&back, json, "test", &f.ebc, 2, 1), SR_OK);
    assert_true(sr_plan_hash(back) == sr_plan_hash(plan));
    sr_free(json);
    sr_plan_free(back);
    sr_plan_free(plan);
    sr_planner_report_free(r);
    sr_planner_report_free(tw);
}

/* Hot share: uniform ids 1% (rounded up to whole rows); Zipf(1.05) over 100
 * rows: the top row's weight over all 100 (summed here directly). */
static void test_hot_share(void **state)
{
    double h = 0;
    for (int k = 1; k <= 100; k++)
        h += pow(k, -1.05);
    NEAR(sr_planner_hot_share(100, 1.05), 1 / h);
    NEAR(sr_planner_hot_share(1000, 0), 0.01);
    NEAR(sr_planner_hot_share(50, 0), 1.0 / 50);
    double big = sr_planner_hot_share(1000000, 1.05);
    assert_true(big > 0.7 && big < 0.8);
    /* beyond 10^6 rows the tail is an integral: still close to the sum */
    double h2 = 0;
    for (int k = 1; k <= 20000; k++)
        h2 += pow(k, -1.05);
    double tail = 0;
    for (int64_t k = 1; k <= 2000000; k++)
        tail += pow((double)k, -1.05);
    assert_true(fabs(sr_planner_hot_share(2000000, 1.05) - h2 / tail) < 1e-6);
    /* a table's hot-set sizes at once: each share the same bits as alone */
    int64_t sizes[SR_PLANNER_HOT_SIZES + 2] = {0, 2000000};
    double shares[SR_PLANNER_HOT_SIZES + 2];
    const double laws[3] = {1.05, 1.0, 0};
    assert_int_equal(sr_planner_hot_sizes(2000000, 2000000, sizes + 2), SR_PLANNER_HOT_SIZES);
    for (int l = 0; l < 3; l++) {
        sr_planner_hot_shares_of(2000000, sizes, SR_PLANNER_HOT_SIZES + 2, laws[l], shares);
        for (int i = 0; i < SR_PLANNER_HOT_SIZES + 2; i++)
            assert_true(shares[i] == sr_planner_hot_share_of(2000000, sizes[i], laws[l]));
        assert_true(shares[0] == 0 && shares[1] == 1 &&
                    shares[4] == sr_planner_hot_share(2000000, laws[l]));
    }
}

static void test_topology_json(void **state)
{
    struct sr_topology t, back;
    assert_int_equal(sr_topology_preset(&t, "a100x8-2node-100g"), SR_OK);
    assert_int_equal(t.world_size, 16);
    assert_int_equal(t.ranks_per_node, 8);
    assert_int_equal(t.nic_ranks, 8);
    NEAR(t.inter.gb_s, 12.5);
    assert_int_equal(sr_topology_complete(&t), SR_OK);
    /* derived rates: 2039 GB/s over a 64-byte row at dim 16 */
    NEAR(t.gather_rows_s[0][0], 2039e9 / 64);
    char *json = sr_topology_to_json(&t);
    memset(&back, 0, sizeof back);
    assert_int_equal(sr_topology_merge_json(&back, json, "round trip"), SR_OK);
    sr_free(json);
    assert_int_equal(back.world_size, 16);
    NEAR(back.inter.gb_s, 12.5);
    NEAR(back.gemm_flop_s[1], t.gemm_flop_s[1]);
    NEAR(back.update_rows_s[1][2], t.update_rows_s[1][2]);
    /* a bench comm file merged over a preset: its link and world replace them */
    const char *bench =
        "{\"source\": \"shardrec bench comm\", \"backend\": \"mpi\", "
        "\"world_size\": 2, \"ranks_per_node\": 1, \"device\": \"cpu\", "
        "\"links\": {\"inter_node\": {\"bandwidth_gb_s\": 1.5, \"latency_us\": 30}},"
        " \"measurements\": []}";
    assert_int_equal(sr_topology_preset(&t, "cpu-2core"), SR_OK);
    assert_int_equal(sr_topology_merge_json(&t, bench, "links.json"), SR_OK);
    assert_int_equal(t.world_size, 2);
    assert_int_equal(t.ranks_per_node, 1);
    NEAR(t.inter.gb_s, 1.5);
    NEAR(t.inter.latency_us, 30);
    NEAR(t.host_latency_us, 0);
    assert_int_equal(sr_topology_complete(&t), SR_OK);
    /* a bench comm file of NCCL also gives the counts exchange's host latency */
    assert_int_equal(
        sr_topology_merge_json(&t, "{\"links\": {\"host\": {\"latency_us\": 41}}}", "nccl.json"),
        SR_OK);
    NEAR(t.host_latency_us, 41);
    NEAR(t.inter.latency_us, 30);
    json = sr_topology_to_json(&t);
    memset(&back, 0, sizeof back);
    assert_int_equal(sr_topology_merge_json(&back, json, "round trip"), SR_OK);
    sr_free(json);
    NEAR(back.host_latency_us, 41);
    assert_int_equal(
        sr_topology_merge_json(&t, "{\"links\": {\"host\": {\"bandwidth_gb_s\": 1}}}", "x.json"),
        SR_ERR_INVALID_ARG);
    /* a bench device file of the CPU measured the whole host: split over its ranks */
    const char *dev =
        "{\"source\": \"shardrec bench device\", \"device\": \"cpu\", "
        "\"memory_bytes\": 8e9, \"memory_gb_s\": 20, \"gemm_tflop_s\": {\"fp32\": 0.1}, "
        "\"launch_us\": 4, "
        "\"gather_rows_s\": {\"uniform\": [8e6, 4e6, 2e6], \"zipf\": [9e6, 5e6, 3e6]}}";
    assert_int_equal(sr_topology_preset(&t, "cpu-2core"), SR_OK);
    assert_int_equal(sr_topology_merge_json(&t, dev, "device.json"), SR_OK);
    assert_int_equal(t.host_wide, 1);
    sr_topology_split_host(&t); /* 2 ranks a node */
    NEAR(t.memory_bytes, 4e9);
    NEAR(t.memory_gb_s, 10);
    NEAR(t.gather_rows_s[1][2], 1.5e6);
    NEAR(t.gemm_flop_s[0], 0.05e12);
    NEAR(t.launch_us, 4);       /* an op's time is not shared out */
    sr_topology_split_host(&t); /* once only */
    NEAR(t.memory_gb_s, 10);
    /* strict: unknown keys (with a hint), wrong types, negative numbers, trailing text */
    assert_int_equal(sr_topology_merge_json(&t, "{\"memory_gbs\": 3}", "x.json"),
                     SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "memory_gb_s"));
    assert_int_equal(sr_topology_merge_json(&t, "{\"world_size\": \"2\"}", "x.json"),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_topology_merge_json(&t, "{\"memory_gb_s\": -1}", "x.json"),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_topology_merge_json(&t, "{\"launch_us\": -2}", "x.json"),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_topology_merge_json(&t, "{} {}", "x.json"), SR_ERR_INVALID_ARG);
    assert_int_equal(
        sr_topology_merge_json(&t, "{\"gather_rows_s\": {\"uniform\": [1, 2]}}", "x.json"),
        SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "x.json"));
    assert_int_equal(sr_topology_preset(&t, "h100"), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "h200x8"));
    /* incomplete: several nodes and no inter-node link */
    memset(&t, 0, sizeof t);
    assert_int_equal(sr_topology_merge_json(&t,
                                            "{\"world_size\": 4, \"ranks_per_node\": 2, "
                                            "\"memory_bytes\": 1e9, \"memory_gb_s\": 10, "
                                            "\"gemm_tflop_s\": {\"fp32\": 1}, \"links\": "
                                            "{\"intra_node\": {\"bandwidth_gb_s\": 5}}}",
                                            "y.json"),
                     SR_OK);
    assert_int_equal(sr_topology_complete(&t), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "inter-node"));
}

/* Every op a step issues costs the topology's launch time: one rank, one
 * tw group; bottom 4-16 and top 1 are 2 layers of 7 ops, the dot
 * interaction 2, 10 fixed: 26 in the dense stage; the group's 3 in the
 * lookup and 8 in the update. A launch time of 0 counts nothing. */
static void test_launches(void **state)
{
    struct fixture f;
    setup(&f, 1, 1);
    struct sr_planner_report *r0 = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    f.topo.launch_us = 10;
    struct sr_planner_report *r1 = predict(&f, SR_SHARDING_TYPE_TABLE_WISE);
    NEAR(r0->stage_s[SR_PS_DENSE], dense_seconds(B));
    NEAR(r1->stage_s[SR_PS_DENSE] - r0->stage_s[SR_PS_DENSE], 26 * 10e-6);
    NEAR(r1->stage_s[SR_PS_LOOKUP] - r0->stage_s[SR_PS_LOOKUP], 3 * 10e-6);
    NEAR(r1->stage_s[SR_PS_UPDATE] - r0->stage_s[SR_PS_UPDATE], 8 * 10e-6);
    NEAR(r1->stage_s[SR_PS_STEP] - r0->stage_s[SR_PS_STEP], 37 * 10e-6);
    sr_planner_report_free(r0);
    sr_planner_report_free(r1);
}

/* Rates between the measured dims: linear in time a row; and the Zipf rate
 * by hot share. */
static void test_rates(void **state)
{
    struct sr_topology t;
    topology(&t, 1, 1);
    t.gather_rows_s[0][0] = 4e6; /* dim 16 */
    t.gather_rows_s[0][1] = 2e6; /* dim 64 */
    t.gather_rows_s[1][1] = 4e6; /* Zipf at dim 64 */
    t.zipf_hot_share = 0.51;
    NEAR(1 / sr_topology_gather_rows_s(&t, 40, 0.01), 0.5 / 4e6 + 0.5 / 2e6);
    NEAR(1 / sr_topology_gather_rows_s(&t, 64, 0.26), 0.5 / 2e6 + 0.5 / 4e6);
    NEAR(1 / sr_topology_gather_rows_s(&t, 256, 0.01), 2 / 1e6); /* twice dim 128's time */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tw_two_nodes),
        cmocka_unit_test(test_latencies),
        cmocka_unit_test(test_shard_buffers),
        cmocka_unit_test(test_rw_one_node),
        cmocka_unit_test(test_dp),
        cmocka_unit_test(test_cw),
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_hot_set_size),
        cmocka_unit_test(test_hybrid_fp32_only),
        cmocka_unit_test(test_row_state),
        cmocka_unit_test(test_emb_dtype),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_search_slow_link),
        cmocka_unit_test(test_hot_share),
        cmocka_unit_test(test_topology_json),
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_launches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
