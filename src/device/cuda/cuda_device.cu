/*
 * CUDA backend: device memory (cudaMalloc), pinned host memory
 * (cudaHostAlloc), copies and memsets queued on a stream, streams, events and
 * host callbacks, and the registry's entry points. The op tables live one per
 * file beside this one (cuda_internal.h lists them).
 *
 * What NULL means: the backend's own non-blocking stream `main` (see
 * cuda_internal.h), so no work ever goes to CUDA's legacy stream and a step
 * can be captured into a graph.
 *
 * Missing pieces are user-facing errors, not aborts: no driver, no GPU or a
 * bad ordinal make sr_cuda_device_get return NULL with the reason. Once a
 * device exists, a failed CUDA call aborts (SR_CU_CHECK); running out of
 * device memory aborts naming the bytes asked for and what was free.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_internal.h"

extern "C" {
#include "device/cuda/cuda_device.h"
#include "device/ops_cast.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/ops_optim.h"
#include "device/ops_sparse_dist.h"
#include "shardrec/alloc.h"
#include "shardrec/log.h"
}

static void oom_abort(struct sr_device *dev, size_t bytes)
{
    size_t free_b = 0, total_b = 0;
    cudaGetLastError(); /* clear the allocation's error */
    cudaMemGetInfo(&free_b, &total_b);
    sr_dev_out_of_memory(dev, bytes, free_b, total_b);
}

/* ---- the live allocations, for owns() --------------------------------------------- */

/* Every live cudaMalloc of the process, sorted by address, so that the
 * communicators can find the allocation a pointer lies in (they stage whole
 * allocations through pinned host mirrors). A few hundred entries at most;
 * allocation is not on any step's path. */
struct live_alloc {
    uintptr_t base;
    size_t bytes;
};
static struct live_alloc *live;
static size_t live_n, live_cap;
static uint64_t live_bytes, live_peak; /* held now, and at most */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

/* The first entry whose base is above p. */
static size_t live_upper(uintptr_t p)
{
    size_t lo = 0, hi = live_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (live[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void live_add(void *p, size_t bytes)
{
    pthread_mutex_lock(&live_mu);
    if (live_n == live_cap) {
        live_cap = live_cap ? 2 * live_cap : 256;
        live = (struct live_alloc *)realloc(live, live_cap * sizeof *live);
        SR_ASSERT(live);
    }
    size_t i = live_upper((uintptr_t)p);
    memmove(live + i + 1, live + i, (live_n - i) * sizeof *live);
    live[i].base = (uintptr_t)p;
    live[i].bytes = bytes;
    live_n++;
    live_bytes += bytes;
    if (live_bytes > live_peak)
        live_peak = live_bytes;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(void *p)
{
    pthread_mutex_lock(&live_mu);
    size_t i = live_upper((uintptr_t)p);
    SR_ASSERT(i > 0 && live[i - 1].base == (uintptr_t)p);
    live_bytes -= live[i - 1].bytes;
    memmove(live + i - 1, live + i, (live_n - i) * sizeof *live);
    live_n--;
    pthread_mutex_unlock(&live_mu);
}

static uint64_t cu_peak_bytes(struct sr_device *dev)
{
    pthread_mutex_lock(&live_mu);
    uint64_t peak = live_peak;
    pthread_mutex_unlock(&live_mu);
    return peak;
}

static int cu_owns(struct sr_device *dev, const void *p, void **base, size_t *bytes)
{
    int found = 0;
    pthread_mutex_lock(&live_mu);
    size_t i = live_upper((uintptr_t)p);
    if (i > 0 && (uintptr_t)p < live[i - 1].base + live[i - 1].bytes) {
        found = 1;
        if (base)
            *base = (void *)live[i - 1].base;
        if (bytes)
            *bytes = live[i - 1].bytes;
    }
    pthread_mutex_unlock(&live_mu);
    return found;
}

static void *cu_alloc(struct sr_device *dev, size_t bytes)
{
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
    if (rc == cudaErrorMemoryAllocation)
        oom_abort(dev, bytes);
    SR_CU_CHECK(rc);
    live_add(p, bytes ? bytes : 1);
    return p;
}

static void cu_free(struct sr_device *dev, void *p)
{
    live_remove(p);
    SR_CU_CHECK(cudaFree(p));
}

static void cu_copy(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s)
{
    SR_CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, sr_cu_stream(dev, s)));
}

static void cu_memset(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s)
{
    SR_CU_CHECK(cudaMemsetAsync(p, value, bytes, sr_cu_stream(dev, s)));
}

static sr_stream_t cu_stream_create(struct sr_device *dev)
{
    cudaStream_t st;
    SR_CU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return (sr_stream_t)st;
}

static void cu_stream_destroy(struct sr_device *dev, sr_stream_t s)
{
    if (s)
        SR_CU_CHECK(cudaStreamDestroy((cudaStream_t)s));
}

static void cu_stream_sync(struct sr_device *dev, sr_stream_t s)
{
    SR_CU_CHECK(cudaStreamSynchronize(sr_cu_stream(dev, s)));
}

static sr_event_t cu_event_create(struct sr_device *dev)
{
    cudaEvent_t e;
    SR_CU_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));
    return (sr_event_t)e;
}

