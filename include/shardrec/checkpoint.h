/*
 * Reading a checkpoint folder without training (`shardrec inspect`,
 * `shardrec export`). A checkpoint is what `train --checkpoint-dir DIR`
 * writes: DIR/step-NNNNNNNN/ with manifest.json, dense.safetensors and one
 * rank-RRRRR.safetensors per rank (docs/user-guide.md, "Checkpoints").
 *
 * PATH is a step-NNNNNNNN folder, or a checkpoint folder: then its latest
 * complete step folder (one with a valid manifest.json) is read.
 *
 * Both functions are single-process and synchronous; they read files only.
 */
#ifndef SHARDREC_CHECKPOINT_H
#define SHARDREC_CHECKPOINT_H

#include <stdio.h>

/* Verify the checkpoint at `path` and print what it holds on `out` (may be
 * NULL): the manifest parses; it lists dense.safetensors and one file per
 * rank, each once; every file has the size and FNV-1a 64 checksum the
 * manifest records; every tensor has the shape the recorded plan, tables and
 * optimizers give it; every shard of every table is present once, in its
 * rank's file, and nothing else is. Printed: the step, world size, global
 * batch, optimizers, each table's size and plan, the settings recorded, each
 * file's bytes. Returns SR_OK when sound, else SR_ERR_DATA naming the file
 * and what is wrong (a version 1 checkpoint, which does not record its plan,
 * is checked for its files only). */
int sr_checkpoint_inspect(const char *path, FILE *out);

/* Verify the checkpoint at `path` as sr_checkpoint_inspect does, then write
 * its model as one weights file at `out_path`, in the format of `train
 * --save-weights` (shardrec/weights_io.h: bot_mlp.K.*, top_mlp.K.*, dcn.L.*,
 * emb.TABLE.weight [rows, D]), atomically. Each table is assembled whole in
 * host memory from its shards. Errors: SR_ERR_DATA as above (a version 1
 * checkpoint cannot be exported: it does not record its dense tensors),
 * SR_ERR_INVALID_ARG when out_path is one of the checkpoint's files,
 * SR_ERR_WRITE when it cannot be written (a full disk). */
int sr_checkpoint_export(const char *path, const char *out_path);

/* `shardrec eval` of the checkpoint at `path` (a step folder, or the newest
 * complete one under it), before the model is built: adopt = 1 gives each of
 * tables[0..T) the pooling the manifest records for the table of its name
 * (the job gave none); adopt = 0 refuses a difference (SR_ERR_DATA naming the
 * table, both poolings and the flag). *recorded: the tables the manifest
 * gave a pooling (0 for a checkpoint written before manifests recorded it).
 * A checkpoint that cannot be opened is left to the reading that follows. */
struct sr_table_config;
int sr_checkpoint_pooling_apply(const char *path, struct sr_table_config *tables, int T, int adopt,
                                int *recorded);

#endif
