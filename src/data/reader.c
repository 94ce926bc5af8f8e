/*
 * The file reader: TSV and binary files as one sample stream, cut into global
 * batches of G = W*B samples of which rank r keeps [r*B, (r+1)*B).
 *
 * A batch is assembled in two phases because a KJT is feature-major and the
 * bags' sizes are only known once every sample of the batch has been seen:
 *
 *   1. gather: for each run of samples (a "segment": consecutive TSV lines, or
 *      consecutive samples of one binary chunk range) write dense, labels and
 *      lengths into the batch slots; TSV ids wait in tsv_ids (F, B).
 *   2. place:  compute offsets over the whole batch, then copy every segment's
 *      ids to their place in values.
 *
 * Samples of other ranks are skipped: binary ones by moving a cursor, TSV ones
 * by parsing without storing (so that a bad line is found by every rank at the
 * same place, and skipped lines leave sample indices equal on every rank).
 * Under shuffle (binary files only) the stream position is a (block of the
 * permutation, offset in it) cursor instead of (file, sample); a run of a
 * block may cross files and then makes one segment per file.
 * All memory is taken at open; next() does not allocate.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "data/line_stream.h"
#include "shardrec/alloc.h"
#include "shardrec/binfmt.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/reader.h"
#include "shardrec/rng.h"

#define TSV_BUFFER_BYTES ((size_t)4 << 20)
#define SHUFFLE_STREAM   0x5348554646ull /* "SHUFF" */

struct rfile {
    char *path;
    int64_t bytes; /* its size at open (progress) */
    int is_bin;
    struct sr_binfmt_view view; /* mapped when is_bin */
};

struct segment {
    int file; /* index into files, or -1 for TSV lines (ids in tsv_ids) */
    int at;   /* first batch slot */
    int64_t first, count;
};

struct sr_reader {
    struct sr_reader_options opt;
    int F, num_dense, has_weights;
    int64_t *rows; /* (F) */
    struct sr_criteo_parser parser;
    struct rfile *files;
    int n_files;
    int cur;         /* current file; n_files when the stream is over */
    int tsv_open;    /* whether ls is open on files[cur] */
    int64_t bin_pos; /* next sample of files[cur] when binary */
    struct sr_line_stream ls;
    char *buf;
    size_t buf_cap;
    int64_t *tsv_ids; /* (F, B) ids of TSV samples in this batch */
    struct segment *segs;
    int n_segs, segs_cap;
    int64_t max_values;
    int64_t *feature_max; /* (F) most ids of feature f in one sample, over all files */
    int64_t global_batch; /* index of the next global batch */
    int done;
    /* shuffle: blocks of `block` samples of the whole stream, visited as perm says */
    int64_t block, n_blocks, total;
    int64_t *perm;       /* (n_blocks) */
    int64_t *file_start; /* (n_files + 1) first stream index of each file */
    uint64_t epoch;
    int64_t sp_block, sp_off; /* cursor: perm index, offset in that block */
    int64_t bad[SR_CRITEO_NUM_FAULTS];
    char first_bad[SR_CRITEO_NUM_FAULTS][160];
};

static int check_options(const struct sr_reader_options *o, int n_paths, int F)
{
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world || o->batch_size < 1 ||
        o->max_line < 0 || n_paths < 1 || F < 1 || o->block_samples < 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "reader: rank %d of %d, batch %d, %d files, %d features, max line "
                            "%lld, block %d; HINT: need 0 <= rank < world, batch >= 1, a file, "
                            "a feature, block >= 0",
                            o->rank, o->world, o->batch_size, n_paths, F, (long long)o->max_line,
                            o->block_samples);
    if ((int64_t)o->batch_size * o->world > ((int64_t)1 << 40))
        return sr_error_set(SR_ERR_INVALID_ARG, "reader: global batch too large");
    return SR_OK;
}

