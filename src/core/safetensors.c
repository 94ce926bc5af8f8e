/*
 * safetensors reader and writer (format and acceptance rules in
 * include/shardrec/safetensors.h).
 *
 * Reading maps the file and verifies it completely before returning: the
 * header length, the JSON header (parsed by cJSON, never by hand), every
 * entry's dtype, shape and offsets, unique names, and that the tensors sorted
 * by offset tile the data area exactly. A file that passes can be read through
 * the returned pointers without any further bounds check. Entries are kept
 * sorted by data offset, so sr_st_get walks the file front to back.
 *
 * Writing lays tensors out contiguously in name order behind a space-padded
 * header, through an atomic write (atomic_file.h: a temporary file created
 * exclusively beside PATH, fsync, rename), so a crash leaves either the old
 * file or the complete new one. Shapes and offsets are printed as exact
 * integers (cJSON's number printer would switch to exponents past 1e15).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"
#include "core/json_kind.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads little-endian data in place: add byte swapping for this host"
#endif

#define HINT_CORRUPT  "HINT: the file is corrupt or not a safetensors file; write it again"

struct st_entry {
    char *name;
    enum sr_dtype dtype; /* F32, F16 or BF16 */
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    uint64_t begin, end; /* byte offsets into the data area, end exclusive */
};

struct sr_st_file {
    char *path; /* path or label, for messages */
    void *map;  /* the mapping (sr_st_open) or NULL */
    size_t map_len;
    const uint8_t *data; /* data area, 4-byte aligned */
    uint64_t data_len;
    float *copy; /* aligned copy of a misaligned data area, or NULL */
    int n;
    struct st_entry *e; /* (n) sorted by data offset */
    int n_meta;
    struct sr_st_meta *meta; /* (n_meta) __metadata__, keys and values owned */
};

/* ---- messages ------------------------------------------------------------------ */

static int fail(int status, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(int status, const char *label, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sr_error_set(status, "%s: %s", label, msg);
}

void sr_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t k = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    k += (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

int64_t sr_st_numel(int ndim, const int64_t *shape)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return -1;
        if (shape[d] > 0 && numel > INT64_MAX / 4 / shape[d])
            return -1;
        numel *= shape[d];
    }
    return numel;
}

/* ---- header entries -------------------------------------------------------------- */

/* An integer JSON number in [0, 2^53]. */
static int get_count(const cJSON *item, uint64_t *out)
{
    int64_t v;
    if (!sr_json_int(item, 0, SR_JSON_INT_MAX, &v))
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int check_dtype(const char *label, const char *name, const cJSON *dtype,
                       enum sr_dtype *out)
{
    static const char *const known[] = {"F64", "I8",   "I16",     "I32",     "I64",
                                        "U8",  "U16",  "U32",     "U64",     "BOOL",
                                        "F8_E4M3", "F8_E5M2", NULL};
    if (!cJSON_IsString(dtype))
        return fail(SR_ERR_DATA, label, "tensor %s has no \"dtype\" string; %s", name,
                    HINT_CORRUPT);
    for (int d = 0; d < 3; d++) {
        const enum sr_dtype k = d == 0 ? SR_DTYPE_F32 : d == 1 ? SR_DTYPE_F16 : SR_DTYPE_BF16;
        if (strcmp(dtype->valuestring, sr_st_dtype_name(k)) == 0) {
            *out = k;
            return SR_OK;
        }
    }
    for (int i = 0; known[i]; i++)
        if (strcmp(dtype->valuestring, known[i]) == 0)
            return fail(SR_ERR_UNSUPPORTED, label,
                        "tensor %s has dtype %s; this version of shardrec reads F32, F16 and "
                        "BF16 only; HINT: convert it in PyTorch with tensor.float() before "
                        "saving",
                        name, known[i]);
    return fail(SR_ERR_DATA, label, "tensor %s has unknown dtype \"%.32s\"; %s", name,
                dtype->valuestring, HINT_CORRUPT);
}

static int parse_shape(const char *label, const char *name, const cJSON *shape, struct st_entry *e)
{
    if (!cJSON_IsArray(shape))
        return fail(SR_ERR_DATA, label, "tensor %s has no \"shape\" array; %s", name, HINT_CORRUPT);
    e->ndim = cJSON_GetArraySize(shape);
    if (e->ndim > SR_ST_MAX_DIMS)
        return fail(SR_ERR_DATA, label,
                    "tensor %s has %d dimensions; shardrec reads at most %d; "
                    "HINT: reshape it before saving",
                    name, e->ndim, SR_ST_MAX_DIMS);
    int d = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, shape)
    {
        uint64_t v;
        if (get_count(dim, &v))
            return fail(SR_ERR_DATA, label,
                        "tensor %s: shape entry %d is not a non-negative integer; %s", name, d,
                        HINT_CORRUPT);
        e->shape[d++] = (int64_t)v;
    }
    if (sr_st_numel(e->ndim, e->shape) < 0)
        return fail(SR_ERR_DATA, label, "tensor %s: the shape's element count overflows; %s", name,
                    HINT_CORRUPT);
    return SR_OK;
}

