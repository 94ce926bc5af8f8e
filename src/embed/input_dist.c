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
 *
 * Each exchange is split in two stages (sharded_ebc.h): start (device work,
 * then the non-blocking collective) and wait. Everything a batch writes is in
 * its context b (sharded_internal.h), so another batch's stages may run in
 * between. The counts exchange moves host copies of the counts
 * (count_send_host, count_recv_host: the device arrays themselves on a
 * host-visible device; else bucketize's counts are copied out on the stream,
 * and the received ones back in for unpack once they arrive). Its own counts
 * are readable on the host once counts_start has issued the collective: the
 * collective reads them after bucketize and the copy, so the stream was
 * synchronised there (a bound host-memory communicator does it,
 * sr_sharded_before_collective otherwise); the received counts are host
 * memory the transport writes, readable after the wait. The next counts
 * exchange of the context synchronises the stream the same way before the
 * transport rewrites them, so the copy back in has run by then.
 */
#include "shardrec/error.h"
#include "embed/sharded_internal.h"

#define FLAG_WEIGHTS SR_SPARSE_DIST_WEIGHTS
#define FLAG_ERROR   SR_SPARSE_DIST_ERROR
#define FLAG_END     SR_SPARSE_DIST_END

/* The communicator of the input dist (sharded_ebc.h). */
static sr_comm_t in_comm(const struct sr_sharded_ebc *s)
{
    return s->comms.input ? s->comms.input : s->comms.sparse;
}

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
static int64_t ids_to(const struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b, int r)
{
    int64_t n = 0;
    for (int p = 0; p < nslots_of(s, r); p++)
        n += b->count_send_host[s->count_displ[r] + p];
    return n;
}

/* Source src's counts: my slots' ids, then its flags. */
static const int64_t *counts_from(const struct sr_sharded_ebc *s,
                                  const struct sr_sharded_ebc_batch *b, int src)
{
    return b->count_recv_host + (size_t)src * (s->sd_layout.nslots_here + 1);
}

static int64_t flags_from(const struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b,
                          int src)
{
    return counts_from(s, b, src)[s->sd_layout.nslots_here];
}

static int64_t ids_from(const struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b,
                        int src)
{
    int64_t n = 0;
    for (int p = 0; p < s->sd_layout.nslots_here; p++)
        n += counts_from(s, b, src)[p];
    return n;
}

/* ---- the counts exchange ------------------------------------------------------------ */

/* Ranks that flagged the end of their data, into the stats; 1 if any. */
static int ended(struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b)
{
    s->stats.ranks_ended = 0;
    for (int r = s->W - 1; r >= 0; r--)
        if (flags_from(s, b, r) & FLAG_END) {
            s->stats.ranks_ended++;
            s->stats.first_ended = r;
        }
    return s->stats.ranks_ended > 0;
}

/* Hybrid tables' cold rows: to each owner, my bags with ids in its block
 * per hybrid feature (the compact output dist's sizes), in a second small
 * exchange beside the counts'. Its counts arrays: the own_* scratch, which
 * compact_counts_wait then fills with the output dist's. */
static void compact_counts_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const struct sr_sparse_dist_compact *c = &s->hyb.compact;
    const size_t n = (size_t)c->num_features;
    sr_op_sparse_dist_compact_counts(s->dev, c, b->lens, s->num_slots, b->ne_send, b->stream);
    if (b->ne_send_host != b->ne_send)
        sr_dev_copy(s->dev, b->ne_send_host, b->ne_send, sizeof(int64_t) * s->W * n, b->stream);
    for (int r = 0; r < s->W; r++) {
        b->own_counts[r] = b->smp_counts[r] = n;
        b->own_displs[r] = b->smp_displs[r] = (size_t)r * n;
    }
    sr_sharded_before_collective(s, in_comm(s), b->stream);
    sr_comm_all_to_allv(in_comm(s), b->ne_send_host, b->own_counts, b->own_displs, b->ne_recv_host,
                        b->smp_counts, b->smp_displs, SR_DTYPE_I64, b->stream, &b->ne_work);
}

/* The compact output dist's floats per peer: as an owner, what each source's
 * bags hold here; as a sample rank, what mine hold at each owner. */
static void compact_counts_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const int n = s->hyb.compact.num_features;
    const int32_t *cols = s->hyb.compact_cols;
    sr_comm_wait(in_comm(s), b->ne_work);
    b->ne_work = NULL;
    b->own_words = b->smp_words = 0;
    for (int r = 0; r < s->W; r++) {
        int64_t own = 0, smp = 0;
        for (int k = 0; k < n; k++) {
            own += b->ne_recv_host[(size_t)r * n + k] * cols[k];
            smp += b->ne_send_host[(size_t)r * n + k] * cols[k];
        }
        b->own_counts[r] = (size_t)own;
        b->own_displs[r] = (size_t)b->own_words;
        b->smp_counts[r] = (size_t)smp;
        b->smp_displs[r] = (size_t)b->smp_words;
        b->own_words += own;
        b->smp_words += smp;
    }
}

