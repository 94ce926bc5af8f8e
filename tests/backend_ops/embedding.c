/* The embedding and DP-table ops of test_backend_ops (cases.h): forward
 * and backward with each fused optimizer over layouts that hold the hard
 * cases; the DP tables' accumulate and apply (init_uniform and fill:
 * emb_init.c).
 * Hard cases include hot rows: one row filling a batch of 10^6 ids, Zipf
 * ids, runs planted about sr_emb_run_split(max_dim), and one hot row index in two
 * tables; what a backward step writes is compared within step_tol. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "shardrec/half.h"
#include "shardrec/optim.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "data/synth_internal.h"
#include "cases.h"
#include "ops_check.h"

/* ---- embedding: forward and backward ------------------------------------------ */

#define MAX_T 6
#define MAX_F 32

/* How a spec draws the ids of a table of E rows. */
enum emb_ids {
    EMB_IDS_UNIFORM, /* uniform; each feature's first id and 3% of the rest are the last row */
    EMB_IDS_SAME,    /* every id is the table's last row */
    EMB_IDS_ZIPF,    /* Zipf(ZIPF_S) ranks, spread over the rows per feature (data/zipf.c) */
    EMB_IDS_HOT,     /* half the ids one hot row, the same row index in every table; rest uniform */
    EMB_IDS_RUNS,    /* runs planted about the split (plant_runs); the rest uniform on other rows */
};

#define ZIPF_S 1.2

/* A layout and batch shape; ids are drawn per run of the test. */
struct emb_spec {
    const char *name;
    int T;
    int64_t rows[MAX_T];
    int dim[MAX_T];
    int F;
    int ftab[MAX_F];
    int fmean[MAX_F];
    int B;
    int len_lo, len_hi; /* ids per bag (EMB_IDS_RUNS: at split 64; they grow with it) */
    int weighted;
    enum emb_ids ids;
};

/* Host data of one spec: the batch, initial tables and state, gradients. */
struct emb_data {
    const struct emb_spec *s;
    struct sr_emb_feature features[MAX_F];
    int out_dim, max_dim;
    int64_t n;
    int64_t *offsets, *values;
    float *weights; /* NULL unless weighted */
    int64_t feature_pos[MAX_F], table_pos[MAX_T + 1];
    float *weight[MAX_T]; /* (E, D) */
    float *state[MAX_T];  /* (2 E D): room for any optimizer's state, >= 0 */
    float *dpooled[2];    /* (B, out_dim) of two steps */
    int64_t longest_run;  /* most ids of one row of one table */
    int64_t equal_terms;  /* most ids of one row in one bag, 1 when weighted (step_tol) */
    double step_tol;      /* of what a backward step wrote (step_tol) */
    /* the run */
    enum sr_optim_kind kind;
    int backward;
    enum sr_dtype dtype; /* the tables' storage (16-bit: the weights narrowed to nearest) */
    int stochastic;      /* 16-bit updates rounded stochastically */
};

/* The rule and tolerance of a 16-bit table's weights, or of what reads them:
 * the same fp32 update narrows to the same bits (stochastic bits come from
 * the element, not the device), so only a row whose fp32 update may differ
 * in its last bits may land one 16-bit unit apart, per term read. The check's
 * error is max|diff| / max(1, max|ref|), and one unit of a value v is at most
 * 2^-7 |v| in bf16 (2^-10 in fp16), 2^-8 (2^-11) below 1: so 2^-7 (2^-10) a
 * term (2^-8 failed a bf16 weight on an H200: -27.25 against -27.375, one
 * unit, with max|ref| 29.8). Such rows are a row with more than one id in the
 * step, whose gradient a device may add in another order (even where the
 * fp32 sums agree within OPS_TOL, one bit of difference next to a 16-bit
 * rounding boundary flips it: seen on an H200 in a run of 201 ids of an fp16
 * table rounded to nearest), and row-wise Adagrad, whose Σ g² a device may
 * add in another order. */
static double tol16(const struct emb_data *d, int terms)
{
    if (d->longest_run <= 1 && d->kind != SR_OPTIM_ROWWISE_ADAGRAD)
        return OPS_TOL;
    return terms * (d->dtype == SR_DTYPE_BF16 ? 0x1p-7 : 0x1p-10) + d->step_tol;
}

/* Floats of a table's optimizer state, as the ops declare it (ops_embedding.h). */
static size_t state_floats(enum sr_optim_kind kind, int64_t rows, int dim)
{
    const struct sr_emb_table t = {.rows = rows, .dim = dim};
    return sr_emb_state_bytes(kind, &t) / sizeof(float);
}

/* Planted runs (EMB_IDS_RUNS): rows 0, 1, ... of every table get these many
 * ids, spread at random over the table's bags. Drawn ids use the other rows,
 * so in a table's ids sorted by row the planted runs come first, back to back
 * (s the split):
 *
 *   ids      s-1   s       s+1     2s+1    s/2+3   7s/2
 *   starts   0     s-1     2s-1    3s      5s+1    11s/2+4
 *
 * runs at, just over and twice over the split, starting on, just before and
 * just after a multiple of s, and a long one starting mid-way that crosses
 * 6s, 7s, 8s and 9s. */
