/*
 * Sharding plans: the shards each sharding type lays out, uniform and default
 * plans with greedy balancing, validation against the config and the world,
 * and the hash every rank compares at start-up.
 *
 * A plan holds one sr_table_plan per table, in the config's order; each owns
 * its array of shards:
 *
 *   plan.tables[t] = { name, type, num_shards, shards[] = { rank, row_offset,
 *                      rows, col_offset, cols }, ... }
 *
 * Balancing (uniform tw/twrw/cw and the default's tw tables) is the classic
 * greedy: tables by size E*D descending (ties by table index), each to the
 * rank (or node) with the smallest load so far (ties: the lowest index).
 * Deterministic, so every rank builds the same plan.
 */
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "plan/plan_internal.h"

static const char *type_names[SR_SHARDING_TYPE_COUNT] = {"dp", "tw", "rw", "cw", "twrw", "hybrid"};
static const char *type_long_names[SR_SHARDING_TYPE_COUNT] = {
    "data_parallel", "table_wise", "row_wise", "column_wise", "table_row_wise", "hybrid"};

const char *sr_sharding_type_name(enum sr_sharding_type type)
{
    return (unsigned)type < SR_SHARDING_TYPE_COUNT ? type_names[type] : "unknown";
}

int sr_sharding_type_parse(const char *s, enum sr_sharding_type *out)
{
    for (int k = 0; k < SR_SHARDING_TYPE_COUNT; k++)
        if (strcmp(s, type_names[k]) == 0 || strcmp(s, type_long_names[k]) == 0) {
            *out = (enum sr_sharding_type)k;
            return SR_OK;
        }
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "unknown sharding type '%s'; choose dp, tw, rw, cw, twrw or hybrid", s);
}

int64_t sr_plan_block_rows(int64_t rows, int parts)
{
    return (rows + parts - 1) / parts;
}

struct sr_plan *sr_plan_alloc(int num_tables, int world_size, int local_size)
{
    struct sr_plan *p = sr_calloc(1, sizeof *p);
    p->world_size = world_size;
    p->local_size = local_size;
    p->num_tables = num_tables;
    p->tables = sr_calloc((size_t)(num_tables > 0 ? num_tables : 1), sizeof *p->tables);
    return p;
}

void sr_plan_free(struct sr_plan *p)
{
    if (!p)
        return;
    for (int t = 0; t < p->num_tables; t++) {
        sr_free(p->tables[t].shards);
        sr_free(p->tables[t].hot);
    }
    sr_free(p->tables);
    sr_free(p);
}

/* ---- shards of each type ------------------------------------------------ */

static struct sr_shard *reset_shards(struct sr_table_plan *tp, const struct sr_table_config *tc,
                                     enum sr_sharding_type type, int n)
{
    sr_free(tp->shards);
    if (type != SR_SHARDING_TYPE_HYBRID) { /* only hybrid tables have hot rows */
        sr_free(tp->hot);
        tp->hot = NULL;
        tp->num_hot = 0;
    }
    strncpy(tp->name, tc->name, SR_NAME_MAX - 1);
    tp->name[SR_NAME_MAX - 1] = '\0';
    tp->type = type;
    tp->num_shards = n;
    tp->shards = sr_calloc((size_t)n, sizeof *tp->shards);
    return tp->shards;
}

static struct sr_shard whole(const struct sr_table_config *tc, int rank)
{
    return (struct sr_shard){.rank = rank,
                             .row_offset = 0,
                             .rows = tc->num_embeddings,
                             .col_offset = 0,
                             .cols = tc->embedding_dim};
}

/* Row block i of `parts` blocks of ceil(E/parts) rows, on `rank`. */
static struct sr_shard row_block(const struct sr_table_config *tc, int i, int parts, int rank)
{
    int64_t e = tc->num_embeddings, r = sr_plan_block_rows(e, parts);
    int64_t lo = (int64_t)i * r < e ? (int64_t)i * r : e;
    int64_t hi = lo + r < e ? lo + r : e;
    return (struct sr_shard){.rank = rank,
                             .row_offset = lo,
                             .rows = hi - lo,
                             .col_offset = 0,
                             .cols = tc->embedding_dim};
}

void sr_plan_fill_dp(struct sr_table_plan *tp, const struct sr_table_config *tc, int W)
{
    struct sr_shard *s = reset_shards(tp, tc, SR_SHARDING_TYPE_DATA_PARALLEL, W);
    for (int i = 0; i < W; i++)
        s[i] = whole(tc, i);
}

