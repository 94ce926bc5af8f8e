/* `shardrec train`: parse the job, build the trainer, run, print the summary. */
#include <stdio.h>
#include <string.h>

#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/trainer.h"
#include "cli.h"

static void train_help(void)
{
    printf(
        "usage: shardrec train [flags]\n"
        "\n"
        "Trains a DLRM. With no flags: the built-in job (workload K's model, 26 tables\n"
        "capped at 100k rows, dim 16, Zipf(1.05) ids, synthetic data from a hidden teacher),\n"
        "1000 steps of batch 2048. Flags override a --config JSON file, which overrides\n"
        "--workload, which overrides the defaults.\n"
        "\n"
        "job\n"
        "  --workload K|M|D       a standard workload's model, data and optimizer\n"
        "                         (docs/user-guide.md): K Criteo-Kaggle one-hot, dim 16;\n"
        "                         M 26 x 1M rows, 20 ids per feature, dim 128; D MLPerf\n"
        "                         DLRM-DCNv2 (multi-hot, Zipf ids, DCNv2, Adagrad). Applied\n"
        "                         first, wherever it stands: --config and every other flag\n"
        "                         override it (--workload D --table-rows ... --batch-size 64)\n"
        "  --config FILE          JSON job description (keys: docs/user-guide.md)\n"
        "  --steps N              training steps (default 1000)\n"
        "  --batch-size N         samples per step (default 2048)\n"
        "  --seed N               model initialisation and data seed (default 1234)\n"
        "model\n"
        "  --embedding-dim D      embedding width, = last bottom-MLP width (default 16)\n"
        "  --bot-mlp A-B-..-D     bottom MLP widths, starting with the 13 dense inputs\n"
        "                         (default 13-512-256-64-16)\n"
        "  --top-mlp A-..-1       top MLP layers after the interaction (default 512-256-1)\n"
        "  --interaction dot|dcn  how z and the pooled embeddings meet: dot (default), their\n"
        "                         pairwise dot products; dcn, DCNv2 low-rank cross layers\n"
        "                         (TorchRec's LowRankCrossNet) on x0 = [z, e1..eF] of width\n"
        "                         n = (F+1)*D, whose output (width n) feeds the top MLP\n"
        "  --dcn-layers L         cross layers of --interaction dcn (default 3, at most 16)\n"
        "  --dcn-rank R           rank of each cross layer, 1..n (default 512, or n when\n"
        "                         smaller)\n"
        "  --table-rows R0,R1,..  one table per entry, named t0.., one feature each\n"
        "                         (default: workload K's rows capped at 100000)\n"
        "  --pooling sum|mean     pooling of every table (default sum)\n"
        "optimization\n"
        "  --optimizer O          dense optimizer: sgd, adagrad, adam (default sgd)\n"
        "  --emb-optimizer O      embeddings: sgd, adagrad, rowwise_adagrad, adam\n"
        "                         (default rowwise_adagrad; adam updates touched rows only)\n"
        "  --lr X                 dense learning rate (default 0.1)\n"
        "  --emb-lr X             embedding learning rate (default: --lr)\n"
        "  --emb-dtype T          tables stored in fp32 (default), fp16 or bf16; arithmetic\n"
        "                         and optimizer state stay fp32 (half the table memory)\n"
        "  --emb-rounding R       16-bit tables: stochastic (default) or nearest\n"
        "  --lr-schedule S        constant | warmup_poly:WARMUP:DECAY_START:DECAY_STEPS[:POWER]\n"
        "                         (linear warm-up, then polynomial decay to 0, POWER 2 unless\n"
        "                         given; default constant)\n"
        "data (default: the built-in synthetic generator)\n"
        "  --data FILE...         train on Criteo TSV (plain or .gz) or binary files, in\n"
        "                         order; without --steps, one pass over them\n"
        "  --eval-data FILE...    evaluate on these files (all samples)\n"
        "  --skip-bad-lines       count bad lines by kind and report them instead of stopping\n"
        "  --shuffle              visit --data in a seeded order of 4096-sample blocks, new\n"
        "                         each epoch, the same for any world size (binary files only;\n"
        "                         convert TSV first); default: file order\n"
        "  --shuffle-block N      samples per --shuffle block (default 4096)\n"
        "weights\n"
        "  --init-weights FILE    start from safetensors weights (bot_mlp.K.*, top_mlp.K.*,\n"
        "                         dcn.L.V/U/bias with dcn, emb.TABLE.weight); shapes are\n"
        "                         checked\n"
        "  --save-weights FILE    write every parameter as safetensors at the end\n"
        "  --checkpoint-dir DIR   write checkpoints to DIR/step-NNNNNNNN/ (and at the end)\n"
        "  --checkpoint-every N   a checkpoint every N steps (default: only at the end);\n"
        "                         Nm: every N minutes of training (wall time; N may be a\n"
        "                         decimal, e.g. 0.5m)\n"
        "  --checkpoint-keep K    complete checkpoints kept (default 2)\n"
        "  --checkpoint-write M   overlap: copy to host memory, then a thread writes while\n"
        "                         training goes on; sync: training waits for the write;\n"
        "                         auto (default): overlap on a GPU, sync on the CPU\n"
        "  --resume [PATH]        continue from checkpoint PATH, or the latest complete one\n"
        "                         in --checkpoint-dir; --steps stays the run's total\n"
        "synthetic data\n"
        "  --ids-per-feature N|MIN-MAX  ids per feature per sample (default 1)\n"
        "  --ids-per-feature A,B,...    one N or MIN-MAX per feature, exactly F entries\n"
        "                               (e.g. MLPerf's multi-hot sizes 3,2,1,...)\n"
        "  --id-dist uniform|zipf:S     id popularity (default zipf:1.05)\n"
        "evaluation and output\n"
        "  --eval-every N         evaluate every N steps, and at the end (0: only at the end;\n"
        "                         default 250)\n"
        "  --eval-samples N       held-back samples per evaluation (default 131072; 0: none)\n"
        "  --log-every N          steps between log lines and metrics lines (default 50)\n"
        "  --metrics FILE         one JSON object per logging interval: step, loss (that\n"
        "                         step's), loss_avg, lr, samples_per_s, step_ms, eval_* when\n"
        "                         evaluated\n"
        "  --progress, --no-progress  live progress line (default: when stderr is a terminal)\n"
        "  --trace FILE           Chrome trace-event JSON of every rank in one file (open it\n"
        "                         in Perfetto): a process per rank, clocks aligned to rank 0\n"
        "                         at start-up, a track per thread, a span per stage and\n"
        "                         collective (bytes, peers, node crossing)\n"
        "  --trace-steps A:B      the steps the trace records (default: 5 steps after 2\n"
        "                         warm-up steps, 3:7)\n"
        "device\n"
        "  --device auto|cpu|cuda where the model lives: auto (default) takes the first CUDA\n"
        "                         GPU when one is visible, else the CPU; with several ranks\n"
        "                         a rank takes GPU (node-local rank mod GPUs); cuda without\n"
        "                         a usable GPU is exit status 2\n"
        "  --math fp32|tf32|bf16  dense GEMMs on CUDA: fp32 (default, as the reference),\n"
        "                         tf32 (matrix units, fp32 data), bf16 (bf16 inputs, fp32\n"
        "                         accumulation and outputs); the CPU computes fp32 only\n"
        "  --cuda-graphs, --no-cuda-graphs  replay each step as a CUDA graph (one rank,\n"
        "                         every table whole, --pipeline sparse-dist; a graph per\n"
        "                         batch shape, from step 3; the same bits as without).\n"
        "                         Default: on where that applies on CUDA\n"
        "  --batch-pool N         BENCHMARKS: make N synthetic batches at start-up and cycle\n"
        "                         them (each still copied to the device every step)\n"
        "  --loader-threads N     OpenMP threads that make batches on the loader thread\n"
        "                         (--pipeline sparse-dist). Default 0: automatic: on a GPU\n"
        "                         the rank's share of the host's cores but two, else 1\n"
        "\n"
        "distribution (start with mpirun/srun; one rank otherwise)\n"
        "  --global-batch-size G  global batch; each of W ranks takes G/W (default W x\n"
        "                         --batch-size)\n"
        "  --sharding TYPE        shard every table: dp, tw, rw, cw, twrw or hybrid (its\n"
        "                         hottest rows replicated, as many as the planner's cost\n"
        "                         model finds best on --topology, the rest rw; the hot\n"
        "                         rows of --id-dist zipf:S or counted on --data)\n"
        "  --plan FILE            JSON plan: each table's sharding type and ranks (default:\n"
        "                         the planner's, on --topology; `shardrec plan`)\n"
        "  --topology NAME|FILE   the planner's topology: a preset or a file that `shardrec\n"
        "                         bench comm` or `bench device` wrote; repeat to merge\n"
        "                         (default: this device's nominal figures). The summary\n"
        "                         prints the predicted step beside the measured one\n"
        "  --plan-sample N        with --data, the planner's table statistics (mean ids a\n"
        "                         sample, hot share) are measured on its first N samples\n"
        "                         (default 65536); without, taken from --id-dist\n"
        "  --ranks-per-node N     treat blocks of N consecutive ranks as one node (default:\n"
        "                         detected; env SR_RANKS_PER_NODE)\n"
        "  --comm auto|mpi|nccl   the ranks' transport. nccl: GPUs, collectives on their\n"
        "                         streams (bootstrapped over MPI; host buffers over MPI).\n"
        "                         auto (default): nccl when the model is on CUDA, except\n"
        "                         where two ranks of one node share a GPU or with\n"
        "                         --emulate-link; else mpi\n"
        "  --bucket-kib N         dense gradient all-reduce bucket size (default 4096)\n"
        "  --pipeline auto|sparse-dist|none  sparse-dist: while batch i trains, batch\n"
        "                         i+1 is copied and its input dist is in flight, batch i+2\n"
        "                         loads on a loader thread; output and gradient dists\n"
        "                         overlap the bottom MLP. none: one batch at a time. Same\n"
        "                         results, bit for bit. auto (default): sparse-dist, but\n"
        "                         none where NCCL ranks take turns on one GPU (emulated\n"
        "                         nodes: overlapped exchanges cost more than they hide)\n"
        "  --comm-dtype fp32|fp16|bf16  pooled embeddings (forward) and their gradients\n"
        "                         (backward) on the wire; 16-bit halves those bytes, sums\n"
        "                         stay fp32 (rw/twrw reduce-scatter: all-to-all + local\n"
        "                         sum). Default fp32\n"
        "  --dense-comm-dtype fp32|fp16|bf16  dense gradient buckets on the wire; 16-bit:\n"
        "                         all-to-all + fp32 sum + all-gather, 2 calls per bucket;\n"
        "                         the loss and DP-table gradients stay fp32. Default fp32\n"
        "  --comm-timeout SECONDS a collective not done after SECONDS (+1 s per 50 MB it\n"
        "                         moves) ends the job: a 2 s probe finds the ranks that did\n"
        "                         not arrive, the message names them, the collective and\n"
        "                         the step; every rank exits. Default 60; 0: wait forever\n"
        "  --emulate-link GB_S[,LATENCY_US]  TESTS AND BENCHMARKS ONLY: make traffic between\n"
        "                         ranks on different nodes (--ranks-per-node) complete no\n"
        "                         earlier than a link of GB_S x 1e9 bytes/s per direction\n"
        "                         and LATENCY_US (default 0) would deliver it; results are\n"
        "                         unchanged (env SR_EMULATE_LINK; docs/user-guide.md)\n"
        "\n"
        "Exit status: 0 done; 1 the run failed (the loss became NaN, a peer stopped\n"
        "answering, a write failed); 2 bad flags, config, plan or data file, or a job\n"
        "too large for this machine's memory (docs/user-guide.md).\n"
        "Environment: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, SR_LOG=warn|info|debug.\n");
}

