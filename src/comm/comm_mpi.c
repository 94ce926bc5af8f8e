/*
 * The MPI backend: the CPU transport and the bootstrap of a multi-rank job.
 *
 * Each communicator owns an MPI communicator and one worker thread with a
 * FIFO queue of work items. Every collective, blocking or not, is queued; the
 * worker takes items in submission order, starts the MPI non-blocking
 * collective and completes it by MPI_Test: back to back for the first 50 us
 * (small collectives end there), then sleeping between polls (1 us doubling
 * up to 100 us), so a long collective progresses while the caller computes
 * without busy-polling a core away from it. The caller of a blocking call, or
 * of sr_comm_wait, sleeps on a condition variable meanwhile. (On the 2-core
 * test machine, 2 ranks, a 32 MB all_reduce completed by MPI_Wait's spinning
 * was slower than by this polling, over shared memory and more so over TCP;
 * a 64-byte all_reduce took about 12 us over shared memory, 28 us over TCP.)
 * Open MPI progresses non-blocking collectives only inside MPI calls (no
 * asynchronous progress thread); this worker is that thread. Since the worker
 * is the only thread that calls MPI on its communicator, the MPI rule that
 * collectives on one communicator are not issued concurrently holds, and
 * ranks issue them in the same order as long as callers do (comm.h).
 *
 *   caller thread                      worker thread
 *   get_item (free list) -> fill
 *   enqueue ---- cond `wake` ---------> pop head, start MPI_I*, poll/wait
 *   wait: sleep on cond `done` <------- done = 1, busy[kind] += seconds
 *   release item to the free list
 *
 * Work items are recycled through a free list, so the steady state allocates
 * nothing. Each holds (4W) int counts for all_to_allv, copied at submission.
 * Dup and splits run through the queue too (MPI_Comm_split is collective on
 * the parent). Without SR_USE_MPI, sr_comm_init_mpi returns SR_ERR_UNSUPPORTED.
 */
#include <stdlib.h>
#include <string.h>

#include "shardrec/comm.h"
#include "shardrec/error.h"

