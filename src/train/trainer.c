/*
 * The training loop. One step on each of W ranks, top to bottom:
 *
 *   load        this rank's slice of the global batch: samples
 *               [(step-1)*G + r*B, (step-1)*G + (r+1)*B) of the stream (G = W*B),
 *               in the pinned host batch; its KJT checked and each table's id
 *               policy applied there, on the host (trainer_batch.c)
 *   copy        host batch -> its device twin, which the stages below read
 *   lookup      embedding stage: KJT -> pooled (B, F*D) (sharded: input dist,
 *               lookup on the owners, output dist)
 *   dense_fwd   bottom MLP, interaction, top MLP -> logits (B)
 *   backward    dlogit = (sigmoid(z) - y) / G; dense gradients, dpooled; dense
 *               gradient buckets start their all-reduce as layers finish
 *   emb_update  pooled gradients to the owners; fused sparse optimizer in place
 *   optimizer   last bucket (with the DP tables' gradients and the loss), then
 *               the dense optimizer on the flat parameter block
 *
 * That is --pipeline none. The default, --pipeline sparse-dist, runs the
 * same stages with batch i+1's copy and input dist, and batch i+2's load,
 * in flight while batch i trains: one step body for both, the depth a
 * parameter (trainer_step.c); they give the same bits.
 *
 * The host does not wait for the step's loss: the loss op writes each rank's
 * sum to device memory, the last bucket sums it over ranks into this step's
 * slot of the loss ring (loss_ring.h), and the loop reads the ring back, one
 * sync for many steps, only when a log or metrics line, an evaluation, the
 * end of the run or a full ring asks. A NaN or infinite loss is found there:
 * the error names the first bad step, up to min(--log-every, 50) steps after
 * it happened. The learning rates and the step reach the dense optimizer as
 * device values: one block per step (struct sr_step_scalars, optim.h)
 * copied to the device before the step's ops.
 *
 * Each stage is a span (shardrec/trace.h): the same clock reads time the
 * stages for the summary (per-step rows in step_ns) and, under --trace,
 * record them for the trace file (trace_file.c).
 *
 * Everything is allocated in sr_trainer_init; the loop only reuses buffers.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef SR_USE_OMP
#include <omp.h>
#endif

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/fault.h"
#include "shardrec/weights_io.h"
#include "train/trainer_internal.h"

/* ---- construction ------------------------------------------------------------ */

static int open_reader(struct sr_trainer *t, struct sr_reader **r, char (*paths)[SR_PATH_MAX],
                       int n, const int64_t *rows, int keep_partial)
{
    int shuffle = !keep_partial && t->cfg->shuffle; /* training data only, never eval */
    const char *list[SR_MAX_DATA_FILES];
    struct sr_reader_options opt = {.rank = t->rank,
                                    .world = t->world_size,
                                    .batch_size = t->cfg->batch_size,
                                    .skip_bad_lines = t->cfg->skip_bad_lines,
                                    .keep_partial = keep_partial,
                                    .max_line = 0,
                                    .shuffle = shuffle,
                                    .seed = t->cfg->seed,
                                    .block_samples = shuffle ? t->cfg->shuffle_block : 0};
    for (int i = 0; i < n; i++)
        list[i] = paths[i];
    int rc = sr_reader_open(r, list, n, t->cfg->num_features, rows, &opt);
    if (!rc && sr_reader_num_dense(*r) != t->cfg->num_dense)
        rc = sr_error_set(SR_ERR_DATA, "%s: %d dense features, the model takes %d", paths[0],
                          sr_reader_num_dense(*r), t->cfg->num_dense);
    return rc;
}

/* The readers of --data and --eval-data (`eval`: --eval-data alone), and
 * each feature's bound: its most ids in a batch, the larger of the two
 * readers'. */
static int open_files(struct sr_trainer *t, const int64_t *rows)
{
    struct sr_train_config *cfg = t->cfg;
    int rc = SR_OK;
    if (cfg->n_data && (rc = open_reader(t, &t->reader, cfg->data_paths, cfg->n_data, rows, 0)))
        return rc;
    if (cfg->n_eval_data &&
        (rc = open_reader(t, &t->eval_reader, cfg->eval_data_paths, cfg->n_eval_data, rows, 1)))
        return rc;
    for (int f = 0; f < cfg->num_features; f++) {
        int64_t n = t->reader ? sr_reader_feature_max_values(t->reader, f) : 0;
        int64_t e = t->eval_reader ? sr_reader_feature_max_values(t->eval_reader, f) : 0;
        t->feature_max_values[f] = n > e ? n : e;
    }
    return SR_OK;
}

