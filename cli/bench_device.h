/*
 * `shardrec bench device`'s parts (cmd_bench_device.c: the command, copy,
 * GEMM, launch and the topology file; bench_device_emb.c: the embedding's
 * gather and update): the run's sizes, context and results.
 */
#ifndef SHARDREC_CLI_BENCH_DEVICE_H
#define SHARDREC_CLI_BENCH_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "shardrec/device.h"
#include "shardrec/topology.h"
#include "shardrec/train_config.h"
#include "bench_timer.h"

#define ZIPF_S   1.05
#define IDS_SEED 1
#define MAX_DIM  128

struct bd_opts {
    enum sr_device_choice device;
    const char *out;
    int quick;
    int maths[SR_TOPO_MATHS]; /* 1: measure this mode */
    int maths_set;            /* --math given */
};

/* Sizes of the run, by device and --quick. */
struct bd_sizes {
    int64_t rows;       /* E of the table */
    int64_t ids;        /* ids a launch (bags of one id) */
    int64_t pool;       /* ids drawn, a multiple of ids: launches cycle through them */
    size_t copy_bytes;  /* the copy's size (read once, written once) */
    int gemm_m, gemm_n; /* the (m, n) x (n, n) GEMM */
    double repeat_s;    /* a timed block lasts at least this */
    int repeats;
};

/* The device, the sizes and the timer (whose stream every op runs on). */
struct bd_ctx {
    struct sr_device *dev;
    sr_stream_t stream; /* timer.stream */
    struct bd_sizes z;
    struct cli_bench_timer timer;
};

/* What was measured, for the JSON file. */
struct bd_results {
    double memory_bytes, memory_gb_s;
    double base_bytes; /* the process's resident memory before the bench allocates (CPU) */
    double gather[SR_TOPO_SKEWS][SR_TOPO_DIMS], update[SR_TOPO_SKEWS][SR_TOPO_DIMS];
    double hot_share[SR_TOPO_SKEWS];
    double gemm_flop_s[SR_TOPO_MATHS];
    int gemm_done[SR_TOPO_MATHS];
    double launch_s; /* one small op */
    cJSON *rows;     /* "measurements": one object per table row */
};

/* One table row, and its object in res->rows. `rate` in `unit`; the table
 * shows it scaled by `shown` (e.g. 1e-6 for M rows/s) with `shown_unit`. */
struct bd_row {
    const char *name;
    int dim;          /* 0: none */
    const char *ids;  /* NULL: none */
    int64_t launches; /* 0: none */
    double seconds;   /* per launch; 0: none */
    double rate;
    const char *unit;
    double shown;
    const char *shown_unit;
    int64_t table_rows, ids_drawn; /* the embedding rows' table and id pool; 0: none */
};

extern int bd_quiet; /* the planner's quick measurement (cli_bench_device_quick) prints nothing */
extern const char *const bd_dist_names[SR_TOPO_SKEWS];

/* One table row printed (unless quiet) and kept for the JSON file. */
void bd_add_row(struct bd_results *res, const struct bd_row *r);
/* Gather and update at every dim on both id distributions (bench_device_emb.c). */
void bd_measure_embedding(struct bd_ctx *c, struct bd_results *res);

#endif
