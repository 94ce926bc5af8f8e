/*
 * libFuzzer target for the .npy header reader (src/data/npy.c): the input is
 * a whole file. Checked: parsing never reads outside the buffer; for a file
 * it accepts, the data is exactly rows x cols items of its dtype ending the
 * buffer (each byte is read through the item readers), the dims are sane and
 * the header starts at the magic's fixed place.
 * Build and run with tools/fuzz.sh; seeds in tests/fuzz/seeds_fuzz_npy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/npy.h"

static volatile double sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sr_npy a;
    if (sr_npy_parse(&a, data, size, "fuzz.npy") != SR_OK)
        return 0;
    if (a.ndim < 1 || a.ndim > 2 || a.rows < 0 || a.cols < 0 || (a.ndim == 1 && a.cols != 1))
        abort();
    if ((a.itemsize != 1 && a.itemsize != 4 && a.itemsize != 8) || a.data < data + 10)
        abort();
    const size_t bytes = (size_t)a.rows * (size_t)a.cols * (size_t)a.itemsize;
    if (a.data + bytes != data + size) /* the data ends the file, exactly */
        abort();
    double acc = 0;
    for (int64_t r = 0; r < a.rows; r++)
        for (int64_t c = 0; c < a.cols; c++)
            acc += (double)sr_npy_float(&a, r, c) + (double)sr_npy_int(&a, r, c);
    sink = acc;
    return 0;
}
