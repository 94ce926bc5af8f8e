/*
 * The files a command names (contract in include/shardrec/files.h).
 *
 * Identity. An existing path is the file stat() reaches (symbolic links
 * followed): its device and inode, so that a hard link or a link to an input
 * counts as that input. Only regular files are compared: a write to a device
 * or a pipe (/dev/stdout, /dev/null) destroys nothing. A path that does not
 * exist yet (an output about to be created) is its folder's real path joined
 * with its name, so that "m.json" and "./dir/../m.json" are one file:
 *
 *   exists, regular   -> (st_dev, st_ino)
 *   exists, other     -> never clashes
 *   does not exist    -> realpath(folder) + "/" + name   (the path itself when
 *                        the folder does not resolve)
 *
 * Two entries clash when at least one is an output and their identities are
 * equal; a file that exists never equals one that does not.
 *
 * Reading whole. A config or plan is opened with O_NONBLOCK (so that opening
 * a FIFO without a writer returns at once), checked to be a regular file of at
 * most max_bytes with fstat, and read to its size plus one byte: neither
 * /dev/zero nor a file that grows while it is read can take memory without
 * limit (one that changed size is an error).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/files.h"

/* ---- outputs never name inputs ------------------------------------------------- */

struct identity {
    int kind; /* IDENT_* */
    dev_t dev;
    ino_t ino;
    char *name; /* IDENT_NAME: the resolved path (owned) */
};

enum { IDENT_NONE, IDENT_INODE, IDENT_NAME };

static char *join_path(const char *dir, const char *base)
{
    size_t cap = strlen(dir) + strlen(base) + 2;
    char *p = sr_malloc(cap);
    snprintf(p, cap, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", base);
    return p;
}

/* The folder's real path joined with the name; the path itself when the
 * folder does not resolve. */
static char *resolved_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? sr_malloc((size_t)(slash - path) + 2) : sr_strdup(".");
    if (slash) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    char *real = realpath(dir, NULL);
    char *out = real ? join_path(real, base) : sr_strdup(path);
    free(real); /* realpath's malloc */
    sr_free(dir);
    return out;
}

static void identify(const char *path, struct identity *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (!path || !path[0])
        return;
    if (stat(path, &st) == 0) {
        if (S_ISREG(st.st_mode)) {
            id->kind = IDENT_INODE;
            id->dev = st.st_dev;
            id->ino = st.st_ino;
        }
        return;
    }
    id->kind = IDENT_NAME;
    id->name = resolved_name(path);
}

static int same_file(const struct identity *a, const struct identity *b)
{
    if (a->kind == IDENT_NONE || a->kind != b->kind)
        return 0;
    if (a->kind == IDENT_INODE)
        return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->name, b->name) == 0;
}

/* The message for output `o` clashing with entry `x`. */
static int clash_error(const struct sr_named_file *o, const struct sr_named_file *x)
{
    const char *how = strcmp(o->path, x->path) == 0 ? "" : " (under another name or link)";
    if (x->is_output)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "%s %s and %s %s are the same file%s: two outputs cannot share "
                            "one file; HINT: give each output its own path",
                            x->flag, x->path, o->flag, o->path, how);
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "%s %s is the file that %s %s reads%s: writing it would destroy that "
                        "input; HINT: give %s another path",
                        o->flag, o->path, x->flag, x->path, how, o->flag);
}

int sr_files_check_distinct(const struct sr_named_file *files, int n)
{
    struct identity *id = sr_calloc(n > 0 ? (size_t)n : 1, sizeof *id);
    int rc = SR_OK;
    for (int i = 0; i < n; i++)
        identify(files[i].path, &id[i]);
    for (int i = 0; i < n && !rc; i++) {
        if (!files[i].is_output)
            continue;
        for (int j = 0; j < n && !rc; j++) {
            /* each pair of outputs once: the later one is named as clashing */
            if (j == i || (files[j].is_output && j > i) || !same_file(&id[i], &id[j]))
                continue;
            rc = clash_error(&files[i], &files[j]);
        }
    }
    for (int i = 0; i < n; i++)
        sr_free(id[i].name);
    sr_free(id);
    return rc;
}

