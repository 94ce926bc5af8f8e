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
 * Deadline (comm.h): each collective carries its deadline, taken at
 * submission (sr_comm_deadline); the worker compares the clock it already
 * reads between polls with it, so a normal run pays one comparison per poll.
 * When a collective outlives it, the worker probes: on `probe_comm` (a dup of
 * the world made at init) it sends every member the pair (communicator id,
 * collective number) and waits SR_COMM_PROBE_S for answers. Each process
 * runs one responder thread that polls that communicator (MPI_Test, then a
 * 10 ms sleep) and answers with its step, how many collectives it has
 * started on that communicator, and what it is waiting in. A SIGSTOPped or
 * hung process cannot answer; an alive one that has not started that
 * collective is elsewhere. The worker prints the collective, the step and
 * the missing ranks, then MPI_Abort(world, 1): the launcher kills every
 * rank, stopped ones included. Communicators are numbered in creation order,
 * which is the same on every rank (comm.h's ordering rule), so the id names
 * the same communicator everywhere.
 *
 *   survivor's worker                       every peer's responder
 *   deadline passed
 *   Isend {id, seq} to each member  ----->  Irecv(ANY_SOURCE) completes
 *   Irecv answers, <= PROBE_S       <-----  Isend {step, started, waiting in}
 *   print; MPI_Abort(world)
 *
 * Emulated link (comm_link.c; tests and benchmarks): when the worker starts a
 * collective whose call recorded shaped messages, it queues them on the
 * link's FIFOs (sr_link_reserve) and, once MPI has completed it, sleeps until
 * the last emulated arrival before marking it done, so busy time includes it.
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
#include <math.h>
#include <stdarg.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/log.h"
#include "shardrec/trace.h"
#include "comm/comm_internal.h"

#define SPIN_NS     50000L        /* poll without sleeping this long after a collective starts */
#define POLL_MAX_NS 100000L       /* then sleep at most this long between two polls */
#define KIND_SETUP  SR_COLL_COUNT /* a work item that is not a counted collective */
#define RESPOND_NS  10000000L     /* the responder polls for probes this often */
#define TAG_QUERY   1             /* probe_comm tags: {id, seq} to a peer, */
#define TAG_ANSWER  2             /* and its struct answer back */
#define MAX_LISTED  8             /* missing ranks named one by one in a message */

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
    double limit;  /* deadline, seconds after the worker starts it; 0: none */
    double bytes;  /* payload (send + receive buffers), for messages */
    int64_t seq;   /* its number on the communicator, from 1 (worker) */
    int traced;    /* submitted while recording: the worker records its span */
    int shaped;    /* an emulated link delays its completion (comm_link.h) */
    struct sr_link_msgs link; /* its shaped messages (the dispatcher's c->link_msgs) */
    int64_t trace_step;
    struct sr_trace_args trace; /* label, bytes, peers (the dispatcher's c->call) */
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
};

/* What a probed rank says (int64 words on the wire). */
struct answer {
    int64_t step;     /* its sr_comm_step */
    int64_t started;  /* collectives started on the probed communicator; -1: unknown */
    int64_t busy_id;  /* a communicator with a collective running (the probed one
                         first), or -1 */
    int64_t busy_kind, busy_seq;
};
#define ANSWER_WORDS ((int)(sizeof(struct answer) / sizeof(int64_t)))

static int mpi_started_here;
static atomic_int live_comms;

/* Live communicators, for the responder, and the probe machinery. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mpi_state *registry;
static int next_id;
static MPI_Comm probe_comm = MPI_COMM_NULL;
static pthread_t responder;
static atomic_int responder_stop;
static atomic_int ending; /* a thread of this process is ending the job */