/* Launchers that put these in the environment of every rank they start. */
int sr_comm_is_mpi_launch(void)
{
    static const char *vars[] = {
        "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",           "PMIX_RANK", "PMI_RANK",
        "MPI_LOCALNRANKS",      "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

#ifdef SR_USE_MPI

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "shardrec/alloc.h"
#include "shardrec/log.h"
#include "comm/comm_internal.h"

#define SPIN_NS     50000L        /* poll without sleeping this long after a collective starts */
#define POLL_MAX_NS 100000L       /* then sleep at most this long between two polls */
#define KIND_SETUP  SR_COLL_COUNT /* a work item that is not a counted collective */

static const char *mpi_error_string(int rc)
{
    static _Thread_local char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "MPI error %d", rc);
    return buf;
}

#define SR_MPI_CHECK(stmt) SR_CHECK_GEN(stmt, int, MPI_SUCCESS, mpi_error_string)

struct mpi_state;

struct sr_comm_work {
    struct sr_comm_work *next; /* FIFO queue or free list */
    struct mpi_state *owner;
    int kind; /* enum sr_coll, or KIND_SETUP */
    void (*start)(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req);
    const void *send;
    void *recv;
    int count, root;
    size_t elem; /* bytes per element */
    MPI_Datatype type;
    int *ints; /* (4, W): send counts, send displs, recv counts, recv displs */
    int color, key;
    MPI_Comm out; /* a split's result */
    int in_use, done;
};

struct mpi_state {
    MPI_Comm comm;
    int rank, size;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;              /* worker: work queued, or stop */
    pthread_cond_t done;              /* caller: an item finished */
    struct sr_comm_work *head, *tail; /* queued, in submission order */
    struct sr_comm_work *free_list;
    int outstanding; /* items handed out and not released */
    int stop;
    double busy[SR_COLL_COUNT]; /* worker seconds per kind, finished work */
};

static int mpi_started_here;
static atomic_int live_comms;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- arguments ----------------------------------------------------------------- */

static int to_int(size_t n, const char *what)
{
    if (n > INT_MAX)
        SR_ABORT("%s: %zu elements exceed INT_MAX (%d), the MPI 3 count limit; split the "
                 "transfer into smaller calls",
                 what, n, INT_MAX);
    return (int)n;
}

static MPI_Datatype mpi_type(enum sr_dtype d, int reduce, const char *what)
{
    switch (d) {
    case SR_DTYPE_F32:
        return MPI_FLOAT;
    case SR_DTYPE_F64:
        return MPI_DOUBLE;
    case SR_DTYPE_I32:
        return MPI_INT32_T;
    case SR_DTYPE_I64:
        return MPI_INT64_T;
    case SR_DTYPE_U8:
        return MPI_UINT8_T;
    case SR_DTYPE_F16:
    case SR_DTYPE_BF16:
        if (!reduce)
            return MPI_UINT16_T; /* moved as opaque 16-bit words */
        SR_ABORT("%s: %s cannot be reduced by the comm layer; send it with all_to_allv and "
                 "sum in fp32 on arrival",
                 what, sr_dtype_name(d));
    }
    SR_ABORT("%s: unknown dtype %d", what, (int)d);
}

static void check_op(enum sr_reduce_op op, const char *what)
{
    if (op != SR_REDUCE_SUM)
        SR_ABORT("%s: unknown reduce op %d", what, (int)op);
}

/* ---- the queue ------------------------------------------------------------------ */

static struct sr_comm_work *get_item(struct mpi_state *s)
{
    pthread_mutex_lock(&s->mu);
    struct sr_comm_work *w = s->free_list;
    if (w) {
        s->free_list = w->next;
    } else {
        w = sr_calloc(1, sizeof *w);
        w->ints = sr_calloc(4 * (size_t)s->size, sizeof(int));
        w->owner = s;
    }
    s->outstanding++;
    pthread_mutex_unlock(&s->mu);
    w->next = NULL;
    w->in_use = 1;
    w->done = 0;
    return w;
}

/* Called with s->mu held. */
static void release_locked(struct mpi_state *s, struct sr_comm_work *w)
{
    w->in_use = 0;
    w->next = s->free_list;
    s->free_list = w;
    s->outstanding--;
}

static int wait_item(struct mpi_state *s, struct sr_comm_work *w)
{
    SR_ASSERT(w->owner == s && w->in_use);
    pthread_mutex_lock(&s->mu);
    while (!w->done)
        pthread_cond_wait(&s->done, &s->mu);
    int kind = w->kind;
    release_locked(s, w);
    pthread_mutex_unlock(&s->mu);
    return kind;
}

/* Queue `w`; blocking (work == NULL) waits for it, else hands it out. */
static void submit(struct mpi_state *s, struct sr_comm_work *w, sr_comm_work_t *work)
{
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = w;
    else
        s->head = w;
    s->tail = w;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (work)
        *work = w;
    else
        wait_item(s, w);
}

/* ---- the worker ----------------------------------------------------------------- */

/* Test back to back for SPIN_NS (small collectives finish here), then sleep
 * between tests, 1 us doubling up to POLL_MAX_NS. */
static void complete(MPI_Request *req)
{
    double spin_end = now_s() + 1e-9 * SPIN_NS;
    long ns = 1000;
    for (;;) {
        int flag = 0;
        SR_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        if (flag)
            return;
        if (now_s() < spin_end)
            continue;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < POLL_MAX_NS)
            ns *= 2;
    }
}

static void run(struct mpi_state *s, struct sr_comm_work *w)
{
    MPI_Request req = MPI_REQUEST_NULL;
    w->start(s, w, &req);
    if (req != MPI_REQUEST_NULL)
        complete(&req);
}

static void *worker_main(void *arg)
{
    struct mpi_state *s = arg;
    prctl(PR_SET_TIMERSLACK, 1000UL); /* polls sleep microseconds; default slack is 50 us */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->wake, &s->mu);
        struct sr_comm_work *w = s->head;
        if (!w)
            break;
        s->head = w->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        double t0 = now_s();
        run(s, w);
        double dt = now_s() - t0;
        pthread_mutex_lock(&s->mu);
        if (w->kind < SR_COLL_COUNT)
            s->busy[w->kind] += dt;
        w->done = 1;
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- collectives: start functions (worker) and submitters (caller) ---------------- */

static void start_all_reduce(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    const void *send = w->send == w->recv ? MPI_IN_PLACE : w->send;
    SR_MPI_CHECK(MPI_Iallreduce(send, w->recv, w->count, w->type, MPI_SUM, s->comm, req));
}

static void mpi_all_reduce(sr_comm_t c, const void *send, void *recv, size_t count,
                           enum sr_dtype dtype, enum sr_reduce_op op, sr_comm_work_t *work)
{
    check_op(op, "all_reduce");
    struct sr_comm_work *w = get_item(c->state);
    w->kind = SR_COLL_ALL_REDUCE;
    w->start = start_all_reduce;
    w->send = send;
    w->recv = recv;
    w->count = to_int(count, "all_reduce");
    w->type = mpi_type(dtype, 1, "all_reduce");
    submit(c->state, w, work);
}