void sr_plan_fill_tw(struct sr_table_plan *tp, const struct sr_table_config *tc, int rank)
{
    reset_shards(tp, tc, SR_SHARDING_TYPE_TABLE_WISE, 1)[0] = whole(tc, rank);
}

void sr_plan_fill_rw(struct sr_table_plan *tp, const struct sr_table_config *tc, int W)
{
    struct sr_shard *s = reset_shards(tp, tc, SR_SHARDING_TYPE_ROW_WISE, W);
    for (int i = 0; i < W; i++)
        s[i] = row_block(tc, i, W, i);
}

void sr_plan_fill_hybrid(struct sr_table_plan *tp, const struct sr_table_config *tc, int W)
{
    struct sr_shard *s = reset_shards(tp, tc, SR_SHARDING_TYPE_HYBRID, W);
    for (int i = 0; i < W; i++)
        s[i] = row_block(tc, i, W, i);
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int sr_plan_set_hybrid(struct sr_plan *p, const struct sr_ebc_config *cfg, int t,
                       const int64_t *hot, int64_t num_hot)
{
    SR_ASSERT(t >= 0 && t < p->num_tables && t < cfg->num_tables && num_hot >= 0);
    const struct sr_table_config *tc = &cfg->tables[t];
    for (int64_t k = 0; k < num_hot; k++)
        if (hot[k] < 0 || hot[k] >= tc->num_embeddings)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan: table '%s' (hybrid): hot row %lld is outside [0, %lld)",
                                tc->name, (long long)hot[k], (long long)tc->num_embeddings);
    struct sr_table_plan *tp = &p->tables[t];
    sr_free(tp->hot);
    tp->hot = sr_malloc(sizeof(int64_t) * (size_t)(num_hot ? num_hot : 1));
    if (num_hot)
        memcpy(tp->hot, hot, sizeof(int64_t) * (size_t)num_hot);
    qsort(tp->hot, (size_t)num_hot, sizeof(int64_t), cmp_i64);
    int64_t n = 0;
    for (int64_t k = 0; k < num_hot; k++)
        if (n == 0 || tp->hot[k] != tp->hot[n - 1])
            tp->hot[n++] = tp->hot[k];
    tp->num_hot = n;
    sr_plan_fill_hybrid(tp, tc, p->world_size);
    return SR_OK;
}

void sr_plan_fill_twrw(struct sr_table_plan *tp, const struct sr_table_config *tc, int node, int L)
{
    struct sr_shard *s = reset_shards(tp, tc, SR_SHARDING_TYPE_TABLE_ROW_WISE, L);
    for (int i = 0; i < L; i++)
        s[i] = row_block(tc, i, L, node * L + i);
}

void sr_plan_fill_cw(struct sr_table_plan *tp, const struct sr_table_config *tc, int n,
                     const int *ranks)
{
    struct sr_shard *s = reset_shards(tp, tc, SR_SHARDING_TYPE_COLUMN_WISE, n);
    int w = tc->embedding_dim / n;
    for (int j = 0; j < n; j++)
        s[j] = (struct sr_shard){.rank = ranks[j],
                                 .row_offset = 0,
                                 .rows = tc->num_embeddings,
                                 .col_offset = j * w,
                                 .cols = w};
}

/* ---- greedy balancing --------------------------------------------------- */

static double table_size(const struct sr_table_config *tc)
{
    return (double)tc->num_embeddings * (double)tc->embedding_dim;
}

/* Table indices by size descending, ties by index (insertion sort: T is small). */
static int *tables_by_size(const struct sr_ebc_config *cfg)
{
    int *order = sr_malloc(sizeof(int) * (size_t)cfg->num_tables);
    for (int t = 0; t < cfg->num_tables; t++) {
        int j = t;
        for (; j > 0 && table_size(&cfg->tables[order[j - 1]]) < table_size(&cfg->tables[t]); j--)
            order[j] = order[j - 1];
        order[j] = t;
    }
    return order;
}

static int least_loaded(const double *load, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (load[i] < load[best])
            best = i;
    return best;
}

/* The largest n <= W that divides D. */
static int cw_pieces(int dim, int W)
{
    int n = W < dim ? W : dim;
    while (dim % n != 0)
        n--;
    return n;
}