static int parse_offsets(const char *label, const char *name, const cJSON *offs, uint64_t data_len,
                         struct st_entry *e)
{
    char shp[160];
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        get_count(cJSON_GetArrayItem(offs, 0), &e->begin) ||
        get_count(cJSON_GetArrayItem(offs, 1), &e->end))
        return fail(SR_ERR_DATA, label,
                    "tensor %s: \"data_offsets\" is not a pair of non-negative integers; %s", name,
                    HINT_CORRUPT);
    if (e->begin > e->end)
        return fail(SR_ERR_DATA, label,
                    "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                    "] are not ordered (begin > end); %s",
                    name, e->begin, e->end, HINT_CORRUPT);
    if (e->end > data_len)
        return fail(SR_ERR_DATA, label,
                    "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the "
                    "data area (%" PRIu64 " bytes); HINT: the file is truncated; write it again",
                    name, e->begin, e->end, data_len);
    uint64_t want = (uint64_t)sr_st_numel(e->ndim, e->shape) * sr_st_dtype_bytes(e->dtype);
    if (e->end - e->begin != want) {
        sr_st_shape_str(e->ndim, e->shape, shp, sizeof shp);
        return fail(SR_ERR_DATA, label,
                    "tensor %s: data_offsets hold %" PRIu64 " bytes, shape %s of %s needs %" PRIu64
                    "; %s",
                    name, e->end - e->begin, shp, sr_st_dtype_name(e->dtype), want, HINT_CORRUPT);
    }
    if (e->begin % sr_st_dtype_bytes(e->dtype))
        return fail(SR_ERR_UNSUPPORTED, label,
                    "tensor %s (%s) starts at data offset %" PRIu64 ", not a multiple of its "
                    "%d-byte elements; HINT: write the file with the safetensors library (it "
                    "puts wider dtypes first)",
                    name, sr_st_dtype_name(e->dtype), e->begin, sr_st_dtype_bytes(e->dtype));
    return SR_OK;
}

static int parse_entry(const char *label, const cJSON *item, uint64_t data_len, struct st_entry *e)
{
    const char *name = item->string;
    int rc;
    if (!cJSON_IsObject(item))
        return fail(SR_ERR_DATA, label, "tensor %s: its header entry is not an object; %s", name,
                    HINT_CORRUPT);
    if ((rc = check_dtype(label, name, cJSON_GetObjectItemCaseSensitive(item, "dtype"),
                          &e->dtype)))
        return rc;
    if ((rc = parse_shape(label, name, cJSON_GetObjectItemCaseSensitive(item, "shape"), e)))
        return rc;
    if ((rc = parse_offsets(label, name, cJSON_GetObjectItemCaseSensitive(item, "data_offsets"),
                            data_len, e)))
        return rc;
    e->name = sr_strdup(name);
    return SR_OK;
}

