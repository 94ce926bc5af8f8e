/*
 * Criteo TSV and binary readers: every bad-line kind rejected with file:line,
 * CRLF, empty fields, hex mod rows, the exact dense transform, skip-bad-lines
 * counts, rank slicing (1, 2, 3 ranks read the same global batches), generator
 * TSV read back equal to the generator's batches, binary round trips (one-hot
 * and multi-hot with weights) equal to the source, gzip input, and truncated or
 * corrupt binary files rejected (reserved header bytes included); gzip files
 * cut short (at a line boundary, inside a line, before the trailer) or with
 * trailing garbage are errors naming the file, also under skip-bad-lines, and
 * concatenated members are all read; empty lines are reported as such.
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
#include <unistd.h>

#include <cmocka.h>

#include "helpers/tmpdir.h"

#include "shardrec/alloc.h"
#include "shardrec/binfmt.h"
#include "shardrec/criteo.h"
#include "shardrec/error.h"
#include "shardrec/reader.h"
#include "shardrec/synthetic.h"

#define F 26
static const int64_t kaggle_rows[F] = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};
#define setup    sr_test_tmpdir_setup
#define teardown sr_test_tmpdir_teardown
#define path_of  sr_test_path

static void write_bytes(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    fclose(f);
}

/* A well-formed line: label, counts 0..12 with I2 empty, ids with C3 empty. */
static void good_line(char *buf, int label)
{
    char *p = buf + sprintf(buf, "%d", label);
    for (int j = 0; j < 13; j++)
        p += j == 1 ? sprintf(p, "\t") : sprintf(p, "\t%d", j * 7 - 3);
    for (int f = 0; f < F; f++)
        p += f == 2 ? sprintf(p, "\t") : sprintf(p, "\t%08x", 0x9e3779b9u * (unsigned)(f + 1));
}

static struct sr_reader *open_reader(const char *const *paths, int n, int rank, int world, int B,
                                     int skip, int keep)
{
    struct sr_reader_options o = {.rank = rank,
                                  .world = world,
                                  .batch_size = B,
                                  .skip_bad_lines = skip,
                                  .keep_partial = keep};
    struct sr_reader *r;
    int rc = sr_reader_open(&r, paths, n, F, kaggle_rows, &o);
    if (rc)
        fprintf(stderr, "%s\n", sr_error_message());
    assert_int_equal(rc, SR_OK);
    return r;
}

static void test_parse_fields(void **state)
{
    struct sr_criteo_parser p;
    char line[1024];
    float label, dense[13];
    int64_t ids[F];
    assert_int_equal(sr_criteo_parser_init(&p, F, kaggle_rows), SR_OK);
    good_line(line, 1);
    assert_int_equal(sr_criteo_parse_line(&p, line, strlen(line), &label, dense, ids, 1, NULL), 0);
    assert_true(label == 1.0f);
    assert_true(dense[0] == 0.0f); /* -3 -> max(-3, 0) -> log(1) */
    assert_true(dense[1] == 0.0f); /* empty */
    assert_true(dense[2] == (float)log(12.0));
    assert_int_equal(ids[2], 0); /* empty */
    for (int f = 0; f < F; f++)
        if (f != 2)
            assert_int_equal(
                ids[f], (int64_t)((0x9e3779b9u * (unsigned)(f + 1)) % (uint64_t)kaggle_rows[f]));
    /* CRLF, upper-case hex, a short hex id, a negative count */
    strcat(line, "\r");
    line[strlen(line) - 9] = 'A';
    assert_int_equal(sr_criteo_parse_line(&p, line, strlen(line), &label, dense, ids, 1, NULL), 0);
    char *q = line + sprintf(line, "0\t-5");
    for (int j = 1; j < 13; j++)
        q += sprintf(q, "\t");
    q += sprintf(q, "\tff");
    for (int f = 1; f < F; f++)
        q += sprintf(q, "\t");
    assert_int_equal(sr_criteo_parse_line(&p, line, strlen(line), &label, dense, ids, 1, NULL), 0);
    assert_int_equal(ids[0], 255);
    assert_true(dense[0] == 0.0f && label == 0.0f);
}

