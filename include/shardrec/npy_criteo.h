/*
 * Criteo samples in TorchRec's numpy layout (torchrec/datasets/criteo.py,
 * BinaryCriteoUtils), one day a PREFIX:
 *
 *   PREFIX_dense.npy    float32 (N, D)    dense features as given (TorchRec's
 *                                         preprocessing took log(x + 3))
 *   PREFIX_sparse.npy   int32, uint32 or int64 (N, F): one id per feature
 *   PREFIX_labels.npy   int32, int64 or float32 (N,) or (N, 1): 0 or 1
 *
 * or, for MLPerf's multi-hot days (materialize_synthetic_multihot_dataset.py),
 * in place of the sparse array:
 *
 *   PREFIX_sparse_multi_hot.npz   members "0".."F-1", each int32, uint32 or
 *                                 int64 (N, h_f): h_f ids a sample (np.savez,
 *                                 uncompressed: include/shardrec/npz.h)
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
#include "shardrec/npz.h"

#define SR_NPY_CRITEO_MAX_BAG 65536 /* most ids of one feature a sample */

struct sr_npy_criteo {
    struct sr_npy dense, labels;
    struct sr_npy sparse;   /* one-hot: (N, F) */
    struct sr_npz multi;    /* multi-hot: the archive, and its F arrays: */
    struct sr_npy *bags;    /* (F) (N, h_f), or NULL when one-hot */
    int64_t samples;        /* N */
    int num_dense;          /* D */
    int num_features;       /* F */
    int64_t ids_per_sample; /* Σ h_f (F when one-hot) */
};

/* Open PREFIX's arrays for F features (PREFIX_sparse.npy, else
 * PREFIX_sparse_multi_hot.npz) and check them against each other: dtypes,
 * two dimensions (labels one or (N, 1)), F columns of ids or F bags of at
 * least one id, the same N. SR_ERR_IO / SR_ERR_DATA naming the file and what
 * is wrong. */
int sr_npy_criteo_open(struct sr_npy_criteo *c, const char *prefix, int num_features);
void sr_npy_criteo_close(struct sr_npy_criteo *c); /* safe on a zeroed one */

/* The bytes of the day's files (progress). */
int64_t sr_npy_criteo_bytes(const struct sr_npy_criteo *c);

/* Samples [first, first + n) into b (n samples and n * ids_per_sample ids
 * within its capacity): dense, labels, lengths (1, or h_f), ids mod rows[f]
 * (floor modulo), offsets. SR_ERR_DATA naming the file and the sample when a
 * label is not 0 or 1 or a dense value is not finite. */
int sr_npy_criteo_fill(const struct sr_npy_criteo *c, int64_t first, int n, const int64_t *rows,
                       struct sr_batch *b);

#endif
