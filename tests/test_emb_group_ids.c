/*
 * The embedding op group_ids (device/ops_embedding.h): backward's sort run
 * ahead of it. On the host device (and its deferred and opaque forms), two
 * steps of forward(keep_ids) + backward on tables with repeated rows, per-id
 * weights and several features on one table, every embedding optimizer:
 * grouping the ids ahead (group_ids, then backward with ids_grouped) leaves
 * the same tables and optimizer state, bit for bit, as backward grouping them
 * itself; and the updates touched the tables (the comparison is not of two
 * untouched copies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "shardrec/rng.h"
#include "device/ops_embedding.h"
#include "helpers/host_view.h"

#define T 2
#define F 3
#define B 24
#define MAX_V (F * B * 6)

static const int64_t rows[T] = {40, 9};
static const int dims[T] = {8, 4};
static const struct sr_emb_feature features[F] = {{0, 0, 0}, {0, 8, 0}, {1, 16, 0}};
#define OUT_DIM 20

/* One step's batch on the host: bags of 0-5 ids of few rows (runs of
 * equal rows), weights, and the table-grouped positions. */
struct host_batch {
    int64_t offsets[F * B + 1], values[MAX_V];
    float weights[MAX_V];
    int64_t feature_pos[F], table_pos[T + 1], n;
};

static void make_batch(struct host_batch *h, uint64_t seed)
{
    int64_t n = 0, count[T] = {0};
    for (int f = 0; f < F; f++)
        for (int b = 0; b < B; b++) {
            h->offsets[f * B + b] = n;
            const int len = (int)(sr_rng_u64(seed, 1, (uint64_t)(f * B + b)) % 6);
            const int t = features[f].table;
            for (int j = 0; j < len; j++, n++) {
                h->values[n] = (int64_t)(sr_rng_u64(seed, 2, (uint64_t)n) % (uint64_t)rows[t]);
                h->weights[n] = (float)(sr_rng_uniform(seed, 3, (uint64_t)n) + 0.5);
            }
            count[t] += len;
        }
    h->offsets[F * B] = n;
    h->n = n;
    h->table_pos[0] = 0;
    for (int t = 0; t < T; t++)
        h->table_pos[t + 1] = h->table_pos[t] + count[t];
    int64_t at[T];
    for (int t = 0; t < T; t++)
        at[t] = h->table_pos[t];
    for (int f = 0; f < F; f++) {
        const int t = features[f].table;
        h->feature_pos[f] = at[t];
        at[t] += h->offsets[(f + 1) * B] - h->offsets[f * B];
    }
}

static void *put(struct sr_device *dev, const void *src, size_t bytes)
{
    void *p = sr_dev_alloc(dev, bytes ? bytes : 4);
    sr_test_host_put(p, src, bytes);
    return p;
}

