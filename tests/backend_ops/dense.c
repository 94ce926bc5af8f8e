/* The dense and dense-optimizer ops of test_backend_ops (cases.h): GEMM in
 * every transpose with alpha/beta and padded strides, the elementwise
 * epilogues, the interaction, the DCNv2 cross layer, the loss; SGD, Adagrad
 * and Adam steps. */
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
#include "device/ops_dense.h"
#include "device/ops_optim.h"
#include "cases.h"
#include "ops_check.h"

/* ---- dense: gemm ----------------------------------------------------------- */

static void linear_cases(void); /* the linear layer's forward, in fp32, tf32 and bf16 math */

struct gemm_ctx {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    float *a, *b, *c; /* host, as stored; padding columns NaN */
    size_t a_n, b_n, c_n;
};

/* A column sum of R terms, added in another order than the CPU's (a GPU
 * reduces in chunks): its rounding error grows with the terms' magnitudes,
 * about sqrt(R) times the result's for terms of mixed sign, so the bound is
 * OPS_TOL x sqrt(R) (5.5e-4 at R = 3000) rather than OPS_TOL. */
static double sum_tol(int R)
{
    return OPS_TOL * (R > 1 ? sqrt((double)R) : 1.0);
}
static void run_gemm(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct gemm_ctx *g = ctx;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const float *da = ops_upload(&a, g->a, g->a_n * 4), *db = ops_upload(&a, g->b, g->b_n * 4);
    float *dc = ops_upload(&a, g->c, g->c_n * 4); /* all NaN when beta = 0 */
    const enum sr_transpose ta = g->ta ? SR_TRANS : SR_NO_TRANS;
    const enum sr_transpose tb = g->tb ? SR_TRANS : SR_NO_TRANS;
    sr_op_dense_gemm(dev, NULL, ta, tb, g->m, g->n, g->k, g->alpha, da, g->lda, db, g->ldb, g->beta,
                     dc, g->ldc);
    /* The rule is the relative Frobenius error; an elementwise bound 10 times
     * looser catches a few wrong elements that the norm would dilute. C is
     * taken whole, the last row's padding too (its declared size ends at the
     * last row's last column). */
    ops_take(c, which, "C", OPS_F32_FROB | OPS_NAN_OK, ops_gemm_tol(), dev, dc, g->c_n * 4);
    ops_take(c, which, "C elementwise", OPS_F32 | OPS_NAN_OK, 10 * ops_gemm_tol(), dev, dc,
             g->c_n * 4);
    ops_arena_free(&a);
}

/* rows x ld floats, the first cols of each row uniform in [-1, 1], the rest NaN. */
static float *padded(struct ops_rng *r, int rows, int cols, int ld, int all_nan)
{
    float *p = ops_floats((size_t)rows * ld);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++)
            p[(size_t)i * ld + j] = j < cols && !all_nan ? ops_uniform_in(r, -1, 1) : NAN;
    return p;
}

static void gemm_case(int ta, int tb, int m, int n, int k, int pad, float alpha, float beta)
{
    struct ops_rng r = ops_rng_of("gemm");
    r.counter = (uint64_t)(ta * 2 + tb) << 40 | (uint64_t)(m * 7 + n * 3 + k) << 8;
    struct gemm_ctx g = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta};
    const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    g.lda = a_cols + pad, g.ldb = b_cols + pad, g.ldc = n + pad;
    g.a = padded(&r, a_rows, a_cols, g.lda, 0);
    g.b = padded(&r, b_rows, b_cols, g.ldb, 0);
    g.c = padded(&r, m, n, g.ldc, beta == 0.0f);
    g.a_n = (size_t)a_rows * g.lda, g.b_n = (size_t)b_rows * g.ldb, g.c_n = (size_t)m * g.ldc;
    char name[96];
    snprintf(name, sizeof name, "%c%c m%d n%d k%d pad%d alpha%g beta%g", ta ? 'T' : 'N',
             tb ? 'T' : 'N', m, n, k, pad, alpha, beta);
    ops_check("dense.gemm", name, run_gemm, &g);
    free(g.a), free(g.b), free(g.c);
}

