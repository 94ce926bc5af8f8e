/*
 * Sharding plan: for every table of an EBC, its sharding type and its shards,
 * each a block of rows and columns placed on one rank. A plan is plain data,
 * written and read as JSON (`--plan FILE`), built uniformly for every table
 * (`--sharding TYPE`), or by the documented default (sr_plan_default).
 *
 * Shards of a table of E rows and D columns, W ranks, L ranks per node:
 *
 *   dp    W shards, shard i on rank i, each the whole table (replicated)
 *   tw    1 shard, the whole table, on one rank
 *   rw    W shards, shard i on rank i, rows [i*R, min((i+1)*R, E)), R = ceil(E/W)
 *         (trailing shards may be empty: rows 0)
 *   twrw  L shards on the ranks of one node n: shard i on rank n*L + i,
 *         rows [i*R, min((i+1)*R, E)), R = ceil(E/L)
 *   cw    n shards of D/n columns each (n divides D), all rows; shard j holds
 *         columns [j*D/n, (j+1)*D/n) on any rank (several may share one)
 *   hybrid the shards of rw, plus H hot rows (`hot`, ascending) replicated on
 *         every rank as a dp replica table of H rows: a hot id is looked up
 *         in the replica on its sample's rank (its gradient rides the dense
 *         all-reduce as a dp table's), every other (cold) id goes to its rw
 *         shard (HugeCTR's hybrid embedding). H = 0 is rw; H = E sends no id.
 *
 *   E = 10, W = 4 (rw):  rank0 rows 0-2 | rank1 3-5 | rank2 6-8 | rank3 9
 *   E = 2,  W = 4 (rw):  rank0 row 0 | rank1 row 1 | rank2 empty | rank3 empty
 *
 * Ranks of node n are n*L .. n*L + L - 1 (W a multiple of L).
 *
 * The plan file (shards may be omitted for dp and rw; tw may give "rank",
 * twrw "node", cw "ranks" instead of explicit shards):
 *
 *   { "world_size": 4, "local_size": 2,
 *     "tables": [ { "name": "t0", "sharding": "rw",
 *                   "shards": [ { "rank": 0, "row_offset": 0, "rows": 3,
 *                                 "col_offset": 0, "cols": 16 }, ... ] },
 *                 { "name": "t1", "sharding": "twrw", "node": 1 },
 *                 { "name": "t2", "sharding": "hybrid", "hot": [ 3, 17, 40 ] }, ... ] }
 *
 * A hybrid table's "hot" lists its hot rows, strictly ascending, in [0, E)
 * (required; [] is allowed); its shards are rw's (may be omitted).
 *
 * Tables are matched by name and stored in the EBC config's table order.
 */
#ifndef SHARDREC_PLAN_H
#define SHARDREC_PLAN_H

#include <stdint.h>

#include "shardrec/table_config.h"

enum sr_sharding_type {
    SR_SHARDING_TYPE_DATA_PARALLEL = 0,
    SR_SHARDING_TYPE_TABLE_WISE,
    SR_SHARDING_TYPE_ROW_WISE,
    SR_SHARDING_TYPE_COLUMN_WISE,
    SR_SHARDING_TYPE_TABLE_ROW_WISE,
    SR_SHARDING_TYPE_HYBRID,
    SR_SHARDING_TYPE_COUNT
};

struct sr_shard {
    int rank;
    int64_t row_offset, rows; /* global rows [row_offset, row_offset + rows) */
    int col_offset, cols;     /* global columns [col_offset, col_offset + cols) */
};

struct sr_table_plan {
    char name[SR_NAME_MAX];
    enum sr_sharding_type type;
    int num_shards;
    struct sr_shard *shards; /* (num_shards) */
    int64_t num_hot;         /* H: hybrid only, else 0 */
    int64_t *hot;            /* (H) hybrid: the hot rows, strictly ascending; else NULL */
};

