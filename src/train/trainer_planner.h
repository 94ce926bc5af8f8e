/*
 * The planner in a training run (trainer_planner.c; docs/planner.md): with
 * no --plan and no --sharding on several ranks it chooses the plan; for
 * every run it predicts the step of the plan in use, and the summary puts
 * the prediction beside the measurement.
 */
#ifndef SHARDREC_TRAIN_TRAINER_PLANNER_H
#define SHARDREC_TRAIN_TRAINER_PLANNER_H

#include <stdio.h>

#include "shardrec/topology.h"

struct sr_trainer;
struct sr_trainer_result;
struct sr_planner_report;

struct sr_trainer_prediction {
    struct sr_topology topo;          /* the topology the planner used */
    int nominal;                      /* no --topology: data-sheet figures */
    struct sr_planner_report *report; /* the plan in use, predicted; NULL: none */
    struct sr_planner_table *stats;   /* (T) the tables' statistics, made once; NULL: not yet */
    int64_t stats_samples;            /* samples of --data they were measured on; 0: config */
};

/* The run's topology: --topology's presets and files merged, or this
 * device's nominal one; the world size and ranks a node are the run's. */
int sr_trainer_topology(const struct sr_trainer *t, struct sr_topology *out);
/* The planner's plan into t->plan; its table printed on rank 0's log. */
int sr_trainer_plan_search(struct sr_trainer *t);
/* --sharding hybrid: every table whose statistics know its hot rows hybrid,
 * its hot set sized by cost on the run's topology, the others rw
 * (sr_planner_whole_plan 3). Collective (the statistics, the topology);
 * SR_ERR_INVALID_ARG when no table's hot rows are known. */
int sr_trainer_plan_hybrid(struct sr_trainer *t);
/* Predict t->plan (after any plan is made; the planner's own plan comes
 * predicted from its search); a failure only warns. Then drops the
 * statistics' hot lists, which only the search reads. */
void sr_trainer_plan_predict(struct sr_trainer *t);
/* Predicted beside measured, per stage and memory (rank 0's summary). */
void sr_trainer_print_prediction(const struct sr_trainer *t, const struct sr_trainer_result *res,
                                 FILE *f);
void sr_trainer_prediction_free(struct sr_trainer *t);

#endif
