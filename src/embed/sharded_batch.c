/*
 * A batch context of the sharded EBC (struct sr_sharded_ebc_batch,
 * sharded_internal.h): every buffer one step writes between input dist and
 * update, each at the worst-case size the EBC computed at init, so that the
 * stages allocate nothing and several batches can be in their stages at
 * once. Per context, S slots, n of them mine, W ranks:
 *
 *   input dist   lens (S, B), the counts message and the W counts received
 *                (with host copies when the device is not host-visible),
 *                the data message sent (send_cap words) and received
 *                (recv_cap words), the mean scales (F, B)
 *   per group    the local batch (offsets, ids, weights), its host
 *                positions, the lookup's workspace (the ids kept for the
 *                update), pooled and dpooled (dp: views into od_buf)
 *   output dist  od_buf (every block the collectives carry), twrw_mid
 *
 * The tables, optimizer state, plan, communicators and the compressed wire
 * staging stay in struct sr_sharded_ebc, shared by every context.
 *
 * Local mode (sharded_ebc.h) exchanges nothing: a context holds only the
 * tw/cw group's workspace and host positions, and its pooled and dpooled
 * blocks while no caller's buffers are bound (the EBC's own context never
 * has them: forward and backward bind theirs).
 */
#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "embed/sharded_internal.h"

static void alloc_group_batch(struct sr_sharded_ebc *s, const struct group *g,
                              struct group_batch *gb)
{
    const int F = g->layout.num_features;
    const size_t maxv = (size_t)g->layout.max_values;
    gb->workspace = sr_dev_alloc_named(s->dev, g->workspace_bytes,
                                       "a shard group's embedding workspace");
    /* a backend may bake the layout into the workspace (CUDA does: the
     * features' mean flags among it), so local mode's ops get the workspace
     * of the layout they run with */
    const int local = s->local && g == &s->groups[GROUP_A2A];
    sr_op_emb_workspace_init(s->dev, local ? &s->local_layout : &g->layout, gb->workspace);
    if (s->local) { /* host positions only; the blocks: sr_sharded_batch_local_blocks */
        gb->feature_n = sr_calloc((size_t)F + 1, sizeof *gb->feature_n);
        gb->feature_pos = sr_calloc((size_t)F + 1, sizeof *gb->feature_pos);
        gb->table_pos = sr_calloc((size_t)g->num_tables + 1, sizeof *gb->table_pos);
        gb->cursor = sr_calloc((size_t)g->num_tables + 1, sizeof *gb->cursor);
        return;
    }
    gb->offsets = sr_dev_alloc_zero(s->dev, sizeof *gb->offsets * ((size_t)F * g->batch + 1));
    gb->values = sr_dev_alloc(s->dev, sizeof *gb->values * (maxv + 1));
    gb->weights = sr_dev_alloc(s->dev, sizeof *gb->weights * (maxv + 1));
    gb->feature_n = sr_calloc((size_t)F + 1, sizeof *gb->feature_n);
    gb->feature_pos = sr_calloc((size_t)F + 1, sizeof *gb->feature_pos);
    gb->table_pos = sr_calloc((size_t)g->num_tables + 1, sizeof *gb->table_pos);
    gb->cursor = sr_calloc((size_t)g->num_tables + 1, sizeof *gb->cursor);
    if (g->kind == GROUP_DP)
        return; /* pooled and dpooled: one view into od_buf */
    const size_t pooled = (size_t)g->batch * g->out_dim + 1;
    gb->pooled = sr_dev_alloc_zero(s->dev, sizeof(float) * pooled);
    gb->dpooled = sr_dev_alloc_zero(s->dev, sizeof(float) * pooled);
}

static void free_group_batch(struct sr_device *dev, const struct group *g, struct group_batch *gb)
{
    void *device[] = {gb->workspace, gb->offsets, gb->values, gb->weights};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++)
        sr_dev_free(dev, device[i]);
    if (g->kind != GROUP_DP) {
        sr_dev_free(dev, gb->pooled);
        sr_dev_free(dev, gb->dpooled);
    }
    sr_free(gb->feature_n);
    sr_free(gb->feature_pos);
    sr_free(gb->table_pos);
    sr_free(gb->cursor);
}

