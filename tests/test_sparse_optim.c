/*
 * Fused sparse optimizers of the EBC against updates computed here in float64
 * with the formulas of optim.h, over 3 steps on one table (E = 6, D = 3,
 * B = 3, two features sharing the table):
 *
 *   step 1   a: [1 1] [3]  []     b: [5] [] []     rows 1 (x2) 3 5
 *   step 2   a: [3]   [1]  [4]    b: []  [] []     rows 3 1 4
 *   step 3   a: [1]   []   [1 3]  b: []  [] [1]    rows 1 (x3) 3
 *
 * Rows 0 and 2 are never touched: weights and state stay bit-identical. Row 4
 * is touched at step 2 only and row 5 at step 1 only: Adam must leave their
 * moments alone afterwards (touched rows only, as SparseAdam). Also: no
 * allocation through sr_malloc in forward + backward.
 *
 * The float64 model takes its constants (eps, betas, initial accumulator) from
 * the values written down below from the PyTorch and FBGEMM documentation,
 * never from sr_optim_config_default: a changed default in the code fails here.
 * The default-constant runs are repeated with gradients of the size of eps,
 * where eps and the initial accumulator move the update by O(1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "helpers/host_view.h"
#include "shardrec/alloc.h"
#include "shardrec/ebc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"

#define E     6
#define D     3
#define B     3
#define F     2
#define STEPS 3

/* Written down independently of the code under test (DESIGN.md's numerical
 * contract, which follows these documents):
 *   torch.optim.Adagrad            lr_decay 0, eps 1e-10, initial_accumulator_value 0
 *   torch.optim.Adam / SparseAdam  betas (0.9, 0.999), eps 1e-8
 *   FBGEMM EXACT_ROWWISE_ADAGRAD   eps 1e-8 (SplitTableBatchedEmbeddingBagsCodegen's
 *                                  default), momentum (the row accumulator) from 0 */
#define DOC_ADAGRAD_EPS                 1e-10
#define DOC_ADAGRAD_INITIAL_ACCUMULATOR 0.0
#define DOC_ROWWISE_ADAGRAD_EPS         1e-8
#define DOC_ROWWISE_ADAGRAD_INITIAL     0.0
#define DOC_ADAM_BETA1                  0.9
#define DOC_ADAM_BETA2                  0.999
#define DOC_ADAM_EPS                    1e-8

/* The reference model's constants for one optimizer kind. */
struct doc_hparams {
    enum sr_optim_kind kind;
    double eps, beta1, beta2, s0;
};

static struct doc_hparams documented(enum sr_optim_kind kind)
{
    struct doc_hparams h = {.kind = kind};
    switch (kind) {
    case SR_OPTIM_SGD:
        break;
    case SR_OPTIM_ADAGRAD:
        h.eps = DOC_ADAGRAD_EPS;
        h.s0 = DOC_ADAGRAD_INITIAL_ACCUMULATOR;
        break;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        h.eps = DOC_ROWWISE_ADAGRAD_EPS;
        h.s0 = DOC_ROWWISE_ADAGRAD_INITIAL;
        break;
    case SR_OPTIM_ADAM:
        h.eps = DOC_ADAM_EPS;
        h.beta1 = DOC_ADAM_BETA1;
        h.beta2 = DOC_ADAM_BETA2;
        break;
    }
    return h;
}

struct table_cfg {
    struct sr_table_config table;
    char names[F][SR_NAME_MAX];
    int feature_table[F];
    struct sr_ebc_config cfg;
};

/* The tests read results on the host: a wait after each call whose outputs
 * they read (the deferred CPU device, SR_CPU_DEFERRED=1, proves it). */
static void host_wait(void)
{
    sr_dev_sync(sr_device_cpu(), NULL);
}

