/*
 * Input dist (DESIGN.md step 3, the KJT all-to-all): every id of this rank's
 * batch goes to the shard that owns its row, in two collectives for all
 * tables and sharding types at once:
 *
 *   1. counts   all-to-all-v of int64: to each peer, the ids I send into each
 *               of its slots, then a flags word: bit 0 = per-id weights
 *               follow, bit 1 = this rank rejected its batch (then every rank
 *               stops here with an error, none hangs), bit 2 = this rank's
 *               data has ended (then every rank stops here, at the same step,
 *               without an error)
 *   2. data     all-to-all-v of int32 words, region per destination r:
 *
 *      [ lengths: B per slot of r, slot order ][ ids: slot by slot, bag by
 *        bag, shard-local rows, 1 word (uint32) or 2 (int64 lo, hi) ]
 *      [ weights (fp32 bits), same order, if flagged ]
 *
 * Owner of an id of feature f (its table E rows):
 *   tw, cw   every shard (cw: each column piece gets all ids), row = id
 *   rw       shard id / ceil(E/W) on that rank, row = id - shard row offset
 *   twrw     shard id / ceil(E/L) on rank node*L + shard, row as rw
 *   dp       kept here: the replica pools it, nothing is sent
 *
 * On arrival each group's local batch is assembled (feature = slot, sample =
 * perm(source) * B + b, sharded_internal.h) and ids widen to int64.
 *
 * The device does the work (device/ops_sparse_dist.h: bucketize, mean
 * scales, pack, unpack). The host waits once, for the counts exchange, and
 * reads only counts: its own (to size the data it sends) and the ones it
 * receives (to size what arrives, and each local feature's id count, which
 * the lookup's feature_pos and table_pos need). Offsets and lengths never
 * come back to the host.
 */
#include "shardrec/error.h"
#include "embed/sharded_internal.h"

#define FLAG_WEIGHTS SR_SPARSE_DIST_WEIGHTS
#define FLAG_ERROR   SR_SPARSE_DIST_ERROR
#define FLAG_END     SR_SPARSE_DIST_END

/* The device's view of the batch (on the CPU, the KJT's own arrays). */
static struct sr_sparse_dist_kjt kjt_view(const struct sr_kjt *kjt)
{
    return (struct sr_sparse_dist_kjt){.lengths = kjt->lengths,
                                       .offsets = kjt->offsets,
                                       .values = kjt->values,
                                       .weights = kjt->weights,
                                       .num_values = kjt->num_values};
}

/* ---- counts (host reads, after the counts exchange) ---------------------------- */

static int nslots_of(const struct sr_sharded_ebc *s, int r)
{
    return (int)(s->count_displ[r + 1] - s->count_displ[r] - 1);
}

/* Ids I send to rank r. */
static int64_t ids_to(const struct sr_sharded_ebc *s, int r)
{
    int64_t n = 0;
    for (int p = 0; p < nslots_of(s, r); p++)
        n += s->count_send[s->count_displ[r] + p];
    return n;
}

/* Source src's counts: my slots' ids, then its flags. */
static const int64_t *counts_from(const struct sr_sharded_ebc *s, int src)
{
    return s->count_recv + (size_t)src * (s->sd_layout.nslots_here + 1);
}

static int64_t flags_from(const struct sr_sharded_ebc *s, int src)
{
    return counts_from(s, src)[s->sd_layout.nslots_here];
}

static int64_t ids_from(const struct sr_sharded_ebc *s, int src)
{
    int64_t n = 0;
    for (int p = 0; p < s->sd_layout.nslots_here; p++)
        n += counts_from(s, src)[p];
    return n;
}

/* ---- the two exchanges ------------------------------------------------------------ */

/* Ranks that flagged the end of their data, into the stats; 1 if any. */
static int ended(struct sr_sharded_ebc *s)
{
    s->stats.ranks_ended = 0;
    for (int r = s->W - 1; r >= 0; r--)
        if (flags_from(s, r) & FLAG_END) {
            s->stats.ranks_ended++;
            s->stats.first_ended = r;
        }
    return s->stats.ranks_ended > 0;
}

/* Bucketize on the device, then exchange the counts: the step's host wait. */
static int exchange_counts(struct sr_sharded_ebc *s, const struct sr_kjt *kjt, int local_rc)
{
    const int n = s->sd_layout.nslots_here;
    const int64_t flags = (!local_rc && kjt->weights ? FLAG_WEIGHTS : 0) |
                          (local_rc < 0 ? FLAG_ERROR : 0) |
                          (local_rc == SR_SHARDED_EBC_END_OF_DATA ? FLAG_END : 0);
    struct sr_sparse_dist_kjt k;
    if (!local_rc)
        k = kjt_view(kjt);
    s->sd->bucketize(s->dev, &s->sd_layout, local_rc ? NULL : &k, flags, s->lens, s->count_send,
                     NULL);
    if (!local_rc)
        s->sd->mean_scales(s->dev, &s->sd_layout, kjt->lengths, s->scale, NULL);
    for (int r = 0; r < s->W; r++) {
        s->send_counts[r] = (size_t)(s->count_displ[r + 1] - s->count_displ[r]);
        s->send_displs[r] = (size_t)s->count_displ[r];
        s->recv_counts[r] = (size_t)n + 1;
        s->recv_displs[r] = (size_t)r * (n + 1);
    }
    sr_sharded_before_collective(s, s->comms.sparse);
    sr_comm_all_to_allv(s->comms.sparse, s->count_send, s->send_counts, s->send_displs,
                        s->count_recv, s->recv_counts, s->recv_displs, SR_DTYPE_I64, NULL, NULL);
    if (local_rc < 0)
        return local_rc;
    for (int r = 0; r < s->W; r++)
        if (flags_from(s, r) & FLAG_ERROR)
            return sr_error_set(SR_ERR_DATA,
                                "sharded EBC: rank %d rejected its batch (its log says why); "
                                "this step is skipped on every rank",
                                r);
    return ended(s) ? SR_SHARDED_EBC_END_OF_DATA : SR_OK;
}

