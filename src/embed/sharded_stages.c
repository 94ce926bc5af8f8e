/*
 * The sharded EBC's stages over a batch context (sharded_ebc.h), and forward,
 * forward_none and backward as their compositions. Each stage checks where
 * its batch is (enum batch_state, sharded_internal.h), opens its trace span
 * (shardrec/trace.h: input_dist.counts, input_dist.data, lookup,
 * output_dist, emb_grad_dist; the update runs in its caller's span) and calls
 * the exchange in input_dist.c or output_dist.c. One batch goes
 *
 *   IDLE -counts_start-> COUNTS -counts_wait-> COUNTED -data_start-> DATA
 *   -data_wait-> RECEIVED -lookup-> LOOKED_UP -output_dist_start-> OUTPUT
 *   -output_dist_wait-> POOLED -grad_dist_start-> GRADS -grad_dist_wait->
 *   GRADS_IN -update-> IDLE
 *
 * and back to IDLE from counts_wait when the step stops (an error or the end
 * of data). counts_start may also begin a new batch in a context whose batch
 * was not carried to its update (evaluation: forward only), as long as
 * none of its collectives is in flight.
 */
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/trace.h"
#include "embed/sharded_internal.h"

static const char *state_name(enum batch_state st)
{
    static const char *names[] = {
        "idle",      "counts in flight",      "counted", "data in flight",          "received",
        "looked up", "output dist in flight", "pooled",  "gradient dist in flight", "gradients in"};
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

/* Stage order within a batch (the header's rules): misuse aborts. */
static void expect_state(const struct sr_sharded_ebc *s, const struct sr_sharded_ebc_batch *b,
                         enum batch_state want, const char *stage)
{
    if (b->s != s)
        SR_ABORT("sharded EBC: %s on a batch context of another EBC", stage);
    if (b->state != want)
        SR_ABORT("sharded EBC: %s on a batch that is %s, not %s (sharded_ebc.h: each batch's "
                 "stages run in order)",
                 stage, state_name(b->state), state_name(want));
}

/* A stage runs on `stream`, after the batch's previous stage wherever that
 * ran (its stream waits for the batch's event when it is another). */
static void stage_enter(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                        sr_stream_t stream)
{
    if (b->staged_any && b->staged_on != stream)
        sr_dev_stream_wait_event(s->dev, stream, b->staged);
    b->stream = stream;
}

/* The stage's work is issued: the batch's event marks where it ends. */
static void stage_leave(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    sr_dev_event_record(s->dev, b->staged, b->stream);
    b->staged_on = b->stream;
    b->staged_any = 1;
}

void sr_sharded_ebc_batch_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                               sr_stream_t stream)
{
    if (b->s != s)
        SR_ABORT("sharded EBC: batch_wait on a batch context of another EBC");
    if (b->staged_any && b->staged_on != stream)
        sr_dev_stream_wait_event(s->dev, stream, b->staged);
}

/* Local mode has no collectives: nothing of it is ever in flight. */
static int in_flight(const struct sr_sharded_ebc *s, enum batch_state st)
{
    return !s->local &&
           (st == BATCH_COUNTS || st == BATCH_DATA || st == BATCH_OUTPUT || st == BATCH_GRADS);
}

/* Each feature's ids within the bound its exchange buffers were sized for
 * (sr_sharded_ebc_init's feature_max_values). */
