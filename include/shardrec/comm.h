/*
 * Communication layer: every collective shardrec issues goes through here, is
 * counted (calls, logical payload bytes per destination with self excluded,
 * split intra-node / inter-node) and timed. Nothing above this layer touches
 * MPI or NCCL.
 *
 * Backends are tables of functions (src/comm/comm_internal.h): comm_single.c
 * (a world of one rank, always built), comm_mpi*.c (CPU transport and
 * bootstrap; a stub that returns SR_ERR_UNSUPPORTED when the build has no
 * MPI), and comm_nccl*.c (GPUs, bootstrapped over MPI; a stub that returns
 * SR_ERR_UNSUPPORTED when the build has no NCCL).
 *
 * Arguments follow NCCL's order after the handle:
 *   (comm, send, recv, count, dtype, op, stream)
 * Counts are in elements. Variable exchanges take per-peer element counts and
 * displacements (in elements, from the start of the buffer).
 *
 * Usage contract
 * --------------
 * - Launch: `mpirun -np W prog` (or srun). The program calls
 *   sr_comm_init_mpi once for the world, derives the communicators it needs
 *   (sr_comm_dup for separate sparse and dense traffic, sr_comm_split_node and
 *   sr_comm_split_cross for two-level exchanges such as TWRW), frees them all
 *   with sr_comm_free, then calls sr_comm_finalize.
 * - Order: every member of a communicator issues that communicator's
 *   collectives (and its dup/split/free/check_same calls) in one fixed,
 *   rank-independent order. Different communicators are independent: their
 *   collectives may be in flight at the same time in any interleaving.
 * - One thread drives a communicator: the thread that issues its calls also
 *   waits for them. Different communicators may be driven by different threads.
 * - Blocking vs non-blocking: a call with `work == NULL` returns when its
 *   result is in `recv`. A call with `work != NULL` returns at once with a
 *   handle in *work; the caller completes it with sr_comm_wait (or polls
 *   sr_comm_test) and must keep `send`, `recv` untouched until then (count and
 *   displacement arrays are copied; they may be reused at once). A handle
 *   may be NULL (the call already completed); waiting on NULL is a no-op.
 *   Calls on one communicator run in submission order, so a blocking call
 *   also waits for the non-blocking calls queued before it.
 * - Progress: the MPI backend gives each communicator a worker thread that
 *   runs its queue of collectives in order; a non-blocking collective
 *   progresses while the caller computes, without any call into this layer,
 *   and the worker sleeps (no busy loop) between polls of an in-flight
 *   collective. Waiting blocks on a condition variable. On a bound device
 *   the worker, not the caller, waits for the call's stream to reach the
 *   call before it starts a collective (sr_comm_bind_device).
 * - In place: all_reduce with send == recv; reduce_scatter with send == recv
 *   (the result lands in the first recv_count elements); all_gather with
 *   send == recv + rank * send_count; broadcast with send == recv on the
 *   root (non-roots' send is ignored and may be NULL). all_to_allv buffers
 *   must not overlap.
 * - Dtypes: reductions take F32, F64, I32, I64 and U8 (SUM); F16 and BF16 may
 *   be moved (all_to_allv, all_gather, broadcast) but not reduced: a
 *   compressed reduction is an all-to-all plus a local fp32 sum (DESIGN.md).
 * - Counts above INT_MAX elements abort with a clear message (MPI 3 takes int
 *   counts): split such a transfer.
 * - Deadline: every collective must complete within its communicator's
 *   timeout (sr_comm_set_timeout; 60 s by default) plus one second per
 *   SR_COMM_FLOOR_MB_S MB of its payload at this rank (send plus receive
 *   buffer bytes), counted from when this rank starts it. When it does not,
 *   this rank asks every member of the communicator, with a short probe of
 *   its own deadline (SR_COMM_PROBE_S), whether it has reached that
 *   collective; a peer that is stopped or hung cannot answer, one that is
 *   alive answers where it is. The rank then prints one line naming the
 *   collective, the communicator, the step (sr_comm_set_step) and the ranks
 *   that did not arrive (world ranks), and ends the whole job with exit
 *   status 1 (MPI_Abort on the world: the launcher kills every rank, stopped
 *   ones included). A rank that dies ends the job through the launcher, as
 *   before. Every backend keeps this contract (NCCL: the same deadline on
 *   the stream's completion, then ncclCommAbort and the same message).
 *   Blocking set-up calls (dup, split, free) have no deadline.
 * - Transport failures and misuse (a bad dtype, an unwaited handle at free,
 *   communicators alive at finalize) abort with the rank and the failing
 *   statement (SR_ABORT / SR_MPI_CHECK); they are never returned. Errors whose
 *   cause is the user's input (ranks per node, differing configs) are returned
 *   as enum sr_status with sr_error_message set.
 *
 * Counting rules (struct sr_comm_counters)
 * ----------------------------------------
 * calls[k]: one per collective call of kind k, blocking or not; calls_inter[k]
 * those of them that sent bytes to a rank on another node.
 * bytes: the logical payload this rank sends to each other rank (self
 * excluded, independent of the algorithm MPI picks), added to bytes_intra when
 * that rank is on this rank's node, else bytes_inter:
 *   all_to_allv     send_counts[p] elements to each peer p;
 *   all_reduce      count elements to each other rank (its contribution);
 *   reduce_scatter  recv_count elements to each other rank (its block);
 *   all_gather      send_count elements to each other rank;
 *   broadcast       count elements to each other rank, on the root only;
 *   barrier         no bytes.
 * Node membership is the world's (detected or emulated by ranks_per_node) and
 * is kept by derived communicators: a cross-node communicator counts inter.
 * Times, per kind, in seconds:
 *   seconds        exposed: wall time the caller spent inside blocking calls
 *                  plus time blocked in sr_comm_wait;
 *   seconds_total  busy: time the communication worker spent running the
 *                  collectives (for the single backend, equal to seconds).
 *   Overlapped time = seconds_total - seconds (summed over kinds; a blocking
 *   call queued behind non-blocking work counts that queueing as exposed).
 * A non-blocking call's busy time is counted once it has finished.
 *
 * Trace (shardrec/trace.h): exposed time is the caller's "comm.wait" span (in
 * its stage timer; recorded with the collective, communicator and stage while
 * tracing). While tracing, the MPI worker records a busy span per collective
 * on its track ("comm NAME"), named by the stage that issued it, with bytes,
 * peers and bytes and peers on other nodes as arguments.
 */
