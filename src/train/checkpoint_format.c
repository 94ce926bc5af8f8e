/*
 * The checkpoint format's shared half (checkpoint_format.h): names, finding
 * and reading a manifest, checking a file against it, and the block copy
 * that moves rows and columns of one plan's shard into another's.
 *
 * A version 2 manifest records, beside version 1's step, world size, plan
 * hash, settings hashes and files:
 *
 *   "global_batch": G,  "optimizer": "adam",  "emb_optimizer": "adagrad",
 *   "tables": [{"name": "t0", "rows": E, "dim": D, "dtype": "fp32",
 *               "pooling": "sum"}, ...]   (dtype, pooling: absent in older ones)
 *   "plan": { the plan file's JSON (sr_plan_to_json) },
 *   "dense_tensors": [{"name": "bot_mlp.0.weight", "shape": [16, 13],
 *                      "offset": 0}, ...]   (floats into dense.params)
 *
 * so a checkpoint can be resharded, inspected and exported with nothing but
 * its folder.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/files.h"
#include "shardrec/rng.h"
#include "train/checkpoint.h"
#include "train/checkpoint_format.h"
#include "core/json_kind.h"

#define MANIFEST_MAX ((size_t)16 << 20)
#define RANKS_MAX    (1 << 20) /* a world larger than any run writes: a damaged field */

void sr_ckpt_shard_name(char *buf, const char *table, int shard, const char *what)
{
    if (shard < 0)
        snprintf(buf, SR_CKPT_NAME_CAP, "emb.%s.dp.%s", table, what);
    else
        snprintf(buf, SR_CKPT_NAME_CAP, "emb.%s.shard%d.%s", table, shard, what);
}

void sr_ckpt_rank_file(char *buf, size_t cap, int rank)
{
    snprintf(buf, cap, "rank-%05d.safetensors", rank);
}

int sr_checkpoint_file_checksum(const char *path, uint64_t *hash, uint64_t *bytes)
{
    unsigned char buf[1 << 16];
    size_t n;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sr_error_set(SR_ERR_DATA, "checkpoint file %s: cannot open (%s)", path,
                            strerror(errno));
    *hash = SR_HASH_INIT;
    *bytes = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        *hash = sr_hash_bytes(*hash, buf, n);
        *bytes += n;
    }
    int bad = ferror(f);
    fclose(f);
    return bad ? sr_error_set(SR_ERR_DATA, "checkpoint file %s: read error", path) : SR_OK;
}

cJSON *sr_ckpt_read_manifest(const char *dir)
{
    char path[SR_CKPT_DIR_CAP + 32], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, SR_CKPT_MANIFEST);
    FILE *probe = fopen(path, "rb"); /* absent: quietly no manifest */
    if (!probe)
        return NULL;
    fclose(probe);
    if (sr_file_read_small(path, "manifest", MANIFEST_MAX, &text, &len)) {
        sr_error_clear();
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    sr_free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, SR_CKPT_FORMAT) ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "step"))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* The latest complete step folder of `parent` into ck->dir, its manifest read. */
static int find_latest(struct sr_ckpt *ck, const char *parent, const char *what, FILE *log)
{
    int64_t best = -1;
    DIR *d = opendir(parent);
    struct dirent *e;
    char path[SR_CKPT_DIR_CAP];
    if (!d)
        return sr_error_set(SR_ERR_DATA,
                            "%s%s%s: cannot open (%s); HINT: give a step-NNNNNNNN "
                            "folder or the folder that holds them",
                            what ? what : "", what ? " " : "", parent, strerror(errno));
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        char *end;
        if (strncmp(nm, "step-", 5) || strlen(nm) != 13)
            continue;
        int64_t s = strtoll(nm + 5, &end, 10);
        if (*end || s <= best)
            continue;
        snprintf(path, sizeof path, "%s/%s", parent, nm);
        cJSON *j = sr_ckpt_read_manifest(path);
        if (!j) {
            if (log)
                fprintf(log, "warning: %s%s%s is incomplete (no valid manifest.json); skipped\n",
                        what ? what : "", what ? ": " : "", path);
            continue;
        }
        cJSON_Delete(ck->manifest);
        ck->manifest = j, best = s;
        snprintf(ck->dir, sizeof ck->dir, "%s", path);
    }
    closedir(d);
    if (!ck->manifest)
        return sr_error_set(SR_ERR_DATA,
                            "%s%sno complete checkpoint in %s; HINT: give a folder that holds "
                            "step-NNNNNNNN folders with a manifest.json",
                            what ? what : "", what ? ": " : "", parent);
    return SR_OK;
}

static const cJSON *item(const cJSON *j, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(j, key);
}

static int bad_field(const struct sr_ckpt *ck, const char *field)
{
    return sr_error_set(SR_ERR_DATA,
                        "checkpoint %s/%s: \"%s\" is missing or malformed; HINT: the manifest "
                        "was edited or damaged; use another checkpoint",
                        ck->dir, SR_CKPT_MANIFEST, field);
}

