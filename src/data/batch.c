/*
 * Batch storage: one allocation per array, sized for the largest batch, so
 * readers refill a batch without allocating; the loader's pinned host batch,
 * its device twin and the copy between them; the loader's KJT check.
 *
 * The arrays of a batch, each allocated on its own (capacity in brackets):
 *
 *   dense   [max_batch * num_dense] float     labels  [max_batch] float
 *   lengths [max_batch * F] int32             offsets [max_batch * F + 1] int64
 *   values  [max_values] int64                weights [max_values] float, or none
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/batch.h"
#include "shardrec/error.h"

/* Bytes of each array at capacity (at least one element each). */
struct batch_sizes {
    size_t dense, labels, lengths, offsets, values, weights;
};

static struct batch_sizes capacity_bytes(int max_batch, int num_dense, int num_features,
                                         int64_t max_values)
{
    size_t B = (size_t)max_batch, N = (size_t)(max_values ? max_values : 1);
    return (struct batch_sizes){.dense = sizeof(float) * B * (size_t)(num_dense ? num_dense : 1),
                                .labels = sizeof(float) * B,
                                .lengths = sizeof(int32_t) * B * (size_t)num_features,
                                .offsets = sizeof(int64_t) * (B * (size_t)num_features + 1),
                                .values = sizeof(int64_t) * N,
                                .weights = sizeof(float) * N};
}

static void *alloc_in(enum sr_batch_memory m, struct sr_device *dev, size_t bytes)
{
    if (m == SR_BATCH_PINNED)
        return sr_dev_alloc_host(dev, bytes);
    if (m == SR_BATCH_DEVICE)
        return sr_dev_alloc(dev, bytes);
    return sr_aligned_alloc(bytes);
}

static void free_in(enum sr_batch_memory m, struct sr_device *dev, void *p)
{
    if (m == SR_BATCH_PINNED)
        sr_dev_free_host(dev, p);
    else if (m == SR_BATCH_DEVICE)
        sr_dev_free(dev, p);
    else if (m == SR_BATCH_HOST)
        sr_free(p);
}

static void init_in(struct sr_batch *b, enum sr_batch_memory m, struct sr_device *dev,
                    int max_batch, int num_dense, int num_features, int64_t max_values,
                    int with_weights, const char *const *keys)
{
    struct batch_sizes z = capacity_bytes(max_batch, num_dense, num_features, max_values);
    memset(b, 0, sizeof *b);
    b->memory = m;
    b->dev = dev;
    b->max_batch = max_batch;
    b->max_values = max_values;
    b->num_dense = num_dense;
    b->dense = alloc_in(m, dev, z.dense);
    b->labels = alloc_in(m, dev, z.labels);
    b->kjt.num_keys = num_features;
    b->kjt.keys = keys;
    b->kjt.lengths = alloc_in(m, dev, z.lengths);
    b->kjt.offsets = alloc_in(m, dev, z.offsets);
    b->kjt.values = alloc_in(m, dev, z.values);
    b->kjt.weights = with_weights ? alloc_in(m, dev, z.weights) : NULL;
}

void sr_batch_init(struct sr_batch *b, int max_batch, int num_dense, int num_features,
                   int64_t max_values, int with_weights, const char *const *keys)
{
    init_in(b, SR_BATCH_HOST, NULL, max_batch, num_dense, num_features, max_values, with_weights,
            keys);
}

void sr_batch_init_pinned(struct sr_batch *b, struct sr_device *dev, int max_batch, int num_dense,
                          int num_features, int64_t max_values, int with_weights,
                          const char *const *keys)
{
    init_in(b, SR_BATCH_PINNED, dev, max_batch, num_dense, num_features, max_values, with_weights,
            keys);
}

/* Fill a new device twin with 0xFF bytes: never plausible data before a copy. */
static void poison_twin(struct sr_batch *t)
{
    struct batch_sizes z =
        capacity_bytes(t->max_batch, t->num_dense, t->kjt.num_keys, t->max_values);
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
    init_in(twin, SR_BATCH_DEVICE, host->dev, host->max_batch, host->num_dense, host->kjt.num_keys,
            host->max_values, host->kjt.weights != NULL, host->kjt.keys);
    poison_twin(twin);
}

void sr_batch_free(struct sr_batch *b)
{
    if (!b)
        return;
    free_in(b->memory, b->dev, b->dense);
    free_in(b->memory, b->dev, b->labels);
    free_in(b->memory, b->dev, b->kjt.lengths);
    free_in(b->memory, b->dev, b->kjt.offsets);
    free_in(b->memory, b->dev, b->kjt.values);
    free_in(b->memory, b->dev, b->kjt.weights);
    memset(b, 0, sizeof *b);
}

int sr_batch_check_ids(struct sr_batch *b, const int64_t *rows, const enum sr_id_policy *policy)
{
    int rc = sr_kjt_validate(&b->kjt);
    return rc ? rc : sr_kjt_apply_id_policy(&b->kjt, rows, policy);
}

static void take_sizes(struct sr_batch *twin, const struct sr_batch *host)
{
    twin->batch_size = host->batch_size;
    twin->first_index = host->first_index;
    twin->kjt.stride = host->kjt.stride;
    twin->kjt.num_values = host->kjt.num_values;
    twin->kjt.num_weights = host->kjt.num_weights;
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
