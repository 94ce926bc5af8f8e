/*
 * `shardrec bench comm`: the comm layer's collectives timed as nccl-tests
 * times them, so that a run on a cluster tells the planner what its links
 * deliver.
 *
 * For each buffer size S (bytes per rank: --min-bytes, 4x, 16x, ... up to
 * --max-bytes) and each collective, every rank issues `warmup` untimed
 * calls, waits for them, meets the others at a barrier, then issues `iters`
 * blocking calls back to back and times them: on the CPU with the host clock,
 * on a GPU with two events on the one stream the calls run on. The time per
 * call is the mean over those calls, and the row's time the slowest rank's
 * (an all-gather of each rank's time through the host transport).
 *
 *   all_to_all  sr_comm_all_to_allv, S/W bytes to each rank (self included);
 *   all_reduce  sr_comm_all_reduce, S bytes of fp32, SUM, out of place.
 *
 * algbw = S / time; busbw = algbw x (W-1)/W (all-to-all) or 2(W-1)/W
 * (all-reduce): nccl-tests' factors, which make busbw comparable to the
 * bandwidth of the slowest link whatever W is. Rank 0 prints one table row
 * per size and collective as it is measured, and with --out writes them as
 * a JSON topology file (docs/user-guide.md, "Measuring links").
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/clock.h"
#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/log.h"
#include "shardrec/rng.h"
#include "cli.h"

#define CMD            "bench comm"
#define BENCH_MAX_SIZE ((int64_t)1 << 32)  /* 2^30 fp32: far below MPI's INT_MAX counts */
#define BENCH_BIG      ((int64_t)16 << 20) /* default calls shrink above this size */
#define BENCH_N_COLL   2

enum bench_coll { BENCH_ALL_TO_ALL = 0, BENCH_ALL_REDUCE = 1 };

static const char *const coll_names[BENCH_N_COLL] = {"all_to_all", "all_reduce"};

struct bench_opts {
    int64_t min_bytes, max_bytes;
    int64_t iters, warmup;
    int iters_set, warmup_set; /* given on the command line: no shrinking above BENCH_BIG */
    int64_t ranks_per_node;    /* 0: detected */
    enum sr_device_choice device;
    enum sr_comm_choice comm;
    const char *out;
};

/* One measured row: the slowest rank's mean time per call. */
struct bench_row {
    enum bench_coll coll;
    size_t bytes; /* per rank, as moved (S rounded down to whole fp32 per peer) */
    double seconds;
};

/* What the timed loop needs; the buffers hold the largest size. */
struct bench_ctx {
    sr_comm_t world;
    int W, rank;
    struct sr_device *dev; /* NULL: host memory and the host clock (the CPU) */
    sr_stream_t stream;    /* the calls' stream on a device, else NULL */
    sr_event_t start, stop;
    void *send, *recv; /* (cap) bytes each, on dev or the host */
    size_t *counts;    /* (W) all-to-all elements per peer, send and receive */
    size_t *displs;    /* (W) their displacements */
};

static void bench_help(void)
{
    printf("usage: shardrec bench comm [flags]\n"
           "\n"
           "Times the collectives of the comm layer as nccl-tests does: all-to-all\n"
           "(sr_comm_all_to_allv, equal counts per peer) and all-reduce (fp32, SUM) on\n"
           "buffers of --min-bytes to --max-bytes per rank, each size 4x the last. Rank 0\n"
           "prints one row per size and collective: the time per call (the mean over the\n"
           "timed calls, of the slowest rank), the algorithm bandwidth (bytes / time) and\n"
           "the bus bandwidth (nccl-tests' factors: all-reduce 2(W-1)/W, all-to-all\n"
           "(W-1)/W), to compare with a link's speed. Start it with mpirun/srun; without,\n"
           "it runs a world of one rank (bus bandwidth 0: no link is crossed).\n"
           "\n"
           "  --min-bytes N          smallest buffer per rank (default 1K; suffixes K, M, G\n"
           "                         multiply by 1024, 1024^2, 1024^3; at least 4)\n"
           "  --max-bytes N          largest buffer per rank (default 256M, at most 4G)\n"
           "  --iters N              timed calls per size (default 20; by default, sizes above\n"
           "                         16 MiB time 20 x 16 MiB / size calls, at least 5)\n"
           "  --warmup N             untimed calls before them (default 5; by default 2 above\n"
           "                         16 MiB)\n"
           "  --device auto|cpu|cuda where the buffers live: auto (default) takes a GPU\n"
           "                         (node-local rank mod GPUs) when one is visible, else the\n"
           "                         CPU; cuda without a usable GPU is exit status 2\n"
           "  --comm auto|mpi|nccl   the transport: auto (default) takes nccl when the buffers\n"
           "                         are on CUDA, the build has NCCL and no two ranks of a node\n"
           "                         share a GPU; else mpi\n"
           "  --ranks-per-node N     treat blocks of N consecutive ranks as one node (default:\n"
           "                         detected; env SR_RANKS_PER_NODE)\n"
           "  --out FILE             also write the results as a JSON topology file (link\n"
           "                         bandwidth and latency, every row; docs/user-guide.md)\n"
           "\n"
           "Exit status: 0 done; 1 the run failed (a write failed, a peer stopped\n"
           "answering); 2 bad flags, or a device or transport this machine cannot run.\n");
}

