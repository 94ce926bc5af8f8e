/*
 * The loader's batch (batch.h; the trainer's stages in src/train/trainer_batch.c):
 *   - on the immediate CPU device the twin aliases the pinned host batch and
 *     the copy moves sizes only;
 *   - on the deferred CPU device the twin is memory of its own, so a forward
 *     that reads it without the copy stage (sizes set, no data copied: a
 *     test-only path) computes from poison (NaN dense features); with the copy
 *     issued and not waited for on the host, forward's ops run after it on the
 *     stream and give the immediate device's pooled vectors and logits bit for
 *     bit (the EBC reads nothing of the twin on the host);
 *   - the copy moves the used part only (ids past num_values keep the twin's
 *     poison);
 *   - the loader's check (sr_batch_check_ids) names the bad id or bag, and
 *     the hash policy rewrites ids there, so the EBC changes nothing.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/batch.h"
#include "shardrec/dlrm.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/synthetic.h"
#include "device/cpu/cpu_device.h"

#define B    16
#define F    3
#define D    4
#define ND   13
#define SEED 7

static const int64_t rows[F] = {50, 7, 1000};
static const enum sr_id_policy policy[F] = {SR_ID_POLICY_ERROR, SR_ID_POLICY_HASH,
                                            SR_ID_POLICY_ERROR};
static const char *keys[F] = {"f0", "f1", "f2"};

/* One device's model: an EBC over three tables and a small DLRM. */
struct model {
    struct sr_device *dev;
    struct sr_table_config tables[F];
    char names[F][SR_NAME_MAX];
    int feature_table[F];
    struct sr_ebc *ebc;
    struct sr_dlrm *dlrm;
    float *pooled, *logits; /* device */
};

static void model_init(struct model *m, struct sr_device *dev, int64_t max_values)
{
    memset(m, 0, sizeof *m);
    m->dev = dev;
    for (int f = 0; f < F; f++) {
        snprintf(m->tables[f].name, SR_NAME_MAX, "t%d", f);
        m->tables[f].num_embeddings = rows[f];
        m->tables[f].embedding_dim = D;
        m->tables[f].id_policy = policy[f];
        strcpy(m->names[f], keys[f]);
        m->feature_table[f] = f;
    }
    struct sr_ebc_config ec = {.tables = m->tables,
                               .num_tables = F,
                               .feature_names = m->names,
                               .feature_table = m->feature_table,
                               .num_features = F};
    assert_int_equal(sr_ebc_init(&m->ebc, dev, &ec, NULL, B, max_values, SEED), SR_OK);
    struct sr_dlrm_config dc = {.num_dense = ND,
                                .bot_mlp = {ND, 8, D},
                                .n_bot = 3,
                                .top_mlp = {8, 1},
                                .n_top = 2,
                                .num_sparse = F,
                                .embedding_dim = D};
    assert_int_equal(sr_dlrm_init(&m->dlrm, dev, &dc, B, SEED), SR_OK);
    m->pooled = sr_dev_alloc(dev, sizeof(float) * B * F * D);
    m->logits = sr_dev_alloc(dev, sizeof(float) * B);
}

static void model_free(struct model *m)
{
    sr_ebc_free(m->ebc);
    sr_dlrm_free(m->dlrm);
    sr_dev_free(m->dev, m->pooled);
    sr_dev_free(m->dev, m->logits);
}

/* Forward on batch b (the twin): pooled and logits on the host after a sync. */
static int forward(struct model *m, struct sr_batch *b, float *pooled, float *logits)
{
    int rc = sr_ebc_forward(m->ebc, &b->kjt, m->pooled, NULL);
    if (rc)
        return rc;
    sr_dlrm_forward(m->dlrm, NULL, b->dense, m->pooled, B, m->logits);
    sr_dev_copy(m->dev, pooled, m->pooled, sizeof(float) * B * F * D, NULL);
    sr_dev_copy(m->dev, logits, m->logits, sizeof(float) * B, NULL);
    sr_dev_sync(m->dev, NULL);
    return SR_OK;
}

static struct sr_synth *synth(void)
{
    struct sr_synth_config sc = {.seed = SEED,
                                 .num_dense = ND,
                                 .num_features = F,
                                 .rows = rows,
                                 .ids_min = 0,
                                 .ids_max = 3,
                                 .id_dist = SR_ID_DIST_UNIFORM};
    struct sr_synth *s;
    assert_int_equal(sr_synth_init(&s, &sc), SR_OK);
    return s;
}

