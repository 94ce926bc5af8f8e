/*
 * CPU ops of hybrid tables (device/ops_sparse_dist.h, struct
 * sr_sparse_dist_hybrid): the split of a KJT into cold and hot features, and
 * the row copies between a hot-row replica and its table's shards.
 *
 * hybrid_split, in three passes over the F features of `in`:
 *
 *   1. per bag: its cold and hot counts (lengths of feature f and of hot
 *      feature F + hot_of[f]) and the bag's full length, for both
 *   2. offsets: the prefix sum of the lengths, on one thread
 *   3. per bag: its ids to the cold bag or the hot bag, in their order
 *
 * A hot id is found by binary search in its table's ascending hot rows.
 * Threads split features with a static schedule, and every output element
 * has one writer: the same bits on any thread count.
 */
#include <string.h>

#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_sparse_dist.h"

#define MIN_PAR 4096 /* below this many ids a loop runs on one thread */

/* Index of v in rows[0 .. n) (ascending), or -1. */
static int64_t find_hot(const int64_t *rows, int64_t n, int64_t v)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && rows[lo] == v ? lo : -1;
}

/* Pass 1 for feature f: the lengths of its bags and of its hot bags. */
static void count_feature(const struct sr_sparse_dist_hybrid *h,
                          const struct sr_sparse_dist_kjt *in, int f, int32_t *lengths,
                          int32_t *full)
{
    const int B = h->batch, k = h->hot_of[f];
    const int32_t *len = in->lengths + (size_t)f * B;
    memcpy(full + (size_t)f * B, len, sizeof(int32_t) * B);
    if (k < 0) {
        memcpy(lengths + (size_t)f * B, len, sizeof(int32_t) * B);
        return;
    }
    const size_t hk = (size_t)(h->num_features + k) * B;
    memcpy(full + hk, len, sizeof(int32_t) * B);
    const int64_t *rows = h->hot + h->hot_begin[k], n = h->num_hot[k];
    int64_t i = in->offsets[(size_t)f * B];
    for (int b = 0; b < B; b++) {
        int32_t hot = 0;
        for (int32_t j = 0; j < len[b]; j++, i++)
            hot += find_hot(rows, n, in->values[i]) >= 0;
        lengths[hk + b] = hot;
        lengths[(size_t)f * B + b] = len[b] - hot;
    }
}

/* Pass 3 for feature f: its ids into their bags. */
static void place_feature(const struct sr_sparse_dist_hybrid *h,
                          const struct sr_sparse_dist_kjt *in, int f, const int64_t *offsets,
                          int64_t *values, float *weights)
{
    const int B = h->batch, k = h->hot_of[f];
    const int64_t first = in->offsets[(size_t)f * B], end = in->offsets[(size_t)(f + 1) * B];
    const float *w = in->weights;
    if (k < 0) {
        const int64_t to = offsets[(size_t)f * B];
        memcpy(values + to, in->values + first, sizeof(int64_t) * (size_t)(end - first));
        if (w)
            memcpy(weights + to, w + first, sizeof(float) * (size_t)(end - first));
        return;
    }
    const size_t hk = (size_t)(h->num_features + k) * B;
    const int64_t *rows = h->hot + h->hot_begin[k], n = h->num_hot[k];
    int64_t i = first;
    for (int b = 0; b < B; b++) {
        int64_t cold = offsets[(size_t)f * B + b], hot = offsets[hk + b];
        for (; i < in->offsets[(size_t)f * B + b + 1]; i++) {
            const int64_t v = in->values[i], at = find_hot(rows, n, v);
            const int64_t to = at >= 0 ? hot++ : cold++;
            values[to] = at >= 0 ? at : v;
            if (w)
                weights[to] = w[i];
        }
    }
}

void sr_cpu_hybrid_split(struct sr_device *dev, const struct sr_sparse_dist_hybrid *h,
                         const struct sr_sparse_dist_kjt *in, int32_t *lengths, int32_t *full,
                         int64_t *offsets, int64_t *values, float *weights, sr_stream_t s)
{
    const int F = h->num_features;
    const size_t bags = SR_HYB_BAGS(h);
#pragma omp parallel for schedule(static) if (in->num_values > MIN_PAR)
    for (int f = 0; f < F; f++)
        count_feature(h, in, f, lengths, full);
    offsets[0] = 0;
    for (size_t i = 0; i < bags; i++)
        offsets[i + 1] = offsets[i] + lengths[i];
    SR_ASSERT(offsets[bags] == in->num_values);
#pragma omp parallel for schedule(static) if (in->num_values > MIN_PAR)
    for (int f = 0; f < F; f++)
        place_feature(h, in, f, offsets, values, weights);
}

void sr_cpu_rows_copy(struct sr_device *dev, int scatter, const int64_t *idx, int64_t n,
                      int64_t width, const float *src, int64_t src_rows, float *dst,
                      int64_t dst_rows, sr_stream_t s)
{
    for (int64_t k = 0; k < n; k++) {
        const int64_t from = scatter ? k : idx[k], to = scatter ? idx[k] : k;
        SR_ASSERT(from >= 0 && from < src_rows && to >= 0 && to < dst_rows);
        memcpy(dst + to * width, src + from * width, sizeof(float) * (size_t)width);
    }
}