void test_gemm(void **state)
{
    static const int shapes[][4] = {
        /* m, n, k, pad */
        {1, 1, 1, 0},        {7, 130, 33, 3}, {2048, 512, 367, 0}, /* top MLP forward */
        {512, 367, 2048, 0},                                       /* its weight gradient (TN) */
        {2048, 1, 256, 0},                                         /* the logit layer */
        {16, 13, 2048, 1},
    };
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, -1.5f}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 2; j++)
                gemm_case(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                          ab[j][0], ab[j][1]);
    linear_cases();
    ops_fail_if_any("dense.gemm");
}

/* GEMMs of the shapes (m, n, k, pad) under each transpose pair, alpha 1 and
 * beta 0, in the device under test's math. */
static void every_transpose(const int (*shapes)[4], size_t count)
{
    for (size_t s = 0; s < count; s++)
        for (int t = 0; t < 4; t++)
            gemm_case(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 1.0f,
                      0.0f);
}

/* tf32 math (tensor cores on CUDA; the CPU reference stays fp32), within
 * tf32's rounding. On CUDA the big weight-gradient shapes (Tᵀ N over a long
 * k, one side wide) take the K-major path, one operand transposed into
 * scratch first: A when m is the narrower side, B when n is; k = 4097 and the
 * padding give the transposed copy a stride that is not k. */
void test_gemm_tf32(void **state)
{
    static const int shapes[][4] = {
        {2048, 512, 367, 0},
        {512, 367, 2048, 0},
        {16, 13, 2048, 1},
    };
    static const int wide[][4] = {
        {64, 2048, 8192, 0},
        {2048, 48, 8192, 3},
        {17, 2048, 4097, 1},
        {2048, 2048, 4096, 0},
    };
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, -1.5f}};
    struct sr_device *dut = ops_dut();
    const enum sr_math was = dut->math;
    dut->math = SR_MATH_TF32;
    every_transpose(shapes, sizeof shapes / sizeof shapes[0]);
    for (size_t s = 0; ops_big_wanted() && s < sizeof wide / sizeof wide[0]; s++)
        for (int j = 0; j < 2; j++)
            gemm_case(1, 0, wide[s][0], wide[s][1], wide[s][2], wide[s][3], ab[j][0], ab[j][1]);
    linear_cases();
    dut->math = was;
    ops_fail_if_any("dense.gemm");
}

/* bf16 math (operands rounded to bf16, fp32 accumulation and output on CUDA;
 * the CPU reference stays fp32), within bf16's rounding: the GEMMs of an MLP
 * step and the linear layer's forward, whose bias and ReLU CUDA applies in
 * cuBLASLt's epilogue where it has one for bf16 operands. */
void test_gemm_bf16(void **state)
{
    static const int shapes[][4] = {
        {2048, 512, 367, 0},
        {512, 367, 2048, 0},
        {16, 13, 2048, 1},
        {7, 130, 33, 3},
    };
    struct sr_device *dut = ops_dut();
    const enum sr_math was = dut->math;
    dut->math = SR_MATH_BF16;
    every_transpose(shapes, sizeof shapes / sizeof shapes[0]);
    linear_cases();
    dut->math = was;
    ops_fail_if_any("dense.gemm");
}

/* ---- dense: the linear layer's forward ------------------------------------ */

struct linear_ctx {
    int B, in, out, relu;
    int bias_off; /* floats the bias lies past a 256-byte boundary (CUDA: 1 takes no epilogue) */
    float *x, *w, *bias;
};

