/*
 * Reading throughput on one core: Criteo TSV lines/s and binary samples/s.
 *
 * Writes N synthetic Criteo-Kaggle samples (workload K's 26 tables, one id per
 * feature) as TSV with the generator, converts them to the binary format, then
 * times sr_reader_next over each (batch 2048, one rank), after one untimed pass
 * so the page cache is warm: this measures parsing and copying, not the disk.
 * Targets (issue 3): TSV >= 1M lines/s/core, binary >= 5M samples/s/core.
 * Built and run by bench/read_throughput.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shardrec/binfmt.h"
#include "shardrec/error.h"
#include "shardrec/reader.h"
#include "shardrec/synthetic.h"

#define F 26
static const int64_t rows[F] = {1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
                                93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
                                2173,  4,    7046547,  18,      15,  286181, 105,     142572};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void die(int rc)
{
    fprintf(stderr, "read_bench: %s: %s\n", sr_status_name(rc), sr_error_message());
    exit(1);
}

/* Samples per second over `passes` timed passes (after one warm-up pass). */
static double time_reader(const char *path, int passes, int64_t *count)
{
    struct sr_reader_options o = {.world = 1, .batch_size = 2048, .keep_partial = 1};
    struct sr_reader *r;
    struct sr_batch b;
    int rc = sr_reader_open(&r, &path, 1, F, rows, &o);
    if (rc)
        die(rc);
    sr_reader_batch_init(r, &b, NULL);
    double t0 = 0;
    *count = 0;
    for (int p = -1; p < passes; p++) {
        if (p == 0)
            t0 = now();
        while ((rc = sr_reader_next(r, &b)) == 1)
            *count += p >= 0 ? b.batch_size : 0;
        if (rc < 0 || (rc = sr_reader_rewind(r)) != 0)
            die(rc);
    }
    double dt = now() - t0;
    sr_batch_free(&b);
    sr_reader_free(r);
    return *count / dt;
}

static void make_files(const char *tsv, const char *bin, int64_t n)
{
    struct sr_synth_config c = {.seed = 1,
                                .num_dense = 13,
                                .num_features = F,
                                .rows = rows,
                                .ids_min = 1,
                                .ids_max = 1,
                                .id_dist = SR_ID_DIST_UNIFORM};
    struct sr_synth *s;
    int rc = sr_synth_init(&s, &c);
    FILE *f = fopen(tsv, "wb");
    if (rc || !f || (rc = sr_synth_write_tsv(s, f, 0, n)) != 0)
        die(rc ? rc : SR_ERR_IO);
    fclose(f);
    sr_synth_free(s);
    struct sr_reader_options o = {.world = 1, .batch_size = 4096, .keep_partial = 1};
    struct sr_reader *r;
    struct sr_binfmt_writer *w;
    struct sr_batch b;
    if ((rc = sr_reader_open(&r, &tsv, 1, F, rows, &o)) ||
        (rc = sr_binfmt_writer_open(&w, bin, 13, F, rows, 0, 0)))
        die(rc);
    sr_reader_batch_init(r, &b, NULL);
    while ((rc = sr_reader_next(r, &b)) == 1)
        if ((rc = sr_binfmt_writer_append(w, &b)) != 0)
            die(rc);
    if (rc < 0 || (rc = sr_binfmt_writer_close(w)) != 0)
        die(rc);
    sr_batch_free(&b);
    sr_reader_free(r);
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char tsv[512], bin[512];
    snprintf(tsv, sizeof tsv, "%s/read_bench.tsv", dir);
    snprintf(bin, sizeof bin, "%s/read_bench.bin", dir);
    make_files(tsv, bin, n);
    int64_t cnt;
    double tsv_rate = time_reader(tsv, 2, &cnt);
    printf("TSV    %10.0f lines/s   (%lld lines, batch 2048, 1 core; target >= 1000000)\n",
           tsv_rate, (long long)cnt);
    double bin_rate = time_reader(bin, 10, &cnt);
    printf("binary %10.0f samples/s (%lld samples, batch 2048, 1 core; target >= 5000000)\n",
           bin_rate, (long long)cnt);
    remove(tsv);
    remove(bin);
    return 0;
}
