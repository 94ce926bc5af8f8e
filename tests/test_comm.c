/*
 * The single-rank communicator: every collective returns the local data (the
 * reduction over a world of one), non-blocking calls complete, derived
 * communicators are worlds of one with their own counters, and every call
 * is counted with zero bytes (nothing leaves the rank). Bound to the
 * deferred CPU device, a collective is a copy on the caller's stream: it
 * reads the stream's pending output without a host wait, a stream wait
 * orders what follows, sr_comm_wait and a blocking call deliver to the host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"

static void test_single_collectives(void **state)
{
    sr_comm_t c = sr_comm_init_single();
    float a[4] = {1, 2, 3, 4}, b[4] = {0};
    size_t counts[1] = {4}, displs[1] = {0};
    sr_comm_work_t w = (sr_comm_work_t)1;
    assert_int_equal(sr_comm_size(c), 1);
    assert_int_equal(sr_comm_rank(c), 0);
    sr_comm_all_reduce(c, a, b, 4, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    assert_memory_equal(a, b, sizeof a);
    memset(b, 0, sizeof b);
    sr_comm_all_to_allv(c, a, counts, displs, b, counts, displs, SR_DTYPE_F32, NULL, &w);
    sr_comm_wait(c, w);
    assert_memory_equal(a, b, sizeof a);
    memset(b, 0, sizeof b);
    sr_comm_reduce_scatter(c, a, b, 4, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    assert_memory_equal(a, b, sizeof a);
    memset(b, 0, sizeof b);
    sr_comm_all_gather(c, a, b, 4, SR_DTYPE_F32, NULL, NULL);
    assert_memory_equal(a, b, sizeof a);
    sr_comm_barrier(c);
    const struct sr_comm_counters *k = sr_comm_counters(c);
    assert_int_equal(k->calls[SR_COLL_ALL_REDUCE], 1);
    assert_int_equal(k->calls[SR_COLL_ALL_TO_ALLV], 1);
    assert_int_equal(k->calls[SR_COLL_REDUCE_SCATTER], 1);
    assert_int_equal(k->calls[SR_COLL_ALL_GATHER], 1);
    assert_int_equal(k->calls[SR_COLL_BARRIER], 1);
    for (int i = 0; i < SR_COLL_COUNT; i++)
        assert_int_equal(k->bytes_intra[i] + k->bytes_inter[i], 0);
    sr_comm_counters_reset(c);
    assert_int_equal(sr_comm_counters(c)->calls[SR_COLL_ALL_REDUCE], 0);
    sr_comm_free(c);
}

/* Derived communicators of a world of one are worlds of one with own counters;
 * check_same passes; counters add field by field; busy time equals exposed. */
static void test_single_derived(void **state)
{
    sr_comm_t c = sr_comm_init_single();
    sr_comm_t d = sr_comm_dup(c), n = sr_comm_split_node(c), x = sr_comm_split_cross(c);
    sr_comm_t all[3] = {d, n, x};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sr_comm_size(all[i]), 1);
        assert_int_equal(sr_comm_rank(all[i]), 0);
        assert_int_equal(sr_comm_local_size(all[i]), 1);
        assert_int_equal(sr_comm_local_rank(all[i]), 0);
        assert_string_equal(sr_comm_backend_name(all[i]), "single");
    }
    float a[2] = {1, 2}, b[2];
    sr_comm_all_reduce(d, a, b, 2, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    sr_comm_broadcast(n, a, b, 2, SR_DTYPE_F32, 0, NULL, NULL);
    assert_int_equal(sr_comm_counters(c)->calls[SR_COLL_ALL_REDUCE], 0);
    assert_int_equal(sr_comm_check_same(c, 42, "config"), SR_OK);
    struct sr_comm_counters sum = {0};
    sr_comm_counters_add(&sum, sr_comm_counters(d));
    sr_comm_counters_add(&sum, sr_comm_counters(n));
    sr_comm_counters_add(&sum, sr_comm_counters(d));
    assert_int_equal(sum.calls[SR_COLL_ALL_REDUCE], 2);
    assert_int_equal(sum.calls[SR_COLL_BROADCAST], 1);
    const struct sr_comm_counters *k = sr_comm_counters(d);
    assert_true(k->seconds_total[SR_COLL_ALL_REDUCE] == k->seconds[SR_COLL_ALL_REDUCE]);
    sr_comm_free(x);
    sr_comm_free(n);
    sr_comm_free(d);
    sr_comm_free(c);
}

