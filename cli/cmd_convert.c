/*
 * `shardrec convert IN.tsv... -o OUT.bin`: Criteo TSV (plain or gzip, or
 * binary files, read in order as one stream) to shardrec's binary format
 * (include/shardrec/binfmt.h, docs/data-format.md), ids reduced mod the
 * tables' rows exactly as `train` would reduce them when reading the TSV, so
 * training on the output gives the same batches as training on the input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/binfmt.h"
#include "shardrec/clock.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/npy_criteo.h"
#include "shardrec/reader.h"
#include "shardrec/train_config.h"
#include "cli.h"

/* Workload K's 26 Criteo-Kaggle table sizes (BENCH.md). */
static const int64_t kaggle_rows[26] = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};

struct convert_args {
    const char **inputs;
    int n_inputs;
    const char *out;
    int64_t rows[SR_MAX_FEATURES];
    int num_features;
    int skip_bad_lines;
    int npy;      /* --npy: the inputs are TorchRec's PREFIX_{dense,sparse,labels}.npy */
    int progress; /* -1: when stderr is a terminal */
    int64_t max_line, chunk;
};

#define PROGRESS_SECONDS 1.0
#define NPY_BATCH        4096      /* samples a batch of --npy days, */
#define NPY_BATCH_IDS    (1 << 22) /* and at most this many ids (32 MiB) */

static void convert_help(void)
{
    printf("usage: shardrec convert [--npy] IN... -o OUT.bin [--table-rows R1,R2,...]\n"
           "                        [--skip-bad-lines] [--max-line BYTES] [--chunk-samples N]\n"
           "                        [--progress]\n"
           "\n"
           "Converts Criteo TSV files (label, 13 integers, one hex id per feature; gzip\n"
           "accepted) into shardrec's memory-mappable binary format, read in the order\n"
           "given. Ids are reduced mod each table's rows as `train --data` would, so\n"
           "`train --data OUT.bin` sees exactly the batches of `train --data IN...`;\n"
           "give the same --table-rows as the training run.\n"
           "\n"
           "With --npy the inputs are TorchRec's preprocessed Criteo days instead\n"
           "(torchrec/datasets/scripts/npy_preproc_criteo.py): each IN is a PREFIX such as\n"
           "/data/day_0, read as PREFIX_dense.npy (float32 (N, 13), taken as given),\n"
           "PREFIX_sparse.npy (int32, uint32 or int64 (N, 26)) and PREFIX_labels.npy (0 or\n"
           "1, (N,) or (N, 1)); ids are reduced as TorchRec's `sparse %% num_embeddings`\n"
           "(numpy's floor modulo), so training sees TorchRec's samples. MLPerf's\n"
           "multi-hot days hold PREFIX_sparse_multi_hot.npz (np.savez; members 0..25 of\n"
           "int32 (N, hotness)) in place of the sparse array: bags of several ids.\n"
           "\n"
           "  -o, --out FILE       output (written beside it under a temporary name, renamed\n"
           "                       over FILE when complete: never a half-written FILE)\n"
           "  --table-rows LIST    rows per feature (default: workload K's 26 Criteo-Kaggle\n"
           "                       tables, 1460,583,10131227,...)\n"
           "  --npy                the inputs are TorchRec's numpy days (PREFIX...; above)\n"
           "  --skip-bad-lines     count bad lines by kind and report them, instead of failing\n"
           "  --max-line BYTES     longest line accepted (default 65536)\n"
           "  --chunk-samples N    samples per chunk of the file (default 65536)\n"
           "  --progress, --no-progress  a progress line on stderr (input read, samples, rate,\n"
           "                       ETA; default: when stderr is a terminal)\n");
}

static int convert_value_flag(struct convert_args *a, const char *name, const char *value)
{
    if (!strcmp(name, "o") || !strcmp(name, "out")) {
        a->out = value;
        return SR_OK;
    }
    if (!strcmp(name, "table-rows"))
        return sr_parse_rows("--table-rows", value, a->rows, &a->num_features, SR_MAX_FEATURES);
    if (!strcmp(name, "max-line"))
        return sr_parse_i64("--max-line", value, 16, (int64_t)1 << 30, &a->max_line);
    if (!strcmp(name, "chunk-samples"))
        return sr_parse_i64("--chunk-samples", value, 1, (int64_t)1 << 30, &a->chunk);
    return sr_error_set(SR_ERR_INVALID_ARG, "unknown flag --%s; HINT: shardrec convert --help",
                        name);
}

static int is_value_flag(const char *name)
{
    return !strcmp(name, "o") || !strcmp(name, "out") || !strcmp(name, "table-rows") ||
           !strcmp(name, "max-line") || !strcmp(name, "chunk-samples");
}

