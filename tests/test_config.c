/*
 * Job configuration: defaults pass their own check, strict number and list
 * parsers, JSON config files (values, tables with several features, errors
 * naming file and key), and the shape checks that the CLI turns into exit 2.
 * Strictness: unknown keys with a hint, types, whole in-range integers,
 * duplicates, in nested table objects too; wrapped messages; the memory check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardrec/error.h"
#include "shardrec/plan.h"
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
    /* finite as a double, not as a float: refused, not cast to inf */
    assert_int_equal(sr_parse_f32("--lr", "1e300", &f), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "float range"));
    assert_int_equal(sr_parse_f32("--lr", "3e38", &f), SR_OK);
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

static void expect_json(const char *text, int want, const char *a, const char *b)
{
    sr_train_config_default(&cfg);
    int rc = sr_train_config_from_json(&cfg, text, strlen(text), "c.json");
    if (rc != want)
        fail_msg("'%s': status %d, expected %d (%s)", text, rc, want, sr_error_message());
    const char *m = sr_error_message();
    if ((a && !strstr(m, a)) || (b && !strstr(m, b)))
        fail_msg("'%s': message '%s' lacks '%s' or '%s'", text, m, a, b ? b : "");
}

/* Unknown keys (with the nearest known key), wrong types, fractional and
 * out-of-range integers, duplicates, nested table keys: errors naming the key. */
static void test_json_strict(void **state)
{
    const int E = SR_ERR_INVALID_ARG;
    expect_json("{\"batch_sise\": 4}", E, "\"batch_sise\"", "did you mean \"batch_size\"");
    expect_json("{\"emb_optimiser\": \"sgd\"}", E, "\"emb_optimiser\"", "\"emb_optimizer\"");
    expect_json("{\"tables\": [{\"name\": \"a\", \"rowz\": 5}]}", E, "tables[0]",
                "did you mean \"rows\"");
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 5, \"featurs\": [\"x\"]}]}", E,
                "\"featurs\"", "\"features\"");
    expect_json("{\"optimizer\": 3}", E, "\"optimizer\"", "expected a string");
    expect_json("{\"lr\": \"0.1\"}", E, "\"lr\"", "a string");
    expect_json("{\"metrics\": false}", E, "\"metrics\"", "a boolean");
    expect_json("{\"emb_lr\": -1e300}", E, "\"emb_lr\"", "float range");
    expect_json("{\"ids_per_feature\": 2.5}", E, "\"ids_per_feature\"", "2.5");
    expect_json("{\"bot_mlp\": [13, 64.5, 16]}", E, "\"bot_mlp\"", "64.5");
    expect_json("{\"bot_mlp\": [13, 0, 16]}", E, "\"bot_mlp\"", "out of range");
    expect_json("{\"top_mlp\": 1}", E, "\"top_mlp\"", "expected an array");
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 10.5}]}", E, "\"rows\"", "10.5");
    expect_json("{\"tables\": [{\"name\": 5, \"rows\": 10}]}", E, "\"name\"", "a number");
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 10, \"features\": \"x\"}]}", E,
                "\"features\"", "expected an array");
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 10, \"pooling\": \"max\"}]}", E,
                "\"pooling\"", "'max'");
    expect_json("{\"tables\": [7]}", E, "\"tables\"", "object");
    expect_json("{\"batch_size\": 1e30}", E, "\"batch_size\"", "out of range");
    expect_json("{\"seed\": 1e19}", E, "\"seed\"", "out of range");
    /* 2^53 + 1 reads as 2^53: either could be meant, so neither is taken */
    expect_json("{\"seed\": 9007199254740993}", E, "\"seed\"", "not read exactly");
    expect_json("{\"steps\": -1}", E, "\"steps\"", "out of range");
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 2e12}]}", E, "\"rows\"", "out of range");
    expect_json("{\"steps\": 1, \"steps\": 2}", E, "\"steps\"", "given twice");
    expect_json("{\"steps\": 1} {}", E, "c.json:1", "malformed");
    expect_json("[1]", E, "c.json", "object");
    /* a NUL byte inside the text */
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_from_json(&cfg, "{}\0{\"x\":1}", 11, "c.json"), E);
    assert_non_null(strstr(sr_error_message(), "NUL"));
    /* what is valid still reads, and "steps" counts as given */
    expect_json("{\"steps\": 9, \"seed\": 9007199254740991}", SR_OK, NULL, NULL);
    assert_int_equal(cfg.steps, 9);
    assert_int_equal(cfg.steps_set, 1);
    assert_true(cfg.seed == 9007199254740991ull);
    /* two features of one name: refused by the check, naming it */
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 5, \"features\": [\"x\", \"x\"]}]}",
                SR_OK, NULL, NULL);
    assert_int_equal(sr_train_config_check(&cfg), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "'x'"));
}

