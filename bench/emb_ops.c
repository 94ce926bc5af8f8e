/*
 * Embedding op benchmark: the pooled forward and the fused backward (SGD,
 * row-wise Adagrad) of a device's embedding op table, in GB/s of the least
 * traffic each op must move and as a share of the same device's copy
 * bandwidth, measured in the same run. Written against the op tables only
 * (device/ops_embedding.h), so it runs on any backend.
 *
 * Cases (tables of 2^24 rows or M's 10^6, so that rows come from DRAM, not
 * from a cache; at least 256 MB of rows per launch):
 *
 *   d128   D 128, 20 ids per bag: 8 features over 2 tables, batch 4096
 *          (655 360 ids, 336 MB of rows; 16 GiB of tables)
 *   d16    D 16, 1 id per bag: 26 features, one table each, batch 163 840
 *          (workload K's shape; 4.26 M ids, 273 MB of rows; 26 GiB of tables)
 *   m      workload M's embeddings: D 128, 20 ids per bag, 26 features, one
 *          table of 10^6 rows each, batch 16 384 (8.52 M ids, 4.4 GB of rows;
 *          13.3 GB of tables; its pooled block, 218 MB, outgrows the cache)
 *
 * Ids: uniform over the rows (default), or --id-dist zipf:S as the trainer's
 * synthetic data draws them (src/data/zipf.c): popularity rank k has weight
 * about 1/(k+1)^S, and a fixed bijection per feature scatters the ranks over
 * the rows, so the hot ids are not all on row 0. The ids of feature f, sample
 * b, position j are the generator's (same seed stream and counter), all from
 * --seed. Each case line reports, per launch: the ids, the distinct (table,
 * row) pairs, and the longest run (the most ids of one (table, row)).
 *
 * Timing: each op is issued on the device's default stream between two
 * device events (sr_dev_event_record / sr_dev_event_elapsed_ms), synchronised
 * after each rep; warm-up reps first, then the median of --reps. A backward
 * rep is preceded by an untimed forward(keep_ids = 1), as in training.
 *
 * Bytes, the least each op must move:
 *   forward              every id's row read once + the pooled output written
 *                        (ids and offsets not counted; under Zipf a repeated
 *                        row counts each time, as it is gathered each time)
 *   backward + update    every touched (unique) row and its optimizer state
 *                        read and written once + the pooled gradient and the
 *                        ids (8 bytes each) read once
 *   copy                 a device-to-device sr_dev_copy of --copy-mb MiB:
 *                        bytes read + bytes written
 *
 * The "sector MB" column counts the same traffic in whole 32-byte sectors of
 * the rows and the row-wise state (each table on its own allocation), the
 * unit a GPU moves between its cache and DRAM: a 4-byte row-wise state costs
 * a sector to read and one to write unless its row's neighbours share it, so
 * there the least count and the sector count part (ids, offsets and the
 * pooled blocks are counted as in the least count).
 *
 * Build: make bench (or make tests) -> $(BUILD)/bench/emb_ops.
 * Run:   build/bench/emb_ops --device cuda [--case d128|d16|m|all] [--reps 20]
 *                                 [--id-dist uniform|zipf:S]
 *        Smaller runs (smoke tests, CPUs): --rows, --batch shrink the case.
 *        The CUDA backward's hot-row split (device/ops_embedding.h,
 *        sr_emb_run_split) comes from SR_EMB_RUN_SPLIT, so a sweep is
 *        for L in 16 32 64 128 256; do SR_EMB_RUN_SPLIT=$L emb_ops ...; done
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/optim.h"
#include "shardrec/rng.h"
#include "shardrec/synthetic.h"
#include "data/synth_internal.h"
#include "device/ops_embedding.h"

#define MAX_F 32

struct bench_case {
    const char *name;
    int dim, ids_per_bag, features, tables, batch;
    int64_t rows;
};

struct opts {
    struct sr_device *dev;
    const char *device, *which;
    const char *id_dist; /* as given: uniform or zipf:S */
    enum sr_id_dist dist;
    double zipf_s;
    int64_t rows; /* 0: the case's */
    int batch;    /* 0: the case's */
    int reps, warmup;
    int64_t copy_mb; /* 0: 2048 on a GPU, 256 elsewhere */
    uint64_t seed;
    enum sr_dtype emb_dtype; /* --emb-dtype: the tables' storage */
};

