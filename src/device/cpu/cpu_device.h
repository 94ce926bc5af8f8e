/* The CPU backend's device and its op tables (one file per op family). */
#ifndef SHARDREC_CPU_DEVICE_H
#define SHARDREC_CPU_DEVICE_H

#include <stdint.h>

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

/* cpu_hybrid.c: the sparse-dist ops of hybrid tables (ops_sparse_dist.h). */
struct sr_sparse_dist_hybrid;
struct sr_sparse_dist_kjt;
void sr_cpu_hybrid_split(struct sr_device *dev, const struct sr_sparse_dist_hybrid *h,
                         const struct sr_sparse_dist_kjt *in, int32_t *lengths, int32_t *full,
                         int64_t *offsets, int64_t *values, float *weights, sr_stream_t s);
/* cpu_compact.c: the compact cold-row exchange's ops (ops_sparse_dist.h). */
struct sr_sparse_dist_compact;
void sr_cpu_compact_counts(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                           const int32_t *lens, int num_slots, int64_t *ne, sr_stream_t s);
void sr_cpu_compact_owner(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                          const int64_t *offsets, float *rows, float *buf, int64_t words,
                          int pack, sr_stream_t s);
void sr_cpu_compact_samples(struct sr_device *dev, const struct sr_sparse_dist_compact *c,
                            const int32_t *lens, int num_slots, float *block, float *buf,
                            int64_t words, int pack, sr_stream_t s);
void sr_cpu_rows_copy(struct sr_device *dev, int scatter, const int64_t *idx, int64_t n,
                      int64_t width, const float *src, int64_t src_rows, float *dst,
                      int64_t dst_rows, sr_stream_t s);

#endif
