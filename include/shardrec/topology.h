/*
 * Topology: what the planner knows of the machines a job runs on (DESIGN.md
 * "Planner"). A built-in preset (sr_topology_preset), a JSON file written by
 * `shardrec bench comm --out` or `shardrec bench device --out`, or one
 * written by hand; several merge (later ones override what they give).
 *
 *   world_size, ranks_per_node      W ranks, L per node (W a multiple of L)
 *   memory_bytes                    capacity of one rank's device memory
 *   memory_base_bytes               what a process holds before it allocates
 *                                   (code, libraries, runtimes), counted in a
 *                                   rank's memory (bench device on the CPU)
 *   memory_gb_s                     copy bandwidth: bytes read + written per s
 *   gather_rows_s[skew][dim]        random-row gather rate (rows/s) at dims
 *                                   16, 64, 128 (sr_topology_dims), on uniform
 *                                   ids (skew 0) and Zipf(1.05) ids (skew 1)
 *   update_rows_s[skew][dim]        scatter-update rate (rows/s, SGD: read,
 *                                   add, write back) at the same points
 *   zipf_hot_share                  the share of lookups the hottest 1% of rows
 *                                   took in the Zipf measurement (its table's)
 *   gemm_flop_s[math]               dense GEMM rate per math mode (device.h)
 *   launch_us                       the time of one of a step's smallest ops
 *                                   (bench device's "launch"); the cost model
 *                                   adds it once per op a step issues. 0 (the
 *                                   presets: no data sheet gives it): not
 *                                   counted
 *   intra.gb_s, intra.latency_us    one rank's link to a rank of its node, one
 *                                   direction
 *   inter.gb_s, inter.latency_us    one NIC, one direction
 *   nic_ranks                       ranks that share a NIC (its bandwidth
 *                                   split between them when all send)
 *   host_latency_us                 a small all-to-all of host memory: the
 *                                   counts exchange, which a device-memory
 *                                   transport (NCCL) runs over MPI on the
 *                                   host (bench comm measures it there); 0:
 *                                   the data link's latency
 *
 * JSON (every key optional; GB = 10^9 bytes):
 *
 *   { "name": "h200", "world_size": 8, "ranks_per_node": 8,
 *     "memory_bytes": 1.5e11, "memory_gb_s": 4800,
 *     "gather_rows_s": { "uniform": [a16, a64, a128], "zipf": [...] },
 *     "update_rows_s": { "uniform": [...], "zipf": [...] },
 *     "zipf_hot_share": 0.75, "launch_us": 2.5,
 *     "gemm_tflop_s": { "fp32": 60, "tf32": 400, "bf16": 800 },
 *     "links": { "intra_node": { "bandwidth_gb_s": 450, "latency_us": 10 },
 *                "inter_node": { "bandwidth_gb_s": 12.5, "latency_us": 20,
 *                                "nic_ranks": 8 },
 *                "host": { "latency_us": 30 } } }
 *
 * `bench comm` files also hold "measurements" and "source", which are read
 * past. A rate not given anywhere is derived (sr_topology_complete): gather
 * and update rows from memory_gb_s and the row's bytes (at least one 32-byte
 * sector a row), so a preset needs only data-sheet figures.
 */
#ifndef SHARDREC_TOPOLOGY_H
#define SHARDREC_TOPOLOGY_H

#include <stdint.h>

#define SR_TOPO_DIMS      3 /* gather/update rates at dims 16, 64, 128 */
#define SR_TOPO_SKEWS     2 /* uniform, Zipf(1.05) */
#define SR_TOPO_MATHS     3 /* enum sr_math: fp32, tf32, bf16 */
#define SR_TOPO_NAME      64
#define SR_TOPO_MAX_BYTES ((long)1 << 20) /* a topology file's size cap */

struct sr_topo_link {
    double gb_s;       /* GB/s one direction; 0: not known */
    double latency_us; /* per collective */
};

struct sr_topology {
    char name[SR_TOPO_NAME];
    int world_size, ranks_per_node;
    double memory_bytes;
    double memory_base_bytes; /* a process's own resident footprint (CPU; 0 on a GPU) */
    double memory_gb_s;
    double gather_rows_s[SR_TOPO_SKEWS][SR_TOPO_DIMS];
    double update_rows_s[SR_TOPO_SKEWS][SR_TOPO_DIMS];
    double gemm_flop_s[SR_TOPO_MATHS];
    double zipf_hot_share; /* hot share of the ids the Zipf rates were taken on */
    double launch_us;      /* one small op's time; 0: not known */
    struct sr_topo_link intra, inter;
    int nic_ranks;
    double host_latency_us; /* the counts exchange's; 0: as the data link */
    /* The memory and rates are the whole host's (a `bench device` file of
     * the CPU: one process on every core), not one rank's. */
    int host_wide;
};

/* The dims the rates are measured at: 16, 64, 128. */
extern const int sr_topology_dims[SR_TOPO_DIMS];

/* A built-in preset by name (SR_ERR_INVALID_ARG listing them otherwise);
 * the names, one per line with a description, for --help. */
int sr_topology_preset(struct sr_topology *out, const char *name);
const char *sr_topology_preset_help(void);

/* Merge a JSON topology into *t (keys it gives override). Strict as the
 * config reader: unknown keys, wrong types, negative or non-finite numbers
 * are SR_ERR_INVALID_ARG naming `source` and the key; trailing text too. */
int sr_topology_merge_json(struct sr_topology *t, const char *text, const char *source);
/* A file: read (regular file, at most SR_TOPO_MAX_BYTES), then merged. */
int sr_topology_merge_file(struct sr_topology *t, const char *path);
/* A preset's name or a file's path (a name that is no preset and no file is
 * an error listing the presets): merged into *t. */
int sr_topology_load(struct sr_topology *t, const char *name_or_path);

/* Fill what is left zero from what is given (see above) and check the
 * whole: W, L, memory and bandwidth known; SR_ERR_INVALID_ARG naming the
 * first missing field otherwise. */
int sr_topology_complete(struct sr_topology *t);

/* Once the ranks a node are known: a host-wide topology's memory, bandwidth,
 * rates and GEMM rates become one rank's (divided by the ranks a node, which
 * share the host's cores and memory); others are left as they are. */
void sr_topology_split_host(struct sr_topology *t);

/* JSON text of *t (caller frees with sr_free). */
char *sr_topology_to_json(const struct sr_topology *t);

/* The rate at `dim` on ids whose hottest 1% of rows take `hot_share` of the
 * lookups: interpolated in bytes between the measured dims (beyond them,
 * bytes-proportional), and between the uniform and Zipf rates by hot share
 * (uniform ids: 0.01, Zipf(1.05) over a million rows: about 0.6). */
double sr_topology_gather_rows_s(const struct sr_topology *t, int dim, double hot_share);
double sr_topology_update_rows_s(const struct sr_topology *t, int dim, double hot_share);

#endif
