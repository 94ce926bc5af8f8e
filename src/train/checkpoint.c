/*
 * Checkpoints: write and read back the whole training state at a step, so a
 * run stopped there continues bit for bit at the same world size and plan,
 * and on the same trajectory under another (checkpoint_reshard.c).
 *
 *   DIR/step-NNNNNNNN/
 *     rank-RRRRR.safetensors  every rank: its table shards and their optimizer
 *                             state, "emb.TABLE.shardJ.weight" [rows, cols] and
 *                             "emb.TABLE.shardJ.state" [n] (a dp table, whole on
 *                             every rank: "emb.TABLE.dp.*")
 *     dense.safetensors       rank 0: "dense.params" [n] (the flat dense block)
 *                             and "dense.optim_state" [k] (Adagrad's sums, Adam's
 *                             m then v; absent for SGD)
 *     manifest.json           rank 0, LAST: step, world size, plan and settings
 *                             hashes, seed, data position, the lr schedule's
 *                             position, each file's size and FNV-1a 64 checksum;
 *                             and (version 2) the global batch, the optimizers,
 *                             the tables, the plan itself and the dense tensors
 *                             (checkpoint_format.c), so that --resume can
 *                             reshard it and `shardrec inspect`/`export` read it
 *
 * Every file is written atomically (atomic_file.h), so a directory without a
 * valid manifest is an incomplete checkpoint: --resume without a path skips
 * it. Nothing else needs restoring: randomness is counter-based (a weight of
 * (seed, tensor, row), a sample of (seed, global index)), the synthetic
 * batch of step s is a function of s, and the learning rates and the
 * optimizers' step count are functions of the step.
 *
 * A save waits for the step's streams and stages this rank's tensors
 * (checkpoint_writer.c: copied into host staging made at init, pinned on a
 * GPU); the files are written by a thread while training goes on
 * (--checkpoint-write overlap) or before the next step (sync). A save is
 * complete when every rank's files are (an 8-byte all-gather after each step
 * while one is in flight: sr_checkpoint_poll) and rank 0 has written the
 * manifest; only then are older checkpoints pruned. 16-bit tables are written
 * as stored (F16/BF16 tensors). Its allocations, the writer thread's
 * included, are counted apart from the loop's.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/clock.h"
#include "shardrec/dense_optim.h"
#include "shardrec/dlrm.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "shardrec/safetensors.h"
#include "train/checkpoint.h"
#include "train/checkpoint_format.h"
#include "train/checkpoint_writer.h"
#include "train/trainer_internal.h"

#define FORMAT     SR_CKPT_FORMAT
#define MANIFEST   SR_CKPT_MANIFEST
#define DENSE_FILE SR_CKPT_DENSE
#define R_N        SR_CKPT_R_N
#define R_RC       SR_CKPT_R_RC
#define R_HASH     SR_CKPT_R_HASH
#define R_BYTES    SR_CKPT_R_BYTES
#define R_DHASH    SR_CKPT_R_DHASH
#define R_DBYTES   SR_CKPT_R_DBYTES

/* The settings that decide the model and its training trajectory: a
 * checkpoint continues only a run that agrees on every one. */
const char *const sr_checkpoint_settings[SR_CHECKPOINT_N_SETTINGS] = {
    "--embedding-dim", "--bot-mlp",      "--top-mlp",       "--interaction", "--dcn-layers",
    "--dcn-rank",      "--seed",         "--ids-per-feature", "--id-dist",   "--batch-size",
    "--lr",            "--emb-lr",       "--lr-schedule",   "--optimizer",   "--emb-optimizer",
    "--math",          "--comm-dtype",   "--dense-comm-dtype", "--table-rows", "features",
};
#define trajectory   sr_checkpoint_settings
#define N_TRAJECTORY SR_CHECKPOINT_N_SETTINGS

int sr_checkpoint_check_config(const struct sr_train_config *cfg)
{
    if (cfg->resume && !cfg->resume_path[0] && !cfg->checkpoint_dir[0])
        return sr_error_set(SR_ERR_INVALID_ARG, "--resume without a PATH needs --checkpoint-dir; "
                                                "HINT: --resume DIR/step-NNNNNNNN, or add "
                                                "--checkpoint-dir DIR");
    if (cfg->resume && cfg->init_weights_path[0])
        return sr_error_set(SR_ERR_INVALID_ARG, "--resume and --init-weights both set the "
                                                "weights; HINT: give one of them");
    if ((cfg->checkpoint_every || cfg->checkpoint_minutes > 0) && !cfg->checkpoint_dir[0])
        return sr_error_set(SR_ERR_INVALID_ARG, "--checkpoint-every needs --checkpoint-dir DIR");
    return SR_OK;
}

/* ---- save ---------------------------------------------------------------------- */