/* The files' readers, before the plan and the memory estimate (collective,
 * also when a rank fails), and each feature's bound agreed by all ranks:
 * with --data the estimate takes a sample's ids from the bounds
 * (cfg->data_ids_max), not from --ids-per-feature. */
static int init_files(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    int64_t *rows = t->feature_rows; /* the loader's id limits, also the data's rows */
    for (int f = 0; f < cfg->num_features; f++) {
        const struct sr_table_config *tc = &cfg->tables[cfg->feature_table[f]];
        rows[f] = tc->num_embeddings;
        t->feature_policy[f] = tc->id_policy;
    }
    if (!cfg->n_data && !cfg->n_eval_data)
        return SR_OK;
    int rc = open_files(t, rows);
    if (t->world_size > 1)
        rc = sr_trainer_agree(t, rc, cfg->n_data || cfg->eval_only ? "--data" : "--eval-data",
                              "could not open its data");
    if (rc)
        return rc;
    sr_trainer_agree_feature_bounds(t);
    for (int f = 0; f < cfg->num_features; f++)
        cfg->data_ids_max[f] = (t->feature_max_values[f] + cfg->batch_size - 1) / cfg->batch_size;
    return SR_OK;
}

/* The synthetic generator (also the teacher of files made by `gen`) and the
 * batches, sized by the sources (after the memory check). */
static int init_data(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    static const char *keys[SR_MAX_FEATURES];
    struct sr_synth_config sc;
    for (int f = 0; f < cfg->num_features; f++)
        keys[f] = cfg->feature_names[f];
    int rc = sr_train_config_synth(cfg, t->feature_rows, &sc);
    if (!rc)
        rc = sr_synth_init(&t->synth, &sc);
    if (rc)
        return rc;
    if (!t->reader && !t->eval_reader) {
        for (int f = 0; f < cfg->num_features; f++)
            t->feature_max_values[f] = sr_synth_feature_max_values(t->synth, f, cfg->batch_size);
        sr_trainer_batch_init(t, sr_synth_max_values(t->synth, cfg->batch_size), 0, keys);
        return SR_OK;
    }
    int64_t mv = t->reader ? sr_reader_max_values(t->reader) : 0;
    if (t->eval_reader && sr_reader_max_values(t->eval_reader) > mv)
        mv = sr_reader_max_values(t->eval_reader);
    sr_trainer_batch_init(t, mv,
                          (t->reader && sr_reader_has_weights(t->reader)) ||
                              (t->eval_reader && sr_reader_has_weights(t->eval_reader)),
                          keys);
    return SR_OK;
}

static int init_model(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    struct sr_dlrm_config dc;
    struct sr_optim_config emb_opt = sr_optim_config_default(cfg->emb_optimizer);
    struct sr_optim_config dense_opt = sr_optim_config_default(cfg->optimizer);
    size_t n_params;
    int rc;

    sr_train_config_dlrm(cfg, &dc);
    if ((rc = sr_trainer_emb_init(t, &emb_opt)))
        return rc;
    if ((rc = sr_dlrm_init(&t->dlrm, t->dev, &dc, cfg->batch_size, cfg->seed)))
        return rc;
    sr_dlrm_params(t->dlrm, &n_params);
    sr_dense_optim_init(&t->dense_optim, t->dev, &dense_opt, n_params);
    rc = sr_lr_schedule_parse(cfg->lr_schedule, cfg->lr, &t->lr_dense);
    if (rc)
        return sr_error_set(rc, "--lr-schedule: %s", sr_error_message());
    sr_lr_schedule_parse(cfg->lr_schedule, cfg->emb_lr > 0 ? cfg->emb_lr : cfg->lr, &t->lr_emb);
    return SR_OK;
}

static void on_grad_ready(void *ctx, size_t offset, size_t count, sr_stream_t s)
{
    sr_grad_buckets_ready(ctx, offset, count, s);
}

/* The layers' gradient ranges in the order backward finishes them (the
 * flat block holds the bottom layers, the cross layers, then the top
 * layers; backward reports them from the end); the DP tables' gradients
 * ride in the last bucket. */
