/*
 * What a weights file records beside its tensors: each table's pooling, in
 * the safetensors header's __metadata__ (string values only, as the format
 * requires), one key per table so that the order of the tables does not
 * matter:
 *
 *   "__metadata__": {"format": "pt",
 *                    "shardrec.emb.t0.pooling": "mean",
 *                    "shardrec.emb.t1.pooling": "sum", ...}
 *
 * The writers (weights_io.c, weights_sharded.c, trainer_dist.c's gathering
 * writer, checkpoint_inspect.c's export) pass sr_weights_meta's entries to
 * safetensors.c, which sorts them by key: the same tables give the same
 * bytes whichever writer ran. Readers compare the records with the job's
 * tables (sr_weights_pooling_match) or, in `shardrec eval` without
 * --pooling, take them (sr_weights_pooling_apply). A file without records
 * (older versions, tools/torch_dlrm.py) is read as before; keys that are not
 * "shardrec.emb.TABLE.pooling" are ignored, so later versions may add some.
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"
#include "shardrec/weights_io.h"
#include "train/weights_meta.h"

#define PREFIX "shardrec.emb."
#define SUFFIX ".pooling"
#define HINT_DAMAGED                                                                               \
    "HINT: the file's header is damaged; write the file again (train --save-weights, shardrec "    \
    "export)"

void sr_weights_meta_init(struct sr_weights_meta *m, const struct sr_table_config *tables, int T)
{
    m->n = T;
    m->meta = sr_calloc((size_t)T + 1, sizeof *m->meta);
    m->keys = sr_calloc((size_t)T + 1, sizeof *m->keys);
    for (int t = 0; t < T; t++) {
        snprintf(m->keys[t], sizeof m->keys[t], PREFIX "%s" SUFFIX, tables[t].name);
        m->meta[t] = (struct sr_st_meta){m->keys[t], sr_pooling_name(tables[t].pooling)};
    }
}

void sr_weights_meta_free(struct sr_weights_meta *m)
{
    if (!m)
        return;
    sr_free(m->meta);
    sr_free(m->keys);
    memset(m, 0, sizeof *m);
}

int sr_weights_write(const char *path, int n, const struct sr_st_tensor *tensors,
                     const struct sr_table_config *tables, int T)
{
    struct sr_weights_meta meta;
    sr_weights_meta_init(&meta, tables, T);
    int rc = sr_st_write_meta(path, n, tensors, meta.n, meta.meta);
    sr_weights_meta_free(&meta);
    return rc;
}

/* ---- reading the records ---------------------------------------------------------- */

/* The TABLE of a key "shardrec.emb.TABLE.pooling" into table (SR_NAME_MAX
 * bytes): 1; 0 when the key is not a pooling record; -1 when TABLE is empty
 * or too long. */
static int record_table(const char *key, char *table)
{
    size_t n = strlen(key), p = strlen(PREFIX), s = strlen(SUFFIX);
    if (n < p + s || strncmp(key, PREFIX, p) || strcmp(key + n - s, SUFFIX))
        return 0;
    if (n - p - s < 1 || n - p - s >= SR_NAME_MAX)
        return -1;
    memcpy(table, key + p, n - p - s);
    table[n - p - s] = '\0';
    return 1;
}

static int read_record(const struct sr_st_file *f, const struct sr_st_meta *kv,
                       const struct sr_weights_pooling *seen, int n_seen,
                       struct sr_weights_pooling *out)
{
    if (record_table(kv->key, out->table) < 0)
        return sr_error_set(SR_ERR_DATA,
                            "%s: __metadata__ key \"%.*s\" names no table (an empty name or "
                            "one longer than %d bytes); %s",
                            sr_st_path(f), SR_NAME_MAX + 32, kv->key, SR_NAME_MAX - 1,
                            HINT_DAMAGED);
    if (sr_pooling_parse(kv->value, &out->pooling))
        return sr_error_set(SR_ERR_DATA,
                            "%s: __metadata__ \"%s\" is \"%.32s\", not \"sum\" or \"mean\"; %s",
                            sr_st_path(f), kv->key, kv->value, HINT_DAMAGED);
    for (int i = 0; i < n_seen; i++)
        if (!strcmp(seen[i].table, out->table))
            return sr_error_set(SR_ERR_DATA, "%s: __metadata__ \"%s\" appears twice; %s",
                                sr_st_path(f), kv->key, HINT_DAMAGED);
    return SR_OK;
}

