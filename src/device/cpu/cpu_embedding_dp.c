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
#include "device/cpu/cpu_device.h"
#include "device/cpu/cpu_row_optim.h"

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

static void cpu_dp_apply(struct sr_device *dev, const struct sr_emb_table *tab, const float *grad,
                         const float *counts, const struct sr_emb_update *u, sr_stream_t s)
{
    const struct step_consts k = step_consts_of(u);
#pragma omp parallel for schedule(static) if (tab->rows > PAR_MIN_ROWS)
    for (int64_t r = 0; r < tab->rows; r++)
        if (counts[r] > 0.0f)
            apply_row(&k, tab, r, grad + r * tab->dim, NULL); /* dp tables are fp32 */
}

const struct sr_emb_dp_ops sr_cpu_emb_dp_ops = {
    .accumulate = cpu_dp_accumulate,
    .apply = cpu_dp_apply,
};
