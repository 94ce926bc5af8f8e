/*
 * Synthetic Criteo-shaped data: a deterministic, seekable generator.
 *
 * Sample i (a global index) is a pure function of (seed, i): its dense counts,
 * its ids and its label are drawn by the counter-based generator of rng.h with
 * i as the counter, so any rank can draw any slice of any global batch, and the
 * same seed gives the same data for every world size. Training samples use
 * indices from 0; evaluation samples from SR_SYNTH_EVAL_BASE.
 *
 * A sample:
 *   dense   num_dense floats, each log(c + 1) of a nonnegative integer count c
 *           (Criteo's transform); a missing count reads as 0.
 *   ids     per feature f a bag of L ids, L uniform in feature f's [min, max] (one
 *           range for all, or one per feature); each id
 *           is a popularity rank k in [0, E) (E = rows[f]) drawn uniformly or from
 *           a bounded power law (Zipf), then scattered over the rows by a fixed
 *           per-feature bijection id = (a_f k + b_f) mod E that stores nothing, so
 *           hot ids spread over every row block (see src/data/zipf.c).
 *   label   Bernoulli(sigmoid(teacher logit)); the hidden teacher is
 *             logit = bias + dense part (a fixed random function of the dense
 *                     features: linear plus a mild quadratic)
 *                   + sparse part (sum over features of a per-(feature, id)
 *                     effect; a bag contributes the mean of its ids' effects)
 *           scaled so that the sparse ids carry about 65% of the logit's variance
 *           and the positive rate is about 30% (src/data/teacher.c).
 *
 * Ids are independent of the dense features, so ranking by the teacher's dense
 * part is the best any dense-only model can do: sr_synth_bounds (metrics.h) reports that
 * floor next to the teacher's own AUC (the ceiling).
 *
 * Thread safety: a struct sr_synth is read-only after sr_synth_init; any number
 * of threads may call the other functions on it at once.
 */
#ifndef SHARDREC_SYNTHETIC_H
#define SHARDREC_SYNTHETIC_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "shardrec/batch.h"

enum sr_id_dist { SR_ID_DIST_UNIFORM = 0, SR_ID_DIST_ZIPF = 1 };

#define SR_SYNTH_EVAL_BASE ((int64_t)1 << 40) /* global index of the first evaluation sample */

struct sr_synth_config {
    uint64_t seed;
    int num_dense;        /* 13 */
    int num_features;     /* F (26) */
    const int64_t *rows;  /* (F) rows of the table each feature looks up; copied */
    int ids_min, ids_max; /* ids per feature per sample, uniform in [min,max]; equal = fixed */
    /* (F) feature f's own [min, max] (MLPerf's multi-hot sizes), or both NULL: ids_min and
     * ids_max for every feature; copied. Given, they replace ids_min and ids_max, and a list
     * of F equal ranges draws exactly the bags of that one range. */
    const int *feature_ids_min, *feature_ids_max;
    enum sr_id_dist id_dist;
    double zipf_s; /* exponent for SR_ID_DIST_ZIPF, > 0 */
};

struct sr_synth;

/* Build a generator from cfg (copied, rows included; the caller keeps cfg).
 * Calibrates the teacher on a fixed set of samples (a few tens of ms).
 * Returns SR_ERR_INVALID_ARG, naming the field, for: num_dense outside
 * [1, 1024], num_features outside [1, 65536], rows NULL or a row count < 1,
 * ids_min < 0, ids_max < ids_min or > 65536 (for any feature, when per feature;
 * one of the two per-feature arrays NULL and the other not), an unknown id_dist,
 * or zipf_s outside (0, 100] under SR_ID_DIST_ZIPF. *out is NULL on error. */
int sr_synth_init(struct sr_synth **out, const struct sr_synth_config *cfg);
void sr_synth_free(struct sr_synth *s); /* NULL is a no-op */

/* The most ids a batch of B samples can hold: B times the sum over features of
 * their max (B * F * ids_max for one range). Size batches with
 * sr_batch_init(b, B, num_dense, F, sr_synth_max_values(s, B), ...). */
int64_t sr_synth_max_values(const struct sr_synth *s, int B);
/* The most ids feature f holds in a batch of B samples: B times its max. */
int64_t sr_synth_feature_max_values(const struct sr_synth *s, int f, int B);

/* Fill batch with global samples first_index .. first_index+B-1: dense (B,
 * num_dense) as Criteo's transform gives it, labels 0/1, KJT lengths, offsets and
 * values (ids in [0, rows[f])); KJT weights, when the batch has them, are set to
 * 1. Sets batch_size, first_index and kjt.stride. Sample i depends only on
 * (seed, i). OpenMP over samples (static schedule); allocates nothing.
 * Aborts (an invariant, not user input) if the batch is smaller than B or
 * sr_synth_max_values(s, B), or its num_dense / num_keys differ from s. */
