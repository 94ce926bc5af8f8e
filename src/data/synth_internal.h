/*
 * Internals of the synthetic generator, shared by its files:
 *
 *   synthetic.c      the generator: config checks, samples, batches, bounds
 *   zipf.c           popularity ranks (uniform or power law) and the per-feature
 *                    bijection from ranks to rows
 *   teacher.c        the hidden labelling model and its calibration
 *   synthetic_tsv.c  the Criteo TSV writer
 *
 * Every random number is sr_rng_*(seed, stream, counter) with a stream of
 * (purpose << 32 | feature) and, for per-sample draws, the global sample index
 * in the counter, which is what makes samples seekable.
 */
#ifndef SHARDREC_DATA_SYNTH_INTERNAL_H
#define SHARDREC_DATA_SYNTH_INTERNAL_H

#include <stdint.h>

#include "shardrec/rng.h"
#include "shardrec/synthetic.h"

/* Stream purposes; the low 32 bits of a stream hold a feature index. */
enum sr_synth_purpose {
    SR_SYNTH_STREAM_BAG_LEN = 1, /* counter: sample */
    SR_SYNTH_STREAM_RANK,        /* counter: sample << 16 | position in the bag */
    SR_SYNTH_STREAM_MISSING,     /* counter: sample */
    SR_SYNTH_STREAM_COUNT,       /* counter: sample */
    SR_SYNTH_STREAM_LABEL,       /* counter: sample */
    SR_SYNTH_STREAM_EFFECT,      /* counter: popularity rank */
    SR_SYNTH_STREAM_PARAM,       /* counter: parameter index; fixed per seed */
};

static inline uint64_t sr_synth_stream(enum sr_synth_purpose p, int sub)
{
    return (uint64_t)p << 32 | (uint32_t)sub;
}

/* Sample indices must stay below this so that (sample << 16 | position) fits. */
#define SR_SYNTH_MAX_INDEX ((int64_t)1 << 47)
/* Where the teacher's calibration samples live (never training or eval data). */
#define SR_SYNTH_CALIB_BASE    ((int64_t)3 << 40)
#define SR_SYNTH_CALIB_SAMPLES (1 << 15)

/* Ranks of one feature, and the bijection rank -> row id = (a k + b) mod E. */
struct sr_id_sampler {
    int64_t rows;      /* E */
    uint64_t a, a_inv; /* gcd(a, E) = 1; a a_inv = 1 mod E */
    uint64_t b;        /* offset of rank 0 */
    int zipf;          /* 0: uniform ranks */
    double t;          /* 1 - s */
    double span;       /* A = (2E+1)^t - 1, or log(2E+1) when t is 0 */
};

void sr_id_sampler_init(struct sr_id_sampler *m, int64_t rows, uint64_t seed, int feature,
                        enum sr_id_dist dist, double zipf_s);
/* A rank in [0, E) from a uniform u in [0, 1). */
int64_t sr_id_sampler_rank(const struct sr_id_sampler *m, double u);
double sr_id_sampler_prob(const struct sr_id_sampler *m, int64_t k);
int64_t sr_id_sampler_id(const struct sr_id_sampler *m, int64_t rank);
int64_t sr_id_sampler_rank_of(const struct sr_id_sampler *m, int64_t id);

/* The hidden teacher: logit = bias + dense part + sparse part (see teacher.c). */
struct sr_teacher {
    double *dense_mean;    /* (num_dense) of the dense floats, for standardising */
    double *dense_inv_sd;  /* (num_dense) */
    double *dense_w;       /* (num_dense) linear weights on standardised features */
    double *dense_q;       /* (num_dense) quadratic weights */
    double *feature_scale; /* (F) effect scale of each feature's bag */
    double dense_scale;    /* multiplies the raw dense function */
    double dense_center;   /* mean of the scaled dense part (subtracted) */
    double sparse_center;  /* mean of the sparse part (subtracted) */
    double bias;
    double head_ranks; /* effect variance of rank k is 1 / (1 + k / head_ranks); 0: flat */
};

/* Dense count model of one feature: missing with probability missing_p, else
 * floor(expm1(mu + sd z)) clamped to [0, 2^31 - 1]. */
struct sr_dense_model {
    double missing_p, mu, sd;
};

struct sr_synth {
    struct sr_synth_config cfg;     /* cfg.rows, cfg.feature_ids_* point at the arrays below */
    int64_t *rows;                  /* (F) */
    int *ids_min, *ids_max;         /* (F) each feature's bag lengths, one range copied F times
                                       when the config gives one for all */
    int64_t ids_max_sum;            /* sum of ids_max: the most ids a sample holds */
    struct sr_id_sampler *samplers; /* (F) */
    struct sr_dense_model *dense;   /* (num_dense) */
    struct sr_teacher teacher;
};

/* The teacher's two parts of one sample's logit. */
struct sr_synth_parts {
    double dense, sparse;
};

/* The integer count of dense feature j of sample i, or -1 if missing. */
int64_t sr_synth_dense_count(const struct sr_synth *s, int64_t i, int j);
/* Ids of feature f in sample i. */
int sr_synth_bag_len(const struct sr_synth *s, int64_t i, int f);
/* Draw sample i: its dense floats into dense (num_dense) and, when values is not
 * NULL, the bag of feature f at values + offsets[f * B + b]. Returns the
 * teacher's parts. */
struct sr_synth_parts sr_synth_draw(const struct sr_synth *s, int64_t i, float *dense,
                                    int64_t *values, const int64_t *offsets, int B, int b);
/* The 0/1 label of sample i given its parts. */
float sr_synth_label(const struct sr_synth *s, int64_t i, struct sr_synth_parts p);

void sr_teacher_init(struct sr_synth *s);
void sr_teacher_free(struct sr_teacher *t);
/* The unscaled dense function of one sample's dense floats. */
double sr_teacher_dense_raw(const struct sr_teacher *t, int num_dense, const float *dense);
/* Approximately standard normal, one hash per draw (see teacher.c). */
double sr_teacher_gauss(uint64_t seed, uint64_t stream, uint64_t counter);
/* Effect of popularity rank k of feature f, before the feature's scale. */
double sr_teacher_effect(const struct sr_teacher *t, uint64_t seed, int f, int64_t k);

#endif
