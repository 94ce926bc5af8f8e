/*
 * The checkpoint format, shared by the writer (checkpoint.c), --resume
 * (checkpoint_read.c, checkpoint_reshard.c) and `shardrec inspect` /
 * `shardrec export` (checkpoint_inspect.c): file and tensor names, the
 * manifest and what it records, each file's checksum, and the copy of a
 * block of rows and columns out of a shard tensor. Layout in checkpoint.c.
 */
#ifndef SHARDREC_TRAIN_CHECKPOINT_FORMAT_H
#define SHARDREC_TRAIN_CHECKPOINT_FORMAT_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "shardrec/optim.h"
#include "shardrec/plan.h"
#include "shardrec/table_config.h"
#include "shardrec/train_config.h"

#define SR_CKPT_FORMAT   "shardrec-checkpoint"
#define SR_CKPT_MANIFEST "manifest.json"
#define SR_CKPT_DENSE    "dense.safetensors"
#define SR_CKPT_NAME_CAP (SR_NAME_MAX + 32)
#define SR_CKPT_DIR_CAP  (2 * SR_PATH_MAX + 512)
/* Version 2 adds what a checkpoint needs to be read without the run's flags:
 * the tables, the plan itself, the optimizers, the global batch and the
 * dense tensors. Version 1 manifests resume at the same world size and plan. */
#define SR_CKPT_VERSION 2

/* One checkpoint, its manifest read. */
struct sr_ckpt {
    char dir[SR_CKPT_DIR_CAP]; /* the step-NNNNNNNN folder */
    cJSON *manifest;
    int version;
    int64_t step;
    int world_size;
    int64_t global_batch;   /* samples per step, all ranks */
    struct sr_ebc_config ec; /* the tables it holds (version 2; one feature per table) */
    int pooling_recorded;    /* the manifest records every table's pooling (else all sum) */
    struct sr_plan *plan;    /* the plan it was written under (version 2), else NULL */
    int have_optim;          /* version 2: the kinds below are known */
    enum sr_optim_kind dense_optim, emb_optim;
};

/* Tensor names: "emb.TABLE.shardJ.WHAT", or "emb.TABLE.dp.WHAT" (shard < 0),
 * WHAT "weight" or "state"; "rank-RRRRR.safetensors". */
void sr_ckpt_shard_name(char *buf, const char *table, int shard, const char *what);
void sr_ckpt_rank_file(char *buf, size_t cap, int rank);

/* FNV-1a 64 of a whole file and its size (the manifest's checksum); a file
 * that cannot be opened or read is SR_ERR_DATA naming it. */
int sr_checkpoint_file_checksum(const char *path, uint64_t *hash, uint64_t *bytes);

/* A manifest's parsed JSON, or NULL (no file, not JSON, another format). */
cJSON *sr_ckpt_read_manifest(const char *dir);

/* Open the checkpoint at `path`: a step-NNNNNNNN folder, or (`latest` = 1,
 * or when path holds no manifest.json and `latest` < 0) the latest complete
 * one in the folder `path` (incomplete ones are skipped, with a warning on
 * `log` when not NULL). `what` names the flag in messages ("--resume /x:
 * cannot open ..."); NULL leaves it out, for a command whose own name
 * already opens the message ("shardrec inspect: /x: cannot open ...").
 * SR_ERR_DATA naming the folder when there is none; a version 2 manifest
 * that does not hold its tables, plan, optimizers, global batch is
 * SR_ERR_DATA naming manifest.json and the field. */
int sr_ckpt_open(struct sr_ckpt *ck, const char *path, int latest, const char *what, FILE *log);
void sr_ckpt_close(struct sr_ckpt *ck);

/* The manifest's entry for file `name` matches the file's size and FNV-1a 64
 * checksum: SR_ERR_DATA naming the file otherwise (missing, damaged). */
int sr_ckpt_verify(const struct sr_ckpt *ck, const char *name);

/* The plan's shard of table t as a block: rows and columns; a dp table's
 * shards are the whole table. */
int64_t sr_ckpt_table_rows(const struct sr_plan *p, int t);
int sr_ckpt_table_dim(const struct sr_plan *p, int t);

/* The optimizer state of a shard of rows x cols: planes of `per` values
 * each, per = rows (row-wise) or rows * cols (per element); 0 planes: none. */
void sr_ckpt_state_layout(enum sr_optim_kind kind, int64_t rows, int cols, int *planes,
                          int64_t *per);

/* Copy rows [r0, r1) and columns [c0, c1) (global coordinates) of a tensor
 * laid out as shard `from` (row-major, from->rows x from->cols) into one laid
 * out as shard `to`. */
void sr_ckpt_copy_block(const float *src, const struct sr_shard *from, float *dst,
                        const struct sr_shard *to, int64_t r0, int64_t r1, int c0, int c1);

#endif
