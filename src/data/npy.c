/*
 * NumPy .npy arrays, read-only and memory-mapped (include/shardrec/npy.h).
 * The header is a Python dict literal; this reads exactly what numpy writes
 * for a C-order array of one of four dtypes, and refuses the rest by name.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/npy.h"

#define MAGIC      "\x93NUMPY"
#define MAGIC_LEN  6
#define DIM_MAX    ((int64_t)1 << 48) /* larger than any file */
#define HEADER_MAX ((size_t)1 << 20)

/* A cursor over the header text [p, end). */
struct scan {
    const char *p, *end;
};

static void skip_space(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* The character c, after spaces. */
static int take(struct scan *s, char c)
{
    skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...", no escapes) into out (cap bytes). */
static int take_string(struct scan *s, char *out, size_t cap)
{
    skip_space(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return 0;
    const char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || n + 1 >= cap)
            return 0;
        out[n++] = *s->p++;
    }
    if (s->p >= s->end)
        return 0;
    s->p++;
    out[n] = '\0';
    return 1;
}

/* A word made of letters (True, False). */
static int take_word(struct scan *s, const char *word)
{
    skip_space(s);
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || strncmp(s->p, word, n))
        return 0;
    s->p += n;
    return 1;
}

/* A decimal integer in [0, DIM_MAX]. */
static int take_dim(struct scan *s, int64_t *v)
{
    skip_space(s);
    int64_t x = 0;
    const char *start = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
        x = x * 10 + (*s->p++ - '0');
        if (x > DIM_MAX)
            return 0;
    }
    *v = x;
    return s->p > start;
}

/* (N,) or (N, C) (a trailing comma allowed): one or two dimensions; "(N)"
 * is not a tuple, "()" is a scalar. */
static int take_shape(struct scan *s, struct sr_npy *a)
{
    int64_t dims[2] = {0, 1};
    int n = 1;
    if (!take(s, '(') || !take_dim(s, &dims[0]) || !take(s, ','))
        return 0;
    if (!take(s, ')')) {
        if (!take_dim(s, &dims[1]))
            return 0;
        n = 2;
        take(s, ',');
        if (!take(s, ')'))
            return 0;
    }
    a->ndim = n;
    a->rows = dims[0];
    a->cols = dims[1];
    return 1;
}

static int parse_descr(struct sr_npy *a, const char *d)
{
    static const struct {
        const char *code;
        enum sr_npy_dtype t;
        int size;
    } kinds[] = {{"f4", SR_NPY_F32, 4}, {"i4", SR_NPY_I32, 4}, {"u4", SR_NPY_U32, 4},
                 {"i8", SR_NPY_I64, 8}, {"f8", SR_NPY_F64, 8}, {"u1", SR_NPY_U8, 1},
                 {"b1", SR_NPY_BOOL, 1}};
    if (d[0] != '<' && d[0] != '|' && d[0] != '=')
        return 0; /* big-endian ('>') or no byte order */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (!strcmp(d + 1, kinds[k].code)) {
            a->dtype = kinds[k].t;
            a->itemsize = kinds[k].size;
            return 1;
        }
    return 0;
}

static int bad(const char *path, const char *what)
{
    return sr_error_set(SR_ERR_DATA, "%s: not an .npy array this reads: %s", path, what);
}

/* The dict's three entries, in any order, each once. */
static int parse_dict(struct sr_npy *a, struct scan *s, const char *path)
{
    char key[32], descr[32];
    int seen_descr = 0, seen_order = 0, seen_shape = 0;
    if (!take(s, '{'))
        return bad(path, "the header is not a dict");
    while (!take(s, '}')) {
        if (!take_string(s, key, sizeof key) || !take(s, ':'))
            return bad(path, "a header key is malformed");
        if (!strcmp(key, "descr") && !seen_descr++) {
            if (!take_string(s, descr, sizeof descr))
                return bad(path, "'descr' is not a string");
            if (!parse_descr(a, descr)) {
                char msg[160];
                snprintf(msg, sizeof msg,
                         "dtype '%s' (float32, float64, int32, uint32, int64, uint8 or bool, "
                         "little-endian)",
                         descr);
                return bad(path, msg);
            }
        } else if (!strcmp(key, "fortran_order") && !seen_order++) {
            if (take_word(s, "True"))
                a->fortran = 1;
            else if (!take_word(s, "False"))
                return bad(path, "'fortran_order' is not True or False");
        } else if (!strcmp(key, "shape") && !seen_shape++) {
            if (!take_shape(s, a))
                return bad(path, "'shape' is not a tuple of one or two sizes");
        } else {
            return bad(path, "a header key is unknown or given twice");
        }
        if (!take(s, ',') && !take(s, '}'))
            return bad(path, "the header dict is malformed");
        else if (s->p[-1] == '}')
            break;
    }
    skip_space(s);
    if (!seen_descr || !seen_order || !seen_shape)
        return bad(path, "the header lacks 'descr', 'fortran_order' or 'shape'");
    if (s->p != s->end)
        return bad(path, "text after the header dict");
    return SR_OK;
}

