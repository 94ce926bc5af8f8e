/*
 * Table statistics measured on a sample (shardrec/table_stats.h,
 * sr_train_config_table_stats), on hand-made samples whose mean ids and hot
 * shares are counted by hand below.
 *
 * The KJT fixture: B = 4 samples, F = 4 features over T = 3 tables.
 *
 *   table   E     hot rows  policy  features
 *   shared  200   2         hash    a, b
 *   small   50    1         hash    c
 *   unused  1000  10        error   d (every bag empty)
 *
 *   feature  lengths   values (raw)              as rows (mod E)
 *   a        2 0 1 3   7 7 | 3 | 7 9 11          the same
 *   b        1 2 0 1   3 | 3 -193 | 9            -193 -> 7
 *   c        1 1 1 1   60 | 10 | 110 | 49        60 -> 10, 110 -> 10
 *   d        0 0 0 0
 *
 * shared: 10 ids over 4 samples (2.5 a sample); row 7 four times, row 3
 * three, 9 twice, 11 once: its 2 hottest rows take 7/10. small: 4 ids (1 a
 * sample); row 10 three times: 3/4. unused: no ids: 0 a sample, the uniform
 * hot share 10/1000.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "helpers/tmpdir.h"
#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/planner.h"
#include "shardrec/table_stats.h"
#include "shardrec/train_config.h"

struct fixture {
    struct sr_table_config tables[3];
    char names[4][SR_NAME_MAX];
    int feature_table[4];
    struct sr_ebc_config ec;
    int32_t lengths[16];
    int64_t offsets[17];
    int64_t values[20];
    struct sr_kjt kjt;
};

static void fixture_init(struct fixture *x)
{
    static const int32_t lengths[16] = {2, 0, 1, 3, 1, 2, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    static const int64_t values[] = {7, 7, 3, 7, 9, 11, 3, 3, -193, 9, 60, 10, 110, 49};
    static const int64_t rows[4] = {200, 200, 50, 1000};
    enum sr_id_policy policy[4] = {SR_ID_POLICY_HASH, SR_ID_POLICY_HASH, SR_ID_POLICY_HASH,
                                   SR_ID_POLICY_ERROR};
    memset(x, 0, sizeof *x);
    x->tables[0] = (struct sr_table_config){"shared", 200, 4, SR_POOLING_SUM, SR_ID_POLICY_HASH, SR_DTYPE_F32};
    x->tables[1] = (struct sr_table_config){"small", 50, 4, SR_POOLING_SUM, SR_ID_POLICY_HASH, SR_DTYPE_F32};
    x->tables[2] = (struct sr_table_config){"unused", 1000, 4, SR_POOLING_SUM, SR_ID_POLICY_ERROR, SR_DTYPE_F32};
    for (int f = 0; f < 4; f++)
        snprintf(x->names[f], SR_NAME_MAX, "%c", 'a' + f);
    x->feature_table[0] = x->feature_table[1] = 0;
    x->feature_table[2] = 1;
    x->feature_table[3] = 2;
    x->ec = (struct sr_ebc_config){3, x->tables, 4, x->names, x->feature_table, 0};
    memcpy(x->lengths, lengths, sizeof lengths);
    memcpy(x->values, values, sizeof values);
    x->kjt = (struct sr_kjt){.num_keys = 4,
                             .stride = 4,
                             .lengths = x->lengths,
                             .offsets = x->offsets,
                             .values = x->values,
                             .num_values = (int64_t)(sizeof values / sizeof values[0])};
    assert_int_equal(sr_kjt_compute_offsets(&x->kjt), SR_OK);
    /* ids to rows as training maps them (sr_batch_check_ids applies this) */
    assert_int_equal(sr_kjt_apply_id_policy(&x->kjt, rows, policy), SR_OK);
}

