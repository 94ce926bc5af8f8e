/*
 * What a comm backend provides: a table of functions over its own state. The
 * dispatcher (comm.c) counts and times every call around these and owns the
 * generic part of a communicator: rank, size and every member's node.
 *
 * Collectives take `work`: NULL means blocking (return when done); otherwise
 * the backend stores a handle (or NULL if already done) in *work. wait and
 * test return the kind (enum sr_coll) of the work they completed, or -1.
 * A backend that can wait for a peer keeps comm.h's deadline contract: the
 * deadline of each collective is sr_comm_deadline(c, payload bytes).
 *
 * The stream contract. Once the communicator is bound to a device (c->dev
 * not NULL; else `stream` means nothing and buffers are host memory), every
 * collective is handed the caller's stream, and the dispatcher does not wait
 * for it: the backend must read `send` only after the work issued on
 * `stream` before the call, without blocking the calling thread for it
 * (a non-blocking call returns at once). Results:
 *   blocking       host memory holds the result when the call returns;
 *                  device memory, in stream order on `stream`;
 *   wait / test    the same, once the handle completes (host memory read
 *                  by the caller after wait returns);
 *   stream_wait    work issued on the waiting stream afterwards runs after
 *                  the collective's result is in recv, and the calling
 *                  thread does not block (the handle is consumed).
 * A stream-native backend (NCCL) enqueues on the stream and records what
 * stream_wait needs; a host backend (single, MPI) keeps the order itself:
 * comm_mpi_queue.c waits for an event recorded at the call on its worker
 * thread, and stages device memory the host cannot address through host
 * mirrors (comm_stage.c).
 */
#ifndef SHARDREC_COMM_INTERNAL_H
#define SHARDREC_COMM_INTERNAL_H

#include "shardrec/comm.h"
#include "shardrec/trace.h"
#include "comm/comm_link.h"

struct sr_comm_backend {
    const char *name;
    void (*all_reduce)(sr_comm_t c, const void *send, void *recv, size_t count, enum sr_dtype dtype,
                       enum sr_reduce_op op, sr_stream_t stream, sr_comm_work_t *work);
    void (*all_to_allv)(sr_comm_t c, const void *send, const size_t *send_counts,
                        const size_t *send_displs, void *recv, const size_t *recv_counts,
                        const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                        sr_comm_work_t *work);
    void (*reduce_scatter)(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                           enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                           sr_comm_work_t *work);
    void (*all_gather)(sr_comm_t c, const void *send, void *recv, size_t send_count,
                       enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work);
    void (*broadcast)(sr_comm_t c, const void *send, void *recv, size_t count, enum sr_dtype dtype,
                      int root, sr_stream_t stream, sr_comm_work_t *work);
    void (*barrier)(sr_comm_t c);
    /* The host waits for `work` (the dispatcher times it as exposed). */
    int (*wait)(sr_comm_t c, sr_comm_work_t work);
    int (*test)(sr_comm_t c, sr_comm_work_t work);
    /* `stream` waits for `work` (c->dev is bound; never NULL work). */
    void (*stream_wait)(sr_comm_t c, sr_comm_work_t work, sr_stream_t stream);
    /* Prepare to move the device allocation holding `buf` (sr_comm_register);
     * NULL: nothing to prepare. */
    void (*register_buffer)(sr_comm_t c, const void *buf);
    /* Set up `sub` (rank, size, node_of already filled by the dispatcher) as the
     * members of `c` whose color equals `color`, ordered by key: fill
     * sub->backend and sub->state. Collective over `c`. */
    void (*split)(sr_comm_t c, sr_comm_t sub, int color, int key);
    /* Cumulative busy seconds per kind of finished work (NULL: the dispatcher
     * counts wall time as busy time). */
    void (*busy)(sr_comm_t c, double seconds[SR_COLL_COUNT]);
    void (*free)(sr_comm_t c);
};

struct sr_comm {
    const struct sr_comm_backend *backend;
    int rank, size;             /* in this communicator */
    int local_rank, local_size; /* among this communicator's ranks on my node */
    int node;                   /* my node index (the world's numbering) */
    int nodes_emulated;         /* nodes are blocks of ranks_per_node ranks, not detected */
    int *node_of;               /* (W) node index of every member */
    double timeout;             /* base deadline of a collective, seconds; 0: none */
    struct sr_device *dev;      /* whose streams collectives are ordered on; NULL: none */
    enum sr_comm_memory memory; /* where buffers must live (the backend sets it) */
    char name[16];              /* for messages */
    struct sr_comm_counters counters;
    struct sr_trace_args call; /* the call in progress: label, bytes, peers (comm.c) */
    int call_traced;           /* recording was on when it started: the backend's
                                  worker records its busy span with `call` */
    double busy_base[SR_COLL_COUNT]; /* backend busy seconds at the last reset */
    struct sr_link *link;            /* emulated inter-node link (shared), or NULL */
    struct sr_link_msgs link_msgs;   /* the call in progress: its shaped messages (comm.c) */
    int link_call;                   /* link_msgs belong to the call in progress: the
                                        backend's worker shapes it (comm_link.h) */
    struct sr_comm_stage *stage;     /* device buffers' host mirrors (comm_stage.c), or NULL */
    void *state;                     /* backend's */
};

