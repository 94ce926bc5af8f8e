/*
 * libFuzzer target for the --config JSON reader (sr_train_config_from_json in
 * src/train/train_config.c): the input is a whole config file. Checked: no
 * read outside the text, no leak, no undefined behaviour (UBSan: casts of
 * huge numbers, overflowing sizes); a rejected file leaves a message; an
 * accepted one gives a config whose counts, names and indices are in range,
 * and the config check and the memory estimate (overflow-checked) run on it
 * without fault. Build and run with tools/fuzz.sh; seeds in
 * tests/fuzz/seeds_fuzz_config.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/train_config.h"

static struct sr_train_config cfg;

static void check_accepted(const struct sr_train_config *c)
{
    if (c->num_tables < 1 || c->num_tables > SR_MAX_TABLES || c->num_features < 1 ||
        c->num_features > SR_MAX_FEATURES || c->n_bot < 1 || c->n_bot > SR_MLP_MAX ||
        c->n_top < 1 || c->n_top > SR_MLP_MAX || c->batch_size < 1 || c->steps < 1 ||
        c->n_feature_ids < 0 || c->n_feature_ids > SR_MAX_FEATURES || c->ids_min < 0 ||
        c->ids_max < c->ids_min || memchr(c->workload, '\0', sizeof c->workload) == NULL)
        abort();
    for (int f = 0; f < c->n_feature_ids; f++)
        if (c->feature_ids_min[f] < 0 || c->feature_ids_max[f] < c->feature_ids_min[f] ||
            c->feature_ids_max[f] < 1)
            abort();
    for (int t = 0; t < c->num_tables; t++)
        if (c->tables[t].num_embeddings < 1 || c->tables[t].num_embeddings > (int64_t)1 << 40 ||
            memchr(c->tables[t].name, '\0', SR_NAME_MAX) == NULL ||
            c->tables[t].embedding_dim != c->embedding_dim)
            abort();
    for (int f = 0; f < c->num_features; f++)
        if (c->feature_table[f] < 0 || c->feature_table[f] >= c->num_tables ||
            memchr(c->feature_names[f], '\0', SR_NAME_MAX) == NULL)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, buf, size);
    text[size] = '\0';
    sr_error_clear();
    sr_train_config_default(&cfg);
    int rc = sr_train_config_from_json(&cfg, text, size, "fuzz.json");
    if (rc != SR_OK && !sr_error_message()[0])
        abort(); /* an error always says what */
    if (rc == SR_OK) {
        check_accepted(&cfg);
        if (sr_train_config_check(&cfg) == SR_OK)
            sr_train_config_check_memory(&cfg, NULL, 0, 1 + (int)(size % 8), (uint64_t)1 << 40);
    }
    free(text);
    return 0;
}
