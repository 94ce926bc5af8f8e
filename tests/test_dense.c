/*
 * Dense model tests: every dense op and layer against a float64 reference
 * written here, gradients against central differences of that reference
 * (the reference is float64, so its differences are accurate to ~1e-9 and the
 * comparison measures only the fp32 kernels' error), the interaction's output
 * order against a naive Gram matrix, the whole DLRM's forward/backward with
 * and without a mask, its tensor table and initialisation, and config errors.
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

#include "helpers/host_view.h"
#include "shardrec/device.h"
#include "shardrec/dlrm.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "device/ops_dense.h"
#include "model/linear.h"

#define FD_H 1e-6

/* ---- helpers ------------------------------------------------------------- */

static void fill(float *x, size_t n, uint64_t stream, double scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * (2.0 * sr_rng_uniform(42, stream, i) - 1.0));
}

static void to_double(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* |got - want| <= atol + rtol * |want|, with the index in the failure text. */
static void expect_close(const char *what, const float *got, const double *want, size_t n,
                         double atol, double rtol)
{
    sr_dev_sync(sr_device_cpu(), NULL); /* a host read: wait for the device first */
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        if (!(err <= atol + rtol * fabs(want[i]))) {
            fail_msg("%s[%zu]: got %.9g want %.9g (err %.3g)", what, i, got[i], want[i], err);
        }
    }
}

/* The tests read results on the host: a wait after each call whose outputs
 * they read (the deferred CPU device, SR_CPU_DEFERRED=1, proves it). */
static void host_wait(void)
{
    sr_dev_sync(sr_device_cpu(), NULL);
}

/* Fail unless some value is clearly non-zero (a vacuous gradient check). */
static void expect_nonzero(const char *what, const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    if (!(m > 1e-4))
        fail_msg("%s is all (near) zero: the check would prove nothing", what);
}

static struct sr_device *cpu(void)
{
    return sr_device_cpu();
}

/* ---- float64 references -------------------------------------------------- */

/* y (B, out) = act(x (B, in) W(out, in)ᵀ + b). */
static void ref_linear(const double *x, const double *w, const double *b, int B, int in, int out,
                       int relu, double *y)
{
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            double acc = b[o];
            for (int i = 0; i < in; i++)
                acc += x[r * in + i] * w[o * in + i];
            y[r * out + o] = relu && acc < 0.0 ? 0.0 : acc;
        }
}

/* The dot interaction by its definition: full Gram matrix, then the strict
 * lower triangle read row by row. */
static void ref_interaction(const double *z, const double *e, int B, int F, int D, double *out)
{
    int N = F + 1, width = D + F * (F + 1) / 2;
    double *X = malloc(sizeof(double) * N * D), *G = malloc(sizeof(double) * N * N);
    for (int b = 0; b < B; b++) {
        for (int d = 0; d < D; d++)
            X[d] = z[b * D + d];
        for (int f = 0; f < F; f++)
            for (int d = 0; d < D; d++)
                X[(f + 1) * D + d] = e[(b * F + f) * D + d];
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                G[i * N + j] = 0.0;
                for (int d = 0; d < D; d++)
                    G[i * N + j] += X[i * D + d] * X[j * D + d];
            }
        double *o = out + (size_t)b * width;
        for (int d = 0; d < D; d++)
            o[d] = X[d];
        int k = D;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < i; j++)
                o[k++] = G[i * N + j];
    }
    free(X);
    free(G);
}

static double ref_bce(double x, double y)
{
    return fmax(x, 0.0) - x * y + log1p(exp(-fabs(x)));
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
    fill(a, M * K, 1, 1.0);
    fill(b, K * N, 2, 1.0);
    fill(c0, M * N, 3, 1.0);
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
            expect_close(ta ? (tb ? "gemm TT" : "gemm TN") : (tb ? "gemm NT" : "gemm NN"), c, want,
                         M * N, 1e-5, 1e-5);
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
    ref_linear(lc->x, lc->w, lc->b, LB, LIN, LOUT, lc->relu, y);
    return weighted_sum(lc->c, y, LB * LOUT);
}

