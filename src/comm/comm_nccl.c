/*
 * The NCCL backend: collectives of GPU ranks on their streams, bootstrapped
 * over MPI (comm_nccl_internal.h: its parts and the host companion).
 *
 * The world: a dup of the MPI world becomes the companion; rank 0's unique
 * id is broadcast over it; every rank makes its current device the bound
 * one and joins. Emulated nodes (--ranks-per-node on one host) each claim
 * their own NCCL host id first, so NCCL treats them as separate hosts and
 * their traffic takes its network transport, as between real nodes. NCCL
 * cannot run two ranks of one host on one GPU: such a world is refused
 * before any NCCL call (sr_comm_gpu_shared_in_node).
 *
 * Collectives: device memory through NCCL on the caller's stream (variable
 * all-to-all as grouped sends and receives), host memory through the
 * companion. Derived communicators split both (ncclCommSplit).
 *
 * Without SR_USE_NCCL, sr_comm_init_nccl returns SR_ERR_UNSUPPORTED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/log.h"
#include "shardrec/rng.h"
#include "comm/comm_internal.h"

/* FNV-1a of this host's name: the same in every process of the host. */
static uint64_t host_hash(void)
{
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0)
        snprintf(name, sizeof name, "unknown");
    return sr_hash_bytes(SR_HASH_INIT, name, strlen(name));
}

/* Two ranks on one host with the same device uid, and (same_node) the same
 * node. */
static int gpu_shared(sr_comm_t comm, struct sr_device *dev, int same_node, int *a, int *b)
{
    const int W = comm->size;
    int64_t mine[3] = {same_node ? comm->node : 0, (int64_t)host_hash(),
                       dev ? (int64_t)dev->uid : 0};
    int64_t *all = sr_calloc(3 * (size_t)W, sizeof *all);
    struct sr_device *bound = comm->dev; /* host values: no stream to wait for */
    comm->dev = NULL;
    comm->backend->all_gather(comm, mine, all, 3, SR_DTYPE_I64, NULL, NULL);
    comm->dev = bound;
    int found = 0;
    for (int p = 0; p < W && !found; p++)
        for (int q = p + 1; q < W && !found; q++)
            if (all[3 * p + 2] && !memcmp(&all[3 * p], &all[3 * q], 3 * sizeof *all)) {
                found = 1;
                *a = p;
                *b = q;
            }
    sr_free(all);
    return found;
}

int sr_comm_gpu_shared_in_node(sr_comm_t comm, struct sr_device *dev, int *a, int *b)
{
    return gpu_shared(comm, dev, 1, a, b);
}

int sr_comm_gpu_shared(sr_comm_t comm, struct sr_device *dev, int *a, int *b)
{
    return gpu_shared(comm, dev, 0, a, b);
}

#ifdef SR_USE_NCCL

#include "comm/comm_nccl_internal.h"

int sr_comm_has_nccl(void)
{
    return 1;
}

static ncclDataType_t nccl_type(enum sr_dtype t)
{
    switch (t) {
    case SR_DTYPE_F32:
        return ncclFloat32;
    case SR_DTYPE_F16:
        return ncclFloat16;
    case SR_DTYPE_BF16:
        return ncclBfloat16;
    case SR_DTYPE_F64:
        return ncclFloat64;
    case SR_DTYPE_I32:
        return ncclInt32;
    case SR_DTYPE_I64:
        return ncclInt64;
    case SR_DTYPE_U8:
        return ncclUint8;
    }
    SR_ABORT("NCCL: no NCCL type for dtype %d", (int)t);
}

static cudaStream_t native(struct nccl_state *s, sr_stream_t stream)
{
    return (cudaStream_t)sr_dev_native_stream(s->dev, stream);
}

/* 1 when the call's buffers are device memory (NCCL), 0 when host memory
 * (the companion); a call mixing the two is misuse. */
static int on_device(sr_comm_t c, const void *send, const void *recv, const char *what)
{
    struct nccl_state *s = c->state;
    int r = sr_dev_hidden(s->dev, recv, NULL, NULL);
    if (send && send != recv && sr_dev_hidden(s->dev, send, NULL, NULL) != r)
        SR_ABORT("%s on communicator '%s': send and recv must both be device memory or both "
                 "host memory",
                 what, c->name);
    return r && c->dev;
}

/* The companion, ready to take a host-memory call of c: c's binding,
 * deadline and the call's trace arguments. */