static double now_s(void)
{
    return sr_clock_seconds();
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

/* w's deadline for a payload of `bytes` at this rank (comm.h). */
static void set_deadline(sr_comm_t c, struct sr_comm_work *w, double bytes)
{
    w->bytes = bytes;
    w->limit = sr_comm_deadline(c, bytes);
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
        if (s->c->link) /* sized once: the loop copies into it without allocating */
            sr_link_msgs_init(&w->link, sr_link_nodes(s->c->link));
    }
    s->outstanding++;
    pthread_mutex_unlock(&s->mu);
    w->next = NULL;
    w->in_use = 1;
    w->done = 0;
    w->limit = 0;
    w->bytes = 0;
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
    w->traced = s->c->call_traced && w->kind < SR_COLL_COUNT;
    if (w->traced) {
        w->trace = s->c->call;
        w->trace_step = sr_trace_step();
    }
    w->shaped = s->c->link_call && w->kind < SR_COLL_COUNT && sr_link_msgs_any(&s->c->link_msgs);
    if (w->shaped)
        sr_link_msgs_copy(&w->link, &s->c->link_msgs);
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

/* ---- the deadline: probe, report, end the job --------------------------------------- */

static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* Ask every other member of s whether it has started collective `seq` of s;
 * answered[p] = 1 for those that answered within SR_COMM_PROBE_S. */
static void probe(struct mpi_state *s, int64_t seq, struct answer *ans, int *answered)
{
    int W = s->size, pending = 0;
    int64_t query[2] = {s->id, seq};
    MPI_Request *req = sr_calloc(2 * (size_t)W, sizeof *req);
    for (int p = 0; p < W; p++) {
        req[p] = req[W + p] = MPI_REQUEST_NULL;
        if (p == s->rank || probe_comm == MPI_COMM_NULL)
            continue;
        if (MPI_Irecv(&ans[p], ANSWER_WORDS, MPI_INT64_T, s->world_of[p], TAG_ANSWER, probe_comm,
                      &req[p]) == MPI_SUCCESS)
            pending++;
        MPI_Isend(query, 2, MPI_INT64_T, s->world_of[p], TAG_QUERY, probe_comm, &req[W + p]);
    }
    double end = now_s() + SR_COMM_PROBE_S;
    while (pending && now_s() < end) {
        for (int p = 0; p < W; p++) {
            int flag = 0;
            if (req[p] == MPI_REQUEST_NULL || MPI_Test(&req[p], &flag, MPI_STATUS_IGNORE) ||
                !flag)
                continue;
            answered[p] = 1;
            pending--;
        }
        sleep_ns(1000000L);
    }
    sr_free(req); /* requests left pending die with the job */
}

static const char *comm_name(int id)
{
    const char *name = "?";
    pthread_mutex_lock(&registry_mu);
    for (struct mpi_state *s = registry; s; s = s->next_live)
        if (s->id == id)
            name = s->c->name;
    pthread_mutex_unlock(&registry_mu);
    return name;
}

/* Append to buf (size n, *at < n: where its NUL is) like snprintf, never past the end. */
static void put(char *buf, size_t n, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t n, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = *at + 1 < n ? vsnprintf(buf + *at, n - *at, fmt, ap) : 0;
    va_end(ap);
    if (k > 0)
        *at = *at + (size_t)k < n ? *at + (size_t)k : n - 1; /* at the NUL */
}

/* Where rank p is, if it has not reached collective `seq`: appended to buf.
 * Pass 0 names the ranks that did not answer, pass 1 the alive ones. */
static int describe_missing(struct mpi_state *s, int p, int64_t seq, const struct answer *a,
                            int answered, int pass, char *buf, size_t n, size_t *at)
{
    if (pass == 0 && !answered)
        put(buf, n, at, "rank %d (no answer to a probe within %.0f s: stopped, hung or dead)",
            s->world_of[p], SR_COMM_PROBE_S);
    if (pass == 0 || !answered || a->started >= seq)
        return pass == 0 && !answered;
    put(buf, n, at, "rank %d (alive at step %lld, ", s->world_of[p], (long long)a->step);
    if (a->busy_id < 0)
        put(buf, n, at, "in no collective: computing, or blocked outside the comm layer)");
    else
        put(buf, n, at, "waiting in %s #%lld on '%s')",
            a->busy_kind < SR_COLL_COUNT ? sr_coll_name((enum sr_coll)a->busy_kind) : "set-up",
            (long long)a->busy_seq, comm_name((int)a->busy_id));
    return 1;
}

static void report(struct mpi_state *s, struct sr_comm_work *w, double waited,
                   const struct answer *ans, const int *answered)
{
    static char buf[4096];
    size_t n = sizeof buf, at = 0;
    int64_t step = sr_comm_step();
    put(buf, n, &at, "[rank %d] comm timeout: %s #%lld on communicator '%s' (%d ranks) ",
        sr_get_rank(), sr_coll_name((enum sr_coll)w->kind), (long long)w->seq, s->c->name,
        s->size);
    if (step > 0)
        put(buf, n, &at, "at step %lld", (long long)step);
    else
        put(buf, n, &at, "before training step 1");
    put(buf, n, &at, " has not completed after %.1f s (its deadline: %.1f s for %.0f bytes). ",
        waited, w->limit, w->bytes);
    int missing = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int p = 0; p < s->size; p++) {
            if (p == s->rank)
                continue;
            size_t mark = at;
            if (missing < MAX_LISTED)
                put(buf, n, &at, "%s", missing ? "; " : "Did not arrive: ");
            int m = describe_missing(s, p, w->seq, &ans[p], answered[p], pass, buf, n, &at);
            if (!m || missing >= MAX_LISTED)
                at = mark, buf[at] = '\0';
            missing += m;
        }
    if (missing > MAX_LISTED)
        put(buf, n, &at, "; and %d more", missing - MAX_LISTED);
    if (!missing)
        put(buf, n, &at, "Every rank has reached it: the transport is not progressing");
    put(buf, n, &at, ". Ending the job on every rank.\nHINT: a rank stopped, swapped out or "
                     "stuck outside the collectives; if ranks legitimately wait this long, raise "
                     "--comm-timeout (0: wait forever)");
    fprintf(stderr, "%s\n", buf);
    fflush(stderr);
}

