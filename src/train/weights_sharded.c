/*
 * --save-weights of a sharded model without gathering the tables: every rank
 * writes its own rows into the one safetensors file (docs/weights.md,
 * "Sharded models"). The file is byte for byte what sr_st_write gives the
 * whole model (the single-rank and gathering writer), because every rank
 * computes the same layout (sr_st_layout) from the config and the plan.
 *
 *   1. rank 0 creates the temporary file beside PATH (atomic_file.h), writes
 *      the header and the dense tensors, sizes the file and fsyncs it;
 *      broadcast (world): rank 0's status and the temporary file's name;
 *   2. every rank opens that name (no O_CREAT: a rank that does not find it,
 *      or finds it of another size, does not share rank 0's file system),
 *      pwrites the rows of the blocks it owns at their offsets (a dp table:
 *      rank 0 only; rw/twrw/tw blocks: contiguous rows; cw pieces: one piece
 *      of each row), fsyncs, and runs the fault-injection hook;
 *      all-gather (world): every rank's outcome;
 *   3. a failure anywhere: every rank returns an error naming PATH and the
 *      ranks that failed, rank 0 removes the temporary file, the old PATH
 *      stays. A rank that could not see the file (and none failed): rank 0
 *      removes it, prints a note, and every rank falls back to the gathering
 *      writer (trainer_dist.c). Else rank 0 renames the file over PATH and
 *      fsyncs the folder; all-gather (world): the rename's outcome.
 *
 * Memory: a rank holds at most one chunk of its rows on the host (the
 * staging buffer, only where the device is not host-visible); rank 0 never
 * holds a table it does not own. Test switch: SR_SAVE_WEIGHTS_UNSHARED=R
 * makes rank R act as if it did not see the file (tests/check_weights_sharded.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/fault.h"
#include "shardrec/safetensors.h"
#include "device/emb_storage.h"
#include "train/trainer_internal.h"
#include "train/weights_meta.h"

#define NAME_CAP     (SR_NAME_MAX + 16)
#define STAGE_BYTES  ((size_t)16 << 20) /* host staging per chunk of rows */
#define MSG_MAX      1024

enum outcome { DONE = 0, UNSHARED = 1, FAILED = 2 };

/* What rank 0 broadcasts after creating the file. */
struct created {
    int64_t rc;
    char tmp[PATH_MAX];
};

/* The model's tensors (dense, then emb.TABLE.weight; tables without data)
 * and their layout, the same on every rank. */
struct job {
    const char *path;
    int n_dense, n;
    struct sr_st_tensor *ts;
    char (*names)[NAME_CAP];
    struct sr_st_layout layout;
    float *pinned; /* rank 0, a device the host cannot address: the dense block */
};

static int job_init(struct sr_trainer *t, const char *path, struct job *j)
{
    const struct sr_train_config *cfg = t->cfg;
    struct sr_weights_meta meta;
    memset(j, 0, sizeof *j);
    j->path = path;
    j->n_dense = sr_dlrm_num_tensors(t->dlrm);
    j->n = j->n_dense + cfg->num_tables;
    j->ts = sr_calloc((size_t)j->n + 1, sizeof *j->ts);
    j->names = sr_calloc((size_t)cfg->num_tables + 1, sizeof *j->names);
    for (int i = 0; i < j->n_dense; i++) {
        float *data;
        sr_dlrm_tensor(t->dlrm, i, &j->ts[i].name, &j->ts[i].ndim, j->ts[i].shape, &data);
        j->ts[i].data = data;
    }
    for (int k = 0; k < cfg->num_tables; k++) {
        const struct sr_table_config *tc = &cfg->tables[k];
        snprintf(j->names[k], NAME_CAP, "emb.%s.weight", tc->name);
        j->ts[j->n_dense + k] = (struct sr_st_tensor){
            .name = j->names[k], .ndim = 2, .shape = {tc->num_embeddings, tc->embedding_dim}};
    }
    sr_weights_meta_init(&meta, cfg->tables, cfg->num_tables);
    int rc = sr_st_layout(path, j->n, j->ts, meta.n, meta.meta, &j->layout);
    sr_weights_meta_free(&meta);
    return rc;
}

