/*
 * Whole-DLRM tests: forward/backward of a small DLRM against a float64
 * reference model (helpers/dense_ref.h), with and without a mask, gradients
 * against central differences; masked samples equal to dropped ones; the
 * tensor table and initialisation; the gradient-ready hook; bit-exact runs at
 * a batch large enough for every threaded path; and config errors. The same
 * for --interaction dcn (DCNv2 cross layers): float64 reference and central
 * differences, tensors and their initialisation, the hook's order, bit-exact
 * reruns, rank and layer errors. The ops and layers it is made of are
 * tests/test_dense.c (and the backend-ops test's dense.dcn_cross_* cases).
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
#include "shardrec/error.h"
#include "shardrec/rng.h"

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

/* The K model (Criteo Kaggle's DLRM): 13 dense, bottom 13-512-256-64-16, F 26 of D 16. */
static struct sr_dlrm_config k_config(void)
{
    return (struct sr_dlrm_config){.num_dense = 13,
                                   .bot_mlp = {13, 512, 256, 64, 16},
                                   .n_bot = 5,
                                   .top_mlp = {512, 256, 1},
                                   .n_top = 3,
                                   .num_sparse = 26,
                                   .embedding_dim = 16};
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
        sr_test_ref_linear(cur, w, b, B, in, o, l + 2 < n || relu_last, next);
        double *t = cur;
        cur = next;
        next = t;
    }
    memcpy(out, cur, sizeof(double) * B * widths[n - 1]);
    free(cur);
    free(next);
}

/* The DCNv2 cross network in float64, read from the flat block at *p (per
 * layer V [R, n], U [n, R], bias [n]): out (B, n) = x_L. */
static void ref_dcn(const double **p, const double *z, const double *pooled, int L, int R,
                    double *out)
{
    enum { n = (DF + 1) * DD };
    double x0[DB * n], h[64];
    for (int b = 0; b < DB; b++)
        for (int c = 0; c < n; c++)
            x0[b * n + c] = c < DD ? z[b * DD + c] : pooled[b * DF * DD + c - DD];
    memcpy(out, x0, sizeof x0);
    for (int l = 0; l < L; l++) {
        const double *V = *p, *U = V + R * n, *bias = U + n * R;
        *p += 2 * R * n + n;
        for (int b = 0; b < DB; b++) {
            double *x = out + b * n;
            for (int r = 0; r < R; r++) {
                h[r] = 0.0;
                for (int c = 0; c < n; c++)
                    h[r] += V[r * n + c] * x[c];
            }
            for (int c = 0; c < n; c++) {
                double u = 0.0;
                for (int r = 0; r < R; r++)
                    u += U[c * R + r] * h[r];
                x[c] = x0[b * n + c] * (u + bias[c]) + x[c];
            }
        }
    }
}

/* Logits of the reference model. */
static void ref_forward(const struct ref_model *r, double *logits)
{
    const struct sr_dlrm_config *c = &r->cfg;
    const double *p = r->params;
    int I = sr_dlrm_interaction_dim(c);
    double z[DB * DD], inter[DB * 64];
    ref_mlp(&p, r->dense, DB, c->bot_mlp, c->n_bot, 1, z);
    if (c->interaction == SR_INTERACTION_DCN)
        ref_dcn(&p, z, r->pooled, c->dcn_layers, c->dcn_rank, inter);
    else
        sr_test_ref_interaction(z, r->pooled, DB, DF, DD, inter);
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
        s += r->mask[b] * sr_test_ref_bce(logits[b], r->labels[b]);
    return s * r->scale;
}

