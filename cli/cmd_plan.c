/* `shardrec plan`: choose a sharding plan for a job on a topology, print the
 * predicted costs, write the plan that `train --plan` reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/plan.h"
#include "shardrec/planner.h"
#include "shardrec/table_stats.h"
#include "shardrec/train_config.h"
#include "shardrec/topology.h"
#include "cli.h"

#define MAX_TOPOLOGIES 8

static void plan_help(void)
{
    printf("usage: shardrec plan --topology NAME|FILE [...] [model flags as train takes them]\n"
           "                     [--world-size W] [--nodes N] [--ranks-per-node L]\n"
           "                     [--out plan.json] [--explain] [--compare]\n"
           "\n"
           "Chooses each table's sharding (dp, tw, rw, cw, twrw, or hybrid where ids are\n"
           "skewed, with as many hot rows as predict the shortest step) to make the\n"
           "slowest rank's predicted step shortest within memory, and prints per table\n"
           "its type, shards, ranks, memory, compute and bytes a step (hybrid: its hot\n"
           "rows and their share of its lookups); per rank its totals; the predicted step\n"
           "by stage and samples/s. The cost model is docs/planner.md.\n"
           "\n"
           "  --topology NAME|FILE   a preset, or a JSON file (`shardrec bench comm --out`,\n"
           "                         `shardrec bench device --out`, or by hand); repeat to\n"
           "                         merge, later ones override; what they lack of the\n"
           "                         device's figures is measured here (bench device\n"
           "                         --quick). Presets:\n"
           "%s"
           "  --world-size W         ranks (default: the topology's)\n"
           "  --nodes N              nodes of --ranks-per-node ranks (W = N x L)\n"
           "  --ranks-per-node L     ranks a node (default: the topology's)\n"
           "  --out FILE             write the plan as JSON (train --plan FILE)\n"
           "  --pipeline MODE        the pipeline predicted: sparse-dist (batch i+1's input\n"
           "                         dist behind step i), none, or auto (the default;\n"
           "                         predicted as sparse-dist: train takes none only where\n"
           "                         NCCL ranks share a GPU, which plan cannot see)\n"
           "  --explain              per table, why its option beat the runner-up\n"
           "  --compare              also predict all-tw, all-rw, the default plan and\n"
           "                         all-hybrid (whether it beat both all-tw and all-rw;\n"
           "                         its hot sets, sized by cost, listed), and the\n"
           "                         planner's plan on one node of L ranks: each one's\n"
           "                         samples/s a rank as a fraction of one node's\n"
           "  --print-topology       print the merged topology as JSON\n"
           "  --data FILE...         measure each table's statistics (mean ids a sample, hot\n"
           "                         share) on the first --plan-sample samples of these\n"
           "                         files (Criteo TSV or binary, as train reads them)\n"
           "                         instead of taking them from --ids-per-feature and\n"
           "                         --id-dist\n"
           "  --plan-sample N        samples of --data measured (default %d)\n"
           "\n"
           "The batch is --batch-size per rank (or --global-batch-size). Exit status: 0 done;\n"
           "1 --out could not be written (a full disk); 2 bad flags or topology, or a job no\n"
           "plan fits.\n",
           sr_topology_preset_help(), SR_PLAN_SAMPLE_DEFAULT);
}

struct plan_args {
    const char *topologies[MAX_TOPOLOGIES];
    int n_topologies;
    int world_size, nodes;
    char out[SR_PATH_MAX];
    int explain, compare, print_topology;
    struct sr_train_config *cfg;
};

static int parse_count(const char *flag, const char *v, int *out)
{
    int64_t x;
    int rc = sr_parse_i64(flag, v, 1, 1 << 20, &x);
    *out = (int)x;
    return rc;
}

static int other_flag(void *ctx, const char *name, const char *value)
{
    struct plan_args *a = ctx;
    if (!strcmp(name, "topology") && value) {
        if (a->n_topologies == MAX_TOPOLOGIES)
            return sr_error_set(SR_ERR_INVALID_ARG, "--topology: at most %d", MAX_TOPOLOGIES);
        if (!*value)
            return cli_empty_path(name);
        a->topologies[a->n_topologies++] = value;
    } else if (!strcmp(name, "world-size") && value) {
        return parse_count("--world-size", value, &a->world_size);
    } else if (!strcmp(name, "nodes") && value) {
        return parse_count("--nodes", value, &a->nodes);
    } else if (!strcmp(name, "out") && value) {
        if (!*value)
            return cli_empty_path(name);
        if (strlen(value) >= sizeof a->out)
            return sr_error_set(SR_ERR_INVALID_ARG, "--out: path too long");
        snprintf(a->out, sizeof a->out, "%s", value);
    } else if (!strcmp(name, "pipeline") && value) {
        return cli_parse_pipeline(a->cfg, value);
    } else if (!strcmp(name, "explain") && !value) {
        a->explain = 1;
    } else if (!strcmp(name, "compare") && !value) {
        a->compare = 1;
    } else if (!strcmp(name, "print-topology") && !value) {
        a->print_topology = 1;
    } else {
        return 1;
    }
    return SR_OK;
}

/* What the files lack of the device's figures (memory, bandwidth, rates,
 * GEMM) from a quick measurement of this machine, said on stderr. */
