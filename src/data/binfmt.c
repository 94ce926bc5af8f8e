/*
 * Reading shardrec's binary sample format (layout in include/shardrec/binfmt.h
 * and docs/data-format.md): map the file, verify every header field, chunk
 * table entry and chunk head against the file size, then copy batches out.
 *
 * Verification happens once, at open, for everything whose cost does not grow
 * with the samples (O(chunks x features)); what does (variable offsets, ids
 * against rows, labels) is checked on the fly as it is copied, where the bytes
 * are touched anyway. Either way a bad file is an SR_ERR_DATA naming it.
 *
 * The copy is two-phase because a KJT is feature-major: copy_head fills dense,
 * labels and lengths of a run of samples; the caller then computes offsets over
 * the whole batch; copy_values puts each feature's ids where they belong.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/binfmt.h"
#include "shardrec/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "binfmt.c reads little-endian files in place: add byte swapping for this host"
#endif

#define MAX_SAMPLE_VALUES ((uint64_t)1 << 24)

static uint32_t rd_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rd_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t align_up(uint64_t x)
{
    return (x + SR_BINFMT_ALIGN - 1) & ~(uint64_t)(SR_BINFMT_ALIGN - 1);
}

static int corrupt(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int corrupt(const char *name, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sr_error_set(SR_ERR_DATA,
                        "%s: %s; HINT: the file is truncated or corrupt, or not written by "
                        "shardrec convert: convert the TSV again",
                        name, what);
}

int sr_binfmt_is_binfmt(const void *head, size_t n)
{
    return n >= SR_BINFMT_MAGIC_LEN && !memcmp(head, SR_BINFMT_MAGIC, SR_BINFMT_MAGIC_LEN);
}

/* Header fields, each range-checked. */
static int verify_header(struct sr_binfmt_view *v, const uint8_t *d, size_t size)
{
    const char *nm = v->name;
    if (size < SR_BINFMT_HEADER_BYTES || !sr_binfmt_is_binfmt(d, size))
        return corrupt(nm, "no shardrec binary header (%zu bytes)", size);
    uint32_t version = rd_u32(d + 8), flags = rd_u32(d + 12), nd = rd_u32(d + 16);
    uint32_t F = rd_u32(d + 20), idb = rd_u32(d + 24), C = rd_u32(d + 28);
    uint64_t N = rd_u64(d + 32), chunks = rd_u64(d + 40), msv = rd_u64(d + 48);
    if (version != SR_BINFMT_VERSION)
        return corrupt(nm, "format version %u, this build reads %d", version, SR_BINFMT_VERSION);
    if (flags & ~SR_BINFMT_FLAG_WEIGHTS)
        return corrupt(nm, "unknown flags 0x%x", flags);
    if (nd > 1024 || F < 1 || F > 65536 || (idb != 4 && idb != 8))
        return corrupt(nm, "bad shape: %u dense, %u features, %u-byte ids", nd, F, idb);
    if (C < 1 || C > (1u << 30) || N > ((uint64_t)1 << 56) || chunks != (N + C - 1) / C)
        return corrupt(nm, "%llu samples in %llu chunks of %u do not add up", (unsigned long long)N,
                       (unsigned long long)chunks, C);
    if (msv > MAX_SAMPLE_VALUES)
        return corrupt(nm, "max ids per sample %llu exceeds %llu", (unsigned long long)msv,
                       (unsigned long long)MAX_SAMPLE_VALUES);
    for (int i = 72; i < SR_BINFMT_HEADER_BYTES; i++)
        if (d[i])
            return corrupt(nm,
                           "reserved header byte %d is 0x%02x, not zero (written by a newer "
                           "format, or damaged)",
                           i, d[i]);
    if (rd_u64(d + 56) != size)
        return corrupt(nm, "file is %zu bytes but its header says %llu (truncated?)", size,
                       (unsigned long long)rd_u64(d + 56));
    v->num_dense = (int)nd;
    v->num_features = (int)F;
    v->id_bytes = (int)idb;
    v->has_weights = (int)(flags & SR_BINFMT_FLAG_WEIGHTS);
    v->chunk_samples = C;
    v->num_samples = (int64_t)N;
    v->num_chunks = (int64_t)chunks;
    v->max_sample_values = (int64_t)msv;
    return SR_OK;
}

