/* The sparse-dist ops of test_backend_ops (cases.h): bucketize,
 * mean_scales, pack and unpack over a plan with every routing case, 1- and
 * 2-word ids; pooled_scatter and pooled_gather over a column map. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "device/ops_sparse_dist.h"
#include "cases.h"
#include "ops_check.h"

/* ---- sparse_dist ----------------------------------------------------------------- */

/* The plan of tests/test_sparse_dist_ops.c: W = 3 ranks, every routing case.
 *
 *   f0  tw on rank 2                     (rows 5, or 2^33 with 2-word ids)
 *   f1  cw in 2 pieces on ranks 0, 1     mean pooling
 *   f2  rw in blocks of 3 (3, 3, 1 rows)
 *   f3  dp                               mean pooling
 *   f4  rw in blocks of 1 (1, 1, 0 rows: rank 2's shard is empty)
 *   f5  twrw on ranks 1, 2, blocks of 5  mean pooling
 */
#define SD_W    3
#define SD_F    6
#define SD_ME   1 /* the receiving rank of unpack */
#define SD_MAXS 16

enum sd_kind { SD_DP, SD_COPY, SD_BLOCK };

static const struct {
    enum sd_kind kind;
    int64_t rows;
    int nsh;
    int owner[SD_W];
    int mean;
} sd_feats[SD_F] = {
    {SD_COPY, 5, 1, {2}, 0}, {SD_COPY, 6, 2, {0, 1}, 1},     {SD_BLOCK, 7, 3, {0, 1, 2}, 0},
    {SD_DP, 4, 0, {0}, 1},   {SD_BLOCK, 2, 3, {0, 1, 2}, 0}, {SD_BLOCK, 9, 2, {1, 2}, 1},
};

struct sd_plan {
    int S, num_dp, nslots[SD_W], B, me;
    int64_t rows[SD_F];
    int32_t first_slot[SD_F], num_shards[SD_F], mean[SD_F], dp_feature[SD_F];
    int32_t slot_at[SD_W * SD_MAXS];
    int64_t block[SD_F], count_displ[SD_W + 1];
    int64_t work[1024];
    struct sr_sparse_dist_layout l; /* host arrays: the reference's layout */
};

static void sd_plan_init(struct sd_plan *p, int me, int id_words, int B)
{
    memset(p, 0, sizeof *p);
    p->B = B;
    p->me = me;
    for (int f = 0; f < SD_F; f++) {
        p->rows[f] = f == 0 && id_words == 2 ? (int64_t)1 << 33 : sd_feats[f].rows;
        p->mean[f] = sd_feats[f].mean;
        if (sd_feats[f].kind == SD_DP) {
            p->first_slot[f] = -1;
            p->dp_feature[p->num_dp++] = f;
            continue;
        }
        p->first_slot[f] = p->S;
        p->num_shards[f] = sd_feats[f].nsh;
        p->block[f] =
            sd_feats[f].kind == SD_BLOCK ? (p->rows[f] + sd_feats[f].nsh - 1) / sd_feats[f].nsh : 0;
        for (int j = 0; j < sd_feats[f].nsh; j++, p->S++) {
            const int r = sd_feats[f].owner[j];
            p->slot_at[r * SD_MAXS + p->nslots[r]++] = p->S;
        }
    }
    for (int r = 0; r < SD_W; r++)
        p->count_displ[r + 1] = p->count_displ[r] + p->nslots[r] + 1;
    p->l = (struct sr_sparse_dist_layout){.num_features = SD_F,
                                          .batch = B,
                                          .world = SD_W,
                                          .num_slots = p->S,
                                          .max_nslots = SD_MAXS,
                                          .nslots_here = p->nslots[me],
                                          .num_dp = p->num_dp,
                                          .id_words = id_words,
                                          .count_words = p->count_displ[SD_W] + p->num_dp,
                                          .first_slot = p->first_slot,
                                          .num_shards = p->num_shards,
                                          .block = p->block,
                                          .mean = p->mean,
                                          .dp_feature = p->dp_feature,
                                          .slot_at = p->slot_at,
                                          .count_displ = p->count_displ,
                                          .work = p->work};
    assert_true(sr_sparse_dist_work_words(&p->l) <= 1024);
}

