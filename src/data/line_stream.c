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
 * signatures; z_stream's layout is zlib's documented one (stable since 1.0,
 * and inflateInit2_ checks its size). gzip is inflated here rather than with
 * gzread, which treats an early end of file as a short file and skips trailing
 * garbage in silence. One member after another:
 *
 *   [member 0][member 1]...[member k]<end>     each: header, deflate data, CRC, size
 *
 * inflate (windowBits 15 + 16: gzip only) checks each member's CRC and size;
 * at a member's end the next byte must start a member or be the end of file.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "data/line_stream.h"
#include "shardrec/alloc.h"
#include "shardrec/error.h"

/* zlib.h's z_stream and constants, as documented there. */
struct z_stream_s {
    const unsigned char *next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state;
    void *zalloc, *zfree, *opaque;
    int data_type;
    unsigned long adler, reserved;
};
#define Z_OK            0
#define Z_STREAM_END    1
#define Z_DATA_ERROR    (-3)
#define Z_BUF_ERROR     (-5)
#define Z_NO_FLUSH      0
#define GZIP_WINDOW     (15 + 16)
#define MAX_INFLATE_OUT (1u << 30)

struct zlib_api {
    const char *(*zlibVersion)(void);
    int (*inflateInit2_)(struct z_stream_s *z, int window_bits, const char *version, int size);
    int (*inflate)(struct z_stream_s *z, int flush);
    int (*inflateReset)(struct z_stream_s *z);
    int (*inflateEnd)(struct z_stream_s *z);
    int ok;
};

static struct zlib_api zlib;
static pthread_once_t zlib_once = PTHREAD_ONCE_INIT;

static void zlib_load(void)
{
    void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&zlib.zlibVersion = dlsym(h, "zlibVersion");
    *(void **)&zlib.inflateInit2_ = dlsym(h, "inflateInit2_");
    *(void **)&zlib.inflate = dlsym(h, "inflate");
    *(void **)&zlib.inflateReset = dlsym(h, "inflateReset");
    *(void **)&zlib.inflateEnd = dlsym(h, "inflateEnd");
    zlib.ok = zlib.zlibVersion && zlib.inflateInit2_ && zlib.inflate && zlib.inflateReset &&
              zlib.inflateEnd;
}

/* Whether the file starts with gzip's magic; leaves the offset at 0. */
static int is_gzip(int fd)
{
    unsigned char m[2];
    ssize_t n = pread(fd, m, 2, 0);
    return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

static int gzip_open(struct sr_line_stream *s)
{
    pthread_once(&zlib_once, zlib_load);
    if (!zlib.ok)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "%s: gzip file but libz.so.1 is not available; "
                            "HINT: install zlib (apt-get install zlib1g) or gunzip it",
                            s->path);
    struct z_stream_s *z = sr_calloc(1, sizeof *z);
    if (zlib.inflateInit2_(z, GZIP_WINDOW, zlib.zlibVersion(), (int)sizeof *z) != Z_OK) {
        sr_free(z);
        return sr_error_set(SR_ERR_IO, "%s: cannot start gzip decompression", s->path);
    }
    s->z = z;
    s->zin = sr_malloc(SR_LINE_ZIN_BYTES);
    s->member_magic = 1; /* is_gzip saw it */
    return SR_OK;
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
    s->fd = fd;
    int rc = is_gzip(fd) ? gzip_open(s) : SR_OK;
    if (rc)
        sr_line_stream_close(s);
    return rc;
}

static ssize_t read_some(int fd, void *p, size_t n)
{
    ssize_t got;
    do
        got = read(fd, p, n);
    while (got < 0 && errno == EINTR);
    return got;
}

/* More compressed input, when all read so far has been consumed. */
static int gz_input(struct sr_line_stream *s)
{
    struct z_stream_s *z = s->z;
    ssize_t n = read_some(s->fd, s->zin, SR_LINE_ZIN_BYTES);
    if (n < 0)
        return sr_error_set(SR_ERR_IO, "%s: read failed (%s)", s->path, strerror(errno));
    z->next_in = s->zin;
    z->avail_in = (unsigned)n;
    s->zin_read += n;
    s->file_read += n;
    s->zin_eof = n == 0;
    return SR_OK;
}

