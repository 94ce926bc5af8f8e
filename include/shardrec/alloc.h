/*
 * Host allocation wrappers. They abort with the size and call site when memory
 * runs out (the request is the program's, not the user's), and they count
 * every allocation so that tests can prove the steady-state training loop
 * allocates nothing: read sr_alloc_count() before and after a step.
 */
#ifndef SHARDREC_ALLOC_H
#define SHARDREC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *sr_malloc_at(size_t bytes, const char *file, int line);
void *sr_calloc_at(size_t n, size_t size, const char *file, int line);
void *sr_realloc_at(void *p, size_t bytes, const char *file, int line);
/* 64-byte aligned; release with sr_free. */
void *sr_aligned_alloc_at(size_t bytes, const char *file, int line);
char *sr_strdup_at(const char *s, const char *file, int line);
void sr_free(void *p);

/* Number of allocations made through these wrappers since start (all threads). */
uint64_t sr_alloc_count(void);
/* The calling thread's share of sr_alloc_count() (a helper thread's, such as
 * the checkpoint writer's, to subtract from a loop's count). */
uint64_t sr_alloc_count_this_thread(void);

/* What the calling thread is allocating now, for out-of-memory errors (a
 * device backend's, device.h): set around an allocation, the old label put
 * back after. NULL: unnamed. */
const char *sr_alloc_label(void);
const char *sr_alloc_label_set(const char *what); /* returns the label it replaces */

/* bytes as "812.0 bytes", "63.5 KiB", "2.0 MiB", "13.2 GiB", ... into buf
 * (>= 24 bytes); returns buf. */
const char *sr_format_bytes(char *buf, size_t n, double bytes);
/* bytes as "123456 bytes (120.6 KiB)": the exact count, then sr_format_bytes's
 * (buf >= 48 bytes); returns buf. */
const char *sr_format_bytes_exact(char *buf, size_t n, uint64_t bytes);

#define sr_malloc(bytes)        sr_malloc_at((bytes), __FILE__, __LINE__)
#define sr_calloc(n, size)      sr_calloc_at((n), (size), __FILE__, __LINE__)
#define sr_realloc(p, bytes)    sr_realloc_at((p), (bytes), __FILE__, __LINE__)
#define sr_aligned_alloc(bytes) sr_aligned_alloc_at((bytes), __FILE__, __LINE__)
#define sr_strdup(s)            sr_strdup_at((s), __FILE__, __LINE__)

#endif
