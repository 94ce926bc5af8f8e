/* shardrec: the command-line tool. Dispatches to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: shardrec <command> [flags]\n\n"
               "commands:\n"
               "  train    train a DLRM (default: the built-in synthetic job)\n"
               "  gen      write synthetic data as Criteo TSV\n"
               "  convert  turn Criteo TSV into the binary format\n"
               "  plan     choose a sharding plan for a job on a topology, with its predicted cost\n"
               "  bench    measure the machine: `bench comm` times the collectives, `bench device`\n"
               "           the device (copy, embedding gather and update, GEMM)\n"
               "  inspect  verify a checkpoint or weights file and print what it holds\n"
               "  export   write a checkpoint's model as one weights file\n"
               "  eval     evaluate a checkpoint or weights file on data (metrics, predictions)\n\n"
               "`shardrec <command> --help` lists a command's flags.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "train") == 0)
        return cli_train(argc - 1, argv + 1);
    if (strcmp(argv[1], "gen") == 0)
        return cli_gen(argc - 1, argv + 1);
    if (strcmp(argv[1], "convert") == 0)
        return cli_convert(argc - 1, argv + 1);
    if (strcmp(argv[1], "bench") == 0)
        return cli_bench(argc - 1, argv + 1);
    if (strcmp(argv[1], "plan") == 0)
        return cli_plan(argc - 1, argv + 1);
    if (strcmp(argv[1], "inspect") == 0)
        return cli_inspect(argc - 1, argv + 1);
    if (strcmp(argv[1], "export") == 0)
        return cli_export(argc - 1, argv + 1);
    if (strcmp(argv[1], "eval") == 0)
        return cli_eval(argc - 1, argv + 1);
    fprintf(stderr, "shardrec: unknown command '%s'; HINT: shardrec --help\n", argv[1]);
    return CLI_EXIT_USAGE;
}