/* 32-byte sectors (the unit a GPU moves between its cache and DRAM) that a
 * launch's rows touch, each table allocated on its own: */
struct sectors {
    int64_t gathered; /* by every id's row, a repeated row each time (forward) */
    int64_t rows;     /* by the distinct rows, once (the update's reads, and writes) */
    int64_t state;    /* by the distinct rows' row-wise Adagrad state (4 bytes a row) */
};

/* One case on the device: tables, batch, workspace. */
struct bench {
    struct bench_case c;
    struct sr_emb_table tables[MAX_F];
    struct sr_emb_feature features[MAX_F];
    struct sr_emb_layout layout;
    struct sr_emb_batch batch;
    int64_t feature_pos[MAX_F], table_pos[MAX_F + 1];
    int64_t *offsets_dev, *values_dev;
    float *pooled, *dpooled;
    void *ws_sgd, *ws_rowwise;
    int64_t n;       /* ids per launch */
    int64_t unique;  /* distinct (table, row) pairs among them */
    int64_t longest; /* the most ids of one (table, row) */
    struct sectors sec; /* 32-byte sectors they touch */
};

struct result {
    const char *op;
    int dim;
    double ms, bytes;
    double sector_bytes; /* the same traffic counted in whole sectors of the rows and state */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: emb_ops [--device cpu|cuda] [--case d128|d16|m|all] [--reps N]\n"
               "               [--warmup N] [--rows N] [--batch N] [--copy-mb N] [--seed N]\n"
               "               [--id-dist uniform|zipf:S] [--emb-dtype fp32|fp16|bf16]\n"
               "Times the embedding forward and backward (+SGD, +row-wise Adagrad) with device\n"
               "events; prints ms, GB/s of the least traffic and %% of the device's copy\n"
               "bandwidth, and the same traffic counted in 32-byte sectors of the rows and\n"
               "row-wise state (sector MB) with its %% of copy. --rows and --batch shrink a\n"
               "case (defaults: 2^24 rows, m 10^6; >= 256 MB of rows per launch). --id-dist: ids\n"
               "uniform over the rows (default) or Zipf with exponent S (e.g. zipf:1.05, as\n"
               "the trainer's synthetic data), drawn from --seed;\n"
               "each case line gives the ids, distinct rows and longest run of one row.\n"
               "--emb-dtype: tables stored in 16 bits (rows move half the bytes; updates\n"
               "rounded stochastically).\n"
               "Environment: SR_EMB_RUN_SPLIT=L (a power of two, 8..65536) sets the CUDA\n"
               "backward's hot-row split (default 64); a sweep:\n"
               "  for L in 16 32 64 128 256; do SR_EMB_RUN_SPLIT=$L emb_ops ...; done\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){
        .device = "cpu", .which = "all", .id_dist = "uniform", .reps = 20, .warmup = 3, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "emb_ops: %s needs a value (or is unknown)\n", a);
            return -1;
        }
        i++;
        if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--case") == 0)
            o->which = v;
        else if (strcmp(a, "--reps") == 0)
            o->reps = atoi(v);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = atoi(v);
        else if (strcmp(a, "--rows") == 0)
            o->rows = strtoll(v, NULL, 0);
        else if (strcmp(a, "--batch") == 0)
            o->batch = atoi(v);
        else if (strcmp(a, "--copy-mb") == 0)
            o->copy_mb = strtoll(v, NULL, 0);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 0);
        else if (strcmp(a, "--id-dist") == 0)
            o->id_dist = v;
        else if (strcmp(a, "--emb-dtype") == 0) {
            if (sr_wire_dtype_parse(v, &o->emb_dtype)) {
                fprintf(stderr, "emb_ops: --emb-dtype %s: expected fp32, fp16 or bf16\n", v);
                return -1;
            }
        }
        else {
            fprintf(stderr, "emb_ops: unknown flag %s\n", a);
            return -1;
        }
    }
    if (strcmp(o->which, "all") != 0 && strcmp(o->which, "d128") != 0 &&
        strcmp(o->which, "d16") != 0 && strcmp(o->which, "m") != 0) {
        fprintf(stderr, "emb_ops: --case %s: expected d128, d16, m or all\n", o->which);
        return -1;
    }
    if (sr_id_dist_parse(o->id_dist, &o->dist, &o->zipf_s) != SR_OK) {
        fprintf(stderr, "emb_ops: --id-dist: %s\n", sr_error_message());
        return -1;
    }
    if (o->reps < 1 || o->warmup < 0 || o->rows < 0 || o->batch < 0 || o->copy_mb < 0) {
        fprintf(stderr,
                "emb_ops: --reps must be >= 1; --warmup, --rows, --batch, --copy-mb >= 0\n");
        return -1;
    }
    if (strcmp(o->device, "cpu") == 0)
        o->dev = sr_device_get(SR_DEVICE_CPU, 0);
    else if (strcmp(o->device, "cuda") == 0)
        o->dev = sr_device_get(SR_DEVICE_CUDA, 0);
    else
        sr_error_set(SR_ERR_INVALID_ARG, "--device %s: expected cpu or cuda", o->device);
    if (!o->dev) {
        fprintf(stderr, "emb_ops: %s\n", sr_error_message());
        return -2; /* no usage: the flags were right */
    }
    return 0;
}