static void one_table(struct table_cfg *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->table.name, "emb");
    c->table.num_embeddings = E;
    c->table.embedding_dim = D;
    strcpy(c->names[0], "a");
    strcpy(c->names[1], "b");
    c->cfg = (struct sr_ebc_config){.num_tables = 1,
                                    .tables = &c->table,
                                    .num_features = F,
                                    .feature_names = c->names,
                                    .feature_table = c->feature_table};
}

/* The batches of the file comment. */
static const int32_t step_lengths[STEPS][F * B] = {
    {2, 1, 0, 1, 0, 0}, {1, 1, 1, 0, 0, 0}, {1, 0, 2, 0, 0, 1}};
static const int64_t step_values[STEPS][5] = {{1, 1, 3, 5}, {3, 1, 4}, {1, 1, 3, 1}};

struct step_kjt {
    int32_t lengths[F * B];
    int64_t offsets[F * B + 1];
    int64_t values[5];
    struct sr_kjt kjt;
};

static void make_step(struct step_kjt *k, int step)
{
    memcpy(k->lengths, step_lengths[step], sizeof k->lengths);
    memcpy(k->values, step_values[step], sizeof k->values);
    int64_t n = 0;
    for (int i = 0; i < F * B; i++)
        n += k->lengths[i];
    k->kjt = (struct sr_kjt){.num_keys = F,
                             .stride = B,
                             .lengths = k->lengths,
                             .offsets = k->offsets,
                             .values = k->values,
                             .num_values = n};
    assert_int_equal(sr_kjt_compute_offsets(&k->kjt), SR_OK);
}

/* Pooled gradients in (-scale, scale), the same floats for the EBC and the model. */
static float dpooled_of(int step, int b, int col, double scale)
{
    return (float)((sr_rng_uniform(99, (uint64_t)step, (uint64_t)(b * F * D + col)) * 2.0 - 1.0) *
                   scale);
}

/* The float64 model: weights, state, and which rows a step touched. */
struct ref {
    struct doc_hparams o;
    double w[E * D];
    double s[2 * E * D]; /* adagrad (E, D); rowwise (E); adam m then v */
};

/* Row gradients of a step, merged over duplicates and both features. */
static void ref_grads(int step, double scale, double g[E * D], int touched[E])
{
    struct step_kjt k;
    make_step(&k, step);
    memset(g, 0, sizeof(double) * E * D);
    memset(touched, 0, sizeof(int) * E);
    for (int f = 0; f < F; f++)
        for (int b = 0; b < B; b++)
            for (int64_t i = sr_kjt_bag_begin(&k.kjt, f, b); i < sr_kjt_bag_end(&k.kjt, f, b);
                 i++) {
                int64_t r = k.values[i];
                touched[r] = 1;
                for (int c = 0; c < D; c++)
                    g[r * D + c] += dpooled_of(step, b, f * D + c, scale);
            }
}

static void ref_row(struct ref *x, int r, const double *g, double lr, int t)
{
    const struct doc_hparams *o = &x->o;
    double *w = x->w + r * D, sq = 0.0;
    for (int c = 0; c < D; c++) {
        double *s = x->s + r * D + c, *v = x->s + E * D + r * D + c;
        switch (o->kind) {
        case SR_OPTIM_SGD:
            w[c] -= lr * g[c];
            break;
        case SR_OPTIM_ADAGRAD:
            *s += g[c] * g[c];
            w[c] -= lr * g[c] / (sqrt(*s) + o->eps);
            break;
        case SR_OPTIM_ROWWISE_ADAGRAD:
            sq += g[c] * g[c];
            break;
        case SR_OPTIM_ADAM:
            *s = o->beta1 * *s + (1 - o->beta1) * g[c];
            *v = o->beta2 * *v + (1 - o->beta2) * g[c] * g[c];
            w[c] -=
                lr * (*s / (1 - pow(o->beta1, t))) / (sqrt(*v / (1 - pow(o->beta2, t))) + o->eps);
            break;
        }
    }
    if (o->kind == SR_OPTIM_ROWWISE_ADAGRAD) {
        x->s[r] += sq / D;
        for (int c = 0; c < D; c++)
            w[c] -= lr * g[c] / (sqrt(x->s[r]) + o->eps);
    }
}