/* Central difference of the objective w.r.t. each element of p (n). */
static void fd_grad(double *p, size_t n, double (*objective)(const void *), const void *ctx,
                    double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double up = objective(ctx);
        p[i] = keep - FD_H;
        double down = objective(ctx);
        p[i] = keep;
        grad[i] = (up - down) / (2.0 * FD_H);
    }
}

static double linear_objective_v(const void *ctx)
{
    return linear_objective(ctx);
}

static void check_linear(int relu)
{
    float x[LB * LIN], w[LOUT * LIN], b[LOUT], c[LB * LOUT], y[LB * LOUT];
    float dw[LOUT * LIN], db[LOUT], dx[LB * LIN], dy[LB * LOUT];
    fill(x, LB * LIN, 10, 1.0);
    fill(w, LOUT * LIN, 11, 1.0);
    fill(b, LOUT, 12, 0.5);
    fill(c, LB * LOUT, 13, 1.0);
    struct sr_linear l = {
        .in = LIN, .out = LOUT, .relu = relu, .weight = w, .bias = b, .dweight = dw, .dbias = db};
    sr_linear_forward(cpu(), NULL, &l, x, LB, y);
    host_wait();

    struct linear_case lc = {.relu = relu};
    to_double(lc.x, x, LB * LIN);
    to_double(lc.w, w, LOUT * LIN);
    to_double(lc.b, b, LOUT);
    to_double(lc.c, c, LB * LOUT);
    double yref[LB * LOUT];
    ref_linear(lc.x, lc.w, lc.b, LB, LIN, LOUT, relu, yref);
    expect_close("linear y", y, yref, LB * LOUT, 1e-5, 1e-5);

    memcpy(dy, c, sizeof(dy)); /* dL/dy = c */
    sr_linear_backward(cpu(), NULL, &l, x, y, dy, LB, dx);
    host_wait();
    double gw[LOUT * LIN], gb[LOUT], gx[LB * LIN];
    fd_grad(lc.w, LOUT * LIN, linear_objective_v, &lc, gw);
    fd_grad(lc.b, LOUT, linear_objective_v, &lc, gb);
    fd_grad(lc.x, LB * LIN, linear_objective_v, &lc, gx);
    expect_nonzero("linear dweight", gw, LOUT * LIN);
    expect_close("linear dweight", dw, gw, LOUT * LIN, 1e-5, 1e-4);
    expect_close("linear dbias", db, gb, LOUT, 1e-5, 1e-4);
    expect_close("linear dx", dx, gx, LB * LIN, 1e-5, 1e-4);
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
    fill(x, 64, 20, 1.0);
    fill(c, 64, 21, 1.0);
    to_double(relu_c, c, 64);
    to_double(xd, x, 64);
    cpu()->dense->relu_forward(cpu(), NULL, x, y, 64);
    for (int i = 0; i < 64; i++)
        yref[i] = fmax(xd[i], 0.0);
    expect_close("relu y", y, yref, 64, 0.0, 0.0);
    memcpy(dy, c, sizeof(dy));
    cpu()->dense->relu_backward(cpu(), NULL, y, dy, 64);
    fd_grad(xd, 64, relu_objective, xd, g);
    expect_nonzero("relu dx", g, 64);
    expect_close("relu dx", dy, g, 64, 1e-6, 1e-6);
}

static void test_bias_grad(void **state)
{
    /* Large enough for the threaded path (rows * cols >= 16384, several blocks). */
    enum { R = 300, C = 70 };
    float *dy = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C);
    float db[C];
    double want[C], masked[C];
    fill(dy, R * C, 30, 1.0);
    fill(y, R * C, 31, 1.0);
    for (int c = 0; c < C; c++) {
        want[c] = masked[c] = 0.0;
        for (int r = 0; r < R; r++) {
            want[c] += dy[r * C + c];
            masked[c] += y[r * C + c] > 0.0f ? dy[r * C + c] : 0.0;
        }
    }
    cpu()->dense->bias_grad(cpu(), NULL, dy, R, C, db);
    expect_close("bias_grad", db, want, C, 1e-4, 1e-5);
    cpu()->dense->relu_bias_backward(cpu(), NULL, y, dy, R, C, 1, db);
    expect_close("relu_bias_backward dbias", db, masked, C, 1e-4, 1e-5);
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
    ref_interaction(ic->z, ic->e, IB, IF, ID, out);
    return weighted_sum(ic->c, out, IB * IW);
}