/* ---- flags ----------------------------------------------------------------------- */

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_bytes(const char *flag, const char *v, int64_t *out)
{
    char num[32];
    size_t len = strlen(v);
    int64_t mult = 1, x;
    const char *units = "kKmMgG";
    const char *u = len ? strchr(units, v[len - 1]) : NULL;
    if (u && *u) {
        mult = (int64_t)1 << (10 * (1 + (u - units) / 2));
        len--;
    }
    if (len == 0 || len >= sizeof num)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s' is not a byte count (e.g. 1048576 or 1M)",
                            flag, v);
    snprintf(num, sizeof num, "%.*s", (int)len, v);
    int rc = sr_parse_i64(flag, num, 0, BENCH_MAX_SIZE, &x);
    if (!rc && (x * mult < 4 || x * mult > BENCH_MAX_SIZE))
        rc = sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s' is out of range; give 4 to 4G bytes", flag,
                          v);
    if (rc)
        return rc;
    *out = x * mult;
    return SR_OK;
}

static int parse_choice(const char *flag, const char *v, const char *const *names, int *out)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) {
            *out = i;
            return SR_OK;
        }
    return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s'; choose %s, %s or %s", flag, v, names[0],
                        names[1], names[2]);
}

static int is_flag(const char *name)
{
    static const char *const flags[] = {"min-bytes", "max-bytes",      "iters",
                                        "warmup",    "device",         "comm",
                                        "out",       "ranks-per-node", NULL};
    for (int i = 0; flags[i]; i++)
        if (!strcmp(name, flags[i]))
            return 1;
    return 0;
}

/* One flag of is_flag's with its value. */
static int apply_flag(struct bench_opts *o, const char *name, const char *v)
{
    static const char *const devices[] = {"auto", "cpu", "cuda", NULL}; /* SR_DEVICE_CHOICE_* */
    static const char *const comms[] = {"auto", "mpi", "nccl", NULL};   /* SR_COMM_CHOICE_* */
    int choice = 0, rc;
    if (!strcmp(name, "min-bytes"))
        return parse_bytes("--min-bytes", v, &o->min_bytes);
    if (!strcmp(name, "max-bytes"))
        return parse_bytes("--max-bytes", v, &o->max_bytes);
    if (!strcmp(name, "iters")) {
        o->iters_set = 1;
        return sr_parse_i64("--iters", v, 1, 1000000, &o->iters);
    }
    if (!strcmp(name, "warmup")) {
        o->warmup_set = 1;
        return sr_parse_i64("--warmup", v, 0, 1000000, &o->warmup);
    }
    if (!strcmp(name, "ranks-per-node"))
        return sr_parse_i64("--ranks-per-node", v, 1, 1 << 20, &o->ranks_per_node);
    if (!strcmp(name, "out")) {
        o->out = v;
        return SR_OK;
    }
    if (!strcmp(name, "device")) {
        rc = parse_choice("--device", v, devices, &choice);
        o->device = (enum sr_device_choice)choice;
        return rc;
    }
    if (!strcmp(name, "comm")) {
        rc = parse_choice("--comm", v, comms, &choice);
        o->comm = (enum sr_comm_choice)choice;
        return rc;
    }
    return sr_error_set(SR_ERR_INVALID_ARG, "--%s: not a flag of shardrec bench comm", name);
}