static void init_buckets(struct sr_trainer *t)
{
    size_t sizes[2 * SR_MLP_MAX + SR_DCN_MAX_LAYERS], n, n_dp, offset;
    int n_layers = sr_dlrm_num_grad_groups(t->dlrm);
    float *grads = sr_dlrm_grads(t->dlrm, &n);
    float *dp = sr_trainer_emb_dp_grads(t, &n_dp);
    for (int l = 0; l < n_layers; l++)
        sr_dlrm_grad_group(t->dlrm, l, &offset, &sizes[n_layers - 1 - l]);
    sr_grad_buckets_init(&t->buckets, t->dense, t->streams.dense, grads, n, dp, n_dp, sizes,
                         n_layers, (size_t)t->cfg->bucket_kib << 10, t->cfg->dense_comm_dtype);
    sr_dlrm_set_grad_ready(t->dlrm, on_grad_ready, t->buckets);
}

/* Every rank reads its loss ring, and stops on a NaN, at the same steps: at
 * rank 0's log lines (every step with a progress line, which only rank 0
 * knows: it is broadcast), its metrics lines (--metrics and --log-every are
 * the same on every rank: sr_trainer_check_same), evaluations, the end, and
 * when the ring is full. The ring holds a log interval, at most
 * SR_LOSS_RING_MAX steps (the longest a NaN may go unnoticed). */
static void init_step_state(struct sr_trainer *t)
{
    int64_t every = t->progress ? 1 : t->cfg->log_every;
    sr_comm_broadcast(t->world, &every, &every, 1, SR_DTYPE_I64, 0, NULL, NULL);
    t->log_every = every;
    sr_loss_ring_init(&t->losses, t->dev, every < SR_LOSS_RING_MAX ? (int)every : SR_LOSS_RING_MAX);
    sr_step_scalars_buf_init(&t->scalars, t->dev);
    /* the embedding optimizers read emb_lr and step from the block too */
    const struct sr_step_scalars *block = t->scalars.block;
    sr_sharded_ebc_set_update_scalars(t->sebc, &block->emb_lr, &block->step);
}

static void init_buffers(struct sr_trainer *t)
{
    size_t B = (size_t)t->cfg->batch_size;
    t->pooled_dim = sr_sharded_ebc_out_dim(t->sebc);
    t->pooled = sr_dev_alloc_named(t->dev, sizeof(float) * B * (size_t)t->pooled_dim,
                                   "the pooled embeddings (batch x features x dim)");
    t->dpooled = sr_dev_alloc_named(t->dev, sizeof(float) * B * (size_t)t->pooled_dim,
                                    "the pooled embeddings' gradient");
    t->logits = sr_dev_alloc(t->dev, sizeof(float) * B);
}

/* --batch-size is per rank; --global-batch-size G sets B = G / W. */
static int init_batch_size(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    int64_t G = cfg->global_batch_size, W = t->world_size;
    if (G > 0) {
        if (G % W != 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "--global-batch-size %" PRId64 " does not divide by the world "
                                "size %" PRId64 "; HINT: use a multiple of %" PRId64,
                                G, W, W);
        cfg->batch_size = (int)(G / W);
    }
    t->global_batch = (int64_t)cfg->batch_size * W;
    return SR_OK;
}

static int open_outputs(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    t->progress = cfg->progress >= 0 ? cfg->progress : (t->log && isatty(fileno(t->log)));
    if (t->rank != 0 || !cfg->metrics_path[0])
        return SR_OK;
    t->metrics = fopen(cfg->metrics_path, "w");
    if (!t->metrics)
        return sr_error_set(SR_ERR_IO, "--metrics %s: cannot open for writing", cfg->metrics_path);
    return SR_OK;
}