/* The plan's layout with every array uploaded to dev. */
static struct sr_sparse_dist_layout sd_layout_on(struct ops_arena *a, const struct sd_plan *p)
{
    struct sr_sparse_dist_layout l = p->l;
    l.first_slot = ops_upload(a, p->first_slot, sizeof p->first_slot);
    l.num_shards = ops_upload(a, p->num_shards, sizeof p->num_shards);
    l.block = ops_upload(a, p->block, sizeof p->block);
    l.mean = ops_upload(a, p->mean, sizeof p->mean);
    l.dp_feature = ops_upload(a, p->dp_feature, sizeof p->dp_feature);
    l.slot_at = ops_upload(a, p->slot_at, sizeof p->slot_at);
    l.count_displ = ops_upload(a, p->count_displ, sizeof p->count_displ);
    l.work = ops_alloc(a, (size_t)sr_sparse_dist_work_words(&p->l) * 8);
    return l;
}

struct sd_kjt {
    int32_t *lengths; /* (F, B) */
    int64_t *offsets, *values;
    float *weights;
    int64_t n;
    int weighted;
};

/* Lengths in [0, max_len]; the first id of each feature is its table's last
 * row; same_id: every id is. */
static void sd_kjt_init(struct sd_kjt *k, const struct sd_plan *p, struct ops_rng *r, int max_len,
                        int weighted, int same_id)
{
    const int B = p->B;
    memset(k, 0, sizeof *k);
    k->lengths = calloc((size_t)SD_F * B, sizeof(int32_t));
    k->offsets = calloc((size_t)SD_F * B + 1, sizeof(int64_t));
    assert_true(k->lengths && k->offsets);
    for (int i = 0; i < SD_F * B; i++) {
        k->lengths[i] = (int32_t)ops_below(r, max_len + 1);
        k->offsets[i + 1] = k->offsets[i] + k->lengths[i];
    }
    k->n = k->offsets[SD_F * B];
    k->values = calloc((size_t)k->n + 1, sizeof(int64_t));
    k->weights = ops_floats((size_t)k->n);
    assert_non_null(k->values);
    for (int f = 0; f < SD_F; f++)
        for (int64_t i = k->offsets[f * B]; i < k->offsets[(f + 1) * B]; i++) {
            const int64_t E = p->rows[f];
            k->values[i] = same_id || i == k->offsets[f * B] ? E - 1 : ops_below(r, E);
            k->weights[i] = ops_uniform_in(r, -1.0f, 2.0f);
        }
    k->weighted = weighted;
}

static void sd_kjt_free(struct sd_kjt *k)
{
    free(k->lengths), free(k->offsets), free(k->values), free(k->weights);
}

static struct sr_sparse_dist_kjt sd_kjt_on(struct ops_arena *a, const struct sd_kjt *k, int B)
{
    return (struct sr_sparse_dist_kjt){
        .lengths = ops_upload(a, k->lengths, (size_t)SD_F * B * 4),
        .offsets = ops_upload(a, k->offsets, ((size_t)SD_F * B + 1) * 8),
        .values = ops_upload(a, k->values, (size_t)k->n * 8),
        .weights = k->weighted ? ops_upload(a, k->weights, (size_t)k->n * 4) : NULL,
        .num_values = k->n};
}

/* Words of the data message to rank r and where it starts, from the counts. */
static int64_t sd_region_words(const struct sd_plan *p, const int64_t *counts, int r, int has_w)
{
    int64_t ids = 0;
    for (int q = 0; q < p->nslots[r]; q++)
        ids += counts[p->count_displ[r] + q];
    return (int64_t)p->nslots[r] * p->B + ids * (p->l.id_words + has_w);
}

struct sd_ctx {
    struct sd_plan *plan;
    struct sd_kjt *kjt; /* NULL: bucketize without a batch */
    /* pack: bucketize's outputs (the reference's) */
    int32_t *lens;
    int64_t *counts;
    int64_t send_words, dp_n;
    /* unpack */
    int32_t *recv;
    int64_t recv_words;
    int64_t *counts_recv;
};