int sr_weights_pooling_read(const struct sr_st_file *f, struct sr_weights_pooling **out, int *n)
{
    int m = sr_st_meta_count(f), rc = SR_OK;
    struct sr_weights_pooling *rec = sr_calloc((size_t)m + 1, sizeof *rec);
    char table[SR_NAME_MAX];
    *n = 0;
    for (int i = 0; i < m && !rc; i++) {
        struct sr_st_meta kv;
        sr_st_meta_get(f, i, &kv);
        if (record_table(kv.key, table) == 0)
            continue; /* not a pooling record */
        if (!(rc = read_record(f, &kv, rec, *n, &rec[*n])))
            (*n)++;
    }
    if (rc || *n == 0) {
        sr_free(rec);
        rec = NULL;
        *n = 0;
    }
    *out = rec;
    return rc;
}

/* ---- against the job's tables ---------------------------------------------------- */

static int table_index(const struct sr_table_config *tables, int T, const char *name)
{
    for (int t = 0; t < T; t++)
        if (!strcmp(tables[t].name, name))
            return t;
    return -1;
}

/* The HINT for a difference: one flag when the file records one pooling for
 * every table, else the config's tables. */
static int differ(const struct sr_st_file *f, const struct sr_weights_pooling *rec, int n,
                  const struct sr_weights_pooling *r, enum sr_pooling job)
{
    int same = 1;
    for (int i = 1; i < n; i++)
        same &= rec[i].pooling == rec[0].pooling;
    char hint[160];
    if (same)
        snprintf(hint, sizeof hint, "give --pooling %s, as the model was trained",
                 sr_pooling_name(r->pooling));
    else
        snprintf(hint, sizeof hint,
                 "give each table the pooling the file records (shardrec inspect lists "
                 "them) in a --config's \"tables\"");
    return sr_error_set(SR_ERR_DATA,
                        "%s: table %s has pooling %s in the file (__metadata__ \"" PREFIX
                        "%s" SUFFIX "\"), %s in this job; HINT: %s",
                        sr_st_path(f), r->table, sr_pooling_name(r->pooling), r->table,
                        sr_pooling_name(job), hint);
}

int sr_weights_pooling_check_held(const struct sr_st_file *f, const struct sr_weights_pooling *rec,
                                  int n)
{
    for (int i = 0; i < n; i++) {
        char name[SR_NAME_MAX + 16];
        struct sr_st_tensor t;
        snprintf(name, sizeof name, "emb.%s.weight", rec[i].table);
        if (sr_st_find_any(f, name, &t))
            return sr_error_set(SR_ERR_DATA,
                                "%s: __metadata__ \"" PREFIX "%s" SUFFIX "\" records a table the "
                                "file's tensors do not hold (no %s); %s",
                                sr_st_path(f), rec[i].table, name, HINT_DAMAGED);
    }
    return SR_OK;
}

int sr_weights_pooling_match(const struct sr_st_file *f, const struct sr_table_config *tables,
                             int T, int strict, enum sr_pooling *adopt, int *recorded)
{
    struct sr_weights_pooling *rec;
    int n, rc = sr_weights_pooling_read(f, &rec, &n), known = 0;
    if (!rc && strict)
        rc = sr_weights_pooling_check_held(f, rec, n);
    for (int i = 0; !rc && i < n; i++) {
        int t = table_index(tables, T, rec[i].table);
        known += t >= 0;
        if (t >= 0 && adopt)
            adopt[t] = rec[i].pooling;
        else if (t >= 0 && rec[i].pooling != tables[t].pooling)
            rc = differ(f, rec, n, &rec[i], tables[t].pooling);
    }
    sr_free(rec);
    if (recorded)
        *recorded = rc ? 0 : known;
    return rc;
}

int sr_weights_pooling_apply(const char *path, struct sr_table_config *tables, int T, int adopt,
                             int *recorded)
{
    struct sr_st_file *f;
    enum sr_pooling *got = sr_calloc((size_t)T + 1, sizeof *got);
    int rc = sr_st_open(&f, path);
    if (recorded)
        *recorded = 0;
    for (int t = 0; t < T; t++)
        got[t] = tables[t].pooling;
    if (!rc)
        rc = sr_weights_pooling_match(f, tables, T, 0, adopt ? got : NULL, recorded);
    for (int t = 0; !rc && t < T; t++)
        tables[t].pooling = got[t];
    sr_st_close(f);
    sr_free(got);
    return rc;
}