static sr_comm_t companion(sr_comm_t c)
{
    struct nccl_state *s = c->state;
    sr_comm_t h = s->host;
    h->dev = c->dev;
    h->timeout = c->timeout;
    h->call = c->call;
    h->call_traced = c->call_traced;
    memcpy(h->name, c->name, sizeof h->name);
    return h;
}

static sr_comm_work_t *host_handle(sr_comm_work_t *work, sr_comm_work_t *h)
{
    *h = NULL;
    return work ? h : NULL;
}

static void nccl_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                            enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                            sr_comm_work_t *work)
{
    struct nccl_state *s = c->state;
    if (!on_device(c, send, recv, "all_reduce")) {
        sr_comm_t h = companion(c);
        sr_comm_work_t hw;
        h->backend->all_reduce(h, send, recv, count, dtype, op, stream, host_handle(work, &hw));
        if (work)
            *work = sr_nccl_wrap_host(s, SR_COLL_ALL_REDUCE, hw);
        return;
    }
    const double bytes = 2.0 * (double)(count * sr_dtype_size(dtype));
    struct sr_comm_work *w = sr_nccl_begin(s, SR_COLL_ALL_REDUCE, bytes, stream);
    SR_NCCL_CHECK(
        ncclAllReduce(send, recv, count, nccl_type(dtype), ncclSum, s->comm, native(s, stream)));
    sr_nccl_end(s, w, stream, work);
}

static void nccl_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                             const size_t *send_displs, void *recv, const size_t *recv_counts,
                             const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                             sr_comm_work_t *work)
{
    struct nccl_state *s = c->state;
    if (!on_device(c, send, recv, "all_to_allv")) {
        sr_comm_t h = companion(c);
        sr_comm_work_t hw;
        h->backend->all_to_allv(h, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                                dtype, stream, host_handle(work, &hw));
        if (work)
            *work = sr_nccl_wrap_host(s, SR_COLL_ALL_TO_ALLV, hw);
        return;
    }
    const size_t es = sr_dtype_size(dtype);
    const ncclDataType_t t = nccl_type(dtype);
    const cudaStream_t st = native(s, stream);
    double bytes = 0;
    for (int p = 0; p < c->size; p++)
        bytes += (double)((send_counts[p] + recv_counts[p]) * es);
    struct sr_comm_work *w = sr_nccl_begin(s, SR_COLL_ALL_TO_ALLV, bytes, stream);
    SR_NCCL_CHECK(ncclGroupStart());
    for (int p = 0; p < c->size; p++) {
        if (send_counts[p])
            SR_NCCL_CHECK(ncclSend((const char *)send + send_displs[p] * es, send_counts[p], t, p,
                                   s->comm, st));
        if (recv_counts[p])
            SR_NCCL_CHECK(
                ncclRecv((char *)recv + recv_displs[p] * es, recv_counts[p], t, p, s->comm, st));
    }
    SR_NCCL_CHECK(ncclGroupEnd());
    sr_nccl_end(s, w, stream, work);
}

/* NCCL's in-place form puts my block at recv + rank * recv_count of the send
 * buffer; comm.h's at its start: reduce in NCCL's form, then move it. */
static void nccl_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                                enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                                sr_comm_work_t *work)
{
    struct nccl_state *s = c->state;
    if (!on_device(c, send, recv, "reduce_scatter")) {
        sr_comm_t h = companion(c);
        sr_comm_work_t hw;
        h->backend->reduce_scatter(h, send, recv, recv_count, dtype, op, stream,
                                   host_handle(work, &hw));
        if (work)
            *work = sr_nccl_wrap_host(s, SR_COLL_REDUCE_SCATTER, hw);
        return;
    }
    const size_t es = sr_dtype_size(dtype), block = recv_count * es;
    const double bytes = (double)(block * (size_t)(c->size + 1));
    const int in_place = send == recv && c->rank > 0;
    void *out = in_place ? (char *)recv + (size_t)c->rank * block : recv;
    struct sr_comm_work *w = sr_nccl_begin(s, SR_COLL_REDUCE_SCATTER, bytes, stream);
    SR_NCCL_CHECK(ncclReduceScatter(send, out, recv_count, nccl_type(dtype), ncclSum, s->comm,
                                    native(s, stream)));
    if (in_place && block)
        sr_dev_copy(s->dev, recv, out, block, stream);
    sr_nccl_end(s, w, stream, work);
}

