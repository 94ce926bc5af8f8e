/*
 * Training job configuration: the embedded default job, strict parsers for
 * numbers and lists, the JSON config file (read with cJSON), and the check
 * that the pieces fit. Flags are applied by the CLI after the file, so flags
 * win.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/train_config.h"

/* Workload K's 26 table sizes (Criteo Kaggle). */
static const int64_t k_rows[26] = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};

void sr_train_config_default(struct sr_train_config *cfg)
{
    static const int bot[] = {13, 512, 256, 64, 16};
    static const int top[] = {512, 256, 1};
    int64_t rows[26];
    memset(cfg, 0, sizeof *cfg);
    cfg->embedding_dim = 16;
    memcpy(cfg->bot_mlp, bot, sizeof bot);
    cfg->n_bot = 5;
    memcpy(cfg->top_mlp, top, sizeof top);
    cfg->n_top = 3;
    for (int i = 0; i < 26; i++)
        rows[i] = k_rows[i] < 100000 ? k_rows[i] : 100000;
    sr_train_config_set_table_rows(cfg, rows, 26);
    cfg->seed = 1234;
    cfg->num_dense = 13;
    cfg->ids_min = cfg->ids_max = 1;
    cfg->id_dist = SR_ID_DIST_ZIPF;
    cfg->zipf_s = 1.05;
    cfg->steps = 1000;
    cfg->batch_size = 2048;
    cfg->lr = 0.1f;
    cfg->emb_lr = -1.0f; /* follow lr unless set */
    snprintf(cfg->lr_schedule, sizeof cfg->lr_schedule, "constant");
    cfg->optimizer = SR_OPTIM_SGD;
    cfg->emb_optimizer = SR_OPTIM_ROWWISE_ADAGRAD;
    cfg->eval_every = 250;
    cfg->eval_samples = 1 << 17;
    cfg->log_every = 50;
    cfg->progress = -1;
    cfg->sharding = -1;
    cfg->bucket_kib = 4096;
    cfg->comm_dtype = SR_DTYPE_F32;
    cfg->dense_comm_dtype = SR_DTYPE_F32;
}

int sr_train_config_set_table_rows(struct sr_train_config *cfg, const int64_t *rows, int n)
{
    enum sr_pooling pooling = cfg->num_tables ? cfg->tables[0].pooling : SR_POOLING_SUM;
    if (n < 1 || n > SR_MAX_TABLES || n > SR_MAX_FEATURES)
        return sr_error_set(SR_ERR_INVALID_ARG, "--table-rows: %d tables; give 1 to %d", n,
                            SR_MAX_TABLES);
    cfg->num_tables = n;
    cfg->num_features = n;
    for (int t = 0; t < n; t++) {
        struct sr_table_config *tc = &cfg->tables[t];
        memset(tc, 0, sizeof *tc);
        snprintf(tc->name, sizeof tc->name, "t%d", t);
        tc->num_embeddings = rows[t];
        tc->embedding_dim = cfg->embedding_dim;
        tc->pooling = pooling;
        tc->id_policy = SR_ID_POLICY_ERROR;
        snprintf(cfg->feature_names[t], SR_NAME_MAX, "f%d", t);
        cfg->feature_table[t] = t;
    }
    return SR_OK;
}

/* ---- strict parsers --------------------------------------------------------- */

int sr_parse_i64(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s' is not an integer", flag, s);
    if (v < min || v > max)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: %lld is out of range [%lld, %lld]", flag, v,
                            (long long)min, (long long)max);
    *out = v;
    return SR_OK;
}

int sr_parse_f32(const char *flag, const char *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v))
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s' is not a finite number", flag, s);
    *out = (float)v;
    return SR_OK;
}

/* Split s at `sep` and parse each piece as an integer in [min, max]. */
static int parse_list(const char *flag, const char *s, char sep, int64_t min, int64_t max,
                      int64_t *vals, int *n, int cap)
{
    char piece[64];
    int count = 0;
    const char *p = s;
    for (;;) {
        const char *q = strchr(p, sep);
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 0 || len >= sizeof piece)
            return sr_error_set(SR_ERR_INVALID_ARG, "%s: entry %d of '%s' is empty or too long",
                                flag, count + 1, s);
        if (count == cap)
            return sr_error_set(SR_ERR_INVALID_ARG, "%s: more than %d entries", flag, cap);
        memcpy(piece, p, len);
        piece[len] = '\0';
        int rc = sr_parse_i64(flag, piece, min, max, &vals[count]);
        if (rc)
            return sr_error_set(rc, "%s (entry %d)", sr_error_message(), count + 1);
        count++;
        if (!q)
            break;
        p = q + 1;
    }
    *n = count;
    return SR_OK;
}