/* Every flag takes a value: "--name value" or "--name=value". Prints the
 * error; returns 0, CLI_EXIT_USAGE, or -1 for --help. */
static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return -1;
        if (strncmp(arg, "--", 2) != 0) {
            cli_error(CMD, "unexpected argument '%s'; HINT: shardrec bench comm --help", arg);
            return CLI_EXIT_USAGE;
        }
        char name[64];
        const char *eq = strchr(arg, '='), *value = eq ? eq + 1 : NULL;
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1),
                 arg + 2);
        if (!is_flag(name)) {
            cli_error(CMD, "unknown flag --%s; HINT: shardrec bench comm --help", name);
            return CLI_EXIT_USAGE;
        }
        if (!value && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
            value = argv[++i];
        if (!value) {
            cli_error(CMD, "--%s needs a value; HINT: shardrec bench comm --help", name);
            return CLI_EXIT_USAGE;
        }
        int rc = apply_flag(o, name, value);
        if (rc) {
            cli_error(CMD, "%s", sr_error_message());
            return CLI_EXIT_USAGE;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        cli_error(CMD, "--min-bytes %lld is above --max-bytes %lld", (long long)o->min_bytes,
                  (long long)o->max_bytes);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* FNV-1a of the settings every rank must share (else their calls differ). */
static uint64_t opts_hash(const struct bench_opts *o)
{
    char s[256];
    snprintf(s, sizeof s, "%lld %lld %lld %d %lld %d %d %d", (long long)o->min_bytes,
             (long long)o->max_bytes, (long long)o->iters, o->iters_set, (long long)o->warmup,
             o->warmup_set, (int)o->device, (int)o->comm);
    return sr_hash_bytes(SR_HASH_INIT, s, strlen(s));
}

/* ---- the world and the device ----------------------------------------------------- */

/* --device: a GPU (node-local rank mod the GPUs visible), the CPU, or auto. */
static int select_device(const struct bench_opts *o, int rank, struct sr_device **dev)
{
    *dev = sr_device_cpu();
    if (o->device == SR_DEVICE_CHOICE_CPU)
        return SR_OK;
    struct sr_device *gpu = NULL;
    int n = sr_device_count(SR_DEVICE_CUDA);
    if (n > 0)
        gpu = sr_device_get(SR_DEVICE_CUDA, sr_comm_launch_local_rank(rank) % n);
    else if (o->device == SR_DEVICE_CHOICE_CUDA)
        sr_device_get(SR_DEVICE_CUDA, 0); /* for its message: what is missing */
    if (!gpu && o->device == SR_DEVICE_CHOICE_CUDA)
        return sr_error_set(SR_ERR_UNSUPPORTED, "--device cuda: %s", sr_error_message());
    sr_error_clear();
    if (gpu)
        *dev = gpu;
    return SR_OK;
}

/* MPI when launched by mpirun/srun or when a flag needs it (as `train`). */
static int init_world(const struct bench_opts *o, sr_comm_t *world)
{
    if (!sr_comm_is_mpi_launch() && o->ranks_per_node == 0 && o->comm != SR_COMM_CHOICE_NCCL) {
        *world = sr_comm_init_single();
        return SR_OK;
    }
    int rc = sr_comm_init_mpi(world, NULL, NULL, (int)o->ranks_per_node);
    if (rc)
        sr_comm_finalize();
    return rc;
}

/* --comm on an MPI world: keep it, or move to NCCL (collective: every rank
 * decides alike). The MPI world is freed once the NCCL world holds its own. */
static int choose_transport(const struct bench_opts *o, sr_comm_t *world, struct sr_device *dev)
{
    const int nccl = o->comm == SR_COMM_CHOICE_NCCL;
    if (strcmp(sr_comm_backend_name(*world), "mpi") != 0 || o->comm == SR_COMM_CHOICE_MPI)
        return SR_OK;
    if (!nccl && (dev->kind != SR_DEVICE_CUDA || !sr_comm_has_nccl()))
        return SR_OK;
    int a = 0, b = 0;
    if (!nccl && sr_comm_gpu_shared_in_node(*world, dev, &a, &b)) {
        if (sr_comm_rank(*world) == 0)
            sr_log(SR_LOG_INFO, "comm",
                   "--comm auto: MPI, since ranks %d and %d of node %d drive one GPU (NCCL "
                   "cannot); --ranks-per-node 1 emulates a node per rank for NCCL",
                   a, b, sr_comm_node(*world));
        return SR_OK;
    }
    sr_comm_t w = NULL;
    int rc = sr_comm_init_nccl(&w, *world, dev);
    if (rc)
        return rc;
    sr_comm_free(*world);
    *world = w;
    return SR_OK;
}

static void close_world(sr_comm_t world)
{
    int mpi = world && strcmp(sr_comm_backend_name(world), "single") != 0;
    sr_comm_free(world);
    if (mpi)
        sr_comm_finalize();
}

/* ---- measuring ---------------------------------------------------------------------- */

/* Buffers of `cap` bytes, zeroed (so the first timed call touches no new page). */
static void ctx_init(struct bench_ctx *c, sr_comm_t world, struct sr_device *dev, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->world = world;
    c->W = sr_comm_size(world);
    c->rank = sr_comm_rank(world);
    c->counts = sr_calloc((size_t)c->W, sizeof *c->counts);
    c->displs = sr_calloc((size_t)c->W, sizeof *c->displs);
    if (dev->kind == SR_DEVICE_CPU) {
        c->send = sr_aligned_alloc(cap);
        c->recv = sr_aligned_alloc(cap);
        memset(c->send, 0, cap);
        memset(c->recv, 0, cap);
        return;
    }
    c->dev = dev;
    c->stream = sr_dev_stream_create(dev);
    c->start = sr_dev_event_create(dev);
    c->stop = sr_dev_event_create(dev);
    c->send = sr_dev_alloc_named(dev, cap, "bench comm send buffer");
    c->recv = sr_dev_alloc_named(dev, cap, "bench comm receive buffer");
    sr_dev_memset(dev, c->send, 0, cap, c->stream);
    sr_dev_memset(dev, c->recv, 0, cap, c->stream);
    sr_comm_register(world, c->send); /* host mirrors now, not in a timed call */
    sr_comm_register(world, c->recv);
    sr_dev_sync(dev, c->stream);
}

static void ctx_free(struct bench_ctx *c)
{
    if (c->dev) {
        sr_dev_free(c->dev, c->send);
        sr_dev_free(c->dev, c->recv);
        sr_dev_event_destroy(c->dev, c->start);
        sr_dev_event_destroy(c->dev, c->stop);
        sr_dev_stream_destroy(c->dev, c->stream);
    } else {
        sr_free(c->send);
        sr_free(c->recv);
    }
    sr_free(c->counts);
    sr_free(c->displs);
}

/* One blocking call of `coll` on `elems` fp32 (all-to-all: per peer). */
static void issue(struct bench_ctx *c, enum bench_coll coll, size_t elems)
{
    if (coll == BENCH_ALL_REDUCE)
        sr_comm_all_reduce(c->world, c->send, c->recv, elems, SR_DTYPE_F32, SR_REDUCE_SUM,
                           c->stream, NULL);
    else
        sr_comm_all_to_allv(c->world, c->send, c->counts, c->displs, c->recv, c->counts, c->displs,
                            SR_DTYPE_F32, c->stream, NULL);
}

/* The slowest rank's value of x (an all-gather of host memory). */
static double max_over_ranks(struct bench_ctx *c, double x)
{
    double *all = sr_calloc((size_t)c->W, sizeof *all);
    sr_comm_all_gather(c->world, &x, all, 1, SR_DTYPE_F64, c->stream, NULL);
    double m = all[0];
    for (int p = 1; p < c->W; p++)
        m = all[p] > m ? all[p] : m;
    sr_free(all);
    return m;
}

/* Mean seconds per call of `iters` back-to-back calls, after `warmup`. */
static double time_calls(struct bench_ctx *c, enum bench_coll coll, size_t elems, int64_t warmup,
                         int64_t iters)
{
    for (int p = 0; p < c->W; p++) {
        c->counts[p] = elems;
        c->displs[p] = (size_t)p * elems;
    }
    for (int64_t i = 0; i < warmup; i++)
        issue(c, coll, elems);
    if (c->dev)
        sr_dev_sync(c->dev, c->stream);
    sr_comm_barrier(c->world);
    if (c->dev)
        sr_dev_event_record(c->dev, c->start, c->stream);
    const double t0 = sr_clock_seconds();
    for (int64_t i = 0; i < iters; i++)
        issue(c, coll, elems);
    double seconds = sr_clock_seconds() - t0;
    if (c->dev) {
        sr_dev_event_record(c->dev, c->stop, c->stream);
        sr_dev_sync(c->dev, c->stream);
        seconds = 1e-3 * sr_dev_event_elapsed_ms(c->dev, c->start, c->stop);
    }
    return seconds / (double)iters;
}

/* Mean seconds per call of a small all-to-all of host memory (the counts
 * exchange's path on a device-memory transport, NCCL: MPI on the host),
 * the slowest rank's; 0 on a host-memory transport (its rows are that). */
static double time_host_exchange(struct bench_ctx *c, const struct bench_opts *o)
{
    if (c->W == 1 || sr_comm_memory(c->world) != SR_COMM_MEMORY_DEVICE)
        return 0;
    int64_t *send = sr_calloc((size_t)c->W, sizeof *send), *recv = sr_calloc((size_t)c->W, 8);
    size_t *n = sr_calloc((size_t)c->W, sizeof *n), *at = sr_calloc((size_t)c->W, sizeof *at);
    for (int p = 0; p < c->W; p++) {
        n[p] = 1;
        at[p] = (size_t)p;
    }
    double t0 = 0;
    for (int64_t i = 0; i < o->warmup + o->iters; i++) {
        if (i == o->warmup) {
            sr_comm_barrier(c->world);
            t0 = sr_clock_seconds();
        }
        sr_comm_all_to_allv(c->world, send, n, at, recv, n, at, SR_DTYPE_I64, c->stream, NULL);
    }
    double t = (sr_clock_seconds() - t0) / (double)o->iters;
    sr_free(send);
    sr_free(recv);
    sr_free(n);
    sr_free(at);
    return max_over_ranks(c, t);
}

/* Calls at a size: as given, or fewer above BENCH_BIG by default. */
static int64_t iters_at(const struct bench_opts *o, int64_t bytes)
{
    if (o->iters_set || bytes <= BENCH_BIG)
        return o->iters;
    int64_t n = o->iters * BENCH_BIG / bytes, floor = o->iters < 5 ? o->iters : 5;
    return n > floor ? n : floor;
}

static int64_t warmup_at(const struct bench_opts *o, int64_t bytes)
{
    if (o->warmup_set || bytes <= BENCH_BIG || o->warmup < 2)
        return o->warmup;
    return 2;
}

/* fp32 elements per call for size S: all-reduce S/4, all-to-all S/4/W per peer
 * (at least one). */
static size_t elems_at(enum bench_coll coll, int64_t bytes, int W)
{
    size_t n = (size_t)bytes / 4;
    if (coll == BENCH_ALL_TO_ALL)
        n = n / (size_t)W ? n / (size_t)W : 1;
    return n;
}

static double bus_factor(enum bench_coll coll, int W)
{
    double f = (double)(W - 1) / W;
    return coll == BENCH_ALL_REDUCE ? 2 * f : f;
}

/* ---- output --------------------------------------------------------------------------- */

static const char *device_kind(const struct sr_device *dev)
{
    return dev->kind == SR_DEVICE_CPU ? "cpu" : "cuda";
}

static void print_header(const struct bench_opts *o, sr_comm_t world, const struct sr_device *dev)
{
    int W = sr_comm_size(world), L = sr_comm_local_size(world);
    printf("# shardrec bench comm\n");
    printf("# backend         %s\n", sr_comm_backend_name(world));
    printf("# world size      %d\n", W);
    printf("# ranks per node  %d (%d node%s)\n", L, W / L, W / L == 1 ? "" : "s");
    if (dev->kind == SR_DEVICE_CPU)
        printf("# device          cpu\n");
    else
        printf("# device          cuda (rank 0 on %s)\n", dev->name);
    int fewer = !o->iters_set && o->max_bytes > BENCH_BIG;
    printf("# calls           %lld timed per size after %lld warm-up%s\n", (long long)o->iters,
           (long long)o->warmup, fewer ? " (fewer of each above 16 MiB)" : "");
    printf("# time            mean per call, of the slowest rank\n");
    printf("#\n# %12s  %-10s  %12s  %11s  %11s\n", "size (B)", "collective", "time (us)",
           "algbw GB/s", "busbw GB/s");
    fflush(stdout);
}

/* Algorithm bandwidth, GB/s (1e9 bytes per second). */
static double algbw_of(const struct bench_row *r)
{
    return r->seconds > 0 ? (double)r->bytes / r->seconds * 1e-9 : 0;
}

static void print_row(const struct bench_row *r, int W)
{
    double algbw = algbw_of(r);
    /* %g: a slow small call (a loaded host) still shows a non-zero rate */
    printf("  %12zu  %-10s  %12.2f  %11.4g  %11.4g\n", r->bytes, coll_names[r->coll],
           r->seconds * 1e6, algbw, algbw * bus_factor(r->coll, W));
    fflush(stdout);
}

/* Six significant digits: enough, short JSON, and a tiny rate stays non-zero. */
static double rounded(double x)
{
    if (x == 0 || !isfinite(x))
        return x;
    double scale = pow(10, 5 - (int)floor(log10(fabs(x))));
    return round(x * scale) / scale;
}

static cJSON *row_json(const struct bench_row *r, int W)
{
    double algbw = algbw_of(r);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "collective", coll_names[r->coll]);
    cJSON_AddNumberToObject(m, "bytes", (double)r->bytes);
    cJSON_AddNumberToObject(m, "time_us", rounded(r->seconds * 1e6));
    cJSON_AddNumberToObject(m, "algbw_gb_s", rounded(algbw));
    cJSON_AddNumberToObject(m, "busbw_gb_s", rounded(algbw * bus_factor(r->coll, W)));
    return m;
}

/* "links": the one kind of link this run crossed, from its all-to-alls: the
 * largest one's bus bandwidth, the smallest one's time. Empty for W = 1. */
static cJSON *links_json(const struct bench_row *rows, int n, int W, int L, double host_s)
{
    cJSON *links = cJSON_CreateObject();
    const struct bench_row *small = NULL, *large = NULL;
    for (int i = 0; i < n; i++) {
        if (rows[i].coll != BENCH_ALL_TO_ALL)
            continue;
        if (!small || rows[i].bytes < small->bytes)
            small = &rows[i];
        if (!large || rows[i].bytes > large->bytes)
            large = &rows[i];
    }
    if (W == 1 || !small)
        return links;
    const char *kind = L == 1 ? "inter_node" : L == W ? "intra_node" : "mixed";
    double algbw = algbw_of(large);
    cJSON *link = cJSON_AddObjectToObject(links, kind);
    cJSON_AddNumberToObject(link, "bandwidth_gb_s",
                            rounded(algbw * bus_factor(BENCH_ALL_TO_ALL, W)));
    cJSON_AddNumberToObject(link, "latency_us", rounded(small->seconds * 1e6));
    if (host_s > 0)
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(links, "host"), "latency_us",
                                rounded(host_s * 1e6));
    return links;
}

