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
 *
 * and twrw_mid (nodes, B, out_twrw(my node)) my node-reduced block.
 *
 * Every collective goes through output_wire.c, which carries the payload in
 * the pooled wire dtype (fp32, or fp16/bf16 summed in fp32 on arrival: then
 * rw's and twrw's reduce-scatters are all-to-alls plus a local sum).
 */
#include "shardrec/error.h"
#include "embed/sharded_internal.h"

/* Before an output-dist collective: the device's work that wrote `send` must
 * be done. A bound communicator waits for the stream itself; compressed
 * payloads are also cast before the communicator sees them, so wait here
 * (output_wire.c). */
static void before_wire(struct sr_sharded_ebc *s, sr_comm_t comm)
{
    if (s->wire != SR_DTYPE_F32)
        sr_dev_sync(s->dev, NULL);
    else
        sr_sharded_before_collective(s, comm);
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

static void a2a_forward(struct sr_sharded_ebc *s)
{
    a2a_counts(s, GROUP_A2A, s->W, 1);
    before_wire(s, s->comms.sparse);
    sr_wire_all_to_allv(s, s->comms.sparse, s->groups[GROUP_A2A].pooled, s->a_counts, s->a_displs,
                        s->a2a_buf, s->b_counts, s->b_displs);
}

static void rw_forward(struct sr_sharded_ebc *s)
{
    const struct group *g = &s->groups[GROUP_RW];
    before_wire(s, s->comms.sparse);
    sr_wire_reduce_scatter(s, s->comms.sparse, g->pooled, s->rw_buf, (size_t)s->B * g->out_dim);
}

static void twrw_forward(struct sr_sharded_ebc *s)
{
    const struct group *g = &s->groups[GROUP_TWRW];
    before_wire(s, s->comms.node);
    sr_wire_reduce_scatter(s, s->comms.node, g->pooled, s->twrw_mid,
                           (size_t)s->nodes * s->B * g->out_dim);
    a2a_counts(s, GROUP_TWRW, s->nodes, s->L);
    before_wire(s, s->comms.cross);
    sr_wire_all_to_allv(s, s->comms.cross, s->twrw_mid, s->a_counts, s->a_displs, s->twrw_buf,
                        s->b_counts, s->b_displs);
}

void sr_output_dist_forward(struct sr_sharded_ebc *s, float *pooled)
{
    if (s->groups[GROUP_A2A].active)
        a2a_forward(s);
    if (s->groups[GROUP_RW].active)
        rw_forward(s);
    if (s->groups[GROUP_TWRW].active)
        twrw_forward(s);
    s->sd->pooled_scatter(s->dev, &s->sd_cols, s->od_buf, s->scale, pooled, NULL);
}

/* ---- backward ----------------------------------------------------------------- */

static void a2a_backward(struct sr_sharded_ebc *s)
{
    a2a_counts(s, GROUP_A2A, s->W, 1);
    before_wire(s, s->comms.sparse);
    sr_wire_all_to_allv(s, s->comms.sparse, s->a2a_buf, s->b_counts, s->b_displs,
                        s->groups[GROUP_A2A].dpooled, s->a_counts, s->a_displs);
}

static void rw_backward(struct sr_sharded_ebc *s)
{
    const struct group *g = &s->groups[GROUP_RW];
    before_wire(s, s->comms.sparse);
    sr_wire_all_gather(s, s->comms.sparse, s->rw_buf, g->dpooled, (size_t)s->B * g->out_dim);
}

static void twrw_backward(struct sr_sharded_ebc *s)
{
    const struct group *g = &s->groups[GROUP_TWRW];
    a2a_counts(s, GROUP_TWRW, s->nodes, s->L);
    before_wire(s, s->comms.cross);
    sr_wire_all_to_allv(s, s->comms.cross, s->twrw_buf, s->b_counts, s->b_displs, s->twrw_mid,
                        s->a_counts, s->a_displs);
    before_wire(s, s->comms.node);
    sr_wire_all_gather(s, s->comms.node, s->twrw_mid, g->dpooled,
                       (size_t)s->nodes * s->B * g->out_dim);
}

void sr_output_dist_backward(struct sr_sharded_ebc *s, const float *dpooled)
{
    s->sd->pooled_gather(s->dev, &s->sd_cols, dpooled, s->scale, s->od_buf, NULL);
    if (s->groups[GROUP_A2A].active)
        a2a_backward(s);
    if (s->groups[GROUP_RW].active)
        rw_backward(s);
    if (s->groups[GROUP_TWRW].active)
        twrw_backward(s);
}
