/*
 * libFuzzer target for the topology reader (sr_topology_merge_json in
 * src/plan/topology.c) and the planner behind it: the input is a topology
 * file merged over nothing. Checked: no read outside the text, no leak, no
 * undefined behaviour; a rejected file leaves a message; an accepted one
 * that completes (sr_topology_complete) round-trips through its JSON, and
 * for worlds up to 64 ranks the planner searches a fixed model of three
 * tables on it, and its plan and prediction are finite and fit. Build and
 * run with tools/fuzz.sh; seeds in tests/fuzz/seeds_fuzz_topology.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/planner.h"
#include "shardrec/topology.h"

static struct sr_table_config tables[3];
static char feature_names[3][SR_NAME_MAX];
static int feature_table[3];
static struct sr_ebc_config ec;
static struct sr_planner_table stats[3];

static void model(struct sr_planner_model *m, int W)
{
    static const int64_t rows[3] = {10, 5000, 70000};
    for (int t = 0; t < 3; t++) {
        snprintf(tables[t].name, SR_NAME_MAX, "t%d", t);
        tables[t].num_embeddings = rows[t];
        tables[t].embedding_dim = 16;
        snprintf(feature_names[t], SR_NAME_MAX, "f%d", t);
        feature_table[t] = t;
        stats[t] = (struct sr_planner_table){.ids_per_sample = 1 + t, .features = 1,
                                             .hot_share = 0.01 + 0.3 * t};
    }
    ec = (struct sr_ebc_config){.num_tables = 3, .tables = tables, .num_features = 3,
                                .feature_names = feature_names, .feature_table = feature_table};
    *m = (struct sr_planner_model){.ebc = &ec, .stats = stats, .global_batch = 64 * W,
                                   .num_dense = 13, .n_bot = 2, .n_top = 2, .wire_bytes = 4,
                                   .dense_wire_bytes = 4, .pipeline = 1, .bucket_bytes = 1 << 20};
    m->bot[0] = 13, m->bot[1] = 16, m->top[0] = 8, m->top[1] = 1;
}

static void search(const struct sr_topology *t)
{
    struct sr_planner_model m;
    struct sr_plan *plan = NULL;
    struct sr_planner_report *r = NULL;
    model(&m, t->world_size);
    if (sr_planner_search(&m, t, &plan, &r) == SR_OK) {
        if (!isfinite(r->stage_s[SR_PS_STEP]) || r->stage_s[SR_PS_STEP] < 0)
            abort();
        for (int k = 0; k < r->world_size; k++)
            if (!(r->ranks[k].memory_bytes <= t->memory_bytes * (1 + 1e-9)))
                abort(); /* the search keeps every rank within memory */
    } else if (plan || r || !sr_error_message()[0]) {
        abort();
    }
    sr_plan_free(plan);
    sr_planner_report_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    struct sr_topology t, back;
    memset(&t, 0, sizeof t);
    if (sr_topology_merge_json(&t, text, "fuzz") != SR_OK) {
        if (!sr_error_message()[0])
            abort();
        free(text);
        return 0;
    }
    free(text);
    if (sr_topology_complete(&t) != SR_OK)
        return 0;
    char *json = sr_topology_to_json(&t);
    memset(&back, 0, sizeof back);
    if (sr_topology_merge_json(&back, json, "round trip") != SR_OK || back.world_size != t.world_size ||
        back.ranks_per_node != t.ranks_per_node)
        abort();
    sr_free(json);
    if (t.world_size <= 64)
        search(&t);
    return 0;
}