/* A message wrapped with context keeps what it wraps (it used to print only
 * " (entry 2)"). */
static void test_wrapped_message(void **state)
{
    int64_t rows[8];
    int n;
    assert_int_equal(sr_parse_rows("--table-rows", "100,0,100", rows, &n, 8), SR_ERR_INVALID_ARG);
    const char *m = sr_error_message();
    assert_non_null(strstr(m, "--table-rows: 0 is out of range"));
    assert_non_null(strstr(m, "(entry 2)"));
    sr_error_set(SR_ERR_DATA, "inner %d", 7);
    sr_error_set(SR_ERR_DATA, "outer: %s: %s", sr_error_message(), sr_error_message());
    assert_string_equal(sr_error_message(), "outer: inner 7: inner 7");
}

/* Sizes that cannot fit are refused before allocation, naming the table or
 * flag, the bytes and the memory; sharding counts only a rank's shards. */
static void test_memory_check(void **state)
{
    const uint64_t GiB = (uint64_t)1 << 30;
    int64_t big = (int64_t)1 << 40, rows24 = (int64_t)1 << 24;
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_OK);
    assert_true(sr_machine_memory() > (uint64_t)1 << 20);

    assert_int_equal(sr_train_config_set_table_rows(&cfg, &big, 1), SR_OK);
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, GiB), SR_ERR_OOM);
    const char *m = sr_error_message();
    assert_non_null(strstr(m, "table 't0'"));
    assert_non_null(strstr(m, "1099511627776 rows"));
    assert_non_null(strstr(m, "1073741824 bytes (1.0 GiB)"));

    sr_train_config_default(&cfg);
    cfg.eval_samples = (int64_t)1 << 36;
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_ERR_OOM);
    assert_non_null(strstr(sr_error_message(), "--eval-samples"));

    sr_train_config_default(&cfg);
    cfg.batch_size = 1 << 24;
    cfg.ids_min = cfg.ids_max = 1 << 20;
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_ERR_OOM);
    assert_non_null(strstr(sr_error_message(), "--batch-size"));

    /* 2^24 rows x 16 x 4 bytes (sgd: no state) = 1 GiB: not on one rank with
     * 768 MiB, but a quarter each over 4 ranks row-wise */
    sr_train_config_default(&cfg);
    cfg.emb_optimizer = SR_OPTIM_SGD;
    assert_int_equal(sr_train_config_set_table_rows(&cfg, &rows24, 1), SR_OK);
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 768 << 20), SR_ERR_OOM);
    struct sr_ebc_config ec;
    struct sr_plan *plan;
    sr_train_config_ebc(&cfg, &ec);
    assert_int_equal(sr_plan_uniform(&plan, &ec, SR_SHARDING_TYPE_ROW_WISE, 4, 4), SR_OK);
    for (int r = 0; r < 4; r++)
        assert_int_equal(sr_train_config_check_memory(&cfg, plan, r, 4, 768 << 20), SR_OK);
    /* the 4 ranks on one host of 768 MiB: each quarter fits, all 4 do not;
     * every rank of the host finds the same sum, in the same words */
    const int host[4] = {0, 1, 2, 3};
    char first[1024];
    struct sr_memory_estimate one, all;
    setenv("SR_HOST_MEMORY", "805306368", 1);
    for (int r = 0; r < 4; r++)
        assert_int_equal(sr_train_config_check_host_memory(&cfg, plan, &host[r], 1, 4, 0), SR_OK);
    assert_int_equal(sr_train_config_check_host_memory(&cfg, plan, host, 2, 4, 0), SR_OK);
    assert_int_equal(sr_train_config_check_host_memory(&cfg, plan, host, 4, 4, 0), SR_ERR_OOM);
    snprintf(first, sizeof first, "%s", sr_error_message());
    assert_non_null(strstr(first, "the 4 ranks on this host (0, 1, 2, 3) need "));
    assert_non_null(strstr(first, "more than the 805306368 bytes (768.0 MiB) this machine has"));
    assert_non_null(strstr(first, "table 't0'"));
    sr_train_config_host_memory(&cfg, plan, host, 1, 4, 0, &one);
    sr_train_config_host_memory(&cfg, plan, host, 4, 4, 0, &all);
    assert_true(all.total > 3 * one.total && all.tables == 4 * one.tables);
    assert_int_equal(sr_train_config_check_host_memory(&cfg, plan, host, 4, 4, 0), SR_ERR_OOM);
    assert_string_equal(sr_error_message(), first);
    /* on a device the host holds only the batch pool and staging: they fit */
    assert_int_equal(sr_train_config_check_host_memory(&cfg, plan, host, 4, 4, 64 << 20), SR_OK);
    unsetenv("SR_HOST_MEMORY");
    sr_plan_free(plan);

    /* products beyond 2^64 are caught, not wrapped */
    sr_train_config_default(&cfg);
    cfg.tables[0].num_embeddings = INT64_MAX;
    cfg.tables[0].embedding_dim = 1 << 16;
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_ERR_OOM);
    assert_non_null(strstr(sr_error_message(), "2^64"));
}

