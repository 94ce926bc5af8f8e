/*
 * Line streaming for the TSV reader: a window [beg, end) over a buffer of cap
 * bytes. A line is returned in place when its '\n' is inside the window;
 * otherwise the window's bytes move to the front and read() (or gzread())
 * fills the rest. A line that outgrows max_line is reported once and its
 * remaining bytes are dropped as they arrive (discarding), so an absurd line
 * never needs more than the buffer.
 *
 * zlib is opened with dlopen on the first gzip file: the few functions used are
 * looked up by name and called through pointers with zlib's documented
 * signatures (gzFile is an opaque pointer).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "data/line_stream.h"
#include "shardrec/error.h"

struct zlib_api {
    void *(*gzdopen)(int fd, const char *mode);
    int (*gzread)(void *file, void *buf, unsigned len);
    int (*gzclose)(void *file);
    const char *(*gzerror)(void *file, int *errnum);
    int ok;
};

static struct zlib_api zlib;
static pthread_once_t zlib_once = PTHREAD_ONCE_INIT;

static void zlib_load(void)
{
    void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&zlib.gzdopen = dlsym(h, "gzdopen");
    *(void **)&zlib.gzread = dlsym(h, "gzread");
    *(void **)&zlib.gzclose = dlsym(h, "gzclose");
    *(void **)&zlib.gzerror = dlsym(h, "gzerror");
    zlib.ok = zlib.gzdopen && zlib.gzread && zlib.gzclose && zlib.gzerror;
}

/* Whether the file starts with gzip's magic; leaves the offset at 0. */
static int is_gzip(int fd)
{
    unsigned char m[2];
    ssize_t n = pread(fd, m, 2, 0);
    return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

int sr_line_stream_open(struct sr_line_stream *s, const char *path, char *buf, size_t cap,
                        int64_t max_line)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->path = path;
    s->buf = buf;
    s->cap = cap;
    s->max_line = max_line;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sr_error_set(SR_ERR_IO, "%s: cannot open (%s); HINT: check the path", path,
                            strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (!is_gzip(fd)) {
        s->fd = fd;
        return SR_OK;
    }
    pthread_once(&zlib_once, zlib_load);
    if (!zlib.ok) {
        close(fd);
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "%s: gzip file but libz.so.1 is not available; "
                            "HINT: install zlib (apt-get install zlib1g) or gunzip it",
                            path);
    }
    s->gz = zlib.gzdopen(fd, "rb");
    if (!s->gz) {
        close(fd);
        return sr_error_set(SR_ERR_IO, "%s: cannot open as gzip", path);
    }
    return SR_OK;
}

/* Move the window to the front and read more; sets eof. */
static int refill(struct sr_line_stream *s)
{
    memmove(s->buf, s->buf + s->beg, s->end - s->beg);
    s->end -= s->beg;
    s->beg = 0;
    size_t room = s->cap - s->end;
    ssize_t n;
    if (s->gz) {
        n = zlib.gzread(s->gz, s->buf + s->end, room > (1u << 30) ? (1u << 30) : (unsigned)room);
        if (n < 0) {
            int e;
            return sr_error_set(SR_ERR_IO,
                                "%s: gzip read failed: %s; HINT: the file may be "
                                "truncated",
                                s->path, zlib.gzerror(s->gz, &e));
        }
    } else {
        do
            n = read(s->fd, s->buf + s->end, room);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return sr_error_set(SR_ERR_IO, "%s: read failed (%s)", s->path, strerror(errno));
    }
    s->end += (size_t)n;
    s->eof = n == 0;
    return SR_OK;
}

/* The window holds no '\n'. Returns a result for the caller, or -1 to read on. */
static int no_newline(struct sr_line_stream *s, const char **line, size_t *len)
{
    size_t have = s->end - s->beg;
    if (s->discarding) {
        s->beg = s->end;
        if (s->eof)
            return 0;
    } else if ((int64_t)have > s->max_line) {
        *line = s->buf + s->beg;
        *len = have;
        s->line_no++;
        s->discarding = 1;
        s->beg = s->end;
        return SR_LINE_LONG;
    } else if (s->eof && have) {
        *line = s->buf + s->beg;
        *len = have;
        s->line_no++;
        s->beg = s->end;
        return SR_LINE_OK;
    } else if (s->eof) {
        return 0;
    }
    int rc = refill(s);
    return rc ? rc : -1;
}

int sr_line_stream_next(struct sr_line_stream *s, const char **line, size_t *len)
{
    for (;;) {
        char *p = s->buf + s->beg;
        char *nl = memchr(p, '\n', s->end - s->beg);
        if (!nl) {
            int rc = no_newline(s, line, len);
            if (rc != -1)
                return rc;
            continue;
        }
        s->beg = (size_t)(nl + 1 - s->buf);
        if (s->discarding) {
            s->discarding = 0;
            continue;
        }
        *line = p;
        *len = (size_t)(nl - p);
        s->line_no++;
        return (int64_t)*len > s->max_line ? SR_LINE_LONG : SR_LINE_OK;
    }
}

void sr_line_stream_close(struct sr_line_stream *s)
{
    if (s->gz)
        zlib.gzclose(s->gz); /* closes the fd too */
    else if (s->fd >= 0)
        close(s->fd);
    s->gz = NULL;
    s->fd = -1;
}
