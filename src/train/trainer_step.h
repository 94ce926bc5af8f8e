/*
 * The training step (trainer_step.c): one body at pipeline depth 0 or 1, its
 * ahead stages, pauses for evaluation, and the pipeline's state between
 * steps.
 */
#ifndef SHARDREC_TRAIN_TRAINER_STEP_H
#define SHARDREC_TRAIN_TRAINER_STEP_H

#include <stdint.h>

#include "shardrec/comm.h"
#include "shardrec/sharded_ebc.h"
#include "train/loader_thread.h"

struct sr_trainer;

/* The streams of a rank's step (DESIGN.md, "Execution model"): copy (host
 * to device), sparse (the embedding exchanges), compute (lookup, dense,
 * update: the device's own stream, NULL, which a graph captures) and dense
 * (the gradient buckets). Events order them; on the immediate CPU device
 * they are ordering no-ops. */
struct sr_step_streams {
    sr_stream_t copy, sparse, compute, dense;
};

/* The pipeline's state between steps (trainer_step.c). Batch i uses
 * batch context ctx[i % 2] and the ring slot the loader filled for it. */
struct sr_pipe {
    int depth; /* batches in flight ahead of the one training: 0 (--pipeline none) or 1 */
    struct sr_loader loader;
    struct sr_sharded_ebc_batch *ctx[2]; /* sharded: batch contexts */
    int started;
    struct sr_loader_slot *next; /* the next step's batch, when ahead */
    int ahead;                   /* next is copied, its input dist through data_start */
    int next_rc;                 /* its status: SR_OK, the end of the data, or an error */
    char next_msg[1024];         /* the error's message, kept for its step */
    struct sr_sharded_ebc_batch *in_flight;    /* a context with its data exchange in flight */
    struct sr_sharded_ebc_stats end_stats;     /* at the counts exchange that found an end */
    struct sr_comm_counters counts, uncounted; /* next's counts exchange; an end's, no step's */
    /* --cuda-graphs (one rank, the EBC in local mode): a graph of the step's compute
     * per ring slot, for the batch shape it was captured with */
    struct sr_step_graph {
        const struct sr_batch *twin; /* the slot's twin it reads */
        uint64_t shape;              /* hash of the batch's sizes and ids per feature */
        sr_graph_t graph;
    } graphs[SR_LOADER_SLOTS];
    float *loss_stage; /* (1) device: the graphed step's loss sum, then copied to the ring */
    sr_stream_t emb_stream;      /* the graphed step's embedding backward ... */
    sr_event_t emb_fork, emb_join; /* ... forked after the lookup (group_ids) and after
                                      dpooled, joined at the step's end */
    int64_t graph_steps; /* steps replayed from a graph */
    sr_event_t dpooled_ready; /* backward's dpooled, for the sparse stream's gradient dist */
};

/* The streams, the ring of batches, the batch contexts and graphs' state. */
int sr_trainer_pipeline_init(struct sr_trainer *t);
/* The batch contexts write t->pooled and read t->dpooled (sharded_ebc.h's
 * sr_sharded_ebc_batch_bind); after both are allocated, before the loop. */
void sr_trainer_pipeline_bind(struct sr_trainer *t);
/* Wait for everything issued on the step's streams (before freeing). */
void sr_trainer_streams_drain(struct sr_trainer *t);
/* One training step; SR_OK, SR_TRAINER_END_OF_DATA or an error status. */
int sr_trainer_step(struct sr_trainer *t, int64_t step);
/* Complete a data exchange in flight (before an evaluation); collective. */
void sr_trainer_pipeline_pause(struct sr_trainer *t);
void sr_trainer_pipeline_stop(struct sr_trainer *t);
void sr_trainer_pipeline_free(struct sr_trainer *t);
void sr_trainer_end_stats(const struct sr_trainer *t, struct sr_sharded_ebc_stats *out);
void sr_trainer_take_uncounted(struct sr_trainer *t, struct sr_comm_counters *out);

#endif
