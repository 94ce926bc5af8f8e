/*
 * Distributed equivalence of the sharded EBC, run under mpirun on 1 to 4
 * ranks by tests/check_mpi_sharded_ebc.sh. For each way of placing nodes
 * (every ranks-per-node L dividing W) and each plan (uniform dp, tw, rw, cw,
 * twrw; a mixed plan; the default plan), every rank trains k steps of a
 * sharded EBC on its slice of a global batch, and checks against one sr_ebc
 * trained on the whole global batch (computed on every rank, so each checks
 * its own slice):
 *
 *   - pooled outputs of every step and the final tables (gathered on rank 0),
 *     within 1e-5 relative;
 *   - collectives per step from the counters: input dist 2, output dist 1
 *     per sharding type present (twrw 2), the same backward;
 *   - bytes per step, intra- and inter-node, equal to payloads computed here
 *     from the plan and the batch.
 *
 * Cases include empty bags, a one-row table, tables not divisible by W, ids
 * skewed into the first row block (ranks that receive no ids), a hash id
 * policy and per-id weights. With W = 4 and 2 nodes of 2 it also checks that
 * one big table sends as many pooled bytes across nodes under twrw as under
 * tw and fewer than under rw, and that twrw halves the largest per-rank
 * lookup work of tw.
 *
 * The same cases with the pooled payload in bf16 and fp16 (comms.pooled_dtype)
 * match the reference within the rounding's tolerance, issue the same number
 * of collectives and send exactly half of fp32's output-dist bytes.
 *
 * Stages: for dp, tw, rw, cw, twrw and the mixed plan (also in bf16, and a
 * weighted rw case), the steps run through the stage functions on two batch
 * contexts, batch i+1's input dist interleaved with batch i (wholly between
 * its output dist and gradient dist, or overlapping both), give pooled
 * outputs and final weights bit-identical to forward/backward step by step,
 * and allocate nothing.
 *
 * Rank 0 prints one summary line; the exit status is 1 on every rank if any
 * check failed on any rank.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/host_view.h"
#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "shardrec/sharded_ebc.h"

static long long checks, failures;
static const char *where = "";

#define CHECK(cond, ...) check_at(!!(cond), __LINE__, __VA_ARGS__)

static void check_at(int ok, int line, const char *fmt, ...)
{
    checks++;
    if (ok)
        return;
    if (++failures > 40)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] mpi_sharded_ebc.c:%d: %s: FAIL: ", sr_get_rank(), line, where);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- config ------------------------------------------------------------------ */

#define MAX_T 6
#define MAX_F 8
#define B     4
#define STEPS 3

struct tcfg {
    struct sr_table_config tables[MAX_T];
    int64_t id_range[MAX_T]; /* raw ids drawn from [0, id_range) */
    char feature_names[MAX_F][SR_NAME_MAX];
    int feature_table[MAX_F];
    int max_len; /* bag lengths drawn from [0, max_len] */
    int weighted;
    int balanced; /* big-table case: one id per half of the rows */
    struct sr_ebc_config cfg;
};

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

/* Mean and sum tables; t0 shared by two features; a one-row table; a hash
 * table; t3's ids all in its first quarter (most rw shards get none). */
static void main_config(struct tcfg *c)
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

/* Sum pooling only, with per-id weights. */
static void weighted_config(struct tcfg *c)
{
    tcfg_init(c);
    add_table(c, "w0", 13, 4, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 13);
    add_table(c, "w1", 3, 2, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 3);
    add_feature(c, "g0", 0);
    add_feature(c, "g1", 1);
    add_feature(c, "g2", 0);
    c->weighted = 1;
}

static void big_config(struct tcfg *c)
{
    tcfg_init(c);
    add_table(c, "big", 1000, 8, SR_POOLING_SUM, SR_ID_POLICY_ERROR, 1000);
    add_feature(c, "b0", 0);
    c->balanced = 1;
}

/* ---- batches ------------------------------------------------------------------ */

struct batch {
    int32_t *lengths;
    int64_t *offsets, *values;
    float *weights;
    struct sr_kjt kjt;
};

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

/* Samples [g0, g0 + n) of step `step`'s global batch. */
/* The loader's check (sr_batch_check_ids): the KJT's structure, then ids
 * brought into range by each table's policy. */
static int loader_check(const struct tcfg *c, struct sr_kjt *kjt)
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

static void make_batch_raw(struct batch *bt, const struct tcfg *c, int step, int64_t g0, int n)
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
                              .num_weights = bt->weights ? N : 0};
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
}

/* A batch as the loader hands it over: checked, ids in range. */
static void make_batch(struct batch *bt, const struct tcfg *c, int step, int64_t g0, int n)
{
    make_batch_raw(bt, c, step, g0, n);
    SR_ASSERT(loader_check(c, &bt->kjt) == SR_OK);
}

static void free_batch(struct batch *bt)
{
    sr_free(bt->lengths), sr_free(bt->offsets), sr_free(bt->values), sr_free(bt->weights);
}

