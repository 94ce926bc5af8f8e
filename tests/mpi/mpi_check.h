/*
 * The MPI test programs' check: CHECK(cond, fmt, ...) counts a check, and on
 * a failure counts it and prints "[rank r] file:line: FAIL: message" to
 * stderr; the program ends by printing `checks` and `failures` (the scripts
 * read " 0 failed"). Each program includes this once.
 */
#ifndef SHARDREC_TESTS_MPI_CHECK_H
#define SHARDREC_TESTS_MPI_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "shardrec/error.h"

static long long checks, failures;

#define CHECK(cond, ...) check_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

static void check_at(int ok, const char *file, int line, const char *fmt, ...)
{
    checks++;
    if (ok)
        return;
    failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] %s:%d: FAIL: ", sr_get_rank(), file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#endif
