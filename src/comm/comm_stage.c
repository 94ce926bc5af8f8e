/*
 * Staging of device buffers for a host-memory backend (MPI; single copies
 * on the stream instead) whose bound device's memory the host cannot
 * address (a GPU; the opaque CPU device): the transport only ever sees host
 * memory (comm.h, "streams and memory").
 *
 * Every device allocation that a collective of this communicator touches
 * gets a mirror: pinned host memory of the device (sr_dev_alloc_host) of the
 * allocation's size, the same offsets inside:
 *
 *   device allocation  [ ..... | region of the call | ..... ]
 *   its mirror         [ ..... | region of the call | ..... ]   host
 *
 * A call copies its send regions device -> mirror on the call's stream and
 * makes that stream wait for the last copy back out of its receive mirror;
 * the backend records an event after that and its worker waits for the
 * event (not the calling thread) before the transport runs on the mirrors.
 * The receive regions go back mirror -> device on a stream once the
 * collective is complete: at once for a blocking call (stream-ordered: work
 * issued on the stream afterwards sees the result), at sr_comm_wait or a
 * successful sr_comm_test (on the call's stream), or, for
 * sr_comm_stream_wait, on the waiting stream right after the host function
 * that waits for the collective. An event after each copy back tells the
 * next call that writes the mirror when that copy has read it.
 *
 * Concurrent calls on one allocation use disjoint regions of its mirror (a
 * correct program never has two collectives in flight writing one region),
 * so a mirror serves any number of them. Mirrors are made at the first call
 * on an allocation, or earlier by sr_comm_register (so that a training loop
 * allocates nothing), and live until the communicator is freed; beyond
 * MIRRORS_MAX the least recently used idle one is dropped. Records of calls
 * in flight are recycled through a free list.
 *
 * All of it runs on the thread that drives the communicator: a backend's
 * worker and a stream's host function that waits for a collective never
 * touch it.
 */
#include <stdint.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "comm/comm_internal.h"

#define MIRRORS_MAX    64
#define CALLS_RESERVED 32 /* call records made up front */

struct mirror {
    char *base;         /* the device allocation; NULL: slot unused */
    size_t bytes;       /* its size */
    char *host;         /* (bytes) pinned host memory */
    sr_event_t copied;  /* after the last copy back out of host */
    sr_stream_t stream; /* where that copy ran */
    int busy;           /* calls in flight using it */
    uint64_t used;      /* clock of the last call, for eviction */
};

struct run {
    size_t off, bytes; /* within the allocation */
};

struct sr_stage_call {
    struct sr_stage_call *next; /* free list */
    sr_stream_t stream;         /* the call's */
    struct mirror *in, *out;
    int num_runs, cap_runs;
    struct run *runs; /* receive regions to copy back */
};

struct sr_comm_stage {
    struct mirror mirrors[MIRRORS_MAX];
    uint64_t clock;
    struct sr_stage_call *free_calls;
};

int sr_stage_on(sr_comm_t c)
{
    return c->dev && c->memory == SR_COMM_MEMORY_HOST && !c->dev->host_visible;
}

static struct sr_stage_call *new_call(sr_comm_t c)
{
    struct sr_stage_call *k = sr_calloc(1, sizeof *k);
    k->cap_runs = c->size;
    k->runs = sr_calloc((size_t)c->size, sizeof *k->runs);
    return k;
}

/* The communicator's staging state, made with CALLS_RESERVED call records:
 * stream-waited calls are released only when their waits are issued, and
 * more of them are in flight in a later step than in the first. */
static struct sr_comm_stage *stage_of(sr_comm_t c)
{
    if (c->stage)
        return c->stage;
    c->stage = sr_calloc(1, sizeof *c->stage);
    for (int i = 0; i < CALLS_RESERVED; i++) {
        struct sr_stage_call *k = new_call(c);
        k->next = c->stage->free_calls;
        c->stage->free_calls = k;
    }
    return c->stage;
}

static void mirror_drop(struct sr_device *dev, struct mirror *m)
{
    sr_dev_event_destroy(dev, m->copied); /* waits for the last copy back */
    sr_dev_free_host(dev, m->host);
    memset(m, 0, sizeof *m);
}

/* The mirror of allocation (base, bytes), made if needed. */
static struct mirror *mirror_of(sr_comm_t c, char *base, size_t bytes)
{
    struct sr_comm_stage *st = stage_of(c);
    struct mirror *slot = NULL;
    for (int i = 0; i < MIRRORS_MAX; i++) {
        struct mirror *m = &st->mirrors[i];
        if (m->base == base && m->bytes == bytes) {
            m->used = ++st->clock;
            return m;
        }
        if (!m->base && !slot)
            slot = m;
    }
    const int empty = slot != NULL;
    /* none free: the least recently used idle one */
    for (int i = 0; !empty && i < MIRRORS_MAX; i++) {
        struct mirror *m = &st->mirrors[i];
        if (!m->busy && (!slot || m->used < slot->used))
            slot = m;
    }
    if (!slot)
        SR_ABORT("communicator '%s': more than %d device allocations in collectives in flight",
                 c->name, MIRRORS_MAX);
    if (slot->base)
        mirror_drop(c->dev, slot);
    *slot = (struct mirror){.base = base,
                            .bytes = bytes,
                            .host = sr_dev_alloc_host(c->dev, bytes ? bytes : 1),
                            .copied = sr_dev_event_create(c->dev),
                            .used = ++st->clock};
    return slot;
}

