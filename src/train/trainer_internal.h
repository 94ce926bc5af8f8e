/*
 * The trainer's state, shared by its parts:
 *   trainer.c         construction, one training step, the loop
 *   trainer_pipeline.c  the pipelined step (--pipeline sparse-dist)
 *   loader_thread.c   its loader thread and ring of batches
 *   trainer_batch.c   the load and copy stages: host batch, checks, device twin
 *   trainer_dist.c    communicators, the plan, the (sharded) embedding stage
 *   trainer_eval.c    evaluation: padded global batches, gathered predictions
 *   trainer_report.c  log lines, metrics lines, the summary
 *   trace_file.c      --trace: clock alignment across ranks, the merged file
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
#include "train/device_spans.h"
#include "train/grad_buckets.h"
#include "train/loss_ring.h"
#include "train/step_scalars.h"
#include "train/loader_thread.h"

/* The pipeline's state between steps (trainer_pipeline.c). Batch i uses
 * batch context ctx[i % 2] and the ring slot the loader filled for it. */
struct sr_pipe {
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
    sr_stream_t copy_stream; /* the batches' host-to-device copies */
    /* --cuda-graphs (one rank, the plain EBC): a graph of the step's compute
     * per ring slot, for the batch shape it was captured with */
    struct sr_step_graph {
        const struct sr_batch *twin; /* the slot's twin it reads */
        uint64_t shape;              /* hash of the batch's sizes and ids per feature */
        sr_graph_t graph;
    } graphs[SR_LOADER_SLOTS];
    float *loss_stage; /* (1) device: the graphed step's loss sum, then copied to the ring */
    sr_stream_t emb_stream;      /* the graphed step's embedding backward ... */
    sr_event_t emb_fork, emb_join; /* ... forked after dpooled, joined at the step's end */
    int64_t graph_steps; /* steps replayed from a graph */
};

struct sr_trainer {
    struct sr_train_config *cfg;
    FILE *log;     /* rank 0 only; NULL elsewhere */
    FILE *metrics; /* rank 0 only */
    int progress;
    struct sr_device *dev;
    /* ranks */
    sr_comm_t world;  /* startup checks, evaluation gathers */
    sr_comm_t sparse; /* embedding input/output dist */
    sr_comm_t node;   /* my node's ranks (TWRW) */
    sr_comm_t cross;  /* my local rank on every node (TWRW) */
    sr_comm_t dense;  /* dense gradient buckets */
    int rank, world_size;
    int64_t global_batch; /* G = W * B */
    struct sr_plan *plan; /* NULL: one rank, unsharded EBC */
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
    struct sr_pipe pipe; /* --pipeline sparse-dist */
    /* the loader's id policy: E and policy of each feature's table (F), set by init_data */
    int64_t feature_rows[SR_MAX_FEATURES];
    enum sr_id_policy feature_policy[SR_MAX_FEATURES];
    /* model */
    struct sr_ebc *ebc;          /* one rank without a plan */
    struct sr_sharded_ebc *sebc; /* otherwise */
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
    /* evaluation */
    int64_t eval_batches; /* global evaluation batches per pass */
    float *eval_pred;     /* (eval_batches*B) pinned host: this rank's probabilities */
    float *eval_labels;   /* (eval_batches*B) host: 0/1, or -1 for padding */
    float *eval_pred_all; /* (W*eval_batches*B) host: gathered */
    float *eval_labels_all;
    void *eval_work;
    double teacher_auc, dense_only_auc, sparse_share;
    struct sr_eval_metrics last_eval;
    /* accounting */
    struct sr_comm_counters train_comm; /* collectives of training steps only */
    int64_t *step_ns;   /* (step_rows, SR_SPAN_COUNT) per-step stage times, ns */
    int64_t step_rows;  /* rows reserved: min(--steps, SR_STEP_ROWS_MAX) */
    int64_t step_kept;  /* rows filled */
    int64_t step_seen;  /* steps offered (a reservoir sample beyond step_rows) */
    uint64_t reservoir; /* its generator state (never touches the model's) */
    /* host waits of training (steps and loss reads): stream syncs, event waits */
    uint64_t train_syncs[2];
    /* --trace (trace_file.c) */
    int tracing;
    int64_t trace_first, trace_last; /* the recorded steps */
    int64_t *clock_offset_ns;        /* (W) rank 0: each rank's trace clock minus rank 0's */
    int64_t *clock_uncertainty_ns;   /* (W) rank 0: half the best round trip */
    double span_cost_ns;             /* one begin/end pair, measured at start-up */
    uint64_t trace_spans;            /* rank 0: spans this rank recorded */
    int trace_written;
    struct sr_device_spans *dspans;  /* device spans (NULL on the immediate CPU device) */
};

