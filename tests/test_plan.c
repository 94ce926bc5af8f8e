/*
 * Sharding plans without communication: the row blocks of rw and twrw
 * (tables not divisible by W, one-row tables, empty shards), cw pieces, tw
 * balancing, the default plan, validation errors that name the table and the
 * fault, JSON round trips (full and short forms, files), JSON errors (integers
 * that do not fit are errors, never wrapped), the plan hash, and hybrid
 * tables (hot rows: round trip, hash, sorting, errors naming the table).
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

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/plan.h"

struct tcfg {
    struct sr_table_config tables[4];
    char feature_names[4][SR_NAME_MAX];
    int feature_table[4];
    struct sr_ebc_config cfg;
};

/* a: 10 x 4, b: 1 x 8, c: 5000 x 6, d: 70000 x 16; one feature each. */
static void config(struct tcfg *c)
{
    static const int64_t rows[4] = {10, 1, 5000, 70000};
    static const int dims[4] = {4, 8, 6, 16};
    memset(c, 0, sizeof *c);
    for (int t = 0; t < 4; t++) {
        snprintf(c->tables[t].name, SR_NAME_MAX, "%c", 'a' + t);
        c->tables[t].num_embeddings = rows[t];
        c->tables[t].embedding_dim = dims[t];
        snprintf(c->feature_names[t], SR_NAME_MAX, "f%d", t);
        c->feature_table[t] = t;
    }
    c->cfg = (struct sr_ebc_config){.num_tables = 4,
                                    .tables = c->tables,
                                    .num_features = 4,
                                    .feature_names = c->feature_names,
                                    .feature_table = c->feature_table};
}

static void expect_shard(const struct sr_shard *s, int rank, int64_t off, int64_t rows, int coff,
                         int cols)
{
    assert_int_equal(s->rank, rank);
    assert_int_equal(s->row_offset, off);
    assert_int_equal(s->rows, rows);
    assert_int_equal(s->col_offset, coff);
    assert_int_equal(s->cols, cols);
}

static void test_names(void **state)
{
    enum sr_sharding_type t;
    for (int k = 0; k < SR_SHARDING_TYPE_COUNT; k++) {
        assert_int_equal(sr_sharding_type_parse(sr_sharding_type_name(k), &t), SR_OK);
        assert_int_equal(t, k);
    }
    assert_int_equal(sr_sharding_type_parse("table_row_wise", &t), SR_OK);
    assert_int_equal(t, SR_SHARDING_TYPE_TABLE_ROW_WISE);
    assert_int_equal(sr_sharding_type_parse("grid", &t), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "twrw"));
}

static void test_row_blocks(void **state)
{
    struct tcfg c;
    config(&c);
    struct sr_plan *p;
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_ROW_WISE, 4, 1), SR_OK);
    /* 10 rows on 4 ranks: blocks of 3, the last holds 1 */
    assert_int_equal(p->tables[0].num_shards, 4);
    expect_shard(&p->tables[0].shards[0], 0, 0, 3, 0, 4);
    expect_shard(&p->tables[0].shards[2], 2, 6, 3, 0, 4);
    expect_shard(&p->tables[0].shards[3], 3, 9, 1, 0, 4);
    /* one row: rank 0 holds it, the others are empty */
    expect_shard(&p->tables[1].shards[0], 0, 0, 1, 0, 8);
    expect_shard(&p->tables[1].shards[1], 1, 1, 0, 0, 8);
    expect_shard(&p->tables[1].shards[3], 3, 1, 0, 0, 8);
    assert_int_equal(sr_plan_validate(p, &c.cfg, 4, 1), SR_OK);
    sr_plan_free(p);
    /* 3 ranks, 10 rows: 4, 4, 2 */
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_ROW_WISE, 3, 1), SR_OK);
    expect_shard(&p->tables[0].shards[2], 2, 8, 2, 0, 4);
    sr_plan_free(p);
    assert_int_equal(sr_plan_block_rows(10, 4), 3);
    assert_int_equal(sr_plan_block_rows(1, 4), 1);
}