static void alloc_input_dist(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const size_t W = (size_t)s->W, n = (size_t)s->sd_layout.nslots_here;
    b->lens = sr_dev_alloc(s->dev, sizeof *b->lens * ((size_t)s->num_slots * s->B + 1));
    b->count_send =
        sr_dev_alloc(s->dev, sizeof *b->count_send * ((size_t)s->sd_layout.count_words + 1));
    b->count_recv = sr_dev_alloc(s->dev, sizeof *b->count_recv * (W * (n + 1) + 1));
    b->count_send_host = b->count_send;
    b->count_recv_host = b->count_recv;
    if (!s->dev->host_visible) {
        b->count_send_host = sr_dev_alloc_host(s->dev, sizeof *b->count_send *
                                                           ((size_t)s->sd_layout.count_words + 1));
        b->count_recv_host = sr_dev_alloc_host(s->dev, sizeof *b->count_recv * (W * (n + 1) + 1));
    }
    b->send_counts = sr_calloc(W, sizeof(size_t));
    b->send_displs = sr_calloc(W, sizeof(size_t));
    b->recv_counts = sr_calloc(W, sizeof(size_t));
    b->recv_displs = sr_calloc(W, sizeof(size_t));
    b->send_buf = sr_dev_alloc(s->dev, s->send_cap * sizeof(int32_t));
    b->recv_buf = sr_dev_alloc(s->dev, s->recv_cap * sizeof(int32_t));
    b->scale = sr_dev_alloc(s->dev, sizeof *b->scale * ((size_t)s->cfg.num_features * s->B + 1));
}

static void alloc_output_dist(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    b->od_buf = sr_dev_alloc_zero(s->dev, sizeof(float) * (s->od_floats + 1));
    b->gb[GROUP_DP].pooled = b->gb[GROUP_DP].dpooled = b->od_buf + s->od_off[GROUP_DP];
    b->a2a_buf = b->od_buf + s->od_off[GROUP_A2A];
    b->rw_buf = b->od_buf + s->od_off[GROUP_RW];
    b->twrw_buf = b->od_buf + s->od_off[GROUP_TWRW];
    b->hyb_buf = b->od_buf + s->od_off[GROUP_HYB];
    b->twrw_mid = sr_dev_alloc(s->dev, sizeof(float) * (s->twrw_mid_floats + 1));
}

/* The device buffers the collectives move, made known to their
 * communicators (a staging one prepares their host mirrors now, comm.h).
 * Compressed output dists hand the communicator host wire buffers instead. */
static void register_buffers(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const struct sr_sharded_ebc_comms *c = &s->comms;
    sr_comm_register(c->input ? c->input : c->sparse, b->send_buf);
    sr_comm_register(c->input ? c->input : c->sparse, b->recv_buf);
    if (b->ne_send) { /* hybrid tables' compact exchange */
        sr_comm_register(c->input ? c->input : c->sparse, b->ne_send_host);
        sr_comm_register(c->input ? c->input : c->sparse, b->ne_recv_host);
        if (s->wire == SR_DTYPE_F32) {
            sr_comm_register(c->sparse, b->cbuf_owner);
            sr_comm_register(c->sparse, b->cbuf_samples);
        }
    }
    if (s->wire != SR_DTYPE_F32)
        return;
    const void *sparse[] = {b->od_buf, b->gb[GROUP_A2A].pooled, b->gb[GROUP_A2A].dpooled,
                            b->gb[GROUP_RW].pooled, b->gb[GROUP_RW].dpooled};
    for (size_t i = 0; i < sizeof sparse / sizeof sparse[0]; i++)
        sr_comm_register(c->sparse, sparse[i]);
    if (!s->groups[GROUP_TWRW].active)
        return;
    sr_comm_register(c->node, b->gb[GROUP_TWRW].pooled);
    sr_comm_register(c->node, b->gb[GROUP_TWRW].dpooled);
    sr_comm_register(c->node, b->twrw_mid);
    sr_comm_register(c->cross, b->twrw_mid);
    sr_comm_register(c->cross, b->od_buf);
}

