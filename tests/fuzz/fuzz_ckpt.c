/*
 * libFuzzer target for the checkpoint manifest (src/train/checkpoint_format.c)
 * and what `shardrec inspect` and `shardrec export` do with it
 * (src/train/checkpoint_inspect.c): the input is manifest.json of a step
 * folder whose other files are a real checkpoint's, tests/fuzz/ckpt_fixture
 * (two tables of 7 x 4 and 5 x 4 on one rank; the seed manifest is theirs,
 * so mutations reach the shape checks and the export). Checked: no read
 * outside a buffer, no leak, no undefined behaviour (UBSan: casts of huge
 * numbers, overflow), no allocation sized by a damaged field; a rejected
 * manifest leaves a message; one that inspect accepts exports to a file
 * that reads back. Build and run with tools/fuzz.sh (from the repository's
 * root: the fixture's path is relative); seeds in tests/fuzz/seeds_fuzz_ckpt.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardrec/checkpoint.h"
#include "shardrec/error.h"
#include "shardrec/safetensors.h"

static char dir[64], manifest[96], exported[96];
static FILE *devnull;

static void copy_fixture(const char *name)
{
    char from[128], to[128], buf[4096];
    snprintf(from, sizeof from, "tests/fuzz/ckpt_fixture/%s", name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out) {
        fprintf(stderr, "fuzz_ckpt: cannot copy %s to %s (run from the repository's root)\n", from,
                to);
        abort();
    }
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            abort();
    fclose(in);
    fclose(out);
}

/* The folder and its files go when the fuzzer exits (a crash leaves them). */
static void remove_folder(void)
{
    static const char *const names[] = {"manifest.json", "dense.safetensors",
                                        "rank-00000.safetensors"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    unlink(exported);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/fuzz_ckpt.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    copy_fixture("dense.safetensors");
    copy_fixture("rank-00000.safetensors");
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    snprintf(exported, sizeof exported, "%s.export.safetensors", dir); /* not in the folder */
    atexit(remove_folder);
    devnull = fopen("/dev/null", "w");
    return devnull ? 0 : 1;
}

static void rejected(void)
{
    if (!sr_error_message()[0])
        abort(); /* an error without a message */
    sr_error_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(manifest, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f))
        abort();
    if (sr_checkpoint_inspect(dir, devnull)) {
        rejected();
        return 0;
    }
    if (sr_checkpoint_export(dir, exported)) {
        rejected(); /* a version 1 manifest, say */
        return 0;
    }
    struct sr_st_file *st;
    if (sr_st_open(&st, exported))
        abort(); /* an export that does not read back */
    sr_st_close(st);
    unlink(exported);
    return 0;
}
