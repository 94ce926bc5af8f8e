/*
 * The synthetic generator: samples are a function of (seed, index) whatever
 * slice or thread count draws them; ids stay in range; Zipf ranks follow the
 * power law and the rank -> row bijection is one and spreads the hot rows; the
 * teacher's sparse share and ceiling/floor gap hold on the default job; the TSV
 * writer round-trips exactly through an independent parser; bad configs and
 * multi-hot TSV are rejected; per-feature bag lengths stay in each feature's
 * range, and a list of equal ranges draws the bytes of the one range;
 * sr_synth_draw_ids draws the ids sr_synth_fill does.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "shardrec/criteo.h"
#include "shardrec/error.h"
#include "shardrec/kjt.h"
#include "shardrec/metrics.h"
#include "shardrec/synthetic.h"

/* Criteo Kaggle's table sizes (workload K) capped at 100k rows: the default job. */
static const int64_t kaggle_rows[26] = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};
static int64_t rows26[26];

static struct sr_synth_config default_config(void)
{
    for (int f = 0; f < 26; f++)
        rows26[f] = kaggle_rows[f] < 100000 ? kaggle_rows[f] : 100000;
    return (struct sr_synth_config){.seed = 1234,
                                    .num_dense = 13,
                                    .num_features = 26,
                                    .rows = rows26,
                                    .ids_min = 1,
                                    .ids_max = 1,
                                    .id_dist = SR_ID_DIST_ZIPF,
                                    .zipf_s = 1.05};
}

static struct sr_synth *make(const struct sr_synth_config *c)
{
    struct sr_synth *s = NULL;
    assert_int_equal(sr_synth_init(&s, c), SR_OK);
    return s;
}

static void batch_for(struct sr_batch *b, const struct sr_synth *s, const struct sr_synth_config *c,
                      int B)
{
    sr_batch_init(b, B, c->num_dense, c->num_features, sr_synth_max_values(s, B), 0, NULL);
}

/* Sample b of batch x equals sample d of batch y: dense, label and every bag. */
static void assert_same_sample(const struct sr_batch *x, int b, const struct sr_batch *y, int d)
{
    int nd = x->num_dense;
    assert_memory_equal(x->dense + (size_t)b * nd, y->dense + (size_t)d * nd, sizeof(float) * nd);
    assert_true(x->labels[b] == y->labels[d]);
    for (int f = 0; f < x->kjt.num_keys; f++) {
        int64_t xb = sr_kjt_bag_begin(&x->kjt, f, b), xe = sr_kjt_bag_end(&x->kjt, f, b);
        int64_t yb = sr_kjt_bag_begin(&y->kjt, f, d), ye = sr_kjt_bag_end(&y->kjt, f, d);
        assert_int_equal(xe - xb, ye - yb);
        assert_memory_equal(x->kjt.values + xb, y->kjt.values + yb, sizeof(int64_t) * (xe - xb));
    }
}

static void check_slices(const struct sr_synth_config *c)
{
    struct sr_synth *s = make(c), *s2 = make(c);
    struct sr_batch one, two;
    batch_for(&one, s, c, 64);
    batch_for(&two, s, c, 32);
    sr_synth_fill(s, 1000, 64, &one);
    sr_synth_fill(s2, 1000, 32, &two); /* a second generator: nothing is stateful */
    for (int b = 0; b < 32; b++)
        assert_same_sample(&one, b, &two, b);
    sr_synth_fill(s, 1032, 32, &two);
    for (int b = 0; b < 32; b++)
        assert_same_sample(&one, 32 + b, &two, b);
    sr_synth_fill(s, SR_SYNTH_EVAL_BASE + 7, 32, &two); /* far away, then back */
    sr_synth_fill(s, 1017, 1, &two);
    assert_same_sample(&one, 17, &two, 0);
    sr_batch_free(&one);
    sr_batch_free(&two);
    sr_synth_free(s);
    sr_synth_free(s2);
}

static void test_samples_independent_of_slice(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    check_slices(&c);
    c.ids_min = 0; /* variable multi-hot bags, empty ones included */
    c.ids_max = 4;
    c.id_dist = SR_ID_DIST_UNIFORM;
    check_slices(&c);
}