/* Collective w of s outlived its deadline: find who is missing, say so, end
 * every rank. Only the first thread of this process to get here does it. */
static _Noreturn void timed_out(struct mpi_state *s, struct sr_comm_work *w, double waited)
{
    if (atomic_exchange(&ending, 1))
        for (;;)
            pause();
    struct answer *ans = sr_calloc((size_t)s->size, sizeof *ans);
    int *answered = sr_calloc((size_t)s->size, sizeof *answered);
    probe(s, w->seq, ans, answered);
    report(s, w, waited, ans, answered);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* not reached: MPI_Abort ends the process */
}

/* ---- the worker ----------------------------------------------------------------- */

/* Test back to back for SPIN_NS (small collectives finish here), then sleep
 * between tests, 1 us doubling up to POLL_MAX_NS, until w's deadline. */
static void complete(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    double t0 = now_s(), spin_end = t0 + 1e-9 * SPIN_NS;
    double end = w->limit > 0 ? t0 + w->limit : INFINITY;
    long ns = 1000;
    for (;;) {
        int flag = 0;
        SR_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        if (flag)
            return;
        double t = now_s();
        if (t < spin_end)
            continue;
        if (t > end)
            timed_out(s, w, t - t0);
        sleep_ns(ns);
        if (ns < POLL_MAX_NS)
            ns *= 2;
    }
}

static void run(struct mpi_state *s, struct sr_comm_work *w)
{
    MPI_Request req = MPI_REQUEST_NULL;
    w->start(s, w, &req);
    if (req != MPI_REQUEST_NULL)
        complete(s, w, &req);
}

