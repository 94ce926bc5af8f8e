/*
 * The batch stages of a step: load and copy.
 *
 *   load   the reader or the generator fills the host batch (pinned host
 *          memory of the trainer's device); on the host, the loader then
 *          checks the KJT and applies each table's id policy
 *          (sr_batch_check_ids), so the embedding layer receives valid ids
 *          and a bad batch is rejected here, with the reader's or the KJT's
 *          message, before any collective of the step
 *   copy   the host batch to its device twin (sr_batch_copy: the used part
 *          only); forward, backward and evaluation read the twin
 *
 *   host_batch (pinned) --load--> checked, ids in range --copy--> batch (twin)
 *
 * On the immediate CPU device the twin aliases the host batch and the copy
 * moves no bytes; on the deferred CPU device and on GPUs it is memory of its
 * own (batch.h). Training and evaluation batches take the same path. Both
 * batches are sized at start-up: the stages do not allocate. With
 * --pipeline sparse-dist, training batches come instead from the loader
 * thread's ring (loader_thread.h; each slot a host batch and its twin, sized
 * here too), filled by sr_trainer_load_into on that thread; evaluation keeps
 * host_batch and batch.
 *
 * --batch-pool N (benchmarks): N batches are made and checked at start-up,
 * in pinned memory; step s copies pool[(s - 1) % N] to its twin, so the
 * step's host-to-device copy stays in the timing and the generator does not.
 */
#include <inttypes.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "train/trainer_internal.h"

void sr_trainer_batch_init(struct sr_trainer *t, int64_t max_values, int with_weights,
                           const char *const *keys)
{
    const struct sr_train_config *cfg = t->cfg;
    sr_batch_init_pinned(&t->host_batch, t->dev, cfg->batch_size, cfg->num_dense, cfg->num_features,
                         max_values, with_weights, keys);
    sr_batch_init_twin(&t->batch, &t->host_batch);
    t->copy_src = &t->host_batch;
    t->batch_copied = sr_dev_event_create(t->dev);
    sr_loader_init(&t->pipe.loader, t->dev, sr_trainer_loader_threads(t), cfg->batch_size,
                       cfg->num_dense, cfg->num_features, max_values, with_weights, keys);
}

int sr_trainer_pool_init(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    int n = cfg->batch_pool;
    if (n <= 0)
        return SR_OK;
    if (cfg->n_data)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--batch-pool cycles synthetic batches; it cannot be used with --data");
    t->pool = sr_calloc((size_t)n, sizeof *t->pool);
    t->pool_n = n;
    for (int k = 0; k < n; k++) {
        const struct sr_batch *h = &t->host_batch;
        sr_batch_init_pinned(&t->pool[k], t->dev, h->max_batch, h->num_dense, h->kjt.num_keys,
                             h->max_values, h->kjt.weights != NULL, (const char *const *)h->kjt.keys);
        int rc = sr_trainer_load_into(t, k + 1, &t->pool[k]);
        if (rc)
            return rc < 0 ? rc : sr_error_set(SR_ERR_INVALID_ARG, "--batch-pool: no batch %d", k + 1);
    }
    t->pool_ready = 1;
    return SR_OK;
}

/* A pool entry into a host batch of the same capacity (the immediate CPU
 * device, whose twin aliases the host batch). */
static void copy_host_batch(struct sr_batch *dst, const struct sr_batch *src)
{
    size_t B = (size_t)src->batch_size, bags = (size_t)src->kjt.num_keys * src->kjt.stride;
    size_t N = (size_t)src->kjt.num_values;
    dst->batch_size = src->batch_size;
    dst->first_index = src->first_index;
    dst->kjt.stride = src->kjt.stride;
    dst->kjt.num_values = src->kjt.num_values;
    dst->kjt.num_weights = src->kjt.num_weights;
    memcpy(dst->dense, src->dense, sizeof(float) * B * (size_t)src->num_dense);
    memcpy(dst->labels, src->labels, sizeof(float) * B);
    memcpy(dst->kjt.lengths, src->kjt.lengths, sizeof(int32_t) * bags);
    memcpy(dst->kjt.offsets, src->kjt.offsets, sizeof(int64_t) * (bags + 1));
    memcpy(dst->kjt.values, src->kjt.values, sizeof(int64_t) * N);
    if (src->kjt.weights)
        memcpy(dst->kjt.weights, src->kjt.weights, sizeof(float) * N);
    memcpy(dst->kjt.length_per_key, src->kjt.length_per_key,
           sizeof(int64_t) * (size_t)src->kjt.num_keys);
}

/* On the immediate CPU device a twin aliases its host batch, so a pool entry
 * is copied into the host batch instead (sr_trainer_load_into). */
const struct sr_batch *sr_trainer_pool_batch(const struct sr_trainer *t, int64_t step)
{
    return t->pool_n && !t->dev->host_immediate ? &t->pool[(step - 1) % t->pool_n] : NULL;
}

void sr_trainer_batch_free(struct sr_trainer *t)
{
    for (int k = 0; k < t->pool_n; k++)
        sr_batch_free(&t->pool[k]);
    sr_free(t->pool);
    sr_loader_free(&t->pipe.loader);
    if (t->streams.copy) { /* after the slots' events, last recorded on it */
        sr_dev_sync(t->dev, t->streams.copy);
        sr_dev_stream_destroy(t->dev, t->streams.copy);
        t->streams.copy = NULL;
    }
    if (t->batch_copied)
        sr_dev_event_destroy(t->dev, t->batch_copied);
    sr_batch_free(&t->batch); /* the twin first: it may alias host_batch */
    sr_batch_free(&t->host_batch);
}