static void test_samples_independent_of_threads(void **state)
{
    (void)state;
#ifdef _OPENMP
    struct sr_synth_config c = default_config();
    c.ids_min = 1;
    c.ids_max = 3;
    struct sr_synth *s = make(&c);
    struct sr_batch x, y;
    batch_for(&x, s, &c, 257);
    batch_for(&y, s, &c, 257);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    sr_synth_fill(s, 5, 257, &x);
    double t1, f1, v1, t3, f3, v3;
    sr_synth_bounds(s, 0, 5000, &t1, &f1, &v1);
    omp_set_num_threads(3);
    sr_synth_fill(s, 5, 257, &y);
    sr_synth_bounds(s, 0, 5000, &t3, &f3, &v3);
    omp_set_num_threads(saved);
    for (int b = 0; b < 257; b++)
        assert_same_sample(&x, b, &y, b);
    assert_true(t1 == t3 && f1 == f3 && v1 == v3);
    sr_batch_free(&x);
    sr_batch_free(&y);
    sr_synth_free(s);
#else
    skip();
#endif
}

static void test_ids_in_range_and_kjt_valid(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    int64_t rows[5] = {1, 2, 7, 1000, 3000000000LL};
    c.num_features = 5;
    c.rows = rows;
    c.ids_min = 0;
    c.ids_max = 5;
    for (int dist = 0; dist < 2; dist++) {
        c.id_dist = dist ? SR_ID_DIST_ZIPF : SR_ID_DIST_UNIFORM;
        struct sr_synth *s = make(&c);
        struct sr_batch b;
        batch_for(&b, s, &c, 500);
        sr_synth_fill(s, 123456789, 500, &b);
        assert_int_equal(sr_kjt_validate(&b.kjt), SR_OK);
        int seen_len[6] = {0};
        for (int f = 0; f < 5; f++) {
            for (int i = 0; i < 500; i++) {
                int32_t len = b.kjt.lengths[f * 500 + i];
                assert_true(len >= 0 && len <= 5);
                seen_len[len] = 1;
                for (int64_t k = sr_kjt_bag_begin(&b.kjt, f, i); k < sr_kjt_bag_end(&b.kjt, f, i);
                     k++)
                    assert_true(b.kjt.values[k] >= 0 && b.kjt.values[k] < rows[f]);
            }
        }
        for (int l = 0; l <= 5; l++)
            assert_true(seen_len[l]);
        for (int i = 0; i < 500 * 13; i++)
            assert_true(b.dense[i] >= 0.0f && isfinite(b.dense[i]));
        sr_batch_free(&b);
        sr_synth_free(s);
    }
}

/* Zipf: rank frequencies over 2^20 draws follow P(k) and the power law. */
static void test_zipf_histogram(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    int64_t E = 100000, n = (int64_t)1 << 20;
    c.num_features = 1;
    c.rows = &E;
    struct sr_synth *s = make(&c);
    struct sr_batch b;
    int B = 8192;
    batch_for(&b, s, &c, B);
    int64_t *hist = calloc((size_t)E, sizeof(int64_t));
    for (int64_t first = 0; first < n; first += B) {
        sr_synth_fill(s, first, B, &b);
        for (int i = 0; i < B; i++)
            hist[sr_synth_rank_of_id(s, 0, b.kjt.values[i])]++;
    }
    /* Top ranks: within 5 standard deviations of the discretised law. */
    for (int64_t k = 0; k < 20; k++) {
        double p = sr_synth_rank_prob(s, E, k), expect = p * n;
        assert_true(fabs(hist[k] - expect) < 5.0 * sqrt(expect * (1 - p)));
    }
    /* The law itself: P(k) (k+1)^s is flat within 1% from rank 3 on. */
    double ref = sr_synth_rank_prob(s, E, 3) * pow(4.0, 1.05);
    for (int64_t k = 3; k < E; k = k * 3 / 2 + 1)
        assert_true(fabs(sr_synth_rank_prob(s, E, k) * pow(k + 1.0, 1.05) / ref - 1.0) < 0.01);
    /* Empirical log-log slope between ranks [10, 20) and [1000, 2000): -s within 0.05. */
    double lo = 0.0, hi = 0.0, lo_k = 0.0, hi_k = 0.0;
    for (int64_t k = 10; k < 20; k++)
        lo += hist[k], lo_k += log(k + 1.0) / 10;
    for (int64_t k = 1000; k < 2000; k++)
        hi += hist[k], hi_k += log(k + 1.0) / 1000;
    double slope = (log(hi / 1000) - log(lo / 10)) / (hi_k - lo_k);
    assert_true(fabs(slope + 1.05) < 0.05);
    /* Hot rows spread: the 8 hottest ranks hit at least 5 of 8 row blocks, and the
     * first block gets no more than a third of all draws. */
    int blocks[8] = {0}, distinct = 0;
    int64_t block = (E + 7) / 8, first_block = 0;
    for (int64_t k = 0; k < 8; k++)
        blocks[sr_synth_id_of_rank(s, 0, k) / block]++;
    for (int k = 0; k < 8; k++)
        distinct += blocks[k] > 0;
    assert_true(distinct >= 5);
    for (int64_t k = 0; k < E; k++)
        if (sr_synth_id_of_rank(s, 0, k) < block)
            first_block += hist[k];
    assert_true(first_block < n / 3);
    free(hist);
    sr_batch_free(&b);
    sr_synth_free(s);
}