/* The busy span of w on this worker's track ("comm NAME"). */
static void trace_busy(struct mpi_state *s, struct sr_comm_work *w, int64_t t0)
{
    if (!s->trace_named) {
        char name[32];
        snprintf(name, sizeof name, "comm %s", s->c->name);
        sr_trace_thread_name(name);
        s->trace_named = 1;
    }
    sr_trace_record(SR_SPAN_COMM, t0, sr_trace_now(), w->trace_step, &w->trace);
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
        w->seq = ++s->started;
        s->cur_kind = w->kind;
        pthread_mutex_unlock(&s->mu);
        double t0 = now_s();
        int64_t trace_t0 = w->traced ? sr_trace_now() : 0;
        double arrival = w->shaped ? sr_link_reserve(s->c->link, &w->link, t0) : 0;
        run(s, w);
        if (arrival > 0) /* done no earlier than the emulated link delivers it */
            sr_link_sleep_until(arrival);
        double dt = now_s() - t0;
        if (w->traced)
            trace_busy(s, w, trace_t0);
        pthread_mutex_lock(&s->mu);
        s->cur_kind = -1;
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
    set_deadline(c, w, 2.0 * (double)count * (double)sr_dtype_size(dtype));
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
    double elems = 0;
    for (int p = 0; p < W; p++) {
        elems += (double)send_counts[p] + (double)recv_counts[p];
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
    set_deadline(c, w, elems * (double)sr_dtype_size(dtype));
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
    set_deadline(c, w, (double)(c->size + 1) * (double)recv_count * (double)sr_dtype_size(dtype));
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
    set_deadline(c, w, (double)(c->size + 1) * (double)send_count * (double)w->elem);
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
    set_deadline(c, w, 2.0 * (double)count * (double)w->elem);
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
    set_deadline(c, w, 0);
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

/* world_of[p] = world rank of member p of comm. */
static void world_ranks(MPI_Comm comm, int size, int *world_of)
{
    MPI_Group g, world;
    int *mine = sr_calloc((size_t)size, sizeof(int));
    for (int p = 0; p < size; p++)
        mine[p] = p;
    SR_MPI_CHECK(MPI_Comm_group(comm, &g));
    SR_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    SR_MPI_CHECK(MPI_Group_translate_ranks(g, size, mine, world, world_of));
    SR_MPI_CHECK(MPI_Group_free(&world));
    SR_MPI_CHECK(MPI_Group_free(&g));
    sr_free(mine);
}

/* Give `c` its MPI communicator, state and worker thread. */
static void attach(sr_comm_t c, MPI_Comm comm)
{
    struct mpi_state *s = sr_calloc(1, sizeof *s);
    s->comm = comm;
    s->c = c;
    s->cur_kind = -1;
    SR_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    SR_MPI_CHECK(MPI_Comm_rank(comm, &s->rank));
    SR_MPI_CHECK(MPI_Comm_size(comm, &s->size));
    SR_ASSERT(s->rank == c->rank && s->size == c->size);
    s->world_of = sr_calloc((size_t)s->size, sizeof(int));
    world_ranks(comm, s->size, s->world_of);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->done, NULL);
    if (pthread_create(&s->thread, NULL, worker_main, s) != 0)
        SR_ABORT("cannot start the communication thread");
    pthread_setname_np(s->thread, "sr_comm");
    c->backend = &mpi_backend;
    c->state = s;
    pthread_mutex_lock(&registry_mu);
    s->id = next_id++;
    s->next_live = registry;
    registry = s;
    pthread_mutex_unlock(&registry_mu);
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
    pthread_mutex_lock(&registry_mu);
    for (struct mpi_state **at = &registry; *at; at = &(*at)->next_live)
        if (*at == s) {
            *at = s->next_live;
            break;
        }
    pthread_mutex_unlock(&registry_mu);
    SR_MPI_CHECK(MPI_Comm_free(&s->comm));
    sr_free(s->world_of);
    while (s->free_list) {
        struct sr_comm_work *w = s->free_list;
        s->free_list = w->next;
        sr_free(w->ints);
        sr_link_msgs_free(&w->link);
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

/* ---- the probe responder ------------------------------------------------------------ */

static struct answer *answers;     /* (world) one answer buffer per asking rank */
static MPI_Request *answers_sent;  /* (world) its send, or MPI_REQUEST_NULL */
static int world_size;

/* What this process is doing, for a probe about communicator `id`. */
static void fill_answer(int64_t id, struct answer *a)
{
    *a = (struct answer){.step = sr_comm_step(), .started = -1, .busy_id = -1};
    pthread_mutex_lock(&registry_mu);
    for (struct mpi_state *s = registry; s; s = s->next_live) {
        pthread_mutex_lock(&s->mu);
        if (s->id == id)
            a->started = s->started;
        if (s->cur_kind >= 0 && (a->busy_id < 0 || s->id == id)) {
            a->busy_id = s->id;
            a->busy_kind = s->cur_kind;
            a->busy_seq = s->started;
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&registry_mu);
}

/* Answer rank p (one answer in flight per asker; a second query meanwhile is
 * dropped: p has given up on the first by then). */
static void answer(int p, int64_t id)
{
    int flag = 0;
    if (answers_sent[p] != MPI_REQUEST_NULL)
        MPI_Test(&answers_sent[p], &flag, MPI_STATUS_IGNORE);
    if (answers_sent[p] != MPI_REQUEST_NULL)
        return;
    fill_answer(id, &answers[p]);
    MPI_Isend(&answers[p], ANSWER_WORDS, MPI_INT64_T, p, TAG_ANSWER, probe_comm,
              &answers_sent[p]);
}

/* Poll probe_comm for queries every RESPOND_NS until told to stop. Errors end
 * the answering, never the process: the asker then reports no answer. */
static void *responder_main(void *arg)
{
    int64_t query[2];
    MPI_Request req = MPI_REQUEST_NULL;
    while (!atomic_load(&responder_stop)) {
        int flag = 0;
        MPI_Status st;
        if (req == MPI_REQUEST_NULL && MPI_Irecv(query, 2, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY,
                                                 probe_comm, &req) != MPI_SUCCESS)
            break;
        if (MPI_Test(&req, &flag, &st) != MPI_SUCCESS)
            break;
        if (flag)
            answer(st.MPI_SOURCE, query[0]);
        else
            sleep_ns(RESPOND_NS);
    }
    if (req != MPI_REQUEST_NULL) {
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return NULL;
}

static void start_responder(void)
{
    SR_MPI_CHECK(MPI_Comm_size(probe_comm, &world_size));
    answers = sr_calloc((size_t)world_size, sizeof *answers);
    answers_sent = sr_calloc((size_t)world_size, sizeof *answers_sent);
    for (int p = 0; p < world_size; p++)
        answers_sent[p] = MPI_REQUEST_NULL;
    atomic_store(&responder_stop, 0);
    if (pthread_create(&responder, NULL, responder_main, NULL) != 0)
        SR_ABORT("cannot start the probe responder thread");
    pthread_setname_np(responder, "sr_probe");
}

static void stop_responder(void)
{
    if (!answers)
        return;
    atomic_store(&responder_stop, 1);
    pthread_join(responder, NULL);
    int pending = 0;
    for (int p = 0; p < world_size; p++) {
        int flag = 0;
        if (answers_sent[p] != MPI_REQUEST_NULL)
            MPI_Test(&answers_sent[p], &flag, MPI_STATUS_IGNORE);
        if (answers_sent[p] != MPI_REQUEST_NULL) {
            MPI_Request_free(&answers_sent[p]); /* completes on its own */
            pending = 1;
        }
    }
    if (!pending) /* else the buffers stay: a send may still read them */
        sr_free(answers);
    sr_free(answers_sent);
    answers = NULL;
    answers_sent = NULL;
    SR_MPI_CHECK(MPI_Comm_free(&probe_comm));
}

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

/* A world that failed to start: its MPI communicators and memory; returns rc. */
static int drop_world(sr_comm_t c, MPI_Comm comm, int rc)
{
    SR_MPI_CHECK(MPI_Comm_free(&comm));
    if (!answers)
        SR_MPI_CHECK(MPI_Comm_free(&probe_comm));
    sr_free(c->node_of);
    sr_free(c);
    return rc;
}

/* Env SR_EMULATE_LINK (tests only): the world's emulated inter-node link. */
static int link_from_env(sr_comm_t c)
{
    const char *env = getenv("SR_EMULATE_LINK");
    struct sr_comm_link link;
    if (!env || !*env)
        return SR_OK;
    int rc = sr_comm_link_parse("SR_EMULATE_LINK", env, &link);
    if (rc == SR_OK)
        sr_comm_set_link(c, &link);
    return rc;
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
    if (probe_comm == MPI_COMM_NULL) {
        SR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm));
        SR_MPI_CHECK(MPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN));
    }
    SR_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    SR_MPI_CHECK(MPI_Comm_size(comm, &size));
    sr_set_rank(rank);
    sr_comm_t c = sr_comm_alloc(size);
    c->rank = rank;
    rc = find_nodes(c, comm, rpn, source);
    if (rc != SR_OK)
        return drop_world(c, comm, rc);
    sr_comm_set_locality(c);
    rc = link_from_env(c);
    if (rc != SR_OK)
        return drop_world(c, comm, rc);
    attach(c, comm);
    if (!answers)
        start_responder();
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
    if (!inited || finalized)
        return;
    stop_responder();
    if (!mpi_started_here)
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