static float dpooled_at(int step, int64_t g, int col)
{
    return (float)(2.0 * sr_rng_uniform(99 + (uint64_t)step, (uint64_t)col, (uint64_t)g) - 1.0);
}

/* Pooled payload dtype of the case being run (comms.pooled_dtype). */
static enum sr_dtype wire = SR_DTYPE_F32;

/* fp32: 1e-5 relative (summation order only). fp16/bf16: each value crossing
 * the wire is rounded once (relative error <= u = 2^-8 for bf16, 2^-11 for
 * fp16). tw/cw send whole pooled values: error <= u |b|. rw/twrw send partial
 * sums: error <= u * Σ|partials| <= 2^-8 * 3 ids * 0.32 (rows of tables with
 * E >= 10 are within sqrt(1/E)) ~ 3.7e-3, the one-row table being a single
 * partial. The weights, moved k = 3 times by slightly rounded gradients, move
 * by far less. So 2e-2 relative with magnitudes floored at 0.25 (5e-3
 * absolute) holds every case while catching a misplaced or unsummed block
 * (errors of the size of the values themselves). */
static int close_to(float a, float b)
{
    if (wire != SR_DTYPE_F32)
        return fabsf(a - b) <= 2e-2f * fmaxf(fabsf(b), 0.25f);
    return fabsf(a - b) <= 1e-5f * fmaxf(fabsf(b), 0.1f);
}

/* ---- expected collectives and bytes ------------------------------------------- */

struct expect {
    uint64_t calls[3][SR_COLL_COUNT]; /* sparse, node, cross */
    uint64_t intra[3][SR_COLL_COUNT], inter[3][SR_COLL_COUNT];
    uint64_t out_inter; /* output dist only, both directions */
    uint64_t out_all;   /* output dist only, both directions, intra + inter */
};

struct world {
    sr_comm_t world, sparse, node, cross;
    int W, L, rank;
};

static void add_bytes(struct expect *e, const struct world *w, int comm, enum sr_coll k, int peer,
                      uint64_t bytes, int out)
{
    if (peer == w->rank)
        return;
    if (out)
        e->out_all += bytes;
    if (peer / w->L == w->rank / w->L)
        e->intra[comm][k] += bytes;
    else {
        e->inter[comm][k] += bytes;
        if (out)
            e->out_inter += bytes;
    }
}

/* Columns a rank's group outputs: group 0 tw+cw, 1 rw, 2 twrw. */
static int group_of(enum sr_sharding_type t)
{
    return t == SR_SHARDING_TYPE_ROW_WISE         ? 1
           : t == SR_SHARDING_TYPE_TABLE_ROW_WISE ? 2
           : t == SR_SHARDING_TYPE_DATA_PARALLEL  ? -1
                                                  : 0;
}

static int group_cols(const struct tcfg *c, const struct sr_plan *p, int g, int rank)
{
    int n = 0;
    for (int f = 0; f < c->cfg.num_features; f++) {
        const struct sr_table_plan *tp = &p->tables[c->feature_table[f]];
        for (int j = 0; group_of(tp->type) == g && j < tp->num_shards; j++)
            n += tp->shards[j].rank == rank ? tp->shards[j].cols : 0;
    }
    return n;
}

/* Ids of my batch that rank r owns, and the slots r owns. */
static void ids_to(const struct tcfg *c, const struct sr_plan *p, const struct batch *bt, int r,
                   int W, int L, int64_t *ids, int *slots)
{
    *ids = 0, *slots = 0;
    for (int f = 0; f < c->cfg.num_features; f++) {
        const int t = c->feature_table[f];
        const struct sr_table_plan *tp = &p->tables[t];
        const int64_t E = c->tables[t].num_embeddings;
        if (tp->type == SR_SHARDING_TYPE_DATA_PARALLEL)
            continue;
        for (int j = 0; j < tp->num_shards; j++)
            *slots += tp->shards[j].rank == r;
        for (int64_t i = bt->offsets[f * B]; i < bt->offsets[(f + 1) * B]; i++) {
            int64_t id = ((bt->values[i] % E) + E) % E;
            if (tp->type == SR_SHARDING_TYPE_ROW_WISE)
                *ids += id / ((E + W - 1) / W) == r;
            else if (tp->type == SR_SHARDING_TYPE_TABLE_ROW_WISE)
                *ids += tp->shards[0].rank + id / ((E + L - 1) / L) == r;
            else
                for (int j = 0; j < tp->num_shards; j++)
                    *ids += tp->shards[j].rank == r;
        }
    }
}

