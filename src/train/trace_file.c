/*
 * --trace FILE: the merged Chrome trace of every rank, which Perfetto opens.
 *
 * Start-up (sr_trainer_trace_init, collective over the world):
 *   - the recorded window: --trace-steps A:B, by default the DEFAULT_STEPS
 *     steps after WARMUP_STEPS warm-up steps (clipped to --steps);
 *   - the span recorder (core/trace.c): TRACKS tracks of room for every span
 *     of the window (SPANS_PER_STEP per track and step), and the cost of one
 *     span, measured in a loop, for the summary;
 *   - the clocks: each rank's trace clock is compared with rank 0's by
 *     ALIGN_ROUNDS ping-pongs through the comm layer (the world communicator,
 *     whose collectives are outside the training counters):
 *
 *       rank 0                               rank p
 *       a = now; all_to_allv {0 -> p} ---->  (returns)  tp = now
 *       (returns) b = now  <---------------  all_to_allv {p -> 0: tp}
 *
 *     tp was read after a and before b on rank 0's clock, so rank p's offset
 *     is tp - (a + b) / 2 within +-(b - a) / 2; the round with the smallest
 *     b - a is kept. Rank 0 prints the offsets and their uncertainty.
 *
 * End (sr_trainer_trace_write, collective): every rank packs its tracks and
 * spans into a byte buffer (struct wire_*), rank 0 gathers them (an
 * all_gather of sizes, then an all_to_allv towards rank 0), moves every
 * rank's times onto its own clock (t - offset), and writes one JSON file
 * atomically: a process per rank ("rank R"), a thread per track ("compute",
 * "comm sparse", ...), an "X" event per span. Stage spans carry their step;
 * collective spans their collective, communicator, stage, bytes, peers and
 * whether they crossed a node. Times are microseconds from the earliest span,
 * printed exactly from integer nanoseconds so nesting survives.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "train/trainer_internal.h"

#define WARMUP_STEPS    2
#define DEFAULT_STEPS   5
#define TRACKS          16
#define SPANS_PER_STEP  256
#define SPANS_MAX       (1 << 19) /* per track */
#define ALIGN_ROUNDS    32
#define COST_LOOP       200000

struct wire_header {
    int64_t n_tracks, n_spans;
    int64_t dropped;
    int64_t pad;
};

struct wire_track {
    char name[32];
};

struct wire_span {
    int64_t t0, t1, step;
    int64_t bytes, bytes_inter;
    int32_t track, span, label, index, peers, peers_inter, has_args, pad;
    char coll[16];
    char comm[16];
};

/* ---- start-up -------------------------------------------------------------------- */

/* The window; rank 0 warns when the --trace-steps given pass --steps (not
 * known with one pass over --data: then the run may end first). */
static void trace_window(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    t->trace.first = cfg->trace_first;
    t->trace.last = cfg->trace_last;
    if (t->trace.first <= 0) {
        t->trace.first = cfg->steps > WARMUP_STEPS ? WARMUP_STEPS + 1 : 1;
        t->trace.last = t->trace.first + DEFAULT_STEPS - 1;
    } else if (t->log && t->trace.last > cfg->steps) {
        if (t->trace.first > cfg->steps)
            fprintf(t->log,
                    "warning: --trace-steps %" PRId64 ":%" PRId64 " starts after the "
                    "last step (--steps %" PRId64 "): the trace will hold no step\n",
                    cfg->trace_first, cfg->trace_last, cfg->steps);
        else
            fprintf(t->log,
                    "warning: --trace-steps %" PRId64 ":%" PRId64 " ends after the last "
                    "step: the trace records steps %" PRId64 ":%" PRId64 "\n",
                    cfg->trace_first, cfg->trace_last, cfg->trace_first, cfg->steps);
    }
    if (t->trace.last > cfg->steps)
        t->trace.last = cfg->steps;
}

/* One exchange of one int64 from rank `from` to rank `to` over the world
 * (every rank takes part; the others move nothing). */
static void send_one(struct sr_trainer *t, size_t *c, int from, int to, int64_t *send,
                     int64_t *recv)
{
    int W = t->world_size;
    memset(c, 0, 4 * (size_t)W * sizeof *c);
    if (t->rank == from)
        c[to] = 1;
    if (t->rank == to)
        c[2 * W + from] = 1;
    sr_comm_all_to_allv(t->world, send, c, c + W, recv, c + 2 * W, c + 3 * W, SR_DTYPE_I64,
                        NULL, NULL);
}

