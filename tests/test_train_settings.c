/*
 * Settings by name (src/train/train_settings.c): the per-feature form of
 * --ids-per-feature (flag and JSON array; exactly F entries, checked once the
 * features are known; the single form clears it), and the workload presets K,
 * M and D (their values, that they pass the config check, that whatever comes
 * after them wins, the JSON "workload" key and unknown names).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/error.h"
#include "shardrec/train_config.h"

static struct sr_train_config cfg;

static const int d_ids[26] = {3, 2, 1, 2, 6, 1, 1,  1,   1,  7,  3, 8, 1,
                              6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};

static void expect_error(int rc, const char *a, const char *b)
{
    const char *m = sr_error_message();
    if (rc != SR_ERR_INVALID_ARG)
        fail_msg("status %d, expected an error (%s)", rc, m);
    if ((a && !strstr(m, a)) || (b && !strstr(m, b)))
        fail_msg("message '%s' lacks '%s' or '%s'", m, a, b ? b : "");
}

static int from_json(const char *text)
{
    return sr_train_config_from_json(&cfg, text, strlen(text), "c.json");
}

static void test_ids_per_feature_flag(void **state)
{
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set(&cfg, "ids-per-feature", "2-4"), SR_OK);
    assert_int_equal(cfg.ids_min, 2);
    assert_int_equal(cfg.ids_max, 4);
    assert_int_equal(cfg.n_feature_ids, 0);
    assert_int_equal(sr_train_config_ids_per_sample(&cfg), 26 * 4);

    int64_t rows[3] = {10, 20, 30};
    assert_int_equal(sr_train_config_set_table_rows(&cfg, rows, 3), SR_OK);
    assert_int_equal(sr_train_config_set(&cfg, "ids-per-feature", "3,0-2,5-9"), SR_OK);
    assert_int_equal(cfg.n_feature_ids, 3);
    assert_int_equal(cfg.feature_ids_min[1], 0);
    assert_int_equal(cfg.feature_ids_max[1], 2);
    assert_int_equal(cfg.feature_ids_min[2], 5);
    assert_int_equal(cfg.feature_ids_max[2], 9);
    assert_int_equal(sr_train_config_ids_per_sample(&cfg), 3 + 2 + 9);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);
    struct sr_synth_config sc;
    assert_int_equal(sr_train_config_synth(&cfg, rows, &sc), SR_OK);
    assert_ptr_equal(sc.feature_ids_max, cfg.feature_ids_max);

    /* F is checked against the features once they are known */
    assert_int_equal(sr_train_config_set(&cfg, "ids-per-feature", "1,2"), SR_OK);
    expect_error(sr_train_config_check(&cfg), "2 entries for 3 features", "--ids-per-feature");
    expect_error(sr_train_config_synth(&cfg, rows, &sc), "2 entries for 3 features", NULL);

    /* the single form clears the list (nothing stale is hashed across ranks) */
    assert_int_equal(sr_train_config_set(&cfg, "ids-per-feature", "1"), SR_OK);
    assert_int_equal(cfg.n_feature_ids, 0);
    assert_int_equal(cfg.feature_ids_max[0], 0);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);
    assert_int_equal(sr_train_config_synth(&cfg, rows, &sc), SR_OK);
    assert_null(sc.feature_ids_min);

    const char *bad[] = {"1,x", "1,,2", ",1", "1,", "3-1,2", "1,0", "0", "1-", "-1,2", "1,2x"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        expect_error(sr_train_config_set(&cfg, "ids-per-feature", bad[k]), "--ids-per-feature",
                     NULL);
    expect_error(sr_train_config_set(&cfg, "ids-per-feature", "1,x"), "entry 2", NULL);
    expect_error(sr_train_config_set(&cfg, "ids-per-feature", "1,1048577"), "out of range",
                 "entry 2");
    expect_error(sr_train_config_set(&cfg, "steps", "5"), "--steps", NULL);
}

static void test_ids_per_feature_json(void **state)
{
    const char *tables = "\"tables\": [{\"name\": \"a\", \"rows\": 10}, "
                         "{\"name\": \"b\", \"rows\": 20}, {\"name\": \"c\", \"rows\": 30}]";
    char text[512];
    sr_train_config_default(&cfg);
    snprintf(text, sizeof text, "{%s, \"ids_per_feature\": [1, \"0-2\", 4]}", tables);
    assert_int_equal(from_json(text), SR_OK);
    assert_int_equal(cfg.n_feature_ids, 3);
    assert_int_equal(cfg.feature_ids_min[1], 0);
    assert_int_equal(cfg.feature_ids_max[1], 2);
    assert_int_equal(cfg.feature_ids_max[2], 4);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);

    sr_train_config_default(&cfg);
    snprintf(text, sizeof text, "{%s, \"ids_per_feature\": [1, 2]}", tables);
    assert_int_equal(from_json(text), SR_OK);
    expect_error(sr_train_config_check(&cfg), "2 entries for 3 features", NULL);

    sr_train_config_default(&cfg);
    assert_int_equal(from_json("{\"ids_per_feature\": \"1-3\"}"), SR_OK);
    assert_int_equal(cfg.ids_min, 1);
    assert_int_equal(cfg.ids_max, 3);
    assert_int_equal(cfg.n_feature_ids, 0);
    assert_int_equal(from_json("{\"ids_per_feature\": 5}"), SR_OK);
    assert_int_equal(cfg.ids_min, 5);
    assert_int_equal(cfg.ids_max, 5);

    expect_error(from_json("{\"ids_per_feature\": [1, \"x\"]}"), "\"ids_per_feature[1]\"", "'x'");
    expect_error(from_json("{\"ids_per_feature\": [1, 0]}"), "\"ids_per_feature[1]\"",
                 "out of range");
    expect_error(from_json("{\"ids_per_feature\": [1, 2.5]}"), "\"ids_per_feature[1]\"", "2.5");
    expect_error(from_json("{\"ids_per_feature\": []}"), "\"ids_per_feature\"", "0 entries");
    expect_error(from_json("{\"ids_per_feature\": true}"), "\"ids_per_feature\"", "a boolean");
    expect_error(from_json("{\"ids_per_feature\": \"3-1\"}"), "\"ids_per_feature\"", "'3-1'");
}

