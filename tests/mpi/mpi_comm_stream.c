/*
 * Streams through the comm layer, under mpirun on 1 to 4 ranks
 * (tests/check_mpi_comm.sh), on the deferred CPU devices, where a queued op
 * runs only when someone waits for it, so a collective that read its send
 * buffer too early, or a stream that did not wait for a collective, sees
 * the poison (NaN) instead of data.
 *
 * Covered (comm_internal.h's stream contract on a host-memory backend):
 *   - a collective issued on a stream whose pending work produces its send
 *     buffer delivers that work's output, and the issuing thread does not
 *     wait on the host for it: sr_dev_sync_count does not move between the
 *     call and sr_comm_stream_wait, and moves by exactly one stream sync
 *     when the host finally syncs (the worker's own wait is not counted);
 *     without a device binding the poisoned bytes travel instead, which
 *     proves it is the binding that orders;
 *   - the same through staging, on the opaque device's hidden memory;
 *   - two communicators (sparse and dense) whose collectives and stream
 *     waits interleave on one stream, and one issued on a stream that
 *     another stream waits for, with only the host's final sync: every
 *     result right, no deadlock (the run is bounded by the script's
 *     timeout), no host wait before that sync.
 *
 * Rank 0 prints one summary line; the exit status is 1 on every rank if any
 * check failed on any rank.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"

#include "mpi_check.h"

enum { N = 64 };

/* Host waits so far: stream syncs plus event waits. */
static uint64_t waits(void)
{
    uint64_t events = 0, syncs = sr_dev_sync_count(&events);
    return syncs + events;
}

/* Rank r's input element i, and the all-reduced value of element i. */
static float input(int r, int i)
{
    return (float)(r + 1) * (float)(i + 1);
}

static float reduced(int W, int i)
{
    return (float)(W * (W + 1) / 2) * (float)(i + 1);
}

static int count_wrong(const float *out, int W, float scale)
{
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += out[i] != scale * reduced(W, i);
    return wrong;
}

/* A queued op produces the send buffer (send = relu(x) = x), a collective
 * reads it, the stream waits for the collective, a copy reads the result:
 * bound, right data and no host wait until the final sync; unbound, the
 * poison travels (sr_comm_wait then: the host waits for the collective). */
static void test_stream_order(sr_comm_t world)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    const int W = sr_comm_size(world), me = sr_comm_rank(world);
    float x[N], send[N], recv[N], out[N];
    for (int bound = 0; bound < 2; bound++) {
        sr_comm_t c = sr_comm_dup(world);
        if (bound)
            sr_comm_bind_device(c, dev);
        sr_stream_t s = sr_dev_stream_create(dev);
        for (int i = 0; i < N; i++)
            x[i] = input(me, i);
        dev->dense->relu_forward(dev, s, x, send, N); /* send = x, queued */
        uint64_t before = waits(), syncs_before = sr_dev_sync_count(NULL);
        sr_comm_work_t work;
        sr_comm_all_reduce(c, send, recv, N, SR_DTYPE_F32, SR_REDUCE_SUM, s, &work);
        if (bound) {
            sr_comm_stream_wait(c, work, s);
            sr_dev_copy(dev, out, recv, sizeof out, s); /* after the collective */
            CHECK(waits() == before, "the caller waited on the host %d times before its sync",
                  (int)(waits() - before));
            sr_dev_sync(dev, s);
            CHECK(waits() == before + 1 && sr_dev_sync_count(NULL) == syncs_before + 1,
                  "host waits: %d, want the final sync only", (int)(waits() - before));
        } else {
            sr_comm_wait(c, work);
            sr_dev_sync(dev, s);
            memcpy(out, recv, sizeof out);
        }
        int wrong = count_wrong(out, W, 1.0f);
        if (bound)
            CHECK(wrong == 0, "stream-ordered all_reduce: %d of %d values wrong", wrong, N);
        else
            CHECK(wrong == N, "unbound: the poisoned send should have travelled (%d wrong)", wrong);
        sr_dev_stream_destroy(dev, s);
        sr_comm_free(c);
    }
}

/* The same on the opaque device's hidden memory (staged through mirrors):
 * every collective kind a training step uses, non-blocking, stream-waited. */
static void test_staged_no_host_wait(sr_comm_t world)
{
    struct sr_device *dev = sr_cpu_opaque_device();
    const int W = sr_comm_size(world), me = sr_comm_rank(world);
    sr_comm_t c = sr_comm_dup(world);
    sr_comm_bind_device(c, dev);
    sr_stream_t s = sr_dev_stream_create(dev);
    float h[N], out[N];
    float *x = sr_dev_alloc(dev, sizeof h), *send = sr_dev_alloc(dev, sizeof h);
    float *recv = sr_dev_alloc(dev, sizeof h);
    sr_comm_register(c, send);
    sr_comm_register(c, recv);
    for (int i = 0; i < N; i++)
        h[i] = input(me, i);
    sr_dev_copy(dev, x, h, sizeof h, s);
    sr_dev_sync(dev, s);
    for (int round = 0; round < 3; round++) {
        dev->dense->relu_forward(dev, s, x, send, N);
        uint64_t before = waits();
        sr_comm_work_t work;
        sr_comm_all_reduce(c, send, recv, N, SR_DTYPE_F32, SR_REDUCE_SUM, s, &work);
        sr_comm_stream_wait(c, work, s);
        dev->dense->relu_forward(dev, s, recv, x, N); /* the next round's input */
        sr_dev_copy(dev, out, recv, sizeof out, s);
        CHECK(waits() == before, "staged round %d: the caller waited on the host", round);
        sr_dev_sync(dev, s);
        float scale = 1.0f; /* round r sums W copies of round r-1's sum */
        for (int k = 0; k < round; k++)
            scale *= (float)W;
        int wrong = count_wrong(out, W, scale);
        CHECK(wrong == 0, "staged all_reduce round %d: %d of %d wrong", round, wrong, N);
    }
    sr_dev_free(dev, x);
    sr_dev_free(dev, send);
    sr_dev_free(dev, recv);
    sr_dev_stream_destroy(dev, s);
    sr_comm_free(c);
}

