/*
 * The deferred CPU device's queue (cpu_deferred.c), for cpu_deferred_ops.c,
 * which queues every op from its declaration (device/op_decl.h):
 *
 *   struct item *it = sr_deferred_item_new(sizeof(struct my_args), run_my_op);
 *   ... copy the arguments into DEFERRED_ARGS(struct my_args, it); host
 *   ... arrays with sr_deferred_keep (freed once the item has run)
 *   sr_deferred_add_region(it, p, bytes, REGION_IN);  // every operand
 *   sr_deferred_enqueue(stream, it);
 *
 * and run_my_op(it) calls the CPU backend's op on the saved arguments (with
 * sr_cpu_device() and a NULL stream). Regions must cover every byte the op
 * reads or writes: poisoning and the hazard checks rely on them
 * (cpu_deferred.c explains the rules).
 */
#ifndef SHARDREC_CPU_DEFERRED_H
#define SHARDREC_CPU_DEFERRED_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "shardrec/stream.h"

enum region_kind { REGION_IN, REGION_OUT, REGION_INOUT };

struct region {
    const void *p;
    size_t bytes;
    enum region_kind kind;
    void *saved; /* in-place operand poisoned at queue time: its bytes */
};

struct item {
    struct item *next;
    void (*run)(struct item *it);
    int num_regions, cap_regions;
    struct region *regions;
    struct kept *kept; /* host copies of the arguments, freed after the run */
    alignas(max_align_t) unsigned char args[];
};

#define DEFERRED_ARGS(type, it) ((type *)(void *)(it)->args)

/* A new item with args_bytes of argument space; run is called when it runs. */
struct item *sr_deferred_item_new(size_t args_bytes, void (*run)(struct item *));
/* A copy of count elements of elem bytes at host memory p, owned by it
 * (NULL when p is NULL). */
void *sr_deferred_keep(struct item *it, const void *p, int64_t count, size_t elem);
/* *field is a pointer to a host array of count elements: point it at a copy. */
void sr_deferred_keep_field(struct item *it, void *field, int64_t count, size_t elem);
/* Declare an operand (NULL or 0 bytes: ignored). */
void sr_deferred_add_region(struct item *it, const void *p, size_t bytes, enum region_kind kind);
/* Poison what is safe to poison, then queue it on s (NULL: the default stream). */
void sr_deferred_enqueue(sr_stream_t s, struct item *it);
/* malloc that aborts on failure (not counted as an allocation of the run). */
void *sr_deferred_xmalloc(size_t bytes);

/* The opaque device's memory (cpu_opaque.c); every call under the queue's
 * lock. alloc: page-aligned device memory, PROT_NONE while access is shut;
 * free: aborts unless p is a live allocation; find: 1 when p points into a
 * live allocation, with its start and size (either may be NULL);
 * set_access: open (1) or shut (0) every allocation, returning the previous
 * state (a no-op before the first allocation). */
void *sr_opaque_alloc(size_t bytes);
void sr_opaque_free(void *p);
int sr_opaque_find(const void *p, void **base, size_t *bytes);
int sr_opaque_set_access(int open);

/* The queued op tables (cpu_deferred_ops.c), the same for both devices. */
extern const struct sr_dense_ops sr_cpu_deferred_dense_ops;
extern const struct sr_optim_ops sr_cpu_deferred_optim_ops;
extern const struct sr_embedding_ops sr_cpu_deferred_embedding_ops;
extern const struct sr_emb_dp_ops sr_cpu_deferred_emb_dp_ops;
extern const struct sr_sparse_dist_ops sr_cpu_deferred_sparse_dist_ops;
extern const struct sr_cast_ops sr_cpu_deferred_cast_ops;

#endif