int sr_parse_widths(const char *flag, const char *s, int *widths, int *n, int max)
{
    int64_t vals[SR_MLP_MAX];
    int rc = parse_list(flag, s, '-', 1, 1 << 20, vals, n, max < SR_MLP_MAX ? max : SR_MLP_MAX);
    for (int i = 0; rc == SR_OK && i < *n; i++)
        widths[i] = (int)vals[i];
    return rc;
}

int sr_parse_rows(const char *flag, const char *s, int64_t *rows, int *n, int max)
{
    return parse_list(flag, s, ',', 1, (int64_t)1 << 40, rows, n, max);
}

/* ---- JSON config ------------------------------------------------------------ */

static int json_err(const char *path, const char *key, const char *what)
{
    return sr_error_set(SR_ERR_INVALID_ARG, "%s: key \"%s\": %s", path, key, what);
}

static int json_int(const cJSON *root, const char *path, const char *key, int64_t min, int64_t max,
                    int64_t *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it)
        return 1; /* absent: keep the current value */
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble))
        return json_err(path, key, "expected an integer");
    if (it->valuedouble < (double)min || it->valuedouble > (double)max)
        return json_err(path, key, "out of range");
    *out = (int64_t)it->valuedouble;
    return SR_OK;
}

static int json_float(const cJSON *root, const char *path, const char *key, float *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it)
        return 1;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return json_err(path, key, "expected a finite number");
    *out = (float)it->valuedouble;
    return SR_OK;
}

static const char *json_string(const cJSON *root, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static int json_widths(const cJSON *root, const char *path, const char *key, int *w, int *n)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key), *it;
    int count = 0;
    if (!arr)
        return SR_OK;
    if (!cJSON_IsArray(arr))
        return json_err(path, key, "expected an array of layer widths");
    cJSON_ArrayForEach(it, arr)
    {
        if (count == SR_MLP_MAX || !cJSON_IsNumber(it) || it->valueint < 1)
            return json_err(path, key, "expected up to 16 positive integers");
        w[count++] = it->valueint;
    }
    *n = count;
    return SR_OK;
}

static int json_pooling(const char *path, const char *s, enum sr_pooling *out)
{
    if (strcmp(s, "sum") == 0)
        *out = SR_POOLING_SUM;
    else if (strcmp(s, "mean") == 0)
        *out = SR_POOLING_MEAN;
    else
        return json_err(path, "pooling", "expected \"sum\" or \"mean\"");
    return SR_OK;
}

static int json_one_table(struct sr_train_config *cfg, const cJSON *jt, const char *path, int t)
{
    struct sr_table_config *tc = &cfg->tables[t];
    const char *name = json_string(jt, "name"), *s;
    int64_t v = 0;
    char where[96];
    snprintf(where, sizeof where, "%s: tables[%d]", path, t);
    memset(tc, 0, sizeof *tc);
    if (name && strlen(name) >= SR_NAME_MAX)
        return json_err(where, "name", "longer than 63 characters");
    snprintf(tc->name, SR_NAME_MAX, "%s", name ? name : "");
    if (!name)
        snprintf(tc->name, SR_NAME_MAX, "t%d", t);
    if (json_int(jt, where, "rows", 1, (int64_t)1 << 40, &v) != SR_OK)
        return json_err(where, "rows", "required, a positive integer");
    tc->num_embeddings = v;
    tc->embedding_dim = cfg->embedding_dim;
    if ((s = json_string(jt, "pooling")) && json_pooling(where, s, &tc->pooling))
        return SR_ERR_INVALID_ARG;
    if ((s = json_string(jt, "id_policy"))) {
        if (strcmp(s, "error") && strcmp(s, "hash"))
            return json_err(where, "id_policy", "expected \"error\" or \"hash\"");
        tc->id_policy = strcmp(s, "hash") == 0 ? SR_ID_POLICY_HASH : SR_ID_POLICY_ERROR;
    }
    const cJSON *feats = cJSON_GetObjectItemCaseSensitive(jt, "features"), *f;
    if (!feats) { /* one feature named after the table */
        memcpy(cfg->feature_names[cfg->num_features], tc->name, SR_NAME_MAX);
        cfg->feature_table[cfg->num_features++] = t;
        return SR_OK;
    }
    if (!cJSON_IsArray(feats) || cJSON_GetArraySize(feats) < 1)
        return json_err(where, "features", "expected a non-empty array of feature names");
    cJSON_ArrayForEach(f, feats)
    {
        if (!cJSON_IsString(f) || strlen(f->valuestring) >= SR_NAME_MAX)
            return json_err(where, "features", "names must be strings under 64 characters");
        if (cfg->num_features == SR_MAX_FEATURES)
            return json_err(where, "features", "too many features (max 256)");
        snprintf(cfg->feature_names[cfg->num_features], SR_NAME_MAX, "%s", f->valuestring);
        cfg->feature_table[cfg->num_features++] = t;
    }
    return SR_OK;
}

