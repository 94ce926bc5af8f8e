/*
 * The MPI backend's parts, shared by its files (only built with SR_USE_MPI):
 *
 *   comm_mpi.c        the world: MPI start-up, nodes, communicators (attach,
 *                     split, free), the backend table, finalize
 *   comm_mpi_queue.c  a communicator's queue of work items and its worker
 *                     thread: stream readiness, polling, completion, waits
 *   comm_mpi_coll.c   the collectives: arguments, staging, MPI_I* starts
 *   comm_mpi_probe.c  the deadline: the stuck-rank probe, its report, the
 *                     responder thread that answers probes, the registry
 *
 * A work item is one queued call (a collective, or a set-up call such as a
 * split): the caller fills it and submits it; the communicator's worker runs
 * it; the caller (or a stream's host function) waits for it and releases it.
 */
#ifndef SHARDREC_COMM_MPI_INTERNAL_H
#define SHARDREC_COMM_MPI_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

#include "shardrec/error.h"
#include "comm/comm_internal.h"

#define KIND_SETUP SR_COLL_COUNT /* a work item that is not a counted collective */

const char *sr_mpi_error_string(int rc);
#define SR_MPI_CHECK(stmt) SR_CHECK_GEN(stmt, int, MPI_SUCCESS, sr_mpi_error_string)

struct mpi_state;

struct sr_comm_work {
    struct sr_comm_work *next; /* FIFO queue or free list */
    struct mpi_state *owner;
    int kind; /* enum sr_coll, or KIND_SETUP */
    void (*start)(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req);
    const void *send; /* host memory (a mirror when staged) */
    void *recv;
    int count, root;
    size_t elem; /* bytes per element */
    MPI_Datatype type;
    int *ints; /* (4, W): send counts, send displs, recv counts, recv displs */
    int color, key;
    MPI_Comm out; /* a split's result */
    int in_use, done;
    double limit;  /* deadline, seconds after the worker starts it; 0: none */
    double bytes;  /* payload (send + receive buffers), for messages */
    int64_t seq;   /* its number on the communicator, from 1 (worker) */
    int traced;    /* submitted while recording: the worker records its span */
    int shaped;    /* an emulated link delays its completion (comm_link.h) */
    struct sr_link_msgs link; /* its shaped messages (the dispatcher's c->link_msgs) */
    int64_t trace_step;
    struct sr_trace_args trace; /* label, bytes, peers (the dispatcher's c->call) */
    /* stream order (comm_mpi_queue.c) */
    struct sr_device *ready_dev; /* the device of `ready` (made with the item) */
    sr_event_t ready;            /* recorded on the call's stream at the call */
    int await_ready;             /* the worker waits for `ready` before starting */
    struct sr_stage_call *stage; /* the call's staged buffers (comm_stage.c), or NULL */
};

struct mpi_state {
    MPI_Comm comm;
    sr_comm_t c; /* the communicator this is the state of (name) */
    int id;      /* creation number in this process, the same on every rank */
    int rank, size;
    int *world_of; /* (size) world rank of each member */
    struct mpi_state *next_live; /* the registry the responder reads */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;              /* worker: work queued, or stop */
    pthread_cond_t done;              /* caller: an item finished */
    struct sr_comm_work *head, *tail; /* queued, in submission order */
    struct sr_comm_work *free_list;
    int outstanding; /* items handed out and not released */
    int stop;
    double busy[SR_COLL_COUNT]; /* worker seconds per kind, finished work */
    int64_t started;            /* collectives the worker has started (seq of the last) */
    int cur_kind;               /* kind of the item running now, or -1 */
    int trace_named;            /* the worker has named its trace track */
    /* A stream-native communicator riding on this one (comm_nccl.c): the
     * collectives its device has started, and the kind running, or -1. */
    int64_t dev_started;
    int dev_kind;
};

/* ---- comm_mpi_queue.c ---------------------------------------------------------- */

#define SR_MPI_ITEMS 32 /* work items a communicator makes up front */

/* Put n new items in s's free list. */
void sr_mpi_items_reserve(struct mpi_state *s, int n);
/* A free item of s (the free list, else a new one), marked in use. */
struct sr_comm_work *sr_mpi_get_item(struct mpi_state *s);
/* Stream order for a collective of c on `stream`: staging of its buffers
 * (comm_stage.c) and the event its worker waits for; call between filling
 * the item's buffers (through sr_mpi_stage_in/out) and submitting it. */
void sr_mpi_stream_order(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream);
const void *sr_mpi_stage_in(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream,
                            const void *buf, const size_t *counts, const size_t *displs, int n,
                            size_t es);
void *sr_mpi_stage_out(sr_comm_t c, struct sr_comm_work *w, sr_stream_t stream, void *buf,
                       const size_t *counts, const size_t *displs, int n, size_t es);
/* Queue w; blocking (work == NULL) waits for it (and copies staged results
 * back on its stream), else hands it out in *work. */
void sr_mpi_submit(struct mpi_state *s, struct sr_comm_work *w, sr_comm_work_t *work);
/* The backend table's wait, test and stream_wait. */
int sr_mpi_wait(sr_comm_t c, sr_comm_work_t w);
int sr_mpi_test(sr_comm_t c, sr_comm_work_t w);
void sr_mpi_stream_wait(sr_comm_t c, sr_comm_work_t w, sr_stream_t stream);
/* The worker thread of a communicator (its argument: the mpi_state). */
void *sr_mpi_worker_main(void *arg);
/* Release every item of s's free list (the communicator is being freed). */
void sr_mpi_items_free(struct mpi_state *s);

/* ---- comm_mpi_coll.c ------------------------------------------------------------- */

void sr_mpi_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                       enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                       sr_comm_work_t *work);
void sr_mpi_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                        const size_t *send_displs, void *recv, const size_t *recv_counts,
                        const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                        sr_comm_work_t *work);
void sr_mpi_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                           enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                           sr_comm_work_t *work);
void sr_mpi_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                       enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work);
void sr_mpi_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                      enum sr_dtype dtype, int root, sr_stream_t stream, sr_comm_work_t *work);
void sr_mpi_barrier(sr_comm_t c);

/* ---- comm_mpi_probe.c ------------------------------------------------------------ */

/* Collective w of s outlived its deadline after `waited` seconds: find who
 * is missing, say so, end every rank. */
_Noreturn void sr_mpi_timed_out(struct mpi_state *s, struct sr_comm_work *w, double waited);
/* The live communicators the responder reads: add s (giving it its id),
 * remove it. */
void sr_mpi_registry_add(struct mpi_state *s);
void sr_mpi_registry_remove(struct mpi_state *s);
/* The probe communicator (a dup of the world) and the responder thread:
 * made with the first world, ended by finalize. probe_init is idempotent;
 * probe_drop frees the probe communicator of a world that failed to start
 * (before start_responder). */
void sr_mpi_probe_init(void);
void sr_mpi_probe_drop(void);
void sr_mpi_start_responder(void);
void sr_mpi_stop_responder(void);
int sr_mpi_responder_running(void);
void sr_mpi_sleep_ns(long ns);

#endif