/* The estimate by part that the summary prints: the parts sum to the total;
 * a table's part is rows x dim x 4 bytes plus its optimizer state (row-wise
 * Adagrad: one float a row); under a table-wise plan only the rank holding a
 * table counts it. */
static void test_memory_estimate(void **state)
{
    int64_t rows[2] = {1000, 300000};
    struct sr_memory_estimate e, e0, e1;
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_table_rows(&cfg, rows, 2), SR_OK);
    cfg.emb_optimizer = SR_OPTIM_ROWWISE_ADAGRAD;
    sr_train_config_memory(&cfg, NULL, 0, 1, &e);
    assert_false(e.overflow);
    assert_true(e.total == e.tables + e.dense + e.batch + e.eval + e.pool);
    uint64_t D = (uint64_t)cfg.embedding_dim;
    assert_true(e.tables == 4 * ((1000 + 300000) * D + 1000 + 300000));
    assert_true(e.dense > 0 && e.batch > 0);

    struct sr_ebc_config ec;
    struct sr_plan *plan;
    sr_train_config_ebc(&cfg, &ec);
    assert_int_equal(sr_plan_uniform(&plan, &ec, SR_SHARDING_TYPE_TABLE_WISE, 2, 2), SR_OK);
    sr_train_config_memory(&cfg, plan, 0, 2, &e0);
    sr_train_config_memory(&cfg, plan, 1, 2, &e1);
    uint64_t t0 = 4 * (1000 * D + 1000), t1 = 4 * (300000 * D + 300000);
    assert_true(e0.tables + e1.tables == t0 + t1);
    assert_true((e0.tables == t0 && e1.tables == t1) || (e0.tables == t1 && e1.tables == t0));
    assert_true(e0.dense == e.dense && e1.dense == e.dense);
    /* the batch part holds the embedding's three batch contexts (the sharded
     * EBC's own and the pipeline's two), each receiving the global batch's
     * pooled vectors and their gradients for its one table's feature (counted
     * once before: 4 GB short on a GPU at M's size): at least 3 x 2B x D x 8
     * bytes (test_memory_follows_shards has the exact sum) */
    assert_true(e0.batch_slots >= 3 * 2 * (uint64_t)cfg.batch_size * D * 8);
    assert_true(e1.batch == e0.batch && e1.batch_slots == e0.batch_slots);
    sr_plan_free(plan);
}

/* Under a plan, what a rank receives follows the shards it holds: each
 * shard adds every rank's samples of its features (global batch x
 * sr_train_config_slot_sample_bytes); the rest of the batch part is the same
 * on every rank. Three tables on 2 ranks: one rank holds two. */
