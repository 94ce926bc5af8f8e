/* The command-line tool's subcommands and their shared flag handling. */
#ifndef SHARDREC_CLI_H
#define SHARDREC_CLI_H

#include "shardrec/train_config.h"

#define CLI_EXIT_USAGE 2 /* bad flags, config or files: fix the command */
#define CLI_EXIT_FAIL  1 /* the run itself failed */

/* The exit status of a failed library call (docs/user-guide.md): the user's
 * input (invalid argument, unreadable or bad file, unsupported request, a size
 * that cannot fit in memory) gives CLI_EXIT_USAGE, anything else (NaN loss, a
 * result that could not be written, SR_ERR_WRITE, ...) CLI_EXIT_FAIL; SR_OK
 * gives 0. */
int cli_exit_status(int status);

int cli_train(int argc, char **argv);
int cli_gen(int argc, char **argv);
int cli_convert(int argc, char **argv);
int cli_bench(int argc, char **argv);        /* `bench comm`: cli/cmd_bench.c */
int cli_bench_device(int argc, char **argv); /* `bench device`: cli/cmd_bench_device.c */
int cli_plan(int argc, char **argv);
struct sr_topology;
/* `bench device --quick` on the device train would use, silently, into *out
 * (a topology of its figures; cli/cmd_bench_device.c). */
int cli_bench_device_quick(struct sr_topology *out);         /* cli/cmd_plan.c */
/* Write root as JSON text to path atomically (atomic_file.h) and free root;
 * SR_ERR_IO with a message naming the path when it cannot (cli/cmd_bench.c). */
struct cJSON;
int cli_bench_write_json(const char *path, struct cJSON *root);
int cli_inspect(int argc, char **argv);      /* cli/cmd_inspect.c */
int cli_export(int argc, char **argv);       /* cli/cmd_inspect.c */
int cli_eval(int argc, char **argv);         /* cli/cmd_eval.c */

/* Apply one job flag (--steps, --table-rows, ...) given without its leading
 * dashes. Returns SR_OK, an error status with a message, or 1 when the flag is
 * not a job flag. */
int cli_apply_job_flag(struct sr_train_config *cfg, const char *name, const char *value);
/* Whether `name` is a job flag that takes a value. */
int cli_is_job_flag(const char *name);
/* --pipeline auto|sparse-dist|none into cfg (train, plan). */
int cli_parse_pipeline(struct sr_train_config *cfg, const char *v);
/* SR_ERR_INVALID_ARG: "--FLAG: an empty path" (flag without its dashes). */
int cli_empty_path(const char *flag);
/* A path flag's value into field (cap bytes): never empty (that would read
 * as "none"), never cut short; the error names --flag. */
int cli_set_path(char *field, size_t cap, const char *flag, const char *v);
/* The --config files of argv, in order, into paths[0..cap); returns how many. */
int cli_config_paths(int argc, char **argv, const char **paths, int cap);
/* Fill cfg from defaults, then --workload (wherever it stands), then --config
 * FILE if present, then every job flag in argv; other flags are handed to
 * `other` (may be NULL: then they are errors).
 * Prints the error and returns CLI_EXIT_USAGE on failure, 0 on success, -1 if
 * --help was asked. */
int cli_parse_job(int argc, char **argv, struct sr_train_config *cfg,
                  int (*other)(void *ctx, const char *name, const char *value), void *ctx,
                  const char *const *value_flags);
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
