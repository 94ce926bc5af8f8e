/*
 * Evaluation (trainer_eval.c): padded global batches through the forward,
 * predictions gathered for an exact AUC; the synthetic teacher's bounds.
 */
#ifndef SHARDREC_TRAIN_TRAINER_EVAL_H
#define SHARDREC_TRAIN_TRAINER_EVAL_H

#include <stdint.h>

#include "shardrec/metrics.h"

struct sr_trainer;

struct sr_trainer_eval {
    int64_t batches;  /* global evaluation batches per pass */
    float *pred;      /* (batches*B) pinned host: this rank's probabilities */
    float *labels;    /* (batches*B) host: 0/1, or -1 for padding */
    float *pred_all;  /* (W*batches*B) host: gathered, in data order (the real samples first) */
    float *labels_all;
    int64_t n;        /* the real samples of the last evaluation */
    void *work;
    double teacher_auc, dense_only_auc, sparse_share; /* the synthetic data's bounds */
    struct sr_eval_metrics last;
};

int sr_trainer_init_eval(struct sr_trainer *t);
void sr_trainer_free_eval(struct sr_trainer *t);

#endif
