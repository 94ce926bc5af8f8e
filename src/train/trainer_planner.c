/*
 * The planner in a training run (trainer_planner.h; docs/planner.md).
 *
 * Topology: --topology NAME|FILE (repeatable, merged in order) over this
 * device's nominal one (what the files lack comes from it): the cpu-2core preset on the CPU (memory: the
 * machine's over the ranks of a node), the h200 preset on CUDA (memory: the
 * device's), the least over the ranks so that every rank plans alike. Either way the world size and ranks a node are the run's, and
 * a run across nodes with no inter-node link in the topology takes
 * --emulate-link's figures, else a 100 Gb/s NIC a node (nominal).
 *
 * The comparison in the summary (rank 0): predicted against measured per
 * step, with the measurement taken from the stage spans and the
 * communication counters:
 *
 *   lookup    the lookup stage
 *   update    embedding.backward less its gradient dist
 *   exposed   the time the compute thread waited on collectives
 *   step      the steady state's step (device events), else the run's mean
 *   dense     step - lookup - update - exposed (the rest of the step)
 *   memory    rank 0's estimate against its peak resident memory (CPU) or
 *             the device's peak allocation
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/planner.h"
#include "shardrec/table_stats.h"
#include "shardrec/trace.h"
#include "train/trainer_internal.h"

/* The least of v over the world's ranks (every rank plans alike, so the
 * plans match even where hosts' memories differ). Collective. */
static double least_over_ranks(const struct sr_trainer *t, double v)
{
    if (t->world_size < 2)
        return v;
    int64_t mine = (int64_t)v, *all = sr_calloc((size_t)t->world_size, sizeof *all);
    sr_comm_all_gather(t->world, &mine, all, 1, SR_DTYPE_I64, NULL, NULL);
    for (int r = 0; r < t->world_size; r++)
        mine = all[r] < mine ? all[r] : mine;
    sr_free(all);
    return (double)mine;
}

static int nominal_topology(const struct sr_trainer *t, struct sr_topology *topo)
{
    int cuda = t->dev->kind == SR_DEVICE_CUDA;
    int rc = sr_topology_preset(topo, cuda ? "h200" : "cpu-2core");
    if (rc)
        return rc;
    int L = sr_comm_local_size(t->sparse);
    snprintf(topo->name, sizeof topo->name, "%s (nominal)", cuda ? "h200" : "cpu");
    topo->memory_bytes = least_over_ranks(
        t, t->dev->memory_bytes ? (double)t->dev->memory_bytes
                                : (double)sr_machine_memory() / (L > 0 ? L : 1));
    return SR_OK;
}

/* "cpu-2core+device.json+link.json": what --topology gave, by name. */
static void name_of(const struct sr_train_config *cfg, struct sr_topology *out)
{
    size_t at = 0;
    out->name[0] = 0;
    for (int i = 0; i < cfg->n_topologies && at + 1 < sizeof out->name; i++) {
        const char *base = strrchr(cfg->topologies[i], '/');
        at += (size_t)snprintf(out->name + at, sizeof out->name - at, "%s%s", i ? "+" : "",
                               base ? base + 1 : cfg->topologies[i]);
    }
}

int sr_trainer_topology(const struct sr_trainer *t, struct sr_topology *out)
{
    const struct sr_train_config *cfg = t->cfg;
    int L = sr_comm_local_size(t->sparse);
    memset(out, 0, sizeof *out);
    /* the device's nominal figures first: a file replaces what it gives, a
     * preset everything */
    int rc = nominal_topology(t, out);
    for (int i = 0; i < cfg->n_topologies && !rc; i++)
        rc = sr_topology_load(out, cfg->topologies[i]);
    if (rc)
        return rc;
    if (cfg->n_topologies)
        name_of(cfg, out);
    out->world_size = t->world_size;
    out->ranks_per_node = L > 0 ? L : 1;
    sr_topology_split_host(out);
    if (out->world_size > out->ranks_per_node && !(out->inter.gb_s > 0)) {
        out->inter = cfg->link_gb_per_s > 0
                         ? (struct sr_topo_link){cfg->link_gb_per_s, cfg->link_latency_us}
                         : (struct sr_topo_link){12.5, 20};
        out->nic_ranks = cfg->link_gb_per_s > 0 ? 1 : out->ranks_per_node;
    }
    if (out->ranks_per_node > 1 && !(out->intra.gb_s > 0)) {
        struct sr_topology nominal;
        if (!sr_topology_preset(&nominal, t->dev->kind == SR_DEVICE_CUDA ? "h200" : "cpu-2core"))
            out->intra = nominal.intra;
    }
    return sr_topology_complete(out);
}