static void test_hand_made_sample(void **state)
{
    (void)state;
    struct fixture x;
    struct sr_table_stats *s = NULL;
    struct sr_planner_table out[3];
    fixture_init(&x);
    assert_int_equal(x.values[8], 7); /* -193 mod 200 */
    sr_table_stats_init(&s, &x.ec);
    sr_table_stats_add(s, &x.kjt, 4);
    sr_table_stats_finish(s, out);
    assert_int_equal(sr_table_stats_samples(s), 4);
    assert_int_equal(out[0].features, 2);
    assert_true(out[0].ids_per_sample == 2.5);
    assert_true(out[0].hot_share == 0.7);
    assert_int_equal(out[1].features, 1);
    assert_true(out[1].ids_per_sample == 1.0);
    assert_true(out[1].hot_share == 0.75);
    assert_int_equal(out[2].features, 1);
    assert_true(out[2].ids_per_sample == 0.0);
    assert_true(out[2].hot_share == 0.01);
    /* hot-set sizes: shared's 1, 2, 7 and 20 rows, of which the 4 rows seen
     * back 1 and 2 (a set of all 4 would read every lookup of the sample);
     * small's 1, 2 and 5, of which its 2 rows seen back 1; their hot lists
     * hottest first */
    assert_int_equal(out[0].num_sizes, 2);
    assert_int_equal(out[0].hot_size[0], 1);
    assert_int_equal(out[0].hot_size[1], 2);
    assert_true(out[0].hot_size_share[0] == 0.4 && out[0].hot_size_share[1] == 0.7);
    assert_int_equal(out[0].num_hot, 2);
    assert_int_equal(out[0].hot[0], 7);
    assert_int_equal(out[0].hot[1], 3);
    assert_int_equal(out[1].num_sizes, 1);
    assert_true(out[1].hot_size_share[0] == 0.75);
    assert_int_equal(out[1].num_hot, 1);
    assert_int_equal(out[1].hot[0], 10);
    assert_int_equal(out[2].num_sizes, 0); /* nothing counted: no hybrid option */
    assert_null(out[2].hot);
    sr_planner_stats_release(out, 3);
    sr_table_stats_free(s);
}

/* The first n samples only: samples 0 and 1 (shared: 7 7 | 3 | 3 7: 5 ids,
 * rows 7 and 3 take all; small: 10 10). Adding more continues the count. */
static void test_first_samples_and_more(void **state)
{
    (void)state;
    struct fixture x;
    struct sr_table_stats *s = NULL;
    struct sr_planner_table out[3];
    fixture_init(&x);
    sr_table_stats_init(&s, &x.ec);
    sr_table_stats_add(s, &x.kjt, 2);
    sr_table_stats_finish(s, out);
    assert_int_equal(sr_table_stats_samples(s), 2);
    assert_true(out[0].ids_per_sample == 2.5 && out[0].hot_share == 1.0);
    assert_true(out[1].ids_per_sample == 1.0 && out[1].hot_share == 1.0);
    sr_planner_stats_release(out, 3);
    sr_table_stats_add(s, &x.kjt, 4); /* 6 samples: shared 15 ids, 7 x7, 3 x5 */
    sr_table_stats_finish(s, out);
    assert_int_equal(sr_table_stats_samples(s), 6);
    assert_true(out[0].ids_per_sample == 2.5);
    assert_true(out[0].hot_share == 12.0 / 15.0);
    sr_table_stats_add(s, &x.kjt, 0); /* nothing */
    assert_int_equal(sr_table_stats_samples(s), 6);
    sr_planner_stats_release(out, 3);
    sr_table_stats_free(s);
}

/* A big table, counted exactly through the hash table's growth: E = 10^6
 * (10^4 hot rows), 50000 distinct rows once each, the first 100 of them 100
 * times more: the 10^4 hottest take 100 x 101 + 9900 x 1 of 60000 lookups. */
