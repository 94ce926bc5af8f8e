/*
 * Popularity ranks and the rank -> row bijection of one feature.
 *
 * Ranks. Uniform: k = floor(u E). Zipf with exponent s: a continuous power law
 * with density proportional to x^-s on [1/2, E + 1/2), discretised by
 * k = floor(x - 1/2), so rank k owns [k + 1/2, k + 3/2) and
 *
 *   P(k) = ((2k+3)^t - (2k+1)^t) / ((2E+1)^t - 1),   t = 1 - s
 *        = log((2k+3) / (2k+1)) / log(2E+1)           when s = 1.
 *
 * By the midpoint rule P(k) is close to (k+1)^-s / Z (within 1% from rank ~3
 * on; at s = 1.05 rank 0 is 10% and rank 1 2% heavier than that). The
 * inverse CDF is closed-form, x = (1 + u A)^(1/t) / 2 with A = (2E+1)^t - 1,
 * so a draw is O(1) and needs only u: any sample can be drawn on its own.
 *
 * Bijection. id = (a k + b) mod E with gcd(a, E) = 1 is a permutation of
 * [0, E) that stores two numbers. a starts near E / phi (the golden ratio), so
 * consecutive hot ranks land far apart and evenly (three-distance theorem):
 * the hottest ids spread over every row block of a row-wise sharding instead
 * of crowding the first. a and b take a per-feature random offset, so features
 * sharing a table do not share hot rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/synth_internal.h"
#include "shardrec/error.h"

static uint64_t gcd_u64(uint64_t x, uint64_t y)
{
    while (y) {
        uint64_t r = x % y;
        x = y;
        y = r;
    }
    return x;
}

/* Inverse of a mod m (gcd(a, m) = 1), by the extended Euclidean algorithm. */
static uint64_t inverse_mod(uint64_t a, uint64_t m)
{
    if (m == 1)
        return 0;
    __int128 t = 0, new_t = 1, r = m, new_r = a % m;
    while (new_r != 0) {
        __int128 q = r / new_r, tmp;
        tmp = t - q * new_t;
        t = new_t;
        new_t = tmp;
        tmp = r - q * new_r;
        r = new_r;
        new_r = tmp;
    }
    SR_ASSERT(r == 1);
    if (t < 0)
        t += m;
    return (uint64_t)t;
}

/* (a k + b) mod m for a, k, b < m; 64-bit arithmetic suffices while m <= 2^32. */
static uint64_t mul_add_mod(uint64_t a, uint64_t k, uint64_t b, uint64_t m)
{
    if (m <= ((uint64_t)1 << 32))
        return (a * k + b) % m;
    return (uint64_t)(((unsigned __int128)a * k + b) % m);
}

static void init_bijection(struct sr_id_sampler *m, uint64_t seed, int feature)
{
    uint64_t E = (uint64_t)m->rows;
    uint64_t stream = sr_synth_stream(SR_SYNTH_STREAM_PARAM, feature);
    uint64_t jitter = E / 64 + 1;
    uint64_t a = (uint64_t)((double)E * 0.6180339887498949) + sr_rng_u64(seed, stream, 0) % jitter;
    if (a == 0)
        a = 1;
    while (gcd_u64(a % E, E) != 1)
        a++;
    m->a = a % E;
    m->a_inv = inverse_mod(m->a, E);
    m->b = sr_rng_u64(seed, stream, 1) % E;
}

void sr_id_sampler_init(struct sr_id_sampler *m, int64_t rows, uint64_t seed, int feature,
                        enum sr_id_dist dist, double zipf_s)
{
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->zipf = dist == SR_ID_DIST_ZIPF;
    if (m->zipf) {
        m->t = 1.0 - zipf_s;
        double log_range = log(2.0 * (double)rows + 1.0);
        if (fabs(m->t) < 1e-12) {
            m->t = 0.0;
            m->span = log_range;
        } else {
            m->span = expm1(m->t * log_range);
        }
    }
    if (rows == 1) {
        m->a = 0;
        m->a_inv = 0;
        m->b = 0;
        return;
    }
    init_bijection(m, seed, feature);
}

int64_t sr_id_sampler_rank(const struct sr_id_sampler *m, double u)
{
    double x2; /* 2x, in [1, 2E + 1) */
    if (!m->zipf) {
        int64_t k = (int64_t)(u * (double)m->rows);
        return k < m->rows ? k : m->rows - 1;
    }
    if (m->t == 0.0)
        x2 = exp(u * m->span);
    else
        x2 = exp(log1p(u * m->span) / m->t);
    double k = floor((x2 - 1.0) * 0.5);
    if (!(k >= 0.0))
        return 0;
    return k < (double)m->rows ? (int64_t)k : m->rows - 1;
}

double sr_id_sampler_prob(const struct sr_id_sampler *m, int64_t k)
{
    if (k < 0 || k >= m->rows)
        return 0.0;
    if (!m->zipf)
        return 1.0 / (double)m->rows;
    double lo = 2.0 * (double)k + 1.0, hi = lo + 2.0;
    if (m->t == 0.0)
        return log(hi / lo) / m->span;
    return (pow(hi, m->t) - pow(lo, m->t)) / m->span;
}

