/*
 * Multi-rank tests of the comm layer, run under mpirun on 1 to 4 ranks by
 * tests/check_mpi_comm.sh. Every rank checks data it can compute by itself
 * (nccl-tests style): rank `src` sends value f(src, dst, i), so a receiver
 * knows what each element must be. Covered: every collective, blocking and
 * non-blocking, several dtypes, in-place forms, uneven and zero all_to_allv
 * counts, many outstanding calls, progress without the caller, dup'd
 * communicators driven by two threads at once, node and cross communicators
 * under emulated and detected nodes with exact intra/inter byte counters,
 * sr_comm_check_same, ranks-per-node errors, and every collective on device
 * memory that the host cannot touch (the opaque CPU device: comm.h's staging).
 * Stream order and host waits are tests/mpi/mpi_comm_stream.c's.
 *
 * Rank 0 prints one summary line; the exit status is 1 on every rank if any
 * check failed on any rank. `mpi_comm --abort-large` must die with a message
 * (a count above INT_MAX): the script checks that.
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"
#include "shardrec/error.h"

#include "mpi_check.h"

/* ---- typed elements ------------------------------------------------------------ */

static void put(void *buf, enum sr_dtype d, size_t i, double v)
{
    switch (d) {
    case SR_DTYPE_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case SR_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case SR_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case SR_DTYPE_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case SR_DTYPE_F16:
    case SR_DTYPE_BF16: /* moved as raw 16-bit words */
        ((uint16_t *)buf)[i] = (uint16_t)v;
        break;
    case SR_DTYPE_U8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    }
}

static double get(const void *buf, enum sr_dtype d, size_t i)
{
    switch (d) {
    case SR_DTYPE_F32:
        return ((const float *)buf)[i];
    case SR_DTYPE_F64:
        return ((const double *)buf)[i];
    case SR_DTYPE_I32:
        return ((const int32_t *)buf)[i];
    case SR_DTYPE_I64:
        return (double)((const int64_t *)buf)[i];
    case SR_DTYPE_F16:
    case SR_DTYPE_BF16:
        return ((const uint16_t *)buf)[i];
    case SR_DTYPE_U8:
        return ((const uint8_t *)buf)[i];
    }
    return 0;
}

static void *alloc_elems(size_t n, enum sr_dtype d)
{
    return sr_calloc(n + 1, sr_dtype_size(d));
}

/* ---- counters ------------------------------------------------------------------- */

static struct sr_comm_counters snap(sr_comm_t c)
{
    return *sr_comm_counters(c);
}

/* Expected bytes of `per_peer(p)` to every other member, split by node. */
static void expect_bytes(sr_comm_t c, const struct sr_comm_counters *before, enum sr_coll k,
                         const uint64_t *per_peer, const char *what)
{
    struct sr_comm_counters snapshot = snap(c), *now = &snapshot; /* before the gather below */
    uint64_t intra = 0, inter = 0;
    int *node = sr_calloc((size_t)sr_comm_size(c), sizeof(int));
    int mine = sr_comm_node(c);
    sr_comm_all_gather(c, &mine, node, 1, SR_DTYPE_I32, NULL, NULL);
    for (int p = 0; p < sr_comm_size(c); p++) {
        if (p == sr_comm_rank(c))
            continue;
        if (node[p] == mine)
            intra += per_peer[p];
        else
            inter += per_peer[p];
    }
    sr_free(node);
    CHECK(now->bytes_intra[k] - before->bytes_intra[k] == intra, "%s: intra bytes %llu != %llu",
          what, (unsigned long long)(now->bytes_intra[k] - before->bytes_intra[k]),
          (unsigned long long)intra);
    CHECK(now->bytes_inter[k] - before->bytes_inter[k] == inter, "%s: inter bytes %llu != %llu",
          what, (unsigned long long)(now->bytes_inter[k] - before->bytes_inter[k]),
          (unsigned long long)inter);
    CHECK(now->calls[k] - before->calls[k] == 1, "%s: calls", what);
}

static void expect_each(sr_comm_t c, const struct sr_comm_counters *before, enum sr_coll k,
                        uint64_t bytes, const char *what)
{
    uint64_t *per = sr_calloc((size_t)sr_comm_size(c), sizeof *per);
    for (int p = 0; p < sr_comm_size(c); p++)
        per[p] = bytes;
    expect_bytes(c, before, k, per, what);
    sr_free(per);
}

