/*
 * The planner's search and prediction (shardrec/planner.h, docs/planner.md).
 *
 * Search: tables largest (E x D) first; for each, every option
 *
 *   dp;  tw on rank r (each r);  rw;  cw in n pieces (n from 2 to W dividing
 *   D, pieces on the n ranks with the least embedding work so far; not with
 *   row-wise Adagrad, whose state needs whole rows);  twrw on node k (each
 *   k, with several nodes of several ranks);  hybrid with H hot rows for
 *   each hot-set size H the statistics know (E/1000, E/300, E/100, E/30,
 *   E/10 rounded up, within what they know: its H hottest rows replicated,
 *   the rest rw; only for tables stored in fp32, as hybrid tables are)
 *
 * is added to the tables placed so far and the predicted step of that
 * partial plan compared; the shortest that fits every rank's memory wins
 * (ties: the first in the order above). The reason, the winner's step
 * against the runner-up's, is kept for --explain. Then up to 3 passes
 * re-place each table with all the others where they are, keeping moves
 * that shorten the step; last, all-tw, all-rw, the default rule and
 * all-hybrid (its hot sets sized as the search sizes them) are predicted
 * whole and replace the searched plan if one is faster within memory.
 *
 * While it searches, a hybrid option carries only its H (the cost model
 * needs no more); the tables that stay hybrid get their rows, the
 * statistics' H hottest sorted ascending, at the end (hot_rows_in).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "plan/plan_internal.h"
#include "plan/planner_internal.h"

static int check_model(const struct sr_planner_model *m, const struct sr_topology *topo)
{
    if (!m->ebc || m->ebc->num_tables < 1 || !m->stats || m->n_bot < 2 || m->n_top < 1)
        return sr_error_set(SR_ERR_INVALID_ARG, "planner: the model has no tables or MLPs");
    if (m->global_batch < topo->world_size || m->global_batch % topo->world_size)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "planner: a global batch of %lld does not split over %d ranks",
                            (long long)m->global_batch, topo->world_size);
    return SR_OK;
}

static struct sr_planner_report *report_alloc(int W, int T)
{
    struct sr_planner_report *r = sr_calloc(1, sizeof *r);
    r->world_size = W;
    r->num_tables = T;
    r->ranks = sr_calloc((size_t)W, sizeof *r->ranks);
    r->tables = sr_calloc((size_t)T, sizeof *r->tables);
    return r;
}

void sr_planner_report_free(struct sr_planner_report *r)
{
    if (!r)
        return;
    sr_free(r->ranks);
    sr_free(r->tables);
    sr_free(r->why);
    sr_free(r);
}

static void fill_report(struct sr_planner_report *r, const struct pl_acc *a)
{
    pl_acc_step(a, r->stage_s, &r->collectives);
    r->samples_s = r->stage_s[SR_PS_STEP] > 0 ? a->m->global_batch / r->stage_s[SR_PS_STEP] : 0;
    for (int k = 0; k < a->W; k++) {
        struct sr_planner_rank *rk = &r->ranks[k];
        rk->memory_bytes = pl_acc_rank_memory(a, k);
        rk->lookup_s = a->lookup[k];
        rk->update_s = a->update[k];
        for (int l = 0; l < 2; l++) {
            rk->send_bytes[l] = a->send[PL_INPUT][l][k];
            for (int g = PL_A2A; g < PL_GROUPS; g++)
                rk->send_bytes[l] += a->send[g][l][k] + a->recv[g][l][k]; /* fwd + mirrored bwd */
        }
    }
}

int sr_planner_predict(const struct sr_planner_model *m, const struct sr_topology *topo,
                       const struct sr_plan *plan, struct sr_planner_report **out)
{
    *out = NULL;
    int rc = check_model(m, topo);
    if (!rc)
        rc = sr_plan_validate(plan, m->ebc, topo->world_size, topo->ranks_per_node);
    if (rc)
        return rc;
    struct pl_acc a;
    pl_acc_init(&a, m, topo);
    struct sr_planner_report *r = report_alloc(topo->world_size, m->ebc->num_tables);
    for (int t = 0; t < m->ebc->num_tables; t++)
        pl_acc_add_table(&a, t, &plan->tables[t], &r->tables[t]);
    fill_report(r, &a);
    pl_acc_free(&a);
    *out = r;
    return SR_OK;
}

