/*
 * Dense optimizer (contract in dense_optim.h): owns the optimizer state of
 * the dense parameter block and dispatches each step to the device's
 * optimizer ops (device/ops_optim.h).
 *
 * State layout, one block on the device:
 *   sgd      (none)
 *   adagrad  [sum (n)]            starts at initial_accumulator
 *   adam     [m (n) | v (n)]      starts at 0
 */
#include "shardrec/alloc.h"
#include "shardrec/dense_optim.h"
#include "shardrec/error.h"
#include "device/ops_optim.h"

struct sr_dense_optim {
    struct sr_device *dev;
    struct sr_optim_config cfg;
    size_t n;
    float *state; /* (state_count) device */
    size_t state_count;
};

int sr_dense_optim_check(enum sr_optim_kind kind)
{
    switch (kind) {
    case SR_OPTIM_SGD:
    case SR_OPTIM_ADAGRAD:
    case SR_OPTIM_ADAM:
        return SR_OK;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "rowwise_adagrad is for embeddings only; use adagrad "
                            "(--optimizer sets the dense optimizer, --emb-optimizer the tables')");
    }
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "unknown dense optimizer %d; choose sgd, adagrad or adam", (int)kind);
}

/* Fill the Adagrad accumulator with its initial value through a host copy
 * (init time only; the step itself never touches memory directly). */
static void fill_state(struct sr_dense_optim *o, float value)
{
    if (value == 0.0f)
        return; /* sr_dev_alloc_zero already did */
    float *host = sr_malloc(o->state_count * sizeof(float));
    for (size_t i = 0; i < o->state_count; i++)
        host[i] = value;
    sr_dev_copy(o->dev, o->state, host, o->state_count * sizeof(float), NULL);
    sr_dev_sync(o->dev, NULL);
    sr_free(host);
}

void sr_dense_optim_init(struct sr_dense_optim **out, struct sr_device *dev,
                         const struct sr_optim_config *cfg, size_t n)
{
    if (sr_dense_optim_check(cfg->kind) != SR_OK)
        SR_ABORT("%s", sr_error_message());
    struct sr_dense_optim *o = sr_calloc(1, sizeof(*o));
    o->dev = dev;
    o->cfg = *cfg;
    o->n = n;
    int per_row = 0;
    o->state_count = (size_t)sr_optim_state_per_element(cfg->kind, &per_row) * n;
    if (o->state_count) {
        o->state = sr_dev_alloc_zero_named(dev, o->state_count * sizeof(float),
                                           "the dense optimizer's state");
        if (cfg->kind == SR_OPTIM_ADAGRAD)
            fill_state(o, cfg->initial_accumulator);
    }
    *out = o;
}

void sr_dense_optim_step(struct sr_dense_optim *o, sr_stream_t s, float *params,
                         const float *grads, const struct sr_step_scalars *scalars)
{
    const float *lr = &scalars->dense_lr;
    switch (o->cfg.kind) {
    case SR_OPTIM_SGD:
        sr_op_optim_sgd_step(o->dev, s, params, grads, o->n, lr);
        break;
    case SR_OPTIM_ADAGRAD:
        sr_op_optim_adagrad_step(o->dev, s, params, o->state, grads, o->n, lr, o->cfg.eps);
        break;
    case SR_OPTIM_ADAM:
        sr_op_optim_adam_step(o->dev, s, params, o->state, o->state + o->n, grads, o->n, lr,
                              o->cfg.beta1, o->cfg.beta2, o->cfg.eps, &scalars->step);
        break;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        SR_ABORT("rowwise_adagrad reached the dense optimizer");
    }
}

float *sr_dense_optim_state(struct sr_dense_optim *o, size_t *count)
{
    *count = o->state_count;
    return o->state;
}

void sr_dense_optim_free(struct sr_dense_optim *o)
{
    if (!o)
        return;
    sr_dev_free(o->dev, o->state);
    sr_free(o);
}
