/*
 * CPU sparse-dist ops: bucketize, pack and unpack of the input dist's
 * messages, the mean-pooling scales, and the output dist's column scatter and
 * gather (the contract and message layouts are in device/ops_sparse_dist.h).
 *
 * Scratch, the layout's work array (int64):
 *
 *   [ id_at (S) | w_at (S) ]   pack: next id word and next weight of each slot
 *   [ at (W, n + 2) ]          unpack: per source, the first id of each of my
 *                              slots in its id area, its region's first word,
 *                              and its id count
 *
 * Determinism: threads split features (bucketize, pack), (feature, source)
 * blocks (unpack) or samples (scatter, gather) with static schedules; every
 * output element has one writer, ids keep their KJT order within a slot, and
 * prefix sums run on one thread. Results do not depend on the thread count.
 */
#include <string.h>

#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_sparse_dist.h"

#define MIN_PAR 4096 /* below this many elements a loop runs on one thread */

static int nslots_of(const struct sr_sparse_dist_layout *l, int r)
{
    return (int)(l->count_displ[r + 1] - l->count_displ[r] - 1);
}

/* ---- bucketize --------------------------------------------------------------- */

/* lens rows of feature f's slots. */
static void bucketize_feature(const struct sr_sparse_dist_layout *l,
                              const struct sr_sparse_dist_kjt *kjt, int f, int32_t *lens)
{
    const int B = l->batch, nsh = l->num_shards[f];
    const int64_t blk = l->block[f];
    const int32_t *len = kjt->lengths + (size_t)f * B;
    int32_t *out = lens + (size_t)l->first_slot[f] * B;
    if (blk == 0) {
        for (int j = 0; j < nsh; j++)
            memcpy(out + (size_t)j * B, len, sizeof(int32_t) * B);
        return;
    }
    memset(out, 0, sizeof(int32_t) * nsh * B);
    const int64_t *v = kjt->values;
    int64_t i = kjt->offsets[(size_t)f * B];
    for (int b = 0; b < B; b++)
        for (int32_t k = 0; k < len[b]; k++, i++)
            out[(size_t)(v[i] / blk) * B + b]++;
}

static void cpu_bucketize(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                          const struct sr_sparse_dist_kjt *kjt, int64_t flags, int32_t *lens,
                          int64_t *counts, sr_stream_t s)
{
    const int B = l->batch, F = l->num_features, W = l->world;
    if (!kjt) {
        memset(lens, 0, sizeof(int32_t) * (size_t)l->num_slots * B);
    } else {
#pragma omp parallel for schedule(static) if ((int64_t)l->num_slots * B + kjt->num_values > MIN_PAR)
        for (int f = 0; f < F; f++)
            if (l->first_slot[f] >= 0)
                bucketize_feature(l, kjt, f, lens);
    }
    for (int r = 0; r < W; r++) {
        const int n = nslots_of(l, r);
        for (int p = 0; p < n; p++) {
            const int32_t *len = lens + (size_t)l->slot_at[(size_t)r * l->max_nslots + p] * B;
            int64_t sum = 0;
            for (int b = 0; b < B; b++)
                sum += len[b];
            counts[l->count_displ[r] + p] = sum;
        }
        counts[l->count_displ[r] + n] = flags;
    }
    for (int j = 0; j < l->num_dp; j++) {
        const size_t f = (size_t)l->dp_feature[j];
        counts[l->count_displ[W] + j] = kjt ? kjt->offsets[(f + 1) * B] - kjt->offsets[f * B] : 0;
    }
}

static void cpu_mean_scales(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                            const int32_t *lengths, float *scale, sr_stream_t s)
{
    const int B = l->batch;
    for (int f = 0; f < l->num_features; f++)
        for (int b = 0; b < B; b++) {
            const int32_t len = lengths[(size_t)f * B + b];
            scale[(size_t)f * B + b] = l->mean[f] && len > 0 ? 1.0f / (float)len : 1.0f;
        }
}

