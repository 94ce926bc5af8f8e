/*
 * The op tables of the deferred and opaque CPU devices, made from the op
 * declarations (device/op_decl.h): for each op, its queued form
 *
 *   q_<family>_<name>(dev, ...)   copies the arguments into a queue item
 *                                 (host arrays too: SR_HOST, SR_HOST_FIELD),
 *                                 declares the regions that
 *                                 sr_op_regions_<family>_<name> lists, and
 *                                 queues the item on the op's stream
 *   q_run_<family>_<name>(item)   calls the CPU backend's op on the copies
 *
 * so no op has a hand-written shim: the queue's rules (poisoning, in-place
 * operands saved and restored) are cpu_deferred.c's. On the opaque device
 * (not host-visible) a region in device memory must also end inside its
 * allocation: an operand that runs past the end of its buffer aborts when
 * the op is issued, naming the op and the operand.
 */
#include <stdint.h>
#include <string.h>

#include "shardrec/error.h"
#include "device/cpu/cpu_deferred.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_cast.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/ops_optim.h"
#include "device/ops_sparse_dist.h"

/* fields: the queue item's copy of the arguments. */
#define SR_OP_EACH_A_fields(...) SR_OP_APPLY(fields, __VA_ARGS__) SR_OP_EACH_B_fields
#define SR_OP_EACH_B_fields(...) SR_OP_APPLY(fields, __VA_ARGS__) SR_OP_EACH_A_fields
#define SR_OP_EACH_A_fields0
#define SR_OP_EACH_B_fields0
#define SR_OP_fields_opstream(name)
#define SR_OP_fields_oparg(type, name)         type name;
#define SR_OP_fields_opdev(type, name, b, how) type name;
#define SR_OP_fields_ophost(type, name, count) type name;
#define SR_OP_fields_opfield(name, field, count)
#define SR_OP_fields_opmem(ptr, bytes, how)
#define SR_OP_fields_opcall(call)

/* queue: fill the copy (q_a) of item q_it; the stream into q_stream. */
#define SR_OP_EACH_A_queue(...) SR_OP_APPLY(queue, __VA_ARGS__) SR_OP_EACH_B_queue
#define SR_OP_EACH_B_queue(...) SR_OP_APPLY(queue, __VA_ARGS__) SR_OP_EACH_A_queue
#define SR_OP_EACH_A_queue0
#define SR_OP_EACH_B_queue0
#define SR_OP_queue_opstream(name)            q_stream = name;
#define SR_OP_queue_oparg(type, name)         q_a->name = name;
#define SR_OP_queue_opdev(type, name, b, how) q_a->name = name;
#define SR_OP_queue_ophost(type, name, count)                                                      \
    q_a->name = sr_deferred_keep(q_it, name, (int64_t)(count), sizeof *name);
#define SR_OP_queue_opfield(name, field, count)                                                    \
    sr_deferred_keep_field(q_it, (void *)&q_a->name->field, (int64_t)(count),                      \
                           sizeof *q_a->name->field);
#define SR_OP_queue_opmem(ptr, bytes, how)
#define SR_OP_queue_opcall(call)

/* run: the CPU op's arguments from the copy; its stream is NULL. */
#define SR_OP_EACH_A_run(...) SR_OP_APPLY(run, __VA_ARGS__) SR_OP_EACH_B_run
#define SR_OP_EACH_B_run(...) SR_OP_APPLY(run, __VA_ARGS__) SR_OP_EACH_A_run
#define SR_OP_EACH_A_run0
#define SR_OP_EACH_B_run0
#define SR_OP_run_opstream(name)            , NULL
#define SR_OP_run_oparg(type, name)         , q_a->name
#define SR_OP_run_opdev(type, name, b, how) , q_a->name
#define SR_OP_run_ophost(type, name, count) , q_a->name
#define SR_OP_run_opfield(name, field, count)
#define SR_OP_run_opmem(ptr, bytes, how)
#define SR_OP_run_opcall(call)

_Static_assert(REGION_IN == (int)SR_OP_IN && REGION_OUT == (int)SR_OP_OUT &&
                   REGION_INOUT == (int)SR_OP_INOUT,
               "the queue's region kinds are the declarations' accesses");