/* The next training batch into b: this rank's slice of synthetic global
 * batch step-1, or of the next full global batch of --data, starting a new
 * epoch at the end of the files (or ending the run when --steps is not
 * given). */
static int produce(struct sr_trainer *t, int64_t step, struct sr_batch *b)
{
    int B = t->cfg->batch_size, rc;
    if (!t->reader) {
        sr_synth_fill(t->synth, (step - 1) * t->global_batch + (int64_t)t->rank * B, B, b);
        return SR_OK;
    }
    if ((rc = sr_reader_next(t->reader, b)) == 1) {
        sr_checkpoint_note_position(t, step);
        return SR_OK;
    }
    if (rc < 0)
        return rc;
    if (t->epoch == 0 && step == 1)
        return sr_error_set(SR_ERR_DATA, "%s: fewer samples than one global batch of %" PRId64,
                            t->cfg->data_paths[0], t->global_batch);
    if (!t->cfg->steps_set)
        return SR_TRAINER_END_OF_DATA;
    if ((rc = sr_reader_rewind(t->reader)))
        return rc;
    t->epoch++;
    rc = sr_reader_next(t->reader, b);
    if (rc == 1)
        sr_checkpoint_note_position(t, step);
    return rc == 1 ? SR_OK : rc;
}

/* The last copy out of host_batch has run, so the loader may refill it. */
static void host_batch_free(struct sr_trainer *t)
{
    sr_dev_event_sync(t->dev, t->batch_copied);
}

int sr_trainer_load_into(struct sr_trainer *t, int64_t step, struct sr_batch *b)
{
    if (t->pool_n && t->pool_ready) {
        if (t->dev->host_immediate)
            copy_host_batch(b, &t->pool[(step - 1) % t->pool_n]);
        return SR_OK; /* else the step copies its pool entry (sr_trainer_pool_batch) */
    }
    int rc = produce(t, step, b);
    return rc ? rc : sr_batch_check_ids(b, t->feature_rows, t->feature_policy);
}

/* Re-lay a partial batch of Bv samples as a full batch of B: lengths move from
 * stride Bv to stride B (highest feature first, so nothing is overwritten
 * before it moves), the padding gets empty bags, zero dense features and
 * label -1. */
static void pad_batch(struct sr_batch *b, int B)
{
    int Bv = b->batch_size, F = b->kjt.num_keys;
    if (Bv == B)
        return;
    for (int f = F - 1; f >= 0; f--) {
        memmove(b->kjt.lengths + (size_t)f * B, b->kjt.lengths + (size_t)f * Bv,
                sizeof(int32_t) * (size_t)Bv);
        memset(b->kjt.lengths + (size_t)f * B + Bv, 0, sizeof(int32_t) * (size_t)(B - Bv));
    }
    memset(b->dense + (size_t)Bv * b->num_dense, 0,
           sizeof(float) * (size_t)(B - Bv) * b->num_dense);
    for (int i = Bv; i < B; i++)
        b->labels[i] = -1.0f;
    b->kjt.stride = B;
    b->batch_size = B;
    SR_ASSERT(sr_kjt_compute_offsets(&b->kjt) == SR_OK);
}

/* Evaluation batch g of this rank into host_batch, padded to B. */
static int produce_eval(struct sr_trainer *t, int64_t g)
{
    int B = t->cfg->batch_size;
    struct sr_batch *b = &t->host_batch;
    if (t->eval_reader) {
        int rc = sr_reader_next(t->eval_reader, b);
        if (rc != 1)
            return rc < 0 ? rc : sr_error_set(SR_ERR_DATA, "--eval-data changed while training");
        pad_batch(b, B);
        return SR_OK;
    }
    int64_t first = g * t->global_batch + (int64_t)t->rank * B;
    int64_t valid = t->cfg->eval_samples - first;
    sr_synth_fill(t->synth, SR_SYNTH_EVAL_BASE + first, B, b);
    for (int64_t i = valid < 0 ? 0 : valid; i < B; i++)
        b->labels[i] = -1.0f;
    return SR_OK;
}

int sr_trainer_load_eval_batch(struct sr_trainer *t, int64_t g)
{
    t->copy_src = &t->host_batch;
    host_batch_free(t);
    int rc = produce_eval(t, g);
    return rc ? rc : sr_batch_check_ids(&t->host_batch, t->feature_rows, t->feature_policy);
}

/* The copy is issued on the step's one stream (the compute stream, NULL, for
 * now) and not waited for: the stages after it are ordered after it on that
 * stream, and the embedding layer reads nothing of the twin on the host (the
 * per-feature id counts travel as host metadata, kjt.length_per_key). An
 * event recorded after it tells the loader when host_batch may be refilled
 * (host_batch_free). A copy stream whose event the compute stream waits for
 * comes with the pipeline. */
void sr_trainer_copy_batch(struct sr_trainer *t)
{
    sr_batch_copy(&t->batch, t->copy_src, NULL);
    sr_dev_event_record(t->dev, t->batch_copied, NULL);
}