static int init_parts(struct sr_trainer *t, FILE *log)
{
    struct sr_train_config *cfg = t->cfg;
    int rc;
    t->log = t->rank == 0 ? log : NULL; /* warnings at start-up go there too */
    sr_trainer_warn_loader_threads(t);
    if ((rc = init_batch_size(t)) || (rc = init_files(t)) || (rc = sr_trainer_init_plan(t)) ||
        (rc = sr_trainer_check_same(t)))
        return rc;
    if ((rc = init_data(t)) || (rc = sr_trainer_init_eval(t)))
        return rc;
    if (cfg->n_data && !cfg->steps_set)
        cfg->steps = INT64_MAX / 4; /* one pass over --data */
    if ((rc = init_model(t)))
        return rc;
    if ((rc = sr_trainer_pipeline_init(t)))
        return rc;
    init_buffers(t);
    sr_trainer_pipeline_bind(t);
    init_buckets(t);
    if ((rc = sr_trainer_pool_init(t)))
        return rc;
    if ((rc = open_outputs(t)))
        return rc;
    init_step_state(t);
    t->acct.step_rows = cfg->steps < SR_STEP_ROWS_MAX ? cfg->steps : SR_STEP_ROWS_MAX;
    t->acct.step_ns = sr_calloc((size_t)t->acct.step_rows * SR_SPAN_COUNT, sizeof *t->acct.step_ns);
    t->acct.reservoir = 0x9e3779b97f4a7c15ULL;
    if ((rc = sr_trainer_trace_init(t)))
        return rc;
    if (cfg->eval_samples > 0 && !cfg->n_data && !t->eval_reader)
        sr_synth_bounds(t->synth, SR_SYNTH_EVAL_BASE, cfg->eval_samples, &t->eval.teacher_auc,
                        &t->eval.dense_only_auc, &t->eval.sparse_share);
    return sr_checkpoint_init(t); /* --resume: the model continues from its step */
}

int sr_trainer_init(struct sr_trainer **out, struct sr_train_config *cfg, FILE *log)
{
    struct sr_trainer *t = sr_calloc(1, sizeof *t);
    int rc;
    *out = NULL;
    t->cfg = cfg;
    t->dev = sr_device_cpu();
    if ((rc = sr_train_config_check(cfg)) || (rc = sr_checkpoint_check_config(cfg)) ||
        (rc = sr_trainer_init_comms(t)) ||
        (rc = sr_fault_init(getenv("SR_FAULT"), t->rank)) || /* tests: docs/user-guide.md */
        (rc = init_parts(t, log))) {
        sr_trainer_free(t);
        return rc;
    }
    *out = t;
    return SR_OK;
}

int sr_trainer_rank(const struct sr_trainer *t)
{
    return t->rank;
}

void sr_trainer_free(struct sr_trainer *t)
{
    if (!t)
        return;
    sr_trainer_pipeline_stop(t); /* before the trace and the contexts go */
    sr_trainer_streams_drain(t); /* before the buffers the streams use */
    sr_checkpoint_free(t);
    sr_trainer_prediction_free(t);
    if (t->metrics)
        fclose(t->metrics);
    sr_trainer_trace_free(t);
    sr_free(t->acct.step_ns);
    if (t->reader && t->log)
        sr_reader_report(t->reader, t->log);
    if (t->eval_reader && t->log) /* its last pass */
        sr_reader_report(t->eval_reader, t->log);
    sr_dev_free(t->dev, t->pooled);
    sr_dev_free(t->dev, t->dpooled);
    sr_dev_free(t->dev, t->logits);
    sr_loss_ring_free(&t->losses);
    sr_step_scalars_buf_free(&t->scalars);
    sr_trainer_free_eval(t);
    sr_grad_buckets_free(t->buckets);
    sr_dense_optim_free(t->dense_optim);
    sr_dlrm_free(t->dlrm);
    sr_trainer_pipeline_free(t);
    sr_trainer_emb_free(t);
    sr_reader_free(t->reader);
    sr_reader_free(t->eval_reader);
    sr_trainer_batch_free(t);
    sr_synth_free(t->synth);
    sr_trainer_free_comms(t);
    sr_free(t);
}

/* ---- one training step ------------------------------------------------------------ */

#define END_OF_DATA SR_TRAINER_END_OF_DATA

/* ---- the loop ------------------------------------------------------------------------ */

/* The data ended at `step` on some ranks only (their --data differ): every
 * rank has stopped there; rank 0 says so. */
static void report_uneven_end(struct sr_trainer *t, int64_t step)
{
    struct sr_sharded_ebc_stats st;
    if (!t->log)
        return;
    sr_trainer_end_stats(t, &st);
    if (st.ranks_ended == 0 || st.ranks_ended == t->world_size)
        return;
    fprintf(t->log,
            "warning: the --data of rank %d%s ended at step %" PRId64 " while %d other ranks "
            "still had data; every rank stopped there, after %" PRId64 " steps\n"
            "HINT: every rank must read the same --data files (the same contents, not only the "
            "same paths and sizes)\n",
            st.first_ended, st.ranks_ended > 1 ? " (and other ranks)" : "", step,
            t->world_size - st.ranks_ended, step - 1);
}

