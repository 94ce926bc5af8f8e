/*
 * The MPI backend: the CPU transport and the bootstrap of a multi-rank job.
 * This file holds the world (MPI start-up with MPI_THREAD_MULTIPLE, nodes
 * detected or emulated, the emulated link from the environment), the
 * communicators (each owns an MPI communicator, a queue and a worker
 * thread; dup and splits run through the parent's queue, since
 * MPI_Comm_split is collective on it), the backend table and finalize. The
 * other parts (comm_mpi_internal.h lists them): the queue and worker with the stream
 * order (comm_mpi_queue.c), the collectives (comm_mpi_coll.c) and the
 * deadline's probe (comm_mpi_probe.c).
 *
 * Without SR_USE_MPI, sr_comm_init_mpi returns SR_ERR_UNSUPPORTED.
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

int sr_comm_launch_local_rank(int world_rank)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "SLURM_LOCALID", "LOCAL_RANK", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return world_rank;
}

#ifdef SR_USE_MPI

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>

#include "shardrec/alloc.h"
#include "shardrec/log.h"
#include "comm/comm_mpi_internal.h"

static int mpi_started_here;
static atomic_int live_comms;

static void mpi_busy(sr_comm_t c, double seconds[SR_COLL_COUNT])
{
    struct mpi_state *s = c->state;
    pthread_mutex_lock(&s->mu);
    memcpy(seconds, s->busy, sizeof s->busy);
    pthread_mutex_unlock(&s->mu);
}

static void mpi_register_buffer(sr_comm_t c, const void *buf)
{
    sr_stage_register(c, buf);
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
    s->dev_kind = -1;
    SR_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    SR_MPI_CHECK(MPI_Comm_rank(comm, &s->rank));
    SR_MPI_CHECK(MPI_Comm_size(comm, &s->size));
    SR_ASSERT(s->rank == c->rank && s->size == c->size);
    s->world_of = sr_calloc((size_t)s->size, sizeof(int));
    world_ranks(comm, s->size, s->world_of);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->done, NULL);
    if (pthread_create(&s->thread, NULL, sr_mpi_worker_main, s) != 0)
        SR_ABORT("cannot start the communication thread");
    pthread_setname_np(s->thread, "sr_comm");
    c->backend = &mpi_backend;
    c->state = s;
    sr_mpi_items_reserve(s, SR_MPI_ITEMS);
    sr_mpi_registry_add(s);
    atomic_fetch_add(&live_comms, 1);
}

static void start_split(struct mpi_state *s, struct sr_comm_work *w, MPI_Request *req)
{
    SR_MPI_CHECK(MPI_Comm_split(s->comm, w->color, w->key, &w->out));
}

static void mpi_split(sr_comm_t c, sr_comm_t sub, int color, int key)
{
    struct sr_comm_work *w = sr_mpi_get_item(c->state);
    w->kind = KIND_SETUP;
    w->start = start_split;
    w->color = color;
    w->key = key;
    sr_mpi_submit(c->state, w, NULL);
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
    sr_mpi_registry_remove(s);
    SR_MPI_CHECK(MPI_Comm_free(&s->comm));
    sr_free(s->world_of);
    sr_mpi_items_free(s);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    sr_free(s);
    atomic_fetch_sub(&live_comms, 1);
}

static const struct sr_comm_backend mpi_backend = {
    .name = "mpi",
    .all_reduce = sr_mpi_all_reduce,
    .all_to_allv = sr_mpi_all_to_allv,
    .reduce_scatter = sr_mpi_reduce_scatter,
    .all_gather = sr_mpi_all_gather,
    .broadcast = sr_mpi_broadcast,
    .barrier = sr_mpi_barrier,
    .wait = sr_mpi_wait,
    .test = sr_mpi_test,
    .stream_wait = sr_mpi_stream_wait,
    .register_buffer = mpi_register_buffer,
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
    c->nodes_emulated = 1;
    return SR_OK;
}

/* A world that failed to start: its MPI communicators and memory; returns rc. */
static int drop_world(sr_comm_t c, MPI_Comm comm, int rc)
{
    SR_MPI_CHECK(MPI_Comm_free(&comm));
    sr_mpi_probe_drop();
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
    sr_mpi_probe_init();
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
    if (!sr_mpi_responder_running())
        sr_mpi_start_responder();
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
    sr_mpi_stop_responder();
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