/* __metadata__: string values only, kept in f->meta. */
static int parse_metadata(struct sr_st_file *f, const cJSON *meta)
{
    const cJSON *kv;
    if (!cJSON_IsObject(meta))
        return fail(SR_ERR_DATA, f->path, "__metadata__ is not an object; %s", HINT_CORRUPT);
    if (f->meta)
        return fail(SR_ERR_DATA, f->path, "__metadata__ appears twice; %s", HINT_CORRUPT);
    f->meta = sr_calloc((size_t)cJSON_GetArraySize(meta) + 1, sizeof *f->meta);
    cJSON_ArrayForEach(kv, meta)
    {
        if (!cJSON_IsString(kv))
            return fail(SR_ERR_DATA, f->path, "__metadata__ value \"%.64s\" is not a string; %s",
                        kv->string ? kv->string : "", HINT_CORRUPT);
        f->meta[f->n_meta].key = sr_strdup(kv->string ? kv->string : "");
        f->meta[f->n_meta++].value = sr_strdup(kv->valuestring);
    }
    return SR_OK;
}

/* ---- whole-file checks ---------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct st_entry *)a)->name, ((const struct st_entry *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const struct st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int check_unique(const char *label, struct st_entry *e, int n)
{
    qsort(e, (size_t)n, sizeof *e, cmp_name);
    for (int i = 1; i < n; i++)
        if (strcmp(e[i - 1].name, e[i].name) == 0)
            return fail(SR_ERR_DATA, label, "tensor %s appears twice in the header; %s", e[i].name,
                        HINT_CORRUPT);
    return SR_OK;
}

/* Sorted by offset, the tensors must cover [0, data_len) without overlap or gap. */
static int check_tiling(const char *label, struct st_entry *e, int n, uint64_t data_len)
{
    uint64_t expect = 0;
    qsort(e, (size_t)n, sizeof *e, cmp_offset);
    for (int i = 0; i < n; i++) {
        if (e[i].begin < expect)
            return fail(SR_ERR_DATA, label,
                        "tensors %s and %s overlap (bytes %" PRIu64 "..%" PRIu64 " of the data "
                        "area); %s",
                        e[i - 1].name, e[i].name, e[i].begin, expect, HINT_CORRUPT);
        if (e[i].begin > expect)
            return fail(SR_ERR_DATA, label,
                        "%" PRIu64 " unused bytes before tensor %s (at data offset %" PRIu64
                        "); %s",
                        e[i].begin - expect, e[i].name, expect, HINT_CORRUPT);
        expect = e[i].end;
    }
    if (expect != data_len)
        return fail(SR_ERR_DATA, label,
                    "%" PRIu64 " bytes after the last tensor are not described by the header; "
                    "%s",
                    data_len - expect, HINT_CORRUPT);
    return SR_OK;
}

static int parse_entries(struct sr_st_file *f, const cJSON *root)
{
    const cJSON *item;
    int rc;
    if (!cJSON_IsObject(root))
        return fail(SR_ERR_DATA, f->path, "the header is not a JSON object; %s", HINT_CORRUPT);
    int n = cJSON_GetArraySize(root);
    f->e = sr_calloc((size_t)n + 1, sizeof *f->e);
    cJSON_ArrayForEach(item, root)
    {
        if (!item->string || !item->string[0])
            return fail(SR_ERR_DATA, f->path, "a header entry has an empty name; %s", HINT_CORRUPT);
        if (strcmp(item->string, "__metadata__") == 0) {
            if ((rc = parse_metadata(f, item)))
                return rc;
            continue;
        }
        if ((rc = parse_entry(f->path, item, f->data_len, &f->e[f->n])))
            return rc;
        f->n++;
    }
    if ((rc = check_unique(f->path, f->e, f->n)))
        return rc;
    return check_tiling(f->path, f->e, f->n, f->data_len);
}

