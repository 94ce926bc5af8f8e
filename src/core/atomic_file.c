/*
 * Atomic file writes and output-path checks (contract in
 * include/shardrec/atomic_file.h).
 *
 * A write is: a temporary file beside the target, created exclusively under a
 * random name without following links; the caller's bytes; fsync; rename over
 * the target; fsync of the directory, so that after a crash the directory
 * holds either the old target or the whole new one.
 *
 * Temporary files still open are listed in a small fixed table that a
 * SIGINT/SIGTERM/SIGHUP handler walks to unlink them before the process dies
 * (the handler resets itself and re-raises, so the exit status still says
 * which signal ended it). The table is written with atomics and read by the
 * handler without locks or allocation (unlink and raise are
 * async-signal-safe). A write that finds the table full still works; only its
 * clean-up on a signal is lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/atomic_file.h"
#include "shardrec/error.h"
#include "shardrec/fault.h"

#define TMP_TAG      ".sr-tmp-"
#define BASE_KEEP    64 /* bytes of the target's name kept in the temporary name */
#define MAX_SLOTS    16
#define MAX_ATTEMPTS 64

enum { SLOT_FREE, SLOT_FILLING, SLOT_ACTIVE };

struct tmp_slot {
    atomic_int state;
    char path[PATH_MAX];
};

static struct tmp_slot slots[MAX_SLOTS];
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig)
{
    int saved = errno;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (atomic_load(&slots[i].state) == SLOT_ACTIVE)
            unlink(slots[i].path);
    errno = saved;
    raise(sig); /* SA_RESETHAND restored the default action: this ends the process */
}

/* Install on_signal for each signal still at its default action. */
static void install_handlers(void)
{
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(cleanup_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(cleanup_signals[i], &sa, NULL);
    }
}

/* Claim a slot for tmp; -1 when the table is full or the path too long. */
static int slot_claim(const char *tmp)
{
    pthread_once(&handler_once, install_handlers);
    if (strlen(tmp) >= PATH_MAX)
        return -1;
    for (int i = 0; i < MAX_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_FILLING)) {
            strcpy(slots[i].path, tmp);
            atomic_store(&slots[i].state, SLOT_ACTIVE);
            return i;
        }
    }
    return -1;
}

static void slot_release(int i)
{
    if (i >= 0 && i < MAX_SLOTS)
        atomic_store(&slots[i].state, SLOT_FREE);
}

/* 64 unpredictable bits: getrandom, or (where it fails) clock, pid and a counter
 * mixed by splitmix64; O_EXCL keeps even a guessed name harmless. */
static uint64_t random_u64(void)
{
    static atomic_uint_fast64_t counter;
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 48) ^
        atomic_fetch_add(&counter, 0x9e3779b97f4a7c15ull);
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    return v ^ (v >> 31);
}

/* The folder part of path ("." when there is none), owned by the caller. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return sr_strdup(".");
    if (slash == path)
        return sr_strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = sr_malloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "DIR/.BASE.sr-tmp-" followed by 16 hex digits, with room for them. */
static char *tmp_name(const char *path)
{
    char *dir = dir_of(path);
    const char *base = base_of(path);
    size_t bl = strlen(base) < BASE_KEEP ? strlen(base) : BASE_KEEP;
    size_t cap = strlen(dir) + bl + sizeof TMP_TAG + 20;
    char *tmp = sr_malloc(cap);
    snprintf(tmp, cap, "%s/.%.*s" TMP_TAG "%016llx", dir, (int)bl, base,
             (unsigned long long)random_u64());
    sr_free(dir);
    return tmp;
}

/* The hint for errno e when creating a file in path's folder. */
static int create_error(const char *path, int e)
{
    char *dir = dir_of(path);
    int rc;
    if (e == ENOENT)
        rc = sr_error_set(SR_ERR_IO,
                          "%s: cannot create: the folder %s does not exist; HINT: create it "
                          "first (mkdir -p %s) or fix the path",
                          path, dir, dir);
    else if (e == EACCES || e == EPERM)
        rc = sr_error_set(SR_ERR_IO,
                          "%s: cannot create: no permission to write in the folder %s; HINT: "
                          "choose a folder you can write to, or fix its permissions",
                          path, dir);
    else if (e == ENOTDIR)
        rc = sr_error_set(SR_ERR_IO, "%s: cannot create: %s is not a folder; HINT: fix the path",
                          path, dir);
    else
        rc = sr_error_set(SR_ERR_IO,
                          "%s: cannot create a file in %s (%s); HINT: check the "
                          "folder and the free disk space",
                          path, dir, strerror(e));
    sr_free(dir);
    return rc;
}

int sr_atomic_file_open(struct sr_atomic_file *af, const char *path)
{
    memset(af, 0, sizeof *af);
    af->slot = -1;
    if (!path || !path[0] || path[strlen(path) - 1] == '/')
        return sr_error_set(SR_ERR_IO, "'%s': not a file name; HINT: give a file's path",
                            path ? path : "");
    int fd = -1, e = 0;
    char *tmp = NULL;
    for (int attempt = 0; fd < 0 && attempt < MAX_ATTEMPTS; attempt++) {
        sr_free(tmp);
        tmp = tmp_name(path);
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST)
            break;
    }
    if (fd < 0) {
        sr_free(tmp);
        return create_error(path, e);
    }
    af->slot = slot_claim(tmp);
    af->f = fdopen(fd, "w+b");
    SR_ASSERT(af->f);
    af->path = sr_strdup(path);
    af->tmp = tmp;
    return SR_OK;
}