static void finish(sr_comm_t c, sr_comm_work_t *w)
{
    if (w)
        sr_comm_wait(c, *w);
}

/* ---- the collectives ------------------------------------------------------------ */

/* Elements from src to dst: uneven, often zero; pattern < 0 makes all zero. */
static size_t a2a_count(int src, int dst, int pattern)
{
    return pattern < 0 ? 0 : (size_t)((src + 2 * dst + pattern) % 4) * (size_t)(1 + pattern);
}

static double a2a_value(int src, int dst, size_t i)
{
    return (double)(src * 1000 + dst * 100 + (int)(i % 97));
}

static void test_all_to_allv(sr_comm_t c, enum sr_dtype d, int pattern, int nb)
{
    int W = sr_comm_size(c), r = sr_comm_rank(c);
    size_t *sc = sr_calloc(4 * (size_t)W, sizeof(size_t)), *sd = sc + W, *rc = sc + 2 * W,
           *rd = sc + 3 * W;
    uint64_t *per = sr_calloc((size_t)W, sizeof *per);
    size_t ns = 0, nr = 0;
    for (int p = 0; p < W; p++) {
        sc[p] = a2a_count(r, p, pattern), sd[p] = ns, ns += sc[p];
        rc[p] = a2a_count(p, r, pattern), rd[p] = nr + 1, nr += rc[p] + 1; /* a gap before each */
        per[p] = sc[p] * sr_dtype_size(d);
    }
    void *send = alloc_elems(ns, d), *recv = alloc_elems(nr, d);
    for (int p = 0; p < W; p++)
        for (size_t i = 0; i < sc[p]; i++)
            put(send, d, sd[p] + i, a2a_value(r, p, i));
    for (size_t i = 0; i < nr; i++)
        put(recv, d, i, 7);
    struct sr_comm_counters before = snap(c);
    sr_comm_work_t w = NULL;
    sr_comm_all_to_allv(c, send, sc, sd, recv, rc, rd, d, NULL, nb ? &w : NULL);
    memset(sc, 0xff, 2 * (size_t)W * sizeof(size_t)); /* counts are copied: reusable at once */
    finish(c, nb ? &w : NULL);
    int bad = 0;
    for (int p = 0; p < W; p++) {
        bad += get(recv, d, rd[p] - 1) != 7;
        for (size_t i = 0; i < rc[p]; i++)
            bad += get(recv, d, rd[p] + i) != a2a_value(p, r, i);
    }
    CHECK(!bad, "all_to_allv %s pattern %d nb %d: %d wrong elements", sr_dtype_name(d), pattern, nb,
          bad);
    expect_bytes(c, &before, SR_COLL_ALL_TO_ALLV, per, "all_to_allv");
    sr_free(send), sr_free(recv), sr_free(per), sr_free(sc);
}

static void test_all_reduce(sr_comm_t c, enum sr_dtype d, size_t n, int in_place, int nb)
{
    int W = sr_comm_size(c), r = sr_comm_rank(c);
    void *send = alloc_elems(n, d), *recv = in_place ? send : alloc_elems(n, d);
    for (size_t i = 0; i < n; i++)
        put(send, d, i, (double)(r + 1) * (double)(i % 50 + 1));
    struct sr_comm_counters before = snap(c);
    sr_comm_work_t w = NULL;
    sr_comm_all_reduce(c, send, recv, n, d, SR_REDUCE_SUM, NULL, nb ? &w : NULL);
    finish(c, nb ? &w : NULL);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += get(recv, d, i) != (double)(i % 50 + 1) * W * (W + 1) / 2;
    CHECK(!bad, "all_reduce %s n %zu in_place %d nb %d: %d wrong", sr_dtype_name(d), n, in_place,
          nb, bad);
    expect_each(c, &before, SR_COLL_ALL_REDUCE, n * sr_dtype_size(d), "all_reduce");
    if (!in_place)
        sr_free(recv);
    sr_free(send);
}

