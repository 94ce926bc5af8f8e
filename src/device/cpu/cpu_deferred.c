/*
 * The deferred CPU device: a debug mode of the CPU backend that holds callers
 * to the stream-ordered contract of device.h as strictly as a GPU would, and
 * more visibly. Chosen with SR_CPU_DEFERRED=1 (device.c); SR_CPU_DEFERRED=opaque
 * chooses the same device with memory the host cannot touch (cpu_opaque.c).
 *
 * Every op is queued on its stream instead of run. When it is queued, its
 * outputs are filled with 0xFF bytes (NaN as fp32/fp64, -1 as integers); it
 * runs (the CPU backend's own op, so results are bit-identical) only when its
 * stream is synchronised, an event recorded after it is synchronised, or a
 * stream that waits for such an event is itself run. So a host read of a
 * result without the right wait sees NaN, and a stream that uses another
 * stream's result without waiting for its event sees NaN too.
 *
 * Poisoning must never corrupt a correct program, so it is conservative:
 *   - an output is poisoned only when no queued op still reads that memory
 *     (a buffer reused after a queued read keeps its bytes until that read
 *     has run);
 *   - an in-place (read-write) operand is poisoned only when no queued op
 *     touches that memory at all; its bytes are saved first and put back just
 *     before the op runs;
 *   - an output that overlaps the same op's input counts as in-place.
 * Host arguments (structs, host arrays of offsets and pointers) are copied
 * when the op is queued, as a kernel launch copies its parameters.
 *
 * One recursive lock guards all queues; ops run on the thread that waits.
 * A host function runs without it (every level this thread holds is let go
 * and taken back after), as on a GPU, where a host function that blocks
 * holds up its stream but not the device: a communication worker blocked in
 * one (waiting for a collective) must not stop another thread, say the
 * collective's own worker, from running the ops its start waits for. While
 * an item of a stream is in progress (a host function, or a wait whose
 * flush reached one), that stream is marked running by its thread; any
 * other thread that needs the stream's later items waits, lock let go,
 * until the item is done, so a stream's items still run one at a time and
 * in order. A wait is needed only for items not yet done, so a thread never
 * waits for the item in progress that it is itself inside.
 * The device allocates with libc (not the counting allocator), so its
 * bookkeeping does not show up as allocations in the training loop.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/cpu/cpu_deferred.h"

#define POISON 0xFF

/* ---- queues ------------------------------------------------------------- */

struct sr_stream {
    struct item *head, *tail;
    int64_t issued, done; /* items queued and run, ever */
    const void *runner;   /* the thread (its `self` token) running an item of it, or NULL */
    struct sr_stream *next_stream;
};

struct sr_event {
    struct sr_stream *stream; /* where it was last recorded; NULL: never */
    int64_t seq;              /* complete when stream->done >= seq */
    int64_t generation;       /* records so far */
    int64_t time_ns;          /* clock when the last record's marker ran */
};

static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static struct sr_stream default_stream;
static struct sr_stream *streams = &default_stream; /* every live stream */
static struct sr_stream *retired; /* destroyed streams: events may still name them */

static void lock_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&lock, &a);
    pthread_mutexattr_destroy(&a);
}

static _Thread_local int depth; /* levels of `lock` this thread holds */
static _Thread_local char self;  /* its address names this thread (sr_stream.runner) */

/* A thread waiting for a running stream sleeps on idle_cv until idle_gen
 * moves: each item done while someone waits moves it. */
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static uint64_t idle_gen;
static atomic_int idle_waiters;

static void enter(void)
{
    pthread_once(&lock_once, lock_init);
    pthread_mutex_lock(&lock);
    depth++;
}

static void leave(void)
{
    depth--;
    pthread_mutex_unlock(&lock);
}

/* Let go of every level of the lock this thread holds; returns how many. */
static int release_all(void)
{
    int d = depth;
    depth = 0;
    for (int i = 0; i < d; i++)
        pthread_mutex_unlock(&lock);
    return d;
}

static void reacquire(int d)
{
    for (int i = 0; i < d; i++)
        pthread_mutex_lock(&lock);
    depth = d;
}