/* Send regions from my counts; returns the words I send in all. */
static size_t layout_send(struct sr_sharded_ebc *s, int has_w)
{
    size_t off = 0;
    for (int r = 0; r < s->W; r++) {
        const int64_t ids = ids_to(s, r);
        s->send_displs[r] = off;
        s->send_counts[r] = (size_t)nslots_of(s, r) * s->B + (size_t)ids * (s->id_words + has_w);
        off += s->send_counts[r];
        s->stats.ids_sent += ids;
    }
    SR_ASSERT(off <= s->send_cap);
    return off;
}

/* Receive regions from the counts; returns the words I receive in all. */
static size_t exchange_data(struct sr_sharded_ebc *s)
{
    const size_t nlen = (size_t)s->sd_layout.nslots_here * s->B;
    size_t off = 0;
    for (int r = 0; r < s->W; r++) {
        const int64_t ids = ids_from(s, r);
        const int w = (flags_from(s, r) & FLAG_WEIGHTS) != 0;
        s->recv_displs[r] = off;
        s->recv_counts[r] = nlen + (size_t)ids * (s->id_words + w);
        off += s->recv_counts[r];
        s->stats.ids_received += ids;
    }
    SR_ASSERT(off <= s->recv_cap);
    sr_sharded_before_collective(s, s->comms.sparse);
    sr_comm_all_to_allv(s->comms.sparse, s->send_buf, s->send_counts, s->send_displs, s->recv_buf,
                        s->recv_counts, s->recv_displs, SR_DTYPE_I32, NULL, NULL);
    return off;
}

/* ---- local batches ---------------------------------------------------------------- */

static struct sr_sparse_dist_batch batch_of(const struct group *g)
{
    return (struct sr_sparse_dist_batch){.num_features = g->layout.num_features,
                                         .batch = g->batch,
                                         .pos = g->pos,
                                         .row_of = g->row_of,
                                         .offsets = g->offsets,
                                         .values = g->values,
                                         .weights = g->has_weights ? g->weights : NULL,
                                         .num_values = g->num_values};
}

/* An exchanged group's id counts per local feature: its slot's, every source. */
static void group_counts(const struct sr_sharded_ebc *s, struct group *g)
{
    g->has_weights = 0;
    for (int r = 0; r < s->W; r++)
        g->has_weights |= (flags_from(s, r) & FLAG_WEIGHTS) != 0;
    g->num_values = 0;
    for (int j = 0; j < g->layout.num_features; j++) {
        const int p = s->slots[g->slot_of[j]].pos;
        g->feature_n[j] = 0;
        for (int r = 0; r < s->W; r++)
            g->feature_n[j] += counts_from(s, r)[p];
        g->num_values += g->feature_n[j];
    }
    SR_ASSERT(g->num_values <= g->layout.max_values);
}

/* The dp group's: my own ids of each dp feature (after my counts message). */
static void dp_counts(const struct sr_sharded_ebc *s, struct group *g, const struct sr_kjt *kjt)
{
    g->has_weights = kjt->weights != NULL;
    g->num_values = 0;
    for (int j = 0; j < g->layout.num_features; j++) {
        g->feature_n[j] = s->count_send[s->count_displ[s->W] + j];
        g->num_values += g->feature_n[j];
    }
}

int sr_input_dist(struct sr_sharded_ebc *s, struct sr_kjt *kjt, int local_rc)
{
    s->stats.ids_sent = s->stats.ids_received = 0;
    int rc = exchange_counts(s, kjt, local_rc);
    if (rc)
        return rc;
    const size_t send_words = layout_send(s, kjt->weights != NULL);
    struct group *dp = &s->groups[GROUP_DP];
    dp_counts(s, dp, kjt);
    const struct sr_sparse_dist_kjt k = kjt_view(kjt);
    const struct sr_sparse_dist_batch dpb = batch_of(dp);
    s->sd->pack(s->dev, &s->sd_layout, &k, s->lens, s->count_send, s->send_buf, (int64_t)send_words,
                &dpb, NULL);
    const size_t recv_words = exchange_data(s);
    struct sr_sparse_dist_batch b[GROUP_COUNT];
    int nb = 0;
    for (int g = GROUP_A2A; g < GROUP_COUNT; g++)
        if (s->groups[g].active) {
            group_counts(s, &s->groups[g]);
            b[nb++] = batch_of(&s->groups[g]);
        }
    s->sd->unpack(s->dev, &s->sd_layout, s->recv_buf, (int64_t)recv_words, s->count_recv, b, nb,
                  NULL);
    return SR_OK;
}
