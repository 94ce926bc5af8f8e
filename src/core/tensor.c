/*
 * Tensor view helpers: sizes and names of dtypes, element counts.
 */
#include "shardrec/tensor.h"

size_t sr_dtype_size(enum sr_dtype dtype)
{
    switch (dtype) {
    case SR_DTYPE_F32:
    case SR_DTYPE_I32:
        return 4;
    case SR_DTYPE_F16:
    case SR_DTYPE_BF16:
        return 2;
    case SR_DTYPE_F64:
    case SR_DTYPE_I64:
        return 8;
    case SR_DTYPE_U8:
        return 1;
    }
    return 0;
}

const char *sr_dtype_name(enum sr_dtype dtype)
{
    static const char *names[] = {"fp32", "fp16", "bf16", "fp64", "int32", "int64", "uint8"};
    return (unsigned)dtype < sizeof names / sizeof names[0] ? names[dtype] : "unknown";
}

int64_t sr_tensor_numel(const struct sr_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

size_t sr_tensor_bytes(const struct sr_tensor *t)
{
    return (size_t)sr_tensor_numel(t) * sr_dtype_size(t->dtype);
}

struct sr_tensor sr_tensor_f32(float *data, int64_t shape0, int64_t shape1)
{
    struct sr_tensor t = {.dtype = SR_DTYPE_F32,
                          .device = 0,
                          .ndim = shape1 ? 2 : 1,
                          .shape = {shape0, shape1, 0, 0},
                          .data = data};
    return t;
}