static void check_dlrm_config(struct sr_dlrm_config cfg, const float *mask, size_t want_n)
{
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 8, 7), SR_OK);
    size_t n;
    float *params = sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    assert_int_equal(n, want_n);
    for (int t = 0; t < sr_dlrm_num_tensors(m); t++) { /* dcn biases start at 0: move them */
        const char *name;
        int ndim;
        int64_t shape[2];
        float *data, bias[64];
        sr_dlrm_tensor(m, t, &name, &ndim, shape, &data);
        if (strncmp(name, "dcn.", 4) == 0 && ndim == 1) {
            sr_test_fill(bias, (size_t)shape[0], 62 + (uint64_t)t, 0.5);
            sr_test_host_put(data, bias, sizeof(float) * (size_t)shape[0]);
        }
    }

    float dense[DB * DN], pooled[DB * DF * DD], logits[DB], dpooled[DB * DF * DD];
    const float labels[DB] = {1, 0, 0, 1, 1};
    sr_test_fill(dense, DB * DN, 60, 1.0);
    sr_test_fill(pooled, DB * DF * DD, 61, 1.0);
    struct ref_model r = {.cfg = cfg, .scale = 1.0 / DB};
    r.params = malloc(sizeof(double) * n);
    sr_test_to_double(r.params, HV(params), n);
    sr_test_to_double(r.dense, dense, DB * DN);
    sr_test_to_double(r.pooled, pooled, DB * DF * DD);
    sr_test_to_double(r.labels, labels, DB);
    for (int b = 0; b < DB; b++)
        r.mask[b] = mask ? mask[b] : 1.0;

    sr_dlrm_forward(m, NULL, dense, pooled, DB, logits);
    host_wait();
    double want_logits[DB];
    ref_forward(&r, want_logits);
    sr_test_expect_close("dlrm logits", logits, want_logits, DB, 1e-5, 1e-4);

    const float *loss_dev = sr_dlrm_backward(m, NULL, labels, mask, DB, (float)r.scale, dpooled);
    host_wait();
    double loss = *HV(loss_dev), want_loss = ref_objective(&r) / r.scale;
    assert_true(fabs(loss - want_loss) < 1e-5 * (1.0 + want_loss));

    double *g = malloc(sizeof(double) * n), gp[DB * DF * DD];
    sr_test_fd_grad(r.params, n, ref_objective, &r, g);
    sr_test_fd_grad(r.pooled, DB * DF * DD, ref_objective, &r, gp);
    sr_test_expect_nonzero("dlrm grads", g, n);
    sr_test_expect_nonzero("dlrm dpooled", gp, DB * DF * DD);
    sr_test_expect_close("dlrm grads", HV(grads), g, n, 2e-5, 1e-3);
    sr_test_expect_close("dlrm dpooled", dpooled, gp, DB * DF * DD, 2e-5, 1e-3);

    /* A second backward overwrites (does not accumulate) the gradient block. */
    sr_dlrm_forward(m, NULL, dense, pooled, DB, logits);
    host_wait();
    sr_dlrm_backward(m, NULL, labels, mask, DB, (float)r.scale, dpooled);
    host_wait();
    sr_test_expect_close("dlrm grads after a second backward", HV(grads), g, n, 2e-5, 1e-3);
    free(g);
    free(r.params);
    sr_dlrm_free(m);
}

static void check_dlrm(const float *mask)
{
    check_dlrm_config(small_config(), mask,
                      3 * 6 + 6 + 6 * 3 + 3 + 9 * 7 + 7 + 7 * 4 + 4 + 4 * 1 + 1);
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
    sr_test_fill(dense, DB * DN, 70, 1.0);
    sr_test_fill(pooled, DB * DF * DD, 71, 1.0);
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
    sr_test_fill(dense, DB * DN, 80, 1.0);
    sr_test_fill(pooled, DB * DF * DD, 81, 1.0);
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
    /* Split parts give bit-identical results (and reruns are bit-exact); the
     * data part of the top reports no layer, its weight part the 3 top
     * layers, the bottom the 2 others, in the same order as backward. */
    struct hook_log h2 = {.next_end = n};
    sr_dlrm_set_grad_ready(m, on_grad_ready, &h2);
    sr_dlrm_forward_bottom(m, NULL, dense, DB);
    host_wait();
    sr_dlrm_forward_top(m, NULL, pooled, DB, lb);
    host_wait();
    const float *loss_b = sr_dlrm_backward_top(m, NULL, labels, NULL, DB, 0.2f, db);
    host_wait();
    assert_int_equal(h2.calls, 0);
    assert_memory_equal(da, db, sizeof(da)); /* dpooled before any dW */
    sr_dlrm_backward_top_weights(m, NULL, DB);
    host_wait();
    assert_int_equal(h2.calls, 3);
    sr_dlrm_backward_bottom(m, NULL, DB);
    host_wait();
    assert_int_equal(h2.calls, 5);
    assert_int_equal(h2.next_end, 0);
    sr_dlrm_set_grad_ready(m, NULL, NULL);
    assert_memory_equal(la, lb, sizeof(la));
    assert_memory_equal(da, db, sizeof(da));
    assert_memory_equal(ga, HV(grads), n * sizeof(float));
    assert_true(loss_b == loss_dev && loss_a == *HV(loss_b)); /* the model's one loss slot */
    free(ga);
    sr_dlrm_free(m);
}

/* Two runs of forward and backward from the same state, at a batch of 256
 * (every threaded path): bit-identical logits, dpooled and gradients and a
 * loss near log 2 a sample. Returns the model's FLOPs per sample. */