/* Under the lock: sleep, lock let go, until another thread finishes an item. */
static void wait_idle(void)
{
    pthread_mutex_lock(&idle_mu);
    uint64_t gen = idle_gen;
    atomic_fetch_add(&idle_waiters, 1);
    int d = release_all();
    while (gen == idle_gen)
        pthread_cond_wait(&idle_cv, &idle_mu);
    atomic_fetch_sub(&idle_waiters, 1);
    pthread_mutex_unlock(&idle_mu);
    reacquire(d);
}

/* Under the lock, after an item is done: wake the threads wait_idle holds. */
static void notify_idle(void)
{
    if (!atomic_load(&idle_waiters))
        return;
    pthread_mutex_lock(&idle_mu);
    idle_gen++;
    pthread_cond_broadcast(&idle_cv);
    pthread_mutex_unlock(&idle_mu);
}

void *sr_deferred_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        SR_ABORT("deferred device: out of host memory (%zu bytes)", bytes);
    return p;
}

static struct sr_stream *stream_of(sr_stream_t s)
{
    return s ? s : &default_stream;
}

struct item *sr_deferred_item_new(size_t args_bytes, void (*run)(struct item *))
{
    struct item *it = sr_deferred_xmalloc(sizeof *it + args_bytes);
    memset(it, 0, sizeof *it);
    it->run = run;
    return it;
}

struct kept {
    struct kept *next;
    alignas(max_align_t) unsigned char data[];
};

void *sr_deferred_keep(struct item *it, const void *p, int64_t count, size_t elem)
{
    if (!p)
        return NULL;
    if (count < 0)
        SR_ABORT("deferred device: a host array of %lld elements", (long long)count);
    const size_t bytes = (size_t)count * elem;
    struct kept *k = sr_deferred_xmalloc(sizeof *k + bytes);
    memcpy(k->data, p, bytes);
    k->next = it->kept;
    it->kept = k;
    return k->data;
}

void sr_deferred_keep_field(struct item *it, void *field, int64_t count, size_t elem)
{
    void *p;
    memcpy(&p, field, sizeof p);
    p = sr_deferred_keep(it, p, count, elem);
    memcpy(field, &p, sizeof p);
}

void sr_deferred_add_region(struct item *it, const void *p, size_t bytes, enum region_kind kind)
{
    if (!p || !bytes)
        return;
    if (it->num_regions == it->cap_regions) {
        it->cap_regions = it->cap_regions ? 2 * it->cap_regions : 8;
        struct region *r = realloc(it->regions, (size_t)it->cap_regions * sizeof *r);
        if (!r)
            SR_ABORT("deferred device: out of host memory");
        it->regions = r;
    }
    it->regions[it->num_regions++] = (struct region){p, bytes, kind, NULL};
}

static int overlap(const struct region *a, const void *p, size_t bytes)
{
    const char *a0 = a->p, *b0 = p;
    return a0 < b0 + bytes && b0 < a0 + a->bytes;
}

/* Does a queued op touch [p, p + bytes)? reads_only: count only its reads. */
static int queued_touches(const void *p, size_t bytes, int reads_only)
{
    for (struct sr_stream *s = streams; s; s = s->next_stream)
        for (struct item *it = s->head; it; it = it->next)
            for (int i = 0; i < it->num_regions; i++) {
                const struct region *r = &it->regions[i];
                if (reads_only && r->kind == REGION_OUT)
                    continue;
                if (overlap(r, p, bytes))
                    return 1;
            }
    return 0;
}

/* Poison the new item's outputs where that is safe (see the header). */
static void poison_outputs(struct item *it)
{
    int opened = 0, was_open = 0; /* opaque device memory opened for this (cpu_opaque.c) */
    for (int i = 0; i < it->num_regions; i++) {
        struct region *r = &it->regions[i];
        if (r->kind == REGION_IN)
            continue;
        for (int j = 0; j < it->num_regions && r->kind == REGION_OUT; j++)
            if (it->regions[j].kind == REGION_IN && overlap(&it->regions[j], r->p, r->bytes))
                r->kind = REGION_INOUT;
        if (queued_touches(r->p, r->bytes, r->kind == REGION_OUT))
            continue;
        if (!opened && sr_opaque_find(r->p, NULL, NULL))
            opened = 1, was_open = sr_opaque_set_access(1);
        if (r->kind == REGION_INOUT) {
            r->saved = sr_deferred_xmalloc(r->bytes);
            memcpy(r->saved, r->p, r->bytes);
        }
        memset((void *)r->p, POISON, r->bytes);
    }
    if (opened)
        sr_opaque_set_access(was_open);
}

