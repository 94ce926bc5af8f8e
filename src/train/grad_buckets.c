/*
 * Bucketed gradient all-reduce; see grad_buckets.h for the layout and order.
 * Bucket boundaries are computed once from the layer sizes, so every rank
 * issues the same calls in the same order, and the per-step count is fixed.
 *
 * Compressed buckets (fp16/bf16, W > 1): bucket k of n_k floats is cut into W
 * blocks of c_k = ceil(n_k / W) (the last padded with zeros). Per bucket, in
 * 16-bit units (msg_k = c_k + t_k, t_k = 2 * (n_tail + 1) for the last bucket
 * and 0 otherwise):
 *
 *   send   (W, msg_k)  to peer p: [ block p, rounded | my tail+loss as fp32 bits ]
 *   recv   (W, msg_k)  from peer q: [ my block from q | q's tail+loss bits ]
 *   gsend  (c_k)       my block summed in fp32, rounded
 *   grecv  (W, c_k)    every rank's summed block
 *
 * The all-to-all-v of a bucket starts when backward finishes it (my own block
 * and tail are not sent: count 0). In finish, in bucket order on every rank:
 * wait its all-to-all, sum my block in fp32 over sources in rank order (mine
 * unrounded), start its all-gather; then wait the gathers and widen every
 * block, mine included, into grads, so all replicas hold the same bits. The
 * tail (DP tables' gradients and touch counts) and the loss travel as exact
 * fp32 bits and are summed in fp32 in rank order on every rank: they are
 * never rounded. Each gradient value is rounded once per other contributor
 * and once more as a sum: W roundings at most.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/device.h"
#include "train/grad_buckets.h"

#define MAX_BUCKETS 256

struct wire_bucket {
    size_t c, msg;   /* block and message length, 16-bit units */
    uint16_t *send;  /* (W, msg) */
    uint16_t *recv;  /* (W, msg) */
    uint16_t *gsend; /* (c) */
    uint16_t *grecv; /* (W, c) */
    sr_comm_work_t gwork;
};

