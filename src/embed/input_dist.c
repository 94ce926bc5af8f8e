/*
 * Input dist (DESIGN.md step 3, the KJT all-to-all): every id of this rank's
 * batch goes to the shard that owns its row, in two collectives for all
 * tables and sharding types at once:
 *
 *   1. counts   all-to-all-v of 2 int64 per peer: { ids sent, flags }, flags
 *               bit 0 = per-id weights follow, bit 1 = this rank rejected its
 *               batch (then every rank stops here with an error, none hangs),
 *               bit 2 = this rank's data has ended (then every rank stops
 *               here, at the same step, without an error)
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
 * perm(source) * B + b, sharded_internal.h) and ids widen to int64 for the
 * device ops.
 */
#include <string.h>

#include "shardrec/error.h"
#include "embed/sharded_internal.h"

#define FLAG_WEIGHTS 1
#define FLAG_ERROR   2
#define FLAG_END     4

/* ---- sender side ----------------------------------------------------------- */

/* lens[slot, b]: how many ids of my sample b go into each slot. */
static void bucketize(struct sr_sharded_ebc *s, const struct sr_kjt *kjt)
{
    const int B = s->B;
    memset(s->lens, 0, sizeof *s->lens * (size_t)s->num_slots * B);
    for (int f = 0; f < s->cfg.num_features; f++) {
        const int fs = s->first_slot[f];
        if (fs < 0)
            continue;
        const int nsh = s->plan->tables[s->cfg.feature_table[f]].num_shards;
        if (s->slots[fs].group == GROUP_A2A) {
            for (int j = 0; j < nsh; j++)
                memcpy(s->lens + (size_t)(fs + j) * B, kjt->lengths + (size_t)f * B,
                       sizeof(int32_t) * B);
            continue;
        }
        const int64_t blk = s->block[f];
        for (int b = 0; b < B; b++)
            for (int64_t i = sr_kjt_bag_begin(kjt, f, b); i < sr_kjt_bag_end(kjt, f, b); i++)
                s->lens[(size_t)(fs + kjt->values[i] / blk) * B + b]++;
    }
    for (int sl = 0; sl < s->num_slots; sl++) {
        int64_t n = 0;
        for (int b = 0; b < B; b++)
            n += s->lens[(size_t)sl * B + b];
        s->slot_n[sl] = n;
    }
}

static int64_t ids_to(const struct sr_sharded_ebc *s, int r)
{
    int64_t n = 0;
    for (int p = 0; p < s->nslots_at[r]; p++)
        n += s->slot_n[s->slot_at[r * s->max_nslots + p]];
    return n;
}

/* Regions of the send buffer: lengths copied in, cursors set for the ids. */
static void layout_send(struct sr_sharded_ebc *s, int has_w)
{
    const int B = s->B;
    size_t off = 0;
    for (int r = 0; r < s->W; r++) {
        const int64_t n = s->count_send[2 * r];
        const size_t nlen = (size_t)s->nslots_at[r] * B;
        s->send_displs[r] = off;
        s->send_counts[r] = nlen + (size_t)n * (s->id_words + has_w);
        SR_ASSERT(off + s->send_counts[r] <= s->send_cap);
        int64_t ids = (int64_t)(off + nlen), w = ids + n * s->id_words;
        for (int p = 0; p < s->nslots_at[r]; p++) {
            const int sl = s->slot_at[r * s->max_nslots + p];
            memcpy(s->send_buf + off + (size_t)p * B, s->lens + (size_t)sl * B,
                   sizeof(int32_t) * B);
            s->slot_cursor[sl] = ids;
            s->slot_wcursor[sl] = w;
            ids += s->slot_n[sl] * s->id_words;
            w += s->slot_n[sl];
        }
        off += s->send_counts[r];
    }
}

static inline void put_id(struct sr_sharded_ebc *s, int sl, int64_t row, const float *w)
{
    int64_t at = s->slot_cursor[sl];
    s->send_buf[at] = (int32_t)(uint32_t)row;
    if (s->id_words == 2)
        s->send_buf[at + 1] = (int32_t)(uint32_t)((uint64_t)row >> 32);
    s->slot_cursor[sl] = at + s->id_words;
    if (w)
        memcpy(&s->send_buf[s->slot_wcursor[sl]++], w, sizeof(float));
}