/* ---- pack ---------------------------------------------------------------------- */

/* Each destination's region: lengths copied in, id_at/w_at set for its slots.
 * Returns the words of the whole message. */
static int64_t pack_regions(const struct sr_sparse_dist_layout *l, const int32_t *lens,
                            const int64_t *counts, int has_w, int32_t *send)
{
    const int B = l->batch, S = l->num_slots;
    int64_t *id_at = l->work, *w_at = l->work + S;
    int64_t off = 0;
    for (int r = 0; r < l->world; r++) {
        const int n = nslots_of(l, r);
        const int64_t *c = counts + l->count_displ[r];
        int64_t ids = 0;
        for (int p = 0; p < n; p++)
            ids += c[p];
        int64_t id = off + (int64_t)n * B, w = id + ids * l->id_words;
        for (int p = 0; p < n; p++) {
            const int sl = l->slot_at[(size_t)r * l->max_nslots + p];
            memcpy(send + off + (int64_t)p * B, lens + (size_t)sl * B, sizeof(int32_t) * B);
            id_at[sl] = id;
            w_at[sl] = w;
            id += c[p] * l->id_words;
            w += c[p];
        }
        off += (int64_t)n * B + ids * (l->id_words + has_w);
    }
    return off;
}

static inline void put_id(const struct sr_sparse_dist_layout *l, int32_t *send, int sl, int64_t row,
                          const float *w)
{
    int64_t *id_at = l->work, *w_at = l->work + l->num_slots;
    const int64_t at = id_at[sl];
    send[at] = (int32_t)(uint32_t)row;
    if (l->id_words == 2)
        send[at + 1] = (int32_t)(uint32_t)((uint64_t)row >> 32);
    id_at[sl] = at + l->id_words;
    if (w)
        memcpy(&send[w_at[sl]++], w, sizeof(float));
}

/* Feature f's ids (and weights) into its slots' regions, bag by bag. */
static void pack_feature(const struct sr_sparse_dist_layout *l,
                         const struct sr_sparse_dist_kjt *kjt, int f, int32_t *send)
{
    const int B = l->batch, fs = l->first_slot[f];
    const int64_t lo = kjt->offsets[(size_t)f * B], hi = kjt->offsets[(size_t)(f + 1) * B];
    const int64_t blk = l->block[f];
    const int64_t *v = kjt->values;
    const float *wt = kjt->weights;
    if (blk == 0) {
        for (int j = 0; j < l->num_shards[f]; j++)
            for (int64_t i = lo; i < hi; i++)
                put_id(l, send, fs + j, v[i], wt ? &wt[i] : NULL);
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        const int64_t j = v[i] / blk;
        put_id(l, send, fs + (int)j, v[i] - j * blk, wt ? &wt[i] : NULL);
    }
}

/* The dp features' bags, as they are, into the dp batch. */
static void pack_dp(const struct sr_sparse_dist_layout *l, const struct sr_sparse_dist_kjt *kjt,
                    const struct sr_sparse_dist_batch *dp)
{
    const int B = l->batch;
    if (!dp) {
        SR_ASSERT(l->num_dp == 0);
        return;
    }
    SR_ASSERT(dp->num_features == l->num_dp && (dp->weights != NULL) == (kjt->weights != NULL));
    int64_t base = 0;
    for (int j = 0; j < l->num_dp; j++) {
        const size_t f = (size_t)l->dp_feature[j];
        const int64_t *off = kjt->offsets + f * B;
        const int64_t n = off[B] - off[0];
        for (int b = 0; b < B; b++)
            dp->offsets[(size_t)j * B + b] = base + off[b] - off[0];
        SR_ASSERT(base + n <= dp->num_values);
        memcpy(dp->values + base, kjt->values + off[0], sizeof(int64_t) * (size_t)n);
        if (dp->weights)
            memcpy(dp->weights + base, kjt->weights + off[0], sizeof(float) * (size_t)n);
        base += n;
    }
    dp->offsets[(size_t)l->num_dp * B] = base;
}

