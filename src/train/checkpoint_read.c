/*
 * Checkpoints, the reading half (layout in checkpoint.c, format in
 * checkpoint_format.c): find the checkpoint (a PATH, or the latest complete
 * step-NNNNNNNN/ under --checkpoint-dir), check that it holds this job's
 * model (the tables by name, rows and dims, then every setting that decides
 * the model and its trajectory, and the global batch: the first difference
 * is named), check the data and place the reader (checkpoint_data.c), verify
 * the FNV-1a 64 checksum of every file (each rank a share
 * of the old rank files, every rank the dense file), then fill this rank's
 * shards from the checkpoint's plan (checkpoint_reshard.c: any world size and
 * plan) and copy the dense block with its optimizer state. Collective: a rank
 * that fails makes every rank fail, after verifying and after loading.
 *
 * Version 1 manifests do not record their plan: they resume at the same world
 * size and plan only, as before.
 *
 * `shardrec eval` (cfg->eval_only) reads the same way but takes the model
 * alone: the tables and the settings that decide the model's function must
 * agree (model_settings); the training settings, the data position and the
 * optimizer state are neither checked nor read.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrec/alloc.h"
#include "shardrec/dense_optim.h"
#include "shardrec/dlrm.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "shardrec/safetensors.h"
#include "train/checkpoint.h"
#include "train/checkpoint_format.h"
#include "train/checkpoint_writer.h"
#include "train/trainer_internal.h"

#define HINT_RESUME "HINT: resume with the flags of the run that wrote it, or start a new run"
#define HINT_EVAL                                                                                 \
    "HINT: give eval the model flags of the run that wrote it (--workload, --config, "            \
    "--table-rows, --pooling, --embedding-dim, the MLPs, the interaction)"
#define HINT_JOB (t->cfg->eval_only ? HINT_EVAL : HINT_RESUME)
#define FLAG     (t->cfg->eval_only ? "MODEL" : "--resume")

#define trajectory   sr_checkpoint_settings
#define N_TRAJECTORY SR_CHECKPOINT_N_SETTINGS

/* The settings that decide what the model computes (eval checks these). */
static const char *const model_settings[] = {"--embedding-dim", "--bot-mlp",    "--top-mlp",
                                             "--interaction",   "--dcn-layers", "--dcn-rank",
                                             "--table-rows",    "features"};
#define N_MODEL ((int)(sizeof model_settings / sizeof model_settings[0]))

