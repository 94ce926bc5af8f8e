/*
 * Training job configuration: the embedded default job, strict parsers for
 * numbers and lists, the JSON config file (read with cJSON), and the check
 * that the pieces fit. Flags are applied by the CLI after the file, so flags
 * win.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "shardrec/alloc.h"
#include "core/json_kind.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/half.h"
#include "shardrec/nearest.h"
#include "shardrec/train_config.h"

void sr_train_config_default(struct sr_train_config *cfg)
{
    static const int bot[] = {13, 512, 256, 64, 16};
    static const int top[] = {512, 256, 1};
    int64_t rows[SR_MAX_TABLES];
    int n = 0;
    memset(cfg, 0, sizeof *cfg);
    cfg->embedding_dim = 16;
    memcpy(cfg->bot_mlp, bot, sizeof bot);
    cfg->n_bot = 5;
    memcpy(cfg->top_mlp, top, sizeof top);
    cfg->n_top = 3;
    cfg->interaction = SR_INTERACTION_DOT;
    cfg->dcn_layers = 3;
    cfg->dcn_rank = 0; /* SR_DCN_RANK_DEFAULT, or n when smaller */
    /* workload K's 26 tables (Criteo Kaggle), capped */
    int rc = sr_parse_rows("K", sr_workload_setting("K", "table-rows"), rows, &n, SR_MAX_TABLES);
    SR_ASSERT(rc == SR_OK);
    for (int i = 0; i < n; i++)
        rows[i] = rows[i] < 100000 ? rows[i] : 100000;
    sr_train_config_set_table_rows(cfg, rows, n);
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
    cfg->emb_dtype = SR_DTYPE_F32;
    cfg->emb_rounding = 1;
    cfg->pipeline = SR_PIPELINE_AUTO;
    cfg->eval_every = 250;
    cfg->eval_samples = 1 << 17;
    cfg->log_every = 50;
    cfg->progress = -1;
    cfg->checkpoint_keep = 2;
    cfg->sharding = -1;
    cfg->bucket_kib = 4096;
    cfg->comm_dtype = SR_DTYPE_F32;
    cfg->dense_comm_dtype = SR_DTYPE_F32;
    cfg->comm_timeout = 60;
    cfg->plan_sample = SR_PLAN_SAMPLE_DEFAULT;
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
    if (errno || end == s || *end != '\0' || !isfinite(v) || fabs(v) > FLT_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s' is not a finite number in float range",
                            flag, s);
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

/*
 * The file is checked before anything is applied: every key of the top-level
 * object and of each table object must be known (else the nearest known key is
 * the hint), given once, and of its kind; integers must be whole and in range
 * (at most 2^53, the largest integer a JSON number holds exactly). Then the
 * values are applied over the defaults. Errors read
 *   FILE: key "KEY": what is wrong     or     FILE: tables[i]: key "KEY": ...
 */

enum json_kind {
    JSON_KIND_INT,    /* a whole number in [min, max] */
    JSON_KIND_NUMBER, /* a finite number in float range */
    JSON_KIND_STRING,
    JSON_KIND_WIDTHS, /* an array of 1..SR_MLP_MAX whole numbers in [min, max] */
    JSON_KIND_NAMES,  /* a non-empty array of strings */
    JSON_KIND_TABLES, /* an array of 1..SR_MAX_TABLES objects */
    JSON_KIND_IDS,    /* ids per feature: a whole number, the flag's text, or an array */
};

struct json_key {
    const char *key;
    enum json_kind kind;
    int64_t min, max;
};