static int due(int64_t step, int64_t every, int64_t last)
{
    return step == last || (every > 0 && step % every == 0);
}

/* Add the host waits since *before (sr_dev_sync_count) to the training's. */
static void count_syncs(struct sr_trainer *t, const uint64_t before[2])
{
    uint64_t events, syncs = sr_dev_sync_count(&events);
    t->acct.syncs[0] += syncs - before[0];
    t->acct.syncs[1] += events - before[1];
}

/* A step with its collectives and host waits added to the training counters
 * (not the end of the data: the ranks' agreement to stop is no step, even
 * when the pipeline reaches it during the step before). */
static int counted_step(struct sr_trainer *t, int64_t step)
{
    struct sr_comm_counters before, after, end, none = {0};
    uint64_t syncs[2];
    sr_trainer_comm_snapshot(t, &before);
    syncs[0] = sr_dev_sync_count(&syncs[1]);
    int rc = sr_trainer_step(t, step);
    if (rc == END_OF_DATA)
        return rc;
    count_syncs(t, syncs);
    sr_trainer_comm_snapshot(t, &after);
    sr_trainer_counters_add_diff(&t->acct.comm, &after, &before);
    sr_trainer_take_uncounted(t, &end); /* the pipeline's look at the end, a step ahead */
    sr_trainer_counters_add_diff(&t->acct.comm, &none, &end);
    return rc;
}

/* Keep this step's stage times: the first step_rows steps, then a uniform
 * sample of all steps (reservoir sampling; no allocation). */
static void keep_stage_times(struct sr_trainer *t)
{
    int64_t ns[SR_SPAN_COUNT], row = t->acct.step_seen++;
    sr_trace_take_stage_ns(ns);
    if (row >= t->acct.step_rows) {
        t->acct.reservoir ^= t->acct.reservoir << 13, t->acct.reservoir ^= t->acct.reservoir >> 7;
        t->acct.reservoir ^= t->acct.reservoir << 17;
        row = (int64_t)(t->acct.reservoir % (uint64_t)t->acct.step_seen);
        if (row >= t->acct.step_rows)
            return;
    } else {
        t->acct.step_kept++;
    }
    memcpy(t->acct.step_ns + row * SR_SPAN_COUNT, ns, sizeof ns);
}

/* The step at whose start recording goes on: with the pipeline, the loads
 * and input dists of the window's first batches happen up to
 * SR_LOADER_SLOTS steps earlier (the trace keeps only the window's steps:
 * sr_trace_set_window). */
static int64_t record_from(const struct sr_trainer *t)
{
    int64_t ahead = t->pipe.depth > 0 ? SR_LOADER_SLOTS : 0;
    int64_t first = t->ckpt.first_step; /* 1, or the step after a resumed checkpoint */
    return t->trace.first - ahead > first ? t->trace.first - ahead : first;
}

/* One step between the span that times it and the --trace-steps window. */
static int timed_step(struct sr_trainer *t, int64_t step)
{
    int64_t ns[SR_SPAN_COUNT];
    if (t->trace.on && step == record_from(t)) {
        sr_device_spans_reanchor(t->trace.dspans);
        sr_trace_set_recording(1);
    }
    sr_fault_step(step); /* SR_FAULT kill or stop (tests); else nothing */
    sr_trace_set_step(step);
    sr_comm_set_step(step);
    sr_trace_take_stage_ns(ns); /* evaluation's, between steps */
    sr_trace_begin(SR_SPAN_STEP, -1);
    int rc = counted_step(t, step);
    sr_trace_end();
    sr_device_spans_poll(t->trace.dspans); /* what the device has run by now, never waiting */
    if (rc == SR_OK)
        keep_stage_times(t);
    if (t->trace.on && step == t->trace.last)
        sr_trace_set_recording(0);
    return rc;
}

static void fill_result(struct sr_trainer *t, struct sr_trainer_result *res, int64_t steps,
                        double train_seconds, double loss, uint64_t allocs_after_first)
{
    res->steps = steps;
    res->train_seconds = train_seconds;
    res->samples_per_s =
        train_seconds > 0 ? (double)steps * (double)t->global_batch / train_seconds : 0;
    res->last_loss = loss;
    res->eval = t->eval.last;
    res->teacher_auc = t->eval.teacher_auc;
    res->dense_only_auc = t->eval.dense_only_auc;
    res->allocs_after_first_step = sr_alloc_count() - allocs_after_first - t->ckpt.allocs;
}

