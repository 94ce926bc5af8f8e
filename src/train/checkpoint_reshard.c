/*
 * --resume under another world size or plan: every shard this rank holds
 * under the run's plan is filled, weights and optimizer state, from the
 * blocks of the checkpoint's shards that overlap it. At the same world size
 * and plan each shard overlaps exactly its own old self, so the same code
 * gives a bit-exact resume.
 *
 *   old plan (3 ranks, tw/rw)           new shard (rank 1 of 2, rw): rows [5, 10)
 *   rank-00000: t2.shard0 rows [0, 4)      rows [5, 8) from rank-00001's shard1
 *   rank-00001: t2.shard1 rows [4, 8)  ->  rows [8, 10) from rank-00002's shard2
 *   rank-00002: t2.shard2 rows [8, 12)
 *
 * Blocks intersect in rows (rw, twrw) and in columns (cw); a dp table is
 * read from one rank's copy (this rank modulo the old world size, spreading
 * the reads). Optimizer state moves with its rows: per element (adagrad;
 * adam's m then v, two planes) like the weights, per row (rowwise adagrad)
 * by rows alone; eval takes the weights alone. A rank opens only the old
 * rank files that hold a block it needs, mapped (safetensors.c), so it reads
 * those blocks' pages and no more; no rank gathers a table.
 */
#include <inttypes.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"
#include "device/emb_storage.h"
#include "train/checkpoint.h"
#include "train/checkpoint_format.h"
#include "train/trainer_internal.h"

#define HINT_REDO "HINT: the checkpoint was damaged or edited; resume from an earlier one"

struct source {
    const struct sr_ckpt *ck;
    const struct sr_plan *plan; /* the checkpoint's */
    struct sr_st_file **files;  /* (old W) opened on first use */
    enum sr_optim_kind kind;
    int weights_only; /* eval: the optimizer state is neither read nor copied */
};

static int open_file(struct source *S, int rank, struct sr_st_file **out)
{
    char name[64], path[SR_CKPT_DIR_CAP + 64];
    if (!S->files[rank]) {
        sr_ckpt_rank_file(name, sizeof name, rank);
        snprintf(path, sizeof path, "%s/%s", S->ck->dir, name);
        int rc = sr_st_open(&S->files[rank], path);
        if (rc)
            return rc;
    }
    *out = S->files[rank];
    return SR_OK;
}

/* Tensor `name` of f, holding exactly n values (weights may be F16 or
 * BF16; the optimizer state is F32: `f32`). */
static int find_tensor(const struct sr_st_file *f, const char *name, int64_t n, int f32,
                       struct sr_st_tensor *t)
{
    int rc = sr_st_find_any(f, name, t);
    if (rc)
        return sr_error_set(SR_ERR_DATA, "%s; %s", sr_error_message(), HINT_REDO);
    if (f32 && t->dtype != SR_DTYPE_F32)
        return sr_error_set(SR_ERR_DATA, "%s: tensor %s is %s, not F32; %s", sr_st_path(f), name,
                            sr_st_dtype_name(t->dtype), HINT_REDO);
    if (sr_st_numel(t->ndim, t->shape) != n)
        return sr_error_set(SR_ERR_DATA,
                            "%s: tensor %s holds %" PRId64 " values, its shard in the "
                            "checkpoint's plan %" PRId64 "; %s",
                            sr_st_path(f), name, sr_st_numel(t->ndim, t->shape), n, HINT_REDO);
    return SR_OK;
}

/* Rows [r0, r1) x columns [c0, c1) of weights `src` (shard `from`, dtype sd)
 * into `dst` (shard `to`, dtype dd): copied when the dtypes agree, else
 * widened (exact) or narrowed to nearest even (--emb-dtype changed on resume). */
static void copy_weights(const void *src, enum sr_dtype sd, const struct sr_shard *from,
                         void *dst, enum sr_dtype dd, const struct sr_shard *to, int64_t r0,
                         int64_t r1, int c0, int c1)
{
    const size_t se = (size_t)sr_st_dtype_bytes(sd), de = (size_t)sr_st_dtype_bytes(dd);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i = (r - from->row_offset) * from->cols + (c0 - from->col_offset);
        const int64_t o = (r - to->row_offset) * to->cols + (c0 - to->col_offset);
        if (sd == dd) {
            memcpy((char *)dst + (size_t)o * de, (const char *)src + (size_t)i * se,
                   se * (size_t)(c1 - c0));
            continue;
        }
        for (int c = 0; c < c1 - c0; c++)
            sr_emb_put(dst, dd, o + c, sr_emb_get(src, sd, i + c), 0, 0);
    }
}

/* Old shard j of table t: its block of the new shard `to` (weight w of dtype
 * wd, state s). */