static void cu_event_destroy(struct sr_device *dev, sr_event_t e)
{
    SR_CU_CHECK(cudaEventDestroy((cudaEvent_t)e));
}

static void cu_event_record(struct sr_device *dev, sr_event_t e, sr_stream_t s)
{
    SR_CU_CHECK(cudaEventRecord((cudaEvent_t)e, sr_cu_stream(dev, s)));
}

static void cu_stream_wait_event(struct sr_device *dev, sr_stream_t s, sr_event_t e)
{
    SR_CU_CHECK(cudaStreamWaitEvent(sr_cu_stream(dev, s), (cudaEvent_t)e, 0));
}

static void cu_event_sync(struct sr_device *dev, sr_event_t e)
{
    SR_CU_CHECK(cudaEventSynchronize((cudaEvent_t)e));
}

static int cu_event_query(struct sr_device *dev, sr_event_t e)
{
    cudaError_t rc = cudaEventQuery((cudaEvent_t)e);
    if (rc == cudaErrorNotReady)
        return 0;
    SR_CU_CHECK(rc);
    return 1;
}

static float cu_event_elapsed_ms(struct sr_device *dev, sr_event_t start, sr_event_t end)
{
    float ms = 0;
    SR_CU_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)end));
    return ms;
}

static void cu_launch_host_fn(struct sr_device *dev, sr_stream_t s, sr_host_fn fn, void *arg)
{
    SR_CU_CHECK(cudaLaunchHostFunc(sr_cu_stream(dev, s), fn, arg));
}

static void *cu_alloc_host(struct sr_device *dev, size_t bytes)
{
    void *p = NULL;
    cudaError_t rc = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (rc == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        SR_ABORT("out of pinned host memory on %s: %zu bytes (%.2f GiB) asked for; HINT: a "
                 "smaller batch or --batch-pool, or fewer ranks on this host",
                 dev->name, bytes, bytes / 1073741824.0);
    }
    SR_CU_CHECK(rc);
    return p;
}

static void cu_free_host(struct sr_device *dev, void *p)
{
    SR_CU_CHECK(cudaFreeHost(p));
}

/* Graphs: stream capture in thread-local mode (other threads' CUDA calls,
 * the loader's or a communicator's, are not affected), instantiated once. */
static void cu_capture_begin(struct sr_device *dev, sr_stream_t s)
{
    SR_CU_CHECK(cudaStreamBeginCapture(sr_cu_stream(dev, s), cudaStreamCaptureModeThreadLocal));
}

static sr_graph_t cu_capture_end(struct sr_device *dev, sr_stream_t s)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    SR_CU_CHECK(cudaStreamEndCapture(sr_cu_stream(dev, s), &graph));
    SR_CU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    SR_CU_CHECK(cudaGraphDestroy(graph));
    return (sr_graph_t)exec;
}

static void cu_graph_launch(struct sr_device *dev, sr_graph_t g, sr_stream_t s)
{
    SR_CU_CHECK(cudaGraphLaunch((cudaGraphExec_t)g, sr_cu_stream(dev, s)));
}

static void cu_graph_destroy(struct sr_device *dev, sr_graph_t g)
{
    SR_CU_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)g));
}

static void *cu_native_stream(struct sr_device *dev, sr_stream_t s)
{
    return (void *)sr_cu_stream(dev, s);
}

static void cu_make_current(struct sr_device *dev)
{
    SR_CU_CHECK(cudaSetDevice(dev->ordinal));
}

/* FNV-1a of the GPU's UUID: the same GPU in every process of the host. */
static uint64_t uuid_hash(const cudaDeviceProp *prop)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof prop->uuid.bytes; i++)
        h = (h ^ (uint8_t)prop->uuid.bytes[i]) * 1099511628211ull;
    return h ? h : 1;
}

