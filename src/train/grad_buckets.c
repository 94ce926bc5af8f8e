/*
 * Bucketed gradient all-reduce; see grad_buckets.h for the layout and order.
 * Bucket boundaries are computed once from the layer sizes, so every rank
 * issues the same calls in the same order, and the per-step count is fixed.
 */
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "train/grad_buckets.h"

#define MAX_BUCKETS 256

struct sr_grad_buckets {
    sr_comm_t comm;
    float *grads; /* (n) */
    size_t n;
    float *tail; /* (n_tail) */
    size_t n_tail;
    float *staging;            /* (last_lo + n_tail + 1) */
    size_t cut[MAX_BUCKETS];   /* bucket k reduces grads[cut[k+1] .. cut[k]) */
    int n_buckets;             /* including the last (staged) one */
    int next;                  /* next bucket to issue */
    size_t lo;                 /* grads[lo .. n) are final */
    sr_comm_work_t work[MAX_BUCKETS];
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

void sr_grad_buckets_init(struct sr_grad_buckets **out, sr_comm_t comm, float *grads, size_t n,
                          float *tail, size_t n_tail, const size_t *layer_sizes, int n_layers,
                          size_t bucket_bytes)
{
    struct sr_grad_buckets *b = sr_calloc(1, sizeof *b);
    size_t bucket_floats = bucket_bytes / sizeof(float);
    b->comm = comm;
    b->grads = grads;
    b->n = n;
    b->tail = tail;
    b->n_tail = n_tail;
    plan_cuts(b, layer_sizes, n_layers, bucket_floats ? bucket_floats : 1);
    b->staging = sr_aligned_alloc(sizeof(float) * (b->cut[b->n_buckets - 1] + n_tail + 1));
    *out = b;
}

void sr_grad_buckets_free(struct sr_grad_buckets *b)
{
    if (!b)
        return;
    sr_free(b->staging);
    sr_free(b);
}

int sr_grad_buckets_count(const struct sr_grad_buckets *b)
{
    return b->n_buckets;
}

void sr_grad_buckets_begin(struct sr_grad_buckets *b)
{
    b->next = 0;
    b->lo = b->n;
}

void sr_grad_buckets_ready(struct sr_grad_buckets *b, size_t offset, size_t count)
{
    SR_ASSERT(offset + count == b->lo);
    b->lo = offset;
    /* issue every full bucket but the last, which waits for the tail */
    while (b->next < b->n_buckets - 1 && b->lo <= b->cut[b->next + 1]) {
        size_t hi = b->cut[b->next], lo = b->cut[b->next + 1];
        sr_comm_all_reduce(b->comm, b->grads + lo, b->grads + lo, hi - lo, SR_DTYPE_F32,
                           SR_REDUCE_SUM, NULL, &b->work[b->next]);
        b->next++;
    }
}

double sr_grad_buckets_finish(struct sr_grad_buckets *b, double loss_sum)
{
    size_t rest = b->cut[b->n_buckets - 1];
    SR_ASSERT(b->lo == 0 && b->next == b->n_buckets - 1);
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