static void place_cw(struct sr_table_plan *tp, const struct sr_table_config *tc, double *load,
                     int W)
{
    int n = cw_pieces(tc->embedding_dim, W);
    int *ranks = sr_malloc(sizeof(int) * (size_t)n);
    for (int j = 0; j < n; j++) {
        ranks[j] = least_loaded(load, W);
        load[ranks[j]] += table_size(tc) / n;
    }
    sr_plan_fill_cw(tp, tc, n, ranks);
    sr_free(ranks);
}

/* Place table t of type `type`; load is per rank (tw, cw) or per node (twrw). */
static void place(struct sr_plan *p, const struct sr_ebc_config *cfg, int t,
                  enum sr_sharding_type type, double *load)
{
    const struct sr_table_config *tc = &cfg->tables[t];
    const int W = p->world_size, L = p->local_size;
    int k;
    switch (type) {
    case SR_SHARDING_TYPE_DATA_PARALLEL:
        sr_plan_fill_dp(&p->tables[t], tc, W);
        break;
    case SR_SHARDING_TYPE_ROW_WISE:
        sr_plan_fill_rw(&p->tables[t], tc, W);
        break;
    case SR_SHARDING_TYPE_TABLE_WISE:
        k = least_loaded(load, W);
        load[k] += table_size(tc);
        sr_plan_fill_tw(&p->tables[t], tc, k);
        break;
    case SR_SHARDING_TYPE_TABLE_ROW_WISE:
        k = least_loaded(load, W / L);
        load[k] += table_size(tc);
        sr_plan_fill_twrw(&p->tables[t], tc, k, L);
        break;
    case SR_SHARDING_TYPE_COLUMN_WISE:
        place_cw(&p->tables[t], tc, load, W);
        break;
    case SR_SHARDING_TYPE_HYBRID: /* no hot rows yet: sr_plan_set_hybrid adds them */
        sr_plan_fill_hybrid(&p->tables[t], tc, W);
        break;
    default:
        SR_ABORT("unknown sharding type %d", (int)type);
    }
}

static int check_world(const struct sr_ebc_config *cfg, int W, int L)
{
    int rc = sr_ebc_config_validate(cfg);
    if (rc)
        return rc;
    if (W < 1 || L < 1 || W % L != 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan: world size %d is not a positive multiple of %d ranks per "
                            "node; HINT: fix --ranks-per-node",
                            W, L);
    return SR_OK;
}

/* types[t] for every table; NULL `types` means every table gets `one`. */
static int build(struct sr_plan **out, const struct sr_ebc_config *cfg, int W, int L,
                 const enum sr_sharding_type *types, enum sr_sharding_type one)
{
    *out = NULL;
    int rc = check_world(cfg, W, L);
    if (rc)
        return rc;
    if (!types && (unsigned)one >= SR_SHARDING_TYPE_COUNT)
        return sr_error_set(SR_ERR_INVALID_ARG, "plan: unknown sharding type %d", (int)one);
    if (!types && one == SR_SHARDING_TYPE_HYBRID)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan: hybrid tables need their hot rows, which a uniform plan "
                            "does not know; HINT: let the planner choose (--plan auto) or "
                            "write a plan file with \"hot\" rows");
    struct sr_plan *p = sr_plan_alloc(cfg->num_tables, W, L);
    double *load = sr_calloc((size_t)W, sizeof *load);
    int *order = tables_by_size(cfg);
    for (int i = 0; i < cfg->num_tables; i++)
        place(p, cfg, order[i], types ? types[order[i]] : one, load);
    sr_free(order);
    sr_free(load);
    *out = p;
    return SR_OK;
}

int sr_plan_uniform(struct sr_plan **out, const struct sr_ebc_config *cfg,
                    enum sr_sharding_type type, int world_size, int local_size)
{
    return build(out, cfg, world_size, local_size, NULL, type);
}

int sr_plan_default(struct sr_plan **out, const struct sr_ebc_config *cfg, int world_size,
                    int local_size)
{
    *out = NULL;
    int rc = check_world(cfg, world_size, local_size);
    if (rc)
        return rc;
    enum sr_sharding_type *types = sr_malloc(sizeof *types * (size_t)cfg->num_tables);
    for (int t = 0; t < cfg->num_tables; t++)
        types[t] = world_size > 1 && cfg->tables[t].num_embeddings <= SR_PLAN_DP_MAX_ROWS
                       ? SR_SHARDING_TYPE_DATA_PARALLEL
                       : SR_SHARDING_TYPE_TABLE_WISE;
    rc = build(out, cfg, world_size, local_size, types, SR_SHARDING_TYPE_TABLE_WISE);
    sr_free(types);
    return rc;
}