static int fill_from_this_machine(struct sr_topology *t)
{
    struct sr_topology here;
    int rows_missing = !(t->gather_rows_s[0][0] > 0);
    if (t->memory_bytes > 0 && t->memory_gb_s > 0 && t->gemm_flop_s[0] > 0)
        return SR_OK;
    fprintf(stderr, "shardrec plan: the topology lacks the device's figures; measuring this "
                    "machine (bench device --quick, a few seconds)\n");
    int rc = cli_bench_device_quick(&here);
    if (rc)
        return rc;
    if (!(t->memory_bytes > 0) || !(t->memory_gb_s > 0)) {
        t->memory_bytes = here.memory_bytes;
        t->memory_base_bytes = here.memory_base_bytes;
        t->memory_gb_s = here.memory_gb_s;
        t->host_wide = here.host_wide;
    }
    if (rows_missing) {
        memcpy(t->gather_rows_s, here.gather_rows_s, sizeof t->gather_rows_s);
        memcpy(t->update_rows_s, here.update_rows_s, sizeof t->update_rows_s);
        t->zipf_hot_share = here.zipf_hot_share;
    }
    for (int m = 0; m < SR_TOPO_MATHS; m++)
        if (!(t->gemm_flop_s[m] > 0))
            t->gemm_flop_s[m] = here.gemm_flop_s[m];
    return SR_OK;
}

static int load_topology(const struct plan_args *a, const struct sr_train_config *cfg,
                         struct sr_topology *t)
{
    memset(t, 0, sizeof *t);
    if (!a->n_topologies)
        return sr_error_set(SR_ERR_INVALID_ARG, "--topology is required; HINT: a preset:\n%s",
                            sr_topology_preset_help());
    for (int i = 0; i < a->n_topologies; i++) { /* a preset or file, then files merged */
        int rc = i == 0 ? sr_topology_load(t, a->topologies[i])
                        : sr_topology_merge_file(t, a->topologies[i]);
        if (rc)
            return rc;
    }
    if (cfg->ranks_per_node > 0)
        t->ranks_per_node = cfg->ranks_per_node;
    if (a->nodes)
        t->world_size = a->nodes * t->ranks_per_node;
    if (a->world_size)
        t->world_size = a->world_size;
    if (t->world_size && t->ranks_per_node > t->world_size)
        t->ranks_per_node = t->world_size;
    int rc = fill_from_this_machine(t);
    if (rc)
        return rc;
    sr_topology_split_host(t);
    return sr_topology_complete(t);
}

static int write_plan(const struct sr_plan *plan, const char *path)
{
    return sr_plan_write(plan, path);
}

/* --out is never an input (a topology file, a config) and can be written:
 * checked before any work. */
static int check_out(int argc, char **argv, const struct sr_train_config *cfg,
                     const struct plan_args *a)
{
    struct sr_named_file f[MAX_TOPOLOGIES + 9 + SR_MAX_DATA_FILES];
    const char *configs[8];
    int n = 0, n_config = cli_config_paths(argc, argv, configs, 8);
    if (!a->out[0])
        return SR_OK;
    for (int i = 0; i < a->n_topologies; i++)
        f[n++] = (struct sr_named_file){"--topology", a->topologies[i], 0};
    for (int i = 0; i < n_config; i++)
        f[n++] = (struct sr_named_file){"--config", configs[i], 0};
    for (int i = 0; i < cfg->n_data; i++)
        f[n++] = (struct sr_named_file){"--data", cfg->data_paths[i], 0};
    f[n++] = (struct sr_named_file){"--out", a->out, 1};
    int rc = sr_files_check_distinct(f, n);
    return rc ? rc : sr_output_path_check(a->out, "--out", SR_OUTPUT_ATOMIC);
}

