/*
 * Embedding bag collection against a naive float64 reference written here:
 * pooled forward (sum, per-id weights, mean, empty bags, several features on
 * one table, different dims per table, hash id policy) and one SGD step of
 * backward (duplicate ids within a bag, across bags and across features of a
 * table merged into one row update; untouched rows bit-identical). Also: the
 * DLRM initialisation drawn from the counter-based generator, config and KJT
 * errors that name the table or feature, mean + weights rejected, and
 * bit-identical results across reruns and thread counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmocka.h>

#include "helpers/host_view.h"
#include "shardrec/device.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "device/ops_embedding.h"

#define MAX_T    4
#define MAX_F    4
#define MAX_BAGS 512
#define MAX_V    8192

/* ---- fixtures: configs and KJTs ----------------------------------------- */

struct tcfg {
    struct sr_table_config tables[MAX_T];
    char feature_names[MAX_F][SR_NAME_MAX];
    int feature_table[MAX_F];
    struct sr_ebc_config cfg;
};

static void tcfg_table(struct tcfg *c, int t, const char *name, int64_t rows, int dim,
                       enum sr_pooling pooling, enum sr_id_policy policy)
{
    struct sr_table_config *tc = &c->tables[t];
    memset(tc, 0, sizeof *tc);
    strcpy(tc->name, name);
    tc->num_embeddings = rows;
    tc->embedding_dim = dim;
    tc->pooling = pooling;
    tc->id_policy = policy;
    if (t + 1 > c->cfg.num_tables)
        c->cfg.num_tables = t + 1;
}

static void tcfg_feature(struct tcfg *c, int f, const char *name, int table)
{
    strcpy(c->feature_names[f], name);
    c->feature_table[f] = table;
    if (f + 1 > c->cfg.num_features)
        c->cfg.num_features = f + 1;
}

static void tcfg_init(struct tcfg *c)
{
    memset(c, 0, sizeof *c);
    c->cfg.tables = c->tables;
    c->cfg.feature_names = c->feature_names;
    c->cfg.feature_table = c->feature_table;
}

/* The mixed config: three tables of different dims, t0 shared by f0 and f2,
 * t1 pooled by mean, t2 hashing its ids. */
static void mixed_config(struct tcfg *c)
{
    tcfg_init(c);
    tcfg_table(c, 0, "t0", 10, 4, SR_POOLING_SUM, SR_ID_POLICY_ERROR);
    tcfg_table(c, 1, "t1", 7, 8, SR_POOLING_MEAN, SR_ID_POLICY_ERROR);
    tcfg_table(c, 2, "t2", 5, 3, SR_POOLING_SUM, SR_ID_POLICY_HASH);
    tcfg_feature(c, 0, "f0", 0);
    tcfg_feature(c, 1, "f1", 1);
    tcfg_feature(c, 2, "f2", 0);
    tcfg_feature(c, 3, "f3", 2);
}

struct tkjt {
    const char *keys[MAX_F];
    int32_t lengths[MAX_BAGS];
    int64_t offsets[MAX_BAGS + 1];
    int64_t values[MAX_V];
    float weights[MAX_V];
    struct sr_kjt kjt;
};

static struct tkjt *tkjt_make(const struct tcfg *c, int B, const int32_t *lengths,
                              const int64_t *values, const float *weights)
{
    struct tkjt *k = calloc(1, sizeof *k);
    int F = c->cfg.num_features;
    int64_t n = 0;
    for (int i = 0; i < F * B; i++)
        n += lengths[i];
    assert_true(F * B <= MAX_BAGS && n <= MAX_V);
    for (int f = 0; f < F; f++)
        k->keys[f] = c->feature_names[f];
    memcpy(k->lengths, lengths, sizeof(int32_t) * (size_t)(F * B));
    memcpy(k->values, values, sizeof(int64_t) * (size_t)n);
    if (weights)
        memcpy(k->weights, weights, sizeof(float) * (size_t)n);
    k->kjt = (struct sr_kjt){.num_keys = F,
                             .stride = B,
                             .keys = k->keys,
                             .lengths = k->lengths,
                             .offsets = k->offsets,
                             .values = k->values,
                             .weights = weights ? k->weights : NULL,
                             .num_values = n,
                             .num_weights = weights ? n : 0};
    assert_int_equal(sr_kjt_compute_offsets(&k->kjt), SR_OK);
    return k;
}

