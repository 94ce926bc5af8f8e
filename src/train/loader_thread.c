/*
 * The loader thread (loader_thread.h): a ring of SR_LOADER_SLOTS batches
 * filled in step order by one thread, taken and released in the same order
 * by the compute thread. Counters, not indices, say where each side is:
 *
 *   released <= taken <= loaded <= released + SLOTS
 *
 * The loader waits on released_cv while the ring is full; the compute thread
 * waits on loaded_cv while taken == loaded. Both under one mutex.
 */
#include <stdio.h>
#include <string.h>

#ifdef SR_USE_OMP
#include <omp.h>
#endif

#include "shardrec/error.h"
#include "shardrec/trace.h"
#include "train/loader_thread.h"

void sr_loader_init(struct sr_loader *l, struct sr_device *dev, int threads, int max_batch,
                    int num_dense, int num_features, int64_t max_values, int with_weights,
                    const char *const *keys)
{
    memset(l, 0, sizeof *l);
#ifdef SR_USE_OMP
    l->threads = threads > 1 ? threads : 1;
#else
    l->threads = 1;
#endif
    for (int k = 0; k < SR_LOADER_SLOTS; k++) {
        struct sr_loader_slot *s = &l->slots[k];
        sr_batch_init_pinned(&s->host, dev, max_batch, num_dense, num_features, max_values,
                             with_weights, keys);
        sr_batch_init_twin(&s->twin, &s->host);
        s->copied = sr_dev_event_create(dev);
        s->consumed = sr_dev_event_create(dev);
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->loaded_cv, NULL);
    pthread_cond_init(&l->released_cv, NULL);
}

void sr_loader_free(struct sr_loader *l)
{
    if (!l->slots[0].host.dev)
        return; /* never initialised */
    sr_loader_stop(l);
    for (int k = 0; k < SR_LOADER_SLOTS; k++) {
        sr_dev_event_destroy(l->slots[k].host.dev, l->slots[k].copied);
        sr_dev_event_destroy(l->slots[k].host.dev, l->slots[k].consumed);
        sr_batch_free(&l->slots[k].twin); /* first: it may alias the host batch */
        sr_batch_free(&l->slots[k].host);
    }
    pthread_cond_destroy(&l->released_cv);
    pthread_cond_destroy(&l->loaded_cv);
    pthread_mutex_destroy(&l->mu);
    memset(l, 0, sizeof *l);
}

/* Fill one slot, outside the lock: the slot is the loader's until `loaded`
 * moves past it. */
static void produce(struct sr_loader *l, struct sr_loader_slot *s, int64_t step)
{
    sr_trace_set_thread_step(step);
    sr_trace_begin(SR_SPAN_LOAD, -1);
    /* the slot's last copy out of its host batch (three steps back) must
     * have run before the batch is refilled; usually it has */
    if (!sr_dev_event_query(s->host.dev, s->copied))
        sr_dev_event_sync(s->host.dev, s->copied);
    s->step = step;
    s->rc = l->fn(l->ctx, step, &s->host);
    s->msg[0] = '\0';
    if (s->rc < 0)
        snprintf(s->msg, sizeof s->msg, "%s", sr_error_message());
    sr_trace_end();
}

static void *loader_main(void *arg)
{
    struct sr_loader *l = arg;
    sr_trace_thread_name("loader");
#ifdef SR_USE_OMP
    omp_set_num_threads(l->threads); /* sr_trainer_loader_threads */
#endif
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !l->done && l->loaded - l->released >= SR_LOADER_SLOTS)
            pthread_cond_wait(&l->released_cv, &l->mu);
        if (l->stop || l->done)
            break;
        int64_t step = l->first + l->loaded;
        struct sr_loader_slot *s = &l->slots[l->loaded % SR_LOADER_SLOTS];
        pthread_mutex_unlock(&l->mu);
        produce(l, s, step);
        pthread_mutex_lock(&l->mu);
        l->loaded++;
        l->done = s->rc != 0 || step == l->last;
        pthread_cond_signal(&l->loaded_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

void sr_loader_start(struct sr_loader *l, int64_t first, int64_t last, sr_loader_fn fn, void *ctx,
                     int threaded)
{
    SR_ASSERT(!l->running && first >= 1 && last >= first);
    l->fn = fn;
    l->ctx = ctx;
    l->first = first;
    l->last = last;
    l->loaded = l->taken = l->released = 0;
    l->stop = l->done = 0;
    l->threaded = threaded;
    if (!threaded) {
        l->running = 1;
        return;
    }
    if (pthread_create(&l->thread, NULL, loader_main, l) != 0)
        SR_ABORT("cannot start the loader thread");
    l->running = 1;
}

/* Without a thread: the caller makes the batch it takes, now. */
static struct sr_loader_slot *take_made_here(struct sr_loader *l)
{
    SR_ASSERT(l->running && l->taken - l->released < SR_LOADER_SLOTS);
    SR_ASSERT(!l->done); /* taken past the last batch */
    int64_t step = l->first + l->taken;
    struct sr_loader_slot *s = &l->slots[l->taken % SR_LOADER_SLOTS];
    produce(l, s, step);
    sr_trace_set_thread_step(0);
    l->loaded++, l->taken++;
    l->done = s->rc != 0 || step == l->last;
    return s;
}

struct sr_loader_slot *sr_loader_take(struct sr_loader *l)
{
    if (!l->threaded)
        return take_made_here(l);
    sr_trace_begin(SR_SPAN_DATA_WAIT, -1);
    pthread_mutex_lock(&l->mu);
    SR_ASSERT(l->running && l->taken - l->released < SR_LOADER_SLOTS);
    while (l->taken == l->loaded) {
        SR_ASSERT(!l->done); /* taken past the last batch */
        pthread_cond_wait(&l->loaded_cv, &l->mu);
    }
    struct sr_loader_slot *s = &l->slots[l->taken % SR_LOADER_SLOTS];
    l->taken++;
    pthread_mutex_unlock(&l->mu);
    sr_trace_end();
    return s;
}

void sr_loader_release(struct sr_loader *l)
{
    pthread_mutex_lock(&l->mu);
    SR_ASSERT(l->released < l->taken);
    l->released++;
    pthread_cond_signal(&l->released_cv);
    pthread_mutex_unlock(&l->mu);
}

void sr_loader_stop(struct sr_loader *l)
{
    if (!l->running)
        return;
    if (!l->threaded) {
        l->running = 0;
        return;
    }
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->released_cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->running = 0;
}
