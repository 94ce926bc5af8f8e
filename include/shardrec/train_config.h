/*
 * The description of a training job: model shape, tables and features,
 * synthetic-data settings, optimizers and schedule, logging. It is filled
 * from defaults (the embedded default job), then an optional workload preset
 * (--workload K|M|D), then an optional JSON config file, then command-line
 * flags (flags win), and checked once before anything is allocated. Every
 * field here is plain data so the job can be hashed and compared across ranks.
 */
#ifndef SHARDREC_TRAIN_CONFIG_H
#define SHARDREC_TRAIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/dlrm.h"
#include "shardrec/ebc.h"
#include "shardrec/optim.h"
#include "shardrec/synthetic.h"
#include "shardrec/tensor.h"

#define SR_MAX_TABLES       256
#define SR_MAX_FEATURES     256
#define SR_PATH_MAX         1024
#define SR_DCN_RANK_DEFAULT 512
#define SR_MAX_DATA_FILES   64
#define SR_MAX_TOPOLOGIES   4
#define SR_CONFIG_MAX_BYTES ((size_t)64 << 20) /* a --config file, read whole */

/* --pipeline: the training loop's schedule. none: each step loads, copies,
 * exchanges and trains its batch in turn. sparse-dist: batch i+1's copy and
 * input dist, and batch i+2's load (a loader thread), run while batch i
 * trains; the results are the same bits. auto (the default): sparse-dist,
 * except where NCCL ranks take turns on one GPU (several processes on one
 * device: the GPU time-slices them, and a collective waiting for its peer
 * holds the GPU for its slice, so overlapped exchanges cost more than they
 * hide); the trainer resolves it once its world is known. */
enum sr_pipeline {
    SR_PIPELINE_NONE = 0,
    SR_PIPELINE_SPARSE_DIST = 1,
    SR_PIPELINE_AUTO = 2,
};

/* --device: where the model lives and computes. */
enum sr_device_choice {
    SR_DEVICE_CHOICE_AUTO = 0, /* a CUDA GPU when one is visible, else the CPU */
    SR_DEVICE_CHOICE_CPU = 1,
    SR_DEVICE_CHOICE_CUDA = 2,
};

/* --checkpoint-write: how a checkpoint's files are written. */
enum sr_checkpoint_write {
    SR_CHECKPOINT_WRITE_AUTO =
        0, /* overlap where the device's memory is not the host's, else sync */
    SR_CHECKPOINT_WRITE_OVERLAP =
        1, /* copied to host staging, written by a thread as training goes on */
    SR_CHECKPOINT_WRITE_SYNC = 2, /* written between two steps; training waits */
};

/* --comm: the transport of a multi-rank job (comm.h). */
enum sr_comm_choice {
    SR_COMM_CHOICE_AUTO = 0, /* NCCL when the model is on CUDA and NCCL can run (this build
                                has it, no two ranks of a node drive one GPU, no emulated
                                link); else MPI */
    SR_COMM_CHOICE_MPI = 1,
    SR_COMM_CHOICE_NCCL = 2,
};

#define SR_WORKLOAD_NAME_MAX 8