/* ---- the float64 reference ---------------------------------------------- */

static int ref_out_dim(const struct sr_ebc_config *c)
{
    int d = 0;
    for (int f = 0; f < c->num_features; f++)
        d += c->tables[c->feature_table[f]].embedding_dim;
    return d;
}

/* Visit every id: feature f, sample b, its row, and d pooled / d row. */
typedef void (*id_visit)(void *ctx, int f, int b, int col, int64_t row, double scale);

static void ref_walk(const struct sr_ebc_config *c, const struct sr_kjt *kjt, id_visit visit,
                     void *ctx)
{
    int col = 0;
    for (int f = 0; f < c->num_features; f++) {
        const struct sr_table_config *tc = &c->tables[c->feature_table[f]];
        for (int b = 0; b < kjt->stride; b++) {
            int64_t lo = sr_kjt_bag_begin(kjt, f, b), hi = sr_kjt_bag_end(kjt, f, b);
            double inv = tc->pooling == SR_POOLING_MEAN && hi > lo ? 1.0 / (double)(hi - lo) : 1;
            for (int64_t i = lo; i < hi; i++) {
                double w = kjt->weights ? kjt->weights[i] : 1.0;
                visit(ctx, f, b, col, kjt->values[i], w * inv);
            }
        }
        col += tc->embedding_dim;
    }
}

struct ref_ctx {
    const struct sr_ebc_config *c;
    struct sr_ebc *ebc;
    int out_dim;
    double *pooled;       /* forward: (B, out_dim) */
    const float *dpooled; /* backward: (B, out_dim) */
    double *grad[MAX_T];  /* backward: (E, D) per table */
    const float *weights[MAX_T]; /* forward: the host's view of each table */
};

static void ref_pool_id(void *p, int f, int b, int col, int64_t row, double scale)
{
    struct ref_ctx *x = p;
    int t = x->c->feature_table[f], d = x->c->tables[t].embedding_dim;
    const float *w = x->weights[t] + row * d;
    for (int j = 0; j < d; j++)
        x->pooled[(size_t)b * x->out_dim + col + j] += scale * w[j];
}

static void ref_grad_id(void *p, int f, int b, int col, int64_t row, double scale)
{
    struct ref_ctx *x = p;
    int t = x->c->feature_table[f], d = x->c->tables[t].embedding_dim;
    for (int j = 0; j < d; j++)
        x->grad[t][row * d + j] += scale * x->dpooled[(size_t)b * x->out_dim + col + j];
}

/* The tests read results on the host: a wait after each call whose outputs
 * they read (the deferred CPU device, SR_CPU_DEFERRED=1, proves it). */
static void host_wait(void)
{
    sr_dev_sync(sr_device_cpu(), NULL);
}

/* What the loader does before forward (sr_batch_check_ids): check the KJT,
 * bring ids into range by each table's policy, count ids per feature. The
 * EBC itself no longer reads ids or lengths on the host. */
static int loader_check(const struct sr_ebc_config *c, struct sr_kjt *kjt)
{
    int64_t rows[64];
    enum sr_id_policy policy[64];
    assert_true(c->num_features <= 64);
    for (int f = 0; f < c->num_features; f++) {
        rows[f] = c->tables[c->feature_table[f]].num_embeddings;
        policy[f] = c->tables[c->feature_table[f]].id_policy;
    }
    if (kjt->num_keys != c->num_features)
        return SR_OK; /* a shape error: the EBC's own check reports it */
    int rc = sr_kjt_validate(kjt);
    return rc ? rc : sr_kjt_apply_id_policy(kjt, rows, policy);
}

static int loaded_forward(struct sr_ebc *e, struct sr_kjt *kjt, float *pooled)
{
    int rc = loader_check(sr_ebc_config(e), kjt);
    return rc ? rc : sr_ebc_forward(e, kjt, pooled, NULL);
}

static int loaded_forward_eval(struct sr_ebc *e, struct sr_kjt *kjt, float *pooled)
{
    int rc = loader_check(sr_ebc_config(e), kjt);
    return rc ? rc : sr_ebc_forward_eval(e, kjt, pooled, NULL);
}

static void assert_close(double got, double want, double tol, const char *what, int64_t i)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("%s[%lld]: got %.9g, want %.9g", what, (long long)i, got, want);
}

