/*
 * Plan files: JSON out and in (cJSON). Writing spells out every shard; reading
 * accepts the short forms of shardrec/plan.h (no shards for dp and rw, "rank"
 * for tw, "node" for twrw, "ranks" for cw), fills the shards in, orders the
 * tables as the config does and validates the result. Every error names the
 * file and the table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "shardrec/alloc.h"
#include "core/json_kind.h"
#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "plan/plan_internal.h"

/* ---- writing ------------------------------------------------------------ */

static cJSON *shard_json(const struct sr_shard *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", s->rank);
    cJSON_AddNumberToObject(o, "row_offset", (double)s->row_offset);
    cJSON_AddNumberToObject(o, "rows", (double)s->rows);
    cJSON_AddNumberToObject(o, "col_offset", s->col_offset);
    cJSON_AddNumberToObject(o, "cols", s->cols);
    return o;
}

char *sr_plan_to_json(const struct sr_plan *p)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "world_size", p->world_size);
    cJSON_AddNumberToObject(root, "local_size", p->local_size);
    cJSON *tables = cJSON_AddArrayToObject(root, "tables");
    for (int t = 0; t < p->num_tables; t++) {
        const struct sr_table_plan *tp = &p->tables[t];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", tp->name);
        cJSON_AddStringToObject(o, "sharding", sr_sharding_type_name(tp->type));
        if (tp->type == SR_SHARDING_TYPE_HYBRID) {
            cJSON *hot = cJSON_AddArrayToObject(o, "hot");
            for (int64_t k = 0; k < tp->num_hot; k++)
                cJSON_AddItemToArray(hot, cJSON_CreateNumber((double)tp->hot[k]));
        }
        cJSON *shards = cJSON_AddArrayToObject(o, "shards");
        for (int i = 0; i < tp->num_shards; i++)
            cJSON_AddItemToArray(shards, shard_json(&tp->shards[i]));
        cJSON_AddItemToArray(tables, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    SR_ASSERT(text);
    char *out = sr_strdup(text);
    cJSON_free(text);
    return out;
}

int sr_plan_write(const struct sr_plan *p, const char *path)
{
    struct sr_atomic_file af;
    int rc = sr_atomic_file_open(&af, path); /* a whole plan or the old file, never half */
    if (rc)
        return rc;
    char *text = sr_plan_to_json(p);
    if (fputs(text, af.f) == EOF || fputc('\n', af.f) == EOF) {
        int e = errno;
        sr_atomic_file_abort(&af);
        rc = sr_error_set(SR_ERR_WRITE, "%s: cannot write (%s); HINT: check the free disk space",
                          path, strerror(e));
    } else if (sr_atomic_file_commit(&af)) {
        rc = sr_error_set(SR_ERR_WRITE, "%s", sr_error_message()); /* it names the file */
    }
    sr_free(text);
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

struct reader {
    const char *source;
    const struct sr_ebc_config *cfg;
    int W, L;
};

static const char *const root_keys[] = {"world_size", "local_size", "tables"};
static const char *const table_keys[] = {"name", "sharding", "shards", "rank",
                                         "node", "ranks",    "hot"};
static const char *const shard_keys[] = {"rank", "row_offset", "rows", "col_offset", "cols"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define PLAN_MAX_BYTES  ((size_t)64 << 20) /* a plan file, read whole */
#define PLAN_SOURCE_MAX 1100               /* "plan 'PATH'" */

static int check_keys(const struct reader *r, const cJSON *o, const char *where,
                      const char *const *names, int n)
{
    return sr_json_check_keys(o, names, n, "plan", r->source, where);
}

/* A table's keys: the common ones, and its type's short form unless it lists
 * its shards (a short-form key beside "shards", or another type's, would be
 * ignored: an error instead). */
static int check_table_keys(const struct reader *r, const cJSON *o,
                            const struct sr_table_config *tc, enum sr_sharding_type type)
{
    char where[160];
    snprintf(where, sizeof where, "table '%s': ", tc->name);
    int rc = check_keys(r, o, where, table_keys, COUNT(table_keys));
    if (rc)
        return rc;
    const char *own = type == SR_SHARDING_TYPE_TABLE_WISE        ? "rank"
                      : type == SR_SHARDING_TYPE_TABLE_ROW_WISE  ? "node"
                      : type == SR_SHARDING_TYPE_COLUMN_WISE     ? "ranks"
                                                                 : NULL;
    int listed = cJSON_GetObjectItemCaseSensitive(o, "shards") != NULL;
    char takes[96];
    if (listed)
        snprintf(takes, sizeof takes, "that lists its \"shards\" takes no other placement key");
    else if (own)
        snprintf(takes, sizeof takes, "takes \"%s\" or \"shards\"", own);
    else
        snprintf(takes, sizeof takes, "takes \"shards\" or nothing (the world size places it)");
    if (cJSON_GetObjectItemCaseSensitive(o, "hot") && type != SR_SHARDING_TYPE_HYBRID)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': %skey \"hot\" does not apply: only a hybrid table has "
                            "hot rows",
                            r->source, where);
    for (int k = 3; k < COUNT(table_keys) - 1; k++) { /* the placement keys */
        const char *key = table_keys[k];
        if (cJSON_GetObjectItemCaseSensitive(o, key) && (listed || !own || strcmp(key, own)))
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': %skey \"%s\" does not apply: a %s table %s",
                                r->source, where, key, sr_sharding_type_name(type), takes);
    }
    return SR_OK;
}

/* An integer field in [lo, hi]; absent: *out = dflt (or an error if dflt_ok is 0). */
static int get_int(const struct reader *r, const cJSON *o, const char *table, const char *key,
                   int64_t lo, int64_t hi, int dflt_ok, int64_t dflt, int64_t *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it && dflt_ok) {
        *out = dflt;
        return SR_OK;
    }
    if (!sr_json_int(it, lo, hi, out)) {
        char got[48];
        if (it && cJSON_IsNumber(it))
            snprintf(got, sizeof got, "%.17g", it->valuedouble);
        else
            snprintf(got, sizeof got, "%s", it ? sr_json_kind(it) : "missing");
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': %s%s%s\"%s\" is %s; it must be an integer in [%lld, "
                            "%lld]%s",
                            r->source, table ? "table '" : "", table ? table : "",
                            table ? "': " : "", key, got, (long long)lo, (long long)hi,
                            strcmp(key, "rank") == 0 || strcmp(key, "node") == 0
                                ? "; HINT: the plan was made for another world size?"
                                : "");
    }
    return SR_OK;
}