void sr_deferred_enqueue(sr_stream_t s, struct item *it)
{
    enter();
    struct sr_stream *st = stream_of(s);
    poison_outputs(it);
    if (st->tail)
        st->tail->next = it;
    else
        st->head = it;
    st->tail = it;
    st->issued++;
    leave();
}

static void run_host_fn(struct item *it);

/* Run one item; device memory is open (flush), except for a host function,
 * which may no more touch device memory than it may on a GPU, and runs
 * without the lock (see the top of this file). */
static void run_item(struct item *it)
{
    /* Last first: where in-place regions of one op overlap, the first one
     * saved the bytes before any of them was poisoned. */
    for (int i = it->num_regions - 1; i >= 0; i--)
        if (it->regions[i].saved) {
            memcpy((void *)it->regions[i].p, it->regions[i].saved, it->regions[i].bytes);
            free(it->regions[i].saved);
        }
    if (it->run == run_host_fn) {
        int was_open = sr_opaque_set_access(0);
        int d = release_all();
        it->run(it);
        reacquire(d);
        sr_opaque_set_access(was_open);
    } else {
        it->run(it);
    }
    for (struct kept *k = it->kept, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    free(it->regions);
    free(it);
}

/* Run st's queued items until `upto` of them have run in all, with the
 * opaque device's memory open for them. When another thread is running one
 * of st's items (its lock let go in a host function), wait for it first. */
static void flush(struct sr_stream *st, int64_t upto)
{
    enter();
    int was_open = -1;
    while (st->done < upto && (st->head || (st->runner && st->runner != &self))) {
        if (st->runner && st->runner != &self) {
            wait_idle();
            continue;
        }
        int prev = sr_opaque_set_access(1); /* another thread may have shut it meanwhile */
        if (was_open < 0)
            was_open = prev;
        struct item *it = st->head;
        st->head = it->next;
        if (!st->head)
            st->tail = NULL;
        const void *outer = st->runner; /* this thread's, or NULL */
        st->runner = &self;
        run_item(it); /* may flush other streams (a wait), never st itself */
        st->runner = outer;
        st->done++;
        notify_idle();
    }
    if (was_open >= 0)
        sr_opaque_set_access(was_open);
    leave();
}

static void flush_all(void)
{
    enter();
    for (struct sr_stream *s = streams; s; s = s->next_stream)
        flush(s, s->issued);
    leave();
}

/* ---- memory, streams, events --------------------------------------------- */

static void *d_alloc(struct sr_device *dev, size_t bytes)
{
    return sr_aligned_alloc(bytes ? bytes : 1);
}

/* SR_TEST_DEVICE_MEMORY=BYTES (tests): device allocations fail as a full
 * GPU's do once BYTES have been allocated in all (frees not subtracted), so
 * a test can see the out-of-memory error name the buffer. */
static void check_test_memory(struct sr_device *dev, size_t bytes)
{
    static _Atomic uint64_t allocated;
    static _Atomic int64_t cap_read = -1;
    int64_t cap = atomic_load(&cap_read);
    if (cap < 0) { /* racing readers store the same value */
        const char *v = getenv("SR_TEST_DEVICE_MEMORY");
        cap = v && *v ? strtoll(v, NULL, 10) : 0;
        atomic_store(&cap_read, cap < 0 ? 0 : cap);
    }
    uint64_t before = atomic_fetch_add(&allocated, bytes);
    if (cap > 0 && before + bytes > (uint64_t)cap)
        sr_dev_out_of_memory(dev, bytes, before < (uint64_t)cap ? (size_t)cap - before : 0,
                             (size_t)cap);
}

static void *d_alloc_device(struct sr_device *dev, size_t bytes)
{
    check_test_memory(dev, bytes);
    return d_alloc(dev, bytes);
}

static void d_free(struct sr_device *dev, void *p)
{
    flush_all(); /* as cudaFree, wait for work that may use p */
    sr_free(p);
}

/* The opaque device's memory (cpu_opaque.c); its host memory is d_alloc's. */
static void *o_alloc(struct sr_device *dev, size_t bytes)
{
    check_test_memory(dev, bytes);
    enter();
    void *p = sr_opaque_alloc(bytes);
    leave();
    return p;
}

static void o_free(struct sr_device *dev, void *p)
{
    enter();
    flush_all();
    sr_opaque_free(p);
    leave();
}

static int o_owns(struct sr_device *dev, const void *p, void **base, size_t *bytes)
{
    enter();
    int mine = sr_opaque_find(p, base, bytes);
    leave();
    return mine;
}

struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
};

