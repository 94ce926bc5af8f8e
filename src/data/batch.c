/*
 * Batch storage: one allocation per array, sized for the largest batch, so
 * readers refill a batch without allocating.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/batch.h"

void sr_batch_init(struct sr_batch *b, int max_batch, int num_dense, int num_features,
                   int64_t max_values, int with_weights, const char *const *keys)
{
    memset(b, 0, sizeof *b);
    b->max_batch = max_batch;
    b->max_values = max_values;
    b->num_dense = num_dense;
    b->dense = sr_aligned_alloc(sizeof(float) * (size_t)max_batch * (num_dense ? num_dense : 1));
    b->labels = sr_aligned_alloc(sizeof(float) * (size_t)max_batch);
    b->kjt.num_keys = num_features;
    b->kjt.keys = keys;
    b->kjt.lengths = sr_aligned_alloc(sizeof(int32_t) * (size_t)max_batch * num_features);
    b->kjt.offsets = sr_aligned_alloc(sizeof(int64_t) * ((size_t)max_batch * num_features + 1));
    b->kjt.values = sr_aligned_alloc(sizeof(int64_t) * (size_t)(max_values ? max_values : 1));
    b->kjt.weights = with_weights
                         ? sr_aligned_alloc(sizeof(float) * (size_t)(max_values ? max_values : 1))
                         : NULL;
}

void sr_batch_free(struct sr_batch *b)
{
    if (!b)
        return;
    sr_free(b->dense);
    sr_free(b->labels);
    sr_free(b->kjt.lengths);
    sr_free(b->kjt.offsets);
    sr_free(b->kjt.values);
    sr_free(b->kjt.weights);
    memset(b, 0, sizeof *b);
}
