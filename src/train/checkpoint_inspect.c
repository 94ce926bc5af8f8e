/*
 * `shardrec inspect` and `shardrec export` (shardrec/checkpoint.h): a
 * checkpoint read with nothing but its folder. The manifest (version 2,
 * checkpoint_format.c) records the tables, the plan, the optimizers and the
 * dense tensors, which is all it takes to know every tensor each file must
 * hold:
 *
 *   rank-RRRRR.safetensors  for each table: every shard the plan puts on rank
 *                           R, "emb.T.shardJ.weight" [rows, cols] and, unless
 *                           sgd or empty, "emb.T.shardJ.state" [planes x per] (adagrad
 *                           1 x rows*cols, rowwise 1 x rows, adam 2 x
 *                           rows*cols); a dp table whole as "emb.T.dp.*"
 *   dense.safetensors       "dense.params" [n] (n: the dense tensors' end) and
 *                           "dense.optim_state" [planes x n] unless sgd
 *
 * and nothing else. Inspect checks exactly that, after every file's size and
 * checksum, so every shard is present once. Export assembles each table
 * whole in host memory (an offline tool) and writes the weights file of
 * `train --save-weights` (sr_st_write: the same names, shapes and bytes).
 */
#include <inttypes.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/checkpoint.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/safetensors.h"
#include "device/emb_storage.h"
#include "train/checkpoint_format.h"
#include "train/weights_meta.h"
#include "core/json_kind.h"

#define HINT_OTHER "HINT: resume from (or export) an earlier checkpoint"

static const cJSON *item(const cJSON *j, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(j, key);
}

static void file_path(const struct sr_ckpt *ck, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", ck->dir, name);
}

/* The manifest lists dense.safetensors and rank-00000 .. rank-(W-1), each once. */
static int check_file_list(const struct sr_ckpt *ck)
{
    const cJSON *f;
    int n = 0, dense = 0, *seen = sr_calloc((size_t)ck->world_size, sizeof *seen), rc = SR_OK;
    char want[32];
    cJSON_ArrayForEach(f, item(ck->manifest, "files"))
    {
        const cJSON *nm = item(f, "name");
        const char *s = cJSON_IsString(nm) ? nm->valuestring : "";
        int r = -1;
        n++;
        if (!strcmp(s, SR_CKPT_DENSE))
            dense++;
        else if (sscanf(s, "rank-%5d.safetensors", &r) == 1 && r >= 0 && r < ck->world_size &&
                 (sr_ckpt_rank_file(want, sizeof want, r), !strcmp(want, s)))
            seen[r]++;
        else if (!rc)
            rc = sr_error_set(SR_ERR_DATA, "checkpoint %s/%s: lists a file '%s' that a "
                              "checkpoint of %d ranks does not have; %s", ck->dir,
                              SR_CKPT_MANIFEST, s, ck->world_size, HINT_OTHER);
    }
    for (int r = 0; !rc && r < ck->world_size; r++)
        if (seen[r] != 1) {
            sr_ckpt_rank_file(want, sizeof want, r);
            rc = sr_error_set(SR_ERR_DATA, "checkpoint %s/%s: lists %s %d times, expected once; %s",
                              ck->dir, SR_CKPT_MANIFEST, want, seen[r], HINT_OTHER);
        }
    if (!rc && dense != 1)
        rc = sr_error_set(SR_ERR_DATA, "checkpoint %s/%s: lists %s %d times, expected once; %s",
                          ck->dir, SR_CKPT_MANIFEST, SR_CKPT_DENSE, dense, HINT_OTHER);
    sr_free(seen);
    return rc;
}

/* Tensor `name` of f with exactly the shape [d0] or [d0, d1] (d1 < 0: 1-D). */
static int expect(const struct sr_st_file *f, const char *name, int64_t d0, int64_t d1,
                  const char *what)
{
    struct sr_st_tensor t;
    int64_t want[2] = {d0, d1};
    char have[96], need[96];
    if (sr_st_find_any(f, name, &t)) {
        sr_error_clear();
        return sr_error_set(SR_ERR_DATA, "checkpoint file %s: tensor %s (%s) is missing; %s",
                            sr_st_path(f), name, what, HINT_OTHER);
    }
    const int ndim = t.ndim;
    const int64_t *shape = t.shape;
    if (t.dtype != SR_DTYPE_F32 && (d1 < 0 || !strstr(name, ".weight")))
        return sr_error_set(SR_ERR_DATA, "checkpoint file %s: tensor %s is %s; only table "
                            "weights may be 16-bit; %s", sr_st_path(f), name,
                            sr_st_dtype_name(t.dtype), HINT_OTHER);
    int nd = d1 < 0 ? 1 : 2;
    if (ndim != nd || shape[0] != d0 || (nd == 2 && shape[1] != d1)) {
        sr_st_shape_str(ndim, shape, have, sizeof have);
        sr_st_shape_str(nd, want, need, sizeof need);
        return sr_error_set(SR_ERR_DATA, "checkpoint file %s: tensor %s has shape %s, %s needs "
                            "%s; %s", sr_st_path(f), name, have, what, need, HINT_OTHER);
    }
    return SR_OK;
}

