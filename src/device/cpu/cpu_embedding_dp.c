/*
 * CPU ops of data-parallel embedding tables (contract in
 * device/ops_embedding_dp.h): the dense (E, D) gradient and touch counts of a
 * batch, and the fused optimizer applied to the touched rows.
 *
 * Determinism: accumulate gives each table to one thread (static schedule)
 * and walks its features and ids in order; apply splits rows statically and
 * each row reads only itself. The per-row formulas are those of
 * cpu_embedding.c's apply_row (optim.h), written out again here because that
 * one is private to its file; tests compare both paths.
 */
#include <math.h>

#include "shardrec/error.h"
#include "device/ops_embedding_dp.h"

#define PAR_MIN_ROWS 256

static void accumulate_table(const struct sr_emb_layout *layout, const struct sr_emb_batch *batch,
                             const float *dpooled, int t, float *grad, float *counts)
{
    const int B = batch->batch, d = layout->tables[t].dim;
    for (int f = 0; f < layout->num_features; f++) {
        if (layout->features[f].table != t)
            continue;
        const int col = layout->features[f].col;
        for (int b = 0; b < B; b++) {
            const float *src = dpooled + (int64_t)b * layout->out_dim + col;
            int64_t k = (int64_t)f * B + b;
            for (int64_t i = batch->offsets[k]; i < batch->offsets[k + 1]; i++) {
                int64_t r = batch->values[i];
                float w = batch->weights ? batch->weights[i] : 1.0f;
                float *g = grad + r * d;
                for (int c = 0; c < d; c++)
                    g[c] += w * src[c];
                counts[r] += 1.0f;
            }
        }
    }
}

static void cpu_dp_accumulate(struct sr_device *dev, const struct sr_emb_layout *layout,
                              const struct sr_emb_batch *batch, const float *dpooled,
                              float *const *grad, float *const *counts, sr_stream_t s)
{
#pragma omp parallel for schedule(static) if (batch->num_values > PAR_MIN_ROWS)
    for (int t = 0; t < layout->num_tables; t++)
        accumulate_table(layout, batch, dpooled, t, grad[t], counts[t]);
}

struct consts {
    enum sr_optim_kind kind;
    float lr, eps, b1, b2, c1, c2;
};

static void apply_row(const struct consts *k, const struct sr_emb_table *tab, int64_t row,
                      const float *restrict g)
{
    const int d = tab->dim;
    float *restrict w = tab->weight + row * d;
    if (k->kind == SR_OPTIM_SGD) {
        for (int c = 0; c < d; c++)
            w[c] -= k->lr * g[c];
    } else if (k->kind == SR_OPTIM_ADAGRAD) {
        float *restrict s = tab->state + row * d;
        for (int c = 0; c < d; c++) {
            s[c] += g[c] * g[c];
            w[c] -= k->lr * g[c] / (sqrtf(s[c]) + k->eps);
        }
    } else if (k->kind == SR_OPTIM_ROWWISE_ADAGRAD) {
        float sq = 0.0f;
        for (int c = 0; c < d; c++)
            sq += g[c] * g[c];
        float *s = tab->state + row;
        *s += sq / (float)d;
        float rate = k->lr / (sqrtf(*s) + k->eps);
        for (int c = 0; c < d; c++)
            w[c] -= rate * g[c];
    } else {
        float *restrict m = tab->state + row * d;
        float *restrict v = tab->state + (tab->rows + row) * d;
        for (int c = 0; c < d; c++) {
            m[c] = k->b1 * m[c] + (1.0f - k->b1) * g[c];
            v[c] = k->b2 * v[c] + (1.0f - k->b2) * g[c] * g[c];
            w[c] -= k->lr * (m[c] * k->c1) / (sqrtf(v[c] * k->c2) + k->eps);
        }
    }
}

static void cpu_dp_apply(struct sr_device *dev, const struct sr_emb_table *tab, const float *grad,
                         const float *counts, const struct sr_emb_update *u, sr_stream_t s)
{
    struct consts k = {.kind = u->optim.kind,
                       .lr = u->lr,
                       .eps = u->optim.eps,
                       .b1 = u->optim.beta1,
                       .b2 = u->optim.beta2,
                       .c1 = 1.0f,
                       .c2 = 1.0f};
    if (k.kind == SR_OPTIM_ADAM) {
        SR_ASSERT(u->step >= 1);
        k.c1 = (float)(1.0 / (1.0 - pow(u->optim.beta1, (double)u->step)));
        k.c2 = (float)(1.0 / (1.0 - pow(u->optim.beta2, (double)u->step)));
    }
#pragma omp parallel for schedule(static) if (tab->rows > PAR_MIN_ROWS)
    for (int64_t r = 0; r < tab->rows; r++)
        if (counts[r] > 0.0f)
            apply_row(&k, tab, r, grad + r * tab->dim);
}

static const struct sr_emb_dp_ops cpu_dp_ops = {
    .accumulate = cpu_dp_accumulate,
    .apply = cpu_dp_apply,
};

const struct sr_emb_dp_ops *sr_emb_dp_ops_get(const struct sr_device *dev)
{
    return dev && dev->kind == SR_DEVICE_CPU ? &cpu_dp_ops : NULL;
}
