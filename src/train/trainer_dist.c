/*
 * The trainer's distributed parts: the communicators (world; sparse, dense,
 * node and cross of their own so sparse and dense traffic never share a
 * queue), the plan (--plan, --sharding, or the default), the start-up check
 * that every rank runs the same job, and the embedding stage: the sharded
 * EBC, one rank without a plan getting a one-rank table-wise plan (the
 * EBC's local mode, sharded_ebc.h).
 * After the plan, and before anything large is allocated, the check that the
 * job fits in memory: the host's shared by every rank on it, a device's by
 * its rank.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/log.h"
#include "shardrec/rng.h"
#include "shardrec/safetensors.h"
#include "shardrec/trace.h"
#include "train/trainer_internal.h"
#include "train/weights_meta.h"

/* ---- the start-up check that every rank runs the same job ----------------------- */

/*
 * Each setting is hashed on its own and the hashes of all ranks are gathered,
 * so that a mismatch names the setting (not just "the config"), and every rank
 * finds the same one and prints the same message. It runs on a world of
 * one-rank nodes made for it alone, before the real world is split into nodes:
 * a rank whose --ranks-per-node does not fit the world would otherwise stop
 * alone, or the ranks would split the world differently and hang.
 */

struct setting {
    const char *name;
    size_t offset, size; /* bytes hashed; a string: its capacity */
    int is_string;
};

#define CFG_SIZE(f) sizeof(((struct sr_train_config *)0)->f)
#define FIELD(name, f)                                                                             \
    {                                                                                              \
        name, offsetof(struct sr_train_config, f), CFG_SIZE(f), 0                                  \
    }
#define STRING(name, f)                                                                            \
    {                                                                                              \
        name, offsetof(struct sr_train_config, f), CFG_SIZE(f), 1                                  \
    }

static const struct setting settings[] = {
    STRING("--workload", workload),
    FIELD("--embedding-dim", embedding_dim),
    FIELD("--bot-mlp", bot_mlp),
    FIELD("--bot-mlp", n_bot),
    FIELD("--top-mlp", top_mlp),
    FIELD("--top-mlp", n_top),
    FIELD("--interaction", interaction),
    FIELD("--dcn-layers", dcn_layers),
    FIELD("--dcn-rank", dcn_rank),
    FIELD("--seed", seed),
    FIELD("--ids-per-feature", ids_min),
    FIELD("--ids-per-feature", ids_max),
    FIELD("--ids-per-feature", n_feature_ids),
    FIELD("--ids-per-feature", feature_ids_min),
    FIELD("--ids-per-feature", feature_ids_max),
    FIELD("--id-dist", id_dist),
    FIELD("--id-dist", zipf_s),
    FIELD("--skip-bad-lines", skip_bad_lines),
    FIELD("--shuffle", shuffle),
    FIELD("--shuffle-block", shuffle_block),
    FIELD("--steps", steps),
    FIELD("--steps", steps_set),
    FIELD("--batch-size", batch_size),
    FIELD("--lr", lr),
    FIELD("--emb-lr", emb_lr),
    STRING("--lr-schedule", lr_schedule),
    FIELD("--optimizer", optimizer),
    FIELD("--emb-optimizer", emb_optimizer),
    FIELD("--emb-dtype", emb_dtype),
    FIELD("--emb-dtype", emb_rounding),
    FIELD("--pipeline", pipeline),
    FIELD("--device", device),
    FIELD("--math", math),
    FIELD("--batch-pool", batch_pool),
    FIELD("--cuda-graphs", cuda_graphs),
    FIELD("--ranks-per-node", ranks_per_node),
    FIELD("--comm", comm),
    FIELD("--global-batch-size", global_batch_size),
    STRING("--plan", plan_path),
    FIELD("--sharding", sharding),
    FIELD("--bucket-kib", bucket_kib),
    FIELD("--comm-timeout", comm_timeout),
    FIELD("--emulate-link", link_gb_per_s),
    FIELD("--emulate-link", link_latency_us),
    FIELD("--comm-dtype", comm_dtype),
    FIELD("--dense-comm-dtype", dense_comm_dtype),
    FIELD("--eval-every", eval_every),
    FIELD("--eval-samples", eval_samples),
    FIELD("--log-every", log_every),
    STRING("--metrics", metrics_path),
    STRING("--trace", trace_path),
    FIELD("--trace-steps", trace_first),
    FIELD("--trace-steps", trace_last),
    /* a rank saving alone would wait for the others in the save's gather; one
     * loading alone would train another model */
    STRING("--init-weights", init_weights_path),
    STRING("--save-weights", save_weights_path),
    FIELD("--progress", progress),
    STRING("--checkpoint-dir", checkpoint_dir),
    FIELD("--checkpoint-every", checkpoint_every),
    FIELD("--checkpoint-every", checkpoint_minutes),
    FIELD("--checkpoint-keep", checkpoint_keep),
    FIELD("--checkpoint-write", checkpoint_write),
    FIELD("--resume", resume),
    STRING("--resume", resume_path),
};