/* What the regions of one queued call go to. */
struct sink {
    struct sr_op_regions r;
    struct item *it;
    struct sr_device *dev;
    const char *op;
};

/* On the opaque device, a region that starts in a device allocation must end
 * in it (host memory, pinned as a GPU's would be, is a legal operand: the
 * compressed exchanges' wire buffers of a host-memory communicator). */
static void check_opaque(const struct sink *k, const struct sr_op_region *g)
{
    void *base = NULL;
    size_t bytes = 0;
    if (!k->dev->mem->owns(k->dev, g->p, &base, &bytes))
        return;
    const size_t at = (size_t)((const char *)g->p - (const char *)base);
    if (g->bytes > bytes - at)
        SR_ABORT("op %s on %s: operand %s (%zu bytes at offset %zu) runs past its allocation "
                 "(%zu bytes)",
                 k->op, k->dev->name, g->name, g->bytes, at, bytes);
}

static void add_region(struct sr_op_regions *r, const struct sr_op_region *g)
{
    struct sink *k = (struct sink *)r;
    if (!g->p || !g->bytes)
        return;
    if (!k->dev->host_visible)
        check_opaque(k, g);
    sr_deferred_add_region(k->it, g->p, g->bytes, (enum region_kind)g->access);
}

#define QUEUED_OP(family, name, operands)                                                          \
    struct q_args_##family##_##name {                                                              \
        SR_OP_EACH(fields, operands)                                                               \
    };                                                                                             \
    static void q_run_##family##_##name(struct item *q_it)                                         \
    {                                                                                              \
        struct q_args_##family##_##name *q_a =                                                     \
            DEFERRED_ARGS(struct q_args_##family##_##name, q_it);                                  \
        struct sr_device *cpu = sr_cpu_device();                                                   \
        cpu->family->name(cpu SR_OP_EACH(run, operands));                                          \
    }                                                                                              \
    static void q_##family##_##name(SR_OP_PARAMS(operands))                                        \
    {                                                                                              \
        struct item *q_it = sr_deferred_item_new(sizeof(struct q_args_##family##_##name),          \
                                                 q_run_##family##_##name);                         \
        struct q_args_##family##_##name *q_a =                                                     \
            DEFERRED_ARGS(struct q_args_##family##_##name, q_it);                                  \
        sr_stream_t q_stream = NULL;                                                               \
        SR_OP_EACH(queue, operands)                                                                \
        struct sink q_sink = {{add_region, NULL}, q_it, dev, #family "." #name};                   \
        sr_op_regions_##family##_##name(&q_sink.r, SR_OP_ARGS(operands));                          \
        sr_deferred_enqueue(q_stream, q_it);                                                       \
    }

SR_OPS_DENSE(QUEUED_OP)
SR_OPS_OPTIM(QUEUED_OP)
SR_OPS_EMB(QUEUED_OP)
SR_OPS_EMB_DP(QUEUED_OP)
SR_OPS_SPARSE_DIST(QUEUED_OP)
SR_OPS_CAST(QUEUED_OP)

#define QUEUED_ENTRY(family, name, operands) .name = q_##family##_##name,

/* Not an op: a size, computed at once. */
static size_t q_workspace_bytes(struct sr_device *dev, const struct sr_emb_layout *layout)
{
    return sr_cpu_embedding_ops.workspace_bytes(sr_cpu_device(), layout);
}

const struct sr_dense_ops sr_cpu_deferred_dense_ops = {SR_OPS_DENSE(QUEUED_ENTRY)};
const struct sr_optim_ops sr_cpu_deferred_optim_ops = {SR_OPS_OPTIM(QUEUED_ENTRY)};
const struct sr_embedding_ops sr_cpu_deferred_embedding_ops = {
    .workspace_bytes = q_workspace_bytes, SR_OPS_EMB(QUEUED_ENTRY)};
const struct sr_emb_dp_ops sr_cpu_deferred_emb_dp_ops = {SR_OPS_EMB_DP(QUEUED_ENTRY)};
const struct sr_sparse_dist_ops sr_cpu_deferred_sparse_dist_ops = {
    SR_OPS_SPARSE_DIST(QUEUED_ENTRY)};
const struct sr_cast_ops sr_cpu_deferred_cast_ops = {SR_OPS_CAST(QUEUED_ENTRY)};