/* Host waits so far: stream syncs plus event waits. */
static uint64_t waits(void)
{
    uint64_t events = 0, syncs = sr_dev_sync_count(&events);
    return syncs + events;
}

static void test_single_stream(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    sr_comm_t c = sr_comm_init_single();
    sr_comm_bind_device(c, dev);
    sr_stream_t s = sr_dev_stream_create(dev);
    enum { N = 16 };
    float x[N], send[N], recv[N], out[N], host[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + 1);
    /* non-blocking, stream-waited: no host wait until the sync */
    dev->dense->relu_forward(dev, s, x, send, N);
    uint64_t before = waits();
    sr_comm_work_t w = NULL;
    sr_comm_all_reduce(c, send, recv, N, SR_DTYPE_F32, SR_REDUCE_SUM, s, &w);
    sr_comm_stream_wait(c, w, s);
    dev->dense->relu_forward(dev, s, recv, out, N);
    assert_true(waits() == before);
    sr_dev_sync(dev, s);
    assert_true(waits() == before + 1);
    assert_memory_equal(out, x, sizeof x);
    /* non-blocking, waited on the host: recv is there after sr_comm_wait */
    dev->dense->relu_forward(dev, s, x, send, N);
    sr_comm_all_gather(c, send, host, N, SR_DTYPE_F32, s, &w);
    assert_non_null(w);
    sr_comm_wait(c, w);
    assert_memory_equal(host, x, sizeof x);
    /* blocking: recv is there when it returns */
    dev->dense->relu_forward(dev, s, x, send, N);
    memset(host, 0, sizeof host);
    sr_comm_broadcast(c, send, host, N, SR_DTYPE_F32, 0, s, NULL);
    assert_memory_equal(host, x, sizeof x);
    /* in place: nothing to do, no wait */
    before = waits();
    sr_comm_all_reduce(c, host, host, N, SR_DTYPE_F32, SR_REDUCE_SUM, s, &w);
    assert_null(w);
    assert_true(waits() == before);
    sr_dev_sync(dev, s);
    sr_dev_stream_destroy(dev, s);
    sr_comm_free(c);
}

/* Host values (sr_comm_all_gather_host, sr_comm_broadcast_host) wait for
 * nothing on the bound device's stream: queued work stays queued (its output
 * still poisoned) and no host wait is made; the stream-ordered call would
 * have run it. The calls are counted as any other. */
static void test_single_host_values(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    sr_comm_t c = sr_comm_init_single();
    sr_comm_bind_device(c, dev);
    enum { N = 16 };
    float x[N], y[N];
    int64_t flag = 7, flags[1] = {0}, root = 3;
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + 1);
    dev->dense->relu_forward(dev, NULL, x, y, N); /* queued on the default stream */
    uint64_t before = waits();
    sr_comm_all_gather_host(c, &flag, flags, 1, SR_DTYPE_I64);
    sr_comm_broadcast_host(c, &root, &root, 1, SR_DTYPE_I64, 0);
    assert_int_equal(flags[0], 7);
    assert_int_equal(root, 3);
    assert_true(waits() == before);
    assert_true(y[0] != y[0]); /* still NaN: the relu has not run */
    const struct sr_comm_counters *k = sr_comm_counters(c);
    assert_int_equal(k->calls[SR_COLL_ALL_GATHER], 1);
    assert_int_equal(k->calls[SR_COLL_BROADCAST], 1);
    /* the stream-ordered call waits for it */
    sr_comm_all_gather(c, &flag, flags, 1, SR_DTYPE_I64, NULL, NULL);
    assert_memory_equal(y, x, sizeof x);
    sr_comm_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_single_collectives),
                                       cmocka_unit_test(test_single_derived),
                                       cmocka_unit_test(test_single_stream),
                                       cmocka_unit_test(test_single_host_values)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
