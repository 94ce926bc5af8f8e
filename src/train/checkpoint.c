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
 * A save waits for the step's streams, copies each tensor to the host (a
 * pinned buffer made at init when the host cannot address the device) and
 * writes; it is synchronous. Its allocations (the writer's) are counted apart
 * from the loop's.
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
#include "train/trainer_internal.h"

#define FORMAT     SR_CKPT_FORMAT
#define MANIFEST   SR_CKPT_MANIFEST
#define DENSE_FILE SR_CKPT_DENSE
#define NAME_CAP   SR_CKPT_NAME_CAP

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

/* ---- names and checksums ------------------------------------------------------ */

static void shard_name(char *buf, const struct sr_trainer *t, const struct sr_sharded_ebc_shard *sh,
                       const char *what)
{
    sr_ckpt_shard_name(buf, t->cfg->tables[sh->table].name, sh->shard, what);
}

static void rank_file(char *buf, size_t cap, const char *dir, int rank)
{
    char name[32];
    sr_ckpt_rank_file(name, sizeof name, rank);
    if (snprintf(buf, cap, "%s/%s", dir, name) >= (int)cap)
        buf[0] = 0; /* cannot happen: cap fits SR_PATH_MAX + the name */
}

int sr_checkpoint_file_checksum(const char *path, uint64_t *hash, uint64_t *bytes)
{
    unsigned char buf[1 << 16];
    size_t n;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sr_error_set(SR_ERR_DATA, "checkpoint file %s: cannot open (%s)", path,
                            strerror(errno));
    *hash = SR_HASH_INIT;
    *bytes = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        *hash = sr_hash_bytes(*hash, buf, n);
        *bytes += n;
    }
    int bad = ferror(f);
    fclose(f);
    return bad ? sr_error_set(SR_ERR_DATA, "checkpoint file %s: read error", path) : SR_OK;
}

/* ---- save --------------------------------------------------------------------- */

/* A tensor's data where the writer can read it: the device pointer itself
 * on a host-visible device, else a copy in the pinned buffer at *at. */
static const float *staged(struct sr_trainer *t, const float *src, size_t n, size_t *at)
{
    if (!t->ckpt.pinned || !n)
        return src;
    SR_ASSERT(*at + n <= t->ckpt.pinned_floats);
    float *dst = t->ckpt.pinned + *at;
    sr_dev_copy(t->dev, dst, src, sizeof(float) * n, NULL);
    *at += n;
    return dst;
}

static int write_rank_file(struct sr_trainer *t, const char *path)
{
    int ns = sr_sharded_ebc_num_local_shards(t->sebc), n = 0;
    struct sr_st_tensor *ts = sr_calloc((size_t)2 * ns + 1, sizeof *ts);
    char(*names)[NAME_CAP] = sr_calloc((size_t)2 * ns + 1, sizeof *names);
    size_t at = 0;
    for (int i = 0; i < ns; i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        shard_name(names[n], t, &sh, "weight");
        ts[n] = (struct sr_st_tensor){.name = names[n], .ndim = 2, .shape = {sh.rows, sh.dim}};
        ts[n++].data = staged(t, sh.weight, (size_t)sh.rows * sh.dim, &at);
        if (!sh.state_floats)
            continue;
        shard_name(names[n], t, &sh, "state");
        ts[n] = (struct sr_st_tensor){.name = names[n], .ndim = 1, .shape = {(int64_t)sh.state_floats}};
        ts[n++].data = staged(t, sh.state, sh.state_floats, &at);
    }
    sr_dev_sync(t->dev, NULL);
    int rc = sr_st_write(path, n, ts);
    sr_free(names);
    sr_free(ts);
    return rc;
}

static int write_dense_file(struct sr_trainer *t, const char *path)
{
    size_t np, ns, at = 0;
    float *params = sr_dlrm_params(t->dlrm, &np);
    float *state = sr_dense_optim_state(t->dense_optim, &ns);
    struct sr_st_tensor ts[2] = {
        {.name = "dense.params", .ndim = 1, .shape = {(int64_t)np}},
        {.name = "dense.optim_state", .ndim = 1, .shape = {(int64_t)ns}},
    };
    ts[0].data = staged(t, params, np, &at);
    ts[1].data = staged(t, state, ns, &at);
    sr_dev_sync(t->dev, NULL);
    return sr_st_write(path, ns ? 2 : 1, ts);
}

