/*
 * The training step: one body for every pipeline depth. Step i, top to
 * bottom (sharded EBC stages, sharded_ebc.h; batch i in context ctx[i % 2]),
 * with batch i+1's "ahead" stages where they overlap it at depth 1
 * (--pipeline sparse-dist, the default):
 *
 *   embedding.forward  i.data_wait, i.lookup, i.output_dist_start; in a graphed
 *                      step i.group_ids (the update's sort) on the embedding
 *                      backward's stream, beside the dense forward
 *   ahead (i+1)        take i+1 from the ring (data.wait), copy it,
 *                      i+1.counts_start
 *   bottom_mlp         overlaps i's output dist
 *   output_dist        i.output_dist_wait -> pooled
 *   interaction, top_mlp
 *   ahead (i+1)        i+1.counts_wait: the step's one host sync, a batch
 *                      ahead; an error or the end of the data found here is
 *                      kept for step i+1, and step i completes
 *   backward (top)     loss, the top MLP's data gradients (ReLU/bias pass
 *                      and dX of each layer), interaction -> dpooled: the
 *                      shortest path to the embedding backward
 *   emb_grad_dist      i.grad_dist_start, then i+1.data_start (queued behind
 *                      it on the sparse communicator)
 *   backward (top dW)  the top MLP's weight gradients, deferred to here (no
 *                      other stage waits for them); dense buckets start
 *                      their all-reduce as layers finish
 *   backward (bottom)  with the top dW, overlaps i's gradient dist (in a
 *                      graphed step its embedding backward, on a stream of
 *                      its own) and i+1's data exchange
 *   embedding.backward i.grad_dist_wait, i.update
 *   optimizer          last bucket, dp update, dense optimizer (trainer.c)
 *   release            batch i's ring slot goes back to the loader, which
 *                      refills it once the copy out of it has run (an event
 *                      the loader waits for, not the compute thread)
 *
 * At depth 0 (--pipeline none) nothing runs ahead: step i takes its own
 * batch through the ahead stages first (the loader has no thread then: the
 * take makes the batch on the compute thread), one batch at a time. A
 * graphed step (--cuda-graphs) is the same body captured once per ring slot
 * and replayed (step_graph). The loader thread loads batch i+2 at depth 1
 * (loader_thread.h).
 *
 * i+1's lookup comes in step i+1, after i's update and dp update, so the
 * tables it reads are those of sequential training: the losses and weights
 * equal --pipeline none's bit for bit (sharded_ebc.h, ordering rule 3). Every
 * rank makes the same calls in the same order. Spans of batch i+1 carry
 * step i+1 (sr_trace_set_thread_step). The last step (--steps) runs nothing
 * ahead. Step 1 first brings its own batch through the "ahead" stages.
 *
 * One rank without a plan runs the sharded EBC in local mode
 * (sharded_ebc.h): its input dist, output dist and gradient dist are host
 * only, the lookup pools into t->pooled and the update reads t->dpooled.
 *
 * Streams: the copy of batch i+1 runs on a copy stream of its own, so on a
 * GPU it overlaps batch i's compute. It first waits for the slot's
 * `consumed` event (the last read of that twin, three steps back); the
 * compute stream waits for its `copied` event before the first op that
 * reads the twin (the counts exchange, or step i+1's lookup).
 *
 * Evaluation runs between steps, after i+1's data exchange has completed
 * (sr_trainer_pipeline_pause): it uses the EBC's own context, host_batch and
 * its twin, none of the pipeline's; the loader goes on meanwhile.
 * Nothing here allocates after sr_trainer_pipeline_init.
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "train/trainer_internal.h"

#define END_OF_DATA SR_TRAINER_END_OF_DATA

int sr_trainer_pipeline_init(struct sr_trainer *t)
{
    struct sr_pipe *p = &t->pipe;
    p->depth = t->cfg->pipeline == SR_PIPELINE_SPARSE_DIST ? 1 : 0;
    t->streams.copy = sr_dev_stream_create(t->dev);
    t->streams.sparse = sr_dev_stream_create(t->dev);
    t->streams.dense = sr_dev_stream_create(t->dev);
    t->streams.compute = NULL;
    /* NCCL's collectives are not captured: its watchdog's events must run */
    int local = sr_sharded_ebc_is_local(t->sebc) &&
                strcmp(sr_comm_backend_name(t->world), "nccl") != 0;
    if (t->cfg->cuda_graphs > 0 && !local)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--cuda-graphs covers one rank with every table whole (no plan, or "
                            "--sharding tw) and no NCCL; the sharded step (several ranks, "
                            "another plan, or --comm nccl) runs without graphs: leave it out");
    if (p->depth > 0 && t->cfg->cuda_graphs >= 0 && local && sr_dev_has_graphs(t->dev)) {
        p->loss_stage = sr_dev_alloc(t->dev, sizeof(float));
        p->emb_stream = sr_dev_stream_create(t->dev);
        p->emb_fork = sr_dev_event_create(t->dev);
        p->emb_join = sr_dev_event_create(t->dev);
    }
    p->dpooled_ready = sr_dev_event_create(t->dev);
    for (int k = 0; k < 2; k++) {
        int rc = sr_sharded_ebc_batch_init(&p->ctx[k], t->sebc);
        if (rc)
            return rc;
    }
    return SR_OK;
}

