/*
 * Evaluation on the held-back split, with an exact AUC over every sample.
 *
 * Evaluation walks global batches of G = W*B samples like training, each rank
 * taking its slice. The last global batch is usually partial: its missing
 * samples are padding (label -1, empty bags, zero dense features), so every
 * rank still runs the same collectives with a full batch of B. Afterwards the
 * ranks all-gather their probabilities and labels, and every rank computes the
 * metrics over the real samples:
 *
 *   eval_pred      rank r: [ batch 0: B | batch 1: B | ... ]      (nb * B)
 *   gathered       [ rank 0's eval_pred | rank 1's | ... ]        (W * nb * B)
 *   eval_pred_all  data order: [ batch 0: rank 0's B | rank 1's B | ... | batch 1: ... ]
 *
 * Rank r's batch g holds samples [g*G + r*B, g*G + (r+1)*B) of the stream
 * (reader.h), so the data order is the samples' own, the same for every
 * world size: the metrics sum in one order, and `shardrec eval --out` writes
 * the predictions in the files' order. Padding lies at the end.
 *
 * Buffers are sized at init, so evaluation does not allocate.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/error.h"
#include "train/trainer_internal.h"

#define PROGRESS_SECONDS 1.0 /* `eval`'s progress line: at most once a second */

/* The files named in messages: --eval-data in train, --data in eval. */
static const char *files_flag(const struct sr_trainer *t)
{
    return t->cfg->eval_only ? "--data" : "--eval-data";
}

/* Host bytes a rank holds for an evaluation of nb global batches: its own
 * predictions and labels, everyone's gathered, and the metrics' workspace. */
static uint64_t eval_bytes(const struct sr_trainer *t, int64_t nb)
{
    const uint64_t local = (uint64_t)nb * (uint64_t)t->cfg->batch_size;
    const uint64_t all = local * (uint64_t)t->world_size;
    return 8 * local + 8 * all + (uint64_t)sr_metrics_workspace_bytes((int64_t)all);
}

/* "tables 1.2 MiB, MLPs 6.7 KiB, batch buffers 93.0 KiB": the nonzero parts
 * of the host's share of the job. */
static void host_parts(char *buf, size_t cap, const struct sr_memory_estimate *e)
{
    const struct {
        const char *name;
        uint64_t bytes;
    } part[] = {{"tables", e->tables},
                {"MLPs", e->dense},
                {"batch buffers", e->batch},
                {"batch pool", e->pool},
                {"checkpoint staging", e->staging}};
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof part / sizeof part[0] && at < cap; i++) {
        char b[24];
        if (part[i].bytes)
            at += (size_t)snprintf(buf + at, cap - at, "%s%s %s", at ? ", " : "", part[i].name,
                                   sr_format_bytes(b, sizeof b, (double)part[i].bytes));
    }
}

/* An evaluation of files fits the host's memory beside what the job holds
 * there, both summed over the ranks on this host (the model too when it is
 * on the host; the job's memory check sizes synthetic evaluations before
 * start-up), and MPI's counts. The ranks of a host reach one verdict. */
static int check_file_eval_size(const struct sr_trainer *t, int64_t nb)
{
    const uint64_t local = (uint64_t)nb * (uint64_t)t->cfg->batch_size;
    int *ranks = sr_calloc((size_t)t->world_size, sizeof *ranks);
    const int L = sr_trainer_host_ranks(t, ranks);
    const uint64_t have = sr_machine_memory(), files = eval_bytes(t, nb);
    const int device = t->dev->memory_bytes != 0;
    struct sr_memory_estimate job;
    uint64_t need, all_files = UINT64_MAX;
    sr_train_config_host_memory(t->cfg, t->plan, ranks, L, t->world_size, t->dev->memory_bytes,
                                &job);
    sr_free(ranks);
    if (job.overflow || __builtin_mul_overflow(files, (uint64_t)L, &all_files) ||
        __builtin_add_overflow(all_files, job.total, &need))
        need = UINT64_MAX;
    if (local <= (uint64_t)INT32_MAX && need <= have)
        return SR_OK;
    char files_s[24], all_b[24], job_s[24], need_s[64], have_s[64], parts[160];
    char all_s[80] = "", beside[320] = "";
    const char *more = "";
    sr_format_bytes(files_s, sizeof files_s, (double)files);
    if (L > 1) /* every rank of the host holds them */
        snprintf(all_s, sizeof all_s, ", %s on the %d ranks on this host",
                 sr_format_bytes(all_b, sizeof all_b, (double)all_files), L);
    sr_format_bytes(job_s, sizeof job_s, (double)job.total);
    sr_format_bytes_exact(have_s, sizeof have_s, have);
    if (job.total) { /* what the rest of the job holds on the host, and the sum */
        host_parts(parts, sizeof parts, &job);
        snprintf(beside, sizeof beside, " beside %s%s%s (%s), %s in all",
                 device ? "the job's " : "the model's ", job_s, device ? " of host buffers" : "",
                 parts, sr_format_bytes_exact(need_s, sizeof need_s, need));
        if (all_files <= have) /* the files alone would fit */
            more = device ? ", or a smaller --batch-pool"
                          : ", or a smaller model (fewer --table-rows, a smaller "
                            "--embedding-dim, or more ranks with --sharding rw)";
    }
    return sr_error_set(SR_ERR_OOM,
                        "%s %s%s: evaluating %" PRId64 " batches of %" PRIu64 " samples (%" PRIu64
                        " a rank) needs %s of host memory on every rank (every prediction, for "
                        "the exact AUC)%s%s, %s the %s this machine has%s; HINT: evaluate "
                        "the files in parts%s",
                        files_flag(t), t->cfg->eval_data_paths[0],
                        t->cfg->n_eval_data > 1 ? " ..." : "", nb, (uint64_t)t->global_batch, local,
                        files_s, all_s, beside, need > have ? "more than" : "within", have_s,
                        local > (uint64_t)INT32_MAX ? " (and more than 2^31 a rank)" : "", more);
}

