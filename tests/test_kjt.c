/*
 * KJT validation: each malformed case (negative length, lengths that do not
 * sum to the number of values, weights of the wrong length, offsets that
 * disagree with lengths, ids out of range under the error policy) returns
 * SR_ERR_DATA with a message naming the feature and the sample; the hash
 * policy maps ids, negative ones included, to their residue mod rows.
 *
 * The fixture: F = 2 features ("user", "item"), B = 3 samples.
 *
 *   lengths  user: 2 0 1   item: 1 2 1      values  u u . u | i i i i
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/error.h"
#include "shardrec/kjt.h"

struct fixture {
    const char *keys[2];
    int32_t lengths[6];
    int64_t offsets[7];
    int64_t values[7];
    float weights[7];
    struct sr_kjt kjt;
};

static void fixture_init(struct fixture *x, int with_weights)
{
    static const int32_t lengths[6] = {2, 0, 1, 1, 2, 1};
    static const int64_t values[7] = {0, 4, 2, 1, 3, 0, 3};
    memset(x, 0, sizeof *x);
    x->keys[0] = "user";
    x->keys[1] = "item";
    memcpy(x->lengths, lengths, sizeof lengths);
    memcpy(x->values, values, sizeof values);
    for (int i = 0; i < 7; i++)
        x->weights[i] = 0.5f * (float)i;
    x->kjt = (struct sr_kjt){.num_keys = 2,
                             .stride = 3,
                             .keys = x->keys,
                             .lengths = x->lengths,
                             .offsets = x->offsets,
                             .values = x->values,
                             .weights = with_weights ? x->weights : NULL,
                             .num_values = 7,
                             .num_weights = with_weights ? 7 : 0};
    assert_int_equal(sr_kjt_compute_offsets(&x->kjt), SR_OK);
}

static void assert_message_has(const char *needle)
{
    const char *msg = sr_error_message();
    if (!strstr(msg, needle))
        fail_msg("message '%s' lacks '%s'", msg, needle);
}

static void test_valid_kjt_passes(void **state)
{
    struct fixture x;
    fixture_init(&x, 1);
    static const int64_t want[7] = {0, 2, 2, 3, 4, 6, 7};
    assert_memory_equal(x.offsets, want, sizeof want);
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_OK);
    assert_int_equal(sr_kjt_bag_begin(&x.kjt, 1, 1), 4);
    assert_int_equal(sr_kjt_bag_end(&x.kjt, 1, 1), 6);
    fixture_init(&x, 0);
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_OK);
}

static void test_negative_length_rejected(void **state)
{
    struct fixture x;
    fixture_init(&x, 0);
    x.lengths[5] = -1; /* item, sample 2 */
    x.lengths[4] = 4;  /* keep the total at 7 */
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_ERR_DATA);
    assert_message_has("negative length -1");
    assert_message_has("'item'");
    assert_message_has("sample 2");
    assert_int_equal(sr_kjt_compute_offsets(&x.kjt), SR_ERR_DATA);
    assert_message_has("sample 2");
}

static void test_length_sum_mismatch_rejected(void **state)
{
    struct fixture x;
    fixture_init(&x, 0);
    x.lengths[0] = 3; /* lengths now sum to 8, values are 7 */
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_ERR_DATA);
    assert_message_has("sum to 8");
    assert_message_has("7 values");
    assert_int_equal(sr_kjt_compute_offsets(&x.kjt), SR_ERR_DATA);
}

static void test_offsets_disagreeing_rejected(void **state)
{
    struct fixture x;
    fixture_init(&x, 0);
    x.offsets[4] = 5; /* item sample 0 now spans 2 ids, its length says 1 */
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_ERR_DATA);
    assert_message_has("'item'");
    assert_message_has("sample 0");
}

static void test_weights_wrong_length_rejected(void **state)
{
    struct fixture x;
    fixture_init(&x, 1);
    x.kjt.num_weights = 6;
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_ERR_DATA);
    assert_message_has("6 weights for 7 values");
    fixture_init(&x, 0);
    x.kjt.num_weights = 7; /* declared, but no array */
    assert_int_equal(sr_kjt_validate(&x.kjt), SR_ERR_DATA);
    assert_message_has("no weight array");
}

static void test_id_out_of_range_error_policy(void **state)
{
    const int64_t rows[2] = {5, 4};
    const enum sr_id_policy policy[2] = {SR_ID_POLICY_ERROR, SR_ID_POLICY_ERROR};
    struct fixture x;
    fixture_init(&x, 0);
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_OK);

    x.values[5] = 4; /* item, sample 1: rows are [0, 4) */
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_ERR_DATA);
    assert_message_has("id 4");
    assert_message_has("'item'");
    assert_message_has("sample 1");
    assert_int_equal(x.values[5], 4); /* left alone */

    fixture_init(&x, 0);
    x.values[2] = -3; /* user, sample 2 (sample 1 is empty) */
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_ERR_DATA);
    assert_message_has("id -3");
    assert_message_has("'user'");
    assert_message_has("sample 2");
}

static void test_hash_policy_maps_mod_rows(void **state)
{
    const int64_t rows[2] = {5, 4};
    const enum sr_id_policy policy[2] = {SR_ID_POLICY_HASH, SR_ID_POLICY_ERROR};
    struct fixture x;
    fixture_init(&x, 0);
    x.values[0] = 7;   /* -> 2 */
    x.values[1] = -1;  /* -> 4 */
    x.values[2] = -10; /* -> 0 */
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_OK);
    static const int64_t want[7] = {2, 4, 0, 1, 3, 0, 3};
    assert_memory_equal(x.values, want, sizeof want);

    x.values[0] = INT64_MIN; /* the residue of the most negative id is still in range */
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_OK);
    assert_true(x.values[0] >= 0 && x.values[0] < 5);
    assert_int_equal(x.values[0], (int64_t)(((INT64_MIN % 5) + 5) % 5));

    x.values[3] = -1; /* item stays under the error policy */
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_ERR_DATA);
    assert_message_has("'item'");
    assert_message_has("sample 0");
}

static void test_no_keys_names_feature_index(void **state)
{
    const int64_t rows[2] = {5, 4};
    const enum sr_id_policy policy[2] = {SR_ID_POLICY_ERROR, SR_ID_POLICY_ERROR};
    struct fixture x;
    fixture_init(&x, 0);
    x.kjt.keys = NULL;
    x.values[6] = 9;
    assert_int_equal(sr_kjt_apply_id_policy(&x.kjt, rows, policy), SR_ERR_DATA);
    assert_message_has("feature 1");
    assert_message_has("sample 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_kjt_passes),
        cmocka_unit_test(test_negative_length_rejected),
        cmocka_unit_test(test_length_sum_mismatch_rejected),
        cmocka_unit_test(test_offsets_disagreeing_rejected),
        cmocka_unit_test(test_weights_wrong_length_rejected),
        cmocka_unit_test(test_id_out_of_range_error_policy),
        cmocka_unit_test(test_hash_policy_maps_mod_rows),
        cmocka_unit_test(test_no_keys_names_feature_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
