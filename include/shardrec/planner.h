/*
 * The planner (DESIGN.md "Planner"; docs/planner.md): the cost of a plan on
 * a topology, predicted per rank and per step, and the search for the plan
 * whose slowest rank is fastest within memory.
 *
 * It sits below `model`: the caller (train, or `shardrec plan`) describes
 * the model in plain numbers (struct sr_planner_model). Every rate comes
 * from the topology (shardrec/topology.h): a preset's data sheet, or what
 * `shardrec bench comm` and `shardrec bench device` measured. Nothing is
 * fitted to the runs that judge the predictions.
 */
#ifndef SHARDREC_PLANNER_H
#define SHARDREC_PLANNER_H

#include <stdint.h>
#include <stdio.h>

#include "shardrec/plan.h"
#include "shardrec/table_config.h"
#include "shardrec/topology.h"

#define SR_PLANNER_MLP_MAX 16

/* The hot-set sizes a hybrid table's option weighs: ceil(E/1000),
 * ceil(E/300), ceil(E/100), ceil(E/30) and ceil(E/10) rows (sr_planner_hot_sizes). */
#define SR_PLANNER_HOT_SIZES 5

/* One table as the planner sees it (its statistics). */
struct sr_planner_table {
    double ids_per_sample; /* mean ids a sample looks up in it, over its features */
    int features;          /* features that look it up: pooled outputs of D each */
    double hot_share;      /* the share of its lookups the hottest 1% of rows take: its
                              skew (the rates' interpolation), whatever hot set is chosen */
    /* The hybrid option's hot-set sizes (0 of them: no hybrid option), each
     * with the share of the table's lookups that its hottest rows take. */
    int num_sizes;
    int64_t hot_size[SR_PLANNER_HOT_SIZES];      /* (num_sizes) ascending, distinct */
    double hot_size_share[SR_PLANNER_HOT_SIZES]; /* (num_sizes) */
    /* The hottest rows, hottest first: the first hot_size[i] are the hot
     * set of size i. num_hot: the largest size, or 0; hot: NULL when not
     * known (no hybrid option); owned, sr_planner_stats_release frees. */
    int64_t num_hot;
    int64_t *hot;      /* (num_hot) */
    double slot_bytes; /* buffers a shard of it holds on its rank, per sample of the
                          global batch (its features' ids and bags received there) */
};

/* Embedding optimizer state: none (SGD), one float per row (row-wise
 * Adagrad), one per element (Adagrad). */
enum sr_planner_state { SR_PLANNER_STATE_NONE, SR_PLANNER_STATE_ROW, SR_PLANNER_STATE_ELEMENT };

struct sr_planner_model {
    const struct sr_ebc_config *ebc;      /* tables and features */
    const struct sr_planner_table *stats; /* (T) */
    int64_t global_batch;                 /* samples per step, all ranks */
    int num_dense;                        /* dense features */
    int bot[SR_PLANNER_MLP_MAX], n_bot;   /* bottom MLP widths, input first */
    int top[SR_PLANNER_MLP_MAX], n_top;   /* top MLP widths after the interaction */
    int dcn_layers, dcn_rank;             /* DCNv2 cross layers (0: dot interaction) */
    int math;                             /* enum sr_math: the GEMM rate used */
    enum sr_planner_state emb_state;
    int dense_state_floats; /* per dense parameter: 0 SGD, 1 Adagrad, 2 Adam */
    int emb_elem_bytes;     /* a stored weight of a sharded table: 4 (0 too), or 2 (--emb-dtype) */
    int wire_bytes;         /* pooled embeddings and their gradients on the wire */
    int dense_wire_bytes;   /* dense gradient buckets on the wire */
    int pipeline;           /* 1: batch i+1's input dist overlaps step i */
    double bucket_bytes;    /* dense all-reduce bucket size */
    double buffer_bytes;    /* a rank's batch buffers, evaluation and pool, but for
                               what its shards receive (slot_bytes; the caller's
                               estimate; the same for every plan) */
};

/* The stages of a predicted step (seconds). Communication is per
 * collective (all ranks wait for the slowest); exposed is what the compute
 * around it does not hide (docs/planner.md, "Overlap"). */
enum sr_planner_stage {
    SR_PS_LOOKUP,      /* embedding forward, the slowest rank */
    SR_PS_UPDATE,      /* embedding backward and update, the slowest rank */
    SR_PS_DENSE,       /* MLPs, interaction, dense optimizer */
    SR_PS_INPUT_DIST,  /* ids and lengths to the owners */
    SR_PS_OUTPUT_DIST, /* pooled vectors back */
    SR_PS_GRAD_DIST,   /* their gradients to the owners */
    SR_PS_ALLREDUCE,   /* dense gradients and dp tables' */
    SR_PS_EXPOSED,     /* communication the step waits for */
    SR_PS_STEP,        /* lookup + update + dense + exposed */
    SR_PS_COUNT
};
const char *sr_planner_stage_name(enum sr_planner_stage s);

struct sr_planner_rank {
    double memory_bytes;        /* tables, state, dense, buffers */
    double lookup_s, update_s;  /* its embedding work */
    double send_bytes[2];       /* a step's bytes out: [0] in its node, [1] to other nodes */
};

