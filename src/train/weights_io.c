/*
 * Model weights <-> safetensors (names and contract in
 * include/shardrec/weights_io.h).
 *
 * Both directions start from one list of the model's parameters, in the order
 * the model lays them out:
 *
 *   [ dense tensors of sr_dlrm_tensor, block order | emb.TABLE.weight per table ]
 *
 * each with its name, shape and device pointer. Saving hands the list to
 * sr_st_write; loading matches the file against it completely (missing,
 * extra, misshapen, non-finite) before copying anything, so a bad file never
 * leaves a half-loaded model behind.
 *
 * On a host-visible device (the CPU) the host reads and writes the model's
 * memory itself. On any other the tensors travel through one pinned host
 * buffer of the device (sr_dev_alloc_host) holding them all, in list order:
 * copied out and waited for before the write, or filled from the file and
 * copied in (then waited for) on load.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/dlrm.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"
#include "shardrec/weights_io.h"
#include "device/emb_storage.h"
#include "train/weights_meta.h"

#define NAME_CAP (SR_NAME_MAX + 16)
#define LIST_MAX 5 /* missing or extra names quoted in one message */
#define HINT_MODEL                                                                                 \
    "HINT: the file was written for a different model; use the same --embedding-dim, "             \
    "--table-rows, --bot-mlp and --top-mlp as the run that wrote it"

struct param {
    char name[NAME_CAP];
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    float *data; /* the model's device */
};

/* The model's parameters; the caller frees the array with sr_free. */
static struct param *list_params(const struct sr_dlrm *m, const struct sr_ebc_config *ec,
                                 float *const *tables, int *n_out)
{
    int nd = sr_dlrm_num_tensors(m);
    int n = nd + ec->num_tables;
    struct param *p = sr_calloc((size_t)n, sizeof *p);
    for (int i = 0; i < nd; i++) {
        const char *name;
        sr_dlrm_tensor(m, i, &name, &p[i].ndim, p[i].shape, &p[i].data);
        snprintf(p[i].name, NAME_CAP, "%s", name);
    }
    for (int t = 0; t < ec->num_tables; t++) {
        struct param *q = &p[nd + t];
        snprintf(q->name, NAME_CAP, "emb.%s.weight", ec->tables[t].name);
        q->ndim = 2;
        q->shape[0] = ec->tables[t].num_embeddings;
        q->shape[1] = ec->tables[t].embedding_dim;
        q->data = tables[t];
    }
    *n_out = n;
    return p;
}

static size_t numel_of(const struct param *p)
{
    return (size_t)sr_st_numel(p->ndim, p->shape);
}

/* The pinned host buffer for every parameter when the host cannot address
 * the device's memory; NULL on a host-visible device. */
static float *pinned_for(struct sr_device *dev, const struct param *p, int n)
{
    size_t total = 0;
    if (dev->host_visible)
        return NULL;
    for (int i = 0; i < n; i++)
        total += numel_of(&p[i]);
    return sr_dev_alloc_host(dev, sizeof(float) * (total ? total : 1));
}

/* table t's weights of an sr_ebc; the caller frees the array with sr_free. */
static float **ebc_tables(struct sr_ebc *ebc)
{
    const struct sr_ebc_config *ec = sr_ebc_config(ebc);
    float **tables = sr_calloc((size_t)ec->num_tables + 1, sizeof *tables);
    for (int t = 0; t < ec->num_tables; t++)
        tables[t] = sr_ebc_weights(ebc, t);
    return tables;
}

int sr_weights_save(const char *path, const struct sr_dlrm *m, struct sr_ebc *ebc)
{
    float **tables = ebc_tables(ebc);
    int rc = sr_weights_save_tables(path, m, sr_ebc_config(ebc), tables);
    sr_free(tables);
    return rc;
}

int sr_weights_load(const char *path, struct sr_dlrm *m, struct sr_ebc *ebc)
{
    float **tables = ebc_tables(ebc);
    int rc = sr_weights_load_tables(path, m, sr_ebc_config(ebc), tables);
    sr_free(tables);
    return rc;
}

int sr_weights_save_tables(const char *path, const struct sr_dlrm *m,
                           const struct sr_ebc_config *ec, float *const *tables)
{
    int n;
    struct sr_device *dev = sr_dlrm_device(m);
    struct param *p = list_params(m, ec, tables, &n);
    struct sr_st_tensor *t = sr_calloc((size_t)n, sizeof *t);
    float *pinned = pinned_for(dev, p, n), *at = pinned;
    for (int i = 0; i < n; i++) {
        t[i].name = p[i].name;
        t[i].ndim = p[i].ndim;
        memcpy(t[i].shape, p[i].shape, sizeof t[i].shape);
        t[i].data = p[i].data;
        if (pinned) {
            sr_dev_copy(dev, at, p[i].data, sizeof(float) * numel_of(&p[i]), NULL);
            t[i].data = at;
            at += numel_of(&p[i]);
        }
    }
    if (pinned)
        sr_dev_sync(dev, NULL);
    int rc = sr_weights_write(path, n, t, ec->tables, ec->num_tables);
    sr_dev_free_host(dev, pinned);
    sr_free(t);
    sr_free(p);
    return rc;
}

