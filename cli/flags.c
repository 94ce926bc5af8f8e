/*
 * Job flags shared by `train` and `gen`: defaults, then --workload K|M|D
 * wherever it stands, then --config FILE, then flags in order (flags win over
 * the file, and both over the workload). Accepts "--flag value" and
 * "--flag=value". Every error is one line naming the flag, exit status 2.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/plan.h"
#include "cli.h"

static const char *const job_flags[] = {"steps",
                                        "batch-size",
                                        "lr",
                                        "emb-lr",
                                        "lr-schedule",
                                        "optimizer",
                                        "emb-optimizer",
                                        "emb-dtype",
                                        "emb-rounding",
                                        "embedding-dim",
                                        "bot-mlp",
                                        "top-mlp",
                                        "interaction",
                                        "dcn-layers",
                                        "dcn-rank",
                                        "table-rows",
                                        "pooling",
                                        "ids-per-feature",
                                        "id-dist",
                                        "seed",
                                        "eval-every",
                                        "eval-samples",
                                        "log-every",
                                        "metrics",
                                        "ranks-per-node",
                                        "comm",
                                        "global-batch-size",
                                        "plan",
                                        "sharding",
                                        "bucket-kib",
                                        "comm-dtype",
                                        "dense-comm-dtype",
                                        "comm-timeout",
                                        "emulate-link",
                                        "device",
                                        "math",
                                        "batch-pool",
                                        "loader-threads",
                                        "plan-sample",
                                        NULL};

/* Flags a user may expect that later versions provide. */
static const char *const not_built[] = {NULL};

/* One write of the whole line, so that lines of several ranks sharing a
 * terminal do not interleave. */
void cli_error(const char *cmd, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    int n = snprintf(line, sizeof line, "shardrec %s: ", cmd);
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

int cli_exit_status(int status)
{
    switch (status) {
    case SR_OK:
        return 0;
    case SR_ERR_INVALID_ARG:
    case SR_ERR_IO:
    case SR_ERR_DATA:
    case SR_ERR_UNSUPPORTED:
    case SR_ERR_OOM:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_FAIL;
    }
}

static int in_list(const char *const *list, const char *name)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

int cli_is_job_flag(const char *name)
{
    return in_list(job_flags, name);
}

int cli_parse_pipeline(struct sr_train_config *cfg, const char *v)
{
    if (!strcmp(v, "none"))
        cfg->pipeline = SR_PIPELINE_NONE;
    else if (!strcmp(v, "sparse-dist"))
        cfg->pipeline = SR_PIPELINE_SPARSE_DIST;
    else if (!strcmp(v, "auto"))
        cfg->pipeline = SR_PIPELINE_AUTO;
    else
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--pipeline: '%s'; choose auto, sparse-dist or none", v);
    return SR_OK;
}

int cli_empty_path(const char *flag)
{
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "--%s: an empty path; HINT: give a file's path, or leave --%s out", flag,
                        flag);
}

int cli_set_path(char *field, size_t cap, const char *flag, const char *v)
{
    if (!*v)
        return cli_empty_path(flag);
    if (strlen(v) >= cap)
        return sr_error_set(SR_ERR_INVALID_ARG, "--%s: path too long", flag);
    snprintf(field, cap, "%s", v);
    return SR_OK;
}

static int set_int(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out)
{
    return sr_parse_i64(flag, v, min, max, out);
}