static const struct json_key top_keys[] = {
    {"steps", JSON_KIND_INT, 1, SR_JSON_INT_MAX},
    {"batch_size", JSON_KIND_INT, 1, 1 << 24},
    {"embedding_dim", JSON_KIND_INT, 1, 1 << 16},
    {"seed", JSON_KIND_INT, 0, SR_JSON_INT_MAX},
    {"eval_every", JSON_KIND_INT, 0, SR_JSON_INT_MAX},
    {"eval_samples", JSON_KIND_INT, 0, (int64_t)1 << 36},
    {"log_every", JSON_KIND_INT, 1, SR_JSON_INT_MAX},
    {"ids_per_feature", JSON_KIND_IDS, 0, 0}, /* ranges checked by json_ids */
    {"workload", JSON_KIND_STRING, 0, 0},
    {"lr", JSON_KIND_NUMBER, 0, 0},
    {"emb_lr", JSON_KIND_NUMBER, 0, 0},
    {"bot_mlp", JSON_KIND_WIDTHS, 1, 1 << 20},
    {"top_mlp", JSON_KIND_WIDTHS, 1, 1 << 20},
    {"interaction", JSON_KIND_STRING, 0, 0},
    {"dcn_layers", JSON_KIND_INT, 1, SR_DCN_MAX_LAYERS},
    {"dcn_rank", JSON_KIND_INT, 1, 1 << 20},
    {"optimizer", JSON_KIND_STRING, 0, 0},
    {"emb_optimizer", JSON_KIND_STRING, 0, 0},
    {"emb_dtype", JSON_KIND_STRING, 0, 0},
    {"emb_rounding", JSON_KIND_STRING, 0, 0},
    {"id_dist", JSON_KIND_STRING, 0, 0},
    {"lr_schedule", JSON_KIND_STRING, 0, 0},
    {"metrics", JSON_KIND_STRING, 0, 0},
    {"tables", JSON_KIND_TABLES, 0, 0},
    {NULL, 0, 0, 0},
};

static const struct json_key table_keys[] = {
    {"name", JSON_KIND_STRING, 0, 0},    {"rows", JSON_KIND_INT, 1, (int64_t)1 << 40},
    {"pooling", JSON_KIND_STRING, 0, 0}, {"id_policy", JSON_KIND_STRING, 0, 0},
    {"features", JSON_KIND_NAMES, 0, 0}, {NULL, 0, 0, 0},
};