/* Whether path starts with the binary magic (an unreadable file is left to the TSV open). */
static int sniff_binary(const char *path)
{
    char head[SR_BINFMT_MAGIC_LEN];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return sr_binfmt_is_binfmt(head, n);
}

/* A binary file must match the reader's features and rows. */
static int check_binary(struct sr_reader *r, const struct sr_binfmt_view *v)
{
    if (v->num_features != r->F)
        return sr_error_set(SR_ERR_DATA,
                            "%s: holds %d features, the model %d; HINT: convert "
                            "with the model's --table-rows",
                            v->name, v->num_features, r->F);
    for (int f = 0; f < r->F; f++)
        if (v->rows[f] != r->rows[f])
            return sr_error_set(SR_ERR_DATA,
                                "%s: feature %d was reduced mod %lld rows, the "
                                "model has %lld; HINT: convert again with the model's "
                                "--table-rows",
                                v->name, f, (long long)v->rows[f], (long long)r->rows[f]);
    return SR_OK;
}

/* The most ids of each feature in one sample of a binary file: a chunk's
 * fixed bag length, or where a chunk's bags vary, the file's most ids in one
 * sample. */
static void feature_max_of(struct sr_reader *r, const struct sr_binfmt_view *v)
{
    for (int64_t c = 0; c < v->num_chunks; c++)
        for (int f = 0; f < r->F; f++) {
            const uint32_t len = v->sections[c * r->F + f].fixed_len;
            const int64_t most = len == SR_BINFMT_VARIABLE ? v->max_sample_values : (int64_t)len;
            if (most > r->feature_max[f])
                r->feature_max[f] = most;
        }
}

/* Map and check every binary file; fix num_dense, weights and the ids capacity. */
static int open_files(struct sr_reader *r, const char *const *paths)
{
    int64_t per_sample = r->F; /* TSV: one id per feature */
    r->num_dense = -1;
    r->feature_max = sr_calloc((size_t)r->F, sizeof *r->feature_max);
    for (int i = 0; i < r->n_files; i++) {
        struct rfile *fl = &r->files[i];
        fl->path = sr_strdup(paths[i]);
        int nd = SR_CRITEO_NUM_DENSE, rc = sr_file_check_regular(paths[i], NULL);
        if (rc) /* a FIFO without a writer would block the open; a device never end */
            return rc;
        struct stat st;
        fl->bytes = stat(paths[i], &st) == 0 ? (int64_t)st.st_size : 0;
        fl->is_bin = sniff_binary(paths[i]);
        if (fl->is_bin) {
            rc = sr_binfmt_open(&fl->view, paths[i]);
            rc = rc ? rc : check_binary(r, &fl->view);
            if (rc)
                return rc;
            nd = fl->view.num_dense;
            r->has_weights |= fl->view.has_weights;
            if (fl->view.max_sample_values > per_sample)
                per_sample = fl->view.max_sample_values;
            feature_max_of(r, &fl->view);
        } else { /* TSV: one id per feature */
            for (int f = 0; f < r->F; f++)
                r->feature_max[f] = r->feature_max[f] > 1 ? r->feature_max[f] : 1;
        }
        if (r->num_dense >= 0 && nd != r->num_dense)
            return sr_error_set(SR_ERR_DATA,
                                "%s: %d dense features, earlier files %d; HINT: "
                                "all files of one run need the same shape",
                                paths[i], nd, r->num_dense);
        r->num_dense = nd;
    }
    r->max_values = per_sample * r->opt.batch_size;
    return SR_OK;
}

static void alloc_buffers(struct sr_reader *r)
{
    int64_t ml = r->opt.max_line;
    r->buf_cap = TSV_BUFFER_BYTES > (size_t)ml + 2 ? TSV_BUFFER_BYTES : (size_t)ml + 2;
    r->buf = sr_malloc(r->buf_cap);
    r->tsv_ids = sr_malloc(sizeof(int64_t) * (size_t)r->F * (size_t)r->opt.batch_size);
    r->segs_cap = 2 * r->n_files + 2 * r->opt.batch_size / 1024 + 64;
    if (r->opt.shuffle) /* a batch touches <= B/block + 2 blocks; each file boundary splits one */
        r->segs_cap += r->n_files + r->opt.batch_size / (int)r->block + 3;
    r->segs = sr_malloc(sizeof(struct segment) * (size_t)r->segs_cap);
}