static void job_free(struct sr_trainer *t, struct job *j)
{
    sr_dev_free_host(t->dev, j->pinned);
    sr_st_layout_free(&j->layout);
    sr_free(j->names);
    sr_free(j->ts);
}

/* pwrite all of buf at off; errno set on failure. */
static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w, len -= (size_t)w, off += (uint64_t)w;
    }
    return 0;
}

static int io_error(const struct job *j, const char *what, int e)
{
    return sr_error_set(SR_ERR_IO,
                        "%s: cannot %s (%s); HINT: check the free disk space; the old file, if "
                        "any, is unchanged",
                        j->path, what, strerror(e));
}

/* ---- step 1: rank 0 creates the file ------------------------------------------------ */

/* The header, the dense tensors (through pinned memory where the host cannot
 * address the device) and the file's size, fsynced. */
static int write_head(struct sr_trainer *t, struct job *j, int fd)
{
    size_t n_params;
    float *params = sr_dlrm_params(t->dlrm, &n_params);
    if (!t->dev->host_visible) {
        j->pinned = sr_dev_alloc_host(t->dev, sizeof(float) * (n_params ? n_params : 1));
        sr_dev_copy(t->dev, j->pinned, params, sizeof(float) * n_params, NULL);
        sr_dev_sync(t->dev, NULL);
    }
    if (pwrite_all(fd, j->layout.header, j->layout.header_len, 0))
        return io_error(j, "write", errno);
    for (int i = 0; i < j->n_dense; i++) {
        const float *src = j->pinned ? j->pinned + sr_dlrm_tensor_offset(t->dlrm, i) : j->ts[i].data;
        size_t bytes = sizeof(float) * (size_t)sr_st_numel(j->ts[i].ndim, j->ts[i].shape);
        if (bytes && pwrite_all(fd, src, bytes, j->layout.offset[i]))
            return io_error(j, "write", errno);
    }
    if (ftruncate(fd, (off_t)j->layout.file_size) != 0)
        return io_error(j, "size the file", errno);
    if (fsync(fd) != 0) /* visible to the other ranks' hosts (close-to-open) */
        return io_error(j, "write", errno);
    return SR_OK;
}

static int create_file(struct sr_trainer *t, struct job *j, struct sr_atomic_file *af,
                       struct created *c)
{
    int rc = sr_atomic_file_open(af, j->path);
    if (!rc) {
        snprintf(c->tmp, sizeof c->tmp, "%s", af->tmp);
        rc = write_head(t, j, fileno(af->f));
    }
    c->rc = rc;
    return rc;
}

/* ---- step 2: every rank writes its rows ---------------------------------------------- */

/* This rank's block i: its place in the table; 0 when rank 0 does not write
 * it (a dp table on another rank). */
static int my_block(struct sr_trainer *t, int i, struct sr_sharded_ebc_shard *sh, struct sr_shard *s)
{
    sr_sharded_ebc_local_shard(t->sebc, i, sh);
    if (sh->shard < 0) { /* dp: whole on every rank, written by rank 0 */
        *s = (struct sr_shard){.rank = t->rank, .rows = sh->rows, .cols = sh->dim};
        return t->rank == 0;
    }
    *s = t->plan->tables[sh->table].shards[sh->shard];
    return 1;
}

/* Rows [r0, r0 + rows) of block s (host memory at src, (rows, s->cols)) into
 * table k's tensor: one write when the block spans whole rows, else one per
 * row (a cw piece). */
static int write_rows(const struct job *j, int fd, int k, int64_t D, const struct sr_shard *s,
                      int64_t r0, int64_t rows, const float *src)
{
    uint64_t base = j->layout.offset[j->n_dense + k];
    uint64_t at = base + 4 * (uint64_t)((s->row_offset + r0) * D + s->col_offset);
    if (s->cols == D)
        return pwrite_all(fd, src, sizeof(float) * (size_t)(rows * D), at);
    for (int64_t r = 0; r < rows; r++, at += 4 * (uint64_t)D)
        if (pwrite_all(fd, src + r * s->cols, sizeof(float) * (size_t)s->cols, at))
            return -1;
    return 0;
}

