/*
 * The deferred CPU device (device/cpu/cpu_deferred.c) catches what a GPU
 * would race on, and never changes a correct program's results:
 *   - a host read of an op's output without a wait sees NaN (0xFF bytes);
 *     after sr_dev_sync it sees exactly what the immediate CPU device computes;
 *   - a stream that uses another stream's output without waiting for its
 *     event computes from NaN; with the event wait it computes the right value;
 *   - queued ops that read a buffer keep its old bytes when a later op
 *     overwrites it (no poisoning of data still needed), and chains of
 *     in-place ops give the immediate device's results;
 *   - events report completion and elapsed time; host functions run in
 *     stream order.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"
#include "device/ops_optim.h"

#define M 4
#define N 3
#define K 5

static void fill_inputs(float *a, float *b)
{
    for (int i = 0; i < M * K; i++)
        a[i] = (float)(i % 7) * 0.25f - 0.5f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)(i % 5) * 0.5f - 1.0f;
}

/* c = a·b on the immediate CPU device: the reference. */
static void reference_gemm(const float *a, const float *b, float *c)
{
    struct sr_device *cpu = sr_cpu_device();
    cpu->dense->gemm(cpu, NULL, SR_NO_TRANS, SR_NO_TRANS, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
}

static void test_read_without_wait_sees_nan(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    float a[M * K], b[K * N], c[M * N], want[M * N];
    fill_inputs(a, b);
    reference_gemm(a, b, want);
    memset(c, 0, sizeof c);

    dev->dense->gemm(dev, NULL, SR_NO_TRANS, SR_NO_TRANS, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    /* The deliberately missing wait: the output is not there yet. */
    for (int i = 0; i < M * N; i++)
        assert_true(isnan(c[i]));

    sr_dev_sync(dev, NULL);
    assert_memory_equal(c, want, sizeof want);
}

static void test_integer_outputs_poisoned(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    int64_t src[3] = {1, 2, 3}, dst[3] = {0, 0, 0};
    sr_dev_copy(dev, dst, src, sizeof src, NULL);
    assert_int_equal(dst[0], -1);
    assert_int_equal(dst[2], -1);
    sr_dev_sync(dev, NULL);
    assert_int_equal(dst[0], 1);
    assert_int_equal(dst[2], 3);
}

static void test_cross_stream_needs_event(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    sr_stream_t producer = sr_dev_stream_create(dev), consumer = sr_dev_stream_create(dev);
    sr_event_t ready = sr_dev_event_create(dev);
    float x[8], y[8], z[8];
    for (int i = 0; i < 8; i++)
        x[i] = (float)i - 3.5f;

    /* Without the wait: the consumer reads the producer's poisoned output. */
    dev->dense->relu_forward(dev, producer, x, y, 8);
    sr_dev_copy(dev, z, y, sizeof z, consumer);
    sr_dev_sync(dev, consumer);
    for (int i = 0; i < 8; i++)
        assert_true(isnan(z[i]));
    sr_dev_sync(dev, producer);

    /* With it: the right values. */
    dev->dense->relu_forward(dev, producer, x, y, 8);
    sr_dev_event_record(dev, ready, producer);
    assert_false(sr_dev_event_query(dev, ready));
    sr_dev_stream_wait_event(dev, consumer, ready);
    sr_dev_copy(dev, z, y, sizeof z, consumer);
    sr_dev_sync(dev, consumer);
    assert_true(sr_dev_event_query(dev, ready));
    for (int i = 0; i < 8; i++)
        assert_true(z[i] == (x[i] > 0 ? x[i] : 0.0f));

    sr_dev_event_destroy(dev, ready);
    sr_dev_stream_destroy(dev, producer);
    sr_dev_stream_destroy(dev, consumer);
}

static void test_queued_reads_keep_old_bytes(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    float a[M * K], b[K * N], c[M * N], want[M * N], zeros[M * K];
    fill_inputs(a, b);
    reference_gemm(a, b, want);
    memset(zeros, 0, sizeof zeros);

    /* gemm reads a; the copy then overwrites a: the gemm must see the old a. */
    dev->dense->gemm(dev, NULL, SR_NO_TRANS, SR_NO_TRANS, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    sr_dev_copy(dev, a, zeros, sizeof zeros, NULL);
    sr_dev_sync(dev, NULL);
    assert_memory_equal(c, want, sizeof want);
    assert_memory_equal(a, zeros, sizeof zeros);
}

static void test_in_place_chain_matches_immediate(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device(), *cpu = sr_cpu_device();
    float w[16], g[16], sum[16], w_ref[16], sum_ref[16];
    const float lr = 0.1f;
    for (int i = 0; i < 16; i++) {
        w[i] = w_ref[i] = (float)i * 0.1f;
        g[i] = (float)(i % 3) - 1.0f;
        sum[i] = sum_ref[i] = 0.0f;
    }
    for (int step = 0; step < 3; step++) {
        dev->optim->adagrad_step(dev, NULL, w, sum, g, 16, &lr, 1e-10f);
        cpu->optim->adagrad_step(cpu, NULL, w_ref, sum_ref, g, 16, &lr, 1e-10f);
    }
    assert_true(isnan(w[0])); /* still queued */
    sr_dev_sync(dev, NULL);
    assert_memory_equal(w, w_ref, sizeof w);
    assert_memory_equal(sum, sum_ref, sizeof sum);
}

static void record_order(void *arg)
{
    int *slot = arg;
    *slot = slot[1] + 1; /* slot[1] is the previous call's value */
}

static void test_events_and_host_functions(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    sr_stream_t s = sr_dev_stream_create(dev);
    sr_event_t start = sr_dev_event_create(dev), end = sr_dev_event_create(dev);
    int order[3] = {0, 0, 0}; /* order[1] = 1 before order[0]'s callback */
    float x[4] = {1, 2, 3, 4}, y[4];

    sr_dev_event_record(dev, start, s);
    dev->dense->relu_forward(dev, s, x, y, 4);
    order[2] = 0;
    order[1] = 1;
    sr_dev_launch_host_fn(dev, s, record_order, order);
    sr_dev_event_record(dev, end, s);
    assert_int_equal(order[0], 0); /* not run yet */
    assert_false(sr_dev_event_query(dev, end));

    sr_dev_event_sync(dev, end);
    assert_true(sr_dev_event_query(dev, start));
    assert_int_equal(order[0], 2);
    assert_true(y[3] == 4.0f);
    float ms = sr_dev_event_elapsed_ms(dev, start, end);
    assert_true(ms >= 0.0f && ms < 10000.0f);

    sr_dev_event_destroy(dev, start);
    sr_dev_event_destroy(dev, end);
    sr_dev_stream_destroy(dev, s);
}

static void test_immediate_device_events(void **state)
{
    struct sr_device *cpu = sr_cpu_device();
    sr_event_t a = sr_dev_event_create(cpu), b = sr_dev_event_create(cpu);
    sr_dev_event_record(cpu, a, NULL);
    sr_dev_event_record(cpu, b, NULL);
    assert_true(sr_dev_event_query(cpu, b));
    assert_true(sr_dev_event_elapsed_ms(cpu, a, b) >= 0.0f);
    float *h = sr_dev_alloc_host(cpu, 64);
    h[15] = 1.0f;
    sr_dev_free_host(cpu, h);
    sr_dev_event_destroy(cpu, a);
    sr_dev_event_destroy(cpu, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_without_wait_sees_nan),
        cmocka_unit_test(test_integer_outputs_poisoned),
        cmocka_unit_test(test_cross_stream_needs_event),
        cmocka_unit_test(test_queued_reads_keep_old_bytes),
        cmocka_unit_test(test_in_place_chain_matches_immediate),
        cmocka_unit_test(test_events_and_host_functions),
        cmocka_unit_test(test_immediate_device_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
