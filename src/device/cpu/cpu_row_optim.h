/*
 * The fused sparse optimizers on one embedding row, shared by the pooled
 * backward (cpu_embedding.c) and the DP tables' update (cpu_embedding_dp.c),
 * so every sharding type applies bit-for-bit the same update to a row given
 * the same gradient. Formulas: include/shardrec/optim.h.
 */
#ifndef SHARDREC_CPU_ROW_OPTIM_H
#define SHARDREC_CPU_ROW_OPTIM_H

#include <math.h>
#include <stdint.h>

#include "shardrec/error.h"
#include "device/emb_storage.h"
#include "device/ops_embedding.h"

struct step_consts {
    enum sr_optim_kind kind;
    float lr, eps, b1, b2;
    float c1, c2; /* adam: 1 / (1 - b1^t), 1 / (1 - b2^t) */
    int64_t step;
    int stochastic;  /* 16-bit tables: the layout's rounding (emb_storage.h) */
    uint64_t seed;
};

/* Σ g², summed in SQ_LANES interleaved partial sums and then in lane order:
 * a fixed order (bit-exact reruns) that the compiler can vectorise. */
#define SQ_LANES 16
static inline float sum_squares(const float *restrict g, int d)
{
    float lane[SQ_LANES] = {0};
    int c = 0;
    for (; c + SQ_LANES <= d; c += SQ_LANES)
        for (int l = 0; l < SQ_LANES; l++)
            lane[l] += g[c + l] * g[c + l];
    for (; c < d; c++)
        lane[c % SQ_LANES] += g[c] * g[c];
    float sum = 0.0f;
    for (int l = 0; l < SQ_LANES; l++)
        sum += lane[l];
    return sum;
}

/* The update of one row of weights w (fp32) and its state. */
static inline void apply_row_f32(const struct step_consts *k, const struct sr_emb_table *tab,
                                 int64_t row, const float *restrict g, float *restrict w)
{
    const int d = tab->dim;
    switch (k->kind) {
    case SR_OPTIM_SGD:
        for (int c = 0; c < d; c++)
            w[c] -= k->lr * g[c];
        break;
    case SR_OPTIM_ADAGRAD: {
        float *restrict s = tab->state + row * d;
        for (int c = 0; c < d; c++) {
            s[c] += g[c] * g[c];
            w[c] -= k->lr * g[c] / (sqrtf(s[c]) + k->eps);
        }
        break;
    }
    case SR_OPTIM_ROWWISE_ADAGRAD: {
        float *s = tab->state + row;
        *s += sum_squares(g, d) / (float)d;
        float rate = k->lr / (sqrtf(*s) + k->eps);
        for (int c = 0; c < d; c++)
            w[c] -= rate * g[c];
        break;
    }
    case SR_OPTIM_ADAM: {
        float *restrict m = tab->state + row * d;
        float *restrict v = tab->state + (tab->rows + row) * d;
        for (int c = 0; c < d; c++) {
            m[c] = k->b1 * m[c] + (1.0f - k->b1) * g[c];
            v[c] = k->b2 * v[c] + (1.0f - k->b2) * g[c] * g[c];
            w[c] -= k->lr * (m[c] * k->c1) / (sqrtf(v[c] * k->c2) + k->eps);
        }
        break;
    }
    }
}

/* The update of one row in place: an fp32 table's directly; a 16-bit
 * table's widened into tmp (dim floats), updated, and narrowed back. */
static inline void apply_row(const struct step_consts *k, const struct sr_emb_table *tab,
                             int64_t row, const float *restrict g, float *restrict tmp)
{
    const int d = tab->dim;
    if (tab->dtype == SR_DTYPE_F32) {
        apply_row_f32(k, tab, row, g, (float *)tab->weight + row * d);
        return;
    }
    SR_ASSERT(tmp);
    const int64_t base = row * d;
    for (int c = 0; c < d; c++)
        tmp[c] = sr_emb_get(tab->weight, tab->dtype, base + c);
    apply_row_f32(k, tab, row, g, tmp);
    const int64_t elem0 = sr_emb_global_elem(tab, row, 0);
    for (int c = 0; c < d; c++)
        sr_emb_put(tab->weight, tab->dtype, base + c, tmp[c], k->stochastic,
                   k->stochastic ? sr_emb_round_bits(k->seed, k->step, tab->stream, elem0 + c)
                                 : 0);
}

static inline struct step_consts step_consts_of(const struct sr_emb_update *u)
{
    const int64_t step = u->step_dev ? *u->step_dev : u->step; /* read as the op runs */
    struct step_consts k = {.kind = u->optim.kind,
                            .lr = u->lr_dev ? *u->lr_dev : u->lr,
                            .eps = u->optim.eps,
                            .b1 = u->optim.beta1,
                            .b2 = u->optim.beta2,
                            .c1 = 1.0f,
                            .c2 = 1.0f,
                            .step = step};
    if (k.kind == SR_OPTIM_ADAM) {
        SR_ASSERT(step >= 1);
        k.c1 = (float)(1.0 / (1.0 - pow(u->optim.beta1, (double)step)));
        k.c2 = (float)(1.0 / (1.0 - pow(u->optim.beta2, (double)step)));
    }
    return k;
}

#endif