/* s as a JSON string, quoted and escaped: a table's name is the user's and
 * may hold any byte JSON must escape. */
static void put_json_string(FILE *f, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    if (!text)
        SR_ABORT("out of memory writing a checkpoint manifest");
    fputs(text, f);
    cJSON_free(text);
    cJSON_Delete(j);
}

/* Version 2's model description: global batch, optimizers, tables, the
 * plan, and the dense tensors inside dense.params (checkpoint_format.c). */
static void write_model(struct sr_trainer *t, FILE *f)
{
    const struct sr_train_config *cfg = t->cfg;
    char *plan = sr_plan_to_json(t->plan);
    fprintf(f,
            "  \"global_batch\": %" PRId64 ",\n  \"optimizer\": \"%s\",\n"
            "  \"emb_optimizer\": \"%s\",\n  \"tables\": [",
            t->global_batch, sr_optim_kind_name(cfg->optimizer),
            sr_optim_kind_name(cfg->emb_optimizer));
    for (int k = 0; k < cfg->num_tables; k++) {
        fprintf(f, "%s\n    {\"name\": ", k ? "," : "");
        put_json_string(f, cfg->tables[k].name);
        fprintf(f, ", \"rows\": %" PRId64 ", \"dim\": %d, \"dtype\": \"%s\", \"pooling\": \"%s\"}",
                cfg->tables[k].num_embeddings, cfg->tables[k].embedding_dim,
                sr_dtype_name(cfg->emb_dtype), sr_pooling_name(cfg->tables[k].pooling));
    }
    fprintf(f, "\n  ],\n  \"plan\": %s,\n  \"dense_tensors\": [", plan);
    for (int i = 0; i < sr_dlrm_num_tensors(t->dlrm); i++) {
        const char *name;
        int ndim;
        int64_t shape[2] = {0, 0};
        float *data;
        sr_dlrm_tensor(t->dlrm, i, &name, &ndim, shape, &data);
        fprintf(f, "%s\n    {\"name\": \"%s\", \"shape\": [%" PRId64, i ? "," : "", name, shape[0]);
        if (ndim == 2)
            fprintf(f, ", %" PRId64, shape[1]);
        fprintf(f, "], \"offset\": %zu}", sr_dlrm_tensor_offset(t->dlrm, i));
    }
    fprintf(f, "\n  ],\n");
    sr_free(plan);
}

/* The manifest up to its file list, rendered when the save is staged (the
 * data position of `step` is the loader's now, not later). */
static char *manifest_head(struct sr_trainer *t, int64_t step)
{
    const struct sr_train_config *cfg = t->cfg;
    uint64_t plan = t->plan ? sr_plan_hash(t->plan) : 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        SR_ABORT("open_memstream: %s", strerror(errno));
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"step\": %" PRId64 ",\n", FORMAT,
            SR_CKPT_VERSION, step);
    fprintf(f, "  \"world_size\": %d,\n  \"plan_hash\": \"%016" PRIx64 "\",\n", t->world_size,
            plan);
    write_model(t, f);
    fprintf(f, "  \"settings\": {");
    for (int k = 0; k < N_TRAJECTORY; k++)
        fprintf(f, "%s\n    \"%s\": \"%016" PRIx64 "\"", k ? "," : "", trajectory[k],
                t->ckpt.settings_hash[k]);
    fprintf(f, "\n  },\n  \"rng\": {\"kind\": \"counter\", \"seed\": \"%" PRIu64 "\"},\n",
            cfg->seed);
    sr_checkpoint_data_write(t, f, step);
    fprintf(f, "  \"lr_schedule\": {\"spec\": ");
    put_json_string(f, cfg->lr_schedule);
    fprintf(f, ", \"next_step\": %" PRId64 ", \"dense_lr\": %.9g, \"emb_lr\": %.9g},\n", step + 1, (double)sr_lr_at(&t->lr_dense, step + 1),
            (double)sr_lr_at(&t->lr_emb, step + 1));
    fclose(f);
    return text;
}

/* The head, then each file's size and checksum (all[]: every rank's results). */
static void write_manifest_body(const struct sr_ckpt_job *j, int world_size, FILE *f,
                                const uint64_t *all)
{
    fputs(j->manifest_head, f);
    fprintf(f, "  \"files\": [\n    {\"name\": \"%s\", \"bytes\": %" PRIu64
               ", \"fnv1a64\": \"%016" PRIx64 "\"}",
            DENSE_FILE, all[R_DBYTES], all[R_DHASH]);
    for (int r = 0; r < world_size; r++)
        fprintf(f, ",\n    {\"name\": \"rank-%05d.safetensors\", \"bytes\": %" PRIu64
                   ", \"fnv1a64\": \"%016" PRIx64 "\"}",
                r, all[(size_t)r * R_N + R_BYTES], all[(size_t)r * R_N + R_HASH]);
    fprintf(f, "\n  ]\n}\n");
}