/* What each rank tells rank 0 after writing: status, its file's checksum and
 * size, the dense file's (rank 0), and its seconds (as bits). */
enum { R_RC, R_HASH, R_BYTES, R_DHASH, R_DBYTES, R_SECONDS, R_N };

/* Version 2's model description: global batch, optimizers, tables, the
 * plan, and the dense tensors inside dense.params (checkpoint_format.c). */
static void write_model(struct sr_trainer *t, FILE *f)
{
    const struct sr_train_config *cfg = t->cfg;
    char *plan = sr_plan_to_json(t->plan);
    fprintf(f, "  \"global_batch\": %" PRId64 ",\n  \"optimizer\": \"%s\",\n"
               "  \"emb_optimizer\": \"%s\",\n  \"tables\": [",
            t->global_batch, sr_optim_kind_name(cfg->optimizer),
            sr_optim_kind_name(cfg->emb_optimizer));
    for (int k = 0; k < cfg->num_tables; k++)
        fprintf(f, "%s\n    {\"name\": \"%s\", \"rows\": %" PRId64 ", \"dim\": %d}", k ? "," : "",
                cfg->tables[k].name, cfg->tables[k].num_embeddings, cfg->tables[k].embedding_dim);
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

static void write_manifest_body(struct sr_trainer *t, FILE *f, int64_t step, const uint64_t *all)
{
    const struct sr_train_config *cfg = t->cfg;
    uint64_t plan = t->plan ? sr_plan_hash(t->plan) : 0;
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"step\": %" PRId64 ",\n", FORMAT,
            SR_CKPT_VERSION, step);
    fprintf(f, "  \"world_size\": %d,\n  \"plan_hash\": \"%016" PRIx64 "\",\n", t->world_size,
            plan);
    write_model(t, f);
    fprintf(f, "  \"settings\": {");
    for (int k = 0; k < N_TRAJECTORY; k++)
        fprintf(f, "%s\n    \"%s\": \"%016" PRIx64 "\"", k ? "," : "", trajectory[k],
                sr_trainer_setting_hash(cfg, trajectory[k]));
    fprintf(f, "\n  },\n  \"rng\": {\"kind\": \"counter\", \"seed\": \"%" PRIu64 "\"},\n",
            cfg->seed);
    sr_checkpoint_data_write(t, f, step);
    fprintf(f, "  \"lr_schedule\": {\"spec\": \"%s\", \"next_step\": %" PRId64
               ", \"dense_lr\": %.9g, \"emb_lr\": %.9g},\n",
            cfg->lr_schedule, step + 1, (double)sr_lr_at(&t->lr_dense, step + 1),
            (double)sr_lr_at(&t->lr_emb, step + 1));
    fprintf(f, "  \"files\": [\n    {\"name\": \"%s\", \"bytes\": %" PRIu64
               ", \"fnv1a64\": \"%016" PRIx64 "\"}",
            DENSE_FILE, all[R_DBYTES], all[R_DHASH]);
    for (int r = 0; r < t->world_size; r++)
        fprintf(f, ",\n    {\"name\": \"rank-%05d.safetensors\", \"bytes\": %" PRIu64
                   ", \"fnv1a64\": \"%016" PRIx64 "\"}",
                r, all[(size_t)r * R_N + R_BYTES], all[(size_t)r * R_N + R_HASH]);
    fprintf(f, "\n  ]\n}\n");
}