static int check_feature_caps(const struct sr_sharded_ebc *s, const struct sr_kjt *kjt)
{
    const struct sr_ebc_config *c = sr_sharded_user_cfg(s);
    if (!s->caps_given)
        return SR_OK;
    if (!kjt->length_per_key)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: KJT without length_per_key, but the EBC bounds each "
                            "feature's ids; HINT: fill it with sr_kjt_fill_length_per_key");
    int64_t sum = 0;
    for (int f = 0; f < c->num_features; f++)
        sum += kjt->length_per_key[f];
    if (sum != kjt->num_values)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: the KJT's length_per_key sums to %lld ids, its values "
                            "are %lld; HINT: refill it with sr_kjt_fill_length_per_key",
                            (long long)sum, (long long)kjt->num_values);
    for (int f = 0; f < c->num_features; f++)
        if (kjt->length_per_key[f] > s->feature_cap[f])
            return sr_error_set(SR_ERR_DATA,
                                "sharded EBC: feature '%s' holds %lld ids in this batch of %d "
                                "samples, more than the %lld its exchange was sized for; HINT: "
                                "the bound comes from --ids-per-feature or the data's ids a "
                                "sample (a binary file's fixed bag length)",
                                c->feature_names[f], (long long)kjt->length_per_key[f], s->B,
                                (long long)s->feature_cap[f]);
    return SR_OK;
}

static int check_kjt(const struct sr_sharded_ebc *s, struct sr_kjt *kjt)
{
    const struct sr_ebc_config *c = sr_sharded_user_cfg(s);
    if (kjt->num_keys != c->num_features || kjt->stride != s->B || kjt->num_values > s->max_values)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: KJT of %d features, %d samples and %lld ids; this EBC "
                            "takes %d features, exactly %d samples and at most %lld ids",
                            kjt->num_keys, kjt->stride, (long long)kjt->num_values, c->num_features,
                            s->B, (long long)s->max_values);
    if (!kjt->offsets || !kjt->lengths || (kjt->num_values > 0 && !kjt->values))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "sharded EBC: KJT lacks lengths, offsets or values; HINT: fill "
                            "offsets with sr_kjt_compute_offsets");
    for (int f = 0; kjt->keys && f < c->num_features; f++)
        if (kjt->keys[f] && strcmp(kjt->keys[f], c->feature_names[f]) != 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "sharded EBC: KJT feature %d is '%s' but the config's is '%s'", f,
                                kjt->keys[f], c->feature_names[f]);
    int rc = check_feature_caps(s, kjt);
    for (int f = 0; !rc && kjt->weights && f < c->num_features; f++)
        if (c->tables[c->feature_table[f]].pooling == SR_POOLING_MEAN)
            rc = sr_error_set(SR_ERR_INVALID_ARG,
                              "sharded EBC: table '%s' pools by mean but the KJT has per-id "
                              "weights (feature '%s'); HINT: weights need sum pooling",
                              c->tables[c->feature_table[f]].name, c->feature_names[f]);
    return rc;
}

/* ---- input dist --------------------------------------------------------------- */

static void counts_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                         struct sr_kjt *kjt, int local_rc, sr_stream_t stream)
{
    if (b->s != s || in_flight(s, b->state))
        SR_ABORT("sharded EBC: input dist started on a batch %s",
                 b->s != s ? "of another EBC" : state_name(b->state));
    sr_trace_begin(SR_SPAN_INPUT_DIST_COUNTS, -1);
    if (s->local) { /* host only; the batch's device work starts a new chain */
        b->kjt = local_rc ? NULL : kjt;
        b->local_rc = local_rc;
        b->stream = stream;
        b->staged_any = 0;
    } else {
        stage_enter(s, b, stream);
        sr_input_dist_counts_start(s, b, kjt, local_rc);
        stage_leave(s, b);
    }
    sr_trace_end();
    b->state = BATCH_COUNTS;
}

void sr_sharded_ebc_input_dist_counts_start(struct sr_sharded_ebc *s,
                                            struct sr_sharded_ebc_batch *b, struct sr_kjt *kjt,
                                            sr_stream_t stream)
{
    counts_start(s, b, kjt, check_kjt(s, kjt), stream);
}

void sr_sharded_ebc_input_dist_counts_start_none(struct sr_sharded_ebc *s,
                                                 struct sr_sharded_ebc_batch *b, int why,
                                                 sr_stream_t stream)
{
    SR_ASSERT(why == SR_SHARDED_EBC_END_OF_DATA || why < 0);
    counts_start(s, b, NULL, why, stream);
}