struct sr_train_config {
    char workload[SR_WORKLOAD_NAME_MAX]; /* the preset applied first ("K", "M", "D"), or "" */
    /* model */
    int embedding_dim;               /* D */
    int bot_mlp[SR_MLP_MAX], n_bot;  /* widths incl. input (13-...-D) */
    int top_mlp[SR_MLP_MAX], n_top;  /* layers after the interaction */
    enum sr_interaction interaction; /* --interaction dot|dcn */
    int dcn_layers;                  /* --dcn-layers L (dcn) */
    int dcn_rank;   /* --dcn-rank R (dcn); 0: the default, 512 or n = (F+1)·D when smaller */
    int num_tables; /* T */
    struct sr_table_config tables[SR_MAX_TABLES];     /* (T) */
    int pooling_given; /* --pooling, a --workload or a config table's "pooling" set the
                          tables' pooling (else each is the default, sum): `eval` of a
                          weights file takes the file's pooling only when this is 0 */
    int num_features;                                 /* F */
    char feature_names[SR_MAX_FEATURES][SR_NAME_MAX]; /* (F) */
    int feature_table[SR_MAX_FEATURES];               /* (F) */
    /* synthetic data */
    uint64_t seed;
    int num_dense;        /* 13 */
    int ids_min, ids_max; /* ids per feature per sample: --ids-per-feature N|MIN-MAX */
    int n_feature_ids;    /* 0: ids_min..ids_max for every feature; else F entries below */
    int feature_ids_min[SR_MAX_FEATURES]; /* (n_feature_ids) --ids-per-feature A,B,...: */
    int feature_ids_max[SR_MAX_FEATURES]; /* feature f's own range; 0 past the entries */
    enum sr_id_dist id_dist;
    double zipf_s;
    /* files (empty: the synthetic generator) */
    int64_t data_ids_max[SR_MAX_FEATURES]; /* the most ids feature f holds in one sample of
                                              the files, as their readers bound it (the
                                              trainer sets it at start-up); 0: not known,
                                              the memory estimate takes --ids-per-feature */
    int n_data, n_eval_data;
    char data_paths[SR_MAX_DATA_FILES][SR_PATH_MAX];      /* --data, read in order */
    char eval_data_paths[SR_MAX_DATA_FILES][SR_PATH_MAX]; /* --eval-data */
    int skip_bad_lines;                                   /* count bad lines instead of failing */
    int shuffle;       /* --shuffle: seeded block order of --data (binary files), per epoch */
    int shuffle_block; /* --shuffle-block N: samples per block; 0 = 4096 */
    /* training */
    int64_t steps;
    int steps_set;                    /* --steps given (else one epoch of --data) */
    int batch_size;                   /* B, per rank */
    float lr;                         /* dense learning rate */
    float emb_lr;                     /* embedding learning rate */
    char lr_schedule[128];            /* "constant" or "warmup_poly:..." */
    enum sr_optim_kind optimizer;     /* dense */
    enum sr_optim_kind emb_optimizer; /* embeddings */
    enum sr_dtype emb_dtype;          /* --emb-dtype: tables stored in fp32, fp16 or bf16 */
    int emb_rounding;                 /* --emb-rounding: 1 stochastic (default), 0 nearest;
                                         0 for fp32 tables, where nothing is rounded */
    enum sr_pipeline pipeline;        /* --pipeline: the step's schedule (trainer.h) */
    enum sr_device_choice device;     /* --device auto|cpu|cuda */
    int math;                         /* --math: enum sr_math (device.h), dense GEMMs */
    int cuda_graphs;                  /* replay the step as a CUDA graph (one rank, the
                                         EBC in local mode, --pipeline sparse-dist): 0 where it
                                         applies (default), 1 --cuda-graphs (required),
                                         -1 --no-cuda-graphs */
    int batch_pool;                   /* --batch-pool N: cycle N batches made before step 1
                                         (benchmarks; synthetic data only); 0: off */
    int loader_threads;               /* --loader-threads N: the loader thread's OpenMP
                                         threads (--pipeline sparse-dist); 0: automatic */
    /* distribution */
    int ranks_per_node;             /* 0: detect (or SR_RANKS_PER_NODE) */
    enum sr_comm_choice comm;       /* --comm auto|mpi|nccl */
    int64_t global_batch_size;      /* 0: W * batch_size */
    char plan_path[SR_PATH_MAX];    /* --plan FILE, or "" */
    int sharding;                   /* --sharding type for all, or -1 */
    int bucket_kib;                 /* dense all-reduce bucket size */
    enum sr_dtype comm_dtype;       /* pooled embeddings + grads on the wire */
    enum sr_dtype dense_comm_dtype; /* dense gradient buckets on the wire */
    int comm_timeout;               /* seconds a collective may wait (comm.h); 0: forever */
    double link_gb_per_s;           /* --emulate-link bandwidth (tests only); 0: none */
    double link_latency_us;         /* --emulate-link latency */
    /* evaluation and logging */
    int64_t eval_every;                  /* steps; 0 = only at the end */
    int64_t eval_samples;                /* held-back samples evaluated */
    int64_t log_every;                   /* steps between log lines / metrics */
    char metrics_path[SR_PATH_MAX];      /* "" = none */
    char trace_path[SR_PATH_MAX];        /* --trace FILE: Chrome trace events; "" = none */
    int64_t trace_first, trace_last;     /* --trace-steps A:B; 0, 0: a few steps after warm-up */
    char init_weights_path[SR_PATH_MAX]; /* --init-weights FILE: safetensors; "" = none */
    char save_weights_path[SR_PATH_MAX]; /* --save-weights FILE: written at the end; "" = none */
    int progress;                        /* -1 auto (terminal), 0 off, 1 on */
    /* checkpoints (src/train/checkpoint.c; docs/user-guide.md "Checkpoints") */
    char checkpoint_dir[SR_PATH_MAX]; /* --checkpoint-dir DIR: step-NNNNNNNN/ under it; "" = none */
    int64_t checkpoint_every;         /* --checkpoint-every N steps; 0 = only at the end */
    double checkpoint_minutes;        /* --checkpoint-every Nm: wall minutes; 0 = steps */
    int checkpoint_keep;              /* --checkpoint-keep K complete checkpoints (2) */
    int checkpoint_write;             /* --checkpoint-write: enum sr_checkpoint_write */
    int resume;                       /* --resume [PATH] given */
    char resume_path[SR_PATH_MAX];    /* its PATH; "" = the latest complete in checkpoint_dir */
    /* `shardrec eval` (cli/cmd_eval.c): no training; the model comes from
     * --resume PATH (its weights only; the model settings must agree) or
     * --init-weights, and --eval-data (or --eval-samples synthetic samples)
     * is evaluated once. */
    int eval_only;
    /* the planner (src/train/trainer_planner.c; docs/planner.md) */
    char topologies[SR_MAX_TOPOLOGIES][SR_PATH_MAX]; /* --topology NAME|FILE, merged in order */
    int n_topologies;
    int64_t plan_sample; /* --plan-sample N: samples of --data its table statistics read */
};

