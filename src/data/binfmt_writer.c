/*
 * Writing shardrec's binary sample format (layout in include/shardrec/binfmt.h).
 *
 * Samples arrive a batch at a time and collect in one chunk's worth of column
 * buffers: dense (C, num_dense), labels (C), and per feature the bag lengths
 * (C) and the ids (and weights) appended in sample order. A full chunk is
 * written out with each feature stored fixed-length when all its bags in the
 * chunk have one length (Criteo's one-hot case: no offsets at all), otherwise
 * with offsets. The chunk table follows the last chunk; the header, written
 * last, records the file size. Memory is one chunk, whatever the file size.
 * The file is an atomic write (atomic_file.h): it appears under its name
 * complete or not at all, and a failure leaves no temporary file behind.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/binfmt.h"
#include "shardrec/error.h"

struct wfeature {
    int32_t *lengths; /* (C) */
    int64_t *ids;     /* (cap) */
    float *weights;   /* (cap) or NULL */
    int64_t nv, cap;
};

struct sr_binfmt_writer {
    char *path;
    struct sr_atomic_file af;
    FILE *f; /* af.f */
    int num_dense, num_features, id_bytes, with_weights;
    int64_t *rows;
    int64_t C, n;  /* chunk capacity, samples buffered */
    int64_t total; /* samples written or buffered */
    int64_t max_sample_values;
    float *dense;          /* (C, num_dense) */
    uint8_t *labels;       /* (C) */
    struct wfeature *feat; /* (F) */
    uint64_t *table;       /* (2 * table_cap): offset, bytes per chunk */
    int64_t num_chunks, table_cap;
    uint64_t pos; /* file position */
};

static int werr(struct sr_binfmt_writer *w)
{
    return sr_error_set(SR_ERR_WRITE, "%s: write failed (%s); HINT: check free disk space",
                        w->path, strerror(errno ? errno : EIO));
}

static int put(struct sr_binfmt_writer *w, const void *p, uint64_t bytes)
{
    if (bytes && fwrite(p, 1, bytes, w->f) != bytes)
        return werr(w);
    w->pos += bytes;
    return SR_OK;
}

static int pad(struct sr_binfmt_writer *w)
{
    static const uint8_t zeros[SR_BINFMT_ALIGN];
    uint64_t r = w->pos % SR_BINFMT_ALIGN;
    return r ? put(w, zeros, SR_BINFMT_ALIGN - r) : SR_OK;
}

static int check_open_args(int num_dense, int F, const int64_t *rows, int64_t C)
{
    if (num_dense < 0 || num_dense > 1024 || F < 1 || F > 65536 || !rows || C < 1 || C > (1 << 30))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "binary writer: %d dense, %d features, chunk "
                            "%lld; HINT: shapes out of range",
                            num_dense, F, (long long)C);
    for (int f = 0; f < F; f++)
        if (rows[f] < 1)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "binary writer: feature %d has %lld rows; "
                                "HINT: give every table at least one row",
                                f, (long long)rows[f]);
    return SR_OK;
}

static void alloc_buffers(struct sr_binfmt_writer *w)
{
    w->dense = sr_malloc(sizeof(float) * (size_t)(w->C * (w->num_dense ? w->num_dense : 1)));
    w->labels = sr_malloc((size_t)w->C);
    w->feat = sr_calloc((size_t)w->num_features, sizeof *w->feat);
    for (int f = 0; f < w->num_features; f++) {
        struct wfeature *ft = &w->feat[f];
        ft->lengths = sr_malloc(sizeof(int32_t) * (size_t)w->C);
        ft->cap = w->C;
        ft->ids = sr_malloc(sizeof(int64_t) * (size_t)ft->cap);
        ft->weights = w->with_weights ? sr_malloc(sizeof(float) * (size_t)ft->cap) : NULL;
    }
    w->table_cap = 64;
    w->table = sr_malloc(sizeof(uint64_t) * 2 * (size_t)w->table_cap);
}

static void writer_free(struct sr_binfmt_writer *w)
{
    sr_atomic_file_abort(&w->af); /* no-op once committed */
    for (int f = 0; w->feat && f < w->num_features; f++) {
        sr_free(w->feat[f].lengths);
        sr_free(w->feat[f].ids);
        sr_free(w->feat[f].weights);
    }
    sr_free(w->feat);
    sr_free(w->dense);
    sr_free(w->labels);
    sr_free(w->table);
    sr_free(w->rows);
    sr_free(w->path);
    sr_free(w);
}

