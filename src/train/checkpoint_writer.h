/*
 * One checkpoint's files on one rank (checkpoint_writer.c): its tensors
 * staged in host memory between two steps, then written (the rank file, and
 * on rank 0 the dense file), each checksummed, either on the training
 * thread (--checkpoint-write sync) or by a thread of its own while training
 * goes on (overlap). checkpoint.c decides when, and completes a checkpoint
 * once every rank's job is done (the manifest, pruning, the report).
 */
#ifndef SHARDREC_TRAIN_CHECKPOINT_WRITER_H
#define SHARDREC_TRAIN_CHECKPOINT_WRITER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "shardrec/safetensors.h"
#include "train/checkpoint_format.h"

struct sr_trainer;

/* What each rank tells rank 0 once its files are written: status, its
 * file's checksum and size, the dense file's (rank 0), and (as the bits of
 * doubles) the seconds of the write, of the copy to host memory, and of the
 * training's stall, and the bytes copied. */
enum {
    SR_CKPT_R_RC,
    SR_CKPT_R_HASH,
    SR_CKPT_R_BYTES,
    SR_CKPT_R_DHASH,
    SR_CKPT_R_DBYTES,
    SR_CKPT_R_WRITE_S,
    SR_CKPT_R_COPY_S,
    SR_CKPT_R_STALL_S,
    SR_CKPT_R_COPY_BYTES,
    SR_CKPT_R_N
};

/* Seconds travel in mine[] as the bits of a double. */
static inline void sr_ckpt_put_seconds(uint64_t *slot, double s)
{
    memcpy(slot, &s, sizeof s);
}

static inline double sr_ckpt_seconds(uint64_t bits)
{
    double s;
    memcpy(&s, &bits, sizeof s);
    return s;
}

struct sr_ckpt_job {
    int64_t step;
    char dir[SR_PATH_MAX + 32];
    char rank_file[32];       /* rank-RRRRR.safetensors */
    int n;                    /* tensors of the rank file */
    struct sr_st_tensor *ts;  /* [n], their data staged (or the live tensors, sync on a host device) */
    char (*names)[SR_CKPT_NAME_CAP];
    struct sr_st_tensor dense[2];
    int n_dense;              /* rank 0: 1 or 2; else 0 */
    char *manifest_head;      /* rank 0: the manifest up to its file list (checkpoint.c) */
    uint64_t mine[SR_CKPT_R_N];
    char error[1024];         /* the writer's message when mine[SR_CKPT_R_RC] is set */
    int64_t *flags;           /* [world size]: every rank's `done`, gathered by a poll */
    double stall_s;           /* the training thread's time on this checkpoint so far */
    uint64_t thread_allocs;   /* the writer thread's allocations */
    pthread_t thread;
    int threaded;             /* a thread writes (joined by sr_ckpt_job_join) */
    atomic_int done;          /* the files are written (or failed) */
};

/* Between two steps, the streams drained: stage this rank's tensors for the
 * checkpoint of `step` in `dir` (copied into t->ckpt.staging when there is
 * one, the copy timed into mine[SR_CKPT_R_COPY_S]). */
struct sr_ckpt_job *sr_ckpt_job_stage(struct sr_trainer *t, int64_t step, const char *dir);
/* Write the job's files: on a thread of its own when `thread`, else here. */
void sr_ckpt_job_start(struct sr_ckpt_job *j, int thread);
/* Wait for the files (a no-op once joined or when written here). */
void sr_ckpt_job_join(struct sr_ckpt_job *j);
void sr_ckpt_job_free(struct sr_ckpt_job *j);

/* The floats of host staging a rank needs: its shards and their state, and
 * on rank 0 the dense block and its state, side by side (a writer thread
 * reads them all while training goes on). */
size_t sr_ckpt_staging_floats(struct sr_trainer *t);
/* The staging of a run that only reads a checkpoint (--resume without
 * --checkpoint-dir, eval): the copies to the device go in pieces, so at most
 * SR_CKPT_READ_STAGING_BYTES (train_config.h) of the `floats` a writer would
 * need (tests: the environment variable SR_CKPT_READ_STAGING_FLOATS sets
 * fewer). */
size_t sr_ckpt_read_staging_floats(size_t floats);

#endif