/* ---- validation --------------------------------------------------------- */

static int shard_error(const struct sr_table_plan *tp, int i, const char *what,
                       const struct sr_shard *want)
{
    const struct sr_shard *s = &tp->shards[i];
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "plan: table '%s' (%s) shard %d is rank %d rows [%lld, +%lld) cols "
                        "[%d, +%d) but %s: rank %d rows [%lld, +%lld) cols [%d, +%d); HINT: "
                        "omit \"shards\" to have them filled in",
                        tp->name, sr_sharding_type_name(tp->type), i, s->rank,
                        (long long)s->row_offset, (long long)s->rows, s->col_offset, s->cols, what,
                        want->rank, (long long)want->row_offset, (long long)want->rows,
                        want->col_offset, want->cols);
}

static int same_shard(const struct sr_shard *a, const struct sr_shard *b)
{
    return a->rank == b->rank && a->row_offset == b->row_offset && a->rows == b->rows &&
           a->col_offset == b->col_offset && a->cols == b->cols;
}

static int count_error(const struct sr_table_plan *tp, int want, const char *why)
{
    return sr_error_set(SR_ERR_INVALID_ARG, "plan: table '%s' (%s) has %d shards but needs %d (%s)",
                        tp->name, sr_sharding_type_name(tp->type), tp->num_shards, want, why);
}

/* The shards tp must have, given its type (cw: its own count and ranks). */
static int expected_shards(const struct sr_table_plan *tp, const struct sr_table_config *tc, int W,
                           int L, struct sr_table_plan *want)
{
    const struct sr_shard *s0 = tp->shards;
    int *ranks;
    switch (tp->type) {
    case SR_SHARDING_TYPE_DATA_PARALLEL:
        sr_plan_fill_dp(want, tc, W);
        return tp->num_shards == W ? SR_OK : count_error(tp, W, "one per rank");
    case SR_SHARDING_TYPE_TABLE_WISE:
        sr_plan_fill_tw(want, tc, s0 ? s0->rank : 0);
        return tp->num_shards == 1 ? SR_OK : count_error(tp, 1, "the whole table");
    case SR_SHARDING_TYPE_ROW_WISE:
        sr_plan_fill_rw(want, tc, W);
        return tp->num_shards == W ? SR_OK : count_error(tp, W, "one row block per rank");
    case SR_SHARDING_TYPE_HYBRID:
        sr_plan_fill_hybrid(want, tc, W);
        return tp->num_shards == W ? SR_OK : count_error(tp, W, "one row block per rank");
    case SR_SHARDING_TYPE_TABLE_ROW_WISE:
        sr_plan_fill_twrw(want, tc, s0 ? s0->rank / L : 0, L);
        return tp->num_shards == L ? SR_OK
                                   : count_error(tp, L, "one row block per rank of its node");
    case SR_SHARDING_TYPE_COLUMN_WISE:
        if (tp->num_shards < 1 || tc->embedding_dim % tp->num_shards != 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan: table '%s' (cw) has %d column shards, which do not "
                                "split D = %d into equal pieces; HINT: use a divisor of D",
                                tp->name, tp->num_shards, tc->embedding_dim);
        ranks = sr_malloc(sizeof(int) * (size_t)tp->num_shards);
        for (int j = 0; j < tp->num_shards; j++)
            ranks[j] = tp->shards[j].rank;
        sr_plan_fill_cw(want, tc, tp->num_shards, ranks);
        sr_free(ranks);
        return SR_OK;
    default:
        return sr_error_set(SR_ERR_INVALID_ARG, "plan: table '%s' has unknown sharding type %d",
                            tp->name, (int)tp->type);
    }
}

