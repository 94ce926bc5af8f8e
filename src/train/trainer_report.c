/*
 * What the trainer tells the user: a log line (or a live progress line on a
 * terminal) per logging interval, one JSON metrics line per interval, and the
 * end-of-run summary with per-stage times, collectives and bytes per step
 * (intra / inter node), exposed communication time, and the evaluation beside
 * the synthetic data's ceiling and floor. Rank 0 prints; other ranks are
 * silent.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/clock.h"
#include "train/trainer_internal.h"

static const char *stage_names[SR_STAGE_COUNT] = {"load",     "lookup",     "dense_fwd",
                                                  "backward", "emb_update", "optimizer"};

const char *sr_stage_name(enum sr_stage s)
{
    return (unsigned)s < SR_STAGE_COUNT ? stage_names[s] : "?";
}

double sr_now_s(void)
{
    return sr_clock_seconds();
}

static void format_eta(double seconds, char *buf, size_t n)
{
    long s = (long)(seconds + 0.5);
    snprintf(buf, n, "%ld:%02ld", s / 60, s % 60);
}

static void write_metrics(struct sr_trainer *t, int64_t step, double loss,
                          const struct sr_interval *iv, int evaluated, double sps, double step_ms)
{
    fprintf(t->metrics,
            "{\"step\": %" PRId64 ", \"loss\": %.9g, \"loss_avg\": %.9g, \"lr\": %.6g, "
            "\"samples_per_s\": %.1f, \"step_ms\": %.4f",
            step, loss, iv->loss_sum / (double)iv->steps, sr_lr_at(&t->lr_dense, step), sps,
            step_ms);
    if (evaluated)
        fprintf(t->metrics,
                ", \"eval_auc\": %.6f, \"eval_logloss\": %.6f, \"eval_ne\": %.6f, "
                "\"eval_accuracy\": %.6f, \"eval_samples\": %" PRId64,
                t->last_eval.auc, t->last_eval.logloss, t->last_eval.ne, t->last_eval.accuracy,
                t->last_eval.n);
    fprintf(t->metrics, "}\n");
    fflush(t->metrics);
}

void sr_trainer_log_interval(struct sr_trainer *t, int64_t step, double loss,
                             const struct sr_interval *iv, int evaluated, double elapsed)
{
    const struct sr_train_config *cfg = t->cfg;
    double sps = iv->seconds > 0 ? (double)iv->steps * (double)t->global_batch / iv->seconds : 0;
    double step_ms = iv->steps ? 1e3 * iv->seconds / (double)iv->steps : 0;
    char eta[32] = "?", auc[32] = "-", total[32] = "epoch";
    if (cfg->steps < INT64_MAX / 4) {
        format_eta(elapsed / (double)step * (double)(cfg->steps - step), eta, sizeof eta);
        snprintf(total, sizeof total, "%" PRId64, cfg->steps);
    }
    if (t->last_eval.n)
        snprintf(auc, sizeof auc, "%.4f", t->last_eval.auc);
    if (t->metrics)
        write_metrics(t, step, loss, iv, evaluated, sps, step_ms);
    if (!t->log)
        return;
    if (t->progress)
        fprintf(t->log,
                "\r\033[Kstep %" PRId64 "/%s | %.0f samples/s | loss %.4f | "
                "eval AUC %s | ETA %s%s",
                step, total, sps, iv->loss_sum / (double)iv->steps, auc, eta,
                step == cfg->steps ? "\n" : "");
    else
        fprintf(t->log, "step %" PRId64 "/%s  loss %.4f  %.0f samples/s  eval_auc %s  eta %s\n",
                step, total, iv->loss_sum / (double)iv->steps, sps, auc, eta);
    fflush(t->log);
}

static void print_comm(const struct sr_trainer *t, const struct sr_trainer_result *res, FILE *f)
{
    const struct sr_comm_counters *c = &t->train_comm;
    double steps = (double)res->steps, exposed = 0, busy = 0;
    uint64_t calls = 0, intra = 0, inter = 0;
    fprintf(f, "collectives per step (rank 0):");
    for (int k = 0; k < SR_COLL_COUNT; k++) {
        if (c->calls[k])
            fprintf(f, " %s %.2f", sr_coll_name(k), (double)c->calls[k] / steps);
        calls += c->calls[k], intra += c->bytes_intra[k], inter += c->bytes_inter[k];
        exposed += c->seconds[k], busy += c->seconds_total[k];
    }
    fprintf(f, " | total %.2f\n", (double)calls / steps);
    fprintf(f,
            "bytes sent per step: intra-node %.1f KiB, inter-node %.1f KiB; "
            "communication %.2f ms exposed of %.2f ms busy per step (%.1f%% of the step)\n",
            (double)intra / steps / 1024, (double)inter / steps / 1024, 1e3 * exposed / steps,
            1e3 * busy / steps,
            100.0 * exposed / (res->train_seconds > 0 ? res->train_seconds : 1));
    fprintf(f, "wire dtypes: pooled %s, dense %s (%d buckets, %d dense calls per step)\n",
            sr_dtype_name(t->sebc ? t->cfg->comm_dtype : SR_DTYPE_F32),
            sr_dtype_name(sr_grad_buckets_dtype(t->buckets)), sr_grad_buckets_count(t->buckets),
            sr_grad_buckets_calls(t->buckets));
}

void sr_trainer_print_summary(const struct sr_trainer *t, const struct sr_trainer_result *res,
                              FILE *f)
{
    const struct sr_train_config *cfg = t->cfg;
    double total = 0;
    if (t->rank != 0 || res->steps == 0)
        return;
    fprintf(f, "\n== shardrec train: summary ==\n");
    fprintf(f,
            "steps %" PRId64 ", %d ranks (%s), global batch %" PRId64
            ", %.1f s training, %.0f samples/s\n",
            res->steps, t->world_size, sr_comm_backend_name(t->world), t->global_batch,
            res->train_seconds, res->samples_per_s);
    for (int s = 0; s < SR_STAGE_COUNT; s++)
        total += res->stage_seconds[s];
    fprintf(f, "per step (ms, rank 0):");
    for (int s = 0; s < SR_STAGE_COUNT; s++)
        fprintf(f, " %s %.2f", stage_names[s], 1e3 * res->stage_seconds[s] / (double)res->steps);
    fprintf(f, " | total %.2f\n", 1e3 * total / (double)res->steps);
    print_comm(t, res, f);
    fprintf(f, "last training loss %.5f\n", res->last_loss);
    if (res->eval.n) {
        fprintf(f,
                "eval on %" PRId64 " held-back samples: AUC %.4f  logloss %.4f  NE %.4f  "
                "accuracy %.4f\n",
                res->eval.n, res->eval.auc, res->eval.logloss, res->eval.ne, res->eval.accuracy);
        if (!cfg->n_data)
            fprintf(f,
                    "AUC: model %.4f | teacher ceiling %.4f | dense-only floor %.4f  "
                    "(gap to ceiling %.4f, above floor %.4f)\n",
                    res->eval.auc, res->teacher_auc, res->dense_only_auc,
                    res->teacher_auc - res->eval.auc, res->eval.auc - res->dense_only_auc);
    }
    fprintf(f, "allocations in the training loop after step 1: %" PRIu64 "\n",
            res->allocs_after_first_step);
}