/* ---- timing ------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

enum op { OP_COPY, OP_FORWARD, OP_FORWARD_KEEP, OP_BACKWARD_SGD, OP_BACKWARD_ROWWISE };

struct timed {
    struct sr_device *dev;
    struct bench *b;
    void *dst;
    const void *src;
    size_t bytes;
};

static void issue(const struct timed *t, enum op op)
{
    struct sr_device *dev = t->dev;
    struct bench *b = t->b;
    const int rowwise = op == OP_BACKWARD_ROWWISE;
    struct sr_emb_update u = {.lr = 1e-6f, .step = 1};
    switch (op) {
    case OP_COPY:
        sr_dev_copy(dev, t->dst, t->src, t->bytes, NULL);
        break;
    case OP_FORWARD:
    case OP_FORWARD_KEEP:
        b->layout.optim = SR_OPTIM_SGD; /* the workspace ws_sgd was initialised for */
        dev->emb->forward(dev, &b->layout, &b->batch, op == OP_FORWARD_KEEP, b->pooled, b->ws_sgd,
                          NULL);
        break;
    case OP_BACKWARD_SGD:
    case OP_BACKWARD_ROWWISE:
        b->layout.optim = rowwise ? SR_OPTIM_ROWWISE_ADAGRAD : SR_OPTIM_SGD;
        u.optim = sr_optim_config_default(b->layout.optim);
        dev->emb->backward(dev, &b->layout, &b->batch, b->dpooled, &u,
                           rowwise ? b->ws_rowwise : b->ws_sgd, NULL);
        break;
    }
}

/* Median milliseconds of op over reps, after warmup reps. */
static double time_op(const struct opts *o, const struct timed *t, enum op op)
{
    struct sr_device *dev = t->dev;
    sr_event_t e0 = sr_dev_event_create(dev), e1 = sr_dev_event_create(dev);
    float *ms = calloc((size_t)o->reps, sizeof *ms);
    SR_ASSERT(ms);
    for (int r = -o->warmup; r < o->reps; r++) {
        if (op == OP_BACKWARD_SGD || op == OP_BACKWARD_ROWWISE) {
            struct bench *b = t->b;
            b->layout.optim = op == OP_BACKWARD_ROWWISE ? SR_OPTIM_ROWWISE_ADAGRAD : SR_OPTIM_SGD;
            dev->emb->forward(dev, &b->layout, &b->batch, 1, b->pooled,
                              op == OP_BACKWARD_ROWWISE ? b->ws_rowwise : b->ws_sgd, NULL);
        }
        sr_dev_event_record(dev, e0, NULL);
        issue(t, op);
        sr_dev_event_record(dev, e1, NULL);
        sr_dev_event_sync(dev, e1);
        if (r >= 0)
            ms[r] = sr_dev_event_elapsed_ms(dev, e0, e1);
    }
    qsort(ms, (size_t)o->reps, sizeof *ms, cmp_float);
    const double med =
        o->reps % 2 ? ms[o->reps / 2] : 0.5 * (ms[o->reps / 2 - 1] + ms[o->reps / 2]);
    free(ms);
    sr_dev_event_destroy(dev, e0);
    sr_dev_event_destroy(dev, e1);
    return med;
}

