/*
 * Settings by name: the model, data and optimizer settings that the command
 * line (cli/flags.c), the JSON config (train_config.c) and the workload
 * presets all set, each by one setter that takes the flag's text. A preset is
 * nothing but a list of (setting, text) pairs run through those setters, so
 * `--workload D` means exactly what its flags would mean typed out.
 *
 * --ids-per-feature has two forms:
 *
 *   N | MIN-MAX                every feature: ids_min..ids_max, n_feature_ids 0
 *   A,B,...  (F entries)       feature f: feature_ids_min[f]..feature_ids_max[f],
 *                              each entry N or MIN-MAX, n_feature_ids = F
 *
 * Setting one form clears the other, so a job's config (hashed across ranks)
 * never keeps a stale list. F is checked later (sr_train_config_check), as
 * --table-rows may follow.
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/train_config.h"

#define IDS_MAX (1 << 20) /* ids of one feature in one sample */

static const char *const setting_names[] = {
    "batch-size",    "embedding-dim",
    "bot-mlp",       "top-mlp",
    "interaction",   "dcn-layers",
    "dcn-rank",      "table-rows",
    "pooling",       "ids-per-feature",
    "id-dist",       "optimizer",
    "emb-optimizer", "lr",
    "emb-lr",        "emb-dtype",
    "emb-rounding",  NULL,
};

int sr_train_config_is_setting(const char *name)
{
    for (int i = 0; setting_names[i]; i++)
        if (strcmp(setting_names[i], name) == 0)
            return 1;
    return 0;
}

/* ---- ids per feature -------------------------------------------------------- */

/* One entry "N" or "MIN-MAX" (`len` bytes of s) into [*lo, *hi]; `entry` > 0
 * names its position in a list. */
static int parse_ids_range(const char *what, const char *s, size_t len, int entry, int *lo, int *hi)
{
    char text[32], at[48] = "";
    int64_t a, b;
    int rc;
    if (entry > 0)
        snprintf(at, sizeof at, " (entry %d)", entry);
    if (len == 0 || len >= sizeof text)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%.*s'%s is not N or MIN-MAX", what,
                            (int)(len < 64 ? len : 64), s, at);
    memcpy(text, s, len);
    text[len] = '\0';
    char *dash = strchr(text, '-');
    if (dash)
        *dash = '\0';
    rc = sr_parse_i64(what, text, 0, IDS_MAX, &a);
    b = a;
    if (!rc && dash)
        rc = sr_parse_i64(what, dash + 1, 0, IDS_MAX, &b);
    if (rc)
        return sr_error_set(rc, "%s%s", sr_error_message(), at);
    if (b < a || b == 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "%s: '%.*s'%s; give N >= 1 or MIN-MAX with MAX >= MIN", what, (int)len,
                            s, at);
    *lo = (int)a;
    *hi = (int)b;
    return SR_OK;
}

int sr_parse_ids_range(const char *what, const char *s, int *lo, int *hi)
{
    return parse_ids_range(what, s, strlen(s), 0, lo, hi);
}

int sr_train_config_set_feature_ids(struct sr_train_config *cfg, const char *what, const int *lo,
                                    const int *hi, int n)
{
    if (n < 1 || n > SR_MAX_FEATURES)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: %d entries; give 1 to %d, one per feature",
                            what, n, SR_MAX_FEATURES);
    for (int f = 0; f < n; f++)
        if (lo[f] < 0 || hi[f] < lo[f] || hi[f] < 1 || hi[f] > IDS_MAX)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "%s: entry %d is %d-%d; give N >= 1 or MIN-MAX with MAX >= MIN "
                                "(at most %d)",
                                what, f + 1, lo[f], hi[f], IDS_MAX);
    memset(cfg->feature_ids_min, 0, sizeof cfg->feature_ids_min);
    memset(cfg->feature_ids_max, 0, sizeof cfg->feature_ids_max);
    memcpy(cfg->feature_ids_min, lo, sizeof(int) * (size_t)n);
    memcpy(cfg->feature_ids_max, hi, sizeof(int) * (size_t)n);
    cfg->n_feature_ids = n;
    return SR_OK;
}

