/* The case of test_backend_ops (cases.h) over 2^31 elements: one embedding
 * table on the device under test too large for 32-bit offsets. */
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
#include "shardrec/optim.h"
#include "device/ops_embedding.h"
#include "cases.h"
#include "ops_check.h"

/* ---- a table of more than 2^31 elements ----------------------------------------- */

/* The device under test holds a table of E rows of D = 128: 2^31 + 384
 * elements (8 GiB; 2^32 + 640, 16 GiB, on a GPU), so any 32-bit offset
 * overflows. fill and init_uniform are checked over the whole table, chunk by
 * chunk, against the reference's init_uniform of the same rows (a pure
 * function of the global row). Forward and backward run on ids in the last
 * BIG_K rows (the last row in every bag); their reference is the immediate
 * CPU device on a table of only the last BIG_K + BIG_G rows (initialised from
 * the same global rows, ids shifted): pooling and the row updates depend only
 * on the rows an id touches, so both give the same values, and the BIG_G rows
 * before the ids must come back untouched. */
#define BIG_D  128
#define BIG_K  4096
#define BIG_G  512
#define BIG_B  64
#define BIG_F  3
#define BIG_CR ((int64_t)1 << 17) /* rows per compared chunk: 64 MiB */

struct big_ctx {
    int64_t E, base; /* base = E - BIG_K - BIG_G: the reference table's first row */
    float *weight;   /* (E, D) on the device under test */
    float *state;    /* (E) on the device under test: row-wise Adagrad */
    uint64_t seed, stream;
    int64_t offsets[BIG_F * BIG_B + 1];
    int64_t *values, *ref_values, n;
    float *weights, *dpooled;
    enum sr_optim_kind kind;
    int backward;
};

static void run_big(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct big_ctx *x = ctx;
    const int64_t R = BIG_K + BIG_G;
    const double lo = -0.05, hi = 0.05;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    struct sr_emb_table tab = {.dim = BIG_D};
    float *window, *state_window;
    if (which == 0) {
        tab.weight = window = ops_alloc(&a, (size_t)R * BIG_D * 4);
        tab.state = state_window = ops_alloc(&a, (size_t)R * 4);
        tab.rows = R;
    } else {
        tab.weight = x->weight, tab.state = x->state, tab.rows = x->E;
        window = x->weight + x->base * BIG_D; /* 64-bit pointer arithmetic on the host */
        state_window = x->state + x->base;
    }
    sr_op_emb_init_uniform(dev, window, SR_DTYPE_F32, R, BIG_D, x->base, 0, BIG_D, x->seed,
                           x->stream, lo, hi, NULL);
    sr_op_emb_fill(dev, state_window, R, 0.25f, NULL);
    struct sr_emb_feature features[BIG_F];
    for (int f = 0; f < BIG_F; f++)
        features[f] = (struct sr_emb_feature){.table = 0, .col = f * BIG_D, .mean = f == 1};
    const struct sr_emb_layout l = {.num_tables = 1,
                                    .tables = &tab,
                                    .num_features = BIG_F,
                                    .features = features,
                                    .out_dim = BIG_F * BIG_D,
                                    .max_dim = BIG_D,
                                    .max_batch = BIG_B,
                                    .max_values = x->n,
                                    .optim = x->kind};
    int64_t feature_pos[BIG_F], table_pos[2] = {0, x->n};
    for (int f = 0; f < BIG_F; f++)
        feature_pos[f] = x->offsets[f * BIG_B];
    const struct sr_emb_batch batch = {
        .batch = BIG_B,
        .num_values = x->n,
        .offsets = ops_upload(&a, x->offsets, sizeof x->offsets),
        .values = ops_upload(&a, which ? x->values : x->ref_values, (size_t)x->n * 8),
        .weights = ops_upload(&a, x->weights, (size_t)x->n * 4),
        .feature_pos = feature_pos,
        .table_pos = table_pos};
    void *ws = ops_alloc(&a, sr_op_emb_workspace_bytes(dev, &l));
    sr_op_emb_workspace_init(dev, &l, ws);
    const size_t pooled_bytes = (size_t)BIG_B * l.out_dim * 4;
    float *pooled = ops_poisoned(&a, pooled_bytes);
    sr_op_emb_forward(dev, &l, &batch, x->backward, pooled, ws, NULL);
    ops_take(c, which, "pooled", OPS_F32, OPS_TOL, dev, pooled, pooled_bytes);
    if (x->backward) {
        const struct sr_emb_update u = {
            .optim = sr_optim_config_default(x->kind), .lr = 0.05f, .step = 1};
        sr_op_emb_backward(dev, &l, &batch, ops_upload(&a, x->dpooled, pooled_bytes), &u, ws, NULL);
        ops_take(c, which, "last rows", OPS_F32, OPS_TOL, dev, window, (size_t)R * BIG_D * 4);
        if (x->kind == SR_OPTIM_ROWWISE_ADAGRAD)
            ops_take(c, which, "last rows' state", OPS_F32, OPS_TOL, dev, state_window,
                     (size_t)R * 4);
    }
    ops_arena_free(&a);
}