struct train_args {
    struct sr_train_config *cfg;
};

/* --trace-steps A:B, 1 <= A <= B. */
static int parse_trace_steps(struct sr_train_config *cfg, const char *v)
{
    char first[32];
    const char *colon = strchr(v, ':');
    if (!colon || (size_t)(colon - v) >= sizeof first)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--trace-steps '%s': expected A:B, the first and last step traced "
                            "(e.g. 3:7)",
                            v);
    snprintf(first, sizeof first, "%.*s", (int)(colon - v), v);
    int rc = sr_parse_i64("--trace-steps", first, 1, INT64_MAX / 4, &cfg->trace_first);
    if (!rc)
        rc = sr_parse_i64("--trace-steps", colon + 1, cfg->trace_first, INT64_MAX / 4,
                          &cfg->trace_last);
    return rc;
}

/* --checkpoint-write auto|overlap|sync */
static int parse_checkpoint_write(struct sr_train_config *cfg, const char *v)
{
    static const char *const names[] = {"auto", "overlap", "sync"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(v, names[k])) {
            cfg->checkpoint_write = k;
            return SR_OK;
        }
    return sr_error_set(SR_ERR_INVALID_ARG, "--checkpoint-write %s: expected auto, overlap or sync",
                        v);
}

/* --checkpoint-every N (steps) or Nm (minutes of training, a decimal). */
static int parse_checkpoint_every(struct sr_train_config *cfg, const char *v)
{
    char num[64];
    size_t n = strlen(v);
    cfg->checkpoint_every = 0;
    cfg->checkpoint_minutes = 0;
    if (n && strspn(v, "0123456789") == n)
        return sr_parse_i64("--checkpoint-every", v, 1, INT64_MAX / 4, &cfg->checkpoint_every);
    if (n < 2 || v[n - 1] != 'm' || n - 1 >= sizeof num || strspn(v, "0123456789.") != n - 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--checkpoint-every %s: not N (steps) or Nm (minutes); HINT: "
                            "--checkpoint-every 1000 or --checkpoint-every 30m",
                            v);
    memcpy(num, v, n - 1);
    num[n - 1] = '\0';
    float minutes;
    int rc = sr_parse_f32("--checkpoint-every", num, &minutes);
    if (!rc && !(minutes >= 1e-6f && minutes <= 1e6f))
        rc = sr_error_set(SR_ERR_INVALID_ARG,
                          "--checkpoint-every %s: minutes out of range "
                          "[1e-6, 1e6]",
                          v);
    cfg->checkpoint_minutes = minutes;
    return rc;
}