static void run_linear(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct linear_ctx *l = ctx;
    struct ops_arena a;
    struct ops_regions r;
    ops_arena_init(&a, dev);
    const float *x = ops_upload(&a, l->x, (size_t)l->B * l->in * 4);
    const float *w = ops_upload(&a, l->w, (size_t)l->out * l->in * 4);
    const float *bias =
        (const float *)ops_upload(&a, l->bias, (size_t)(l->out + l->bias_off) * 4) + l->bias_off;
    OPS_REGIONS(&r, dense, linear_forward, dev, NULL, x, w, bias, l->B, l->in, l->out, l->relu,
                NULL);
    float *y = ops_poisoned(&a, ops_bytes(&r, "y"));
    sr_op_dense_linear_forward(dev, NULL, x, w, bias, l->B, l->in, l->out, l->relu, y);
    OPS_REGIONS(&r, dense, linear_forward, dev, NULL, x, w, bias, l->B, l->in, l->out, l->relu, y);
    /* gemm's rule (the relative Frobenius error), and 10 times looser element
     * by element; ReLU moves no element further than the GEMM did */
    ops_take_region(c, which, &r, "y", OPS_F32_FROB, ops_gemm_tol(), dev);
    ops_take(c, which, "y elementwise", OPS_F32, 10 * ops_gemm_tol(), dev, y, ops_bytes(&r, "y"));
    ops_arena_free(&a);
}

/* Linear forwards of MLP shapes (the logit layer's one column, a bottom
 * layer's 13 inputs), with and without ReLU, the bias aligned and not. */
static void linear_cases(void)
{
    static const int shapes[][3] = {
        /* B, in, out */
        {2048, 367, 512}, {7, 33, 130}, {2048, 256, 1}, {2048, 13, 512}, {1, 1, 1},
    };
    struct ops_rng r = ops_rng_of("linear");
    char name[96];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int relu = 0; relu <= 1; relu++)
            for (int off = 0; off <= 1; off++) {
                struct linear_ctx l = {.B = shapes[s][0], .in = shapes[s][1], .out = shapes[s][2],
                                       .relu = relu, .bias_off = off};
                l.x = padded(&r, l.B, l.in, l.in, 0);
                l.w = padded(&r, l.out, l.in, l.in, 0);
                l.bias = padded(&r, 1, l.out + off, l.out + off, 0);
                snprintf(name, sizeof name, "B %d in %d out %d relu %d bias +%d", l.B, l.in, l.out,
                         relu, off);
                ops_check("dense.linear_forward", name, run_linear, &l);
                free(l.x), free(l.w), free(l.bias);
            }
}

/* ---- dense: elementwise, interaction, loss ---------------------------------- */

enum dense_op {
    BIAS_RELU,
    RELU_FWD,
    RELU_FWD_INPLACE,
    RELU_BWD,
    BIAS_GRAD,
    RELU_BIAS_BWD,
    INTER_FWD,
    INTER_BWD,
    DCN_FWD,
    DCN_BWD,
    BCE,
};

#define DENSE_INPUTS 5

struct dense_ctx {
    enum dense_op op;
    int rows, cols, relu; /* rows, cols also: B, F; n = rows * cols */
    int D;
    int first, accumulate; /* dcn: xl is x0 (NULL; backward: residual), add to dz/demb */
    float scale;
    float *in[DENSE_INPUTS];
    size_t in_n[DENSE_INPUTS];
};

/* Outputs are sized and taken by the op's declaration (ops_dense.h): the
 * regions of the call with NULL outputs give their sizes, those of the call
 * made give them back by name. */