/* Read the loss ring into the interval (its sum) and *loss (the last step's):
 * SR_ERR_NUMERIC at the first non-finite loss. */
static int read_losses(struct sr_trainer *t, struct sr_interval *iv, double *loss)
{
    uint64_t syncs[2];
    syncs[0] = sr_dev_sync_count(&syncs[1]);
    int rc = sr_loss_ring_read(&t->losses, (double)t->global_batch, &iv->loss_sum, loss);
    count_syncs(t, syncs);
    return rc;
}

static int run_steps(struct sr_trainer *t, struct sr_trainer_result *res, sr_event_t steady0,
                     sr_event_t steady1)
{
    const struct sr_train_config *cfg = t->cfg;
    struct sr_interval iv = {0};
    double start = sr_now_s(), train_seconds = 0, loss = 0;
    uint64_t allocs_after_first = 0;
    int64_t log_every = t->log_every, step; /* rank 0's: 1 with a progress line */
    int rc = SR_OK, ended = 0;

    /* steady state: device events after step `warm` and after the last step
     * (no wait in the middle of the run) */
    const int64_t first = t->ckpt.first_step; /* 1, or the step after a checkpoint */
    int64_t warm = (cfg->steps - first + 1) / 5 < 20 ? (cfg->steps - first + 1) / 5 : 20;
    int steady_started = 0;
    memset(res, 0, sizeof *res);
    warm += first - 1;
    t->ckpt.last_save_s = start; /* --checkpoint-every Nm counts from here */
    for (step = first; step <= cfg->steps && !ended; step++) {
        double s0 = sr_now_s();
        if ((rc = timed_step(t, step)) == END_OF_DATA) {
            ended = 1; /* one pass over --data done: evaluate and log the last step */
            report_uneven_end(t, step);
            step--;
        } else if (rc) {
            int bad = read_losses(t, &iv, &loss); /* a bad loss before this step came first */
            return bad ? bad : rc;
        } else {
            double dt = sr_now_s() - s0;
            if (step == first)
                allocs_after_first = sr_alloc_count();
            train_seconds += dt;
            iv.steps++, iv.seconds += dt;
            if (warm >= first && step == warm) {
                sr_dev_event_record(t->dev, steady0, NULL);
                steady_started = 1;
            }
        }
        int last = ended || step == cfg->steps;
        int evaluated = cfg->eval_samples > 0 && (last || due(step, cfg->eval_every, 0));
        int logged = iv.steps && (last || evaluated || due(step, log_every, 0) ||
                                  (cfg->metrics_path[0] && due(step, cfg->log_every, 0)));
        if ((last || evaluated || logged || sr_loss_ring_full(&t->losses)) &&
            (rc = read_losses(t, &iv, &loss)))
            return rc;
        if (evaluated)
            sr_trainer_pipeline_pause(t); /* the next batch's exchange completes first */
        sr_device_spans_pause(t->trace.dspans, evaluated); /* stages of steps only */
        if (evaluated && (rc = sr_trainer_evaluate(t, &t->eval.last)))
            return rc;
        sr_device_spans_pause(t->trace.dspans, 0);
        if (logged) {
            sr_trainer_log_interval(t, step, loss, &iv, evaluated, sr_now_s() - start);
            memset(&iv, 0, sizeof iv);
        }
        if (sr_checkpoint_due(t, step, last))
            rc = sr_checkpoint_save(t, step, last); /* complete on return at the last */
        else
            rc = sr_checkpoint_poll(t, step); /* a save being written: done everywhere? */
        if (rc)
            return rc;
    }
    fill_result(t, res, step - first, train_seconds, loss, allocs_after_first);
    if (steady_started && step - 1 > warm) {
        sr_dev_event_record(t->dev, steady1,
                            NULL); /* (a final evaluation counts: steady runs skip it) */
        sr_dev_event_sync(t->dev, steady1);
        res->steady_first = warm + 1;
        res->steady_steps = step - 1 - warm;
        res->steady_seconds = 1e-3 * (double)sr_dev_event_elapsed_ms(t->dev, steady0, steady1);
    }
    return SR_OK;
}

/* The steps, with the steady-state events made before the loop's
 * allocation count and freed on every way out. */