static void test_twrw_blocks(void **state)
{
    struct tcfg c;
    config(&c);
    struct sr_plan *p;
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_TABLE_ROW_WISE, 4, 2), SR_OK);
    /* largest (d) on node 0, then c on node 1, then a, b by load */
    assert_int_equal(p->tables[3].num_shards, 2);
    expect_shard(&p->tables[3].shards[0], 0, 0, 35000, 0, 16);
    expect_shard(&p->tables[3].shards[1], 1, 35000, 35000, 0, 16);
    expect_shard(&p->tables[2].shards[0], 2, 0, 2500, 0, 6);
    expect_shard(&p->tables[2].shards[1], 3, 2500, 2500, 0, 6);
    expect_shard(&p->tables[1].shards[0], 2, 0, 1, 0, 8);
    expect_shard(&p->tables[1].shards[1], 3, 1, 0, 0, 8);
    assert_int_equal(sr_plan_validate(p, &c.cfg, 4, 2), SR_OK);
    sr_plan_free(p);
}

static void test_tw_cw(void **state)
{
    struct tcfg c;
    config(&c);
    struct sr_plan *p;
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_TABLE_WISE, 2, 1), SR_OK);
    assert_int_equal(p->tables[3].shards[0].rank, 0); /* largest first */
    assert_int_equal(p->tables[2].shards[0].rank, 1);
    assert_int_equal(p->tables[0].shards[0].rank, 1);
    sr_plan_free(p);
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_COLUMN_WISE, 4, 1), SR_OK);
    assert_int_equal(p->tables[2].num_shards, 3); /* D = 6: largest divisor <= 4 */
    expect_shard(&p->tables[2].shards[1], p->tables[2].shards[1].rank, 0, 5000, 2, 2);
    assert_int_equal(p->tables[3].num_shards, 4);
    assert_int_equal(p->tables[1].num_shards, 4);
    expect_shard(&p->tables[1].shards[3], p->tables[1].shards[3].rank, 0, 1, 6, 2);
    assert_int_equal(sr_plan_validate(p, &c.cfg, 4, 1), SR_OK);
    sr_plan_free(p);
}

static void test_default(void **state)
{
    struct tcfg c;
    config(&c);
    struct sr_plan *p;
    assert_int_equal(sr_plan_default(&p, &c.cfg, 1, 1), SR_OK);
    for (int t = 0; t < 4; t++) {
        assert_int_equal(p->tables[t].type, SR_SHARDING_TYPE_TABLE_WISE);
        assert_int_equal(p->tables[t].shards[0].rank, 0);
    }
    sr_plan_free(p);
    assert_int_equal(sr_plan_default(&p, &c.cfg, 4, 2), SR_OK);
    assert_int_equal(p->tables[0].type, SR_SHARDING_TYPE_DATA_PARALLEL);
    assert_int_equal(p->tables[0].num_shards, 4);
    assert_int_equal(p->tables[1].type, SR_SHARDING_TYPE_DATA_PARALLEL);
    assert_int_equal(p->tables[2].type, SR_SHARDING_TYPE_TABLE_WISE);
    assert_int_equal(p->tables[3].type, SR_SHARDING_TYPE_TABLE_WISE);
    assert_int_not_equal(p->tables[2].shards[0].rank, p->tables[3].shards[0].rank);
    assert_int_equal(sr_plan_validate(p, &c.cfg, 4, 2), SR_OK);
    sr_plan_free(p);
    assert_int_equal(sr_plan_default(&p, &c.cfg, 3, 2), SR_ERR_INVALID_ARG);
    assert_null(p);
}

static void expect_invalid(const struct sr_plan *p, const struct tcfg *c, int W, int L,
                           const char *a, const char *b)
{
    assert_int_equal(sr_plan_validate(p, &c->cfg, W, L), SR_ERR_INVALID_ARG);
    const char *m = sr_error_message();
    if (!strstr(m, a) || (b && !strstr(m, b)))
        fail_msg("message '%s' lacks '%s' / '%s'", m, a, b ? b : "");
}

