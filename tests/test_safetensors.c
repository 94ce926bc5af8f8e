/*
 * safetensors reader and writer: a round trip (2-D, 1-D, scalar and empty
 * tensors; name order; 8-byte aligned data area; no temporary file left;
 * overwrite),
 * a misaligned data area read through a copy, and every kind of corrupt file
 * rejected with a message naming the file, the tensor and what is wrong:
 * truncation, header length out of range or past the file, offsets past the
 * data area, unordered, overlapping, leaving gaps or trailing bytes, a size
 * that does not match the shape, negative/fractional/overflowing shapes, too
 * many dimensions, non-F32 dtypes, bad JSON, trailing bytes after the JSON,
 * duplicate names, bad __metadata__ (not an object, a value not a string,
 * given twice). __metadata__ entries read back in the header's order;
 * written after "format", sorted by key, and the layout's header is the
 * written one; bad entries (empty, reserved or duplicate key, no value) are
 * writer errors. Writer errors leave no file behind, and a failed write
 * (file size limit) keeps the old file.
 *
 * Corrupt files are built from a JSON header and a data-area length by
 * make_file, and read from memory (sr_st_open_memory), which runs the same
 * checks as sr_st_open.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/tmpdir.h"

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"

#define setup    sr_test_tmpdir_setup
#define teardown sr_test_tmpdir_teardown
#define path_of  sr_test_path

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Files in the test directory named like an atomic write's temporary file. */
static int count_temporaries(void)
{
    return sr_test_count_named(".sr-tmp-", NULL);
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = sr_malloc(*n + 1);
    assert_int_equal(fread(buf, 1, *n, f), *n);
    fclose(f);
    return buf;
}

/* | u64 header length | header JSON | data_len bytes of 0x3f | in a fresh buffer. */
static uint8_t *make_file(const char *json, size_t data_len, size_t *n)
{
    uint64_t hlen = strlen(json);
    *n = 8 + hlen + data_len;
    uint8_t *buf = sr_malloc(*n + 1);
    memcpy(buf, &hlen, 8);
    memcpy(buf + 8, json, hlen);
    memset(buf + 8 + hlen, 0x3f, data_len);
    return buf;
}

/* Open bytes that must be rejected with `status`, the message containing each
 * of the NULL-terminated substrings (and always the label). */
static void expect_reject(const uint8_t *buf, size_t n, int status, ...)
{
    struct sr_st_file *f = (struct sr_st_file *)1;
    va_list ap;
    const char *want;
    int rc = sr_st_open_memory(&f, buf, n, "bad.safetensors");
    assert_null(f);
    if (rc != status)
        fail_msg("status %d (want %d): %s", rc, status, sr_error_message());
    const char *msg = sr_error_message();
    if (strncmp(msg, "bad.safetensors: ", 17) != 0)
        fail_msg("message does not start with the file: %s", msg);
    va_start(ap, status);
    while ((want = va_arg(ap, const char *)))
        if (!strstr(msg, want))
            fail_msg("message lacks \"%s\": %s", want, msg);
    va_end(ap);
}

static void reject_json(const char *json, size_t data_len, int status, const char *a, const char *b)
{
    size_t n;
    uint8_t *buf = make_file(json, data_len, &n);
    expect_reject(buf, n, status, a, b, (const char *)NULL);
    sr_free(buf);
}

/* ---- round trip ------------------------------------------------------------------ */