/* One line of --compare: a plan's prediction, its samples/s a rank against
 * one node's. */
static void compare_line(const char *what, const struct sr_planner_report *r, double one_node)
{
    printf("  %-22s step %9.3f ms  exposed %8.3f ms  %12.0f samples/s  %10.0f a rank  %5.1f%% of "
           "one node's\n",
           what, r->stage_s[SR_PS_STEP] * 1e3, r->stage_s[SR_PS_EXPOSED] * 1e3, r->samples_s,
           r->samples_s / r->world_size, 100 * (r->samples_s / r->world_size) / one_node);
}

static int predict_whole(const struct sr_planner_model *m, const struct sr_topology *t, int i,
                         struct sr_plan **plan, struct sr_planner_report **r)
{
    int rc = sr_planner_whole_plan(i, m, t, plan);
    if (!rc)
        rc = sr_planner_predict(m, t, *plan, r);
    return rc;
}

/* All hybrid's hot sets, sized by cost: "t2 100 (68.8%), ..." */
static void hot_sets(const struct sr_plan *plan, const struct sr_planner_report *r)
{
    printf("  all hybrid's hot sets (rows, their share of the table's lookups):");
    sr_planner_hot_sets_print(stdout, r, plan);
}

/* The planner's plan for the same job on one node of L ranks. */
static double one_node_rate(struct sr_train_config *cfg, const struct sr_topology *t,
                            const struct sr_planner_table *stats)
{
    struct sr_topology one = *t;
    one.world_size = t->ranks_per_node;
    struct sr_ebc_config ec;
    struct sr_planner_model m;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    double rate = 0;
    sr_train_config_planner(cfg, one.world_size, one.ranks_per_node, &ec, stats, &m);
    if (!sr_planner_search(&m, &one, &plan, &r))
        rate = r->samples_s / r->world_size;
    sr_plan_free(plan);
    sr_planner_report_free(r);
    return rate;
}

/* Issue 20's question: did replicating hot rows (all hybrid, whole plan 3)
 * beat both all tw (0) and all rw (1), and by how much; and the hybrid
 * tables the planner's own plan took. */
static void versus(const char *name, double hybrid, double other)
{
    printf("against %s its step is %.1f%% %s", name, 100 * fabs(other - hybrid) / other,
           hybrid < other ? "shorter" : "longer");
}

static void hybrid_verdict(const double *step, const struct sr_plan *planned)
{
    if (!(step[3] > 0) || !(step[0] > 0) || !(step[1] > 0))
        return;
    int n = 0;
    for (int t = 0; planned && t < planned->num_tables; t++)
        n += planned->tables[t].type == SR_SHARDING_TYPE_HYBRID;
    printf("  hot-row replication: all hybrid (%.3f ms) %s both all tw and all rw: ", step[3] * 1e3,
           step[3] < step[0] && step[3] < step[1] ? "beats" : "does not beat");
    versus("all tw", step[3], step[0]);
    printf(", ");
    versus("all rw", step[3], step[1]);
    printf("; the planner's plan has %d hybrid table%s\n", n, n == 1 ? "" : "s");
}