static void test_validate(void **state)
{
    struct tcfg c;
    config(&c);
    struct sr_plan *p;
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_ROW_WISE, 4, 2), SR_OK);
    expect_invalid(p, &c, 2, 1, "made for 4 ranks", NULL);
    p->tables[0].shards[1].rank = 7;
    expect_invalid(p, &c, 4, 2, "'a'", "out of range");
    p->tables[0].shards[1].rank = 1;
    p->tables[0].shards[1].rows = 2; /* row 5 no longer covered */
    expect_invalid(p, &c, 4, 2, "'a'", "row blocks");
    p->tables[0].shards[1].rows = 3;
    p->tables[0].shards[1].rank = 2; /* shard 1 must sit on rank 1 */
    expect_invalid(p, &c, 4, 2, "'a'", "shard 1");
    p->tables[0].shards[1].rank = 1;
    assert_int_equal(sr_plan_validate(p, &c.cfg, 4, 2), SR_OK);
    p->tables[2].num_shards = 3;
    expect_invalid(p, &c, 4, 2, "'c'", "needs 4");
    p->tables[2].num_shards = 4;
    strcpy(p->tables[3].name, "x");
    expect_invalid(p, &c, 4, 2, "'x'", "'d'");
    sr_plan_free(p);

    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_COLUMN_WISE, 4, 1), SR_OK);
    p->tables[2].shards[1].cols = 3; /* unequal pieces */
    expect_invalid(p, &c, 4, 1, "'c'", "cover");
    sr_plan_free(p);
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_TABLE_ROW_WISE, 4, 2), SR_OK);
    p->tables[0].shards[0].rank = 1; /* twrw shards start at a node's first rank */
    expect_invalid(p, &c, 4, 2, "'a'", "twrw");
    sr_plan_free(p);
}

static void test_json_round_trip(void **state)
{
    struct tcfg c;
    config(&c);
    enum sr_sharding_type types[] = {SR_SHARDING_TYPE_DATA_PARALLEL, SR_SHARDING_TYPE_TABLE_WISE,
                                     SR_SHARDING_TYPE_ROW_WISE, SR_SHARDING_TYPE_COLUMN_WISE,
                                     SR_SHARDING_TYPE_TABLE_ROW_WISE};
    for (int k = 0; k < 5; k++) {
        struct sr_plan *p, *q;
        assert_int_equal(sr_plan_uniform(&p, &c.cfg, types[k], 4, 2), SR_OK);
        char *text = sr_plan_to_json(p);
        assert_int_equal(sr_plan_from_json(&q, text, "mem", &c.cfg, 4, 2), SR_OK);
        assert_true(sr_plan_hash(p) == sr_plan_hash(q));
        char *again = sr_plan_to_json(q);
        assert_string_equal(text, again);
        sr_free(text), sr_free(again);
        sr_plan_free(p), sr_plan_free(q);
    }
}

static void test_json_short_forms(void **state)
{
    struct tcfg c;
    config(&c);
    const char *text = "{\"tables\": ["
                       "{\"name\": \"d\", \"sharding\": \"twrw\", \"node\": 1},"
                       "{\"name\": \"a\", \"sharding\": \"dp\"},"
                       "{\"name\": \"b\", \"sharding\": \"tw\", \"rank\": 3},"
                       "{\"name\": \"c\", \"sharding\": \"cw\", \"ranks\": [2, 0, 1]}]}";
    struct sr_plan *p;
    assert_int_equal(sr_plan_from_json(&p, text, "short", &c.cfg, 4, 2), SR_OK);
    assert_int_equal(p->tables[0].type, SR_SHARDING_TYPE_DATA_PARALLEL);
    expect_shard(&p->tables[1].shards[0], 3, 0, 1, 0, 8);
    expect_shard(&p->tables[2].shards[0], 2, 0, 5000, 0, 2);
    expect_shard(&p->tables[2].shards[2], 1, 0, 5000, 4, 2);
    expect_shard(&p->tables[3].shards[1], 3, 35000, 35000, 0, 16);

    char path[] = "/tmp/shardrec_plan_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sr_plan_write(p, path), SR_OK);
    struct sr_plan *q;
    assert_int_equal(sr_plan_read(&q, path, &c.cfg, 4, 2), SR_OK);
    assert_true(sr_plan_hash(p) == sr_plan_hash(q));
    q->tables[1].shards[0].rank = 2;
    assert_true(sr_plan_hash(p) != sr_plan_hash(q));
    sr_plan_free(q);
    unlink(path);
    assert_int_equal(sr_plan_read(&q, path, &c.cfg, 4, 2), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), path));
    sr_plan_free(p);
}

