/* `shardrec eval MODEL`: evaluate a checkpoint or a weights file on data,
 * without training (the trainer in eval-only mode: train_config.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "shardrec/atomic_file.h"
#include "shardrec/checkpoint.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/trainer.h"
#include "shardrec/weights_io.h"
#include "cli.h"

static void eval_help(void)
{
    printf("usage: shardrec eval MODEL [flags]\n"
           "\n"
           "Evaluates a trained model, without training. MODEL is a checkpoint (a\n"
           "DIR/step-NNNNNNNN folder, or a --checkpoint-dir DIR: its newest complete\n"
           "checkpoint) or a safetensors weights file (train --save-weights, shardrec export).\n"
           "Give the model flags of the run that trained it (--workload, --config,\n"
           "--table-rows, --embedding-dim, --bot-mlp, --top-mlp, --interaction, --dcn-*,\n"
           "--pooling); a checkpoint checks them against its record, a weights file\n"
           "against its tensors' names and shapes and the pooling it records. When no\n"
           "--pooling, config table \"pooling\" or --workload sets it, eval takes each\n"
           "table's pooling from the weights file or the checkpoint (one that records\n"
           "none, from an older version or from PyTorch: sum). A --config of the training\n"
           "run may be given whole: its training settings (steps, optimizers, learning\n"
           "rates, its metrics file) are not used; training flags on the command line are\n"
           "refused. Any world size and plan read a checkpoint (one of manifest version 1,\n"
           "written before plans were recorded: its own world size and plan only).\n"
           "\n"
           "data\n"
           "  --data FILE...         evaluate every sample of these files, in order (Criteo\n"
           "                         TSV, plain or .gz, or binary)\n"
           "  --skip-bad-lines       count bad lines by kind and report them instead of stopping\n"
           "  (without --data: the job's held-back synthetic samples, as train evaluates:\n"
           "  --eval-samples N of them, default 131072, drawn with --seed, --ids-per-feature\n"
           "  and --id-dist; the summary adds the hidden teacher's AUC, the ceiling)\n"
           "output (the metrics go to standard output)\n"
           "  --out FILE             one line a sample, in the data's order: its label, a\n"
           "                         tab, its predicted probability (%%.9g); written whole\n"
           "  --metrics FILE         the metrics as one JSON object: model, samples, auc,\n"
           "                         logloss, ne, accuracy, positive_rate (full precision;\n"
           "                         from the command line only)\n"
           "  --progress, --no-progress  live progress line (default: when stderr is a terminal)\n"
           "run\n"
           "  --batch-size N         samples a rank evaluates at once (default 2048)\n"
           "  --global-batch-size G  or G across the ranks\n"
           "  --device auto|cpu|cuda, --math fp32|tf32|bf16, --emb-dtype fp32|fp16|bf16\n"
           "  --sharding TYPE, --plan FILE, --topology NAME|FILE, --comm, --ranks-per-node\n"
           "                         as in train (start many ranks with mpirun)\n"
           "\n"
           "Metrics: exact AUC over every sample, log loss, NE (log loss over the entropy of\n"
           "the positive rate), accuracy at 0.5; the same as train's evaluation.\n"
           "Memory: every rank holds every prediction (about 24 bytes a sample of the whole\n"
           "set, for the exact AUC); an evaluation larger than a rank's share of the host's\n"
           "memory is refused before it starts.\n"
           "Exit status: 0 done; 1 an output could not be written; 2 bad flags, model or\n"
           "data, or too many samples for the memory (the message names what and where).\n");
}

struct eval_args {
    struct sr_train_config *cfg;
    char out[SR_PATH_MAX];
    int pooling_taken; /* tables whose pooling came from the model's record */
};

static int other_flag(void *ctx, const char *name, const char *value)
{
    struct eval_args *a = ctx;
    struct sr_train_config *cfg = a->cfg;
    if (!strcmp(name, "out") && value)
        return cli_set_path(a->out, sizeof a->out, name, value);
    if (!strcmp(name, "topology") && value) {
        if (cfg->n_topologies == SR_MAX_TOPOLOGIES)
            return sr_error_set(SR_ERR_INVALID_ARG, "--topology: at most %d", SR_MAX_TOPOLOGIES);
        return cli_set_path(cfg->topologies[cfg->n_topologies++], SR_PATH_MAX, name, value);
    }
    if (value)
        return 1;
    if (!strcmp(name, "skip-bad-lines"))
        cfg->skip_bad_lines = 1;
    else if (!strcmp(name, "progress"))
        cfg->progress = 1;
    else if (!strcmp(name, "no-progress"))
        cfg->progress = 0;
    else
        return 1;
    return SR_OK;
}

