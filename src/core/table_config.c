/*
 * Table and EBC configs: validation with messages that name the table or
 * feature at fault, pooling names, and the deep copy an EBC keeps. Names are
 * fixed-size, NUL-terminated arrays (SR_NAME_MAX) so configs copy flat.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/table_config.h"

const char *sr_pooling_name(enum sr_pooling pooling)
{
    return pooling == SR_POOLING_MEAN ? "mean" : pooling == SR_POOLING_SUM ? "sum" : "unknown";
}

int sr_pooling_parse(const char *s, enum sr_pooling *out)
{
    if (strcmp(s, "sum") == 0)
        *out = SR_POOLING_SUM;
    else if (strcmp(s, "mean") == 0)
        *out = SR_POOLING_MEAN;
    else
        return sr_error_set(SR_ERR_INVALID_ARG, "unknown pooling '%s'; choose sum or mean", s);
    return SR_OK;
}

/* A name must be non-empty and terminated inside its SR_NAME_MAX bytes. */
static int name_ok(const char *name)
{
    return name[0] != '\0' && memchr(name, '\0', SR_NAME_MAX) != NULL;
}

static int validate_table(const struct sr_ebc_config *cfg, int t)
{
    const struct sr_table_config *tc = &cfg->tables[t];
    if (!name_ok(tc->name))
        return sr_error_set(SR_ERR_INVALID_ARG, "table %d: name is empty or longer than %d bytes",
                            t, SR_NAME_MAX - 1);
    if (tc->num_embeddings < 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "table '%s': num_embeddings is %lld; HINT: a table needs >= 1 row",
                            tc->name, (long long)tc->num_embeddings);
    if (tc->embedding_dim < 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "table '%s': embedding_dim is %d; HINT: it must be >= 1", tc->name,
                            tc->embedding_dim);
    if (tc->num_embeddings > INT64_MAX / 4 / tc->embedding_dim)
        return sr_error_set(SR_ERR_INVALID_ARG, "table '%s': %lld x %d is too large", tc->name,
                            (long long)tc->num_embeddings, tc->embedding_dim);
    if (tc->storage != SR_DTYPE_F32 && tc->storage != SR_DTYPE_F16 &&
        tc->storage != SR_DTYPE_BF16)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "table '%s': storage dtype %d is not fp32, fp16 or bf16", tc->name,
                            (int)tc->storage);
    if (tc->pooling != SR_POOLING_SUM && tc->pooling != SR_POOLING_MEAN)
        return sr_error_set(SR_ERR_INVALID_ARG, "table '%s': unknown pooling %d (sum or mean)",
                            tc->name, (int)tc->pooling);
    if (tc->id_policy != SR_ID_POLICY_ERROR && tc->id_policy != SR_ID_POLICY_HASH)
        return sr_error_set(SR_ERR_INVALID_ARG, "table '%s': unknown id policy %d (error or hash)",
                            tc->name, (int)tc->id_policy);
    for (int u = 0; u < t; u++)
        if (strcmp(cfg->tables[u].name, tc->name) == 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "tables %d and %d are both named '%s'; HINT: names must be unique",
                                u, t, tc->name);
    return SR_OK;
}

static int validate_feature(const struct sr_ebc_config *cfg, int f)
{
    const char *name = cfg->feature_names[f];
    if (!name_ok(name))
        return sr_error_set(SR_ERR_INVALID_ARG, "feature %d: name is empty or longer than %d bytes",
                            f, SR_NAME_MAX - 1);
    int t = cfg->feature_table[f];
    if (t < 0 || t >= cfg->num_tables)
        return sr_error_set(SR_ERR_INVALID_ARG, "feature '%s': table index %d is outside [0, %d)",
                            name, t, cfg->num_tables);
    for (int u = 0; u < f; u++)
        if (strcmp(cfg->feature_names[u], name) == 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "features %d and %d are both named '%s'; HINT: names must be "
                                "unique",
                                u, f, name);
    return SR_OK;
}

int sr_ebc_config_validate(const struct sr_ebc_config *cfg)
{
    if (!cfg)
        return sr_error_set(SR_ERR_INVALID_ARG, "EBC config is NULL");
    if (cfg->num_tables < 1 || !cfg->tables)
        return sr_error_set(SR_ERR_INVALID_ARG, "EBC config has %d tables; it needs at least one",
                            cfg->num_tables);
    if (cfg->num_features < 1 || !cfg->feature_names || !cfg->feature_table)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "EBC config has %d features; it needs at least one, each with a "
                            "name and a table",
                            cfg->num_features);
    for (int t = 0; t < cfg->num_tables; t++) {
        int rc = validate_table(cfg, t);
        if (rc)
            return rc;
    }
    for (int f = 0; f < cfg->num_features; f++) {
        int rc = validate_feature(cfg, f);
        if (rc)
            return rc;
    }
    return SR_OK;
}

void sr_ebc_config_copy(struct sr_ebc_config *dst, const struct sr_ebc_config *cfg)
{
    dst->num_tables = cfg->num_tables;
    dst->num_features = cfg->num_features;
    dst->stochastic_rounding = cfg->stochastic_rounding;
    dst->tables = sr_malloc(sizeof *dst->tables * (size_t)cfg->num_tables);
    memcpy(dst->tables, cfg->tables, sizeof *dst->tables * (size_t)cfg->num_tables);
    dst->feature_names = sr_malloc(sizeof *dst->feature_names * (size_t)cfg->num_features);
    memcpy(dst->feature_names, cfg->feature_names,
           sizeof *dst->feature_names * (size_t)cfg->num_features);
    dst->feature_table = sr_malloc(sizeof *dst->feature_table * (size_t)cfg->num_features);
    memcpy(dst->feature_table, cfg->feature_table,
           sizeof *dst->feature_table * (size_t)cfg->num_features);
}

void sr_ebc_config_release(struct sr_ebc_config *cfg)
{
    sr_free(cfg->tables);
    sr_free(cfg->feature_names);
    sr_free(cfg->feature_table);
    memset(cfg, 0, sizeof *cfg);
}