static void test_round_trip(void **state)
{
    float w[6] = {1, -2, 3.5f, 4, 5e-30f, -0.0f}, b[3] = {7, 8, 9}, s = 42;
    struct sr_st_tensor in[] = {
        {.name = "top.weight", .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "a.bias", .ndim = 1, .shape = {3}, .data = b},
        {.name = "scalar", .ndim = 0, .data = &s},
        {.name = "empty", .ndim = 2, .shape = {0, 4}, .data = NULL},
    };
    const char *path = path_of("rt.safetensors");
    struct sr_st_file *f;
    assert_int_equal(sr_st_write(path, 4, in), SR_OK);
    assert_int_equal(count_temporaries(), 0);
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_int_equal(sr_st_count(f), 4);
    /* written in name order, so data-offset order is name order */
    const char *order[] = {"a.bias", "empty", "scalar", "top.weight"};
    for (int i = 0; i < 4; i++)
        assert_string_equal(sr_st_name(f, i), order[i]);

    const float *data;
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    assert_int_equal(sr_st_find(f, "top.weight", &data, &ndim, shape), SR_OK);
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 3);
    assert_memory_equal(data, w, sizeof w);
    assert_int_equal((uintptr_t)data % 4, 0);
    assert_int_equal(sr_st_find(f, "scalar", &data, &ndim, shape), SR_OK);
    assert_int_equal(ndim, 0);
    assert_true(data[0] == 42);
    assert_int_equal(sr_st_find(f, "empty", NULL, &ndim, shape), SR_OK);
    assert_int_equal(shape[0], 0);
    assert_int_equal(sr_st_find(f, "nope", NULL, NULL, NULL), SR_ERR_DATA);
    assert_non_null(strstr(sr_error_message(), "no tensor named nope"));
    sr_st_close(f);

    /* header length padded so the data area starts 8-byte aligned */
    size_t n;
    uint8_t *raw = read_all(path, &n);
    uint64_t hlen;
    memcpy(&hlen, raw, 8);
    assert_int_equal(hlen % 8, 0);
    assert_int_equal(n, 8 + hlen + sizeof w + sizeof b + sizeof s);
    assert_non_null(strstr((const char *)raw + 8, "\"__metadata__\":{\"format\":\"pt\"}"));
    sr_free(raw);

    /* overwriting replaces the file, still without a .tmp */
    assert_int_equal(sr_st_write(path, 1, in + 1), SR_OK);
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_int_equal(sr_st_count(f), 1);
    sr_st_close(f);
    assert_int_equal(count_temporaries(), 0);
    sr_st_close(NULL);
}

static void test_misaligned_data_is_copied(void **state)
{
    /* in a buffer starting one byte past an allocation, this header puts the data
     * area off 4-byte alignment (asserted below) */
    const char *json = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    float v[2] = {1.25f, -3};
    size_t n;
    uint8_t *buf = make_file(json, sizeof v, &n);
    size_t hlen = strlen(json);
    memcpy(buf + 8 + hlen, v, sizeof v);
    uint8_t *odd = sr_malloc(n + 1);
    memcpy(odd + 1, buf, n);
    assert_int_not_equal((uintptr_t)(odd + 1 + 8 + hlen) % 4, 0);
    struct sr_st_file *f;
    const float *data;
    assert_int_equal(sr_st_open_memory(&f, odd + 1, n, "odd"), SR_OK);
    assert_int_equal(sr_st_find(f, "x", &data, NULL, NULL), SR_OK);
    assert_int_equal((uintptr_t)data % 4, 0);
    assert_memory_equal(data, v, sizeof v);
    sr_st_close(f);
    sr_free(odd);
    sr_free(buf);
}

static void test_metadata_and_empty_file_of_tensors(void **state)
{
    size_t n;
    uint8_t *buf = make_file("{\"__metadata__\":{\"k\":\"v\",\"a\":\"\"}}", 0, &n);
    struct sr_st_file *f;
    struct sr_st_meta kv;
    assert_int_equal(sr_st_open_memory(&f, buf, n, "meta"), SR_OK);
    assert_int_equal(sr_st_count(f), 0);
    assert_int_equal(sr_st_meta_count(f), 2); /* the header's order */
    sr_st_meta_get(f, 0, &kv);
    assert_string_equal(kv.key, "k");
    assert_string_equal(kv.value, "v");
    sr_st_meta_get(f, 1, &kv);
    assert_string_equal(kv.key, "a");
    assert_string_equal(kv.value, "");
    sr_st_close(f);
    sr_free(buf);
    buf = make_file("{}", 0, &n);
    assert_int_equal(sr_st_open_memory(&f, buf, n, "none"), SR_OK);
    assert_int_equal(sr_st_meta_count(f), 0);
    sr_st_close(f);
    sr_free(buf);
    reject_json("{\"__metadata__\":{\"k\":1}}", 0, SR_ERR_DATA, "__metadata__", "not a string");
    reject_json("{\"__metadata__\":[]}", 0, SR_ERR_DATA, "__metadata__", "not an object");
    reject_json("{\"__metadata__\":{},\"__metadata__\":{\"k\":\"v\"}}", 0, SR_ERR_DATA,
                "__metadata__ appears twice", (const char *)NULL);
}

