/*
 * Tables stored in 16 bits (--emb-dtype; device/ops_embedding.h "Table
 * storage"), against references written here:
 *
 *   - the roundings of core/half_bits.h: nearest equals half.h's; stochastic
 *     gives one of the two neighbours, always, is unbiased (the mean of many
 *     draws within 4 standard errors of the value), and rounds a value the
 *     16 bits hold exactly to itself;
 *   - an EBC of bf16 and of fp16 tables on the CPU: its initial weights are
 *     the fp32 EBC's (same seed) rounded to nearest; its forward equals a
 *     float64 sum of the widened weights; one SGD step (each row touched by
 *     one id, so its gradient is exact) stores, per element, the narrowing
 *     of the fp32 update: to nearest, or stochastically with the bits of
 *     (seed, step, table stream, element); untouched rows keep their bits;
 *     and a rerun gives the same bits.
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

#include "shardrec/device.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/rng.h"
#include "core/half_bits.h"
#include "device/emb_storage.h"

#define E 64  /* rows */
#define D 8   /* dim */
#define B 16  /* samples, one id each: rows 3, 7, 11, ... (each row at most once) */

/* ---- the roundings ------------------------------------------------------------- */

static float widen(uint16_t h, int bf16)
{
    return bf16 ? sr_hb_from_bf16(h) : sr_hb_from_fp16(h);
}

static uint16_t narrow(float x, int bf16, int stochastic, uint32_t r)
{
    return bf16 ? sr_hb_to_bf16(x, stochastic, r) : sr_hb_to_fp16(x, stochastic, r);
}

static void test_nearest_is_half_h(void **state)
{
    (void)state;
    for (uint64_t i = 0; i < 200000; i++) {
        float x = (float)((sr_rng_uniform(1, 2, i) - 0.5) * ldexp(1.0, (int)(i % 40) - 20));
        assert_int_equal(sr_hb_to_bf16(x, 0, 0), sr_fp32_to_bf16(x));
        assert_int_equal(sr_hb_to_fp16(x, 0, 0), sr_fp32_to_fp16(x));
    }
}

static void check_stochastic(float x, int bf16)
{
    const uint16_t lo = narrow(x, bf16, 1, 0);          /* r = 0: toward zero */
    const uint16_t hi = narrow(x, bf16, 1, 0xffffffffu); /* r all ones: away, if inexact */
    const double a = widen(lo, bf16), b = widen(hi, bf16);
    assert_true(fabs(a) <= fabs(x) && fabs(x) <= fabs(b));
    double sum = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        uint16_t h = narrow(x, bf16, 1, (uint32_t)sr_rng_u64(7, 11, (uint64_t)i));
        assert_true(h == lo || h == hi);
        sum += widen(h, bf16);
    }
    const double mean = sum / n, gap = fabs(b - a);
    const double p = gap > 0 ? fabs(x - a) / gap : 0, se = gap * sqrt(p * (1 - p) / n);
    if (fabs(mean - x) > 4 * se + 1e-12 * fabs(x))
        fail_msg("%s stochastic rounding of %.9g is biased: mean %.9g, 4 standard errors %.3g",
                 bf16 ? "bf16" : "fp16", (double)x, mean, 4 * se);
}

static void test_stochastic_unbiased(void **state)
{
    (void)state;
    const float xs[] = {1.0f + 0.3f / 128, -0.0123456f, 3.14159f, 1e-3f, -777.77f, 0.1f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        check_stochastic(xs[i], 1);
        check_stochastic(xs[i], 0);
    }
    /* a value the 16 bits hold stays itself whatever r is */
    for (uint32_t r = 0; r < 1000; r++) {
        assert_int_equal(sr_hb_to_bf16(1.5f, 1, r * 2654435761u), sr_fp32_to_bf16(1.5f));
        assert_int_equal(sr_hb_to_fp16(-0.25f, 1, r * 2654435761u), sr_fp32_to_fp16(-0.25f));
    }
}

/* ---- an EBC of 16-bit tables ---------------------------------------------------- */

struct fixture {
    struct sr_table_config table;
    char name[1][SR_NAME_MAX];
    int feature_table[1];
    struct sr_ebc_config cfg;
};

static struct sr_ebc *make(struct fixture *x, enum sr_dtype dtype, int stochastic)
{
    memset(x, 0, sizeof *x);
    snprintf(x->table.name, sizeof x->table.name, "t");
    x->table.num_embeddings = E;
    x->table.embedding_dim = D;
    x->table.storage = dtype;
    snprintf(x->name[0], SR_NAME_MAX, "f");
    x->cfg = (struct sr_ebc_config){1, &x->table, 1, x->name, x->feature_table, stochastic};
    struct sr_optim_config o = sr_optim_config_default(SR_OPTIM_SGD);
    struct sr_ebc *ebc = NULL;
    if (sr_ebc_init(&ebc, sr_device_cpu(), &x->cfg, &o, B, B, 99) != SR_OK)
        fail_msg("sr_ebc_init: %s", sr_error_message());
    return ebc;
}

/* The table's weights widened to fp32 (host), whatever its storage. */
static void weights_of(struct sr_ebc *ebc, enum sr_dtype dtype, float *out)
{
    struct sr_device *dev = sr_device_cpu();
    uint16_t raw[E * D];
    sr_dev_sync(dev, NULL);
    if (dtype == SR_DTYPE_F32) {
        sr_dev_copy(dev, out, sr_ebc_weights(ebc, 0), sizeof(float) * E * D, NULL);
    } else {
        sr_dev_copy(dev, raw, sr_ebc_weights(ebc, 0), sizeof raw, NULL);
        sr_dev_sync(dev, NULL);
        for (int i = 0; i < E * D; i++)
            out[i] = widen(raw[i], dtype == SR_DTYPE_BF16);
    }
    sr_dev_sync(dev, NULL);
}