#define N_SETTINGS  ((int)(sizeof settings / sizeof settings[0]))
#define H_TABLES    N_SETTINGS       /* tables: names, rows, dims, pooling, id policy */
#define H_FEATURES  (N_SETTINGS + 1) /* features and their tables */
#define H_DATA      (N_SETTINGS + 2) /* --data paths */
#define H_EVAL_DATA (N_SETTINGS + 3) /* --eval-data paths */
#define H_ENV_RPN   (N_SETTINGS + 4) /* environment SR_RANKS_PER_NODE */
#define H_ENV_LINK  (N_SETTINGS + 5) /* environment SR_EMULATE_LINK */
#define H_ALL       (N_SETTINGS + 6) /* every byte of the config: settings added later */
#define N_HASHES    (N_SETTINGS + 7)

static const char *hash_name(int k)
{
    static const char *const extra[] = {
        "the tables (--table-rows, --pooling, the config's \"tables\")",
        "the features (the config's \"features\")",
        "--data",
        "--eval-data",
        "the environment variable SR_RANKS_PER_NODE",
        "the environment variable SR_EMULATE_LINK",
        "the job config (flags and --config file)",
    };
    return k < N_SETTINGS ? settings[k].name : extra[k - N_SETTINGS];
}

static uint64_t hash_str(uint64_t h, const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    h = sr_hash_bytes(h, s, n);
    return sr_hash_bytes(h, &n, sizeof n);
}

static uint64_t hash_paths(const char (*paths)[SR_PATH_MAX], int n)
{
    uint64_t h = sr_hash_bytes(SR_HASH_INIT, &n, sizeof n);
    for (int i = 0; i < n; i++)
        h = hash_str(h, paths[i], SR_PATH_MAX);
    return h;
}

static void setting_hashes(const struct sr_train_config *cfg, uint64_t *h)
{
    const char *bytes = (const char *)cfg, *env = getenv("SR_RANKS_PER_NODE");
    const char *link = getenv("SR_EMULATE_LINK");
    for (int k = 0; k < N_SETTINGS; k++) {
        const struct setting *s = &settings[k];
        h[k] = s->is_string ? hash_str(SR_HASH_INIT, bytes + s->offset, s->size)
                            : sr_hash_bytes(SR_HASH_INIT, bytes + s->offset, s->size);
    }
    h[H_TABLES] = sr_hash_bytes(SR_HASH_INIT, &cfg->num_tables, sizeof cfg->num_tables);
    for (int t = 0; t < cfg->num_tables; t++) {
        const struct sr_table_config *tc = &cfg->tables[t];
        h[H_TABLES] = hash_str(h[H_TABLES], tc->name, SR_NAME_MAX);
        h[H_TABLES] = sr_hash_bytes(h[H_TABLES], &tc->num_embeddings, sizeof tc->num_embeddings);
        h[H_TABLES] = sr_hash_bytes(h[H_TABLES], &tc->embedding_dim, sizeof tc->embedding_dim);
        h[H_TABLES] = sr_hash_bytes(h[H_TABLES], &tc->pooling, sizeof tc->pooling);
        h[H_TABLES] = sr_hash_bytes(h[H_TABLES], &tc->id_policy, sizeof tc->id_policy);
    }
    h[H_FEATURES] = sr_hash_bytes(SR_HASH_INIT, &cfg->num_features, sizeof cfg->num_features);
    for (int f = 0; f < cfg->num_features; f++) {
        h[H_FEATURES] = hash_str(h[H_FEATURES], cfg->feature_names[f], SR_NAME_MAX);
        h[H_FEATURES] = sr_hash_bytes(h[H_FEATURES], &cfg->feature_table[f], sizeof(int));
    }
    h[H_DATA] = hash_paths(cfg->data_paths, cfg->n_data);
    h[H_EVAL_DATA] = hash_paths(cfg->eval_data_paths, cfg->n_eval_data);
    h[H_ENV_RPN] = hash_str(SR_HASH_INIT, env ? env : "", 64);
    h[H_ENV_LINK] = hash_str(SR_HASH_INIT, link ? link : "", 64);
    struct sr_train_config all = *cfg;
    all.loader_threads = 0; /* a per-host setting: the batches are the same on any count */
    h[H_ALL] = sr_hash_bytes(SR_HASH_INIT, &all, sizeof all);
}

