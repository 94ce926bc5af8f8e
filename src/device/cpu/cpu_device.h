/* The CPU backend's device and its op tables (one file per op family). */
#ifndef SHARDREC_CPU_DEVICE_H
#define SHARDREC_CPU_DEVICE_H

#include "shardrec/device.h"

struct sr_device *sr_cpu_device(void);
/* The deferred debug device (cpu_deferred.c): the CPU ops, run only when waited for. */
struct sr_device *sr_cpu_deferred_device(void);
/* The deferred device whose memory the host cannot read or write (cpu_opaque.c). */
struct sr_device *sr_cpu_opaque_device(void);

extern const struct sr_dense_ops sr_cpu_dense_ops;         /* cpu_dense.c */
extern const struct sr_embedding_ops sr_cpu_embedding_ops; /* cpu_embedding.c */
extern const struct sr_optim_ops sr_cpu_optim_ops;         /* cpu_optim.c */
extern const struct sr_emb_dp_ops sr_cpu_emb_dp_ops;       /* cpu_embedding_dp.c */
extern const struct sr_sparse_dist_ops sr_cpu_sparse_dist_ops; /* cpu_sparse_dist.c */
extern const struct sr_cast_ops sr_cpu_cast_ops;           /* cpu_cast.c */

#endif