/* Fisher-Yates over the blocks, each swap drawn from (seed, epoch, i): the order
 * depends only on (seed, epoch, n_blocks). */
static void make_permutation(struct sr_reader *r)
{
    for (int64_t i = 0; i < r->n_blocks; i++)
        r->perm[i] = i;
    for (int64_t i = r->n_blocks - 1; i > 0; i--) {
        int64_t j = (int64_t)(sr_rng_u64(r->opt.seed, SHUFFLE_STREAM + r->epoch, (uint64_t)i) %
                              (uint64_t)(i + 1));
        int64_t tmp = r->perm[i];
        r->perm[i] = r->perm[j];
        r->perm[j] = tmp;
    }
    r->sp_block = r->sp_off = 0;
}

/* Shuffle needs every file mapped; lay out the blocks over their samples. */
static int init_shuffle(struct sr_reader *r)
{
    for (int i = 0; i < r->n_files; i++)
        if (!r->files[i].is_bin)
            return sr_error_set(SR_ERR_UNSUPPORTED,
                                "%s: --shuffle needs random access: convert the TSV with "
                                "`shardrec convert` first",
                                r->files[i].path);
    r->block = r->opt.block_samples ? r->opt.block_samples : SR_READER_BLOCK_DEFAULT;
    r->file_start = sr_malloc(sizeof(int64_t) * (size_t)(r->n_files + 1));
    r->file_start[0] = 0;
    for (int i = 0; i < r->n_files; i++)
        r->file_start[i + 1] = r->file_start[i] + r->files[i].view.num_samples;
    r->total = r->file_start[r->n_files];
    r->n_blocks = (r->total + r->block - 1) / r->block;
    r->perm = sr_malloc(sizeof(int64_t) * (size_t)(r->n_blocks ? r->n_blocks : 1));
    make_permutation(r);
    return SR_OK;
}

/* Position at the start of files[i] (i == n_files: the end). */
static int enter_file(struct sr_reader *r, int i)
{
    if (r->tsv_open)
        sr_line_stream_close(&r->ls);
    r->tsv_open = 0;
    r->cur = i;
    r->bin_pos = 0;
    if (i >= r->n_files || r->files[i].is_bin)
        return SR_OK;
    int rc = sr_line_stream_open(&r->ls, r->files[i].path, r->buf, r->buf_cap, r->opt.max_line);
    r->tsv_open = rc == SR_OK;
    return rc;
}

int sr_reader_open(struct sr_reader **out, const char *const *paths, int n_paths, int num_features,
                   const int64_t *rows, const struct sr_reader_options *opt)
{
    *out = NULL;
    int rc = check_options(opt, n_paths, num_features);
    if (rc)
        return rc;
    struct sr_reader *r = sr_calloc(1, sizeof *r);
    r->opt = *opt;
    if (!r->opt.max_line)
        r->opt.max_line = SR_CRITEO_MAX_LINE_DEFAULT;
    r->F = num_features;
    r->rows = sr_malloc(sizeof(int64_t) * (size_t)num_features);
    memcpy(r->rows, rows, sizeof(int64_t) * (size_t)num_features);
    r->n_files = n_paths;
    r->files = sr_calloc((size_t)n_paths, sizeof *r->files);
    rc = sr_criteo_parser_init(&r->parser, num_features, r->rows);
    rc = rc ? rc : open_files(r, paths);
    if (!rc && r->opt.shuffle)
        rc = init_shuffle(r);
    if (!rc) {
        alloc_buffers(r);
        rc = enter_file(r, 0);
    }
    if (rc) {
        sr_reader_free(r);
        return rc;
    }
    *out = r;
    return SR_OK;
}