/* ---- inputs read whole or streamed ------------------------------------------------ */

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO or pipe";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a device";
}

int sr_file_check_regular(const char *path, const char *what)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return SR_OK;
    return sr_error_set(SR_ERR_IO,
                        "%s%s%s: not a regular file but %s, which cannot be read as one "
                        "(it may block or never end); HINT: give the path of a file (copy or "
                        "decompress the stream to a file first)",
                        what ? what : "", what ? " " : "", path, kind_of(st.st_mode));
}

static ssize_t read_some(int fd, char *p, size_t n)
{
    ssize_t got;
    do
        got = read(fd, p, n);
    while (got < 0 && errno == EINTR);
    return got;
}

/* Up to cap bytes of fd into buf; -1 with errno on a read error. */
static ssize_t read_upto(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t got = read_some(fd, buf + n, cap - n);
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    return (ssize_t)n;
}

static int read_error(const char *path, const char *what, const char *why, const char *hint)
{
    return sr_error_set(SR_ERR_IO, "%s: cannot read %s (%s); HINT: %s", path, what, why, hint);
}

int sr_file_read_small(const char *path, const char *what, size_t max_bytes, char **text,
                       size_t *len)
{
    struct stat st;
    char why[96];
    *text = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return read_error(path, what, strerror(e), "check the path");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (S_ISDIR(st.st_mode))
            return read_error(path, what, strerror(EISDIR), "give the path of a file");
        snprintf(why, sizeof why, "not a regular file but %s", kind_of(st.st_mode));
        return read_error(path, what, why,
                          "give the path of a file (copy a stream to a file first)");
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        close(fd);
        snprintf(why, sizeof why, "%lld bytes, more than the %zu accepted", (long long)st.st_size,
                 max_bytes);
        return read_error(path, what, why, "is it the right file?");
    }
    size_t size = (size_t)st.st_size;
    char *buf = sr_malloc(size + 2);
    ssize_t got = read_upto(fd, buf, size + 1); /* one more: a file that grew */
    int e = errno;
    close(fd);
    if (got < 0 || (size_t)got != size) {
        sr_free(buf);
        return read_error(path, what, got < 0 ? strerror(e) : "it changed while being read",
                          got < 0 ? "check the file" : "read it when nothing writes it");
    }
    buf[size] = '\0';
    *text = buf;
    *len = size;
    return SR_OK;
}

int sr_json_check_nul(const char *text, size_t len, const char *where)
{
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\0')
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "%s: a NUL byte at offset %zu; HINT: the file must be JSON text",
                                where, i);
        if (text[i] != '\\' || i + 1 >= len)
            continue;
        if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "%s: a string holds the escape \\u0000 (a NUL) at offset %zu; "
                                "HINT: names and values cannot hold NUL",
                                where, i);
        i++; /* the escaped character: "\\u0000" is a backslash, then text */
    }
    return SR_OK;
}

int sr_file_map(const char *path, const void **map, size_t *bytes)
{
    struct stat st;
    *map = NULL;
    *bytes = 0;
    int rc = sr_file_check_regular(path, NULL);
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sr_error_set(SR_ERR_IO, "%s: cannot open (%s); HINT: check the path", path,
                            strerror(errno));
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return sr_error_set(SR_ERR_DATA, "%s: an empty file", path);
    }
    const size_t size = (size_t)st.st_size;
    void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return sr_error_set(SR_ERR_IO, "%s: cannot map %zu bytes (%s)", path, size,
                            strerror(errno));
    madvise(m, size, MADV_SEQUENTIAL);
    *map = m;
    *bytes = size;
    return SR_OK;
}

void sr_file_unmap(const void *map, size_t bytes)
{
    if (map)
        munmap((void *)(uintptr_t)map, bytes);
}
