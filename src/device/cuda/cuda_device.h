/* The CUDA backend's entry points for the registry (device/device.c). */
#ifndef SHARDREC_CUDA_DEVICE_H
#define SHARDREC_CUDA_DEVICE_H

#include "shardrec/device.h"

/* GPUs visible to this process; 0 when there is none or no usable driver
 * (never aborts, sets no error). */
int sr_cuda_device_count(void);
/* CUDA device `ordinal`, created on first use; NULL with sr_error_set
 * (SR_ERR_UNSUPPORTED) naming what is missing: the driver, any GPU, or this
 * ordinal. */
struct sr_device *sr_cuda_device_get(int ordinal);

#endif