static void run_dense(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct dense_ctx *x = ctx;
    struct ops_arena a;
    struct ops_regions r;
    float *p[DENSE_INPUTS] = {NULL};
    ops_arena_init(&a, dev);
    for (int i = 0; i < DENSE_INPUTS; i++)
        if (x->in[i])
            p[i] = ops_upload(&a, x->in[i], x->in_n[i] * 4);
    const int R = x->rows, C = x->cols, D = x->D, n = R * C;
    float *out = NULL, *out2 = NULL;
    switch (x->op) {
    case BIAS_RELU:
        sr_op_dense_bias_relu_forward(dev, NULL, p[0], p[1], R, C, x->relu);
        OPS_REGIONS(&r, dense, bias_relu_forward, dev, NULL, p[0], p[1], R, C, x->relu);
        ops_take_region(c, which, &r, "y", OPS_F32, OPS_TOL, dev);
        break;
    case RELU_FWD:
        OPS_REGIONS(&r, dense, relu_forward, dev, NULL, p[0], NULL, n);
        out = ops_poisoned(&a, ops_bytes(&r, "y"));
        sr_op_dense_relu_forward(dev, NULL, p[0], out, n);
        OPS_REGIONS(&r, dense, relu_forward, dev, NULL, p[0], out, n);
        ops_take_region(c, which, &r, "y", OPS_F32, OPS_TOL, dev);
        ops_take(c, which, "x (unchanged)", OPS_EXACT, 0, dev, p[0], ops_bytes(&r, "x"));
        break;
    case RELU_FWD_INPLACE:
        sr_op_dense_relu_forward(dev, NULL, p[0], p[0], n);
        OPS_REGIONS(&r, dense, relu_forward, dev, NULL, p[0], p[0], n);
        ops_take_region(c, which, &r, "y", OPS_F32, OPS_TOL, dev);
        break;
    case RELU_BWD:
        sr_op_dense_relu_backward(dev, NULL, p[0], p[1], n);
        OPS_REGIONS(&r, dense, relu_backward, dev, NULL, p[0], p[1], n);
        ops_take_region(c, which, &r, "dy", OPS_F32, OPS_TOL, dev);
        break;
    case BIAS_GRAD:
        OPS_REGIONS(&r, dense, bias_grad, dev, NULL, p[0], R, C, NULL);
        out = ops_poisoned(&a, ops_bytes(&r, "dbias"));
        sr_op_dense_bias_grad(dev, NULL, p[0], R, C, out);
        OPS_REGIONS(&r, dense, bias_grad, dev, NULL, p[0], R, C, out);
        ops_take_region(c, which, &r, "dbias", OPS_F32, sum_tol(R), dev);
        ops_take(c, which, "dy (unchanged)", OPS_EXACT, 0, dev, p[0], ops_bytes(&r, "dy"));
        break;
    case RELU_BIAS_BWD:
        OPS_REGIONS(&r, dense, relu_bias_backward, dev, NULL, p[0], p[1], R, C, x->relu, NULL);
        out = ops_poisoned(&a, ops_bytes(&r, "dbias"));
        sr_op_dense_relu_bias_backward(dev, NULL, p[0], p[1], R, C, x->relu, out);
        OPS_REGIONS(&r, dense, relu_bias_backward, dev, NULL, p[0], p[1], R, C, x->relu, out);
        ops_take_region(c, which, &r, "dy", OPS_F32, OPS_TOL, dev);
        ops_take_region(c, which, &r, "dbias", OPS_F32, sum_tol(R), dev);
        break;
    case INTER_FWD:
        OPS_REGIONS(&r, dense, interaction_forward, dev, NULL, p[0], p[1], R, C, D, NULL);
        out = ops_poisoned(&a, ops_bytes(&r, "out"));
        sr_op_dense_interaction_forward(dev, NULL, p[0], p[1], R, C, D, out);
        OPS_REGIONS(&r, dense, interaction_forward, dev, NULL, p[0], p[1], R, C, D, out);
        ops_take_region(c, which, &r, "out", OPS_F32, OPS_TOL, dev);
        break;
    case INTER_BWD:
        OPS_REGIONS(&r, dense, interaction_backward, dev, NULL, p[0], p[1], p[2], R, C, D, NULL,
                    NULL);
        out = ops_poisoned(&a, ops_bytes(&r, "dz"));
        out2 = ops_poisoned(&a, ops_bytes(&r, "demb"));
        sr_op_dense_interaction_backward(dev, NULL, p[0], p[1], p[2], R, C, D, out, out2);
        OPS_REGIONS(&r, dense, interaction_backward, dev, NULL, p[0], p[1], p[2], R, C, D, out,
                    out2);
        ops_take_region(c, which, &r, "dz", OPS_F32, OPS_TOL, dev);
        ops_take_region(c, which, &r, "demb", OPS_F32, OPS_TOL, dev);
        break;
    case DCN_FWD: /* z, emb, u, bias, xl (NULL: the first layer) */
        OPS_REGIONS(&r, dense, dcn_cross_forward, dev, NULL, p[0], p[1], p[2], p[3], p[4], R, C, D,
                    NULL);
        out = ops_poisoned(&a, ops_bytes(&r, "y"));
        sr_op_dense_dcn_cross_forward(dev, NULL, p[0], p[1], p[2], p[3], p[4], R, C, D, out);
        OPS_REGIONS(&r, dense, dcn_cross_forward, dev, NULL, p[0], p[1], p[2], p[3], p[4], R, C, D,
                    out);
        ops_take_region(c, which, &r, "y", OPS_F32, OPS_TOL, dev);
        break;
    case DCN_BWD: { /* z, emb, u, bias, dy; dz and demb start as given when accumulating */
        float *du, *dbias, *dz, *demb;
        OPS_REGIONS(&r, dense, dcn_cross_backward, dev, NULL, p[0], p[1], p[2], p[3], p[4], R, C, D,
                    x->first, x->accumulate, NULL, NULL, NULL, NULL);
        du = ops_poisoned(&a, ops_bytes(&r, "du"));
        dbias = ops_poisoned(&a, ops_bytes(&r, "dbias"));
        dz = x->accumulate ? ops_upload(&a, x->in[2], ops_bytes(&r, "dz"))
                           : ops_poisoned(&a, ops_bytes(&r, "dz"));
        demb = x->accumulate ? ops_upload(&a, x->in[1], ops_bytes(&r, "demb"))
                             : ops_poisoned(&a, ops_bytes(&r, "demb"));
        sr_op_dense_dcn_cross_backward(dev, NULL, p[0], p[1], p[2], p[3], p[4], R, C, D, x->first,
                                       x->accumulate, du, dbias, dz, demb);
        OPS_REGIONS(&r, dense, dcn_cross_backward, dev, NULL, p[0], p[1], p[2], p[3], p[4], R, C, D,
                    x->first, x->accumulate, du, dbias, dz, demb);
        ops_take_region(c, which, &r, "du", OPS_F32, OPS_TOL, dev);
        ops_take_region(c, which, &r, "dbias", OPS_F32, sum_tol(R), dev);
        ops_take_region(c, which, &r, "dz", OPS_F32, OPS_TOL, dev);
        ops_take_region(c, which, &r, "demb", OPS_F32, OPS_TOL, dev);
        break;
    }
    case BCE:
        OPS_REGIONS(&r, dense, bce_with_logits, dev, NULL, p[0], p[1], p[2], n, x->scale, NULL,
                    NULL);
        out = ops_poisoned(&a, ops_bytes(&r, "dlogits"));
        out2 = ops_poisoned(&a, ops_bytes(&r, "loss_sum"));
        sr_op_dense_bce_with_logits(dev, NULL, p[0], p[1], p[2], n, x->scale, out, out2);
        OPS_REGIONS(&r, dense, bce_with_logits, dev, NULL, p[0], p[1], p[2], n, x->scale, out,
                    out2);
        ops_take_region(c, which, &r, "dlogits", OPS_F32, OPS_TOL, dev);
        ops_take_region(c, which, &r, "loss_sum", OPS_F32, OPS_TOL, dev);
        break;
    }
    ops_arena_free(&a);
}