static int write_manifest(const struct sr_ckpt_job *j, int world_size, const uint64_t *all)
{
    char path[SR_PATH_MAX + 64];
    struct sr_atomic_file af;
    snprintf(path, sizeof path, "%s/%s", j->dir, MANIFEST);
    int rc = sr_atomic_file_open(&af, path);
    if (rc)
        return rc;
    write_manifest_body(j, world_size, af.f, all);
    return sr_atomic_file_commit(&af);
}

static int step_of(const char *name, int64_t *step)
{
    if (strncmp(name, "step-", 5) || strlen(name) != 13)
        return 0;
    *step = 0;
    for (int i = 5; i < 13; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        *step = *step * 10 + (name[i] - '0');
    }
    return 1;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[2 * SR_PATH_MAX + 512];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Keep the newest --checkpoint-keep checkpoints up to `step`; remove the
 * older step directories (complete or not). Later steps are left alone. */
static void prune(const struct sr_train_config *cfg, int64_t step)
{
    int64_t s, kept = 0, limit = step;
    char path[2 * SR_PATH_MAX + 512];
    struct stat st;
    for (s = step; s >= 1 && kept < cfg->checkpoint_keep; s--) {
        snprintf(path, sizeof path, "%s/step-%08" PRId64 "/%s", cfg->checkpoint_dir, s, MANIFEST);
        if (stat(path, &st) == 0)
            kept++, limit = s;
    }
    DIR *d = opendir(cfg->checkpoint_dir);
    struct dirent *e;
    while (kept >= cfg->checkpoint_keep && d && (e = readdir(d))) {
        if (!step_of(e->d_name, &s) || s >= limit)
            continue;
        if (snprintf(path, sizeof path, "%s/%s", cfg->checkpoint_dir, e->d_name) <
            (int)sizeof path)
            remove_dir(path);
    }
    if (d)
        closedir(d);
}

static double max_d(double a, double b)
{
    return a > b ? a : b;
}

/* The run's totals and rank 0's line for a completed checkpoint: the
 * training's stall (the slowest rank's, and rank 0's time since), the copy
 * to host memory, and the write, behind how many steps of training. */
static void report(struct sr_trainer *t, const struct sr_ckpt_job *j, const uint64_t *all,
                   int64_t now, double since)
{
    double mb = 0, write_s = 0, rate = -1, copy_s = 0, gbps = -1, stall = 0;
    uint64_t copied = 0;
    for (int r = 0; r < t->world_size; r++) {
        const uint64_t *a = &all[(size_t)r * R_N];
        double w = sr_ckpt_seconds(a[SR_CKPT_R_WRITE_S]), c = sr_ckpt_seconds(a[SR_CKPT_R_COPY_S]);
        double rank_mb = (double)(a[R_BYTES] + a[R_DBYTES]) / 1e6;
        mb += rank_mb;
        write_s = max_d(write_s, w);
        copy_s = max_d(copy_s, c);
        stall = max_d(stall, sr_ckpt_seconds(a[SR_CKPT_R_STALL_S]));
        copied += a[SR_CKPT_R_COPY_BYTES];
        if (w > 0 && (rate < 0 || rank_mb / w < rate))
            rate = rank_mb / w;
        if (c > 0 && a[SR_CKPT_R_COPY_BYTES] &&
            (gbps < 0 || (double)a[SR_CKPT_R_COPY_BYTES] / 1e9 / c < gbps))
            gbps = (double)a[SR_CKPT_R_COPY_BYTES] / 1e9 / c;
    }
    stall += since;
    t->ckpt.saves++;
    t->ckpt.stall_s += stall;
    t->ckpt.copy_s += copy_s;
    t->ckpt.bytes += (uint64_t)(mb * 1e6);
    if (!t->log)
        return;
    char copy[128], behind[96];
    if (copied)
        snprintf(copy, sizeof copy, "copy to host memory %.3f s, %.2f GB/s per rank", copy_s,
                 gbps > 0 ? gbps : 0.0);
    else
        snprintf(copy, sizeof copy, "no copy: written from the tensors");
    if (t->ckpt.overlap)
        snprintf(behind, sizeof behind, "behind %" PRId64 " step%s of training", now - j->step,
                 now - j->step == 1 ? "" : "s");
    else
        snprintf(behind, sizeof behind, "within the stall");
    fprintf(t->log,
            "checkpoint step %" PRId64 ": %s, %.2f MB from %d rank%s; stall %.3f s (%s); "
            "write %.3f s %s (slowest rank; lowest rate %.1f MB/s per rank)\n",
            j->step, j->dir, mb, t->world_size, t->world_size > 1 ? "s" : "", stall, copy,
            write_s, behind, rate > 0 ? rate : 0.0);
}

/* Every rank's status after its files: the first rank that failed, or -1. */
static int first_failed(const struct sr_trainer *t, const uint64_t *all)
{
    for (int r = 0; r < t->world_size; r++)
        if (all[(size_t)r * R_N + R_RC])
            return r;
    return -1;
}

/* Collective: the save's files are written on every rank (or failed): rank
 * 0 writes the manifest once every rank's are, every rank learns the
 * outcome, and rank 0 prunes and reports. `now`: the step training reached. */
static int complete(struct sr_trainer *t, int64_t now)
{
    struct sr_ckpt_job *j = t->ckpt.job;
    double t0 = sr_now_s();
    uint64_t a0 = sr_alloc_count_this_thread();
    int rc = SR_OK;
    sr_ckpt_job_join(j);
    if (j->mine[R_RC]) /* a result of the run that could not be written: exit status 1 */
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint step %" PRId64 ": %s", j->step, j->error);
    sr_ckpt_put_seconds(&j->mine[SR_CKPT_R_STALL_S], j->stall_s + sr_now_s() - t0);
    uint64_t *all = sr_calloc((size_t)t->world_size * R_N, sizeof *all);
    sr_comm_all_gather_host(t->world, j->mine, all, R_N, SR_DTYPE_I64);
    double gathered = sr_now_s();
    int bad = first_failed(t, all);
    if (bad >= 0 && !rc)
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint %s: rank %d could not write its file", j->dir,
                          bad);
    if (!rc && t->rank == 0 && (rc = write_manifest(j, t->world_size, all)))
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint step %" PRId64 ": %s", j->step,
                          sr_error_message());
    int64_t rc0 = rc;
    if (bad < 0)
        sr_comm_broadcast_host(t->world, &rc0, &rc0, 1, SR_DTYPE_I64, 0);
    if (rc0 && !rc)
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint %s: rank 0 could not write the manifest",
                          j->dir);
    if (!rc && t->rank == 0) {
        prune(t->cfg, j->step);
        report(t, j, all, now, sr_now_s() - gathered);
    }
    sr_free(all);
    t->ckpt.allocs += sr_alloc_count_this_thread() - a0 + j->thread_allocs;
    sr_ckpt_job_free(j);
    t->ckpt.job = NULL;
    return rc;
}

