/*
 * Output dist (DESIGN.md step 5) and its backward (step 8): pooled results go
 * from the owners back to the ranks of their samples, gradients the other way.
 * One collective per direction per group present in the plan, plus one more
 * for twrw's second level:
 *
 *   group   forward                           backward
 *   tw+cw   all-to-all-v (sparse)             all-to-all-v (sparse)
 *   rw      reduce-scatter of partial sums    all-gather
 *   twrw    reduce-scatter (node comm), then  all-to-all-v (cross), then
 *           all-to-all-v (cross comm)         all-gather (node comm)
 *   dp      local copy                        local copy
 *
 * Owners pool by sum. The rank of a sample then divides its mean bags by
 * their full length (empty bags stay 0), and in backward scales the
 * gradients of those bags by the same 1/length before they leave, so owners
 * never need bag lengths of other ranks. Buffers (sharded_internal.h):
 *
 *   a2a_buf   (B, out_a2a(r)) blocks, r ascending: received pooled / sent grads
 *   rw_buf    (B, out_rw) my reduced rows / my grads
 *   twrw_mid  (nodes, B, out_twrw(my node)): my node-reduced block
 *   twrw_buf  (B, out_twrw(m)) blocks, node m ascending
 *
 * Every collective goes through output_wire.c, which carries the payload in
 * the pooled wire dtype (fp32, or fp16/bf16 summed in fp32 on arrival: then
 * rw's and twrw's reduce-scatters are all-to-alls plus a local sum).
 */
#include <string.h>

#include "shardrec/error.h"
#include "embed/sharded_internal.h"

/* ---- columns in and out of pooled ------------------------------------------ */

/* pooled[b, fcol + c] = src[b * w + gcol + c] for c < cols. */
static void scatter_cols(const struct sr_sharded_ebc *s, float *pooled, int fcol, const float *src,
                         int w, int gcol, int cols)
{
    for (int b = 0; b < s->B; b++)
        memcpy(pooled + (size_t)b * s->out_dim + fcol, src + (size_t)b * w + gcol,
               sizeof(float) * cols);
}

/* dst[b * w + gcol + c] = dpooled[b, fcol + c] * scale[f, b]. */
static void gather_cols(const struct sr_sharded_ebc *s, float *dst, int w, int gcol,
                        const float *dpooled, int f, int fcol, int cols)
{
    for (int b = 0; b < s->B; b++) {
        const float *src = dpooled + (size_t)b * s->out_dim + fcol;
        float *out = dst + (size_t)b * w + gcol;
        const float k = s->scale[(size_t)f * s->B + b];
        for (int c = 0; c < cols; c++)
            out[c] = src[c] * k;
    }
}

static int slot_fcol(const struct sr_sharded_ebc *s, const struct slot *sl)
{
    return s->feature_col[sl->feature] + sl->col_offset;
}

/* Move the columns of rank r's slots of group g between pooled and a block. */
static void rank_block(const struct sr_sharded_ebc *s, enum group_kind g, int r, float *pooled,
                       const float *dpooled, float *block)
{
    const int w = s->group_out[g * s->W + r];
    for (int p = 0; p < s->nslots_at[r]; p++) {
        const struct slot *sl = &s->slots[s->slot_at[r * s->max_nslots + p]];
        if (sl->group != g)
            continue;
        if (pooled)
            scatter_cols(s, pooled, slot_fcol(s, sl), block, w, sl->gcol, sl->cols);
        else
            gather_cols(s, block, w, sl->gcol, dpooled, sl->feature, slot_fcol(s, sl), sl->cols);
    }
}

/* Per-peer element counts of a group's exchange: mine (a) and theirs (b). */
static void a2a_counts(struct sr_sharded_ebc *s, enum group_kind g, int peers, int stride)
{
    const size_t mine = (size_t)s->B * s->groups[g].out_dim;
    size_t off = 0;
    for (int m = 0; m < peers; m++) {
        s->a_counts[m] = mine;
        s->a_displs[m] = m * mine;
        s->b_counts[m] = (size_t)s->B * s->group_out[g * s->W + m * stride];
        s->b_displs[m] = off;
        off += s->b_counts[m];
    }
}

/* ---- forward ------------------------------------------------------------------ */

static void mean_scales(struct sr_sharded_ebc *s, const struct sr_kjt *kjt)
{
    for (int f = 0; f < s->cfg.num_features; f++) {
        const int mean = s->cfg.tables[s->cfg.feature_table[f]].pooling == SR_POOLING_MEAN;
        for (int b = 0; b < s->B; b++) {
            const int32_t len = kjt->lengths[(size_t)f * s->B + b];
            s->scale[(size_t)f * s->B + b] = mean && len > 0 ? 1.0f / (float)len : 1.0f;
        }
    }
}

static void divide_means(const struct sr_sharded_ebc *s, float *pooled)
{
    for (int f = 0; f < s->cfg.num_features; f++) {
        const int D = s->cfg.tables[s->cfg.feature_table[f]].embedding_dim;
        for (int b = 0; b < s->B; b++) {
            const float k = s->scale[(size_t)f * s->B + b];
            float *out = pooled + (size_t)b * s->out_dim + s->feature_col[f];
            if (k != 1.0f)
                for (int c = 0; c < D; c++)
                    out[c] *= k;
        }
    }
}