int sr_npy_parse(struct sr_npy *a, const unsigned char *buf, size_t n, const char *path)
{
    memset(a, 0, sizeof *a);
    if (n < MAGIC_LEN + 4 || memcmp(buf, MAGIC, MAGIC_LEN))
        return bad(path, "no .npy magic");
    const int major = buf[6], minor = buf[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return bad(path, "an unknown format version");
    size_t len_bytes = major == 1 ? 2 : 4, start = MAGIC_LEN + 2 + len_bytes;
    if (n < start)
        return bad(path, "cut short in its header");
    size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    if (major > 1)
        hlen |= (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    if (hlen > HEADER_MAX || hlen > n - start)
        return bad(path, "cut short in its header");
    struct scan s = {(const char *)buf + start, (const char *)buf + start + hlen};
    if (memchr(s.p, '\0', hlen))
        return bad(path, "a NUL byte in the header");
    int rc = parse_dict(a, &s, path);
    if (rc)
        return rc;
    const size_t data_at = start + hlen;
    if (a->cols != 0 && (uint64_t)a->rows > UINT64_MAX / 8 / (uint64_t)a->cols)
        return bad(path, "a shape too large");
    const uint64_t items = (uint64_t)a->rows * (uint64_t)a->cols;
    if (items * (uint64_t)a->itemsize != (uint64_t)(n - data_at)) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "its data is %zu bytes, its shape (%" PRId64 ", %" PRId64 ") of %s needs %" PRIu64
                 " (truncated or damaged)",
                 n - data_at, a->rows, a->cols, sr_npy_dtype_name(a->dtype),
                 items * (uint64_t)a->itemsize);
        return bad(path, msg);
    }
    a->data = buf + data_at;
    return SR_OK;
}

int sr_npy_open(struct sr_npy *a, const char *path)
{
    const void *map;
    size_t size;
    memset(a, 0, sizeof *a);
    int rc = sr_file_map(path, &map, &size);
    if (!rc && (rc = sr_npy_parse(a, map, size, path)))
        sr_file_unmap(map, size);
    if (rc) {
        memset(a, 0, sizeof *a);
        return rc;
    }
    a->map = map;
    a->map_bytes = size;
    a->path = sr_strdup(path);
    return SR_OK;
}

void sr_npy_close(struct sr_npy *a)
{
    sr_file_unmap(a->map, a->map_bytes);
    sr_free(a->path);
    memset(a, 0, sizeof *a);
}

/* Item (r, c)'s bytes: row-major, or column-major under Fortran order. */
static const unsigned char *item(const struct sr_npy *a, int64_t r, int64_t c)
{
    const int64_t i = a->fortran ? c * a->rows + r : r * a->cols + c;
    return a->data + (size_t)i * (size_t)a->itemsize;
}

int64_t sr_npy_int(const struct sr_npy *a, int64_t r, int64_t c)
{
    const unsigned char *p = item(a, r, c);
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    switch (a->dtype) {
    case SR_NPY_I32:
        memcpy(&i32, p, 4);
        return i32;
    case SR_NPY_U32:
        memcpy(&u32, p, 4);
        return u32;
    case SR_NPY_I64:
        memcpy(&i64, p, 8);
        return i64;
    case SR_NPY_U8:
    case SR_NPY_BOOL:
        return *p;
    default: { /* a float: truncated; NaN or beyond int64's range gives 0 */
        double x = a->dtype == SR_NPY_F64 ? 0 : (double)sr_npy_float(a, r, c);
        if (a->dtype == SR_NPY_F64)
            memcpy(&x, p, 8);
        return x > -9.2e18 && x < 9.2e18 ? (int64_t)x : 0;
    }
    }
}

float sr_npy_float(const struct sr_npy *a, int64_t r, int64_t c)
{
    const unsigned char *p = item(a, r, c);
    float f;
    double d;
    if (a->dtype == SR_NPY_F32) {
        memcpy(&f, p, 4);
        return f;
    }
    if (a->dtype == SR_NPY_F64) {
        memcpy(&d, p, 8);
        return (float)d;
    }
    return (float)sr_npy_int(a, r, c);
}

const char *sr_npy_dtype_name(enum sr_npy_dtype t)
{
    static const char *const names[] = {"float32", "int32", "uint32", "int64",
                                        "float64", "uint8", "bool"};
    return t <= SR_NPY_BOOL ? names[t] : "?";
}