static void expect_json_error(const struct tcfg *c, const char *text, const char *what)
{
    struct sr_plan *p;
    assert_int_equal(sr_plan_from_json(&p, text, "bad.json", &c->cfg, 4, 2), SR_ERR_INVALID_ARG);
    assert_null(p);
    const char *m = sr_error_message();
    if (!strstr(m, what))
        fail_msg("message '%s' lacks '%s'", m, what);
}

static void test_json_errors(void **state)
{
    struct tcfg c;
    config(&c);
    expect_json_error(&c, "{\"tables\": [", "not valid JSON");
    expect_json_error(&c, "[]", "\"tables\"");
    expect_json_error(&c, "{\"tables\": [{\"name\": \"a\", \"sharding\": \"dp\"}]}",
                      "no entry for table 'b'");
    expect_json_error(&c, "{\"tables\": [{\"name\": \"zz\", \"sharding\": \"dp\"}]}",
                      "'zz' is not in the model");
    expect_json_error(&c,
                      "{\"tables\": [{\"name\": \"a\", \"sharding\": \"dp\"},"
                      "{\"name\": \"a\", \"sharding\": \"dp\"}, {\"name\": \"b\", \"sharding\": "
                      "\"dp\"}, {\"name\": \"c\", \"sharding\": \"dp\"}, {\"name\": \"d\", "
                      "\"sharding\": \"dp\"}]}",
                      "appears twice");
    expect_json_error(&c,
                      "{\"tables\": [{\"name\": \"a\", \"sharding\": \"grid\"}, {\"name\": \"b\", "
                      "\"sharding\": \"dp\"}, {\"name\": \"c\", \"sharding\": \"dp\"}, "
                      "{\"name\": \"d\", \"sharding\": \"dp\"}]}",
                      "unknown sharding type 'grid'");
    expect_json_error(&c,
                      "{\"tables\": [{\"name\": \"a\", \"sharding\": \"tw\", \"rank\": 9}, "
                      "{\"name\": \"b\", \"sharding\": \"dp\"}, {\"name\": \"c\", \"sharding\": "
                      "\"dp\"}, {\"name\": \"d\", \"sharding\": \"dp\"}]}",
                      "\"rank\"");
    expect_json_error(&c,
                      "{\"world_size\": 8, \"tables\": [{\"name\": \"a\", \"sharding\": \"dp\"}, "
                      "{\"name\": \"b\", \"sharding\": \"dp\"}, {\"name\": \"c\", \"sharding\": "
                      "\"dp\"}, {\"name\": \"d\", \"sharding\": \"dp\"}]}",
                      "made for 8 ranks");
    expect_json_error(&c,
                      "{\"tables\": [{\"name\": \"a\", \"sharding\": \"rw\", \"shards\": "
                      "[{\"rank\": 0, \"rows\": 10}]}, {\"name\": \"b\", \"sharding\": \"dp\"}, "
                      "{\"name\": \"c\", \"sharding\": \"dp\"}, {\"name\": \"d\", \"sharding\": "
                      "\"dp\"}]}",
                      "'a' (rw) has 1 shards but needs 4");
}