/* A hybrid table's hot rows: in [0, E), strictly ascending; none elsewhere. */
static int validate_hot(const struct sr_table_plan *tp, const struct sr_table_config *tc)
{
    if (tp->type != SR_SHARDING_TYPE_HYBRID)
        return tp->num_hot == 0 ? SR_OK
                                : sr_error_set(SR_ERR_INVALID_ARG,
                                               "plan: table '%s' (%s) has %lld hot rows; only "
                                               "hybrid tables have them",
                                               tp->name, sr_sharding_type_name(tp->type),
                                               (long long)tp->num_hot);
    if (tp->num_hot < 0 || tp->num_hot > tc->num_embeddings || (tp->num_hot > 0 && !tp->hot))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan: table '%s' (hybrid) has %lld hot rows, not in [0, E = %lld]",
                            tp->name, (long long)tp->num_hot, (long long)tc->num_embeddings);
    for (int64_t k = 0; k < tp->num_hot; k++) {
        const int64_t v = tp->hot[k];
        if (v < 0 || v >= tc->num_embeddings)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan: table '%s' (hybrid): hot[%lld] = %lld is outside its "
                                "rows [0, %lld)",
                                tp->name, (long long)k, (long long)v,
                                (long long)tc->num_embeddings);
        if (k > 0 && v <= tp->hot[k - 1])
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan: table '%s' (hybrid): hot[%lld] = %lld %s hot[%lld] = "
                                "%lld; HINT: list the hot rows once each, in ascending order",
                                tp->name, (long long)k, (long long)v,
                                v == tp->hot[k - 1] ? "repeats" : "is below", (long long)(k - 1),
                                (long long)tp->hot[k - 1]);
    }
    return SR_OK;
}

static int validate_table(const struct sr_table_plan *tp, const struct sr_table_config *tc, int W,
                          int L)
{
    for (int i = 0; i < tp->num_shards; i++)
        if (tp->shards[i].rank < 0 || tp->shards[i].rank >= W)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan: table '%s' shard %d is on rank %d, out of range [0, %d); "
                                "HINT: the plan was made for another world size?",
                                tp->name, i, tp->shards[i].rank, W);
    struct sr_table_plan want = {0};
    int rc = expected_shards(tp, tc, W, L, &want);
    for (int i = 0; !rc && i < tp->num_shards; i++)
        if (!same_shard(&tp->shards[i], &want.shards[i]))
            rc = shard_error(tp, i,
                             tp->type == SR_SHARDING_TYPE_ROW_WISE ||
                                     tp->type == SR_SHARDING_TYPE_HYBRID ||
                                     tp->type == SR_SHARDING_TYPE_TABLE_ROW_WISE
                                 ? "row blocks of ceil(E/ranks) rows must cover every row once"
                                 : "shards must cover every row and column once",
                             &want.shards[i]);
    sr_free(want.shards);
    return rc ? rc : validate_hot(tp, tc);
}

int sr_plan_validate(const struct sr_plan *p, const struct sr_ebc_config *cfg, int W, int L)
{
    int rc = check_world(cfg, W, L);
    if (rc)
        return rc;
    if (p->world_size != W || p->local_size != L)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan: made for %d ranks (%d per node), the job has %d (%d per "
                            "node); HINT: make a plan for this world",
                            p->world_size, p->local_size, W, L);
    if (p->num_tables != cfg->num_tables)
        return sr_error_set(SR_ERR_INVALID_ARG, "plan: has %d tables, the config %d", p->num_tables,
                            cfg->num_tables);
    for (int t = 0; t < cfg->num_tables; t++) {
        if (strcmp(p->tables[t].name, cfg->tables[t].name) != 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan: table %d is '%s' but the config's is '%s'", t,
                                p->tables[t].name, cfg->tables[t].name);
        rc = validate_table(&p->tables[t], &cfg->tables[t], W, L);
        if (rc)
            return rc;
    }
    return SR_OK;
}

/* ---- hash --------------------------------------------------------------- */

static uint64_t fnv_i64(uint64_t h, int64_t v)
{
    return sr_hash_bytes(h, &v, sizeof v);
}

uint64_t sr_plan_hash(const struct sr_plan *p)
{
    uint64_t h = SR_HASH_INIT;
    h = fnv_i64(fnv_i64(fnv_i64(h, p->world_size), p->local_size), p->num_tables);
    for (int t = 0; t < p->num_tables; t++) {
        const struct sr_table_plan *tp = &p->tables[t];
        h = sr_hash_bytes(h, tp->name, strnlen(tp->name, SR_NAME_MAX) + 1);
        h = fnv_i64(fnv_i64(h, tp->type), tp->num_shards);
        for (int i = 0; i < tp->num_shards; i++) {
            const struct sr_shard *s = &tp->shards[i];
            h = fnv_i64(fnv_i64(fnv_i64(h, s->rank), s->row_offset), s->rows);
            h = fnv_i64(fnv_i64(h, s->col_offset), s->cols);
        }
        if (tp->type == SR_SHARDING_TYPE_HYBRID) { /* other types hash as before */
            h = fnv_i64(h, tp->num_hot);
            for (int64_t k = 0; k < tp->num_hot; k++)
                h = fnv_i64(h, tp->hot[k]);
        }
    }
    return h;
}