/* Count the global evaluation batches of the files once (this also checks
 * them whole before training starts), and check their size (collective). */
static int count_file_batches(struct sr_trainer *t)
{
    int64_t nb = 0, n = 0;
    int rc;
    while ((rc = sr_reader_next(t->eval_reader, &t->host_batch)) == 1) {
        nb++;
        n += t->host_batch.batch_size;
    }
    t->eval.batches = nb;
    t->cfg->eval_samples = n; /* this rank's share; the metrics count all */
    if (rc == 0)
        rc = check_file_eval_size(t, nb);
    if (t->world_size > 1) /* ranks hold different shards: all stop if one does */
        rc = sr_trainer_agree(t, rc, files_flag(t), "cannot evaluate them");
    if (rc)
        return rc;
    return nb ? sr_reader_rewind(t->eval_reader) : SR_OK; /* none: keep the bad lines' count */
}

int sr_trainer_init_eval(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    size_t B = (size_t)cfg->batch_size, W = (size_t)t->world_size;
    if (cfg->n_data && !t->eval_reader)
        cfg->eval_samples = 0; /* files without --eval-data: no evaluation */
    if (t->eval_reader) {
        int rc = count_file_batches(t);
        if (rc)
            return rc;
        if (t->eval.batches == 0 && cfg->eval_only)
            return sr_error_set(SR_ERR_DATA,
                                "--data %s%s holds no samples (%" PRId64 " bad lines skipped): "
                                "nothing to evaluate",
                                cfg->eval_data_paths[0], cfg->n_eval_data > 1 ? " ..." : "",
                                sr_reader_bad_lines(t->eval_reader, SR_CRITEO_OK));
        if (t->eval.batches == 0 && t->log)
            fprintf(t->log,
                    "warning: --eval-data %s%s holds no samples: the run will not be "
                    "evaluated; HINT: check the --eval-data files\n",
                    cfg->eval_data_paths[0], cfg->n_eval_data > 1 ? " ..." : "");
    } else {
        t->eval.batches = (cfg->eval_samples + t->global_batch - 1) / t->global_batch;
    }
    if (t->eval.batches == 0)
        return SR_OK;
    size_t local = (size_t)t->eval.batches * B;
    t->eval.pred = sr_dev_alloc_host(t->dev, sizeof(float) * local); /* the logits' copy */
    t->eval.labels = sr_aligned_alloc(sizeof(float) * local);
    t->eval.pred_all = sr_aligned_alloc(sizeof(float) * local * W);
    t->eval.labels_all = sr_aligned_alloc(sizeof(float) * local * W);
    t->eval.work = sr_aligned_alloc(sr_metrics_workspace_bytes((int64_t)(local * W)));
    return SR_OK;
}

void sr_trainer_free_eval(struct sr_trainer *t)
{
    if (t->eval.pred)
        sr_dev_free_host(t->dev, t->eval.pred);
    sr_free(t->eval.labels);
    sr_free(t->eval.pred_all);
    sr_free(t->eval.labels_all);
    sr_free(t->eval.work);
}

/* Evaluation batch g through the training path (trainer_batch.c): loaded
 * and checked in the host batch, padded to B, copied to the twin. A rank whose
 * batch is rejected tells the others, which wait for its ids. */
static int load_eval_batch(struct sr_trainer *t, int64_t g)
{
    int rc = sr_trainer_load_eval_batch(t, g);
    if (rc)
        rc = sr_sharded_ebc_forward_none(t->sebc, rc, t->streams.compute);
    if (rc)
        return rc;
    sr_trainer_copy_batch(t);
    return SR_OK;
}