/* Forward against the reference (kjt after the loader check applied its id policy). */
static void check_forward(struct sr_ebc *ebc, const struct sr_kjt *kjt, const float *pooled)
{
    const struct sr_ebc_config *c = sr_ebc_config(ebc);
    struct ref_ctx x = {.c = c, .ebc = ebc, .out_dim = ref_out_dim(c)};
    assert_int_equal(sr_ebc_out_dim(ebc), x.out_dim);
    x.pooled = calloc((size_t)kjt->stride * x.out_dim, sizeof(double));
    for (int t = 0; t < c->num_tables; t++)
        x.weights[t] = HV(sr_ebc_weights(ebc, t));
    ref_walk(c, kjt, ref_pool_id, &x);
    for (int64_t i = 0; i < (int64_t)kjt->stride * x.out_dim; i++)
        assert_close(pooled[i], x.pooled[i], 1e-5, "pooled", i);
    free(x.pooled);
}

/* Snapshot of every table's weights. */
static float **snapshot(struct sr_ebc *ebc)
{
    const struct sr_ebc_config *c = sr_ebc_config(ebc);
    float **w = calloc(MAX_T, sizeof *w);
    for (int t = 0; t < c->num_tables; t++) {
        size_t n = (size_t)c->tables[t].num_embeddings * c->tables[t].embedding_dim;
        w[t] = malloc(n * sizeof(float));
        memcpy(w[t], HV(sr_ebc_weights(ebc, t)), n * sizeof(float));
    }
    return w;
}

static void snapshot_free(float **w)
{
    for (int t = 0; t < MAX_T; t++)
        free(w[t]);
    free(w);
}

/* One SGD step against the reference: before holds the weights of forward. */
static void check_sgd_step(struct sr_ebc *ebc, float **before, const struct sr_kjt *kjt,
                           const float *dpooled, float lr)
{
    const struct sr_ebc_config *c = sr_ebc_config(ebc);
    struct ref_ctx x = {.c = c, .ebc = ebc, .out_dim = ref_out_dim(c), .dpooled = dpooled};
    for (int t = 0; t < c->num_tables; t++)
        x.grad[t] = calloc((size_t)c->tables[t].num_embeddings * c->tables[t].embedding_dim,
                           sizeof(double));
    ref_walk(c, kjt, ref_grad_id, &x);
    for (int t = 0; t < c->num_tables; t++) {
        const float *w = HV(sr_ebc_weights(ebc, t));
        int64_t n = c->tables[t].num_embeddings * c->tables[t].embedding_dim;
        for (int64_t i = 0; i < n; i++) {
            if (x.grad[t][i] == 0.0)
                assert_true(w[i] == before[t][i]); /* untouched: bit-identical */
            else
                assert_close(w[i], before[t][i] - lr * x.grad[t][i], 1e-5, c->tables[t].name, i);
        }
        free(x.grad[t]);
    }
}

static float *random_floats(size_t n, uint64_t seed, double lo, double hi)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * sr_rng_uniform(seed, 77, i));
    return p;
}

static struct sr_ebc *make_ebc(const struct tcfg *c, enum sr_optim_kind kind, int max_batch,
                               int64_t max_values)
{
    struct sr_ebc *ebc = NULL;
    struct sr_optim_config o = sr_optim_config_default(kind);
    int rc = sr_ebc_init(&ebc, sr_device_cpu(), &c->cfg, &o, max_batch, max_values, 1234);
    if (rc)
        fail_msg("sr_ebc_init: %s", sr_error_message());
    return ebc;
}

/* ---- tests -------------------------------------------------------------- */

/* B = 4; bags by feature (ids), t0 = f0, f2; t1 = f1 (mean); t2 = f3 (hash):
 *   f0: [3 3 1] [3]     []      [9 0]
 *   f1: [2 2 5] [6]     []      [0 1 2 3]
 *   f2: [1 3]   []      [3 3]   [4]
 *   f3: [7 -1]  [4]     [-6]    []          (hash: 2 4 | 4 | 4)            */
static struct tkjt *mixed_batch(const struct tcfg *c)
{
    static const int32_t lengths[16] = {3, 1, 0, 2, 3, 1, 0, 4, 2, 0, 2, 1, 2, 1, 1, 0};
    static const int64_t values[] = {3, 3, 1, 3, 9, 0, 2, 2, 5,  6, 0, 1,
                                     2, 3, 1, 3, 3, 3, 4, 7, -1, 4, -6};
    return tkjt_make(c, 4, lengths, values, NULL);
}

