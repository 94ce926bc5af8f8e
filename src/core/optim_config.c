/*
 * Optimizer names and defaults (the formulas live in optim.h; the kernels in
 * device/cpu/cpu_optim.c and device/cpu/cpu_embedding.c).
 */
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/optim.h"

struct sr_optim_config sr_optim_config_default(enum sr_optim_kind kind)
{
    struct sr_optim_config c = {
        .kind = kind, .eps = 0.0f, .beta1 = 0.9f, .beta2 = 0.999f, .initial_accumulator = 0.0f};
    switch (kind) {
    case SR_OPTIM_SGD:
        break;
    case SR_OPTIM_ADAGRAD:
        c.eps = 1e-10f;
        break;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        c.eps = 1e-8f;
        break;
    case SR_OPTIM_ADAM:
        c.eps = 1e-8f;
        break;
    }
    return c;
}

int sr_optim_kind_parse(const char *s, enum sr_optim_kind *out)
{
    if (strcmp(s, "sgd") == 0)
        *out = SR_OPTIM_SGD;
    else if (strcmp(s, "adagrad") == 0)
        *out = SR_OPTIM_ADAGRAD;
    else if (strcmp(s, "rowwise_adagrad") == 0 || strcmp(s, "rowwise-adagrad") == 0)
        *out = SR_OPTIM_ROWWISE_ADAGRAD;
    else if (strcmp(s, "adam") == 0)
        *out = SR_OPTIM_ADAM;
    else
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "unknown optimizer '%s'; choose sgd, adagrad, rowwise_adagrad or adam",
                            s);
    return SR_OK;
}

const char *sr_optim_kind_name(enum sr_optim_kind kind)
{
    static const char *names[] = {"sgd", "adagrad", "rowwise_adagrad", "adam"};
    return (unsigned)kind < 4 ? names[kind] : "unknown";
}

int sr_optim_state_per_element(enum sr_optim_kind kind, int *per_row)
{
    *per_row = 0;
    switch (kind) {
    case SR_OPTIM_SGD:
        return 0;
    case SR_OPTIM_ADAGRAD:
        return 1;
    case SR_OPTIM_ROWWISE_ADAGRAD:
        *per_row = 1;
        return 1;
    case SR_OPTIM_ADAM:
        return 2;
    }
    return 0;
}
