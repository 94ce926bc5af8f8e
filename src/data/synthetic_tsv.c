/*
 * Synthetic samples written as Criteo TSV, one line per sample:
 *
 *   label \t I1 \t ... \t I13 \t C1 \t ... \t CF \n
 *
 * I are the dense integer counts (an empty field when missing), C the ids as
 * 8 lowercase hex digits. The ids and labels come from sr_synth_fill itself and
 * the counts from the same function it transforms, so a Criteo reader (count ->
 * sr_criteo_dense, hex -> uint32 -> mod rows) reproduces the generator's
 * batches exactly.
 *
 * Samples go in blocks of TSV_BLOCK: one batch fill, then every line of the
 * block formatted in parallel into its own slot of a buffer, then written in
 * order. The buffers are allocated once per call.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "data/synth_internal.h"
#include "shardrec/alloc.h"
#include "shardrec/error.h"

#define TSV_BLOCK 4096
#define TSV_DENSE 13

struct tsv_block {
    struct sr_batch batch;
    char *text;      /* (TSV_BLOCK, line_cap) */
    int *line_len;   /* (TSV_BLOCK) */
    size_t line_cap; /* bytes reserved per line */
};

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_hex8(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int k = 7; k >= 0; k--)
        *p++ = digits[(v >> (4 * k)) & 0xf];
    return p;
}

/* Format sample b of the block (global index i) into line; returns its length. */
static int format_line(const struct sr_synth *s, const struct sr_batch *batch, int b, int64_t i,
                       char *line)
{
    char *p = line;
    int F = s->cfg.num_features, B = batch->batch_size;
    *p++ = batch->labels[b] != 0.0f ? '1' : '0';
    for (int j = 0; j < TSV_DENSE; j++) {
        int64_t c = sr_synth_dense_count(s, i, j);
        *p++ = '\t';
        if (c >= 0)
            p = put_u64(p, (uint64_t)c);
    }
    for (int f = 0; f < F; f++) {
        *p++ = '\t';
        p = put_hex8(p, (uint64_t)batch->kjt.values[batch->kjt.offsets[(int64_t)f * B + b]]);
    }
    *p++ = '\n';
    return (int)(p - line);
}

static int check_tsv_shape(const struct sr_synth *s)
{
    const struct sr_synth_config *c = &s->cfg;
    for (int f = 0; f < c->num_features; f++)
        if (s->ids_min[f] != 1 || s->ids_max[f] != 1)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "TSV output needs exactly 1 id per feature, not [%d, %d] (feature "
                                "%d); HINT: multi-hot bags have no Criteo TSV form, use "
                                "--ids-per-feature 1",
                                s->ids_min[f], s->ids_max[f], f);
    if (c->num_dense != TSV_DENSE)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "TSV output needs %d dense features (Criteo's), not %d", TSV_DENSE,
                            c->num_dense);
    for (int f = 0; f < c->num_features; f++)
        if (c->rows[f] > ((int64_t)1 << 32))
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "TSV output: table of feature %d has %" PRId64
                                " rows, more than 8 hex digits (2^32) can name",
                                f, c->rows[f]);
    return SR_OK;
}

static int write_block(const struct sr_synth *s, struct tsv_block *blk, FILE *f, int64_t first,
                       int B)
{
    sr_synth_fill(s, first, B, &blk->batch);
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++)
        blk->line_len[b] = format_line(s, &blk->batch, b, first + b, blk->text + b * blk->line_cap);
    for (int b = 0; b < B; b++)
        if (fwrite(blk->text + b * blk->line_cap, 1, (size_t)blk->line_len[b], f) !=
            (size_t)blk->line_len[b])
            return sr_error_set(SR_ERR_WRITE,
                                "cannot write (%s) at sample %" PRId64 "; HINT: check the free "
                                "disk space",
                                strerror(errno), first + b);
    return SR_OK;
}

int sr_synth_write_tsv(const struct sr_synth *s, FILE *f, int64_t first_index, int64_t n)
{
    int rc = check_tsv_shape(s);
    if (rc)
        return rc;
    if (n < 0 || first_index < 0 || first_index + n > SR_SYNTH_MAX_INDEX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "TSV output: samples [%" PRId64 ", +%" PRId64 ") out of range",
                            first_index, n);
    struct tsv_block blk;
    int F = s->cfg.num_features;
    sr_batch_init(&blk.batch, TSV_BLOCK, TSV_DENSE, F, sr_synth_max_values(s, TSV_BLOCK), 0, NULL);
    blk.line_cap = 2 + TSV_DENSE * 12 + (size_t)F * 9 + 2;
    blk.text = sr_malloc(blk.line_cap * TSV_BLOCK);
    blk.line_len = sr_malloc(sizeof(int) * TSV_BLOCK);
    for (int64_t done = 0; done < n && rc == SR_OK; done += TSV_BLOCK) {
        int B = n - done < TSV_BLOCK ? (int)(n - done) : TSV_BLOCK;
        rc = write_block(s, &blk, f, first_index + done, B);
    }
    if (rc == SR_OK && fflush(f) != 0)
        rc = sr_error_set(SR_ERR_WRITE, "cannot write (%s); HINT: check the free disk space",
                          strerror(errno));
    sr_free(blk.line_len);
    sr_free(blk.text);
    sr_batch_free(&blk.batch);
    return rc;
}