static void test_reduce_scatter(sr_comm_t c, enum sr_dtype d, size_t n, int in_place, int nb)
{
    int W = sr_comm_size(c), r = sr_comm_rank(c);
    void *send = alloc_elems(n * W, d), *recv = in_place ? send : alloc_elems(n, d);
    for (int b = 0; b < W; b++)
        for (size_t i = 0; i < n; i++)
            put(send, d, b * n + i, (double)((r + 1) * (b + 1)) + (double)(i % 40));
    struct sr_comm_counters before = snap(c);
    sr_comm_work_t w = NULL;
    sr_comm_reduce_scatter(c, send, recv, n, d, SR_REDUCE_SUM, NULL, nb ? &w : NULL);
    finish(c, nb ? &w : NULL);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += get(recv, d, i) != (double)((r + 1) * W * (W + 1) / 2) + (double)(i % 40) * W;
    CHECK(!bad, "reduce_scatter %s n %zu in_place %d nb %d: %d wrong", sr_dtype_name(d), n,
          in_place, nb, bad);
    expect_each(c, &before, SR_COLL_REDUCE_SCATTER, n * sr_dtype_size(d), "reduce_scatter");
    if (!in_place)
        sr_free(recv);
    sr_free(send);
}

static void test_all_gather(sr_comm_t c, enum sr_dtype d, size_t n, int in_place, int nb)
{
    int W = sr_comm_size(c), r = sr_comm_rank(c);
    void *recv = alloc_elems(n * W, d);
    void *send = in_place ? (char *)recv + r * n * sr_dtype_size(d) : alloc_elems(n, d);
    for (size_t i = 0; i < n; i++)
        put(send, d, i, (double)(r * 100 + (int)(i % 100)));
    struct sr_comm_counters before = snap(c);
    sr_comm_work_t w = NULL;
    sr_comm_all_gather(c, send, recv, n, d, NULL, nb ? &w : NULL);
    finish(c, nb ? &w : NULL);
    int bad = 0;
    for (int p = 0; p < W; p++)
        for (size_t i = 0; i < n; i++)
            bad += get(recv, d, p * n + i) != (double)(p * 100 + (int)(i % 100));
    CHECK(!bad, "all_gather %s n %zu in_place %d nb %d: %d wrong", sr_dtype_name(d), n, in_place,
          nb, bad);
    expect_each(c, &before, SR_COLL_ALL_GATHER, n * sr_dtype_size(d), "all_gather");
    if (!in_place)
        sr_free(send);
    sr_free(recv);
}

static void test_broadcast(sr_comm_t c, enum sr_dtype d, size_t n, int nb)
{
    int W = sr_comm_size(c), r = sr_comm_rank(c);
    void *send = alloc_elems(n, d), *recv = alloc_elems(n, d);
    for (int root = 0; root < W; root++) {
        for (size_t i = 0; i < n; i++)
            put(send, d, i, (double)(root * 1000 + (int)(i % 500))), put(recv, d, i, 1);
        struct sr_comm_counters before = snap(c);
        sr_comm_work_t w = NULL;
        sr_comm_broadcast(c, r == root ? send : NULL, recv, n, d, root, NULL, nb ? &w : NULL);
        finish(c, nb ? &w : NULL);
        int bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += get(recv, d, i) != (double)(root * 1000 + (int)(i % 500));
        CHECK(!bad, "broadcast root %d nb %d: %d wrong", root, nb, bad);
        expect_each(c, &before, SR_COLL_BROADCAST, r == root ? n * sr_dtype_size(d) : 0,
                    "broadcast");
    }
    sr_free(send), sr_free(recv);
}

static void test_barrier(sr_comm_t c)
{
    struct sr_comm_counters before = snap(c);
    sr_comm_barrier(c);
    expect_each(c, &before, SR_COLL_BARRIER, 0, "barrier");
}

/* Every collective, every dtype it takes, both modes. */
static void test_collectives(sr_comm_t c)
{
    static const enum sr_dtype reduce_types[] = {SR_DTYPE_F32, SR_DTYPE_F64, SR_DTYPE_I32,
                                                 SR_DTYPE_I64};
    static const enum sr_dtype move_types[] = {SR_DTYPE_F32, SR_DTYPE_I64, SR_DTYPE_BF16};
    for (int nb = 0; nb < 2; nb++) {
        for (int t = 0; t < 4; t++) {
            test_all_reduce(c, reduce_types[t], 1031, 0, nb);
            test_all_reduce(c, reduce_types[t], 5, 1, nb);
            test_reduce_scatter(c, reduce_types[t], 257, 0, nb);
            test_reduce_scatter(c, reduce_types[t], 3, 1, nb);
        }
        for (int t = 0; t < 3; t++) {
            for (int pattern = -1; pattern < 4; pattern++)
                test_all_to_allv(c, move_types[t], pattern, nb);
            test_all_gather(c, move_types[t], 129, 0, nb);
            test_all_gather(c, move_types[t], 7, 1, nb);
            test_broadcast(c, move_types[t], 1000, nb);
        }
        test_all_reduce(c, SR_DTYPE_F32, 0, 0, nb); /* empty calls still count */
        test_all_gather(c, SR_DTYPE_F32, 0, 0, nb);
        test_all_reduce(c, SR_DTYPE_F32, 300000, 0, nb); /* > eager sizes */
    }
    test_barrier(c);
}

