/*
 * CPU ops of the compact cold-row exchange of hybrid tables
 * (device/ops_sparse_dist.h, struct sr_sparse_dist_compact): a bag's pooled
 * row, or its gradient, travels between its sample's rank and an owner only
 * when the bag holds ids in the owner's block.
 *
 *   compact_counts    per owner and hybrid feature, my bags with ids there
 *   compact_owner     the owner's rows of every source's such bags <-> the
 *                     exchange buffer, regions by source, k-major, b order
 *   compact_samples   the exchange buffer <-> the (B, out_dim) block at the
 *                     samples' rank: forward, each row is the sum over the
 *                     owners, rank ascending, of what they sent for it
 *
 * The loops run on one thread, in the buffer's order: every element has
 * one writer, and a sum is taken in one fixed order (the same bits on any
 * thread count and rerun).
 */
#include <string.h>

#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_sparse_dist.h"

void sr_cpu_compact_counts(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                           const int32_t *lens, int num_slots, int64_t *ne, sr_stream_t s)
{
    const int B = c->batch, n = c->num_features;
    for (int r = 0; r < c->world; r++)
        for (int k = 0; k < n; k++) {
            const int32_t *len = lens + (size_t)(c->slot0[k] + r) * B;
            int64_t m = 0;
            for (int b = 0; b < B; b++)
                m += len[b] > 0;
            ne[(size_t)r * n + k] = m;
        }
}

void sr_cpu_compact_owner(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                          const int64_t *offsets, float *rows, float *buf, int64_t words, int pack,
                          sr_stream_t s)
{
    const int B = c->batch, W = c->world, n = c->num_features, out = c->out_dim;
    int64_t at = 0;
    for (int src = 0; src < W; src++)
        for (int k = 0; k < n; k++)
            for (int b = 0; b < B; b++) {
                const size_t bag = ((size_t)k * W + src) * B + b;
                if (offsets[bag + 1] == offsets[bag])
                    continue;
                float *row = rows + ((size_t)src * B + b) * out + c->gcol[k];
                const size_t bytes = sizeof(float) * (size_t)c->cols[k];
                SR_ASSERT(at + c->cols[k] <= words);
                memcpy(pack ? buf + at : row, pack ? row : buf + at, bytes);
                at += c->cols[k];
            }
    SR_ASSERT(at == words);
}

void sr_cpu_compact_samples(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                            const int32_t *lens, int num_slots, float *block, float *buf,
                            int64_t words, int pack, sr_stream_t s)
{
    const int B = c->batch, n = c->num_features, out = c->out_dim;
    if (!pack)
        memset(block, 0, sizeof(float) * (size_t)B * out);
    int64_t at = 0;
    for (int r = 0; r < c->world; r++)
        for (int k = 0; k < n; k++) {
            const int32_t *len = lens + (size_t)(c->slot0[k] + r) * B;
            for (int b = 0; b < B; b++) {
                if (len[b] == 0)
                    continue;
                float *row = block + (size_t)b * out + c->gcol[k];
                SR_ASSERT(at + c->cols[k] <= words);
                for (int j = 0; j < c->cols[k]; j++) {
                    if (pack)
                        buf[at + j] = row[j];
                    else
                        row[j] += buf[at + j];
                }
                at += c->cols[k];
            }
        }
    SR_ASSERT(at == words);
}
