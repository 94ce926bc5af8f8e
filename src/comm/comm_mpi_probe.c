/*
 * The MPI backend's deadline (comm.h): the stuck-rank probe, its report, and
 * the responder thread that answers other ranks' probes.
 *
 * Each collective carries its deadline, taken at submission
 * (sr_comm_deadline); the worker compares the clock it already reads between
 * polls with it (comm_mpi_queue.c), so a normal run pays one comparison per
 * poll. When a collective outlives it, the worker probes: on `probe_comm` (a
 * dup of the world made at init) it sends every member the pair
 * (communicator id, collective number) and waits SR_COMM_PROBE_S for
 * answers. Each process runs one responder thread that polls that
 * communicator (MPI_Test, then a 10 ms sleep) and answers with its step, how
 * many collectives it has started on that communicator, and what it is
 * waiting in. A SIGSTOPped or hung process cannot answer; an alive one that
 * has not started that collective is elsewhere. The worker prints the
 * collective, the step and the missing ranks, then MPI_Abort(world, 1): the
 * launcher kills every rank, stopped ones included. Communicators are
 * numbered in creation order, which is the same on every rank (comm.h's
 * ordering rule), so the id names the same communicator everywhere.
 *
 *   survivor's worker                       every peer's responder
 *   deadline passed
 *   Isend {id, seq} to each member  ----->  Irecv(ANY_SOURCE) completes
 *   Irecv answers, <= PROBE_S       <-----  Isend {step, started, waiting in}
 *   print; MPI_Abort(world)
 *
 * The registry of live communicators (which the responder reads to answer)
 * lives here too: comm_mpi.c adds each communicator it attaches and removes
 * it when freed.
 */
#ifdef SR_USE_MPI

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/log.h"
#include "comm/comm_mpi_internal.h"

/* MPI's message for a status (SR_MPI_CHECK's). */
const char *sr_mpi_error_string(int rc)
{
    static _Thread_local char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "MPI error %d", rc);
    return buf;
}

#define RESPOND_NS 10000000L /* the responder polls for probes this often */
#define TAG_QUERY  1         /* probe_comm tags: {id, seq} to a peer, */
#define TAG_ANSWER 2         /* and its struct answer back */
#define MAX_LISTED 8         /* missing ranks named one by one in a message */
/* A probe id's flag: ask about the stream-native communicator riding on the
 * communicator with that id (its device progress), not about its own queue. */
#define DEVICE_QUERY ((int64_t)1 << 32)

/* What a probed rank says (int64 words on the wire). */
struct answer {
    int64_t step;     /* its sr_comm_step */
    int64_t started;  /* collectives started on the probed communicator; -1: unknown */
    int64_t busy_id;  /* a communicator with a collective running (the probed one
                         first), or -1 */
    int64_t busy_kind, busy_seq;
};
#define ANSWER_WORDS ((int)(sizeof(struct answer) / sizeof(int64_t)))

/* Live communicators, for the responder, and the probe machinery. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mpi_state *registry;
static int next_id;
static MPI_Comm probe_comm = MPI_COMM_NULL;
static pthread_t responder;
static atomic_int responder_stop;
static atomic_int ending; /* a thread of this process is ending the job */

/* ---- the registry and the probe communicator ------------------------------------ */

void sr_mpi_registry_add(struct mpi_state *s)
{
    pthread_mutex_lock(&registry_mu);
    s->id = next_id++;
    s->next_live = registry;
    registry = s;
    pthread_mutex_unlock(&registry_mu);
}

void sr_mpi_registry_remove(struct mpi_state *s)
{
    pthread_mutex_lock(&registry_mu);
    for (struct mpi_state **at = &registry; *at; at = &(*at)->next_live)
        if (*at == s) {
            *at = s->next_live;
            break;
        }
    pthread_mutex_unlock(&registry_mu);
}

void sr_mpi_probe_init(void)
{
    if (probe_comm != MPI_COMM_NULL)
        return;
    SR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm));
    SR_MPI_CHECK(MPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN));
}

/* ---- the deadline: probe, report, end the job --------------------------------------- */

void sr_mpi_sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* Ask every other member of s whether it has started collective `seq` of s;
 * answered[p] = 1 for those that answered within SR_COMM_PROBE_S. */
static void probe(struct mpi_state *s, int64_t qid, int64_t seq, struct answer *ans,
                  int *answered)
{
    int W = s->size, pending = 0;
    int64_t query[2] = {qid, seq};
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
    double end = sr_clock_seconds() + SR_COMM_PROBE_S;
    while (pending && sr_clock_seconds() < end) {
        for (int p = 0; p < W; p++) {
            int flag = 0;
            if (req[p] == MPI_REQUEST_NULL || MPI_Test(&req[p], &flag, MPI_STATUS_IGNORE) ||
                !flag)
                continue;
            answered[p] = 1;
            pending--;
        }
        sr_mpi_sleep_ns(1000000L);
    }
    sr_free(req); /* requests left pending die with the job */
}

