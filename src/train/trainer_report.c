/*
 * What the trainer tells the user: a log line (or a live progress line on a
 * terminal) per logging interval, one JSON metrics line per interval, and the
 * end-of-run summary: per-stage mean, p50 and p99 (from the per-step stage
 * times the spans measured, trainer.c), communication busy, overlapped and
 * exposed, collectives and bytes per step (intra / inter node), time waited
 * on data, the trace's cost, and the evaluation beside the synthetic data's
 * ceiling and floor. Rank 0 prints; other ranks are silent.
 *
 * Exposed communication is the time the compute thread stalled in a blocking
 * collective or a wait (the "comm.wait" span, comm.c), busy the time the
 * communication workers ran collectives, overlapped = busy - exposed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/error.h"
#include "train/trainer_internal.h"

double sr_now_s(void)
{
    return sr_clock_seconds();
}

/* One metrics line, written whole and flushed; the first failed write (a full
 * disk, /dev/full) is kept in t->metrics_errno: a warning now, no more lines,
 * and the run ends with SR_ERR_WRITE (sr_trainer_close_metrics). */
static void write_metrics(struct sr_trainer *t, int64_t step, double loss,
                          const struct sr_interval *iv, int evaluated, double sps, double step_ms)
{
    char line[640];
    size_t n = (size_t)snprintf(
        line, sizeof line,
        "{\"step\": %" PRId64 ", \"loss\": %.9g, \"loss_avg\": %.9g, \"lr\": %.6g, "
        "\"samples_per_s\": %.1f, \"step_ms\": %.4f",
        step, loss, iv->loss_sum / (double)iv->steps, sr_lr_at(&t->lr_dense, step), sps, step_ms);
    if (evaluated && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n,
                              ", \"eval_auc\": %.6f, \"eval_logloss\": %.6f, \"eval_ne\": %.6f, "
                              "\"eval_accuracy\": %.6f, \"eval_samples\": %" PRId64,
                              t->eval.last.auc, t->eval.last.logloss, t->eval.last.ne,
                              t->eval.last.accuracy, t->eval.last.n);
    if (n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, "}\n");
    SR_ASSERT(n < sizeof line);
    if (t->metrics_errno)
        return;
    errno = 0;
    if (fwrite(line, 1, n, t->metrics) != n || fflush(t->metrics) != 0) {
        t->metrics_errno = errno ? errno : EIO;
        if (t->log)
            fprintf(t->log,
                    "warning: --metrics %s: cannot write (%s) at step %" PRId64 "; no more "
                    "metrics lines, the run goes on and ends with exit status 1\n",
                    t->cfg->metrics_path, strerror(t->metrics_errno), step);
    }
}

int sr_trainer_close_metrics(struct sr_trainer *t)
{
    if (!t->metrics)
        return SR_OK;
    errno = 0;
    int bad = fclose(t->metrics) != 0;
    t->metrics = NULL;
    if (bad && !t->metrics_errno)
        t->metrics_errno = errno ? errno : EIO;
    if (!t->metrics_errno)
        return SR_OK;
    return sr_error_set(SR_ERR_WRITE,
                        "--metrics %s: cannot write (%s); the file is incomplete; HINT: check "
                        "the free disk space",
                        t->cfg->metrics_path, strerror(t->metrics_errno));
}