/* The embedded default job: workload K's model (dim 16, 13-512-256-64-16 /
 * 512-256-1, 26 one-hot features) with tables capped at 100k rows and Zipf ids,
 * sized to learn visibly in about a minute on 2 cores. */
void sr_train_config_default(struct sr_train_config *cfg);

/* Merge a JSON config file into cfg (keys as in docs/user-guide.md). Strict:
 * an unknown key (the hint names the nearest known one when one is near, else
 * lists the known keys), a key given twice, a value of the wrong type, a
 * fractional or out-of-range integer, trailing text or a NUL byte (raw or
 * \u0000) is SR_ERR_INVALID_ARG naming the file and the key (tables as
 * "tables[i]"); a file that cannot be read, is not a regular file or holds
 * more than SR_CONFIG_MAX_BYTES is SR_ERR_IO (files.h). */
int sr_train_config_load_json(struct sr_train_config *cfg, const char *path);
/* The same from `len` bytes of text (NUL-terminated at text[len]); `path`
 * names it in messages. */
int sr_train_config_from_json(struct sr_train_config *cfg, const char *text, size_t len,
                              const char *path);

/* Replace the tables with one one-feature table per entry of `rows` (tables
 * t0.., features f0..), keeping dim and pooling. */
int sr_train_config_set_table_rows(struct sr_train_config *cfg, const int64_t *rows, int n);