void sr_reader_batch_init(const struct sr_reader *r, struct sr_batch *batch,
                          const char *const *keys)
{
    sr_batch_init(batch, r->opt.batch_size, r->num_dense, r->F, r->max_values, r->has_weights,
                  keys);
}

int sr_reader_num_dense(const struct sr_reader *r)
{
    return r->num_dense;
}

int64_t sr_reader_max_values(const struct sr_reader *r)
{
    return r->max_values;
}

int64_t sr_reader_feature_max_values(const struct sr_reader *r, int f)
{
    SR_ASSERT(f >= 0 && f < r->F);
    const int64_t n = r->feature_max[f] * r->opt.batch_size;
    return n < r->max_values ? n : r->max_values;
}

int sr_reader_has_weights(const struct sr_reader *r)
{
    return r->has_weights;
}

/* A bad line: an error, or under skip_bad_lines a count (and the first place seen). */
static int bad_line(struct sr_reader *r, const struct sr_criteo_fault_info *info)
{
    char what[256];
    sr_criteo_fault_describe(&r->parser, info, what, sizeof what);
    if (!r->opt.skip_bad_lines)
        return sr_error_set(SR_ERR_DATA, "%s:%lld: %s", r->ls.path, (long long)r->ls.line_no, what);
    if (r->bad[info->kind]++ == 0)
        snprintf(r->first_bad[info->kind], sizeof r->first_bad[0], "%s:%lld", r->ls.path,
                 (long long)r->ls.line_no);
    return SR_OK;
}

/* Append TSV slot `at` to the batch's segments. */
static void add_tsv_slot(struct sr_reader *r, int at)
{
    struct segment *last = r->n_segs ? &r->segs[r->n_segs - 1] : NULL;
    if (last && last->file < 0 && last->at + last->count == at) {
        last->count++;
        return;
    }
    SR_ASSERT(r->n_segs < r->segs_cap);
    r->segs[r->n_segs++] = (struct segment){.file = -1, .at = at, .first = 0, .count = 1};
}

/* One good TSV line into slot `at` of batch (or only checked when batch is NULL).
 * Returns 1 for a sample, 0 for a skipped bad line, 2 at the end of the file. */
static int tsv_one(struct sr_reader *r, struct sr_batch *batch, int at, int *status)
{
    const char *line;
    size_t len;
    struct sr_criteo_fault_info info = {SR_CRITEO_LONG_LINE, -1};
    int rc = sr_line_stream_next(&r->ls, &line, &len);
    *status = rc < 0 ? rc : SR_OK;
    if (rc <= 0)
        return 2;
    if (rc == SR_LINE_OK) {
        int B = r->opt.batch_size;
        float *label = batch ? batch->labels + at : NULL;
        float *dense = batch ? batch->dense + (size_t)at * SR_CRITEO_NUM_DENSE : NULL;
        int64_t *ids = batch ? r->tsv_ids + at : NULL;
        if (!sr_criteo_parse_line(&r->parser, line, len, label, dense, ids, B, &info))
            return 1;
    }
    *status = bad_line(r, &info);
    return 0;
}

/* Up to `want` TSV samples from the current file into slots at.. ; *got counts them. */
static int pull_tsv(struct sr_reader *r, struct sr_batch *batch, int at, int64_t want, int64_t *got,
                    int *file_done)
{
    int status = SR_OK, stride = batch ? batch->kjt.stride : 0;
    while (*got < want) {
        int slot = at + (int)*got;
        int k = tsv_one(r, batch, slot, &status);
        if (status)
            return status;
        if (k == 2) {
            *file_done = 1;
            return SR_OK;
        }
        if (k == 1 && batch) {
            for (int f = 0; f < r->F; f++)
                batch->kjt.lengths[(int64_t)f * stride + slot] = 1;
            add_tsv_slot(r, slot);
        }
        *got += k;
    }
    return SR_OK;
}