int cli_bench_write_json(const char *path, cJSON *root)
{
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    struct sr_atomic_file af = {0};
    int rc = sr_atomic_file_open(&af, path);
    if (!rc && (fputs(text, af.f) < 0 || fputc('\n', af.f) < 0)) {
        int e = errno;
        sr_atomic_file_abort(&af);
        rc = sr_error_set(SR_ERR_IO, "%s: cannot write (%s); HINT: check the free disk space", path,
                          strerror(e));
    } else if (!rc) {
        rc = sr_atomic_file_commit(&af);
    }
    cJSON_free(text);
    return rc;
}

static int write_json(const char *path, sr_comm_t world, const struct sr_device *dev,
                      const struct bench_row *rows, int n, double host_s)
{
    int W = sr_comm_size(world), L = sr_comm_local_size(world);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "source", "shardrec bench comm");
    cJSON_AddStringToObject(root, "backend", sr_comm_backend_name(world));
    cJSON_AddNumberToObject(root, "world_size", W);
    cJSON_AddNumberToObject(root, "ranks_per_node", L);
    cJSON_AddStringToObject(root, "device", device_kind(dev));
    cJSON_AddItemToObject(root, "links", links_json(rows, n, W, L, host_s));
    cJSON *ms = cJSON_AddArrayToObject(root, "measurements");
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(ms, row_json(&rows[i], W));
    return cli_bench_write_json(path, root);
}