/* Input i of x: n values uniform in [lo, hi]; relu_out: max(v, 0) (a ReLU's output). */
static float *dense_in(struct dense_ctx *x, struct ops_rng *r, int i, size_t n, float lo, float hi,
                       int relu_out)
{
    float *p = ops_floats(n);
    ops_fill(r, p, n, lo, hi);
    for (size_t j = 0; relu_out && j < n; j++)
        p[j] = p[j] > 0.0f ? p[j] : 0.0f;
    x->in[i] = p;
    x->in_n[i] = n;
    return p;
}

static void dense_case(const char *op, const char *name, struct dense_ctx *x)
{
    ops_check(op, name, run_dense, x);
    for (int i = 0; i < DENSE_INPUTS; i++)
        free(x->in[i]);
}

static void elementwise_cases(void)
{
    static const int shapes[][2] = {{2048, 512}, {1, 1}, {3000, 1}, {33, 130}, {1, 130}, {64, 16}};
    struct ops_rng r = ops_rng_of("dense");
    char name[96];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int R = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)R * C;
        for (int relu = 0; relu <= 1; relu++) {
            struct dense_ctx x = {.op = BIAS_RELU, .rows = R, .cols = C, .relu = relu};
            dense_in(&x, &r, 0, n, -1, 1, 0);
            dense_in(&x, &r, 1, (size_t)C, -1, 1, 0);
            snprintf(name, sizeof name, "rows %d cols %d relu %d", R, C, relu);
            dense_case("dense.bias_relu_forward", name, &x);

            x = (struct dense_ctx){.op = RELU_BIAS_BWD, .rows = R, .cols = C, .relu = relu};
            dense_in(&x, &r, 0, n, -1, 1, 1);
            dense_in(&x, &r, 1, n, -1, 1, 0);
            dense_case("dense.relu_bias_backward", name, &x);
        }
        snprintf(name, sizeof name, "rows %d cols %d", R, C);
        struct dense_ctx x = {.op = BIAS_GRAD, .rows = R, .cols = C};
        dense_in(&x, &r, 0, n, -1, 1, 0);
        dense_case("dense.bias_grad", name, &x);

        snprintf(name, sizeof name, "n %zu", n);
        x = (struct dense_ctx){.op = RELU_FWD, .rows = R, .cols = C};
        float *v = dense_in(&x, &r, 0, n, -1, 1, 0);
        v[0] = 0.0f, v[n - 1] = -0.0f; /* zeros of both signs */
        dense_case("dense.relu_forward", name, &x);
        x = (struct dense_ctx){.op = RELU_FWD_INPLACE, .rows = R, .cols = C};
        dense_in(&x, &r, 0, n, -1, 1, 0);
        snprintf(name, sizeof name, "n %zu in place", n);
        dense_case("dense.relu_forward", name, &x);
        x = (struct dense_ctx){.op = RELU_BWD, .rows = R, .cols = C};
        dense_in(&x, &r, 0, n, -1, 1, 1);
        dense_in(&x, &r, 1, n, -1, 1, 0);
        snprintf(name, sizeof name, "n %zu", n);
        dense_case("dense.relu_backward", name, &x);
    }
}

