/*
 * What a comm backend provides: a table of functions over its own state. The
 * dispatcher (comm.c) counts and times every call around these.
 */
#ifndef SHARDREC_COMM_INTERNAL_H
#define SHARDREC_COMM_INTERNAL_H

#include "shardrec/comm.h"

struct sr_comm_backend {
    const char *name;
    void (*all_reduce)(sr_comm_t c, const void *send, void *recv, size_t count,
                       enum sr_dtype dtype, enum sr_reduce_op op, sr_comm_work_t *work);
    void (*all_to_allv)(sr_comm_t c, const void *send, const size_t *send_counts,
                        const size_t *send_displs, void *recv, const size_t *recv_counts,
                        const size_t *recv_displs, enum sr_dtype dtype, sr_comm_work_t *work);
    void (*reduce_scatter)(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                           enum sr_dtype dtype, enum sr_reduce_op op, sr_comm_work_t *work);
    void (*all_gather)(sr_comm_t c, const void *send, void *recv, size_t send_count,
                       enum sr_dtype dtype, sr_comm_work_t *work);
    void (*broadcast)(sr_comm_t c, const void *send, void *recv, size_t count,
                      enum sr_dtype dtype, int root, sr_comm_work_t *work);
    void (*barrier)(sr_comm_t c);
    void (*wait)(sr_comm_t c, sr_comm_work_t work);
    int (*test)(sr_comm_t c, sr_comm_work_t work);
    void (*free)(sr_comm_t c);
};

struct sr_comm {
    const struct sr_comm_backend *backend;
    int rank, size, local_size, node;
    int *node_of; /* (W) node index of every rank */
    struct sr_comm_counters counters;
    void *state; /* backend's */
};

#endif