static int other_flag(void *ctx, const char *name, const char *value)
{
    struct train_args *a = ctx;
    struct sr_train_config *cfg = a->cfg;
    if (!strcmp(name, "trace") && value) {
        return cli_set_path(cfg->trace_path, sizeof cfg->trace_path, name, value);
    } else if (!strcmp(name, "trace-steps") && value) {
        return parse_trace_steps(cfg, value);
    } else if (!strcmp(name, "pipeline") && value) {
        return cli_parse_pipeline(cfg, value);
    } else if (!strcmp(name, "init-weights") && value) {
        return cli_set_path(cfg->init_weights_path, sizeof cfg->init_weights_path, name, value);
    } else if (!strcmp(name, "save-weights") && value) {
        return cli_set_path(cfg->save_weights_path, sizeof cfg->save_weights_path, name, value);
    } else if (!strcmp(name, "checkpoint-dir") && value) {
        return cli_set_path(cfg->checkpoint_dir, sizeof cfg->checkpoint_dir, name, value);
    } else if (!strcmp(name, "checkpoint-every") && value) {
        return parse_checkpoint_every(cfg, value);
    } else if (!strcmp(name, "checkpoint-write") && value) {
        return parse_checkpoint_write(cfg, value);
    } else if (!strcmp(name, "checkpoint-keep") && value) {
        int64_t k;
        int rc = sr_parse_i64("--checkpoint-keep", value, 1, 1000000, &k);
        cfg->checkpoint_keep = (int)k;
        return rc;
    } else if (!strcmp(name, "shuffle-block") && value) {
        int64_t k;
        int rc = sr_parse_i64("--shuffle-block", value, 1, 1 << 30, &k);
        cfg->shuffle_block = (int)k;
        return rc;
    } else if (!strcmp(name, "resume")) {
        cfg->resume = 1;
        return value ? cli_set_path(cfg->resume_path, sizeof cfg->resume_path, name, value) : 0;
    } else if (!strcmp(name, "topology") && value) {
        if (cfg->n_topologies == SR_MAX_TOPOLOGIES)
            return sr_error_set(SR_ERR_INVALID_ARG, "--topology: at most %d", SR_MAX_TOPOLOGIES);
        return cli_set_path(cfg->topologies[cfg->n_topologies++], SR_PATH_MAX, name, value);
    } else if (!strcmp(name, "skip-bad-lines") && !value)
        cfg->skip_bad_lines = 1;
    else if (!strcmp(name, "shuffle") && !value)
        cfg->shuffle = 1;
    else if (!strcmp(name, "cuda-graphs") && !value)
        cfg->cuda_graphs = 1;
    else if (!strcmp(name, "no-cuda-graphs") && !value)
        cfg->cuda_graphs = -1;
    else if (!strcmp(name, "progress") && !value)
        cfg->progress = 1;
    else if (!strcmp(name, "no-progress") && !value)
        cfg->progress = 0;
    else
        return 1;
    return 0;
}