static void interaction_cases(void)
{
    static const int shapes[][3] = {{256, 26, 16}, {1, 1, 1},  {33, 8, 130},
                                    {7, 3, 128},   {64, 1, 4}, {5, 26, 1}};
    struct ops_rng r = ops_rng_of("interaction");
    char name[96];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int B = shapes[s][0], F = shapes[s][1], D = shapes[s][2];
        snprintf(name, sizeof name, "B %d F %d D %d", B, F, D);
        struct dense_ctx x = {.op = INTER_FWD, .rows = B, .cols = F, .D = D};
        dense_in(&x, &r, 0, (size_t)B * D, -1, 1, 0);
        dense_in(&x, &r, 1, (size_t)B * F * D, -1, 1, 0);
        dense_case("dense.interaction_forward", name, &x);
        x = (struct dense_ctx){.op = INTER_BWD, .rows = B, .cols = F, .D = D};
        dense_in(&x, &r, 0, (size_t)B * D, -1, 1, 0);
        dense_in(&x, &r, 1, (size_t)B * F * D, -1, 1, 0);
        dense_in(&x, &r, 2, (size_t)B * sr_dot_interaction_width(F, D), -1, 1, 0);
        dense_case("dense.interaction_backward", name, &x);
    }
}

/* One cross layer's elementwise ops, the first layer (xl = x0) and a later
 * one, overwriting and accumulating x0's gradient. When accumulating, dz and
 * demb start as u's first B·D values and emb's: any values do. */
