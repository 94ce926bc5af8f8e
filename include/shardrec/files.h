/*
 * The files a command names, checked before they are opened:
 *
 *   - an output (--metrics, --trace, --save-weights, `convert -o`, ...) never
 *     names the same file as an input (--data, --eval-data, --init-weights,
 *     --plan, --config, `convert`'s inputs) or as another output: opening it
 *     for writing would destroy the input, or two writers would share it.
 *     Files are compared by identity, not by name: an existing file by device
 *     and inode (through symbolic links; a hard link is the same file), a file
 *     that does not exist yet by its folder's real path and its name;
 *   - an input read whole (--config, --plan) is a regular file of bounded
 *     size, read without blocking: /dev/zero or an endless pipe cannot grow
 *     memory without limit, a FIFO without a writer cannot hang the command;
 *   - a streamed input (--data) is a regular file, for the same reason;
 *   - the JSON text of a config or plan holds no NUL byte, raw or escaped as
 *     \u0000 (which would cut a name short, silently).
 *
 * Every check returns SR_OK or an error status with a one-line message that
 * names the flag and the path and gives a hint. Nothing here aborts.
 */
#ifndef SHARDREC_FILES_H
#define SHARDREC_FILES_H

#include <stddef.h>

/* One file a command names: the flag that named it ("--data", "-o"), its path
 * and whether the command writes it. */
struct sr_named_file {
    const char *flag;
    const char *path;
    int is_output;
};

/* SR_ERR_INVALID_ARG when an output is the same file as an input or another
 * output (identity as above; only regular files, and names of files not yet
 * there, can clash: a device or pipe such as /dev/stdout is never destroyed
 * by a write). The message names both flags and the file. Entries with a NULL
 * or empty path are skipped. Touches nothing. */
int sr_files_check_distinct(const struct sr_named_file *files, int n);

/* Read the regular file at `path` whole into a new NUL-terminated buffer
 * (*text, freed with sr_free; *len bytes before the NUL). `what` names it in
 * messages ("--plan", "config"). SR_ERR_IO when it cannot be opened or read,
 * is not a regular file (a directory, device, FIFO or socket: opened without
 * blocking, then refused), or holds more than max_bytes. */
int sr_file_read_small(const char *path, const char *what, size_t max_bytes, char **text,
                       size_t *len);

/* SR_ERR_IO when `path` exists and is not a regular file (a directory,
 * device, FIFO or socket), which a reader would block on or read without
 * end; SR_OK otherwise (a missing file is left to the open, whose message
 * says so). `what` may be NULL. */
int sr_file_check_regular(const char *path, const char *what);

/* Map the regular file at `path` read-only (shared) into *map, *bytes:
 * SR_ERR_IO naming the path when it is not a regular file or cannot be
 * opened or mapped, SR_ERR_DATA when it is empty. sr_file_unmap undoes it. */
int sr_file_map(const char *path, const void **map, size_t *bytes);
void sr_file_unmap(const void *map, size_t bytes); /* NULL is a no-op */

/* SR_ERR_INVALID_ARG naming `where` and the byte offset when the `len` bytes
 * of JSON text hold a NUL byte, or a string holds the escape \u0000. */
int sr_json_check_nul(const char *text, size_t len, const char *where);

#endif
