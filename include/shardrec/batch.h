/*
 * A batch of B samples as a reader yields it: dense features, labels and the
 * sparse KJT. The batch owns its arrays, sized once for the largest batch and
 * the most ids it can hold, so steady-state loading does not allocate.
 *
 * The trainer keeps two batches of the same capacity (src/train/trainer_batch.c):
 *
 *   host batch  pinned host memory of the device (sr_batch_init_pinned): the
 *               loader fills it, checks its KJT and applies the id policy
 *               (sr_batch_check_ids)
 *   twin        device memory (sr_batch_init_twin): the copy stage fills it
 *               (sr_batch_copy), forward reads it
 *
 * The twin aliases the host batch (no memory, no copy) exactly when the
 * device's ops run on host memory and have completed when their call returns
 * (dev->host_immediate: the immediate CPU device). Everywhere else, the
 * deferred CPU device included, it is memory of its own, so a read of the twin
 * before its copy has run sees the device's poison (or stale data), as it
 * would race on a GPU.
 */
#ifndef SHARDREC_BATCH_H
#define SHARDREC_BATCH_H

#include <stdint.h>

#include "shardrec/device.h"
#include "shardrec/kjt.h"

/* Where a batch's arrays live, and so how sr_batch_free returns them. */
enum sr_batch_memory {
    SR_BATCH_HOST = 0, /* sr_batch_init: ordinary host memory */
    SR_BATCH_PINNED,   /* sr_batch_init_pinned: dev's pinned host memory */
    SR_BATCH_DEVICE,   /* sr_batch_init_twin: dev's memory */
    SR_BATCH_ALIAS,    /* sr_batch_init_twin on a host_immediate device: the host batch's */
};

struct sr_batch {
    int batch_size;      /* B: valid samples in this batch */
    int num_dense;       /* 13 for Criteo-shaped data */
    float *dense;        /* (B, num_dense) see memory */
    float *labels;       /* (B) see memory; 0 or 1 (-1: evaluation padding) */
    struct sr_kjt kjt;   /* over F features, stride B; arrays as memory says */
    int max_batch;       /* capacity in samples */
    int64_t max_values;  /* capacity in ids */
    int64_t first_index; /* global index of sample 0 (synthetic data) */
    enum sr_batch_memory memory;
    struct sr_device *dev; /* the device of pinned, device and alias memory; else NULL */
};

/* Allocate a batch for up to max_batch samples and max_values ids (with a
 * per-id weight array when with_weights) in ordinary host memory. keys are
 * borrowed (may be NULL). */
void sr_batch_init(struct sr_batch *b, int max_batch, int num_dense, int num_features,
                   int64_t max_values, int with_weights, const char *const *keys);

/* As sr_batch_init, in dev's pinned host memory (sr_dev_alloc_host): the
 * loader's batch, which the copy stage sends to the device. */
void sr_batch_init_pinned(struct sr_batch *b, struct sr_device *dev, int max_batch, int num_dense,
                          int num_features, int64_t max_values, int with_weights,
                          const char *const *keys);

/* The device twin of host (a pinned batch of dev): the same capacity, weights
 * and keys, in dev's memory (sr_dev_alloc), or, when dev->host_immediate,
 * views of host's own arrays (SR_BATCH_ALIAS: nothing is allocated and
 * sr_batch_copy moves no bytes). A twin in device memory starts filled with
 * 0xFF bytes (NaN, -1), so reading it before a copy never yields plausible
 * data. host must outlive an aliasing twin. */
void sr_batch_init_twin(struct sr_batch *twin, const struct sr_batch *host);

/* Returns b's arrays where they came from and zeroes b; NULL, or a zeroed
 * batch, is a no-op. An aliasing twin frees nothing. */
void sr_batch_free(struct sr_batch *b);

/* The loader's check of a freshly filled batch, on the host: the KJT's
 * structure (sr_kjt_validate), then each feature's id policy
 * (sr_kjt_apply_id_policy with rows and policy, (F) arrays; under the hash
 * policy values are rewritten in place). Returns their SR_ERR_DATA, with
 * their messages, naming feature and sample. Does not allocate. */
int sr_batch_check_ids(struct sr_batch *b, const int64_t *rows, const enum sr_id_policy *policy);

/* The copy stage's work: send host's used part (dense and labels of its
 * batch_size samples, F * stride lengths, F * stride + 1 offsets, num_values
 * ids and weights) to twin on stream s, and set twin's sizes (batch_size,
 * stride, num_values, num_weights, first_index) on the host at once.
 * Stream-ordered: work issued on s afterwards may read the twin, the host
 * only after a sync; host must not be refilled before the copy has run. An
 * aliasing twin takes the sizes only. Aborts if twin is not host's twin.
 * Does not allocate. */
void sr_batch_copy(struct sr_batch *twin, const struct sr_batch *host, sr_stream_t s);

#endif