static void test_dense_transform_exact(void **state)
{
    struct sr_criteo_parser p;
    assert_int_equal(sr_criteo_parser_init(&p, F, kaggle_rows), SR_OK);
    char line[1024];
    float dense[13];
    int64_t xs[] = {
        0,        1, 2, 3, 7, 100, 4095, 4096, 4097, 65535, 1000000, 123456789, (int64_t)1 << 40,
        INT64_MAX};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        char *q = line + sprintf(line, "1");
        for (int j = 0; j < 13; j++)
            q += sprintf(q, "\t%lld", (long long)(xs[i] + (j && xs[i] < INT64_MAX - 13 ? j : 0)));
        for (int f = 0; f < F; f++)
            q += sprintf(q, "\t1");
        assert_int_equal(sr_criteo_parse_line(&p, line, strlen(line), NULL, dense, NULL, 1, NULL),
                         0);
        for (int j = 0; j < 13; j++) {
            int64_t x = xs[i] + (j && xs[i] < INT64_MAX - 13 ? j : 0);
            assert_true(dense[j] == (float)log((double)x + 1.0)); /* log(max(x,0)+1), double */
        }
    }
    /* every tabulated count agrees with the float64 formula */
    for (int64_t x = 0; x < 70000; x++)
        assert_true(sr_criteo_dense(x) == (float)log((double)x + 1.0));
}

struct bad_case {
    const char *name;
    enum sr_criteo_fault kind;
};

/* Turn a good line into one of each fault kind. */
static size_t make_bad(char *line, enum sr_criteo_fault kind)
{
    good_line(line, 0);
    size_t n = strlen(line);
    char *c1 = strchr(line, '\t');
    switch (kind) {
    case SR_CRITEO_FIELD_COUNT:
        strcat(line, "\textra");
        return n + 6;
    case SR_CRITEO_BAD_LABEL:
        line[0] = '2';
        return n;
    case SR_CRITEO_BAD_INTEGER:
        c1[1] = 'x';
        return n;
    case SR_CRITEO_INT_OVERFLOW:
        memmove(c1 + 21, c1 + 1, n - (size_t)(c1 + 1 - line) + 1);
        memcpy(c1 + 1, "99999999999999999999", 20);
        return n + 20;
    case SR_CRITEO_BAD_HEX:
        line[n - 1] = 'g';
        return n;
    case SR_CRITEO_HEX_OVERFLOW:
        strcat(line, "0");
        return n + 1;
    case SR_CRITEO_NUL:
        line[n - 3] = '\0';
        return n;
    case SR_CRITEO_EMPTY_LINE:
        return 0;
    default:
        return n;
    }
}

static void test_bad_lines_rejected_with_place(void **state)
{
    for (int kind = SR_CRITEO_FIELD_COUNT; kind < SR_CRITEO_NUM_FAULTS; kind++) {
        char text[4096], *p = text;
        good_line(p, 1);
        p += strlen(p);
        *p++ = '\n';
        size_t n = kind == SR_CRITEO_LONG_LINE ? 70000 : make_bad(p, (enum sr_criteo_fault)kind);
        char *big = malloc(80000);
        memcpy(big, text, (size_t)(p - text));
        if (kind == SR_CRITEO_LONG_LINE)
            memset(big + (p - text), '1', n);
        else
            memcpy(big + (p - text), p, n);
        size_t total = (size_t)(p - text) + n;
        big[total++] = '\n';
        const char *path = path_of("bad.tsv");
        write_bytes(path, big, total);
        free(big);
        struct sr_reader *r = open_reader(&path, 1, 0, 1, 4, 0, 1);
        struct sr_batch b;
        sr_reader_batch_init(r, &b, NULL);
        int rc = sr_reader_next(r, &b);
        assert_int_equal(rc, SR_ERR_DATA);
        char where[160];
        snprintf(where, sizeof where, "%s:2: %s", path, sr_criteo_fault_name(kind));
        if (!strstr(sr_error_message(), where))
            fail_msg("kind %d: '%s' lacks '%s'", kind, sr_error_message(), where);
        assert_non_null(strstr(sr_error_message(), "HINT"));
        sr_batch_free(&b);
        sr_reader_free(r);
    }
}