static void release(struct sr_atomic_file *af)
{
    slot_release(af->slot);
    sr_free(af->path);
    sr_free(af->tmp);
    memset(af, 0, sizeof *af);
    af->slot = -1;
}

void sr_atomic_file_abort(struct sr_atomic_file *af)
{
    if (!af || !af->tmp)
        return;
    if (af->f)
        fclose(af->f);
    unlink(af->tmp);
    release(af);
}

/* An existing target must be a file or a link: rename would replace a device. */
static int check_replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
        return SR_OK;
    if (S_ISDIR(st.st_mode))
        return sr_error_set(SR_ERR_IO, "%s: is a directory; HINT: give a file name inside it",
                            path);
    return sr_error_set(SR_ERR_IO,
                        "%s: exists and is not a regular file (a device, pipe or socket); "
                        "HINT: the file is written whole and renamed into place: give the "
                        "path of a regular file",
                        path);
}

static void sync_dir(const char *path)
{
    char *dir = dir_of(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: the rename is already visible */
        close(fd);
    }
    sr_free(dir);
}

/* hook: run the fault-injection hook (SR_FAULT) before the rename. */
static int commit(struct sr_atomic_file *af, int hook)
{
    int bad = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    int e = errno;
    int injected = bad || !hook ? SR_OK : sr_fault_write(af->path); /* may not return */
    if (fclose(af->f) != 0 && !bad)
        bad = 1, e = errno;
    af->f = NULL;
    int rc = bad        ? sr_error_set(SR_ERR_IO,
                                       "%s: cannot write (%s); HINT: check the free disk "
                                       "space; the old file, if any, is unchanged",
                                       af->path, strerror(e))
             : injected ? injected
                        : check_replaceable(af->path);
    if (!rc && rename(af->tmp, af->path) != 0)
        rc = sr_error_set(SR_ERR_IO,
                          "%s: cannot replace the file (%s); HINT: check the path "
                          "and the folder's permissions",
                          af->path, strerror(errno));
    if (rc) {
        unlink(af->tmp);
        release(af);
        return rc;
    }
    sync_dir(af->path);
    release(af);
    return SR_OK;
}

int sr_atomic_file_commit(struct sr_atomic_file *af)
{
    return commit(af, 1);
}

int sr_atomic_file_commit_written(struct sr_atomic_file *af)
{
    return commit(af, 0);
}

/* ---- start-up checks ------------------------------------------------------------- */

static int check_folder(const char *path, const char *what)
{
    char *dir = dir_of(path);
    struct stat st;
    int rc = SR_OK;
    if (stat(dir, &st) != 0 && errno == ENOENT)
        rc = sr_error_set(SR_ERR_IO,
                          "%s %s: the folder %s does not exist; HINT: create it first "
                          "(mkdir -p %s) or fix the path",
                          what, path, dir, dir);
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = sr_error_set(SR_ERR_IO, "%s %s: %s is not a folder; HINT: fix the path", what, path,
                          dir);
    else if (access(dir, W_OK | X_OK) != 0 && errno == EROFS)
        rc = sr_error_set(SR_ERR_IO,
                          "%s %s: the folder %s is on a read-only file system; HINT: write "
                          "somewhere else",
                          what, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = sr_error_set(SR_ERR_IO,
                          "%s %s: no permission to write in the folder %s; HINT: choose a "
                          "folder you can write to, or fix its permissions",
                          what, path, dir);
    sr_free(dir);
    return rc;
}

int sr_output_path_check(const char *path, const char *what, enum sr_output_kind kind)
{
    struct stat st;
    what = what ? what : "output";
    if (!path || !path[0])
        return sr_error_set(SR_ERR_IO, "%s: empty path; HINT: give a file's path", what);
    int exists = lstat(path, &st) == 0;
    int is_dir = exists && S_ISDIR(st.st_mode);
    if (exists && S_ISLNK(st.st_mode) && stat(path, &st) == 0)
        is_dir = S_ISDIR(st.st_mode);
    if (is_dir || path[strlen(path) - 1] == '/')
        return sr_error_set(SR_ERR_IO,
                            "%s %s: is a directory; HINT: give a file name inside it, e.g. "
                            "%s%sout",
                            what, path, path, path[strlen(path) - 1] == '/' ? "" : "/");
    if (kind == SR_OUTPUT_STREAM && exists) {
        if (access(path, W_OK) == 0)
            return SR_OK;
        if (errno != ENOENT) /* ENOENT: a dangling link, created through like a new file */
            return sr_error_set(SR_ERR_IO,
                                "%s %s: no permission to write this file (%s); HINT: choose "
                                "another path or fix its permissions",
                                what, path, strerror(errno));
    }
    int rc = check_folder(path, what);
    if (rc || kind == SR_OUTPUT_STREAM || !exists)
        return rc;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return sr_error_set(SR_ERR_IO,
                            "%s %s: exists and is not a regular file (a device, pipe or "
                            "socket); HINT: the file is written whole and renamed into place: "
                            "give the path of a regular file",
                            what, path);
    return SR_OK;
}
