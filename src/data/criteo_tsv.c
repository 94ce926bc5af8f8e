/*
 * Criteo TSV line parser: one pass over the bytes of a line, field by field,
 * with hand-written integer and hex conversions that check every character and
 * every overflow (sscanf cannot: it skips blanks, accepts '+', wraps silently,
 * and stops at NUL).
 *
 * Layout of a line (F categorical fields):
 *
 *   field  0      1 .. 13       14 .. 13+F
 *          label  I1 .. I13     C1 .. CF         separated by single '\t'
 *
 * Dense values go through a table of log(x + 1) for x < SR_CRITEO_LOG_TABLE,
 * filled with sr_criteo_dense itself, so the table changes speed, not bits.
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/criteo.h"
#include "shardrec/error.h"
#include "shardrec/synthetic.h"

/* 1 + the value of each byte as a hex digit; 0 for a non-hex byte. */
static const uint8_t hex_plus1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* Lemire's fastmod: for 32-bit a and d, a mod d as two multiplications with
 * M = floor((2^64 - 1) / d) + 1, exact for every a < 2^32 (no division). */
static uint32_t fastmod_u32(uint32_t a, uint64_t M, uint32_t d)
{
    uint64_t low = M * a;
    return (uint32_t)(((__uint128_t)low * d) >> 64);
}

int sr_criteo_parser_init(struct sr_criteo_parser *p, int num_features, const int64_t *rows)
{
    if (num_features < 1 || !rows)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "Criteo parser: %d categorical features; HINT: give at least one "
                            "feature and its table rows",
                            num_features);
    for (int f = 0; f < num_features; f++)
        if (rows[f] < 1)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "Criteo parser: feature %d has %lld rows; HINT: every table "
                                "needs at least one row (--table-rows)",
                                f, (long long)rows[f]);
    if (num_features > SR_CRITEO_MAX_FEATURES)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "Criteo parser: %d features, at most %d; HINT: "
                            "fewer features",
                            num_features, SR_CRITEO_MAX_FEATURES);
    p->num_features = num_features;
    p->rows = rows;
    for (int f = 0; f < num_features; f++)
        p->fastmod[f] = rows[f] > UINT32_MAX ? 0 : UINT64_MAX / (uint64_t)rows[f] + 1;
    for (int x = 0; x < SR_CRITEO_LOG_TABLE; x++)
        p->log_table[x] = sr_criteo_dense(x);
    return SR_OK;
}

static float dense_of(const struct sr_criteo_parser *p, int64_t x)
{
    if (x <= 0)
        return 0.0f;
    return x < SR_CRITEO_LOG_TABLE ? p->log_table[x] : sr_criteo_dense(x);
}

/* Parse the integer field at *ps (ends at '\t' or end) into *out; empty -> 0.
 * Leaves *ps at the separator. */
static enum sr_criteo_fault parse_int(const char **ps, const char *end, int64_t *out)
{
    const char *s = *ps;
    uint64_t v = 0, limit = (uint64_t)INT64_MAX;
    int neg = 0;
    if (s < end && *s == '-') {
        neg = 1;
        limit += 1; /* |INT64_MIN| */
        s++;
    } else if (s == end || *s == '\t') {
        *out = 0;
        return SR_CRITEO_OK;
    }
    const char *digits = s;
    /* 18 digits cannot overflow; check each digit only beyond that */
    const char *safe = end - s > 18 ? s + 18 : end;
    for (; s < safe && (unsigned)(*s - '0') < 10u; s++)
        v = v * 10 + (unsigned)(*s - '0');
    for (; s < end && (unsigned)(*s - '0') < 10u; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return SR_CRITEO_INT_OVERFLOW;
        v = v * 10 + d;
    }
    if (s == digits || (s < end && *s != '\t'))
        return SR_CRITEO_BAD_INTEGER;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    *ps = s;
    return SR_CRITEO_OK;
}