/* The whole table against the reference's init_uniform (or a constant), chunk
 * by chunk; returns the bytes that differ. */
static int64_t big_compare_all(struct sr_device *dev, const struct big_ctx *x, int filled,
                               float value, float *want, float *got)
{
    struct sr_device *ref = ops_ref();
    int64_t bad = 0;
    for (int64_t r0 = 0; r0 < x->E; r0 += BIG_CR) {
        const int64_t rows = x->E - r0 < BIG_CR ? x->E - r0 : BIG_CR;
        const size_t n = (size_t)rows * BIG_D;
        if (filled)
            for (size_t i = 0; i < n; i++)
                want[i] = value;
        else
            ref->emb->init_uniform(ref, want, SR_DTYPE_F32, rows, BIG_D, r0, 0, BIG_D, x->seed,
                                   x->stream, -0.05, 0.05, NULL);
        sr_dev_copy(dev, got, x->weight + r0 * BIG_D, n * 4, NULL);
        sr_dev_sync(dev, NULL);
        if (memcmp(want, got, n * 4) != 0) {
            double err = 0.0;
            char detail[200];
            ops_compare(OPS_EXACT, 0.0, want, got, n * 4, &err, detail, sizeof detail);
            if (!bad)
                printf("    rows from %lld: %s\n", (long long)r0, detail);
            bad += (int64_t)err;
        }
    }
    return bad;
}

static void big_ids(struct big_ctx *x)
{
    struct ops_rng r = ops_rng_of("big");
    for (int k = 0; k < BIG_F * BIG_B; k++)
        x->offsets[k + 1] = x->offsets[k] + 1 + ops_below(&r, 20);
    x->n = x->offsets[BIG_F * BIG_B];
    x->values = calloc((size_t)x->n, 8);
    x->ref_values = calloc((size_t)x->n, 8);
    x->weights = ops_floats((size_t)x->n);
    x->dpooled = ops_floats((size_t)BIG_B * BIG_F * BIG_D);
    assert_true(x->values && x->ref_values);
    for (int k = 0; k < BIG_F * BIG_B; k++)
        for (int64_t i = x->offsets[k]; i < x->offsets[k + 1]; i++) {
            x->values[i] = i == x->offsets[k] ? x->E - 1 : x->E - BIG_K + ops_below(&r, BIG_K);
            x->ref_values[i] = x->values[i] - x->base;
        }
    ops_fill(&r, x->weights, (size_t)x->n, -1.0f, 2.0f);
    ops_fill(&r, x->dpooled, (size_t)BIG_B * BIG_F * BIG_D, -1.0f, 1.0f);
    x->seed = (uint64_t)ops_below(&r, INT64_MAX);
    x->stream = 7;
}