/* Ids (and weights) into their slots' regions, bag by bag. */
static void pack_ids(struct sr_sharded_ebc *s, const struct sr_kjt *kjt)
{
    for (int f = 0; f < s->cfg.num_features; f++) {
        const int fs = s->first_slot[f];
        if (fs < 0)
            continue;
        const int64_t lo = sr_kjt_bag_begin(kjt, f, 0), hi = sr_kjt_bag_begin(kjt, f, s->B);
        const int nsh = s->plan->tables[s->cfg.feature_table[f]].num_shards;
        if (s->slots[fs].group == GROUP_A2A) {
            for (int j = 0; j < nsh; j++)
                for (int64_t i = lo; i < hi; i++)
                    put_id(s, fs + j, kjt->values[i], kjt->weights ? &kjt->weights[i] : NULL);
            continue;
        }
        const int64_t blk = s->block[f];
        for (int64_t i = lo; i < hi; i++) {
            const int64_t j = kjt->values[i] / blk;
            put_id(s, fs + (int)j, kjt->values[i] - j * blk,
                   kjt->weights ? &kjt->weights[i] : NULL);
        }
    }
}

/* ---- the two exchanges ------------------------------------------------------ */

/* Ranks that flagged the end of their data, into the stats; 1 if any. */
static int ended(struct sr_sharded_ebc *s)
{
    s->stats.ranks_ended = 0;
    for (int r = s->W - 1; r >= 0; r--)
        if (s->count_recv[2 * r + 1] & FLAG_END) {
            s->stats.ranks_ended++;
            s->stats.first_ended = r;
        }
    return s->stats.ranks_ended > 0;
}

static int exchange_counts(struct sr_sharded_ebc *s, int local_rc, int has_w)
{
    const int64_t flags = (has_w ? FLAG_WEIGHTS : 0) | (local_rc < 0 ? FLAG_ERROR : 0) |
                          (local_rc == SR_SHARDED_EBC_END_OF_DATA ? FLAG_END : 0);
    for (int r = 0; r < s->W; r++) {
        s->count_send[2 * r] = local_rc ? 0 : ids_to(s, r);
        s->count_send[2 * r + 1] = flags;
        s->send_counts[r] = s->recv_counts[r] = 2;
        s->send_displs[r] = s->recv_displs[r] = (size_t)2 * r;
    }
    sr_comm_all_to_allv(s->comms.sparse, s->count_send, s->send_counts, s->send_displs,
                        s->count_recv, s->recv_counts, s->recv_displs, SR_DTYPE_I64, NULL, NULL);
    if (local_rc < 0)
        return local_rc;
    for (int r = 0; r < s->W; r++)
        if (s->count_recv[2 * r + 1] & FLAG_ERROR)
            return sr_error_set(SR_ERR_DATA,
                                "sharded EBC: rank %d rejected its batch (its log says why); "
                                "this step is skipped on every rank",
                                r);
    return ended(s) ? SR_SHARDED_EBC_END_OF_DATA : SR_OK;
}

static void exchange_data(struct sr_sharded_ebc *s)
{
    const size_t nlen = (size_t)s->nslots_at[s->rank] * s->B;
    size_t off = 0;
    for (int r = 0; r < s->W; r++) {
        const int64_t n = s->count_recv[2 * r];
        const int w = (s->count_recv[2 * r + 1] & FLAG_WEIGHTS) != 0;
        s->recv_displs[r] = off;
        s->recv_counts[r] = nlen + (size_t)n * (s->id_words + w);
        off += s->recv_counts[r];
        s->stats.ids_received += n;
    }
    SR_ASSERT(off <= s->recv_cap);
    sr_comm_all_to_allv(s->comms.sparse, s->send_buf, s->send_counts, s->send_displs, s->recv_buf,
                        s->recv_counts, s->recv_displs, SR_DTYPE_I32, NULL, NULL);
}

/* ---- receiver side -------------------------------------------------------- */

static const int32_t *recv_lens(const struct sr_sharded_ebc *s, int src, int p)
{
    return s->recv_buf + s->recv_displs[src] + (size_t)p * s->B;
}

/* recv_slot_start[src, p]: index of the first id of my slot p in src's region. */
static void slot_starts(struct sr_sharded_ebc *s)
{
    const int n = s->nslots_at[s->rank];
    for (int src = 0; src < s->W; src++) {
        int64_t at = 0;
        for (int p = 0; p < n; p++) {
            s->recv_slot_start[src * s->max_nslots + p] = at;
            const int32_t *l = recv_lens(s, src, p);
            for (int b = 0; b < s->B; b++)
                at += l[b];
        }
    }
}

