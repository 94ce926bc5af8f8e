/*
 * fp16 / bf16 conversion (half.h) against an independent float64 reference.
 *
 * The reference decodes every 16-bit code with ldexp (sign, exponent,
 * mantissa as the formats define them) and rounds a value by searching the
 * table of all non-negative finite codes, which are increasing in value, for
 * the nearest one, ties to the even code; inf sits one ulp past the largest
 * finite value, so "rounds past the top" falls out of the same search.
 *
 * Cases: every code widens exactly and survives a round trip; the exact
 * midpoint between every pair of neighbouring codes, and the fp32 values one
 * ulp either side of it, round as the reference says (this covers every tie,
 * the subnormal range and the overflow edge); fp32 bit patterns on a dense
 * stride over all 2^32 round as the reference says; NaN stays NaN. The array
 * forms are the device's cast ops, tested against these in test_cast.c.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/half.h"

struct format {
    int exp_bits, man_bits, bias;
    uint16_t inf; /* code of +inf (= number of finite codes) */
    uint16_t (*narrow)(float);
    float (*widen)(uint16_t);
    double table[0x7f81]; /* value of code c, c <= inf (inf: one ulp past max) */
};

static struct format fp16 = {5, 10, 15, 0x7c00, sr_fp32_to_fp16, sr_fp16_to_fp32, {0}};
static struct format bf16 = {8, 7, 127, 0x7f80, sr_fp32_to_bf16, sr_bf16_to_fp32, {0}};

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

/* The value of a non-negative code by the format's definition (inf code: max + ulp). */
static double ref_decode(const struct format *f, uint32_t c)
{
    const uint32_t m = c & ((1u << f->man_bits) - 1), e = c >> f->man_bits;
    if (e == 0)
        return ldexp((double)m, 1 - f->bias - f->man_bits);
    return ldexp((double)((1u << f->man_bits) | m), (int)e - f->bias - f->man_bits);
}

static void build_table(struct format *f)
{
    for (uint32_t c = 0; c <= f->inf; c++)
        f->table[c] = ref_decode(f, c);
}