/* Block s of this rank, in chunks of rows through `stage` (NULL: the host
 * reads the device's memory itself); 16-bit rows widened through `wide` (the
 * file is fp32). */
static int write_block(struct sr_trainer *t, const struct job *j, int fd,
                       const struct sr_sharded_ebc_shard *sh, const struct sr_shard *s,
                       float *stage, float *wide)
{
    int64_t D = t->cfg->tables[sh->table].embedding_dim;
    const size_t elem = sh->dtype == SR_DTYPE_F32 ? 4 : 2;
    int64_t chunk = (int64_t)(STAGE_BYTES / (sizeof(float) * (size_t)(s->cols ? s->cols : 1)));
    chunk = chunk < 1 ? 1 : chunk;
    for (int64_t r0 = 0; r0 < sh->rows; r0 += chunk) {
        int64_t rows = sh->rows - r0 < chunk ? sh->rows - r0 : chunk;
        const size_t n = (size_t)(rows * s->cols);
        const void *src = (const char *)sh->weight + (size_t)(r0 * s->cols) * elem;
        if (stage) {
            sr_dev_copy(t->dev, stage, src, elem * n, NULL);
            sr_dev_sync(t->dev, NULL);
            src = stage;
        }
        if (sh->dtype != SR_DTYPE_F32) {
            for (size_t i = 0; i < n; i++)
                wide[i] = sr_emb_get(src, sh->dtype, (int64_t)i);
            src = wide;
        }
        if (write_rows(j, fd, sh->table, D, s, r0, rows, src))
            return io_error(j, "write its rows", errno);
    }
    return SR_OK;
}

static int write_blocks(struct sr_trainer *t, const struct job *j, int fd)
{
    int n = sr_sharded_ebc_num_local_shards(t->sebc), rc = SR_OK;
    float *stage = t->dev->host_visible ? NULL : sr_dev_alloc_host(t->dev, STAGE_BYTES);
    float *wide = t->cfg->emb_dtype != SR_DTYPE_F32 ? sr_malloc(STAGE_BYTES) : NULL;
    sr_sharded_ebc_hot_rows_out(t->sebc, NULL); /* hybrid tables: their hot rows into the shards */
    sr_dev_sync(t->dev, NULL); /* the last step's updates have run */
    for (int i = 0; i < n && !rc; i++) {
        struct sr_sharded_ebc_shard sh;
        struct sr_shard s;
        if (my_block(t, i, &sh, &s))
            rc = write_block(t, j, fd, &sh, &s, stage, wide);
    }
    sr_free(wide);
    sr_dev_free_host(t->dev, stage);
    return rc;
}

static int unshared_switch(const struct sr_trainer *t)
{
    const char *v = getenv("SR_SAVE_WEIGHTS_UNSHARED");
    return v && v[0] && atoi(v) == t->rank;
}

/* Open rank 0's file (fd0 >= 0: rank 0's own), write, fsync: DONE, UNSHARED
 * (the file is not there, or not rank 0's: another file system) or FAILED
 * (the message set). */
static enum outcome write_mine(struct sr_trainer *t, const struct job *j, const char *tmp, int fd0)
{
    struct stat st;
    int fd = fd0 >= 0 ? fd0 : open(tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT) {
        io_error(j, "open rank 0's temporary file", errno);
        return FAILED;
    }
    if (fd < 0 || unshared_switch(t) || fstat(fd, &st) != 0 ||
        (uint64_t)st.st_size != j->layout.file_size) {
        if (fd >= 0 && fd != fd0)
            close(fd);
        return UNSHARED;
    }
    int rc = write_blocks(t, j, fd);
    if (!rc && fsync(fd) != 0)
        rc = io_error(j, "write its rows", errno);
    if (fd != fd0 && close(fd) != 0 && !rc)
        rc = io_error(j, "write its rows", errno);
    if (!rc)
        rc = sr_fault_write(j->path); /* SR_FAULT (tests): may not return */
    return rc ? FAILED : DONE;
}

/* ---- step 3: agree ----------------------------------------------------------------------- */

/* Every rank's outcome into all (W). */
static void agree(struct sr_trainer *t, int64_t mine, int64_t *all)
{
    sr_comm_all_gather(t->world, &mine, all, 1, SR_DTYPE_I64, NULL, NULL);
}

