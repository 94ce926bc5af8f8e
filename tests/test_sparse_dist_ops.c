/*
 * The sparse-dist device ops (device/ops_sparse_dist.h) against naive
 * references written here, on the immediate CPU device and on the deferred
 * one (read after sr_dev_sync). A small plan of W = 3 ranks covers every
 * routing case:
 *
 *   f0  tw on rank 2                     (rows 5, or 2^33 with 2-word ids)
 *   f1  cw in 2 pieces on ranks 0, 1     mean pooling
 *   f2  rw in blocks of 3 (3, 3, 1 rows)
 *   f3  dp                               mean pooling
 *   f4  rw in blocks of 1 (1, 1, 0 rows: rank 2's shard is empty)
 *   f5  twrw on ranks 1, 2, blocks of 5  mean pooling
 *
 * Batches have empty bags, ids at the last row of every table, and per-id
 * weights on some source ranks only (unpack fills 1 for the others).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_sparse_dist.h"

#define B     3
#define W     3
#define F     6
#define ME    1 /* the receiving rank of the unpack test */
#define MAXS  16
#define MAXN  128
#define WORDS 1024

enum kind { DP, COPY, BLOCK };

struct fdesc {
    enum kind kind;
    int64_t rows;
    int nsh;
    int owner[W];
    int mean;
};

static const struct fdesc feats[F] = {
    {COPY, 5, 1, {2}, 0}, {COPY, 6, 2, {0, 1}, 1},     {BLOCK, 7, 3, {0, 1, 2}, 0},
    {DP, 4, 0, {0}, 1},   {BLOCK, 2, 3, {0, 1, 2}, 0}, {BLOCK, 9, 2, {1, 2}, 1},
};

struct plan {
    int S, num_dp, nslots[W];
    int64_t rows[F];
    int32_t first_slot[F], num_shards[F], mean[F], dp_feature[F], slot_at[W * MAXS];
    int64_t block[F], count_displ[W + 1];
    int slot_feature[MAXS], slot_shard[MAXS];
    int64_t work[512];
    struct sr_sparse_dist_layout l;
};

static void plan_init(struct plan *p, int me, int id_words)
{
    memset(p, 0, sizeof *p);
    for (int f = 0; f < F; f++) {
        const struct fdesc *d = &feats[f];
        p->rows[f] = f == 0 && id_words == 2 ? (int64_t)1 << 33 : d->rows;
        p->mean[f] = d->mean;
        if (d->kind == DP) {
            p->first_slot[f] = -1;
            p->dp_feature[p->num_dp++] = f;
            continue;
        }
        p->first_slot[f] = p->S;
        p->num_shards[f] = d->nsh;
        p->block[f] = d->kind == BLOCK ? (p->rows[f] + d->nsh - 1) / d->nsh : 0;
        for (int j = 0; j < d->nsh; j++, p->S++) {
            const int r = d->owner[j];
            p->slot_feature[p->S] = f;
            p->slot_shard[p->S] = j;
            p->slot_at[r * MAXS + p->nslots[r]++] = p->S;
        }
    }
    for (int r = 0; r < W; r++)
        p->count_displ[r + 1] = p->count_displ[r] + p->nslots[r] + 1;
    p->l = (struct sr_sparse_dist_layout){.num_features = F,
                                          .batch = B,
                                          .world = W,
                                          .num_slots = p->S,
                                          .max_nslots = MAXS,
                                          .nslots_here = p->nslots[me],
                                          .num_dp = p->num_dp,
                                          .id_words = id_words,
                                          .count_words = p->count_displ[W] + p->num_dp,
                                          .first_slot = p->first_slot,
                                          .num_shards = p->num_shards,
                                          .block = p->block,
                                          .mean = p->mean,
                                          .dp_feature = p->dp_feature,
                                          .slot_at = p->slot_at,
                                          .count_displ = p->count_displ,
                                          .work = p->work};
    assert_true(sr_sparse_dist_work_words(&p->l) <= (int64_t)(sizeof p->work / sizeof p->work[0]));
}

struct kjt {
    int32_t lengths[F * B];
    int64_t offsets[F * B + 1];
    int64_t values[MAXN];
    float weights[MAXN];
    int64_t n;
    int weighted;
    struct sr_sparse_dist_kjt view;
};

