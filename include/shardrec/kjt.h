/*
 * Keyed jagged tensor (KJT): the sparse input of a batch of B samples over F
 * features, feature-major as TorchRec lays it out.
 *
 *   keys     f0        f1         ...
 *   lengths  [l00 .. l0B-1][l10 .. l1B-1] ...     (F, B)  ids per (feature, sample)
 *   offsets  0, l00, l00+l01, ...                 (F*B + 1) prefix sums of lengths
 *   values   ids of (f0,s0), (f0,s1), ..., (f1,s0), ...      (N) int64
 *   weights  one float per id, or NULL                       (N)
 *
 * The bag of feature f, sample b is values[offsets[f*B+b] .. offsets[f*B+b+1]).
 * stride is B. The KJT does not own its arrays (a batch does).
 *
 * The arrays may live in host memory or on a device (a batch's device twin,
 * batch.h). length_per_key, ids per feature (TorchRec's length_per_key()),
 * is always host memory: the loader fills it on the host with the KJT's
 * check (sr_kjt_fill_length_per_key), so the embedding layer sizes its work
 * without reading the arrays back from the device.
 */
#ifndef SHARDREC_KJT_H
#define SHARDREC_KJT_H

#include <stdint.h>

struct sr_kjt {
    int num_keys;            /* F */
    int stride;              /* B */
    const char *const *keys; /* (F) feature names, borrowed; may be NULL */
    int32_t *lengths;        /* (F, B) host */
    int64_t *offsets;        /* (F*B + 1) host; filled by sr_kjt_compute_offsets */
    int64_t *values;         /* (N) host */
    float *weights;          /* (N) host, or NULL */
    int64_t num_values;      /* N */
    int64_t num_weights;     /* N when weights are present, else 0 */
    int64_t *length_per_key; /* (F) ids per feature, HOST memory, or NULL (not known) */
};

/* What to do with an id outside [0, rows): reject it, or take it mod rows. */
enum sr_id_policy { SR_ID_POLICY_ERROR = 0, SR_ID_POLICY_HASH = 1 };

/* Fill offsets from lengths. Returns SR_ERR_DATA naming the feature and sample
 * if a length is negative or the total differs from num_values. */
int sr_kjt_compute_offsets(struct sr_kjt *kjt);

/* Check the structure: non-negative lengths, Σ lengths == num_values, offsets
 * consistent, weights absent or exactly num_values long. Errors name the
 * feature (by key when present) and the sample. */
int sr_kjt_validate(const struct sr_kjt *kjt);

/* Bring every id of feature f into [0, rows[f]): under SR_ID_POLICY_ERROR an id
 * outside the range is an SR_ERR_DATA error naming feature, sample and id;
 * under SR_ID_POLICY_HASH it is replaced by its non-negative residue mod rows.
 * rows and policy are (F) arrays. Modifies values in place. */
int sr_kjt_apply_id_policy(struct sr_kjt *kjt, const int64_t *rows,
                           const enum sr_id_policy *policy);

/* length_per_key[f] = ids of feature f, from the offsets (host memory; the
 * KJT must be valid and length_per_key allocated). */
void sr_kjt_fill_length_per_key(struct sr_kjt *kjt);

/* Bag bounds of (feature f, sample b). */
static inline int64_t sr_kjt_bag_begin(const struct sr_kjt *kjt, int f, int b)
{
    return kjt->offsets[(int64_t)f * kjt->stride + b];
}
static inline int64_t sr_kjt_bag_end(const struct sr_kjt *kjt, int f, int b)
{
    return kjt->offsets[(int64_t)f * kjt->stride + b + 1];
}

#endif