static void start_all_to_allv(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    int W = s->size;
    SR_MPI_CHECK(MPI_Ialltoallv(w->send, w->ints, w->ints + W, w->type, w->recv, w->ints + 2 * W,
                                w->ints + 3 * W, w->type, s->comm, req));
}

static void mpi_all_to_allv(sr_comm_t c, const void *send, const size_t *send_counts,
                            const size_t *send_displs, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, enum sr_dtype dtype, sr_comm_work_t *work)
{
    struct sr_comm_work *w = get_item(c->state);
    int W = c->size;
    for (int p = 0; p < W; p++) {
        w->ints[p] = to_int(send_counts[p], "all_to_allv send count");
        w->ints[W + p] = to_int(send_displs[p], "all_to_allv send displacement");
        w->ints[2 * W + p] = to_int(recv_counts[p], "all_to_allv recv count");
        w->ints[3 * W + p] = to_int(recv_displs[p], "all_to_allv recv displacement");
    }
    w->kind = SR_COLL_ALL_TO_ALLV;
    w->start = start_all_to_allv;
    w->send = send;
    w->recv = recv;
    w->type = mpi_type(dtype, 0, "all_to_allv");
    submit(c->state, w, work);
}

static void start_reduce_scatter(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    const void *send = w->send == w->recv ? MPI_IN_PLACE : w->send;
    SR_MPI_CHECK(
        MPI_Ireduce_scatter_block(send, w->recv, w->count, w->type, MPI_SUM, s->comm, req));
}

static void mpi_reduce_scatter(sr_comm_t c, const void *send, void *recv, size_t recv_count,
                               enum sr_dtype dtype, enum sr_reduce_op op, sr_comm_work_t *work)
{
    check_op(op, "reduce_scatter");
    struct sr_comm_work *w = get_item(c->state);
    w->kind = SR_COLL_REDUCE_SCATTER;
    w->start = start_reduce_scatter;
    w->send = send;
    w->recv = recv;
    w->count = to_int(recv_count, "reduce_scatter");
    to_int(recv_count * (size_t)c->size, "reduce_scatter send buffer");
    w->type = mpi_type(dtype, 1, "reduce_scatter");
    submit(c->state, w, work);
}

static void start_all_gather(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    const char *mine = (const char *)w->recv + (size_t)s->rank * (size_t)w->count * w->elem;
    const void *send = w->send == (const void *)mine ? MPI_IN_PLACE : w->send;
    SR_MPI_CHECK(MPI_Iallgather(send, w->count, w->type, w->recv, w->count, w->type, s->comm, req));
}

static void mpi_all_gather(sr_comm_t c, const void *send, void *recv, size_t send_count,
                           enum sr_dtype dtype, sr_comm_work_t *work)
{
    struct sr_comm_work *w = get_item(c->state);
    w->kind = SR_COLL_ALL_GATHER;
    w->start = start_all_gather;
    w->send = send;
    w->recv = recv;
    w->count = to_int(send_count, "all_gather");
    to_int(send_count * (size_t)c->size, "all_gather recv buffer");
    w->elem = sr_dtype_size(dtype);
    w->type = mpi_type(dtype, 0, "all_gather");
    submit(c->state, w, work);
}

static void start_broadcast(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    if (s->rank == w->root && w->send != w->recv && w->count)
        memmove(w->recv, w->send, (size_t)w->count * w->elem);
    SR_MPI_CHECK(MPI_Ibcast(w->recv, w->count, w->type, w->root, s->comm, req));
}

static void mpi_broadcast(sr_comm_t c, const void *send, void *recv, size_t count,
                          enum sr_dtype dtype, int root, sr_comm_work_t *work)
{
    struct sr_comm_work *w = get_item(c->state);
    w->kind = SR_COLL_BROADCAST;
    w->start = start_broadcast;
    w->send = send;
    w->recv = recv;
    w->root = root;
    w->count = to_int(count, "broadcast");
    w->elem = sr_dtype_size(dtype);
    w->type = mpi_type(dtype, 0, "broadcast");
    submit(c->state, w, work);
}

static void start_barrier(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    SR_MPI_CHECK(MPI_Ibarrier(s->comm, req));
}

static void mpi_barrier(sr_comm_t c)
{
    struct sr_comm_work *w = get_item(c->state);
    w->kind = SR_COLL_BARRIER;
    w->start = start_barrier;
    submit(c->state, w, NULL);
}

static int mpi_wait(sr_comm_t c, sr_comm_work_t w)
{
    return wait_item(c->state, w);
}

