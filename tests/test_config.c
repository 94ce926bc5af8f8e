/*
 * Job configuration: defaults pass their own check, strict number and list
 * parsers, JSON config files (values, tables with several features, errors
 * naming file and key), and the shape checks that the CLI turns into exit 2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardrec/error.h"
#include "shardrec/train_config.h"

static struct sr_train_config cfg;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_defaults_are_valid(void **state)
{
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);
    assert_int_equal(cfg.num_tables, 26);
    assert_int_equal(cfg.num_features, 26);
    assert_int_equal(cfg.embedding_dim, 16);
    for (int t = 0; t < cfg.num_tables; t++)
        assert_true(cfg.tables[t].num_embeddings >= 1 && cfg.tables[t].num_embeddings <= 100000);
    assert_int_equal(cfg.tables[2].num_embeddings, 100000); /* 10131227 capped */
    assert_int_equal(cfg.tables[0].num_embeddings, 1460);
}

static void test_number_parsers(void **state)
{
    int64_t v;
    float f;
    assert_int_equal(sr_parse_i64("--steps", "42", 1, 100, &v), SR_OK);
    assert_int_equal(v, 42);
    assert_int_equal(sr_parse_i64("--steps", "42x", 1, 100, &v), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "--steps"));
    assert_int_equal(sr_parse_i64("--steps", "", 1, 100, &v), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_parse_i64("--steps", "101", 1, 100, &v), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_parse_i64("--steps", "99999999999999999999999", 1, 100, &v),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_parse_f32("--lr", "0.25", &f), SR_OK);
    assert_true(f == 0.25f);
    assert_int_equal(sr_parse_f32("--lr", "nan", &f), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_parse_f32("--lr", "1e", &f), SR_ERR_INVALID_ARG);
}

static void test_list_parsers(void **state)
{
    int w[SR_MLP_MAX], n;
    int64_t rows[8];
    assert_int_equal(sr_parse_widths("--bot-mlp", "13-512-256-64-16", w, &n, SR_MLP_MAX), SR_OK);
    assert_int_equal(n, 5);
    assert_int_equal(w[1], 512);
    assert_int_equal(w[4], 16);
    assert_int_equal(sr_parse_widths("--bot-mlp", "13--16", w, &n, SR_MLP_MAX), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_parse_widths("--bot-mlp", "13-0", w, &n, SR_MLP_MAX), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_parse_rows("--table-rows", "10,20,30", rows, &n, 8), SR_OK);
    assert_int_equal(n, 3);
    assert_int_equal(rows[2], 30);
    assert_int_equal(sr_parse_rows("--table-rows", "10,x,30", rows, &n, 8), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "entry 2"));
    assert_int_equal(sr_parse_rows("--table-rows", "1,2,3,4,5,6,7,8,9", rows, &n, 8),
                     SR_ERR_INVALID_ARG);
}

static void test_json_config(void **state)
{
    const char *path = "test_config_ok.json";
    write_file(
        path, "{\"steps\": 7, \"batch_size\": 64, \"lr\": 0.5, \"embedding_dim\": 8,\n"
              " \"bot_mlp\": [13, 32, 8], \"top_mlp\": [16, 1],\n"
              " \"optimizer\": \"adam\", \"emb_optimizer\": \"adagrad\",\n"
              " \"id_dist\": \"uniform\", \"ids_per_feature\": 3,\n"
              " \"tables\": [{\"name\": \"user\", \"rows\": 100, \"features\": [\"u1\", \"u2\"]},\n"
              "            {\"name\": \"item\", \"rows\": 50, \"pooling\": \"mean\"}]}\n");
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_load_json(&cfg, path), SR_OK);
    unlink(path);
    assert_int_equal(cfg.steps, 7);
    assert_int_equal(cfg.batch_size, 64);
    assert_true(cfg.lr == 0.5f);
    assert_int_equal(cfg.n_bot, 3);
    assert_int_equal(cfg.optimizer, SR_OPTIM_ADAM);
    assert_int_equal(cfg.emb_optimizer, SR_OPTIM_ADAGRAD);
    assert_int_equal(cfg.id_dist, SR_ID_DIST_UNIFORM);
    assert_int_equal(cfg.ids_min, 3);
    assert_int_equal(cfg.num_tables, 2);
    assert_int_equal(cfg.num_features, 3);
    assert_string_equal(cfg.feature_names[1], "u2");
    assert_int_equal(cfg.feature_table[1], 0);
    assert_string_equal(cfg.feature_names[2], "item");
    assert_int_equal(cfg.feature_table[2], 1);
    assert_int_equal(cfg.tables[1].pooling, SR_POOLING_MEAN);
    assert_int_equal(cfg.tables[0].embedding_dim, 8);
    assert_int_equal(sr_train_config_check(&cfg), SR_OK);
}

static void test_json_errors(void **state)
{
    const char *path = "test_config_bad.json";
    write_file(path, "{\"steps\": 7,\n \"lr\": }\n");
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_load_json(&cfg, path), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "test_config_bad.json:2"));
    write_file(path, "{\"steps\": 1.5}");
    assert_int_equal(sr_train_config_load_json(&cfg, path), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "\"steps\""));
    write_file(path, "{\"tables\": [{\"name\": \"a\"}]}");
    assert_int_equal(sr_train_config_load_json(&cfg, path), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "rows"));
    write_file(path, "{\"optimizer\": \"lbfgs\"}");
    assert_int_equal(sr_train_config_load_json(&cfg, path), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "optimizer"));
    unlink(path);
    assert_int_equal(sr_train_config_load_json(&cfg, "/nonexistent/x.json"), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "/nonexistent/x.json"));
}

static void test_shape_checks(void **state)
{
    sr_train_config_default(&cfg);
    cfg.bot_mlp[cfg.n_bot - 1] = 32; /* bottom output != embedding dim */
    assert_int_equal(sr_train_config_check(&cfg), SR_ERR_INVALID_ARG);
    sr_train_config_default(&cfg);
    cfg.top_mlp[cfg.n_top - 1] = 2; /* must end in one logit */
    assert_int_equal(sr_train_config_check(&cfg), SR_ERR_INVALID_ARG);
    sr_train_config_default(&cfg);
    cfg.optimizer = SR_OPTIM_ROWWISE_ADAGRAD;
    assert_int_equal(sr_train_config_check(&cfg), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "embeddings only"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_valid), cmocka_unit_test(test_number_parsers),
        cmocka_unit_test(test_list_parsers),       cmocka_unit_test(test_json_config),
        cmocka_unit_test(test_json_errors),        cmocka_unit_test(test_shape_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