static int64_t check_reruns_bitexact(const struct sr_dlrm_config *cfg, uint64_t seed)
{
    enum { B = 256 };
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), cfg, B, 1), SR_OK);
    size_t n;
    sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    float *dense = malloc(sizeof(float) * B * 13), *pooled = malloc(sizeof(float) * B * 416);
    float *dp[2] = {malloc(sizeof(float) * B * 416), malloc(sizeof(float) * B * 416)};
    float *g0 = malloc(sizeof(float) * n), logits[2][B], labels[B], loss[2];
    sr_test_fill(dense, B * 13, seed, 2.0);
    sr_test_fill(pooled, B * 416, seed + 1, 0.1);
    for (int b = 0; b < B; b++)
        labels[b] = (float)(b % 3 == 0);
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
    free(dense);
    free(pooled);
    free(dp[0]);
    free(dp[1]);
    free(g0);
    sr_dlrm_free(m);
    return sr_dlrm_flops_per_sample(cfg);
}

/* The K model: reruns are bit-identical. */
static void test_dlrm_k_bitexact(void **state)
{
    const struct sr_dlrm_config cfg = k_config();
    assert_int_equal(check_reruns_bitexact(&cfg, 90),
                     2 * (13 * 512 + 512 * 256 + 256 * 64 + 64 * 16 + 367 * 512 + 512 * 256 +
                          256 * 1 + 351 * 16));
}

/* ---- DCNv2 interaction ---------------------------------------------------- */

/* The small DLRM with L cross layers of rank R on n = (3+1)·3 = 12. */
static struct sr_dlrm_config small_dcn(int L, int R)
{
    struct sr_dlrm_config c = small_config();
    c.interaction = SR_INTERACTION_DCN;
    c.dcn_layers = L;
    c.dcn_rank = R;
    return c;
}

static size_t small_dcn_params(int L, int R)
{
    return 3 * 6 + 6 + 6 * 3 + 3 + (size_t)L * (2 * R * 12 + 12) + 12 * 7 + 7 + 7 * 4 + 4 + 4 + 1;
}

/* Logits, loss, every gradient (cross layers' V, U, bias included) and
 * dpooled (x_0 feeds every layer) against float64 central differences. */
static void test_dcn_fd(void **state)
{
    const float mask[DB] = {1, 0, 1, 1, 0};
    check_dlrm_config(small_dcn(2, 3), NULL, small_dcn_params(2, 3));
    check_dlrm_config(small_dcn(2, 3), mask, small_dcn_params(2, 3));
    check_dlrm_config(small_dcn(1, 12), NULL, small_dcn_params(1, 12)); /* R = n */
    check_dlrm_config(small_dcn(3, 1), NULL, small_dcn_params(3, 1));
}

/* Names, shapes and block order of the cross layers' tensors; V and U are
 * xavier normal draws of (seed, name, element), the biases 0. */
static void test_dcn_tensors_and_init(void **state)
{
    struct sr_dlrm_config cfg = small_dcn(2, 5);
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 4, 321), SR_OK);
    static const char *names[] = {"dcn.0.V", "dcn.0.U", "dcn.0.bias",
                                  "dcn.1.V", "dcn.1.U", "dcn.1.bias"};
    static const int64_t shapes[][2] = {{5, 12}, {12, 5}, {12, 0}, {5, 12}, {12, 5}, {12, 0}};
    assert_int_equal(sr_dlrm_num_tensors(m), 4 + 6 + 6);
    size_t off = 3 * 6 + 6 + 6 * 3 + 3;
    for (int i = 0; i < 6; i++) {
        const char *name;
        int ndim;
        int64_t shape[2];
        float *data;
        sr_dlrm_tensor(m, 4 + i, &name, &ndim, shape, &data);
        assert_string_equal(name, names[i]);
        assert_int_equal(ndim, i % 3 == 2 ? 1 : 2);
        assert_int_equal(shape[0], shapes[i][0]);
        assert_int_equal(shape[1], shapes[i][1]);
        assert_int_equal(sr_dlrm_tensor_offset(m, 4 + i), off);
        int64_t numel = ndim == 2 ? shape[0] * shape[1] : shape[0];
        double std = ndim == 2 ? sqrt(2.0 / (12 + 5)) : 0.0;
        const float *hv = HV(data);
        for (int64_t k = 0; k < numel; k++) {
            double want = std * sr_rng_normal(321, sr_rng_stream_of(name), (uint64_t)k);
            assert_true(fabs(hv[k] - want) <= 1e-6 * (1.0 + fabs(want)));
        }
        off += (size_t)numel;
    }
    const char *name;
    int ndim;
    int64_t shape[2];
    float *data;
    sr_dlrm_tensor(m, 10, &name, &ndim, shape, &data);
    assert_string_equal(name, "top_mlp.0.weight");
    assert_int_equal(shape[1], 12); /* the top MLP takes x_L, width n */
    /* one gradient group per layer: 2 bottom, 2 cross, 3 top, in block order */
    assert_int_equal(sr_dlrm_num_grad_groups(m), 7);
    size_t go, gc, end = 0;
    for (int k = 0; k < 7; k++) {
        sr_dlrm_grad_group(m, k, &go, &gc);
        assert_int_equal(go, end);
        end = go + gc;
        if (k == 2 || k == 3)
            assert_int_equal(gc, 2 * 5 * 12 + 12);
    }
    assert_int_equal(end, small_dcn_params(2, 5));
    sr_dlrm_free(m);
}

