/*
 * Shared by batch.c (storage) and batch_twin.c (the device twin).
 */
#ifndef SHARDREC_DATA_BATCH_INTERNAL_H
#define SHARDREC_DATA_BATCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/batch.h"

/* Bytes of each array of a batch at capacity (at least one element each). */
struct sr_batch_sizes {
    size_t dense, labels, lengths, offsets, values, weights;
};
struct sr_batch_sizes sr_batch_capacity_bytes(int max_batch, int num_dense, int num_features,
                                              int64_t max_values);

/* Allocate b's arrays in memory m (of dev, for pinned and device memory). */
void sr_batch_init_in(struct sr_batch *b, enum sr_batch_memory m, struct sr_device *dev,
                      int max_batch, int num_dense, int num_features, int64_t max_values,
                      int with_weights, const char *const *keys);

#endif