#define RUNS_PLANTED 6
static int64_t runs_lengths(const struct emb_data *d, int64_t len[RUNS_PLANTED])
{
    const int64_t s = sr_emb_run_split(d->max_dim); /* the layout's, as the device takes it */
    len[0] = s - 1, len[1] = s, len[2] = s + 1, len[3] = 2 * s + 1, len[4] = s / 2 + 3;
    len[5] = 7 * s / 2;
    int64_t total = 0;
    for (int j = 0; j < RUNS_PLANTED; j++)
        total += len[j];
    return total;
}

/* Bags grow with the split under EMB_IDS_RUNS, so that the planted runs stay
 * a tenth to a quarter of a table's ids whatever SR_EMB_RUN_SPLIT says. */
static int64_t len_scale(const struct emb_data *d)
{
    const int64_t k = sr_emb_run_split(d->max_dim) / SR_EMB_RUN_SPLIT_DEFAULT;
    return d->s->ids == EMB_IDS_RUNS && k > 1 ? k : 1;
}

static void emb_offsets(struct emb_data *d, struct ops_rng *r)
{
    const struct emb_spec *s = d->s;
    const int64_t bags = (int64_t)s->F * s->B, k = len_scale(d);
    d->offsets = calloc((size_t)bags + 1, sizeof(int64_t));
    assert_non_null(d->offsets);
    for (int64_t b = 0; b < bags; b++)
        d->offsets[b + 1] =
            d->offsets[b] + k * (s->len_lo + ops_below(r, s->len_hi - s->len_lo + 1));
    d->n = d->offsets[bags];
}

/* One feature's id source. */
struct id_draw {
    enum emb_ids ids;
    int64_t E;
    int64_t hot; /* EMB_IDS_HOT */
    struct sr_id_sampler zipf;
};

static int64_t draw_id(const struct id_draw *g, struct ops_rng *r)
{
    switch (g->ids) {
    case EMB_IDS_SAME:
        return g->E - 1;
    case EMB_IDS_ZIPF:
        return sr_id_sampler_id(&g->zipf, sr_id_sampler_rank(&g->zipf, ops_uniform(r)));
    case EMB_IDS_HOT:
        return ops_uniform(r) < 0.5 ? g->hot : ops_below(r, g->E);
    case EMB_IDS_RUNS:
        return RUNS_PLANTED + ops_below(r, g->E - RUNS_PLANTED);
    default:
        return ops_uniform(r) < 0.03 ? g->E - 1 : ops_below(r, g->E);
    }
}

static void draw_feature(struct emb_data *d, int f, int64_t hot, struct ops_rng *r)
{
    const struct emb_spec *s = d->s;
    const int64_t lo = d->offsets[(int64_t)f * s->B], hi = d->offsets[(int64_t)(f + 1) * s->B];
    struct id_draw g = {.ids = s->ids, .E = s->rows[s->ftab[f]], .hot = hot};
    if (g.ids == EMB_IDS_ZIPF)
        sr_id_sampler_init(&g.zipf, g.E, ops_seed(), f, SR_ID_DIST_ZIPF, ZIPF_S);
    assert_true(g.ids != EMB_IDS_RUNS || g.E > RUNS_PLANTED);
    for (int64_t i = lo; i < hi; i++)
        d->values[i] = draw_id(&g, r);
    if (g.ids == EMB_IDS_UNIFORM && hi > lo)
        d->values[lo] = g.E - 1; /* every table's last row, at least once */
}

/* Positions in values of table t's ids; *n gets their count. */
static int64_t *table_slots(const struct emb_data *d, int t, int64_t *n)
{
    const struct emb_spec *s = d->s;
    int64_t *slot = calloc((size_t)d->n + 1, sizeof(int64_t));
    assert_non_null(slot);
    *n = 0;
    for (int f = 0; f < s->F; f++) {
        if (s->ftab[f] != t)
            continue;
        for (int64_t i = d->offsets[(int64_t)f * s->B]; i < d->offsets[(int64_t)(f + 1) * s->B];
             i++)
            slot[(*n)++] = i;
    }
    return slot;
}

/* Overwrite ids of table t at random positions with the planted runs. */
static void plant_runs(struct emb_data *d, int t, struct ops_rng *r)
{
    int64_t len[RUNS_PLANTED], n;
    const int64_t total = runs_lengths(d, len);
    int64_t *slot = table_slots(d, t, &n);
    if (n < total)
        fail_msg("%s: table %d has %lld ids, fewer than the %lld planted", d->s->name, t,
                 (long long)n, (long long)total);
    int64_t k = 0; /* slot[0, k) are taken: a partial Fisher-Yates shuffle */
    for (int j = 0; j < RUNS_PLANTED; j++)
        for (int64_t c = 0; c < len[j]; c++, k++) {
            const int64_t pick = k + ops_below(r, n - k), at = slot[pick];
            slot[pick] = slot[k];
            d->values[at] = j;
        }
    free(slot);
}

