/*
 * The device twin of the loader's pinned host batch, and the copy stage's
 * work: the used part of the host batch sent to the twin on a stream (see
 * batch.h for when the twin aliases the host batch instead).
 */
#include <string.h>

#include "data/batch_internal.h"
#include "shardrec/error.h"

/* Fill a new device twin with 0xFF bytes: never plausible data before a copy. */
static void poison_twin(struct sr_batch *t)
{
    struct sr_batch_sizes z =
        sr_batch_capacity_bytes(t->max_batch, t->num_dense, t->kjt.num_keys, t->max_values);
    sr_dev_memset(t->dev, t->dense, 0xFF, z.dense, NULL);
    sr_dev_memset(t->dev, t->labels, 0xFF, z.labels, NULL);
    sr_dev_memset(t->dev, t->kjt.lengths, 0xFF, z.lengths, NULL);
    sr_dev_memset(t->dev, t->kjt.offsets, 0xFF, z.offsets, NULL);
    sr_dev_memset(t->dev, t->kjt.values, 0xFF, z.values, NULL);
    if (t->kjt.weights)
        sr_dev_memset(t->dev, t->kjt.weights, 0xFF, z.weights, NULL);
    sr_dev_sync(t->dev, NULL);
}

void sr_batch_init_twin(struct sr_batch *twin, const struct sr_batch *host)
{
    SR_ASSERT(host->memory == SR_BATCH_PINNED && host->dev);
    if (host->dev->host_immediate) {
        *twin = *host;
        twin->memory = SR_BATCH_ALIAS;
        return;
    }
    sr_batch_init_in(twin, SR_BATCH_DEVICE, host->dev, host->max_batch, host->num_dense,
                     host->kjt.num_keys, host->max_values, host->kjt.weights != NULL,
                     host->kjt.keys);
    poison_twin(twin);
}

static void take_sizes(struct sr_batch *twin, const struct sr_batch *host)
{
    twin->batch_size = host->batch_size;
    twin->first_index = host->first_index;
    twin->kjt.stride = host->kjt.stride;
    twin->kjt.num_values = host->kjt.num_values;
    twin->kjt.num_weights = host->kjt.num_weights;
    if (twin->kjt.length_per_key != host->kjt.length_per_key) /* host metadata, not tensor data */
        memcpy(twin->kjt.length_per_key, host->kjt.length_per_key,
               sizeof(int64_t) * (size_t)host->kjt.num_keys);
}

void sr_batch_copy(struct sr_batch *twin, const struct sr_batch *host, sr_stream_t s)
{
    SR_ASSERT(host->memory == SR_BATCH_PINNED && twin->dev == host->dev &&
              twin->max_batch == host->max_batch && twin->max_values == host->max_values &&
              twin->num_dense == host->num_dense && twin->kjt.num_keys == host->kjt.num_keys &&
              (twin->kjt.weights != NULL) == (host->kjt.weights != NULL));
    SR_ASSERT(host->batch_size <= host->max_batch && host->kjt.stride <= host->max_batch &&
              host->kjt.num_values <= host->max_values);
    take_sizes(twin, host);
    if (twin->memory == SR_BATCH_ALIAS) {
        SR_ASSERT(twin->kjt.values == host->kjt.values);
        return;
    }
    SR_ASSERT(twin->memory == SR_BATCH_DEVICE);
    struct sr_device *dev = twin->dev;
    size_t B = (size_t)host->batch_size, bags = (size_t)host->kjt.num_keys * host->kjt.stride;
    size_t N = (size_t)host->kjt.num_values;
    sr_dev_copy(dev, twin->dense, host->dense, sizeof(float) * B * (size_t)host->num_dense, s);
    sr_dev_copy(dev, twin->labels, host->labels, sizeof(float) * B, s);
    sr_dev_copy(dev, twin->kjt.lengths, host->kjt.lengths, sizeof(int32_t) * bags, s);
    sr_dev_copy(dev, twin->kjt.offsets, host->kjt.offsets, sizeof(int64_t) * (bags + 1), s);
    sr_dev_copy(dev, twin->kjt.values, host->kjt.values, sizeof(int64_t) * N, s);
    if (host->kjt.weights)
        sr_dev_copy(dev, twin->kjt.weights, host->kjt.weights, sizeof(float) * N, s);
}
