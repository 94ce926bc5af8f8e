/*
 * Backend cases of hybrid tables' sparse-dist ops (ops_sparse_dist.h):
 * hybrid_split on bags of random lengths whose ids are partly hot (two
 * features of one hybrid table, one plain feature, with and without
 * weights), rows_copy both ways, and the compact cold-row exchange
 * (compact_counts, compact_owner and compact_samples, each way) over 3
 * ranks, two hybrid features of 4 and 130 columns, bags empty or not at
 * random. Ids and offsets compare exactly, floats too (copies and sums in
 * one fixed order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cases.h"
#include "ops_check.h"
#include "device/ops_sparse_dist.h"

/* ---- hybrid_split ----------------------------------------------------------------- */

#define HY_F 3
#define HY_E 50

struct split_ctx {
    int B, weighted;
    int32_t *lengths;
    int64_t *offsets, *values, n;
    float *weights;
};

static void run_split(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct split_ctx *x = ctx;
    int64_t hot[15];
    for (int i = 0; i < 15; i++)
        hot[i] = 2 * i; /* the even rows below 30 */
    const int32_t hot_of[HY_F] = {0, -1, 1}, feature[2] = {0, 2};
    const int64_t begin[2] = {0, 0}, num[2] = {15, 15};
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_sparse_dist_hybrid h = {.num_features = HY_F,
                                            .batch = x->B,
                                            .num_hot_features = 2,
                                            .hot_of = ops_upload(&a, hot_of, sizeof hot_of),
                                            .feature = ops_upload(&a, feature, sizeof feature),
                                            .hot_begin = ops_upload(&a, begin, sizeof begin),
                                            .num_hot = ops_upload(&a, num, sizeof num),
                                            .hot = ops_upload(&a, hot, sizeof hot),
                                            .hot_words = 15};
    const size_t bags = (size_t)(HY_F + 2) * x->B, n = (size_t)x->n;
    const struct sr_sparse_dist_kjt in = {
        .lengths = ops_upload(&a, x->lengths, 4 * (size_t)HY_F * x->B),
        .offsets = ops_upload(&a, x->offsets, 8 * ((size_t)HY_F * x->B + 1)),
        .values = ops_upload(&a, x->values, 8 * n),
        .weights = x->weighted ? ops_upload(&a, x->weights, 4 * n) : NULL,
        .num_values = x->n};
    int32_t *len = ops_poisoned(&a, 4 * bags), *full = ops_poisoned(&a, 4 * bags);
    int64_t *off = ops_poisoned(&a, 8 * (bags + 1)), *val = ops_poisoned(&a, 8 * n);
    float *w = ops_poisoned(&a, 4 * n);
    sr_op_sparse_dist_hybrid_split(dev, &h, &in, len, full, off, val, x->weighted ? w : NULL, NULL);
    ops_take(c, which, "lengths", OPS_EXACT, 0, dev, len, 4 * bags);
    ops_take(c, which, "full", OPS_EXACT, 0, dev, full, 4 * bags);
    ops_take(c, which, "offsets", OPS_EXACT, 0, dev, off, 8 * (bags + 1));
    ops_take(c, which, "values", OPS_EXACT, 0, dev, val, 8 * n);
    if (x->weighted)
        ops_take(c, which, "weights", OPS_EXACT, 0, dev, w, 4 * n);
    ops_arena_free(&a);
}

static void split_case(int B, int weighted)
{
    struct ops_rng r = ops_rng_of("hybrid_split");
    r.counter = (uint64_t)B << 33 | (uint64_t)weighted << 32;
    struct split_ctx x = {.B = B, .weighted = weighted};
    x.lengths = calloc((size_t)HY_F * B, 4);
    x.offsets = calloc((size_t)HY_F * B + 1, 8);
    for (int i = 0; i < HY_F * B; i++) {
        x.lengths[i] = (int32_t)ops_below(&r, 5);
        x.offsets[i + 1] = x.offsets[i] + x.lengths[i];
    }
    x.n = x.offsets[HY_F * B];
    x.values = calloc((size_t)x.n + 1, 8);
    x.weights = ops_floats((size_t)x.n + 1);
    for (int64_t i = 0; i < x.n; i++)
        x.values[i] = ops_below(&r, HY_E);
    ops_fill(&r, x.weights, (size_t)x.n, 0.5f, 2);
    char name[96];
    snprintf(name, sizeof name, "B %d, %lld ids, half hot%s", B, (long long)x.n,
             weighted ? ", weighted" : "");
    ops_check("sparse_dist.hybrid_split", name, run_split, &x);
    free(x.lengths), free(x.offsets), free(x.values), free(x.weights);
}

/* ---- rows_copy ------------------------------------------------------------------- */

static void run_rows(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const int64_t idx[5] = {9, 0, 4, 7, 2};
    float table[10 * 6], rows[5 * 6];
    for (int i = 0; i < 60; i++)
        table[i] = (float)i * 0.5f;
    for (int i = 0; i < 30; i++)
        rows[i] = -(float)i;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const int64_t *d_idx = ops_upload(&a, idx, sizeof idx);
    float *d_table = ops_upload(&a, table, sizeof table),
          *d_rows = ops_upload(&a, rows, sizeof rows);
    float *got = ops_poisoned(&a, sizeof rows);
    sr_op_sparse_dist_rows_copy(dev, 0, d_idx, 5, 6, d_table, 10, got, 5, NULL);
    sr_op_sparse_dist_rows_copy(dev, 1, d_idx, 5, 6, d_rows, 5, d_table, 10, NULL);
    ops_take(c, which, "gathered rows", OPS_EXACT, 0, dev, got, sizeof rows);
    ops_take(c, which, "scattered table", OPS_EXACT, 0, dev, d_table, sizeof table);
    ops_arena_free(&a);
}