/* The loader: fill the pinned host batch and check it. */
static void load(struct sr_synth *s, struct sr_batch *host)
{
    sr_synth_fill(s, 0, B, host);
    assert_int_equal(sr_batch_check_ids(host, rows, policy), SR_OK);
}

/* The reference: pooled vectors and logits on the immediate CPU device. */
static void reference(struct sr_synth *s, float *pooled, float *logits)
{
    struct sr_device *dev = sr_cpu_device();
    struct sr_batch host, twin;
    struct model m;
    sr_batch_init_pinned(&host, dev, B, ND, F, sr_synth_max_values(s, B), 0, keys);
    sr_batch_init_twin(&twin, &host);
    model_init(&m, dev, host.max_values);
    load(s, &host);
    sr_batch_copy(&twin, &host, NULL);
    assert_int_equal(forward(&m, &twin, pooled, logits), SR_OK);
    model_free(&m);
    sr_batch_free(&twin);
    sr_batch_free(&host);
}

static void test_immediate_twin_aliases(void **state)
{
    struct sr_device *dev = sr_cpu_device();
    struct sr_synth *s = synth();
    struct sr_batch host, twin;
    sr_batch_init_pinned(&host, dev, B, ND, F, sr_synth_max_values(s, B), 1, keys);
    sr_batch_init_twin(&twin, &host);
    assert_int_equal(twin.memory, SR_BATCH_ALIAS);
    assert_ptr_equal(twin.dense, host.dense);
    assert_ptr_equal(twin.kjt.values, host.kjt.values);
    assert_ptr_equal(twin.kjt.weights, host.kjt.weights);
    load(s, &host);
    sr_batch_copy(&twin, &host, NULL);
    assert_int_equal(twin.batch_size, B);
    assert_int_equal(twin.kjt.stride, B);
    assert_int_equal(twin.kjt.num_values, host.kjt.num_values);
    assert_int_equal(twin.kjt.num_weights, host.kjt.num_values);
    sr_batch_free(&twin);
    assert_ptr_equal(twin.dense, NULL);
    host.dense[0] = 1.0f; /* freeing the alias left the host's arrays alone */
    sr_batch_free(&host);
    sr_synth_free(s);
}

/* A loader that forgot the copy stage: the twin has the batch's sizes only. */
static void sizes_only(struct sr_batch *twin, const struct sr_batch *host)
{
    twin->batch_size = host->batch_size;
    twin->kjt.stride = host->kjt.stride;
    twin->kjt.num_values = host->kjt.num_values;
    twin->kjt.num_weights = host->kjt.num_weights;
}

static void test_deferred_forward_needs_copy_stage(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    struct sr_synth *s = synth();
    float want_pooled[B * F * D], want_logits[B], pooled[B * F * D], logits[B];
    reference(s, want_pooled, want_logits);

    struct sr_batch host, twin;
    struct model m;
    sr_batch_init_pinned(&host, dev, B, ND, F, sr_synth_max_values(s, B), 0, keys);
    sr_batch_init_twin(&twin, &host);
    assert_int_equal(twin.memory, SR_BATCH_DEVICE);
    assert_ptr_not_equal(twin.kjt.values, host.kjt.values);
    model_init(&m, dev, host.max_values);
    load(s, &host);

    /* Without the copy stage: the twin holds only its poison (the dense half
     * alone: poisoned offsets would send the lookup out of its tables). */
    sizes_only(&twin, &host);
    sr_dlrm_forward(m.dlrm, NULL, twin.dense, m.pooled, B, m.logits);
    sr_dev_copy(dev, logits, m.logits, sizeof logits, NULL);
    sr_dev_sync(dev, NULL);
    assert_true(memcmp(logits, want_logits, sizeof logits) != 0); /* from NaN dense features */

    /* The copy stage issued and NOT waited for on the host: forward's ops are
     * stream-ordered after it and the EBC reads nothing of the twin on the
     * host (length_per_key is host metadata), so this is correct. */
    sr_batch_copy(&twin, &host, NULL);
    assert_int_equal(forward(&m, &twin, pooled, logits), SR_OK);
    assert_memory_equal(pooled, want_pooled, sizeof pooled);
    assert_memory_equal(logits, want_logits, sizeof logits);

    model_free(&m);
    sr_batch_free(&twin);
    sr_batch_free(&host);
    sr_synth_free(s);
}

