/*
 * The stage cases of tests/mpi/mpi_sharded_ebc.c: for dp, tw, rw, cw, twrw
 * and the mixed plan (also in bf16, and a weighted rw case), ISTEPS steps run
 * through the stage functions on two batch contexts, batch i+1's input dist
 * interleaved with batch i (wholly between its output dist and gradient
 * dist, or overlapping both), and give pooled outputs and final weights
 * bit-identical to the same steps through forward/backward, allocating
 * nothing. The staged steps run their exchanges on a sparse stream and the
 * lookup and update on the default one, as the trainer does: on the
 * deferred CPU device a stage that did not wait for the batch's previous
 * one reads poisoned memory.
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/error.h"
#include "shardrec/sharded_ebc.h"
#include "harness.h"

#define ISTEPS 4

/* How batch i+1's input dist interleaves with batch i (sharded_ebc.h rule 3):
 * A: whole between batch i's output dist and its gradient dist;
 * B: its counts in flight during batch i's output dist, its data exchange
 *    during batch i's gradient dist. */
enum pattern { PATTERN_A, PATTERN_B };

struct staged {
    struct sr_sharded_ebc *s;
    sr_stream_t sp; /* the exchanges' stream */
    struct sr_sharded_ebc_batch *ctx[2];
    struct batch bt[ISTEPS + 1];
    float *pooled[ISTEPS + 1];
};

