/*
 * The emulated inter-node link (tests and benchmarks only; comm.h's
 * sr_comm_set_link states the model). A link is shared by a communicator and
 * every communicator derived from it afterwards, so that sparse, dense, node
 * and cross traffic of one process queue on the same FIFOs.
 *
 * The dispatcher (comm.c) records the shaped messages of the call in progress
 * in the communicator's sr_link_msgs; the backend's worker reserves the link
 * for them when it starts the collective (sr_link_reserve) and completes the
 * collective no earlier than the returned arrival (sr_link_sleep_until).
 */
#ifndef SHARDREC_COMM_LINK_H
#define SHARDREC_COMM_LINK_H

#include <stdint.h>

#include "shardrec/comm.h"

enum sr_link_dir { SR_LINK_OUT = 0, SR_LINK_IN = 1 };

/* The messages of one collective at this rank: bytes[dir * nodes + n] is the
 * payload sent to (OUT) or received from (IN) node n, -1 when no message
 * crosses that direction. */
struct sr_link_msgs {
    int nodes;
    int64_t *bytes; /* (2, nodes) */
};

struct sr_link;

/* A link of `nodes` nodes (every direction free now); one reference. */
struct sr_link *sr_link_new(const struct sr_comm_link *cfg, int nodes);
struct sr_link *sr_link_ref(struct sr_link *l);
/* Drop a reference; the last one frees the link. NULL is a no-op. */
void sr_link_unref(struct sr_link *l);
int sr_link_nodes(const struct sr_link *l);

/* Message lists: init allocates (2, nodes) entries, all "no message". */
void sr_link_msgs_init(struct sr_link_msgs *m, int nodes);
void sr_link_msgs_free(struct sr_link_msgs *m);
void sr_link_msgs_clear(struct sr_link_msgs *m);
/* One more message of `bytes` (0 allowed: a latency-only message). */
void sr_link_msgs_add(struct sr_link_msgs *m, enum sr_link_dir dir, int node, uint64_t bytes);
/* dst = src; dst is (re)allocated to src's size when it differs. */
void sr_link_msgs_copy(struct sr_link_msgs *dst, const struct sr_link_msgs *src);
int sr_link_msgs_any(const struct sr_link_msgs *m);

/* Queue m's messages on l's FIFOs, the collective starting at `t` (seconds of
 * sr_clock_seconds): each direction's message starts when that direction is
 * free (at t at the earliest), holds it for bytes / bandwidth and arrives
 * latency later. Returns the latest arrival (0 when m holds no message).
 * Thread-safe (the workers of several communicators share a link). */
double sr_link_reserve(struct sr_link *l, const struct sr_link_msgs *m, double t);
/* Sleep (no spinning) until sr_clock_seconds() >= t. */
void sr_link_sleep_until(double t);

#endif