static void test_skip_bad_lines_counts(void **state)
{
    char *text = malloc(1 << 20), *p = text;
    int good = 0;
    const int K = SR_CRITEO_NUM_FAULTS; /* 0 and K: good lines; 1..K-1 each fault kind */
    for (int i = 0; i < 3 * (K + 1); i++) {
        int kind = i % (K + 1);
        if (kind == 0 || kind == K) {
            good_line(p, i & 1);
            p += strlen(p);
            good++;
        } else if (kind == SR_CRITEO_LONG_LINE) {
            memset(p, '7', 70000);
            p += 70000;
        } else {
            p += make_bad(p, (enum sr_criteo_fault)kind);
        }
        *p++ = '\n';
    }
    const char *path = path_of("mixed.tsv");
    write_bytes(path, text, (size_t)(p - text));
    free(text);
    struct sr_reader *r = open_reader(&path, 1, 0, 1, 4, 1, 1);
    struct sr_batch b;
    sr_reader_batch_init(r, &b, NULL);
    int n = 0, rc;
    while ((rc = sr_reader_next(r, &b)) == 1)
        n += b.batch_size;
    assert_int_equal(rc, 0);
    assert_int_equal(n, good);
    for (int k = 1; k < SR_CRITEO_NUM_FAULTS; k++)
        assert_int_equal(sr_reader_bad_lines(r, (enum sr_criteo_fault)k), 3);
    assert_int_equal(sr_reader_bad_lines(r, SR_CRITEO_OK), 3 * (K - 1));
    char report[2048] = {0};
    FILE *mf = fmemopen(report, sizeof report - 1, "w");
    sr_reader_report(r, mf);
    fclose(mf);
    char want[64];
    snprintf(want, sizeof want, "skipped %d bad lines", 3 * (K - 1));
    assert_non_null(strstr(report, want));
    assert_non_null(strstr(report, "empty line 3 (first at"));
    assert_non_null(strstr(report, "bad label 3 (first at"));
    sr_batch_free(&b);
    sr_reader_free(r);
}

/* A generator with Criteo's shape (one id per feature, or multi-hot). */
static struct sr_synth *make_synth(int ids_min, int ids_max)
{
    struct sr_synth_config c = {.seed = 7,
                                .num_dense = 13,
                                .num_features = F,
                                .rows = kaggle_rows,
                                .ids_min = ids_min,
                                .ids_max = ids_max,
                                .id_dist = SR_ID_DIST_ZIPF,
                                .zipf_s = 1.05};
    struct sr_synth *s;
    assert_int_equal(sr_synth_init(&s, &c), SR_OK);
    return s;
}

static void write_synth_tsv(const char *path, int64_t n, int crlf)
{
    struct sr_synth *s = make_synth(1, 1);
    FILE *f = fopen(path, "wb");
    assert_int_equal(sr_synth_write_tsv(s, f, 0, n), SR_OK);
    fclose(f);
    sr_synth_free(s);
    if (crlf) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "sed -i 's/$/\\r/' %s", path);
        assert_int_equal(system(cmd), 0);
    }
}

/* Sample b of batch x equals sample c of batch y (dense, label, bags, weights). */
static void assert_same_sample(const struct sr_batch *x, int b, const struct sr_batch *y, int c)
{
    assert_memory_equal(x->dense + b * 13, y->dense + c * 13, 13 * sizeof(float));
    assert_true(x->labels[b] == y->labels[c]);
    for (int f = 0; f < F; f++) {
        int64_t xb = sr_kjt_bag_begin(&x->kjt, f, b), xe = sr_kjt_bag_end(&x->kjt, f, b);
        int64_t yb = sr_kjt_bag_begin(&y->kjt, f, c), ye = sr_kjt_bag_end(&y->kjt, f, c);
        assert_int_equal(xe - xb, ye - yb);
        assert_memory_equal(x->kjt.values + xb, y->kjt.values + yb, (size_t)(xe - xb) * 8);
        if (x->kjt.weights && y->kjt.weights)
            assert_memory_equal(x->kjt.weights + xb, y->kjt.weights + yb, (size_t)(xe - xb) * 4);
    }
}

