/*
 * The cast ops (device/ops_cast.h) on the immediate CPU device and on the
 * deferred one, against core/half.c's scalar conversions (themselves checked
 * against an independent reference in test_half.c):
 *
 *   - pack of special values (NaN with payloads and signs, ±inf, ±0, fp32
 *     subnormals, fp16 subnormals and the overflow edge, rounding ties of
 *     both formats) and of a dense sweep of fp32 bit patterns, large enough
 *     for the threaded path, gives the scalar codes bit for bit;
 *   - unpack of every 16-bit code gives the scalar widening bit for bit;
 *   - unpack_add sums segments that share a destination in list order;
 *   - fp32 segments move and add bits exactly, also at 2-byte alignment;
 *   - several segments in one call equal one call per segment;
 *   - on the deferred device outputs read as 0xFF until the stream is
 *     synchronised, and the segment list may be reused once a call returns.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "shardrec/half.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_cast.h"

#define N_SWEEP 100003 /* above the ops' threading threshold */

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint16_t narrow(enum sr_dtype d, float x)
{
    return d == SR_DTYPE_F16 ? sr_fp32_to_fp16(x) : sr_fp32_to_bf16(x);
}

static float widen(enum sr_dtype d, uint16_t h)
{
    return d == SR_DTYPE_F16 ? sr_fp16_to_fp32(h) : sr_bf16_to_fp32(h);
}

static const uint32_t specials[] = {
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f802000u, /* NaN */
    0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,                           /* inf, 0 */
    0x00000001u, 0x807fffffu, 0x00400000u,              /* fp32 subnormals */
    0x33800000u, 0x33000000u, 0x33000001u, 0x387fc000u, /* fp16: 2^-24, tie to 0, sub */
    0x387fe000u, 0x38800000u, 0xb87fe000u,              /* tie carrying to 2^-14 */
    0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, /* 65504, below / at 65520 */
    0x3f808000u, 0x3f818000u, 0xbf818000u, 0x7f7fffffu, /* bf16 ties, FLT_MAX */
    0x3f800000u, 0x3eaaaaabu, 0xc2f6e979u,
};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

/* Specials first, then fp32 bit patterns on an odd stride over all 2^32. */
static float *inputs(size_t n)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        x[i] = i < N_SPECIALS ? float_of(specials[i])
                              : float_of((uint32_t)((uint64_t)i * 42949u + 12345u));
    return x;
}

static struct sr_device *device_of(void **state)
{
    return *state ? sr_cpu_deferred_device() : sr_cpu_device();
}

static int deferred(void **state)
{
    return *state != NULL;
}

static void check_pack(struct sr_device *dev, int is_deferred, enum sr_dtype d)
{
    float *x = inputs(N_SWEEP);
    uint16_t *h = malloc(sizeof(uint16_t) * N_SWEEP);
    /* three segments in one call: [0, 10), [10, 50000), [50000, N) */
    const struct sr_cast_seg segs[3] = {
        {x, h, 10, d}, {x + 10, h + 10, 49990, d}, {x + 50000, h + 50000, N_SWEEP - 50000, d}};
    dev->cast->pack(dev, segs, 3, NULL);
    if (is_deferred)
        assert_int_equal(h[0], 0xffff); /* not run before the sync */
    sr_dev_sync(dev, NULL);
    long bad = 0;
    for (size_t i = 0; i < N_SWEEP; i++)
        bad += h[i] != narrow(d, x[i]);
    assert_int_equal(bad, 0);
    free(x), free(h);
}

static void test_pack_fp16(void **state)
{
    check_pack(device_of(state), deferred(state), SR_DTYPE_F16);
}

static void test_pack_bf16(void **state)
{
    check_pack(device_of(state), deferred(state), SR_DTYPE_BF16);
}

static void check_unpack(struct sr_device *dev, int is_deferred, enum sr_dtype d)
{
    const size_t n = 0x10000;
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    float *y = malloc(sizeof(float) * n);
    for (size_t c = 0; c < n; c++)
        h[c] = (uint16_t)c;
    struct sr_cast_seg seg = {h, y, n, d};
    dev->cast->unpack(dev, &seg, 1, NULL);
    seg.n = 0; /* the op copied the list */
    if (is_deferred)
        assert_int_equal(bits_of(y[0]), 0xffffffffu);
    sr_dev_sync(dev, NULL);
    long bad = 0;
    for (size_t c = 0; c < n; c++)
        bad += bits_of(y[c]) != bits_of(widen(d, (uint16_t)c));
    assert_int_equal(bad, 0);
    free(h), free(y);
}

static void test_unpack_fp16(void **state)
{
    check_unpack(device_of(state), deferred(state), SR_DTYPE_F16);
}

static void test_unpack_bf16(void **state)
{
    check_unpack(device_of(state), deferred(state), SR_DTYPE_BF16);
}

