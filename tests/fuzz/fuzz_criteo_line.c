/*
 * libFuzzer target for the Criteo TSV line parser (src/data/criteo_tsv.c).
 *
 * The input is one line (any bytes, '\n' included: the parser must treat it as
 * an ordinary bad character). Checked on every input: no out-of-bounds read
 * (ASan), no undefined behaviour (UBSan), and on success a well-formed sample:
 * label 0 or 1, finite non-negative dense values, every id in [0, rows[f]).
 * A fault always comes with a known kind and a description that fits its buffer.
 * Build and run with tools/fuzz.sh.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/criteo.h"

#define F 26

static const int64_t rows[F] = {1460,    583,     10131227, 2202608, 305,
                                24,      12517,   633,      3,       93145,
                                5683,    8351593, 3194,     27,      14992,
                                5461306, 10,      5652,     2173,    4,
                                7046547, 18,      15,       1,       (int64_t)1 << 33,
                                142572};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sr_criteo_parser p;
    static int ready;
    if (!ready) {
        if (sr_criteo_parser_init(&p, F, rows))
            abort();
        ready = 1;
    }
    /* A heap copy of exactly `size` bytes, so ASan sees any read past the end. */
    char *line = malloc(size ? size : 1);
    memcpy(line, data, size);
    float label = -1, dense[SR_CRITEO_NUM_DENSE];
    int64_t ids[F * 3];
    struct sr_criteo_fault_info info = {0, 0};
    enum sr_criteo_fault k = sr_criteo_parse_line(&p, line, size, &label, dense, ids, 3, &info);
    if (k == SR_CRITEO_OK) {
        if (label != 0.0f && label != 1.0f)
            abort();
        for (int j = 0; j < SR_CRITEO_NUM_DENSE; j++)
            if (!isfinite(dense[j]) || dense[j] < 0.0f)
                abort();
        for (int f = 0; f < F; f++)
            if (ids[f * 3] < 0 || ids[f * 3] >= rows[f])
                abort();
    } else {
        char msg[256];
        if (k != info.kind || k >= SR_CRITEO_NUM_FAULTS)
            abort();
        sr_criteo_fault_describe(&p, &info, msg, sizeof msg);
        if (strlen(msg) >= sizeof msg)
            abort();
    }
    free(line);
    return 0;
}