/* ---- a case ----------------------------------------------------------------- */

/* Device bytes of a case: tables, row-wise state, ids and pooled tensors. */
static size_t case_bytes(const struct bench_case *c)
{
    const size_t n = (size_t)c->features * c->batch * c->ids_per_bag;
    return (size_t)c->tables * (size_t)c->rows * (c->dim + 1) * 4 + n * 40 +
           (size_t)c->batch * c->features * c->dim * 8;
}

/* Host memory available now (MemAvailable), 0 when unknown. */
static size_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb * 1024;
}

/* The ids of every feature, feature-major (feature f, sample b, position j at
 * (f B + b) ids_per_bag + j), feature f on table f % T: the synthetic
 * generator's draw (src/data/synthetic.c) for tables of c->rows rows, from
 * the same seed stream and counter. */
static void draw_ids(const struct opts *o, const struct bench_case *c, int64_t *values)
{
    for (int f = 0; f < c->features; f++) {
        struct sr_id_sampler m;
        sr_id_sampler_init(&m, c->rows, o->seed, f, o->dist, o->zipf_s);
        const uint64_t stream = sr_synth_stream(SR_SYNTH_STREAM_RANK, f);
        int64_t *v = values + (int64_t)f * c->batch * c->ids_per_bag;
        for (int64_t b = 0; b < c->batch; b++)
            for (int j = 0; j < c->ids_per_bag; j++) {
                const double u = sr_rng_uniform(o->seed, stream, (uint64_t)b << 16 | (uint64_t)j);
                *v++ = sr_id_sampler_id(&m, sr_id_sampler_rank(&m, u));
            }
    }
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sectors of bytes [a, a + len) (len > 0) not already counted: *last is the
 * highest sector counted so far, spans coming in increasing order. */
static int64_t new_sectors(int64_t a, int64_t len, int64_t *last)
{
    int64_t first = a >> 5;
    const int64_t end = (a + len - 1) >> 5;
    if (first <= *last)
        first = *last + 1;
    if (end < first)
        return 0;
    *last = end;
    return end - first + 1;
}

/* The distinct (table, row) pairs among the ids, the most ids of one pair,
 * and the sectors they touch: each table's ids (of all its features) sorted,
 * then counted in runs. row_bytes: the bytes of a stored row. */
static void count_rows(const struct bench_case *c, const int64_t *values, int64_t row_bytes,
                       int64_t *unique, int64_t *longest, struct sectors *sec)
{
    const int64_t per_feature = (int64_t)c->batch * c->ids_per_bag;
    const int per_table = (c->features + c->tables - 1) / c->tables;
    int64_t *ids = malloc((size_t)(per_table * per_feature) * sizeof *ids);
    SR_ASSERT(ids);
    *unique = 0, *longest = 0;
    *sec = (struct sectors){0};
    for (int t = 0; t < c->tables; t++) {
        int64_t n = 0, last_row = -1, last_state = -1;
        for (int f = t; f < c->features; f += c->tables, n += per_feature)
            memcpy(ids + n, values + f * per_feature, (size_t)per_feature * sizeof *ids);
        qsort(ids, (size_t)n, sizeof *ids, cmp_i64);
        for (int64_t i = 0, run = 0; i < n; i++) {
            const int64_t a = ids[i] * row_bytes;
            sec->gathered += ((a + row_bytes - 1) >> 5) - (a >> 5) + 1;
            run = i > 0 && ids[i] == ids[i - 1] ? run + 1 : 1;
            *longest = run > *longest ? run : *longest;
            if (run > 1)
                continue;
            *unique += 1;
            sec->rows += new_sectors(a, row_bytes, &last_row);
            sec->state += new_sectors(ids[i] * 4, 4, &last_state);
        }
    }
    free(ids);
}

/* The batch: fixed-length bags, ids by --id-dist, their distinct rows and
 * longest run, and the table-grouped positions. */
static void make_batch(const struct opts *o, struct bench *b, int64_t *offsets, int64_t *values)
{
    const struct bench_case *c = &b->c;
    const int64_t bags = (int64_t)c->features * c->batch;
    for (int64_t k = 0; k <= bags; k++)
        offsets[k] = k * c->ids_per_bag;
    draw_ids(o, c, values);
    count_rows(c, values, (int64_t)c->dim * sr_emb_elem_bytes(o->emb_dtype), &b->unique,
               &b->longest, &b->sec);
    /* the table-grouped id list (embed/ebc.c's compute_meta) */
    int64_t cursor[MAX_F];
    const int64_t per_feature = (int64_t)c->batch * c->ids_per_bag;
    memset(b->table_pos, 0, sizeof b->table_pos);
    for (int f = 0; f < c->features; f++)
        b->table_pos[f % c->tables + 1] += per_feature;
    for (int t = 0; t < c->tables; t++) {
        b->table_pos[t + 1] += b->table_pos[t];
        cursor[t] = b->table_pos[t];
    }
    for (int f = 0; f < c->features; f++) {
        b->feature_pos[f] = cursor[f % c->tables];
        cursor[f % c->tables] += per_feature;
    }
}

static void bench_init(const struct opts *o, struct bench *b, const struct bench_case *c)
{
    struct sr_device *dev = o->dev;
    memset(b, 0, sizeof *b);
    b->c = *c;
    b->n = (int64_t)c->features * c->batch * c->ids_per_bag;
    for (int t = 0; t < c->tables; t++) {
        const int64_t n = c->rows * c->dim;
        const size_t elem = sr_emb_elem_bytes(o->emb_dtype);
        b->tables[t] = (struct sr_emb_table){.weight = sr_dev_alloc(dev, (size_t)n * elem),
                                             .state = sr_dev_alloc(dev, (size_t)c->rows * 4),
                                             .rows = c->rows,
                                             .dim = c->dim,
                                             .dtype = o->emb_dtype,
                                             .stream = (uint64_t)t + 1};
        dev->emb->init_uniform(dev, b->tables[t].weight, o->emb_dtype, c->rows, c->dim, 0, 0,
                               c->dim, 7, (uint64_t)t + 1, 0.005, 0.015, NULL);
        dev->emb->fill(dev, b->tables[t].state, c->rows, 0.0f, NULL);
    }
    for (int f = 0; f < c->features; f++)
        b->features[f] = (struct sr_emb_feature){.table = f % c->tables, .col = f * c->dim};
    b->layout = (struct sr_emb_layout){.num_tables = c->tables,
                                       .tables = b->tables,
                                       .num_features = c->features,
                                       .features = b->features,
                                       .out_dim = c->features * c->dim,
                                       .max_dim = c->dim,
                                       .max_batch = c->batch,
                                       .max_values = b->n,
                                       .optim = SR_OPTIM_SGD,
                                       .stochastic = 1,
                                       .seed = 7};
    const int64_t bags = (int64_t)c->features * c->batch;
    int64_t *offsets = malloc((size_t)(bags + 1) * 8), *values = malloc((size_t)b->n * 8);
    SR_ASSERT(offsets && values);
    make_batch(o, b, offsets, values);
    b->offsets_dev = sr_dev_alloc(dev, (size_t)(bags + 1) * 8);
    b->values_dev = sr_dev_alloc(dev, (size_t)b->n * 8);
    sr_dev_copy(dev, b->offsets_dev, offsets, (size_t)(bags + 1) * 8, NULL);
    sr_dev_copy(dev, b->values_dev, values, (size_t)b->n * 8, NULL);
    sr_dev_sync(dev, NULL);
    free(offsets), free(values);
    b->batch = (struct sr_emb_batch){.batch = c->batch,
                                     .num_values = b->n,
                                     .offsets = b->offsets_dev,
                                     .values = b->values_dev,
                                     .weights = NULL,
                                     .feature_pos = b->feature_pos,
                                     .table_pos = b->table_pos};
    const size_t pooled = (size_t)c->batch * b->layout.out_dim;
    b->pooled = sr_dev_alloc(dev, pooled * 4);
    b->dpooled = sr_dev_alloc(dev, pooled * 4);
    dev->emb->fill(dev, b->dpooled, (int64_t)pooled, 1e-3f, NULL);
    b->ws_sgd = sr_dev_alloc(dev, dev->emb->workspace_bytes(dev, &b->layout));
    dev->emb->workspace_init(dev, &b->layout, b->ws_sgd);
    b->layout.optim = SR_OPTIM_ROWWISE_ADAGRAD;
    b->ws_rowwise = sr_dev_alloc(dev, dev->emb->workspace_bytes(dev, &b->layout));
    dev->emb->workspace_init(dev, &b->layout, b->ws_rowwise);
    b->layout.optim = SR_OPTIM_SGD;
    sr_dev_sync(dev, NULL);
}

static void bench_free(struct sr_device *dev, struct bench *b)
{
    sr_dev_sync(dev, NULL);
    for (int t = 0; t < b->c.tables; t++) {
        sr_dev_free(dev, b->tables[t].weight);
        sr_dev_free(dev, b->tables[t].state);
    }
    sr_dev_free(dev, b->offsets_dev);
    sr_dev_free(dev, b->values_dev);
    sr_dev_free(dev, b->pooled);
    sr_dev_free(dev, b->dpooled);
    sr_dev_free(dev, b->ws_sgd);
    sr_dev_free(dev, b->ws_rowwise);
}

/* Times the case's ops into res; returns how many. */
static int run_case(const struct opts *o, const struct bench_case *c, struct result *res)
{
    struct bench b;
    bench_init(o, &b, c);
    const double D = c->dim, pooled = (double)c->batch * b.layout.out_dim * 4;
    const double E = (double)sr_emb_elem_bytes(o->emb_dtype); /* bytes of a stored weight */
    const double rows_read = (double)b.n * D * E;
    printf("case %s: D %d, ids per bag %d, %d features over %d tables of %lld rows, batch %d, "
           "%s ids, %s tables; per launch %lld ids, %lld distinct rows, longest run %lld; "
           "%.0f MB of rows per forward%s\n",
           c->name, c->dim, c->ids_per_bag, c->features, c->tables, (long long)c->rows, c->batch,
           o->id_dist, sr_dtype_name(o->emb_dtype), (long long)b.n, (long long)b.unique, (long long)b.longest, rows_read / 1e6,
           rows_read < 256e6 || c->rows < ((int64_t)1 << 24)
               ? " (below the benchmark's 2^24 rows / 256 MB: a smoke run)"
               : "");
    fflush(stdout);
    const struct timed t = {.dev = o->dev, .b = &b};
    const double fwd = rows_read + pooled, fwd_sec = 32.0 * (double)b.sec.gathered + pooled;
    const double bwd_common = pooled + (double)b.n * 8;
    const double rows_sec = 32.0 * (double)b.sec.rows, state_sec = 32.0 * (double)b.sec.state;
    res[0] = (struct result){"forward", c->dim, time_op(o, &t, OP_FORWARD), fwd, fwd_sec};
    res[1] = (struct result){"forward (keep_ids)", c->dim, time_op(o, &t, OP_FORWARD_KEEP), fwd,
                             fwd_sec};
    res[2] = (struct result){"backward+sgd", c->dim, time_op(o, &t, OP_BACKWARD_SGD),
                             (double)b.unique * D * E * 2 + bwd_common,
                             rows_sec * 2 + bwd_common};
    res[3] =
        (struct result){"backward+rowwise_adagrad", c->dim, time_op(o, &t, OP_BACKWARD_ROWWISE),
                        (double)b.unique * (D * E + 4) * 2 + bwd_common,
                        (rows_sec + state_sec) * 2 + bwd_common};
    bench_free(o->dev, &b);
    return 4;
}

static double copy_ms(const struct opts *o, double *bytes)
{
    struct sr_device *dev = o->dev;
    const int64_t mb = o->copy_mb ? o->copy_mb : dev->kind == SR_DEVICE_CUDA ? 2048 : 256;
    const size_t n = (size_t)mb << 20;
    struct timed t = {.dev = dev, .bytes = n};
    void *src = sr_dev_alloc(dev, n), *dst = sr_dev_alloc(dev, n);
    sr_dev_memset(dev, src, 1, n, NULL);
    sr_dev_memset(dev, dst, 0, n, NULL);
    t.src = src, t.dst = dst;
    const double ms = time_op(o, &t, OP_COPY);
    sr_dev_free(dev, src);
    sr_dev_free(dev, dst);
    *bytes = 2.0 * (double)n;
    return ms;
}

int main(int argc, char **argv)
{
    struct opts o;
    const int rc = parse(argc, argv, &o);
    if (rc != 0) {
        if (rc == -1)
            usage(stderr);
        return 2;
    }
    const struct bench_case cases[] = {
        {"d128", 128, 20, 8, 2, 4096, (int64_t)1 << 24},
        {"d16", 16, 1, 26, 26, 163840, (int64_t)1 << 24},
        {"m", 128, 20, 26, 26, 16384, 1000000},
    };
    struct result res[16];
    double copy_bytes;
    const double copy = copy_ms(&o, &copy_bytes);
    printf("device %s; copy bandwidth: %.1f GB/s (%.0f MiB device to device, read + written; "
           "median of %d after %d warm-up)\n",
           o.dev->name, copy_bytes / copy / 1e6, copy_bytes / 2 / (1 << 20), o.reps, o.warmup);
    const double copy_gbs = copy_bytes / copy / 1e6;
    int nres = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct bench_case c = cases[i];
        if (strcmp(o.which, "all") != 0 && strcmp(o.which, c.name) != 0)
            continue;
        if (o.rows)
            c.rows = o.rows;
        if (o.batch)
            c.batch = o.batch;
        const size_t avail = host_available();
        if (o.dev->kind == SR_DEVICE_CPU && avail && case_bytes(&c) > avail) {
            fprintf(stderr,
                    "emb_ops: case %s needs %.1f GiB of host memory, %.1f GiB available; "
                    "HINT: --rows N (fewer rows per table) or --batch N\n",
                    c.name, (double)case_bytes(&c) / (1 << 30), (double)avail / (1 << 30));
            return 2;
        }
        nres += run_case(&o, &c, res + nres);
    }
    printf("\n%-26s %4s %10s %9s %10s %9s %10s %9s\n", "op", "D", "ms", "MB", "GB/s",
           "% of copy", "sector MB", "% (sect.)");
    printf("%-26s %4s %10.3f %9.1f %10.1f %9.1f %10.1f %9.1f\n", "copy (device to device)", "-",
           copy, copy_bytes / 1e6, copy_gbs, 100.0, copy_bytes / 1e6, 100.0);
    for (int i = 0; i < nres; i++) {
        const double gbs = res[i].bytes / res[i].ms / 1e6;
        const double sgbs = res[i].sector_bytes / res[i].ms / 1e6;
        printf("%-26s %4d %10.3f %9.1f %10.1f %9.1f %10.1f %9.1f\n", res[i].op, res[i].dim,
               res[i].ms, res[i].bytes / 1e6, gbs, 100.0 * gbs / copy_gbs,
               res[i].sector_bytes / 1e6, 100.0 * sgbs / copy_gbs);
    }
    return 0;
}