struct sr_planner_table_cost {
    double memory_bytes;   /* over all ranks */
    double compute_s;      /* lookup + update, summed over its shards */
    double comm_bytes;     /* bytes it puts on links a step, all ranks */
    double inter_bytes;    /* of which across nodes */
    double hot_share;      /* hybrid: the share of its lookups its hot rows take; else 0 */
};

struct sr_planner_report {
    int world_size, num_tables;
    double stage_s[SR_PS_COUNT];
    double samples_s;
    int collectives;                        /* per step */
    struct sr_planner_rank *ranks;          /* (W) */
    struct sr_planner_table_cost *tables;   /* (T) */
    /* the search's reasons, per table (NULL when predicted only) */
    char (*why)[256];
};

/* Statistics of a table from its config and id distribution: the share of
 * the lookups of E rows under Zipf(s) (s <= 0: uniform ids) that its `hot`
 * hottest rows take, H_s(hot) / H_s(E) (uniform: hot / E; 0 for hot <= 0,
 * 1 from hot >= E). sr_planner_hot_share is that at ceil(E/100) rows;
 * sr_planner_hot_shares_of is it for n hot-set sizes at once, the same bits,
 * summing H_s(E) (up to 10^6 terms) once rather than once a size. */
double sr_planner_hot_share_of(int64_t rows, int64_t hot, double zipf_s);
double sr_planner_hot_share(int64_t rows, double zipf_s);
void sr_planner_hot_shares_of(int64_t rows, const int64_t *hot, int n, double zipf_s,
                              double *shares);

/* The most hot rows a table's statistics list: larger hot-set sizes are
 * cut to it (finding and keeping the list costs time and memory in
 * proportion to it, and its all-reduce would dwarf a step). */
#define SR_PLANNER_HOT_ROWS_MAX ((int64_t)1 << 20)

/* The hot-set sizes weighed for a table of `rows` rows whose statistics
 * know `known` rows by heat (the config's: all of them; counted data: the
 * distinct rows seen): ceil(rows/d) for d = 1000, 300, 100, 30, 10, each
 * cut to [1, min(rows, SR_PLANNER_HOT_ROWS_MAX)], ascending, equal ones
 * once, and only those the statistics back: below `known` unless they know
 * every row (a set of every row seen would take every lookup counted and
 * predict no cold traffic for rows never drawn). Writes them to sizes
 * (SR_PLANNER_HOT_SIZES) and returns how many (0 when rows < 1 or none is
 * backed). */
int sr_planner_hot_sizes(int64_t rows, int64_t known, int64_t *sizes);

/* Free the hot lists of T tables' statistics (the array stays). */
void sr_planner_stats_release(struct sr_planner_table *stats, int T);

/* The prediction for `plan` (validated against the model's tables and the
 * topology's world size). SR_ERR_INVALID_ARG on a mismatch. */
int sr_planner_predict(const struct sr_planner_model *m, const struct sr_topology *topo,
                       const struct sr_plan *plan, struct sr_planner_report **out);

/* The search: per table, largest first, the option (dp, tw on a rank, rw,
 * cw with n shards, twrw on a node, hybrid with each of its hot-set sizes when
 * its hot rows are known and it is stored in fp32) that makes the predicted
 * step of the tables placed so far shortest with every rank within memory.
 * Fails with SR_ERR_INVALID_ARG naming the first table nothing fits. */
int sr_planner_search(const struct sr_planner_model *m, const struct sr_topology *topo,
                      struct sr_plan **plan, struct sr_planner_report **report);

/* The whole plans the search is held against (and `plan --compare` shows):
 * 0 all tw, 1 all rw, 2 the rule-based default (sr_plan_default), 3 all
 * hybrid (every table whose statistics know its hot rows hybrid, the others
 * rw; each hybrid table's hot set sized as the search sizes it: largest
 * table first, the size whose predicted step with the tables sized so far
 * is shortest within memory; SR_ERR_INVALID_ARG when no hot rows are
 * known, or no table that knows them can be hybrid: hybrid tables keep
 * fp32 rows). Their short names ("all tw", "all rw", "default (dp + tw)",
 * "all hybrid"), and plan i for m's tables on topo's world
 * (sr_plan_uniform's or sr_plan_default's errors). */
#define SR_PLANNER_WHOLE_PLANS 4
const char *sr_planner_whole_plan_name(int i);
int sr_planner_whole_plan(int i, const struct sr_planner_model *m, const struct sr_topology *topo,
                          struct sr_plan **out);

/* The table: per table its type, shards, ranks, memory, compute and
 * communication; per rank the totals; the step's stages and samples/s.
 * With explain, each table's reason. */
void sr_planner_report_print(FILE *f, const struct sr_planner_report *r, const struct sr_plan *plan,
                             const struct sr_planner_model *m, int explain);
void sr_planner_report_free(struct sr_planner_report *r);
/* A plan's hot sets on one line, after what f holds so far: " t2 100
 * (68.8%), t4 3 (15.6%)" (rows, their share of the table's lookups, as r
 * predicts them; " none" without a hybrid table), and a newline. */
void sr_planner_hot_sets_print(FILE *f, const struct sr_planner_report *r,
                               const struct sr_plan *plan);

#endif