static void print_job(const struct sr_train_config *cfg)
{
    char workload[SR_WORKLOAD_NAME_MAX + 16] = "", steps[48];
    int64_t rows = 0;
    if (cfg->n_data && !cfg->steps_set) /* the trainer runs until the data ends */
        snprintf(steps, sizeof steps, "one pass over --data");
    else
        snprintf(steps, sizeof steps, "%lld steps", (long long)cfg->steps);
    for (int t = 0; t < cfg->num_tables; t++)
        rows += cfg->tables[t].num_embeddings;
    if (cfg->workload[0])
        snprintf(workload, sizeof workload, "workload %s, ", cfg->workload);
    fprintf(stderr,
            "shardrec train: %s%d tables (%lld rows, %.1f MiB in %s), %d features (up to %lld ids "
            "a sample), dim %d, %s, batch %d, %s, optimizer %s / embeddings %s\n",
            workload, cfg->num_tables, (long long)rows,
            (double)rows * cfg->embedding_dim * (double)sr_dtype_size(cfg->emb_dtype) / (1 << 20),
            sr_dtype_name(cfg->emb_dtype), cfg->num_features,
            (long long)sr_train_config_ids_per_sample(cfg), cfg->embedding_dim,
            cfg->interaction == SR_INTERACTION_DCN ? "dcn" : "dot", cfg->batch_size, steps,
            sr_optim_kind_name(cfg->optimizer),
            sr_optim_kind_name(cfg->emb_optimizer));
}

