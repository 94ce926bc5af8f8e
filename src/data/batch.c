/*
 * Batch storage: one allocation per array, sized for the largest batch, so
 * readers refill a batch without allocating, in ordinary host memory, a
 * device's pinned host memory or its device memory; and the loader's KJT
 * check. The device twin and the copy stage's work are in batch_twin.c.
 *
 * The arrays of a batch, each allocated on its own (capacity in brackets):
 *
 *   dense   [max_batch * num_dense] float     labels  [max_batch] float
 *   lengths [max_batch * F] int32             offsets [max_batch * F + 1] int64
 *   values  [max_values] int64                weights [max_values] float, or none
 *
 * and the KJT's length_per_key [F] int64, always in ordinary host memory.
 */
#include <string.h>

#include "data/batch_internal.h"
#include "shardrec/alloc.h"

struct sr_batch_sizes sr_batch_capacity_bytes(int max_batch, int num_dense, int num_features,
                                              int64_t max_values)
{
    size_t B = (size_t)max_batch, N = (size_t)(max_values ? max_values : 1);
    return (struct sr_batch_sizes){.dense = sizeof(float) * B * (size_t)(num_dense ? num_dense : 1),
                                   .labels = sizeof(float) * B,
                                   .lengths = sizeof(int32_t) * B * (size_t)num_features,
                                   .offsets = sizeof(int64_t) * (B * (size_t)num_features + 1),
                                   .values = sizeof(int64_t) * N,
                                   .weights = sizeof(float) * N};
}

/* Pinned and device memory through the device's own table (device.h), so
 * that this file links without the device layer (the readers' fuzz targets). */
static void *alloc_in(enum sr_batch_memory m, struct sr_device *dev, size_t bytes)
{
    if (m == SR_BATCH_PINNED)
        return dev->mem->alloc_host(dev, bytes);
    if (m == SR_BATCH_DEVICE) {
        const char *outer = sr_alloc_label_set("the batch's device copy (grows with the batch "
                                               "size and the ids per sample)");
        void *p = dev->mem->alloc(dev, bytes);
        sr_alloc_label_set(outer);
        return p;
    }
    return sr_aligned_alloc(bytes);
}

static void free_in(enum sr_batch_memory m, struct sr_device *dev, void *p)
{
    if (!p || m == SR_BATCH_ALIAS)
        return;
    if (m == SR_BATCH_PINNED)
        dev->mem->free_host(dev, p);
    else if (m == SR_BATCH_DEVICE)
        dev->mem->free(dev, p);
    else
        sr_free(p);
}

void sr_batch_init_in(struct sr_batch *b, enum sr_batch_memory m, struct sr_device *dev,
                      int max_batch, int num_dense, int num_features, int64_t max_values,
                      int with_weights, const char *const *keys)
{
    struct sr_batch_sizes z =
        sr_batch_capacity_bytes(max_batch, num_dense, num_features, max_values);
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
    b->kjt.length_per_key = sr_calloc(num_features ? (size_t)num_features : 1, sizeof(int64_t));
}

void sr_batch_init(struct sr_batch *b, int max_batch, int num_dense, int num_features,
                   int64_t max_values, int with_weights, const char *const *keys)
{
    sr_batch_init_in(b, SR_BATCH_HOST, NULL, max_batch, num_dense, num_features, max_values,
                     with_weights, keys);
}

void sr_batch_init_pinned(struct sr_batch *b, struct sr_device *dev, int max_batch, int num_dense,
                          int num_features, int64_t max_values, int with_weights,
                          const char *const *keys)
{
    sr_batch_init_in(b, SR_BATCH_PINNED, dev, max_batch, num_dense, num_features, max_values,
                     with_weights, keys);
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
    if (b->memory != SR_BATCH_ALIAS)
        sr_free(b->kjt.length_per_key); /* host memory whatever the arrays' */
    memset(b, 0, sizeof *b);
}

int sr_batch_check_ids(struct sr_batch *b, const int64_t *rows, const enum sr_id_policy *policy)
{
    int rc = sr_kjt_validate(&b->kjt);
    if (!rc)
        rc = sr_kjt_apply_id_policy(&b->kjt, rows, policy);
    if (!rc)
        sr_kjt_fill_length_per_key(&b->kjt);
    return rc;
}