static int read_shard(const struct reader *r, const cJSON *o, const struct sr_table_config *tc,
                      int i, struct sr_shard *s)
{
    int64_t v[5] = {0};
    const int64_t big = SR_JSON_INT_MAX;
    char where[160];
    if (!cJSON_IsObject(o))
        return sr_error_set(SR_ERR_INVALID_ARG, "plan '%s': table '%s': a shard is not an object",
                            r->source, tc->name);
    snprintf(where, sizeof where, "table '%s': shards[%d]: ", tc->name, i);
    int rc = check_keys(r, o, where, shard_keys, COUNT(shard_keys));
    /* every value fits its field: a rank of 2^32 is an error, never rank 0 */
    if (!rc)
        rc = get_int(r, o, tc->name, "rank", 0, r->W - 1, 0, 0, &v[0]);
    if (!rc)
        rc = get_int(r, o, tc->name, "row_offset", 0, big, 1, 0, &v[1]);
    if (!rc)
        rc = get_int(r, o, tc->name, "rows", 0, big, 1, tc->num_embeddings, &v[2]);
    if (!rc)
        rc = get_int(r, o, tc->name, "col_offset", 0, INT32_MAX, 1, 0, &v[3]);
    if (!rc)
        rc = get_int(r, o, tc->name, "cols", 0, INT32_MAX, 1, tc->embedding_dim, &v[4]);
    *s = (struct sr_shard){.rank = (int)v[0],
                           .row_offset = v[1],
                           .rows = v[2],
                           .col_offset = (int)v[3],
                           .cols = (int)v[4]};
    return rc;
}

static int read_shards(const struct reader *r, const cJSON *arr, const struct sr_table_config *tc,
                       struct sr_table_plan *tp)
{
    int n = cJSON_GetArraySize(arr);
    if (!cJSON_IsArray(arr) || n < 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': table '%s': \"shards\" must be a non-empty array",
                            r->source, tc->name);
    sr_free(tp->shards);
    tp->num_shards = n;
    tp->shards = sr_calloc((size_t)n, sizeof *tp->shards);
    int i = 0, rc = SR_OK;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        rc = read_shard(r, it, tc, i, &tp->shards[i]);
        i++;
        if (rc)
            return rc;
    }
    return SR_OK;
}