/* ---- the search --------------------------------------------------------------------- */

struct candidate {
    struct sr_table_plan tp;
    double step, memory_ratio;
    int fits;
};

struct search {
    const struct sr_planner_model *m;
    const struct sr_topology *topo;
    int W, L, nodes;
    struct pl_acc placed, trial;
    struct candidate best, second;
    char label_best[64], label_second[64];
    int worst_rank;
};

static void describe(const struct search *x, int t, char *buf, size_t cap,
                     const struct sr_table_plan *tp)
{
    const struct sr_shard *s = tp->shards;
    switch (tp->type) {
    case SR_SHARDING_TYPE_TABLE_WISE:
        snprintf(buf, cap, "tw on rank %d", s[0].rank);
        break;
    case SR_SHARDING_TYPE_TABLE_ROW_WISE:
        snprintf(buf, cap, "twrw on node %d", s[0].rank / x->L);
        break;
    case SR_SHARDING_TYPE_COLUMN_WISE:
        snprintf(buf, cap, "cw in %d pieces", tp->num_shards);
        break;
    case SR_SHARDING_TYPE_HYBRID:
        snprintf(buf, cap, "hybrid (%lld hot rows, %.1f%% of its lookups)", (long long)tp->num_hot,
                 100 * pl_hot_share_of(x->m, t, tp->num_hot));
        break;
    default:
        snprintf(buf, cap, "%s", sr_sharding_type_name(tp->type));
    }
}

static void move_table_plan(struct sr_table_plan *dst, struct sr_table_plan *src)
{
    sr_free(dst->shards);
    sr_free(dst->hot);
    *dst = *src;
    src->shards = NULL;
    src->num_shards = 0;
    src->hot = NULL;
    src->num_hot = 0;
}

static void drop_table_plan(struct sr_table_plan *tp)
{
    sr_free(tp->shards);
    sr_free(tp->hot);
    tp->shards = NULL;
    tp->hot = NULL;
    tp->num_hot = 0;
}

void sr_planner_stats_release(struct sr_planner_table *stats, int T)
{
    for (int t = 0; stats && t < T; t++) {
        sr_free(stats[t].hot);
        stats[t].hot = NULL;
        stats[t].num_hot = 0;
    }
}

/* Whether table t can be hybrid at all: the sharded EBC keeps a hybrid
 * table's rows in fp32 (its replica is fp32) and names the replica
 * "NAME.hot" (sharded_hybrid.c's check_table refuses anything else). */
static int hybrid_allowed(const struct sr_planner_model *m, int t)
{
    const struct sr_table_config *tc = &m->ebc->tables[t];
    return tc->storage == SR_DTYPE_F32 && (m->emb_elem_bytes <= 0 || m->emb_elem_bytes == 4) &&
           strlen(tc->name) + 5 <= SR_NAME_MAX;
}

/* The hot-set sizes of table t the search weighs: its statistics' (none
 * when they list no hot rows, or the table cannot be hybrid). */
static int hot_sizes(const struct sr_planner_model *m, int t)
{
    const struct sr_planner_table *st = &m->stats[t];
    if (!st->hot || st->num_hot <= 0 || !hybrid_allowed(m, t))
        return 0;
    SR_ASSERT(st->num_sizes <= SR_PLANNER_HOT_SIZES &&
              (st->num_sizes == 0 || st->hot_size[st->num_sizes - 1] <= st->num_hot));
    return st->num_sizes;
}

/* tp := table t hybrid with its statistics' i-th hot-set size, H rows: H
 * alone, the rows come at the end (hot_rows_in). */
static void fill_hybrid(struct sr_table_plan *tp, const struct sr_planner_model *m, int t, int W,
                        int i)
{
    sr_plan_fill_hybrid(tp, &m->ebc->tables[t], W);
    sr_free(tp->hot);
    tp->hot = NULL;
    tp->num_hot = m->stats[t].hot_size[i];
}

/* Every hybrid table of plan that has only its H: the statistics' H
 * hottest rows (a prefix of their list), ascending. */
