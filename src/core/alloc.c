/*
 * Counting allocation wrappers: abort with size and call site on failure, and
 * count allocations so tests can prove a loop allocates nothing.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"

static atomic_uint_fast64_t alloc_count;
static _Thread_local uint64_t thread_count; /* this thread's share of alloc_count */
static _Thread_local const char *label;     /* sr_alloc_label_set */

static void counted(void)
{
    atomic_fetch_add(&alloc_count, 1);
    thread_count++;
}

void *sr_malloc_at(size_t bytes, const char *file, int line)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        sr_abort_at(file, line, "out of memory allocating %zu bytes", bytes);
    counted();
    return p;
}

void *sr_calloc_at(size_t n, size_t size, const char *file, int line)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        sr_abort_at(file, line, "out of memory allocating %zu x %zu bytes", n, size);
    counted();
    return p;
}

void *sr_realloc_at(void *p, size_t bytes, const char *file, int line)
{
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        sr_abort_at(file, line, "out of memory reallocating to %zu bytes", bytes);
    counted();
    return q;
}

void *sr_aligned_alloc_at(size_t bytes, const char *file, int line)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        sr_abort_at(file, line, "out of memory allocating %zu aligned bytes%s%s", bytes,
                    label ? " for " : "", label ? label : "");
    counted();
    return p;
}

char *sr_strdup_at(const char *s, const char *file, int line)
{
    size_t n = strlen(s) + 1;
    char *p = sr_malloc_at(n, file, line);
    memcpy(p, s, n);
    return p;
}

void sr_free(void *p)
{
    free(p);
}

uint64_t sr_alloc_count(void)
{
    return atomic_load(&alloc_count);
}

uint64_t sr_alloc_count_this_thread(void)
{
    return thread_count;
}

const char *sr_alloc_label(void)
{
    return label;
}

const char *sr_alloc_label_set(const char *what)
{
    const char *old = label;
    label = what;
    return old;
}

const char *sr_format_bytes(char *buf, size_t n, double bytes)
{
    static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6)
        bytes /= 1024, u++;
    snprintf(buf, n, "%.1f %s", bytes, units[u]);
    return buf;
}

const char *sr_format_bytes_exact(char *buf, size_t n, uint64_t bytes)
{
    char unit[24];
    snprintf(buf, n, "%" PRIu64 " bytes (%s)", bytes,
             sr_format_bytes(unit, sizeof unit, (double)bytes));
    return buf;
}
