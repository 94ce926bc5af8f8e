/*
 * The pipelined training step (--pipeline sparse-dist, the default): while
 * batch i trains, batch i+1 is copied and its input dist is in flight, and
 * the loader thread loads batch i+2 (loader_thread.h). Step i, top to bottom
 * (sharded EBC stages, sharded_ebc.h; batch i in context ctx[i % 2]):
 *
 *   embedding.forward  i.data_wait, i.lookup, i.output_dist_start
 *   ahead (i+1)        take i+1 from the ring (data.wait), copy it,
 *                      i+1.counts_start
 *   bottom_mlp         overlaps i's output dist
 *   output_dist        i.output_dist_wait -> pooled
 *   interaction, top_mlp
 *   ahead (i+1)        i+1.counts_wait: the step's one host sync, a batch
 *                      ahead; an error or the end of the data found here is
 *                      kept for step i+1, and step i completes
 *   backward (top)     loss, top MLP, interaction -> dpooled; dense buckets
 *                      start their all-reduce as layers finish
 *   emb_grad_dist      i.grad_dist_start, then i+1.data_start (queued behind
 *                      it on the sparse communicator)
 *   backward (bottom)  overlaps i's gradient dist and i+1's data exchange
 *   embedding.backward i.grad_dist_wait, i.update
 *   optimizer          last bucket, dp update, dense optimizer (trainer.c)
 *   release            once batch i's copy has run, its ring slot goes back
 *                      to the loader (the step's one event wait)
 *
 * i+1's lookup comes in step i+1, after i's update and dp update, so the
 * tables it reads are those of sequential training: the losses and weights
 * equal --pipeline none's bit for bit (sharded_ebc.h, ordering rule 3). Every
 * rank makes the same calls in the same order. Spans of batch i+1 carry
 * step i+1 (sr_trace_set_thread_step). The last step (--steps) runs nothing
 * ahead. Step 1 first brings its own batch through the "ahead" stages.
 *
 * One rank without a plan (the plain EBC) has no input dist: the ahead
 * stages are the take and the copy.
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
    p->copy_stream = sr_dev_stream_create(t->dev);
    if (t->cfg->cuda_graphs > 0 && t->sebc)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--cuda-graphs covers one rank with unsharded tables; the sharded "
                            "step (several ranks or a plan) runs without graphs: leave it out");
    if (t->cfg->cuda_graphs >= 0 && !t->sebc && sr_dev_has_graphs(t->dev)) {
        p->loss_stage = sr_dev_alloc(t->dev, sizeof(float));
        p->emb_stream = sr_dev_stream_create(t->dev);
        p->emb_fork = sr_dev_event_create(t->dev);
        p->emb_join = sr_dev_event_create(t->dev);
        sr_ebc_set_backward_stream(t->ebc, p->emb_stream);
    }
    for (int k = 0; t->sebc && k < 2; k++) {
        int rc = sr_sharded_ebc_batch_init(&p->ctx[k], t->sebc);
        if (rc)
            return rc;
    }
    return SR_OK;
}

void sr_trainer_counters_add_diff(struct sr_comm_counters *acc,
                                  const struct sr_comm_counters *after,
                                  const struct sr_comm_counters *before)
{
    for (int k = 0; k < SR_COLL_COUNT; k++) {
        acc->calls[k] += after->calls[k] - before->calls[k];
        acc->calls_inter[k] += after->calls_inter[k] - before->calls_inter[k];
        acc->bytes_intra[k] += after->bytes_intra[k] - before->bytes_intra[k];
        acc->bytes_inter[k] += after->bytes_inter[k] - before->bytes_inter[k];
        acc->seconds[k] += after->seconds[k] - before->seconds[k];
        acc->seconds_total[k] += after->seconds_total[k] - before->seconds_total[k];
    }
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
        /* not waited for: the stages after it are ordered after it on the
         * stream; the slot goes back to the loader once its event has
         * passed (the end of the batch's step) */
        const struct sr_batch *pooled = sr_trainer_pool_batch(t, s);
        sr_dev_stream_wait_event(t->dev, p->copy_stream, slot->consumed);
        sr_batch_copy(&slot->twin, pooled ? pooled : &slot->host, p->copy_stream);
        sr_dev_event_record(t->dev, slot->copied, p->copy_stream);
        sr_trace_end();
    }
    if (!t->sebc)
        return;
    sr_trainer_comm_snapshot(t, &before);
    struct sr_sharded_ebc_batch *b = p->ctx[s & 1];
    if (slot->rc)
        sr_sharded_ebc_input_dist_counts_start_none(
            t->sebc, b, slot->rc == END_OF_DATA ? SR_SHARDED_EBC_END_OF_DATA : slot->rc);
    else {
        sr_dev_stream_wait_event(t->dev, NULL, slot->copied);
        sr_sharded_ebc_input_dist_counts_start(t->sebc, b, &slot->twin.kjt);
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
    if (t->sebc) {
        sr_trainer_comm_snapshot(t, &before);
        int rc = sr_sharded_ebc_input_dist_counts_wait(t->sebc, p->ctx[s & 1]);
        sr_trainer_comm_snapshot(t, &after);
        p->next_rc = rc == SR_SHARDED_EBC_END_OF_DATA ? END_OF_DATA : rc;
        if (rc == SR_SHARDED_EBC_END_OF_DATA) {
            sr_trainer_counters_add_diff(&p->counts, &after, &before);
            p->uncounted = p->counts;
            sr_sharded_ebc_stats(t->sebc, &p->end_stats);
        }
    }
    if (p->next_rc < 0)
        snprintf(p->next_msg, sizeof p->next_msg, "%s", sr_error_message());
}