static void run_bucketize(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct sd_ctx *x = ctx;
    const struct sd_plan *p = x->plan;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_sparse_dist_layout l = sd_layout_on(&a, p);
    struct sr_sparse_dist_kjt k = {0};
    if (x->kjt)
        k = sd_kjt_on(&a, x->kjt, p->B);
    const size_t lens_bytes = (size_t)p->S * p->B * 4, counts_bytes = (size_t)l.count_words * 8;
    int32_t *lens = ops_poisoned(&a, lens_bytes);
    int64_t *counts = ops_poisoned(&a, counts_bytes);
    const int64_t flags =
        x->kjt ? (x->kjt->weighted ? SR_SPARSE_DIST_WEIGHTS : 0) : SR_SPARSE_DIST_END;
    sr_op_sparse_dist_bucketize(dev, &l, x->kjt ? &k : NULL, flags, lens, counts, NULL);
    ops_take(c, which, "lens", OPS_EXACT, 0, dev, lens, lens_bytes);
    ops_take(c, which, "counts", OPS_EXACT, 0, dev, counts, counts_bytes);
    ops_arena_free(&a);
}

static void run_mean_scales(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct sd_ctx *x = ctx;
    const struct sd_plan *p = x->plan;
    const size_t n = (size_t)SD_F * p->B;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_sparse_dist_layout l = sd_layout_on(&a, p);
    const int32_t *lengths = ops_upload(&a, x->kjt->lengths, n * 4);
    float *scale = ops_poisoned(&a, n * 4);
    sr_op_sparse_dist_mean_scales(dev, &l, lengths, scale, NULL);
    ops_take(c, which, "scale", OPS_EXACT, 0, dev, scale, n * 4);
    ops_arena_free(&a);
}

/* The reference's bucketize of kjt under plan p, on the host; returns the
 * words of the whole data message. */
static int64_t sd_ref_bucketize(const struct sd_plan *p, const struct sd_kjt *k, int32_t *lens,
                                int64_t *counts)
{
    struct sr_device *ref = ops_ref();
    struct sr_sparse_dist_kjt view = {.lengths = k->lengths,
                                      .offsets = k->offsets,
                                      .values = k->values,
                                      .weights = k->weighted ? k->weights : NULL,
                                      .num_values = k->n};
    struct sd_plan copy = *p; /* the work array is scratch */
    copy.l.work = copy.work;
    ref->sparse_dist->bucketize(ref, &copy.l, &view, k->weighted ? SR_SPARSE_DIST_WEIGHTS : 0, lens,
                                counts, NULL);
    int64_t words = 0;
    for (int r = 0; r < SD_W; r++)
        words += sd_region_words(p, counts, r, k->weighted);
    return words;
}

static void run_pack(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct sd_ctx *x = ctx;
    const struct sd_plan *p = x->plan;
    const int B = p->B;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_sparse_dist_layout l = sd_layout_on(&a, p);
    const struct sr_sparse_dist_kjt k = sd_kjt_on(&a, x->kjt, B);
    const int32_t *lens = ops_upload(&a, x->lens, (size_t)p->S * B * 4);
    const int64_t *counts = ops_upload(&a, x->counts, (size_t)l.count_words * 8);
    int32_t *send = ops_poisoned(&a, (size_t)x->send_words * 4);
    const size_t off_bytes = ((size_t)p->num_dp * B + 1) * 8;
    struct sr_sparse_dist_batch dp = {
        .num_features = p->num_dp,
        .batch = B,
        .offsets = ops_poisoned(&a, off_bytes),
        .values = ops_poisoned(&a, (size_t)x->dp_n * 8),
        .weights = x->kjt->weighted ? ops_poisoned(&a, (size_t)x->dp_n * 4) : NULL,
        .num_values = x->dp_n};
    sr_op_sparse_dist_pack(dev, &l, &k, lens, counts, send, x->send_words, &dp, NULL);
    ops_take(c, which, "send", OPS_EXACT, 0, dev, send, (size_t)x->send_words * 4);
    ops_take(c, which, "dp offsets", OPS_EXACT, 0, dev, dp.offsets, off_bytes);
    ops_take(c, which, "dp values", OPS_EXACT, 0, dev, dp.values, (size_t)x->dp_n * 8);
    if (dp.weights)
        ops_take(c, which, "dp weights", OPS_EXACT, 0, dev, dp.weights, (size_t)x->dp_n * 4);
    ops_arena_free(&a);
}

