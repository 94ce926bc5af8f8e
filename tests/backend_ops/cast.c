/* The cast ops of test_backend_ops (cases.h): pack, unpack and unpack_add
 * over segment lists of fp16, bf16 and fp32. */
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
#include "shardrec/half.h"
#include "device/ops_cast.h"
#include "cases.h"
#include "ops_check.h"

/* ---- cast ------------------------------------------------------------------------- */

/* Segments laid out back to back: fp32 side in `f32` (4-byte aligned), wire
 * side in `wire` (2-byte units). The fp32 wire segment starts at an odd
 * halfword, so its values sit at 2-byte alignment. */
#define CAST_SEGS 6

struct cast_ctx {
    int num;
    size_t n[CAST_SEGS];
    enum sr_dtype dtype[CAST_SEGS];
    size_t f32_at[CAST_SEGS], wire_at[CAST_SEGS]; /* in floats, in halfwords */
    size_t f32_n, wire_n;
    float *f32;     /* pack's source; unpack_add's initial destination */
    uint16_t *wire; /* unpack's source */
    int add_twice;  /* unpack_add: the last segment adds into the first's destination */
};

static size_t wire_halves(enum sr_dtype t, size_t n)
{
    return t == SR_DTYPE_F32 ? 2 * n : n;
}

enum cast_op { CAST_PACK, CAST_UNPACK, CAST_UNPACK_ADD };

struct cast_run {
    struct cast_ctx *x;
    enum cast_op op;
};

static void run_cast(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct cast_run *cr = ctx;
    const struct cast_ctx *x = cr->x;
    const size_t fb = x->f32_n * 4, wb = x->wire_n * 2;
    struct ops_arena a;
    struct sr_cast_seg segs[CAST_SEGS + 1]; /* + unpack_add's second source */
    ops_arena_init(&a, dev);
    float *f32 = cr->op == CAST_UNPACK ? ops_poisoned(&a, fb) : ops_upload(&a, x->f32, fb);
    uint16_t *wire = cr->op == CAST_PACK ? ops_poisoned(&a, wb) : ops_upload(&a, x->wire, wb);
    for (int i = 0; i < x->num; i++) {
        float *f = f32 + x->f32_at[i];
        uint16_t *w = wire + x->wire_at[i];
        if (cr->op == CAST_PACK)
            segs[i] = (struct sr_cast_seg){f, w, x->n[i], x->dtype[i]};
        else
            segs[i] = (struct sr_cast_seg){w, f, x->n[i], x->dtype[i]};
    }
    int num = x->num;
    if (cr->op == CAST_UNPACK_ADD && x->add_twice) /* a second source into segment 0's sum */
        segs[num++] = (struct sr_cast_seg){wire + x->wire_at[1], f32 + x->f32_at[0],
                                           x->n[0] < x->n[1] ? x->n[0] : x->n[1], x->dtype[1]};
    if (cr->op == CAST_PACK)
        sr_op_cast_pack(dev, segs, num, NULL);
    else if (cr->op == CAST_UNPACK)
        sr_op_cast_unpack(dev, segs, num, NULL);
    else
        sr_op_cast_unpack_add(dev, segs, num, NULL);
    memset(segs, 0xFF, sizeof segs); /* the op must have copied the list */
    if (cr->op == CAST_PACK)
        ops_take(c, which, "wire", OPS_EXACT, 0, dev, wire, wb);
    else
        ops_take(c, which, "fp32", OPS_EXACT, 0, dev, f32, fb);
    ops_arena_free(&a);
}

/* Values that exercise the rounding: specials, fp16 subnormals and overflow,
 * exact ties of both formats, fp32 subnormals; the rest random over many
 * binades. finite_only: no NaN (an fp32 sum of NaN has no portable bits). */
static float cast_value(struct ops_rng *r, size_t i, int finite_only)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, /* zeros, infinities */
        0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa5a5a5u, /* NaNs with payloads */
        0x477fe000u, 0x477ff000u, 0x477fefffu, 0xc77ff000u, /* 65504, 65520 (tie to inf), ... */
        0x33800000u, 0x33000000u, 0x33000001u, 0x387fc000u, /* fp16 subnormal edges */
        0x3f808000u, 0x3f818000u, 0x3f800001u, 0x3f801000u, /* bf16 ties to even, fp16 tie */
        0x00000001u, 0x807fffffu, 0x7f7fffffu, 0x7f7f8000u, /* fp32 subnormals, max, bf16 edge */
    };
    const size_t ns = sizeof special / sizeof special[0];
    float v;
    if (i < ns) {
        uint32_t u = special[i];
        memcpy(&v, &u, 4);
        if (!(finite_only && isnan(v)))
            return v;
    }
    const int e = (int)ops_below(r, 60) - 40; /* 2^-40 .. 2^19 */
    v = ldexpf(ops_uniform_in(r, 1.0f, 2.0f), e) * (ops_below(r, 2) ? -1.0f : 1.0f);
    if (i % 7 == 3) { /* an exact fp16 or bf16 tie: half an ulp above a 16-bit value */
        uint32_t u;
        memcpy(&u, &v, 4);
        u = (u & ~0x1fffu) | 0x1000u;
        memcpy(&v, &u, 4);
    }
    return v;
}