/* Row counts after the header, and where the chunk table lies. */
static int verify_rows_and_table(struct sr_binfmt_view *v, const uint8_t *d, size_t size)
{
    uint64_t F = (uint64_t)v->num_features, rows_end = SR_BINFMT_HEADER_BYTES + 8 * F;
    uint64_t table = rd_u64(d + 64);
    if (rows_end > size)
        return corrupt(v->name, "row table of %llu features runs past the end",
                       (unsigned long long)F);
    if (table < rows_end || table > size || (size - table) / 16 != (uint64_t)v->num_chunks ||
        (size - table) % 16)
        return corrupt(v->name, "chunk table at %llu does not hold %lld entries ending the file",
                       (unsigned long long)table, (long long)v->num_chunks);
    v->rows = sr_malloc(sizeof(int64_t) * F);
    for (uint64_t f = 0; f < F; f++) {
        int64_t r = (int64_t)rd_u64(d + SR_BINFMT_HEADER_BYTES + 8 * f);
        if (r < 1 || (v->id_bytes == 4 && r > ((int64_t)1 << 32)))
            return corrupt(v->name, "feature %llu has %lld rows, invalid for %d-byte ids",
                           (unsigned long long)f, (long long)r, v->id_bytes);
        v->rows[f] = r;
    }
    return SR_OK;
}

/* Reserve `bytes` at *pos inside a chunk of `cap` bytes; the next section starts aligned. */
static int take(uint64_t *pos, uint64_t bytes, uint64_t cap, uint64_t *at)
{
    if (*pos > cap || bytes > cap - *pos)
        return 0;
    *at = *pos;
    *pos = align_up(*pos + bytes);
    return 1;
}

/* One feature's sections of chunk k starting at *pos. */
static int verify_section(struct sr_binfmt_view *v, const uint8_t *c, uint64_t cap, int64_t k,
                          int f, int64_t n, uint64_t *pos)
{
    struct sr_binfmt_section *s = &v->sections[k * v->num_features + f];
    const uint8_t *h = c + 8 + 16 * (uint64_t)f;
    uint64_t L = rd_u32(h), nv = rd_u64(h + 8), at;
    int variable = L == SR_BINFMT_VARIABLE;
    if (rd_u32(h + 4) != 0 ||
        (!variable && (L > (uint64_t)v->max_sample_values || nv != (uint64_t)n * L)))
        return corrupt(v->name, "chunk %lld feature %d: %llu ids do not match length %llu",
                       (long long)k, f, (unsigned long long)nv, (unsigned long long)L);
    if (nv > cap)
        return corrupt(v->name, "chunk %lld feature %d: %llu ids exceed the chunk", (long long)k, f,
                       (unsigned long long)nv);
    s->fixed_len = (uint32_t)L;
    s->num_values = (int64_t)nv;
    s->offsets = NULL;
    s->weights = NULL;
    if (variable && !take(pos, 8 * ((uint64_t)n + 1), cap, &at))
        goto out_short;
    if (variable)
        s->offsets = (const uint64_t *)(c + at);
    if (!take(pos, nv * (uint64_t)v->id_bytes, cap, &at))
        goto out_short;
    s->ids = c + at;
    if (v->has_weights && !take(pos, nv * 4, cap, &at))
        goto out_short;
    if (v->has_weights)
        s->weights = (const float *)(c + at);
    return SR_OK;
out_short:
    return corrupt(v->name, "chunk %lld feature %d: sections run past the chunk's %llu bytes",
                   (long long)k, f, (unsigned long long)cap);
}

