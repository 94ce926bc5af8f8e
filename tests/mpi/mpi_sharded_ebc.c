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
 *
 * Files: this one (the equivalence cases and main), sharded_ebc/harness.[ch]
 * (checks, configs, batches, plans) and sharded_ebc/stages.c (the stages).
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

/* ---- expected collectives and bytes ------------------------------------------- */

struct expect {
    uint64_t calls[3][SR_COLL_COUNT]; /* sparse, node, cross */
    uint64_t intra[3][SR_COLL_COUNT], inter[3][SR_COLL_COUNT];
    uint64_t out_inter; /* output dist only, both directions */
    uint64_t out_all;   /* output dist only, both directions, intra + inter */
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

/* Every table in one tw or cw shard. */
static int whole_tables(const struct sr_plan *p)
{
    for (int t = 0; t < p->num_tables; t++)
        if (group_of(p->tables[t].type) != 0 || p->tables[t].num_shards != 1)
            return 0;
    return 1;
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
    /* local mode (sharded_ebc.h): one rank, every table whole in tw/cw; nothing is exchanged */
    CHECK(sr_sharded_ebc_is_local(s) == (W == 1 && whole_tables(p)), "local mode %d on %d ranks",
          sr_sharded_ebc_is_local(s), W);
    if (sr_sharded_ebc_is_local(s))
        memset(&e, 0, sizeof e);

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
    int rc = sr_sharded_ebc_forward(s, &mine.kjt, pooled, NULL);
    CHECK(rc == SR_OK, "step %d forward: %s", step, sr_error_message());
    sr_sharded_ebc_backward(s, dp, lr, step, NULL);
    /* step 1 may be the first use of a communicator (its worker starts) */
    CHECK(step == 1 || sr_alloc_count() == allocs, "step %d: forward/backward allocated", step);
    check_counters(&e, w, step);

    size_t n;
    float *g = sr_sharded_ebc_dp_grad_buffer(s, &n);
    if (n)
        sr_comm_all_reduce(w->world, g, g, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    sr_sharded_ebc_dp_update(s, lr, step, NULL);

    CHECK(sr_ebc_forward(ref, &all.kjt, ref_pooled, NULL) == SR_OK, "ref: %s", sr_error_message());
    sr_dev_sync(sr_device_cpu(), NULL); /* the test reads pooled values on the host */
    sr_ebc_backward(ref, ref_dp, lr, step, NULL);
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

/* Each feature's bound for the case being run (sr_sharded_ebc_init's
 * feature_max_values), or NULL. */
static const int64_t *caps;

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
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, wire, NULL};
    struct sr_sharded_ebc *s;
    struct sr_ebc *ref;
    int rc = sr_sharded_ebc_init(&s, sr_device_cpu(), &comms, &c->cfg, p, &oc, B, maxv, caps, 42);
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

/* Each feature's most ids in any rank's batch of the STEPS steps: a bound
 * that some batch reaches. */
static void tight_bounds(const struct tcfg *c, const struct world *w, int64_t *bound)
{
    for (int f = 0; f < c->cfg.num_features; f++)
        bound[f] = 0;
    for (int step = 1; step <= STEPS; step++)
        for (int r = 0; r < w->W; r++) {
            struct batch bt;
            make_batch_raw(&bt, c, step, (int64_t)r * B, B);
            for (int f = 0; f < c->cfg.num_features; f++)
                bound[f] = bt.per_key[f] > bound[f] ? bt.per_key[f] : bound[f];
            free_batch(&bt);
        }
}

/* Every feature bounded by the most ids its batches hold (some batch at the
 * bound): buffers sized by the features of the tables a rank owns, the same
 * results for every sharding type (cw in several pieces on a rank where
 * W < pieces), with and without per-id weights, and the mixed plan. */
static void run_bounded(struct world *w)
{
    static const enum sr_sharding_type types[] = {
        SR_SHARDING_TYPE_TABLE_WISE, SR_SHARDING_TYPE_ROW_WISE, SR_SHARDING_TYPE_COLUMN_WISE,
        SR_SHARDING_TYPE_TABLE_ROW_WISE};
    struct tcfg configs[2];
    int64_t bound[MAX_F];
    main_config(&configs[0]);
    weighted_config(&configs[1]);
    for (int k = 0; k < 2; k++) {
        const struct tcfg *c = &configs[k];
        tight_bounds(c, w, bound);
        caps = bound;
        for (int i = 0; i <= (k ? 3 : 4); i++) { /* the mixed plan names main_config's tables */
            struct sr_plan *p = i < 4 ? uniform(c, types[i], w) : mixed(c, w);
            run_case(i < 4 ? sr_sharding_type_name(types[i]) : "mixed, bounded features", c, p,
                     k ? SR_OPTIM_SGD : SR_OPTIM_ADAGRAD, w, STEPS, NULL);
            sr_plan_free(p);
        }
        caps = NULL;
    }
}

/* A batch with more ids of a feature than its bound: that rank's forward
 * names the feature, and every rank returns SR_ERR_DATA (none hangs). */
static void run_over_bound(struct world *w)
{
    struct tcfg c;
    int64_t bound[MAX_F];
    main_config(&c);
    where = "a feature over its bound";
    for (int f = 0; f < c.cfg.num_features; f++)
        bound[f] = (int64_t)B * c.max_len;
    struct sr_plan *p = uniform(&c, SR_SHARDING_TYPE_TABLE_WISE, w);
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, SR_DTYPE_F32, NULL};
    struct sr_sharded_ebc *s;
    struct batch bt;
    make_batch(&bt, &c, 1, (int64_t)w->rank * B, B);
    int64_t ids = bt.kjt.length_per_key[1], most = 0, every[8];
    SR_ASSERT(w->W <= 8);
    sr_comm_all_gather(w->world, &ids, every, 1, SR_DTYPE_I64, NULL, NULL);
    for (int r = 0; r < w->W; r++)
        most = every[r] > most ? every[r] : most;
    CHECK(most > 0, "no rank has ids of feature 1");
    if (most == 0) {
        free_batch(&bt);
        sr_plan_free(p);
        return;
    }
    bound[1] = most - 1; /* the ranks with the most ids of feature 1 are over it */
    SR_ASSERT(sr_sharded_ebc_init(&s, sr_device_cpu(), &comms, &c.cfg, p, NULL, B,
                                  (int64_t)B * c.cfg.num_features * c.max_len, bound, 1) == SR_OK);
    float *pooled = sr_calloc((size_t)B * sr_sharded_ebc_out_dim(s), sizeof(float));
    int rc = sr_sharded_ebc_forward(s, &bt.kjt, pooled, NULL);
    CHECK(rc == SR_ERR_DATA, "forward returned %d, not SR_ERR_DATA", rc);
    if (ids == most)
        CHECK(strstr(sr_error_message(), "feature 'f1' holds") &&
                  strstr(sr_error_message(), "its exchange was sized for"),
              "the rank over the bound says: %s", sr_error_message());
    free_batch(&bt);
    sr_free(pooled);
    sr_sharded_ebc_free(s);
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

/* A rank that rejects its batch: every rank returns an error, none hangs. */
static void run_rejected(struct world *w)
{
    struct tcfg c;
    main_config(&c);
    where = "rejected batch";
    struct sr_plan *p = uniform(&c, SR_SHARDING_TYPE_ROW_WISE, w);
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, SR_DTYPE_F32, NULL};
    struct sr_sharded_ebc *s;
    SR_ASSERT(sr_sharded_ebc_init(&s, sr_device_cpu(), &comms, &c.cfg, p, NULL, B, 1000, NULL, 1) ==
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
        rc = sr_sharded_ebc_forward_none(s, rc, NULL);
    else
        rc = sr_sharded_ebc_forward(s, &bt.kjt, pooled, NULL);
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
        run_bounded(&w);
        run_over_bound(&w);
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