static void align_clocks(struct sr_trainer *t)
{
    int W = t->world_size;
    size_t *c = sr_calloc(4 * (size_t)W, sizeof *c);
    t->trace.clock_offset_ns = sr_calloc((size_t)W, sizeof(int64_t));
    t->trace.clock_uncertainty_ns = sr_calloc((size_t)W, sizeof(int64_t));
    for (int p = 1; p < W; p++) {
        int64_t best = INT64_MAX;
        for (int r = 0; r < ALIGN_ROUNDS; r++) {
            int64_t ping = 0, tp = 0, got = 0, a = sr_trace_now();
            send_one(t, c, 0, p, &ping, &got);
            tp = sr_trace_now();
            send_one(t, c, p, 0, &tp, &got);
            int64_t b = sr_trace_now();
            if (t->rank == 0 && b - a < best) {
                best = b - a;
                t->trace.clock_offset_ns[p] = got - a - (b - a) / 2;
                t->trace.clock_uncertainty_ns[p] = (b - a + 1) / 2;
            }
        }
    }
    sr_free(c);
    if (!t->log || W == 1)
        return;
    fprintf(t->log, "trace: clock offsets to rank 0 (%d ping-pongs each, best kept):",
            ALIGN_ROUNDS);
    for (int p = 1; p < W; p++)
        fprintf(t->log, " rank %d %+.3f ms +- %.3f ms%s", p, 1e-6 * (double)t->trace.clock_offset_ns[p],
                1e-6 * (double)t->trace.clock_uncertainty_ns[p], p + 1 < W ? ";" : "\n");
}

int sr_trainer_trace_init(struct sr_trainer *t)
{
    sr_trace_thread_name("compute");
    if (!t->cfg->trace_path[0]) {
        if (t->cfg->trace_first > 0 && t->log)
            fprintf(t->log, "warning: --trace-steps without --trace records nothing; HINT: add "
                            "--trace FILE\n");
        return SR_OK;
    }
    t->trace.on = 1;
    trace_window(t);
    int64_t steps = t->trace.last >= t->trace.first ? t->trace.last - t->trace.first + 1 : 0;
    int64_t cap = (steps + 1) * SPANS_PER_STEP;
    sr_trace_init(TRACKS, (size_t)(cap < SPANS_MAX ? cap : SPANS_MAX));
    t->trace.span_cost_ns = sr_trace_span_cost_ns(COST_LOOP);
    sr_trace_set_window(t->trace.first, t->trace.last); /* the pipeline records ahead */
    align_clocks(t);
    if (!t->dev->host_immediate) { /* when the device ran each stage (device_spans.h) */
        /* local mode: nothing runs on the sparse stream */
        sr_stream_t sparse = sr_sharded_ebc_is_local(t->sebc) ? NULL : t->streams.sparse;
        const struct sr_device_span_streams st = {.copy = t->streams.copy,
                                                  .emb_backward = t->pipe.emb_stream,
                                                  .sparse = sparse,
                                                  .dense = t->streams.dense};
        t->trace.dspans = sr_device_spans_create(t->dev, &st);
        sr_trace_set_marker(sr_device_spans_mark, t->trace.dspans);
    }
    return SR_OK;
}

void sr_trainer_trace_free(struct sr_trainer *t)
{
    sr_trace_set_marker(NULL, NULL);
    sr_device_spans_free(t->trace.dspans);
    t->trace.dspans = NULL;
    sr_free(t->trace.clock_offset_ns);
    sr_free(t->trace.clock_uncertainty_ns);
    t->trace.clock_offset_ns = t->trace.clock_uncertainty_ns = NULL;
    if (t->trace.on)
        sr_trace_free();
    t->trace.on = 0;
}

/* ---- the gather ------------------------------------------------------------------- */

