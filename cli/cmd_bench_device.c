/*
 * `shardrec bench device`: what one device delivers to training, measured
 * through the device ops only (the ops training calls), so that the planner's
 * costs rest on this machine's numbers (include/shardrec/topology.h):
 *
 *   copy     sr_dev_copy of a large buffer within the device; bytes read +
 *            bytes written per second (BENCH.md)
 *   gather   the embedding forward (keep_ids = 1, as a training step runs
 *            it): bags of one id, so every id reads one random row and writes
 *            one pooled row; rows/s = ids/s
 *   update   the embedding backward with fused SGD: the kept ids sorted,
 *            duplicates merged into one gradient per row, each touched row
 *            read and written once; rows/s = ids/s (duplicates included, as
 *            gather counts them). Each launch is preceded by an untimed
 *            forward that keeps its ids, as in training.
 *   gemm     the dense ops' gemm, C (m, n) = A (m, n) B (n, n) (a batch through
 *            an MLP layer: the rate the planner costs the MLPs at), per math mode
 *            the device has (the CPU: fp32; CUDA: fp32, tf32, bf16, where bf16
 *            includes rounding the operands, as training pays it); 2 m n^2 FLOP
 *   launch   one of a step's smallest ops: the dense ops' bias + ReLU over
 *            64 x 64 values, back to back; its time is what a step's many
 *            small ops cost at least (the launch and one block on a GPU, the
 *            call and its threads on the CPU), which the planner adds per op
 *
 * Gather and update run at dims 16, 64 and 128 on ids drawn uniformly and
 * from Zipf(1.05), by the synthetic generator's own sampler
 * (sr_synth_draw_ids: the same law and rank -> row bijection as `train
 * --id-dist zipf:1.05`). One table of E rows serves every dim (the first
 * E x D floats of one buffer), so the rates differ by the row's bytes only.
 * Launches take consecutive slices of a pool of ids several times larger
 * than a launch, so rows come from memory, not from the last launch's cache.
 * The Zipf hot share is the share of the pool's ids whose popularity rank is
 * among the hottest 1% of rows (rank < E / 100).
 *
 * Timing, each figure (cli/bench_timer.h): a warm-up, then the median of
 * several blocks of launches lasting about 0.2 s each (0.05 s with
 * --quick), timed by device events on the ops' stream; an update launch
 * follows an untimed forward, outside its events.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef SR_USE_OMP
#include <omp.h>
#endif

#include <cjson/cJSON.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h" /* sr_output_path_check */
#include "shardrec/comm.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/optim.h"
#include "shardrec/synthetic.h"
#include "shardrec/topology.h"
#include "shardrec/train_config.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"
#include "bench_device.h"
#include "bench_timer.h"
#include "cli.h"

#define CMD "bench device"

static const char *const math_names[SR_TOPO_MATHS] = {"fp32", "tf32", "bf16"};
const char *const bd_dist_names[SR_TOPO_SKEWS] = {"uniform", "zipf:1.05"};

static void bench_device_help(void)
{
    printf("usage: shardrec bench device [--device auto|cpu|cuda] [--out FILE] [--quick]\n"
           "                             [--math fp32,tf32,bf16]\n"
           "\n"
           "Measures, through the device ops that training calls, what the device `train`\n"
           "would use delivers: copy bandwidth (bytes read + written per second), the\n"
           "embedding forward's random-row gather and the embedding backward's SGD update\n"
           "(rows/s, bags of one id) at dims 16, 64 and 128 on uniform and Zipf(1.05) ids\n"
           "(as `train --id-dist zipf:1.05` draws them), the share of those Zipf ids that\n"
           "the hottest 1%% of rows take, a GEMM's FLOP/s per math mode, and the memory\n"
           "capacity. Each figure: a warm-up, then the median of several timed blocks of\n"
           "about 0.2 s (0.05 s with --quick), timed with device events. One table row\n"
           "per measurement; docs/user-guide.md, \"Measuring a device\".\n"
           "\n"
           "  --device auto|cpu|cuda where to measure: auto (default) takes a GPU (node-local\n"
           "                         rank mod GPUs, as train) when one is visible, else the CPU;\n"
           "                         cuda without a usable GPU is exit status 2\n"
           "  --out FILE             also write the figures as a JSON topology file (written\n"
           "                         atomically; the planner reads it: shardrec/topology.h)\n"
           "  --quick                smaller table and blocks (seconds on a CPU; figures less\n"
           "                         exact: a smoke run)\n"
           "  --math LIST            GEMM math modes to time, comma-separated: fp32, tf32, bf16\n"
           "                         (default: every mode of the device; the CPU has fp32 only)\n"
           "\n"
           "Exit status: 0 done; 1 the run failed (the file could not be written); 2 bad\n"
           "flags, or a device or math mode this machine cannot run.\n");
}

