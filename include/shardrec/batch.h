/*
 * A batch of B samples as a reader yields it: dense features, labels and the
 * sparse KJT. The batch owns its arrays, sized once for the largest batch and
 * the most ids it can hold, so steady-state loading does not allocate.
 */
#ifndef SHARDREC_BATCH_H
#define SHARDREC_BATCH_H

#include <stdint.h>

#include "shardrec/kjt.h"

struct sr_batch {
    int batch_size;      /* B: valid samples in this batch */
    int num_dense;       /* 13 for Criteo-shaped data */
    float *dense;        /* (B, num_dense) host */
    float *labels;       /* (B) host, 0 or 1 */
    struct sr_kjt kjt;   /* over F features, stride B */
    int max_batch;       /* capacity in samples */
    int64_t max_values;  /* capacity in ids */
    int64_t first_index; /* global index of sample 0 (synthetic data) */
};

/* Allocate a batch for up to max_batch samples and max_values ids (with a
 * per-id weight array when with_weights). keys are borrowed (may be NULL). */
void sr_batch_init(struct sr_batch *b, int max_batch, int num_dense, int num_features,
                   int64_t max_values, int with_weights, const char *const *keys);
void sr_batch_free(struct sr_batch *b);

#endif