/* Check everything fits together: MLP ends, table dims = D, features map to
 * tables, sizes positive, optimizer choices, F entries of a per-feature
 * --ids-per-feature. One-line error saying what and how to fix. */
int sr_train_config_check(const struct sr_train_config *cfg);

/* ---- settings by name (src/train/train_settings.c) ------------------------
 *
 * The model, data and optimizer settings that the command line, the JSON
 * config and the workload presets all set, by the flag's name without its
 * dashes and the value as text:
 *
 *   batch-size embedding-dim bot-mlp top-mlp interaction dcn-layers dcn-rank
 *   table-rows pooling ids-per-feature id-dist optimizer emb-optimizer lr emb-lr
 *
 * ids-per-feature takes N or MIN-MAX (every feature), or F comma-separated
 * entries, each N or MIN-MAX (feature f's own; F is checked against the
 * features by sr_train_config_check, since --table-rows may come later). */

/* Whether `name` is one of the settings above. */
int sr_train_config_is_setting(const char *name);
/* Set one of them. SR_ERR_INVALID_ARG naming the flag (--NAME) and the bad
 * entry; an unknown name is SR_ERR_INVALID_ARG too. cfg is unchanged on error
 * except for list settings, which may be left partly parsed. */
int sr_train_config_set(struct sr_train_config *cfg, const char *name, const char *value);

/* The per-feature form from ranges lo[f]..hi[f] of n features (the JSON
 * config's array): each 0 <= lo <= hi <= 2^20 and hi >= 1, 1 <= n <= 256,
 * else SR_ERR_INVALID_ARG naming `what` (the flag or key) and the entry. */
int sr_train_config_set_feature_ids(struct sr_train_config *cfg, const char *what, const int *lo,
                                    const int *hi, int n);

/* The standard workloads of BENCH.md as presets: "K", "M" or "D" (also
 * lower-case). Sets every model, data and optimizer setting above to the
 * workload's (the tables with their rows, dim, MLPs, interaction, ids per
 * feature, id distribution, optimizers and learning rates, batch size) and
 * records the name in cfg->workload; leaves the rest (steps, seed,
 * evaluation, distribution, device) alone. Each is a list of settings applied
 * through sr_train_config_set, so the preset means what those flags mean.
 * Apply it first: the CLI and the JSON config apply any other setting after
 * it, so those win. An unknown name is SR_ERR_INVALID_ARG naming K, M and D. */
int sr_train_config_set_workload(struct sr_train_config *cfg, const char *name);

/* The text a workload ("K", "M", "D") gives setting `name` ("table-rows",
 * ...), or NULL when it sets none or the workload is unknown. */
const char *sr_workload_setting(const char *workload, const char *name);

/* The most ids one sample holds: the sum over features of their max ids
 * (F * ids_max for one range). */
int64_t sr_train_config_ids_per_sample(const struct sr_train_config *cfg);

/* The synthetic generator's config for this job: seed, dense count, features
 * with `rows` (F, the caller's; each feature's table rows), ids per feature
 * (pointers into cfg for the per-feature form), id distribution.
 * SR_ERR_INVALID_ARG when a per-feature --ids-per-feature does not have
 * exactly F entries (the message names both numbers). */
int sr_train_config_synth(const struct sr_train_config *cfg, const int64_t *rows,
                          struct sr_synth_config *out);

struct sr_plan;
/* Before anything is allocated: the bytes `rank` needs for this job (its
 * tables or, with a plan, its shards of them, with optimizer state; the MLPs;
 * batch and evaluation buffers; --batch-pool's batches; checkpoints' host
 * staging), summed with overflow checks, against `mem_bytes` (0:
 * sr_machine_memory()). A device's mem_bytes holds all but the batch pool
 * and the staging, which are host memory: they are checked alone against
 * sr_machine_memory(). The rank is taken to be alone on its host: ranks that
 * share one are checked together by sr_train_config_check_host_memory.
 * SR_ERR_OOM naming the largest part (a table, or the flags that size the
 * buffers), the bytes and the memory. */