#ifndef SHARDREC_COMM_H
#define SHARDREC_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/stream.h"
#include "shardrec/tensor.h"

struct sr_device;

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
    uint64_t calls_inter[SR_COLL_COUNT]; /* of which sent bytes to another node */
    uint64_t bytes_intra[SR_COLL_COUNT]; /* sent to other ranks on this node */
    uint64_t bytes_inter[SR_COLL_COUNT]; /* sent to ranks on other nodes */
    double seconds[SR_COLL_COUNT];       /* exposed: blocking calls and waits */
    double seconds_total[SR_COLL_COUNT]; /* busy: the worker running them */
};

/* ---- construction ---------------------------------------------------------- */

/* A world of one rank (rank 0 of 1, one node). */
sr_comm_t sr_comm_init_single(void);

/*
 * The MPI world (collective over all launched ranks). Initialises MPI with
 * MPI_THREAD_MULTIPLE (unless already initialised) and sets the log rank.
 * ranks_per_node: 0 reads env SR_RANKS_PER_NODE, and if that is unset detects
 * nodes with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); N > 0 pretends that
 * nodes are blocks of N consecutive ranks (for tests on one host: the node
 * and cross communicators are then real sub-communicators of those blocks).
 * Returns SR_OK and *world, or (with *world = NULL and a message):
 *   SR_ERR_INVALID_ARG  W is not a multiple of N, N < 0, SR_RANKS_PER_NODE
 *                       malformed, or detected nodes hold unequal rank counts;
 *   SR_ERR_UNSUPPORTED  no MPI in this build, or MPI lacks THREAD_MULTIPLE.
 * Env SR_EMULATE_LINK=BW_GB_S[,LATENCY_US] (tests only) gives the world an
 * emulated inter-node link (sr_comm_set_link); malformed: SR_ERR_INVALID_ARG.
 * On error MPI may be initialised: call sr_comm_finalize before exiting.
 */