static int hot_rows_in(struct sr_plan *plan, const struct sr_planner_model *m)
{
    int rc = SR_OK;
    for (int t = 0; t < plan->num_tables && !rc; t++) {
        const struct sr_table_plan *tp = &plan->tables[t];
        if (tp->type != SR_SHARDING_TYPE_HYBRID || tp->hot || tp->num_hot <= 0)
            continue;
        SR_ASSERT(m->stats[t].hot && tp->num_hot <= m->stats[t].num_hot);
        rc = sr_plan_set_hybrid(plan, m->ebc, t, m->stats[t].hot, tp->num_hot);
    }
    return rc;
}

/* Try option tp for table t: keep it as best or runner-up. */
static void try_option(struct search *s, int t, struct sr_table_plan *tp)
{
    struct candidate c = {.tp = *tp};
    double stages[SR_PS_COUNT];
    int colls, rank;
    pl_acc_copy(&s->trial, &s->placed);
    pl_acc_add_table(&s->trial, t, tp, NULL);
    pl_acc_step(&s->trial, stages, &colls);
    c.step = stages[SR_PS_STEP];
    c.memory_ratio = pl_acc_memory_ratio(&s->trial, &rank);
    c.fits = c.memory_ratio <= 1;
    char label[64];
    describe(s, t, label, sizeof label, tp);
    int better = !s->best.tp.shards || (c.fits && !s->best.fits) ||
                 (c.fits == s->best.fits &&
                  (c.fits ? c.step < s->best.step * (1 - 1e-9) : c.memory_ratio < s->best.memory_ratio));
    if (better) {
        if (s->best.tp.shards) {
            move_table_plan(&s->second.tp, &s->best.tp);
            s->second.step = s->best.step, s->second.fits = s->best.fits;
            snprintf(s->label_second, sizeof s->label_second, "%s", s->label_best);
        }
        s->best.step = c.step, s->best.fits = c.fits, s->best.memory_ratio = c.memory_ratio;
        move_table_plan(&s->best.tp, tp);
        snprintf(s->label_best, sizeof s->label_best, "%s", label);
        if (!c.fits)
            s->worst_rank = rank;
        return;
    }
    if (!s->second.tp.shards || (c.fits && (!s->second.fits || c.step < s->second.step))) {
        move_table_plan(&s->second.tp, tp);
        s->second.step = c.step, s->second.fits = c.fits;
        snprintf(s->label_second, sizeof s->label_second, "%s", label);
    }
    drop_table_plan(tp);
}

/* The n ranks with the least embedding work placed so far (ties: lowest). */
static void least_busy(const struct search *s, int n, int *ranks)
{
    int *taken = sr_calloc((size_t)s->W, sizeof *taken);
    for (int j = 0; j < n; j++) {
        int pick = -1;
        for (int r = 0; r < s->W; r++) {
            double w = s->placed.lookup[r] + s->placed.update[r];
            if (!taken[r] && (pick < 0 || w < s->placed.lookup[pick] + s->placed.update[pick]))
                pick = r;
        }
        taken[pick] = 1;
        ranks[j] = pick;
    }
    sr_free(taken);
}

static void try_all(struct search *s, int t)
{
    const struct sr_table_config *tc = &s->m->ebc->tables[t];
    struct sr_table_plan tp = {0};
    snprintf(tp.name, sizeof tp.name, "%s", tc->name);
    if (s->W > 1) {
        sr_plan_fill_dp(&tp, tc, s->W);
        try_option(s, t, &tp);
    }
    for (int r = 0; r < s->W; r++) {
        sr_plan_fill_tw(&tp, tc, r);
        try_option(s, t, &tp);
    }
    if (s->W > 1) {
        sr_plan_fill_rw(&tp, tc, s->W);
        try_option(s, t, &tp);
    }
    int *ranks = sr_malloc(sizeof *ranks * (size_t)s->W);
    for (int n = 2; n <= s->W && s->m->emb_state != SR_PLANNER_STATE_ROW; n++) {
        if (tc->embedding_dim % n || tc->embedding_dim / n < 4)
            continue;
        least_busy(s, n, ranks);
        sr_plan_fill_cw(&tp, tc, n, ranks);
        try_option(s, t, &tp);
    }
    sr_free(ranks);
    for (int k = 0; s->nodes > 1 && s->L > 1 && k < s->nodes; k++) {
        sr_plan_fill_twrw(&tp, tc, k, s->L);
        try_option(s, t, &tp);
    }
    for (int i = 0; s->W > 1 && i < hot_sizes(s->m, t); i++) {
        fill_hybrid(&tp, s->m, t, s->W, i);
        try_option(s, t, &tp);
    }
    drop_table_plan(&tp);
}

