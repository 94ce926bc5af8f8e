/*
 * Criteo TSV lines: a strict, allocation-free parser for one line.
 *
 * Kaggle's train.txt and the 1TB day_N files share one format, one sample a line:
 *
 *   label \t I1 .. I13 \t C1 .. CF \n          (F = 26 for Criteo)
 *
 *   label  "0" or "1"
 *   I      a decimal integer with an optional '-' (int64 range), or empty (missing)
 *   C      1 to 8 hex digits (either case), or empty (missing)
 *
 * Transforms, as DESIGN.md's numerical contract states:
 *   dense  x -> log(max(x, 0) + 1), computed in double and rounded once to float
 *          (sr_criteo_dense in synthetic.h, the one definition every reader and
 *          the generator share); missing -> 0. Note that the PyTorch DLRM
 *          reference computes log(float(x) + 1) in float32, which can differ by
 *          one float ulp for some x; feed both the same floats when comparing.
 *   ids    hex -> uint32 -> mod rows[f]; missing -> 0. One id per feature.
 *
 * Strictness: every way a line can be wrong has a fault kind below, so no line
 * ever yields a silently wrong sample. A line may end in "\r\n" (the '\r' is
 * dropped); the '\n' is not part of the line handed to the parser. No sscanf:
 * numbers are parsed by hand with overflow checks.
 */
#ifndef SHARDREC_CRITEO_H
#define SHARDREC_CRITEO_H

#include <stddef.h>
#include <stdint.h>

#define SR_CRITEO_NUM_DENSE        13
#define SR_CRITEO_MAX_LINE_DEFAULT ((int64_t)64 << 10) /* bytes, without the '\n' */
#define SR_CRITEO_LOG_TABLE        4096                /* counts whose log is tabulated */
#define SR_CRITEO_MAX_FEATURES     4096

/* What is wrong with a line (0: nothing). Readers count skipped lines by kind. */
enum sr_criteo_fault {
    SR_CRITEO_OK = 0,
    SR_CRITEO_FIELD_COUNT,  /* not 1 + 13 + F tab-separated fields */
    SR_CRITEO_BAD_LABEL,    /* label is not "0" or "1" */
    SR_CRITEO_BAD_INTEGER,  /* an integer field holds a non-digit */
    SR_CRITEO_INT_OVERFLOW, /* an integer field is outside int64 */
    SR_CRITEO_BAD_HEX,      /* a categorical field holds a non-hex character */
    SR_CRITEO_HEX_OVERFLOW, /* a categorical field has more than 8 hex digits */
    SR_CRITEO_LONG_LINE,    /* longer than the configured maximum */
    SR_CRITEO_NUL,          /* a NUL byte inside the line */
    SR_CRITEO_EMPTY_LINE,   /* nothing on the line (a lone "\r" counts as nothing) */
    SR_CRITEO_NUM_FAULTS
};

/* Parser state: the feature count, the rows each id is reduced modulo, and a
 * table of the dense transform for small counts (bit-identical to
 * sr_criteo_dense, just faster). Read-only after init; shareable by threads. */
struct sr_criteo_parser {
    int num_features;                         /* F */
    const int64_t *rows;                      /* (F) borrowed; each >= 1 */
    uint64_t fastmod[SR_CRITEO_MAX_FEATURES]; /* (F) reciprocals for mod rows; 0: rows > 2^32 */
    float log_table[SR_CRITEO_LOG_TABLE];
};

/* Where a fault was found: the kind and the 0-based field (0 label, 1..13 I1..I13,
 * 14.. C1..; for FIELD_COUNT, the number of fields seen). */
struct sr_criteo_fault_info {
    enum sr_criteo_fault kind;
    int field;
};

/* Set up a parser for F categorical fields whose ids are reduced mod rows[f]
 * (rows borrowed: it must outlive the parser). Returns SR_ERR_INVALID_ARG if F < 1
 * a row count < 1, or F > SR_CRITEO_MAX_FEATURES. */
int sr_criteo_parser_init(struct sr_criteo_parser *p, int num_features, const int64_t *rows);

/* Parse one line of len bytes (no '\n'; a final '\r' is dropped). On success
 * writes *label (0 or 1), dense[0..12] (transformed) and ids[f * ids_stride] for
 * f in [0, F) and returns SR_CRITEO_OK; outputs may be partly written on a
 * fault, which is returned with its field in *info (info may be NULL). Any
 * output pointer may be NULL to only validate. Never reads outside
 * line[0..len); the line need not be NUL-terminated. Does not check the
 * maximum line length (the reader does, before it has the whole line). */
enum sr_criteo_fault sr_criteo_parse_line(const struct sr_criteo_parser *p, const char *line,
                                          size_t len, float *label, float *dense, int64_t *ids,
                                          int64_t ids_stride, struct sr_criteo_fault_info *info);

/* Short name of a fault kind ("wrong field count", ...). */
const char *sr_criteo_fault_name(enum sr_criteo_fault kind);

/* Describe a fault as "what (field NAME)" plus a hint, into buf (always
 * NUL-terminated). The caller prefixes "file:line: ". */
void sr_criteo_fault_describe(const struct sr_criteo_parser *p,
                              const struct sr_criteo_fault_info *info, char *buf, size_t size);

#endif
