/*
 * The device ops as the layers above device/ call them, made from the
 * declarations (op_decl.h; the lists SR_OPS_* of each ops_<family>.h):
 *
 *   sr_op_<family>_<name>(dev, ...)          checks the device has the op,
 *                                            then calls dev-><family>-><name>
 *   sr_op_regions_<family>_<name>(r, dev, ...)  hands r every device region
 *                                            the call reads or writes
 *
 * The wrapper is the one door to a device's op tables: argument checks,
 * trace spans and graph capture of single ops belong here, once for all
 * ops. The regions are what the deferred and opaque CPU devices queue, poison
 * and check (cpu/cpu_deferred_ops.c), and what the backend-ops test sizes its
 * operands by. The few region functions that loop (tables, batches,
 * segments) are at the end.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "shardrec/error.h"
#include "shardrec/optim.h"
#include "device/ops_cast.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/ops_optim.h"
#include "device/ops_sparse_dist.h"

static void need(const struct sr_device *dev, int present, const char *op)
{
    if (!present)
        SR_ABORT("device %s has no op %s", dev->name, op);
}

#define SR_OP_WRAPPER(family, name, operands)                                                      \
    void sr_op_##family##_##name(SR_OP_PARAMS(operands))                                           \
    {                                                                                              \
        need(dev, dev->family && dev->family->name, #family "." #name);                            \
        dev->family->name(SR_OP_ARGS(operands));                                                   \
    }

/* regions: one sr_op_region call per device operand; SR_REGIONS calls as written. */
#define SR_OP_EACH_A_regions(...) SR_OP_APPLY(regions, __VA_ARGS__) SR_OP_EACH_B_regions
#define SR_OP_EACH_B_regions(...) SR_OP_APPLY(regions, __VA_ARGS__) SR_OP_EACH_A_regions
#define SR_OP_EACH_A_regions0
#define SR_OP_EACH_B_regions0
#define SR_OP_regions_opstream(name)
#define SR_OP_regions_oparg(type, name)
#define SR_OP_regions_opdev(type, name, bytes, how) sr_op_region(r, #name, name, bytes, how);
#define SR_OP_regions_ophost(type, name, count)
#define SR_OP_regions_opfield(name, field, count)
#define SR_OP_regions_opmem(ptr, bytes, how) sr_op_region(r, #ptr, ptr, bytes, how);
#define SR_OP_regions_opcall(call)           call;

#define SR_OP_REGIONS_FN(family, name, operands)                                                   \
    void sr_op_regions_##family##_##name(struct sr_op_regions *r, SR_OP_PARAMS(operands))          \
    {                                                                                              \
        SR_OP_EACH(regions, operands)                                                              \
    }

#define SR_OP_DEFINE(family, name, operands)                                                       \
    SR_OP_WRAPPER(family, name, operands) SR_OP_REGIONS_FN(family, name, operands)

SR_OPS_DENSE(SR_OP_DEFINE)
SR_OPS_OPTIM(SR_OP_DEFINE)
SR_OPS_EMB(SR_OP_DEFINE)
SR_OPS_EMB_DP(SR_OP_DEFINE)
SR_OPS_SPARSE_DIST(SR_OP_DEFINE)
SR_OPS_CAST(SR_OP_DEFINE)

size_t sr_op_emb_workspace_bytes(struct sr_device *dev, const struct sr_emb_layout *layout)
{
    need(dev, dev->emb && dev->emb->workspace_bytes, "emb.workspace_bytes");
    return dev->emb->workspace_bytes(dev, layout);
}

/* SR_EMB_RUN_SPLIT, read once: the split it sets, or 0 where it is unset. */
static int run_split_from_env(void)
{
    static _Atomic int split = -1; /* -1: not read yet */
    int v = atomic_load(&split);
    if (v >= 0)
        return v;
    const char *env = getenv("SR_EMB_RUN_SPLIT");
    v = 0;
    if (env && *env) {
        char *end;
        const long x = strtol(env, &end, 10);
        if (*end || x < 8 || x > 65536 || (x & (x - 1)))
            SR_ABORT("SR_EMB_RUN_SPLIT=%s: expected a power of two from 8 to 65536", env);
        v = (int)x;
    }
    atomic_store(&split, v);
    return v;
}

int sr_emb_run_split(int max_dim)
{
    const int env = run_split_from_env();
    if (env)
        return env;
    return max_dim <= SR_EMB_RUN_SPLIT_NARROW_DIM ? SR_EMB_RUN_SPLIT_NARROW
                                                  : SR_EMB_RUN_SPLIT_DEFAULT;
}

/* ---- regions computed by loops ------------------------------------------- */

size_t sr_emb_state_bytes(enum sr_optim_kind kind, const struct sr_emb_table *t)
{
    int per_row = 0;
    const int per_elem = sr_optim_state_per_element(kind, &per_row);
    const size_t per = per_row ? 1 : (size_t)t->dim;
    return SR_F32((size_t)per_elem * per * (size_t)t->rows);
}

void sr_emb_tables_regions(struct sr_op_regions *r, const struct sr_emb_layout *l, int update)
{
    for (int t = 0; t < l->num_tables; t++) {
        const struct sr_emb_table *tab = &l->tables[t];
        sr_op_region(r, "tables[t].weight", tab->weight,
                     (size_t)tab->rows * (size_t)tab->dim * sr_emb_elem_bytes(tab->dtype),
                     update ? SR_OP_INOUT : SR_OP_IN);
        if (update)
            sr_op_region(r, "tables[t].state", tab->state, sr_emb_state_bytes(l->optim, tab),
                         SR_OP_INOUT);
    }
}

