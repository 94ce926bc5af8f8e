/*
 * Criteo samples in TorchRec's numpy layout (include/shardrec/npy_criteo.h):
 * three memory-mapped arrays a day, read a batch at a time.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/npy_criteo.h"

#define PATH_CAP 4096

static int open_part(struct sr_npy *a, const char *prefix, const char *part)
{
    char path[PATH_CAP];
    if ((size_t)snprintf(path, sizeof path, "%s_%s.npy", prefix, part) >= sizeof path)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: path too long", prefix);
    return sr_npy_open(a, path);
}

static int shape_error(const struct sr_npy *a, const char *want)
{
    return sr_error_set(SR_ERR_DATA, "%s: %s of shape (%" PRId64 ", %" PRId64 ")%s; expected %s",
                        a->path, sr_npy_dtype_name(a->dtype), a->rows, a->cols,
                        a->ndim == 1 ? " (one dimension)" : "", want);
}

static int check_parts(struct sr_npy_criteo *c, int F)
{
    char want[96];
    if (c->dense.dtype != SR_NPY_F32 || c->dense.ndim != 2 || c->dense.cols < 1 ||
        c->dense.cols > 1024)
        return shape_error(&c->dense, "float32 (N, D), D the dense features (13 for Criteo)");
    snprintf(want, sizeof want, "int32, uint32 or int64 (N, %d): one id a feature", F);
    if (c->sparse.dtype == SR_NPY_F32 || c->sparse.ndim != 2 || c->sparse.cols != F)
        return shape_error(&c->sparse, want);
    if (c->labels.cols != 1)
        return shape_error(&c->labels, "(N,) or (N, 1) labels");
    if (c->sparse.rows != c->dense.rows || c->labels.rows != c->dense.rows)
        return sr_error_set(SR_ERR_DATA,
                            "%s, %s and %s hold %" PRId64 ", %" PRId64 " and %" PRId64
                            " samples; they must agree",
                            c->dense.path, c->sparse.path, c->labels.path, c->dense.rows,
                            c->sparse.rows, c->labels.rows);
    c->samples = c->dense.rows;
    c->num_dense = (int)c->dense.cols;
    return SR_OK;
}

int sr_npy_criteo_open(struct sr_npy_criteo *c, const char *prefix, int num_features)
{
    memset(c, 0, sizeof *c);
    int rc = open_part(&c->dense, prefix, "dense");
    if (!rc)
        rc = open_part(&c->sparse, prefix, "sparse");
    if (!rc)
        rc = open_part(&c->labels, prefix, "labels");
    if (!rc)
        rc = check_parts(c, num_features);
    if (rc)
        sr_npy_criteo_close(c);
    return rc;
}

void sr_npy_criteo_close(struct sr_npy_criteo *c)
{
    sr_npy_close(&c->dense);
    sr_npy_close(&c->sparse);
    sr_npy_close(&c->labels);
}

/* numpy's x % m for m > 0: the result in [0, m). */
static int64_t floor_mod(int64_t x, int64_t m)
{
    int64_t r = x % m;
    return r < 0 ? r + m : r;
}

static int fill_dense_labels(const struct sr_npy_criteo *c, int64_t first, int n,
                             struct sr_batch *b)
{
    const int D = c->num_dense;
    for (int i = 0; i < n; i++) {
        const int64_t s = first + i;
        float y = sr_npy_float(&c->labels, s, 0);
        if (y != 0.0f && y != 1.0f)
            return sr_error_set(SR_ERR_DATA, "%s: sample %" PRId64 ": label %g, not 0 or 1",
                                c->labels.path, s, (double)y);
        b->labels[i] = y;
        for (int d = 0; d < D; d++) {
            float x = sr_npy_float(&c->dense, s, d);
            if (!isfinite(x))
                return sr_error_set(SR_ERR_DATA,
                                    "%s: sample %" PRId64 ", column %d: %g is not finite",
                                    c->dense.path, s, d, (double)x);
            b->dense[(size_t)i * (size_t)D + (size_t)d] = x;
        }
    }
    return SR_OK;
}

int sr_npy_criteo_fill(const struct sr_npy_criteo *c, int64_t first, int n, const int64_t *rows,
                       struct sr_batch *b)
{
    const int F = (int)c->sparse.cols;
    SR_ASSERT(n >= 0 && n <= b->max_batch && (int64_t)n * F <= b->max_values && first >= 0 &&
              first + n <= c->samples && b->num_dense == c->num_dense);
    int rc = fill_dense_labels(c, first, n, b);
    if (rc)
        return rc;
    for (int f = 0; f < F; f++)
        for (int i = 0; i < n; i++) {
            b->kjt.lengths[(size_t)f * (size_t)n + (size_t)i] = 1;
            b->kjt.values[(size_t)f * (size_t)n + (size_t)i] =
                floor_mod(sr_npy_int(&c->sparse, first + i, f), rows[f]);
        }
    b->batch_size = n;
    b->kjt.stride = n;
    b->kjt.num_values = (int64_t)n * F;
    return sr_kjt_compute_offsets(&b->kjt);
}
