/*
 * The emulated inter-node link (comm.h, sr_comm_set_link), on 2 ranks, run by
 * tests/check_mpi_link.sh. Every timing check asserts a lower bound, which
 * the model guarantees whatever the load (the worker queues a collective's
 * messages after the caller read its clock), or an upper bound so generous
 * (5x + 0.5 s, or a wait shorter than a transfer after sleeping 4 transfers)
 * that only a broken link fails it on a shared machine. Figures are printed.
 *
 * 2 ranks declared as 2 nodes:
 *   - a blocking all_to_allv of N bytes per peer takes >= N/B + latency, and
 *     its busy time (seconds_total) includes it; data arrive intact;
 *   - every collective kind used in training (all_reduce, reduce_scatter,
 *     all_gather, broadcast on the root and the receiver, barrier: latency
 *     only) takes >= its bytes/B + latency;
 *   - two non-blocking collectives back to back, on one communicator and on
 *     two (world and a dup sharing the link), take >= their summed transfer
 *     times (one FIFO per direction);
 *   - a non-blocking collective followed by host compute (a sleep) longer
 *     than its transfer is waited for far less than its transfer (overlap);
 * 2 ranks on 1 node: the same all_to_allv is not delayed.
 * SR_EMULATE_LINK: a valid value gives the world the link, a bad one fails
 * sr_comm_init_mpi with a message naming the variable.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/comm.h"
#include "shardrec/error.h"

#define MB         (1000 * 1000)
#define SLACK(t)   (5 * (t) + 0.5) /* generous upper bound on a shared machine */
#define FLOATS(by) ((size_t)(by) / sizeof(float))

#include "mpi_check.h"

