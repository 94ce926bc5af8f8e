/*
 * Model weights <-> safetensors: a saved model loads into a differently
 * seeded one and makes it equal, under DESIGN.md's names and shapes; a file
 * for another model is refused with the tensor, both shapes and a HINT
 * (embedding rows, MLP widths), as are missing tensors (listed), extra
 * tensors and non-finite values; a refused load leaves the model unchanged.
 * The file records each table's pooling (__metadata__): a model of another
 * pooling is refused naming the table and both poolings, sr_weights_pooling_apply
 * takes or compares them, a file without records loads into any pooling,
 * and malformed records (a value, an unknown or empty table, a table twice)
 * are refused naming the key.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/host_view.h"
#include "helpers/tmpdir.h"

#include "shardrec/alloc.h"
#include "shardrec/dlrm.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"
#include "shardrec/weights_io.h"

#define F 3
#define D 4

struct model {
    struct sr_table_config tables[F];
    char feature_names[F][SR_NAME_MAX];
    int feature_table[F];
    struct sr_dlrm *dlrm;
    struct sr_ebc *ebc;
};

#define setup    sr_test_tmpdir_setup
#define teardown sr_test_tmpdir_teardown
#define path_of  sr_test_path

/* Tables t0..t2 of rows[t] and dim D; bottom MLP 13-h-D, top MLP h-1. */
/* Files in the test directory named like an atomic write's temporary file (or the
 * predictable name of old). */
static int count_temporaries(void)
{
    return sr_test_count_named(".sr-tmp-", ".tmp");
}

/* As model_init, table t pooled by pool[t] (NULL: sum). */
static void model_init_pooled(struct model *m, const int64_t rows[F], int h, uint64_t seed,
                              const enum sr_pooling *pool)
{
    struct sr_ebc_config ec = {.num_tables = F,
                               .tables = m->tables,
                               .num_features = F,
                               .feature_names = m->feature_names,
                               .feature_table = m->feature_table};
    struct sr_dlrm_config dc = {.num_dense = 13,
                                .bot_mlp = {13, h, D},
                                .n_bot = 3,
                                .top_mlp = {h, 1},
                                .n_top = 2,
                                .num_sparse = F,
                                .embedding_dim = D};
    memset(m, 0, sizeof *m);
    for (int t = 0; t < F; t++) {
        snprintf(m->tables[t].name, SR_NAME_MAX, "t%d", t);
        m->tables[t].num_embeddings = rows[t];
        m->tables[t].embedding_dim = D;
        m->tables[t].pooling = pool ? pool[t] : SR_POOLING_SUM;
        snprintf(m->feature_names[t], SR_NAME_MAX, "f%d", t);
        m->feature_table[t] = t;
    }
    if (sr_ebc_init(&m->ebc, sr_device_cpu(), &ec, NULL, 4, 16, seed))
        fail_msg("sr_ebc_init: %s", sr_error_message());
    if (sr_dlrm_init(&m->dlrm, sr_device_cpu(), &dc, 4, seed))
        fail_msg("sr_dlrm_init: %s", sr_error_message());
}

static void model_init(struct model *m, const int64_t rows[F], int h, uint64_t seed)
{
    model_init_pooled(m, rows, h, seed, NULL);
}

static void model_free(struct model *m)
{
    sr_dlrm_free(m->dlrm);
    sr_ebc_free(m->ebc);
}

/* Parameters of a and b equal bit for bit (1) or not (0). */
static int models_equal(struct model *a, struct model *b)
{
    size_t na, nb;
    const float *pa = HV(sr_dlrm_params(a->dlrm, &na)), *pb = HV(sr_dlrm_params(b->dlrm, &nb));
    if (na != nb || memcmp(pa, pb, sizeof(float) * na) != 0)
        return 0;
    for (int t = 0; t < F; t++) {
        size_t bytes = sizeof(float) * (size_t)a->tables[t].num_embeddings * D;
        if (a->tables[t].num_embeddings != b->tables[t].num_embeddings ||
            memcmp(HV(sr_ebc_weights(a->ebc, t)), HV(sr_ebc_weights(b->ebc, t)), bytes) != 0)
            return 0;
    }
    return 1;
}

static void expect_load_error(const char *path, struct model *m, int status, const char *want)
{
    int rc = sr_weights_load(path, m->dlrm, m->ebc);
    if (rc != status)
        fail_msg("status %d (want %d): %s", rc, status, sr_error_message());
    if (!strstr(sr_error_message(), want))
        fail_msg("message lacks \"%s\": %s", want, sr_error_message());
}

static const int64_t rows[F] = {10, 20, 7};

