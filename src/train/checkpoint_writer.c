/*
 * One checkpoint's files on one rank: staging and writing (the contract in
 * checkpoint_writer.h; the layout in checkpoint.c).
 *
 * Staging copies every tensor the rank writes into t->ckpt.staging, host
 * memory made at start-up (pinned on a GPU), and waits for the copies: from
 * then on training may change the live tensors. Without staging (sync on a
 * device the host can address) the files are written from the live tensors
 * before the next step. The writer thread touches nothing but the job: its
 * staged tensors, its paths and its results, so training and writing share
 * no state but the disk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/dense_optim.h"
#include "shardrec/dlrm.h"
#include "shardrec/error.h"
#include "train/checkpoint.h"
#include "train/checkpoint_format.h"
#include "train/checkpoint_writer.h"
#include "train/trainer_internal.h"

/* Floats of staging that `bytes` take (16-bit tables: half a float each). */
static size_t floats_of(size_t bytes)
{
    return (bytes + 3) / 4;
}

/* A tensor's data where the writer can read it: the tensor itself without
 * staging, else a copy at *at (in floats) in the staging buffer (synced later). */
static const float *staged(struct sr_trainer *t, const void *src, size_t bytes, size_t *at)
{
    if (!t->ckpt.staging || !bytes)
        return src;
    SR_ASSERT(*at + floats_of(bytes) <= t->ckpt.staging_floats);
    float *dst = t->ckpt.staging + *at;
    sr_dev_copy(t->dev, dst, src, bytes, NULL);
    *at += floats_of(bytes);
    return dst;
}

static void stage_shards(struct sr_trainer *t, struct sr_ckpt_job *j, size_t *at)
{
    int ns = sr_sharded_ebc_num_local_shards(t->sebc);
    j->ts = sr_calloc((size_t)2 * ns + 1, sizeof *j->ts);
    j->names = sr_calloc((size_t)2 * ns + 1, sizeof *j->names);
    for (int i = 0; i < ns; i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        const char *table = t->cfg->tables[sh.table].name;
        sr_ckpt_shard_name(j->names[j->n], table, sh.shard, "weight");
        j->ts[j->n] = (struct sr_st_tensor){.name = j->names[j->n], .ndim = 2,
                                            .shape = {sh.rows, sh.dim}, .dtype = sh.dtype};
        j->ts[j->n++].data = staged(t, sh.weight,
                                    (size_t)sh.rows * sh.dim * sr_st_dtype_bytes(sh.dtype), at);
        if (!sh.state_floats)
            continue;
        sr_ckpt_shard_name(j->names[j->n], table, sh.shard, "state");
        j->ts[j->n] = (struct sr_st_tensor){.name = j->names[j->n], .ndim = 1,
                                            .shape = {(int64_t)sh.state_floats}};
        j->ts[j->n++].data = staged(t, sh.state, sizeof(float) * sh.state_floats, at);
    }
}

static void stage_dense(struct sr_trainer *t, struct sr_ckpt_job *j, size_t *at)
{
    size_t np, ns;
    float *params = sr_dlrm_params(t->dlrm, &np);
    float *state = sr_dense_optim_state(t->dense_optim, &ns);
    j->dense[0] = (struct sr_st_tensor){.name = "dense.params", .ndim = 1, .shape = {(int64_t)np}};
    j->dense[1] = (struct sr_st_tensor){.name = "dense.optim_state", .ndim = 1,
                                        .shape = {(int64_t)ns}};
    j->dense[0].data = staged(t, params, sizeof(float) * np, at);
    j->dense[1].data = staged(t, state, sizeof(float) * ns, at);
    j->n_dense = ns ? 2 : 1;
}

struct sr_ckpt_job *sr_ckpt_job_stage(struct sr_trainer *t, int64_t step, const char *dir)
{
    struct sr_ckpt_job *j = sr_calloc(1, sizeof *j);
    j->flags = sr_calloc((size_t)t->world_size, sizeof *j->flags);
    double t0 = sr_now_s();
    size_t at = 0;
    j->step = step;
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    atomic_init(&j->done, 0);
    sr_ckpt_rank_file(j->rank_file, sizeof j->rank_file, t->rank);
    sr_sharded_ebc_hot_rows_out(t->sebc, NULL); /* hybrid tables: their hot rows into the shards */
    stage_shards(t, j, &at);
    if (t->rank == 0)
        stage_dense(t, j, &at);
    sr_dev_sync(t->dev, NULL);
    sr_ckpt_put_seconds(&j->mine[SR_CKPT_R_COPY_S], sr_now_s() - t0);
    j->mine[SR_CKPT_R_COPY_BYTES] = t->ckpt.staging ? sizeof(float) * (uint64_t)at : 0;
    return j;
}

