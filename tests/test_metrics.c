/*
 * Evaluation metrics against independent float64 references: AUC against an
 * O(n^2) count over all positive-negative pairs (ties count 1/2) and against a
 * rank-sum over qsort with averaged ranks; log loss, NE and accuracy against
 * direct sums; NaN and non-binary inputs rejected.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/error.h"
#include "shardrec/metrics.h"
#include "shardrec/rng.h"

static void *workspace(int64_t n)
{
    return malloc(sr_metrics_workspace_bytes(n));
}

static double pairwise_auc(const float *p, const float *y, int64_t n)
{
    double num = 0.0, pairs = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (y[i] != 1.0f)
            continue;
        for (int64_t j = 0; j < n; j++) {
            if (y[j] != 0.0f)
                continue;
            pairs += 1.0;
            num += p[i] > p[j] ? 1.0 : (p[i] == p[j] ? 0.5 : 0.0);
        }
    }
    return num / pairs;
}

struct scored {
    float p;
    float y;
};

static int cmp_scored(const void *a, const void *b)
{
    float x = ((const struct scored *)a)->p, z = ((const struct scored *)b)->p;
    return (x > z) - (x < z);
}

/* Mann-Whitney U from the rank sum of positives, ties given averaged ranks. */
static double ranksum_auc(const float *p, const float *y, int64_t n)
{
    struct scored *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (struct scored){p[i], y[i]};
    qsort(v, (size_t)n, sizeof *v, cmp_scored);
    double rank_sum = 0.0, npos = 0.0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && v[j].p == v[i].p)
            j++;
        double avg_rank = 0.5 * (double)(i + 1 + j); /* ranks i+1 .. j */
        for (int64_t k = i; k < j; k++)
            if (v[k].y == 1.0f) {
                rank_sum += avg_rank;
                npos += 1.0;
            }
        i = j;
    }
    free(v);
    double nneg = (double)n - npos;
    return (rank_sum - npos * (npos + 1.0) / 2.0) / (npos * nneg);
}

/* Predictions on `levels` distinct values (many ties) correlated with labels. */
static void make_data(float *p, float *y, int64_t n, int levels, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        y[i] = sr_rng_uniform(seed, 1, (uint64_t)i) < 0.3 ? 1.0f : 0.0f;
        double u = sr_rng_uniform(seed, 2, (uint64_t)i) * 0.7 + 0.3 * y[i];
        p[i] = levels > 0 ? (float)(floor(u * levels) / levels) : (float)u;
    }
}

static void test_auc_matches_pairwise_with_ties(void **state)
{
    (void)state;
    int64_t n = 3000;
    float *p = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    void *work = workspace(n);
    int levels[] = {0, 2, 7, 50, 1000};
    for (int k = 0; k < 5; k++) {
        make_data(p, y, n, levels[k], 11 + k);
        struct sr_eval_metrics m;
        assert_int_equal(sr_metrics_compute(p, y, n, work, &m), SR_OK);
        double ref = pairwise_auc(p, y, n);
        assert_true(fabs(m.auc - ref) < 1e-12);
    }
    free(work);
    free(p);
    free(y);
}

static void test_auc_large_matches_ranksum(void **state)
{
    (void)state;
    int64_t n = 300000;
    float *p = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    void *work = workspace(n);
    int levels[] = {0, 100, 65536};
    for (int k = 0; k < 3; k++) {
        make_data(p, y, n, levels[k], 21 + k);
        double auc;
        assert_int_equal(sr_metrics_auc(p, y, n, work, &auc), SR_OK);
        assert_true(fabs(auc - ranksum_auc(p, y, n)) < 1e-10);
    }
    free(work);
    free(p);
    free(y);
}

static void test_auc_edge_cases(void **state)
{
    (void)state;
    float y[6] = {0, 0, 1, 1, 0, 1};
    float up[6] = {0.1f, 0.2f, 0.8f, 0.9f, 0.3f, 0.7f};
    float down[6] = {0.9f, 0.8f, 0.2f, 0.1f, 0.7f, 0.3f};
    float flat[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    float logits[6] = {-3.0f, -0.0f, 0.0f, 2.0f, -1.0f, 1e30f}; /* -0 ties +0 */
    float ones[3] = {1, 1, 1};
    void *work = workspace(6);
    double auc;
    assert_int_equal(sr_metrics_auc(up, y, 6, work, &auc), SR_OK);
    assert_true(auc == 1.0);
    assert_int_equal(sr_metrics_auc(down, y, 6, work, &auc), SR_OK);
    assert_true(auc == 0.0);
    assert_int_equal(sr_metrics_auc(flat, y, 6, work, &auc), SR_OK);
    assert_true(auc == 0.5);
    assert_int_equal(sr_metrics_auc(logits, y, 6, work, &auc), SR_OK);
    assert_true(fabs(auc - pairwise_auc(logits, y, 6)) < 1e-15);
    assert_int_equal(sr_metrics_auc(up, ones, 3, work, &auc), SR_OK);
    assert_true(isnan(auc));
    free(work);
}

static void test_logloss_ne_accuracy(void **state)
{
    (void)state;
    int64_t n = 10007;
    float *p = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    make_data(p, y, n, 0, 5);
    p[0] = 0.0f; /* clamped to 1e-7 */
    p[1] = 1.0f;
    p[2] = 0.5f; /* counts as predicting 1 */
    void *work = workspace(n);
    struct sr_eval_metrics m;
    assert_int_equal(sr_metrics_compute(p, y, n, work, &m), SR_OK);
    double loss = 0.0, correct = 0.0, pos = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double q = fmin(fmax((double)p[i], 1e-7), 1.0 - 1e-7);
        loss += y[i] == 1.0f ? -log(q) : -log(1.0 - q);
        correct += ((p[i] >= 0.5f) ? 1.0f : 0.0f) == y[i];
        pos += y[i];
    }
    double rate = pos / n;
    double h = -(rate * log(rate) + (1 - rate) * log(1 - rate));
    assert_int_equal(m.n, n);
    assert_true(fabs(m.logloss - loss / n) < 1e-12);
    assert_true(fabs(m.ne - loss / n / h) < 1e-12);
    assert_true(m.accuracy == correct / n);
    assert_true(m.positive_rate == rate);
    assert_true(fabs(m.auc - ranksum_auc(p, y, n)) < 1e-12);
    free(work);
    free(p);
    free(y);
}

static void test_rejects_bad_inputs(void **state)
{
    (void)state;
    float p[4] = {0.1f, 0.2f, 0.3f, 0.4f}, y[4] = {0, 1, 0, 1};
    void *work = workspace(4);
    struct sr_eval_metrics m;
    p[2] = NAN;
    assert_int_equal(sr_metrics_compute(p, y, 4, work, &m), SR_ERR_NUMERIC);
    assert_non_null(strstr(sr_error_message(), "sample 2"));
    p[2] = 0.3f;
    y[1] = 0.5f;
    assert_int_equal(sr_metrics_compute(p, y, 4, work, &m), SR_ERR_INVALID_ARG);
    y[1] = NAN;
    assert_int_equal(sr_metrics_compute(p, y, 4, work, &m), SR_ERR_NUMERIC);
    assert_int_equal(sr_metrics_compute(p, y, 0, work, &m), SR_OK);
    assert_true(m.n == 0 && isnan(m.auc) && isnan(m.logloss));
    free(work);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auc_matches_pairwise_with_ties),
        cmocka_unit_test(test_auc_large_matches_ranksum),
        cmocka_unit_test(test_auc_edge_cases),
        cmocka_unit_test(test_logloss_ne_accuracy),
        cmocka_unit_test(test_rejects_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