/* Tables b, c and d as dp, closing the array, after a case's table 'a'. */
static const char *const other_tables = ", {\"name\": \"b\", \"sharding\": \"dp\"}, {\"name\": "
                                        "\"c\", \"sharding\": \"dp\"}, {\"name\": \"d\", "
                                        "\"sharding\": \"dp\"}]}";

struct table_case {
    const char *table, *what;
};

/* Each case's table 'a' with the others must fail with a message holding `what`. */
static void expect_table_errors(const struct tcfg *c, const struct table_case *cases, size_t n)
{
    char text[512];
    for (size_t i = 0; i < n; i++) {
        snprintf(text, sizeof text, "{\"tables\": [%s%s", cases[i].table, other_tables);
        expect_json_error(c, text, cases[i].what);
    }
}

/* Integers that do not fit their field are errors naming the key and the
 * value, never wrapped: a rank of 2^32 used to become rank 0. */
static void test_json_integers_do_not_wrap(void **state)
{
    struct tcfg c;
    config(&c);
    static const struct table_case cases[] = {
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": 4294967296}]}",
         "\"rank\" is 4294967296"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": -4294967296}]}",
         "\"rank\" is -4294967296"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": 1.5}]}",
         "\"rank\" is 1.5"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"rank\": 4294967296}", "\"rank\""},
        {"{\"name\": \"a\", \"sharding\": \"cw\", \"ranks\": [4294967297, 0]}", "\"ranks\""},
        {"{\"name\": \"a\", \"sharding\": \"cw\", \"ranks\": [1e300, 0]}", "\"ranks\""},
        {"{\"name\": \"a\", \"sharding\": \"cw\", \"ranks\": [0.5, 0]}", "\"ranks\""},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": 0, \"cols\": "
         "4294967300}]}",
         "\"cols\""},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": 0, \"row_offset\": "
         "1e300}]}",
         "\"row_offset\""},
        {"{\"name\": \"a\", \"sharding\": \"twrw\", \"node\": 4294967297}", "\"node\""},
    };
    expect_table_errors(&c, cases, sizeof cases / sizeof cases[0]);
    expect_json_error(&c, "{\"world_size\": 4294967300, \"tables\": []}", "\"world_size\"");
    expect_json_error(&c, "{\"local_size\": -1, \"tables\": []}", "\"local_size\"");
}

/* Keys are checked strictly: a misspelt key, a key given twice or a
 * placement key the table's form does not read is an error naming the table
 * and the key, never a default taken in silence (a misspelt "shards" used to
 * give the type's default shards). */
static void test_json_unknown_keys(void **state)
{
    struct tcfg c;
    config(&c);
    static const struct table_case cases[] = {
        {"{\"name\": \"a\", \"sharding\": \"rw\", \"shard\": [{\"rank\": 0}]}",
         "table 'a': key \"shard\" is unknown; HINT: did you mean \"shards\"?"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"rank\": 1, \"rank\": 2}",
         "table 'a': key \"rank\" is given twice"},
        {"{\"name\": \"a\", \"sharding\": \"rw\", \"rank\": 1}",
         "table 'a': key \"rank\" does not apply: a rw table takes \"shards\" or nothing"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"node\": 1}",
         "key \"node\" does not apply: a tw table takes \"rank\" or \"shards\""},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"rank\": 1, \"shards\": [{\"rank\": 0}]}",
         "key \"rank\" does not apply: a tw table that lists its \"shards\""},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": 0, \"row_ofset\": "
         "5}]}",
         "table 'a': shards[0]: key \"row_ofset\" is unknown; HINT: did you mean \"row_offset\"?"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"shards\": [{\"rank\": 0, \"cols\": 8, "
         "\"cols\": 8}]}",
         "shards[0]: key \"cols\" is given twice"},
    };
    expect_table_errors(&c, cases, sizeof cases / sizeof cases[0]);
    char text[512];
    snprintf(text, sizeof text, "{\"world_sise\": 4, \"tables\": [%s%s",
             "{\"name\": \"a\", \"sharding\": \"dp\"}", other_tables);
    expect_json_error(&c, text, "key \"world_sise\" is unknown; HINT: did you mean \"world_size\"?");
    snprintf(text, sizeof text, "{\"tables\": [%s%s", "{\"name\": \"a\", \"sharding\": \"dp\"}",
             other_tables);
    struct sr_plan *p;
    assert_int_equal(sr_plan_from_json(&p, text, "ok.json", &c.cfg, 4, 2), SR_OK);
    sr_plan_free(p);
}