/* Chunk k: its table entry, head and sections. */
static int verify_chunk(struct sr_binfmt_view *v, const uint8_t *d, int64_t k)
{
    uint64_t table = rd_u64(d + 64), off = rd_u64(d + table + 16 * (uint64_t)k);
    uint64_t cap = rd_u64(d + table + 16 * (uint64_t)k + 8), F = (uint64_t)v->num_features;
    int64_t first = k * v->chunk_samples;
    int64_t n = k + 1 < v->num_chunks ? v->chunk_samples : v->num_samples - first;
    uint64_t pos = align_up(8 + 16 * F), at;
    if (off % SR_BINFMT_ALIGN || off < SR_BINFMT_HEADER_BYTES + 8 * F || off > table ||
        cap > table - off || cap < 8 + 16 * F)
        return corrupt(v->name, "chunk %lld at %llu (%llu bytes) lies outside the data",
                       (long long)k, (unsigned long long)off, (unsigned long long)cap);
    const uint8_t *c = d + off;
    if (rd_u64(c) != (uint64_t)n)
        return corrupt(v->name, "chunk %lld holds %llu samples, expected %lld", (long long)k,
                       (unsigned long long)rd_u64(c), (long long)n);
    struct sr_binfmt_chunk *ch = &v->chunks[k];
    ch->first = first;
    ch->n = n;
    if (!take(&pos, (uint64_t)n * (uint64_t)v->num_dense * 4, cap, &at))
        return corrupt(v->name, "chunk %lld: dense section runs past the chunk", (long long)k);
    ch->dense = (const float *)(c + at);
    if (!take(&pos, (uint64_t)n, cap, &at))
        return corrupt(v->name, "chunk %lld: label section runs past the chunk", (long long)k);
    ch->labels = c + at;
    for (int f = 0; f < v->num_features; f++) {
        int rc = verify_section(v, c, cap, k, f, n, &pos);
        if (rc)
            return rc;
    }
    if (pos != cap)
        return corrupt(v->name, "chunk %lld: sections fill %llu of its %llu bytes", (long long)k,
                       (unsigned long long)pos, (unsigned long long)cap);
    return SR_OK;
}

static void view_release(struct sr_binfmt_view *v)
{
    sr_free(v->name);
    sr_free(v->rows);
    sr_free(v->chunks);
    sr_free(v->sections);
    memset(v, 0, sizeof *v);
}

int sr_binfmt_view_init(struct sr_binfmt_view *v, const void *data, size_t size, const char *name)
{
    const uint8_t *d = data;
    memset(v, 0, sizeof *v);
    v->name = sr_strdup(name ? name : "(memory)");
    v->data = d;
    v->size = size;
    int rc = verify_header(v, d, size);
    if (!rc)
        rc = verify_rows_and_table(v, d, size);
    if (rc)
        goto out_release;
    v->chunks = sr_calloc((size_t)v->num_chunks + 1, sizeof *v->chunks);
    v->sections = sr_calloc((size_t)(v->num_chunks * v->num_features) + 1, sizeof *v->sections);
    for (int64_t k = 0; k < v->num_chunks && !rc; k++)
        rc = verify_chunk(v, d, k);
    if (!rc)
        return SR_OK;
out_release:
    view_release(v);
    return rc;
}

int sr_binfmt_open(struct sr_binfmt_view *v, const char *path)
{
    struct stat st;
    memset(v, 0, sizeof *v);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return sr_error_set(SR_ERR_IO, "%s: cannot open; HINT: check the path", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED)
        return sr_error_set(SR_ERR_IO, "%s: cannot map %zu bytes; HINT: is it a regular file?",
                            path, size);
    madvise(map, size, MADV_SEQUENTIAL);
    int rc = sr_binfmt_view_init(v, map, size, path);
    if (rc) {
        munmap(map, size);
        return rc;
    }
    v->map = map;
    return SR_OK;
}

void sr_binfmt_close(struct sr_binfmt_view *v)
{
    if (v->map)
        munmap(v->map, v->size);
    view_release(v);
}

/* Lengths of feature section s for samples s0 .. s0+m-1 of chunk k. */
static int copy_lengths(const struct sr_binfmt_view *v, const struct sr_binfmt_section *s,
                        int64_t k, int64_t s0, int64_t m, int32_t *len)
{
    if (s->fixed_len != SR_BINFMT_VARIABLE) {
        for (int64_t i = 0; i < m; i++)
            len[i] = (int32_t)s->fixed_len;
        return SR_OK;
    }
    uint64_t nv = (uint64_t)s->num_values, cap = (uint64_t)v->max_sample_values;
    for (int64_t i = 0; i < m; i++) {
        uint64_t a = s->offsets[s0 + i], b = s->offsets[s0 + i + 1];
        if (a > b || b > nv || b - a > cap)
            return corrupt(v->name, "chunk %lld sample %lld: bag offsets %llu..%llu invalid",
                           (long long)k, (long long)(s0 + i), (unsigned long long)a,
                           (unsigned long long)b);
        len[i] = (int32_t)(b - a);
    }
    return SR_OK;
}