static int apply_numeric(struct sr_train_config *cfg, const char *name, const char *v)
{
    int64_t x;
    int rc;
    if (!strcmp(name, "steps")) {
        cfg->steps_set = 1;
        return set_int("--steps", v, 1, INT64_MAX / 4, &cfg->steps);
    }
    if (!strcmp(name, "seed")) {
        rc = set_int("--seed", v, 0, INT64_MAX, &x);
        cfg->seed = (uint64_t)x;
        return rc;
    }
    if (!strcmp(name, "eval-every"))
        return set_int("--eval-every", v, 0, INT64_MAX / 4, &cfg->eval_every);
    if (!strcmp(name, "eval-samples"))
        return set_int("--eval-samples", v, 0, (int64_t)1 << 36, &cfg->eval_samples);
    if (!strcmp(name, "log-every"))
        return set_int("--log-every", v, 1, INT64_MAX / 4, &cfg->log_every);
    if (!strcmp(name, "ranks-per-node")) {
        rc = set_int("--ranks-per-node", v, 1, 1 << 20, &x);
        cfg->ranks_per_node = (int)x;
        return rc;
    }
    if (!strcmp(name, "global-batch-size"))
        return set_int("--global-batch-size", v, 1, (int64_t)1 << 31, &cfg->global_batch_size);
    if (!strcmp(name, "comm-timeout")) {
        rc = set_int("--comm-timeout", v, 0, 1 << 30, &x);
        cfg->comm_timeout = (int)x;
        return rc;
    }
    if (!strcmp(name, "bucket-kib")) {
        rc = set_int("--bucket-kib", v, 1, 1 << 22, &x);
        cfg->bucket_kib = (int)x;
        return rc;
    }
    if (!strcmp(name, "loader-threads")) {
        rc = set_int("--loader-threads", v, 0, 1024, &x);
        cfg->loader_threads = (int)x;
        return rc;
    }
    if (!strcmp(name, "plan-sample"))
        return set_int("--plan-sample", v, 1, (int64_t)1 << 30, &cfg->plan_sample);
    if (!strcmp(name, "batch-pool")) {
        rc = set_int("--batch-pool", v, 0, 1 << 16, &x);
        cfg->batch_pool = (int)x;
        return rc;
    }
    return 1;
}

int cli_apply_job_flag(struct sr_train_config *cfg, const char *name, const char *v)
{
    if (sr_train_config_is_setting(name)) /* the model, data and optimizer settings */
        return sr_train_config_set(cfg, name, v);
    int rc = apply_numeric(cfg, name, v);
    if (rc != 1)
        return rc;
    if (!strcmp(name, "lr-schedule")) {
        if (strlen(v) >= sizeof cfg->lr_schedule)
            return sr_error_set(SR_ERR_INVALID_ARG, "--lr-schedule: too long");
        snprintf(cfg->lr_schedule, sizeof cfg->lr_schedule, "%s", v);
        return SR_OK;
    }
    if (!strcmp(name, "sharding")) {
        enum sr_sharding_type type;
        if (sr_sharding_type_parse(v, &type))
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "--sharding: '%s'; choose dp, tw, rw, cw, twrw or hybrid", v);
        cfg->sharding = (int)type;
        return SR_OK;
    }
    if (!strcmp(name, "comm-dtype") || !strcmp(name, "dense-comm-dtype")) {
        enum sr_dtype *dt = name[0] == 'c' ? &cfg->comm_dtype : &cfg->dense_comm_dtype;
        if (sr_wire_dtype_parse(v, dt))
            return sr_error_set(SR_ERR_INVALID_ARG, "--%s: '%s'; choose fp32, fp16 or bf16", name,
                                v);
        return SR_OK;
    }
    if (!strcmp(name, "comm")) {
        if (!strcmp(v, "auto"))
            cfg->comm = SR_COMM_CHOICE_AUTO;
        else if (!strcmp(v, "mpi"))
            cfg->comm = SR_COMM_CHOICE_MPI;
        else if (!strcmp(v, "nccl"))
            cfg->comm = SR_COMM_CHOICE_NCCL;
        else
            return sr_error_set(SR_ERR_INVALID_ARG, "--comm: '%s'; choose auto, mpi or nccl", v);
        return SR_OK;
    }
    if (!strcmp(name, "device")) {
        if (!strcmp(v, "auto"))
            cfg->device = SR_DEVICE_CHOICE_AUTO;
        else if (!strcmp(v, "cpu"))
            cfg->device = SR_DEVICE_CHOICE_CPU;
        else if (!strcmp(v, "cuda"))
            cfg->device = SR_DEVICE_CHOICE_CUDA;
        else
            return sr_error_set(SR_ERR_INVALID_ARG, "--device: '%s'; choose auto, cpu or cuda", v);
        return SR_OK;
    }
    if (!strcmp(name, "math")) {
        if (!strcmp(v, "fp32"))
            cfg->math = SR_MATH_FP32;
        else if (!strcmp(v, "tf32"))
            cfg->math = SR_MATH_TF32;
        else if (!strcmp(v, "bf16"))
            cfg->math = SR_MATH_BF16;
        else
            return sr_error_set(SR_ERR_INVALID_ARG, "--math: '%s'; choose fp32, tf32 or bf16", v);
        return SR_OK;
    }
    if (!strcmp(name, "emulate-link")) {
        struct sr_comm_link link;
        int rc = sr_comm_link_parse("--emulate-link", v, &link);
        cfg->link_gb_per_s = rc ? 0 : link.gb_per_s;
        cfg->link_latency_us = rc ? 0 : link.latency_us;
        return rc;
    }
    if ((!strcmp(name, "plan") || !strcmp(name, "metrics")) && !*v)
        return cli_empty_path(name);
    if (!strcmp(name, "plan")) {
        if (strlen(v) >= sizeof cfg->plan_path)
            return sr_error_set(SR_ERR_INVALID_ARG, "--plan: path too long");
        snprintf(cfg->plan_path, sizeof cfg->plan_path, "%s", v);
        return SR_OK;
    }
    if (!strcmp(name, "metrics")) {
        if (strlen(v) >= sizeof cfg->metrics_path)
            return sr_error_set(SR_ERR_INVALID_ARG, "--metrics: path too long");
        snprintf(cfg->metrics_path, sizeof cfg->metrics_path, "%s", v);
        return SR_OK;
    }
    return 1;
}