static const struct sr_mem_ops cu_mem_ops = {
    .alloc = cu_alloc,
    .free = cu_free,
    .copy = cu_copy,
    .memset = cu_memset,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .stream_wait_event = cu_stream_wait_event,
    .event_sync = cu_event_sync,
    .event_query = cu_event_query,
    .event_elapsed_ms = cu_event_elapsed_ms,
    .launch_host_fn = cu_launch_host_fn,
    .alloc_host = cu_alloc_host,
    .free_host = cu_free_host,
    .owns = cu_owns,
    .peak_bytes = cu_peak_bytes,
    .capture_begin = cu_capture_begin,
    .capture_end = cu_capture_end,
    .graph_launch = cu_graph_launch,
    .graph_destroy = cu_graph_destroy,
    .native_stream = cu_native_stream,
    .make_current = cu_make_current,
};

/* ---- the registry's entry points -------------------------------------------------- */

#define MAX_GPUS 64
static struct sr_device *devices[MAX_GPUS];

extern "C" int sr_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

/* Why no GPU can be used, as a user-facing error. */
static int missing(cudaError_t rc, int ordinal, int count)
{
    if (rc == cudaErrorInsufficientDriver || rc == cudaErrorNoDevice ||
        rc == cudaErrorNotSupported || rc == cudaErrorInitializationError ||
        rc == cudaErrorSystemDriverMismatch || rc == cudaErrorCompatNotSupportedOnDevice)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "no usable CUDA GPU: %s (%s); HINT: check that the NVIDIA driver is "
                            "installed and a GPU is visible (nvidia-smi), or use --device cpu",
                            cudaGetErrorString(rc),
                            rc == cudaErrorNoDevice ? "no GPU is visible to this process"
                            : rc == cudaErrorInsufficientDriver
                                ? "no NVIDIA driver, or one older than this build's CUDA runtime"
                                : "the driver could not start");
    if (rc != cudaSuccess)
        return sr_error_set(SR_ERR_UNSUPPORTED, "CUDA cannot start: %s; HINT: use --device cpu",
                            cudaGetErrorString(rc));
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "CUDA device %d does not exist: %d GPU%s visible (ordinals 0..%d)",
                        ordinal, count, count == 1 ? " is" : "s are", count - 1);
}

static struct sr_device *create(int ordinal)
{
    struct sr_cuda_ctx *ctx = (struct sr_cuda_ctx *)sr_calloc(1, sizeof *ctx);
    struct sr_device *dev = (struct sr_device *)sr_calloc(1, sizeof *dev);
    cudaDeviceProp prop;
    char *name = (char *)sr_calloc(1, 32);
    SR_CU_CHECK(cudaSetDevice(ordinal));
    SR_CU_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    if (prop.major < 9)
        sr_log(SR_LOG_WARN, "device",
               "cuda:%d is %s (compute capability %d.%d); this build's kernels are for sm_90 "
               "(Hopper) and may not load (CUDA_ARCH=... at build time)",
               ordinal, prop.name, prop.major, prop.minor);
    ctx->ordinal = ordinal;
    ctx->num_sms = prop.multiProcessorCount;
    ctx->l2_bytes = (size_t)prop.l2CacheSize;
    SR_CU_CHECK(cudaStreamCreateWithFlags(&ctx->main, cudaStreamNonBlocking));
    snprintf(name, 32, "cuda:%d", ordinal);
    dev->kind = SR_DEVICE_CUDA;
    dev->ordinal = ordinal;
    dev->name = name;
    dev->host_visible = 0;
    dev->host_immediate = 0;
    dev->mem = &cu_mem_ops;
    dev->dense = &sr_cuda_dense_ops;
    dev->emb = &sr_cuda_embedding_ops;
    dev->emb_dp = &sr_cuda_emb_dp_ops;
    dev->optim = &sr_cuda_optim_ops;
    dev->sparse_dist = &sr_cuda_sparse_dist_ops;
    dev->cast = &sr_cuda_cast_ops;
    dev->ctx = ctx;
    dev->math = SR_MATH_FP32;
    dev->memory_bytes = (uint64_t)prop.totalGlobalMem;
    dev->uid = uuid_hash(&prop);
    sr_cuda_dense_init(dev);
    return dev;
}

extern "C" struct sr_device *sr_cuda_device_get(int ordinal)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        missing(rc, ordinal, 0);
        return NULL;
    }
    if (count == 0) {
        missing(cudaErrorNoDevice, ordinal, 0);
        return NULL;
    }
    if (ordinal < 0 || ordinal >= count || ordinal >= MAX_GPUS) {
        missing(cudaSuccess, ordinal, count);
        return NULL;
    }
    if (!devices[ordinal])
        devices[ordinal] = create(ordinal);
    return devices[ordinal];
}