static int json_err(const char *where, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int json_err(const char *where, const char *key, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sr_error_set(SR_ERR_INVALID_ARG, "%s: key \"%s\": %s", where, key, what);
}

/* "did you mean ..." when a known key is near s, else the known keys. */
static void key_hint(char *buf, size_t cap, const struct json_key *keys, const char *s)
{
    const char *names[64];
    int n = 0;
    for (; keys[n].key && n < 64; n++)
        names[n] = keys[n].key;
    sr_name_hint(buf, cap, s, names, n);
}

/* A whole number in [min, max] (both within +-2^53, so exact as doubles). */
static int json_int_value(const cJSON *it, const char *where, const char *key, int64_t min,
                          int64_t max, int64_t *out)
{
    if (!cJSON_IsNumber(it))
        return json_err(where, key, "expected an integer, got %s", sr_json_kind(it));
    double d = it->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return json_err(where, key, "expected an integer, got %.17g", d);
    if (d < (double)min || d > (double)max)
        return json_err(where, key, "%.17g is out of range [%lld, %lld]%s", d, (long long)min,
                        (long long)max,
                        fabs(d) > (double)SR_JSON_INT_MAX
                            ? " (a JSON number beyond 2^53 - 1 is not read exactly; give the "
                              "flag on the command line)"
                            : "");
    *out = (int64_t)d;
    return SR_OK;
}

static int check_array(const cJSON *it, const struct json_key *k, const char *where)
{
    const cJSON *e;
    int64_t v;
    int n = cJSON_GetArraySize(it), rc;
    if (!cJSON_IsArray(it))
        return json_err(where, k->key, "expected an array, got %s", sr_json_kind(it));
    if (k->kind == JSON_KIND_WIDTHS && (n < 1 || n > SR_MLP_MAX))
        return json_err(where, k->key, "%d layer widths; give 1 to %d", n, SR_MLP_MAX);
    if (k->kind == JSON_KIND_TABLES && (n < 1 || n > SR_MAX_TABLES))
        return json_err(where, k->key, "%d tables; give 1 to %d", n, SR_MAX_TABLES);
    if (k->kind == JSON_KIND_NAMES && n < 1)
        return json_err(where, k->key, "expected a non-empty array of feature names");
    cJSON_ArrayForEach(e, it)
    {
        if (k->kind == JSON_KIND_WIDTHS &&
            (rc = json_int_value(e, where, k->key, k->min, k->max, &v)))
            return rc;
        if (k->kind == JSON_KIND_NAMES &&
            (!cJSON_IsString(e) || !*e->valuestring || strlen(e->valuestring) >= SR_NAME_MAX))
            return json_err(where, k->key, "feature names are strings of 1 to %d bytes",
                            SR_NAME_MAX - 1);
        if (k->kind == JSON_KIND_TABLES && !cJSON_IsObject(e))
            return json_err(where, k->key, "each entry must be an object, got %s",
                            sr_json_kind(e));
    }
    return SR_OK;
}

/* One entry of "ids_per_feature": N, or the text "N" or "MIN-MAX". */
static int json_ids_entry(const cJSON *e, const char *where, const char *key, int *lo, int *hi)
{
    int64_t v;
    int rc;
    if (cJSON_IsString(e)) {
        if ((rc = sr_parse_ids_range("ids per feature", e->valuestring, lo, hi)))
            return json_err(where, key, "%s", sr_error_message());
        return SR_OK;
    }
    if ((rc = json_int_value(e, where, key, 1, 1 << 20, &v)))
        return rc;
    *lo = *hi = (int)v;
    return SR_OK;
}

/* "ids_per_feature": N or "N" or "MIN-MAX" for every feature (*n = 0, the
 * range in lo[0], hi[0]), or an array of those, one per feature (*n entries). */
static int json_ids(const cJSON *it, const char *where, int *lo, int *hi, int *n)
{
    char key[40];
    const cJSON *e;
    int k = 0, rc, len = cJSON_GetArraySize(it);
    *n = 0;
    if (!cJSON_IsArray(it))
        return json_ids_entry(it, where, "ids_per_feature", &lo[0], &hi[0]);
    if (len < 1 || len > SR_MAX_FEATURES)
        return json_err(where, "ids_per_feature", "%d entries; give 1 to %d, one per feature", len,
                        SR_MAX_FEATURES);
    cJSON_ArrayForEach(e, it)
    {
        snprintf(key, sizeof key, "ids_per_feature[%d]", k);
        if ((rc = json_ids_entry(e, where, key, &lo[k], &hi[k])))
            return rc;
        k++;
    }
    *n = k;
    return SR_OK;
}

static int check_value(const cJSON *it, const struct json_key *k, const char *where)
{
    int64_t v;
    int lo[SR_MAX_FEATURES], hi[SR_MAX_FEATURES], n;
    switch (k->kind) {
    case JSON_KIND_IDS:
        return json_ids(it, where, lo, hi, &n);
    case JSON_KIND_INT:
        return json_int_value(it, where, k->key, k->min, k->max, &v);
    case JSON_KIND_NUMBER:
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > FLT_MAX)
            return json_err(where, k->key, "expected a finite number in float range, got %s",
                            cJSON_IsNumber(it) ? "one outside it" : sr_json_kind(it));
        return SR_OK;
    case JSON_KIND_STRING:
        if (!cJSON_IsString(it))
            return json_err(where, k->key, "expected a string, got %s", sr_json_kind(it));
        return SR_OK;
    default:
        return check_array(it, k, where);
    }
}

/* Every member of `obj` is a known key, given once, of its kind. */
static int check_object(const cJSON *obj, const struct json_key *keys, const char *where)
{
    const cJSON *it, *prev;
    char hint[400];
    cJSON_ArrayForEach(it, obj)
    {
        const struct json_key *k = keys;
        while (k->key && strcmp(k->key, it->string) != 0)
            k++;
        if (!k->key) {
            key_hint(hint, sizeof hint, keys, it->string);
            return json_err(where, it->string, "unknown key; HINT: %s", hint);
        }
        for (prev = obj->child; prev != it; prev = prev->next)
            if (strcmp(prev->string, it->string) == 0)
                return json_err(where, it->string, "given twice");
        int rc = check_value(it, k, where);
        if (rc)
            return rc;
    }
    return SR_OK;
}

/* Item `key` of an object already checked: NULL when absent. */
static const cJSON *json_get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int64_t json_i64(const cJSON *it)
{
    return (int64_t)it->valuedouble; /* checked: whole and within +-2^53 */
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *it = json_get(o, key);
    return it ? it->valuestring : NULL;
}

static void json_widths(const cJSON *arr, int *w, int *n)
{
    const cJSON *it;
    int count = 0;
    if (!arr)
        return;
    cJSON_ArrayForEach(it, arr) w[count++] = (int)json_i64(it);
    *n = count;
}

