/*
 * The device registry: the devices of each kind this build and machine
 * have. Backends register here; `#ifdef SR_USE_CUDA` appears only in this
 * file and in device/cuda/. It is the one file above the backends that
 * includes them (device.c, which they call, does not).
 */
#include <stdlib.h>
#include <string.h>

#include "shardrec/device.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#ifdef SR_USE_CUDA
#include "device/cuda/cuda_device.h"
#endif

/* SR_CPU_DEFERRED=1 (any value but empty, 0 or opaque) makes the host device
 * the deferred CPU device, for tests that prove every read waits for its op;
 * SR_CPU_DEFERRED=opaque the opaque one, for tests that prove the host never
 * touches device memory. */
struct sr_device *sr_device_cpu(void)
{
    const char *v = getenv("SR_CPU_DEFERRED");
    if (!v || !*v || strcmp(v, "0") == 0)
        return sr_cpu_device();
    return strcmp(v, "opaque") == 0 ? sr_cpu_opaque_device() : sr_cpu_deferred_device();
}

struct sr_device *sr_device_get(enum sr_device_kind kind, int ordinal)
{
    switch (kind) {
    case SR_DEVICE_CPU:
        if (ordinal != 0) {
            sr_error_set(SR_ERR_INVALID_ARG, "cpu device %d does not exist: the host is cpu 0",
                         ordinal);
            return NULL;
        }
        return sr_device_cpu();
    case SR_DEVICE_CUDA:
#ifdef SR_USE_CUDA
        return sr_cuda_device_get(ordinal);
#else
        sr_error_set(SR_ERR_UNSUPPORTED,
                     "this build of shardrec has no CUDA backend (nvcc was not found when it "
                     "was built); HINT: rebuild where the CUDA toolkit is installed, or use "
                     "--device cpu");
        return NULL;
#endif
    }
    sr_error_set(SR_ERR_INVALID_ARG, "unknown device kind %d", (int)kind);
    return NULL;
}

int sr_device_count(enum sr_device_kind kind)
{
    if (kind == SR_DEVICE_CPU)
        return 1;
#ifdef SR_USE_CUDA
    if (kind == SR_DEVICE_CUDA)
        return sr_cuda_device_count();
#endif
    return 0;
}