static void test_bijection(void **state)
{
    (void)state;
    int64_t sizes[] = {1, 2, 3, 4, 10, 97, 100, 1000, 1024, 65536, 99991};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int64_t E = sizes[t];
        struct sr_synth_config c = default_config();
        c.num_features = 1;
        c.rows = &E;
        c.seed = 77 + t;
        struct sr_synth *s = make(&c);
        char *hit = calloc((size_t)E, 1);
        for (int64_t k = 0; k < E; k++) {
            int64_t id = sr_synth_id_of_rank(s, 0, k);
            assert_true(id >= 0 && id < E);
            assert_false(hit[id]);
            hit[id] = 1;
            assert_int_equal(sr_synth_rank_of_id(s, 0, id), k);
        }
        free(hit);
        sr_synth_free(s);
    }
}

/* sr_synth_hot_rows lists the hottest rows first (the planner takes its
 * prefixes as smaller hot sets): for one feature the images of ranks 0, 1,
 * ...; for two features on one table, rows of non-increasing summed
 * probability (weights 1 and 2), each once. */
static void test_hot_rows_hottest_first(void **state)
{
    (void)state;
    int64_t E[2] = {1000, 1000}, out[60];
    int feats[2] = {0, 1};
    double weights[2] = {1, 2};
    struct sr_synth_config c = default_config();
    c.num_features = 2;
    c.rows = E;
    struct sr_synth *s = make(&c);
    assert_int_equal(
        sr_synth_hot_rows(1000, c.seed, feats, weights, 1, SR_ID_DIST_ZIPF, 1.05, 50, out), 50);
    for (int64_t r = 0; r < 50; r++)
        assert_int_equal(out[r], sr_synth_id_of_rank(s, 0, r));
    assert_int_equal(
        sr_synth_hot_rows(1000, c.seed, feats, weights, 2, SR_ID_DIST_ZIPF, 1.05, 60, out), 60);
    double last = 1;
    for (int i = 0; i < 60; i++) {
        double heat = 0;
        for (int j = 0; j < 2; j++)
            heat += weights[j] * sr_synth_rank_prob(s, 1000, sr_synth_rank_of_id(s, j, out[i]));
        assert_true(heat <= last);
        last = heat;
        for (int k = 0; k < i; k++)
            assert_true(out[k] != out[i]);
    }
    sr_synth_free(s);
}

/* sr_synth_draw_ids draws, for a one-id feature, exactly the ids sr_synth_fill
 * puts in the batch (both laws, several features, a slice from a far sample),
 * with each id's rank; bad arguments are errors. */