int64_t sr_id_sampler_id(const struct sr_id_sampler *m, int64_t rank)
{
    if (m->rows == 1)
        return 0;
    return (int64_t)mul_add_mod(m->a, (uint64_t)rank, m->b, (uint64_t)m->rows);
}

int64_t sr_id_sampler_rank_of(const struct sr_id_sampler *m, int64_t id)
{
    uint64_t E = (uint64_t)m->rows;
    if (E == 1)
        return 0;
    return (int64_t)mul_add_mod(m->a_inv, ((uint64_t)id + E - m->b) % E, 0, E);
}

int sr_synth_draw_ids(int64_t rows, uint64_t seed, int feature, enum sr_id_dist dist, double zipf_s,
                      int64_t first, int64_t n, int64_t *ids, int64_t *ranks)
{
    if (rows < 1 || n < 0 || first < 0 || first > SR_SYNTH_MAX_INDEX - n)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sr_synth_draw_ids: rows %lld, samples %lld from %lld: rows must "
                            "be >= 1 and the samples within [0, 2^47)",
                            (long long)rows, (long long)n, (long long)first);
    if (dist != SR_ID_DIST_UNIFORM &&
        (dist != SR_ID_DIST_ZIPF || !(zipf_s > 0.0 && zipf_s <= 100.0)))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sr_synth_draw_ids: id distribution %d with exponent %g; HINT: "
                            "uniform, or zipf with an exponent in (0, 100]",
                            (int)dist, zipf_s);
    struct sr_id_sampler m;
    sr_id_sampler_init(&m, rows, seed, feature, dist, zipf_s);
    const uint64_t stream = sr_synth_stream(SR_SYNTH_STREAM_RANK, feature);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        const double u = sr_rng_uniform(seed, stream, (uint64_t)(first + i) << 16);
        const int64_t k = sr_id_sampler_rank(&m, u);
        ids[i] = sr_id_sampler_id(&m, k);
        if (ranks)
            ranks[i] = k;
    }
    return SR_OK;
}

int sr_id_dist_parse(const char *spec, enum sr_id_dist *dist, double *zipf_s)
{
    if (!spec)
        return sr_error_set(SR_ERR_INVALID_ARG, "id distribution missing; HINT: uniform or zipf:S");
    if (strcmp(spec, "uniform") == 0) {
        *dist = SR_ID_DIST_UNIFORM;
        *zipf_s = 0.0;
        return SR_OK;
    }
    if (strncmp(spec, "zipf:", 5) == 0 && spec[5] != '\0') {
        char *end = NULL;
        double s = strtod(spec + 5, &end);
        if (*end == '\0' && isfinite(s) && s > 0.0 && s <= 100.0) {
            *dist = SR_ID_DIST_ZIPF;
            *zipf_s = s;
            return SR_OK;
        }
    }
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "bad id distribution '%s'; HINT: 'uniform' or 'zipf:S' with S a number "
                        "in (0, 100], e.g. zipf:1.05",
                        spec);
}

/* ---- the hottest rows of a table ------------------------------------------------------ */

struct scored_row {
    int64_t row;
    double score;
};

static int by_score(const void *a, const void *b)
{
    const struct scored_row *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

int64_t sr_synth_hot_rows(int64_t rows, uint64_t seed, const int *features, const double *weights,
                          int k, enum sr_id_dist dist, double zipf_s, int64_t n, int64_t *out)
{
    n = n < rows ? n : rows;
    if (n <= 0 || k <= 0)
        return 0;
    if (k == 1 && dist == SR_ID_DIST_ZIPF) { /* one feature: its ranks, in order */
        struct sr_id_sampler one;
        sr_id_sampler_init(&one, rows, seed, features[0], dist, zipf_s);
        for (int64_t r = 0; r < n; r++)
            out[r] = sr_id_sampler_id(&one, r);
        return n;
    }
    struct sr_id_sampler *m = malloc(sizeof *m * (size_t)k);
    struct scored_row *c = malloc(sizeof *c * (size_t)n * (size_t)k);
    SR_ASSERT(m && c);
    for (int j = 0; j < k; j++)
        sr_id_sampler_init(&m[j], rows, seed, features[j], dist, zipf_s);
    /* candidates: every feature's n hottest ranks; a row's score: its
     * probability under each feature, weighted by the feature's ids */
    for (int j = 0; j < k; j++)
        for (int64_t r = 0; r < n; r++) {
            struct scored_row *s = &c[(size_t)j * n + r];
            s->row = sr_id_sampler_id(&m[j], r);
            s->score = 0;
            for (int i = 0; i < k; i++)
                s->score +=
                    weights[i] * sr_id_sampler_prob(&m[i], sr_id_sampler_rank_of(&m[i], s->row));
        }
    qsort(c, (size_t)n * k, sizeof *c, by_score);
    int64_t got = 0;
    for (int64_t i = 0; i < n * k && got < n; i++)
        if (i == 0 || c[i].row != c[i - 1].row) /* equal rows score equally: adjacent */
            out[got++] = c[i].row;
    free(c);
    free(m);
    return got;
}
