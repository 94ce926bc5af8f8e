/*
 * Evaluation metrics: exact AUC by sorting, log loss, NE, accuracy.
 *
 * AUC. Each sample becomes one 64-bit word, (order-preserving float key << 32
 * | label), sorted by its key with a stable LSD radix sort (three passes of 11,
 * 11 and 10 bits; a pass whose digit is the same for every word is skipped).
 * A walk over runs of equal keys then counts, for every positive, the
 * negatives strictly below it plus half of those tied with it:
 *
 *   AUC = sum over runs (pos_run * (neg_below + neg_run / 2)) / (P * N)
 *
 * which is the Mann-Whitney statistic with averaged ranks for ties.
 *
 * Workspace layout (sr_metrics_workspace_bytes):
 *   keys   (n) uint64   the words to sort
 *   tmp    (n) uint64   the radix sort's other buffer
 *   part   (3, nblocks) double   per-block sums of log loss, correct, positives
 *
 * Sums run over fixed blocks of METRICS_BLOCK samples, then over the blocks in
 * order, so the result does not depend on the number of threads.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/metrics.h"

#define METRICS_BLOCK 4096
#define METRICS_EPS   1e-7
#define RADIX_BITS    11
#define RADIX_SIZE    (1 << RADIX_BITS)

static int64_t num_blocks(int64_t n)
{
    return (n + METRICS_BLOCK - 1) / METRICS_BLOCK;
}

size_t sr_metrics_workspace_bytes(int64_t n)
{
    if (n < 0)
        n = 0;
    return sizeof(uint64_t) * 2 * (size_t)n + sizeof(double) * 3 * (size_t)num_blocks(n) + 64;
}

/* A 32-bit key whose unsigned order is the float order (-0 and +0 equal). */
static uint32_t float_key(float x)
{
    uint32_t bits;
    if (x == 0.0f)
        x = 0.0f;
    memcpy(&bits, &x, sizeof bits);
    return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

static int check_inputs(const float *score, const float *labels, int64_t n)
{
    if (n < 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "metrics: negative sample count %" PRId64, n);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(score[i]))
            return sr_error_set(SR_ERR_NUMERIC,
                                "metrics: prediction of sample %" PRId64
                                " is NaN; HINT: the model diverged, lower --lr",
                                i);
        if (isnan(labels[i]))
            return sr_error_set(SR_ERR_NUMERIC, "metrics: label of sample %" PRId64 " is NaN", i);
        if (labels[i] != 0.0f && labels[i] != 1.0f)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "metrics: label of sample %" PRId64 " is %g, not 0 or 1", i,
                                (double)labels[i]);
    }
    return SR_OK;
}

/* One stable counting pass on the digit at bit `shift`; returns 0 if skipped. */
static int radix_pass(const uint64_t *src, uint64_t *dst, int64_t n, int shift)
{
    int64_t count[RADIX_SIZE] = {0};
    for (int64_t i = 0; i < n; i++)
        count[(src[i] >> shift) & (RADIX_SIZE - 1)]++;
    for (int d = 0; d < RADIX_SIZE; d++)
        if (count[d] == n)
            return 0;
    int64_t pos = 0;
    for (int d = 0; d < RADIX_SIZE; d++) {
        int64_t c = count[d];
        count[d] = pos;
        pos += c;
    }
    for (int64_t i = 0; i < n; i++)
        dst[count[(src[i] >> shift) & (RADIX_SIZE - 1)]++] = src[i];
    return 1;
}

/* Sort keys by their upper 32 bits; returns the buffer holding the result. */
static uint64_t *radix_sort_high(uint64_t *keys, uint64_t *tmp, int64_t n)
{
    static const int shifts[] = {32, 32 + RADIX_BITS, 32 + 2 * RADIX_BITS};
    for (int p = 0; p < 3; p++) {
        if (radix_pass(keys, tmp, n, shifts[p])) {
            uint64_t *t = keys;
            keys = tmp;
            tmp = t;
        }
    }
    return keys;
}

static double auc_of_sorted(const uint64_t *w, int64_t n)
{
    double num = 0.0, neg_below = 0.0, pos_total = 0.0;
    int64_t i = 0;
    while (i < n) {
        uint64_t key = w[i] >> 32;
        double pos = 0.0, neg = 0.0;
        for (; i < n && (w[i] >> 32) == key; i++) {
            if (w[i] & 1)
                pos += 1.0;
            else
                neg += 1.0;
        }
        num += pos * (neg_below + 0.5 * neg);
        neg_below += neg;
        pos_total += pos;
    }
    if (pos_total == 0.0 || neg_below == 0.0)
        return NAN;
    return num / (pos_total * neg_below);
}