static void test_draw_ids_equal_fill(void **state)
{
    (void)state;
    enum { B = 512 };
    const int64_t first = 123457;
    int64_t ids[B], ranks[B];
    for (int law = 0; law < 2; law++) {
        struct sr_synth_config c = default_config();
        c.id_dist = law ? SR_ID_DIST_ZIPF : SR_ID_DIST_UNIFORM;
        c.zipf_s = law ? 1.05 : 0.0;
        struct sr_synth *s = make(&c);
        struct sr_batch b;
        batch_for(&b, s, &c, B);
        sr_synth_fill(s, first, B, &b);
        for (int f = 0; f < c.num_features; f += 5) {
            assert_int_equal(
                sr_synth_draw_ids(rows26[f], c.seed, f, c.id_dist, c.zipf_s, first, B, ids, ranks),
                SR_OK);
            assert_memory_equal(ids, b.kjt.values + sr_kjt_bag_begin(&b.kjt, f, 0),
                                sizeof(int64_t) * B);
            for (int i = 0; i < B; i++)
                assert_int_equal(ranks[i], sr_synth_rank_of_id(s, f, ids[i]));
        }
        sr_batch_free(&b);
        sr_synth_free(s);
    }
    assert_int_equal(sr_synth_draw_ids(0, 1, 0, SR_ID_DIST_UNIFORM, 0, 0, 1, ids, NULL),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_synth_draw_ids(10, 1, 0, SR_ID_DIST_ZIPF, 0.0, 0, 1, ids, NULL),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_synth_draw_ids(10, 1, 0, SR_ID_DIST_UNIFORM, 0, -1, 1, ids, NULL),
                     SR_ERR_INVALID_ARG);
    assert_int_equal(sr_synth_draw_ids(10, 1, 0, SR_ID_DIST_UNIFORM, 0, 0, 0, ids, NULL), SR_OK);
}

static void test_teacher_bounds_default(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    struct sr_synth *s = make(&c);
    double ceiling, floor_, share;
    int64_t n = (int64_t)1 << 17;
    sr_synth_bounds(s, SR_SYNTH_EVAL_BASE, n, &ceiling, &floor_, &share);
    print_message("default job, seed 1234, %" PRId64 " eval samples: ceiling %.4f floor %.4f "
                  "sparse share %.3f\n",
                  n, ceiling, floor_, share);
    assert_true(share >= 0.5);
    assert_true(ceiling > floor_ + 0.05);
    assert_true(ceiling > 0.75 && ceiling < 0.9);
    struct sr_batch b;
    batch_for(&b, s, &c, 4096);
    double pos = 0.0;
    for (int k = 0; k < 8; k++) {
        sr_synth_fill(s, SR_SYNTH_EVAL_BASE + k * 4096, 4096, &b);
        for (int i = 0; i < 4096; i++)
            pos += b.labels[i];
    }
    pos /= 8 * 4096;
    assert_true(pos > 0.25 && pos < 0.5);
    sr_batch_free(&b);
    sr_synth_free(s);

    c.ids_min = 1; /* multi-hot, uniform ids */
    c.ids_max = 8;
    c.id_dist = SR_ID_DIST_UNIFORM;
    s = make(&c);
    sr_synth_bounds(s, SR_SYNTH_EVAL_BASE, (int64_t)1 << 15, &ceiling, &floor_, &share);
    assert_true(share >= 0.5);
    assert_true(ceiling > floor_ + 0.05);
    sr_synth_free(s);
}

/* An independent parser of one TSV line: label, 13 counts, F hex ids. */
static void parse_line(char *line, int F, const int64_t *rows, float *label, float *dense,
                       int64_t *ids)
{
    char *field = line, *tab;
    int col = 0;
    for (;; col++) {
        tab = strpbrk(field, "\t\n");
        assert_non_null(tab);
        char end = *tab;
        *tab = '\0';
        if (col == 0) {
            assert_true(strcmp(field, "0") == 0 || strcmp(field, "1") == 0);
            *label = field[0] == '1';
        } else if (col <= 13) {
            char *stop;
            long long v = *field ? strtoll(field, &stop, 10) : 0;
            assert_true(!*field || *stop == '\0');
            dense[col - 1] = (float)log1p((double)(v > 0 ? v : 0));
        } else {
            assert_int_equal(strlen(field), 8);
            uint32_t h = (uint32_t)strtoul(field, NULL, 16);
            ids[col - 14] = (int64_t)(h % (uint64_t)rows[col - 14]);
        }
        if (end == '\n')
            break;
        field = tab + 1;
    }
    assert_int_equal(col, 13 + F);
}