/* ---- flags ----------------------------------------------------------------------- */

static int parse_maths(const char *v, struct bd_opts *o)
{
    char buf[64];
    if (strlen(v) >= sizeof buf || !*v)
        return sr_error_set(SR_ERR_INVALID_ARG, "--math: '%s'; give fp32, tf32, bf16", v);
    snprintf(buf, sizeof buf, "%s", v);
    memset(o->maths, 0, sizeof o->maths);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int m = 0;
        while (m < SR_TOPO_MATHS && strcmp(tok, math_names[m]) != 0)
            m++;
        if (m == SR_TOPO_MATHS)
            return sr_error_set(SR_ERR_INVALID_ARG, "--math: '%s'; choose fp32, tf32, bf16", tok);
        o->maths[m] = 1;
    }
    o->maths_set = 1;
    return SR_OK;
}

static int apply_flag(struct bd_opts *o, const char *name, const char *v)
{
    if (!strcmp(name, "out")) {
        o->out = v;
        return *v ? SR_OK : cli_empty_path("out");
    }
    if (!strcmp(name, "math"))
        return parse_maths(v, o);
    /* --device */
    if (!strcmp(v, "auto"))
        o->device = SR_DEVICE_CHOICE_AUTO;
    else if (!strcmp(v, "cpu"))
        o->device = SR_DEVICE_CHOICE_CPU;
    else if (!strcmp(v, "cuda"))
        o->device = SR_DEVICE_CHOICE_CUDA;
    else
        return sr_error_set(SR_ERR_INVALID_ARG, "--device: '%s'; choose auto, cpu or cuda", v);
    return SR_OK;
}

/* "--name value" or "--name=value"; --quick takes none. Prints the error;
 * returns 0, CLI_EXIT_USAGE, or -1 for --help. */