/* My slots in two local batches, as the sharded EBC asks: (f1 piece 1) alone
 * without weights, rows in source order; (f5, f2, f4 shards) with weights,
 * rows rotated. */
static const int32_t sd_pos_a[] = {0}, sd_pos_b[] = {3, 1, 2};

static void run_unpack(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct sd_ctx *x = ctx;
    const struct sd_plan *p = x->plan;
    const int B = p->B, n = p->nslots[SD_ME], WB = SD_W * B;
    const int32_t rows_a[SD_W] = {0, B, 2 * B}, rows_b[SD_W] = {2 * B, 0, B};
    const int32_t *pos[2] = {sd_pos_a, sd_pos_b}, *row_of[2] = {rows_a, rows_b};
    const int nf[2] = {1, 3};
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_sparse_dist_layout l = sd_layout_on(&a, p);
    const int32_t *recv = ops_upload(&a, x->recv, (size_t)x->recv_words * 4);
    const int64_t *counts = ops_upload(&a, x->counts_recv, (size_t)SD_W * (n + 1) * 8);
    struct sr_sparse_dist_batch g[2];
    for (int i = 0; i < 2; i++) {
        int64_t nv = 0;
        for (int s = 0; s < SD_W; s++)
            for (int j = 0; j < nf[i]; j++)
                nv += x->counts_recv[s * (n + 1) + pos[i][j]];
        g[i] = (struct sr_sparse_dist_batch){
            .num_features = nf[i],
            .batch = WB,
            .pos = ops_upload(&a, pos[i], (size_t)nf[i] * 4),
            .row_of = ops_upload(&a, row_of[i], sizeof rows_a),
            .offsets = ops_poisoned(&a, ((size_t)nf[i] * WB + 1) * 8),
            .values = ops_poisoned(&a, (size_t)nv * 8),
            .weights = i == 1 ? ops_poisoned(&a, (size_t)nv * 4) : NULL,
            .num_values = nv};
    }
    sr_op_sparse_dist_unpack(dev, &l, recv, x->recv_words, counts, g, 2, NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "batch %d offsets", i);
        ops_take(c, which, name, OPS_EXACT, 0, dev, g[i].offsets, ((size_t)nf[i] * WB + 1) * 8);
        snprintf(name, sizeof name, "batch %d values", i);
        ops_take(c, which, name, OPS_EXACT, 0, dev, g[i].values, (size_t)g[i].num_values * 8);
        snprintf(name, sizeof name, "batch %d weights", i);
        if (g[i].weights)
            ops_take(c, which, name, OPS_EXACT, 0, dev, g[i].weights, (size_t)g[i].num_values * 4);
    }
    ops_arena_free(&a);
}

/* Every source rank's message to SD_ME, built by the reference's bucketize
 * and pack (tests/test_sparse_dist_ops.c checks those against naive code). */