/* "tables" into ck->ec, one feature per table (named as it). */
static int read_tables(struct sr_ckpt *ck)
{
    const cJSON *arr = item(ck->manifest, "tables"), *it;
    int n = cJSON_GetArraySize(arr), t = 0, pooled = 0;
    if (!cJSON_IsArray(arr) || n < 1)
        return bad_field(ck, "tables");
    ck->ec.tables = sr_calloc((size_t)n, sizeof *ck->ec.tables);
    ck->ec.feature_names = sr_calloc((size_t)n, sizeof *ck->ec.feature_names);
    ck->ec.feature_table = sr_calloc((size_t)n, sizeof *ck->ec.feature_table);
    ck->ec.num_tables = ck->ec.num_features = n;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *nm = item(it, "name");
        int64_t rows, dim;
        if (!cJSON_IsString(nm) || strlen(nm->valuestring) >= SR_NAME_MAX ||
            !sr_json_int(item(it, "rows"), 1, SR_JSON_INT_MAX, &rows) ||
            !sr_json_int(item(it, "dim"), 1, 1 << 20, &dim))
            return bad_field(ck, "tables");
        struct sr_table_config *tc = &ck->ec.tables[t];
        snprintf(tc->name, sizeof tc->name, "%s", nm->valuestring);
        tc->num_embeddings = rows;
        tc->embedding_dim = (int)dim;
        const cJSON *dt = item(it, "dtype"); /* absent before 16-bit tables: fp32 */
        if (dt && (!cJSON_IsString(dt) || sr_wire_dtype_parse(dt->valuestring, &tc->storage)))
            return bad_field(ck, "tables");
        const cJSON *pool = item(it, "pooling"); /* absent before weights files recorded it */
        if (pool && (!cJSON_IsString(pool) || sr_pooling_parse(pool->valuestring, &tc->pooling)))
            return bad_field(ck, "tables");
        pooled += pool != NULL;
        snprintf(ck->ec.feature_names[t], SR_NAME_MAX, "%s", nm->valuestring);
        ck->ec.feature_table[t] = t;
        t++;
    }
    if (pooled && pooled != n) /* every table's or none */
        return bad_field(ck, "tables");
    ck->pooling_recorded = pooled == n;
    if (sr_ebc_config_validate(&ck->ec))
        return sr_error_set(SR_ERR_DATA, "checkpoint %s/%s: \"tables\": %s", ck->dir,
                            SR_CKPT_MANIFEST, sr_error_message());
    return SR_OK;
}

static int read_plan(struct sr_ckpt *ck)
{
    const cJSON *p = item(ck->manifest, "plan");
    char source[SR_CKPT_DIR_CAP + 32];
    int64_t local;
    if (!cJSON_IsObject(p) || !sr_json_int(item(p, "local_size"), 1, ck->world_size, &local))
        return bad_field(ck, "plan");
    char *text = cJSON_PrintUnformatted(p);
    snprintf(source, sizeof source, "%s/%s", ck->dir, SR_CKPT_MANIFEST);
    int rc = sr_plan_from_json(&ck->plan, text, source, &ck->ec, ck->world_size, (int)local);
    cJSON_free(text);
    return rc ? sr_error_set(SR_ERR_DATA, "%s", sr_error_message()) : SR_OK;
}

static int read_version2(struct sr_ckpt *ck)
{
    const cJSON *o = item(ck->manifest, "optimizer"), *e = item(ck->manifest, "emb_optimizer");
    if (!sr_json_int(item(ck->manifest, "global_batch"), 1, SR_JSON_INT_MAX, &ck->global_batch))
        return bad_field(ck, "global_batch");
    if (!cJSON_IsString(o) || sr_optim_kind_parse(o->valuestring, &ck->dense_optim))
        return bad_field(ck, "optimizer");
    if (!cJSON_IsString(e) || sr_optim_kind_parse(e->valuestring, &ck->emb_optim))
        return bad_field(ck, "emb_optimizer");
    ck->have_optim = 1;
    int rc = read_tables(ck);
    return rc ? rc : read_plan(ck);
}

/* The fields every version has; version 1's global batch from the data position. */
static int read_fields(struct sr_ckpt *ck)
{
    const cJSON *m = ck->manifest, *v = item(m, "version");
    int64_t version, world, next;
    if (!sr_json_int(item(m, "step"), 0, SR_JSON_INT_MAX, &ck->step))
        return bad_field(ck, "step");
    if (!sr_json_int(v, 1, SR_CKPT_VERSION, &version))
        return sr_error_set(SR_ERR_DATA,
                            "checkpoint %s: manifest version %.17g; this build reads 1 to %d; "
                            "HINT: read it with the shardrec that wrote it",
                            ck->dir, cJSON_IsNumber(v) ? v->valuedouble : 0.0, SR_CKPT_VERSION);
    ck->version = (int)version;
    if (!sr_json_int(item(m, "world_size"), 1, RANKS_MAX, &world))
        return bad_field(ck, "world_size");
    ck->world_size = (int)world;
    /* dense.safetensors and a file a rank (every version writes them): a
     * damaged world size cannot then size what inspect and export allocate */
    const cJSON *files = item(m, "files");
    if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != ck->world_size + 1)
        return bad_field(ck, "files");
    if (ck->version >= 2)
        return read_version2(ck);
    if (ck->step > 0 && sr_json_int(item(item(m, "data"), "next_sample"), 0, SR_JSON_INT_MAX, &next))
        ck->global_batch = next / ck->step;
    return SR_OK;
}