static void test_metadata_written(void **state)
{
    float w[2] = {1, 2};
    struct sr_st_tensor t = {.name = "x", .ndim = 1, .shape = {2}, .data = w};
    struct sr_st_meta meta[] = {{"shardrec.b", "2"}, {"a", "1"}}, kv;
    const char *path = path_of("meta.safetensors");
    struct sr_st_file *f;
    struct sr_st_layout l;
    size_t n;
    assert_int_equal(sr_st_write_meta(path, 1, &t, 2, meta), SR_OK);
    uint8_t *raw = read_all(path, &n);
    assert_non_null(
        strstr((const char *)raw + 8,
               "{\"__metadata__\":{\"format\":\"pt\",\"a\":\"1\",\"shardrec.b\":\"2\"},"));
    /* the layout's header is the written one, whatever the entries' order */
    struct sr_st_meta swapped[] = {meta[1], meta[0]};
    assert_int_equal(sr_st_layout(path, 1, &t, 2, swapped, &l), SR_OK);
    assert_int_equal(l.file_size, n);
    assert_memory_equal(l.header, raw, l.header_len);
    sr_st_layout_free(&l);
    sr_free(raw);
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_int_equal(sr_st_meta_count(f), 3);
    const char *keys[] = {"format", "a", "shardrec.b"}, *values[] = {"pt", "1", "2"};
    for (int i = 0; i < 3; i++) {
        sr_st_meta_get(f, i, &kv);
        assert_string_equal(kv.key, keys[i]);
        assert_string_equal(kv.value, values[i]);
    }
    sr_st_close(f);

    /* bad entries: nothing written */
    const char *bad = path_of("badmeta.safetensors");
    struct sr_st_meta reserved = {"format", "x"}, empty = {"", "x"}, none = {"k", NULL};
    struct sr_st_meta dup[] = {{"k", "1"}, {"k", "2"}};
    assert_int_equal(sr_st_write_meta(bad, 1, &t, 1, &reserved), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "\"format\" is empty or reserved"));
    assert_int_equal(sr_st_write_meta(bad, 1, &t, 1, &empty), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_st_write_meta(bad, 1, &t, 1, &none), SR_ERR_INVALID_ARG);
    assert_int_equal(sr_st_write_meta(bad, 1, &t, 2, dup), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "key k is given twice"));
    assert_int_equal(sr_st_layout(bad, 1, &t, 2, dup, &l), SR_ERR_INVALID_ARG);
    assert_null(l.header);
    assert_false(exists(bad));
    assert_int_equal(count_temporaries(), 0);
}

/* ---- corrupt files ---------------------------------------------------------------- */

#define ONE(name, shape, b, e)                                                                     \
    "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_truncated(void **state)
{
    float w[4] = {1, 2, 3, 4};
    struct sr_st_tensor t = {.name = "w", .ndim = 1, .shape = {4}, .data = w};
    const char *path = path_of("trunc.safetensors");
    size_t n;
    assert_int_equal(sr_st_write(path, 1, &t), SR_OK);
    uint8_t *raw = read_all(path, &n);
    expect_reject(raw, n - 4, SR_ERR_DATA, "tensor w", "run past the end of the data area",
                  "truncated", (const char *)NULL);
    expect_reject(raw, 20, SR_ERR_DATA, "header length", "runs past the end of the file",
                  (const char *)NULL);
    expect_reject(raw, 5, SR_ERR_DATA, "too short", (const char *)NULL);
    expect_reject(raw, 0, SR_ERR_DATA, "too short", (const char *)NULL);
    sr_free(raw);

    /* an empty file on disk, a missing file, a directory */
    struct sr_st_file *f;
    FILE *e = fopen(path_of("empty.safetensors"), "wb");
    fclose(e);
    assert_int_equal(sr_st_open(&f, path_of("empty.safetensors")), SR_ERR_DATA);
    assert_non_null(strstr(sr_error_message(), "empty.safetensors: the file is 0 bytes"));
    assert_int_equal(sr_st_open(&f, path_of("missing.safetensors")), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "missing.safetensors: cannot open"));
    assert_int_equal(sr_st_open(&f, sr_test_dir()), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), "not a regular file"));
}