static void copy_name(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* This rank's tracks and spans as one buffer; *bytes its size. */
static char *pack(size_t *bytes)
{
    int n_tracks = sr_trace_num_tracks();
    size_t n_spans = 0, n;
    for (int k = 0; k < n_tracks; k++)
        sr_trace_track_spans(k, &n), n_spans += n;
    *bytes = sizeof(struct wire_header) + (size_t)n_tracks * sizeof(struct wire_track) +
             n_spans * sizeof(struct wire_span);
    char *buf = sr_calloc(1, *bytes);
    struct wire_header *h = (struct wire_header *)buf;
    struct wire_track *tr = (struct wire_track *)(h + 1);
    struct wire_span *w = (struct wire_span *)(tr + n_tracks);
    *h = (struct wire_header){n_tracks, (int64_t)n_spans, (int64_t)sr_trace_dropped(), 0};
    for (int k = 0; k < n_tracks; k++) {
        const struct sr_trace_span *sp = sr_trace_track_spans(k, &n);
        copy_name(tr[k].name, sizeof tr[k].name, sr_trace_track_name(k));
        for (size_t i = 0; i < n; i++, w++) {
            *w = (struct wire_span){.t0 = sp[i].t0,
                                    .t1 = sp[i].t1,
                                    .step = sp[i].step,
                                    .bytes = (int64_t)sp[i].args.bytes,
                                    .bytes_inter = (int64_t)sp[i].args.bytes_inter,
                                    .track = k,
                                    .span = sp[i].span,
                                    .label = sp[i].has_args ? sp[i].args.label : -1,
                                    .index = sp[i].index,
                                    .peers = sp[i].args.peers,
                                    .peers_inter = sp[i].args.peers_inter,
                                    .has_args = sp[i].has_args};
            if (sp[i].has_args) {
                copy_name(w->coll, sizeof w->coll, sp[i].args.coll);
                copy_name(w->comm, sizeof w->comm, sp[i].args.comm);
            }
        }
    }
    return buf;
}

/* Every rank's buffer on rank 0 (NULL elsewhere); sizes[p] and at[p] its
 * length and offset there. */
static char *gather(struct sr_trainer *t, const char *mine, size_t bytes, int64_t *sizes,
                    size_t *at)
{
    int W = t->world_size;
    int64_t n = (int64_t)bytes;
    size_t *c = sr_calloc(4 * (size_t)W, sizeof *c), total = 0;
    sr_comm_all_gather(t->world, &n, sizes, 1, SR_DTYPE_I64, NULL, NULL);
    for (int p = 0; p < W; p++)
        at[p] = total, total += (size_t)sizes[p];
    char *all = t->rank == 0 ? sr_malloc(total ? total : 1) : NULL;
    c[0] = bytes; /* send counts: everything to rank 0 */
    for (int p = 0; p < W && t->rank == 0; p++)
        c[2 * W + p] = (size_t)sizes[p], c[3 * W + p] = at[p];
    sr_comm_all_to_allv(t->world, mine, c, c + W, all, c + 2 * W, c + 3 * W, SR_DTYPE_U8, NULL,
                        NULL);
    sr_free(c);
    return all;
}

/* ---- the JSON file ------------------------------------------------------------------ */

/* ns as microseconds with three exact decimals. */
static void put_us(FILE *f, int64_t ns)
{
    const char *sign = ns < 0 ? "-" : "";
    int64_t a = ns < 0 ? -ns : ns;
    fprintf(f, "%s%" PRId64 ".%03" PRId64, sign, a / 1000, a % 1000);
}

static int is_comm_stage(int s)
{
    return s == SR_SPAN_INPUT_DIST_COUNTS || s == SR_SPAN_INPUT_DIST_DATA ||
           s == SR_SPAN_OUTPUT_DIST || s == SR_SPAN_EMB_GRAD_DIST || s == SR_SPAN_ALLREDUCE_BUCKET;
}

static void put_name(FILE *f, int span, int index)
{
    if (index >= 0)
        fprintf(f, "\"%s.%d\"", sr_span_name(span), index);
    else
        fprintf(f, "\"%s\"", sr_span_name(span));
}

static void put_span(FILE *f, int rank, const struct wire_span *w, int64_t shift)
{
    const char *cat = w->span == SR_SPAN_COMM        ? "comm.busy"
                      : w->span == SR_SPAN_COMM_WAIT ? "comm.exposed"
                                                     : "stage";
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"cat\":\"%s\",\"name\":", rank, w->track,
            cat);
    if (w->span == SR_SPAN_COMM && is_comm_stage(w->label))
        put_name(f, w->label, w->index);
    else if (w->span == SR_SPAN_COMM)
        fprintf(f, "\"%s\"", w->coll);
    else
        put_name(f, w->span, w->span == SR_SPAN_ALLREDUCE_BUCKET ? w->index : -1);
    fprintf(f, ",\"ts\":");
    put_us(f, w->t0 - shift);
    fprintf(f, ",\"dur\":");
    put_us(f, w->t1 - w->t0);
    fprintf(f, ",\"args\":{\"step\":%" PRId64, w->step);
    if (w->has_args) {
        fprintf(f, ",\"coll\":\"%s\",\"comm\":\"%s\",\"stage\":", w->coll, w->comm);
        if (w->label >= 0)
            put_name(f, w->label, w->label == SR_SPAN_ALLREDUCE_BUCKET ? w->index : -1);
        else
            fprintf(f, "null");
        if (w->span == SR_SPAN_COMM || w->bytes || w->peers)
            fprintf(f,
                    ",\"bytes\":%" PRId64 ",\"peers\":%d,\"bytes_inter_node\":%" PRId64
                    ",\"peers_inter_node\":%d,\"crossed_node\":%s",
                    w->bytes, w->peers, w->bytes_inter, w->peers_inter,
                    w->peers_inter ? "true" : "false");
    }
    fprintf(f, "}}");
}

