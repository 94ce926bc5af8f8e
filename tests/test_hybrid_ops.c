/*
 * The device ops of hybrid tables (device/ops_sparse_dist.h): hybrid_split,
 * rows_copy, and pooled_scatter / pooled_gather with a hot piece added to a
 * cold one, against naive references written here, on the immediate,
 * deferred and opaque CPU devices (data moved in and out with sr_dev_copy
 * and a sync, as code above device/ must).
 *
 * The KJT of the split: B = 4, four features over three tables,
 *
 *   f0  table A (12 rows), hot rows 2 5 9   bags: all hot, all cold, mixed, empty
 *   f1  a plain table                       copied as it is
 *   f2  table C (3 rows), every row hot     every id hot (H = E)
 *   f3  table A again                       the same hot rows, other bags
 *
 * with per-id weights (and once without).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_sparse_dist.h"

#define B  4
#define F  4
#define FH 3 /* hot features: of f0, f2, f3 */
#define N  25

static struct sr_device *devices[3];

static void *put(struct sr_device *dev, const void *host, size_t bytes)
{
    void *d = sr_dev_alloc(dev, bytes ? bytes : 1);
    sr_dev_copy(dev, d, host, bytes, NULL);
    sr_dev_sync(dev, NULL);
    return d;
}

static void get(struct sr_device *dev, void *host, const void *d, size_t bytes)
{
    sr_dev_copy(dev, host, d, bytes, NULL);
    sr_dev_sync(dev, NULL);
}

/* ---- the split ------------------------------------------------------------------- */

static const int32_t lengths[F * B] = {2, 2, 4, 0,         /* f0: hot, cold, mixed, empty */
                                       1, 3, 0, 2,         /* f1 */
                                       3, 0, 1, 1,         /* f2: all hot */
                                       0, 1, 2, 3};        /* f3 */
static const int64_t values[N] = {2, 5, 1, 3,  5, 1, 9, 7, /* f0 */
                                  4, 6, 6, 0,  3, 3,       /* f1 */
                                  2, 0, 1, 1,  2,          /* f2 */
                                  9, 0, 2, 11, 5, 5};      /* f3 */
static const int64_t hot_a[3] = {2, 5, 9}, hot_c[3] = {0, 1, 2};
static const int feature_table[F] = {0, 1, 2, 0}; /* 0: A, 1: plain, 2: C */

static int hot_index(int f, int64_t v)
{
    const int t = feature_table[f];
    const int64_t *h = t == 0 ? hot_a : t == 2 ? hot_c : NULL;
    for (int i = 0; h && i < 3; i++)
        if (h[i] == v)
            return i;
    return -1;
}

/* The split KJT by hand: cold ids keep their place, hot ones go to F + k. */
static void reference(const float *w, int32_t *len, int32_t *full, int64_t *off, int64_t *val,
                      float *wt)
{
    static const int hk[F] = {0, -1, 1, 2};
    int64_t at[F + FH][B][8], cnt[F + FH][B];
    float wat[F + FH][B][8];
    memset(cnt, 0, sizeof cnt);
    int64_t i = 0;
    for (int f = 0; f < F; f++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < lengths[f * B + b]; j++, i++) {
                const int h = hot_index(f, values[i]);
                const int g = h >= 0 ? F + hk[f] : f;
                wat[g][b][cnt[g][b]] = w ? w[i] : 0;
                at[g][b][cnt[g][b]++] = h >= 0 ? h : values[i];
            }
    off[0] = 0;
    int64_t n = 0;
    for (int g = 0; g < F + FH; g++)
        for (int b = 0; b < B; b++) {
            len[g * B + b] = (int32_t)cnt[g][b];
            const int src = g < F ? g : (g == F ? 0 : g == F + 1 ? 2 : 3);
            full[g * B + b] = lengths[src * B + b];
            for (int j = 0; j < cnt[g][b]; j++, n++) {
                val[n] = at[g][b][j];
                wt[n] = wat[g][b][j];
            }
            off[g * B + b + 1] = n;
        }
}