static int copy_overlap(struct source *S, int t, int j, const struct sr_shard *to, void *w,
                        enum sr_dtype wd, float *s, int64_t *covered)
{
    const struct sr_table_plan *tp = &S->plan->tables[t];
    const struct sr_shard *from = &tp->shards[j];
    int64_t r0 = from->row_offset > to->row_offset ? from->row_offset : to->row_offset;
    int64_t r1 = from->row_offset + from->rows < to->row_offset + to->rows
                     ? from->row_offset + from->rows
                     : to->row_offset + to->rows;
    int c0 = from->col_offset > to->col_offset ? from->col_offset : to->col_offset;
    int c1 = from->col_offset + from->cols < to->col_offset + to->cols ? from->col_offset + from->cols
                                                                        : to->col_offset + to->cols;
    if (r1 <= r0 || c1 <= c0)
        return SR_OK;
    struct sr_st_file *f;
    struct sr_st_tensor wt, st;
    char name[SR_CKPT_NAME_CAP];
    int shard = tp->type == SR_SHARDING_TYPE_DATA_PARALLEL ? -1 : j, planes, rc;
    int64_t per_old, per_new;
    if ((rc = open_file(S, from->rank, &f)))
        return rc;
    sr_ckpt_shard_name(name, tp->name, shard, "weight");
    if ((rc = find_tensor(f, name, from->rows * from->cols, 0, &wt)))
        return rc;
    copy_weights(wt.data, wt.dtype, from, w, wd, to, r0, r1, c0, c1);
    *covered += (r1 - r0) * (c1 - c0);
    sr_ckpt_state_layout(S->kind, from->rows, from->cols, &planes, &per_old);
    sr_ckpt_state_layout(S->kind, to->rows, to->cols, &planes, &per_new);
    if (!planes || S->weights_only)
        return SR_OK;
    sr_ckpt_shard_name(name, tp->name, shard, "state");
    if ((rc = find_tensor(f, name, planes * per_old, 1, &st)))
        return rc;
    const float *src = st.data;
    int by_row = 0;
    sr_optim_state_per_element(S->kind, &by_row);
    struct sr_shard rf = *from, rt = *to; /* row-wise state: one column per row */
    rf.col_offset = rt.col_offset = 0, rf.cols = rt.cols = 1;
    for (int p = 0; p < planes; p++) {
        if (by_row)
            sr_ckpt_copy_block(src + p * per_old, &rf, s + p * per_new, &rt, r0, r1, 0, 1);
        else
            sr_ckpt_copy_block(src + p * per_old, from, s + p * per_new, to, r0, r1, c0, c1);
    }
    return SR_OK;
}

/* n bytes of host memory to the device through the pinned buffer, in pieces. */
static void to_device(struct sr_trainer *t, void *dst, const void *src, size_t n)
{
    const size_t cap = sizeof(float) * t->ckpt.staging_floats;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < cap ? n - done : cap;
        memcpy(t->ckpt.staging, (const char *)src + done, k);
        sr_dev_copy(t->dev, (char *)dst + done, t->ckpt.staging, k, NULL);
        sr_dev_sync(t->dev, NULL);
        done += k;
    }
}

static int load_shard(struct sr_trainer *t, struct source *S, const struct sr_sharded_ebc_shard *sh)
{
    const struct sr_table_plan *np = &t->plan->tables[sh->table];
    const struct sr_table_plan *op = &S->plan->tables[sh->table];
    struct sr_shard to = sh->shard >= 0 ? np->shards[sh->shard]
                                        : (struct sr_shard){.rank = t->rank, .rows = sh->rows,
                                                            .cols = sh->dim};
    size_t nw = (size_t)sh->rows * (size_t)sh->dim, wb = nw * sr_st_dtype_bytes(sh->dtype);
    float *host = t->dev->host_visible
                      ? NULL
                      : sr_malloc(sizeof(float) * ((wb + 3) / 4 + sh->state_floats + 1));
    void *w = host ? (void *)host : (void *)sh->weight;
    float *s = host ? host + (wb + 3) / 4 : sh->state;
    int64_t covered = 0;
    int rc = SR_OK;
    SR_ASSERT(to.rows == sh->rows && to.cols == sh->dim);
    for (int j = 0; !rc && j < op->num_shards; j++) {
        if (op->type == SR_SHARDING_TYPE_DATA_PARALLEL && j != t->rank % S->plan->world_size)
            continue; /* one copy of a replicated table */
        rc = copy_overlap(S, sh->table, j, &to, w, sh->dtype, s, &covered);
    }
    if (!rc && covered != (int64_t)nw)
        rc = sr_error_set(SR_ERR_DATA,
                          "checkpoint %s: table '%s': the checkpoint's plan covers %" PRId64
                          " of the %zu values of this rank's shard %d; %s",
                          S->ck->dir, np->name, covered, nw, sh->shard, HINT_REDO);
    if (!rc && host) {
        to_device(t, sh->weight, w, wb);
        if (!S->weights_only)
            to_device(t, sh->state, s, sizeof(float) * sh->state_floats);
    }
    sr_free(host);
    return rc;
}

int sr_checkpoint_load_shards(struct sr_trainer *t, const struct sr_ckpt *ck,
                              const struct sr_plan *old)
{
    struct source S = {.ck = ck, .plan = old, .kind = t->cfg->emb_optimizer,
                       .weights_only = t->cfg->eval_only};
    S.files = sr_calloc((size_t)old->world_size, sizeof *S.files);
    int rc = SR_OK;
    for (int i = 0; !rc && i < sr_sharded_ebc_num_local_shards(t->sebc); i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        rc = load_shard(t, &S, &sh);
    }
    for (int r = 0; r < old->world_size; r++)
        sr_st_close(S.files[r]);
    sr_free(S.files);
    return rc;
}
