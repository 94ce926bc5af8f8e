/*
 * Optimizer settings shared by the dense optimizers (model/) and the fused
 * sparse optimizers (embed/). Formulas, per element w with gradient g, step t
 * counted from 1 (DESIGN.md, numerical contract):
 *
 *   sgd              w -= lr * g
 *   adagrad          s += g^2;  w -= lr * g / (sqrt(s) + eps)        eps 1e-10, s0 0
 *   rowwise_adagrad  s_r += mean over the row of g^2;
 *                    w -= lr * g / (sqrt(s_r) + eps)                 eps 1e-8 (embeddings only)
 *   adam             m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *                    w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *                    b1 0.9, b2 0.999, eps 1e-8; for embeddings only touched rows
 *                    are updated (as PyTorch's SparseAdam), t is the global step.
 */
#ifndef SHARDREC_OPTIM_H
#define SHARDREC_OPTIM_H

enum sr_optim_kind {
    SR_OPTIM_SGD = 0,
    SR_OPTIM_ADAGRAD,
    SR_OPTIM_ROWWISE_ADAGRAD,
    SR_OPTIM_ADAM,
};

struct sr_optim_config {
    enum sr_optim_kind kind;
    float eps;                 /* set by sr_optim_config_default for the kind */
    float beta1, beta2;        /* adam */
    float initial_accumulator; /* adagrad / rowwise adagrad */
};

/* The PyTorch/FBGEMM defaults for `kind`. */
struct sr_optim_config sr_optim_config_default(enum sr_optim_kind kind);
/* Parse "sgd", "adagrad", "rowwise_adagrad" (or "rowwise-adagrad"), "adam";
 * returns SR_ERR_INVALID_ARG with a message listing the choices otherwise. */
int sr_optim_kind_parse(const char *s, enum sr_optim_kind *out);
const char *sr_optim_kind_name(enum sr_optim_kind kind);
/* Number of fp32 state values per element (per_row = 1 counts per row). */
int sr_optim_state_per_element(enum sr_optim_kind kind, int *per_row);

#endif