static void emb_ids(struct emb_data *d, struct ops_rng *r)
{
    const struct emb_spec *s = d->s;
    int64_t rows = s->rows[0];
    for (int t = 1; t < s->T; t++)
        rows = s->rows[t] < rows ? s->rows[t] : rows;
    const int64_t hot = ops_below(r, rows); /* EMB_IDS_HOT: a row index every table has */
    emb_offsets(d, r);
    d->values = calloc((size_t)d->n + 1, sizeof(int64_t));
    assert_non_null(d->values);
    for (int f = 0; f < s->F; f++)
        draw_feature(d, f, hot, r);
    for (int t = 0; s->ids == EMB_IDS_RUNS && t < s->T; t++)
        plant_runs(d, t, r);
    d->weights = s->weighted ? ops_floats((size_t)d->n) : NULL;
    if (d->weights)
        ops_fill(r, d->weights, (size_t)d->n, -1.0f, 2.0f);
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The most ids of one row in bag k; count (E) zero before and after. */
static int64_t bag_repeats(const struct emb_data *d, int64_t k, int64_t *count)
{
    int64_t most = 0;
    for (int64_t i = d->offsets[k]; i < d->offsets[k + 1]; i++)
        most = max64(most, ++count[d->values[i]]);
    for (int64_t i = d->offsets[k]; i < d->offsets[k + 1]; i++)
        count[d->values[i]] = 0;
    return most;
}

/* Raise d->longest_run and d->equal_terms to table t's. */
static void table_runs(struct emb_data *d, int t)
{
    const struct emb_spec *s = d->s;
    int64_t *run = calloc((size_t)s->rows[t], sizeof(int64_t));
    int64_t *bag = calloc((size_t)s->rows[t], sizeof(int64_t));
    assert_true(run && bag);
    for (int f = 0; f < s->F; f++) {
        if (s->ftab[f] != t)
            continue;
        for (int64_t k = (int64_t)f * s->B; k < (int64_t)(f + 1) * s->B; k++) {
            if (!d->weights)
                d->equal_terms = max64(d->equal_terms, bag_repeats(d, k, bag));
            for (int64_t i = d->offsets[k]; i < d->offsets[k + 1]; i++)
                d->longest_run = max64(d->longest_run, ++run[d->values[i]]);
        }
    }
    free(run), free(bag);
}

/* The tolerance of what a backward step writes (weights, state, and pooled
 * read from them). A row hit n times takes one gradient sum of n terms. The
 * CPU adds them in id order; a device may add a run of more than
 * sr_emb_run_split(max_dim) ids in pieces, then the pieces' sums (ops_embedding.h):
 * another rounding, more accurate than the CPU's, so the difference is about
 * the CPU's own rounding error. For terms that do not cancel (dpooled,
 * emb_data_init) that error grows as sqrt(n) 2^-24 relative to the sum. But
 * the r ids of one row in an unweighted bag are r equal terms in a row of the
 * run, which round alike while the sum keeps its exponent: their errors add,
 * r times one, rather than sqrt(r) times. So the bound is C sqrt(n r) 2^-24
 * (OPS_TOL while that is smaller), n the longest run and r the most equal
 * terms, both counted in the drawn ids. C = 8: with such a device emulated
 * on the CPU (pieces from the run's start, or cut at multiples of the split),
 * the worst of 20 seeds was 1.5 sqrt(n r) 2^-24, a fifth of the bound. */
static double step_tol(int64_t longest_run, int64_t equal_terms)
{
    return fmax(OPS_TOL, 8.0 * sqrt((double)longest_run * (double)equal_terms) * 0x1p-24);
}

static void emb_positions(struct emb_data *d)
{
    const struct emb_spec *s = d->s;
    /* where each feature's ids go in the table-grouped list (embed/ebc.c's compute_meta) */
    int64_t cursor[MAX_T];
    for (int f = 0; f < s->F; f++)
        d->table_pos[s->ftab[f] + 1] +=
            d->offsets[(int64_t)(f + 1) * s->B] - d->offsets[(int64_t)f * s->B];
    for (int t = 0; t < s->T; t++) {
        d->table_pos[t + 1] += d->table_pos[t];
        cursor[t] = d->table_pos[t];
    }
    for (int f = 0; f < s->F; f++) {
        d->feature_pos[f] = cursor[s->ftab[f]];
        cursor[s->ftab[f]] += d->offsets[(int64_t)(f + 1) * s->B] - d->offsets[(int64_t)f * s->B];
    }
}

static void emb_data_init(struct emb_data *d, const struct emb_spec *s)
{
    struct ops_rng r = ops_rng_of(s->name);
    memset(d, 0, sizeof *d);
    d->s = s;
    for (int f = 0; f < s->F; f++) {
        const int D = s->dim[s->ftab[f]];
        d->features[f] =
            (struct sr_emb_feature){.table = s->ftab[f], .col = d->out_dim, .mean = s->fmean[f]};
        d->out_dim += D;
        d->max_dim = D > d->max_dim ? D : d->max_dim;
    }
    emb_ids(d, &r);
    emb_positions(d);
    d->equal_terms = 1;
    for (int t = 0; t < s->T; t++)
        table_runs(d, t);
    d->step_tol = step_tol(d->longest_run, d->equal_terms);
    for (int t = 0; t < s->T; t++) {
        const size_t n = (size_t)s->rows[t] * s->dim[t];
        d->weight[t] = ops_floats(n);
        d->state[t] = ops_floats(2 * n);
        ops_fill(&r, d->weight[t], n, -0.5f, 0.5f);
        ops_fill(&r, d->state[t], 2 * n, 0.0f, 0.3f);
    }
    /* Skewed ids: dpooled in [-0.5, 1), so that a hot row's n terms do not
     * cancel and its gradient grows as n, its rounding as sqrt(n) (step_tol).
     * Terms of mean 0 could sum to about 0 in a column, and Adagrad and Adam,
     * which divide by the gradient's size, would then magnify the rounding.
     * The check stays sharp: one id lost or added moves its row by about 1/n
     * of its gradient, beyond step_tol in runs of up to a few thousand ids; a
     * lost piece of 64 ids shows in every hot case but the 10^6 one, and the
     * planted runs test the split's edges. */
    const float lo = s->ids == EMB_IDS_UNIFORM ? -1.0f : -0.5f;
    for (int i = 0; i < 2; i++) {
        d->dpooled[i] = ops_floats((size_t)s->B * d->out_dim);
        ops_fill(&r, d->dpooled[i], (size_t)s->B * d->out_dim, lo, 1.0f);
    }
}

static void emb_data_free(struct emb_data *d)
{
    free(d->offsets), free(d->values), free(d->weights);
    for (int t = 0; t < d->s->T; t++)
        free(d->weight[t]), free(d->state[t]);
    free(d->dpooled[0]), free(d->dpooled[1]);
}

/* The spec's tables on dev (weights, and state for kind), uploaded. */
static void emb_tables_on(struct ops_arena *a, const struct emb_data *d, enum sr_optim_kind kind,
                          struct sr_emb_table *tabs)
{
    for (int t = 0; t < d->s->T; t++) {
        const int64_t E = d->s->rows[t];
        const int D = d->s->dim[t];
        const size_t ns = state_floats(kind, E, D);
        void *w;
        if (d->dtype == SR_DTYPE_F32) {
            w = ops_upload(a, d->weight[t], (size_t)E * D * 4);
        } else {
            uint16_t *h = malloc(sizeof *h * ((size_t)E * D + 1));
            for (int64_t i = 0; i < E * D; i++)
                h[i] = d->dtype == SR_DTYPE_BF16 ? sr_fp32_to_bf16(d->weight[t][i])
                                                 : sr_fp32_to_fp16(d->weight[t][i]);
            w = ops_upload(a, h, (size_t)E * D * 2);
            sr_dev_sync(a->dev, NULL); /* a deferred device copies when waited for */
            free(h);
        }
        tabs[t] = (struct sr_emb_table){.weight = w,
                                        .state = ns ? ops_upload(a, d->state[t], ns * 4) : NULL,
                                        .rows = E,
                                        .dim = D,
                                        .dtype = d->dtype,
                                        .stream = 1000 + (uint64_t)t};
    }
}

static struct sr_emb_batch emb_batch_on(struct ops_arena *a, const struct emb_data *d)
{
    const int64_t bags = (int64_t)d->s->F * d->s->B;
    return (struct sr_emb_batch){.batch = d->s->B,
                                 .num_values = d->n,
                                 .offsets = ops_upload(a, d->offsets, (size_t)(bags + 1) * 8),
                                 .values = ops_upload(a, d->values, (size_t)d->n * 8),
                                 .weights = d->weights ? ops_upload(a, d->weights, (size_t)d->n * 4)
                                                       : NULL,
                                 .feature_pos = d->feature_pos,
                                 .table_pos = d->table_pos};
}

static struct sr_emb_layout emb_layout_of(const struct emb_data *d, const struct sr_emb_table *tabs,
                                          enum sr_optim_kind kind)
{
    return (struct sr_emb_layout){.num_tables = d->s->T,
                                  .tables = tabs,
                                  .num_features = d->s->F,
                                  .features = d->features,
                                  .out_dim = d->out_dim,
                                  .max_dim = d->max_dim,
                                  .max_batch = d->s->B,
                                  .max_values = d->n ? d->n : 16,
                                  .optim = kind,
                                  .stochastic = d->stochastic,
                                  .seed = 4242};
}

/* forward (keep_ids 0 and 1); with backward: two steps of forward + backward,
 * the first with host lr and step, the second with device ones (the host
 * values then are NaN and -1, which the op must not use) and its ids grouped
 * ahead by group_ids. */
static void run_emb(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct emb_data *d = ctx;
    const size_t pooled_bytes = (size_t)d->s->B * d->out_dim * 4;
    struct ops_arena a;
    struct sr_emb_table tabs[MAX_T];
    ops_arena_init(&a, dev);
    emb_tables_on(&a, d, d->kind, tabs);
    const struct sr_emb_batch batch = emb_batch_on(&a, d);
    const struct sr_emb_layout l = emb_layout_of(d, tabs, d->kind);
    void *ws = ops_alloc(&a, sr_op_emb_workspace_bytes(dev, &l));
    sr_op_emb_workspace_init(dev, &l, ws);

    float *pooled = ops_poisoned(&a, pooled_bytes);
    sr_op_emb_forward(dev, &l, &batch, 0, pooled, ws, NULL);
    ops_take(c, which, "pooled (keep_ids 0)", OPS_F32, OPS_TOL, dev, pooled, pooled_bytes);
    pooled = ops_poisoned(&a, pooled_bytes);
    sr_op_emb_forward(dev, &l, &batch, 1, pooled, ws, NULL);
    ops_take(c, which, "pooled", OPS_F32, OPS_TOL, dev, pooled, pooled_bytes);
    if (d->backward) {
        /* the batch as the EBCs give backward: the forward's positions, its
         * weights only as a flag (the workspace holds the ids and scales) */
        const struct sr_emb_batch kept = {.batch = batch.batch,
                                          .num_values = batch.num_values,
                                          .feature_pos = batch.feature_pos,
                                          .table_pos = batch.table_pos,
                                          .weighted = batch.weights != NULL};
        const struct sr_optim_config cfg = sr_optim_config_default(d->kind);
        const struct sr_emb_update u1 = {.optim = cfg, .lr = 0.05f, .step = 1};
        sr_op_emb_backward(dev, &l, &kept, ops_upload(&a, d->dpooled[0], pooled_bytes), &u1, ws,
                           NULL);
        pooled = ops_poisoned(&a, pooled_bytes);
        sr_op_emb_forward(dev, &l, &batch, 1, pooled, ws, NULL);
        /* reads the rows step 1 wrote, so it carries their tolerance */
        ops_take(c, which, "pooled after step 1", OPS_F32,
                 d->dtype == SR_DTYPE_F32 ? d->step_tol : tol16(d, d->s->len_hi), dev, pooled,
                 pooled_bytes);
        const float lr = 0.03f;
        const int64_t step = 2;
        /* step 2 groups its ids ahead (group_ids), as a step that sorts beside
         * the dense work does */
        const struct sr_emb_update u2 = {.optim = cfg,
                                         .lr = NAN,
                                         .step = -1,
                                         .lr_dev = ops_upload(&a, &lr, sizeof lr),
                                         .step_dev = ops_upload(&a, &step, sizeof step),
                                         .ids_grouped = 1};
        sr_op_emb_group_ids(dev, &l, &kept, ws, NULL);
        sr_op_emb_backward(dev, &l, &kept, ops_upload(&a, d->dpooled[1], pooled_bytes), &u2, ws,
                           NULL);
        for (int t = 0; t < d->s->T; t++) {
            char name[32];
            snprintf(name, sizeof name, "t%d weight", t);
            if (d->dtype == SR_DTYPE_F32)
                ops_take(c, which, name, OPS_F32, d->step_tol, dev, tabs[t].weight,
                         (size_t)tabs[t].rows * tabs[t].dim * 4);
            else
                ops_take(c, which, name, d->dtype == SR_DTYPE_BF16 ? OPS_BF16 : OPS_F16,
                         tol16(d, 1), dev, tabs[t].weight, (size_t)tabs[t].rows * tabs[t].dim * 2);
            const size_t ns = state_floats(d->kind, tabs[t].rows, tabs[t].dim);
            snprintf(name, sizeof name, "t%d state", t);
            if (ns)
                ops_take(c, which, name, OPS_F32, d->step_tol, dev, tabs[t].state, ns * 4);
        }
    }
    ops_arena_free(&a);
}

/* name; tables: rows, dims; features: table, mean; batch; ids per bag; weighted; ids */
#define K26                                                                                        \
    {                                                                                              \
        0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1               \
    }
/* clang-format off */
static const struct emb_spec emb_specs[] = {
    {.name = "mixed dims 1,4,16,128,130; sum+mean",
     .T = 5, .rows = {1, 7, 1000, 5000, 333}, .dim = {1, 4, 16, 128, 130},
     .F = 7, .ftab = {0, 1, 2, 3, 4, 2, 3}, .fmean = {0, 0, 1, 0, 1, 0, 0},
     .B = 64, .len_lo = 0, .len_hi = 6},
    {.name = "mixed dims, weighted",
     .T = 5, .rows = {1, 7, 1000, 5000, 333}, .dim = {1, 4, 16, 128, 130},
     .F = 7, .ftab = {0, 1, 2, 3, 4, 2, 3}, .fmean = {0, 0, 1, 0, 1, 0, 0},
     .B = 64, .len_lo = 0, .len_hi = 6, .weighted = 1},
    {.name = "D 1, 20 ids", .T = 1, .rows = {1000}, .dim = {1},
     .F = 2, .ftab = {0, 0}, .fmean = {0, 1}, .B = 128, .len_lo = 0, .len_hi = 20},
    {.name = "D 4, 20 ids", .T = 1, .rows = {1000}, .dim = {4},
     .F = 2, .ftab = {0, 0}, .fmean = {0, 1}, .B = 128, .len_lo = 0, .len_hi = 20},
    {.name = "D 16, 20 ids", .T = 1, .rows = {1000}, .dim = {16},
     .F = 2, .ftab = {0, 0}, .fmean = {0, 1}, .B = 128, .len_lo = 0, .len_hi = 20},
    {.name = "D 128, 20 ids", .T = 1, .rows = {1000}, .dim = {128},
     .F = 2, .ftab = {0, 0}, .fmean = {0, 1}, .B = 128, .len_lo = 0, .len_hi = 20},
    {.name = "D 130, 20 ids", .T = 1, .rows = {1000}, .dim = {130},
     .F = 2, .ftab = {0, 0}, .fmean = {0, 1}, .B = 128, .len_lo = 0, .len_hi = 20},
    {.name = "every id the same, weighted", .T = 2, .rows = {100, 50}, .dim = {16, 130},
     .F = 3, .ftab = {0, 0, 1}, .B = 256, .len_lo = 20, .len_hi = 20, .weighted = 1,
     .ids = EMB_IDS_SAME},
    {.name = "every id the same, mean", .T = 2, .rows = {100, 50}, .dim = {16, 130},
     .F = 3, .ftab = {0, 0, 1}, .fmean = {1, 0, 1}, .B = 256, .len_lo = 20, .len_hi = 20,
     .ids = EMB_IDS_SAME},
    {.name = "1-row tables", .T = 2, .rows = {1, 1}, .dim = {4, 128},
     .F = 3, .ftab = {0, 1, 1}, .fmean = {0, 1, 0}, .B = 32, .len_lo = 0, .len_hi = 5},
    {.name = "empty bags only", .T = 2, .rows = {10, 1000}, .dim = {16, 4},
     .F = 2, .ftab = {0, 1}, .fmean = {0, 1}, .B = 16, .len_lo = 0, .len_hi = 0},
    {.name = "26 features D 16, 1 id (workload K)", .T = 3, .rows = {100000, 20000, 77},
     .dim = {16, 16, 16}, .F = 26, .ftab = K26, .B = 512, .len_lo = 1, .len_hi = 1},
    {.name = "short bags, D 4 + D 16, 0-3 ids, weighted, sum+mean", .T = 2,
     .rows = {5000, 300}, .dim = {4, 16}, .F = 5, .ftab = {0, 1, 1, 0, 1},
     .fmean = {0, 1, 0, 1, 0}, .B = 999, .len_lo = 0, .len_hi = 3, .weighted = 1},
    {.name = "short bags, D 3 + D 7 (scalar lanes), 0-2 ids, sum+mean", .T = 2,
     .rows = {700, 90}, .dim = {3, 7}, .F = 3, .ftab = {0, 1, 0}, .fmean = {1, 0, 0},
     .B = 333, .len_lo = 0, .len_hi = 2},
    {.name = "large batch D 128, 1-20 ids, weighted", .T = 2, .rows = {20000, 77},
     .dim = {128, 4}, .F = 3, .ftab = {0, 1, 0}, .B = 512, .len_lo = 1, .len_hi = 20,
     .weighted = 1},
    /* hot rows: a device may sum long runs in pieces (step_tol) */
    {.name = "hot: one row fills the batch, D 4, weighted", .T = 1, .rows = {1000}, .dim = {4},
     .F = 1, .ftab = {0}, .B = 50000, .len_lo = 20, .len_hi = 20, .weighted = 1,
     .ids = EMB_IDS_SAME},
    {.name = "hot: zipf 1.2, D 128 + D 16, sum+mean", .T = 2, .rows = {2000, 1000},
     .dim = {128, 16}, .F = 4, .ftab = {0, 1, 0, 1}, .fmean = {0, 0, 1, 1}, .B = 256,
     .len_lo = 20, .len_hi = 20, .ids = EMB_IDS_ZIPF},
    {.name = "hot: zipf 1.2, D 128 + D 16, weighted+mean", .T = 2, .rows = {2000, 1000},
     .dim = {128, 16}, .F = 4, .ftab = {0, 1, 0, 1}, .fmean = {1, 0, 0, 1}, .B = 256,
     .len_lo = 20, .len_hi = 20, .weighted = 1, .ids = EMB_IDS_ZIPF},
    {.name = "hot: zipf 1.2, 1 id a bag, D 16 + D 128", .T = 2, .rows = {5000, 3000},
     .dim = {16, 128}, .F = 4, .ftab = {0, 1, 0, 1}, .B = 4096, .len_lo = 1, .len_hi = 1,
     .ids = EMB_IDS_ZIPF},
    {.name = "hot: runs about the split, D 16 + D 128", .T = 2, .rows = {1000, 300},
     .dim = {16, 128}, .F = 3, .ftab = {0, 0, 1}, .fmean = {0, 1, 0}, .B = 256, .len_lo = 0,
     .len_hi = 20, .weighted = 1, .ids = EMB_IDS_RUNS},
    {.name = "hot: runs about the narrow rows' split, D 16 + D 8", .T = 2, .rows = {1000, 300},
     .dim = {16, 8}, .F = 3, .ftab = {0, 1, 0}, .fmean = {0, 1, 0}, .B = 256, .len_lo = 0,
     .len_hi = 20, .weighted = 1, .ids = EMB_IDS_RUNS},
    {.name = "hot: one row in two tables, D 16", .T = 2, .rows = {1000, 777}, .dim = {16, 16},
     .F = 3, .ftab = {0, 1, 1}, .fmean = {0, 0, 1}, .B = 512, .len_lo = 10, .len_hi = 30,
     .ids = EMB_IDS_HOT},
    {.name = "hot: one row in two tables, D 16 + D 130", .T = 2, .rows = {1000, 777},
     .dim = {16, 130}, .F = 3, .ftab = {0, 1, 1}, .fmean = {0, 0, 1}, .B = 512, .len_lo = 10,
     .len_hi = 30, .weighted = 1, .ids = EMB_IDS_HOT},
};
/* clang-format on */

static const enum sr_optim_kind emb_kinds[] = {SR_OPTIM_SGD, SR_OPTIM_ADAGRAD,
                                               SR_OPTIM_ROWWISE_ADAGRAD, SR_OPTIM_ADAM};

/* The spec's name, its ids and longest run (and the split the runs were
 * planted about). */
static void emb_case_name(const struct emb_data *d, char *name, size_t len)
{
    char split[24] = "";
    if (d->s->ids == EMB_IDS_RUNS)
        snprintf(split, sizeof split, "split %d, ", sr_emb_run_split(d->max_dim));
    snprintf(name, len, "%s (%sN %lld, run %lld)", d->s->name, split, (long long)d->n,
             (long long)d->longest_run);
}

void test_embedding(void **state)
{
    for (size_t i = 0; i < sizeof emb_specs / sizeof emb_specs[0]; i++) {
        struct emb_data d;
        char name[128];
        emb_data_init(&d, &emb_specs[i]);
        emb_case_name(&d, name, sizeof name);
        d.kind = SR_OPTIM_SGD;
        ops_check("emb.forward", name, run_emb, &d);
        d.backward = 1;
        for (size_t k = 0; k < sizeof emb_kinds / sizeof emb_kinds[0]; k++) {
            char op[48];
            d.kind = emb_kinds[k];
            snprintf(op, sizeof op, "emb.backward.%s", sr_optim_kind_name(d.kind));
            ops_check(op, name, run_emb, &d);
        }
        /* 16-bit tables: bf16 with stochastic rounding, fp16 to nearest; SGD and
         * row-wise Adagrad (the elementwise optimizers share their stores) */
        for (int v = 0; v < 2; v++) {
            d.dtype = v ? SR_DTYPE_F16 : SR_DTYPE_BF16;
            d.stochastic = !v;
            d.backward = 0;
            d.kind = SR_OPTIM_SGD;
            char op[48], name16[160];
            snprintf(name16, sizeof name16, "%s, %s", name,
                     v ? "fp16 table, nearest" : "bf16 table, stochastic");
            ops_check("emb.forward", name16, run_emb, &d);
            d.backward = 1;
            for (int k = 0; k < 2; k++) {
                d.kind = k ? SR_OPTIM_ROWWISE_ADAGRAD : SR_OPTIM_SGD;
                snprintf(op, sizeof op, "emb.backward.%s", sr_optim_kind_name(d.kind));
                ops_check(op, name16, run_emb, &d);
            }
        }
        d.dtype = SR_DTYPE_F32;
        d.stochastic = 0;
        emb_data_free(&d);
    }
    ops_fail_if_any("embedding");
}

/* ---- emb_dp: accumulate, apply -------------------------------------------------- */

static void run_dp_accumulate(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct emb_data *d = ctx;
    struct ops_arena a;
    struct sr_emb_table tabs[MAX_T];
    float *grad[MAX_T], *counts[MAX_T];
    ops_arena_init(&a, dev);
    emb_tables_on(&a, d, SR_OPTIM_SGD, tabs);
    const struct sr_emb_batch batch = emb_batch_on(&a, d);
    const struct sr_emb_layout l = emb_layout_of(d, tabs, SR_OPTIM_SGD);
    for (int t = 0; t < d->s->T; t++) { /* zeroed by the caller, as the contract says */
        grad[t] = ops_alloc(&a, (size_t)tabs[t].rows * tabs[t].dim * 4);
        counts[t] = ops_alloc(&a, (size_t)tabs[t].rows * 4);
        sr_dev_memset(dev, grad[t], 0, (size_t)tabs[t].rows * tabs[t].dim * 4, NULL);
        sr_dev_memset(dev, counts[t], 0, (size_t)tabs[t].rows * 4, NULL);
    }
    const float *dpooled = ops_upload(&a, d->dpooled[0], (size_t)d->s->B * d->out_dim * 4);
    sr_op_emb_dp_accumulate(dev, &l, &batch, dpooled, grad, counts, NULL);
    for (int t = 0; t < d->s->T; t++) {
        char name[32];
        snprintf(name, sizeof name, "t%d grad", t);
        ops_take(c, which, name, OPS_F32, OPS_TOL, dev, grad[t],
                 (size_t)tabs[t].rows * tabs[t].dim * 4);
        snprintf(name, sizeof name, "t%d counts", t);
        ops_take(c, which, name, OPS_EXACT, 0, dev, counts[t], (size_t)tabs[t].rows * 4);
    }
    ops_arena_free(&a);
}

struct dp_apply_ctx {
    enum sr_optim_kind kind;
    int64_t rows;
    int dim;
    int device_lr;
    float *weight, *state, *grad, *counts;
};

static void run_dp_apply(struct sr_device *dev, void *ctx, struct ops_case *c, int which)
{
    const struct dp_apply_ctx *x = ctx;
    const size_t n = (size_t)x->rows * x->dim, ns = state_floats(x->kind, x->rows, x->dim);
    const float lr = 0.07f;
    const int64_t step = 3;
    struct ops_arena a;
    ops_arena_init(&a, dev);
    const struct sr_emb_table tab = {.weight = ops_upload(&a, x->weight, n * 4),
                                     .state = ns ? ops_upload(&a, x->state, ns * 4) : NULL,
                                     .rows = x->rows,
                                     .dim = x->dim};
    struct sr_emb_update u = {.optim = sr_optim_config_default(x->kind), .lr = lr, .step = step};
    if (x->device_lr) {
        u.lr = NAN, u.step = -1;
        u.lr_dev = ops_upload(&a, &lr, sizeof lr);
        u.step_dev = ops_upload(&a, &step, sizeof step);
    }
    const float *grad = ops_upload(&a, x->grad, n * 4);
    const float *counts = ops_upload(&a, x->counts, (size_t)x->rows * 4);
    sr_op_emb_dp_apply(dev, &tab, grad, counts, &u, NULL);
    ops_take(c, which, "weight", OPS_F32, OPS_TOL, dev, tab.weight, n * 4);
    if (ns)
        ops_take(c, which, "state", OPS_F32, OPS_TOL, dev, tab.state, ns * 4);
    ops_arena_free(&a);
}

static void dp_apply_cases(void)
{
    static const int64_t rows[] = {1, 1000, 333};
    static const int dims[] = {1, 16, 130};
    struct ops_rng r = ops_rng_of("dp_apply");
    char op[48], name[96];
    for (size_t i = 0; i < 3; i++)
        for (size_t k = 0; k < sizeof emb_kinds / sizeof emb_kinds[0]; k++) {
            struct dp_apply_ctx x = {.kind = emb_kinds[k],
                                     .rows = rows[i],
                                     .dim = dims[i],
                                     .device_lr = (int)((i + k) % 2)};
            const size_t n = (size_t)x.rows * x.dim;
            x.weight = ops_floats(n), x.state = ops_floats(2 * n), x.grad = ops_floats(n);
            x.counts = ops_floats((size_t)x.rows);
            ops_fill(&r, x.weight, n, -0.5f, 0.5f);
            ops_fill(&r, x.state, 2 * n, 0.0f, 0.3f);
            ops_fill(&r, x.grad, n, -1.0f, 1.0f);
            for (int64_t j = 0; j < x.rows; j++) /* about half the rows untouched */
                x.counts[j] = j == x.rows - 1 ? 2.0f : (float)ops_below(&r, 2) * (1 + j % 3);
            snprintf(op, sizeof op, "emb_dp.apply.%s", sr_optim_kind_name(x.kind));
            snprintf(name, sizeof name, "rows %lld D %d %s lr", (long long)x.rows, x.dim,
                     x.device_lr ? "device" : "host");
            ops_check(op, name, run_dp_apply, &x);
            free(x.weight), free(x.state), free(x.grad), free(x.counts);
        }
}

void test_embedding_dp(void **state)
{
    for (size_t i = 0; i < sizeof emb_specs / sizeof emb_specs[0]; i++) {
        struct emb_data d;
        char name[128];
        emb_data_init(&d, &emb_specs[i]);
        emb_case_name(&d, name, sizeof name);
        ops_check("emb_dp.accumulate", name, run_dp_accumulate, &d);
        emb_data_free(&d);
    }
    dp_apply_cases();
    ops_fail_if_any("emb_dp");
}
