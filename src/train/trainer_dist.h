/*
 * Ranks and the embedding stage (trainer_dist.c): communicators, the plan,
 * start-up checks that every rank runs the same job, the (sharded) EBC,
 * weights of a sharded model (written per rank, or gathered).
 */
#ifndef SHARDREC_TRAIN_TRAINER_DIST_H
#define SHARDREC_TRAIN_TRAINER_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/comm.h"
#include "shardrec/optim.h"

struct sr_trainer;

int sr_trainer_init_comms(struct sr_trainer *t);
/* The plan (--plan, --sharding, or the planner's), then the memory check;
 * collective (world): every rank returns an error when any refuses. */
int sr_trainer_init_plan(struct sr_trainer *t);
/* The world's ranks on this rank's host (its node: detected, or emulated by
 * --ranks-per-node), ascending, into `ranks` (room for the world size); their
 * count. */
int sr_trainer_host_ranks(const struct sr_trainer *t, int *ranks);
int sr_trainer_check_same(struct sr_trainer *t);
/* Collective (world): SR_OK when every rank's rc is; else this rank's own
 * error, or on a rank that succeeded SR_ERR_DATA "WHAT: rank R FAILED (its
 * message says why)" naming the lowest rank that failed. */
int sr_trainer_agree(struct sr_trainer *t, int rc, const char *what, const char *failed);
/* Collective (world): each feature's bound (t->feature_max_values) raised to
 * the largest any rank found: a rank's copy of --data may bound a feature
 * lower than another's, whose ids it would receive. */
void sr_trainer_agree_feature_bounds(struct sr_trainer *t);
void sr_trainer_free_comms(struct sr_trainer *t);
void sr_trainer_comm_snapshot(const struct sr_trainer *t, struct sr_comm_counters *out);
int sr_trainer_emb_init(struct sr_trainer *t, const struct sr_optim_config *opt);
int sr_trainer_emb_forward(struct sr_trainer *t);
float *sr_trainer_emb_dp_grads(struct sr_trainer *t, size_t *n);
void sr_trainer_emb_dp_update(struct sr_trainer *t, float lr, int64_t step, sr_stream_t stream);
void sr_trainer_emb_free(struct sr_trainer *t);
/* The hash of the job settings named `name` (a flag, as in the start-up
 * check's messages: "--embedding-dim"; "--table-rows" for the tables,
 * "features" for the features), for checkpoint manifests. */
struct sr_train_config;
uint64_t sr_trainer_setting_hash(const struct sr_train_config *cfg, const char *name);
/* --save-weights of a sharded model, collective (world): every rank writes
 * its own rows into the one file (weights_sharded.c); falls back to the
 * gathering writer when the ranks do not share rank 0's file system. */
int sr_trainer_save_sharded_weights(struct sr_trainer *t, const char *path);
/* The gathering writer: every table to rank 0, which writes the file. */
int sr_trainer_gather_save_weights(struct sr_trainer *t, const char *path);

#endif