static void dp_forward(struct sr_sharded_ebc *s, float *pooled)
{
    const struct group *g = &s->groups[GROUP_DP];
    for (int j = 0; j < g->layout.num_features; j++) {
        const int f = g->slot_of[j];
        scatter_cols(s, pooled, s->feature_col[f], g->pooled, g->out_dim, g->features[j].col,
                     s->cfg.tables[s->cfg.feature_table[f]].embedding_dim);
    }
}

static void a2a_forward(struct sr_sharded_ebc *s, float *pooled)
{
    a2a_counts(s, GROUP_A2A, s->W, 1);
    sr_wire_all_to_allv(s, s->comms.sparse, s->groups[GROUP_A2A].pooled, s->a_counts, s->a_displs,
                        s->a2a_buf, s->b_counts, s->b_displs);
    for (int r = 0; r < s->W; r++)
        rank_block(s, GROUP_A2A, r, pooled, NULL, s->a2a_buf + s->b_displs[r]);
}

static void rw_forward(struct sr_sharded_ebc *s, float *pooled)
{
    const struct group *g = &s->groups[GROUP_RW];
    sr_wire_reduce_scatter(s, s->comms.sparse, g->pooled, s->rw_buf, (size_t)s->B * g->out_dim);
    rank_block(s, GROUP_RW, s->rank, pooled, NULL, s->rw_buf);
}

static void twrw_forward(struct sr_sharded_ebc *s, float *pooled)
{
    const struct group *g = &s->groups[GROUP_TWRW];
    sr_wire_reduce_scatter(s, s->comms.node, g->pooled, s->twrw_mid,
                           (size_t)s->nodes * s->B * g->out_dim);
    a2a_counts(s, GROUP_TWRW, s->nodes, s->L);
    sr_wire_all_to_allv(s, s->comms.cross, s->twrw_mid, s->a_counts, s->a_displs, s->twrw_buf,
                        s->b_counts, s->b_displs);
    for (int m = 0; m < s->nodes; m++)
        rank_block(s, GROUP_TWRW, m * s->L, pooled, NULL, s->twrw_buf + s->b_displs[m]);
}

void sr_output_dist_forward(struct sr_sharded_ebc *s, const struct sr_kjt *kjt, float *pooled)
{
    /* The column moves below still run on the host: wait for the lookups
     * (the host work that remains until they become device ops). */
    sr_dev_sync(s->dev, NULL);
    mean_scales(s, kjt);
    dp_forward(s, pooled);
    if (s->groups[GROUP_A2A].active)
        a2a_forward(s, pooled);
    if (s->groups[GROUP_RW].active)
        rw_forward(s, pooled);
    if (s->groups[GROUP_TWRW].active)
        twrw_forward(s, pooled);
    divide_means(s, pooled);
}

/* ---- backward ----------------------------------------------------------------- */

static void dp_backward(struct sr_sharded_ebc *s, const float *dpooled)
{
    struct group *g = &s->groups[GROUP_DP];
    for (int j = 0; j < g->layout.num_features; j++) {
        const int f = g->slot_of[j];
        gather_cols(s, g->dpooled, g->out_dim, g->features[j].col, dpooled, f, s->feature_col[f],
                    s->cfg.tables[s->cfg.feature_table[f]].embedding_dim);
    }
}

static void a2a_backward(struct sr_sharded_ebc *s, const float *dpooled)
{
    a2a_counts(s, GROUP_A2A, s->W, 1);
    for (int r = 0; r < s->W; r++)
        rank_block(s, GROUP_A2A, r, NULL, dpooled, s->a2a_buf + s->b_displs[r]);
    sr_wire_all_to_allv(s, s->comms.sparse, s->a2a_buf, s->b_counts, s->b_displs,
                        s->groups[GROUP_A2A].dpooled, s->a_counts, s->a_displs);
}

static void rw_backward(struct sr_sharded_ebc *s, const float *dpooled)
{
    const struct group *g = &s->groups[GROUP_RW];
    rank_block(s, GROUP_RW, s->rank, NULL, dpooled, s->rw_buf);
    sr_wire_all_gather(s, s->comms.sparse, s->rw_buf, g->dpooled, (size_t)s->B * g->out_dim);
}

static void twrw_backward(struct sr_sharded_ebc *s, const float *dpooled)
{
    const struct group *g = &s->groups[GROUP_TWRW];
    a2a_counts(s, GROUP_TWRW, s->nodes, s->L);
    for (int m = 0; m < s->nodes; m++)
        rank_block(s, GROUP_TWRW, m * s->L, NULL, dpooled, s->twrw_buf + s->b_displs[m]);
    sr_wire_all_to_allv(s, s->comms.cross, s->twrw_buf, s->b_counts, s->b_displs, s->twrw_mid,
                        s->a_counts, s->a_displs);
    sr_wire_all_gather(s, s->comms.node, s->twrw_mid, g->dpooled,
                       (size_t)s->nodes * s->B * g->out_dim);
}

void sr_output_dist_backward(struct sr_sharded_ebc *s, const float *dpooled)
{
    sr_dev_sync(s->dev, NULL); /* dpooled is read on the host below (see forward) */
    dp_backward(s, dpooled);
    if (s->groups[GROUP_A2A].active)
        a2a_backward(s, dpooled);
    if (s->groups[GROUP_RW].active)
        rw_backward(s, dpooled);
    if (s->groups[GROUP_TWRW].active)
        twrw_backward(s, dpooled);
}
