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
 *   dp      (none: pooled here)               (none)
 *   hybrid  all-to-all-v (sparse) of the rows  all-to-all-v (sparse), the
 *   (cold)  of bags with ids in the owner's    same rows' gradients
 *           block only, summed on arrival
 *           over the owners, rank ascending
 *
 * Owners pool by sum. The rank of a sample then divides its mean bags by
 * their full length (empty bags stay 0), and in backward scales the
 * gradients of those bags by the same 1/length before they leave, so owners
 * never need bag lengths of other ranks. The columns move between pooled
 * (B, out_dim) and the blocks below in one device op per direction, the
 * scale folded in (pooled_scatter after the collectives, pooled_gather before
 * them; their column map is built at init, sharded_ebc.c). One device buffer,
 * od_buf, holds every block (sharded_internal.h):
 *
 *   dp        (B, out_dp) the dp lookup's pooled rows / their gradients
 *   a2a_buf   (B, out_a2a(r)) blocks, r ascending: received pooled / sent grads
 *   rw_buf    (B, out_rw) my reduced rows / my grads
 *   twrw_buf  (B, out_twrw(m)) blocks, node m ascending
 *   hyb_buf   (B, out_hyb) hybrid cold rows summed over owners / their grads
 *
 * and twrw_mid (nodes, B, out_twrw(my node)) my node-reduced block.
 *
 * Every collective goes through output_wire.c, which carries the payload in
 * the pooled wire dtype (fp32, or fp16/bf16 summed in fp32 on arrival: then
 * rw's and twrw's reduce-scatters are all-to-alls plus a local sum).
 *
 * Each direction is two stages (sharded_ebc.h) over one batch's context b,
 * which holds every buffer above. Start issues the first collective of each
 * group, non-blocking (tw+cw, rw on the sparse communicator, in that order;
 * twrw's first level); wait completes them on the stream, runs twrw's second
 * level (it needs the first's result) and moves the columns. So every
 * communicator sees its collectives in one fixed order:
 *
 *   sparse  fwd: a2a, rw reduce-scatter,    bwd: a2a, rw all-gather,
 *           hybrid a2a                           hybrid a2a
 *   node    fwd: reduce-scatter (start)     bwd: all-gather (wait)
 *   cross   fwd: all-to-all-v (wait)        bwd: all-to-all-v (start)
 */
#include "shardrec/error.h"
#include "embed/sharded_internal.h"

/* Before an output-dist collective: the device's work that wrote `send` must
 * be done. A bound communicator waits for the stream itself; compressed
 * payloads are also cast before the communicator sees them, which a
 * device-memory one orders on the stream too, but a host-memory one needs
 * waited for here (output_wire.c). */
static void before_wire(struct sr_sharded_ebc *s, sr_comm_t comm, sr_stream_t stream)
{
    if (s->wire != SR_DTYPE_F32 && !s->wire_on_device)
        sr_dev_sync(s->dev, stream);
    else
        sr_sharded_before_collective(s, comm, stream);
}

/* Per-peer element counts of a group's exchange: mine (a) and theirs (b).
 * Shared scratch: the collectives copy them. */
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

static int active(const struct sr_sharded_ebc *s, enum group_kind g)
{
    return s->groups[g].active;
}

/* Hybrid tables' cold rows, compact (sr_sparse_dist_compact): forward, the
 * owner's rows of the bags that hold ids in its block go to the bags' ranks;
 * backward, those ranks send the same rows' gradients back. */
static void compact_exchange(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, int fwd)
{
    const struct sr_sparse_dist_compact *c = &s->hyb.compact;
    if (fwd)
        sr_op_sparse_dist_compact_owner(s->dev, c, b->gb[GROUP_HYB].offsets,
                                        b->gb[GROUP_HYB].pooled, b->cbuf_owner, b->own_words, 1,
                                        b->stream);
    else
        sr_op_sparse_dist_compact_samples(s->dev, c, b->lens, s->num_slots, b->hyb_buf,
                                          b->cbuf_samples, b->smp_words, 1, b->stream);
    before_wire(s, s->comms.sparse, b->stream);
    if (fwd)
        sr_wire_all_to_allv(s, s->comms.sparse, b->cbuf_owner, b->own_counts, b->own_displs,
                            b->cbuf_samples, b->smp_counts, b->smp_displs, b->stream, &b->hyb_work);
    else
        sr_wire_all_to_allv(s, s->comms.sparse, b->cbuf_samples, b->smp_counts, b->smp_displs,
                            b->cbuf_owner, b->own_counts, b->own_displs, b->stream, &b->hyb_work);
}

/* ... and its arrival: forward, each bag's row summed over the owners
 * (rank ascending); backward, the gradients into the owner's rows. */
static void compact_arrived(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, int fwd)
{
    const struct sr_sparse_dist_compact *c = &s->hyb.compact;
    sr_sharded_complete(s, s->comms.sparse, &b->hyb_work, b->stream);
    if (fwd)
        sr_op_sparse_dist_compact_samples(s->dev, c, b->lens, s->num_slots, b->hyb_buf,
                                          b->cbuf_samples, b->smp_words, 0, b->stream);
    else
        sr_op_sparse_dist_compact_owner(s->dev, c, b->gb[GROUP_HYB].offsets,
                                        b->gb[GROUP_HYB].dpooled, b->cbuf_owner, b->own_words, 0,
                                        b->stream);
}

/* ---- forward ------------------------------------------------------------------ */

void sr_output_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    if (active(s, GROUP_A2A)) {
        a2a_counts(s, GROUP_A2A, s->W, 1);
        before_wire(s, s->comms.sparse, b->stream);
        sr_wire_all_to_allv(s, s->comms.sparse, b->gb[GROUP_A2A].pooled, s->a_counts, s->a_displs,
                            b->a2a_buf, s->b_counts, s->b_displs, b->stream, &b->a2a_work);
    }
    if (active(s, GROUP_RW)) {
        before_wire(s, s->comms.sparse, b->stream);
        sr_wire_reduce_scatter(s, s->comms.sparse, b->gb[GROUP_RW].pooled, b->rw_buf,
                               (size_t)s->B * s->groups[GROUP_RW].out_dim, b->stream, &b->rw_work);
    }
    if (active(s, GROUP_TWRW)) {
        before_wire(s, s->comms.node, b->stream);
        sr_wire_reduce_scatter(s, s->comms.node, b->gb[GROUP_TWRW].pooled, b->twrw_mid,
                               (size_t)s->nodes * s->B * s->groups[GROUP_TWRW].out_dim,
                               b->stream, &b->twrw_work);
    }
    if (active(s, GROUP_HYB)) /* the rows of bags with ids here, to their samples' ranks */
        compact_exchange(s, b, 1);
}

/* twrw's second level: my node-reduced block to each node's same-local-rank rank. */
static void twrw_cross_forward(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    sr_comm_work_t work = NULL;
    a2a_counts(s, GROUP_TWRW, s->nodes, s->L);
    before_wire(s, s->comms.cross, b->stream);
    sr_wire_all_to_allv(s, s->comms.cross, b->twrw_mid, s->a_counts, s->a_displs, b->twrw_buf,
                        s->b_counts, s->b_displs, b->stream, &work);
    sr_sharded_complete(s, s->comms.cross, &work, b->stream);
}

void sr_output_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float *pooled)
{
    sr_sharded_complete(s, s->comms.sparse, &b->a2a_work, b->stream);
    sr_sharded_complete(s, s->comms.sparse, &b->rw_work, b->stream);
    if (active(s, GROUP_TWRW)) {
        sr_sharded_complete(s, s->comms.node, &b->twrw_work, b->stream);
        twrw_cross_forward(s, b);
    }
    if (active(s, GROUP_HYB))
        compact_arrived(s, b, 1);
    sr_op_sparse_dist_pooled_scatter(s->dev, &s->sd_cols, b->od_buf, b->scale, pooled, b->stream);
}