/* Returns SR_OK, an error, or 1 for --help. */
static int convert_parse(int argc, char **argv, struct convert_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || !arg[1]) {
            a->inputs[a->n_inputs++] = arg;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        char buf[64];
        const char *eq = strchr(name, '='), *value = NULL;
        if (eq && (size_t)(eq - name) < sizeof buf) {
            memcpy(buf, name, (size_t)(eq - name));
            buf[eq - name] = 0;
            value = eq + 1;
            name = buf;
        }
        if (!strcmp(name, "help") || !strcmp(name, "h"))
            return 1;
        if (!strcmp(name, "skip-bad-lines") && !value) {
            a->skip_bad_lines = 1;
            continue;
        }
        if (!strcmp(name, "npy") && !value) {
            a->npy = 1;
            continue;
        }
        if ((!strcmp(name, "progress") || !strcmp(name, "no-progress")) && !value) {
            a->progress = !strcmp(name, "progress");
            continue;
        }
        if (!value && is_value_flag(name) && i + 1 < argc)
            value = argv[++i];
        if (!value)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "flag %s needs a value or is unknown; "
                                "HINT: shardrec convert --help",
                                arg);
        int rc = convert_value_flag(a, name, value);
        if (rc)
            return rc;
    }
    if (!a->out || !a->n_inputs)
        return sr_error_set(SR_ERR_INVALID_ARG, "need input files and -o OUT.bin; HINT: "
                                                "shardrec convert train.txt -o train.bin");
    return SR_OK;
}

/* The output is no input, by identity (a hard link too), not only by name. */
static int check_distinct(const struct convert_args *a)
{
    static const char *const parts[] = {"dense.npy", "sparse.npy", "labels.npy",
                                        "sparse_multi_hot.npz"};
    const int per = a->npy ? 4 : 1, n = a->n_inputs * per + 1;
    struct sr_named_file *f = sr_calloc((size_t)n, sizeof *f);
    char(*paths)[4096] = sr_calloc((size_t)n, sizeof *paths);
    for (int i = 0; i < a->n_inputs; i++)
        for (int k = 0; k < per; k++) {
            char *p = paths[i * per + k];
            if (a->npy)
                snprintf(p, sizeof *paths, "%s_%s", a->inputs[i], parts[k]);
            else
                snprintf(p, sizeof *paths, "%s", a->inputs[i]);
            f[i * per + k] = (struct sr_named_file){"input", p, 0};
        }
    f[n - 1] = (struct sr_named_file){"-o", a->out, 1};
    int rc = sr_files_check_distinct(f, n);
    sr_free(paths);
    sr_free(f);
    return rc;
}

/* The progress line (stderr): input bytes read of the whole, samples, rate,
 * ETA; at most once a second, and once at the end (also after an error, so
 * that its message starts a line of its own). */
struct progress {
    int on;
    double start, shown;
    int64_t done, total; /* input bytes */
};

static void progress_init(struct progress *p, const struct convert_args *a, int64_t total)
{
    p->on = a->progress >= 0 ? a->progress : isatty(fileno(stderr));
    p->start = p->shown = sr_clock_seconds();
    p->done = 0;
    p->total = total;
}

static void show_progress(struct progress *p, int64_t samples, int last)
{
    const double now = sr_clock_seconds();
    if (!p->on || (!last && now - p->shown < PROGRESS_SECONDS))
        return;
    p->shown = now;
    const double rate = (double)p->done / (now - p->start > 1e-9 ? now - p->start : 1e-9);
    char eta[32];
    fprintf(stderr,
            "\r\033[Kconvert: %.1f of %.1f MB read (%.0f%%), %lld samples, %.1f MB/s, ETA %s%s",
            (double)p->done / 1e6, (double)p->total / 1e6,
            p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, (long long)samples,
            rate / 1e6,
            sr_format_duration(eta, sizeof eta, rate > 0 ? (double)(p->total - p->done) / rate : 0),
            last ? "\n" : "");
    fflush(stderr);
}

static int convert_run(const struct convert_args *a, int64_t *samples)
{
    struct sr_reader_options o = {.world = 1,
                                  .batch_size = 4096,
                                  .keep_partial = 1,
                                  .skip_bad_lines = a->skip_bad_lines,
                                  .max_line = a->max_line};
    struct sr_reader *r;
    struct sr_binfmt_writer *w = NULL;
    struct sr_batch b;
    int rc = sr_reader_open(&r, a->inputs, a->n_inputs, a->num_features, a->rows, &o);
    if (rc)
        return rc;
    sr_reader_batch_init(r, &b, NULL);
    rc = sr_binfmt_writer_open(&w, a->out, sr_reader_num_dense(r), a->num_features, a->rows,
                               sr_reader_has_weights(r), a->chunk);
    struct progress p;
    progress_init(&p, a, 0);
    while (!rc && (rc = sr_reader_next(r, &b)) == 1) {
        rc = sr_binfmt_writer_append(w, &b);
        sr_reader_progress(r, &p.done, &p.total);
        show_progress(&p, sr_binfmt_writer_count(w), 0);
    }
    *samples = w ? sr_binfmt_writer_count(w) : 0;
    sr_reader_progress(r, &p.done, &p.total);
    show_progress(&p, *samples, 1);
    if (!rc)
        rc = sr_binfmt_writer_close(w);
    else
        sr_binfmt_writer_abort(w);
    sr_reader_report(r, stderr);
    sr_batch_free(&b);
    sr_reader_free(r);
    return rc;
}

