/*
 * safetensors files: the weights format PyTorch users exchange
 * (https://github.com/huggingface/safetensors). Reading verifies the whole
 * file before handing out a single tensor; writing is atomic.
 *
 *   | u64 N (little-endian) | N bytes of JSON header | data area ..................... |
 *
 *   header: {"NAME": {"dtype": "F32", "shape": [d0, d1, ...],
 *                     "data_offsets": [BEGIN, END]}, ...,
 *            "__metadata__": {"key": "string", ...}}      (optional, string values)
 *
 * The reader keeps __metadata__'s entries (sr_st_meta_*); the writer puts
 * {"format": "pt"} first, then the caller's entries sorted by key.
 *
 * BEGIN and END are byte offsets into the data area, END exclusive; tensors
 * are row-major and little-endian. The header is padded with spaces so the
 * data area starts on an 8-byte boundary. This version reads and writes F32,
 * F16 and BF16 (sr_st_find hands out F32 only; sr_st_get any of the three);
 * other dtypes are rejected with a hint to convert them. Every tensor must
 * start on a multiple of its element size (the reference writer puts wider
 * dtypes first; so does sr_st_write).
 *
 * What a reader accepts (as the reference Rust implementation does): a header
 * length in [2, min(file size - 8, 100 MB)] that parses as one JSON object
 * (cJSON; only whitespace after it); unique, non-empty tensor names; shapes of
 * at most SR_ST_MAX_DIMS non-negative integers whose product times 4 does not
 * overflow; offsets with BEGIN <= END and END - BEGIN == numel * element size; tensors
 * that, sorted by offset, tile the data area exactly: no overlap, no gap, no
 * trailing bytes. Anything else is SR_ERR_DATA naming the file, the tensor and
 * what is wrong, with a HINT.
 */
#ifndef SHARDREC_SAFETENSORS_H
#define SHARDREC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/tensor.h"

#define SR_ST_MAX_DIMS 4
/* Largest header the reader accepts (the reference implementation's limit). */
#define SR_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* One tensor to write, or a view of one read: row-major, host memory. */
struct sr_st_tensor {
    const char *name;
    int ndim; /* 0 (a scalar) .. SR_ST_MAX_DIMS */
    int64_t shape[SR_ST_MAX_DIMS];
    const float *data;   /* numel elements of dtype (2-byte ones for F16, BF16: read them
                            through a uint16_t pointer); may be NULL when numel is 0 */
    enum sr_dtype dtype; /* SR_DTYPE_F32 (0, the default), SR_DTYPE_F16 or SR_DTYPE_BF16 */
};

/* A dtype's element size in bytes and its safetensors name ("F32", "F16", "BF16"). */
int sr_st_dtype_bytes(enum sr_dtype dtype);
const char *sr_st_dtype_name(enum sr_dtype dtype);

struct sr_st_file;

/* Map `path` (read-only) and verify it as above. On success *out owns the
 * mapping; tensor data pointers stay valid until sr_st_close. Errors:
 * SR_ERR_IO (cannot open/stat/map), SR_ERR_DATA (malformed file),
 * SR_ERR_UNSUPPORTED (a dtype other than F32); then *out is NULL. */
int sr_st_open(struct sr_st_file **out, const char *path);

/* As sr_st_open, for bytes already in memory (a fuzzer's input, a test's
 * buffer). `buf` is borrowed and must outlive the file; `label` names it in
 * messages. When the data area is not 4-byte aligned it is copied. */
int sr_st_open_memory(struct sr_st_file **out, const void *buf, size_t size, const char *label);

void sr_st_close(struct sr_st_file *f); /* NULL ok */

/* Tensors in the file, 0 <= i < sr_st_count, in data-offset order. */
int sr_st_count(const struct sr_st_file *f);
const char *sr_st_name(const struct sr_st_file *f, int i);
/* The whole view of tensor i (name and data valid until sr_st_close). */
void sr_st_get(const struct sr_st_file *f, int i, struct sr_st_tensor *out);
/* The file's path or label, for messages. */
const char *sr_st_path(const struct sr_st_file *f);

/* One __metadata__ entry: the format allows string values only. */
struct sr_st_meta {
    const char *key;
    const char *value;
};

/* The header's __metadata__ entries ("format" included), 0 <= i <
 * sr_st_meta_count, in the header's order; key and value are valid until
 * sr_st_close. A key that appears twice is kept twice (as read). */
int sr_st_meta_count(const struct sr_st_file *f);
void sr_st_meta_get(const struct sr_st_file *f, int i, struct sr_st_meta *out);

/* Look an F32 tensor up by name: SR_OK and its data (numel floats), ndim and
 * shape (unused entries 0); SR_ERR_DATA naming file and tensor if it is
 * absent, SR_ERR_UNSUPPORTED if it is F16 or BF16 (any of data, ndim, shape
 * may be NULL). */
int sr_st_find(const struct sr_st_file *f, const char *name, const float **data, int *ndim,
               int64_t shape[SR_ST_MAX_DIMS]);
/* Any tensor by name, whatever its dtype (as sr_st_get); SR_ERR_DATA if absent. */
int sr_st_find_any(const struct sr_st_file *f, const char *name, struct sr_st_tensor *out);

/* Write n tensors to `path` atomically (sr_atomic_file_open: a temporary file
 * created exclusively beside PATH under a random name, fsync, rename over PATH,
 * fsync the directory); a failure removes the temporary file and leaves any
 * old PATH untouched; a symbolic link at PATH is replaced, not followed.
 * Tensors are laid out by element size, widest first, then by name (the
 * reference writer's order) and the header carries __metadata__ {"format": "pt"}.
 * Errors: SR_ERR_INVALID_ARG (empty, over-long or duplicate name, ndim or a
 * dimension out of range, NULL data for a non-empty tensor), SR_ERR_IO. */
int sr_st_write(const char *path, int n, const struct sr_st_tensor *tensors);
/* As sr_st_write, with n_meta more __metadata__ entries after "format",
 * sorted by key (so the same entries give the same bytes in any order).
 * More errors, SR_ERR_INVALID_ARG: an empty, reserved ("format") or
 * duplicate key, a NULL value. */
int sr_st_write_meta(const char *path, int n, const struct sr_st_tensor *tensors, int n_meta,
                     const struct sr_st_meta *meta);

/* Where sr_st_write_meta puts n tensors (and n_meta metadata entries),
 * computed without their data (which may be NULL): the bytes before the data
 * area (the u64 header length and the padded JSON header, exactly as
 * sr_st_write_meta writes them), the file offset
 * of each tensor's first byte (offset[i] for tensors[i], in the caller's
 * order) and the file's size. The same tensors give the same layout in every
 * process, so several writers can fill one file at these offsets
 * (--save-weights of a sharded model). Errors as sr_st_write_meta's, but
 * for data; then *out is zeroed. Free with sr_st_layout_free. */
struct sr_st_layout {
    unsigned char *header; /* header_len bytes: file offsets [0, header_len) */
    size_t header_len;
    uint64_t *offset; /* (n) */
    uint64_t file_size;
};
int sr_st_layout(const char *path, int n, const struct sr_st_tensor *tensors, int n_meta,
                 const struct sr_st_meta *meta, struct sr_st_layout *out);
void sr_st_layout_free(struct sr_st_layout *l); /* NULL or zeroed ok */

/* numel of a shape, or -1 if it is negative or numel * 4 overflows int64. */
int64_t sr_st_numel(int ndim, const int64_t *shape);

/* "[100, 16]" into buf (always terminated). */
void sr_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

#endif