static void test_header_length(void **state)
{
    uint8_t buf[64] = {0};
    uint64_t huge = UINT64_MAX, one = 1, big = SR_ST_MAX_HEADER + 1;
    memcpy(buf, &huge, 8);
    expect_reject(buf, sizeof buf, SR_ERR_DATA, "header length 18446744073709551615 is not in",
                  (const char *)NULL);
    memcpy(buf, &one, 8);
    expect_reject(buf, sizeof buf, SR_ERR_DATA, "header length 1 is not in", (const char *)NULL);
    memcpy(buf, &big, 8);
    expect_reject(buf, sizeof buf, SR_ERR_DATA, "is not in [2, 100000000]", (const char *)NULL);
}

static void test_offsets(void **state)
{
    reject_json("{" ONE("w", "[4]", 0, 1000) "}", 16, SR_ERR_DATA, "tensor w",
                "[0, 1000] run past the end of the data area (16 bytes)");
    reject_json("{" ONE("w", "[4]", 16, 0) "}", 16, SR_ERR_DATA, "tensor w", "not ordered");
    reject_json("{" ONE("a", "[4]", 0, 16) "," ONE("b", "[4]", 8, 24) "}", 24, SR_ERR_DATA,
                "tensors a and b overlap", NULL);
    reject_json("{" ONE("a", "[4]", 0, 16) "," ONE("b", "[4]", 0, 16) "}", 16, SR_ERR_DATA,
                "overlap", NULL);
    reject_json("{" ONE("a", "[4]", 0, 16) "," ONE("b", "[4]", 20, 36) "}", 36, SR_ERR_DATA,
                "4 unused bytes before tensor b", NULL);
    reject_json("{" ONE("a", "[4]", 0, 16) "}", 20, SR_ERR_DATA, "4 bytes after the last tensor",
                NULL);
    reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0]}}", 16, SR_ERR_DATA,
                "tensor w", "not a pair of non-negative integers");
    reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[-16,0]}}", 16,
                SR_ERR_DATA, "tensor w", "not a pair");
    reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[4]}}", 16, SR_ERR_DATA, "tensor w",
                "data_offsets");
}

static void test_shapes(void **state)
{
    reject_json("{" ONE("w", "[3]", 0, 16) "}", 16, SR_ERR_DATA, "tensor w",
                "data_offsets hold 16 bytes, shape [3] of F32 needs 12");
    reject_json("{" ONE("w", "[-1]", 0, 16) "}", 16, SR_ERR_DATA, "tensor w",
                "shape entry 0 is not a non-negative integer");
    reject_json("{" ONE("w", "[4, 1.5]", 0, 16) "}", 16, SR_ERR_DATA, "tensor w", "shape entry 1");
    reject_json("{" ONE("w", "[4294967296, 4294967296]", 0, 16) "}", 16, SR_ERR_DATA, "tensor w",
                "overflows");
    reject_json("{" ONE("w", "[1e300]", 0, 16) "}", 16, SR_ERR_DATA, "tensor w",
                "not a non-negative integer");
    reject_json("{" ONE("w", "[1,1,1,1,4]", 0, 16) "}", 16, SR_ERR_DATA, "tensor w",
                "5 dimensions");
    reject_json("{" ONE("w", "\"4\"", 0, 16) "}", 16, SR_ERR_DATA, "tensor w", "\"shape\"");
}

/* F16 and BF16 open (sr_st_get hands them out with their dtype); sr_st_find
 * wants F32 and says so. */
static void find_refused(const char *dtype)
{
    char json[160];
    size_t n;
    struct sr_st_file *f = NULL;
    struct sr_st_tensor t;
    snprintf(json, sizeof json, "{\"h\":{\"dtype\":\"%s\",\"shape\":[8],\"data_offsets\":[0,16]}}",
             dtype);
    uint8_t *buf = make_file(json, 16, &n);
    assert_int_equal(sr_st_open_memory(&f, buf, n, "mem"), SR_OK);
    sr_st_get(f, 0, &t);
    assert_int_equal(t.dtype, strcmp(dtype, "F16") ? SR_DTYPE_BF16 : SR_DTYPE_F16);
    assert_int_equal(sr_st_find(f, "h", NULL, NULL, NULL), SR_ERR_UNSUPPORTED);
    assert_non_null(strstr(sr_error_message(), "tensor h has dtype"));
    assert_non_null(strstr(sr_error_message(), "F32 only here"));
    sr_st_close(f);
    sr_free(buf);
}