static void test_interaction_order(void **state)
{
    float z[IB * ID], e[IB * IF * ID], out[IB * IW];
    double zd[IB * ID], ed[IB * IF * ID], want[IB * IW];
    fill(z, IB * ID, 40, 1.0);
    fill(e, IB * IF * ID, 41, 1.0);
    to_double(zd, z, IB * ID);
    to_double(ed, e, IB * IF * ID);
    cpu()->dense->interaction_forward(cpu(), NULL, z, e, IB, IF, ID, out);
    ref_interaction(zd, ed, IB, IF, ID, want);
    expect_close("interaction out", out, want, IB * IW, 1e-6, 1e-5);

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
    fill(z, IB * ID, 50, 1.0);
    fill(e, IB * IF * ID, 51, 1.0);
    fill(c, IB * IW, 52, 1.0);
    to_double(ic.z, z, IB * ID);
    to_double(ic.e, e, IB * IF * ID);
    to_double(ic.c, c, IB * IW);
    cpu()->dense->interaction_backward(cpu(), NULL, z, e, c, IB, IF, ID, dz, de);
    double gz[IB * ID], ge[IB * IF * ID];
    fd_grad(ic.z, IB * ID, inter_objective, &ic, gz);
    fd_grad(ic.e, IB * IF * ID, inter_objective, &ic, ge);
    expect_nonzero("interaction dz", gz, IB * ID);
    expect_close("interaction dz", dz, gz, IB * ID, 1e-5, 1e-4);
    expect_close("interaction demb", de, ge, IB * IF * ID, 1e-5, 1e-4);
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
        want_loss += m * ref_bce(x, y);
        double fd = (ref_bce(x + FD_H, y) - ref_bce(x - FD_H, y)) / (2.0 * FD_H);
        want_d[i] = m * fd * scale;
    }
    /* Large |logit|: exact values, no overflow (log(σ(-60)) would lose it all in fp32). */
    assert_true(fabs(ref_bce(60.0, 0.0) - 60.0) < 1e-12);
    assert_true(fabs(loss - want_loss) < 1e-6 * want_loss);
    expect_close("bce dlogit", dl, want_d, N, 1e-7, 1e-5);
    assert_true(dl[N - 1] == 0.0f); /* masked */
    /* Without a mask every sample counts. */
    cpu()->dense->bce_with_logits(cpu(), NULL, logits, labels, NULL, N, scale, dl, &loss);
    host_wait();
    assert_true(fabs(loss - (want_loss + ref_bce(1.5, 1.0))) < 1e-6 * want_loss);
    assert_true(dl[N - 1] < 0.0f);
}

/* ---- whole DLRM ---------------------------------------------------------- */

/* A small DLRM: 3 dense, bottom 3-6-3, F 3 of D 3 (I = 3 + 6 = 9), top 7-4-1. */
enum { DB = 5, DN = 3, DF = 3, DD = 3 };

static struct sr_dlrm_config small_config(void)
{
    return (struct sr_dlrm_config){.num_dense = DN,
                                   .bot_mlp = {DN, 6, DD},
                                   .n_bot = 3,
                                   .top_mlp = {7, 4, 1},
                                   .n_top = 3,
                                   .num_sparse = DF,
                                   .embedding_dim = DD};
}

/* The float64 reference model: params in the documented flat layout
 * (bottom layers then top layers, each W [out,in] then b [out]). */
struct ref_model {
    struct sr_dlrm_config cfg;
    double *params;
    double dense[DB * DN], pooled[DB * DF * DD], labels[DB], mask[DB];
    double scale;
};