static int compare(struct sr_train_config *cfg, const struct sr_planner_model *m,
                   const struct sr_topology *t, const struct sr_planner_report *planned,
                   const struct sr_plan *planned_plan)
{
    double one = one_node_rate(cfg, t, m->stats);
    if (one <= 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "--compare: no plan fits one node of %d ranks",
                            t->ranks_per_node);
    printf("\ncompared (one node of %d ranks: %.0f samples/s a rank, the planner's plan):\n",
           t->ranks_per_node, one);
    compare_line("planner", planned, one);
    double step[SR_PLANNER_WHOLE_PLANS] = {0};
    struct sr_plan *hybrid = NULL;
    struct sr_planner_report *hybrid_r = NULL;
    for (int i = 0; i < SR_PLANNER_WHOLE_PLANS; i++) {
        struct sr_plan *plan = NULL;
        struct sr_planner_report *r = NULL;
        if (predict_whole(m, t, i, &plan, &r)) {
            printf("  %-22s does not apply here: %s\n", sr_planner_whole_plan_name(i),
                   sr_error_message());
            sr_plan_free(plan);
            continue;
        }
        compare_line(sr_planner_whole_plan_name(i), r, one);
        step[i] = r->stage_s[SR_PS_STEP];
        if (i == 3) { /* all hybrid: its hot sets are printed below */
            hybrid = plan, hybrid_r = r;
            continue;
        }
        sr_plan_free(plan);
        sr_planner_report_free(r);
    }
    hybrid_verdict(step, planned_plan);
    if (hybrid)
        hot_sets(hybrid, hybrid_r);
    sr_plan_free(hybrid);
    sr_planner_report_free(hybrid_r);
    return SR_OK;
}

static void print_header(const struct sr_train_config *cfg, const struct sr_topology *t,
                         const struct sr_planner_model *m)
{
    printf("plan: %d tables on %d ranks (%d nodes of %d), topology %s, global batch %lld "
           "(%lld a rank)\n\n",
           cfg->num_tables, t->world_size, t->world_size / t->ranks_per_node, t->ranks_per_node,
           t->name[0] ? t->name : "(file)", (long long)m->global_batch,
           (long long)(m->global_batch / t->world_size));
}

/* The tables' statistics the plan rests on, and where they come from. */
static void print_stats(const struct sr_train_config *cfg, const struct sr_ebc_config *ec,
                        const struct sr_planner_table *stats, int64_t measured)
{
    if (measured)
        printf("statistics: measured on %lld samples of --data\n", (long long)measured);
    else if (cfg->id_dist == SR_ID_DIST_ZIPF)
        printf("statistics: from --ids-per-feature and --id-dist zipf:%g\n", cfg->zipf_s);
    else
        printf("statistics: from --ids-per-feature and --id-dist uniform\n");
    sr_table_stats_print(stdout, ec, stats);
    printf("\n");
}

static int run(struct sr_train_config *cfg, const struct plan_args *a)
{
    struct sr_topology t;
    struct sr_ebc_config ec;
    struct sr_planner_model m;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    int rc = load_topology(a, cfg, &t);
    if (rc)
        return rc;
    if (a->print_topology) {
        char *json = sr_topology_to_json(&t);
        printf("%s\n", json);
        sr_free(json);
    }
    struct sr_planner_table *stats = sr_calloc((size_t)cfg->num_tables, sizeof *stats);
    int64_t measured = 0;
    rc = sr_train_config_table_stats(cfg, stats, &measured);
    if (!rc) {
        sr_train_config_planner(cfg, t.world_size, t.ranks_per_node, &ec, stats, &m);
        rc = sr_planner_search(&m, &t, &plan, &r);
    }
    if (!rc) {
        print_header(cfg, &t, &m);
        print_stats(cfg, &ec, stats, measured);
        sr_planner_report_print(stdout, r, plan, &m, a->explain);
        if (a->compare)
            rc = compare(cfg, &m, &t, r, plan);
    }
    if (!rc && a->out[0])
        rc = write_plan(plan, a->out);
    if (!rc && a->out[0])
        printf("\nplan written to %s (train --plan %s)\n", a->out, a->out);
    sr_plan_free(plan);
    sr_planner_report_free(r);
    sr_planner_stats_release(stats, cfg->num_tables);
    sr_free(stats);
    return rc;
}

int cli_plan(int argc, char **argv)
{
    static const char *const value_flags[] = {"topology", "world-size", "nodes",
                                              "out",      "pipeline",   NULL};
    static struct sr_train_config cfg;
    struct plan_args args = {.cfg = &cfg};
    int rc = cli_parse_job(argc, argv, &cfg, other_flag, &args, value_flags);
    if (rc < 0) {
        plan_help();
        return 0;
    }
    if (rc)
        return rc;
    if (sr_train_config_check(&cfg) || check_out(argc, argv, &cfg, &args) ||
        (rc = run(&cfg, &args))) {
        cli_error("plan", "%s", sr_error_message());
        return rc == SR_ERR_WRITE ? CLI_EXIT_FAIL : CLI_EXIT_USAGE; /* --out on a full disk: 1 */
    }
    return 0;
}