static void nccl_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                            enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work)
{
    struct nccl_state *s = c->state;
    if (!on_device(c, send, recv, "all_gather")) {
        sr_comm_t h = companion(c);
        sr_comm_work_t hw;
        h->backend->all_gather(h, send, recv, send_count, dtype, stream, host_handle(work, &hw));
        if (work)
            *work = sr_nccl_wrap_host(s, SR_COLL_ALL_GATHER, hw);
        return;
    }
    const double bytes = (double)(send_count * sr_dtype_size(dtype) * (size_t)(c->size + 1));
    struct sr_comm_work *w = sr_nccl_begin(s, SR_COLL_ALL_GATHER, bytes, stream);
    SR_NCCL_CHECK(
        ncclAllGather(send, recv, send_count, nccl_type(dtype), s->comm, native(s, stream)));
    sr_nccl_end(s, w, stream, work);
}

static void nccl_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                           enum sr_dtype dtype, int root, sr_stream_t stream, sr_comm_work_t *work)
{
    struct nccl_state *s = c->state;
    if (c->rank != root)
        send = NULL;
    if (!on_device(c, send, recv, "broadcast")) {
        sr_comm_t h = companion(c);
        sr_comm_work_t hw;
        h->backend->broadcast(h, send, recv, count, dtype, root, stream, host_handle(work, &hw));
        if (work)
            *work = sr_nccl_wrap_host(s, SR_COLL_BROADCAST, hw);
        return;
    }
    const double bytes = (double)(count * sr_dtype_size(dtype)) * (c->rank == root ? 2 : 1);
    struct sr_comm_work *w = sr_nccl_begin(s, SR_COLL_BROADCAST, bytes, stream);
    SR_NCCL_CHECK(ncclBroadcast(send ? send : recv, recv, count, nccl_type(dtype), root, s->comm,
                                native(s, stream)));
    sr_nccl_end(s, w, stream, work);
}

static void nccl_barrier(sr_comm_t c)
{
    sr_comm_t h = companion(c);
    h->backend->barrier(h);
}

static void nccl_register_buffer(sr_comm_t c, const void *buf)
{
}

/* ---- communicators --------------------------------------------------------------- */

static const struct sr_comm_backend nccl_backend;

static void attach(sr_comm_t c, sr_comm_t host, ncclComm_t comm, struct sr_device *dev)
{
    struct nccl_state *s = sr_calloc(1, sizeof *s);
    s->comm = comm;
    s->c = c;
    s->host = host;
    s->dev = dev;
    pthread_mutex_init(&s->mu, NULL);
    c->backend = &nccl_backend;
    c->state = s;
    c->memory = SR_COMM_MEMORY_DEVICE;
    c->dev = dev;
    sr_nccl_watch(s);
}

/* A communicator of `like`'s members and places, to be the companion of a
 * derived NCCL communicator (split_by in comm.c fills `like`). */
static sr_comm_t companion_of(sr_comm_t like)
{
    sr_comm_t h = sr_comm_alloc(like->size);
    h->rank = like->rank;
    memcpy(h->node_of, like->node_of, sizeof(int) * (size_t)like->size);
    sr_comm_set_locality(h);
    h->timeout = like->timeout;
    h->nodes_emulated = like->nodes_emulated;
    memcpy(h->name, like->name, sizeof h->name);
    return h;
}

static void nccl_split(sr_comm_t c, sr_comm_t sub, int color, int key)
{
    struct nccl_state *s = c->state;
    sr_comm_t h = companion_of(sub);
    s->host->backend->split(s->host, h, color, key);
    ncclComm_t comm;
    sr_dev_make_current(s->dev);
    SR_NCCL_CHECK(ncclCommSplit(s->comm, color, key, &comm, NULL));
    attach(sub, h, comm, s->dev);
}

static void nccl_free(sr_comm_t c)
{
    struct nccl_state *s = c->state;
    sr_nccl_unwatch(s);
    if (!s->aborted)
        SR_NCCL_CHECK(ncclCommDestroy(s->comm));
    sr_comm_free(s->host);
    pthread_mutex_destroy(&s->mu);
    sr_free(s);
}