/* Start batch s's data exchange, behind what the sparse communicator has. */
static void ahead_data(struct sr_trainer *t, int64_t s)
{
    struct sr_pipe *p = &t->pipe;
    if (!t->sebc || p->next_rc)
        return;
    sr_sharded_ebc_input_dist_data_start(t->sebc, p->ctx[s & 1]);
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

/* ---- one step ----------------------------------------------------------------------- */

/* Batch i's embeddings up to the start of its output dist (the plain EBC:
 * all of its forward). */
static int emb_forward_start(struct sr_trainer *t, struct sr_batch *twin,
                             struct sr_sharded_ebc_batch *b)
{
    int rc = SR_OK;
    sr_trace_begin(SR_SPAN_EMB_FORWARD, -1);
    if (t->sebc) {
        if (t->pipe.in_flight == b) /* else done by sr_trainer_pipeline_pause */
            sr_sharded_ebc_input_dist_data_wait(t->sebc, b);
        t->pipe.in_flight = NULL;
        sr_sharded_ebc_lookup(t->sebc, b);
        sr_sharded_ebc_output_dist_start(t->sebc, b);
    } else {
        sr_trace_begin(SR_SPAN_LOOKUP, -1);
        rc = sr_ebc_forward(t->ebc, &twin->kjt, t->pooled);
        sr_trace_end();
    }
    sr_trace_end();
    return rc;
}

static void emb_grad_start(struct sr_trainer *t, struct sr_sharded_ebc_batch *b)
{
    if (!t->sebc)
        return;
    sr_trace_begin(SR_SPAN_EMB_BACKWARD, -1);
    sr_sharded_ebc_grad_dist_start(t->sebc, b, t->dpooled);
    sr_trace_end();
}

static void emb_update(struct sr_trainer *t, struct sr_sharded_ebc_batch *b, float lr, int64_t step)
{
    sr_trace_begin(SR_SPAN_EMB_BACKWARD, -1);
    if (t->sebc) {
        sr_sharded_ebc_grad_dist_wait(t->sebc, b);
        sr_sharded_ebc_update(t->sebc, b, lr, step);
    } else {
        sr_ebc_backward(t->ebc, t->dpooled, lr, step);
    }
    sr_trace_end();
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
    sr_loader_start(&t->pipe.loader, step, t->cfg->steps, load_step, t);
    t->pipe.started = 1;
}

/* ---- CUDA graphs (--cuda-graphs): one rank, the plain EBC ---------------------- */

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

/* Batch i's compute on one rank with the plain EBC, from the lookup to the
 * dense optimizer, its global loss sum to loss_dst: what a graph records. */
static int plain_compute(struct sr_trainer *t, int64_t step, struct sr_batch *twin,
                         const struct sr_step_scalars *scalars, float *loss_dst)
{
    int B = t->cfg->batch_size, rc;
    if ((rc = emb_forward_start(t, twin, NULL)))
        return rc;
    sr_dlrm_forward_bottom(t->dlrm, twin->dense, B);
    sr_dlrm_forward_top(t->dlrm, t->pooled, B, t->logits);
    sr_grad_buckets_begin(t->buckets);
    const float *loss_sum = sr_dlrm_backward_top(t->dlrm, twin->labels, NULL, B,
                                                 1.0f / (float)t->global_batch, t->dpooled);
    /* the embedding backward (memory-bound) on its own stream, beside the
     * bottom MLP's backward and the dense optimizer; joined before the end */
    struct sr_pipe *p = &t->pipe;
    sr_dev_event_record(t->dev, p->emb_fork, NULL);
    sr_dev_stream_wait_event(t->dev, p->emb_stream, p->emb_fork);
    emb_update(t, NULL, sr_lr_at(&t->lr_emb, step), step);
    sr_dev_event_record(t->dev, p->emb_join, p->emb_stream);
    sr_dlrm_backward_bottom(t->dlrm, B);
    sr_trainer_optimizer_step_to(t, step, loss_sum, scalars, loss_dst);
    sr_dev_stream_wait_event(t->dev, NULL, p->emb_join);
    return SR_OK;
}

/* The step as one graph launch: from step 3 on (the first steps size every
 * lazily made plan and scratch), each ring slot's step is captured once and
 * replayed while its batch shape stays the same; a new shape is run eagerly
 * and captured again. Outside the graph: the step scalars' copy, the wait
 * for the batch's copy, the next batch's take and copy (on the copy stream,
 * issued before the graph instead of after the lookup), the loss's copy
 * into the ring, the slot's events. Inside it, the embedding backward forks
 * to a stream of its own and joins before the graph's end. */
static int graphed_step(struct sr_trainer *t, int64_t step, struct sr_loader_slot *cur,
                        const struct sr_step_scalars *scalars, int more)
{
    struct sr_pipe *p = &t->pipe;
    struct sr_batch *twin = &cur->twin;
    struct sr_step_graph *sg = &p->graphs[cur - p->loader.slots];
    uint64_t shape = batch_shape(twin);
    int rc;
    sr_dev_stream_wait_event(t->dev, NULL, cur->copied);
    sr_trace_set_thread_step(step + 1);
    if (more)
        ahead_start(t, step + 1);
    sr_trace_set_thread_step(0);
    if (sg->graph && (sg->twin != twin || sg->shape != shape)) {
        t->dev->mem->graph_destroy(t->dev, sg->graph);
        sg->graph = NULL;
    }
    if (!sg->graph && step >= 3) {
        sr_device_spans_pause(t->dspans, 1); /* no events inside a graph */
        t->dev->mem->capture_begin(t->dev, NULL);
        rc = plain_compute(t, step, twin, scalars, p->loss_stage);
        sr_graph_t g = t->dev->mem->capture_end(t->dev, NULL);
        sr_device_spans_pause(t->dspans, 0);
        if (rc) {
            t->dev->mem->graph_destroy(t->dev, g);
            return rc;
        }
        *sg = (struct sr_step_graph){.twin = twin, .shape = shape, .graph = g};
    }
    if (sg->graph) {
        t->dev->mem->graph_launch(t->dev, sg->graph, NULL);
        sr_dev_copy(t->dev, sr_loss_ring_push(&t->losses, step), p->loss_stage, sizeof(float),
                    NULL);
        p->graph_steps++;
    } else if ((rc = plain_compute(t, step, twin, scalars, sr_loss_ring_push(&t->losses, step)))) {
        return rc;
    }
    sr_dev_event_record(t->dev, cur->consumed, NULL);
    sr_dev_event_sync(t->dev, cur->copied); /* the host batch is no longer read */
    sr_loader_release(&p->loader);
    p->ahead = more;
    return SR_OK;
}

int sr_trainer_pipeline_step(struct sr_trainer *t, int64_t step)
{
    struct sr_pipe *p = &t->pipe;
    int B = t->cfg->batch_size, more = step < t->cfg->steps, rc;
    float emb_lr = sr_lr_at(&t->lr_emb, step);
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
    struct sr_batch *twin = &cur->twin;
    struct sr_sharded_ebc_batch *b = p->ctx[step & 1];
    const struct sr_step_scalars *scalars = sr_trainer_put_step_scalars(t, step);
    if (p->loss_stage)
        return graphed_step(t, step, cur, scalars, more);

    sr_dev_stream_wait_event(t->dev, NULL, cur->copied);
    if ((rc = emb_forward_start(t, twin, b)))
        return rc;
    sr_trace_set_thread_step(step + 1);
    if (more)
        ahead_start(t, step + 1);
    sr_trace_set_thread_step(0);
    sr_dlrm_forward_bottom(t->dlrm, twin->dense, B);
    if (t->sebc)
        sr_sharded_ebc_output_dist_wait(t->sebc, b, t->pooled);
    sr_dlrm_forward_top(t->dlrm, t->pooled, B, t->logits);
    sr_trace_set_thread_step(step + 1);
    if (more)
        ahead_counts(t, step + 1);
    sr_trace_set_thread_step(0);

    sr_grad_buckets_begin(t->buckets);
    const float *loss_sum = sr_dlrm_backward_top(t->dlrm, twin->labels, NULL, B,
                                                 1.0f / (float)t->global_batch, t->dpooled);
    emb_grad_start(t, b);
    sr_trace_set_thread_step(step + 1);
    if (more)
        ahead_data(t, step + 1);
    sr_trace_set_thread_step(0);
    sr_dlrm_backward_bottom(t->dlrm, B);
    emb_update(t, b, emb_lr, step);
    sr_trainer_optimizer_step(t, step, loss_sum, scalars);
    sr_dev_event_record(t->dev, cur->consumed, NULL);
    sr_dev_event_sync(t->dev, cur->copied); /* the host batch is no longer read */
    sr_loader_release(&p->loader);
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
    sr_sharded_ebc_input_dist_data_wait(t->sebc, p->in_flight);
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

void sr_trainer_pipeline_free(struct sr_trainer *t)
{
    for (int k = 0; k < SR_LOADER_SLOTS; k++)
        if (t->pipe.graphs[k].graph) {
            t->dev->mem->graph_destroy(t->dev, t->pipe.graphs[k].graph);
            t->pipe.graphs[k].graph = NULL;
        }
    sr_dev_free(t->dev, t->pipe.loss_stage);
    t->pipe.loss_stage = NULL;
    if (t->pipe.emb_stream) {
        sr_dev_sync(t->dev, t->pipe.emb_stream);
        sr_ebc_set_backward_stream(t->ebc, NULL);
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
    if (t->cfg->pipeline == SR_PIPELINE_SPARSE_DIST)
        *out = t->pipe.end_stats;
    else
        sr_sharded_ebc_stats(t->sebc, out);
}

void sr_trainer_take_uncounted(struct sr_trainer *t, struct sr_comm_counters *out)
{
    *out = t->pipe.uncounted;
    memset(&t->pipe.uncounted, 0, sizeof t->pipe.uncounted);
}