#define SR_STEP_ROWS_MAX       65536 /* per-step stage rows kept for percentiles */
#define SR_TRAINER_END_OF_DATA 1     /* a load's "one pass over --data is done" */

/* trainer_dist.c */
int sr_trainer_init_comms(struct sr_trainer *t);
/* t->dev from --device and --math (trainer.c); called by init_comms once the
 * rank is known, before the communicators are bound to the device. */
int sr_trainer_select_device(struct sr_trainer *t);
/* --batch-pool: make the pool's batches (trainer_batch.c); after init_data. */
int sr_trainer_pool_init(struct sr_trainer *t);
/* The host batch step s copies from: its pool entry, or NULL without a pool. */
const struct sr_batch *sr_trainer_pool_batch(const struct sr_trainer *t, int64_t step);
int sr_trainer_init_plan(struct sr_trainer *t);
/* The loader thread's OpenMP threads: --loader-threads, else on a GPU this
 * rank's share of the cores it sees (divided among the ranks of the host that
 * may see the same ones) but two, else 1. */
int sr_trainer_loader_threads(const struct sr_trainer *t);
int sr_trainer_check_same(struct sr_trainer *t);
void sr_trainer_free_comms(struct sr_trainer *t);
void sr_trainer_comm_snapshot(const struct sr_trainer *t, struct sr_comm_counters *out);
int sr_trainer_emb_init(struct sr_trainer *t, const struct sr_optim_config *opt);
int sr_trainer_emb_forward(struct sr_trainer *t);
void sr_trainer_emb_backward(struct sr_trainer *t, float lr, int64_t step);
float *sr_trainer_emb_dp_grads(struct sr_trainer *t, size_t *n);
void sr_trainer_emb_dp_update(struct sr_trainer *t, float lr, int64_t step);
void sr_trainer_emb_free(struct sr_trainer *t);
int sr_trainer_save_sharded_weights(struct sr_trainer *t, const char *path);

/* trainer.c */
const struct sr_step_scalars *sr_trainer_put_step_scalars(struct sr_trainer *t, int64_t step);
/* As sr_trainer_optimizer_step, the global loss sum going to loss_dst (a
 * fixed device float) instead of the loss ring's next slot. */
void sr_trainer_optimizer_step_to(struct sr_trainer *t, int64_t step, const float *loss_sum,
                                  const struct sr_step_scalars *scalars, float *loss_dst);
void sr_trainer_optimizer_step(struct sr_trainer *t, int64_t step, const float *loss_sum,
                               const struct sr_step_scalars *scalars);

/* trainer_pipeline.c */
int sr_trainer_pipeline_init(struct sr_trainer *t);
int sr_trainer_pipeline_step(struct sr_trainer *t, int64_t step);
void sr_trainer_pipeline_pause(struct sr_trainer *t);
void sr_trainer_pipeline_stop(struct sr_trainer *t);
void sr_trainer_pipeline_free(struct sr_trainer *t);
void sr_trainer_end_stats(const struct sr_trainer *t, struct sr_sharded_ebc_stats *out);
void sr_trainer_take_uncounted(struct sr_trainer *t, struct sr_comm_counters *out);
/* acc += after - before, field by field (uint64 fields wrap, so a before
 * above after subtracts). */
void sr_trainer_counters_add_diff(struct sr_comm_counters *acc,
                                  const struct sr_comm_counters *after,
                                  const struct sr_comm_counters *before);

/* trainer_batch.c */
void sr_trainer_batch_init(struct sr_trainer *t, int64_t max_values, int with_weights,
                           const char *const *keys);
void sr_trainer_batch_free(struct sr_trainer *t);
int sr_trainer_load_batch(struct sr_trainer *t, int64_t step);
int sr_trainer_load_into(struct sr_trainer *t, int64_t step, struct sr_batch *b);
int sr_trainer_load_eval_batch(struct sr_trainer *t, int64_t g);
void sr_trainer_copy_batch(struct sr_trainer *t);

/* trainer_eval.c */
int sr_trainer_init_eval(struct sr_trainer *t);
void sr_trainer_free_eval(struct sr_trainer *t);

/* trainer_report.c */
struct sr_interval {
    int64_t steps;
    double seconds;
    double loss_sum;
};
void sr_trainer_log_interval(struct sr_trainer *t, int64_t step, double loss,
                             const struct sr_interval *iv, int evaluated, double elapsed);

double sr_now_s(void);

/* trace_file.c */
int sr_trainer_trace_init(struct sr_trainer *t);
int sr_trainer_trace_write(struct sr_trainer *t);
void sr_trainer_trace_free(struct sr_trainer *t);

#endif
