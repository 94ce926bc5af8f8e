/*
 * Evaluation metrics over a whole evaluation set: exact AUC, log loss,
 * normalised entropy (NE), accuracy and the positive rate.
 *
 * AUC is exact: predictions are sorted (an LSD radix sort on their float bits),
 * and tied predictions share an averaged rank, so a positive-negative pair with
 * equal scores counts 1/2. No histogram or bucketing is ever used. Sums are
 * taken over fixed blocks in a fixed order, so results are bit-identical from
 * run to run and for any thread count.
 */
#ifndef SHARDREC_METRICS_H
#define SHARDREC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/synthetic.h"

struct sr_eval_metrics {
    int64_t n;            /* samples evaluated */
    double auc;           /* NaN if all labels are equal (AUC undefined) */
    double logloss;       /* mean binary cross-entropy, predictions clamped to [1e-7, 1-1e-7] */
    double ne;            /* logloss / entropy of positive_rate; NaN if that entropy is 0 */
    double accuracy;      /* share of samples with (pred >= 0.5) == label */
    double positive_rate; /* share of labels equal to 1 */
};

/* Bytes of workspace sr_metrics_compute and sr_metrics_auc need for n samples. */
size_t sr_metrics_workspace_bytes(int64_t n);

/* pred: (n) probabilities in [0,1]; labels: (n) each 0 or 1. work: caller-provided,
 * sr_metrics_workspace_bytes(n) bytes, 8-byte aligned; nothing is allocated.
 * Returns SR_ERR_NUMERIC if a prediction or label is NaN (naming the sample),
 * SR_ERR_INVALID_ARG if a label is neither 0 nor 1 or n < 0. With n = 0 every
 * field but n is NaN. Host memory; synchronous. */
int sr_metrics_compute(const float *pred, const float *labels, int64_t n, void *work,
                       struct sr_eval_metrics *out);

/* Exact AUC alone, of any finite scores (logits work as well as probabilities).
 * Same workspace, same errors; *auc is NaN if all labels are equal. */
int sr_metrics_auc(const float *score, const float *labels, int64_t n, void *work, double *auc);

/* Over synthetic samples first_index .. first_index+n-1 with their drawn
 * labels: the exact AUC of the teacher's own logit (the ceiling), the exact AUC
 * of ranking by the teacher's dense part alone (the floor: optimal among
 * dense-only predictors, because the ids are independent of the dense
 * features), and the share of the logit's variance carried by the sparse part,
 * var(sparse) / (var(sparse) + var(dense)). Any output pointer may be NULL.
 * Allocates O(n) temporary memory. AUCs are NaN if the range holds a single
 * class. */
void sr_synth_bounds(const struct sr_synth *s, int64_t first_index, int64_t n, double *teacher_auc,
                     double *dense_only_auc, double *sparse_var_share);

#endif
