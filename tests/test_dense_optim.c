/*
 * Dense optimizer and learning-rate schedule tests: SGD, Adagrad (with and
 * without an initial accumulator) and Adam over three steps against the
 * formulas of optim.h evaluated in float64 here, a few first-step values
 * worked out by hand, the rejection of row-wise Adagrad, schedule values at
 * the steps where the schedule changes, and each kind of spec error.
 *
 * The float64 reference takes eps, betas and the initial accumulator from
 * the PyTorch documentation as written below, never from the code under
 * test, and runs again with gradients of the size of eps, where eps moves
 * every update by O(1): a changed default fails here.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "helpers/host_view.h"
#include "shardrec/device.h"
#include "shardrec/dlrm.h"
#include "shardrec/error.h"

enum { N = 6, STEPS = 3 };

/* torch.optim.Adagrad: eps 1e-10, initial_accumulator_value 0;
 * torch.optim.Adam: betas (0.9, 0.999), eps 1e-8. */
#define DOC_ADAGRAD_EPS                 1e-10
#define DOC_ADAGRAD_INITIAL_ACCUMULATOR 0.0
#define DOC_ADAM_BETA1                  0.9
#define DOC_ADAM_BETA2                  0.999
#define DOC_ADAM_EPS                    1e-8

static const float w0[N] = {0.5f, -1.0f, 2.0f, 0.0f, -0.25f, 3.0f};
/* Gradients of steps 1..3; element 3 sees a zero gradient at step 2. */
static const float grads[STEPS][N] = {
    {0.1f, -0.2f, 0.3f, 1.0f, -0.05f, 0.0f},
    {-0.3f, 0.1f, 0.2f, 0.0f, 0.4f, 1e-3f},
    {0.2f, 0.2f, -0.1f, -0.5f, 0.05f, 2.0f},
};

/* Gradient i of step t (from 1), scaled: the same floats for both sides. */
static float grad(int t, int i, double scale)
{
    return (float)(grads[t - 1][i] * scale);
}

/* The float64 reference of optim.h's formulas with the documented constants
 * (s0: Adagrad's initial accumulator), three steps of gradients * scale. */
static void reference(enum sr_optim_kind kind, double s0, float lr, double scale, double w[N])
{
    const double eps = kind == SR_OPTIM_ADAGRAD ? DOC_ADAGRAD_EPS : DOC_ADAM_EPS;
    const double b1 = DOC_ADAM_BETA1, b2 = DOC_ADAM_BETA2;
    double s[N], m[N], v[N];
    for (int i = 0; i < N; i++) {
        w[i] = w0[i];
        s[i] = s0;
        m[i] = v[i] = 0.0;
    }
    for (int t = 1; t <= STEPS; t++)
        for (int i = 0; i < N; i++) {
            double g = grad(t, i, scale);
            if (kind == SR_OPTIM_SGD) {
                w[i] -= lr * g;
            } else if (kind == SR_OPTIM_ADAGRAD) {
                s[i] += g * g;
                w[i] -= lr * g / (sqrt(s[i]) + eps);
            } else {
                m[i] = b1 * m[i] + (1 - b1) * g;
                v[i] = b2 * v[i] + (1 - b2) * g * g;
                double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
                w[i] -= lr * mh / (sqrt(vh) + eps);
            }
        }
}

/* Run the optimizer for STEPS steps of gradients * scale; w1 receives the
 * weights after step 1. */
/* The tests read results on the host: a wait after each call whose outputs
 * they read (the deferred CPU device, SR_CPU_DEFERRED=1, proves it). */
static void host_wait(void)
{
    sr_dev_sync(sr_device_cpu(), NULL);
}

static void run_scaled(struct sr_optim_config c, float lr, double scale, float w[N], float w1[N])
{
    struct sr_dense_optim *o;
    sr_dense_optim_init(&o, sr_device_cpu(), &c, N);
    memcpy(w, w0, sizeof(w0));
    memcpy(w1, w0, sizeof(w0));
    for (int t = 1; t <= STEPS; t++) {
        float g[N];
        for (int i = 0; i < N; i++)
            g[i] = grad(t, i, scale);
        const struct sr_step_scalars sc = {.dense_lr = lr, .step = t}; /* host-visible device */
        sr_dense_optim_step(o, NULL, w, g, &sc);
        host_wait();
        if (t == 1)
            memcpy(w1, w, sizeof(float) * N);
    }
    sr_dense_optim_free(o);
}