static int parse_header(struct sr_st_file *f, const uint8_t *buf, size_t size)
{
    uint64_t hlen;
    const char *end = NULL;
    if (size < 8)
        return fail(SR_ERR_DATA, f->path,
                    "the file is %zu bytes, too short for the 8-byte header length; "
                    "HINT: the file is truncated or empty; write it again",
                    size);
    memcpy(&hlen, buf, 8);
    if (hlen < 2 || hlen > SR_ST_MAX_HEADER)
        return fail(SR_ERR_DATA, f->path,
                    "header length %" PRIu64 " is not in [2, %" PRIu64 "]; %s", hlen,
                    SR_ST_MAX_HEADER, HINT_CORRUPT);
    if (hlen > size - 8)
        return fail(SR_ERR_DATA, f->path,
                    "header length %" PRIu64 " runs past the end of the "
                    "file (%zu bytes); HINT: the file is truncated; write it again",
                    hlen, size);
    const char *json = (const char *)buf + 8;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)hlen, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at && at >= json && at <= json + hlen ? (long)(at - json) : -1;
        return fail(SR_ERR_DATA, f->path, "the header is not valid JSON (near byte %ld); %s", pos,
                    HINT_CORRUPT);
    }
    for (; end && end < json + hlen; end++)
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            cJSON_Delete(root);
            return fail(SR_ERR_DATA, f->path,
                        "unexpected bytes after the JSON header (at byte %ld); %s",
                        (long)(end - json), HINT_CORRUPT);
        }
    f->data = buf + 8 + hlen;
    f->data_len = size - 8 - hlen;
    int rc = parse_entries(f, root);
    cJSON_Delete(root);
    return rc;
}

/* ---- open / close ------------------------------------------------------------------ */

static int open_bytes(struct sr_st_file *f, const uint8_t *buf, size_t size)
{
    int rc = parse_header(f, buf, size);
    if (rc)
        return rc;
    if (((uintptr_t)f->data & 3) && f->data_len > 0) {
        f->copy = sr_aligned_alloc((size_t)f->data_len);
        memcpy(f->copy, f->data, (size_t)f->data_len);
        f->data = (const uint8_t *)f->copy;
    }
    return SR_OK;
}

int sr_st_open_memory(struct sr_st_file **out, const void *buf, size_t size, const char *label)
{
    struct sr_st_file *f = sr_calloc(1, sizeof *f);
    f->path = sr_strdup(label ? label : "(memory)");
    int rc = open_bytes(f, buf, size);
    if (rc) {
        sr_st_close(f);
        f = NULL;
    }
    *out = f;
    return rc;
}

static int map_file(struct sr_st_file *f, const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* FIFO: refused, not waited on */
    if (fd < 0)
        return fail(SR_ERR_IO, path, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(SR_ERR_IO, path,
                    "not a regular file; HINT: give the path of a .safetensors "
                    "file");
    }
    f->map_len = (size_t)st.st_size;
    if (f->map_len > 0) {
        f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            close(fd);
            return fail(SR_ERR_IO, path, "cannot map %zu bytes: %s", f->map_len, strerror(errno));
        }
    }
    close(fd);
    return SR_OK;
}

int sr_st_open(struct sr_st_file **out, const char *path)
{
    struct sr_st_file *f = sr_calloc(1, sizeof *f);
    f->path = sr_strdup(path);
    int rc = map_file(f, path);
    if (!rc)
        rc = open_bytes(f, f->map, f->map_len);
    if (rc) {
        sr_st_close(f);
        f = NULL;
    }
    *out = f;
    return rc;
}

void sr_st_close(struct sr_st_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++)
        sr_free(f->e[i].name);
    sr_free(f->e);
    for (int i = 0; i < f->n_meta; i++) {
        sr_free((void *)f->meta[i].key);
        sr_free((void *)f->meta[i].value);
    }
    sr_free(f->meta);
    if (f->map)
        munmap(f->map, f->map_len);
    sr_free(f->copy);
    sr_free(f->path);
    sr_free(f);
}

/* ---- lookup ------------------------------------------------------------------------- */

int sr_st_count(const struct sr_st_file *f)
{
    return f->n;
}

const char *sr_st_name(const struct sr_st_file *f, int i)
{
    SR_ASSERT(i >= 0 && i < f->n);
    return f->e[i].name;
}

const char *sr_st_path(const struct sr_st_file *f)
{
    return f->path;
}

int sr_st_meta_count(const struct sr_st_file *f)
{
    return f->n_meta;
}

void sr_st_meta_get(const struct sr_st_file *f, int i, struct sr_st_meta *out)
{
    SR_ASSERT(i >= 0 && i < f->n_meta);
    *out = f->meta[i];
}