static int *tables_by_size(const struct sr_ebc_config *cfg)
{
    int T = cfg->num_tables;
    int *order = sr_malloc(sizeof *order * (size_t)T);
    for (int i = 0; i < T; i++)
        order[i] = i;
    for (int i = 1; i < T; i++) { /* insertion sort: stable, largest first */
        int x = order[i], j = i;
        double size = (double)cfg->tables[x].num_embeddings * cfg->tables[x].embedding_dim;
        while (j > 0 && (double)cfg->tables[order[j - 1]].num_embeddings *
                                cfg->tables[order[j - 1]].embedding_dim < size) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    return order;
}

/* The best and runner-up option for table t against the tables in s->placed. */
static void choose(struct search *s, int t)
{
    memset(&s->best, 0, sizeof s->best);
    memset(&s->second, 0, sizeof s->second);
    try_all(s, t);
}

static int infeasible(struct search *s, int t)
{
    const struct sr_table_config *tc = &s->m->ebc->tables[t];
    int rc = sr_error_set(SR_ERR_INVALID_ARG,
                          "planner: table '%s' (%lld rows x %d) fits no rank: the best "
                          "option, %s, needs %.0f%% of rank %d's %.1f GB; HINT: more ranks, "
                          "a topology with more memory, or a smaller table",
                          tc->name, (long long)tc->num_embeddings, tc->embedding_dim,
                          s->label_best, 100 * s->best.memory_ratio, s->worst_rank,
                          s->topo->memory_bytes / 1e9);
    drop_table_plan(&s->best.tp);
    drop_table_plan(&s->second.tp);
    return rc;
}

/* "tw on rank 3: step 1.2 ms <context>; runner-up rw 1.3 ms (+8.3%)" */
static void reason(const struct search *s, char *buf, size_t cap, const char *context)
{
    if (!s->second.tp.shards) {
        snprintf(buf, cap, "%s: the only option", s->label_best);
        return;
    }
    int at = snprintf(buf, cap, "%s: step %.4f ms %s; runner-up %s ", s->label_best,
                      s->best.step * 1e3, context, s->label_second);
    if (at < 0 || (size_t)at >= cap)
        return;
    if (s->second.fits)
        snprintf(buf + at, cap - (size_t)at, "%.4f ms (+%.3f%%)", s->second.step * 1e3,
                 100 * (s->second.step / s->best.step - 1));
    else
        snprintf(buf + at, cap - (size_t)at, "(does not fit)");
}

static int place_table(struct search *s, struct sr_plan *plan, struct sr_planner_report *rep,
                       int t)
{
    choose(s, t);
    if (!s->best.fits)
        return infeasible(s, t);
    reason(s, rep->why[t], sizeof rep->why[t], "with the tables placed so far");
    pl_acc_add_table(&s->placed, t, &s->best.tp, NULL);
    move_table_plan(&plan->tables[t], &s->best.tp);
    drop_table_plan(&s->second.tp);
    return SR_OK;
}

/* s->placed := every table of plan but `skip` (-1: all). */
static void rebuild(struct search *s, const struct sr_plan *plan, int skip)
{
    pl_acc_clear(&s->placed);
    for (int t = 0; t < plan->num_tables; t++)
        if (t != skip)
            pl_acc_add_table(&s->placed, t, &plan->tables[t], NULL);
}

static double plan_step(struct search *s, const struct sr_plan *plan, double *memory_ratio)
{
    double stages[SR_PS_COUNT];
    int colls, rank;
    rebuild(s, plan, -1);
    pl_acc_step(&s->placed, stages, &colls);
    if (memory_ratio)
        *memory_ratio = pl_acc_memory_ratio(&s->placed, &rank);
    return stages[SR_PS_STEP];
}

/* One pass: each table, largest first, re-placed with every other table
 * where it is; a move is kept when it shortens the step. Returns the moves. */
static int improve(struct search *s, struct sr_plan *plan, struct sr_planner_report *rep,
                   const int *order)
{
    int moves = 0;
    for (int i = 0; i < plan->num_tables; i++) {
        int t = order[i];
        double now = plan_step(s, plan, NULL);
        rebuild(s, plan, t);
        choose(s, t);
        if (s->best.fits && s->best.step < now * (1 - 1e-6)) {
            char context[96];
            snprintf(context, sizeof context, "with every other table placed (re-placed: %.4f ms "
                                              "before)", now * 1e3);
            reason(s, rep->why[t], sizeof rep->why[t], context);
            move_table_plan(&plan->tables[t], &s->best.tp);
            moves++;
        }
        drop_table_plan(&s->best.tp);
        drop_table_plan(&s->second.tp);
    }
    return moves;
}

const char *sr_planner_whole_plan_name(int i)
{
    static const char *const names[SR_PLANNER_WHOLE_PLANS] = {"all tw", "all rw",
                                                              "default (dp + tw)", "all hybrid"};
    return i >= 0 && i < SR_PLANNER_WHOLE_PLANS ? names[i] : "?";
}

static void search_init(struct search *s, const struct sr_planner_model *m,
                        const struct sr_topology *topo)
{
    memset(s, 0, sizeof *s);
    s->m = m;
    s->topo = topo;
    s->W = topo->world_size;
    s->L = topo->ranks_per_node;
    s->nodes = s->W / s->L;
    pl_acc_init(&s->placed, m, topo);
    pl_acc_init(&s->trial, m, topo);
}

static void search_free(struct search *s)
{
    pl_acc_free(&s->placed);
    pl_acc_free(&s->trial);
}

/* Table t's hot-set size in the all-hybrid plan: of its sizes, the one
 * whose step with the tables in s->placed is shortest within memory (the
 * least memory where none fits), into *tp; 0 when no size is known. */
static int size_hot_set(struct search *s, int t, struct sr_table_plan *tp)
{
    struct sr_table_plan trial = {0};
    memset(&s->best, 0, sizeof s->best);
    memset(&s->second, 0, sizeof s->second);
    for (int i = 0; i < hot_sizes(s->m, t); i++) {
        fill_hybrid(&trial, s->m, t, s->W, i);
        try_option(s, t, &trial);
    }
    drop_table_plan(&trial);
    drop_table_plan(&s->second.tp);
    if (!s->best.tp.shards)
        return 0;
    move_table_plan(tp, &s->best.tp);
    return 1;
}

/* Why all hybrid has no hybrid table: a table with hot rows that cannot be
 * hybrid (hybrid_allowed), else no hot rows at all. */
static int no_hybrid_table(const struct sr_planner_model *m)
{
    for (int t = 0; t < m->ebc->num_tables; t++) {
        const struct sr_table_config *tc = &m->ebc->tables[t];
        const struct sr_planner_table *st = &m->stats[t];
        if (!st->hot || st->num_hot <= 0 || st->num_sizes <= 0 || hybrid_allowed(m, t))
            continue;
        if (strlen(tc->name) + 5 > SR_NAME_MAX)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "hybrid: table '%s' cannot be hybrid: its name leaves no room "
                                "for its replica's ('%s.hot'); HINT: a shorter name",
                                tc->name, tc->name);
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "hybrid: table '%s' is stored in %s (--emb-dtype), but hybrid tables "
                            "keep fp32 rows (their replica is fp32); HINT: --emb-dtype fp32",
                            tc->name,
                            tc->storage != SR_DTYPE_F32 ? sr_dtype_name(tc->storage) : "16 bits");
    }
    return sr_error_set(SR_ERR_INVALID_ARG, "hybrid: no table's hot rows are known; HINT: "
                                            "--id-dist zipf:S, or --data to count them on");
}

