/*
 * Dense op and layer tests: GEMM, the linear layer, ReLU, the bias gradient,
 * the dot interaction and the BCE loss, each against a float64 reference
 * (helpers/dense_ref.h), gradients against central differences of that
 * reference, and the interaction's output order against a naive Gram matrix.
 * The whole DLRM is tests/test_dlrm.c.
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

#include "helpers/dense_ref.h"
#include "helpers/host_view.h"
#include "shardrec/device.h"
#include "shardrec/dlrm.h"
#include "device/ops_dense.h"
#include "model/linear.h"

/* ---- helpers ------------------------------------------------------------- */

/* The tests read results on the host: a wait after each call whose outputs
 * they read (the deferred CPU device, SR_CPU_DEFERRED=1, proves it). */
static void host_wait(void)
{
    sr_dev_sync(sr_device_cpu(), NULL);
}

static struct sr_device *cpu(void)
{
    return sr_device_cpu();
}

/* Σ c_i y_i: a scalar of a layer's output whose gradient w.r.t. y is c. */
static double weighted_sum(const double *c, const double *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += c[i] * y[i];
    return s;
}

/* ---- gemm ---------------------------------------------------------------- */

static void test_gemm_transposes(void **state)
{
    enum { M = 7, N = 5, K = 9 };
    float a[M * K], b[K * N], c[M * N], c0[M * N];
    double want[M * N];
    sr_test_fill(a, M * K, 1, 1.0);
    sr_test_fill(b, K * N, 2, 1.0);
    sr_test_fill(c0, M * N, 3, 1.0);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* op(A) (M, K) stored as (M, K) or (K, M); op(B) (K, N) as (K, N) or (N, K). */
            int lda = ta ? M : K, ldb = tb ? K : N;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double acc = 0.0;
                    for (int p = 0; p < K; p++)
                        acc += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                               (tb ? b[j * ldb + p] : b[p * ldb + j]);
                    want[i * N + j] = 0.5 * acc + 2.0 * c0[i * N + j];
                }
            memcpy(c, c0, sizeof(c));
            cpu()->dense->gemm(cpu(), NULL, ta, tb, M, N, K, 0.5f, a, lda, b, ldb, 2.0f, c, N);
            host_wait();
            sr_test_expect_close(ta ? (tb ? "gemm TT" : "gemm TN") : (tb ? "gemm NT" : "gemm NN"),
                                 c, want, M * N, 1e-5, 1e-5);
        }
}

/* ---- linear -------------------------------------------------------------- */

enum { LB = 6, LIN = 5, LOUT = 4 };

struct linear_case {
    double x[LB * LIN], w[LOUT * LIN], b[LOUT], c[LB * LOUT];
    int relu;
};

static double linear_objective(const struct linear_case *lc)
{
    double y[LB * LOUT];
    sr_test_ref_linear(lc->x, lc->w, lc->b, LB, LIN, LOUT, lc->relu, y);
    return weighted_sum(lc->c, y, LB * LOUT);
}

static double linear_objective_v(const void *ctx)
{
    return linear_objective(ctx);
}

static void check_linear(int relu)
{
    float x[LB * LIN], w[LOUT * LIN], b[LOUT], c[LB * LOUT], y[LB * LOUT];
    float dw[LOUT * LIN], db[LOUT], dx[LB * LIN], dy[LB * LOUT];
    sr_test_fill(x, LB * LIN, 10, 1.0);
    sr_test_fill(w, LOUT * LIN, 11, 1.0);
    sr_test_fill(b, LOUT, 12, 0.5);
    sr_test_fill(c, LB * LOUT, 13, 1.0);
    struct sr_linear l = {
        .in = LIN, .out = LOUT, .relu = relu, .weight = w, .bias = b, .dweight = dw, .dbias = db};
    sr_linear_forward(cpu(), NULL, &l, x, LB, y);
    host_wait();

    struct linear_case lc = {.relu = relu};
    sr_test_to_double(lc.x, x, LB * LIN);
    sr_test_to_double(lc.w, w, LOUT * LIN);
    sr_test_to_double(lc.b, b, LOUT);
    sr_test_to_double(lc.c, c, LB * LOUT);
    double yref[LB * LOUT];
    sr_test_ref_linear(lc.x, lc.w, lc.b, LB, LIN, LOUT, relu, yref);
    sr_test_expect_close("linear y", y, yref, LB * LOUT, 1e-5, 1e-5);

    memcpy(dy, c, sizeof(dy)); /* dL/dy = c */
    sr_linear_backward(cpu(), NULL, &l, x, y, dy, LB, dx);
    host_wait();
    double gw[LOUT * LIN], gb[LOUT], gx[LB * LIN];
    sr_test_fd_grad(lc.w, LOUT * LIN, linear_objective_v, &lc, gw);
    sr_test_fd_grad(lc.b, LOUT, linear_objective_v, &lc, gb);
    sr_test_fd_grad(lc.x, LB * LIN, linear_objective_v, &lc, gx);
    sr_test_expect_nonzero("linear dweight", gw, LOUT * LIN);
    sr_test_expect_close("linear dweight", dw, gw, LOUT * LIN, 1e-5, 1e-4);
    sr_test_expect_close("linear dbias", db, gb, LOUT, 1e-5, 1e-4);
    sr_test_expect_close("linear dx", dx, gx, LB * LIN, 1e-5, 1e-4);
}

