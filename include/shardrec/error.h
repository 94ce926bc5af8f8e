/*
 * Errors: the three tools of shardrec.
 *
 *  1. SR_ASSERT / SR_ABORT for broken invariants and device or communication
 *     failures: print "[rank r] file:line: message" and abort. SR_CHECK_GEN
 *     builds backend checks (SR_MPI_CHECK, later SR_CUDA_CHECK, SR_NCCL_CHECK).
 *  2. enum sr_status returned where the cause is the user's input (flags,
 *     config, data files, plans). The message is kept per thread: sr_error_set
 *     records it, sr_error_message reads it. Messages say what, where and a hint.
 *  3. Cleanup through named labels in the caller; no macro hides a return.
 */
#ifndef SHARDREC_ERROR_H
#define SHARDREC_ERROR_H

#include <stdarg.h>

enum sr_status {
    SR_OK = 0,
    SR_ERR_INVALID_ARG = -1, /* a flag, config value or shape is wrong */
    SR_ERR_IO = -2,          /* a file cannot be opened, read or written */
    SR_ERR_DATA = -3,        /* a data record, id or tensor is malformed */
    SR_ERR_UNSUPPORTED = -4, /* valid request that this build does not provide */
    SR_ERR_NUMERIC = -5,     /* NaN or Inf where a finite value is required */
    SR_ERR_OOM = -6,         /* a user-sized allocation cannot be satisfied */
    SR_ERR_WRITE = -7,       /* a result could not be written once the run had started
                                (a full disk): the run failed, the command was right */
};

/* Record the message for the current thread and return `status` (so callers may
 * write `return sr_error_set(SR_ERR_DATA, "...")`). The arguments may include
 * sr_error_message() to wrap the message below with context
 * (`sr_error_set(rc, "%s (entry %d)", sr_error_message(), i)`): the new
 * message is formatted before the old one is replaced. At most 1023 bytes. */
int sr_error_set(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded on this thread ("" if none). */
const char *sr_error_message(void);
/* Clear the message of this thread. */
void sr_error_clear(void);
/* Human name of a status ("invalid argument", ...). */
const char *sr_status_name(int status);

/* The rank printed in messages; set once by the comm layer (default 0). */
void sr_set_rank(int rank);
int sr_get_rank(void);

void sr_abort_at(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define SR_ABORT(...) sr_abort_at(__FILE__, __LINE__, __VA_ARGS__)
#define SR_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            sr_abort_at(__FILE__, __LINE__, "assertion failed: %s", #cond);                        \
    } while (0)

/* One generic check for a backend call that returns `ok` on success; `errstr`
 * maps the returned code to text. */
#define SR_CHECK_GEN(stmt, type, ok, errstr)                                                       \
    do {                                                                                           \
        type sr_check_rc_ = (stmt);                                                                \
        if (sr_check_rc_ != (ok))                                                                  \
            sr_abort_at(__FILE__, __LINE__, "%s failed: %s", #stmt, errstr(sr_check_rc_));         \
    } while (0)

#endif
