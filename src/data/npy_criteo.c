/*
 * Criteo samples in TorchRec's numpy layout (include/shardrec/npy_criteo.h):
 * three memory-mapped arrays a day, read a batch at a time.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shardrec/alloc.h"
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

/* An array of ids: an integer dtype, two dimensions, `cols` columns (0: any
 * number from 1 to SR_NPY_CRITEO_MAX_BAG). */
static int check_ids(const struct sr_npy *a, int64_t cols, const char *what)
{
    char want[128];
    const int integer = a->dtype == SR_NPY_I32 || a->dtype == SR_NPY_U32 ||
                        a->dtype == SR_NPY_I64 || a->dtype == SR_NPY_U8;
    if (integer && a->ndim == 2 &&
        (cols ? a->cols == cols : a->cols >= 1 && a->cols <= SR_NPY_CRITEO_MAX_BAG))
        return SR_OK;
    snprintf(want, sizeof want, "int32, uint32, int64 or uint8 (N, %s)", what);
    return shape_error(a, want);
}

static int same_samples(const struct sr_npy_criteo *c, const struct sr_npy *a)
{
    if (a->rows == c->dense.rows)
        return SR_OK;
    return sr_error_set(SR_ERR_DATA,
                        "%s holds %" PRId64 " samples, %s %" PRId64 "; they must agree", a->path,
                        a->rows, c->dense.path, c->dense.rows);
}

static int check_parts(struct sr_npy_criteo *c)
{
    char what[64];
    const int F = c->num_features;
    if (c->dense.dtype != SR_NPY_F32 || c->dense.ndim != 2 || c->dense.cols < 1 ||
        c->dense.cols > 1024)
        return shape_error(&c->dense, "float32 (N, D), D the dense features (13 for Criteo)");
    if (c->labels.cols != 1)
        return shape_error(&c->labels, "(N,) or (N, 1) labels");
    int rc = same_samples(c, &c->labels);
    c->ids_per_sample = 0;
    if (!rc && !c->bags) { /* one-hot: one (N, F) array */
        snprintf(what, sizeof what, "%d): one id a feature", F);
        rc = check_ids(&c->sparse, F, what);
        rc = rc ? rc : same_samples(c, &c->sparse);
        c->ids_per_sample = F;
    }
    for (int f = 0; !rc && c->bags && f < F; f++) { /* multi-hot: a bag array a feature */
        rc = check_ids(&c->bags[f], 0, "H): a bag of H ids");
        rc = rc ? rc : same_samples(c, &c->bags[f]);
        c->ids_per_sample += c->bags[f].cols;
    }
    c->samples = c->dense.rows;
    c->num_dense = (int)c->dense.cols;
    return rc;
}

/* PREFIX_sparse_multi_hot.npz's members "0".."F-1". */
static int open_bags(struct sr_npy_criteo *c, const char *path)
{
    char key[16];
    int rc = sr_npz_open(&c->multi, path);
    if (rc)
        return rc;
    c->bags = sr_calloc((size_t)c->num_features, sizeof *c->bags);
    for (int f = 0; !rc && f < c->num_features; f++) {
        snprintf(key, sizeof key, "%d", f);
        rc = sr_npz_array(&c->multi, key, &c->bags[f]);
    }
    return rc;
}

static int open_sparse(struct sr_npy_criteo *c, const char *prefix)
{
    char path[PATH_CAP], multi[PATH_CAP];
    snprintf(path, sizeof path, "%s_sparse.npy", prefix);
    snprintf(multi, sizeof multi, "%s_sparse_multi_hot.npz", prefix);
    if (access(path, F_OK) == 0 && access(multi, F_OK) == 0)
        return sr_error_set(SR_ERR_DATA,
                            "%s: both %s and %s exist: which is the day's? HINT: move one "
                            "of them away",
                            prefix, path, multi);
    if (access(path, F_OK) == 0 || access(multi, F_OK) != 0) {
        int rc = sr_npy_open(&c->sparse, path);
        if (rc && access(path, F_OK) != 0)
            return sr_error_set(SR_ERR_IO,
                                "%s: neither %s nor %s exists; HINT: check the "
                                "prefix",
                                prefix, path, multi);
        return rc;
    }
    return open_bags(c, multi);
}

int sr_npy_criteo_open(struct sr_npy_criteo *c, const char *prefix, int num_features)
{
    memset(c, 0, sizeof *c);
    c->num_features = num_features;
    int rc = open_part(&c->dense, prefix, "dense");
    if (!rc)
        rc = open_part(&c->labels, prefix, "labels");
    if (!rc)
        rc = open_sparse(c, prefix);
    if (!rc)
        rc = check_parts(c);
    if (rc)
        sr_npy_criteo_close(c);
    return rc;
}

void sr_npy_criteo_close(struct sr_npy_criteo *c)
{
    sr_npy_close(&c->dense);
    sr_npy_close(&c->sparse);
    sr_npy_close(&c->labels);
    for (int f = 0; c->bags && f < c->num_features; f++)
        sr_npy_close(&c->bags[f]);
    sr_free(c->bags);
    sr_npz_close(&c->multi);
    memset(c, 0, sizeof *c);
}

int64_t sr_npy_criteo_bytes(const struct sr_npy_criteo *c)
{
    return (int64_t)(c->dense.map_bytes + c->labels.map_bytes + c->sparse.map_bytes +
                     c->multi.map_bytes);
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
    const int F = c->num_features;
    SR_ASSERT(n >= 0 && n <= b->max_batch && (int64_t)n * c->ids_per_sample <= b->max_values &&
              first >= 0 && first + n <= c->samples && b->num_dense == c->num_dense);
    int rc = fill_dense_labels(c, first, n, b);
    if (rc)
        return rc;
    int64_t at = 0; /* feature-major: feature f's bags, sample after sample */
    for (int f = 0; f < F; f++) {
        const struct sr_npy *a = c->bags ? &c->bags[f] : &c->sparse;
        const int64_t h = c->bags ? a->cols : 1, col = c->bags ? 0 : f;
        for (int i = 0; i < n; i++) {
            b->kjt.lengths[(size_t)f * (size_t)n + (size_t)i] = (int32_t)h;
            for (int64_t k = 0; k < h; k++)
                b->kjt.values[at++] = floor_mod(sr_npy_int(a, first + i, col + k), rows[f]);
        }
    }
    b->batch_size = n;
    b->kjt.stride = n;
    b->kjt.num_values = at;
    return sr_kjt_compute_offsets(&b->kjt);
}
