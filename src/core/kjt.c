/*
 * Keyed jagged tensor: offsets from lengths, structural validation, and the
 * per-feature policy for ids outside a table's rows. Errors name the feature
 * (by key when the KJT has keys) and the sample.
 */
#include <inttypes.h>
#include <stdio.h>

#include "shardrec/error.h"
#include "shardrec/kjt.h"

static const char *feature_name(const struct sr_kjt *kjt, int f, char *buf, size_t n)
{
    if (kjt->keys && kjt->keys[f])
        snprintf(buf, n, "'%s' (feature %d)", kjt->keys[f], f);
    else
        snprintf(buf, n, "feature %d", f);
    return buf;
}

static int check_lengths(const struct sr_kjt *kjt)
{
    char name[96];
    int64_t total = 0;
    for (int f = 0; f < kjt->num_keys; f++) {
        for (int b = 0; b < kjt->stride; b++) {
            int32_t len = kjt->lengths[(int64_t)f * kjt->stride + b];
            if (len < 0)
                return sr_error_set(SR_ERR_DATA, "KJT: negative length %d at %s, sample %d", len,
                                    feature_name(kjt, f, name, sizeof name), b);
            total += len;
        }
    }
    if (total != kjt->num_values)
        return sr_error_set(SR_ERR_DATA,
                            "KJT: lengths sum to %" PRId64 " but there are %" PRId64
                            " values; HINT: each (feature, sample) length counts its ids",
                            total, kjt->num_values);
    return SR_OK;
}

int sr_kjt_compute_offsets(struct sr_kjt *kjt)
{
    int rc = check_lengths(kjt);
    if (rc)
        return rc;
    int64_t n = (int64_t)kjt->num_keys * kjt->stride;
    kjt->offsets[0] = 0;
    for (int64_t i = 0; i < n; i++)
        kjt->offsets[i + 1] = kjt->offsets[i] + kjt->lengths[i];
    return SR_OK;
}

int sr_kjt_validate(const struct sr_kjt *kjt)
{
    char name[96];
    if (kjt->num_keys < 0 || kjt->stride < 0)
        return sr_error_set(SR_ERR_DATA, "KJT: negative shape (%d keys, stride %d)", kjt->num_keys,
                            kjt->stride);
    int rc = check_lengths(kjt);
    if (rc)
        return rc;
    if (kjt->offsets) {
        int64_t n = (int64_t)kjt->num_keys * kjt->stride;
        if (kjt->offsets[0] != 0)
            return sr_error_set(SR_ERR_DATA, "KJT: offsets[0] is %" PRId64 ", not 0",
                                kjt->offsets[0]);
        for (int64_t i = 0; i < n; i++) {
            if (kjt->offsets[i + 1] - kjt->offsets[i] != kjt->lengths[i]) {
                int f = (int)(i / (kjt->stride ? kjt->stride : 1));
                int b = (int)(i % (kjt->stride ? kjt->stride : 1));
                return sr_error_set(SR_ERR_DATA,
                                    "KJT: offsets disagree with lengths at %s, sample %d",
                                    feature_name(kjt, f, name, sizeof name), b);
            }
        }
    }
    if (kjt->weights && kjt->num_weights != kjt->num_values)
        return sr_error_set(SR_ERR_DATA,
                            "KJT: %" PRId64 " weights for %" PRId64
                            " values; HINT: weights are one per id, or absent",
                            kjt->num_weights, kjt->num_values);
    if (!kjt->weights && kjt->num_weights != 0)
        return sr_error_set(SR_ERR_DATA, "KJT: %" PRId64 " weights declared but no weight array",
                            kjt->num_weights);
    return SR_OK;
}

/* The sample whose bag of feature f holds value index i (binary search). */
static int sample_of(const struct sr_kjt *kjt, int f, int64_t i)
{
    int lo = 0, hi = kjt->stride - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (sr_kjt_bag_begin(kjt, f, mid) <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

int sr_kjt_apply_id_policy(struct sr_kjt *kjt, const int64_t *rows, const enum sr_id_policy *policy)
{
    char name[96];
    for (int f = 0; f < kjt->num_keys; f++) {
        int64_t begin = sr_kjt_bag_begin(kjt, f, 0);
        int64_t end = sr_kjt_bag_begin(kjt, f, kjt->stride);
        int64_t e = rows[f];
        for (int64_t i = begin; i < end; i++) {
            int64_t id = kjt->values[i];
            if (id >= 0 && id < e)
                continue;
            if (policy[f] == SR_ID_POLICY_HASH) {
                int64_t r = id % e;
                kjt->values[i] = r < 0 ? r + e : r;
                continue;
            }
            return sr_error_set(SR_ERR_DATA,
                                "KJT: id %" PRId64 " out of range [0, %" PRId64
                                ") at %s, sample %d; HINT: fix the data or use the "
                                "'hash' id policy (id mod rows)",
                                id, e, feature_name(kjt, f, name, sizeof name),
                                sample_of(kjt, f, i));
        }
    }
    return SR_OK;
}

void sr_kjt_fill_length_per_key(struct sr_kjt *kjt)
{
    SR_ASSERT(kjt->length_per_key);
    for (int f = 0; f < kjt->num_keys; f++)
        kjt->length_per_key[f] =
            sr_kjt_bag_begin(kjt, f, kjt->stride) - sr_kjt_bag_begin(kjt, f, 0);
}