static void batch(struct sr_kjt *k, int32_t *lengths, int64_t *offsets, int64_t *values)
{
    for (int b = 0; b < B; b++)
        lengths[b] = 1, values[b] = 3 + 4 * b;
    *k = (struct sr_kjt){.num_keys = 1, .stride = B, .lengths = lengths, .offsets = offsets,
                         .values = values, .num_values = B};
    assert_int_equal(sr_kjt_compute_offsets(k), SR_OK);
}

/* One forward and one SGD step at lr on a 16-bit EBC; checks as above. */
static void check_step(enum sr_dtype dtype, int stochastic)
{
    struct sr_device *dev = sr_device_cpu();
    const int bf16 = dtype == SR_DTYPE_BF16;
    const float lr = 0.05f;
    struct fixture x, y, z;
    struct sr_ebc *ebc = make(&x, dtype, stochastic), *ref = make(&y, SR_DTYPE_F32, 0);
    float w0[E * D], w32[E * D], w1[E * D], pooled[B * D], dpooled[B * D];
    weights_of(ebc, dtype, w0);
    weights_of(ref, SR_DTYPE_F32, w32);
    for (int i = 0; i < E * D; i++) /* initial weights: the fp32 draws rounded to nearest */
        if (w0[i] != widen(narrow(w32[i], bf16, 0, 0), bf16))
            fail_msg("initial weight %d: %.9g, the fp32 draw %.9g rounds to %.9g", i,
                     (double)w0[i], (double)w32[i], (double)widen(narrow(w32[i], bf16, 0, 0), bf16));

    int32_t lengths[B];
    int64_t offsets[B + 1], values[B];
    struct sr_kjt k;
    batch(&k, lengths, offsets, values);
    float *pd = sr_dev_alloc(dev, sizeof pooled), *gd = sr_dev_alloc(dev, sizeof dpooled);
    assert_int_equal(sr_ebc_forward(ebc, &k, pd, NULL), SR_OK);
    sr_dev_copy(dev, pooled, pd, sizeof pooled, NULL);
    sr_dev_sync(dev, NULL);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < D; c++)
            assert_true(fabs(pooled[b * D + c] - (double)w0[values[b] * D + c]) == 0);

    for (int i = 0; i < B * D; i++)
        dpooled[i] = (float)(sr_rng_uniform(5, 6, (uint64_t)i) - 0.5);
    sr_dev_copy(dev, gd, dpooled, sizeof dpooled, NULL);
    sr_ebc_backward(ebc, gd, lr, 3, NULL);
    weights_of(ebc, dtype, w1);
    const uint64_t stream = sr_rng_stream_of("emb.t.weight");
    int moved = 0;
    for (int r = 0; r < E; r++) {
        int b = (r - 3) % 4 == 0 && r >= 3 && (r - 3) / 4 < B ? (r - 3) / 4 : -1;
        for (int c = 0; c < D; c++) {
            const int i = r * D + c;
            if (b < 0) {
                assert_true(w1[i] == w0[i]); /* untouched */
                continue;
            }
            const float upd = w0[i] - lr * dpooled[b * D + c];
            const uint32_t bits = sr_emb_round_bits(99, 3, stream, i);
            const float want = widen(narrow(upd, bf16, stochastic, bits), bf16);
            if (w1[i] != want)
                fail_msg("%s %s: row %d col %d holds %.9g, want %.9g (fp32 update %.9g)",
                         bf16 ? "bf16" : "fp16", stochastic ? "stochastic" : "nearest", r, c,
                         (double)w1[i], (double)want, (double)upd);
            moved += w1[i] != w0[i];
        }
    }
    assert_true(moved > B * D / 2); /* the step is visible in 16 bits */

    /* a rerun stores the same bits */
    struct sr_ebc *again = make(&z, dtype, stochastic);
    assert_int_equal(sr_ebc_forward(again, &k, pd, NULL), SR_OK);
    sr_ebc_backward(again, gd, lr, 3, NULL);
    float w2[E * D];
    weights_of(again, dtype, w2);
    assert_memory_equal(w1, w2, sizeof w1);
    sr_dev_free(dev, pd);
    sr_dev_free(dev, gd);
    sr_ebc_free(ebc);
    sr_ebc_free(ref);
    sr_ebc_free(again);
}

static void test_bf16_nearest(void **state)
{
    (void)state;
    check_step(SR_DTYPE_BF16, 0);
}

static void test_bf16_stochastic(void **state)
{
    (void)state;
    check_step(SR_DTYPE_BF16, 1);
}

static void test_fp16_nearest(void **state)
{
    (void)state;
    check_step(SR_DTYPE_F16, 0);
}

static void test_fp16_stochastic(void **state)
{
    (void)state;
    check_step(SR_DTYPE_F16, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_is_half_h),  cmocka_unit_test(test_stochastic_unbiased),
        cmocka_unit_test(test_bf16_nearest),       cmocka_unit_test(test_bf16_stochastic),
        cmocka_unit_test(test_fp16_nearest),       cmocka_unit_test(test_fp16_stochastic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
