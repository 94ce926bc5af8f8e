/*
 * The trainer's state. Each part owns its header (its functions, and its
 * own state where it has some, embedded here); the parts call only parts
 * below them:
 *
 *   trainer.c         construction, the loop            (calls all below)
 *   trainer_step.c    the one step body, depth 0 or 1   -> batch, dist, report
 *   trainer_eval.c    evaluation                        -> batch, dist
 *   trainer_report.c  accounting, log lines, summary
 *   trace_file.c      --trace: clocks, device spans, the merged file
 *   trainer_batch.c   load and copy stages              -> device
 *   trainer_dist.c    communicators, plan, embedding    -> device
 *   trainer_device.c  the rank's device, loader threads
 *
 * and the helpers they use: loader_thread.c (the ring of batches),
 * grad_buckets.c, loss_ring.c, step_scalars.c, device_spans.c.
 */
#ifndef SHARDREC_TRAINER_INTERNAL_H
#define SHARDREC_TRAINER_INTERNAL_H

#include <stdio.h>

#include "shardrec/batch.h"
#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/plan.h"
#include "shardrec/reader.h"
#include "shardrec/sharded_ebc.h"
#include "shardrec/synthetic.h"
#include "shardrec/trace.h"
#include "shardrec/trainer.h"
#include "train/checkpoint.h"
#include "train/grad_buckets.h"
#include "train/loss_ring.h"
#include "train/step_scalars.h"
#include "train/trace_file.h"
#include "train/trainer_batch.h"
#include "train/trainer_device.h"
#include "train/trainer_dist.h"
#include "train/trainer_eval.h"
#include "train/trainer_report.h"
#include "train/trainer_planner.h"
#include "train/trainer_step.h"

struct sr_trainer {
    struct sr_train_config *cfg;
    FILE *log;     /* rank 0 only; NULL elsewhere */
    FILE *metrics; /* rank 0 only */
    int metrics_errno; /* the first failed write to --metrics (no more lines after it); 0 */
    int progress;
    struct sr_device *dev;
    /* ranks */
    sr_comm_t world;  /* startup checks, evaluation gathers */
    sr_comm_t sparse; /* embedding output dist and gradient dist */
    sr_comm_t input;  /* embedding input dist (counts and ids) */
    sr_comm_t node;   /* my node's ranks (TWRW) */
    sr_comm_t cross;  /* my local rank on every node (TWRW) */
    sr_comm_t dense;  /* dense gradient buckets */
    int rank, world_size;
    int64_t global_batch; /* G = W * B */
    struct sr_plan *plan; /* --plan, --sharding, the default; one rank: tw */
    /* data */
    struct sr_synth *synth;
    struct sr_reader *reader;      /* --data, or NULL */
    struct sr_reader *eval_reader; /* --eval-data, or NULL */
    int64_t epoch;
    /* this rank's B samples: host_batch in pinned host memory, which the
     * loader fills and checks; batch, its device twin, which forward and
     * backward read (it aliases host_batch on the immediate CPU device) */
    struct sr_batch host_batch, batch;
    sr_event_t batch_copied; /* recorded after the copy out of host_batch */
    /* --batch-pool N: N pinned host batches made at start-up (steps 1..N);
     * step s trains on pool[(s - 1) % N], copied to the twin each step. */
    struct sr_batch *pool;
    int pool_n;
    int pool_ready; /* the pool is made: loads take from it */
    const struct sr_batch *copy_src; /* what sr_trainer_copy_batch copies */
    struct sr_step_streams streams; /* trainer_step.c */
    struct sr_pipe pipe;            /* the ring, contexts, batch i+1's state */
    /* the loader's id policy: E and policy of each feature's table (F), set by init_data */
    int64_t feature_rows[SR_MAX_FEATURES];
    int64_t feature_max_values[SR_MAX_FEATURES]; /* most ids of feature f in a batch: the
                                                    embeddings' exchange is sized by them */
    enum sr_id_policy feature_policy[SR_MAX_FEATURES];
    /* model */
    struct sr_sharded_ebc *sebc; /* every run; one rank without a plan: tw, local mode */
    struct sr_dlrm *dlrm;
    struct sr_dense_optim *dense_optim;
    struct sr_grad_buckets *buckets;
    struct sr_lr_schedule lr_dense, lr_emb;
    int pooled_dim; /* F*D */
    float *pooled;  /* (B, F*D) device */
    float *dpooled; /* (B, F*D) device */
    float *logits;  /* (B) device */
    /* the step's scalars and losses on the device (step_scalars.h, loss_ring.h) */
    struct sr_step_scalars_buf scalars; /* lr and step, copied to the device each step */
    struct sr_loss_ring losses;         /* global loss sums not yet read by the host */
    int64_t log_every;                  /* rank 0's log interval, on every rank */
    struct sr_trainer_eval eval;   /* trainer_eval.c */
    struct sr_trainer_acct acct;   /* trainer.c's counts, trainer_report.c's summary */
    struct sr_trainer_trace trace; /* trace_file.c */
    struct sr_trainer_ckpt ckpt;   /* checkpoint.c: the first step, the saves' allocations */
    struct sr_trainer_prediction predicted; /* trainer_planner.c */
};

#define SR_STEP_ROWS_MAX       65536 /* per-step stage rows kept for percentiles */
#define SR_TRAINER_END_OF_DATA 1     /* a load's "one pass over --data is done" */

#endif
