/*
 * The DLRM dot interaction, as DESIGN.md's numerical contract orders it.
 * For one sample, X stacks the bottom MLP output and the F pooled embeddings
 * (F+1 rows of D); the output keeps z and appends the strict lower triangle
 * of the Gram matrix X·Xᵀ, row by row (the DLRM reference's li/lj order):
 *
 *          j=0   1    2  ...
 *   i=1  [ x10 ]
 *   i=2  [ x20  x21 ]
 *   i=3  [ x30  x31  x32 ]          out = [ z | x10 x20 x21 x30 x31 x32 ... ]
 *
 * The products run on the device (dev->dense->interaction_*); this file owns
 * the shapes.
 */
#include "shardrec/dlrm.h"
#include "device/ops_dense.h"
#include "model/interaction.h"

int sr_interaction_width(int F, int D)
{
    return D + F * (F + 1) / 2;
}

int sr_dlrm_interaction_dim(const struct sr_dlrm_config *cfg)
{
    if (cfg->interaction == SR_INTERACTION_DCN) /* x_L of the cross network (dcn.c) */
        return (cfg->num_sparse + 1) * cfg->embedding_dim;
    return sr_interaction_width(cfg->num_sparse, cfg->embedding_dim);
}

void sr_interaction_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                            const float *pooled, int B, int F, int D, float *out)
{
    sr_op_dense_interaction_forward(dev, s, z, pooled, B, F, D, out);
}

void sr_interaction_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                             const float *pooled, const float *dout, int B, int F, int D, float *dz,
                             float *dpooled)
{
    sr_op_dense_interaction_backward(dev, s, z, pooled, dout, B, F, D, dz, dpooled);
}