void sr_trainer_pipeline_bind(struct sr_trainer *t)
{
    for (int k = 0; k < 2; k++)
        sr_sharded_ebc_batch_bind(t->sebc, t->pipe.ctx[k], t->pooled, t->dpooled);
}

/* The loader's producer, on the loader thread: it alone touches the reader
 * and the epoch count while the pipeline runs. */
static int load_step(void *ctx, int64_t step, struct sr_batch *b)
{
    return sr_trainer_load_into(ctx, step, b);
}

/* ---- the ahead stages: batch s = i+1 during step i ----------------------------- */

/* Take batch s, copy it to its twin, start its counts exchange (a batch the
 * loader could not make is flagged in it, so the other ranks stop with us). */
static void ahead_start(struct sr_trainer *t, int64_t s)
{
    struct sr_pipe *p = &t->pipe;
    struct sr_comm_counters before, after;
    struct sr_loader_slot *slot = sr_loader_take(&p->loader);
    SR_ASSERT(slot->step == s);
    p->next = slot;
    p->next_rc = slot->rc;
    if (slot->rc < 0)
        sr_error_set(slot->rc, "%s", slot->msg); /* the loader thread's message, here */
    if (!slot->rc) {
        sr_trace_begin(SR_SPAN_COPY, -1);
        /* not waited for: the stages after it wait for its event on their
         * streams; the loader waits for it before it refills the slot */
        const struct sr_batch *pooled = sr_trainer_pool_batch(t, s);
        sr_dev_stream_wait_event(t->dev, t->streams.copy, slot->consumed);
        sr_batch_copy(&slot->twin, pooled ? pooled : &slot->host, t->streams.copy);
        sr_dev_event_record(t->dev, slot->copied, t->streams.copy);
        sr_trace_end();
    }
    sr_trainer_comm_snapshot(t, &before);
    struct sr_sharded_ebc_batch *b = p->ctx[s & 1];
    if (slot->rc)
        sr_sharded_ebc_input_dist_counts_start_none(
            t->sebc, b, slot->rc == END_OF_DATA ? SR_SHARDED_EBC_END_OF_DATA : slot->rc,
            t->streams.sparse);
    else {
        sr_dev_stream_wait_event(t->dev, t->streams.sparse, slot->copied);
        sr_sharded_ebc_input_dist_counts_start(t->sebc, b, &slot->twin.kjt, t->streams.sparse);
    }
    sr_trainer_comm_snapshot(t, &after);
    memset(&p->counts, 0, sizeof p->counts);
    sr_trainer_counters_add_diff(&p->counts, &after, &before);
}

/* Wait for batch s's counts: every rank learns here whether any rank's batch
 * failed or its data ended. The end's exchange belongs to no step (as with
 * --pipeline none, where it happens in a step that does not count). */
static void ahead_counts(struct sr_trainer *t, int64_t s)
{
    struct sr_pipe *p = &t->pipe;
    struct sr_comm_counters before, after;
    sr_trainer_comm_snapshot(t, &before);
    int rc = sr_sharded_ebc_input_dist_counts_wait(t->sebc, p->ctx[s & 1], t->streams.sparse);
    sr_trainer_comm_snapshot(t, &after);
    p->next_rc = rc == SR_SHARDED_EBC_END_OF_DATA ? END_OF_DATA : rc;
    if (rc == SR_SHARDED_EBC_END_OF_DATA) {
        sr_trainer_counters_add_diff(&p->counts, &after, &before);
        p->uncounted = p->counts;
        sr_sharded_ebc_stats(t->sebc, &p->end_stats);
    }
    if (p->next_rc < 0)
        snprintf(p->next_msg, sizeof p->next_msg, "%s", sr_error_message());
}