static void cpu_pack(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                     const struct sr_sparse_dist_kjt *kjt, const int32_t *lens,
                     const int64_t *counts, int32_t *send, int64_t send_words,
                     const struct sr_sparse_dist_batch *dp, sr_stream_t s)
{
    const int64_t words = pack_regions(l, lens, counts, kjt->weights != NULL, send);
    SR_ASSERT(words <= send_words);
#pragma omp parallel for schedule(static) if (kjt->num_values > MIN_PAR)
    for (int f = 0; f < l->num_features; f++)
        if (l->first_slot[f] >= 0)
            pack_feature(l, kjt, f, send);
    pack_dp(l, kjt, dp);
}

/* ---- unpack ---------------------------------------------------------------------- */

/* at (W, n + 2): per source, its ids' starts per slot, region start, id count.
 * Returns the words of all regions. */
static int64_t unpack_regions(const struct sr_sparse_dist_layout *l, const int64_t *counts)
{
    const int n = l->nslots_here, B = l->batch;
    int64_t *at = l->work + 2 * (int64_t)l->num_slots;
    int64_t off = 0;
    for (int src = 0; src < l->world; src++) {
        const int64_t *c = counts + (size_t)src * (n + 1);
        int64_t *a = at + (size_t)src * (n + 2), ids = 0;
        for (int p = 0; p < n; p++) {
            a[p] = ids;
            ids += c[p];
        }
        a[n] = off;
        a[n + 1] = ids;
        const int w = (c[n] & SR_SPARSE_DIST_WEIGHTS) != 0;
        off += (int64_t)n * B + ids * (l->id_words + w);
    }
    return off;
}

/* Ids and weights of (my slot p, source src) into bags [k0, k0 + B) of g. */
static void unpack_block(const struct sr_sparse_dist_layout *l, const int32_t *recv,
                         const int64_t *counts, const struct sr_sparse_dist_batch *g, int p,
                         int src, int64_t k0)
{
    const int n = l->nslots_here;
    const int64_t *a = l->work + 2 * (int64_t)l->num_slots + (size_t)src * (n + 2);
    const int32_t *region = recv + a[n] + (int64_t)n * l->batch;
    const int32_t *ids = region + a[p] * l->id_words;
    const int64_t dst = g->offsets[k0], cnt = g->offsets[k0 + l->batch] - dst;
    if (l->id_words == 1)
        for (int64_t i = 0; i < cnt; i++)
            g->values[dst + i] = (int64_t)(uint32_t)ids[i];
    else
        for (int64_t i = 0; i < cnt; i++)
            g->values[dst + i] = (int64_t)((uint64_t)(uint32_t)ids[2 * i] |
                                           (uint64_t)(uint32_t)ids[2 * i + 1] << 32);
    if (!g->weights)
        return;
    if (counts[(size_t)src * (n + 1) + n] & SR_SPARSE_DIST_WEIGHTS)
        memcpy(g->weights + dst, region + a[n + 1] * l->id_words + a[p], sizeof(float) * cnt);
    else
        for (int64_t i = 0; i < cnt; i++)
            g->weights[dst + i] = 1.0f;
}