/* The hook reports the 3 top layers, then the 2 cross layers, in
 * backward_top_weights, then the bottom's 2, from the block's end; the split
 * parts give backward's bits; dpooled is final after backward_top. */
static void test_dcn_grad_hook_and_split(void **state)
{
    struct sr_dlrm_config cfg = small_dcn(2, 4);
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &cfg, 8, 9), SR_OK);
    size_t n;
    sr_dlrm_params(m, &n);
    float *grads = sr_dlrm_grads(m, NULL);
    float dense[DB * DN], pooled[DB * DF * DD], la[DB], lb[DB], da[DB * DF * DD];
    float db[DB * DF * DD];
    const float labels[DB] = {0, 1, 0, 1, 0};
    sr_test_fill(dense, DB * DN, 82, 1.0);
    sr_test_fill(pooled, DB * DF * DD, 83, 1.0);
    sr_dlrm_forward(m, NULL, dense, pooled, DB, la);
    host_wait();
    sr_dlrm_backward(m, NULL, labels, NULL, DB, 0.2f, da);
    host_wait();
    float *ga = malloc(sizeof(float) * n);
    memcpy(ga, HV(grads), sizeof(float) * n);
    struct hook_log h = {.next_end = n};
    sr_dlrm_set_grad_ready(m, on_grad_ready, &h);
    sr_dlrm_forward_bottom(m, NULL, dense, DB);
    sr_dlrm_forward_top(m, NULL, pooled, DB, lb);
    sr_dlrm_backward_top(m, NULL, labels, NULL, DB, 0.2f, db);
    host_wait();
    assert_int_equal(h.calls, 0);
    assert_memory_equal(da, db, sizeof(da));
    sr_dlrm_backward_top_weights(m, NULL, DB);
    host_wait();
    assert_int_equal(h.calls, 5);
    sr_dlrm_backward_bottom(m, NULL, DB);
    host_wait();
    assert_int_equal(h.calls, 7);
    assert_int_equal(h.next_end, 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(h.seen[i], 1);
    sr_dlrm_set_grad_ready(m, NULL, NULL);
    assert_memory_equal(la, lb, sizeof(la));
    assert_memory_equal(ga, HV(grads), n * sizeof(float));
    free(ga);
    sr_dlrm_free(m);
}

/* The K model with 3 cross layers of rank 128: reruns are bit-identical
 * (every threaded path of the GEMMs and the cross ops). */
static void test_dcn_k_bitexact(void **state)
{
    struct sr_dlrm_config cfg = k_config();
    cfg.interaction = SR_INTERACTION_DCN, cfg.dcn_layers = 3, cfg.dcn_rank = 128;
    assert_int_equal(check_reruns_bitexact(&cfg, 92),
                     2 * (13 * 512 + 512 * 256 + 256 * 64 + 64 * 16 + 432 * 512 + 512 * 256 +
                          256 * 1 + 3 * 2 * 432 * 128));
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
    struct sr_dlrm_config ok = k_config();
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
    c = ok;
    c.interaction = SR_INTERACTION_DCN, c.dcn_layers = 3, c.dcn_rank = 433;
    expect_config_error(c, "--dcn-rank 433: the rank must be 1 to n = (F+1)·D = (26+1)·16 = 432");
    c.dcn_rank = 432;
    assert_int_equal(sr_dlrm_config_check(&c), SR_OK);
    c.dcn_rank = 0;
    expect_config_error(c, "--dcn-rank 0");
    c.dcn_rank = 8, c.dcn_layers = 0;
    expect_config_error(c, "--dcn-layers 0: give 1 to 16");
    c.dcn_layers = SR_DCN_MAX_LAYERS + 1;
    expect_config_error(c, "--dcn-layers 17");
    struct sr_dlrm *m;
    assert_int_equal(sr_dlrm_init(&m, cpu(), &ok, 0, 1), SR_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dlrm_fd),
        cmocka_unit_test(test_dlrm_fd_masked),
        cmocka_unit_test(test_dlrm_mask_equals_dropping),
        cmocka_unit_test(test_dlrm_tensors_and_init),
        cmocka_unit_test(test_dlrm_grad_hook_and_split),
        cmocka_unit_test(test_dlrm_k_bitexact),
        cmocka_unit_test(test_dcn_fd),
        cmocka_unit_test(test_dcn_tensors_and_init),
        cmocka_unit_test(test_dcn_grad_hook_and_split),
        cmocka_unit_test(test_dcn_k_bitexact),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