/* Two steps; returns the tables and state of table t, concatenated, in out. */
static size_t train(enum sr_optim_kind kind, int ahead, unsigned char *out)
{
    struct sr_device *dev = sr_device_cpu();
    struct sr_emb_table tabs[T];
    for (int t = 0; t < T; t++) {
        tabs[t] = (struct sr_emb_table){.rows = rows[t], .dim = dims[t], .stream = (uint64_t)t};
        tabs[t].weight = sr_dev_alloc(dev, (size_t)rows[t] * dims[t] * 4);
        sr_op_emb_init_uniform(dev, tabs[t].weight, SR_DTYPE_F32, rows[t], dims[t], 0, 0, dims[t],
                               7, (uint64_t)t, -0.5, 0.5, NULL);
        const size_t sb = sr_emb_state_bytes(kind, &tabs[t]);
        tabs[t].state = sb ? sr_dev_alloc_zero(dev, sb) : NULL;
    }
    const struct sr_emb_layout l = {.num_tables = T, .tables = tabs, .num_features = F,
                                    .features = features, .out_dim = OUT_DIM, .max_dim = 8,
                                    .max_batch = B, .max_values = MAX_V, .optim = kind};
    void *ws = sr_dev_alloc(dev, sr_op_emb_workspace_bytes(dev, &l));
    sr_op_emb_workspace_init(dev, &l, ws);
    float *pooled = sr_dev_alloc(dev, sizeof(float) * B * OUT_DIM);
    float dpooled_h[B * OUT_DIM];
    for (int i = 0; i < B * OUT_DIM; i++)
        dpooled_h[i] = (float)(sr_rng_uniform(11, 4, (uint64_t)i) - 0.5);
    float *dpooled = put(dev, dpooled_h, sizeof dpooled_h);
    for (int step = 1; step <= 2; step++) {
        struct host_batch h;
        make_batch(&h, (uint64_t)step);
        const struct sr_emb_batch batch = {
            .batch = B, .num_values = h.n,
            .offsets = put(dev, h.offsets, sizeof h.offsets),
            .values = put(dev, h.values, (size_t)h.n * 8),
            .weights = put(dev, h.weights, (size_t)h.n * 4),
            .feature_pos = h.feature_pos, .table_pos = h.table_pos};
        const struct sr_emb_batch kept = {.batch = B, .num_values = h.n,
                                          .feature_pos = h.feature_pos,
                                          .table_pos = h.table_pos, .weighted = 1};
        sr_op_emb_forward(dev, &l, &batch, 1, pooled, ws, NULL);
        if (ahead)
            sr_op_emb_group_ids(dev, &l, &kept, ws, NULL);
        const struct sr_emb_update u = {.optim = sr_optim_config_default(kind), .lr = 0.1f,
                                        .step = step, .ids_grouped = ahead};
        sr_op_emb_backward(dev, &l, &kept, dpooled, &u, ws, NULL);
        sr_dev_sync(dev, NULL);
        sr_dev_free(dev, (void *)batch.offsets);
        sr_dev_free(dev, (void *)batch.values);
        sr_dev_free(dev, (void *)batch.weights);
    }
    size_t at = 0;
    for (int t = 0; t < T; t++) {
        const size_t wb = (size_t)rows[t] * dims[t] * 4, sb = sr_emb_state_bytes(kind, &tabs[t]);
        memcpy(out + at, sr_test_host_view(tabs[t].weight), wb);
        at += wb;
        if (sb)
            memcpy(out + at, sr_test_host_view(tabs[t].state), sb);
        at += sb;
        sr_dev_free(dev, tabs[t].weight);
        if (tabs[t].state)
            sr_dev_free(dev, tabs[t].state);
    }
    sr_dev_free(dev, ws);
    sr_dev_free(dev, pooled);
    sr_dev_free(dev, dpooled);
    return at;
}

/* The tables before any step: init_uniform's draws. */
static size_t untouched(enum sr_optim_kind kind, unsigned char *out)
{
    struct sr_device *dev = sr_device_cpu();
    size_t at = 0;
    for (int t = 0; t < T; t++) {
        const size_t wb = (size_t)rows[t] * dims[t] * 4;
        void *w = sr_dev_alloc(dev, wb);
        sr_op_emb_init_uniform(dev, w, SR_DTYPE_F32, rows[t], dims[t], 0, 0, dims[t], 7,
                               (uint64_t)t, -0.5, 0.5, NULL);
        memcpy(out + at, sr_test_host_view(w), wb);
        at += wb;
        const struct sr_emb_table tab = {.rows = rows[t], .dim = dims[t]};
        const size_t sb = sr_emb_state_bytes(kind, &tab);
        memset(out + at, 0, sb);
        at += sb;
        sr_dev_free(dev, w);
    }
    return at;
}

static void test_grouped_ahead_same_bits(void **state)
{
    (void)state;
    const enum sr_optim_kind kinds[] = {SR_OPTIM_SGD, SR_OPTIM_ADAGRAD, SR_OPTIM_ROWWISE_ADAGRAD,
                                        SR_OPTIM_ADAM};
    const size_t cap = (40 * 8 + 9 * 4) * 4 * 3;
    unsigned char *a = malloc(cap), *b = malloc(cap), *z = malloc(cap);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const size_t na = train(kinds[k], 0, a), nb = train(kinds[k], 1, b);
        assert_true(na <= cap);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
        assert_int_equal(untouched(kinds[k], z), na);
        assert_memory_not_equal(a, z, na);
    }
    free(a);
    free(b);
    free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_grouped_ahead_same_bits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