static int read_cw_ranks(const struct reader *r, const cJSON *o, const struct sr_table_config *tc,
                         struct sr_table_plan *tp)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "ranks");
    int n = cJSON_GetArraySize(arr);
    if (!cJSON_IsArray(arr) || n < 1 || tc->embedding_dim % n != 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': table '%s' (cw) needs \"shards\" or \"ranks\": one rank "
                            "per column piece, their count dividing D = %d",
                            r->source, tc->name, tc->embedding_dim);
    int *ranks = sr_malloc(sizeof(int) * (size_t)n), i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= r->W) {
            sr_free(ranks);
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': table '%s' (cw): \"ranks\" entry %d must be an "
                                "integer in [0, %d]; HINT: the plan was made for another world "
                                "size?",
                                r->source, tc->name, i, r->W - 1);
        }
        ranks[i++] = (int)d;
    }
    sr_plan_fill_cw(tp, tc, n, ranks);
    sr_free(ranks);
    return SR_OK;
}

/* Shards in their short form: filled in from the type and its one field. */
static int fill_short(const struct reader *r, const cJSON *o, const struct sr_table_config *tc,
                      struct sr_table_plan *tp)
{
    int64_t k = 0;
    int rc = SR_OK;
    switch (tp->type) {
    case SR_SHARDING_TYPE_DATA_PARALLEL:
        sr_plan_fill_dp(tp, tc, r->W);
        break;
    case SR_SHARDING_TYPE_ROW_WISE:
        sr_plan_fill_rw(tp, tc, r->W);
        break;
    case SR_SHARDING_TYPE_HYBRID:
        sr_plan_fill_hybrid(tp, tc, r->W);
        break;
    case SR_SHARDING_TYPE_TABLE_WISE:
        rc = get_int(r, o, tc->name, "rank", 0, r->W - 1, 0, 0, &k);
        if (!rc)
            sr_plan_fill_tw(tp, tc, (int)k);
        break;
    case SR_SHARDING_TYPE_TABLE_ROW_WISE:
        rc = get_int(r, o, tc->name, "node", 0, r->W / r->L - 1, 0, 0, &k);
        if (!rc)
            sr_plan_fill_twrw(tp, tc, (int)k, r->L);
        break;
    default:
        rc = read_cw_ranks(r, o, tc, tp);
    }
    return rc;
}

/* A hybrid table's "hot": an array of row numbers, kept as written (the
 * validation says what is wrong with their order or range). */
static int read_hot(const struct reader *r, const cJSON *arr, const struct sr_table_config *tc,
                    struct sr_table_plan *tp)
{
    if (!cJSON_IsArray(arr))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': table '%s' (hybrid) needs \"hot\": an array of its hot "
                            "rows, ascending (it is %s)",
                            r->source, tc->name, arr ? sr_json_kind(arr) : "missing");
    const int n = cJSON_GetArraySize(arr);
    tp->num_hot = n;
    tp->hot = sr_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        const double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)tc->num_embeddings)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': table '%s' (hybrid): \"hot\" entry %d must be a row "
                                "in [0, %lld)",
                                r->source, tc->name, k, (long long)tc->num_embeddings);
        tp->hot[k++] = (int64_t)d;
    }
    return SR_OK;
}

static int read_table(const struct reader *r, const cJSON *o, const struct sr_table_config *tc,
                      struct sr_table_plan *tp)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "sharding");
    if (!ty)
        return sr_error_set(
            SR_ERR_INVALID_ARG,
            "plan '%s': table '%s' lacks \"sharding\" (dp, tw, rw, cw, twrw or hybrid)", r->source,
            tc->name);
    if (!cJSON_IsString(ty))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': table '%s': \"sharding\" is %s; it must be a string: "
                            "\"dp\", \"tw\", \"rw\", \"cw\", \"twrw\" or \"hybrid\"",
                            r->source, tc->name, sr_json_kind(ty));
    if (sr_sharding_type_parse(ty->valuestring, &tp->type) != SR_OK)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': table '%s': unknown sharding type '%s'; choose dp, tw, "
                            "rw, cw, twrw or hybrid",
                            r->source, tc->name, ty->valuestring);
    int rc = check_table_keys(r, o, tc, tp->type);
    if (rc)
        return rc;
    strcpy(tp->name, tc->name);
    enum sr_sharding_type type = tp->type;
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(o, "shards");
    rc = shards ? read_shards(r, shards, tc, tp) : fill_short(r, o, tc, tp);
    tp->type = type;
    if (!rc && type == SR_SHARDING_TYPE_HYBRID)
        rc = read_hot(r, cJSON_GetObjectItemCaseSensitive(o, "hot"), tc, tp);
    return rc;
}

/* The entry of table `name` in the "tables" array; errors on none or two. */
static int find_table(const struct reader *r, const cJSON *tables, const char *name,
                      const cJSON **out)
{
    const cJSON *it;
    *out = NULL;
    cJSON_ArrayForEach(it, tables)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)
            continue;
        if (*out)
            return sr_error_set(SR_ERR_INVALID_ARG, "plan '%s': table '%s' appears twice",
                                r->source, name);
        *out = it;
    }
    if (!*out)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': no entry for table '%s'; HINT: every table of the "
                            "config needs one",
                            r->source, name);
    return SR_OK;
}