uint64_t sr_trainer_setting_hash(const struct sr_train_config *cfg, const char *name)
{
    uint64_t h[N_HASHES], out = SR_HASH_INIT;
    setting_hashes(cfg, h);
    if (!strcmp(name, "--table-rows"))
        return h[H_TABLES];
    if (!strcmp(name, "features"))
        return h[H_FEATURES];
    for (int k = 0; k < N_SETTINGS; k++)
        if (!strcmp(settings[k].name, name))
            out = sr_hash_bytes(out, &h[k], sizeof h[k]);
    return out;
}

/* Collective over `world`: SR_ERR_INVALID_ARG, the same on every rank, naming
 * the settings that differ and the first rank that differs from rank 0. */
static int check_settings(sr_comm_t world, const struct sr_train_config *cfg)
{
    int W = sr_comm_size(world), rc = SR_OK, bad_rank = -1, n_bad = 0, n_names = 0;
    uint64_t mine[N_HASHES];
    uint64_t *all = sr_calloc((size_t)W * N_HASHES, sizeof *all);
    char names[768] = "";
    size_t len = 0;
    setting_hashes(cfg, mine);
    sr_comm_all_gather(world, mine, all, N_HASHES, SR_DTYPE_I64, NULL, NULL);
    for (int k = 0; k < N_HASHES; k++) {
        int first = -1;
        for (int p = 1; p < W && first < 0; p++)
            if (all[(size_t)p * N_HASHES + k] != all[k])
                first = p;
        if (first < 0 || (k == H_ALL && n_bad > 0))
            continue;
        if (bad_rank < 0)
            bad_rank = first;
        /* one name once (--bot-mlp has two fields), at most what fits */
        if (!strstr(names, hash_name(k)) && len + strlen(hash_name(k)) + 3 < sizeof names) {
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "",
                                    hash_name(k));
            n_names++;
        }
        n_bad++;
    }
    if (n_bad)
        rc = sr_error_set(SR_ERR_INVALID_ARG,
                          "ranks run different jobs: %s differ%s between rank 0 and rank %d; "
                          "HINT: launch every rank with the same flags, config file and "
                          "environment",
                          names, n_names == 1 ? "s" : "", bad_rank);
    sr_free(all);
    return rc;
}

/* --comm on an MPI world: keep MPI, or move the world to NCCL (the MPI world
 * is freed: the NCCL world keeps its own dup of it). Collective: every rank
 * decides alike (same flags, same build, one GPU check over the world). */
static int choose_transport(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    const int nccl = cfg->comm == SR_COMM_CHOICE_NCCL;
    if (strcmp(sr_comm_backend_name(t->world), "mpi") != 0 || cfg->comm == SR_COMM_CHOICE_MPI)
        return SR_OK;
    if (nccl && cfg->link_gb_per_s > 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--emulate-link shapes the MPI transport; NCCL moves data over the "
                            "real link (emulated nodes on one host: loopback sockets). HINT: "
                            "--comm mpi with --emulate-link, or leave --emulate-link out");
    if (!nccl && (cfg->link_gb_per_s > 0 || t->dev->kind != SR_DEVICE_CUDA || !sr_comm_has_nccl()))
        return SR_OK;
    int a = 0, b = 0;
    if (!nccl && sr_comm_gpu_shared_in_node(t->world, t->dev, &a, &b)) {
        if (t->rank == 0)
            sr_log(SR_LOG_INFO, "comm",
                   "--comm auto: MPI, since ranks %d and %d of node %d drive one GPU (NCCL "
                   "cannot); --ranks-per-node 1 emulates a node per rank for NCCL",
                   a, b, sr_comm_node(t->world));
        return SR_OK;
    }
    sr_comm_t world = NULL;
    int rc = sr_comm_init_nccl(&world, t->world, t->dev);
    if (rc)
        return rc;
    sr_comm_free(t->world);
    t->world = world;
    sr_comm_set_timeout(t->world, cfg->comm_timeout);
    return SR_OK;
}

/* --pipeline auto: none where NCCL ranks take turns on one GPU, else
 * sparse-dist (train_config.h). Collective: every rank resolves alike. */
