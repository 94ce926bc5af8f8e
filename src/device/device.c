/*
 * The thin wrappers over a device's memory table, the out-of-memory abort
 * every backend gives, and the host-wait count. Backends call these; the
 * registry that finds the backends is device_registry.c, so no file both
 * includes a backend and is called by it.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "device/ops_embedding_dp.h"

void *sr_dev_alloc_named(struct sr_device *dev, size_t bytes, const char *what)
{
    const char *outer = sr_alloc_label_set(what);
    void *p = dev->mem->alloc(dev, bytes);
    sr_alloc_label_set(outer);
    return p;
}

void *sr_dev_alloc(struct sr_device *dev, size_t bytes)
{
    return dev->mem->alloc(dev, bytes); /* an outer label stays */
}

/* p (bytes) zeroed, and the zeroes done before it is returned. */
static void *zeroed(struct sr_device *dev, void *p, size_t bytes)
{
    dev->mem->memset(dev, p, 0, bytes, NULL);
    dev->mem->stream_sync(dev, NULL);
    return p;
}

void *sr_dev_alloc_zero_named(struct sr_device *dev, size_t bytes, const char *what)
{
    return zeroed(dev, sr_dev_alloc_named(dev, bytes, what), bytes);
}

void *sr_dev_alloc_zero(struct sr_device *dev, size_t bytes)
{
    return zeroed(dev, dev->mem->alloc(dev, bytes), bytes);
}

void sr_dev_out_of_memory(const struct sr_device *dev, size_t bytes, size_t free_b,
                          size_t total_b)
{
    char asked[24], fr[24], tot[24], mem[80] = "";
    const char *what = sr_alloc_label();
    if (total_b)
        snprintf(mem, sizeof mem, ", %s free of %s", sr_format_bytes(fr, sizeof fr, (double)free_b),
                 sr_format_bytes(tot, sizeof tot, (double)total_b));
    SR_ABORT("out of device memory on %s allocating %s: %zu bytes (%s) asked for%s; HINT: a "
             "smaller batch, fewer or smaller tables on this device, or more devices (another "
             "process may hold its memory)",
             dev->name, what ? what : "a device buffer", bytes,
             sr_format_bytes(asked, sizeof asked, (double)bytes), mem);
}

void sr_dev_free(struct sr_device *dev, void *p)
{
    if (p)
        dev->mem->free(dev, p);
}

void sr_dev_copy(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s)
{
    if (bytes)
        dev->mem->copy(dev, dst, src, bytes, s);
}

void sr_dev_memset(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s)
{
    if (bytes)
        dev->mem->memset(dev, p, value, bytes, s);
}

/* Host waits so far (sr_dev_sync_count): relaxed, a statistic only. A
 * thread that said so (sr_dev_count_host_waits(0)) is left out. */
static atomic_uint_least64_t stream_syncs, event_syncs;
static _Thread_local int uncounted;

void sr_dev_count_host_waits(int counted)
{
    uncounted = !counted;
}

void sr_dev_sync(struct sr_device *dev, sr_stream_t s)
{
    if (!uncounted)
        atomic_fetch_add_explicit(&stream_syncs, 1, memory_order_relaxed);
    dev->mem->stream_sync(dev, s);
}

uint64_t sr_dev_sync_count(uint64_t *event_syncs_out)
{
    if (event_syncs_out)
        *event_syncs_out = atomic_load_explicit(&event_syncs, memory_order_relaxed);
    return atomic_load_explicit(&stream_syncs, memory_order_relaxed);
}

void *sr_dev_alloc_host(struct sr_device *dev, size_t bytes)
{
    return dev->mem->alloc_host(dev, bytes);
}

void sr_dev_free_host(struct sr_device *dev, void *p)
{
    if (p)
        dev->mem->free_host(dev, p);
}

uint64_t sr_dev_peak_bytes(struct sr_device *dev)
{
    return dev->mem->peak_bytes ? dev->mem->peak_bytes(dev) : 0;
}

int sr_dev_has_graphs(const struct sr_device *dev)
{
    return dev->mem->capture_begin != NULL;
}

int sr_dev_hidden(struct sr_device *dev, const void *p, void **base, size_t *bytes)
{
    return !dev->host_visible && p && dev->mem->owns && dev->mem->owns(dev, p, base, bytes);
}

sr_stream_t sr_dev_stream_create(struct sr_device *dev)
{
    return dev->mem->stream_create(dev);
}

void sr_dev_stream_destroy(struct sr_device *dev, sr_stream_t s)
{
    if (s)
        dev->mem->stream_destroy(dev, s);
}

sr_event_t sr_dev_event_create(struct sr_device *dev)
{
    return dev->mem->event_create(dev);
}

void sr_dev_event_destroy(struct sr_device *dev, sr_event_t e)
{
    if (e)
        dev->mem->event_destroy(dev, e);
}

void sr_dev_event_record(struct sr_device *dev, sr_event_t e, sr_stream_t s)
{
    dev->mem->event_record(dev, e, s);
}

void sr_dev_stream_wait_event(struct sr_device *dev, sr_stream_t s, sr_event_t e)
{
    dev->mem->stream_wait_event(dev, s, e);
}

void sr_dev_event_sync(struct sr_device *dev, sr_event_t e)
{
    if (!uncounted)
        atomic_fetch_add_explicit(&event_syncs, 1, memory_order_relaxed);
    dev->mem->event_sync(dev, e);
}

int sr_dev_event_query(struct sr_device *dev, sr_event_t e)
{
    return dev->mem->event_query(dev, e);
}

float sr_dev_event_elapsed_ms(struct sr_device *dev, sr_event_t start, sr_event_t end)
{
    return dev->mem->event_elapsed_ms(dev, start, end);
}

void *sr_dev_native_stream(struct sr_device *dev, sr_stream_t s)
{
    return dev->mem->native_stream ? dev->mem->native_stream(dev, s) : NULL;
}

void sr_dev_make_current(struct sr_device *dev)
{
    if (dev->mem->make_current)
        dev->mem->make_current(dev);
}

void sr_dev_launch_host_fn(struct sr_device *dev, sr_stream_t s, sr_host_fn fn, void *arg)
{
    dev->mem->launch_host_fn(dev, s, fn, arg);
}

const struct sr_emb_dp_ops *sr_emb_dp_ops_get(const struct sr_device *dev)
{
    return dev ? dev->emb_dp : NULL;
}
