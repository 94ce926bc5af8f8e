/* `shardrec inspect CKPT` and `shardrec export CKPT --out FILE`: a
 * checkpoint verified and described, or turned into one weights file. The
 * reading is the library's (shardrec/checkpoint.h); here only flags. */
#include <stdio.h>
#include <string.h>

#include "shardrec/atomic_file.h"
#include "shardrec/checkpoint.h"
#include "shardrec/error.h"
#include "cli.h"

static void inspect_help(void)
{
    printf("usage: shardrec inspect CKPT\n"
           "\n"
           "Verifies a checkpoint and prints what it holds. CKPT is a step-NNNNNNNN\n"
           "folder, or a --checkpoint-dir folder (then its latest complete checkpoint).\n"
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
           "Exit status 0 when written, 2 for a bad checkpoint or --out.\n");
}

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
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
    int rc = sr_checkpoint_inspect(ckpt, stdout);
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
