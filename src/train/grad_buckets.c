/*
 * Bucketed gradient all-reduce; see grad_buckets.h for the layout and order.
 * Bucket boundaries are computed once from the layer sizes, so every rank
 * issues the same calls in the same order, and the per-step count is fixed.
 *
 * Every step's data movement is a device op on one stream of the
 * communicator's device (the default stream, where backward runs): copies
 * into and out of the staging buffer, and the casts of compressed buckets.
 * The communicator, bound to that device, reads a send buffer only after
 * the work issued on the stream before the call; the stream waits for a
 * collective before the copies or casts that read its result. The host
 * never waits for the loss: it is a device value going in (the loss op's
 * output) and coming out (the trainer's loss ring), copied device to device
 * in stream order like the tail. (A host-memory communicator still waits
 * for the stream before each collective reads its send buffer: comm.c.)
 *
 * fp32: each bucket but the last is an in-place all-reduce of its range of
 * grads; the last one reduces staging = [ grads[0 .. rest) | tail | loss ].
 *
 * Compressed buckets (fp16/bf16, W > 1) are shardrec/comm_compressed.h's
 * reduce-scatter plus all-gather: bucket k of n_k floats is cut into W
 * blocks of c_k = ceil(n_k / W). The reduce-scatter of a bucket starts when
 * backward finishes it (the last one carries [tail | loss] as exact fp32
 * values, t_k = n_tail + 1 of them, in every message). In finish, in bucket
 * order on every rank: end its reduce-scatter (my block summed in fp32 over
 * sources in rank order, mine unrounded, into `sum`), start its all-gather
 * of the rounded sum; then end the gathers, widening every block, mine
 * included (SR_COMPRESSED_OWN_ROUNDED), into grads, so all replicas hold the
 * same bits. The tail and the loss are summed in fp32 in rank order on
 * every rank: they are never rounded. Each gradient value is rounded once
 * per other contributor and once more as a sum: W roundings at most.
 *
 *   staging (compressed)   [ sum (c_max) | exact (t) | exact_sum (t) ]   device
 *   wire buffers           per bucket: reduce-scatter (W, c_k + 2 t_k),
 *                          all-gather c_k and (W, c_k) 16-bit values
 */
#include "shardrec/alloc.h"
#include "shardrec/comm_compressed.h"
#include "shardrec/device.h"
#include "shardrec/error.h"
#include "shardrec/half.h" /* sr_dtype_is_wire */
#include "shardrec/trace.h"
#include "train/grad_buckets.h"

#define MAX_BUCKETS 256

struct wire_bucket {
    size_t c;                /* block length, floats */
    struct sr_compressed rs; /* the reduce-scatter's wire buffers */
    struct sr_compressed ag; /* the all-gather's */
};

struct sr_grad_buckets {
    sr_comm_t comm;
    struct sr_device *dev; /* the comm's bound device (the CPU device when none) */
    sr_stream_t stream;    /* the dense stream: every bucket's copies, casts and collectives */
    sr_event_t produced;   /* recorded on backward's stream when a bucket is ready */
    sr_event_t done;       /* recorded on the dense stream after the step's last copy */
    enum sr_dtype dtype;   /* on the wire: F32 (plain all-reduce), F16, BF16 */
    int W, me;
    float *grads; /* (n) device */
    size_t n;
    float *tail; /* (n_tail) device */
    size_t n_tail;
    float *staging;           /* device; (last_lo + n_tail + 1) fp32 path, else see above */
    float *exact, *exact_sum; /* (n_tail + 1) views into staging, compressed only */
    size_t cut[MAX_BUCKETS];  /* bucket k reduces grads[cut[k+1] .. cut[k]) */
    int n_buckets;            /* including the last (staged) one */
    int next;                 /* next bucket to issue */
    size_t lo;                /* grads[lo .. n) are final */
    sr_comm_work_t work[MAX_BUCKETS];
    struct wire_bucket *wb; /* (n_buckets) compressed only */
};

/* Walk layers in backward order and cut whenever a bucket reaches the size. */
static void plan_cuts(struct sr_grad_buckets *b, const size_t *sizes, int n_layers,
                      size_t bucket_floats)
{
    size_t hi = b->n, lo = b->n;
    b->n_buckets = 0;
    b->cut[0] = b->n;
    for (int l = 0; l < n_layers; l++) {
        lo -= sizes[l];
        if (hi - lo >= bucket_floats && lo > 0 && b->n_buckets < MAX_BUCKETS - 2) {
            b->cut[++b->n_buckets] = lo;
            hi = lo;
        }
    }
    SR_ASSERT(lo == 0);
    b->cut[++b->n_buckets] = 0; /* the last bucket: [0, cut[n_buckets-1]) + tail */
}

static size_t bucket_len(const struct sr_grad_buckets *b, int k)
{
    return b->cut[k] - b->cut[k + 1];
}

/* Each bucket's wire buffers, zeroed once by sr_compressed_init: block
 * padding is never written. */