/* Flags that only training reads: refused on eval's command line (a
 * training --config's keys for them are ignored). */
static const char *const training_flags[] = {
    "steps",          "lr",         "emb-lr",    "lr-schedule", "optimizer",  "emb-optimizer",
    "emb-rounding",   "eval-every", "log-every", "batch-pool",  "bucket-kib", "dense-comm-dtype",
    "loader-threads", NULL};

/* The value of argv's flag --NAME or --NAME=... ("" for --NAME), or NULL. */
static const char *flag_named(const char *arg, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(arg, "--", 2) || strncmp(arg + 2, name, n) || (arg[2 + n] && arg[2 + n] != '='))
        return NULL;
    return arg[2 + n] == '=' ? arg + 3 + n : arg + 2 + n;
}

static int refuse_training_flags(int argc, char **argv)
{
    char names[512] = "";
    size_t len = 0;
    int n = 0;
    for (int i = 1; i < argc; i++)
        for (int k = 0; training_flags[k]; k++)
            if (flag_named(argv[i], training_flags[k]) && len + 32 < sizeof names) {
                len += (size_t)snprintf(names + len, sizeof names - len, "%s--%s", len ? ", " : "",
                                        training_flags[k]);
                n++;
            }
    if (!n)
        return SR_OK;
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "eval does not train: %s %s for training; HINT: drop %s (a training "
                        "--config's keys for them are ignored)",
                        names, n > 1 ? "are" : "is", n > 1 ? "them" : "it");
}

/* --metrics FILE from the command line alone (a training --config's
 * "metrics" key names the training's log, which eval must not replace). */
static void metrics_flag(int argc, char **argv, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *v = flag_named(argv[i], "metrics");
        if (v && !*v && i + 1 < argc)
            v = argv[++i];
        if (v && *v)
            snprintf(out, cap, "%s", v);
    }
}

/* MODEL: a folder is a checkpoint (or a checkpoint dir), a file weights. */
static int set_model(struct sr_train_config *cfg, const char *model)
{
    struct stat st;
    if (!*model || strlen(model) >= SR_PATH_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG, "MODEL '%s': an empty or too long path", model);
    if (stat(model, &st) != 0)
        return sr_error_set(SR_ERR_IO,
                            "MODEL %s: no such file or folder; HINT: give a checkpoint "
                            "(DIR/step-NNNNNNNN or the --checkpoint-dir) or a weights file",
                            model);
    if (S_ISDIR(st.st_mode)) {
        cfg->resume = 1;
        snprintf(cfg->resume_path, sizeof cfg->resume_path, "%s", model);
    } else if (S_ISREG(st.st_mode)) {
        snprintf(cfg->init_weights_path, sizeof cfg->init_weights_path, "%s", model);
    } else {
        return sr_error_set(SR_ERR_IO,
                            "MODEL %s: neither a folder (a checkpoint) nor a regular file (a "
                            "weights file)",
                            model);
    }
    return SR_OK;
}

/* The job's files are the data to evaluate; the trainer reads them as its
 * evaluation files, and never trains. */
static int to_eval_job(struct sr_train_config *cfg)
{
    if (cfg->n_eval_data)
        return sr_error_set(SR_ERR_INVALID_ARG, "--eval-data is train's; HINT: eval reads the "
                                                "files of --data");
    memcpy(cfg->eval_data_paths, cfg->data_paths, sizeof cfg->data_paths);
    cfg->n_eval_data = cfg->n_data;
    cfg->n_data = 0;
    if (!cfg->n_eval_data && cfg->eval_samples <= 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "--eval-samples 0 and no --data: nothing to "
                                                "evaluate; HINT: give --data FILE...");
    cfg->eval_only = 1;
    cfg->optimizer = cfg->emb_optimizer = SR_OPTIM_SGD; /* no optimizer state, any sharding */
    cfg->pipeline = SR_PIPELINE_NONE; /* no loader thread: there are no training batches */
    cfg->cuda_graphs = -1;
    return SR_OK;
}

