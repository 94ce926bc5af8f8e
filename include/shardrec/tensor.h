/*
 * Tensor views. A tensor is (dtype, device, shape, data) and never owns its
 * memory: modules allocate one block and hand out named views into it.
 * Row-major; shape[0] is the outermost dimension.
 */
#ifndef SHARDREC_TENSOR_H
#define SHARDREC_TENSOR_H

#include <stddef.h>
#include <stdint.h>

enum sr_dtype {
    SR_DTYPE_F32 = 0,
    SR_DTYPE_F16,
    SR_DTYPE_BF16,
    SR_DTYPE_F64,
    SR_DTYPE_I32,
    SR_DTYPE_I64,
    SR_DTYPE_U8,
};

#define SR_TENSOR_MAX_DIMS 4

struct sr_tensor {
    enum sr_dtype dtype;
    int device; /* index into the device registry; 0 is the host CPU */
    int ndim;
    int64_t shape[SR_TENSOR_MAX_DIMS];
    void *data; /* borrowed */
};

size_t sr_dtype_size(enum sr_dtype dtype);
const char *sr_dtype_name(enum sr_dtype dtype);
int64_t sr_tensor_numel(const struct sr_tensor *t);
size_t sr_tensor_bytes(const struct sr_tensor *t);
/* A 1-D or 2-D fp32 host view (shape1 = 0 makes it 1-D). */
struct sr_tensor sr_tensor_f32(float *data, int64_t shape0, int64_t shape1);

#endif