static void big_whole_table(struct sr_device *dev, struct big_ctx *x, const char *name)
{
    float *want = malloc((size_t)BIG_CR * BIG_D * 4), *got = malloc((size_t)BIG_CR * BIG_D * 4);
    assert_true(want && got);
    const int64_t n = x->E * BIG_D;
    sr_op_emb_fill(dev, x->weight, n, 0.5f, NULL);
    int64_t bad = big_compare_all(dev, x, 1, 0.5f, want, got);
    ops_report("emb.fill", name, bad == 0, (double)bad, -1.0, "-", "");
    sr_op_emb_init_uniform(dev, x->weight, SR_DTYPE_F32, x->E, BIG_D, 0, 0, BIG_D, x->seed,
                           x->stream, -0.05, 0.05, NULL);
    bad = big_compare_all(dev, x, 0, 0.0f, want, got);
    ops_report("emb.init_uniform", name, bad == 0, (double)bad, -1.0, "-", "");
    free(want), free(got);
}

void test_big_table(void **state)
{
    struct sr_device *dev = ops_dut();
    if (ops_lacks("emb.fill") || ops_lacks("emb.init_uniform") ||
        ops_lacks("emb.backward+workspace"))
        return; /* reported by test_embedding */
    if (!ops_big_wanted()) {
        printf("emb big table: off (SR_TEST_BIG=1 turns it on; on by default for "
               "SR_TEST_DEVICE=cuda)\n");
        return;
    }
    struct big_ctx x = {.E = dev->kind == SR_DEVICE_CUDA ? ((int64_t)1 << 25) + 5
                                                         : ((int64_t)1 << 24) + 3};
    const char *rows = getenv("SR_TEST_BIG_ROWS");
    if (rows && *rows)
        x.E = strtoll(rows, NULL, 0);
    assert_true(x.E > BIG_K + BIG_G);
    x.base = x.E - BIG_K - BIG_G;
    const size_t bytes = (size_t)x.E * BIG_D * 4;
    if (dev->kind == SR_DEVICE_CPU) { /* a deferred device saves an in-place table: twice */
        const size_t need = bytes * (dev->host_immediate ? 1 : 2) + ((size_t)1 << 29);
        const size_t avail = ops_host_available();
        if (avail && avail < need) {
            printf("emb big table: SKIPPED: %s needs %.1f GiB of host memory, %.1f GiB "
                   "available (SR_TEST_BIG=0 turns the case off)\n",
                   dev->name, (double)need / (1 << 30), (double)avail / (1 << 30));
            return;
        }
    }
    char name[96];
    snprintf(name, sizeof name, "E %lld x D %d = %lld elements (2^%.2f)", (long long)x.E, BIG_D,
             (long long)(x.E * BIG_D), log2((double)x.E * BIG_D));
    x.weight = sr_dev_alloc(dev, bytes);
    x.state = sr_dev_alloc(dev, (size_t)x.E * 4);
    sr_op_emb_fill(dev, x.state, x.E, 0.25f, NULL);
    big_ids(&x);
    big_whole_table(dev, &x, name);

    snprintf(name, sizeof name, "ids in the last %d of %lld rows (N %lld)", BIG_K, (long long)x.E,
             (long long)x.n);
    x.kind = SR_OPTIM_SGD;
    ops_check("emb.forward", name, run_big, &x);
    x.backward = 1;
    ops_check("emb.backward.sgd", name, run_big, &x);
    x.kind = SR_OPTIM_ROWWISE_ADAGRAD;
    ops_check("emb.backward.rowwise_adagrad", name, run_big, &x);
    sr_dev_sync(dev, NULL);
    sr_dev_free(dev, x.weight);
    sr_dev_free(dev, x.state);
    free(x.values), free(x.ref_values), free(x.weights), free(x.dpooled);
    ops_fail_if_any("big table");
}
