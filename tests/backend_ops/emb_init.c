/* The embedding ops that write tables without a batch, in test_backend_ops
 * (cases.h): init_uniform (whole rows, and column pieces of cw shards, at row
 * offsets past 2^31) and fill, each bit for bit against the CPU and with the
 * guards around the written range untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "device/ops_embedding.h"
#include "cases.h"
#include "ops_check.h"

/* ---- embedding: init_uniform, fill ------------------------------------------ */

struct init_ctx {
    int64_t rows, row_begin, n;
    int dim, col_begin, full_dim; /* full_dim 0: the whole row (dim) */
    uint64_t seed, stream;
    double lo, hi;
    float value;
};

#define GUARD 16 /* floats before and after the written range, which must stay poisoned */

static void run_init_uniform(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct init_ctx *x = ctx;
    const size_t n = (size_t)x->rows * x->dim + 2 * GUARD;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    float *w = ops_poisoned(&a, n * 4);
    sr_op_emb_init_uniform(dev, w + GUARD, SR_DTYPE_F32, x->rows, x->dim, x->row_begin,
                           x->col_begin, x->full_dim ? x->full_dim : x->dim, x->seed, x->stream,
                           x->lo, x->hi, NULL);
    ops_take(c, which, "weight and guards", OPS_EXACT, 0, dev, w, n * 4);
    ops_arena_free(&a);
}

static void run_fill(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct init_ctx *x = ctx;
    const size_t n = (size_t)x->n + 2 * GUARD;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    float *p = ops_poisoned(&a, n * 4);
    sr_op_emb_fill(dev, p + GUARD, x->n, x->value, NULL);
    ops_take(c, which, "p and guards", OPS_EXACT, 0, dev, p, n * 4);
    ops_arena_free(&a);
}

void test_embedding_init(void **state)
{
    (void)state;
    struct ops_rng r = ops_rng_of("init");
    const struct init_ctx inits[] = {
        {.rows = 1, .dim = 1, .row_begin = 0, .lo = -1, .hi = 1},
        {.rows = 1000, .dim = 130, .row_begin = 12345, .lo = -0.05, .hi = 0.05},
        {.rows = 3, .dim = 16, .row_begin = (int64_t)1 << 40, .lo = 0, .hi = 1},
        {.rows = 777, .dim = 4, .row_begin = 5, .lo = -0.0358748, .hi = 0.0358748},
        {.rows = 4099, .dim = 128, .row_begin = ((int64_t)1 << 31) - 7, .lo = -2, .hi = 3},
        /* column pieces (cw shards): the last 32 of 128, an odd piece of 130 */
        {.rows = 1000,
         .dim = 32,
         .row_begin = 77,
         .col_begin = 96,
         .full_dim = 128,
         .lo = -1,
         .hi = 1},
        {.rows = 3001,
         .dim = 7,
         .row_begin = ((int64_t)1 << 31) - 7,
         .col_begin = 61,
         .full_dim = 130,
         .lo = -0.05,
         .hi = 0.05},
    };
    char name[96];
    for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
        struct init_ctx x = inits[i];
        x.seed = (uint64_t)ops_below(&r, INT64_MAX);
        x.stream = (uint64_t)ops_below(&r, 1000);
        if (x.full_dim)
            snprintf(name, sizeof name, "rows %lld cols %d-%d of %d row_begin %lld",
                     (long long)x.rows, x.col_begin, x.col_begin + x.dim - 1, x.full_dim,
                     (long long)x.row_begin);
        else
            snprintf(name, sizeof name, "rows %lld dim %d row_begin %lld", (long long)x.rows, x.dim,
                     (long long)x.row_begin);
        ops_check("emb.init_uniform", name, run_init_uniform, &x);
    }
    static const int64_t sizes[] = {1, 17, 1000003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct init_ctx x = {.n = sizes[i], .value = ops_uniform_in(&r, -3, 3)};
        snprintf(name, sizeof name, "n %lld", (long long)x.n);
        ops_check("emb.fill", name, run_fill, &x);
    }
    ops_fail_if_any("embedding init");
}