void sr_sharded_batch_local_blocks(struct sr_sharded_ebc_batch *b, int want)
{
    struct sr_sharded_ebc *s = b->s;
    struct group_batch *gb = &b->gb[GROUP_A2A];
    const size_t bytes = sizeof(float) * ((size_t)s->B * s->out_dim + 1);
    SR_ASSERT(s->local);
    if (want && !gb->pooled) {
        gb->pooled = sr_dev_alloc_zero(s->dev, bytes);
        gb->dpooled = sr_dev_alloc_zero(s->dev, bytes);
    } else if (!want && gb->pooled) {
        if (b->staged_any) /* its last stage may still use them */
            sr_dev_event_sync(s->dev, b->staged);
        sr_dev_free(s->dev, gb->pooled);
        sr_dev_free(s->dev, gb->dpooled);
        gb->pooled = gb->dpooled = NULL;
    }
}

/* Local mode: the group's workspace and positions, and the blocks. */
static struct sr_sharded_ebc_batch *alloc_local(struct sr_sharded_ebc *s,
                                                struct sr_sharded_ebc_batch *b)
{
    for (int k = 0; k < GROUP_COUNT; k++)
        if (s->groups[k].active)
            alloc_group_batch(s, &s->groups[k], &b->gb[k]);
    b->staged = sr_dev_event_create(s->dev);
    sr_sharded_batch_local_blocks(b, 1);
    sr_dev_sync(s->dev, NULL);
    return b;
}

struct sr_sharded_ebc_batch *sr_sharded_batch_alloc(struct sr_sharded_ebc *s)
{
    struct sr_sharded_ebc_batch *b = sr_calloc(1, sizeof *b);
    b->s = s;
    if (s->local)
        return alloc_local(s, b);
    alloc_input_dist(s, b);
    sr_sharded_hybrid_batch_alloc(s, b);
    for (int k = 0; k < GROUP_COUNT; k++)
        alloc_group_batch(s, &s->groups[k], &b->gb[k]);
    alloc_output_dist(s, b);
    register_buffers(s, b);
    b->staged = sr_dev_event_create(s->dev);
    sr_dev_sync(s->dev, NULL);
    return b;
}

/* Free b's buffers; a collective still in flight is a misuse (its buffers
 * would go while the transport writes them). */
void sr_sharded_batch_release(struct sr_sharded_ebc_batch *b)
{
    if (!b)
        return;
    struct sr_sharded_ebc *s = b->s;
    if (b->counts_work || b->data_work || b->a2a_work || b->rw_work || b->twrw_work || b->ne_work ||
        b->hyb_work)
        SR_ABORT("sharded EBC: a batch context freed with a collective in flight; "
                 "wait for each stage it started first");
    /* queued ops of its last stage may still use its buffers; in local mode
     * that event may have been recorded in a CUDA graph's capture, so the
     * caller has drained the streams (sharded_ebc.h, rule 5) */
    if (b->staged_any && !s->local)
        sr_dev_event_sync(s->dev, b->staged);
    sr_dev_sync(s->dev, NULL);
    sr_dev_event_destroy(s->dev, b->staged);
    for (int k = 0; k < GROUP_COUNT; k++)
        free_group_batch(s->dev, &s->groups[k], &b->gb[k]);
    sr_sharded_hybrid_batch_free(s, b);
    void *device[] = {b->lens,     b->count_send, b->count_recv, b->send_buf,
                      b->recv_buf, b->scale,      b->od_buf,     b->twrw_mid};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; i++)
        sr_dev_free(s->dev, device[i]);
    void *host[] = {b->send_counts, b->send_displs, b->recv_counts, b->recv_displs};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        sr_free(host[i]);
    if (b->count_send_host && b->count_send_host != b->count_send) {
        sr_dev_free_host(s->dev, b->count_send_host);
        sr_dev_free_host(s->dev, b->count_recv_host);
    }
    sr_free(b);
}

int sr_sharded_ebc_batch_init(struct sr_sharded_ebc_batch **out, struct sr_sharded_ebc *s)
{
    *out = NULL;
    if (!s)
        return sr_error_set(SR_ERR_INVALID_ARG, "sharded EBC batch: no EBC");
    *out = sr_sharded_batch_alloc(s);
    s->num_batches++;
    return SR_OK;
}

void sr_sharded_ebc_batch_free(struct sr_sharded_ebc_batch *b)
{
    if (!b)
        return;
    SR_ASSERT(!b->internal && b->s->num_batches > 0);
    b->s->num_batches--;
    sr_sharded_batch_release(b);
}