static void test_save_load_round_trip(void **state)
{
    struct model a, b;
    char path[128];
    snprintf(path, sizeof path, "%s", path_of("w.safetensors"));
    model_init(&a, rows, 8, 1);
    model_init(&b, rows, 8, 2);
    assert_false(models_equal(&a, &b));
    assert_int_equal(sr_weights_save(path, a.dlrm, a.ebc), SR_OK);
    assert_int_equal(count_temporaries(), 0);

    /* DESIGN.md's names and shapes */
    struct sr_st_file *f;
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_int_equal(sr_st_count(f), 8 + F);
    assert_int_equal(sr_st_find(f, "emb.t1.weight", NULL, &ndim, shape), SR_OK);
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 20);
    assert_int_equal(shape[1], D);
    assert_int_equal(sr_st_find(f, "bot_mlp.0.weight", NULL, &ndim, shape), SR_OK);
    assert_int_equal(shape[0], 8);
    assert_int_equal(shape[1], 13);
    assert_int_equal(sr_st_find(f, "bot_mlp.1.bias", NULL, &ndim, shape), SR_OK);
    assert_int_equal(ndim, 1);
    assert_int_equal(sr_st_find(f, "top_mlp.0.weight", NULL, &ndim, shape), SR_OK);
    assert_int_equal(shape[1], D + F * (F + 1) / 2);
    assert_int_equal(sr_st_find(f, "top_mlp.1.bias", NULL, &ndim, shape), SR_OK);
    sr_st_close(f);

    assert_int_equal(sr_weights_load(path, b.dlrm, b.ebc), SR_OK);
    assert_true(models_equal(&a, &b));

    /* --save-weights onto a symbolic link: the link is replaced, its file untouched */
    char victim[128], link[128];
    snprintf(victim, sizeof victim, "%s", path_of("victim"));
    snprintf(link, sizeof link, "%s", path_of("link.safetensors"));
    FILE *v = fopen(victim, "w");
    assert_non_null(v);
    fputs("precious", v);
    fclose(v);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(sr_weights_save(link, a.dlrm, a.ebc), SR_OK);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_size, 8);
    assert_int_equal(sr_weights_load(link, b.dlrm, b.ebc), SR_OK);
    assert_int_equal(count_temporaries(), 0);
    model_free(&a);
    model_free(&b);
}

static void test_shape_mismatch(void **state)
{
    struct model a, b, c, ref;
    const int64_t other_rows[F] = {10, 30, 7};
    char path[128];
    snprintf(path, sizeof path, "%s", path_of("shape.safetensors"));
    model_init(&a, rows, 8, 1);
    assert_int_equal(sr_weights_save(path, a.dlrm, a.ebc), SR_OK);

    model_init(&b, other_rows, 8, 2);
    model_init(&ref, other_rows, 8, 2);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "shape.safetensors: tensor emb.t1.weight has shape [20, 4], the model "
                      "needs [30, 4]; HINT: the file was written for a different model");
    assert_true(models_equal(&b, &ref)); /* untouched */

    model_init(&c, rows, 16, 2);
    expect_load_error(path, &c, SR_ERR_DATA,
                      "tensor bot_mlp.0.weight has shape [8, 13], the model needs [16, 13]");
    model_free(&a);
    model_free(&b);
    model_free(&c);
    model_free(&ref);
}

/* Write a's tensors, minus the named ones, plus the extra ones, with the
 * metadata entries given (none: a file of an older version). */
static void write_subset(const char *path, struct model *a, const char *const *drop,
                         const struct sr_st_tensor *extra, int n_extra, int n_meta,
                         const struct sr_st_meta *meta)
{
    struct sr_st_tensor t[32] = {{0}};
    int n = 0;
    char names[F][32];
    const float *params = HV(sr_dlrm_params(a->dlrm, NULL)); /* the host's view: 1 + F in all */
    for (int i = 0; i < sr_dlrm_num_tensors(a->dlrm); i++) {
        float *data;
        sr_dlrm_tensor(a->dlrm, i, &t[n].name, &t[n].ndim, t[n].shape, &data);
        t[n].data = params + sr_dlrm_tensor_offset(a->dlrm, i);
        n++;
    }
    for (int k = 0; k < F; k++) {
        snprintf(names[k], sizeof names[k], "emb.t%d.weight", k);
        t[n] = (struct sr_st_tensor){.name = names[k],
                                     .ndim = 2,
                                     .shape = {rows[k], D},
                                     .data = HV(sr_ebc_weights(a->ebc, k))};
        n++;
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int dropped = 0;
        for (int j = 0; drop && drop[j]; j++)
            dropped |= strcmp(t[i].name, drop[j]) == 0;
        if (!dropped)
            t[kept++] = t[i];
    }
    for (int i = 0; i < n_extra; i++)
        t[kept++] = extra[i];
    assert_int_equal(sr_st_write_meta(path, kept, t, n_meta, meta), SR_OK);
}