static void put_rank_meta(FILE *f, int p, const struct wire_header *h, const struct wire_track *tr)
{
    fprintf(f,
            ",\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"rank "
            "%d\"}},\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\",\"args\":"
            "{\"sort_index\":%d}}",
            p, p, p, p);
    for (int k = 0; k < (int)h->n_tracks; k++)
        fprintf(f,
                ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":"
                "{\"name\":\"%s\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
                "\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
                p, k, tr[k].name, p, k, strcmp(tr[k].name, "compute") ? k + 1 : 0);
}

static void put_other_data(FILE *f, const struct sr_trainer *t, const int64_t *dropped)
{
    fprintf(f,
            "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"shardrec train\","
            "\"ranks\":%d,\"steps\":\"%" PRId64 ":%" PRId64 "\",\"span_cost_ns\":%.1f,"
            "\"test_skew_ns_rank0\":%" PRId64 ",\"clock_offset_ns\":[",
            t->world_size, t->trace.first, t->trace.last, t->trace.span_cost_ns, sr_trace_skew_ns());
    for (int p = 0; p < t->world_size; p++)
        fprintf(f, "%s%" PRId64, p ? "," : "", t->trace.clock_offset_ns[p]);
    fprintf(f, "],\"clock_uncertainty_ns\":[");
    for (int p = 0; p < t->world_size; p++)
        fprintf(f, "%s%" PRId64, p ? "," : "", t->trace.clock_uncertainty_ns[p]);
    fprintf(f, "],\"dropped_spans\":[");
    for (int p = 0; p < t->world_size; p++)
        fprintf(f, "%s%" PRId64, p ? "," : "", dropped[p]);
    fprintf(f, "]}}\n");
}

/* The earliest aligned time of any span: the file's time 0. */
static int64_t origin(const struct sr_trainer *t, const char *all, const size_t *at)
{
    int64_t o = INT64_MAX;
    for (int p = 0; p < t->world_size; p++) {
        const struct wire_header *h = (const struct wire_header *)(all + at[p]);
        const struct wire_span *w =
            (const struct wire_span *)((const struct wire_track *)(h + 1) + h->n_tracks);
        for (int64_t i = 0; i < h->n_spans; i++)
            if (w[i].t0 - t->trace.clock_offset_ns[p] < o)
                o = w[i].t0 - t->trace.clock_offset_ns[p];
    }
    return o == INT64_MAX ? 0 : o;
}

/* Any failure to write the file at the end is the run's (SR_ERR_WRITE: exit
 * status 1), with its reason: the path was checked at start-up. */
static int write_failed(void)
{
    return sr_error_set(SR_ERR_WRITE, "--trace: %s", sr_error_message());
}

static int write_file(struct sr_trainer *t, const char *all, const size_t *at)
{
    struct sr_atomic_file af;
    int64_t *dropped = sr_calloc((size_t)t->world_size, sizeof *dropped);
    int rc = sr_atomic_file_open(&af, t->cfg->trace_path);
    if (rc) {
        sr_free(dropped);
        return write_failed();
    }
    int64_t o = origin(t, all, at);
    fprintf(af.f, "{\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":0,\"name\":\"trace_origin\","
                  "\"args\":{\"note\":\"ts 0 is the earliest span on rank 0's clock\"}}");
    for (int p = 0; p < t->world_size; p++) {
        const struct wire_header *h = (const struct wire_header *)(all + at[p]);
        const struct wire_track *tr = (const struct wire_track *)(h + 1);
        const struct wire_span *w = (const struct wire_span *)(tr + h->n_tracks);
        dropped[p] = h->dropped;
        put_rank_meta(af.f, p, h, tr);
        for (int64_t i = 0; i < h->n_spans; i++)
            put_span(af.f, p, &w[i], o + t->trace.clock_offset_ns[p]);
        if (p == 0)
            t->trace.spans = (uint64_t)h->n_spans;
    }
    put_other_data(af.f, t, dropped);
    sr_free(dropped);
    /* a failed write left the stream's error flag; the flush (in commit) fails
     * again on the rest with its errno, the reason the message gives */
    return sr_atomic_file_commit(&af) ? write_failed() : SR_OK;
}

int sr_trainer_trace_write(struct sr_trainer *t)
{
    int W = t->world_size, rc = SR_OK;
    size_t bytes, *at = sr_calloc((size_t)W, sizeof *at);
    int64_t *sizes = sr_calloc((size_t)W, sizeof *sizes);
    char *mine = pack(&bytes);
    char *all = gather(t, mine, bytes, sizes, at);
    if (t->rank == 0)
        rc = write_file(t, all, at);
    t->trace.written = rc == SR_OK && t->rank == 0;
    sr_free(all);
    sr_free(mine);
    sr_free(sizes);
    sr_free(at);
    return rc;
}