static int bench_device_parse(int argc, char **argv, struct bd_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return -1;
        if (!strcmp(arg, "--quick")) {
            o->quick = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            cli_error(CMD, "unexpected argument '%s'; HINT: shardrec bench device --help", arg);
            return CLI_EXIT_USAGE;
        }
        char name[64];
        const char *eq = strchr(arg, '='), *value = eq ? eq + 1 : NULL;
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1),
                 arg + 2);
        if (strcmp(name, "device") && strcmp(name, "out") && strcmp(name, "math")) {
            cli_error(CMD, "unknown flag --%s; HINT: shardrec bench device --help", name);
            return CLI_EXIT_USAGE;
        }
        if (!value && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
            value = argv[++i];
        if (!value) {
            cli_error(CMD, "--%s needs a value; HINT: shardrec bench device --help", name);
            return CLI_EXIT_USAGE;
        }
        if (apply_flag(o, name, value)) {
            cli_error(CMD, "%s", sr_error_message());
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

/* ---- the device ------------------------------------------------------------------- */

/* --device as `train` chooses (src/train/trainer_device.c), and --math
 * against what it computes: every mode of the device when not given. */
static int select_device(struct bd_opts *o, struct sr_device **dev)
{
    *dev = sr_device_cpu();
    if (o->device != SR_DEVICE_CHOICE_CPU) {
        struct sr_device *gpu = NULL;
        int n = sr_device_count(SR_DEVICE_CUDA);
        if (n > 0)
            gpu = sr_device_get(SR_DEVICE_CUDA, sr_comm_launch_local_rank(0) % n);
        else if (o->device == SR_DEVICE_CHOICE_CUDA)
            sr_device_get(SR_DEVICE_CUDA, 0); /* for its message: what is missing */
        if (!gpu && o->device == SR_DEVICE_CHOICE_CUDA)
            return sr_error_set(SR_ERR_UNSUPPORTED, "--device cuda: %s", sr_error_message());
        sr_error_clear();
        if (gpu)
            *dev = gpu;
    }
    const int cuda = (*dev)->kind == SR_DEVICE_CUDA;
    for (int m = 0; m < SR_TOPO_MATHS; m++) {
        if (!o->maths_set)
            o->maths[m] = m == SR_MATH_FP32 || cuda;
        else if (o->maths[m] && m != SR_MATH_FP32 && !cuda)
            return sr_error_set(SR_ERR_UNSUPPORTED,
                                "--math %s needs a CUDA device; the CPU computes in fp32 only "
                                "(HINT: --math fp32, or --device cuda on a machine with a GPU)",
                                math_names[m]);
    }
    return SR_OK;
}

/* The sizes: a GPU gets a table of 4M rows (2 GiB at dim 128) and launches
 * of 1M ids; the CPU 2M rows (1 GiB at dim 128: 4x a 32 MiB L3 at dim 16)
 * and launches of 64Ki ids, halved while the table would take more than a
 * quarter of the host's memory. --quick: 1/4 to 1/8 of those. */
static struct bd_sizes sizes_for(const struct sr_device *dev, int quick)
{
    const int gpu = dev->kind == SR_DEVICE_CUDA;
    struct bd_sizes z = {
        .rows = gpu ? (int64_t)4 << 20 : (int64_t)2 << 20,
        .ids = gpu ? (int64_t)1 << 20 : (int64_t)1 << 16,
        .pool = gpu ? (int64_t)8 << 20 : (int64_t)2 << 20,
        .copy_bytes = gpu ? (size_t)2 << 30 : (size_t)256 << 20,
        .gemm_m = gpu ? 16384 : 2048,
        .gemm_n = gpu ? 1024 : 512,
        .repeat_s = 0.2,
        .repeats = 5,
    };
    if (quick) {
        z.rows /= gpu ? 4 : 8;
        z.ids /= 4;
        z.pool /= gpu ? 4 : 8;
        z.copy_bytes /= 4;
        z.gemm_m /= 2;
        z.repeat_s = 0.05;
        z.repeats = 3;
    }
    const double host = (double)sr_machine_memory();
    while (!gpu && z.rows > ((int64_t)1 << 16) && (double)z.rows * MAX_DIM * 4 > host / 4)
        z.rows /= 2;
    return z;
}

static void ctx_init(struct bd_ctx *c, struct sr_device *dev, int quick)
{
    memset(c, 0, sizeof *c);
    c->dev = dev;
    c->z = sizes_for(dev, quick);
    cli_bench_timer_init(&c->timer, dev, c->z.repeat_s, c->z.repeats);
    c->stream = c->timer.stream;
}

/* ---- table rows ----------------------------------------------------------------------- */

static void print_header(const struct bd_ctx *c, const struct bd_results *res)
{
    char mem[32];
    const struct bd_sizes *z = &c->z;
    printf("# shardrec bench device\n");
    if (c->dev->kind == SR_DEVICE_CPU) {
        int threads = 1;
#ifdef SR_USE_OMP
        threads = omp_get_max_threads();
#endif
        printf("# device      cpu (%d thread%s)\n", threads, threads == 1 ? "" : "s");
    } else {
        printf("# device      %s\n", c->dev->name);
    }
    printf("# memory      %s (%s)\n", sr_format_bytes(mem, sizeof mem, res->memory_bytes),
           c->dev->kind == SR_DEVICE_CPU ? "the host's physical memory" : "device memory");
    printf("# embedding   one table of %lld rows (dims 16, 64, 128: its first rows x dim "
           "floats); bags of 1 id, %lld ids a launch from a pool of %lld\n",
           (long long)z->rows, (long long)z->ids, (long long)z->pool);
    printf("# timing      warm-up, then the median of %d blocks of ~%.2f s (device events)\n",
           z->repeats, z->repeat_s);
    printf("#\n# %-20s %4s  %-10s %9s %12s  %s\n", "measurement", "dim", "ids", "launches",
           "ms/launch", "rate");
    fflush(stdout);
}

int bd_quiet;

void bd_add_row(struct bd_results *res, const struct bd_row *r)
{
    char dim[8] = "-", ms[24] = "-", launches[24] = "-";
    if (r->dim)
        snprintf(dim, sizeof dim, "%d", r->dim);
    if (r->seconds > 0)
        snprintf(ms, sizeof ms, "%.4f", r->seconds * 1e3);
    if (r->launches)
        snprintf(launches, sizeof launches, "%lld", (long long)r->launches);
    if (!bd_quiet) {
        printf("  %-20s %4s  %-10s %9s %12s  %.4g %s\n", r->name, dim, r->ids ? r->ids : "-",
               launches, ms, r->rate * r->shown, r->shown_unit);
        fflush(stdout);
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "measurement", r->name);
    if (r->dim)
        cJSON_AddNumberToObject(m, "dim", r->dim);
    if (r->ids)
        cJSON_AddStringToObject(m, "ids", r->ids);
    if (r->launches)
        cJSON_AddNumberToObject(m, "launches", (double)r->launches);
    if (r->seconds > 0)
        cJSON_AddNumberToObject(m, "time_us", round(r->seconds * 1e9) / 1e3);
    if (r->table_rows)
        cJSON_AddNumberToObject(m, "table_rows", (double)r->table_rows);
    if (r->ids_drawn)
        cJSON_AddNumberToObject(m, "ids_drawn", (double)r->ids_drawn);
    cJSON_AddNumberToObject(m, "rate", r->rate);
    cJSON_AddStringToObject(m, "unit", r->unit);
    cJSON_AddItemToArray(res->rows, m);
}

/* ---- copy and GEMM ---------------------------------------------------------------------- */

struct bd_copy {
    struct bd_ctx *c;
    void *dst, *src;
    size_t bytes;
};

static void copy_launch(void *arg, int64_t i)
{
    struct bd_copy *a = arg;
    sr_dev_copy(a->c->dev, a->dst, a->src, a->bytes, a->c->stream);
}

static void measure_copy(struct bd_ctx *c, struct bd_results *res)
{
    struct sr_device *dev = c->dev;
    struct bd_copy a = {c, NULL, NULL, c->z.copy_bytes};
    a.src = sr_dev_alloc_named(dev, a.bytes, "bench device copy source");
    a.dst = sr_dev_alloc_named(dev, a.bytes, "bench device copy destination");
    sr_op_emb_fill(dev, a.src, (int64_t)(a.bytes / 4), 1.0f, c->stream);
    sr_dev_memset(dev, a.dst, 0, a.bytes, c->stream);
    const struct cli_timed_op t = {copy_launch, NULL, &a};
    int64_t k;
    const double s = cli_bench_timer_figure(&c->timer, &t, &k);
    res->memory_gb_s = 2.0 * (double)a.bytes / s * 1e-9;
    char name[32], size[32];
    snprintf(name, sizeof name, "copy %s", sr_format_bytes(size, sizeof size, (double)a.bytes));
    bd_add_row(res, &(struct bd_row){.name = name,
                                     .launches = k,
                                     .seconds = s,
                                     .rate = res->memory_gb_s,
                                     .unit = "GB/s",
                                     .shown = 1,
                                     .shown_unit = "GB/s"});
    sr_dev_sync(dev, c->stream);
    sr_dev_free(dev, a.src);
    sr_dev_free(dev, a.dst);
}

struct bd_gemm {
    struct bd_ctx *c;
    float *a, *b, *out;
    int m, n; /* (m, n) x (n, n): a batch through an MLP layer */
};

static void gemm_launch(void *arg, int64_t i)
{
    struct bd_gemm *g = arg;
    sr_op_dense_gemm(g->c->dev, g->c->stream, SR_NO_TRANS, SR_NO_TRANS, g->m, g->n, g->n, 1.0f,
                     g->a, g->n, g->b, g->n, 0.0f, g->out, g->n);
}

/* The shape of training's GEMMs, a batch of m rows through a layer of n x n
 * (CPU 2048 x 512 x 512, GPU 16384 x 1024 x 1024), not a square peak: the
 * planner costs the MLPs at this rate. A, B uniform in [-1, 1) (the
 * embedding init op); each math mode asked for. */
static void measure_gemm(struct bd_ctx *c, const struct bd_opts *o, struct bd_results *res)
{
    struct sr_device *dev = c->dev;
    const int m = c->z.gemm_m, n = c->z.gemm_n;
    const size_t bytes = (size_t)m * n * sizeof(float), w_bytes = (size_t)n * n * sizeof(float);
    struct bd_gemm g = {c,
                        sr_dev_alloc_named(dev, bytes, "bench device GEMM A"),
                        sr_dev_alloc_named(dev, w_bytes, "bench device GEMM B"),
                        sr_dev_alloc_named(dev, bytes, "bench device GEMM C"),
                        m,
                        n};
    sr_op_emb_init_uniform(dev, g.a, SR_DTYPE_F32, m, n, 0, 0, n, IDS_SEED, 1, -1.0, 1.0,
                           c->stream);
    sr_op_emb_init_uniform(dev, g.b, SR_DTYPE_F32, n, n, 0, 0, n, IDS_SEED, 2, -1.0, 1.0,
                           c->stream);
    const enum sr_math saved = dev->math;
    for (int mm = 0; mm < SR_TOPO_MATHS; mm++) {
        if (!o->maths[mm])
            continue;
        dev->math = (enum sr_math)mm;
        const struct cli_timed_op t = {gemm_launch, NULL, &g};
        int64_t k;
        const double s = cli_bench_timer_figure(&c->timer, &t, &k);
        res->gemm_flop_s[mm] = 2.0 * (double)m * n * n / s;
        res->gemm_done[mm] = 1;
        char name[40];
        snprintf(name, sizeof name, "gemm %s %dx%dx%d", math_names[mm], m, n, n);
        bd_add_row(res, &(struct bd_row){.name = name,
                                         .launches = k,
                                         .seconds = s,
                                         .rate = res->gemm_flop_s[mm] * 1e-12,
                                         .unit = "TFLOP/s",
                                         .shown = 1,
                                         .shown_unit = "TFLOP/s"});
    }
    sr_dev_sync(dev, c->stream);
    dev->math = saved;
    sr_dev_free(dev, g.a);
    sr_dev_free(dev, g.b);
    sr_dev_free(dev, g.out);
}

/* ---- launch ---------------------------------------------------------------------------------- */

#define LAUNCH_SIDE 64

struct bd_launch {
    struct bd_ctx *c;
    float *y, *bias;
};

static void launch_launch(void *arg, int64_t i)
{
    struct bd_launch *l = arg;
    sr_op_dense_bias_relu_forward(l->c->dev, l->c->stream, l->y, l->bias, LAUNCH_SIDE, LAUNCH_SIDE,
                                  1);
}

static void measure_launch(struct bd_ctx *c, struct bd_results *res)
{
    struct sr_device *dev = c->dev;
    struct bd_launch l = {
        c,
        sr_dev_alloc_named(dev, LAUNCH_SIDE * LAUNCH_SIDE * sizeof(float),
                           "bench device launch values"),
        sr_dev_alloc_named(dev, LAUNCH_SIDE * sizeof(float), "bench device launch bias")};
    sr_op_emb_fill(dev, l.y, LAUNCH_SIDE * LAUNCH_SIDE, 0.5f, c->stream);
    sr_op_emb_fill(dev, l.bias, LAUNCH_SIDE, 0.0f, c->stream);
    const struct cli_timed_op t = {launch_launch, NULL, &l};
    int64_t k;
    res->launch_s = cli_bench_timer_figure(&c->timer, &t, &k);
    bd_add_row(res, &(struct bd_row){.name = "launch (64x64 op)",
                                     .launches = k,
                                     .seconds = res->launch_s,
                                     .rate = res->launch_s * 1e6,
                                     .unit = "us",
                                     .shown = 1,
                                     .shown_unit = "us per op"});
    sr_dev_sync(dev, c->stream);
    sr_dev_free(dev, l.y);
    sr_dev_free(dev, l.bias);
}

/* ---- the topology file ------------------------------------------------------------------- */

static cJSON *rates_json(const double rates[SR_TOPO_SKEWS][SR_TOPO_DIMS])
{
    static const char *const skews[SR_TOPO_SKEWS] = {"uniform", "zipf"};
    cJSON *o = cJSON_CreateObject();
    for (int s = 0; s < SR_TOPO_SKEWS; s++) {
        cJSON *a = cJSON_AddArrayToObject(o, skews[s]);
        for (int d = 0; d < SR_TOPO_DIMS; d++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(round(rates[s][d])));
    }
    return o;
}

/* topology.h's keys for what this run measured, plus its rows. */
static cJSON *topology_json(const struct sr_device *dev, struct bd_results *res)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "source", "shardrec bench device");
    cJSON_AddStringToObject(root, "device", dev->kind == SR_DEVICE_CPU ? "cpu" : "cuda");
    cJSON_AddNumberToObject(root, "memory_bytes", res->memory_bytes);
    cJSON_AddNumberToObject(root, "memory_gb_s", round(res->memory_gb_s * 1e6) / 1e6);
    cJSON_AddNumberToObject(root, "memory_base_bytes", res->base_bytes);
    cJSON_AddItemToObject(root, "gather_rows_s", rates_json(res->gather));
    cJSON_AddItemToObject(root, "update_rows_s", rates_json(res->update));
    cJSON_AddNumberToObject(root, "zipf_hot_share",
                            round(res->hot_share[SR_ID_DIST_ZIPF] * 1e6) / 1e6);
    cJSON *gemm = cJSON_AddObjectToObject(root, "gemm_tflop_s");
    for (int m = 0; m < SR_TOPO_MATHS; m++)
        if (res->gemm_done[m])
            cJSON_AddNumberToObject(gemm, math_names[m],
                                    round(res->gemm_flop_s[m] * 1e-12 * 1e6) / 1e6);
    cJSON_AddNumberToObject(root, "launch_us", round(res->launch_s * 1e9) / 1e3);
    cJSON_AddItemToObject(root, "measurements", res->rows);
    res->rows = NULL;
    return root;
}

