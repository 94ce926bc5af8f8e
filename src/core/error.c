/*
 * Error messages (kept per thread) and the abort path for broken invariants.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"

static _Thread_local char error_message[1024];
static int current_rank;

/* Formatted into a scratch buffer first and copied after: an argument may be
 * sr_error_message() itself (a caller adding context to the message below it),
 * and vsnprintf into the buffer it reads from is undefined (it printed "" ). */
int sr_error_set(int status, const char *fmt, ...)
{
    char msg[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(error_message, msg, sizeof msg);
    return status;
}

const char *sr_error_message(void)
{
    return error_message;
}

void sr_error_clear(void)
{
    error_message[0] = '\0';
}

const char *sr_status_name(int status)
{
    switch (status) {
    case SR_OK:
        return "ok";
    case SR_ERR_INVALID_ARG:
        return "invalid argument";
    case SR_ERR_IO:
        return "i/o error";
    case SR_ERR_DATA:
        return "bad data";
    case SR_ERR_UNSUPPORTED:
        return "unsupported";
    case SR_ERR_NUMERIC:
        return "numeric error";
    case SR_ERR_OOM:
        return "out of memory";
    case SR_ERR_WRITE:
        return "write failed";
    }
    return "unknown error";
}

void sr_set_rank(int rank)
{
    current_rank = rank;
}

int sr_get_rank(void)
{
    return current_rank;
}

void sr_abort_at(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] %s:%d: %s\n", current_rank, file, line, msg);
    fflush(stderr);
    abort();
}
