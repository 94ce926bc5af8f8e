/*
 * The trainer's distributed parts: the communicators (world; sparse, dense,
 * node and cross of their own so sparse and dense traffic never share a
 * queue), the plan (--plan, --sharding, or the default), the start-up check
 * that every rank runs the same job, and the embedding stage, which is the
 * plain EBC on one rank without a plan and the sharded EBC otherwise.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "shardrec/safetensors.h"
#include "train/trainer_internal.h"

int sr_trainer_init_comms(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    if (sr_comm_is_mpi_launch() || cfg->ranks_per_node > 0) {
        int rc = sr_comm_init_mpi(&t->world, NULL, NULL, cfg->ranks_per_node);
        if (rc)
            return rc;
    } else {
        t->world = sr_comm_init_single();
    }
    t->rank = sr_comm_rank(t->world);
    t->world_size = sr_comm_size(t->world);
    t->sparse = sr_comm_dup(t->world);
    t->dense = sr_comm_dup(t->world);
    t->node = sr_comm_split_node(t->sparse);
    t->cross = sr_comm_split_cross(t->sparse);
    return SR_OK;
}

void sr_trainer_free_comms(struct sr_trainer *t)
{
    int mpi = t->world && strcmp(sr_comm_backend_name(t->world), "mpi") == 0;
    sr_comm_free(t->cross);
    sr_comm_free(t->node);
    sr_comm_free(t->dense);
    sr_comm_free(t->sparse);
    sr_comm_free(t->world);
    t->world = t->sparse = t->dense = t->node = t->cross = NULL;
    if (mpi)
        sr_comm_finalize();
}

/* Sum of the counters of every communicator the training step uses. */
void sr_trainer_comm_snapshot(const struct sr_trainer *t, struct sr_comm_counters *out)
{
    memset(out, 0, sizeof *out);
    sr_comm_counters_add(out, sr_comm_counters(t->sparse));
    sr_comm_counters_add(out, sr_comm_counters(t->node));
    sr_comm_counters_add(out, sr_comm_counters(t->cross));
    sr_comm_counters_add(out, sr_comm_counters(t->dense));
}

int sr_trainer_init_plan(struct sr_trainer *t)
{
    struct sr_train_config *cfg = t->cfg;
    struct sr_ebc_config ec;
    int W = t->world_size, L = sr_comm_local_size(t->sparse);
    sr_train_config_ebc(cfg, &ec);
    if (cfg->plan_path[0] && cfg->sharding >= 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "give --plan or --sharding, not both");
    if (cfg->plan_path[0])
        return sr_plan_read(&t->plan, cfg->plan_path, &ec, W, L);
    if (cfg->sharding >= 0)
        return sr_plan_uniform(&t->plan, &ec, (enum sr_sharding_type)cfg->sharding, W, L);
    if (W == 1)
        return SR_OK; /* one rank, no plan: the plain EBC */
    return sr_plan_default(&t->plan, &ec, W, L);
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
    uint64_t h = sr_hash_bytes(SR_HASH_INIT, t->cfg, sizeof *t->cfg);
    int rc = sr_comm_check_same(t->world, h, "the job config: flags and --config file");
    if (!rc)
        rc = sr_comm_check_same(t->world, t->plan ? sr_plan_hash(t->plan) : 0, "the plan");
    if (!rc)
        rc = sr_comm_check_same(t->world, data_hash(t->cfg), "the data files and their sizes");
    return rc;
}

/* ---- the embedding stage ------------------------------------------------------ */

int sr_trainer_emb_init(struct sr_trainer *t, const struct sr_optim_config *opt)
{
    struct sr_ebc_config ec;
    struct sr_train_config *cfg = t->cfg;
    sr_train_config_ebc(cfg, &ec);
    if (!t->plan)
        return sr_ebc_init(&t->ebc, t->dev, &ec, opt, cfg->batch_size, t->batch.max_values,
                           cfg->seed);
    struct sr_sharded_ebc_comms comms = {
        .sparse = t->sparse, .node = t->node, .cross = t->cross, .pooled_dtype = cfg->comm_dtype};
    return sr_sharded_ebc_init(&t->sebc, t->dev, &comms, &ec, t->plan, opt, cfg->batch_size,
                               t->batch.max_values, cfg->seed);
}

void sr_trainer_emb_free(struct sr_trainer *t)
{
    sr_ebc_free(t->ebc);
    sr_sharded_ebc_free(t->sebc);
    sr_plan_free(t->plan);
    t->ebc = NULL;
    t->sebc = NULL;
    t->plan = NULL;
}

int sr_trainer_emb_forward(struct sr_trainer *t)
{
    if (t->sebc)
        return sr_sharded_ebc_forward(t->sebc, &t->batch.kjt, t->pooled);
    return sr_ebc_forward(t->ebc, &t->batch.kjt, t->pooled);
}

void sr_trainer_emb_backward(struct sr_trainer *t, float lr, int64_t step)
{
    if (t->sebc)
        sr_sharded_ebc_backward(t->sebc, t->dpooled, lr, step);
    else
        sr_ebc_backward(t->ebc, t->dpooled, lr, step);
}

float *sr_trainer_emb_dp_grads(struct sr_trainer *t, size_t *n)
{
    *n = 0;
    return t->sebc ? sr_sharded_ebc_dp_grad_buffer(t->sebc, n) : NULL;
}

void sr_trainer_emb_dp_update(struct sr_trainer *t, float lr, int64_t step)
{
    if (t->sebc)
        sr_sharded_ebc_dp_update(t->sebc, lr, step);
}

/* ---- weights of a sharded model ------------------------------------------------ */

/* Collective: every table is gathered to rank 0, which writes the file with
 * the dense parameters (DESIGN.md's tensor names). */
int sr_trainer_save_sharded_weights(struct sr_trainer *t, const char *path)
{
    const struct sr_train_config *cfg = t->cfg;
    int n_dense = sr_dlrm_num_tensors(t->dlrm), n = n_dense + cfg->num_tables, rc = SR_OK;
    struct sr_st_tensor *ts = sr_calloc((size_t)n, sizeof *ts);
    char(*names)[SR_NAME_MAX + 16] = sr_calloc((size_t)cfg->num_tables, sizeof *names);
    for (int i = 0; i < n_dense; i++) {
        float *data;
        sr_dlrm_tensor(t->dlrm, i, &ts[i].name, &ts[i].ndim, ts[i].shape, &data);
        ts[i].data = data;
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
        rc = sr_st_write(path, n, ts);
    for (int k = 0; k < cfg->num_tables; k++)
        sr_free((void *)ts[n_dense + k].data);
    sr_free(names);
    sr_free(ts);
    return rc;
}