/* ---- the run --------------------------------------------------------------------------- */

static int count_sizes(const struct bench_opts *o)
{
    int n = 0;
    for (int64_t b = o->min_bytes; b <= o->max_bytes; b *= 4)
        n++;
    return n;
}

/* Every collective at every size; rank 0 prints the rows as they come. */
static void measure(const struct bench_opts *o, struct bench_ctx *c, struct bench_row *rows)
{
    int n = 0;
    for (int k = 0; k < BENCH_N_COLL; k++) {
        for (int64_t b = o->min_bytes; b <= o->max_bytes; b *= 4) {
            enum bench_coll coll = (enum bench_coll)k;
            size_t elems = elems_at(coll, b, c->W);
            double t = time_calls(c, coll, elems, warmup_at(o, b), iters_at(o, b));
            struct bench_row *r = &rows[n++];
            r->coll = coll;
            r->bytes = 4 * elems * (coll == BENCH_ALL_TO_ALL ? (size_t)c->W : 1);
            r->seconds = max_over_ranks(c, t);
            if (c->rank == 0)
                print_row(r, c->W);
        }
    }
}

static int run(const struct bench_opts *o, sr_comm_t world, struct sr_device *dev)
{
    struct bench_ctx c;
    int W = sr_comm_size(world), n = BENCH_N_COLL * count_sizes(o), rc = SR_OK;
    size_t cap = (size_t)o->max_bytes > 4 * (size_t)W ? (size_t)o->max_bytes : 4 * (size_t)W;
    struct bench_row *rows = sr_calloc((size_t)n, sizeof *rows);
    ctx_init(&c, world, dev, cap);
    if (c.rank == 0)
        print_header(o, world, dev);
    double host_s = time_host_exchange(&c, o);
    if (c.rank == 0 && host_s > 0)
        printf("# counts exchange %.2f us (a small all-to-all of host memory)\n", host_s * 1e6);
    measure(o, &c, rows);
    if (c.rank == 0 && o->out)
        rc = write_json(o->out, world, dev, rows, n, host_s);
    ctx_free(&c);
    sr_free(rows);
    return rc;
}