/* ---- the run -------------------------------------------------------------------------------- */

/* Resident bytes of this process now (/proc/self/statm), 0 if unknown. */
static double resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGE_SIZE);
}

/* Every figure into res (its rows printed unless quiet). */
static void measure_all(struct bd_ctx *c, const struct bd_opts *o, struct bd_results *res)
{
    struct sr_device *dev = c->dev;
    res->rows = cJSON_CreateArray();
    res->memory_bytes = dev->memory_bytes ? (double)dev->memory_bytes : (double)sr_machine_memory();
    /* a process's own footprint (code, libraries, runtime threads): on the CPU
     * it counts against the memory a rank has; a GPU's allocations start at 0 */
    res->base_bytes = dev->memory_bytes ? 0 : resident_bytes();
    if (!bd_quiet)
        print_header(c, res);
    bd_add_row(res, &(struct bd_row){.name = "memory capacity",
                                     .rate = res->memory_bytes,
                                     .unit = "bytes",
                                     .shown = 1.0 / (1 << 30),
                                     .shown_unit = "GiB"});
    measure_copy(c, res);
    bd_measure_embedding(c, res);
    measure_gemm(c, o, res);
    measure_launch(c, res);
}

static int run(const struct bd_opts *o, struct sr_device *dev)
{
    struct bd_ctx c;
    struct bd_results res = {0};
    ctx_init(&c, dev, o->quick);
    measure_all(&c, o, &res);
    int rc = o->out ? cli_bench_write_json(o->out, topology_json(dev, &res)) : SR_OK;
    cJSON_Delete(res.rows);
    cli_bench_timer_free(&c.timer);
    return rc;
}