/* "1, 3" of the ranks whose outcome is `which`; their count. */
static int ranks_with(const struct sr_trainer *t, const int64_t *all, int64_t which, char *buf,
                      size_t cap)
{
    int count = 0;
    buf[0] = 0;
    for (int r = 0; r < t->world_size; r++)
        if (all[r] == which) {
            size_t k = strlen(buf);
            snprintf(buf + k, cap - k, "%s%d", count++ ? ", " : "", r);
        }
    return count;
}

/* The error every rank returns when ranks failed: a failed rank's own message
 * first. */
static int failed_error(const struct sr_trainer *t, const struct job *j, const int64_t *all,
                        const char *what)
{
    char who[256], own[MSG_MAX];
    int count = ranks_with(t, all, FAILED, who, sizeof who);
    snprintf(own, sizeof own, "%s", all[t->rank] == FAILED ? sr_error_message() : "");
    return sr_error_set(SR_ERR_IO, "%s%s--save-weights %s: rank%s %s could not %s; the old "
                        "file, if any, is unchanged",
                        own, own[0] ? "; " : "", j->path, count > 1 ? "s" : "", who, what);
}

/* Agree on the writes; rename. *fallback: the ranks that did not see the
 * file ("" when every rank did). */
static int finish(struct sr_trainer *t, struct job *j, struct sr_atomic_file *af,
                  enum outcome mine, char *fallback, size_t cap)
{
    int64_t *all = sr_calloc((size_t)t->world_size, sizeof *all);
    int failed = 0, unshared = 0, rc = SR_OK;
    agree(t, mine, all);
    for (int r = 0; r < t->world_size; r++)
        failed |= all[r] == FAILED, unshared |= all[r] == UNSHARED;
    if (failed || unshared) {
        if (t->rank == 0)
            sr_atomic_file_abort(af);
        if (failed)
            rc = failed_error(t, j, all, "write its rows");
        else
            ranks_with(t, all, UNSHARED, fallback, cap);
        sr_free(all);
        return rc;
    }
    mine = t->rank == 0 && sr_atomic_file_commit_written(af) ? FAILED : DONE;
    agree(t, mine, all);
    if (all[0] == FAILED)
        rc = failed_error(t, j, all, "replace the file");
    sr_free(all);
    return rc;
}

static void note_fallback(struct sr_trainer *t, const struct job *j, const char *ranks)
{
    if (t->rank == 0 && t->log)
        fprintf(t->log,
                "note: --save-weights %s: rank(s) %s do not see the file rank 0 created (no "
                "shared file system), so every table is gathered to rank 0 instead\n",
                j->path, ranks);
}

/* Collective (world). */
int sr_trainer_save_sharded_weights(struct sr_trainer *t, const char *path)
{
    struct job j;
    struct sr_atomic_file af = {.slot = -1};
    struct created c = {0};
    char fallback[256] = "";
    int rc = job_init(t, path, &j); /* the same outcome on every rank */
    if (rc) {
        job_free(t, &j);
        return rc;
    }
    if (t->rank == 0 && create_file(t, &j, &af, &c))
        sr_atomic_file_abort(&af);
    char own[MSG_MAX];
    snprintf(own, sizeof own, "%s", c.rc ? sr_error_message() : "");
    sr_comm_broadcast(t->world, &c, &c, sizeof c, SR_DTYPE_U8, 0, NULL, NULL);
    if (c.rc) {
        rc = t->rank == 0 ? sr_error_set((int)c.rc, "%s", own)
                          : sr_error_set(SR_ERR_IO, "--save-weights %s: rank 0 could not create "
                                         "the file (its message says why)", path);
        job_free(t, &j);
        return rc;
    }
    enum outcome mine = write_mine(t, &j, c.tmp, t->rank == 0 ? fileno(af.f) : -1);
    rc = finish(t, &j, &af, mine, fallback, sizeof fallback);
    if (fallback[0])
        note_fallback(t, &j, fallback);
    job_free(t, &j);
    return fallback[0] ? sr_trainer_gather_save_weights(t, path) : rc;
}