/* Start batch s's data exchange, behind what the sparse communicator has. */
static void ahead_data(struct sr_trainer *t, int64_t s)
{
    struct sr_pipe *p = &t->pipe;
    if (p->next_rc)
        return;
    sr_sharded_ebc_input_dist_data_start(t->sebc, p->ctx[s & 1], t->streams.sparse);
    p->in_flight = p->ctx[s & 1];
}

/* Step 1 (or the first after a start): its own batch through the ahead stages. */
static void ahead_all(struct sr_trainer *t, int64_t s)
{
    ahead_start(t, s);
    ahead_counts(t, s);
    ahead_data(t, s);
    t->pipe.ahead = 1;
}

/* This step's learning rates and number, on the device before its ops. */
static const struct sr_step_scalars *put_step_scalars(struct sr_trainer *t, int64_t step)
{
    struct sr_step_scalars v = {.dense_lr = sr_lr_at(&t->lr_dense, step),
                                .emb_lr = sr_lr_at(&t->lr_emb, step),
                                .step = step};
    return sr_step_scalars_buf_put(&t->scalars, &v, NULL);
}

/* The step's end: the last bucket (DP tables' gradients and the loss ride
 * in it; the global loss sum goes to loss_dst, unread), the DP tables'
 * update, the dense optimizer. */
static void optimizer_step(struct sr_trainer *t, int64_t step, const float *loss_sum,
                           const struct sr_step_scalars *scalars, float *loss_dst)
{
    float emb_lr = sr_lr_at(&t->lr_emb, step); /* also in the device block the updates read */
    size_t n_params;
    sr_trace_begin(SR_SPAN_OPTIMIZER, -1);
    sr_grad_buckets_finish(t->buckets, loss_sum, loss_dst, t->streams.compute);
    sr_trainer_emb_dp_update(t, emb_lr, step, t->streams.compute);
    float *params = sr_dlrm_params(t->dlrm, &n_params);
    sr_dense_optim_step(t->dense_optim, t->streams.compute, params,
                        sr_dlrm_grads(t->dlrm, &n_params), scalars);
    /* No wait at the end of the step: the loader waits for the copy out of
     * a ring slot before refilling it, the loss ring for the losses it reads. */
    sr_trace_end();
}

/* ---- the stages of batch i ------------------------------------------------------- */

/* Batch i's data exchange completes, if still in flight (else done by
 * sr_trainer_pipeline_pause, or before a graphed step). */
static void emb_data_wait(struct sr_trainer *t, struct sr_sharded_ebc_batch *b)
{
    if (t->pipe.in_flight != b)
        return;
    sr_sharded_ebc_input_dist_data_wait(t->sebc, b, t->streams.sparse);
    t->pipe.in_flight = NULL;
}

/* Batch i's embeddings up to the start of its output dist. In local mode
 * the lookup pools into t->pooled (bound: sr_trainer_pipeline_bind) and the
 * rest is host only. */
static void emb_forward_start(struct sr_trainer *t, struct sr_sharded_ebc_batch *b)
{
    sr_trace_begin(SR_SPAN_EMB_FORWARD, -1);
    emb_data_wait(t, b);
    sr_sharded_ebc_lookup(t->sebc, b, t->streams.compute);
    sr_sharded_ebc_output_dist_start(t->sebc, b, t->streams.sparse);
    if (t->pipe.emb_stream) { /* the update's sort beside the dense forward */
        sr_dev_event_record(t->dev, t->pipe.emb_fork, t->streams.compute);
        sr_dev_stream_wait_event(t->dev, t->pipe.emb_stream, t->pipe.emb_fork);
        sr_sharded_ebc_group_ids(t->sebc, b, t->pipe.emb_stream);
    }
    sr_trace_end();
}

/* The stream of the embedding backward's exchanges: the sparse stream, or
 * in a graphed step (local mode: nothing is exchanged) a stream of its own
 * that the update runs on too, joined back at the step's end (emb_join). */
static sr_stream_t emb_grad_stream(const struct sr_trainer *t)
{
    return t->pipe.emb_stream ? t->pipe.emb_stream : t->streams.sparse;
}