/* Every table with known hot rows hybrid, the others rw; largest first,
 * each hybrid table's hot set sized against the tables sized before it. */
static int all_hybrid(struct search *s, struct sr_plan **out)
{
    const struct sr_planner_model *m = s->m;
    int rc = sr_plan_uniform(out, m->ebc, SR_SHARDING_TYPE_ROW_WISE, s->W, s->L), any = 0;
    if (rc)
        return rc;
    int *order = tables_by_size(m->ebc);
    pl_acc_clear(&s->placed);
    for (int i = 0; i < m->ebc->num_tables; i++) {
        any |= size_hot_set(s, order[i], &(*out)->tables[order[i]]);
        pl_acc_add_table(&s->placed, order[i], &(*out)->tables[order[i]], NULL);
    }
    sr_free(order);
    rc = any ? hot_rows_in(*out, m) : no_hybrid_table(m);
    if (rc) {
        sr_plan_free(*out);
        *out = NULL;
    }
    return rc;
}

int sr_planner_whole_plan(int i, const struct sr_planner_model *m, const struct sr_topology *topo,
                          struct sr_plan **out)
{
    const struct sr_ebc_config *ebc = m->ebc;
    const int W = topo->world_size, L = topo->ranks_per_node;
    *out = NULL;
    if (i == 3) {
        struct search s;
        int rc = check_model(m, topo);
        if (rc)
            return rc;
        search_init(&s, m, topo);
        rc = all_hybrid(&s, out);
        search_free(&s);
        return rc;
    }
    if (i == 2)
        return sr_plan_default(out, ebc, W, L);
    const enum sr_sharding_type type = i ? SR_SHARDING_TYPE_ROW_WISE : SR_SHARDING_TYPE_TABLE_WISE;
    return sr_plan_uniform(out, ebc, type, W, L);
}