/* Shard j of table t (j < 0: a dp copy, the whole table) in file f. */
static int expect_shard(const struct sr_ckpt *ck, const struct sr_st_file *f, int t, int j,
                        int *count)
{
    const struct sr_table_plan *tp = &ck->plan->tables[t];
    const struct sr_shard *s = &tp->shards[j < 0 ? 0 : j];
    char name[SR_CKPT_NAME_CAP], what[SR_CKPT_NAME_CAP + 64];
    int planes;
    int64_t per;
    snprintf(what, sizeof what, "table '%s' %s %d of the plan", tp->name, j < 0 ? "dp copy" : "shard",
             j < 0 ? 0 : j);
    sr_ckpt_shard_name(name, tp->name, j, "weight");
    int rc = expect(f, name, s->rows, s->cols, what);
    sr_ckpt_state_layout(ck->emb_optim, s->rows, s->cols, &planes, &per);
    (*count)++;
    if (rc || !planes || !per) /* no state tensor for sgd or an empty shard */
        return rc;
    sr_ckpt_shard_name(name, tp->name, j, "state");
    (*count)++;
    return expect(f, name, planes * per, -1, what);
}

/* Rank r's file holds exactly the shards the plan puts on rank r. */
static int check_rank_file(const struct sr_ckpt *ck, int r)
{
    char name[32], path[SR_CKPT_DIR_CAP + 64];
    struct sr_st_file *f;
    int count = 0, rc;
    sr_ckpt_rank_file(name, sizeof name, r);
    file_path(ck, name, path, sizeof path);
    if ((rc = sr_st_open(&f, path)))
        return rc;
    for (int t = 0; !rc && t < ck->plan->num_tables; t++) {
        const struct sr_table_plan *tp = &ck->plan->tables[t];
        if (tp->type == SR_SHARDING_TYPE_DATA_PARALLEL) {
            rc = expect_shard(ck, f, t, -1, &count);
            continue;
        }
        for (int j = 0; !rc && j < tp->num_shards; j++)
            if (tp->shards[j].rank == r)
                rc = expect_shard(ck, f, t, j, &count);
    }
    if (!rc && sr_st_count(f) != count)
        rc = sr_error_set(SR_ERR_DATA, "checkpoint file %s: holds %d tensors, the plan puts %d "
                          "on rank %d (a shard twice, or one of another rank); %s", path,
                          sr_st_count(f), count, r, HINT_OTHER);
    sr_st_close(f);
    return rc;
}

#define DENSE_MAX ((int64_t)1 << 40) /* floats (4 TiB): an offset, dim or size past it is damage */

/* The dense tensors' extent in dense.params (floats), or -1 when malformed. */
static int64_t dense_floats(const struct sr_ckpt *ck)
{
    const cJSON *arr = item(ck->manifest, "dense_tensors"), *it;
    int64_t n = 0;
    if (!cJSON_IsArray(arr))
        return -1;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *shape = item(it, "shape"), *d;
        int64_t numel = 1, off, extent;
        if (!cJSON_IsString(item(it, "name")) ||
            !sr_json_int(item(it, "offset"), 0, DENSE_MAX, &off) || !cJSON_IsArray(shape) ||
            cJSON_GetArraySize(shape) < 1 || cJSON_GetArraySize(shape) > 2)
            return -1;
        cJSON_ArrayForEach(d, shape)
        {
            if (!sr_json_int(d, 0, DENSE_MAX, &extent) || (extent && numel > DENSE_MAX / extent))
                return -1;
            numel *= extent;
        }
        n = off + numel > n ? off + numel : n; /* both at most 2^40: no overflow */
    }
    return n;
}