static int state_len(enum sr_optim_kind kind)
{
    int per_row = 0, per_elem = sr_optim_state_per_element(kind, &per_row);
    return per_row ? E : per_elem * E * D;
}

static void assert_near(double got, double want, const char *what, int step, int i)
{
    if (!(fabs(got - want) <= 2e-5 * (1.0 + fabs(want))))
        fail_msg("step %d %s[%d]: got %.9g, want %.9g", step, what, i, got, want);
}

/* Run 3 steps of `o` on the EBC and of `hp` on the float64 model side by
 * side, pooled gradients in (-scale, scale). */
static void run_optimizer(struct sr_optim_config o, struct doc_hparams hp, double lr, double scale)
{
    assert_int_equal(o.kind, hp.kind);
    struct table_cfg c;
    one_table(&c);
    struct sr_ebc *ebc = NULL;
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, &o, B, 8, 7), SR_OK);
    const int ns = state_len(o.kind);
    struct ref x = {.o = hp};
    float *wd = sr_ebc_weights(ebc, 0), *sd = sr_ebc_optim_state(ebc, 0); /* device */
    const float *w = HV(wd), *s = HV(sd); /* the host's views, taken after each step */
    float w0[E * D], s_prev[2 * E * D], w_prev[E * D];
    memcpy(w0, w, sizeof w0);
    for (int i = 0; i < E * D; i++)
        x.w[i] = w[i];
    for (int i = 0; i < ns; i++) {
        x.s[i] = s[i];
        assert_true(s[i] == (float)hp.s0); /* Adam's moments: hp.s0 is 0 */
    }

    for (int step = 0; step < STEPS; step++) {
        struct step_kjt k;
        float pooled[B * F * D], dpooled[B * F * D];
        double g[E * D];
        int touched[E];
        make_step(&k, step);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < F * D; j++)
                dpooled[b * F * D + j] = dpooled_of(step, b, j, scale);
        memcpy(w_prev, w, sizeof w_prev);
        if (ns)
            memcpy(s_prev, s, sizeof(float) * (size_t)ns);

        assert_int_equal(sr_ebc_forward(ebc, &k.kjt, pooled, NULL), SR_OK);
        host_wait();
        sr_ebc_backward(ebc, dpooled, (float)lr, step + 1, NULL);
        host_wait();
        w = HV(wd), s = HV(sd);
        ref_grads(step, scale, g, touched);
        for (int r = 0; r < E; r++)
            if (touched[r])
                ref_row(&x, r, g + r * D, lr, step + 1);

        for (int r = 0; r < E; r++) {
            if (!touched[r]) { /* untouched this step: weights and state as they were */
                assert_memory_equal(w + r * D, w_prev + r * D, sizeof(float) * D);
                for (int i = 0; i < ns; i++)
                    if (ns == E ? i == r : (i % (E * D)) / D == r)
                        assert_true(s[i] == s_prev[i]);
            }
            for (int cc = 0; cc < D; cc++)
                assert_near(w[r * D + cc], x.w[r * D + cc], "w", step + 1, r * D + cc);
        }
        for (int i = 0; i < ns; i++)
            assert_near(s[i], x.s[i], "state", step + 1, i);
    }
    /* never touched: bit-identical to the initial weights */
    assert_memory_equal(w + 0 * D, w0 + 0 * D, sizeof(float) * D);
    assert_memory_equal(w + 2 * D, w0 + 2 * D, sizeof(float) * D);
    assert_true(memcmp(w + 1 * D, w0 + 1 * D, sizeof(float) * D) != 0);
    sr_ebc_free(ebc);
}