static void cast_case(const char *name, const size_t *n, const enum sr_dtype *dt, int num)
{
    struct ops_rng r = ops_rng_of(name);
    struct cast_ctx x = {.num = num, .add_twice = num >= 2 && dt[1] != SR_DTYPE_F32};
    for (int i = 0; i < num; i++) {
        x.n[i] = n[i], x.dtype[i] = dt[i];
        x.f32_at[i] = x.f32_n;
        x.f32_n += n[i];
        if (dt[i] == SR_DTYPE_F32 && x.wire_n % 2 == 0)
            x.wire_n++; /* 2-byte, not 4-byte, aligned */
        x.wire_at[i] = x.wire_n;
        x.wire_n += wire_halves(dt[i], n[i]);
    }
    x.f32 = ops_floats(x.f32_n + 1);
    x.wire = calloc(x.wire_n + 1, 2);
    assert_non_null(x.wire);
    for (int i = 0; i < num; i++)
        for (size_t j = 0; j < n[i]; j++)
            x.f32[x.f32_at[i] + j] = cast_value(&r, j, 0);
    for (size_t j = 0; j < x.wire_n; j++) /* every 16-bit pattern kind: random halfwords */
        x.wire[j] = (uint16_t)ops_below(&r, 65536);
    for (size_t j = 0; j < 64 && j < x.wire_n; j++) /* and some round trips */
        x.wire[j] = sr_fp32_to_fp16(cast_value(&r, j, 0));
    struct cast_run run = {&x, CAST_PACK};
    ops_check("cast.pack", name, run_cast, &run);
    run.op = CAST_UNPACK;
    ops_check("cast.unpack", name, run_cast, &run);
    /* unpack_add: finite sums only (NaN + x keeps no portable payload) */
    for (size_t j = 0; j < x.f32_n; j++)
        x.f32[j] = cast_value(&r, j + 1000, 1);
    for (int i = 0; i < num; i++)
        for (size_t j = 0; j < n[i]; j++) {
            uint16_t *w = x.wire + x.wire_at[i];
            const float v = cast_value(&r, j + 50, 1);
            if (dt[i] == SR_DTYPE_F16)
                w[j] = sr_fp32_to_fp16(isinf(v) ? 1.0f : v);
            else if (dt[i] == SR_DTYPE_BF16)
                w[j] = sr_fp32_to_bf16(isinf(v) ? 1.0f : v);
            else
                memcpy(w + 2 * j, &v, 4);
        }
    run.op = CAST_UNPACK_ADD;
    ops_check("cast.unpack_add", name, run_cast, &run);
    free(x.f32), free(x.wire);
}

void test_cast(void **state)
{
    {
        const size_t n[] = {1000, 777, 33, 1, 0, 100003};
        const enum sr_dtype t[] = {SR_DTYPE_F16, SR_DTYPE_BF16, SR_DTYPE_F32,
                                   SR_DTYPE_F16, SR_DTYPE_BF16, SR_DTYPE_BF16};
        cast_case("fp16, bf16, fp32 (2-byte aligned), 1, 0, 100003", n, t, 6);
    }
    {
        const size_t n[] = {4096, 4096};
        const enum sr_dtype t[] = {SR_DTYPE_BF16, SR_DTYPE_F16};
        cast_case("bf16 + fp16 into one sum", n, t, 2);
    }
    {
        const size_t n[] = {1, 3, 5};
        const enum sr_dtype t[] = {SR_DTYPE_F32, SR_DTYPE_F32, SR_DTYPE_F16};
        cast_case("fp32 segments of 1, 3 + fp16", n, t, 3);
    }
    {
        const size_t n[] = {(1 << 20) + 1};
        const enum sr_dtype t[] = {SR_DTYPE_F16};
        cast_case("fp16 2^20+1", n, t, 1);
    }
    ops_fail_if_any("cast");
}