/* Lengths 0-3 (empty bags included); sample seed % B of every feature holds
 * the table's last row first. */
static void make_kjt(struct kjt *k, const struct plan *p, int seed, int weighted)
{
    memset(k, 0, sizeof *k);
    for (int f = 0; f < F; f++)
        for (int b = 0; b < B; b++) {
            const int len = (f + 2 * b + seed) % 4;
            k->lengths[f * B + b] = len;
            k->offsets[f * B + b + 1] = k->offsets[f * B + b] + len;
            for (int i = 0; i < len; i++, k->n++) {
                const int64_t r = p->rows[f];
                k->values[k->n] =
                    i == 0 && b == seed % B ? r - 1 : (f * 7 + b * 3 + i * 5 + seed) % r;
                k->weights[k->n] = 0.5f + 0.25f * (float)((k->n + seed) % 5);
            }
        }
    assert_true(k->n <= MAXN);
    k->weighted = weighted;
    k->view = (struct sr_sparse_dist_kjt){.lengths = k->lengths,
                                          .offsets = k->offsets,
                                          .values = k->values,
                                          .weights = weighted ? k->weights : NULL,
                                          .num_values = k->n};
}

/* Does id v of feature f go to slot sl, and as which row? */
static int routes_to(const struct plan *p, int f, int64_t v, int sl, int64_t *row)
{
    if (p->first_slot[f] < 0 || p->slot_feature[sl] != f)
        return 0;
    const int j = p->slot_shard[sl];
    if (p->block[f] == 0) {
        *row = v;
        return 1;
    }
    *row = v - j * p->block[f];
    return v / p->block[f] == j;
}

static struct sr_device *devices[2];

static int setup(void **state)
{
    devices[0] = sr_cpu_device();
    devices[1] = sr_cpu_deferred_device();
    return 0;
}

/* ---- references ------------------------------------------------------------------ */

static void ref_bucketize(const struct plan *p, const struct kjt *k, int64_t flags, int32_t *lens,
                          int64_t *counts)
{
    memset(lens, 0, sizeof(int32_t) * p->S * B);
    for (int sl = 0; sl < p->S; sl++) {
        const int f = p->slot_feature[sl];
        for (int b = 0; b < B; b++)
            for (int64_t i = k->offsets[f * B + b]; i < k->offsets[f * B + b + 1]; i++) {
                int64_t row;
                lens[sl * B + b] += routes_to(p, f, k->values[i], sl, &row);
            }
    }
    for (int r = 0; r < W; r++) {
        for (int q = 0; q < p->nslots[r]; q++) {
            int64_t n = 0;
            for (int b = 0; b < B; b++)
                n += lens[p->slot_at[r * MAXS + q] * B + b];
            counts[p->count_displ[r] + q] = n;
        }
        counts[p->count_displ[r] + p->nslots[r]] = flags;
    }
    for (int j = 0; j < p->num_dp; j++) {
        const int f = p->dp_feature[j];
        counts[p->count_displ[W] + j] = k->offsets[(f + 1) * B] - k->offsets[f * B];
    }
}