static void test_copy_moves_used_part_only(void **state)
{
    struct sr_device *dev = sr_cpu_deferred_device();
    struct sr_synth *s = synth();
    struct sr_batch host, twin;
    sr_batch_init_pinned(&host, dev, B, ND, F, sr_synth_max_values(s, B), 1, keys);
    sr_batch_init_twin(&twin, &host);
    load(s, &host);
    int64_t n = host.kjt.num_values;
    assert_true(n < host.max_values);
    sr_batch_copy(&twin, &host, NULL);
    sr_dev_sync(dev, NULL);
    assert_memory_equal(twin.kjt.values, host.kjt.values, sizeof(int64_t) * (size_t)n);
    assert_memory_equal(twin.kjt.weights, host.kjt.weights, sizeof(float) * (size_t)n);
    assert_memory_equal(twin.kjt.offsets, host.kjt.offsets, sizeof(int64_t) * (F * B + 1));
    for (int64_t i = n; i < host.max_values; i++) {
        assert_int_equal(twin.kjt.values[i], -1); /* its poison: never copied */
        assert_true(isnan(twin.kjt.weights[i]));
    }
    sr_batch_free(&twin);
    sr_batch_free(&host);
    sr_synth_free(s);
}

/* A host batch of the immediate device, loaded but not yet checked. */
static void unchecked(struct sr_synth *s, struct sr_batch *b)
{
    sr_batch_init_pinned(b, sr_cpu_device(), B, ND, F, sr_synth_max_values(s, B), 0, keys);
    sr_synth_fill(s, 0, B, b);
}

static void test_loader_check_messages(void **state)
{
    struct sr_synth *s = synth();
    struct sr_batch a, b;
    struct model m;
    char msg[512];
    unchecked(s, &a);
    unchecked(s, &b);
    model_init(&m, sr_cpu_device(), a.max_values);
    int64_t at = sr_kjt_bag_begin(&a.kjt, 2, B) - 1; /* the last id of f2 (error policy) */
    a.kjt.values[at] = b.kjt.values[at] = rows[2] + 5;

    assert_int_equal(sr_batch_check_ids(&a, rows, policy), SR_ERR_DATA);
    snprintf(msg, sizeof msg, "%s", sr_error_message());
    assert_non_null(strstr(msg, "id 1005 out of range [0, 1000) at 'f2' (feature 2)"));

    a.kjt.values[at] = b.kjt.values[at] = 0;
    a.kjt.lengths[0] = b.kjt.lengths[0] = a.kjt.lengths[0] + 1; /* lengths disagree */
    assert_int_equal(sr_batch_check_ids(&a, rows, policy), SR_ERR_DATA);
    assert_non_null(strstr(sr_error_message(), "KJT: lengths sum to"));

    model_free(&m);
    sr_batch_free(&a);
    sr_batch_free(&b);
    sr_synth_free(s);
}

static void test_hash_policy_in_the_loader(void **state)
{
    struct sr_synth *s = synth();
    struct sr_batch a, b;
    struct model m;
    float pa[B * F * D], pb[B * F * D], la[B], lb[B];
    unchecked(s, &a);
    unchecked(s, &b);
    model_init(&m, sr_cpu_device(), a.max_values);
    int64_t first = sr_kjt_bag_begin(&a.kjt, 1, 0), end = sr_kjt_bag_begin(&a.kjt, 1, B);
    assert_true(end > first);
    a.kjt.values[first] = 7 * 3 + 2; /* f1 (hash, 7 rows) */
    a.kjt.values[end - 1] = -3;
    b.kjt.values[first] = 2; /* b: the same ids, brought into range by hand */
    b.kjt.values[end - 1] = 4;

    assert_int_equal(sr_batch_check_ids(&a, rows, policy), SR_OK);
    assert_int_equal(a.kjt.values[first], 2);
    assert_int_equal(a.kjt.values[end - 1], 4);
    int64_t before[4096];
    assert_true(a.kjt.num_values <= 4096);
    memcpy(before, a.kjt.values, sizeof(int64_t) * (size_t)a.kjt.num_values);
    assert_int_equal(forward(&m, &a, pa, la), SR_OK); /* the EBC changes no id */
    assert_memory_equal(a.kjt.values, before, sizeof(int64_t) * (size_t)a.kjt.num_values);
    assert_int_equal(sr_batch_check_ids(&b, rows, policy), SR_OK);
    assert_int_equal(forward(&m, &b, pb, lb), SR_OK);
    assert_memory_equal(pa, pb, sizeof pa);
    assert_memory_equal(la, lb, sizeof la);

    model_free(&m);
    sr_batch_free(&a);
    sr_batch_free(&b);
    sr_synth_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_immediate_twin_aliases),
        cmocka_unit_test(test_deferred_forward_needs_copy_stage),
        cmocka_unit_test(test_copy_moves_used_part_only),
        cmocka_unit_test(test_loader_check_messages),
        cmocka_unit_test(test_hash_policy_in_the_loader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