static void expect_step(struct expect *e, const struct tcfg *c, const struct sr_plan *p,
                        const struct batch *bt, const struct world *w)
{
    memset(e, 0, sizeof *e);
    const int W = w->W, L = w->L, nodes = W / L, me = w->rank;
    int present[3] = {0, 0, 0};
    for (int t = 0; t < p->num_tables; t++)
        if (group_of(p->tables[t].type) >= 0)
            present[group_of(p->tables[t].type)] = 1;
    /* compressed: a reduce-scatter is an all-to-all-v plus a local fp32 sum */
    const enum sr_coll rs = wire == SR_DTYPE_F32 ? SR_COLL_REDUCE_SCATTER : SR_COLL_ALL_TO_ALLV;
    const uint64_t es = sr_dtype_size(wire);
    e->calls[0][SR_COLL_ALL_TO_ALLV] = 2 + 2 * present[0];
    e->calls[0][rs] += present[1];
    e->calls[0][SR_COLL_ALL_GATHER] = present[1];
    e->calls[1][rs] += present[2];
    e->calls[1][SR_COLL_ALL_GATHER] = present[2];
    e->calls[2][SR_COLL_ALL_TO_ALLV] = 2 * present[2];
    const int words = 1 + c->weighted;
    for (int r = 0; r < W; r++) {
        int64_t n;
        int slots;
        ids_to(c, p, bt, r, W, L, &n, &slots);
        /* counts: one int64 per slot of r and a flags word; then the data */
        add_bytes(e, w, 0, SR_COLL_ALL_TO_ALLV, r,
                  8 * ((uint64_t)slots + 1) + 4 * ((uint64_t)slots * B + n * words), 0);
        if (present[0]) {
            add_bytes(e, w, 0, SR_COLL_ALL_TO_ALLV, r, es * B * group_cols(c, p, 0, me), 1);
            add_bytes(e, w, 0, SR_COLL_ALL_TO_ALLV, r, es * B * group_cols(c, p, 0, r), 1);
        }
        if (present[1]) {
            add_bytes(e, w, 0, rs, r, es * B * group_cols(c, p, 1, me), 1);
            add_bytes(e, w, 0, SR_COLL_ALL_GATHER, r, es * B * group_cols(c, p, 1, me), 1);
        }
    }
    if (!present[2])
        return;
    const uint64_t mine = es * B * group_cols(c, p, 2, me);
    for (int i = 0; i < L; i++) {
        int r = (me / L) * L + i;
        add_bytes(e, w, 1, rs, r, mine * nodes, 1);
        add_bytes(e, w, 1, SR_COLL_ALL_GATHER, r, mine * nodes, 1);
    }
    for (int m = 0; m < nodes; m++) {
        int r = m * L + me % L;
        add_bytes(e, w, 2, SR_COLL_ALL_TO_ALLV, r, mine, 1);
        add_bytes(e, w, 2, SR_COLL_ALL_TO_ALLV, r, es * B * group_cols(c, p, 2, r), 1);
    }
}

static void check_counters(const struct expect *e, const struct world *w, int step)
{
    sr_comm_t comms[3] = {w->sparse, w->node, w->cross};
    static const char *names[3] = {"sparse", "node", "cross"};
    for (int i = 0; i < 3; i++) {
        const struct sr_comm_counters *k = sr_comm_counters(comms[i]);
        for (int j = 0; j < SR_COLL_COUNT; j++) {
            CHECK(k->calls[j] == e->calls[i][j], "step %d %s %s: %llu calls, expected %llu", step,
                  names[i], sr_coll_name(j), (unsigned long long)k->calls[j],
                  (unsigned long long)e->calls[i][j]);
            CHECK(k->bytes_intra[j] == e->intra[i][j] && k->bytes_inter[j] == e->inter[i][j],
                  "step %d %s %s: bytes intra %llu inter %llu, expected %llu %llu", step, names[i],
                  sr_coll_name(j), (unsigned long long)k->bytes_intra[j],
                  (unsigned long long)k->bytes_inter[j], (unsigned long long)e->intra[i][j],
                  (unsigned long long)e->inter[i][j]);
        }
    }
}

static void reset_counters(const struct world *w)
{
    sr_comm_counters_reset(w->sparse);
    sr_comm_counters_reset(w->node);
    sr_comm_counters_reset(w->cross);
}

/* ---- one case ----------------------------------------------------------------- */

struct outcome {
    uint64_t out_all;   /* output dist bytes, summed over ranks and steps */
    uint64_t out_inter; /* summed over ranks, one step */
    int64_t max_lookup; /* largest per-rank lookup ids, one step */
};

static void compare_tables(struct sr_sharded_ebc *s, struct sr_ebc *ref, const struct tcfg *c,
                           const struct world *w)
{
    for (int t = 0; t < c->cfg.num_tables; t++) {
        const int64_t n = c->tables[t].num_embeddings * c->tables[t].embedding_dim;
        float *full = w->rank == 0 ? sr_calloc((size_t)n, sizeof(float)) : NULL;
        CHECK(sr_sharded_ebc_gather_table(s, t, full) == SR_OK, "gather: %s", sr_error_message());
        const float *want = HV(sr_ebc_weights(ref, t));
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; w->rank == 0 && i < n; i++)
            if (!close_to(full[i], want[i]))
                bad++, first = first < 0 ? i : first;
        CHECK(bad == 0, "table %s: %lld of %lld weights differ (first %lld: %g vs %g)",
              c->tables[t].name, (long long)bad, (long long)n, (long long)first,
              first >= 0 ? full[first] : 0.0, first >= 0 ? want[first] : 0.0);
        sr_free(full);
    }
}