static void sd_deliver(struct sd_ctx *x, int id_words, int B, struct ops_rng *r, int max_len,
                       int same_id)
{
    struct sr_device *ref = ops_ref();
    const int n = x->plan->nslots[SD_ME];
    x->counts_recv = calloc((size_t)SD_W * (n + 1), sizeof(int64_t));
    x->recv = NULL;
    x->recv_words = 0;
    for (int s = 0; s < SD_W; s++) {
        struct sd_plan *p = malloc(sizeof *p);
        struct sd_kjt k;
        sd_plan_init(p, s, id_words, B);
        sd_kjt_init(&k, p, r, max_len, s != 0, same_id); /* rank 0 sends no weights */
        int32_t *lens = calloc((size_t)p->S * B + 1, 4);
        int64_t counts[64];
        const int64_t words = sd_ref_bucketize(p, &k, lens, counts);
        int32_t *send = calloc((size_t)words + 1, 4);
        int64_t dp_off[SD_F * 1024 + 1];
        int64_t *dp_val = calloc((size_t)k.n + 1, 8);
        float *dp_w = ops_floats((size_t)k.n);
        struct sr_sparse_dist_batch dp = {.num_features = p->num_dp,
                                          .batch = B,
                                          .offsets = dp_off,
                                          .values = dp_val,
                                          .weights = k.weighted ? dp_w : NULL,
                                          .num_values = k.n};
        struct sr_sparse_dist_kjt view = {.lengths = k.lengths,
                                          .offsets = k.offsets,
                                          .values = k.values,
                                          .weights = k.weighted ? k.weights : NULL,
                                          .num_values = k.n};
        assert_true(B <= 1024);
        ref->sparse_dist->pack(ref, &p->l, &view, lens, counts, send, words, &dp, NULL);
        int64_t at = 0;
        for (int q = 0; q < SD_ME; q++)
            at += sd_region_words(p, counts, q, k.weighted);
        const int64_t len = sd_region_words(p, counts, SD_ME, k.weighted);
        x->recv = realloc(x->recv, (size_t)(x->recv_words + len + 1) * 4);
        memcpy(x->recv + x->recv_words, send + at, (size_t)len * 4);
        x->recv_words += len;
        for (int q = 0; q <= n; q++)
            x->counts_recv[s * (n + 1) + q] = counts[p->count_displ[SD_ME] + q];
        free(lens), free(send), free(dp_val), free(dp_w), free(p);
        sd_kjt_free(&k);
    }
}

static void sd_batch_cases(int B, int id_words, int weighted, int max_len, int same_id)
{
    struct ops_rng r = ops_rng_of("sparse_dist");
    r.counter = (uint64_t)B << 40 | (uint64_t)(id_words * 4 + weighted * 2 + same_id) << 32 |
                (uint64_t)max_len << 16;
    struct sd_plan *p = malloc(sizeof *p);
    struct sd_kjt k;
    sd_plan_init(p, 0, id_words, B);
    sd_kjt_init(&k, p, &r, max_len, weighted, same_id);
    char name[96];
    snprintf(name, sizeof name, "B %d id_words %d %s ids/bag 0-%d%s (N %lld)", B, id_words,
             weighted ? "weighted" : "unweighted", max_len, same_id ? " same id" : "",
             (long long)k.n);
    struct sd_ctx x = {.plan = p, .kjt = &k};
    ops_check("sparse_dist.bucketize", name, run_bucketize, &x);
    ops_check("sparse_dist.mean_scales", name, run_mean_scales, &x);

    x.lens = calloc((size_t)p->S * B + 1, 4);
    x.counts = calloc(64, 8);
    x.send_words = sd_ref_bucketize(p, &k, x.lens, x.counts);
    x.dp_n = x.counts[p->count_displ[SD_W]];
    ops_check("sparse_dist.pack", name, run_pack, &x);
    free(x.lens), free(x.counts);

    struct sd_plan *me = malloc(sizeof *me);
    sd_plan_init(me, SD_ME, id_words, B);
    x.plan = me;
    sd_deliver(&x, id_words, B, &r, max_len, same_id);
    snprintf(name, sizeof name, "B %d id_words %d from 3 ranks ids/bag 0-%d%s (%lld words)", B,
             id_words, max_len, same_id ? " same id" : "", (long long)x.recv_words);
    ops_check("sparse_dist.unpack", name, run_unpack, &x);
    free(x.recv), free(x.counts_recv), free(me), free(p);
    sd_kjt_free(&k);
}

/* ---- sparse_dist: pooled columns ----------------------------------------------- */

struct cols_ctx {
    int B, out_dim, num_features, num_pieces;
    int64_t buf_floats;
    struct sr_sparse_dist_piece pieces[32];
    float *buf, *dpooled, *scale;
};