/* The message table_stats broadcasts: [status, samples], then per table
 * [ids a sample, hot share, sizes known, SR_PLANNER_HOT_SIZES sizes, as many
 * shares]. */
#define MSG_TABLE (3 + 2 * SR_PLANNER_HOT_SIZES)

static void stats_to_message(const struct sr_planner_table *st, double *msg)
{
    msg[0] = st->ids_per_sample;
    msg[1] = st->hot_share;
    msg[2] = st->num_sizes;
    for (int i = 0; i < st->num_sizes; i++) {
        msg[3 + i] = (double)st->hot_size[i];
        msg[3 + SR_PLANNER_HOT_SIZES + i] = st->hot_size_share[i];
    }
}

/* The statistics rank 0 sent (table_stats); the features from the config. */
static void stats_of_message(struct sr_trainer *t, const double *msg)
{
    struct sr_trainer_prediction *p = &t->predicted;
    int T = t->cfg->num_tables;
    p->stats_samples = (int64_t)msg[1];
    for (int k = 0; k < T; k++) {
        const double *m = msg + 2 + (size_t)k * MSG_TABLE;
        struct sr_planner_table *st = &p->stats[k];
        *st = (struct sr_planner_table){
            .ids_per_sample = m[0], .hot_share = m[1], .num_sizes = (int)m[2]};
        for (int i = 0; i < st->num_sizes; i++) {
            st->hot_size[i] = (int64_t)m[3 + i];
            st->hot_size_share[i] = m[3 + SR_PLANNER_HOT_SIZES + i];
        }
    }
    for (int f = 0; f < t->cfg->num_features; f++)
        p->stats[t->cfg->feature_table[f]].features++;
    sr_train_config_slot_stats(t->cfg, p->stats);
}

/* The tables' hot rows (the hybrid option's) as rank 0 found them: their
 * counts, then the rows, two broadcasts over t->world. */
static void hot_rows_of_rank0(struct sr_trainer *t)
{
    struct sr_planner_table *st = t->predicted.stats;
    const int T = t->cfg->num_tables;
    int64_t *n = sr_calloc((size_t)T + 1, sizeof *n), all = 0;
    for (int k = 0; t->rank == 0 && k < T; k++)
        n[k] = st[k].hot ? st[k].num_hot : -1;
    sr_comm_broadcast(t->world, n, n, (size_t)T, SR_DTYPE_I64, 0, NULL, NULL);
    for (int k = 0; k < T; k++)
        all += n[k] > 0 ? n[k] : 0;
    int64_t *rows = sr_calloc((size_t)all + 1, sizeof *rows), at = 0;
    for (int k = 0; t->rank == 0 && k < T; k++)
        for (int64_t i = 0; i < n[k]; i++)
            rows[at++] = st[k].hot[i];
    sr_comm_broadcast(t->world, rows, rows, (size_t)all, SR_DTYPE_I64, 0, NULL, NULL);
    at = 0;
    for (int k = 0; t->rank != 0 && k < T; k++) {
        if (n[k] < 0)
            continue;
        st[k].num_hot = n[k];
        st[k].hot = sr_malloc(sizeof *st[k].hot * (size_t)(n[k] + 1));
        memcpy(st[k].hot, rows + at, sizeof *rows * (size_t)n[k]);
        at += n[k];
    }
    sr_free(rows);
    sr_free(n);
}

/* The tables' statistics, made on the first call and kept for the
 * prediction: rank 0 makes them (sr_train_config_table_stats: with --data,
 * on its first --plan-sample samples) and broadcasts them, so every rank
 * plans on the same bits even where the ranks' --data files differ in
 * content (a bad line that only one rank's copy holds is found by
 * training, as without the planner). Collective over t->world: every rank
 * calls it, first thing, in plan_search and plan_predict. A failure on
 * rank 0 fails every rank. */
static int table_stats(struct sr_trainer *t)
{
    struct sr_trainer_prediction *p = &t->predicted;
    int T = t->cfg->num_tables, rc = SR_OK;
    if (p->stats)
        return SR_OK;
    const size_t n = 2 + (size_t)T * MSG_TABLE;
    double *msg = sr_calloc(n, sizeof *msg);
    p->stats = sr_calloc((size_t)T, sizeof *p->stats);
    if (t->rank == 0) {
        rc = sr_train_config_table_stats(t->cfg, p->stats, &p->stats_samples);
        msg[0] = rc;
        msg[1] = (double)p->stats_samples;
        for (int k = 0; k < T && !rc; k++)
            stats_to_message(&p->stats[k], msg + 2 + (size_t)k * MSG_TABLE);
    }
    sr_comm_broadcast(t->world, msg, msg, n, SR_DTYPE_F64, 0, NULL, NULL);
    rc = (int)msg[0];
    if (!rc && t->rank != 0)
        stats_of_message(t, msg);
    if (!rc)
        hot_rows_of_rank0(t);
    if (rc && t->rank != 0)
        sr_error_set(rc, "--data: rank 0 could not measure the tables' statistics on it (its "
                         "message says why)");
    sr_free(msg);
    if (rc) {
        sr_planner_stats_release(p->stats, T);
        sr_free(p->stats);
        p->stats = NULL;
    }
    return rc;
}