static void step_once(struct sr_sharded_ebc *s, struct sr_ebc *ref, const struct tcfg *c,
                      const struct sr_plan *p, const struct world *w, int step, float lr,
                      struct outcome *o)
{
    const int W = w->W, D = sr_sharded_ebc_out_dim(s), GB = W * B;
    struct batch mine, all;
    make_batch(&mine, c, step, (int64_t)w->rank * B, B);
    make_batch(&all, c, step, 0, GB);
    struct expect e;
    expect_step(&e, c, p, &mine, w);

    float *pooled = sr_calloc((size_t)B * D, sizeof(float));
    float *ref_pooled = sr_calloc((size_t)GB * D, sizeof(float));
    float *dp = sr_calloc((size_t)B * D, sizeof(float));
    float *ref_dp = sr_calloc((size_t)GB * D, sizeof(float));
    for (int64_t g = 0; g < GB; g++)
        for (int col = 0; col < D; col++)
            ref_dp[g * D + col] = dpooled_at(step, g, col);
    memcpy(dp, ref_dp + (size_t)w->rank * B * D, sizeof(float) * B * D);

    reset_counters(w);
    uint64_t allocs = sr_alloc_count();
    int rc = sr_sharded_ebc_forward(s, &mine.kjt, pooled);
    CHECK(rc == SR_OK, "step %d forward: %s", step, sr_error_message());
    sr_sharded_ebc_backward(s, dp, lr, step);
    /* step 1 may be the first use of a communicator (its worker starts) */
    CHECK(step == 1 || sr_alloc_count() == allocs, "step %d: forward/backward allocated", step);
    check_counters(&e, w, step);

    size_t n;
    float *g = sr_sharded_ebc_dp_grad_buffer(s, &n);
    if (n)
        sr_comm_all_reduce(w->world, g, g, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    sr_sharded_ebc_dp_update(s, lr, step);

    CHECK(sr_ebc_forward(ref, &all.kjt, ref_pooled) == SR_OK, "ref: %s", sr_error_message());
    sr_dev_sync(sr_device_cpu(), NULL); /* the test reads pooled values on the host */
    sr_ebc_backward(ref, ref_dp, lr, step);
    sr_dev_sync(sr_device_cpu(), NULL);
    int64_t bad = 0;
    for (int64_t i = 0; i < (int64_t)B * D; i++)
        bad += !close_to(pooled[i], ref_pooled[(size_t)w->rank * B * D + i]);
    CHECK(bad == 0, "step %d: %lld pooled values differ", step, (long long)bad);

    struct sr_sharded_ebc_stats st;
    sr_sharded_ebc_stats(s, &st);
    int64_t mx[3] = {(int64_t)e.out_inter, st.lookup_ids, (int64_t)e.out_all};
    int64_t *allmx = sr_calloc(3 * W, 8);
    sr_comm_all_gather(w->world, mx, allmx, 3, SR_DTYPE_I64, NULL, NULL);
    o->out_inter = 0, o->max_lookup = 0;
    for (int r = 0; r < W; r++) {
        o->out_inter += (uint64_t)allmx[3 * r];
        o->max_lookup = allmx[3 * r + 1] > o->max_lookup ? allmx[3 * r + 1] : o->max_lookup;
        o->out_all += (uint64_t)allmx[3 * r + 2];
    }
    sr_free(allmx);
    sr_free(pooled), sr_free(ref_pooled), sr_free(dp), sr_free(ref_dp);
    free_batch(&mine), free_batch(&all);
}

static int has_cw_pieces(const struct sr_plan *p)
{
    for (int t = 0; t < p->num_tables; t++)
        if (p->tables[t].type == SR_SHARDING_TYPE_COLUMN_WISE && p->tables[t].num_shards > 1)
            return 1;
    return 0;
}

static void run_case(const char *name, const struct tcfg *c, const struct sr_plan *p,
                     enum sr_optim_kind kind, const struct world *w, int steps, struct outcome *o)
{
    char label[160];
    snprintf(label, sizeof label, "W=%d L=%d %s %s %s", w->W, w->L, name, sr_optim_kind_name(kind),
             sr_dtype_name(wire));
    where = label;
    struct sr_optim_config oc = sr_optim_config_default(kind);
    if (kind == SR_OPTIM_ADAGRAD)
        oc.initial_accumulator = 0.1f;
    const float lr = kind == SR_OPTIM_ADAM ? 0.01f : 0.1f;
    int64_t maxv = (int64_t)B * c->cfg.num_features * (c->max_len + 2);
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, wire};
    struct sr_sharded_ebc *s;
    struct sr_ebc *ref;
    int rc = sr_sharded_ebc_init(&s, sr_device_cpu(), &comms, &c->cfg, p, &oc, B, maxv, 42);
    if (kind == SR_OPTIM_ROWWISE_ADAGRAD && has_cw_pieces(p)) {
        CHECK(rc == SR_ERR_UNSUPPORTED && strstr(sr_error_message(), "rowwise_adagrad"),
              "cw in pieces with rowwise_adagrad: %d %s", rc, sr_error_message());
        return;
    }
    CHECK(rc == SR_OK, "init: %s", sr_error_message());
    if (rc)
        return;
    SR_ASSERT(sr_ebc_init(&ref, sr_device_cpu(), &c->cfg, &oc, w->W * B, maxv * w->W, 42) == SR_OK);
    struct outcome tmp = {0};
    if (o)
        memset(o, 0, sizeof *o);
    for (int step = 1; step <= steps; step++)
        step_once(s, ref, c, p, w, step, lr, o ? o : &tmp);
    compare_tables(s, ref, c, w);
    sr_sharded_ebc_free(s);
    sr_ebc_free(ref);
}

