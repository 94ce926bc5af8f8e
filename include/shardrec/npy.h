/*
 * NumPy .npy arrays (format versions 1.0, 2.0 and 3.0), read-only and
 * memory-mapped, as TorchRec's Criteo preprocessing writes them
 * (day_N_dense.npy float32 (N, 13), day_N_sparse.npy int32 (N, 26),
 * day_N_labels.npy int32 (N, 1)); `shardrec convert --npy` turns them into
 * shardrec's binary format (include/shardrec/npy_criteo.h).
 *
 *   offset  size  field
 *   0       6     magic "\x93NUMPY"
 *   6       2     version: major 1, 2 or 3, minor 0
 *   8       2|4   header length H (u16 for 1.0, u32 for 2.0 and 3.0)
 *   10|12   H     a Python dict literal, padded with spaces and ended by '\n':
 *                 {'descr': '<f4', 'fortran_order': False, 'shape': (N, C), }
 *   ...           the data, C order, prod(shape) x itemsize bytes, ending the file
 *
 * Strict: the three keys exactly once each, nothing else; descr one of '<f4',
 * '<f8', '<i4', '<u4', '<i8', '|u1', '|b1' (little-endian; '|' or '=' accepted
 * for the byte order where numpy writes them); C or Fortran order; one or two
 * dimensions; the file exactly as long as header and data. Anything else is SR_ERR_DATA naming
 * the file and what is wrong.
 */
#ifndef SHARDREC_NPY_H
#define SHARDREC_NPY_H

#include <stddef.h>
#include <stdint.h>

enum sr_npy_dtype {
    SR_NPY_F32 = 0,
    SR_NPY_I32 = 1,
    SR_NPY_U32 = 2,
    SR_NPY_I64 = 3,
    SR_NPY_F64 = 4,
    SR_NPY_U8 = 5,   /* '|u1' */
    SR_NPY_BOOL = 6, /* '|b1' */
};

struct sr_npy {
    char *path; /* owned copy, for messages */
    enum sr_npy_dtype dtype;
    int itemsize;              /* 1, 4 or 8 */
    int ndim;                  /* 1 or 2 */
    int fortran;               /* column-major (fortran_order True) */
    int64_t rows, cols;        /* shape (rows,) is read as (rows, 1) */
    const unsigned char *data; /* rows * cols items, C (or Fortran) order */
    const void *map;           /* the mapping (sr_npy_open), or NULL */
    size_t map_bytes;
};

/* Parse the header of an .npy image of n bytes at buf (the whole file) into
 * a (path for messages, borrowed); a->data points into buf. SR_ERR_DATA
 * naming path and the problem. Allocates nothing (a->path stays NULL). */
int sr_npy_parse(struct sr_npy *a, const unsigned char *buf, size_t n, const char *path);

/* Map and parse the file at path. SR_ERR_IO (cannot open or map), SR_ERR_DATA. */
int sr_npy_open(struct sr_npy *a, const char *path);
void sr_npy_close(struct sr_npy *a); /* safe on a zeroed or closed array */

/* Item (r, c) as int64 (integer and bool dtypes; a float one truncated, 0
 * when NaN or beyond int64) or as float (a wider one rounded). */
int64_t sr_npy_int(const struct sr_npy *a, int64_t r, int64_t c);
float sr_npy_float(const struct sr_npy *a, int64_t r, int64_t c);

/* "float32", "int32", "uint32", "int64", "float64", "uint8", "bool". */
const char *sr_npy_dtype_name(enum sr_npy_dtype t);

#endif