struct sr_plan {
    int world_size;               /* W */
    int local_size;               /* L, ranks per node */
    int num_tables;               /* T, in the EBC config's order */
    struct sr_table_plan *tables; /* (T) */
};

/* Tables of at most this many rows are replicated (dp) by sr_plan_default. */
#define SR_PLAN_DP_MAX_ROWS 1024

/* "dp" "tw" "rw" "cw" "twrw" "hybrid" and back (parse also takes the long
 * names "data_parallel", "table_wise", "row_wise", "column_wise",
 * "table_row_wise";
 * SR_ERR_INVALID_ARG listing the choices otherwise). */
const char *sr_sharding_type_name(enum sr_sharding_type type);
int sr_sharding_type_parse(const char *s, enum sr_sharding_type *out);

/* Every table sharded by `type` on W ranks, L per node (not hybrid: its hot
 * rows come from statistics, sr_plan_set_hybrid). tw tables and twrw
 * tables go, largest (E*D) first, to the least loaded rank or node
 * (ties: the lowest); cw splits D into the largest n <= W that divides D,
 * the pieces placed on the least loaded ranks. Returns SR_OK and *out (free
 * with sr_plan_free), or SR_ERR_INVALID_ARG (bad W, L, type or config). */
int sr_plan_uniform(struct sr_plan **out, const struct sr_ebc_config *cfg,
                    enum sr_sharding_type type, int world_size, int local_size);

/* The default plan: tables of at most SR_PLAN_DP_MAX_ROWS rows dp (their
 * gradient all-reduce costs about what a pooled exchange of a small global
 * batch costs, and they send nothing forward), the rest tw, placed largest
 * (E*D) first on the least loaded rank. With W = 1 every table is tw on rank
 * 0: all lookups are local and no dp gradient needs reducing. */
int sr_plan_default(struct sr_plan **out, const struct sr_ebc_config *cfg, int world_size,
                    int local_size);

/* Check a plan against the config, W and L: the same tables in the same
 * order, ranks in [0, W), shards laid out as the type requires (see above),
 * every row and column covered exactly once. SR_ERR_INVALID_ARG naming the
 * table, the shard and what is wrong. */
int sr_plan_validate(const struct sr_plan *plan, const struct sr_ebc_config *cfg, int world_size,
                     int local_size);

/* JSON text of the plan (caller frees with sr_free), and back: the text is
 * parsed, completed (omitted shards filled in), put in cfg's table order and
 * validated; errors name `source` (a file name, for messages). */
char *sr_plan_to_json(const struct sr_plan *plan);
int sr_plan_from_json(struct sr_plan **out, const char *text, const char *source,
                      const struct sr_ebc_config *cfg, int world_size, int local_size);
/* Files: SR_ERR_IO when the file cannot be read, SR_ERR_WRITE when it cannot be
 * written (a full disk). Writing is atomic (shardrec/atomic_file.h): the old
 * file stays until the whole plan is on disk. */
int sr_plan_write(const struct sr_plan *plan, const char *path);
int sr_plan_read(struct sr_plan **out, const char *path, const struct sr_ebc_config *cfg,
                 int world_size, int local_size);

/* A 64-bit FNV-1a hash of everything in the plan, for the start-up check that
 * every rank runs the same plan. */
uint64_t sr_plan_hash(const struct sr_plan *plan);

/* Make table t of plan hybrid: rw shards over the plan's W ranks and the H
 * hot rows `hot` (copied; sorted and deduplicated here, so H may shrink).
 * SR_ERR_INVALID_ARG when a row is outside [0, E). */
int sr_plan_set_hybrid(struct sr_plan *plan, const struct sr_ebc_config *cfg, int t,
                       const int64_t *hot, int64_t num_hot);

/* Rows per block of a rw (W) or twrw (L) table: ceil(E / parts). */
int64_t sr_plan_block_rows(int64_t rows, int parts);

struct sr_plan *sr_plan_alloc(int num_tables, int world_size, int local_size);
void sr_plan_free(struct sr_plan *plan); /* NULL ok */

#endif
