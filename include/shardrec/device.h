/*
 * Device layer: memory, copies, streams and events, and the tables of compute
 * ops (dense, embedding, optimizer) that the layers above call. Nothing above
 * this layer touches device memory directly or calls CUDA: it allocates
 * through sr_dev_alloc, copies through sr_dev_copy, and computes through
 * dev->dense, dev->emb and dev->optim.
 *
 * Backends are tables of functions, one folder each (device/cpu now,
 * device/cuda later). The CPU backend is the readable reference: it runs ops
 * synchronously on the calling thread (with OpenMP inside) and its streams and
 * events are ordering no-ops. A CUDA backend queues ops on the given stream;
 * every op is therefore "stream-ordered": callers must not read outputs on the
 * host before sr_dev_sync (or an event) says they are done.
 *
 * The deferred CPU device (device/cpu/cpu_deferred.c, chosen with the
 * environment variable SR_CPU_DEFERRED=1) holds that contract to the letter:
 * an op fills its outputs with 0xFF bytes (NaN as floats, -1 as integers) when
 * it is issued and runs only when its stream is synchronised or an event after
 * it is waited for, so code that reads a result without the right wait fails
 * on a CPU, in CI, as it would race on a GPU.
 *
 * SR_CPU_DEFERRED=opaque chooses the opaque CPU device: the deferred device
 * with host_visible = 0, as a GPU. Its allocations are mapped PROT_NONE except
 * while it runs queued ops and copies, so a host read or write of device
 * memory outside an op (upper-layer code, a host function, another thread)
 * crashes at once with a message that names the address and its allocation,
 * and a backtrace (device/cpu/cpu_opaque.c); only an access made by another
 * thread at the very moment ops run goes unseen (the protection is
 * process-wide). Its sr_dev_alloc_host memory is ordinary host memory. Host
 * code moves data in and out only with sr_dev_copy to and from host memory,
 * then waits for the stream.
 *
 * Which conditions abort: an allocation that cannot be satisfied or a backend
 * failure aborts with the size and call site (SR_ABORT). Nothing here returns
 * user-input errors.
 */
#ifndef SHARDREC_DEVICE_H
#define SHARDREC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/stream.h" /* sr_stream_t (NULL: the default stream), sr_event_t */

enum sr_device_kind { SR_DEVICE_CPU = 0, SR_DEVICE_CUDA = 1 };

/* How dense GEMMs compute (--math): fp32 (the reference; the default), tf32
 * (fp32 data, the matrix units' 10-bit-mantissa products, fp32 accumulation)
 * or bf16 (bf16 GEMM inputs, fp32 accumulation and outputs; master weights
 * stay fp32). The CPU backend computes fp32 only. */
enum sr_math { SR_MATH_FP32 = 0, SR_MATH_TF32 = 1, SR_MATH_BF16 = 2 };

struct sr_device;
struct sr_dense_ops;     /* src/device/ops_dense.h */
struct sr_embedding_ops; /* src/device/ops_embedding.h */
struct sr_emb_dp_ops;    /* src/device/ops_embedding_dp.h */
struct sr_optim_ops;     /* src/device/ops_optim.h */
struct sr_sparse_dist_ops; /* src/device/ops_sparse_dist.h */
struct sr_cast_ops;      /* src/device/ops_cast.h */