static void run(struct sr_optim_config c, float lr, float w[N], float w1[N])
{
    run_scaled(c, lr, 1.0, w, w1);
}

static void expect_matches(const char *what, const float *got, const double *want)
{
    for (int i = 0; i < N; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-6 + 1e-5 * fabs(want[i])))
            fail_msg("%s w[%d]: got %.9g want %.9g", what, i, got[i], want[i]);
}

static void test_sgd(void **state)
{
    struct sr_optim_config c = sr_optim_config_default(SR_OPTIM_SGD);
    float w[N], w1[N];
    double want[N];
    run(c, 0.1f, w, w1);
    reference(SR_OPTIM_SGD, 0.0, 0.1f, 1.0, want);
    expect_matches("sgd", w, want);
    /* By hand: 0.5 - 0.1*(0.1 - 0.3 + 0.2) = 0.5; -1 - 0.1*(-0.2 + 0.1 + 0.2) = -1.01. */
    assert_true(fabsf(w[0] - 0.5f) < 1e-6f);
    assert_true(fabsf(w[1] + 1.01f) < 1e-6f);
}

static void test_adagrad(void **state)
{
    struct sr_optim_config c = sr_optim_config_default(SR_OPTIM_ADAGRAD);
    assert_true(c.eps == (float)DOC_ADAGRAD_EPS &&
                c.initial_accumulator == (float)DOC_ADAGRAD_INITIAL_ACCUMULATOR);
    float w[N], w1[N];
    double want[N];
    run(c, 0.1f, w, w1);
    reference(SR_OPTIM_ADAGRAD, DOC_ADAGRAD_INITIAL_ACCUMULATOR, 0.1f, 1.0, want);
    expect_matches("adagrad", w, want);
    /* By hand, step 1 from s = 0: w -= lr * g/|g| = lr * sign(g); g = 0 leaves w. */
    assert_true(fabsf(w1[0] - 0.4f) < 1e-6f);
    assert_true(fabsf(w1[1] + 0.9f) < 1e-6f);
    assert_true(w1[5] == 3.0f);
    run_scaled(c, 0.1f, DOC_ADAGRAD_EPS, w, w1);
    reference(SR_OPTIM_ADAGRAD, DOC_ADAGRAD_INITIAL_ACCUMULATOR, 0.1f, DOC_ADAGRAD_EPS, want);
    expect_matches("adagrad, gradients of the size of eps", w, want);
    /* step 1, from s = 0: w -= lr * g / (|g| + eps); w[3] has g = eps */
    assert_true(fabsf(w1[3] - (0.0f - 0.05f)) < 1e-6f);
    c.initial_accumulator = 0.5f;
    run(c, 0.1f, w, w1);
    reference(SR_OPTIM_ADAGRAD, 0.5, 0.1f, 1.0, want);
    expect_matches("adagrad with initial accumulator 0.5", w, want);
    assert_true(fabsf(w1[0] - (0.5f - 0.1f * 0.1f / sqrtf(0.51f))) < 1e-6f);
}

static void test_adam(void **state)
{
    struct sr_optim_config c = sr_optim_config_default(SR_OPTIM_ADAM);
    assert_true(c.beta1 == (float)DOC_ADAM_BETA1 && c.beta2 == (float)DOC_ADAM_BETA2 &&
                c.eps == (float)DOC_ADAM_EPS);
    float w[N], w1[N];
    double want[N];
    run_scaled(c, 0.01f, DOC_ADAM_EPS, w, w1);
    reference(SR_OPTIM_ADAM, 0.0, 0.01f, DOC_ADAM_EPS, want);
    expect_matches("adam, gradients of the size of eps", w, want);
    /* step 1: m^ = g, v^ = g^2, w -= lr * g / (|g| + eps); w[3] has g = eps */
    assert_true(fabsf(w1[3] - (0.0f - 0.005f)) < 1e-6f);
    run(c, 0.01f, w, w1);
    reference(SR_OPTIM_ADAM, 0.0, 0.01f, 1.0, want);
    expect_matches("adam", w, want);
    /* By hand, step 1: m^ = g, v^ = g^2, so w -= lr * g/(|g| + eps) ~ lr * sign(g). */
    assert_true(fabsf(w1[0] - 0.49f) < 1e-6f);
    assert_true(fabsf(w1[1] + 0.99f) < 1e-6f);
    assert_true(w1[5] == 3.0f);
}

