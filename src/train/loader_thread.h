/*
 * The loader thread and its ring of batches (the pipeline's load stage).
 *
 * One thread produces the training batches of steps first..last, in order,
 * into a ring of SR_LOADER_SLOTS slots; the compute thread takes them in
 * order and gives each back when its step is done:
 *
 *   slot k = (step - first) % SLOTS
 *   loader:  waits while SLOTS batches are out (loaded, not yet released),
 *            fills slot k's host batch, marks it loaded, signals
 *   compute: take (waits while nothing new is loaded: the summary's "waited
 *            on data"), copy to the slot's twin, train, release
 *
 * With 3 slots, batch i trains, batch i+1 waits copied with its input dist
 * in flight, and batch i+2 loads. A slot holds the producer's status: an
 * error (with its message, kept per thread by error.h, copied here) or the
 * end of the data ends production; the consumer takes that slot and stops.
 * Mutex and condition variables, no busy waiting. Batch contents depend
 * only on the step (the producer is called once per step, in step order),
 * never on timing.
 *
 * On the CPU devices the thread runs the producer single-threaded (OpenMP
 * regions it opens use one thread), so it does not compete with the compute
 * thread's OpenMP team for the cores; on a CUDA device, whose compute thread
 * only issues work, the producer's regions take all cores but two; its spans
 * ("load", step = the batch's step) go on its own trace track, "loader".
 *
 * Memory: every slot's host batch (pinned) and twin are allocated by
 * sr_loader_init; start, take and release allocate nothing.
 */
#ifndef SHARDREC_LOADER_THREAD_H
#define SHARDREC_LOADER_THREAD_H

#include <pthread.h>
#include <stdint.h>

#include "shardrec/batch.h"

#define SR_LOADER_SLOTS 3

/* Fill b with the batch of `step`: SR_OK, a positive "no batch" code (the
 * end of the data) or a negative status with its message set (error.h). */
typedef int (*sr_loader_fn)(void *ctx, int64_t step, struct sr_batch *b);

struct sr_loader_slot {
    struct sr_batch host; /* pinned: the producer fills it */
    struct sr_batch twin; /* its device twin (aliases host on the immediate CPU device) */
    sr_event_t copied;    /* recorded after the copy out of host: the compute stream
                           * waits for it before it reads the twin, the compute
                           * thread before it gives the slot back */
    sr_event_t consumed;  /* recorded after the last op that reads the twin: the
                           * next copy into the twin waits for it */
    int64_t step;
    int rc;         /* the producer's status for this step */
    char msg[1024]; /* its message when rc < 0 */
};

struct sr_loader {
    struct sr_loader_slot slots[SR_LOADER_SLOTS];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t loaded_cv, released_cv;
    int running;
    sr_loader_fn fn;
    void *ctx;
    int64_t first, last;             /* steps to produce */
    int64_t loaded, taken, released; /* batches so far, counted from first */
    int stop, done;                  /* asked to stop; production ended */
    int threads;                     /* OpenMP threads of the producer (see sr_loader_init) */
    int threaded;                    /* 0: no thread; take makes its batch on the caller */
};

/* Allocate the slots, each a pinned host batch of these sizes with its twin
 * on dev (sr_batch_init_pinned, sr_batch_init_twin). The producer's OpenMP
 * regions run on `threads` threads (1 without OpenMP). */
void sr_loader_init(struct sr_loader *l, struct sr_device *dev, int threads, int max_batch,
                    int num_dense, int num_features, int64_t max_values, int with_weights,
                    const char *const *keys);
/* Stop the thread if running; free the slots. A zeroed loader is a no-op. */
void sr_loader_free(struct sr_loader *l);

/* Start producing steps first..last with fn(ctx, step, host batch). With
 * `threaded`, a thread makes them ahead (fn runs on it: it must only touch
 * state no other thread uses meanwhile); aborts if the thread cannot be
 * created. Without, each sr_loader_take makes its batch on the calling
 * thread, in a "load" span (--pipeline none: one batch at a time). */
void sr_loader_start(struct sr_loader *l, int64_t first, int64_t last, sr_loader_fn fn, void *ctx,
                     int threaded);
/* The next step's slot, waiting for it (a "data.wait" span). Taking past an
 * error, the end of the data or `last` aborts. */
struct sr_loader_slot *sr_loader_take(struct sr_loader *l);
/* Give back the oldest taken slot: its batch is no longer read. */
void sr_loader_release(struct sr_loader *l);
/* Ask the thread to stop after its current batch and join it; idempotent. */
void sr_loader_stop(struct sr_loader *l);

#endif
