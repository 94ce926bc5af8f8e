/*
 * libFuzzer target for the safetensors reader (src/core/safetensors.c): the
 * input is a whole file. Checked: verification never reads outside the buffer
 * or leaks (cJSON's tree included), and for a file it accepts every tensor's
 * data lies inside the buffer (each float is read), names are unique and
 * found by sr_st_find with the same view, and offsets tile the data area.
 * Build and run with tools/fuzz.sh; seeds in tests/fuzz/seeds_fuzz_safetensors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/safetensors.h"

static volatile float sink;

static void check_tensor(const struct sr_st_file *f, int i, const struct sr_st_tensor *prev)
{
    struct sr_st_tensor t;
    const float *data;
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    sr_st_get(f, i, &t);
    int64_t numel = sr_st_numel(t.ndim, t.shape);
    if (numel < 0 || t.ndim > SR_ST_MAX_DIMS)
        abort();
    float acc = 0;
    for (int64_t k = 0; k < numel; k++)
        acc += t.data[k];
    sink = acc;
    /* tensors follow each other in offset order without gaps */
    if (prev && (const uint8_t *)t.data !=
                    (const uint8_t *)prev->data + 4 * sr_st_numel(prev->ndim, prev->shape))
        abort();
    if (sr_st_find(f, t.name, &data, &ndim, shape) != SR_OK || data != t.data || ndim != t.ndim)
        abort();
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
    for (int i = 0; i < sr_st_count(f); i++) {
        check_tensor(f, i, i ? &prev : NULL);
        sr_st_get(f, i, &prev);
    }
    sr_st_close(f);
    return 0;
}
