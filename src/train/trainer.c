/*
 * The training loop on one rank. One step, top to bottom:
 *
 *   load       synthetic batch of global samples [step*B, step*B + B)
 *   lookup     EBC forward: KJT -> pooled (B, F*D)
 *   dense_fwd  bottom MLP, interaction, top MLP -> logits (B)
 *   backward   BCE seed (sigmoid(z) - y) / B, dense gradients, dpooled
 *   emb_update merge duplicate ids, fused sparse optimizer in place
 *   optimizer  dense optimizer on the flat parameter block
 *
 * Everything is allocated in sr_trainer_init; the loop only reuses buffers.
 * Evaluation runs on a held-back split of the same generator (global indices
 * from SR_SYNTH_EVAL_BASE), with an exact AUC.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/batch.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/reader.h"
#include "shardrec/synthetic.h"
#include "shardrec/trainer.h"
#include "shardrec/weights_io.h"
#include "train/grad_buckets.h"

struct sr_trainer {
    struct sr_train_config *cfg;
    FILE *log;
    FILE *metrics;
    int progress;
    struct sr_device *dev;
    struct sr_synth *synth;        /* synthetic data (also when files are given: sizes) */
    struct sr_reader *reader;      /* --data, or NULL */
    struct sr_reader *eval_reader; /* --eval-data, or NULL */
    int64_t epoch;                 /* passes over --data started */
    struct sr_ebc *ebc;
    struct sr_dlrm *dlrm;
    struct sr_dense_optim *dense_optim;
    sr_comm_t world;      /* all ranks: startup checks */
    sr_comm_t dense_comm; /* dense gradient buckets */
    struct sr_grad_buckets *buckets;
    struct sr_lr_schedule lr_dense, lr_emb;
    struct sr_batch batch;
    int pooled_dim;       /* F*D */
    float *pooled;        /* (B, F*D) device */
    float *dpooled;       /* (B, F*D) device */
    float *logits;        /* (B) device */
    float *eval_pred;     /* (eval_samples) host, probabilities */
    float *eval_labels;   /* (eval_samples) host */
    void *eval_work;      /* metrics workspace, host */
    double teacher_auc, dense_only_auc, sparse_share;
    struct sr_eval_metrics last_eval;
};

static const char *stage_names[SR_STAGE_COUNT] = {"load",     "lookup",     "dense_fwd",
                                                  "backward", "emb_update", "optimizer"};