int sr_comm_init_mpi(sr_comm_t *world, int *argc, char ***argv, int ranks_per_node);
/*
 * The NCCL world over the members of `mpi` (a world from sr_comm_init_mpi,
 * which stays the caller's; collective over it), each rank driving `dev`, its
 * CUDA device (the world is bound to it). Collectives on device memory run
 * through NCCL on the stream they are given, without a host wait; those on
 * host memory through an MPI communicator of the same members (a dup of
 * `mpi`), so one communicator takes both. Derived communicators (dup,
 * split_node, split_cross) are NCCL communicators too (ncclCommSplit).
 * When `mpi`'s nodes are emulated (ranks_per_node), each emulated node sets
 * its own NCCL_HOSTID before NCCL starts, so traffic between them takes
 * NCCL's network transport (on one host: NCCL_SOCKET_IFNAME=lo and
 * NCCL_IB_DISABLE=1 make that the loopback socket). The deadline holds as
 * on MPI: a watchdog thread finds the late collective, probes the members,
 * prints the same message, aborts every NCCL communicator and ends the job.
 * Returns SR_OK, or (with *world NULL and a message) SR_ERR_UNSUPPORTED: no
 * NCCL in this build, `dev` is not a CUDA device, two ranks of one node
 * drive one GPU (NCCL refuses that), or NCCL failed to start;
 * SR_ERR_INVALID_ARG: `mpi` is not an MPI world.
 */
int sr_comm_init_nccl(sr_comm_t *world, sr_comm_t mpi, struct sr_device *dev);
/* 1 when this build has the NCCL backend. */
int sr_comm_has_nccl(void);
/* Collective over `comm` (its host transport): 1 when two of its ranks on one
 * node drive the same physical device (dev->uid, on one host), with the
 * lowest such pair in *a, *b; 0 otherwise (also for devices without a uid). */
int sr_comm_gpu_shared_in_node(sr_comm_t comm, struct sr_device *dev, int *a, int *b);
/* The same for any two of its ranks, of one node or not (emulated nodes on
 * one host: --ranks-per-node): 1 when two ranks take turns on one device. */
int sr_comm_gpu_shared(sr_comm_t comm, struct sr_device *dev, int *a, int *b);
/* Shut MPI down (if sr_comm_init_mpi started it). Every MPI communicator must
 * have been freed (else abort). A no-op without MPI. */
void sr_comm_finalize(void);
/* 1 if this process was started by mpirun/srun (OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE, PMIX_RANK, ... in the environment), so a CLI can choose MPI. */
int sr_comm_is_mpi_launch(void);
/* This process's rank on its host, from the launcher's environment (Open
 * MPI, MPICH, Slurm, torchrun), else `world_rank`: which GPU a rank takes. */
int sr_comm_launch_local_rank(int world_rank);

/*
 * Derived communicators (collective over `comm`; each has its own queue,
 * worker thread and counters; free each with sr_comm_free):
 *   sr_comm_dup          the same members in the same order;
 *   sr_comm_split_node   the ranks of my node, ordered by rank (size =
 *                        local_size; rank = my local rank);
 *   sr_comm_split_cross  the ranks with my local rank on every node, ordered
 *                        by rank (size = number of nodes; local_size 1).
 * They keep every member's node, so byte counters stay intra/inter-exact.
 */
sr_comm_t sr_comm_dup(sr_comm_t comm);
sr_comm_t sr_comm_split_node(sr_comm_t comm);
sr_comm_t sr_comm_split_cross(sr_comm_t comm);

/* Collective (same order on every member). Every handle must have been
 * waited (else abort). NULL is a no-op. */