/* The pooled gradients leave for their owners, after backward made them. */
static void emb_grad_start(struct sr_trainer *t, struct sr_sharded_ebc_batch *b)
{
    struct sr_pipe *p = &t->pipe;
    sr_trace_begin(SR_SPAN_EMB_BACKWARD, -1);
    /* dpooled is backward's, on the compute stream */
    sr_dev_event_record(t->dev, p->dpooled_ready, t->streams.compute);
    sr_dev_stream_wait_event(t->dev, emb_grad_stream(t), p->dpooled_ready);
    sr_sharded_ebc_grad_dist_start(t->sebc, b, t->dpooled, emb_grad_stream(t));
    sr_trace_end();
}

static void emb_update(struct sr_trainer *t, struct sr_sharded_ebc_batch *b, float lr, int64_t step)
{
    struct sr_pipe *p = &t->pipe;
    sr_trace_begin(SR_SPAN_EMB_BACKWARD, -1);
    sr_sharded_ebc_grad_dist_wait(t->sebc, b, emb_grad_stream(t));
    sr_stream_t update_stream = p->emb_stream ? p->emb_stream : t->streams.compute;
    sr_sharded_ebc_update(t->sebc, b, lr, step, update_stream);
    if (p->emb_stream)
        sr_dev_event_record(t->dev, p->emb_join, p->emb_stream);
    sr_trace_end();
}

/* The end of the step's compute: the embedding backward's stream joins. */
static void emb_join(struct sr_trainer *t)
{
    if (t->pipe.emb_stream)
        sr_dev_stream_wait_event(t->dev, NULL, t->pipe.emb_join);
}

/* The status kept for this step when the exchange a step ahead found it. */
static int kept_status(struct sr_trainer *t)
{
    struct sr_pipe *p = &t->pipe;
    if (p->next_rc == END_OF_DATA)
        return END_OF_DATA;
    return sr_error_set(p->next_rc, "%s", p->next_msg);
}

static void start_loader(struct sr_trainer *t, int64_t step)
{
    sr_loader_start(&t->pipe.loader, step, t->cfg->steps, load_step, t, t->pipe.depth > 0);
    t->pipe.started = 1;
}

/* ---- the step ------------------------------------------------------------------- */

/* Where the next batch's ahead stages go in a step (after the lookup, after
 * the forward, after the gradient dist starts); nothing when the step runs
 * nothing ahead (depth 0, the last step) or as a graph (done before it). */
enum ahead_point { AHEAD_TAKE, AHEAD_COUNTS, AHEAD_DATA };

struct step_run {
    int64_t step;
    struct sr_batch *twin;            /* batch i's device twin */
    struct sr_sharded_ebc_batch *b;   /* its context */
    const struct sr_step_scalars *scalars;
    float *loss_dst;                  /* where the global loss sum goes; NULL: the
                                       * loss ring's next slot, taken at the optimizer */
    int ahead;                        /* run batch i+1's ahead stages inside */
};

static void ahead_at(struct sr_trainer *t, int64_t step, int ahead, enum ahead_point at)
{
    if (!ahead)
        return;
    sr_trace_set_thread_step(step + 1);
    if (at == AHEAD_TAKE)
        ahead_start(t, step + 1);
    else if (at == AHEAD_COUNTS)
        ahead_counts(t, step + 1);
    else
        ahead_data(t, step + 1);
    sr_trace_set_thread_step(0);
}

/* Batch i from its data wait to the dense optimizer, with batch i+1's ahead
 * stages where they overlap it. The one step body: --pipeline none runs it
 * with nothing ahead, sparse-dist with batch i+1 ahead, and a graphed step
 * is this body captured (nothing ahead: that was issued before). */
static void step_body(struct sr_trainer *t, const struct step_run *r)
{
    int B = t->cfg->batch_size;
    int64_t step = r->step;
    emb_forward_start(t, r->b);
    ahead_at(t, step, r->ahead, AHEAD_TAKE);
    sr_dlrm_forward_bottom(t->dlrm, t->streams.compute, r->twin->dense, B);
    sr_sharded_ebc_output_dist_wait(t->sebc, r->b, t->pooled, t->streams.sparse);
    sr_sharded_ebc_batch_wait(t->sebc, r->b, t->streams.compute);
    sr_dlrm_forward_top(t->dlrm, t->streams.compute, t->pooled, B, t->logits);
    ahead_at(t, step, r->ahead, AHEAD_COUNTS);

    sr_grad_buckets_begin(t->buckets);
    const float *loss_sum =
        sr_dlrm_backward_top(t->dlrm, t->streams.compute, r->twin->labels, NULL, B,
                             1.0f / (float)t->global_batch, t->dpooled);
    emb_grad_start(t, r->b);
    ahead_at(t, step, r->ahead, AHEAD_DATA);
    sr_dlrm_backward_top_weights(t->dlrm, t->streams.compute, B);
    sr_dlrm_backward_bottom(t->dlrm, t->streams.compute, B);
    emb_update(t, r->b, sr_lr_at(&t->lr_emb, step), step);
    float *loss_dst = r->loss_dst ? r->loss_dst : sr_loss_ring_push(&t->losses, step);
    optimizer_step(t, step, loss_sum, r->scalars, loss_dst);
    emb_join(t);
}