int sr_train_config_check_memory(const struct sr_train_config *cfg, const struct sr_plan *plan,
                                 int rank, int world_size, uint64_t mem_bytes);
/* Its device part alone: the rank's share but the batch pool and staging
 * against `device_bytes`, the device's memory. */
int sr_train_config_check_device_memory(const struct sr_train_config *cfg,
                                        const struct sr_plan *plan, int rank, int world_size,
                                        uint64_t device_bytes);
/* The host's memory against what `ranks` (n_ranks of a world of world_size,
 * the ranks that share this host, ascending) hold on it together: the sum of
 * their host estimates (sr_train_config_host_memory: everything with the
 * model on the host, `device_bytes` 0; on a device only --batch-pool's
 * batches and the checkpoints' host staging). A deterministic function of
 * its arguments and the machine's memory, so every rank of a host reaches
 * the same verdict with the same message, without a collective. SR_ERR_OOM:
 * one rank, as sr_train_config_check_memory says it; several, "the N ranks
 * on this host need X together, more than the Y this machine has", naming
 * the rank that needs the most and its largest part. */
int sr_train_config_check_host_memory(const struct sr_train_config *cfg, const struct sr_plan *plan,
                                      const int *ranks, int n_ranks, int world_size,
                                      uint64_t device_bytes);
/* One rank's share of a job's memory by part, in bytes: the estimate
 * sr_train_config_check_memory compares with the memory (overflow: a sum
 * passed 2^64, the parts are then meaningless). */
struct sr_memory_estimate {
    uint64_t tables;      /* its tables or shards, with their optimizer state */
    uint64_t dense;       /* MLP weights, gradients and optimizer state */
    uint64_t batch;       /* batch buffers, pooled vectors, activations */
    uint64_t batch_slots; /* of batch: what the rank's shards receive (a shard of a
                             table: sr_train_config_slot_sample_bytes of its
                             features x the global batch) */
    uint64_t eval;        /* evaluation predictions and labels */
    uint64_t pool;        /* --batch-pool's host batches */
    uint64_t staging; /* checkpoints' host copy of the tables (and dense block): train_memory.c */
    uint64_t total;
    int overflow;
};
void sr_train_config_memory(const struct sr_train_config *cfg, const struct sr_plan *plan, int rank,
                            int world_size, struct sr_memory_estimate *out);
/* The part of that estimate the host holds (an evaluation of files, sized
 * when they are opened, is checked against the host's memory beside it),
 * summed over `ranks` (n_ranks of them: the ranks on one host; the rank
 * alone: &rank, 1): everything when the model is on the host (`device_bytes`
 * 0: the CPU); on a device of `device_bytes`, only --batch-pool's batches and
 * the checkpoints' host staging. */
void sr_train_config_host_memory(const struct sr_train_config *cfg, const struct sr_plan *plan,
                                 const int *ranks, int n_ranks, int world_size,
                                 uint64_t device_bytes, struct sr_memory_estimate *out);
/* The batch buffers one shard of feature f's table adds on its rank, per
 * sample of the global batch (every rank's samples of f are received there:
 * ids, bags, pooled vectors and gradients, in each of the embeddings' batch
 * contexts). */
uint64_t sr_train_config_slot_sample_bytes(const struct sr_train_config *cfg, int f);
/* The most ids feature f holds in one sample: the files' bound when known
 * (data_ids_max), else --ids-per-feature's maximum. */
int64_t sr_train_config_feature_ids_max(const struct sr_train_config *cfg, int f);
/* A data-parallel table's memory beside its weights and state, on a job of W
 * ranks (train_memory.c): its dense gradient and touch counts, and their
 * staging in the dense all-reduce's last bucket. */