static void test_memory_follows_shards(void **state)
{
    int64_t rows[3] = {1000, 300000, 50};
    struct sr_memory_estimate e[2];
    struct sr_ebc_config ec;
    struct sr_plan *plan;
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_table_rows(&cfg, rows, 3), SR_OK);
    cfg.ids_min = 1, cfg.ids_max = 5;
    cfg.device = SR_DEVICE_CHOICE_CPU; /* a workspace of 32 bytes an id */
    sr_train_config_ebc(&cfg, &ec);
    assert_int_equal(sr_plan_uniform(&plan, &ec, SR_SHARDING_TYPE_TABLE_WISE, 2, 2), SR_OK);
    const uint64_t BS = 2 * (uint64_t)cfg.batch_size;
    uint64_t per_sample[2] = {0, 0};
    for (int f = 0; f < cfg.num_features; f++) {
        const uint64_t one = sr_train_config_slot_sample_bytes(&cfg, f);
        /* 3 contexts x (ids_max ids x (32 workspace + 12 values + 8 received:
         * id and weight words) + a bag's 20 bytes + its pooled vector and
         * gradient) */
        assert_true(one == 3 * (5 * 52 + 20 + 8 * (uint64_t)cfg.embedding_dim));
        per_sample[plan->tables[cfg.feature_table[f]].shards[0].rank] += one;
    }
    assert_true(per_sample[0] != per_sample[1]);
    for (int r = 0; r < 2; r++) {
        sr_train_config_memory(&cfg, plan, r, 2, &e[r]);
        assert_true(e[r].batch_slots == BS * per_sample[r]);
    }
    assert_true(e[0].batch - e[0].batch_slots == e[1].batch - e[1].batch_slots);
    sr_plan_free(plan);
    /* all dp: every rank holds every table whole, with its gradient, touch
     * counts and their staging in the last bucket: 8 bytes a row and column
     * beside the weights (fp32 buckets), more when they travel in 16 bits */
    assert_int_equal(sr_plan_uniform(&plan, &ec, SR_SHARDING_TYPE_DATA_PARALLEL, 2, 2), SR_OK);
    sr_train_config_memory(&cfg, plan, 1, 2, &e[1]);
    sr_train_config_memory(&cfg, NULL, 0, 1, &e[0]);
    uint64_t extra = 0, D = (uint64_t)cfg.embedding_dim;
    for (int t = 0; t < 3; t++)
        extra += 8 * (uint64_t)rows[t] * (D + 1);
    assert_true(e[1].tables == e[0].tables + extra);
    assert_true(sr_train_config_dp_extra_bytes(&cfg, 2, 10, D) == 8 * 10 * (D + 1));
    cfg.dense_comm_dtype = SR_DTYPE_BF16;
    assert_true(sr_train_config_dp_extra_bytes(&cfg, 2, 10, D) == (12 + 16) * 10 * (D + 1));
    assert_true(sr_train_config_dp_extra_bytes(&cfg, 1, 10, D) == 8 * 10 * (D + 1));
    sr_plan_free(plan);
}

/* With --data, a sample's ids come from the files' bounds (data_ids_max, set
 * by the trainer from its readers), not from --ids-per-feature: a multi-hot
 * file of 4 ids a bag under the default 1 is estimated as
 * --ids-per-feature 4 would be. */
static void test_memory_data_bounds(void **state)
{
    int64_t rows[2] = {1000, 5000};
    struct sr_memory_estimate one, four, data;
    struct sr_ebc_config ec;
    struct sr_plan *plan;
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_table_rows(&cfg, rows, 2), SR_OK);
    cfg.ids_min = cfg.ids_max = 1;
    sr_train_config_ebc(&cfg, &ec);
    assert_int_equal(sr_plan_uniform(&plan, &ec, SR_SHARDING_TYPE_ROW_WISE, 2, 2), SR_OK);
    sr_train_config_memory(&cfg, plan, 0, 2, &one);
    uint64_t slot_one = sr_train_config_slot_sample_bytes(&cfg, 1);
    cfg.ids_min = cfg.ids_max = 4;
    sr_train_config_memory(&cfg, plan, 0, 2, &four);
    uint64_t slot_four = sr_train_config_slot_sample_bytes(&cfg, 1);
    cfg.ids_min = cfg.ids_max = 1;
    for (int f = 0; f < cfg.num_features; f++)
        cfg.data_ids_max[f] = 4;
    sr_train_config_memory(&cfg, plan, 0, 2, &data);
    assert_true(four.batch > one.batch);
    assert_true(data.batch == four.batch);
    assert_true(data.batch_slots == four.batch_slots);
    assert_true(sr_train_config_slot_sample_bytes(&cfg, 1) == slot_four && slot_four > slot_one);
    assert_int_equal(sr_train_config_ids_per_sample(&cfg), 4 * cfg.num_features);
    cfg.data_ids_max[0] = 0; /* not known for feature 0: its --ids-per-feature */
    assert_int_equal(sr_train_config_feature_ids_max(&cfg, 0), 1);
    assert_int_equal(sr_train_config_feature_ids_max(&cfg, 1), 4);
    sr_plan_free(plan);
}

