/*
 * Reader shuffle (train --shuffle): one epoch visits every sample of the full
 * global batches exactly once, in an order other than the file's; 1, 2 and 3
 * ranks reconstruct the same global batches; the same seed repeats the order,
 * another seed or the next epoch changes it; blocks may cross files; TSV input
 * is refused with a hint to convert it; a reader put where another told it
 * was (sr_reader_tell / sr_reader_seek, a checkpoint's data position) reads
 * the same batches on, across the end of an epoch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "helpers/tmpdir.h"

#include "shardrec/binfmt.h"
#include "shardrec/error.h"
#include "shardrec/reader.h"

#define F       2
#define N       10000
#define BLOCK   512
#define MAX_OUT (N + 64)
static const int64_t rows[F] = {1 << 20, 7};

/* Sample i: dense[0] = i, label = i % 2, id of feature 0 = i, of feature 1 = i % 7. */
static void write_bin(const char *path, int64_t first, int64_t n)
{
    struct sr_binfmt_writer *w;
    struct sr_batch b;
    int cap = 1000;
    sr_batch_init(&b, cap, 13, F, (int64_t)F * cap, 0, NULL);
    assert_int_equal(sr_binfmt_writer_open(&w, path, 13, F, rows, 0, 300), SR_OK);
    for (int64_t s = 0; s < n; s += cap) {
        int m = (int)(n - s < cap ? n - s : cap);
        memset(b.dense, 0, sizeof(float) * 13 * (size_t)m);
        for (int i = 0; i < m; i++) {
            int64_t idx = first + s + i;
            b.dense[(size_t)i * 13] = (float)idx;
            b.labels[i] = (float)(idx % 2);
            b.kjt.lengths[i] = 1;
            b.kjt.lengths[m + i] = 1;
            b.kjt.values[i] = idx;
            b.kjt.values[m + i] = idx % 7;
        }
        b.batch_size = b.kjt.stride = m;
        b.kjt.num_values = 2 * m;
        assert_int_equal(sr_kjt_compute_offsets(&b.kjt), SR_OK);
        assert_int_equal(sr_binfmt_writer_append(w, &b), SR_OK);
    }
    assert_int_equal(sr_binfmt_writer_close(w), SR_OK);
    sr_batch_free(&b);
}

static int setup(void **state)
{
    int rc = sr_test_tmpdir_setup(state);
    if (!rc) {
        write_bin(sr_test_path("all.bin"), 0, N);
        write_bin(sr_test_path("a.bin"), 0, 3333);
        write_bin(sr_test_path("b.bin"), 3333, N - 3333);
    }
    return rc;
}

static struct sr_reader *open_shuffled(const char *const *paths, int n, int rank, int world, int B,
                                       int shuffle, uint64_t seed)
{
    struct sr_reader_options o = {.rank = rank,
                                  .world = world,
                                  .batch_size = B,
                                  .shuffle = shuffle,
                                  .seed = seed,
                                  .block_samples = BLOCK};
    struct sr_reader *r;
    int rc = sr_reader_open(&r, paths, n, F, rows, &o);
    if (rc)
        fprintf(stderr, "%s\n", sr_error_message());
    assert_int_equal(rc, SR_OK);
    return r;
}

/* Every sample index of one epoch, global batch after global batch, rank slices
 * put together; checks each sample is whole. Returns the count. */
static int64_t read_epoch(struct sr_reader **rs, int world, int B, int64_t *out)
{
    struct sr_batch b;
    int64_t n = 0;
    sr_reader_batch_init(rs[0], &b, NULL);
    for (;;) {
        int got = 0;
        for (int r = 0; r < world; r++) {
            int rc = sr_reader_next(rs[r], &b);
            assert_true(rc == 0 || rc == 1);
            got += rc;
            if (!rc)
                continue;
            assert_int_equal(b.batch_size, B);
            assert_int_equal(sr_kjt_validate(&b.kjt), SR_OK);
            for (int i = 0; i < B; i++) {
                int64_t idx = (int64_t)b.dense[(size_t)i * 13];
                assert_int_equal(b.kjt.values[b.kjt.offsets[i]], idx);
                assert_int_equal(b.kjt.values[b.kjt.offsets[B + i]], idx % 7);
                assert_int_equal((int)b.labels[i], idx % 2);
                assert_true(n < MAX_OUT);
                out[n++] = idx;
            }
        }
        assert_true(got == 0 || got == world); /* all ranks end together */
        if (!got)
            break;
    }
    sr_batch_free(&b);
    return n;
}