/* Many calls in flight at once, completed in reverse order and by polling. */
static void test_outstanding(sr_comm_t c)
{
    enum { K = 8, N = 4099 };
    int W = sr_comm_size(c), r = sr_comm_rank(c);
    float *buf = sr_calloc((size_t)K * N * W * 2, sizeof(float));
    sr_comm_work_t w[K];
    for (int k = 0; k < K; k++) {
        float *send = buf + (size_t)k * N * W * 2;
        for (size_t i = 0; i < (size_t)N * W; i++)
            send[i] = (float)((r + 1) * (k + 1)) + (float)(i % 13);
        if (k % 2)
            sr_comm_reduce_scatter(c, send, send + N * W, N, SR_DTYPE_F32, SR_REDUCE_SUM, NULL,
                                   &w[k]);
        else
            sr_comm_all_reduce(c, send, send + N * W, N * W, SR_DTYPE_F32, SR_REDUCE_SUM, NULL,
                               &w[k]);
    }
    while (!sr_comm_test(c, w[0])) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    for (int k = K - 1; k >= 1; k--)
        sr_comm_wait(c, w[k]);
    int bad = 0;
    for (int k = 0; k < K; k++) {
        float *out = buf + (size_t)k * N * W * 2 + N * W;
        size_t n = k % 2 ? N : (size_t)N * W, off = k % 2 ? (size_t)r * N : 0;
        for (size_t i = 0; i < n; i++)
            bad += out[i] != (float)((k + 1) * W * (W + 1) / 2) + (float)((off + i) % 13 * W);
    }
    CHECK(!bad, "%d outstanding calls: %d wrong elements", K, bad);
    sr_free(buf);
}

/* A non-blocking call finishes while the caller makes no comm call but test. */
static void test_progress(sr_comm_t c)
{
    enum { N = 1 << 18 };
    float *x = sr_calloc(N, sizeof(float));
    for (int i = 0; i < N; i++)
        x[i] = 1.0f;
    sr_comm_work_t w;
    sr_comm_all_reduce(c, x, x, N, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, &w);
    int done = 0;
    for (int t = 0; t < 3000 && !done; t++) { /* up to 30 s: a hang, not a timing */
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        done = sr_comm_test(c, w);
    }
    CHECK(done, "non-blocking all_reduce made no progress without the caller");
    if (!done)
        sr_comm_wait(c, w);
    CHECK(x[0] == (float)sr_comm_size(c) && x[N - 1] == (float)sr_comm_size(c),
          "progress all_reduce result");
    sr_free(x);
}

/* ---- communicators ------------------------------------------------------------ */

struct driver {
    sr_comm_t comm;
    int iters, bad;
};

static void *drive_dense(void *arg)
{
    struct driver *d = arg;
    int W = sr_comm_size(d->comm);
    for (int it = 0; it < d->iters; it++) {
        double x[64];
        for (int i = 0; i < 64; i++)
            x[i] = it + i;
        sr_comm_work_t w;
        sr_comm_all_reduce(d->comm, x, x, 64, SR_DTYPE_F64, SR_REDUCE_SUM, NULL, &w);
        sr_comm_wait(d->comm, w);
        for (int i = 0; i < 64; i++)
            d->bad += x[i] != (double)(it + i) * W;
    }
    return NULL;
}

