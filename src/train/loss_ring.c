/*
 * The loss ring (see loss_ring.h): per-step global loss sums in device
 * memory, read back in one copy and one sync when the host needs them.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "shardrec/error.h"
#include "train/loss_ring.h"

void sr_loss_ring_init(struct sr_loss_ring *r, struct sr_device *dev, int cap)
{
    SR_ASSERT(cap >= 1);
    memset(r, 0, sizeof *r);
    r->dev = dev;
    r->cap = cap;
    r->sums = sr_dev_alloc_zero(dev, sizeof(float) * (size_t)cap);
    r->host = sr_dev_alloc_host(dev, sizeof(float) * (size_t)cap);
}

void sr_loss_ring_free(struct sr_loss_ring *r)
{
    if (!r->dev)
        return;
    sr_dev_sync(r->dev, NULL); /* a queued copy may still write a slot */
    sr_dev_free(r->dev, r->sums);
    sr_dev_free_host(r->dev, r->host);
    memset(r, 0, sizeof *r);
}

float *sr_loss_ring_push(struct sr_loss_ring *r, int64_t step)
{
    SR_ASSERT(r->n < r->cap);
    if (r->n == 0)
        r->first = step;
    SR_ASSERT(step == r->first + r->n);
    return r->sums + r->n++;
}

int sr_loss_ring_full(const struct sr_loss_ring *r)
{
    return r->n == r->cap;
}

int sr_loss_ring_read(struct sr_loss_ring *r, double divisor, double *loss_sum, double *last_loss)
{
    const int n = r->n;
    if (n == 0)
        return SR_OK;
    r->n = 0;
    sr_dev_copy(r->dev, r->host, r->sums, sizeof(float) * (size_t)n, NULL);
    sr_dev_sync(r->dev, NULL);
    for (int i = 0; i < n; i++) {
        double loss = r->host[i] / divisor;
        if (!isfinite(loss))
            return sr_error_set(SR_ERR_NUMERIC,
                                "training loss is %f at step %" PRId64
                                "; HINT: lower --lr or --emb-lr, or check the input data",
                                loss, r->first + i);
        *loss_sum += loss;
        *last_loss = loss;
    }
    return SR_OK;
}
