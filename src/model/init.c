/*
 * Weight initialisation, as the DLRM reference (dlrm_s_pytorch.py,
 * create_mlp) draws it for each nn.Linear(in, out):
 *
 *   W (out, in) ~ Normal(0, sqrt(2 / (in + out)))    (Glorot/Xavier normal)
 *   b (out)     ~ Normal(0, sqrt(1 / out))
 *
 * The draws are counter-based (rng.h): element k of the row-major tensor
 * named NAME ("bot_mlp.0.weight", ...) is
 *
 *   std * sr_rng_normal(seed, sr_rng_stream_of(NAME), k)
 *
 * a pure function of (seed, tensor, element), so every rank of any world size
 * builds the same model without communicating, and renaming or reordering
 * other tensors changes nothing. (The reference draws from numpy's sequential
 * generator, so its values differ; their distribution is the same.)
 *
 * DCNv2 cross layers as TorchRec's LowRankCrossNet: V [R, n] and U [n, R]
 * torch.nn.init.xavier_normal_ (std sqrt(2 / (n + R)) for both), bias zeros,
 * the normals drawn as above.
 */
#include <math.h>

#include "shardrec/rng.h"
#include "model/init.h"

static void fill_normal(float *x, int64_t n, double std, uint64_t seed, const char *name)
{
    uint64_t stream = sr_rng_stream_of(name);
    for (int64_t k = 0; k < n; k++)
        x[k] = (float)(std * sr_rng_normal(seed, stream, (uint64_t)k));
}

void sr_init_xavier_normal(float *w, int rows, int cols, uint64_t seed, const char *name)
{
    fill_normal(w, (int64_t)rows * cols, sqrt(2.0 / ((double)rows + cols)), seed, name);
}

void sr_init_linear(float *weight, float *bias, int out, int in, uint64_t seed,
                    const char *weight_name, const char *bias_name)
{
    fill_normal(weight, (int64_t)out * in, sqrt(2.0 / (in + out)), seed, weight_name);
    fill_normal(bias, out, sqrt(1.0 / out), seed, bias_name);
}