/* The whole plans (all tw, all rw, the rule-based default) as candidates:
 * the searched plan is kept only when none of them is faster. */
static void against_uniform(struct search *s, struct sr_plan **plan, struct sr_planner_report *rep)
{
    static const char *const why_names[SR_PLANNER_WHOLE_PLANS] = {
        "all tw", "all rw", "the default rule (dp up to 1024 rows, tw)",
        ("all hybrid (every table with known hot rows hybrid, its hot set sized by cost; the "
         "rest rw)")};
    double best = plan_step(s, *plan, NULL), ratio;
    for (int i = 0; i < SR_PLANNER_WHOLE_PLANS; i++) {
        struct sr_plan *u = NULL;
        if (sr_planner_whole_plan(i, s->m, s->topo, &u)) {
            sr_error_clear();
            continue;
        }
        double step = plan_step(s, u, &ratio);
        if (ratio <= 1 && step < best * (1 - 1e-6)) {
            for (int t = 0; t < u->num_tables; t++)
                snprintf(rep->why[t], sizeof rep->why[t],
                         "%s: the whole plan's step %.4f ms beat the search's %.4f ms", why_names[i],
                         step * 1e3, best * 1e3);
            best = step;
            sr_plan_free(*plan);
            *plan = u;
        } else {
            sr_plan_free(u);
        }
    }
}

int sr_planner_search(const struct sr_planner_model *m, const struct sr_topology *topo,
                      struct sr_plan **plan_out, struct sr_planner_report **report_out)
{
    *plan_out = NULL;
    *report_out = NULL;
    int rc = check_model(m, topo);
    if (rc)
        return rc;
    int T = m->ebc->num_tables;
    struct search s;
    search_init(&s, m, topo);
    struct sr_plan *plan = sr_plan_alloc(T, s.W, s.L);
    struct sr_planner_report *why = report_alloc(s.W, T);
    why->why = sr_calloc((size_t)T, sizeof *why->why);
    int *order = tables_by_size(m->ebc);
    for (int i = 0; i < T && !rc; i++)
        rc = place_table(&s, plan, why, order[i]);
    for (int pass = 0; pass < 3 && !rc && s.W > 1; pass++)
        if (!improve(&s, plan, why, order))
            break;
    if (!rc && s.W > 1)
        against_uniform(&s, &plan, why);
    if (!rc)
        rc = hot_rows_in(plan, m);
    sr_free(order);
    search_free(&s);
    struct sr_planner_report *rep = NULL;
    if (!rc)
        rc = sr_planner_predict(m, topo, plan, &rep);
    if (rc) {
        sr_plan_free(plan);
        sr_planner_report_free(why);
        return rc;
    }
    rep->why = why->why;
    why->why = NULL;
    sr_planner_report_free(why);
    *plan_out = plan;
    *report_out = rep;
    return SR_OK;
}
