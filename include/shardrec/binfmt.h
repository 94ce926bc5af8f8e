/*
 * shardrec's binary sample format: a memory-mappable file of chunks (row
 * groups), each holding its samples column by column, so a reader maps the file
 * and copies a batch out at memory speed, and a rank can jump straight to its
 * own slice of any global batch. It holds one-hot Criteo samples and multi-hot
 * ones (a variable number of ids per feature, optional per-id weights).
 * docs/data-format.md is the full description; all integers little-endian.
 *
 *   offset  size  field
 *   0       8     magic "\x89SRDATA\n" (a non-ASCII first byte: never a TSV)
 *   8       4     version (1)
 *   12      4     flags: bit 0 = per-id weights present; other bits 0
 *   16      4     num_dense (13 for Criteo)
 *   20      4     num_features F
 *   24      4     id_bytes: 4 (uint32, when every table has <= 2^32 rows) or 8 (int64)
 *   28      4     chunk_samples C: every chunk but the last holds exactly C samples
 *   32      8     num_samples N
 *   40      8     num_chunks = ceil(N / C)
 *   48      8     max_sample_values: the most ids one sample holds (all features)
 *   56      8     file_size: the whole file in bytes (catches truncation)
 *   64      8     table_offset: where the chunk table starts
 *   72      56    reserved, zero (a reader refuses a file where they are not)
 *   128     8F    rows (F) int64: the table rows ids were reduced modulo
 *   ...           chunks, each at a multiple of 64
 *   table_offset  num_chunks x { u64 offset, u64 bytes }     (ends the file)
 *
 * A chunk of n samples, every section starting at a multiple of 64 bytes from
 * the chunk's start:
 *
 *   head     u64 n, then F x { u32 fixed_len, u32 zero, u64 num_values }
 *   dense    f32 (n, num_dense)
 *   labels   u8 (n), 0 or 1
 *   per feature f:
 *     offsets  u64 (n + 1), only when fixed_len == SR_BINFMT_VARIABLE: bag of
 *              sample s is ids[offsets[s] .. offsets[s+1])
 *     ids      id_bytes (num_values); a fixed_len feature has n * fixed_len ids,
 *              sample s owning ids[s*fixed_len .. (s+1)*fixed_len)
 *     weights  f32 (num_values), only when flags bit 0
 *
 * Every size and offset in the header, the chunk table and the chunk heads is
 * checked against the file size when the file is opened (a clear error names
 * the file and what is inconsistent); variable offsets, ids (< rows) and labels
 * are checked as batches are copied out, so a corrupt file gives an error,
 * never an out-of-bounds read or a silently wrong sample.
 */
#ifndef SHARDREC_BINFMT_H
#define SHARDREC_BINFMT_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/batch.h"

#define SR_BINFMT_MAGIC         "\x89SRDATA\n"
#define SR_BINFMT_MAGIC_LEN     8
#define SR_BINFMT_VERSION       1
#define SR_BINFMT_HEADER_BYTES  128
#define SR_BINFMT_ALIGN         64
#define SR_BINFMT_VARIABLE      UINT32_MAX /* fixed_len of a variable-length feature */
#define SR_BINFMT_FLAG_WEIGHTS  1u
#define SR_BINFMT_CHUNK_DEFAULT 65536

/* One feature's sections inside one chunk (pointers into the mapped file). */
struct sr_binfmt_section {
    uint32_t fixed_len;      /* ids per sample, or SR_BINFMT_VARIABLE */
    int64_t num_values;      /* ids in this chunk */
    const uint64_t *offsets; /* (n + 1) or NULL when fixed */
    const void *ids;         /* (num_values) uint32 or int64 */
    const float *weights;    /* (num_values) or NULL */
};

struct sr_binfmt_chunk {
    int64_t first;         /* global sample index (within the file) of sample 0 */
    int64_t n;             /* samples */
    const float *dense;    /* (n, num_dense) */
    const uint8_t *labels; /* (n) */
};

/* A verified view of a whole file in memory (mapped by sr_binfmt_open or given
 * by the caller). */