/* The code's defaults for `kind` against the documented constants, with
 * gradients of order 1 and of the order of eps. */
static void run_default(enum sr_optim_kind kind, double lr)
{
    struct doc_hparams hp = documented(kind);
    run_optimizer(sr_optim_config_default(kind), hp, lr, 1.0);
    if (kind != SR_OPTIM_SGD)
        run_optimizer(sr_optim_config_default(kind), hp, lr, hp.eps);
}

/* The defaults equal the documented values (float literals, as stored). */
static void test_defaults_are_documented(void **state)
{
    struct sr_optim_config c = sr_optim_config_default(SR_OPTIM_ADAGRAD);
    assert_true(c.eps == (float)1e-10 && c.initial_accumulator == 0.0f);
    c = sr_optim_config_default(SR_OPTIM_ROWWISE_ADAGRAD);
    assert_true(c.eps == (float)1e-8 && c.initial_accumulator == 0.0f);
    c = sr_optim_config_default(SR_OPTIM_ADAM);
    assert_true(c.eps == (float)1e-8 && c.beta1 == (float)0.9 && c.beta2 == (float)0.999);
}

/* With gradients of the size of eps the update moves by O(1) with eps: the
 * documented eps gives w -= lr * g / (|g| + eps) at step 1 from s = 0, about
 * lr/2 for |g| = eps, and lr/100 if eps were 100 times larger. Checked
 * here by hand on one element so a wrong eps or accumulator cannot hide in
 * the tolerance. */
static void test_eps_moves_first_update(void **state)
{
    const enum sr_optim_kind kinds[] = {SR_OPTIM_ADAGRAD, SR_OPTIM_ROWWISE_ADAGRAD, SR_OPTIM_ADAM};
    for (int k = 0; k < 3; k++) {
        struct table_cfg c;
        one_table(&c);
        struct sr_ebc *ebc = NULL;
        struct sr_optim_config o = sr_optim_config_default(kinds[k]);
        double eps = documented(kinds[k]).eps, lr = 0.5;
        assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, &o, B, 8, 7), SR_OK);
        float *wd = sr_ebc_weights(ebc, 0), w0[E * D], pooled[B * F * D], dpooled[B * F * D];
        const float *w = HV(wd);
        memcpy(w0, w, sizeof w0);
        for (int i = 0; i < B * F * D; i++)
            dpooled[i] = (float)eps; /* every g of row 5 (bag (b, 0), once) is eps */
        struct step_kjt kk;
        make_step(&kk, 0);
        assert_int_equal(sr_ebc_forward(ebc, &kk.kjt, pooled, NULL), SR_OK);
        host_wait();
        sr_ebc_backward(ebc, dpooled, (float)lr, 1, NULL);
        host_wait();
        w = HV(wd);
        /* adagrad: s = g^2; rowwise: s_r = mean(g^2) = g^2; adam: m^ = g, v^ = g^2.
         * In each case w -= lr * g / (g + eps) = lr / 2. */
        for (int cc = 0; cc < D; cc++) {
            double got = (double)w0[5 * D + cc] - (double)w[5 * D + cc];
            if (!(fabs(got - lr / 2) <= 1e-3 * lr))
                fail_msg("%s: first update of row 5 with g = eps is %.6g, want lr/2 = %.6g",
                         sr_optim_kind_name(kinds[k]), got, lr / 2);
        }
        sr_ebc_free(ebc);
    }
}

static void test_sgd(void **state)
{
    run_default(SR_OPTIM_SGD, 0.1);
}

/* SGD's first step written out by hand: row 1 appears twice in bag (a, 0) and
 * row 5 once in bag (b, 0), so w1 -= lr * 2 * dpooled[0, a] and
 * w5 -= lr * dpooled[0, b]. */