static const struct sr_comm_backend nccl_backend = {
    .name = "nccl",
    .all_reduce = nccl_all_reduce,
    .all_to_allv = nccl_all_to_allv,
    .reduce_scatter = nccl_reduce_scatter,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .wait = sr_nccl_wait,
    .test = sr_nccl_test,
    .stream_wait = sr_nccl_stream_wait,
    .register_buffer = nccl_register_buffer,
    .split = nccl_split,
    .busy = sr_nccl_busy,
    .free = nccl_free,
};

/* ---- the world ---------------------------------------------------------------------- */

/* Emulated nodes on one host: each its own NCCL host id (read by NCCL's first
 * call), so that NCCL sees separate hosts. */
static void claim_host_id(sr_comm_t mpi)
{
    if (!mpi->nodes_emulated)
        return;
    char host[200] = {0}, id[256];
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "host");
    snprintf(id, sizeof id, "%s.shardrec-node-%d", host, mpi->node);
    setenv("NCCL_HOSTID", id, 1);
    SR_DEBUG("comm", "NCCL_HOSTID=%s (emulated node %d)", id, mpi->node);
}

/* Rank 0's unique id (or its failure) to every rank over the companion. */
static int share_unique_id(sr_comm_t host, ncclUniqueId *id)
{
    struct {
        int32_t rc;
        ncclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    if (host->rank == 0)
        msg.rc = (int32_t)ncclGetUniqueId(&msg.id);
    host->backend->broadcast(host, &msg, &msg, sizeof msg, SR_DTYPE_U8, 0, NULL, NULL);
    *id = msg.id;
    if (msg.rc != ncclSuccess)
        return sr_error_set(SR_ERR_UNSUPPORTED, "NCCL cannot start on rank 0: %s (%s)",
                            ncclGetErrorString((ncclResult_t)msg.rc), ncclGetLastError(NULL));
    return SR_OK;
}

int sr_comm_init_nccl(sr_comm_t *world, sr_comm_t mpi, struct sr_device *dev)
{
    *world = NULL;
    if (strcmp(mpi->backend->name, "mpi") != 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "the NCCL world is bootstrapped over an MPI world, not '%s'",
                            mpi->backend->name);
    if (!dev || !dev->mem->native_stream)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--comm nccl needs a CUDA device (this rank runs on %s); HINT: "
                            "--device cuda on a machine with GPUs, or --comm mpi",
                            dev ? dev->name : "no device");
    int a = 0, b = 0;
    if (sr_comm_gpu_shared_in_node(mpi, dev, &a, &b))
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--comm nccl: ranks %d and %d are on one node (node %d) and drive "
                            "one GPU, which NCCL cannot do; HINT: one GPU per rank of a node, "
                            "--ranks-per-node 1 to run each rank as its own emulated node, or "
                            "--comm mpi",
                            a, b, mpi->node_of[a]);
    claim_host_id(mpi);
    sr_comm_t host = sr_comm_dup(mpi);
    ncclUniqueId id;
    int rc = share_unique_id(host, &id);
    ncclComm_t comm = NULL;
    sr_dev_make_current(dev);
    ncclResult_t nrc = rc ? ncclSuccess : ncclCommInitRank(&comm, mpi->size, id, mpi->rank);
    if (!rc && nrc != ncclSuccess)
        rc = sr_error_set(SR_ERR_UNSUPPORTED, "NCCL cannot start on rank %d (%s): %s (%s)",
                          mpi->rank, dev->name, ncclGetErrorString(nrc), ncclGetLastError(NULL));
    if (rc) {
        sr_comm_free(host);
        return rc;
    }
    sr_comm_t c = companion_of(mpi);
    snprintf(c->name, sizeof c->name, "world");
    attach(c, host, comm, dev);
    int version = 0;
    ncclGetVersion(&version);
    SR_DEBUG("comm", "NCCL %d world: %d ranks on %s, node %d of %d-rank nodes%s", version, c->size,
             dev->name, c->node, c->local_size, mpi->nodes_emulated ? " (emulated)" : "");
    *world = c;
    return SR_OK;
}

#else /* !SR_USE_NCCL */

int sr_comm_has_nccl(void)
{
    return 0;
}

int sr_comm_init_nccl(sr_comm_t *world, sr_comm_t mpi, struct sr_device *dev)
{
    *world = NULL;
    return sr_error_set(SR_ERR_UNSUPPORTED,
                        "--comm nccl: this build has no NCCL backend; HINT: build with CUDA, "
                        "MPI and NCCL installed (the Makefile detects nccl.h and libnccl), or "
                        "--comm mpi");
}

#endif