static void resolve_pipeline(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    if (cfg->pipeline != SR_PIPELINE_AUTO)
        return;
    cfg->pipeline = SR_PIPELINE_SPARSE_DIST;
    int a = 0, b = 0;
    if (strcmp(sr_comm_backend_name(t->world), "nccl") != 0 || cfg->cuda_graphs > 0 ||
        !sr_comm_gpu_shared(t->world, t->dev, &a, &b))
        return;
    cfg->pipeline = SR_PIPELINE_NONE;
    if (t->rank == 0)
        sr_log(SR_LOG_INFO, "train",
               "--pipeline auto: none, since NCCL ranks %d and %d take turns on one GPU (a "
               "collective waiting for its peer holds the GPU for its time slice, so "
               "overlapped exchanges cost more than they hide); --pipeline sparse-dist to "
               "overlap anyway",
               a, b);
}

int sr_trainer_init_comms(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    if (sr_comm_is_mpi_launch() || cfg->ranks_per_node > 0 || cfg->comm == SR_COMM_CHOICE_NCCL) {
        sr_comm_t probe; /* one rank per node: cannot fail on the world size */
        int rc = sr_comm_init_mpi(&probe, NULL, NULL, 1);
        if (rc)
            return rc;
        rc = check_settings(probe, cfg);
        sr_comm_free(probe);
        if (!rc)
            rc = sr_comm_init_mpi(&t->world, NULL, NULL, cfg->ranks_per_node);
        if (rc) {
            sr_comm_finalize();
            return rc;
        }
    } else {
        t->world = sr_comm_init_single();
    }
    if (cfg->link_gb_per_s > 0) { /* before the dups and splits: they share it */
        struct sr_comm_link link = {cfg->link_gb_per_s, cfg->link_latency_us};
        sr_comm_set_link(t->world, &link);
    }
    t->rank = sr_comm_rank(t->world);
    t->world_size = sr_comm_size(t->world);
    sr_comm_set_timeout(t->world, cfg->comm_timeout); /* derived ones inherit it */
    int rc = sr_trainer_select_device(t);
    if (!rc)
        rc = choose_transport(t);
    if (rc)
        return rc;
    resolve_pipeline(t);
    sr_comm_bind_device(t->world, t->dev); /* and its stream order */
    t->sparse = sr_comm_dup(t->world);
    t->input = sr_comm_dup(t->world);
    t->dense = sr_comm_dup(t->world);
    t->node = sr_comm_split_node(t->sparse);
    t->cross = sr_comm_split_cross(t->sparse);
    sr_comm_set_name(t->sparse, "sparse");
    sr_comm_set_name(t->input, "input");
    sr_comm_set_name(t->dense, "dense");
    return SR_OK;
}

void sr_trainer_free_comms(struct sr_trainer *t)
{
    int mpi = t->world && strcmp(sr_comm_backend_name(t->world), "single") != 0;
    sr_comm_free(t->cross);
    sr_comm_free(t->node);
    sr_comm_free(t->dense);
    sr_comm_free(t->input);
    sr_comm_free(t->sparse);
    sr_comm_free(t->world);
    t->world = t->sparse = t->input = t->dense = t->node = t->cross = NULL;
    if (mpi)
        sr_comm_finalize();
}

/* Sum of the counters of every communicator the training step uses. */
void sr_trainer_comm_snapshot(const struct sr_trainer *t, struct sr_comm_counters *out)
{
    memset(out, 0, sizeof *out);
    sr_comm_counters_add(out, sr_comm_counters(t->sparse));
    sr_comm_counters_add(out, sr_comm_counters(t->input));
    sr_comm_counters_add(out, sr_comm_counters(t->node));
    sr_comm_counters_add(out, sr_comm_counters(t->cross));
    sr_comm_counters_add(out, sr_comm_counters(t->dense));
}

static int make_plan(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    struct sr_ebc_config ec;
    int W = t->world_size, L = sr_comm_local_size(t->sparse);
    sr_train_config_ebc(cfg, &ec);
    if (cfg->plan_path[0] && cfg->sharding >= 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "give --plan or --sharding, not both");
    if (cfg->plan_path[0])
        return sr_plan_read(&t->plan, cfg->plan_path, &ec, W, L);
    if (cfg->sharding == SR_SHARDING_TYPE_HYBRID) /* hot rows from the tables' statistics */
        return sr_trainer_plan_hybrid(t);
    if (cfg->sharding >= 0)
        return sr_plan_uniform(&t->plan, &ec, (enum sr_sharding_type)cfg->sharding, W, L);
    if (W == 1) /* one rank, no plan: every table whole here (the EBC's local mode) */
        return sr_plan_uniform(&t->plan, &ec, SR_SHARDING_TYPE_TABLE_WISE, 1, 1);
    return sr_trainer_plan_search(t); /* the planner's, on --topology or the nominal one */
}