static void ref_mlp(const double **p, const double *x, int B, const int *widths, int n,
                    int relu_last, double *out)
{
    double *cur = malloc(sizeof(double) * B * 64), *next = malloc(sizeof(double) * B * 64);
    memcpy(cur, x, sizeof(double) * B * widths[0]);
    for (int l = 0; l + 1 < n; l++) {
        int in = widths[l], o = widths[l + 1];
        const double *w = *p, *b = *p + o * in;
        *p += o * in + o;
        ref_linear(cur, w, b, B, in, o, l + 2 < n || relu_last, next);
        double *t = cur;
        cur = next;
        next = t;
    }
    memcpy(out, cur, sizeof(double) * B * widths[n - 1]);
    free(cur);
    free(next);
}

/* Logits of the reference model. */
static void ref_forward(const struct ref_model *r, double *logits)
{
    const struct sr_dlrm_config *c = &r->cfg;
    const double *p = r->params;
    int I = DD + DF * (DF + 1) / 2;
    double z[DB * DD], inter[DB * 9];
    ref_mlp(&p, r->dense, DB, c->bot_mlp, c->n_bot, 1, z);
    ref_interaction(z, r->pooled, DB, DF, DD, inter);
    int widths[SR_MLP_MAX + 1] = {I};
    for (int l = 0; l < c->n_top; l++)
        widths[l + 1] = c->top_mlp[l];
    ref_mlp(&p, inter, DB, widths, c->n_top + 1, 0, logits);
}

/* loss_scale * Σ mask * BCE: the objective whose gradient backward writes. */
static double ref_objective(const void *ctx)
{
    const struct ref_model *r = ctx;
    double logits[DB], s = 0.0;
    ref_forward(r, logits);
    for (int b = 0; b < DB; b++)
        s += r->mask[b] * ref_bce(logits[b], r->labels[b]);
    return s * r->scale;
}

static void check_dlrm(const float *mask)
{
    struct sr_dlrm_config cfg = small_config();
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 8, 7), SR_OK);
    size_t n;
    float *params = sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    assert_int_equal(n, 3 * 6 + 6 + 6 * 3 + 3 + 9 * 7 + 7 + 7 * 4 + 4 + 4 * 1 + 1);

    float dense[DB * DN], pooled[DB * DF * DD], logits[DB], dpooled[DB * DF * DD];
    const float labels[DB] = {1, 0, 0, 1, 1};
    fill(dense, DB * DN, 60, 1.0);
    fill(pooled, DB * DF * DD, 61, 1.0);
    struct ref_model r = {.cfg = cfg, .scale = 1.0 / DB};
    r.params = malloc(sizeof(double) * n);
    to_double(r.params, HV(params), n);
    to_double(r.dense, dense, DB * DN);
    to_double(r.pooled, pooled, DB * DF * DD);
    to_double(r.labels, labels, DB);
    for (int b = 0; b < DB; b++)
        r.mask[b] = mask ? mask[b] : 1.0;

    sr_dlrm_forward(m, NULL, dense, pooled, DB, logits);
    host_wait();
    double want_logits[DB];
    ref_forward(&r, want_logits);
    expect_close("dlrm logits", logits, want_logits, DB, 1e-5, 1e-4);

    const float *loss_dev = sr_dlrm_backward(m, NULL, labels, mask, DB, (float)r.scale, dpooled);
    host_wait();
    double loss = *HV(loss_dev), want_loss = ref_objective(&r) / r.scale;
    assert_true(fabs(loss - want_loss) < 1e-5 * (1.0 + want_loss));

    double *g = malloc(sizeof(double) * n), gp[DB * DF * DD];
    fd_grad(r.params, n, ref_objective, &r, g);
    fd_grad(r.pooled, DB * DF * DD, ref_objective, &r, gp);
    expect_nonzero("dlrm grads", g, n);
    expect_nonzero("dlrm dpooled", gp, DB * DF * DD);
    expect_close("dlrm grads", HV(grads), g, n, 2e-5, 1e-3);
    expect_close("dlrm dpooled", dpooled, gp, DB * DF * DD, 2e-5, 1e-3);

    /* A second backward overwrites (does not accumulate) the gradient block. */
    sr_dlrm_forward(m, NULL, dense, pooled, DB, logits);
    host_wait();
    sr_dlrm_backward(m, NULL, labels, mask, DB, (float)r.scale, dpooled);
    host_wait();
    expect_close("dlrm grads after a second backward", HV(grads), g, n, 2e-5, 1e-3);
    free(g);
    free(r.params);
    sr_dlrm_free(m);
}