static const char *comm_name(int64_t id)
{
    const char *name = "?";
    pthread_mutex_lock(&registry_mu);
    for (struct mpi_state *s = registry; s; s = s->next_live)
        if (s->id == (id & ~DEVICE_QUERY))
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

/* The collective that timed out: what a report names. */
struct late {
    const char *name; /* its communicator's */
    int kind;
    int64_t seq;
    double limit, bytes, waited;
};

static void report(struct mpi_state *s, const struct late *w, const struct answer *ans,
                   const int *answered)
{
    static char buf[4096];
    size_t n = sizeof buf, at = 0;
    int64_t step = sr_comm_step();
    put(buf, n, &at, "[rank %d] comm timeout: %s #%lld on communicator '%s' (%d ranks) ",
        sr_get_rank(), sr_coll_name((enum sr_coll)w->kind), (long long)w->seq, w->name,
        s->size);
    if (step > 0)
        put(buf, n, &at, "at step %lld", (long long)step);
    else
        put(buf, n, &at, "before training step 1");
    put(buf, n, &at, " has not completed after %.1f s (its deadline: %.1f s for %.0f bytes). ",
        w->waited, w->limit, w->bytes);
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

/* Only the first thread of this process to get here reports; any other
 * waits for it to end the job. */
static void probe_and_report(struct mpi_state *s, int64_t qid, const struct late *w)
{
    if (atomic_exchange(&ending, 1))
        for (;;)
            pause();
    struct answer *ans = sr_calloc((size_t)s->size, sizeof *ans);
    int *answered = sr_calloc((size_t)s->size, sizeof *answered);
    probe(s, qid, w->seq, ans, answered);
    report(s, w, ans, answered);
}

_Noreturn void sr_mpi_timed_out(struct mpi_state *s, struct sr_comm_work *w, double waited)
{
    struct late late = {s->c->name, w->kind, w->seq, w->limit, w->bytes, waited};
    probe_and_report(s, s->id, &late);
    sr_mpi_abort_job();
}

_Noreturn void sr_mpi_abort_job(void)
{
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* not reached: MPI_Abort ends the process */
}

void sr_mpi_device_progress(sr_comm_t host, int64_t started, int kind)
{
    struct mpi_state *s = host->state;
    pthread_mutex_lock(&s->mu);
    s->dev_started = started;
    s->dev_kind = kind;
    pthread_mutex_unlock(&s->mu);
}

void sr_mpi_device_report(sr_comm_t host, const char *name, int kind, int64_t seq, double limit,
                          double bytes, double waited)
{
    struct mpi_state *s = host->state;
    struct late late = {name, kind, seq, limit, bytes, waited};
    probe_and_report(s, s->id | DEVICE_QUERY, &late);
}

static struct answer *answers;     /* (world) one answer buffer per asking rank */
static MPI_Request *answers_sent;  /* (world) its send, or MPI_REQUEST_NULL */
static int world_size;

/* What this process is doing, for a probe about communicator `id`. */
static void fill_answer(int64_t id, struct answer *a)
{
    *a = (struct answer){.step = sr_comm_step(), .started = -1, .busy_id = -1};
    const int dev = (id & DEVICE_QUERY) != 0;
    pthread_mutex_lock(&registry_mu);
    for (struct mpi_state *s = registry; s; s = s->next_live) {
        pthread_mutex_lock(&s->mu);
        const int mine = s->id == (id & ~DEVICE_QUERY);
        if (mine)
            a->started = dev ? s->dev_started : s->started;
        if (s->cur_kind >= 0 && (a->busy_id < 0 || mine)) {
            a->busy_id = s->id;
            a->busy_kind = s->cur_kind;
            a->busy_seq = s->started;
        }
        if (s->dev_kind >= 0 && (a->busy_id < 0 || (mine && dev))) {
            a->busy_id = s->id | DEVICE_QUERY;
            a->busy_kind = s->dev_kind;
            a->busy_seq = s->dev_started;
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
            sr_mpi_sleep_ns(RESPOND_NS);
    }
    if (req != MPI_REQUEST_NULL) {
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return NULL;
}

void sr_mpi_start_responder(void)
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

void sr_mpi_stop_responder(void)
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

int sr_mpi_responder_running(void)
{
    return answers != NULL;
}

void sr_mpi_probe_drop(void)
{
    if (!answers && probe_comm != MPI_COMM_NULL)
        SR_MPI_CHECK(MPI_Comm_free(&probe_comm));
}

#endif /* SR_USE_MPI */
