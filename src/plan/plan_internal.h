/*
 * Private helpers of the plan (the contract is in shardrec/plan.h): filling a
 * table's shards as its sharding type lays them out. plan.c builds plans with
 * them; plan_io.c completes plan files that omit the shards.
 */
#ifndef SHARDREC_PLAN_INTERNAL_H
#define SHARDREC_PLAN_INTERNAL_H

#include "shardrec/plan.h"

/* Each replaces tp's shards (freeing the old ones) and sets tp's type. */
void sr_plan_fill_dp(struct sr_table_plan *tp, const struct sr_table_config *tc, int W);
void sr_plan_fill_tw(struct sr_table_plan *tp, const struct sr_table_config *tc, int rank);
void sr_plan_fill_rw(struct sr_table_plan *tp, const struct sr_table_config *tc, int W);
/* rw's shards, type hybrid; tp's hot rows are kept. */
void sr_plan_fill_hybrid(struct sr_table_plan *tp, const struct sr_table_config *tc, int W);
void sr_plan_fill_twrw(struct sr_table_plan *tp, const struct sr_table_config *tc, int node, int L);
/* n column shards, piece j on ranks[j]; n divides D. */
void sr_plan_fill_cw(struct sr_table_plan *tp, const struct sr_table_config *tc, int n,
                     const int *ranks);

#endif
