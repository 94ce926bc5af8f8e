/*
 * CPU backend: host memory (64-byte aligned, through the counting allocator),
 * synchronous copies, and streams/events that only mark order. Work runs on
 * the calling thread, with OpenMP inside the ops.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/ops_optim.h"

static void *cpu_alloc(struct sr_device *dev, size_t bytes)
{
    return sr_aligned_alloc(bytes ? bytes : 1);
}

static void cpu_free(struct sr_device *dev, void *p)
{
    sr_free(p);
}

static void cpu_copy(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s)
{
    memmove(dst, src, bytes);
}

static void cpu_memset(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s)
{
    memset(p, value, bytes);
}

/* Streams are non-NULL tokens: every CPU op has completed when it returns, so
 * there is nothing to wait for. An event holds the clock reading of its last
 * record, for elapsed times. */
static char cpu_token;

struct sr_event {
    int64_t recorded_ns; /* 0: never recorded */
};

static sr_stream_t cpu_stream_create(struct sr_device *dev)
{
    return (sr_stream_t)&cpu_token;
}

static void cpu_stream_destroy(struct sr_device *dev, sr_stream_t s)
{
}

static void cpu_stream_sync(struct sr_device *dev, sr_stream_t s)
{
}

static sr_event_t cpu_event_create(struct sr_device *dev)
{
    return sr_calloc(1, sizeof(struct sr_event));
}

static void cpu_event_destroy(struct sr_device *dev, sr_event_t e)
{
    sr_free(e);
}

static void cpu_event_record(struct sr_device *dev, sr_event_t e, sr_stream_t s)
{
    e->recorded_ns = sr_clock_ns();
}

static void cpu_stream_wait_event(struct sr_device *dev, sr_stream_t s, sr_event_t e)
{
}

static void cpu_event_sync(struct sr_device *dev, sr_event_t e)
{
}

static int cpu_event_query(struct sr_device *dev, sr_event_t e)
{
    return 1;
}

static float cpu_event_elapsed_ms(struct sr_device *dev, sr_event_t start, sr_event_t end)
{
    SR_ASSERT(start->recorded_ns && end->recorded_ns);
    return (float)((double)(end->recorded_ns - start->recorded_ns) * 1e-6);
}

static void cpu_launch_host_fn(struct sr_device *dev, sr_stream_t s, sr_host_fn fn, void *arg)
{
    fn(arg);
}

static const struct sr_mem_ops cpu_mem_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .memset = cpu_memset,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .launch_host_fn = cpu_launch_host_fn,
    .alloc_host = cpu_alloc,
    .free_host = cpu_free,
};

static struct sr_device cpu_device = {
    .kind = SR_DEVICE_CPU,
    .ordinal = 0,
    .name = "cpu",
    .host_visible = 1,
    .host_immediate = 1,
    .mem = &cpu_mem_ops,
    .dense = &sr_cpu_dense_ops,
    .emb = &sr_cpu_embedding_ops,
    .emb_dp = &sr_cpu_emb_dp_ops,
    .optim = &sr_cpu_optim_ops,
    .sparse_dist = &sr_cpu_sparse_dist_ops,
    .cast = &sr_cpu_cast_ops,
    .ctx = NULL,
};

struct sr_device *sr_cpu_device(void)
{
    return &cpu_device;
}