static void test_workload_presets(void **state)
{
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_workload(&cfg, "K"), SR_OK);
    assert_string_equal(cfg.workload, "K");
    assert_int_equal(cfg.num_tables, 26);
    assert_int_equal(cfg.tables[2].num_embeddings, 10131227);
    assert_int_equal(cfg.tables[25].num_embeddings, 142572);
    assert_int_equal(cfg.embedding_dim, 16);
    assert_int_equal(cfg.tables[2].embedding_dim, 16);
    assert_int_equal(cfg.n_bot, 5);
    assert_int_equal(cfg.top_mlp[0], 512);
    assert_int_equal(cfg.interaction, SR_INTERACTION_DOT);
    assert_int_equal(sr_train_config_ids_per_sample(&cfg), 26);
    assert_int_equal(cfg.id_dist, SR_ID_DIST_UNIFORM);
    assert_int_equal(cfg.optimizer, SR_OPTIM_SGD);
    assert_int_equal(cfg.emb_optimizer, SR_OPTIM_SGD);
    assert_true(cfg.lr == 0.1f && cfg.emb_lr == -1.0f);
    assert_int_equal(cfg.batch_size, 2048);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);

    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_workload(&cfg, "m"), SR_OK);
    assert_string_equal(cfg.workload, "M");
    for (int t = 0; t < 26; t++)
        assert_int_equal(cfg.tables[t].num_embeddings, 1000000);
    assert_int_equal(cfg.embedding_dim, 128);
    assert_int_equal(cfg.n_top, 5);
    assert_int_equal(cfg.ids_min, 20);
    assert_int_equal(cfg.ids_max, 20);
    assert_int_equal(cfg.batch_size, 16384);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);

    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_workload(&cfg, "D"), SR_OK);
    assert_int_equal(cfg.tables[0].num_embeddings, 40000000);
    assert_int_equal(cfg.tables[5].num_embeddings, 3);
    assert_int_equal(cfg.interaction, SR_INTERACTION_DCN);
    assert_int_equal(cfg.dcn_layers, 3);
    assert_int_equal(cfg.dcn_rank, 512);
    assert_int_equal(cfg.n_feature_ids, 26);
    assert_memory_equal(cfg.feature_ids_max, d_ids, sizeof d_ids);
    assert_memory_equal(cfg.feature_ids_min, d_ids, sizeof d_ids);
    assert_int_equal(sr_train_config_ids_per_sample(&cfg), 214);
    assert_true(cfg.id_dist == SR_ID_DIST_ZIPF && cfg.zipf_s == 1.05);
    assert_int_equal(cfg.optimizer, SR_OPTIM_ADAGRAD);
    assert_int_equal(cfg.emb_optimizer, SR_OPTIM_ROWWISE_ADAGRAD);
    assert_true(cfg.lr == 0.005f && cfg.emb_lr == -1.0f);
    assert_int_equal(cfg.batch_size, 16384);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);
    /* what comes after a preset wins; steps and seed are not the preset's */
    assert_int_equal(sr_train_config_set(&cfg, "batch-size", "32"), SR_OK);
    assert_int_equal(cfg.batch_size, 32);
    assert_int_equal(cfg.steps, 1000);

    expect_error(sr_train_config_set_workload(&cfg, "X"), "'X'", "K, M or D");
    expect_error(sr_train_config_set_workload(&cfg, "KK"), "K, M or D", NULL);
    expect_error(sr_train_config_set_workload(&cfg, ""), "K, M or D", NULL);
    assert_string_equal(sr_workload_setting("D", "dcn-rank"), "512");
    assert_null(sr_workload_setting("K", "dcn-rank"));
    assert_null(sr_workload_setting("Z", "table-rows"));
}

/* "workload" in a config is applied before its other keys, which win over it;
 * a preset already applied (--workload) wins over the file's. */
static void test_workload_json(void **state)
{
    sr_train_config_default(&cfg);
    assert_int_equal(from_json("{\"batch_size\": 64, \"workload\": \"D\", \"lr\": 0.01}"), SR_OK);
    assert_string_equal(cfg.workload, "D");
    assert_int_equal(cfg.batch_size, 64);
    assert_true(cfg.lr == 0.01f);
    assert_int_equal(cfg.interaction, SR_INTERACTION_DCN);
    assert_int_equal(cfg.n_feature_ids, 26);

    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_workload(&cfg, "K"), SR_OK);
    assert_int_equal(from_json("{\"workload\": \"D\", \"steps\": 3}"), SR_OK);
    assert_string_equal(cfg.workload, "K");
    assert_int_equal(cfg.embedding_dim, 16);
    assert_int_equal(cfg.steps, 3);

    expect_error(from_json("{\"workload\": \"Q\"}"), "\"workload\"", "\"K\", \"M\" or \"D\"");
    expect_error(from_json("{\"workload\": 1}"), "\"workload\"", "expected a string");
    expect_error(from_json("{\"workloads\": \"K\"}"), "did you mean \"workload\"", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_per_feature_flag),
        cmocka_unit_test(test_ids_per_feature_json),
        cmocka_unit_test(test_workload_presets),
        cmocka_unit_test(test_workload_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