static void test_dtypes(void **state)
{
    find_refused("F16");
    find_refused("BF16");
    reject_json("{\"h\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,8]}}", 16,
                SR_ERR_DATA, "shape [8] of F16 needs 16", NULL);
    reject_json("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]},"
                "\"c\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[6,8]}}", 8,
                SR_ERR_UNSUPPORTED, "tensor b (F32) starts at data offset 2", NULL);
    reject_json("{\"h\":{\"dtype\":\"I8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8,
                SR_ERR_UNSUPPORTED, "tensor h has dtype I8", "HINT");
    reject_json("{\"h\":{\"dtype\":\"Q4\",\"shape\":[8],\"data_offsets\":[0,16]}}", 16, SR_ERR_DATA,
                "unknown dtype \"Q4\"", NULL);
    reject_json("{\"h\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 16, SR_ERR_DATA,
                "tensor h has no \"dtype\"", NULL);
}

/* 16-bit tensors beside F32 ones: written widest first whatever their names,
 * read back bit for bit with their dtypes. */
static void test_round_trip_16(void **state)
{
    float w[3] = {1.5f, -2, 0.25f};
    uint16_t h[5] = {0x3c00, 0xbc00, 0x7bff, 0x0001, 0x8000}, g[2] = {0x3f80, 0xc049};
    struct sr_st_tensor in[] = {
        {.name = "a.half", .ndim = 1, .shape = {5}, .data = (const float *)h, .dtype = SR_DTYPE_F16},
        {.name = "b.bf", .ndim = 2, .shape = {1, 2}, .data = (const float *)g,
         .dtype = SR_DTYPE_BF16},
        {.name = "z.float", .ndim = 1, .shape = {3}, .data = w},
    };
    const char *path = path_of("rt16.safetensors");
    struct sr_st_file *f;
    struct sr_st_tensor t;
    assert_int_equal(sr_st_write(path, 3, in), SR_OK);
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    sr_st_get(f, 0, &t); /* data-offset order: the F32 tensor first */
    assert_string_equal(t.name, "z.float");
    assert_int_equal(t.dtype, SR_DTYPE_F32);
    assert_memory_equal(t.data, w, sizeof w);
    sr_st_get(f, 1, &t);
    assert_string_equal(t.name, "a.half");
    assert_int_equal(t.dtype, SR_DTYPE_F16);
    assert_memory_equal(t.data, h, sizeof h);
    sr_st_get(f, 2, &t);
    assert_string_equal(t.name, "b.bf");
    assert_int_equal(t.dtype, SR_DTYPE_BF16);
    assert_int_equal(t.shape[1], 2);
    assert_memory_equal(t.data, g, sizeof g);
    sr_st_close(f);
}

static void test_json(void **state)
{
    reject_json("{\"a\": ", 0, SR_ERR_DATA, "not valid JSON", NULL);
    reject_json("{\"a\" \"b\"}", 0, SR_ERR_DATA, "not valid JSON", NULL);
    reject_json("{}x", 0, SR_ERR_DATA, "unexpected bytes after the JSON header", NULL);
    reject_json("[1, 2]", 0, SR_ERR_DATA, "not a JSON object", NULL);
    reject_json("{\"w\": 3}", 0, SR_ERR_DATA, "tensor w", "not an object");
    reject_json("{" ONE("a", "[4]", 0, 16) "," ONE("a", "[4]", 16, 32) "}", 32, SR_ERR_DATA,
                "tensor a appears twice", NULL);
    reject_json("{" ONE("", "[4]", 0, 16) "}", 16, SR_ERR_DATA, "empty name", NULL);
    /* trailing spaces (the format's padding) and a NUL-free header are fine */
    size_t n;
    uint8_t *buf = make_file("{}      ", 0, &n);
    struct sr_st_file *f;
    assert_int_equal(sr_st_open_memory(&f, buf, n, "pad"), SR_OK);
    sr_st_close(f);
    sr_free(buf);
    /* a NUL inside the header ends the JSON early: the rest is not whitespace */
    buf = make_file("{}  x   ", 0, &n);
    buf[10] = 0;
    expect_reject(buf, n, SR_ERR_DATA, "unexpected bytes", (const char *)NULL);
    sr_free(buf);
}