static void unpack_batch(const struct sr_sparse_dist_layout *l, const int32_t *recv,
                         const int64_t *counts, const struct sr_sparse_dist_batch *g)
{
    const int n = l->nslots_here, B = l->batch, W = l->world, F = g->num_features;
    const int64_t *at = l->work + 2 * (int64_t)l->num_slots;
    const int64_t blocks = (int64_t)F * W, nbags = (int64_t)F * g->batch;
    /* lengths into offsets[k + 1], then their prefix sum */
#pragma omp parallel for schedule(static) if (nbags > MIN_PAR)
    for (int64_t q = 0; q < blocks; q++) {
        const int j = (int)(q / W), src = (int)(q % W);
        const int32_t *len = recv + at[(size_t)src * (n + 2) + n] + (int64_t)g->pos[j] * B;
        for (int b = 0; b < B; b++)
            g->offsets[1 + (int64_t)j * g->batch + g->row_of[src] + b] = len[b];
    }
    g->offsets[0] = 0;
    for (int64_t k = 0; k < nbags; k++)
        g->offsets[k + 1] += g->offsets[k];
    SR_ASSERT(g->offsets[nbags] <= g->num_values);
#pragma omp parallel for schedule(static) if (g->offsets[nbags] > MIN_PAR)
    for (int64_t q = 0; q < blocks; q++) {
        const int j = (int)(q / W), src = (int)(q % W);
        unpack_block(l, recv, counts, g, g->pos[j], src, (int64_t)j * g->batch + g->row_of[src]);
    }
}

static void cpu_unpack(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                       const int32_t *recv, int64_t recv_words, const int64_t *counts_recv,
                       const struct sr_sparse_dist_batch *batches, int num_batches, sr_stream_t s)
{
    const int64_t words = unpack_regions(l, counts_recv);
    SR_ASSERT(words <= recv_words);
    for (int i = 0; i < num_batches; i++)
        unpack_batch(l, recv, counts_recv, &batches[i]);
}

/* ---- pooled columns ------------------------------------------------------------ */

static void cpu_pooled_scatter(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                               const float *buf, const float *scale, float *pooled, sr_stream_t s)
{
    const int B = m->batch;
#pragma omp parallel for schedule(static) if ((int64_t)B * m->out_dim > MIN_PAR)
    for (int b = 0; b < B; b++)
        for (int q = 0; q < m->num_pieces; q++) {
            const struct sr_sparse_dist_piece *pc = &m->pieces[q];
            if (pc->add == SR_PIECE_ADDED) /* its partner writes these columns */
                continue;
            const float *in = buf + pc->block + (int64_t)b * pc->width + pc->gcol;
            float *out = pooled + (int64_t)b * m->out_dim + pc->fcol;
            const float k = scale[(size_t)pc->feature * B + b];
            if (pc->add > 0) { /* a hybrid feature: cold + hot */
                const struct sr_sparse_dist_piece *hp = &m->pieces[pc->add - 1];
                const float *hot = buf + hp->block + (int64_t)b * hp->width + hp->gcol;
                for (int c = 0; c < pc->cols; c++)
                    out[c] = (in[c] + hot[c]) * k;
                continue;
            }
            for (int c = 0; c < pc->cols; c++)
                out[c] = in[c] * k;
        }
}

static void cpu_pooled_gather(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                              const float *dpooled, const float *scale, float *buf, sr_stream_t s)
{
    const int B = m->batch;
#pragma omp parallel for schedule(static) if ((int64_t)B * m->out_dim > MIN_PAR)
    for (int b = 0; b < B; b++)
        for (int q = 0; q < m->num_pieces; q++) {
            const struct sr_sparse_dist_piece *pc = &m->pieces[q];
            const float *in = dpooled + (int64_t)b * m->out_dim + pc->fcol;
            float *out = buf + pc->block + (int64_t)b * pc->width + pc->gcol;
            const float k = scale[(size_t)pc->feature * B + b];
            for (int c = 0; c < pc->cols; c++)
                out[c] = in[c] * k;
        }
}

const struct sr_sparse_dist_ops sr_cpu_sparse_dist_ops = {
    .bucketize = cpu_bucketize,
    .mean_scales = cpu_mean_scales,
    .pack = cpu_pack,
    .unpack = cpu_unpack,
    .pooled_scatter = cpu_pooled_scatter,
    .pooled_gather = cpu_pooled_gather,
    .hybrid_split = sr_cpu_hybrid_split,
    .rows_copy = sr_cpu_rows_copy,
    .compact_counts = sr_cpu_compact_counts,
    .compact_owner = sr_cpu_compact_owner,
    .compact_samples = sr_cpu_compact_samples,
};
