/*
 * The hidden teacher that labels synthetic samples.
 *
 *   logit  = bias + dense part + sparse part
 *   dense  = c_d (sum_j w_j z_j + q_j (z_j^2 - 1) / 2) - centre   z_j: dense float j standardised
 *   sparse = sum_f c_s g_f mean_{id in bag f} effect(f, rank(id)) - centre
 *   effect(f, k) = G[seed, f, k] / sqrt(1 + k / head_ranks)     G ~ N(0, 1), approximately
 *   label  ~ Bernoulli(sigmoid(logit))
 *
 * w ~ N(0,1) and q ~ N(0, 0.3^2) make the dense part linear plus a mild
 * curvature; g_f in [0.3, 1.7] gives features unequal importance. An effect is
 * a function of (seed, feature, rank), i.e. of (seed, feature, id) through the
 * bijection, so it is drawn on the fly and nothing per row is stored.
 *
 * Learnability. Under Zipf ids the effect variance decays with the popularity
 * rank (head_ranks = 200): hot ids carry distinctive effects, while the long
 * tail of ids seen a handful of times in a training run carries little, as in
 * real click logs. Measured on the default job (26 tables capped at 100k rows,
 * Zipf 1.05, seed 1234): a logistic model over one weight per id plus the exact
 * dense part, one Adagrad pass over 1.5M samples, ends 0.007 AUC below the
 * teacher with head_ranks = 200, 0.012 with 1000, and 0.024 with flat effects,
 * whose rare ids no model can learn in a few million samples. Uniform ids get
 * flat effects (no rank is more popular than another).
 *
 * Calibration (at init, over SR_SYNTH_CALIB_SAMPLES fixed samples): standardise
 * the dense floats, then choose c_d and c_s so the logit has variance 2.6 of
 * which 65% is the sparse part's, centre both parts, and set the bias so the
 * mean label probability is 0.30. That gives a teacher AUC near 0.8. Sums over
 * the calibration set are serial, so the result is the same for any thread
 * count.
 */
#include <math.h>

#include "data/synth_internal.h"
#include "shardrec/alloc.h"

#define TEACHER_LOGIT_VAR     2.6
#define TEACHER_SPARSE_SHARE  0.65
#define TEACHER_POSITIVE_RATE 0.30
#define TEACHER_HEAD_RANKS    200.0
#define TEACHER_QUAD_SD       0.3

enum { PARAM_DENSE_W = 1 << 20, PARAM_DENSE_Q = 2 << 20, PARAM_FEATURE_G = 3 << 20 };

double sr_teacher_dense_raw(const struct sr_teacher *t, int num_dense, const float *dense)
{
    double acc = 0.0;
    for (int j = 0; j < num_dense; j++) {
        double z = ((double)dense[j] - t->dense_mean[j]) * t->dense_inv_sd[j];
        acc += t->dense_w[j] * z + t->dense_q[j] * (z * z - 1.0) * 0.5;
    }
    return acc;
}

/* Approximately N(0, 1) from one 64-bit draw: the sum of its four 16-bit
 * uniforms (Irwin-Hall, variance 1/3), centred and scaled. Far cheaper than
 * Box-Muller, and the teacher needs no exact tails. */
double sr_teacher_gauss(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint64_t r = sr_rng_u64(seed, stream, counter);
    double sum = (double)(r & 0xffff) + (double)(r >> 16 & 0xffff) + (double)(r >> 32 & 0xffff) +
                 (double)(r >> 48) + 2.0;
    return (sum * (1.0 / 65536.0) - 2.0) * 1.7320508075688772;
}

double sr_teacher_effect(const struct sr_teacher *t, uint64_t seed, int f, int64_t k)
{
    double e = sr_teacher_gauss(seed, sr_synth_stream(SR_SYNTH_STREAM_EFFECT, f), (uint64_t)k);
    if (t->head_ranks > 0.0)
        e /= sqrt(1.0 + (double)k / t->head_ranks);
    return e;
}

static void draw_weights(struct sr_synth *s)
{
    struct sr_teacher *t = &s->teacher;
    uint64_t seed = s->cfg.seed, stream = sr_synth_stream(SR_SYNTH_STREAM_PARAM, 0xffff);
    for (int j = 0; j < s->cfg.num_dense; j++) {
        t->dense_w[j] = sr_rng_normal(seed, stream, PARAM_DENSE_W + j);
        t->dense_q[j] = TEACHER_QUAD_SD * sr_rng_normal(seed, stream, PARAM_DENSE_Q + j);
    }
    for (int f = 0; f < s->cfg.num_features; f++)
        t->feature_scale[f] = 0.3 + 1.4 * sr_rng_uniform(seed, stream, PARAM_FEATURE_G + f);
}