static int mpi_test(sr_comm_t c, sr_comm_work_t w)
{
    struct mpi_state *s = c->state;
    SR_ASSERT(w->owner == s && w->in_use);
    pthread_mutex_lock(&s->mu);
    int kind = w->done ? w->kind : -1;
    if (w->done)
        release_locked(s, w);
    pthread_mutex_unlock(&s->mu);
    return kind;
}

static void mpi_busy(sr_comm_t c, double seconds[SR_COLL_COUNT])
{
    struct mpi_state *s = c->state;
    pthread_mutex_lock(&s->mu);
    memcpy(seconds, s->busy, sizeof s->busy);
    pthread_mutex_unlock(&s->mu);
}

/* ---- communicators ---------------------------------------------------------------- */

static const struct sr_comm_backend mpi_backend;

/* Give `c` its MPI communicator, state and worker thread. */
static void attach(sr_comm_t c, MPI_Comm comm)
{
    struct mpi_state *s = sr_calloc(1, sizeof *s);
    s->comm = comm;
    SR_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    SR_MPI_CHECK(MPI_Comm_rank(comm, &s->rank));
    SR_MPI_CHECK(MPI_Comm_size(comm, &s->size));
    SR_ASSERT(s->rank == c->rank && s->size == c->size);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->done, NULL);
    if (pthread_create(&s->thread, NULL, worker_main, s) != 0)
        SR_ABORT("cannot start the communication thread");
    pthread_setname_np(s->thread, "sr_comm");
    c->backend = &mpi_backend;
    c->state = s;
    atomic_fetch_add(&live_comms, 1);
}

static void start_split(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    SR_MPI_CHECK(MPI_Comm_split(s->comm, w->color, w->key, &w->out));
}

static void mpi_split(sr_comm_t c, sr_comm_t sub, int color, int key)
{
    struct sr_comm_work *w = get_item(c->state);
    w->kind = KIND_SETUP;
    w->start = start_split;
    w->color = color;
    w->key = key;
    submit(c->state, w, NULL);
    attach(sub, w->out); /* w sits in the free list now; only this thread refills it */
}

static void mpi_free(sr_comm_t c)
{
    struct mpi_state *s = c->state;
    pthread_mutex_lock(&s->mu);
    if (s->outstanding)
        SR_ABORT("sr_comm_free: %d non-blocking calls on this communicator were never waited",
                 s->outstanding);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    SR_MPI_CHECK(MPI_Comm_free(&s->comm));
    while (s->free_list) {
        struct sr_comm_work *w = s->free_list;
        s->free_list = w->next;
        sr_free(w->ints);
        sr_free(w);
    }
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    sr_free(s);
    atomic_fetch_sub(&live_comms, 1);
}

static const struct sr_comm_backend mpi_backend = {
    .name = "mpi",
    .all_reduce = mpi_all_reduce,
    .all_to_allv = mpi_all_to_allv,
    .reduce_scatter = mpi_reduce_scatter,
    .all_gather = mpi_all_gather,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .wait = mpi_wait,
    .test = mpi_test,
    .split = mpi_split,
    .busy = mpi_busy,
    .free = mpi_free,
};

/* ---- the world -------------------------------------------------------------------- */

static int start_mpi(int *argc, char ***argv)
{
    int inited = 0, finalized = 0, provided = 0;
    SR_MPI_CHECK(MPI_Finalized(&finalized));
    if (finalized)
        return sr_error_set(SR_ERR_UNSUPPORTED, "MPI was finalised; it cannot start again");
    SR_MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) {
        SR_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
        mpi_started_here = 1;
    } else {
        SR_MPI_CHECK(MPI_Query_thread(&provided));
    }
    if (provided < MPI_THREAD_MULTIPLE)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "the MPI library provides thread level %d, shardrec needs "
                            "MPI_THREAD_MULTIPLE (%d): every communicator runs its collectives "
                            "on its own thread\nHINT: use an MPI built with thread support",
                            provided, MPI_THREAD_MULTIPLE);
    return SR_OK;
}

/* The ranks-per-node override: the argument, else env SR_RANKS_PER_NODE, else 0. */
static int ranks_per_node_override(int arg, int *rpn, const char **source)
{
    *rpn = arg;
    *source = "--ranks-per-node";
    if (arg < 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "--ranks-per-node %d must be positive", arg);
    const char *env = getenv("SR_RANKS_PER_NODE");
    if (arg > 0 || !env || !*env)
        return SR_OK;
    char *end = NULL;
    long v = strtol(env, &end, 10);
    if (*end || v <= 0 || v > INT_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_RANKS_PER_NODE='%s' is not a positive integer",
                            env);
    *rpn = (int)v;
    *source = "SR_RANKS_PER_NODE";
    return SR_OK;
}