static void test_tsv_roundtrip(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    int n = 3000;
    struct sr_synth *s = make(&c);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(sr_synth_write_tsv(s, f, 777, n), SR_OK);
    rewind(f);
    struct sr_batch b;
    batch_for(&b, s, &c, n);
    sr_synth_fill(s, 777, n, &b);
    char line[1024];
    int missing = 0;
    for (int i = 0; i < n; i++) {
        float label, dense[13];
        int64_t ids[26];
        assert_non_null(fgets(line, sizeof line, f));
        missing += strstr(line, "\t\t") != NULL;
        parse_line(line, 26, c.rows, &label, dense, ids);
        assert_true(label == b.labels[i]);
        assert_memory_equal(dense, b.dense + (size_t)i * 13, sizeof dense);
        for (int k = 0; k < 26; k++)
            assert_int_equal(ids[k], b.kjt.values[(int64_t)k * n + i]);
    }
    assert_null(fgets(line, sizeof line, f));
    assert_true(missing > 0); /* some counts are missing, written as empty fields */
    fclose(f);
    sr_batch_free(&b);
    sr_synth_free(s);
}

/* The project's own Criteo line parser reads the file back to the same batch. */
static void test_tsv_read_by_criteo_parser(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    int n = 2000;
    struct sr_synth *s = make(&c);
    FILE *f = tmpfile();
    assert_int_equal(sr_synth_write_tsv(s, f, SR_SYNTH_EVAL_BASE, n), SR_OK);
    rewind(f);
    struct sr_batch b;
    batch_for(&b, s, &c, n);
    sr_synth_fill(s, SR_SYNTH_EVAL_BASE, n, &b);
    struct sr_criteo_parser p;
    assert_int_equal(sr_criteo_parser_init(&p, 26, c.rows), SR_OK);
    char line[1024];
    for (int i = 0; i < n; i++) {
        float label, dense[13];
        int64_t ids[26];
        assert_non_null(fgets(line, sizeof line, f));
        size_t len = strlen(line) - 1; /* without the '\n' */
        assert_int_equal(sr_criteo_parse_line(&p, line, len, &label, dense, ids, 1, NULL),
                         SR_CRITEO_OK);
        assert_true(label == b.labels[i]);
        assert_memory_equal(dense, b.dense + (size_t)i * 13, sizeof dense);
        for (int k = 0; k < 26; k++)
            assert_int_equal(ids[k], b.kjt.values[(int64_t)k * n + i]);
    }
    fclose(f);
    sr_batch_free(&b);
    sr_synth_free(s);
}

static void test_tsv_rejects_multi_hot(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    c.ids_max = 2;
    struct sr_synth *s = make(&c);
    FILE *f = tmpfile();
    assert_int_equal(sr_synth_write_tsv(s, f, 0, 10), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "1 id per feature"));
    sr_synth_free(s);
    int lo[26], hi[26];
    for (int f = 0; f < 26; f++)
        lo[f] = hi[f] = 1;
    hi[7] = 3;
    c.ids_max = 1;
    c.feature_ids_min = lo;
    c.feature_ids_max = hi;
    s = make(&c);
    assert_int_equal(sr_synth_write_tsv(s, f, 0, 10), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "feature 7"));
    sr_synth_free(s);
    c.feature_ids_min = c.feature_ids_max = NULL;
    c.num_dense = 12;
    s = make(&c);
    assert_int_equal(sr_synth_write_tsv(s, f, 0, 10), SR_ERR_INVALID_ARG);
    fclose(f);
    sr_synth_free(s);
}