uint64_t sr_train_config_dp_extra_bytes(const struct sr_train_config *cfg, int W, uint64_t rows,
                                        uint64_t dim);
/* This machine's physical memory (sysconf _SC_PHYS_PAGES x _SC_PAGE_SIZE), or
 * the cgroup v2 limit in /sys/fs/cgroup/memory.max when lower. */
uint64_t sr_machine_memory(void);

/* A run that reads a checkpoint but writes none (--resume without
 * --checkpoint-dir, `shardrec eval`) stages its copies to a device in pieces
 * of at most this many bytes of host memory. */
#define SR_CKPT_READ_STAGING_BYTES ((uint64_t)64 << 20)

struct sr_planner_table;
struct sr_planner_model;
#define SR_PLAN_SAMPLE_DEFAULT 65536

/* Each table's statistics for the planner into stats[0..T) (planner.h):
 * its features, the mean ids a sample takes from it and its hot share (and
 * its hot-set sizes with their shares and hottest rows: planner.h).
 * Without --data, from the config: the middle of each feature's
 * --ids-per-feature range, and --id-dist's hot shares
 * (sr_planner_hot_share_of) and hottest rows (sr_synth_hot_rows).
 * With --data, measured (shardrec/table_stats.h) on its first --plan-sample
 * samples (fewer when the data ends first), read in file order (never
 * shuffled) as one rank of one, with ids mapped to rows as training maps
 * them (the reader, then each table's id policy): every rank that calls it
 * gets the same bits from the same files (train calls it on rank 0 and
 * broadcasts the result). *measured = the samples read (0: from the config).
 * A data file that cannot be read or holds a bad sample is the reader's
 * SR_ERR_IO / SR_ERR_DATA naming the file, as training would report it.
 * With --data it also sets cfg->data_ids_max from the files' bounds where
 * not set yet (train sets them from its own readers first). */
int sr_train_config_table_stats(struct sr_train_config *cfg, struct sr_planner_table *stats,
                                int64_t *measured);
/* Each table's slot_bytes (planner.h) from the config (table_stats sets
 * them too): the sum of sr_train_config_slot_sample_bytes over its features. */
void sr_train_config_slot_stats(const struct sr_train_config *cfg, struct sr_planner_table *stats);

/* The planner's view of this job on W ranks, L a node (shardrec/planner.h):
 * *ec (views into cfg) and *m pointing at it and at stats[0..T), which
 * sr_train_config_table_stats filled (borrowed). */
int sr_train_config_planner(struct sr_train_config *cfg, int world_size, int ranks_per_node,
                            struct sr_ebc_config *ec, const struct sr_planner_table *stats,
                            struct sr_planner_model *m);

/* Derived descriptions for the layers below (views into cfg). */
void sr_train_config_dlrm(const struct sr_train_config *cfg, struct sr_dlrm_config *out);
void sr_train_config_ebc(struct sr_train_config *cfg, struct sr_ebc_config *out);

/* "dot" or "dcn" (--interaction, the config's "interaction"); else
 * SR_ERR_INVALID_ARG naming the flag and the choices. */
int sr_interaction_parse(const char *s, enum sr_interaction *out);
/* Parse "13-512-256" into widths; errors name the flag. */
int sr_parse_widths(const char *flag, const char *s, int *widths, int *n, int max);
/* Parse "1460,583,..." into rows; errors name the position. */
int sr_parse_rows(const char *flag, const char *s, int64_t *rows, int *n, int max);
/* Parse "N" or "MIN-MAX" ids of one feature (0 <= MIN <= MAX <= 2^20, MAX >= 1);
 * errors name `what`. */
int sr_parse_ids_range(const char *what, const char *s, int *lo, int *hi);
/* Parse integers and floats strictly (whole string, range checked). */
int sr_parse_i64(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out);
int sr_parse_f32(const char *flag, const char *s, float *out);

#endif