static int json_pooling(const char *where, const char *s, enum sr_pooling *out)
{
    if (strcmp(s, "sum") == 0)
        *out = SR_POOLING_SUM;
    else if (strcmp(s, "mean") == 0)
        *out = SR_POOLING_MEAN;
    else
        return json_err(where, "pooling", "'%s'; choose \"sum\" or \"mean\"", s);
    return SR_OK;
}

static int json_one_table(struct sr_train_config *cfg, const cJSON *jt, const char *path, int t)
{
    struct sr_table_config *tc = &cfg->tables[t];
    const char *name, *s;
    char where[SR_PATH_MAX + 32];
    snprintf(where, sizeof where, "%s: tables[%d]", path, t);
    int rc = check_object(jt, table_keys, where);
    if (rc)
        return rc;
    name = json_str(jt, "name");
    memset(tc, 0, sizeof *tc);
    if (name && (!*name || strlen(name) >= SR_NAME_MAX))
        return json_err(where, "name", "table names are 1 to %d bytes", SR_NAME_MAX - 1);
    if (name)
        snprintf(tc->name, SR_NAME_MAX, "%s", name);
    else
        snprintf(tc->name, SR_NAME_MAX, "t%d", t);
    if (!json_get(jt, "rows"))
        return json_err(where, "rows", "required: the table's number of rows");
    tc->num_embeddings = json_i64(json_get(jt, "rows"));
    tc->embedding_dim = cfg->embedding_dim;
    tc->id_policy = SR_ID_POLICY_ERROR;
    if ((s = json_str(jt, "pooling")) && json_pooling(where, s, &tc->pooling))
        return SR_ERR_INVALID_ARG;
    cfg->pooling_given |= s != NULL;
    if ((s = json_str(jt, "id_policy"))) {
        if (strcmp(s, "error") && strcmp(s, "hash"))
            return json_err(where, "id_policy", "'%s'; choose \"error\" or \"hash\"", s);
        tc->id_policy = strcmp(s, "hash") == 0 ? SR_ID_POLICY_HASH : SR_ID_POLICY_ERROR;
    }
    const cJSON *feats = json_get(jt, "features"), *f;
    if (!feats) { /* one feature named after the table */
        if (cfg->num_features == SR_MAX_FEATURES)
            return json_err(where, "features", "too many features (max %d)", SR_MAX_FEATURES);
        memcpy(cfg->feature_names[cfg->num_features], tc->name, SR_NAME_MAX);
        cfg->feature_table[cfg->num_features++] = t;
        return SR_OK;
    }
    cJSON_ArrayForEach(f, feats)
    {
        if (cfg->num_features == SR_MAX_FEATURES)
            return json_err(where, "features", "too many features (max %d)", SR_MAX_FEATURES);
        snprintf(cfg->feature_names[cfg->num_features], SR_NAME_MAX, "%s", f->valuestring);
        cfg->feature_table[cfg->num_features++] = t;
    }
    return SR_OK;
}

static int json_tables(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    const cJSON *arr = json_get(root, "tables"), *jt;
    int t = 0;
    if (!arr)
        return SR_OK;
    cfg->num_features = 0;
    cfg->pooling_given = 0; /* the new tables' pooling: their own "pooling" keys, or sum */
    cJSON_ArrayForEach(jt, arr)
    {
        int rc = json_one_table(cfg, jt, path, t++);
        if (rc)
            return rc;
    }
    cfg->num_tables = t;
    return SR_OK;
}

static void json_scalars(struct sr_train_config *cfg, const cJSON *root)
{
    const cJSON *it;
    if ((it = json_get(root, "steps"))) {
        cfg->steps = json_i64(it);
        cfg->steps_set = 1;
    }
    if ((it = json_get(root, "batch_size")))
        cfg->batch_size = (int)json_i64(it);
    if ((it = json_get(root, "embedding_dim")))
        cfg->embedding_dim = (int)json_i64(it);
    if ((it = json_get(root, "seed")))
        cfg->seed = (uint64_t)json_i64(it);
    if ((it = json_get(root, "eval_every")))
        cfg->eval_every = json_i64(it);
    if ((it = json_get(root, "eval_samples")))
        cfg->eval_samples = json_i64(it);
    if ((it = json_get(root, "log_every")))
        cfg->log_every = json_i64(it);
    if ((it = json_get(root, "lr")))
        cfg->lr = (float)it->valuedouble;
    if ((it = json_get(root, "emb_lr")))
        cfg->emb_lr = (float)it->valuedouble;
    if ((it = json_get(root, "dcn_layers")))
        cfg->dcn_layers = (int)json_i64(it);
    if ((it = json_get(root, "dcn_rank")))
        cfg->dcn_rank = (int)json_i64(it);
    json_widths(json_get(root, "bot_mlp"), cfg->bot_mlp, &cfg->n_bot);
    json_widths(json_get(root, "top_mlp"), cfg->top_mlp, &cfg->n_top);
}