static void test_config_errors_and_parse(void **state)
{
    (void)state;
    struct sr_synth *s = (struct sr_synth *)&s;
    struct sr_synth_config c = default_config();
    int64_t bad_rows[26];
    memcpy(bad_rows, rows26, sizeof bad_rows);
    bad_rows[4] = 0;
    c.rows = bad_rows;
    assert_int_equal(sr_synth_init(&s, &c), SR_ERR_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(sr_error_message(), "rows[4]"));
    c = default_config();
    c.zipf_s = 0.0;
    assert_int_equal(sr_synth_init(&s, &c), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "zipf_s"));
    c = default_config();
    c.ids_min = 3;
    c.ids_max = 2;
    assert_int_equal(sr_synth_init(&s, &c), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "ids_min"));
    c = default_config();
    c.num_dense = 0;
    assert_int_equal(sr_synth_init(&s, &c), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "num_dense"));
    sr_synth_free(NULL);

    enum sr_id_dist d;
    double z = -1.0;
    assert_int_equal(sr_id_dist_parse("uniform", &d, &z), SR_OK);
    assert_true(d == SR_ID_DIST_UNIFORM && z == 0.0);
    assert_int_equal(sr_id_dist_parse("zipf:1.05", &d, &z), SR_OK);
    assert_true(d == SR_ID_DIST_ZIPF && z == 1.05);
    const char *bad[] = {"zipf",     "zipf:",    "zipf:0",  "zipf:-1", "zipf:abc", "zipf:1.05x",
                         "zipf:nan", "zipf:inf", "Uniform", "",        "normal"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        assert_int_equal(sr_id_dist_parse(bad[k], &d, &z), SR_ERR_INVALID_ARG);
}

/* Per-feature ranges (MLPerf's multi-hot sizes): feature f's bags stay in its
 * own [min, max] and, over 4000 samples, hit both ends; a batch holds at most
 * B x the sum of the maxima; the arrays are copied. */
static void test_per_feature_ranges(void **state)
{
    (void)state;
    enum { F = 5, B = 4000 };
    struct sr_synth_config c = default_config();
    int64_t rows[F] = {10, 1000, 7, 100000, 3};
    int lo[F] = {3, 0, 1, 95, 1}, hi[F] = {3, 2, 8, 100, 1};
    c.num_features = F;
    c.rows = rows;
    c.ids_min = c.ids_max = 50; /* ignored: the arrays win */
    c.feature_ids_min = lo;
    c.feature_ids_max = hi;
    struct sr_synth *s = make(&c);
    lo[0] = hi[0] = 40; /* copied at init */
    assert_int_equal(sr_synth_max_values(s, B), (int64_t)B * (3 + 2 + 8 + 100 + 1));
    assert_int_equal(sr_synth_max_values(s, 1), 114);
    struct sr_batch b;
    batch_for(&b, s, &c, B);
    sr_synth_fill(s, 777, B, &b);
    assert_int_equal(sr_kjt_validate(&b.kjt), SR_OK);
    const int want_lo[F] = {3, 0, 1, 95, 1}, want_hi[F] = {3, 2, 8, 100, 1};
    for (int f = 0; f < F; f++) {
        int seen_lo = 0, seen_hi = 0;
        for (int i = 0; i < B; i++) {
            int32_t len = b.kjt.lengths[f * B + i];
            assert_true(len >= want_lo[f] && len <= want_hi[f]);
            seen_lo |= len == want_lo[f];
            seen_hi |= len == want_hi[f];
            for (int64_t k = sr_kjt_bag_begin(&b.kjt, f, i); k < sr_kjt_bag_end(&b.kjt, f, i); k++)
                assert_true(b.kjt.values[k] >= 0 && b.kjt.values[k] < rows[f]);
        }
        assert_true(seen_lo && seen_hi);
    }
    sr_batch_free(&b);
    sr_synth_free(s);

    struct sr_synth *bad = (struct sr_synth *)&bad;
    int lo2[F] = {1, 1, 1, 1, 1}, hi2[F] = {1, 1, 0, 1, 1};
    c.feature_ids_min = lo2;
    c.feature_ids_max = hi2;
    assert_int_equal(sr_synth_init(&bad, &c), SR_ERR_INVALID_ARG);
    assert_null(bad);
    assert_non_null(strstr(sr_error_message(), "feature 2"));
    c.feature_ids_max = NULL; /* the two arrays go together */
    assert_int_equal(sr_synth_init(&bad, &c), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "feature_ids_max"));
}

