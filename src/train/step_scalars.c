/*
 * The per-step scalars' way to the device (layout and rules in
 * step_scalars.h and shardrec/optim.h): a pinned slot written by the host, one stream-ordered
 * copy into the device block, an event after it so that the slot is not
 * rewritten before the copy has read it.
 */
#include <string.h>

#include "train/step_scalars.h"

void sr_step_scalars_buf_init(struct sr_step_scalars_buf *b, struct sr_device *dev)
{
    memset(b, 0, sizeof *b);
    b->dev = dev;
    b->host = sr_dev_alloc_host(dev, SR_STEP_SCALARS_SLOTS * sizeof *b->host);
    memset(b->host, 0, SR_STEP_SCALARS_SLOTS * sizeof *b->host);
    b->block = sr_dev_alloc_zero(dev, sizeof *b->block);
    for (int i = 0; i < SR_STEP_SCALARS_SLOTS; i++)
        b->copied[i] = sr_dev_event_create(dev);
}

void sr_step_scalars_buf_free(struct sr_step_scalars_buf *b)
{
    if (!b->dev)
        return;
    for (int i = 0; i < SR_STEP_SCALARS_SLOTS; i++)
        sr_dev_event_destroy(b->dev, b->copied[i]); /* waits for its copy */
    sr_dev_free(b->dev, b->block);
    sr_dev_free_host(b->dev, b->host);
    memset(b, 0, sizeof *b);
}

const struct sr_step_scalars *sr_step_scalars_buf_put(struct sr_step_scalars_buf *b,
                                                      const struct sr_step_scalars *v,
                                                      sr_stream_t s)
{
    const int k = b->next;
    b->next = (k + 1) % SR_STEP_SCALARS_SLOTS;
    if (!sr_dev_event_query(b->dev, b->copied[k])) /* the slot's last copy must have read it */
        sr_dev_event_sync(b->dev, b->copied[k]);
    b->host[k] = *v;
    sr_dev_copy(b->dev, b->block, &b->host[k], sizeof *b->block, s);
    sr_dev_event_record(b->dev, b->copied[k], s);
    return b->block;
}