static void run_scatter_gather(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct cols_ctx *x = ctx;
    const size_t pooled_bytes = (size_t)x->B * x->out_dim * 4,
                 buf_bytes = (size_t)x->buf_floats * 4;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_sparse_dist_cols m = {
        .num_pieces = x->num_pieces,
        .pieces = ops_upload(&a, x->pieces, sizeof(x->pieces[0]) * (size_t)x->num_pieces),
        .batch = x->B,
        .out_dim = x->out_dim,
        .num_features = x->num_features,
        .buf_floats = x->buf_floats};
    const float *scale = ops_upload(&a, x->scale, (size_t)x->num_features * x->B * 4);
    const float *buf = ops_upload(&a, x->buf, buf_bytes);
    const float *dpooled = ops_upload(&a, x->dpooled, pooled_bytes);
    float *pooled = ops_poisoned(&a, pooled_bytes), *got = ops_poisoned(&a, buf_bytes);
    sr_op_sparse_dist_pooled_scatter(dev, &m, buf, scale, pooled, NULL);
    sr_op_sparse_dist_pooled_gather(dev, &m, dpooled, scale, got, NULL);
    ops_take(c, which, "pooled (scatter)", OPS_F32, OPS_TOL, dev, pooled, pooled_bytes);
    ops_take(c, which, "buf (gather)", OPS_F32, OPS_TOL, dev, got, buf_bytes);
    ops_arena_free(&a);
}

/* Features of dims 1, 4, 16, 130, 3; each in 1 or 2 column pieces placed in
 * the (B, width) blocks of 3 ranks, blocks back to back: every pooled column
 * and every buffer float in exactly one piece. */
static void cols_case(int B)
{
    static const int dims[] = {1, 4, 16, 130, 3};
    const int F = 5;
    struct ops_rng r = ops_rng_of("pooled_cols");
    r.counter = (uint64_t)B << 32;
    struct cols_ctx x = {.B = B, .num_features = F};
    int width[SD_W] = {0}, col = 0;
    int piece_rank[32];
    for (int f = 0; f < F; f++) {
        const int parts = dims[f] > 1 ? 2 : 1, first = dims[f] / 3 + (dims[f] > 1);
        for (int j = 0; j < parts; j++) {
            const int rank = (f + 2 * j) % SD_W, cols = parts == 1 ? dims[f]
                                                        : j        ? dims[f] - first
                                                                   : first;
            piece_rank[x.num_pieces] = rank;
            x.pieces[x.num_pieces++] = (struct sr_sparse_dist_piece){
                .gcol = width[rank], .fcol = col, .cols = cols, .feature = f};
            width[rank] += cols;
            col += cols;
        }
    }
    x.out_dim = col;
    int64_t block[SD_W], at = 0;
    for (int rk = 0; rk < SD_W; rk++) {
        block[rk] = at;
        at += (int64_t)B * width[rk];
    }
    for (int q = 0; q < x.num_pieces; q++) {
        x.pieces[q].block = block[piece_rank[q]];
        x.pieces[q].width = width[piece_rank[q]];
    }
    x.buf_floats = at;
    x.buf = ops_floats((size_t)at);
    x.dpooled = ops_floats((size_t)B * x.out_dim);
    x.scale = ops_floats((size_t)F * B);
    ops_fill(&r, x.buf, (size_t)at, -2, 2);
    ops_fill(&r, x.dpooled, (size_t)B * x.out_dim, -2, 2);
    for (int i = 0; i < F * B; i++)
        x.scale[i] = i % 3 ? 1.0f : 1.0f / (float)(1 + ops_below(&r, 20));
    char name[96];
    snprintf(name, sizeof name, "B %d, 5 features in %d pieces over 3 blocks", B, x.num_pieces);
    ops_check("sparse_dist.pooled_scatter+gather", name, run_scatter_gather, &x);
    free(x.buf), free(x.dpooled), free(x.scale);
}

void test_sparse_dist(void **state)
{
    static const int batches[] = {1, 64, 257};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        for (int id_words = 1; id_words <= 2; id_words++)
            for (int weighted = 0; weighted <= 1; weighted++)
                sd_batch_cases(batches[b], id_words, weighted, 3 + 17 * weighted, 0);
    sd_batch_cases(64, 1, 0, 0, 0);  /* every bag empty */
    sd_batch_cases(64, 2, 1, 20, 1); /* every id the same (each table's last row) */

    struct sd_plan *p = malloc(sizeof *p);
    sd_plan_init(p, 0, 1, 64);
    struct sd_ctx x = {.plan = p, .kjt = NULL};
    ops_check("sparse_dist.bucketize", "B 64, no batch (kjt NULL)", run_bucketize, &x);
    free(p);

    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        cols_case(batches[b]);
    ops_fail_if_any("sparse_dist");
}