void sr_st_get(const struct sr_st_file *f, int i, struct sr_st_tensor *out)
{
    SR_ASSERT(i >= 0 && i < f->n);
    const struct st_entry *e = &f->e[i];
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof e->shape);
    out->data = (const float *)(f->data + e->begin);
    out->dtype = e->dtype;
}

int sr_st_find_any(const struct sr_st_file *f, const char *name, struct sr_st_tensor *out)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) {
            sr_st_get(f, i, out);
            return SR_OK;
        }
    return fail(SR_ERR_DATA, f->path,
                "no tensor named %s; HINT: list the file's tensors with "
                "python3 tools/torch_dlrm.py list FILE",
                name);
}

int sr_st_find(const struct sr_st_file *f, const char *name, const float **data, int *ndim,
               int64_t shape[SR_ST_MAX_DIMS])
{
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->e[i].name, name) != 0)
            continue;
        struct sr_st_tensor t;
        sr_st_get(f, i, &t);
        if (t.dtype != SR_DTYPE_F32)
            return fail(SR_ERR_UNSUPPORTED, f->path,
                        "tensor %s has dtype %s; shardrec reads F32 only here; HINT: convert it "
                        "in PyTorch with tensor.float() before saving",
                        name, sr_st_dtype_name(t.dtype));
        if (data)
            *data = t.data;
        if (ndim)
            *ndim = t.ndim;
        if (shape)
            memcpy(shape, t.shape, sizeof t.shape);
        return SR_OK;
    }
    return fail(SR_ERR_DATA, f->path,
                "no tensor named %s; HINT: list the file's tensors with "
                "python3 tools/torch_dlrm.py list FILE",
                name);
}

/* ---- writer --------------------------------------------------------------------------- */

static int check_write_tensor(const char *path, const struct sr_st_tensor *t)
{
    if (!t->name || !t->name[0] || strlen(t->name) > 1024 || !strcmp(t->name, "__metadata__"))
        return fail(SR_ERR_INVALID_ARG, path,
                    "tensor name \"%.64s\" is empty, too long or "
                    "reserved",
                    t->name ? t->name : "");
    if (t->ndim < 0 || t->ndim > SR_ST_MAX_DIMS)
        return fail(SR_ERR_INVALID_ARG, path, "tensor %s has ndim %d, not in [0, %d]", t->name,
                    t->ndim, SR_ST_MAX_DIMS);
    int64_t numel = sr_st_numel(t->ndim, t->shape);
    if (numel < 0)
        return fail(SR_ERR_INVALID_ARG, path, "tensor %s has a negative or overflowing shape",
                    t->name);
    if (numel > 0 && !t->data)
        return fail(SR_ERR_INVALID_ARG, path, "tensor %s has no data", t->name);
    if (t->dtype != SR_DTYPE_F32 && t->dtype != SR_DTYPE_F16 && t->dtype != SR_DTYPE_BF16)
        return fail(SR_ERR_INVALID_ARG, path, "tensor %s: dtype %d is not F32, F16 or BF16",
                    t->name, (int)t->dtype);
    return SR_OK;
}

/* The reference writer's order: wider elements first (so every tensor starts
 * on a multiple of its element size), then by name. */
static int cmp_tensor_name(const void *a, const void *b)
{
    const struct sr_st_tensor *x = *(const struct sr_st_tensor *const *)a;
    const struct sr_st_tensor *y = *(const struct sr_st_tensor *const *)b;
    int wx = sr_st_dtype_bytes(x->dtype), wy = sr_st_dtype_bytes(y->dtype);
    return wx != wy ? wy - wx : strcmp(x->name, y->name);
}

int sr_st_dtype_bytes(enum sr_dtype dtype)
{
    return dtype == SR_DTYPE_F16 || dtype == SR_DTYPE_BF16 ? 2 : 4;
}

const char *sr_st_dtype_name(enum sr_dtype dtype)
{
    return dtype == SR_DTYPE_F16 ? "F16" : dtype == SR_DTYPE_BF16 ? "BF16" : "F32";
}

static cJSON *json_int(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateRaw(buf);
}