static int check_dense(const struct sr_ckpt *ck)
{
    char path[SR_CKPT_DIR_CAP + 64];
    struct sr_st_file *f;
    int64_t n = dense_floats(ck);
    int per_row, planes = sr_optim_state_per_element(ck->dense_optim, &per_row), rc;
    if (n < 0)
        return sr_error_set(SR_ERR_DATA, "checkpoint %s/%s: \"dense_tensors\" is missing or "
                            "malformed; %s", ck->dir, SR_CKPT_MANIFEST, HINT_OTHER);
    file_path(ck, SR_CKPT_DENSE, path, sizeof path);
    if ((rc = sr_st_open(&f, path)))
        return rc;
    rc = expect(f, "dense.params", n, -1, "the dense tensors");
    if (!rc && planes)
        rc = expect(f, "dense.optim_state", planes * n, -1, sr_optim_kind_name(ck->dense_optim));
    if (!rc && sr_st_count(f) != 1 + (planes > 0))
        rc = sr_error_set(SR_ERR_DATA, "checkpoint file %s: holds %d tensors, expected %d "
                          "(dense.params%s); %s", path, sr_st_count(f), 1 + (planes > 0),
                          planes ? ", dense.optim_state" : "", HINT_OTHER);
    sr_st_close(f);
    return rc;
}

static void print_plan(const struct sr_ckpt *ck, FILE *out)
{
    fprintf(out, "tables (%d), plan for %d rank%s, %d per node:\n", ck->plan->num_tables,
            ck->plan->world_size, ck->plan->world_size > 1 ? "s" : "", ck->plan->local_size);
    for (int t = 0; t < ck->plan->num_tables; t++) {
        const struct sr_table_plan *tp = &ck->plan->tables[t];
        const struct sr_table_config *tc = &ck->ec.tables[t];
        fprintf(out, "  %-12s %10" PRId64 " x %-4d %-4s %-4s %d shard%s on rank%s", tp->name,
                tc->num_embeddings, tc->embedding_dim, sr_dtype_name(tc->storage),
                sr_sharding_type_name(tp->type),
                tp->num_shards, tp->num_shards > 1 ? "s" : "", tp->num_shards > 1 ? "s" : "");
        for (int j = 0; j < tp->num_shards && j < 16; j++)
            fprintf(out, "%s%d", j ? "," : " ", tp->shards[j].rank);
        fprintf(out, "%s\n", tp->num_shards > 16 ? ",..." : "");
    }
}

static void print_summary(const struct sr_ckpt *ck, FILE *out)
{
    const cJSON *f, *s;
    fprintf(out, "checkpoint %s: sound\n", ck->dir);
    fprintf(out, "step %" PRId64 ", world size %d, manifest version %d", ck->step, ck->world_size,
            ck->version);
    if (ck->global_batch)
        fprintf(out, ", global batch %" PRId64, ck->global_batch);
    fprintf(out, "\n");
    if (ck->have_optim)
        fprintf(out, "optimizers: dense %s, embeddings %s\n", sr_optim_kind_name(ck->dense_optim),
                sr_optim_kind_name(ck->emb_optim));
    const cJSON *rng = item(ck->manifest, "rng"), *lr = item(ck->manifest, "lr_schedule");
    if (cJSON_IsString(item(rng, "seed")))
        fprintf(out, "seed %s", item(rng, "seed")->valuestring);
    if (cJSON_IsString(item(lr, "spec")) && cJSON_IsNumber(item(lr, "dense_lr")) &&
        cJSON_IsNumber(item(lr, "emb_lr")))
        fprintf(out, ", lr schedule '%s' (next step: dense lr %g, embedding lr %g)",
                item(lr, "spec")->valuestring, item(lr, "dense_lr")->valuedouble,
                item(lr, "emb_lr")->valuedouble);
    fprintf(out, "\n");
    if (ck->plan)
        print_plan(ck, out);
    fprintf(out, "settings (hashes):");
    cJSON_ArrayForEach(s, item(ck->manifest, "settings"))
        fprintf(out, " %s=%s", s->string, cJSON_IsString(s) ? s->valuestring : "?");
    fprintf(out, "\nfiles:\n");
    cJSON_ArrayForEach(f, item(ck->manifest, "files"))
        fprintf(out, "  %-26s %12.0f bytes  fnv1a64 %s\n", item(f, "name")->valuestring,
                item(f, "bytes")->valuedouble, cJSON_IsString(item(f, "fnv1a64"))
                                                   ? item(f, "fnv1a64")->valuestring : "?");
}