static void test_forward_backward_mixed(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_SGD, 8, 64);
    struct tkjt *k = mixed_batch(&c);
    int D = sr_ebc_out_dim(ebc);
    assert_int_equal(D, 4 + 8 + 4 + 3);
    assert_int_equal(sr_ebc_feature_col(ebc, 2), 12);
    float *pooled = calloc(4 * (size_t)D, sizeof(float));

    float **before = snapshot(ebc);
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_OK);
    host_wait();
    static const int64_t hashed[4] = {2, 4, 4, 4};
    assert_memory_equal(k->values + 19, hashed, sizeof hashed);
    check_forward(ebc, &k->kjt, pooled);
    for (int j = 0; j < 8; j++) /* f1, sample 2 is empty: 0 */
        assert_true(pooled[2 * D + 4 + j] == 0.0f);

    float *dpooled = random_floats(4 * (size_t)D, 5, -1.0, 1.0);
    sr_ebc_backward(ebc, dpooled, 0.5f, 1, NULL);
    host_wait();
    check_sgd_step(ebc, before, &k->kjt, dpooled, 0.5f);
    /* t0 row 3 collects 6 ids from f0 and f2 in one update; row 2 none */
    assert_true(HV(sr_ebc_weights(ebc, 0))[3 * 4] != before[0][3 * 4]);
    assert_memory_equal(HV(sr_ebc_weights(ebc, 0)) + 2 * 4, before[0] + 2 * 4, 4 * sizeof(float));

    /* a second, smaller batch reuses the workspaces */
    snapshot_free(before);
    before = snapshot(ebc);
    static const int32_t len2[8] = {1, 1, 2, 0, 0, 1, 1, 1};
    static const int64_t val2[] = {3, 3, 6, 6, 9, 3, 2};
    struct tkjt *k2 = tkjt_make(&c, 2, len2, val2, NULL);
    assert_int_equal(loaded_forward(ebc, &k2->kjt, pooled), SR_OK);
    host_wait();
    check_forward(ebc, &k2->kjt, pooled);
    sr_ebc_backward(ebc, dpooled, 0.25f, 2, NULL);
    host_wait();
    check_sgd_step(ebc, before, &k2->kjt, dpooled, 0.25f);

    snapshot_free(before);
    free(dpooled);
    free(pooled);
    free(k);
    free(k2);
    sr_ebc_free(ebc);
}

static void test_weighted_sum(void **state)
{
    struct tcfg c;
    tcfg_init(&c);
    tcfg_table(&c, 0, "small", 6, 5, SR_POOLING_SUM, SR_ID_POLICY_ERROR);
    tcfg_table(&c, 1, "wide", 4, 16, SR_POOLING_SUM, SR_ID_POLICY_ERROR);
    tcfg_feature(&c, 0, "a", 1);
    tcfg_feature(&c, 1, "b", 0);
    tcfg_feature(&c, 2, "c", 1);
    static const int32_t lengths[9] = {2, 0, 3, 1, 1, 4, 0, 2, 2};
    static const int64_t values[] = {1, 1, 0, 3, 1, 5, 5, 0, 0, 5, 2, 3, 3, 1, 1};
    float *weights = random_floats(15, 9, -2.0, 2.0);
    struct tkjt *k = tkjt_make(&c, 3, lengths, values, weights);
    struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_SGD, 3, 15);
    int D = sr_ebc_out_dim(ebc);
    float *pooled = calloc(3 * (size_t)D, sizeof(float));
    float **before = snapshot(ebc);
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_OK);
    host_wait();
    check_forward(ebc, &k->kjt, pooled);
    float *dpooled = random_floats(3 * (size_t)D, 11, -1.0, 1.0);
    sr_ebc_backward(ebc, dpooled, 0.1f, 1, NULL);
    host_wait();
    check_sgd_step(ebc, before, &k->kjt, dpooled, 0.1f);
    snapshot_free(before);
    free(weights);
    free(dpooled);
    free(pooled);
    free(k);
    sr_ebc_free(ebc);
}

