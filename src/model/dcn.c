/*
 * The DCNv2 cross network of DESIGN.md's numerical contract (TorchRec's
 * LowRankCrossNet): on x_0 = [z | e_1 .. e_F] (B, n), n = (F+1)·D, L layers
 *
 *   h_l = x_l V_lᵀ            (B, R)   GEMM, V_l [R, n]
 *   u_l = h_l U_lᵀ            (B, n)   GEMM, U_l [n, R]
 *   x_{l+1} = x_0 ⊙ (u_l + b_l) + x_l  dense.dcn_cross_forward
 *
 * x_0 is never materialised: the elementwise ops read it as z and pooled,
 * and layer 0's GEMMs take it as two column blocks, z against V_0's first D
 * columns and pooled against the rest (row strides do the split).
 *
 * Backward of layer l, given g = the gradient of x_{l+1} (one buffer, from
 * x_L's gradient down to x_1's, updated in place):
 *
 *   du_l = g ⊙ x_0;  db_l = column sums of du_l;
 *   dx_0 += g ⊙ (u_l + b_l)   (+ g at layer 0, whose x_l is x_0)   dense.dcn_cross_backward
 *   dh_l = du_l U_l                                                GEMM
 *   g    = g + dh_l V_l       (layer l > 0: now x_l's gradient)    GEMM, beta 1
 *   dx_0 += dh_l V_l          (layer 0, into dz and dpooled)       GEMMs, beta 1
 *
 * x_0 feeds every layer, so its gradient adds up across them: the last layer
 * overwrites dz and dpooled, the others add. The weight GEMMs,
 *
 *   dU_l = du_lᵀ h_l (n, R),   dV_l = dh_lᵀ x_l (R, n),
 *
 * come later (sr_dcn_backward_weights), from the du and dh kept per layer,
 * so that dpooled leaves before them.
 */
#include "shardrec/error.h"
#include "device/ops_dense.h"
#include "model/dcn.h"

/* x_0's column block `part` for layer 0's GEMMs: 0 is z, its first D
 * columns, 1 is pooled, the other F·D. Returns its pointer; *cols is its
 * width (and row stride), *off its first column in x_0 (and in V_0's rows). */
static const float *x0_block(const struct sr_dcn *c, const float *z, const float *pooled, int part,
                             int *cols, int *off)
{
    *cols = part == 0 ? c->D : c->F * c->D;
    *off = part == 0 ? 0 : c->D;
    return part == 0 ? z : pooled;
}

void sr_dcn_forward(struct sr_device *dev, sr_stream_t s, struct sr_dcn *c, const float *z,
                    const float *pooled, int B)
{
    const int n = c->n, R = c->R;
    for (int l = 0; l < c->L; l++) {
        if (l == 0) {
            for (int part = 0; part < 2; part++) {
                int cols, off;
                const float *x = x0_block(c, z, pooled, part, &cols, &off);
                sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_TRANS, B, R, cols, 1.0f, x, cols,
                                 c->V[0] + off, n, part ? 1.0f : 0.0f, c->h[0], R);
            }
        } else {
            sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_TRANS, B, R, n, 1.0f, c->x[l - 1], n, c->V[l],
                             n, 0.0f, c->h[l], R);
        }
        sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_TRANS, B, n, R, 1.0f, c->h[l], R, c->U[l], R,
                         0.0f, c->u[l], n);
        sr_op_dense_dcn_cross_forward(dev, s, z, pooled, c->u[l], c->bias[l],
                                      l ? c->x[l - 1] : NULL, B, c->F, c->D, c->x[l]);
    }
}

void sr_dcn_backward_data(struct sr_device *dev, sr_stream_t s, struct sr_dcn *c, const float *z,
                          const float *pooled, float *dx, int B, float *dz, float *dpooled)
{
    const int n = c->n, R = c->R, F = c->F, D = c->D;
    for (int l = c->L - 1; l >= 0; l--) {
        sr_op_dense_dcn_cross_backward(dev, s, z, pooled, c->u[l], c->bias[l], dx, B, F, D,
                                       l == 0, l < c->L - 1, c->du[l], c->dbias[l], dz, dpooled);
        sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_NO_TRANS, B, R, n, 1.0f, c->du[l], n, c->U[l], R,
                         0.0f, c->dh[l], R);
        if (l > 0) {
            sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_NO_TRANS, B, n, R, 1.0f, c->dh[l], R, c->V[l],
                             n, 1.0f, dx, n);
            continue;
        }
        for (int part = 0; part < 2; part++) {
            int cols, off;
            x0_block(c, z, pooled, part, &cols, &off);
            sr_op_dense_gemm(dev, s, SR_NO_TRANS, SR_NO_TRANS, B, cols, R, 1.0f, c->dh[0], R,
                             c->V[0] + off, n, 1.0f, part ? dpooled : dz, cols);
        }
    }
}

void sr_dcn_backward_weights(struct sr_device *dev, sr_stream_t s, struct sr_dcn *c, int l,
                             const float *z, const float *pooled, int B)
{
    const int n = c->n, R = c->R;
    SR_ASSERT(l >= 0 && l < c->L);
    sr_op_dense_gemm(dev, s, SR_TRANS, SR_NO_TRANS, n, R, B, 1.0f, c->du[l], n, c->h[l], R, 0.0f,
                     c->dU[l], R);
    if (l > 0) {
        sr_op_dense_gemm(dev, s, SR_TRANS, SR_NO_TRANS, R, n, B, 1.0f, c->dh[l], R, c->x[l - 1], n,
                         0.0f, c->dV[l], n);
        return;
    }
    for (int part = 0; part < 2; part++) {
        int cols, off;
        const float *x = x0_block(c, z, pooled, part, &cols, &off);
        sr_op_dense_gemm(dev, s, SR_TRANS, SR_NO_TRANS, R, cols, B, 1.0f, c->dh[0], R, x, cols,
                         0.0f, c->dV[0] + off, n);
    }
}