static void dcn_cases(void)
{
    /* D a multiple of 4 takes the GPU's float4 path; B 70000 passes its 65535 block rows */
    static const int shapes[][3] = {{256, 26, 16},  {1, 1, 1},      {33, 8, 130}, {7, 3, 5},
                                    {2048, 26, 16}, {300, 26, 128}, {70000, 1, 4}};
    struct ops_rng r = ops_rng_of("dcn");
    char name[96];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int B = shapes[s][0], F = shapes[s][1], D = shapes[s][2];
        const size_t n = sr_dcn_width(F, D);
        for (int first = 0; first <= 1; first++) {
            snprintf(name, sizeof name, "B %d F %d D %d%s", B, F, D, first ? " first" : "");
            struct dense_ctx x = {.op = DCN_FWD, .rows = B, .cols = F, .D = D};
            dense_in(&x, &r, 0, (size_t)B * D, -1, 1, 0);
            dense_in(&x, &r, 1, (size_t)B * F * D, -1, 1, 0);
            dense_in(&x, &r, 2, (size_t)B * n, -1, 1, 0);
            dense_in(&x, &r, 3, n, -1, 1, 0);
            if (!first)
                dense_in(&x, &r, 4, (size_t)B * n, -1, 1, 0);
            dense_case("dense.dcn_cross_forward", name, &x);
            for (int acc = 0; acc <= 1; acc++) {
                snprintf(name, sizeof name, "B %d F %d D %d%s%s", B, F, D, first ? " residual" : "",
                         acc ? " accumulate" : "");
                x = (struct dense_ctx){
                    .op = DCN_BWD, .rows = B, .cols = F, .D = D, .first = first, .accumulate = acc};
                dense_in(&x, &r, 0, (size_t)B * D, -1, 1, 0);
                dense_in(&x, &r, 1, (size_t)B * F * D, -1, 1, 0);
                dense_in(&x, &r, 2, (size_t)B * n, -1, 1, 0);
                dense_in(&x, &r, 3, n, -1, 1, 0);
                dense_in(&x, &r, 4, (size_t)B * n, -1, 1, 0);
                dense_case("dense.dcn_cross_backward", name, &x);
            }
        }
    }
}

static void bce_cases(void)
{
    static const int sizes[] = {2048, 1, 1000};
    struct ops_rng r = ops_rng_of("bce");
    char name[96];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int masked = 0; masked <= 1; masked++) {
            const int n = sizes[s];
            struct dense_ctx x = {.op = BCE, .rows = n, .cols = 1, .scale = 1.0f / (float)n};
            float *logit = dense_in(&x, &r, 0, (size_t)n, -8, 8, 0);
            float *label = dense_in(&x, &r, 1, (size_t)n, 0, 1, 0);
            for (int i = 0; i < n; i++) {
                label[i] = label[i] < 0.5f ? 0.0f : 1.0f;
                if (i % 97 == 3) /* saturated logits, both signs */
                    logit[i] = i % 2 ? 40.0f : -90.0f;
            }
            if (masked) {
                float *m = dense_in(&x, &r, 2, (size_t)n, 0, 1, 0);
                for (int i = 0; i < n; i++)
                    m[i] = m[i] < 0.2f && n > 1 ? 0.0f : 1.0f;
            }
            snprintf(name, sizeof name, "n %d %s", n, masked ? "masked" : "no mask");
            dense_case("dense.bce_with_logits", name, &x);
        }
}

void test_dense(void **state)
{
    elementwise_cases();
    interaction_cases();
    dcn_cases();
    bce_cases();
    ops_fail_if_any("dense");
}

/* ---- optim ------------------------------------------------------------------- */

struct optim_ctx {
    enum sr_optim_kind kind; /* SGD, ADAGRAD or ADAM */
    size_t n;
    float *w, *g, *s1, *s2; /* host; s1: adagrad's sum or adam's m, s2: adam's v */
    float lr, eps, b1, b2;
    int64_t step;
};