/* --batch-pool N's host batches are in the estimate (issue 19, item 5: the
 * peak grew with N, the estimate did not) and a pool that cannot fit is
 * refused naming --batch-pool; on a device the pool is checked against the
 * host's memory, not the device's. */
static void test_memory_batch_pool(void **state)
{
    const uint64_t GiB = (uint64_t)1 << 30;
    struct sr_memory_estimate e0, e64;
    sr_train_config_default(&cfg);
    sr_train_config_memory(&cfg, NULL, 0, 1, &e0);
    assert_true(e0.pool == 0);
    cfg.batch_pool = 64;
    sr_train_config_memory(&cfg, NULL, 0, 1, &e64);
    /* a batch: dense 13, label, then per feature a length (4), an offset (8)
     * and ids_max ids (8 each) per sample, and the offsets' last entry */
    uint64_t B = (uint64_t)cfg.batch_size, F = (uint64_t)cfg.num_features;
    uint64_t batch = B * (13 * 4 + 4 + F * (4 + 8 + 8 * (uint64_t)cfg.ids_max)) + 8;
    assert_true(e64.pool == 64 * batch);
    assert_true(e64.total == e0.total + 64 * batch);
    assert_true(e64.total == e64.tables + e64.dense + e64.batch + e64.eval + e64.pool);

    cfg.batch_pool = 1 << 16; /* 65536 x 2048 samples: about 74 GiB */
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_ERR_OOM);
    assert_non_null(strstr(sr_error_message(), "--batch-pool 65536"));
    /* a device of 64 GiB holds the model; the host (this machine) must hold the pool */
    if (sr_machine_memory() < (uint64_t)(1 << 16) * batch) {
        assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_ERR_OOM);
        assert_non_null(strstr(sr_error_message(), "--batch-pool"));
    }
    cfg.batch_pool = 4;
    assert_int_equal(sr_train_config_check_memory(&cfg, NULL, 0, 1, 64 * GiB), SR_OK);
}

/* Hints only when a known key is near (issue 19, item 5: "trace" was offered
 * "lr"); a \u0000 that would cut a name short, and an empty "metrics" path
 * (read as none), are errors. */
static void test_json_hints_and_nul(void **state)
{
    const int E = SR_ERR_INVALID_ARG;
    expect_json("{\"trace\": 1}", E, "\"trace\": unknown key; HINT: the known keys are steps,",
                "tables");
    assert_null(strstr(sr_error_message(), "did you mean"));
    expect_json("{\"learning_rate\": 1}", E, "the known keys are", NULL);
    expect_json("{\"lrr\": 1}", E, "did you mean \"lr\"", NULL);
    expect_json("{\"batchsize\": 1}", E, "did you mean \"batch_size\"", NULL);
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 10, \"pool\": \"sum\"}]}", E,
                "did you mean \"pooling\"", NULL);
    expect_json("{\"tables\": [{\"name\": \"a\", \"rows\": 10, \"size\": 4}]}", E,
                "the known keys are name, rows, pooling, id_policy, features", NULL);
    expect_json("{\"tables\": [{\"name\": \"a\\u0000b\", \"rows\": 10}]}", E, "\\u0000", NULL);
    expect_json("{\"metrics\": \"\"}", E, "\"metrics\": an empty path", NULL);
    expect_json("{\"tables\": [{\"name\": \"a\\\\u0000b\", \"rows\": 10}]}", SR_OK, NULL,
                NULL); /* an escaped backslash, then text: a name of "a\u0000b" */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_valid), cmocka_unit_test(test_number_parsers),
        cmocka_unit_test(test_list_parsers),       cmocka_unit_test(test_json_config),
        cmocka_unit_test(test_json_errors),        cmocka_unit_test(test_shape_checks),
        cmocka_unit_test(test_json_strict),        cmocka_unit_test(test_wrapped_message),
        cmocka_unit_test(test_memory_check),       cmocka_unit_test(test_memory_estimate),
        cmocka_unit_test(test_memory_batch_pool),  cmocka_unit_test(test_json_hints_and_nul),
        cmocka_unit_test(test_memory_follows_shards),
        cmocka_unit_test(test_memory_data_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