static double auc_unchecked(const float *score, const float *labels, int64_t n, void *work)
{
    uint64_t *keys = work, *tmp = keys + n;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        keys[i] = (uint64_t)float_key(score[i]) << 32 | (labels[i] != 0.0f);
    return auc_of_sorted(radix_sort_high(keys, tmp, n), n);
}

int sr_metrics_auc(const float *score, const float *labels, int64_t n, void *work, double *auc)
{
    int rc = check_inputs(score, labels, n);
    if (rc)
        return rc;
    *auc = auc_unchecked(score, labels, n, work);
    return SR_OK;
}

/* Per-block sums of BCE, correct predictions and positives. */
static void block_sums(const float *pred, const float *labels, int64_t n, double *part)
{
    int64_t nb = num_blocks(n);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nb; k++) {
        int64_t end = (k + 1) * METRICS_BLOCK < n ? (k + 1) * METRICS_BLOCK : n;
        double loss = 0.0, correct = 0.0, pos = 0.0;
        for (int64_t i = k * METRICS_BLOCK; i < end; i++) {
            double p = fmin(fmax((double)pred[i], METRICS_EPS), 1.0 - METRICS_EPS);
            int y = labels[i] != 0.0f;
            loss -= y ? log(p) : log1p(-p);
            correct += (pred[i] >= 0.5f) == y;
            pos += y;
        }
        part[k] = loss;
        part[nb + k] = correct;
        part[2 * nb + k] = pos;
    }
}

int sr_metrics_compute(const float *pred, const float *labels, int64_t n, void *work,
                       struct sr_eval_metrics *out)
{
    int rc = check_inputs(pred, labels, n);
    if (rc)
        return rc;
    out->n = n;
    if (n == 0) {
        out->auc = out->logloss = out->ne = out->accuracy = out->positive_rate = NAN;
        return SR_OK;
    }
    int64_t nb = num_blocks(n);
    double *part = (double *)((uint64_t *)work + 2 * n);
    block_sums(pred, labels, n, part);
    double loss = 0.0, correct = 0.0, pos = 0.0;
    for (int64_t k = 0; k < nb; k++) {
        loss += part[k];
        correct += part[nb + k];
        pos += part[2 * nb + k];
    }
    double rate = pos / (double)n;
    double entropy =
        rate > 0.0 && rate < 1.0 ? -(rate * log(rate) + (1.0 - rate) * log1p(-rate)) : 0.0;
    out->logloss = loss / (double)n;
    out->ne = entropy > 0.0 ? out->logloss / entropy : NAN;
    out->accuracy = correct / (double)n;
    out->positive_rate = rate;
    out->auc = auc_unchecked(pred, labels, n, work);
    return SR_OK;
}

/* Variance of x (n) with a serial sum, so the result does not depend on threads. */
static double variance(const float *x, int64_t n)
{
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++)
        sq += ((double)x[i] - mean) * ((double)x[i] - mean);
    return sq / (double)n;
}

void sr_synth_bounds(const struct sr_synth *s, int64_t first_index, int64_t n, double *teacher_auc,
                     double *dense_only_auc, double *sparse_var_share)
{
    size_t cap = (size_t)(n ? n : 1);
    float *logit = sr_malloc(sizeof(float) * cap);
    float *dense = sr_malloc(sizeof(float) * cap);
    float *sparse = sr_malloc(sizeof(float) * cap);
    float *labels = sr_malloc(sizeof(float) * cap);
    void *work = sr_aligned_alloc(sr_metrics_workspace_bytes(n));
    sr_synth_teacher_parts(s, first_index, n, logit, dense, sparse, labels);
    double auc = NAN;
    if (teacher_auc) {
        SR_ASSERT(sr_metrics_auc(logit, labels, n, work, &auc) == SR_OK);
        *teacher_auc = auc;
    }
    if (dense_only_auc) {
        SR_ASSERT(sr_metrics_auc(dense, labels, n, work, &auc) == SR_OK);
        *dense_only_auc = auc;
    }
    if (sparse_var_share) {
        double vd = n ? variance(dense, n) : 0.0, vs = n ? variance(sparse, n) : 0.0;
        *sparse_var_share = vd + vs > 0.0 ? vs / (vd + vs) : NAN;
    }
    sr_free(work);
    sr_free(labels);
    sr_free(sparse);
    sr_free(dense);
    sr_free(logit);
}