/* ---- plans -------------------------------------------------------------------- */

static struct sr_plan *uniform(const struct tcfg *c, enum sr_sharding_type t, const struct world *w)
{
    struct sr_plan *p;
    SR_ASSERT(sr_plan_uniform(&p, &c->cfg, t, w->W, w->L) == SR_OK);
    return p;
}

/* t0 rw, t1 dp, t2 cw (pieces on the last ranks), t3 twrw on the last node. */
static struct sr_plan *mixed(const struct tcfg *c, const struct world *w)
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

static void run_world(struct world *w)
{
    static const enum sr_sharding_type types[] = {
        SR_SHARDING_TYPE_DATA_PARALLEL, SR_SHARDING_TYPE_TABLE_WISE, SR_SHARDING_TYPE_ROW_WISE,
        SR_SHARDING_TYPE_COLUMN_WISE, SR_SHARDING_TYPE_TABLE_ROW_WISE};
    static const enum sr_optim_kind optims[] = {
        SR_OPTIM_ADAM, SR_OPTIM_ADAGRAD, SR_OPTIM_ROWWISE_ADAGRAD, SR_OPTIM_SGD, SR_OPTIM_ADAGRAD};
    struct tcfg c, wc;
    main_config(&c);
    weighted_config(&wc);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "uniform %s", sr_sharding_type_name(types[i]));
        struct sr_plan *p = uniform(&c, types[i], w);
        run_case(name, &c, p, optims[i], w, STEPS, NULL);
        sr_plan_free(p);
        snprintf(name, sizeof name, "weighted %s", sr_sharding_type_name(types[i]));
        p = uniform(&wc, types[i], w);
        run_case(name, &wc, p, SR_OPTIM_SGD, w, STEPS, NULL);
        sr_plan_free(p);
    }
    struct sr_plan *p = mixed(&c, w);
    for (int k = SR_OPTIM_SGD; k <= SR_OPTIM_ADAM; k++)
        run_case("mixed", &c, p, (enum sr_optim_kind)k, w, STEPS, NULL);
    sr_plan_free(p);
    SR_ASSERT(sr_plan_default(&p, &c.cfg, w->W, w->L) == SR_OK);
    run_case("default", &c, p, SR_OPTIM_ROWWISE_ADAGRAD, w, STEPS, NULL);
    sr_plan_free(p);
}

/* Compressed output dist: each sharding type and the mixed plan in bf16 and
 * fp16 still match the fp32 single-rank reference (close_to's tolerance),
 * with the collectives of fp32 (rw's reduce-scatters counted as all-to-alls)
 * and exactly half of fp32's output-dist bytes, counted by the comm layer. */
static void run_compressed(struct world *w)
{
    static const enum sr_sharding_type types[] = {
        SR_SHARDING_TYPE_TABLE_WISE, SR_SHARDING_TYPE_ROW_WISE, SR_SHARDING_TYPE_COLUMN_WISE,
        SR_SHARDING_TYPE_TABLE_ROW_WISE};
    static const enum sr_dtype dts[3] = {SR_DTYPE_F32, SR_DTYPE_BF16, SR_DTYPE_F16};
    uint64_t total[3] = {0, 0, 0};
    struct tcfg c;
    main_config(&c);
    for (int i = 0; i <= 4; i++) {
        struct sr_plan *p = i < 4 ? uniform(&c, types[i], w) : mixed(&c, w);
        const char *name = i < 4 ? sr_sharding_type_name(types[i]) : "mixed";
        struct outcome o[3];
        for (int d = 0; d < 3; d++) {
            wire = dts[d];
            run_case(name, &c, p, SR_OPTIM_ADAGRAD, w, STEPS, &o[d]);
            total[d] += o[d].out_all;
        }
        wire = SR_DTYPE_F32;
        where = name;
        for (int d = 1; d < 3; d++)
            CHECK(2 * o[d].out_all == o[0].out_all && (w->W == 1 || o[0].out_all > 0),
                  "%s output-dist bytes %llu, fp32 %llu: not half", sr_dtype_name(dts[d]),
                  (unsigned long long)o[d].out_all, (unsigned long long)o[0].out_all);
        sr_plan_free(p);
    }
    if (w->rank == 0)
        printf("comm dtype W=%d L=%d: output-dist bytes, %d steps of tw rw cw twrw mixed, all "
               "ranks: fp32 %llu bf16 %llu fp16 %llu\n",
               w->W, w->L, STEPS, (unsigned long long)total[0], (unsigned long long)total[1],
               (unsigned long long)total[2]);
}