/* Split argv[*i] into name and value ("--name=value" or "--name value"). */
static int next_flag(int argc, char **argv, int *i, const char *cmd, char *name, size_t cap,
                     const char **value, int wants_value)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg) - 2;
    if (len >= cap) {
        cli_error(cmd, "flag '%s' is too long", arg);
        return CLI_EXIT_USAGE;
    }
    memcpy(name, arg + 2, len);
    name[len] = '\0';
    *value = eq ? eq + 1 : NULL;
    if (wants_value && !*value) {
        if (*i + 1 >= argc) {
            cli_error(cmd, "--%s needs a value; HINT: shardrec %s --help", name, cmd);
            return CLI_EXIT_USAGE;
        }
        *value = argv[++*i];
    }
    return 0;
}

/* --data A [B ...]: the value and every following argument up to the next flag. */
static int add_data_paths(struct sr_train_config *cfg, const char *name, const char *first,
                          int argc, char **argv, int *i, const char *cmd)
{
    int eval = strcmp(name, "eval-data") == 0;
    int *n = eval ? &cfg->n_eval_data : &cfg->n_data;
    char(*paths)[SR_PATH_MAX] = eval ? cfg->eval_data_paths : cfg->data_paths;
    const char *v = first;
    for (;;) {
        if (*n == SR_MAX_DATA_FILES || strlen(v) >= SR_PATH_MAX) {
            cli_error(cmd, "--%s: too many files (max %d) or a path too long", name,
                      SR_MAX_DATA_FILES);
            return 1;
        }
        snprintf(paths[(*n)++], SR_PATH_MAX, "%s", v);
        if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0)
            return 0;
        v = argv[++*i];
    }
}

/* --workload NAME, wherever it stands, is applied first (before --config and
 * every other flag, which therefore win); the last one given counts. */