static int write_one(const char *path, int n, const struct sr_st_tensor *ts, uint64_t *hash,
                     uint64_t *bytes)
{
    int rc = sr_st_write(path, n, ts);
    return rc ? rc : sr_checkpoint_file_checksum(path, hash, bytes);
}

/* The files, on whichever thread: its status, message and seconds into j. */
static void write_files(struct sr_ckpt_job *j)
{
    char path[SR_PATH_MAX + 64];
    uint64_t a0 = sr_alloc_count_this_thread(), *m = j->mine;
    double t0 = sr_now_s();
    int rc = SR_OK;
    if (mkdir(j->dir, 0777) && errno != EEXIST)
        rc = sr_error_set(SR_ERR_WRITE, "checkpoint %s: cannot create (%s)", j->dir,
                          strerror(errno));
    snprintf(path, sizeof path, "%s/%s", j->dir, j->rank_file);
    if (!rc)
        rc = write_one(path, j->n, j->ts, &m[SR_CKPT_R_HASH], &m[SR_CKPT_R_BYTES]);
    snprintf(path, sizeof path, "%s/%s", j->dir, SR_CKPT_DENSE);
    if (!rc && j->n_dense)
        rc = write_one(path, j->n_dense, j->dense, &m[SR_CKPT_R_DHASH], &m[SR_CKPT_R_DBYTES]);
    if (rc)
        snprintf(j->error, sizeof j->error, "%s", sr_error_message());
    m[SR_CKPT_R_RC] = (uint64_t)(int64_t)rc;
    sr_ckpt_put_seconds(&m[SR_CKPT_R_WRITE_S], sr_now_s() - t0);
    j->thread_allocs = sr_alloc_count_this_thread() - a0;
    atomic_store(&j->done, 1);
}

static void *writer_main(void *arg)
{
    write_files(arg);
    return NULL;
}

void sr_ckpt_job_start(struct sr_ckpt_job *j, int thread)
{
    if (thread && pthread_create(&j->thread, NULL, writer_main, j) == 0) {
        j->threaded = 1;
        return;
    }
    write_files(j); /* sync, or no thread to be had: write here */
    j->thread_allocs = 0; /* this thread's: the caller counts them */
}

void sr_ckpt_job_join(struct sr_ckpt_job *j)
{
    if (j->threaded)
        pthread_join(j->thread, NULL);
    j->threaded = 0;
}

void sr_ckpt_job_free(struct sr_ckpt_job *j)
{
    if (!j)
        return;
    sr_ckpt_job_join(j);
    free(j->manifest_head); /* open_memstream's */
    sr_free(j->names);
    sr_free(j->flags);
    sr_free(j->ts);
    sr_free(j);
}

size_t sr_ckpt_staging_floats(struct sr_trainer *t)
{
    size_t n = 0, np, ns;
    for (int i = 0; i < sr_sharded_ebc_num_local_shards(t->sebc); i++) {
        struct sr_sharded_ebc_shard sh;
        sr_sharded_ebc_local_shard(t->sebc, i, &sh);
        n += floats_of((size_t)sh.rows * sh.dim * sr_st_dtype_bytes(sh.dtype)) + sh.state_floats;
    }
    if (t->rank == 0) {
        sr_dlrm_params(t->dlrm, &np);
        sr_dense_optim_state(t->dense_optim, &ns);
        n += np + ns;
    }
    return n + 1;
}

size_t sr_ckpt_read_staging_floats(size_t floats)
{
    size_t cap = (size_t)SR_CKPT_READ_STAGING_BYTES / sizeof(float);
    const char *env = getenv("SR_CKPT_READ_STAGING_FLOATS"); /* tests: many pieces */
    if (env && atol(env) > 0)
        cap = (size_t)atol(env);
    return floats < cap ? floats : cap;
}
