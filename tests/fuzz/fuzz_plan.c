/*
 * libFuzzer target for the plan file reader (sr_plan_from_json in
 * src/plan/plan_io.c): the first byte picks the world (W ranks, L per node),
 * the rest is the plan file, read against a fixed model of four tables
 * (10 x 4, 1 x 8, 5000 x 6, 70000 x 16). Checked: no read outside the text,
 * no leak, no undefined behaviour (UBSan: casts of huge numbers); a rejected
 * plan leaves a message and no plan; an accepted one has every shard on a
 * rank in [0, W) inside its table, and writing it out and reading it back
 * gives the same plan (hash). Build and run with tools/fuzz.sh; seeds in
 * tests/fuzz/seeds_fuzz_plan.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/plan.h"

static struct sr_table_config tables[4];
static char feature_names[4][SR_NAME_MAX];
static int feature_table[4];
static struct sr_ebc_config ec;

static void model(void)
{
    static const int64_t rows[4] = {10, 1, 5000, 70000};
    static const int dims[4] = {4, 8, 6, 16};
    for (int t = 0; t < 4; t++) {
        snprintf(tables[t].name, SR_NAME_MAX, "t%d", t);
        tables[t].num_embeddings = rows[t];
        tables[t].embedding_dim = dims[t];
        snprintf(feature_names[t], SR_NAME_MAX, "f%d", t);
        feature_table[t] = t;
    }
    ec = (struct sr_ebc_config){.num_tables = 4,
                                .tables = tables,
                                .num_features = 4,
                                .feature_names = feature_names,
                                .feature_table = feature_table};
}

static void check_accepted(const struct sr_plan *p, int W)
{
    for (int t = 0; t < p->num_tables; t++)
        for (int i = 0; i < p->tables[t].num_shards; i++) {
            const struct sr_shard *s = &p->tables[t].shards[i];
            if (s->rank < 0 || s->rank >= W || s->row_offset < 0 || s->rows < 0 ||
                s->row_offset + s->rows > tables[t].num_embeddings || s->col_offset < 0 ||
                s->cols < 0 || s->col_offset + s->cols > tables[t].embedding_dim)
                abort();
        }
    char *text = sr_plan_to_json(p);
    struct sr_plan *q = NULL;
    if (sr_plan_from_json(&q, text, "round trip", &ec, p->world_size, p->local_size) != SR_OK ||
        sr_plan_hash(q) != sr_plan_hash(p))
        abort();
    sr_plan_free(q);
    sr_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
    static const int worlds[8][2] = {{1, 1}, {2, 1}, {2, 2}, {3, 1},
                                     {4, 2}, {4, 4}, {6, 3}, {8, 2}};
    if (size < 1)
        return 0;
    if (!ec.num_tables)
        model();
    int W = worlds[buf[0] % 8][0], L = worlds[buf[0] % 8][1];
    char *text = malloc(size);
    memcpy(text, buf + 1, size - 1);
    text[size - 1] = '\0';
    sr_error_clear();
    struct sr_plan *p = (struct sr_plan *)1;
    int rc = sr_plan_from_json(&p, text, "fuzz.json", &ec, W, L);
    if (rc != SR_OK && (p != NULL || !sr_error_message()[0]))
        abort();
    if (rc == SR_OK)
        check_accepted(p, W);
    sr_plan_free(p == (struct sr_plan *)1 ? NULL : p);
    free(text);
    return 0;
}