/* "workload" first, so that every other key wins over it; a workload that
 * --workload already applied is kept (flags win). */
static int json_workload(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    const char *s = json_str(root, "workload");
    if (!s)
        return SR_OK;
    if (!sr_workload_setting(s, "table-rows"))
        return json_err(path, "workload", "'%s' is not a workload; choose \"K\", \"M\" or \"D\"",
                        s);
    return cfg->workload[0] ? SR_OK : sr_train_config_set_workload(cfg, s);
}

static int json_apply_ids(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    int lo[SR_MAX_FEATURES], hi[SR_MAX_FEATURES];
    const cJSON *it = json_get(root, "ids_per_feature");
    int n, rc;
    if (!it)
        return SR_OK;
    if ((rc = json_ids(it, path, lo, hi, &n)))
        return rc;
    if (n > 0)
        return sr_train_config_set_feature_ids(cfg, "ids_per_feature", lo, hi, n);
    char text[32];
    snprintf(text, sizeof text, "%d-%d", lo[0], hi[0]);
    return sr_train_config_set(cfg, "ids-per-feature", text);
}

static int json_strings(struct sr_train_config *cfg, const cJSON *root, const char *path)
{
    const char *s;
    if ((s = json_str(root, "optimizer")) && sr_optim_kind_parse(s, &cfg->optimizer))
        return json_err(path, "optimizer", "%s", sr_error_message());
    if ((s = json_str(root, "emb_optimizer")) && sr_optim_kind_parse(s, &cfg->emb_optimizer))
        return json_err(path, "emb_optimizer", "%s", sr_error_message());
    if ((s = json_str(root, "emb_dtype")) && sr_train_config_set(cfg, "emb-dtype", s))
        return json_err(path, "emb_dtype", "%s", sr_error_message());
    if ((s = json_str(root, "emb_rounding")) && sr_train_config_set(cfg, "emb-rounding", s))
        return json_err(path, "emb_rounding", "%s", sr_error_message());
    if ((s = json_str(root, "interaction")) && sr_interaction_parse(s, &cfg->interaction))
        return json_err(path, "interaction", "%s", sr_error_message());
    if ((s = json_str(root, "id_dist")) && sr_id_dist_parse(s, &cfg->id_dist, &cfg->zipf_s))
        return json_err(path, "id_dist", "%s", sr_error_message());
    if ((s = json_str(root, "lr_schedule"))) {
        if (strlen(s) >= sizeof cfg->lr_schedule)
            return json_err(path, "lr_schedule", "longer than %zu bytes",
                            sizeof cfg->lr_schedule - 1);
        snprintf(cfg->lr_schedule, sizeof cfg->lr_schedule, "%s", s);
    }
    if ((s = json_str(root, "metrics"))) {
        if (!*s)
            return json_err(path, "metrics",
                            "an empty path; HINT: a file's path, or leave "
                            "\"metrics\" out");
        if (strlen(s) >= sizeof cfg->metrics_path)
            return json_err(path, "metrics", "path longer than %zu bytes",
                            sizeof cfg->metrics_path - 1);
        snprintf(cfg->metrics_path, sizeof cfg->metrics_path, "%s", s);
    }
    return SR_OK;
}

int sr_train_config_from_json(struct sr_train_config *cfg, const char *text, size_t len,
                              const char *path)
{
    const char *end = NULL;
    int rc = sr_json_check_nul(text, len, path); /* raw, or \u0000 cutting a name short */
    if (rc)
        return rc;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at && *p; p++)
            line += *p == '\n';
        return sr_error_set(SR_ERR_INVALID_ARG, "%s:%d: malformed JSON", path, line);
    }
    rc = cJSON_IsObject(root)
             ? SR_OK
             : sr_error_set(SR_ERR_INVALID_ARG, "%s: expected a JSON object {...}, got %s", path,
                            sr_json_kind(root));
    if (!rc)
        rc = check_object(root, top_keys, path);
    if (!rc)
        rc = json_workload(cfg, root, path);
    if (!rc) {
        json_scalars(cfg, root);
        rc = json_strings(cfg, root, path);
    }
    if (!rc)
        rc = json_apply_ids(cfg, root, path);
    if (!rc)
        rc = json_tables(cfg, root, path);
    for (int t = 0; t < cfg->num_tables; t++)
        cfg->tables[t].embedding_dim = cfg->embedding_dim;
    cJSON_Delete(root);
    return rc;
}