struct sr_grad_buckets {
    sr_comm_t comm;
    enum sr_dtype dtype; /* on the wire: F32 (plain all-reduce), F16, BF16 */
    int W, me;
    float *grads; /* (n) */
    size_t n;
    float *tail; /* (n_tail) */
    size_t n_tail;
    float *staging;          /* (last_lo + n_tail + 1) fp32 path; (c_max + n_tail + 1) else */
    size_t cut[MAX_BUCKETS]; /* bucket k reduces grads[cut[k+1] .. cut[k]) */
    int n_buckets;           /* including the last (staged) one */
    int next;                /* next bucket to issue */
    size_t lo;               /* grads[lo .. n) are final */
    sr_comm_work_t work[MAX_BUCKETS];
    struct wire_bucket *wb;  /* (n_buckets) compressed only */
    uint16_t *wire;          /* one block behind every wb's buffers */
    size_t *counts, *displs; /* (W) scratch for the all-to-all-v */
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

/* Compressed buffers, all zeroed once: block padding is never written. */
static void init_wire(struct sr_grad_buckets *b)
{
    const size_t W = (size_t)b->W;
    size_t total = 0, c_max = 0;
    b->wb = sr_calloc((size_t)b->n_buckets, sizeof *b->wb);
    for (int k = 0; k < b->n_buckets; k++) {
        struct wire_bucket *w = &b->wb[k];
        w->c = (bucket_len(b, k) + W - 1) / W;
        w->msg = w->c + (k == b->n_buckets - 1 ? 2 * (b->n_tail + 1) : 0);
        total += 2 * W * w->msg + w->c + W * w->c;
        c_max = w->c > c_max ? w->c : c_max;
    }
    b->wire = sr_aligned_alloc(sizeof(uint16_t) * (total + 1));
    memset(b->wire, 0, sizeof(uint16_t) * (total + 1));
    uint16_t *at = b->wire;
    for (int k = 0; k < b->n_buckets; k++) {
        struct wire_bucket *w = &b->wb[k];
        w->send = at, at += W * w->msg;
        w->recv = at, at += W * w->msg;
        w->gsend = at, at += w->c;
        w->grecv = at, at += W * w->c;
    }
    b->counts = sr_calloc(W, sizeof(size_t));
    b->displs = sr_calloc(W, sizeof(size_t));
    b->staging = sr_aligned_alloc(sizeof(float) * (c_max + b->n_tail + 1));
}

void sr_grad_buckets_init(struct sr_grad_buckets **out, sr_comm_t comm, float *grads, size_t n,
                          float *tail, size_t n_tail, const size_t *layer_sizes, int n_layers,
                          size_t bucket_bytes, enum sr_dtype dtype)
{
    struct sr_grad_buckets *b = sr_calloc(1, sizeof *b);
    size_t bucket_floats = bucket_bytes / sizeof(float);
    SR_ASSERT(sr_dtype_is_wire(dtype));
    b->comm = comm;
    b->W = sr_comm_size(comm);
    b->me = sr_comm_rank(comm);
    b->dtype = b->W > 1 ? dtype : SR_DTYPE_F32; /* one rank: nothing travels */
    b->grads = grads;
    b->n = n;
    b->tail = tail;
    b->n_tail = n_tail;
    plan_cuts(b, layer_sizes, n_layers, bucket_floats ? bucket_floats : 1);
    if (b->dtype == SR_DTYPE_F32)
        b->staging = sr_aligned_alloc(sizeof(float) * (b->cut[b->n_buckets - 1] + n_tail + 1));
    else
        init_wire(b);
    *out = b;
}

void sr_grad_buckets_free(struct sr_grad_buckets *b)
{
    if (!b)
        return;
    sr_free(b->staging);
    sr_free(b->wb);
    sr_free(b->wire);
    sr_free(b->counts);
    sr_free(b->displs);
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

/* The packing and tail copies below read gradients on the host: wait for the
 * device stream that produced them (comm's bound device; host work that
 * remains until packing becomes a device op). */
static void wait_device(struct sr_grad_buckets *b)
{
    struct sr_device *dev = sr_comm_device(b->comm);
    if (dev)
        sr_dev_sync(dev, NULL);
}

/* ---- compressed buckets --------------------------------------------------------- */

/* Round bucket k's blocks for the other ranks, append the tail and loss bits
 * (last bucket), and start the all-to-all-v. */
static void start_wire(struct sr_grad_buckets *b, int k, float loss)
{
    struct wire_bucket *w = &b->wb[k];
    const size_t lo = b->cut[k + 1], n_k = bucket_len(b, k);
    wait_device(b);
    for (int p = 0; p < b->W; p++) {
        const size_t off = (size_t)p * w->c,
                     len = off < n_k ? (n_k - off < w->c ? n_k - off : w->c) : 0;
        uint16_t *msg = w->send + (size_t)p * w->msg;
        b->counts[p] = p == b->me ? 0 : w->msg;
        b->displs[p] = (size_t)p * w->msg;
        if (p == b->me)
            continue;
        sr_half_pack(b->dtype, b->grads + lo + off, msg, len);
        if (w->msg > w->c) {
            if (b->n_tail)
                memcpy(msg + w->c, b->tail, sizeof(float) * b->n_tail);
            memcpy(msg + w->c + 2 * b->n_tail, &loss, sizeof loss);
        }
    }
    sr_comm_all_to_allv(b->comm, w->send, b->counts, b->displs, w->recv, b->counts, b->displs,
                        b->dtype, NULL, &b->work[k]);
}

/* Sum my block of bucket k in fp32 (sources in rank order), start its gather. */
static void reduce_wire(struct sr_grad_buckets *b, int k)
{
    struct wire_bucket *w = &b->wb[k];
    const size_t n_k = bucket_len(b, k), off = (size_t)b->me * w->c;
    const size_t mine = off < n_k ? (n_k - off < w->c ? n_k - off : w->c) : 0;
    float *sum = b->staging;
    sr_comm_wait(b->comm, b->work[k]);
    memset(sum, 0, sizeof(float) * w->c);
    for (int q = 0; q < b->W; q++) {
        if (q == b->me)
            sr_half_unpack_add(SR_DTYPE_F32, b->grads + b->cut[k + 1] + off, sum, mine);
        else
            sr_half_unpack_add(b->dtype, w->recv + (size_t)q * w->msg, sum, w->c);
    }
    sr_half_pack(b->dtype, sum, w->gsend, w->c);
    sr_comm_all_gather(b->comm, w->gsend, w->grecv, w->c, b->dtype, NULL, &w->gwork);
}

/* The tail and the loss: exact fp32 bits from every rank, summed in rank order. */
static float reduce_tail(struct sr_grad_buckets *b, float loss)
{
    const struct wire_bucket *w = &b->wb[b->n_buckets - 1];
    float *sum = b->staging + w->c, v;
    memset(sum, 0, sizeof(float) * (b->n_tail + 1));
    for (int q = 0; q < b->W; q++) {
        const uint16_t *bits = w->recv + (size_t)q * w->msg + w->c;
        for (size_t i = 0; i < b->n_tail; i++) {
            if (q == b->me)
                v = b->tail[i];
            else
                memcpy(&v, bits + 2 * i, sizeof v);
            sum[i] += v;
        }
        if (q == b->me)
            v = loss;
        else
            memcpy(&v, bits + 2 * b->n_tail, sizeof v);
        sum[b->n_tail] += v;
    }
    if (b->n_tail)
        memcpy(b->tail, sum, sizeof(float) * b->n_tail);
    return sum[b->n_tail];
}

static double finish_wire(struct sr_grad_buckets *b, double loss_sum)
{
    const int last = b->n_buckets - 1;
    start_wire(b, last, (float)loss_sum);
    for (int k = 0; k <= last; k++)
        reduce_wire(b, k); /* my block of bucket `last` first waits its all-to-all */
    const float loss = reduce_tail(b, (float)loss_sum);
    for (int k = 0; k <= last; k++) {
        sr_comm_wait(b->comm, b->wb[k].gwork);
        sr_half_unpack(b->dtype, b->wb[k].grecv, b->grads + b->cut[k + 1], bucket_len(b, k));
    }
    return loss;
}

/* ---- both ------------------------------------------------------------------------ */

void sr_grad_buckets_ready(struct sr_grad_buckets *b, size_t offset, size_t count)
{
    SR_ASSERT(offset + count == b->lo);
    b->lo = offset;
    /* issue every full bucket but the last, which waits for the tail */
    while (b->next < b->n_buckets - 1 && b->lo <= b->cut[b->next + 1]) {
        size_t hi = b->cut[b->next], lo = b->cut[b->next + 1];
        if (b->dtype == SR_DTYPE_F32)
            sr_comm_all_reduce(b->comm, b->grads + lo, b->grads + lo, hi - lo, SR_DTYPE_F32,
                               SR_REDUCE_SUM, NULL, &b->work[b->next]);
        else
            start_wire(b, b->next, 0.0f);
        b->next++;
    }
}

double sr_grad_buckets_finish(struct sr_grad_buckets *b, double loss_sum)
{
    size_t rest = b->cut[b->n_buckets - 1];
    SR_ASSERT(b->lo == 0 && b->next == b->n_buckets - 1);
    wait_device(b);
    if (b->dtype != SR_DTYPE_F32)
        return finish_wire(b, loss_sum);
    memcpy(b->staging, b->grads, sizeof(float) * rest);
    if (b->n_tail)
        memcpy(b->staging + rest, b->tail, sizeof(float) * b->n_tail);
    b->staging[rest + b->n_tail] = (float)loss_sum;
    sr_comm_all_reduce(b->comm, b->staging, b->staging, rest + b->n_tail + 1, SR_DTYPE_F32,
                       SR_REDUCE_SUM, NULL, &b->work[b->next]);
    for (int k = 0; k <= b->next; k++)
        sr_comm_wait(b->comm, b->work[k]);
    memcpy(b->grads, b->staging, sizeof(float) * rest);
    if (b->n_tail)
        memcpy(b->tail, b->staging + rest, sizeof(float) * b->n_tail);
    return b->staging[rest + b->n_tail];
}
