/*
 * Communication layer: every collective shardrec issues goes through here, is
 * counted (calls, logical payload bytes per destination with self excluded,
 * split intra-node / inter-node) and timed. Nothing above this layer touches
 * MPI or NCCL.
 *
 * Backends are tables of functions, one file each: comm_single.c (a world of
 * one rank, always built), and later comm_mpi.c (CPU transport and bootstrap)
 * and comm_nccl.c (GPUs, bootstrapped over MPI).
 *
 * Arguments follow NCCL's order after the handle:
 *   (comm, send, recv, count, dtype, op, stream)
 * Counts are in elements. Variable exchanges take per-peer element counts and
 * displacements. Every call is blocking unless it takes `work`: then it returns
 * at once and the caller completes it with sr_comm_wait (or polls sr_comm_test).
 * A communicator issues its collectives in one fixed, rank-independent order on
 * every rank; sparse and dense traffic use separate communicators so they can
 * run concurrently.
 *
 * Transport failures abort with the rank and the collective named (SR_ABORT);
 * they are never returned.
 */
#ifndef SHARDREC_COMM_H
#define SHARDREC_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"
#include "shardrec/tensor.h"

typedef struct sr_comm *sr_comm_t;
typedef struct sr_comm_work *sr_comm_work_t;

enum sr_reduce_op { SR_REDUCE_SUM = 0 };

enum sr_coll {
    SR_COLL_ALL_TO_ALLV = 0,
    SR_COLL_ALL_REDUCE,
    SR_COLL_REDUCE_SCATTER,
    SR_COLL_ALL_GATHER,
    SR_COLL_BROADCAST,
    SR_COLL_BARRIER,
    SR_COLL_COUNT
};

struct sr_comm_counters {
    uint64_t calls[SR_COLL_COUNT];
    uint64_t bytes_intra[SR_COLL_COUNT]; /* sent to other ranks on this node */
    uint64_t bytes_inter[SR_COLL_COUNT]; /* sent to ranks on other nodes */
    double seconds[SR_COLL_COUNT];       /* wall time inside blocking calls and waits */
};

/* A world of one rank (rank 0 of 1, one node). */
sr_comm_t sr_comm_init_single(void);
void sr_comm_free(sr_comm_t comm);

int sr_comm_rank(sr_comm_t comm);
int sr_comm_size(sr_comm_t comm);       /* W */
int sr_comm_local_size(sr_comm_t comm); /* ranks per node */
int sr_comm_node(sr_comm_t comm);       /* node index of this rank */
const char *sr_comm_backend_name(sr_comm_t comm);

void sr_comm_all_reduce(sr_comm_t comm, const void *send, void *recv, size_t count,
                        enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                        sr_comm_work_t *work);
/* send_counts, send_displs, recv_counts, recv_displs: (W) element counts. */
void sr_comm_all_to_allv(sr_comm_t comm, const void *send, const size_t *send_counts,
                         const size_t *send_displs, void *recv, const size_t *recv_counts,
                         const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                         sr_comm_work_t *work);
/* Each rank receives recv_count elements: the sum of block r of every send. */
void sr_comm_reduce_scatter(sr_comm_t comm, const void *send, void *recv, size_t recv_count,
                            enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                            sr_comm_work_t *work);
void sr_comm_all_gather(sr_comm_t comm, const void *send, void *recv, size_t send_count,
                        enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work);
void sr_comm_broadcast(sr_comm_t comm, const void *send, void *recv, size_t count,
                       enum sr_dtype dtype, int root, sr_stream_t stream, sr_comm_work_t *work);
void sr_comm_barrier(sr_comm_t comm);

/* Complete a non-blocking call (the handle is released). */
void sr_comm_wait(sr_comm_t comm, sr_comm_work_t work);
/* 1 if done (then the handle is released), 0 otherwise. */
int sr_comm_test(sr_comm_t comm, sr_comm_work_t work);

const struct sr_comm_counters *sr_comm_counters(sr_comm_t comm);
void sr_comm_counters_reset(sr_comm_t comm);
const char *sr_coll_name(enum sr_coll c);

#endif
