/*
 * libFuzzer target for the safetensors reader (src/core/safetensors.c): the
 * input is a whole file. Checked: verification never reads outside the buffer
 * or leaks (cJSON's tree included), and for a file it accepts every tensor's
 * data lies inside the buffer (each byte is read) on a multiple of its
 * element size, names are unique and found by sr_st_find_any with the same
 * view (by sr_st_find too when F32, which refuses F16 and BF16), and offsets
 * tile the data area; every __metadata__ key and value is a string inside
 * the file's own copy. The pooling records (src/train/weights_meta.c) are read
 * from what it accepts: a record read names a table of 1 to SR_NAME_MAX - 1
 * bytes and pools by sum or mean; a refusal says why.
 * Build and run with tools/fuzz.sh; seeds in tests/fuzz/seeds_fuzz_safetensors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"
#include "shardrec/weights_io.h"

static volatile unsigned sink;

static void check_tensor(const struct sr_st_file *f, int i, const struct sr_st_tensor *prev)
{
    struct sr_st_tensor t, any;
    const float *data;
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    sr_st_get(f, i, &t);
    int64_t numel = sr_st_numel(t.ndim, t.shape);
    if (numel < 0 || t.ndim > SR_ST_MAX_DIMS)
        abort();
    const int w = sr_st_dtype_bytes(t.dtype);
    const uint8_t *bytes = (const uint8_t *)t.data;
    unsigned acc = 0;
    for (int64_t k = 0; k < numel * w; k++)
        acc += bytes[k];
    sink = acc;
    /* tensors follow each other in offset order without gaps, each on its element size */
    if (prev && bytes != (const uint8_t *)prev->data +
                             (int64_t)sr_st_dtype_bytes(prev->dtype) * sr_st_numel(prev->ndim, prev->shape))
        abort();
    struct sr_st_tensor first; /* at data offset 0: tensors tile the data area */
    sr_st_get(f, 0, &first);
    if ((uintptr_t)(bytes - (const uint8_t *)first.data) % (uintptr_t)w)
        abort();
    if (sr_st_find_any(f, t.name, &any) != SR_OK || any.data != t.data || any.dtype != t.dtype)
        abort();
    const int rc = sr_st_find(f, t.name, &data, &ndim, shape);
    if (t.dtype == SR_DTYPE_F32 ? rc != SR_OK || data != t.data || ndim != t.ndim
                                : rc != SR_ERR_UNSUPPORTED)
        abort();
}

static void check_pooling(const struct sr_st_file *f)
{
    struct sr_weights_pooling *rec;
    int n = -1;
    if (sr_weights_pooling_read(f, &rec, &n) != SR_OK) {
        if (rec || n != 0 || !sr_error_message()[0])
            abort();
        return;
    }
    if (n < 0 || n > sr_st_meta_count(f) || (n == 0) != (rec == NULL))
        abort();
    for (int i = 0; i < n; i++) {
        const size_t len = strnlen(rec[i].table, SR_NAME_MAX);
        if (len == 0 || len >= SR_NAME_MAX ||
            (rec[i].pooling != SR_POOLING_SUM && rec[i].pooling != SR_POOLING_MEAN))
            abort();
    }
    sr_free(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *buf, size_t size)
{
    struct sr_st_file *f;
    if (sr_st_open_memory(&f, buf, size, "fuzz") != SR_OK) {
        if (f || !sr_error_message()[0])
            abort();
        return 0;
    }
    struct sr_st_tensor prev;
    for (int i = 0; i < sr_st_meta_count(f); i++) {
        struct sr_st_meta kv;
        sr_st_meta_get(f, i, &kv);
        sink = (unsigned)(strlen(kv.key) + strlen(kv.value));
    }
    for (int i = 0; i < sr_st_count(f); i++) {
        check_tensor(f, i, i ? &prev : NULL);
        sr_st_get(f, i, &prev);
    }
    check_pooling(f);
    sr_st_close(f);
    return 0;
}
