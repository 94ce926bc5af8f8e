/*
 * Checkpoints (checkpoint.c): every rank's shards with their optimizer
 * state, the dense block with its optimizer state, and a manifest written
 * last, under --checkpoint-dir DIR/step-NNNNNNNN/; --resume reads one back,
 * at the same world size and plan bit for bit, under another world size or
 * plan by moving every row and its state to its new owner
 * (checkpoint_reshard.c).
 */
#ifndef SHARDREC_TRAIN_CHECKPOINT_H
#define SHARDREC_TRAIN_CHECKPOINT_H

#include <stdint.h>
#include <stdio.h>

#include "shardrec/reader.h"

struct sr_trainer;
struct sr_train_config;
struct sr_ckpt;
struct sr_plan;
struct cJSON;

#define SR_CKPT_POS_RING 8 /* > the steps the loader may run ahead (SR_LOADER_SLOTS) */

#define SR_CHECKPOINT_N_SETTINGS 20

/* What a checkpointing run keeps between saves (in struct sr_trainer). */
struct sr_trainer_ckpt {
    int64_t first_step; /* the loop's first step: 1, or the resumed step + 1 */
    uint64_t allocs;    /* allocations made by saves (not the loop's) */
    int overlap;        /* --checkpoint-write resolved: a thread writes while training goes on */
    float *staging;     /* host copies of what a save writes (overlap, or a device the host
                           cannot address: pinned), or NULL */
    size_t staging_floats;
    struct sr_ckpt_job *job; /* the save being written (overlap), or NULL */
    /* what the saves cost, over the run: the training's stall, the copies to
     * staging, and the bytes of the files */
    int saves;
    double stall_s, copy_s;
    uint64_t bytes;
    uint64_t settings_hash[SR_CHECKPOINT_N_SETTINGS]; /* sr_checkpoint_settings', made at init */
    /* --data: the reader's position just after step s's batch, at [s % SR_CKPT_POS_RING]
     * (written by the loader, read by a save of step s: checkpoint_data.c) */
    struct sr_reader_position pos[SR_CKPT_POS_RING];
    double last_save_s; /* rank 0: when training began or the last save ended (Nm) */
};

/* The settings that decide the model and its trajectory (flag names, as
 * sr_trainer_setting_hash takes them): a checkpoint continues only a run
 * that agrees on every one. */
extern const char *const sr_checkpoint_settings[SR_CHECKPOINT_N_SETTINGS];

/* The flags' own rules (exit status 2): --resume needs a path or
 * --checkpoint-dir; --resume with --init-weights is refused. */
int sr_checkpoint_check_config(const struct sr_train_config *cfg);
/* After the trainer is built: make --checkpoint-dir, and with --resume
 * read the checkpoint into the model (collective over the world). */
int sr_checkpoint_init(struct sr_trainer *t);
/* Whether to save after `step` (`last`: the run's last step): every
 * --checkpoint-every N steps, or with Nm rank 0's decision that N minutes
 * passed since training began or the last save, broadcast over the world
 * (one 8-byte collective a step, so every rank agrees); always at the last
 * step; never without --checkpoint-dir. Collective with Nm. */
int sr_checkpoint_due(struct sr_trainer *t, int64_t step, int last);
/* Collective: begin the checkpoint of `step` (all steps up to it done):
 * complete the one still being written first, stage this one and write it,
 * on a thread when overlapping. With `wait` (the run's last) or sync, it is
 * complete on return. A file that cannot be written is SR_ERR_WRITE naming
 * it (on its rank; the others name the rank), the previous checkpoint
 * untouched; with overlap that comes from the save or poll that completes it. */
int sr_checkpoint_save(struct sr_trainer *t, int64_t step, int wait);
/* Collective, after each step that saves nothing: while a save is being
 * written, whether every rank's files are done (an 8-byte all-gather); if
 * so, complete it (manifest, pruning, report). No collective otherwise. */
int sr_checkpoint_poll(struct sr_trainer *t, int64_t step);

/* checkpoint_data.c: the data position of --data runs. On the loader, after
 * step's batch was read: note the reader's position. */
void sr_checkpoint_note_position(struct sr_trainer *t, int64_t step);
/* The manifest's "data" member (rank 0). */
void sr_checkpoint_data_write(struct sr_trainer *t, FILE *f, int64_t step);
/* On resume, before the loader starts: the checkpoint's data kind and data
 * settings match this run's, every --data and --eval-data file is the one
 * it recorded (size and head checksum; SR_ERR_DATA naming the file), then
 * the reader is put at the first batch not yet trained. */
int sr_checkpoint_data_resume(struct sr_trainer *t, const char *dir, const struct cJSON *m);
/* Frees the staging; a save still being written is waited for and left
 * incomplete (no manifest: --resume skips it). */
void sr_checkpoint_free(struct sr_trainer *t);
/* Fill every shard this rank holds under the run's plan, weights and
 * optimizer state, from checkpoint ck written under plan `old` (its rank
 * files verified). Not collective. SR_ERR_DATA naming file and tensor. */
int sr_checkpoint_load_shards(struct sr_trainer *t, const struct sr_ckpt *ck,
                              const struct sr_plan *old);

#endif
