/*
 * The planner's table (shardrec/planner.h): per table its type, shards,
 * ranks, memory, compute and bytes a step (a hybrid table: also its hot
 * rows and their share of its lookups); per rank its totals; the
 * predicted step's stages and samples/s; with --explain, each choice's
 * reason. Also the one-line list of a plan's hot sets.
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/planner.h"

/* "0-3", "2", "0,2,5" (at most cap bytes). */
static void rank_list(char *buf, size_t cap, const struct sr_table_plan *tp)
{
    int contiguous = 1;
    for (int i = 1; i < tp->num_shards; i++)
        contiguous &= tp->shards[i].rank == tp->shards[i - 1].rank + 1;
    if (tp->num_shards == 1)
        snprintf(buf, cap, "%d", tp->shards[0].rank);
    else if (contiguous)
        snprintf(buf, cap, "%d-%d", tp->shards[0].rank, tp->shards[tp->num_shards - 1].rank);
    else {
        size_t at = 0;
        buf[0] = 0;
        for (int i = 0; i < tp->num_shards && at + 8 < cap; i++)
            at += (size_t)snprintf(buf + at, cap - at, i ? ",%d" : "%d", tp->shards[i].rank);
    }
}

static void print_tables(FILE *f, const struct sr_planner_report *r, const struct sr_plan *plan,
                         const struct sr_planner_model *m, int explain)
{
    char mem[24], comm[24], inter[24], ranks[64];
    fprintf(f, "%-16s %12s %5s %5s %6s %-12s %10s %11s %11s %11s\n", "table", "rows", "dim",
            "type", "shards", "ranks", "memory", "compute ms", "bytes/step", "across");
    for (int t = 0; t < plan->num_tables; t++) {
        const struct sr_table_plan *tp = &plan->tables[t];
        const struct sr_table_config *tc = &m->ebc->tables[t];
        const struct sr_planner_table_cost *c = &r->tables[t];
        rank_list(ranks, sizeof ranks, tp);
        fprintf(f, "%-16s %12lld %5d %5s %6d %-12s %10s %11.3f %11s %11s\n", tc->name,
                (long long)tc->num_embeddings, tc->embedding_dim, sr_sharding_type_name(tp->type),
                tp->num_shards, ranks, sr_format_bytes(mem, sizeof mem, c->memory_bytes),
                c->compute_s * 1e3, sr_format_bytes(comm, sizeof comm, c->comm_bytes),
                sr_format_bytes(inter, sizeof inter, c->inter_bytes));
        if (tp->type == SR_SHARDING_TYPE_HYBRID)
            fprintf(f, "    hot: %lld rows replicated on every rank, %.1f%% of its lookups\n",
                    (long long)tp->num_hot, 100 * c->hot_share);
        if (explain && r->why)
            fprintf(f, "    why: %s\n", r->why[t]);
    }
}

static void print_ranks(FILE *f, const struct sr_planner_report *r)
{
    char mem[24], in[24], out[24];
    fprintf(f, "\n%-6s %10s %10s %10s %12s %12s\n", "rank", "memory", "lookup ms", "update ms",
            "bytes node", "bytes across");
    for (int k = 0; k < r->world_size; k++) {
        const struct sr_planner_rank *rk = &r->ranks[k];
        fprintf(f, "%-6d %10s %10.3f %10.3f %12s %12s\n", k,
                sr_format_bytes(mem, sizeof mem, rk->memory_bytes), rk->lookup_s * 1e3,
                rk->update_s * 1e3, sr_format_bytes(in, sizeof in, rk->send_bytes[0]),
                sr_format_bytes(out, sizeof out, rk->send_bytes[1]));
    }
}

void sr_planner_report_print(FILE *f, const struct sr_planner_report *r, const struct sr_plan *plan,
                             const struct sr_planner_model *m, int explain)
{
    print_tables(f, r, plan, m, explain);
    print_ranks(f, r);
    fprintf(f, "\npredicted step (ms):");
    for (int s = 0; s < SR_PS_COUNT; s++)
        fprintf(f, " %s %.3f%s", sr_planner_stage_name((enum sr_planner_stage)s),
                r->stage_s[s] * 1e3, s + 1 < SR_PS_COUNT ? "," : "\n");
    fprintf(f, "predicted: %.0f samples/s (%.0f a rank), %d collectives a step\n", r->samples_s,
            r->samples_s / r->world_size, r->collectives);
}

void sr_planner_hot_sets_print(FILE *f, const struct sr_planner_report *r,
                               const struct sr_plan *plan)
{
    int n = 0;
    for (int t = 0; t < plan->num_tables; t++) {
        const struct sr_table_plan *tp = &plan->tables[t];
        if (tp->type != SR_SHARDING_TYPE_HYBRID)
            continue;
        fprintf(f, "%s %s %lld (%.1f%%)", n++ ? "," : "", tp->name, (long long)tp->num_hot,
                100 * r->tables[t].hot_share);
    }
    fprintf(f, "%s\n", n ? "" : " none");
}