/* With --data, the measured statistics the planner's plan rests on (rank 0). */
static void print_table_stats(const struct sr_trainer *t)
{
    struct sr_ebc_config ec;
    if (!t->log || !t->predicted.stats_samples)
        return;
    sr_train_config_ebc(t->cfg, &ec);
    fprintf(t->log, "plan: table statistics measured on %lld samples of --data:\n",
            (long long)t->predicted.stats_samples);
    sr_table_stats_print(t->log, &ec, t->predicted.stats);
}

/* The model as the planner sees it, on the statistics table_stats made. */
static void model_of(struct sr_trainer *t, struct sr_ebc_config *ec, struct sr_planner_model *m)
{
    sr_train_config_planner(t->cfg, t->world_size, t->predicted.topo.ranks_per_node, ec,
                            t->predicted.stats, m);
}

/* The batch and evaluation buffers of the plan in use (the search costs
 * every candidate with a table-wise plan's: the same for all of them). */
static void buffers_of_plan(const struct sr_trainer *t, struct sr_planner_model *m)
{
    struct sr_memory_estimate est = {0};
    sr_train_config_memory(t->cfg, t->world_size > 1 ? t->plan : NULL, 0, t->world_size, &est);
    m->buffer_bytes = (double)(est.batch - est.batch_slots + est.eval); /* shards: per rank */
}

/* What a plan is made on: the statistics (collective: first, whatever
 * fails after) and the run's topology, kept for the prediction. */
static int plan_inputs(struct sr_trainer *t)
{
    int rc = table_stats(t);
    if (!rc)
        rc = sr_trainer_topology(t, &t->predicted.topo);
    t->predicted.nominal = !t->cfg->n_topologies;
    return rc;
}

int sr_trainer_plan_search(struct sr_trainer *t)
{
    struct sr_ebc_config ec;
    struct sr_planner_model m;
    struct sr_planner_report *r = NULL;
    int rc = plan_inputs(t);
    if (rc)
        return rc;
    model_of(t, &ec, &m);
    rc = sr_planner_search(&m, &t->predicted.topo, &t->plan, &r);
    if (!rc) { /* the chosen plan, predicted with its own buffers */
        buffers_of_plan(t, &m);
        sr_planner_report_free(r);
        r = NULL;
        rc = sr_planner_predict(&m, &t->predicted.topo, t->plan, &r);
    }
    if (!rc)
        print_table_stats(t);
    if (!rc && t->log) {
        fprintf(t->log, "plan: the planner's, on topology %s (docs/planner.md):\n",
                t->predicted.topo.name);
        sr_planner_report_print(t->log, r, t->plan, &m, 0);
    }
    t->predicted.report = r; /* the plan in use, predicted: sr_trainer_plan_predict keeps it */
    return rc;
}

int sr_trainer_plan_hybrid(struct sr_trainer *t)
{
    struct sr_ebc_config ec;
    struct sr_planner_model m;
    int rc = plan_inputs(t); /* the hot sets are sized by their cost on the topology */
    if (rc)
        return rc;
    model_of(t, &ec, &m);
    return sr_planner_whole_plan(3, &m, &t->predicted.topo, &t->plan);
}

static void predict(struct sr_trainer *t)
{
    struct sr_ebc_config ec;
    struct sr_planner_model m;
    if (t->predicted.report) /* the planner's own plan, predicted by its search */
        return;
    if (table_stats(t)) /* collective: first; a bad --data: its reader says so */
        return;         /* when the data opens, and stops the run */
    const int have_topology = t->predicted.topo.world_size > 0; /* a plan was made on it */
    if (!have_topology && sr_trainer_topology(t, &t->predicted.topo)) {
        if (t->log)
            fprintf(t->log, "warning: no prediction of the step: %s\n", sr_error_message());
        return;
    }
    t->predicted.nominal = !t->cfg->n_topologies;
    model_of(t, &ec, &m);
    buffers_of_plan(t, &m);
    /* one rank runs every table whole: a tw plan of world size 1 */
    if (sr_planner_predict(&m, &t->predicted.topo, t->plan, &t->predicted.report) && t->log)
        fprintf(t->log, "warning: no prediction of the step: %s\n", sr_error_message());
}