struct sr_mem_ops {
    void *(*alloc)(struct sr_device *dev, size_t bytes);
    void (*free)(struct sr_device *dev, void *p);
    /* dst and src may each live on the host or on this device. */
    void (*copy)(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s);
    void (*memset)(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s);
    sr_stream_t (*stream_create)(struct sr_device *dev);
    void (*stream_destroy)(struct sr_device *dev, sr_stream_t s);
    void (*stream_sync)(struct sr_device *dev, sr_stream_t s);
    sr_event_t (*event_create)(struct sr_device *dev);
    void (*event_destroy)(struct sr_device *dev, sr_event_t e);
    void (*event_record)(struct sr_device *dev, sr_event_t e, sr_stream_t s);
    /* Make stream s wait for event e before its later work. */
    void (*stream_wait_event)(struct sr_device *dev, sr_stream_t s, sr_event_t e);
    void (*event_sync)(struct sr_device *dev, sr_event_t e);
    /* 1 when all work before the event's last record has completed (or it was
     * never recorded), 0 otherwise; never blocks. */
    int (*event_query)(struct sr_device *dev, sr_event_t e);
    /* Milliseconds between two completed events' records (start to end),
     * measured by the device's own clock. */
    float (*event_elapsed_ms)(struct sr_device *dev, sr_event_t start, sr_event_t end);
    /* Run fn(arg) on the host once the work issued on s before it is done;
     * later work on s waits for fn to return. */
    void (*launch_host_fn)(struct sr_device *dev, sr_stream_t s, sr_host_fn fn, void *arg);
    /* Host memory the device copies to and from at full speed (pinned for
     * CUDA; ordinary aligned memory on the CPU). */
    void *(*alloc_host)(struct sr_device *dev, size_t bytes);
    void (*free_host)(struct sr_device *dev, void *p);
    /* 1 when p points into a live allocation of this device's alloc, with
     * that allocation's start and size in *base and *bytes (each may be NULL);
     * 0 for any host memory (pinned or not). Required of a device that is not
     * host_visible (host-memory communicators stage its buffers through host
     * memory, comm.h); NULL on the others. Never blocks. */
    int (*owns)(struct sr_device *dev, const void *p, void **base, size_t *bytes);
    /* The most memory this process's allocations on the device held at once,
     * bytes; NULL where the host's resident memory tells it (the CPU devices). */
    uint64_t (*peak_bytes)(struct sr_device *dev);
    /* Graphs; NULL where the backend has none (the CPU devices). Between
     * capture_begin and capture_end, work issued on s by this thread is
     * recorded, not run; capture_end returns it as a graph that
     * graph_launch replays on a stream with the same arguments (the same
     * pointers, sizes and by-value parameters). The recorded work must not
     * wait on the host, allocate, or wait for events recorded outside it. */
    void (*capture_begin)(struct sr_device *dev, sr_stream_t s);
    sr_graph_t (*capture_end)(struct sr_device *dev, sr_stream_t s);
    void (*graph_launch)(struct sr_device *dev, sr_graph_t g, sr_stream_t s);
    void (*graph_destroy)(struct sr_device *dev, sr_graph_t g);
    /* For a library below the layers that takes the backend's own handles
     * (NCCL in comm/): stream s as the backend's handle (a cudaStream_t),
     * and making this device the calling thread's current one before that
     * library's calls. NULL on devices without native streams (the CPU). */
    void *(*native_stream)(struct sr_device *dev, sr_stream_t s);
    void (*make_current)(struct sr_device *dev);
};

struct sr_device {
    enum sr_device_kind kind;
    int ordinal;      /* which device of its kind */
    const char *name; /* "cpu", "cuda:0" */
    int host_visible; /* 1 when the host may read and write this device's memory (CPU) */
    /* 1 when the device computes on host memory and every op has completed
     * when its call returns (the immediate CPU device; not the deferred one,
     * not CUDA): host memory may then stand in for device memory, as the
     * batch's twin does (batch.h). */
    int host_immediate;
    const struct sr_mem_ops *mem;
    const struct sr_dense_ops *dense;
    const struct sr_embedding_ops *emb;
    const struct sr_emb_dp_ops *emb_dp; /* the DP-table ops */
    const struct sr_optim_ops *optim;
    const struct sr_sparse_dist_ops *sparse_dist; /* the sharded EBC's input/output dist */
    const struct sr_cast_ops *cast; /* fp32 <-> fp16/bf16 of compressed exchanges */
    void *ctx; /* backend state (handles, workspaces) */
    enum sr_math math; /* dense GEMMs' math mode; set once before the first op */
    uint64_t memory_bytes; /* the device's own memory; 0: the host's (CPU) */
    /* The physical device across this host's processes (a hash of its UUID:
     * equal in two processes when they drive one GPU); 0 for the CPU. */
    uint64_t uid;
};

/* The registry: the device of `kind` with `ordinal`, created on first use; NULL
 * (with a message from sr_error_message) when this build or machine lacks it. */