static void test_mean_with_weights_rejected(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_SGD, 8, 64);
    float weights[23];
    for (int i = 0; i < 23; i++)
        weights[i] = 1.0f;
    struct tkjt *k = mixed_batch(&c);
    k->kjt.weights = weights;
    k->kjt.num_weights = 23;
    float pooled[4 * 19];
    for (int i = 0; i < 4 * 19; i++)
        pooled[i] = 42.0f;
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_ERR_INVALID_ARG);
    host_wait();
    if (!strstr(sr_error_message(), "'t1'") || !strstr(sr_error_message(), "mean"))
        fail_msg("message does not name the mean table: %s", sr_error_message());
    for (int i = 0; i < 4 * 19; i++)
        assert_true(pooled[i] == 42.0f);
    free(k);
    sr_ebc_free(ebc);
}

static void test_init_matches_counter_rng(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_ADAGRAD, 4, 16);
    for (int t = 0; t < 3; t++) {
        const struct sr_table_config *tc = &c.tables[t];
        double bound = sqrt(1.0 / (double)tc->num_embeddings);
        char name[96];
        snprintf(name, sizeof name, "emb.%s.weight", tc->name);
        uint64_t stream = sr_rng_stream_of(name);
        const float *w = HV(sr_ebc_weights(ebc, t));
        for (int64_t i = 0; i < tc->num_embeddings * tc->embedding_dim; i++) {
            float want = (float)(-bound + 2.0 * bound * sr_rng_uniform(1234, stream, i));
            assert_true(w[i] == want);
            assert_true(fabsf(w[i]) <= (float)bound);
        }
    }
    assert_true(memcmp(HV(sr_ebc_weights(ebc, 0)), HV(sr_ebc_weights(ebc, 2)), 3 * sizeof(float)) !=
                0);
    const float *s = HV(sr_ebc_optim_state(ebc, 1)); /* adagrad starts at 0 */
    for (int i = 0; i < 7 * 8; i++)
        assert_true(s[i] == 0.0f);
    sr_ebc_free(ebc);
}

/* A column piece (a cw shard) drawn in one call holds exactly those columns
 * of the whole rows' draw, at any row offset, for any piece width. */
static void test_init_column_piece_matches_whole_rows(void **state)
{
    struct sr_device *dev = sr_device_cpu();
    enum { ROWS = 37, FULL = 24 };
    static const int pieces[][2] = {{0, 8}, {8, 8}, {16, 8}, {5, 13}, {23, 1}, {0, FULL}};
    float whole[ROWS * FULL];
    float *w_dev = sr_dev_alloc(dev, sizeof whole), *p_dev = sr_dev_alloc(dev, sizeof whole);
    const int64_t row0 = ((int64_t)1 << 33) + 11;
    sr_op_emb_init_uniform(dev, w_dev, SR_DTYPE_F32, ROWS, FULL, row0, 0, FULL, 99, 7, -0.5, 0.5,
                           NULL);
    sr_dev_sync(dev, NULL);
    memcpy(whole, HV(w_dev), sizeof whole);
    for (int64_t i = 0; i < ROWS * FULL; i++) /* the whole rows: the counter (row, col) */
        assert_true(whole[i] == (float)(-0.5 + sr_rng_uniform(99, 7, (uint64_t)(row0 * FULL + i))));
    for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
        const int c0 = pieces[k][0], w = pieces[k][1];
        sr_op_emb_init_uniform(dev, p_dev, SR_DTYPE_F32, ROWS, w, row0, c0, FULL, 99, 7, -0.5,
                               0.5, NULL);
        sr_dev_sync(dev, NULL);
        const float *piece = HV(p_dev);
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < w; c++)
                if (piece[r * w + c] != whole[r * FULL + c0 + c])
                    fail_msg("piece %d+%d: row %d column %d differs", c0, w, r, c);
    }
    sr_dev_free(dev, w_dev), sr_dev_free(dev, p_dev);
}

static void expect_config_error(const struct tcfg *c, const char *needle)
{
    struct sr_ebc *ebc = (struct sr_ebc *)&ebc;
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c->cfg, NULL, 4, 16, 1),
                     SR_ERR_INVALID_ARG);
    assert_null(ebc);
    if (!strstr(sr_error_message(), needle))
        fail_msg("message '%s' lacks '%s'", sr_error_message(), needle);
}

