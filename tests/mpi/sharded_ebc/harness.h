/*
 * The harness of tests/mpi/mpi_sharded_ebc.c: the check counter, the table
 * configs, the batches every rank draws from the same seeds (a sample's ids
 * and weights do not depend on the slice it is in), the tolerance of the
 * pooled payload dtype under test, the world of communicators a case runs
 * on, and the plans. The cases live in mpi_sharded_ebc.c (equivalence to
 * the single-rank EBC, collectives and bytes) and stages.c (the stage
 * functions on two batch contexts).
 */
#ifndef SHARDREC_TEST_MPI_SHARDED_EBC_HARNESS_H
#define SHARDREC_TEST_MPI_SHARDED_EBC_HARNESS_H

#include <stdint.h>

#include "shardrec/comm.h"
#include "shardrec/ebc.h"
#include "shardrec/sharded_ebc.h"

/* ---- checks ---------------------------------------------------------------- */

/* Checks run and failed on this rank; the first 40 failures are printed with
 * the file, line and `where` (the case being run). */
extern long long checks, failures;
extern const char *where;

#define CHECK(cond, ...) check_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
void check_at(int ok, const char *file, int line, const char *fmt, ...);

/* ---- config ---------------------------------------------------------------- */

#define MAX_T 6
#define MAX_F 8
#define B     4
#define STEPS 3

struct tcfg {
    struct sr_table_config tables[MAX_T];
    int64_t id_range[MAX_T]; /* raw ids drawn from [0, id_range) */
    char feature_names[MAX_F][SR_NAME_MAX];
    int feature_table[MAX_F];
    int max_len; /* bag lengths drawn from [0, max_len] */
    int weighted;
    int balanced; /* big-table case: one id per half of the rows */
    struct sr_ebc_config cfg;
};

/* Mean and sum tables; t0 shared by two features; a one-row table; a hash
 * table; t3's ids all in its first quarter (most rw shards get none). */
void main_config(struct tcfg *c);
/* Sum pooling only, with per-id weights. */
void weighted_config(struct tcfg *c);
/* One table of 1000 rows, each bag one id in each half of the rows. */
void big_config(struct tcfg *c);

/* ---- batches --------------------------------------------------------------- */

struct batch {
    int32_t *lengths;
    int64_t *offsets, *values;
    float *weights;
    int64_t per_key[MAX_F]; /* the KJT's length_per_key */
    struct sr_kjt kjt;
};

/* Samples [g0, g0 + n) of step `step`'s global batch, as drawn: the KJT's
 * offsets computed, ids not yet checked. */
void make_batch_raw(struct batch *bt, const struct tcfg *c, int step, int64_t g0, int n);
/* A batch as the loader hands it over: checked, ids in range. */
void make_batch(struct batch *bt, const struct tcfg *c, int step, int64_t g0, int n);
void free_batch(struct batch *bt);
/* The loader's check (sr_batch_check_ids): the KJT's structure, then ids
 * brought into range by each table's policy. */
int loader_check(const struct tcfg *c, struct sr_kjt *kjt);
/* The gradient of pooled column `col` of global sample g at step `step`. */
float dpooled_at(int step, int64_t g, int col);

/* Pooled payload dtype of the case being run (comms.pooled_dtype). */
extern enum sr_dtype wire;
/* a matches the reference b within wire's tolerance (harness.c says why). */
int close_to(float a, float b);

/* ---- world and plans ------------------------------------------------------- */

/* The communicators of one placement: W ranks, L per node. */
struct world {
    sr_comm_t world, sparse, node, cross;
    int W, L, rank;
};

/* Every table sharded as t. */
struct sr_plan *uniform(const struct tcfg *c, enum sr_sharding_type t, const struct world *w);
/* t0 rw, t1 dp, t2 cw (pieces on the last ranks), t3 twrw on the last node. */
struct sr_plan *mixed(const struct tcfg *c, const struct world *w);

/* ---- cases ----------------------------------------------------------------- */

/* dp, tw, rw, cw, twrw and the mixed plan through the stage functions (stages.c). */
void run_stages(struct world *w);

#endif