static int set_ids_per_feature(struct sr_train_config *cfg, const char *v)
{
    int lo[SR_MAX_FEATURES], hi[SR_MAX_FEATURES];
    const char *flag = "--ids-per-feature";
    int n = 0, rc;
    if (!strchr(v, ',')) { /* one range for every feature */
        if ((rc = sr_parse_ids_range(flag, v, &lo[0], &hi[0])))
            return rc;
        cfg->ids_min = lo[0];
        cfg->ids_max = hi[0];
        cfg->n_feature_ids = 0;
        memset(cfg->feature_ids_min, 0, sizeof cfg->feature_ids_min);
        memset(cfg->feature_ids_max, 0, sizeof cfg->feature_ids_max);
        return SR_OK;
    }
    for (const char *p = v;; n++) {
        size_t len = strcspn(p, ",");
        if (n == SR_MAX_FEATURES)
            return sr_error_set(SR_ERR_INVALID_ARG, "%s: more than %d entries", flag,
                                SR_MAX_FEATURES);
        if ((rc = parse_ids_range(flag, p, len, n + 1, &lo[n], &hi[n])))
            return rc;
        if (!p[len])
            break;
        p += len + 1;
    }
    return sr_train_config_set_feature_ids(cfg, flag, lo, hi, n + 1);
}

int64_t sr_train_config_feature_ids_max(const struct sr_train_config *cfg, int f)
{
    if (cfg->data_ids_max[f] > 0)
        return cfg->data_ids_max[f];
    return cfg->n_feature_ids ? cfg->feature_ids_max[f] : cfg->ids_max;
}

int64_t sr_train_config_ids_per_sample(const struct sr_train_config *cfg)
{
    int64_t sum = 0;
    for (int f = 0; f < cfg->num_features; f++)
        sum += sr_train_config_feature_ids_max(cfg, f);
    return sum;
}

int sr_train_config_synth(const struct sr_train_config *cfg, const int64_t *rows,
                          struct sr_synth_config *out)
{
    int per_feature = cfg->n_feature_ids > 0;
    if (per_feature && cfg->n_feature_ids != cfg->num_features)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--ids-per-feature: %d entries for %d features; HINT: give one "
                            "entry per feature, or a single N or MIN-MAX for all",
                            cfg->n_feature_ids, cfg->num_features);
    *out = (struct sr_synth_config){.seed = cfg->seed,
                                    .num_dense = cfg->num_dense,
                                    .num_features = cfg->num_features,
                                    .rows = rows,
                                    .ids_min = cfg->ids_min,
                                    .ids_max = cfg->ids_max,
                                    .feature_ids_min = per_feature ? cfg->feature_ids_min : NULL,
                                    .feature_ids_max = per_feature ? cfg->feature_ids_max : NULL,
                                    .id_dist = cfg->id_dist,
                                    .zipf_s = cfg->zipf_s};
    return SR_OK;
}

/* ---- the other settings ----------------------------------------------------- */

static int set_pooling(struct sr_train_config *cfg, const char *v)
{
    enum sr_pooling p;
    if (strcmp(v, "sum") == 0)
        p = SR_POOLING_SUM;
    else if (strcmp(v, "mean") == 0)
        p = SR_POOLING_MEAN;
    else
        return sr_error_set(SR_ERR_INVALID_ARG, "--pooling: '%s'; choose sum or mean", v);
    for (int t = 0; t < cfg->num_tables; t++)
        cfg->tables[t].pooling = p;
    cfg->pooling_given = 1;
    return SR_OK;
}

static int set_table_rows(struct sr_train_config *cfg, const char *v)
{
    int64_t rows[SR_MAX_TABLES];
    int n;
    int rc = sr_parse_rows("--table-rows", v, rows, &n, SR_MAX_TABLES);
    return rc ? rc : sr_train_config_set_table_rows(cfg, rows, n);
}