/* The model's recorded pooling (a weights file's __metadata__, docs/weights.md
 * "Metadata"; a checkpoint's manifest): taken when the job gave none, else
 * compared before the model is built. */
static int model_pooling(struct eval_args *a)
{
    struct sr_train_config *cfg = a->cfg;
    const int adopt = !cfg->pooling_given;
    int recorded = 0, rc = SR_OK;
    if (cfg->init_weights_path[0])
        rc = sr_weights_pooling_apply(cfg->init_weights_path, cfg->tables, cfg->num_tables, adopt,
                                      &recorded);
    else if (cfg->resume_path[0])
        rc = sr_checkpoint_pooling_apply(cfg->resume_path, cfg->tables, cfg->num_tables, adopt,
                                         &recorded);
    a->pooling_taken = adopt ? recorded : 0;
    return rc;
}

/* "pooling mean, as MODEL records it" when eval took it from the file. */
static void print_pooling(const struct sr_train_config *cfg, const char *model, int taken)
{
    int same = 1;
    if (!taken)
        return;
    for (int t = 1; t < cfg->num_tables; t++)
        same &= cfg->tables[t].pooling == cfg->tables[0].pooling;
    printf("pooling %s, as %s records it\n",
           same ? sr_pooling_name(cfg->tables[0].pooling) : "per table", model);
}

/* No output names an input or the other output; both can be written. */
static int check_outputs(int argc, char **argv, const struct sr_train_config *cfg,
                         const char *model, const char *out, const char *metrics)
{
    enum { MAX = SR_MAX_DATA_FILES + 16 };
    struct sr_named_file f[MAX];
    const char *configs[8];
    int n = 0, n_config = cli_config_paths(argc, argv, configs, 8);
    for (int i = 0; i < cfg->n_eval_data; i++)
        f[n++] = (struct sr_named_file){"--data", cfg->eval_data_paths[i], 0};
    for (int i = 0; i < n_config; i++)
        f[n++] = (struct sr_named_file){"--config", configs[i], 0};
    f[n++] = (struct sr_named_file){"MODEL", model, 0};
    f[n++] = (struct sr_named_file){"--plan", cfg->plan_path, 0};
    f[n++] = (struct sr_named_file){"--out", out, 1};
    f[n++] = (struct sr_named_file){"--metrics", metrics, 1};
    int rc = sr_files_check_distinct(f, n);
    if (!rc && out[0])
        rc = sr_output_path_check(out, "--out", SR_OUTPUT_ATOMIC);
    if (!rc && metrics[0])
        rc = sr_output_path_check(metrics, "--metrics", SR_OUTPUT_ATOMIC);
    return rc;
}

/* SR_ERR_WRITE (exit status 1: the evaluation ran) naming the output. */
static int write_failed(const char *flag, const char *path)
{
    return sr_error_set(SR_ERR_WRITE, "%s %s: %s", flag, path, sr_error_message());
}

static int write_predictions(const char *path, const float *prob, const float *labels, int64_t n)
{
    struct sr_atomic_file af = {0};
    if (sr_atomic_file_open(&af, path))
        return write_failed("--out", path);
    for (int64_t i = 0; i < n; i++)
        if (fprintf(af.f, "%d\t%.9g\n", labels[i] > 0.5f, (double)prob[i]) < 0) {
            int e = errno;
            sr_atomic_file_abort(&af);
            sr_error_set(SR_ERR_IO, "cannot write (%s); HINT: check the free disk space",
                         strerror(e));
            return write_failed("--out", path);
        }
    return sr_atomic_file_commit(&af) ? write_failed("--out", path) : SR_OK;
}

static int write_metrics(const char *path, const char *model, const struct sr_eval_metrics *m)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddNumberToObject(root, "samples", (double)m->n);
    cJSON_AddNumberToObject(root, "auc", m->auc);
    cJSON_AddNumberToObject(root, "logloss", m->logloss);
    cJSON_AddNumberToObject(root, "ne", m->ne);
    cJSON_AddNumberToObject(root, "accuracy", m->accuracy);
    cJSON_AddNumberToObject(root, "positive_rate", m->positive_rate);
    return cli_bench_write_json(path, root) ? write_failed("--metrics", path) : SR_OK;
}