static void test_config_errors_name_the_culprit(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    c.tables[1].num_embeddings = 0;
    expect_config_error(&c, "table 't1'");
    mixed_config(&c);
    c.tables[2].embedding_dim = 0;
    expect_config_error(&c, "table 't2'");
    mixed_config(&c);
    c.feature_table[3] = 3;
    expect_config_error(&c, "feature 'f3'");
    mixed_config(&c);
    c.feature_table[0] = -1;
    expect_config_error(&c, "feature 'f0'");
    mixed_config(&c);
    strcpy(c.tables[2].name, "t0");
    expect_config_error(&c, "'t0'");
    mixed_config(&c);
    strcpy(c.feature_names[2], "f1");
    expect_config_error(&c, "'f1'");
    mixed_config(&c);
    c.tables[0].pooling = (enum sr_pooling)7;
    expect_config_error(&c, "table 't0'");
    mixed_config(&c);
    c.cfg.num_features = 0;
    expect_config_error(&c, "features");

    struct sr_ebc *ebc = NULL;
    mixed_config(&c);
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, NULL, 0, 16, 1),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, NULL, 4, -1, 1),
                     SR_ERR_INVALID_ARG);
    assert_null(ebc);
}

static void test_kjt_errors(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_SGD, 4, 23);
    float pooled[4 * 19];
    struct tkjt *k = mixed_batch(&c);

    k->keys[1] = "f2";
    k->keys[2] = "f1";
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_ERR_INVALID_ARG);
    host_wait();
    assert_non_null(strstr(sr_error_message(), "'f2'"));
    free(k);

    k = mixed_batch(&c);
    k->kjt.num_keys = 3;
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_ERR_INVALID_ARG);
    host_wait();
    free(k);

    k = mixed_batch(&c);
    k->values[5] = 10; /* f0, sample 3: t0 has 10 rows */
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_ERR_DATA);
    host_wait();
    assert_non_null(strstr(sr_error_message(), "'f0'"));
    assert_non_null(strstr(sr_error_message(), "sample 3"));
    free(k);

    k = mixed_batch(&c);
    k->lengths[6] = -1;
    k->lengths[7] = 5;
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_ERR_DATA);
    host_wait();
    free(k);
    sr_ebc_free(ebc);

    ebc = make_ebc(&c, SR_OPTIM_SGD, 4, 22); /* one id short */
    k = mixed_batch(&c);
    assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_ERR_INVALID_ARG);
    host_wait();
    assert_non_null(strstr(sr_error_message(), "capacity"));
    free(k);
    sr_ebc_free(ebc);
}

/* Many ids on few rows: long runs of duplicates that the threads' shares of
 * the sorted ids cut through. */
static struct tkjt *random_batch(const struct tcfg *c, int B, uint64_t seed, int weighted)
{
    int F = c->cfg.num_features;
    int32_t *lengths = malloc(sizeof(int32_t) * (size_t)(F * B));
    int64_t *values = malloc(sizeof(int64_t) * MAX_V);
    int64_t n = 0;
    for (int f = 0; f < F; f++) {
        int64_t rows = c->tables[c->feature_table[f]].num_embeddings;
        for (int b = 0; b < B; b++) {
            int len = (int)(sr_rng_u64(seed, 1, (uint64_t)(f * B + b)) % 21);
            lengths[f * B + b] = len;
            for (int i = 0; i < len; i++, n++)
                values[n] = (int64_t)(sr_rng_u64(seed, 2, (uint64_t)n) % (uint64_t)rows);
        }
    }
    float *weights = weighted ? random_floats((size_t)n, seed, 0.0, 2.0) : NULL;
    struct tkjt *k = tkjt_make(c, B, lengths, values, weights);
    free(lengths);
    free(values);
    free(weights);
    return k;
}

static void random_config(struct tcfg *c, enum sr_pooling pooling)
{
    tcfg_init(c);
    tcfg_table(c, 0, "hot", 13, 16, pooling, SR_ID_POLICY_ERROR);
    tcfg_table(c, 1, "cold", 3000, 5, SR_POOLING_SUM, SR_ID_POLICY_ERROR);
    tcfg_feature(c, 0, "x", 0);
    tcfg_feature(c, 1, "y", 1);
    tcfg_feature(c, 2, "z", 0);
}

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

