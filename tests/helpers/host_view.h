/* Tests read and write device memory as host code must (device.h): through
 * sr_dev_copy and a wait, so that they also run on the opaque CPU device
 * (SR_CPU_DEFERRED=opaque), whose memory the host cannot touch. On a device
 * the host can address, nothing is copied: a view is the memory itself. */
#ifndef SHARDREC_TEST_HOST_VIEW_H
#define SHARDREC_TEST_HOST_VIEW_H

#include <stddef.h>

/* Host-readable view of p, memory of the host CPU device (sr_device_cpu()):
 * p itself where the host can read it, else a copy of p's allocation from p
 * to its end, made after a sync (a snapshot: take a new view after more
 * work). The last eight views stay valid. */
const void *sr_test_host_view(const void *p);
#define HV(p) ((const float *)sr_test_host_view(p))
/* bytes from host memory src to dst, memory of the host CPU device, waited for. */
void sr_test_host_put(void *dst, const void *src, size_t bytes);

#endif