static void test_missing_and_extra(void **state)
{
    struct model a, b;
    const char *drop[] = {"emb.t2.weight", "top_mlp.1.bias", NULL};
    float junk[2] = {0};
    struct sr_st_tensor extra = {.name = "emb_l.0.weight", .ndim = 1, .shape = {2}, .data = junk};
    char path[128];
    snprintf(path, sizeof path, "%s", path_of("subset.safetensors"));
    model_init(&a, rows, 8, 1);
    model_init(&b, rows, 8, 2);

    write_subset(path, &a, drop, NULL, 0, 0, NULL);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "2 tensors the model needs are missing: top_mlp.1.bias, emb.t2.weight");

    write_subset(path, &a, NULL, &extra, 1, 0, NULL);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "1 tensor is not a parameter of this model: emb_l.0.weight; HINT:");
    assert_non_null(strstr(sr_error_message(), "tools/torch_dlrm.py convert"));

    /* reference names: everything missing, everything extra, and the way out */
    struct sr_st_tensor ref_named = {
        .name = "bot_l.0.weight", .ndim = 2, .shape = {1, 2}, .data = junk};
    assert_int_equal(sr_st_write(path, 1, &ref_named), SR_OK);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "11 tensors the model needs are missing (bot_mlp.0.weight, bot_mlp.0.bias, "
                      "bot_mlp.1.weight, bot_mlp.1.bias, top_mlp.0.weight, ...) and the file holds "
                      "1 tensor this model does not have (bot_l.0.weight); HINT:");
    assert_non_null(strstr(sr_error_message(), "convert --to shardrec"));

    /* the loaders' checks come before any copy */
    struct model ref;
    model_init(&ref, rows, 8, 2);
    assert_true(models_equal(&b, &ref));
    model_free(&ref);
    model_free(&a);
    model_free(&b);
}

static void test_non_finite(void **state)
{
    struct model a, b;
    char path[128];
    snprintf(path, sizeof path, "%s", path_of("nan.safetensors"));
    model_init(&a, rows, 8, 1);
    model_init(&b, rows, 8, 2);
    const float nan = NAN;
    sr_test_host_put(sr_ebc_weights(a.ebc, 0) + 5, &nan, sizeof nan);
    assert_int_equal(sr_weights_save(path, a.dlrm, a.ebc), SR_OK);
    expect_load_error(path, &b, SR_ERR_NUMERIC, "tensor emb.t0.weight holds nan at flat index 5");
    expect_load_error(path_of("absent.safetensors"), &b, SR_ERR_IO, "cannot open");
    model_free(&a);
    model_free(&b);
}

/* ---- the pooling a file records -------------------------------------------------------- */

static const enum sr_pooling mixed[F] = {SR_POOLING_MEAN, SR_POOLING_SUM, SR_POOLING_MEAN};

static void test_pooling_recorded(void **state)
{
    struct model a, b, c, ref;
    struct sr_st_file *f;
    struct sr_weights_pooling *rec;
    int n, recorded;
    char path[128], old[128];
    snprintf(path, sizeof path, "%s", path_of("pool.safetensors"));
    snprintf(old, sizeof old, "%s", path_of("old.safetensors"));
    model_init_pooled(&a, rows, 8, 1, mixed);
    assert_int_equal(sr_weights_save(path, a.dlrm, a.ebc), SR_OK);
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_int_equal(sr_weights_pooling_read(f, &rec, &n), SR_OK);
    assert_int_equal(n, F);
    for (int t = 0; t < F; t++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", t);
        assert_string_equal(rec[t].table, name); /* keys sorted: t0, t1, t2 */
        assert_int_equal(rec[t].pooling, mixed[t]);
    }
    sr_free(rec);
    sr_st_close(f);

    model_init_pooled(&b, rows, 8, 2, mixed); /* the same pooling: loads */
    assert_int_equal(sr_weights_load(path, b.dlrm, b.ebc), SR_OK);
    assert_true(models_equal(&a, &b));

    model_init(&c, rows, 8, 2); /* all sum: refused, untouched */
    model_init(&ref, rows, 8, 2);
    expect_load_error(path, &c, SR_ERR_DATA,
                      "pool.safetensors: table t0 has pooling mean in the file (__metadata__ "
                      "\"shardrec.emb.t0.pooling\"), sum in this job; HINT: give each table the "
                      "pooling the file records");
    assert_true(models_equal(&c, &ref));

    /* eval's adoption, and its comparison when the job gave a pooling */
    struct sr_table_config tables[F];
    memcpy(tables, c.tables, sizeof tables);
    assert_int_equal(sr_weights_pooling_apply(path, tables, F, 0, &recorded), SR_ERR_DATA);
    assert_non_null(strstr(sr_error_message(), "table t0 has pooling mean in the file"));
    assert_int_equal(tables[0].pooling, SR_POOLING_SUM);
    assert_int_equal(sr_weights_pooling_apply(path, tables, F, 1, &recorded), SR_OK);
    assert_int_equal(recorded, F);
    for (int t = 0; t < F; t++)
        assert_int_equal(tables[t].pooling, mixed[t]);
    assert_int_equal(sr_weights_pooling_apply(path, tables, F, 0, NULL), SR_OK);

    /* a file without records (an older version, tools/torch_dlrm.py) loads into any pooling */
    write_subset(old, &a, NULL, NULL, 0, 0, NULL);
    assert_int_equal(sr_weights_load(old, c.dlrm, c.ebc), SR_OK);
    assert_true(models_equal(&a, &c));
    assert_int_equal(sr_weights_pooling_apply(old, tables, F, 1, &recorded), SR_OK);
    assert_int_equal(recorded, 0);
    assert_int_equal(tables[0].pooling, SR_POOLING_MEAN); /* kept */
    model_free(&a);
    model_free(&b);
    model_free(&c);
    model_free(&ref);
}