static void test_big_table_exact(void **state)
{
    (void)state;
    enum { DISTINCT = 50000, HOT = 100, REPEAT = 100, N = DISTINCT + HOT * REPEAT };
    struct sr_table_config table = {"big", 1000000, 4, SR_POOLING_SUM, SR_ID_POLICY_ERROR,
                                    SR_DTYPE_F32};
    char names[1][SR_NAME_MAX] = {"f"};
    int ft[1] = {0};
    struct sr_ebc_config ec = {1, &table, 1, names, ft, 0};
    int32_t lengths[1] = {N};
    int64_t offsets[2];
    int64_t *values = sr_malloc(sizeof *values * N);
    for (int i = 0; i < DISTINCT; i++)
        values[i] = (int64_t)i * 19 + 3;
    for (int i = 0; i < HOT * REPEAT; i++)
        values[DISTINCT + i] = (int64_t)(i % HOT) * 19 + 3;
    struct sr_kjt kjt = {.num_keys = 1,
                         .stride = 1,
                         .lengths = lengths,
                         .offsets = offsets,
                         .values = values,
                         .num_values = N};
    assert_int_equal(sr_kjt_compute_offsets(&kjt), SR_OK);
    struct sr_table_stats *s = NULL;
    struct sr_planner_table out;
    sr_table_stats_init(&s, &ec);
    sr_table_stats_add(s, &kjt, 1);
    sr_table_stats_finish(s, &out);
    assert_true(out.ids_per_sample == (double)N);
    assert_true(out.hot_share == (double)(HOT * (REPEAT + 1) + (10000 - HOT)) / N);
    /* the hybrid option's hot-set sizes: E/1000, E/300, E/100, E/30 rounded
     * up (E/10 is more than the 50000 rows counted: no size the sample
     * cannot back); each with its prefix's share: the 100 repeated rows
     * (100 x 101 lookups), then rows counted once */
    const int64_t sizes[4] = {1000, 3334, 10000, 33334};
    assert_int_equal(out.num_sizes, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(out.hot_size[i], sizes[i]);
        assert_true(out.hot_size_share[i] == (double)(HOT * (REPEAT + 1) + sizes[i] - HOT) / N);
    }
    assert_true(out.hot_size_share[2] == out.hot_share);
    /* the hot rows of the largest size, hottest first: the 100 repeated
     * rows, then the rows counted once (ties: the lower row first) */
    assert_int_equal(out.num_hot, 33334);
    for (int64_t i = 0; i < out.num_hot; i++)
        assert_int_equal(out.hot[i], i * 19 + 3);
    sr_planner_stats_release(&out, 1);
    sr_table_stats_free(s);
    sr_free(values);
}

/* sr_train_config_table_stats on a Criteo TSV file: one table of 10 rows
 * (one hot row). Ids 3, 0xd (13: the reader takes it mod 10 -> 3), 3, 7,
 * missing (-> 0). */
static void write_tsv(const char *path)
{
    static const char *ids[5] = {"00000003", "0000000d", "00000003", "00000007", ""};
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 5; i++)
        fprintf(f, "%d\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\t%s\n", i % 2, ids[i]);
    fclose(f);
}

static void test_from_data_file(void **state)
{
    (void)state;
    static struct sr_train_config cfg;
    int64_t rows[1] = {10}, measured = -1;
    struct sr_planner_table out;
    sr_train_config_default(&cfg);
    assert_int_equal(sr_train_config_set_table_rows(&cfg, rows, 1), SR_OK);
    /* no --data: the config's (--id-dist zipf:1.05) */
    assert_int_equal(sr_train_config_table_stats(&cfg, &out, &measured), SR_OK);
    assert_int_equal(measured, 0);
    assert_true(out.hot_share == sr_planner_hot_share(10, 1.05) && out.ids_per_sample == 1.0);
    assert_int_equal(out.num_hot, 1); /* the row the bijection gives rank 0 */
    sr_planner_stats_release(&out, 1);
    write_tsv(sr_test_path("five.tsv"));
    cfg.n_data = 1;
    snprintf(cfg.data_paths[0], SR_PATH_MAX, "%s", sr_test_path("five.tsv"));
    cfg.plan_sample = 4;
    assert_int_equal(sr_train_config_table_stats(&cfg, &out, &measured), SR_OK);
    assert_int_equal(measured, 4);
    assert_true(out.ids_per_sample == 1.0 && out.hot_share == 0.75 && out.features == 1);
    assert_int_equal(out.num_hot, 1); /* row 3 (3, 13 -> 3, 3, 7) */
    assert_int_equal(out.hot[0], 3);
    sr_planner_stats_release(&out, 1);
    cfg.plan_sample = 100; /* the data ends first */
    assert_int_equal(sr_train_config_table_stats(&cfg, &out, &measured), SR_OK);
    assert_int_equal(measured, 5);
    assert_true(out.hot_share == 0.6);
    sr_planner_stats_release(&out, 1);
    snprintf(cfg.data_paths[0], SR_PATH_MAX, "%s", sr_test_path("missing.tsv"));
    assert_int_equal(sr_train_config_table_stats(&cfg, &out, &measured), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "missing.tsv"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_made_sample),
        cmocka_unit_test(test_first_samples_and_more),
        cmocka_unit_test(test_big_table_exact),
        cmocka_unit_test(test_from_data_file),
    };
    return cmocka_run_group_tests(tests, sr_test_tmpdir_setup, sr_test_tmpdir_teardown);
}