int sr_ckpt_open(struct sr_ckpt *ck, const char *path, int latest, const char *what, FILE *log)
{
    memset(ck, 0, sizeof *ck);
    int rc = SR_OK;
    if (latest < 0)
        ck->manifest = sr_ckpt_read_manifest(path);
    if (latest > 0 || (latest < 0 && !ck->manifest)) {
        rc = find_latest(ck, path, what, log);
    } else {
        snprintf(ck->dir, sizeof ck->dir, "%s", path);
        if (!ck->manifest && !(ck->manifest = sr_ckpt_read_manifest(path)))
            rc = sr_error_set(SR_ERR_DATA,
                              "%s%s%s: no complete checkpoint there (no valid manifest.json); "
                              "HINT: give a DIR/step-NNNNNNNN folder",
                              what ? what : "", what ? " " : "", path);
    }
    if (!rc)
        rc = read_fields(ck);
    if (rc)
        sr_ckpt_close(ck);
    return rc;
}

void sr_ckpt_close(struct sr_ckpt *ck)
{
    cJSON_Delete(ck->manifest);
    sr_plan_free(ck->plan);
    if (ck->ec.tables)
        sr_ebc_config_release(&ck->ec);
    ck->manifest = NULL;
    ck->plan = NULL;
}

static const char *str_of(const cJSON *j, const char *key)
{
    const cJSON *v = item(j, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

int sr_ckpt_verify(const struct sr_ckpt *ck, const char *name)
{
    char path[SR_CKPT_DIR_CAP + 64], hex[32];
    const cJSON *f;
    snprintf(path, sizeof path, "%s/%s", ck->dir, name);
    cJSON_ArrayForEach(f, item(ck->manifest, "files"))
    {
        if (strcmp(str_of(f, "name"), name))
            continue;
        uint64_t h, bytes;
        int64_t listed = -1;
        int rc = sr_checkpoint_file_checksum(path, &h, &bytes);
        if (rc)
            return rc;
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        const cJSON *b = item(f, "bytes");
        if (!sr_json_int(b, 0, SR_JSON_INT_MAX, &listed) || (uint64_t)listed != bytes ||
            strcmp(str_of(f, "fnv1a64"), hex))
            return sr_error_set(SR_ERR_DATA,
                                "checkpoint file %s is damaged: %" PRIu64 " bytes with checksum "
                                "%s, the manifest says %.0f bytes with %s; HINT: resume from an "
                                "earlier checkpoint (give its PATH)",
                                path, bytes, hex, cJSON_IsNumber(b) ? b->valuedouble : -1.0,
                                str_of(f, "fnv1a64"));
        return SR_OK;
    }
    return sr_error_set(SR_ERR_DATA, "checkpoint %s: the manifest lists no file %s", ck->dir, name);
}

int64_t sr_ckpt_table_rows(const struct sr_plan *p, int t)
{
    int64_t e = 0;
    for (int j = 0; j < p->tables[t].num_shards; j++) {
        const struct sr_shard *s = &p->tables[t].shards[j];
        e = s->row_offset + s->rows > e ? s->row_offset + s->rows : e;
    }
    return e;
}

int sr_ckpt_table_dim(const struct sr_plan *p, int t)
{
    int d = 0;
    for (int j = 0; j < p->tables[t].num_shards; j++) {
        const struct sr_shard *s = &p->tables[t].shards[j];
        d = s->col_offset + s->cols > d ? s->col_offset + s->cols : d;
    }
    return d;
}

void sr_ckpt_state_layout(enum sr_optim_kind kind, int64_t rows, int cols, int *planes,
                          int64_t *per)
{
    int per_row = 0;
    *planes = sr_optim_state_per_element(kind, &per_row);
    *per = per_row ? rows : rows * cols;
}

void sr_ckpt_copy_block(const float *src, const struct sr_shard *from, float *dst,
                        const struct sr_shard *to, int64_t r0, int64_t r1, int c0, int c1)
{
    for (int64_t r = r0; r < r1; r++)
        memcpy(dst + (r - to->row_offset) * to->cols + (c0 - to->col_offset),
               src + (r - from->row_offset) * from->cols + (c0 - from->col_offset),
               sizeof(float) * (size_t)(c1 - c0));
}