static void test_large_batch_parallel(void **state)
{
    for (int mean = 0; mean <= 1; mean++) {
        struct tcfg c;
        random_config(&c, mean ? SR_POOLING_MEAN : SR_POOLING_SUM);
        set_threads(5);
        struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_SGD, 128, MAX_V);
        struct tkjt *k = random_batch(&c, 128, 3 + mean, !mean);
        int D = sr_ebc_out_dim(ebc);
        float *pooled = malloc(128 * sizeof(float) * (size_t)D);
        float **before = snapshot(ebc);
        assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_OK);
        host_wait();
        check_forward(ebc, &k->kjt, pooled);
        float *dpooled = random_floats(128 * (size_t)D, 8, -1.0, 1.0);
        sr_ebc_backward(ebc, dpooled, 0.01f, 1, NULL);
        host_wait();
        check_sgd_step(ebc, before, &k->kjt, dpooled, 0.01f);
        snapshot_free(before);
        free(dpooled);
        free(pooled);
        free(k);
        sr_ebc_free(ebc);
    }
    set_threads(2);
}

/* Three Adam steps with `threads` threads; returns the weights of both tables. */
static float **run_adam(int threads)
{
    struct tcfg c;
    random_config(&c, SR_POOLING_MEAN);
    set_threads(threads);
    struct sr_ebc *ebc = make_ebc(&c, SR_OPTIM_ADAM, 96, MAX_V);
    int D = sr_ebc_out_dim(ebc);
    float *pooled = malloc(96 * sizeof(float) * (size_t)D);
    float *dpooled = random_floats(96 * (size_t)D, 21, -1.0, 1.0);
    for (int step = 1; step <= 3; step++) {
        struct tkjt *k = random_batch(&c, 96, 40 + step, 0);
        assert_int_equal(loaded_forward(ebc, &k->kjt, pooled), SR_OK);
        host_wait();
        sr_ebc_backward(ebc, dpooled, 0.01f, step, NULL);
        host_wait();
        free(k);
    }
    float **w = snapshot(ebc);
    free(pooled);
    free(dpooled);
    sr_ebc_free(ebc);
    return w;
}

static void test_bit_exact_across_reruns_and_threads(void **state)
{
    float **a = run_adam(2), **b = run_adam(2), **one = run_adam(1), **seven = run_adam(7);
    set_threads(2);
    size_t bytes[2] = {13 * 16 * sizeof(float), 3000 * 5 * sizeof(float)};
    for (int t = 0; t < 2; t++) {
        assert_memory_equal(a[t], b[t], bytes[t]);
        assert_memory_equal(a[t], one[t], bytes[t]);
        assert_memory_equal(a[t], seven[t], bytes[t]);
    }
    snapshot_free(a);
    snapshot_free(b);
    snapshot_free(one);
    snapshot_free(seven);
}

/* An evaluation forward between a forward and its backward leaves the kept
 * ids alone: the update equals the one without it. */
static void test_eval_forward_keeps_training_ids(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    struct sr_ebc *plain = make_ebc(&c, SR_OPTIM_ADAGRAD, 8, 64);
    struct sr_ebc *mixed = make_ebc(&c, SR_OPTIM_ADAGRAD, 8, 64);
    struct tkjt *k = mixed_batch(&c), *k2 = mixed_batch(&c);
    static const int32_t len_eval[8] = {1, 0, 0, 0, 2, 2, 0, 1};
    static const int64_t val_eval[] = {7, 0, 0, 1, 1, 0};
    struct tkjt *ke = tkjt_make(&c, 2, len_eval, val_eval, NULL);
    float pooled[4 * 19], pooled_eval[2 * 19];
    float *dpooled = random_floats(4 * 19, 5, -1.0, 1.0);

    assert_int_equal(loaded_forward(plain, &k->kjt, pooled), SR_OK);
    host_wait();
    sr_ebc_backward(plain, dpooled, 0.5f, 1, NULL);
    host_wait();
    assert_int_equal(loaded_forward(mixed, &k2->kjt, pooled), SR_OK);
    host_wait();
    assert_int_equal(loaded_forward_eval(mixed, &ke->kjt, pooled_eval), SR_OK);
    host_wait();
    check_forward(mixed, &ke->kjt, pooled_eval);
    sr_ebc_backward(mixed, dpooled, 0.5f, 1, NULL);
    host_wait();
    for (int t = 0; t < 3; t++) {
        size_t n = (size_t)c.tables[t].num_embeddings * c.tables[t].embedding_dim;
        assert_memory_equal(HV(sr_ebc_weights(plain, t)), HV(sr_ebc_weights(mixed, t)), n * 4);
        assert_memory_equal(HV(sr_ebc_optim_state(plain, t)), HV(sr_ebc_optim_state(mixed, t)),
                            n * 4);
    }
    free(dpooled);
    free(k);
    free(k2);
    free(ke);
    sr_ebc_free(plain);
    sr_ebc_free(mixed);
}