/* Two dups of the world, one driven by a second thread: independent traffic. */
static void test_dup(sr_comm_t world)
{
    sr_comm_t sparse = sr_comm_dup(world), dense = sr_comm_dup(world);
    CHECK(sr_comm_size(sparse) == sr_comm_size(world) && sr_comm_rank(dense) == sr_comm_rank(world),
          "dup: same members");
    CHECK(sr_comm_local_size(dense) == sr_comm_local_size(world), "dup: same nodes");
    struct sr_comm_counters w0 = snap(world);
    struct driver d = {dense, 50, 0};
    pthread_t t;
    pthread_create(&t, NULL, drive_dense, &d);
    for (int it = 0; it < 20; it++)
        test_all_to_allv(sparse, SR_DTYPE_F32, it % 4, it % 2);
    pthread_join(t, NULL);
    CHECK(!d.bad, "dense thread: %d wrong", d.bad);
    const struct sr_comm_counters *s = sr_comm_counters(sparse), *n = sr_comm_counters(dense);
    CHECK(s->calls[SR_COLL_ALL_TO_ALLV] == 20 && s->calls[SR_COLL_ALL_REDUCE] == 0,
          "sparse counters: a2a %llu", (unsigned long long)s->calls[SR_COLL_ALL_TO_ALLV]);
    CHECK(n->calls[SR_COLL_ALL_REDUCE] == 50 && n->calls[SR_COLL_ALL_TO_ALLV] == 0,
          "dense counters: all_reduce %llu", (unsigned long long)n->calls[SR_COLL_ALL_REDUCE]);
    CHECK(n->seconds_total[SR_COLL_ALL_REDUCE] > 0 && n->seconds[SR_COLL_ALL_REDUCE] >= 0,
          "dense times");
    CHECK(!memcmp(&w0, sr_comm_counters(world), sizeof w0), "world counters untouched");
    sr_comm_free(dense);
    sr_comm_free(sparse);
}

/* World ranks of the members of `c`, ordered by rank. */
static void members(sr_comm_t c, int world_rank, int *out)
{
    sr_comm_all_gather(c, &world_rank, out, 1, SR_DTYPE_I32, NULL, NULL);
}

static void test_node_comm(sr_comm_t world, sr_comm_t node, int rpn)
{
    int r = sr_comm_rank(world), m[64];
    CHECK(sr_comm_size(node) == rpn && sr_comm_rank(node) == r % rpn, "node comm %d of %d",
          sr_comm_rank(node), sr_comm_size(node));
    CHECK(sr_comm_local_size(node) == rpn && sr_comm_local_rank(node) == r % rpn &&
              sr_comm_node(node) == r / rpn,
          "node comm locality");
    members(node, r, m);
    for (int i = 0; i < rpn; i++)
        CHECK(m[i] == (r / rpn) * rpn + i, "node member %d is rank %d", i, m[i]);
    sr_comm_counters_reset(node);
    test_all_reduce(node, SR_DTYPE_F32, 100, 0, 1);
    CHECK(sr_comm_counters(node)->bytes_inter[SR_COLL_ALL_REDUCE] == 0, "node comm: no inter");
    CHECK(sr_comm_counters(node)->bytes_intra[SR_COLL_ALL_REDUCE] == 400ull * (rpn - 1),
          "node comm: intra bytes");
}

static void test_cross_comm(sr_comm_t world, sr_comm_t cross, int rpn)
{
    int W = sr_comm_size(world), r = sr_comm_rank(world), nodes = W / rpn, m[64];
    CHECK(sr_comm_size(cross) == nodes && sr_comm_rank(cross) == r / rpn, "cross comm %d of %d",
          sr_comm_rank(cross), sr_comm_size(cross));
    CHECK(sr_comm_local_size(cross) == 1 && sr_comm_local_rank(cross) == 0 &&
              sr_comm_node(cross) == r / rpn,
          "cross comm locality");
    members(cross, r, m);
    for (int i = 0; i < nodes; i++)
        CHECK(m[i] == i * rpn + r % rpn, "cross member %d is rank %d", i, m[i]);
    sr_comm_counters_reset(cross);
    test_all_to_allv(cross, SR_DTYPE_F32, 1, 0);
    CHECK(sr_comm_counters(cross)->bytes_intra[SR_COLL_ALL_TO_ALLV] == 0, "cross: no intra");
}