/* --sharding hybrid: the hot sets the cost model sized, and what it sized
 * them on (another topology, pipeline or wire dtype may size them
 * otherwise; a plan file pins them). */
static void print_hot_sets(const struct sr_trainer *t)
{
    if (!t->log || !t->predicted.report || t->cfg->sharding != SR_SHARDING_TYPE_HYBRID)
        return;
    fprintf(t->log,
            "plan: all hybrid, hot sets sized by cost on topology %s, --pipeline %s "
            "(rows, their share of the table's lookups):",
            t->predicted.topo.name, t->cfg->pipeline == SR_PIPELINE_NONE ? "none" : "sparse-dist");
    sr_planner_hot_sets_print(t->log, t->predicted.report, t->plan);
}

void sr_trainer_plan_predict(struct sr_trainer *t)
{
    predict(t);
    print_hot_sets(t);
    /* the hot lists (up to SR_PLANNER_HOT_ROWS_MAX rows a table, on every
     * rank) served the search; what is left to predict needs only the
     * hot-set sizes and shares */
    sr_planner_stats_release(t->predicted.stats, t->cfg->num_tables);
}

void sr_trainer_prediction_free(struct sr_trainer *t)
{
    sr_planner_report_free(t->predicted.report);
    sr_planner_stats_release(t->predicted.stats, t->cfg->num_tables);
    sr_free(t->predicted.stats);
    t->predicted.report = NULL;
    t->predicted.stats = NULL;
}

static void row(FILE *f, const char *what, double predicted, double measured)
{
    double err = measured > 0 ? 100 * (predicted / measured - 1) : 0;
    fprintf(f, "  %-10s %11.3f %11.3f %+8.1f%%\n", what, predicted, measured, err);
}

static double exposed_ms(const struct sr_trainer *t, int64_t steps)
{
    double s = 0;
    for (int k = 0; k < SR_COLL_COUNT; k++)
        s += t->acct.comm.seconds[k];
    return steps > 0 ? 1e3 * s / (double)steps : 0;
}

static double peak_memory(const struct sr_trainer *t)
{
    uint64_t dev = sr_dev_peak_bytes(t->dev);
    struct rusage ru;
    if (dev)
        return (double)dev;
    getrusage(RUSAGE_SELF, &ru);
    return 1024.0 * (double)ru.ru_maxrss;
}

void sr_trainer_print_prediction(const struct sr_trainer *t, const struct sr_trainer_result *res,
                                 FILE *f)
{
    const struct sr_planner_report *r = t->predicted.report;
    if (!r || res->steps == 0)
        return;
    double step = res->steady_steps > 0 ? 1e3 * res->steady_seconds / (double)res->steady_steps
                                        : 1e3 * res->train_seconds / (double)res->steps;
    double lookup = sr_trainer_stage_mean_ms(t, SR_SPAN_LOOKUP);
    double update = sr_trainer_stage_mean_ms(t, SR_SPAN_EMB_BACKWARD) -
                    sr_trainer_stage_mean_ms(t, SR_SPAN_EMB_GRAD_DIST);
    double exposed = exposed_ms(t, res->steps);
    const double *p = r->stage_s;
    fprintf(f, "planner: predicted (topology %s%s) beside measured, ms per step on rank 0 (the "
               "step: the slowest rank's):\n",
            t->predicted.topo.name, t->predicted.nominal ? "; give --topology for measured rates" : "");
    if (t->predicted.stats_samples)
        fprintf(f, "  (table statistics: measured on %lld samples of --data)\n",
                (long long)t->predicted.stats_samples);
    fprintf(f, "  %-10s %11s %11s %9s\n", "", "predicted", "measured", "error");
    row(f, "lookup", 1e3 * p[SR_PS_LOOKUP], lookup);
    row(f, "update", 1e3 * p[SR_PS_UPDATE], update);
    row(f, "dense", 1e3 * p[SR_PS_DENSE], fmax(0, step - lookup - update - exposed));
    row(f, "exposed", 1e3 * p[SR_PS_EXPOSED], exposed);
    row(f, "step", 1e3 * p[SR_PS_STEP], step);
    double mem = peak_memory(t);
    fprintf(f, "  %-10s %10.1fM %10.1fM %+8.1f%%  (rank 0; measured: %s)\n", "memory",
            r->ranks[0].memory_bytes / 1048576, mem / 1048576,
            mem > 0 ? 100 * (r->ranks[0].memory_bytes / mem - 1) : 0,
            sr_dev_peak_bytes(t->dev) ? "the device's peak allocation" : "peak resident memory");
}
