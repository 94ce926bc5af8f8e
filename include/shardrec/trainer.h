/*
 * The trainer: builds the model, data source and optimizers from a job
 * description and runs the training loop (one step: load -> embedding lookup
 * -> dense forward -> loss/backward -> sparse update -> dense update), with
 * periodic evaluation, progress, per-step metrics and a final summary.
 *
 * All buffers are sized at init; after the first step the loop allocates
 * nothing (sr_trainer_result.allocs_after_first_step proves it).
 */
#ifndef SHARDREC_TRAINER_H
#define SHARDREC_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "shardrec/metrics.h"
#include "shardrec/train_config.h"

struct sr_trainer;

struct sr_trainer_result {
    int64_t steps;        /* steps run */
    double train_seconds; /* wall time of the training steps (eval excluded) */
    double samples_per_s; /* training throughput */
    /* Steady state: the steps after the warm-up (the first fifth, at most 20),
     * timed as one block by device events after the warm-up and after the
     * last step (no wait in between); 0 when too few. */
    int64_t steady_first, steady_steps;
    double steady_seconds;
    double last_loss;                 /* mean training loss of the last step */
    struct sr_eval_metrics eval;      /* final evaluation (n = 0 if none) */
    double teacher_auc;               /* synthetic data: AUC ceiling on the eval split */
    double dense_only_auc;            /* synthetic data: dense-only floor */
    uint64_t allocs_after_first_step; /* must be 0 */
};

/* Build everything for cfg (checked with sr_train_config_check). Errors are the
 * user's: a bad config or file. `out` receives progress and summary text
 * (stderr in the CLI); NULL silences it. */
int sr_trainer_init(struct sr_trainer **out, struct sr_train_config *cfg, FILE *log);
/* Run cfg->steps steps with evaluation and logging; fill res. Returns
 * SR_ERR_NUMERIC if the loss becomes NaN or infinite (naming the step). With
 * cfg->trace_path, every rank records the steps trace_first..trace_last and
 * the run ends by writing the merged trace on rank 0 (collective; SR_ERR_IO
 * if the file cannot be written). */
int sr_trainer_run(struct sr_trainer *t, struct sr_trainer_result *res);
/* Evaluate on the held-back split now (--eval-data, or --eval-samples
 * synthetic samples); collective. With cfg->eval_only and a progress line,
 * rank 0 shows the batches done. */
int sr_trainer_evaluate(struct sr_trainer *t, struct sr_eval_metrics *out);
/* After sr_trainer_evaluate, on every rank: the probabilities and labels (0
 * or 1) of the samples it evaluated, in the data's order (the files' order of
 * their good samples; synthetic: sample index order); returns their count.
 * Owned by the trainer, valid until the next evaluation. */
int64_t sr_trainer_eval_predictions(const struct sr_trainer *t, const float **prob,
                                    const float **labels);
/* Synthetic held-back samples: the AUC of the hidden teacher's logit (the
 * ceiling) and of its dense part alone (the floor); NaN with --eval-data. */
void sr_trainer_eval_bounds(const struct sr_trainer *t, double *teacher_auc,
                            double *dense_only_auc);
void sr_trainer_free(struct sr_trainer *t);
/* This process's rank (0 on one rank). */
int sr_trainer_rank(const struct sr_trainer *t);
/* The end-of-run summary: throughput, per-stage mean/p50/p99 (shardrec/trace.h
 * stage names), communication busy/overlapped/exposed, collectives and bytes
 * per step intra/inter node, time waited on data, the trace's cost, final
 * eval metrics beside the synthetic data's ceiling and floor, loop
 * allocations. */
void sr_trainer_print_summary(const struct sr_trainer *t, const struct sr_trainer_result *res,
                              FILE *f);

/* Replace every model parameter with the tensors of a safetensors file, or
 * write them to one (atomically); names, checks and errors as in
 * weights_io.h. Load after sr_trainer_init and before sr_trainer_run
 * (--init-weights); save after sr_trainer_run (--save-weights). */
int sr_trainer_load_weights(struct sr_trainer *t, const char *path);
int sr_trainer_save_weights(struct sr_trainer *t, const char *path);

#endif