static void test_synth_tsv_reads_back(void **state)
{
    const char *path = path_of("synth.tsv");
    write_synth_tsv(path, 1000, 1); /* with CRLF endings */
    struct sr_synth *s = make_synth(1, 1);
    struct sr_reader *r = open_reader(&path, 1, 0, 1, 128, 0, 1);
    struct sr_batch b, g;
    sr_reader_batch_init(r, &b, NULL);
    sr_batch_init(&g, 128, 13, F, sr_synth_max_values(s, 128), 0, NULL);
    int64_t seen = 0;
    while (sr_reader_next(r, &b) == 1) {
        assert_int_equal(b.first_index, seen);
        sr_synth_fill(s, seen, b.batch_size, &g);
        for (int i = 0; i < b.batch_size; i++)
            assert_same_sample(&b, i, &g, i);
        seen += b.batch_size;
    }
    assert_int_equal(seen, 1000);
    sr_batch_free(&b);
    sr_batch_free(&g);
    sr_reader_free(r);
    sr_synth_free(s);
}

/* All global batches of `paths` read by W ranks of B, checked against one rank of W*B. */
static void check_rank_slicing(const char *const *paths, int n_paths, int G, int keep)
{
    struct sr_reader *one = open_reader(paths, n_paths, 0, 1, G, 0, keep);
    struct sr_batch ref;
    sr_reader_batch_init(one, &ref, NULL);
    for (int W = 2; W <= 3; W++) {
        struct sr_reader *rk[3];
        struct sr_batch bk[3];
        for (int r = 0; r < W; r++) {
            rk[r] = open_reader(paths, n_paths, r, W, G / W, 0, keep);
            sr_reader_batch_init(rk[r], &bk[r], NULL);
        }
        assert_int_equal(sr_reader_rewind(one), SR_OK);
        int rc1, batches = 0;
        while ((rc1 = sr_reader_next(one, &ref)) == 1) {
            int at = 0;
            for (int r = 0; r < W; r++) {
                assert_int_equal(sr_reader_next(rk[r], &bk[r]), 1);
                assert_int_equal(bk[r].first_index, ref.first_index + r * (G / W));
                for (int i = 0; i < bk[r].batch_size; i++)
                    assert_same_sample(&ref, at + i, &bk[r], i);
                at += bk[r].batch_size;
            }
            assert_int_equal(at, ref.batch_size);
            batches++;
        }
        assert_int_equal(rc1, 0);
        assert_true(batches > 3);
        for (int r = 0; r < W; r++) {
            assert_int_equal(sr_reader_next(rk[r], &bk[r]), 0);
            sr_batch_free(&bk[r]);
            sr_reader_free(rk[r]);
        }
    }
    sr_batch_free(&ref);
    sr_reader_free(one);
}

static void test_rank_slicing(void **state)
{
    const char *paths[2] = {path_of("a.tsv"), path_of("b.tsv")};
    write_synth_tsv(paths[0], 500, 0);
    write_synth_tsv(paths[1], 333, 0);
    check_rank_slicing(paths, 2, 42, 0);
    check_rank_slicing(paths, 2, 42, 1);
    /* drop vs keep: 833 samples = 19 full global batches of 42 + 35 */
    struct sr_reader *r = open_reader(paths, 2, 2, 3, 14, 0, 1);
    struct sr_batch b;
    sr_reader_batch_init(r, &b, NULL);
    int n = 0, last = -1;
    while (sr_reader_next(r, &b) == 1) {
        n++;
        last = b.batch_size;
    }
    assert_int_equal(n, 20);
    assert_int_equal(last, 35 - 28);
    sr_batch_free(&b);
    sr_reader_free(r);
}

static void convert(const char *const *in, int n_in, const char *out, int64_t chunk)
{
    struct sr_reader *r = open_reader(in, n_in, 0, 1, 100, 0, 1);
    struct sr_binfmt_writer *w;
    struct sr_batch b;
    sr_reader_batch_init(r, &b, NULL);
    assert_int_equal(sr_binfmt_writer_open(&w, out, 13, F, kaggle_rows, 0, chunk), SR_OK);
    while (sr_reader_next(r, &b) == 1)
        assert_int_equal(sr_binfmt_writer_append(w, &b), SR_OK);
    assert_int_equal(sr_binfmt_writer_close(w), SR_OK);
    sr_batch_free(&b);
    sr_reader_free(r);
}

