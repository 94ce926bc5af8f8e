/*
 * Checkpoints of --data runs: where the data stood, and that it is the same
 * data when the run resumes. The manifest's "data" member (checkpoint.c
 * writes the rest):
 *
 *   "data": {"kind": "files", "next_step": s+1, "next_sample": s*G,
 *            "epoch": E, "batch_in_epoch": b,   first batch NOT yet trained:
 *                                               global batch b of pass E
 *            "shuffle": 0|1, "shuffle_block": K, "skip_bad_lines": 0|1,
 *            "files": [{"path": P, "bytes": N, "head_fnv1a64": H}, ...],
 *            "eval_files": [...]}
 *
 * (synthetic data: {"kind": "synthetic", "next_step", "next_sample"}; a
 * synthetic batch is a function of its step.)
 *
 * The loader reads ahead of training (up to SR_LOADER_SLOTS batches with
 * --pipeline sparse-dist), so the reader's own position at a save is not
 * the one to record. Instead the loader notes, for each step, the reader's
 * position just after that step's batch (sr_checkpoint_note_position, in a
 * small ring indexed by step); a save at step s records the note of step s:
 * the first batch not yet trained. On resume the reader starts pass E
 * (under --shuffle: that pass's block order, a function of the seed and E)
 * and skips b global batches, and the run goes on as if it never stopped:
 * at the end of a pass it rewinds into pass E+1 exactly as the straight
 * run did. The evaluation reader restarts at every evaluation and has no
 * position.
 *
 * A data file counts as the same when its size and the FNV-1a 64 checksum
 * of its first SR_CKPT_DATA_HEAD bytes match (paths may differ: files are
 * compared by their place in --data / --eval-data).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/rng.h"
#include "train/checkpoint.h"
#include "train/trainer_internal.h"
#include "core/json_kind.h"

#define SR_CKPT_DATA_HEAD ((size_t)1 << 20) /* bytes of a data file checksummed */
#define HINT_DATA "HINT: resume with the data the run started on, or start a new run"

void sr_checkpoint_note_position(struct sr_trainer *t, int64_t step)
{
    if (t->reader)
        sr_reader_tell(t->reader, &t->ckpt.pos[step % SR_CKPT_POS_RING]);
}

/* A data file's size and the checksum of its head; SR_ERR_DATA naming it. */
static int fingerprint(const char *path, uint64_t *bytes, uint64_t *head)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sr_error_set(SR_ERR_DATA, "data file %s: cannot open (%s)", path, strerror(errno));
    unsigned char *buf = sr_malloc(SR_CKPT_DATA_HEAD);
    size_t n = fread(buf, 1, SR_CKPT_DATA_HEAD, f);
    int bad = ferror(f) || fseeko(f, 0, SEEK_END) != 0;
    off_t end = bad ? 0 : ftello(f);
    fclose(f);
    *head = sr_hash_bytes(SR_HASH_INIT, buf, n);
    *bytes = end < 0 ? 0 : (uint64_t)end;
    sr_free(buf);
    return bad || end < 0 ? sr_error_set(SR_ERR_DATA, "data file %s: read error", path) : SR_OK;
}

static cJSON *file_list(char (*paths)[SR_PATH_MAX], int n)
{
    cJSON *list = cJSON_CreateArray();
    char hex[32];
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 0, head = 0;
        fingerprint(paths[i], &bytes, &head); /* unreadable now: the reader has it open */
        snprintf(hex, sizeof hex, "%016" PRIx64, head);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", paths[i]);
        cJSON_AddNumberToObject(o, "bytes", (double)bytes);
        cJSON_AddStringToObject(o, "head_fnv1a64", hex);
        cJSON_AddItemToArray(list, o);
    }
    return list;
}

void sr_checkpoint_data_write(struct sr_trainer *t, FILE *f, int64_t step)
{
    const struct sr_train_config *cfg = t->cfg;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "kind", cfg->n_data ? "files" : "synthetic");
    cJSON_AddNumberToObject(d, "next_step", (double)(step + 1));
    cJSON_AddNumberToObject(d, "next_sample", (double)(step * t->global_batch));
    if (cfg->n_data) {
        const struct sr_reader_position *p = &t->ckpt.pos[step % SR_CKPT_POS_RING];
        cJSON_AddNumberToObject(d, "epoch", (double)p->epoch);
        cJSON_AddNumberToObject(d, "batch_in_epoch", (double)p->batches);
        cJSON_AddNumberToObject(d, "shuffle", cfg->shuffle);
        cJSON_AddNumberToObject(d, "shuffle_block", cfg->shuffle_block);
        cJSON_AddNumberToObject(d, "skip_bad_lines", cfg->skip_bad_lines);
        cJSON_AddItemToObject(d, "files", file_list(t->cfg->data_paths, cfg->n_data));
        cJSON_AddItemToObject(d, "eval_files", file_list(t->cfg->eval_data_paths, cfg->n_eval_data));
    }
    char *text = cJSON_PrintUnformatted(d);
    fprintf(f, "  \"data\": %s,\n", text ? text : "{}");
    cJSON_free(text);
    cJSON_Delete(d);
}

