/*
 * Sharded EBC: gathering one table's shards onto rank 0 (for saving weights).
 * Each rank packs the shards it owns, in shard order, into one contiguous
 * buffer; one all-to-all-v on the sparse communicator brings every rank's
 * buffer to rank 0, which places each shard's (rows, cols) block at its row
 * and column offsets in the caller's (E, D) host table. dp tables are whole
 * on every rank: rank 0 copies its own.
 *
 * Checkpoints read and write each rank's shards where they are instead:
 * sr_sharded_ebc_local_shard lists them (weights and optimizer state).
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "device/emb_storage.h"
#include "embed/sharded_internal.h"

/* Copy table t's shards that `rank` owns, in shard order, to or from buf. */
static size_t shard_floats_at(const struct sr_table_plan *tp, int rank)
{
    size_t n = 0;
    for (int j = 0; j < tp->num_shards; j++)
        if (tp->shards[j].rank == rank)
            n += (size_t)tp->shards[j].rows * tp->shards[j].cols;
    return n;
}

static void pack_my_shards(struct sr_sharded_ebc *s, int t, float *buf)
{
    const struct sr_table_plan *tp = &s->plan->tables[t];
    const struct group *g = &s->groups[sr_sharded_group_of(tp->type)];
    size_t off = 0;
    for (int j = 0; j < tp->num_shards; j++) {
        if (tp->shards[j].rank != s->rank)
            continue;
        const struct sr_emb_table *tab = &g->tables[sr_sharded_local_table(g, t, j)];
        size_t n = (size_t)tab->rows * tab->dim;
        if (tab->dtype == SR_DTYPE_F32) {
            sr_dev_copy(s->dev, buf + off, tab->weight, sizeof(float) * n, NULL);
        } else { /* 16-bit: into the top half of its floats, widened front to back */
            const uint16_t *raw = (const uint16_t *)(buf + off) + n;
            sr_dev_copy(s->dev, (void *)raw, tab->weight, 2 * n, NULL);
            sr_dev_sync(s->dev, NULL);
            for (size_t i = 0; i < n; i++)
                buf[off + i] = sr_emb_get(raw, tab->dtype, (int64_t)i);
        }
        off += n;
    }
}

static void unpack_shards(const struct sr_sharded_ebc *s, int t, const float *recv, float *full)
{
    const struct sr_table_plan *tp = &s->plan->tables[t];
    const int D = s->cfg.tables[t].embedding_dim;
    for (int r = 0; r < s->W; r++)
        for (int j = 0; j < tp->num_shards; j++) {
            const struct sr_shard *sh = &tp->shards[j];
            if (sh->rank != r)
                continue;
            for (int64_t i = 0; i < sh->rows; i++)
                memcpy(full + (sh->row_offset + i) * D + sh->col_offset, recv + i * sh->cols,
                       sizeof(float) * sh->cols);
            recv += (size_t)sh->rows * sh->cols;
        }
}

int sr_sharded_ebc_gather_table(struct sr_sharded_ebc *s, int t, float *full)
{
    if (t < 0 || t >= sr_sharded_user_cfg(s)->num_tables)
        return sr_error_set(SR_ERR_INVALID_ARG, "sharded EBC: no table %d", t);
    sr_sharded_ebc_hot_rows_out(s, NULL); /* hybrid tables: the replica's rows into the shards */
    const struct sr_table_plan *tp = &s->plan->tables[t];
    const struct sr_table_config *tc = &s->cfg.tables[t];
    if (s->rank == 0 && !full)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: gather of '%s' needs a buffer on "
                            "rank 0",
                            tc->name);
    if (tp->type == SR_SHARDING_TYPE_DATA_PARALLEL) {
        if (s->rank == 0)
            pack_my_shards(s, t, full);
        sr_dev_sync(s->dev, NULL); /* full is the caller's host buffer */
        return SR_OK;
    }
    size_t mine = shard_floats_at(tp, s->rank);
    float *send = sr_malloc(sizeof(float) * (mine + 1));
    float *recv =
        s->rank == 0
            ? sr_malloc(sizeof(float) * ((size_t)tc->num_embeddings * tc->embedding_dim + 1))
            : NULL;
    size_t *c = sr_calloc((size_t)4 * s->W, sizeof(size_t));
    size_t off = 0;
    for (int r = 0; s->rank == 0 && r < s->W; r++) {
        c[2 * s->W + r] = shard_floats_at(tp, r);
        c[3 * s->W + r] = off;
        off += c[2 * s->W + r];
    }
    c[0] = mine;
    pack_my_shards(s, t, send);
    sr_sharded_before_collective(s, s->comms.sparse, NULL); /* the copies into send have run */
    sr_comm_all_to_allv(s->comms.sparse, send, c, c + s->W, recv, c + 2 * s->W, c + 3 * s->W,
                        SR_DTYPE_F32, NULL, NULL);
    if (s->rank == 0)
        unpack_shards(s, t, recv, full);
    sr_free(c);
    sr_free(recv);
    sr_free(send);
    return SR_OK;
}

/* Local tables of group g that are shards of the caller's tables (the dp
 * group's last T_h are hybrid tables' replicas: not shards of their own). */
static int shards_of(const struct sr_sharded_ebc *s, int g)
{
    return s->groups[g].num_tables - (g == GROUP_DP ? s->hyb.num_tables : 0);
}

int sr_sharded_ebc_num_local_shards(const struct sr_sharded_ebc *s)
{
    int n = 0;
    for (int g = 0; g < GROUP_COUNT; g++)
        n += shards_of(s, g);
    return n;
}

void sr_sharded_ebc_local_shard(const struct sr_sharded_ebc *s, int i,
                                struct sr_sharded_ebc_shard *out)
{
    int g = 0;
    while (g < GROUP_COUNT && i >= shards_of(s, g))
        i -= shards_of(s, g++);
    SR_ASSERT(g < GROUP_COUNT && i >= 0);
    const struct group *gr = &s->groups[g];
    const struct sr_emb_table *tab = &gr->tables[i];
    int per_row = 0;
    int per_elem = sr_optim_state_per_element(s->optim.kind, &per_row);
    out->table = gr->table_of[i];
    out->shard = g == GROUP_DP ? -1 : gr->shard_of[i];
    out->rows = tab->rows;
    out->dim = tab->dim;
    out->weight = tab->weight;
    out->dtype = tab->dtype;
    out->state = tab->state;
    out->state_floats = !tab->state ? 0
                        : per_row   ? (size_t)tab->rows
                                    : (size_t)per_elem * (size_t)tab->rows * (size_t)tab->dim;
}