/* An integer setting in [min, max] into *out. */
static int set_int(const char *flag, const char *v, int64_t min, int64_t max, int *out)
{
    int64_t x;
    int rc = sr_parse_i64(flag, v, min, max, &x);
    if (!rc)
        *out = (int)x;
    return rc;
}

static int set_number(struct sr_train_config *cfg, const char *name, const char *v)
{
    if (!strcmp(name, "batch-size"))
        return set_int("--batch-size", v, 1, 1 << 24, &cfg->batch_size);
    if (!strcmp(name, "embedding-dim")) {
        int rc = set_int("--embedding-dim", v, 1, 1 << 16, &cfg->embedding_dim);
        for (int t = 0; !rc && t < cfg->num_tables; t++)
            cfg->tables[t].embedding_dim = cfg->embedding_dim;
        return rc;
    }
    if (!strcmp(name, "dcn-layers"))
        return set_int("--dcn-layers", v, 1, SR_DCN_MAX_LAYERS, &cfg->dcn_layers);
    if (!strcmp(name, "dcn-rank")) /* at most n, checked with the model (dlrm.h) */
        return set_int("--dcn-rank", v, 1, 1 << 20, &cfg->dcn_rank);
    if (!strcmp(name, "lr"))
        return sr_parse_f32("--lr", v, &cfg->lr);
    SR_ASSERT(!strcmp(name, "emb-lr")); /* every name of setting_names has its setter */
    return sr_parse_f32("--emb-lr", v, &cfg->emb_lr);
}

int sr_train_config_set(struct sr_train_config *cfg, const char *name, const char *v)
{
    if (!strcmp(name, "optimizer"))
        return sr_optim_kind_parse(v, &cfg->optimizer);
    if (!strcmp(name, "emb-optimizer"))
        return sr_optim_kind_parse(v, &cfg->emb_optimizer);
    if (!strcmp(name, "emb-dtype"))
        return sr_wire_dtype_parse(v, &cfg->emb_dtype)
                   ? sr_error_set(SR_ERR_INVALID_ARG, "--emb-dtype %s: expected fp32, fp16 or bf16",
                                  v)
                   : SR_OK;
    if (!strcmp(name, "emb-rounding")) {
        if (strcmp(v, "nearest") && strcmp(v, "stochastic"))
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "--emb-rounding %s: expected nearest or stochastic", v);
        cfg->emb_rounding = !strcmp(v, "stochastic");
        return SR_OK;
    }
    if (!strcmp(name, "bot-mlp"))
        return sr_parse_widths("--bot-mlp", v, cfg->bot_mlp, &cfg->n_bot, SR_MLP_MAX);
    if (!strcmp(name, "top-mlp"))
        return sr_parse_widths("--top-mlp", v, cfg->top_mlp, &cfg->n_top, SR_MLP_MAX);
    if (!strcmp(name, "interaction"))
        return sr_interaction_parse(v, &cfg->interaction);
    if (!strcmp(name, "table-rows"))
        return set_table_rows(cfg, v);
    if (!strcmp(name, "pooling"))
        return set_pooling(cfg, v);
    if (!strcmp(name, "ids-per-feature"))
        return set_ids_per_feature(cfg, v);
    if (!strcmp(name, "id-dist"))
        return sr_id_dist_parse(v, &cfg->id_dist, &cfg->zipf_s);
    if (!sr_train_config_is_setting(name))
        return sr_error_set(SR_ERR_INVALID_ARG, "--%s: not a model, data or optimizer setting",
                            name);
    return set_number(cfg, name, v);
}

/* ---- workload presets (BENCH.md "Workloads") -------------------------------- */

#define R1M  "1000000,"
#define R1M5 R1M R1M R1M R1M R1M

struct workload_setting {
    const char *name, *value;
};

struct workload {
    const char *name;
    struct workload_setting settings[16]; /* ended by {NULL, NULL} */
};