static int apply_workload(int argc, char **argv, struct sr_train_config *cfg, const char *cmd)
{
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--workload") == 0 && i + 1 < argc)
            name = argv[++i];
        else if (strncmp(argv[i], "--workload=", 11) == 0)
            name = argv[i] + 11;
        else if (strcmp(argv[i], "--workload") == 0) {
            cli_error(cmd, "--workload needs a value: K, M or D");
            return CLI_EXIT_USAGE;
        }
    }
    if (name && sr_train_config_set_workload(cfg, name)) {
        cli_error(cmd, "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* The value of the --config at argv[i] ("--config FILE" or "--config=FILE"),
 * NULL when argv[i] is no --config, "" when its value is missing. */
static const char *config_at(int argc, char **argv, int i)
{
    if (strcmp(argv[i], "--config") == 0)
        return i + 1 < argc ? argv[i + 1] : "";
    return strncmp(argv[i], "--config=", 9) == 0 ? argv[i] + 9 : NULL;
}

int cli_config_paths(int argc, char **argv, const char **paths, int cap)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *path = config_at(argc, argv, i);
        if (path && *path && n < cap)
            paths[n++] = path;
    }
    return n;
}

static int load_config_file(int argc, char **argv, struct sr_train_config *cfg, const char *cmd)
{
    for (int i = 1; i < argc; i++) {
        const char *path = config_at(argc, argv, i);
        if (path && !*path) {
            cli_error(cmd, "--config needs a file");
            return CLI_EXIT_USAGE;
        }
        if (path && sr_train_config_load_json(cfg, path)) {
            cli_error(cmd, "%s", sr_error_message());
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

int cli_parse_job(int argc, char **argv, struct sr_train_config *cfg,
                  int (*other)(void *ctx, const char *name, const char *value), void *ctx,
                  const char *const *value_flags)
{
    const char *cmd = argv[0];
    char name[64];
    const char *value;
    sr_train_config_default(cfg);
    if (apply_workload(argc, argv, cfg, cmd) || load_config_file(argc, argv, cfg, cmd))
        return CLI_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return -1;
        if (strncmp(argv[i], "--", 2) != 0) {
            cli_error(cmd, "unexpected argument '%s'; HINT: shardrec %s --help", argv[i], cmd);
            return CLI_EXIT_USAGE;
        }
        const char *bare = argv[i] + 2;
        size_t blen = strcspn(bare, "=");
        snprintf(name, sizeof name, "%.*s", (int)(blen < 63 ? blen : 63), bare);
        int wants = cli_is_job_flag(name) || !strcmp(name, "data") || !strcmp(name, "eval-data") ||
                    in_list(not_built, name) || !strcmp(name, "config") ||
                    !strcmp(name, "workload") || (value_flags && in_list(value_flags, name));
        if (next_flag(argc, argv, &i, cmd, name, sizeof name, &value, wants))
            return CLI_EXIT_USAGE;
        if (!strcmp(name, "config") || !strcmp(name, "workload"))
            continue; /* applied before the other flags */
        if (!strcmp(name, "resume") && !value && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
            value = argv[++i]; /* --resume [PATH]: its value is optional */
        if (!strcmp(name, "data") || !strcmp(name, "eval-data")) {
            if (add_data_paths(cfg, name, value, argc, argv, &i, cmd))
                return CLI_EXIT_USAGE;
            continue;
        }
        if (in_list(not_built, name)) {
            cli_error(cmd, "--%s is not built yet in this version of shardrec", name);
            return CLI_EXIT_USAGE;
        }
        int rc = cli_apply_job_flag(cfg, name, value);
        if (rc == 1)
            rc = other ? other(ctx, name, value) : 1;
        if (rc == 1 && value && other && other(ctx, name, NULL) == 0) { /* --cuda-graphs=1 */
            cli_error(cmd, "--%s is a switch and takes no value; HINT: give --%s alone", name,
                      name);
            return CLI_EXIT_USAGE;
        }
        if (rc == 1) {
            cli_error(cmd, "unknown flag --%s; HINT: shardrec %s --help", name, cmd);
            return CLI_EXIT_USAGE;
        }
        if (rc) {
            cli_error(cmd, "%s", sr_error_message());
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}