void sr_trainer_log_interval(struct sr_trainer *t, int64_t step, double loss,
                             const struct sr_interval *iv, int evaluated, double elapsed)
{
    const struct sr_train_config *cfg = t->cfg;
    double sps = iv->seconds > 0 ? (double)iv->steps * (double)t->global_batch / iv->seconds : 0;
    double step_ms = iv->steps ? 1e3 * iv->seconds / (double)iv->steps : 0;
    char eta[32] = "?", auc[32] = "-", total[32] = "epoch";
    if (cfg->steps < INT64_MAX / 4) {
        sr_format_duration(eta, sizeof eta, elapsed / (double)step * (double)(cfg->steps - step));
        snprintf(total, sizeof total, "%" PRId64, cfg->steps);
    }
    if (t->eval.last.n)
        snprintf(auc, sizeof auc, "%.4f", t->eval.last.auc);
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
    const struct sr_comm_counters *c = &t->acct.comm;
    double steps = (double)res->steps, exposed = 0, busy = 0;
    uint64_t calls = 0, calls_inter = 0, intra = 0, inter = 0;
    fprintf(f, "collectives per step (rank 0):");
    for (int k = 0; k < SR_COLL_COUNT; k++) {
        if (c->calls[k])
            fprintf(f, " %s %.2f", sr_coll_name(k), (double)c->calls[k] / steps);
        calls += c->calls[k], calls_inter += c->calls_inter[k];
        intra += c->bytes_intra[k], inter += c->bytes_inter[k];
        exposed += c->seconds[k], busy += c->seconds_total[k];
    }
    fprintf(f, " | total %.2f (%.2f intra-node only, %.2f crossing a node)\n",
            (double)calls / steps, (double)(calls - calls_inter) / steps,
            (double)calls_inter / steps);
    fprintf(f,
            "bytes sent per step: intra-node %.1f KiB, inter-node %.1f KiB; "
            "communication %.2f ms exposed of %.2f ms busy per step (%.1f%% of the step)\n",
            (double)intra / steps / 1024, (double)inter / steps / 1024, 1e3 * exposed / steps,
            1e3 * busy / steps,
            100.0 * exposed / (res->train_seconds > 0 ? res->train_seconds : 1));
    fprintf(f,
            "communication per step: busy %.2f ms, overlapped %.2f ms, exposed %.2f ms "
            "(exposed: the compute thread waiting on a collective)\n",
            1e3 * busy / steps, 1e3 * (busy > exposed ? busy - exposed : 0) / steps,
            1e3 * exposed / steps);
    fprintf(f, "wire dtypes: pooled %s, dense %s (%d buckets, %d dense calls per step)\n",
            sr_dtype_name(sr_sharded_ebc_is_local(t->sebc) ? SR_DTYPE_F32 : t->cfg->comm_dtype),
            sr_dtype_name(sr_grad_buckets_dtype(t->buckets)), sr_grad_buckets_count(t->buckets),
            sr_grad_buckets_calls(t->buckets));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile q of the sorted v[n]. */
static double pct_ms(const int64_t *v, int64_t n, double q)
{
    int64_t i = (int64_t)(q * (double)n + 0.999999) - 1;
    return 1e-6 * (double)v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

/* Stage s over the kept steps: mean, p50, p99 in ms; 0 if it never ran. */
static int stage_stats(const struct sr_trainer *t, int s, int64_t *scratch, double out[3])
{
    int64_t n = t->acct.step_kept, sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += scratch[i] = t->acct.step_ns[i * SR_SPAN_COUNT + s];
    if (sum == 0)
        return 0;
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_i64);
    out[0] = 1e-6 * (double)sum / (double)n;
    out[1] = pct_ms(scratch, n, 0.50);
    out[2] = pct_ms(scratch, n, 0.99);
    return 1;
}

/* Children are included in their parents; stages that never ran are left out. */
static void print_stages(const struct sr_trainer *t, FILE *f)
{
    static const int depth[SR_SPAN_COUNT] = {
        [SR_SPAN_LOAD] = 1,          [SR_SPAN_COPY] = 1,          [SR_SPAN_EMB_FORWARD] = 1,
        [SR_SPAN_INPUT_DIST_COUNTS] = 2, [SR_SPAN_INPUT_DIST_DATA] = 2, [SR_SPAN_LOOKUP] = 2,
        [SR_SPAN_OUTPUT_DIST] = 2,   [SR_SPAN_BOTTOM_MLP] = 1,    [SR_SPAN_INTERACTION] = 1,
        [SR_SPAN_TOP_MLP] = 1,       [SR_SPAN_BACKWARD] = 1,      [SR_SPAN_EMB_BACKWARD] = 1,
        [SR_SPAN_EMB_GRAD_DIST] = 2, [SR_SPAN_ALLREDUCE_BUCKET] = 2, [SR_SPAN_OPTIMIZER] = 1,
        [SR_SPAN_COMM_WAIT] = 1,     [SR_SPAN_DATA_WAIT] = 1};
    int64_t *scratch = sr_calloc((size_t)(t->acct.step_kept ? t->acct.step_kept : 1), sizeof *scratch);
    int64_t dev_steps = sr_device_spans_steps(t->trace.dspans);
    double st[3];
    fprintf(f, "stages (ms per step, rank 0, %" PRId64 " steps%s; nested stages are inside the "
               "one above):\n",
            t->acct.step_kept, t->acct.step_seen > t->acct.step_kept ? " sampled" : "");
    if (dev_steps)
        fprintf(f, "  (mean/p50/p99: the host issuing and waiting; device: the stage on the "
                   "device's streams, its mean over the traced steps it ran in, %" PRId64
                   " traced)\n",
                dev_steps);
    fprintf(f, "  %-24s %9s %9s %9s%s\n", "stage", "mean", "p50", "p99",
            dev_steps ? "    device" : "");
    for (int s = 0; s < SR_SPAN_COUNT; s++) {
        if (s == SR_SPAN_COMM || !stage_stats(t, s, scratch, st))
            continue;
        char name[40], dev[16] = "";
        snprintf(name, sizeof name, "%*s%s%s", 2 * depth[s], "", sr_span_name(s),
                 s == SR_SPAN_COMM_WAIT ? " (exposed)" : "");
        double dev_ms = sr_device_spans_stage_ms(t->trace.dspans, s);
        if (dev_steps && dev_ms > 0)
            snprintf(dev, sizeof dev, " %9.3f", dev_ms);
        else if (dev_steps)
            snprintf(dev, sizeof dev, " %9s", "-");
        fprintf(f, "  %-24s %9.3f %9.3f %9.3f%s\n", name, st[0], st[1], st[2], dev);
    }
    sr_free(scratch);
}

double sr_trainer_stage_mean_ms(const struct sr_trainer *t, int s)
{
    double sum = 0;
    for (int64_t i = 0; i < t->acct.step_kept; i++)
        sum += (double)t->acct.step_ns[i * SR_SPAN_COUNT + s];
    return t->acct.step_kept ? 1e-6 * sum / (double)t->acct.step_kept : 0;
}

static void print_trace(const struct sr_trainer *t, FILE *f)
{
    int64_t steps = t->trace.last - t->trace.first + 1;
    double per_step = steps > 0 ? (double)t->trace.spans / (double)steps : 0;
    double step_ms = sr_trainer_stage_mean_ms(t, SR_SPAN_STEP);
    double share = step_ms > 0 ? 100.0 * per_step * t->trace.span_cost_ns * 1e-6 / step_ms : 0;
    char range[64] = "no step"; /* a range past the last step traced none (warned at the start) */
    if (steps > 0)
        snprintf(range, sizeof range, "steps %" PRId64 ":%" PRId64, t->trace.first, t->trace.last);
    fprintf(f,
            "trace: %s, %s, %" PRIu64 " spans on rank 0 (%.0f per step); one span costs %.0f "
            "ns, so tracing adds %.3f%% to a step of %.2f ms%s\n",
            t->cfg->trace_path, range, t->trace.spans, per_step, t->trace.span_cost_ns, share,
            step_ms, t->trace.written ? "" : " (not written)");
    if (t->trace.dspans)
        fprintf(f,
                "trace: device spans of %" PRId64 " steps on %s; their clock anchor +- %.1f us; "
                "%" PRId64 " host waits for a free event\n",
                sr_device_spans_steps(t->trace.dspans), t->dev->name,
                1e-3 * (double)sr_device_spans_anchor_ns(t->trace.dspans),
                sr_device_spans_waits(t->trace.dspans));
}

/* The memory estimate every rank was checked against before the run (rank 0
 * computes it for each rank from the plan), and what rank 0 used. */
static void print_memory(const struct sr_trainer *t, FILE *f)
{
    struct sr_memory_estimate e0, e;
    char tot[24], tab[24], mlp[24], bat[24], ev[24];
    int most = 0;
    uint64_t most_bytes = 0;
    sr_train_config_memory(t->cfg, t->plan, 0, t->world_size, &e0);
    for (int r = 0; r < t->world_size; r++) {
        sr_train_config_memory(t->cfg, t->plan, r, t->world_size, &e);
        if (e.total > most_bytes)
            most = r, most_bytes = e.total;
    }
    /* an evaluation of files is sized by the files, checked when they are opened */
    if (t->cfg->n_eval_data)
        snprintf(ev, sizeof ev, "by the files");
    else
        sr_format_bytes(ev, sizeof ev, (double)e0.eval);
    fprintf(f,
            "memory per rank (estimated before the run): rank 0 %s (tables %s, MLPs %s, "
            "batch %s, evaluation %s",
            sr_format_bytes(tot, sizeof tot, (double)e0.total),
            sr_format_bytes(tab, sizeof tab, (double)e0.tables),
            sr_format_bytes(mlp, sizeof mlp, (double)e0.dense),
            sr_format_bytes(bat, sizeof bat, (double)e0.batch), ev);
    if (e0.pool)
        fprintf(f, ", --batch-pool %s", sr_format_bytes(ev, sizeof ev, (double)e0.pool));
    if (e0.staging)
        fprintf(f, ", checkpoint staging %s", sr_format_bytes(ev, sizeof ev, (double)e0.staging));
    fprintf(f, ")");
    if (t->world_size > 1)
        fprintf(f, "; the most: rank %d, %s", most,
                sr_format_bytes(tot, sizeof tot, (double)most_bytes));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "\nmemory used on rank 0: peak resident host memory %s",
            sr_format_bytes(tot, sizeof tot, 1024.0 * (double)ru.ru_maxrss));
    uint64_t peak = sr_dev_peak_bytes(t->dev);
    if (peak)
        fprintf(f, ", peak allocated on %s %s", t->dev->name,
                sr_format_bytes(tab, sizeof tab, (double)peak));
    fprintf(f, "\n");
}