static int64_t read_one(const char *const *paths, int n_paths, int world, int B, uint64_t seed,
                        int shuffle, int64_t *out)
{
    struct sr_reader *rs[3];
    for (int r = 0; r < world; r++)
        rs[r] = open_shuffled(paths, n_paths, r, world, B, shuffle, seed);
    int64_t n = read_epoch(rs, world, B, out);
    for (int r = 0; r < world; r++)
        sr_reader_free(rs[r]);
    return n;
}

static int differs(const int64_t *a, const int64_t *b, int64_t n)
{
    return memcmp(a, b, sizeof(int64_t) * (size_t)n) != 0;
}

static void test_epoch_is_a_permutation(void **state)
{
    (void)state;
    const char *all = sr_test_path("all.bin");
    int64_t *out = malloc(sizeof(int64_t) * MAX_OUT);
    int *seen = calloc(N, sizeof(int));
    int B = 100, world = 3; /* G = 300: 33 global batches, 100 samples dropped */
    int64_t n = read_one(&all, 1, world, B, 42, 1, out);
    assert_int_equal(n, (N / (B * world)) * B * world);
    int in_order = 1;
    for (int64_t i = 0; i < n; i++) {
        assert_true(out[i] >= 0 && out[i] < N);
        assert_int_equal(seen[out[i]]++, 0); /* each at most once */
        in_order &= out[i] == i;
    }
    assert_false(in_order);
    /* whole blocks, kept in file order inside the block */
    for (int64_t i = 1; i < n; i++)
        if (i % BLOCK && out[i - 1] % BLOCK != BLOCK - 1 && out[i - 1] != N - 1)
            assert_int_equal(out[i], out[i - 1] + 1);
    /* without shuffle: file order */
    n = read_one(&all, 1, world, B, 42, 0, out);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(out[i], i);
    free(seen);
    free(out);
}

static void test_full_epoch_visits_all(void **state)
{
    (void)state;
    const char *all = sr_test_path("all.bin");
    int64_t *out = malloc(sizeof(int64_t) * MAX_OUT);
    int *seen = calloc(N, sizeof(int));
    int64_t n = read_one(&all, 1, 1, 16, 7, 1, out); /* 10000 = 625 * 16: nothing dropped */
    assert_int_equal(n, N);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(seen[out[i]]++, 0);
    free(seen);
    free(out);
}

static void test_same_batches_any_world(void **state)
{
    (void)state;
    const char *all = sr_test_path("all.bin");
    const char *two[2] = {sr_test_path("a.bin"), sr_test_path("b.bin")};
    int64_t *w1 = malloc(sizeof(int64_t) * MAX_OUT), *w = malloc(sizeof(int64_t) * MAX_OUT);
    int G = 60; /* global batch, split over 1, 2, 3 ranks */
    int64_t n1 = read_one(&all, 1, 1, G, 99, 1, w1);
    assert_int_equal(n1, (N / G) * G);
    for (int world = 2; world <= 3; world++) {
        assert_int_equal(read_one(&all, 1, world, G / world, 99, 1, w), n1);
        assert_false(differs(w1, w, n1));
        /* the same stream split over two files: blocks cross the file boundary */
        assert_int_equal(read_one(two, 2, world, G / world, 99, 1, w), n1);
        assert_false(differs(w1, w, n1));
    }
    free(w);
    free(w1);
}