/* Integer field `key` of j in [0, 2^53], or -1 (absent, not such an integer). */
static int64_t count_of(const cJSON *j, const char *key)
{
    int64_t v = -1;
    sr_json_int(cJSON_GetObjectItemCaseSensitive(j, key), 0, SR_JSON_INT_MAX, &v);
    return v;
}

/* Every file of `flag` is the one the checkpoint recorded at its place. */
static int check_files(const char *dir, const char *flag, const cJSON *list,
                       char (*paths)[SR_PATH_MAX], int n)
{
    char hex[32];
    if (cJSON_GetArraySize(list) != n)
        return sr_error_set(SR_ERR_DATA, "--resume %s: written by a run with %d %s files, this "
                            "run has %d; %s", dir, cJSON_GetArraySize(list), flag, n, HINT_DATA);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(e, "head_fnv1a64");
        uint64_t bytes, head;
        int rc = fingerprint(paths[i], &bytes, &head);
        if (rc)
            return rc;
        snprintf(hex, sizeof hex, "%016" PRIx64, head);
        const int64_t recorded = count_of(e, "bytes");
        if (recorded < 0 || (uint64_t)recorded != bytes || !cJSON_IsString(h) ||
            strcmp(h->valuestring, hex))
            return sr_error_set(SR_ERR_DATA,
                                "--resume %s: %s file %s changed since the checkpoint: %" PRIu64
                                " bytes, head checksum %s; the checkpoint recorded %" PRId64
                                " bytes, %s; %s", dir, flag, paths[i], bytes, hex, recorded,
                                cJSON_IsString(h) ? h->valuestring : "none", HINT_DATA);
    }
    return SR_OK;
}

/* The data settings that decide the batches' order agree. */
static int check_settings(const struct sr_train_config *cfg, const char *dir, const cJSON *d)
{
    static const char *const flags[] = {"--shuffle", "--shuffle-block", "--skip-bad-lines"};
    static const char *const keys[] = {"shuffle", "shuffle_block", "skip_bad_lines"};
    const int mine[] = {cfg->shuffle, cfg->shuffle_block, cfg->skip_bad_lines};
    for (int k = 0; k < 3; k++)
        if (count_of(d, keys[k]) != mine[k])
            return sr_error_set(SR_ERR_DATA, "--resume %s: written by a run with another %s; %s",
                                dir, flags[k], HINT_DATA);
    return SR_OK;
}

int sr_checkpoint_data_resume(struct sr_trainer *t, const char *dir, const cJSON *m)
{
    struct sr_train_config *cfg = t->cfg;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "data");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(d, "kind");
    int files = cJSON_IsString(kind) && !strcmp(kind->valuestring, "files");
    if (files != (cfg->n_data > 0))
        return sr_error_set(SR_ERR_DATA, "--resume %s: written by a run on %s, this run reads "
                            "%s; %s", dir, files ? "--data files" : "synthetic data",
                            cfg->n_data ? "--data files" : "synthetic data", HINT_DATA);
    if (!files)
        return SR_OK;
    int rc = check_settings(cfg, dir, d);
    rc = rc ? rc : check_files(dir, "--data", cJSON_GetObjectItemCaseSensitive(d, "files"),
                               cfg->data_paths, cfg->n_data);
    rc = rc ? rc : check_files(dir, "--eval-data", cJSON_GetObjectItemCaseSensitive(d, "eval_files"),
                               cfg->eval_data_paths, cfg->n_eval_data);
    const int64_t epoch = count_of(d, "epoch"), batches = count_of(d, "batch_in_epoch");
    if (!rc && (epoch < 0 || batches < 0))
        rc = sr_error_set(SR_ERR_DATA, "--resume %s: the manifest has no data position (epoch, "
                          "batch_in_epoch); %s", dir, HINT_DATA);
    if (rc)
        return rc;
    struct sr_reader_position pos = {.epoch = (uint64_t)epoch, .batches = batches};
    if ((rc = sr_reader_seek(t->reader, &pos)))
        return sr_error_set(rc, "--resume %s: %s", dir, sr_error_message());
    t->epoch = (int64_t)pos.epoch;
    return SR_OK;
}