int sr_binfmt_writer_open(struct sr_binfmt_writer **out, const char *path, int num_dense,
                          int num_features, const int64_t *rows, int with_weights,
                          int64_t chunk_samples)
{
    static const uint8_t zeros[SR_BINFMT_HEADER_BYTES];
    int64_t C = chunk_samples ? chunk_samples : SR_BINFMT_CHUNK_DEFAULT;
    *out = NULL;
    int rc = check_open_args(num_dense, num_features, rows, C);
    if (rc)
        return rc;
    struct sr_binfmt_writer *w = sr_calloc(1, sizeof *w);
    w->path = sr_strdup(path);
    w->num_dense = num_dense;
    w->num_features = num_features;
    w->with_weights = with_weights != 0;
    w->C = C;
    w->rows = sr_malloc(sizeof(int64_t) * (size_t)num_features);
    memcpy(w->rows, rows, sizeof(int64_t) * (size_t)num_features);
    w->id_bytes = 4;
    for (int f = 0; f < num_features; f++)
        if (rows[f] > ((int64_t)1 << 32))
            w->id_bytes = 8;
    if ((rc = sr_atomic_file_open(&w->af, path))) {
        writer_free(w);
        return rc;
    }
    w->f = w->af.f;
    alloc_buffers(w);
    /* Room for the header (written last) and the rows. */
    rc = put(w, zeros, SR_BINFMT_HEADER_BYTES);
    if (!rc)
        rc = put(w, rows, sizeof(int64_t) * (size_t)num_features);
    if (rc) {
        sr_binfmt_writer_abort(w);
        return rc;
    }
    *out = w;
    return SR_OK;
}

static void grow_feature(struct wfeature *ft, int64_t need, int with_weights)
{
    if (need <= ft->cap)
        return;
    while (ft->cap < need)
        ft->cap *= 2;
    ft->ids = sr_realloc(ft->ids, sizeof(int64_t) * (size_t)ft->cap);
    if (with_weights)
        ft->weights = sr_realloc(ft->weights, sizeof(float) * (size_t)ft->cap);
}

static int64_t sample_values(const struct sr_batch *b, int s)
{
    int64_t total = 0;
    for (int f = 0; f < b->kjt.num_keys; f++)
        total += b->kjt.lengths[(int64_t)f * b->kjt.stride + s];
    return total;
}

/* Feature f of batch sample s into the chunk buffers; checks ids against rows. */
static int append_bag(struct sr_binfmt_writer *w, const struct sr_batch *b, int f, int s)
{
    struct wfeature *ft = &w->feat[f];
    int64_t lo = sr_kjt_bag_begin(&b->kjt, f, s), hi = sr_kjt_bag_end(&b->kjt, f, s);
    grow_feature(ft, ft->nv + (hi - lo), w->with_weights);
    for (int64_t i = lo; i < hi; i++) {
        int64_t id = b->kjt.values[i];
        if (id < 0 || id >= w->rows[f])
            return sr_error_set(SR_ERR_DATA,
                                "%s: feature %d id %lld outside [0, %lld); HINT: "
                                "reduce ids mod rows before writing",
                                w->path, f, (long long)id, (long long)w->rows[f]);
        ft->ids[ft->nv] = id;
        if (ft->weights)
            ft->weights[ft->nv] = b->kjt.weights ? b->kjt.weights[i] : 1.0f;
        ft->nv++;
    }
    ft->lengths[w->n] = (int32_t)(hi - lo);
    return SR_OK;
}

static int flush_chunk(struct sr_binfmt_writer *w);

static int append_sample(struct sr_binfmt_writer *w, const struct sr_batch *b, int s)
{
    float y = b->labels[s];
    if (y != 0.0f && y != 1.0f)
        return sr_error_set(SR_ERR_DATA, "%s: label %g is not 0 or 1; HINT: binary labels only",
                            w->path, y);
    memcpy(w->dense + w->n * w->num_dense, b->dense + (int64_t)s * b->num_dense,
           sizeof(float) * (size_t)w->num_dense);
    w->labels[w->n] = (uint8_t)y;
    for (int f = 0; f < w->num_features; f++) {
        int rc = append_bag(w, b, f, s);
        if (rc)
            return rc;
    }
    int64_t nv = sample_values(b, s);
    if (nv > w->max_sample_values)
        w->max_sample_values = nv;
    w->n++;
    w->total++;
    return w->n == w->C ? flush_chunk(w) : SR_OK;
}

int sr_binfmt_writer_append(struct sr_binfmt_writer *w, const struct sr_batch *b)
{
    if (b->num_dense != w->num_dense || b->kjt.num_keys != w->num_features)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "%s: batch has %d dense and %d features, the "
                            "file %d and %d; HINT: one shape per file",
                            w->path, b->num_dense, b->kjt.num_keys, w->num_dense, w->num_features);
    for (int s = 0; s < b->batch_size; s++) {
        int rc = append_sample(w, b, s);
        if (rc)
            return rc;
    }
    return SR_OK;
}

/* The one length all bags of the buffered chunk share, or SR_BINFMT_VARIABLE. */
static uint32_t fixed_length(const struct wfeature *ft, int64_t n)
{
    for (int64_t s = 1; s < n; s++)
        if (ft->lengths[s] != ft->lengths[0])
            return SR_BINFMT_VARIABLE;
    return n ? (uint32_t)ft->lengths[0] : 0;
}

/* Ids (or offsets) go out through a small staging block of the stored width. */
static int put_ids(struct sr_binfmt_writer *w, const int64_t *ids, int64_t n)
{
    if (w->id_bytes == 8)
        return put(w, ids, 8 * (uint64_t)n);
    uint32_t block[4096];
    for (int64_t i = 0; i < n; i += 4096) {
        int64_t m = n - i < 4096 ? n - i : 4096;
        for (int64_t j = 0; j < m; j++)
            block[j] = (uint32_t)ids[i + j];
        int rc = put(w, block, 4 * (uint64_t)m);
        if (rc)
            return rc;
    }
    return SR_OK;
}