/* The data message to rank r, appended at msg[*at]. */
static void ref_region(const struct plan *p, const struct kjt *k, const int32_t *lens, int r,
                       int32_t *msg, int64_t *at)
{
    for (int q = 0; q < p->nslots[r]; q++)
        for (int b = 0; b < B; b++)
            msg[(*at)++] = lens[p->slot_at[r * MAXS + q] * B + b];
    for (int pass = 0; pass < 1 + k->weighted; pass++)
        for (int q = 0; q < p->nslots[r]; q++) {
            const int sl = p->slot_at[r * MAXS + q], f = p->slot_feature[sl];
            for (int64_t i = k->offsets[f * B]; i < k->offsets[(f + 1) * B]; i++) {
                int64_t row;
                if (!routes_to(p, f, k->values[i], sl, &row))
                    continue;
                if (pass == 1) {
                    memcpy(&msg[(*at)++], &k->weights[i], sizeof(float));
                    continue;
                }
                msg[(*at)++] = (int32_t)(uint32_t)row;
                if (p->l.id_words == 2)
                    msg[(*at)++] = (int32_t)(uint32_t)((uint64_t)row >> 32);
            }
        }
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_bucketize_and_pack(void **state)
{
    for (int d = 0; d < 2; d++)
        for (int id_words = 1; id_words <= 2; id_words++)
            for (int weighted = 0; weighted <= 1; weighted++) {
                struct sr_device *dev = devices[d];
                struct plan p;
                struct kjt k;
                plan_init(&p, 0, id_words);
                make_kjt(&k, &p, 1 + id_words + weighted, weighted);
                int32_t lens[MAXS * B], want_lens[MAXS * B], send[WORDS], want[WORDS];
                int64_t counts[64], want_counts[64];
                dev->sparse_dist->bucketize(dev, &p.l, &k.view, 5, lens, counts, NULL);
                sr_dev_sync(dev, NULL);
                ref_bucketize(&p, &k, 5, want_lens, want_counts);
                assert_memory_equal(lens, want_lens, sizeof(int32_t) * p.S * B);
                assert_memory_equal(counts, want_counts, sizeof(int64_t) * p.l.count_words);

                int64_t words = 0;
                for (int r = 0; r < W; r++)
                    ref_region(&p, &k, want_lens, r, want, &words);
                assert_true(words <= WORDS);
                int64_t dp_off[1 * B + 1], dp_val[MAXN];
                float dp_w[MAXN];
                const int64_t dp_n = want_counts[p.count_displ[W]];
                struct sr_sparse_dist_batch dp = {.num_features = 1,
                                                  .batch = B,
                                                  .offsets = dp_off,
                                                  .values = dp_val,
                                                  .weights = weighted ? dp_w : NULL,
                                                  .num_values = dp_n};
                memset(send, 0x5a, sizeof send);
                dev->sparse_dist->pack(dev, &p.l, &k.view, lens, counts, send, words, &dp, NULL);
                sr_dev_sync(dev, NULL);
                assert_memory_equal(send, want, sizeof(int32_t) * words);
                const int64_t lo = k.offsets[3 * B];
                for (int b = 0; b <= B; b++)
                    assert_int_equal(dp_off[b], k.offsets[3 * B + b] - lo);
                assert_memory_equal(dp_val, k.values + lo, sizeof(int64_t) * dp_n);
                if (weighted)
                    assert_memory_equal(dp_w, k.weights + lo, sizeof(float) * dp_n);
            }
}

static void test_bucketize_no_batch(void **state)
{
    for (int d = 0; d < 2; d++) {
        struct sr_device *dev = devices[d];
        struct plan p;
        plan_init(&p, 0, 1);
        int32_t lens[MAXS * B];
        int64_t counts[64];
        dev->sparse_dist->bucketize(dev, &p.l, NULL, SR_SPARSE_DIST_END, lens, counts, NULL);
        sr_dev_sync(dev, NULL);
        for (int i = 0; i < p.S * B; i++)
            assert_int_equal(lens[i], 0);
        for (int r = 0; r < W; r++)
            for (int q = 0; q <= p.nslots[r]; q++)
                assert_int_equal(counts[p.count_displ[r] + q],
                                 q == p.nslots[r] ? SR_SPARSE_DIST_END : 0);
        assert_int_equal(counts[p.count_displ[W]], 0);
    }
}

/* Every source's message to ME, as the data exchange would deliver it. */
static int64_t deliver(struct plan *src_plans, struct kjt *kjts, int32_t *recv,
                       int64_t *counts_recv)
{
    int64_t at = 0;
    for (int s = 0; s < W; s++) {
        struct plan *p = &src_plans[s];
        int32_t lens[MAXS * B];
        int64_t counts[64];
        ref_bucketize(p, &kjts[s], kjts[s].weighted ? SR_SPARSE_DIST_WEIGHTS : 0, lens, counts);
        for (int q = 0; q <= p->nslots[ME]; q++)
            counts_recv[s * (p->nslots[ME] + 1) + q] = counts[p->count_displ[ME] + q];
        ref_region(p, &kjts[s], lens, ME, recv, &at);
    }
    return at;
}

/* The naive local batch of my slots pos[] with source rows row_of[]. */
static void ref_unpack(const struct plan *p, const struct kjt *kjts, const int32_t *pos,
                       const int32_t *row_of, int nf, int64_t *off, int64_t *val, float *wt)
{
    int64_t n = 0;
    off[0] = 0;
    for (int j = 0; j < nf; j++) {
        const int sl = p->slot_at[ME * MAXS + pos[j]], f = p->slot_feature[sl];
        for (int row = 0; row < W * B; row++) {
            int s = 0;
            while (!(row >= row_of[s] && row < row_of[s] + B))
                s++;
            const struct kjt *k = &kjts[s];
            const int b = row - row_of[s];
            for (int64_t i = k->offsets[f * B + b]; i < k->offsets[f * B + b + 1]; i++) {
                int64_t r;
                if (!routes_to(p, f, k->values[i], sl, &r))
                    continue;
                val[n] = r;
                wt[n++] = k->weighted ? k->weights[i] : 1.0f;
            }
            off[j * W * B + row + 1] = n;
        }
    }
}

static void test_unpack(void **state)
{
    for (int d = 0; d < 2; d++)
        for (int id_words = 1; id_words <= 2; id_words++) {
            struct sr_device *dev = devices[d];
            struct plan src[W], p;
            struct kjt kjts[W];
            for (int s = 0; s < W; s++) {
                plan_init(&src[s], s, id_words);
                make_kjt(&kjts[s], &src[s], 7 * s + id_words, s != 0); /* rank 0: no weights */
            }
            plan_init(&p, ME, id_words);
            int32_t recv[WORDS];
            int64_t counts_recv[W * (MAXS + 1)];
            const int64_t words = deliver(src, kjts, recv, counts_recv);

            /* my slots: (f1 piece 1, f2 shard 1, f4 shard 1, f5 shard 0) in message order */
            const int n = p.nslots[ME];
            assert_int_equal(n, 4);
            const int32_t pos_a[] = {0}, pos_b[] = {3, 1, 2};
            const int32_t rows_a[W] = {0, B, 2 * B}, rows_b[W] = {2 * B, 0, B};
            int64_t off_a[1 * W * B + 1], off_b[3 * W * B + 1], val_a[MAXN], val_b[MAXN];
            float w_b[MAXN];
            int64_t want_off[3 * W * B + 1], want_val[MAXN];
            float want_w[MAXN];
            ref_unpack(&p, kjts, pos_a, rows_a, 1, want_off, want_val, want_w);
            const int64_t na = want_off[W * B];
            ref_unpack(&p, kjts, pos_b, rows_b, 3, want_off, want_val, want_w);
            const int64_t nb = want_off[3 * W * B];
            struct sr_sparse_dist_batch g[2] = {{.num_features = 1,
                                                 .batch = W * B,
                                                 .pos = pos_a,
                                                 .row_of = rows_a,
                                                 .offsets = off_a,
                                                 .values = val_a,
                                                 .weights = NULL,
                                                 .num_values = na},
                                                {.num_features = 3,
                                                 .batch = W * B,
                                                 .pos = pos_b,
                                                 .row_of = rows_b,
                                                 .offsets = off_b,
                                                 .values = val_b,
                                                 .weights = w_b,
                                                 .num_values = nb}};
            dev->sparse_dist->unpack(dev, &p.l, recv, words, counts_recv, g, 2, NULL);
            sr_dev_sync(dev, NULL);
            assert_memory_equal(off_b, want_off, sizeof(int64_t) * (3 * W * B + 1));
            assert_memory_equal(val_b, want_val, sizeof(int64_t) * nb);
            assert_memory_equal(w_b, want_w, sizeof(float) * nb);
            ref_unpack(&p, kjts, pos_a, rows_a, 1, want_off, want_val, want_w);
            assert_memory_equal(off_a, want_off, sizeof(int64_t) * (W * B + 1));
            assert_memory_equal(val_a, want_val, sizeof(int64_t) * na);
        }
}

static void test_mean_scales(void **state)
{
    for (int d = 0; d < 2; d++) {
        struct sr_device *dev = devices[d];
        struct plan p;
        struct kjt k;
        plan_init(&p, 0, 1);
        make_kjt(&k, &p, 1, 0); /* f1 (mean) has an empty bag at sample 1 */
        float scale[F * B];
        dev->sparse_dist->mean_scales(dev, &p.l, k.lengths, scale, NULL);
        sr_dev_sync(dev, NULL);
        int empty_mean = 0;
        for (int f = 0; f < F; f++)
            for (int b = 0; b < B; b++) {
                const int len = k.lengths[f * B + b];
                empty_mean += feats[f].mean && len == 0;
                const float want = feats[f].mean && len > 0 ? 1.0f / (float)len : 1.0f;
                assert_memory_equal(&scale[f * B + b], &want, sizeof want);
            }
        assert_true(empty_mean > 0);
    }
}

/* pooled (B, 10): f0 4 columns, f1 4 (two pieces of 2), f2 2; buf: a (B, 6)
 * block at 0 and a (B, 4) block at 18. */
#define OUT 10
static const struct sr_sparse_dist_piece pieces[] = {
    {.block = 0, .width = 6, .gcol = 2, .fcol = 0, .cols = 4, .feature = 0},
    {.block = 0, .width = 6, .gcol = 0, .fcol = 4, .cols = 2, .feature = 1},
    {.block = 18, .width = 4, .gcol = 2, .fcol = 6, .cols = 2, .feature = 1},
    {.block = 18, .width = 4, .gcol = 0, .fcol = 8, .cols = 2, .feature = 2},
};
#define NP    4
#define BUF_N 30

static void test_pooled_scatter_gather(void **state)
{
    const struct sr_sparse_dist_cols m = {.num_pieces = NP,
                                          .pieces = pieces,
                                          .batch = B,
                                          .out_dim = OUT,
                                          .num_features = 3,
                                          .buf_floats = BUF_N};
    const float scale[3 * B] = {1.0f, 0.5f, 1.0f, 1.0f / 3.0f, 1.0f, 0.25f, 1.0f, 1.0f, 0.5f};
    float buf[BUF_N], dpooled[B * OUT];
    for (int i = 0; i < BUF_N; i++)
        buf[i] = 0.1f * (float)i - 1.3f;
    for (int i = 0; i < B * OUT; i++)
        dpooled[i] = 0.07f * (float)(i * i % 17) - 0.4f;
    float want_pooled[B * OUT], want_buf[BUF_N];
    for (int q = 0; q < NP; q++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < pieces[q].cols; c++) {
                const int64_t bi = pieces[q].block + b * pieces[q].width + pieces[q].gcol + c;
                const int pi = b * OUT + pieces[q].fcol + c;
                const float k = scale[pieces[q].feature * B + b];
                want_pooled[pi] = buf[bi] * k;
                want_buf[bi] = dpooled[pi] * k;
            }
    for (int d = 0; d < 2; d++) {
        struct sr_device *dev = devices[d];
        float pooled[B * OUT], got[BUF_N];
        memset(pooled, 0, sizeof pooled);
        dev->sparse_dist->pooled_scatter(dev, &m, buf, scale, pooled, NULL);
        sr_dev_sync(dev, NULL);
        assert_memory_equal(pooled, want_pooled, sizeof pooled);
        dev->sparse_dist->pooled_gather(dev, &m, dpooled, scale, got, NULL);
        sr_dev_sync(dev, NULL);
        assert_memory_equal(got, want_buf, sizeof got);
    }
}

/* The deferred device holds the ops to the stream contract: no result before
 * the wait. */
static void test_deferred_needs_wait(void **state)
{
    struct sr_device *dev = devices[1];
    struct plan p;
    struct kjt k;
    plan_init(&p, 0, 1);
    make_kjt(&k, &p, 0, 0);
    int32_t lens[MAXS * B];
    int64_t counts[64];
    dev->sparse_dist->bucketize(dev, &p.l, &k.view, 0, lens, counts, NULL);
    assert_int_equal(counts[0], -1); /* poisoned: the deliberately missing wait */
    sr_dev_sync(dev, NULL);
    assert_true(counts[0] >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucketize_and_pack),
        cmocka_unit_test(test_bucketize_no_batch),
        cmocka_unit_test(test_unpack),
        cmocka_unit_test(test_mean_scales),
        cmocka_unit_test(test_pooled_scatter_gather),
        cmocka_unit_test(test_deferred_needs_wait),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