/* A world whose nodes are blocks of rpn ranks (rpn 0: env or detection). */
static void test_nodes(int rpn, int expect_local)
{
    sr_comm_t world;
    int rc = sr_comm_init_mpi(&world, NULL, NULL, rpn);
    CHECK(rc == SR_OK, "init rpn %d: %s", rpn, sr_error_message());
    if (rc != SR_OK)
        return;
    int W = sr_comm_size(world), r = sr_comm_rank(world), L = expect_local;
    CHECK(sr_comm_local_size(world) == L && sr_comm_node(world) == r / L &&
              sr_comm_local_rank(world) == r % L,
          "rpn %d: local %d/%d node %d", rpn, sr_comm_local_rank(world), sr_comm_local_size(world),
          sr_comm_node(world));
    /* one int to every rank: (L - 1) intra, (W - L) inter */
    struct sr_comm_counters before = snap(world);
    test_all_to_allv(world, SR_DTYPE_I32, -1, 0);
    size_t *ones = sr_calloc(4 * (size_t)W, sizeof(size_t));
    int *sbuf = sr_calloc((size_t)W, sizeof(int)), *rbuf = sr_calloc((size_t)W, sizeof(int));
    for (int p = 0; p < W; p++)
        ones[p] = ones[2 * W + p] = 1, ones[W + p] = ones[3 * W + p] = (size_t)p;
    sr_comm_all_to_allv(world, sbuf, ones, ones + W, rbuf, ones + 2 * W, ones + 3 * W, SR_DTYPE_I32,
                        NULL, NULL);
    const struct sr_comm_counters *k = sr_comm_counters(world);
    CHECK(k->bytes_intra[SR_COLL_ALL_TO_ALLV] - before.bytes_intra[SR_COLL_ALL_TO_ALLV] ==
                  4ull * (L - 1) &&
              k->bytes_inter[SR_COLL_ALL_TO_ALLV] - before.bytes_inter[SR_COLL_ALL_TO_ALLV] ==
                  4ull * (W - L),
          "rpn %d: world intra/inter bytes", rpn);
    sr_free(ones), sr_free(sbuf), sr_free(rbuf);

    sr_comm_t node = sr_comm_split_node(world), cross = sr_comm_split_cross(world);
    test_node_comm(world, node, L);
    test_cross_comm(world, cross, L);
    struct sr_comm_counters sum = {0};
    sr_comm_counters_add(&sum, sr_comm_counters(node));
    sr_comm_counters_add(&sum, sr_comm_counters(cross));
    CHECK(sum.bytes_intra[SR_COLL_ALL_REDUCE] == 400ull * (L - 1) &&
              sum.calls[SR_COLL_ALL_REDUCE] == 1 && sum.calls[SR_COLL_ALL_TO_ALLV] == 1,
          "counters_add");
    test_collectives(cross); /* sub-communicators carry every collective */
    sr_comm_free(cross);
    sr_comm_free(node);
    sr_comm_free(world);
}

static void test_bad_ranks_per_node(int W)
{
    sr_comm_t world = (sr_comm_t)1;
    int rc = sr_comm_init_mpi(&world, NULL, NULL, W + 1);
    CHECK(rc == SR_ERR_INVALID_ARG && !world, "W %% rpn != 0 must fail: rc %d", rc);
    CHECK(strstr(sr_error_message(), "is not a multiple of --ranks-per-node"), "message: %s",
          sr_error_message());
    rc = sr_comm_init_mpi(&world, NULL, NULL, -2);
    CHECK(rc == SR_ERR_INVALID_ARG && !world, "negative rpn must fail");
    setenv("SR_RANKS_PER_NODE", "two", 1);
    rc = sr_comm_init_mpi(&world, NULL, NULL, 0);
    CHECK(rc == SR_ERR_INVALID_ARG && strstr(sr_error_message(), "SR_RANKS_PER_NODE"),
          "malformed env: %s", sr_error_message());
    unsetenv("SR_RANKS_PER_NODE");
}

static void test_check_same(sr_comm_t world)
{
    int W = sr_comm_size(world), r = sr_comm_rank(world);
    CHECK(sr_comm_check_same(world, 0x1234, "same") == SR_OK, "same hashes pass");
    for (int odd = 1; odd < W; odd++) {
        int rc = sr_comm_check_same(world, r == odd ? 0xbad : 0x600d, "test config");
        char want[64];
        snprintf(want, sizeof want, "rank %d has hash", odd);
        CHECK(rc == SR_ERR_INVALID_ARG, "rank %d differs: rc %d on every rank", odd, rc);
        CHECK(strstr(sr_error_message(), want) && strstr(sr_error_message(), "(test config)"),
              "message: %s", sr_error_message());
    }
}

/* ---- main ------------------------------------------------------------------------- */