/* The header JSON, padded with spaces to a multiple of 8 bytes; *len gets its length. */
static char *build_header(int n, const struct sr_st_tensor *const *order, int n_meta,
                          const struct sr_st_meta *meta, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *jmeta = cJSON_AddObjectToObject(root, "__metadata__");
    uint64_t off = 0;
    cJSON_AddStringToObject(jmeta, "format", "pt");
    for (int i = 0; i < n_meta; i++)
        cJSON_AddStringToObject(jmeta, meta[i].key, meta[i].value);
    for (int i = 0; i < n; i++) {
        const struct sr_st_tensor *t = order[i];
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        cJSON *offs;
        uint64_t bytes = (uint64_t)sr_st_numel(t->ndim, t->shape) * sr_st_dtype_bytes(t->dtype);
        cJSON_AddStringToObject(e, "dtype", sr_st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(shape, json_int((uint64_t)t->shape[d]));
        offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, json_int(off));
        cJSON_AddItemToArray(offs, json_int(off + bytes));
        off += bytes;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    SR_ASSERT(text);
    size_t raw = strlen(text);
    *len = (raw + 7) & ~(size_t)7;
    char *hdr = sr_malloc(*len);
    memcpy(hdr, text, raw);
    memset(hdr + raw, ' ', *len - raw);
    cJSON_free(text);
    return hdr;
}

static int write_body(FILE *f, const struct sr_st_layout *l, int n,
                      const struct sr_st_tensor *const *order)
{
    int bad = fwrite(l->header, 1, l->header_len, f) != l->header_len;
    for (int i = 0; !bad && i < n; i++) {
        int64_t numel = sr_st_numel(order[i]->ndim, order[i]->shape);
        size_t w = (size_t)sr_st_dtype_bytes(order[i]->dtype);
        if (numel > 0)
            bad = fwrite(order[i]->data, w, (size_t)numel, f) != (size_t)numel;
    }
    return bad;
}

/* Through an atomic write (include/shardrec/atomic_file.h): a failure leaves the
 * old file, if any, as it was and no temporary file behind. */
static int write_file(const char *path, const struct sr_st_layout *l, int n,
                      const struct sr_st_tensor *const *order)
{
    struct sr_atomic_file af;
    int rc = sr_atomic_file_open(&af, path);
    if (rc)
        return rc;
    errno = 0;
    if (write_body(af.f, l, n, order)) {
        int e = errno ? errno : EIO;
        sr_atomic_file_abort(&af);
        return fail(SR_ERR_IO, path, "cannot write: %s; HINT: check free disk space", strerror(e));
    }
    return sr_atomic_file_commit(&af);
}

/* The tensors checked (data too when need_data) and sorted by name into
 * *order_out (the caller frees it with sr_free). */
static int sorted_tensors(const char *path, int n, const struct sr_st_tensor *tensors,
                          int need_data, const struct sr_st_tensor ***order_out)
{
    const struct sr_st_tensor **order;
    int rc = SR_OK;
    *order_out = NULL;
    if (n < 0)
        return fail(SR_ERR_INVALID_ARG, path, "negative tensor count %d", n);
    for (int i = 0; i < n; i++) {
        struct sr_st_tensor t = tensors[i];
        if (!need_data)
            t.data = (const float *)&t; /* any non-NULL pointer: only the shape is checked */
        if ((rc = check_write_tensor(path, &t)))
            return rc;
    }
    order = sr_malloc(sizeof *order * ((size_t)n + 1));
    for (int i = 0; i < n; i++)
        order[i] = &tensors[i];
    qsort(order, (size_t)n, sizeof *order, cmp_tensor_name);
    for (int i = 1; i < n && !rc; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            rc = fail(SR_ERR_INVALID_ARG, path, "tensor %s is given twice", order[i]->name);
    if (rc)
        sr_free(order);
    else
        *order_out = order;
    return rc;
}

static int cmp_meta_key(const void *a, const void *b)
{
    return strcmp(((const struct sr_st_meta *)a)->key, ((const struct sr_st_meta *)b)->key);
}

/* The metadata entries checked and sorted by key into *out (the caller frees
 * it with sr_free). */
static int sorted_meta(const char *path, int n_meta, const struct sr_st_meta *meta,
                       struct sr_st_meta **out)
{
    *out = NULL;
    if (n_meta < 0)
        return fail(SR_ERR_INVALID_ARG, path, "negative metadata count %d", n_meta);
    for (int i = 0; i < n_meta; i++)
        if (!meta[i].key || !meta[i].key[0] || !strcmp(meta[i].key, "format") || !meta[i].value)
            return fail(SR_ERR_INVALID_ARG, path,
                        "__metadata__ key \"%.64s\" is empty or reserved, or has no value",
                        meta[i].key ? meta[i].key : "");
    struct sr_st_meta *s = sr_calloc((size_t)n_meta + 1, sizeof *s);
    if (n_meta)
        memcpy(s, meta, sizeof *s * (size_t)n_meta);
    qsort(s, (size_t)n_meta, sizeof *s, cmp_meta_key);
    for (int i = 1; i < n_meta; i++)
        if (strcmp(s[i - 1].key, s[i].key) == 0) {
            int rc = fail(SR_ERR_INVALID_ARG, path, "__metadata__ key %s is given twice", s[i].key);
            sr_free(s);
            return rc;
        }
    *out = s;
    return SR_OK;
}

/* The layout of tensors and metadata already sorted: header bytes and each
 * tensor's file offset, stored at the tensor's index in `tensors`. */
static void lay_out(struct sr_st_layout *l, int n, const struct sr_st_tensor *tensors,
                    const struct sr_st_tensor *const *order, int n_meta,
                    const struct sr_st_meta *meta)
{
    size_t hlen;
    char *hdr = build_header(n, order, n_meta, meta, &hlen);
    uint64_t len64 = hlen, at = 8 + (uint64_t)hlen;
    l->header_len = 8 + hlen;
    l->header = sr_malloc(l->header_len);
    memcpy(l->header, &len64, 8); /* little-endian hosts only, as the reader */
    memcpy(l->header + 8, hdr, hlen);
    sr_free(hdr);
    l->offset = sr_calloc((size_t)n + 1, sizeof *l->offset);
    for (int i = 0; i < n; i++) {
        l->offset[order[i] - tensors] = at;
        at += (uint64_t)sr_st_numel(order[i]->ndim, order[i]->shape) *
              sr_st_dtype_bytes(order[i]->dtype);
    }
    l->file_size = at;
}

int sr_st_layout(const char *path, int n, const struct sr_st_tensor *tensors, int n_meta,
                 const struct sr_st_meta *meta, struct sr_st_layout *out)
{
    const struct sr_st_tensor **order;
    struct sr_st_meta *keys;
    memset(out, 0, sizeof *out);
    int rc = sorted_tensors(path, n, tensors, 0, &order);
    if (rc)
        return rc;
    if (!(rc = sorted_meta(path, n_meta, meta, &keys)))
        lay_out(out, n, tensors, order, n_meta, keys);
    sr_free(keys);
    sr_free(order);
    return rc;
}

void sr_st_layout_free(struct sr_st_layout *l)
{
    if (!l)
        return;
    sr_free(l->header);
    sr_free(l->offset);
    memset(l, 0, sizeof *l);
}

int sr_st_write_meta(const char *path, int n, const struct sr_st_tensor *tensors, int n_meta,
                     const struct sr_st_meta *meta)
{
    const struct sr_st_tensor **order;
    struct sr_st_meta *keys;
    struct sr_st_layout l = {0};
    int rc = sorted_tensors(path, n, tensors, 1, &order);
    if (rc)
        return rc;
    if (!(rc = sorted_meta(path, n_meta, meta, &keys))) {
        lay_out(&l, n, tensors, order, n_meta, keys);
        rc = write_file(path, &l, n, order);
    }
    sr_st_layout_free(&l);
    sr_free(keys);
    sr_free(order);
    return rc;
}

int sr_st_write(const char *path, int n, const struct sr_st_tensor *tensors)
{
    return sr_st_write_meta(path, n, tensors, 0, NULL);
}