/* acc = 0; acc += a; acc += b (fp32 at 2-byte alignment); acc += c: one call. */
static void check_unpack_add(struct sr_device *dev, enum sr_dtype d)
{
    const size_t n = N_SWEEP;
    float *x = inputs(n), *acc = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n);
    uint16_t *a = malloc(sizeof(uint16_t) * n), *c = malloc(sizeof(uint16_t) * n);
    uint16_t *b = malloc(sizeof(uint16_t) * (2 * n + 1)); /* fp32 bits at offset 1 */
    for (size_t i = 0; i < n; i++) {
        a[i] = narrow(d, x[i] * 0.5f);
        c[i] = narrow(d, -x[n - 1 - i]);
        const float v = x[(i * 7) % n] * 3.0f;
        memcpy(b + 1 + 2 * i, &v, sizeof v);
        want[i] = ((0.0f + widen(d, a[i])) + v) + widen(d, c[i]);
    }
    memset(acc, 0, sizeof(float) * n);
    const struct sr_cast_seg segs[3] = {
        {a, acc, n, d}, {b + 1, acc, n, SR_DTYPE_F32}, {c, acc, n, d}};
    dev->cast->unpack_add(dev, segs, 3, NULL);
    sr_dev_sync(dev, NULL);
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += bits_of(acc[i]) != bits_of(want[i]) && !(isnan(acc[i]) && isnan(want[i]));
    assert_int_equal(bad, 0);
    free(x), free(acc), free(want), free(a), free(b), free(c);
}

static void test_unpack_add_fp16(void **state)
{
    check_unpack_add(device_of(state), SR_DTYPE_F16);
}

static void test_unpack_add_bf16(void **state)
{
    check_unpack_add(device_of(state), SR_DTYPE_BF16);
}

/* fp32 segments: bit-exact moves to and from 2-byte-aligned wire positions,
 * NaN payloads and signed zeros included; mixed with a 16-bit segment. */
static void test_f32_segments_exact(void **state)
{
    struct sr_device *dev = device_of(state);
    enum { n = N_SPECIALS };
    float x[n], y[n], z[n];
    uint16_t wire[2 * n + 1 + n];
    for (size_t i = 0; i < n; i++)
        x[i] = float_of(specials[i]);
    const struct sr_cast_seg pack[2] = {{x, wire + 1, n, SR_DTYPE_F32},
                                        {x, wire + 1 + 2 * n, n, SR_DTYPE_BF16}};
    dev->cast->pack(dev, pack, 2, NULL);
    const struct sr_cast_seg unpack[2] = {{wire + 1, y, n, SR_DTYPE_F32},
                                          {wire + 1 + 2 * n, z, n, SR_DTYPE_BF16}};
    dev->cast->unpack(dev, unpack, 2, NULL);
    sr_dev_sync(dev, NULL);
    assert_memory_equal(x, y, sizeof x);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(bits_of(z[i]), bits_of(sr_bf16_to_fp32(sr_fp32_to_bf16(x[i]))));
}

/* The deferred device keeps bytes it must not poison: a destination summed
 * into from several segments is saved once, so earlier contents survive. */
static void test_shared_destination_keeps_contents(void **state)
{
    struct sr_device *dev = device_of(state);
    float acc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint16_t h[8];
    for (int i = 0; i < 8; i++)
        h[i] = sr_fp32_to_bf16((float)i * 0.5f);
    /* overlapping destinations: [0, 8) and [4, 8) and [2, 6) */
    const struct sr_cast_seg segs[3] = {
        {h, acc, 8, SR_DTYPE_BF16}, {h, acc + 4, 4, SR_DTYPE_BF16}, {h, acc + 2, 4, SR_DTYPE_BF16}};
    dev->cast->unpack_add(dev, segs, 3, NULL);
    sr_dev_sync(dev, NULL);
    for (int i = 0; i < 8; i++) {
        float want = (float)(i + 1) + (float)i * 0.5f;
        if (i >= 4)
            want += (float)(i - 4) * 0.5f;
        if (i >= 2 && i < 6)
            want += (float)(i - 2) * 0.5f;
        assert_true(acc[i] == want);
    }
}

static int use_deferred(void **state)
{
    *state = (void *)1;
    return 0;
}

static int use_immediate(void **state)
{
    *state = NULL;
    return 0;
}

#define BOTH(t) cmocka_unit_test_setup(t, use_immediate), cmocka_unit_test_setup(t, use_deferred)

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(test_pack_fp16),          BOTH(test_pack_bf16),
        BOTH(test_unpack_fp16),        BOTH(test_unpack_bf16),
        BOTH(test_unpack_add_fp16),    BOTH(test_unpack_add_bf16),
        BOTH(test_f32_segments_exact), BOTH(test_shared_destination_keeps_contents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