static void test_dlrm_fd(void **state)
{
    check_dlrm(NULL);
}

static void test_dlrm_fd_masked(void **state)
{
    const float mask[DB] = {1, 0, 1, 1, 0};
    check_dlrm(mask);
}

/* Masked samples: no loss, no gradient, zero dpooled rows; equal to dropping them. */
static void test_dlrm_mask_equals_dropping(void **state)
{
    struct sr_dlrm_config cfg = small_config();
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 8, 7), SR_OK);
    size_t n;
    sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    float dense[DB * DN], pooled[DB * DF * DD], logits[DB], dp[DB * DF * DD];
    const float labels[DB] = {1, 0, 0, 1, 1}, mask[DB] = {1, 1, 1, 0, 0};
    fill(dense, DB * DN, 70, 1.0);
    fill(pooled, DB * DF * DD, 71, 1.0);
    sr_dlrm_forward(m, NULL, dense, pooled, DB, logits);
    host_wait();
    const float *loss_dev = sr_dlrm_backward(m, NULL, labels, mask, DB, 0.125f, dp);
    host_wait();
    double masked = *HV(loss_dev);
    float *g_masked = malloc(sizeof(float) * n);
    memcpy(g_masked, HV(grads), sizeof(float) * n);
    for (int i = 3 * DF * DD; i < DB * DF * DD; i++)
        assert_true(dp[i] == 0.0f);
    sr_dlrm_forward(m, NULL, dense, pooled, 3, logits);
    host_wait();
    assert_ptr_equal(sr_dlrm_backward(m, NULL, labels, NULL, 3, 0.125f, dp), loss_dev);
    host_wait();
    double dropped = *HV(loss_dev);
    assert_true(fabs(masked - dropped) < 1e-9);
    const float *gv = HV(grads);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(g_masked[i] - gv[i]) <= 1e-6f * (1.0f + fabsf(gv[i])));
    free(g_masked);
    sr_dlrm_free(m);
}

/* ---- tensors, init, hooks, determinism ------------------------------------ */

static void test_dlrm_tensors_and_init(void **state)
{
    struct sr_dlrm_config cfg = small_config();
    struct sr_dlrm *m, *m2;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 4, 123), SR_OK);
    size_t n;
    float *params = sr_dlrm_params(m, &n);
    static const char *names[] = {"bot_mlp.0.weight", "bot_mlp.0.bias",   "bot_mlp.1.weight",
                                  "bot_mlp.1.bias",   "top_mlp.0.weight", "top_mlp.0.bias",
                                  "top_mlp.1.weight", "top_mlp.1.bias",   "top_mlp.2.weight",
                                  "top_mlp.2.bias"};
    static const int64_t shapes[][2] = {{6, 3}, {6, 0}, {3, 6}, {3, 0}, {7, 9},
                                        {7, 0}, {4, 7}, {4, 0}, {1, 4}, {1, 0}};
    assert_int_equal(sr_dlrm_num_tensors(m), 10);
    size_t off = 0;
    for (int i = 0; i < 10; i++) {
        const char *name;
        int ndim;
        int64_t shape[2];
        float *data;
        sr_dlrm_tensor(m, i, &name, &ndim, shape, &data);
        assert_string_equal(name, names[i]);
        assert_int_equal(ndim, i % 2 ? 1 : 2);
        assert_int_equal(shape[0], shapes[i][0]);
        if (ndim == 2)
            assert_int_equal(shape[1], shapes[i][1]);
        assert_ptr_equal(data, params + off); /* contiguous, in block order */
        assert_int_equal(sr_dlrm_tensor_offset(m, i), off);
        /* Reference init: std * N(0,1) keyed by (seed, tensor name, element). */
        int64_t numel = ndim == 2 ? shape[0] * shape[1] : shape[0];
        double std = ndim == 2 ? sqrt(2.0 / (double)(shape[0] + shape[1])) : sqrt(1.0 / shape[0]);
        const float *hv = HV(data);
        for (int64_t k = 0; k < numel; k++) {
            double want = std * sr_rng_normal(123, sr_rng_stream_of(name), (uint64_t)k);
            assert_true(fabs(hv[k] - want) <= 1e-6 * (1.0 + fabs(want)));
        }
        off += (size_t)numel;
    }
    assert_int_equal(off, n);
    /* Same seed, same model; another seed, another model. */
    assert_int_equal(sr_dlrm_init(&m2, cpu(), &cfg, 16, 123), SR_OK);
    assert_memory_equal(HV(params), HV(sr_dlrm_params(m2, NULL)), n * sizeof(float));
    sr_dlrm_free(m2);
    assert_int_equal(sr_dlrm_init(&m2, cpu(), &cfg, 4, 124), SR_OK);
    assert_memory_not_equal(HV(params), HV(sr_dlrm_params(m2, NULL)), n * sizeof(float));
    sr_dlrm_free(m2);
    sr_dlrm_free(m);
    sr_dlrm_free(NULL);
}