/* The learning rate and the step are device values read when the update
 * runs (as the trainer issues a step): STEPS updates issued back to back,
 * each after a stream-ordered copy of its own scalars into the one device
 * block, with a single wait at the end, equal updates waited for one by one.
 * On the deferred device the block and the weights stay queued until the end. */
static void test_scalars_from_device(void **state)
{
    struct sr_device *dev = sr_device_cpu();
    struct sr_optim_config c = sr_optim_config_default(SR_OPTIM_ADAM);
    struct sr_step_scalars *host = sr_dev_alloc_host(dev, STEPS * sizeof *host);
    struct sr_step_scalars *block = sr_dev_alloc(dev, sizeof *block);
    float *w = sr_dev_alloc(dev, sizeof w0), *g = sr_dev_alloc(dev, sizeof grads);
    float want[N];
    struct sr_dense_optim *o, *ref;
    sr_dense_optim_init(&o, dev, &c, N);
    sr_dense_optim_init(&ref, dev, &c, N);
    memcpy(want, w0, sizeof w0);
    sr_dev_copy(dev, w, w0, sizeof w0, NULL);
    sr_dev_copy(dev, g, grads, sizeof grads, NULL);
    for (int t = 1; t <= STEPS; t++) {
        host[t - 1] = (struct sr_step_scalars){.dense_lr = 0.01f * (float)t, .step = t};
        sr_dev_copy(dev, block, &host[t - 1], sizeof *block, NULL);
        sr_dense_optim_step(o, NULL, w, g + (t - 1) * N, block);
    }
    host_wait();
    for (int t = 1; t <= STEPS; t++) {
        const struct sr_step_scalars sc = {.dense_lr = 0.01f * (float)t, .step = t};
        sr_dense_optim_step(ref, NULL, want, grads[t - 1], &sc);
        host_wait();
    }
    assert_memory_equal(HV(w), want, sizeof want);
    sr_dense_optim_free(o);
    sr_dense_optim_free(ref);
    sr_dev_free(dev, w);
    sr_dev_free(dev, g);
    sr_dev_free(dev, block);
    sr_dev_free_host(dev, host);
}

static void test_rowwise_rejected(void **state)
{
    assert_int_equal(sr_dense_optim_check(SR_OPTIM_SGD), SR_OK);
    assert_int_equal(sr_dense_optim_check(SR_OPTIM_ADAGRAD), SR_OK);
    assert_int_equal(sr_dense_optim_check(SR_OPTIM_ADAM), SR_OK);
    assert_int_equal(sr_dense_optim_check(SR_OPTIM_ROWWISE_ADAGRAD), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "embeddings only; use adagrad"));
    assert_int_equal(sr_dense_optim_check((enum sr_optim_kind)17), SR_ERR_INVALID_ARG);
}

/* ---- learning-rate schedules --------------------------------------------- */

static void expect_lr(const struct sr_lr_schedule *s, int64_t step, double want)
{
    float got = sr_lr_at(s, step);
    if (!(fabs(got - want) <= 1e-7 + 1e-6 * want))
        fail_msg("lr at step %lld: got %.9g want %.9g", (long long)step, got, want);
}