static int pull_binary(struct sr_reader *r, struct sr_batch *batch, int at, int64_t want,
                       int64_t *got, int *file_done)
{
    const struct sr_binfmt_view *v = &r->files[r->cur].view;
    int64_t m = v->num_samples - r->bin_pos;
    m = m < want - *got ? m : want - *got;
    if (batch && m > 0) {
        int rc = sr_binfmt_copy_head(v, r->bin_pos, m, batch, at + (int)*got);
        if (rc)
            return rc;
        SR_ASSERT(r->n_segs < r->segs_cap);
        r->segs[r->n_segs++] = (struct segment){r->cur, at + (int)*got, r->bin_pos, m};
    }
    r->bin_pos += m;
    *got += m;
    *file_done = r->bin_pos == v->num_samples;
    return SR_OK;
}

/* Stream samples [g, g + m) (file order) into slots at.. of batch, one segment per file. */
static int copy_range(struct sr_reader *r, struct sr_batch *batch, int at, int64_t g, int64_t m)
{
    for (int f = 0; m > 0 && f < r->n_files; f++) {
        if (g >= r->file_start[f + 1])
            continue;
        int64_t first = g - r->file_start[f], n = r->file_start[f + 1] - g;
        n = n < m ? n : m;
        int rc = sr_binfmt_copy_head(&r->files[f].view, first, n, batch, at);
        if (rc)
            return rc;
        SR_ASSERT(r->n_segs < r->segs_cap);
        r->segs[r->n_segs++] = (struct segment){f, at, first, n};
        at += (int)n;
        g += n;
        m -= n;
    }
    return SR_OK;
}

/* pull() under shuffle: the next samples of the block-permuted stream. */
static int pull_shuffled(struct sr_reader *r, struct sr_batch *batch, int at, int64_t want,
                         int64_t *got)
{
    *got = 0;
    while (*got < want && r->sp_block < r->n_blocks) {
        int64_t start = r->perm[r->sp_block] * r->block, len = r->total - start;
        len = len < r->block ? len : r->block;
        int64_t m = len - r->sp_off;
        m = m < want - *got ? m : want - *got;
        if (batch) {
            int rc = copy_range(r, batch, at + (int)*got, start + r->sp_off, m);
            if (rc)
                return rc;
        }
        *got += m;
        r->sp_off += m;
        if (r->sp_off == len) {
            r->sp_block++;
            r->sp_off = 0;
        }
    }
    return SR_OK;
}

/* The next `want` samples of the stream: into slots at.. of batch, or skipped
 * when batch is NULL. *got < want only at the end of the data. */
static int pull(struct sr_reader *r, struct sr_batch *batch, int at, int64_t want, int64_t *got)
{
    if (r->opt.shuffle)
        return pull_shuffled(r, batch, at, want, got);
    *got = 0;
    while (*got < want && r->cur < r->n_files) {
        int file_done = 0, rc;
        if (r->files[r->cur].is_bin)
            rc = pull_binary(r, batch, at, want, got, &file_done);
        else
            rc = pull_tsv(r, batch, at, want, got, &file_done);
        if (!rc && file_done)
            rc = enter_file(r, r->cur + 1);
        if (rc)
            return rc;
    }
    return SR_OK;
}

/* Lengths were written with stride B; a partial batch of n < B packs them to stride n. */
static void pack_lengths(struct sr_batch *batch, int F, int B, int n)
{
    for (int f = 1; f < F; f++)
        memmove(batch->kjt.lengths + (int64_t)f * n, batch->kjt.lengths + (int64_t)f * B,
                sizeof(int32_t) * (size_t)n);
}