struct hook_log {
    int calls;
    size_t next_end; /* layers finish from the end of the block backwards */
    unsigned char seen[4096];
};

static void on_grad_ready(void *ctx, size_t offset, size_t count, sr_stream_t s)
{
    struct hook_log *h = ctx;
    h->calls++;
    assert_int_equal(offset + count, h->next_end);
    h->next_end = offset;
    for (size_t i = offset; i < offset + count; i++)
        h->seen[i]++;
}

static void test_dlrm_grad_hook_and_split(void **state)
{
    struct sr_dlrm_config cfg = small_config();
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 8, 9), SR_OK);
    size_t n;
    sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    struct hook_log h = {.next_end = n};
    sr_dlrm_set_grad_ready(m, on_grad_ready, &h);
    float dense[DB * DN], pooled[DB * DF * DD], la[DB], lb[DB], da[DB * DF * DD];
    float db[DB * DF * DD];
    const float labels[DB] = {0, 1, 0, 1, 0};
    fill(dense, DB * DN, 80, 1.0);
    fill(pooled, DB * DF * DD, 81, 1.0);
    sr_dlrm_forward(m, NULL, dense, pooled, DB, la);
    host_wait();
    const float *loss_dev = sr_dlrm_backward(m, NULL, labels, NULL, DB, 0.2f, da);
    host_wait();
    float loss_a = *HV(loss_dev);
    assert_int_equal(h.calls, 5);
    assert_int_equal(h.next_end, 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(h.seen[i], 1);
    float *ga = malloc(sizeof(float) * n);
    memcpy(ga, HV(grads), sizeof(float) * n);
    sr_dlrm_set_grad_ready(m, NULL, NULL);
    /* Split halves give bit-identical results (and reruns are bit-exact). */
    sr_dlrm_forward_bottom(m, NULL, dense, DB);
    host_wait();
    sr_dlrm_forward_top(m, NULL, pooled, DB, lb);
    host_wait();
    const float *loss_b = sr_dlrm_backward_top(m, NULL, labels, NULL, DB, 0.2f, db);
    host_wait();
    sr_dlrm_backward_bottom(m, NULL, DB);
    host_wait();
    assert_memory_equal(la, lb, sizeof(la));
    assert_memory_equal(da, db, sizeof(da));
    assert_memory_equal(ga, HV(grads), n * sizeof(float));
    assert_true(loss_b == loss_dev && loss_a == *HV(loss_b)); /* the model's one loss slot */
    free(ga);
    sr_dlrm_free(m);
}

/* The K model at a batch large enough for every threaded path: two runs
 * from the same state give bit-identical logits, gradients and dpooled. */