/* No output names an input or another output (files.h), before anything is
 * opened: `--metrics v.tsv --data v.tsv` would empty the data. */
static int check_files_distinct(int argc, char **argv, const struct sr_train_config *cfg)
{
    enum { MAX = 2 * SR_MAX_DATA_FILES + 16 };
    struct sr_named_file f[MAX];
    const char *configs[8];
    int n = 0, n_config = cli_config_paths(argc, argv, configs, 8);
    for (int i = 0; i < cfg->n_data; i++)
        f[n++] = (struct sr_named_file){"--data", cfg->data_paths[i], 0};
    for (int i = 0; i < cfg->n_eval_data; i++)
        f[n++] = (struct sr_named_file){"--eval-data", cfg->eval_data_paths[i], 0};
    for (int i = 0; i < n_config; i++)
        f[n++] = (struct sr_named_file){"--config", configs[i], 0};
    f[n++] = (struct sr_named_file){"--init-weights", cfg->init_weights_path, 0};
    f[n++] = (struct sr_named_file){"--plan", cfg->plan_path, 0};
    f[n++] = (struct sr_named_file){"--save-weights", cfg->save_weights_path, 1};
    f[n++] = (struct sr_named_file){"--metrics", cfg->metrics_path, 1};
    f[n++] = (struct sr_named_file){"--trace", cfg->trace_path, 1};
    return sr_files_check_distinct(f, n);
}