static int put_offsets(struct sr_binfmt_writer *w, const int32_t *lengths, int64_t n)
{
    uint64_t block[1024], off = 0;
    int64_t k = 0;
    for (int64_t s = 0; s <= n; s++) {
        block[k++] = off;
        off += s < n ? (uint64_t)lengths[s] : 0;
        if (k == 1024 || s == n) {
            int rc = put(w, block, 8 * (uint64_t)k);
            if (rc)
                return rc;
            k = 0;
        }
    }
    return SR_OK;
}

static int write_feature(struct sr_binfmt_writer *w, const struct wfeature *ft, uint32_t L)
{
    int rc = SR_OK;
    if (L == SR_BINFMT_VARIABLE) {
        rc = put_offsets(w, ft->lengths, w->n);
        rc = rc ? rc : pad(w);
    }
    rc = rc ? rc : put_ids(w, ft->ids, ft->nv);
    rc = rc ? rc : pad(w);
    if (!rc && ft->weights)
        rc = put(w, ft->weights, sizeof(float) * (uint64_t)ft->nv);
    return rc ? rc : pad(w);
}

static int write_chunk_head(struct sr_binfmt_writer *w, const uint32_t *L)
{
    uint64_t n = (uint64_t)w->n;
    int rc = put(w, &n, 8);
    for (int f = 0; f < w->num_features && !rc; f++) {
        uint32_t lz[2] = {L[f], 0};
        uint64_t nv = (uint64_t)w->feat[f].nv;
        rc = put(w, lz, 8);
        rc = rc ? rc : put(w, &nv, 8);
    }
    return rc ? rc : pad(w);
}

static int flush_chunk(struct sr_binfmt_writer *w)
{
    if (w->n == 0)
        return SR_OK;
    if (w->num_chunks == w->table_cap) {
        w->table_cap *= 2;
        w->table = sr_realloc(w->table, sizeof(uint64_t) * 2 * (size_t)w->table_cap);
    }
    uint32_t *L = sr_malloc(sizeof(uint32_t) * (size_t)w->num_features);
    for (int f = 0; f < w->num_features; f++)
        L[f] = fixed_length(&w->feat[f], w->n);
    int rc = pad(w);
    uint64_t start = w->pos;
    rc = rc ? rc : write_chunk_head(w, L);
    rc = rc ? rc : put(w, w->dense, sizeof(float) * (uint64_t)(w->n * w->num_dense));
    rc = rc ? rc : pad(w);
    rc = rc ? rc : put(w, w->labels, (uint64_t)w->n);
    rc = rc ? rc : pad(w);
    for (int f = 0; f < w->num_features && !rc; f++)
        rc = write_feature(w, &w->feat[f], L[f]);
    sr_free(L);
    w->table[2 * w->num_chunks] = start;
    w->table[2 * w->num_chunks + 1] = w->pos - start;
    w->num_chunks++;
    w->n = 0;
    for (int f = 0; f < w->num_features; f++)
        w->feat[f].nv = 0;
    return rc;
}

static int write_header(struct sr_binfmt_writer *w, uint64_t table_offset)
{
    uint8_t h[SR_BINFMT_HEADER_BYTES] = {0};
    uint32_t u32[6] = {SR_BINFMT_VERSION,      w->with_weights ? SR_BINFMT_FLAG_WEIGHTS : 0,
                       (uint32_t)w->num_dense, (uint32_t)w->num_features,
                       (uint32_t)w->id_bytes,  (uint32_t)w->C};
    uint64_t u64[5] = {(uint64_t)w->total, (uint64_t)w->num_chunks, (uint64_t)w->max_sample_values,
                       w->pos, table_offset};
    memcpy(h, SR_BINFMT_MAGIC, SR_BINFMT_MAGIC_LEN);
    memcpy(h + 8, u32, sizeof u32);
    memcpy(h + 32, u64, sizeof u64);
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, w->f) != sizeof h)
        return werr(w);
    return SR_OK;
}

int sr_binfmt_writer_close(struct sr_binfmt_writer *w)
{
    int rc = flush_chunk(w);
    uint64_t table_offset = w->pos;
    rc = rc ? rc : put(w, w->table, 16 * (uint64_t)w->num_chunks);
    rc = rc ? rc : write_header(w, table_offset);
    if (!rc && sr_atomic_file_commit(&w->af)) /* releases af: writer_free then skips it */
        rc = sr_error_set(SR_ERR_WRITE, "%s", sr_error_message());
    w->f = NULL;
    writer_free(w);
    return rc;
}

void sr_binfmt_writer_abort(struct sr_binfmt_writer *w)
{
    if (!w)
        return;
    w->f = NULL;
    writer_free(w); /* closes and removes the temporary file */
}

int64_t sr_binfmt_writer_count(const struct sr_binfmt_writer *w)
{
    return w->total;
}