/* Bucketize on the device, then start the exchange of the counts. */
void sr_input_dist_counts_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                struct sr_kjt *kjt, int local_rc)
{
    const int n = s->sd_layout.nslots_here;
    const int64_t flags = (!local_rc && kjt->weights ? FLAG_WEIGHTS : 0) |
                          (local_rc < 0 ? FLAG_ERROR : 0) |
                          (local_rc == SR_SHARDED_EBC_END_OF_DATA ? FLAG_END : 0);
    const int32_t *full = NULL; /* the bags' full lengths, for mean pooling */
    if (!local_rc) {
        full = kjt->lengths;
        kjt = sr_sharded_hybrid_split(s, b, kjt); /* hybrid tables: hot and cold ids apart */
        full = kjt == &b->xkjt ? b->x_full : full;
    }
    b->kjt = local_rc ? NULL : kjt;
    b->local_rc = local_rc;
    struct sr_sparse_dist_kjt k;
    if (!local_rc)
        k = kjt_view(kjt);
    sr_op_sparse_dist_bucketize(s->dev, &s->sd_layout, local_rc ? NULL : &k, flags, b->lens,
                                b->count_send, b->stream);
    if (!local_rc)
        sr_op_sparse_dist_mean_scales(s->dev, &s->sd_layout, full, b->scale, b->stream);
    for (int r = 0; r < s->W; r++) {
        b->send_counts[r] = (size_t)(s->count_displ[r + 1] - s->count_displ[r]);
        b->send_displs[r] = (size_t)s->count_displ[r];
        b->recv_counts[r] = (size_t)n + 1;
        b->recv_displs[r] = (size_t)r * (n + 1);
    }
    if (b->count_send_host != b->count_send)
        sr_dev_copy(s->dev, b->count_send_host, b->count_send,
                    sizeof(int64_t) * (size_t)s->sd_layout.count_words, b->stream);
    sr_sharded_before_collective(s, in_comm(s), b->stream);
    sr_comm_all_to_allv(in_comm(s), b->count_send_host, b->send_counts, b->send_displs,
                        b->count_recv_host, b->recv_counts, b->recv_displs, SR_DTYPE_I64, b->stream,
                        &b->counts_work);
    if (s->hyb.compact.num_features > 0)
        compact_counts_start(s, b);
}

/* ---- host metadata of a batch, from the counts ------------------------------------- */

/* Send regions from my counts. */
static void layout_send(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const int has_w = b->kjt->weights != NULL;
    size_t off = 0;
    for (int r = 0; r < s->W; r++) {
        const int64_t ids = ids_to(s, b, r);
        b->send_displs[r] = off;
        b->send_counts[r] = (size_t)nslots_of(s, r) * s->B + (size_t)ids * (s->id_words + has_w);
        off += b->send_counts[r];
        s->stats.ids_sent += ids;
    }
    SR_ASSERT(off <= s->send_cap);
    b->send_words = off;
}

/* Receive regions from the counts. */
static void layout_recv(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const size_t nlen = (size_t)s->sd_layout.nslots_here * s->B;
    size_t off = 0;
    for (int r = 0; r < s->W; r++) {
        const int64_t ids = ids_from(s, b, r);
        const int w = (flags_from(s, b, r) & FLAG_WEIGHTS) != 0;
        b->recv_displs[r] = off;
        b->recv_counts[r] = nlen + (size_t)ids * (s->id_words + w);
        off += b->recv_counts[r];
        s->stats.ids_received += ids;
    }
    SR_ASSERT(off <= s->recv_cap);
    b->recv_words = off;
}

/* An exchanged group's id counts per local feature: its slot's, every source. */
static void group_counts(const struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b,
                         const struct group *g, struct group_batch *gb)
{
    gb->has_weights = 0;
    for (int r = 0; r < s->W; r++)
        gb->has_weights |= (flags_from(s, b, r) & FLAG_WEIGHTS) != 0;
    gb->num_values = 0;
    for (int j = 0; j < g->layout.num_features; j++) {
        const int p = s->slots[g->slot_of[j]].pos;
        gb->feature_n[j] = 0;
        for (int r = 0; r < s->W; r++)
            gb->feature_n[j] += counts_from(s, b, r)[p];
        gb->num_values += gb->feature_n[j];
    }
    SR_ASSERT(gb->num_values <= g->layout.max_values);
}