/* A stage's body between its entry and its end, in its trace span. */
#define STAGE(span, stream, body)                                                                 \
    do {                                                                                          \
        sr_trace_begin((span), -1);                                                               \
        stage_enter(s, b, (stream));                                                              \
        body;                                                                                     \
        stage_leave(s, b);                                                                        \
        sr_trace_end();                                                                           \
    } while (0)

/* A stage that issues no device work (local mode): no event recorded or
 * waited for, so a graph of the stages from lookup to update captures no
 * wait on an event recorded outside it. */
#define HOST_STAGE(span, stream, body)                                                            \
    do {                                                                                          \
        sr_trace_begin((span), -1);                                                               \
        b->stream = (stream);                                                                     \
        body;                                                                                     \
        sr_trace_end();                                                                           \
    } while (0)

int sr_sharded_ebc_input_dist_counts_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                          sr_stream_t stream)
{
    int rc;
    expect_state(s, b, BATCH_COUNTS, "input_dist_counts_wait");
    if (s->local)
        HOST_STAGE(SR_SPAN_INPUT_DIST_COUNTS, stream, rc = sr_local_counts(s, b));
    else
        STAGE(SR_SPAN_INPUT_DIST_COUNTS, stream, rc = sr_input_dist_counts_wait(s, b));
    b->state = rc ? BATCH_IDLE : BATCH_COUNTED;
    return rc;
}

void sr_sharded_ebc_input_dist_data_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                          sr_stream_t stream)
{
    expect_state(s, b, BATCH_COUNTED, "input_dist_data_start");
    if (s->local)
        HOST_STAGE(SR_SPAN_INPUT_DIST_DATA, stream, (void)0);
    else
        STAGE(SR_SPAN_INPUT_DIST_DATA, stream, sr_input_dist_data_start(s, b));
    b->state = BATCH_DATA;
}

void sr_sharded_ebc_input_dist_data_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                         sr_stream_t stream)
{
    expect_state(s, b, BATCH_DATA, "input_dist_data_wait");
    if (s->local)
        HOST_STAGE(SR_SPAN_INPUT_DIST_DATA, stream, (void)0);
    else
        STAGE(SR_SPAN_INPUT_DIST_DATA, stream, sr_input_dist_data_wait(s, b));
    b->state = BATCH_RECEIVED;
}

/* ---- lookup --------------------------------------------------------------------- */

static struct sr_emb_batch emb_batch(const struct group *g, const struct group_batch *gb)
{
    return (struct sr_emb_batch){.batch = g->batch,
                                 .num_values = gb->num_values,
                                 .offsets = gb->offsets,
                                 .values = gb->values,
                                 .weights = gb->has_weights ? gb->weights : NULL,
                                 .feature_pos = gb->feature_pos,
                                 .table_pos = gb->table_pos,
                                 .weighted = gb->has_weights};
}

static int has_lookup(const struct group *g)
{
    return g->active && g->layout.num_features > 0;
}

static void lookup_groups(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b)
{
    s->stats.lookup_ids = 0;
    for (int k = 0; k < GROUP_COUNT; k++) {
        const struct group *g = &s->groups[k];
        if (!has_lookup(g))
            continue;
        struct sr_emb_batch eb = emb_batch(g, &b->gb[k]);
        sr_op_emb_forward(s->dev, &g->layout, &eb, 1, b->gb[k].pooled, b->gb[k].workspace,
                          b->stream);
        s->stats.lookup_ids += b->gb[k].num_values;
    }
}

void sr_sharded_ebc_lookup(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                           sr_stream_t stream)
{
    expect_state(s, b, BATCH_RECEIVED, "lookup");
    b->ids_grouped = 0;
    if (s->local)
        STAGE(SR_SPAN_LOOKUP, stream, sr_local_lookup(s, b));
    else
        STAGE(SR_SPAN_LOOKUP, stream, lookup_groups(s, b));
    b->state = BATCH_LOOKED_UP;
}