/* Dense, labels, lengths of samples s0 .. s0+m-1 of chunk k into slots at... */
static int copy_head_run(const struct sr_binfmt_view *v, int64_t k, int64_t s0, int64_t m,
                         struct sr_batch *batch, int at)
{
    const struct sr_binfmt_chunk *ch = &v->chunks[k];
    int nd = v->num_dense, stride = batch->kjt.stride;
    memcpy(batch->dense + (size_t)at * nd, ch->dense + s0 * nd, sizeof(float) * (size_t)(m * nd));
    unsigned bad = 0;
    for (int64_t i = 0; i < m; i++) {
        bad |= ch->labels[s0 + i];
        batch->labels[at + i] = (float)ch->labels[s0 + i];
    }
    if (bad > 1)
        return corrupt(v->name, "chunk %lld: a label is not 0 or 1", (long long)k);
    for (int f = 0; f < v->num_features; f++) {
        int32_t *len = batch->kjt.lengths + (int64_t)f * stride + at;
        int rc = copy_lengths(v, &v->sections[k * v->num_features + f], k, s0, m, len);
        if (rc)
            return rc;
    }
    return SR_OK;
}

int sr_binfmt_copy_head(const struct sr_binfmt_view *v, int64_t first, int64_t n,
                        struct sr_batch *batch, int at)
{
    SR_ASSERT(first >= 0 && n >= 0 && first + n <= v->num_samples);
    SR_ASSERT(batch->num_dense == v->num_dense && batch->kjt.num_keys == v->num_features);
    while (n > 0) {
        int64_t k = first / v->chunk_samples, s0 = first - v->chunks[k].first;
        int64_t m = v->chunks[k].n - s0 < n ? v->chunks[k].n - s0 : n;
        int rc = copy_head_run(v, k, s0, m, batch, at);
        if (rc)
            return rc;
        first += m;
        n -= m;
        at += (int)m;
    }
    return SR_OK;
}

/* Convert m ids to int64, checking each against rows; returns nonzero if one is out of range. */
static int convert_ids(const void *src, int id_bytes, int64_t m, int64_t rows, int64_t *dst)
{
    int bad = 0;
    if (id_bytes == 4) {
        const uint32_t *s = src;
        for (int64_t i = 0; i < m; i++) {
            bad |= (int64_t)s[i] >= rows;
            dst[i] = s[i];
        }
    } else {
        const int64_t *s = src;
        for (int64_t i = 0; i < m; i++) {
            int64_t id;
            memcpy(&id, s + i, sizeof id);
            bad |= (uint64_t)id >= (uint64_t)rows;
            dst[i] = id;
        }
    }
    return bad;
}

static int copy_values_run(const struct sr_binfmt_view *v, int64_t k, int64_t s0, int64_t m,
                           struct sr_batch *batch, int at)
{
    int stride = batch->kjt.stride;
    for (int f = 0; f < v->num_features; f++) {
        const struct sr_binfmt_section *s = &v->sections[k * v->num_features + f];
        int variable = s->fixed_len == SR_BINFMT_VARIABLE;
        int64_t a = variable ? (int64_t)s->offsets[s0] : s0 * s->fixed_len;
        int64_t b = variable ? (int64_t)s->offsets[s0 + m] : (s0 + m) * s->fixed_len;
        int64_t dst = batch->kjt.offsets[(int64_t)f * stride + at];
        SR_ASSERT(b - a == batch->kjt.offsets[(int64_t)f * stride + at + m] - dst);
        const uint8_t *ids = (const uint8_t *)s->ids + a * v->id_bytes;
        if (convert_ids(ids, v->id_bytes, b - a, v->rows[f], batch->kjt.values + dst))
            return corrupt(v->name, "chunk %lld feature %d: an id is outside [0, %lld)",
                           (long long)k, f, (long long)v->rows[f]);
        if (batch->kjt.weights && s->weights)
            memcpy(batch->kjt.weights + dst, s->weights + a, sizeof(float) * (size_t)(b - a));
        else if (batch->kjt.weights)
            for (int64_t i = 0; i < b - a; i++)
                batch->kjt.weights[dst + i] = 1.0f;
    }
    return SR_OK;
}

int sr_binfmt_copy_values(const struct sr_binfmt_view *v, int64_t first, int64_t n,
                          struct sr_batch *batch, int at)
{
    SR_ASSERT(first >= 0 && n >= 0 && first + n <= v->num_samples);
    while (n > 0) {
        int64_t k = first / v->chunk_samples, s0 = first - v->chunks[k].first;
        int64_t m = v->chunks[k].n - s0 < n ? v->chunks[k].n - s0 : n;
        int rc = copy_values_run(v, k, s0, m, batch, at);
        if (rc)
            return rc;
        first += m;
        n -= m;
        at += (int)m;
    }
    return SR_OK;
}