static void run_copy(struct item *it)
{
    struct copy_args *a = (void *)it->args;
    memmove(a->dst, a->src, a->bytes);
}

static void d_copy(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct copy_args), run_copy);
    *(struct copy_args *)it->args = (struct copy_args){dst, src, bytes};
    sr_deferred_add_region(it, src, bytes, REGION_IN);
    sr_deferred_add_region(it, dst, bytes, REGION_OUT);
    sr_deferred_enqueue(s, it);
}

struct memset_args {
    void *p;
    int value;
    size_t bytes;
};

static void run_memset(struct item *it)
{
    struct memset_args *a = (void *)it->args;
    memset(a->p, a->value, a->bytes);
}

static void d_memset(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct memset_args), run_memset);
    *(struct memset_args *)it->args = (struct memset_args){p, value, bytes};
    sr_deferred_add_region(it, p, bytes, REGION_OUT);
    sr_deferred_enqueue(s, it);
}

static sr_stream_t d_stream_create(struct sr_device *dev)
{
    struct sr_stream *st = sr_deferred_xmalloc(sizeof *st);
    memset(st, 0, sizeof *st);
    enter();
    st->next_stream = streams;
    streams = st;
    leave();
    return st;
}

static void d_stream_destroy(struct sr_device *dev, sr_stream_t s)
{
    if (!s)
        return;
    enter();
    flush(s, s->issued);
    for (struct sr_stream **pp = &streams; *pp; pp = &(*pp)->next_stream)
        if (*pp == s) {
            *pp = s->next_stream;
            break;
        }
    /* kept, empty and complete, for the events last recorded on it (as on
     * CUDA, they outlive their stream) */
    s->next_stream = retired;
    retired = s;
    leave();
}

static void d_stream_sync(struct sr_device *dev, sr_stream_t s)
{
    struct sr_stream *st = stream_of(s);
    flush(st, st->issued);
}

static sr_event_t d_event_create(struct sr_device *dev)
{
    struct sr_event *e = sr_deferred_xmalloc(sizeof *e);
    memset(e, 0, sizeof *e);
    return e;
}

static void d_event_sync(struct sr_device *dev, sr_event_t e)
{
    enter();
    if (e->stream)
        flush(e->stream, e->seq);
    leave();
}

static void d_event_destroy(struct sr_device *dev, sr_event_t e)
{
    if (!e)
        return;
    d_event_sync(dev, e); /* its marker must not outlive it */
    free(e);
}

struct marker_args {
    struct sr_event *e;
    int64_t generation;
};

static void run_marker(struct item *it)
{
    struct marker_args *a = (void *)it->args;
    if (a->e->generation != a->generation)
        return;
    a->e->time_ns = sr_clock_ns();
    a->e->stream = NULL; /* complete: it no longer names its stream, which may be destroyed
                            before the event (a comm work item's event outlives streams) */
}

static void d_event_record(struct sr_device *dev, sr_event_t e, sr_stream_t s)
{
    enter();
    struct item *it = sr_deferred_item_new(sizeof(struct marker_args), run_marker);
    e->generation++;
    e->time_ns = 0;
    *(struct marker_args *)it->args = (struct marker_args){e, e->generation};
    sr_deferred_enqueue(s, it);
    e->stream = stream_of(s);
    e->seq = e->stream->issued;
    leave();
}

struct wait_args {
    struct sr_stream *stream;
    int64_t seq;
};

static void run_wait(struct item *it)
{
    struct wait_args *a = (void *)it->args;
    flush(a->stream, a->seq);
}