/* comm_stage.c: device buffers of a bound device that the host cannot address,
 * staged through host mirrors for a host-memory backend, on the thread that
 * drives the communicator. Per call: begin; in (send regions: copied to the
 * mirror on the call's stream) and out (receive regions: the call's stream
 * waits for the last copy back out of that mirror) translate a buffer to its
 * mirror (a host buffer is returned as it is); the backend then waits, off
 * the calling thread, for the stream to reach the call (an event recorded
 * after these copies) before its transport touches the mirrors; end, once
 * the collective is complete, copies the receive regions back on `stream`
 * and recycles the record. Regions are (counts[i], displs[i]) elements of
 * es bytes, i < n <= the communicator's size. */
struct sr_stage_call;
int sr_stage_on(sr_comm_t c);
struct sr_stage_call *sr_stage_begin(sr_comm_t c, sr_stream_t stream);
const void *sr_stage_in(sr_comm_t c, struct sr_stage_call *k, const void *buf, const size_t *counts,
                        const size_t *displs, int n, size_t es);
void *sr_stage_out(sr_comm_t c, struct sr_stage_call *k, void *buf, const size_t *counts,
                   const size_t *displs, int n, size_t es);
void sr_stage_end(sr_comm_t c, struct sr_stage_call *k, sr_stream_t stream);
/* The call's own stream (where a blocking call or sr_comm_wait copies back). */
sr_stream_t sr_stage_stream(const struct sr_stage_call *k);
/* Make the mirror of the allocation holding buf now (sr_comm_register). */
void sr_stage_register(sr_comm_t c, const void *buf);
void sr_stage_free(sr_comm_t c);
/* A world of one whose recv is hidden memory of its bound device: the
 * collective is one copy of `bytes` on the stream (none in place), with no
 * staging and no wait. 0 (nothing done) when that does not apply. */
int sr_stage_local_copy(sr_comm_t c, const void *send, void *recv, size_t bytes,
                        sr_stream_t stream);

/* comm_mpi_probe.c, for a stream-native backend whose communicators each
 * ride on a host companion, an MPI communicator of the same members
 * (comm_nccl.c). progress: the collectives the device has started on the
 * communicator riding on `host`, and the kind running (-1: none), which
 * other ranks' deadline probes read. report: a collective of that
 * communicator (`name`, kind, number seq) outlived its deadline (limit
 * seconds for `bytes`, `waited` so far): probe the members and print the
 * deadline's message (comm.h); only the first thread of the process to
 * report returns, any other waits for the job to end. abort_job: MPI_Abort
 * on the world (the launcher ends every rank). */
void sr_mpi_device_progress(sr_comm_t host, int64_t started, int kind);
void sr_mpi_device_report(sr_comm_t host, const char *name, int kind, int64_t seq, double limit,
                          double bytes, double waited);
_Noreturn void sr_mpi_abort_job(void);

/* comm.c: block the calling thread on `work` with a backend's `wait`, timed
 * as exposed (a "comm.wait" span on this thread, counters.seconds of the
 * kind it returns): sr_comm_wait's timing, for a backend's stream-wait host
 * function. */
void sr_comm_wait_exposed(sr_comm_t c, int (*wait)(sr_comm_t c, sr_comm_work_t work),
                          sr_comm_work_t work);

/* Allocate a communicator of `size` members with node_of zeroed (the caller
 * fills rank, node_of, backend, then calls sr_comm_set_locality). */
sr_comm_t sr_comm_alloc(int size);
/* Derive node, local_rank and local_size from rank and node_of. */
void sr_comm_set_locality(sr_comm_t c);
/* The step last given to sr_comm_set_step (0: none). */
int64_t sr_comm_step(void);
/* The deadline of a collective moving `bytes` (send plus receive buffers at
 * this rank) on `c`, in seconds from its start: c->timeout plus one second per
 * SR_COMM_FLOOR_MB_S MB; 0 when c->timeout is 0 (no deadline). */
double sr_comm_deadline(sr_comm_t c, double bytes);

#endif