/* Nodes from shared memory: a node's leader is its lowest world rank; nodes are
 * numbered in the order of their leaders. */
static void detect_nodes(sr_comm_t c, MPI_Comm comm)
{
    MPI_Comm shm;
    int leader = 0, W = c->size;
    SR_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &shm));
    SR_MPI_CHECK(MPI_Allreduce(&c->rank, &leader, 1, MPI_INT, MPI_MIN, shm));
    SR_MPI_CHECK(MPI_Comm_free(&shm));
    int *leaders = sr_calloc((size_t)W, sizeof(int));
    int *index = sr_calloc((size_t)W, sizeof(int));
    SR_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, comm));
    for (int p = 0, n = 0; p < W; p++)
        if (leaders[p] == p)
            index[p] = n++;
    for (int p = 0; p < W; p++)
        c->node_of[p] = index[leaders[p]];
    sr_free(index);
    sr_free(leaders);
}

/* Every node must hold the same number of ranks. */
static int check_nodes(sr_comm_t c)
{
    int *ranks = sr_calloc((size_t)c->size, sizeof(int)), nodes = 0, rc = SR_OK;
    for (int p = 0; p < c->size; p++) {
        ranks[c->node_of[p]]++;
        if (c->node_of[p] + 1 > nodes)
            nodes = c->node_of[p] + 1;
    }
    for (int n = 1; n < nodes && rc == SR_OK; n++)
        if (ranks[n] != ranks[0])
            rc = sr_error_set(SR_ERR_INVALID_ARG,
                              "nodes hold different numbers of ranks (node %d has %d, node 0 "
                              "has %d)\nHINT: launch the same number of ranks on every node, "
                              "or set --ranks-per-node",
                              n, ranks[n], ranks[0]);
    sr_free(ranks);
    return rc;
}

static int find_nodes(sr_comm_t c, MPI_Comm comm, int rpn, const char *source)
{
    if (rpn == 0) {
        detect_nodes(c, comm);
        return check_nodes(c);
    }
    if (c->size % rpn != 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "world size %d is not a multiple of %s %d\nHINT: launch a multiple "
                            "of %d ranks, or choose ranks per node that divides %d",
                            c->size, source, rpn, rpn, c->size);
    for (int p = 0; p < c->size; p++)
        c->node_of[p] = p / rpn;
    return SR_OK;
}

int sr_comm_init_mpi(sr_comm_t *world, int *argc, char ***argv, int ranks_per_node)
{
    *world = NULL;
    int rc = start_mpi(argc, argv), rpn = 0, rank = 0, size = 0;
    const char *source = NULL;
    if (rc == SR_OK)
        rc = ranks_per_node_override(ranks_per_node, &rpn, &source);
    if (rc != SR_OK)
        return rc;
    MPI_Comm comm;
    SR_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    SR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    SR_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    SR_MPI_CHECK(MPI_Comm_size(comm, &size));
    sr_set_rank(rank);
    sr_comm_t c = sr_comm_alloc(size);
    c->rank = rank;
    rc = find_nodes(c, comm, rpn, source);
    if (rc != SR_OK) {
        SR_MPI_CHECK(MPI_Comm_free(&comm));
        sr_free(c->node_of);
        sr_free(c);
        return rc;
    }
    sr_comm_set_locality(c);
    attach(c, comm);
    SR_DEBUG("comm", "MPI world: %d ranks, %d per node (%s), node %d, local rank %d", size,
             c->local_size, rpn ? source : "shared memory", c->node, c->local_rank);
    *world = c;
    return SR_OK;
}

void sr_comm_finalize(void)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized || !mpi_started_here)
        return;
    int live = atomic_load(&live_comms);
    if (live)
        SR_ABORT("sr_comm_finalize: %d MPI communicators are still alive; sr_comm_free each "
                 "(derived ones and the world) first",
                 live);
    SR_MPI_CHECK(MPI_Finalize());
}

#else /* !SR_USE_MPI */

int sr_comm_init_mpi(sr_comm_t *world, int *argc, char ***argv, int ranks_per_node)
{
    *world = NULL;
    return sr_error_set(SR_ERR_UNSUPPORTED,
                        "this build has no MPI\nHINT: install libopenmpi-dev and rebuild "
                        "(the Makefile detects mpicc)");
}

void sr_comm_finalize(void)
{
}

#endif