void sr_stage_register(sr_comm_t c, const void *buf)
{
    void *base;
    size_t bytes;
    if (c->size > 1 && sr_stage_on(c) && sr_dev_hidden(c->dev, buf, &base, &bytes))
        mirror_of(c, base, bytes);
}

int sr_stage_local_copy(sr_comm_t c, const void *send, void *recv, size_t bytes,
                        sr_stream_t stream)
{
    if (c->size != 1 || !sr_stage_on(c) || !sr_dev_hidden(c->dev, recv, NULL, NULL))
        return 0; /* a host recv must hold the result when a blocking call returns */
    if (send != recv)
        sr_dev_copy(c->dev, recv, send, bytes, stream);
    return 1;
}

struct sr_stage_call *sr_stage_begin(sr_comm_t c, sr_stream_t stream)
{
    struct sr_comm_stage *st = stage_of(c);
    struct sr_stage_call *k = st->free_calls;
    if (k)
        st->free_calls = k->next;
    else
        k = new_call(c);
    k->next = NULL;
    k->stream = stream;
    k->in = k->out = NULL;
    k->num_runs = 0;
    return k;
}

static void release(sr_comm_t c, struct sr_stage_call *k)
{
    if (k->in)
        k->in->busy--;
    if (k->out)
        k->out->busy--;
    k->next = c->stage->free_calls;
    c->stage->free_calls = k;
}

/* Make `stream` come after the last copy back out of m's host memory. */
static void after_copy_back(struct sr_device *dev, struct mirror *m, sr_stream_t stream)
{
    if (m->stream != stream && !sr_dev_event_query(dev, m->copied))
        sr_dev_stream_wait_event(dev, stream, m->copied);
}

/* buf's mirror, and the regions (counts[i], displs[i]) elements of es bytes,
 * as runs of bytes within the allocation (adjacent regions merged); NULL
 * when buf is not hidden device memory. */
static struct mirror *regions(sr_comm_t c, const void *buf, const size_t *counts,
                              const size_t *displs, int n, size_t es, struct run *runs,
                              int *num_runs, size_t *off)
{
    void *base;
    size_t bytes;
    if (!sr_dev_hidden(c->dev, buf, &base, &bytes))
        return NULL;
    *off = (size_t)((const char *)buf - (char *)base);
    *num_runs = 0;
    for (int i = 0; i < n; i++) {
        size_t lo = *off + displs[i] * es, len = counts[i] * es;
        if (!len)
            continue;
        if (lo + len > bytes)
            SR_ABORT("communicator '%s': a collective's buffer region [%zu, %zu) runs past its "
                     "device allocation of %zu bytes",
                     c->name, lo, lo + len, bytes);
        struct run *last = *num_runs ? &runs[*num_runs - 1] : NULL;
        if (last && last->off + last->bytes == lo)
            last->bytes += len;
        else
            runs[(*num_runs)++] = (struct run){lo, len};
    }
    return mirror_of(c, base, bytes);
}

const void *sr_stage_in(sr_comm_t c, struct sr_stage_call *k, const void *buf, const size_t *counts,
                        const size_t *displs, int n, size_t es)
{
    struct run *runs = k->runs;
    int num;
    size_t off;
    SR_ASSERT(n <= k->cap_runs);
    struct mirror *m = regions(c, buf, counts, displs, n, es, runs, &num, &off);
    if (!m)
        return buf;
    after_copy_back(c->dev, m, k->stream);
    for (int i = 0; i < num; i++)
        sr_dev_copy(c->dev, m->host + runs[i].off, m->base + runs[i].off, runs[i].bytes, k->stream);
    m->busy++;
    k->in = m;
    return m->host + off;
}

void *sr_stage_out(sr_comm_t c, struct sr_stage_call *k, void *buf, const size_t *counts,
                   const size_t *displs, int n, size_t es)
{
    size_t off;
    SR_ASSERT(n <= k->cap_runs);
    struct mirror *m = regions(c, buf, counts, displs, n, es, k->runs, &k->num_runs, &off);
    if (!m)
        return buf;
    after_copy_back(c->dev, m, k->stream); /* a copy back may still read it */
    m->busy++;
    k->out = m;
    return m->host + off;
}

sr_stream_t sr_stage_stream(const struct sr_stage_call *k)
{
    return k->stream;
}

/* The receive regions back to the device, on `stream`. */
static void copy_back(sr_comm_t c, struct sr_stage_call *k, sr_stream_t stream)
{
    struct mirror *m = k->out;
    if (!m)
        return;
    after_copy_back(c->dev, m, stream);
    for (int i = 0; i < k->num_runs; i++)
        sr_dev_copy(c->dev, m->base + k->runs[i].off, m->host + k->runs[i].off, k->runs[i].bytes,
                    stream);
    sr_dev_event_record(c->dev, m->copied, stream);
    m->stream = stream;
}

void sr_stage_end(sr_comm_t c, struct sr_stage_call *k, sr_stream_t stream)
{
    copy_back(c, k, stream);
    release(c, k);
}

void sr_stage_free(sr_comm_t c)
{
    struct sr_comm_stage *st = c->stage;
    if (!st)
        return;
    for (int i = 0; i < MIRRORS_MAX; i++)
        if (st->mirrors[i].base)
            mirror_drop(c->dev, &st->mirrors[i]);
    while (st->free_calls) {
        struct sr_stage_call *k = st->free_calls;
        st->free_calls = k->next;
        sr_free(k->runs);
        sr_free(k);
    }
    sr_free(st);
    c->stage = NULL;
}