void sr_comm_free(sr_comm_t comm);

int sr_comm_rank(sr_comm_t comm);
int sr_comm_size(sr_comm_t comm);       /* W */
int sr_comm_local_size(sr_comm_t comm); /* ranks of this communicator on my node */
int sr_comm_local_rank(sr_comm_t comm); /* my index among them */
int sr_comm_node(sr_comm_t comm);       /* node index of this rank (the world's) */
/* Node index (the world's numbering) of member `rank` of `comm`: a member's
 * host, detected or emulated by ranks_per_node, as every member knows it
 * without a collective. Aborts unless 0 <= rank < size. */
int sr_comm_node_of(sr_comm_t comm, int rank);
const char *sr_comm_backend_name(sr_comm_t comm);

/*
 * Collective consistency check: all-gathers `hash` (of a config, plan, data
 * layout: `what` names it). Returns SR_OK if every rank holds the same value;
 * otherwise EVERY rank returns SR_ERR_INVALID_ARG with the message
 * "config differs across ranks: rank P has hash X, rank 0 has Y (what)"
 * naming the lowest differing rank. Not counted in the counters.
 */
int sr_comm_check_same(sr_comm_t comm, uint64_t hash, const char *what);

/* ---- deadline (see the contract above) ------------------------------------- */

#define SR_COMM_TIMEOUT_DEFAULT 60.0 /* seconds */
#define SR_COMM_FLOOR_MB_S      50.0 /* payload scaling: the slowest link we still wait for */
#define SR_COMM_PROBE_S         2.0  /* how long a timed-out rank waits for probe answers */

/* The base deadline of every later collective on `comm`, in seconds (0: wait
 * forever); communicators derived from `comm` afterwards inherit it. Not
 * collective; set it to the same value on every rank. */
void sr_comm_set_timeout(sr_comm_t comm, double seconds);
double sr_comm_timeout(sr_comm_t comm);
/* A short name for messages ("sparse", "dense"; at most 15 characters kept).
 * Not collective. Default: "world" for the world, "dup"/"node"/"cross"
 * for derived ones. */
void sr_comm_set_name(sr_comm_t comm, const char *name);
/* The training step this process is at (0: none yet), named in a timeout
 * message. Process-wide, thread-safe, costs one atomic store. */
void sr_comm_set_step(int64_t step);

/* ---- emulated inter-node link (tests and benchmarks only) ------------------- */

/*
 * On one host, ranks declared on different nodes (ranks_per_node) talk over
 * shared memory or loopback: far faster than a NIC. An emulated link makes
 * their inter-node collectives complete no earlier than a link of this
 * bandwidth and latency would deliver them, so that how well communication
 * hides behind compute can be measured on a small machine. It only delays;
 * data, results and counters' bytes are those of the real transport. Not for
 * production runs.
 *
 * Model (per process; the MPI backend; single-rank worlds have no other node):
 * - Messages are the logical payloads of the counting rules below, per
 *   destination, self excluded; only those to or from ranks on another node
 *   are shaped. Outgoing: what the rules count at this rank. Incoming: what
 *   they count at each sender for this rank (all_to_allv recv_counts[p];
 *   all_reduce count, reduce_scatter recv_count and all_gather send_count from
 *   each other rank; broadcast count from the root). A barrier sends a
 *   zero-byte (latency-only) message to and from each rank on another node;
 *   other zero-byte payloads send no message.
 * - Each rank keeps one FIFO per direction and other node (its sends to node
 *   n; node n's sends to it). A collective's messages are queued when the
 *   communicator's worker starts it: a message to or from node n starts when
 *   that direction is free (now at the earliest), occupies it for bytes /
 *   bandwidth (the bytes to several ranks of node n queue one after another)
 *   and arrives `latency` later. Communicators derived from this one share its
 *   FIFOs, so sparse and dense traffic queue on one link.
 * - The collective completes (blocking call returns, sr_comm_wait/test see it
 *   done) at the later of the real transport's completion and the arrival of
 *   its last shaped message, outgoing or incoming. The worker sleeps until
 *   then (no core is used); the caller may compute meanwhile exactly as over a
 *   slow real link. Busy time (seconds_total, the worker's trace span)
 *   includes the emulated transfer; exposed time is what the caller waits.
 * - Approximations: the incoming FIFO mirrors the sender's outgoing one from
 *   the moment THIS rank starts the collective, not when the sender starts it
 *   (ranks start together up to their skew), and it sees only the messages
 *   sent to this rank. Each rank has its own FIFOs: with L ranks per node the
 *   node's aggregate is L x bandwidth (a NIC share per rank, as "1.56 GB/s per
 *   GPU" in a node of 8 on a 100 Gb/s NIC), and the ranks of one node do not
 *   slow each other down. A communicator's worker runs one collective at a
 *   time, so its next collective starts after the previous one's arrival
 *   (latency is not pipelined within one communicator; it is across them).
 *   The deadline (above) still scales with SR_COMM_FLOOR_MB_S: a link slower
 *   than that needs a longer --comm-timeout for large collectives.
 */