static int write_manifest(struct sr_trainer *t, const char *dir, int64_t step, const uint64_t *all)
{
    char path[SR_PATH_MAX + 64];
    struct sr_atomic_file af;
    snprintf(path, sizeof path, "%s/%s", dir, MANIFEST);
    int rc = sr_atomic_file_open(&af, path);
    if (rc)
        return rc;
    write_manifest_body(t, af.f, step, all);
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

static int write_files(struct sr_trainer *t, const char *dir, uint64_t *mine)
{
    char path[SR_PATH_MAX + 64];
    int rc = SR_OK;
    if (mkdir(dir, 0777) && errno != EEXIST)
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint %s: cannot create (%s)", dir, strerror(errno));
    rank_file(path, sizeof path, dir, t->rank);
    if (!rc && !(rc = write_rank_file(t, path)))
        rc = sr_checkpoint_file_checksum(path, &mine[R_HASH], &mine[R_BYTES]);
    snprintf(path, sizeof path, "%s/%s", dir, DENSE_FILE);
    if (!rc && t->rank == 0 && !(rc = write_dense_file(t, path)))
        rc = sr_checkpoint_file_checksum(path, &mine[R_DHASH], &mine[R_DBYTES]);
    return rc;
}

int sr_checkpoint_save(struct sr_trainer *t, int64_t step)
{
    double t0 = sr_now_s();
    uint64_t a0 = sr_alloc_count(), mine[R_N] = {0};
    char dir[SR_PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/step-%08" PRId64, t->cfg->checkpoint_dir, step);
    sr_trainer_pipeline_pause(t); /* the next batch's exchange completes first */
    sr_trainer_streams_drain(t);
    int rc = write_files(t, dir, mine);
    if (rc) /* a result of the run that could not be written: exit status 1 */
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint step %" PRId64 ": %s", step, sr_error_message());
    double secs = sr_now_s() - t0;
    mine[R_RC] = (uint64_t)(int64_t)rc;
    memcpy(&mine[R_SECONDS], &secs, sizeof secs);
    uint64_t *all = sr_calloc((size_t)t->world_size * R_N, sizeof *all);
    sr_comm_all_gather(t->world, mine, all, R_N, SR_DTYPE_I64, NULL, NULL);
    int bad = -1;
    for (int r = 0; r < t->world_size && bad < 0; r++)
        if (all[(size_t)r * R_N + R_RC])
            bad = r;
    if (bad >= 0 && !rc)
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint %s: rank %d could not write its file", dir,
                          bad);
    if (!rc && t->rank == 0) {
        all[R_DHASH] = mine[R_DHASH], all[R_DBYTES] = mine[R_DBYTES];
        rc = write_manifest(t, dir, step, all);
        if (rc)
            rc = sr_error_set(SR_ERR_WRITE, "checkpoint step %" PRId64 ": %s", step,
                              sr_error_message());
    }
    int64_t rc0 = rc;
    if (bad < 0)
        sr_comm_broadcast(t->world, &rc0, &rc0, 1, SR_DTYPE_I64, 0, NULL, NULL);
    if (rc0 && !rc)
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint %s: rank 0 could not write the manifest", dir);
    if (!rc && t->rank == 0) {
        prune(t->cfg, step);
        double total = 0, worst = -1, slowest = 0;
        for (int r = 0; r < t->world_size; r++) {
            const uint64_t *a = &all[(size_t)r * R_N];
            double s, mb = (double)(a[R_BYTES] + (r == 0 ? mine[R_DBYTES] : 0)) / 1e6;
            memcpy(&s, &a[R_SECONDS], sizeof s);
            total += mb;
            slowest = s > slowest ? s : slowest;
            if (s > 0 && (worst < 0 || mb / s < worst))
                worst = mb / s;
        }
        if (t->log)
            fprintf(t->log,
                    "checkpoint step %" PRId64 ": %s, %.3f s, %.2f MB from %d rank%s (slowest "
                    "rank %.3f s, lowest rate %.1f MB/s per rank)\n",
                    step, dir, sr_now_s() - t0, total, t->world_size, t->world_size > 1 ? "s" : "",
                    slowest, worst > 0 ? worst : 0.0);
    }
    sr_free(all);
    t->ckpt.allocs += sr_alloc_count() - a0;
    t->ckpt.last_save_s = sr_now_s();
    return rc;
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
    sr_comm_broadcast(t->world, &due, &due, 1, SR_DTYPE_I64, 0, NULL, NULL);
    return due != 0;
}