static int eval_batch(struct sr_trainer *t, float *pred, float *labels)
{
    int B = t->cfg->batch_size;
    int rc = sr_trainer_emb_forward(t);
    if (rc)
        return rc;
    sr_dlrm_forward(t->dlrm, t->streams.compute, t->batch.dense, t->pooled, B, t->logits);
    sr_dev_copy(t->dev, pred, t->logits, sizeof(float) * (size_t)B, NULL);
    sr_dev_sync(t->dev, NULL);
    for (int i = 0; i < B; i++)
        pred[i] = (float)(1.0 / (1.0 + exp(-(double)pred[i])));
    memcpy(labels, t->host_batch.labels, sizeof(float) * (size_t)B); /* the host's copy */
    return SR_OK;
}

/* The gathered arrays from rank-major order into data order, through the
 * metrics' workspace (16 bytes a sample; this takes 8). */
static void to_data_order(struct sr_trainer *t)
{
    const size_t W = (size_t)t->world_size, B = (size_t)t->cfg->batch_size;
    const size_t nb = (size_t)t->eval.batches, n = W * nb * B;
    if (W == 1)
        return;
    float *pred = t->eval.work, *labels = pred + n;
    memcpy(pred, t->eval.pred_all, sizeof(float) * n);
    memcpy(labels, t->eval.labels_all, sizeof(float) * n);
    for (size_t g = 0; g < nb; g++)
        for (size_t r = 0; r < W; r++) {
            const size_t from = (r * nb + g) * B, to = (g * W + r) * B;
            memcpy(t->eval.pred_all + to, pred + from, sizeof(float) * B);
            memcpy(t->eval.labels_all + to, labels + from, sizeof(float) * B);
        }
}

/* `eval`'s progress line on a terminal (rank 0): batches done, rate, ETA. */
static void report_progress(struct sr_trainer *t, int64_t done, double start, double *last)
{
    const double now = sr_now_s();
    if (!t->log || !t->progress || !t->cfg->eval_only ||
        (now - *last < PROGRESS_SECONDS && done < t->eval.batches))
        return;
    *last = now;
    const double rate = (double)done / (now - start > 1e-9 ? now - start : 1e-9);
    char eta[32];
    fprintf(t->log, "\r\033[Keval: batch %" PRId64 "/%" PRId64 " | %.0f samples/s | ETA %s%s", done,
            t->eval.batches, rate * (double)t->global_batch,
            sr_format_duration(eta, sizeof eta, (double)(t->eval.batches - done) / rate),
            done == t->eval.batches ? "\n" : "");
    fflush(t->log);
}

/* Keep the real samples of the gathered arrays (in place); their count. */
static int64_t compact(float *pred, float *labels, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (labels[i] < 0)
            continue;
        pred[k] = pred[i];
        labels[k++] = labels[i];
    }
    return k;
}

int sr_trainer_evaluate(struct sr_trainer *t, struct sr_eval_metrics *out)
{
    size_t B = (size_t)t->cfg->batch_size, local = (size_t)t->eval.batches * B;
    int rc;
    memset(out, 0, sizeof *out);
    t->eval.n = 0;
    if (t->eval.batches == 0)
        return SR_OK;
    if (t->eval_reader && (rc = sr_reader_rewind(t->eval_reader)))
        return rc;
    const double start = sr_now_s();
    double shown = start;
    for (int64_t g = 0; g < t->eval.batches; g++) {
        if ((rc = load_eval_batch(t, g)))
            return rc;
        if ((rc = eval_batch(t, t->eval.pred + g * B, t->eval.labels + g * B)))
            return rc;
        report_progress(t, g + 1, start, &shown);
    }
    sr_comm_all_gather(t->world, t->eval.pred, t->eval.pred_all, local, SR_DTYPE_F32, NULL, NULL);
    sr_comm_all_gather(t->world, t->eval.labels, t->eval.labels_all, local, SR_DTYPE_F32, NULL,
                       NULL);
    to_data_order(t);
    t->eval.n = compact(t->eval.pred_all, t->eval.labels_all, (int64_t)(local * t->world_size));
    return sr_metrics_compute(t->eval.pred_all, t->eval.labels_all, t->eval.n, t->eval.work, out);
}

int64_t sr_trainer_eval_predictions(const struct sr_trainer *t, const float **prob,
                                    const float **labels)
{
    *prob = t->eval.pred_all;
    *labels = t->eval.labels_all;
    return t->eval.n;
}

void sr_trainer_eval_bounds(const struct sr_trainer *t, double *teacher_auc, double *dense_only_auc)
{
    const int synthetic = !t->eval_reader && t->eval.batches > 0;
    *teacher_auc = synthetic ? t->eval.teacher_auc : NAN;
    *dense_only_auc = synthetic ? t->eval.dense_only_auc : NAN;
}