/* 2 nodes of 2: pooled bytes across nodes and lookup work, one big table. */
static void run_topology(struct world *w)
{
    struct tcfg c;
    big_config(&c);
    struct outcome o[3];
    enum sr_sharding_type t[3] = {SR_SHARDING_TYPE_TABLE_WISE, SR_SHARDING_TYPE_TABLE_ROW_WISE,
                                  SR_SHARDING_TYPE_ROW_WISE};
    for (int i = 0; i < 3; i++) {
        struct sr_plan *p = uniform(&c, t[i], w);
        run_case(sr_sharding_type_name(t[i]), &c, p, SR_OPTIM_SGD, w, 1, &o[i]);
        sr_plan_free(p);
    }
    where = "topology W=4 L=2";
    CHECK(o[1].out_inter == o[0].out_inter && o[0].out_inter > 0,
          "twrw inter-node pooled bytes %llu, tw %llu", (unsigned long long)o[1].out_inter,
          (unsigned long long)o[0].out_inter);
    CHECK(o[1].out_inter < o[2].out_inter, "twrw inter-node pooled bytes %llu, rw %llu",
          (unsigned long long)o[1].out_inter, (unsigned long long)o[2].out_inter);
    CHECK(2 * o[1].max_lookup == o[0].max_lookup, "largest per-rank lookup: twrw %lld ids, tw %lld",
          (long long)o[1].max_lookup, (long long)o[0].max_lookup);
    if (w->rank == 0)
        printf("topology W=4 L=2, one table 1000x8, B=%d: inter-node pooled bytes/step tw %llu "
               "twrw %llu rw %llu; largest lookup tw %lld twrw %lld ids\n",
               B, (unsigned long long)o[0].out_inter, (unsigned long long)o[1].out_inter,
               (unsigned long long)o[2].out_inter, (long long)o[0].max_lookup,
               (long long)o[1].max_lookup);
}

/* ---- stages over two batch contexts ---------------------------------------- */

#define ISTEPS 4

/* How batch i+1's input dist interleaves with batch i (sharded_ebc.h rule 3):
 * A: whole between batch i's output dist and its gradient dist;
 * B: its counts in flight during batch i's output dist, its data exchange
 *    during batch i's gradient dist. */
enum pattern { PATTERN_A, PATTERN_B };

struct staged {
    struct sr_sharded_ebc *s;
    struct sr_sharded_ebc_batch *ctx[2];
    struct batch bt[ISTEPS + 1];
    float *pooled[ISTEPS + 1];
};

static void dp_all_reduce(struct sr_sharded_ebc *s, const struct world *w, float lr, int step)
{
    size_t n;
    float *g = sr_sharded_ebc_dp_grad_buffer(s, &n);
    if (n)
        sr_comm_all_reduce(w->world, g, g, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    sr_sharded_ebc_dp_update(s, lr, step);
}

static void input_dist(struct staged *x, struct sr_sharded_ebc_batch *b, int step)
{
    sr_sharded_ebc_input_dist_counts_start(x->s, b, &x->bt[step].kjt);
    CHECK(sr_sharded_ebc_input_dist_counts_wait(x->s, b) == SR_OK, "step %d counts: %s", step,
          sr_error_message());
    sr_sharded_ebc_input_dist_data_start(x->s, b);
    sr_sharded_ebc_input_dist_data_wait(x->s, b);
}

/* Batch `step` on cur, with batch step + 1's input dist on nxt (NULL: last). */
static void staged_step(struct staged *x, enum pattern pt, int step, const float *dp, float lr,
                        const struct world *w)
{
    struct sr_sharded_ebc *s = x->s;
    struct sr_sharded_ebc_batch *cur = x->ctx[(step - 1) % 2];
    struct sr_sharded_ebc_batch *nxt = step < ISTEPS ? x->ctx[step % 2] : NULL;
    sr_sharded_ebc_lookup(s, cur);
    sr_sharded_ebc_output_dist_start(s, cur);
    if (nxt && pt == PATTERN_B)
        sr_sharded_ebc_input_dist_counts_start(s, nxt, &x->bt[step + 1].kjt);
    sr_sharded_ebc_output_dist_wait(s, cur, x->pooled[step]);
    if (nxt && pt == PATTERN_A)
        input_dist(x, nxt, step + 1);
    if (nxt && pt == PATTERN_B) {
        CHECK(sr_sharded_ebc_input_dist_counts_wait(s, nxt) == SR_OK, "step %d counts: %s",
              step + 1, sr_error_message());
        sr_sharded_ebc_input_dist_data_start(s, nxt);
    }
    sr_sharded_ebc_grad_dist_start(s, cur, dp);
    if (nxt && pt == PATTERN_B)
        sr_sharded_ebc_input_dist_data_wait(s, nxt);
    sr_sharded_ebc_grad_dist_wait(s, cur);
    sr_sharded_ebc_update(s, cur, lr, step);
    dp_all_reduce(s, w, lr, step);
}

static void staged_init(struct staged *x, const struct tcfg *c, const struct sr_plan *p,
                        const struct sr_optim_config *oc, const struct world *w)
{
    int64_t maxv = (int64_t)B * c->cfg.num_features * (c->max_len + 2);
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, wire};
    SR_ASSERT(sr_sharded_ebc_init(&x->s, sr_device_cpu(), &comms, &c->cfg, p, oc, B, maxv, 42) ==
              SR_OK);
    const int D = sr_sharded_ebc_out_dim(x->s);
    for (int step = 1; step <= ISTEPS; step++) {
        make_batch(&x->bt[step], c, step, (int64_t)w->rank * B, B);
        x->pooled[step] = sr_calloc((size_t)B * D, sizeof(float));
    }
    x->ctx[0] = x->ctx[1] = NULL;
}