/* Two communicators, one stream: sparse's all_to_allv and dense's all_reduce
 * issued, then stream-waited in the other order, each followed by queued
 * work; then a collective issued on stream t and waited for on stream s
 * (which t's next op waits for through an event). Only the final sync waits. */
static void test_two_comms(sr_comm_t world)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    const int W = sr_comm_size(world), me = sr_comm_rank(world);
    sr_comm_t sparse = sr_comm_dup(world), dense = sr_comm_dup(world);
    sr_comm_bind_device(sparse, dev);
    sr_comm_bind_device(dense, dev);
    sr_stream_t s = sr_dev_stream_create(dev), t = sr_dev_stream_create(dev);
    sr_event_t e = sr_dev_event_create(dev);
    static float x[N], a_send[N * 4], a_recv[N * 4], r_send[N], r_recv[N], g_recv[N * 4];
    static float out_a[N * 4], out_r[N], out_g[N * 4], y[N];
    size_t counts[4], displs[4];
    for (int p = 0; p < W; p++)
        counts[p] = N / 4, displs[p] = (size_t)p * (N / 4);
    for (int i = 0; i < N; i++)
        x[i] = input(me, i);
    uint64_t before = waits();
    dev->dense->relu_forward(dev, s, x, a_send, (size_t)W * (N / 4));
    dev->dense->relu_forward(dev, s, x, r_send, N);
    sr_comm_work_t wa, wr, wg;
    sr_comm_all_to_allv(sparse, a_send, counts, displs, a_recv, counts, displs, SR_DTYPE_F32, s,
                        &wa);
    sr_comm_all_reduce(dense, r_send, r_recv, N, SR_DTYPE_F32, SR_REDUCE_SUM, s, &wr);
    sr_comm_stream_wait(dense, wr, s);
    dev->dense->relu_forward(dev, s, r_recv, out_r, N);
    sr_comm_stream_wait(sparse, wa, s);
    dev->dense->relu_forward(dev, s, a_recv, out_a, (size_t)W * (N / 4));
    /* on t: gather r_recv (dense's result, s's work) once s is there */
    sr_dev_event_record(dev, e, s);
    sr_dev_stream_wait_event(dev, t, e);
    dev->dense->relu_forward(dev, t, out_r, y, N);
    sr_comm_all_gather(sparse, y, g_recv, N / 4, SR_DTYPE_F32, t, &wg);
    sr_comm_stream_wait(sparse, wg, s); /* waited for on another stream */
    dev->dense->relu_forward(dev, s, g_recv, out_g, (size_t)W * (N / 4));
    CHECK(waits() == before, "two communicators: the caller waited on the host %d times",
          (int)(waits() - before));
    sr_dev_sync(dev, s);
    sr_dev_sync(dev, t);
    int wrong = count_wrong(out_r, W, 1.0f);
    CHECK(wrong == 0, "dense all_reduce: %d wrong", wrong);
    wrong = 0;
    for (int p = 0; p < W; p++) /* block p of a_recv: rank p's elements for me */
        for (int i = 0; i < N / 4; i++)
            wrong += out_a[p * (N / 4) + i] != input(p, me * (N / 4) + i);
    CHECK(wrong == 0, "sparse all_to_allv: %d wrong", wrong);
    wrong = 0;
    for (int p = 0; p < W; p++) /* every rank gathered the first N/4 reduced values */
        for (int i = 0; i < N / 4; i++)
            wrong += out_g[p * (N / 4) + i] != reduced(W, i);
    CHECK(wrong == 0, "all_gather waited on another stream: %d wrong", wrong);
    sr_dev_event_destroy(dev, e);
    sr_dev_stream_destroy(dev, t);
    sr_dev_stream_destroy(dev, s);
    sr_comm_free(dense);
    sr_comm_free(sparse);
}

int main(int argc, char **argv)
{
    unsetenv("SR_RANKS_PER_NODE");
    sr_comm_t world;
    if (sr_comm_init_mpi(&world, &argc, &argv, 0) != SR_OK) {
        fprintf(stderr, "mpi_comm_stream: %s\n", sr_error_message());
        sr_comm_finalize();
        return 1;
    }
    const int W = sr_comm_size(world);
    CHECK(W <= 4, "at most 4 ranks (the exchanges are sized for 4)");
    if (W <= 4) {
        test_stream_order(world);
        test_staged_no_host_wait(world);
        test_two_comms(world);
    }
    long long tot[2] = {checks, failures};
    sr_comm_all_reduce(world, tot, tot, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    if (sr_comm_rank(world) == 0)
        printf("mpi_comm_stream: %d ranks: %lld checks, %lld failed\n", W, tot[0], tot[1]);
    sr_comm_free(world);
    sr_comm_finalize();
    return tot[1] ? 1 : 0;
}