/* ---- output dist and gradient dist -------------------------------------------- */

void sr_sharded_ebc_output_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                      sr_stream_t stream)
{
    expect_state(s, b, BATCH_LOOKED_UP, "output_dist_start");
    if (s->local)
        HOST_STAGE(SR_SPAN_OUTPUT_DIST, stream, (void)0);
    else
        STAGE(SR_SPAN_OUTPUT_DIST, stream, sr_output_dist_start(s, b));
    b->state = BATCH_OUTPUT;
}

void sr_sharded_ebc_output_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                     float *pooled, sr_stream_t stream)
{
    expect_state(s, b, BATCH_OUTPUT, "output_dist_wait");
    if (b->bound_pooled && pooled != b->bound_pooled)
        SR_ABORT("sharded EBC: output_dist_wait into another pooled than the bound one");
    if (!s->local)
        STAGE(SR_SPAN_OUTPUT_DIST, stream, sr_output_dist_wait(s, b, pooled));
    else if (b->bound_pooled) /* the lookup pooled into it */
        HOST_STAGE(SR_SPAN_OUTPUT_DIST, stream, (void)0);
    else
        STAGE(SR_SPAN_OUTPUT_DIST, stream,
              sr_dev_copy(s->dev, pooled, b->gb[GROUP_A2A].pooled,
                          sizeof(float) * (size_t)s->B * s->out_dim, stream));
    b->state = BATCH_POOLED;
}

void sr_sharded_ebc_grad_dist_start(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                    const float *dpooled, sr_stream_t stream)
{
    expect_state(s, b, BATCH_POOLED, "grad_dist_start");
    if (b->bound_dpooled && dpooled != b->bound_dpooled)
        SR_ABORT("sharded EBC: grad_dist_start from another dpooled than the bound one");
    if (!s->local) {
        STAGE(SR_SPAN_EMB_GRAD_DIST, stream, sr_grad_dist_start(s, b, dpooled));
    } else if (b->bound_dpooled) { /* the update reads it */
        b->update_dpooled = dpooled;
        HOST_STAGE(SR_SPAN_EMB_GRAD_DIST, stream, (void)0);
    } else {
        b->update_dpooled = b->gb[GROUP_A2A].dpooled;
        STAGE(SR_SPAN_EMB_GRAD_DIST, stream,
              sr_dev_copy(s->dev, b->gb[GROUP_A2A].dpooled, dpooled,
                          sizeof(float) * (size_t)s->B * s->out_dim, stream));
    }
    b->state = BATCH_GRADS;
}

void sr_sharded_ebc_grad_dist_wait(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                                   sr_stream_t stream)
{
    expect_state(s, b, BATCH_GRADS, "grad_dist_wait");
    if (s->local)
        HOST_STAGE(SR_SPAN_EMB_GRAD_DIST, stream, (void)0);
    else
        STAGE(SR_SPAN_EMB_GRAD_DIST, stream, sr_grad_dist_wait(s, b));
    b->state = BATCH_GRADS_IN;
}

/* ---- update ----------------------------------------------------------------------- */

void sr_sharded_ebc_group_ids(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                              sr_stream_t stream)
{
    if (b->state < BATCH_LOOKED_UP || b->state > BATCH_GRADS_IN)
        SR_ABORT("sharded EBC: group_ids outside lookup .. update (state %d)", (int)b->state);
    if (s->local) {
        sr_local_group_ids(s, b, stream);
    } else {
        for (int k = GROUP_A2A; k < GROUP_COUNT; k++) {
            const struct group *g = &s->groups[k];
            if (!has_lookup(g))
                continue;
            struct sr_emb_batch eb = emb_batch(g, &b->gb[k]);
            sr_op_emb_group_ids(s->dev, &g->layout, &eb, b->gb[k].workspace, stream);
        }
    }
    b->ids_grouped = 1;
}