static void test_linear_fd(void **state)
{
    check_linear(0);
    check_linear(1);
}

/* ---- relu and bias gradient ---------------------------------------------- */

static double relu_c[64];

static double relu_objective(const void *ctx)
{
    const double *x = ctx;
    double s = 0.0;
    for (int i = 0; i < 64; i++)
        s += relu_c[i] * fmax(x[i], 0.0);
    return s;
}

static void test_relu_fd(void **state)
{
    float x[64], y[64], dy[64], c[64];
    double xd[64], g[64], yref[64];
    sr_test_fill(x, 64, 20, 1.0);
    sr_test_fill(c, 64, 21, 1.0);
    sr_test_to_double(relu_c, c, 64);
    sr_test_to_double(xd, x, 64);
    cpu()->dense->relu_forward(cpu(), NULL, x, y, 64);
    for (int i = 0; i < 64; i++)
        yref[i] = fmax(xd[i], 0.0);
    sr_test_expect_close("relu y", y, yref, 64, 0.0, 0.0);
    memcpy(dy, c, sizeof(dy));
    cpu()->dense->relu_backward(cpu(), NULL, y, dy, 64);
    sr_test_fd_grad(xd, 64, relu_objective, xd, g);
    sr_test_expect_nonzero("relu dx", g, 64);
    sr_test_expect_close("relu dx", dy, g, 64, 1e-6, 1e-6);
}

static void test_bias_grad(void **state)
{
    /* Large enough for the threaded path (rows * cols >= 16384, several blocks). */
    enum { R = 300, C = 70 };
    float *dy = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C);
    float db[C];
    double want[C], masked[C];
    sr_test_fill(dy, R * C, 30, 1.0);
    sr_test_fill(y, R * C, 31, 1.0);
    for (int c = 0; c < C; c++) {
        want[c] = masked[c] = 0.0;
        for (int r = 0; r < R; r++) {
            want[c] += dy[r * C + c];
            masked[c] += y[r * C + c] > 0.0f ? dy[r * C + c] : 0.0;
        }
    }
    cpu()->dense->bias_grad(cpu(), NULL, dy, R, C, db);
    sr_test_expect_close("bias_grad", db, want, C, 1e-4, 1e-5);
    cpu()->dense->relu_bias_backward(cpu(), NULL, y, dy, R, C, 1, db);
    sr_test_expect_close("relu_bias_backward dbias", db, masked, C, 1e-4, 1e-5);
    for (int i = 0; i < R * C; i++)
        if (y[i] <= 0.0f && dy[i] != 0.0f)
            fail_msg("relu_bias_backward left dy[%d] = %g where y <= 0", i, dy[i]);
    free(dy);
    free(y);
}

/* ---- interaction --------------------------------------------------------- */

enum { IB = 3, IF = 4, ID = 5, IW = ID + IF * (IF + 1) / 2 };

struct inter_case {
    double z[IB * ID], e[IB * IF * ID], c[IB * IW];
};

static double inter_objective(const void *ctx)
{
    const struct inter_case *ic = ctx;
    double out[IB * IW];
    sr_test_ref_interaction(ic->z, ic->e, IB, IF, ID, out);
    return weighted_sum(ic->c, out, IB * IW);
}