int sr_checkpoint_save(struct sr_trainer *t, int64_t step, int wait)
{
    int rc = t->ckpt.job ? complete(t, step) : SR_OK; /* the previous save first */
    if (rc)
        return rc;
    double t0 = sr_now_s();
    uint64_t a0 = sr_alloc_count_this_thread();
    char dir[SR_PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/step-%08" PRId64, t->cfg->checkpoint_dir, step);
    sr_trainer_pipeline_pause(t); /* the next batch's exchange completes first */
    sr_trainer_streams_drain(t);
    struct sr_ckpt_job *j = sr_ckpt_job_stage(t, step, dir);
    if (t->rank == 0)
        j->manifest_head = manifest_head(t, step);
    sr_ckpt_job_start(j, t->ckpt.overlap);
    t->ckpt.job = j;
    t->ckpt.allocs += sr_alloc_count_this_thread() - a0;
    j->stall_s = sr_now_s() - t0;
    if (!t->ckpt.overlap || wait)
        rc = complete(t, step);
    t->ckpt.last_save_s = sr_now_s();
    return rc;
}

int sr_checkpoint_poll(struct sr_trainer *t, int64_t step)
{
    struct sr_ckpt_job *j = t->ckpt.job;
    if (!j)
        return SR_OK;
    double t0 = sr_now_s();
    uint64_t a0 = sr_alloc_count_this_thread();
    int64_t done = atomic_load(&j->done), every = 1;
    sr_comm_all_gather_host(t->world, &done, j->flags, 1, SR_DTYPE_I64);
    for (int r = 0; r < t->world_size; r++)
        every = every && j->flags[r];
    t->ckpt.allocs += sr_alloc_count_this_thread() - a0;
    j->stall_s += sr_now_s() - t0;
    return every ? complete(t, step) : SR_OK;
}

int sr_checkpoint_due(struct sr_trainer *t, int64_t step, int last)
{
    const struct sr_train_config *cfg = t->cfg;
    if (!cfg->checkpoint_dir[0] || step < t->ckpt.first_step)
        return 0;
    if (last)
        return 1;
    if (cfg->checkpoint_minutes <= 0)
        return cfg->checkpoint_every > 0 && step % cfg->checkpoint_every == 0;
    int64_t due = t->rank == 0 && sr_now_s() - t->ckpt.last_save_s >= 60.0 * cfg->checkpoint_minutes;
    sr_comm_broadcast_host(t->world, &due, &due, 1, SR_DTYPE_I64, 0);
    return due != 0;
}
