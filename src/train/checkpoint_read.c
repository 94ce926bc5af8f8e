/*
 * Checkpoints, the reading half (layout in checkpoint.c): find the
 * checkpoint (a PATH, or the latest complete step-NNNNNNNN/ under
 * --checkpoint-dir: one whose manifest.json parses), check that it belongs to
 * this job (world size, plan, settings: the first difference is named),
 * check the data and place the reader (checkpoint_data.c), verify the
 * FNV-1a 64 checksum of every file this rank reads, then copy the
 * rank's shards with their optimizer state and the dense block with its
 * state into the model. Collective: a rank that fails makes every rank fail.
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
#include "train/trainer_internal.h"

#define NAME_CAP (SR_NAME_MAX + 32)
#define HINT_JOB "HINT: resume with the flags of the run that wrote it, or start a new run"

#define trajectory   sr_checkpoint_settings
#define N_TRAJECTORY SR_CHECKPOINT_N_SETTINGS

/* manifest.json of `dir`, parsed, or NULL (no file, not JSON, another format). */
static cJSON *read_manifest(const char *dir)
{
    char path[SR_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = sr_malloc((size_t)1 << 20);
    size_t n = fread(buf, 1, ((size_t)1 << 20) - 1, f);
    fclose(f);
    cJSON *j = cJSON_ParseWithLength(buf, n);
    sr_free(buf);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "shardrec-checkpoint") ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "step"))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* The checkpoint to read into dir: the PATH, or the latest complete one. */
static int find(const struct sr_trainer *t, char *dir, size_t cap, cJSON **out)
{
    const struct sr_train_config *cfg = t->cfg;
    if (cfg->resume_path[0]) {
        snprintf(dir, cap, "%s", cfg->resume_path);
        if (!(*out = read_manifest(dir)))
            return sr_error_set(SR_ERR_DATA,
                                "--resume %s: no complete checkpoint there (no valid "
                                "manifest.json); HINT: give a DIR/step-NNNNNNNN folder",
                                dir);
        return SR_OK;
    }
    int64_t best = -1;
    DIR *d = opendir(cfg->checkpoint_dir);
    struct dirent *e;
    char path[2 * SR_PATH_MAX + 512];
    *out = NULL;
    while (d && (e = readdir(d))) {
        const char *nm = e->d_name;
        char *end;
        if (strncmp(nm, "step-", 5) || strlen(nm) != 13)
            continue;
        int64_t s = strtoll(nm + 5, &end, 10);
        if (*end || s <= best)
            continue;
        snprintf(path, sizeof path, "%s/%s", cfg->checkpoint_dir, nm);
        cJSON *j = read_manifest(path);
        if (!j) {
            if (t->log)
                fprintf(t->log, "warning: --resume: %s is incomplete (no valid manifest.json); "
                                "skipped\n", path);
            continue;
        }
        cJSON_Delete(*out);
        *out = j, best = s;
        if (snprintf(dir, cap, "%s", path) >= (int)cap)
            dir[0] = 0;
    }
    if (d)
        closedir(d);
    if (!*out)
        return sr_error_set(SR_ERR_DATA,
                            "--resume: no complete checkpoint in --checkpoint-dir %s; HINT: "
                            "run without --resume to start from step 1",
                            cfg->checkpoint_dir);
    return SR_OK;
}

static const char *str_of(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The checkpoint belongs to this job: world size, plan, settings. */
static int check_job(const struct sr_trainer *t, const char *dir, const cJSON *m)
{
    char hex[32];
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(m, "world_size");
    if (!cJSON_IsNumber(w) || w->valueint != t->world_size)
        return sr_error_set(SR_ERR_DATA,
                            "--resume %s: written by %d ranks, this run has %d; resharding to "
                            "another world size is not built yet; %s",
                            dir, cJSON_IsNumber(w) ? w->valueint : -1, t->world_size, HINT_JOB);
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(m, "settings");
    for (int k = 0; k < N_TRAJECTORY; k++) {
        snprintf(hex, sizeof hex, "%016" PRIx64, sr_trainer_setting_hash(t->cfg, trajectory[k]));
        if (strcmp(str_of(set, trajectory[k]), hex))
            return sr_error_set(SR_ERR_DATA,
                                "--resume %s: written by a run with another %s; %s", dir,
                                trajectory[k], HINT_JOB);
    }
    snprintf(hex, sizeof hex, "%016" PRIx64, t->plan ? sr_plan_hash(t->plan) : 0);
    if (strcmp(str_of(m, "plan_hash"), hex))
        return sr_error_set(SR_ERR_DATA,
                            "--resume %s: written under another plan (--sharding, --plan); %s",
                            dir, HINT_JOB);
    return SR_OK;
}

/* The file `name` of the manifest matches its size and checksum. */
static int verify(const char *dir, const cJSON *m, const char *name)
{
    char path[SR_PATH_MAX + 64], hex[32];
    const cJSON *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(m, "files"))
    {
        if (strcmp(str_of(f, "name"), name))
            continue;
        uint64_t h, bytes;
        int rc = sr_checkpoint_file_checksum(path, &h, &bytes);
        if (rc)
            return rc;
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(f, "bytes");
        if (!cJSON_IsNumber(b) || (uint64_t)b->valuedouble != bytes || strcmp(str_of(f, "fnv1a64"), hex))
            return sr_error_set(SR_ERR_DATA,
                                "checkpoint file %s is damaged: %" PRIu64 " bytes with checksum "
                                "%s, the manifest says %.0f bytes with %s; HINT: resume from an "
                                "earlier checkpoint (give its PATH)",
                                path, bytes, hex, cJSON_IsNumber(b) ? b->valuedouble : -1.0,
                                str_of(f, "fnv1a64"));
        return SR_OK;
    }
    return sr_error_set(SR_ERR_DATA, "checkpoint %s: the manifest lists no file %s", dir, name);
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
        if (t->ckpt.pinned) {
            k = k < t->ckpt.pinned_floats ? k : t->ckpt.pinned_floats;
            memcpy(t->ckpt.pinned, from, sizeof(float) * k);
            from = t->ckpt.pinned;
        }
        sr_dev_copy(t->dev, dst + done, from, sizeof(float) * k, NULL);
        sr_dev_sync(t->dev, NULL);
        done += (int64_t)k;
    }
    return SR_OK;
}