static void print_metrics(struct sr_trainer *t, const struct sr_train_config *cfg,
                          const char *model, const struct sr_eval_metrics *m)
{
    double teacher, floor;
    if (cfg->n_eval_data)
        printf("eval %s on %lld samples of %s%s\n", model, (long long)m->n, cfg->eval_data_paths[0],
               cfg->n_eval_data > 1 ? " ..." : "");
    else
        printf("eval %s on %lld held-back synthetic samples\n", model, (long long)m->n);
    printf("AUC %.6f  logloss %.6f  NE %.6f  accuracy %.6f  positive rate %.6f\n", m->auc,
           m->logloss, m->ne, m->accuracy, m->positive_rate);
    sr_trainer_eval_bounds(t, &teacher, &floor);
    if (!isnan(teacher))
        printf("AUC: model %.4f | teacher ceiling %.4f | dense-only floor %.4f\n", m->auc, teacher,
               floor);
}

/* Rank 0 prints and writes the outputs; the others have nothing to do. */
static int report(struct sr_trainer *t, const struct sr_train_config *cfg, const char *model,
                  const struct eval_args *a, const char *metrics, const struct sr_eval_metrics *m)
{
    const float *prob, *labels;
    int64_t n = sr_trainer_eval_predictions(t, &prob, &labels);
    int rc = SR_OK;
    if (sr_trainer_rank(t) != 0)
        return SR_OK;
    char first[1024] = "";
    print_pooling(cfg, model, a->pooling_taken);
    print_metrics(t, cfg, model, m);
    if (a->out[0] && (rc = write_predictions(a->out, prob, labels, n)))
        snprintf(first, sizeof first, "%s", sr_error_message());
    if (metrics[0] && write_metrics(metrics, model, m)) /* the other output is still written */
        return rc ? sr_error_set(SR_ERR_WRITE, "%s; %s", first, sr_error_message()) : SR_ERR_WRITE;
    return rc;
}

static int run(struct sr_train_config *cfg, const char *model, const struct eval_args *a,
               const char *metrics)
{
    struct sr_trainer *t;
    struct sr_eval_metrics m;
    int rc = sr_trainer_init(&t, cfg, stderr);
    if (rc)
        return rc;
    if (cfg->init_weights_path[0])
        rc = sr_trainer_load_weights(t, cfg->init_weights_path);
    if (!rc)
        rc = sr_trainer_evaluate(t, &m);
    if (!rc)
        rc = report(t, cfg, model, a, metrics, &m);
    sr_trainer_free(t);
    return rc;
}

int cli_eval(int argc, char **argv)
{
    static const char *const value_flags[] = {"out", "topology", NULL};
    static struct sr_train_config cfg;
    static char *rest[1024];
    struct eval_args args = {.cfg = &cfg};
    char metrics[SR_PATH_MAX];
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        eval_help();
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-' || argc > (int)(sizeof rest / sizeof rest[0])) {
        cli_error("eval", "give the model first; HINT: shardrec eval MODEL [flags], MODEL a "
                          "checkpoint folder or a weights file (shardrec eval --help)");
        return CLI_EXIT_USAGE;
    }
    const char *model = argv[1];
    rest[0] = argv[0];
    for (int i = 2; i < argc; i++)
        rest[i - 1] = argv[i];
    int rc = cli_parse_job(argc - 1, rest, &cfg, other_flag, &args, value_flags);
    if (rc < 0) {
        eval_help();
        return 0;
    }
    if (rc)
        return rc;
    metrics_flag(argc - 1, rest, metrics, sizeof metrics);
    cfg.metrics_path[0] = '\0'; /* eval writes its own, whole */
    if (refuse_training_flags(argc - 1, rest) || set_model(&cfg, model) || to_eval_job(&cfg) ||
        model_pooling(&args) || sr_train_config_check(&cfg) ||
        check_outputs(argc - 1, rest, &cfg, model, args.out, metrics)) {
        cli_error("eval", "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    if ((rc = run(&cfg, model, &args, metrics))) {
        cli_error("eval", "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    return 0;
}