/* Everything inspect checks, on an open checkpoint. */
static int check_all(const struct sr_ckpt *ck)
{
    const cJSON *f;
    int rc = check_file_list(ck);
    cJSON_ArrayForEach(f, item(ck->manifest, "files"))
    {
        if (!rc)
            rc = sr_ckpt_verify(ck, item(f, "name")->valuestring);
    }
    if (rc || ck->version < 2)
        return rc;
    if (ck->plan->world_size != ck->world_size)
        return sr_error_set(SR_ERR_DATA, "checkpoint %s/%s: the plan is for %d ranks, the "
                            "checkpoint has %d; %s", ck->dir, SR_CKPT_MANIFEST,
                            ck->plan->world_size, ck->world_size, HINT_OTHER);
    for (int r = 0; !rc && r < ck->world_size; r++)
        rc = check_rank_file(ck, r);
    return rc ? rc : check_dense(ck);
}

int sr_checkpoint_inspect(const char *path, FILE *out)
{
    struct sr_ckpt ck;
    int rc = sr_ckpt_open(&ck, path, -1, NULL, out); /* cli_error names the command */
    if (rc)
        return rc;
    if (!(rc = check_all(&ck)) && out)
        print_summary(&ck, out);
    if (!rc && out && ck.version < 2)
        fprintf(out, "(a version 1 manifest records no plan: tensor shapes were not checked)\n");
    sr_ckpt_close(&ck);
    return rc;
}

/* ---- export ------------------------------------------------------------------------------ */

/* The output is none of the checkpoint's files (files.h). */
static int check_out(const struct sr_ckpt *ck, const char *out_path)
{
    int n = ck->world_size + 3, k = 0;
    struct sr_named_file *nf = sr_calloc((size_t)n, sizeof *nf);
    char(*paths)[SR_CKPT_DIR_CAP + 64] = sr_calloc((size_t)n, sizeof *paths), name[32];
    file_path(ck, SR_CKPT_MANIFEST, paths[k], sizeof paths[k]), k++;
    file_path(ck, SR_CKPT_DENSE, paths[k], sizeof paths[k]), k++;
    for (int r = 0; r < ck->world_size; r++, k++) {
        sr_ckpt_rank_file(name, sizeof name, r);
        file_path(ck, name, paths[k], sizeof paths[k]);
    }
    for (int i = 0; i < k; i++)
        nf[i] = (struct sr_named_file){"the checkpoint", paths[i], 0};
    nf[k++] = (struct sr_named_file){"--out", out_path, 1};
    int rc = sr_files_check_distinct(nf, k);
    sr_free(paths);
    sr_free(nf);
    return rc;
}

/* Table t whole into full (E x D), from its shards (a dp table: rank 0's copy). */
static int assemble_table(const struct sr_ckpt *ck, struct sr_st_file **files, int t, float *full)
{
    const struct sr_table_plan *tp = &ck->plan->tables[t];
    const struct sr_table_config *tc = &ck->ec.tables[t];
    struct sr_shard whole = {.rows = tc->num_embeddings, .cols = tc->embedding_dim};
    char name[SR_CKPT_NAME_CAP], path[SR_CKPT_DIR_CAP + 64], file[32];
    int dp = tp->type == SR_SHARDING_TYPE_DATA_PARALLEL;
    for (int j = 0; j < (dp ? 1 : tp->num_shards); j++) {
        const struct sr_shard *s = &tp->shards[j];
        struct sr_st_tensor src;
        int rc;
        if (!files[s->rank]) {
            sr_ckpt_rank_file(file, sizeof file, s->rank);
            file_path(ck, file, path, sizeof path);
            if ((rc = sr_st_open(&files[s->rank], path)))
                return rc;
        }
        sr_ckpt_shard_name(name, tp->name, dp ? -1 : j, "weight");
        if ((rc = sr_st_find_any(files[s->rank], name, &src)))
            return rc;
        if (src.dtype == SR_DTYPE_F32) {
            sr_ckpt_copy_block(src.data, s, full, &whole, s->row_offset, s->row_offset + s->rows,
                               s->col_offset, s->col_offset + s->cols);
            continue;
        }
        for (int64_t r = 0; r < s->rows; r++) /* 16-bit tables widen (exact) into the fp32 file */
            for (int c = 0; c < s->cols; c++)
                full[(s->row_offset + r) * whole.cols + s->col_offset + c] =
                    sr_emb_get(src.data, src.dtype, r * s->cols + c);
    }
    return SR_OK;
}

/* The dense tensors, views into dense.params; the caller frees ts' tables. */
static int dense_tensors(const struct sr_ckpt *ck, const struct sr_st_file *f,
                         struct sr_st_tensor *ts, int *n)
{
    const float *params;
    const cJSON *it, *d;
    int rc = sr_st_find(f, "dense.params", &params, NULL, NULL);
    *n = 0;
    cJSON_ArrayForEach(it, item(ck->manifest, "dense_tensors"))
    {
        struct sr_st_tensor *x = &ts[(*n)++];
        x->name = item(it, "name")->valuestring;
        x->ndim = 0;
        cJSON_ArrayForEach(d, item(it, "shape")) x->shape[x->ndim++] = (int64_t)d->valuedouble;
        x->data = params + (int64_t)item(it, "offset")->valuedouble;
    }
    return rc;
}