static void offsets_of(struct group *g)
{
    const int64_t nbags = (int64_t)g->layout.num_features * g->batch;
    g->offsets[0] = 0;
    for (int64_t k = 0; k < nbags; k++)
        g->offsets[k + 1] = g->offsets[k] + g->lengths[k];
    g->num_values = g->offsets[nbags];
}

/* Ids (widened) and weights of (my slot p, source src) into the group batch. */
static void copy_ids(const struct sr_sharded_ebc *s, struct group *g, int p, int src, int64_t dst,
                     int64_t n)
{
    const size_t nlen = (size_t)s->nslots_at[s->rank] * s->B;
    const int64_t start = s->recv_slot_start[src * s->max_nslots + p];
    const int32_t *region = s->recv_buf + s->recv_displs[src] + nlen;
    const int32_t *ids = region + start * s->id_words;
    for (int64_t i = 0; i < n; i++)
        g->values[dst + i] = s->id_words == 1 ? (int64_t)(uint32_t)ids[i]
                                              : (int64_t)((uint64_t)(uint32_t)ids[2 * i] |
                                                          (uint64_t)(uint32_t)ids[2 * i + 1] << 32);
    if (!g->has_weights)
        return;
    if (s->count_recv[2 * src + 1] & FLAG_WEIGHTS)
        memcpy(g->weights + dst, region + s->count_recv[2 * src] * s->id_words + start,
               sizeof(float) * (size_t)n);
    else
        for (int64_t i = 0; i < n; i++)
            g->weights[dst + i] = 1.0f;
}

static void fill_group(struct sr_sharded_ebc *s, struct group *g)
{
    const int B = s->B, F = g->layout.num_features;
    g->has_weights = 0;
    for (int r = 0; r < s->W; r++)
        g->has_weights |= (s->count_recv[2 * r + 1] & FLAG_WEIGHTS) != 0;
    for (int j = 0; j < F; j++) {
        const int p = s->slots[g->slot_of[j]].pos;
        for (int src = 0; src < s->W; src++)
            memcpy(g->lengths + (size_t)j * g->batch + (size_t)sr_sharded_perm(s, g->kind, src) * B,
                   recv_lens(s, src, p), sizeof(int32_t) * B);
    }
    offsets_of(g);
    for (int j = 0; j < F; j++) {
        const int p = s->slots[g->slot_of[j]].pos;
        for (int src = 0; src < s->W; src++) {
            const int64_t k = (int64_t)j * g->batch + (int64_t)sr_sharded_perm(s, g->kind, src) * B;
            copy_ids(s, g, p, src, g->offsets[k], g->offsets[k + B] - g->offsets[k]);
        }
    }
}

/* The dp group's batch: my own bags of the dp features. */
static void fill_dp(struct sr_sharded_ebc *s, struct group *g, const struct sr_kjt *kjt)
{
    const int B = s->B, F = g->layout.num_features;
    g->has_weights = kjt->weights != NULL;
    for (int j = 0; j < F; j++)
        memcpy(g->lengths + (size_t)j * B, kjt->lengths + (size_t)g->slot_of[j] * B,
               sizeof(int32_t) * B);
    offsets_of(g);
    for (int j = 0; j < F; j++) {
        const int64_t lo = sr_kjt_bag_begin(kjt, g->slot_of[j], 0);
        const int64_t n = g->offsets[(int64_t)(j + 1) * B] - g->offsets[(int64_t)j * B];
        memcpy(g->values + g->offsets[(int64_t)j * B], kjt->values + lo, sizeof(int64_t) * n);
        if (kjt->weights)
            memcpy(g->weights + g->offsets[(int64_t)j * B], kjt->weights + lo, sizeof(float) * n);
    }
}

int sr_input_dist(struct sr_sharded_ebc *s, struct sr_kjt *kjt, int local_rc)
{
    const int has_w = !local_rc && kjt->weights != NULL;
    s->stats.ids_sent = s->stats.ids_received = 0;
    if (!local_rc)
        bucketize(s, kjt);
    int rc = exchange_counts(s, local_rc, has_w);
    if (rc)
        return rc;
    layout_send(s, has_w);
    pack_ids(s, kjt);
    for (int r = 0; r < s->W; r++)
        s->stats.ids_sent += s->count_send[2 * r];
    exchange_data(s);
    slot_starts(s);
    for (int k = GROUP_A2A; k < GROUP_COUNT; k++)
        if (s->groups[k].active)
            fill_group(s, &s->groups[k]);
    fill_dp(s, &s->groups[GROUP_DP], kjt);
    return SR_OK;
}