/* Updates that read lr and step from device memory (sr_ebc_set_update_scalars)
 * when they run: three Adam steps with a different lr each, every value
 * copied to the device block on the stream just before its step and nothing
 * waited for until the end, give the same bits as the same steps with host
 * values. On the deferred device the block is still poisoned when the steps
 * are issued, so an update that read it at issue time would differ. */
static void test_update_reads_device_scalars(void **state)
{
    struct tcfg c;
    mixed_config(&c);
    struct sr_device *dev = sr_device_cpu();
    struct sr_ebc *want = make_ebc(&c, SR_OPTIM_ADAM, 4, 23);
    struct sr_ebc *got = make_ebc(&c, SR_OPTIM_ADAM, 4, 23);
    struct tkjt *k = mixed_batch(&c);
    assert_int_equal(loader_check(&c.cfg, &k->kjt), SR_OK);
    const int D = sr_ebc_out_dim(want);
    float *pooled = sr_dev_alloc(dev, sizeof(float) * 4 * (size_t)D);
    float *dpooled = sr_dev_alloc(dev, sizeof(float) * 4 * (size_t)D);
    float host_dp[4 * 64];
    assert_true(4 * D <= 4 * 64);
    for (int i = 0; i < 4 * D; i++)
        host_dp[i] = (float)((i % 7) - 3) * 0.125f;
    sr_dev_copy(dev, dpooled, host_dp, sizeof(float) * 4 * (size_t)D, NULL);
    static const float lrs[3] = {0.5f, 0.125f, 0.03125f};

    for (int step = 1; step <= 3; step++) {
        assert_int_equal(sr_ebc_forward(want, &k->kjt, pooled, NULL), SR_OK);
        sr_ebc_backward(want, dpooled, lrs[step - 1], step, NULL);
    }

    struct scalars {
        float lr;
        int64_t step;
    } *slots = sr_dev_alloc_host(dev, 3 * sizeof *slots), *block = sr_dev_alloc(dev, sizeof *block);
    sr_dev_memset(dev, block, 0xFF, sizeof *block, NULL);
    sr_ebc_set_update_scalars(got, &block->lr, &block->step);
    for (int step = 1; step <= 3; step++) {
        slots[step - 1] = (struct scalars){lrs[step - 1], step};
        sr_dev_copy(dev, block, &slots[step - 1], sizeof *block, NULL);
        assert_int_equal(sr_ebc_forward(got, &k->kjt, pooled, NULL), SR_OK);
        sr_ebc_backward(got, dpooled, 1e9f, 1000, NULL); /* ignored: the block is read */
    }
    host_wait();

    for (int t = 0; t < c.cfg.num_tables; t++) {
        size_t n = (size_t)c.cfg.tables[t].num_embeddings * c.cfg.tables[t].embedding_dim;
        assert_memory_equal(HV(sr_ebc_weights(got, t)), HV(sr_ebc_weights(want, t)),
                            n * sizeof(float));
    }
    sr_dev_free_host(dev, slots);
    sr_dev_free(dev, block);
    sr_dev_free(dev, pooled);
    sr_dev_free(dev, dpooled);
    free(k);
    sr_ebc_free(want);
    sr_ebc_free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_backward_mixed),
        cmocka_unit_test(test_weighted_sum),
        cmocka_unit_test(test_mean_with_weights_rejected),
        cmocka_unit_test(test_init_matches_counter_rng),
        cmocka_unit_test(test_init_column_piece_matches_whole_rows),
        cmocka_unit_test(test_config_errors_name_the_culprit),
        cmocka_unit_test(test_kjt_errors),
        cmocka_unit_test(test_large_batch_parallel),
        cmocka_unit_test(test_bit_exact_across_reruns_and_threads),
        cmocka_unit_test(test_eval_forward_keeps_training_ids),
        cmocka_unit_test(test_update_reads_device_scalars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