static void dp_all_reduce(struct sr_sharded_ebc *s, const struct world *w, float lr, int step)
{
    size_t n;
    float *g = sr_sharded_ebc_dp_grad_buffer(s, &n);
    if (n)
        sr_comm_all_reduce(w->world, g, g, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
    sr_sharded_ebc_dp_update(s, lr, step, NULL);
}

static void input_dist(struct staged *x, struct sr_sharded_ebc_batch *b, int step)
{
    sr_sharded_ebc_input_dist_counts_start(x->s, b, &x->bt[step].kjt, x->sp);
    CHECK(sr_sharded_ebc_input_dist_counts_wait(x->s, b, x->sp) == SR_OK, "step %d counts: %s",
          step, sr_error_message());
    sr_sharded_ebc_input_dist_data_start(x->s, b, x->sp);
    sr_sharded_ebc_input_dist_data_wait(x->s, b, x->sp);
}

/* Batch `step` on cur, with batch step + 1's input dist on nxt (NULL: last). */
static void staged_step(struct staged *x, enum pattern pt, int step, const float *dp, float lr,
                        const struct world *w)
{
    struct sr_sharded_ebc *s = x->s;
    struct sr_sharded_ebc_batch *cur = x->ctx[(step - 1) % 2];
    struct sr_sharded_ebc_batch *nxt = step < ISTEPS ? x->ctx[step % 2] : NULL;
    sr_stream_t sp = x->sp;
    sr_sharded_ebc_lookup(s, cur, NULL);
    sr_sharded_ebc_output_dist_start(s, cur, sp);
    if (nxt && pt == PATTERN_B)
        sr_sharded_ebc_input_dist_counts_start(s, nxt, &x->bt[step + 1].kjt, sp);
    sr_sharded_ebc_output_dist_wait(s, cur, x->pooled[step], sp);
    sr_sharded_ebc_batch_wait(s, cur, NULL); /* pooled, for the default stream's readers */
    if (nxt && pt == PATTERN_A)
        input_dist(x, nxt, step + 1);
    if (nxt && pt == PATTERN_B) {
        CHECK(sr_sharded_ebc_input_dist_counts_wait(s, nxt, sp) == SR_OK, "step %d counts: %s",
              step + 1, sr_error_message());
        sr_sharded_ebc_input_dist_data_start(s, nxt, sp);
    }
    sr_sharded_ebc_grad_dist_start(s, cur, dp, sp);
    if (nxt && pt == PATTERN_B)
        sr_sharded_ebc_input_dist_data_wait(s, nxt, sp);
    sr_sharded_ebc_grad_dist_wait(s, cur, sp);
    sr_sharded_ebc_update(s, cur, lr, step, NULL);
    dp_all_reduce(s, w, lr, step);
}

static void staged_init(struct staged *x, const struct tcfg *c, const struct sr_plan *p,
                        const struct sr_optim_config *oc, const struct world *w)
{
    int64_t maxv = (int64_t)B * c->cfg.num_features * (c->max_len + 2);
    struct sr_sharded_ebc_comms comms = {w->sparse, w->node, w->cross, wire, NULL};
    SR_ASSERT(sr_sharded_ebc_init(&x->s, sr_device_cpu(), &comms, &c->cfg, p, oc, B, maxv, NULL, 42) ==
              SR_OK);
    const int D = sr_sharded_ebc_out_dim(x->s);
    for (int step = 1; step <= ISTEPS; step++) {
        make_batch(&x->bt[step], c, step, (int64_t)w->rank * B, B);
        x->pooled[step] = sr_calloc((size_t)B * D, sizeof(float));
    }
    x->ctx[0] = x->ctx[1] = NULL;
    x->sp = sr_dev_stream_create(sr_device_cpu());
}

static void staged_free(struct staged *x)
{
    sr_dev_sync(sr_device_cpu(), x->sp);
    sr_dev_stream_destroy(sr_device_cpu(), x->sp);
    sr_sharded_ebc_batch_free(x->ctx[0]);
    sr_sharded_ebc_batch_free(x->ctx[1]);
    sr_sharded_ebc_free(x->s);
    for (int step = 1; step <= ISTEPS; step++) {
        free_batch(&x->bt[step]);
        sr_free(x->pooled[step]);
    }
}

/* Tables of a and b gathered on rank 0 and compared bit for bit. */
static void same_tables(struct sr_sharded_ebc *a, struct sr_sharded_ebc *b, const struct tcfg *c,
                        const struct world *w)
{
    for (int t = 0; t < c->cfg.num_tables; t++) {
        const size_t n = (size_t)c->tables[t].num_embeddings * c->tables[t].embedding_dim;
        float *fa = w->rank == 0 ? sr_calloc(n, sizeof(float)) : NULL;
        float *fb = w->rank == 0 ? sr_calloc(n, sizeof(float)) : NULL;
        CHECK(sr_sharded_ebc_gather_table(a, t, fa) == SR_OK, "gather: %s", sr_error_message());
        CHECK(sr_sharded_ebc_gather_table(b, t, fb) == SR_OK, "gather: %s", sr_error_message());
        CHECK(w->rank != 0 || memcmp(fa, fb, n * sizeof(float)) == 0,
              "table %s: weights differ from the sequential steps", c->tables[t].name);
        sr_free(fa);
        sr_free(fb);
    }
}

/* The same ISTEPS steps through forward/backward and through the stages on
 * two contexts interleaved by pattern pt: pooled outputs and final weights
 * bit-identical; the interleaved steps allocate nothing. */
static void run_interleaved(const char *name, const struct tcfg *c, const struct sr_plan *p,
                            enum sr_optim_kind kind, enum pattern pt, const struct world *w)
{
    char label[160];
    snprintf(label, sizeof label, "interleaved %c W=%d L=%d %s %s %s", pt == PATTERN_A ? 'A' : 'B',
             w->W, w->L, name, sr_optim_kind_name(kind), sr_dtype_name(wire));
    where = label;
    struct sr_optim_config oc = sr_optim_config_default(kind);
    const float lr = kind == SR_OPTIM_ADAM ? 0.01f : 0.1f;
    struct staged seq, st;
    staged_init(&seq, c, p, &oc, w);
    staged_init(&st, c, p, &oc, w);
    SR_ASSERT(sr_sharded_ebc_batch_init(&st.ctx[0], st.s) == SR_OK);
    SR_ASSERT(sr_sharded_ebc_batch_init(&st.ctx[1], st.s) == SR_OK);
    const int D = sr_sharded_ebc_out_dim(st.s);
    float *dp = sr_calloc((size_t)B * D, sizeof(float));

    for (int step = 1; step <= ISTEPS; step++) {
        sr_dev_sync(sr_device_cpu(), NULL); /* the last step's queued ops have read dp */
        sr_dev_sync(sr_device_cpu(), st.sp);
        for (int64_t i = 0; i < (int64_t)B * D; i++)
            dp[i] = dpooled_at(step, (int64_t)w->rank * B + i / D, (int)(i % D));
        CHECK(sr_sharded_ebc_forward(seq.s, &seq.bt[step].kjt, seq.pooled[step], NULL) == SR_OK,
              "step %d forward: %s", step, sr_error_message());
        sr_sharded_ebc_backward(seq.s, dp, lr, step, NULL);
        dp_all_reduce(seq.s, w, lr, step);

        uint64_t allocs = sr_alloc_count();
        if (step == 1)
            input_dist(&st, st.ctx[0], 1);
        staged_step(&st, pt, step, dp, lr, w);
        CHECK(step == 1 || sr_alloc_count() == allocs, "step %d: the stages allocated", step);
    }
    sr_dev_sync(sr_device_cpu(), NULL); /* pooled is read on the host */
    sr_dev_sync(sr_device_cpu(), st.sp);
    for (int step = 1; step <= ISTEPS; step++)
        CHECK(memcmp(seq.pooled[step], st.pooled[step], sizeof(float) * B * D) == 0,
              "step %d: pooled differs from the sequential step", step);
    same_tables(seq.s, st.s, c, w);
    sr_free(dp);
    staged_free(&st);
    staged_free(&seq);
}

/* dp, tw, rw, cw, twrw and the mixed plan, both patterns; the mixed plan
 * also with a bf16 wire. */
void run_stages(struct world *w)
{
    static const enum sr_sharding_type types[] = {
        SR_SHARDING_TYPE_DATA_PARALLEL, SR_SHARDING_TYPE_TABLE_WISE, SR_SHARDING_TYPE_ROW_WISE,
        SR_SHARDING_TYPE_COLUMN_WISE, SR_SHARDING_TYPE_TABLE_ROW_WISE};
    struct tcfg c;
    main_config(&c);
    for (int i = 0; i <= 5; i++) {
        struct sr_plan *p = i < 5 ? uniform(&c, types[i], w) : mixed(&c, w);
        const char *name = i < 5 ? sr_sharding_type_name(types[i]) : "mixed";
        for (int pt = PATTERN_A; pt <= PATTERN_B; pt++)
            run_interleaved(name, &c, p, i % 2 ? SR_OPTIM_ADAGRAD : SR_OPTIM_ADAM, (enum pattern)pt,
                            w);
        if (i == 5) {
            wire = SR_DTYPE_BF16;
            run_interleaved(name, &c, p, SR_OPTIM_ADAGRAD, PATTERN_B, w);
            wire = SR_DTYPE_F32;
        }
        sr_plan_free(p);
    }
    struct tcfg wc;
    weighted_config(&wc);
    struct sr_plan *p = uniform(&wc, SR_SHARDING_TYPE_ROW_WISE, w);
    run_interleaved("weighted rw", &wc, p, SR_OPTIM_SGD, PATTERN_B, w);
    sr_plan_free(p);
}
