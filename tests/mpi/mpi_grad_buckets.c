/*
 * Dense gradient buckets (src/train/grad_buckets.c) in fp32, bf16 and fp16,
 * run under mpirun on 1 to 4 ranks by tests/check_mpi_comm_dtype.sh. Every
 * rank fills a flat gradient block (layer sizes chosen so the 1 KiB buckets
 * cut it into several, of even lengths), a tail (integers, as DP tables'
 * gradients and touch counts) and a loss, reports the layers in backward
 * order and finishes, twice. Checks, on every rank:
 *
 *   - gradients equal the float64 sum over ranks within 1e-5 relative (fp32)
 *     or within 2u * Σ|g_r| (u = 2^-8 bf16, 2^-11 fp16: one rounding of each
 *     other rank's value and one of the sum);
 *   - every rank holds the same gradient bits (replicas stay identical);
 *   - the tail and the loss are exact (never rounded); the loss sum goes in
 *     and comes out in device memory, stream-ordered (read after a sync);
 *   - calls per step: fp32 one all-reduce per bucket; compressed one
 *     all-to-all-v and one all-gather per bucket, no all-reduce;
 *   - bytes per step equal the payload computed here from the buckets, and
 *     on 2 ranks the gradients' bytes are exactly half of fp32's;
 *   - the second step allocates nothing.
 *
 * Rank 0 prints one summary line; the exit status is 1 on every rank if any
 * check failed on any rank.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "train/grad_buckets.h"

static long long checks, failures;
static char where[64] = "";

#define CHECK(cond, ...) check_at(!!(cond), __LINE__, __VA_ARGS__)

static void check_at(int ok, int line, const char *fmt, ...)
{
    checks++;
    if (ok || ++failures > 40)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] mpi_grad_buckets.c:%d: %s: FAIL: ", sr_get_rank(), line, where);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Backward order (the end of the block first); all even, 1 KiB = 256 floats. */
static const size_t sizes[] = {300, 18, 1000, 6, 64, 130, 2};
#define N_LAYERS (int)(sizeof sizes / sizeof sizes[0])
#define BUCKET   1024
#define N_TAIL   7

static size_t total(void)
{
    size_t n = 0;
    for (int l = 0; l < N_LAYERS; l++)
        n += sizes[l];
    return n;
}

/* Bucket lengths by grad_buckets.h's rule: cut when a bucket reaches the size. */
static int bucket_lengths(size_t *len)
{
    size_t hi = total(), lo = hi;
    int k = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        lo -= sizes[l];
        if (hi - lo >= BUCKET / sizeof(float) && lo > 0) {
            len[k++] = hi - lo;
            hi = lo;
        }
    }
    len[k++] = hi;
    return k;
}

static float grad_of(int step, int rank, size_t i)
{
    return (float)(2.0 * sr_rng_uniform(5 + (uint64_t)step, (uint64_t)rank, i) - 1.0);
}