static void run_optim(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct optim_ctx *x = ctx;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const size_t bytes = x->n * 4;
    float *w = ops_upload(&a, x->w, bytes);
    const float *g = ops_upload(&a, x->g, bytes);
    float *s1 = x->s1 ? ops_upload(&a, x->s1, bytes) : NULL;
    float *s2 = x->s2 ? ops_upload(&a, x->s2, bytes) : NULL;
    const float *lr = ops_upload(&a, &x->lr, sizeof x->lr);
    const int64_t *step = ops_upload(&a, &x->step, sizeof x->step);
    struct ops_regions r;
    if (x->kind == SR_OPTIM_SGD) {
        sr_op_optim_sgd_step(dev, NULL, w, g, x->n, lr);
        OPS_REGIONS(&r, optim, sgd_step, dev, NULL, w, g, x->n, lr);
    } else if (x->kind == SR_OPTIM_ADAGRAD) {
        sr_op_optim_adagrad_step(dev, NULL, w, s1, g, x->n, lr, x->eps);
        OPS_REGIONS(&r, optim, adagrad_step, dev, NULL, w, s1, g, x->n, lr, x->eps);
    } else {
        sr_op_optim_adam_step(dev, NULL, w, s1, s2, g, x->n, lr, x->b1, x->b2, x->eps, step);
        OPS_REGIONS(&r, optim, adam_step, dev, NULL, w, s1, s2, g, x->n, lr, x->b1, x->b2, x->eps,
                    step);
    }
    /* every operand the op updates, by its declared name and size */
    for (int i = 0; i < r.n; i++)
        if (r.reg[i].access == SR_OP_INOUT)
            ops_take_region(c, which, &r, r.reg[i].name, OPS_F32, OPS_TOL, dev);
    ops_arena_free(&a);
}

static void optim_case(enum sr_optim_kind kind, size_t n, int64_t step, int zero_state)
{
    struct ops_rng r = ops_rng_of("optim");
    r.counter = (uint64_t)kind << 48 | (uint64_t)n << 8 | (uint64_t)step;
    const struct sr_optim_config cfg = sr_optim_config_default(kind);
    struct optim_ctx x = {.kind = kind,
                          .n = n,
                          .lr = 0.05f,
                          .eps = cfg.eps,
                          .b1 = cfg.beta1,
                          .b2 = cfg.beta2,
                          .step = step};
    x.w = ops_floats(n), x.g = ops_floats(n);
    ops_fill(&r, x.w, n, -1, 1);
    ops_fill(&r, x.g, n, -1, 1);
    if (kind != SR_OPTIM_SGD) {
        x.s1 = ops_floats(n);
        if (!zero_state)
            ops_fill(&r, x.s1, n, kind == SR_OPTIM_ADAM ? -0.1f : 0.0f, 0.5f);
    }
    if (kind == SR_OPTIM_ADAM) {
        x.s2 = ops_floats(n);
        if (!zero_state)
            ops_fill(&r, x.s2, n, 0.0f, 0.05f);
    }
    char op[48], name[96];
    snprintf(op, sizeof op, "optim.%s_step", sr_optim_kind_name(kind));
    snprintf(name, sizeof name, "n %zu%s%s", n, zero_state ? " fresh state" : "",
             kind == SR_OPTIM_ADAM ? (step == 1 ? " step 1" : " step 1000") : "");
    ops_check(op, name, run_optim, &x);
    free(x.w), free(x.g), free(x.s1), free(x.s2);
}

void test_optim(void **state)
{
    static const size_t sizes[] = {1, 1000, (1 << 20) + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        optim_case(SR_OPTIM_SGD, sizes[s], 1, 0);
        optim_case(SR_OPTIM_ADAGRAD, sizes[s], 1, 1);
        optim_case(SR_OPTIM_ADAGRAD, sizes[s], 1, 0);
        optim_case(SR_OPTIM_ADAM, sizes[s], 1, 1);
        optim_case(SR_OPTIM_ADAM, sizes[s], 1000, 0);
    }
    ops_fail_if_any("optim");
}