static void test_sgd_first_step_by_hand(void **state)
{
    struct table_cfg c;
    one_table(&c);
    struct sr_ebc *ebc = NULL;
    struct sr_optim_config o = sr_optim_config_default(SR_OPTIM_SGD);
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, &o, B, 8, 7), SR_OK);
    float *wd = sr_ebc_weights(ebc, 0), w0[E * D], pooled[B * F * D], dpooled[B * F * D];
    const float *w = HV(wd);
    memcpy(w0, w, sizeof w0);
    for (int i = 0; i < B * F * D; i++)
        dpooled[i] = (float)(i + 1);
    struct step_kjt k;
    make_step(&k, 0);
    assert_int_equal(sr_ebc_forward(ebc, &k.kjt, pooled, NULL), SR_OK);
    host_wait();
    for (int cc = 0; cc < D; cc++) {
        assert_true(pooled[cc] == w0[1 * D + cc] + w0[1 * D + cc]);
        assert_true(pooled[D + cc] == w0[5 * D + cc]);
    }
    sr_ebc_backward(ebc, dpooled, 0.5f, 1, NULL);
    host_wait();
    w = HV(wd);
    for (int cc = 0; cc < D; cc++) {
        assert_true(w[1 * D + cc] == w0[1 * D + cc] - 0.5f * (2.0f * (float)(cc + 1)));
        assert_true(w[5 * D + cc] == w0[5 * D + cc] - 0.5f * (float)(D + cc + 1));
        assert_true(w[3 * D + cc] == w0[3 * D + cc] - 0.5f * (float)(F * D + cc + 1));
    }
    sr_ebc_free(ebc);
}

static void test_adagrad(void **state)
{
    run_default(SR_OPTIM_ADAGRAD, 0.1);
    struct sr_optim_config o = sr_optim_config_default(SR_OPTIM_ADAGRAD);
    struct doc_hparams hp = documented(SR_OPTIM_ADAGRAD);
    o.initial_accumulator = 0.25f;
    hp.s0 = 0.25;
    run_optimizer(o, hp, 0.1, 1.0);
}

static void test_rowwise_adagrad(void **state)
{
    run_default(SR_OPTIM_ROWWISE_ADAGRAD, 0.1);
    struct sr_optim_config o = sr_optim_config_default(SR_OPTIM_ROWWISE_ADAGRAD);
    struct doc_hparams hp = documented(SR_OPTIM_ROWWISE_ADAGRAD);
    o.initial_accumulator = 0.5f;
    hp.s0 = 0.5;
    run_optimizer(o, hp, 0.2, 1.0);
}

static void test_adam(void **state)
{
    run_default(SR_OPTIM_ADAM, 0.05);
}

/* Adam touches only the rows of a step: row 5 (step 1 only) keeps its moments
 * and weights through steps 2 and 3; row 4 (step 2 only) through step 3. */