static void test_seed_and_epoch(void **state)
{
    (void)state;
    const char *all = sr_test_path("all.bin");
    int64_t *a = malloc(sizeof(int64_t) * MAX_OUT), *b = malloc(sizeof(int64_t) * MAX_OUT);
    int B = 50;
    int64_t n = read_one(&all, 1, 1, B, 5, 1, a);
    assert_int_equal(read_one(&all, 1, 1, B, 5, 1, b), n);
    assert_false(differs(a, b, n)); /* same seed, same order */
    assert_int_equal(read_one(&all, 1, 1, B, 6, 1, b), n);
    assert_true(differs(a, b, n)); /* another seed */

    /* the next epoch (rewind) changes the order; a fresh reader repeats epoch 0 */
    struct sr_reader *r = open_shuffled(&all, 1, 0, 1, B, 1, 5);
    assert_int_equal(read_epoch(&r, 1, B, b), n);
    assert_false(differs(a, b, n));
    assert_int_equal(sr_reader_rewind(r), SR_OK);
    assert_int_equal(read_epoch(&r, 1, B, b), n);
    assert_true(differs(a, b, n));
    int *seen = calloc(N, sizeof(int));
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(seen[b[i]]++, 0);
    free(seen);
    sr_reader_free(r);
    free(b);
    free(a);
}

/* The sample indices of rank r's next batch into out (B of them); 0 at the end. */
static int next_ids(struct sr_reader *r, struct sr_batch *b, int64_t *out)
{
    int rc = sr_reader_next(r, b);
    assert_true(rc == 0 || rc == 1);
    for (int i = 0; rc && i < b->batch_size; i++)
        out[i] = (int64_t)b->dense[(size_t)i * 13];
    return rc;
}

static void test_tell_seek(void **state)
{
    (void)state;
    const char *two[2] = {sr_test_path("a.bin"), sr_test_path("b.bin")};
    int B = 40, world = 2, per_epoch = N / (B * world); /* 125 global batches */
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        struct sr_reader *a = open_shuffled(two, 2, 1, world, B, shuffle, 11);
        struct sr_reader *b = open_shuffled(two, 2, 1, world, B, shuffle, 11);
        struct sr_batch x, y;
        int64_t ia[64], ib[64];
        sr_reader_batch_init(a, &x, NULL);
        sr_reader_batch_init(a, &y, NULL);
        while (next_ids(a, &x, ia))
            ;
        assert_int_equal(sr_reader_rewind(a), SR_OK);
        for (int k = 0; k < per_epoch - 3; k++)
            assert_int_equal(next_ids(a, &x, ia), 1);
        struct sr_reader_position pos;
        sr_reader_tell(a, &pos);
        assert_int_equal(pos.epoch, 1);
        assert_int_equal(pos.batches, per_epoch - 3);
        assert_int_equal(sr_reader_seek(b, &pos), SR_OK);
        for (int k = 0; k < 3; k++) { /* the rest of epoch 1 */
            assert_int_equal(next_ids(a, &x, ia), 1);
            assert_int_equal(next_ids(b, &y, ib), 1);
            assert_false(differs(ia, ib, B));
        }
        assert_int_equal(next_ids(a, &x, ia), 0);
        assert_int_equal(next_ids(b, &y, ib), 0);
        assert_int_equal(sr_reader_rewind(a), SR_OK); /* into epoch 2, alike */
        assert_int_equal(sr_reader_rewind(b), SR_OK);
        assert_int_equal(next_ids(a, &x, ia), 1);
        assert_int_equal(next_ids(b, &y, ib), 1);
        assert_false(differs(ia, ib, B));
        pos.batches = per_epoch + 1; /* past the data: named */
        assert_int_equal(sr_reader_seek(b, &pos), SR_ERR_DATA);
        assert_non_null(strstr(sr_error_message(), "a.bin: the data ends"));
        sr_batch_free(&x);
        sr_batch_free(&y);
        sr_reader_free(a);
        sr_reader_free(b);
    }
}