void sr_synth_fill(const struct sr_synth *s, int64_t first_index, int B, struct sr_batch *batch);

/* Over samples first_index .. first_index+n-1, each array (n): the teacher's
 * logit, its dense and sparse parts, and the drawn label. OpenMP over samples.
 * The AUC bounds built from them are sr_synth_bounds (metrics.h). */
void sr_synth_teacher_parts(const struct sr_synth *s, int64_t first_index, int64_t n,
                            float *logit, float *dense, float *sparse, float *labels);

/* Parse "uniform" or "zipf:S" (S a finite number > 0, e.g. zipf:1.05). zipf_s is
 * set to 0 for uniform. Returns SR_ERR_INVALID_ARG with a hint otherwise. */
int sr_id_dist_parse(const char *spec, enum sr_id_dist *dist, double *zipf_s);

/* The n hottest rows of a table of `rows` rows that the k features
 * `features` look up (their ids drawn as sr_synth_init's, from seed, dist
 * and zipf_s): a row's heat is the sum over the features of weights[j] (say
 * feature j's mean ids a sample) times the probability of the row's
 * popularity rank under feature j. With one feature they are exactly the
 * images of ranks 0 .. n-1 under its bijection. Ties go to the lower row.
 * Writes min(n, rows) rows to out, hottest first (so the first m of them
 * are the m hottest), and returns their count. */
int64_t sr_synth_hot_rows(int64_t rows, uint64_t seed, const int *features, const double *weights,
                          int k, enum sr_id_dist dist, double zipf_s, int64_t n, int64_t *out);

/* Write samples first_index .. first_index+n-1 as Criteo TSV lines:
 *   label \t I1 .. I13 \t C1 .. CF \n
 * I are the integer counts (empty when missing), C the ids as 8 lowercase hex
 * digits. Reading a line back with Criteo's rules (sr_criteo_dense for the
 * counts, hex -> uint32 -> mod rows for the ids) gives exactly the dense floats
 * and ids sr_synth_fill produces. Returns SR_ERR_INVALID_ARG if the ids of some
 * feature are not exactly 1 (min = max = 1: multi-hot bags have no TSV form),
 * num_dense is not 13, or a table has more than 2^32 rows; SR_ERR_WRITE if
 * writing fails (the reason, not the file, named). Allocates a buffer; OpenMP
 * inside each block of samples. */
int sr_synth_write_tsv(const struct sr_synth *s, FILE *f, int64_t first_index, int64_t n);

/* The id that popularity rank k (0 = hottest) of feature f maps to, and back.
 * Under uniform ids the rank carries no popularity. For tests, the planner's
 * statistics and tools. */
int64_t sr_synth_id_of_rank(const struct sr_synth *s, int f, int64_t rank);
int64_t sr_synth_rank_of_id(const struct sr_synth *s, int f, int64_t id);

/* The ids of feature `feature` for samples first .. first+n-1 with one id a
 * bag, drawn as sr_synth_fill draws them (same seed, stream and counters, the
 * same popularity law and rank -> row bijection) for a table of `rows` rows
 * under (dist, zipf_s): training's ids and skew without a generator, for
 * benchmarks (`shardrec bench device`) and tools. ids (n) gets the ids;
 * ranks (n, or NULL) each id's popularity rank (0 the hottest). Host arrays;
 * OpenMP over ids (static schedule). SR_ERR_INVALID_ARG for rows < 1, n < 0,
 * first < 0 or first + n above 2^47, an unknown dist, or zipf_s outside
 * (0, 100] under SR_ID_DIST_ZIPF. */
int sr_synth_draw_ids(int64_t rows, uint64_t seed, int feature, enum sr_id_dist dist, double zipf_s,
                      int64_t first, int64_t n, int64_t *ids, int64_t *ranks);

/* Probability of popularity rank k of a table of E rows under the configured id
 * distribution (see src/data/zipf.c for the discretised power law). */
double sr_synth_rank_prob(const struct sr_synth *s, int64_t E, int64_t k);

/* Criteo's dense transform of an integer count: log(max(c, 0) + 1) computed in
 * double and rounded once to float. The generator and every Criteo reader use
 * this one definition, so generated TSV files reproduce the generator's floats
 * bit for bit. A missing count is read as 0. */
static inline float sr_criteo_dense(int64_t count)
{
    return count > 0 ? (float)log1p((double)count) : 0.0f;
}

#endif