/* ---- load: match the file against the model ------------------------------------------ */

static int find_param(const struct param *p, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0)
            return i;
    return -1;
}

/* Append ", name" to a list of at most LIST_MAX names. */
static void list_add(char *buf, size_t cap, int *count, const char *name)
{
    size_t k = strlen(buf);
    if (*count < LIST_MAX)
        snprintf(buf + k, cap - k, "%s%s", *count ? ", " : "", name);
    (*count)++;
}

/* Names of the model's tensors absent from the file, and of the file's tensors
 * absent from the model: the first LIST_MAX of each and the counts. */
struct name_diff {
    char missing[LIST_MAX * NAME_CAP + 16];
    char extra[LIST_MAX * NAME_CAP + 16];
    int n_missing, n_extra;
};

static void diff_names(const struct sr_st_file *f, const struct param *p, int n,
                       struct name_diff *d)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < n; i++)
        if (sr_st_find(f, p[i].name, NULL, NULL, NULL) != SR_OK)
            list_add(d->missing, sizeof d->missing, &d->n_missing, p[i].name);
    sr_error_clear();
    for (int i = 0; i < sr_st_count(f); i++)
        if (find_param(p, n, sr_st_name(f, i)) < 0)
            list_add(d->extra, sizeof d->extra, &d->n_extra, sr_st_name(f, i));
}

#define HINT_NAMES                                                                                 \
    "HINT: names must be bot_mlp.K.weight/bias, top_mlp.K.weight/bias and emb.TABLE.weight "       \
    "with this model's tables; convert a DLRM reference checkpoint with "                          \
    "python3 tools/torch_dlrm.py convert --to shardrec"

static int check_names(const struct sr_st_file *f, const struct param *p, int n)
{
    struct name_diff d;
    diff_names(f, p, n, &d);
    const char *more_m = d.n_missing > LIST_MAX ? ", ..." : "";
    const char *more_e = d.n_extra > LIST_MAX ? ", ..." : "";
    if (d.n_missing && d.n_extra)
        return sr_error_set(
            SR_ERR_DATA,
            "%s: %d tensors the model needs are missing (%s%s) and the file holds %d "
            "tensor%s this model does not have (%s%s); %s",
            sr_st_path(f), d.n_missing, d.missing, more_m, d.n_extra, d.n_extra > 1 ? "s" : "",
            d.extra, more_e, HINT_NAMES);
    if (d.n_missing)
        return sr_error_set(SR_ERR_DATA, "%s: %d tensor%s the model needs %s missing: %s%s; %s",
                            sr_st_path(f), d.n_missing, d.n_missing > 1 ? "s" : "",
                            d.n_missing > 1 ? "are" : "is", d.missing, more_m, HINT_MODEL);
    if (d.n_extra)
        return sr_error_set(SR_ERR_DATA, "%s: %d tensor%s not a parameter of this model: %s%s; %s",
                            sr_st_path(f), d.n_extra, d.n_extra > 1 ? "s are" : " is", d.extra,
                            more_e, HINT_NAMES);
    return SR_OK;
}

static int check_shape(const struct sr_st_file *f, const struct param *p)
{
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    const float *data;
    char have[160], need[160];
    sr_st_find(f, p->name, &data, &ndim, shape);
    int same = ndim == p->ndim;
    for (int d = 0; same && d < ndim; d++)
        same = shape[d] == p->shape[d];
    if (!same) {
        sr_st_shape_str(ndim, shape, have, sizeof have);
        sr_st_shape_str(p->ndim, p->shape, need, sizeof need);
        return sr_error_set(SR_ERR_DATA, "%s: tensor %s has shape %s, the model needs %s; %s",
                            sr_st_path(f), p->name, have, need, HINT_MODEL);
    }
    int64_t numel = p->data ? sr_st_numel(ndim, shape) : 0; /* a sharded table: per block */
    for (int64_t k = 0; k < numel; k++)
        if (!isfinite(data[k]))
            return sr_error_set(SR_ERR_NUMERIC,
                                "%s: tensor %s holds %f at flat index %" PRId64
                                "; HINT: the run that wrote it diverged; use an earlier file",
                                sr_st_path(f), p->name, (double)data[k], k);
    return SR_OK;
}

/* Names and shapes (finite values of the tensors with data), then the
 * pooling the file records (weights_meta.c). */
static int match_file(const struct sr_st_file *f, const struct param *p, int n,
                      const struct sr_ebc_config *ec)
{
    int rc;
    if ((rc = check_names(f, p, n)))
        return rc;
    for (int i = 0; i < n; i++)
        if ((rc = check_shape(f, &p[i])))
            return rc;
    return sr_weights_pooling_match(f, ec->tables, ec->num_tables, 1, NULL, NULL);
}