/* The world on the device and transport the flags ask for. */
static int setup(const struct bench_opts *o, sr_comm_t *world, struct sr_device **dev)
{
    int rc = init_world(o, world);
    if (rc)
        return rc;
    rc = sr_comm_check_same(*world, opts_hash(o), "shardrec bench comm flags");
    if (!rc)
        rc = select_device(o, sr_comm_rank(*world), dev);
    if (!rc)
        rc = choose_transport(o, world, *dev);
    if (rc) {
        close_world(*world);
        *world = NULL;
        return rc;
    }
    if ((*dev)->kind != SR_DEVICE_CPU)
        sr_comm_bind_device(*world, *dev);
    return SR_OK;
}

static int cli_bench_comm(int argc, char **argv)
{
    struct bench_opts o = {.min_bytes = 1024,
                           .max_bytes = 256 << 20,
                           .iters = 20,
                           .warmup = 5,
                           .device = SR_DEVICE_CHOICE_AUTO,
                           .comm = SR_COMM_CHOICE_AUTO};
    int rc = bench_parse(argc, argv, &o);
    if (rc < 0) {
        bench_help();
        return 0;
    }
    if (rc)
        return rc;
    /* before any work, so a typo never costs a run */
    if (o.out && sr_output_path_check(o.out, "--out", SR_OUTPUT_ATOMIC)) {
        cli_error(CMD, "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    sr_comm_t world = NULL;
    struct sr_device *dev = NULL;
    if ((rc = setup(&o, &world, &dev))) {
        cli_error(CMD, "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    rc = run(&o, world, dev);
    if (rc)
        cli_error(CMD, "%s", sr_error_message());
    close_world(world);
    return rc ? CLI_EXIT_FAIL : 0;
}

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: shardrec bench <benchmark> [flags]\n\n"
               "benchmarks:\n"
               "  comm     time all-to-all and all-reduce from 1 KiB to 256 MiB per rank\n"
               "  device   measure one device: copy, embedding gather and update, GEMM\n\n"
               "`shardrec bench <benchmark> --help` lists its flags.\n");
}

int cli_bench(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("bench",
                  "which benchmark? HINT: shardrec bench comm|device (shardrec bench --help)");
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        bench_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "comm"))
        return cli_bench_comm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "device"))
        return cli_bench_device(argc - 1, argv + 1);
    cli_error("bench", "unknown benchmark '%s'; HINT: shardrec bench --help", argv[1]);
    return CLI_EXIT_USAGE;
}
