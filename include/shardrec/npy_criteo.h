/*
 * Criteo samples in TorchRec's numpy layout (torchrec/datasets/criteo.py,
 * BinaryCriteoUtils), one day a PREFIX:
 *
 *   PREFIX_dense.npy    float32 (N, D)    dense features as given (TorchRec's
 *                                         preprocessing took log(x + 3))
 *   PREFIX_sparse.npy   int32, uint32 or int64 (N, F): one id per feature
 *   PREFIX_labels.npy   int32, int64 or float32 (N,) or (N, 1): 0 or 1
 *
 * An id is reduced mod its table's rows as TorchRec's `sparse % hashes`
 * does (numpy's floor modulo: a negative int32, a hex id past 2^31, lands in
 * [0, rows)), so `shardrec convert --npy` gives the samples TorchRec trains
 * on. The arrays are memory-mapped (include/shardrec/npy.h).
 */
#ifndef SHARDREC_NPY_CRITEO_H
#define SHARDREC_NPY_CRITEO_H

#include <stdint.h>

#include "shardrec/batch.h"
#include "shardrec/npy.h"

struct sr_npy_criteo {
    struct sr_npy dense, sparse, labels;
    int64_t samples; /* N */
    int num_dense;   /* D */
};

/* Open PREFIX's three arrays for F features and check them against each
 * other: dtypes, two dimensions (labels one or (N, 1)), F columns of ids, the
 * same N. SR_ERR_IO / SR_ERR_DATA naming the file and what is wrong. */
int sr_npy_criteo_open(struct sr_npy_criteo *c, const char *prefix, int num_features);
void sr_npy_criteo_close(struct sr_npy_criteo *c); /* safe on a zeroed one */

/* Samples [first, first + n) into b (n <= its capacity, one id a feature):
 * dense, labels, lengths 1, ids mod rows[f] (floor modulo), offsets.
 * SR_ERR_DATA naming the file and the sample when a label is not 0 or 1 or a
 * dense value is not finite. */
int sr_npy_criteo_fill(const struct sr_npy_criteo *c, int64_t first, int n, const int64_t *rows,
                       struct sr_batch *b);

#endif