/* The dp group's: my own ids of each dp feature (after my counts message). */
static void dp_counts(const struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b,
                      const struct group *g, struct group_batch *gb)
{
    gb->has_weights = b->kjt->weights != NULL;
    gb->num_values = 0;
    for (int j = 0; j < g->layout.num_features; j++) {
        gb->feature_n[j] = b->count_send_host[s->count_displ[s->W] + j];
        gb->num_values += gb->feature_n[j];
    }
}

void sr_input_dist_positions(const struct group *g, struct group_batch *gb)
{
    const int T = g->num_tables, F = g->layout.num_features;
    for (int t = 0; t <= T; t++)
        gb->table_pos[t] = 0;
    for (int f = 0; f < F; f++)
        gb->table_pos[g->features[f].table + 1] += gb->feature_n[f];
    for (int t = 0; t < T; t++) {
        gb->table_pos[t + 1] += gb->table_pos[t];
        gb->cursor[t] = gb->table_pos[t];
    }
    for (int f = 0; f < F; f++) {
        int t = g->features[f].table;
        gb->feature_pos[f] = gb->cursor[t];
        gb->cursor[t] += gb->feature_n[f];
    }
}

static void batch_meta(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    layout_send(s, b);
    layout_recv(s, b);
    dp_counts(s, b, &s->groups[GROUP_DP], &b->gb[GROUP_DP]);
    for (int g = GROUP_A2A; g < GROUP_COUNT; g++)
        if (s->groups[g].active)
            group_counts(s, b, &s->groups[g], &b->gb[g]);
    for (int g = 0; g < GROUP_COUNT; g++)
        sr_input_dist_positions(&s->groups[g], &b->gb[g]);
}

int sr_input_dist_counts_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    sr_comm_wait(in_comm(s), b->counts_work);
    b->counts_work = NULL;
    if (s->hyb.compact.num_features > 0)
        compact_counts_wait(s, b);
    if (b->count_recv_host != b->count_recv) /* for unpack, in stream order */
        sr_dev_copy(s->dev, b->count_recv, b->count_recv_host,
                    sizeof(int64_t) * (size_t)s->W * (s->sd_layout.nslots_here + 1), b->stream);
    s->stats.ids_sent = s->stats.ids_received = 0;
    if (b->local_rc < 0)
        return b->local_rc;
    for (int r = 0; r < s->W; r++)
        if (flags_from(s, b, r) & FLAG_ERROR)
            return sr_error_set(SR_ERR_DATA,
                                "sharded EBC: rank %d rejected its batch (its log says why); "
                                "this step is skipped on every rank",
                                r);
    if (ended(s, b))
        return SR_SHARDED_EBC_END_OF_DATA;
    batch_meta(s, b);
    return SR_OK;
}

/* ---- the data exchange and the local batches ------------------------------------- */

static struct sr_sparse_dist_batch batch_of(const struct group *g, const struct group_batch *gb)
{
    return (struct sr_sparse_dist_batch){.num_features = g->layout.num_features,
                                         .batch = g->batch,
                                         .pos = g->pos,
                                         .row_of = g->row_of,
                                         .offsets = gb->offsets,
                                         .values = gb->values,
                                         .weights = gb->has_weights ? gb->weights : NULL,
                                         .num_values = gb->num_values};
}

void sr_input_dist_data_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    const struct sr_sparse_dist_kjt k = kjt_view(b->kjt);
    const struct sr_sparse_dist_batch dpb = batch_of(&s->groups[GROUP_DP], &b->gb[GROUP_DP]);
    sr_op_sparse_dist_pack(s->dev, &s->sd_layout, &k, b->lens, b->count_send, b->send_buf,
                           (int64_t)b->send_words, &dpb, b->stream);
    b->kjt = NULL; /* pack has read it once the collective below reads send_buf */
    sr_sharded_before_collective(s, in_comm(s), b->stream);
    sr_comm_all_to_allv(in_comm(s), b->send_buf, b->send_counts, b->send_displs, b->recv_buf,
                        b->recv_counts, b->recv_displs, SR_DTYPE_I32, b->stream, &b->data_work);
}

void sr_input_dist_data_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    sr_sharded_complete(s, in_comm(s), &b->data_work, b->stream);
    struct sr_sparse_dist_batch bs[GROUP_COUNT];
    int nb = 0;
    for (int g = GROUP_A2A; g < GROUP_COUNT; g++)
        if (s->groups[g].active)
            bs[nb++] = batch_of(&s->groups[g], &b->gb[g]);
    sr_op_sparse_dist_unpack(s->dev, &s->sd_layout, b->recv_buf, (int64_t)b->recv_words,
                             b->count_recv, bs, nb, b->stream);
}