int sr_trainer_host_ranks(const struct sr_trainer *t, int *ranks)
{
    int n = 0;
    for (int p = 0; p < t->world_size; p++)
        if (sr_comm_node_of(t->world, p) == sr_comm_node(t->world))
            ranks[n++] = p;
    return n;
}

/* The job against the memory: the host's against every rank on this host
 * (they share it), then this rank's against its device. */
static int check_memory(struct sr_trainer *t)
{
    const uint64_t dev_bytes = t->dev->memory_bytes;
    int *ranks = sr_calloc((size_t)t->world_size, sizeof *ranks);
    int n = sr_trainer_host_ranks(t, ranks);
    int rc = sr_train_config_check_host_memory(t->cfg, t->plan, ranks, n, t->world_size, dev_bytes);
    sr_free(ranks);
    if (rc || !dev_bytes)
        return rc;
    rc = sr_train_config_check_device_memory(t->cfg, t->plan, t->rank, t->world_size, dev_bytes);
    if (rc == SR_ERR_OOM)
        rc = sr_error_set(rc, "%s (the memory meant is that of %s)", sr_error_message(),
                          t->dev->name);
    return rc;
}

/* The plan, then the check that the job fits in memory, before any of it is
 * allocated. Collective: the ranks of one host reach one verdict, but hosts
 * (and devices) differ, so one refusing rank stops them all. */
int sr_trainer_init_plan(struct sr_trainer *t)
{
    /* every collective of make_plan comes before anything that may fail on
     * some ranks only (a --plan or --topology file that differs between
     * hosts), so all ranks reach the agreement */
    int rc = make_plan(t);
    if (t->world_size > 1)
        rc = sr_trainer_agree(t, rc, "the plan", "could not make it");
    if (rc)
        return rc;
    sr_trainer_plan_predict(t);
    rc = check_memory(t);
    if (t->world_size > 1)
        rc = sr_trainer_agree(t, rc, "the memory check", "refused the job");
    return rc;
}

/* The data layout: every file's path and size, in order. */
static uint64_t data_hash(const struct sr_train_config *cfg)
{
    uint64_t h = SR_HASH_INIT;
    for (int i = 0; i < cfg->n_data + cfg->n_eval_data; i++) {
        const char *path =
            i < cfg->n_data ? cfg->data_paths[i] : cfg->eval_data_paths[i - cfg->n_data];
        struct stat st;
        int64_t size = stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
        h = sr_hash_bytes(h, path, strlen(path));
        h = sr_hash_bytes(h, &size, sizeof size);
    }
    return h;
}

/* Every rank must run the same config, plan and data, or all of them stop
 * with the same message. */
int sr_trainer_check_same(struct sr_trainer *t)
{
    /* the settings themselves were compared when the world was made */
    int rc = sr_comm_check_same(t->world, t->plan ? sr_plan_hash(t->plan) : 0, "the plan");
    if (!rc)
        rc = sr_comm_check_same(t->world, data_hash(t->cfg), "the data files and their sizes");
    return rc;
}

int sr_trainer_agree(struct sr_trainer *t, int rc, const char *what, const char *failed)
{
    int64_t mine = rc ? 1 : 0, *all = sr_calloc((size_t)t->world_size, sizeof *all);
    sr_comm_all_gather(t->world, &mine, all, 1, SR_DTYPE_I64, NULL, NULL);
    for (int r = 0; r < t->world_size && !rc; r++)
        if (all[r])
            rc =
                sr_error_set(SR_ERR_DATA, "%s: rank %d %s (its message says why)", what, r, failed);
    sr_free(all);
    return rc;
}

/* ---- the embedding stage ------------------------------------------------------ */

/* Each feature's bound, the largest any rank found: a rank's copy of --data
 * may bound a feature lower than another's, whose ids it would receive. */
void sr_trainer_agree_feature_bounds(struct sr_trainer *t)
{
    const int F = t->cfg->num_features, W = t->world_size;
    if (W == 1)
        return;
    int64_t *all = sr_calloc((size_t)W * F, sizeof *all);
    sr_comm_all_gather(t->world, t->feature_max_values, all, (size_t)F, SR_DTYPE_I64, NULL, NULL);
    for (int r = 0; r < W; r++)
        for (int f = 0; f < F; f++)
            if (all[(size_t)r * F + f] > t->feature_max_values[f])
                t->feature_max_values[f] = all[(size_t)r * F + f];
    sr_free(all);
}