static void init_wire(struct sr_grad_buckets *b)
{
    const size_t W = (size_t)b->W, t = b->n_tail + 1;
    size_t c_max = 0;
    b->wb = sr_calloc((size_t)b->n_buckets, sizeof *b->wb);
    for (int k = 0; k < b->n_buckets; k++) {
        struct wire_bucket *w = &b->wb[k];
        const size_t exact = k == b->n_buckets - 1 ? t : 0;
        w->c = (bucket_len(b, k) + W - 1) / W;
        sr_compressed_init(&w->rs, b->comm, b->dev, b->dtype, W * (w->c + 2 * exact));
        sr_compressed_init(&w->ag, b->comm, b->dev, b->dtype, W * w->c);
        c_max = w->c > c_max ? w->c : c_max;
    }
    b->staging = sr_dev_alloc(b->dev, sizeof(float) * (c_max + 2 * t));
    b->exact = b->staging + c_max;
    b->exact_sum = b->exact + t;
}

void sr_grad_buckets_init(struct sr_grad_buckets **out, sr_comm_t comm, sr_stream_t stream,
                          float *grads, size_t n, float *tail, size_t n_tail,
                          const size_t *layer_sizes, int n_layers, size_t bucket_bytes,
                          enum sr_dtype dtype)
{
    struct sr_grad_buckets *b = sr_calloc(1, sizeof *b);
    size_t bucket_floats = bucket_bytes / sizeof(float);
    SR_ASSERT(sr_dtype_is_wire(dtype));
    b->comm = comm;
    b->dev = sr_comm_device(comm) ? sr_comm_device(comm) : sr_device_cpu();
    b->stream = stream;
    b->produced = sr_dev_event_create(b->dev);
    b->done = sr_dev_event_create(b->dev);
    b->W = sr_comm_size(comm);
    b->me = sr_comm_rank(comm);
    b->dtype = b->W > 1 ? dtype : SR_DTYPE_F32; /* one rank: nothing travels */
    b->grads = grads;
    b->n = n;
    b->tail = tail;
    b->n_tail = n_tail;
    plan_cuts(b, layer_sizes, n_layers, bucket_floats ? bucket_floats : 1);
    if (b->dtype == SR_DTYPE_F32) {
        b->staging = sr_dev_alloc(b->dev, sizeof(float) * (b->cut[b->n_buckets - 1] + n_tail + 1));
        sr_comm_register(comm, b->grads); /* a staging communicator's mirrors, now (comm.h) */
        sr_comm_register(comm, b->staging);
    } else {
        init_wire(b);
    }
    *out = b;
}

void sr_grad_buckets_free(struct sr_grad_buckets *b)
{
    if (!b)
        return;
    for (int k = 0; b->wb && k < b->n_buckets; k++) {
        sr_compressed_free(&b->wb[k].rs);
        sr_compressed_free(&b->wb[k].ag);
    }
    sr_dev_free(b->dev, b->staging);
    sr_dev_event_destroy(b->dev, b->produced);
    sr_dev_event_destroy(b->dev, b->done);
    sr_free(b->wb);
    sr_free(b);
}

int sr_grad_buckets_count(const struct sr_grad_buckets *b)
{
    return b->n_buckets;
}

int sr_grad_buckets_calls(const struct sr_grad_buckets *b)
{
    return b->dtype == SR_DTYPE_F32 ? b->n_buckets : 2 * b->n_buckets;
}

enum sr_dtype sr_grad_buckets_dtype(const struct sr_grad_buckets *b)
{
    return b->dtype;
}

void sr_grad_buckets_begin(struct sr_grad_buckets *b)
{
    b->next = 0;
    b->lo = b->n;
}

/* Stage the tail and this rank's loss sum (1 float, device) into `dst`,
 * stream-ordered. */
static void stage_tail(struct sr_grad_buckets *b, float *dst, const float *loss_sum)
{
    if (b->n_tail)
        sr_dev_copy(b->dev, dst, b->tail, sizeof(float) * b->n_tail, b->stream);
    sr_dev_copy(b->dev, dst + b->n_tail, loss_sum, sizeof(float), b->stream);
}

/* Write the reduced tail back, and the global loss sum to `global_loss_sum`
 * (device), stream-ordered: no wait. */
static void unstage_tail(struct sr_grad_buckets *b, const float *src, float *global_loss_sum)
{
    if (b->n_tail)
        sr_dev_copy(b->dev, b->tail, src, sizeof(float) * b->n_tail, b->stream);
    sr_dev_copy(b->dev, global_loss_sum, src + b->n_tail, sizeof(float), b->stream);
}

/* ---- compressed buckets --------------------------------------------------------- */

/* Start bucket k's reduce-scatter; the last one carries the staged exact values. */
static void start_wire(struct sr_grad_buckets *b, int k)
{
    struct wire_bucket *w = &b->wb[k];
    const int last = k == b->n_buckets - 1;
    sr_compressed_reduce_scatter_start(&w->rs, b->comm, b->grads + b->cut[k + 1], bucket_len(b, k),
                                       w->c, last ? b->exact : NULL, last ? b->n_tail + 1 : 0,
                                       b->stream);
}