static int load_rank(struct sr_trainer *t, const char *path)
{
    struct sr_st_file *f;
    char name[NAME_CAP];
    int rc = sr_st_open(&f, path);
    for (int i = 0; !rc && i < sr_sharded_ebc_num_local_shards(t->sebc); i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        const char *tn = t->cfg->tables[sh.table].name;
        if (sh.shard < 0)
            snprintf(name, sizeof name, "emb.%s.dp.weight", tn);
        else
            snprintf(name, sizeof name, "emb.%s.shard%d.weight", tn, sh.shard);
        rc = load_tensor(t, f, name, sh.weight, sh.rows, sh.dim);
        if (rc || !sh.state_floats)
            continue;
        strcpy(name + strlen(name) - strlen("weight"), "state");
        rc = load_tensor(t, f, name, sh.state, (int64_t)sh.state_floats, 1);
    }
    sr_st_close(f);
    return rc;
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
    if (!rc && ns)
        rc = load_tensor(t, f, "dense.optim_state", state, (int64_t)ns, 1);
    sr_st_close(f);
    return rc;
}

static int resume(struct sr_trainer *t, int64_t *step)
{
    char dir[2 * SR_PATH_MAX + 512], file[64], path[3 * SR_PATH_MAX];
    cJSON *m = NULL;
    int rc = find(t, dir, sizeof dir, &m);
    if (!rc)
        rc = check_job(t, dir, m);
    if (!rc) /* --data: the same files; the reader at the first batch not trained */
        rc = sr_checkpoint_data_resume(t, dir, m);
    snprintf(file, sizeof file, "rank-%05d.safetensors", t->rank);
    if (!rc && !(rc = verify(dir, m, file)) && !(rc = verify(dir, m, "dense.safetensors"))) {
        snprintf(path, sizeof path, "%s/%s", dir, file);
        rc = load_rank(t, path);
        snprintf(path, sizeof path, "%s/dense.safetensors", dir);
        if (!rc)
            rc = load_dense(t, path);
    }
    if (!rc) {
        *step = (int64_t)cJSON_GetObjectItemCaseSensitive(m, "step")->valuedouble;
        if (*step >= t->cfg->steps)
            rc = sr_error_set(SR_ERR_INVALID_ARG,
                              "--resume %s: the checkpoint is at step %" PRId64 " and --steps is "
                              "%" PRId64 ": nothing left to train; HINT: --steps is the run's "
                              "total, raise it", dir, *step, t->cfg->steps);
    }
    if (!rc && t->log)
        fprintf(t->log, "resumed from %s at step %" PRId64 "\n", dir, *step);
    cJSON_Delete(m);
    return rc;
}

static size_t staging_floats(struct sr_trainer *t)
{
    size_t n = 0, np, ns;
    for (int i = 0; i < sr_sharded_ebc_num_local_shards(t->sebc); i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        n += (size_t)sh.rows * sh.dim + sh.state_floats;
    }
    sr_dlrm_params(t->dlrm, &np);
    sr_dense_optim_state(t->dense_optim, &ns);
    return (n > np + ns ? n : np + ns) + 1;
}

int sr_checkpoint_init(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    int64_t step = 0, rc = SR_OK, worst = 0;
    t->ckpt.first_step = 1;
    if (cfg->checkpoint_dir[0] && mkdir(cfg->checkpoint_dir, 0777) && errno != EEXIST)
        return sr_error_set(SR_ERR_IO, "--checkpoint-dir %s: cannot create (%s)",
                            cfg->checkpoint_dir, strerror(errno));
    if ((cfg->checkpoint_dir[0] || cfg->resume) && !t->dev->host_visible) {
        t->ckpt.pinned_floats = staging_floats(t);
        t->ckpt.pinned = sr_dev_alloc_host(t->dev, sizeof(float) * t->ckpt.pinned_floats);
    }
    if (!cfg->resume)
        return SR_OK;
    rc = resume(t, &step);
    int64_t mine = rc ? 1 : 0, *all = sr_calloc((size_t)t->world_size, sizeof *all);
    sr_comm_all_gather(t->world, &mine, all, 1, SR_DTYPE_I64, NULL, NULL);
    for (int r = t->world_size - 1; r >= 0; r--)
        worst = all[r] ? r + 1 : worst;
    sr_free(all);
    if (!rc && worst)
        rc = sr_error_set(SR_ERR_DATA, "--resume: rank %" PRId64 " could not read its part of "
                          "the checkpoint (its message says why)", worst - 1);
    if (!rc)
        t->ckpt.first_step = step + 1;
    return (int)rc;
}

void sr_checkpoint_free(struct sr_trainer *t)
{
    if (t->ckpt.pinned)
        sr_dev_free_host(t->dev, t->ckpt.pinned);
    t->ckpt.pinned = NULL;
}