static void d_stream_wait_event(struct sr_device *dev, sr_stream_t s, sr_event_t e)
{
    enter();
    if (e->stream && stream_of(s) != e->stream) {
        struct item *it = sr_deferred_item_new(sizeof(struct wait_args), run_wait);
        *(struct wait_args *)it->args = (struct wait_args){e->stream, e->seq};
        sr_deferred_enqueue(s, it);
    }
    leave();
}

static int d_event_query(struct sr_device *dev, sr_event_t e)
{
    enter();
    int done = !e->stream || e->stream->done >= e->seq;
    leave();
    return done;
}

static float d_event_elapsed_ms(struct sr_device *dev, sr_event_t start, sr_event_t end)
{
    enter();
    int ready = d_event_query(dev, start) && d_event_query(dev, end) && start->time_ns &&
                end->time_ns;
    leave();
    if (!ready)
        SR_ABORT("deferred device: elapsed time of an event that has not completed "
                 "(synchronise the event first)");
    return (float)((double)(end->time_ns - start->time_ns) * 1e-6);
}

struct host_fn_args {
    sr_host_fn fn;
    void *arg;
};

static void run_host_fn(struct item *it)
{
    struct host_fn_args *a = (void *)it->args;
    a->fn(a->arg);
}

static void d_launch_host_fn(struct sr_device *dev, sr_stream_t s, sr_host_fn fn, void *arg)
{
    struct item *it = sr_deferred_item_new(sizeof(struct host_fn_args), run_host_fn);
    *(struct host_fn_args *)it->args = (struct host_fn_args){fn, arg};
    sr_deferred_enqueue(s, it);
}

/* What the deferred and opaque devices share: queues, events, host memory. */
#define DEFERRED_QUEUE_OPS                                                                        \
    .copy = d_copy, .memset = d_memset, .stream_create = d_stream_create,                       \
    .stream_destroy = d_stream_destroy, .stream_sync = d_stream_sync,                           \
    .event_create = d_event_create, .event_destroy = d_event_destroy,                           \
    .event_record = d_event_record, .stream_wait_event = d_stream_wait_event,                   \
    .event_sync = d_event_sync, .event_query = d_event_query,                                   \
    .event_elapsed_ms = d_event_elapsed_ms, .launch_host_fn = d_launch_host_fn,                 \
    .alloc_host = d_alloc, .free_host = d_free

static const struct sr_mem_ops deferred_mem_ops = {
    .alloc = d_alloc_device,
    .free = d_free,
    DEFERRED_QUEUE_OPS,
};

static const struct sr_mem_ops opaque_mem_ops = {
    .alloc = o_alloc,
    .free = o_free,
    DEFERRED_QUEUE_OPS,
    .owns = o_owns,
};

static struct sr_device deferred_device = {
    .kind = SR_DEVICE_CPU,
    .ordinal = 0,
    .name = "cpu (deferred)",
    .host_visible = 1,
    .host_immediate = 0, /* ops run later: a twin must not alias the host */
    .mem = &deferred_mem_ops,
    .dense = &sr_cpu_deferred_dense_ops,
    .emb = &sr_cpu_deferred_embedding_ops,
    .emb_dp = &sr_cpu_deferred_emb_dp_ops,
    .optim = &sr_cpu_deferred_optim_ops,
    .sparse_dist = &sr_cpu_deferred_sparse_dist_ops,
    .cast = &sr_cpu_deferred_cast_ops,
    .ctx = NULL,
};

struct sr_device *sr_cpu_deferred_device(void)
{
    return &deferred_device;
}

/* The deferred device whose memory the host cannot touch (cpu_opaque.c). */
static struct sr_device opaque_device = {
    .kind = SR_DEVICE_CPU,
    .ordinal = 0,
    .name = "cpu (opaque)",
    .host_visible = 0,
    .host_immediate = 0,
    .mem = &opaque_mem_ops,
    .dense = &sr_cpu_deferred_dense_ops,
    .emb = &sr_cpu_deferred_embedding_ops,
    .emb_dp = &sr_cpu_deferred_emb_dp_ops,
    .optim = &sr_cpu_deferred_optim_ops,
    .sparse_dist = &sr_cpu_deferred_sparse_dist_ops,
    .cast = &sr_cpu_deferred_cast_ops,
    .ctx = NULL,
};

struct sr_device *sr_cpu_opaque_device(void)
{
    return &opaque_device;
}