static void update_groups(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float lr,
                          int64_t step)
{
    struct sr_emb_update u = sr_sharded_update_of(s, lr, step);
    u.ids_grouped = b->ids_grouped;
    for (int k = GROUP_A2A; k < GROUP_COUNT; k++) {
        const struct group *g = &s->groups[k];
        if (!has_lookup(g))
            continue;
        struct sr_emb_batch eb = emb_batch(g, &b->gb[k]);
        sr_op_emb_backward(s->dev, &g->layout, &eb, b->gb[k].dpooled, &u, b->gb[k].workspace,
                           b->stream);
    }
    const struct group *dp = &s->groups[GROUP_DP];
    if (dp->num_tables > 0) {
        sr_dev_memset(s->dev, s->dp_buf, 0, sizeof(float) * s->dp_len, b->stream);
        struct sr_emb_batch eb = emb_batch(dp, &b->gb[GROUP_DP]);
        sr_op_emb_dp_accumulate(s->dev, &dp->layout, &eb, b->gb[GROUP_DP].dpooled, s->dp_grad,
                                s->dp_counts, b->stream);
    }
}

void sr_sharded_ebc_update(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b, float lr,
                           int64_t step, sr_stream_t stream)
{
    expect_state(s, b, BATCH_GRADS_IN, "update");
    stage_enter(s, b, stream);
    if (s->local)
        sr_local_update(s, b, lr, step);
    else
        update_groups(s, b, lr, step);
    stage_leave(s, b);
    b->ids_grouped = 0;
    b->state = BATCH_IDLE;
}

/* ---- forward and backward: the stages in a row, on the EBC's own context -------- */

int sr_sharded_ebc_forward(struct sr_sharded_ebc *s, struct sr_kjt *kjt, float *pooled,
                           sr_stream_t stream)
{
    struct sr_sharded_ebc_batch *b = s->batch0;
    b->bound_pooled = pooled; /* local mode: the lookup pools into it */
    sr_sharded_ebc_input_dist_counts_start(s, b, kjt, stream);
    int rc = sr_sharded_ebc_input_dist_counts_wait(s, b, stream);
    if (rc)
        return rc;
    sr_sharded_ebc_input_dist_data_start(s, b, stream);
    sr_sharded_ebc_input_dist_data_wait(s, b, stream);
    sr_sharded_ebc_lookup(s, b, stream);
    sr_sharded_ebc_output_dist_start(s, b, stream);
    sr_sharded_ebc_output_dist_wait(s, b, pooled, stream);
    return SR_OK;
}

int sr_sharded_ebc_forward_none(struct sr_sharded_ebc *s, int why, sr_stream_t stream)
{
    sr_sharded_ebc_input_dist_counts_start_none(s, s->batch0, why, stream);
    return sr_sharded_ebc_input_dist_counts_wait(s, s->batch0, stream);
}

void sr_sharded_ebc_backward(struct sr_sharded_ebc *s, const float *dpooled, float lr, int64_t step,
                             sr_stream_t stream)
{
    struct sr_sharded_ebc_batch *b = s->batch0;
    expect_state(s, b, BATCH_POOLED, "backward (after a successful forward)");
    b->bound_dpooled = dpooled; /* local mode: the update reads it */
    sr_sharded_ebc_grad_dist_start(s, b, dpooled, stream);
    sr_sharded_ebc_grad_dist_wait(s, b, stream);
    sr_sharded_ebc_update(s, b, lr, step, stream);
}

/* ---- local mode ---------------------------------------------------------------------- */

void sr_sharded_ebc_batch_bind(struct sr_sharded_ebc *s, struct sr_sharded_ebc_batch *b,
                               float *pooled, const float *dpooled)
{
    if (b->s != s)
        SR_ABORT("sharded EBC: batch_bind on a batch context of another EBC");
    b->bound_pooled = pooled;
    b->bound_dpooled = dpooled;
    if (s->local)
        sr_sharded_batch_local_blocks(b, !(pooled && dpooled));
}

int sr_sharded_ebc_is_local(const struct sr_sharded_ebc *s)
{
    return s->local;
}