/* As strict as the user guide says (issue 19, item 5): nothing after the
 * object, no NUL in a name (raw, or \u0000 that cut "a\u0000x" to "a"), a
 * value of the wrong type named as such (not "lacks"), no misleading hint
 * for an unrelated key; a file that is no regular file (/dev/zero) is
 * refused, never read without end. */
static void test_json_strict_text(void **state)
{
    struct tcfg c;
    config(&c);
    char text[512];
    snprintf(text, sizeof text, "{\"tables\": [%s%s x", "{\"name\": \"a\", \"sharding\": \"dp\"}",
             other_tables);
    expect_json_error(&c, text, "text after the JSON object");
    snprintf(text, sizeof text, "{\"tables\": [%s%s  \n", "{\"name\": \"a\", \"sharding\": \"dp\"}",
             other_tables);
    struct sr_plan *p;
    assert_int_equal(sr_plan_from_json(&p, text, "ok.json", &c.cfg, 4, 2), SR_OK);
    sr_plan_free(p);
    static const struct table_case cases[] = {
        {"{\"name\": \"a\\u0000x\", \"sharding\": \"dp\"}", "\\u0000"},
        {"{\"name\": \"a\", \"sharding\": 5}",
         "table 'a': \"sharding\" is a number; it must be a string"},
        {"{\"name\": 5, \"sharding\": \"dp\"}", "\"name\" is a number; it must be a string"},
        {"{\"name\": \"a\", \"sharding\": \"tw\", \"rank\": \"1\"}", "\"rank\" is a string"},
        {"{\"name\": \"a\", \"sharding\": \"dp\", \"trace\": 1}",
         "key \"trace\" is unknown; HINT: the known keys are name, sharding, shards, rank"},
    };
    expect_table_errors(&c, cases, sizeof cases / sizeof cases[0]);
    /* a raw NUL byte in a file: the text would have ended there */
    char path[] = "/tmp/shardrec_plan_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    snprintf(text, sizeof text, "{\"tables\": [%s%s", "{\"name\": \"a\", \"sharding\": \"dp\"}",
             other_tables);
    assert_int_equal(write(fd, text, strlen(text) + 1), (ssize_t)strlen(text) + 1);
    close(fd);
    assert_int_equal(sr_plan_read(&p, path, &c.cfg, 4, 2), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "a NUL byte at offset"));
    unlink(path);
    assert_int_equal(sr_plan_read(&p, "/dev/zero", &c.cfg, 4, 2), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "not a regular file"));
}

/* Hybrid tables: rw shards plus sorted hot rows; the JSON round trip, the
 * hash, sr_plan_set_hybrid, and errors that name the table. */