/* Parse the hex field at *ps into *out (empty -> 0, at most 8 digits). */
static enum sr_criteo_fault parse_hex(const char **ps, const char *end, uint32_t *out, int *present)
{
    const char *s = *ps;
    uint32_t v = 0;
    int n = 0;
    for (; s < end && *s != '\t'; s++) {
        int d = hex_plus1[(unsigned char)*s] - 1;
        if (d < 0)
            return SR_CRITEO_BAD_HEX;
        if (++n > 8)
            return SR_CRITEO_HEX_OVERFLOW;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    *present = n > 0;
    *ps = s;
    return SR_CRITEO_OK;
}

static int count_fields(const char *line, size_t len)
{
    int n = 1;
    for (size_t i = 0; i < len; i++)
        n += line[i] == '\t';
    return n;
}

static enum sr_criteo_fault fault(struct sr_criteo_fault_info *info, enum sr_criteo_fault kind,
                                  int field)
{
    if (info) {
        info->kind = kind;
        info->field = field;
    }
    return kind;
}

/* Step over the separator after field `field`; the line must go on. */
static int next_field(const char **ps, const char *end)
{
    if (*ps == end)
        return 0;
    (*ps)++; /* the '\t' */
    return 1;
}

static enum sr_criteo_fault parse_label(const char **ps, const char *end, float *label)
{
    const char *s = *ps;
    if (s == end || (*s != '0' && *s != '1') || (s + 1 < end && s[1] != '\t'))
        return SR_CRITEO_BAD_LABEL;
    if (label)
        *label = (float)(*s - '0');
    *ps = s + 1;
    return SR_CRITEO_OK;
}

static enum sr_criteo_fault parse_dense(const struct sr_criteo_parser *p, const char **ps,
                                        const char *end, float *dense, int *field)
{
    for (int j = 0; j < SR_CRITEO_NUM_DENSE; j++) {
        int64_t x;
        *field = 1 + j;
        if (!next_field(ps, end))
            return SR_CRITEO_FIELD_COUNT;
        enum sr_criteo_fault k = parse_int(ps, end, &x);
        if (k)
            return k;
        if (dense)
            dense[j] = dense_of(p, x);
    }
    return SR_CRITEO_OK;
}

static enum sr_criteo_fault parse_ids(const struct sr_criteo_parser *p, const char **ps,
                                      const char *end, int64_t *ids, int64_t stride, int *field)
{
    for (int f = 0; f < p->num_features; f++) {
        uint32_t h;
        int present;
        *field = 1 + SR_CRITEO_NUM_DENSE + f;
        if (!next_field(ps, end))
            return SR_CRITEO_FIELD_COUNT;
        enum sr_criteo_fault k = parse_hex(ps, end, &h, &present);
        if (k)
            return k;
        if (ids) {
            int64_t rows = p->rows[f];
            ids[f * stride] = !present            ? 0
                              : rows > UINT32_MAX ? (int64_t)h
                                                  : fastmod_u32(h, p->fastmod[f], (uint32_t)rows);
        }
    }
    return SR_CRITEO_OK;
}

enum sr_criteo_fault sr_criteo_parse_line(const struct sr_criteo_parser *p, const char *line,
                                          size_t len, float *label, float *dense, int64_t *ids,
                                          int64_t ids_stride, struct sr_criteo_fault_info *info)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return fault(info, SR_CRITEO_EMPTY_LINE, -1);
    const char *nul = memchr(line, 0, len);
    if (nul)
        return fault(info, SR_CRITEO_NUL, count_fields(line, (size_t)(nul - line)) - 1);
    const char *s = line, *end = line + len;
    int field = 0;
    enum sr_criteo_fault k = parse_label(&s, end, label);
    if (!k)
        k = parse_dense(p, &s, end, dense, &field);
    if (!k)
        k = parse_ids(p, &s, end, ids, ids_stride, &field);
    if (!k && s != end)
        k = SR_CRITEO_FIELD_COUNT;
    if (k == SR_CRITEO_FIELD_COUNT)
        field = count_fields(line, len);
    return k ? fault(info, k, field) : SR_CRITEO_OK;
}

const char *sr_criteo_fault_name(enum sr_criteo_fault kind)
{
    static const char *const names[SR_CRITEO_NUM_FAULTS] = {
        "ok",
        "wrong field count",
        "bad label",
        "non-numeric integer",
        "integer overflow",
        "bad hex id",
        "hex id overflow",
        "over-long line",
        "NUL byte",
        "empty line",
    };
    return (unsigned)kind < SR_CRITEO_NUM_FAULTS ? names[kind] : "unknown fault";
}

static const char *fault_hint(enum sr_criteo_fault kind)
{
    switch (kind) {
    case SR_CRITEO_FIELD_COUNT:
        return "lines hold label, 13 integers and one hex id per feature, tab-separated";
    case SR_CRITEO_BAD_LABEL:
        return "the first field must be 0 or 1";
    case SR_CRITEO_BAD_INTEGER:
        return "integer fields hold decimal digits with an optional '-', or nothing";
    case SR_CRITEO_INT_OVERFLOW:
        return "integer fields must fit in 64 bits";
    case SR_CRITEO_BAD_HEX:
    case SR_CRITEO_HEX_OVERFLOW:
        return "categorical fields hold 1 to 8 hex digits (a 32-bit id), or nothing";
    case SR_CRITEO_LONG_LINE:
        return "raise the limit (max_line) if such lines are real";
    case SR_CRITEO_NUL:
        return "the file may be binary or corrupt";
    case SR_CRITEO_EMPTY_LINE:
        return "every line holds one sample: remove empty lines (--skip-bad-lines skips them)";
    default:
        return "check the file";
    }
}

void sr_criteo_fault_describe(const struct sr_criteo_parser *p,
                              const struct sr_criteo_fault_info *info, char *buf, size_t size)
{
    int F = p ? p->num_features : 26, field = info->field;
    const char *hint = fault_hint(info->kind), *name = sr_criteo_fault_name(info->kind);
    if (info->kind == SR_CRITEO_FIELD_COUNT)
        snprintf(buf, size, "%s: %d fields, expected %d; HINT: %s", name, field,
                 1 + SR_CRITEO_NUM_DENSE + F, hint);
    else if (info->kind == SR_CRITEO_LONG_LINE || field < 0)
        snprintf(buf, size, "%s; HINT: %s", name, hint);
    else if (field == 0)
        snprintf(buf, size, "%s (field 1, label); HINT: %s", name, hint);
    else if (field <= SR_CRITEO_NUM_DENSE)
        snprintf(buf, size, "%s (field %d, I%d); HINT: %s", name, field + 1, field, hint);
    else
        snprintf(buf, size, "%s (field %d, C%d); HINT: %s", name, field + 1,
                 field - SR_CRITEO_NUM_DENSE, hint);
}