static void assert_streams_equal(const char *const *pa, int na, const char *const *pb, int nb,
                                 int rank, int world, int B)
{
    struct sr_reader *ra = open_reader(pa, na, rank, world, B, 0, 1);
    struct sr_reader *rb = open_reader(pb, nb, rank, world, B, 0, 1);
    struct sr_batch a, b;
    sr_reader_batch_init(ra, &a, NULL);
    sr_reader_batch_init(rb, &b, NULL);
    int rc, n = 0;
    while ((rc = sr_reader_next(ra, &a)) == 1) {
        assert_int_equal(sr_reader_next(rb, &b), 1);
        assert_int_equal(a.batch_size, b.batch_size);
        assert_int_equal(a.first_index, b.first_index);
        for (int i = 0; i < a.batch_size; i++)
            assert_same_sample(&a, i, &b, i);
        n++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(sr_reader_next(rb, &b), 0);
    assert_true(n > 0);
    sr_batch_free(&a);
    sr_batch_free(&b);
    sr_reader_free(ra);
    sr_reader_free(rb);
}

static void test_binary_round_trip_equals_tsv(void **state)
{
    const char *tsv[2] = {path_of("c.tsv"), path_of("d.tsv")};
    const char *bin = path_of("cd.bin");
    write_synth_tsv(tsv[0], 700, 0);
    write_synth_tsv(tsv[1], 301, 1);
    convert(tsv, 2, bin, 128); /* small chunks: batches cross chunk borders */
    for (int W = 1; W <= 3; W++)
        for (int r = 0; r < W; r++)
            assert_streams_equal(tsv, 2, &bin, 1, r, W, 37);
    check_rank_slicing(&bin, 1, 60, 1);
    /* gzip input, when a gzip tool is at hand */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "gzip -c %s > %s.gz 2>/dev/null", tsv[0], tsv[0]);
    if (system(cmd) == 0) {
        char gz[160];
        snprintf(gz, sizeof gz, "%s.gz", tsv[0]);
        const char *gzp[2] = {gz, tsv[1]};
        assert_streams_equal(tsv, 2, gzp, 2, 0, 1, 64);
    }
}

/* Multi-hot with weights: batches from the generator, written, read back. */
static void test_binary_multi_hot(void **state)
{
    struct sr_synth *s = make_synth(0, 4);
    const char *bin = path_of("mh.bin");
    struct sr_binfmt_writer *w;
    struct sr_batch g;
    int B = 50;
    sr_batch_init(&g, B, 13, F, sr_synth_max_values(s, B), 1, NULL);
    assert_int_equal(sr_binfmt_writer_open(&w, bin, 13, F, kaggle_rows, 1, 64), SR_OK);
    for (int k = 0; k < 7; k++) {
        sr_synth_fill(s, k * B, B, &g);
        for (int64_t i = 0; i < g.kjt.num_values; i++)
            g.kjt.weights[i] = (float)(i % 7) * 0.25f;
        assert_int_equal(sr_binfmt_writer_append(w, &g), SR_OK);
    }
    assert_int_equal(sr_binfmt_writer_close(w), SR_OK);
    struct sr_reader *r = open_reader(&bin, 1, 1, 2, 25, 0, 0);
    struct sr_batch b;
    sr_reader_batch_init(r, &b, NULL);
    assert_true(sr_reader_has_weights(r));
    for (int k = 0; k < 7; k++) {
        assert_int_equal(sr_reader_next(r, &b), 1);
        sr_synth_fill(s, k * B, B, &g);
        for (int64_t i = 0; i < g.kjt.num_values; i++)
            g.kjt.weights[i] = (float)(i % 7) * 0.25f;
        for (int i = 0; i < 25; i++)
            assert_same_sample(&g, 25 + i, &b, i);
        assert_int_equal(sr_kjt_validate(&b.kjt), SR_OK);
    }
    assert_int_equal(sr_reader_next(r, &b), 0);
    sr_batch_free(&b);
    sr_batch_free(&g);
    sr_reader_free(r);
    sr_synth_free(s);
}

