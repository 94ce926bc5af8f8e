/* `shardrec inspect CKPT|WEIGHTS` and `shardrec export CKPT --out FILE`: a
 * checkpoint (or a weights file) verified and described, or a checkpoint
 * turned into one weights file. The
 * reading is the library's (shardrec/checkpoint.h); here only flags. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/checkpoint.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/safetensors.h"
#include "shardrec/weights_io.h"
#include "cli.h"

static void inspect_help(void)
{
    printf("usage: shardrec inspect CKPT|WEIGHTS\n"
           "\n"
           "Verifies a checkpoint and prints what it holds. CKPT is a step-NNNNNNNN\n"
           "folder, or a --checkpoint-dir folder (then its latest complete checkpoint).\n"
           "A weights file (train --save-weights, shardrec export) is verified as\n"
           "safetensors (header, offsets, dtypes) and every value read: printed are each\n"
           "tensor's name, dtype and shape, the values that are not finite, and the\n"
           "tables' pooling the file records (docs/weights.md).\n"
           "Checked: the manifest parses; it lists dense.safetensors and one file per\n"
           "rank, each once; every file has the size and FNV-1a 64 checksum the manifest\n"
           "records; every tensor has the shape the recorded plan, tables and optimizers\n"
           "give it; every shard of every table is present once. Printed: step, world\n"
           "size, global batch, optimizers, each table's size and plan, the settings\n"
           "hashes, each file's bytes and checksum.\n"
           "\n"
           "Exit status 0 when sound, 2 naming the file and what is wrong.\n");
}

static void export_help(void)
{
    printf("usage: shardrec export CKPT --out FILE\n"
           "\n"
           "Verifies a checkpoint as `shardrec inspect` does, then writes its model as\n"
           "one safetensors weights file, the format of `train --save-weights`\n"
           "(bot_mlp.K.weight/bias, top_mlp.K.weight/bias, emb.TABLE.weight [rows, D]):\n"
           "`train --init-weights FILE` and tools/torch_dlrm.py read it. Optimizer state\n"
           "is not exported. CKPT as for inspect.\n"
           "\n"
           "  --out FILE   the weights file; written under a temporary name and renamed\n"
           "               over FILE when complete; it may not be a file of CKPT\n"
           "\n"
           "Exit status 0 when written, 1 when FILE could not be written (a full disk), 2 for\n"
           "a bad checkpoint or --out.\n");
}

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* Tensor t's values that are NaN or infinite (any of the three dtypes). */
static int64_t non_finite(const struct sr_st_tensor *t, int64_t numel)
{
    const uint16_t *h = (const uint16_t *)(const void *)t->data;
    int64_t bad = 0;
    for (int64_t i = 0; i < numel; i++) {
        float x = t->dtype == SR_DTYPE_F32    ? t->data[i]
                  : t->dtype == SR_DTYPE_F16 ? sr_fp16_to_fp32(h[i])
                                              : sr_bf16_to_fp32(h[i]);
        bad += !isfinite(x);
    }
    return bad;
}

/* The tables' pooling the file records (docs/weights.md, "Metadata"): one
 * word when every table has the same, else each table's. */
static int print_pooling(const struct sr_st_file *f)
{
    struct sr_weights_pooling *rec;
    int n, same = 1, rc = sr_weights_pooling_read(f, &rec, &n);
    if (rc)
        return rc;
    if ((rc = sr_weights_pooling_check_held(f, rec, n))) { /* as loading does */
        sr_free(rec);
        return rc;
    }
    for (int i = 1; i < n; i++)
        same &= rec[i].pooling == rec[0].pooling;
    if (n == 0)
        printf("pooling: not recorded (a file of an older shardrec, or from PyTorch)\n");
    else if (same)
        printf("pooling: %s, recorded for %d table%s\n", sr_pooling_name(rec[0].pooling), n,
               n > 1 ? "s" : "");
    else
        printf("pooling, recorded per table:");
    for (int i = 0; n && !same && i < n; i++)
        printf(" %s %s%s", rec[i].table, sr_pooling_name(rec[i].pooling), i + 1 < n ? "," : "\n");
    sr_free(rec);
    return SR_OK;
}

/* A weights file: verified by the reader, every value read. */
static int inspect_weights(const char *path)
{
    struct sr_st_file *f;
    int rc = sr_st_open(&f, path);
    if (rc)
        return rc;
    int64_t values = 0, bad = 0;
    printf("weights %s: %d tensors\n", path, sr_st_count(f));
    for (int i = 0; i < sr_st_count(f); i++) {
        struct sr_st_tensor t;
        char shape[96] = "";
        size_t len = 0;
        sr_st_get(f, i, &t);
        for (int d = 0; d < t.ndim && len < sizeof shape - 24; d++)
            len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", d ? " x " : "",
                                    (long long)t.shape[d]);
        const int64_t n = sr_st_numel(t.ndim, t.shape), nb = non_finite(&t, n);
        printf("  %-28s %-4s %s%s\n", t.name, sr_st_dtype_name(t.dtype), shape,
               nb ? "  NOT FINITE" : "");
        values += n;
        bad += nb;
    }
    printf("%lld values, %lld not finite\n", (long long)values, (long long)bad);
    rc = print_pooling(f);
    sr_st_close(f);
    if (rc)
        return rc;
    if (bad)
        return sr_error_set(SR_ERR_DATA, "%s: %lld values are NaN or infinite", path,
                            (long long)bad);
    return SR_OK;
}

int cli_inspect(int argc, char **argv)
{
    const char *ckpt = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            inspect_help();
            return 0;
        }
        if (argv[i][0] == '-' || ckpt) {
            cli_error("inspect", "unexpected argument '%s'; HINT: shardrec inspect CKPT",
                      argv[i]);
            return CLI_EXIT_USAGE;
        }
        ckpt = argv[i];
    }
    if (!ckpt) {
        cli_error("inspect", "give a checkpoint folder; HINT: shardrec inspect CKPT");
        return CLI_EXIT_USAGE;
    }
    struct stat st;
    int rc = stat(ckpt, &st) == 0 && S_ISREG(st.st_mode) ? inspect_weights(ckpt)
                                                         : sr_checkpoint_inspect(ckpt, stdout);
    if (rc)
        cli_error("inspect", "%s", sr_error_message());
    return cli_exit_status(rc);
}

int cli_export(int argc, char **argv)
{
    const char *ckpt = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            export_help();
            return 0;
        }
        if (!strncmp(argv[i], "--out=", 6)) {
            out = argv[i] + 6;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (argv[i][0] == '-' || ckpt) {
            cli_error("export", "unexpected argument '%s'; HINT: shardrec export CKPT --out FILE",
                      argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            ckpt = argv[i];
        }
    }
    if (!ckpt || !out || !out[0]) {
        cli_error("export", "give a checkpoint folder and --out FILE; HINT: shardrec export "
                            "CKPT --out model.safetensors");
        return CLI_EXIT_USAGE;
    }
    int rc = sr_output_path_check(out, "--out", SR_OUTPUT_ATOMIC);
    if (!rc)
        rc = sr_checkpoint_export(ckpt, out);
    if (rc) {
        cli_error("export", "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    printf("export: %s -> %s\n", ckpt, out);
    return 0;
}