static void split_on(struct sr_device *dev, int weighted)
{
    int64_t offsets[F * B + 1] = {0};
    for (int i = 0; i < F * B; i++)
        offsets[i + 1] = offsets[i] + lengths[i];
    float w[N];
    for (int i = 0; i < N; i++)
        w[i] = 0.25f * (float)(i + 1);
    const int32_t hot_of[F] = {0, -1, 1, 2}, feature[FH] = {0, 2, 3};
    const int64_t begin[FH] = {0, 3, 0}, num[FH] = {3, 3, 3}, hot[6] = {2, 5, 9, 0, 1, 2};
    struct sr_sparse_dist_hybrid h = {.num_features = F,
                                      .batch = B,
                                      .num_hot_features = FH,
                                      .hot_of = put(dev, hot_of, sizeof hot_of),
                                      .feature = put(dev, feature, sizeof feature),
                                      .hot_begin = put(dev, begin, sizeof begin),
                                      .num_hot = put(dev, num, sizeof num),
                                      .hot = put(dev, hot, sizeof hot),
                                      .hot_words = 6};
    struct sr_sparse_dist_kjt in = {.lengths = put(dev, lengths, sizeof lengths),
                                    .offsets = put(dev, offsets, sizeof offsets),
                                    .values = put(dev, values, sizeof values),
                                    .weights = weighted ? put(dev, w, sizeof w) : NULL,
                                    .num_values = N};
    const size_t bags = (size_t)(F + FH) * B;
    int32_t *d_len = sr_dev_alloc(dev, 4 * bags), *d_full = sr_dev_alloc(dev, 4 * bags);
    int64_t *d_off = sr_dev_alloc(dev, 8 * (bags + 1)), *d_val = sr_dev_alloc(dev, 8 * N);
    float *d_w = sr_dev_alloc(dev, 4 * N);
    sr_op_sparse_dist_hybrid_split(dev, &h, &in, d_len, d_full, d_off, d_val, weighted ? d_w : NULL,
                                   NULL);
    int32_t len[(F + FH) * B], full[(F + FH) * B], want_len[(F + FH) * B], want_full[(F + FH) * B];
    int64_t off[(F + FH) * B + 1], val[N], want_off[(F + FH) * B + 1], want_val[N];
    float wt[N], want_wt[N];
    reference(weighted ? w : NULL, want_len, want_full, want_off, want_val, want_wt);
    get(dev, len, d_len, sizeof len);
    get(dev, full, d_full, sizeof full);
    get(dev, off, d_off, sizeof off);
    get(dev, val, d_val, sizeof val);
    assert_memory_equal(len, want_len, sizeof len);
    assert_memory_equal(full, want_full, sizeof full);
    assert_memory_equal(off, want_off, sizeof off);
    assert_memory_equal(val, want_val, sizeof val);
    if (weighted) {
        get(dev, wt, d_w, sizeof wt);
        assert_memory_equal(wt, want_wt, sizeof wt);
    }
    /* the cases are there: f0's bags all hot, all cold, mixed, empty */
    assert_int_equal(want_len[0 * B + 0], 0), assert_int_equal(want_len[F * B + 0], 2);
    assert_int_equal(want_len[0 * B + 1], 2), assert_int_equal(want_len[F * B + 1], 0);
    assert_int_equal(want_len[0 * B + 2], 2), assert_int_equal(want_len[F * B + 2], 2);
    assert_int_equal(want_full[F * B + 3], 0);
    void *all[] = {(void *)h.hot_of,
                   (void *)h.feature,
                   (void *)h.hot_begin,
                   (void *)h.num_hot,
                   (void *)h.hot,
                   (void *)in.lengths,
                   (void *)in.offsets,
                   (void *)in.values,
                   (void *)in.weights,
                   d_len,
                   d_full,
                   d_off,
                   d_val,
                   d_w};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sr_dev_free(dev, all[i]);
}

static void test_split(void **state)
{
    for (int d = 0; d < 3; d++) {
        split_on(devices[d], 1);
        split_on(devices[d], 0);
    }
}

/* ---- rows_copy ------------------------------------------------------------------------ */