static uint64_t hash_bits(const float *x, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void check_values(sr_comm_t comm, enum sr_dtype dt, const float *g, const float *tail,
                         float loss, int step)
{
    const int W = sr_comm_size(comm);
    const double u = dt == SR_DTYPE_BF16 ? 0x1p-8 : dt == SR_DTYPE_F16 ? 0x1p-11 : 0;
    long bad = 0;
    for (size_t i = 0; i < total(); i++) {
        double s = 0, a = 0;
        for (int r = 0; r < W; r++)
            s += grad_of(step, r, i), a += fabs(grad_of(step, r, i));
        const double tol = dt == SR_DTYPE_F32 ? 1e-5 * fmax(fabs(s), 0.1) : 2 * u * a * 1.01 + 1e-7;
        bad += fabs(g[i] - s) > tol;
    }
    CHECK(bad == 0, "step %d: %ld of %zu gradients off the sum", step, bad, total());
    for (int i = 0; i < N_TAIL; i++)
        CHECK(tail[i] == (float)(10 * W * (W - 1) / 2 + W * (i + step)), "tail[%d] = %g", i,
              tail[i]);
    CHECK(loss == 0.25f * W + (float)(W * (W - 1) / 2), "loss %g", loss);
    uint64_t h = hash_bits(g, total()), *all = sr_calloc((size_t)W, sizeof *all);
    sr_comm_all_gather(comm, &h, all, 1, SR_DTYPE_I64, NULL, NULL);
    for (int r = 0; r < W; r++)
        CHECK(all[r] == all[0], "step %d: rank %d's gradients differ from rank 0's", step, r);
    sr_free(all);
}

/* Expected calls and bytes (to each other rank) of one step. */
static void check_counters(sr_comm_t comm, enum sr_dtype dt, struct sr_grad_buckets *b,
                           uint64_t *grad_bytes)
{
    const int W = sr_comm_size(comm);
    const struct sr_comm_counters *c = sr_comm_counters(comm);
    size_t len[64];
    const int nb = bucket_lengths(len);
    const int wire = dt != SR_DTYPE_F32 && W > 1;
    uint64_t a2a = 0, ag = 0;
    for (int k = 0; k < nb; k++) {
        const size_t ck = (len[k] + W - 1) / W;
        a2a += 2 * ck, ag += 2 * ck;
    }
    const uint64_t tail = 4 * (N_TAIL + 1), peers = (uint64_t)W - 1;
    CHECK(sr_grad_buckets_count(b) == nb && nb >= 3, "%d buckets, expected %d",
          sr_grad_buckets_count(b), nb);
    CHECK(sr_grad_buckets_calls(b) == (wire ? 2 : 1) * nb, "calls %d", sr_grad_buckets_calls(b));
    CHECK(c->calls[SR_COLL_ALL_REDUCE] == (uint64_t)(wire ? 0 : nb), "all_reduce calls %llu",
          (unsigned long long)c->calls[SR_COLL_ALL_REDUCE]);
    CHECK(c->calls[SR_COLL_ALL_TO_ALLV] == (uint64_t)(wire ? nb : 0) &&
              c->calls[SR_COLL_ALL_GATHER] == (uint64_t)(wire ? nb : 0),
          "all_to_allv %llu all_gather %llu calls, expected %d each",
          (unsigned long long)c->calls[SR_COLL_ALL_TO_ALLV],
          (unsigned long long)c->calls[SR_COLL_ALL_GATHER], wire ? nb : 0);
    uint64_t got = 0;
    for (int k = 0; k < SR_COLL_COUNT; k++)
        got += c->bytes_intra[k] + c->bytes_inter[k];
    const uint64_t want = wire ? peers * (a2a + tail + ag) : peers * (4 * total() + tail);
    CHECK(got == want, "bytes %llu, expected %llu", (unsigned long long)got,
          (unsigned long long)want);
    *grad_bytes = got - peers * tail;
}

static uint64_t run_dtype(sr_comm_t comm, enum sr_dtype dt)
{
    const int W = sr_comm_size(comm), rank = sr_comm_rank(comm);
    const size_t n = total();
    float *g = sr_calloc(n, sizeof *g), tail[N_TAIL], loss_io[2]; /* host-visible device */
    struct sr_grad_buckets *b;
    uint64_t grad_bytes = 0;
    snprintf(where, sizeof where, "W=%d %s", W, sr_dtype_name(dt));
    /* the buckets on a dense stream of their own; "backward" on the default one */
    sr_stream_t dense = sr_dev_stream_create(sr_device_cpu());
    sr_grad_buckets_init(&b, comm, dense, g, n, tail, N_TAIL, sizes, N_LAYERS, BUCKET, dt);
    for (int step = 1; step <= 2; step++) {
        for (size_t i = 0; i < n; i++)
            g[i] = grad_of(step, rank, i);
        for (int i = 0; i < N_TAIL; i++)
            tail[i] = (float)(10 * rank + i + step);
        sr_comm_counters_reset(comm);
        const uint64_t allocs = sr_alloc_count();
        sr_grad_buckets_begin(b);
        size_t lo = n;
        for (int l = 0; l < N_LAYERS; l++) {
            lo -= sizes[l];
            sr_grad_buckets_ready(b, lo, sizes[l], NULL);
        }
        /* the loss goes in and comes out as device values; nothing waits */
        loss_io[0] = (float)(rank + 0.25);
        sr_grad_buckets_finish(b, &loss_io[0], &loss_io[1], NULL);
        CHECK(step == 1 || sr_alloc_count() == allocs, "step %d allocated", step);
        sr_dev_sync(sr_device_cpu(), NULL); /* the host reads g, tail and the loss */
        const float loss = loss_io[1];
        check_counters(comm, dt, b, &grad_bytes);
        check_values(comm, dt, g, tail, loss, step);
    }
    sr_grad_buckets_free(b);
    sr_dev_stream_destroy(sr_device_cpu(), dense);
    sr_free(g);
    return grad_bytes;
}

int main(int argc, char **argv)
{
    unsetenv("SR_RANKS_PER_NODE");
    sr_comm_t world;
    if (sr_comm_init_mpi(&world, &argc, &argv, 1) != SR_OK) {
        fprintf(stderr, "mpi_grad_buckets: %s\n", sr_error_message());
        sr_comm_finalize();
        return 1;
    }
    sr_comm_bind_device(world, sr_device_cpu());
    sr_comm_t dense = sr_comm_dup(world);
    const int W = sr_comm_size(world);
    const uint64_t f32 = run_dtype(dense, SR_DTYPE_F32);
    const uint64_t bf = run_dtype(dense, SR_DTYPE_BF16), fp = run_dtype(dense, SR_DTYPE_F16);
    snprintf(where, sizeof where, "W=%d bytes", W);
    if (W == 2)
        CHECK(2 * bf == f32 && 2 * fp == f32, "gradient bytes bf16 %llu fp16 %llu, fp32 %llu",
              (unsigned long long)bf, (unsigned long long)fp, (unsigned long long)f32);
    long long tot[2] = {checks, failures};
    sr_comm_all_reduce(world, tot, tot, 2, SR_DTYPE_I64, SR_REDUCE_SUM, NULL, NULL);
    if (sr_comm_rank(world) == 0)
        printf("mpi_grad_buckets: %d ranks: gradient bytes per rank per step fp32 %llu bf16 %llu "
               "fp16 %llu; %lld checks, %lld failed\n",
               W, (unsigned long long)f32, (unsigned long long)bf, (unsigned long long)fp, tot[0],
               tot[1]);
    sr_comm_free(dense);
    sr_comm_free(world);
    sr_comm_finalize();
    return tot[1] ? 1 : 0;
}
