/*
 * Memory of the opaque CPU device (SR_CPU_DEFERRED=opaque): the deferred CPU
 * device (cpu_deferred.c) with device memory that the host cannot read or
 * write, as a GPU's. It proves on a CPU, in CI, that the layers above
 * device/ touch device memory only through device ops and sr_dev_copy.
 *
 * Device allocations come from one arena of address space reserved at the
 * first allocation (PROT_NONE, nothing committed), handed out page by page
 * and never reused, so a stale pointer faults too:
 *
 *   arena  [ alloc 0 | alloc 1 (freed) | alloc 2 | ... used ... | reserved, never handed out ]
 *          ^ arena                                              ^ arena + used
 *
 * The used part is PROT_NONE except while the deferred device runs queued
 * ops and copies or poisons an op's outputs (sr_opaque_set_access, always
 * under the deferred device's lock: its flush opens the arena once for all
 * the items it runs, and closes it around a host function, which may not
 * touch device memory either). mprotect is process-wide, so while one thread
 * runs ops another thread's stray access goes unseen; every legitimate access
 * happens under the lock, so none ever faults. A host access at any other
 * time raises SIGSEGV, and the handler installed with the arena names the
 * address, the allocation and whether it was freed, prints a backtrace and
 * aborts. Faults outside the arena go to the handler that was there before.
 *
 * Host memory of the device (sr_dev_alloc_host: pinned on a GPU) is ordinary
 * memory (cpu_deferred.c).
 */
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "device/cpu/cpu_deferred.h"

/* Address space to reserve: the first size the kernel grants, largest first. */
#define ARENA_MAX ((size_t)1 << 40)
#define ARENA_MIN ((size_t)1 << 34)

/* One allocation, for free and for the fault message (newest first). */
struct block {
    char *p;
    size_t bytes, span; /* asked for; pages handed out */
    int live;
    struct block *next;
};

static char *arena;
static size_t arena_bytes, used;
static int open_now; /* the used part is readable and writable */
static size_t page;
static struct block *blocks;
static struct sigaction previous;

static void reprotect(char *p, size_t bytes, int open)
{
    if (bytes && mprotect(p, bytes, open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        SR_ABORT("opaque device: mprotect of %zu bytes failed", bytes);
}

static const struct block *block_at(const char *a)
{
    for (const struct block *b = blocks; b; b = b->next)
        if (a >= b->p && a < b->p + b->span)
            return b;
    return NULL;
}

static void say(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

static int fault_was_write(const void *uc)
{
#if defined(__x86_64__) && defined(REG_ERR)
    return (((const ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc;
    return -1;
#endif
}

/* A fault in the arena is the host touching device memory: say where, abort. */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
    const char *a = si->si_addr;
    if (!arena || a < arena || a >= arena + arena_bytes) {
        sigaction(SIGSEGV, &previous, NULL); /* not ours: fault again into the old handler */
        return;
    }
    const struct block *b = block_at(a);
    int w = fault_was_write(uc);
    const char *what = w < 0 ? "touched" : w ? "wrote" : "read";
    char msg[640];
    snprintf(msg, sizeof msg,
             "[rank %d] opaque device: the host %s device memory at %p, %s; host code may not "
             "touch device memory: copy it to host memory from sr_dev_alloc_host with "
             "sr_dev_copy on a stream, then wait for that stream\n",
             sr_get_rank(), what, (const void *)a,
             b ? (b->live ? "inside a live device allocation" : "inside a FREED device allocation")
               : "outside every device allocation");
    say(msg);
    if (b) {
        snprintf(msg, sizeof msg,
                 "[rank %d] opaque device: that allocation: %zu bytes at %p, offset %zu\n",
                 sr_get_rank(), b->bytes, (void *)b->p, (size_t)(a - b->p));
        say(msg);
    }
    say("backtrace (resolve with addr2line -e BINARY, or run under gdb):\n");
    void *frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    signal(SIGABRT, SIG_DFL);
    abort();
}

static void reserve(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t n = ARENA_MAX; n >= ARENA_MIN && !arena; n /= 2) {
        void *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED)
            arena = p, arena_bytes = n;
    }
    if (!arena)
        SR_ABORT("opaque device: cannot reserve %zu bytes of address space", ARENA_MIN);
    madvise(arena, arena_bytes, MADV_HUGEPAGE); /* fewer page entries to reprotect */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous);
}

void *sr_opaque_alloc(size_t bytes)
{
    if (!arena)
        reserve();
    size_t span = ((bytes ? bytes : 1) + page - 1) / page * page;
    if (span > arena_bytes - used)
        SR_ABORT("opaque device: out of device address space (%zu bytes asked, %zu of %zu used); "
                 "HINT: the opaque device never reuses freed addresses",
                 bytes, used, arena_bytes);
    struct block *b = sr_malloc(sizeof *b); /* counts as the allocation it is */
    *b = (struct block){arena + used, bytes, span, 1, blocks};
    used += span;
    if (open_now)
        reprotect(b->p, span, 1);
    blocks = b;
    return b->p;
}

void sr_opaque_free(void *p)
{
    struct block *b = p ? (struct block *)block_at(p) : NULL;
    if (!b || b->p != p || !b->live)
        SR_ABORT("opaque device: sr_dev_free(%p) of memory that is not a live device allocation%s",
                 p, p && !block_at(p) ? " (host memory goes back with sr_dev_free_host)" : "");
    b->live = 0;
    madvise(b->p, b->span, MADV_DONTNEED); /* its pages go back; its addresses stay reserved */
}

int sr_opaque_find(const void *p, void **base, size_t *bytes)
{
    const struct block *b = arena ? block_at(p) : NULL;
    if (!b || !b->live || (const char *)p >= b->p + b->bytes)
        return 0;
    if (base)
        *base = b->p;
    if (bytes)
        *bytes = b->bytes;
    return 1;
}

int sr_opaque_set_access(int open)
{
    int was = open_now;
    if (!arena || open == was)
        return was;
    reprotect(arena, used, open);
    open_now = open;
    return was;
}
