/*
 * libFuzzer target for the line stream (src/data/line_stream.c): plain text
 * and gzip, through a small buffer so that lines cross its ends.
 *
 * Input: byte 0 chooses the mode, byte 1 the line limit (1..64), the rest is
 * the text T.
 *   - plain (mode % 4 == 0): the file is T (read as raw when T starts with
 *     gzip's magic). Every line handed out must equal
 *     T's next '\n'-separated piece, byte for byte; a piece longer than the
 *     limit comes back as SR_LINE_LONG; their number is T's number of lines.
 *   - gzip (mode % 4 == 1): the file is T compressed as one gzip member
 *     (zlib, this harness's own): the same lines as plain T, then the end.
 *   - damaged gzip (mode % 4 == 2): T compressed, then cut short at a place
 *     after the magic that the mode's upper bits choose: the stream must end in SR_ERR_DATA (a
 *     truncated file never reads as a shorter one), and the lines before it
 *     must be T's first lines.
 *   - raw (mode % 4 == 3): the file is the bytes themselves, gzip magic or
 *     not: any outcome but a crash, a leak or undefined behaviour.
 * Build and run with tools/fuzz.sh (zlib's headers and -lz for the harness).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "shardrec/error.h"
#include "data/line_stream.h"

/* T compressed as one gzip member, in a malloc'd buffer (*n bytes). */
static unsigned char *gzip_of(const uint8_t *t, size_t len, size_t *n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t cap = deflateBound(&z, (uLong)len) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)t;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    *n = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

/* The bytes as a file: its path under /proc (fd kept open in *fd). */
static void as_file(const void *bytes, size_t n, int *fd, char *path, size_t path_cap)
{
    *fd = memfd_create("fuzz_line_stream", 0);
    if (*fd < 0 || (n && write(*fd, bytes, n) != (ssize_t)n))
        abort();
    snprintf(path, path_cap, "/proc/self/fd/%d", *fd);
}

/* T's piece k (0-based) of its '\n'-separated lines: start and length; 0 when
 * T has no piece k (a last piece without '\n' counts, an empty tail not). */
static int piece(const uint8_t *t, size_t len, size_t *at, size_t *plen)
{
    if (*at >= len)
        return 0;
    const uint8_t *nl = memchr(t + *at, '\n', len - *at);
    size_t end = nl ? (size_t)(nl - t) : len;
    *plen = end - *at;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int mode = data[0] % 4, cut_sel = data[0] >> 2;
    int64_t max_line = 1 + data[1] % 64;
    const uint8_t *t = data + 2;
    size_t len = size - 2, flen = len;
    unsigned char *gz = NULL;
    const void *file = t;
    if (mode == 1 || mode == 2) {
        gz = gzip_of(t, len, &flen);
        file = gz;
        if (mode == 2) /* cut inside the member, after its magic: its last byte goes */
            flen = 2 + (size_t)cut_sel * (flen - 3) / 63;
    }
    if (mode == 3)
        file = data, flen = size;
    if (mode == 0 && len >= 2 && t[0] == 0x1f && t[1] == 0x8b)
        mode = 3; /* text that starts with gzip's magic is read as gzip: no oracle */
    int fd;
    char path[64];
    as_file(file, flen, &fd, path, sizeof path);

    size_t cap = (size_t)max_line + 2;
    char *buf = malloc(cap);
    struct sr_line_stream s;
    int rc = sr_line_stream_open(&s, path, buf, cap, max_line);
    if (rc == SR_ERR_UNSUPPORTED) /* no libz.so.1 at run time: nothing to check */
        goto done;
    if (rc)
        abort();
    size_t at = 0, plen = 0;
    const char *line;
    size_t n;
    while ((rc = sr_line_stream_next(&s, &line, &n)) > 0) {
        if (mode == 3)
            continue;
        if (!piece(t, len, &at, &plen)) {
            fprintf(stderr, "a line past the text's last (mode %d)\n", mode);
            abort();
        }
        if (rc == SR_LINE_OK && (plen > (size_t)max_line || n != plen || memcmp(line, t + at, n))) {
            fprintf(stderr, "line differs from the text (mode %d, %zu vs %zu bytes)\n", mode, n,
                    plen);
            abort();
        }
        if (rc == SR_LINE_LONG && plen <= (size_t)max_line) {
            fprintf(stderr, "a %zu-byte line called long (limit %lld)\n", plen,
                    (long long)max_line);
            abort();
        }
        at += plen + 1;
    }
    if (mode == 0 || mode == 1) {
        if (rc != 0 || piece(t, len, &at, &plen)) {
            fprintf(stderr, "ended early (mode %d, rc %d)\n", mode, rc);
            abort();
        }
    }
    if (mode == 2 && rc != SR_ERR_DATA) {
        fprintf(stderr, "a truncated gzip file read to rc %d, not SR_ERR_DATA\n", rc);
        abort();
    }
    sr_line_stream_close(&s);
done:
    free(buf);
    free(gz);
    close(fd);
    return 0;
}