static const char *str_of(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The tables of the checkpoint are this run's: names, rows, dims. */
static int check_tables(const struct sr_trainer *t, const struct sr_ckpt *ck)
{
    const struct sr_train_config *cfg = t->cfg;
    for (int k = 0; k < cfg->num_tables; k++) {
        const struct sr_table_config *tc = &cfg->tables[k], *old = NULL;
        for (int j = 0; j < ck->ec.num_tables && !old; j++)
            if (!strcmp(ck->ec.tables[j].name, tc->name))
                old = &ck->ec.tables[j];
        if (!old)
            return sr_error_set(SR_ERR_DATA, "%s %s: table '%s' of this run is not in the "
                                "checkpoint; %s", FLAG, ck->dir, tc->name, HINT_JOB);
        if (old->num_embeddings != tc->num_embeddings || old->embedding_dim != tc->embedding_dim)
            return sr_error_set(SR_ERR_DATA,
                                "%s %s: table '%s' is %" PRId64 " rows x %d in the "
                                "checkpoint, %" PRId64 " x %d in this run (another %s): its plan "
                                "cannot be mapped (resharding moves rows, it adds or drops "
                                "none); %s",
                                FLAG, ck->dir, tc->name, old->num_embeddings, old->embedding_dim,
                                tc->num_embeddings, tc->embedding_dim,
                                old->embedding_dim != tc->embedding_dim ? "--embedding-dim"
                                                                        : "--table-rows",
                                HINT_JOB);
    }
    for (int j = 0; j < ck->ec.num_tables; j++) {
        int found = 0;
        for (int k = 0; k < cfg->num_tables && !found; k++)
            found = !strcmp(ck->ec.tables[j].name, cfg->tables[k].name);
        if (!found)
            return sr_error_set(SR_ERR_DATA, "%s %s: the checkpoint holds table '%s', "
                                "which this run does not have; %s", FLAG, ck->dir,
                                ck->ec.tables[j].name, HINT_JOB);
    }
    return SR_OK;
}

/* A setting as messages name it: "--table-rows" stands for every table's
 * rows, pooling and id policy. */
static const char *setting_shown(const char *name)
{
    if (!strcmp(name, "--table-rows"))
        return "--table-rows or --pooling (the tables' rows, pooling or id policy)";
    if (!strcmp(name, "features"))
        return "features (the config's \"features\")";
    return name;
}

/* Every setting that decides the model and its trajectory (eval: the
 * model's); a version 2 checkpoint compares the global batch instead of the
 * per-rank one. */
static int check_settings(const struct sr_trainer *t, const struct sr_ckpt *ck)
{
    char hex[32];
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(ck->manifest, "settings");
    const char *const *names = t->cfg->eval_only ? model_settings : trajectory;
    const int n = t->cfg->eval_only ? N_MODEL : N_TRAJECTORY;
    for (int k = 0; k < n; k++) {
        if (ck->version >= 2 && !strcmp(names[k], "--batch-size"))
            continue;
        snprintf(hex, sizeof hex, "%016" PRIx64, sr_trainer_setting_hash(t->cfg, names[k]));
        if (strcmp(str_of(set, names[k]), hex))
            return sr_error_set(SR_ERR_DATA, "%s %s: written by a run with another %s; %s", FLAG,
                                ck->dir, setting_shown(names[k]), HINT_JOB);
    }
    if (t->cfg->eval_only)
        return SR_OK;
    if (ck->version >= 2 && ck->global_batch != t->global_batch)
        return sr_error_set(SR_ERR_DATA,
                            "--resume %s: written with a global batch of %" PRId64 " samples a "
                            "step, this run has %" PRId64 " (%d ranks x %d); the same trajectory "
                            "needs the same global batch; HINT: --global-batch-size %" PRId64,
                            ck->dir, ck->global_batch, t->global_batch, t->world_size,
                            t->cfg->batch_size, ck->global_batch);
    return SR_OK;
}

/* The checkpoint belongs to this job; *old: the plan it was written under. */
static int check_job(const struct sr_trainer *t, const struct sr_ckpt *ck,
                     const struct sr_plan **old)
{
    char hex[32];
    int rc;
    *old = ck->plan;
    if (ck->version >= 2)
        return (rc = check_tables(t, ck)) ? rc : check_settings(t, ck);
    *old = t->plan; /* version 1: the same world size and plan only */
    if (ck->world_size != t->world_size)
        return sr_error_set(SR_ERR_DATA,
                            "%s %s: written by %d ranks, this run has %d; its manifest "
                            "(version 1) does not record its plan, so it cannot be resharded; "
                            "%s", FLAG, ck->dir, ck->world_size, t->world_size, HINT_JOB);
    if ((rc = check_settings(t, ck)))
        return rc;
    snprintf(hex, sizeof hex, "%016" PRIx64, sr_plan_hash(t->plan));
    if (strcmp(str_of(ck->manifest, "plan_hash"), hex))
        return sr_error_set(SR_ERR_DATA,
                            "%s %s: written under another plan (--sharding, --plan), and "
                            "its manifest (version 1) does not record it; %s", FLAG, ck->dir,
                            HINT_JOB);
    return SR_OK;
}

/* This rank's share of the checksums: the dense file, which it reads whole,
 * and the old rank files r, r + W, r + 2W, ... (W this run's world size). */
static int verify_files(const struct sr_trainer *t, const struct sr_ckpt *ck)
{
    char file[64];
    int rc = sr_ckpt_verify(ck, SR_CKPT_DENSE);
    for (int r = t->rank; !rc && r < ck->world_size; r += t->world_size) {
        sr_ckpt_rank_file(file, sizeof file, r);
        rc = sr_ckpt_verify(ck, file);
    }
    return rc;
}

/* Copy n floats of a verified file into device memory. */
static int load_tensor(struct sr_trainer *t, const struct sr_st_file *f, const char *name,
                       float *dst, int64_t rows, int64_t cols)
{
    const float *src;
    int ndim;
    int64_t shape[SR_ST_MAX_DIMS];
    int rc = sr_st_find(f, name, &src, &ndim, shape);
    if (rc)
        return rc;
    int64_t n = rows * cols;
    if (sr_st_numel(ndim, shape) != n)
        return sr_error_set(SR_ERR_DATA, "%s: tensor %s holds %" PRId64 " values, this run needs %"
                            PRId64 "; %s", sr_st_path(f), name, sr_st_numel(ndim, shape), n,
                            HINT_JOB);
    for (int64_t done = 0; done < n;) {
        size_t k = (size_t)(n - done);
        const float *from = src + done;
        if (t->ckpt.staging) {
            k = k < t->ckpt.staging_floats ? k : t->ckpt.staging_floats;
            memcpy(t->ckpt.staging, from, sizeof(float) * k);
            from = t->ckpt.staging;
        }
        sr_dev_copy(t->dev, dst + done, from, sizeof(float) * k, NULL);
        sr_dev_sync(t->dev, NULL);
        done += (int64_t)k;
    }
    return SR_OK;
}

static int load_dense(struct sr_trainer *t, const char *path)
{
    struct sr_st_file *f;
    size_t np, ns;
    float *params = sr_dlrm_params(t->dlrm, &np);
    float *state = sr_dense_optim_state(t->dense_optim, &ns);
    int rc = sr_st_open(&f, path);
    if (!rc)
        rc = load_tensor(t, f, "dense.params", params, (int64_t)np, 1);
    if (!rc && ns && !t->cfg->eval_only)
        rc = load_tensor(t, f, "dense.optim_state", state, (int64_t)ns, 1);
    sr_st_close(f);
    return rc;
}

static int agree(struct sr_trainer *t, int rc)
{
    return sr_trainer_agree(t, rc, FLAG, "could not read its part of the checkpoint");
}

/* Collective: find, check, verify, agree; then load, agree. */
static int resume(struct sr_trainer *t, int64_t *step)
{
    const struct sr_train_config *cfg = t->cfg;
    const struct sr_plan *old = NULL;
    char path[SR_CKPT_DIR_CAP + 64];
    struct sr_ckpt ck;
    /* PATH: a step folder, or the newest complete one under it */
    int rc = cfg->resume_path[0] ? sr_ckpt_open(&ck, cfg->resume_path, -1, FLAG, t->log)
                                 : sr_ckpt_open(&ck, cfg->checkpoint_dir, 1, FLAG, t->log);
    int opened = rc == SR_OK;
    if (!rc)
        rc = check_job(t, &ck, &old);
    if (!rc)
        *step = ck.step;
    if (!rc && !cfg->eval_only) /* --data: the same files; the reader at the first batch */
        rc = sr_checkpoint_data_resume(t, ck.dir, ck.manifest);
    if (!rc && !cfg->eval_only && *step >= cfg->steps)
        rc = sr_error_set(SR_ERR_INVALID_ARG,
                          "--resume %s: the checkpoint is at step %" PRId64 " and --steps is "
                          "%" PRId64 ": nothing left to train; HINT: --steps is the run's "
                          "total, raise it", ck.dir, *step, cfg->steps);
    if (!rc)
        rc = verify_files(t, &ck);
    rc = agree(t, rc);
    if (!rc)
        rc = sr_checkpoint_load_shards(t, &ck, old);
    snprintf(path, sizeof path, "%s/%s", opened ? ck.dir : "", SR_CKPT_DENSE);
    if (!rc)
        rc = load_dense(t, path);
    rc = agree(t, rc);
    if (!rc) /* hybrid tables: their replicas from the loaded shards */
        rc = sr_sharded_ebc_hot_rows_in(t->sebc);
    if (!rc && t->log)
        fprintf(t->log, "%s %s at step %" PRId64 "%s\n",
                cfg->eval_only ? "eval: the model of" : "resumed from", ck.dir, *step,
                ck.world_size != t->world_size || sr_plan_hash(old) != sr_plan_hash(t->plan)
                    ? " (resharded)" : "");
    if (opened)
        sr_ckpt_close(&ck);
    return rc;
}

int sr_checkpoint_init(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    int64_t step = 0, rc = SR_OK;
    t->ckpt.first_step = 1;
    if (cfg->checkpoint_dir[0] && mkdir(cfg->checkpoint_dir, 0777) && errno != EEXIST)
        return sr_error_set(SR_ERR_IO, "--checkpoint-dir %s: cannot create (%s)",
                            cfg->checkpoint_dir, strerror(errno));
    for (int k = 0; cfg->checkpoint_dir[0] && k < SR_CHECKPOINT_N_SETTINGS; k++)
        t->ckpt.settings_hash[k] = sr_trainer_setting_hash(cfg, sr_checkpoint_settings[k]);
    t->ckpt.overlap = cfg->checkpoint_write == SR_CHECKPOINT_WRITE_OVERLAP ||
                      (cfg->checkpoint_write == SR_CHECKPOINT_WRITE_AUTO && !t->dev->host_visible);
    if ((cfg->checkpoint_dir[0] || cfg->resume) && (t->ckpt.overlap || !t->dev->host_visible)) {
        t->ckpt.staging_floats = sr_ckpt_staging_floats(t);
        if (!cfg->checkpoint_dir[0]) /* reading only (--resume, eval): pieces will do */
            t->ckpt.staging_floats = sr_ckpt_read_staging_floats(t->ckpt.staging_floats);
        t->ckpt.staging = sr_dev_alloc_host(t->dev, sizeof(float) * t->ckpt.staging_floats);
        if (t->dev->host_visible) /* plain host memory: fault its pages in now, not in the
                                     first save's stall (measured: 1.0 s against 0.2 s for
                                     1.8 GB) */
            memset(t->ckpt.staging, 0, sizeof(float) * t->ckpt.staging_floats);
    }
    if (!cfg->resume)
        return SR_OK;
    rc = resume(t, &step);
    if (!rc)
        t->ckpt.first_step = step + 1;
    return (int)rc;
}

void sr_checkpoint_free(struct sr_trainer *t)
{
    sr_ckpt_job_free(t->ckpt.job); /* waits for its thread */
    t->ckpt.job = NULL;
    if (t->ckpt.staging)
        sr_dev_free_host(t->dev, t->ckpt.staging);
    t->ckpt.staging = NULL;
}
