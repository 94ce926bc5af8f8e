/*
 * The load and copy stages (trainer_batch.c): host batches, their checks,
 * device twins, the --batch-pool.
 */
#ifndef SHARDREC_TRAIN_TRAINER_BATCH_H
#define SHARDREC_TRAIN_TRAINER_BATCH_H

#include <stdint.h>

#include "shardrec/batch.h"

struct sr_trainer;

void sr_trainer_batch_init(struct sr_trainer *t, int64_t max_values, int with_weights,
                           const char *const *keys);
void sr_trainer_batch_free(struct sr_trainer *t);
/* --batch-pool: make the pool's batches; after init_data. */
int sr_trainer_pool_init(struct sr_trainer *t);
/* The host batch step s copies from: its pool entry, or NULL without a pool. */
const struct sr_batch *sr_trainer_pool_batch(const struct sr_trainer *t, int64_t step);
int sr_trainer_load_into(struct sr_trainer *t, int64_t step, struct sr_batch *b);
int sr_trainer_load_eval_batch(struct sr_trainer *t, int64_t g);
void sr_trainer_copy_batch(struct sr_trainer *t);

#endif