/* A per-feature list of F equal ranges is the one range: the same batch bytes
 * (dense, labels, lengths, offsets, ids), the same teacher, the same
 * capacity. For a fixed and a drawn length. */
static void test_per_feature_list_equals_single(void **state)
{
    (void)state;
    const int ranges[2][2] = {{1, 1}, {0, 4}};
    for (int r = 0; r < 2; r++) {
        enum { B = 300 };
        struct sr_synth_config one = default_config(), list = default_config();
        int lo[26], hi[26];
        for (int f = 0; f < 26; f++)
            lo[f] = ranges[r][0], hi[f] = ranges[r][1];
        one.ids_min = ranges[r][0];
        one.ids_max = ranges[r][1];
        list.feature_ids_min = lo;
        list.feature_ids_max = hi;
        struct sr_synth *s1 = make(&one), *s2 = make(&list);
        assert_int_equal(sr_synth_max_values(s1, B), sr_synth_max_values(s2, B));
        assert_int_equal(sr_synth_max_values(s1, B), (int64_t)B * 26 * ranges[r][1]);
        struct sr_batch x, y;
        batch_for(&x, s1, &one, B);
        batch_for(&y, s2, &list, B);
        sr_synth_fill(s1, 4242, B, &x);
        sr_synth_fill(s2, 4242, B, &y);
        assert_int_equal(x.kjt.num_values, y.kjt.num_values);
        assert_memory_equal(x.dense, y.dense, sizeof(float) * B * 13);
        assert_memory_equal(x.labels, y.labels, sizeof(float) * B);
        assert_memory_equal(x.kjt.lengths, y.kjt.lengths, sizeof(x.kjt.lengths[0]) * B * 26);
        assert_memory_equal(x.kjt.offsets, y.kjt.offsets, sizeof(int64_t) * (B * 26 + 1));
        assert_memory_equal(x.kjt.values, y.kjt.values, sizeof(int64_t) * x.kjt.num_values);
        double t1, f1, v1, t2, f2, v2;
        sr_synth_bounds(s1, 0, 2000, &t1, &f1, &v1);
        sr_synth_bounds(s2, 0, 2000, &t2, &f2, &v2);
        assert_true(t1 == t2 && f1 == f2 && v1 == v2);
        sr_batch_free(&x);
        sr_batch_free(&y);
        sr_synth_free(s1);
        sr_synth_free(s2);
    }
}

static void test_seed_changes_data(void **state)
{
    (void)state;
    struct sr_synth_config c = default_config();
    struct sr_synth *s = make(&c);
    c.seed = 1235;
    struct sr_synth *t = make(&c);
    struct sr_batch x, y;
    batch_for(&x, s, &c, 64);
    batch_for(&y, t, &c, 64);
    sr_synth_fill(s, 0, 64, &x);
    sr_synth_fill(t, 0, 64, &y);
    assert_memory_not_equal(x.kjt.values, y.kjt.values, sizeof(int64_t) * 64 * 26);
    assert_memory_not_equal(x.dense, y.dense, sizeof(float) * 64 * 13);
    sr_batch_free(&x);
    sr_batch_free(&y);
    sr_synth_free(s);
    sr_synth_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_independent_of_slice),
        cmocka_unit_test(test_samples_independent_of_threads),
        cmocka_unit_test(test_ids_in_range_and_kjt_valid),
        cmocka_unit_test(test_zipf_histogram),
        cmocka_unit_test(test_bijection),
        cmocka_unit_test(test_hot_rows_hottest_first),
        cmocka_unit_test(test_draw_ids_equal_fill),
        cmocka_unit_test(test_teacher_bounds_default),
        cmocka_unit_test(test_tsv_roundtrip),
        cmocka_unit_test(test_tsv_read_by_criteo_parser),
        cmocka_unit_test(test_tsv_rejects_multi_hot),
        cmocka_unit_test(test_config_errors_and_parse),
        cmocka_unit_test(test_seed_changes_data),
        cmocka_unit_test(test_per_feature_ranges),
        cmocka_unit_test(test_per_feature_list_equals_single),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