struct sr_comm_link {
    double gb_per_s;   /* bandwidth of each direction, 1e9 bytes per second (> 0) */
    double latency_us; /* one-way latency of a message, microseconds (>= 0) */
};

/* Parse "BW_GB_S[,LATENCY_US]" (e.g. "0.5" or "0.5,20"). SR_ERR_INVALID_ARG,
 * with a message naming `what` (a flag or variable), for anything else, a
 * bandwidth <= 0 or above 1e6, or a latency < 0 or above 1e7 us. */
int sr_comm_link_parse(const char *what, const char *text, struct sr_comm_link *link);
/* Emulate `link` on `comm` and on every communicator derived from it
 * afterwards (NULL or gb_per_s 0: none). Not collective: call it on every
 * rank alike, before deriving communicators, with no call in flight.
 * sr_comm_init_mpi sets it from env SR_EMULATE_LINK when that is set. */
void sr_comm_set_link(sr_comm_t comm, const struct sr_comm_link *link);
/* 1 and *link if `comm` emulates a link, else 0. */
int sr_comm_link(sr_comm_t comm, struct sr_comm_link *link);

/* ---- streams and memory ------------------------------------------------------ */

/* Where a communicator's transport moves data from: host memory for the
 * single and MPI backends, device memory for NCCL. A host-memory communicator
 * bound to a device whose memory the host cannot address (not host_visible:
 * a GPU, the opaque CPU device) also takes buffers in that device's memory
 * (sr_dev_hidden) and stages them through pinned host mirrors of their
 * allocations: send regions are copied out on the call's stream (the
 * transport reads them once the stream has run those copies), and receive
 * regions copied back in stream order once the collective is complete (a
 * blocking call: on its stream before it returns; a non-blocking one: at
 * sr_comm_wait or a successful sr_comm_test on its stream, or on the
 * waiting stream after sr_comm_stream_wait). Device
 * results are therefore stream-ordered, as on NCCL: the host reads them only
 * through sr_dev_copy and a wait. Host buffers are used as they are, and
 * every call is counted and timed as any other. A world of one copies device
 * buffers on the stream instead (no staging, no wait). On a host-visible
 * device none of this happens. */
enum sr_comm_memory { SR_COMM_MEMORY_HOST = 0, SR_COMM_MEMORY_DEVICE = 1 };
enum sr_comm_memory sr_comm_memory(sr_comm_t comm);

/* Prepare `comm` to move `buf`, an allocation of its bound device that the
 * host cannot address (any pointer into it): a staging communicator makes
 * the allocation's host mirror now instead of at its first collective, so a
 * training loop allocates nothing. A no-op everywhere else (a world of one,
 * a NULL comm or buf included). Not collective. */
void sr_comm_register(sr_comm_t comm, const void *buf);

