/*
 * The NCCL backend's parts, shared by its files (only built with SR_USE_NCCL):
 *
 *   comm_nccl.c       the world (bootstrap over MPI, emulated nodes' host
 *                     ids, the one-GPU-per-node check), communicators
 *                     (split, free), the collectives, the backend table
 *   comm_nccl_work.c  work items (events around each collective on the
 *                     caller's stream), wait, test, stream_wait, busy time,
 *                     and the watchdog thread that keeps the deadline
 *
 * Every NCCL communicator rides on a host companion: an MPI communicator of
 * the same members, in the same order. Collectives on device memory go
 * through NCCL on the caller's stream; those on host memory (the counts
 * exchange, config hashes, evaluation gathers) through the companion, whose
 * worker keeps the stream order (comm_internal.h). The companion also
 * carries the deadline's probe: other ranks ask it how far this rank's
 * device has got.
 */
#ifndef SHARDREC_COMM_NCCL_INTERNAL_H
#define SHARDREC_COMM_NCCL_INTERNAL_H

#include <nccl.h>
#include <pthread.h>
#include <stdint.h>

#include "shardrec/error.h"
#include "comm/comm_internal.h"

#define SR_NCCL_CHECK(stmt) SR_CHECK_GEN(stmt, ncclResult_t, ncclSuccess, ncclGetErrorString)

struct nccl_state;

/* One call: a collective enqueued on a stream between two events, or a
 * host-memory call handed to the companion (host != NULL). */
struct sr_comm_work {
    struct sr_comm_work *next; /* the in-flight list or the free list */
    struct nccl_state *owner;
    int kind;            /* enum sr_coll */
    sr_comm_work_t host; /* the companion's handle, or NULL */
    sr_event_t begin, end;
    int64_t seq;         /* its number on the communicator, from 1 */
    double limit, bytes; /* deadline (s, from when the device starts it), payload */
    double started_at;   /* when the watchdog saw `begin` complete; 0: not yet */
    int released;        /* the caller is done with the handle */
    int finished;        /* `end` has completed and its busy time is counted */
    int traced;          /* issued while recording: its device span awaits the watchdog */
    int64_t trace_step;
    struct sr_trace_args trace; /* label, bytes, peers (the dispatcher's c->call) */
};

struct nccl_state {
    ncclComm_t comm;
    sr_comm_t c;    /* the communicator this is the state of */
    sr_comm_t host; /* the companion (MPI, same members) */
    struct sr_device *dev;
    pthread_mutex_t mu;                /* the lists, busy, the counters below */
    struct sr_comm_work *flight;       /* issued, not finished or not released */
    struct sr_comm_work *free_list;
    int64_t issued;                    /* collectives enqueued (seq of the last) */
    int64_t started;                   /* of which the device has begun */
    double busy[SR_COLL_COUNT];        /* device seconds per kind, finished work */
    int aborted;
    struct nccl_state *next_live;      /* the watchdog's registry */
};

/* ---- comm_nccl_work.c ---------------------------------------------------------- */

/* A work item for a collective of `kind` moving `bytes` (send plus receive
 * at this rank), its `begin` event recorded on `stream`: call right before
 * the NCCL calls. */
struct sr_comm_work *sr_nccl_begin(struct nccl_state *s, int kind, double bytes,
                                   sr_stream_t stream);
/* After the NCCL calls: `end` recorded on `stream`; the item is in flight
 * (the watchdog keeps its deadline). Blocking (work == NULL): released at
 * once (the result is in stream order); else handed out in *work. */
void sr_nccl_end(struct nccl_state *s, struct sr_comm_work *w, sr_stream_t stream,
                 sr_comm_work_t *work);
/* A host-memory call's handle from the companion, wrapped (NULL stays NULL). */
sr_comm_work_t sr_nccl_wrap_host(struct nccl_state *s, int kind, sr_comm_work_t host);
int sr_nccl_wait(sr_comm_t c, sr_comm_work_t w);
int sr_nccl_test(sr_comm_t c, sr_comm_work_t w);
void sr_nccl_stream_wait(sr_comm_t c, sr_comm_work_t w, sr_stream_t stream);
void sr_nccl_busy(sr_comm_t c, double seconds[SR_COLL_COUNT]);
/* Register s with the watchdog (started with the first) and make its first
 * work items; unregister it and release its items (every handle released, its
 * stream work done). */
void sr_nccl_watch(struct nccl_state *s);
void sr_nccl_unwatch(struct nccl_state *s);

#endif