/* ---- CUDA graphs (--cuda-graphs): one rank, the EBC in local mode ------------- */

/* What a graph of the step depends on besides the slot's pointers: the batch
 * size, the number of ids and the ids per feature (the host metadata the
 * lookup passes to its kernels by value). */
static uint64_t batch_shape(const struct sr_batch *b)
{
    uint64_t h = sr_hash_bytes(SR_HASH_INIT, &b->batch_size, sizeof b->batch_size);
    int weighted = b->kjt.weights != NULL;
    h = sr_hash_bytes(h, &b->kjt.num_values, sizeof b->kjt.num_values);
    h = sr_hash_bytes(h, &weighted, sizeof weighted);
    return sr_hash_bytes(h, b->kjt.length_per_key, sizeof(int64_t) * (size_t)b->kjt.num_keys);
}

/* The step's graph for this ring slot and batch shape: from step 3 on (the
 * first steps size every lazily made plan and scratch), each slot's step is
 * captured once and replayed while its batch shape stays the same; a new
 * shape drops the old graph. NULL: run the step eagerly. The capture is of
 * step_body itself, its loss going to the fixed loss_stage. */
static sr_graph_t step_graph(struct sr_trainer *t, const struct step_run *r,
                             struct sr_loader_slot *cur)
{
    struct sr_pipe *p = &t->pipe;
    struct sr_step_graph *sg = &p->graphs[cur - p->loader.slots];
    uint64_t shape = batch_shape(r->twin);
    if (sg->graph && (sg->twin != r->twin || sg->shape != shape)) {
        t->dev->mem->graph_destroy(t->dev, sg->graph);
        sg->graph = NULL;
    }
    if (!sg->graph && r->step >= 3) {
        struct step_run cap = *r;
        cap.loss_dst = p->loss_stage;
        sr_device_spans_pause(t->trace.dspans, 1); /* no events inside a graph */
        t->dev->mem->capture_begin(t->dev, NULL);
        step_body(t, &cap);
        sr_graph_t g = t->dev->mem->capture_end(t->dev, NULL);
        sr_device_spans_pause(t->trace.dspans, 0);
        *sg = (struct sr_step_graph){.twin = r->twin, .shape = shape, .graph = g};
    }
    return sg->graph;
}

/* One training step at the trainer's pipeline depth (0: --pipeline none,
 * batch i alone; 1: sparse-dist, batch i+1's copy and input dist in flight
 * during step i, batch i+2 loading). Its global loss sum goes to the loss
 * ring, unread. With graphs (local mode: the input dist is host only)
 * batch i's data wait and the next batch's ahead stages (take, copy on the
 * copy stream, counts and data start) are issued before the step's graph
 * instead of inside the body, and the loss is copied from the graph's fixed
 * slot into the ring. A replay does not run the stages' host calls: the
 * EBC's record of batch i stays at its data wait, which local mode allows
 * (sharded_ebc.h). */
