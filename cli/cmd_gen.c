/* `shardrec gen`: write synthetic samples as Criteo TSV, to stdout or as an
 * atomic write (shardrec/atomic_file.h) whose path is checked before any work. */
#include <stdio.h>
#include <string.h>

#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/synthetic.h"
#include "cli.h"

struct gen_args {
    const char *out;
    int64_t samples;
    int64_t first;
    int eval_split;
};

static void gen_help(void)
{
    printf("usage: shardrec gen --out FILE [--samples N] [--first N] [--eval-split] [job flags]\n"
           "\n"
           "Writes synthetic samples (the generator `train` uses) as Criteo TSV: label,\n"
           "13 integer counts, one 8-digit hex id per feature, tab-separated. Samples\n"
           "are global indices --first .. --first+N-1 of the training stream (or of the\n"
           "held-back evaluation stream with --eval-split), so the file holds exactly\n"
           "what `train` would draw. Only one id per feature can be written as TSV.\n"
           "\n"
           "  --out FILE       output path ('-' for stdout); written under a temporary\n"
           "                   name and renamed over FILE when complete\n"
           "  --samples N      number of samples (default 10000)\n"
           "  --first N        first global sample index (default 0)\n"
           "  --eval-split     draw from the evaluation stream\n"
           "  --seed, --table-rows, --id-dist, --ids-per-feature, --workload, --config:\n"
           "                   as for train\n");
}

static int gen_flag(void *ctx, const char *name, const char *value)
{
    struct gen_args *a = ctx;
    if (!strcmp(name, "out") && value)
        a->out = value;
    else if (!strcmp(name, "samples") && value)
        return sr_parse_i64("--samples", value, 1, (int64_t)1 << 40, &a->samples);
    else if (!strcmp(name, "first") && value)
        return sr_parse_i64("--first", value, 0, (int64_t)1 << 39, &a->first);
    else if (!strcmp(name, "eval-split") && !value)
        a->eval_split = 1;
    else
        return 1;
    return 0;
}

/* --out names no --config file (files.h): the samples would replace it. */
static int check_distinct(int argc, char **argv, const char *out)
{
    struct sr_named_file f[9];
    const char *configs[8];
    int n = cli_config_paths(argc, argv, configs, 8);
    for (int i = 0; i < n; i++)
        f[i] = (struct sr_named_file){"--config", configs[i], 0};
    f[n] = (struct sr_named_file){"--out", out, 1};
    return sr_files_check_distinct(f, n + 1);
}

int cli_gen(int argc, char **argv)
{
    static const char *const value_flags[] = {"out", "samples", "first", NULL};
    static struct sr_train_config cfg;
    static int64_t rows[SR_MAX_FEATURES];
    struct gen_args a = {.out = NULL, .samples = 10000};
    struct sr_synth *synth;
    int rc = cli_parse_job(argc, argv, &cfg, gen_flag, &a, value_flags);
    if (rc < 0) {
        gen_help();
        return 0;
    }
    if (rc)
        return rc;
    if (!a.out) {
        cli_error("gen", "--out FILE is required");
        return CLI_EXIT_USAGE;
    }
    int to_stdout = strcmp(a.out, "-") == 0;
    if (!to_stdout && (check_distinct(argc, argv, a.out) ||
                       sr_output_path_check(a.out, "--out", SR_OUTPUT_ATOMIC))) {
        cli_error("gen", "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    for (int f = 0; f < cfg.num_features; f++)
        rows[f] = cfg.tables[cfg.feature_table[f]].num_embeddings;
    struct sr_synth_config sc;
    if (sr_train_config_synth(&cfg, rows, &sc) || sr_synth_init(&synth, &sc)) {
        cli_error("gen", "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    struct sr_atomic_file af = {0};
    if (!to_stdout && (rc = sr_atomic_file_open(&af, a.out))) {
        cli_error("gen", "--out %s", sr_error_message());
        sr_synth_free(synth);
        return CLI_EXIT_USAGE;
    }
    FILE *f = to_stdout ? stdout : af.f;
    rc = sr_synth_write_tsv(synth, f, (a.eval_split ? SR_SYNTH_EVAL_BASE : 0) + a.first, a.samples);
    if (rc == SR_ERR_WRITE)
        sr_error_set(rc, "--out %s: %s", a.out, sr_error_message());
    /* a write that fails now (a full disk) is the run's failure: exit status 1 */
    if (!to_stdout && rc)
        sr_atomic_file_abort(&af);
    else if (!to_stdout && sr_atomic_file_commit(&af)) /* its message names the file */
        rc = sr_error_set(SR_ERR_WRITE, "--out %s", sr_error_message());
    sr_synth_free(synth);
    if (rc) {
        cli_error("gen", "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    return 0;
}