/*
 * K: Criteo Kaggle's tables, one uniform id per feature, dim 16, the DLRM
 *    reference's MLPs, SGD 0.1 on everything.
 * M: 26 tables of 1M rows, 20 uniform ids per feature, dim 128, SGD 0.1.
 * D: MLPerf DLRM-DCNv2 (Criteo 1TB multi-hot): MLPerf's rows and multi-hot
 *    sizes, Zipf(1.05) ids, DCNv2 with 3 cross layers of rank 512, and the
 *    MLPerf reference's optimizer: Adagrad at lr 0.005 for the MLPs and the
 *    cross layers, row-wise Adagrad at the same lr for the embeddings
 *    (TorchRec's dlrm_main --adagrad --learning_rate 0.005).
 * The batch is per rank (per GPU).
 */
static const struct workload workloads[] = {
    {"K",
     {{"table-rows", "1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,"
                     "27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572"},
      {"pooling", "sum"},
      {"embedding-dim", "16"},
      {"bot-mlp", "13-512-256-64-16"},
      {"top-mlp", "512-256-1"},
      {"interaction", "dot"},
      {"ids-per-feature", "1"},
      {"id-dist", "uniform"},
      {"optimizer", "sgd"},
      {"emb-optimizer", "sgd"},
      {"lr", "0.1"},
      {"batch-size", "2048"},
      {NULL, NULL}}},
    {"M",
     {{"table-rows", R1M5 R1M5 R1M5 R1M5 R1M5 "1000000"},
      {"pooling", "sum"},
      {"embedding-dim", "128"},
      {"bot-mlp", "13-512-256-128"},
      {"top-mlp", "1024-1024-512-256-1"},
      {"interaction", "dot"},
      {"ids-per-feature", "20"},
      {"id-dist", "uniform"},
      {"optimizer", "sgd"},
      {"emb-optimizer", "sgd"},
      {"lr", "0.1"},
      {"batch-size", "16384"},
      {NULL, NULL}}},
    {"D",
     {{"table-rows", "40000000,39060,17295,7424,20265,3,7122,1543,63,40000000,3067956,405282,10,"
                     "2209,11938,155,4,976,14,40000000,40000000,40000000,590152,12973,108,36"},
      {"pooling", "sum"},
      {"embedding-dim", "128"},
      {"bot-mlp", "13-512-256-128"},
      {"top-mlp", "1024-1024-512-256-1"},
      {"interaction", "dcn"},
      {"dcn-layers", "3"},
      {"dcn-rank", "512"},
      {"ids-per-feature", "3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1"},
      {"id-dist", "zipf:1.05"},
      {"optimizer", "adagrad"},
      {"emb-optimizer", "rowwise_adagrad"},
      {"lr", "0.005"},
      {"batch-size", "16384"},
      {NULL, NULL}}},
};

#define N_WORKLOADS ((int)(sizeof workloads / sizeof workloads[0]))

static const struct workload *find_workload(const char *name)
{
    for (int w = 0; w < N_WORKLOADS; w++)
        if (name[0] && !name[1] &&
            (name[0] == workloads[w].name[0] || name[0] == workloads[w].name[0] - 'A' + 'a'))
            return &workloads[w];
    return NULL;
}

const char *sr_workload_setting(const char *workload, const char *name)
{
    const struct workload *w = find_workload(workload);
    for (int i = 0; w && w->settings[i].name; i++)
        if (!strcmp(w->settings[i].name, name))
            return w->settings[i].value;
    return NULL;
}

int sr_train_config_set_workload(struct sr_train_config *cfg, const char *name)
{
    const struct workload *w = find_workload(name);
    if (!w)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--workload: '%s' is not a workload; choose K, M "
                            "or D (docs/user-guide.md)",
                            name);
    /* what a preset leaves to its defaults: the embedding lr follows --lr; the
     * cross layers' defaults where the interaction is dot */
    cfg->emb_lr = -1.0f;
    cfg->dcn_layers = 3;
    cfg->dcn_rank = 0;
    for (int i = 0; w->settings[i].name; i++) {
        int rc = sr_train_config_set(cfg, w->settings[i].name, w->settings[i].value);
        SR_ASSERT(rc == SR_OK); /* a preset is fixed text that its own setters accept */
    }
    snprintf(cfg->workload, sizeof cfg->workload, "%s", w->name);
    return SR_OK;
}