/* Every entry names a table of the config. */
static int check_names(const struct reader *r, const cJSON *tables)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, tables)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (!cJSON_IsObject(it))
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': \"tables\" holds %s; each entry must be an object",
                                r->source, sr_json_kind(it));
        if (!n)
            return sr_error_set(SR_ERR_INVALID_ARG, "plan '%s': a table entry lacks \"name\"",
                                r->source);
        if (!cJSON_IsString(n))
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': a table's \"name\" is %s; it must be a string",
                                r->source, sr_json_kind(n));
        int found = 0;
        for (int t = 0; t < r->cfg->num_tables && !found; t++)
            found = strcmp(r->cfg->tables[t].name, n->valuestring) == 0;
        if (!found)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': table '%s' is not in the model's config", r->source,
                                n->valuestring);
    }
    return SR_OK;
}

static int read_root(const struct reader *r, const cJSON *root, struct sr_plan **out)
{
    int64_t w = 0, l = 0;
    const cJSON *tables = cJSON_GetObjectItemCaseSensitive(root, "tables");
    int rc = cJSON_IsObject(root) && cJSON_IsArray(tables)
                 ? SR_OK
                 : sr_error_set(SR_ERR_INVALID_ARG,
                                "plan '%s': expected an object with a \"tables\" array", r->source);
    if (!rc)
        rc = check_keys(r, root, "", root_keys, COUNT(root_keys));
    if (!rc)
        rc = get_int(r, root, NULL, "world_size", 1, INT32_MAX, 1, r->W, &w);
    if (!rc)
        rc = get_int(r, root, NULL, "local_size", 1, INT32_MAX, 1, r->L, &l);
    if (!rc)
        rc = check_names(r, tables);
    if (rc)
        return rc;
    struct sr_plan *p = sr_plan_alloc(r->cfg->num_tables, (int)w, (int)l);
    for (int t = 0; !rc && t < r->cfg->num_tables; t++) {
        const cJSON *o;
        rc = find_table(r, tables, r->cfg->tables[t].name, &o);
        if (!rc)
            rc = read_table(r, o, &r->cfg->tables[t], &p->tables[t]);
    }
    if (!rc)
        rc = sr_plan_validate(p, r->cfg, r->W, r->L);
    if (rc) {
        sr_plan_free(p);
        return rc;
    }
    *out = p;
    return SR_OK;
}

int sr_plan_from_json(struct sr_plan **out, const char *text, const char *source,
                      const struct sr_ebc_config *cfg, int world_size, int local_size)
{
    *out = NULL;
    int rc = sr_ebc_config_validate(cfg);
    if (rc)
        return rc;
    if (world_size < 1 || local_size < 1 || world_size % local_size != 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': world size %d is not a multiple of %d ranks per node",
                            source, world_size, local_size);
    char where[PLAN_SOURCE_MAX];
    snprintf(where, sizeof where, "plan '%s'", source);
    if ((rc = sr_json_check_nul(text, strlen(text), where)))
        return rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 0);
    if (!root)
        return sr_error_set(SR_ERR_INVALID_ARG, "plan '%s': not valid JSON near '%.20s'", source,
                            cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    end += strspn(end, " \t\r\n");
    if (*end) { /* nothing but space may follow the plan */
        cJSON_Delete(root);
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "plan '%s': text after the JSON object at offset %zu ('%.20s'); "
                            "HINT: a plan is one JSON object",
                            source, (size_t)(end - text), end);
    }
    struct reader r = {.source = source, .cfg = cfg, .W = world_size, .L = local_size};
    rc = read_root(&r, root, out);
    cJSON_Delete(root);
    return rc;
}

int sr_plan_read(struct sr_plan **out, const char *path, const struct sr_ebc_config *cfg,
                 int world_size, int local_size)
{
    *out = NULL;
    char *text;
    size_t len;
    int rc = sr_file_read_small(path, "the plan", PLAN_MAX_BYTES, &text, &len);
    if (rc)
        return rc;
    if (strlen(text) != len) { /* a raw NUL byte: the JSON text would end there */
        char where[PLAN_SOURCE_MAX];
        snprintf(where, sizeof where, "plan '%s'", path);
        rc = sr_json_check_nul(text, len, where);
        sr_free(text);
        return rc;
    }
    rc = sr_plan_from_json(out, text, path, cfg, world_size, local_size);
    sr_free(text);
    return rc;
}