/* ---- backward ----------------------------------------------------------------- */

void sr_grad_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                        const float *dpooled)
{
    sr_op_sparse_dist_pooled_gather(s->dev, &s->sd_cols, dpooled, b->scale, b->od_buf, b->stream);
    if (active(s, GROUP_A2A)) {
        a2a_counts(s, GROUP_A2A, s->W, 1);
        before_wire(s, s->comms.sparse, b->stream);
        sr_wire_all_to_allv(s, s->comms.sparse, b->a2a_buf, s->b_counts, s->b_displs,
                            b->gb[GROUP_A2A].dpooled, s->a_counts, s->a_displs, b->stream,
                            &b->a2a_work);
    }
    if (active(s, GROUP_RW)) {
        before_wire(s, s->comms.sparse, b->stream);
        sr_wire_all_gather(s, s->comms.sparse, b->rw_buf, b->gb[GROUP_RW].dpooled,
                           (size_t)s->B * s->groups[GROUP_RW].out_dim, b->stream, &b->rw_work);
    }
    if (active(s, GROUP_TWRW)) {
        a2a_counts(s, GROUP_TWRW, s->nodes, s->L);
        before_wire(s, s->comms.cross, b->stream);
        sr_wire_all_to_allv(s, s->comms.cross, b->twrw_buf, s->b_counts, s->b_displs, b->twrw_mid,
                            s->a_counts, s->a_displs, b->stream, &b->twrw_work);
    }
    if (active(s, GROUP_HYB))
        compact_exchange(s, b, 0);
}

/* twrw's second level: the node's gradients, gathered from its ranks. */
static void twrw_node_backward(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    sr_comm_work_t work = NULL;
    before_wire(s, s->comms.node, b->stream);
    sr_wire_all_gather(s, s->comms.node, b->twrw_mid, b->gb[GROUP_TWRW].dpooled,
                       (size_t)s->nodes * s->B * s->groups[GROUP_TWRW].out_dim, b->stream, &work);
    sr_sharded_complete(s, s->comms.node, &work, b->stream);
}

void sr_grad_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    sr_sharded_complete(s, s->comms.sparse, &b->a2a_work, b->stream);
    sr_sharded_complete(s, s->comms.sparse, &b->rw_work, b->stream);
    if (active(s, GROUP_TWRW)) {
        sr_sharded_complete(s, s->comms.cross, &b->twrw_work, b->stream);
        twrw_node_backward(s, b);
    }
    if (active(s, GROUP_HYB))
        compact_arrived(s, b, 0);
}