/* Every tensor of the matched file into the model: directly on a
 * host-visible device, else through the pinned buffer. */
static void copy_in(struct sr_device *dev, const struct sr_st_file *f, const struct param *p, int n)
{
    float *pinned = pinned_for(dev, p, n), *at = pinned;
    for (int i = 0; i < n; i++) {
        const float *src;
        size_t bytes = sizeof(float) * numel_of(&p[i]);
        sr_st_find(f, p[i].name, &src, NULL, NULL);
        if (!pinned) {
            memcpy(p[i].data, src, bytes);
            continue;
        }
        memcpy(at, src, bytes);
        sr_dev_copy(dev, p[i].data, at, bytes, NULL);
        at += numel_of(&p[i]);
    }
    if (pinned) {
        sr_dev_sync(dev, NULL);
        sr_dev_free_host(dev, pinned);
    }
}

int sr_weights_load_tables(const char *path, struct sr_dlrm *m, const struct sr_ebc_config *ec,
                           float *const *tables)
{
    struct sr_st_file *f;
    int n, rc;
    if ((rc = sr_st_open(&f, path)))
        return rc;
    struct param *p = list_params(m, ec, tables, &n);
    if (!(rc = match_file(f, p, n, ec)))
        copy_in(sr_dlrm_device(m), f, p, n);
    sr_free(p);
    sr_st_close(f);
    return rc;
}

/* ---- load, sharded: this rank's blocks of each table ------------------------------------- */

/* Rows [row_offset, +rows) and columns [col_offset, +cols) of the file's
 * (E, D) tensor into host memory laid out (rows, cols); SR_ERR_NUMERIC at
 * the first non-finite value (its global row and column). */
static int copy_block(const struct sr_st_file *f, const char *name, int64_t D,
                      const struct sr_weights_shard *sh, float *dst)
{
    const float *src;
    sr_st_find(f, name, &src, NULL, NULL);
    for (int64_t r = 0; r < sh->rows; r++) {
        const float *row = src + (sh->row_offset + r) * D + sh->col_offset;
        for (int c = 0; c < sh->cols; c++)
            if (!isfinite(row[c]))
                return sr_error_set(SR_ERR_NUMERIC,
                                    "%s: tensor %s holds %f at row %" PRId64 ", column %d; "
                                    "HINT: the run that wrote it diverged; use an earlier file",
                                    sr_st_path(f), name, (double)row[c], sh->row_offset + r,
                                    sh->col_offset + c);
        if (dst) /* NULL: check only */
            memcpy(dst + r * sh->cols, row, sizeof(float) * (size_t)sh->cols);
    }
    return SR_OK;
}

static int load_block(struct sr_device *dev, const struct sr_st_file *f, const struct param *p,
                      const struct sr_weights_shard *sh)
{
    size_t n = (size_t)sh->rows * (size_t)sh->cols;
    if (dev->host_visible && sh->dtype == SR_DTYPE_F32)
        return copy_block(f, p->name, p->shape[1], sh, sh->weight);
    float *pinned = sr_dev_alloc_host(dev, sizeof(float) * (n ? n : 1));
    int rc = copy_block(f, p->name, p->shape[1], sh, pinned);
    size_t bytes = sizeof(float) * n;
    if (!rc && sh->dtype != SR_DTYPE_F32) { /* narrowed in place, front to back, to nearest */
        for (size_t i = 0; i < n; i++)
            sr_emb_put(pinned, sh->dtype, (int64_t)i, pinned[i], 0, 0);
        bytes = 2 * n;
    }
    if (!rc) {
        sr_dev_copy(dev, sh->weight, pinned, bytes, NULL);
        sr_dev_sync(dev, NULL);
    }
    sr_dev_free_host(dev, pinned);
    return rc;
}

int sr_weights_load_shards(const char *path, struct sr_dlrm *m, const struct sr_ebc_config *ec,
                           const struct sr_weights_shard *shards, int n_shards)
{
    struct sr_st_file *f;
    int n, rc, nd = sr_dlrm_num_tensors(m);
    if ((rc = sr_st_open(&f, path)))
        return rc;
    float **none = sr_calloc((size_t)ec->num_tables + 1, sizeof *none);
    struct param *p = list_params(m, ec, none, &n);
    rc = match_file(f, p, n, ec); /* names, shapes, pooling; finite values: the dense ones */
    for (int i = 0; !rc && i < n_shards; i++) /* every block checked before one is copied in */
        rc = copy_block(f, p[nd + shards[i].table].name, p[nd + shards[i].table].shape[1],
                        &shards[i], NULL);
    if (!rc)
        copy_in(sr_dlrm_device(m), f, p, nd);
    for (int i = 0; !rc && i < n_shards; i++)
        rc = load_block(sr_dlrm_device(m), f, &p[nd + shards[i].table], &shards[i]);
    sr_free(p);
    sr_free(none);
    sr_st_close(f);
    return rc;
}