/* Offsets over the gathered lengths, checking the batch can hold the ids. */
static int compute_offsets(struct sr_batch *batch, int F, int n)
{
    int64_t total = 0;
    for (int64_t i = 0; i < (int64_t)F * n; i++)
        total += batch->kjt.lengths[i];
    if (total > batch->max_values)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "reader: batch of %d samples holds %lld ids, "
                            "room for %lld; HINT: size batches with sr_reader_batch_init",
                            n, (long long)total, (long long)batch->max_values);
    batch->kjt.num_values = total;
    batch->kjt.num_weights = batch->kjt.weights ? total : 0;
    return sr_kjt_compute_offsets(&batch->kjt);
}

/* Phase 2 for TSV slots: one id per feature, already reduced mod rows. */
static void place_tsv(struct sr_reader *r, struct sr_batch *batch, const struct segment *s)
{
    int n = batch->kjt.stride, B = r->opt.batch_size;
    for (int f = 0; f < r->F; f++) {
        int64_t dst = batch->kjt.offsets[(int64_t)f * n + s->at];
        memcpy(batch->kjt.values + dst, r->tsv_ids + (int64_t)f * B + s->at,
               sizeof(int64_t) * (size_t)s->count);
        for (int64_t i = 0; batch->kjt.weights && i < s->count; i++)
            batch->kjt.weights[dst + i] = 1.0f;
    }
}

static int place_values(struct sr_reader *r, struct sr_batch *batch)
{
    for (int i = 0; i < r->n_segs; i++) {
        const struct segment *s = &r->segs[i];
        if (s->file < 0) {
            place_tsv(r, batch, s);
            continue;
        }
        int rc = sr_binfmt_copy_values(&r->files[s->file].view, s->first, s->count, batch, s->at);
        if (rc)
            return rc;
    }
    return SR_OK;
}

static int check_batch(const struct sr_reader *r, const struct sr_batch *batch)
{
    if (batch->max_batch < r->opt.batch_size || batch->num_dense != r->num_dense ||
        batch->kjt.num_keys != r->F || (r->has_weights && !batch->kjt.weights))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "reader: batch for %d samples, %d dense, %d "
                            "features does not fit this reader's (%d, %d, %d%s); HINT: use "
                            "sr_reader_batch_init",
                            batch->max_batch, batch->num_dense, batch->kjt.num_keys,
                            r->opt.batch_size, r->num_dense, r->F,
                            r->has_weights ? ", weights" : "");
    return SR_OK;
}

/* Gather this rank's slice of the next global batch; *n = its samples, *total = the
 * global batch's. */
static int gather(struct sr_reader *r, struct sr_batch *batch, int64_t *n, int64_t *total)
{
    int64_t B = r->opt.batch_size, before = 0, after = 0;
    r->n_segs = 0;
    batch->kjt.stride = (int)B;
    int rc = pull(r, NULL, 0, r->opt.rank * B, &before);
    rc = rc ? rc : pull(r, batch, 0, B, n);
    rc = rc ? rc : pull(r, NULL, 0, (r->opt.world - 1 - r->opt.rank) * B, &after);
    *total = before + *n + after;
    return rc;
}

int sr_reader_next(struct sr_reader *r, struct sr_batch *batch)
{
    int64_t n = 0, total = 0, G = (int64_t)r->opt.batch_size * r->opt.world;
    int rc = check_batch(r, batch);
    if (rc || r->done)
        return rc ? rc : 0;
    rc = gather(r, batch, &n, &total);
    if (rc)
        return rc;
    if (total < G)
        r->done = 1;
    if (total == 0 || (total < G && !r->opt.keep_partial))
        return 0;
    if (n < r->opt.batch_size)
        pack_lengths(batch, r->F, r->opt.batch_size, (int)n);
    batch->kjt.stride = (int)n;
    batch->batch_size = (int)n;
    batch->first_index = r->global_batch * G + (int64_t)r->opt.rank * r->opt.batch_size;
    rc = compute_offsets(batch, r->F, (int)n);
    rc = rc ? rc : place_values(r, batch);
    r->global_batch++;
    return rc ? rc : 1;
}