int sr_train_config_load_json(struct sr_train_config *cfg, const char *path)
{
    size_t len = 0;
    char *text;
    int rc = sr_file_read_small(path, "config file", SR_CONFIG_MAX_BYTES, &text, &len);
    if (rc)
        return rc;
    rc = sr_train_config_from_json(cfg, text, len, path);
    sr_free(text);
    return rc;
}

/* ---- checks ----------------------------------------------------------------- */

int sr_train_config_check(const struct sr_train_config *cfg)
{
    struct sr_dlrm_config dc;
    struct sr_ebc_config ec;
    int rc;
    if (cfg->num_dense != 13)
        return sr_error_set(SR_ERR_INVALID_ARG, "the model takes 13 dense features, not %d",
                            cfg->num_dense);
    sr_train_config_dlrm(cfg, &dc);
    if ((rc = sr_dlrm_config_check(&dc)))
        return rc;
    sr_train_config_ebc((struct sr_train_config *)cfg, &ec); /* read only */
    if ((rc = sr_ebc_config_validate(&ec)))
        return rc;
    for (int t = 0; t < cfg->num_tables; t++) {
        if (cfg->tables[t].embedding_dim != cfg->embedding_dim)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "table '%s' has dim %d but the %s interaction needs every "
                                "table at --embedding-dim %d",
                                cfg->tables[t].name, cfg->tables[t].embedding_dim,
                                cfg->interaction == SR_INTERACTION_DCN ? "dcn" : "dot",
                                cfg->embedding_dim);
    }
    if (cfg->n_eval_data && !cfg->n_data && !cfg->eval_only)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--eval-data needs --data: a job on synthetic data evaluates on "
                            "held-back synthetic samples (--eval-samples); HINT: add --data "
                            "FILE..., or drop --eval-data");
    if (cfg->ids_min < 0 || cfg->ids_max < cfg->ids_min)
        return sr_error_set(SR_ERR_INVALID_ARG, "--ids-per-feature: bad range %d-%d", cfg->ids_min,
                            cfg->ids_max);
    struct sr_synth_config sc;
    if ((rc = sr_train_config_synth(cfg, NULL, &sc))) /* F entries of the per-feature form */
        return rc;
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
    out->interaction = cfg->interaction;
    out->dcn_layers = cfg->dcn_layers;
    out->dcn_rank = cfg->dcn_rank;
    if (out->dcn_rank == 0) { /* the default: 512, or the whole width n when smaller */
        int64_t n = ((int64_t)cfg->num_features + 1) * cfg->embedding_dim;
        out->dcn_rank = n < SR_DCN_RANK_DEFAULT ? (int)n : SR_DCN_RANK_DEFAULT;
    }
}

int sr_interaction_parse(const char *s, enum sr_interaction *out)
{
    if (!strcmp(s, "dot"))
        *out = SR_INTERACTION_DOT;
    else if (!strcmp(s, "dcn"))
        *out = SR_INTERACTION_DCN;
    else
        return sr_error_set(SR_ERR_INVALID_ARG, "--interaction: '%s'; choose dot or dcn", s);
    return SR_OK;
}

void sr_train_config_ebc(struct sr_train_config *cfg, struct sr_ebc_config *out)
{
    for (int t = 0; t < cfg->num_tables; t++) /* --emb-dtype, whichever flag came first */
        cfg->tables[t].storage = cfg->emb_dtype;
    out->stochastic_rounding = cfg->emb_dtype != SR_DTYPE_F32 && cfg->emb_rounding;
    out->num_tables = cfg->num_tables;
    out->tables = cfg->tables;
    out->num_features = cfg->num_features;
    out->feature_names = cfg->feature_names;
    out->feature_table = cfg->feature_table;
}