/* One day's samples, a batch at a time, into the writer. */
static int convert_npy_day(const struct convert_args *a, const struct sr_npy_criteo *c,
                           struct sr_binfmt_writer *w, struct sr_batch *b, struct progress *p)
{
    const int64_t before = p->done, bytes = sr_npy_criteo_bytes(c);
    int rc = SR_OK;
    for (int64_t s = 0; !rc && s < c->samples; s += b->max_batch) {
        int n = (int)(c->samples - s < b->max_batch ? c->samples - s : b->max_batch);
        rc = sr_npy_criteo_fill(c, s, n, a->rows, b);
        if (!rc)
            rc = sr_binfmt_writer_append(w, b);
        p->done = before + (int64_t)((double)bytes * (double)(s + n) / (double)c->samples);
        show_progress(p, sr_binfmt_writer_count(w), 0);
    }
    p->done = rc ? p->done : before + bytes;
    return rc;
}

/* Samples a batch of --npy days: NPY_BATCH, fewer where a sample holds many
 * ids (the batch holds at most NPY_BATCH_IDS); days without samples do not
 * count. */
static int npy_batch_samples(const struct sr_npy_criteo *days, int n, int64_t *ids)
{
    *ids = 1;
    for (int i = 0; i < n; i++)
        if (days[i].samples > 0 && days[i].ids_per_sample > *ids)
            *ids = days[i].ids_per_sample;
    const int64_t fit = NPY_BATCH_IDS / *ids;
    return fit < 1 ? 1 : fit > NPY_BATCH ? NPY_BATCH : (int)fit;
}

/* Every day opened and checked, against the first too. */
static int open_days(const struct convert_args *a, struct sr_npy_criteo *days, int64_t *bytes)
{
    int rc = SR_OK;
    *bytes = 0;
    for (int i = 0; !rc && i < a->n_inputs; i++) {
        rc = sr_npy_criteo_open(&days[i], a->inputs[i], a->num_features);
        if (!rc && days[i].num_dense != days[0].num_dense)
            rc = sr_error_set(SR_ERR_DATA,
                              "%s: %d dense features, %s has %d; HINT: all days "
                              "of one file need the same shape",
                              days[i].dense.path, days[i].num_dense, days[0].dense.path,
                              days[0].num_dense);
        *bytes += rc ? 0 : sr_npy_criteo_bytes(&days[i]);
    }
    return rc;
}

/* --npy: TorchRec's arrays, day after day (npy_criteo.h). Every day is opened
 * and checked first, so a bad one costs no conversion. */
static int convert_npy_run(const struct convert_args *a, int64_t *samples)
{
    struct sr_npy_criteo *days = sr_calloc((size_t)a->n_inputs, sizeof *days);
    struct sr_binfmt_writer *w = NULL;
    struct sr_batch b = {0};
    struct progress p;
    int64_t total, ids;
    int rc = open_days(a, days, &total);
    if (!rc) {
        const int B = npy_batch_samples(days, a->n_inputs, &ids);
        sr_batch_init(&b, B, days[0].num_dense, a->num_features, B * ids, 0, NULL);
        rc = sr_binfmt_writer_open(&w, a->out, days[0].num_dense, a->num_features, a->rows, 0,
                                   a->chunk);
    }
    progress_init(&p, a, total);
    for (int i = 0; !rc && i < a->n_inputs; i++)
        rc = convert_npy_day(a, &days[i], w, &b, &p);
    *samples = w ? sr_binfmt_writer_count(w) : 0;
    if (w)
        show_progress(&p, *samples, 1);
    rc = !rc ? sr_binfmt_writer_close(w) : (sr_binfmt_writer_abort(w), rc);
    for (int i = 0; i < a->n_inputs; i++)
        sr_npy_criteo_close(&days[i]);
    sr_free(days);
    sr_batch_free(&b);
    return rc;
}

int cli_convert(int argc, char **argv)
{
    struct convert_args a = {.num_features = 26, .progress = -1};
    memcpy(a.rows, kaggle_rows, sizeof kaggle_rows);
    a.inputs = sr_calloc((size_t)argc + 1, sizeof *a.inputs);
    int rc = convert_parse(argc, argv, &a);
    if (rc == 1) {
        convert_help();
        sr_free(a.inputs);
        return 0;
    }
    int64_t samples = 0;
    const double t0 = sr_clock_seconds();
    if (!rc) /* before reading any input */
        rc = check_distinct(&a);
    if (!rc)
        rc = sr_output_path_check(a.out, "-o", SR_OUTPUT_ATOMIC);
    if (!rc)
        rc = a.npy ? convert_npy_run(&a, &samples) : convert_run(&a, &samples);
    const double seconds = sr_clock_seconds() - t0;
    sr_free(a.inputs);
    if (rc) {
        cli_error("convert", "%s", sr_error_message());
        return cli_exit_status(rc);
    }
    double s = seconds;
    printf("convert: %lld samples, %d features -> %s in %.2f s\n", (long long)samples,
           a.num_features, a.out, s);
    return 0;
}
