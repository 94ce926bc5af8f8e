/*
 * libFuzzer target for the binary sample format's reader (src/data/binfmt.c):
 * the input is a whole file. Checked: verification never reads outside the
 * buffer, and for a file it accepts, copying the first samples into a batch
 * (dense, labels, lengths, offsets, ids, weights) stays in bounds and yields
 * ids inside [0, rows) or a clean SR_ERR_DATA. Build and run with tools/fuzz.sh;
 * seeds in tests/fuzz/seeds_fuzz_binfmt (small valid one-hot and multi-hot files).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/binfmt.h"
#include "shardrec/error.h"

#define MAX_B 16

static void copy_some(const struct sr_binfmt_view *v)
{
    int64_t n = v->num_samples < MAX_B ? v->num_samples : MAX_B;
    int64_t first = v->num_samples - n; /* the last samples: the last chunk is the odd one */
    if (n == 0 || v->max_sample_values > 4096)
        return;
    struct sr_batch b;
    sr_batch_init(&b, MAX_B, v->num_dense, v->num_features, v->max_sample_values * MAX_B,
                  v->has_weights, NULL);
    b.kjt.stride = (int)n;
    if (sr_binfmt_copy_head(v, first, n, &b, 0) == SR_OK) {
        int64_t total = 0;
        for (int64_t i = 0; i < (int64_t)v->num_features * n; i++)
            total += b.kjt.lengths[i];
        b.kjt.num_values = total;
        b.kjt.num_weights = v->has_weights ? total : 0;
        if (total <= b.max_values && sr_kjt_compute_offsets(&b.kjt) == SR_OK &&
            sr_binfmt_copy_values(v, first, n, &b, 0) == SR_OK) {
            for (int f = 0; f < v->num_features; f++)
                for (int64_t i = sr_kjt_bag_begin(&b.kjt, f, 0);
                     i < sr_kjt_bag_end(&b.kjt, f, (int)n - 1); i++)
                    if (b.kjt.values[i] < 0 || b.kjt.values[i] >= v->rows[f])
                        abort();
        }
    }
    sr_batch_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t *copy = malloc(size / 8 + 1 > 0 ? (size / 8 + 1) * 8 : 8); /* 8-byte aligned */
    memcpy(copy, data, size);
    struct sr_binfmt_view v;
    if (sr_binfmt_view_init(&v, copy, size, "fuzz") == SR_OK) {
        if (v.num_dense * (int64_t)MAX_B <= 1 << 16 && v.num_features <= 4096)
            copy_some(&v);
        sr_binfmt_close(&v);
    }
    free(copy);
    return 0;
}