/* Mean and standard deviation of each dense float over the calibration set. */
static void standardise_dense(struct sr_synth *s, float *rows, int n)
{
    struct sr_teacher *t = &s->teacher;
    int nd = s->cfg.num_dense;
    for (int j = 0; j < nd; j++) {
        double sum = 0.0, sq = 0.0;
        for (int i = 0; i < n; i++)
            sum += rows[(size_t)i * nd + j];
        double mean = sum / n;
        for (int i = 0; i < n; i++) {
            double d = rows[(size_t)i * nd + j] - mean;
            sq += d * d;
        }
        double sd = sqrt(sq / n);
        t->dense_mean[j] = mean;
        t->dense_inv_sd[j] = sd > 1e-9 ? 1.0 / sd : 0.0;
    }
}

static void mean_var(const double *x, int n, double *mean, double *var)
{
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / n;
    for (int i = 0; i < n; i++)
        sq += (x[i] - *mean) * (x[i] - *mean);
    *var = sq / n;
}

/* Bias such that the mean of sigmoid(bias + logit_i) is the target rate. */
static double solve_bias(const double *logit, int n, double rate)
{
    double lo = -30.0, hi = 30.0;
    for (int it = 0; it < 80; it++) {
        double mid = 0.5 * (lo + hi), p = 0.0;
        for (int i = 0; i < n; i++)
            p += 1.0 / (1.0 + exp(-(mid + logit[i])));
        if (p / n < rate)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Scale factor that gives a part of variance var the variance target (0 if flat). */
static double scale_to(double var, double target)
{
    return var > 1e-12 ? sqrt(target / var) : 0.0;
}

static void calibrate(struct sr_synth *s)
{
    struct sr_teacher *t = &s->teacher;
    int n = SR_SYNTH_CALIB_SAMPLES, nd = s->cfg.num_dense;
    float *rows = sr_malloc(sizeof(float) * (size_t)n * nd);
    double *dense = sr_malloc(sizeof(double) * n), *sparse = sr_malloc(sizeof(double) * n);

#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        for (int j = 0; j < nd; j++)
            rows[(size_t)i * nd + j] =
                sr_criteo_dense(sr_synth_dense_count(s, SR_SYNTH_CALIB_BASE + i, j));
    standardise_dense(s, rows, n);

    /* Parts with unit scales and no centring. */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        struct sr_synth_parts p =
            sr_synth_draw(s, SR_SYNTH_CALIB_BASE + i, rows + (size_t)i * nd, NULL, NULL, 0, 0);
        dense[i] = p.dense;
        sparse[i] = p.sparse;
    }
    double dmean, dvar, smean, svar;
    mean_var(dense, n, &dmean, &dvar);
    mean_var(sparse, n, &smean, &svar);
    double cd = scale_to(dvar, (1.0 - TEACHER_SPARSE_SHARE) * TEACHER_LOGIT_VAR);
    double cs = scale_to(svar, TEACHER_SPARSE_SHARE * TEACHER_LOGIT_VAR);
    t->dense_scale = cd;
    t->dense_center = cd * dmean;
    for (int f = 0; f < s->cfg.num_features; f++)
        t->feature_scale[f] *= cs;
    t->sparse_center = cs * smean;
    for (int i = 0; i < n; i++)
        dense[i] = cd * (dense[i] - dmean) + cs * (sparse[i] - smean);
    t->bias = solve_bias(dense, n, TEACHER_POSITIVE_RATE);

    sr_free(rows);
    sr_free(dense);
    sr_free(sparse);
}

void sr_teacher_init(struct sr_synth *s)
{
    struct sr_teacher *t = &s->teacher;
    int nd = s->cfg.num_dense;
    t->dense_mean = sr_calloc((size_t)nd, sizeof(double));
    t->dense_inv_sd = sr_calloc((size_t)nd, sizeof(double));
    t->dense_w = sr_calloc((size_t)nd, sizeof(double));
    t->dense_q = sr_calloc((size_t)nd, sizeof(double));
    t->feature_scale = sr_calloc((size_t)s->cfg.num_features, sizeof(double));
    t->head_ranks = s->cfg.id_dist == SR_ID_DIST_ZIPF ? TEACHER_HEAD_RANKS : 0.0;
    t->dense_scale = 1.0;
    t->dense_center = 0.0;
    t->sparse_center = 0.0;
    t->bias = 0.0;
    draw_weights(s);
    calibrate(s);
}

void sr_teacher_free(struct sr_teacher *t)
{
    sr_free(t->dense_mean);
    sr_free(t->dense_inv_sd);
    sr_free(t->dense_w);
    sr_free(t->dense_q);
    sr_free(t->feature_scale);
}
