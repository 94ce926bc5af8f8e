/*
 * Atomic file writes: every file shardrec writes whole (safetensors weights,
 * `convert` output, and every later writer) goes through this module, so a
 * planted link, a full disk or a killed process never costs the user a file.
 *
 *   open    a temporary file in the target's own directory, named
 *           ".BASE.sr-tmp-XXXXXXXXXXXXXXXX" (BASE: the target's name, cut to 64
 *           bytes; X: 64 bits from getrandom), created with
 *           O_CREAT | O_EXCL | O_NOFOLLOW: never an existing file, never
 *           through a symbolic link, never a predictable name;
 *   write   through af->f (a stdio stream; seeking is allowed);
 *   commit  flush, fsync, close, rename over the target, fsync the directory.
 *
 * The target itself is never opened: rename replaces whatever name is there.
 * A symbolic link at the target is therefore replaced by a regular file and
 * the file it pointed to stays untouched. On any failure (or abort) the
 * temporary file is removed and the old target, if any, is left as it was.
 * A process ended by SIGINT, SIGTERM or SIGHUP while a write is open removes
 * its temporary files before it dies (a handler is installed on the first
 * open, for each of these signals still at its default action); SIGKILL or a
 * power cut can leave at worst one ".*.sr-tmp-*" file beside the target, never
 * a damaged target.
 *
 * sr_output_path_check checks an output path at start-up, before any
 * work, with the hint that fits (a directory, a missing folder, no permission).
 */
#ifndef SHARDREC_ATOMIC_FILE_H
#define SHARDREC_ATOMIC_FILE_H

#include <stdio.h>

struct sr_atomic_file {
    FILE *f;    /* the temporary file, opened for writing ("w+b") */
    char *path; /* target (owned) */
    char *tmp;  /* temporary file's path (owned) */
    int slot;   /* index in the table the signal handler cleans, or -1 */
};

/* Create the temporary file for `path` (rules above). SR_ERR_IO naming the
 * path and the reason with a hint (the directory is missing or not writable,
 * the target is a directory); *af is then zeroed and needs no abort. */
int sr_atomic_file_open(struct sr_atomic_file *af, const char *path);

/* Finish: flush, fsync and rename the temporary file over the target, then
 * fsync the directory. Releases af whatever the outcome; on error (SR_ERR_IO,
 * naming the target) the temporary file is removed and the target untouched. */
int sr_atomic_file_commit(struct sr_atomic_file *af);

/* As sr_atomic_file_commit, for a temporary file that several processes
 * (the ranks of --save-weights on a sharded model) wrote through their own
 * descriptors, opened by af->tmp, each of them fsyncing its writes and
 * running the fault-injection hook (sr_fault_write) itself: this one does
 * not run the hook again. */
int sr_atomic_file_commit_written(struct sr_atomic_file *af);

/* Give up: close and remove the temporary file, release af. A zeroed or
 * already released af is a no-op. */
void sr_atomic_file_abort(struct sr_atomic_file *af);

/* What an output path is for: a file written whole by this module, or a
 * stream (--metrics) opened with fopen, which may also be a device or a pipe. */
enum sr_output_kind {
    SR_OUTPUT_ATOMIC = 0,
    SR_OUTPUT_STREAM = 1,
};

/* Whether `path` can be written: SR_OK, or SR_ERR_IO with a message that
 * starts with `what` (a flag such as "--save-weights"; may be NULL) and the
 * path, and says which of these it is, with a hint: the path is empty or a
 * directory (or a link to one); its folder does not exist or is not a folder;
 * there is no permission to create files in the folder, or it is on a
 * read-only file system; for SR_OUTPUT_ATOMIC, an existing target that is
 * neither a regular file nor a symbolic link (a device, pipe or socket, which
 * a rename would replace). For a stream that exists, it must be writable.
 * Creates nothing. Call it at start-up, before any work. */
int sr_output_path_check(const char *path, const char *what, enum sr_output_kind kind);

#endif