int sr_trainer_step(struct sr_trainer *t, int64_t step)
{
    struct sr_pipe *p = &t->pipe;
    int more = p->depth > 0 && step < t->cfg->steps;
    sr_graph_t graph = NULL;
    if (!p->started)
        start_loader(t, step);
    if (!p->ahead) {
        sr_trace_set_thread_step(0);
        ahead_all(t, step);
    }
    p->ahead = 0;
    if (p->next_rc)
        return kept_status(t);
    struct sr_loader_slot *cur = p->next;
    struct step_run r = {.step = step,
                         .twin = &cur->twin,
                         .b = p->ctx[step & 1],
                         .scalars = put_step_scalars(t, step),
                         .ahead = more};
    sr_dev_stream_wait_event(t->dev, NULL, cur->copied);
    if (p->loss_stage) {
        r.ahead = 0;
        sr_trace_set_thread_step(step);
        emb_data_wait(t, r.b);
        sr_trace_set_thread_step(0);
        ahead_at(t, step, more, AHEAD_TAKE);
        ahead_at(t, step, more, AHEAD_COUNTS);
        ahead_at(t, step, more, AHEAD_DATA);
        graph = step_graph(t, &r, cur);
    }
    if (graph) {
        t->dev->mem->graph_launch(t->dev, graph, NULL);
        sr_dev_copy(t->dev, sr_loss_ring_push(&t->losses, step), p->loss_stage, sizeof(float),
                    NULL);
        p->graph_steps++;
    } else {
        step_body(t, &r);
    }
    sr_dev_event_record(t->dev, cur->consumed, NULL);
    sr_loader_release(&p->loader); /* the loader waits for cur->copied before refilling it */
    p->ahead = more;
    return SR_OK;
}

/* ---- pauses and the end of a run ---------------------------------------------------- */

/* Before an evaluation: complete the next batch's data exchange, so that the
 * evaluation's collectives find the communicators as --pipeline none leaves
 * them (no more work in flight than the steps have had: the communicator's
 * work items were all made in step 1). The next step goes on from its
 * lookup. Collective; a no-op when nothing is in flight. */
void sr_trainer_pipeline_pause(struct sr_trainer *t)
{
    struct sr_pipe *p = &t->pipe;
    if (!p->in_flight)
        return;
    sr_trace_set_thread_step(p->next->step);
    sr_sharded_ebc_input_dist_data_wait(t->sebc, p->in_flight, t->streams.sparse);
    sr_trace_set_thread_step(0);
    p->in_flight = NULL;
}

/* Complete a data exchange left in flight (a run that stopped on an error
 * after issuing it: every rank did, in the same order), then stop the
 * loader. Collective when a data exchange is in flight. */
void sr_trainer_pipeline_stop(struct sr_trainer *t)
{
    struct sr_pipe *p = &t->pipe;
    sr_trainer_pipeline_pause(t);
    sr_loader_stop(&p->loader);
    p->started = p->ahead = 0;
}

void sr_trainer_streams_drain(struct sr_trainer *t)
{
    struct sr_step_streams *st = &t->streams;
    if (!t->dev)
        return;
    sr_dev_sync(t->dev, st->compute);
    if (st->sparse)
        sr_dev_sync(t->dev, st->sparse);
    if (st->dense)
        sr_dev_sync(t->dev, st->dense);
}

void sr_trainer_pipeline_free(struct sr_trainer *t)
{
    sr_trainer_streams_drain(t);
    if (t->streams.sparse)
        sr_dev_stream_destroy(t->dev, t->streams.sparse);
    if (t->streams.dense)
        sr_dev_stream_destroy(t->dev, t->streams.dense);
    t->streams.sparse = t->streams.dense = NULL;
    if (t->pipe.dpooled_ready)
        sr_dev_event_destroy(t->dev, t->pipe.dpooled_ready);
    t->pipe.dpooled_ready = NULL;
    for (int k = 0; k < SR_LOADER_SLOTS; k++)
        if (t->pipe.graphs[k].graph) {
            t->dev->mem->graph_destroy(t->dev, t->pipe.graphs[k].graph);
            t->pipe.graphs[k].graph = NULL;
        }
    sr_dev_free(t->dev, t->pipe.loss_stage);
    t->pipe.loss_stage = NULL;
    if (t->pipe.emb_stream) {
        sr_dev_sync(t->dev, t->pipe.emb_stream);
        sr_dev_event_destroy(t->dev, t->pipe.emb_fork);
        sr_dev_event_destroy(t->dev, t->pipe.emb_join);
        sr_dev_stream_destroy(t->dev, t->pipe.emb_stream);
        t->pipe.emb_stream = NULL;
    }
    for (int k = 0; k < 2; k++) {
        sr_sharded_ebc_batch_free(t->pipe.ctx[k]);
        t->pipe.ctx[k] = NULL;
    }
}

void sr_trainer_end_stats(const struct sr_trainer *t, struct sr_sharded_ebc_stats *out)
{
    *out = t->pipe.end_stats;
}

void sr_trainer_take_uncounted(struct sr_trainer *t, struct sr_comm_counters *out)
{
    *out = t->pipe.uncounted;
    memset(&t->pipe.uncounted, 0, sizeof t->pipe.uncounted);
}