struct sr_device *sr_device_get(enum sr_device_kind kind, int ordinal);
/* How many devices of `kind` this build and machine have (CPU: 1; CUDA: the
 * GPUs visible, 0 without a driver or without the backend). Never fails. */
int sr_device_count(enum sr_device_kind kind);
/* The host CPU device; always present. */
struct sr_device *sr_device_cpu(void);

/* Thin wrappers over dev->mem. */
void *sr_dev_alloc(struct sr_device *dev, size_t bytes);
void *sr_dev_alloc_zero(struct sr_device *dev, size_t bytes);
/* The same, naming the buffer (`what`, e.g. "table 't3' (weights and
 * optimizer state)") in the error should the device be out of memory. */
void *sr_dev_alloc_named(struct sr_device *dev, size_t bytes, const char *what);
void *sr_dev_alloc_zero_named(struct sr_device *dev, size_t bytes, const char *what);
/* For backends: the out-of-memory abort every backend gives, naming the
 * buffer (sr_alloc_label, alloc.h; "a device buffer" when unnamed), the bytes
 * asked for, the free and total memory (total_b 0: unknown), and a hint. */
void sr_dev_out_of_memory(const struct sr_device *dev, size_t bytes, size_t free_b,
                          size_t total_b);
void sr_dev_free(struct sr_device *dev, void *p);
void sr_dev_copy(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s);
void sr_dev_memset(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s);
void sr_dev_sync(struct sr_device *dev, sr_stream_t s);
void *sr_dev_alloc_host(struct sr_device *dev, size_t bytes);
void sr_dev_free_host(struct sr_device *dev, void *p);
/* 1 when p is memory of dev that the host cannot read or write (dev is not
 * host_visible and p points into a live sr_dev_alloc allocation), with that
 * allocation's start and size in *base and *bytes (each may be NULL); 0 for
 * NULL, for host memory and on host-visible devices. Never blocks. */
int sr_dev_hidden(struct sr_device *dev, const void *p, void **base, size_t *bytes);
/* mem->peak_bytes, or 0 where the device has none. */
uint64_t sr_dev_peak_bytes(struct sr_device *dev);
/* 1 when dev can capture and replay graphs (mem->capture_begin is set). */
int sr_dev_has_graphs(const struct sr_device *dev);
sr_stream_t sr_dev_stream_create(struct sr_device *dev);
void sr_dev_stream_destroy(struct sr_device *dev, sr_stream_t s);
sr_event_t sr_dev_event_create(struct sr_device *dev);
void sr_dev_event_destroy(struct sr_device *dev, sr_event_t e);
void sr_dev_event_record(struct sr_device *dev, sr_event_t e, sr_stream_t s);
void sr_dev_stream_wait_event(struct sr_device *dev, sr_stream_t s, sr_event_t e);
void sr_dev_event_sync(struct sr_device *dev, sr_event_t e);
int sr_dev_event_query(struct sr_device *dev, sr_event_t e);
float sr_dev_event_elapsed_ms(struct sr_device *dev, sr_event_t start, sr_event_t end);
void sr_dev_launch_host_fn(struct sr_device *dev, sr_stream_t s, sr_host_fn fn, void *arg);

/* mem->native_stream(dev, s) and mem->make_current(dev); NULL and a no-op
 * on a device without them. */
void *sr_dev_native_stream(struct sr_device *dev, sr_stream_t s);
void sr_dev_make_current(struct sr_device *dev);

/* Host waits on any device since the process started: the number of
 * sr_dev_sync calls (returned) and of sr_dev_event_sync calls (in
 * *event_syncs unless NULL), by every thread that counts its waits. A
 * statistic for the run summary and tests: a training step should wait on
 * the host as little as possible (DESIGN.md, "Execution model"). Thread-safe. */
uint64_t sr_dev_sync_count(uint64_t *event_syncs);
/* Whether the calling thread's host waits count in sr_dev_sync_count: 1 (the
 * default) or 0, for a thread whose waits block no compute thread (a comm
 * backend's worker waiting for a collective's send buffer on a stream). */
void sr_dev_count_host_waits(int counted);

#endif
