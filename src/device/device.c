/*
 * Device registry and the thin wrappers over a device's memory table.
 * Backends register here; `#ifdef SR_USE_CUDA` appears only in this file and
 * in device/cuda/.
 */
#include <string.h>

#include "shardrec/device.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"

struct sr_device *sr_device_cpu(void)
{
    return sr_cpu_device();
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
        return sr_cpu_device();
    case SR_DEVICE_CUDA:
        sr_error_set(SR_ERR_UNSUPPORTED,
                     "the CUDA backend is not built yet in this version of shardrec; "
                     "HINT: run on the CPU (the default)");
        return NULL;
    }
    sr_error_set(SR_ERR_INVALID_ARG, "unknown device kind %d", (int)kind);
    return NULL;
}

void *sr_dev_alloc(struct sr_device *dev, size_t bytes)
{
    return dev->mem->alloc(dev, bytes);
}

void *sr_dev_alloc_zero(struct sr_device *dev, size_t bytes)
{
    void *p = dev->mem->alloc(dev, bytes);
    dev->mem->memset(dev, p, 0, bytes, NULL);
    dev->mem->stream_sync(dev, NULL);
    return p;
}

void sr_dev_free(struct sr_device *dev, void *p)
{
    if (p)
        dev->mem->free(dev, p);
}

void sr_dev_copy(struct sr_device *dev, void *dst, const void *src, size_t bytes, sr_stream_t s)
{
    if (bytes)
        dev->mem->copy(dev, dst, src, bytes, s);
}

void sr_dev_memset(struct sr_device *dev, void *p, int value, size_t bytes, sr_stream_t s)
{
    if (bytes)
        dev->mem->memset(dev, p, value, bytes, s);
}

void sr_dev_sync(struct sr_device *dev, sr_stream_t s)
{
    dev->mem->stream_sync(dev, s);
}