static void test_pooling_malformed(void **state)
{
    struct model a, b;
    struct sr_table_config tables[F];
    char path[128];
    snprintf(path, sizeof path, "%s", path_of("badpool.safetensors"));
    model_init(&a, rows, 8, 1);
    model_init(&b, rows, 8, 2);
    memcpy(tables, b.tables, sizeof tables);

    struct sr_st_meta value = {"shardrec.emb.t1.pooling", "max"};
    write_subset(path, &a, NULL, NULL, 0, 1, &value);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "badpool.safetensors: __metadata__ \"shardrec.emb.t1.pooling\" is \"max\", "
                      "not \"sum\" or \"mean\"; HINT: the file's header is damaged");
    assert_int_equal(sr_weights_pooling_apply(path, tables, F, 1, NULL), SR_ERR_DATA);

    /* a table the tensors do not hold: refused on loading, left to it by apply */
    struct sr_st_meta unknown = {"shardrec.emb.t9.pooling", "sum"};
    write_subset(path, &a, NULL, NULL, 0, 1, &unknown);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "__metadata__ \"shardrec.emb.t9.pooling\" records a table the file's "
                      "tensors do not hold");
    assert_int_equal(sr_weights_pooling_apply(path, tables, F, 1, NULL), SR_OK);

    struct sr_st_meta empty = {"shardrec.emb..pooling", "sum"};
    write_subset(path, &a, NULL, NULL, 0, 1, &empty);
    expect_load_error(path, &b, SR_ERR_DATA,
                      "__metadata__ key \"shardrec.emb..pooling\" names no table");

    /* other keys are not records */
    struct sr_st_meta other[] = {{"shardrec.emb.t0.note", "x"}, {"shardrec.pooling", "max"}};
    write_subset(path, &a, NULL, NULL, 0, 2, other);
    assert_int_equal(sr_weights_load(path, b.dlrm, b.ebc), SR_OK);

    /* a table recorded twice (the writer refuses duplicate keys: a hand-made header) */
    const char *json = "{\"__metadata__\":{\"shardrec.emb.t0.pooling\":\"sum\","
                       "\"shardrec.emb.t0.pooling\":\"mean\"}}";
    uint64_t hlen = strlen(json);
    char buf[256];
    struct sr_st_file *f;
    struct sr_weights_pooling *rec = (struct sr_weights_pooling *)1;
    int n = -1;
    memcpy(buf, &hlen, 8);
    memcpy(buf + 8, json, hlen);
    assert_int_equal(sr_st_open_memory(&f, buf, 8 + hlen, "twice"), SR_OK);
    assert_int_equal(sr_weights_pooling_read(f, &rec, &n), SR_ERR_DATA);
    assert_non_null(strstr(sr_error_message(), "twice: __metadata__ \"shardrec.emb.t0.pooling\" "
                                               "appears twice"));
    assert_null(rec);
    assert_int_equal(n, 0);
    sr_st_close(f);
    model_free(&a);
    model_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_save_load_round_trip),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_missing_and_extra),
        cmocka_unit_test(test_non_finite),
        cmocka_unit_test(test_pooling_recorded),
        cmocka_unit_test(test_pooling_malformed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