static void say(sr_comm_t c, const char *fmt, ...)
{
    if (sr_comm_rank(c) != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("  ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static sr_comm_t world_of(int ranks_per_node, double gb_s, double latency_us)
{
    sr_comm_t w;
    if (sr_comm_init_mpi(&w, NULL, NULL, ranks_per_node) != SR_OK)
        SR_ABORT("mpi_link: %s", sr_error_message());
    struct sr_comm_link link = {gb_s, latency_us};
    sr_comm_set_link(w, &link);
    return w;
}

/* An all_to_allv of `bytes` per rank (self included) of float data, filled
 * with f(src, dst, i); non-blocking when work != NULL. */
struct a2a {
    size_t n; /* floats per peer */
    size_t counts[2], displs[2];
    float *send, *recv;
};

static void a2a_init(struct a2a *a, sr_comm_t c, size_t bytes)
{
    int r = sr_comm_rank(c);
    a->n = FLOATS(bytes);
    a->send = sr_malloc(2 * a->n * sizeof(float));
    a->recv = sr_calloc(2 * a->n, sizeof(float));
    for (int p = 0; p < 2; p++) {
        a->counts[p] = a->n;
        a->displs[p] = (size_t)p * a->n;
        for (size_t i = 0; i < a->n; i += 4096)
            a->send[(size_t)p * a->n + i] = (float)(1000 * r + 10 * p) + (float)(i % 7);
    }
}

static void a2a_start(struct a2a *a, sr_comm_t c, sr_comm_work_t *work)
{
    sr_comm_all_to_allv(c, a->send, a->counts, a->displs, a->recv, a->counts, a->displs,
                        SR_DTYPE_F32, NULL, work);
}

static int a2a_ok(const struct a2a *a, sr_comm_t c)
{
    int r = sr_comm_rank(c), ok = 1;
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < a->n; i += 4096)
            ok &= a->recv[(size_t)p * a->n + i] == (float)(1000 * p + 10 * r) + (float)(i % 7);
    return ok;
}

static void a2a_free(struct a2a *a)
{
    sr_free(a->send);
    sr_free(a->recv);
}

/* Blocking all_to_allv on 2 nodes: >= N/B + latency, busy time includes it. */
static void test_blocking(void)
{
    double gb_s = 0.1, lat_us = 2000, bytes = 4 * MB, t_min = bytes / (gb_s * 1e9) + 1e-6 * lat_us;
    sr_comm_t c = world_of(1, gb_s, lat_us);
    struct a2a a;
    a2a_init(&a, c, (size_t)bytes);
    sr_comm_counters_reset(c);
    double t0 = sr_clock_seconds();
    a2a_start(&a, c, NULL);
    double dt = sr_clock_seconds() - t0;
    const struct sr_comm_counters *k = sr_comm_counters(c);
    say(c,
        "blocking all_to_allv %.0f MB/peer at %g GB/s + %g us: %.1f ms (model %.1f ms), busy "
        "%.1f ms, exposed %.1f ms",
        bytes / MB, gb_s, lat_us, 1e3 * dt, 1e3 * t_min,
        1e3 * k->seconds_total[SR_COLL_ALL_TO_ALLV], 1e3 * k->seconds[SR_COLL_ALL_TO_ALLV]);
    CHECK(a2a_ok(&a, c), "all_to_allv data");
    CHECK(dt >= t_min, "blocking all_to_allv took %.4f s < link time %.4f s", dt, t_min);
    CHECK(dt < SLACK(t_min), "blocking all_to_allv took %.4f s >> link time %.4f s", dt, t_min);
    CHECK(k->seconds_total[SR_COLL_ALL_TO_ALLV] >= t_min, "busy %.4f s < link time %.4f s",
          k->seconds_total[SR_COLL_ALL_TO_ALLV], t_min);
    CHECK(k->seconds[SR_COLL_ALL_TO_ALLV] >= t_min, "exposed %.4f s < link time %.4f s",
          k->seconds[SR_COLL_ALL_TO_ALLV], t_min);
    a2a_free(&a);
    sr_comm_free(c);
}

/* Every other collective kind: >= bytes/B + latency on each rank. */
static void test_kinds(void)
{
    double gb_s = 0.1, lat_us = 5000, bytes = 2 * MB, t_min = bytes / (gb_s * 1e9) + 1e-6 * lat_us;
    sr_comm_t c = world_of(1, gb_s, lat_us);
    size_t n = FLOATS(bytes);
    float *buf = sr_calloc(2 * n, sizeof(float));
    static const char *names[] = {"all_reduce",       "reduce_scatter",   "all_gather",
                                  "broadcast from 0", "broadcast from 1", "barrier"};
    for (int kind = 0; kind < 6; kind++) {
        double t0 = sr_clock_seconds(), want = kind == 5 ? 1e-6 * lat_us : t_min;
        if (kind == 0)
            sr_comm_all_reduce(c, buf, buf, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
        else if (kind == 1)
            sr_comm_reduce_scatter(c, buf, buf, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
        else if (kind == 2)
            sr_comm_all_gather(c, buf + (size_t)sr_comm_rank(c) * n, buf, n, SR_DTYPE_F32, NULL,
                               NULL);
        else if (kind < 5)
            sr_comm_broadcast(c, buf, buf, n, SR_DTYPE_F32, kind - 3, NULL, NULL);
        else
            sr_comm_barrier(c);
        double dt = sr_clock_seconds() - t0;
        say(c, "%-16s %.1f ms (model %.1f ms)", names[kind], 1e3 * dt, 1e3 * want);
        CHECK(dt >= want, "%s took %.4f s < link time %.4f s", names[kind], dt, want);
        CHECK(dt < SLACK(want), "%s took %.4f s >> link time %.4f s", names[kind], dt, want);
    }
    sr_free(buf);
    sr_comm_free(c);
}

/* Two all_to_allv back to back, non-blocking, on `c1` then `c2` (the same
 * communicator or two sharing the link): >= twice the transfer + latency. */
static void back_to_back(sr_comm_t c1, sr_comm_t c2, double bytes, double t_xfer, double lat,
                         const char *what)
{
    struct a2a a, b;
    sr_comm_work_t wa, wb;
    a2a_init(&a, c1, (size_t)bytes);
    a2a_init(&b, c2, (size_t)bytes);
    sr_comm_barrier(c1);
    double t0 = sr_clock_seconds();
    a2a_start(&a, c1, &wa);
    a2a_start(&b, c2, &wb);
    sr_comm_wait(c1, wa);
    sr_comm_wait(c2, wb);
    double dt = sr_clock_seconds() - t0, want = 2 * t_xfer + lat;
    say(c1, "two non-blocking all_to_allv, %s: %.1f ms (model >= %.1f ms)", what, 1e3 * dt,
        1e3 * want);
    CHECK(a2a_ok(&a, c1) && a2a_ok(&b, c2), "back-to-back data (%s)", what);
    CHECK(dt >= want, "%s: %.4f s < 2 transfers + latency %.4f s", what, dt, want);
    CHECK(dt < SLACK(want), "%s: %.4f s >> %.4f s", what, dt, want);
    a2a_free(&a);
    a2a_free(&b);
}

static void test_fifo(void)
{
    double gb_s = 0.1, lat_us = 1000, bytes = 4 * MB;
    sr_comm_t c = world_of(1, gb_s, lat_us);
    sr_comm_t d = sr_comm_dup(c); /* shares c's link */
    back_to_back(c, c, bytes, bytes / (gb_s * 1e9), 1e-6 * lat_us, "one communicator");
    back_to_back(c, d, bytes, bytes / (gb_s * 1e9), 1e-6 * lat_us, "two communicators");
    sr_comm_free(d);
    sr_comm_free(c);
}

/* Non-blocking all_to_allv, then host compute (sleep) of 4 transfers: the wait
 * is shorter than one transfer; busy still includes it. */
static void test_overlap(void)
{
    double gb_s = 0.05, lat_us = 0, bytes = 8 * MB, t_xfer = bytes / (gb_s * 1e9);
    sr_comm_t c = world_of(1, gb_s, lat_us);
    struct a2a a;
    sr_comm_work_t w;
    a2a_init(&a, c, (size_t)bytes);
    sr_comm_counters_reset(c);
    a2a_start(&a, c, &w);
    sleep_s(4 * t_xfer);
    double t0 = sr_clock_seconds();
    sr_comm_wait(c, w);
    double waited = sr_clock_seconds() - t0;
    const struct sr_comm_counters *k = sr_comm_counters(c);
    say(c,
        "non-blocking all_to_allv (%.0f ms transfer) after %.0f ms of compute: waited %.2f ms, "
        "busy %.1f ms, exposed %.2f ms",
        1e3 * t_xfer, 4e3 * t_xfer, 1e3 * waited, 1e3 * k->seconds_total[SR_COLL_ALL_TO_ALLV],
        1e3 * k->seconds[SR_COLL_ALL_TO_ALLV]);
    CHECK(a2a_ok(&a, c), "overlapped all_to_allv data");
    CHECK(waited < t_xfer, "waited %.4f s after compute, not less than the transfer %.4f s", waited,
          t_xfer);
    CHECK(k->seconds_total[SR_COLL_ALL_TO_ALLV] >= t_xfer, "busy %.4f s < transfer %.4f s",
          k->seconds_total[SR_COLL_ALL_TO_ALLV], t_xfer);
    a2a_free(&a);
    sr_comm_free(c);
}

/* 2 ranks on one node: the link is set but nothing crosses it. */
static void test_intra(void)
{
    double gb_s = 0.005, bytes = 4 * MB, t_link = bytes / (gb_s * 1e9);
    sr_comm_t c = world_of(2, gb_s, 0);
    struct a2a a;
    a2a_init(&a, c, (size_t)bytes);
    double t0 = sr_clock_seconds();
    a2a_start(&a, c, NULL);
    double dt = sr_clock_seconds() - t0;
    say(c, "intra-node all_to_allv %.0f MB/peer: %.1f ms (the link would take %.0f ms)", bytes / MB,
        1e3 * dt, 1e3 * t_link);
    CHECK(a2a_ok(&a, c), "intra-node data");
    CHECK(sr_comm_counters(c)->bytes_inter[SR_COLL_ALL_TO_ALLV] == 0, "intra-node bytes");
    CHECK(dt < t_link / 2, "intra-node all_to_allv took %.4f s: delayed by the link (%.4f s)", dt,
          t_link);
    a2a_free(&a);
    sr_comm_free(c);
}

static void test_env(void)
{
    sr_comm_t c;
    struct sr_comm_link link;
    setenv("SR_EMULATE_LINK", "0.25,7", 1);
    CHECK(sr_comm_init_mpi(&c, NULL, NULL, 1) == SR_OK, "SR_EMULATE_LINK=0.25,7 refused");
    CHECK(sr_comm_link(c, &link) && link.gb_per_s > 0.2499 && link.gb_per_s < 0.2501 &&
              link.latency_us > 6.999 && link.latency_us < 7.001,
          "SR_EMULATE_LINK=0.25,7 not applied");
    sr_comm_free(c);
    static const char *bad[] = {"0", "-1", "fast", "1,", "1,-3", "1,2,3", "nan", "1e99"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SR_EMULATE_LINK", bad[i], 1);
        int rc = sr_comm_init_mpi(&c, NULL, NULL, 1);
        CHECK(rc == SR_ERR_INVALID_ARG && !c && strstr(sr_error_message(), "SR_EMULATE_LINK"),
              "SR_EMULATE_LINK='%s': rc %d, message '%s'", bad[i], rc, sr_error_message());
    }
    unsetenv("SR_EMULATE_LINK");
}

int main(int argc, char **argv)
{
    unsetenv("SR_RANKS_PER_NODE");
    unsetenv("SR_EMULATE_LINK");
    sr_comm_t world;
    if (sr_comm_init_mpi(&world, &argc, &argv, 0) != SR_OK) {
        fprintf(stderr, "mpi_link: %s\n", sr_error_message());
        sr_comm_finalize();
        return 1;
    }
    if (sr_comm_size(world) != 2) {
        fprintf(stderr, "mpi_link: run on 2 ranks\n");
        sr_comm_free(world);
        sr_comm_finalize();
        return 1;
    }
    say(world, "2 ranks as 2 nodes:");
    test_blocking();
    test_kinds();
    test_fifo();
    test_overlap();
    say(world, "2 ranks on 1 node:");
    test_intra();
    test_env();

    long long tot[2] = {checks, failures};
    sr_comm_all_reduce(world, tot, tot, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    if (sr_comm_rank(world) == 0)
        printf("mpi_link: 2 ranks: %lld checks, %lld failed\n", tot[0], tot[1]);
    sr_comm_free(world);
    sr_comm_finalize();
    return tot[1] ? 1 : 0;
}