static void test_lr_values(void **state)
{
    struct sr_lr_schedule s;
    assert_int_equal(sr_lr_schedule_parse("constant", 0.3f, &s), SR_OK);
    assert_int_equal(s.kind, SR_LR_CONSTANT);
    expect_lr(&s, 1, 0.3);
    expect_lr(&s, 1000000, 0.3);

    /* Warm-up 4, decay from 6 over 4 steps, power 2 (default), base 2. */
    assert_int_equal(sr_lr_schedule_parse("warmup_poly:4:6:4", 2.0f, &s), SR_OK);
    assert_int_equal(s.kind, SR_LR_WARMUP_POLY);
    assert_true(s.power == 2.0f && s.end_lr == 0.0f);
    const double want[] = {0.5,          1.0,        1.5,          2.0, 2.0, 2.0,
                           2.0 * 0.5625, 2.0 * 0.25, 2.0 * 0.0625, 0.0, 0.0};
    for (int t = 1; t <= 11; t++)
        expect_lr(&s, t, want[t - 1]);
    expect_lr(&s, 1000, 0.0);

    /* Power 1: linear decay; no warm-up. */
    assert_int_equal(sr_lr_schedule_parse("warmup_poly:0:2:5:1", 1.0f, &s), SR_OK);
    expect_lr(&s, 1, 1.0);
    expect_lr(&s, 2, 1.0);
    expect_lr(&s, 3, 0.8);
    expect_lr(&s, 6, 0.2);
    expect_lr(&s, 7, 0.0);
    /* Power 0.5 */
    assert_int_equal(sr_lr_schedule_parse("warmup_poly:0:0:4:0.5", 1.0f, &s), SR_OK);
    expect_lr(&s, 3, sqrt(0.25));
    /* No decay steps: base after the warm-up, forever. */
    assert_int_equal(sr_lr_schedule_parse("warmup_poly:10:10:0", 1.0f, &s), SR_OK);
    expect_lr(&s, 5, 0.5);
    expect_lr(&s, 10, 1.0);
    expect_lr(&s, 100000, 1.0);
}

static void expect_parse_error(const char *spec, const char *needle)
{
    struct sr_lr_schedule s;
    sr_error_clear();
    assert_int_equal(sr_lr_schedule_parse(spec, 0.1f, &s), SR_ERR_INVALID_ARG);
    if (!strstr(sr_error_message(), needle))
        fail_msg("'%s': message '%s' lacks '%s'", spec, sr_error_message(), needle);
}

static void test_lr_parse_errors(void **state)
{
    expect_parse_error("", "unknown lr schedule");
    expect_parse_error("cosine", "unknown lr schedule 'cosine'");
    expect_parse_error("constant:3", "unknown lr schedule");
    expect_parse_error("warmup_poly", "unknown lr schedule");
    expect_parse_error("warmup_poly:", "WARMUP '' is not");
    expect_parse_error("warmup_poly:4", "DECAY_START is missing");
    expect_parse_error("warmup_poly:4:6", "DECAY_STEPS is missing");
    expect_parse_error("warmup_poly:x:6:4", "WARMUP 'x' is not a non-negative integer");
    expect_parse_error("warmup_poly:4::4", "DECAY_START '' is not");
    expect_parse_error("warmup_poly:-1:6:4", "WARMUP '-1'");
    expect_parse_error("warmup_poly:+1:6:4", "WARMUP '+1'");
    expect_parse_error("warmup_poly:4:6:4x", "DECAY_STEPS '4x'");
    expect_parse_error("warmup_poly:99999999999999999999:1:1", "WARMUP '99999999999999999999'");
    expect_parse_error("warmup_poly:4:6:4:0", "POWER '0' is not a positive number");
    expect_parse_error("warmup_poly:4:6:4:nan", "POWER 'nan'");
    expect_parse_error("warmup_poly:4:6:4:", "POWER '' is not");
    expect_parse_error("warmup_poly:4:6:4:2:1", "unexpected '1' after POWER");
    expect_parse_error("warmup_poly:4:2:4", "DECAY_START 2 comes before the warm-up ends");
    expect_parse_error("warmup_poly:4:6:4\r", "DECAY_STEPS '4\r'");
    struct sr_lr_schedule s;
    assert_int_equal(sr_lr_schedule_parse("constant", NAN, &s), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_lr_schedule_parse("constant", -0.1f, &s), SR_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adagrad),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_scalars_from_device),
        cmocka_unit_test(test_rowwise_rejected),
        cmocka_unit_test(test_lr_values),
        cmocka_unit_test(test_lr_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