static void staged_free(struct staged *x)
{
    sr_sharded_ebc_batch_free(x->ctx[0]);
    sr_sharded_ebc_batch_free(x->ctx[1]);
    sr_sharded_ebc_free(x->s);
    for (int step = 1; step <= ISTEPS; step++) {
        free_batch(&x->bt[step]);
        sr_free(x->pooled[step]);
    }
}

/* Tables of a and b gathered on rank 0 and compared bit for bit. */
static void same_tables(struct sr_sharded_ebc *a, struct sr_sharded_ebc *b, const struct tcfg *c,
                        const struct world *w)
{
    for (int t = 0; t < c->cfg.num_tables; t++) {
        const size_t n = (size_t)c->tables[t].num_embeddings * c->tables[t].embedding_dim;
        float *fa = w->rank == 0 ? sr_calloc(n, sizeof(float)) : NULL;
        float *fb = w->rank == 0 ? sr_calloc(n, sizeof(float)) : NULL;
        CHECK(sr_sharded_ebc_gather_table(a, t, fa) == SR_OK, "gather: %s", sr_error_message());
        CHECK(sr_sharded_ebc_gather_table(b, t, fb) == SR_OK, "gather: %s", sr_error_message());
        CHECK(w->rank != 0 || memcmp(fa, fb, n * sizeof(float)) == 0,
              "table %s: weights differ from the sequential steps", c->tables[t].name);
        sr_free(fa);
        sr_free(fb);
    }
}

/* The same ISTEPS steps through forward/backward and through the stages on
 * two contexts interleaved by pattern pt: pooled outputs and final weights
 * bit-identical; the interleaved steps allocate nothing. */
static void run_interleaved(const char *name, const struct tcfg *c, const struct sr_plan *p,
                            enum sr_optim_kind kind, enum pattern pt, const struct world *w)
{
    char label[160];
    snprintf(label, sizeof label, "interleaved %c W=%d L=%d %s %s %s", pt == PATTERN_A ? 'A' : 'B',
             w->W, w->L, name, sr_optim_kind_name(kind), sr_dtype_name(wire));
    where = label;
    struct sr_optim_config oc = sr_optim_config_default(kind);
    const float lr = kind == SR_OPTIM_ADAM ? 0.01f : 0.1f;
    struct staged seq, st;
    staged_init(&seq, c, p, &oc, w);
    staged_init(&st, c, p, &oc, w);
    SR_ASSERT(sr_sharded_ebc_batch_init(&st.ctx[0], st.s) == SR_OK);
    SR_ASSERT(sr_sharded_ebc_batch_init(&st.ctx[1], st.s) == SR_OK);
    const int D = sr_sharded_ebc_out_dim(st.s);
    float *dp = sr_calloc((size_t)B * D, sizeof(float));