const char *sr_stage_name(enum sr_stage s)
{
    return (unsigned)s < SR_STAGE_COUNT ? stage_names[s] : "?";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- construction ------------------------------------------------------------ */

static int open_reader(struct sr_trainer *t, struct sr_reader **r, char (*paths)[SR_PATH_MAX],
                       int n, const int64_t *rows, int keep_partial)
{
    const char *list[SR_MAX_DATA_FILES];
    struct sr_reader_options opt = {.rank = 0, .world = 1, .batch_size = t->cfg->batch_size,
                                    .skip_bad_lines = t->cfg->skip_bad_lines,
                                    .keep_partial = keep_partial, .max_line = 0};
    for (int i = 0; i < n; i++)
        list[i] = paths[i];
    int rc = sr_reader_open(r, list, n, t->cfg->num_features, rows, &opt);
    if (!rc && sr_reader_num_dense(*r) != t->cfg->num_dense)
        rc = sr_error_set(SR_ERR_DATA, "%s: %d dense features, the model takes %d", paths[0],
                          sr_reader_num_dense(*r), t->cfg->num_dense);
    return rc;
}

/* Count the evaluation samples once (this also checks the whole file before
 * training starts), so evaluation buffers are sized at init. */
static int count_eval_samples(struct sr_trainer *t)
{
    int64_t n = 0;
    int rc;
    while ((rc = sr_reader_next(t->eval_reader, &t->batch)) == 1)
        n += t->batch.batch_size;
    if (rc < 0)
        return rc;
    t->cfg->eval_samples = n;
    return sr_reader_rewind(t->eval_reader);
}

static int init_files(struct sr_trainer *t, const int64_t *rows, const char *const *keys)
{
    struct sr_train_config *cfg = t->cfg;
    int rc = open_reader(t, &t->reader, cfg->data_paths, cfg->n_data, rows, 0);
    if (rc)
        return rc;
    if (cfg->n_eval_data && (rc = open_reader(t, &t->eval_reader, cfg->eval_data_paths,
                                              cfg->n_eval_data, rows, 1)))
        return rc;
    int64_t mv = sr_reader_max_values(t->reader);
    if (t->eval_reader && sr_reader_max_values(t->eval_reader) > mv)
        mv = sr_reader_max_values(t->eval_reader);
    sr_batch_init(&t->batch, cfg->batch_size, cfg->num_dense, cfg->num_features, mv,
                  sr_reader_has_weights(t->reader) ||
                      (t->eval_reader && sr_reader_has_weights(t->eval_reader)),
                  keys);
    if (!t->eval_reader) {
        cfg->eval_samples = 0;
        return SR_OK;
    }
    return count_eval_samples(t);
}

static int init_data(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    static int64_t rows[SR_MAX_FEATURES];
    static const char *keys[SR_MAX_FEATURES];
    for (int f = 0; f < cfg->num_features; f++) {
        rows[f] = cfg->tables[cfg->feature_table[f]].num_embeddings;
        keys[f] = cfg->feature_names[f];
    }
    struct sr_synth_config sc = {.seed = cfg->seed,
                                 .num_dense = cfg->num_dense,
                                 .num_features = cfg->num_features,
                                 .rows = rows,
                                 .ids_min = cfg->ids_min,
                                 .ids_max = cfg->ids_max,
                                 .id_dist = cfg->id_dist,
                                 .zipf_s = cfg->zipf_s};
    int rc = sr_synth_init(&t->synth, &sc);
    if (rc)
        return rc;
    if (cfg->n_data)
        return init_files(t, rows, keys);
    int64_t max_values = sr_synth_max_values(t->synth, cfg->batch_size);
    sr_batch_init(&t->batch, cfg->batch_size, cfg->num_dense, cfg->num_features, max_values, 0,
                  keys);
    return SR_OK;
}

static int init_model(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    struct sr_dlrm_config dc;
    struct sr_ebc_config ec;
    struct sr_optim_config emb_opt = sr_optim_config_default(cfg->emb_optimizer);
    struct sr_optim_config dense_opt = sr_optim_config_default(cfg->optimizer);
    size_t n_params;
    int rc;

    sr_train_config_dlrm(cfg, &dc);
    sr_train_config_ebc(cfg, &ec);
    rc = sr_ebc_init(&t->ebc, t->dev, &ec, &emb_opt, cfg->batch_size, t->batch.max_values,
                     cfg->seed);
    if (rc)
        return rc;
    rc = sr_dlrm_init(&t->dlrm, t->dev, &dc, cfg->batch_size, cfg->seed);
    if (rc)
        return rc;
    sr_dlrm_params(t->dlrm, &n_params);
    sr_dense_optim_init(&t->dense_optim, t->dev, &dense_opt, n_params);
    rc = sr_lr_schedule_parse(cfg->lr_schedule, cfg->lr, &t->lr_dense);
    if (rc)
        return sr_error_set(rc, "--lr-schedule: %s", sr_error_message());
    sr_lr_schedule_parse(cfg->lr_schedule, cfg->emb_lr > 0 ? cfg->emb_lr : cfg->lr, &t->lr_emb);
    return SR_OK;
}

static void on_grad_ready(void *ctx, size_t offset, size_t count)
{
    sr_grad_buckets_ready(ctx, offset, count);
}

/* Linear layers' gradient ranges in the order backward finishes them (the
 * flat block holds weight then bias of each layer, bottom layers first). */
static void init_buckets(struct sr_trainer *t)
{
    size_t sizes[2 * SR_MLP_MAX], n;
    int n_tensors = sr_dlrm_num_tensors(t->dlrm), n_layers = n_tensors / 2;
    float *grads = sr_dlrm_grads(t->dlrm, &n);
    for (int l = 0; l < n_layers; l++) {
        const char *name;
        int ndim;
        int64_t w[2], b[2];
        float *data;
        sr_dlrm_tensor(t->dlrm, 2 * l, &name, &ndim, w, &data);
        sr_dlrm_tensor(t->dlrm, 2 * l + 1, &name, &ndim, b, &data);
        sizes[n_layers - 1 - l] = (size_t)(w[0] * w[1] + b[0]);
    }
    sr_grad_buckets_init(&t->buckets, t->dense_comm, grads, n, NULL, 0, sizes, n_layers,
                         (size_t)4 << 20);
    sr_dlrm_set_grad_ready(t->dlrm, on_grad_ready, t->buckets);
}

static void init_buffers(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    size_t B = (size_t)cfg->batch_size;
    t->pooled_dim = sr_ebc_out_dim(t->ebc);
    t->pooled = sr_dev_alloc(t->dev, sizeof(float) * B * (size_t)t->pooled_dim);
    t->dpooled = sr_dev_alloc(t->dev, sizeof(float) * B * (size_t)t->pooled_dim);
    t->logits = sr_dev_alloc(t->dev, sizeof(float) * B);
    if (cfg->eval_samples > 0) {
        t->eval_pred = sr_aligned_alloc(sizeof(float) * (size_t)cfg->eval_samples);
        t->eval_labels = sr_aligned_alloc(sizeof(float) * (size_t)cfg->eval_samples);
        t->eval_work = sr_aligned_alloc(sr_metrics_workspace_bytes(cfg->eval_samples));
    }
}

int sr_trainer_init(struct sr_trainer **out, struct sr_train_config *cfg, FILE *log)
{
    struct sr_trainer *t = sr_calloc(1, sizeof *t);
    int rc;
    *out = NULL;
    t->cfg = cfg;
    t->log = log;
    t->dev = sr_device_cpu();
    t->world = sr_comm_init_single();
    t->dense_comm = t->world;
    if ((rc = sr_train_config_check(cfg)))
        goto out_free;
    if ((rc = init_data(t)))
        goto out_free;
    if (cfg->n_data && !cfg->steps_set)
        cfg->steps = INT64_MAX / 4; /* one pass over --data */
    if ((rc = init_model(t)))
        goto out_free;
    init_buffers(t);
    init_buckets(t);
    if (cfg->metrics_path[0]) {
        t->metrics = fopen(cfg->metrics_path, "w");
        if (!t->metrics) {
            rc = sr_error_set(SR_ERR_IO, "--metrics %s: cannot open for writing",
                              cfg->metrics_path);
            goto out_free;
        }
    }
    t->progress = cfg->progress >= 0 ? cfg->progress : (log && isatty(fileno(log)));
    if (cfg->eval_samples > 0 && !cfg->n_data)
        sr_synth_bounds(t->synth, SR_SYNTH_EVAL_BASE, cfg->eval_samples, &t->teacher_auc,
                        &t->dense_only_auc, &t->sparse_share);
    *out = t;
    return SR_OK;
out_free:
    sr_trainer_free(t);
    return rc;
}

void sr_trainer_free(struct sr_trainer *t)
{
    if (!t)
        return;
    if (t->metrics)
        fclose(t->metrics);
    sr_dev_free(t->dev, t->pooled);
    sr_dev_free(t->dev, t->dpooled);
    sr_dev_free(t->dev, t->logits);
    sr_free(t->eval_pred);
    sr_free(t->eval_labels);
    sr_free(t->eval_work);
    sr_grad_buckets_free(t->buckets);
    sr_comm_free(t->world);
    sr_dense_optim_free(t->dense_optim);
    sr_dlrm_free(t->dlrm);
    sr_ebc_free(t->ebc);
    if (t->reader)
        sr_reader_report(t->reader, t->log ? t->log : stderr);
    sr_reader_free(t->reader);
    sr_reader_free(t->eval_reader);
    sr_batch_free(&t->batch);
    sr_synth_free(t->synth);
    sr_free(t);
}

/* ---- evaluation ---------------------------------------------------------------- */

static int eval_chunk(struct sr_trainer *t, int64_t first, int B, float *pred, float *labels)
{
    int rc;
    rc = sr_ebc_forward(t->ebc, &t->batch.kjt, t->pooled);
    if (rc)
        return rc;
    sr_dlrm_forward(t->dlrm, t->batch.dense, t->pooled, B, t->logits);
    sr_dev_copy(t->dev, pred, t->logits, sizeof(float) * (size_t)B, NULL);
    sr_dev_sync(t->dev, NULL);
    for (int i = 0; i < B; i++)
        pred[i] = (float)(1.0 / (1.0 + exp(-(double)pred[i])));
    memcpy(labels, t->batch.labels, sizeof(float) * (size_t)B);
    return SR_OK;
}

/* The next evaluation batch into t->batch: B samples from `first`. Returns
 * the batch's sample count, 0 at the end, or an error. */
static int eval_next(struct sr_trainer *t, int64_t first)
{
    int64_t n = t->cfg->eval_samples;
    if (t->eval_reader) {
        int rc = sr_reader_next(t->eval_reader, &t->batch);
        return rc == 1 ? t->batch.batch_size : rc;
    }
    if (first >= n)
        return 0;
    int B = (int)(n - first < t->cfg->batch_size ? n - first : t->cfg->batch_size);
    sr_synth_fill(t->synth, SR_SYNTH_EVAL_BASE + first, B, &t->batch);
    return B;
}

int sr_trainer_evaluate(struct sr_trainer *t, struct sr_eval_metrics *out)
{
    int64_t n = t->cfg->eval_samples, i = 0;
    int B, rc;
    memset(out, 0, sizeof *out);
    if (n <= 0)
        return SR_OK;
    if (t->eval_reader && (rc = sr_reader_rewind(t->eval_reader)))
        return rc;
    while ((B = eval_next(t, i)) > 0) {
        SR_ASSERT(i + B <= n);
        if ((rc = eval_chunk(t, i, B, t->eval_pred + i, t->eval_labels + i)))
            return rc;
        i += B;
    }
    if (B < 0)
        return B;
    return sr_metrics_compute(t->eval_pred, t->eval_labels, i, t->eval_work, out);
}

/* ---- one training step ------------------------------------------------------------ */

#define END_OF_DATA 1

/* The next training batch: synthetic samples [(step-1)*B, step*B), or the
 * next full batch of --data, starting a new epoch at the end of the files. */
static int load_batch(struct sr_trainer *t, int64_t step)
{
    int B = t->cfg->batch_size, rc;
    if (!t->reader) {
        sr_synth_fill(t->synth, (step - 1) * (int64_t)B, B, &t->batch);
        return SR_OK;
    }
    if ((rc = sr_reader_next(t->reader, &t->batch)) == 1)
        return SR_OK;
    if (rc < 0)
        return rc;
    if (t->epoch == 0 && step == 1)
        return sr_error_set(SR_ERR_DATA, "%s: fewer samples than one batch of %d",
                            t->cfg->data_paths[0], B);
    if (!t->cfg->steps_set)
        return END_OF_DATA; /* one epoch when --steps is not given */
    if ((rc = sr_reader_rewind(t->reader)))
        return rc;
    t->epoch++;
    rc = sr_reader_next(t->reader, &t->batch);
    return rc == 1 ? SR_OK : rc;
}

static int train_step(struct sr_trainer *t, int64_t step, double *loss, double *stage)
{
    const struct sr_train_config *cfg = t->cfg;
    int B = cfg->batch_size;
    size_t n_params;
    double t0 = now_s(), t1;
    int rc;

    if ((rc = load_batch(t, step)))
        return rc;
    t1 = now_s(), stage[SR_STAGE_LOAD] += t1 - t0, t0 = t1;

    if ((rc = sr_ebc_forward(t->ebc, &t->batch.kjt, t->pooled)))
        return rc;
    t1 = now_s(), stage[SR_STAGE_LOOKUP] += t1 - t0, t0 = t1;

    sr_dlrm_forward(t->dlrm, t->batch.dense, t->pooled, B, t->logits);
    t1 = now_s(), stage[SR_STAGE_DENSE_FWD] += t1 - t0, t0 = t1;

    sr_grad_buckets_begin(t->buckets);
    double loss_sum = sr_dlrm_backward(t->dlrm, t->batch.labels, NULL, B, 1.0f / (float)B,
                                       t->dpooled);
    t1 = now_s(), stage[SR_STAGE_BACKWARD] += t1 - t0, t0 = t1;

    sr_ebc_backward(t->ebc, t->dpooled, sr_lr_at(&t->lr_emb, step), step);
    t1 = now_s(), stage[SR_STAGE_EMB_UPDATE] += t1 - t0, t0 = t1;

    *loss = sr_grad_buckets_finish(t->buckets, loss_sum) / B;

    float *params = sr_dlrm_params(t->dlrm, &n_params);
    sr_dense_optim_step(t->dense_optim, params, sr_dlrm_grads(t->dlrm, &n_params),
                        sr_lr_at(&t->lr_dense, step), step);
    sr_dev_sync(t->dev, NULL);
    stage[SR_STAGE_OPTIMIZER] += now_s() - t0;
    if (!isfinite(*loss))
        return sr_error_set(SR_ERR_NUMERIC,
                            "training loss is %f at step %" PRId64
                            "; HINT: lower --lr or --emb-lr, or check the input data",
                            *loss, step);
    return SR_OK;
}

/* ---- logging ----------------------------------------------------------------------- */

struct interval {
    int64_t steps;
    double seconds;
    double loss_sum;
};

static void format_eta(double seconds, char *buf, size_t n)
{
    long s = (long)(seconds + 0.5);
    snprintf(buf, n, "%ld:%02ld", s / 60, s % 60);
}

static void log_interval(struct sr_trainer *t, int64_t step, double loss, const struct interval *iv,
                         int evaluated, double elapsed)
{
    const struct sr_train_config *cfg = t->cfg;
    double sps = iv->seconds > 0 ? (double)iv->steps * cfg->batch_size / iv->seconds : 0;
    double step_ms = iv->steps ? 1e3 * iv->seconds / (double)iv->steps : 0;
    char eta[32] = "?", auc[32] = "-", total[32] = "epoch";
    if (cfg->steps < INT64_MAX / 4) {
        format_eta(elapsed / (double)step * (double)(cfg->steps - step), eta, sizeof eta);
        snprintf(total, sizeof total, "%" PRId64, cfg->steps);
    }
    if (t->last_eval.n)
        snprintf(auc, sizeof auc, "%.4f", t->last_eval.auc);
    if (t->metrics) {
        fprintf(t->metrics,
                "{\"step\": %" PRId64 ", \"loss\": %.9g, \"loss_avg\": %.9g, \"lr\": %.6g, "
                "\"samples_per_s\": %.1f, \"step_ms\": %.4f",
                step, loss, iv->loss_sum / (double)iv->steps, sr_lr_at(&t->lr_dense, step), sps,
                step_ms);
        if (evaluated)
            fprintf(t->metrics,
                    ", \"eval_auc\": %.6f, \"eval_logloss\": %.6f, \"eval_ne\": %.6f, "
                    "\"eval_accuracy\": %.6f",
                    t->last_eval.auc, t->last_eval.logloss, t->last_eval.ne,
                    t->last_eval.accuracy);
        fprintf(t->metrics, "}\n");
        fflush(t->metrics);
    }
    if (!t->log)
        return;
    if (t->progress) {
        fprintf(t->log, "\r\033[Kstep %" PRId64 "/%s | %.0f samples/s | loss %.4f | "
                        "eval AUC %s | ETA %s",
                step, total, sps, iv->loss_sum / (double)iv->steps, auc, eta);
        if (step == cfg->steps)
            fputc('\n', t->log);
    } else {
        fprintf(t->log, "step %" PRId64 "/%s  loss %.4f  %.0f samples/s  eval_auc %s  "
                        "eta %s\n",
                step, total, iv->loss_sum / (double)iv->steps, sps, auc, eta);
    }
    fflush(t->log);
}

/* ---- the loop ------------------------------------------------------------------------ */

static int finish_epoch(struct sr_trainer *t, int64_t steps, double loss, struct interval *iv,
                        double elapsed)
{
    int rc;
    if (t->cfg->eval_samples > 0 && (rc = sr_trainer_evaluate(t, &t->last_eval)))
        return rc;
    if (iv->steps)
        log_interval(t, steps, loss, iv, t->cfg->eval_samples > 0, elapsed);
    return SR_OK;
}

static int due(int64_t step, int64_t every, int64_t last)
{
    return step == last || (every > 0 && step % every == 0);
}

int sr_trainer_run(struct sr_trainer *t, struct sr_trainer_result *res)
{
    const struct sr_train_config *cfg = t->cfg;
    struct interval iv = {0};
    double start = now_s(), train_seconds = 0, loss = 0;
    uint64_t allocs_after_first = 0;
    int64_t log_every = t->progress ? 1 : cfg->log_every;
    int rc = SR_OK;

    memset(res, 0, sizeof *res);
    int64_t step;
    for (step = 1; step <= cfg->steps; step++) {
        double s0 = now_s();
        if ((rc = train_step(t, step, &loss, res->stage_seconds)) == END_OF_DATA)
            break;
        if (rc)
            return rc;
        double dt = now_s() - s0;
        if (step == 1)
            allocs_after_first = sr_alloc_count();
        train_seconds += dt;
        iv.steps++, iv.seconds += dt, iv.loss_sum += loss;
        int evaluated = cfg->eval_samples > 0 && due(step, cfg->eval_every, cfg->steps);
        if (evaluated && (rc = sr_trainer_evaluate(t, &t->last_eval)))
            return rc;
        if (due(step, log_every, cfg->steps) || evaluated ||
            (cfg->metrics_path[0] && due(step, cfg->log_every, cfg->steps))) {
            log_interval(t, step, loss, &iv, evaluated, now_s() - start);
            memset(&iv, 0, sizeof iv);
        }
    }
    if (step <= cfg->steps) { /* the data ended: evaluate and log the last step */
        res->steps = step - 1;
        rc = finish_epoch(t, res->steps, loss, &iv, now_s() - start);
        if (rc)
            return rc;
    } else {
        res->steps = cfg->steps;
    }
    res->train_seconds = train_seconds;
    res->samples_per_s = (double)res->steps * cfg->batch_size / train_seconds;
    res->last_loss = loss;
    res->eval = t->last_eval;
    res->teacher_auc = t->teacher_auc;
    res->dense_only_auc = t->dense_only_auc;
    res->allocs_after_first_step = sr_alloc_count() - allocs_after_first;
    return rc;
}

/* ---- summary ------------------------------------------------------------------------- */

void sr_trainer_print_summary(const struct sr_trainer *t, const struct sr_trainer_result *res,
                              FILE *f)
{
    const struct sr_train_config *cfg = t->cfg;
    double total = 0;
    fprintf(f, "\n== shardrec train: summary ==\n");
    fprintf(f, "steps %" PRId64 ", batch %d, %.1f s training, %.0f samples/s\n", res->steps,
            cfg->batch_size, res->train_seconds, res->samples_per_s);
    for (int s = 0; s < SR_STAGE_COUNT; s++)
        total += res->stage_seconds[s];
    fprintf(f, "per step (ms):");
    for (int s = 0; s < SR_STAGE_COUNT; s++)
        fprintf(f, " %s %.2f", stage_names[s], 1e3 * res->stage_seconds[s] / (double)res->steps);
    fprintf(f, " | total %.2f\n", 1e3 * total / (double)res->steps);
    fprintf(f, "last training loss %.5f\n", res->last_loss);
    if (res->eval.n) {
        fprintf(f, "eval on %" PRId64 " held-back samples: AUC %.4f  logloss %.4f  NE %.4f  "
                   "accuracy %.4f\n",
                res->eval.n, res->eval.auc, res->eval.logloss, res->eval.ne, res->eval.accuracy);
        if (!cfg->n_data)
            fprintf(f, "AUC: model %.4f | teacher ceiling %.4f | dense-only floor %.4f  "
                   "(gap to ceiling %.4f, above floor %.4f)\n",
                res->eval.auc, res->teacher_auc, res->dense_only_auc,
                res->teacher_auc - res->eval.auc, res->eval.auc - res->dense_only_auc);
    }
    fprintf(f, "allocations in the training loop after step 1: %" PRIu64 "\n",
            res->allocs_after_first_step);
}

/* ---- weights files ------------------------------------------------------------------- */

int sr_trainer_load_weights(struct sr_trainer *t, const char *path)
{
    return sr_weights_load(path, t->dlrm, t->ebc);
}

int sr_trainer_save_weights(struct sr_trainer *t, const char *path)
{
    return sr_weights_save(path, t->dlrm, t->ebc);
}