int cli_bench_device_quick(struct sr_topology *out)
{
    struct bd_opts o = {.device = SR_DEVICE_CHOICE_AUTO, .quick = 1};
    struct sr_device *dev = NULL;
    struct bd_ctx c;
    struct bd_results res = {0};
    int rc = select_device(&o, &dev);
    if (rc)
        return rc;
    bd_quiet = 1;
    ctx_init(&c, dev, 1);
    measure_all(&c, &o, &res);
    cJSON *root = topology_json(dev, &res);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    memset(out, 0, sizeof *out);
    rc = sr_topology_merge_json(out, text, "bench device --quick");
    cJSON_free(text);
    cli_bench_timer_free(&c.timer);
    bd_quiet = 0;
    return rc;
}

int cli_bench_device(int argc, char **argv)
{
    struct bd_opts o = {.device = SR_DEVICE_CHOICE_AUTO};
    int rc = bench_device_parse(argc, argv, &o);
    if (rc < 0) {
        bench_device_help();
        return 0;
    }
    if (rc)
        return rc;
    /* before any work, so a typo never costs a run */
    if (o.out && sr_output_path_check(o.out, "--out", SR_OUTPUT_ATOMIC)) {
        cli_error(CMD, "%s", sr_error_message());
        return CLI_EXIT_USAGE;
    }
    struct sr_device *dev = NULL;
    if ((rc = select_device(&o, &dev))) {
        cli_error(CMD, "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    rc = run(&o, dev);
    if (rc)
        cli_error(CMD, "%s", sr_error_message());
    return rc ? CLI_EXIT_FAIL : 0;
}