/* The device whose streams this communicator's collectives are ordered on
 * (communicators derived afterwards inherit it). Once bound, a collective
 * given a stream reads its send buffer only after the work issued on that
 * stream before the call, and the calling thread does not wait for that
 * work: a device-memory communicator enqueues on the stream; a host-memory
 * one records an event there and its worker waits for it (MPI), or copies
 * on the stream (single). A blocking call still returns with a host recv
 * filled (it waits for the collective, and so for that work); a device recv
 * is filled in stream order. Without a device (the default) streams are
 * ignored. Not collective. */
void sr_comm_bind_device(sr_comm_t comm, struct sr_device *dev);
struct sr_device *sr_comm_device(sr_comm_t comm); /* NULL when none is bound */

/* Make `stream` wait for a non-blocking collective without blocking the host:
 * work issued on the stream afterwards starts once the collective's result is
 * in recv. The handle is consumed (do not also sr_comm_wait it); waiting
 * counts as exposed time when the stream reaches it on a thread that is not
 * a comm worker (a host-memory backend puts a host function on the stream
 * that blocks until the collective is done: on the immediate CPU device,
 * where ops run at their call, that is at once, on the caller). Without a
 * bound device this is sr_comm_wait. */
void sr_comm_stream_wait(sr_comm_t comm, sr_comm_work_t work, sr_stream_t stream);

/* ---- collectives (see the contract above) ---------------------------------- */

void sr_comm_all_reduce(sr_comm_t comm, const void *send, void *recv, size_t count,
                        enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                        sr_comm_work_t *work);
/* send_counts, send_displs, recv_counts, recv_displs: (W) element counts. */
void sr_comm_all_to_allv(sr_comm_t comm, const void *send, const size_t *send_counts,
                         const size_t *send_displs, void *recv, const size_t *recv_counts,
                         const size_t *recv_displs, enum sr_dtype dtype, sr_stream_t stream,
                         sr_comm_work_t *work);
/* send: (W, recv_count); each rank receives the sum of block `rank` of every send. */
void sr_comm_reduce_scatter(sr_comm_t comm, const void *send, void *recv, size_t recv_count,
                            enum sr_dtype dtype, enum sr_reduce_op op, sr_stream_t stream,
                            sr_comm_work_t *work);
/* recv: (W, send_count), block p from rank p. */
void sr_comm_all_gather(sr_comm_t comm, const void *send, void *recv, size_t send_count,
                        enum sr_dtype dtype, sr_stream_t stream, sr_comm_work_t *work);
void sr_comm_broadcast(sr_comm_t comm, const void *send, void *recv, size_t count,
                       enum sr_dtype dtype, int root, sr_stream_t stream, sr_comm_work_t *work);
void sr_comm_barrier(sr_comm_t comm);
/* Blocking sr_comm_all_gather and sr_comm_broadcast of host values that no
 * device work makes or reads (flags, counters): counted and timed as any
 * call, but not ordered after the bound device's stream, so the caller never
 * waits for the device's queued work (a poll each step stays off the
 * device's critical path). */
void sr_comm_all_gather_host(sr_comm_t comm, const void *send, void *recv, size_t send_count,
                             enum sr_dtype dtype);
void sr_comm_broadcast_host(sr_comm_t comm, const void *send, void *recv, size_t count,
                            enum sr_dtype dtype, int root);

/* Complete a non-blocking call (the handle is released); blocks without
 * spinning. NULL is a no-op. */
void sr_comm_wait(sr_comm_t comm, sr_comm_work_t work);
/* 1 if done (then the handle is released), 0 otherwise. Never blocks. */
int sr_comm_test(sr_comm_t comm, sr_comm_work_t work);

/* ---- counters ----------------------------------------------------------------- */

/* A snapshot, refreshed by each call (seconds_total of finished work). */
const struct sr_comm_counters *sr_comm_counters(sr_comm_t comm);
void sr_comm_counters_reset(sr_comm_t comm);
/* acc += c, field by field (to sum a rank's sub-communicators). */
void sr_comm_counters_add(struct sr_comm_counters *acc, const struct sr_comm_counters *c);
const char *sr_coll_name(enum sr_coll c);

#endif