static void test_dlrm_k_bitexact(void **state)
{
    struct sr_dlrm_config cfg = {.num_dense = 13,
                                 .bot_mlp = {13, 512, 256, 64, 16},
                                 .n_bot = 5,
                                 .top_mlp = {512, 256, 1},
                                 .n_top = 3,
                                 .num_sparse = 26,
                                 .embedding_dim = 16};
    enum { B = 256 };
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, B, 1), SR_OK);
    size_t n;
    sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    float *dense = malloc(sizeof(float) * B * 13), *pooled = malloc(sizeof(float) * B * 416);
    float *dp[2] = {malloc(sizeof(float) * B * 416), malloc(sizeof(float) * B * 416)};
    float *g0 = malloc(sizeof(float) * n), logits[2][B], labels[B];
    fill(dense, B * 13, 90, 2.0);
    fill(pooled, B * 416, 91, 0.1);
    for (int b = 0; b < B; b++)
        labels[b] = (float)(b % 3 == 0);
    float loss[2];
    for (int run = 0; run < 2; run++) {
        sr_dlrm_forward(m, NULL, dense, pooled, B, logits[run]);
        host_wait();
        const float *loss_dev = sr_dlrm_backward(m, NULL, labels, NULL, B, 1.0f / B, dp[run]);
        host_wait();
        loss[run] = *HV(loss_dev);
        if (run == 0)
            memcpy(g0, HV(grads), sizeof(float) * n);
    }
    assert_true(loss[0] == loss[1]);
    assert_true(loss[0] > 0.3 * B && loss[0] < 1.5 * B); /* near log 2 per sample at init */
    assert_memory_equal(logits[0], logits[1], sizeof(logits[0]));
    assert_memory_equal(dp[0], dp[1], sizeof(float) * B * 416);
    assert_memory_equal(g0, HV(grads), sizeof(float) * n);
    assert_int_equal(sr_dlrm_flops_per_sample(&cfg),
                     2 * (13 * 512 + 512 * 256 + 256 * 64 + 64 * 16 + 367 * 512 + 512 * 256 +
                          256 * 1 + 351 * 16));
    free(dense);
    free(pooled);
    free(dp[0]);
    free(dp[1]);
    free(g0);
    sr_dlrm_free(m);
}

/* ---- config errors ------------------------------------------------------- */

static void expect_config_error(struct sr_dlrm_config cfg, const char *needle)
{
    sr_error_clear();
    assert_int_equal(sr_dlrm_config_check(&cfg), SR_ERR_INVALID_ARG);
    if (!strstr(sr_error_message(), needle))
        fail_msg("message '%s' lacks '%s'", sr_error_message(), needle);
    struct sr_dlrm *m = (struct sr_dlrm *)&cfg;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 4, 1), SR_ERR_INVALID_ARG);
    assert_null(m);
}

static void test_config_errors(void **state)
{
    struct sr_dlrm_config ok = {.num_dense = 13,
                                .bot_mlp = {13, 512, 256, 64, 16},
                                .n_bot = 5,
                                .top_mlp = {512, 256, 1},
                                .n_top = 3,
                                .num_sparse = 26,
                                .embedding_dim = 16};
    assert_int_equal(sr_dlrm_config_check(&ok), SR_OK);
    struct sr_dlrm_config c = ok;
    c.bot_mlp[0] = 12;
    expect_config_error(c, "make --bot-mlp start with 13");
    c = ok;
    c.bot_mlp[4] = 32;
    expect_config_error(c, "differs from the embedding dim 16");
    c = ok;
    c.top_mlp[2] = 2;
    expect_config_error(c, "must end with 1");
    c = ok;
    c.bot_mlp[2] = 0;
    expect_config_error(c, "at least 1");
    c = ok;
    c.top_mlp[0] = -4;
    expect_config_error(c, "top MLP width -4");
    c = ok;
    c.n_bot = SR_MLP_MAX + 1;
    expect_config_error(c, "needs 2 to 16");
    c = ok;
    c.n_bot = 1;
    expect_config_error(c, "needs 2 to 16");
    c = ok;
    c.n_top = 0;
    expect_config_error(c, "needs 1 to 16");
    c = ok;
    c.num_sparse = 0;
    expect_config_error(c, "sparse features");
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &ok, 0, 1), SR_ERR_INVALID_ARG);
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
        cmocka_unit_test(test_dlrm_fd),
        cmocka_unit_test(test_dlrm_fd_masked),
        cmocka_unit_test(test_dlrm_mask_equals_dropping),
        cmocka_unit_test(test_dlrm_tensors_and_init),
        cmocka_unit_test(test_dlrm_grad_hook_and_split),
        cmocka_unit_test(test_dlrm_k_bitexact),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