static void test_tsv_rejected(void **state)
{
    (void)state;
    const char *tsv = sr_test_path("x.tsv");
    FILE *f = fopen(tsv, "w");
    assert_non_null(f);
    fputs("1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\taa\tbb\n", f);
    fclose(f);
    struct sr_reader_options o = {.world = 1, .batch_size = 1, .shuffle = 1, .seed = 1};
    struct sr_reader *r = (struct sr_reader *)1;
    assert_int_equal(sr_reader_open(&r, &tsv, 1, F, rows, &o), SR_ERR_UNSUPPORTED);
    assert_null(r);
    assert_non_null(strstr(sr_error_message(), "--shuffle needs random access: convert the TSV "
                                               "with `shardrec convert` first"));
    /* a binary file before the TSV does not help */
    const char *mixed[2] = {sr_test_path("all.bin"), tsv};
    assert_int_equal(sr_reader_open(&r, mixed, 2, F, rows, &o), SR_ERR_UNSUPPORTED);
    assert_null(r);
    o.block_samples = -1;
    assert_int_equal(sr_reader_open(&r, mixed, 1, F, rows, &o), SR_ERR_INVALID_ARG);
}

/* Each feature's most ids in a batch (what the sharded exchange is sized
 * by): one id a sample in a TSV and in a file of fixed bags; where a
 * feature's bags vary, the file's most ids in one sample. */
static void test_feature_bounds(void **state)
{
    (void)state;
    enum { Bn = 8, n = 40 };
    const char *var = sr_test_path("var.bin"), *tsv = sr_test_path("one.tsv");
    struct sr_binfmt_writer *w;
    struct sr_batch b;
    sr_batch_init(&b, n, 13, F, 4 * n, 0, NULL);
    memset(b.dense, 0, sizeof(float) * 13 * n);
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        b.labels[i] = 0;
        b.kjt.lengths[i] = 1; /* feature 0: always one id */
        b.kjt.values[k++] = i;
    }
    for (int i = 0; i < n; i++) { /* feature 1: 0..3 ids */
        b.kjt.lengths[n + i] = i % 4;
        for (int j = 0; j < i % 4; j++)
            b.kjt.values[k++] = j;
    }
    b.batch_size = b.kjt.stride = n;
    b.kjt.num_values = k;
    assert_int_equal(sr_kjt_compute_offsets(&b.kjt), SR_OK);
    assert_int_equal(sr_binfmt_writer_open(&w, var, 13, F, rows, 0, 0), SR_OK);
    assert_int_equal(sr_binfmt_writer_append(w, &b), SR_OK);
    assert_int_equal(sr_binfmt_writer_close(w), SR_OK);
    sr_batch_free(&b);
    FILE *f = fopen(tsv, "w");
    assert_non_null(f);
    fputs("1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\taa\tbb\n", f);
    fclose(f);

    struct sr_reader_options o = {.world = 1, .batch_size = Bn};
    struct sr_reader *r;
    const char *fixed = sr_test_path("all.bin");
    const struct {
        const char *path;
        int64_t f0, f1;
    } want[3] = {{fixed, Bn, Bn}, {tsv, Bn, Bn}, {var, Bn, 4 * Bn}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sr_reader_open(&r, &want[i].path, 1, F, rows, &o), SR_OK);
        assert_int_equal(sr_reader_feature_max_values(r, 0), want[i].f0);
        assert_int_equal(sr_reader_feature_max_values(r, 1), want[i].f1);
        assert_true(sr_reader_feature_max_values(r, 1) <= sr_reader_max_values(r));
        sr_reader_free(r);
    }
    /* several files: the most of each feature over them */
    const char *both[2] = {fixed, var};
    assert_int_equal(sr_reader_open(&r, both, 2, F, rows, &o), SR_OK);
    assert_int_equal(sr_reader_feature_max_values(r, 0), Bn);
    assert_int_equal(sr_reader_feature_max_values(r, 1), 4 * Bn);
    sr_reader_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_is_a_permutation), cmocka_unit_test(test_full_epoch_visits_all),
        cmocka_unit_test(test_same_batches_any_world), cmocka_unit_test(test_seed_and_epoch),
        cmocka_unit_test(test_tsv_rejected), cmocka_unit_test(test_tell_seek),
        cmocka_unit_test(test_feature_bounds),
    };
    return cmocka_run_group_tests(tests, setup, sr_test_tmpdir_teardown);
}