/* Every output path can be written (atomic_file.h) and none is an input:
 * checked before any work, so a typo never costs a training run. */
static int check_outputs(int argc, char **argv, const struct sr_train_config *cfg)
{
    int rc = check_files_distinct(argc, argv, cfg);
    if (!rc && cfg->save_weights_path[0])
        rc = sr_output_path_check(cfg->save_weights_path, "--save-weights", SR_OUTPUT_ATOMIC);
    if (!rc && cfg->metrics_path[0])
        rc = sr_output_path_check(cfg->metrics_path, "--metrics", SR_OUTPUT_STREAM);
    if (!rc && cfg->trace_path[0])
        rc = sr_output_path_check(cfg->trace_path, "--trace", SR_OUTPUT_ATOMIC);
    return rc;
}

/* After the run: the summary and the weights, also when a result of the run
 * could not be written (SR_ERR_WRITE: --metrics or --trace on a full disk,
 * rank 0 only), so that the training is not lost and every rank takes part
 * in the save's collectives; that error is the last line. Returns the exit
 * status. */
static int finish(struct sr_trainer *trainer, const struct sr_train_config *cfg,
                  const struct sr_trainer_result *res, int run_rc)
{
    char run_error[1024];
    int status = run_rc ? CLI_EXIT_FAIL : 0;
    snprintf(run_error, sizeof run_error, "%s", run_rc ? sr_error_message() : "");
    sr_trainer_print_summary(trainer, res, stderr);
    if (cfg->save_weights_path[0] && sr_trainer_save_weights(trainer, cfg->save_weights_path)) {
        cli_error("train", "%s", sr_error_message());
        status = CLI_EXIT_FAIL;
    }
    if (run_rc)
        cli_error("train", "%s", run_error);
    return status;
}

int cli_train(int argc, char **argv)
{
    static const char *const value_flags[] = {
        "init-weights",     "save-weights",    "trace",
        "trace-steps",      "pipeline",        "checkpoint-dir",
        "checkpoint-every", "checkpoint-keep", "checkpoint-write",
        "shuffle-block",    "topology",        NULL};
    static struct sr_train_config cfg;
    struct train_args args = {.cfg = &cfg};
    struct sr_trainer *trainer;
    struct sr_trainer_result res;
    int rc = cli_parse_job(argc, argv, &cfg, other_flag, &args, value_flags);
    if (rc < 0) {
        train_help();
        return 0;
    }
    if (rc)
        return rc;
    if (sr_train_config_check(&cfg) || check_outputs(argc, argv, &cfg)) {
        cli_error("train", "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    if ((rc = sr_trainer_init(&trainer, &cfg, stderr))) {
        cli_error("train", "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    if (sr_trainer_rank(trainer) == 0)
        print_job(&cfg);
    if (cfg.init_weights_path[0] &&
        (rc = sr_trainer_load_weights(trainer, cfg.init_weights_path))) {
        cli_error("train", "%s", sr_error_message());
        sr_trainer_free(trainer);
        return CLI_EXIT_USAGE;
    }
    rc = sr_trainer_run(trainer, &res);
    if (rc && rc != SR_ERR_WRITE) { /* a bad data file: 2; a NaN loss: 1 */
        cli_error("train", "%s", sr_error_message());
        sr_trainer_free(trainer);
        return cli_exit_status(rc);
    }
    int status = finish(trainer, &cfg, &res, rc);
    sr_trainer_free(trainer);
    return status;
}