/* What the checkpoints cost the training (checkpoint.c's totals, rank 0's
 * view: each save's stall is the slowest rank's). */
static void print_checkpoints(const struct sr_trainer *t, const struct sr_trainer_result *res,
                              FILE *f)
{
    if (!t->ckpt.saves)
        return;
    double run = res->train_seconds + t->ckpt.stall_s;
    fprintf(f,
            "checkpoints: %d written (%s), %.2f MB in all; training stalled %.3f s for them "
            "(%.2f%% of %.1f s), of which copies to host memory %.3f s\n",
            t->ckpt.saves, t->ckpt.overlap ? "written by a thread as training went on"
                                            : "written between steps",
            (double)t->ckpt.bytes / 1e6, t->ckpt.stall_s,
            run > 0 ? 100.0 * t->ckpt.stall_s / run : 0.0, run, t->ckpt.copy_s);
}

#ifdef SR_USE_OMP
static const char *const no_omp = "";
#else
static const char *const no_omp = "; this build has no OpenMP";
#endif

void sr_trainer_print_summary(const struct sr_trainer *t, const struct sr_trainer_result *res,
                              FILE *f)
{
    const struct sr_train_config *cfg = t->cfg;
    if (t->rank != 0 || res->steps == 0)
        return;
    fprintf(f, "\n== shardrec train: summary ==\n");
    fprintf(f,
            "steps %" PRId64 ", %d ranks (%s), global batch %" PRId64
            ", %.1f s training, %.0f samples/s\n",
            res->steps, t->world_size, sr_comm_backend_name(t->world), t->global_batch,
            res->train_seconds, res->samples_per_s);
    if (res->steady_steps > 0) {
        double ms = res->steady_seconds * 1e3 / (double)res->steady_steps;
        fprintf(f,
                "steady state: steps %" PRId64 "-%" PRId64 " on %s, %.3f ms per step, %.0f "
                "samples/s (device events after the warm-up and after the last step)\n",
                res->steady_first, res->steady_first + res->steady_steps - 1, t->dev->name, ms,
                (double)t->global_batch * 1e3 / ms);
    }
    if (t->pipe.loss_stage)
        fprintf(f, "CUDA graphs: %" PRId64 " of %" PRId64 " steps replayed from a graph of the "
                   "step (their stages are not timed one by one)\n",
                t->pipe.graph_steps, res->steps);
    print_stages(t, f);
    if (cfg->pipeline == SR_PIPELINE_SPARSE_DIST)
        fprintf(f, "waited on data: %.3f ms per step (data.wait: the compute thread waiting for "
                   "the loader thread, which makes batches on %d OpenMP thread%s%s)\n",
                sr_trainer_stage_mean_ms(t, SR_SPAN_DATA_WAIT), t->pipe.loader.threads,
                t->pipe.loader.threads == 1 ? "" : "s", no_omp);
    else
        fprintf(f, "waited on data: %.3f ms per step (the load stage: the compute thread reading "
                   "the batch)\n",
                sr_trainer_stage_mean_ms(t, SR_SPAN_LOAD));
    print_comm(t, res, f);
    print_memory(t, f);
    print_checkpoints(t, res, f);
    sr_trainer_print_prediction(t, res, f);
    if (t->trace.on)
        print_trace(t, f);
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
    fprintf(f,
            "host waits per step (rank 0): %.2f stream syncs, %.2f event waits (loss reads "
            "included: the host reads losses at least every %d steps)\n",
            (double)t->acct.syncs[0] / (double)res->steps,
            (double)t->acct.syncs[1] / (double)res->steps, t->losses.cap);
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
