/*
 * The deferred CPU device's sparse-dist ops (device/ops_sparse_dist.h): each
 * op is queued with copies of its struct arguments (the layout, the KJT view,
 * the batches, the column map) and every device array it reads or writes
 * declared as a region; it runs the CPU backend's op when waited for
 * (cpu_deferred.h has the queue API, cpu_deferred.c the rules).
 */
#include <stdlib.h>
#include <string.h>

#include "device/cpu/cpu_deferred.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_sparse_dist.h"

#define I32(n) ((size_t)(n) * sizeof(int32_t))
#define I64(n) ((size_t)(n) * sizeof(int64_t))

struct sd_args {
    struct sr_sparse_dist_layout layout;
    struct sr_sparse_dist_kjt kjt;
    int has_kjt;
    int64_t flags, words;
    const int32_t *i32_in;
    const int64_t *i64_in;
    int32_t *i32_out;
    int64_t *i64_out;
    const float *f_in, *scale;
    float *f_out;
    struct sr_sparse_dist_batch *batches; /* host copy */
    int num_batches;
    struct sr_sparse_dist_cols cols;
};

#define SD(it) DEFERRED_ARGS(struct sd_args, it)

/* The layout's plan arrays, read by every input-dist op. */
static void add_layout_regions(struct item *it, const struct sr_sparse_dist_layout *l)
{
    const int F = l->num_features;
    sr_deferred_add_region(it, l->first_slot, I32(F), REGION_IN);
    sr_deferred_add_region(it, l->num_shards, I32(F), REGION_IN);
    sr_deferred_add_region(it, l->block, I64(F), REGION_IN);
    sr_deferred_add_region(it, l->dp_feature, I32(l->num_dp), REGION_IN);
    sr_deferred_add_region(it, l->slot_at, I32((size_t)l->world * l->max_nslots), REGION_IN);
    sr_deferred_add_region(it, l->count_displ, I64(l->world + 1), REGION_IN);
}

/* The KJT arrays an op reads: offsets and values always, lengths and weights
 * when asked. */
static void add_kjt_regions(struct item *it, const struct sr_sparse_dist_layout *l,
                            const struct sr_sparse_dist_kjt *k, int lengths, int weights)
{
    const size_t bags = (size_t)l->num_features * l->batch;
    if (lengths)
        sr_deferred_add_region(it, k->lengths, I32(bags), REGION_IN);
    sr_deferred_add_region(it, k->offsets, I64(bags + 1), REGION_IN);
    sr_deferred_add_region(it, k->values, I64(k->num_values), REGION_IN);
    if (weights)
        sr_deferred_add_region(it, k->weights, F32(k->num_values), REGION_IN);
}

static void add_batch_out_regions(struct item *it, const struct sr_sparse_dist_batch *g)
{
    sr_deferred_add_region(it, g->offsets, I64((size_t)g->num_features * g->batch + 1), REGION_OUT);
    sr_deferred_add_region(it, g->values, I64(g->num_values), REGION_OUT);
    sr_deferred_add_region(it, g->weights, F32(g->num_values), REGION_OUT);
}

/* ---- bucketize, mean scales ------------------------------------------------------ */

static void run_bucketize(struct item *it)
{
    struct sd_args *a = SD(it);
    sr_cpu_sparse_dist_ops.bucketize(sr_cpu_device(), &a->layout, a->has_kjt ? &a->kjt : NULL,
                                     a->flags, a->i32_out, a->i64_out, NULL);
}

static void d_bucketize(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                        const struct sr_sparse_dist_kjt *kjt, int64_t flags, int32_t *lens,
                        int64_t *counts, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct sd_args), run_bucketize);
    struct sd_args *a = SD(it);
    *a = (struct sd_args){
        .layout = *l, .has_kjt = kjt != NULL, .flags = flags, .i32_out = lens, .i64_out = counts};
    if (kjt) {
        a->kjt = *kjt;
        add_kjt_regions(it, l, kjt, 1, 0);
    }
    add_layout_regions(it, l);
    sr_deferred_add_region(it, lens, I32((size_t)l->num_slots * l->batch), REGION_OUT);
    sr_deferred_add_region(it, counts, I64(l->count_words), REGION_OUT);
    sr_deferred_enqueue(s, it);
}

static void run_mean_scales(struct item *it)
{
    struct sd_args *a = SD(it);
    sr_cpu_sparse_dist_ops.mean_scales(sr_cpu_device(), &a->layout, a->i32_in, a->f_out, NULL);
}

static void d_mean_scales(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                          const int32_t *lengths, float *scale, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct sd_args), run_mean_scales);
    *SD(it) = (struct sd_args){.layout = *l, .i32_in = lengths, .f_out = scale};
    const size_t bags = (size_t)l->num_features * l->batch;
    sr_deferred_add_region(it, lengths, I32(bags), REGION_IN);
    sr_deferred_add_region(it, l->mean, I32(l->num_features), REGION_IN);
    sr_deferred_add_region(it, scale, F32(bags), REGION_OUT);
    sr_deferred_enqueue(s, it);
}

/* ---- pack, unpack ---------------------------------------------------------------- */

static struct sr_sparse_dist_batch *batches_copy(const struct sr_sparse_dist_batch *b, int n)
{
    struct sr_sparse_dist_batch *c = sr_deferred_xmalloc(sizeof *c * (size_t)(n ? n : 1));
    if (n)
        memcpy(c, b, sizeof *c * (size_t)n);
    return c;
}