static void test_adam_leaves_untouched_rows_state(void **state)
{
    struct table_cfg c;
    one_table(&c);
    struct sr_ebc *ebc = NULL;
    struct sr_optim_config o = sr_optim_config_default(SR_OPTIM_ADAM);
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, &o, B, 8, 7), SR_OK);
    float *wd = sr_ebc_weights(ebc, 0), *md = sr_ebc_optim_state(ebc, 0); /* device */
    const float *w, *m, *v;
    float m5[D], v5[D], w5[D], m4[D], v4[D], w4[D], pooled[B * F * D], dpooled[B * F * D];
    for (int step = 0; step < STEPS; step++) {
        struct step_kjt k;
        make_step(&k, step);
        for (int i = 0; i < B * F * D; i++)
            dpooled[i] = 0.1f * (float)(i + 1);
        assert_int_equal(sr_ebc_forward(ebc, &k.kjt, pooled, NULL), SR_OK);
        host_wait();
        sr_ebc_backward(ebc, dpooled, 0.01f, step + 1, NULL);
        host_wait();
        w = HV(wd), m = HV(md), v = m + E * D;
        if (step == 0) {
            memcpy(m5, m + 5 * D, sizeof m5);
            memcpy(v5, v + 5 * D, sizeof v5);
            memcpy(w5, w + 5 * D, sizeof w5);
            assert_true(m5[0] != 0.0f && v5[0] != 0.0f);
            for (int i = 0; i < D; i++) /* row 4 not yet touched */
                assert_true(m[4 * D + i] == 0.0f && v[4 * D + i] == 0.0f);
        }
        if (step == 1) {
            memcpy(m4, m + 4 * D, sizeof m4);
            memcpy(v4, v + 4 * D, sizeof v4);
            memcpy(w4, w + 4 * D, sizeof w4);
        }
        assert_memory_equal(m + 5 * D, m5, sizeof m5);
        assert_memory_equal(v + 5 * D, v5, sizeof v5);
        assert_memory_equal(w + 5 * D, w5, sizeof w5);
    }
    assert_memory_equal(m + 4 * D, m4, sizeof m4);
    assert_memory_equal(v + 4 * D, v4, sizeof v4);
    assert_memory_equal(w + 4 * D, w4, sizeof w4);
    for (int i = 0; i < D; i++) { /* rows 0 and 2: never touched */
        assert_true(m[0 * D + i] == 0.0f && v[0 * D + i] == 0.0f);
        assert_true(m[2 * D + i] == 0.0f && v[2 * D + i] == 0.0f);
    }
    sr_ebc_free(ebc);
}

/* Forward, evaluation forward and backward allocate nothing through the
 * counting allocator, from the first step on, at a size that runs threads. */
static void test_no_allocation_in_steps(void **state)
{
    enum { BB = 256, IDS = 4 };
    struct table_cfg c;
    one_table(&c);
    c.table.num_embeddings = 1000;
    c.table.embedding_dim = 16;
    c.table.pooling = SR_POOLING_MEAN;
    struct sr_ebc *ebc = NULL;
    struct sr_optim_config o = sr_optim_config_default(SR_OPTIM_ADAM);
    assert_int_equal(sr_ebc_init(&ebc, sr_device_cpu(), &c.cfg, &o, BB, BB * F * IDS, 3), SR_OK);
    static int32_t lengths[F * BB];
    static int64_t offsets[F * BB + 1], values[F * BB * IDS];
    static float pooled[BB * F * 16], dpooled[BB * F * 16];
    for (int i = 0; i < F * BB; i++)
        lengths[i] = IDS;
    for (int i = 0; i < BB * F * 16; i++)
        dpooled[i] = (float)(i % 7) - 3.0f;
    struct sr_kjt k = {.num_keys = F,
                       .stride = BB,
                       .lengths = lengths,
                       .offsets = offsets,
                       .values = values,
                       .num_values = F * BB * IDS};
    assert_int_equal(sr_kjt_compute_offsets(&k), SR_OK);
    uint64_t before = sr_alloc_count();
    for (int step = 1; step <= 4; step++) {
        for (int i = 0; i < F * BB * IDS; i++)
            values[i] = (int64_t)(sr_rng_u64(5, (uint64_t)step, (uint64_t)i) % 1000);
        assert_int_equal(sr_ebc_forward(ebc, &k, pooled, NULL), SR_OK);
        host_wait();
        assert_int_equal(sr_ebc_forward_eval(ebc, &k, pooled, NULL), SR_OK);
        host_wait();
        sr_ebc_backward(ebc, dpooled, 0.01f, step, NULL);
        host_wait();
        assert_int_equal(sr_alloc_count(), before);
    }
    sr_ebc_free(ebc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_documented),
        cmocka_unit_test(test_eps_moves_first_update),
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_sgd_first_step_by_hand),
        cmocka_unit_test(test_adagrad),
        cmocka_unit_test(test_rowwise_adagrad),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_adam_leaves_untouched_rows_state),
        cmocka_unit_test(test_no_allocation_in_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
