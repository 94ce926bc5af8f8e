/*
 * Lines of a text file, read through one large caller-owned buffer, so files
 * larger than memory stream in constant memory and lines are handed out in
 * place (no copy). gzip files (detected by their magic) are inflated through
 * zlib, loaded at run time (libz.so.1) so that the build needs no zlib headers
 * or link flags; without it a gzip file is a clear SR_ERR_UNSUPPORTED.
 *
 * gzip input is strict, so a damaged file never reads as a shorter one: every
 * member of the file is read (`cat a.gz b.gz` is valid gzip), and a file that
 * ends inside a member (truncated, whether at a line boundary or not), a
 * corrupt member, or bytes after the last member that are not a gzip member
 * (trailing garbage) are SR_ERR_DATA naming the file, before the lines that
 * the damage could have cut short are handed out.
 */
#ifndef SR_DATA_LINE_STREAM_H
#define SR_DATA_LINE_STREAM_H

#include <stddef.h>
#include <stdint.h>

struct sr_line_stream {
    const char *path;   /* borrowed, for messages */
    int fd;             /* the file (compressed or not), -1 when closed */
    void *z;            /* inflate state (zlib's z_stream) of a gzip file, or NULL */
    unsigned char *zin; /* (SR_LINE_ZIN_BYTES) compressed bytes, owned, gzip only */
    int zin_eof;        /* the compressed file is read to its end */
    int member_done;    /* the last member ended; another may follow */
    int member_magic;   /* the current member starts with gzip's magic (member 0 does) */
    int64_t member;     /* 0-based index of the gzip member being inflated */
    int64_t zin_read;   /* compressed bytes read from the file */
    int64_t file_read;  /* bytes read from the file (compressed ones for gzip): progress */
    char *buf;          /* (cap) borrowed */
    size_t cap, beg, end;
    int eof, discarding;
    int64_t max_line; /* bytes before the '\n' ('\r' included) */
    int64_t line_no;  /* 1-based number of the line last returned */
};

#define SR_LINE_ZIN_BYTES ((size_t)256 << 10)

#define SR_LINE_OK   1 /* a line */
#define SR_LINE_LONG 2 /* a line longer than max_line: counted and skipped over */

/* Open path for reading lines into buf (cap >= max_line + 2 bytes). SR_ERR_IO if
 * it cannot be opened, SR_ERR_UNSUPPORTED for gzip without libz.so.1. Allocates
 * (gzip only); sr_line_stream_next does not. */
int sr_line_stream_open(struct sr_line_stream *s, const char *path, char *buf, size_t cap,
                        int64_t max_line);

/* The next line (without '\n') in *line, *len: SR_LINE_OK, SR_LINE_LONG (the
 * line is consumed; *len is what was seen of it), 0 at end of file, SR_ERR_IO
 * (a read failed) or SR_ERR_DATA (a truncated or corrupt gzip file).
 * The line stays valid until the next call. A last line without '\n' counts. */
int sr_line_stream_next(struct sr_line_stream *s, const char **line, size_t *len);

void sr_line_stream_close(struct sr_line_stream *s); /* safe on a closed stream */

#endif