/* Nearest code to |v| (v a finite double), ties to the even code. */
static uint16_t ref_round_abs(const struct format *f, double v)
{
    if (v >= f->table[f->inf])
        return f->inf;
    uint32_t lo = 0, hi = f->inf; /* table[lo] <= v < table[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (f->table[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    const double dlo = v - f->table[lo], dhi = f->table[hi] - v;
    if (dlo < dhi)
        return (uint16_t)lo;
    if (dhi < dlo)
        return (uint16_t)hi;
    return (uint16_t)((lo & 1) ? hi : lo);
}

static uint16_t ref_round(const struct format *f, float x)
{
    const uint16_t sign = (uint16_t)((bits_of(x) >> 31) << 15);
    if (isinf(x))
        return sign | f->inf;
    return sign | ref_round_abs(f, fabs((double)x));
}

static int check_one(const struct format *f, float x)
{
    if (isnan(x))
        return isnan(f->widen(f->narrow(x)));
    return f->narrow(x) == ref_round(f, x);
}

/* ---- tests ----------------------------------------------------------------------- */

static void check_widen_exact(struct format *f)
{
    build_table(f);
    for (uint32_t c = 0; c < 0x10000; c++) {
        const uint32_t a = c & 0x7fffu;
        const float w = f->widen((uint16_t)c);
        const double sign = (c & 0x8000u) ? -1.0 : 1.0;
        if (a > f->inf) {
            assert_true(isnan(w));
            assert_true(isnan(f->widen(f->narrow(w))));
            continue;
        }
        const double want = a == f->inf ? sign * INFINITY : sign * f->table[a];
        assert_true((double)w == want);
        assert_true(!!signbit(w) == !!signbit(sign));
        assert_int_equal(f->narrow(w), c); /* round trip */
    }
}

static void test_fp16_widen_exact_and_round_trip(void **state)
{
    (void)state;
    check_widen_exact(&fp16);
}

static void test_bf16_widen_exact_and_round_trip(void **state)
{
    (void)state;
    check_widen_exact(&bf16);
}

/* Midpoints of neighbours and the floats one ulp either side, both signs. */
static void check_midpoints(struct format *f)
{
    build_table(f);
    long bad = 0;
    for (uint32_t c = 0; c < f->inf; c++) {
        const float mid = (float)((f->table[c] + f->table[c + 1]) / 2);
        assert_true((double)mid == (f->table[c] + f->table[c + 1]) / 2); /* exact in fp32 */
        const float xs[3] = {nextafterf(mid, 0.0f), mid, nextafterf(mid, INFINITY)};
        for (int i = 0; i < 3; i++)
            bad += !check_one(f, xs[i]) + !check_one(f, -xs[i]);
    }
    assert_int_equal(bad, 0);
}

static void test_fp16_ties_and_edges(void **state)
{
    (void)state;
    check_midpoints(&fp16);
    assert_int_equal(sr_fp32_to_fp16(65504.0f), 0x7bff);
    assert_int_equal(sr_fp32_to_fp16(65519.996f), 0x7bff);
    assert_int_equal(sr_fp32_to_fp16(65520.0f), 0x7c00);
    assert_int_equal(sr_fp32_to_fp16(-1e30f), 0xfc00);
    assert_int_equal(sr_fp32_to_fp16(0x1p-24f), 0x0001);
    assert_int_equal(sr_fp32_to_fp16(0x1p-25f), 0x0000); /* tie to even: zero */
    assert_int_equal(sr_fp32_to_fp16(0x1.000002p-25f), 0x0001);
    assert_int_equal(sr_fp32_to_fp16(-0.0f), 0x8000);
    assert_int_equal(sr_fp32_to_fp16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    assert_int_equal(sr_fp32_to_fp16(0x1.ffcp-15f), 0x0400); /* tie, odd: carries to 2^-14 */
}

static void test_bf16_ties_and_edges(void **state)
{
    (void)state;
    check_midpoints(&bf16);
    assert_int_equal(sr_fp32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(sr_fp32_to_bf16(float_of(0x3f808000u)), 0x3f80); /* tie, even stays */
    assert_int_equal(sr_fp32_to_bf16(float_of(0x3f818000u)), 0x3f82); /* tie, odd goes up */
    assert_int_equal(sr_fp32_to_bf16(float_of(0x7f7fffffu)), 0x7f80); /* FLT_MAX -> inf */
    assert_int_equal(sr_fp32_to_bf16(float_of(0x00000001u)), 0x0000); /* fp32 subnormal */
}

/* fp32 bit patterns on a stride over all 2^32 (odd stride: every exponent, many mantissas). */
static void check_dense(struct format *f)
{
    build_table(f);
    long bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 127)
        bad += !check_one(f, float_of((uint32_t)u));
    assert_int_equal(bad, 0);
}

static void test_fp16_dense_vs_reference(void **state)
{
    (void)state;
    check_dense(&fp16);
}

static void test_bf16_dense_vs_reference(void **state)
{
    (void)state;
    check_dense(&bf16);
}

static void test_nan_stays_nan(void **state)
{
    (void)state;
    const uint32_t nans[] = {0x7f800001u, 0x7fc00000u, 0xffc00000u, 0x7fffffffu,
                             0xff800001u, 0x7f802000u, 0x7f800100u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        const float x = float_of(nans[i]);
        assert_true(isnan(sr_bf16_to_fp32(sr_fp32_to_bf16(x))));
        assert_true(isnan(sr_fp16_to_fp32(sr_fp32_to_fp16(x))));
        assert_int_equal(sr_fp32_to_bf16(x) >> 15, nans[i] >> 31); /* sign kept */
    }
    assert_true(isinf(sr_bf16_to_fp32(sr_fp32_to_bf16(INFINITY))));
    assert_true(isinf(sr_fp16_to_fp32(sr_fp32_to_fp16(-INFINITY))));
}

static void test_parse(void **state)
{
    (void)state;
    enum sr_dtype d;
    assert_int_equal(sr_wire_dtype_parse("bf16", &d), 0);
    assert_int_equal(d, SR_DTYPE_BF16);
    assert_int_equal(sr_wire_dtype_parse("fp16", &d), 0);
    assert_int_equal(d, SR_DTYPE_F16);
    assert_int_equal(sr_wire_dtype_parse("fp32", &d), 0);
    assert_int_equal(d, SR_DTYPE_F32);
    assert_true(sr_wire_dtype_parse("int8", &d) != 0);
    assert_true(sr_dtype_is_wire(SR_DTYPE_BF16) && !sr_dtype_is_wire(SR_DTYPE_I32));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_widen_exact_and_round_trip),
        cmocka_unit_test(test_bf16_widen_exact_and_round_trip),
        cmocka_unit_test(test_fp16_ties_and_edges),
        cmocka_unit_test(test_bf16_ties_and_edges),
        cmocka_unit_test(test_fp16_dense_vs_reference),
        cmocka_unit_test(test_bf16_dense_vs_reference),
        cmocka_unit_test(test_nan_stays_nan),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