static void test_hybrid(void **state)
{
    struct tcfg c;
    config(&c);
    const char *text =
        "{\"tables\": [{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [1, 4, 9]},"
        " {\"name\": \"b\", \"sharding\": \"hybrid\", \"hot\": []},"
        " {\"name\": \"c\", \"sharding\": \"rw\"},"
        " {\"name\": \"d\", \"sharding\": \"tw\", \"rank\": 1}]}";
    struct sr_plan *p, *q;
    assert_int_equal(sr_plan_from_json(&p, text, "t", &c.cfg, 3, 1), SR_OK);
    assert_int_equal(p->tables[0].type, SR_SHARDING_TYPE_HYBRID);
    assert_int_equal(p->tables[0].num_shards, 3);
    expect_shard(&p->tables[0].shards[1], 1, 4, 4, 0, 4); /* rw's blocks of ceil(10/3) */
    assert_int_equal(p->tables[0].num_hot, 3);
    assert_int_equal(p->tables[0].hot[2], 9);
    assert_int_equal(p->tables[1].num_hot, 0);
    char *json = sr_plan_to_json(p);
    assert_non_null(strstr(json, "\"hot\""));
    assert_int_equal(sr_plan_from_json(&q, json, "round trip", &c.cfg, 3, 1), SR_OK);
    assert_true(sr_plan_hash(p) == sr_plan_hash(q));
    assert_int_equal(q->tables[0].num_hot, 3);
    assert_memory_equal(q->tables[0].hot, p->tables[0].hot, 3 * sizeof(int64_t));
    sr_free(json);
    /* another hot row: another plan */
    int64_t other[3] = {9, 1, 5}, dup[4] = {7, 7, 0, 3};
    assert_int_equal(sr_plan_set_hybrid(q, &c.cfg, 0, other, 3), SR_OK);
    assert_int_equal(q->tables[0].hot[1], 5); /* sorted */
    assert_true(sr_plan_hash(p) != sr_plan_hash(q));
    assert_int_equal(sr_plan_set_hybrid(q, &c.cfg, 0, dup, 4), SR_OK);
    assert_int_equal(q->tables[0].num_hot, 3); /* deduplicated */
    assert_int_equal(sr_plan_validate(q, &c.cfg, 3, 1), SR_OK);
    other[0] = 10;
    assert_int_equal(sr_plan_set_hybrid(q, &c.cfg, 0, other, 3), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "table 'a'"));
    /* validation of hot rows set by hand */
    q->tables[0].hot[1] = q->tables[0].hot[0];
    assert_int_equal(sr_plan_validate(q, &c.cfg, 3, 1), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "table 'a' (hybrid): hot[1] = 0 repeats"));
    sr_plan_free(p);
    sr_plan_free(q);
    /* a uniform plan cannot be hybrid: it does not know the hot rows */
    assert_int_equal(sr_plan_uniform(&p, &c.cfg, SR_SHARDING_TYPE_HYBRID, 2, 1),
                     SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "hot rows"));
}

static void test_hybrid_json_errors(void **state)
{
    struct tcfg c;
    config(&c);
    const char *rest = ", {\"name\": \"b\", \"sharding\": \"dp\"}, {\"name\": \"c\", \"sharding\": "
                       "\"rw\"}, {\"name\": \"d\", \"sharding\": \"rw\"}]}";
    static const char *const cases[][2] = {
        {"{\"name\": \"a\", \"sharding\": \"hybrid\"", "table 'a' (hybrid) needs \"hot\""},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": 3",
         "table 'a' (hybrid) needs \"hot\""},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [1, 10]",
         "table 'a' (hybrid): \"hot\" entry 1 must be a row in [0, 10)"},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [-1]",
         "table 'a' (hybrid): \"hot\" entry 0 must be a row"},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [2.5]",
         "table 'a' (hybrid): \"hot\" entry 0 must be a row"},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [3, 3]",
         "table 'a' (hybrid): hot[1] = 3 repeats hot[0] = 3"},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [4, 3]",
         "table 'a' (hybrid): hot[1] = 3 is below hot[0] = 4"},
        {"{\"name\": \"a\", \"sharding\": \"rw\", \"hot\": [1]",
         "table 'a': key \"hot\" does not apply: only a hybrid table has hot rows"},
        {"{\"name\": \"a\", \"sharding\": \"hybrid\", \"hot\": [1], \"rank\": 0",
         "key \"rank\" does not apply"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "{\"tables\": [%s}%s", cases[i][0], rest);
        expect_json_error(&c, text, cases[i][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_row_blocks),
        cmocka_unit_test(test_twrw_blocks),
        cmocka_unit_test(test_tw_cw),
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_short_forms),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_json_integers_do_not_wrap),
        cmocka_unit_test(test_json_unknown_keys),
        cmocka_unit_test(test_json_strict_text),
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_hybrid_json_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