/* Sum my block of bucket k in fp32 (sources in rank order), start its gather. */
static void reduce_wire(struct sr_grad_buckets *b, int k)
{
    struct wire_bucket *w = &b->wb[k];
    float *sum = b->staging;
    sr_compressed_reduce_scatter_end(&w->rs, b->comm, sum,
                                     k == b->n_buckets - 1 ? b->exact_sum : NULL, b->stream);
    sr_compressed_all_gather_start(&w->ag, b->comm, sum, w->c, b->stream);
}

static void finish_wire(struct sr_grad_buckets *b, const float *loss_sum, float *global_loss_sum)
{
    const int last = b->n_buckets - 1;
    stage_tail(b, b->exact, loss_sum);
    sr_trace_begin(SR_SPAN_ALLREDUCE_BUCKET, last);
    start_wire(b, last);
    sr_trace_end();
    for (int k = 0; k <= last; k++) {
        sr_trace_begin(SR_SPAN_ALLREDUCE_BUCKET, k);
        reduce_wire(b, k); /* my block of bucket `last` first waits its reduce-scatter */
        sr_trace_end();
    }
    for (int k = 0; k <= last; k++)
        sr_compressed_all_gather_end(&b->wb[k].ag, b->comm, b->grads + b->cut[k + 1],
                                     bucket_len(b, k), SR_COMPRESSED_OWN_ROUNDED, b->stream);
    unstage_tail(b, b->exact_sum, global_loss_sum);
}

/* ---- both ------------------------------------------------------------------------ */

/* The dense stream waits for what backward has issued on s so far. */
static void follow(struct sr_grad_buckets *b, sr_stream_t s)
{
    if (s == b->stream)
        return;
    sr_dev_event_record(b->dev, b->produced, s);
    sr_dev_stream_wait_event(b->dev, b->stream, b->produced);
}

void sr_grad_buckets_ready(struct sr_grad_buckets *b, size_t offset, size_t count, sr_stream_t s)
{
    SR_ASSERT(offset + count == b->lo);
    b->lo = offset;
    if (b->next < b->n_buckets - 1 && b->lo <= b->cut[b->next + 1])
        follow(b, s); /* a bucket starts: its gradients are on s */
    /* issue every full bucket but the last, which waits for the tail */
    while (b->next < b->n_buckets - 1 && b->lo <= b->cut[b->next + 1]) {
        size_t hi = b->cut[b->next], lo = b->cut[b->next + 1];
        sr_trace_begin(SR_SPAN_ALLREDUCE_BUCKET, b->next); /* labels the collective */
        if (b->dtype == SR_DTYPE_F32)
            sr_comm_all_reduce(b->comm, b->grads + lo, b->grads + lo, hi - lo, SR_DTYPE_F32,
                               SR_REDUCE_SUM, b->stream, &b->work[b->next]);
        else
            start_wire(b, b->next);
        sr_trace_end();
        b->next++;
    }
}

/* s waits for the dense stream's last copy of the step. */
static void join(struct sr_grad_buckets *b, sr_stream_t s)
{
    if (s == b->stream)
        return;
    sr_dev_event_record(b->dev, b->done, b->stream);
    sr_dev_stream_wait_event(b->dev, s, b->done);
}

static void finish_f32(struct sr_grad_buckets *b, const float *loss_sum, float *global_loss_sum);

void sr_grad_buckets_finish(struct sr_grad_buckets *b, const float *loss_sum,
                            float *global_loss_sum, sr_stream_t s)
{
    SR_ASSERT(b->lo == 0 && b->next == b->n_buckets - 1);
    follow(b, s); /* the last layers, the tail and the loss are on s */
    if (b->dtype != SR_DTYPE_F32)
        finish_wire(b, loss_sum, global_loss_sum);
    else
        finish_f32(b, loss_sum, global_loss_sum);
    join(b, s);
}

static void finish_f32(struct sr_grad_buckets *b, const float *loss_sum, float *global_loss_sum)
{
    const size_t rest = b->cut[b->n_buckets - 1];
    sr_dev_copy(b->dev, b->staging, b->grads, sizeof(float) * rest, b->stream);
    stage_tail(b, b->staging + rest, loss_sum);
    sr_trace_begin(SR_SPAN_ALLREDUCE_BUCKET, b->next);
    sr_comm_all_reduce(b->comm, b->staging, b->staging, rest + b->n_tail + 1, SR_DTYPE_F32,
                       SR_REDUCE_SUM, b->stream, &b->work[b->next]);
    sr_trace_end();
    for (int k = 0; k <= b->next; k++)
        sr_comm_stream_wait(b->comm, b->work[k], b->stream);
    sr_dev_copy(b->dev, b->grads, b->staging, sizeof(float) * rest, b->stream);
    unstage_tail(b, b->staging + rest, global_loss_sum);
}