static void test_rows_copy(void **state)
{
    const int64_t idx[3] = {4, 0, 2};
    float table[5 * 2], rows[3 * 2];
    for (int i = 0; i < 10; i++)
        table[i] = (float)i;
    for (int i = 0; i < 6; i++)
        rows[i] = 100.0f + (float)i;
    for (int d = 0; d < 3; d++) {
        struct sr_device *dev = devices[d];
        int64_t *d_idx = put(dev, idx, sizeof idx);
        float *d_table = put(dev, table, sizeof table), *d_rows = put(dev, rows, sizeof rows);
        float got[10], want[10];
        /* gather: rows k = table rows idx[k] */
        sr_op_sparse_dist_rows_copy(dev, 0, d_idx, 3, 2, d_table, 5, d_rows, 3, NULL);
        get(dev, got, d_rows, sizeof rows);
        const float g[6] = {8, 9, 0, 1, 4, 5};
        assert_memory_equal(got, g, sizeof g);
        /* scatter back, shifted: table rows idx[k] = rows k + 1; the others kept */
        for (int i = 0; i < 6; i++)
            got[i] += 1;
        sr_dev_copy(dev, d_rows, got, sizeof rows, NULL);
        sr_op_sparse_dist_rows_copy(dev, 1, d_idx, 3, 2, d_rows, 3, d_table, 5, NULL);
        get(dev, got, d_table, sizeof table);
        memcpy(want, table, sizeof want);
        want[8] = 9, want[9] = 10, want[0] = 1, want[1] = 2, want[4] = 5, want[5] = 6;
        assert_memory_equal(got, want, sizeof want);
        sr_dev_free(dev, d_idx), sr_dev_free(dev, d_table), sr_dev_free(dev, d_rows);
    }
}

/* ---- pooled columns of a hybrid feature ----------------------------------------------- */

static void test_pooled_hot_plus_cold(void **state)
{
    /* buf: [ hot block (B, 2) | cold block (B, 2) ]; the feature: pooled columns 0, 1 */
    const struct sr_sparse_dist_piece pieces[2] = {
        {.block = 0,
         .width = 2,
         .gcol = 0,
         .fcol = 0,
         .cols = 2,
         .feature = 1,
         .add = SR_PIECE_ADDED},
        {.block = 2 * B, .width = 2, .gcol = 0, .fcol = 0, .cols = 2, .feature = 0, .add = 1}};
    enum { OUT = 2, BUFN = 4 * B };
    float buf[BUFN], scale[2 * B], dpooled[B * OUT];
    for (int i = 0; i < BUFN; i++)
        buf[i] = 0.3f * (float)i - 2.0f;
    for (int i = 0; i < 2 * B; i++)
        scale[i] = i < B ? 1.0f / (float)(i + 1) : 7.0f; /* the hot feature's is not read */
    for (int i = 0; i < B * OUT; i++)
        dpooled[i] = 0.5f * (float)i - 1.0f;
    float want_pooled[B * OUT], want_buf[BUFN];
    memset(want_pooled, 0, sizeof want_pooled);
    memset(want_buf, 0, sizeof want_buf);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 2; c++) {
            const float k = scale[b], hot = buf[b * 2 + c], cold = buf[2 * B + b * 2 + c];
            want_pooled[b * OUT + c] = (cold + hot) * k;
            want_buf[b * 2 + c] = dpooled[b * OUT + c] * scale[B + b];
            want_buf[2 * B + b * 2 + c] = dpooled[b * OUT + c] * k;
        }
    for (int d = 0; d < 3; d++) {
        struct sr_device *dev = devices[d];
        const struct sr_sparse_dist_cols m = {.num_pieces = 2,
                                              .pieces = put(dev, pieces, sizeof pieces),
                                              .batch = B,
                                              .out_dim = OUT,
                                              .num_features = 2,
                                              .buf_floats = BUFN};
        float *d_buf = put(dev, buf, sizeof buf), *d_scale = put(dev, scale, sizeof scale);
        float zeros[BUFN] = {0};
        float *d_pooled = put(dev, zeros, sizeof(float) * B * OUT);
        float *d_dp = put(dev, dpooled, sizeof dpooled), *d_out = put(dev, zeros, sizeof zeros);
        float got[BUFN];
        sr_op_sparse_dist_pooled_scatter(dev, &m, d_buf, d_scale, d_pooled, NULL);
        get(dev, got, d_pooled, sizeof(float) * B * OUT);
        assert_memory_equal(got, want_pooled, sizeof want_pooled);
        sr_op_sparse_dist_pooled_gather(dev, &m, d_dp, d_scale, d_out, NULL);
        get(dev, got, d_out, sizeof got);
        assert_memory_equal(got, want_buf, sizeof want_buf);
        void *all[] = {(void *)m.pieces, d_buf, d_scale, d_pooled, d_dp, d_out};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            sr_dev_free(dev, all[i]);
    }
}

int main(void)
{
    devices[0] = sr_cpu_device();
    devices[1] = sr_cpu_deferred_device();
    devices[2] = sr_cpu_opaque_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_rows_copy),
        cmocka_unit_test(test_pooled_hot_plus_cold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