void sr_emb_dp_grads_regions(struct sr_op_regions *r, const struct sr_emb_layout *l,
                             float *const *grad, float *const *counts)
{
    for (int t = 0; t < l->num_tables; t++) {
        const struct sr_emb_table *tab = &l->tables[t];
        sr_op_region(r, "grad[t]", grad[t], SR_F32((size_t)tab->rows * (size_t)tab->dim),
                     SR_OP_INOUT);
        sr_op_region(r, "counts[t]", counts[t], SR_F32(tab->rows), SR_OP_INOUT);
    }
}

void sr_sparse_dist_layout_regions(struct sr_op_regions *r, const struct sr_sparse_dist_layout *l)
{
    const int F = l->num_features;
    sr_op_region(r, "l->first_slot", l->first_slot, SR_I32(F), SR_OP_IN);
    sr_op_region(r, "l->num_shards", l->num_shards, SR_I32(F), SR_OP_IN);
    sr_op_region(r, "l->block", l->block, SR_I64(F), SR_OP_IN);
    sr_op_region(r, "l->dp_feature", l->dp_feature, SR_I32(l->num_dp), SR_OP_IN);
    sr_op_region(r, "l->slot_at", l->slot_at, SR_I32((size_t)l->world * l->max_nslots), SR_OP_IN);
    sr_op_region(r, "l->count_displ", l->count_displ, SR_I64(l->world + 1), SR_OP_IN);
}

void sr_sparse_dist_kjt_regions(struct sr_op_regions *r, const struct sr_sparse_dist_layout *l,
                                const struct sr_sparse_dist_kjt *kjt, int lengths, int weights)
{
    if (!kjt)
        return;
    const size_t bags = SR_SD_BAGS(l);
    if (lengths)
        sr_op_region(r, "kjt->lengths", kjt->lengths, SR_I32(bags), SR_OP_IN);
    sr_op_region(r, "kjt->offsets", kjt->offsets, SR_I64(bags + 1), SR_OP_IN);
    sr_op_region(r, "kjt->values", kjt->values, SR_I64(kjt->num_values), SR_OP_IN);
    if (weights)
        sr_op_region(r, "kjt->weights", kjt->weights, SR_F32(kjt->num_values), SR_OP_IN);
}

void sr_sparse_dist_batches_regions(struct sr_op_regions *r, const struct sr_sparse_dist_layout *l,
                                    const struct sr_sparse_dist_batch *batches, int n, int unpack)
{
    for (int i = 0; i < n; i++) {
        const struct sr_sparse_dist_batch *g = &batches[i];
        if (unpack) {
            sr_op_region(r, "batches[i].pos", g->pos, SR_I32(g->num_features), SR_OP_IN);
            sr_op_region(r, "batches[i].row_of", g->row_of, SR_I32(l->world), SR_OP_IN);
        }
        sr_op_region(r, "batch.offsets", g->offsets,
                     SR_I64((size_t)g->num_features * g->batch + 1), SR_OP_OUT);
        sr_op_region(r, "batch.values", g->values, SR_I64(g->num_values), SR_OP_OUT);
        sr_op_region(r, "batch.weights", g->weights, SR_F32(g->num_values), SR_OP_OUT);
    }
}

void sr_sparse_dist_compact_regions(struct sr_op_regions *r, const struct sr_sparse_dist_compact *c)
{
    const size_t n = (size_t)c->num_features;
    sr_op_region(r, "c->cols", c->cols, SR_I32(n), SR_OP_IN);
    sr_op_region(r, "c->gcol", c->gcol, SR_I32(n), SR_OP_IN);
    sr_op_region(r, "c->slot0", c->slot0, SR_I32(n), SR_OP_IN);
    sr_op_region(r, "c->work", c->work, SR_I64(sr_sparse_dist_compact_words(c)), SR_OP_OUT);
}

void sr_sparse_dist_hybrid_regions(struct sr_op_regions *r, const struct sr_sparse_dist_hybrid *h,
                                   const struct sr_sparse_dist_kjt *in)
{
    const size_t F = (size_t)h->num_features, Fh = (size_t)h->num_hot_features;
    const size_t bags = F * (size_t)h->batch;
    sr_op_region(r, "h->hot_of", h->hot_of, SR_I32(F), SR_OP_IN);
    sr_op_region(r, "h->feature", h->feature, SR_I32(Fh), SR_OP_IN);
    sr_op_region(r, "h->hot_begin", h->hot_begin, SR_I64(Fh), SR_OP_IN);
    sr_op_region(r, "h->num_hot", h->num_hot, SR_I64(Fh), SR_OP_IN);
    sr_op_region(r, "h->hot", h->hot, SR_I64(h->hot_words), SR_OP_IN);
    sr_op_region(r, "in->lengths", in->lengths, SR_I32(bags), SR_OP_IN);
    sr_op_region(r, "in->offsets", in->offsets, SR_I64(bags + 1), SR_OP_IN);
    sr_op_region(r, "in->values", in->values, SR_I64(in->num_values), SR_OP_IN);
    sr_op_region(r, "in->weights", in->weights, SR_F32(in->num_values), SR_OP_IN);
}

void sr_cast_segs_regions(struct sr_op_regions *r, const struct sr_cast_seg *segs, int num,
                          int pack, int add)
{
    SR_ASSERT(num >= 0);
    for (int i = 0; i < num; i++) {
        const size_t wire = (segs[i].dtype == SR_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t)) *
                            segs[i].n,
                     f32 = sizeof(float) * segs[i].n;
        sr_op_region(r, "segs[i].src", segs[i].src, pack ? f32 : wire, SR_OP_IN);
        sr_op_region(r, "segs[i].dst", segs[i].dst, pack ? wire : f32,
                     add ? SR_OP_INOUT : SR_OP_OUT);
    }
}