static int json_tables(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tables"), *jt;
    int t = 0;
    if (!arr)
        return SR_OK;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 ||
        cJSON_GetArraySize(arr) > SR_MAX_TABLES)
        return json_err(path, "tables", "expected an array of 1 to 256 table objects");
    cfg->num_features = 0;
    cJSON_ArrayForEach(jt, arr)
    {
        if (!cJSON_IsObject(jt))
            return json_err(path, "tables", "each entry must be an object");
        int rc = json_one_table(cfg, jt, path, t++);
        if (rc)
            return rc;
    }
    cfg->num_tables = t;
    return SR_OK;
}

static int json_scalars(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    int64_t v = 0;
    int rc;
    if ((rc = json_int(root, path, "steps", 1, INT64_MAX / 2, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->steps = v;
    }
    if ((rc = json_int(root, path, "batch_size", 1, 1 << 24, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->batch_size = (int)v;
    }
    if ((rc = json_int(root, path, "embedding_dim", 1, 1 << 16, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->embedding_dim = (int)v;
    }
    if ((rc = json_int(root, path, "seed", 0, INT64_MAX, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->seed = (uint64_t)v;
    }
    if ((rc = json_int(root, path, "eval_every", 0, INT64_MAX / 2, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->eval_every = v;
    }
    if ((rc = json_int(root, path, "eval_samples", 0, (int64_t)1 << 40, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->eval_samples = v;
    }
    if ((rc = json_int(root, path, "log_every", 1, INT64_MAX / 2, &v)) <= 0) {
        if (rc)
            return rc;
        cfg->log_every = v;
    }
    if ((rc = json_float(root, path, "lr", &cfg->lr)) < 0)
        return rc;
    if ((rc = json_float(root, path, "emb_lr", &cfg->emb_lr)) < 0)
        return rc;
    return SR_OK;
}

static int json_strings(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    const char *s;
    if ((s = json_string(root, "optimizer")) && sr_optim_kind_parse(s, &cfg->optimizer))
        return json_err(path, "optimizer", sr_error_message());
    if ((s = json_string(root, "emb_optimizer")) && sr_optim_kind_parse(s, &cfg->emb_optimizer))
        return json_err(path, "emb_optimizer", sr_error_message());
    if ((s = json_string(root, "id_dist")) && sr_id_dist_parse(s, &cfg->id_dist, &cfg->zipf_s))
        return json_err(path, "id_dist", sr_error_message());
    if ((s = json_string(root, "lr_schedule"))) {
        if (strlen(s) >= sizeof cfg->lr_schedule)
            return json_err(path, "lr_schedule", "too long");
        snprintf(cfg->lr_schedule, sizeof cfg->lr_schedule, "%s", s);
    }
    if ((s = json_string(root, "metrics"))) {
        if (strlen(s) >= sizeof cfg->metrics_path)
            return json_err(path, "metrics", "path too long");
        snprintf(cfg->metrics_path, sizeof cfg->metrics_path, "%s", s);
    }
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "ids_per_feature");
    if (ids) {
        if (!cJSON_IsNumber(ids) || ids->valueint < 1)
            return json_err(path, "ids_per_feature", "expected a positive integer");
        cfg->ids_min = cfg->ids_max = ids->valueint;
    }
    return SR_OK;
}

static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > (64 << 20) || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return NULL;
    }
    buf = sr_malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        sr_free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

int sr_train_config_load_json(struct sr_train_config *cfg, const char *path)
{
    char *text = read_small_file(path);
    cJSON *root;
    int rc;
    if (!text)
        return sr_error_set(SR_ERR_IO, "%s: cannot read config file (%s)", path, strerror(errno));
    root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at; p++)
            line += *p == '\n';
        sr_free(text);
        return sr_error_set(SR_ERR_INVALID_ARG, "%s:%d: malformed JSON", path, line);
    }
    rc = cJSON_IsObject(root) ? SR_OK : json_err(path, "(top level)", "expected an object");
    if (!rc)
        rc = json_scalars(cfg, root, path);
    if (!rc)
        rc = json_widths(root, path, "bot_mlp", cfg->bot_mlp, &cfg->n_bot);
    if (!rc)
        rc = json_widths(root, path, "top_mlp", cfg->top_mlp, &cfg->n_top);
    if (!rc)
        rc = json_strings(cfg, root, path);
    if (!rc)
        rc = json_tables(cfg, root, path);
    for (int t = 0; t < cfg->num_tables; t++)
        cfg->tables[t].embedding_dim = cfg->embedding_dim;
    cJSON_Delete(root);
    sr_free(text);
    return rc;
}

/* ---- checks ----------------------------------------------------------------- */

int sr_train_config_check(const struct sr_train_config *cfg)
{
    struct sr_dlrm_config dc;
    int rc;
    if (cfg->num_dense != 13)
        return sr_error_set(SR_ERR_INVALID_ARG, "the model takes 13 dense features, not %d",
                            cfg->num_dense);
    sr_train_config_dlrm(cfg, &dc);
    if ((rc = sr_dlrm_config_check(&dc)))
        return rc;
    for (int t = 0; t < cfg->num_tables; t++) {
        if (cfg->tables[t].embedding_dim != cfg->embedding_dim)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "table '%s' has dim %d but the dot interaction needs every "
                                "table at --embedding-dim %d",
                                cfg->tables[t].name, cfg->tables[t].embedding_dim,
                                cfg->embedding_dim);
    }
    if (cfg->ids_min < 0 || cfg->ids_max < cfg->ids_min)
        return sr_error_set(SR_ERR_INVALID_ARG, "--ids-per-feature: bad range %d-%d", cfg->ids_min,
                            cfg->ids_max);
    if (cfg->optimizer == SR_OPTIM_ROWWISE_ADAGRAD)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--optimizer rowwise_adagrad is for embeddings only; use "
                            "--emb-optimizer rowwise_adagrad, or --optimizer adagrad");
    if (cfg->batch_size < 1 || cfg->steps < 1)
        return sr_error_set(SR_ERR_INVALID_ARG, "--batch-size and --steps must be at least 1");
    if (cfg->lr <= 0 || (cfg->emb_lr <= 0 && cfg->emb_lr != -1.0f))
        return sr_error_set(SR_ERR_INVALID_ARG, "learning rates must be positive");
    if (!sr_dtype_is_wire(cfg->comm_dtype) || !sr_dtype_is_wire(cfg->dense_comm_dtype))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--comm-dtype and --dense-comm-dtype take fp32, fp16 or bf16");
    return SR_OK;
}

void sr_train_config_dlrm(const struct sr_train_config *cfg, struct sr_dlrm_config *out)
{
    memset(out, 0, sizeof *out);
    out->num_dense = cfg->num_dense;
    memcpy(out->bot_mlp, cfg->bot_mlp, sizeof out->bot_mlp);
    out->n_bot = cfg->n_bot;
    memcpy(out->top_mlp, cfg->top_mlp, sizeof out->top_mlp);
    out->n_top = cfg->n_top;
    out->num_sparse = cfg->num_features;
    out->embedding_dim = cfg->embedding_dim;
}

void sr_train_config_ebc(struct sr_train_config *cfg, struct sr_ebc_config *out)
{
    out->num_tables = cfg->num_tables;
    out->tables = cfg->tables;
    out->num_features = cfg->num_features;
    out->feature_names = cfg->feature_names;
    out->feature_table = cfg->feature_table;
}