int sr_trainer_emb_init(struct sr_trainer *t, const struct sr_optim_config *opt)
{
    struct sr_ebc_config ec;
    struct sr_train_config *cfg = t->cfg;
    sr_train_config_ebc(cfg, &ec);
    struct sr_sharded_ebc_comms comms = {.sparse = t->sparse,
                                         .node = t->node,
                                         .cross = t->cross,
                                         .input = t->input,
                                         .pooled_dtype = cfg->comm_dtype};
    return sr_sharded_ebc_init(&t->sebc, t->dev, &comms, &ec, t->plan, opt, cfg->batch_size,
                               t->batch.max_values, t->feature_max_values, cfg->seed);
}

void sr_trainer_emb_free(struct sr_trainer *t)
{
    sr_sharded_ebc_free(t->sebc);
    sr_plan_free(t->plan);
    t->sebc = NULL;
    t->plan = NULL;
}

int sr_trainer_emb_forward(struct sr_trainer *t)
{
    return sr_sharded_ebc_forward(t->sebc, &t->batch.kjt, t->pooled, t->streams.compute);
}

float *sr_trainer_emb_dp_grads(struct sr_trainer *t, size_t *n)
{
    *n = 0;
    return sr_sharded_ebc_dp_grad_buffer(t->sebc, n);
}

void sr_trainer_emb_dp_update(struct sr_trainer *t, float lr, int64_t step, sr_stream_t stream)
{
    sr_sharded_ebc_dp_update(t->sebc, lr, step, stream);
}

/* ---- weights of a sharded model ------------------------------------------------ */

/* Collective: every table is gathered to rank 0, which writes the file with
 * the dense parameters (DESIGN.md's tensor names). The fallback of
 * sr_trainer_save_sharded_weights (weights_sharded.c) when the ranks do not
 * share a file system. */
int sr_trainer_gather_save_weights(struct sr_trainer *t, const char *path)
{
    const struct sr_train_config *cfg = t->cfg;
    int n_dense = sr_dlrm_num_tensors(t->dlrm), n = n_dense + cfg->num_tables, rc = SR_OK;
    struct sr_st_tensor *ts = sr_calloc((size_t)n, sizeof *ts);
    char(*names)[SR_NAME_MAX + 16] = sr_calloc((size_t)cfg->num_tables, sizeof *names);
    size_t n_params;
    float *params = sr_dlrm_params(t->dlrm, &n_params), *pinned = NULL;
    if (t->rank == 0 && !t->dev->host_visible) { /* the dense block through pinned memory */
        pinned = sr_dev_alloc_host(t->dev, sizeof(float) * n_params);
        sr_dev_copy(t->dev, pinned, params, sizeof(float) * n_params, NULL);
        sr_dev_sync(t->dev, NULL);
    }
    for (int i = 0; i < n_dense; i++) {
        float *data;
        sr_dlrm_tensor(t->dlrm, i, &ts[i].name, &ts[i].ndim, ts[i].shape, &data);
        ts[i].data = pinned ? pinned + sr_dlrm_tensor_offset(t->dlrm, i) : data;
    }
    for (int k = 0; k < cfg->num_tables && !rc; k++) {
        const struct sr_table_config *tc = &cfg->tables[k];
        struct sr_st_tensor *e = &ts[n_dense + k];
        float *full =
            t->rank == 0
                ? sr_malloc(sizeof(float) * (size_t)tc->num_embeddings * (size_t)tc->embedding_dim)
                : NULL;
        snprintf(names[k], sizeof names[k], "emb.%s.weight", tc->name);
        *e = (struct sr_st_tensor){.name = names[k],
                                   .ndim = 2,
                                   .shape = {tc->num_embeddings, tc->embedding_dim},
                                   .data = full};
        rc = sr_sharded_ebc_gather_table(t->sebc, k, full);
    }
    if (!rc && t->rank == 0)
        rc = sr_weights_write(path, n, ts, cfg->tables, cfg->num_tables);
    for (int k = 0; k < cfg->num_tables; k++)
        sr_free((void *)ts[n_dense + k].data);
    sr_dev_free_host(t->dev, pinned);
    sr_free(names);
    sr_free(ts);
    return rc;
}