/* The start of pass `epoch`: its block order under shuffle, the first file. */
static int start_pass(struct sr_reader *r, uint64_t epoch)
{
    r->done = 0;
    r->global_batch = 0;
    memset(r->bad, 0, sizeof r->bad);
    memset(r->first_bad, 0, sizeof r->first_bad);
    r->epoch = epoch;
    if (r->opt.shuffle)
        make_permutation(r);
    return enter_file(r, 0);
}

int sr_reader_rewind(struct sr_reader *r)
{
    return start_pass(r, r->epoch + 1);
}

void sr_reader_tell(const struct sr_reader *r, struct sr_reader_position *pos)
{
    pos->epoch = r->epoch;
    pos->batches = r->global_batch;
}

int sr_reader_seek(struct sr_reader *r, const struct sr_reader_position *pos)
{
    int64_t G = (int64_t)r->opt.batch_size * r->opt.world, got = 0;
    if (pos->batches < 0 || pos->batches > INT64_MAX / G)
        return sr_error_set(SR_ERR_INVALID_ARG, "reader: seek to global batch %lld",
                            (long long)pos->batches);
    int rc = start_pass(r, pos->epoch);
    rc = rc ? rc : pull(r, NULL, 0, pos->batches * G, &got);
    if (rc)
        return rc;
    if (got < pos->batches * G)
        return sr_error_set(SR_ERR_DATA,
                            "%s: the data ends after %lld samples, before global batch %lld of "
                            "pass %llu; HINT: the data files changed",
                            r->files[0].path, (long long)got, (long long)pos->batches,
                            (unsigned long long)pos->epoch);
    r->global_batch = pos->batches;
    return SR_OK;
}

int64_t sr_reader_bad_lines(const struct sr_reader *r, enum sr_criteo_fault kind)
{
    int64_t total = 0;
    if (kind != SR_CRITEO_OK)
        return (unsigned)kind < SR_CRITEO_NUM_FAULTS ? r->bad[kind] : 0;
    for (int k = 1; k < SR_CRITEO_NUM_FAULTS; k++)
        total += r->bad[k];
    return total;
}

void sr_reader_report(const struct sr_reader *r, FILE *f)
{
    int64_t total = sr_reader_bad_lines(r, SR_CRITEO_OK);
    if (!total)
        return;
    fprintf(f, "skipped %lld bad lines:", (long long)total);
    for (int k = 1; k < SR_CRITEO_NUM_FAULTS; k++)
        if (r->bad[k])
            fprintf(f, " %s %lld (first at %s);", sr_criteo_fault_name(k), (long long)r->bad[k],
                    r->first_bad[k]);
    fputc('\n', f);
}

void sr_reader_progress(const struct sr_reader *r, int64_t *done, int64_t *total)
{
    *done = *total = 0;
    for (int i = 0; i < r->n_files; i++) {
        const struct rfile *fl = &r->files[i];
        *total += fl->bytes;
        if (i < r->cur) {
            *done += fl->bytes;
        } else if (i == r->cur && fl->is_bin && fl->view.num_samples > 0) {
            *done += (int64_t)((double)fl->bytes * (double)r->bin_pos /
                               (double)fl->view.num_samples);
        } else if (i == r->cur && r->tsv_open) {
            *done += r->ls.file_read < fl->bytes ? r->ls.file_read : fl->bytes;
        }
    }
}

void sr_reader_free(struct sr_reader *r)
{
    if (!r)
        return;
    if (r->tsv_open)
        sr_line_stream_close(&r->ls);
    for (int i = 0; r->files && i < r->n_files; i++) {
        sr_free(r->files[i].path);
        if (r->files[i].is_bin)
            sr_binfmt_close(&r->files[i].view);
    }
    sr_free(r->files);
    sr_free(r->rows);
    sr_free(r->feature_max);
    sr_free(r->buf);
    sr_free(r->tsv_ids);
    sr_free(r->segs);
    sr_free(r->perm);
    sr_free(r->file_start);
    sr_free(r);
}