/* ---- gzip files, made by hand (stored deflate blocks), so that a test can cut
 * them exactly where it wants: at a line boundary, inside a line, before the
 * trailer. ---------------------------------------------------------------------------- */

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static void put_le(unsigned char *p, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One gzip member holding text[0..n) as one stored block per line; out needs
 * n + 10 + 5 * (lines + 1) + 8 bytes. ends[i] = the member's size up to the
 * end of line i's block (i < 64). Returns the member's size. */
static size_t gzip_member(unsigned char *out, const char *text, size_t n, size_t *ends)
{
    static const unsigned char head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    size_t k = 10, at = 0;
    int line = 0;
    memcpy(out, head, 10);
    while (at < n || line == 0) {
        const char *nl = memchr(text + at, '\n', n - at);
        size_t len = nl ? (size_t)(nl - (text + at)) + 1 : n - at;
        out[k] = at + len == n; /* BFINAL, BTYPE 00 (stored) */
        put_le(out + k + 1, (uint32_t)len, 2);
        put_le(out + k + 3, (uint32_t)~len & 0xffffu, 2);
        memcpy(out + k + 5, text + at, len);
        k += 5 + len;
        at += len;
        if (ends && line < 64)
            ends[line] = k;
        line++;
    }
    put_le(out + k, crc32_of((const unsigned char *)text, n), 4);
    put_le(out + k + 4, (uint32_t)n, 4);
    return k + 8;
}

/* Read all of path (B = 4, keeping a partial batch): the status that ended the
 * stream (0 or an error) and the samples before it. */
static int read_all(const char *path, int skip, int64_t *samples)
{
    struct sr_reader *r = open_reader(&path, 1, 0, 1, 4, skip, 1);
    struct sr_batch b;
    int rc;
    sr_reader_batch_init(r, &b, NULL);
    *samples = 0;
    while ((rc = sr_reader_next(r, &b)) == 1)
        *samples += b.batch_size;
    sr_batch_free(&b);
    sr_reader_free(r);
    return rc;
}

static void expect_gzip_error(const char *path, const char *what)
{
    for (int skip = 0; skip <= 1; skip++) {
        int64_t n;
        int rc = read_all(path, skip, &n);
        if (rc != SR_ERR_DATA || !strstr(sr_error_message(), path) ||
            !strstr(sr_error_message(), what))
            fail_msg("%s (skip-bad-lines %d): status %d after %lld samples, '%s' lacks '%s'", path,
                     skip, rc, (long long)n, sr_error_message(), what);
    }
}

static void test_gzip_strict(void **state)
{
    char text[8192], *p = text;
    for (int i = 0; i < 6; i++) {
        good_line(p, i & 1);
        p += strlen(p);
        *p++ = '\n';
    }
    size_t n = (size_t)(p - text), ends[64];
    size_t half = (size_t)(strchr(strchr(strchr(text, '\n') + 1, '\n') + 1, '\n') + 1 - text);
    unsigned char *gz = malloc(4 * n + 1024);
    size_t m = gzip_member(gz, text, n, ends);
    const char *path = path_of("t.gz");
    int64_t samples;

    write_bytes(path, (char *)gz, m); /* whole: 6 samples */
    assert_int_equal(read_all(path, 0, &samples), 0);
    assert_int_equal(samples, 6);
    /* two members (`cat a.gz b.gz`): both are read */
    size_t m1 = gzip_member(gz, text, half, NULL);
    size_t m2 = gzip_member(gz + m1, text + half, n - half, NULL);
    write_bytes(path, (char *)gz, m1 + m2);
    assert_int_equal(read_all(path, 0, &samples), 0);
    assert_int_equal(samples, 6);
    /* trailing garbage after the last member, text or zeros */
    memcpy(gz + m1 + m2, "junk\n", 5);
    write_bytes(path, (char *)gz, m1 + m2 + 5);
    expect_gzip_error(path, "trailing garbage");
    memset(gz + m1 + m2, 0, 16);
    write_bytes(path, (char *)gz, m1 + m2 + 16);
    expect_gzip_error(path, "trailing garbage");

    m = gzip_member(gz, text, n, ends);
    write_bytes(path, (char *)gz, m - 8); /* all lines, no trailer */
    expect_gzip_error(path, "truncated");
    write_bytes(path, (char *)gz, ends[2]); /* cut at a line boundary, mid-member */
    expect_gzip_error(path, "truncated");
    write_bytes(path, (char *)gz, ends[2] + 20); /* cut inside line 4 */
    expect_gzip_error(path, "truncated");
    write_bytes(path, (char *)gz, 5); /* inside the header */
    expect_gzip_error(path, "truncated");
    free(gz);
}

static int open_expect(const char *path, const char *needle)
{
    struct sr_reader_options o = {.world = 1, .batch_size = 8};
    struct sr_reader *r = NULL;
    int rc = sr_reader_open(&r, &path, 1, F, kaggle_rows, &o);
    if (rc && !strstr(sr_error_message(), needle))
        fail_msg("'%s' lacks '%s'", sr_error_message(), needle);
    assert_null(r);
    return rc;
}

static void test_truncated_binary_rejected(void **state)
{
    const char *tsv = path_of("e.tsv"), *bin = path_of("e.bin"), *bad = path_of("bad.bin");
    write_synth_tsv(tsv, 300, 0);
    convert(&tsv, 1, bin, 100);
    FILE *f = fopen(bin, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    char *data = malloc((size_t)size);
    rewind(f);
    assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    for (long cut = 1; cut < size; cut += size / 17 + 1) {
        write_bytes(bad, data, (size_t)(size - cut));
        assert_int_equal(open_expect(bad, bad), SR_ERR_DATA);
    }
    write_bytes(bad, data, 20);
    assert_int_equal(open_expect(bad, "no shardrec binary header"), SR_ERR_DATA);
    data[8] = 9; /* version */
    write_bytes(bad, data, (size_t)size);
    assert_int_equal(open_expect(bad, "format version 9"), SR_ERR_DATA);
    data[8] = 1;
    data[128] ^= 1; /* rows of feature 0 differ from the model's */
    write_bytes(bad, data, (size_t)size);
    assert_int_equal(open_expect(bad, "convert again"), SR_ERR_DATA);
    data[128] ^= 1;
    data[100] = 7; /* a reserved header byte */
    write_bytes(bad, data, (size_t)size);
    assert_int_equal(open_expect(bad, "reserved header byte 100"), SR_ERR_DATA);
    free(data);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    char *d = malloc(*n + 1);
    assert_int_equal(fread(d, 1, *n, f), *n);
    fclose(f);
    return d;
}

/* Files in the test directory whose name holds the atomic writes' temporary tag. */
static int count_temporaries(void)
{
    return sr_test_count_named(".sr-tmp-", ".tmp");
}

/* A conversion that fails half-way (a bad line after a chunk was written)
 * leaves the old output as it was and no temporary file. */
static void test_failed_convert_keeps_old(void **state)
{
    const char *tsv = path_of("k.tsv"), *out = path_of("k.bin"), *bad = path_of("kbad.tsv");
    write_synth_tsv(tsv, 50, 0);
    convert(&tsv, 1, out, 16);
    size_t n0, nb;
    char *orig = slurp(out, &n0), *text = slurp(tsv, &nb);
    text = realloc(text, nb + 8);
    memcpy(text + nb, "2\tx\n", 4); /* a bad last line */
    write_bytes(bad, text, nb + 4);
    free(text);

    struct sr_reader *r = open_reader(&bad, 1, 0, 1, 10, 0, 1);
    struct sr_binfmt_writer *w;
    struct sr_batch b;
    int rc;
    sr_reader_batch_init(r, &b, NULL);
    assert_int_equal(sr_binfmt_writer_open(&w, out, 13, F, kaggle_rows, 0, 16), SR_OK);
    assert_int_equal(count_temporaries(), 1);
    while ((rc = sr_reader_next(r, &b)) == 1)
        assert_int_equal(sr_binfmt_writer_append(w, &b), SR_OK);
    assert_int_equal(rc, SR_ERR_DATA);
    assert_true(sr_binfmt_writer_count(w) >= 40); /* chunks were written */
    sr_binfmt_writer_abort(w);
    size_t n1;
    char *now = slurp(out, &n1);
    assert_int_equal(n1, n0);
    assert_memory_equal(now, orig, n0);
    assert_int_equal(count_temporaries(), 0);
    free(now);
    free(orig);
    sr_batch_free(&b);
    sr_reader_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fields),
        cmocka_unit_test(test_dense_transform_exact),
        cmocka_unit_test(test_bad_lines_rejected_with_place),
        cmocka_unit_test(test_skip_bad_lines_counts),
        cmocka_unit_test(test_synth_tsv_reads_back),
        cmocka_unit_test(test_rank_slicing),
        cmocka_unit_test(test_binary_round_trip_equals_tsv),
        cmocka_unit_test(test_binary_multi_hot),
        cmocka_unit_test(test_truncated_binary_rejected),
        cmocka_unit_test(test_gzip_strict),
        cmocka_unit_test(test_failed_convert_keeps_old),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