/* ---- the compact exchange ------------------------------------------------------------- */

#define CP_W 3
#define CP_N 2

struct compact_ctx {
    int B, out;
    int32_t *lens;    /* (2 * CP_W, B): feature k's slot on rank r is k * CP_W + r */
    int64_t *offsets; /* (CP_N * CP_W * B + 1) an owner's local batch */
    float *rows, *block;
    int64_t own_words, smp_words;
};

static const int32_t cp_cols[CP_N] = {4, 130}, cp_gcol[CP_N] = {0, 4}, cp_slot0[CP_N] = {0, 3};

static void run_compact(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct compact_ctx *x = ctx;
    const size_t B = (size_t)x->B, rows_bytes = 4 * CP_W * B * x->out, block_bytes = 4 * B * x->out;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    struct sr_sparse_dist_compact cp = {.batch = x->B,
                                        .world = CP_W,
                                        .num_features = CP_N,
                                        .out_dim = x->out,
                                        .cols = ops_upload(&a, cp_cols, sizeof cp_cols),
                                        .gcol = ops_upload(&a, cp_gcol, sizeof cp_gcol),
                                        .slot0 = ops_upload(&a, cp_slot0, sizeof cp_slot0)};
    cp.work = ops_alloc(&a, 8 * (size_t)sr_sparse_dist_compact_words(&cp));
    const int32_t *lens = ops_upload(&a, x->lens, 4 * 2 * CP_W * B);
    const int64_t *offsets = ops_upload(&a, x->offsets, 8 * (CP_N * CP_W * B + 1));
    int64_t *ne = ops_poisoned(&a, 8 * CP_W * CP_N);
    float *own = ops_poisoned(&a, 4 * (size_t)x->own_words + 4);
    float *smp = ops_poisoned(&a, 4 * (size_t)x->smp_words + 4);
    float *rows = ops_upload(&a, x->rows, rows_bytes), *block = ops_poisoned(&a, block_bytes);
    float *from_block = ops_upload(&a, x->block, block_bytes);
    sr_op_sparse_dist_compact_counts(dev, &cp, lens, 2 * CP_W, ne, NULL);
    ops_take(c, which, "ne", OPS_EXACT, 0, dev, ne, 8 * CP_W * CP_N);
    sr_op_sparse_dist_compact_owner(dev, &cp, offsets, rows, own, x->own_words, 1, NULL);
    ops_take(c, which, "owner packed", OPS_EXACT, 0, dev, own, 4 * (size_t)x->own_words);
    sr_op_sparse_dist_compact_owner(dev, &cp, offsets, rows, own, x->own_words, 0, NULL);
    ops_take(c, which, "owner rows back", OPS_EXACT, 0, dev, rows, rows_bytes);
    sr_op_sparse_dist_compact_samples(dev, &cp, lens, 2 * CP_W, from_block, smp, x->smp_words, 1,
                                      NULL);
    ops_take(c, which, "samples packed", OPS_EXACT, 0, dev, smp, 4 * (size_t)x->smp_words);
    sr_op_sparse_dist_compact_samples(dev, &cp, lens, 2 * CP_W, block, smp, x->smp_words, 0, NULL);
    ops_take(c, which, "samples summed", OPS_EXACT, 0, dev, block, block_bytes);
    ops_arena_free(&a);
}

static void compact_case(int B)
{
    struct ops_rng r = ops_rng_of("compact");
    r.counter = (uint64_t)B << 32;
    struct compact_ctx x = {.B = B, .out = cp_cols[0] + cp_cols[1]};
    x.lens = calloc((size_t)2 * CP_W * B, 4);
    x.offsets = calloc((size_t)CP_N * CP_W * B + 1, 8);
    for (int i = 0; i < 2 * CP_W * B; i++)
        x.lens[i] = ops_below(&r, 3) ? (int32_t)ops_below(&r, 4) : 0;
    for (int i = 0; i < CP_N * CP_W * B; i++)
        x.offsets[i + 1] = x.offsets[i] + (ops_below(&r, 2) ? ops_below(&r, 3) : 0);
    for (int k = 0; k < CP_N; k++)
        for (int p = 0; p < CP_W; p++)
            for (int b = 0; b < B; b++) {
                const size_t bag = ((size_t)k * CP_W + p) * B + b;
                x.own_words += x.offsets[bag + 1] > x.offsets[bag] ? cp_cols[k] : 0;
                x.smp_words += x.lens[(size_t)(cp_slot0[k] + p) * B + b] > 0 ? cp_cols[k] : 0;
            }
    x.rows = ops_floats((size_t)CP_W * B * x.out);
    x.block = ops_floats((size_t)B * x.out);
    ops_fill(&r, x.rows, (size_t)CP_W * B * x.out, -2, 2);
    ops_fill(&r, x.block, (size_t)B * x.out, -2, 2);
    char name[96];
    snprintf(name, sizeof name, "B %d, 3 ranks, features of 4 and 130 columns", B);
    if (!ops_lacks("sparse_dist.compact_counts") && !ops_lacks("sparse_dist.compact_owner"))
        ops_check("sparse_dist.compact_samples", name, run_compact, &x);
    free(x.lens), free(x.offsets), free(x.rows), free(x.block);
}

void test_hybrid(void **state)
{
    static const int batches[] = {1, 64, 257};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        for (int weighted = 0; weighted <= 1; weighted++)
            split_case(batches[b], weighted);
    ops_check("sparse_dist.rows_copy", "10 x 6 table, 5 rows each way", run_rows, NULL);
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        compact_case(batches[b]);
    ops_fail_if_any("hybrid");
}