static int write_merged(const struct sr_ckpt *ck, const char *out_path)
{
    int nd = cJSON_GetArraySize(item(ck->manifest, "dense_tensors")), T = ck->ec.num_tables, n = 0;
    struct sr_st_tensor *ts = sr_calloc((size_t)(nd + T), sizeof *ts);
    struct sr_st_file **files = sr_calloc((size_t)ck->world_size, sizeof *files), *df = NULL;
    char(*names)[SR_CKPT_NAME_CAP] = sr_calloc((size_t)T, sizeof *names);
    char path[SR_CKPT_DIR_CAP + 64];
    file_path(ck, SR_CKPT_DENSE, path, sizeof path);
    int rc = sr_st_open(&df, path);
    if (!rc)
        rc = dense_tensors(ck, df, ts, &n);
    for (int t = 0; !rc && t < T; t++) {
        const struct sr_table_config *tc = &ck->ec.tables[t];
        float *full = sr_malloc(sizeof(float) * (size_t)tc->num_embeddings *
                                (size_t)tc->embedding_dim);
        snprintf(names[t], SR_CKPT_NAME_CAP, "emb.%s.weight", tc->name);
        ts[n++] = (struct sr_st_tensor){.name = names[t], .ndim = 2,
                                        .shape = {tc->num_embeddings, tc->embedding_dim},
                                        .data = full};
        rc = assemble_table(ck, files, t, full);
    }
    /* what --save-weights records: the pooling, when known; a full disk is the
     * run's failure (its message names the file and the reason) */
    if (!rc && (rc = sr_weights_write(out_path, n, ts, ck->ec.tables,
                                      ck->pooling_recorded ? T : 0)) == SR_ERR_IO)
        rc = sr_error_set(SR_ERR_WRITE, "%s", sr_error_message());
    for (int t = 0; t < T; t++)
        sr_free((void *)ts[nd + t].data);
    for (int r = 0; r < ck->world_size; r++)
        sr_st_close(files[r]);
    sr_st_close(df);
    sr_free(names);
    sr_free(files);
    sr_free(ts);
    return rc;
}

int sr_checkpoint_export(const char *path, const char *out_path)
{
    struct sr_ckpt ck;
    int rc = sr_ckpt_open(&ck, path, -1, NULL, NULL); /* cli_error names the command */
    if (rc)
        return rc;
    if (ck.version < 2)
        rc = sr_error_set(SR_ERR_DATA, "%s: a version 1 checkpoint does not record its "
                          "dense tensors and plan; HINT: resume it and save with --save-weights",
                          ck.dir);
    if (!rc)
        rc = check_all(&ck); /* first: what check_out allocates follows a checked world */
    if (!rc)
        rc = check_out(&ck, out_path);
    if (!rc)
        rc = write_merged(&ck, out_path);
    sr_ckpt_close(&ck);
    return rc;
}

int sr_checkpoint_pooling_apply(const char *path, struct sr_table_config *tables, int T, int adopt,
                                int *recorded)
{
    struct sr_ckpt ck;
    int rc = SR_OK;
    *recorded = 0;
    if (sr_ckpt_open(&ck, path, -1, NULL, NULL))
        return SR_OK; /* named, with the reason, when the checkpoint is read */
    for (int t = 0; ck.pooling_recorded && !rc && t < T; t++) {
        const struct sr_table_config *old = NULL;
        for (int k = 0; k < ck.ec.num_tables && !old; k++)
            if (!strcmp(ck.ec.tables[k].name, tables[t].name))
                old = &ck.ec.tables[k];
        if (!old) /* another model: the reading names it */
            continue;
        (*recorded)++;
        if (adopt)
            tables[t].pooling = old->pooling;
        else if (old->pooling != tables[t].pooling)
            rc = sr_error_set(SR_ERR_DATA,
                              "MODEL %s: table %s was trained with pooling %s, this job has %s; "
                              "HINT: give --pooling %s, as the model was trained",
                              ck.dir, tables[t].name, sr_pooling_name(old->pooling),
                              sr_pooling_name(tables[t].pooling), sr_pooling_name(old->pooling));
    }
    sr_ckpt_close(&ck);
    return rc;
}