/* ---- writer errors ------------------------------------------------------------------- */

static void test_writer_errors(void **state)
{
    float w[2] = {1, 2};
    struct sr_st_tensor dup[] = {{.name = "x", .ndim = 1, .shape = {2}, .data = w},
                                 {.name = "x", .ndim = 1, .shape = {2}, .data = w}};
    struct sr_st_tensor t = {.name = "x", .ndim = 5, .shape = {1, 1, 1, 1}, .data = w};
    char path[128];
    snprintf(path, sizeof path, "%s", path_of("w.safetensors"));
    assert_int_equal(sr_st_write(path, 2, dup), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "tensor x is given twice"));
    assert_int_equal(sr_st_write(path, 1, &t), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "ndim 5"));
    t.ndim = 1, t.data = NULL;
    assert_int_equal(sr_st_write(path, 1, &t), SR_ERR_INVALID_ARG);
    assert_non_null(strstr(sr_error_message(), "no data"));
    t.name = "__metadata__", t.data = w;
    assert_int_equal(sr_st_write(path, 1, &t), SR_ERR_INVALID_ARG);
    t.name = "x", t.shape[0] = -2;
    assert_int_equal(sr_st_write(path, 1, &t), SR_ERR_INVALID_ARG);
    assert_false(exists(path));
    assert_int_equal(count_temporaries(), 0);

    /* an unwritable place: SR_ERR_IO naming the path, nothing left behind */
    t.shape[0] = 2;
    const char *nodir = path_of("no/such/dir/w.safetensors");
    assert_int_equal(sr_st_write(nodir, 1, &t), SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), nodir));
    assert_non_null(strstr(sr_error_message(), "HINT"));

    /* a squatter on the old predictable PATH.tmp is irrelevant (the temporary
     * name is random and created exclusively) */
    assert_int_equal(sr_st_write(path, 1, &t), SR_OK);
    assert_int_equal(mkdir(path_of("w.safetensors.tmp"), 0755), 0);
    struct sr_st_tensor other = {.name = "y", .ndim = 1, .shape = {1}, .data = w};
    assert_int_equal(sr_st_write(path, 1, &other), SR_OK);
    rmdir(path_of("w.safetensors.tmp"));
    struct sr_st_file *f;
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_string_equal(sr_st_name(f, 0), "y");
    sr_st_close(f);

    /* a write that fails (the file size limit stands in for a full disk) keeps
     * the old file intact and leaves no temporary file */
    static float big[1 << 16];
    struct sr_st_tensor huge = {.name = "z", .ndim = 1, .shape = {1 << 16}, .data = big};
    struct rlimit old_lim, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    lim = old_lim;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = sr_st_write(path, 1, &huge);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, SR_ERR_IO);
    assert_non_null(strstr(sr_error_message(), path));
    assert_int_equal(count_temporaries(), 0);
    assert_int_equal(sr_st_open(&f, path), SR_OK);
    assert_string_equal(sr_st_name(f, 0), "y");
    sr_st_close(f);
}

static void test_helpers(void **state)
{
    int64_t s[3] = {2, 3, 4}, neg[1] = {-1}, big[2] = {INT64_MAX / 2, 3};
    char buf[64];
    assert_int_equal(sr_st_numel(3, s), 24);
    assert_int_equal(sr_st_numel(0, s), 1);
    assert_int_equal(sr_st_numel(1, neg), -1);
    assert_int_equal(sr_st_numel(2, big), -1);
    sr_st_shape_str(3, s, buf, sizeof buf);
    assert_string_equal(buf, "[2, 3, 4]");
    sr_st_shape_str(0, s, buf, sizeof buf);
    assert_string_equal(buf, "[]");
    sr_st_shape_str(3, s, buf, 4);
    assert_int_equal(strlen(buf), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_misaligned_data_is_copied),
        cmocka_unit_test(test_metadata_and_empty_file_of_tensors),
        cmocka_unit_test(test_metadata_written),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_length),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_round_trip_16),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