static void test_interaction_order(void **state)
{
    float z[IB * ID], e[IB * IF * ID], out[IB * IW];
    double zd[IB * ID], ed[IB * IF * ID], want[IB * IW];
    sr_test_fill(z, IB * ID, 40, 1.0);
    sr_test_fill(e, IB * IF * ID, 41, 1.0);
    sr_test_to_double(zd, z, IB * ID);
    sr_test_to_double(ed, e, IB * IF * ID);
    cpu()->dense->interaction_forward(cpu(), NULL, z, e, IB, IF, ID, out);
    sr_test_ref_interaction(zd, ed, IB, IF, ID, want);
    sr_test_expect_close("interaction out", out, want, IB * IW, 1e-6, 1e-5);

    /* Spot-check the order by hand for sample 1: [z | <e1,z> <e2,z> <e2,e1> <e3,z> ...]. */
    const double *z1 = zd + ID, *e1 = ed + IF * ID;
    double e2_e1 = 0.0, e3_z = 0.0;
    for (int d = 0; d < ID; d++) {
        e2_e1 += e1[ID + d] * e1[d];
        e3_z += e1[2 * ID + d] * z1[d];
    }
    assert_true(fabs(out[IW + ID + 2] - e2_e1) < 1e-5);
    assert_true(fabs(out[IW + ID + 3] - e3_z) < 1e-5);
    assert_int_equal(
        sr_dlrm_interaction_dim(&(struct sr_dlrm_config){.num_sparse = 26, .embedding_dim = 16}),
        367);
}

static void test_interaction_fd(void **state)
{
    float z[IB * ID], e[IB * IF * ID], c[IB * IW], dz[IB * ID], de[IB * IF * ID];
    struct inter_case ic;
    sr_test_fill(z, IB * ID, 50, 1.0);
    sr_test_fill(e, IB * IF * ID, 51, 1.0);
    sr_test_fill(c, IB * IW, 52, 1.0);
    sr_test_to_double(ic.z, z, IB * ID);
    sr_test_to_double(ic.e, e, IB * IF * ID);
    sr_test_to_double(ic.c, c, IB * IW);
    cpu()->dense->interaction_backward(cpu(), NULL, z, e, c, IB, IF, ID, dz, de);
    double gz[IB * ID], ge[IB * IF * ID];
    sr_test_fd_grad(ic.z, IB * ID, inter_objective, &ic, gz);
    sr_test_fd_grad(ic.e, IB * IF * ID, inter_objective, &ic, ge);
    sr_test_expect_nonzero("interaction dz", gz, IB * ID);
    sr_test_expect_close("interaction dz", dz, gz, IB * ID, 1e-5, 1e-4);
    sr_test_expect_close("interaction demb", de, ge, IB * IF * ID, 1e-5, 1e-4);
}

/* ---- loss ---------------------------------------------------------------- */

static void test_bce_fd(void **state)
{
    enum { N = 8 };
    const float logits[N] = {-3.0f, -0.5f, 0.0f, 0.7f, 2.5f, 60.0f, -60.0f, 1.5f};
    const float labels[N] = {0, 1, 1, 0, 1, 0, 1, 1};
    const float mask[N] = {1, 1, 1, 1, 1, 1, 1, 0};
    float dl[N];
    float loss;
    const float scale = 0.25f;
    cpu()->dense->bce_with_logits(cpu(), NULL, logits, labels, mask, N, scale, dl, &loss);
    host_wait();
    double want_loss = 0.0, want_d[N];
    for (int i = 0; i < N; i++) {
        double x = logits[i], y = labels[i], m = mask[i];
        want_loss += m * sr_test_ref_bce(x, y);
        double fd = (sr_test_ref_bce(x + SR_TEST_FD_H, y) - sr_test_ref_bce(x - SR_TEST_FD_H, y)) /
                    (2.0 * SR_TEST_FD_H);
        want_d[i] = m * fd * scale;
    }
    /* Large |logit|: exact values, no overflow (log(σ(-60)) would lose it all in fp32). */
    assert_true(fabs(sr_test_ref_bce(60.0, 0.0) - 60.0) < 1e-12);
    assert_true(fabs(loss - want_loss) < 1e-6 * want_loss);
    sr_test_expect_close("bce dlogit", dl, want_d, N, 1e-7, 1e-5);
    assert_true(dl[N - 1] == 0.0f); /* masked */
    /* Without a mask every sample counts. */
    cpu()->dense->bce_with_logits(cpu(), NULL, logits, labels, NULL, N, scale, dl, &loss);
    host_wait();
    assert_true(fabs(loss - (want_loss + sr_test_ref_bce(1.5, 1.0))) < 1e-6 * want_loss);
    assert_true(dl[N - 1] < 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_transposes),
        cmocka_unit_test(test_linear_fd),
        cmocka_unit_test(test_relu_fd),
        cmocka_unit_test(test_bias_grad),
        cmocka_unit_test(test_interaction_order),
        cmocka_unit_test(test_interaction_fd),
        cmocka_unit_test(test_bce_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
