/* Host views of device memory for tests (host_view.h). */
#include <stdlib.h>

#include "shardrec/device.h"
#include "shardrec/error.h"
#include "host_view.h"

#define VIEWS 8

const void *sr_test_host_view(const void *p)
{
    static void *views[VIEWS];
    static int next;
    struct sr_device *dev = sr_device_cpu();
    void *base;
    size_t bytes;
    if (!sr_dev_hidden(dev, p, &base, &bytes))
        return p;
    size_t n = bytes - (size_t)((const char *)p - (char *)base);
    free(views[next]);
    void *v = views[next] = malloc(n);
    SR_ASSERT(v);
    next = (next + 1) % VIEWS;
    sr_dev_copy(dev, v, p, n, NULL);
    sr_dev_sync(dev, NULL);
    return v;
}

void sr_test_host_put(void *dst, const void *src, size_t bytes)
{
    struct sr_device *dev = sr_device_cpu();
    sr_dev_copy(dev, dst, src, bytes, NULL);
    sr_dev_sync(dev, NULL);
}