struct sr_binfmt_view {
    char *name; /* for messages; owned */
    const uint8_t *data;
    size_t size;
    int num_dense, num_features, id_bytes, has_weights;
    int64_t chunk_samples, num_samples, num_chunks, max_sample_values;
    int64_t *rows;                      /* (F) owned copy */
    struct sr_binfmt_chunk *chunks;     /* (num_chunks) owned */
    struct sr_binfmt_section *sections; /* (num_chunks, F) owned */
    void *map;                          /* mmap base when opened from a path */
};

/* Whether the first n bytes start with the magic. */
int sr_binfmt_is_binfmt(const void *head, size_t n);

/* Verify data[0..size) as a file and build the view (borrowing data, which must
 * outlive it and be 8-byte aligned). Returns SR_ERR_DATA naming `name` and the
 * inconsistent field (bad magic, unknown version or flags, truncated file,
 * sizes or offsets outside the file, a chunk whose sections do not add up).
 * The view is zeroed on error and needs no close. */
int sr_binfmt_view_init(struct sr_binfmt_view *v, const void *data, size_t size, const char *name);

/* Map path read-only and verify it (sr_binfmt_view_init). SR_ERR_IO if it cannot
 * be opened or mapped. Close with sr_binfmt_close. */
int sr_binfmt_open(struct sr_binfmt_view *v, const char *path);
void sr_binfmt_close(struct sr_binfmt_view *v); /* unmaps, frees; zeroed view is a no-op */

/* Copy samples first .. first+n-1 of the file into batch slots at .. at+n-1:
 * dense, labels and lengths (kjt.lengths[f * kjt.stride + slot]; the caller sets
 * kjt.stride). Checks labels and variable offsets: SR_ERR_DATA naming the
 * file, chunk and sample. The samples must exist (an invariant). */
int sr_binfmt_copy_head(const struct sr_binfmt_view *v, int64_t first, int64_t n,
                        struct sr_batch *batch, int at);

/* Copy the ids (and weights; 1 when the file has none) of the same samples to
 * the batch's values at kjt.offsets[f * stride + slot], offsets being already
 * computed with stride = batch->kjt.stride. Checks every id is in [0, rows[f]):
 * SR_ERR_DATA otherwise. */
int sr_binfmt_copy_values(const struct sr_binfmt_view *v, int64_t first, int64_t n,
                          struct sr_batch *batch, int at);

/* Writing: samples are appended a batch at a time and buffered one chunk at a
 * time, so a file of any size is written in bounded memory. The file is an
 * atomic write (shardrec/atomic_file.h): a temporary file created exclusively
 * beside PATH under a random name, renamed over PATH by a successful close; a
 * failure or abort removes it and leaves any old PATH untouched. */
struct sr_binfmt_writer;

/* Start a file for samples of num_dense dense values and F features whose ids
 * lie in [0, rows[f]) (rows copied); with_weights stores per-id weights;
 * chunk_samples 0 means SR_BINFMT_CHUNK_DEFAULT. SR_ERR_INVALID_ARG for bad
 * shapes, SR_ERR_IO (with a hint) if the temporary file cannot be created. */
int sr_binfmt_writer_open(struct sr_binfmt_writer **out, const char *path, int num_dense,
                          int num_features, const int64_t *rows, int with_weights,
                          int64_t chunk_samples);

/* Append the batch_size samples of batch (lengths, offsets and values as a
 * reader fills them; offsets must be computed). SR_ERR_DATA if an id is outside
 * [0, rows[f]) or a label is not 0/1; SR_ERR_INVALID_ARG if the batch's shape
 * differs; SR_ERR_IO on a write error. */
int sr_binfmt_writer_append(struct sr_binfmt_writer *w, const struct sr_batch *batch);

/* Flush, write the chunk table and header, and rename into place. Frees w
 * whatever the outcome (on error the temporary file is removed). */
int sr_binfmt_writer_close(struct sr_binfmt_writer *w);

/* Give up: remove the temporary file and free w. NULL is a no-op. */
void sr_binfmt_writer_abort(struct sr_binfmt_writer *w);

/* Samples appended so far. */
int64_t sr_binfmt_writer_count(const struct sr_binfmt_writer *w);

#endif