static void run_pack(struct item *it)
{
    struct sd_args *a = SD(it);
    sr_cpu_sparse_dist_ops.pack(sr_cpu_device(), &a->layout, &a->kjt, a->i32_in, a->i64_in,
                                a->i32_out, a->words, a->num_batches ? a->batches : NULL, NULL);
    free(a->batches);
}

static void d_pack(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                   const struct sr_sparse_dist_kjt *kjt, const int32_t *lens, const int64_t *counts,
                   int32_t *send, int64_t send_words, const struct sr_sparse_dist_batch *dp,
                   sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct sd_args), run_pack);
    struct sd_args *a = SD(it);
    *a = (struct sd_args){.layout = *l,
                          .kjt = *kjt,
                          .words = send_words,
                          .i32_in = lens,
                          .i64_in = counts,
                          .i32_out = send,
                          .num_batches = dp != NULL};
    a->batches = batches_copy(dp, dp != NULL);
    add_kjt_regions(it, l, kjt, 0, kjt->weights != NULL);
    add_layout_regions(it, l);
    sr_deferred_add_region(it, lens, I32((size_t)l->num_slots * l->batch), REGION_IN);
    sr_deferred_add_region(it, counts, I64(l->count_words), REGION_IN);
    sr_deferred_add_region(it, l->work, I64(2 * (size_t)l->num_slots), REGION_OUT);
    sr_deferred_add_region(it, send, I32(send_words), REGION_OUT);
    if (dp)
        add_batch_out_regions(it, dp);
    sr_deferred_enqueue(s, it);
}

static void run_unpack(struct item *it)
{
    struct sd_args *a = SD(it);
    sr_cpu_sparse_dist_ops.unpack(sr_cpu_device(), &a->layout, a->i32_in, a->words, a->i64_in,
                                  a->batches, a->num_batches, NULL);
    free(a->batches);
}

static void d_unpack(struct sr_device *dev, const struct sr_sparse_dist_layout *l,
                     const int32_t *recv, int64_t recv_words, const int64_t *counts_recv,
                     const struct sr_sparse_dist_batch *batches, int num_batches, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct sd_args), run_unpack);
    struct sd_args *a = SD(it);
    *a = (struct sd_args){.layout = *l,
                          .words = recv_words,
                          .i32_in = recv,
                          .i64_in = counts_recv,
                          .num_batches = num_batches};
    a->batches = batches_copy(batches, num_batches);
    const size_t n = (size_t)l->nslots_here, W = (size_t)l->world;
    sr_deferred_add_region(it, recv, I32(recv_words), REGION_IN);
    sr_deferred_add_region(it, counts_recv, I64(W * (n + 1)), REGION_IN);
    sr_deferred_add_region(it, l->work + 2 * (size_t)l->num_slots, I64(W * (n + 2)), REGION_OUT);
    for (int i = 0; i < num_batches; i++) {
        sr_deferred_add_region(it, batches[i].pos, I32(batches[i].num_features), REGION_IN);
        sr_deferred_add_region(it, batches[i].row_of, I32(W), REGION_IN);
        add_batch_out_regions(it, &batches[i]);
    }
    sr_deferred_enqueue(s, it);
}

/* ---- pooled columns -------------------------------------------------------------- */

static void add_cols_regions(struct item *it, const struct sr_sparse_dist_cols *m,
                             const float *scale)
{
    sr_deferred_add_region(it, m->pieces, sizeof *m->pieces * (size_t)m->num_pieces, REGION_IN);
    sr_deferred_add_region(it, scale, F32((size_t)m->num_features * m->batch), REGION_IN);
}

static void run_pooled_scatter(struct item *it)
{
    struct sd_args *a = SD(it);
    sr_cpu_sparse_dist_ops.pooled_scatter(sr_cpu_device(), &a->cols, a->f_in, a->scale, a->f_out,
                                          NULL);
}

static void d_pooled_scatter(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                             const float *buf, const float *scale, float *pooled, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct sd_args), run_pooled_scatter);
    *SD(it) = (struct sd_args){.cols = *m, .f_in = buf, .scale = scale, .f_out = pooled};
    add_cols_regions(it, m, scale);
    sr_deferred_add_region(it, buf, F32(m->buf_floats), REGION_IN);
    sr_deferred_add_region(it, pooled, F32((size_t)m->batch * m->out_dim), REGION_OUT);
    sr_deferred_enqueue(s, it);
}

static void run_pooled_gather(struct item *it)
{
    struct sd_args *a = SD(it);
    sr_cpu_sparse_dist_ops.pooled_gather(sr_cpu_device(), &a->cols, a->f_in, a->scale, a->f_out,
                                         NULL);
}

static void d_pooled_gather(struct sr_device *dev, const struct sr_sparse_dist_cols *m,
                            const float *dpooled, const float *scale, float *buf, sr_stream_t s)
{
    struct item *it = sr_deferred_item_new(sizeof(struct sd_args), run_pooled_gather);
    *SD(it) = (struct sd_args){.cols = *m, .f_in = dpooled, .scale = scale, .f_out = buf};
    add_cols_regions(it, m, scale);
    sr_deferred_add_region(it, dpooled, F32((size_t)m->batch * m->out_dim), REGION_IN);
    sr_deferred_add_region(it, buf, F32(m->buf_floats), REGION_OUT);
    sr_deferred_enqueue(s, it);
}

const struct sr_sparse_dist_ops sr_cpu_deferred_sparse_dist_ops = {
    .bucketize = d_bucketize,
    .mean_scales = d_mean_scales,
    .pack = d_pack,
    .unpack = d_unpack,
    .pooled_scatter = d_pooled_scatter,
    .pooled_gather = d_pooled_gather,
};