static int run_loop(struct sr_trainer *t, struct sr_trainer_result *res)
{
    sr_event_t steady0 = sr_dev_event_create(t->dev), steady1 = sr_dev_event_create(t->dev);
    int rc = run_steps(t, res, steady0, steady1);
    sr_dev_event_destroy(t->dev, steady0);
    sr_dev_event_destroy(t->dev, steady1);
    return rc;
}

int sr_trainer_run(struct sr_trainer *t, struct sr_trainer_result *res)
{
    int rc = run_loop(t, res);
    sr_trainer_pipeline_stop(t); /* no other thread records while the trace is read */
    sr_trace_set_recording(0);
    sr_device_spans_drain(t->trace.dspans);
    if (rc)
        return rc;
    /* the results written on the way: SR_ERR_WRITE (rank 0) when one failed */
    rc = t->trace.on ? sr_trainer_trace_write(t) : SR_OK; /* after the loop's allocation count */
    char trace_msg[1024];
    snprintf(trace_msg, sizeof trace_msg, "%s", rc ? sr_error_message() : "");
    int metrics_rc = sr_trainer_close_metrics(t);
    if (rc && metrics_rc)
        return sr_error_set(rc, "%s; and %s", trace_msg, sr_error_message());
    return rc ? sr_error_set(rc, "%s", trace_msg) : metrics_rc;
}

/* ---- weights files ------------------------------------------------------------------- */

/* The tables of a one-rank sharded EBC in local mode, whole (weights_io.h). */
static float **local_tables(struct sr_trainer *t)
{
    const struct sr_ebc_config *ec = sr_sharded_ebc_config(t->sebc);
    float **tables = sr_calloc((size_t)ec->num_tables + 1, sizeof *tables);
    for (int k = 0; k < ec->num_tables; k++)
        tables[k] = sr_sharded_ebc_local_weights(t->sebc, k);
    return tables;
}

/* Every rank loads its own shards (weights_io.h); collective: when one rank
 * fails, all fail. */
static int load_sharded_weights(struct sr_trainer *t, const char *path)
{
    int n = sr_sharded_ebc_num_local_shards(t->sebc);
    struct sr_weights_shard *ws = sr_calloc((size_t)n + 1, sizeof *ws);
    for (int i = 0; i < n; i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        struct sr_shard s = sh.shard >= 0 ? t->plan->tables[sh.table].shards[sh.shard]
                                          : (struct sr_shard){.rows = sh.rows, .cols = sh.dim};
        ws[i] = (struct sr_weights_shard){.table = sh.table,
                                          .row_offset = s.row_offset,
                                          .rows = sh.rows,
                                          .col_offset = s.col_offset,
                                          .cols = sh.dim,
                                          .weight = sh.weight,
                                          .dtype = sh.dtype};
    }
    int rc = sr_weights_load_shards(path, t->dlrm, sr_sharded_ebc_config(t->sebc), ws, n);
    sr_free(ws);
    char what[SR_PATH_MAX + 32];
    snprintf(what, sizeof what, "%s %s", t->cfg->eval_only ? "MODEL" : "--init-weights", path);
    return sr_trainer_agree(t, rc, what, "could not load its shards");
}

/* 16-bit tables (--emb-dtype) are read and written per shard, converted on
 * the way, also on one rank (the whole-table paths take fp32 tables). */
static int per_shard(const struct sr_trainer *t)
{
    return !sr_sharded_ebc_is_local(t->sebc) || t->cfg->emb_dtype != SR_DTYPE_F32;
}

int sr_trainer_load_weights(struct sr_trainer *t, const char *path)
{
    if (per_shard(t)) { /* then hybrid tables' replicas from the loaded shards */
        int rc = load_sharded_weights(t, path);
        return rc ? rc : sr_sharded_ebc_hot_rows_in(t->sebc);
    }
    float **tables = local_tables(t);
    int rc = sr_weights_load_tables(path, t->dlrm, sr_sharded_ebc_config(t->sebc), tables);
    sr_free(tables);
    return rc;
}

int sr_trainer_save_weights(struct sr_trainer *t, const char *path)
{
    if (per_shard(t))
        return sr_trainer_save_sharded_weights(t, path);
    float **tables = local_tables(t);
    int rc = sr_weights_save_tables(path, t->dlrm, sr_sharded_ebc_config(t->sebc), tables);
    sr_free(tables);
    return rc;
}