static int abort_large(sr_comm_t world)
{
    float x[4] = {0};
    sr_comm_all_reduce(world, x, x, (size_t)INT_MAX + 1, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    fprintf(stderr, "mpi_comm: a count above INT_MAX did not abort\n");
    return 0; /* the script expects a non-zero status */
}

/* ---- device buffers the host cannot touch (comm.h's staging) ------------------------ */

/* n floats host <-> device of the opaque CPU device, waited for. */
static void up(struct sr_device *dev, float *d, const float *h, size_t n)
{
    sr_dev_copy(dev, d, h, sizeof(float) * n, NULL);
    sr_dev_sync(dev, NULL);
}

static void down(struct sr_device *dev, float *h, const float *d, size_t n)
{
    sr_dev_copy(dev, h, d, sizeof(float) * n, NULL);
    sr_dev_sync(dev, NULL);
}

/* mode 0: the call was blocking; 1: sr_comm_wait; 2: the stream waits. */
static void complete(sr_comm_t c, sr_comm_work_t w, int mode)
{
    if (mode == 1)
        sr_comm_wait(c, w);
    else if (mode == 2)
        sr_comm_stream_wait(c, w, NULL);
}

/* Count the elements of h[lo, hi) that differ from f(i). */
#define COUNT_BAD(bad, lo, hi, expr)                                                               \
    for (size_t i = (lo); i < (hi); i++)                                                           \
    (bad) += h[i] != (float)(expr)

/* Every collective on memory of the opaque CPU device (the host cannot read
 * it: a staging bug crashes), bound to that device: in place or not,
 * blocking, waited or stream-waited, one mixed host/device call; results,
 * untouched receive gaps and byte counters as on host memory. */
static void test_staged(sr_comm_t world)
{
    struct sr_device *dev = sr_cpu_opaque_device();
    sr_comm_t c = sr_comm_dup(world);
    sr_comm_bind_device(c, dev);
    const int W = sr_comm_size(c), r = sr_comm_rank(c), root = 1 % W;
    enum { N = 37 };
    const size_t cap = (size_t)(N + 2) * W * 2;
    float *h = sr_calloc(cap, sizeof(float)), *x = sr_calloc(cap, sizeof(float));
    float *d = sr_dev_alloc(dev, sizeof(float) * cap), *e = sr_dev_alloc(dev, sizeof(float) * cap);
    sr_comm_register(c, e);
    size_t *sc = sr_calloc(4 * (size_t)W, sizeof(size_t)), *sd = sc + W, *rc = sc + 2 * W,
           *rd = sc + 3 * W;
    for (int mode = 0; mode < 3; mode++) {
        sr_comm_work_t w = NULL, *wp = mode ? &w : NULL;
        int bad = 0;
        for (size_t i = 0; i < cap; i++)
            x[i] = 7.0f, h[i] = (float)((r + 1) * (int)(i % 50 + 1));
        up(dev, e, x, cap); /* 7: untouched */
        up(dev, d, h, cap);
        struct sr_comm_counters before = snap(c);
        sr_comm_all_reduce(c, d, e + 3, N, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, wp);
        complete(c, w, mode);
        expect_each(c, &before, SR_COLL_ALL_REDUCE, N * sizeof(float), "staged all_reduce");
        down(dev, h, e, cap);
        COUNT_BAD(bad, 0, 3, 7);
        COUNT_BAD(bad, 3, 3 + N, (int)((i - 3) % 50 + 1) * W * (W + 1) / 2);
        COUNT_BAD(bad, 3 + N, cap, 7);
        CHECK(!bad, "staged all_reduce mode %d: %d wrong", mode, bad);

        /* in place */
        sr_comm_all_reduce(c, d + 5, d + 5, N, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, wp);
        complete(c, w, mode);
        down(dev, h, d, cap);
        bad = 0;
        COUNT_BAD(bad, 5, 5 + N, (int)(i % 50 + 1) * W * (W + 1) / 2);
        COUNT_BAD(bad, 0, 5, (r + 1) * (int)(i % 50 + 1));
        CHECK(!bad, "staged in-place all_reduce mode %d: %d wrong", mode, bad);

        for (int b = 0; b < W; b++)
            for (size_t i = 0; i < N; i++)
                x[b * N + i] = (float)((r + 1) * (b + 1) + (int)(i % 40));
        up(dev, d, x, (size_t)W * N);
        sr_comm_reduce_scatter(c, d, e + 1, N, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, wp);
        complete(c, w, mode);
        down(dev, h, e, cap);
        bad = 0;
        COUNT_BAD(bad, 1, 1 + N, (r + 1) * W * (W + 1) / 2 + (int)((i - 1) % 40) * W);
        CHECK(!bad, "staged reduce_scatter mode %d: %d wrong", mode, bad);

        for (size_t i = 0; i < N; i++)
            x[i] = (float)(r * 100 + (int)i);
        up(dev, e + (size_t)r * N, x, N);
        sr_comm_all_gather(c, e + (size_t)r * N, e, N, SR_DTYPE_F32, NULL, wp); /* in place */
        complete(c, w, mode);
        down(dev, h, e, (size_t)W * N);
        bad = 0;
        COUNT_BAD(bad, 0, (size_t)W * N, (int)(i / N) * 100 + (int)(i % N));
        CHECK(!bad, "staged in-place all_gather mode %d: %d wrong", mode, bad);

        for (size_t i = 0; i < N; i++)
            x[i] = (float)(root * 1000 + (int)i);
        up(dev, d, x, N);
        sr_comm_broadcast(c, r == root ? d : NULL, e, N, SR_DTYPE_F32, root, NULL, wp);
        complete(c, w, mode);
        down(dev, h, e, N);
        bad = 0;
        COUNT_BAD(bad, 0, N, root * 1000 + (int)i);
        CHECK(!bad, "staged broadcast mode %d: %d wrong", mode, bad);

        size_t ns = 0, nr = 0; /* a gap before each received block must keep its 7 */
        for (int p = 0; p < W; p++) {
            sc[p] = (size_t)((r + 2 * p + mode) % 3) + 1, sd[p] = ns, ns += sc[p];
            rc[p] = (size_t)((p + 2 * r + mode) % 3) + 1, rd[p] = nr + 1, nr += rc[p] + 1;
            for (size_t i = 0; i < sc[p]; i++)
                x[sd[p] + i] = (float)(r * 1000 + p * 100 + (int)i);
        }
        up(dev, d, x, ns);
        for (size_t i = 0; i < cap; i++)
            x[i] = 7.0f;
        up(dev, e, x, cap);
        sr_comm_all_to_allv(c, d, sc, sd, e, rc, rd, SR_DTYPE_F32, NULL, wp);
        complete(c, w, mode);
        down(dev, h, e, cap);
        bad = 0;
        for (int p = 0; p < W; p++) {
            bad += h[rd[p] - 1] != 7.0f;
            COUNT_BAD(bad, rd[p], rd[p] + rc[p], p * 1000 + r * 100 + (int)(i - rd[p]));
        }
        COUNT_BAD(bad, nr, cap, 7);
        CHECK(!bad, "staged all_to_allv mode %d: %d wrong", mode, bad);
    }
    for (size_t i = 0; i < N; i++) /* host send, device receive */
        x[i] = (float)(r * 10 + (int)i);
    sr_comm_all_gather(c, x, e, N, SR_DTYPE_F32, NULL, NULL);
    down(dev, h, e, (size_t)W * N);
    int bad = 0;
    COUNT_BAD(bad, 0, (size_t)W * N, (int)(i / N) * 10 + (int)(i % N));
    CHECK(!bad, "staged all_gather from host memory: %d wrong", bad);
    sr_dev_free(dev, d);
    sr_dev_free(dev, e);
    sr_free(h), sr_free(x), sr_free(sc);
    sr_comm_free(c);
}

int main(int argc, char **argv)
{
    unsetenv("SR_RANKS_PER_NODE");
    sr_comm_t world;
    if (sr_comm_init_mpi(&world, &argc, &argv, 0) != SR_OK) {
        fprintf(stderr, "mpi_comm: %s\n", sr_error_message());
        sr_comm_finalize();
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--abort-large"))
        return abort_large(world);
    int W = sr_comm_size(world);
    CHECK(sr_comm_is_mpi_launch(), "mpirun environment not detected");
    CHECK(!strcmp(sr_comm_backend_name(world), "mpi"), "backend %s", sr_comm_backend_name(world));
    test_collectives(world);
    test_outstanding(world);
    test_progress(world);
    test_dup(world);
    test_staged(world);
    test_check_same(world);
    test_bad_ranks_per_node(W);
    for (int rpn = 1; rpn <= W; rpn++)
        if (W % rpn == 0)
            test_nodes(rpn, rpn);
    setenv("SR_RANKS_PER_NODE", "1", 1);
    test_nodes(0, 1);
    unsetenv("SR_RANKS_PER_NODE");
    test_nodes(0, W); /* detected: every rank of this test shares one host */

    long long tot[2] = {checks, failures};
    sr_comm_all_reduce(world, tot, tot, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    if (sr_comm_rank(world) == 0) {
        const char *btl = getenv("OMPI_MCA_btl");
        printf("mpi_comm: %d ranks (btl %s): %lld checks, %lld failed\n", W, btl ? btl : "default",
               tot[0], tot[1]);
    }
    sr_comm_free(world);
    sr_comm_finalize();
    return tot[1] ? 1 : 0;
}
