/*
 * The cost model's accumulator (cost_model.c), shared with the search
 * (planner.c): tables are added one at a time, each adding its work,
 * memory and bytes per link to the ranks its shards and samples live on,
 * and the step is predicted from the sums (docs/planner.md).
 */
#ifndef SHARDREC_PLANNER_INTERNAL_H
#define SHARDREC_PLANNER_INTERNAL_H

#include "shardrec/planner.h"

/* The step's exchanges: one collective each when any table uses it. The
 * output groups run again, mirrored, for the gradients. */
enum pl_group {
    PL_INPUT,      /* ids and lengths to the owners (one all-to-all-v) */
    PL_A2A,        /* tw and cw pooled vectors (all-to-all-v) */
    PL_RW,         /* rw partial sums (reduce-scatter) */
    PL_TWRW_NODE,  /* twrw partial sums inside a node (reduce-scatter) */
    PL_TWRW_CROSS, /* twrw node sums across nodes (all-to-all-v) */
    PL_HYB,        /* hybrid tables' cold rows, compact (all-to-all-v) */
    PL_GROUPS
};

struct pl_acc {
    const struct sr_planner_model *m;
    const struct sr_topology *topo;
    int W, L;
    double *mem, *lookup, *update;                   /* (W) bytes, seconds, seconds */
    double *send[PL_GROUPS][2], *recv[PL_GROUPS][2]; /* (W) bytes: [0] in the node, [1] across */
    int active[PL_GROUPS];
    unsigned kinds;  /* bit per sharding type placed: each an embedding group of its own */
    double dp_bytes; /* dp tables' gradients, in the all-reduce */
    double *storage;
};

void pl_acc_init(struct pl_acc *a, const struct sr_planner_model *m,
                 const struct sr_topology *topo);
void pl_acc_copy(struct pl_acc *dst, const struct pl_acc *src); /* both initialised alike */
void pl_acc_free(struct pl_acc *a);
void pl_acc_clear(struct pl_acc *a); /* back to no tables */
/* Add table t placed as tp; its own cost to *cost when not NULL. */
void pl_acc_add_table(struct pl_acc *a, int t, const struct sr_table_plan *tp,
                      struct sr_planner_table_cost *cost);
/* The step of what was added: stages, samples/s, collectives. */
void pl_acc_step(const struct pl_acc *a, double stage_s[SR_PS_COUNT], int *collectives);
/* A rank's memory: its shards, the dense block, the buffers, the process. */
double pl_acc_rank_memory(const struct pl_acc *a, int rank);
/* The largest memory of a rank over its capacity (> 1: does not fit); *rank
 * gets that rank. */
double pl_acc_memory_ratio(const struct pl_acc *a, int *rank);
/* The share of table t's lookups that its H hottest rows take (cost_model.c). */
double pl_hot_share_of(const struct sr_planner_model *m, int t, int64_t H);
/* The dense block's parameters (MLPs, DCN). */
double pl_dense_params(const struct sr_planner_model *m);

#endif