/* The damage that stopped inflate (ret), or an end of file inside a member
 * (ret == Z_BUF_ERROR). Bytes after the first member that never decode into a
 * member are trailing garbage; anything else is a truncated or corrupt member. */
static int gz_damage(struct sr_line_stream *s, int ret)
{
    struct z_stream_s *z = s->z;
    long long at = (long long)(s->zin_read - z->avail_in);
    if (s->member > 0 && !s->member_magic)
        return sr_error_set(SR_ERR_DATA,
                            "%s: trailing garbage after the gzip data: the bytes from offset "
                            "%lld on are not a gzip member; HINT: the file was damaged or "
                            "appended to: fetch or compress it again",
                            s->path, at - (long long)z->total_in);
    if (ret == Z_BUF_ERROR)
        return sr_error_set(SR_ERR_DATA,
                            "%s: gzip file is truncated: it ends inside gzip member %lld, after "
                            "line %lld; HINT: the file was cut short (an interrupted download "
                            "or copy?): fetch or compress it again",
                            s->path, (long long)s->member + 1, (long long)s->line_no);
    return sr_error_set(SR_ERR_DATA,
                        "%s: corrupt gzip data near byte %lld (%s); HINT: fetch or compress "
                        "the file again",
                        s->path, at, z->msg ? z->msg : "inflate failed");
}

/* Inflate into out[0..room): *got > 0 bytes, or 0 at the clean end of the file. */
static int gz_read(struct sr_line_stream *s, char *out, size_t room, size_t *got)
{
    struct z_stream_s *z = s->z;
    unsigned want = room > MAX_INFLATE_OUT ? MAX_INFLATE_OUT : (unsigned)room;
    int rc = SR_OK;
    *got = 0;
    z->next_out = (unsigned char *)out;
    z->avail_out = want;
    while (!rc && z->avail_out == want) {
        if (z->avail_in == 0 && !s->zin_eof && (rc = gz_input(s)))
            break;
        if (s->member_done && z->avail_in == 0 && s->zin_eof)
            break; /* the clean end: the last member ended with the file */
        if (s->member_done && z->avail_in == 0)
            continue;
        if (s->member_done) { /* more bytes: they must start another member */
            zlib.inflateReset(z);
            s->member_done = 0;
            s->member++;
            s->member_magic = z->next_in[0] == 0x1f && (z->avail_in < 2 || z->next_in[1] == 0x8b);
        }
        if (z->avail_in == 0 && s->zin_eof)
            return gz_damage(s, Z_BUF_ERROR);
        int ret = zlib.inflate(z, Z_NO_FLUSH);
        if (ret == Z_STREAM_END)
            s->member_done = 1;
        else if (ret != Z_OK && (ret != Z_BUF_ERROR || z->avail_in))
            return gz_damage(s, ret == Z_BUF_ERROR ? Z_DATA_ERROR : ret);
    }
    *got = want - z->avail_out;
    return rc;
}

/* Move the window to the front and read more; sets eof. */
static int refill(struct sr_line_stream *s)
{
    memmove(s->buf, s->buf + s->beg, s->end - s->beg);
    s->end -= s->beg;
    s->beg = 0;
    size_t room = s->cap - s->end;
    size_t n = 0;
    if (s->z) {
        int rc = gz_read(s, s->buf + s->end, room, &n);
        if (rc)
            return rc;
    } else {
        ssize_t got = read_some(s->fd, s->buf + s->end, room);
        if (got < 0)
            return sr_error_set(SR_ERR_IO, "%s: read failed (%s)", s->path, strerror(errno));
        n = (size_t)got;
        s->file_read += got;
    }
    s->end += n;
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
    if (s->z) {
        zlib.inflateEnd(s->z);
        sr_free(s->z);
    }
    sr_free(s->zin);
    if (s->fd >= 0)
        close(s->fd);
    s->z = NULL;
    s->zin = NULL;
    s->fd = -1;
}