    for (int step = 1; step <= ISTEPS; step++) {
        sr_dev_sync(sr_device_cpu(), NULL); /* the last step's queued ops have read dp */
        for (int64_t i = 0; i < (int64_t)B * D; i++)
            dp[i] = dpooled_at(step, (int64_t)w->rank * B + i / D, (int)(i % D));
        CHECK(sr_sharded_ebc_forward(seq.s, &seq.bt[step].kjt, seq.pooled[step]) == SR_OK,
              "step %d forward: %s", step, sr_error_message());
        sr_sharded_ebc_backward(seq.s, dp, lr, step);
        dp_all_reduce(seq.s, w, lr, step);

        uint64_t allocs = sr_alloc_count();
        if (step == 1)
            input_dist(&st, st.ctx[0], 1);
        staged_step(&st, pt, step, dp, lr, w);
        CHECK(step == 1 || sr_alloc_count() == allocs, "step %d: the stages allocated", step);
    }
    sr_dev_sync(sr_device_cpu(), NULL); /* pooled is read on the host */
    for (int step = 1; step <= ISTEPS; step++)
        CHECK(memcmp(seq.pooled[step], st.pooled[step], sizeof(float) * B * D) == 0,
              "step %d: pooled differs from the sequential step", step);
    same_tables(seq.s, st.s, c, w);
    sr_free(dp);
    staged_free(&st);
    staged_free(&seq);
}

/* dp, tw, rw, cw, twrw and the mixed plan, both patterns; the mixed plan
 * also with a bf16 wire. */
static void run_stages(struct world *w)
{
    static const enum sr_sharding_type types[] = {
        SR_SHARDING_TYPE_DATA_PARALLEL, SR_SHARDING_TYPE_TABLE_WISE, SR_SHARDING_TYPE_ROW_WISE,
        SR_SHARDING_TYPE_COLUMN_WISE, SR_SHARDING_TYPE_TABLE_ROW_WISE};
    struct tcfg c;
    main_config(&c);
    for (int i = 0; i <= 5; i++) {
        struct sr_plan *p = i < 5 ? uniform(&c, types[i], w) : mixed(&c, w);
        const char *name = i < 5 ? sr_sharding_type_name(types[i]) : "mixed";
        for (int pt = PATTERN_A; pt <= PATTERN_B; pt++)
            run_interleaved(name, &c, p, i % 2 ? SR_OPTIM_ADAGRAD : SR_OPTIM_ADAM, (enum pattern)pt,
                            w);
        if (i == 5) {
            wire = SR_DTYPE_BF16;
            run_interleaved(name, &c, p, SR_OPTIM_ADAGRAD, PATTERN_B, w);
            wire = SR_DTYPE_F32;
        }
        sr_plan_free(p);
    }
    struct tcfg wc;
    weighted_config(&wc);
    struct sr_plan *p = uniform(&wc, SR_SHARDING_TYPE_ROW_WISE, w);
    run_interleaved("weighted rw", &wc, p, SR_OPTIM_SGD, PATTERN_B, w);
    sr_plan_free(p);
}

/* A rank that rejects its batch: every rank returns an error, none hangs. */
static void run_rejected(struct world *w)
{
    struct tcfg c;
    main_config(&c);
    where = "rejected batch";
    struct sr_plan *p = uniform(&c, SR_SHARDING_TYPE_ROW_WISE, w);
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, SR_DTYPE_F32};
    struct sr_sharded_ebc *s;
    SR_ASSERT(sr_sharded_ebc_init(&s, sr_device_cpu(), &comms, &c.cfg, p, NULL, B, 1000, 1) ==
              SR_OK);
    struct batch bt;
    make_batch_raw(&bt, &c, 1, (int64_t)w->rank * B, B);
    if (w->rank == w->W - 1 && bt.kjt.num_values > 0)
        for (int64_t i = 0; i < bt.kjt.num_values; i++)
            bt.values[i] = 1 << 20; /* out of range under the error policy */
    float *pooled = sr_calloc((size_t)B * sr_sharded_ebc_out_dim(s), sizeof(float));
    /* as the trainer does: the loader rejects the batch, the rank tells the others */
    int rc = loader_check(&c, &bt.kjt);
    if (rc)
        rc = sr_sharded_ebc_forward_none(s, rc);
    else
        rc = sr_sharded_ebc_forward(s, &bt.kjt, pooled);
    CHECK(rc == SR_ERR_DATA, "forward returned %d, not SR_ERR_DATA", rc);
    free_batch(&bt);
    sr_free(pooled);
    sr_sharded_ebc_free(s);
    sr_plan_free(p);
}

int main(int argc, char **argv)
{
    unsetenv("SR_RANKS_PER_NODE");
    sr_comm_t first;
    if (sr_comm_init_mpi(&first, &argc, &argv, 1) != SR_OK) {
        fprintf(stderr, "mpi_sharded_ebc: %s\n", sr_error_message());
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
        run_world(&w);
        run_compressed(&w);
        run_stages(&w);
        if (W == 4 && L == 2)
            run_topology(&w);
        run_rejected(&w);
        sr_comm_free(w.cross);
        sr_comm_free(w.node);
        sr_comm_free(w.sparse);
        sr_comm_free(w.world);
    }
    long long tot[2] = {checks, failures};
    sr_comm_all_reduce(first, tot, tot, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    if (sr_comm_rank(first) == 0)
        printf("mpi_sharded_ebc: %d ranks: %lld checks, %lld failed\n", W, tot[0], tot[1]);
    sr_comm_free(first);
    sr_comm_finalize();
    return tot[1] ? 1 : 0;
}
